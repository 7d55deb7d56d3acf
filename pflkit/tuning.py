"""Choices made on validation: grids of arms, pilots that choose per method by mean validation
accuracy (growing a one-axis grid past an edge its choice sits at), a fallback for an arm that
diverges, and FeSEM's §5.2 scan of K."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .engine import Federation, RunConfig, run
from .errors import PflkitError
from .methods import get_method
from .store import Store, canonical
from .sweeps import SweepResult, sweep
from .verdicts import fmt_interval, seeds_text

# ----------------------------------------------------------------------------- tuning on validation


def grid(label: str, cfg: RunConfig, options: dict | None = None, **axes) -> dict[str, RunConfig]:
    """Arms of a validation pilot: ``cfg`` at every combination of ``axes`` (each a RunConfig
    field, e.g. ``lr=[0.01, 0.05]``, or an option of the config's method, e.g.
    ``alpha_lr=[0.1, 1.0]``), named ``"<label> · lr=0.01, alpha_lr=0.1"``.  A name that is both a
    field and an option (Per-FedAvg's ``alpha`` and the partition's Dirichlet ``alpha``) must say
    which: ``options={"alpha": [...]}`` holds axes that are method options."""
    method = get_method(cfg.method)
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    options = dict(options or {})
    for name in options:
        if name not in method.options:
            raise PflkitError(f"{name!r} is not an option of {cfg.method}")
    for name in axes:
        if name not in fields and name not in method.options:
            raise PflkitError(f"{name!r} is neither a RunConfig field nor an option of {cfg.method}")
        if name in fields and name in method.options:
            raise PflkitError(
                f"{name!r} is a RunConfig field and an option of {cfg.method}: pass options={{{name!r}: ...}}"
            )
        if name in options:
            raise PflkitError(f"{name!r} is given twice")
    arms = {}
    names = list(axes) + list(options)
    as_option = {n for n in axes if n not in fields} | set(options)
    for values in itertools.product(*(axes.get(n, options.get(n)) for n in names)):
        setting = dict(zip(names, values))
        opts = {**cfg.options, **{k: v for k, v in setting.items() if k in as_option}}
        c = dataclasses.replace(cfg, options=opts, **{k: v for k, v in setting.items() if k not in as_option})
        arms[
            f"{label} · " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in setting.items())
        ] = c
    return arms


@dataclass
class Tuning:
    """A validation pilot: its runs, and per label the arm (and config) of best validation metric."""

    result: SweepResult
    grids: dict[str, dict[str, RunConfig]]
    by: str
    chosen: dict[str, str]
    first: dict[str, str] | None = None  # tune_axis: per label, the arm chosen on the grid it started from
    start: dict[str, list[str]] | None = None  # ... and that grid's arms
    shared: bool = False  # tune_axis(shared=True): one value for every label, ranked on the labels' mean

    def config(self, label: str) -> RunConfig:
        return self.grids[label][self.chosen[label]]

    def ranked(self, label: str) -> list[RunConfig]:
        """The label's pilot configs from the best mean validation metric down (diverged ones left out);
        in a shared pilot, the grid's positions by the metric averaged over the labels (a position where
        some label diverged left out), the order in which it chose."""
        if self.shared:
            scores = _shared_scores(self)
            arms = list(self.grids[label])
            return [self.grids[label][arms[i]] for i in sorted(scores, key=scores.get, reverse=True)]
        return [self.grids[label][a] for a in self.result.ranked(self.grids[label], self.by)]

    def table(self) -> pd.DataFrame:
        """Every pilot arm: the validation metric (mean ± 95 % CI over seeds), whether it was
        chosen, and whether a chosen value sits at the edge of a one-axis grid (a wider grid might
        choose otherwise)."""
        rows = []
        for label, arms in self.grids.items():
            names = list(arms)
            for i, arm in enumerate(names):
                chosen = arm == self.chosen[label]
                edge = chosen and len(names) > 2 and i in (0, len(names) - 1) and ", " not in arm.split(" · ", 1)[1]
                diverged = self.result.values(arm, "diverged").any()
                value = "diverged" if diverged else fmt_interval(self.result.values(arm, self.by))
                rows.append({"method": label, "setting": arm.split(" · ", 1)[1], self.by: value,
                             "chosen": "yes" if chosen else "", "at the grid's edge": "yes" if edge else ""})  # fmt: skip
        return pd.DataFrame(rows).set_index(["method", "setting"])

    def summary(self) -> pd.DataFrame:
        """One row per method: the chosen setting, its validation metric, and whether it sits at the
        edge of its grid (the whole grid is :meth:`table`)."""
        t = self.table().reset_index()
        t = t[t["chosen"] == "yes"].set_index("method")
        return t[["setting", self.by, "at the grid's edge"]].rename(columns={"setting": "chosen"})

    def edges(self) -> pd.DataFrame:
        """Per label of a :func:`tune_axis` pilot: the choice on the grid it started from and whether
        it sat at that grid's edge, then the choice after the grid grew and whether it still does."""
        rows = {}
        for label, arms in self.grids.items():
            first = (self.first or self.chosen)[label]
            start, now = (self.start or self.grids)[label], list(arms)
            rows[label] = {
                "chosen first": first.split(" · ", 1)[1],
                "at its edge first": len(start) > 2 and first in (start[0], start[-1]),
                "chosen": self.chosen[label].split(" · ", 1)[1],
                "at its edge": len(now) > 2 and self.chosen[label] in (now[0], now[-1]),
            }
        return pd.DataFrame.from_dict(rows, orient="index")


