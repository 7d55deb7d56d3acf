"""The pFedMB chapter's pairs (§V-B): ten clients in five pairs, the arms and their partitions, Figure 3 (each
client's α over the rounds) and its claims, Table I beside the paper's two readings of its header with Figure 4's
curves and their claims, and the initial-scale diagnostic.  Runs in, figures, tables and claims-table rows out: the
parameters and the pilot are :mod:`pflkit.chapters.pfedmb_sections`, the notes on the pairs
:mod:`pflkit.chapters.pfedmb_notes`."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import Markdown, display

from ..engine import Federation, RunConfig
from ..experiments import claim, in_words, paper_vs_ours, saturation
from ..pages import claim_bullets
from ..results import PaperMargin
from ..verdicts import RESOLUTION, fmt_interval, seeds_text, verdict
from .pfedmb import PFEDMB, derived_claim, eval_every, main_run, pair_diffs, pair_scores, paper_diff, per_seed
from .pfedmb_sections import EQ5, EQ6, PAIR_MAIN, VARIANTS, Params

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
