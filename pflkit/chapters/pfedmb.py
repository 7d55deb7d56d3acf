"""The pFedMB chapter's probes and measurements: every client's α during a run, FedAMP's
self-weights and IFCA's cluster picks, how α groups the clients (within and across the class pairs,
against their label mixes), the collaboration weights eq. 5 implies, the share of branch traffic a
threshold on α would keep, and the tables, claims and sentences built on them."""

from __future__ import annotations

import dataclasses
import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from IPython.display import Markdown, display
from scipy.stats import spearmanr

from ..engine import Federation, RunConfig, pick_device
from ..experiments import (
    IMPROVING_POINTS,
    MIN_SEEDS,
    SEED_CAP,
    arm_seeds,
    arms_for,
    claim,
    claims_table,
    in_words,
    mechanism,
    paper_vs_ours,
    saturation,
    seed_plan,
    sweep_stable,
    tune_axis,
)
from ..methods import display_name, get_method
from ..methods.pfedmb import BranchLayer, combined_model, multi_branch
from ..models import build_model, n_params
from ..pages import fit, folded, setup_card
from ..verdicts import RESOLUTION, claim_row, fmt_interval, seeds_text, verdict, words_text

PFEDMB = display_name("pfedmb")


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
    of clients taking part in a round, in rounds."""
    rounds = int(round(visits / setting_cfg["sample_rate"]))
    return RunConfig(rounds=rounds, eval_every=eval_every(rounds), **setting_cfg, **train)


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
    directional claim in points (``row``: :func:`~pflkit.verdicts.claim_row`'s options)."""
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

VALUE_WORDS = {"lr": "η", "alpha_lr": "η_α", "sigma": "σ"}  # a pilot grid's option, as the page writes it


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


def cell_text(values: pd.Series, seeds) -> str:
    """A table cell over ``seeds`` only (``values``: per seed): mean ± 95 % interval, with the
    number of seeds when some of ``seeds`` are missing (diverged, not run), "—" when none is there."""
    v = values[values.index.isin(list(seeds))].dropna()
    if v.empty:
        return "—"
    return fmt_interval(v) + (f" ({seeds_text(len(v))})" if len(v) < len(list(seeds)) else "")


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


def claim_bullets(rows: list[dict]) -> str:
    """Claims as the bullets under a table or figure: each claim with its verdict word and flags
    (bold) and our difference with its interval; the notes stay in the claims table's fold."""
    from ..verdicts import verdict_text

    return "\n".join(f"* {r['claim']}: **{verdict_text(r, bold=False)}**, {r['ours (a − b, 95 % CI)']}." for r in rows)


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
        seeds = ours.str.extract(r" \((\d+) seeds?\)$")[0]
        ours = ours.str.replace(r" \(\d+ seeds?\)$", "", regex=True)
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

        from ..pages import folded, missing_as_dash

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
    the row of :func:`pflkit.verdicts.mechanism`): each check's verdict word with its flags per
    setting; the numbers are in the claims table."""
    from ..verdicts import verdict_text

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
    text = f"Eq. 5 minus eq. 6, paired over the seeds: with the {chosen} **{v_main}**; with the {other} **{v_alt}**. "
    if abs(v_main.mean - v_alt.mean) > shift:
        text += (
            f"The mean differences are {v_main.mean:+.1f} and {v_alt.mean:+.1f} points, "
            f"{abs(v_main.mean - v_alt.mean):.1f} apart, more than {shift:g} (a description, not a test): the initial "
            "scale, which the paper does not specify, moves the comparison. "
        )
    elif v_main.word != v_alt.word and np.sign(v_main.mean) == np.sign(v_alt.mean):
        decided = chosen if v_main.word in ("reproduces", "contradicted") else other
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


# ----------------------------------------------------------------------------- the notebook's sections
def _glue_figure(name: str) -> None:
    """Glue the current figure under ``name`` for a ``{glue:figure}`` with its caption, and close it."""
    from myst_nb import glue

    fig = plt.gcf()
    glue(name, fig, display=False)
    plt.close(fig)


def _take(ns: dict, names: str) -> list:
    """The values of ``names`` (space-separated) in the notebook's namespace ``ns`` (None where absent)."""
    return [ns.get(n) for n in names.split()]


# Each takes the notebook's namespace (``globals()``): the values it reads by name, as the notebook defines them.


# Each takes the notebook's namespace (``globals()``): the values it reads by name, as the notebook defines them.


def pilot_tuner(ns: dict):
    """The validation pilot of one setting, as a function ``tuned(base, methods, mb_options, probe)`` over the notebook's parameters (``ns``): in two stages.
    1. At PILOT_LR: pFedMB's η_α over ALPHA_LR_GRID with momentum on α and without (branches × √B), FedAMP's σ.
    2. The learning rate (LR_GRID) of every method at its stage-1 choice; pFedMB with the branches as drawn and × √B.
    Every grid follows the kit's edge rule (``tune_axis``). Returns ``tuned``."""
    (
        ALPHA_LR_GRID,
        ALPHA_MOMENTUM,
        EXTEND,
        LR_GRID,
        OPTIONS,
        PFEDMB,
        PILOT_LR,
        PILOT_RESULTS,
        PILOT_SEEDS,
        SIGMA_GRID,
        STORE,
    ) = _take(
        ns,
        "ALPHA_LR_GRID ALPHA_MOMENTUM EXTEND LR_GRID OPTIONS PFEDMB PILOT_LR PILOT_RESULTS PILOT_SEEDS SIGMA_GRID STORE",
    )

    def tuned(base, methods, mb_options, probe):
        """The validation pilot of one setting (``base``: its config with the pilot's rounds), in two stages.
        1. At PILOT_LR: pFedMB's η_α over ALPHA_LR_GRID with momentum on α and without (branches × √B, the kit's
           default: as drawn, a deep multi-branch net barely trains at some settings), FedAMP's σ.
        2. The learning rate (LR_GRID) of every method at its stage-1 choice; pFedMB with the branches as drawn and × √B.
        Every grid follows the kit's edge rule (``tune_axis``): a choice at an end of its grid adds the next value past
        it, at most EXTEND times, and the pilot chooses again (best mean validation accuracy over PILOT_SEEDS).
        ``probe``: the experiment's own, so that a pilot run equal to a main run (at ``smoke``) is reused.
        Returns {label: chosen config}, the pilot's table, its edges (the choice before and after the grids grew) and,
        per label, the learning-rate pilot and grid its config comes from (what the kit's divergence rule falls back on)."""
        mid = dataclasses.replace(base, lr=PILOT_LR)
        mb = dataclasses.replace(mid, method="pfedmb", options={**mb_options, "scale_init": True})

        def axis(configs, name, values):
            t = tune_axis(configs, name, values, PILOT_SEEDS, STORE, extend=EXTEND, probe=probe, progress=False)
            PILOT_RESULTS.append(t.result)
            return t

        variants = {f"{PFEDMB}, {k} on α": dataclasses.replace(mb, options={**mb.options, "alpha_momentum": ALPHA_MOMENTUM[k]})
                    for k in ALPHA_LR_GRID}  # fmt: skip
        alpha = axis(variants, "alpha_lr", {f"{PFEDMB}, {k} on α": v for k, v in ALPHA_LR_GRID.items()})
        best = alpha.result.select(list(alpha.chosen.values()))  # momentum on α or not
        mb = next(g[best] for g in alpha.grids.values() if best in g)
        stage2 = {display_name(m): arms_for([m], mid, OPTIONS)[display_name(m)] for m in methods}
        pilots = [alpha]
        if "fedamp" in methods:
            pilots.append(axis({"FedAMP, σ": stage2["FedAMP"]}, "sigma", SIGMA_GRID))
            stage2["FedAMP"] = pilots[-1].config("FedAMP, σ")
        for scaled, k in ((False, "branches as drawn"), (True, "branches × √B")):
            stage2[f"{PFEDMB}, {k}"] = dataclasses.replace(mb, options={**mb.options, "scale_init": scaled})
        lr = axis(stage2, "lr", LR_GRID)
        pilots.append(lr)
        chosen = {display_name(m): lr.config(display_name(m)) for m in methods}
        best = lr.result.select([lr.chosen[k] for k in stage2 if k.startswith(PFEDMB)])  # the initial scale
        mb_grid = next(k for k, g in lr.grids.items() if best in g)
        chosen[PFEDMB] = lr.grids[mb_grid][best]
        # for the kit's divergence rule: the learning-rate pilot and the grid each chosen config comes from
        fallback = {display_name(m): (lr, display_name(m)) for m in methods} | {PFEDMB: (lr, mb_grid)}
        return chosen, pd.concat([pilot_table(t) for t in pilots]), pd.concat([t.edges() for t in pilots]), fallback

    return (tuned,)


def pair_arms_of(ns: dict):
    """The arms of the pairs (Figure 3, Table I, Figure 4): pFedMB with eq. 5 and eq. 6 at the chosen and the other initial scale, FedAvg and Local, from the pilot's picks."""
    (
        PAIR_ROUNDS,
        PFEDMB,
        pair_pick,
    ) = _take(ns, "PAIR_ROUNDS PFEDMB pair_pick")
    EQ5, EQ6 = PFEDMB, f"{PFEDMB} (w/o α-weighted avg.)"
    MB = pair_pick[PFEDMB]  # pFedMB's chosen η_W, η_α, momentum on α and initial scale
    SCALED = MB.options["scale_init"]
    ALT = ", branches as drawn" if SCALED else ", branches × √B"  # the diagnostic: the initial scale not chosen

    def mb_variant(weighted, scaled, every=1):
        return main_run(
            dataclasses.replace(MB, options={**MB.options, "alpha_weighted": weighted, "scale_init": scaled}),
            PAIR_ROUNDS,
            every,
        )

    pair_arms = {
        EQ5: mb_variant(True, SCALED),
        EQ6: mb_variant(False, SCALED),
        EQ5 + ALT: mb_variant(True, not SCALED, eval_every(PAIR_ROUNDS)),
        EQ6 + ALT: mb_variant(False, not SCALED, eval_every(PAIR_ROUNDS)),
        **{k: main_run(pair_pick[k], PAIR_ROUNDS, 1) for k in ("FedAvg", "Local")},
    }
    PAIR_MAIN = ["Local", "FedAvg", EQ6, EQ5]  # Table I's columns
    return ALT, EQ5, EQ6, MB, PAIR_MAIN, SCALED, pair_arms