def tune(grids: dict[str, dict[str, RunConfig]], seeds, store, *, by: str = "val_mean_acc", **sweep_kw) -> Tuning:
    """Run every pilot grid (``{label: grid(...)}``) over ``seeds`` and choose, per label, the arm
    of best mean ``by`` (a validation metric; never a test metric)."""
    if not by.startswith("val_"):
        raise PflkitError(f"choices are made on validation metrics (val_...), not on {by!r}")
    arms = {a: c for g in grids.values() for a, c in g.items()}
    result = sweep(arms, seeds, store, **sweep_kw)
    chosen = {label: result.select(list(g), by=by) for label, g in grids.items()}
    return Tuning(result, grids, by, chosen)


def tune_axis(
    configs: dict[str, RunConfig],
    axis: str,
    values,
    seeds,
    store,
    *,
    by: str = "val_mean_acc",
    extend: int = 1,
    shared: bool = False,
    **sweep_kw,
) -> Tuning:
    """The pilot of one numeric axis (``lr``, say) for every ``{label: config}``, with the edge rule.

    Every label starts on the same ``values`` (or on its own: ``values`` a ``{label: values}``
    dict).  Where a label's choice is an end of a grid of three or more values, that label's grid
    gains the next value past that end, one geometric step (the ratio of the two values at that
    end, rounded to one significant digit), and the pilot chooses again; at most ``extend`` steps per label.  A choice at the edge is thus either confirmed by a
    worse value beyond it, or moves outward; one still at the edge after ``extend`` steps is
    flagged by :meth:`Tuning.table`.  Runs already made are read back from ``store``.

    ``shared``: one value for every label (methods that must differ in nothing else), the value of
    best validation metric averaged over the labels (each label's mean over ``seeds``; a value at
    which some label diverged is never chosen); the grid grows as one."""
    own = values if isinstance(values, dict) else dict.fromkeys(configs, values)
    if shared and len({tuple(sorted(v)) for v in own.values()}) > 1:
        raise PflkitError("a shared choice needs one grid of values for every label")
    grids_values = {label: sorted(own[label]) for label in configs}
    if shared:  # one list, grown once for all
        common = next(iter(grids_values.values()))
        grids_values = dict.fromkeys(configs, common)
    first = None
    for step in range(extend + 1):
        t = tune({label: grid(label, cfg, **_axis(cfg, axis, grids_values[label])) for label, cfg in configs.items()},
                 seeds, store, by=by, **sweep_kw)  # fmt: skip
        if shared:
            t.chosen = _shared_choice(t)
        if first is None:
            first, start = dict(t.chosen), {label: list(g) for label, g in t.grids.items()}
        grown = False
        for label, v in grids_values.items():
            i = list(t.grids[label]).index(t.chosen[label])
            if step == extend or len(v) < 3 or 0 < i < len(v) - 1 or (shared and grown):
                continue
            nxt = v[-1] * v[-1] / v[-2] if i == len(v) - 1 else v[0] * v[0] / v[1]
            nxt = float(f"{nxt:.1g}")
            v.insert(len(v) if i else 0, nxt)
            grown = True
        if not grown:
            break
    t.first, t.start, t.shared = first, start, shared
    return t


