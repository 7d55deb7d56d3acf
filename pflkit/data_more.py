"""Loaders of the datasets beyond Fashion-MNIST and digits: MNIST, EMNIST, CIFAR-10/100, Omniglot and LEAF's
FEMNIST and FedCelebA, each registered by name (:func:`pflkit.data_base.register`); :mod:`pflkit.data` imports them."""

from __future__ import annotations

import json
import pickle
import string
from pathlib import Path

import numpy as np
import torch

from .data_base import (
    FedDataset,
    _find_dir,
    _idx_sets,
    _idx_stems,
    _require,
    _tv,
    data_roots,
    register,
    with_pairs,
)
from .errors import DataUnavailable, PflkitError

# ----------------------------------------------------------------------------- MNIST

MNIST_PREFIXES = ("train-", "t10k-")


def _mnist_dir(root) -> Path | None:
    dirs = [d for r in data_roots(root) for d in (r / "MNIST" / "raw", r / "mnist")]
    return _find_dir(dirs, _idx_stems(MNIST_PREFIXES))


@register(
    "mnist",
    "MNIST, 10 classes, 28x28 grey (IDX files in MNIST/raw/ or mnist/)",
    lambda root: _mnist_dir(root) is not None,
)
def load_mnist(root=None, download: bool = False) -> FedDataset:
    def fetch(target):
        for train in (True, False):
            _tv().datasets.MNIST(target, train=train, download=True)

    d = _require(
        "MNIST",
        lambda: _mnist_dir(root),
        fetch,
        root,
        download,
        "MNIST/raw/train-images-idx3-ubyte etc.",
    )
    return FedDataset(
        "mnist",
        *_idx_sets(d, MNIST_PREFIXES),
        classes=[str(i) for i in range(10)],
        mean=(0.1307,),
        std=(0.3081,),
    )


# ----------------------------------------------------------------------------- EMNIST

EMNIST_CLASSES = {
    "balanced": list(string.digits + string.ascii_uppercase + "abdefghnqrt"),
    "byclass": list(string.digits + string.ascii_uppercase + string.ascii_lowercase),
}
# Approximate statistics of EMNIST's images (the usual quoted values; transposing the
# images, as we do, does not change them).
EMNIST_STATS = {"balanced": ((0.1751,), (0.3332,)), "byclass": ((0.1736,), (0.3317,))}


def _emnist_prefixes(split: str):
    return (f"emnist-{split}-train-", f"emnist-{split}-test-")


def _emnist_dir(root, split: str) -> Path | None:
    dirs = [r / "EMNIST" / "raw" for r in data_roots(root)]
    return _find_dir(dirs, _idx_stems(_emnist_prefixes(split)))


def _load_emnist(split: str, root, download: bool) -> FedDataset:
    """EMNIST's files store every image transposed; we transpose back so that
    characters are upright (torchvision leaves them transposed)."""
    d = _require(
        f"EMNIST ({split})",
        lambda: _emnist_dir(root, split),
        lambda target: _tv().datasets.EMNIST(target, split=split, download=True),
        root,
        download,
        f"EMNIST/raw/emnist-{split}-train-images-idx3-ubyte etc.",
    )
    xtr, ytr, xte, yte = _idx_sets(d, _emnist_prefixes(split))
    mean, std = EMNIST_STATS[split]
    return FedDataset(
        f"emnist-{split}",
        xtr.transpose(-1, -2).contiguous(),
        ytr,
        xte.transpose(-1, -2).contiguous(),
        yte,
        classes=list(EMNIST_CLASSES[split]),
        mean=mean,
        std=std,
    )


def _register_emnist(split: str, description: str):
    @register(
        f"emnist-{split}",
        description,
        lambda root: _emnist_dir(root, split) is not None,
    )
    def load(root=None, download: bool = False) -> FedDataset:
        return _load_emnist(split, root, download)

    load.__name__ = f"load_emnist_{split}"
    return load


