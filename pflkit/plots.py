"""Figures shared by the chapters (seaborn / matplotlib)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
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


def partition_report(part, ds, ax=None, title: str | None = None):
    """A partition's client x class heatmap (training counts) and a table of split sizes."""
    counts = part.class_counts(ds.y_train.cpu().numpy())
    short = [c.split("/")[0] for c in ds.classes] if ds.n_classes <= 20 else None
    partition_heatmap(counts, short, ax=ax, title=title or f"{part.protocol}, {part.n_clients} clients")
    sizes = pd.DataFrame(
        {
            "train": [len(c.train) for c in part.clients],
            "val": [len(c.val) for c in part.clients],
            "test": [len(c.test) for c in part.clients],
            "classes": (counts > 0).sum(1),
            "novel": [i in set(part.novel) for i in range(part.n_clients)],
        }
    )
    sizes.index.name = "client"
    return sizes


def arm_palette(arms, palette: str = "tab10") -> dict:
    """One colour per arm, the same in every panel of a figure (``hue_order`` and ``palette`` for
    seaborn): the arms in their first-seen order, coloured from ``palette``."""
    arms = list(dict.fromkeys(arms))
    return dict(zip(arms, sns.color_palette(palette, max(len(arms), 1))))
