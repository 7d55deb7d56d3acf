"""Execution profiles of the book.

``smoke``: CI, each chapter within 2 minutes on a 2-core CPU; ``book``: what the rendered
book shows, each chapter within 10 minutes on that CPU (the default); ``paper``: the
papers' scale, meant for a GPU.  Chapters read the profile from ``PFLBOOK_PROFILE`` in
their ``parameters`` cell and pick values with :func:`pick`.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import PflkitError

PROFILES = ("smoke", "book", "paper")


def current() -> str:
    name = os.environ.get("PFLBOOK_PROFILE", "book").strip() or "book"
    if name not in PROFILES:
        raise PflkitError(f"PFLBOOK_PROFILE={name!r}; expected one of {', '.join(PROFILES)}")
    return name


def pick(smoke, book, paper, profile: str | None = None):
    """The value for the current (or given) profile."""
    return {"smoke": smoke, "book": book, "paper": paper}[profile or current()]


def store_for(chapter: str, profile: str | None = None) -> Path:
    """The result store of a chapter at a profile: ``_build/store/<profile>/<chapter>`` in the
    repository, or under ``$PFLBOOK_STORE_ROOT`` when set (``make test`` points nbval's
    re-execution at an empty folder, so that it recomputes instead of reading back)."""
    root = os.environ.get("PFLBOOK_STORE_ROOT") or Path(__file__).resolve().parent.parent / "_build" / "store"
    return Path(root) / (profile or current()) / chapter


def run_defaults(profile: str | None = None) -> dict:
    """Defaults of ``python -m pflkit run`` for options the user left out."""
    return {
        "clients": pick(10, 20, 50, profile),
        "rounds": pick(2, 20, 500, profile),
        "local_epochs": pick(1, 1, 5, profile),
    }
