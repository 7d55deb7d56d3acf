"""The book's one verdict rule, the size judgement beside it, and the claims tables built on them.

A claim compares two arms on the same seeds (same seed ⇒ same partition, initialisation and
client sampling).  :func:`verdict` takes the per-seed differences, their mean and 95 % t-interval.
A directional claim ("a beats b", resolution m): *no difference* when the interval lies wholly inside
± m (whether or not it excludes 0), else *reproduces* when it excludes 0 on the paper's side,
*contradicted* when it excludes 0 on the other side, *inconclusive* otherwise.  A "comparable (± m)"
claim is an equivalence test (two one-sided tests: its 90 % interval inside ± m reproduces it, wholly
outside contradicts it); a "beats" claim whose paper margin is smaller than m on the paper's own
scale is a tie, tested as non-inferiority at − m.  Fewer than :data:`MIN_SEEDS` seeds: *not tested*.

Beside the word, the **size**: the paper's margin for the same comparison (:class:`PaperMargin`),
carried to our scale as a relative reduction of error, against our interval (:func:`size_of`).  A
claim whose carried margin is below m is *saturated* (no room for the paper's effect here) and reads
*not tested* unless its interval lies wholly beyond − m.  Flags (*budget-limited*, *saturated*,
*mechanism inert*) stand beside the word (:func:`pflkit.sweeps.still_improving`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .results import PaperMargin, method_key, reported_above

if TYPE_CHECKING:
    from .sweeps import SweepResult

MIN_SEEDS = 3  # a verdict needs at least this many paired seeds
CONFIDENCE = 0.95
WORDS = ("reproduces", "contradicted", "no difference", "inconclusive", "underpowered", "not tested")
# flags stand beside a claim's word wherever it is printed; they never replace it
INERT, SATURATED, BUDGET_LIMITED, WEAK = "mechanism inert", "saturated", "budget-limited", "weak baseline"
FLAGS = (BUDGET_LIMITED, SATURATED, INERT, WEAK)
# points: a baseline this far below Local / FedAvg's global model in our runs is marked *weak baseline* where
# a published table (its paper's, a paper's that compares it, PFLlib's) reports it above that reference
WEAK_BELOW = {"Local": 3.0, "FedAvg": 1.0}
RESOLUTION = 1.0  # points: the default m of the "no difference" word (a claim may state its own)
CEILING = 2.0  # points: a setting whose strongest arm lies within this of 100 % is saturated
SEED_CAP = 10  # the most seeds a claim is planned for at `book`
HEADLINE_SEEDS = 5  # a headline runs to min(cap, max(this, its plan)) seeds
DECISION_FLOOR = 0.5  # points: no claim is planned to resolve less than this
SD_UPPER = 0.8  # the seed plan uses this one-sided upper confidence bound on the spread

EQUIVALENCE = 0.90  # a "comparable (± m)" claim: two one-sided tests at 5 %, i.e. its 90 % interval inside ± m
MEANINGS = {  # each word in one line, for a page that lists them (the verdict rule has the detail)
    "reproduces": "our 95 % interval excludes 0 on the paper's side and leaves ± m (a comparable claim: its 90 % "
    "interval lies inside ± m; a tie: it lies above − m)",
    "contradicted": "it excludes 0 on the other side (a comparable claim: it lies wholly outside ± m; a tie: below − m)",
    "no difference": "it lies wholly inside ± m, whether or not it excludes 0: the claimed advantage is absent at that "
    "resolution",
    "inconclusive": "the claim ran to its seed plan and its interval still decides nothing",
    "underpowered": "it did not run to the seeds its plan needs (the plan says how many): the cap cannot reach them, or "
    "they were not run",
    "not tested": f"fewer than {MIN_SEEDS} seeds, a saturated setting (no room for the paper's effect here), or nothing "
    "here can measure it",
}
SIZES = ("as the paper's", "smaller than the paper's", "larger than the paper's", "size undetermined")
SIZE_MEANINGS = {  # the second judgement, beside the word of every claim with a numeric paper margin
    "as the paper's": "our 95 % interval excludes 0 and holds the paper's margin carried to our scale",
    "smaller than the paper's": "the carried margin lies above our interval (in the paper's direction)",
    "larger than the paper's": "the carried margin lies below our interval",
    "size undetermined": "our interval holds both 0 and the carried margin",
}
FLAG_MEANINGS = {  # each flag in one line; a flag stands beside the word, never in its place
    BUDGET_LIMITED: "an arm of the claim was still improving when its budget ended (how far it still rose is given)",
    SATURATED: "the setting leaves no room for the paper's effect (carried to our error it is below m; without a "
    "paper margin: an arm within 2 points of 100 %, or every arm alike): the word is not tested, no headline",
    INERT: "what makes the method different does not act in these runs (its mechanism check), so the word says "
    "nothing about that mechanism",
    WEAK: "an arm of the claim that a published table reports above Local (FedAvg's global model) scores more than "
    f"{WEAK_BELOW['Local']:g} points below Local ({WEAK_BELOW['FedAvg']:g} point below FedAvg) here; the notes say "
    "why, citing a control run, or that it is not yet explained",
}


# ----------------------------------------------------------------------------- the verdict rule


def seeds_text(seeds) -> str:
    """Seeds as the prose says them: a list names them ("seed 4", "seeds 0, 1 and 4"), a number counts
    them ("1 seed", "3 seeds")."""
    if isinstance(seeds, (int, np.integer)):
        return f"{seeds} seed" + ("s" if seeds != 1 else "")
    names = [str(s) for s in seeds]
    return f"seed {names[0]}" if len(names) == 1 else "seeds " + ", ".join(names[:-1]) + " and " + names[-1]


@dataclass
class Verdict:
    word: str  # one of WORDS
    mean: float  # mean paired difference (a − b), in the metric's unit × scale
    lo: float  # the interval the word was judged on (95 %; 90 % for a comparable claim)
    hi: float
    n: int  # paired seeds
    margin: float | None = None  # "comparable (± margin)" and tie claims
    budget: bool | None = False  # True: an arm was still improving; None: not measurable
    unit: str = "points"
    test: str = "beats"  # "beats", "comparable" (equivalence, ± margin) or "tie" (non-inferiority at − margin)
    m: float | None = None  # the resolution of a "beats" claim
    diffs: tuple = ()  # the paired differences it was judged on
    level: float = CONFIDENCE  # of the interval lo, hi

    @property
    def flag(self) -> str:
        return {True: "budget-limited", None: "budget not measured", False: ""}[self.budget]

    @property
    def ci(self) -> tuple[float, float]:
        """The 95 % interval (what the size judgement reads, whatever the word's test)."""
        mean, half, _ = interval(self.diffs) if self.diffs else (self.mean, float("nan"), self.n)
        return (self.lo, self.hi) if self.level == CONFIDENCE or not self.diffs else (mean - half, mean + half)

    def __str__(self) -> str:
        if self.n < MIN_SEEDS:
            what = f"{self.mean:+.1f} {self.unit} on {seeds_text(self.n)}" if self.n else "no paired runs"
            return f"not tested ({what}; a verdict needs {MIN_SEEDS} seeds)"
        pct = f"{100 * self.level:.0f} %"
        text = f"{self.word} ({self.mean:+.1f} {self.unit}, {pct} CI [{self.lo:+.1f}, {self.hi:+.1f}], {self.n} seeds"
        text += f", margin ±{self.margin:g})" if self.margin is not None else ")"
        return text + (f", {self.flag}" if self.flag else "")


def verdict(
    diffs, *, margin: float | None = None, budget: bool | None = False, unit: str = "points",
    resolution: float | None = None, test: str | None = None,
) -> Verdict:  # fmt: skip
    """The book's one rule, on paired differences ``a − b`` (the paper's side is ``> 0``).

    * A directional claim ("a beats b"): *no difference* when the 95 % interval lies wholly inside
      ± m, whether or not it excludes 0 (m: ``resolution``; in points :data:`RESOLUTION` unless the
      claim states another; in another unit only when given); else *reproduces* / *contradicted*
      when it excludes 0 on the paper's / the other side; else *inconclusive*.
    * ``margin`` M (``test="comparable"``, the default with a margin): an equivalence test, two
      one-sided tests at 5 %: *reproduces* when the 90 % interval lies inside ± M, *contradicted*
      when it lies wholly outside, else *inconclusive*.
    * ``test="tie"`` (a "beats" claim whose paper margin is below m on the paper's own scale):
      non-inferiority at − M, on the 95 % interval: *reproduces* above − M, *contradicted* below."""
    values = tuple(float(x) for x in diffs if x == x)
    test = test or ("beats" if margin is None else "comparable")
    if test == "beats" and resolution is None and unit == "points":
        resolution = RESOLUTION
    level = EQUIVALENCE if test == "comparable" else CONFIDENCE
    mean, half, n = interval(values, level)
    common = dict(margin=margin, budget=budget, unit=unit, test=test, m=resolution, diffs=values, level=level)
    if n < MIN_SEEDS:
        return Verdict("not tested", mean, float("nan"), float("nan"), n, **common)
    lo, hi = mean - half, mean + half
    if test == "beats":
        m = resolution
        if m is not None and -m < lo and hi < m:
            word = "no difference"
        else:
            word = "reproduces" if lo > 0 else "contradicted" if hi < 0 else "inconclusive"
    elif test == "comparable":
        inside, outside = -margin < lo and hi < margin, lo > margin or hi < -margin
        word = "reproduces" if inside else "contradicted" if outside else "inconclusive"
    elif test == "tie":
        word = "reproduces" if lo > -margin else "contradicted" if hi < -margin else "inconclusive"
    else:
        raise ValueError(f"unknown test {test!r}: beats, comparable or tie")
    return Verdict(word, mean, lo, hi, n, **common)


# ----------------------------------------------------------------------------- the paper's size


def carried_text(carried) -> str:
    """Carried margins as the tables print them: "+1.2" or "+0.3 to +1.9"."""
    lo, hi = min(carried), max(carried)
    return f"{lo:+.1f}" if round(lo, 1) == round(hi, 1) else f"{lo:+.1f} to {hi:+.1f}"


def size_of(lo: float, hi: float, carried, direction: float | None = None) -> str:
    """The size judgement (:data:`SIZES`): our 95 % interval [``lo``, ``hi``] against the paper's margins
    carried to our scale (one per dataset the paper reports), read in the paper's direction (a
    comparable claim, whose paper claims no direction, passes ``direction``: the sign of our mean, so
    that the size compares magnitudes)."""
    s = direction if direction is not None else 1.0 if sum(carried) >= 0 else -1.0
    a, b = sorted((s * lo, s * hi))
    c_lo, c_hi = sorted((s * min(carried), s * max(carried)))
    if c_hi < a:
        return "larger than the paper's"
    if c_lo > b:
        return "smaller than the paper's"
    return "size undetermined" if a <= 0 <= b else "as the paper's"


def size_note(size: str, paper: PaperMargin, carried, lo: float, hi: float) -> str:
    """The size judgement in a few words: "the paper's +7.5 (FMNIST), carried +1.9, lies above [−4.8, +2.9]"."""
    where = "lies above" if min(carried) > hi else "lies below" if max(carried) < lo else "and"  # as numbers
    theirs = ", ".join(f"{x:+.2g}" if abs(x) < 1 else f"{x:+.1f}" for x in paper.margins)
    shown = f"the paper's {theirs}, carried {carried_text(carried)},"
    if size in ("as the paper's", "size undetermined"):
        holds = "holds it" if size == "as the paper's" else "holds it and 0"
        return f"{shown} our [{lo:+.1f}, {hi:+.1f}] {holds}"
    return f"{shown} {where} our [{lo:+.1f}, {hi:+.1f}]"


# ----------------------------------------------------------------------------- the seed plan


def pooled_sd(groups) -> tuple[float, int]:
    """The pooled standard deviation of several claims' paired differences (each claim's own mean
    removed) and its degrees of freedom: three seeds estimate a spread poorly, like claims of a
    chapter together less so."""
    ss, dof = 0.0, 0
    for g in groups:
        v = np.asarray([x for x in g if x == x], dtype=float)
        if len(v) >= 2:
            ss += float(((v - v.mean()) ** 2).sum())
            dof += len(v) - 1
    return (math.sqrt(ss / dof) if dof else float("nan")), dof


def sd_upper(sd: float, dof: int, level: float = SD_UPPER) -> float:
    """A one-sided ``level`` upper confidence bound on the standard deviation ``sd`` estimated with
    ``dof`` degrees of freedom (chi-square): what the plan assumes, so that it is not optimistic."""
    from scipy import stats

    return sd * math.sqrt(dof / stats.chi2.ppf(1 - level, dof)) if dof else float("nan")


def seeds_needed(sd: float, scale: float, most: int = 100) -> int | None:
    """The fewest seeds (at least :data:`MIN_SEEDS`) whose expected 95 % half-width
    ``t(n − 1) · sd / √n`` is at most ``scale``; None beyond ``most``."""
    from scipy import stats

    for n in range(MIN_SEEDS, most + 1):
        if stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1) * sd / math.sqrt(n) <= scale:
            return n
    return None


