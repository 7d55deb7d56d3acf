"""The basics chapter's measurements (pflkit.chapters.basics)."""

from __future__ import annotations

import pandas as pd

from pflkit.chapters.basics import paper_gap, published, strip_times


def test_published_reads_the_settings_with_the_prefix_only():
    df = pd.DataFrame({"setting": ["Dirichlet 0.1", "pathological", "Dirichlet 0.1"],
                       "method": ["FedAvg", "FedAvg", "Ditto"], "value": [80.0, 70.0, 90.0]})  # fmt: skip
    assert published(df, "Dirichlet") == {"FedAvg": 80.0, "Ditto": 90.0}
    assert published(df, "IID") == {}


def test_paper_gap_needs_both_methods():
    source = {"FedAvg": 80.0, "Ditto": 90.5}
    assert paper_gap(source, "Ditto", "FedAvg") == 10.5
    assert paper_gap(source, "FedAvg", "FedAvg") == 0.0
    assert paper_gap(source, "Local", "FedAvg") is None


def test_strip_times_drops_only_the_wall_clock():
    a = {"history": [{"round": 1, "mean_acc": 0.5, "wall_s": 1.0}, {"round": 2, "mean_acc": 0.6, "wall_s": 2.0}]}
    b = {"history": [{"round": 1, "mean_acc": 0.5, "wall_s": 9.0}, {"round": 2, "mean_acc": 0.6, "wall_s": 7.0}]}
    assert strip_times(a) == strip_times(b) == [{"round": 1, "mean_acc": 0.5}, {"round": 2, "mean_acc": 0.6}]
    b["history"][1]["mean_acc"] = 0.61
    assert strip_times(a) != strip_times(b)
