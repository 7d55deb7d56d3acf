"""Text the book's pages share, written from the kit's constants so that the page states the
numbers the code uses: the verdict rule, stated once in the basics chapter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .claims import verdict_text, words_text
from .sweeps import IMPROVING_POINTS, RISING_POINTS
from .verdicts import (
    CEILING,
    CONFIDENCE,
    DECISION_FLOOR,
    EQUIVALENCE,
    HEADLINE_SEEDS,
    MIN_SEEDS,
    RESOLUTION,
    SD_UPPER,
    SEED_CAP,
    WEAK_BELOW,
)  # fmt: skip

if TYPE_CHECKING:
    import pandas as pd


def verdict_rule() -> str:
    """The verdict rule as Markdown, with the kit's numbers."""
    pct = f"{100 * CONFIDENCE:.0f} %"
    return f"""Every chapter ends with a table of the paper's claims and what our runs say about them. One rule,
written once in the kit (`pflkit.verdicts`), gives every verdict in the book:

1. **Paired arms.** A claim compares two arms (say the paper's method $A$ and a baseline $B$)
   run on the same seeds. A seed fixes the partition, the initialisation and the client sampling, so
   each seed $s$ gives one paired difference $d_s = \\mathrm{{acc}}_A(s) - \\mathrm{{acc}}_B(s)$, in
   points of accuracy.
2. **Interval.** Over $n$ seeds, the mean $\\bar d$ and its {pct} Student-$t$ interval
   $\\bar d \\pm t_{{0.975,\\,n-1}}\\, s_d / \\sqrt{{n}}$.
3. **Words.** For a claim that one arm beats another, with resolution $m$ ({RESOLUTION:g} point
   unless the claim states another): the interval wholly inside $\\pm m$ reads *no difference*,
   whether or not it excludes 0 (the claimed advantage is absent at that resolution, which is a
   finding); otherwise *reproduces* when it excludes 0 on the paper's side, *contradicted* when it
   excludes 0 on the other side, *inconclusive* when it excludes neither. A claim that two arms are
   *comparable* ($\\pm m$) is an equivalence test, two one-sided tests at 5 %: it *reproduces* when
   the {100 * EQUIVALENCE:.0f} % interval lies inside $\\pm m$ (the table then prints that interval,
   marked {100 * EQUIVALENCE:.0f} %) and is *contradicted* when it lies wholly outside. A "beats" claim
   whose paper margin is smaller than $m$ on the paper's own scale (pFedMB's +0.01) is a tie in the
   paper: it is tested as non-inferiority, *reproduces* when the interval lies above $-m$.
4. **Size beside the word.** Where the paper gives a number for the claim's own comparison, the
   claim carries it to our scale: the paper's relative reduction of error,
   $(e_B - e_A) / e_B$, applied to our comparator's error (an assumption: that the effect scales with
   the error there is to remove; our setting is easier than the papers'). Beside the word stands the
   **size**: *as the paper's* (our interval excludes 0 and holds the carried margin), *smaller than the
   paper's* (the carried margin lies above our interval), *larger than the paper's* (below it) or *size
   undetermined* (our interval holds both 0 and the carried margin). A paper that reports several
   datasets gives a range of carried margins; the size reads our interval against that range.
5. **Seeds are planned.** The first seeds of a claim are its pilot. From their spread (pooled over a
   section's like claims, raised to its one-sided {100 * SD_UPPER:.0f} % upper bound, since three seeds
   estimate a spread poorly) the kit computes how many seeds bring the expected half-width of the
   interval below the distance the pilot's mean must clear for a word to apply (0 for a direction,
   or the edge of $\\pm m$, whichever is nearer; at least {DECISION_FLOOR:g} point), at most {SEED_CAP}. The
   arms of the claim then run to that many seeds. A **headline's plan** reads no mean at all: it asks
   the expected half-width to reach half the paper's margin carried to our scale (so that the interval
   cannot hold both 0 and the paper's effect, and the size is decided whatever our mean), or half of
   $m$ without one, on the spread of the claim's seeds raised to the same bound; it runs
   min({SEED_CAP}, max({HEADLINE_SEEDS}, that)) seeds, and the claims tables print "5 of 8 planned seeds"
   where its runs have not reached it yet. *inconclusive* is kept for a claim that ran to its
   plan: a claim that {SEED_CAP} seeds cannot decide, or that ran fewer seeds than its plan, reads
   **underpowered**, with the seeds it needs or the seeds it ran. With fewer than {MIN_SEEDS} seeds
   there is no word at all (*not tested*): two seeds that agree in sign would pass a sign test one
   time in four by chance alone.
6. **Mechanism first.** What makes a method different (a router, a distillation weight, cluster
   moves, generated weights) is checked to act in the runs, against a control that removes it. A
   claim whose mechanism does not act keeps its word and carries the flag **mechanism inert** beside
   it: the word still says what the difference is, and the flag says that the method's own mechanism
   is not why.
   A **weak baseline** is a bug until shown otherwise: a claim one of whose arms a published table
   reports above Local (FedAvg's global model) while ours scores more than {WEAK_BELOW["Local"]:g} points
   below Local (more than {WEAK_BELOW["FedAvg"]:g} point below FedAvg) carries that flag, and its notes say
   why the arm lags, citing the control run that shows it, or that it is not yet explained.
7. **Saturation, by headroom.** A claim whose paper margin, carried to our scale, is below $m$ has no
   room to show the paper's effect here: it is **saturated** and reads *not tested* (*contradicted*
   only if its interval lies wholly beyond $-m$), and it is no headline. A claim without a numeric
   paper margin is saturated when its setting's strongest arm lies within {CEILING:g} points of 100 %,
   or all its arms within {RESOLUTION:g} point of each other. Its table stays, labelled.
8. **Budget.** The budget unit is the training samples the clients process (local steps × batch, or
   local epochs × their images, summed over the clients a round samples), with the bytes sent beside it.
   An arm is *still rising* when its validation gain over the last fifth of its rounds, pooled over
   its seeds, exceeds {RISING_POINTS:g} point with the lower bound of its 95 % interval above 0. An arm
   of a headline claim whose gain exceeds {IMPROVING_POINTS:g} point runs on, with twice its rounds at the
   same per-round protocol, up to the cap its chapter states. Where the two arms of a claim ended on
   different budgets, both are read at the budget both reached, from their stored curves, and the
   claim's notes say at which rounds. A verdict that rests on a rising arm carries the flag
   **budget-limited**, with how far the arm was still rising (points): it tells how fast the methods
   learn at our budget, not where they end up. When a run was not evaluated both before and inside its
   last fifth, the table says *budget not measured*.

The size and the flags (*budget-limited*, *saturated*, *mechanism inert*, *weak baseline*) stand beside the word
wherever it is printed, and the tallies count words, sizes and flags apart.

Choices (a round, a number of clusters or branches, a learning rate, an option, a split) are made on
the clients' validation splits only; the kit refuses a test metric for a choice. Runs are kept in a
result store (one JSON file per run, keyed by its configuration), so re-executing a chapter recomputes
only what changed, and a sweep interrupted half-way resumes where it stopped."""