def to_clear(mean: float, margin: float | None = None, resolution: float | None = None) -> float:
    """How far the half-width of a claim's interval must shrink for the verdict to decide, if the
    pilot's mean difference holds: a directional claim clears 0 (or, with a ``resolution`` m, fits
    inside ± m, whichever is nearer: ``max(|mean|, m − |mean|)``); a "no difference" claim with
    ``margin`` M clears ± M from the side its mean lies on (``| |mean| − M |``)."""
    a = abs(mean)
    if margin is not None:
        return abs(a - margin)
    return max(a, resolution - a) if resolution is not None else a


def seed_plan(
    claims: dict, *, cap: int = SEED_CAP, pool: bool = True, margins: dict | None = None,
    resolution: dict | float | None = None, floor: dict | float = DECISION_FLOOR,
) -> pd.DataFrame:  # fmt: skip
    """Per claim (``claims``: name -> its paired differences on the pilot seeds): the spread the
    plan assumes (the pooled spread of all the claims given, or the claim's own with ``pool=False``,
    raised to its :data:`SD_UPPER` upper bound), the distance the interval must clear
    (:func:`to_clear`, from the pilot's mean; at least :data:`DECISION_FLOOR`), the seeds whose
    expected 95 % half-width is that small, and the plan: that many seeds, or *underpowered (needs N
    seeds)* when ``cap`` seeds cannot decide it, before its runs are made.  A claim the pilot already
    decides (its verdict, with its ``margins`` / ``resolution``, is not *inconclusive*) is planned at
    the pilot's seeds.  ``floor``: one value, or one per claim (a claim in another unit than points)."""
    shared = pooled_sd(claims.values()) if pool else None
    margins = margins or {}
    rows = []
    for name, diffs in claims.items():
        sd, dof = shared if pool else pooled_sd([diffs])
        res = resolution.get(name) if isinstance(resolution, dict) else resolution
        pilot = _pilot(diffs, margins.get(name), res)
        least = floor.get(name, DECISION_FLOOR) if isinstance(floor, dict) else floor
        m = max(to_clear(pilot.mean, margins.get(name), res), least) if pilot.n else float("nan")
        upper = sd_upper(sd, dof)
        need = seeds_needed(upper, m) if upper == upper and m == m else None
        if pilot.n >= MIN_SEEDS and pilot.word != "inconclusive":
            need, plan = pilot.n, f"none added: its pilot seeds decide it ({pilot.word} there)"
        else:
            plan = (f"{need} seeds" if need is not None and need <= cap
                    else f"underpowered (needs {need} seeds)" if need is not None
                    else "underpowered (needs more than 100 seeds)" if upper == upper else "not tested (no spread)")  # fmt: skip
        rows.append({"claim": name, "pilot seeds": pilot.n, "pilot mean": pilot.mean, "sd assumed": upper,
                     "to clear (points)": m, "seeds needed": need, "plan": plan})  # fmt: skip
    return pd.DataFrame(rows).set_index("claim")


