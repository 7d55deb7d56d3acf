"""The pFedMB chapter's laboratory notes: the check of eq. (2), the run's setup, the α similarity and the implicit
collaboration weights of the pairs, the readings of Table I, Table II's setup and claim notes, whether FedAMP or IFCA
degenerated, Figure 5's notes, the closing summary, §VI's costs and cuts and the deviations table (the values the
chapter's markdown reads by name are :mod:`pflkit.chapters.pfedmb_glue`).  What the sections returned in, notes out:
the sections are :mod:`pflkit.chapters.pfedmb_sections`, :mod:`pflkit.chapters.pfedmb_pairs` and
:mod:`pflkit.chapters.pfedmb_table2`."""

from __future__ import annotations

import re
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from IPython.display import Markdown, display

from ..claims import words_text
from ..engine import pick_device
from ..experiments import IMPROVING_POINTS, MIN_SEEDS, in_words
from ..methods import get_method
from ..methods.pfedmb import combined_model, multi_branch
from ..models import build_model, n_params
from ..pages import claim_bullets, fit, folded
from ..verdicts import seeds_text
from .pfedmb import (
    PFEDMB,
    amp_state,
    arm,
    chosen_text,
    collaboration,
    eq2_table,
    final_alphas,
    kept_share,
    mb_label,
    pilot_summary,
    say,
    strength,
)
from .pfedmb_pairs import Fig3Claims, PairPartitions, Table1
from .pfedmb_sections import EQ5, EQ6, PILOT_GRID_TITLE, PLAN_COLUMN, VARIANTS, Params, Pilot, Reproduced, _glue_figure
from .pfedmb_table2 import (
    Fig5,
    Fig5Claims,
    Table2Arms,
    Table2Claims,
    Table2Plan,
    Table2Results,
)

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
