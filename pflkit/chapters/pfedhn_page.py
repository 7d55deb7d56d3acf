"""What the pFedHN chapter's page says and draws from its runs: the tables beside the paper's (Tables 1 and 2,
the tuning pilot's), the claims table, the setup card, the sentences under each section and the glued
prose values, and the figures (2 to 7, the claims plot, Table 1's curves).  Data in, pages out: the
experiment (probes, runs) is :mod:`pflkit.chapters.pfedhn`, the claims :mod:`pflkit.chapters.pfedhn_claims`."""

from __future__ import annotations

import numpy as np
import pandas as pd
from IPython.display import Markdown

from ..claims import paper_vs_ours, say
from ..pages import METRIC_WORDS, folded, with_worst
from ..pages import claims_tally as tally  # noqa: F401  (the sentence under the claims table)
from ..plots import arm_palette, claims_plot  # importing it shows a notebook's figures with their text size
from ..tuning import HEADROOM_VAL
from ..verdicts import fmt_interval, interval
from .pfedhn import data_heading, data_label, hn_size_acc, paper_dataset, paper_label, paper_t1, with_budget

# ----------------------------------------------------------------------------- the page's tables


DATA = "FMNIST"  # our dataset in the page's headers: the notebook sets its first dataset's (:func:`data_label`)


HEADERS = {  # a table's raw column names -> what the page prints ("ours mean_acc": with DATA, see page_table)
    "arm": "method",
    "paper CIFAR-10": "paper, CIFAR-10 (%)",
    "paper CIFAR-100": "paper, CIFAR-100 (%)",
    "ours pooled, best-by-val (authors' code)": "ours, the authors' metric (%)",
    "ours pooled_acc@best_val": "ours, the authors' metric (%)",
    **METRIC_WORDS,  # the validation metric, as every chapter names it
    "alpha": "novel clients' α",  # Figures 2 and 7's means (fig2_means)
    "TV": "TV distance to the nearest training client",
    "gap": "generalization gap: novel − training clients' accuracy (points)",
    "acc_novel": "novel clients' accuracy (%)",
}


def page_table(table: pd.DataFrame, columns=None, digits: int = 1, small: bool = False, data: str | None = None):
    """A table as the page shows it: the index turned into columns, human headers (:data:`HEADERS`; our
    accuracy as "ours, ``data`` (%)", default :data:`DATA`), numbers rounded to ``digits``, "—" for a
    missing value, no index column (a pandas Styler); ``columns``: the raw names to keep (default every
    column); ``small``: in the glance tables' type, for a wide table in a fold."""
    d = table.copy() if isinstance(table.index, pd.RangeIndex) else table.reset_index()
    d = d.rename(columns={"index": " "})  # an unnamed index keeps its values, under a blank header
    if columns is not None:
        d = d[[c for c in d.columns if c in columns or c in table.index.names]]
    d = d.apply(lambda col: col.map(lambda v: f"{v:.{digits}f}" if isinstance(v, float) and v == v else v))
    headers = HEADERS | {"ours mean_acc": f"ours, {data or DATA} (%)"}
    d = d.astype(object).where(d.notna(), "—").rename(columns=headers)
    return styled(d, small)


def styled(table: pd.DataFrame, small: bool = False):
    """``table`` as a Styler the book's pages style like pandas' own tables (class ``dataframe``,
    cells padded), without the index column; ``small``: in the glance tables' type (0.75rem)."""
    props = "padding: 0.1rem 0.5rem; white-space: normal;" + (" font-size: 0.75rem;" if small else "")
    cells = {"selector": "td, th", "props": props}
    return table.style.hide(axis="index").set_table_attributes('class="dataframe"').set_table_styles([cells])


