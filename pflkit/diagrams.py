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


def boundary(ax, y, x0, x1, above="server", below="client", at="left"):
    """The server/client boundary: what crosses it is what the protocol transmits."""
    ax.plot([x0, x1], [y, y], color="0.5", lw=1.0, ls=(0, (5, 4)))
    x, ha = (x0, "left") if at == "left" else (x1, "right")
    ax.text(x, y + 0.12, above, ha=ha, va="bottom", fontsize=FONT, color="0.35", style="italic")
    ax.text(x, y - 0.12, below, ha=ha, va="top", fontsize=FONT, color="0.35", style="italic")


def canvas(width, height, xlim, ylim):
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set(xlim=xlim, ylim=ylim, aspect="equal")
    ax.axis("off")
    return fig, ax


def pfedhn():
    """pFedHN (§3, Algorithm 1): the server's hypernetwork h(·; φ) turns client i's embedding v_i
    into its model θ_i; the client trains K steps and returns Δθ_i; the server moves φ and v_i along
    (∇θ_i)ᵀ Δθ_i.  Only |θ_i| numbers cross each way, however large h is."""
    fig, ax = canvas(10, 3.9, (-0.2, 12.2), (-0.2, 4.6))
    boundary(ax, 2.05, -0.1, 12.1, "server", "client $i$")
    for k, (x, name) in enumerate([(0.6, "$v_1$"), (1.5, "$v_i$"), (2.4, "$\\cdots$"), (3.3, "$v_n$")]):
        box(ax, x, 3.6, name, w=0.75, h=0.5, color=METHOD if k == 1 else "black")
    ax.text(1.95, 4.15, "client embeddings $V$ (trained)", ha="center", fontsize=FONT)
    box(ax, 6.0, 3.6, "hypernetwork $h(v_i;\\varphi)$", w=3.0, h=0.6, color=METHOD)
    arrow(ax, (3.7, 3.6), (4.45, 3.6), color=METHOD)
    ax.text(4.07, 3.3, "$v_i$", ha="center", va="top", fontsize=FONT, color=METHOD)
    box(ax, 9.9, 3.6, "$\\theta_i = h(v_i;\\varphi)$", w=2.2, h=0.6)
    arrow(ax, (7.55, 3.6), (8.75, 3.6))
    box(ax, 9.9, 0.7, "$K$ local steps: $\\theta_i \\to \\tilde\\theta_i$", w=3.0, h=0.6)
    arrow(ax, (10.4, 3.25), (10.4, 1.05))
    ax.text(10.55, 2.35, "$\\theta_i$ down\n($|\\theta_i|$ numbers)", ha="left", va="center", fontsize=FONT)
    arrow(ax, (8.35, 0.75), (6.3, 2.6), color=METHOD)
    ax.text(5.6, 1.3, "$\\Delta\\theta_i = \\tilde\\theta_i - \\theta_i$ up", ha="center", fontsize=FONT, color=METHOD)
    ax.text(4.3, 2.8, "$\\Delta\\varphi = (\\nabla_\\varphi\\theta_i)^\\top\\Delta\\theta_i$,  "
            "$\\Delta v_i = (\\nabla_{v_i}\\theta_i)^\\top\\Delta\\theta_i$", ha="center", fontsize=FONT)  # fmt: skip
    fig.tight_layout(pad=0.2)
    return fig


def pfedmb(branches=3):
    """pFedMB (eqs. 1–4): every layer holds B branches shared by all clients; client i mixes them
    with its own weights α on the simplex, W_l = Σ_b α_b W_b, and keeps α private."""
    fig, ax = canvas(10, 3.6, (-0.2, 12.2), (-0.5, 4.0))
    box(ax, 0.8, 1.7, "input\n$\\mathbf{x}$", w=1.2, h=0.9)
    ys = [3.0 - k * 1.3 for k in range(branches)]
    for k, y in enumerate(ys):
        box(ax, 3.4, y, f"branch $W_{{{k + 1},l}}$", w=1.9, h=0.6)
        arrow(ax, (1.4, 1.7), (2.45, y))
        box(ax, 5.9, y, f"$\\alpha_{{{k + 1},l}}$", w=0.8, h=0.5, color=METHOD)
        arrow(ax, (4.35, y), (5.5, y))
        arrow(ax, (6.3, y), (7.6, 1.7), color=METHOD)
    box(ax, 8.6, 1.7, "$\\sum_b \\alpha_{b,l}\\,(W_{b,l} * \\mathbf{x})$\n$= W_l * \\mathbf{x}$ (eq. 2)", w=2.1, h=1.0)
    ax.text(3.4, -0.35, "shared: every branch is\ntrained and sent (eq. 4)", ha="center", va="top", fontsize=FONT)
    ax.text(5.9, -0.35, "client $i$'s own:\n$\\alpha \\geq 0$, $\\sum_b \\alpha_b = 1$\n(eq. 3, never sent)",
            ha="center", va="top", fontsize=FONT, color=METHOD)  # fmt: skip
    ax.text(10.85, 1.7, "one plain\nlayer of the\noriginal size\nat inference", ha="center", va="center",
            fontsize=FONT)  # fmt: skip
    fig.tight_layout(pad=0.2)
    return fig