def _pilot(diffs, margin: float | None, resolution: float | None) -> Verdict:
    """The pilot's verdict as the seed plans of the committed store were made: on the 95 % interval, m
    only where the claim gives one, and *no difference* only for an interval that straddles 0, so that
    the seeds a claim runs stay those of the store.  (Sizing plans on the paper's carried margin, fixed
    before any seed is read, replaces this with the runs of the headline fills.)"""
    v = verdict(diffs, margin=margin, resolution=resolution if resolution is not None else 0.0)
    if margin is not None:  # comparable claims: the old 95 % decision
        mean, half, n = interval(v.diffs)
        lo, hi = mean - half, mean + half
        word = (
            "reproduces"
            if -margin < lo and hi < margin
            else "contradicted"
            if lo > margin or hi < -margin
            else "inconclusive"
        )
        return Verdict(word if n >= MIN_SEEDS else "not tested", mean, lo, hi, n, margin)
    if v.word == "no difference" and (v.lo > 0 or v.hi < 0):
        v.word = "reproduces" if v.lo > 0 else "contradicted"
    return v


def planned_seeds(plan: pd.DataFrame, pilot: list[int], cap: int = SEED_CAP) -> list[int]:
    """The seeds a section runs to: the pilot's, then the next ones up to the largest number of
    seeds a claim of ``plan`` (:func:`seed_plan`) needs within ``cap`` (underpowered claims add
    none)."""
    return _seeds(max([len(pilot), *(_need(plan, c, cap) for c in plan.index)]), pilot)