def setup_rows(p: dict) -> list[tuple[str, str, str]]:
    """The setup card's rows (what, ours, the paper's) from the chapter's parameters ``p`` (the
    notebook's upper-case names, with HR_CLASSES and HR_IMAGES, the headroom split the pilot chose)."""

    def images(n):
        return "all" if n is None else f"{n:,}"

    t1_train = images(p["T1_IMAGES"][0])
    datasets = p.get("DATASETS", ["fashion-mnist"])
    names = " and ".join({"fashion-mnist": "Fashion-MNIST"}.get(d, data_label(d)) for d in datasets)
    per_client = p.get("CLASSES_PER_CLIENT", {"fashion-mnist": 2})
    classes = ", ".join(f"{per_client[d]} classes a client" + (f" ({data_label(d)})" if len(datasets) > 1 else "")
                        for d in datasets)  # fmt: skip
    return [
        ("Data", f"{names}: {t1_train} training images for Tables 1 and 4, {images(p['TRAIN_IMAGES'])} "
                 "(stratified) elsewhere; each client tested on official test images of its class mix",
         "CIFAR-10, CIFAR-100, Omniglot"),
        ("Split", f"{classes}, shares U(.4, .6); the headroom split: "
                  f"{p['HR_CLASSES']} classes and {p['HR_IMAGES']} images a client; Dir(0.1) for novel clients",
         "2 classes a client (CIFAR-10), 10 (CIFAR-100); Dir(α) for novel clients"),
        ("Clients", f"Table 1: {', '.join(map(str, p['CLIENT_COUNTS']))}; Table 2: {p['BUDGET_CLIENTS']} in three "
                    f"sizes; Figure 2: {p['NOVEL_TRAIN']} + {p['N_NOVEL']} novel", "10, 50, 100; 75; 90 + 10 novel"),
        ("Model", "LeNet target; hypernetwork: embedding of ⌊1 + n/4⌋, 3 hidden layers of 100, a head per tensor",
         "the same"),
        ("Training", f"Algorithm 1, one client per hypernetwork step; Table 1: {p['CLIENT_UPDATES']} client updates of "
                     f"{p['T1_LOCAL_STEPS']} local steps, baselines {p['BASELINE_CLIENTS_PER_ROUND']} clients a round; "
                     f"elsewhere {p['UPDATES']} updates of {p['LOCAL_STEPS']} steps",
         "at most 5000 communication steps, K = 50"),
        ("Seeds", f"{', '.join(map(str, p['SEEDS']))} for every arm; a claim's arms to its seed plan, at most "
                  f"{p['SEED_CAP']}", ""),
    ]  # fmt: skip


def claims_markdown(table: pd.DataFrame) -> str:
    """The compact claims table of "What reproduced" as MyST Markdown, in the glance tables' small
    type: each claim with ours and its verdict (word and flags); then, in a fold, each claim with the
    paper's number and the notes.  ``table``: :func:`pflkit.claims.claims_table` (claims as index)."""
    from ..pages import markdown_table

    d = table.reset_index()
    short = d[["claim", "ours (a − b, 95 % CI)", "verdict"]].rename(columns={"ours (a − b, 95 % CI)": "ours (95 % CI)"})
    full = d[["claim", "paper", *(["notes"] if "notes" in d else [])]].rename(columns={"paper": "the paper"})
    return "\n".join([
        markdown_table(short, css="glance"),
        "",
        "::::{dropdown} With the paper's numbers and the notes",
        markdown_table(full, css="glance"),
        "::::",
    ])  # fmt: skip


def table1_rows(res, published, label: str = "CIFAR-10") -> pd.DataFrame:
    """The paper's metric (mean over clients, last round) beside the authors' code's (pooled over
    clients, at the round of best validation accuracy); ``published``: the paper's numbers by arm, on
    its dataset ``label``."""
    ours = paper_vs_ours(res, published, label=f"paper {label}")
    code = paper_vs_ours(res, {}, metric="pooled_acc@best_val")["ours pooled_acc@best_val"]
    return ours.join(code.rename("ours pooled, best-by-val (authors' code)"))