GLANCE = {  # the results-at-a-glance table: claims data column -> header
    "short": "The paper claims",
    "paper": "The paper's margin",
    "setting": "Our setting",
    "ours": "Ours (95 % CI, seeds)",
    "verdict": "Verdict",
    "why": "Why",
}
RUNS = (
    "**Results at a glance.** Ours: Fashion-MNIST, LeNet-scale models, CPU budgets, {seeds} (the papers: CIFAR, EMNIST, FEMNIST or "
    "FedCelebA). The word judges direction; beside it, the size says whether our interval holds the paper's margin "
    "carried to our scale (its relative reduction of error). The paper's margin is for the claim's own comparison, "
    "with its strongest comparator named where that is another."
)


def glance(data) -> pd.DataFrame:
    """The results at a glance, from claims data (:func:`pflkit.claims.claims_data`, or a chapter's
    claims file): one row per claim the paper leads with (``lead``), in the paper's order, its word
    and flags together."""
    import pandas as pd

    if "lead" not in data:
        return pd.DataFrame(columns=list(GLANCE.values()))
    d = data[data["lead"].astype(str).str.strip() != ""]
    d = d.assign(_order=pd.to_numeric(d["lead"])).sort_values("_order", kind="stable")
    flags = d["flags"].fillna("").astype(str) if "flags" in d else pd.Series("", index=d.index)
    sizes = d["size"].fillna("").astype(str) if "size" in d else pd.Series("", index=d.index)
    out = d.assign(
        verdict=[
            " · ".join([w, *([z] if z else []), *[compact_flag(f) for f in fl.split("; ") if f]])
            for w, z, fl in zip(d["verdict"], sizes, flags)
        ]
    )
    notes = d["notes"].fillna("").astype(str) if "notes" in d else pd.Series("", index=d.index)
    saturated = [next((n for n in note.split("; ") if n.startswith("saturated:")), "") for note in notes]
    why = [s or w for s, w in zip(saturated, out["why"])]  # a saturated row says why it has no room first
    out = out.assign(paper=out["paper"].replace("", "—"), why=pd.Series(why, index=out.index).replace("", "—"))
    return out[list(GLANCE)].rename(columns=GLANCE).reset_index(drop=True)


