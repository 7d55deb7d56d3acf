"""The pFedMB chapter's sections: what each part of book/pfedmb.ipynb computes, shows and adds to
its claims table.  Each takes the chapter's parameters (:class:`Params`, built once in the notebook
from its parameters cell) and what earlier sections returned, by name; none reads the notebook's
namespace.  The measurements, tables and words they are built from are in
:mod:`pflkit.chapters.pfedmb`."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from IPython.display import Markdown, display

from ..engine import Federation, RunConfig, pick_device
from ..experiments import (
    HEADLINE_SEEDS,
    IMPROVING_POINTS,
    MIN_SEEDS,
    SEED_CAP,
    arm_seeds,
    arms_for,
    claim,
    claims_table,
    in_words,
    mark_leads,
    mechanism,
    paper_vs_ours,
    saturation,
    seed_plan,
    sweep_stable,
    tune_axis,
)
from ..methods import display_name, get_method
from ..methods.pfedmb import combined_model, multi_branch
from ..models import build_model, n_params
from ..pages import claim_bullets, fit, folded, glue_findings, glue_values, prose, setup_card
from ..verdicts import RESOLUTION, PaperMargin, claim_row, fmt_interval, interval, seeds_text, verdict, words_text
from .pfedmb import (
    PFEDMB,
    PROSE_NAMES,
    TRAIN_SIZE,
    VALUE_WORDS,
    Compact,
    alpha_follows_data,
    amp_probe,
    amp_regime,
    amp_state,
    arm,
    cell_text,
    chosen_text,
    collaboration,
    derived_claim,
    diverged_note,
    eq2_table,
    eval_every,
    final_alphas,
    grid_used,
    is_our_check,
    kept_share,
    main_run,
    mb_label,
    mechanism_line,
    pair_diffs,
    pair_scores,
    paper_diff,
    per_seed,
    pilot_summary,
    pilot_table,
    say,
    setting_arms,
    setup_rows,
    strength,
    t2_diffs,
    table2_probe,
    value_words,
    worst_gap,
)

EQ5 = PFEDMB  # the pairs' pFedMB with α-weighted averaging (eq. 5) ...
EQ6 = f"{PFEDMB} (w/o α-weighted avg.)"  # ... and with plain averaging (eq. 6)
PAIR_MAIN = ["Local", "FedAvg", EQ6, EQ5]  # Table I's columns
VARIANTS = {EQ5: "with α-weighted averaging (eq. 5)", EQ6: "without (eq. 6)"}  # Figure 3's rows
BASELINES = ["pfedme", "ifca", "fedfomo", "fedamp", "fedprox", "fedper", "fedavg", "local"]  # Table II's, slowest first
OTHERS = [display_name(m) for m in BASELINES]
PAPER_NAME = {"FedAMP": "FedAmp"}  # the registry's names as the paper's Table II spells them
REGISTRY_NAME = {v: k for k, v in PAPER_NAME.items()}
ALPHA_MOMENTUM = {"momentum": -1.0, "no momentum": 0.0}  # the kit's alpha_momentum: -1 = the run's momentum
PLAN_COLUMN = {"plan": "plan (a word here is provisional, on the pilot seeds only)"}
PILOT_GRID_TITLE = (
    "The pilot's grid: validation accuracy (%) of each value, mean over the pilot seeds (two seeds: each seed's value "
    "in brackets; more: ± the 95 % interval); η is the learning rate (η_W for pFedMB)"
)


# ----------------------------------------------------------------------------- the chapter's parameters


@dataclasses.dataclass(frozen=True)
class Params:
    """The chapter's parameters, each under its notebook name in lower case (``SEEDS`` -> ``seeds``):
    the parameters cell's, and the setup cell's ``train_images``, ``margin``, ``width``, ``pilot_lr``
    and ``options``.  Table II's settings and the B each one chooses among follow from them."""

    profile: str
    datasets: list  # Table II's CIFAR-10 settings (and the pairs) read the first, its CIFAR-100 setting the last
    val_fraction: float
    seeds: list
    pilot_seeds: list
    data_fraction: float
    test_images: int | None
    epochs: int
    paper_epochs: int
    momentum: float
    batch: int
    lr_grid: list
    alpha_lr_grid: dict
    extend: int
    sigma_grid: list
    baseline_grids: (
        dict  # method -> {option: grid}: a baseline's own hyperparameters, one axis at a time, at the pilot's rate
    )
    pair_rounds: int
    pair_pilot_rounds: int
    pair_branches: int
    pair_clients: int
    visits: int
    dirichlet_visits: int
    client_setups: tuple
    pilot_visits: int
    k_classes: int
    table2_settings: list
    pilot_branches: int
    rho_resolution: float
    table2_run: int
    amp_evals: int
    ifca_evals: int
    branch_choices: list
    fig5_setting: str
    fig5_branches: list
    fig5_visits: int
    eq2_images: int
    concentrated_alpha: float
    scale_shift: float
    local_high: float
    amp_self_local: float
    amp_self_average: float
    amp_peak_flat: float
    train_images: int | None
    margin: float
    width: str
    pilot_lr: float
    options: dict

    @property
    def settings(self) -> dict[str, dict]:
        """Table II's six settings (two per kind of split, one per federation size of
        ``client_setups``): each one's dataset and partition options and the paper's (dataset, setting) it
        stands for: the paper's CIFAR-10 settings read ``datasets[0]``, its CIFAR-100 setting ``datasets[-1]``."""
        out = {}
        d10, d100 = self.datasets[0], self.datasets[-1]
        for n, rate in self.client_setups:
            out[f"random 2 classes / {n} clients"] = dict(
                cfg=dict(
                    dataset=d10, partition="pathological-equal", clients=n, sample_rate=rate, classes_per_client=2
                ),
                paper=("CIFAR10", f"random 2 classes / {n} clients"),
            )
            out[f"Dirichlet 0.4 / {n} clients"] = dict(
                cfg=dict(dataset=d10, partition="dirichlet", clients=n, sample_rate=rate, alpha=0.4),
                paper=("CIFAR10", f"Dirichlet 0.4 / {n} clients"),
            )
            out[f"random {self.k_classes} classes / {n} clients"] = dict(
                cfg=dict(
                    dataset=d100, partition="pathological", clients=n, sample_rate=rate,
                    classes_per_client=self.k_classes, shares=(0.3, 0.7),
                ),
                paper=("CIFAR100", f"random 20 classes with different size / {n} clients"),
            )  # fmt: skip
        return out

    @property
    def headline(self) -> list[str]:
        """Table II's headline settings, fixed in advance by name: every setting run but random 2 classes,
        which comes close to saturating on Fashion-MNIST (the check under Table II shows it)."""
        return [n for n in self.table2_settings if not n.startswith("random 2 ")]

    def choices_of(self, name: str) -> list[int]:
        """The numbers of branches validation chooses among in setting ``name``: Figure 5's setting sweeps
        more of them."""
        return self.fig5_branches if name == self.fig5_setting else self.branch_choices

    def visits_of(self, name: str) -> int:
        """Table II's visits per client in setting ``name``."""
        return self.dirichlet_visits if name.startswith("Dirichlet") else self.visits

    def prose_values(self) -> dict:
        """The values the prose shows ({glue:text} roles), under their notebook names (:data:`PROSE_NAMES`)."""
        kit = {"MIN_SEEDS": MIN_SEEDS, "RESOLUTION": RESOLUTION}
        return {k: kit[k] if k in kit else getattr(self, k.lower()) for k in PROSE_NAMES}


def _glue_figure(name: str) -> None:
    """Glue the current figure under ``name`` for a ``{glue:figure}`` with its caption, and close it; shown as
    :func:`pflkit.plots.png_with_text_size` writes it (importing :mod:`pflkit.plots` installs that), so that the
    browser check can read its smallest text."""
    from myst_nb import glue

    import pflkit.plots  # noqa: F401  (installs the figures' PNG formatter)

    fig = plt.gcf()
    glue(name, fig, display=False)
    plt.close(fig)


# ----------------------------------------------------------------------------- the validation pilot


class Pilot(NamedTuple):
    """A setting's validation pilot: the chosen config per label, the pilot's table, its edges (the choice
    before and after the grids grew), per label the learning-rate pilot and grid its config comes from
    (what the kit's divergence rule falls back on), and the pilot's sweeps."""

    chosen: dict
    table: pd.DataFrame
    edges: pd.DataFrame
    fallback: dict
    sweeps: list


def pilot_tuner(P: Params, store) -> Callable[..., Pilot]:
    """The validation pilot of one setting, as a function ``tuned(base, methods, *, mb_options, probe)``
    running its sweeps in ``store``, in two stages.
    1. At ``P.pilot_lr``: pFedMB's η_α over ``P.alpha_lr_grid`` with momentum on α and without (branches × √B),
       FedAMP's σ, and each baseline's own hyperparameters of ``P.baseline_grids`` (pFedMe's personal learning rate
       and then its λ, FedProx's μ; one axis at a time).
    2. The learning rate (``P.lr_grid``) of every method at its stage-1 choice; pFedMB with the branches as drawn
       and × √B.
    Every grid follows the kit's edge rule (``tune_axis``)."""

    def tuned(base: RunConfig, methods: list[str], *, mb_options: dict, probe) -> Pilot:
        """The validation pilot of one setting (``base``: its config with the pilot's rounds), in two stages.
        1. At P.pilot_lr: pFedMB's η_α over P.alpha_lr_grid with momentum on α and without (branches × √B, the
           kit's default: as drawn, a deep multi-branch net barely trains at some settings), FedAMP's σ, pFedMe's
           personal learning rate and then its λ, FedProx's μ (P.baseline_grids' axes in order, each at the last
           one's choice).
        2. The learning rate (P.lr_grid) of every method at its stage-1 choice; pFedMB with the branches as drawn
           and × √B.
        Every grid follows the kit's edge rule (``tune_axis``): a choice at an end of its grid adds the next value
        past it, at most P.extend times, and the pilot chooses again (best mean validation accuracy over
        P.pilot_seeds).  ``probe``: the experiment's own, so that a pilot run equal to a main run (at ``smoke``)
        is reused."""
        mid = dataclasses.replace(base, lr=P.pilot_lr)
        mb = dataclasses.replace(mid, method="pfedmb", options={**mb_options, "scale_init": True})
        sweeps = []

        def axis(configs, name, values):
            t = tune_axis(configs, name, values, P.pilot_seeds, store, extend=P.extend, probe=probe, progress=False)
            sweeps.append(t.result)
            return t

        variants = {f"{PFEDMB}, {k} on α": dataclasses.replace(mb, options={**mb.options, "alpha_momentum": ALPHA_MOMENTUM[k]})
                    for k in P.alpha_lr_grid}  # fmt: skip
        alpha = axis(variants, "alpha_lr", {f"{PFEDMB}, {k} on α": v for k, v in P.alpha_lr_grid.items()})
        best = alpha.result.select(list(alpha.chosen.values()))  # momentum on α or not
        mb = next(g[best] for g in alpha.grids.values() if best in g)
        stage2 = {display_name(m): arms_for([m], mid, P.options)[display_name(m)] for m in methods}
        pilots = [alpha]
        if "fedamp" in methods:
            pilots.append(axis({"FedAMP, σ": stage2["FedAMP"]}, "sigma", P.sigma_grid))
            stage2["FedAMP"] = pilots[-1].config("FedAMP, σ")
        for method, grids in P.baseline_grids.items():
            for option, values in grids.items() if method in methods else ():
                name = display_name(method)
                label = f"{name}, {VALUE_WORDS.get(option, option)}"
                pilots.append(axis({label: stage2[name]}, option, values))
                stage2[name] = pilots[-1].config(label)
        for scaled, k in ((False, "branches as drawn"), (True, "branches × √B")):
            stage2[f"{PFEDMB}, {k}"] = dataclasses.replace(mb, options={**mb.options, "scale_init": scaled})
        lr = axis(stage2, "lr", P.lr_grid)
        pilots.append(lr)
        chosen = {display_name(m): lr.config(display_name(m)) for m in methods}
        best = lr.result.select([lr.chosen[k] for k in stage2 if k.startswith(PFEDMB)])  # the initial scale
        mb_grid = next(k for k, g in lr.grids.items() if best in g)
        chosen[PFEDMB] = lr.grids[mb_grid][best]
        # for the kit's divergence rule: the learning-rate pilot and the grid each chosen config comes from
        fallback = {display_name(m): (lr, display_name(m)) for m in methods} | {PFEDMB: (lr, mb_grid)}
        return Pilot(chosen, pd.concat([pilot_table(t) for t in pilots]), pd.concat([t.edges() for t in pilots]),
                     fallback, sweeps)  # fmt: skip

    return tuned


