"""Replay check of a committed result store: are its runs what today's kit computes?

The ``book`` profile reads its runs from ``results/<chapter>/`` whatever kit sources made them
(:func:`pflkit.store.store_for`).  ``make test`` therefore replays a sample of stored runs from
each run's stored config, with its recorded torch thread count and memory format, and reports
every sampled run as one of: *replays*, *stale* (today's kit computes something else: the line
says where) or *diverged* (the run's training loss left the divergence bound,
:func:`pflkit.engine.exploded`; it replays all the same, but choices and verdicts leave it out).

* **Everywhere: the prefix.**  Every run records the gradient and update norms of the first
  steps of its first optimisers (:mod:`pflkit.fingerprint`).  The replay recomputes just those
  (seconds) and compares them within :data:`pflkit.fingerprint.PREFIX_RTOL`, a tolerance measured
  between compute paths that must agree (``benchmarks/prefix_drift.py``): this passes a run made on
  another CPU model or with other kernels and fails one whose learning rate, seed, data, model or
  local training changed.
* **On the CPU model, torch version and compute path that made the run: whole rounds.**  There the
  numbers must be **identical**, so the first :data:`REPLAY_ROUNDS` rounds are re-run (on through
  the first evaluated round where that is cheap: :func:`replay_rounds`) and every round's training
  loss and every evaluation in them (accuracies, losses, bytes) must equal the stored ones.  This
  also covers what the prefix does not reach: the server's aggregation and the evaluation.
  Elsewhere whole rounds are not compared: after a few hundred SGD steps the last-bit differences
  between CPUs' kernels are as large as those of a changed learning rate.

The sample is drawn afresh from a seed that changes with the commit (:func:`commit_seed`), so
successive commits look at different runs.
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
from pathlib import Path

import numpy as np
import torch

from .compute import compute_path, recorded_path, set_memory_format
from .engine import Federation, RunConfig, cpu_model, git_commit, run
from .errors import TrainingDiverged
from .federation import config_of
from .fingerprint import (
    PREFIX_OPTIMIZERS,
    PREFIX_RTOL,
    PREFIX_STEPS,
    differences,
    first_optimisers,
    prefix_of,
    truncated,
)
from .profiles import repo_relative
from .store import Store, _write_atomically, bound_of

REPLAY_ROUNDS = 2
REPLAY_TRAIN_S = 60.0  # the most recorded training seconds a replay spends to reach a run's first evaluation


def exact_expected(record: dict) -> bool:
    """Identical numbers are owed only on the CPU (``engine.cpu_model``: name, family, model, stepping,
    vector instructions), torch version and compute path (:func:`pflkit.compute.compute_path`) that
    made the run."""
    prov = record.get("provenance", {})
    return (
        prov.get("cpu") == cpu_model()
        and prov.get("torch") == torch.__version__
        and recorded_path(prov).get("env", {}) == compute_path().get("env", {})  # the replay sets the memory format
    )


def threads_of(record: dict) -> int:
    return int(record.get("canonical", {}).get("threads") or record["provenance"].get("threads", 1))


@contextlib.contextmanager
def as_recorded(record: dict):
    """Run with the stored run's torch thread count and memory format."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads_of(record))
    set_memory_format(recorded_path(record["provenance"])["memory_format"])
    try:
        yield
    finally:
        set_memory_format(None)
        torch.set_num_threads(previous)


def replay_prefix(record: dict) -> list[str]:
    """Recompute the stored run's prefix (:mod:`pflkit.fingerprint`); the differences found."""
    stored = record.get("prefix")
    if not stored:
        return ["it records no prefix (run `python -m pflkit replay --record` to record those missing)"]
    cfg = config_of(record)
    n, steps = min(stored["optimizers"], PREFIX_OPTIMIZERS), stored["steps"]  # a longer prefix: its first part
    stored = first_optimisers(stored, n)
    with as_recorded(record):
        now = prefix_of(cfg, optimizers=n, steps=steps)
    if record.get("diverged"):  # a run that blows up within its prefix does so a step earlier or later elsewhere
        common = min(len(stored["update"]), len(now["update"]))
        stored, now = truncated(stored, common), truncated(now, common)
    return differences(stored, now)


