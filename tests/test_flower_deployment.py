"""A real Flower deployment on loopback (issue 15): a SuperLink and two SuperNodes, each its own
process listening on 127.0.0.1 only; `flwr run` submits the kit's Flower App; every message is
answered in a new ClientApp process.  Two rounds of FedAvg and of pFedHN give the in-process
engine's numbers and ledger."""

from __future__ import annotations

import pytest

from pflkit.engine import run
from pflkit.errors import PflkitError
from tests.conftest import strip, tiny_config, torch_threads

pytestmark = pytest.mark.xdist_group("flower-deployment")  # one worker runs the SuperLink federations, in order

flower = pytest.importorskip("pflkit.flower")
pytest.importorskip("flwr.simulation")


def test_a_deployed_federation_equals_the_in_process_engine(tmp_path):
    cfgs = [
        tiny_config(method=m, clients=2, rounds=2, eval_every=1, classes_per_client=5) for m in ("fedavg", "pfedhn")
    ]
    with flower.local_federation(2, tmp_path / "flower") as superlink:
        assert superlink.startswith("127.0.0.1:")
        got = [flower.run_deployed(c, superlink, str(tmp_path / f"{c.method}.json"), threads=1) for c in cfgs]
    with torch_threads(1):  # the deployment's ServerApp and nodes ran with one thread
        wants = [run(c) for c in cfgs]
    for cfg, g, w in zip(cfgs, got, wants):
        assert g["provenance"]["threads"] == 1
        assert strip(g) == strip(w), cfg.method
        assert g["comm"] == w["comm"], cfg.method


def test_a_submission_without_a_superlink_says_so(tmp_path):
    with pytest.raises(PflkitError, match="flwr run failed"):
        flower.run_deployed(tiny_config(clients=2), "127.0.0.1:9", str(tmp_path / "r.json"), timeout=120)


def test_a_failed_deployed_run_says_why_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PFLKIT_FLOWER_NODE_WAIT", "1")  # the third node never comes: wait a second, not the default
    with flower.local_federation(2, tmp_path / "flower") as superlink:
        with pytest.raises(PflkitError, match="3 clients need as many Flower nodes; 2 are connected"):
            flower.run_deployed(tiny_config(clients=3, rounds=1), superlink, str(tmp_path / "r.json"), threads=1)


def test_superlink_needs_the_flower_engine(tmp_path):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "pflkit", "run", "fedavg", "--dataset", "digits", "--superlink", "127.0.0.1:9"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.strip().splitlines() == ["error: --superlink goes with --engine flower"]
