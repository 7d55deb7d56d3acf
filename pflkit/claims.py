"""The claims tables over sweep results: a claim's row from its verdict (word, size, flags, notes, plan),
mechanism checks, saturation and weak baselines, the claims table a chapter shows and the claims file the
book's build writes.  The rule on numbers they apply (the verdict words, the size judgement, the seed plan)
is :mod:`pflkit.verdicts`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .results import PaperMargin, method_key, reported_above
from .verdicts import (
    BUDGET_LIMITED,
    CEILING,
    CONFIDENCE,
    FLAGS,
    INERT,
    MIN_SEEDS,
    RESOLUTION,
    SATURATED,
    SIZES,
    WEAK,
    WEAK_BELOW,
    WORDS,
    Verdict,
    _budget,
    carried_text,
    count,
    fmt_interval,
    headline_plan,
    interval,
    seeds_text,
    size_note,
    size_of,
    underpowered,
    verdict,
)

if TYPE_CHECKING:
    from .sweeps import SweepResult


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
    planned = None
    if headline and not saturated and v.n >= MIN_SEEDS and v.diffs:  # the plan its runs followed, else its own
        planned = _headline_row(plan, plan_name or text) or headline_plan(v.diffs, carried, m)
    if ours is None:
        pct = "" if v.level == CONFIDENCE else f"{100 * v.level:.0f} %, "
        of = f" of {planned[0]} planned" if planned and v.n < planned[0] else ""
        if v.n == 0:
            ours = "no paired runs"
        elif v.n < MIN_SEEDS:
            ours = f"{v.mean:+.{digits}f}{unit} ({v.n} seed{'s' if v.n > 1 else ''})"
        else:
            ours = f"{v.mean:+.{digits}f}{unit} [{v.lo:+.{digits}f}, {v.hi:+.{digits}f}] ({pct}{v.n}{of} seeds)"
    word, need = underpowered(v, plan, plan_name or text)
    if planned and word in ("inconclusive", "underpowered"):  # a headline: its own plan decides the word
        word, need = _headline_word(v.n, planned, bool(carried) and min(abs(c) for c in carried) >= (m or 0))
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
        "plan": plan_text(planned),
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


def _headline_row(plan: pd.DataFrame | None, name: str) -> tuple | None:
    """A headline's plan as :func:`seed_plan` made it (``headlines``), as :func:`headline_plan` returns
    it; None where the plan has no such row."""
    if plan is None or name not in plan.index or "seeds run" not in plan.columns:
        return None
    runs, need = count(plan.loc[name, "seeds run"]), count(plan.loc[name, "seeds needed"])
    if runs is None:
        return None
    return runs, need, float(plan.loc[name, "to clear (points)"])


def _headline_word(n: int, planned: tuple, on_margin: bool) -> tuple[str, str]:
    """An undecided headline's word by its own plan (:func:`headline_plan`): *underpowered* when the
    cap cannot reach the planned half-width, or when it ran fewer seeds than planned; else
    *inconclusive*.  Returns the word and the note that says which."""
    seeds, need, scale = planned
    aim = f"a half-width of {scale:.2g} ({'half the carried paper margin' if on_margin else 'half of m'})"
    if need is None or need > seeds:
        return "underpowered", f"needs {need or 'more than 100'} seeds for {aim}; a headline runs {seeds} at most"
    if n < seeds:
        return "underpowered", f"planned {seeds} seeds for {aim}, {n} run"
    return "inconclusive", ""


def plan_text(planned: tuple | None) -> str:
    """A headline's seed plan as the claims files keep it: "8", or "10 (needs 58)" where the cap cannot
    reach it; "" for a claim without one."""
    if not planned:
        return ""
    seeds, need, _ = planned
    return f"{seeds}" + (f" (needs {need or 'more than 100'})" if need is None or need > seeds else "")


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
                    "carried": r.get("carried", ""), "plan": r.get("plan", ""), "test": getattr(v, "test", ""),
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