def table1_wide(table: pd.DataFrame, skip=(), label: str = "CIFAR-10"):
    """Table 1 laid out as the paper's (a Styler, no index column): one row per method, per client
    count ours (mean ± 95 % CI half-width over seeds, %) beside the paper's number on ``label``; "—"
    where an arm did not run.  ``table``: :func:`table1_rows` concatenated over client counts (index
    clients, arm); ``skip``: arms left out (shown in the full table)."""
    d = table[~table.index.get_level_values("arm").isin(list(skip))]
    ours = d["ours mean_acc"].astype(str).str.split(" (", regex=False).str[0]  # its seeds: in the full table
    paper = d[f"paper {label}"].map(lambda v: f"{v:.1f}" if v == v else "—")
    wide = pd.concat({"ours": ours, "paper": paper}, axis=1).unstack("clients")
    wide = wide.swaplevel(axis=1).sort_index(axis=1, level=0, sort_remaining=False)
    arms = list(dict.fromkeys(d.index.get_level_values("arm")))
    wide = wide.reindex(arms).rename_axis("method").reset_index()
    wide.columns = pd.MultiIndex.from_tuples([("", "method")] + [(f"{n} clients", w) for n, w in wide.columns[1:]])
    return styled(wide.fillna("—"))


def table2_table(res, *, hn, baselines, widths, groups, published, data="FMNIST", label="CIFAR-10") -> pd.DataFrame:
    """Our Table 2 (mean ± 95 % interval over seeds; in brackets the worst 10 % of the size's clients, mean
    over seeds) on ``data`` beside the paper's numbers on ``label`` (``published``: the paper's Table 2 rows,
    settings ending in "size S" etc.)."""
    acc = {w: [hn_size_acc(res, s, w, hn=hn, groups=groups) for s in res.seeds] for w in widths}
    worst = {w: np.array([hn_size_acc(res, s, w, hn=hn, groups=groups, worst=True) for s in res.seeds]) for w in widths}
    rows = {"pFedHN": {w: with_worst(fmt_interval(acc[w]), worst[w]) for w in widths}}
    rows |= {b: {w: with_worst(fmt_interval(res.values(f"{b} ({w})")), res.values(f"{b} ({w})", "worst10_acc").to_numpy())
                 for w in widths} for b in baselines}  # fmt: skip
    table = pd.DataFrame(rows).T.rename(columns=lambda w: f"ours {data} {w}")
    for w in widths:
        d = published[published.setting.str.endswith(f"size {w}")]
        table[f"paper {label} {w}"] = table.index.map(dict(zip(d.method, d.value)))
    return table


def table1_shown(t1: dict, paper, datasets, skip=()) -> list:
    """What the page shows of Table 1 (``t1``: dataset -> :func:`table1_runs`), dataset by dataset: its
    heading where there are several ``datasets``, the table as the paper's beside the paper's column for
    the same dataset (:func:`table1_wide`, without the arms ``skip``), and every arm in a fold."""
    shown = []
    for name in datasets:
        runs, label = t1[name]["runs"], paper_label(name)
        pub = {n: paper_t1(paper, n, paper_dataset(name)) for n in runs}
        table = pd.concat({n: table1_rows(res, pub[n], label) for n, res in runs.items()}, names=["clients"])
        every = folded(page_table(table, data=data_label(name)), "Every arm, with its seeds and the authors' metric")
        shown += [*map(Markdown, data_heading(name, datasets)), table1_wide(table, skip=skip, label=label), every]
    return shown


def table2_shown(t2: dict, datasets, published: dict, *, args: dict, groups) -> list:
    """What the page shows of Table 2 (``t2``, ``published``: dataset -> sweep, the paper's Table 2 rows of
    that dataset), dataset by dataset: its heading where there are several ``datasets``, and ours beside
    the paper's numbers of the same dataset (:func:`table2_table`)."""
    shown = []
    for name in datasets:
        table = table2_table(t2[name], **args, groups=groups, published=published[name], data=data_label(name),
                             label=paper_label(name))  # fmt: skip
        shown += [*map(Markdown, data_heading(name, datasets)), page_table(table.rename_axis("method"))]
    return shown


# ----------------------------------------------------------------------------- the page's sentences


def milder_text(res, published: dict[str, float], label: str = "CIFAR-10") -> str:
    """How far the headroom split ``res`` is from the paper's personalisation problem on ``label``: FedAvg's
    global model against Local, ours (mean over seeds) and the paper's (``published``: method → accuracy)."""
    arms = ("FedAvg", "Local")
    if not set(arms) <= set(res.arms) or not set(arms) <= set(published):
        return ""
    fa, lo = (interval(res.values(a))[0] for a in arms)
    milder = "a much milder" if (published["Local"] - published["FedAvg"]) - (lo - fa) > 10 else "a comparable"
    return (f"Our headroom split is {milder} personalisation problem than the paper's {label}: FedAvg's global model "
            f"scores {fa:.1f} % against Local's {lo:.1f} % (the paper: {published['FedAvg']:.1f} against "
            f"{published['Local']:.1f}), so a personalised method has less to gain here.")  # fmt: skip


