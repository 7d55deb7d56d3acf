"""Shared fixtures: a tiny offline federation (scikit-learn's digits) for fast method tests."""

from __future__ import annotations

import contextlib
import dataclasses
import os

import pytest
import torch

from pflkit.data import load_dataset
from pflkit.engine import Federation, RunConfig, hold_out_public, pick_device, run
from pflkit.partitions import partition_dataset

if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs the unit tests on both cores: one torch thread each
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def digits():
    return load_dataset("digits")


# KT-pFL, its distillation baselines and FedDF learn from a public unlabeled set held out of the data
PUBLIC = {"ktpfl", "fedmd", "sim-pfd", "topk-pfd", "feddf", "pfeddf"}


def tiny_config(**kw) -> RunConfig:
    """A small, fast problem: 4 clients on digits, an MLP, a few local steps."""
    base = dict(
        dataset="digits", partition="pathological", clients=4, rounds=3, seed=0, model="mlp",
        classes_per_client=3, local_steps=8, batch_size=32, lr=0.05, momentum=0.9, device="cpu",
    )  # fmt: skip
    base.update(kw)
    return RunConfig(**base)


@pytest.fixture
def tiny_fed(digits):
    def make(cfg: RunConfig) -> Federation:
        ds, public = hold_out_public(digits, cfg.public_images)  # KT-pFL and FedDF need a public set
        part = partition_dataset(
            ds, cfg.partition, cfg.clients, cfg.seed, classes_per_client=cfg.classes_per_client,
            shares=cfg.shares, alpha=cfg.alpha, val_fraction=cfg.val_fraction,
        )  # fmt: skip
        return Federation(ds, part, pick_device(cfg.device), public)

    return make


@contextlib.contextmanager
def torch_threads(n: int):
    """Torch at ``n`` threads inside the block, restored after.  Bit-for-bit comparisons run with
    one, as the store's runs do: float sums depend on the thread count."""
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def strip(result: dict) -> list[dict]:
    """A run's history without its wall-clock times (the part that must be reproducible)."""
    return [{k: v for k, v in h.items() if k != "wall_s"} for h in result["history"]]


class Killed(Exception):
    """Raised from ``on_round`` to simulate a kill after a round's checkpoint."""


def killed_and_resumed(cfg: RunConfig, make_fed, checkpoint, kill_round: int = 2) -> dict:
    """Run ``cfg`` with checkpoints to ``checkpoint``, kill it when round ``kill_round`` is
    evaluated (before that round's checkpoint is written), and return the resumed run's result."""
    cfg = dataclasses.replace(cfg, checkpoint=str(checkpoint))

    def kill(rnd, row, server, clients):
        if rnd == kill_round:
            raise Killed

    with pytest.raises(Killed):
        run(cfg, make_fed(cfg), on_round=kill)
    return run(cfg, make_fed(cfg))


@pytest.fixture
def cli(capsys, tmp_path, monkeypatch):
    """``python -m pflkit ARGS`` in this process (:func:`pflkit.cli.main`, from ``tmp_path``): an object with
    ``returncode``, ``stdout`` and ``stderr`` as ``subprocess.run`` gives them, without a new interpreter's
    start (seconds a call).  A test that a real process prints one line keeps a subprocess."""
    from types import SimpleNamespace

    from pflkit.cli import main

    monkeypatch.chdir(tmp_path)

    def call(*args):
        capsys.readouterr()
        rc = main([str(a) for a in args])
        out = capsys.readouterr()
        return SimpleNamespace(returncode=rc, stdout=out.out, stderr=out.err)

    return call


@pytest.fixture
def no_real_data(tmp_path, monkeypatch):
    """Hide every dataset on this machine: only what a test writes (under the returned folder, which is
    ``PFLKIT_DATA``) is found."""
    from pflkit import data, data_base

    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PFLKIT_DATA", str(empty))
    monkeypatch.setattr(data_base, "REPO_DATA", tmp_path / "none")  # read by data_roots
    monkeypatch.setattr(data, "REPO_DATA", tmp_path / "none")  # read by fetch_fashion_mnist's message
    monkeypatch.setattr(data, "DEBIAN_FASHION_MNIST", tmp_path / "none")
    return empty