@dataclass
class Rates:
    """A learning rate × personal rate pilot searched one axis at a time (:func:`tune_rates`), per label."""

    first: dict[str, Tuning]  # every personal rate at the starting learning rate (grown past an edge)
    second: dict[str, Tuning]  # every learning rate at the personal rate chosen first (grown past an edge)
    rate: dict[str, str]  # per label, the option that is its personal rate

    def config(self, label: str) -> RunConfig:
        return self.second[label].config(label)

    def settings(self) -> dict[str, dict]:
        """Per method the pilot tuned, the values chosen: ``{"lr": …, "options": {…}}`` (:func:`with_tuned`)."""
        return {cfg.method: {"lr": cfg.lr, "options": dict(cfg.options)} for cfg in map(self.config, self.rate)}

    def table(self) -> pd.DataFrame:
        """Every setting the pilot ran, once, per label: learning rate, personal rate, the validation
        metric (mean ± 95 % CI over seeds) and whether it is the one chosen."""
        rows = {}
        for label in self.rate:
            for t in (self.first[label], self.second[label]):
                for arm, cfg in t.grids[label].items():
                    key = (label, cfg.lr, cfg.options[self.rate[label]])
                    diverged = t.result.values(arm, "diverged").any()
                    rows[key] = {"method": label, "learning rate": cfg.lr, "personal rate": key[2],
                                 t.by: "diverged" if diverged else fmt_interval(t.result.values(arm, t.by)),
                                 "chosen": "yes" if cfg == self.config(label) else ""}  # fmt: skip
        order = ["method", "learning rate", "personal rate"]
        return pd.DataFrame(rows.values()).sort_values(order, ascending=[True, False, False], ignore_index=True)


def tune_rates(
    configs: dict[str, RunConfig], rate: dict[str, str], lrs, rates, seeds, store, *, start_lr: float, extend: int = 1,
    **sweep_kw,
) -> Rates:  # fmt: skip
    """A two-axis grid, the learning rate × a method's personal rate (pFedMe's ``personal_lr``,
    Per-FedAvg's ``alpha``: ``rate`` maps each config's method to its option), searched one axis at a time
    on validation, each axis grown past an edge (:func:`tune_axis`, ``extend`` steps): every personal rate
    of ``rates`` at ``start_lr``, then every learning rate of ``lrs`` at the personal rate chosen.  Runs
    already made are read back from ``store``."""
    first, second, option = {}, {}, {}
    for label, cfg in configs.items():
        option[label] = rate[cfg.method]
        start = {label: dataclasses.replace(cfg, lr=start_lr)}
        first[label] = tune_axis(start, option[label], rates, seeds, store, extend=extend, **sweep_kw)
        chosen = {label: first[label].config(label)}
        second[label] = tune_axis(chosen, "lr", lrs, seeds, store, extend=extend, **sweep_kw)
    return Rates(first, second, option)


def with_tuned(cfg: RunConfig, settings: dict | None) -> RunConfig:
    """``cfg`` at its method's tuned learning rate and options (``settings``: :meth:`Rates.settings`);
    ``cfg`` itself where its method was not tuned."""
    if not settings or cfg.method not in settings:
        return cfg
    chosen = settings[cfg.method]
    return dataclasses.replace(cfg, lr=chosen["lr"], options={**cfg.options, **chosen["options"]})


