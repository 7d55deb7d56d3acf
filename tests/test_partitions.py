import itertools

import numpy as np
import pytest

from pflkit.errors import PflkitError
from pflkit.partitions import PROTOCOLS, Partition, make_partition, total_variation

RNG = np.random.default_rng(0)
Y_TRAIN = np.repeat(np.arange(10), 300)[RNG.permutation(3000)]
Y_TEST = np.repeat(np.arange(10), 50)
COARSE = [0, 1, 0, 1, 0, 2, 0, 2, 3, 2]


def build(protocol, n_clients, seed, **kw):
    return make_partition(Y_TRAIN, Y_TEST, protocol, n_clients, seed, coarse_of_class=COARSE, **kw)


CASES = list(
    itertools.product(
        PROTOCOLS,
        [1, 5, 20, 50],  # clients
        [0, 7],  # seeds
    )
)


@pytest.mark.parametrize("protocol,n_clients,seed", CASES)
def test_invariants(protocol, n_clients, seed):
    kw = {"alpha": 0.3} if protocol.startswith("dirichlet") else {}
    if protocol == "dirichlet-normalized" and n_clients > 1:
        kw.update(novel_clients=1, novel_alpha=1.0)
    p = build(protocol, n_clients, seed, **kw)
    train = np.concatenate([np.concatenate([c.train, c.val]) for c in p.clients])
    test = np.concatenate([c.test for c in p.clients])
    # disjoint across clients and between a client's train and val
    assert len(np.unique(train)) == len(train)
    assert len(np.unique(test)) == len(test)
    for c in p.clients:
        assert not set(c.train) & set(c.val)
    # complete up to the reported unassigned count
    assert len(train) + p.unassigned == len(Y_TRAIN)
    assert len(test) + p.unassigned_test == len(Y_TEST)
    # the same class mix on each split: a client's test classes are among its training classes
    for c in p.clients:
        assert set(Y_TEST[c.test]) <= set(Y_TRAIN[np.concatenate([c.train, c.val])])
    # deterministic given the seed
    q = build(protocol, n_clients, seed, **kw)
    assert all(
        np.array_equal(a.train, b.train) and np.array_equal(a.test, b.test) for a, b in zip(p.clients, q.clients)
    )


@pytest.mark.parametrize("k,n_clients", [(1, 10), (2, 10), (2, 20), (3, 7), (5, 4), (10, 3)])
@pytest.mark.parametrize("protocol", ["pathological", "pathological-equal"])
def test_k_classes_where_promised(protocol, k, n_clients):
    p = build(protocol, n_clients, 1, classes_per_client=k)
    counts = p.class_counts(Y_TRAIN)
    assert ((counts > 0).sum(1) == k).all()
    holders = (counts > 0).sum(0)
    assert holders.max() - holders.min() <= 1  # classes spread evenly over clients
    if protocol == "pathological-equal":
        assert len({len(c.train) + len(c.val) for c in p.clients}) == 1


def test_pathological_shares_follow_uniform_draws():
    p = build("pathological", 10, 3, classes_per_client=2, shares=(0.4, 0.6))
    # each class has two holders whose shares a/(a+b) with a, b ~ U(.4,.6) lie in [.4, .6]
    for c in range(10):
        s = p.shares[:, c][p.shares[:, c] > 0]
        assert len(s) == 2 and np.all((s >= 0.4 - 1e-9) & (s <= 0.6 + 1e-9))
        assert s.sum() == pytest.approx(1)


def test_unassigned_reported_when_classes_have_no_holder():
    p = build("pathological", 2, 0, classes_per_client=2)  # 4 of 10 classes held
    assert p.unassigned == 6 * 300
    assert p.unassigned_test == 6 * 50


def test_coarse_one_group_per_client():
    p = build("coarse", 8, 0)
    groups = np.asarray(COARSE)
    for c in p.clients:
        assert len(set(groups[Y_TRAIN[c.train]])) == 1
    assert p.unassigned == 0