def arm_seeds(plan: pd.DataFrame, claim_arms: dict, pilot: list[int], arms=(), cap: int = SEED_CAP,
              least: dict | None = None) -> dict:  # fmt: skip
    """The seeds each arm runs to under ``plan``: the pilot's, then as many as the claim that
    compares it and needs most (``claim_arms``: plan claim -> the arms it compares; ``least``: plan
    claim -> the fewest seeds it runs whatever its plan, within ``cap``: :data:`HEADLINE_SEEDS` for a
    headline); the other ``arms`` run the pilot's only.  A sweep given this dict runs nothing else."""
    need: dict = dict.fromkeys(arms, len(pilot))
    least = least or {}
    for c, arms in claim_arms.items():
        n = max(_need(plan, c, cap) if c in plan.index else len(pilot), min(cap, least.get(c, 0)))
        for a in arms:
            need[a] = max(need.get(a, len(pilot)), n)
    return {a: _seeds(n, pilot) for a, n in need.items()}


def _need(plan: pd.DataFrame, name: str, cap: int) -> int:
    n, p = plan.loc[name, "seeds needed"], str(plan.loc[name, "plan"])
    ok = n == n and n is not None and int(n) <= cap and not p.startswith(("underpowered", "not tested"))
    return int(n) if ok else 0


def _seeds(n: int, pilot: list[int]) -> list[int]:
    extra = [s for s in range(max(pilot) + 1, max(pilot) + 1 + n) if s not in pilot]
    return list(pilot) + extra[: max(0, n - len(pilot))]


def underpowered(v: Verdict, plan: pd.DataFrame | None, name: str) -> tuple[str, str]:
    """The verdict word of a claim run to ``plan``, and a note: *inconclusive* only for a claim that ran
    to its plan.  An undecided claim that its plan called underpowered (the cap cannot decide it) reads
    *underpowered*, with the seeds it needs; one that ran fewer seeds than its plan reads *underpowered*
    too, and says how many it ran."""
    if plan is None or name not in plan.index or v.word != "inconclusive":
        return v.word, ""
    p, need = str(plan.loc[name, "plan"]), plan.loc[name, "seeds needed"]
    if p.startswith("underpowered"):
        return "underpowered", p.removeprefix("underpowered ").strip("()")
    if need == need and need is not None and v.n < int(need):
        return "underpowered", f"planned {int(need)} seeds, {v.n} run"
    return v.word, ""


def interval(values, level: float = CONFIDENCE) -> tuple[float, float, int]:
    """Mean and ``level`` (95 %) t-interval half-width of values over seeds (half-width NaN below 2)."""
    from scipy import stats

    v = np.asarray([x for x in values if x == x], dtype=float)
    if len(v) < 2:
        return (float(v.mean()) if len(v) else float("nan")), float("nan"), len(v)
    return (
        float(v.mean()),
        float(stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))),
        len(v),
    )


def fmt_interval(values, digits: int = 1) -> str:
    """``mean ± half-width`` of values over seeds; ``mean`` alone for one seed, and for two the
    two values ("mean (a, b)"), whose t-interval (t = 12.7) would say nothing."""
    m, h, n = interval(values)
    if n == 2:
        a, b = sorted(float(x) for x in values if x == x)
        return f"{m:.{digits}f} ({a:.{digits}f}, {b:.{digits}f})"
    return f"{m:.{digits}f}" if n < 2 else f"{m:.{digits}f} ± {h:.{digits}f}"


def _budget(flags) -> bool | None:
    flags = list(flags)
    if any(f is True for f in flags):
        return True
    return None if any(f is None for f in flags) else False


# ----------------------------------------------------------------------------- tables for the chapters


def saturation(result: SweepResult, arms=None, metric: str = "mean_acc", *, m: float = RESOLUTION,
               ceiling: float = CEILING) -> str:  # fmt: skip
    """Why the setting of ``arms`` (default: the sweep's) is saturated, or ``""``: its strongest
    arm's mean lies within ``ceiling`` points of 100 %, or every arm's mean within ``m`` points of
    every other's.  A saturated setting keeps its table, labelled, and carries no headline claim."""
    means = {a: interval(result.values(a, metric))[0] for a in (arms or result.arms)}
    means = {a: v for a, v in means.items() if v == v}
    if not means:
        return ""
    top = max(means.values())
    if top >= 100 - ceiling:
        return f"saturated: strongest arm {top:.1f} %, within {ceiling:g} points of 100 %"
    if len(means) > 1 and top - min(means.values()) < m:
        return f"saturated: all {len(means)} arms within {m:g} point{'s' if m != 1 else ''} of each other"
    return ""


def _base_name(arm: str) -> tuple[str, str]:
    """An arm's method and its variant, as a pattern for the same variant of another method: "pFedMe (L)"
    -> ("pFedMe", "{} (L)"); pFedMB's "Dirichlet 0.4 / 15 clients · pFedMe" -> ("pFedMe", "Dirichlet 0.4 / 15
    clients · {}"); "pFedMe" -> ("pFedMe", "{}")."""
    if " · " in arm:
        prefix, name = arm.rsplit(" · ", 1)
        return name, prefix + " · {}"
    m = re.fullmatch(r"(.*?)(\s*\(.*\))?", arm)
    return m[1], "{}" + (m[2] or "")


