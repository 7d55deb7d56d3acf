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


def show_rows(rows, n: int = 8, title=None, show: bool = True):
    """A grid of images: one row per (label, images) pair of ``rows``, its first ``n`` images; shown
    (``show``) or returned as the figure."""
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
    if not show:
        return fig
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


# ----------------------------------------------------------------------------- the page's main path

MAIN_COLUMNS = {  # side_by_side's column -> the header of the main table (the paper's FEMNIST column)
    "paper FEMNIST micro_acc": "micro acc, paper (FEMNIST)",
    "ours micro_acc": "micro acc, ours",
    "paper FEMNIST macro_acc": "macro acc, paper (FEMNIST)",
    "ours macro_acc": "macro acc, ours",
    "ours ARI": "ARI, ours",
}
HUMAN = {  # every column of side_by_side -> a header a reader can read (the folded table)
    "paper FEMNIST micro_acc": "micro acc, paper (FEMNIST)",
    "ours micro_acc": "micro acc, ours",
    "seeds": "seeds",
    "still improving": "still improving",
    "paper FedCelebA micro_acc": "micro acc, paper (FedCelebA)",
    "paper FEMNIST macro_acc": "macro acc, paper (FEMNIST)",
    "ours macro_acc": "macro acc, ours",
    "paper FedCelebA macro_acc": "macro acc, paper (FedCelebA)",
    "ours authors' micro_acc (best centre, all clients)": "the authors' micro acc, ours (best centre, all clients)",
    "ours ARI": "ARI, ours",
    "paper FEMNIST micro_f1": "micro-F1, paper (FEMNIST)",
    "ours micro_f1": "micro-F1, ours",
    "paper FedCelebA micro_f1": "micro-F1, paper (FedCelebA)",
    "paper FEMNIST macro_f1": "macro-F1, paper (FEMNIST)",
    "ours macro_f1": "macro-F1, ours",
    "paper FedCelebA macro_f1": "macro-F1, paper (FedCelebA)",
    "paper's row": "the paper's row",
}


def readable(table: pd.DataFrame, columns=None, rising: bool = True, short: bool = False) -> pd.DataFrame:
    """A :func:`side_by_side` table as the page shows it: the arm as a first column ("method"), the
    columns ``columns`` (all by default) under the headers of :data:`HUMAN`, the paper's numbers with
    one decimal, "—" for a missing value, no index.  With ``rising`` an arm still improving at its
    last round is marked "↗" after its name (the table's caption says so); with ``short`` a cell keeps
    its mean ± CI only, not the note on the seeds every arm ran that follows it in parentheses."""
    cols = list(table.columns if columns is None else columns)
    out = table[cols].copy()
    if short:
        out = out.apply(lambda col: col.map(lambda v: v.split(" (")[0] if isinstance(v, str) and "±" in v else v))
    for c in cols:
        if c.startswith("paper ") and c != "paper's row":
            out[c] = [f"{v:.1f}" if isinstance(v, (int, float)) and v == v else "—" for v in out[c]]
    out = out.astype(object).where(out.notna() & (out.astype(str) != ""), "—")
    names = [f"{a} ↗" if rising and table.loc[a, "still improving"] == "yes" else a for a in table.index]
    out.insert(0, "method", names)
    return out.rename(columns=HUMAN).reset_index(drop=True)


def styled(table: pd.DataFrame):
    """A table without its index (what a page shows), as a pandas Styler."""
    return table.style.hide(axis="index")


def claim_lines(rows) -> str:
    """Claims-table rows (:func:`~pflkit.verdicts.claim_row`) as the Markdown bullets that follow a
    table or figure: each claim, then its word with flags, our difference and its notes."""
    from ..verdicts import in_words

    return "\n".join(f"* {r['claim']}: **{in_words(r)}**." for r in rows)


