"""Shared fixtures: a tiny offline federation (scikit-learn's digits) for fast method tests."""

from __future__ import annotations

import pytest

from pflkit.data import load_dataset
from pflkit.engine import Federation, RunConfig, pick_device
from pflkit.partitions import partition_dataset


@pytest.fixture(scope="session")
def digits():
    return load_dataset("digits")


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
        part = partition_dataset(
            digits, cfg.partition, cfg.clients, cfg.seed, classes_per_client=cfg.classes_per_client,
            shares=cfg.shares, alpha=cfg.alpha, val_fraction=cfg.val_fraction,
        )  # fmt: skip
        return Federation(digits, part, pick_device(cfg.device))

    return make
