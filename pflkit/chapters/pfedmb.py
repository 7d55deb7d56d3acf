"""The pFedMB chapter's probes and measurements: every client's α during a run, FedAMP's
self-weights and IFCA's cluster picks, how α groups the clients (within and across the class pairs,
against their label mixes), the collaboration weights eq. 5 implies, the share of branch traffic a
threshold on α would keep, and the tables, claims and sentences built on them."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr

from ..claims import claim_row
from ..engine import Federation, RunConfig
from ..methods import display_name
from ..methods.pfedmb import BranchLayer
from ..pages import folded
from ..verdicts import RESOLUTION, fmt_interval, seeds_text, verdict

PFEDMB = display_name("pfedmb")


# ----------------------------------------------------------------------------- the paper profile's data and cost

PAIR_DATA = "cifar10-pairs"  # the pairs of §V-B at the paper profile (the book's: the kit's fashion-mnist-pairs)


TRAIN_SIZE = {"cifar10": 50_000, "cifar100": 50_000, "fashion-mnist": 60_000}  # the official training sets


def run_steps(p: dict, dataset: str, clients: int, rate: float, rounds: int, *, evals: int, mb: bool) -> int:
    """Optimiser steps (batches) of one run at the parameters ``p``: every round, ``rate`` of the ``clients``
    train E = ``p["EPOCHS"]`` epochs (pFedMB: E on α, then E on the branches) on their share of the training
    images the validation split leaves; at each of the ``evals`` evaluations every client fine-tunes E epochs."""
    images = TRAIN_SIZE[dataset] * p["DATA_FRACTION"] * (1 - p["VAL_FRACTION"]) / clients
    batches = -(-int(round(images)) // p["BATCH"]) * p["EPOCHS"]
    return rounds * max(1, round(clients * rate)) * batches * (2 if mb else 1) + evals * clients * batches


def pilot_configs(p: dict, methods: int) -> tuple[int, int]:
    """The configs a validation pilot (:func:`pflkit.chapters.pfedmb_sections.pilot_tuner`) runs on each pilot
    seed, every grid extended ``EXTEND`` times, as (pFedMB's, the other methods'): pFedMB's η_α with and
    without momentum, FedAMP's σ and the baselines' own grids (with ``methods`` > 2, Table II's pilots), then the learning rate of pFedMB at
    two initial scales and of ``methods`` other methods; an upper bound (a stage-2 config equal to a stage-1
    one is one run)."""
    ext, lr = p["EXTEND"], len(p["LR_GRID"]) + p["EXTEND"]
    alpha = sum(len(v) + ext for v in p["ALPHA_LR_GRID"].values())
    own = [v for grids in p["BASELINE_GRIDS"].values() for v in grids.values()]  # the baselines' own grids
    sigma = sum(len(v) + ext for v in [p["SIGMA_GRID"], *own]) if methods > 2 else 0
    return alpha + 2 * lr, sigma + methods * lr


def paper_cost(p: dict) -> dict:
    """The paper profile's runs and optimiser steps, from the parameters cell's values ``p`` at `paper`: the
    pairs (pilot, six arms at the seed cap), every Table II setting (pilot; pFedMB at each B and the eight
    other methods at TABLE2_RUN seeds; in a headline setting the eq. 6 control), Figure 5's setting (its B
    grid, with its own pilot where Table II does not run it).  An upper bound: every arm at its seed cap,
    every grid extended once."""
    from ..verdicts import SEED_CAP

    pilot_seeds, cap = len(p["PILOT_SEEDS"]), max(p["TABLE2_RUN"], len(p["SEEDS"]))
    parts: dict[str, list[int]] = {}  # part -> [runs, steps]

    def add(n_runs, each, part="pairs"):
        counted = parts.setdefault(part, [0, 0])
        counted[0] += n_runs
        counted[1] += n_runs * each

    # the pairs: pilot (Local, FedAvg, pFedMB); eq. 5 and eq. 6 at two scales, FedAvg, Local to the seed plan
    n, r = p["PAIR_CLIENTS"], p["PAIR_PILOT_ROUNDS"]
    mb, other = pilot_configs(p, 2)
    for k, is_mb in ((mb, True), (other, False)):
        add(k * pilot_seeds, run_steps(p, p["DATASETS"][0], n, 1.0, r, evals=2, mb=is_mb))
    pair_cap = max(SEED_CAP, len(p["SEEDS"]))
    add(6 * pair_cap, run_steps(p, p["DATASETS"][0], n, 1.0, p["PAIR_ROUNDS"], evals=p["PAIR_ROUNDS"], mb=True))
    settings = list(dict.fromkeys([*p["TABLE2_SETTINGS"], p["FIG5_SETTING"]]))
    for name in settings:
        clients = int(name.split(" / ")[1].split()[0])
        rate = dict(p["CLIENT_SETUPS"])[clients]
        data = (
            p["DATASETS"][0] if name.startswith(("random 2 ", "Dirichlet")) else p["DATASETS"][-1]
        )  # CIFAR-100: random K
        visits = p["DIRICHLET_VISITS"] if name.startswith("Dirichlet") else p["VISITS"]
        in_t2 = name in p["TABLE2_SETTINGS"]
        methods = 8 if in_t2 else 2
        pilot_rounds = round(p["PILOT_VISITS"] / rate)
        for k, is_mb in zip(pilot_configs(p, methods), (True, False)):
            add(k * pilot_seeds, run_steps(p, data, clients, rate, pilot_rounds, evals=2, mb=is_mb), name)
        rounds = round((visits if in_t2 else p["FIG5_VISITS"]) / rate)
        branches = len(p["FIG5_BRANCHES"] if name == p["FIG5_SETTING"] else p["BRANCH_CHOICES"])
        headline = in_t2 and not name.startswith("random 2 ")
        mb_runs = (branches + (1 if headline else 0)) * cap  # pFedMB at each B; the eq. 6 control
        add(mb_runs, run_steps(p, data, clients, rate, rounds, evals=2, mb=True), name)
        probed = 2 if in_t2 else 0  # FedAMP and IFCA, evaluated AMP_EVALS and IFCA_EVALS times
        add((methods - probed) * cap, run_steps(p, data, clients, rate, rounds, evals=2, mb=False), name)
        for evals in (p["AMP_EVALS"], p["IFCA_EVALS"])[:probed]:
            add(cap, run_steps(p, data, clients, rate, rounds, evals=evals, mb=False), name)
    return {
        "runs": sum(r for r, _ in parts.values()), "steps": sum(n for _, n in parts.values()),
        "datasets": list(p["DATASETS"]), "by_part": {k: tuple(v) for k, v in parts.items()},
        "clients": sorted({n for n, _ in p["CLIENT_SETUPS"]} | {p["PAIR_CLIENTS"]}),
        "rounds": {"pairs": p["PAIR_ROUNDS"], "Table II, visits a client": p["VISITS"]},
        "seeds": {"pilot": pilot_seeds, "cap": cap, "pairs cap": pair_cap},
        "note": "the pairs, Table II's six settings and Figure 5: pilots on their grids (each extended once), every "
        "arm at its seed cap; pFedMB's rounds count E epochs on α and E on the branches, evaluations E fine-tuning "
        "epochs a client",
    }  # fmt: skip


# ----------------------------------------------------------------------------- arms and configs


def eval_every(rounds: int) -> int:
    """The evaluation interval of a run of ``rounds`` rounds: the start of the last fifth and the
    end are evaluated, what the budget flag (still improving over the last fifth) needs."""
    return max(1, rounds - -(-rounds // 5))


def main_run(cfg: RunConfig, rounds: int, every: int | None = None) -> RunConfig:
    """A pilot's chosen config at an experiment's budget: ``rounds`` rounds, evaluated every
    ``every`` rounds (by default as :func:`eval_every` says)."""
    return dataclasses.replace(cfg, rounds=rounds, eval_every=every or eval_every(rounds))


def arm(setting: str, label: str) -> str:
    """The name of a method's arm in one setting of Table II or Figure 5."""
    return f"{setting} · {label}"


