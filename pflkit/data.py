"""Datasets as tensors.

Every dataset is held as a :class:`FedDataset`: uint8 images ``N x C x H x W`` and int64
labels for the official train and test sets, plus class names and normalisation
constants.  Training never goes through a per-sample ``DataLoader``: clients slice
these tensors (on the training device) by index, see :class:`pflkit.engine.ClientData`.

Files are looked for, in order, under ``$PFLKIT_DATA``, the repository's ``datasets/``
folder and system locations (Debian's ``dataset-fashion-mnist`` package).  A loader
downloads with torchvision only when asked to (``download=True``); a missing dataset
raises :class:`~pflkit.errors.DataUnavailable` with one line saying how to get it.

The parts every loader shares are in :mod:`pflkit.data_base`, the loaders of the datasets other than
Fashion-MNIST and digits in :mod:`pflkit.data_more`; importing this module registers them all, and their
names can be imported from here.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import torch

from .data_base import (  # noqa: F401  (re-exported: `from pflkit.data import ...` keeps working)
    DESCRIPTIONS,
    IDX_STEMS,
    LOADERS,
    OFFLINE_CHECKS,
    REPO_DATA,
    FedDataset,
    Loader,
    available_offline,
    data_roots,
    dataset_names,
    download_root,
    find_file,
    load_dataset,
    load_idx_pair,
    read_idx,
    register,
    with_pairs,
)
from .errors import DataUnavailable

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


# ----------------------------------------------------------------------------- Fashion-MNIST

FASHION_CLASSES = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
]
# Documented coarse groups for Fashion-MNIST (pFedHN §5.5 uses CIFAR-100's superclasses;
# Fashion-MNIST has none, so we group by garment type).
FASHION_COARSE_NAMES = ["tops", "bottoms & dresses", "footwear", "bags"]
FASHION_COARSE_OF_CLASS = [0, 1, 0, 1, 0, 2, 0, 2, 3, 2]


def _fashion_dirs(root) -> list[Path]:
    dirs = []
    for r in data_roots(root):
        dirs += [r / "fashion-mnist", r / "FashionMNIST" / "raw", r]
    return dirs + [DEBIAN_FASHION_MNIST]


def _idx_available(dirs_fn, stem):
    return lambda root: find_file(dirs_fn(root), stem) is not None


@register(
    "fashion-mnist",
    "Fashion-MNIST, 10 classes, 28x28 grey (Debian package dataset-fashion-mnist works offline)",
    _idx_available(_fashion_dirs, "train-images-idx3-ubyte"),
)
def load_fashion_mnist(root=None, download: bool = False) -> FedDataset:
    dirs = _fashion_dirs(root)
    train = load_idx_pair(dirs, "train-", "images-idx3-ubyte", "labels-idx1-ubyte")
    test = load_idx_pair(dirs, "t10k-", "images-idx3-ubyte", "labels-idx1-ubyte")
    if (train is None or test is None) and download:
        from ._compat import import_torchvision

        tv = import_torchvision()
        target = download_root(root)
        tv.datasets.FashionMNIST(str(target), train=True, download=True)
        tv.datasets.FashionMNIST(str(target), train=False, download=True)
        return load_fashion_mnist(root=root, download=False)
    if train is None or test is None:
        raise DataUnavailable(
            "Fashion-MNIST not found (looked in $PFLKIT_DATA, datasets/, "
            f"{DEBIAN_FASHION_MNIST}); run `apt-get install dataset-fashion-mnist` "
            "or pass --download on a machine with internet"
        )
    return FedDataset(
        "fashion-mnist",
        *train,
        *test,
        classes=list(FASHION_CLASSES),
        mean=(0.2860,),
        std=(0.3530,),
        coarse_of_class=list(FASHION_COARSE_OF_CLASS),
        coarse_names=list(FASHION_COARSE_NAMES),
    )


@register(
    "fashion-mnist-pairs",
    "Fashion-MNIST whose coarse groups are the class pairs (0, 1), ..., (8, 9) (pFedMB §V-B's pairs setting)",
    _idx_available(_fashion_dirs, "train-images-idx3-ubyte"),
)
def load_fashion_mnist_pairs(root=None, download: bool = False) -> FedDataset:
    """The same images as Fashion-MNIST; only the grouping the ``coarse`` protocol hands out changes."""
    return with_pairs(load_fashion_mnist(root, download), "fashion-mnist-pairs")


@register(
    "fashion-mnist-tops",
    "Fashion-MNIST's four tops (T-shirt/top, Pullover, Coat, Shirt: its most confusable classes), relabelled 0-3",
    _idx_available(_fashion_dirs, "train-images-idx3-ubyte"),
)
def load_fashion_mnist_tops(root=None, download: bool = False) -> FedDataset:
    """Only the images of Fashion-MNIST's coarse group "tops" (a regime where a client's two classes are hard to
    tell apart while a model shared by clients of other class pairs is pulled apart: pFedHN's headroom pilot)."""
    return only_classes(load_fashion_mnist(root, download), FASHION_COARSE_NAMES[0], "fashion-mnist-tops")


