"""The FedMN chapter's probes and measurements: what the router decides, whether a client's own
decision serves it better than another group's (the swap test), and how far the decisions follow
the clients' groups."""

from __future__ import annotations

import dataclasses
import functools
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics import adjusted_rand_score

from ..engine import Federation
from ..errors import PflkitError
from ..methods import get_method
from ..methods.fedmn import build_net, decision_swap_accuracy, oracle_decisions, pretrain_rounds
from ..models import build_model
from ..verdicts import seeds_text


def shape_of(cfg) -> tuple[tuple, int]:
    """A config's dataset's image shape and class count (Fashion-MNIST's: (1, 28, 28) and 10)."""
    from ..federation import dataset

    ds = dataset(cfg.dataset)
    return tuple(ds.input_shape), ds.n_classes


def modular_net(cfg, shape=None, classes: int | None = None):
    """FedMN's network for a config, as its clients build it (no run): for parameter counts; ``shape``
    and ``classes`` default to the config's dataset's (:func:`shape_of`)."""
    if shape is None or classes is None:
        shape, classes = shape_of(cfg)
    return build_net(build_model(cfg.model, shape, classes), cfg, get_method("fedmn").resolve_options(cfg.options))


def dominant_group(fed) -> tuple[np.ndarray, np.ndarray]:
    """On FedEM's label-cluster split: each client's label cluster (the group of classes holding most
    of its training images) and its share of images in every cluster (clients × clusters)."""
    counts = fed.partition.class_counts(fed.ds.y_train.numpy())
    by_group = np.stack([counts[:, g].sum(1) for g in fed.partition.params["class_groups"]], axis=1)
    return by_group.argmax(1), by_group / by_group.sum(1, keepdims=True)


def client_groups(fed) -> np.ndarray:
    """Each client's group: its dominant label cluster (label-cluster split), its concept group
    (concept shift), or on the natural split (FEMNIST's writers, no label clusters) the client itself."""
    if "class_groups" in fed.partition.params:
        return dominant_group(fed)[0]
    if fed.partition.protocol == "natural":
        return np.arange(fed.partition.n_clients)
    return np.asarray(fed.partition.params["groups"])


_GROUPS: dict[str, np.ndarray] = {}  # a run's clients' groups, by its config: a probe builds its federation once


def run_groups(cfg) -> np.ndarray:
    """:func:`client_groups` of the federation a run's config builds, built once per config (the
    probes ask every evaluated round)."""
    key = json.dumps(cfg.to_dict(), sort_keys=True, default=str)
    if key not in _GROUPS:
        _GROUPS[key] = client_groups(Federation.from_config(cfg))
    return _GROUPS[key]


def swap_partners(groups) -> dict[int, int]:
    """For the swap test: each client's partner, the next client round the federation whose group
    differs (itself when every client is in one group)."""
    n = len(groups)
    return {i: next(((i + k) % n for k in range(1, n) if groups[(i + k) % n] != groups[i]), i) for i in range(n)}


def routing_probe(rnd, row, server, clients):
    """After FedMN's last round: every client's evaluation decision (path weights, Π), its active
    blocks, and the swap test (its accuracy with its own decision and with its partner's, on the same
    network).  None for other methods, other rounds, or while the encoders still pretrain."""
    if server.cfg.method != "fedmn" or rnd != server.cfg.rounds:
        return None
    out = {"paths": [], "pi": [], "active": []}
    for i, c in enumerate(clients):
        model = c.eval_model(server.eval_message(i))
        if not hasattr(model, "c"):  # still pretraining: no decision yet
            return None
        with torch.no_grad():
            pi = torch.sigmoid(c.model.router.logits(*c.data.split("train")))
        out["paths"].append([round(v, 4) for v in model.c.tolist()])
        out["pi"].append([round(v, 4) for v in pi.tolist()])
        out["active"].append([int(a) for row_ in c.model.active(model.c) for a in row_])
    tested = [c for c in clients if len(c.data.test_idx)]  # a client without test images has no swap test
    within = swap_partners(run_groups(server.cfg)[[c.cid for c in tested]])
    partner = {c.cid: tested[within[k]].cid for k, c in enumerate(tested)}
    out["swap"] = [[round(a, 4), round(b, 4)] for a, b in decision_swap_accuracy(server, tested, partner).values()]
    return out


def cfl_probe(rnd, row, server, clients):
    """CFL's split criterion every evaluated round (Sattler et al., Algorithm 1): per cluster that reported,
    the norm of its size-weighted mean update (split only below ε₁) and its largest client update's
    (split only above ε₂), and the number of clusters."""
    if rnd == 0 or server.cfg.method != "cfl":
        return None
    return {"norms": [[round(a, 4), round(b, 4)] for a, b in server.norms], "clusters": len(server.clusters)}


def cfl_criterion_text(result, arm: str, eps: dict) -> str:
    """What CFL's split criterion read after its warm-up (the runs' own), over the seeds and evaluated
    rounds of ``arm`` (its :func:`cfl_probe`): the two norms' ranges against ε₁ and ε₂, and the most
    clusters it held; "" for runs without the probe."""
    mean, most, clusters, warmup = [], [], [], 0
    for s in result.seeds:
        if (arm, s) not in result.records:
            continue
        warmup = result[arm, s].get("config", {}).get("options", {}).get("warmup", 0)
        for rnd, out in result.probes(arm, s).items():
            if out and rnd > warmup:
                mean += [a for a, _ in out["norms"]]
                most += [b for _, b in out["norms"]]
                clusters.append(out["clusters"])
    if not mean:
        return ""
    holds = "never" if min(mean) >= eps["eps1"] or max(most) <= eps["eps2"] else "at times"
    return (f"CFL's split criterion (after its {warmup} warm-up rounds, at the evaluated rounds of every seed): the "
            f"norm of the federation's mean update stays at {min(mean):.2f}–{max(mean):.2f}, where a split asks it "
            f"below ε₁ = {eps['eps1']:g}, while the largest client update's is {min(most):.2f}–{max(most):.2f} "
            f"(above ε₂ = {eps['eps2']:g}): the federation {holds} looks stationary to CFL at our learning rate and "
            f"local epoch, so it {'never splits' if holds == 'never' else 'may split'} ({max(clusters)} cluster"
            f"{'s' if max(clusters) > 1 else ''} at most). The authors set their thresholds for their models; the "
            "norms scale with the learning rate and the local work.")  # fmt: skip


def cpu_note(result, a: str, b: str) -> str:
    """A sentence for arms ``a`` and ``b`` whose algorithms coincide in these runs, when their runs were computed
    on different CPU models (their numbers then differ in the last bits of every sum, and so beyond them)."""
    cpus = {arm: {result[arm, s].get("provenance", {}).get("cpu", "").split(" (")[0] for s in result.seeds
                  if (arm, s) in result.records} for arm in (a, b)}  # fmt: skip
    if not all(cpus.values()) or cpus[a] == cpus[b]:
        return ""
    return (
        f" {a} is then {b}, yet their rows differ a little: {a}'s runs were computed on "
        f"{', '.join(sorted(cpus[a]))}, {b}'s on {', '.join(sorted(cpus[b]))}, whose floating-point sums differ "
        "(identical numbers need the same CPU model and compute path)."
    )


def router_probe(rnd, row, server, clients):
    """:func:`routing_probe`, and what the router reads and says on every evaluated routing round:
    ``gap``, the mean distance between the label clusters' means of the clients' mean normalised
    embeddings (h's input, eq. 9; from the switch to routing on); ``label_share``, the labels' share of an embedding's squared
    norm (mean over clients); ``g_sd``, the spread of the logits G over the clients (standard
    deviation per path, mean over the paths; unrounded).  At the last round also the oracle
    (:func:`pflkit.methods.fedmn.oracle_decisions`: per client, its test accuracy with the
    router's decision, the best common one, its own cluster's and its swap partner's cluster's)."""
    if server.cfg.method != "fedmn" or row is None or rnd < pretrain_rounds(server.cfg, server.opt):
        return None  # from the switch on: φ_x has just been copied from encoder 0 at the switch
    for i, c in enumerate(clients):
        c.eval_model(server.eval_message(i))  # the global θ, router included, as the evaluation loaded it
    groups = run_groups(server.cfg)
    embeds, shares, logits = [], [], []
    with torch.no_grad():
        for c in clients:
            x, y = c.data.split("train")
            e, share = c.model.router.inputs(x, y)
            embeds.append(e)
            shares.append(share)
            logits.append(c.model.router.logits(x, y))
    embeds = torch.stack(embeds)
    means = [embeds[torch.as_tensor(groups == g)].mean(0) for g in sorted(set(groups.tolist()))]
    gaps = [float((a - b).norm()) for i, a in enumerate(means) for b in means[i + 1 :]]
    out = {"gap": float(np.mean(gaps)) if gaps else 0.0, "label_share": float(np.mean(shares)),
           "g_sd": float(torch.stack(logits).std(0, unbiased=False).mean())}  # fmt: skip
    if getattr(server, "apart_sd", None) is not None:  # decisions started apart: their spread as started
        out["g_sd_apart"] = server.apart_sd
    if rnd == server.cfg.rounds:
        out |= routing_probe(rnd, row, server, clients)
        partner = swap_partners(groups)
        out["oracle"] = [
            [round(a, 4) for a in accs] for accs in oracle_decisions(server, clients, groups, partner).values()
        ]
    return out


ORACLE = ("router's decision", "best common", "own cluster's", "partner cluster's")  # the oracle's columns


def router_trace(result, arm: str) -> pd.DataFrame:
    """:func:`router_probe`'s per-round record of every seed of ``arm``: seed, round, gap, label
    share and the logits' spread over clients.  A run whose decisions started apart (``start_apart``)
    has at the switch the spread as the server set it apart (its router before that is the plain run's)."""
    rows = []
    for a, s in result.records:
        if a != arm:
            continue
        probes = [(r, p) for r, p in sorted(result.probes(a, s).items()) if p and "g_sd" in p]
        apart = next((p["g_sd_apart"] for _, p in probes if "g_sd_apart" in p), None)
        for i, (r, p) in enumerate(probes):
            row = {"seed": s, "round": r, **{k: p[k] for k in ("gap", "label_share", "g_sd")}}
            rows.append(row | ({"g_sd": apart} if i == 0 and apart is not None else {}))
    return pd.DataFrame(rows, columns=["seed", "round", "gap", "label_share", "g_sd"])


def oracle_table(result, arm: str) -> pd.DataFrame:
    """Per seed of ``arm``: the oracle's four mean client test accuracies (%, :data:`ORACLE`)."""
    rows = {}
    for a, s in result.records:
        p = result.probes(a, s).get(result[a, s]["config"]["rounds"]) if a == arm else None
        if p and "oracle" in p:
            rows[s] = dict(zip(ORACLE, 100 * np.asarray(p["oracle"], dtype=float).mean(0)))
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(ORACLE)).rename_axis("seed")


def swap_gain(result, arm: str, rounds: int) -> pd.Series:
    """Per seed: the mean over clients of own − swapped decision accuracy (points), from the probe."""
    out = {}
    for s in result.seeds:
        p = result.probes(arm, s).get(rounds) if (arm, s) in result.records else None
        if p and "swap" in p:
            out[s] = 100 * float(np.mean([own - other for own, other in p["swap"]]))
    return pd.Series(out, dtype=float)