def ring_layout(xy, cxy, labels, radius: float) -> np.ndarray:
    """Where Figure 4 draws each client: on a ring of ``radius`` around its cluster's centre ``cxy``,
    the members of a cluster evenly spaced (a lone member on the ring's top).  The clients' own
    points ``xy`` sit on their centres (they restart from it every round), so drawn where they are
    they hide each other; the ring shows how many there are and which group each comes from."""
    xy, cxy, labels = np.asarray(xy, float), np.asarray(cxy, float), np.asarray(labels)
    out = np.empty_like(xy)
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        angles = np.pi / 2 + 2 * np.pi * np.arange(len(members)) / len(members)
        out[members] = cxy[c] + radius * np.c_[np.cos(angles), np.sin(angles)]
    return out


def spread_ratio(xy, cxy, labels) -> float:
    """The largest distance of a client's point ``xy`` from its cluster's centre, over the smallest
    distance between two centres (``cxy``): how small the clusters are against their separation."""
    xy, cxy, labels = np.asarray(xy, float), np.asarray(cxy, float), np.asarray(labels)
    within = np.linalg.norm(xy - cxy[labels], axis=1).max()
    d = np.linalg.norm(cxy[:, None] - cxy[None], axis=2)
    return float(within / d[np.triu_indices(len(cxy), 1)].min()) if len(cxy) > 1 else float("nan")


