"""The methods' diagrams, drawn with matplotlib from the paper's symbols (no image files): what a
chapter's derivation shows before the equations.  Each function returns a figure; the chapters
glue it with a numbered caption."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

METHOD = "#c0392b"  # the paper's method: one strong colour, as in the chapters' plots
MUTED = "0.62"
FONT = 10.5  # points: 10 px at the book's 688-px column for a figure 10 inches wide (≥ 9 px)


def box(ax, x, y, text, w=1.0, h=0.5, color="black", fill="white", style="-", size=FONT):
    """A labelled box centred at (x, y)."""
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                fc=fill, ec=color, lw=1.3, ls=style))  # fmt: skip
    ax.text(x, y, text, ha="center", va="center", fontsize=size, color=color if color != MUTED else "0.35")


def arrow(ax, a, b, color="black", lw=1.2, style="-|>", ls="-"):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle=style, mutation_scale=11, color=color, lw=lw, ls=ls,
                                 shrinkA=0, shrinkB=0))  # fmt: skip


def fedmn(arch=(3, 3, 3), on=None):
    """FedMN (§II): the routing hypernetwork reads a client's images and labels (eq. 9), scores
    every path, draws the client's decision V_m (eqs. 5, 10); the modular network runs only the
    blocks the chosen paths reach (eq. 13), and the client exchanges only those (§II-E).  ``on``:
    the paths of the example decision, as (layer, to, from) with the output as the last layer
    (default: one block of the last layer left without an input, so inactive)."""
    n = list(arch)
    if on is None:
        on = {(1, 0, 0), (1, 0, 1), (1, 1, 1), (1, 1, 2), (2, 0, 0), (2, 0, 1), (2, 2, 1), (3, 0, 0), (3, 0, 2)}
    fig, ax = plt.subplots(figsize=(10, 4.2))
    ax.set(xlim=(-0.3, 12.4), ylim=(-1.25, 4.3), aspect="equal")
    ax.axis("off")

    # the router (eqs. 9, 10, 5): left
    ax.text(2.1, 4.05, "routing hypernetwork (shared, averaged)", ha="center", fontsize=FONT, weight="bold")
    box(ax, 0.55, 3.25, "$\\mathbf{x}_i$", w=0.8, h=0.5)
    box(ax, 0.55, 2.35, "$y_i$", w=0.8, h=0.5)
    box(ax, 1.85, 3.25, "$\\phi^x$", w=0.9, h=0.5)
    box(ax, 1.85, 2.35, "$\\phi^y$", w=0.9, h=0.5)
    arrow(ax, (0.95, 3.25), (1.4, 3.25))
    arrow(ax, (0.95, 2.35), (1.4, 2.35))
    box(ax, 3.45, 2.8, "normalise\n$[\\phi^x, \\phi^y]$, $h$", w=1.7, h=0.95)
    arrow(ax, (2.3, 3.2), (2.6, 2.95))
    arrow(ax, (2.3, 2.4), (2.6, 2.65))
    box(ax, 3.45, 1.45, "mean over $i$: $\\hat{\\mathcal{G}}_m$\n$\\boldsymbol{\\Pi}_m = \\sigma(\\hat{\\mathcal{G}}_m)$",
        w=2.5, h=0.95)  # fmt: skip
    arrow(ax, (3.45, 2.32), (3.45, 1.93))
    box(ax, 3.45, 0.1, "$v_i$ at temperature $\\tau$ (eq. 5)\ndecision $\\mathbf{V}_m$", w=2.9, h=0.95, color=METHOD)
    arrow(ax, (3.45, 0.97), (3.45, 0.58))
    ax.text(0.55, 1.45, "client $m$'s\ntraining data\n(eq. 9)", ha="center", va="center", fontsize=FONT,
            color="0.35")  # fmt: skip
    arrow(ax, (4.92, 0.1), (5.8, 0.1), color=METHOD, lw=1.6)
    ax.text(5.45, 0.32, "switches\nthe paths", ha="center", va="bottom", fontsize=FONT, color=METHOD)

    # the modular network (eq. 13): right
    ax.text(9.15, 4.05, "modular network (blocks shared by all clients)", ha="center", fontsize=FONT, weight="bold")
    xs = [6.3 + 1.75 * li for li in range(len(n) + 1)]
    ys = {li: [3.2 - k * (2.4 / max(1, m - 1)) for k in range(m)] if m > 1 else [2.0]
          for li, m in enumerate(n + [1])}  # fmt: skip
    reached = {(0, k) for k in range(n[0])}
    for li in range(1, len(n) + 1):  # which nodes an active path reaches
        for j in range(len(ys[li])):
            if any((li, j, k) in on and (li - 1, k) in reached for k in range(len(ys[li - 1]))):
                reached.add((li, j))
    for li in range(1, len(n) + 1):
        for j, yj in enumerate(ys[li]):
            for k, yk in enumerate(ys[li - 1]):
                live = (li, j, k) in on and (li - 1, k) in reached
                ax.plot([xs[li - 1] + 0.4, xs[li] - 0.4], [yk, yj], color=METHOD if live else "0.82",
                        lw=2.0 if live else 0.9, zorder=0)  # fmt: skip
    labels = {0: "encoder", len(n): "output"}
    for li, yl in ys.items():
        for k, yk in enumerate(yl):
            active = (li, k) in reached
            name = labels.get(li, "block")
            box(ax, xs[li], yk, name if li in labels else f"{name} {k + 1}", w=0.85 if li < len(n) else 0.8, h=0.46,
                color="black" if active else MUTED, style="-" if active else "--", size=FONT)  # fmt: skip
    ax.text(xs[0], -0.2, "layer 1:\n$n_1$ encoders", ha="center", va="top", fontsize=FONT)
    ax.text((xs[1] + xs[len(n)]) / 2 + 0.4, -0.2, "layers $2 \\ldots L$: blocks (dashed: no path in, not sent)",
            ha="center", va="top", fontsize=FONT)  # fmt: skip
    ax.text((xs[1] + xs[len(n)]) / 2 + 0.4, -0.75,
            "a block's input (eq. 13): $\\mathbf{u}_j = \\sum_k C_{jk}\\,\\tilde{\\mathbf{u}}_k \\,/\\, \\sum_k C_{jk}$",
            ha="center", va="top", fontsize=FONT)  # fmt: skip
    fig.tight_layout(pad=0.2)
    return fig
