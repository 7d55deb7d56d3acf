"""Experiments: the layer every chapter gets its numbers and verdicts from, in four modules.

* :mod:`pflkit.store` — the result store: one JSON file per finished run, keyed by its canonical
  config, read with the divergence rule;
* :mod:`pflkit.sweeps` — sweeps of named configs × seeds (worker processes or any Executor), a
  run in a worker, the budget flag, :class:`SweepResult`;
* :mod:`pflkit.verdicts` — the book's one verdict rule and the claims tables;
* :mod:`pflkit.tuning` — choices on validation: grids, pilots, grids grown past an edge, the
  divergence fallback, FeSEM's §5.2 scan of K.

This module gathers their names, so that ``from pflkit.experiments import sweep, tune, verdict``
reads as one layer.
"""

from __future__ import annotations

from .errors import NotInStore  # what a read-only store raises
from .store import (
    Store,
    _log_usage,
    _write_atomically,
    bound_of,
    canonical,
    code_version,
    cores,
    run_key,
)
from .sweeps import (
    FINAL_METRICS,
    IMPROVING_POINTS,
    SweepResult,
    _local_workers,
    _run_all,
    _set_threads,
    arms_for,
    cpu_hours,
    diverged_record,
    execute,
    improvement,
    probe_name,
    still_improving,
    sweep,
)
from .tuning import (
    Tuning,
    choose_k,
    grid,
    headroom,
    sweep_stable,
    tune,
    tune_axis,
)
from .verdicts import (
    CEILING,
    CONFIDENCE,
    DECISION_FLOOR,
    MIN_SEEDS,
    RESOLUTION,
    SD_UPPER,
    SEED_CAP,
    WORDS,
    Verdict,
    _budget,
    claim,
    claim_row,
    claims_data,
    claims_table,
    fmt_interval,
    interval,
    mechanism,
    paper_vs_ours,
    planned_seeds,
    pooled_sd,
    saturation,
    sd_upper,
    seed_plan,
    seeds_needed,
    tally,
    verdict,
    write_claims,
)

__all__ = [
    "headroom",
    "write_claims",
    "tally",
    "saturation",
    "planned_seeds",
    "mechanism",
    "claims_data",
    "RESOLUTION",
    "CEILING",
    "_budget",
    "_local_workers",
    "_log_usage",
    "_run_all",
    "_set_threads",
    "_write_atomically",
    "arms_for",
    "bound_of",
    "canonical",
    "choose_k",
    "claim",
    "claim_row",
    "claims_table",
    "code_version",
    "CONFIDENCE",
    "cores",
    "cpu_hours",
    "DECISION_FLOOR",
    "diverged_record",
    "execute",
    "FINAL_METRICS",
    "fmt_interval",
    "grid",
    "improvement",
    "IMPROVING_POINTS",
    "interval",
    "MIN_SEEDS",
    "NotInStore",
    "paper_vs_ours",
    "pooled_sd",
    "probe_name",
    "run_key",
    "SD_UPPER",
    "sd_upper",
    "SEED_CAP",
    "seed_plan",
    "seeds_needed",
    "still_improving",
    "Store",
    "sweep",
    "sweep_stable",
    "SweepResult",
    "tune",
    "tune_axis",
    "Tuning",
    "verdict",
    "Verdict",
    "WORDS",
]