def size_trend(published, ours: dict, widths) -> str:
    """One sentence on Table 2's sizes: for which methods the paper's accuracy rises from S to M to L
    (``published``: its Table 2 rows, settings ending in the size), and pFedHN's means per size on
    our runs (``ours``: size -> %)."""
    by_size = published.assign(size=published.setting.str[-1]).pivot(index="method", columns="size", values="value")
    by_size = by_size[list(widths)]
    rising_ = [m for m, r in by_size.iterrows() if r.is_monotonic_increasing]
    not_rising = {m: " / ".join(f"{v:.1f}" for v in r) for m, r in by_size.iterrows() if m not in rising_}
    return (
        "In the paper's Table 2 (CIFAR-10) accuracy rises from S to M to L for "
        + (", ".join(rising_) or "no method")
        + "; it does not for "
        + (", ".join(f"{m} ({v})" for m, v in not_rising.items()) or "any method")
        + ". pFedHN's mean over seeds on our runs (S / M / L): "
        + " / ".join(f"{ours[w]:.1f}" for w in widths)
        + "."
    )


def not_run(counts, only_smallest, name) -> str:
    """What of the paper's Table 1 this profile does not run (named, never shown as a number):
    client counts of the paper's 10, 50, 100 missing from ``counts``, and the arms ``only_smallest``
    (run at the first count only; ``name``: method -> its display name) at the others."""
    missing = [f"{n} clients (every arm)" for n in (10, 50, 100) if n not in counts]
    missing += [f"{name(m)} at {n} clients" for n in counts[1:] for m in only_smallest]
    if not missing:
        return "Every client count and arm of the paper's Table 1 is computed at this profile."
    return ("**Not run at this profile:** Table 1 with " + "; ".join(missing) + " (the `paper` profile runs them; "
            "nothing above stands for them, and the strongest baseline of a column is chosen among the arms it has).")  # fmt: skip


def tuned_shown(pilot, beside: pd.DataFrame, seed: int, carried=None) -> list:
    """What the page shows of the tuning pilot: its every setting (rates as written), the tuned baselines
    beside Table 2's arms (:func:`tuned_beside`, the hypernetwork first), and a sentence on what the one seed
    says; ``carried``: a sweep whose "Per-FedAvg" arm runs the tuned values on Table 1's protocol (its
    seeds: how many diverged, :func:`carried_text`)."""
    grid = pilot.table()
    grid[["learning rate", "personal rate"]] = grid[["learning rate", "personal rate"]].map(lambda v: f"{v:g}")
    b = beside.assign(method=beside.arm.str.replace(r" \([SML]\)$", "", regex=True))
    hn, width = b.iloc[0], b.arm.iloc[0].rsplit(" ", 1)[1]

    def acc(method: str, setting: str) -> pd.Series:
        return b[(b.method == method) & b.setting.str.startswith(setting)]["test accuracy (%)"]

    def pct(values: pd.Series, before: str = " ", after: str = "") -> str:  # "" where the pilot lacks the run
        return f"{before}{values.iloc[0]:.1f} %{after}" if len(values) else ""

    tuned = [f"{m}{pct(acc(m, 'tuned:'))}{pct(acc(m, 'shared'), ' (at the shared values: ', ')')}" for m in pilot.rate]
    others = b[(b.setting == "our tables'") & ~b.method.isin(list(pilot.rate))]
    best = others.loc[others["test accuracy (%)"].idxmax()] if len(others) else None
    text = (f"On seed {seed} at size {width} (test accuracy at each run's end): the tuned " + " and the tuned ".join(tuned)
            + pct(acc("pFedMe", "tuned, every"), "; pFedMe with every client's θ̃ from the current model, as Algorithm 1 has it, ")
            + f"; the hypernetwork {hn['test accuracy (%)']:.1f} %"
            + (f", and the best of our tables' other baselines, {best.arm}, {best['test accuracy (%)']:.1f} %" if best is not None else "")
            + ". One seed makes no claim. Table 2 on the headroom split runs pFedMe and Per-FedAvg at the tuned "
            "values; the other tables still run them at the shared ones until a pilot of their own, which their "
            "weak-baseline marks say." + (f" {carried_text(carried, 'Per-FedAvg')}" if carried is not None else "").rstrip())  # fmt: skip
    return [page_table(grid), page_table(beside), Markdown(text)]


