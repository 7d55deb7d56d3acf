"""The book's one verdict rule, and the claims tables built on it.

A claim compares two arms on the same seeds (same seed ⇒ same partition, initialisation and
client sampling).  :func:`verdict` takes the per-seed differences, their mean and 95 % t-interval:
*reproduces* when the interval excludes 0 on the paper's side, *contradicted* when it excludes 0
on the other side, *inconclusive* otherwise.  A "no difference" claim states a margin and
reproduces only when the whole interval lies in ±margin (contradicted when it lies wholly
outside).  Fewer than :data:`MIN_SEEDS` seeds: *not tested*.  A verdict resting on an arm that was
still improving at its end says *budget-limited* beside its word
(:func:`pflkit.sweeps.still_improving`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from .sweeps import SweepResult

MIN_SEEDS = 3  # a verdict needs at least this many paired seeds
CONFIDENCE = 0.95
WORDS = ("reproduces", "contradicted", "no difference", "inconclusive", "underpowered", "not tested")
SEED_CAP = 10  # the most seeds a claim is planned for at `book`
DECISION_FLOOR = 0.5  # points: no claim is planned to resolve less than this
SD_UPPER = 0.8  # the seed plan uses this one-sided upper confidence bound on the spread

# ----------------------------------------------------------------------------- the verdict rule


@dataclass
class Verdict:
    word: str  # one of WORDS
    mean: float  # mean paired difference (a − b), in the metric's unit × scale
    lo: float  # 95 % t-interval
    hi: float
    n: int  # paired seeds
    margin: float | None = None  # "no difference" claims
    budget: bool | None = False  # True: an arm was still improving; None: not measurable
    unit: str = "points"

    @property
    def flag(self) -> str:
        return {True: "budget-limited", None: "budget not measured", False: ""}[self.budget]

    def __str__(self) -> str:
        if self.n < MIN_SEEDS:
            what = f"{self.mean:+.1f} {self.unit} on {self.n} seed(s)" if self.n else "no paired runs"
            return f"not tested ({what}; a verdict needs {MIN_SEEDS} seeds)"
        text = f"{self.word} ({self.mean:+.1f} {self.unit}, 95 % CI [{self.lo:+.1f}, {self.hi:+.1f}], {self.n} seeds"
        text += f", margin ±{self.margin:g})" if self.margin is not None else ")"
        return text + (f", {self.flag}" if self.flag else "")


def verdict(
    diffs, *, margin: float | None = None, budget: bool | None = False, unit: str = "points",
    resolution: float | None = None,
) -> Verdict:  # fmt: skip
    """The book's one rule, on paired differences ``a − b`` (the paper's side is ``> 0``;
    with ``margin``, the claim is "no difference": ``|a − b| < margin``).  ``resolution`` (a
    directional claim's m): an interval that excludes neither side but lies inside ± m reads
    *no difference* (the claimed advantage is absent at that resolution) instead of
    *inconclusive*."""
    mean, half, n = interval(diffs)
    if n < MIN_SEEDS:
        return Verdict("not tested", mean, float("nan"), float("nan"), n, margin, budget, unit)
    lo, hi = mean - half, mean + half
    if margin is None:
        word = "reproduces" if lo > 0 else "contradicted" if hi < 0 else "inconclusive"
        if word == "inconclusive" and resolution is not None and -resolution < lo and hi < resolution:
            word = "no difference"
    else:
        word = (
            "reproduces"
            if -margin < lo and hi < margin
            else "contradicted"
            if lo > margin or hi < -margin
            else "inconclusive"
        )
    return Verdict(word, mean, lo, hi, n, margin, budget, unit)


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


def seed_plan(claims: dict, scale: dict | float = 1.0, *, cap: int = SEED_CAP, pool: bool = True) -> pd.DataFrame:
    """Per claim (``claims``: name -> its paired differences on the pilot seeds): the spread the
    plan assumes (the pooled spread of all the claims given, or the claim's own with ``pool=False``,
    raised to its :data:`SD_UPPER` upper bound), the decision scale (``scale``: one value, or one
    per claim; at least :data:`DECISION_FLOOR`), the seeds that bring the expected 95 % half-width
    below it, and the plan: that many seeds, or *underpowered (needs N seeds)* when ``cap`` seeds
    cannot decide it, before its runs are made."""
    shared = pooled_sd(claims.values()) if pool else None
    rows = []
    for name, diffs in claims.items():
        sd, dof = shared if pool else pooled_sd([diffs])
        m = max(scale.get(name, 1.0) if isinstance(scale, dict) else scale, DECISION_FLOOR)
        upper = sd_upper(sd, dof)
        need = seeds_needed(upper, m) if upper == upper else None
        plan = (f"{need} seeds" if need is not None and need <= cap
                else f"underpowered (needs {need} seeds)" if need is not None
                else "underpowered (needs more than 100 seeds)" if upper == upper else "not tested (no spread)")  # fmt: skip
        rows.append({"claim": name, "pilot seeds": sum(1 for x in diffs if x == x), "sd assumed": upper,
                     "scale (± points)": m, "seeds needed": need, "plan": plan})  # fmt: skip
    return pd.DataFrame(rows).set_index("claim")


def interval(values) -> tuple[float, float, int]:
    """Mean and 95 % t-interval half-width of values over seeds (half-width NaN below 2)."""
    from scipy import stats

    v = np.asarray([x for x in values if x == x], dtype=float)
    if len(v) < 2:
        return (float(v.mean()) if len(v) else float("nan")), float("nan"), len(v)
    return (
        float(v.mean()),
        float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))),
        len(v),
    )


def fmt_interval(values, digits: int = 1) -> str:
    """``mean ± half-width`` of values over seeds (``mean`` alone for one seed)."""
    m, h, n = interval(values)
    return f"{m:.{digits}f}" if n < 2 else f"{m:.{digits}f} ± {h:.{digits}f}"


def _budget(flags) -> bool | None:
    flags = list(flags)
    if any(f is True for f in flags):
        return True
    return None if any(f is None for f in flags) else False


# ----------------------------------------------------------------------------- tables for the chapters


def claim(
    text: str, result: SweepResult, a: str, b: str, *, paper: str = "", metric: str = "mean_acc",
    margin: float | None = None, resolution: float | None = None,
) -> dict:  # fmt: skip
    """One row of a chapter's claims table: the claim, the paper's number(s), ours (mean
    difference and 95 % CI over n seeds), the verdict word and the budget flag."""
    return claim_row(text, result.compare(a, b, metric, margin, resolution), paper)


def claim_row(text: str, v: Verdict, paper: str = "", *, ours: str | None = None, digits: int = 1) -> dict:
    """A claims-table row for any verdict of :func:`verdict` (per-seed differences of a quantity
    that is not one final metric of two arms: an ARI, a subspace angle...).  ``ours`` replaces
    the default description of the differences."""
    unit = "" if v.unit == "points" else f" {v.unit}"
    if ours is None:
        if v.n == 0:
            ours = "no paired runs"
        elif v.n < MIN_SEEDS:
            ours = f"{v.mean:+.{digits}f}{unit} ({v.n} seed{'s' if v.n > 1 else ''})"
        else:
            ours = f"{v.mean:+.{digits}f}{unit} [{v.lo:+.{digits}f}, {v.hi:+.{digits}f}] ({v.n} seeds)"
    return {"claim": text, "paper": paper, "ours (a − b, 95 % CI)": ours, "verdict": v.word, "budget": v.flag, "_v": v}


def claims_table(rows: list[dict]) -> pd.DataFrame:
    """The claims of a chapter as one table (the rows of :func:`claim`)."""
    return pd.DataFrame([{k: v for k, v in r.items() if k != "_v"} for r in rows]).set_index("claim")


def paper_vs_ours(
    result: SweepResult, paper: dict[str, float] | pd.Series, metric: str = "mean_acc", label: str = "paper"
) -> pd.DataFrame:
    """Per arm: the paper's number (``paper``: arm -> value, missing arms blank) beside ours
    (mean ± 95 % CI over seeds, the seeds, whether still improving)."""
    paper = dict(paper)
    rows = []
    for arm in result.arms:
        vals = result.values(arm, metric)
        rows.append(
            {"arm": arm, label: paper.get(arm, np.nan), f"ours {metric}": fmt_interval(vals), "seeds": len(vals),
             "still improving": {True: "yes", False: "no", None: "not measured"}[result.improving(arm)]}
        )  # fmt: skip
    return pd.DataFrame(rows).set_index("arm")