def test_dirichlet_normalized_novel_clients():
    p = build("dirichlet-normalized", 10, 0, alpha=0.1, novel_clients=3, novel_alpha=1.0)
    assert p.novel == [7, 8, 9]
    assert p.shares.sum(0) == pytest.approx(np.ones(10))


def test_novel_clients_in_groups_of_alpha():
    """pFedHN Fig. 2: novel clients in equal groups, one per α; the training clients keep α."""
    p = build("dirichlet-normalized", 12, 0, alpha=0.1, novel_clients=4, novel_alpha=[0.1, 1.0])
    assert p.novel == [8, 9, 10, 11]
    assert p.params["novel_alpha"] == [0.1, 0.1, 1.0, 1.0]
    assert p.shares.sum(0) == pytest.approx(np.ones(10))


def test_subset_keeps_the_clients_and_accounts_for_the_rest():
    p = build("pathological", 9, 0)
    q = p.subset([6, 7, 8])
    assert q.n_clients == 3 and q.shares.shape == (3, 10)
    assert all(np.array_equal(a.train, b.train) for a, b in zip(q.clients, p.clients[6:]))
    assert q.unassigned == p.unassigned + sum(len(c.train) + len(c.val) for c in p.clients[:6])


def test_val_fraction():
    p = build("iid", 5, 0, val_fraction=0.2)
    for c in p.clients:
        assert len(c.val) == pytest.approx(0.2 * (len(c.train) + len(c.val)), abs=10)


def test_json_roundtrip(tmp_path):
    p = build("dirichlet", 6, 2, alpha=0.5)
    p.save(tmp_path / "p.json")
    q = Partition.load(tmp_path / "p.json")
    assert q.unassigned == p.unassigned and q.protocol == "dirichlet"
    assert all(np.array_equal(a.val, b.val) for a, b in zip(p.clients, q.clients))


@pytest.mark.parametrize(
    "protocol,n,kw",
    [
        ("pathological", 5, {"classes_per_client": 11}),
        ("pathological", 5, {"classes_per_client": 0}),
        ("iid", 3000, {}),
        ("dirichlet", 5, {"alpha": 0.0}),
        ("nope", 5, {}),
        ("iid", 5, {"novel_clients": 1}),
    ],
)
def test_impossible_partitions(protocol, n, kw):
    with pytest.raises(PflkitError):
        build(protocol, n, 0, **kw)


def test_total_variation():
    assert total_variation([1, 0], [0, 1]) == 1
    assert total_variation([2, 2], [1, 1]) == 0


def test_label_clusters_share_one_dirichlet_draw_per_group_of_classes():
    y = np.repeat(np.arange(10), 200)
    p = make_partition(y, y[:500], "label-clusters", 12, 3, alpha=0.4, label_clusters=3)
    P = p.shares
    np.testing.assert_allclose(P.sum(0), 1.0)  # every class given out whole
    distinct = {tuple(np.round(P[:, c], 12)) for c in range(10)}
    assert len(distinct) == 3  # three groups of classes, one share vector each
    sizes = sorted(sum(1 for c in range(10) if tuple(np.round(P[:, c], 12)) == d) for d in distinct)
    assert sizes == [3, 3, 4]  # near-equal groups
    groups = p.params["class_groups"]  # recorded: the classes of each group
    assert sorted(c for g in groups for c in g) == list(range(10)) and sorted(map(len, groups)) == [3, 3, 4]
    assert all(np.allclose(P[:, g], P[:, g[:1]]) for g in groups)
    one = make_partition(y, y[:500], "label-clusters", 12, 3, alpha=0.4, label_clusters=1).shares
    assert np.allclose(one, one[:, :1])  # one group: every client has the same share of every class
    with pytest.raises(PflkitError, match="label clusters"):
        make_partition(y, y[:500], "label-clusters", 12, 3, label_clusters=11)