_SAID = {  # a verdict word as the bottom line says it, singular and plural
    "reproduces": ("reproduces", "reproduce"),
    "no difference": ("shows no difference", "show no difference"),
    "contradicted": ("is contradicted", "are contradicted"),
    "inconclusive": ("is inconclusive", "are inconclusive"),
    "underpowered": ("is underpowered", "are underpowered"),
    "not tested": ("is not tested", "are not tested"),
}
_SIZE_SAID = {"as the paper's": "as large as the paper's", "smaller than the paper's": "smaller than the paper's",
              "larger than the paper's": "larger than the paper's", "size undetermined": "size undetermined"}  # fmt: skip


def bottom_line(data, paper: str, setting: str = "", *, runs: bool = True) -> str:
    """What a paper's lead claims came to here, in words a student can repeat (``data``: claims data,
    :func:`pflkit.claims.claims_data`, or a claims file): per word, how many lead claims got it, which
    (the table or figure, or the claim in a few words) and at what size, with the flags that qualify
    them; on what runs (``runs=False``: where a sentence above says it).  ``setting``: a sentence on how our
    setting differs from the paper's, where that matters for reading the words."""
    import re

    import pandas as pd

    from .verdicts import INERT, SATURATED, WEAK, WORDS

    if not len(data) or "lead" not in data:
        return ""
    d = data[data["lead"].astype(str).str.strip() != ""]
    if not len(d):
        return ""
    d = d.assign(_order=pd.to_numeric(d["lead"])).sort_values("_order", kind="stable")
    blank = pd.Series("", index=d.index)
    sizes = d["size"].fillna("").astype(str) if "size" in d else blank
    flags = d["flags"].fillna("").astype(str) if "flags" in d else blank
    shorts = d["short"].fillna("").astype(str) if "short" in d else d["claim"].astype(str)

    def label(short: str) -> str:  # "Table 1, 10 clients: pFedHN beats ..." -> "Table 1, 10 clients"
        m = re.match(r"^((?:Table|Figure)[^:]*):", short)
        return m.group(1) if m else short

    parts = []
    for word in WORDS:
        mine = d.index[d["verdict"] == word]
        if not len(mine):
            continue
        items = []
        for i in mine:
            said = [_SIZE_SAID.get(sizes[i], "")] + [f for f in (INERT, WEAK) if f in flags[i]]
            said = ", ".join(x for x in said if x)
            items.append(label(shorts[i]) + (f": {said}" if said else ""))
        why = ", too few seeds to decide" if word == "underpowered" else ""
        if word == "not tested" and flags[mine].str.contains(SATURATED).all():
            why = ", saturated, with no room for the paper's effect at our accuracies"
        parts.append(f"{len(mine)} {_SAID[word][len(mine) > 1]}{why} ({'; '.join(items)})")
    text = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    if flags.str.contains(INERT).any():  # what the flag means for the paper's claim
        text += ("; where the mechanism is inert, the word stands but the paper's explanation of it does not: the "
                 "method's own mechanism does not act in our runs")  # fmt: skip
    if flags.str.contains(WEAK).any():
        text += "; a weak baseline is ours, below Local or FedAvg where a published table has it above them"
    many = f"the {len(d)} lead claims" if len(d) > 1 else "the one lead claim"
    lead = f"Of {many} of {paper}" + (", on Fashion-MNIST with LeNet-scale models at CPU budgets" if runs else "")
    return f"{lead}: {text}." + (f" {setting}" if setting else "")


