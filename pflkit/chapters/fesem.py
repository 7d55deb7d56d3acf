"""The FeSEM chapter's probes and measurements: which cluster each client is in and what the
clustered methods' shared models score (the authors' evaluation), how far the clusters follow the
true groups of a grouped federation (adjusted Rand index, moves between rounds), the tables set
beside the paper's Tables 2 and 3, and the chapter's CPU estimate."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score

from ..experiments import arms_for, claim_row, fmt_interval, paper_vs_ours
from ..grouped import DEFAULT_TRANSFORMS
from ..methods.fesem import authors_micro_acc, distance_keys, kmeans, points

AVG_HS = "FedAvg + head start"  # the headline's reference: FedAvg after FeSEM's warm-up
PAPER_ROW = {"Local": "NoFed", "CFL": "FedCluster", "IFCA": "HypoCluster(3)"}  # our arm -> the paper's row
ONE_MODEL = {"FedSGD", "FedAvg", "FedDist", "FedDist+WS", "FedProx"}  # one shared model serves every client
OURS = {"micro_acc": "pooled_acc", "macro_acc": "mean_acc", "micro_f1": "micro_f1", "macro_f1": "macro_f1"}
DATASETS = {"Table 2": "FEMNIST", "Table 3": "FedCelebA"}  # the paper's table -> its dataset


# ----------------------------------------------------------------------------- the federation


def true_groups(fed) -> np.ndarray:
    """The true (latent) group of every client of a grouped federation."""
    return np.array(fed.partition.params["groups"])


def client_images(fed, cid: int, n: int = 8) -> torch.Tensor:
    """Client ``cid``'s first ``n`` training images (uint8, N × 1 × 28 × 28)."""
    return fed.ds.x_train[fed.partition.clients[cid].train[:n]]


def show_rows(rows, n: int = 8, title=None):
    """A grid of images: one row per (label, images) pair of ``rows``, its first ``n`` images."""
    fig, axes = plt.subplots(len(rows), n, figsize=(1.1 * n, 1.2 * len(rows)), squeeze=False)
    for r, (label, imgs) in enumerate(rows):
        for c in range(n):
            ax = axes[r, c]
            if c < len(imgs):
                ax.imshow(imgs[c, 0].cpu().numpy(), cmap="gray", vmin=0, vmax=255)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=9)
    if title:
        fig.suptitle(title, y=1.0)
    plt.show()


# ----------------------------------------------------------------------------- the arms


def method_configs(
    cfg, warmup: int, *, fesem_options: dict, groups: int, baselines, fedprox_mu: float, avg_hs_options: dict
) -> dict:
    """{label: config} of every method the chapter runs on ``cfg`` (its rounds and evaluation): FeSEM
    at K = ``groups`` with ``fesem_options``, the kit's ``baselines`` (CFL with ``warmup`` rounds
    without splits, FedProx at μ = ``fedprox_mu``, IFCA with ``groups`` models; ``feddist+ws``: FedDist
    size-weighted), and FedAvg + head start (FeSEM with ``avg_hs_options``)."""
    out = {"FeSEM": dataclasses.replace(cfg, method="fesem", options={**fesem_options, "centers": groups})}
    out |= arms_for([m for m in baselines if m != "feddist+ws"], cfg, options={
        "cfl": {"warmup": warmup}, "fedprox": {"mu": fedprox_mu}, "ifca": {"clusters": groups}})  # fmt: skip
    if "feddist+ws" in baselines:
        out["FedDist+WS"] = dataclasses.replace(cfg, method="feddist", options={"size_weighted": True})
    out[AVG_HS] = dataclasses.replace(cfg, method="fesem", options=avg_hs_options)
    return out


def estimate_s(arms: dict, seeds, *, per_round: dict, setup: float) -> float:
    """CPU seconds of ``arms`` × ``seeds``: rounds × the CPU seconds per round of the method's cost
    class (``per_round``: by method, ``"other"`` for the rest), plus ``setup`` for every FeSEM run that
    trains initial local models."""
    s = 0.0
    for cfg in arms.values():
        warm = cfg.method == "fesem" and (cfg.options.get("em", "paper") == "paper" or cfg.options.get("head_start"))
        cost = per_round[cfg.method if cfg.method in per_round else "other"]
        s += len(seeds) * (cfg.rounds * cost + (setup if warm else 0.0))
    return s


# ----------------------------------------------------------------------------- probes


def clusters_of(server, clients) -> np.ndarray | None:
    """The cluster of every client for clustered methods (FeSEM, CFL: the server's assignment;
    IFCA: each client's last pick), None for the others."""
    if hasattr(server, "assignment"):  # FeSEM, CFL
        return np.asarray(server.assignment)
    if getattr(clients[0], "cluster", None) is not None:  # IFCA: each client's last pick
        return np.array([c.cluster for c in clients])
    return None


def models_of(server) -> list | None:
    """The shared models of a clustered method: FeSEM's centres, CFL's cluster models, IFCA's K models."""
    for name in ("centers", "models", "thetas"):
        if hasattr(server, name):
            return list(getattr(server, name))
    return None