def carried_text(res, arm: str) -> str:
    """Whether the tuned values carry to another protocol: on how many of its seeds ``arm``'s run in ``res``
    diverged, and the others' test accuracy at their end."""
    recs = {s: res[arm, s] for s in res.seeds if (arm, s) in res.records}
    if not recs:  # the control did not run (the dry run's arms)
        return ""
    bad = [s for s, r in recs.items() if r.get("diverged")]
    cfg = next(iter(recs.values()))["config"]
    ok = ", ".join(f"seed {s}: {100 * r['final']['mean_acc']:.1f} %" for s, r in recs.items() if s not in bad)
    return (f"They need not carry: at Table 1's {cfg['local_steps']} local steps a round ({cfg['clients']} clients, "
            f"headroom split) {arm} at the tuned values diverged on {len(bad)} of {len(recs)} seeds"
            + (f" ({ok})." if ok else "."))  # fmt: skip


def option_checks(res, n0: int, updates: int, clip: float, averaged: str, no_clip: str) -> list[str]:
    """Our two option checks at the first count (not claims of the paper), as bullets: Algorithm 1
    against the averaging option, and the authors' client gradient clip."""
    return [
        f"* Algorithm 1 against the averaging option ({n0} clients, the same {updates} client updates): "
        f"pFedHN − {averaged}: **{res.compare('pFedHN', averaged)}**.",
        f"* The authors' client gradient clip at norm {clip:g} ({n0} clients): "
        f"pFedHN − {no_clip}: **{res.compare('pFedHN', no_clip)}**.",
    ]


def headroom_choice(pilot_table, split: str, classes: int, images: int, updates: int, seed: int, target: float):
    """The sentence naming the headroom split chosen on the Local pilot's validation."""
    return (
        f"Chosen on validation: **{classes} classes and {images} training images per client** (Local "
        f"{pilot_table.loc[split, HEADROOM_VAL]:.1f} % on validation after {updates} client "
        f"updates, seed {seed}; the paper's Local: {target:.1f} %)."
    )


REGIME_TOLERANCE, REGIME_GAP = 3.0, 15.0  # points: Local this near the paper's, FedAvg at least this far below Local
REGIME_COLUMNS = {"Local": "Local, validation (%)", "FedAvg": "FedAvg's global model, validation (%)"}


def regime_table(res, target: float) -> pd.DataFrame:
    """The regime pilot's table (``res``: :func:`~pflkit.chapters.pfedhn.regime_arms`' runs), per split: Local's
    and FedAvg's validation accuracy (mean over seeds, %), their gap, and whether the split has the paper's
    structure: Local within :data:`REGIME_TOLERANCE` points of ``target`` (the paper's Local) and FedAvg's global
    model at least :data:`REGIME_GAP` points below Local."""
    f = res.finals().assign(split=lambda d: d.arm.str.split(" · ").str[0], who=lambda d: d.arm.str.split(" · ").str[1])
    t = f.pivot_table(index="split", columns="who", values="val_mean_acc", sort=False)[list(REGIME_COLUMNS)]
    gap, near = t.Local - t.FedAvg, (t.Local - target).abs() <= REGIME_TOLERANCE
    yes = np.where(near & (gap >= REGIME_GAP), "yes", "no")
    return (
        t.rename(columns=REGIME_COLUMNS)
        .rename_axis(None, axis=1)
        .assign(**{"Local − FedAvg": gap, "the paper's structure": yes})
    )