def claims_tally(claims: list[dict]) -> str:
    """The sentence under a claims table: the claims counted by verdict word, and how many rest on runs
    still improving at the end of their budget."""
    import pandas as pd

    words = pd.Series([r["verdict"] for r in claims]).value_counts().items()
    limited = sum(r["budget"] == "budget-limited" for r in claims)
    return (
        f"{len(claims)} claims: "
        + ", ".join(f"{n} {w}" for w, n in words)
        + f"; {limited} of them rest on runs still improving at the end of their budget."
    )


def compact_flag(flag: str) -> str:
    """A flag as a glance cell says it: the budget flag keeps how far its arms still rose, not their
    names ("budget-limited (FedAvg +1.2, Local +1.1 points over the last fifth)" → "budget-limited
    (+1.2, +1.1 points still rising)"); the claims table beside it names them."""
    import re

    if not flag.startswith("budget-limited ("):
        return flag
    rises = re.findall(r"\+\d+(?:\.\d+)?", flag)
    return f"budget-limited ({', '.join(rises)} points still rising)" if rises else "budget-limited"


def runs_sentence(data) -> str:
    """The sentence above a glance table: what every run of ours is, with the seeds the table's rows rest
    on (the lead claims of ``data``, where it marks them; else every claim)."""
    if len(data) and "lead" in data:
        data = data[data["lead"].astype(str).str.strip() != ""]
    seeds = [int(n) for n in data["seeds"] if int(n) > 0] if len(data) else []
    span = (
        "no seeds"
        if not seeds
        else f"{min(seeds)} seeds"
        if min(seeds) == max(seeds)
        else f"{min(seeds)}–{max(seeds)} seeds"
    )
    return RUNS.format(seeds=span) + plans_sentence(data)


def plans_sentence(data) -> str:
    """How many of the headlines among ``data`` ran to their own seed plan (:func:`pflkit.verdicts.headline_plan`,
    the claims file's *plan*: "8", or "10 (needs 58)"), as a sentence to follow the glance's; "" without plans."""
    import re

    plans = [(int(n), int(m[1])) for n, p in zip(data.get("seeds", []), data.get("plan", []))
             if (m := re.match(r"(\d+)", str(p)))]  # fmt: skip
    if not plans:
        return ""
    done = sum(n >= p for n, p in plans)
    return (f" {done} of the {len(plans)} headlines ran to their seed plan (sized to resolve the paper's margin "
            "carried to our scale, 5 to 10 seeds); the others say how many of their planned seeds ran.")  # fmt: skip


def markdown_table(table, css: str = "") -> str:
    """A DataFrame as a Markdown pipe table (no index; "—" for a missing value; "|" escaped); with
    ``css``, inside a MyST ``table`` directive of that class (the book's ``_static`` styles it)."""

    def cell(v) -> str:
        text = "—" if v is None or v != v or str(v) == "" else str(v)
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([f":::{{table}}\n:class: {css}\n", *lines, ":::"] if css else lines)