def fesem_probe(rnd, row, server, clients, groups: int = len(DEFAULT_TRANSFORMS)):
    """At every evaluated round of a clustered method: each client's cluster and the number of shared
    models (CFL: also its split criterion's two norms per cluster).  At the last round: the authors'
    evaluation (every shared model on all clients' test images pooled, the best of them).  For FeSEM
    also: at round 0 with ``groups`` centres, a k-means of the initial local models over the last layer
    only; at the last round, the local models and centres on the local models' first two principal
    components, the intra-cluster distance and the training loss.  None for one-model methods."""
    labels = clusters_of(server, clients)
    if labels is None:
        return None
    out = {"labels": labels.tolist(), "models": len(models_of(server))}
    if hasattr(server, "norms"):  # CFL: (mean update norm vs ε₁, largest client update norm vs ε₂) per cluster
        out["norms"] = [[round(a, 4), round(b, 4)] for a, b in server.norms]
    if rnd == server.cfg.rounds:  # the authors' code's "micro acc": the best model on all clients' test images
        out["authors"] = authors_micro_acc(SimpleNamespace(centers=models_of(server)), clients)
    if not hasattr(server, "centers"):
        return out
    if rnd == 0 and server.opt["em"] == "paper" and len(server.centers) == groups:
        # the initial local models, clustered over the last layer only (the authors' Dist) for comparison
        last = points(server.local, distance_keys(server.model, "last"))
        out["kmeans_last"] = kmeans(last, groups, server.cfg.seed).tolist()
    if rnd == server.cfg.rounds:
        keys = distance_keys(server.model, "all")
        w, c = points(server.local, keys).cpu().numpy(), points(server.centers, keys).cpu().numpy()
        pca = PCA(n_components=2).fit(w)
        out |= {"pca_local": np.round(pca.transform(w), 4).tolist(), "pca_centres": np.round(pca.transform(c), 4).tolist(),
                "pca_var": np.round(pca.explained_variance_ratio_, 4).tolist(),
                "intra": server.intra_distance(), "train_loss": row["train_loss"]}  # fmt: skip
    return out


def margin_probe(rnd, row, server, clients):
    """At every evaluated round of FeSEM: each client's cluster and its margin (the distance of its
    local model to the second-nearest centre over the distance to its own).  None for other methods."""
    if not hasattr(server, "centers"):
        return None
    return {"labels": np.asarray(server.assignment).tolist(), "margins": np.round(server.margins(), 4).tolist()}


# ----------------------------------------------------------------------------- clusters against groups


def trace_of(result, arm: str, group_of) -> list[dict]:
    """Per seed the arm ran and per probed round: the ARI of its clusters against the true groups
    (``group_of(seed)``) and the number of clients that changed cluster since the previous probed
    round (NaN at the first)."""
    rows = []
    for s in [s for s in result.seeds if (arm, s) in result.records]:  # every seed the arm ran
        prev = None
        for rnd, p in sorted(result.probes(arm, s).items()):
            lab = np.array(p["labels"])
            moved = np.nan if prev is None else int((lab != prev).sum())
            rows.append(
                {"arm": arm, "seed": s, "round": rnd, "ARI": adjusted_rand_score(group_of(s), lab), "moved": moved}
            )
            prev = lab
    return rows


def final_ari(result, arm: str, group_of, *, seeds, rounds: int) -> pd.Series:
    """Per seed: the ARI of the arm's clusters at round ``rounds`` against the true groups."""
    return pd.Series({s: adjusted_rand_score(group_of(s), result.probes(arm, s)[rounds]["labels"]) for s in seeds})


def ari_at(trace: pd.DataFrame, arm: str, rnd: int) -> pd.Series:
    """Per seed, from a :func:`trace_of` table: the arm's ARI at round ``rnd``."""
    return trace[(trace.arm == arm) & (trace["round"] == rnd)].set_index("seed").ARI.sort_index()


def label_mix_ari(fed, labels, k: int, seed: int) -> float:
    """The ARI between the clusters ``labels`` and a k-means (``k`` clusters, ``seed``) of the clients'
    label mixes (class proportions of their training images): whether clusters follow the labels."""
    c = fed.partition.class_counts(fed.ds.y_train.numpy()).astype(float)
    mix = kmeans(torch.from_numpy(c / c.sum(1, keepdims=True)), k, seed)
    return adjusted_rand_score(mix, labels)


def whole_groups(labels, groups) -> int:
    """How many true groups have all their clients in one cluster of ``labels`` (0 when every
    client is in one cluster)."""
    a = np.array(labels)
    comp = pd.crosstab(a, groups)
    return int(((comp > 0).sum(axis=0) == 1).sum()) if len(set(a)) > 1 else 0


def margin_at(result, arm: str, seed: int, k: int) -> float:
    """The median margin over the clients at the ``k``-th probed round of run (arm, seed) (0: after
    the setup), from :func:`margin_probe`."""
    return float(np.median(sorted(result.probes(arm, seed).items())[k][1]["margins"]))


