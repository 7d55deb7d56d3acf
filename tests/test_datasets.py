"""Dataset loaders, each read from a small fixture in the real on-disk format."""

import gzip
import json
import pickle
import struct

import numpy as np
import pytest
import torch
from PIL import Image

from pflkit import data, data_more
from pflkit.errors import DataUnavailable, PflkitError
from pflkit.partitions import partition_dataset

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def hide_real_data(no_real_data):
    """Every test here sees only what it writes (conftest's ``no_real_data``)."""


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

    monkeypatch.setattr(data_more, "_read_omniglot_images", no_png)
    again = data.load_dataset("omniglot", root=tmp_path)
    assert torch.equal(again.x_train, ds.x_train) and again.classes == ds.classes
    ten = data.load_dataset("omniglot", root=tmp_path, n_train_per_char=10)
    assert len(ten.y_train) == 40 and len(ten.y_test) == 40


# ----------------------------------------------------------------------------- LEAF


def write_leaf(folder, files):
    """LEAF JSON: ``files[split]`` is a list of files, each ``{user: (xs, ys)}``."""
    for split, blobs in files.items():
        (folder / split).mkdir(parents=True, exist_ok=True)
        for j, users in enumerate(blobs):
            blob = {
                "users": list(users),
                "num_samples": [len(ys) for _, ys in users.values()],
                "user_data": {u: {"x": xs, "y": ys} for u, (xs, ys) in users.items()},
            }
            (folder / split / f"part_{j}.json").write_text(json.dumps(blob))


def femnist_user(n, label):
    v = RNG.integers(0, 256, (n, 784))
    return [list(row / 255) for row in v], [label] * n, v


@pytest.mark.parametrize("layout", ["femnist", "leaf/data/femnist/data"])
def test_femnist_leaf_json_natural_partition_and_cache(tmp_path, monkeypatch, layout):
    users = {u: femnist_user(n, label) for u, n, label in (("w1", 5, 3), ("w2", 4, 61), ("w3", 6, 10))}
    tests = {u: femnist_user(2, label) for u, label in (("w3", 10), ("w1", 3), ("w2", 61))}
    write_leaf(tmp_path / layout, {
        "train": [{u: users[u][:2] for u in ("w1", "w2")}, {"w3": users["w3"][:2]}],  # two files
        "test": [{u: tests[u][:2] for u in tests}],
    })  # fmt: skip
    assert data.available_offline("femnist", tmp_path)
    ds = data.load_dataset("femnist", root=tmp_path)
    assert ds.x_train.shape == (15, 1, 28, 28) and ds.x_train.dtype == torch.uint8 and ds.x_test.shape == (6, 1, 28, 28)
    v = np.concatenate([users[u][2] for u in ("w1", "w2", "w3")])
    assert torch.equal(ds.x_train, torch.from_numpy((255 - v).astype(np.uint8)).view(-1, 1, 28, 28))  # strokes bright
    assert ds.y_train.tolist() == [3] * 5 + [61] * 4 + [10] * 6 and ds.n_classes == 62 and ds.classes[61] == "z"
    assert ds.info["users"] == ["w1", "w2", "w3"] and ds.info["test_user"].tolist() == [2, 2, 0, 0, 1, 1]

    part = partition_dataset(ds, "natural", 3, seed=0, val_fraction=0.25)
    for u, c in enumerate(part.clients):  # one client per writer, its own samples only
        own = np.flatnonzero(ds.info["train_user"].numpy() == u)
        assert sorted(np.concatenate([c.train, c.val]).tolist()) == own.tolist() and len(c.val) >= 1
        assert c.test.tolist() == np.flatnonzero(ds.info["test_user"].numpy() == u).tolist()
    assert part.unassigned == 0 and np.allclose(part.shares.sum(0)[[3, 10, 61]], 1)
    two = partition_dataset(ds, "natural", 2, seed=1)
    assert len(two.clients) == 2 and two.unassigned == 15 - sum(len(c.train) + len(c.val) for c in two.clients)
    with pytest.raises(PflkitError, match="3 users"):
        partition_dataset(ds, "natural", 4)

    def no_json(*args):
        raise AssertionError("JSON read again instead of the cache")

    monkeypatch.setattr(data_more, "read_leaf_split", no_json)
    assert torch.equal(data.load_dataset("femnist", root=tmp_path).x_train, ds.x_train)