def findings(rows: list[dict], bullets: int = 5, own=None) -> str:
    """A chapter's findings as Markdown, from its claims (the rows of :func:`pflkit.claims.claim_row`
    and :func:`pflkit.claims.mechanism`), short enough for the top of a page: the results at a
    glance (the claims the paper leads with, :func:`pflkit.claims.lead`, in its order, whatever our
    verdict) under the sentence that says what our runs are; then the mechanism checks in one bullet;
    a chapter that marks no lead claim gets its headline claims as bullets instead (at most
    ``bullets``), or one bullet per verdict word.  Then the count of the paper's claims apart from our
    own checks (``own``: row -> bool, default :func:`pflkit.claims.is_own`), each word with its
    flags, and every lead claim with its numbers and notes in a folded list."""
    from collections import Counter

    from .claims import claims_data, is_own

    own = own or is_own

    def ours(r: dict) -> str:
        paper = f"; the paper: {r['paper']}" if r.get("paper") else ""
        return f"{verdict_text(r)}, ours {r['ours (a − b, 95 % CI)']}{paper}"

    leads = sorted((r for r in rows if r.get("lead")), key=lambda r: r["lead"])
    heads = [r for r in rows if r.get("headline")]
    mechs = [r for r in rows if r.get("kind") == "mechanism"]
    out = []
    if leads:
        data = claims_data(leads)
        out += [runs_sentence(data), "", markdown_table(glance(data), css="glance"), ""]
    if mechs:  # the numbers: in the folded list below
        out.append("* **Does the mechanism act?** " + "; ".join(_mechanism_words(mechs)) + ".")
    if not leads:
        room = bullets - len(out)
        shown = heads if len(heads) <= room else heads[: room - 1]
        out += [f"* {r['claim']}: {ours(r)}." for r in shown]
        if rest := heads[len(shown) :]:
            more = Counter(r["verdict"] for r in rest)
            words_more = ", ".join(f"{n} {w}" for w, n in more.most_common())
            out.append(f"* {len(rest)} more headline claims ({words_more}): in the list below.")
        if not heads and not mechs:  # no claim marked as the chapter's lead: what each word covers
            for w, n in Counter(r["verdict"] for r in rows).most_common(bullets):
                names = [r["claim"] for r in rows if r["verdict"] == w]
                out.append(f"* **{w}** ({n}): " + names[0] + (f"; and {n - 1} more" if n > 1 else "") + ".")

    mine = [r for r in rows if own(r)]
    theirs = [r for r in rows if not own(r)]
    paper = f"The paper's {len(theirs)} claim" + "s" * (len(theirs) != 1)
    checks = f"our {len(mine)} own check" + "s" * (len(mine) != 1)
    out += [
        "",
        f"{paper}: {words_text(theirs)}; {checks}: {words_text(mine)}." if mine else f"{paper}: {words_text(theirs)}.",
    ]
    lead = list({id(r): r for r in [*leads, *mechs, *heads]}.values())
    if lead:
        notes = [f"* {r['claim']}: {ours(r)}" + (f" ({r['notes']})" if r.get("notes") else "") + "." for r in lead]
        out += ["", ":::{dropdown} Every lead claim, with its notes", *notes, ":::"]
    return "\n".join(out)


def glue_findings(rows: list[dict], paper: str, *, setting: str = "", **options) -> None:
    """Glue a chapter's findings for the top of its page: ``findings`` (:func:`findings` of its claims
    ``rows``, with ``options``) and ``bottom_line``, the box's opening sentence (:func:`bottom_line`:
    what the lead claims of ``paper`` came to here; ``setting``: how our setting differs, where it matters)."""
    from IPython.display import Markdown
    from myst_nb import glue

    from .claims import claims_data

    glue("findings", Markdown(findings(rows, **options)), display=False)
    line = bottom_line(claims_data(rows), paper, setting)
    glue("bottom_line", Markdown(f"**The bottom line.** {line}" if line else ""), display=False)


def _mechanism_words(mechs: list[dict]) -> list[str]:
    """What each mechanism check tests, with its word: a check made in several settings (the same text
    after the setting's "Table 1, Non-IID_1: mechanism: " prefix) once, its words by setting."""
    checks: dict[str, list[tuple[str, str]]] = {}
    for r in mechs:
        where, _, what = r["claim"].rpartition(": ") if ": " in r["claim"] else ("", "", r["claim"])
        where, _, _ = where.partition(": mechanism")  # "Table 1, Non-IID_1: mechanism" -> "Table 1, Non-IID_1"
        checks.setdefault(what, []).append((where, verdict_text(r, bold=False)))
    out = []
    for what, found in checks.items():
        if len(found) == 1:
            out.append(f"{what}: **{found[0][1]}**")
            continue
        by_word: dict[str, list[str]] = {}
        for where, word in found:
            by_word.setdefault(word, []).append(where)
        out.append(f"{what}: " + ", ".join(f"**{w}** ({_settings(ws)})" for w, ws in by_word.items()))
    return out