def weak_arms(result: SweepResult, arms, metric: str = "mean_acc", reported: dict | None = None) -> dict[str, str]:
    """The arms among ``arms`` that a published table reports above Local or FedAvg's global model
    (``reported``: :func:`pflkit.results.reported_above`) and that score more than :data:`WEAK_BELOW`
    points below that reference in ``result`` on the seeds both ran (an arm's variant against the same variant of the
    reference: "pFedMe (L)" against "Local (L)"): arm -> "pFedMe 32.0 points below FedAvg (PFLlib reports it above)"."""
    if reported is None:
        reported = reported_above()
    reported = {method_key(k): v for k, v in reported.items()}
    out = {}
    for arm in dict.fromkeys(arms):
        name, variant = _base_name(arm)
        sources = reported.get(method_key(name), {})
        for ref, most in WEAK_BELOW.items():
            ref_arm = variant.format(ref)  # a variant ("pFedMe (L)") is held against its own ("Local (L)") only
            if ref not in sources or ref_arm not in result.arms or ref_arm == arm:
                continue
            gap = float(result.paired(ref_arm, arm, metric).mean())  # on the seeds both ran
            if gap > most:
                src = sources[ref]  # the first source and how many more
                said = src[0] if len(src) == 1 else f"{src[0]} and {len(src) - 1} more table{'s' * (len(src) > 2)}"
                where = f"{variant.split(' · ')[0]}; " if " · " in variant else ""  # pFedMB's setting, said once
                shown, ref_shown = (name, ref) if where else (arm, ref_arm)
                out[arm] = (f"{shown} {gap:.1f} points below {ref_shown} "
                            f"({where}{said} report{'s' * (len(src) == 1)} it above)")  # fmt: skip
                break
    return out


def claim(
    text: str, result: SweepResult, a: str, b: str, *, paper: str = "", metric: str = "mean_acc",
    margin: float | None = None, resolution: float | None = None, unit: str = "samples", **row,
) -> dict:  # fmt: skip
    """One row of a chapter's claims table: the claim, the paper's number(s), ours (mean
    difference and 95 % CI over n seeds), the verdict word and the budget flag (``row``: the
    options of :func:`claim_row`; our comparator ``b``'s mean carries a :class:`PaperMargin`).
    Where the two arms ended on different budgets (training samples processed by the clients), both are
    read at the budget both reached, from their stored curves (:meth:`~pflkit.sweeps.SweepResult.common_budget`;
    ``unit="rounds"``: a claim about rounds of communication, whose arms differ in their work a round by
    design), and the notes say so; its budget flag is then each arm's rise where it is read.  An arm of the
    claim (of the sweep, for a claim against "the strongest" baseline) that :func:`weak_arms` marks makes
    the claim a *weak baseline* one (``explained``: arm -> why, from the chapter)."""
    common = result.common_budget(a, b, metric, unit) if hasattr(result, "common_budget") else None
    ours_b = None
    if common:
        diffs = [x - y for x, y, _, _ in common.values()]
        rounds = {arm: {s: c[i] for s, c in common.items()} for arm, i in ((a, 2), (b, 3))}
        up = {arm: result.rising_at(arm, r) for arm, r in rounds.items()}
        v = verdict(diffs, margin=margin, budget=_budget(up.values()), resolution=resolution)
        if v.budget:  # how far each arm still rose where it is read
            gains = {arm: np.mean(result.gains_at(arm, rounds[arm])) for arm, r in up.items() if r}
            row.setdefault("rising", ", ".join(f"{arm} +{g:.1f}" for arm, g in gains.items()))
        at = {arm: sorted(set(r.values())) for arm, r in rounds.items()}
        ends = {arm: int(max(result[arm, s]["final"]["round"] for s in common)) for arm in (a, b)}
        read = "; ".join(f"{arm} at round {'/'.join(map(str, at[arm]))}" + (f" of {ends[arm]}" if at[arm][-1] < ends[arm] else "")
                         for arm in (a, b))  # fmt: skip
        row["note"] = "; ".join(x for x in (row.get("note", ""), f"read at the budget both arms reached ({read})") if x)
        ours_b = float(np.mean([y for _, y, _, _ in common.values()]))
    else:
        v = result.compare(a, b, metric, margin, resolution)
        if v.budget:  # say how far the arms still moved: a budget-limited verdict is read with that in mind
            row.setdefault("rising", rising(result, a, b))
    row.setdefault("arms", arms_budget(result, a, b))
    if hasattr(result, "arms"):  # a claim against the strongest baseline: every arm it was picked from (b's variant)
        pool = [x for x in result.arms if _base_name(x)[1] == _base_name(b)[1]] if "strongest" in text else (a, b)
        row.setdefault("weak", weak_arms(result, pool, metric))
    if isinstance(paper, PaperMargin) and paper.values:  # our comparator's accuracy carries the paper's margin
        row.setdefault("ours_b", ours_b if ours_b is not None else interval(result.values(b, metric))[0])
    return claim_row(text, v, paper, **row)


def arms_budget(result: SweepResult, *arms: str) -> str:
    """The budget each arm of a claim ran, for the execution report: its rounds (the most over its
    seeds) and its validation gain over the last fifth (mean over seeds): "FedAvg 60 rounds (+0.4)"."""
    f = result.finals()
    parts = []
    for a in dict.fromkeys(arms):
        mine = f[f.arm == a]
        if len(mine):
            gain = mine.gain_last_fifth.mean() if "gain_last_fifth" in mine else float("nan")
            parts.append(f"{a} {int(mine['rounds'].max())} rounds ({gain:+.1f})" if gain == gain
                         else f"{a} {int(mine['rounds'].max())} rounds")  # fmt: skip
    return ", ".join(parts)


def rising(result: SweepResult, *arms: str) -> str:
    """How far each still-improving arm rose over its last fifth, for the budget flag: "FedAvg +1.2"."""
    f = result.finals()
    return ", ".join(f"{a} +{f[f.arm == a].gain_last_fifth.mean():.1f}" for a in arms if result.improving(a))


def still_moving(result: SweepResult, *arms: str) -> str:
    """How far each still-improving arm's validation accuracy rose over its last fifth (mean over seeds)."""
    f = result.finals()
    parts = []
    for a in arms:
        if result.improving(a):
            parts.append(f"{a} +{f[f.arm == a].gain_last_fifth.mean():.1f}")
    return ("still rising over the last fifth: " + ", ".join(parts) + " points") if parts else ""