WEAK_REFERENCE = {"pfedme": "Local", "fedprox": "FedAvg"}  # what a tuned baseline's weak mark measures it against


def tuned_baselines_why(pilots: dict, grids: dict, runs) -> dict[str, str]:
    """Why a baseline whose own hyperparameters the pilot tunes (``grids``: :class:`Params`'
    ``baseline_grids``) stays a weak baseline where Table II's claims mark it (for
    :func:`pflkit.verdicts.explain_weak`, keyed by the marked arm "<setting> · <method>"): the values its
    setting's pilot chose, its best pilot run against its reference's (:data:`WEAK_REFERENCE`: Local for
    pFedMe, FedAvg for FedProx) on validation, and the paired difference on the table's seeds (``runs``)."""
    why = {}
    for name, pilot in pilots.items():
        for method, axes in grids.items():
            label, ref = display_name(method), WEAK_REFERENCE.get(method, "Local")
            if label not in pilot.chosen or ref not in pilot.chosen:
                continue
            lr, _ = pilot.fallback[label]
            val = {m: lr.result.values(lr.chosen[m], "val_mean_acc").mean() for m in (label, ref)}
            cfg = pilot.chosen[label]
            opts = get_method(method).resolve_options(cfg.options)
            chosen = ", ".join(f"{VALUE_WORDS.get(k, k)} {opts[k]:g}" for k in axes)
            text = (f"tuned on this setting's validation pilot as pFedMB is ({chosen}, learning rate {cfg.lr:g}; each grid "
                    f"grown past an edge): its best pilot run scores {val[label]:.1f} % against {ref}'s {val[ref]:.1f} % on "
                    "validation")  # fmt: skip
            arm, other = f"{name} · {label}", f"{name} · {ref}"
            if arm in runs.arms and other in runs.arms:
                d = runs.paired(arm, other, "mean_acc").dropna()
                mean, half, n = interval(d)
                holds = half == half and mean - half <= 0 <= mean + half
                text += (f"; on the table's {seeds_text(n)}, {label} − {ref} is {fmt_interval(d)}"
                         + (": an interval that holds 0, so the table does not show it below" if holds else
                            ": the gap is the method's at this budget and data, not its tuning"))  # fmt: skip
            why[arm] = text
    return why


# ----------------------------------------------------------------------------- the pairs: Figure 3, Table I, Figure 4


class PairArms(NamedTuple):
    """The arms of the pairs and the choice they follow: pFedMB's chosen config ``mb``, whether it scales
    the branches by √B (``scaled``), the suffix ``alt`` of the arms at the other initial scale."""

    mb: RunConfig
    scaled: bool
    alt: str
    arms: dict[str, RunConfig]


def pair_arms_of(P: Params, pick: dict) -> PairArms:
    """The arms of the pairs (Figure 3, Table I, Figure 4) from the pilot's picks ``pick``: pFedMB with eq. 5
    and eq. 6 at the chosen and the other initial scale, FedAvg and Local, ``P.pair_rounds`` rounds each."""
    mb = pick[PFEDMB]  # pFedMB's chosen η_W, η_α, momentum on α and initial scale
    scaled = mb.options["scale_init"]
    alt = ", branches as drawn" if scaled else ", branches × √B"  # the diagnostic: the initial scale not chosen

    def mb_variant(weighted, scaled, every=1):
        return main_run(
            dataclasses.replace(mb, options={**mb.options, "alpha_weighted": weighted, "scale_init": scaled}),
            P.pair_rounds,
            every,
        )

    arms = {
        EQ5: mb_variant(True, scaled),
        EQ6: mb_variant(False, scaled),
        EQ5 + alt: mb_variant(True, not scaled, eval_every(P.pair_rounds)),
        EQ6 + alt: mb_variant(False, not scaled, eval_every(P.pair_rounds)),
        **{k: main_run(pick[k], P.pair_rounds, 1) for k in ("FedAvg", "Local")},
    }
    return PairArms(mb, scaled, alt, arms)


class PairPartitions(NamedTuple):
    """The pairs' federations: the first seed ``s0``, each seed's client -> pair (``pair_id``), the clients'
    α per variant, seed and round (``alphas``), the order that lists a pair's two clients together, the
    first seed's partition (``part0``) and its table."""

    s0: int
    pair_id: dict
    alphas: dict
    order: np.ndarray
    part0: object
    table: pd.DataFrame