def pi_spread(result, arm: str, seed: int, rounds: int) -> float:
    """How far the router personalises: the spread (standard deviation) of Π over the clients, per
    path, averaged over the paths."""
    return float(np.array(result.probes(arm, seed).get(rounds)["pi"]).std(0).mean())


def decision_ari(paths, truth, k: int) -> float:
    """The adjusted Rand index between a clustering of the clients' path weights into k groups and
    the groups ``truth``; NaN (nothing to cluster: the seed counts neither way) when every client has
    the same decisions."""
    paths = np.asarray(paths)
    distinct = len({tuple(r) for r in paths})
    if distinct < 2:
        return float("nan")
    return adjusted_rand_score(truth, AgglomerativeClustering(n_clusters=min(k, distinct)).fit_predict(paths))


# ----------------------------------------------------------------------------- the page's words


def arrangements_text(archs: dict) -> str:
    """Figure 2's arrangements as the prose says them: ``{9: ["1,4,4", "1,3,5"]}`` → "for 9 blocks
    [1×4×4] and [1×3×5]" (block counts joined by "; ")."""

    def names(arrangements):
        parts = [f"[{a.replace(',', '×')}]" for a in arrangements]
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]

    return "; ".join(f"for {b} blocks {names(a)}" for b, a in archs.items())


def clipped_interval(v, lo: float = -1.0, hi: float = 1.0, digits: int = 2, unit: str = "ARI") -> str:
    """A verdict's mean and 95 % interval as the claims table shows them, the interval cut to the
    range the quantity can take (an ARI is at most 1), for a claim row's ``ours``; ``unit=""`` leaves
    the unit out (a sentence that names it)."""
    seeds = f"({seeds_text(v.n)})"
    mean = f"{v.mean:+.{digits}f}" + (f" {unit}" if unit else "")
    if v.lo != v.lo:  # too few seeds for an interval
        return f"{mean} {seeds}"
    return f"{mean} [{max(v.lo, lo):+.{digits}f}, {min(v.hi, hi):+.{digits}f}] {seeds}"


def plain_pilot(table: pd.DataFrame, value: str = "learning rate") -> pd.DataFrame:
    """A pilot's summary (:meth:`pflkit.tuning.Tuning.summary`) in the page's words: the chosen
    setting as its number ("lr=0.05" → "0.05") under ``value``, the validation metric as accuracy."""
    out = table.copy()
    out["chosen"] = out["chosen"].map(lambda s: s.split("=", 1)[1] if "=" in s and ", " not in s else s)
    return out.rename(columns={"chosen": f"chosen {value}", "val_mean_acc": "validation accuracy (%)"})


def common_seed_means(values: dict) -> tuple[pd.Series, list]:
    """Each arm's mean over the seeds every arm ran (``values``: arm → per-seed Series), highest first,
    and those seeds."""
    common = sorted(set.intersection(*(set(v.dropna().index) for v in values.values())))
    means = pd.Series({a: float(v[common].mean()) for a, v in values.items()})
    return means.sort_values(ascending=False), common


def grid_note(grid, paper_grid) -> str:
    """How a learning-rate grid relates to the paper's, in words: "the paper's grid", or which of its
    values are the paper's and which lie above it."""
    from ..pages import prose

    ours = [v for v in grid if v in paper_grid]
    if sorted(grid) == sorted(paper_grid):
        return "the paper's grid"
    above = [v for v in grid if v not in paper_grid]
    return f"{prose(ours)} of the paper's grid" + (f" and {prose(above)} above it" if len(ours) < len(grid) else "")


def split_text(class_groups, class_names, sizes, mix, datasets: pd.DataFrame, seed: int) -> str:
    """The split in words: the label clusters of a seed (``class_groups``: class indices per cluster),
    the paper's Table I (``datasets``: rows by dataset, columns ``num_clients`` and ``num_samples``),
    the clients' training sizes and the mean share of a client's dominant cluster (``mix``: clients ×
    clusters)."""
    short = [c.split("/")[0] for c in class_names]
    sizes = np.asarray(sizes)
    clusters = "; ".join(f"{k}: " + ", ".join(short[c] for c in g) for k, g in enumerate(class_groups))
    table1 = "; ".join(
        f"{d} {int(r.num_clients)} clients, {int(r.num_samples):,} samples ({r.num_samples / r.num_clients:.0f} per client)"
        for d, r in datasets.iterrows()
    )
    return (
        f"Label clusters (seed {seed}): {clusters}. The paper's Table I: {table1}. Ours: {len(sizes)} clients, "
        f"training images per client median {np.median(sizes):.0f} (min {sizes.min()}, max {sizes.max()}); a client's "
        f"dominant cluster holds {100 * np.asarray(mix).max(1).mean():.0f} % of its images on average."
    )


def router_lr_text(tried, grid, chosen: float, at_edge: bool, lr: float) -> str:
    """The router pilot's outcome in words: the step sizes tried (the edge rule's additions named), the
    one kept, and its ratio to the network's learning rate ``lr``."""
    from ..pages import prose

    grown = [v for v in tried if v not in grid]
    return (
        f"The router's step size was tried at {prose(sorted(tried))}"
        + (f" (the edge rule added {prose(grown)})" if grown else "")
        + f"; {chosen:g} was kept"
        + (", still at the grid's edge" if at_edge else "")
        + f", {chosen / lr:g}× FedMN's learning rate of {lr:g}."
    )


def with_paper(table: pd.DataFrame, pub: pd.DataFrame, rename: dict) -> pd.DataFrame:
    """``table`` (rows: our arms) with the paper's numbers beside it, a column "paper <dataset>" per
    column of ``pub`` (rows: the paper's methods); ``rename`` maps our arm to the paper's row name;
    missing rows are NaN (a page shows "—")."""
    out = table.copy()
    for d in pub.columns:
        out[f"paper {d}"] = [pub[d].get(rename.get(a, a), np.nan) for a in out.index]
    return out


def best_round_text(best_round: dict, pretrain_end: int) -> str:
    """FedMN's round of best mean validation accuracy per seed (``best_round``: seed → round), and the
    seeds where it falls in the encoders' pretraining (rounds ≤ ``pretrain_end``)."""
    pre = [s for s, r in best_round.items() if r <= pretrain_end]
    return (
        "FedMN's round of best mean validation accuracy, per seed: "
        + ", ".join(f"seed {s} round {r}" for s, r in best_round.items())
        + (
            f"; on {seeds_text(pre)} it falls in the encoders' pretraining, where FedMN is judged as the mean of its "
            "encoder models"
            if pre
            else " (all in the routing rounds)"
        )
        + "."
    )


def bytes_text(up: pd.Series, share: float, router_size: int, routing_rounds: int, clients: int, flat: str) -> str:
    """Table II's bytes in words: FedMN's upload (``up``: MB by arm) against FedAvg's, FedEM's and the
    same network without routing (arm ``flat``), the share of blocks in use, and the router's part
    (``router_size`` parameters in float32, every client every routing round)."""
    router_mb = router_size * 4 * clients * routing_rounds / 1e6
    use = (
        "Its clients use every block at the last round, so block-wise communication saves nothing here"
        if share > 0.999
        else f"Its clients use {share:.0%} of the blocks at the last round (mean over seeds)"
    )
    return (
        f"In Table II's setting FedMN sends {up['FedMN'] / up['FedAvg']:.1f}× FedAvg's bytes and "
        f"{up['FedMN'] / up['FedEM']:.1f}× FedEM's, and {up['FedMN'] / up[flat]:.2f}× those of the same network with "
        f"every path on (no routing). {use}; the difference from the no-routing arm, {up['FedMN'] - up[flat]:.0f} MB "
        f"each way, is the router ({router_size:,} parameters, {router_mb:.0f} MB each way over the {routing_rounds} "
        f"routing rounds of {clients} clients), which every client downloads and uploads in every routing round and "
        "the no-routing arm never sends. The paper's efficiency claim is made on Figure 2's MLPs."
    )


def sizes_text(means: pd.Series, common, more, n_more: int, size_mn: int, components: int, size_lenet: int) -> str:
    """Table II's ordering over the seeds every arm ran (``means``: arm → mean, highest first), which
    arms ran more seeds, and the models' sizes in parameters."""
    from ..pages import prose

    order = " > ".join(f"{a} ({v:.1f})" for a, v in means.items())
    more_text = (
        f". The claims pair the seeds both their arms ran; {prose(more)} ran {seeds_text(n_more)}, and the table "
        "gives their means over all of them"
        if more
        else ""
    )
    return (
        f"Mean over {seeds_text(common)}, the seeds every arm ran: {order}{more_text}. The models differ in size: "
        f"FedMN's network (encoders, blocks and router) holds {size_mn:,} parameters, FedEM's {components} components "
        f"{components * size_lenet:,}, every other method's LeNet {size_lenet:,}; a claim that FedMN beats a baseline "
        "compares the methods with their models, as the paper's Table II does."
    )


def routing_row(probe: dict, groups, k: int, swap: float) -> dict:
    """One seed's row of the routing table from the routing probe at the last round (``probe``: its
    ``paths``, ``pi`` and ``active``), the clients' groups and that seed's swap test (points)."""
    paths, active, pi = (np.asarray(probe[key]) for key in ("paths", "active", "pi"))
    return {
        "distinct architectures": len({tuple(a) for a in active}),
        "blocks in use (share)": round(float(active.mean()), 2),
        "Π over the paths": f"{pi.min():.3f} to {pi.max():.3f}",
        "Π's spread over clients": round(float(pi.std(0).mean()), 4),
        "swap test (points)": round(swap, 1),
        "ARI (path weights vs label cluster)": round(decision_ari(paths, groups, k), 3),
    }


def routing_text(n_arch: int, pi_range: str, spread: float) -> str:
    """The routing table in words: the clients' architectures, the range of Π over the paths and its
    spread over the clients (below 0.01: too small for the ARI to mean personalised architectures)."""
    arch = "one architecture" if n_arch == 1 else f"at most {n_arch} architectures"
    tail = (
        ": the clustering behind the ARI separates clients by differences of that size, too small to change a "
        "decision, so the ARI says nothing about personalised architectures here. The departures section sets it "
        "against a frozen router."
        if spread < 0.01
        else "."
    )
    return (
        f"On every seed the clients use {arch}, and the router's path probabilities span {pi_range} across the paths "
        f"(first seed) but differ between clients by {spread:.4f} on average{tail}"
    )


def step_row(probe: dict, accuracy: float, every_batch: bool) -> dict:
    """One run's row of the router-step table from its last round's routing probe."""
    active, pi = np.asarray(probe["active"]), np.asarray(probe["pi"])
    return {
        "router step": "every batch" if every_batch else "once a round",
        "distinct architectures": len({tuple(r) for r in active}),
        "blocks in use (share)": float(active.mean()),
        "Π lowest": float(pi.min()),
        "Π highest": float(pi.max()),
        "Π's spread over clients": float(pi.std(0).mean()),
        "mean client accuracy (%)": accuracy,
    }


STEP_FORMATS = {"distinct architectures": "{:.3g}", "blocks in use (share)": "{:.2f}", "Π lowest": "{:.3f}",
                "Π highest": "{:.3f}", "Π's spread over clients": "{:.4f}", "mean client accuracy (%)": "{:.1f}"}  # fmt: skip