def regime_text(table: pd.DataFrame, paper: dict, classes: int = 2) -> str:
    """The sentence under the regime pilot's table: whether a split with the paper's structure exists (``paper``:
    the paper's Table 1 at 10 clients, method -> accuracy), and which."""
    found = table.index[table["the paper's structure"] == "yes"].tolist()
    want = (f"Local within {REGIME_TOLERANCE:g} points of the paper's {paper['Local']:.1f} % and FedAvg's global model at "
            f"least {REGIME_GAP:g} points below it (the paper: {paper['FedAvg']:.1f} %), {classes} classes a client")  # fmt: skip
    if not found:
        return (
            f"No split of this grid has the paper's structure ({want}): the headroom split above stays our Table 1's."
        )
    best = table.loc[found, "Local − FedAvg"].idxmax()
    local, fedavg = (table.loc[best, c] for c in REGIME_COLUMNS.values())
    where = (
        f"on *{best}*" if len(found) == 1 else f"on {', '.join(f'*{s}*' for s in found)}; the widest gap on *{best}*"
    )
    return (f"The paper's structure ({want}) exists {where}: Local reads {local:.1f} % and FedAvg's global model "
            f"{fedavg:.1f} % there on validation. Table 1 at 10 clients has not yet run there.")  # fmt: skip


def regime_shown(res, paper: dict) -> list:
    """The regime pilot as the laboratory notes show it (``res``: its runs; ``paper``: the paper's Table 1 at 10
    clients): a title, :func:`regime_table` and :func:`regime_text`."""
    table = regime_table(res, paper["Local"])
    return [Markdown("**The regime pilot.**"), page_table(table), Markdown(regime_text(table, paper))]


def headroom_plan_text(pilot_seeds: int, sd_upper: float, planned: int, cap: int, ran: int) -> str:
    """The sentence under the headroom split's seed plan."""
    return (
        f"The plan, from the pilot's {pilot_seeds} seeds (the spread pooled over the accuracy differences and, "
        f"apart, over the swap diagnostics, at its {100 * sd_upper:.0f} % upper bound): **{planned} seeds**, "
        f"at most {cap}; this build ran {ran}."
    )


def shrink_text(shrink_range: pd.DataFrame, every: str, spared: str) -> str:
    """The bullet on how much spectral normalization shrinks the client-specific part at initialisation."""
    e, s = shrink_range.loc[every], shrink_range.loc[spared]
    return (
        f"* At initialisation, normalizing every layer shrinks the client-specific part of the generated tensors "
        f"{e['min']:.1f}× to {e['max']:.1f}× (median {e['median']:.1f}×); sparing the heads, "
        f"{s['min']:.1f}× to {s['max']:.1f}×."
    )


def glue_params(g: dict, prop1: dict, extra: dict) -> dict:
    """The values the prose shows: the notebook's upper-case names ``g``, Proposition 1's problem
    as ``PROP1_<KEY>``, the regime pilot's thresholds, and ``extra``."""
    page = {"REGIME_TOLERANCE": REGIME_TOLERANCE, "REGIME_GAP": REGIME_GAP}  # the regime pilot's thresholds
    return (
        {k: v for k, v in g.items() if k.isupper()} | {f"PROP1_{k.upper()}": v for k, v in prop1.items()} | page | extra
    )


def images_text(images) -> str:
    """Table 1's images, in words."""
    if tuple(images) == (None, None):
        return "all the training and test"
    return f"{images[0]} training and {images[1]} test"


def steps_text(arms: dict, updates: int, averaged: str, per_round: int) -> str:
    """How many hypernetwork steps and baseline rounds Table 1's arms (at one count) took."""
    steps = {a: c.rounds for a, c in arms.items() if a.startswith("pFedHN")}
    return (
        f"pFedHN and pFedHN-PC took {steps['pFedHN']} hypernetwork steps on {updates} client updates; "
        f"the averaging option took {steps[averaged]} steps on the same {updates} updates. "
        f"The baselines ran {arms['FedAvg'].rounds} rounds of {per_round} clients."
    )


def comm_text(n0: int, n_hn: int, comm: pd.DataFrame) -> str:
    """The hypernetwork's size and pFedHN-PC's message size."""
    return (
        f"Hypernetwork parameters (pFedHN-PC, {n0} clients): {n_hn:,}; "
        f"pFedHN-PC's message (the feature extractor only): {comm.loc['pFedHN-PC', 'KB per message']:.0f} KB."
    )