def replay(record: dict, rounds: int = REPLAY_ROUNDS) -> list[str]:
    """Re-run the first ``rounds`` rounds of a stored run; the differences from the stored numbers
    (empty: identical).  Only where :func:`exact_expected`."""
    if "round_loss" not in record:
        return ["it records no per-round training loss (made before the replay check existed)"]
    cfg = config_of(record)
    rounds = replay_rounds(cfg, rounds, True, train_s=_train_s(record))
    with as_recorded(record):
        try:
            now = run(cfg, Federation.from_config(cfg), stop_after=rounds)
        except TrainingDiverged as e:  # within the replayed rounds: as stored, if the record diverged too
            return [] if record.get("diverged") else [f"it diverges now: {e}"]
    problems = []
    for r, (old, new) in enumerate(zip(record["round_loss"][:rounds], now["round_loss"]), start=1):
        if not _same(old, new):
            problems.append(f"round {r} training loss {old!r} stored, {new!r} now")
    stored = {h["round"]: h for h in record["history"] if h["round"] <= rounds}
    for row in now["history"]:
        old = stored.get(row["round"])
        if old is None:
            problems.append(f"round {row['round']} was evaluated now but not in the stored run")
            continue
        for field, value in row.items():
            if field in ("round", "wall_s", "per_client_acc") or not isinstance(value, (int, float)):
                continue
            if not _same(old.get(field), value):
                problems.append(f"round {row['round']} {field} {old.get(field)!r} stored, {value!r} now")
    return problems


def _same(a: float, b: float) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b


def replay_rounds(cfg: RunConfig, rounds: int = REPLAY_ROUNDS, exact: bool = True, train_s: float | None = None) -> int:
    """On the machine kind that made the run (``exact``): the first ``rounds`` rounds and on
    through the first evaluated round, so that the evaluation is compared too (a pFedHN run
    evaluated every 50 rounds replays 50), unless reaching it would cost more than
    :data:`REPLAY_TRAIN_S` of the run's recorded training time (``train_s`` for all its rounds):
    a pilot run evaluated only at its end would replay whole, and the test suite's time would
    grow with the store.  Those, and every run elsewhere, replay the first ``rounds``, whose
    losses fingerprint the whole training state.  Elsewhere only those: the last-bit
    differences between CPUs grow with every round (a pFedHN-PC run made on an Intel Xeon left
    the loss tolerance after 7 of its 50 rounds on an AMD EPYC), so a longer replay there would
    call a sound run stale."""
    first = min(rounds, cfg.rounds)
    through_eval = min(max(rounds, cfg.eval_every), cfg.rounds)
    if not exact or (train_s is not None and train_s * through_eval / cfg.rounds > REPLAY_TRAIN_S):
        return first
    return through_eval


def _train_s(record: dict) -> float | None:
    return record.get("timing", {}).get("train_s")


def commit_seed() -> int:
    """A seed that changes with the commit (HEAD's hash), 0 outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5).stdout.strip()
        return int(out[:8], 16) if out else 0
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0


def replay_cost(record: dict, rounds: int = REPLAY_ROUNDS) -> float:
    """The recorded training seconds a replay of ``record`` repeats: its replayed rounds' share of
    the run's training time on this machine kind (0 elsewhere: there only the prefix replays)."""
    train_s = _train_s(record)
    if not train_s or not exact_expected(record):
        return 0.0
    cfg = config_of(record)
    return train_s * replay_rounds(cfg, rounds, True, train_s) / cfg.rounds


