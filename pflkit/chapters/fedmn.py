"""The FedMN chapter's probes and measurements: what the router decides, whether a client's own
decision serves it better than another group's (the swap test), and how far the decisions follow
the clients' groups."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import torch
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics import adjusted_rand_score

from ..engine import Federation
from ..methods import get_method
from ..methods.fedmn import build_net, decision_swap_accuracy, oracle_decisions, pretrain_rounds
from ..models import build_model
from ..verdicts import seeds_text


def modular_net(cfg, shape=(1, 28, 28), classes: int = 10):
    """FedMN's network for a config, as its clients build it (no run): for parameter counts."""
    return build_net(build_model(cfg.model, shape, classes), cfg, get_method("fedmn").resolve_options(cfg.options))


def dominant_group(fed) -> tuple[np.ndarray, np.ndarray]:
    """On FedEM's label-cluster split: each client's label cluster (the group of classes holding most
    of its training images) and its share of images in every cluster (clients × clusters)."""
    counts = fed.partition.class_counts(fed.ds.y_train.numpy())
    by_group = np.stack([counts[:, g].sum(1) for g in fed.partition.params["class_groups"]], axis=1)
    return by_group.argmax(1), by_group / by_group.sum(1, keepdims=True)


def client_groups(fed) -> np.ndarray:
    """Each client's group: its dominant label cluster (label-cluster split) or its concept group
    (concept shift)."""
    if "class_groups" in fed.partition.params:
        return dominant_group(fed)[0]
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
    partner = swap_partners(run_groups(server.cfg))
    out["swap"] = [[round(a, 4), round(b, 4)] for a, b in decision_swap_accuracy(server, clients, partner).values()]
    return out


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
    share and the logits' spread over clients."""
    rows = [{"seed": s, "round": r, **{k: p[k] for k in ("gap", "label_share", "g_sd")}}
            for (a, s) in result.records if a == arm for r, p in sorted(result.probes(a, s).items())
            if p and "g_sd" in p]  # fmt: skip
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