load_emnist_balanced = _register_emnist(
    "balanced", "EMNIST Balanced, 47 classes (digits, letters), 28x28 grey, upright"
)
load_emnist_byclass = _register_emnist(
    "byclass",
    "EMNIST ByClass, 62 classes (0-9, A-Z, a-z), 28x28 grey, upright, unbalanced",
)


# ----------------------------------------------------------------------------- CIFAR

CIFAR10_FILES = [f"data_batch_{i}" for i in range(1, 6)] + [
    "test_batch",
    "batches.meta",
]
CIFAR100_FILES = ["train", "test", "meta"]


def _text(v):
    return v.decode("latin1") if isinstance(v, bytes) else v


def _unpickle(path: Path) -> dict:
    """A CIFAR pickle (written by Python 2); keys as ``str`` whichever way it was written."""
    with open(path, "rb") as fh:
        return {_text(k): v for k, v in pickle.load(fh, encoding="latin1").items()}


def _names(values) -> list[str]:
    return [_text(v) for v in values]


def _cifar_images(batch: dict) -> torch.Tensor:
    return torch.from_numpy(np.asarray(batch["data"], dtype=np.uint8).reshape(-1, 3, 32, 32).copy())


def _labels(values) -> torch.Tensor:
    return torch.as_tensor(np.asarray(values, dtype=np.int64))


def _cifar_dir(root, folder: str, files) -> Path | None:
    return _find_dir([r / folder for r in data_roots(root)], files)


def _cifar_require(label: str, folder: str, files, tv_class: str, root, download):
    return _require(
        label,
        lambda: _cifar_dir(root, folder, files),
        lambda target: getattr(_tv().datasets, tv_class)(target, download=True),
        root,
        download,
        folder,
    )


@register(
    "cifar10",
    "CIFAR-10, 10 classes, 32x32 colour (python pickles in cifar-10-batches-py/)",
    lambda root: _cifar_dir(root, "cifar-10-batches-py", CIFAR10_FILES) is not None,
)
def load_cifar10(root=None, download: bool = False) -> FedDataset:
    d = _cifar_require("CIFAR-10", "cifar-10-batches-py", CIFAR10_FILES, "CIFAR10", root, download)
    train = [_unpickle(d / f) for f in CIFAR10_FILES[:5]]
    test = _unpickle(d / "test_batch")
    return FedDataset(
        "cifar10",
        torch.cat([_cifar_images(b) for b in train]),
        _labels([y for b in train for y in b["labels"]]),
        _cifar_images(test),
        _labels(test["labels"]),
        classes=_names(_unpickle(d / "batches.meta")["label_names"]),
        mean=(0.4914, 0.4822, 0.4465),
        std=(0.2470, 0.2435, 0.2616),
    )


@register(
    "cifar10-pairs",
    "CIFAR-10 whose coarse groups are the class pairs (0, 1), ..., (8, 9) (pFedMB §V-B's pairs setting, at paper)",
    lambda root: _cifar_dir(root, "cifar-10-batches-py", CIFAR10_FILES) is not None,
)
def load_cifar10_pairs(root=None, download: bool = False) -> FedDataset:
    """The same images as CIFAR-10; only the grouping the ``coarse`` protocol hands out changes."""
    return with_pairs(load_cifar10(root, download), "cifar10-pairs")


@register(
    "cifar100",
    "CIFAR-100, 100 classes in 20 superclasses, 32x32 colour (cifar-100-python/)",
    lambda root: _cifar_dir(root, "cifar-100-python", CIFAR100_FILES) is not None,
)
def load_cifar100(root=None, download: bool = False) -> FedDataset:
    d = _cifar_require("CIFAR-100", "cifar-100-python", CIFAR100_FILES, "CIFAR100", root, download)
    train, test, meta = (_unpickle(d / f) for f in CIFAR100_FILES)
    fine = np.asarray(train["fine_labels"], dtype=np.int64)
    pairs = np.unique(np.stack([fine, np.asarray(train["coarse_labels"])]), axis=1)
    if pairs.shape[1] != 100 or not np.array_equal(pairs[0], np.arange(100)):
        raise PflkitError(f"{d / 'train'}: fine labels do not map to one coarse label each")
    return FedDataset(
        "cifar100",
        _cifar_images(train),
        torch.from_numpy(fine),
        _cifar_images(test),
        _labels(test["fine_labels"]),
        classes=_names(meta["fine_label_names"]),
        mean=(0.5071, 0.4865, 0.4409),
        std=(0.2673, 0.2564, 0.2762),
        coarse_of_class=pairs[1].tolist(),
        coarse_names=_names(meta["coarse_label_names"]),
    )


