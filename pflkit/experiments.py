"""Experiments: sweeps over named configs × seeds, a result store, and one verdict rule.

Every chapter of the book gets its numbers and its verdicts from here.

**Sweeps.** ``sweep({"FedAvg": cfg_a, "Local": cfg_b}, seeds=[0, 1, 2], store=...)`` runs
every (arm, seed) pair that the store does not hold yet, in worker processes (default: one
per core, one torch thread each), and returns a :class:`SweepResult`: tidy pandas tables of
final and per-round metrics, paired comparisons, and validation-only selection.  A run's
numbers depend on its config, its seed and its torch thread count (part of its key), never on
how the sweep was scheduled.  Any :class:`concurrent.futures.Executor` can run the runs: a
Dask cluster's ``client.get_executor()`` takes a sweep onto many machines.

**Store.** One JSON file per finished run, keyed by the canonical config, with the fields of
``python -m pflkit run --out``.  Files are written atomically by the process that ran them,
so a killed sweep loses only the runs that were still going; those resume from their last
round (the engine's checkpoints, kept in the store's ``checkpoints/`` until the run ends).

**Verdicts.** A claim compares two arms on the same seeds (same seed ⇒ same partition,
initialisation and client sampling).  :func:`verdict` takes the per-seed differences, their
mean and 95 % t-interval: *reproduces* when the interval excludes 0 on the paper's side,
*contradicted* when it excludes 0 on the other side, *inconclusive* otherwise.  A
"no difference" claim states a margin and reproduces only when the whole interval lies in
±margin (contradicted when it lies wholly outside).  Fewer than :data:`MIN_SEEDS` seeds:
*not tested*.  A verdict resting on an arm that was still improving at its end says
*budget-limited* beside its word (:func:`still_improving`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from . import fingerprint
from .compute import compute_path
from .engine import (
    LATER_FIELDS,
    Federation,
    RunConfig,
    cpu_model,
    dataset,
    exploded,
    git_commit,
    loss_bound,
    run,
)  # fmt: skip
from .errors import NotInStore, PflkitError, TrainingDiverged
from .methods import display_name, get_method
from .profiles import repo_relative

MIN_SEEDS = 3  # a verdict needs at least this many paired seeds
CONFIDENCE = 0.95
IMPROVING_POINTS = 1.0  # still improving: validation accuracy rose by more than this over the last fifth
WORDS = ("reproduces", "contradicted", "inconclusive", "not tested")

# ----------------------------------------------------------------------------- keys and the store


def cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def canonical(cfg: RunConfig, threads: int) -> dict:
    """The fields that determine a run's numbers: the config with its method options resolved
    (so an option left out and the same option at its default are one run), without where it
    checkpoints or which device it picked, plus the torch thread count."""
    d = cfg.to_dict()
    d.pop("checkpoint")
    d.pop("device")
    method = get_method(cfg.method)
    d["options"] = method.resolve_options(cfg.options)
    for name, default in method.later_options.items():  # options added after stored runs existed
        if d["options"].get(name) == default:
            d["options"].pop(name)
    for name, default in LATER_FIELDS.items():
        if d[name] == default:
            d.pop(name)
    d["threads"] = int(threads)
    return d


def run_key(cfg: RunConfig, threads: int) -> str:
    """File-name key of a run: ``<method>-s<seed>-<hash of the canonical config>``."""
    blob = json.dumps(canonical(cfg, threads), sort_keys=True)
    return f"{cfg.method}-s{cfg.seed}-{hashlib.sha1(blob.encode()).hexdigest()[:16]}"


_CODE: list[str] = []


def code_version() -> str:
    """A hash of the kit's source files as this process imported them (computed at import):
    runs of other code are not reused by default."""
    if not _CODE:
        h = hashlib.sha1()
        here = Path(__file__).resolve().parent
        for f in sorted(here.rglob("*.py")):
            h.update(str(f.relative_to(here)).encode() + b"\0" + f.read_bytes())
        _CODE.append(h.hexdigest()[:12])
    return _CODE[0]


code_version()  # now, at import: a long-lived process runs the sources it imported


def bound_of(record: dict) -> float:
    """The divergence bound of a stored run (:func:`pflkit.engine.loss_bound`): recorded with it, or
    from its dataset's classes for runs stored before the bound was."""
    if "loss_bound" in record:
        return record["loss_bound"]
    return loss_bound(dataset(record["config"]["dataset"]).n_classes)


def _write_atomically(f: Path, record: dict) -> None:
    """``record`` as JSON at ``f``, atomically: a kill never leaves half a record."""
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, f)