def only_classes(ds: FedDataset, group: str, name: str) -> FedDataset:
    """``ds`` restricted to the classes of its coarse group ``group``, relabelled 0, 1, ... in their order
    (train and test alike; no coarse groups left)."""
    keep = [c for c in range(ds.n_classes) if ds.coarse_names[ds.coarse_of_class[c]] == group]
    new = torch.full((ds.n_classes,), -1, dtype=torch.long)
    new[keep] = torch.arange(len(keep))
    tr, te = new[ds.y_train] >= 0, new[ds.y_test] >= 0
    return dataclasses.replace(
        ds, name=name, x_train=ds.x_train[tr], y_train=new[ds.y_train[tr]], x_test=ds.x_test[te],
        y_test=new[ds.y_test[te]], classes=[ds.classes[c] for c in keep], coarse_of_class=None, coarse_names=None,
    )  # fmt: skip


# ----------------------------------------------------------------------------- scikit-learn digits


@register(
    "digits",
    "scikit-learn's 8x8 digits (1797 images, ships with scikit-learn; fixed 80/20 split)",
    lambda root: True,
)
def load_digits(root=None, download: bool = False) -> FedDataset:
    from sklearn.datasets import load_digits as sk_digits
    from sklearn.model_selection import train_test_split

    bunch = sk_digits()
    x = np.clip(bunch.images * 16.0, 0, 255).astype(np.uint8)[:, None]  # 0..16 -> 0..255
    y = bunch.target.astype(np.int64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    return FedDataset(
        "digits",
        torch.from_numpy(xtr),
        torch.from_numpy(ytr),
        torch.from_numpy(xte),
        torch.from_numpy(yte),
        classes=[str(i) for i in range(10)],
        mean=(0.3,),
        std=(0.38,),
    )


# ----------------------------------------------------------------------------- the other datasets

# Imported here, after Fashion-MNIST and digits, so that the registry holds the datasets in the order it always has.
from .data_more import (  # noqa: E402, F401  (registers them; re-exported)
    CIFAR10_FILES,
    CIFAR100_FILES,
    EMNIST_CLASSES,
    EMNIST_STATS,
    LEAF_HINT,
    MNIST_PREFIXES,
    OMNIGLOT_SETS,
    load_celeba,
    load_cifar10,
    load_cifar10_pairs,
    load_cifar100,
    load_emnist_balanced,
    load_emnist_byclass,
    load_femnist,
    load_mnist,
    load_omniglot,
    pixel_stats,
    read_leaf_split,
)

# ----------------------------------------------------------------------------- obtaining data


def fetch_fashion_mnist(root=None) -> str:
    """Make Fashion-MNIST available: already there; else Debian's package (as root, with apt);
    else a torchvision download; else one clear error.  Returns where it was found."""
    import shutil
    import subprocess

    if available_offline("fashion-mnist", root):
        return "already available"
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        for refresh_lists in (False, True):
            if refresh_lists:
                subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=False)
            subprocess.run(
                ["apt-get", "install", "-y", "-q", "dataset-fashion-mnist"], capture_output=True, check=False
            )
            if available_offline("fashion-mnist", root):
                return "installed Debian package dataset-fashion-mnist"
    try:
        load_fashion_mnist(root=root, download=True)
        return "downloaded with torchvision"
    except Exception as err:  # no network, no package manager
        raise DataUnavailable(
            "Fashion-MNIST is not on this machine and could not be installed or downloaded; "
            "run `apt-get install dataset-fashion-mnist` (Debian/Ubuntu) or put the IDX files in "
            f"{REPO_DATA / 'fashion-mnist'} ({type(err).__name__})"
        ) from None


# ----------------------------------------------------------------------------- PFLlib's split (the peer check)

SPLIT_FILE = REPO_DATA.parent / "data" / "partitions" / "pfllib-fmnist-dir.npz"  # :func:`pflkit.peer.split_of`'s


def pooled_fashion_mnist(root=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Fashion-MNIST's official train then test images (uint8, N x 1 x 28 x 28) and labels, as
    PFLlib pools them before it deals them out."""
    ds = load_fashion_mnist(root)
    return torch.cat([ds.x_train, ds.x_test]), torch.cat([ds.y_train, ds.y_test])


@register(
    "fashion-mnist-pfllib",
    "Fashion-MNIST dealt out as PFLlib's Dirichlet-0.1 split of 20 clients (its train/test files; --partition natural)",
    lambda root: SPLIT_FILE.is_file() and _idx_available(_fashion_dirs, "train-images-idx3-ubyte")(root),
)
def load_fashion_mnist_pfllib(root=None, download: bool = False) -> FedDataset:
    if not SPLIT_FILE.is_file():
        raise DataUnavailable(f"{SPLIT_FILE} is missing: `python tools/pfllib_peer.py split SCRATCH` writes it")
    x, y = pooled_fashion_mnist(root)
    split = np.load(SPLIT_FILE)
    tr, te = torch.from_numpy(split["train"]), torch.from_numpy(split["test"])
    users = sorted(set(split["train_user"].tolist()))
    return FedDataset(
        "fashion-mnist-pfllib", x[tr], y[tr], x[te], y[te], classes=list(FASHION_CLASSES), mean=(0.5,), std=(0.5,),
        info={"users": [f"client {u}" for u in users], "train_user": split["train_user"],
              "test_user": split["test_user"], "split": "PFLlib FashionMNIST dir (Dirichlet 0.1, seed 1)"},
    )  # fmt: skip
