"""Sweeps: named configs × seeds, run where the store lacks them, and their results.

``sweep({"FedAvg": cfg_a, "Local": cfg_b}, seeds=[0, 1, 2], store=...)`` runs every (arm, seed)
pair that the store does not hold yet, in worker processes (default: one per core, one torch
thread each), and returns a :class:`SweepResult`: tidy pandas tables of final and per-round
metrics, paired comparisons (:mod:`pflkit.verdicts`), and validation-only selection.  A run's
numbers depend on its config, its seed and its torch thread count (part of its key), never on
how the sweep was scheduled.  Any :class:`concurrent.futures.Executor` can run the runs: a Dask
cluster's ``client.get_executor()`` takes a sweep onto many machines.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed

import pandas as pd
import torch

from . import fingerprint
from .compute import compute_path
from .engine import Federation, RunConfig, cpu_model, dataset, git_commit, run
from .errors import NotInStore, PflkitError, TrainingDiverged
from .federation import config_of
from .methods import display_name, get_method
from .profiles import repo_relative
from .store import Store, _log_usage, canonical, code_version, cores, run_key
from .verdicts import DECISION_FLOOR, SEED_CAP, Verdict, _budget, arm_seeds, interval, planned_seeds, seed_plan, verdict

# a run whose validation accuracy rose by more than this over its last fifth runs on (until_flat)
IMPROVING_POINTS = 1.0
# an arm is rising: its last-fifth gain, pooled over its seeds, above this, its lower 95 % bound above 0
RISING_POINTS = 0.5

# ----------------------------------------------------------------------------- one run in a worker


def _set_threads(threads: int) -> None:
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def execute(cfg: RunConfig, threads: int, store_path: str, probe: Callable | None = None) -> dict:
    """Run one config with ``threads`` torch threads, checkpointing into the store, and write
    its record there.  Runs in a worker process (or in-process for one worker)."""
    store = Store(store_path)
    key = run_key(cfg, threads)
    code = code_version()  # the sources this run starts from
    previous = torch.get_num_threads()
    _set_threads(threads)
    try:
        ckpt = store.checkpoint(key)
        run_cfg = dataclasses.replace(cfg, checkpoint=str(ckpt))
        probed: dict = {}
        rows: list[dict] = []  # the evaluated rounds, kept should the run diverge
        on_setup = None
        if probe is not None:

            def on_setup(server, clients):
                if (out := probe(0, None, server, clients)) is not None:
                    probed["0"] = out

        def on_round(rnd, row, server, clients):
            rows.append({k: v for k, v in row.items() if k != "per_client_acc"})
            if probe is not None and (out := probe(rnd, row, server, clients)) is not None:
                probed[str(rnd)] = out

        t0, cpu0 = time.perf_counter(), time.process_time()
        fresh = not ckpt.exists()  # a resumed run records its prefix afterwards
        fed = Federation.from_config(cfg)
        with fingerprint.recording() as prefix:
            try:
                record = run(run_cfg, fed, on_round=on_round, on_setup=on_setup)
            except TrainingDiverged as e:  # a result too: stored, so that a sweep goes on and never retries it
                record = diverged_record(cfg, str(e), rows, time.perf_counter() - t0, time.process_time() - cpu0)
        if not fresh:
            prefix = fingerprint.prefix_of(cfg, fed)
        record["prefix"] = prefix | {"optimizers": fingerprint.PREFIX_OPTIMIZERS, "steps": fingerprint.PREFIX_STEPS}
    finally:
        _set_threads(previous)
    record["config"]["checkpoint"] = None
    record["provenance"]["code"] = code
    record["key"] = key
    record["canonical"] = canonical(cfg, threads)
    record["improving"] = improvement(record["history"], cfg.rounds)
    if probe is not None:
        record["probe"] = {"name": probe_name(probe), "rounds": probed}
    store.put(key, record)
    ckpt.unlink(missing_ok=True)
    return record


def diverged_record(cfg: RunConfig, message: str, rows: list[dict], wall: float, cpu: float) -> dict:
    """The record of a run whose loss became NaN or infinite: its evaluated rounds so far, NaN
    final metrics (a choice never picks it; a verdict leaves its seeds out) and the message."""
    nan = {m: float("nan") for m in FINAL_METRICS}
    return {
        "config": cfg.to_dict(),
        "diverged": message,
        "history": rows,
        "final": nan | {"round": rows[-1]["round"] if rows else 0},
        "best_by_val": nan | {"round": 0},
        "comm": {k: rows[-1].get(k, 0) if rows else 0 for k in ("bytes_up", "bytes_down", "eval_bytes_down")},
        "provenance": {
            "git_commit": git_commit(),
            "threads": torch.get_num_threads(),
            "cpu": cpu_model(),
            "compute": compute_path(),
            "wall_time_s": round(wall, 3),
            "cpu_time_s": round(cpu, 3),
            "seed": cfg.seed,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        },
    }


def probe_name(probe: Callable) -> str:
    return getattr(probe, "probe_name", None) or getattr(probe, "__qualname__", repr(probe))


# ----------------------------------------------------------------------------- sweeps


def sweep(
    arms: dict[str, RunConfig],
    seeds: Iterable[int] | dict[str, Iterable[int]],
    store,
    *,
    workers: int | None = None,
    threads: int = 1,
    executor: Executor | None = None,
    probe: Callable | dict[str, Callable] | None = None,
    progress: bool | None = None,
) -> SweepResult:
    """Run every arm (a named config) with every seed; reuse what ``store`` holds.  ``seeds``: one
    list for every arm, or a list per arm (:func:`pflkit.verdicts.arm_seeds`: each arm to its plan).

    ``workers``: local worker processes (default: one per core for one thread each; never
    more threads than cores in total).  ``executor``: any ``concurrent.futures.Executor``
    instead (e.g. ``distributed.Client(...).get_executor()``); it must see ``store``'s folder.
    ``probe(rnd, row, server, clients)`` (``rnd`` 0: after setup) may return JSON-able data
    kept in the record (figures of the internals: α, clusters, embeddings); it must be
    picklable for worker processes (a module-level function, or one defined in a notebook:
    workers are forked).  A stored run without this probe's output is recomputed.  A dict
    ``{arm: probe}`` gives arms their own probes (an arm it leaves out runs without one).
    ``progress``: one bar over the runs with an ETA (default: on, unless ``PFLBOOK_PROGRESS=0``,
    which the book's build sets so that executed pages do not carry progress bars).
    """
    if progress is None:
        progress = os.environ.get("PFLBOOK_PROGRESS", "1") != "0"
    if not arms:
        raise PflkitError("a sweep needs at least one arm")
    if isinstance(seeds, dict):
        if lacking := [a for a in arms if not seeds.get(a)]:
            raise PflkitError(f"no seeds for the arm(s) {', '.join(lacking)}")
        per_arm = {name: [int(s) for s in seeds[name]] for name in arms}
        seeds = sorted({s for v in per_arm.values() for s in v})
    else:
        seeds = [int(s) for s in seeds]
        per_arm = dict.fromkeys(arms, seeds)
    if not seeds:
        raise PflkitError("a sweep needs at least one seed")
    if threads < 1:
        raise PflkitError(f"threads must be >= 1, got {threads}")
    store = store if isinstance(store, Store) else Store(store)
    for cfg in arms.values():
        get_method(cfg.method).resolve_options(cfg.options)  # bad input fails before anything runs
    records: dict[tuple[str, int], dict] = {}
    todo: dict[str, tuple[RunConfig, list[tuple[str, int]], Callable | None]] = {}  # key -> config, pairs, probe
    for name, cfg in arms.items():
        p = probe.get(name) if isinstance(probe, dict) else probe
        for seed in per_arm[name]:
            c = dataclasses.replace(cfg, seed=seed, checkpoint=None)
            key = run_key(c, threads)
            rec = store.get(key)
            probed = p is None or rec is not None and rec.get("probe", {}).get("name") == probe_name(p)
            if rec is not None and store.usable(rec) and probed:
                records[name, seed] = rec
            else:
                todo.setdefault(key, (c, [], p))[1].append((name, seed))
    reused = len({r["key"] for r in records.values()})
    if todo and store.read_only:
        _log_usage(store, records, {}, missing=todo)
        raise NotInStore(
            f"not computed yet: {len(todo)} of this sweep's {len(todo) + reused} runs are not in the store "
            f"{repo_relative(store.path)} (`make book FILL=1` computes them)"
        )
    if todo:
        n_local = _local_workers(workers, threads, len(todo)) if executor is None else None
        if executor is None:  # read once here: a missing dataset fails now, and forked workers share it
            for name in sorted({c.dataset for c, *_ in todo.values()}):
                dataset(name)
        finished = _run_all(todo, store, n_local, threads, executor, progress, reused)
        for key, (_, pairs, _) in todo.items():
            for pair in pairs:
                records[pair] = finished[key]
    _log_usage(store, records, todo)
    return SweepResult(records, list(arms), seeds, computed=len(todo), reused=reused)


def planned_sweep(
    arms: dict[str, RunConfig], pilot: list[int], store, diffs: Callable, *, claim_arms: dict | None = None,
    cap: int = SEED_CAP, pool: bool = True, margins: dict | None = None, resolution=None, floor=DECISION_FLOOR,
    run: int | None = None, **kw,
) -> tuple[SweepResult, pd.DataFrame]:  # fmt: skip
    """The verdict rule's seed plan in one call: every arm on the ``pilot`` seeds; the plan
    (:func:`pflkit.verdicts.seed_plan`) of the claims that ``diffs(result)`` measures (claim ->
    per-seed differences); then each claim's arms (``claim_arms``: claim -> arms; without it,
    every arm) on the seeds its plan asks for, at most ``run`` of them (a store's budget; the plan
    still says what deciding would take).  ``kw`` goes to :func:`sweep` (``probe``, ...).
    Returns the result and the plan."""
    first = sweep(arms, pilot, store, **kw)
    plan = seed_plan({k: list(v) for k, v in diffs(first).items()}, cap=cap, pool=pool, margins=margins,
                     resolution=resolution, floor=floor)  # fmt: skip
    if claim_arms is None:
        seeds = planned_seeds(plan, pilot, cap)
    else:
        seeds = arm_seeds(plan, claim_arms, pilot, arms=arms, cap=cap)
    if run is not None:
        keep = max(len(pilot), run)
        seeds = {a: v[:keep] for a, v in seeds.items()} if isinstance(seeds, dict) else seeds[:keep]
    return sweep(arms, seeds, store, **kw), plan


EXTEND_CAP = 4  # a still-improving arm of a headline claim runs on to at most this many times its rounds


def longer(cfg: RunConfig, factor: int) -> RunConfig:
    """``cfg`` for ``factor`` times its rounds at the same per-round protocol (the same local work,
    clients a round and rates; evaluations spaced ``factor`` times as far apart, so that as many are
    made and the last fifth is still evaluated)."""
    return dataclasses.replace(cfg, rounds=cfg.rounds * factor, eval_every=max(1, cfg.eval_every * factor))


def until_flat(
    result: SweepResult, arms: dict[str, RunConfig] | None, store, *, only: Iterable[str] | None = None,
    cap: int = EXTEND_CAP, **kw,
) -> tuple[SweepResult, pd.DataFrame]:  # fmt: skip
    """Every arm of ``only`` (default: all of ``arms``; ``None``: each arm as its runs in ``result``
    were made, e.g. after a fallback of :func:`~pflkit.tuning.sweep_stable`) that was still improving at the end of its
    budget in ``result`` runs on: again with twice the rounds (:func:`longer`), on the seeds it
    ran, until the budget flag no longer marks it or it reached ``cap`` times its rounds.  Each arm
    is then read at its own stopping point, under its own name.  ``kw`` goes to :func:`sweep`
    (``probe``, ...).  Returns the result (``result``'s runs, an extended arm's replaced by its
    longest; on a seed where a longer run diverged, the arm keeps its last finished run and runs on no
    further: more budget is no help to a run that breaks down) and the budget report: per arm, the
    rounds it ran, as a multiple of its first budget, its validation gain over the last fifth (mean
    over seeds), whether it was still improving, and (where any did) the seeds whose longer run diverged."""
    if cap < 1:
        raise PflkitError(f"cap must be >= 1, got {cap}")
    if arms is None:
        arms = {a: config_of(r) for (a, _), r in reversed(result.records.items())}  # each arm's first run
    only = list(arms) if only is None else [a for a in only if a in arms]
    seeds = {a: sorted(s for (b, s) in result.records if b == a) for a in only}
    records, factor = dict(result.records), dict.fromkeys(only, 1)
    current, computed, reused = result, result.computed, result.reused
    kept: dict = {a: [] for a in only}  # seeds whose longer run diverged: the arm keeps its last finished run there
    while todo := [a for a in only if seeds[a] and current.extends(a) and 2 * factor[a] <= cap]:
        for a in todo:
            factor[a] *= 2
        res = sweep({a: longer(arms[a], factor[a]) for a in todo}, {a: seeds[a] for a in todo}, store, **kw)
        for (a, s), rec in res.records.items():
            prev = records.get((a, s))
            if rec.get("diverged") and prev is not None and not prev.get("diverged"):
                kept[a].append(f"seed {s} (read at round {records[a, s]['final']['round']})")
                seeds[a] = [x for x in seeds[a] if x != s]  # and runs on no further there
            else:
                records[a, s] = rec
        computed, reused = computed + res.computed, reused + res.reused
        current = SweepResult(records, result.arms, result.seeds, computed, reused)
    rows = []
    for a in only:
        gains = current.finals().query("arm == @a").gain_last_fifth
        rows.append({"arm": a, "rounds": arms[a].rounds * factor[a], "budget": f"{factor[a]}×",
                     "gain over the last fifth (points)": float(gains.mean()) if len(gains) else float("nan"),
                     "still improving": current.improving(a), "diverged when run on": ", ".join(kept[a])})  # fmt: skip
    report = pd.DataFrame(rows)
    return current, report if report["diverged when run on"].any() else report.drop(columns="diverged when run on")


def _local_workers(workers: int | None, threads: int, n_runs: int) -> int:
    limit = max(1, cores() // threads)
    if workers is None:
        return max(1, min(limit, n_runs))
    if workers < 1:
        raise PflkitError(f"workers must be >= 1, got {workers}")
    if workers > limit:
        raise PflkitError(
            f"{workers} workers × {threads} torch thread(s) exceed this machine's {cores()} cores; use --workers {limit}"
        )
    return workers


def _run_all(todo, store, n_local, threads, executor, progress, reused) -> dict[str, dict]:
    if progress:
        from tqdm.auto import tqdm
    else:  # no import: tqdm.auto warns in a notebook without widgets
        from tqdm import tqdm

    bar = tqdm(total=len(todo), desc="runs", unit="run", disable=not progress)
    bar.set_postfix(reused=reused)
    done: dict[str, dict] = {}
    try:
        if executor is None and n_local == 1:  # in this process, one run after another
            for key, (cfg, _, probe) in todo.items():
                done[key] = execute(cfg, threads, str(store.path), probe)
                bar.update()
            return done
        pool = executor
        if pool is None:
            import multiprocessing as mp

            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
            pool = ProcessPoolExecutor(n_local, mp_context=ctx, initializer=_set_threads, initargs=(threads,))
        try:
            futures = {
                pool.submit(execute, cfg, threads, str(store.path), probe): key for key, (cfg, _, probe) in todo.items()
            }
            for fut in as_completed(futures):
                done[futures[fut]] = fut.result()
                bar.update()
        finally:
            if executor is None:
                pool.shutdown(cancel_futures=True)
        return done
    finally:
        bar.close()


# ----------------------------------------------------------------------------- budget flag


def improvement(history: list[dict], rounds: int, key: str = "val_mean_acc") -> float | None:
    """Points of ``key`` gained over the last fifth of the run: its value at the last evaluated
    round minus its best value up to round ``rounds − ⌈rounds/5⌉``.  None when the run was not
    evaluated both before and inside the last fifth (then nobody can tell)."""
    rows = [h for h in history if key in h and h[key] == h[key]]
    if not rows:
        return None
    cut = rounds - math.ceil(rounds / 5)
    before = [h[key] for h in rows if h["round"] <= cut]
    if not before or rows[-1]["round"] <= cut:
        return None
    return 100 * (rows[-1][key] - max(before))


def rising(gains) -> bool | None:
    """Whether an arm was still rising at its end, from its runs' validation gains over the last fifth
    (points, one a seed): their mean exceeds :data:`RISING_POINTS` and the lower bound of their 95 %
    interval lies above 0 (one seed: its gain above :data:`RISING_POINTS`); None when one is not measured."""
    gains = list(gains)
    if not gains or any(g is None or g != g for g in gains):
        return None
    mean, half, n = interval(gains)
    return bool(mean > RISING_POINTS and (n < 2 or mean - half > 0))


def samples_per_round(config: dict, train_sizes=None) -> float:
    """Training samples a round of ``config`` processes on its clients (the book's budget unit): the
    clients it samples times each one's local work, ``local_steps × batch_size`` or ``local_epochs`` passes
    over its training images (``train_sizes``: per client; else the training images shared evenly).  A
    method's extra work (a proximal or distillation step, a second model) is not counted."""
    clients = config.get("clients") or len(train_sizes or ()) or 1
    sizes = list(train_sizes) if train_sizes else [(config.get("train_images") or 60000) / clients] * clients
    if config.get("local_steps"):
        work = [config["local_steps"] * config.get("batch_size", 1)] * clients
    else:
        work = [(config.get("local_epochs") or 1) * n for n in sizes]
    return max(1.0, (config.get("sample_rate") or 1.0) * clients) / clients * sum(work)


def setup_samples(config: dict, train_sizes=None) -> float:
    """Training samples a run of ``config`` processes before its first round (its method's
    ``setup_steps``, e.g. FeSEM's initial local models: that many minibatch steps on every client); 0
    for methods without such a phase.  Part of the run's budget (:meth:`SweepResult.budget_of`)."""
    method = get_method(config["method"])
    if method.setup_steps is None:
        return 0.0
    clients = config.get("clients") or len(train_sizes or ()) or 1
    steps = method.setup_steps(method.resolve_options(config.get("options")))
    return float(steps * config.get("batch_size", 1) * clients)


def still_improving(gain: float | None) -> bool | None:
    """True when validation accuracy rose by more than :data:`IMPROVING_POINTS` over the last
    fifth of the rounds (the run was stopped by its budget), None when not measurable."""
    return None if gain is None else bool(gain > IMPROVING_POINTS)


# ----------------------------------------------------------------------------- results of a sweep

FINAL_METRICS = ("mean_acc", "pooled_acc", "macro_f1", "micro_f1")


WORST_SHARE = 0.1  # the share of clients whose accuracy the tables show beside the mean (the worst 10 %)


def worst_clients(per_client_acc, share: float = WORST_SHARE) -> float:
    """Mean test accuracy (%) of the worst ``share`` of the clients (⌈share · n⌉ of them, at least one):
    how the clients a mean hides fare.  NaN without clients."""
    acc = sorted(float(a) for a in (() if per_client_acc is None else per_client_acc) if a == a)
    if not acc:
        return float("nan")
    k = max(1, math.ceil(share * len(acc) - 1e-9))
    return 100 * sum(acc[:k]) / k


class SweepResult:
    """The records of a sweep, by (arm, seed), and the tables and comparisons built on them.

    Metrics in the tables are in % (accuracy, F1).  Test metrics have their plain names
    (``mean_acc``, ``pooled_acc``, ...); validation metrics start with ``val_``.  Choices
    (:meth:`select`) accept validation metrics only.
    """

    def __init__(self, records, arms, seeds, computed=0, reused=0):
        self.arms: list[str] = list(arms)
        self.seeds: list[int] = list(seeds)
        # arms in the order given, then seeds: tables do not depend on which runs the store held
        order = [(a, s) for a in self.arms for s in self.seeds if (a, s) in records]
        self.records: dict[tuple[str, int], dict] = {
            p: records[p] for p in order + [p for p in records if p not in order]
        }
        self.computed, self.reused = computed, reused
        self._finals: pd.DataFrame | None = None  # built once: the records do not change

    def __getitem__(self, pair: tuple[str, int]) -> dict:
        return self.records[pair]

    def __or__(self, other: SweepResult) -> SweepResult:
        """Both sweeps' runs in one result (arms of the same name must not clash)."""
        clash = set(self.arms) & set(other.arms)
        if clash:
            raise PflkitError(f"arms in both sweeps: {', '.join(sorted(clash))}")
        return SweepResult(
            {**self.records, **other.records}, self.arms + other.arms, sorted(set(self.seeds) | set(other.seeds)),
            self.computed + other.computed, self.reused + other.reused,
        )  # fmt: skip

    def finals(self) -> pd.DataFrame:
        """One row per (arm, seed): last-round test metrics, the last round's validation
        accuracy, the round of best validation accuracy and the test accuracy there, the
        improvement over the last fifth, bytes and wall time."""
        if self._finals is None:
            self._finals = self._final_rows()
        return self._finals.copy()

    def _final_rows(self) -> pd.DataFrame:
        rows = []
        for (arm, seed), r in self.records.items():
            row = {"arm": arm, "method": r["config"]["method"], "seed": seed, "rounds": r["final"]["round"]}
            if r.get("diverged"):  # NaN metrics: choices never pick it, verdicts leave the seed out
                rows.append(row | {"diverged": True, "wall_s": r["provenance"]["wall_time_s"]})
                continue
            last = r["history"][-1]
            row["diverged"] = False
            row |= {m: 100 * r["final"][m] for m in FINAL_METRICS}
            row |= {f"val_{m}": 100 * last[f"val_{m}"] for m in FINAL_METRICS if f"val_{m}" in last}
            row["worst10_acc"] = worst_clients(r["final"].get("per_client_acc", []))
            row["best_val_round"] = r["best_by_val"]["round"]
            row["mean_acc@best_val"] = 100 * r["best_by_val"]["mean_acc"]
            row["pooled_acc@best_val"] = 100 * r["best_by_val"]["pooled_acc"]
            for m in ("mean_acc", "pooled_acc"):  # the round picked on the test set (PFLlib's, FL-bench's view)
                row[f"{m}@best_test"] = 100 * max(h[m] for h in r["history"])
            gain = r["improving"] if "improving" in r else improvement(r["history"], r["config"]["rounds"])
            row["gain_last_fifth"] = gain
            row["still_improving"] = still_improving(gain)
            row["MB_up"] = r["comm"]["bytes_up"] / 1e6
            row["MB_down"] = r["comm"]["bytes_down"] / 1e6
            row["wall_s"] = r["provenance"]["wall_time_s"]
            rows.append(row)
        return pd.DataFrame(rows)

    def history(self) -> pd.DataFrame:
        """Per-round metrics of every run (accuracies in %), long format with arm and seed."""
        frames = []
        for (arm, seed), r in self.records.items():
            df = pd.DataFrame(r["history"])
            for c in df.columns:
                if c.endswith(("_acc", "_f1")):
                    df[c] = 100 * df[c]
            frames.append(df.assign(arm=arm, seed=seed, method=r["config"]["method"]))
        return pd.concat(frames, ignore_index=True)

    def probes(self, arm: str, seed: int) -> dict[int, object]:
        """What the sweep's probe returned, by round (0: after setup)."""
        rec = self.records[arm, seed].get("probe", {"rounds": {}})
        return {int(k): v for k, v in rec["rounds"].items()}

    def values(self, arm: str, metric: str = "mean_acc") -> pd.Series:
        """An arm's ``metric`` by seed."""
        f = self.finals()
        return f[f.arm == arm].set_index("seed")[metric].sort_index()

    def improving(self, arm: str) -> bool | None:
        """Whether the arm was still rising at its end (:func:`rising`: its gains over the last fifth,
        pooled over its seeds)."""
        f = self.finals()
        gains = f[f.arm == arm].gain_last_fifth
        if gains.empty or gains.isna().any():
            return None
        return rising(gains.tolist())

    def extends(self, arm: str) -> bool | None:
        """Whether :func:`until_flat` runs the arm on: its mean gain over the last fifth above
        :data:`IMPROVING_POINTS` (the rule the committed store's runs were extended by)."""
        f = self.finals()
        gains = f[f.arm == arm].gain_last_fifth
        if gains.empty or gains.isna().any():
            return None
        return still_improving(float(gains.mean()))

    def gains_at(self, arm: str, rounds: dict[int, int]) -> list[float | None]:
        """The arm's validation gains over the last fifth of ``rounds`` (seed -> the round it is read at)."""
        return [
            improvement([h for h in self.records[arm, s]["history"] if h["round"] <= r], r) for s, r in rounds.items()
        ]

    def rising_at(self, arm: str, rounds: dict[int, int]) -> bool | None:
        """Whether the arm was still rising at ``rounds`` (seed -> round read), as :func:`rising` judges
        its gains over the last fifth of those rounds."""
        return rising(self.gains_at(arm, rounds))

    def budget_of(self, arm: str, seed: int) -> float:
        """Training samples the run processed on its clients (:func:`samples_per_round` × its rounds, plus
        the work before round 1, :func:`setup_samples`)."""
        r = self.records[arm, seed]
        sizes = (r.get("partition") or {}).get("train_sizes")
        return r["final"]["round"] * samples_per_round(r["config"], sizes) + setup_samples(r["config"], sizes)

    def read_at(self, arm: str, seed: int, samples: float, metric: str = "mean_acc") -> tuple[float, int] | None:
        """The run's test ``metric`` (%) at its last evaluation within ``samples`` training samples, and that
        round; None when it was not evaluated so early, or ``metric`` is not in its history."""
        r = self.records[arm, seed]
        sizes = (r.get("partition") or {}).get("train_sizes")
        spr, setup = samples_per_round(r["config"], sizes), setup_samples(r["config"], sizes)
        rows = [
            h
            for h in r["history"]
            if metric in h and h[metric] == h[metric] and h["round"] * spr + setup <= samples * (1 + 1e-9)
        ]
        return (100 * rows[-1][metric], int(rows[-1]["round"])) if rows else None

    def common_budget(self, a: str, b: str, metric: str = "mean_acc", unit: str = "samples") -> dict | None:
        """Where arms ``a`` and ``b`` ended on different budgets (``unit``: training samples processed, or
        "rounds" for a claim about rounds of communication, whose arms differ in their work a round by
        design): per seed both ran, each read at the smaller of their two budgets (:meth:`read_at`), with
        the rounds read; None when they ended on the same budget on every seed, or the history cannot say."""
        seeds = [s for s in self.seeds if (a, s) in self.records and (b, s) in self.records
                 and not self.records[a, s].get("diverged") and not self.records[b, s].get("diverged")]  # fmt: skip
        ends = {s: (self.records[a, s]["final"]["round"], self.records[b, s]["final"]["round"]) for s in seeds}
        spent = {s: (self.budget_of(a, s), self.budget_of(b, s)) for s in seeds}
        if unit == "rounds":  # each arm at the rounds both ran, in its own samples
            same = all(x == y for x, y in ends.values())
            targets = {s: tuple(min(ends[s]) / e * w for e, w in zip(ends[s], spent[s])) for s in seeds}
        else:
            same = all(abs(x - y) <= 1e-9 * max(x, y) for x, y in spent.values())
            targets = {s: (min(w), min(w)) for s, w in spent.items()}
        if not seeds or same:
            return None
        out = {}
        for s, (x, y) in targets.items():
            ra, rb = self.read_at(a, s, x, metric), self.read_at(b, s, y, metric)
            if ra is None or rb is None:
                return None
            out[s] = (ra[0], rb[0], ra[1], rb[1])
        return out

    def summary(self, metric: str = "mean_acc") -> pd.DataFrame:
        """Per arm: mean over seeds, 95 % CI half-width, seeds, still improving."""
        rows = []
        for arm in self.arms:
            m, h, n = interval(self.values(arm, metric))
            rows.append({"arm": arm, metric: m, "ci95": h, "seeds": n, "still_improving": self.improving(arm)})
        return pd.DataFrame(rows).set_index("arm")

    def paired(self, a: str, b: str, metric: str = "mean_acc") -> pd.Series:
        """Per-seed differences a − b over the seeds both arms ran."""
        va, vb = self.values(a, metric), self.values(b, metric)
        common = va.index.intersection(vb.index)
        return (va[common] - vb[common]).rename(f"{a} − {b}")

    def budget(self, *arms: str) -> bool | None:
        """The budget flag of a verdict resting on these arms: True if one was still improving,
        None if one could not be measured, else False."""
        return _budget([self.improving(a) for a in arms])

    def compare(
        self, a: str, b: str, metric: str = "mean_acc", margin: float | None = None, resolution: float | None = None
    ) -> Verdict:
        """The verdict on "``a`` beats ``b``" (or, with ``margin``, "a and b do not differ"; with
        ``resolution``, an undecided "beats" inside ± resolution reads *no difference*)."""
        return verdict(self.paired(a, b, metric), margin=margin, budget=self.budget(a, b), resolution=resolution)

    def select(self, arms: Iterable[str], by: str = "val_mean_acc") -> str:
        """The arm with the best mean validation metric over seeds (never a test metric)."""
        arms = list(arms)
        ranking = self.ranked(arms, by)
        if not ranking:
            raise PflkitError(f"every arm diverged on some seed ({', '.join(arms)}): lower the learning rates")
        return ranking[0]

    def ranked(self, arms: Iterable[str], by: str = "val_mean_acc") -> list[str]:
        """``arms`` from the best mean validation metric over seeds down; an arm that diverged on a
        seed is left out (it is never chosen)."""
        if not by.startswith("val_"):
            raise PflkitError(f"choices are made on validation metrics (val_...), not on {by!r}")
        f = self.finals()
        f = f[f.arm.isin(list(arms))]
        lost = f.groupby("arm").diverged.any()
        if lost.all():
            return []
        if by not in f.columns:
            raise PflkitError(f"no runs report {by}: give the clients a validation split (val_fraction > 0)")
        return [str(a) for a in f.groupby("arm")[by].mean()[~lost].sort_values(ascending=False, kind="stable").index]


def cpu_hours(*results: SweepResult) -> tuple[int, float]:
    """The distinct runs behind ``results`` (a run shared by two sweeps counted once, by its store
    key) and the process CPU-hours they recorded, as measured where each ran."""
    runs = {r.get("key", id(r)): r for res in results for r in res.records.values()}
    return len(runs), sum(r["provenance"].get("cpu_time_s") or 0.0 for r in runs.values()) / 3600


def arms_for(methods: Iterable[str], base: RunConfig, options: dict[str, dict] | None = None) -> dict[str, RunConfig]:
    """``{display name: config}`` for kit methods on one base config (with per-method options)."""
    options = options or {}
    return {
        display_name(m): dataclasses.replace(base, method=m, options={**base.options, **options.get(m, {})})
        for m in methods
    }