class Store:
    """A folder of finished runs, one JSON file each (``<key>.json``).

    ``reuse="same-code"`` (default) reuses a stored run only if it was computed by the kit's
    current sources (:func:`code_version`); ``reuse="any"`` reuses whatever is stored.
    ``read_only``: a sweep that needs a run the store lacks raises :class:`NotInStore` instead
    of computing it (``make book`` renders the committed store this way).
    """

    def __init__(self, path, reuse: str = "same-code", read_only: bool = False):
        self.path = Path(path)
        self.read_only = read_only
        if self.path.exists() and not self.path.is_dir():
            raise PflkitError(f"store {self.path} is a file; give a folder (it is created if missing)")
        if reuse not in ("same-code", "any"):
            raise PflkitError(f"reuse must be 'same-code' or 'any', got {reuse!r}")
        self.reuse = reuse

    def usable(self, record: dict) -> bool:
        return self.reuse == "any" or record["provenance"].get("code") == code_version()

    def file(self, key: str) -> Path:
        return self.path / f"{key}.json"

    def checkpoint(self, key: str) -> Path:
        return self.path / "checkpoints" / f"{key}.pt"

    def get(self, key: str) -> dict | None:
        f = self.file(key)
        if not f.exists():
            return None
        try:
            record = json.loads(f.read_text())
            record["final"], record["history"]  # noqa: B018
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
            raise PflkitError(
                f"store file {f} is corrupt (truncated or not a run record); delete it and run again to recompute it"
            ) from None
        if not record.get("diverged") and (why := exploded(record.get("round_loss", ()), bound_of(record))):
            record["diverged"] = why  # stored before the rule read more than NaN: a diverged run all the same
        return record

    def put(self, key: str, record: dict) -> None:
        _write_atomically(self.file(key), record)

    def keys(self) -> list[str]:
        return sorted(p.stem for p in self.path.glob("*.json")) if self.path.is_dir() else []

    def derived(self, name: str, spec: dict, compute: Callable[[], dict]) -> dict:
        """A result that is not one run (e.g. FeSEM's §5.2 scan of K over short runs), kept as
        ``derived/<name>-<hash of spec>.json``: ``compute()`` runs only when the store lacks it,
        and a read-only store raises :class:`NotInStore` instead; a stored result made by other kit
        sources is reused only where runs would be (``reuse``).  ``spec`` (JSON-able) holds everything
        that determines the result; the record keeps ``compute()``'s value and CPU time.  Such results
        are not runs: the replay check and :func:`cpu_hours` do not see them."""
        blob = json.dumps(spec, sort_keys=True)
        key = f"{name}-{hashlib.sha1(blob.encode()).hexdigest()[:16]}"
        f = self.path / "derived" / f"{key}.json"
        if f.exists():
            try:
                record = json.loads(f.read_text())
                record["value"], record["provenance"]  # noqa: B018
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
                raise PflkitError(f"store file {f} is corrupt; delete it and run again to recompute it") from None
            if self.usable(record):  # the store's reuse policy, as for runs
                return record["value"]
        if self.read_only:
            _log_usage(self, {}, {}, missing={key: None})
            raise NotInStore(
                f"not computed yet: {name} is not in the store {repo_relative(self.path)} "
                "(`make book FILL=1` computes it)"
            )
        cpu, wall = time.process_time(), time.perf_counter()
        value = compute()
        record = {"key": key, "spec": spec, "value": value, "cpu_s": time.process_time() - cpu,
                  "wall_s": time.perf_counter() - wall,
                  "provenance": {"code": code_version(), "git_commit": git_commit(), "cpu": cpu_model()}}  # fmt: skip
        _write_atomically(f, record)
        return value

    def __len__(self) -> int:
        return len(self.keys())


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
    seeds: Iterable[int],
    store,
    *,
    workers: int | None = None,
    threads: int = 1,
    executor: Executor | None = None,
    probe: Callable | None = None,
    progress: bool | None = None,
) -> SweepResult:
    """Run every arm (a named config) with every seed; reuse what ``store`` holds.

    ``workers``: local worker processes (default: one per core for one thread each; never
    more threads than cores in total).  ``executor``: any ``concurrent.futures.Executor``
    instead (e.g. ``distributed.Client(...).get_executor()``); it must see ``store``'s folder.
    ``probe(rnd, row, server, clients)`` (``rnd`` 0: after setup) may return JSON-able data
    kept in the record (figures of the internals: α, clusters, embeddings); it must be
    picklable for worker processes (a module-level function, or one defined in a notebook:
    workers are forked).  A stored run without this probe's output is recomputed.
    ``progress``: one bar over the runs with an ETA (default: on, unless ``PFLBOOK_PROGRESS=0``,
    which the book's build sets so that executed pages do not carry progress bars).
    """
    if progress is None:
        progress = os.environ.get("PFLBOOK_PROGRESS", "1") != "0"
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise PflkitError("a sweep needs at least one seed")
    if not arms:
        raise PflkitError("a sweep needs at least one arm")
    if threads < 1:
        raise PflkitError(f"threads must be >= 1, got {threads}")
    store = store if isinstance(store, Store) else Store(store)
    for cfg in arms.values():
        get_method(cfg.method).resolve_options(cfg.options)  # bad input fails before anything runs
    records: dict[tuple[str, int], dict] = {}
    todo: dict[str, tuple[RunConfig, list[tuple[str, int]]]] = {}  # key -> config, (arm, seed) pairs
    for name, cfg in arms.items():
        for seed in seeds:
            c = dataclasses.replace(cfg, seed=seed, checkpoint=None)
            key = run_key(c, threads)
            rec = store.get(key)
            probed = probe is None or rec is not None and rec.get("probe", {}).get("name") == probe_name(probe)
            if rec is not None and store.usable(rec) and probed:
                records[name, seed] = rec
            else:
                todo.setdefault(key, (c, []))[1].append((name, seed))
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
            for name in sorted({c.dataset for c, _ in todo.values()}):
                dataset(name)
        finished = _run_all(todo, store, n_local, threads, executor, probe, progress, reused)
        for key, (_, pairs) in todo.items():
            for pair in pairs:
                records[pair] = finished[key]
    _log_usage(store, records, todo)
    return SweepResult(records, list(arms), seeds, computed=len(todo), reused=reused)


