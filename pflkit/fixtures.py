"""Small stand-ins for the papers' datasets, written in each dataset's real on-disk format.

The `paper` profile's dry run (``make paper-dry``: ``tests/test_notebooks.py``, marker ``paper_dry``) executes every
chapter on these files: the shapes, channels and class counts of CIFAR-10/100, EMNIST, FEMNIST and
FedCelebA (LEAF's users), MNIST, Fashion-MNIST and Omniglot, with random pixels and a handful of
images per class, so that a change that breaks the paper profile (a model that does not take
3 × 32 × 32 images, a table that assumes ten classes, a natural partition) fails on a CPU in
seconds.  The loaders read them as they read the real files (:mod:`pflkit.data`), so nothing in
the kit knows it runs on a fixture.

    python -m pflkit.fixtures DIR [NAME ...]     # writes them under DIR (then PFLKIT_DATA=DIR)
"""

from __future__ import annotations

import gzip
import json
import pickle
import struct
import sys
from pathlib import Path

import numpy as np

# images per class in the training and test sets; LEAF datasets: users and images per user
PER_CLASS = {"mnist": (100, 20), "fashion-mnist": (200, 40), "emnist-balanced": (8, 2), "emnist-byclass": (6, 2),
             "cifar10": (80, 40), "cifar100": (20, 4), "omniglot": None}  # fmt: skip
LEAF_USERS = {"femnist": (24, 16, 62), "celeba": (24, 12, 2)}  # users, train images a user, classes
EMNIST_CLASSES = {"emnist-balanced": 47, "emnist-byclass": 62}


