"""The FeSEM chapter's experiment: its probes and measurements (which cluster each client is in and
what the clustered methods' shared models score, the authors' evaluation; how far the clusters follow
the true groups of a grouped federation: adjusted Rand index, moves between rounds), the runs'
configs, arms, sweeps and seed plans, the claims computed from their results, the tables of ours
beside the paper's Tables 2 and 3, and the CPU estimate and paper profile's cost.  Data in, results
out: what the page says is in :mod:`pflkit.chapters.fesem_page`."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score

from ..engine import Federation
from ..experiments import HEADLINE_SEEDS, arms_for, choose_k, claim_row, fmt_interval, paper_vs_ours
from ..grouped import DEFAULT_TRANSFORMS
from ..methods import get_method
from ..methods.fesem import PAPER_WEIGHT, authors_micro_acc, distance_keys, kmeans, points

AVG_HS = "FedAvg + head start"  # FedAvg after FeSEM's warm-up (the server averages the initial local models)
AVG_EQ = "FedAvg + warm-up rounds"  # plain FedAvg, given FeSEM's warm-up steps as extra rounds (equal local work)
LEAD_SEEDS = dict.fromkeys(("headline", "unmatched", "best"), HEADLINE_SEEDS)  # the lead claims' fewest seeds
PAPER_ROW = {"Local": "NoFed", "CFL": "FedCluster", "IFCA": "HypoCluster(3)"}  # our arm -> the paper's row
ONE_MODEL = {"FedSGD", "FedAvg", AVG_EQ, "FedDist", "FedDist+WS", "FedProx"}  # one shared model serves every client
OURS = {"micro_acc": "pooled_acc", "macro_acc": "mean_acc", "micro_f1": "micro_f1", "macro_f1": "macro_f1"}
DATASETS = {"Table 2": "FEMNIST", "Table 3": "FedCelebA"}  # the paper's table -> its dataset


# ----------------------------------------------------------------------------- the federation


def true_groups(fed) -> np.ndarray:
    """The true (latent) group of every client of a grouped federation.
    Used by :func:`federations` (*A federation with known groups*)."""
    return np.array(fed.partition.params["groups"])


# ----------------------------------------------------------------------------- the arms


def method_configs(
    cfg, warmup: int, *, fesem_options: dict, groups: int, baselines, fedprox_mu: float, avg_hs_options: dict
) -> dict:
    """{label: config} of every method the chapter runs on ``cfg`` (its rounds and evaluation): FeSEM
    at K = ``groups`` with ``fesem_options``, the kit's ``baselines`` (CFL with ``warmup`` rounds
    without splits, FedProx at μ = ``fedprox_mu``, IFCA with ``groups`` models; ``feddist+ws``: FedDist
    size-weighted), and FedAvg + head start (FeSEM with ``avg_hs_options``).
    Used in *Tuning on validation* and *Tables 2 and 3 in full*."""
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
    trains initial local models.  Used in *Cost*."""
    s = 0.0
    for cfg in arms.values():
        warm = cfg.method == "fesem" and (cfg.options.get("em", "paper") == "paper" or cfg.options.get("head_start"))
        cost = per_round[cfg.method if cfg.method in per_round else "other"]
        s += len(seeds) * (cfg.rounds * cost + (setup if warm else 0.0))
    return s


# ----------------------------------------------------------------------------- probes


def clusters_of(server, clients) -> np.ndarray | None:
    """The cluster of every client for clustered methods (FeSEM, CFL: the server's assignment;
    IFCA: each client's last pick), None for the others.
    Used by :func:`fesem_probe` (the clusters of *Figure 4* and *Did CFL and IFCA collapse?*)."""
    if hasattr(server, "assignment"):  # FeSEM, CFL
        return np.asarray(server.assignment)
    if getattr(clients[0], "cluster", None) is not None:  # IFCA: each client's last pick
        return np.array([c.cluster for c in clients])
    return None


def models_of(server) -> list | None:
    """The shared models of a clustered method: FeSEM's centres, CFL's cluster models, IFCA's K models.
    Used by :func:`fesem_probe` (the clusters of *Figure 4* and *Did CFL and IFCA collapse?*)."""
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
    components, the intra-cluster distance and the training loss.  None for one-model methods.
    Recorded by the main sweep (*Tables 2 and 3 in full*); read by Figures 3 to 5 and their notes."""
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
    local model to the second-nearest centre over the distance to its own).  None for other methods.
    Recorded in *Why nobody moves*."""
    if not hasattr(server, "centers"):
        return None
    return {"labels": np.asarray(server.assignment).tolist(), "margins": np.round(server.margins(), 4).tolist()}


# ----------------------------------------------------------------------------- clusters against groups


def trace_of(result, arm: str, group_of) -> list[dict]:
    """Per seed the arm ran and per probed round: the ARI of its clusters against the true groups
    (``group_of(seed)``) and the number of clients that changed cluster since the previous probed
    round (NaN at the first).  Used in *Figure 4* and *Why nobody moves*."""
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
    """Per seed: the ARI of the arm's clusters at round ``rounds`` against the true groups.
    Used by the seed plans (:func:`seed_plans`, *Tables 2 and 3 in full*)."""
    return pd.Series({s: adjusted_rand_score(group_of(s), result.probes(arm, s)[rounds]["labels"]) for s in seeds})


def ari_at(trace: pd.DataFrame, arm: str, rnd: int) -> pd.Series:
    """Per seed, from a :func:`trace_of` table: the arm's ARI at round ``rnd``.
    Used in *Figure 4* and *Figure 5*."""
    return trace[(trace.arm == arm) & (trace["round"] == rnd)].set_index("seed").ARI.sort_index()