def _log_usage(store: Store, records: dict, todo: dict, missing: dict | None = None) -> None:
    """With ``PFLBOOK_USAGE_LOG`` set (the book's build sets it per chapter), append which runs
    came from the store (and the commits that made them), how many were computed and how many
    a read-only store lacked (``missing``)."""
    log = os.environ.get("PFLBOOK_USAGE_LOG")
    if not log:
        return
    made = {
        r["key"]: r["provenance"].get("git_commit", "unknown")[:7] for r in records.values() if r["key"] not in todo
    }
    entry = {
        "store": str(store.path),
        "reused": sorted(made),
        "commits": sorted(set(made.values())),
        "computed": sorted(todo),
        "missing": sorted(missing or {}),
    }
    with open(log, "a") as f:
        f.write(json.dumps(entry) + "\n")


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


def _run_all(todo, store, n_local, threads, executor, probe, progress, reused) -> dict[str, dict]:
    if progress:
        from tqdm.auto import tqdm
    else:  # no import: tqdm.auto warns in a notebook without widgets
        from tqdm import tqdm

    bar = tqdm(total=len(todo), desc="runs", unit="run", disable=not progress)
    bar.set_postfix(reused=reused)
    done: dict[str, dict] = {}
    try:
        if executor is None and n_local == 1:  # in this process, one run after another
            for key, (cfg, _) in todo.items():
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
                pool.submit(execute, cfg, threads, str(store.path), probe): key for key, (cfg, _) in todo.items()
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


def still_improving(gain: float | None) -> bool | None:
    """True when validation accuracy rose by more than :data:`IMPROVING_POINTS` over the last
    fifth of the rounds (the run was stopped by its budget), None when not measurable."""
    return None if gain is None else bool(gain > IMPROVING_POINTS)


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


def verdict(diffs, *, margin: float | None = None, budget: bool | None = False, unit: str = "points") -> Verdict:
    """The book's one rule, on paired differences ``a − b`` (the paper's side is ``> 0``;
    with ``margin``, the claim is "no difference": ``|a − b| < margin``)."""
    mean, half, n = interval(diffs)
    if n < MIN_SEEDS:
        return Verdict("not tested", mean, float("nan"), float("nan"), n, margin, budget, unit)
    lo, hi = mean - half, mean + half
    if margin is None:
        word = "reproduces" if lo > 0 else "contradicted" if hi < 0 else "inconclusive"
    else:
        word = (
            "reproduces"
            if -margin < lo and hi < margin
            else "contradicted"
            if lo > margin or hi < -margin
            else "inconclusive"
        )
    return Verdict(word, mean, lo, hi, n, margin, budget, unit)


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


# ----------------------------------------------------------------------------- results of a sweep

FINAL_METRICS = ("mean_acc", "pooled_acc", "macro_f1", "micro_f1")


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
        """Whether the arm was still improving at its end (mean gain over its seeds)."""
        f = self.finals()
        gains = f[f.arm == arm].gain_last_fifth
        if gains.empty or gains.isna().any():
            return None
        return still_improving(float(gains.mean()))

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

    def compare(self, a: str, b: str, metric: str = "mean_acc", margin: float | None = None) -> Verdict:
        """The verdict on "``a`` beats ``b``" (or, with ``margin``, "a and b do not differ")."""
        return verdict(self.paired(a, b, metric), margin=margin, budget=self.budget(a, b))

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


