"""The Flower engine: the same round loop with the clients in Flower ClientApps gives the same
numbers and the same ledger as the in-process engine (issue 15)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pflkit.engine import run
from pflkit.methods import METHODS as REGISTRY
from tests.conftest import PUBLIC, strip, tiny_config, torch_threads

pytestmark = pytest.mark.xdist_group("ray")  # one worker starts Ray (once for the module) and its simulations

flower = pytest.importorskip("pflkit.flower")
pytest.importorskip("flwr.simulation")

# every kit method: plain averaging, server-side state (the hypernetwork, α, centres, the
# coefficient matrix), setup messages (FeSEM), two-step rounds (FedMN, KT-pFL), a public set,
# personal state kept on the client between rounds (Ditto, FedPer), client-side dropout (FedMN).
# A node builds its client afresh for every message and loads what its last message left in the
# Flower context, as a deployed SuperNode must: equality checks that node_state is complete.
METHODS = sorted(REGISTRY)


def cfg_for(method):
    cfg = tiny_config(method=method, rounds=2, eval_every=1)
    if method in PUBLIC:
        cfg = dataclasses.replace(cfg, public_images=200)
    if method == "fedmn":
        cfg = dataclasses.replace(cfg, options={"arch": "2,2,2", "hidden": 16, "pretrain_fraction": 0.5})
    return cfg


def test_flower_simulation_equals_the_in_process_engine():
    cfgs = [cfg_for(m) for m in METHODS]
    # one torch thread on both engines, as in the store's runs: with two, one CI run differed in
    # the 8th digit of a validation loss (the node computes with the server's thread count)
    with torch_threads(1):
        on_flower = flower.run_flower(cfgs)  # one simulation (one Ray start) for all of them
        wants = [run(cfg) for cfg in cfgs]
    for cfg, got, want in zip(cfgs, on_flower, wants):
        assert strip(got) == strip(want), cfg.method
        assert got["comm"] == want["comm"], cfg.method  # the ledger: the same bytes each way


@pytest.mark.parametrize("method", ["ktpfl"])  # a two-step round, a public set, server state
def test_a_flower_run_stopped_and_resumed_from_its_checkpoint_equals_an_uninterrupted_one(tmp_path, method):
    """The server checkpoints its state; every node saves its client on its own disk (beside the
    checkpoint here) and loads it back on resuming, as a restarted SuperNode would."""
    cfg = dataclasses.replace(cfg_for(method), rounds=4, checkpoint=str(tmp_path / "ck.pt"))
    with torch_threads(1):
        flower.run_flower(cfg, stop_after=2)  # rounds 1-2, checkpointed after each
        resumed = flower.run_flower(cfg)  # a new simulation: new nodes, the same disk
        want = run(dataclasses.replace(cfg, checkpoint=None))
    assert sorted(p.name for p in (tmp_path / "ck.pt.nodes").iterdir())[:2] == [
        "ck.pt-client0-round2.pt", "ck.pt-client0-round3.pt"]  # fmt: skip
    assert strip(resumed) == strip(want)
    assert resumed["comm"] == want["comm"]


def test_a_node_and_the_deployed_server_read_the_whole_config_back():
    """The deployed ServerApp gets the run as JSON: the checkpoint path must survive (it once did not)."""
    cfg = dataclasses.replace(cfg_for("ktpfl"), checkpoint="/runs/ck.pt")
    assert flower.config_from_json(json.dumps(cfg.to_dict(), sort_keys=True)) == cfg
