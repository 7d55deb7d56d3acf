"""The basics chapter's small measurements: the published numbers it sets beside its runs, and whether
two engines ran the same experiment."""

from __future__ import annotations

import pandas as pd


def published(df: pd.DataFrame, setting_prefix: str) -> dict[str, float]:
    """A source's published accuracy per method, in the settings whose name starts with ``setting_prefix``."""
    d = df[df.setting.str.startswith(setting_prefix)]
    return dict(zip(d.method, d.value))


def paper_gap(source: dict[str, float], a: str, b: str) -> float | None:
    """The published difference a − b, or None when the source does not report both."""
    return source[a] - source[b] if a in source and b in source else None


def strip_times(rec: dict) -> list[dict]:
    """A run's per-round history without its wall-clock times: what two engines running the same
    experiment must agree on exactly."""
    return [{k: v for k, v in row.items() if k != "wall_s"} for row in rec["history"]]