def mix_text(v_mix: str, mech_pc: dict) -> str:
    """Figure 3's own-minus-other difference on Table 1's saturated runs, and where the claim is judged."""
    return (
        f"Own feature extractor minus another client's, raw accuracy, on these saturated runs: {v_mix}. The claim "
        f"is judged where Table 1 has the paper's headroom ({mech_pc['claim'].split(': ', 1)[0]} in the claims "
        f"table): {say(mech_pc)}."
    )


def budget_intro(extend_cap: int) -> str:
    """The sentence above Table 2's budget table on the headroom split."""
    return (
        f"**Budget of Table 2's arms** on this split: rounds run (a multiple of the first budget; an arm still "
        f"improving ran on with twice the rounds, at most {extend_cap}×), and the last fifth's validation gain "
        "(mean over seeds; still improving above 1 point):"
    )


def plans_intro(pilot_seeds: str, cap: int) -> str:
    """The sentence above the seed plans of every section (``pilot_seeds``: e.g. "3 seeds")."""
    return (
        f"**The seed plans** (the [rule](verdict-rule)'s step 5), from each section's pilot of {pilot_seeds}, "
        f"at most {cap} seeds a claim; a section's arms ran to the largest plan among its claims, or its claim's "
        "arms to their own."
    )


# ----------------------------------------------------------------------------- figures


def draw_fig2(novel: pd.DataFrame):
    """Figures 2 and 7: the generalization gap by the novel clients' α (pFedHN strong, Per-FedAvg
    muted), and pFedHN's novel-client accuracy against the TV distance to the nearest training client."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.8))
    per_seed_gap = novel.groupby(["method", "alpha", "seed"], as_index=False)[["TV to nearest", "gap"]].mean()
    sns.lineplot(data=per_seed_gap, x="alpha", y="gap", hue="method", marker="o", ax=axes[0],
                 palette={"pFedHN": "tab:red", "Per-FedAvg": "0.6"})  # fmt: skip
    axes[0].axhline(0, color="grey", lw=0.8)
    axes[0].set(xscale="log", xlabel="novel clients' α", ylabel="novel − training accuracy",
                title="Figure 2: generalization gap")  # fmt: skip
    hn = novel[novel.method == "pFedHN"]
    sns.scatterplot(data=hn, x="TV to nearest", y="acc_novel", hue="alpha", palette="viridis", s=40, ax=axes[1])
    axes[1].set(xlabel="TV distance to the nearest training client", ylabel="novel client's test accuracy",
                title="Figure 7: pFedHN, novel clients")  # fmt: skip
    fig.tight_layout()
    return fig


def fig2_means(novel: pd.DataFrame) -> pd.DataFrame:
    """Figure 2's means per method and α: TV to the nearest training client, the gap (points) and the
    novel clients' accuracy (%); ``novel``'s accuracies are fractions (:func:`~pflkit.chapters.pfedhn.novel_rows`)."""
    means = novel.groupby(["method", "alpha"]).agg(
        TV=("TV to nearest", "mean"), gap=("gap", "mean"), acc_novel=("acc_novel", "mean")
    )
    return means.assign(gap=100 * means["gap"], acc_novel=100 * means["acc_novel"]).reset_index()


def draw_fig3(mix, client_classes, class_names, seed: int):
    """Figure 3: each client's accuracy (rows) with each client's feature extractor (columns),
    row-normalised; the clients labelled by their classes."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    mix = np.array(mix)
    norm = (mix - mix.min(1, keepdims=True)) / np.maximum(np.ptp(mix, 1, keepdims=True), 1e-9)
    short = [c.split("/")[0] for c in class_names]
    labels = [" & ".join(short[c] for c in cl) for cl in client_classes]
    fig, ax = plt.subplots(figsize=(8.5, 7))
    sns.heatmap(norm, annot=True, fmt=".2f", cmap="viridis", xticklabels=labels, yticklabels=labels, ax=ax)
    ax.set_xlabel("feature extractor θ_j of client j")
    ax.set_ylabel("client i (classifier ω_i, test data)")
    ax.set_title(f"Figure 3 (seed {seed}), row-normalised")
    return fig


