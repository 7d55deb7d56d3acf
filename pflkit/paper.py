"""The `paper` profile's preflight: what the chapters need before they run the papers' experiments.

Each chapter names, in its ``parameters`` cell, the datasets it reads at every profile
(``DATASETS``).  Before ``make paper`` executes anything, :func:`preflight` reads those cells at
`paper` and stops with one line when a dataset is not on this machine (naming the command that
fetches it) or when no GPU is visible (unless the user asks for the CPU: ``PFLBOOK_ALLOW_CPU=1``).

    python -m pflkit paper-check [CHAPTER ...]      # exit 2 and one line when something is missing
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

from .errors import PflkitError

BOOK = Path(__file__).resolve().parent.parent / "book"
CHAPTERS = ("basics", "pfedhn", "pfedmb", "fesem", "fedmn", "ktpfl")  # the book's order


def allow_cpu() -> bool:
    """``PFLBOOK_ALLOW_CPU=1``: run the `paper` profile without a GPU (the dry run sets it)."""
    from .profiles import env_flag

    return env_flag("PFLBOOK_ALLOW_CPU")


@contextmanager
def _profile(profile: str):
    old = os.environ.get("PFLBOOK_PROFILE")
    os.environ["PFLBOOK_PROFILE"] = profile
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PFLBOOK_PROFILE", None)
        else:
            os.environ["PFLBOOK_PROFILE"] = old


def parameters(chapter: str, profile: str = "paper", book: Path = BOOK) -> dict:
    """The values a chapter's ``parameters`` cell sets at ``profile`` (the cell executed alone)."""
    path = book / f"{chapter}.ipynb"
    if not path.is_file():
        raise PflkitError(f"no chapter {chapter!r} (no {path})")
    cells = [c for c in json.loads(path.read_text())["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not cells:
        raise PflkitError(f"chapter {chapter!r} has no cell tagged 'parameters'")
    namespace: dict = {}
    with _profile(profile):
        exec(compile("".join(cells[0]["source"]), str(path), "exec"), namespace)  # the reader's own cell
    return {k: v for k, v in namespace.items() if not k.startswith("_") and k.isupper()}


def datasets(chapter: str, profile: str = "paper", book: Path = BOOK) -> list[str]:
    """The datasets a chapter reads at ``profile`` (its parameters cell's ``DATASETS``)."""
    names = parameters(chapter, profile, book).get("DATASETS")
    if not names:
        raise PflkitError(f"chapter {chapter!r} names no DATASETS in its parameters cell")
    return list(names)


def missing_line(chapter: str, name: str) -> str:
    """The one line that stops a run whose chapter needs a dataset this machine lacks."""
    return (f"chapter {chapter} needs the dataset {name} at the paper profile and it is not on this machine: "
            f"run `python -m pflkit fetch {name}` (or put its files under $PFLKIT_DATA)")  # fmt: skip


NO_GPU = ("the paper profile runs the papers' experiments and is meant for a GPU, and torch sees none "
          "(torch.cuda.is_available() is False); set PFLBOOK_ALLOW_CPU=1 to run it on the CPU anyway")  # fmt: skip


def preflight(chapters=CHAPTERS, book: Path = BOOK, gpu: bool | None = None) -> str | None:
    """None when the `paper` profile can run ``chapters`` here, else the one line that says why not:
    the first dataset missing (in the book's order), or no GPU (``gpu``: whether one is visible;
    default: ask torch) unless :func:`allow_cpu`."""
    from .data import available_offline

    for chapter in chapters:
        for name in datasets(chapter, "paper", book):
            if not available_offline(name):
                return missing_line(chapter, name)
    if gpu is None:
        import torch

        gpu = torch.cuda.is_available()
    if not gpu and not allow_cpu():
        return NO_GPU
    return None


# ----------------------------------------------------------------------------- its cost, before it starts

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "gpu_check.jsonl"


def step_seconds(benchmark: Path = BENCHMARK, results: Path | None = None) -> tuple[float, str]:
    """Seconds a local optimiser step takes on a GPU, measured: the median over ``benchmark``'s records
    (``benchmarks/gpu_check.py``: stored runs timed on CUDA, seconds a round) of a round's time over its
    steps (clients a round × local steps, read from the stored run), and the GPU's name.  The kit's models
    are small: a step costs its kernels' launches more than its arithmetic, so the time hardly depends on
    the model (a ResNet-18 costs more: the estimate is a lower bound there)."""
    import statistics

    results = results or benchmark.parent.parent.parent / "results"
    per_step, gpus = [], set()
    for line in benchmark.read_text().splitlines():
        rec = json.loads(line)
        stored = next(results.glob(f"*/{rec['run']}"), None)
        if stored is None:
            continue
        cfg = json.loads(stored.read_text())["config"]
        steps = max(1, round(cfg["clients"] * cfg.get("sample_rate", 1.0))) * (cfg.get("local_steps") or 1)
        per_step.append(rec["gpu_s_per_round"] / steps)
        gpus.add(rec["gpu"])
    if not per_step:
        raise PflkitError(f"no GPU timing of a stored run in {benchmark}")
    return statistics.median(per_step), ", ".join(sorted(gpus))


def cost(chapter: str, book: Path = BOOK) -> dict | None:
    """The paper profile's runs and optimiser steps of a chapter (its module's ``paper_cost`` on its
    parameters at `paper`), with the GPU-hours they take at :func:`step_seconds`; None when the chapter
    does not count them."""
    import importlib

    module = importlib.import_module(f"pflkit.chapters.{chapter}")
    if not hasattr(module, "paper_cost"):
        return None
    counted = module.paper_cost(parameters(chapter, "paper", book))
    seconds, gpu = step_seconds()
    return counted | {"gpu_hours": counted["steps"] * seconds / 3600, "gpu": gpu, "step_s": seconds}


def cost_table(chapters=CHAPTERS, book: Path = BOOK):
    """Per chapter: the paper profile's datasets, runs, optimiser steps and estimated GPU-hours (a
    DataFrame; "—" where a chapter does not count them yet)."""
    import pandas as pd

    rows = []
    for chapter in chapters:
        c = cost(chapter, book) or {}
        rows.append({"chapter": chapter, "datasets": ", ".join(datasets(chapter, "paper", book)),
                     "runs": c.get("runs"), "steps (M)": None if not c else round(c["steps"] / 1e6, 1),
                     "GPU-hours (est.)": None if not c else round(c["gpu_hours"], 1),
                     "what is counted": c.get("note", "not counted yet")})  # fmt: skip
    return pd.DataFrame(rows)