def fesem():
    """FeSEM (eqs. 5–9): the server keeps K centres of the clients' models; the E-step assigns each
    client to its nearest centre, the M-step moves each centre to the mean of its members, and each
    client trains from its centre with a proximal pull towards it."""
    import numpy as np

    fig, ax = canvas(10, 3.8, (-0.3, 12.3), (-0.6, 4.2))
    rng = np.random.default_rng(3)
    centres = np.array([[1.4, 2.9], [3.6, 0.9], [4.6, 3.0]])
    colours = ["#1f77b4", "#2ca02c", "#9467bd"]
    for k, (cx, cy) in enumerate(centres):
        pts = np.array([cx, cy]) + rng.normal(0, 0.3, (5, 2)).clip(-0.6, 0.6)
        for x, y in pts:
            ax.plot([x, cx], [y, cy], color=colours[k], lw=0.8, alpha=0.6)
        ax.scatter(pts[:, 0], pts[:, 1], s=28, color=colours[k], zorder=3)
        ax.scatter([cx], [cy], s=190, marker="*", color=METHOD, edgecolor="black", lw=0.6, zorder=4)
        ax.text(cx + 0.25, cy + 0.3, f"$\\tilde W^{{({k + 1})}}$", fontsize=FONT)
    ax.text(2.9, -0.45, "clients' models $W_i$ (dots) and $K$ centres (stars)", ha="center", fontsize=FONT)
    steps = [("E-step (eq. 8)", "each client joins its nearest\ncentre: $r_i^{(k)} = 1$"),
             ("M-step (eq. 9)", "each centre moves to the\nmean of its members"),
             ("local step (eq. 7)", "client $i$ trains from its centre,\n"
              "$+\\frac{\\lambda}{m}\\mathrm{Dist}(W_i, \\tilde W^{(k)})$")]  # fmt: skip
    for j, (title, text) in enumerate(steps):
        y = 3.4 - 1.35 * j
        box(ax, 9.3, y, "", w=5.6, h=1.05, color=METHOD if j < 2 else "black")
        ax.text(6.7, y + 0.22, title, ha="left", va="center", fontsize=FONT, weight="bold")
        ax.text(6.7, y - 0.2, text, ha="left", va="center", fontsize=FONT)
        if j:
            arrow(ax, (9.3, y + 1.35 - 0.53), (9.3, y + 0.53))
    fig.tight_layout(pad=0.2)
    return fig


def ktpfl(clients=("LeNet", "AlexNet", "ResNet", "ShuffleNet")):
    """KT-pFL (eqs. 2, 6, 7): clients of different architectures send their soft predictions on the
    round's public batch; the server mixes them with the knowledge-coefficient matrix c into each
    client's own teacher and updates c by gradient descent (eq. 7), pulled towards 1/N by ρ."""
    import numpy as np

    n = len(clients)
    fig, ax = canvas(10, 3.9, (-0.2, 12.2), (-0.3, 4.4))
    boundary(ax, 1.75, -0.1, 12.1, "server", "clients", at="right")
    xs = [1.0 + 2.0 * k for k in range(n)]
    for k, (x, name) in enumerate(zip(xs, clients)):
        box(ax, x, 0.55, f"client {k + 1}\n{name}", w=1.6, h=0.8, color=METHOD if k == 1 else "black")
        arrow(ax, (x - 0.3, 0.97), (x - 0.3, 2.7))
        arrow(ax, (x + 0.3, 2.7), (x + 0.3, 0.97), color=METHOD if k == 1 else "black")
    ax.text(xs[0] - 0.4, 2.2, "$s(\\mathbf{w}^m, \\xi_r)$\nup", ha="right", va="center", fontsize=FONT)
    ax.text(xs[1] + 0.45, 2.2, "teacher $\\sum_m c_{mn}\\, s_m$ down", ha="left", va="center", fontsize=FONT,
            color=METHOD)  # fmt: skip
    box(ax, (xs[0] + xs[-1]) / 2, 3.1, "soft predictions on the round's public batch $\\xi_r$", w=xs[-1] - xs[0] + 1.8,
        h=0.7)  # fmt: skip
    rng = np.random.default_rng(0)
    c = np.eye(n) * 0.55 + rng.uniform(0.05, 0.2, (n, n))
    c /= c.sum(0, keepdims=True)
    x0, y0, cell = 8.55, 2.3, 0.4
    for i in range(n):
        for j in range(n):
            ax.add_patch(plt.Rectangle((x0 + j * cell, y0 + (n - 1 - i) * cell), cell, cell, fc=plt.cm.Reds(c[i, j]),
                                       ec="white"))  # fmt: skip
    ax.text(x0 + n * cell / 2, y0 + n * cell + 0.1, "$\\mathbf{c}$ ($N \\times N$)", ha="center", va="bottom",
            fontsize=FONT)  # fmt: skip
    arrow(ax, (xs[-1] + 0.95, 3.1), (x0 - 0.08, 3.1))
    ax.text(x0 + n * cell + 0.15, y0 + n * cell / 2, "eq. 7: $\\mathbf{c}$\ndescends the\nKL; $\\rho$ pulls\nit to $1/N$",
            ha="left", va="center", fontsize=FONT)  # fmt: skip
    fig.tight_layout(pad=0.2)
    return fig