def draw_fig4(emb: dict, group_names, seed: int):
    """Figure 4: a t-SNE panel per set of client embeddings, coloured by each client's garment group."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from sklearn.manifold import TSNE

    fig, axes = plt.subplots(1, len(emb), figsize=(3.2 * len(emb), 3.4))
    for ax, (k, E) in zip(axes, emb.items()):
        xy = TSNE(n_components=2, perplexity=min(10, len(E) - 1), random_state=0, init="pca").fit_transform(E)
        sns.scatterplot(x=xy[:, 0], y=xy[:, 1], hue=list(group_names), s=45, ax=ax, legend=ax is axes[-1])
        ax.set(title=k, xticks=[], yticks=[])  # t-SNE's axes carry no unit
    axes[-1].legend(fontsize=10, loc="best")
    fig.suptitle(f"t-SNE of the client embeddings, seed {seed}", y=1.02)
    fig.tight_layout()
    return fig


def draw_fig56(res, arms5, arms6a, arms6b):
    """Figures 5 and 6: accuracy by round per number of local steps K, and the final accuracy (mean
    and 95 % interval over seeds) by embedding size and by hidden layers."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    h, fin = res.history(), res.finals()
    fig, axes = plt.subplots(1, 3, figsize=(9.5, 3.6), gridspec_kw={"width_ratios": [1.4, 1, 1]})
    sns.lineplot(data=h[h.arm.isin(arms5)], x="round", y="mean_acc", hue="arm", marker="o", palette="viridis",
                 ax=axes[0])  # fmt: skip
    axes[0].set(title="Fig. 5: local steps K", ylabel="mean test accuracy (%)")
    axes[0].legend(fontsize=10)
    for ax, group, title in ((axes[1], arms6a, "Fig. 6a: embedding size"), (axes[2], arms6b, "Fig. 6b: hidden layers")):
        d = fin[fin.arm.isin(group)]
        d = d.assign(value=d.arm.str.split("=").str[1])  # the option's value: the panel's title names the option
        sns.pointplot(data=d, x="value", y="mean_acc", color="tab:red", errorbar=("ci", 95), linestyles="none", ax=ax)
        ax.set(title=title, xlabel="", ylabel="")  # mean and 95 % interval over seeds, not bars from zero
    fig.tight_layout()
    return fig


def draw_claims(claims):
    """The claims plot (:func:`pflkit.plots.claims_plot`), or a one-line figure saying that no claim
    has an interval at this profile."""
    import matplotlib.pyplot as plt

    fig = claims_plot(claims)
    if fig is None:
        fig = plt.figure(figsize=(6.8, 0.6))
        fig.text(0.5, 0.5, "no claim has an interval at this profile", ha="center", fontsize=12)
    return fig


def draw_curves(t1: dict, t1_arms: dict):
    """Table 1's curves: per client count, every arm's accuracy by client updates (left) and the
    hypernetworks' by hypernetwork steps (right), one colour per arm in every panel."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    hist = pd.concat([with_budget(t1[n], t1_arms[n]).assign(clients=n) for n in t1])
    colours = arm_palette(hist["arm"], method="pFedHN")  # the paper's method in red, no other arm red
    fig, axes = plt.subplots(len(t1), 2, figsize=(9.5, 3.1 * len(t1) + 1.2), squeeze=False, sharey="row")
    for j, (n, d) in enumerate(hist.groupby("clients")):
        sns.lineplot(data=d, x="client updates", y="mean_acc", hue="arm", palette=colours, ax=axes[j, 0], legend=False)
        axes[j, 0].set(title=f"{n} clients", ylabel="mean test accuracy (%)")  # mean over seeds, 95 % band
        hn = d[d.arm.str.startswith("pFedHN")]
        sns.lineplot(data=hn, x="server steps", y="mean_acc", hue="arm", palette=colours, ax=axes[j, 1], legend=False)
        axes[j, 1].set(title=f"{n} clients: hypernetwork steps", xlabel="hypernetwork steps")
    handles = [plt.Line2D([], [], color=c, label=a) for a, c in colours.items()]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=10, frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig
