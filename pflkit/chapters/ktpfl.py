"""The KT-pFL chapter's probes and measurements: the knowledge coefficients c, whether the
distillation channel acts (each client's self-weight, the distillation-to-private gradient
ratio), the accuracies of each architecture's clients, and the clients' label similarity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..methods import get_method
from ..methods.ktpfl import diagnostics
from ..partitions import total_variation
from ..verdicts import mechanism, verdict

SOFT = ("ktpfl", "fedmd", "sim-pfd", "topk-pfd")  # the soft-prediction methods: λ and T apply to them


def c_probe(rnd, row, server, clients):
    """KT-pFL's knowledge-coefficient matrix after the last round (both variants)."""
    if server.cfg.method not in ("ktpfl", "ktpfl-params") or rnd != server.cfg.rounds:
        return None
    return {"c": server.c.tolist()}


def kt_probe(rnd, row, server, clients):
    """The distillation channel at every evaluated round of a soft-prediction method: each client's
    self-weight in its teacher and its distillation-to-private gradient ratio
    (:func:`pflkit.methods.ktpfl.diagnostics`); after KT-pFL's last round, its c."""
    if server.cfg.method not in SOFT:
        return None
    out = diagnostics(server, clients) or {}
    if server.cfg.method == "ktpfl" and rnd == server.cfg.rounds:
        out["c"] = server.c.tolist()
    return out or None


def c_moved(result, arm: str, seed: int) -> float:
    """How far c ended from its start 1/N: the largest |c_mn − 1/N| after the run's last round."""
    c = np.array(result.probes(arm, seed)[result[arm, seed]["config"]["rounds"]]["c"])
    return float(np.abs(c - 1 / len(c)).max())


def c_mechanism(text: str, result, arm: str, seeds, threshold: float, **row) -> dict:
    """The mechanism check of the claims about what c learns: c leaves its start 1/N in ``arm``'s runs.
    Per seed, the largest |c_mn − 1/N| less ``threshold`` (c "moved" beyond it: the acting side > 0),
    judged by the book's rule against uniform c (FedMD's mixture); ``row``: :func:`~pflkit.verdicts.claim_row`'s
    options."""
    far = [c_moved(result, arm, s) for s in seeds if (arm, s) in result.records]
    seeds = f"{len(far)} seed{'s' if len(far) != 1 else ''}"
    ours = f"largest |c − 1/N| {np.mean(far):.3f} (mean over {seeds}; above {threshold:g} on {sum(f > threshold for f in far)})"
    v = verdict([f - threshold for f in far], unit=f"(|c − 1/N| − {threshold:g})")
    return mechanism(text, v, control="uniform c = 1/N (FedMD's mixture)", ours=ours, **row)


def by_architecture(result) -> pd.DataFrame:
    """Each run's last-round client test accuracy (%), averaged within each architecture's clients:
    one row per arm, seed and architecture."""
    rows = []
    for (arm, seed), r in result.records.items():
        acc, cfg = r["final"].get("per_client_acc"), r["config"]
        if acc is None:  # a diverged run has no per-client accuracies
            continue
        arch = get_method(cfg["method"]).client_arch
        rows += [dict(arm=arm, seed=seed, architecture=arch(cid, len(acc), cfg["options"]), acc=100 * a)
                 for cid, a in enumerate(acc)]  # fmt: skip
    return pd.DataFrame(rows).groupby(["arm", "seed", "architecture"], sort=False).acc.mean().reset_index()


def label_similarity(fed) -> tuple[np.ndarray, np.ndarray]:
    """The clients' pairwise label similarity, 1 − the total variation between their label mixes,
    and the mixes themselves (clients × classes)."""
    counts = fed.partition.class_counts(fed.ds.y_train.numpy())
    p = counts / counts.sum(1, keepdims=True)
    n = len(p)
    return np.array([[1 - total_variation(p[i], p[j]) for j in range(n)] for i in range(n)]), p


def multiply_adds(model: nn.Module, shape=(1, 28, 28)) -> int:
    """Multiply-adds of one forward pass on one image, over the convolutions and linear layers."""
    total = 0

    def count(m, _, out):
        nonlocal total
        if isinstance(m, nn.Conv2d):
            total += out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]
        elif isinstance(m, nn.Linear):
            total += m.in_features * m.out_features

    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, *shape))
    for h in hooks:
        h.remove()
    return total


def round_mb(result, arm: str, n_clients: int) -> pd.DataFrame:
    """Figure 5's ledger of ``arm``, per seed: the MB a client uploads (``up``) and downloads
    (``down``) in a round, from the run's byte counts over its ``n_clients`` clients and the rounds
    it ran (an arm that ran on past the table's budget has more)."""
    f = result.finals()
    f = f[f.arm == arm].set_index("seed")
    per = n_clients * f.rounds
    return pd.DataFrame({"up": f.MB_up / per, "down": f.MB_down / per})


