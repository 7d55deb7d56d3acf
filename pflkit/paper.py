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
    return os.environ.get("PFLBOOK_ALLOW_CPU", "0").strip() not in ("", "0")


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