def claim_row(
    text: str, v: Verdict, paper: str = "", *, ours: str | None = None, digits: int = 1, headline: bool = False,
    saturated: str = "", mechanism: dict | list[dict] | None = None, plan: pd.DataFrame | None = None, plan_name: str | None = None,
    note: str = "", rising: str = "", arms: str = "", ours_b: float | None = None, weak: dict | None = None,
    explained: dict | None = None,
) -> dict:  # fmt: skip
    """A claims-table row for any verdict of :func:`verdict` (per-seed differences of a quantity
    that is not one final metric of two arms: an ARI, a subspace angle...).  ``ours`` replaces
    the default description of the differences.

    ``paper``: the paper's number as text, or a :class:`PaperMargin` (the paper's margin for this
    comparison as numbers): then the row carries it to our scale (``ours_b``: our comparator's mean
    accuracy, %), judges the **size** beside the word (:func:`size_of`), tests a claim whose paper
    margin is below m as a tie (non-inferiority), and judges saturation by headroom: the carried margin
    below m leaves no room for the paper's effect (this replaces the ``saturated`` reason given).
    ``headline``: a claim the chapter's findings lead with; ``saturated`` (the reason of
    :func:`saturation`) makes it a labelled secondary claim that reads *not tested* (*contradicted*
    when its interval lies wholly beyond − m).  ``mechanism``: the row of the :func:`mechanism` check
    the claim rests on (or a list of them); a claim whose mechanism is inert keeps its word and carries
    the flag *mechanism inert*.  ``plan`` (:func:`seed_plan`, row ``plan_name`` or ``text``): an undecided claim
    short of its plan reads *underpowered*.  ``note``: anything else the reader needs; ``rising``: how
    far the arms of a budget-limited verdict still rose ("FedAvg +1.2", :func:`rising`); ``arms``: the
    rounds each arm ran and its last fifth's gain (:func:`arms_budget`); ``weak``: the arms
    :func:`weak_arms` marks, flagged *weak baseline*, each with the reason ``explained`` gives (arm ->
    why, citing the control run that shows it) or "not yet explained"."""
    unit = "" if v.unit == "points" else f" {v.unit}"
    pm = paper if isinstance(paper, PaperMargin) else None
    m = v.m if v.m is not None else v.margin
    tie, carried, size = "", (), ""
    if pm is not None and pm.margins:
        if v.test == "beats" and m is not None and pm.tie(m) and v.diffs:
            v = verdict(v.diffs, margin=m, budget=v.budget, unit=v.unit, test="tie")
            tie = (f"a tie in the paper (its margin {', '.join(f'{x:+.2f}' for x in pm.margins)} is below m = {m:g} "
                   f"on its own scale): tested as non-inferiority at −{m:g}")  # fmt: skip
        carried = pm.carried(ours_b)
        if v.test == "beats" and pm.values and m is not None:  # saturation by headroom replaces the ceiling rule
            s = 1.0 if sum(carried) >= 0 else -1.0
            room = max(s * c for c in carried)
            saturated = (f"saturated: the paper's effect carried to our error is {carried_text(carried)} {v.unit}, "
                         f"below m = {m:g}") if room < m else ""  # fmt: skip
    if ours is None:
        pct = "" if v.level == CONFIDENCE else f"{100 * v.level:.0f} %, "
        if v.n == 0:
            ours = "no paired runs"
        elif v.n < MIN_SEEDS:
            ours = f"{v.mean:+.{digits}f}{unit} ({v.n} seed{'s' if v.n > 1 else ''})"
        else:
            ours = f"{v.mean:+.{digits}f}{unit} [{v.lo:+.{digits}f}, {v.hi:+.{digits}f}] ({pct}{v.n} seeds)"
    word, need = underpowered(v, plan, plan_name or text)
    notes, flags = [x for x in (need, tie, note) if x], []
    if v.budget:
        flags.append(f"{BUDGET_LIMITED} ({rising} points over the last fifth)" if rising else v.flag)
    if saturated:
        notes.append(saturated)
        flags.append(SATURATED)
        headline = False
        beyond = v.n >= MIN_SEEDS and v.hi < -(m or 0.0)  # wholly beyond − m: contradicted whatever else
        word = "contradicted" if beyond else "not tested"
    elif carried and v.n >= MIN_SEEDS:
        lo, hi = v.ci
        size = size_of(lo, hi, carried, (1.0 if v.mean >= 0 else -1.0) if v.test == "comparable" else None)
        notes.append(size_note(size, pm, carried, lo, hi))
    weak, explained = weak or {}, explained or {}
    if weak:
        flags.append(WEAK)
        notes += [f"weak baseline: {why}: " + _explanation(explained, arm) for arm, why in weak.items()]
    for mech in [mechanism] if isinstance(mechanism, dict) else mechanism or []:
        notes.append(f"mechanism: {verdict_text(mech, bold=False)}, {mech['ours (a − b, 95 % CI)']}")
        if INERT in mech.get("flags", []) and INERT not in flags:
            flags.append(INERT)
    row = {"claim": text, "paper": paper, "ours (a − b, 95 % CI)": ours, "verdict": word, "budget": v.flag}
    return row | {
        "size": size,
        "carried": carried_text(carried) if carried else "",
        "arms": arms,
        "flags": flags,
        "notes": "; ".join(notes),
        "headline": headline,
        "kind": "claim",
        "weak": "; ".join(weak.values()),
        "unexplained": "; ".join(a for a in weak if _explanation(explained, a) == UNEXPLAINED),
        "_v": v,
        "_weak": weak,
    }


UNEXPLAINED = "not yet explained"


def _explanation(explained: dict, arm: str) -> str:
    """Why ``arm`` is weak: ``explained``'s entry for the arm ("pFedMe (L)"), else for its method
    ("pFedMe"), else :data:`UNEXPLAINED`."""
    return explained.get(arm, explained.get(_base_name(arm)[0], UNEXPLAINED))