def _axis(cfg: RunConfig, axis: str, values) -> dict:
    """:func:`grid`'s keyword for one axis: a method option by name where it is one (Per-FedAvg's
    ``alpha`` is also the partition's field), else the RunConfig field."""
    return {"options": {axis: values}} if axis in get_method(cfg.method).options else {axis: values}


def _shared_scores(t: Tuning) -> dict[int, float]:
    """Per position of a shared pilot's (common) grid, the validation metric averaged over the labels;
    positions where some label's arm diverged are left out."""
    labels = list(t.grids)
    score = {}
    for i in range(len(t.grids[labels[0]])):
        arms = [list(t.grids[label])[i] for label in labels]
        if any(t.result.values(a, "diverged").astype(bool).any() for a in arms):
            continue
        score[i] = float(np.mean([t.result.values(a, t.by).mean() for a in arms]))
    return {i: v for i, v in score.items() if v == v}


def _shared_choice(t: Tuning) -> dict[str, str]:
    """Per label, its arm at the one position of the (common) grid whose validation metric,
    averaged over the labels, is best; positions where an arm diverged are left out."""
    score = _shared_scores(t)
    if not score:
        raise PflkitError("every value of the shared grid diverged for some label: nothing to choose")
    best = max(score, key=score.get)
    return {label: list(t.grids[label])[best] for label in t.grids}


def sweep_stable(
    arms: dict[str, RunConfig],
    seeds,
    store,
    pilots: dict[str, tuple[Tuning, str]],
    *,
    axis: str = "lr",
    together: Iterable[Iterable[str]] = (),
    **sweep_kw,
) -> tuple[SweepResult, dict[str, str]]:
    """:func:`sweep`, with one fallback for an arm whose run diverged on some seed.

    A pilot of a few rounds can choose a value (a learning rate) at which a longer run diverges.
    Such an arm runs again, on every seed, at the best value of ``axis`` below the one that
    diverged in its pilot's validation ranking (``pilots``: ``{arm: (tuning, label)}``), and that
    run stands for the arm; if it diverges too, it is reported as it is.  The rule reads training
    stability and validation only, and applies to every arm in ``pilots`` alike.  ``together``:
    groups of arms that share the value (methods that must differ in nothing else, and their
    controls): where one arm of a group diverges, every arm of it moves to the value its first arm
    (which ``pilots`` names) falls back to.  Returns the result and, per arm that fell back, a note
    saying what diverged and what replaced it."""
    result = sweep(arms, seeds, store, **sweep_kw)
    groups = [[a for a in g if a in arms] for g in together]
    lead = {a: g[0] for g in groups if g for a in g}  # each grouped arm -> the arm whose pilot decides
    if missing := sorted({g for g in lead.values() if g not in pilots}):
        raise PflkitError(f"the first arm of a group must have a pilot: {', '.join(missing)}")
    lost = {a: result.values(a, "diverged").astype(bool) for a in arms}
    moved, notes = {}, {}
    for name, cfg in arms.items():
        if name not in pilots and name not in lead:
            continue
        first = lead.get(name, name)
        group = [a for a in arms if lead.get(a, a) == first]
        gone = sorted({s for a in group for s in lost[a][lost[a]].index})
        if not gone:
            continue
        tuning, label = pilots[first]
        value = getattr(arms[first], axis)
        below = [getattr(c, axis) for c in tuning.ranked(label) if getattr(c, axis) < value]
        who = "" if group == [name] else f"{', '.join(a for a in group if lost[a].any())} of its group "
        where = f"{axis} {value:g} diverged {who}on {seeds_text(gone)}"
        if not below:
            notes[name] = f"{where}; the pilot has no smaller value to fall back to"
            continue
        moved[name] = dataclasses.replace(cfg, **{axis: below[0]})
        notes[name] = f"{where}: every seed runs at {axis} {below[0]:g}, the pilot's best smaller value"
    if not moved:
        return result, notes
    again = sweep(moved, seeds, store, **sweep_kw)
    records = {k: v for k, v in result.records.items() if k[0] not in moved} | again.records
    merged = SweepResult(records, list(arms), sorted(set(result.seeds) | set(again.seeds)),
                         result.computed + again.computed, result.reused + again.reused)  # fmt: skip
    return merged, notes


