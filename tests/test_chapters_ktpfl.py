"""The KT-pFL chapter's probes and measurements (pflkit.chapters.ktpfl)."""

from __future__ import annotations

import numpy as np
import pytest
from torch import nn

from pflkit.chapters.ktpfl import (
    by_architecture,
    c_mechanism,
    c_moved,
    c_probe,
    kt_probe,
    label_similarity,
    multiply_adds,
    round_mb,
    soft_vs_parameters,
)
from pflkit.engine import Federation, run
from tests.conftest import tiny_config


def test_multiply_adds_counts_linear_and_convolution_layers():
    assert (
        multiply_adds(nn.Sequential(nn.Flatten(), nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)), (1, 2, 2))
        == 4 * 3 + 3 * 2
    )
    conv = nn.Conv2d(1, 2, kernel_size=3, padding=1)  # 2 × 4 × 4 outputs, 9 weights each
    assert multiply_adds(conv, (1, 4, 4)) == 2 * 4 * 4 * 9


def test_c_moved_and_by_architecture_read_the_records():
    c = [[0.5, 0.2], [0.5, 0.8]]
    rec = {"config": {"rounds": 3, "method": "ktpfl", "options": {"models": "lenet,mlp"}},
           "final": {"per_client_acc": [0.5, 0.7, 0.9, 1.0]}}  # fmt: skip

    class Result:  # the two things the functions read of a SweepResult
        records = {("KT-pFL", 0): rec}

        def probes(self, arm, seed):
            return {3: {"c": c}}

        def __getitem__(self, pair):
            return self.records[pair]

    result = Result()
    assert c_moved(result, "KT-pFL", 0) == pytest.approx(0.3)
    arch = by_architecture(result)
    assert dict(zip(arch.architecture, arch.acc)) == pytest.approx({"lenet": 70.0, "mlp": 85.0})  # dealt in turn


def test_c_mechanism_reads_inert_below_the_threshold_and_acts_above_it():
    far = {0: 0.3, 1: 0.25, 2: 0.35}  # the largest |c − 1/2| per seed

    class Result:
        records = {("KT-pFL", s): {"config": {"rounds": 2}} for s in far}

        def __init__(self, scale):
            self.scale = scale

        def probes(self, arm, seed):
            d = self.scale * far[seed]
            return {2: {"c": [[0.5 + d, 0.5 - d], [0.5 - d, 0.5 + d]]}}

        def __getitem__(self, pair):
            return self.records[pair]

    acts = c_mechanism("c moves", Result(1.0), "KT-pFL", [0, 1, 2, 9], threshold=0.01)  # seed 9: no run, skipped
    assert acts["verdict"] == "reproduces" and acts["kind"] == "mechanism"
    assert acts["_v"].n == 3 and acts["_v"].mean == pytest.approx(0.3 - 0.01)
    assert "0.300" in acts["ours (a − b, 95 % CI)"] and "above 0.01 on 3" in acts["ours (a − b, 95 % CI)"]
    inert = c_mechanism("c moves", Result(0.01), "KT-pFL", [0, 1, 2], threshold=0.01)  # |c − 1/2| ≈ 0.003
    assert inert["verdict"] == "contradicted" and inert["flags"] == ["mechanism inert"]


def test_label_similarity_is_one_on_the_diagonal():
    cfg = tiny_config(partition="pathological", classes_per_client=2, clients=4)
    sim, mix = label_similarity(Federation.from_config(cfg))
    assert np.allclose(np.diag(sim), 1) and np.allclose(sim, sim.T) and np.allclose(mix.sum(1), 1)
    assert ((sim >= 0) & (sim <= 1)).all()


def test_probes_record_c_and_the_channel_in_the_right_methods():
    seen = {}
    for method in ("ktpfl", "fedmd", "fedavg"):
        cfg = tiny_config(method=method, rounds=2, local_steps=None, local_epochs=1, public_images=100,
                          partition="dirichlet", options={"T": 2.0} if method != "fedavg" else {})  # fmt: skip
        run(cfg, Federation.from_config(cfg),
            on_round=lambda r, row, s, cl, m=method: seen.update({(m, r): (c_probe(r, row, s, cl), kt_probe(r, row, s, cl))}))  # fmt: skip
    assert seen["ktpfl", 1][0] is None and len(seen["ktpfl", 2][0]["c"]) == 4  # c after the last round only
    assert "c" in seen["ktpfl", 2][1] and "c" not in seen["ktpfl", 1][1]
    assert len(seen["fedmd", 1][1]["grad_ratio"]) == 4 and seen["fedmd", 1][0] is None
    assert seen["fedavg", 2] == (None, None)


def test_figure_5_ledger_per_client_round_and_the_two_readings():
    import pandas as pd

    class Result:
        def finals(self):
            return pd.DataFrame({"arm": ["soft", "soft", "params"], "seed": [0, 1, 0], "rounds": [2, 4, 2],
                                 "MB_up": [4.0, 16.0, 40.0], "MB_down": [6.0, 24.0, 40.0]})  # fmt: skip

    soft = round_mb(Result(), "soft", n_clients=2)  # seed 1 ran on to twice the rounds: the same per round
    assert soft.to_dict("index") == {0: {"up": 1.0, "down": 1.5}, 1: {"up": 2.0, "down": 3.0}}
    params = round_mb(Result(), "params", n_clients=2)  # 10 up, 10 down
    d = soft_vs_parameters(soft, params, batch_mb=3.0)
    assert list(d["as run"].index) == [0]  # paired seeds only
    assert d["as run"][0] == pytest.approx(np.log(20 / 2.5))
    assert d["batch sent"][0] == pytest.approx(np.log(20 / (2 * 1.0 + 3.0)))