def mb_label(b: int) -> str:
    """The label of pFedMB with ``b`` branches."""
    return f"{PFEDMB} B={b}"


def setting_base(setting_cfg: dict, visits: int, train: dict) -> RunConfig:
    """The config of one Table II setting (its partition options ``setting_cfg``, the training
    options ``train``) with every client visited ``visits`` times on average: visits ÷ the share
    of clients taking part in a round, in rounds.  The setting's own dataset (``setting_cfg["dataset"]``),
    where it names one, replaces ``train``'s."""
    rounds = int(round(visits / setting_cfg["sample_rate"]))
    return RunConfig(rounds=rounds, eval_every=eval_every(rounds), **{**train, **setting_cfg})


def setting_arms(
    name: str, setting_cfg: dict, picks: dict, branches, methods, visits: int, *, amp_evals: int, ifca_evals: int
) -> dict[str, RunConfig]:
    """The runs of one setting (``name``, its partition options ``setting_cfg``) at ``visits``
    visits per client, from a pilot's chosen configs ``picks`` (label -> config): pFedMB at every
    number of branches in ``branches``, then every method in ``methods``.  FedAMP's runs are
    evaluated ``amp_evals`` times and IFCA's ``ifca_evals`` times (for their probes); the others as
    :func:`eval_every` says."""
    rounds = int(round(visits / setting_cfg["sample_rate"]))

    def at(cfg, every, **kw):
        return dataclasses.replace(cfg, **setting_cfg, rounds=rounds, eval_every=every, **kw)

    mb = picks[PFEDMB]
    out = {
        arm(name, mb_label(b)): at(mb, eval_every(rounds), options={**mb.options, "branches": b})
        for b in sorted(branches, reverse=True)
    }
    evals = {"fedamp": amp_evals, "ifca": ifca_evals}
    for m in methods:
        out[arm(name, display_name(m))] = at(
            picks[display_name(m)], max(1, rounds // evals[m]) if m in evals else eval_every(rounds)
        )
    return out


# ----------------------------------------------------------------------------- probes


def pair_alpha(rnd, row, server, clients):
    """Figure 3: every client's α (one row of branch weights, shared by all layers) after every
    evaluated round; None after setup and in runs without a shared α."""
    if rnd == 0 or not server.opt.get("shared_alpha"):
        return None
    return [c.alpha()[0].tolist() for c in clients]


def table2_probe(rnd, row, server, clients):
    """Table II's runs.  pFedMB: every client's α (layers × branches) after the last round.
    FedAMP, after every evaluated round: its self-weights ξ_ii (mean, least, most over the clients),
    how peaked ξ_i,j is over the other clients (largest ÷ mean; 1 is uniform) and the median squared
    distance between the clients' models, the scale σ acts on.  IFCA, after every evaluated round:
    the cluster model each client picked and how many models there are.  None for other methods."""
    method = server.cfg.method
    if method == "pfedmb" and rnd == server.cfg.rounds:
        return [c.alpha().tolist() for c in clients]
    if method == "ifca" and rnd > 0:
        return {"clusters": [c.cluster for c in clients], "models": len(server.thetas)}
    if method != "fedamp" or rnd == 0:
        return None
    xi = torch.stack([server.xi(i) for i in range(len(server.w))])
    off = ~torch.eye(len(xi), dtype=torch.bool)
    others = xi[off].view(len(xi), -1)
    mean = others.mean(1)
    flat = server.flat()
    return {
        "self": float(xi.diagonal().mean()),
        "self_min": float(xi.diagonal().min()),
        "self_max": float(xi.diagonal().max()),
        "peak": float((others.max(1).values[mean > 0] / mean[mean > 0]).mean()) if (mean > 0).any() else None,
        "d2": float((torch.cdist(flat, flat) ** 2)[off].median()),
    }


def amp_probe(rnd, row, server, clients):
    """:func:`table2_probe`'s record, and after the last round FedAMP's self-weight ξ_ii in every
    round ([least, mean, most] over the clients it sent a cloud model to), as the server recorded
    them when it sent them."""
    out = table2_probe(rnd, row, server, clients)
    if out is not None and rnd == server.cfg.rounds:
        out["self_trace"] = [[min(r.values()), float(np.mean(list(r.values()))), max(r.values())]
                             for r in server.self_trace]  # fmt: skip
    return out


# ----------------------------------------------------------------------------- measurements


def pair_scores(a, pid, *, concentrated: float) -> dict:
    """How the clients' α (clients × branches) follow the class pairs ``pid`` (each client's pair):
    the mean cosine similarity of α within pairs (other clients only) and across pairs, the pairs
    whose clients share their largest branch with more than ``concentrated`` of α's weight on it
    everywhere, how many distinct branches the pairs' mean α puts first, and the mean largest α_b."""
    unit = a / np.linalg.norm(a, axis=1, keepdims=True)
    cos = unit @ unit.T
    same = pid[:, None] == pid[None, :]
    off_diag = ~np.eye(len(pid), dtype=bool)
    dominant = a.argmax(1)
    groups = np.unique(pid)
    agree = [len(set(dominant[pid == p])) == 1 and a[pid == p].max(1).min() > concentrated for p in groups]
    return {
        "within": cos[same & off_diag].mean(),
        "across": cos[~same].mean(),
        "pairs on one branch": int(np.sum(agree)),
        "distinct branches": len({int(a[pid == p].mean(0).argmax()) for p in groups}),
        "mean max α": a.max(1).mean(),
    }


def per_seed(series: pd.Series, label: str, seeds) -> pd.Series:
    """One variant's values (``series`` indexed by variant and seed) over ``seeds``, in that order."""
    return series.xs(label, level="variant").reindex(seeds)


def collaboration(a, n, weighted: bool) -> np.ndarray:
    """The weight C_ij that client i's model gives client j's upload after one aggregation, from
    the clients' α (clients × branches) and training-set sizes ``n``: with α-weighted averaging
    (eq. 5) C_ij = n_j Σ_b α^i_b α^j_b / Σ_k n_k α^k_b; without (eq. 6) n_j / Σ_k n_k for every i."""
    if not weighted:
        return np.tile(n / n.sum(), (len(n), 1))
    usage = (n[:, None] * a).sum(0)  # Σ_k n_k α^k_b
    return (a / usage) @ (n[:, None] * a).T


def alpha_data_rho(alphas, counts) -> float:
    """Whether clients with similar label mixes get similar α: over the pairs of clients, the rank
    correlation (Spearman) between the cosine similarity of their α (every layer's, flattened) and
    that of their class counts."""
    al = np.asarray(alphas)
    al = al.reshape(len(al), -1)
    mix = np.asarray(counts, dtype=float)
    upper = np.triu_indices(len(al), 1)
    cos = [(u / np.linalg.norm(u, axis=1, keepdims=True)) @ (u / np.linalg.norm(u, axis=1, keepdims=True)).T
           for u in (al, mix)]  # fmt: skip
    return spearmanr(cos[0][upper], cos[1][upper]).statistic


def alpha_follows_data(result, a: str, cfg: RunConfig) -> pd.Series:
    """Per seed of pFedMB's arm ``a`` (its config ``cfg``): :func:`alpha_data_rho` of the clients'
    α after the last round (:func:`table2_probe`'s record) against the class counts of their
    training data in the partition that seed draws."""
    out = {}
    for s in [s for s in result.seeds if (a, s) in result.records]:
        probe = result.probes(a, s)
        fed = Federation.from_config(dataclasses.replace(cfg, seed=s))
        out[s] = alpha_data_rho(probe[max(probe)], fed.partition.class_counts(fed.ds.y_train.cpu().numpy()))
    return pd.Series(out)


def final_alphas(result, a: str, seeds) -> list:
    """The probe's record of arm ``a`` after its last probed round, for every seed in ``seeds``."""
    return [max(result.probes(a, s).items())[1] for s in seeds]


def kept_share(client_alphas, tau: float, layer_size) -> float:
    """The share of pFedMB's branch bytes a client would still exchange if it dropped every branch
    whose α is below ``tau``, averaged over the clients; ``client_alphas``: per client, α as
    layers × branches, or one row shared by all layers; ``layer_size``: one branch's parameters in
    each layer."""
    layer_size = np.asarray(layer_size)
    shares = []
    for a in client_alphas:
        a = np.asarray(a)
        rows = a if len(a) == len(layer_size) else np.repeat(a, len(layer_size), axis=0)  # shared α: one row
        shares.append(((rows >= tau) * layer_size[:, None]).sum() / (rows.shape[1] * layer_size.sum()))
    return float(np.mean(shares))


def seed_table(finals: pd.DataFrame, metric: str, settings, *, others, chosen_b: dict) -> pd.DataFrame:
    """(setting, seed) × method: ``metric`` of Table II's rows ``others`` and of pFedMB at the B
    chosen in each setting (``chosen_b``), from a sweep's finals, on the seeds every row ran."""
    f = finals.assign(setting=finals.arm.str.split(" · ").str[0], label=finals.arm.str.split(" · ").str[1])
    out = {}
    for name in settings:
        g = f[f.setting == name].pivot(index="seed", columns="label", values=metric)
        out[name] = g[others].assign(**{PFEDMB: g[mb_label(chosen_b[name])]}).dropna()
    return pd.concat(out, names=["setting", "seed"])


def worst_gap(finals: pd.DataFrame, metric: str, settings, *, others, chosen_b: dict) -> pd.DataFrame:
    """Seed × method: how far each method falls behind the best method of its setting, at worst over
    ``settings`` (points of ``metric``; :func:`seed_table`'s rows)."""
    acc = seed_table(finals, metric, settings, others=others, chosen_b=chosen_b)
    return acc.rsub(acc.max(axis=1), axis=0).groupby("seed").max()


def pair_diffs(res, *, eq5: str, eq6: str, alt: str) -> dict[str, pd.Series]:
    """The per-seed differences of the accuracy claims of Table I and Figure 4 (what their seed
    plan sizes): pFedMB (``eq5``) against FedAvg and Local, eq. 5 against eq. 6 (``eq6``) at the end
    and in mean accuracy over the rounds, pFedMB against FedAvg over the rounds, and eq. 5 against
    eq. 6 at the other initial scale (the arms named with the suffix ``alt``)."""
    auc = res.history().groupby(["arm", "seed"])["mean_acc"].mean()  # mean accuracy over the rounds
    return {
        "pFedMB − FedAvg": res.paired(eq5, "FedAvg"),
        "pFedMB − Local": res.paired(eq5, "Local"),
        "eq. 5 − eq. 6": res.paired(eq5, eq6),
        "eq. 5 − eq. 6, over the rounds": (auc[eq5] - auc[eq6]).dropna(),
        "pFedMB − FedAvg, over the rounds": (auc[eq5] - auc["FedAvg"]).dropna(),
        "eq. 5 − eq. 6" + alt: res.paired(eq5 + alt, eq6 + alt),
    }


def t2_diffs(res, claims: dict) -> dict[str, pd.Series]:
    """Per claim of Table II and Figure 5, its paired differences over the seeds every arm of the
    claim ran; ``claims``: name -> (list of (sign, a, b) whose differences a − b add up to the
    claim's, margin)."""
    out = {}
    for name, (terms, _) in claims.items():
        parts = [sign * res.paired(a, b) for sign, a, b in terms]
        out[name] = sum(parts[1:], parts[0]).dropna()
    return out


# ----------------------------------------------------------------------------- tables, claims, words


def pilot_summary(tables: dict) -> pd.DataFrame:
    """One row per (setting, pilot arm) of the pilots' tables (setting -> table): every grid value
    with its validation accuracy, the value chosen and whether it sits at the grid's edge."""
    rows = []
    for name, t in tables.items():
        t = t.reset_index()
        for method, g in t.groupby("method", sort=False):
            pick_row = g[g.chosen == "yes"].iloc[0]
            rows.append(
                {
                    "setting": name,
                    "pilot arm": method,
                    "validation accuracy (%) per value": " | ".join(
                        f"{r.setting}: {r.val_mean_acc}" for r in g.itertuples()
                    ),
                    "chosen": pick_row.setting,
                    "at the grid's edge": pick_row["at the grid's edge"],
                }
            )
    return pd.DataFrame(rows).set_index(["setting", "pilot arm"])


def chosen_text(chosen: dict) -> str:
    """The values a pilot chose (label -> config), in words: every method's learning rate, pFedMB's
    η_W, η_α, momentum on α and initial scale, FedAMP's σ."""
    mb = chosen[PFEDMB]
    mom = mb.options["alpha_momentum"]
    parts = [f"{k} η = {c.lr:g}" for k, c in chosen.items() if k != PFEDMB]
    parts.append(
        f"{PFEDMB}: η_W = {mb.lr:g}, η_α = {mb.options['alpha_lr']:g} "
        f"{'with momentum ' + format(mb.momentum if mom < 0 else mom, 'g') if mom != 0 else 'without momentum'} on α, "
        f"branches {'× √B' if mb.options['scale_init'] else 'as drawn'}"
    )
    if "FedAMP" in chosen:
        parts.append(f"FedAMP σ = {chosen['FedAMP'].options['sigma']:g}")
    return "; ".join(parts)


def derived_claim(text, diffs, res, arms, paper="", unit="points", margin=None, **row) -> dict:
    """A claims-table row for a per-seed difference that a sweep's tables have no column for (α
    similarity, accuracy over the rounds, gaps across settings): the book's rule on those paired
    differences, its budget flag from ``arms`` of ``res``, with the "no difference" resolution of a
    directional claim in points (``row``: :func:`~pflkit.claims.claim_row`'s options)."""
    resolution = RESOLUTION if unit == "points" and margin is None else None
    v = verdict(list(diffs), margin=margin, budget=res.budget(*arms), unit=unit, resolution=resolution)
    return claim_row(text, v, paper, digits=2, **row)


def paper_diff(table, a: str, b: str) -> str:
    """The paper's difference a − b with both values, from ``table`` (method -> value); empty when
    the table lacks either."""
    return f"{table[a] - table[b]:+.2f} ({table[a]:.2f} vs {table[b]:.2f})" if a in table and b in table else ""


def amp_regime(v, *, self_local: float, self_average: float, peak_flat: float) -> str:
    """Which degenerate form FedAMP's last round takes (``v``: as :func:`amp_state` reads it):
    "local" (self-weight above ``self_local``), "average" (self-weight below ``self_average`` and ξ
    over the others below ``peak_flat`` × uniform, or undefined), or "" (attention in between)."""
    if v["self"] > self_local:
        return "local"
    if v["self"] < self_average and (v["peak"] != v["peak"] or v["peak"] < peak_flat):
        return "average"
    return ""


def amp_state(v, *, self_local: float, self_average: float, peak_flat: float) -> str:
    """FedAMP's last round in words (a description, not a verdict), from ``v`` (its mean
    self-weight ``self``, how peaked ξ is over the others ``peak``, the median squared distance
    ``d2`` and the chosen ``σ (chosen)``): close to Local training above ``self_local``, close to a
    plain average below ``self_average`` with ξ over the others below ``peak_flat`` × uniform."""
    xi = f"mean self-weight ξ_ii {v['self']:.2f} at the last round (over clients and seeds)"
    regime = amp_regime(v, self_local=self_local, self_average=self_average, peak_flat=peak_flat)
    if regime == "local":
        return f"{xi}, above {self_local:g}: close to Local training with a proximal term"
    if regime == "average":
        return (
            f"{xi}, below {self_average:g}, and ξ over the others {v['peak']:.2f} × uniform at its peak "
            f"(below {peak_flat:g}): each cloud model is close to the plain average of the others"
        )
    return (
        f"{xi}, between {self_average:g} and {self_local:g}; ξ over the others peaks at {v['peak']:.2f} × "
        f"uniform; median squared distance {v['d2']:.2g} against σ = {v['σ (chosen)']:g}"
    )


def diverged_note(result, a: str, notes: dict) -> str:
    """The seeds on which arm ``a``'s run diverged (a verdict leaves them out) and its learning rate
    there, and whether it had fallen back from the pilot's choice (``notes``: arm -> the fallback's
    note); empty when no run diverged."""
    lost = result.values(a, "diverged").astype(bool)
    if not lost.any():
        return ""
    back = re.sub(r"\blr\b", "learning rate", notes[a].split(":")[0]) if a in notes else ""
    return (f"{a.split(' · ')[1]} diverged on {seeds_text(list(lost[lost].index))} (its training loss "
            f"left the kit's bound) at learning rate {result[a, lost[lost].index[0]]['config']['lr']:g}"
            + (f", after falling back from the pilot's choice ({back})" if back else ""))  # fmt: skip


# ----------------------------------------------------------------------------- words for the page

VALUE_WORDS = {
    "lr": "η",
    "alpha_lr": "η_α",
    "sigma": "σ",
    "personal_lr": "personal η",
    "lam": "λ",
    "mu": "μ",
}  # a pilot grid's option, as the page writes it


def value_words(setting: str) -> str:
    """A pilot grid value as the page writes it: "alpha_lr=0.1" -> "η_α = 0.1", "lr=0.03" ->
    "η = 0.03", "sigma=10" -> "σ = 10" (any other "name=value" -> "name = value")."""
    name, sep, value = setting.partition("=")
    return f"{VALUE_WORDS.get(name, name)} = {value}" if sep else setting


def pilot_table(tuning) -> pd.DataFrame:
    """A pilot's table (:meth:`pflkit.tuning.Tuning.table`: every arm's validation accuracy over the
    pilot seeds, whether it was chosen, whether a choice sits at its grid's edge) with each grid
    value in words (:func:`value_words`)."""
    return tuning.table().rename(index=value_words, level="setting")


def cell_text(values: pd.Series, seeds, worst: pd.Series | None = None) -> str:
    """A table cell over ``seeds`` only (``values``: per seed): mean ± 95 % interval, with the
    number of seeds when some of ``seeds`` are missing (diverged, not run), "—" when none is there;
    ``worst`` (per seed): the worst 10 % of the clients' accuracy, its mean over those seeds in brackets."""
    from ..pages import with_worst

    v = values[values.index.isin(list(seeds))].dropna()
    if v.empty:
        return "—"
    cell = fmt_interval(v) + (f" ({seeds_text(len(v))})" if len(v) < len(list(seeds)) else "")
    return cell if worst is None else with_worst(cell, worst[worst.index.isin(list(v.index))])


def is_our_check(row: dict) -> bool:
    """A claims-table row that is a check of our own, not a claim of the paper: a mechanism check
    or a row marked "(our diagnostic)"."""
    return row.get("kind") == "mechanism" or "(our diagnostic)" in row["claim"]


def strength(rho: float) -> str:
    """The size of a rank correlation in a word: below 0.1 "very weak", below 0.3 "weak", below 0.5
    "moderate", else "strong" (by its absolute value)."""
    a = abs(rho)
    return "very weak" if a < 0.1 else "weak" if a < 0.3 else "moderate" if a < 0.5 else "strong"


def grid_used(grid: str, mb: RunConfig) -> bool:
    """Whether a pilot grid's choice is one the runs use: every grid but pFedMB's two variants not
    chosen (momentum on α or not, by ``mb``'s options; the branches' initial scale)."""
    if not grid.startswith(PFEDMB):
        return True
    mom = "no momentum" if mb.options["alpha_momentum"] == 0 else "momentum"
    scale = "branches × √B" if mb.options["scale_init"] else "branches as drawn"
    return grid in (f"{PFEDMB}, {mom} on α", f"{PFEDMB}, {scale}")


# ----------------------------------------------------------------------------- tables as the page shows them


def _setting_short(name: str) -> str:
    """A Table II column's setting without its suffixes: "random 2 classes / 15 clients (no
    headline)" -> "random 2 classes, 15 clients"."""
    return name.split(" (")[0].replace(" / ", ", ")


def table2_view(table: pd.DataFrame) -> pd.DataFrame:
    """Table II as the page shows it: the columns "<setting> · ours" and "<setting> · paper <data>"
    grouped under their setting and the paper's dataset (two header rows: "<setting> (<data>)", then
    "ours" or "paper"), the paper's numbers with two decimals, "—" where a cell is missing, and
    "mean ± interval" kept on one line (non-breaking spaces)."""
    data = {}
    for col in table.columns:
        setting, _, part = col.rpartition(" · ")
        if part.startswith("paper"):
            data[setting] = part.removeprefix("paper").strip()
    out = pd.DataFrame(index=table.index)
    top, sub = [], []
    for col in table.columns:
        setting, _, part = col.rpartition(" · ")
        if part.startswith("paper"):
            values, part = table[col].map(lambda v: "—" if pd.isna(v) else f"{v:.2f}"), "paper"
        else:
            values = table[col].map(lambda v: "—" if pd.isna(v) else str(v).replace(" ± ", "\u00a0±\u00a0"))
        out[col] = values
        top.append(_setting_short(setting) + (f" ({data[setting]})" if data.get(setting) else ""))
        sub.append(part)
    out.columns = pd.MultiIndex.from_arrays([top, sub])
    out.index.name = None
    return out


def table3_view(table: pd.DataFrame) -> pd.DataFrame:
    """Table III as the page shows it: per setting of ours, the B validation chose, the grid it
    chose from, the paper's tuned B and the paper's setting, under short headers."""
    out = table.rename(
        columns={
            "B chosen by validation": "B (ours, validation)",
            "choices": "grid",
            "paper's tuned B": "B (paper)",
            "paper's setting": "the paper's setting",
        }
    )
    out.index.name = "setting (ours, Fashion-MNIST)"
    return out


def setup_rows(
    *,
    train_images,
    data_fraction: float,
    width: str,
    branch_choices,
    pair_clients: int,
    pair_branches: int,
    settings,
    epochs: int,
    paper_epochs: int,
    batch: int,
    momentum: float,
    pair_rounds: int,
    visits: int,
    dirichlet_visits: int,
    fig5_visits: int,
    seeds,
    cap: int,
) -> list[tuple[str, str, str]]:
    """The rows of the chapter's setup card (:func:`pflkit.pages.setup_card`): what every run is,
    ours beside the paper's (§V)."""
    images = "all 60,000" if train_images is None else f"{train_images:,} ({data_fraction:g} of the 60,000)"
    longer = f" ({dirichlet_visits} in Dirichlet 0.4)" if dirichlet_visits != visits else ""
    return [
        ("Data", f"Fashion-MNIST, {images} training images", "CIFAR-10 and CIFAR-100"),
        (
            "Splits",
            f"pairs: {pair_clients} clients, two per class pair; Table II: {', '.join(settings)}",
            "pairs; random 2 classes and Dirichlet 0.4 (CIFAR-10), random 20 classes (CIFAR-100); 15 and 50 clients",
        ),
        (
            "Model",
            f"LeNet ({width} and {2 * int(width)} filters); B = {pair_branches} in the pairs, "
            f"else chosen on validation among {', '.join(map(str, branch_choices))}",
            "CNN (6 and 16 filters); B = 5 in the pairs, else tuned",
        ),
        (
            "Training",
            f"E = {epochs}, batch {batch}, SGD momentum {momentum:g}; {pair_rounds} rounds (pairs), {visits} visits "
            f"a client{longer} (Table II), {fig5_visits} (Figure 5)",
            f"E = {paper_epochs}, batch 64; until convergence",
        ),
        (
            "Tuning",
            "every learning rate, pFedMB's η_α, initial scale and B, FedAMP's σ: on validation",
            "on validation (values not reported)",
        ),
        (
            "Seeds",
            f"{', '.join(map(str, seeds))}, then as many as a claim's plan asks (at most {cap})",
            "3 runs, no spread reported",
        ),
    ]


def short_claim(text: str) -> str:
    """A claim without its trailing parenthesis (the comparator and how it was chosen, the quantity
    measured): "Table II, X: pFedMB beats the strongest other method (FedAvg, on validation)" ->
    "Table II, X: pFedMB beats the strongest other method"; a claim that does not end in one is kept."""
    t = text.rstrip()
    if not t.endswith(")"):
        return t
    depth = 0
    for i in range(len(t) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(t[i], 0)
        if depth == 0:
            return t[:i].rstrip() if i > 0 else t
    return t


class Compact:
    """The "What reproduced" table: each claim (without its trailing parenthesis, :func:`short_claim`)
    with ours and the verdict; the whole table (claims in full, the paper's numbers, the notes) folded
    below it."""

    def __init__(self, table: pd.DataFrame, title: str):
        self.table, self.title = table, title

    def shown(self) -> pd.DataFrame:
        """The rows as shown: short claims (the full claim where two would read alike), ours on one
        line, the seeds it rests on, and the verdict."""
        short = [short_claim(c) for c in self.table.index]
        if len(set(short)) < len(short):
            short = list(self.table.index)
        ours = self.table["ours (a − b, 95 % CI)"].astype(str)
        # "(10 seeds)", "(5 of 10 planned seeds)", "(90 %, 10 seeds)": the seeds to their column, a level kept
        seeds = ours.str.extract(r" \((?:\d+ %, )?(\d+(?: of \d+ planned)?) seeds?\)$")[0]
        ours = ours.str.replace(r" \((\d+ %), [^()]*seeds?\)$", r" (\1)", regex=True)
        ours = ours.str.replace(r" \([^()]*seeds?\)$", "", regex=True)
        # a number: its value (with its unit) on one line, its interval on one line
        number = ours.str.match(r"^[+-]\d")
        ours = ours.where(~number, ours.str.replace(" [", "\n[", regex=False).str.replace(" ", "\u00a0"))
        ours = ours.str.replace("\n", " ", regex=False)
        out = pd.DataFrame(
            {"ours (a − b, 95 % CI)": ours.to_numpy(), "seeds": seeds.fillna("—").to_numpy(),
             "verdict": self.table["verdict"].to_numpy()},
            index=pd.Index(short),
        )  # fmt: skip
        return out

    def _repr_html_(self) -> str:
        import html

        from ..pages import missing_as_dash

        shown = self.shown()
        widths = ["46%", "25%", "8%", "21%"]  # the claim, ours, the seeds, the verdict: the column's width
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in ["claim", *shown.columns])
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (claim, *row)) + "</tr>"
            for claim, row in zip(shown.index, shown.itertuples(index=False))
        )
        shown = (
            '<table class="dataframe" style="table-layout: fixed; width: 100%; font-size: 90%">'
            + "<colgroup>" + "".join(f'<col style="width: {w}">' for w in widths) + "</colgroup>"
            + f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        )  # fmt: skip
        return missing_as_dash(shown) + folded(self.table, self.title)._repr_html_()