def pair_partitions(ns: dict):
    """The partitions the pairs' seeds draw, each client's pair, the clients' α per variant, seed and round, and the first seed's partition table."""
    (
        ALT,
        EQ5,
        EQ6,
        PAIR_SEEDS,
        full,
        pair_base,
        pairs,
    ) = _take(ns, "ALT EQ5 EQ6 PAIR_SEEDS full pair_base pairs")
    pair_id, pair_fed = {}, {}
    for s in PAIR_SEEDS:  # the partition a seed draws (the sweep's workers build the same one from the config)
        fed = pair_fed[s] = Federation.from_config(dataclasses.replace(pair_base, seed=s))
        counts = fed.partition.class_counts(fed.ds.y_train.cpu().numpy())
        pair_id[s] = np.array([int(np.flatnonzero(row)[0]) // 2 for row in counts])
    alphas = {
        label: {s: {r: np.array(a) for r, a in pairs.probes(label, s).items()} for s in PAIR_SEEDS}
        for label in (EQ5, EQ6, EQ5 + ALT, EQ6 + ALT)
    }
    S0 = PAIR_SEEDS[0]
    order = np.argsort(pair_id[S0], kind="stable")  # the figures list the two clients of a pair together
    part0 = pair_fed[S0].partition
    short = [c.split("/")[0] for c in full.classes]
    pairs_table = pd.DataFrame(
        {
            "client": order,
            "pair": pair_id[S0][order],
            "classes": [
                " & ".join(short[c] for c in np.flatnonzero(row))
                for row in part0.class_counts(pair_fed[S0].ds.y_train.cpu().numpy())[order]
            ],
            "train": [len(part0.clients[i].train) for i in order],
            "val": [len(part0.clients[i].val) for i in order],
            "test": [len(part0.clients[i].test) for i in order],
        }
    ).set_index("client")
    return S0, alphas, order, pair_id, pairs_table, part0


def draw_fig3(ns: dict):
    """Figure 3: each client's α over the branches at a few rounds, eq. 5 (top) and eq. 6 (bottom), on the first seed. Returns the figure."""
    (
        EQ5,
        EQ6,
        PAIR_BRANCHES,
        PAIR_ROUNDS,
        S0,
        alphas,
        order,
        pair_id,
    ) = _take(ns, "EQ5 EQ6 PAIR_BRANCHES PAIR_ROUNDS S0 alphas order pair_id")
    VARIANTS = {EQ5: "with α-weighted averaging (eq. 5)", EQ6: "without (eq. 6)"}
    HEAT_ROUNDS = sorted({1, 2, max(1, PAIR_ROUNDS // 4), max(1, PAIR_ROUNDS // 2), PAIR_ROUNDS})
    fig, axes = plt.subplots(2, len(HEAT_ROUNDS), figsize=(min(9.5, 1.9 * len(HEAT_ROUNDS)), 5.2), squeeze=False)
    ylabels = [f"{i} (pair {p})" for i, p in zip(order, pair_id[S0][order])]
    for r, label in enumerate(VARIANTS):
        for c, rnd in enumerate(HEAT_ROUNDS):
            ax = axes[r, c]
            sns.heatmap(
                alphas[label][S0][rnd][order],
                vmin=0,
                vmax=1,
                cmap="viridis",
                annot=True,
                fmt=".1f",
                annot_kws={"size": 9.5},
                cbar=False,
                ax=ax,
                xticklabels=[f"b{b + 1}" for b in range(PAIR_BRANCHES)],
                yticklabels=ylabels if c == 0 else False,
            )
            ax.set_title(f"round {rnd}", fontsize=10)
            if c == 0:
                ax.set_ylabel(f"{'eq. 5' if label == EQ5 else 'eq. 6'}: client")
    plt.tight_layout()
    plt.show()
    return VARIANTS, fig


def fig3_claims(ns: dict):
    """Figure 3's claims (pairs learn the same α, how fast, their own branches) and their bullets; adds the claims to ROWS. Returns the scores, the claims and the round-1 sentence."""
    (
        CONCENTRATED_ALPHA,
        EQ5,
        EQ6,
        MB,
        PAIR_BRANCHES,
        PAIR_CLIENTS,
        PAIR_ROUNDS,
        PAIR_SEEDS,
        ROWS,
        VARIANTS,
        alphas,
        pair_id,
        pairs,
    ) = _take(
        ns,
        "CONCENTRATED_ALPHA EQ5 EQ6 MB PAIR_BRANCHES PAIR_CLIENTS PAIR_ROUNDS PAIR_SEEDS ROWS VARIANTS alphas pair_id pairs",
    )
    scores = pd.DataFrame(
        [
            {"variant": label, "seed": s, "round": rnd, **pair_scores(a, pair_id[s], concentrated=CONCENTRATED_ALPHA)}
            for label in alphas
            for s in PAIR_SEEDS
            for rnd, a in alphas[label][s].items()
        ]
    )
    scores["gap"] = scores["within"] - scores["across"]
    main_scores = scores[scores.variant.isin(VARIANTS)]
    last = main_scores[main_scores["round"] == PAIR_ROUNDS].set_index(["variant", "seed"])
    over_rounds = main_scores.groupby(["variant", "seed"])["gap"].mean()  # separation summed up over the run

    gap5, gap6 = per_seed(last["gap"], EQ5, PAIR_SEEDS), per_seed(last["gap"], EQ6, PAIR_SEEDS)
    dist5 = per_seed(last["distinct branches"], EQ5, PAIR_SEEDS)
    dist6 = per_seed(last["distinct branches"], EQ6, PAIR_SEEDS)
    within5, within6 = last.loc[EQ5, "within"].mean(), last.loc[EQ6, "within"].mean()
    EQ6_AGREES = gap6.mean() >= gap5.mean() - 0.05  # eq. 6 separates the pairs about as well (a description)
    fig3a_note = (
        f"eq. 6 gives within-pair cosine {within6:.3f} (eq. 5: {within5:.3f}) and within − across {gap6.mean():.3f} "
        f"(eq. 5: {gap5.mean():.3f})" + (": the agreement within a pair does not need eq. 5" if EQ6_AGREES else "")
    )
    fig3 = [
        derived_claim(
            "Figure 3a: with eq. 5 the two clients of a pair learn (almost) the same α: within-pair cosine "
            "above across-pair",
            gap5,
            pairs,
            [EQ5],
            paper="heatmaps (no number)",
            unit="cosine",
            note=fig3a_note,
        ),
        derived_claim(
            "Figure 3b: without eq. 5 the pairs separate more slowly (within − across cosine, mean over "
            "rounds, eq. 5 − eq. 6)",
            per_seed(over_rounds, EQ5, PAIR_SEEDS) - per_seed(over_rounds, EQ6, PAIR_SEEDS),
            pairs,
            [EQ5, EQ6],
            paper="heatmaps (no number)",
            unit="cosine",
        ),
        derived_claim(
            f"Figure 3b: without eq. 5 different pairs share branches (distinct branches of the {PAIR_CLIENTS // 2} pairs, eq. 5 − eq. 6)",
            dist5 - dist6,
            pairs,
            [EQ5, EQ6],
            paper="5 vs fewer (heatmaps)",
            unit="branches",
        ),
    ]
    ROWS += fig3
    r1 = scores[(scores["round"] == 1) & scores.variant.isin(VARIANTS)].groupby("variant")["mean max α"].mean()
    display(
        Markdown(
            f"* **Pairs learn the same α.** With eq. 5 the within-pair cosine ends at {last.loc[EQ5, 'within'].mean():.2f} "
            f"against {last.loc[EQ5, 'across'].mean():.2f} across pairs (mean over seeds): {fig3[0]['verdict']}, "
            f"{fig3[0]['ours (a − b, 95 % CI)']}. Without eq. 5 it ends at {within6:.2f} (within − across {gap6.mean():.2f}, "
            f"against {gap5.mean():.2f} with eq. 5)"
            + (
                ": local training of α alone gives a pair the same α, so this agreement is not eq. 5's doing.\n"
                if EQ6_AGREES
                else ".\n"
            )
            + f"* **Speed.** Within − across, averaged over the rounds: {over_rounds[EQ5].mean():.2f} with eq. 5, "
            f"{over_rounds[EQ6].mean():.2f} without: {in_words(fig3[1])}.\n"
            f"* **Own branches.** The {PAIR_CLIENTS // 2} pairs end on {dist5.mean():.1f} distinct branches with eq. 5 and "
            f"{dist6.mean():.1f} without (mean over seeds): {in_words(fig3[2])}."
        )
    )
    ROUND1 = (
        f"Round 1 is the same in both variants (the same W⁰ and batches; the aggregation acts only after it), and "
        f"after it the clients' largest α_b is {r1[EQ5]:.2f} (mean over clients and seeds; uniform: {1 / PAIR_BRANCHES:.2f}; a description of the runs, not a claim). "
        + (
            f"That is above {CONCENTRATED_ALPHA:g}: with the chosen step on α (η_α = {MB.options['alpha_lr']:g}"
            f"{', with momentum' if MB.options['alpha_momentum'] != 0 else ', no momentum'}) most of α's weight "
            "already sits on one branch after round 1, before the two "
            "aggregations can differ, and the softmax then all but freezes it (see *Keeping α on the simplex*), which "
            "leaves our runs little room to show a difference in speed."
            if r1[EQ5] > CONCENTRATED_ALPHA
            else f"That is at most {CONCENTRATED_ALPHA:g}: α is still spread after round 1, so the two aggregations "
            "have rounds in which to differ."
        )
    )
    return ROUND1, ROWS, last, main_scores


def table1_and_fig4(ns: dict):
    """Table I (ours beside the paper's two readings of its header) and Figure 4's accuracy curves. Returns the table, the paper's columns and the figure."""
    (
        EQ5,
        EQ6,
        PAIR_MAIN,
        pairs,
        paper,
    ) = _take(ns, "EQ5 EQ6 PAIR_MAIN pairs paper")
    t1_paper = paper[paper.table == "Table I"].set_index("method")["value"]  # the text's reading (the CSV's)
    t1_printed = t1_paper.rename({EQ5: EQ6, EQ6: EQ5})  # the two pFedMB columns in the order the paper prints them
    table1 = paper_vs_ours(pairs, t1_paper, label="paper, text's reading (%)").loc[PAIR_MAIN]
    table1.insert(1, "paper, printed order (%)", t1_printed.reindex(PAIR_MAIN).to_numpy())
    table1 = table1.rename(columns={"ours mean_acc": "ours, test (%)"})
    curves = pairs.history()
    curves = curves[curves.arm.isin(PAIR_MAIN)]
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    sns.lineplot(
        data=curves, x="round", y="mean_acc", hue="arm", hue_order=PAIR_MAIN, marker="o", errorbar=("pi", 100), ax=ax
    )
    ax.set(ylabel="mean accuracy (%)")
    plt.show()
    return curves, fig, t1_paper, t1_printed, table1


def table1_claims(ns: dict):
    """Table I's claims (eq. 5 against eq. 6 and the baselines) and their bullets; adds them to ROWS."""
    (
        ALT,
        EQ5,
        EQ6,
        PAIR_MAIN,
        PAIR_SEEDS,
        ROWS,
        SEEDS,
        curves,
        pair_plan,
        pairs,
        t1_paper,
        t1_printed,
    ) = _take(ns, "ALT EQ5 EQ6 PAIR_MAIN PAIR_SEEDS ROWS SEEDS curves pair_plan pairs t1_paper t1_printed")

    def paper_diff2(a, b):
        # Table I's difference by both readings of its header
        return f"text's reading {paper_diff(t1_paper, a, b)}; printed order {paper_diff(t1_printed, a, b)}"

    PAIR_SATURATED = saturation(pairs, PAIR_MAIN)  # the kit's flag: a labelled setting, no headline

    def pair_claim(text, a, b, name):
        return claim(text, pairs, a, b, paper=paper_diff2(a, b), resolution=RESOLUTION, saturated=PAIR_SATURATED,
                     plan=pair_plan, plan_name=name)  # fmt: skip

    auc = curves.groupby(["arm", "seed"])["mean_acc"].mean()  # mean accuracy over rounds: higher = faster
    table1_rows = [
        pair_claim("Table I: pFedMB beats FedAvg", EQ5, "FedAvg", "pFedMB − FedAvg"),
        pair_claim("Table I: pFedMB beats Local", EQ5, "Local", "pFedMB − Local"),
        pair_claim("Table I: α-weighted averaging (eq. 5) improves accuracy over eq. 6", EQ5, EQ6, "eq. 5 − eq. 6"),
        derived_claim(
            "Figure 4: α-weighted averaging converges faster than eq. 6 (mean accuracy over the rounds)",
            auc[EQ5].reindex(PAIR_SEEDS) - auc[EQ6].reindex(PAIR_SEEDS),
            pairs,
            [EQ5, EQ6],
            paper='"clearly faster"',
            saturated=PAIR_SATURATED,
            plan=pair_plan,
            plan_name="eq. 5 − eq. 6, over the rounds",
        ),
        derived_claim(
            "Figure 4: pFedMB converges faster than FedAvg (mean accuracy over the rounds)",
            auc[EQ5].reindex(PAIR_SEEDS) - auc["FedAvg"].reindex(PAIR_SEEDS),
            pairs,
            [EQ5, "FedAvg"],
            paper='"clearly faster"',
            saturated=PAIR_SATURATED,
            plan=pair_plan,
            plan_name="pFedMB − FedAvg, over the rounds",
        ),
    ]
    ROWS += table1_rows
    PAIR_PLAN_NAMES = ["pFedMB − FedAvg", "pFedMB − Local", "eq. 5 − eq. 6", "eq. 5 − eq. 6, over the rounds",
                       "pFedMB − FedAvg, over the rounds"]  # fmt: skip
    pair_pilot_diffs = pair_diffs(pairs, eq5=EQ5, eq6=EQ6, alt=ALT)

    def pilot_word(name):
        # the word a pairs claim gets on the pilot seeds alone (what the plan table reports)
        return verdict(list(pair_pilot_diffs[name].reindex(SEEDS).dropna()), resolution=RESOLUTION).word

    changed = [(r, pilot_word(n)) for r, n in zip(table1_rows, PAIR_PLAN_NAMES) if pilot_word(n) != r["verdict"]]
    display(Markdown(claim_bullets(table1_rows)))
    PILOT_WORDS = f"Every claim here is judged on every seed its arms ran ({seeds_text(len(PAIR_SEEDS))}). " + (
        "On the pilot seeds alone "
        + "; ".join(f"*{r['claim']}* read *{w}*, where all the seeds give *{r['verdict']}*" for r, w in changed)
        + "."
        if changed
        else "The pilot seeds alone give each of them the same word."
    )
    return PAIR_SATURATED, PILOT_WORDS, ROWS, paper_diff2


def scale_diagnostic(ns: dict):
    """The initial-scale diagnostic: eq. 5 − eq. 6 with the branches as drawn and × √B (its table and values)."""
    (
        ALT,
        EQ5,
        EQ6,
        PAIR_SATURATED,
        ROWS,
        SCALED,
        pair_plan,
        pairs,
        paper_diff2,
    ) = _take(ns, "ALT EQ5 EQ6 PAIR_SATURATED ROWS SCALED pair_plan pairs paper_diff2")
    CHOSEN_INIT = f"branches {'× √B' if SCALED else 'as drawn'}"
    diag = pd.DataFrame(
        {
            f"{CHOSEN_INIT} (chosen, as above)": {k: fmt_interval(pairs.values(k)) for k in (EQ5, EQ6)},
            ALT.lstrip(", "): {k: fmt_interval(pairs.values(k + ALT)) for k in (EQ5, EQ6)},
        }
    )
    v_main = pairs.compare(EQ5, EQ6)
    v_alt = pairs.compare(EQ5 + ALT, EQ6 + ALT)
    ROWS.append(
        claim(
            f"Table I with the {ALT.lstrip(', ')} (our diagnostic): eq. 5 improves accuracy over eq. 6",
            pairs,
            EQ5 + ALT,
            EQ6 + ALT,
            paper=paper_diff2(EQ5, EQ6),
            resolution=RESOLUTION,
            saturated=PAIR_SATURATED,
            plan=pair_plan,
            plan_name="eq. 5 − eq. 6" + ALT,
        )
    )
    return CHOSEN_INIT, diag, v_alt, v_main


def table2_settings(ns: dict):
    """Table II's settings (the partition of each, the paper's column it stands for), the baselines, the headline settings and the paper's gaps."""
    (
        BRANCH_CHOICES,
        CLIENT_SETUPS,
        FIG5_BRANCHES,
        FIG5_SETTING,
        K_CLASSES,
        TABLE2_SETTINGS,
        paper,
    ) = _take(ns, "BRANCH_CHOICES CLIENT_SETUPS FIG5_BRANCHES FIG5_SETTING K_CLASSES TABLE2_SETTINGS paper")
    SETTINGS = {}
    for n, rate in CLIENT_SETUPS:
        SETTINGS[f"random 2 classes / {n} clients"] = dict(
            cfg=dict(partition="pathological-equal", clients=n, sample_rate=rate, classes_per_client=2),
            paper=("CIFAR10", f"random 2 classes / {n} clients"),
        )
        SETTINGS[f"Dirichlet 0.4 / {n} clients"] = dict(
            cfg=dict(partition="dirichlet", clients=n, sample_rate=rate, alpha=0.4),
            paper=("CIFAR10", f"Dirichlet 0.4 / {n} clients"),
        )
        SETTINGS[f"random {K_CLASSES} classes / {n} clients"] = dict(
            cfg=dict(
                partition="pathological", clients=n, sample_rate=rate, classes_per_client=K_CLASSES, shares=(0.3, 0.7)
            ),
            paper=("CIFAR100", f"random 20 classes with different size / {n} clients"),
        )
    BASELINES = ["pfedme", "ifca", "fedfomo", "fedamp", "fedprox", "fedper", "fedavg", "local"]  # slowest first
    OTHERS = [display_name(m) for m in BASELINES]
    # fixed in advance, by name: random 2 classes comes close to saturating on FMNIST (the check under Table II shows it)
    HEADLINE = [n for n in TABLE2_SETTINGS if not n.startswith("random 2")]

    t2_wide = paper[paper.table == "Table II"].pivot_table(
        index=["dataset", "setting"], columns="method", values="value"
    )
    PAPER_GAP = (t2_wide["pFedMB"] - t2_wide.drop(columns="pFedMB").max(axis=1)).round(
        2
    )  # pFedMB − best other, per setting

    def branch_choices(name):  # the Figure 5 setting sweeps more values of B; validation picks among all of them
        return FIG5_BRANCHES if name == FIG5_SETTING else BRANCH_CHOICES

    return BASELINES, HEADLINE, OTHERS, PAPER_GAP, SETTINGS, branch_choices, t2_wide


def table2_arms(ns: dict):
    """Table II's and Figure 5's arms from the pilots' picks, the pilots' edges, and ``table2_sweep`` (every arm on some seeds, with the kit's divergence fallback)."""
    (
        AMP_EVALS,
        BASELINES,
        DIRICHLET_VISITS,
        EDGES,
        FALLBACK,
        FIG5_BRANCHES,
        FIG5_SETTING,
        FIG5_VISITS,
        IFCA_EVALS,
        PFEDMB,
        PICKS,
        SETTINGS,
        STORE,
        TABLE2_SETTINGS,
        VISITS,
        branch_choices,
        pair_pick,
    ) = _take(
        ns,
        "AMP_EVALS BASELINES DIRICHLET_VISITS EDGES FALLBACK FIG5_BRANCHES FIG5_SETTING FIG5_VISITS IFCA_EVALS PFEDMB PICKS SETTINGS STORE TABLE2_SETTINGS VISITS branch_choices pair_pick",
    )
    edges = pd.concat(EDGES, names=["pilot", "grid"])
    for col in ("chosen first", "chosen"):
        edges[col] = edges[col].map(value_words)
    MB_PICK = {"pairs": pair_pick[PFEDMB]} | {n: c[PFEDMB] for n, c in PICKS.items()}  # each pilot's pFedMB
    EDGE_USED = [  # (pilot, grid, value): a choice the runs use that still sits at its grid's edge
        (p, g, edges.loc[(p, g), "chosen"])
        for p, g in edges.index
        if edges.loc[(p, g), "at its edge"] and grid_used(g, MB_PICK[p])
    ]
    edge_used_text = "; ".join(f"{v} ({g.removesuffix(', σ')}) in {p}" for p, g, v in EDGE_USED)

    def visits_of(name):  # Table II's visits per client in a setting
        return DIRICHLET_VISITS if name.startswith("Dirichlet") else VISITS

    # Figure 5's runs (the longest, started first) take its own pilot's choices; Local (the cheapest method) shows
    # whether a client alone already does well in FIG5_SETTING
    set_arms = setting_arms(FIG5_SETTING, SETTINGS[FIG5_SETTING]["cfg"], PICKS[FIG5_SETTING], FIG5_BRANCHES,
                            ["fedavg", "local"], FIG5_VISITS, amp_evals=AMP_EVALS, ifca_evals=IFCA_EVALS)  # fmt: skip
    for name in TABLE2_SETTINGS:
        set_arms |= setting_arms(name, SETTINGS[name]["cfg"], PICKS[name], branch_choices(name), BASELINES,
                                 visits_of(name), amp_evals=AMP_EVALS, ifca_evals=IFCA_EVALS)  # fmt: skip
    AMP_ARMS = [a for a in set_arms if a.endswith(" · FedAMP")]

    def fallback_of(a):
        # the learning-rate pilot an arm's config comes from (pFedMB at any B: its own pilot's, at B = PILOT_BRANCHES)
        name, label = a.split(" · ")
        return FALLBACK[name][PFEDMB if label.startswith(PFEDMB) else label]

    FALLBACK_NOTES = {}

    def table2_sweep(seeds):
        # every Table II and Figure 5 arm on ``seeds`` (one list, or one per arm), FedAMP's with its every-round probe;
        # an arm whose run diverges on some seed runs on every seed at its pilot's best smaller learning rate (kit rule)
        per = seeds if isinstance(seeds, dict) else dict.fromkeys(set_arms, seeds)
        out = None
        for group, probe in (([a for a in set_arms if a not in AMP_ARMS], table2_probe), (AMP_ARMS, amp_probe)):
            res, notes = sweep_stable({a: set_arms[a] for a in group}, {a: per[a] for a in group}, STORE,
                                      {a: fallback_of(a) for a in group}, probe=probe, progress=False)  # fmt: skip
            FALLBACK_NOTES.update(notes)
            out = res if out is None else out | res
        return out

    return EDGE_USED, FALLBACK_NOTES, edge_used_text, edges, set_arms, table2_sweep


def table2_plan(ns: dict):
    """What validation chose on the pilot seeds (B, the rivals), Table II's claims as arm pairs, their seed plan and the seeds each arm runs."""
    (
        CLIENT_SETUPS,
        FIG5_BRANCHES,
        FIG5_SETTING,
        K_CLASSES,
        MARGIN,
        OTHERS,
        PAPER_NAME,
        PFEDMB,
        PILOT_BRANCHES,
        SEEDS,
        SETTINGS,
        TABLE2_RUN,
        TABLE2_SETTINGS,
        branch_choices,
        paper,
        pilot_runs,
        set_arms,
    ) = _take(
        ns,
        "CLIENT_SETUPS FIG5_BRANCHES FIG5_SETTING K_CLASSES MARGIN OTHERS PAPER_NAME PFEDMB PILOT_BRANCHES SEEDS SETTINGS TABLE2_RUN TABLE2_SETTINGS branch_choices paper pilot_runs set_arms",
    )
    chosen_B = {
        name: int(pilot_runs.select([arm(name, mb_label(b)) for b in branch_choices(name)]).rsplit("=", 1)[1])
        for name in dict.fromkeys(TABLE2_SETTINGS + [FIG5_SETTING])
    }
    RIVAL = {n: pilot_runs.select([arm(n, m) for m in OTHERS]).split(" · ")[1] for n in TABLE2_SETTINGS}
    FED_RIVAL = {
        n: pilot_runs.select([arm(n, m) for m in ("FedAvg", "FedProx")]).split(" · ")[1] for n in TABLE2_SETTINGS
    }
    FIG5_MID = pilot_runs.select([arm(FIG5_SETTING, mb_label(b)) for b in FIG5_BRANCHES[1:-1]])  # the best interior B

    def arm_of(name, row):
        return arm(
            name, mb_label(chosen_B[name] if row == PFEDMB else PILOT_BRANCHES) if row.startswith(PFEDMB) else row
        )

    def paper_col(name):
        ds_name, setting = SETTINGS[name]["paper"]
        t2_paper = paper[paper.table == "Table II"]
        return t2_paper[(t2_paper.dataset == ds_name) & (t2_paper.setting == setting)].set_index("method")["value"]

    def paper_of(name, row):
        return paper_col(name).get(PAPER_NAME.get(row, row), np.nan)

    def claims_of_table2():
        # the accuracy claims of Table II and Figure 5: {name: (a list of (a, b) arm pairs whose paired differences
        # add up to the claim's, with their signs), margin or None}; a "comparable"/"within" claim has a margin
        out = {}
        for n in TABLE2_SETTINGS:
            col = paper_col(n)
            comparable = col["pFedMB"] < col.drop("pFedMB").max()
            out[f"{n}: pFedMB − {RIVAL[n]}"] = (
                [(1, arm_of(n, PFEDMB), arm(n, RIVAL[n]))],
                MARGIN if comparable else None,
            )
        for n in [n for n in TABLE2_SETTINGS if n.startswith("random 2")]:
            out[f"{n}: {FED_RIVAL[n]} − pFedMB"] = ([(1, arm(n, FED_RIVAL[n]), arm_of(n, PFEDMB))], MARGIN)
        for k, _ in CLIENT_SETUPS:
            simple = f"random 2 classes / {k} clients"
            for hard in (f"Dirichlet 0.4 / {k} clients", f"random {K_CLASSES} classes / {k} clients"):
                if simple in TABLE2_SETTINGS and hard in TABLE2_SETTINGS:
                    for m in ("FedAMP", "FedFomo"):
                        out[f"{m} behind: {hard} − {simple}"] = ([(1, arm_of(hard, PFEDMB), arm(hard, m)),
                                                                  (-1, arm_of(simple, PFEDMB), arm(simple, m))], None)  # fmt: skip
        mid, ends = FIG5_MID, (FIG5_BRANCHES[0], FIG5_BRANCHES[-1])
        for b in ends:
            out[f"Figure 5: {mid.split(' · ')[1]} − B={b}"] = ([(1, mid, arm(FIG5_SETTING, mb_label(b)))], None)
        return out

    T2_CLAIMS = claims_of_table2()

    t2_plan = seed_plan(t2_diffs(pilot_runs, T2_CLAIMS), cap=SEED_CAP, resolution=RESOLUTION,
                        margins={k: m for k, (_, m) in T2_CLAIMS.items() if m is not None})  # fmt: skip
    claim_arms = {k: [a for _, x, y in terms for a in (x, y)] for k, (terms, _) in T2_CLAIMS.items()}
    T2_SEEDS = {
        a: s[:TABLE2_RUN] for a, s in arm_seeds(t2_plan, claim_arms, SEEDS, arms=set_arms, cap=SEED_CAP).items()
    }
    return FED_RIVAL, FIG5_MID, RIVAL, T2_CLAIMS, T2_SEEDS, arm_of, chosen_B, paper_col, paper_of, t2_plan


def eq6_control_arms(ns: dict):
    """The eq. 6 control where the headline is judged: pFedMB at its chosen B and rates with plain averaging."""
    (
        HEADLINE,
        PFEDMB,
        arm_of,
        set_arms,
    ) = _take(ns, "HEADLINE PFEDMB arm_of set_arms")
    EQ6_OF = {n: f"{n} · {PFEDMB} (eq. 6)" for n in HEADLINE}
    EQ5_TEXT = {
        n: f"{n}: mechanism (our check): α-weighted averaging (eq. 5) beats plain averaging (eq. 6)" for n in HEADLINE
    }
    eq6_arms = {EQ6_OF[n]: dataclasses.replace(set_arms[arm_of(n, PFEDMB)], options={
        **set_arms[arm_of(n, PFEDMB)].options, "alpha_weighted": False}) for n in HEADLINE}  # fmt: skip
    return EQ5_TEXT, EQ6_OF, eq6_arms


def t2_cap_text(ns: dict):
    """The sentence on the seed cap of Table II's and Figure 5's claims."""
    (TABLE2_RUN,) = _take(ns, "TABLE2_RUN")
    T2_CAP_TEXT = (
        f"the plan asks for at most {SEED_CAP} seeds a claim (a claim that needs more reads underpowered); the pairs run "
        f"what it asks, Table II's and Figure 5's arms at most {TABLE2_RUN}"
        + (f", so a claim there planned for {TABLE2_RUN + 1} to {SEED_CAP} seeds runs {TABLE2_RUN} and, if still "
           "undecided, reads inconclusive, its notes giving the seeds planned and run" if TABLE2_RUN < SEED_CAP else "")
    )  # fmt: skip
    return (T2_CAP_TEXT,)


def table2_results(ns: dict):
    """Table II: every setting's accuracy table (ours beside the paper), the final accuracies, the diverged and still-improving arms."""
    (
        BASELINES,
        FIG5_SETTING,
        HEADLINE,
        PFEDMB,
        PILOT_BRANCHES,
        SEEDS,
        SETTINGS,
        TABLE2_SETTINGS,
        arm_of,
        paper_of,
        runs,
    ) = _take(
        ns, "BASELINES FIG5_SETTING HEADLINE PFEDMB PILOT_BRANCHES SEEDS SETTINGS TABLE2_SETTINGS arm_of paper_of runs"
    )
    UNTUNED = f"{PFEDMB} (B = {PILOT_BRANCHES})"  # Table II's row at the untuned B
    ROW_NAMES = [display_name(m) for m in reversed(BASELINES)] + [PFEDMB, UNTUNED]

    finals = runs.finals()
    table2 = pd.DataFrame(index=ROW_NAMES)
    for name in TABLE2_SETTINGS:
        tag = "" if name in HEADLINE else " (no headline)"
        table2[f"{name}{tag} · ours"] = [cell_text(runs.values(arm_of(name, r)), SEEDS) for r in ROW_NAMES]
        table2[f"{name}{tag} · paper {SETTINGS[name]['paper'][0]}"] = [
            paper_of(name, r) if r != UNTUNED else np.nan for r in ROW_NAMES
        ]
    SAT_SETTINGS = list(dict.fromkeys(TABLE2_SETTINGS + [FIG5_SETTING]))  # Figure 5's setting too

    def rows_run(n):
        # the rows of Table II that ran in setting n (Figure 5's setting alone: pFedMB, FedAvg, Local)
        return [r for r in ROW_NAMES if arm_of(n, r) in runs.arms]

    SAT_FLAG = {n: saturation(runs, [arm_of(n, r) for r in rows_run(n)]) for n in SAT_SETTINGS}  # "" or the reason
    sat_table = pd.DataFrame(
        {
            "Local, test (%)": [runs.values(arm(n, "Local")).mean() for n in SAT_SETTINGS],
            "Local, validation (%)": [runs.values(arm(n, "Local"), "val_mean_acc").mean() for n in SAT_SETTINGS],
            "best row, test (%)": [max(runs.values(arm_of(n, r)).mean() for r in rows_run(n)) for n in SAT_SETTINGS],
            "rows run": ["Table II's" if n in TABLE2_SETTINGS else ", ".join(rows_run(n)) for n in SAT_SETTINGS],
            "used for": [
                " and ".join(
                    u for u, inside in (("Table II", n in TABLE2_SETTINGS), ("Figure 5", n == FIG5_SETTING)) if inside
                )
                for n in SAT_SETTINGS
            ],
            "headline (fixed in advance, by name)": ["yes" if n in HEADLINE else "no" for n in SAT_SETTINGS],
            "the kit's saturation flag": [SAT_FLAG[n].removeprefix("saturated: ") or "—" for n in SAT_SETTINGS],
        },
        index=pd.Index(SAT_SETTINGS, name="setting"),
    )
    IMPROVING = {}  # setting -> the rows still improving at the end there
    for a in runs.arms:
        if runs.improving(a):
            IMPROVING.setdefault(a.split(" · ")[0], []).append(a.split(" · ")[1])
    return IMPROVING, ROW_NAMES, SAT_FLAG, finals, sat_table, table2


def table2_claims(ns: dict):
    """Table II's claims (pFedMB best or comparable, FedAvg/FedProx comparable at random 2 classes, FedAMP/FedFomo behind) and the mechanism checks (α follows the data, eq. 5 against eq. 6); adds them to ROWS and shows their bullets."""
    (
        AMP_PEAK_FLAT,
        AMP_SELF_AVERAGE,
        AMP_SELF_LOCAL,
        EQ5_TEXT,
        EQ6_OF,
        FED_RIVAL,
        HEADLINE,
        MARGIN,
        OTHERS,
        PFEDMB,
        PICKS,
        REGISTRY_NAME,
        RHO_RESOLUTION,
        RIVAL,
        ROWS,
        SAT_FLAG,
        SEEDS,
        T2_CLAIMS,
        TABLE2_SETTINGS,
        arm_of,
        chosen_B,
        eq5_plan,
        eq6_runs,
        finals,
        paper_col,
        paper_of,
        runs,
        set_arms,
        t2_plan,
        t2_wide,
    ) = _take(
        ns,
        "AMP_PEAK_FLAT AMP_SELF_AVERAGE AMP_SELF_LOCAL EQ5_TEXT EQ6_OF FED_RIVAL HEADLINE MARGIN OTHERS PFEDMB PICKS REGISTRY_NAME RHO_RESOLUTION RIVAL ROWS SAT_FLAG SEEDS T2_CLAIMS TABLE2_SETTINGS arm_of chosen_B eq5_plan eq6_runs finals paper_col paper_of runs set_arms t2_plan t2_wide",
    )

    def equivalence(text, name, a, b, paper, key, **row):
        # a "within ±MARGIN" claim, judged only where the kit does not flag the setting saturated: there every method
        # that does about as well as the best lies within the margin of every other, whatever the method
        if SAT_FLAG[name]:
            return claim_row(text, verdict([]), paper=paper, ours=f"not judged: {SAT_FLAG[name]}")
        return claim(text, runs, a, b, paper=paper, margin=MARGIN, plan=t2_plan, plan_name=key, **row)

    def plan_of(name):
        return dict(plan=t2_plan, plan_name=name)

    with_eq6 = runs | eq6_runs  # pFedMB beside its eq. 6 control
    MECH_EQ5 = {
        n: mechanism(
            EQ5_TEXT[n],
            verdict(
                list(with_eq6.paired(arm_of(n, PFEDMB), EQ6_OF[n])),
                resolution=RESOLUTION,
                budget=with_eq6.budget(arm_of(n, PFEDMB), EQ6_OF[n]),
            ),
            paper="α-weighted averaging is effective (§V-B, on the pairs)",
            control="the same pFedMB with plain averaging (eq. 6)",
            plan=eq5_plan,
        )
        for n in HEADLINE
    }
    MECH_ALPHA = {
        n: mechanism(
            f"{n}: mechanism (our check): clients with similar label mixes get similar α (rank correlation over "
            "client pairs)",
            verdict(
                list(alpha_follows_data(runs, arm_of(n, PFEDMB), set_arms[arm_of(n, PFEDMB)])),
                unit="ρ",
                resolution=RHO_RESOLUTION,
                budget=runs.budget(arm_of(n, PFEDMB)),
            ),
            paper="what Figure 3 shows in the pairs",
            control="no relation (ρ = 0)",
            digits=2,
        )
        for n in HEADLINE
    }

    # FedAMP's self-weights at the last round (its probe), here for the notes of the claims that compare with FedAMP;
    # the section "Did FedAMP or IFCA degenerate?" shows them
    amp = pd.DataFrame(
        [
            {"setting": n, "seed": s, "round": r, **p}
            for n in TABLE2_SETTINGS
            for s in SEEDS
            for r, p in runs.probes(arm(n, "FedAMP"), s).items()
            if isinstance(p, dict)
        ]
    )
    amp_last = amp[amp["round"] == amp.groupby("setting")["round"].transform("max")].groupby("setting")
    amp_end = amp_last[["self", "peak", "d2"]].mean()
    amp_end["self"] = amp_end["self"].clip(lower=0)  # 1 − Σ ξ_ij can round to −1e-17
    amp_end.insert(0, "σ (chosen)", [PICKS[n]["FedAMP"].options["sigma"] for n in amp_end.index])
    AMP_KW = dict(self_local=AMP_SELF_LOCAL, self_average=AMP_SELF_AVERAGE, peak_flat=AMP_PEAK_FLAT)
    AMP_REGIME = {n: amp_regime(amp_end.loc[n], **AMP_KW) for n in amp_end.index}  # "local", "average" or ""
    AMP_REGIME_WORDS = {"local": "close to Local training", "average": "close to a plain average of the others"}

    def amp_note(settings):
        # the settings among ``settings`` where FedAMP's attention is inert, for a claim's notes
        inert = [f"{AMP_REGIME_WORDS[AMP_REGIME[n]]} in {n} (σ = {amp_end.loc[n, 'σ (chosen)']:g})"
                 for n in settings if AMP_REGIME.get(n)]  # fmt: skip
        return ("FedAMP's attention is inert here: " + "; ".join(inert)) if inert else ""

    t2_rows = []
    for name in TABLE2_SETTINGS:
        where = name if name in HEADLINE else f"{name} (not a headline setting)"
        rival, col = RIVAL[name], paper_col(name)
        p_rival = col.drop("pFedMB").idxmax()
        p_diff = f"{col['pFedMB'] - col[p_rival]:+.2f} vs {REGISTRY_NAME.get(p_rival, p_rival)}"
        key = f"{name}: pFedMB − {rival}"
        if T2_CLAIMS[key][1] is None:
            t2_rows.append(claim(f"Table II, {where}: pFedMB beats the strongest other method ({rival}, on validation)",
                                 runs, arm_of(name, PFEDMB), arm(name, rival), paper=p_diff, resolution=RESOLUTION,
                                 saturated=SAT_FLAG[name], headline=name in HEADLINE, mechanism=MECH_ALPHA.get(name),
                                 **plan_of(key)))  # fmt: skip
        else:
            t2_rows.append(equivalence(f"Table II, {where}: pFedMB is comparable (±{MARGIN:g}) to the strongest other "
                                       f"method ({rival}, on validation)", name, arm_of(name, PFEDMB), arm(name, rival),
                                       paper=p_diff, key=key, headline=name in HEADLINE, mechanism=MECH_ALPHA.get(name)))  # fmt: skip
    paper_means = pd.DataFrame({n: paper_col(n) for n in HEADLINE}).rename(index=REGISTRY_NAME)
    paper_worst = (paper_means.max() - paper_means).max(axis=1)
    paper_other = paper_worst.drop("pFedMB").idxmin()  # the paper's most balanced other method over these settings
    t2_all = t2_wide.rename(columns=REGISTRY_NAME)  # the paper's six settings
    all_worst = t2_all.rsub(t2_all.max(axis=1), axis=0).max()
    all_other = all_worst.drop("pFedMB").idxmin()
    if len(HEADLINE) > 1:
        # the choice: on the pilot seeds' validation
        val_worst = worst_gap(finals, "val_mean_acc", HEADLINE, others=OTHERS, chosen_b=chosen_B).loc[SEEDS].mean()
        balanced_rival = val_worst.drop(PFEDMB).idxmin()
        test_worst = worst_gap(finals, "mean_acc", HEADLINE, others=OTHERS, chosen_b=chosen_B)
        t2_rows.append(
            derived_claim(
                f"Table II: pFedMB is the most balanced method: smaller worst-case gap to the best over the headline settings than "
                f"{balanced_rival} (the most balanced other method on validation)",
                test_worst[balanced_rival] - test_worst[PFEDMB],
                runs,
                [arm(n, balanced_rival) for n in HEADLINE] + [arm_of(n, PFEDMB) for n in HEADLINE],
                paper=f"{paper_worst[paper_other] - paper_worst['pFedMB']:+.2f} (worst gaps over these settings: pFedMB "
                f"{paper_worst['pFedMB']:.2f}, {paper_other} {paper_worst[paper_other]:.2f})",
                note=amp_note(HEADLINE) if balanced_rival == "FedAMP" else "",
            )
        )
    for name in [n for n in TABLE2_SETTINGS if n.startswith("random 2")]:
        fed_rival = FED_RIVAL[name]
        t2_rows.append(
            equivalence(
                f"Table II, {name} (not a headline setting): {fed_rival} with fine-tuning is within ±{MARGIN:g} point of pFedMB",
                name,
                arm(name, fed_rival),
                arm_of(name, PFEDMB),
                paper=f"{paper_of(name, fed_rival) - paper_of(name, PFEDMB):+.2f}",
                key=f"{name}: {fed_rival} − pFedMB",
            )
        )
    diffs = t2_diffs(runs, T2_CLAIMS)
    for key in [k for k in T2_CLAIMS if " behind: " in k]:
        m, (hard, simple) = key.split(" behind: ")[0], key.split(" behind: ")[1].split(" − ")
        p = (paper_of(hard, PFEDMB) - paper_of(hard, m)) - (paper_of(simple, PFEDMB) - paper_of(simple, m))
        t2_rows.append(
            derived_claim(
                f"Table II: {m} falls further behind pFedMB in {hard} than in {simple}",
                diffs[key],
                runs,
                [a for _, x, y in T2_CLAIMS[key][0] for a in (x, y)],
                paper=f"{p:+.2f}",
                note=amp_note([hard, simple]) if m == "FedAMP" else "",
                **plan_of(key),
            )
        )
    ROWS += list(MECH_ALPHA.values()) + list(MECH_EQ5.values()) + t2_rows
    gap_means = (
        worst_gap(finals, "mean_acc", HEADLINE, others=OTHERS, chosen_b=chosen_B).mean().sort_values()
        if len(HEADLINE) > 1
        else None
    )
    display(Markdown(mechanism_line(MECH_ALPHA, MECH_EQ5) + "\n\n" + claim_bullets(t2_rows)))
    return (
        AMP_KW,
        AMP_REGIME,
        MECH_ALPHA,
        MECH_EQ5,
        ROWS,
        all_other,
        all_worst,
        amp_end,
        gap_means,
        paper_other,
        paper_worst,
        t2_all,
    )


def draw_fig5(ns: dict):
    """Figure 5: accuracy against the number of branches B in its setting, and Table III (the B validation picks per setting). Returns what later sections read and the figure."""
    (
        FIG5_BRANCHES,
        FIG5_SETTING,
        SETTINGS,
        branch_choices,
        chosen_B,
        finals,
        paper,
        runs,
    ) = _take(ns, "FIG5_BRANCHES FIG5_SETTING SETTINGS branch_choices chosen_B finals paper runs")
    f5 = finals[finals.arm.isin([arm(FIG5_SETTING, mb_label(b)) for b in FIG5_BRANCHES])]
    fig5 = f5.assign(B=f5.arm.str.rsplit("=", n=1).str[1].astype(int)).melt(
        id_vars=["B", "seed"], value_vars=["mean_acc", "val_mean_acc"], var_name="split", value_name="mean accuracy (%)"
    )
    fig5["split"] = fig5["split"].map({"mean_acc": "test", "val_mean_acc": "validation"})
    fedavg5 = runs.values(arm(FIG5_SETTING, "FedAvg")).mean()
    local5 = runs.values(arm(FIG5_SETTING, "Local")).mean()
    F5_LOST = {  # B -> the seeds on which its run diverged (a verdict leaves them out)
        b: list(d[d].index)
        for b in FIG5_BRANCHES
        for d in [runs.values(arm(FIG5_SETTING, mb_label(b)), "diverged").astype(bool)]
        if d.any()
    }
    fig, ax = plt.subplots(figsize=(7, 3.3))
    sns.lineplot(data=fig5[~fig5.B.isin(list(F5_LOST))], x="B", y="mean accuracy (%)", hue="split", marker="o",
                 errorbar=("pi", 100), ax=ax)  # fmt: skip
    for b, lost in F5_LOST.items():
        kept = fig5[(fig5.B == b) & (fig5.split == "test") & fig5["mean accuracy (%)"].notna()]
        ax.scatter(kept.B, kept["mean accuracy (%)"], marker="x", color="red", zorder=3,
                   label=f"B = {b}, test: diverged on {seeds_text(lost)}; {seeds_text(len(kept))} left")  # fmt: skip
    ax.axhline(fedavg5, color="grey", ls="--", lw=1, label="FedAvg (test)")
    ax.axhline(local5, color="grey", ls=":", lw=1, label="Local (test)")
    ax.set(xticks=FIG5_BRANCHES)
    ax.legend()
    plt.show()
    t3_paper = paper[paper.table == "Table III"]
    table3 = pd.DataFrame(
        [
            {
                "setting (ours, FMNIST)": name,
                "B chosen by validation": b,
                "choices": ", ".join(map(str, branch_choices(name))),
                "paper's tuned B": int(
                    t3_paper[
                        (t3_paper.dataset == SETTINGS[name]["paper"][0])
                        & (t3_paper.setting == SETTINGS[name]["paper"][1])
                    ]["value"].iloc[0]
                ),
                "paper's setting": " / ".join(SETTINGS[name]["paper"]),
            }
            for name, b in chosen_B.items()
        ]
    ).set_index("setting (ours, FMNIST)")
    return F5_LOST, f5, fedavg5, fig, local5, t3_paper, table3


def fig5_claims(ns: dict):
    """Figure 5's and Table III's claims and their bullets; adds them to ROWS."""
    (
        FALLBACK_NOTES,
        FIG5_BRANCHES,
        FIG5_MID,
        FIG5_SETTING,
        ROWS,
        SAT_FLAG,
        full,
        runs,
        t2_plan,
        t3_paper,
    ) = _take(ns, "FALLBACK_NOTES FIG5_BRANCHES FIG5_MID FIG5_SETTING ROWS SAT_FLAG full runs t2_plan t3_paper")
    lo_B, hi_B = FIG5_BRANCHES[0], FIG5_BRANCHES[-1]
    PAPER_FIG5 = ("CIFAR10", "random 2 classes / 50 clients")  # the paper's Figure 5 setting
    # Figure 5 peaks at the B that Table III lists for its setting
    paper_peak = int(
        t3_paper[(t3_paper.dataset == PAPER_FIG5[0]) & (t3_paper.setting == PAPER_FIG5[1])]["value"].iloc[0]
    )
    mid = FIG5_MID  # the best interior B on validation (the pilot seeds)

    mid_B = int(mid.rsplit("=", 1)[1])
    texts = [  # the interior B against each end of the grid
        (lo_B, f"Figure 5: accuracy peaks at an intermediate B: B = {mid_B} (the best interior B on validation) beats "
        f"B = {lo_B}"),
        (hi_B, f"Figure 5{' and Table III (at most 10 branches are needed)' if hi_B > 10 >= mid_B else ''}: "
        f"B = {mid_B} beats B = {hi_B}"),
    ]
    fig5_rows = [
        claim(
            text,
            runs,
            mid,
            arm(FIG5_SETTING, mb_label(b)),
            paper=f"peak at B = {paper_peak}",
            resolution=RESOLUTION,
            saturated=SAT_FLAG[FIG5_SETTING],
            plan=t2_plan,
            plan_name=f"Figure 5: {mid.split(' · ')[1]} − B={b}",
            note=diverged_note(runs, arm(FIG5_SETTING, mb_label(b)), FALLBACK_NOTES),
        )
        for b, text in texts
    ]
    # Table III: "many classes need fewer branches" varies the dataset's number of classes: not testable on FMNIST
    fig5_rows.append(
        claim_row(
            "Table III: a dataset with many classes (CIFAR-100) needs fewer branches than one with few (CIFAR-10)",
            verdict([]),
            paper="B = 3 (CIFAR-100) vs 6–10 (CIFAR-10)",
            ours=f"not testable: Fashion-MNIST has {full.n_classes} classes",
        )
    )
    ROWS += fig5_rows
    display(Markdown(claim_bullets(fig5_rows)))
    return PAPER_FIG5, ROWS, fig5_rows, hi_B, lo_B, mid_B, paper_peak


def what_reproduced(ns: dict):
    """The compact claims table of 'What reproduced', the paper's claims first, our own checks folded."""
    (
        EPOCHS,
        K_CLASSES,
        PAPER_EPOCHS,
        ROWS,
    ) = _take(ns, "EPOCHS K_CLASSES PAPER_EPOCHS ROWS")
    from IPython.display import Markdown
    from myst_nb import glue

    from pflkit.pages import findings
    from pflkit.plots import claims_plot

    PAPER_ROWS = [r for r in ROWS if not is_our_check(r)]  # the paper's claims
    OUR_ROWS = [r for r in ROWS if is_our_check(r)]  # our checks: the mechanism checks and the diagnostic under Table I

    from pflkit.experiments import mark_leads

    LEADS = []  # the paper's lead claims (Table II in its headline settings), whatever our verdict
    for r in [r for r in ROWS if r["headline"]]:
        where = r["claim"].split(": ")[0].removeprefix("Table II, ")  # "Dirichlet 0.4 / 15 clients"
        checks = [m for m in ROWS if m["kind"] == "mechanism" and m["claim"].startswith(where)]
        short = {"similar α": "α follows the label mixes", "plain averaging": "eq. 5 beats eq. 6"}
        why = "; ".join(next((v for k, v in short.items() if k in m["claim"]), "our check") + " (" +
                        m["ours (a − b, 95 % CI)"].split(" [")[0] + ")" for m in checks)  # fmt: skip
        what = (
            "beats every other method" if "beats" in r["claim"].split(": ", 1)[1] else "is comparable (±1) to the best"
        )
        LEADS.append((r["claim"].split(" (")[0], f"Table II, {where.split(' / ')[0]}: pFedMB {what}",
                      f"FMNIST {where.replace(' / ', ', ')}, E = {EPOCHS} (paper: {PAPER_EPOCHS})", why))  # fmt: skip
    ROWS = mark_leads(ROWS, LEADS)
    glue("findings", Markdown(findings(ROWS, own=is_our_check)), display=False)  # shown at the top of the page
    CLAIMS = claims_table(ROWS)
    CLAIMS.insert(0, "claim of", ["ours" if is_our_check(r) else "the paper" for r in ROWS])
    PAPER_CLAIMS = CLAIMS[CLAIMS["claim of"] == "the paper"].drop(columns="claim of")
    OWN_CLAIMS = CLAIMS[CLAIMS["claim of"] == "ours"].drop(columns="claim of")
    display(
        Compact(PAPER_CLAIMS, "The claims in full, with the paper's numbers and the notes"),
        folded(
            OWN_CLAIMS, f"Our own checks ({len(OWN_CLAIMS)}): the mechanism checks and the diagnostic under Table I"
        ),
    )
    return CLAIMS, OUR_ROWS, PAPER_ROWS, ROWS, claims_plot


def eq2_check(ns: dict):
    """The numerical check of eq. (2): a random client α, the combined single-branch LeNet against the multi-branch one, and the inference cost. Returns its table."""
    (
        EQ2_IMAGES,
        PAIR_BRANCHES,
        WIDTH,
        full,
    ) = _take(ns, "EQ2_IMAGES PAIR_BRANCHES WIDTH full")
    from pflkit.chapters.pfedmb import eq2_table

    torch.manual_seed(0)
    plain = build_model("lenet", full.input_shape, full.n_classes, WIDTH)
    mb = multi_branch(plain, branches=PAIR_BRANCHES, shared_alpha=False, seed=0)
    with torch.no_grad():
        mb.alpha_logits.normal_(std=2.0)  # some client's α, far from uniform
    x = full.normalize(full.x_test[:EQ2_IMAGES])
    eq2 = eq2_table(mb, x)  # eq. (1) against eq. (2), layer by layer
    with torch.no_grad():
        deployed = combined_model(mb, build_model("lenet", full.input_shape, full.n_classes, WIDTH))
        net_diff = float((mb(x) - deployed(x)).abs().max())
    P = n_params(plain)
    P_branches = sum(p.numel() for _, layer in mb.branch_layers() for p in layer.parameters())
    say(f"whole network: max |multi-branch net − plain net with combined weights| = {net_diff:.1e}")
    say(
        f"parameters: FedAvg's LeNet P = {P:,}; pFedMB's branches = {P_branches:,} = {P_branches / P:.0f} × P; "
        f"α = {mb.alpha_logits.numel()} numbers; the deployed (combined) model = {n_params(deployed):,} = P"
    )
    display(eq2)
    return P, P_branches, eq2, mb


def run_setup_note(ns: dict):
    """The run's setup line (profile, device, seeds, images) and the pairs' partition table."""
    (
        EPOCHS,
        LR_GRID,
        PAIR_SEEDS,
        PILOT_LR,
        PILOT_SEEDS,
        PROFILE,
        SEEDS,
        TEST_IMAGES,
        TRAIN_IMAGES,
        full,
        pair_pick,
        pair_pilot,
        pair_plan,
        pairs,
        pairs_table,
    ) = _take(
        ns,
        "EPOCHS LR_GRID PAIR_SEEDS PILOT_LR PILOT_SEEDS PROFILE SEEDS TEST_IMAGES TRAIN_IMAGES full pair_pick pair_pilot pair_plan pairs pairs_table",
    )
    say(
        f"profile={PROFILE}, device={pick_device()}, seeds={SEEDS}, "
        f"{TRAIN_IMAGES or len(full.y_train)} of {len(full.y_train)} training images, "
        f"{TEST_IMAGES or len(full.y_test)} of {len(full.y_test)} test images, "
        f"E={EPOCHS}; pilot: learning rates {LR_GRID}, stage 1 at {PILOT_LR}, seeds {PILOT_SEEDS}"
    )
    display(
        folded(
            pilot_summary({"pairs": pair_pilot}),
            "The pilot's grid: validation accuracy (%) of each value, mean over the pilot seeds (two seeds: each seed's value in brackets; more: ± the 95 % interval); η is the learning rate (η_W for pFedMB)",
        )
    )
    display(Markdown(f"Chosen on validation for the pairs: {chosen_text(pair_pick)}."))
    say(f"pairs: {pairs.computed} runs computed, {pairs.reused} reused from the store; seeds {PAIR_SEEDS}")
    PLAN_COLUMN = {"plan": "plan (a word here is provisional, on the pilot seeds only)"}
    display(folded(pair_plan.round(2).rename(columns=PLAN_COLUMN), "The seed plan of the pairs' accuracy claims"))
    display(pairs_table)
    return (PLAN_COLUMN,)


def draw_alpha_similarity(ns: dict) -> None:
    """The α similarity within and across pairs over the rounds, and its summary table."""
    (
        PAIR_SEEDS,
        ROUND1,
        last,
        main_scores,
    ) = _take(ns, "PAIR_SEEDS ROUND1 last main_scores")
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    long = main_scores.melt(
        id_vars=["variant", "seed", "round"], value_vars=["within", "across"], var_name="pairs", value_name="cosine"
    )
    sns.lineplot(
        data=long, x="round", y="cosine", hue="variant", style="pairs", marker="o", errorbar=("pi", 100), ax=ax
    )
    ax.set(
        ylim=(0, 1.02),
        title=f"cosine similarity of α: within vs across pairs ({seeds_text(len(PAIR_SEEDS))}, band: range)",
    )
    ax.legend(fontsize=8)
    _glue_figure("pfedmb_alpha_similarity")  # shown in the notes with its caption
    summary3 = last[["within", "across", "gap", "pairs on one branch", "distinct branches", "mean max α"]]
    display(summary3.groupby("variant").mean().round(3).T, Markdown(ROUND1))


def implicit_similarity(ns: dict) -> None:
    """The implicit collaboration weights C_ij eq. 5 implies from the final α, within and across pairs."""
    (
        EQ5,
        EQ6,
        PAIR_ROUNDS,
        S0,
        VARIANTS,
        alphas,
        order,
        pair_id,
        part0,
    ) = _take(ns, "EQ5 EQ6 PAIR_ROUNDS S0 VARIANTS alphas order pair_id part0")
    n_i = np.array([len(part0.clients[i].train) for i in order], dtype=float)
    same_pair = pair_id[S0][order][:, None] == pair_id[S0][order][None, :]

    fig, axes = plt.subplots(1, 2, figsize=(9.5, 4.6))
    mass = {}
    for ax, (label, title) in zip(axes, VARIANTS.items()):
        C = collaboration(alphas[label][S0][PAIR_ROUNDS][order], n_i, label == EQ5)
        mass[label] = float(C[same_pair].sum() / len(C))  # weight on itself and its partner
        sns.heatmap(
            C,
            vmin=0,
            vmax=0.5,
            cmap="magma",
            ax=ax,
            annot=True,
            fmt=".2f",
            annot_kws={"size": 9.5},
            xticklabels=order,
            yticklabels=order,
        )
        ax.set(title=f"C, {title}", xlabel="client j (uploads)", ylabel="client i")
    plt.tight_layout()
    _glue_figure("pfedmb_collaboration")  # shown in the notes with its caption
    say(
        f"weight a client gives its own pair (itself + partner): eq. 5 {mass[EQ5]:.2f}, eq. 6 {mass[EQ6]:.2f} "
        f"(uniform weights: {same_pair.sum() / len(n_i) ** 2:.2f})"
    )


def table1_readings(ns: dict) -> None:
    """The two readings of Table I's header and the validation pilot's words."""
    (
        EQ5,
        EQ6,
        PILOT_WORDS,
        paper,
        t1_paper,
        t1_printed,
    ) = _take(ns, "EQ5 EQ6 PILOT_WORDS paper t1_paper t1_printed")
    published = paper[paper.table.isin(["Table I", "Table II"])]
    display(
        Markdown(
            f"The paper reports {'no spread' if published['std'].isna().all() else 'a spread'} for Tables I and II (means of "
            f"three runs): its own noise is unknown, and its Table I margins (pFedMB against FedAvg: "
            f"{t1_paper[EQ5] - t1_paper['FedAvg']:+.2f} or {t1_printed[EQ5] - t1_printed['FedAvg']:+.2f} points by the two "
            f"readings; eq. 5 against eq. 6: {t1_paper[EQ5] - t1_paper[EQ6]:+.2f} or {t1_printed[EQ5] - t1_printed[EQ6]:+.2f}) "
            "cannot be set against it."
        )
    )
    display(Markdown(PILOT_WORDS))


def table2_setup_notes(ns: dict) -> None:
    """Table II's setup notes: choices at a grid's edge, the pilots' choices, seeds and saturation."""
    (
        EDGE_USED,
        EXTEND,
        FALLBACK_NOTES,
        IMPROVING,
        PICKS,
        PILOTS,
        PLAN_COLUMN,
        SEEDS,
        TABLE2_RUN,
        TABLE2_SETTINGS,
        chosen_B,
        edge_used_text,
        edges,
        eq5_plan,
        runs,
        sat_table,
        t2_plan,
    ) = _take(
        ns,
        "EDGE_USED EXTEND FALLBACK_NOTES IMPROVING PICKS PILOTS PLAN_COLUMN SEEDS TABLE2_RUN TABLE2_SETTINGS chosen_B edge_used_text edges eq5_plan runs sat_table t2_plan",
    )
    display(
        Markdown(
            f"**Choices at an edge of their grid**: {int(edges['at its edge first'].sum())} of {len(edges)} on the grids "
            f"the pilots started from; each of those grids then grew one step past that edge ({EXTEND} step at most), and "
            f"{int(edges['at its edge'].sum())} choices still sit at an edge, "
            + (
                f"{len(EDGE_USED)} of them choices the runs use: {edge_used_text}."
                if EDGE_USED
                else "none of them a choice the runs use (the others belong to pFedMB's variants not chosen)."
            )
        )
    )
    display(
        folded(
            edges.replace({True: "yes", False: ""}),
            "Every choice: on the grid it started from, and after the grid grew",
        )
    )
    display(
        folded(
            pilot_summary(PILOTS),
            "The pilot's grid: validation accuracy (%) of each value, mean over the pilot seeds (two seeds: each seed's value in brackets; more: ± the 95 % interval); η is the learning rate (η_W for pFedMB)",
        )
    )
    display(Markdown("Chosen on validation:\n" + "\n".join(f"* **{n}**: {chosen_text(c)}." for n, c in PICKS.items())))
    display(folded(eq5_plan.round(2).rename(columns=PLAN_COLUMN), "The seed plan of the eq. 5 check"))
    say(f"Table II and Figure 5: {runs.computed} runs computed, {runs.reused} reused from the store")
    for a, note in FALLBACK_NOTES.items():
        say(f"{a}: " + re.sub(r"\blr (\S+)", r"η = \1", note))
    display(folded(t2_plan.round(2).rename(columns=PLAN_COLUMN),
                   f"The seed plan of Table II's and Figure 5's claims (at most {TABLE2_RUN} seeds run)"))  # fmt: skip
    display(
        Markdown(
            "**Which settings saturate?** A descriptive check from the runs (mean accuracy over the seeds, after "
            "fine-tuning): Local's and the best row's of Table II in every setting, and in Figure 5's setting (where only "
            "pFedMB, FedAvg and Local run), beside the headline selection, which was fixed by name before any run, and "
            "the kit's flag (the strongest row within 2 points of 100 %, or every row within 1 point of the others), under "
            "which a claim is labelled and an equivalence claim is not judged."
        )
    )
    display(
        fit(sat_table.round(1), ["Local, test (%)", "best row, test (%)", "the kit's saturation flag"], "every column")
    )
    say("pFedMB's B chosen by validation:", ", ".join(f"{k}: {v}" for k, v in chosen_B.items() if k in TABLE2_SETTINGS))
    display(
        Markdown(
            f"Table II: mean test accuracy (%) after fine-tuning, mean ± 95 % interval over {seeds_text(SEEDS)}, the seeds "
            "every row ran (a claim pairs every seed both of its arms ran, and says how many). Still improving at the end "
            f"(validation +{IMPROVING_POINTS:g} points or more over the last fifth): "
            + ("; ".join(f"in {n}, {', '.join(sorted(v))}" for n, v in IMPROVING.items()) or "none")
            + "."
        )
    )


def table2_claim_notes(ns: dict) -> None:
    """How Table II's claims are posed: the mechanism bullets, the seed plan, the worst gaps."""
    (
        MECH_ALPHA,
        MECH_EQ5,
        all_other,
        all_worst,
        gap_means,
        paper_other,
        paper_worst,
        t2_all,
    ) = _take(ns, "MECH_ALPHA MECH_EQ5 all_other all_worst gap_means paper_other paper_worst t2_all")
    display(Markdown(claim_bullets(list(MECH_ALPHA.values()) + list(MECH_EQ5.values()))))

    def rho_words(r):
        # a mechanism row's ρ in words: the estimate, its interval and its size
        v = r["_v"]
        if v.n < MIN_SEEDS:
            return f"ρ = {v.mean:+.2f} ({seeds_text(v.n)})"
        nonzero = " but nonzero" if (v.lo > 0 or v.hi < 0) and strength(v.mean) in ("very weak", "weak") else ""
        return f"ρ = {v.mean:+.2f} [{v.lo:+.2f}, {v.hi:+.2f}], {strength(v.mean)}{nonzero}"

    MECH_WORDS = "; ".join(f"in {n}, {rho_words(r)}" for n, r in MECH_ALPHA.items())
    display(
        Markdown(
            f"**How strongly α follows the data.** {MECH_WORDS[:1].upper() + MECH_WORDS[1:]}. **Does eq. 5 act?** "
            + "; ".join(f"in {n}, pFedMB − the same with plain averaging: {in_words(r)}" for n, r in MECH_EQ5.items())
            + "."
        )
    )
    if gap_means is not None:
        flips = paper_worst["pFedMB"] > paper_worst[paper_other] and all_worst["pFedMB"] <= all_worst[all_other]
        display(
            Markdown(
                f"**Most balanced, on the paper's own numbers.** Over the settings our headline ones stand for, the paper's "
                f"Table II gives pFedMB a worst gap of {paper_worst['pFedMB']:.2f} points against {paper_other}'s "
                f"{paper_worst[paper_other]:.2f}; over all {len(t2_all)} of its settings, {all_worst['pFedMB']:.2f} against "
                f"{all_other}'s {all_worst[all_other]:.2f}"
                + (
                    ". Restricted to our headline settings, the paper's own numbers do not make pFedMB the most balanced "
                    "method: the claim as we can test it is not the paper's claim over all its settings, and its word "
                    "does not bear on that one."
                    if flips
                    else "."
                )
            )
        )
        display(
            Markdown(
                "Worst-case gap to the best method over the headline settings (points, test): per seed, each method's gap "
                "to the best method of that seed in each headline setting, the larger over the settings, then the mean over "
                "the seeds every row ran; so it need not equal a difference of Table II's means."
            )
        )
        display(gap_means.round(2).to_frame("worst gap"))


def amp_ifca_notes(ns: dict):
    """Did FedAMP or IFCA degenerate? FedAMP's self-weights over the rounds and IFCA's cluster picks."""
    (
        AMP_KW,
        AMP_REGIME,
        SEEDS,
        TABLE2_SETTINGS,
        amp_end,
        runs,
    ) = _take(ns, "AMP_KW AMP_REGIME SEEDS TABLE2_SETTINGS amp_end runs")
    every_round = pd.DataFrame(
        [
            {"setting": n, "seed": s, "round": r + 1, "least": lo, "mean": mean, "most": hi}
            for n in TABLE2_SETTINGS
            for s in SEEDS
            for p in [runs.probes(arm(n, "FedAMP"), s).get(max(runs.probes(arm(n, "FedAMP"), s), default=0))]
            if isinstance(p, dict) and "self_trace" in p
            for r, (lo, mean, hi) in enumerate(p["self_trace"])
        ]
    )
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    colours = dict(zip(TABLE2_SETTINGS, sns.color_palette(n_colors=len(TABLE2_SETTINGS))))
    for n, d in every_round.groupby("setting", sort=False):
        g = d.groupby("round")[["least", "mean", "most"]].mean().clip(lower=0)  # mean over seeds
        ax.plot(g.index, g["mean"], color=colours[n], label=n)
        ax.fill_between(g.index, g["least"], g["most"], color=colours[n], alpha=0.15, lw=0)
    ax.set(xlabel="round", ylabel="ξ_ii", ylim=(-0.03, 1.03),
           title="FedAMP's self-weight ξ_ii in every round (line: mean over clients; band: least to most)")  # fmt: skip
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=len(TABLE2_SETTINGS))
    _glue_figure("pfedmb_amp_selfweight")  # shown in the notes with its caption
    display(
        amp_end.round(3).rename(
            columns={"self": "self-weight ξ_ii", "peak": "attention peak (× uniform)", "d2": "median squared distance"}
        )
    )  # at the last round, mean over seeds (amp_end: computed with Table II's claims)
    amp_words = {n: amp_state(amp_end.loc[n], **AMP_KW) for n in amp_end.index}
    inert_all = all(AMP_REGIME.get(n) for n in amp_end.index)
    display(
        Markdown(
            "\n".join(f"* **{n}**: FedAMP's {w}." for n, w in amp_words.items())
            + (
                "\n\nIn every setting, then, FedAMP's similarity-based aggregation is inert: the Table II claims that "
                "compare with FedAMP test a FedAvg-like or Local-like FedAMP, not attention on similar clients (their "
                "notes say so)."
                if inert_all
                else ""
            )
        )
    )

    # IFCA: the cluster models in use (picked by at least one client) at every evaluated round
    ifca = pd.DataFrame(
        [
            {"setting": n, "seed": s, "round": r, "models in use": len(set(p["clusters"])), "models": p["models"]}
            for n in TABLE2_SETTINGS
            for s in SEEDS
            for r, p in runs.probes(arm(n, "IFCA"), s).items()
            if isinstance(p, dict)
        ]
    )
    if ifca.empty:
        display(Markdown("IFCA: its runs carry no record of the clients' picks (stored by an earlier probe)."))
    else:
        K = int(ifca.models.max())
        say(f"IFCA's cluster models in use (of K = {K}) by evaluated round (mean over seeds):")
        display(ifca.pivot_table(index="round", columns="setting", values="models in use").round(2))
        ifca_last = ifca[ifca["round"] == ifca.groupby("setting")["round"].transform("max")]
        lines = []
        for n, d in ifca_last.groupby("setting", sort=False):
            used = d.set_index("seed")["models in use"]
            ones = int((used == 1).sum())
            over = ifca[ifca.setting == n]  # every evaluated round of every seed
            lines.append(
                f"* **{n}**: at the last round the clients use "
                + ", ".join(f"{u} (seed {s})" for s, u in used.items())
                + f" of IFCA's {K} models; one model for all clients on {ones} of {seeds_text(len(used))}"
                + (" (there IFCA is one model trained by all)" if ones else "")
                + f". Over the run: {over['models in use'].min()} to {over['models in use'].max()} models in use, one "
                f"model in {int((over['models in use'] == 1).sum())} of the {len(over)} evaluated (round, seed) pairs."
            )
        display(Markdown("\n".join(lines)))
    return (inert_all,)


def fig5_notes(ns: dict) -> None:
    """Figure 5's setting and its claims: the spread over B, Local's accuracy there, the diverged B."""
    (
        F5_LOST,
        FIG5_BRANCHES,
        FIG5_SETTING,
        LOCAL_HIGH,
        chosen_B,
        f5,
        fedavg5,
        fig5_rows,
        hi_B,
        lo_B,
        local5,
        mid_B,
        runs,
    ) = _take(
        ns, "F5_LOST FIG5_BRANCHES FIG5_SETTING LOCAL_HIGH chosen_B f5 fedavg5 fig5_rows hi_B lo_B local5 mid_B runs"
    )
    spread5 = f5.groupby("arm")["mean_acc"].mean()  # over the seeds that did not diverge
    kept_B = [b for b in FIG5_BRANCHES if b not in F5_LOST]
    kept5 = spread5[[arm(FIG5_SETTING, mb_label(b)) for b in kept_B]]
    best_B = int(kept5.idxmax().rsplit("=", 1)[1])
    v_local5 = runs.compare(arm(FIG5_SETTING, mb_label(chosen_B[FIG5_SETTING])), arm(FIG5_SETTING, "Local"))
    local_words = (
        f"{v_local5.mean:+.1f} points (95 % interval [{v_local5.lo:+.1f}, {v_local5.hi:+.1f}], {seeds_text(v_local5.n)})"
        if v_local5.n >= MIN_SEEDS
        else f"{v_local5.mean:+.1f} points on {seeds_text(v_local5.n)}"
    )
    display(
        Markdown(
            f"Over B = {', '.join(map(str, kept_B))} the mean test accuracy spans {kept5.max() - kept5.min():.1f} points"
            + "".join(f" (B = {b} is left out: it diverged on {seeds_text(s)})" for b, s in F5_LOST.items())
            + f"; validation picks B = {chosen_B[FIG5_SETTING]} overall. "
            + (
                f"FedAvg ({fedavg5:.1f} %) is above pFedMB at every B (pFedMB's best: {kept5.max():.1f} % at B = {best_B})."
                if fedavg5 > spread5.max()
                else f"FedAvg reaches {fedavg5:.1f} %, pFedMB at best {kept5.max():.1f} % (B = {best_B})."
            )
            + "\n\n"
            f"**Can Figure 5's question be asked here?** Local reaches {local5:.1f} % in {FIG5_SETTING} (mean over seeds, "
            f"test), pFedMB at its chosen B {spread5[arm(FIG5_SETTING, mb_label(chosen_B[FIG5_SETTING]))]:.1f} %; "
            f"pFedMB at its chosen B minus Local, paired over the seeds: {local_words}. "
            + (
                f"Local is above {LOCAL_HIGH:g} %: a client alone does well in this setting, so the curve over B has at "
                f"most {100 - local5:.1f} points of headroom above Local, and a missing peak is weak evidence against the "
                "paper's (a description, not a claim)."
                if local5 > LOCAL_HIGH
                else f"Local is at most {LOCAL_HIGH:g} %: a client alone does not saturate this setting, so the number "
                "of branches has room to matter (a description, not a claim)."
            )
            + "\n\n"
            + "\n".join(f"* {r['claim']}: **{in_words(r)}**." for r in fig5_rows[:2])
            + "\n\n"
            + (
                f"By the paired rule the peak at B = {mid_B} is interior: it beats both ends."
                if all(r["verdict"] == "reproduces" for r in fig5_rows[:2])
                else f"By the paired rule the peak is not shown to be interior: B = {mid_B} does not beat both ends "
                f"({fig5_rows[0]['verdict']} against B = {lo_B}, {fig5_rows[1]['verdict']} against B = {hi_B})."
            )
        )
    )


def closing_summary(ns: dict) -> None:
    """The closing summary: where a claim does not reproduce, and why."""
    (
        CLAIMS,
        CONCENTRATED_ALPHA,
        DIRICHLET_VISITS,
        EDGE_USED,
        EPOCHS,
        EQ5,
        EQ6,
        HEADLINE,
        LR_GRID,
        MARGIN,
        OUR_ROWS,
        PAIR_ROUNDS,
        PAPER_ROWS,
        PFEDMB,
        PILOT_BRANCHES,
        PILOT_SEEDS,
        PROFILE,
        ROW_NAMES,
        SEEDS,
        T2_CAP_TEXT,
        TABLE2_SETTINGS,
        TRAIN_IMAGES,
        VISITS,
        arm_of,
        edge_used_text,
        edges,
        full,
        inert_all,
        last,
        pairs,
        runs,
    ) = _take(
        ns,
        "CLAIMS CONCENTRATED_ALPHA DIRICHLET_VISITS EDGE_USED EPOCHS EQ5 EQ6 HEADLINE LR_GRID MARGIN OUR_ROWS PAIR_ROUNDS PAPER_ROWS PFEDMB PILOT_BRANCHES PILOT_SEEDS PROFILE ROW_NAMES SEEDS T2_CAP_TEXT TABLE2_SETTINGS TRAIN_IMAGES VISITS arm_of edge_used_text edges full inert_all last pairs runs",
    )
    limited = int(CLAIMS.verdict.str.contains("budget-limited").sum())
    visits_note = (
        f"each client was visited {VISITS} time{'s' if VISITS != 1 else ''} (on average, where only a share takes part"
        + (f"; {DIRICHLET_VISITS} in Dirichlet 0.4" if DIRICHLET_VISITS != VISITS else "")
        + ") "
        f"for E = {EPOCHS} epoch{'s' if EPOCHS != 1 else ''} on {TRAIN_IMAGES or len(full.y_train)} of "
        f"Fashion-MNIST's training images"
    )
    lines = [
        f"Of the paper's {len(PAPER_ROWS)} claims, at the {PROFILE} profile: {words_text(PAPER_ROWS)}; of our "
        f"{len(OUR_ROWS)} own checks: {words_text(OUR_ROWS)}; {limited} rows rest on an arm still improving at its end "
        "(*budget-limited*)."
    ]
    if len(SEEDS) < MIN_SEEDS:
        lines.append(f"With {seeds_text(len(SEEDS))} no claim is tested at this profile.")
    else:
        largest = {
            n: np.mean(
                [np.asarray(al).max(-1).mean() for al in final_alphas(runs, arm(n, mb_label(PILOT_BRANCHES)), SEEDS)]
            )
            for n in TABLE2_SETTINGS
        }
        pairs_conc = float(last.loc[EQ5, "mean max α"].mean())
        spread_out = [n for n, v in largest.items() if v < CONCENTRATED_ALPHA]
        pair_span, pair_widest = max((np.ptp(pairs.values(k)), k) for k in (EQ5, EQ6, "Local"))
        t2_span, t2_where = max((np.ptp(runs.values(arm_of(n, r))), f"{r} in {n}") for n in HEADLINE for r in ROW_NAMES)
        first_edge, still_edge = int(edges["at its edge first"].sum()), int(edges["at its edge"].sum())
        collapsed = [  # a pFedMB step at its grid's edge, in a setting where α ends on one branch nearly everywhere
            f"with {v} in {p} the mean largest α at the end is {largest[p]:.2f}"
            for p, g, v in EDGE_USED
            if g.startswith(PFEDMB) and p in largest and largest[p] >= 0.99
        ]
        lines += [
            "Where a claim does not reproduce, these things set our runs apart from the paper's:",
            f"* **Seed-to-seed spread.** pFedMB's accuracy in the pairs ranges from {pairs.values(EQ5).min():.1f} % to "
            f"{pairs.values(EQ5).max():.1f} % over the seeds (eq. 6: {pairs.values(EQ6).min():.1f} % to "
            f"{pairs.values(EQ6).max():.1f} %; Local: {pairs.values('Local').min():.1f} % to "
            f"{pairs.values('Local').max():.1f} %)"
            + (
                f", {pair_span:.1f} points at the widest ({pair_widest}): some seeds end far below the others there."
                if pair_span > 2 * MARGIN
                else f": within {pair_span:.1f} points, the pairs' runs agree across seeds."
            )
            + f" In Table II's headline settings a row's seeds span up to {t2_span:.1f} points ({t2_where}): a seed changes "
            f"the partition, the initial branches and the batches, and intervals over {len(SEEDS)} seeds are wide there.",
            f"* **Training length.** In Table II {visits_note}; the paper trains every method to convergence on CIFAR. pFedMB "
            "starts slower than FedAvg by construction: at uniform α a step on the branches moves the combined weight by "
            "η Σ_b α_b² = η/B, so until α concentrates it learns up to B times slower. The mean largest α_b,l at the last "
            f"round of the B = {PILOT_BRANCHES} runs of Table II is "
            + ", ".join(f"{v:.2f} in {n}" for n, v in largest.items())
            + f" (mean over layers, clients and seeds; uniform: {1 / PILOT_BRANCHES:.2f}, one branch: 1)"
            + (
                f": below {CONCENTRATED_ALPHA:g} in {', '.join(spread_out)}, i.e. on average no branch holds most of "
                "a layer's weight there, where the slow start weighs most."
                if spread_out
                else "."
            )
            + f" In the pairs (one α for all layers) it is {pairs_conc:.2f} after {PAIR_ROUNDS} rounds.",
            "* **Small differences.** The paper's margins in Table II are a point or less; the seed plan under Table II "
            f"says how many seeds each claim needs: {T2_CAP_TEXT}. A claim left undecided is not evidence against it.",
            "* **Small grids.** Like the paper, we tune every method's learning rate (and pFedMB's α step, initial scale "
            f"and B, FedAMP's σ) on validation data, but over {len(LR_GRID)} learning rates and on {len(PILOT_SEEDS)} "
            f"pilot seeds with shorter runs. {first_edge} of the pilots' {len(edges)} choices sat at an edge of the "
            f"grid they started from; each of those grids grew one step past it, and {still_edge} choices still sit at an "
            "edge, where a wider grid might choose otherwise"
            + (
                f"; the runs use {len(EDGE_USED)} of them: {edge_used_text}."
                if EDGE_USED
                else "; the runs use none of them."
            )
            + (
                " The largest step goes with α on one branch: "
                + "; ".join(collapsed)
                + f" (uniform: {1 / PILOT_BRANCHES:.2f}), consistent with the derivation's warning that a large step can "
                "commit a client early (*Keeping α on the simplex*; α's first rounds are not recorded there)."
                if collapsed
                else ""
            ),
        ]
        if inert_all:
            lines.append(
                "* **FedAMP.** In every setting FedAMP's attention is inert (its self-weights, under Table II): the claims "
                "that compare with it (the most balanced method, FedAMP falling behind) test a FedAvg-like or Local-like "
                "FedAMP, not similarity-based aggregation."
            )
    display(Markdown("\n".join(lines)))


def costs_ledger(ns: dict):
    """§VI's costs: traffic per round and the CPU time of each method's runs."""
    (
        EQ5,
        FIG5_SETTING,
        PAIR_BRANCHES,
        PFEDMB,
        S0,
        TABLE2_SETTINGS,
        finals,
        mb,
        pairs,
        runs,
    ) = _take(ns, "EQ5 FIG5_SETTING PAIR_BRANCHES PFEDMB S0 TABLE2_SETTINGS finals mb pairs runs")
    first = TABLE2_SETTINGS[0]
    visit_rows, PART_TIMED = [], []
    for a in runs.arms:
        name, label = a.split(" · ")
        if name != first and not (name == FIG5_SETTING and label.startswith(PFEDMB)):
            continue
        cfg = runs[a, S0]["config"]
        visits = cfg["rounds"] * max(1, int(round(cfg["sample_rate"] * cfg["clients"])))
        f = finals[finals.arm == a].set_index("seed")
        fedavg = finals[finals.arm == arm(name, "FedAvg")].set_index("seed")
        timed = f.index[~f.diverged.astype(bool)]  # a diverged run stops early: its wall time is left out
        if len(timed) < len(f):
            PART_TIMED.append(f"{label} in {name}: timed on {seeds_text(list(timed))}, the seeds that did not diverge")
        visit_rows.append(
            {
                "setting": name,
                "method": label,
                "KB down per visit": f.MB_down[S0] * 1e3 / visits,
                "KB up per visit": f.MB_up[S0] * 1e3 / visits,
                "wall time ÷ FedAvg": (f.wall_s[timed] / fedavg.wall_s).dropna().mean(),
            }
        )
    ledger = pd.DataFrame(visit_rows)
    fedavg_kb = ledger.set_index(["setting", "method"]).loc[(first, "FedAvg"), "KB up per visit"]
    ledger["up ÷ FedAvg"] = ledger["KB up per visit"] / fedavg_kb
    pf = pairs.finals().set_index(["arm", "seed"])
    ratio5 = pf.loc[(EQ5, S0), "MB_up"] / pf.loc[("FedAvg", S0), "MB_up"]
    down5 = pf.loc[(EQ5, S0), "MB_down"] / pf.loc[("FedAvg", S0), "MB_down"]
    say(
        f"pairs runs (B = {PAIR_BRANCHES}): pFedMB uploads {ratio5:.2f} × and downloads {down5:.2f} × FedAvg's bytes "
        f"(B × P branch weights each way; the upload also carries the client's α, {mb.alpha_logits.numel()} numbers "
        f"with per-layer α, and n_i, as FedAvg's carries n_i)"
    )
    display(ledger.round(2))
    mb_cost = ledger[(ledger.setting == first) & ledger.method.str.startswith(PFEDMB)]
    mb_B = mb_cost.method.str.rsplit("=", n=1).str[1].astype(int)
    lo_w, hi_w = mb_cost["wall time ÷ FedAvg"].min(), mb_cost["wall time ÷ FedAvg"].max()
    display(
        Markdown(
            f"**Computation.** In {first} pFedMB's wall time is {lo_w:.1f} to {hi_w:.1f} times FedAvg's at B = "
            f"{', '.join(map(str, sorted(mb_B)))}, while its traffic is B times FedAvg's. "
            + (
                "§VI expects B times in both. Here computation does not grow with B: the kit trains one combined layer "
                "per step (eq. 2), and a round runs E epochs on α, then E on the branches. For this implementation, "
                "that is a finding against §VI's computation estimate."
                if hi_w < 1.5 * lo_w and mb_B.max() >= 2 * mb_B.min()  # flat in B while B at least doubles
                else "§VI expects B times in both."
            )
            + ("".join(f"\n* {t}; a diverged run stops early." for t in PART_TIMED) if PART_TIMED else "")
        )
    )
    return (ratio5,)


def branch_cuts(ns: dict) -> None:
    """§VI's two cuts: branching only some layers, and dropping the branches a client gives little weight."""
    (
        EQ5,
        P,
        PAIR_BRANCHES,
        PILOT_BRANCHES,
        SEEDS,
        TABLE2_SETTINGS,
        mb,
        pairs,
        runs,
    ) = _take(ns, "EQ5 P PAIR_BRANCHES PILOT_BRANCHES SEEDS TABLE2_SETTINGS mb pairs runs")
    layer_size = np.array([sum(p[0].numel() for p in layer.parameters()) for _, layer in mb.branch_layers()])
    layer_names = [name for name, _ in mb.branch_layers()]
    partial = pd.DataFrame(
        [
            {
                "branched layers": ", ".join(layer_names[-k:]),
                "share of P": layer_size[-k:].sum() / P,
                f"traffic ÷ FedAvg (B = {PAIR_BRANCHES})": (P + (PAIR_BRANCHES - 1) * layer_size[-k:].sum()) / P,
            }
            for k in range(1, len(layer_size) + 1)
        ]
    )
    display(partial.round(3))

    cuts = pd.DataFrame(
        [
            {
                "τ": tau,
                f"pairs, eq. 5 (shared α, B={PAIR_BRANCHES})": np.mean(
                    [kept_share(np.asarray(al)[:, None, :], tau, layer_size) for al in final_alphas(pairs, EQ5, SEEDS)]
                ),
                **{
                    f"{name} (per-layer α, B={PILOT_BRANCHES})": np.mean(
                        [
                            kept_share(al, tau, layer_size)
                            for al in final_alphas(runs, arm(name, mb_label(PILOT_BRANCHES)), SEEDS)
                        ]  # fmt: skip
                    )
                    for name in TABLE2_SETTINGS
                },
            }
            for tau in (0.01, 0.05, 0.1)
        ]
    ).set_index("τ")
    display(
        Markdown(
            f"Share of pFedMB's branch traffic a client would keep (1 = all {PAIR_BRANCHES} branches, "
            f"{1 / PAIR_BRANCHES:.2f} = one branch, FedAvg's cost):"
        )
    )
    display(cuts.round(2))


def deviations_table(ns: dict) -> None:
    """The fixed options of the baselines, as the deviations list them."""
    (
        PFEDMB,
        PICKS,
        TABLE2_SETTINGS,
    ) = _take(ns, "PFEDMB PICKS TABLE2_SETTINGS")
    first = TABLE2_SETTINGS[0]
    OPTION_WORDS = {"lam": "λ", "K": "inner steps K", "personal_lr": "inner (personal) learning rate", "beta": "β",
                    "clusters": "cluster models K", "models": "models downloaded per round M", "epsilon": "exploration ε",
                    "epsilon_decay": "decay of ε per round", "alpha_k": "attention step γ", "sigma": "σ",
                    "similarity": "similarity", "self_weight": "self-weight", "mu": "proximal weight μ"}  # fmt: skip
    display(Markdown(f"**Baselines' options as run** ({first}; the kit's defaults filled in):"))
    display(
        pd.DataFrame(
            [
                {"method": k, "option": OPTION_WORDS.get(o, o), "value": f"{v:g}" if isinstance(v, float) else str(v)}
                for k, c in PICKS[first].items()
                if k != PFEDMB
                for o, v in get_method(c.method).resolve_options(c.options).items()
            ]
        ).set_index(["method", "option"])
    )


def glue_texts(ns: dict) -> None:
    """The values and sentences the chapter's markdown reads by name (glue), and the setup card."""
    (
        ALPHA_LR_GRID,
        BATCH,
        BRANCH_CHOICES,
        CLIENT_SETUPS,
        DATA_FRACTION,
        DIRICHLET_VISITS,
        EPOCHS,
        FIG5_SETTING,
        FIG5_VISITS,
        K_CLASSES,
        MOMENTUM,
        OPTIONS,
        PAIR_BRANCHES,
        PAIR_CLIENTS,
        PAIR_ROUNDS,
        PAPER_EPOCHS,
        PAPER_FIG5,
        PAPER_GAP,
        SEEDS,
        SETTINGS,
        T2_CAP_TEXT,
        TABLE2_SETTINGS,
        TEST_IMAGES,
        TRAIN_IMAGES,
        VISITS,
        WIDTH,
        glue,
        paper_col,
        paper_peak,
        runs,
    ) = _take(
        ns,
        "ALPHA_LR_GRID BATCH BRANCH_CHOICES CLIENT_SETUPS DATA_FRACTION DIRICHLET_VISITS EPOCHS FIG5_SETTING FIG5_VISITS K_CLASSES MOMENTUM OPTIONS PAIR_BRANCHES PAIR_CLIENTS PAIR_ROUNDS PAPER_EPOCHS PAPER_FIG5 PAPER_GAP SEEDS SETTINGS T2_CAP_TEXT TABLE2_SETTINGS TEST_IMAGES TRAIN_IMAGES VISITS WIDTH glue paper_col paper_peak runs",
    )
    from pflkit.chapters.pfedmb import PROSE_NAMES
    from pflkit.pages import glue_values, prose

    # the values the prose shows ({glue:text} roles), as this execution set them
    glue_values({k: ns[k] for k in PROSE_NAMES})
    glue_values({"PAPER_GAP": ", ".join(f"{d} {st}: {g:+.2f}" for (d, st), g in PAPER_GAP.items())})
    glue_values(
        {
            "FIRST_SEED": SEEDS[0],
            "IFCA_K": OPTIONS["ifca"]["clusters"],
            "PFEDME_K": OPTIONS["pfedme"]["K"],
            "FEDAMP_LAM": OPTIONS["fedamp"]["lam"],
        }
    )

    def share(rate):  # a share of the clients per round, in words
        return "all in every round" if rate >= 1 else f"{100 * rate:g} % per round"

    fig5_cfg = SETTINGS[FIG5_SETTING]["cfg"]
    r2_run = [n for n in TABLE2_SETTINGS if n.startswith("random 2")]
    resolved = {
        m: get_method(m).resolve_options(OPTIONS.get(m, {})) for m in ("pfedme", "fedfomo", "fedamp", "fedprox")
    }
    ran = (
        f"every table and figure, Table II in all {len(SETTINGS)} of its settings"
        if set(TABLE2_SETTINGS) == set(SETTINGS)
        else f"every table and figure, Table II in {len(TABLE2_SETTINGS)} of its {len(SETTINGS)} settings"
    ) + f" and Figure 5 in {FIG5_SETTING} (the paper: {PAPER_FIG5[1]})"
    deviations = [
        f"Fashion-MNIST instead of CIFAR-10/100 (random {K_CLASSES} classes for the paper's random 20 of CIFAR-100)"
    ]
    if EPOCHS != PAPER_EPOCHS:
        deviations.append(
            f"E = {EPOCHS} local epoch{'s' if EPOCHS != 1 else ''} (the paper: {PAPER_EPOCHS}), also in fine-tuning"
        )
    deviations.append("fixed rounds, not convergence")
    glue_values({
        "RAN_TEXT": ran,
        "DEVIATIONS_TEXT": "; ".join(deviations) + ".",
        "E_TEXT": (f"E = {EPOCHS} local epoch{'s' if EPOCHS != 1 else ''} at this profile, against the paper's "
                   f"{PAPER_EPOCHS} (§V-A)." if EPOCHS != PAPER_EPOCHS else f"E = {EPOCHS} local epochs, as in the paper (§V-A)."),
        "PAIR_GROUPS": PAIR_CLIENTS // 2,
        "ALPHA_GRID_MOM": ALPHA_LR_GRID["momentum"],
        "ALPHA_GRID_PLAIN": ALPHA_LR_GRID["no momentum"],
        "SEED_CAP": SEED_CAP,
        "T2_CAP_TEXT": T2_CAP_TEXT,
        "SETTINGS_RUN_TEXT": (
            f"This profile runs all {len(SETTINGS)} settings."
            if set(TABLE2_SETTINGS) == set(SETTINGS)
            else f"This profile runs {len(TABLE2_SETTINGS)} of the {len(SETTINGS)}: {prose(TABLE2_SETTINGS)} "
            f"({FIG5_SETTING} runs for Figure 5, with pFedMB, FedAvg and Local only); the paper profile runs all "
            f"{len(SETTINGS)}."
        ),
        "R2_LOCAL_TEXT": (
            f"Local reaches {runs.values(arm(r2_run[0], 'Local')).mean():.1f} % in our {r2_run[0]} runs (Table II)"
            if r2_run
            else "a client alone tells two classes apart almost perfectly"
        ),
        "PAPER_LOCAL_R2_50": f"{paper_col(f'random 2 classes / {CLIENT_SETUPS[-1][0]} clients')['Local']:.2f}",
        "PAPER_PEAK": paper_peak,
        "WIDTH_TEXT": f"{WIDTH} and {2 * int(WIDTH)}",
        "TRAIN_IMAGES_TEXT": f"{TRAIN_IMAGES} (a {DATA_FRACTION:g} share of the 60 000)" if TRAIN_IMAGES else "all 60 000",
        "TEST_TEXT": "The whole test set is used." if TEST_IMAGES is None
        else f"{TEST_IMAGES} of the 10 000 test images are used at this profile.",
        "CLIENT_SETUPS_TEXT": "; ".join(f"{n} clients, {share(r)}" for n, r in CLIENT_SETUPS),
        "FIG5_ROUNDS_TEXT": f"{fig5_cfg['clients']} clients, {share(fig5_cfg['sample_rate'])}: "
        f"{int(round(FIG5_VISITS / fig5_cfg['sample_rate']))} rounds",
        "PFEDME_LAM": resolved["pfedme"]["lam"],
        "PFEDME_PLR": OPTIONS["pfedme"]["personal_lr"],
        "FEDFOMO_M": resolved["fedfomo"]["models"],
        "FEDFOMO_EPS": resolved["fedfomo"]["epsilon"],
        "FEDFOMO_DECAY": resolved["fedfomo"]["epsilon_decay"],
        "FEDAMP_GAMMA": resolved["fedamp"]["alpha_k"],
        "FEDPROX_MU": resolved["fedprox"]["mu"],
    })  # fmt: skip

    glue(
        "setup_card",
        Markdown(
            setup_card(
                setup_rows(
                    train_images=TRAIN_IMAGES,
                    data_fraction=DATA_FRACTION,
                    width=WIDTH,
                    branch_choices=BRANCH_CHOICES,
                    pair_clients=PAIR_CLIENTS,
                    pair_branches=PAIR_BRANCHES,
                    settings=TABLE2_SETTINGS,
                    epochs=EPOCHS,
                    paper_epochs=PAPER_EPOCHS,
                    batch=BATCH,
                    momentum=MOMENTUM,
                    pair_rounds=PAIR_ROUNDS,
                    visits=VISITS,
                    dirichlet_visits=DIRICHLET_VISITS,
                    fig5_visits=FIG5_VISITS,
                    seeds=SEEDS,
                    cap=SEED_CAP,
                )
            )
        ),
        display=False,
    )  # the setup card, under the findings