def figure4(xy, cxy, labels, groups, names, ari: pd.DataFrame, strong: str, var=None):
    """Figure 4: (top) each client on a ring around its centre (:func:`ring_layout`), coloured and
    shaped by its true group ``groups`` (named by ``names``), the centres on the local models' first
    two principal components (``var``: their shares of the variance); (bottom) the ARI of the clusters
    against the true groups per round (``ari``: columns arm, round, ARI, seed), the arm ``strong`` in
    one strong colour, the other K muted, the band the range over seeds.  Returns the figure."""
    xy, cxy, labels, groups = np.asarray(xy, float), np.asarray(cxy, float), np.asarray(labels), np.asarray(groups)
    span = np.ptp(cxy, axis=0).max() if len(cxy) > 1 else 1.0
    pos = ring_layout(xy, cxy, labels, 0.09 * span)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.8, 7.6), gridspec_kw={"height_ratios": [1.35, 1]})
    colours, markers = plt.get_cmap("tab10").colors, "osD^v<>p"
    for c, (x, y) in enumerate(cxy):
        n = int((labels == c).sum())
        top.add_patch(plt.Circle((x, y), 0.15 * span, fill=False, color="0.35", lw=1.2))
        top.annotate(f"centre {c} ({n} client{'s' * (n != 1)})", (x, y - 0.15 * span), ha="center", va="top",
                     fontsize=10, xytext=(0, -3), textcoords="offset points")  # fmt: skip
    for g, name in enumerate(names):
        m = groups == g
        top.scatter(pos[m, 0], pos[m, 1], s=70, color=colours[g], marker=markers[g], edgecolor="white",
                    lw=0.6, label=f"{name} ({int(m.sum())})", zorder=3)  # fmt: skip
    top.set_aspect("equal", adjustable="datalim")
    pc = [f"PC {i + 1}" + (f" ({100 * var[i]:.0f} %)" if var is not None else "") for i in range(2)]
    top.set_xlabel(pc[0], fontsize=10)
    top.set_ylabel(pc[1], fontsize=10)
    top.tick_params(labelsize=9)
    top.margins(0.12)
    top.legend(title="true group", fontsize=9, title_fontsize=10, loc="center left", bbox_to_anchor=(1.0, 0.5),
               frameon=False)  # fmt: skip
    others = [a for a in dict.fromkeys(ari["arm"]) if a != strong]
    for i, arm in enumerate([*others, strong]):
        d = ari[ari["arm"] == arm].groupby("round").ARI
        colour = "C0" if arm == strong else str(0.45 + 0.2 * i)
        bottom.plot(d.mean().index, d.mean().values, color=colour, lw=2.2 if arm == strong else 1.2, label=arm)
        bottom.fill_between(d.min().index, d.min().values, d.max().values, color=colour, alpha=0.15, lw=0)
    bottom.set(ylim=(-0.2, 1.05))
    bottom.set_xlabel("round (0: the initial k-means)", fontsize=10)
    bottom.set_ylabel("ARI, clusters vs true groups", fontsize=10)
    bottom.tick_params(labelsize=9)
    bottom.legend(fontsize=9, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.tight_layout()
    return fig


def full_tables(acc: pd.DataFrame, f1: pd.DataFrame, seeds: str) -> list[tuple[str, pd.DataFrame]]:
    """The tables of the notes, each narrow enough for the page's column: (title, table) pairs from
    :func:`side_by_side`'s accuracy table ``acc`` (with the authors' evaluation) and F1 table ``f1``,
    every value of both with human headers (:func:`readable`); ``seeds`` names the pilot seeds."""
    ci = f"ours: mean ± 95 % CI over {seeds} (more where a claim's plan ran more)"
    authors = "ours authors' micro_acc (best centre, all clients)"
    parts = [
        (f"Micro accuracy (%), the paper's two tables and ours; {ci}",
         acc, ["paper FEMNIST micro_acc", "paper FedCelebA micro_acc", "ours micro_acc", authors]),
        (f"Macro accuracy (%) and the ARI; {ci}", acc,
         ["paper FEMNIST macro_acc", "paper FedCelebA macro_acc", "ours macro_acc", "ours ARI"]),
        (f"Micro-F1 (%: the test-size-weighted mean of the per-client macro-F1); {ci}", f1,
         ["paper FEMNIST micro_f1", "paper FedCelebA micro_f1", "ours micro_f1"]),
        (f"Macro-F1 (%); {ci}", f1, ["paper FEMNIST macro_f1", "paper FedCelebA macro_f1", "ours macro_f1"]),
        ("The seeds each arm ran, whether it was still improving, and the paper's row it sits in", acc,
         ["seeds", "still improving", "paper's row"]),
    ]  # fmt: skip
    return [(title, readable(t, [c for c in cols if c in t.columns], rising=False)) for title, t, cols in parts]


def setup_rows(*, clients, groups, alpha, train, test, rounds, steps, batch, momentum, init_steps, ks, baselines,
               seeds, cap) -> list[tuple[str, str, str]]:  # fmt: skip
    """The rows of the chapter's setup card (:func:`pflkit.pages.setup_card`): what every run is, ours
    beside the paper's (its Tables 1–3 and §6.1)."""
    from ..pages import prose

    images = f"{train:,} training and {test:,} test images" if train else "all images"
    return [
        ("Data", f"Fashion-MNIST ({images}); {len(groups)} latent groups by input transform ({prose(groups)}), "
         f"Dirichlet({alpha:g}) label mixes", "FEMNIST and FedCelebA (LEAF), split by user"),
        ("Clients", f"{clients}, {clients // len(groups)} a group, every one in every round",
         "every LEAF user, every one in every round"),
        ("Model", "LeNet", "a CNN"),
        ("Training", f"{rounds} rounds × {steps} local steps (batch {batch}, SGD, momentum {momentum:g}); "
         f"FeSEM's initial local models: {init_steps} steps", "100 iterations; lr 0.003 and 5 epochs (FEMNIST)"),
        ("Methods", f"FeSEM(K), K = {prose(list(ks))}; {baselines} baselines; every learning rate chosen on validation",
         "FeSEM(K), K = 2, 3, 4; 10 baselines"),
        ("Seeds", f"{seeds}, up to {cap} where a claim's plan asks", "not stated"),
        ("Changed", "grouped Fashion-MNIST (known clusters), a LeNet, and FedAvg also given FeSEM's warm-up (the "
         "headline's reference)", ""),
    ]  # fmt: skip