def _settings(names: list[str]) -> str:
    """Settings named once each: ["Table 1, A", "Table 1, B", "Table 2"] -> "Table 1, A and B; Table 2"."""
    groups: dict[str, list[str]] = {}
    for name in names:
        head, sep, tail = name.partition(", ")
        groups.setdefault(head, []).append(tail if sep else "")
    parts = []
    for head, tails in groups.items():
        rest = [t for t in tails if t]
        parts += [head] * (len(rest) < len(tails)) + [f"{head}, {' and '.join(rest)}"] * bool(rest)
    return "; ".join(parts)


class Plain(str):
    """A string whose plain-text display has no quotes (what myst-nb's ``{glue:text}`` shows)."""

    def __repr__(self) -> str:
        return str(self)


def prose(value, none: str = "all") -> str:
    """A parameter's value as the text says it: ``[10, 50, 100]`` → "10, 50 and 100", ``None`` →
    ``none``, ``0.005`` → "0.005", ``(3000, 1000)`` → "3000 and 1000", ``{"mu": 0.01}`` → "mu = 0.01"."""
    if value is None:
        return none
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return prose([f"{k} = {prose(v, none)}" for k, v in value.items()]) if value else "none"
    if isinstance(value, (list, tuple)):
        parts = [prose(v, none) for v in value]
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1] if parts else "none"
    return str(value)


def claim_bullets(rows: list[dict], notes: bool = False) -> str:
    """Claims-table rows as the Markdown bullets that follow a table or figure, one way for every chapter:
    each claim, its word with its flags, our difference and interval (:func:`pflkit.claims.say`); with
    ``notes``, the row's notes too, in bold with the word (:func:`pflkit.claims.in_words`)."""
    from .claims import in_words, say

    return "\n".join(f"* {r['claim']}: " + (f"**{in_words(r)}**" if notes else say(r)) + "." for r in rows)


def with_worst(cell: str, worst) -> str:
    """A table cell of ours with the mean over seeds of its worst 10 % of clients' accuracy in brackets
    (``worst``: per seed, :func:`pflkit.sweeps.worst_clients`; none where no run has per-client accuracies)."""
    import numpy as np

    w = np.asarray(worst, dtype=float)
    return f"{cell} ({np.nanmean(w):.0f})" if np.isfinite(w).any() else cell


def glue_values(values: dict) -> None:
    """Glue each of ``values`` (name → value) as prose, for the page's ``{glue:text}`NAME` `` roles:
    the text then shows the values this execution used, not the names (``None`` reads "all")."""
    from myst_nb import glue

    for name, value in values.items():
        if value is None or isinstance(value, (bool, int, float, str, list, tuple, dict)):
            glue(name, Plain(prose(value)), display=False)


def missing_as_dash(html: str) -> str:
    """A table's HTML with every missing value (pandas' ``NaN``, ``None``, ``<NA>`` cells) shown as "—"."""
    import re

    return re.sub(r"(<td[^>]*>)\s*(NaN|None|&lt;NA&gt;)\s*(</td>)", r"\1—\3", html)


def dash_for_missing() -> None:
    """In a notebook: show every DataFrame's missing values as "—" (the pages' convention), keeping
    pandas' own HTML table otherwise.  Outside IPython it does nothing."""
    import pandas as pd

    try:
        ip = get_ipython()  # type: ignore[name-defined]  # noqa: F821  (defined inside IPython only)
    except NameError:
        return
    ip.display_formatter.formatters["text/html"].for_type(pd.DataFrame, lambda df: missing_as_dash(df._repr_html_()))