# ----------------------------------------------------------------------------- FeSEM §5.2


def choose_k(
    cfg: RunConfig, fed: Federation, ks=(1, 2, 3, 4), sample: int = 100, rounds: int = 3, store: Store | None = None
) -> dict:
    """FeSEM §5.2: run FeSEM for a few ``rounds`` on ``sample`` random clients for every K in ``ks``.

    Returns ``{K: {"val_mean_acc": ..., "intra_distance": ...}}`` after the last round (the
    paper picks the K of best accuracy, or of smallest intra-cluster distance, eq. 6: pick on
    the validation accuracy).  The optimal k-means distance on *fixed* points falls as K grows
    (K = m makes it zero), so compare it for a knee, not a minimum; but each K here is its own
    short run whose points move, so the measured values need not fall monotonically.
    ``store``: keep the scan there (:meth:`Store.derived`), keyed by the canonical config (``fed``
    must be the federation that ``cfg`` builds), ``ks``, ``sample``, ``rounds`` and the torch threads.
    """

    def scan() -> dict:
        rng = np.random.default_rng(cfg.seed)
        n = len(fed.clients)
        ids = sorted(rng.choice(n, min(sample, n), replace=False).tolist())
        sub = Federation(fed.ds, fed.partition.subset(ids), fed.device)
        scores = {}
        for k in ks:
            c = dataclasses.replace(cfg, method="fesem", clients=len(ids), rounds=rounds, eval_every=rounds,
                                    checkpoint=None, options={**cfg.options, "centers": k})  # fmt: skip
            last = {}

            def grab(rnd, row, server, clients, last=last):
                last.update(row, intra_distance=server.intra_distance())

            run(c, sub, on_round=grab)
            scores[k] = {
                "val_mean_acc": last.get("val_mean_acc", float("nan")),
                "intra_distance": last["intra_distance"],
            }
        return scores

    if store is None:
        return scan()
    spec = {"config": canonical(dataclasses.replace(cfg, method="fesem"), torch.get_num_threads()),
            "ks": [int(k) for k in ks], "sample": int(sample), "rounds": int(rounds)}  # fmt: skip
    value = store.derived("choose_k", spec, lambda: {str(k): v for k, v in scan().items()})
    return {int(k): v for k, v in value.items()}


HEADROOM_VAL = "Local, validation (%)"  # the headroom pilot's column the choice is made on


def headroom(
    grid: dict[str, RunConfig], target: float, seeds, store, *, by: str = "val_mean_acc", tolerance: float = 3.0,
    **sweep_kw,
) -> tuple[str, pd.DataFrame]:  # fmt: skip
    """The regime with the paper's headroom: ``grid`` maps a split's label to the Local baseline's
    config on that split (classes per client, images per client); the split chosen is the one whose
    Local ``by`` accuracy (validation: never the test set) lies nearest ``target``, the paper's Local
    number, which leaves our methods the room the paper's had above Local.  Returns the label and
    the pilot's table (validation and test accuracy, the distance to the target, whether it is
    within ``tolerance`` points)."""
    res = sweep(grid, seeds, store, **sweep_kw)
    f = res.finals()
    if by not in f.columns:
        raise PflkitError(f"the headroom pilot chooses on {by!r}, which these runs do not report")
    rows = []
    for label in grid:
        d = f[f.arm == label]
        val, test = d[by].mean(), d[by.removeprefix("val_")].mean()
        rows.append(
            {
                "split": label,
                HEADROOM_VAL: val,
                "Local, test (%)": test,
                "distance to the paper's Local": abs(val - target),
            }
        )
    table = pd.DataFrame(rows).set_index("split")
    chosen = str(table["distance to the paper's Local"].idxmin())
    table[f"within ±{tolerance:g}"] = np.where(table["distance to the paper's Local"] <= tolerance, "yes", "no")
    table["chosen"] = np.where(table.index == chosen, "←", "")
    return chosen, table