# ----------------------------------------------------------------------------- Omniglot

OMNIGLOT_SETS = ("images_background", "images_evaluation")


def _omniglot_dir(root, size: int) -> Path | None:
    for r in data_roots(root):
        d = r / "omniglot-py"
        if (d / f"pflkit-cache-{size}.pt").is_file() or all((d / s).is_dir() for s in OMNIGLOT_SETS):
            return d
    return None


def _read_omniglot_images(base: Path, size: int) -> dict:
    """Every drawing as a ``size x size`` grey image with bright strokes, plus its
    character label and its drawing number (rank of its file name within the character)."""
    from PIL import Image

    chars = sorted(
        (a.name, c.name, c)
        for s in OMNIGLOT_SETS
        for a in (base / s).iterdir()
        if a.is_dir()
        for c in a.iterdir()
        if c.is_dir()
    )
    alphabets = sorted({a for a, _, _ in chars})
    xs, ys, drawing = [], [], []
    for label, (_, _, cdir) in enumerate(chars):
        for j, png in enumerate(sorted(cdir.glob("*.png"))):
            with Image.open(png) as im:
                img = im.convert("L").resize((size, size), Image.BILINEAR)
            xs.append(255 - np.asarray(img, dtype=np.uint8))  # strokes bright
            ys.append(label)
            drawing.append(j)
    return {
        "x": torch.from_numpy(np.stack(xs)).unsqueeze(1),
        "y": torch.tensor(ys, dtype=torch.int64),
        "drawing": torch.tensor(drawing, dtype=torch.int64),
        "classes": [f"{a}/{c}" for a, c, _ in chars],
        "coarse_of_class": [alphabets.index(a) for a, _, _ in chars],
        "coarse_names": alphabets,
    }


@register(
    "omniglot",
    "Omniglot, 1623 characters of 50 alphabets (alphabets as coarse groups), 28x28 grey",
    lambda root: _omniglot_dir(root, 28) is not None,
)
def load_omniglot(root=None, download: bool = False, size: int = 28, n_train_per_char: int = 15) -> FedDataset:
    """Omniglot's background and evaluation sets together, as one classification task.

    Labels index all characters (alphabets sorted by name, then characters); the
    alphabet of each character is its coarse class.  Omniglot has no official split
    per character, so the first ``n_train_per_char`` of each character's 20 drawings
    (sorted file names) are training images and the rest test images.  Images are
    resized to ``size`` (PIL bilinear) and inverted so strokes are bright.  The tensors
    are cached in ``omniglot-py/pflkit-cache-<size>.pt`` (delete it to re-read the PNGs).
    """

    def fetch(target):
        for background in (True, False):
            _tv().datasets.Omniglot(target, background=background, download=True)

    d = _require(
        "Omniglot",
        lambda: _omniglot_dir(root, size),
        fetch,
        root,
        download,
        "omniglot-py/images_background and omniglot-py/images_evaluation",
    )
    cache = d / f"pflkit-cache-{size}.pt"
    if cache.is_file():
        data = torch.load(cache, weights_only=True)
    else:
        data = _read_omniglot_images(d, size)
        try:
            torch.save(data, cache)
        except OSError:  # read-only data folder: just no cache
            pass
    train = data["drawing"] < n_train_per_char
    return FedDataset(
        "omniglot",
        data["x"][train],
        data["y"][train],
        data["x"][~train],
        data["y"][~train],
        classes=list(data["classes"]),
        # approximate statistics of inverted 28x28 Omniglot (about 8% of pixels are stroke)
        mean=(0.08,),
        std=(0.26,),
        coarse_of_class=list(data["coarse_of_class"]),
        coarse_names=list(data["coarse_names"]),
        info={"n_train_per_char": n_train_per_char, "size": size},
    )


