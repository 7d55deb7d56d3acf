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