def flat_html(table) -> str:
    """``table`` as notebook HTML with one header row: a named index (or several) shown as the first
    columns under their names, an unnamed one under a blank header, a default 0..n−1 index not at all;
    every cell whole."""
    import pandas as pd

    if not isinstance(table, pd.DataFrame):  # a Styler (a page table, its index already hidden)
        return table._repr_html_()
    if not (isinstance(table.index, pd.RangeIndex) and table.index.name is None):
        blank = [" " if name is None else name for name in table.index.names]  # an unnamed level: a blank header
        table = table.set_axis(table.index.set_names(blank)).reset_index(allow_duplicates=True)
    with pd.option_context("display.max_colwidth", None):  # a cell is never cut ("…") where the page wraps it
        return table.to_html(index=False, notebook=True, justify="left")


class Folded:
    """A table shown folded under a one-line title (an HTML ``<details>``): the full grid of a pilot,
    a wide table, anything the reader may open but need not read.  Missing values read "—"."""

    def __init__(self, table, title: str):
        self.table, self.title = table, title

    def _repr_html_(self) -> str:
        import html

        return (
            f"<details><summary>{html.escape(self.title)}</summary>{missing_as_dash(flat_html(self.table))}</details>"
        )


def folded(table, title: str) -> Folded:
    """``table`` (a DataFrame) folded under ``title``; display it like a table."""
    return Folded(table, title)


class Fitted(Folded):
    """A table cut to the columns that fit the page's column, with the whole table folded below it."""

    def __init__(self, table, columns, title: str):
        super().__init__(table, title)
        self.columns = list(columns)

    def _repr_html_(self) -> str:
        return missing_as_dash(flat_html(self.table[self.columns])) + super()._repr_html_()


# the kit's metric columns as every page names them (pilot tables, plans, the chapters' own tables)
METRIC_WORDS = {"val_mean_acc": "validation accuracy (%)", "val_pooled_acc": "validation micro acc (%)"}
OPTION_WORDS = {"lr": "learning rate", "lam": "λ", "c_lr": "η₃", "rho": "ρ", "mu": "μ", "alpha": "α",
                "personal_lr": "personal rate", "eps1": "ε₁"}  # fmt: skip


def pilot_view(table, words: dict | None = None):
    """A pilot's table (:meth:`pflkit.tuning.Tuning.table` or ``summary``, or several concatenated) in the page's
    words: the metric column named in words (:data:`METRIC_WORDS`), each setting's options too ("c_lr=0.01,
    rho=0.5" → "η₃ = 0.01, ρ = 0.5"; :data:`OPTION_WORDS`, then ``words``), in the index and the "chosen" column."""
    import re

    names = OPTION_WORDS | (words or {})

    def plain(value):
        if not isinstance(value, str):
            return value
        return re.sub(r"(\w+)=([^,\s]+)", lambda m: f"{names.get(m[1], m[1])} = {m[2]}", value)

    out = table.rename(columns=METRIC_WORDS).rename(index=plain)
    return out.assign(chosen=out["chosen"].map(plain)) if "chosen" in out else out


def fit(table, columns, title: str = "Every column") -> Fitted:
    """``table`` shown with ``columns`` only (at most six beside the index fit the page), and
    whole in a fold titled ``title``."""
    return Fitted(table, columns, title)


def budget_table(report) -> pd.DataFrame:
    """The budget report of :func:`~pflkit.sweeps.until_flat` as a page shows it: one row per
    headline arm, its rounds (and the multiple of its first budget), the last fifth's validation
    gain in points (mean over seeds) and whether it still improved at its end."""
    words = {True: "yes", False: "no", None: "not measured"}
    return report.assign(**{"still improving": report["still improving"].map(words)}).set_index("arm").round(1)


def setup_card(rows: list[tuple[str, str, str]], paper: str = "the paper") -> str:
    """A chapter's setup card as Markdown: one short table of what every run is, ours beside the
    paper's (``rows``: what, ours, the paper's; "" for a row the paper leaves open)."""
    import pandas as pd

    return markdown_table(pd.DataFrame(rows, columns=[" ", "ours", paper]), css="glance")


def compact_claims(table) -> Fitted:
    """A chapter's claims table (:func:`pflkit.claims.claims_table`) as its "What reproduced"
    section shows it: each claim with ours and the verdict; the paper's number and the notes in
    the fold below."""
    return fit(table, ["ours (a − b, 95 % CI)", "verdict"], "With the paper's numbers and the notes")