def test_femnist_natural_partition_runs_from_the_cli(tmp_path, monkeypatch):
    from pflkit import cli

    write_leaf(tmp_path / "femnist", {
        "train": [{f"w{i}": femnist_user(6, i % 3)[:2] for i in range(4)}],
        "test": [{f"w{i}": femnist_user(2, i % 3)[:2] for i in range(4)}],
    })  # fmt: skip
    monkeypatch.setenv("PFLKIT_DATA", str(tmp_path))
    out = tmp_path / "r.json"
    argv = ["run", "fesem", "--centers", "2", "--dataset", "femnist", "--partition", "natural", "--clients", "3",
            "--rounds", "1", "--model", "mlp", "--local-steps", "1", "--device", "cpu", "--no-progress", "--out", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    assert len(json.loads(out.read_text())["partition"]["train_sizes"]) == 3


def test_femnist_split_by_user_is_one_clear_error(tmp_path):
    write_leaf(
        tmp_path / "femnist", {"train": [{"a": femnist_user(2, 0)[:2]}], "test": [{"b": femnist_user(2, 1)[:2]}]}
    )
    with pytest.raises(PflkitError, match="-t sample"):
        data.load_dataset("femnist", root=tmp_path)


def test_celeba_leaf_json_images_and_natural_partition(tmp_path):
    d = tmp_path / "celeba"
    (d / "raw" / "img_align_celeba").mkdir(parents=True)
    colours = {"000001.jpg": (255, 0, 0), "000002.jpg": (0, 255, 0), "000003.jpg": (0, 0, 255), "000004.jpg": (9, 9, 9)}
    for name, rgb in colours.items():
        Image.new("RGB", (178, 218), rgb).save(d / "raw" / "img_align_celeba" / name, quality=100)
    write_leaf(d, {
        "train": [{"7": (["000001.jpg", "000002.jpg"], [1.0, 0.0]), "12": (["000003.jpg"], [1.0])}],
        "test": [{"12": (["000004.jpg"], [0.0])}],
    })  # fmt: skip
    assert data.available_offline("celeba", tmp_path)
    ds = data.load_dataset("celeba", root=tmp_path, size=8)
    assert ds.x_train.shape == (3, 3, 8, 8) and ds.x_test.shape == (1, 3, 8, 8) and ds.x_train.dtype == torch.uint8
    assert ds.y_train.tolist() == [1, 0, 1] and ds.classes == ["not smiling", "smiling"]
    red = ds.x_train[0].float().mean((1, 2))
    assert red[0] > 250 and red[1:].max() < 5  # channels first, RGB order
    part = partition_dataset(ds, "natural", 2, val_fraction=0.0)
    assert [c.train.tolist() for c in part.clients] == [[0, 1], [2]]
    assert [c.test.tolist() for c in part.clients] == [[], [0]]


def test_a_subset_of_a_dataset_with_users_keeps_each_image_s_writer():
    """train_images / test_images (and a public hold-out) on a dataset with users cut its per-image writers too:
    a natural partition of the subset indexes the subset, each client's images its writer's."""
    from pflkit.federation import hold_out_public, subsample

    n, m = 40, 12
    train_user, test_user = torch.arange(n) // 10, torch.arange(m) // 3  # four writers; each image shows its writer
    ds = data.FedDataset(
        "writers", train_user.view(-1, 1, 1, 1).to(torch.uint8), torch.arange(n) % 2,
        test_user.view(-1, 1, 1, 1).to(torch.uint8), torch.arange(m) % 2, classes=["a", "b"], mean=(0.5,), std=(0.25,),
        info={"users": ["u0", "u1", "u2", "u3"], "train_user": train_user, "test_user": test_user},
    )  # fmt: skip
    small, _ = hold_out_public(subsample(ds, 20, 6), 4)
    assert len(small.info["train_user"]) == len(small.y_train) == 16 and len(small.info["test_user"]) == 6
    part = partition_dataset(small, "natural", 4, val_fraction=0.25)
    for u, c in enumerate(part.clients):  # every image a client holds is its writer's
        assert (small.x_train[np.concatenate([c.train, c.val])] == u).all() and (small.x_test[c.test] == u).all()
    assert sum(len(c.train) + len(c.val) for c in part.clients) == 16


def test_natural_protocol_needs_users():
    from pflkit.partitions import make_partition

    with pytest.raises(PflkitError, match="dataset with users"):
        make_partition(np.arange(20) % 2, np.arange(6) % 2, "natural", 2, dataset="digits")


# ----------------------------------------------------------------------------- missing data


@pytest.mark.parametrize("name", [n for n in data.dataset_names() if n != "digits"])
def test_missing_dataset_one_line(name):
    assert not data.available_offline(name)
    with pytest.raises(DataUnavailable) as err:
        data.load_dataset(name)
    msg = str(err.value)
    assert msg and "\n" not in msg and "download" in msg


def test_only_classes_keeps_one_coarse_group_relabelled_in_order():
    import torch

    from pflkit.data import FedDataset, only_classes

    y = torch.tensor([0, 1, 2, 3, 4, 5, 2, 0])
    ds = FedDataset("toy", torch.arange(8, dtype=torch.uint8).view(8, 1, 1, 1), y, torch.zeros(3, 1, 1, 1, dtype=torch.uint8),
                    torch.tensor([4, 1, 2]), classes=list("abcdef"), mean=(0.0,), std=(1.0,),
                    coarse_of_class=[0, 1, 0, 1, 0, 2], coarse_names=["tops", "bottoms", "shoes"])  # fmt: skip
    tops = only_classes(ds, "tops", "toy-tops")
    assert tops.classes == ["a", "c", "e"] and tops.name == "toy-tops" and tops.coarse_of_class is None
    assert tops.y_train.tolist() == [0, 1, 2, 1, 0] and tops.x_train.flatten().tolist() == [0, 2, 4, 6, 7]
    assert tops.y_test.tolist() == [2, 1] and tops.n_classes == 3
