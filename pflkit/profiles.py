"""Execution profiles of the book.

``smoke``: CI, each chapter within 2 minutes on a 2-core CPU, computed live; ``book``: what
the rendered book shows, at budgets where the headline runs have converged (the default): its
runs come from the store committed under ``results/<chapter>/`` and only missing ones are
computed (``make book`` computes none: see :func:`store_only`); ``paper``: the papers' own
experiments (their datasets, models, clients and budgets), meant for a GPU (``make paper``; its dry
run on fixture data: :func:`dry`).  Chapters read the profile from ``PFLBOOK_PROFILE`` in their
``parameters`` cell and pick values with :func:`pick` and :func:`budget`.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import PflkitError

PROFILES = ("smoke", "book", "paper")


def env_flag(name: str) -> bool:
    """An environment switch: set to anything but empty or ``0``."""
    return os.environ.get(name, "0").strip() not in ("", "0")


def current() -> str:
    name = os.environ.get("PFLBOOK_PROFILE", "book").strip() or "book"
    if name not in PROFILES:
        raise PflkitError(f"PFLBOOK_PROFILE={name!r}; expected one of {', '.join(PROFILES)}")
    return name


def pick(smoke, book, paper, profile: str | None = None):
    """The value for the current (or given) profile: what an experiment *is* (its datasets, models,
    partitions, client counts).  Its budget (rounds, epochs, seeds, grids, images): :func:`budget`."""
    return {"smoke": smoke, "book": book, "paper": paper}[profile or current()]


def dry() -> bool:
    """``PFLBOOK_DRY=1``: the `paper` profile's dry run (``make paper-dry`` runs it on fixture data, see
    :mod:`pflkit.fixtures`): the paper's datasets, models, partitions and client counts, every budget
    cut to smoke's (:func:`budget`), on the CPU."""
    return env_flag("PFLBOOK_DRY")


dry_run = dry  # the name budget() reads it by (its own argument is called ``dry``)


_SMOKE = object()  # budget's default dry value: smoke's


def budget(smoke, book, paper, profile: str | None = None, dry=_SMOKE):
    """A budget (rounds, local epochs, seeds, grids, image counts): :func:`pick`'s value, except in the
    `paper` profile's dry run (:func:`dry`), where it is ``dry`` when given, else smoke's: the dry run
    keeps the paper's shapes (datasets, models, client counts) and cuts the loops they multiply, so
    that every chapter's dry run fits ``make test``."""
    profile = profile or current()
    if profile == "paper" and dry_run():
        return smoke if dry is _SMOKE else dry
    return pick(smoke, book, paper, profile)


ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "results"  # the book profile's results, committed with the repository
# chapters whose book runs are kept in the committed store (every chapter now; a chapter left out
# would keep a build store and reuse only runs of the same kit sources)
COMMITTED_CHAPTERS = ("basics", "pfedhn", "pfedmb", "fesem", "fedmn", "ktpfl")


def repo_relative(path) -> str:
    """A path as the reader knows it: relative to the repository when inside it."""
    path = Path(path).resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def fresh() -> bool:
    """``PFLBOOK_FRESH=1`` (``make book FRESH=1``): recompute instead of reading the committed store."""
    return env_flag("PFLBOOK_FRESH")


def store_only() -> bool:
    """``PFLBOOK_STORE_ONLY=1`` (set by ``make book`` unless ``FILL=1`` or ``FRESH=1``): the
    committed store is read, never filled; a sweep that lacks runs raises
    :class:`~pflkit.errors.NotInStore`, and the chapter's page says "not computed yet" there."""
    return env_flag("PFLBOOK_STORE_ONLY")


def build_name(profile: str) -> str:
    """The folder name of a profile's builds and stores: ``paper-dry`` for the paper profile's dry run
    (:func:`dry`), so that it never mixes with a real paper run's."""
    return "paper-dry" if profile == "paper" and dry() else profile


def run_defaults(profile: str | None = None) -> dict:
    """Defaults of ``python -m pflkit run`` for options the user left out."""
    return {
        "clients": pick(10, 20, 50, profile),
        "rounds": pick(2, 20, 500, profile),
        "local_epochs": pick(1, 1, 5, profile),
    }