def label_mix_ari(fed, labels, k: int, seed: int) -> float:
    """The ARI between the clusters ``labels`` and a k-means (``k`` clusters, ``seed``) of the clients'
    label mixes (class proportions of their training images): whether clusters follow the labels.
    Used in *Figure 4: the clusters in detail*."""
    c = fed.partition.class_counts(fed.ds.y_train.numpy()).astype(float)
    mix = kmeans(torch.from_numpy(c / c.sum(1, keepdims=True)), k, seed)
    return adjusted_rand_score(mix, labels)


def whole_groups(labels, groups) -> int:
    """How many true groups have all their clients in one cluster of ``labels`` (0 when every
    client is in one cluster).  Used in *Figure 5: the clusters' composition*."""
    a = np.array(labels)
    comp = pd.crosstab(a, groups)
    return int(((comp > 0).sum(axis=0) == 1).sum()) if len(set(a)) > 1 else 0


def margin_at(result, arm: str, seed: int, k: int) -> float:
    """The median margin over the clients at the ``k``-th probed round of run (arm, seed) (0: after
    the setup), from :func:`margin_probe`.  Used in *Why nobody moves*."""
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
    accuracy itself; no value for NoFed (Local), which has no shared model.
    Used in *Tables 2 and 3* and their notes."""
    vals = {}
    for s in seeds:
        p = result.probes(arm, s).get(rounds) or {}
        if "authors" in p:
            vals[s] = 100 * p["authors"]["max"]
        elif arm in one_model:
            vals[s] = result.values(arm, "pooled_acc")[s]
    return pd.Series(vals, dtype=float)


def paper_value(paper: pd.DataFrame, tab: str, row: str, metric: str = "micro_acc") -> float:
    """The paper's value of ``metric`` for its row ``row`` of table ``tab``; NaN where it has none.
    Used in *Tables 2 and 3* and their notes."""
    p = paper[(paper.table == tab) & (paper.metric == metric)].set_index("method")
    return float(p.value[row]) if row in p.index else np.nan


def paper_column(paper: pd.DataFrame, tab: str, metric: str, arms) -> dict:
    """{arm: the paper's value} of ``metric`` in table ``tab``, through :data:`PAPER_ROW`.
    Used in *Tables 2 and 3* and *Tables 2 and 3 on LEAF's users*."""
    return {a: paper_value(paper, tab, PAPER_ROW.get(a, a), metric) for a in arms}


def paper_diff(paper: pd.DataFrame, a: str, b: str, metric: str = "micro_acc"):
    """The paper's a − b of ``metric`` (a, b: its row names) in both tables, as the claims print it
    ("FEMNIST +2.1, FedCelebA +1.2") with its numbers (:class:`~pflkit.verdicts.PaperMargin`), and,
    where ``a`` is a FeSEM row compared with another method, its margin over the strongest method of
    another family in each table and column.  Used by the claims of *Tables 2 and 3*."""
    from ..results import PaperMargin

    pairs = {DATASETS[t]: (paper_value(paper, t, a, metric), paper_value(paper, t, b, metric)) for t in DATASETS}
    text = ", ".join(f"{d} {x - y:+.1f}" for d, (x, y) in pairs.items())
    strongest = ""
    if a.startswith("FeSEM") and not b.startswith("FeSEM"):
        tops = {}
        for t, d in DATASETS.items():
            col = paper[(paper.table == t) & (paper.metric == metric) & ~paper.method.str.startswith("FeSEM")]
            tops[d] = col.loc[col.value.idxmax(), ["method", "value"]].tolist()
        other = {d: (m, v) for d, (m, v) in tops.items() if m != b}  # where the strongest is another method
        if other:
            strongest = ", ".join(f"{pairs[d][0] - v:+.1f} vs {m} on {d}" for d, (m, v) in other.items())
            text += f"; vs the strongest: {strongest}"
    return PaperMargin(text, datasets=list(pairs), values=list(pairs.values()),
                       strongest=strongest, vs=b)  # fmt: skip


def fesem_best_count(paper: pd.DataFrame) -> str:
    """In how many of the paper's columns (2 tables × 4 metrics) a FeSEM(K) row is the best (FeSEM-MA
    left out): "n of N".  Used by the claims of *Tables 2 and 3*."""
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


# ----------------------------------------------------------------------------- the claims


def verdict_row(text: str, v, paper: str = "", ours=None, digits: int = 2, **row) -> dict:
    """A claims-table row (:func:`~pflkit.claims.claim_row`) whose numbers show two decimals (ARI).
    Used by the claims of *Figure 4*, *Figure 5* and *§5.2: choosing K*."""
    return claim_row(text, v, paper, ours=ours, digits=digits, **row)


def table_claims(res, paper, plan, authors_of, *, k_sel, ref, best_other, fe_few, fe_most, fe_next, k_most, k_em,
                 eq7, init_steps, resolution, e_step: dict | None = None) -> dict:  # fmt: skip
    """The claims of Tables 2/3 and Figure 3 (name -> claims-table row), the headline first, at equal
    local work: FeSEM(K) chosen on validation (``k_sel``) against FedAvg's reference chosen on validation
    (``ref``: FedAvg given FeSEM's warm-up, or given its steps as extra rounds; read where both processed
    the same training samples), resting on its mechanisms (its centres against FeSEM(1); ``e_step``: the
    check that the E-steps move clients, :func:`cluster_claims`); then against plain FedAvg at the same
    rounds (as the paper compares), in the authors' evaluation (``authors_of``: arm -> per-seed values), in
    macro accuracy, against the strongest baseline, more centres, the best K and eq. 7's penalty.
    ``plan``: the seed plan of the accuracy claims."""
    from ..claims import claim, claim_row, mechanism
    from ..verdicts import verdict

    paper_avg = paper_diff(paper, k_sel, "FedAvg").prefixed(f"{k_sel} − FedAvg: ")
    v_auth = verdict(authors_of(k_sel) - authors_of(ref), budget=res.budget(k_sel, ref))  # the headline's reference
    centres = mechanism(
        f"Mechanism: {k_sel}'s centres beat one centre (FeSEM(1), the same head start; micro acc)",
        res.compare(k_sel, "FeSEM(1)", "pooled_acc", None, resolution), control="FeSEM(1): one centre, the same warm-up",
        paper="not measured", plan=plan, plan_name="centres",
    )  # fmt: skip
    acc = {"metric": "pooled_acc", "resolution": resolution}
    return {
        "beats FedAvg": claim(f"Tables 2/3: FeSEM beats FedAvg — headline, at equal local work ({k_sel} by validation "
                              f"vs {ref}, FedAvg's reference by validation: {init_steps} warm-up steps each; micro acc)",
                              res, k_sel, ref, paper=paper_avg, headline=True, plan=plan, plan_name="headline",
                              mechanism=[centres] + ([e_step] if e_step else []), **acc),
        "beats FeSEM(1)": centres,
        "unmatched": claim(f"Tables 2/3 as compared there: {k_sel} vs FedAvg without the head start (micro acc)", res,
                           k_sel, "FedAvg", paper=paper_avg, plan=plan, plan_name="unmatched", unit="rounds", **acc),
        "authors": claim_row(f"Tables 2/3 in the authors' evaluation, at equal local work: {k_sel}'s best centre on "
                             f"all clients vs {ref}'s model", v_auth, paper=paper_avg, ours_b=authors_of(ref).mean(),
                             note="one centre scored on every client's test images: a centre serves its own cluster, "
                             "so this measure penalises clustering by construction"),
        "macro": claim(f"§6.2: FeSEM's gain shows in the macro metrics (macro acc, {k_sel} vs {ref})", res, k_sel,
                       ref, metric="mean_acc", resolution=resolution,
                       paper=paper_diff(paper, k_sel, "FedAvg", "macro_acc").prefixed(f"{k_sel} − FedAvg: ")),
        "best": claim(f"Tables 2/3: FeSEM is the best method ({k_sel} vs the best baseline by validation, {best_other})",
                      res, k_sel, best_other, paper=f"a FeSEM(K) is best in {fesem_best_count(paper)} columns", **acc),
        "more centres": claim(f"Tables 2/3: more centres are better ({fe_most} vs {fe_few})", res, fe_most, fe_few,
                              paper=paper_diff(paper, fe_most, fe_few).prefixed(f"{fe_most} − {fe_few}: "), plan=plan,
                              plan_name="more centres", **acc),
        "best K": claim(f"Figure 3: K = {k_most} is the best K ({fe_most} vs {fe_next})", res, fe_most, fe_next,
                        paper=paper_diff(paper, fe_most, fe_next).prefixed(f"{fe_most} − {fe_next}: "), plan=plan,
                        plan_name="best K", **acc),
        "eq. 7": claim(f"ours: eq. 7's penalty in the paper's reading, λ/(m α_i), helps FeSEM({k_em}) ({eq7} vs "
                       f"FeSEM({k_em}))", res, eq7, f"FeSEM({k_em})", plan=plan, plan_name="eq. 7", **acc),
    }  # fmt: skip


def cluster_claims(res, trace: pd.DataFrame, ari: pd.DataFrame, ari_plan, *, fe_g, fr_hs, k_em, seeds, rounds,
                   ari_margin, settle_round, settle_margin, em_resolution) -> SimpleNamespace:  # fmt: skip
    """The claims about FeSEM(K = groups)'s clusters (``fe_g``), from the ARI per round (``trace``,
    :func:`trace_of`; ``ari``: its FeSEM(K) rows): the clusters are the groups (ARI − 1 within
    ``ari_margin``), more than random clusters (``fr_hs``), the E-steps move clients (the mechanism:
    the ARI at the last round against round 0, beyond ``em_resolution``) and §6.2's convergence within
    ``settle_round`` rounds (judged only where a client of ``fe_g`` moves).  Returns ``rows`` (the four
    claims-table rows, in that order) and the numbers the notes show: ``ari4`` (per seed), the verdicts
    ``v_groups``, ``v_chance``, ``v_e``, ``v_conv``, ``moves`` (arm × seed), ``any_moves``, ``g_moves``, ``late``.
    Used in *Figure 4: the clusters in detail*."""
    from ..claims import claim_row, mechanism
    from ..verdicts import verdict

    budget4 = res.improving(fe_g)
    ari4 = ari_at(trace, fe_g, rounds)
    v_groups = verdict(ari4 - 1, margin=ari_margin, budget=budget4, unit="ARI")  # within ari_margin of 1
    v_chance = verdict(  # against random clusters of the same K: the budget flag of both arms
        ari4 - ari_at(trace, fr_hs, rounds), budget=res.budget(fe_g, fr_hs), unit="ARI"
    )
    rows = [
        verdict_row(f"Figure 4: {k_em} distinguishable clusters (ours: {fe_g}'s clusters are the true groups, "
                    f"ARI − 1 within ±{ari_margin:g})", v_groups, paper="distinguishable clusters (a picture)",
                    plan=ari_plan, plan_name="clusters are the groups"),
        verdict_row(f"ours: {fe_g}'s clusters follow the groups more than random clusters (ARI − fixed-random's)",
                    v_chance, plan=ari_plan, plan_name="more than random clusters"),
    ]  # fmt: skip
    # does the E-step move anyone? clients that changed cluster between consecutive rounds (every round recorded)
    moves = ari[ari["round"] >= 1].groupby(["arm", "seed"]).moved.sum().unstack("seed")
    any_moves = int(np.nansum(moves.to_numpy()))  # arms with more seeds leave NaN for the others
    g_moves = int(moves.loc[fe_g].sum())  # the claims are about fe_g: vacuous when it moves nobody, whatever other K do
    late = int(ari[ari["round"] > settle_round].moved.sum())
    v_e = verdict(ari4 - ari_at(trace, fe_g, 0), budget=budget4, unit="ARI", resolution=em_resolution)
    if g_moves == 0:
        v_conv, conv_ours = verdict([]), f"no client of {fe_g} changed cluster in any round ({len(seeds)} seeds)"
    elif rounds <= settle_round:
        v_conv, conv_ours = verdict([]), f"{g_moves} moves in {fe_g}; only {rounds} rounds (≤ {settle_round})"
    else:  # settled by settle_round: the clusters of the last round agree with those of settle_round (ARI margin)
        v_conv = verdict(ari4 - ari_at(trace, fe_g, settle_round), margin=settle_margin, budget=budget4, unit="ARI")
        conv_ours = None
    e_ours = f"{v_e.mean:+.2f} on every seed: no client of {fe_g} changed cluster" if g_moves == 0 else None
    mech_e = mechanism(f"Mechanism: the E-steps move clients ({fe_g}, ARI last − round 0 beyond ±{em_resolution:g})",
                       v_e, control="the initial k-means (round 0)",
                       paper="clients change clusters as their models train", ours=e_ours, digits=2)  # fmt: skip
    rows.append(mech_e)
    rows.append(claim_row(f"§6.2: the clustering converges within 10 iterations ({fe_g}: ARI at the last round − "
                          f"at round {settle_round}, within ±{settle_margin:g})", v_conv,
                          paper="no more than 10 iterations", ours=conv_ours, digits=2, mechanism=mech_e))  # fmt: skip
    return SimpleNamespace(rows=rows, ari4=ari4, v_groups=v_groups, v_chance=v_chance, v_e=v_e, v_conv=v_conv,
                           moves=moves, any_moves=any_moves, g_moves=g_moves, late=late, mech_e=mech_e)  # fmt: skip


def readings_table(readings, group_of) -> pd.DataFrame:
    """Per (arm, seed) of the two readings of eq. 4.2 (``readings``: a sweep probed by
    :func:`margin_probe`): the clients' moves summed over rounds, the ARI at round 0 and at the last
    round, the median margin early and at the last round, and the micro accuracy."""
    traced = pd.DataFrame([r for a in readings.arms for r in trace_of(readings, a, group_of)])
    em = traced.groupby(["arm", "seed"], sort=False).agg(moves=("moved", "sum"), ari0=("ARI", "first"),
                                                         ari=("ARI", "last"))  # fmt: skip
    em = em.astype({"moves": int}).rename(columns={"ari0": "ARI round 0", "ari": "ARI last"})
    em["median margin, early"] = [margin_at(readings, a, s, 1) for a, s in em.index]
    em["median margin, last round"] = [margin_at(readings, a, s, -1) for a, s in em.index]
    em["micro acc"] = [readings.values(a, "pooled_acc")[s] for a, s in em.index]
    return em


def seed_plans(res, arms, seeds, group_of, *, pairs: dict, fe_g, fr_hs, rounds, cap, resolution, ari_margin,
               em_resolution, least: dict | None = LEAD_SEEDS, paper: pd.DataFrame | None = None):  # fmt: skip
    """The seeds the claims ask for (:func:`pflkit.verdicts.seed_plan` from the pilot seeds ``seeds``):
    one plan for the accuracy claims (``pairs``: name -> (a, b), micro acc a − b, the spread pooled
    over them; ``least``: pair name -> the fewest seeds it runs, for the lead claims) and one for the two cluster claims (ARI of ``fe_g`` against 1, within ``ari_margin``, and
    against random clusters ``fr_hs``); then each arm's seeds, the most either plan asks of it
    (:func:`pflkit.verdicts.arm_seeds`).  Given the ``paper``'s tables, the pair "headline" is planned as a
    headline: on the paper's FeSEM − FedAvg carried to its comparator's pilot accuracy, never on its mean.
    Returns (plan, ARI plan, arm -> seeds).
    Used in *Tables 2 and 3 in full*."""
    from ..experiments import arm_seeds, seed_plan

    heads = None
    if paper is not None and "headline" in pairs:
        a, b = pairs["headline"]
        heads = {"headline": paper_diff(paper, a, "FedAvg").carried(float(res.values(b, "pooled_acc").mean()))}
    plan = seed_plan({k: list(res.paired(a, b, "pooled_acc")) for k, (a, b) in pairs.items()}, cap=cap,
                     resolution=resolution, headlines=heads)  # fmt: skip
    ari = {a: final_ari(res, a, group_of, seeds=seeds, rounds=rounds) for a in (fe_g, fr_hs)}  # per pilot seed
    ari_claims = {  # the cluster claims (ARI): per seed, with the margin of a "within" claim
        "clusters are the groups": (ari[fe_g] - 1, [fe_g], ari_margin),
        "more than random clusters": (ari[fe_g] - ari[fr_hs], [fe_g, fr_hs], None),
    }
    ari_plan = seed_plan({k: list(d) for k, (d, _, _) in ari_claims.items()}, cap=cap, floor=em_resolution,
                         margins={k: m for k, (_, _, m) in ari_claims.items() if m is not None})  # fmt: skip
    by_acc = arm_seeds(plan, {k: list(v) for k, v in pairs.items()}, seeds, arms=arms, cap=cap, least=least)
    by_ari = arm_seeds(ari_plan, {k: a for k, (_, a, _) in ari_claims.items()}, seeds, arms=arms, cap=cap)
    return plan, ari_plan, {a: max(by_acc[a], by_ari[a], key=len) for a in arms}


def head_start_comparisons(*, fr, fr_hs, k_em, avg_hs) -> dict:
    """The head-start grid's comparisons, each changing one factor (clustering or head start): what
    changes -> (a, b), judged on a − b."""
    return {
        "clustering: fixed random clusters − one model, without head start": (fr, "FedAvg"),
        "clustering: fixed random clusters − one model, with head start": (fr_hs, "FeSEM(1)"),
        "clustering: the paper's EM − fixed random clusters, with head start": (f"FeSEM({k_em})", fr_hs),
        "head start: one model (FeSEM(1) − FedAvg)": ("FeSEM(1)", "FedAvg"),
        "head start: one model, FedAvg's average (FedAvg + head start − FedAvg)": (avg_hs, "FedAvg"),
        "head start: fixed random clusters": (fr_hs, fr),
    }


def k_claim(scans: dict, k_plan, *, groups, k_scan, resolution) -> tuple[dict, object]:
    """§5.2's claim: K = ``groups`` has the best validation accuracy of the scan (per seed, its margin
    over the best other K, :func:`k_margins`); not tested where the scan lacks it.  Returns the row and
    its verdict."""
    from ..verdicts import verdict

    if k_plan is not None:
        v_k, ours = verdict(list(k_margins(scans, groups)), resolution=resolution), None
    else:
        v_k, ours = verdict([]), f"K = {groups} not in the scan {k_scan}"
    row = verdict_row(f"§5.2: a few rounds on a sample find the K (ours: K = {groups}, the number of groups, has the "
                      "best validation accuracy; margin over the best other K)", v_k, ours=ours, digits=1,
                      paper="a method (no numbers)", plan=k_plan, plan_name="K")  # fmt: skip
    return row, v_k


def readings_claims(readings, em: pd.DataFrame, *, own, centre, fe_g, resolution, em_resolution) -> tuple[dict, dict]:
    """The two claims of the other reading of eq. 4.2 (``own``: W_i persisting, against ``centre``:
    restarting from the centre; ``em``: :func:`readings_table`): its E-steps move clients (a mechanism
    check, the ARI at the last round against round 0), and it beats the centre restart in micro accuracy."""
    from ..claims import claim, mechanism
    from ..verdicts import verdict

    v = verdict(em.loc[own, "ARI last"] - em.loc[own, "ARI round 0"], budget=readings.budget(own), unit="ARI",
                resolution=em_resolution)  # fmt: skip
    moved = int(em.loc[own, "moves"].sum())
    mech = mechanism("Mechanism, W_i persisting (eq. 4.2): the E-steps move clients (the same test)", v,
                     control="the initial k-means (round 0)", paper="clients change clusters as their models train",
                     digits=2, ours=None if moved else f"{v.mean:+.2f} on every seed: no client changed cluster")  # fmt: skip
    acc = claim(f"ours: with W_i persisting, {fe_g} beats itself restarting from the centre (micro acc)", readings,
                own, centre, metric="pooled_acc", resolution=resolution)  # fmt: skip
    return mech, acc


def head_start_claims(res, plan, *, fr, fr_hs, k_em, resolution, margin) -> tuple[dict, dict, object]:
    """The head-start grid's claims: the paper's EM against fixed random clusters at the same head start,
    the head start with fixed random clusters, and the interaction of the two factors (the head start's
    gain with random clusters minus its gain with one model, a no-difference verdict within ``margin``)."""
    from ..claims import claim
    from ..verdicts import verdict

    em_row = claim(f"ours: the paper's EM beats the authors' fixed random clusters at the same head start (K = {k_em})",
                   res, f"FeSEM({k_em})", fr_hs, metric="pooled_acc", resolution=resolution, plan=plan,
                   plan_name="EM vs fixed random")  # fmt: skip
    hs_row = claim("ours: the head start helps (fixed random clusters with against without)", res, fr_hs, fr,
                   metric="pooled_acc", resolution=resolution, plan=plan, plan_name="head start",
                   unit="rounds")  # the same rounds: the head start's extra work is what it measures  # fmt: skip
    x = res.finals().pivot_table(index="seed", columns="arm", values="pooled_acc")
    v_inter = verdict((x[fr_hs] - x[fr]) - (x["FeSEM(1)"] - x["FedAvg"]), margin=margin,
                      budget=res.budget(fr_hs, fr, "FeSEM(1)", "FedAvg"))  # fmt: skip
    return em_row, hs_row, v_inter


def initial_ari(res, arm: str, groups: dict, seeds) -> pd.DataFrame:
    """Per seed: how well k-means on the *initial* local models of ``arm`` (FeSEM at K = the number of
    groups; its probe's round 0) recovers the true groups (``groups``: seed -> each client's), over the
    whole model (FeSEM's Dist, its own initial clustering) and over the last layer (the authors' code).
    Used in *Figure 4: the clusters in detail*."""
    return pd.DataFrame([
        {"seed": s, "whole model (FeSEM's Dist)": adjusted_rand_score(groups[s], res.probes(arm, s)[0]["labels"]),
         "last layer (the authors' code)": adjusted_rand_score(groups[s], res.probes(arm, s)[0]["kmeans_last"])}
        for s in seeds]).set_index("seed")  # fmt: skip


# ----------------------------------------------------------------------------- the notebook's plumbing


def federations(base, seeds) -> tuple[dict, dict, object]:
    """The federations of ``base`` at ``seeds`` (seed -> Federation), their true groups (seed -> array)
    and ``group_of(seed)``: any seed's true groups (a seed past ``seeds``, which a claim's plan may
    add, is built once and kept in the groups dict).  Used in *A federation with known groups*."""
    feds = {s: Federation.from_config(dataclasses.replace(base, seed=s)) for s in seeds}
    groups = {s: true_groups(f) for s, f in feds.items()}

    def group_of(s):
        if s not in groups:
            groups[s] = true_groups(Federation.from_config(dataclasses.replace(base, seed=s)))
        return groups[s]

    return feds, groups, group_of


def arm_labels(k_choices, k_em: int) -> tuple:
    """The labels of the FeSEM arms: FeSEM(K) for ``k_choices``, FeSEM at K = ``k_em`` (the number of
    groups: Figure 4 and the cluster claims), the fewest and the most K (Figure 5; the paper's best),
    the runner-up K, the fixed random clusters without and with head start, and eq. 7's arm."""
    ks = sorted(k_choices)
    fe_g = f"FeSEM({k_em})"
    assert k_em in ks, "Figure 4 reads FeSEM at K = the number of groups"
    return ([f"FeSEM({k})" for k in k_choices], fe_g, f"FeSEM({ks[0]})", f"FeSEM({ks[-1]})", f"FeSEM({ks[-2]})",
            f"{fe_g} fixed-random", f"{fe_g} fixed-random + head start", f"{fe_g} + eq. 7")  # fmt: skip


def fesem_config(base, lr: float, options: dict, **extra):
    """FeSEM on ``base`` at ``lr`` with the chapter's ``options`` and ``extra`` ones.
    Used in *Tables 2 and 3 in full* and *§5.2: choosing K*."""
    return dataclasses.replace(base, method="fesem", lr=lr, options={**options, **extra})


def chapter_arms(main: dict, fesem, lr: dict, cfl_eps: dict, *, k_choices, k_em: int) -> tuple[dict, dict]:
    """The main sweep's arms and its baselines' (``main``: method_configs; ``fesem(**options)``: a
    FeSEM config; ``lr``: each label's pilot rate; CFL at its pilot ε): FeSEM(K) for ``k_choices``
    evaluated every round, the controls (one centre, fixed random clusters with and without head
    start, eq. 7 in the paper's reading), FedAvg + head start and FedAvg at its own rate run longer by
    FeSEM's warm-up steps (:func:`warmup_rounds`; the headline's two candidate references), then the baselines (FedAvg, CFL and IFCA evaluated every round: Figure 3's
    reference curve, the clusters per round).
    Used in *Tables 2 and 3 in full*."""
    base_arms = {a: dataclasses.replace(c, lr=lr[a]) for a, c in main.items() if a not in ("FeSEM", AVG_HS)}
    if "CFL" in base_arms:
        base_arms["CFL"] = dataclasses.replace(base_arms["CFL"], options={**base_arms["CFL"].options, **cfl_eps})
    for a in ("FedAvg", "CFL", "IFCA"):
        if a in base_arms:
            base_arms[a] = dataclasses.replace(base_arms[a], eval_every=1)
    *_, fr, fr_hs, eq7 = arm_labels(k_choices, k_em)
    arms = {f"FeSEM({k})": dataclasses.replace(fesem(centers=k), eval_every=1) for k in k_choices}
    arms |= {
        "FeSEM(1)": fesem(centers=1),
        fr_hs: fesem(centers=k_em, em="fixed-random", head_start=True),
        fr: fesem(centers=k_em, em="fixed-random"),
        eq7: fesem(centers=k_em, penalty_weight=PAPER_WEIGHT),
        AVG_HS: dataclasses.replace(main[AVG_HS], lr=lr[AVG_HS], eval_every=1),
    }
    if "FedAvg" in base_arms:
        fedavg = base_arms["FedAvg"]
        steps = get_method("fesem").resolve_options(fesem(centers=1).options)["init_steps"]
        arms[AVG_EQ] = dataclasses.replace(fedavg, rounds=fedavg.rounds + warmup_rounds(steps, fedavg.local_steps))
    return arms | base_arms, base_arms  # the long runs first: the two workers finish together


def warmup_rounds(init_steps: int, local_steps: int) -> int:
    """FedAvg's rounds that hold FeSEM's warm-up: ``init_steps`` minibatch steps a client, at
    ``local_steps`` a round, rounded up (the headline's reference at equal local work; its claim is
    read where both arms processed the same training samples)."""
    return math.ceil(init_steps / local_steps)


def cluster_trace(res, seeds, rounds: int, group_of) -> tuple[pd.DataFrame, pd.Series]:
    """``trace_of`` of every arm with cluster probes, and each arm's ARI at round ``rounds`` (mean over seeds).
    Used in *Tables 2 and 3 in full* (the ARI column) and *Figure 4*."""
    clustered = [a for a in res.arms if res.probes(a, seeds[0])]
    trace = pd.DataFrame([r for a in clustered for r in trace_of(res, a, group_of)])
    return trace, trace[trace["round"] == rounds].groupby("arm").ARI.mean()


def last_mean(res, arm: str, key: str, *, seeds, rounds: int) -> float:
    """The probe's ``key`` of ``arm`` at round ``rounds``, mean over ``seeds``.
    Used in *Tables 2 and 3 in full*."""
    return float(np.mean([res.probes(arm, s)[rounds][key] for s in seeds]))


def scan_frame(scans: dict) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """§5.2's scans (seed -> K × {val_mean_acc, intra_distance}) in one frame (accuracy in %), each
    seed's K of best validation accuracy and whether its intra-cluster distance falls with K."""
    scan = pd.concat(scans, names=["seed", "K"]).reset_index()
    scan["val_mean_acc"] *= 100
    k_pick = scan.pivot_table(index="seed", columns="K", values="val_mean_acc").idxmax(axis=1)
    intra_mono = scan.groupby("seed").intra_distance.apply(lambda d: d.is_monotonic_decreasing)
    return scan, k_pick, intra_mono


def k_seed_plan(scans: dict, groups: int, *, cap: int, resolution: float):
    """The seed plan of §5.2's claim from the pilot scans (``k_margins``, unpooled), or None where the
    scan lacks the number of groups (no margin to plan on)."""
    from ..experiments import seed_plan

    margin = k_margins(scans, groups)
    return None if margin is None else seed_plan({"K": list(margin)}, cap=cap, pool=False, resolution=resolution)


# ----------------------------------------------------------------------------- the paper profile: LEAF's users


LEAF_TABLE = {"femnist": "Table 2", "celeba": "Table 3"}  # the kit's dataset -> the paper's table of it
LEAF_SIZE = {"femnist": (805_263, 3_550), "celeba": (200_288, 9_343)}  # the paper's Table 1: images, devices
LEAF_TRAIN_SHARE = 0.8  # §6.1: 80 % of each device's data for training, 20 % for testing
PAPER_ORDER = {
    "micro_acc": "Micro-Acc",
    "micro_f1": "Micro-F1",
    "macro_acc": "Macro-Acc",
    "macro_f1": "Macro-F1",
}  # Tables 2/3


def leaf_users(name: str) -> int:
    """The users of LEAF dataset ``name`` on this machine: the paper's "every device" as a client count.
    Used by :func:`leaf_arms` (*Tables 2 and 3 on LEAF's users*)."""
    from ..federation import dataset

    return len(dataset(name).info["users"])


def leaf_arms(base, name: str, setting: dict, *, k_choices, baselines, fesem_options: dict, fedprox_mu: float,
              warmup: int, clusters: int = 3, clients: int | None = None) -> dict:  # fmt: skip
    """{label: config} of the paper's table on LEAF dataset ``name`` (§6.1): the natural partition with
    every user a client (``clients``; default: all the users on this machine, :func:`leaf_users`), all
    their images, ``setting``'s RunConfig fields (the paper's rate and local epochs for every method, the
    model, batch, momentum); FeSEM(K) for ``k_choices`` with ``fesem_options``, and the kit's
    ``baselines`` (:func:`method_configs`: CFL with ``warmup`` rounds without splits, FedProx at
    ``fedprox_mu``, IFCA with ``clusters`` models in HypoCluster(3)'s row).
    Used in *Tables 2 and 3 on LEAF's users*."""
    cfg = dataclasses.replace(base, dataset=name, partition="natural", clients=clients or leaf_users(name),
                              train_images=None, test_images=None, local_steps=None, **setting)  # fmt: skip
    main = method_configs(cfg, warmup, fesem_options=fesem_options, groups=clusters, baselines=baselines,
                          fedprox_mu=fedprox_mu, avg_hs_options={})  # fmt: skip
    arms = {
        f"FeSEM({k})": dataclasses.replace(main["FeSEM"], options={**fesem_options, "centers": k}) for k in k_choices
    }
    return arms | {a: c for a, c in main.items() if a not in ("FeSEM", AVG_HS)}


def leaf_table(result, paper: pd.DataFrame, name: str) -> pd.DataFrame:
    """Ours (mean ± 95 % CI over seeds, at the last round) beside the paper's table of LEAF dataset
    ``name`` (:data:`LEAF_TABLE`), every metric of it in its order, one row per arm of ``result``; the
    paper's numbers with one decimal, "—" where it has no row.  Used in *Tables 2 and 3 on LEAF's users*."""
    tab, arms = LEAF_TABLE[name], list(result.arms)
    out = pd.DataFrame({"method": arms}, index=arms)
    for metric, header in PAPER_ORDER.items():  # the paper's columns, in its order and under its headers
        t = paper_vs_ours(result, paper_column(paper, tab, metric, arms), metric=OURS[metric], label="paper")
        out[f"{header}, paper"] = [f"{v:.1f}" if v == v else "—" for v in t["paper"]]
        out[f"{header}, ours"] = t[f"ours {OURS[metric]}"]
    out["seeds"], out["still improving"] = t["seeds"], t["still improving"]
    out["the paper's row"] = [PAPER_ROW.get(a, a) if PAPER_ROW.get(a, a) in set(paper.method) else "—" for a in arms]
    return out.reset_index(drop=True)


def scan_seed(feds: dict, base, fesem, seed: int, *, ks, sample: int, rounds: int, store) -> pd.DataFrame:
    """One seed's §5.2 scan (kept in ``store``): FeSEM config ``fesem`` at every K of ``ks`` on ``sample``
    clients of the seed's federation (``feds[seed]``, or built from ``base``) for ``rounds`` rounds, one row
    per K (:func:`pflkit.experiments.choose_k`)."""
    fed = feds[seed] if seed in feds else Federation.from_config(dataclasses.replace(base, seed=seed))
    return pd.DataFrame(choose_k(dataclasses.replace(fesem, seed=seed), fed, ks=ks, sample=sample, rounds=rounds,
                                 store=store)).T  # fmt: skip


def leaf_steps(name: str, *, epochs: int, batch: int, val_fraction: float) -> int:
    """Optimiser steps of one client in one round on LEAF dataset ``name`` at the paper's sizes (Table 1,
    its 80 / 20 split, ``val_fraction`` of the training images held out): ``epochs`` passes over the
    mean client's training images in batches of ``batch``.  For :func:`paper_cost`."""
    images, devices = LEAF_SIZE[name]
    return epochs * math.ceil(images * LEAF_TRAIN_SHARE * (1 - val_fraction) / devices / batch)


def paper_cost(p: dict) -> dict:
    """The `paper` profile's runs and optimiser steps (batches), from the parameters cell's values ``p``
    (:func:`pflkit.paper.parameters` at `paper`): the paper's Tables 2 and 3 on every LEAF dataset of
    ``DATASETS`` (every arm at every seed; every device a client, at the sizes of the paper's Table 1),
    and the laboratory's grouped federation (the learning-rate and ε pilots at their grids, one extension of
    the rate grid per arm included; the main sweep and §5.2's scan at the seed cap; the two readings at
    the seeds).  A run's steps: rounds × clients × local steps; FedSGD takes one step a client and
    round; every FeSEM run that warms up adds its ``INIT_STEPS`` a client.  An upper bound.
    Named in *Cost*; read by the book's execution report (:func:`pflkit.paper.cost`)."""
    from ..federation import RunConfig

    val = RunConfig().val_fraction
    ks, base = list(p["K_CHOICES"]), len(p["BASELINES"])
    fedsgd = int("fedsgd" in p["BASELINES"])
    rounds, init = p["ROUNDS"], p["INIT_STEPS"]
    runs = steps = 0
    clients = {}
    for name in [d for d in p["DATASETS"] if d in LEAF_SIZE]:  # the tables: FeSEM(K) and the baselines, every seed
        m = LEAF_SIZE[name][1]
        local = leaf_steps(name, epochs=p["LEAF"][name]["local_epochs"], batch=p["LEAF"][name]["batch_size"],
                           val_fraction=val)  # fmt: skip
        n = len(p["SEEDS"])
        runs += n * (len(ks) + base)
        steps += n * (rounds * m * ((len(ks) + base - fedsgd) * local + fedsgd) + len(ks) * m * init)
        clients[name] = m
    c, s = p["CLIENTS"], p["LOCAL_STEPS"]  # the laboratory: the grouped federation

    def lab(arms: int, warm: int, sgd: int, seeds: int, n_rounds: int) -> tuple[int, int]:
        """Runs and steps of ``arms`` arms (``warm`` of them FeSEM with initial local models, ``sgd`` of
        them FedSGD) at ``seeds`` seeds."""
        return seeds * arms, seeds * (n_rounds * c * ((arms - sgd) * s + sgd) + warm * c * init)

    pilot_arms = 1 + base + 1  # method_configs: FeSEM, the baselines, FedAvg + head start
    grid = len(p["LR_GRID"]) + p["LR_EXTEND"]
    cap = p["SEED_CAP"]
    parts = [
        lab(pilot_arms * grid, 2 * grid, fedsgd * grid, len(p["PILOT_SEEDS"]), p["PILOT_ROUNDS"]),  # the learning-rate pilot
        (len(p["PILOT_SEEDS"]) * len(p["CFL_EPS1"]) * len(p["CFL_EPS2"]),
         len(p["PILOT_SEEDS"]) * len(p["CFL_EPS1"]) * len(p["CFL_EPS2"]) * p["PILOT_ROUNDS"] * c * s),  # CFL's ε
        lab(len(ks) + 5 + base, len(ks) + 4, fedsgd, max(cap, len(p["SEEDS"])), rounds),  # chapter_arms: 5 controls
        lab(2, 2, 0, len(p["SEEDS"]), rounds),  # where a round starts: the two readings
    ]  # fmt: skip
    scan_seeds = max(cap, len(p["CHOOSE_SEEDS"]))
    parts.append((scan_seeds * len(p["K_SCAN"]), scan_seeds * len(p["K_SCAN"]) * p["CHOOSE_SAMPLE"]
                  * (p["CHOOSE_ROUNDS"] * s + init)))  # §5.2: every K on the sample  # fmt: skip
    runs += sum(r for r, _ in parts)
    steps += sum(st for _, st in parts)
    return {
        "runs": runs, "steps": steps, "datasets": list(p["DATASETS"]),
        "clients": clients | {"laboratory": c}, "rounds": rounds, "seeds": len(p["SEEDS"]),
        "note": "Tables 2 and 3 on each LEAF dataset, every arm at every seed, every device a client at Table 1's "
                "sizes; the grouped laboratory: its pilots at their grids, its sweeps at the seed cap",
    }  # fmt: skip
