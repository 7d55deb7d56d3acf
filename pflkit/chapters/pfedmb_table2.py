"""The pFedMB chapter's Table II, Table III and Figure 5: the paper's Table II by our settings, the arms from each
setting's pilot, what validation chose on the pilot seeds (B, the rivals, the seed plan), the eq. 6 control, the
results beside the paper's and their claims with the mechanism checks, then Figure 5 (accuracy against B) with
Table III and their claims.  Runs in, tables and claims-table rows out: the parameters and the pilot are
:mod:`pflkit.chapters.pfedmb_sections`, the notes on these results :mod:`pflkit.chapters.pfedmb_notes`."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import Markdown, display

from ..claims import claim_row
from ..engine import RunConfig
from ..experiments import HEADLINE_SEEDS, SEED_CAP, arm_seeds, claim, mechanism, saturation, seed_plan, sweep_stable
from ..methods import display_name
from ..pages import claim_bullets
from ..results import PaperMargin
from ..verdicts import RESOLUTION, interval, seeds_text, verdict
from .pfedmb import (
    PFEDMB,
    alpha_follows_data,
    amp_probe,
    amp_regime,
    arm,
    cell_text,
    derived_claim,
    diverged_note,
    grid_used,
    mb_label,
    mechanism_line,
    setting_arms,
    t2_diffs,
    table2_probe,
    value_words,
    worst_gap,
)
from .pfedmb_sections import BASELINES, OTHERS, PAPER_NAME, REGISTRY_NAME, Params, Pilot

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

    # the headlines are planned on the paper's margin carried to our rival's pilot accuracy, never on a mean difference
    heads = {}
    for n in P.headline:
        col = paper.col(n)
        theirs = PaperMargin("", values=[(col["pFedMB"], col.drop("pFedMB").max())])
        heads[f"{n}: pFedMB − {rival[n]}"] = theirs.carried(interval(pilot_runs.values(arm(n, rival[n])))[0])
    plan = seed_plan(t2_diffs(pilot_runs, claims), cap=SEED_CAP, resolution=RESOLUTION, headlines=heads,
                     margins={k: m for k, (_, m) in claims.items() if m is not None})  # fmt: skip
    claim_arms = {k: [a for _, x, y in terms for a in (x, y)] for k, (terms, _) in claims.items()}
    local = [f"{n}: pFedMB − Local (beats)" for n in P.headline]
    seeds = arm_seeds(
        plan, claim_arms, P.seeds, arms=arms.arms, cap=SEED_CAP, least=dict.fromkeys(local, HEADLINE_SEEDS)
    )
    lead = {a for k in heads for a in claim_arms[k]}  # a headline's arms run its own plan, past the run cap
    seeds = {a: s if a in lead else s[: P.table2_run] for a, s in seeds.items()}
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
           "undecided, reads underpowered, its notes giving the seeds planned and run" if table2_run < SEED_CAP else "")
        + f"; a headline's arms run its own plan (at least {HEADLINE_SEEDS} seeds, at most {SEED_CAP})"
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