def explain_weak(rows: list[dict], explained: dict) -> list[dict]:
    """The claims rows with their weak-baseline marks explained where ``explained`` (arm or method ->
    why, citing the control run) now says why: for reasons found after the claims were made (a
    tuning pilot run later on the page)."""
    out = []
    for row in rows:
        weak = row.get("_weak") or {}
        todo = [a for a in weak if a in row.get("unexplained", "").split("; ")]
        if todo:
            row = dict(row)
            for arm in todo:
                why = _explanation(explained, arm)
                row["notes"] = row["notes"].replace(
                    f"weak baseline: {weak[arm]}: {UNEXPLAINED}", f"weak baseline: {weak[arm]}: {why}"
                )
            row["unexplained"] = "; ".join(a for a in todo if _explanation(explained, a) == UNEXPLAINED)
        out.append(row)
    return out


def flagged(row: dict, flag: str) -> bool:
    """Whether a claims row carries ``flag`` (:data:`FLAGS`; the budget flag with its detail)."""
    return any(f == flag or f.startswith(flag + " (") for f in row.get("flags", []))


def verdict_text(row: dict, bold: bool = True) -> str:
    """A claim's verdict as every page prints it: its word, its size beside it where the paper gives a
    margin, then its flags ("**reproduces** · *smaller than the paper's* · *budget-limited (FedAvg +1.2
    points over the last fifth)*")."""
    word = f"**{row['verdict']}**" if bold else row["verdict"]
    flags = [f"*{f}*" if bold else f for f in [row.get("size", ""), *row.get("flags", [])] if f]
    return " · ".join([word, *flags])


def say(row: dict) -> str:
    """A claim as a page's sentence prints it: its row's word and flags (never the bare verdict's,
    which cannot know *underpowered*), then our difference: "**underpowered**, +0.7 [−1.6, +3.0] (3 seeds)"."""
    return f"{verdict_text(row)}, {row['ours (a − b, 95 % CI)']}"


def lead(row: dict, order: int, short: str, *, setting: str, why: str = "") -> dict:
    """``row`` marked as one of the claims its paper leads with (``order``: its place in the paper's own
    order), with what the results-at-a-glance table says of it: ``short``, the claim in a few words;
    ``setting``, ours in a few words beside the paper's; ``why``, one line on what the verdict rests on."""
    return row | {"lead": int(order), "short": short, "setting": setting, "why": why}


def mark_leads(rows: list[dict], leads: list[tuple[str, str, str, str]], *, every: bool = True) -> list[dict]:
    """``rows`` with the claims the paper leads with marked (:func:`lead`), in place and in the paper's
    order: ``leads`` holds, per lead claim, the start of its row's claim, the claim in a few words, our
    setting in a few words and the one line of why.  A start that names no row, or several, is an error:
    a lead claim is never dropped in silence (``every=False``: a profile that does not run some of
    them, such as `smoke`, skips those that name no row)."""
    from .errors import PflkitError

    for order, (start, short, setting, why) in enumerate(leads, 1):
        found = [i for i, r in enumerate(rows) if r["claim"].startswith(start)]
        if not found and not every:
            continue
        if len(found) != 1:
            raise PflkitError(f"{len(found)} claims start with {start!r}: a lead claim names exactly one")
        rows[found[0]] = lead(rows[found[0]], order, short, setting=setting, why=why)
    return rows


OWN = ("ours", "(ours", "our check", "our diagnostic", "beyond the paper")  # how a check of our own is named


def is_own(row: dict) -> bool:
    """A claims row that is a check of our own (a mechanism check, a control or split we chose, a
    question beyond the paper), not a claim of the paper: counted apart."""
    text = row["claim"].lower()
    return bool(row.get("own")) or row.get("kind") == "mechanism" or any(m in text for m in OWN)


def in_words(row: dict) -> str:
    """A claims-table row (:func:`claim_row`) as a page's sentence says it: the row's own word
    (*underpowered* included, which the bare :class:`Verdict` cannot know) with its flags, our
    difference and interval, then the notes."""
    extra = row.get("notes", "")
    return f"{verdict_text(row, bold=False)}, {row['ours (a − b, 95 % CI)']}" + (f" ({extra})" if extra else "")


def mechanism(text: str, v: Verdict, paper: str = "", *, control: str, **row) -> dict:
    """A mechanism check: "what makes the method different acts in these runs", judged by the
    rule on a diagnostic against its ``control`` (per-seed differences, the acting side > 0: trained
    vs frozen component, λ = 0, uniform weights, one cluster, a shared embedding).  It reads
    *reproduces* when it acts and carries the flag *mechanism inert* when it does not (no difference at its
    resolution, or the other side: its word, with the flag); a headline claim links to it
    (:func:`claim_row`) and carries the flag too."""
    r = claim_row(text, v, paper, **row)
    if r["verdict"] in ("no difference", "contradicted"):
        r["flags"] = [*r["flags"], INERT]
    r["notes"] = "; ".join(x for x in (f"against {control}", r["notes"]) if x)
    return r | {"kind": "mechanism", "headline": False}


CLAIM_COLUMNS = ["paper", "ours (a − b, 95 % CI)", "verdict", "notes"]


def claims_table(rows: list[dict]) -> pd.DataFrame:
    """The claims of a chapter as one table (the rows of :func:`claim`, :func:`claim_row`,
    :func:`mechanism`); a *notes* column only when a row has notes.  With ``PFLBOOK_CLAIMS_FILE``
    set (the book's build sets it) the rows are also written there, as data: claim, paper, ours,
    the mean, interval and seeds, verdict, budget flag, notes, headline, kind."""
    table = pd.DataFrame([{k: r.get(k, "") for k in ("claim", *CLAIM_COLUMNS)} | {"verdict": verdict_text(r, bold=False)}
                          for r in rows]).set_index("claim")  # fmt: skip
    write_claims(rows)
    return table if (table["notes"] != "").any() else table.drop(columns="notes")