def k_margins(scans: dict, groups: int) -> pd.Series | None:
    """Per seed of §5.2's scans ({seed: table by K}): the validation accuracy (points) of K = ``groups``
    minus the best other K's; None when the scan lacks K = ``groups`` or has no other K."""
    acc = pd.concat(scans, names=["seed", "K"]).val_mean_acc.unstack("K") * 100
    return (
        acc[groups] - acc.drop(columns=groups).max(axis=1) if groups in acc.columns and len(acc.columns) > 1 else None
    )


# ----------------------------------------------------------------------------- the paper's tables


def authors_acc(result, arm: str, *, seeds, rounds: int, one_model=ONE_MODEL) -> pd.Series:
    """Per seed: the authors' code's "micro acc" (%) at round ``rounds``, the best shared model on all
    clients' test images pooled (from :func:`fesem_probe`); for one-model methods (``one_model``) micro
    accuracy itself; no value for NoFed (Local), which has no shared model."""
    vals = {}
    for s in seeds:
        p = result.probes(arm, s).get(rounds) or {}
        if "authors" in p:
            vals[s] = 100 * p["authors"]["max"]
        elif arm in one_model:
            vals[s] = result.values(arm, "pooled_acc")[s]
    return pd.Series(vals, dtype=float)


def paper_value(paper: pd.DataFrame, tab: str, row: str, metric: str = "micro_acc") -> float:
    """The paper's value of ``metric`` for its row ``row`` of table ``tab``; NaN where it has none."""
    p = paper[(paper.table == tab) & (paper.metric == metric)].set_index("method")
    return float(p.value[row]) if row in p.index else np.nan


def paper_column(paper: pd.DataFrame, tab: str, metric: str, arms) -> dict:
    """{arm: the paper's value} of ``metric`` in table ``tab``, through :data:`PAPER_ROW`."""
    return {a: paper_value(paper, tab, PAPER_ROW.get(a, a), metric) for a in arms}


def paper_diff(paper: pd.DataFrame, a: str, b: str, metric: str = "micro_acc") -> str:
    """The paper's a − b of ``metric`` (a, b: its row names) in both tables, as text."""
    return ", ".join(f"{DATASETS[tab]} {paper_value(paper, tab, a, metric) - paper_value(paper, tab, b, metric):+.1f}"
                     for tab in DATASETS)  # fmt: skip


def fesem_best_count(paper: pd.DataFrame) -> str:
    """In how many of the paper's columns (2 tables × 4 metrics) a FeSEM(K) row is the best (FeSEM-MA
    left out): "n of N"."""
    columns = paper[paper.method != "FeSEM-MA(3)"].groupby(["table", "metric"])
    n = sum(p.set_index("method").value.idxmax().startswith("FeSEM(") for _, p in columns)
    return f"{n} of {columns.ngroups}"


def side_by_side(result, paper: pd.DataFrame, metrics, arms, *, authors=None, ari=None) -> pd.DataFrame:
    """Ours (mean ± 95 % CI over seeds) beside the paper's Table 2 (FEMNIST) and Table 3 (FedCelebA)
    for every paper metric of ``metrics``, one row per arm of ``arms``.  With ``authors`` (arm -> per
    seed values, :func:`authors_acc`) and ``ari`` (arm -> ARI): columns for the authors' evaluation and
    the ARI of the clusters."""
    parts = []
    for i, metric in enumerate(metrics):
        t = paper_vs_ours(result, paper_column(paper, "Table 2", metric, arms), metric=OURS[metric],
                          label=f"paper FEMNIST {metric}")  # fmt: skip
        t[f"paper FedCelebA {metric}"] = pd.Series(paper_column(paper, "Table 3", metric, arms))
        t = t.rename(columns={f"ours {OURS[metric]}": f"ours {metric}"})
        parts.append(t if i == 0 else t.drop(columns=["seeds", "still improving"]))
    out = pd.concat(parts, axis=1).loc[arms]
    if authors is not None:
        out["ours authors' micro_acc (best centre, all clients)"] = [
            fmt_interval(authors(a)) if len(authors(a)) else "—" for a in arms]  # fmt: skip
    if ari is not None:
        out["ours ARI"] = [f"{ari[a]:.2f}" if a in ari.index else "" for a in arms]
    out["paper's row"] = [PAPER_ROW.get(a, a) if PAPER_ROW.get(a, a) in set(paper.method) else "" for a in arms]
    return out


# ----------------------------------------------------------------------------- prose


def verdict_row(text: str, v, paper: str = "", ours=None, digits: int = 2, **row) -> dict:
    """A claims-table row (:func:`~pflkit.verdicts.claim_row`) whose numbers show two decimals (ARI)."""
    return claim_row(text, v, paper, ours=ours, digits=digits, **row)


def per_seed(d) -> str:
    """A per-seed series as text: "seed 0 0.12, seed 1 0.34"."""
    return ", ".join(f"seed {s} {v:.2f}" for s, v in d.items())