def pair_partitions(pairs, *, base: RunConfig, alt: str, classes: list[str]) -> PairPartitions:
    """The partitions the pairs' seeds draw (``base``: the pairs' config), each client's pair, the clients' α
    per variant of ``pairs`` (the arms at both scales, ``alt``), seed and round, and the first seed's
    partition table (``classes``: the dataset's class names)."""
    seeds = pairs.seeds
    pair_id, pair_fed = {}, {}
    for s in seeds:  # the partition a seed draws (the sweep's workers build the same one from the config)
        fed = pair_fed[s] = Federation.from_config(dataclasses.replace(base, seed=s))
        counts = fed.partition.class_counts(fed.ds.y_train.cpu().numpy())
        pair_id[s] = np.array([int(np.flatnonzero(row)[0]) // 2 for row in counts])
    alphas = {
        label: {s: {r: np.array(a) for r, a in pairs.probes(label, s).items()} for s in seeds}
        for label in (EQ5, EQ6, EQ5 + alt, EQ6 + alt)
    }
    s0 = seeds[0]
    order = np.argsort(pair_id[s0], kind="stable")  # the figures list the two clients of a pair together
    part0 = pair_fed[s0].partition
    short = [c.split("/")[0] for c in classes]
    table = pd.DataFrame(
        {
            "client": order,
            "pair": pair_id[s0][order],
            "classes": [
                " & ".join(short[c] for c in np.flatnonzero(row))
                for row in part0.class_counts(pair_fed[s0].ds.y_train.cpu().numpy())[order]
            ],
            "train": [len(part0.clients[i].train) for i in order],
            "val": [len(part0.clients[i].val) for i in order],
            "test": [len(part0.clients[i].test) for i in order],
        }
    ).set_index("client")
    return PairPartitions(s0, pair_id, alphas, order, part0, table)


def draw_fig3(P: Params, part: PairPartitions):
    """Figure 3: each client's α over the branches at a few rounds, eq. 5 (top) and eq. 6 (bottom), on the
    first seed of the pairs (``part``).  Returns the figure."""
    s0, order = part.s0, part.order
    heat_rounds = sorted(
        {1, min(2, P.pair_rounds), max(1, P.pair_rounds // 4), max(1, P.pair_rounds // 2), P.pair_rounds}
    )
    fig, axes = plt.subplots(2, len(heat_rounds), figsize=(min(9.5, 1.9 * len(heat_rounds)), 5.2), squeeze=False)
    ylabels = [f"{i} (pair {p})" for i, p in zip(order, part.pair_id[s0][order])]
    for r, label in enumerate(VARIANTS):
        for c, rnd in enumerate(heat_rounds):
            ax = axes[r, c]
            sns.heatmap(
                part.alphas[label][s0][rnd][order],
                vmin=0,
                vmax=1,
                cmap="viridis",
                annot=True,
                fmt=".1f",
                annot_kws={"size": 9.5},
                cbar=False,
                ax=ax,
                xticklabels=[f"b{b + 1}" for b in range(P.pair_branches)],
                yticklabels=ylabels if c == 0 else False,
            )
            ax.set_title(f"round {rnd}", fontsize=10)
            if c == 0:
                ax.set_ylabel(f"{'eq. 5' if label == EQ5 else 'eq. 6'}: client")
    plt.tight_layout()
    plt.show()
    return fig


class Fig3Claims(NamedTuple):
    """Figure 3's claims (``rows``), the α scores per variant, seed and round of eq. 5 and eq. 6
    (``main_scores``) and at the last round (``last``), and the round-1 sentence."""

    rows: list[dict]
    main_scores: pd.DataFrame
    last: pd.DataFrame
    round1: str


def fig3_claims(P: Params, pairs, *, part: PairPartitions, mb: RunConfig) -> Fig3Claims:
    """Figure 3's claims (pairs learn the same α, how fast, their own branches) on the pairs' sweep ``pairs``
    (``mb``: pFedMB's chosen config), and their bullets."""
    seeds = pairs.seeds
    scores = pd.DataFrame(
        [
            {"variant": label, "seed": s, "round": rnd,
             **pair_scores(a, part.pair_id[s], concentrated=P.concentrated_alpha)}
            for label in part.alphas
            for s in seeds
            for rnd, a in part.alphas[label][s].items()
        ]
    )  # fmt: skip
    scores["gap"] = scores["within"] - scores["across"]
    main_scores = scores[scores.variant.isin(VARIANTS)]
    last = main_scores[main_scores["round"] == P.pair_rounds].set_index(["variant", "seed"])
    over_rounds = main_scores.groupby(["variant", "seed"])["gap"].mean()  # separation summed up over the run

    gap5, gap6 = per_seed(last["gap"], EQ5, seeds), per_seed(last["gap"], EQ6, seeds)
    dist5 = per_seed(last["distinct branches"], EQ5, seeds)
    dist6 = per_seed(last["distinct branches"], EQ6, seeds)
    within5, within6 = last.loc[EQ5, "within"].mean(), last.loc[EQ6, "within"].mean()
    eq6_agrees = gap6.mean() >= gap5.mean() - 0.05  # eq. 6 separates the pairs about as well (a description)
    fig3a_note = (
        f"eq. 6 gives within-pair cosine {within6:.3f} (eq. 5: {within5:.3f}) and within − across {gap6.mean():.3f} "
        f"(eq. 5: {gap5.mean():.3f})" + (": the agreement within a pair does not need eq. 5" if eq6_agrees else "")
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
            per_seed(over_rounds, EQ5, seeds) - per_seed(over_rounds, EQ6, seeds),
            pairs,
            [EQ5, EQ6],
            paper="heatmaps (no number)",
            unit="cosine",
        ),
        derived_claim(
            f"Figure 3b: without eq. 5 different pairs share branches (distinct branches of the {P.pair_clients // 2} pairs, eq. 5 − eq. 6)",
            dist5 - dist6,
            pairs,
            [EQ5, EQ6],
            paper="5 vs fewer (heatmaps)",
            unit="branches",
        ),
    ]
    r1 = scores[(scores["round"] == 1) & scores.variant.isin(VARIANTS)].groupby("variant")["mean max α"].mean()
    display(
        Markdown(
            f"* **Pairs learn the same α.** With eq. 5 the within-pair cosine ends at {last.loc[EQ5, 'within'].mean():.2f} "
            f"against {last.loc[EQ5, 'across'].mean():.2f} across pairs (mean over seeds): {fig3[0]['verdict']}, "
            f"{fig3[0]['ours (a − b, 95 % CI)']}. Without eq. 5 it ends at {within6:.2f} (within − across {gap6.mean():.2f}, "
            f"against {gap5.mean():.2f} with eq. 5)"
            + (
                ": local training of α alone gives a pair the same α, so this agreement is not eq. 5's doing.\n"
                if eq6_agrees
                else ".\n"
            )
            + f"* **Speed.** Within − across, averaged over the rounds: {over_rounds[EQ5].mean():.2f} with eq. 5, "
            f"{over_rounds[EQ6].mean():.2f} without: {in_words(fig3[1])}.\n"
            f"* **Own branches.** The {P.pair_clients // 2} pairs end on {dist5.mean():.1f} distinct branches with eq. 5 and "
            f"{dist6.mean():.1f} without (mean over seeds): {in_words(fig3[2])}."
        )
    )
    round1 = (
        f"Round 1 is the same in both variants (the same W⁰ and batches; the aggregation acts only after it), and "
        f"after it the clients' largest α_b is {r1[EQ5]:.2f} (mean over clients and seeds; uniform: {1 / P.pair_branches:.2f}; a description of the runs, not a claim). "
        + (
            f"That is above {P.concentrated_alpha:g}: with the chosen step on α (η_α = {mb.options['alpha_lr']:g}"
            f"{', with momentum' if mb.options['alpha_momentum'] != 0 else ', no momentum'}) most of α's weight "
            "already sits on one branch after round 1, before the two "
            "aggregations can differ, and the softmax then all but freezes it (see *Keeping α on the simplex*), which "
            "leaves our runs little room to show a difference in speed."
            if r1[EQ5] > P.concentrated_alpha
            else f"That is at most {P.concentrated_alpha:g}: α is still spread after round 1, so the two aggregations "
            "have rounds in which to differ."
        )
    )
    return Fig3Claims(fig3, main_scores, last, round1)


@dataclasses.dataclass(frozen=True)
class Table1:
    """Table I, ours beside the paper's (``table``), the pairs' accuracy curves of its columns (Figure 4's
    ``curves`` and ``fig``), and the paper's numbers by the two readings of its header: the text's
    (``paper``) and the printed order (``printed``)."""

    table: pd.DataFrame
    curves: pd.DataFrame
    fig: object
    paper: pd.Series
    printed: pd.Series

    def paper_diff(self, a: str, b: str) -> PaperMargin:
        """The paper's difference a − b by both readings of its header, with its numbers."""
        text = f"text's reading {paper_diff(self.paper, a, b)}; printed order {paper_diff(self.printed, a, b)}"
        readings = {"text's reading": self.paper, "printed order": self.printed}
        pairs = {k: (t[a], t[b]) for k, t in readings.items() if a in t and b in t}
        return PaperMargin(text, datasets=list(pairs), values=list(pairs.values()))


def table1_and_fig4(pairs, paper: pd.DataFrame) -> Table1:
    """Table I (ours from ``pairs`` beside the paper's two readings of its header, from ``paper``) and
    Figure 4's accuracy curves."""
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
    return Table1(table1, curves, fig, t1_paper, t1_printed)


class PairClaims(NamedTuple):
    """Table I's and Figure 4's claims (``rows``), the kit's saturation flag of the pairs and the sentence on
    the words the pilot seeds alone give."""

    rows: list[dict]
    saturated: str
    pilot_words: str


def table1_claims(P: Params, pairs, *, plan: pd.DataFrame, t1: Table1, alt: str) -> PairClaims:
    """Table I's claims (eq. 5 against eq. 6 and the baselines) and Figure 4's, on the pairs' sweep ``pairs``
    and its seed plan ``plan``, and their bullets."""
    saturated = saturation(pairs, PAIR_MAIN)  # the kit's flag: a labelled setting, no headline

    def pair_claim(text, a, b, name):
        return claim(text, pairs, a, b, paper=t1.paper_diff(a, b), resolution=RESOLUTION, saturated=saturated,
                     plan=plan, plan_name=name)  # fmt: skip

    auc = t1.curves.groupby(["arm", "seed"])["mean_acc"].mean()  # mean accuracy over rounds: higher = faster
    rows = [
        pair_claim("Table I: pFedMB beats FedAvg", EQ5, "FedAvg", "pFedMB − FedAvg"),
        pair_claim("Table I: pFedMB beats Local", EQ5, "Local", "pFedMB − Local"),
        pair_claim("Table I: α-weighted averaging (eq. 5) improves accuracy over eq. 6", EQ5, EQ6, "eq. 5 − eq. 6"),
        derived_claim(
            "Figure 4: α-weighted averaging converges faster than eq. 6 (mean accuracy over the rounds)",
            auc[EQ5].reindex(pairs.seeds) - auc[EQ6].reindex(pairs.seeds),
            pairs,
            [EQ5, EQ6],
            paper='"clearly faster"',
            saturated=saturated,
            plan=plan,
            plan_name="eq. 5 − eq. 6, over the rounds",
        ),
        derived_claim(
            "Figure 4: pFedMB converges faster than FedAvg (mean accuracy over the rounds)",
            auc[EQ5].reindex(pairs.seeds) - auc["FedAvg"].reindex(pairs.seeds),
            pairs,
            [EQ5, "FedAvg"],
            paper='"clearly faster"',
            saturated=saturated,
            plan=plan,
            plan_name="pFedMB − FedAvg, over the rounds",
        ),
    ]
    plan_names = ["pFedMB − FedAvg", "pFedMB − Local", "eq. 5 − eq. 6", "eq. 5 − eq. 6, over the rounds",
                  "pFedMB − FedAvg, over the rounds"]  # fmt: skip
    pilot_diffs = pair_diffs(pairs, eq5=EQ5, eq6=EQ6, alt=alt)

    def pilot_word(name):
        # the word a pairs claim gets on the pilot seeds alone (what the plan table reports)
        return verdict(list(pilot_diffs[name].reindex(P.seeds).dropna()), resolution=RESOLUTION).word

    changed = [(r, pilot_word(n)) for r, n in zip(rows, plan_names) if pilot_word(n) != r["verdict"]]
    display(Markdown(claim_bullets(rows)))
    pilot_words = f"Every claim here is judged on every seed its arms ran ({seeds_text(len(pairs.seeds))}). " + (
        "On the pilot seeds alone "
        + "; ".join(f"*{r['claim']}* read *{w}*, where all the seeds give *{r['verdict']}*" for r, w in changed)
        + "."
        if changed
        else "The pilot seeds alone give each of them the same word."
    )
    return PairClaims(rows, saturated, pilot_words)


class ScaleDiagnostic(NamedTuple):
    """The initial-scale diagnostic: its claims row, the scale chosen in words, its table (eq. 5 and eq. 6 at
    both scales) and the verdicts on eq. 5 − eq. 6 at the chosen and at the other scale."""

    rows: list[dict]
    chosen: str
    table: pd.DataFrame
    v_main: object
    v_alt: object


def scale_diagnostic(pairs, plan: pd.DataFrame, *, arms: PairArms, t1: Table1, saturated: str) -> ScaleDiagnostic:
    """The initial-scale diagnostic: eq. 5 − eq. 6 with the branches as drawn and × √B (``arms``: the pairs'
    arms, ``plan``: their seed plan, ``saturated``: the pairs' saturation flag)."""
    chosen = f"branches {'× √B' if arms.scaled else 'as drawn'}"
    alt = arms.alt
    table = pd.DataFrame(
        {
            f"{chosen} (chosen, as above)": {k: fmt_interval(pairs.values(k)) for k in (EQ5, EQ6)},
            alt.lstrip(", "): {k: fmt_interval(pairs.values(k + alt)) for k in (EQ5, EQ6)},
        }
    )
    row = claim(
        f"Table I with the {alt.lstrip(', ')} (our diagnostic): eq. 5 improves accuracy over eq. 6",
        pairs,
        EQ5 + alt,
        EQ6 + alt,
        paper=t1.paper_diff(EQ5, EQ6),
        resolution=RESOLUTION,
        saturated=saturated,
        plan=plan,
        plan_name="eq. 5 − eq. 6" + alt,
    )
    return ScaleDiagnostic([row], chosen, table, pairs.compare(EQ5, EQ6), pairs.compare(EQ5 + alt, EQ6 + alt))


# ----------------------------------------------------------------------------- Table II: settings, pilots, arms, plan


@dataclasses.dataclass(frozen=True)
class PaperTable2:
    """The paper's Table II: ``wide`` (dataset, setting) × method, ``gap`` (pFedMB − the best other method per
    setting) and, per setting of ours (``P.settings``), the paper's column it stands for (``columns``)."""

    wide: pd.DataFrame
    gap: pd.Series
    columns: dict[str, pd.Series]

    def col(self, name: str) -> pd.Series:
        """The paper's column (method -> accuracy) that our setting ``name`` stands for."""
        return self.columns[name]

    def of(self, name: str, row: str) -> float:
        """The paper's accuracy of Table II's ``row`` (a method's display name) in our setting ``name``; NaN
        where the paper has none."""
        return self.col(name).get(PAPER_NAME.get(row, row), np.nan)


def paper_table2(P: Params, paper: pd.DataFrame) -> PaperTable2:
    """The paper's Table II (from ``paper``, the chapter's published numbers) by our settings, and pFedMB's gap
    to the best other method in each of the paper's settings."""
    t2_paper = paper[paper.table == "Table II"]
    wide = t2_paper.pivot_table(index=["dataset", "setting"], columns="method", values="value")
    gap = (wide["pFedMB"] - wide.drop(columns="pFedMB").max(axis=1)).round(2)  # pFedMB − best other, per setting
    columns = {
        name: t2_paper[(t2_paper.dataset == s["paper"][0]) & (t2_paper.setting == s["paper"][1])].set_index("method")[
            "value"
        ]
        for name, s in P.settings.items()
    }
    return PaperTable2(wide, gap, columns)


@dataclasses.dataclass
class Table2Arms:
    """Table II's and Figure 5's arms (``arms``: name -> config), FedAMP's among them (``amp_arms``, run with
    their every-round probe), per arm the learning-rate pilot its config comes from (``fallback``), every
    pilot's edges (``edges``) and the choices at an edge the runs use (``edge_used``: (pilot, grid, value)).
    :meth:`sweep` runs the arms with the kit's divergence fallback; the notes it returns on a fallback are
    collected in ``notes`` (arm -> note)."""

    arms: dict[str, RunConfig]
    amp_arms: list[str]
    fallback: dict
    edges: pd.DataFrame
    edge_used: list[tuple]
    store: object
    notes: dict = dataclasses.field(default_factory=dict)

    @property
    def edge_used_text(self) -> str:
        """The choices at an edge the runs use, in words."""
        return "; ".join(f"{v} ({g.removesuffix(', σ')}) in {p}" for p, g, v in self.edge_used)

    def sweep(self, seeds):
        """Every arm on ``seeds`` (one list, or one per arm), FedAMP's with its every-round probe; an arm whose
        run diverges on some seed runs on every seed at its pilot's best smaller learning rate (kit rule)."""
        per = seeds if isinstance(seeds, dict) else dict.fromkeys(self.arms, seeds)
        out = None
        for group, probe in (
            ([a for a in self.arms if a not in self.amp_arms], table2_probe),
            (self.amp_arms, amp_probe),
        ):
            res, notes = sweep_stable({a: self.arms[a] for a in group}, {a: per[a] for a in group}, self.store,
                                      {a: self.fallback[a] for a in group}, probe=probe, progress=False)  # fmt: skip
            self.notes.update(notes)
            out = res if out is None else out | res
        return out


def table2_arms(P: Params, pilots: dict[str, Pilot], *, pair_pilot: Pilot, store) -> Table2Arms:
    """Table II's and Figure 5's arms from each setting's pilot (``pilots``: setting -> :class:`Pilot`), and
    the pilots' edges (the pairs' pilot, ``pair_pilot``, first); their sweeps run in ``store``."""
    every = {"pairs": pair_pilot, **pilots}
    edges = pd.concat({n: p.edges for n, p in every.items()}, names=["pilot", "grid"])
    for col in ("chosen first", "chosen"):
        edges[col] = edges[col].map(value_words)
    mb_pick = {n: p.chosen[PFEDMB] for n, p in every.items()}  # each pilot's pFedMB
    edge_used = [  # (pilot, grid, value): a choice the runs use that still sits at its grid's edge
        (p, g, edges.loc[(p, g), "chosen"])
        for p, g in edges.index
        if edges.loc[(p, g), "at its edge"] and grid_used(g, mb_pick[p])
    ]

    # Figure 5's runs (the longest, started first) take its own pilot's choices; Local (the cheapest method) shows
    # whether a client alone already does well in P.fig5_setting
    fig5 = P.fig5_setting
    arms = setting_arms(fig5, P.settings[fig5]["cfg"], pilots[fig5].chosen, P.fig5_branches, ["fedavg", "local"],
                        P.fig5_visits, amp_evals=P.amp_evals, ifca_evals=P.ifca_evals)  # fmt: skip
    for name in P.table2_settings:
        arms |= setting_arms(name, P.settings[name]["cfg"], pilots[name].chosen, P.choices_of(name), BASELINES,
                             P.visits_of(name), amp_evals=P.amp_evals, ifca_evals=P.ifca_evals)  # fmt: skip

    def fallback_of(a):
        # the learning-rate pilot an arm's config comes from (pFedMB at any B: its own pilot's, at B = P.pilot_branches)
        name, label = a.split(" · ")
        return pilots[name].fallback[PFEDMB if label.startswith(PFEDMB) else label]

    return Table2Arms(arms, [a for a in arms if a.endswith(" · FedAMP")], {a: fallback_of(a) for a in arms}, edges,
                      edge_used, store)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Table2Plan:
    """What validation chose on the pilot seeds: pFedMB's B per setting (``chosen_b``; pFedMB's untuned row
    runs at ``pilot_branches``), the strongest other method (``rival``) and of FedAvg and FedProx
    (``fed_rival``) per setting, Figure 5's best interior B (``fig5_mid``, an arm); Table II's and Figure
    5's claims as arm pairs (``claims``: name -> (list of (sign, a, b), margin or None)), their seed plan
    (``plan``) and the seeds each arm runs (``seeds``)."""

    chosen_b: dict[str, int]
    pilot_branches: int
    rival: dict[str, str]
    fed_rival: dict[str, str]
    fig5_mid: str
    claims: dict
    plan: pd.DataFrame
    seeds: dict

    def arm_of(self, name: str, row: str) -> str:
        """The arm of Table II's ``row`` in setting ``name``: pFedMB at its chosen B, pFedMB's untuned row at
        ``pilot_branches``, any other method by its name."""
        if not row.startswith(PFEDMB):
            return arm(name, row)
        return arm(name, mb_label(self.chosen_b[name] if row == PFEDMB else self.pilot_branches))


def table2_plan(P: Params, pilot_runs, *, arms: Table2Arms, paper: PaperTable2) -> Table2Plan:
    """What validation chose on the pilot seeds (``pilot_runs``: every arm of ``arms`` on them): B, the
    rivals; Table II's claims as arm pairs, their seed plan and the seeds each arm runs."""
    chosen_b = {
        name: int(pilot_runs.select([arm(name, mb_label(b)) for b in P.choices_of(name)]).rsplit("=", 1)[1])
        for name in dict.fromkeys(P.table2_settings + [P.fig5_setting])
    }
    rival = {n: pilot_runs.select([arm(n, m) for m in OTHERS]).split(" · ")[1] for n in P.table2_settings}
    fed_rival = {
        n: pilot_runs.select([arm(n, m) for m in ("FedAvg", "FedProx")]).split(" · ")[1] for n in P.table2_settings
    }
    mid = pilot_runs.select([arm(P.fig5_setting, mb_label(b)) for b in P.fig5_branches[1:-1]])  # the best interior B
    chosen = Table2Plan(chosen_b, P.pilot_branches, rival, fed_rival, mid, {}, pd.DataFrame(), {})

    # the accuracy claims of Table II and Figure 5: {name: (a list of (a, b) arm pairs whose paired differences
    # add up to the claim's, with their signs), margin or None}; a "comparable"/"within" claim has a margin
    claims = {}
    for n in P.table2_settings:
        col = paper.col(n)
        comparable = col["pFedMB"] < col.drop("pFedMB").max()
        claims[f"{n}: pFedMB − {rival[n]}"] = (
            [(1, chosen.arm_of(n, PFEDMB), arm(n, rival[n]))],
            P.margin if comparable else None,
        )
    for n in P.headline:  # the referee's first test: does pFedMB beat a client alone (the paper's margin)?
        claims[f"{n}: pFedMB − Local (beats)"] = ([(1, chosen.arm_of(n, PFEDMB), arm(n, "Local"))], None)
    for n in [n for n in P.table2_settings if n.startswith("random 2 ")]:
        claims[f"{n}: {fed_rival[n]} − pFedMB"] = ([(1, arm(n, fed_rival[n]), chosen.arm_of(n, PFEDMB))], P.margin)
    for k, _ in P.client_setups:
        simple = f"random 2 classes / {k} clients"
        for hard in (f"Dirichlet 0.4 / {k} clients", f"random {P.k_classes} classes / {k} clients"):
            if simple in P.table2_settings and hard in P.table2_settings:
                for m in ("FedAMP", "FedFomo"):
                    claims[f"{m} behind: {hard} − {simple}"] = ([(1, chosen.arm_of(hard, PFEDMB), arm(hard, m)),
                                                                 (-1, chosen.arm_of(simple, PFEDMB), arm(simple, m))], None)  # fmt: skip
    for b in (P.fig5_branches[0], P.fig5_branches[-1]):
        claims[f"Figure 5: {mid.split(' · ')[1]} − B={b}"] = ([(1, mid, arm(P.fig5_setting, mb_label(b)))], None)

    plan = seed_plan(t2_diffs(pilot_runs, claims), cap=SEED_CAP, resolution=RESOLUTION,
                     margins={k: m for k, (_, m) in claims.items() if m is not None})  # fmt: skip
    claim_arms = {k: [a for _, x, y in terms for a in (x, y)] for k, (terms, _) in claims.items()}
    lead = [f"{n}: pFedMB − {rival[n]}" for n in P.headline] + [f"{n}: pFedMB − Local (beats)" for n in P.headline]
    seeds = arm_seeds(
        plan, claim_arms, P.seeds, arms=arms.arms, cap=SEED_CAP, least=dict.fromkeys(lead, HEADLINE_SEEDS)
    )
    seeds = {a: s[: P.table2_run] for a, s in seeds.items()}  # the headline: five seeds at least, within the run cap
    return dataclasses.replace(chosen, claims=claims, plan=plan, seeds=seeds)


class Eq6Control(NamedTuple):
    """The eq. 6 control where the headline is judged: per headline setting the mechanism check's text and
    the control's arm name (``arm_of``), and the control's arms."""

    text: dict[str, str]
    arm_of: dict[str, str]
    arms: dict[str, RunConfig]


def eq6_control_arms(P: Params, plan: Table2Plan, *, arms: Table2Arms) -> Eq6Control:
    """The eq. 6 control where the headline is judged: pFedMB at its chosen B and rates (``plan``, ``arms``)
    with plain averaging."""
    of = {n: f"{n} · {PFEDMB} (eq. 6)" for n in P.headline}
    text = {
        n: f"{n}: mechanism (our check): α-weighted averaging (eq. 5) beats plain averaging (eq. 6)" for n in P.headline
    }
    mb = {n: arms.arms[plan.arm_of(n, PFEDMB)] for n in P.headline}
    control = {
        of[n]: dataclasses.replace(mb[n], options={**mb[n].options, "alpha_weighted": False}) for n in P.headline
    }
    return Eq6Control(text, of, control)


def t2_cap_text(table2_run: int) -> str:
    """The sentence on the seed cap of Table II's and Figure 5's claims (``table2_run``: the most seeds their
    arms run)."""
    return (
        f"the plan asks for at most {SEED_CAP} seeds a claim (a claim that needs more reads underpowered); the pairs run "
        f"what it asks, Table II's and Figure 5's arms at most {table2_run}"
        + (f", so a claim there planned for {table2_run + 1} to {SEED_CAP} seeds runs {table2_run} and, if still "
           "undecided, reads inconclusive, its notes giving the seeds planned and run" if table2_run < SEED_CAP else "")
    )  # fmt: skip


# ----------------------------------------------------------------------------- Table II: results and claims


class Table2Results(NamedTuple):
    """Table II (``table``: ours beside the paper per setting), its rows (``row_names``), the runs' finals,
    the kit's saturation flag per setting ("" or the reason) with the table that shows it, and per setting
    the rows still improving at the end."""

    table: pd.DataFrame
    row_names: list[str]
    finals: pd.DataFrame
    sat_flag: dict[str, str]
    sat_table: pd.DataFrame
    improving: dict[str, list[str]]


def table2_results(P: Params, runs, *, plan: Table2Plan, paper: PaperTable2) -> Table2Results:
    """Table II from the runs of Table II and Figure 5 (``runs``): every setting's accuracy table (ours beside
    the paper), the final accuracies, the diverged and still-improving arms, the saturation check."""
    untuned = f"{PFEDMB} (B = {P.pilot_branches})"  # Table II's row at the untuned B
    row_names = [display_name(m) for m in reversed(BASELINES)] + [PFEDMB, untuned]

    finals = runs.finals()
    table2 = pd.DataFrame(index=row_names)
    for name in P.table2_settings:
        tag = "" if name in P.headline else " (no headline)"
        table2[f"{name}{tag} · ours"] = [
            cell_text(runs.values(plan.arm_of(name, r)), P.seeds, runs.values(plan.arm_of(name, r), "worst10_acc"))
            for r in row_names
        ]
        table2[f"{name}{tag} · paper {P.settings[name]['paper'][0]}"] = [
            paper.of(name, r) if r != untuned else np.nan for r in row_names
        ]
    sat_settings = list(dict.fromkeys(P.table2_settings + [P.fig5_setting]))  # Figure 5's setting too

    def rows_run(n):
        # the rows of Table II that ran in setting n (Figure 5's setting alone: pFedMB, FedAvg, Local)
        return [r for r in row_names if plan.arm_of(n, r) in runs.arms]

    sat_flag = {n: saturation(runs, [plan.arm_of(n, r) for r in rows_run(n)]) for n in sat_settings}
    sat_table = pd.DataFrame(
        {
            "Local, test (%)": [runs.values(arm(n, "Local")).mean() for n in sat_settings],
            "Local, validation (%)": [runs.values(arm(n, "Local"), "val_mean_acc").mean() for n in sat_settings],
            "best row, test (%)": [
                max(runs.values(plan.arm_of(n, r)).mean() for r in rows_run(n)) for n in sat_settings
            ],
            "rows run": ["Table II's" if n in P.table2_settings else ", ".join(rows_run(n)) for n in sat_settings],
            "used for": [
                " and ".join(
                    u
                    for u, inside in (("Table II", n in P.table2_settings), ("Figure 5", n == P.fig5_setting))
                    if inside
                )
                for n in sat_settings
            ],
            "headline (fixed in advance, by name)": ["yes" if n in P.headline else "no" for n in sat_settings],
            "the kit's saturation flag": [sat_flag[n].removeprefix("saturated: ") or "—" for n in sat_settings],
        },
        index=pd.Index(sat_settings, name="setting"),
    )
    improving = {}  # setting -> the rows still improving at the end there
    for a in runs.arms:
        if runs.improving(a):
            improving.setdefault(a.split(" · ")[0], []).append(a.split(" · ")[1])
    return Table2Results(table2, row_names, finals, sat_flag, sat_table, improving)


AMP_REGIME_WORDS = {"local": "close to Local training", "average": "close to a plain average of the others"}


@dataclasses.dataclass(frozen=True)
class Table2Claims:
    """Table II's claims and our mechanism checks: ``rows`` (the claims table's, in order: the α checks, the
    eq. 5 checks, then Table II's claims), the checks per headline setting (``mech_alpha``, ``mech_eq5``),
    FedAMP's state at the last round per setting (``amp_end``) with its regime ("local", "average" or "",
    by the thresholds ``amp_kw``), and the worst gaps to the best method: ours per method (``gap_means``,
    None with one headline setting), the paper's over our headline settings (``paper_worst``, its most
    balanced other method ``paper_other``) and over all its settings (``all_worst``, ``all_other``, from
    ``t2_all``)."""

    rows: list[dict]
    mech_alpha: dict
    mech_eq5: dict
    amp_end: pd.DataFrame
    amp_regime: dict
    amp_kw: dict
    gap_means: pd.Series | None
    paper_worst: pd.Series
    paper_other: str
    all_worst: pd.Series
    all_other: str
    t2_all: pd.DataFrame


def table2_claims(
    P: Params,
    runs,
    *,
    plan: Table2Plan,
    paper: PaperTable2,
    results: Table2Results,
    arms: Table2Arms,
    pilots: dict[str, Pilot],
    eq6: Eq6Control,
    eq6_runs,
    eq5_plan: pd.DataFrame,
) -> Table2Claims:
    """Table II's claims (pFedMB best or comparable, FedAvg/FedProx comparable at random 2 classes, FedAMP/FedFomo
    behind) on ``runs`` and the mechanism checks (α follows the data, eq. 5 against eq. 6: ``eq6_runs`` and its
    seed plan ``eq5_plan``), and their bullets."""
    sat_flag, finals = results.sat_flag, results.finals

    def equivalence(text, name, a, b, paper, key, **row):
        # a "within ±P.margin" claim, judged only where the kit does not flag the setting saturated: there every
        # method that does about as well as the best lies within the margin of every other, whatever the method
        if sat_flag[name]:
            return claim_row(text, verdict([]), paper=paper, ours=f"not judged: {sat_flag[name]}")
        return claim(text, runs, a, b, paper=paper, margin=P.margin, plan=plan.plan, plan_name=key, **row)

    def plan_of(name):
        return dict(plan=plan.plan, plan_name=name)

    with_eq6 = runs | eq6_runs  # pFedMB beside its eq. 6 control
    mech_eq5 = {
        n: mechanism(
            eq6.text[n],
            verdict(
                list(with_eq6.paired(plan.arm_of(n, PFEDMB), eq6.arm_of[n])),
                resolution=RESOLUTION,
                budget=with_eq6.budget(plan.arm_of(n, PFEDMB), eq6.arm_of[n]),
            ),
            paper="α-weighted averaging is effective (§V-B, on the pairs)",
            control="the same pFedMB with plain averaging (eq. 6)",
            plan=eq5_plan,
        )
        for n in P.headline
    }
    mech_alpha = {
        n: mechanism(
            f"{n}: mechanism (our check): clients with similar label mixes get similar α (rank correlation over "
            "client pairs)",
            verdict(
                list(alpha_follows_data(runs, plan.arm_of(n, PFEDMB), arms.arms[plan.arm_of(n, PFEDMB)])),
                unit="ρ",
                resolution=P.rho_resolution,
                budget=runs.budget(plan.arm_of(n, PFEDMB)),
            ),
            paper="what Figure 3 shows in the pairs",
            control="no relation (ρ = 0)",
            digits=2,
        )
        for n in P.headline
    }

    # FedAMP's self-weights at the last round (its probe), here for the notes of the claims that compare with FedAMP;
    # the section "Did FedAMP or IFCA degenerate?" shows them
    amp = pd.DataFrame(
        [
            {"setting": n, "seed": s, "round": r, **p}
            for n in P.table2_settings
            for s in P.seeds
            for r, p in runs.probes(arm(n, "FedAMP"), s).items()
            if isinstance(p, dict)
        ]
    )
    amp_last = amp[amp["round"] == amp.groupby("setting")["round"].transform("max")].groupby("setting")
    amp_end = amp_last[["self", "peak", "d2"]].mean()
    amp_end["self"] = amp_end["self"].clip(lower=0)  # 1 − Σ ξ_ij can round to −1e-17
    amp_end.insert(0, "σ (chosen)", [pilots[n].chosen["FedAMP"].options["sigma"] for n in amp_end.index])
    amp_kw = dict(self_local=P.amp_self_local, self_average=P.amp_self_average, peak_flat=P.amp_peak_flat)
    regime = {n: amp_regime(amp_end.loc[n], **amp_kw) for n in amp_end.index}  # "local", "average" or ""

    def amp_note(settings):
        # the settings among ``settings`` where FedAMP's attention is inert, for a claim's notes
        inert = [f"{AMP_REGIME_WORDS[regime[n]]} in {n} (σ = {amp_end.loc[n, 'σ (chosen)']:g})"
                 for n in settings if regime.get(n)]  # fmt: skip
        return ("FedAMP's attention is inert here: " + "; ".join(inert)) if inert else ""

    t2_rows = []
    for name in P.table2_settings:
        where = name if name in P.headline else f"{name} (not a headline setting)"
        rival, col = plan.rival[name], paper.col(name)
        p_rival = col.drop("pFedMB").idxmax()
        p_diff = PaperMargin(f"{col['pFedMB'] - col[p_rival]:+.2f} vs {REGISTRY_NAME.get(p_rival, p_rival)}",
                             values=[(col["pFedMB"], col[p_rival])], vs=REGISTRY_NAME.get(p_rival, p_rival))  # fmt: skip
        key = f"{name}: pFedMB − {rival}"
        if plan.claims[key][1] is None:
            t2_rows.append(claim(f"Table II, {where}: pFedMB beats the strongest other method ({rival}, on validation)",
                                 runs, plan.arm_of(name, PFEDMB), arm(name, rival), paper=p_diff, resolution=RESOLUTION,
                                 saturated=sat_flag[name], headline=name in P.headline, mechanism=mech_alpha.get(name),
                                 **plan_of(key)))  # fmt: skip
        else:
            t2_rows.append(equivalence(f"Table II, {where}: pFedMB is comparable (±{P.margin:g}) to the strongest other "
                                       f"method ({rival}, on validation)", name, plan.arm_of(name, PFEDMB), arm(name, rival),
                                       paper=p_diff, key=key, headline=name in P.headline, mechanism=mech_alpha.get(name)))  # fmt: skip
        if name in P.headline:  # against a client alone, whatever validation's rival (the paper's margin over Local)
            t2_rows.append(claim(f"Table II, {name}: pFedMB beats Local", runs, plan.arm_of(name, PFEDMB),
                                 arm(name, "Local"), resolution=RESOLUTION, saturated=sat_flag[name],
                                 paper=PaperMargin(f"{col['pFedMB'] - col['Local']:+.2f} vs Local",
                                                   values=[(col["pFedMB"], col["Local"])], vs="Local"),
                                 **plan_of(f"{name}: pFedMB − Local (beats)")))  # fmt: skip
    paper_means = pd.DataFrame({n: paper.col(n) for n in P.headline}).rename(index=REGISTRY_NAME)
    paper_worst = (paper_means.max() - paper_means).max(axis=1)
    paper_other = paper_worst.drop("pFedMB").idxmin()  # the paper's most balanced other method over these settings
    t2_all = paper.wide.rename(columns=REGISTRY_NAME)  # the paper's six settings
    all_worst = t2_all.rsub(t2_all.max(axis=1), axis=0).max()
    all_other = all_worst.drop("pFedMB").idxmin()
    if len(P.headline) > 1:
        # the choice: on the pilot seeds' validation
        val_worst = (
            worst_gap(finals, "val_mean_acc", P.headline, others=OTHERS, chosen_b=plan.chosen_b).loc[P.seeds].mean()
        )
        balanced_rival = val_worst.drop(PFEDMB).idxmin()
        test_worst = worst_gap(finals, "mean_acc", P.headline, others=OTHERS, chosen_b=plan.chosen_b)
        t2_rows.append(
            derived_claim(
                f"Table II: pFedMB is the most balanced method: smaller worst-case gap to the best over the headline settings than "
                f"{balanced_rival} (the most balanced other method on validation)",
                test_worst[balanced_rival] - test_worst[PFEDMB],
                runs,
                [arm(n, balanced_rival) for n in P.headline] + [plan.arm_of(n, PFEDMB) for n in P.headline],
                paper=PaperMargin(
                    f"{paper_worst[paper_other] - paper_worst['pFedMB']:+.2f} (worst gaps over these "
                    f"settings: pFedMB {paper_worst['pFedMB']:.2f}, {paper_other} "
                    f"{paper_worst[paper_other]:.2f})",
                    [paper_worst[paper_other] - paper_worst["pFedMB"]],
                ),
                note=amp_note(P.headline) if balanced_rival == "FedAMP" else "",
            )
        )
    for name in [n for n in P.table2_settings if n.startswith("random 2 ")]:
        fed_rival = plan.fed_rival[name]
        t2_rows.append(
            equivalence(
                f"Table II, {name} (not a headline setting): {fed_rival} with fine-tuning is within ±{P.margin:g} point of pFedMB",
                name,
                arm(name, fed_rival),
                plan.arm_of(name, PFEDMB),
                paper=PaperMargin(
                    f"{paper.of(name, fed_rival) - paper.of(name, PFEDMB):+.2f}",
                    values=[(paper.of(name, fed_rival), paper.of(name, PFEDMB))],
                ),
                key=f"{name}: {fed_rival} − pFedMB",
            )
        )
    diffs = t2_diffs(runs, plan.claims)
    for key in [k for k in plan.claims if " behind: " in k]:
        m, (hard, simple) = key.split(" behind: ")[0], key.split(" behind: ")[1].split(" − ")
        p = (paper.of(hard, PFEDMB) - paper.of(hard, m)) - (paper.of(simple, PFEDMB) - paper.of(simple, m))
        t2_rows.append(
            derived_claim(
                f"Table II: {m} falls further behind pFedMB in {hard} than in {simple}",
                diffs[key],
                runs,
                [a for _, x, y in plan.claims[key][0] for a in (x, y)],
                paper=PaperMargin(f"{p:+.2f}", [p]),
                note=amp_note([hard, simple]) if m == "FedAMP" else "",
                **plan_of(key),
            )
        )
    gap_means = (
        worst_gap(finals, "mean_acc", P.headline, others=OTHERS, chosen_b=plan.chosen_b).mean().sort_values()
        if len(P.headline) > 1
        else None
    )
    display(Markdown(mechanism_line(mech_alpha, mech_eq5) + "\n\n" + claim_bullets(t2_rows)))
    return Table2Claims(
        rows=list(mech_alpha.values()) + list(mech_eq5.values()) + t2_rows,
        mech_alpha=mech_alpha,
        mech_eq5=mech_eq5,
        amp_end=amp_end,
        amp_regime=regime,
        amp_kw=amp_kw,
        gap_means=gap_means,
        paper_worst=paper_worst,
        paper_other=paper_other,
        all_worst=all_worst,
        all_other=all_other,
        t2_all=t2_all,
    )


# ----------------------------------------------------------------------------- Table III and Figure 5


class Fig5(NamedTuple):
    """Figure 5 (``fig``) and what it is drawn from: pFedMB's finals at every B of it (``f5``), FedAvg's and
    Local's mean test accuracy there, the seeds on which a B's run diverged (``lost``: B -> seeds); the
    paper's Table III and ours (``table3``)."""

    fig: object
    f5: pd.DataFrame
    fedavg: float
    local: float
    lost: dict[int, list]
    t3_paper: pd.DataFrame
    table3: pd.DataFrame


def draw_fig5(P: Params, runs, *, finals: pd.DataFrame, chosen_b: dict[str, int], paper: pd.DataFrame) -> Fig5:
    """Figure 5: accuracy against the number of branches B in its setting (from ``runs`` and their ``finals``),
    and Table III (the B validation picks per setting, ``chosen_b``, beside the paper's from ``paper``)."""
    f5 = finals[finals.arm.isin([arm(P.fig5_setting, mb_label(b)) for b in P.fig5_branches])]
    fig5 = f5.assign(B=f5.arm.str.rsplit("=", n=1).str[1].astype(int)).melt(
        id_vars=["B", "seed"], value_vars=["mean_acc", "val_mean_acc"], var_name="split", value_name="mean accuracy (%)"
    )
    fig5["split"] = fig5["split"].map({"mean_acc": "test", "val_mean_acc": "validation"})
    fedavg5 = runs.values(arm(P.fig5_setting, "FedAvg")).mean()
    local5 = runs.values(arm(P.fig5_setting, "Local")).mean()
    lost = {  # B -> the seeds on which its run diverged (a verdict leaves them out)
        b: list(d[d].index)
        for b in P.fig5_branches
        for d in [runs.values(arm(P.fig5_setting, mb_label(b)), "diverged").astype(bool)]
        if d.any()
    }
    fig, ax = plt.subplots(figsize=(7, 3.3))
    sns.lineplot(data=fig5[~fig5.B.isin(list(lost))], x="B", y="mean accuracy (%)", hue="split", marker="o",
                 errorbar=("pi", 100), ax=ax)  # fmt: skip
    for b, seeds in lost.items():
        kept = fig5[(fig5.B == b) & (fig5.split == "test") & fig5["mean accuracy (%)"].notna()]
        ax.scatter(kept.B, kept["mean accuracy (%)"], marker="x", color="red", zorder=3,
                   label=f"B = {b}, test: diverged on {seeds_text(seeds)}; {seeds_text(len(kept))} left")  # fmt: skip
    ax.axhline(fedavg5, color="grey", ls="--", lw=1, label="FedAvg (test)")
    ax.axhline(local5, color="grey", ls=":", lw=1, label="Local (test)")
    ax.set(xticks=P.fig5_branches)
    ax.legend()
    plt.show()
    t3_paper = paper[paper.table == "Table III"]
    table3 = pd.DataFrame(
        [
            {
                "setting (ours, FMNIST)": name,
                "B chosen by validation": b,
                "choices": ", ".join(map(str, P.choices_of(name))),
                "paper's tuned B": int(
                    t3_paper[
                        (t3_paper.dataset == P.settings[name]["paper"][0])
                        & (t3_paper.setting == P.settings[name]["paper"][1])
                    ]["value"].iloc[0]
                ),
                "paper's setting": " / ".join(P.settings[name]["paper"]),
            }
            for name, b in chosen_b.items()
        ]
    ).set_index("setting (ours, FMNIST)")
    return Fig5(fig, f5, fedavg5, local5, lost, t3_paper, table3)


PAPER_FIG5 = ("CIFAR10", "random 2 classes / 50 clients")  # the paper's Figure 5 setting


class Fig5Claims(NamedTuple):
    """Figure 5's and Table III's claims (``rows``), the ends of the grid of B (``lo``, ``hi``), the best
    interior B (``mid``) and the B at which the paper's Figure 5 peaks (``paper_peak``)."""

    rows: list[dict]
    lo: int
    hi: int
    mid: int
    paper_peak: int


def fig5_claims(
    P: Params, runs, *, fig5: Fig5, plan: Table2Plan, sat_flag: dict, notes: dict, n_classes: int
) -> Fig5Claims:
    """Figure 5's and Table III's claims (``notes``: the fallback notes of the arms, ``n_classes``: the
    dataset's classes) and their bullets."""
    lo_b, hi_b = P.fig5_branches[0], P.fig5_branches[-1]
    # Figure 5 peaks at the B that Table III lists for its setting
    t3 = fig5.t3_paper
    paper_peak = int(t3[(t3.dataset == PAPER_FIG5[0]) & (t3.setting == PAPER_FIG5[1])]["value"].iloc[0])
    mid = plan.fig5_mid  # the best interior B on validation (the pilot seeds)

    mid_b = int(mid.rsplit("=", 1)[1])
    texts = [  # the interior B against each end of the grid
        (lo_b, f"Figure 5: accuracy peaks at an intermediate B: B = {mid_b} (the best interior B on validation) beats "
        f"B = {lo_b}"),
        (hi_b, f"Figure 5{' and Table III (at most 10 branches are needed)' if hi_b > 10 >= mid_b else ''}: "
        f"B = {mid_b} beats B = {hi_b}"),
    ]  # fmt: skip
    rows = [
        claim(
            text,
            runs,
            mid,
            arm(P.fig5_setting, mb_label(b)),
            paper=f"peak at B = {paper_peak}",
            resolution=RESOLUTION,
            saturated=sat_flag[P.fig5_setting],
            plan=plan.plan,
            plan_name=f"Figure 5: {mid.split(' · ')[1]} − B={b}",
            note=diverged_note(runs, arm(P.fig5_setting, mb_label(b)), notes),
        )
        for b, text in texts
    ]
    # Table III: "many classes need fewer branches" varies the dataset's number of classes: not testable on FMNIST
    rows.append(
        claim_row(
            "Table III: a dataset with many classes (CIFAR-100) needs fewer branches than one with few (CIFAR-10)",
            verdict([]),
            paper="B = 3 (CIFAR-100) vs 6–10 (CIFAR-10)",
            ours=f"not testable: Fashion-MNIST has {n_classes} classes"
            if len(set(P.datasets)) == 1
            else "not judged: Table III lists the B validation chose per setting; no paired rule compares B across datasets",
        )
    )
    display(Markdown(claim_bullets(rows)))
    return Fig5Claims(rows, lo_b, hi_b, mid_b, paper_peak)


# ----------------------------------------------------------------------------- what reproduced


class Reproduced(NamedTuple):
    """The claims table (``claims``, with a column "claim of"), its rows with the paper's lead claims marked
    (``rows``), the paper's claims and our own checks."""

    claims: pd.DataFrame
    rows: list[dict]
    paper_rows: list[dict]
    our_rows: list[dict]


def what_reproduced(P: Params, rows: list[dict]) -> Reproduced:
    """The compact claims table of 'What reproduced' from the chapter's claims ``rows``, the paper's claims
    first, our own checks folded; the findings at the top of the page (glued)."""

    paper_rows = [r for r in rows if not is_our_check(r)]  # the paper's claims
    our_rows = [r for r in rows if is_our_check(r)]  # our checks: the mechanism checks and the diagnostic under Table I

    leads = []  # the paper's lead claims (Table II in its headline settings), whatever our verdict
    for r in [r for r in rows if r["headline"]]:
        where = r["claim"].split(": ")[0].removeprefix("Table II, ")  # "Dirichlet 0.4 / 15 clients"
        checks = [m for m in rows if m["kind"] == "mechanism" and m["claim"].startswith(where)]
        short = {"similar α": "α follows the label mixes", "plain averaging": "eq. 5 beats eq. 6"}
        why = "; ".join(next((v for k, v in short.items() if k in m["claim"]), "our check") + " (" +
                        m["ours (a − b, 95 % CI)"].split(" [")[0] + ")" for m in checks)  # fmt: skip
        what = (
            "beats every other method" if "beats" in r["claim"].split(": ", 1)[1] else "is comparable (±1) to the best"
        )
        leads.append((r["claim"].split(" (")[0], f"Table II, {where.split(' / ')[0]}: pFedMB {what}",
                      f"FMNIST {where.replace(' / ', ', ')}, E = {P.epochs} (paper: {P.paper_epochs})", why))  # fmt: skip
    rows = mark_leads(list(rows), leads)  # the caller's list unmarked
    fewer = f"a {P.data_fraction:g} share of the training images, " if P.data_fraction < 1 else ""
    setting = (
        f"Our clients train {P.epochs} local epoch{'s' * (P.epochs != 1)} a round on {fewer}where the paper's "
        f"train {P.paper_epochs}: pFedMB, which learns its branches and α together, has less to learn them with."
    )
    glue_findings(
        rows, "pFedMB", setting=setting if P.epochs < P.paper_epochs else "", own=is_our_check
    )  # atop the page
    claims = claims_table(rows)
    claims.insert(0, "claim of", ["ours" if is_our_check(r) else "the paper" for r in rows])
    paper_claims = claims[claims["claim of"] == "the paper"].drop(columns="claim of")
    own_claims = claims[claims["claim of"] == "ours"].drop(columns="claim of")
    display(
        Compact(paper_claims, "The claims in full, with the paper's numbers and the notes"),
        folded(
            own_claims, f"Our own checks ({len(own_claims)}): the mechanism checks and the diagnostic under Table I"
        ),
    )
    return Reproduced(claims, rows, paper_rows, our_rows)


# ----------------------------------------------------------------------------- the laboratory notes


class Eq2Check(NamedTuple):
    """The check of eq. (2): FedAvg's LeNet's parameters (``params``, P), pFedMB's branches' (``branch_params``),
    the table of eq. (1) against eq. (2) layer by layer and the multi-branch net it was run on (``net``)."""

    params: int
    branch_params: int
    table: pd.DataFrame
    net: object


def eq2_check(P: Params, full) -> Eq2Check:
    """The numerical check of eq. (2) on ``P.eq2_images`` test images of the dataset ``full``: a random client α,
    the combined single-branch LeNet against the multi-branch one, and the inference cost."""
    torch.manual_seed(0)
    plain = build_model("lenet", full.input_shape, full.n_classes, P.width)
    mb = multi_branch(plain, branches=P.pair_branches, shared_alpha=False, seed=0)
    with torch.no_grad():
        mb.alpha_logits.normal_(std=2.0)  # some client's α, far from uniform
    x = full.normalize(full.x_test[: P.eq2_images])
    eq2 = eq2_table(mb, x)  # eq. (1) against eq. (2), layer by layer
    with torch.no_grad():
        deployed = combined_model(mb, build_model("lenet", full.input_shape, full.n_classes, P.width))
        net_diff = float((mb(x) - deployed(x)).abs().max())
    params = n_params(plain)
    branch_params = sum(p.numel() for _, layer in mb.branch_layers() for p in layer.parameters())
    say(f"whole network: max |multi-branch net − plain net with combined weights| = {net_diff:.1e}")
    say(
        f"parameters: FedAvg's LeNet P = {params:,}; pFedMB's branches = {branch_params:,} = {branch_params / params:.0f} × P; "
        f"α = {mb.alpha_logits.numel()} numbers; the deployed (combined) model = {n_params(deployed):,} = P"
    )
    display(eq2.style.format({"max |eq.1 − eq.2|": "{:.1e}", "max |output|": "{:.2f}"}).hide(axis="index"))
    return Eq2Check(params, branch_params, eq2, mb)


def run_setup_note(P: Params, pairs, *, full, pilot: Pilot, plan: pd.DataFrame, part: PairPartitions) -> None:
    """The run's setup line (profile, device, seeds, images; ``full``: the dataset), the pairs' ``pilot``, its
    choices, the seed ``plan`` of the pairs' claims and the first seed's partition table (``part``)."""
    say(
        f"profile={P.profile}, device={pick_device()}, seeds={P.seeds}, "
        f"{P.train_images or len(full.y_train)} of {len(full.y_train)} training images, "
        f"{P.test_images or len(full.y_test)} of {len(full.y_test)} test images, "
        f"E={P.epochs}; pilot: learning rates {P.lr_grid}, stage 1 at {P.pilot_lr}, seeds {P.pilot_seeds}"
    )
    display(
        folded(
            pilot_summary({"pairs": pilot.table}),
            PILOT_GRID_TITLE,
        )
    )
    display(Markdown(f"Chosen on validation for the pairs: {chosen_text(pilot.chosen)}."))
    say(f"pairs: {pairs.computed} runs computed, {pairs.reused} reused from the store; seeds {pairs.seeds}")
    display(folded(plan.round(2).rename(columns=PLAN_COLUMN), "The seed plan of the pairs' accuracy claims"))
    display(part.table)


def draw_alpha_similarity(pairs, fig3: Fig3Claims) -> None:
    """The α similarity within and across pairs over the rounds (``fig3``: Figure 3's scores on the pairs'
    sweep ``pairs``), and its summary table."""
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    long = fig3.main_scores.melt(
        id_vars=["variant", "seed", "round"], value_vars=["within", "across"], var_name="pairs", value_name="cosine"
    )
    sns.lineplot(
        data=long, x="round", y="cosine", hue="variant", style="pairs", marker="o", errorbar=("pi", 100), ax=ax
    )
    ax.set(
        ylim=(0, 1.02),
        title=f"cosine similarity of α: within vs across pairs ({seeds_text(len(pairs.seeds))}, band: range)",
    )
    ax.legend(fontsize=8)
    _glue_figure("pfedmb_alpha_similarity")  # shown in the notes with its caption
    summary3 = fig3.last[["within", "across", "gap", "pairs on one branch", "distinct branches", "mean max α"]]
    display(summary3.groupby("variant").mean().round(3).T, Markdown(fig3.round1))


def implicit_similarity(P: Params, part: PairPartitions) -> None:
    """The implicit collaboration weights C_ij eq. 5 implies from the final α of the pairs' first seed
    (``part``), within and across pairs."""
    s0, order, pair_id = part.s0, part.order, part.pair_id
    n_i = np.array([len(part.part0.clients[i].train) for i in order], dtype=float)
    same_pair = pair_id[s0][order][:, None] == pair_id[s0][order][None, :]

    fig, axes = plt.subplots(1, 2, figsize=(9.5, 4.6))
    mass = {}
    for ax, (label, title) in zip(axes, VARIANTS.items()):
        C = collaboration(part.alphas[label][s0][P.pair_rounds][order], n_i, label == EQ5)
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


def table1_readings(paper: pd.DataFrame, t1: Table1, *, pilot_words: str) -> None:
    """The two readings of Table I's header (``t1``; ``paper``: the chapter's published numbers) and the
    validation pilot's words."""
    t1_paper, t1_printed = t1.paper, t1.printed
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
    display(Markdown(pilot_words))


def table2_setup_notes(
    P: Params,
    runs,
    *,
    arms: Table2Arms,
    pilots: dict[str, Pilot],
    plan: Table2Plan,
    results: Table2Results,
    eq5_plan: pd.DataFrame,
) -> None:
    """Table II's setup notes: choices at a grid's edge (``arms``' edges), the pilots' choices, the seed plans
    (``plan``'s, ``eq5_plan``), the fallbacks and the saturation check (``results``)."""
    edges = arms.edges
    display(
        Markdown(
            f"**Choices at an edge of their grid**: {int(edges['at its edge first'].sum())} of {len(edges)} on the grids "
            f"the pilots started from; each of those grids then grew one step past that edge ({P.extend} step at most), and "
            f"{int(edges['at its edge'].sum())} choices still sit at an edge, "
            + (
                f"{len(arms.edge_used)} of them choices the runs use: {arms.edge_used_text}."
                if arms.edge_used
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
            pilot_summary({n: p.table for n, p in pilots.items()}),
            PILOT_GRID_TITLE,
        )
    )
    display(
        Markdown(
            "Chosen on validation:\n" + "\n".join(f"* **{n}**: {chosen_text(p.chosen)}." for n, p in pilots.items())
        )
    )
    display(folded(eq5_plan.round(2).rename(columns=PLAN_COLUMN), "The seed plan of the eq. 5 check"))
    say(f"Table II and Figure 5: {runs.computed} runs computed, {runs.reused} reused from the store")
    for a, note in arms.notes.items():
        say(f"{a}: " + re.sub(r"\blr (\S+)", r"η = \1", note))
    display(folded(plan.plan.round(2).rename(columns=PLAN_COLUMN),
                   f"The seed plan of Table II's and Figure 5's claims (at most {P.table2_run} seeds run)"))  # fmt: skip
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
        fit(
            results.sat_table.round(1),
            ["Local, test (%)", "best row, test (%)", "the kit's saturation flag"],
            "every column",
        )
    )
    say(
        "pFedMB's B chosen by validation:",
        ", ".join(f"{k}: {v}" for k, v in plan.chosen_b.items() if k in P.table2_settings),
    )
    display(
        Markdown(
            f"Table II: mean test accuracy (%) after fine-tuning, mean ± 95 % interval over {seeds_text(P.seeds)}, the seeds "
            "every row ran (a claim pairs every seed both of its arms ran, and says how many). Still improving at the end "
            f"(validation +{IMPROVING_POINTS:g} points or more over the last fifth): "
            + ("; ".join(f"in {n}, {', '.join(sorted(v))}" for n, v in results.improving.items()) or "none")
            + "."
        )
    )


def table2_claim_notes(claims: Table2Claims) -> None:
    """How Table II's claims are posed (``claims``): the mechanism bullets, the strength of α's relation to
    the data, the worst gaps on the paper's numbers and ours."""
    c = claims
    display(Markdown(claim_bullets(list(c.mech_alpha.values()) + list(c.mech_eq5.values()))))

    def rho_words(r):
        # a mechanism row's ρ in words: the estimate, its interval and its size
        v = r["_v"]
        if v.n < MIN_SEEDS:
            return f"ρ = {v.mean:+.2f} ({seeds_text(v.n)})"
        nonzero = " but nonzero" if (v.lo > 0 or v.hi < 0) and strength(v.mean) in ("very weak", "weak") else ""
        return f"ρ = {v.mean:+.2f} [{v.lo:+.2f}, {v.hi:+.2f}], {strength(v.mean)}{nonzero}"

    mech_words = "; ".join(f"in {n}, {rho_words(r)}" for n, r in c.mech_alpha.items())
    display(
        Markdown(
            f"**How strongly α follows the data.** {mech_words[:1].upper() + mech_words[1:]}. **Does eq. 5 act?** "
            + "; ".join(f"in {n}, pFedMB − the same with plain averaging: {in_words(r)}" for n, r in c.mech_eq5.items())
            + "."
        )
    )
    if c.gap_means is not None:
        flips = (
            c.paper_worst["pFedMB"] > c.paper_worst[c.paper_other] and c.all_worst["pFedMB"] <= c.all_worst[c.all_other]
        )
        display(
            Markdown(
                f"**Most balanced, on the paper's own numbers.** Over the settings our headline ones stand for, the paper's "
                f"Table II gives pFedMB a worst gap of {c.paper_worst['pFedMB']:.2f} points against {c.paper_other}'s "
                f"{c.paper_worst[c.paper_other]:.2f}; over all {len(c.t2_all)} of its settings, {c.all_worst['pFedMB']:.2f} against "
                f"{c.all_other}'s {c.all_worst[c.all_other]:.2f}"
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
        display(c.gap_means.round(2).to_frame("worst gap"))


def amp_ifca_notes(P: Params, runs, *, claims: Table2Claims) -> bool:
    """Did FedAMP or IFCA degenerate? FedAMP's self-weights over the rounds (``claims``: its state at the
    last round) and IFCA's cluster picks, from ``runs``.  Returns whether FedAMP's attention is inert in
    every setting."""
    amp_end = claims.amp_end
    every_round = pd.DataFrame(
        [
            {"setting": n, "seed": s, "round": r + 1, "least": lo, "mean": mean, "most": hi}
            for n in P.table2_settings
            for s in P.seeds
            for p in [runs.probes(arm(n, "FedAMP"), s).get(max(runs.probes(arm(n, "FedAMP"), s), default=0))]
            if isinstance(p, dict) and "self_trace" in p
            for r, (lo, mean, hi) in enumerate(p["self_trace"])
        ]
    )
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    colours = dict(zip(P.table2_settings, sns.color_palette(n_colors=len(P.table2_settings))))
    for n, d in every_round.groupby("setting", sort=False):
        g = d.groupby("round")[["least", "mean", "most"]].mean().clip(lower=0)  # mean over seeds
        ax.plot(g.index, g["mean"], color=colours[n], label=n)
        ax.fill_between(g.index, g["least"], g["most"], color=colours[n], alpha=0.15, lw=0)
    ax.set(xlabel="round", ylabel="ξ_ii", ylim=(-0.03, 1.03),
           title="FedAMP's self-weight ξ_ii in every round (line: mean over clients; band: least to most)")  # fmt: skip
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=len(P.table2_settings))
    _glue_figure("pfedmb_amp_selfweight")  # shown in the notes with its caption
    display(
        amp_end.round(3).rename(
            columns={"self": "self-weight ξ_ii", "peak": "attention peak (× uniform)", "d2": "median squared distance"}
        )
    )  # at the last round, mean over seeds (amp_end: computed with Table II's claims)
    amp_words = {n: amp_state(amp_end.loc[n], **claims.amp_kw) for n in amp_end.index}
    inert_all = all(claims.amp_regime.get(n) for n in amp_end.index)
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
            for n in P.table2_settings
            for s in P.seeds
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
    return inert_all


def fig5_notes(P: Params, runs, *, fig5: Fig5, claims: Fig5Claims, chosen_b: dict[str, int]) -> None:
    """Figure 5's setting and its claims (``fig5``, ``claims``): the spread over B, Local's accuracy there,
    the diverged B, and the B validation chose (``chosen_b``)."""
    lost, f5, fedavg5, local5 = fig5.lost, fig5.f5, fig5.fedavg, fig5.local
    fig5_rows, lo_b, hi_b, mid_b = claims.rows, claims.lo, claims.hi, claims.mid
    spread5 = f5.groupby("arm")["mean_acc"].mean()  # over the seeds that did not diverge
    kept_b = [b for b in P.fig5_branches if b not in lost]
    kept5 = spread5[[arm(P.fig5_setting, mb_label(b)) for b in kept_b]]
    best_b = int(kept5.idxmax().rsplit("=", 1)[1])
    v_local5 = runs.compare(arm(P.fig5_setting, mb_label(chosen_b[P.fig5_setting])), arm(P.fig5_setting, "Local"))
    local_words = (
        f"{v_local5.mean:+.1f} points (95 % interval [{v_local5.lo:+.1f}, {v_local5.hi:+.1f}], {seeds_text(v_local5.n)})"
        if v_local5.n >= MIN_SEEDS
        else f"{v_local5.mean:+.1f} points on {seeds_text(v_local5.n)}"
    )
    display(
        Markdown(
            f"Over B = {', '.join(map(str, kept_b))} the mean test accuracy spans {kept5.max() - kept5.min():.1f} points"
            + "".join(f" (B = {b} is left out: it diverged on {seeds_text(s)})" for b, s in lost.items())
            + f"; validation picks B = {chosen_b[P.fig5_setting]} overall. "
            + (
                f"FedAvg ({fedavg5:.1f} %) is above pFedMB at every B (pFedMB's best: {kept5.max():.1f} % at B = {best_b})."
                if fedavg5 > spread5.max()
                else f"FedAvg reaches {fedavg5:.1f} %, pFedMB at best {kept5.max():.1f} % (B = {best_b})."
            )
            + "\n\n"
            f"**Can Figure 5's question be asked here?** Local reaches {local5:.1f} % in {P.fig5_setting} (mean over seeds, "
            f"test), pFedMB at its chosen B {spread5[arm(P.fig5_setting, mb_label(chosen_b[P.fig5_setting]))]:.1f} %; "
            f"pFedMB at its chosen B minus Local, paired over the seeds: {local_words}. "
            + (
                f"Local is above {P.local_high:g} %: a client alone does well in this setting, so the curve over B has at "
                f"most {100 - local5:.1f} points of headroom above Local, and a missing peak is weak evidence against the "
                "paper's (a description, not a claim)."
                if local5 > P.local_high
                else f"Local is at most {P.local_high:g} %: a client alone does not saturate this setting, so the number "
                "of branches has room to matter (a description, not a claim)."
            )
            + "\n\n"
            + "\n".join(f"* {r['claim']}: **{in_words(r)}**." for r in fig5_rows[:2])
            + "\n\n"
            + (
                f"By the paired rule the peak at B = {mid_b} is interior: it beats both ends."
                if all(r["verdict"] == "reproduces" for r in fig5_rows[:2])
                else f"By the paired rule the peak is not shown to be interior: B = {mid_b} does not beat both ends "
                f"({fig5_rows[0]['verdict']} against B = {lo_b}, {fig5_rows[1]['verdict']} against B = {hi_b})."
            )
        )
    )


def closing_summary(
    P: Params,
    pairs,
    *,
    runs,
    reproduced: Reproduced,
    fig3: Fig3Claims,
    arms: Table2Arms,
    plan: Table2Plan,
    row_names: list[str],
    cap_text: str,
    inert_all: bool,
    n_train: int,
) -> None:
    """The closing summary: where a claim does not reproduce (``reproduced``), and why: the spread over the seeds
    (``pairs``, ``runs``: Table II's ``row_names``), the training length (``n_train``: the dataset's training
    images), how concentrated α is (``fig3``), the seed cap (``cap_text``), the grids' edges (``arms``) and
    FedAMP (``inert_all``)."""
    paper_rows, our_rows = reproduced.paper_rows, reproduced.our_rows
    edges = arms.edges
    limited = int(reproduced.claims.verdict.str.contains("budget-limited").sum())
    visits_note = (
        f"each client was visited {P.visits} time{'s' if P.visits != 1 else ''} (on average, where only a share takes part"
        + (f"; {P.dirichlet_visits} in Dirichlet 0.4" if P.dirichlet_visits != P.visits else "")
        + ") "
        f"for E = {P.epochs} epoch{'s' if P.epochs != 1 else ''} on {P.train_images or n_train} of "
        f"Fashion-MNIST's training images"
    )
    lines = [
        f"Of the paper's {len(paper_rows)} claims, at the {P.profile} profile: {words_text(paper_rows)}; of our "
        f"{len(our_rows)} own checks: {words_text(our_rows)}; {limited} rows rest on an arm still improving at its end "
        "(*budget-limited*)."
    ]
    if len(P.seeds) < MIN_SEEDS:
        lines.append(f"With {seeds_text(len(P.seeds))} no claim is tested at this profile.")
    else:
        largest = {
            n: np.mean(
                [
                    np.asarray(al).max(-1).mean()
                    for al in final_alphas(runs, arm(n, mb_label(P.pilot_branches)), P.seeds)
                ]
            )
            for n in P.table2_settings
        }
        pairs_conc = float(fig3.last.loc[EQ5, "mean max α"].mean())
        spread_out = [n for n, v in largest.items() if v < P.concentrated_alpha]
        pair_span, pair_widest = max((np.ptp(pairs.values(k)), k) for k in (EQ5, EQ6, "Local"))
        t2_span, t2_where = max(
            (np.ptp(runs.values(plan.arm_of(n, r))), f"{r} in {n}") for n in P.headline for r in row_names
        )
        first_edge, still_edge = int(edges["at its edge first"].sum()), int(edges["at its edge"].sum())
        collapsed = [  # a pFedMB step at its grid's edge, in a setting where α ends on one branch nearly everywhere
            f"with {v} in {p} the mean largest α at the end is {largest[p]:.2f}"
            for p, g, v in arms.edge_used
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
                if pair_span > 2 * P.margin
                else f": within {pair_span:.1f} points, the pairs' runs agree across seeds."
            )
            + f" In Table II's headline settings a row's seeds span up to {t2_span:.1f} points ({t2_where}): a seed changes "
            f"the partition, the initial branches and the batches, and intervals over {len(P.seeds)} seeds are wide there.",
            f"* **Training length.** In Table II {visits_note}; the paper trains every method to convergence on CIFAR. pFedMB "
            "starts slower than FedAvg by construction: at uniform α a step on the branches moves the combined weight by "
            "η Σ_b α_b² = η/B, so until α concentrates it learns up to B times slower. The mean largest α_b,l at the last "
            f"round of the B = {P.pilot_branches} runs of Table II is "
            + ", ".join(f"{v:.2f} in {n}" for n, v in largest.items())
            + f" (mean over layers, clients and seeds; uniform: {1 / P.pilot_branches:.2f}, one branch: 1)"
            + (
                f": below {P.concentrated_alpha:g} in {', '.join(spread_out)}, i.e. on average no branch holds most of "
                "a layer's weight there, where the slow start weighs most."
                if spread_out
                else "."
            )
            + f" In the pairs (one α for all layers) it is {pairs_conc:.2f} after {P.pair_rounds} rounds.",
            "* **Small differences.** The paper's margins in Table II are a point or less; the seed plan under Table II "
            f"says how many seeds each claim needs: {cap_text}. A claim left undecided is not evidence against it.",
            "* **Small grids.** Like the paper, we tune every method's learning rate (and pFedMB's α step, initial scale "
            f"and B, FedAMP's σ) on validation data, but over {len(P.lr_grid)} learning rates and on {len(P.pilot_seeds)} "
            f"pilot seeds with shorter runs. {first_edge} of the pilots' {len(edges)} choices sat at an edge of the "
            f"grid they started from; each of those grids grew one step past it, and {still_edge} choices still sit at an "
            "edge, where a wider grid might choose otherwise"
            + (
                f"; the runs use {len(arms.edge_used)} of them: {arms.edge_used_text}."
                if arms.edge_used
                else "; the runs use none of them."
            )
            + (
                " The largest step goes with α on one branch: "
                + "; ".join(collapsed)
                + f" (uniform: {1 / P.pilot_branches:.2f}), consistent with the derivation's warning that a large step can "
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


def costs_ledger(P: Params, pairs, *, runs, finals: pd.DataFrame, net, s0: int) -> float:
    """§VI's costs: traffic per visit and the wall time of each method's runs (``runs`` and their ``finals``,
    on seed ``s0``), and what pFedMB sends in the pairs (``pairs``; ``net``: a multi-branch net of the
    pairs' B).  Returns pFedMB's upload ÷ FedAvg's in the pairs."""
    first = P.table2_settings[0]
    visit_rows, part_timed = [], []
    for a in runs.arms:
        name, label = a.split(" · ")
        if name != first and not (name == P.fig5_setting and label.startswith(PFEDMB)):
            continue
        cfg = runs[a, s0]["config"]
        visits = cfg["rounds"] * max(1, int(round(cfg["sample_rate"] * cfg["clients"])))
        f = finals[finals.arm == a].set_index("seed")
        fedavg = finals[finals.arm == arm(name, "FedAvg")].set_index("seed")
        timed = f.index[~f.diverged.astype(bool)]  # a diverged run stops early: its wall time is left out
        if len(timed) < len(f):
            part_timed.append(f"{label} in {name}: timed on {seeds_text(list(timed))}, the seeds that did not diverge")
        visit_rows.append(
            {
                "setting": name,
                "method": label,
                "KB down per visit": f.MB_down[s0] * 1e3 / visits,
                "KB up per visit": f.MB_up[s0] * 1e3 / visits,
                "wall time ÷ FedAvg": (f.wall_s[timed] / fedavg.wall_s).dropna().mean(),
            }
        )
    ledger = pd.DataFrame(visit_rows)
    fedavg_kb = ledger.set_index(["setting", "method"]).loc[(first, "FedAvg"), "KB up per visit"]
    ledger["up ÷ FedAvg"] = ledger["KB up per visit"] / fedavg_kb
    pf = pairs.finals().set_index(["arm", "seed"])
    ratio5 = pf.loc[(EQ5, s0), "MB_up"] / pf.loc[("FedAvg", s0), "MB_up"]
    down5 = pf.loc[(EQ5, s0), "MB_down"] / pf.loc[("FedAvg", s0), "MB_down"]
    say(
        f"pairs runs (B = {P.pair_branches}): pFedMB uploads {ratio5:.2f} × and downloads {down5:.2f} × FedAvg's bytes "
        f"(B × P branch weights each way; the upload also carries the client's α, {net.alpha_logits.numel()} numbers "
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
            + ("".join(f"\n* {t}; a diverged run stops early." for t in part_timed) if part_timed else "")
        )
    )
    return ratio5


def branch_cuts(P: Params, pairs, *, runs, net, n_plain: int) -> None:
    """§VI's two cuts: branching only some layers of ``net`` (a multi-branch net; ``n_plain``: the plain
    net's parameters, P), and dropping the branches a client gives little weight (the final α of ``pairs``
    and ``runs``)."""
    layer_size = np.array([sum(p[0].numel() for p in layer.parameters()) for _, layer in net.branch_layers()])
    layer_names = [name for name, _ in net.branch_layers()]
    partial = pd.DataFrame(
        [
            {
                "branched layers": ", ".join(layer_names[-k:]),
                "share of P": layer_size[-k:].sum() / n_plain,
                f"traffic ÷ FedAvg (B = {P.pair_branches})": (n_plain + (P.pair_branches - 1) * layer_size[-k:].sum())
                / n_plain,
            }
            for k in range(1, len(layer_size) + 1)
        ]
    )
    display(partial.round(3))

    cuts = pd.DataFrame(
        [
            {
                "τ": tau,
                f"pairs, eq. 5 (shared α, B={P.pair_branches})": np.mean(
                    [
                        kept_share(np.asarray(al)[:, None, :], tau, layer_size)
                        for al in final_alphas(pairs, EQ5, P.seeds)
                    ]
                ),
                **{
                    f"{name} (per-layer α, B={P.pilot_branches})": np.mean(
                        [
                            kept_share(al, tau, layer_size)
                            for al in final_alphas(runs, arm(name, mb_label(P.pilot_branches)), P.seeds)
                        ]  # fmt: skip
                    )
                    for name in P.table2_settings
                },
            }
            for tau in (0.01, 0.05, 0.1)
        ]
    ).set_index("τ")
    display(
        Markdown(
            f"Share of pFedMB's branch traffic a client would keep (1 = all {P.pair_branches} branches, "
            f"{1 / P.pair_branches:.2f} = one branch, FedAvg's cost):"
        )
    )
    display(cuts.round(2))


def deviations_table(P: Params, pilots: dict[str, Pilot]) -> None:
    """The fixed options of the baselines as run in Table II's first setting (its pilot's choices, from
    ``pilots``), as the deviations list them."""
    first = P.table2_settings[0]
    OPTION_WORDS = {"lam": "λ", "K": "inner steps K", "personal_lr": "inner (personal) learning rate", "beta": "β",
                    "clusters": "cluster models K", "models": "models downloaded per round M", "epsilon": "exploration ε",
                    "epsilon_decay": "decay of ε per round", "alpha_k": "attention step γ", "sigma": "σ",
                    "similarity": "similarity", "self_weight": "self-weight", "mu": "proximal weight μ"}  # fmt: skip
    display(Markdown(f"**Baselines' options as run** ({first}; the kit's defaults filled in):"))
    display(
        pd.DataFrame(
            [
                {"method": k, "option": OPTION_WORDS.get(o, o), "value": f"{v:g}" if isinstance(v, float) else str(v)}
                for k, c in pilots[first].chosen.items()
                if k != PFEDMB
                for o, v in get_method(c.method).resolve_options(c.options).items()
            ]
        ).set_index(["method", "option"])
    )


DATA_NAMES = {
    "fashion-mnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
}  # as the prose writes them


def glue_texts(P: Params, runs, *, paper: PaperTable2, cap_text: str, paper_peak: int) -> None:
    """The values and sentences the chapter's markdown reads by name (glue), and the setup card: from the
    parameters, Table II's ``runs``, the ``paper``'s Table II, the seed cap's sentence (``cap_text``) and
    the B at which the paper's Figure 5 peaks."""
    from myst_nb import glue

    # the values the prose shows ({glue:text} roles), as this execution set them
    glue_values(P.prose_values())
    glue_values({"PAPER_GAP": ", ".join(f"{d} {st}: {g:+.2f}" for (d, st), g in paper.gap.items())})
    glue_values(
        {
            "FIRST_SEED": P.seeds[0],
            "IFCA_K": P.options["ifca"]["clusters"],
            "PFEDME_K": P.options["pfedme"]["K"],
            **{f"{m.upper()}_{k.upper()}_GRID": v for m, grids in P.baseline_grids.items() for k, v in grids.items()},
            "FEDAMP_LAM": P.options["fedamp"]["lam"],
        }
    )

    def share(rate):  # a share of the clients per round, in words
        return "all in every round" if rate >= 1 else f"{100 * rate:g} % per round"

    fig5_cfg = P.settings[P.fig5_setting]["cfg"]
    n_train = f"{TRAIN_SIZE.get(P.datasets[0], 60_000):,}".replace(",", " ")  # the official training set
    r2_run = [n for n in P.table2_settings if n.startswith("random 2 ")]
    resolved = {
        m: get_method(m).resolve_options(P.options.get(m, {})) for m in ("pfedme", "fedfomo", "fedamp", "fedprox")
    }
    ran = (
        f"every table and figure, Table II in all {len(P.settings)} of its settings"
        if set(P.table2_settings) == set(P.settings)
        else f"every table and figure, Table II in {len(P.table2_settings)} of its {len(P.settings)} settings"
    ) + f" and Figure 5 in {P.fig5_setting} (the paper: {PAPER_FIG5[1]})"
    deviations = (
        [f"Fashion-MNIST instead of CIFAR-10/100 (random {P.k_classes} classes for the paper's random 20 of CIFAR-100)"]
        if P.datasets[0] == "fashion-mnist"
        else [f"{P.datasets[0]} and {P.datasets[-1]} as in the paper, the kit's LeNet with {P.width} and "
              f"{2 * int(P.width)} filters (the paper's: 6 and 16)"]
    )  # fmt: skip
    if P.epochs != P.paper_epochs:
        deviations.append(
            f"E = {P.epochs} local epoch{'s' if P.epochs != 1 else ''} (the paper: {P.paper_epochs}), also in fine-tuning"
        )
    deviations.append("fixed rounds, not convergence")
    glue_values({
        "RAN_TEXT": ran,
        "DEVIATIONS_TEXT": "; ".join(deviations) + ".",
        "DATA_TEXT": " and ".join(DATA_NAMES.get(d, d) for d in dict.fromkeys(P.datasets)),
        "E_TEXT": (f"E = {P.epochs} local epoch{'s' if P.epochs != 1 else ''} at this profile, against the paper's "
                   f"{P.paper_epochs} (§V-A)." if P.epochs != P.paper_epochs else f"E = {P.epochs} local epochs, as in the paper (§V-A)."),
        "PAIR_GROUPS": P.pair_clients // 2,
        "ALPHA_GRID_MOM": P.alpha_lr_grid["momentum"],
        "ALPHA_GRID_PLAIN": P.alpha_lr_grid.get("no momentum", []),  # the paper profile's dry run pilots one variant
        "SEED_CAP": SEED_CAP,
        "T2_CAP_TEXT": cap_text,
        "SETTINGS_RUN_TEXT": (
            f"This profile runs all {len(P.settings)} settings."
            if set(P.table2_settings) == set(P.settings)
            else f"This profile runs {len(P.table2_settings)} of the {len(P.settings)}: {prose(P.table2_settings)} "
            f"({P.fig5_setting} runs for Figure 5, with pFedMB, FedAvg and Local only); the paper profile runs all "
            f"{len(P.settings)}."
        ),
        "R2_LOCAL_TEXT": (
            f"Local reaches {runs.values(arm(r2_run[0], 'Local')).mean():.1f} % in our {r2_run[0]} runs (Table II)"
            if r2_run
            else "a client alone tells two classes apart almost perfectly"
        ),
        "PAPER_LOCAL_R2_50": f"{paper.col(f'random 2 classes / {P.client_setups[-1][0]} clients')['Local']:.2f}",
        "PAPER_PEAK": paper_peak,
        "WIDTH_TEXT": f"{P.width} and {2 * int(P.width)}",
        "TRAIN_IMAGES_TEXT": f"{P.train_images} (a {P.data_fraction:g} share of the {n_train})" if P.train_images
        else f"all {n_train}",
        "TEST_TEXT": "The whole test set is used." if P.test_images is None
        else f"{P.test_images} of the 10 000 test images are used at this profile.",
        "CLIENT_SETUPS_TEXT": "; ".join(f"{n} clients, {share(r)}" for n, r in P.client_setups),
        "FIG5_ROUNDS_TEXT": f"{fig5_cfg['clients']} clients, {share(fig5_cfg['sample_rate'])}: "
        f"{int(round(P.fig5_visits / fig5_cfg['sample_rate']))} rounds",
        "PFEDME_LAM": resolved["pfedme"]["lam"],
        "PFEDME_PLR": P.options["pfedme"]["personal_lr"],
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
                    train_images=P.train_images,
                    data_fraction=P.data_fraction,
                    width=P.width,
                    branch_choices=P.branch_choices,
                    pair_clients=P.pair_clients,
                    pair_branches=P.pair_branches,
                    settings=P.table2_settings,
                    epochs=P.epochs,
                    paper_epochs=P.paper_epochs,
                    batch=P.batch,
                    momentum=P.momentum,
                    pair_rounds=P.pair_rounds,
                    visits=P.visits,
                    dirichlet_visits=P.dirichlet_visits,
                    fig5_visits=P.fig5_visits,
                    seeds=P.seeds,
                    cap=SEED_CAP,
                )
            )
        ),
        display=False,
    )  # the setup card, under the findings