# ----------------------------------------------------------------------------- LEAF (FEMNIST, CelebA)

LEAF_HINT = (
    "download and preprocess it with LEAF's scripts on a connected machine "
    "(github.com/TalwalkarLab/leaf, data/{name}: ./preprocess.sh -s niid --sf 1.0 -k 0 -t sample --tf 0.8, "
    "the full dataset as the papers use it) "
    "and copy its data/train and data/test folders{images} to {where}"
)


def _leaf_dir(root, name: str) -> Path | None:
    """The first folder with LEAF's ``train/*.json`` and ``test/*.json`` for ``name``."""
    for r in data_roots(root):
        for d in (r / name, r / name / "data", r / "leaf" / "data" / name / "data"):
            if all(any((d / split).glob("*.json")) for split in ("train", "test")):
                return d
    return None


def _leaf_require(root, name: str, label: str, images: str = "") -> Path:
    d = _leaf_dir(root, name)
    if d is None:
        where = " or ".join(str(r / name) for r in data_roots(root))
        hint = LEAF_HINT.format(name=name, images=images, where=where)
        raise DataUnavailable(f"{label} (LEAF JSON) not found; {hint}")
    return d


def read_leaf_split(folder: Path, decode) -> tuple[list[str], torch.Tensor, list[int], list[int]]:
    """One LEAF split (all ``*.json`` in ``folder``, sorted): its users in order of appearance,
    the images (``decode(xs)`` of each file's ``x`` values -> uint8 N x C x H x W), the labels
    and the index of every sample's user."""
    users: dict[str, int] = {}
    xs, ys, owner = [], [], []
    for path in sorted(folder.glob("*.json")):
        blob = json.loads(path.read_text())
        file_x = []
        for user in blob["users"]:
            record = blob["user_data"][user]
            uid = users.setdefault(user, len(users))
            file_x += record["x"]
            ys += [int(v) for v in record["y"]]
            owner += [uid] * len(record["y"])
        xs.append(decode(file_x))  # file by file: the JSON numbers never all sit in memory
    return list(users), torch.cat(xs) if xs else decode([]), ys, owner


def _leaf_tensors(d: Path, decode) -> dict:
    """Train and test sets of a LEAF folder.  Users are those of the training split; every
    test sample's user must be one of them (LEAF's ``-t sample`` split)."""
    users, xtr, ytr, utr = read_leaf_split(d / "train", decode)
    test_users, xte, yte, ute = read_leaf_split(d / "test", decode)
    unknown = sorted(set(test_users) - set(users))
    if unknown:
        raise PflkitError(
            f"{d}: {len(unknown)} test users have no training data (LEAF split by user, -t user); "
            "regenerate with -t sample so that every user has train and test samples"
        )
    where = {u: i for i, u in enumerate(users)}
    return {
        "x_train": xtr, "y_train": torch.tensor(ytr, dtype=torch.int64),
        "x_test": xte, "y_test": torch.tensor(yte, dtype=torch.int64),
        "users": users,
        "train_user": torch.tensor(utr, dtype=torch.int64),
        "test_user": torch.tensor([where[test_users[i]] for i in ute], dtype=torch.int64),
    }  # fmt: skip


def _cached(path: Path, read) -> dict:
    if path.is_file():
        return torch.load(path, weights_only=True)
    blob = read()
    try:
        torch.save(blob, path)
    except OSError:  # read-only data folder: just no cache
        pass
    return blob