def _idx(path: Path, arr: np.ndarray) -> None:
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    header = struct.pack(">HBB", 0, 0x08, arr.ndim) + struct.pack(">" + "I" * arr.ndim, *arr.shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") if path.suffix == ".gz" else open(path, "wb") as fh:
        fh.write(header + arr.tobytes())


def _idx_pair(folder: Path, prefixes, n_classes: int, per_class, rng, gz: bool = False) -> None:
    """IDX images and labels (28 × 28 grey) for the train and test prefixes."""
    for prefix, n in zip(prefixes, per_class):
        y = rng.permutation(np.repeat(np.arange(n_classes), n)).astype(np.uint8)
        ext = ".gz" if gz else ""
        _idx(folder / f"{prefix}images-idx3-ubyte{ext}", rng.integers(0, 256, (len(y), 28, 28)))
        _idx(folder / f"{prefix}labels-idx1-ubyte{ext}", y)


def _pickle(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump(obj, fh, protocol=2)


def _cifar10(root: Path, per_class, rng) -> None:
    d = root / "cifar-10-batches-py"
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    train = rng.permutation(np.repeat(np.arange(10), per_class[0]))
    for i, part in enumerate(np.array_split(train, 5), start=1):  # five training batches, as the real files
        _pickle(d / f"data_batch_{i}", {"labels": part.tolist(), "data": rng.integers(0, 256, (len(part), 3072),
                                                                                        dtype=np.uint8)})  # fmt: skip
    test = rng.permutation(np.repeat(np.arange(10), per_class[1]))
    _pickle(
        d / "test_batch", {"labels": test.tolist(), "data": rng.integers(0, 256, (len(test), 3072), dtype=np.uint8)}
    )
    _pickle(d / "batches.meta", {"label_names": names, "num_vis": 3072})


def _cifar100(root: Path, per_class, rng) -> None:
    d = root / "cifar-100-python"
    coarse_of = np.arange(100) % 20  # five fine classes per superclass
    for name, n in zip(("train", "test"), per_class):
        fine = rng.permutation(np.repeat(np.arange(100), n))
        _pickle(d / name, {"fine_labels": fine.tolist(), "coarse_labels": coarse_of[fine].tolist(),
                           "data": rng.integers(0, 256, (len(fine), 3072), dtype=np.uint8)})  # fmt: skip
    _pickle(d / "meta", {"fine_label_names": [f"fine{i}" for i in range(100)],
                         "coarse_label_names": [f"superclass{i}" for i in range(20)]})  # fmt: skip


def _omniglot(root: Path, rng) -> None:
    from PIL import Image

    for s, alphabets in (("images_background", ("Latin", "Greek")), ("images_evaluation", ("Atlantean",))):
        for alphabet in alphabets:
            for c in range(1, 6):
                folder = root / "omniglot-py" / s / alphabet / f"character{c:02d}"
                folder.mkdir(parents=True, exist_ok=True)
                for j in range(1, 21):  # 20 drawings a character, 105 × 105, mode "1"
                    Image.fromarray(rng.random((105, 105)) > 0.2).save(folder / f"{c:04d}_{j:02d}.png")


def _leaf(folder: Path, users: dict) -> None:
    """LEAF JSON (``users[split]``: ``{user: (xs, ys)}``), one file a split."""
    for split, blob in users.items():
        (folder / split).mkdir(parents=True, exist_ok=True)
        text = {"users": list(blob), "num_samples": [len(ys) for _, ys in blob.values()],
                "user_data": {u: {"x": xs, "y": ys} for u, (xs, ys) in blob.items()}}  # fmt: skip
        (folder / split / "part_0.json").write_text(json.dumps(text))


def _femnist(root: Path, rng) -> None:
    n_users, n, k = LEAF_USERS["femnist"]

    def user(m):
        return (rng.integers(0, 256, (m, 784)) / 255).round(3).tolist(), rng.integers(0, k, m).tolist()

    _leaf(root / "femnist", {"train": {f"f{u:04d}": user(n) for u in range(n_users)},
                             "test": {f"f{u:04d}": user(max(n // 4, 1)) for u in range(n_users)}})  # fmt: skip


def _celeba(root: Path, rng) -> None:
    from PIL import Image

    n_users, n, _ = LEAF_USERS["celeba"]
    d = root / "celeba"
    (d / "raw" / "img_align_celeba").mkdir(parents=True, exist_ok=True)
    count = 0

    def user(m):
        nonlocal count
        names = []
        for _ in range(m):
            count += 1
            names.append(f"{count:06d}.jpg")
            Image.fromarray(rng.integers(0, 256, (218, 178, 3), dtype=np.uint8)).save(
                d / "raw" / "img_align_celeba" / names[-1]
            )
        return names, rng.integers(0, 2, m).astype(float).tolist()

    _leaf(
        d,
        {
            "train": {str(u): user(n) for u in range(n_users)},
            "test": {str(u): user(max(n // 4, 1)) for u in range(n_users)},
        },
    )


def write_fixture(name: str, root, seed: int = 0) -> Path:
    """Write dataset ``name``'s stand-in under ``root`` (a :data:`PFLKIT_DATA` folder); returns ``root``."""
    root, rng = Path(root), np.random.default_rng(seed)
    if name in ("mnist", "fashion-mnist"):
        _idx_pair(root / ("MNIST/raw" if name == "mnist" else "fashion-mnist"), ("train-", "t10k-"), 10,
                  PER_CLASS[name], rng, gz=True)  # fmt: skip
    elif name in EMNIST_CLASSES:
        split = name.split("-")[1]
        _idx_pair(root / "EMNIST" / "raw", (f"emnist-{split}-train-", f"emnist-{split}-test-"), EMNIST_CLASSES[name],
                  PER_CLASS[name], rng)  # fmt: skip
    elif name == "cifar10":
        _cifar10(root, PER_CLASS[name], rng)
    elif name == "cifar100":
        _cifar100(root, PER_CLASS[name], rng)
    elif name == "omniglot":
        _omniglot(root, rng)
    elif name == "femnist":
        _femnist(root, rng)
    elif name == "celeba":
        _celeba(root, rng)
    else:
        raise ValueError(f"no fixture for dataset {name!r}")
    return root


FIXTURES = ("mnist", "fashion-mnist", "emnist-balanced", "emnist-byclass", "cifar10", "cifar100", "omniglot", "femnist",
            "celeba")  # fmt: skip


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m pflkit.fixtures DIR [NAME ...]", file=sys.stderr)
        return 2
    for name in args[1:] or FIXTURES:
        if name not in FIXTURES:
            print(f"error: no fixture for {name!r}; known: {', '.join(FIXTURES)}", file=sys.stderr)
            return 2
        write_fixture(name, args[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