def mechanism_line(alpha_rows: dict, eq5_rows: dict) -> str:
    """Our two mechanism checks of Table II in one sentence (``alpha_rows``, ``eq5_rows``: setting ->
    the row of :func:`pflkit.claims.mechanism`): each check's verdict word with its flags per
    setting; the numbers are in the claims table."""
    from ..claims import verdict_text

    def words(rows: dict) -> str:
        return "; ".join(f"**{verdict_text(r, bold=False)}** in {n}" for n, r in rows.items())

    return (
        f"*Our checks.* Clients with similar label mixes get similar α: {words(alpha_rows)}. "
        f"α-weighted averaging (eq. 5) beats plain averaging (eq. 6): {words(eq5_rows)}."
    )


def eq2_table(mb, x: torch.Tensor) -> pd.DataFrame:
    """Eq. (2) layer by layer: for every branch layer of the multi-branch net ``mb`` (at its client's
    α), the largest difference between one layer with the combined weight (eq. 1) and every branch
    run on the input with the outputs mixed by α (eq. 2), on the images ``x`` passed through the
    net; the layer's kind, branch tensor shape and largest output beside it."""

    alpha = mb.alpha()
    rows, h = [], x
    with torch.no_grad():
        for name, module in [*mb.net.body.named_children(), ("head", mb.net.head)]:
            if not isinstance(module, BranchLayer):
                h = module(h)
                continue
            a = alpha[module.index]
            module.alpha = a
            one_layer = module(h)  # eq. (1): one conv/linear with the combined weight
            module.alpha = None
            branches = module.branch_sum(h, a)  # eq. (2): every branch, outputs mixed by α
            rows.append(
                {
                    "layer": name,
                    "kind": "conv" if module.conv else "linear",
                    "branch tensor": tuple(module.weight.shape),
                    "max |eq.1 − eq.2|": float((one_layer - branches).abs().max()),
                    "max |output|": float(branches.abs().max()),
                }
            )
            h = branches
    return pd.DataFrame(rows)


