"""Replay check of a committed result store: are its runs what today's kit computes?

The ``book`` profile reads its runs from ``results/<chapter>/`` whatever kit sources made them
(:func:`pflkit.profiles.store_for`).  ``make test`` therefore re-runs the first
:data:`REPLAY_ROUNDS` rounds (on through the first evaluated round where that is cheap: :func:`replay_rounds`) of a
sample of stored runs, from each run's stored config and with
its recorded torch thread count, and compares them with what the run recorded:

* every round's mean training loss (``round_loss``: a fingerprint of the whole training
  state, since each round starts from the previous one's models), and
* every evaluated round within those rounds (accuracies, losses, bytes).

On the CPU model and torch version that made a run the numbers must be **identical**.
Elsewhere floating-point reductions may differ in the last bits and grow a little over two
rounds, so losses must agree to a relative :data:`LOSS_RTOL`, accuracies to
:data:`ACC_ATOL` (absolute, as a fraction), and bytes exactly.

The sample is drawn afresh from a seed that changes with the commit (:func:`commit_seed`), so
successive commits look at different runs.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
from pathlib import Path

import numpy as np
import torch

from .engine import Federation, RunConfig, cpu_model, run
from .errors import PflkitError
from .experiments import Store

REPLAY_ROUNDS = 2
LOSS_RTOL = 1e-3  # elsewhere: relative tolerance on losses
ACC_ATOL = 0.01  # elsewhere: absolute tolerance on accuracies (1 point)
ACC_FIELDS = ("mean_acc", "pooled_acc", "macro_f1", "micro_f1")
REPLAY_TRAIN_S = 60.0  # the most recorded training seconds a replay spends to reach a run's first evaluation


def config_of(record: dict) -> RunConfig:
    """The RunConfig a stored run was made from (fields added to the kit later keep their defaults)."""
    names = {f.name for f in dataclasses.fields(RunConfig)}
    d = dict(record["config"])
    unknown = sorted(set(d) - names)
    if unknown:
        raise PflkitError(f"run {record.get('key', '?')} has config fields this kit lacks: {', '.join(unknown)}")
    d["shares"] = tuple(d.get("shares", (0.4, 0.6)))
    if d.get("novel_alpha") is not None:
        d["novel_alpha"] = tuple(d["novel_alpha"])
    d["checkpoint"] = None
    return RunConfig(**d)


def exact_expected(record: dict) -> bool:
    """Identical numbers are owed only on the CPU (``engine.cpu_model``: name, family, model, stepping,
    vector instructions) and torch version that made the run; runs that recorded the name alone are
    checked within the tolerance."""
    prov = record.get("provenance", {})
    return prov.get("cpu") == cpu_model() and prov.get("torch") == torch.__version__


def _same(a: float, b: float, exact: bool, field: str) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if exact or field.endswith("bytes_up") or field.endswith("bytes_down"):
        return a == b
    if field.removeprefix("val_") in ACC_FIELDS:
        return abs(a - b) <= ACC_ATOL
    return abs(a - b) <= LOSS_RTOL * max(abs(a), abs(b), 1e-12)


def replay(record: dict, rounds: int = REPLAY_ROUNDS) -> list[str]:
    """Re-run the first ``rounds`` rounds of a stored run; the differences found (empty: it
    replays).  Uses the run's recorded torch thread count."""
    if "round_loss" not in record:
        return ["it records no per-round training loss (made before the replay check existed)"]
    cfg = config_of(record)
    exact = exact_expected(record)
    rounds = replay_rounds(cfg, rounds, exact, train_s=_train_s(record))
    threads = int(record.get("canonical", {}).get("threads") or record["provenance"].get("threads", 1))
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        now = run(cfg, Federation.from_config(cfg), stop_after=rounds)
    finally:
        torch.set_num_threads(previous)
    problems = []
    for r, (old, new) in enumerate(zip(record["round_loss"][:rounds], now["round_loss"]), start=1):
        if not _same(old, new, exact, "train_loss"):
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
            if not _same(old.get(field), value, exact, field):
                problems.append(f"round {row['round']} {field} {old.get(field)!r} stored, {value!r} now")
    return problems


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


def sample(store: Store, k: int, seed: int) -> list[str]:
    """``k`` keys of the store's finished runs, drawn with ``seed`` (all of them when it holds
    fewer).  Runs that diverged are left out: their record stops where the loss became NaN."""
    keys = [key for key in store.keys() if not store.get(key).get("diverged")]
    if len(keys) <= k:
        return keys
    return sorted(np.random.default_rng(seed).choice(keys, k, replace=False).tolist())


def check(path, k: int = 3, seed: int | None = None, rounds: int = REPLAY_ROUNDS, log=print) -> list[str]:
    """Replay a sample of ``k`` runs of the store at ``path``; one line per stale run (empty:
    all replayed).  ``log`` gets one line per run checked."""
    store = Store(path, reuse="any")
    seed = commit_seed() if seed is None else seed
    stale = []
    for key in sample(store, k, seed):
        record = store.get(key)
        problems = replay(record, rounds)
        f = store.file(key)
        where = "identical" if exact_expected(record) else "within tolerance"
        if problems:
            stale.append(
                f"stale run {f}: {problems[0]}"
                + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
                + f"; recompute it: rm {f} && make book"
            )
        else:
            log(
                f"{f}: first {replay_rounds(config_of(record), rounds, exact_expected(record), _train_s(record))} round(s) replay ({where})"
            )
    return stale


def stores(root: Path) -> list[Path]:
    """The chapter stores under ``root`` (``results/``): folders holding run files."""
    return (
        sorted(p for p in Path(root).iterdir() if p.is_dir() and any(p.glob("*.json"))) if Path(root).is_dir() else []
    )