def sample(store: Store, k: int, seed: int, budget_s: float | None = None, rounds: int = REPLAY_ROUNDS) -> list[str]:
    """``k`` keys of the store's finished runs, drawn with ``seed`` (all of them when it holds fewer).
    ``budget_s``: the draw goes on through the store in the seed's order, keeping a run while the
    recorded training seconds of those kept (:func:`replay_cost`) stay within it; when none fits,
    the cheapest run is kept, so a check is never empty and its time does not grow with the store."""
    keys = store.keys()
    order = [keys[i] for i in np.random.default_rng(seed).permutation(len(keys))] if len(keys) > k else keys
    if budget_s is None:
        return sorted(order[:k])
    kept, spent, costs = [], 0.0, {}
    for key in order:
        costs[key] = replay_cost(store.get(key), rounds)
        if spent + costs[key] <= budget_s:
            kept.append(key)
            spent += costs[key]
        if len(kept) == k:
            break
    return sorted(kept) or [min(costs, key=costs.get)]


def verdict(record: dict, rounds: int = REPLAY_ROUNDS) -> tuple[str, list[str]]:
    """One stored run's replay: ``("replays" | "stale" | "diverged", details)``; a diverged run is
    reported as such when it replays (its details say why it counts as diverged)."""
    problems = replay_prefix(record)
    exact = exact_expected(record)
    if not problems and exact:
        problems = replay(record, rounds)
    if problems:
        return "stale", problems
    how = [
        "prefix"
        + (
            f" and first {replay_rounds(config_of(record), rounds, True, _train_s(record))} round(s), identical"
            if exact
            else f" within {PREFIX_RTOL:g}"
        )
    ]
    if record.get("diverged"):
        return "diverged", [record["diverged"]] + how
    return "replays", how


def check(
    path, k: int = 3, seed: int | None = None, rounds: int = REPLAY_ROUNDS, log=print, budget_s: float | None = None
) -> list[str]:  # fmt: skip
    """Replay a sample of ``k`` runs of the store at ``path`` (within ``budget_s`` recorded training
    seconds: :func:`sample`); one line per stale run (empty: none).  ``log`` gets one line for every
    run sampled (replays, stale, diverged, or the error it raised)."""
    store = Store(path, reuse="any")
    seed = commit_seed() if seed is None else seed
    stale = []
    for key in sample(store, k, seed, budget_s, rounds):
        f = repo_relative(store.file(key))
        try:
            status, details = verdict(store.get(key), rounds)
        except Exception as e:  # noqa: BLE001 - a run that cannot be replayed is reported, the others still are
            status, details = "stale", [f"replaying it raised {type(e).__name__}: {e}"]
        more = f" (and {len(details) - 1} more)" if status == "stale" and len(details) > 1 else ""
        log(f"{status}: {f}: {details[0]}{more}" + (f"; {details[1]}" if status == "diverged" else ""))
        if status == "stale":
            stale.append(f"stale run {f}: {details[0]}{more}; recompute it: rm {f} && make book FILL=1")
    return stale


def record_prefixes(path, force: bool = False, log=print) -> int:
    """Record the prefix of every run in the store at ``path`` that lacks one (``force``: of every
    run), with the run's thread count and memory format, into its file; returns how many."""
    store = Store(path, reuse="any")
    n = 0
    for key in store.keys():
        f = store.file(key)
        raw = json.loads(f.read_text())  # as stored (Store.get adds the divergence rule's verdict)
        if raw.get("prefix") and not force:
            continue
        cfg = config_of(raw)
        with as_recorded(raw):
            norms = prefix_of(cfg)
        raw["prefix"] = norms | {"optimizers": PREFIX_OPTIMIZERS, "steps": PREFIX_STEPS,
                                 "recorded": {"after": True, "git_commit": git_commit(), "cpu": cpu_model(),
                                              "compute": compute_path()}}  # fmt: skip
        raw.setdefault("loss_bound", bound_of(raw))
        _write_atomically(f, raw)
        n += 1
        log(f"{f}: prefix of {len(norms['grad'])} steps recorded")
    return n


def stores(root: Path) -> list[Path]:
    """The chapter stores under ``root`` (``results/``): folders holding run files."""
    return (
        sorted(p for p in Path(root).iterdir() if p.is_dir() and any(p.glob("*.json"))) if Path(root).is_dir() else []
    )