# the chapter's parameters its prose shows ({glue:text} roles), glued under their own names
PROSE_NAMES = (
    "DATA_FRACTION", "SEEDS", "MOMENTUM", "PAIR_BRANCHES", "EQ2_IMAGES", "PAIR_CLIENTS", "PAIR_ROUNDS",
    "PAIR_PILOT_ROUNDS", "PILOT_SEEDS", "LR_GRID", "CONCENTRATED_ALPHA", "K_CLASSES", "BRANCH_CHOICES",
    "PILOT_BRANCHES", "FIG5_SETTING", "HEADLINE", "PILOT_VISITS", "SIGMA_GRID", "MARGIN", "IFCA_EVALS",
    "AMP_SELF_LOCAL", "AMP_SELF_AVERAGE", "AMP_PEAK_FLAT", "FIG5_BRANCHES", "MIN_SEEDS", "EPOCHS", "VISITS",
    "DIRICHLET_VISITS", "FIG5_VISITS", "AMP_EVALS", "BATCH", "SCALE_SHIFT", "LOCAL_HIGH", "EXTEND", "TABLE2_RUN",
    "RHO_RESOLUTION", "RESOLUTION",
)  # fmt: skip


def scale_words(v_main, v_alt, *, chosen: str, other: str, shift: float, local: float, local_high: float) -> str:
    """The diagnostic of the branches' initial scale in words: eq. 5 − eq. 6 at the ``chosen``
    scale (``v_main``, a :class:`pflkit.verdicts.Verdict`) and at the ``other`` (``v_alt``); whether the
    scale moves the comparison (mean differences more than ``shift`` points apart), or only the words
    differ; and Local's accuracy ``local`` against ``local_high`` (%).  A description, not a test."""

    def desc(v) -> str:  # the interval without a word: the claims rows carry the words (saturated here: not tested)
        return f"{v.mean:+.1f} points, 95 % CI [{v.lo:+.1f}, {v.hi:+.1f}], {v.n} seeds"

    text = f"Eq. 5 minus eq. 6, paired over the seeds: with the {chosen} **{desc(v_main)}**; with the {other} **{desc(v_alt)}**. "
    if abs(v_main.mean - v_alt.mean) > shift:
        text += (
            f"The mean differences are {v_main.mean:+.1f} and {v_alt.mean:+.1f} points, "
            f"{abs(v_main.mean - v_alt.mean):.1f} apart, more than {shift:g} (a description, not a test): the initial "
            "scale, which the paper does not specify, moves the comparison. "
        )
    elif (v_main.lo > 0) != (v_alt.lo > 0) and np.sign(v_main.mean) == np.sign(v_alt.mean):
        decided = chosen if v_main.lo > 0 or v_main.hi < 0 else other
        text += (
            f"Both scales give eq. 5 − eq. 6 the same sign and about the same size ({v_main.mean:+.1f} and "
            f"{v_alt.mean:+.1f} points); only the runs with the {decided} have an interval that clears zero, so "
            "the verdict words differ while the estimates agree. "
        )
    elif v_main.word != v_alt.word:
        text += (
            "The two initialisations give different verdicts, so an initialisation detail the paper does not "
            "specify decides the comparison at our training length. "
        )
    else:
        text += (
            f"The initial scale does not change the verdict word; the mean differences are {v_main.mean:+.1f} "
            f"and {v_alt.mean:+.1f} points. "
        )
    text += f"Local reaches {local:.1f} % (mean over seeds)"
    if local > local_high:
        return text + (
            f", above {local_high:g} %: with two classes per client a client alone does well, so the pairs "
            "setting leaves little for collaboration to add."
        )
    return text + "."


def say(*parts, width: int = 76) -> None:
    """Print ``parts`` (joined by spaces, as ``print`` does) wrapped at ``width`` characters a line, so
    that a printed note fits the page's column instead of scrolling sideways."""
    import textwrap

    for line in " ".join(map(str, parts)).split("\n"):
        print(textwrap.fill(line, width, subsequent_indent="  ") if line else "")
