"""Figures shared by the chapters (seaborn / matplotlib)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns


def partition_heatmap(counts: np.ndarray, classes=None, ax=None, title: str = "", annot: bool = False):
    """Client x class heatmap of sample counts (a partition report)."""
    ax = ax or plt.gca()
    sns.heatmap(
        counts, ax=ax, cmap="viridis", cbar=True, annot=annot, fmt="d",
        xticklabels=classes if classes is not None else "auto", yticklabels=5,
    )  # fmt: skip
    ax.set_xlabel("class")
    ax.set_ylabel("client")
    ax.set_title(title)
    return ax


def accuracy_curves(df, x="round", y="mean_acc", hue="method", col=None, **kw):
    """Accuracy against round, one line per method (a seaborn FacetGrid)."""
    g = sns.relplot(data=df, x=x, y=y, hue=hue, col=col, kind="line", marker="o", height=3.2, aspect=1.3, **kw)
    g.set_axis_labels(x, y.replace("_", " "))
    return g