def pixel_stats(x: torch.Tensor, chunk: int = 4096) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and std of uint8 images scaled to [0, 1] (in chunks: no float copy)."""
    c = x.shape[1]
    s, ss = torch.zeros(c, dtype=torch.float64), torch.zeros(c, dtype=torch.float64)
    for i in range(0, len(x), chunk):
        v = x[i : i + chunk].transpose(0, 1).reshape(c, -1).double() / 255
        s += v.sum(1)
        ss += (v * v).sum(1)
    n = max(x[:, 0].numel(), 1)
    mean = s / n
    std = (ss / n - mean**2).clamp_min(1e-12).sqrt()
    return tuple(mean.tolist()), tuple(std.tolist())


def _leaf_dataset(name: str, blob: dict, classes: list[str], info: dict) -> FedDataset:
    mean, std = pixel_stats(blob["x_train"])
    return FedDataset(
        name, blob["x_train"], blob["y_train"], blob["x_test"], blob["y_test"], classes=classes, mean=mean, std=std,
        info=dict(info, users=list(blob["users"]), train_user=blob["train_user"], test_user=blob["test_user"]),
    )  # fmt: skip


@register(
    "femnist",
    "FEMNIST (LEAF): 62 classes, 28x28 grey, one client per writer (--partition natural)",
    lambda root: _leaf_dir(root, "femnist") is not None,
)
def load_femnist(root=None, download: bool = False) -> FedDataset:
    """LEAF's FEMNIST: ``x`` holds 784 grey values in [0, 1] (white background), ``y`` the class
    (0-9 digits, 10-35 A-Z, 36-61 a-z).  Images are stored as uint8 with strokes bright, as the
    kit's other character datasets: ``round(255 · (1 − x))``.  The per-sample writer is in
    ``info["train_user"]``/``info["test_user"]`` (indices into ``info["users"]``); the
    ``natural`` partition protocol makes one client per writer.  Cached in
    ``pflkit-cache.pt`` next to the JSON folders (delete it to re-read them)."""
    d = _leaf_require(root, "femnist", "FEMNIST")

    def decode(xs):
        x = np.asarray(xs, dtype=np.float32).reshape(-1, 1, 28, 28)
        return torch.from_numpy(np.rint(255 * (1 - x)).clip(0, 255).astype(np.uint8))

    blob = _cached(d / "pflkit-cache.pt", lambda: _leaf_tensors(d, decode))
    return _leaf_dataset("femnist", blob, list(EMNIST_CLASSES["byclass"]), {"leaf_dir": str(d)})


def _celeba_images(d: Path) -> Path | None:
    for folder in (d / "raw" / "img_align_celeba", d / "img_align_celeba"):
        if folder.is_dir():
            return folder
    return None


@register(
    "celeba",
    "FedCelebA (LEAF): smiling or not, 84x84 colour, one client per celebrity (--partition natural)",
    lambda root: (d := _leaf_dir(root, "celeba")) is not None and _celeba_images(d) is not None,
)
def load_celeba(root=None, download: bool = False, size: int = 84) -> FedDataset:
    """LEAF's FedCelebA: ``x`` holds image file names (in ``raw/img_align_celeba``), ``y`` whether
    the celebrity smiles.  Images are resized to ``size`` x ``size`` (PIL, as LEAF's model) and
    cached in ``pflkit-cache-<size>.pt``.  Celebrities as users: see :func:`load_femnist`."""
    from PIL import Image

    images = " (and data/raw/img_align_celeba)"
    d = _leaf_require(root, "celeba", "FedCelebA", images)
    folder = _celeba_images(d)
    if folder is None:
        raise DataUnavailable(f"FedCelebA images not found in {d / 'raw' / 'img_align_celeba'}; "
                              + LEAF_HINT.format(name="celeba", images=images, where=d))  # fmt: skip

    def decode(names):
        arrays = []
        for name in names:
            with Image.open(folder / name) as im:
                arrays.append(np.asarray(im.convert("RGB").resize((size, size)), dtype=np.uint8))
        stacked = np.stack(arrays) if arrays else np.zeros((0, size, size, 3), dtype=np.uint8)
        return torch.from_numpy(stacked).permute(0, 3, 1, 2).contiguous()

    blob = _cached(d / f"pflkit-cache-{size}.pt", lambda: _leaf_tensors(d, decode))
    return _leaf_dataset("celeba", blob, ["not smiling", "smiling"], {"leaf_dir": str(d), "size": size})
