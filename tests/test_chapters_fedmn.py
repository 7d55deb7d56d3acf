"""The FedMN chapter's probes and measurements (pflkit.chapters.fedmn)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from pflkit.chapters.fedmn import (
    arrangements_text,
    client_groups,
    clipped_interval,
    common_seed_means,
    decision_ari,
    oracle_table,
    pi_spread,
    plain_pilot,
    router_probe,
    router_trace,
    routing_probe,
    swap_gain,
    swap_partners,
)
from pflkit.engine import Federation, run
from tests.conftest import tiny_config


def test_swap_partners_take_the_next_client_of_another_group():
    assert swap_partners([0, 0, 1, 1]) == {0: 2, 1: 2, 2: 0, 3: 0}
    assert swap_partners([1, 1, 1]) == {0: 0, 1: 1, 2: 2}  # one group: nobody to swap with


def test_decision_ari_is_one_on_separated_groups_and_undefined_without_spread():
    paths = [[0.9, 0.1], [0.8, 0.2], [0.1, 0.9], [0.2, 0.8]]
    assert decision_ari(paths, [0, 0, 1, 1], 2) == pytest.approx(1.0)
    assert decision_ari(paths, [0, 1, 0, 1], 2) < 0.5
    assert np.isnan(decision_ari([[0.5, 0.5]] * 4, [0, 0, 1, 1], 2))


def test_swap_gain_and_pi_spread_read_the_probe():
    probes = {("FedMN", 0): {5: {"swap": [[0.9, 0.7], [0.8, 0.8]], "pi": [[0.2, 0.5], [0.6, 0.5]]}},
              ("FedMN", 1): {5: {"swap": [[0.5, 0.6], [0.5, 0.6]], "pi": [[0.5, 0.5], [0.5, 0.5]]}}}  # fmt: skip
    result = SimpleNamespace(seeds=[0, 1, 2], records=dict.fromkeys(probes), probes=lambda a, s: probes[a, s])
    gain = swap_gain(result, "FedMN", 5)
    assert list(gain.index) == [0, 1]  # seed 2 has no run
    assert gain[0] == pytest.approx(10.0) and gain[1] == pytest.approx(-10.0)  # points
    assert pi_spread(result, "FedMN", 0, 5) == pytest.approx(0.1)  # std over clients 0.2 and 0, mean over paths
    assert pi_spread(result, "FedMN", 1, 5) == 0.0


def test_routing_probe_records_decisions_and_the_swap_test_after_the_last_round():
    cfg = tiny_config(method="fedmn", partition="label-clusters", label_clusters=2, alpha=0.4, rounds=2,
                      options={"hidden": 16, "label_dim": 4, "arch": "2,2,2"})  # fmt: skip
    fed = Federation.from_config(cfg)
    seen = {}
    run(cfg, fed, on_round=lambda r, row, server, clients: seen.update({r: routing_probe(r, row, server, clients)}))
    assert seen[1] is None  # only after the last round
    p = seen[2]
    assert len(p["paths"]) == len(p["pi"]) == len(p["active"]) == len(p["swap"]) == cfg.clients
    assert all(0 <= v <= 1 for row in p["pi"] for v in row)
    groups = client_groups(fed)
    assert set(groups) <= {0, 1} and len(groups) == cfg.clients
    other = tiny_config(method="fedavg", rounds=1)
    assert run(other, Federation.from_config(other), on_round=lambda *a: seen.update(fedavg=routing_probe(*a)))
    assert seen["fedavg"] is None


def test_arrangements_text_names_every_block_count():
    assert arrangements_text({9: ["1,4,4", "1,3,5", "1,2,6"], 10: ["1,5,4"]}) == (
        "for 9 blocks [1×4×4], [1×3×5] and [1×2×6]; for 10 blocks [1×5×4]"
    )


def test_clipped_interval_cuts_the_interval_to_the_ari_range():
    v = SimpleNamespace(mean=0.6, lo=0.1, hi=1.1, n=3)
    assert clipped_interval(v) == "+0.60 ARI [+0.10, +1.00] (3 seeds)"
    assert (
        clipped_interval(SimpleNamespace(mean=-0.2, lo=-1.5, hi=0.3, n=3), digits=1)
        == "-0.2 ARI [-1.0, +0.3] (3 seeds)"
    )
    assert clipped_interval(SimpleNamespace(mean=0.5, lo=float("nan"), hi=float("nan"), n=1)) == "+0.50 ARI (1 seed)"
    assert clipped_interval(v, unit="") == "+0.60 [+0.10, +1.00] (3 seeds)"


def test_plain_pilot_shows_the_chosen_value_and_accuracy():
    summary = pd.DataFrame({"chosen": ["lr=0.05", "router_lr=1"], "val_mean_acc": ["73.8", "80.9"],
                            "at the grid's edge": ["", "yes"]}, index=["Local", "FedMN"])  # fmt: skip
    out = plain_pilot(summary)
    assert list(out.columns) == ["chosen learning rate", "validation accuracy (%)", "at the grid's edge"]
    assert list(out["chosen learning rate"]) == ["0.05", "1"]
    assert list(summary["chosen"]) == ["lr=0.05", "router_lr=1"]  # the input is left alone


def test_common_seed_means_use_only_the_seeds_every_arm_ran():
    values = {
        "A": pd.Series({0: 80.0, 1: 82.0, 2: 84.0, 3: 90.0, 4: 90.0}),
        "B": pd.Series({0: 85.0, 1: 85.0, 2: 86.0}),
    }
    means, common = common_seed_means(values)
    assert common == [0, 1, 2]
    assert list(means.index) == ["B", "A"]
    assert means["A"] == pytest.approx(82.0) and means["B"] == pytest.approx(85.333333)


def test_router_probe_adds_the_routers_input_every_routing_round_and_the_oracle_at_the_end():
    cfg = tiny_config(method="fedmn", partition="label-clusters", label_clusters=2, alpha=0.4, rounds=4, eval_every=1,
                      options={"hidden": 16, "label_dim": 4, "arch": "2,2,2", "pretrain_fraction": 0.25})  # fmt: skip
    seen = {}
    run(cfg, Federation.from_config(cfg), on_round=lambda r, row, s, c: seen.update({r: router_probe(r, row, s, c)}))
    assert {r for r, p in seen.items() if p} == {1, 2, 3, 4}  # from the switch (after round 1) on
    assert all(p["gap"] >= 0 and 0 < p["label_share"] < 1 and p["g_sd"] >= 0 for p in seen.values())
    assert "oracle" not in seen[3] and len(seen[4]["oracle"]) == cfg.clients and "swap" in seen[4]
    records = {("FedMN", 0): {"config": {"rounds": 4}}}
    result = type("R", (), {"records": records, "probes": lambda self, a, s: seen,
                            "__getitem__": lambda self, k: records[k]})()  # fmt: skip
    trace = router_trace(result, "FedMN")
    assert list(trace["round"]) == [1, 2, 3, 4] and list(trace.columns) == [
        "seed",
        "round",
        "gap",
        "label_share",
        "g_sd",
    ]
    table = oracle_table(result, "FedMN")
    assert table.shape == (1, 4) and 0 <= table.values.min() and table.values.max() <= 100