# ----------------------------------------------------------------------------- tables for the chapters


def claim(
    text: str, result: SweepResult, a: str, b: str, *, paper: str = "", metric: str = "mean_acc",
    margin: float | None = None,
) -> dict:  # fmt: skip
    """One row of a chapter's claims table: the claim, the paper's number(s), ours (mean
    difference and 95 % CI over n seeds), the verdict word and the budget flag."""
    return claim_row(text, result.compare(a, b, metric, margin), paper)


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


def arms_for(methods: Iterable[str], base: RunConfig, options: dict[str, dict] | None = None) -> dict[str, RunConfig]:
    """``{display name: config}`` for kit methods on one base config (with per-method options)."""
    options = options or {}
    return {
        display_name(m): dataclasses.replace(base, method=m, options={**base.options, **options.get(m, {})})
        for m in methods
    }


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

    def config(self, label: str) -> RunConfig:
        return self.grids[label][self.chosen[label]]

    def ranked(self, label: str) -> list[RunConfig]:
        """The label's pilot configs from the best mean validation metric down (diverged ones left out)."""
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
    **sweep_kw,
) -> Tuning:
    """The pilot of one numeric axis (``lr``, say) for every ``{label: config}``, with the edge rule.

    Every label starts on the same ``values``.  Where a label's choice is an end of a grid of three
    or more values, that label's grid gains the next value past that end, one geometric step (the
    ratio of the two values at that end, rounded to one significant digit), and the pilot chooses
    again; at most ``extend`` steps per label.  A choice at the edge is thus either confirmed by a
    worse value beyond it, or moves outward; one still at the edge after ``extend`` steps is
    flagged by :meth:`Tuning.table`.  Runs already made are read back from ``store``."""
    values = sorted(values)
    grids_values = {label: list(values) for label in configs}
    for step in range(extend + 1):
        t = tune({label: grid(label, cfg, **{axis: grids_values[label]}) for label, cfg in configs.items()}, seeds,
                 store, by=by, **sweep_kw)  # fmt: skip
        grown = False
        for label, v in grids_values.items():
            i = list(t.grids[label]).index(t.chosen[label])
            if step == extend or len(v) < 3 or 0 < i < len(v) - 1:
                continue
            nxt = v[-1] * v[-1] / v[-2] if i == len(v) - 1 else v[0] * v[0] / v[1]
            nxt = float(f"{nxt:.1g}")
            v.insert(len(v) if i else 0, nxt)
            grown = True
        if not grown:
            break
    return t


def sweep_stable(
    arms: dict[str, RunConfig],
    seeds,
    store,
    pilots: dict[str, tuple[Tuning, str]],
    *,
    axis: str = "lr",
    **sweep_kw,
) -> tuple[SweepResult, dict[str, str]]:
    """:func:`sweep`, with one fallback for an arm whose run diverged on some seed.

    A pilot of a few rounds can choose a value (a learning rate) at which a longer run diverges.
    Such an arm runs again, on every seed, at the best value of ``axis`` below the one that
    diverged in its pilot's validation ranking (``pilots``: ``{arm: (tuning, label)}``), and that
    run stands for the arm; if it diverges too, it is reported as it is.  The rule reads training
    stability and validation only, and applies to every arm in ``pilots`` alike.  Returns the result
    and, per arm that fell back, a note saying what diverged and what replaced it."""
    result = sweep(arms, seeds, store, **sweep_kw)
    moved, notes = {}, {}
    for name, cfg in arms.items():
        if name not in pilots:
            continue
        lost = result.values(name, "diverged").astype(bool)
        if not lost.any():
            continue
        tuning, label = pilots[name]
        value = getattr(cfg, axis)
        below = [getattr(c, axis) for c in tuning.ranked(label) if getattr(c, axis) < value]
        where = f"{axis} {value:g} diverged on seed(s) {', '.join(str(s) for s in lost[lost].index)}"
        if not below:
            notes[name] = f"{where}; the pilot has no smaller value to fall back to"
            continue
        moved[name] = dataclasses.replace(cfg, **{axis: below[0]})
        notes[name] = f"{where}: every seed runs at {axis} {below[0]:g}, the pilot's best smaller value"
    if not moved:
        return result, notes
    again = sweep(moved, seeds, store, **sweep_kw)
    records = {k: v for k, v in result.records.items() if k[0] not in moved} | again.records
    merged = SweepResult(records, list(arms), seeds, result.computed + again.computed, result.reused + again.reused)
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
