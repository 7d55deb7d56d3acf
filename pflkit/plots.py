"""Figures shared by the chapters (seaborn / matplotlib)."""

from __future__ import annotations

import matplotlib.colors as mcolors
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


METHOD_REDS = ["#d62728", "#8b1a1a", "#f4a3a3", "#5c0f0f"]  # the paper's method and its variants: one strong colour


def arm_palette(arms, palette: str = "tab10", method: str = "") -> dict:
    """One colour per arm, the same in every panel of a figure (``hue_order`` and ``palette`` for
    seaborn): the arms in their first-seen order, coloured from ``palette``; with ``method`` (the paper's), the
    arms named after it take :data:`METHOD_REDS` and the others ``palette`` without its red."""
    arms = list(dict.fromkeys(arms))
    ours = [a for a in arms if method and a.startswith(method)]
    rest = [a for a in arms if a not in ours]
    colours = [c for c in sns.color_palette(palette, max(len(rest) + 1, 10)) if not (method and _reddish(c))]
    reds = [mcolors.to_rgb(METHOD_REDS[i % len(METHOD_REDS)]) for i in range(len(ours))]
    return dict(zip(ours, reds)) | dict(zip(rest, colours))


def _reddish(rgb) -> bool:
    """A colour a reader would take for the paper's red."""
    r, g, b = rgb
    return r > 0.6 and g < 0.35 and b < 0.35


VERDICT_COLOURS = {  # one colour per verdict word, in every chapter's plot of its claims
    "reproduces": "#2a9d8f", "contradicted": "#e76f51", "no difference": "#6c757d", "inconclusive": "#e9c46a",
    "underpowered": "#b08968", "not tested": "#adb5bd",
}  # fmt: skip


def paper_number(text: str) -> float | None:
    """The paper's difference where its text starts with one signed number ("+1.7 vs LG-FedAvg" → 1.7),
    else None ("3–4 layers best", "78 % denoising", "FeSEM(3) − FedAvg: +2.1")."""
    import re

    m = re.match(r"\s*([+\-−]\d+(?:\.\d+)?)(?![\d.–-])(?!\s*[%°])", text or "")  # a signed difference, nothing else
    return float(m.group(1).replace("−", "-")) if m else None


def short_label(text: str, chars: int) -> str:
    """``text`` cut to ``chars`` characters by an ellipsis in its middle, so that claims which start
    alike ("under concept shift FedMN beats …") keep the ends that tell them apart."""
    if len(text) <= chars:
        return text
    head = (chars - 1) // 2
    return text[:head].rstrip() + "…" + text[len(text) - (chars - 1 - head) :].lstrip()


def two_line_labels(texts: list[str], chars: int) -> list[str]:
    """Each text wrapped at word boundaries onto at most two lines of ``chars`` characters; a longer text keeps
    its first line whole and its rest cut by an ellipsis in the middle (:func:`short_label`; rests alike are
    told apart by their first lines)."""
    import textwrap

    lines = [textwrap.wrap(t, chars) or [""] for t in texts]
    rests = [short_label(" ".join(w[1:]), chars) for w in lines]
    return [w[0] + ("\n" + r if len(w) > 1 else "") for w, r in zip(lines, rests, strict=True)]