def step_table(rows: list[dict], formatted: bool = True) -> pd.DataFrame:
    """The router-step table: :func:`step_row`'s rows averaged per way of stepping; ``formatted``, each
    column as text at the digits it is read at (:data:`STEP_FORMATS`)."""
    table = pd.DataFrame(rows).groupby("router step").mean()
    if not formatted:
        return table
    return pd.DataFrame({c: table[c].map(STEP_FORMATS[c].format) for c in table.columns})


def change_row(first, last, architectures: int, swap: float) -> dict:
    """One run's row of the router's change from the switch to the last round: the cluster gap, the
    labels' share and the logits' spread at both ends (``first``, ``last``: rows of
    :func:`router_trace`), its architectures and its swap test (points)."""
    return {
        "cluster gap": f"{first.gap:.3f} → {last.gap:.3f}",
        "label share": f"{first.label_share:.3f} → {last.label_share:.3f}",
        "G spread": f"{first.g_sd:.2g} → {last.g_sd:.2g}",
        "architectures": architectures,
        "swap (points)": round(swap, 2),
    }


def router_text(first: pd.DataFrame, last: pd.DataFrame, tuned: str, rate: str, apart: str | None = None) -> str:
    """How the router's input and logits change from the switch to the last round, with the tuned router
    step (arm ``tuned``), at the network's (arm ``rate``) and, given, with decisions started apart (arm
    ``apart``); ``first``, ``last``: :func:`router_trace`'s rows at both ends indexed by (arm, seed)."""
    shrink = (last.g_sd / first.g_sd).groupby(level="arm").agg(["min", "max"])
    f, e, r = first.loc[tuned].gap, last.loc[tuned].gap, last.loc[rate].gap
    text = (
        f"From the switch to the last round the gap between the clusters' mean embeddings goes from {f.min():.2f}–"
        f"{f.max():.2f} to {e.min():.3f}–{e.max():.3f} with the tuned router step, and to {r.min():.2f}–{r.max():.2f} "
        f"at the network's; the clients' logits end {shrink.loc[tuned, 'min']:.2g}–{shrink.loc[tuned, 'max']:.2g} "
        f"times as far apart as at the switch (at the network's step size {shrink.loc[rate, 'min']:.2g}–"
        f"{shrink.loc[rate, 'max']:.2g} times)."
    )
    if apart is None:
        return text
    a0, a1 = first.loc[apart].g_sd, last.loc[apart].g_sd
    return text + (
        f" Started apart (the clients' logits {a0.min():.2g}–{a0.max():.2g} apart at the switch), they end "
        f"{a1.min():.2g}–{a1.max():.2g} apart, {shrink.loc[apart, 'min']:.2g}–{shrink.loc[apart, 'max']:.2g} times "
        f"their start, and the gap between the clusters' embeddings ends at {last.loc[apart].gap.min():.3f}–"
        f"{last.loc[apart].gap.max():.3f}."
    )


