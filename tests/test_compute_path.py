"""Compute paths, the prefix fingerprint, the divergence rule, and a replay on another CPU path."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys

import pytest
import torch

from pflkit import compute, fingerprint, replay
from pflkit import experiments as ex
from pflkit.engine import DIVERGE_FACTOR, exploded, loss_bound
from pflkit.models import build_model
from tests.conftest import tiny_config, torch_threads

# a small convolutional run on real images: LeNet on 600 Fashion-MNIST images, 4 clients
CONV = dict(dataset="fashion-mnist", model="lenet", train_images=600, test_images=200, clients=4, rounds=2,
            classes_per_client=2, local_steps=6, batch_size=20, lr=0.05)  # fmt: skip


def conv_config(**kw):
    return tiny_config(**(CONV | kw))


def test_auto_lays_out_the_measured_families_channels_last():
    def last(name, mode=None):
        compute.set_memory_format(mode)
        try:
            m = build_model(name, (1, 28, 28), 10)
        finally:
            compute.set_memory_format(None)
        w = [p for p in m.parameters() if p.dim() == 4][-1]  # one with several input channels
        return w.is_contiguous(memory_format=torch.channels_last) and not w.is_contiguous()

    assert last("lenet") and last("alexnet-16") and not last("resnet18-4")  # measured: 1.3x, 1.2x, ~1.0x
    assert not last("lenet", "contiguous") and last("resnet18-4", "channels_last")
    assert compute.family("alexnet-16") == "alexnet" and compute.family("mlp8x256") == "mlp"
    with pytest.raises(Exception, match="memory format"):
        compute.set_memory_format("nhwc")


def test_the_memory_format_changes_the_path_not_the_mathematics(tiny_fed):
    from pflkit.engine import Federation, run

    cfg = conv_config(rounds=1)
    fed = Federation.from_config(cfg)
    out = {}
    for mode in ("contiguous", "channels_last"):
        compute.set_memory_format(mode)
        try:
            with torch_threads(1):
                out[mode] = run(cfg, fed)
        finally:
            compute.set_memory_format(None)
    a, b = out["contiguous"]["round_loss"][0], out["channels_last"]["round_loss"][0]
    assert abs(a - b) < 1e-4 * a  # other kernels (last bits apart on some CPUs, equal on others): the same run
    assert out["channels_last"]["provenance"]["compute"]["memory_format"] == "channels_last"


def test_the_prefix_records_the_first_steps_of_the_first_optimisers(tiny_fed):
    cfg = tiny_config(local_steps=5)
    with torch_threads(1):
        a = fingerprint.prefix_of(cfg, tiny_fed(cfg), optimizers=2, steps=3)
        b = fingerprint.prefix_of(cfg, tiny_fed(cfg), optimizers=2, steps=3)
        lr = fingerprint.prefix_of(dataclasses.replace(cfg, lr=cfg.lr * 1.01), tiny_fed(cfg), optimizers=2, steps=3)
    assert a == b and a["optimizer"] == [0, 0, 0, 1, 1, 1] and len(a["grad"]) == len(a["update"]) == 6
    assert fingerprint.differences(a, b) == []
    assert lr["grad"][0] == a["grad"][0]  # the first gradient does not know the learning rate
    assert abs(fingerprint.relative(lr["update"][0], a["update"][0]) - 0.01 / 1.01) < 1e-6  # its step does
    assert fingerprint.differences(a, lr) and "update norm" in fingerprint.differences(a, lr)[0]


def test_a_run_records_its_prefix_as_it_trains_and_after_a_resume(tmp_path, tiny_fed):
    res = ex.sweep({"FedAvg": tiny_config(rounds=3)}, [0], tmp_path / "s", workers=1, progress=False)
    rec = res["FedAvg", 0]
    with torch_threads(1):
        again = fingerprint.prefix_of(replay.config_of(rec))
    assert {k: rec["prefix"][k] for k in again} == again  # what the replay recomputes, bit for bit
    assert rec["prefix"]["optimizers"] == fingerprint.PREFIX_OPTIMIZERS and "compute" in rec["provenance"]


def test_divergence_is_a_loss_that_leaves_the_bound():
    bound = loss_bound(10)
    assert bound == pytest.approx(DIVERGE_FACTOR * math.log(10))
    assert exploded([2.3, 1.1, 0.4], bound) is None
    assert "round 2" in exploded([2.3, 3e5, 1.9], bound)  # blew up and recovered: diverged all the same
    assert "round 3" in exploded([2.3, 1.0, float("inf")], bound)
    assert exploded([float("nan"), 1.0], bound) is None  # a round that reported no loss


def test_a_run_that_explodes_is_stored_as_diverged_and_old_ones_are_read_so(tmp_path):
    res = ex.sweep({"hot": tiny_config(lr=40.0, momentum=0.9)}, [0], tmp_path / "s", workers=1, progress=False)
    assert res["hot", 0].get("diverged") and bool(res.finals().diverged.iloc[0])
    ok = ex.sweep({"FedAvg": tiny_config()}, [0], tmp_path / "t", workers=1, progress=False)["FedAvg", 0]
    store = ex.Store(tmp_path / "t")
    old = json.loads(json.dumps(ok))
    old["round_loss"][0] = 3e5  # stored before the rule read more than NaN, recovered afterwards
    old["provenance"]["cpu"] = "the CPU that made it"  # here: where it blew up and recovered (prefix only)
    store.put(old["key"], old)
    assert "left the bound" in store.get(old["key"])["diverged"]
    status, details = replay.verdict(store.get(old["key"]))
    assert status == "diverged" and "left the bound" in details[0]


@pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"), reason="needs Fashion-MNIST")
def test_another_compute_path_replays_and_tampered_runs_do_not(tmp_path):
    """Runs made on this path replay under oneDNN limited to other instructions (another CPU,
    simulated); copies whose learning rate, seed or an option changed are stale there."""
    arms = {"FedAvg": conv_config(), "FedProx": conv_config(method="fedprox", options={"mu": 0.1})}
    res = ex.sweep(arms, [0], tmp_path / "store", workers=1, progress=False)
    store = ex.Store(tmp_path / "store")

    def copy(arm, edit):
        r = json.loads(json.dumps(res[arm, 0]))
        edit(r["config"])
        r["key"] = f"tampered-{len(store)}"
        store.put(r["key"], r)
        return r["key"]

    bad = {copy("FedAvg", lambda c: c.__setitem__("lr", c["lr"] * 1.01)): "lr × 1.01",
           copy("FedAvg", lambda c: c.__setitem__("seed", 1)): "seed",
           copy("FedProx", lambda c: c["options"].__setitem__("mu", 0.0)): "option"}  # fmt: skip
    other = "SSE41" if os.environ.get("ONEDNN_MAX_CPU_ISA") == "AVX2" else "AVX2"  # not the path that made them
    env = os.environ | {"ONEDNN_MAX_CPU_ISA": other, "PYTHONPATH": os.getcwd()}
    out = subprocess.run([sys.executable, "-m", "pflkit", "replay", str(store.path), "--sample", "10"],
                         capture_output=True, text=True, env=env)  # fmt: skip
    lines = out.stdout.splitlines()
    assert out.returncode == 2 and len(lines) == 5, out.stdout + out.stderr
    for key in bad:
        assert any(line.startswith("stale:") and key in line for line in lines), bad[key]
    good = [line for line in lines if line.startswith("replays:")]
    assert len(good) == 2 and all(f"within {fingerprint.PREFIX_RTOL:g}" in line for line in good)