def soft_vs_parameters(soft: pd.DataFrame, params: pd.DataFrame, batch_mb: float) -> dict[str, pd.Series]:
    """Per seed, −log(soft-prediction bytes / parameter bytes) of a client's round (> 0: soft predictions
    move fewer), two ways: as run (the predictions up, the teacher and the public batch's indices
    down) and with the round's public batch sent as images (``batch_mb``) instead of its indices, as
    when the server holds the public set (the teacher is as large as the upload)."""
    both = params.up + params.down
    return {"as run": np.log(both / (soft.up + soft.down)).dropna(),
            "batch sent": np.log(both / (2 * soft.up + batch_mb)).dropna()}  # fmt: skip


# --- what the page shows: tables, figures and sentences built from the runs ---------------------------

STRONG = "#c0392b"  # the paper's method, in every curve plot of the chapter
COLUMNS = {  # paper_vs_ours's columns -> the headers the page shows
    "paper Fashion_MNIST": "paper",
    "ours mean_acc": "ours",
    "seeds": "seeds",
    "still improving": "still improving",
    "ours pooled, at the round of best mean val": "ours, pooled (best-val round)",
}


def accuracy_view(table: pd.DataFrame) -> pd.DataFrame:
    """A table of :func:`pflkit.verdicts.paper_vs_ours` (or several, concatenated) with the page's headers:
    "paper", "ours" (mean ± 95 % CI), "seeds", "still improving"; the row labels named "method"; the
    paper's missing numbers "—", the others rounded to the paper's two digits."""
    out = table.rename(columns=COLUMNS).rename_axis(index=lambda n: "method" if n == "arm" else n)
    if "paper" in out:
        out["paper"] = [("—" if v != v else f"{v:.2f}") if isinstance(v, float) else v for v in out["paper"]]
    return out


def muted_palette(arms, strong: str = "KT-pFL") -> dict:
    """One colour per arm: ``strong`` (and arms named after it, such as "KT-pFL (parameters)") in the
    chapter's strong red, every other arm in a muted colour of its own."""
    import seaborn as sns

    others = [a for a in arms if not str(a).startswith(strong)]
    muted = sns.color_palette("muted", max(len(others), 1))
    pal = {a: sns.desaturate(c, 0.45) for a, c in zip(others, muted)}
    return pal | {a: STRONG for a in arms if str(a).startswith(strong)}


def curves(
    hist: pd.DataFrame, panel: str, *, strong: str = "KT-pFL", width: float = 7.0, ylabel: str = "", titles=None
):
    """Accuracy by round, one panel per value of ``panel`` (``hist``: round, mean_acc, arm, seed and the panel
    column), the mean over seeds; ``strong`` drawn thick in the strong colour, the rest thin and muted; one
    legend under the panels.  Returns the figure (text at least 9 pt)."""
    import matplotlib.pyplot as plt

    keys = list(dict.fromkeys(hist[panel]))
    arms = list(dict.fromkeys(hist["arm"]))
    pal = muted_palette(arms, strong)
    with plt.rc_context({"font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "legend.fontsize": 9.5}):
        fig, axes = plt.subplots(1, len(keys), figsize=(width, 3.3), sharey=True, squeeze=False)
        for ax, key in zip(axes[0], keys):
            mean = hist[hist[panel] == key].groupby(["arm", "round"], sort=False).mean_acc.mean()
            for arm in arms:
                if arm in mean.index.get_level_values(0):
                    s = mean[arm]
                    bold = str(arm).startswith(strong)
                    ax.plot(
                        s.index, s.values, color=pal[arm], lw=2.4 if bold else 1.2, zorder=3 if bold else 2, label=arm
                    )
            ax.set(title=(titles or {}).get(key, f"{panel} = {key}" if panel != "split" else str(key)), xlabel="round")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel(ylabel or "mean client test accuracy (%)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        for ax in axes[0][1:]:  # arms that only a later panel has
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, frameon=False)
        fig.tight_layout()
    return fig


def claim_lines(rows: list[dict]) -> str:
    """Claims as the bullets under a table: each claim, its word with its flags, our difference and
    interval (:func:`pflkit.verdicts.say`); the notes stay in the claims table's fold."""
    from ..verdicts import say

    return "\n".join(f"* {r['claim']}: {say(r)}." for r in rows)


def split_claims(table: pd.DataFrame, rows: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A claims table (:func:`pflkit.verdicts.claims_table`, indexed by claim) cut in two: the paper's claims,
    and our own checks (:func:`pflkit.verdicts.is_own`: mechanisms, controls, questions we added), each in the
    table's order."""
    from ..verdicts import is_own

    own = {r["claim"] for r in rows if is_own(r)}
    mine = table.index.isin(list(own))
    return table[~mine], table[mine]