def with_mean(table: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """A per-seed table with a last row "mean", rounded; the seed becomes a column (no index shown)."""
    out = pd.concat([table, table.mean().to_frame("mean").T]).round(digits)
    return out.rename_axis("seed").reset_index()


def f2_diffs(values: dict, mn_of: dict, fedavg: dict, flat: dict, routing: str) -> dict:
    """Figure 2's paired differences per claim, per seed (``values``: arm → per-seed Series): per block
    count b, FedMN (the mean of its arrangements ``mn_of[b]``) − the FedAvg MLP ``fedavg[b]``; and under
    ``routing``, each block count's first arrangement − the same network without routing ``flat[b]``,
    mean over the block counts.  Each on the seeds all its arms ran."""

    def common(arms):
        return sorted(set.intersection(*(set(values[a].index) for a in arms)))

    out = {}
    for b, archs in mn_of.items():
        seeds = common([*archs, fedavg[b]])
        out[f"{b} blocks"] = pd.Series(
            {s: np.mean([values[a][s] for a in archs]) - values[fedavg[b]][s] for s in seeds}
        )
    seeds = common([x for b in mn_of for x in (mn_of[b][0], flat[b])])
    out[routing] = pd.Series({s: np.mean([values[mn_of[b][0]][s] - values[flat[b]][s] for b in mn_of]) for s in seeds})
    return out


def f2_text(acc: pd.Series, par: pd.Series, mn_of: dict, fedavg: dict, flat: dict, route_gain: float) -> str:
    """Figure 2 without routing, in words: per block count the accuracy (``acc``, %) and parameters
    transmitted (``par``, M) of the network without routing, routed, and of FedAvg's MLP, and where the
    accuracy gain over FedAvg comes from (``route_gain``: routing − every path on, points)."""
    from ..pages import prose

    bs = list(mn_of)

    def listed(values, arms):
        return prose([f"{values[a]:.1f}" for a in arms])

    flats, firsts, mlps = [flat[b] for b in bs], [mn_of[b][0] for b in bs], [fedavg[b] for b in bs]
    flat_gain = float(np.mean([acc[flat[b]] - acc[fedavg[b]] for b in bs]))
    fewer = all(par[flat[b]] < par[mn_of[b][0]] for b in bs)
    return (
        f"Without routing, the same networks as each block count's first arrangement "
        f"({prose([a.removeprefix('FedMN ') for a in firsts])}) reach {listed(acc, flats)} % at {listed(par, flats)} M "
        f"parameters transmitted; routed, they reach {listed(acc, firsts)} % at {listed(par, firsts)} M, and FedAvg's "
        f"MLPs of as many layers {listed(acc, mlps)} % at {listed(par, mlps)} M (means over each arm's seeds; "
        f"{prose(bs)} blocks in that order). Without routing the modular network beats FedAvg's MLPs by "
        f"{flat_gain:+.1f} points on average, and routing adds {route_gain:+.1f} on the same networks"
        + (", while without routing it transmits fewer parameters still (it sends no router)" if fewer else "")
        + (
            ": Figure 2's accuracy gain comes mostly from the modular network itself (an encoder, one layer of blocks "
            "and the output blocks, against FedAvg's deeper MLPs), little of it from routing."
            if abs(route_gain) < flat_gain / 2
            else "."
        )
    )


def sent_whole_text(ratio: float, static: float) -> str:
    """Figure 2's bytes in words: FedMN's parameters transmitted against FedAvg's (``ratio``, from the
    runs) and what the same architectures would move sent whole, every block active (``static``)."""
    saved = 1 - ratio / static
    saving = (
        f"block-wise communication saves {saved:.0%} of that"
        if saved > 0
        else "block-wise communication saves nothing here"
    )
    return (
        f"FedMN's architectures transmit {ratio:.2f}× FedAvg's MLPs' parameters (mean over seeds of the ratio of "
        f"means). Sent whole, every block active, the same architectures would move {static:.2f}× FedAvg's parameters "
        "(from their sizes, the same ratio of means; the router, whose φ_x is a copy of an encoder, travels both ways in "
        f"every routing round and counts in both): {saving}, and the rest of the difference from FedAvg is the "
        f"architectures' own size ({static:.2f}× FedAvg's per round)."
    )


def frozen_text(ari_trained: float, ari_frozen: float, spread_trained: float, spread_frozen: float) -> str:
    """The ARI with the router trained against frozen at its initialisation, in words, with the clients'
    spread of Π in both (below 0.01: too small to change a decision)."""
    change = (
        "lowers it"
        if ari_trained < ari_frozen - 0.005
        else "raises it"
        if ari_trained > ari_frozen + 0.005
        else "leaves it as it is"
    )
    small = max(spread_trained, spread_frozen) < 0.01
    return (
        f"With the router frozen at its initialisation the ARI is {ari_frozen:.2f} on average, with it trained "
        f"{ari_trained:.2f}: training {change}. The clients' path probabilities differ by {spread_trained:.4f} (trained) "
        f"and {spread_frozen:.4f} (frozen) on average"
        + (", so both ARIs cluster differences too small to change a decision." if small else ".")
    )


def shared_blocks_text(active: list, inert: bool, swap: float, ari: str) -> str:
    """Under concept shift: how many blocks FedMN's clients use and how many every client uses
    (``active``: per seed, clients × blocks), and what that means for blocks averaged over clients whose
    labels contradict one another (``inert``: the swap test found the decisions interchangeable)."""
    n_blocks = np.asarray(active[0]).shape[1]
    used = np.mean([np.asarray(a).sum(1).mean() for a in active])
    shared = np.mean([np.asarray(a).all(0).sum() for a in active])
    if shared == 0:
        tail = ": no block serves every group."
    elif not inert:
        tail = (
            ": however distinct the groups' path weights, each of those blocks is averaged over clients whose labels "
            "contradict one another."
        )
    else:
        tail = (
            f": the groups' path weights are not distinct (swap test {swap:+.1f} points, ARI {ari}), and each of those "
            "blocks is averaged over clients whose labels contradict one another."
        )
    return (
        f"FedMN's clients under concept shift use {used:.1f} of the {n_blocks} blocks on average, and {shared:.1f} "
        f"blocks are active for every client (means over seeds){tail}"
    )


def lead_text(m: dict) -> tuple[str, str]:
    """The findings box's opening sentence and the glance row's "why" from the chapter's measurements
    (``m``: ``inert`` (the swap test finds the decisions interchangeable), ``swap`` (its mean, points),
    ``swap_ours`` (its interval as printed), ``g_sd`` (the logits' spread over clients at the last
    round), ``in_use`` (share of blocks in use), ``gap`` (the cluster gap at the switch and at the end),
    ``gain`` (a fitted per-cluster decision over the best common one, points), optionally ``apart``
    (decisions started apart: the logits' spread at the end over its start, the largest seed), ``bytes`` (FedMN's
    upload / FedAvg's), ``f2`` and ``f2_flat`` (Figure 2's gain over FedAvg with and without
    routing, points))."""
    gap = f"{m['gap'][0]:.2f} → {m['gap'][1]:.2f}"
    if m["inert"]:
        use = "every block stays in use" if m["in_use"] > 0.999 else f"{m['in_use']:.0%} of the blocks stay in use"
        apart = ""
        if "apart" in m:  # decisions started apart: their logits' spread at the end over its start (largest seed)
            apart = (f", clients' decisions started apart end alike (their logits' spread falls to at most {m['apart']:.2g} "
                     "of its start)" if m["apart"] < 0.1 else f", but decisions started apart stay apart (their logits' "
                     f"spread ends at up to {m['apart']:.2g} of its start)")  # fmt: skip
        first = (
            f"At the last round the router's logits differ between clients by {m['g_sd']:.2g} (spread over clients) and "
            f"{use}: FedMN does not personalise here. The router's input loses the label clusters during training (gap "
            f"between their mean embeddings {gap}){apart}, and on the trained network a decision fitted per cluster "
            f"would gain {m['gain']:+.1f} points over the best common one."
        )
        why = (
            f"one decision for every client (swap test {m['swap_ours']}): the router's input loses the clusters (gap "
            f"{gap}); a fitted per-cluster decision would gain {m['gain']:+.1f} over the best common one"
        )
    else:
        first = f"A client's own routing decision is worth {m['swap']:+.1f} points against another group's."
        why = f"a client's own decision is worth {m['swap_ours']} against another group's"
    lead = (
        f"**In short.** {first} It sends {m['bytes']:.1f}× FedAvg's bytes; Figure 2's {m['f2']:+.1f} points over "
        f"FedAvg hold without routing ({m['f2_flat']:+.1f})."
    )
    return lead, why


def paper_and_own(table: pd.DataFrame, rows: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A claims table (:func:`pflkit.verdicts.claims_table`, indexed by claim) split in two: the paper's
    claims, and our own checks (:func:`pflkit.verdicts.is_own` of the claims ``rows``), each in the
    table's order."""
    from ..verdicts import is_own

    own = {r["claim"] for r in rows if is_own(r)}
    mine = table.index.isin(own)
    return table[~mine], table[mine]


def routing_table(result, arm: str, seeds, groups: dict, k: int, rounds: int) -> pd.DataFrame:
    """Per seed of ``arm``: :func:`routing_row` from its routing probe after its last round, the
    clients' groups ``groups[seed]`` and its swap test (:func:`swap_gain` at ``rounds``)."""
    swap = swap_gain(result, arm, rounds)
    rows = []
    for s in seeds:
        probe = result.probes(arm, s).get(result[arm, s]["config"]["rounds"])
        rows.append({"seed": s, **routing_row(probe, groups[s], k, float(swap.get(s, np.nan)))})
    return pd.DataFrame(rows).set_index("seed")


ROUTER_RUNS = ("tuned step", "network's step", "started apart")  # the router section's runs, as its table names them


def router_changes(result, tuned: str, rounds: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The router's change from the switch to the last round, per arm and seed (the arm ``tuned`` first,
    then the others in ``result``'s order, named by :data:`ROUTER_RUNS`): :func:`change_row` of each run,
    and :func:`router_trace`'s rows at both ends (indexed by arm and seed)."""
    trace = pd.concat([router_trace(result, a).assign(arm=a) for a in result.arms], ignore_index=True)
    ends = trace.sort_values("round").groupby(["arm", "seed"], sort=False)
    first, last = ends.first(), ends.last()
    rows = []
    order = [tuned] + [a for a in result.arms if a != tuned]
    for (a, s), f in sorted(first.iterrows(), key=lambda t: (order.index(t[0][0]), t[0][1])):
        active = result.probes(a, s).get(rounds)["active"]
        swap = float(swap_gain(result, a, rounds).get(s, np.nan))
        rows.append({"run": ROUTER_RUNS[order.index(a)], "seed": s,
                     **change_row(f, last.loc[(a, s)], len({tuple(r) for r in active}), swap)})  # fmt: skip
    return pd.DataFrame(rows).set_index(["run", "seed"]), first, last


def ari_table(result, arms, groups: dict, k: int, rounds: int) -> pd.DataFrame:
    """Per seed that every one of ``arms`` ran: the ARI of each arm's path weights after ``rounds``
    against the clients' groups ``groups[seed]`` (:func:`decision_ari`; NaN without a probe)."""
    seeds = [s for s in result.seeds if all((a, s) in result.records for a in arms)]

    def ari(a, s):
        p = result.probes(a, s).get(rounds)
        return decision_ari(p["paths"], groups[s], k) if p else float("nan")

    return pd.DataFrame({a: {s: ari(a, s) for s in seeds} for a in arms}).rename_axis("seed")


def fig2_points(fin: pd.DataFrame, fedavg: dict, flat: dict, mn_of: dict) -> pd.DataFrame:
    """Figure 2's points from the runs' finals (``fin``: arm, seed, mean_acc, MB_up, MB_down): per arm its
    method, block count, parameters transmitted (both directions, float32: bytes / 4, in M) and mean
    accuracy, means over its seeds.  ``fedavg``, ``flat``: block count → arm; ``mn_of``: block count →
    FedMN's arms."""
    fin = fin.assign(**{"parameters transmitted (M)": (fin["MB_up"] + fin["MB_down"]) / 4})
    blocks = {**{n: b for b, n in fedavg.items()}, **{n: b for b, n in flat.items()},
              **{a: b for b, arms in mn_of.items() for a in arms}}  # fmt: skip
    fin["blocks"] = fin.arm.map(blocks)
    fin["method"] = np.select([fin.arm.str.endswith("no routing"), fin.arm.str.startswith("FedMN")],
                              ["FedMN, no routing", "FedMN"], "FedAvg")  # fmt: skip
    return fin


def model_sizes(cfg) -> dict:
    """The parameters of FedMN's network for ``cfg`` (encoders, blocks and router; the pretraining
    heads apart), of its router, and of the baselines' model (:func:`modular_net`)."""
    net = modular_net(cfg)
    return {
        "FedMN": sum(p.numel() for n, p in net.named_parameters() if not n.startswith("pre_heads")),
        "router": sum(p.numel() for p in net.router.parameters()),
        "model": sum(p.numel() for p in build_model(cfg.model, *shape_of(cfg)).parameters()),
    }


def whole_ratio(cfgs: list, mlps: list, rounds: int, pretrain_fraction: float) -> float:
    """From the sizes alone (no run): the parameters FedMN's architectures (``cfgs``) would move each
    way over ``rounds`` with every block active (pretraining rounds: the encoders and their heads;
    routing rounds: encoders, router and blocks), mean over the architectures, against the mean of the
    FedAvg MLPs ``mlps`` (model names) sent whole every round: the same ratio of means as the runs'."""

    def all_blocks(cfg):
        net = modular_net(cfg)
        size = {part: sum(p.numel() for n, p in net.named_parameters() if n.startswith(part))
                for part in ("encoders", "pre_heads", "blocks", "router")}  # fmt: skip
        k = int(pretrain_fraction * rounds)
        return k * (size["encoders"] + size["pre_heads"]) + (rounds - k) * (
            size["encoders"] + size["router"] + size["blocks"]
        )

    mlp = [rounds * sum(p.numel() for p in build_model(m, *shape_of(cfgs[0])).parameters()) for m in mlps]
    return float(np.mean([all_blocks(c) for c in cfgs]) / np.mean(mlp))


# ----------------------------------------------------------------------------- the claims


SWAP_CLAIM = (
    "mechanism: a client scores higher with its own routing decision than with another group's (the swap test, points)"
)


def table2_claims(result, pub: pd.DataFrame, paper_row: dict, best: str, best_other: str, swap, *, flat: str,
                  plan=None, swap_plan: str = "", resolution: float = 1.0) -> list[dict]:  # fmt: skip
    """Table II's claims, the mechanism first: the swap test (``swap``: per seed, own − other decision,
    points), routing against the same network with every path on (arm ``flat``); then FedMN against the
    strongest baseline ``best``, FedEM against the strongest other ``best_other`` and FedAvg + FT against
    FedAvg, beside the paper's margins (``pub``: the paper's Table II, rows its methods, columns its
    datasets; ``paper_row``: our arm → its row there)."""
    from ..experiments import claim, mechanism, verdict
    from ..verdicts import PaperMargin

    def name(a):
        return paper_row.get(a, a)

    def margin(a, b, prefix=""):  # the paper's a − b per dataset, with its numbers (a PaperMargin)
        va = {d: pub[d][name(a)] for d in pub.columns if not isinstance(b, str) or name(b) in pub.index}
        vb = {d: pub[d][name(b)] if isinstance(b, str) else b[d] for d in va}
        return PaperMargin(prefix + ", ".join(f"{d} {va[d] - vb[d]:+.1f}" for d in va), datasets=list(va),
                           values=[(va[d], vb[d]) for d in va])  # fmt: skip

    best_paper = {d: pub[d].drop(["FedMN", "FedEM"]).max() for d in pub.columns}
    mech = mechanism(f"Table II: {SWAP_CLAIM}", verdict(list(swap), resolution=resolution, budget=result.improving("FedMN")),
                     paper="personalised architectures (not measured there)",
                     control="a client of another label cluster's decision", plan=plan, plan_name=swap_plan)  # fmt: skip
    return [
        mech,
        claim("ours: routing beats the same network with every path on (FedMN − FedMN, no routing)", result, "FedMN",
              flat, paper="not measured", resolution=resolution, plan=plan, plan_name="FedMN − no routing"),
        claim(f"Table II: FedMN beats the strongest baseline ({best}, on validation)", result, "FedMN", best,
              paper=margin("FedMN", "FedEM", "vs FedEM: "), resolution=resolution, headline=True, mechanism=mech,
              plan=plan, plan_name="FedMN − strongest baseline"),
        claim(f"Table II: FedEM beats the other baselines (strongest: {best_other}, on validation)", result, "FedEM",
              best_other, paper=margin("FedEM", best_paper),
              resolution=resolution, plan=plan, plan_name="FedEM − strongest other"),
        claim("Table II: FedAvg+ (fine-tuned) beats FedAvg (the paper's text: on CIFAR-10; its table: CIFAR-10 and "
              "EMNIST)", result, "FedAvg + FT", "FedAvg", paper=margin("FedAvg + FT", "FedAvg"), resolution=resolution,
              plan=plan, plan_name="FedAvg + FT − FedAvg"),
    ]  # fmt: skip


def concept_claims(result, swap, aris, *, flat: str, plan=None, resolution: float = 1.0) -> list[dict]:
    """The claims under concept shift (beyond the paper): FedMN against FedEM, FedAvg and Local, routing
    against every path on (arm ``flat``), the swap test (``swap``: per seed, points) as the mechanism,
    and whether the decisions follow the groups (``aris``: per seed, the ARI of the path weights against
    the groups)."""
    from ..experiments import claim, claim_row, mechanism, verdict

    why = "the motivation (§I), not tested there"
    text = "beyond the paper: under concept shift "
    pairs = [("FedEM", "FedEM", "FedMN beats FedEM"), ("FedAvg", "FedAvg", "FedMN beats FedAvg"),
             ("Local", "Local", "FedMN beats Local (each client alone)"),
             ("no routing", flat, "routing beats every path on (FedMN − FedMN, no routing)")]  # fmt: skip
    rows = [claim(text + t, result, "FedMN", b, paper=why, resolution=resolution, plan=plan, plan_name=n)
            for n, b, t in pairs]  # fmt: skip
    mech = mechanism(f"Concept shift: {SWAP_CLAIM}", verdict(list(swap), resolution=resolution,
                     budget=result.improving("FedMN")), paper=why, control="a client of another group's decision")  # fmt: skip
    v = verdict(list(aris), unit="ARI", budget=result.improving("FedMN"))
    ari = claim_row(text + "FedMN's decisions follow the groups (ARI − 0)", v, paper=why, ours=clipped_interval(v),
                    mechanism=mech)  # fmt: skip
    return [*rows, mech, ari]


def fig2_claims(result, diffs: dict, mn_of: dict, claim_arms: dict, flat: dict, ratio, *, rounds: int, routing: str,
                plan=None, resolution: float = 1.0) -> list[dict]:  # fmt: skip
    """Figure 2's claims: per block count b, FedMN (the mean of its arrangements ``mn_of[b]``) against the
    FedAvg MLP of as many layers (``diffs[f"{b} blocks"]``, per seed; its arms ``claim_arms``), routing
    against every path on (``diffs[routing]``; the arms ``flat``), and the parameters transmitted
    (``ratio``: per seed, FedMN's over FedAvg's; judged as −log ratio, above 0 when FedMN sends fewer)."""
    from ..experiments import claim_row, verdict

    rows = []
    for b in mn_of:
        article = "an" if str(b)[0] == "8" or b in (11, 18) else "a"
        v = verdict(diffs[f"{b} blocks"], resolution=resolution, budget=result.budget(*claim_arms[f"{b} blocks"]))
        rows.append(claim_row(f"Figure 2, {b} blocks: FedMN (mean of its {len(mn_of[b])} architectures) is more accurate "
                              f"than {article} {b}-layer FedAvg MLP at round {rounds}", v, paper="higher accuracy",
                              plan=plan, plan_name=f"{b} blocks"))  # fmt: skip
    v = verdict(diffs[routing], resolution=resolution, budget=result.budget(*flat.values()))
    rows.append(claim_row("ours, Figure 2: routing beats every path on (each block count's first arrangement − the same "
                          "network without routing, mean over the block counts)", v, paper="not measured", plan=plan,
                          plan_name=routing))  # fmt: skip
    rows.append(claim_row("Figure 2: FedMN transmits fewer parameters than FedAvg (−log of FedMN / FedAvg)",
                          verdict(-np.log(ratio), unit="(−log ratio)"), paper="much less", digits=2))  # fmt: skip
    return rows


def routing_claims(ari, spread: float, mech: dict, spread_diffs, step: pd.DataFrame, budget=False) -> list[dict]:
    """The routing section's claims: whether clients of a label cluster get similar path weights (``ari``:
    per seed; ``spread``: Π's mean spread over clients; flagged by the swap test ``mech``), and whether a
    router trained every batch spreads Π more than one step a round (``spread_diffs``: per seed; ``step``:
    :func:`step_table` unformatted)."""
    from ..experiments import claim_row, flagged, mechanism, verdict
    from ..verdicts import INERT

    v = verdict(ari, unit="ARI", budget=budget)
    override = "it carries the flag mechanism inert because the swap test finds the clients' decisions interchangeable"
    notes = [f"the clients' path probabilities differ by {spread:.4f} on average (spread over clients, per path)"]
    row_ari = claim_row("ours: clients of a label cluster get similar path weights (ARI of the clustered path weights "
                        "vs their clusters − 0)", v, paper="personalised architectures per joint distribution "
                        "(not shown)", ours=clipped_interval(v), mechanism=mech,
                        note="; ".join(notes + ([override] if flagged(mech, INERT) else [])))  # fmt: skip
    top, once = step["Π's spread over clients"].max(), step.loc["once a round"]
    note = (f"neither reading personalises: Π's spread over clients is at most {top:.3f} on a 0 to 1 scale, and once a "
            f"round leaves Π between {once['Π lowest']:.2f} and {once['Π highest']:.2f}") if top < 0.01 else ""  # fmt: skip
    row_step = mechanism("Table II: mechanism: a router trained every batch spreads Π over the clients more than one step "
                         "a round", verdict(list(spread_diffs), unit="(Π spread)"),
                         paper="the router trains in the local steps (Algorithm 1, l. 19)",
                         control="one router step a round", digits=3, note=note)  # fmt: skip
    return [row_ari, row_step]


def oracle_claims(oracle: pd.DataFrame, rate_swap, resolution: float = 1.0, apart_swap=None) -> list[dict]:
    """The oracle's two claims on the trained network (``oracle``: :func:`oracle_table`), a client's own
    cluster's fitted decision against its partner cluster's and against the best common one, and the
    swap test with the router at the network's step size (``rate_swap``: per seed, points), judged
    within ± ``resolution``; given ``apart_swap`` (per seed), the swap test of decisions started apart too."""
    from ..experiments import claim_row, verdict

    own = oracle["own cluster's"]
    return [
        claim_row("ours: on the trained network, a client scores higher with its own cluster's fitted decision than "
                  "with its partner cluster's (the oracle, points)", verdict(own - oracle["partner cluster's"],
                  resolution=resolution), paper="not measured"),
        claim_row("ours: on the trained network, a cluster's fitted decision beats the best common one (the oracle, "
                  "points)", verdict(own - oracle["best common"], resolution=resolution), paper="not measured"),
        claim_row(f"ours: at the network's step size the router's decisions stay interchangeable (swap test within "
                  f"±{resolution:g} point)", verdict(list(rate_swap), margin=resolution), paper="not measured"),
    ] + ([claim_row(f"ours: decisions started apart end interchangeable (swap test within ±{resolution:g} point)",
                    verdict(list(apart_swap), margin=resolution), paper="not measured")]
         if apart_swap is not None else [])  # fmt: skip


def departure_claims(result, options, ari: pd.DataFrame, mech: dict, *, paper_arm: str, frozen: str, plan=None,
                     resolution: float = 1.0) -> list[dict]:  # fmt: skip
    """The departures' claims: the paper's FedMN (arm ``paper_arm``) against each departure of the authors'
    code (``options``: their names; arm "FedMN, <name>"), and the routing claim against its control, the
    ARI with the router trained minus frozen at its initialisation (``ari``: per seed, a column per arm;
    flagged by the swap test ``mech``)."""
    from ..experiments import claim, claim_row, verdict

    rows = [claim(f"ours: the paper's FedMN − {n} (both at the paper arm's tuned rate)", result, paper_arm,
                  f"FedMN, {n}", paper="not measured", resolution=resolution, plan=plan, plan_name=n)
            for n in options]  # fmt: skip
    v = verdict(ari[paper_arm] - ari[frozen], unit="ARI", budget=result.budget(paper_arm, frozen))
    rows.append(claim_row("ours: training the router makes clients of a label cluster share decisions (ARI, trained "
                          "router − router frozen at its initialisation)", v, paper="routing per joint distribution",
                          digits=2, mechanism=mech))  # fmt: skip
    return rows


def setup_rows(v: dict) -> list[tuple[str, str, str]]:
    """The setup card's rows (what, ours, the paper's) from the chapter's parameters ``v`` (TRAIN_IMAGES,
    TEST_IMAGES, LABEL_CLUSTERS, ALPHA, CLIENTS, ARCH, HIDDEN, ROUNDS, MOMENTUM, PRETRAIN_FRACTION,
    PILOT_ROUNDS, SEEDS)."""
    arch = v["ARCH"].replace(",", "×")
    if v.get("DATASETS", ["fashion-mnist"]) != ["fashion-mnist"]:  # the paper profile: Table II on each dataset
        return paper_setup_rows(v)
    return [
        ("Data", f"Fashion-MNIST, {v['TRAIN_IMAGES']:,} training and {v['TEST_IMAGES']:,} test images",
         "CIFAR-10/100, EMNIST, FEMNIST"),
        ("Split", f"FedEM's label clusters: {v['LABEL_CLUSTERS']} groups of classes, Dir({v['ALPHA']}) over the "
         "clients", "the same"),
        ("Clients", f"{v['CLIENTS']}, every one in every round", "80 (CIFAR-10), every one in every round"),
        ("Model", f"LeNet; FedMN [{arch}]: LeNet bodies as encoders, blocks of {v['HIDDEN']} units",
         "MobileNet-v2 or a 2-layer CNN; [3×3×3] on EMNIST"),
        ("Training", f"{v['ROUNDS']} rounds of one local epoch, SGD (momentum {v['MOMENTUM']}), the first "
         f"{v['PRETRAIN_FRACTION']:.0%} pretrain FedMN's encoders", "150 rounds of one local epoch, SGD"),
        ("Tuning", f"learning rate per method on validation, a {v['PILOT_ROUNDS']}-round pilot; FedMN's router step "
         "too", "a learning-rate grid"),
        ("Seeds", f"{seeds_text(v['SEEDS'])} to start, more where a claim's plan asks", ""),
    ]  # fmt: skip


def paper_setup_rows(v: dict) -> list[tuple[str, str, str]]:
    """The setup card at the paper profile: per dataset of ``v["DATASETS"]`` (rows of ``v["SPLITS"]``)."""

    def each(f) -> str:
        return "; ".join(f"{PAPER_NAMES.get(d, d)} {f(*v['SPLITS'][d])}" for d in v["DATASETS"])

    first = PAPER_NAMES.get(v["DATASETS"][0], v["DATASETS"][0])
    return [
        ("Data", each(lambda n, k, share, m, a: "all images" if share == 1 else f"FedEM's {share:.0%} of the images")
         + f"; the sections after Table II on {first}", "CIFAR-10/100, EMNIST, FEMNIST"),
        ("Split", each(lambda n, k, *_: f"{k} label clusters, Dir({v['ALPHA']})" if k else "one client per writer"),
         "FedEM's (CIFAR-100: its Pachinko allocation)"),
        ("Clients", each(lambda n, *_: f"{n}") + ", every one in every round", "80, 100, 100, 539"),
        ("Model", each(lambda n, k, s, m, a: f"{m}, FedMN [{a.replace(',', '×')}]") + f", blocks of {v['HIDDEN']} units",
         "MobileNet-v2 (CIFAR) or a 2-layer CNN; [2×2×2] on CIFAR, [3×3×3] on (F)EMNIST"),
        ("Training", f"{v['ROUNDS']} rounds of one local epoch, batch {v['BATCH']}, SGD (momentum {v['MOMENTUM']}), the "
         f"first {v['PRETRAIN_FRACTION']:.0%} pretrain FedMN's encoders", "150 rounds of one local epoch, SGD"),
        ("Tuning", f"learning rate per method on validation in {v['LR_GRID']}, a {v['PILOT_ROUNDS']}-round pilot; "
         "FedMN's router step too", "the same grid"),
        ("Seeds", f"{seeds_text(v['SEEDS'])} to start, more where a claim's plan asks", ""),
    ]  # fmt: skip


# ------------------------------------------------------ the notebook's plumbing: configs, plans, shown output

STRONG, MUTED = "C3", "0.62"  # FedMN in one strong colour, the rest muted
ACC = "mean client accuracy (%)"  # our tables' accuracy column
VAL = {"val_mean_acc": "validation accuracy (%)"}  # a pilot table's column
# the four departures of the authors' code (FedMN's options), each one arm, and all four together
CODE_OPTIONS = {"router frozen": {"router_grad": 0}, "softmax decisions": {"decisions": "softmax"},
                "no annealing": {"anneal": 0}, "shared modules": {"shared_modules": 1}}  # fmt: skip
CODE_OPTIONS["all four together"] = {k: v for o in list(CODE_OPTIONS.values()) for k, v in o.items()}
# the parameters the prose shows ({glue:text} roles)
GLUED = (
    "LABEL_CLUSTERS CLIENTS SEEDS ROUNDS PRETRAIN_FRACTION TAU_START TAU_END ALPHA TRAIN_IMAGES HIDDEN BATCH MOMENTUM "
    "PILOT_ROUNDS PILOT_SEEDS LR_GRID LR_EXTEND FIG2_ROUNDS CODE_ROUNDS CONCEPT_CLIENTS CONCEPT_GROUPS COMPONENTS "
    "CONCEPT_ROUNDS TEST_IMAGES FEDPROX_MU FT_EPOCHS DROPOUT TABLE2_RUN FIG2_RUN CODE_RUN CONCEPT_RUN ROUTER_LR_GRID ROUTER_LR START_APART CFL_EPS1_GRID"
).split()


def config_factory(options: dict, *, rounds: int, evals: int, **split):
    """``config(method, rounds=..., **fields)``: a run on FedEM's label-cluster split (of Fashion-MNIST
    unless ``split`` names a dataset and partition), every client in every round, one local epoch,
    ``evals`` evaluations, the method's entry of ``options`` (read when called: a later change shows),
    the ``split`` fields (clients, images, batch, learning rate, ...), then ``fields``.  CFL never
    splits in the first fifth of the run's rounds."""
    from ..engine import RunConfig

    split = {"dataset": "fashion-mnist", "partition": "label-clusters"} | split

    def config(method: str, *, rounds: int = rounds, **fields):
        opts = options.get(method, {}) | ({"warmup": max(1, rounds // 5)} if method == "cfl" else {})
        base = RunConfig(method=method, rounds=rounds, local_epochs=1, eval_every=max(1, rounds // evals),
                         options=opts, **split)  # fmt: skip
        return dataclasses.replace(base, **fields)

    return config


# ------------------------------------------------- Table II on each dataset (the paper profile: the paper's four)

# the paper's name of each dataset the kit loads (its Table II's columns)
PAPER_NAMES = {"cifar10": "CIFAR10", "cifar100": "CIFAR100", "emnist-byclass": "EMNIST", "femnist": "FEMNIST"}
# training images of the paper's datasets (the kit's training split; FEMNIST: LEAF's, about 3,500 writers)
TRAIN_SIZES = {"cifar10": 50_000, "cifar100": 50_000, "emnist-byclass": 697_932, "femnist": 805_263,
               "fashion-mnist": 60_000}  # fmt: skip
LEAF_WRITERS = {"femnist": 3_500}


DRY_VAL_FRACTION = 0.5  # the dry run's validation share (EMNIST's fixture: 6 training images a class)


def dry_run() -> bool:
    """The paper profile's dry run (:func:`pflkit.profiles.dry` at `paper`): fixture data."""
    from ..profiles import current, dry

    return current() == "paper" and dry()


def split_fields(name: str, row: tuple, images: tuple, cap: int | None = None) -> dict:
    """A dataset's run fields from its parameters row ``(clients, label clusters, share of the images,
    model, arch)``: FedEM's label-cluster split with that many clusters, or with 0 the natural split (one
    client per writer, at most the dataset's writers); ``images``: stratified train / test subsets (None:
    the share of the dataset's, FedEM's subsample); ``cap``: at most this many clients (the dry run, whose
    fixtures also need a larger validation share: :data:`DRY_VAL_FRACTION`)."""
    from ..federation import dataset

    clients, clusters, share, model, _arch = row
    fields = {"dataset": name, "model": model}
    if clusters:
        fields |= {"partition": "label-clusters", "label_clusters": clusters}
    else:  # the writers themselves: a random sample of them per seed
        fields["partition"] = "natural"
        clients = min(clients, len(dataset(name).info["users"]))
    if dry_run():  # the fixtures' few images a class: a tenth of them rounds to no validation image
        fields["val_fraction"] = DRY_VAL_FRACTION
    train, test = images
    if share < 1 and train is None:  # FedEM's subsample of the dataset (its s_frac)
        ds = dataset(name)
        train, test = round(share * len(ds.y_train)), round(share * len(ds.y_test))
    return fields | {"clients": min(clients, cap or clients), "train_images": train, "test_images": test}


def dataset_configs(datasets, splits: dict, options: dict, *, images: tuple, cap: int | None, **fields) -> dict:
    """Per dataset: ``(config, options)``, :func:`config_factory` on its :func:`split_fields` and
    ``fields``.  The first dataset's config reads ``options`` itself (later sections change it there);
    every other gets a copy with its own FedMN architecture and FedEM's components (= its n_1)."""
    out = {}
    for i, name in enumerate(datasets):
        arch = splits[name][4]
        opts = options if i == 0 else options | {
            "fedmn": options["fedmn"] | {"arch": arch}, "fedem": options["fedem"] | {"components": int(arch.split(",")[0])}}  # fmt: skip
        out[name] = (config_factory(opts, **split_fields(name, splits[name], images, cap), **fields), opts)
    return out


def pub_for(pub: pd.DataFrame, name: str) -> pd.DataFrame:
    """The paper's Table II for a dataset: its column when the paper has it, else every column (the
    book's Fashion-MNIST sits beside all four)."""
    return pub[[PAPER_NAMES[name]]] if name in PAPER_NAMES else pub


def table2_heading(name: str, cfg) -> str:
    """The line above a dataset's Table II at the paper profile: the dataset, its split, model and FedMN."""
    split = (f"FedEM's label clusters ({cfg.label_clusters} groups of classes, Dir({cfg.alpha:g}))"
             if cfg.partition == "label-clusters" else "one client per writer")  # fmt: skip
    images = "all images" if cfg.train_images is None else f"{cfg.train_images:,} training images"
    return (f"**{PAPER_NAMES.get(name, name)}**: {cfg.clients} clients, {split}, {images}, model {cfg.model}, "
            f"FedMN [{cfg.options.get('arch', '').replace(',', '×')}]")  # fmt: skip


def on_dataset(rows: list[dict], name: str) -> list[dict]:
    """Claims rows of a dataset after the first, named by it: "Table II: …" reads "Table II on
    CIFAR100: …", "ours: …" reads "ours, CIFAR100: …" (the lead claim stays the first dataset's)."""
    label = PAPER_NAMES.get(name, name)
    out = []
    for r in rows:
        text = r["claim"]
        for head, new in (("Table II: ", f"Table II on {label}: "), ("ours: ", f"ours, {label}: ")):
            if text.startswith(head):
                text = new + text[len(head) :]
        out.append(r | {"claim": text})
    return out


def diverged_everywhere(configs: dict, values, seeds, store) -> list[str]:
    """The labels of ``configs`` whose every learning rate of ``values`` diverged on some of ``seeds``:
    the runs of the pilot's first grid (:func:`pflkit.tuning.tune_axis` reads them back from ``store``)."""
    from ..experiments import sweep
    from ..tuning import grid

    grids = {label: grid(label, cfg, lr=sorted(values)) for label, cfg in configs.items()}
    result = sweep({a: c for g in grids.values() for a, c in g.items()}, seeds, store)
    return [label for label, g in grids.items() if all(result.values(a, "diverged").astype(bool).any() for a in g)]


def table2_on(config, options: dict, pub: pd.DataFrame, v: dict):
    """Table II on one dataset (its ``config`` and ``options``), as the chapter runs it: the learning-rate
    pilot of every method of ``v["TABLE2_METHODS"]``, FedMN's router step size at its chosen rate (set in
    ``options["fedmn"]``), the arms with *FedMN, no routing*, the seed plan's pilot on ``v["SEEDS"]``, the
    plan, and the arms on their planned seeds (a diverging rate falls back to the pilot's best smaller
    one; a baseline that diverges at every rate of the grid is left out, :func:`diverged_everywhere`).  ``v``: the notebook's parameters (SEEDS, PILOT_SEEDS, ROUNDS, PILOT_ROUNDS, LR_GRID,
    ROUTER_LR_GRID, CFL_EPS1_GRID, LR_EXTEND, RESOLUTION, TABLE2_RUN, NO_ROUTE, SWAP, STORE, PAPER_ROW; CFL's
    split threshold ε₁ is chosen on validation at CFL's rate and set in ``options["cfl"]``); ``pub``: the
    paper's Table II beside it (:func:`pub_for`).  Returns a namespace of what later cells read."""
    from types import SimpleNamespace

    from ..experiments import sweep_stable, tune_axis
    from ..methods import display_name

    methods, store, rounds, pilot_rounds = v["TABLE2_METHODS"], v["STORE"], v["ROUNDS"], v["PILOT_ROUNDS"]
    pilots = {display_name(m): config(m, rounds=pilot_rounds, eval_every=pilot_rounds) for m in methods}
    # a baseline that diverges at every rate of the grid is left out, with a line saying so (the pilot's own runs)
    left_out = diverged_everywhere(pilots, v["LR_GRID"], v["PILOT_SEEDS"], store)
    if needed := set(left_out) & {"FedMN", "FedEM", "FedAvg", "FedAvg + FT"}:
        raise PflkitError(
            f"{', '.join(sorted(needed))} diverged at every learning rate of {v['LR_GRID']}: lower the grid"
        )
    methods = [m for m in methods if display_name(m) not in left_out]
    pilot = tune_axis({label: c for label, c in pilots.items() if label not in left_out}, "lr", v["LR_GRID"],
                      v["PILOT_SEEDS"], store, extend=v["LR_EXTEND"])  # fmt: skip
    lr = {m: pilot.config(display_name(m)).lr for m in methods}
    router_pilot = tune_axis({"FedMN, router step": config("fedmn", rounds=pilot_rounds, eval_every=pilot_rounds,
                                                           lr=lr["fedmn"])},
                             "router_lr", v["ROUTER_LR_GRID"], v["PILOT_SEEDS"], store, extend=v["LR_EXTEND"])  # fmt: skip
    router_lr = router_pilot.config("FedMN, router step").options["router_lr"]
    fedmn = options["fedmn"] = {**options["fedmn"], "router_lr": router_lr}  # every FedMN run on this dataset
    cfl_pilot = None  # CFL's split threshold ε₁ on validation at its chosen rate: a grid as large as the router step's
    if "cfl" in lr and v.get("CFL_EPS1_GRID"):
        cfl_pilot = tune_axis({"CFL, split threshold": config("cfl", rounds=pilot_rounds, eval_every=pilot_rounds,
                                                              lr=lr["cfl"])},
                              "eps1", v["CFL_EPS1_GRID"], v["PILOT_SEEDS"], store, extend=v["LR_EXTEND"])  # fmt: skip
        options["cfl"] = {**options["cfl"], "eps1": cfl_pilot.config("CFL, split threshold").options["eps1"]}
    arms = {display_name(m): config(m, lr=lr[m]) for m in methods}
    arms[v["NO_ROUTE"]] = config("fedmn", lr=lr["fedmn"], options={**fedmn, "force_paths": 1})
    tunings = {a: (pilot, a) for a in arms if a in pilot.grids}
    # FedMN's run records what its router reads and decides every evaluated round, the others the routing probe
    probes = {a: {"FedMN": router_probe, "CFL": cfl_probe}.get(a, routing_probe) for a in arms}
    t2, fallbacks = sweep_stable(arms, v["SEEDS"], store, tunings, probe=probes)  # the seed plan's pilot
    baselines = [a for a in arms if a not in ("FedMN", v["NO_ROUTE"])]
    best = t2.select(baselines, by="val_mean_acc")  # on the pilot seeds' validation
    best_other = t2.select([a for a in baselines if a != "FedEM"], by="val_mean_acc")
    claims = {"FedMN − strongest baseline": ("FedMN", best), "FedEM − strongest other": ("FedEM", best_other),
              "FedAvg + FT − FedAvg": ("FedAvg + FT", "FedAvg"), "FedMN − no routing": ("FedMN", v["NO_ROUTE"])}  # fmt: skip
    plan, seeds = table2_seeds(t2, claims, v["SWAP"], arms, v["SEEDS"], rounds, resolution=v["RESOLUTION"],
                               run=v["TABLE2_RUN"])  # fmt: skip
    t2, fallbacks = sweep_stable(arms, seeds, store, tunings, probe=probes)
    fallbacks = {
        a: f"diverged at every learning rate of the pilot ({v['LR_GRID']}): left out" for a in left_out
    } | fallbacks
    lr.update({m: t2[display_name(m), v["SEEDS"][0]]["config"]["lr"] for m in methods})  # what later runs use
    return SimpleNamespace(pilot=pilot, router_pilot=router_pilot, router_lr=router_lr, fedmn=fedmn, arms=arms,
                           cfl_pilot=cfl_pilot, cfl=options.get("cfl", {}),
                           t2=t2, fallbacks=fallbacks, best=best, best_other=best_other, plan=plan, seeds=seeds, lr=lr,
                           fedmn_t2=dataclasses.replace(arms["FedMN"], lr=lr["fedmn"]),
                           table=table2_table(t2, pub, v["PAPER_ROW"]))  # fmt: skip


def table2_claims_on(runs: dict, pub: pd.DataFrame, v: dict) -> dict:
    """Per dataset of ``runs`` (its :func:`table2_on`): :func:`table2_claims` beside the paper's column
    for it, the rows of every dataset after the first named by it (:func:`on_dataset`)."""
    out = {}
    for i, (name, r) in enumerate(runs.items()):
        rows = table2_claims(r.t2, pub_for(pub, name), v["PAPER_ROW"], r.best, r.best_other,
                             swap_gain(r.t2, "FedMN", v["ROUNDS"]), flat=v["NO_ROUTE"], plan=r.plan,
                             swap_plan=v["SWAP"], resolution=v["RESOLUTION"])  # fmt: skip
        out[name] = rows if i == 0 else on_dataset(rows, name)
    return out


# ----------------------------------------------------------------------------- the paper profile's cost

CONCEPT_ARMS = 5  # the concept-shift section: Local, FedAvg, FedEM, FedMN and FedMN, no routing


def round_steps(name: str, row: tuple, batch: int, val_fraction: float = 0.1) -> int:
    """Local optimiser steps of one round on a dataset (every client, one epoch): clients × ⌈images a
    client trains on / batch⌉, from the dataset's training images (:data:`TRAIN_SIZES`; FedEM's share of
    them; on FEMNIST its writers' share of LEAF's images) less the validation share."""
    clients, _clusters, share, _model, _arch = row
    images = TRAIN_SIZES[name] * share
    if name in LEAF_WRITERS:  # a sample of the writers: their share of the images
        images *= clients / LEAF_WRITERS[name]
    return clients * int(np.ceil(images * (1 - val_fraction) / clients / batch))


def table2_cost(p: dict, name: str) -> tuple[int, int]:
    """Runs and optimiser steps of Table II on one dataset at the parameters ``p`` (upper bounds): the
    learning-rate pilot of every method and the router's step-size pilot, each grid one value longer (the
    edge rule adds at most one), on the pilot seeds; every arm (the methods and FedMN, no routing) at the
    seed cap ``TABLE2_RUN``."""
    per_round = round_steps(name, p["SPLITS"][name], p["BATCH"])
    pilot = (len(p["TABLE2_METHODS"]) * (len(p["LR_GRID"]) + p["LR_EXTEND"])
             + len(p["ROUTER_LR_GRID"]) + p["LR_EXTEND"]) * len(p["PILOT_SEEDS"])  # fmt: skip
    arms = (len(p["TABLE2_METHODS"]) + 1) * p["TABLE2_RUN"]
    return pilot + arms, (pilot * p["PILOT_ROUNDS"] + arms * p["ROUNDS"]) * per_round


def notes_cost(p: dict) -> tuple[int, int]:
    """Runs and optimiser steps of the sections after Table II, on the first dataset (upper bounds):
    the router stepping once a round (on ``SEEDS``), the router section's two more FedMN runs (at the
    seed cap), Figure 2 (its pilot per block count, FedAvg's MLP and FedMN's first arrangement; its arms:
    FedAvg, every arrangement and the first without routing), the departures of the authors' code (the
    paper's FedMN and five arms) and the concept shift (iid clients of every training image)."""
    first = p["DATASETS"][0]
    per_round = round_steps(first, p["SPLITS"][first], p["BATCH"])
    grid, pilots, archs = len(p["LR_GRID"]) + p["LR_EXTEND"], len(p["PILOT_SEEDS"]), p["FIG2_ARCHS"]
    concept_row = (p["CONCEPT_CLIENTS"], 0, 1.0, "", "")
    parts = [  # (runs, rounds, steps a round)
        (len(p["SEEDS"]), p["ROUNDS"], per_round),
        (2 * p["TABLE2_RUN"], p["ROUNDS"], per_round),
        (2 * len(archs) * grid * pilots, p["FIG2_ROUNDS"], per_round),
        (sum(len(a) + 2 for a in archs.values()) * p["FIG2_RUN"], p["FIG2_ROUNDS"], per_round),
        ((len(CODE_OPTIONS) + 1) * p["CODE_RUN"], p["CODE_ROUNDS"], per_round),
        (CONCEPT_ARMS * p["CONCEPT_RUN"], p["CONCEPT_ROUNDS"], round_steps(first, concept_row, p["BATCH"])),
    ]
    return sum(n for n, _, _ in parts), sum(n * r * s for n, r, s in parts)


def paper_cost(p: dict) -> dict:
    """The paper profile's runs and optimiser steps in all (``p``: the parameters cell's values at
    `paper`, :func:`pflkit.paper.parameters`): Table II on every dataset (:func:`table2_cost`) and the
    sections after it on the first (:func:`notes_cost`)."""
    per = [table2_cost(p, d) for d in p["DATASETS"]] + [notes_cost(p)]
    return {
        "runs": sum(r for r, _ in per), "steps": sum(s for _, s in per), "datasets": list(p["DATASETS"]),
        "clients": {d: p["SPLITS"][d][0] for d in p["DATASETS"]}, "rounds": p["ROUNDS"], "seeds": p["TABLE2_RUN"],
        "note": "Table II on every dataset (pilots on their grids, one value longer; every arm at the seed cap), the "
                "laboratory notes on the first; a step is a local batch (pFedMe's inner steps and FedAvg+'s fine-tuning "
                "before each evaluation not counted)",
    }  # fmt: skip


def federations(config):
    """``fed_of(seed)``: the label-cluster federation of a seed (every method shares it on that seed),
    built once per seed from ``config("fedavg", seed=seed)``."""
    return functools.cache(lambda seed: Federation.from_config(config("fedavg", seed=seed)))


def claim_bullets(rows: list[dict]):
    """The claims as a Markdown list: each claim and its verdict in words."""
    from IPython.display import Markdown

    from ..verdicts import in_words

    return Markdown("\n".join(f"* {r['claim']}: **{in_words(r)}**." for r in rows))


def table2_seeds(result, claims: dict, swap: str, arms: dict, seeds, rounds: int, *, resolution: float, run: int):
    """Table II's seed plan from its pilot seeds (``result``): the paired differences of ``claims``
    (name → (a, b)) pooled, the swap test (named ``swap``) on its own; and the seeds each arm runs, at
    most ``run``.  Where the pilot already finds the swap test inert, the headline's arms add none."""
    from ..verdicts import SEED_CAP, arm_seeds, seed_plan, verdict

    swaps = list(swap_gain(result, "FedMN", rounds))
    plan = pd.concat([
        seed_plan({k: list(result.paired(a, b)) for k, (a, b) in claims.items()}, cap=SEED_CAP, resolution=resolution),
        seed_plan({swap: swaps}, cap=SEED_CAP, pool=False, resolution=resolution),
    ])  # fmt: skip
    inert = verdict(swaps, resolution=resolution).word in ("no difference", "contradicted")
    to_run = {k: v for k, v in claims.items() if not (inert and k == "FedMN − strongest baseline")}
    planned = arm_seeds(plan, {**to_run, swap: ("FedMN",)}, seeds, arms=arms, cap=SEED_CAP)
    return plan, {a: s[:run] for a, s in planned.items()}


def table2_table(result, pub: pd.DataFrame, paper_row: dict) -> pd.DataFrame:
    """Table II: per arm our mean client accuracy, seeds, whether still improving, the pooled accuracy at
    the best validation round, and the paper's numbers (:func:`with_paper`)."""
    from ..verdicts import fmt_interval, paper_vs_ours

    table = paper_vs_ours(result, {}, label="paper")[["ours mean_acc", "seeds", "still improving"]]
    table = table.rename(columns={"ours mean_acc": ACC})
    pooled = [fmt_interval(result.values(a, "pooled_acc@best_val")) for a in table.index]
    table["pooled accuracy at the best validation round (%)"] = pooled
    return with_paper(table, pub, paper_row)


def table2_shown(table: pd.DataFrame, pub: pd.DataFrame, fallbacks: dict, heading: str = "") -> list:
    """What Table II's section shows: a line per method whose rate diverged on some seed, then the table
    beside the paper's CIFAR-10 and EMNIST, and folded, beside all four of the paper's datasets; with a
    ``heading`` (the paper profile: one table per dataset), that heading and the table beside the paper's
    column for the dataset (``pub``: that column alone, :func:`pub_for`)."""
    from IPython.display import Markdown

    from ..pages import folded

    notes = "\n".join(f"* {a}: {note}".replace("lr ", "learning rate ") for a, note in fallbacks.items())
    if heading:
        return (
            [Markdown(heading)]
            + [Markdown(notes)] * bool(fallbacks)
            + [table[[ACC, "seeds", "still improving", *[f"paper {d}" for d in pub.columns]]]]
        )
    return [Markdown(notes)] * bool(fallbacks) + [
        table[[ACC, "seeds", "still improving", "paper CIFAR10", "paper EMNIST"]],
        folded(
            table[[ACC, *[f"paper {d}" for d in pub.columns]]], "Ours beside the paper's Table II on its four datasets"
        ),
    ]


def table2_notes(result, plan: pd.DataFrame, table: pd.DataFrame, sizes: dict, *, seeds, mn_seeds, run: int,
                 rounds: int, pretrain_end: int, components: int, clients: int, cfl_eps: dict, flat: str):  # fmt: skip
    """Table II in the notes: the bytes up per method (MB), FedMN's share of blocks in use at the last
    round (mean over ``mn_seeds``), and what the notes show (seed plan, pooled accuracy, best rounds,
    sizes, whether CFL split, bytes)."""
    from IPython.display import Markdown

    from ..pages import folded

    best_round = result.finals().set_index(["arm", "seed"]).best_val_round
    cfl_same = all(
        result.values("CFL", m).equals(result.values("FedAvg", m)) for m in ("mean_acc", "val_mean_acc", "MB_up")
    )
    mean, common = common_seed_means({a: result.values(a) for a in result.arms})  # the seeds every arm ran
    more = [a for a in result.arms if len(result.values(a).dropna()) > len(common)]
    comm = result.finals().groupby("arm")[["MB_up", "MB_down"]].mean().round(2)
    comm.columns = ["MB up (client → server)", "MB down"]
    up = comm["MB up (client → server)"]
    share = np.mean([np.mean(result.probes("FedMN", s).get(rounds)["active"]) for s in mn_seeds])
    text = (best_round_text({s: best_round["FedMN", s] for s in mn_seeds}, pretrain_end) + "\n\n"
            + sizes_text(mean, common, more, len(result.values(more[0])) if more else 0, sizes["FedMN"], components,
                         sizes["model"])
            + (f"\n\nCFL never split a cluster here: its accuracies and bytes equal FedAvg's on every seed, so its row is "
               f"FedAvg's (split thresholds ε₁ = {cfl_eps['eps1']:g}, ε₂ = {cfl_eps['eps2']:g})." if cfl_same else "")
            + ("\n\n" + criterion if (criterion := cfl_criterion_text(result, "CFL", cfl_eps))
               else "") + (cpu_note(result, "CFL", "FedAvg") if "never splits" in criterion else ""))  # fmt: skip
    shown = [
        folded(
            plan.round(2),
            f"The seed plan of Table II's claims ({seeds_text(seeds)} its pilot; at most {run} seeds run)",
        ),
        folded(
            table[[ACC, "seeds", "pooled accuracy at the best validation round (%)"]],
            "Table II with the pooled accuracy",
        ),
        Markdown(text),
        comm.reset_index(names="method"),
        Markdown(bytes_text(up, share, sizes["router"], rounds - pretrain_end, clients, flat)),
    ]
    return up, share, shown


def fig2_names(archs: dict) -> tuple:
    """Figure 2's arm names from its arrangements (block count → arrangements): the FedAvg MLP and
    FedMN's pilot arm per block count, FedMN's arms per block count, the no-routing control per block
    count (its first arrangement, every path on), the routing claim's name, and each claim's arms."""
    fedavg = {b: f"FedAvg, {b}-layer MLP" for b in archs}
    fedmn = {b: f"FedMN, {b} blocks" for b in archs}
    mn_of = {b: [f"FedMN [{a.replace(',', '×')}]" for a in arrangements] for b, arrangements in archs.items()}
    flat = {b: f"{mn_of[b][0]}, no routing" for b in archs}
    routing = "routing − every path on"
    claim_arms = {f"{b} blocks": [*mn_of[b], fedavg[b]] for b in archs}
    claim_arms[routing] = [x for b in archs for x in (mn_of[b][0], flat[b])]
    return fedavg, fedmn, mn_of, flat, routing, claim_arms


def fig2_arms(fedavg_mlp, fedmn_mlp, archs: dict, lrs: dict) -> dict:
    """Figure 2's arms: per block count the FedAvg MLP, FedMN in every arrangement and its first
    arrangement without routing, each at its pilot's rate (``lrs``: pilot arm → learning rate);
    ``fedavg_mlp(blocks, **fields)`` and ``fedmn_mlp(arrangement, options, **fields)`` make the configs."""
    fedavg, fedmn, *_ = fig2_names(archs)
    arms = {name: fedavg_mlp(b, lr=lrs[name]) for b, name in fedavg.items()}
    arms |= {f"FedMN [{a.replace(',', '×')}]": fedmn_mlp(a, lr=lrs[fedmn[b]]) for b, arrangements in archs.items()
             for a in arrangements}  # fmt: skip
    arms |= {f"FedMN [{a[0].replace(',', '×')}], no routing": fedmn_mlp(a[0], {"force_paths": 1}, lr=lrs[fedmn[b]])
             for b, a in archs.items()}  # fmt: skip
    return arms


def f2_run_diffs(result, mn_of: dict, fedavg: dict, flat: dict, routing: str) -> dict:
    """:func:`f2_diffs` on the arms of ``result`` that ran on some seed."""
    ran = {a: result.values(a) for a in result.arms if any((a, s) in result.records for s in result.seeds)}
    return f2_diffs(ran, mn_of, fedavg, flat, routing)


def fig2_plan(diffs: dict, routing: str, resolution: float) -> pd.DataFrame:
    """Figure 2's seed plan: FedMN against the MLPs as like claims, one pooled spread; routing (the
    claim ``routing``) on its own scale."""
    from ..verdicts import SEED_CAP, seed_plan

    return pd.concat([
        seed_plan({k: list(v) for k, v in diffs.items() if k != routing}, cap=SEED_CAP, resolution=resolution),
        seed_plan({routing: list(diffs[routing])}, cap=SEED_CAP, pool=False, resolution=resolution),
    ])  # fmt: skip


def fig2_means(fin: pd.DataFrame) -> pd.DataFrame:
    """Figure 2's points: each arm's mean parameters transmitted and accuracy over its seeds."""
    cols = ["parameters transmitted (M)", "mean_acc"]
    return fin.groupby(["arm", "method", "blocks"])[cols].mean().reset_index()


def counts_text(rows: list[dict], shown: int):
    """The line under the claims table: how many claims, per verdict word, how many budget-limited,
    and how many runs the page shows."""
    from IPython.display import Markdown

    words = pd.Series([r["verdict"] for r in rows]).value_counts()
    limited = sum(r["budget"] == "budget-limited" for r in rows)
    return Markdown(f"{len(rows)} claims: " + ", ".join(f"{n} {w}" for w, n in words.items())
                    + f"; {limited} of them rest on runs still improving at the end of their rounds. "
                    f"This page shows {shown} runs.")  # fmt: skip


def oracle_shown(changes: pd.DataFrame, oracle: pd.DataFrame, first, last, rounds: int, tuned: str, rate: str,
                 rows: tuple, resolution: float, apart: str | None = None) -> list:  # fmt: skip
    """What the router section shows: the router's changes per seed from the switch to the last round,
    the oracle's table, and the text (``rows``: the oracle's swap, its gain, the swap test at the
    network's step size and, with the arm ``apart``, the swap test of decisions started apart)."""
    from IPython.display import Markdown

    from ..verdicts import say

    swap, gain, rate_row, *apart_row = rows
    text = (router_text(first, last, tuned, rate, apart if apart_row else None) + " On the trained network a client's own cluster's fitted decision "
            f"against its partner cluster's reads {say(swap)}, and against the best common decision {say(gain)}"
            + (": decisions matter on this network, but a personal one is worth little over the best shared one"
               if swap["verdict"] == "reproduces" and gain["_v"].mean < resolution else "")
            + f". At the network's step size the swap test reads {say(rate_row)}"
            + (f"; with decisions started apart, {say(apart_row[0])}." if apart_row else "."))  # fmt: skip
    return [Markdown(f"From the switch (round {int(first['round'].min())}) to the last round ({rounds}), per seed:"),
            changes, Markdown("The oracle: mean client test accuracy (%) per seed with each decision."),
            with_mean(oracle), Markdown(text)]  # fmt: skip


# --------------------------------------------------------------------------------- the figures


def _done(fig):
    """A figure drawn for the notebook to glue: closed, so that only the glue shows it."""
    plt.close(fig)
    return fig


def draw_table2_curves(history: pd.DataFrame, arms: list, flat: str, pretrain_end: int):
    """Table II's runs (``arms``) over rounds (``history``: arm, round, mean_acc; mean over seeds): FedMN strong,
    FedEM and the no-routing control (``flat``) dark, the other baselines muted; a dotted line where
    the encoders' pretraining ends."""
    fig, ax = plt.subplots(figsize=(6.9, 3.9))
    others = [a for a in arms if a not in ("FedMN", "FedEM", flat)]
    styles = {
        "FedMN": dict(color=STRONG, lw=2.4),
        "FedEM": dict(color="0.25", lw=1.4),
        flat: dict(color="0.25", lw=1.4, ls="--"),
    }
    for a in others + ["FedEM", flat, "FedMN"]:  # the strongest colour last, on top
        curve = history[history.arm == a].groupby("round").mean_acc.mean()
        ax.plot(curve.index, curve.values, **styles.get(a, dict(color=MUTED, lw=1)), label=a if a in styles else None)
    ax.plot([], [], color=MUTED, lw=1, label=f"the {len(others)} other baselines")
    ax.axvline(pretrain_end, color="0.5", ls=":", lw=1)
    ax.set(xlabel="round", ylabel="mean client test accuracy (%)")
    ax.legend(fontsize=10, loc="lower right")
    return _done(fig)


def draw_figure2(points: pd.DataFrame, rounds: int):
    """Figure 2: each arm's accuracy against the parameters it sent (``points``: :func:`fig2_means`),
    coloured by method, the marker by block count."""
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(6.9, 4.0))
    sns.scatterplot(data=points, x="parameters transmitted (M)", y="mean_acc", hue="method", style="blocks", s=90, ax=ax,
                    palette={"FedMN": STRONG, "FedMN, no routing": "0.3", "FedAvg": "C0"})  # fmt: skip
    ax.set(ylabel=f"mean client test accuracy, round {rounds} (%)")
    ax.legend(fontsize=10, ncol=2, loc="lower left")
    return _done(fig)


def draw_split(mix: np.ndarray, dominant: np.ndarray, seed: int):
    """The split: each client's share of images in every label cluster (``mix``: clients × clusters),
    the clients ordered by their dominant cluster, then by that share."""
    fig, ax = plt.subplots(figsize=(6.9, 2.4))
    order = np.lexsort((-mix.max(1), dominant))
    pd.DataFrame(mix[order], columns=[f"cluster {k}" for k in range(mix.shape[1])]).plot.bar(
        stacked=True, ax=ax, width=0.9
    )
    ax.set(xlabel="client (ordered by dominant cluster)", ylabel="share of its images", xticks=[],
           title=f"seed {seed}: label clusters per client")  # fmt: skip
    ax.legend(fontsize=10, loc="upper right")
    return _done(fig)


def draw_decisions(paths, dominant: np.ndarray, rounds: int, seed: int):
    """FedMN's decisions: each client's path weights (rows: clients ordered by their dominant label
    cluster; columns: the paths)."""
    import seaborn as sns

    order = np.argsort(dominant, kind="stable")
    fig, ax = plt.subplots(figsize=(6.9, 0.2 * len(paths) + 1.4))
    sns.heatmap(np.array(paths)[order], cmap="viridis", vmin=0, vmax=1, ax=ax,
                yticklabels=[f"c{i} (cluster {dominant[i]})" for i in order], cbar_kws={"label": "path weight"})  # fmt: skip
    ax.set(xlabel=f"path (E = {len(paths[0])})", title=f"FedMN's decisions after round {rounds} (seed {seed})")
    return _done(fig)


def draw_router_trace(result):
    """What the router reads over rounds, per arm of ``result`` (FedMN's tuned router step strong, the
    network's step size muted, decisions started apart dark and dashed): the cluster gap, the labels'
    share, the spread of G (log scale)."""
    import seaborn as sns

    trace = pd.concat([router_trace(result, a).assign(arm=a) for a in result.arms], ignore_index=True)
    styles = [dict(color=STRONG), dict(color=MUTED), dict(color="0.2", ls="--")][: len(result.arms)]
    names = ["tuned router step", "the network's step size", "decisions started apart"][: len(result.arms)]
    fig, axes = plt.subplots(1, 3, figsize=(6.9, 3.0))
    for ax, (col, name) in zip(
        axes, {"gap": "cluster gap", "label_share": "labels' share", "g_sd": "spread of G"}.items()
    ):
        for a, style in zip(result.arms, styles):
            sns.lineplot(data=trace[trace.arm == a], x="round", y=col, ax=ax, legend=False, **style)
        ax.set(title=name, ylabel="", yscale="log" if col == "g_sd" else "linear")
    fig.legend([plt.Line2D([], [], **st) for st in styles], names, loc="lower center", ncol=len(names),
               frameon=False, fontsize=9)  # fmt: skip
    fig.subplots_adjust(wspace=0.5, bottom=0.32, top=0.88)
    return _done(fig)