def claims_data(rows: list[dict]) -> pd.DataFrame:
    """The claims as data: one row per claim with its numbers (what the execution report tallies)."""
    out = []
    for r in rows:
        v = r.get("_v")
        out.append({"claim": r["claim"], "kind": r.get("kind", "claim"), "headline": bool(r.get("headline", False)),
                    "paper": r.get("paper", ""), "ours": r.get("ours (a − b, 95 % CI)", ""),
                    "mean": getattr(v, "mean", float("nan")), "lo": getattr(v, "lo", float("nan")),
                    "hi": getattr(v, "hi", float("nan")), "seeds": getattr(v, "n", 0), "unit": getattr(v, "unit", ""),
                    "verdict": r["verdict"], "size": r.get("size", ""), "paper_margin": paper_numbers(r.get("paper")),
                    "carried": r.get("carried", ""), "test": getattr(v, "test", ""),
                    "m": getattr(v, "m", None) if getattr(v, "test", "") == "beats" else getattr(v, "margin", None),
                    "flags": "; ".join(r.get("flags", [])), "budget": r.get("budget", ""),
                    "notes": r.get("notes", ""), "lead": r.get("lead", ""), "short": r.get("short", ""),
                    "setting": r.get("setting", ""), "why": r.get("why", ""), "own": is_own(r),
                    "arms": r.get("arms", ""), "weak": r.get("weak", ""),
                    "unexplained": r.get("unexplained", "")})  # fmt: skip
    return pd.DataFrame(out)


def paper_numbers(paper) -> str:
    """A :class:`PaperMargin`'s margins as data: "+7.52 (Fashion_MNIST)"; "" for a paper's text only."""
    if not isinstance(paper, PaperMargin) or not paper.margins:
        return ""
    names = paper.datasets or ("",) * len(paper.margins)
    return "; ".join(f"{x:+.2f}" + (f" ({d})" if d else "") for x, d in zip(paper.margins, names))


def write_claims(rows: list[dict], path: str | None = None) -> None:
    """Append ``rows`` to ``path`` (default ``$PFLBOOK_CLAIMS_FILE``; nothing when unset) as CSV."""
    import os

    path = path or os.environ.get("PFLBOOK_CLAIMS_FILE")
    if not path:
        return
    from pathlib import Path

    data = claims_data(rows)
    f = Path(path)
    data.to_csv(f, mode="a", header=not f.exists() or f.stat().st_size == 0, index=False)


def words_text(rows) -> str:
    """The verdict words of claims-table ``rows``, counted, most frequent first, then the flags and the
    sizes apart: "3 reproduces, 1 inconclusive (flagged: 1 mechanism inert) (size: 2 as the paper's)"
    ("none" for no rows)."""
    from collections import Counter

    text = ", ".join(f"{n} {w}" for w, n in Counter(r["verdict"] for r in rows).most_common()) or "none"
    flags = [f"{n} {f}" for f in FLAGS if (n := sum(flagged(r, f) for r in rows))]
    sizes = [f"{n} {z}" for z in SIZES if (n := sum(str(r.get("size", "")) == z for r in rows))]
    return (
        text + (f" (flagged: {', '.join(flags)})" if flags else "") + (f" (size: {', '.join(sizes)})" if sizes else "")
    )


def tally(data: pd.DataFrame) -> dict:
    """Verdict words of a claims file (:func:`claims_data`), counted: ``{word: n}``, each flag apart
    (``{flag: n}``: a flagged claim keeps its word), and the share of claims (mechanism checks
    included) left inconclusive or underpowered."""
    words = data["verdict"].value_counts().to_dict()
    flags = data["flags"].astype(object).fillna("").astype(str) if "flags" in data else pd.Series([""] * len(data))
    counts = {f: int(flags.apply(lambda x, f=f: any(y.startswith(f) for y in x.split("; ") if y)).sum()) for f in FLAGS}
    open_ = int(data["verdict"].isin(["inconclusive", "underpowered"]).sum())
    sizes = data["size"].astype(object).fillna("").astype(str).value_counts().to_dict() if "size" in data else {}
    return {"claims": len(data), **{w: int(words.get(w, 0)) for w in WORDS if words.get(w)},
            **{f: n for f, n in counts.items() if n}, **{z: int(sizes[z]) for z in SIZES if sizes.get(z)}, "open": open_,
            "open_share": open_ / len(data) if len(data) else 0.0}  # fmt: skip


WORST_COLUMN = "worst 10 % of clients"  # paper_vs_ours's column beside the mean client accuracy


def paper_vs_ours(
    result: SweepResult, paper: dict[str, float] | pd.Series, metric: str = "mean_acc", label: str = "paper"
) -> pd.DataFrame:
    """Per arm: the paper's number (``paper``: arm -> value, missing arms blank) beside ours
    (mean ± 95 % CI over seeds, the seeds, whether still improving).  Where the arms ran different
    seeds (a claim's arms to its plan), an arm's cell says its seeds when they are more than the
    fewest, and a column gives every arm's mean on the seeds all of them ran: means a reader sets side
    by side are then on the same seeds, as a paired claim's are.  Beside the mean client accuracy, the mean
    over seeds of the worst 10 % of the clients' accuracy (:func:`pflkit.sweeps.worst_clients`)."""
    paper = dict(paper)
    seeds = {arm: set(result.values(arm, metric).dropna().index) for arm in result.arms}
    fewest = min((len(v) for v in seeds.values()), default=0)
    common = set.intersection(*seeds.values()) if seeds else set()
    uneven = len({len(v) for v in seeds.values()}) > 1
    rows = []
    for arm in result.arms:
        vals = result.values(arm, metric)
        cell = fmt_interval(vals)
        if uneven and len(seeds[arm]) > fewest:  # its own seeds, and its mean on those every arm ran
            on_common = interval(vals[vals.index.isin(common)])[0]
            cell += f" ({seeds_text(len(seeds[arm]))}; {on_common:.1f} on the {len(common)} all arms ran)"
        row = {"arm": arm, label: paper.get(arm, np.nan), f"ours {metric}": cell, "seeds": len(vals)}
        if metric == "mean_acc":  # how the clients the mean hides fare
            row[WORST_COLUMN] = round(float(result.values(arm, "worst10_acc").mean()), 1)
        rows.append(row | {"still improving": {True: "yes", False: "no", None: "not measured"}[result.improving(arm)]})
    return pd.DataFrame(rows).set_index("arm")
