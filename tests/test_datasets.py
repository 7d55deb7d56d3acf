"""Dataset loaders, each read from a small fixture in the real on-disk format."""

import gzip
import pickle
import struct

import numpy as np
import pytest
import torch
from PIL import Image

from pflkit import data
from pflkit.errors import DataUnavailable

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def no_real_data(tmp_path, monkeypatch):
    """Hide every dataset on this machine: only what a test writes is found."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PFLKIT_DATA", str(empty))
    monkeypatch.setattr(data, "REPO_DATA", tmp_path / "none")
    monkeypatch.setattr(data, "DEBIAN_FASHION_MNIST", tmp_path / "none")


# ----------------------------------------------------------------------------- writers


def write_idx(path, arr):
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    header = struct.pack(">HBB", 0, 0x08, arr.ndim)
    header += struct.pack(">" + "I" * arr.ndim, *arr.shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    with (gzip.open if path.suffix == ".gz" else open)(path, "wb") as fh:
        fh.write(header + arr.tobytes())


def write_idx_sets(folder, prefixes, n_classes, gz, per_class=(3, 2)):
    """Train and test IDX pairs; returns ``{prefix: (images, labels)}``."""
    out = {}
    for prefix, n in zip(prefixes, per_class):
        y = np.repeat(np.arange(n_classes), n).astype(np.uint8)
        x = RNG.integers(0, 256, (len(y), 28, 28), dtype=np.uint8)
        ext = ".gz" if gz else ""
        write_idx(folder / f"{prefix}images-idx3-ubyte{ext}", x)
        write_idx(folder / f"{prefix}labels-idx1-ubyte{ext}", y)
        out[prefix] = (x, y)
    return out


def write_pickle(path, obj, bytes_keys=False):
    if bytes_keys:
        obj = {k.encode(): v for k, v in obj.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump(obj, fh, protocol=2)


def cifar_rows(n):
    return RNG.integers(0, 256, (n, 3072), dtype=np.uint8)


def check_idx(ds, arrays, prefixes, transpose=False):
    for (x, y), xt, yt in zip(
        (arrays[p] for p in prefixes),
        (ds.x_train, ds.x_test),
        (ds.y_train, ds.y_test),
    ):
        expected = torch.from_numpy(x).unsqueeze(1)
        if transpose:
            expected = expected.transpose(-1, -2)
        assert xt.dtype == torch.uint8 and yt.dtype == torch.int64
        assert torch.equal(xt, expected)
        assert yt.tolist() == y.tolist()


# ----------------------------------------------------------------------------- IDX family


@pytest.mark.parametrize("folder,gz", [("MNIST/raw", True), ("mnist", False)])
def test_mnist(tmp_path, folder, gz):
    arrays = write_idx_sets(tmp_path / folder, ("train-", "t10k-"), 10, gz)
    assert data.available_offline("mnist", tmp_path)
    ds = data.load_dataset("mnist", root=tmp_path)
    assert ds.x_train.shape == (30, 1, 28, 28) and ds.x_test.shape == (20, 1, 28, 28)
    check_idx(ds, arrays, ("train-", "t10k-"))
    assert ds.classes == [str(i) for i in range(10)] and ds.mean == (0.1307,)


def test_fashion_mnist_from_root(tmp_path):
    arrays = write_idx_sets(tmp_path / "fashion-mnist", ("train-", "t10k-"), 10, True)
    ds = data.load_dataset("fashion-mnist", root=tmp_path)
    check_idx(ds, arrays, ("train-", "t10k-"))
    assert ds.n_classes == 10 and len(ds.coarse_of_class) == 10


@pytest.mark.parametrize("split,n_classes", [("balanced", 47), ("byclass", 62)])
def test_emnist(tmp_path, split, n_classes):
    prefixes = (f"emnist-{split}-train-", f"emnist-{split}-test-")
    arrays = write_idx_sets(tmp_path / "EMNIST" / "raw", prefixes, n_classes, False)
    x = arrays[prefixes[0]][0]
    x[0] = 0
    x[0, 0, 5] = 255  # row 0, column 5 in the file ...
    write_idx(tmp_path / "EMNIST" / "raw" / f"{prefixes[0]}images-idx3-ubyte", x)
    ds = data.load_dataset(f"emnist-{split}", root=tmp_path)
    assert ds.x_train[0, 0, 5, 0] == 255 and ds.x_train[0].sum() == 255  # ... row 5
    check_idx(ds, arrays, prefixes, transpose=True)
    assert ds.n_classes == n_classes and len(set(ds.classes)) == n_classes
    assert ds.classes[:11] == list("0123456789A") and ds.classes[-1] == ("t" if split == "balanced" else "z")
    if split == "balanced":
        assert ds.classes[36:] == list("abdefghnqrt")


# ----------------------------------------------------------------------------- CIFAR

CIFAR10_NAMES = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
]


def write_cifar10(root, bytes_keys=False):
    d = root / "cifar-10-batches-py"
    batches = []
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        rows, labels = cifar_rows(10), RNG.permutation(10).tolist()
        batch = {"batch_label": name, "labels": labels, "data": rows, "filenames": []}
        write_pickle(d / name, batch, bytes_keys)
        batches.append((rows, labels))
    meta = {"num_cases_per_batch": 10, "label_names": CIFAR10_NAMES, "num_vis": 3072}
    write_pickle(d / "batches.meta", meta, bytes_keys)
    return batches


@pytest.mark.parametrize("bytes_keys", [False, True])
def test_cifar10(tmp_path, bytes_keys):
    assert not data.available_offline("cifar10", tmp_path)
    batches = write_cifar10(tmp_path, bytes_keys)
    assert data.available_offline("cifar10", tmp_path)
    ds = data.load_dataset("cifar10", root=tmp_path)
    assert ds.x_train.shape == (50, 3, 32, 32) and ds.x_test.shape == (10, 3, 32, 32)
    assert ds.x_train.dtype == torch.uint8 and ds.y_train.dtype == torch.int64
    rows = np.concatenate([r for r, _ in batches[:5]])
    assert torch.equal(ds.x_train, torch.from_numpy(rows.reshape(-1, 3, 32, 32)))
    # rows hold the red plane, then green, then blue, each row-major
    assert ds.x_train[7, 2, 3, 4] == rows[7, 2 * 1024 + 3 * 32 + 4]
    assert ds.y_train.tolist() == [y for _, ys in batches[:5] for y in ys]
    assert ds.y_test.tolist() == batches[5][1]
    assert ds.classes == CIFAR10_NAMES and len(ds.mean) == 3


def test_cifar100(tmp_path):
    d = tmp_path / "cifar-100-python"
    coarse_of = RNG.permutation(np.arange(100) % 20)  # 5 fine classes per superclass
    for name, per_class in (("train", 2), ("test", 1)):
        fine = np.repeat(np.arange(100), per_class)
        batch = {
            "batch_label": name,
            "fine_labels": fine.tolist(),
            "coarse_labels": coarse_of[fine].tolist(),
            "data": cifar_rows(len(fine)),
        }
        write_pickle(d / name, batch)
    fine_names = [f"fine{i}" for i in range(100)]
    coarse_names = [f"coarse{i}" for i in range(20)]
    write_pickle(d / "meta", {"fine_label_names": fine_names, "coarse_label_names": coarse_names})
    ds = data.load_dataset("cifar100", root=tmp_path)
    assert ds.x_train.shape == (200, 3, 32, 32) and ds.x_test.shape == (100, 3, 32, 32)
    assert ds.y_train.tolist() == np.repeat(np.arange(100), 2).tolist()
    assert ds.classes == fine_names and ds.coarse_names == coarse_names
    assert ds.coarse_of_class == coarse_of.tolist()


# ----------------------------------------------------------------------------- Omniglot

OMNIGLOT_CHARS = [  # (set, alphabet, character)
    ("images_background", "Latin", "character02"),
    ("images_background", "Latin", "character01"),
    ("images_background", "Greek", "character01"),
    ("images_evaluation", "Atlantean", "character01"),
]


def write_omniglot(root):
    for cid, (s, alphabet, char) in enumerate(OMNIGLOT_CHARS):
        folder = root / "omniglot-py" / s / alphabet / char
        folder.mkdir(parents=True)
        for j in range(1, 21):
            img = np.ones((105, 105), dtype=bool)  # white, mode "1" like the real PNGs
            if j <= 15:  # drawings 1..15 have a black square top-left; 16..20 are blank
                img[:52, :52] = False
            Image.fromarray(img).save(folder / f"{cid:04d}_{j:02d}.png")


def test_omniglot_split_order_and_cache(tmp_path, monkeypatch):
    write_omniglot(tmp_path)
    assert data.available_offline("omniglot", tmp_path)
    ds = data.load_dataset("omniglot", root=tmp_path)
    assert ds.x_train.shape == (60, 1, 28, 28) and ds.x_test.shape == (20, 1, 28, 28)
    assert ds.x_train.dtype == torch.uint8 and ds.y_train.dtype == torch.int64
    assert ds.classes == [
        "Atlantean/character01",
        "Greek/character01",
        "Latin/character01",
        "Latin/character02",
    ]
    assert ds.coarse_names == ["Atlantean", "Greek", "Latin"]
    assert ds.coarse_of_class == [0, 1, 2, 2]
    assert torch.bincount(ds.y_train).tolist() == [15] * 4
    assert torch.bincount(ds.y_test).tolist() == [5] * 4
    # strokes bright after inversion; the first 15 drawings are the training set
    assert (ds.x_train[:, 0, :10, :10] == 255).all() and (ds.x_train[:, 0, 16:, :] == 0).all()
    assert ds.x_test.max() == 0

    assert (tmp_path / "omniglot-py" / "pflkit-cache-28.pt").is_file()

    def no_png(*args):
        raise AssertionError("PNGs read again instead of the cache")

    monkeypatch.setattr(data, "_read_omniglot_images", no_png)
    again = data.load_dataset("omniglot", root=tmp_path)
    assert torch.equal(again.x_train, ds.x_train) and again.classes == ds.classes
    ten = data.load_dataset("omniglot", root=tmp_path, n_train_per_char=10)
    assert len(ten.y_train) == 40 and len(ten.y_test) == 40


# ----------------------------------------------------------------------------- missing data


@pytest.mark.parametrize("name", [n for n in data.dataset_names() if n != "digits"])
def test_missing_dataset_one_line(name):
    assert not data.available_offline(name)
    with pytest.raises(DataUnavailable) as err:
        data.load_dataset(name)
    msg = str(err.value)
    assert msg and "\n" not in msg and "download" in msg