def claims_plot(rows, resolution: float = 1.0, width: float = 6.8, label_chars: int = 44):
    """Dot-and-interval plot of a chapter's claims in points: each claim's paired difference a − b
    with its 95 % interval, coloured by its verdict word, the band ± ``resolution`` where "no
    difference" applies, and the paper's difference (a black cross) where the paper gives one
    number.  Claims in other units, or on fewer seeds than an interval needs, are left out, and the
    title says how many.  A claim's label takes two lines at most (:func:`two_line_labels`).
    Returns the figure, or None when no claim qualifies."""
    every = [r for r in rows if r.get("_v") is not None]
    rows = [r for r in every if r["_v"].unit == "points" and r["_v"].lo == r["_v"].lo]
    if not rows:
        return None
    height = 0.38 * len(rows) + 1.1  # inches: a row per claim (two lines of its label) and room for the legend
    fig, ax = plt.subplots(figsize=(width, height))
    ax.axvspan(-resolution, resolution, color="0.92", zorder=0, label=f"± {resolution:g} point (no difference)")
    ax.axvline(0, color="0.5", lw=0.8, zorder=1)
    crosses = 0
    for y, r in enumerate(rows):
        v = r["_v"]
        colour = VERDICT_COLOURS.get(r["verdict"], "0.3")
        ax.errorbar(v.mean, y, xerr=[[v.mean - v.lo], [v.hi - v.mean]], fmt="o", color=colour, ms=5, capsize=2)
        if (p := paper_number(r.get("paper", ""))) is not None:
            ax.plot(p, y, "x", color="black", ms=6)
            crosses += 1
    ax.set(
        yticks=range(len(rows)),
        ylim=(len(rows) - 0.5, -0.5),
        xlabel="a − b (points): ours (dot, 95 % CI)" + (", the paper (×)" if crosses else ""),
    )
    ax.set_yticklabels(two_line_labels([r["claim"] for r in rows], label_chars), fontsize=7.5, linespacing=1.0)
    if len(rows) < len(every):
        ax.set_title(f"{len(rows)} of the {len(every)} claims: the others are in other units than points "
                     "or have too few seeds for an interval", fontsize=7.5)  # fmt: skip
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, label=w) for w, c in VERDICT_COLOURS.items()
               if any(r["verdict"] == w for r in rows)]  # fmt: skip
    if crosses:
        handles.append(plt.Line2D([], [], marker="x", ls="", color="black", label="the paper"))
    ax.legend(handles=handles, fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.9 / height),
              ncol=4, frameon=False)  # fmt: skip
    fig.tight_layout()
    return fig


def claims_figure(rows, resolution: float = 1.0, **kw):
    """:func:`claims_plot` for a page to glue and show as a numbered figure; where no claim qualifies
    (a profile with too few seeds), a line that says so stands in its place."""
    from IPython.display import Markdown

    fig = claims_plot(rows, resolution, **kw)
    return fig if fig is not None else Markdown("*No claim in points has an interval at this profile.*")


# --- legibility at the book's column ---------------------------------------------------------------
COLUMN_PX = 688  # the book's text column at a 1280-px window: a wider figure is shown scaled down to it
MIN_TEXT_PX = 9.0  # the smallest text a reader should meet in a figure, as rendered
TEXT_KEY = "MinTextPx"  # the PNG text chunk that carries a figure's smallest text size (its own pixels)


def min_text_px(fig) -> float:
    """The smallest visible, non-empty text of ``fig`` (titles, labels, ticks, legends, annotations), in
    pixels of the figure drawn at its own dpi; ``inf`` for a figure without text."""
    from matplotlib.text import Text

    fig.canvas.draw()  # tick labels exist once drawn
    box = fig.bbox
    sizes = [
        t.get_fontsize()
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.get_window_extent().overlaps(box)
    ]
    return min(sizes) * fig.dpi / 72 if sizes else float("inf")


def shown_text_px(fig, column: int = COLUMN_PX) -> float:
    """:func:`min_text_px` as a reader sees it: a figure wider than the column is shown scaled to it."""
    return min_text_px(fig) * min(1.0, column / (fig.get_figwidth() * fig.dpi))


def png_with_text_size(fig) -> bytes:
    """The figure as the notebook shows it (PNG, tight box), its smallest text size written in the PNG's
    ``MinTextPx`` text chunk, where the browser check reads it and scales it to the page."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", metadata={TEXT_KEY: f"{min_text_px(fig):.2f}"})
    return buf.getvalue()


def _install_png_formatter() -> None:
    """Under IPython (a chapter executed by Jupyter or papermill), figures are shown as
    :func:`png_with_text_size` writes them; elsewhere nothing happens."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is None:
        return
    from matplotlib.figure import Figure

    plt.switch_backend(plt.get_backend())  # the inline backend registers its own formatter when loaded: load it first
    ip.display_formatter.formatters["image/png"].for_type(Figure, png_with_text_size)


_install_png_formatter()
