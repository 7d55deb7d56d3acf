"""The grouped federation: its transforms, its groups and its Dirichlet label mixes."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from pflkit.errors import PflkitError
from pflkit.grouped import TRANSFORMS, concept_federation, grouped_federation
from pflkit.partitions import partition_dataset


def test_transforms_are_the_documented_ones():
    x = torch.arange(1, 10, dtype=torch.uint8).view(1, 1, 3, 3)  # [[1,2,3],[4,5,6],[7,8,9]]
    assert torch.equal(TRANSFORMS["identity"](x), x)
    assert TRANSFORMS["rot90"](x)[0, 0].tolist() == [[3, 6, 9], [2, 5, 8], [1, 4, 7]]  # 90° counter-clockwise
    assert torch.equal(TRANSFORMS["invert"](x), 255 - x)
    dot = torch.zeros(1, 1, 5, 5, dtype=torch.uint8)
    dot[0, 0, 2, 2] = 200
    thick = TRANSFORMS["thicken"](dot)[0, 0]
    assert thick.dtype == torch.uint8 and thick[1:4, 1:4].eq(200).all() and thick.sum() == 9 * 200  # 3x3 dilation


def test_grouped_federation_transforms_each_client_by_its_group(digits):
    g = grouped_federation(digits, n_clients=10, seed=3)
    assert g.transforms == ["identity", "rot90", "invert", "thicken"]
    assert sorted(np.bincount(g.groups, minlength=4).tolist()) == [2, 2, 3, 3]  # dealt round-robin
    assert g.partition.params["groups"] == g.groups.tolist() and g.ds.info["groups"] == g.groups.tolist()
    assert g.ds.x_train.dtype == torch.uint8 and g.ds.x_train.shape == digits.x_train.shape
    for c, grp in zip(g.partition.clients, g.groups):
        t = TRANSFORMS[g.transforms[grp]]
        for split, x_new, x_old in (("train", g.ds.x_train, digits.x_train), ("val", g.ds.x_train, digits.x_train),
                                    ("test", g.ds.x_test, digits.x_test)):  # fmt: skip
            idx = torch.as_tensor(getattr(c, split), dtype=torch.long)
            assert torch.equal(x_new[idx], t(x_old[idx]))
    assert torch.equal(g.ds.y_train, digits.y_train)  # labels untouched


def test_label_mixes_are_the_dirichlet_protocol(digits):
    g = grouped_federation(digits, n_clients=8, seed=1, alpha=0.5)
    ref = partition_dataset(digits, "dirichlet", 8, 1, alpha=0.5)
    np.testing.assert_array_equal(g.partition.shares, ref.shares)  # P[:, c] ~ Dir(0.5) over clients
    np.testing.assert_allclose(g.partition.shares.sum(0), 1.0)
    for a, b in zip(g.partition.clients, ref.clients):
        assert np.array_equal(a.train, b.train) and np.array_equal(a.test, b.test)
    counts = g.partition.class_counts(digits.y_train.numpy())
    assert (counts.max(0) > 3 * counts.mean(0)).any()  # far from IID at α = 0.5


def test_groups_are_independent_of_the_label_draws(digits):
    a = grouped_federation(digits, 8, seed=0, transforms=("identity", "invert"))
    b = grouped_federation(digits, 8, seed=0, transforms=("identity", "invert"), alpha=5.0)
    assert np.array_equal(a.groups, b.groups)


def test_bad_transform_or_too_few_clients_is_one_clear_error(digits):
    with pytest.raises(PflkitError, match="unknown group transform"):
        grouped_federation(digits, 4, transforms=("identity", "blur"))
    with pytest.raises(PflkitError, match="at least as many clients"):
        grouped_federation(digits, 3)


def test_cli_runs_on_the_grouped_partition(tmp_path):
    out = tmp_path / "r.json"
    r = subprocess.run(
        [sys.executable, "-m", "pflkit", "run", "fedavg", "--dataset", "digits", "--partition", "groups",
         "--clients", "4", "--rounds", "1", "--model", "mlp", "--local-steps", "2", "--no-progress", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["config"]["partition"] == "groups"


def test_concept_federation_differs_only_in_p_y_given_x(digits):
    g = concept_federation(digits, n_clients=9, seed=2, n_groups=3)
    maps = [np.array(m) for m in g.partition.params["label_maps"]]
    assert g.partition.params["groups"] == g.groups.tolist() and sorted(np.bincount(g.groups).tolist()) == [3, 3, 3]
    assert (maps[0] == np.arange(10)).all()  # group 0 keeps the labels
    for m in maps[1:]:
        assert sorted(m.tolist()) == list(range(10)) and (m != np.arange(10)).all()  # a derangement
    assert not (maps[1] == maps[2]).all()
    assert torch.equal(g.ds.x_train, digits.x_train) and torch.equal(g.ds.x_test, digits.x_test)  # p(x) untouched
    ref = partition_dataset(digits, "iid", 9, 2)
    for c, r, grp in zip(g.partition.clients, ref.clients, g.groups):
        assert np.array_equal(c.train, r.train) and np.array_equal(c.test, r.test)  # iid label mixes
        for split, y_new, y_old in (("train", g.ds.y_train, digits.y_train), ("val", g.ds.y_train, digits.y_train),
                                    ("test", g.ds.y_test, digits.y_test)):  # fmt: skip
            idx = torch.as_tensor(getattr(c, split), dtype=torch.long)
            assert y_new[idx].tolist() == maps[grp][y_old[idx].numpy()].tolist()


def test_concept_partition_from_a_config(digits):
    from pflkit.engine import Federation, RunConfig

    cfg = RunConfig(dataset="digits", partition="concept", clients=6, label_clusters=2, seed=0)
    fed = Federation.from_config(cfg, ds=digits)
    assert fed.partition.protocol == "concept" and len(fed.partition.params["label_maps"]) == 2
