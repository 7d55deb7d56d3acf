"""A federation whose clients come from known latent groups (for clustered FL: FeSEM, CFL).

The groups differ in p(x): every image a client holds, in its train, validation and test
splits alike, goes through its group's transform (uint8 in, uint8 out, whole batches):

``identity``  the image as it is
``rot90``     rotated by 90° counter-clockwise (``torch.rot90`` over height and width)
``invert``    255 − x: dark strokes on a bright background
``thicken``   strokes thickened by one pixel on every side: grey dilation, a 3×3 max-pool
              with stride 1 and padding 1

The label mixes are the usual Dirichlet protocol, drawn independently of the groups:
``P[:, c] ~ Dir(α)`` over clients for every class (:func:`pflkit.partitions.shares_dirichlet`;
FeSEM §6 uses α = 0.5).  Groups are dealt round-robin in a random order, so each of the G
groups has N/G clients (± 1).  The true group of client i is ``groups[i]`` (also kept in
``partition.params["groups"]``), to score a clustering with the adjusted Rand index.

    g = grouped_federation(load_dataset("fashion-mnist"), n_clients=20, seed=0)
    run(cfg, Federation(g.ds, g.partition, pick_device(cfg.device)))   # cfg.clients = 20

From the command line: ``python -m pflkit run fesem --partition groups --alpha 0.5 ...``
(all four transforms).

**Concept shift** (:func:`concept_federation`, ``--partition concept``): the groups differ in
p(y|x) only.  Every client gets 1/N of every class (the ``iid`` protocol), so p(x) and p(y) are
the same everywhere; group 0 keeps the labels, group g ≥ 1 relabels every sample through its own
fixed permutation π_g of the classes, with no class left in place (a derangement), in train,
validation and test alike.  The same image then means a different class in each group.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .data import FedDataset, pixel_stats
from .errors import PflkitError
from .partitions import Partition, partition_dataset


def _thicken(x: torch.Tensor) -> torch.Tensor:
    return F.max_pool2d(x.float(), kernel_size=3, stride=1, padding=1).to(torch.uint8)  # grey dilation


TRANSFORMS = {
    "identity": lambda x: x.clone(),
    "rot90": lambda x: torch.rot90(x, 1, dims=(-2, -1)).contiguous(),
    "invert": lambda x: 255 - x,
    "thicken": _thicken,
}
DEFAULT_TRANSFORMS = ("identity", "rot90", "invert", "thicken")


@dataclass
class Grouped:
    ds: FedDataset  # the transformed images (each client's samples through its group's transform)
    partition: Partition
    groups: np.ndarray  # the true group of every client
    transforms: list[str]  # transform of every group


def _deal_groups(n_clients: int, n_groups: int, seed: int) -> np.ndarray:
    """Groups dealt round-robin in a random order: each has n_clients / n_groups clients (± 1)."""
    rng = np.random.default_rng([seed, 7])  # independent of the partition's draws
    return rng.permutation(n_groups)[np.arange(n_clients) % n_groups]


def _group_samples(part: Partition, groups: np.ndarray, g: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The (train + validation, test) sample indices of the clients of group g."""
    mine = [c for c, grp in zip(part.clients, groups) if grp == g]
    tr = torch.as_tensor(np.concatenate([np.concatenate([c.train, c.val]) for c in mine]), dtype=torch.long)
    te = torch.as_tensor(np.concatenate([c.test for c in mine]), dtype=torch.long)
    return tr, te


def grouped_federation(
    ds: FedDataset,
    n_clients: int,
    seed: int = 0,
    transforms=DEFAULT_TRANSFORMS,
    alpha: float = 0.5,
    val_fraction: float = 0.1,
) -> Grouped:
    """``n_clients`` clients with Dirichlet(α) label mixes in ``len(transforms)`` groups."""
    transforms = list(transforms)
    unknown = [t for t in transforms if t not in TRANSFORMS]
    if unknown or not transforms:
        raise PflkitError(f"unknown group transform(s) {unknown}; known: {', '.join(TRANSFORMS)}")
    if len(transforms) > n_clients:
        raise PflkitError(f"{len(transforms)} groups need at least as many clients, got {n_clients}")
    part = partition_dataset(ds, "dirichlet", n_clients, seed, alpha=alpha, val_fraction=val_fraction)
    groups = _deal_groups(n_clients, len(transforms), seed)

    x_train, x_test = ds.x_train.clone(), ds.x_test.clone()
    for g, name in enumerate(transforms):
        tr, te = _group_samples(part, groups, g)
        x_train[tr] = TRANSFORMS[name](ds.x_train[tr])
        x_test[te] = TRANSFORMS[name](ds.x_test[te])

    used = torch.as_tensor(np.concatenate([np.concatenate([c.train, c.val]) for c in part.clients]), dtype=torch.long)
    mean, std = pixel_stats(x_train[used])
    name = f"{ds.name}-groups"
    out = dataclasses.replace(
        ds, name=name, x_train=x_train, x_test=x_test, mean=mean, std=std,
        info=dict(ds.info, groups=groups.tolist(), transforms=transforms, alpha=alpha),
    )  # fmt: skip
    part = dataclasses.replace(
        part, dataset=name, protocol="groups", params=dict(part.params, groups=groups.tolist(), transforms=transforms)
    )
    return Grouped(out, part, groups, transforms)


def derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly drawn permutation of range(n) that leaves no element in place (n >= 2)."""
    while True:
        p = rng.permutation(n)
        if (p != np.arange(n)).all():
            return p


def concept_federation(
    ds: FedDataset, n_clients: int, seed: int = 0, n_groups: int = 3, val_fraction: float = 0.1
) -> Grouped:
    """``n_clients`` iid clients in ``n_groups`` groups that differ only in p(y|x): group g's labels
    go through ``partition.params["label_maps"][g]`` (group 0: the identity)."""
    if not 1 <= n_groups <= n_clients or ds.n_classes < 2:
        raise PflkitError(f"concept shift needs 1 <= groups <= clients and >= 2 classes, got {n_groups} groups")
    part = partition_dataset(ds, "iid", n_clients, seed, val_fraction=val_fraction)
    groups = _deal_groups(n_clients, n_groups, seed)
    rng = np.random.default_rng([seed, 8])
    maps = [np.arange(ds.n_classes)]
    while len(maps) < n_groups:
        p = derangement(ds.n_classes, rng)
        if not any((p == m).all() for m in maps):
            maps.append(p)
    y_train, y_test = ds.y_train.clone(), ds.y_test.clone()
    for g, m in enumerate(maps):
        tr, te = _group_samples(part, groups, g)
        table = torch.as_tensor(m, dtype=ds.y_train.dtype)
        y_train[tr], y_test[te] = table[ds.y_train[tr]], table[ds.y_test[te]]
    name = f"{ds.name}-concept"
    label_maps = [m.tolist() for m in maps]
    out = dataclasses.replace(ds, name=name, y_train=y_train, y_test=y_test,
                              info=dict(ds.info, groups=groups.tolist(), label_maps=label_maps))  # fmt: skip
    part = dataclasses.replace(
        part, dataset=name, protocol="concept", params=dict(part.params, groups=groups.tolist(), label_maps=label_maps)
    )
    return Grouped(out, part, groups, [f"labels {m}" for m in label_maps])
