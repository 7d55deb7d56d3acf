"""The book's one verdict rule, the size judgement beside it, and the seed plan: the rule on numbers.

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

The claims tables built on this rule (a claim's row, mechanism checks, the claims table and file) live in
:mod:`pflkit.claims`, which imports from here; nothing here imports from there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .results import PaperMargin

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


def plan_scale(carried=(), m: float | None = RESOLUTION, floor: float = DECISION_FLOOR) -> float:
    """The expected half-width a headline's seed plan aims at, fixed before any difference is read: half
    the paper's margin carried to our scale (the smallest over the paper's datasets), so that the
    interval cannot hold both 0 and the paper's effect and its size is decided whatever our mean; half
    of m for a claim without a carried margin, or whose margin is below m (a tie), so that the interval
    lies inside ± m or excludes 0 whatever the mean; at least ``floor``."""
    c = [abs(float(x)) for x in carried if x == x]
    base = min(c) if c and (m is None or min(c) >= m) else m
    return max(base / 2, floor) if base is not None else floor


def headline_plan(
    diffs, carried=(), m: float | None = RESOLUTION, cap: int = SEED_CAP
) -> tuple[int, int | None, float]:
    """A headline's seed plan: the seeds whose expected 95 % half-width reaches :func:`plan_scale`, on
    the spread of the claim's paired differences (raised to its :data:`SD_UPPER` upper bound; the
    spread only, never the mean), run within min(``cap``, max(:data:`HEADLINE_SEEDS`, that)).  Returns
    the seeds planned, the seeds needed (None: more than 100 or no spread yet) and the half-width."""
    sd, dof = pooled_sd([diffs])
    scale = plan_scale(carried, m)
    need = seeds_needed(sd_upper(sd, dof), scale) if dof else None
    return min(cap, max(HEADLINE_SEEDS, need if need is not None else cap)), need, scale


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
    resolution: dict | float | None = None, floor: dict | float = DECISION_FLOOR, headlines: dict | None = None,
) -> pd.DataFrame:  # fmt: skip
    """Per claim (``claims``: name -> its paired differences on the pilot seeds): the spread the
    plan assumes (the pooled spread of all the claims given, or the claim's own with ``pool=False``,
    raised to its :data:`SD_UPPER` upper bound), the distance the interval must clear
    (:func:`to_clear`, from the pilot's mean; at least :data:`DECISION_FLOOR`), the seeds whose
    expected 95 % half-width is that small, and the plan: that many seeds, or *underpowered (needs N
    seeds)* when ``cap`` seeds cannot decide it, before its runs are made.  A claim the pilot already
    decides (its verdict, with its ``margins`` / ``resolution``, is not *inconclusive*) is planned at
    the pilot's seeds.  ``floor``: one value, or one per claim (a claim in another unit than points).
    ``headlines``: the headline claims, name -> the paper's margins carried to our scale (() without one):
    each is planned by :func:`headline_plan`'s rule on the plan's spread, never on the pilot's mean, and its
    *seeds run* column holds the min(``cap``, max(:data:`HEADLINE_SEEDS`, needed)) seeds it runs."""
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
        if headlines is not None and name in headlines:  # a headline: sized to the carried margin, no mean read
            m = plan_scale(headlines[name], res if margins.get(name) is None else margins[name])
            need = seeds_needed(upper, m) if upper == upper else None
            runs = min(cap, max(HEADLINE_SEEDS, need if need is not None else cap)) if upper == upper else pilot.n
            plan = ("not tested (no spread)" if upper != upper else f"{runs} seeds (a headline)" if need is not None
                    and need <= runs else f"underpowered (needs {need or 'more than 100'} seeds): a headline runs {runs}")  # fmt: skip
            rows.append({"claim": name, "pilot seeds": pilot.n, "pilot mean": pilot.mean, "sd assumed": upper,
                         "to clear (points)": m, "seeds needed": need, "plan": plan, "seeds run": runs})  # fmt: skip
            continue
        need = seeds_needed(upper, m) if upper == upper and m == m else None
        if pilot.n >= MIN_SEEDS and pilot.word != "inconclusive":
            need, plan = pilot.n, f"none added: its pilot seeds decide it ({pilot.word} there)"
        else:
            plan = (f"{need} seeds" if need is not None and need <= cap
                    else f"underpowered (needs {need} seeds)" if need is not None
                    else "underpowered (needs more than 100 seeds)" if upper == upper else "not tested (no spread)")  # fmt: skip
        rows.append({"claim": name, "pilot seeds": pilot.n, "pilot mean": pilot.mean, "sd assumed": upper,
                     "to clear (points)": m, "seeds needed": need, "plan": plan})  # fmt: skip
    counts = ("pilot seeds", "seeds needed", "seeds run")  # whole numbers: "3", never "3.0"; missing: <NA>
    out = pd.DataFrame(rows).set_index("claim")
    return out.astype({c: "Int64" for c in counts if c in out.columns})


def count(x) -> int | None:
    """A seed count of a plan (:func:`seed_plan`) as an int, None where missing (NaN, None or <NA>)."""
    return None if x is None or pd.isna(x) else int(x)


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
    runs = count(plan.loc[name, "seeds run"]) if "seeds run" in plan.columns else None
    if runs is not None:  # a headline: its own plan, within the cap
        return min(runs, cap)
    n, p = count(plan.loc[name, "seeds needed"]), str(plan.loc[name, "plan"])
    ok = n is not None and n <= cap and not p.startswith(("underpowered", "not tested"))
    return n if ok else 0


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
    p, need = str(plan.loc[name, "plan"]), count(plan.loc[name, "seeds needed"])
    if p.startswith("underpowered"):
        return "underpowered", p.removeprefix("underpowered ").strip("()")
    if need is not None and v.n < need:
        return "underpowered", f"planned {need} seeds, {v.n} run"
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
