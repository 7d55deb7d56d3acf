"""The papers' partition protocols.

Every protocol is written as a *share matrix* ``P`` (clients x classes): client ``i``
receives the fraction ``P[i, c]`` of class ``c``'s samples, in the official train set and,
with the same shares, in the official test set, so each client's test data has the class
mix of its training data.  Columns sum to at most 1; what is left over is reported as
``unassigned``.  A fraction ``val_fraction`` of each client's training samples of each
class is held out as its validation split.

Protocols (command-line names):

``pathological``        k classes per client, ``a_{i,c} ~ U(low, high)``, client i gets
                        ``a_{i,c} / sum_j a_{j,c}`` of class c  (pFedMe / pFedHN §5.1 with
                        k=2, U(.4,.6); pFedMB's CIFAR-100 setting with k=20, U(.3,.7)).
``pathological-equal``  k random classes per client and equal data sizes (pFedMB "random
                        2 classes").
``dirichlet``           ``P[:, c] ~ Dir(alpha)`` over clients for every class (Hsu et al.;
                        pFedMB alpha=.4, FeSEM alpha=.5, KT-pFL "all labels, different counts").
``dirichlet-normalized`` ``p_i ~ Dir(alpha)`` over classes for every client, then normalised
                        per class so that ``sum_i p_{i,c} = 1`` (pFedHN §5.3); the last
                        ``novel_clients`` clients are held out, drawn with ``novel_alpha``
                        (one value, or several: equal consecutive groups of novel clients,
                        one per value, as pFedHN's Figure 2 varies α ∈ {.1,.25,.5,1}).
``label-clusters``      the classes are shuffled into ``label_clusters`` groups; for every group
                        ``w ~ Dir(alpha)`` over clients, and client i gets the fraction w_i of
                        every class of the group (FedEM's CIFAR-10 split, reused by FedMN:
                        3 groups, alpha=.4).
``coarse``              one coarse group per client (CIFAR-100 superclasses, Omniglot
                        alphabets, Fashion-MNIST's documented garment groups); a group's
                        classes are split equally among the clients that hold it (pFedHN §5.5).
``iid``                 every client gets 1/N of every class.
``natural``             one client per user of a dataset that has users (LEAF's FEMNIST writers,
                        FedCelebA celebrities): the user's own train and test samples; with
                        fewer clients than users, a random sample of the users.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .errors import PflkitError

PROTOCOLS = (
    "pathological",
    "pathological-equal",
    "dirichlet",
    "dirichlet-normalized",
    "label-clusters",
    "coarse",
    "iid",
)
NATURAL = "natural"  # not a share matrix: the users of a dataset that has them (natural_partition)


@dataclass
class ClientSplit:
    train: np.ndarray  # indices into the official train set
    val: np.ndarray  # indices into the official train set, disjoint from train
    test: np.ndarray  # indices into the official test set


@dataclass
class Partition:
    dataset: str
    protocol: str
    seed: int
    n_train: int
    n_test: int
    unassigned: int  # official-train samples given to no client
    unassigned_test: int
    clients: list[ClientSplit]
    shares: np.ndarray  # clients x classes share matrix P
    novel: list[int] = field(default_factory=list)  # held-out (novel) clients
    params: dict = field(default_factory=dict)

    @property
    def n_clients(self) -> int:
        return len(self.clients)

    def class_counts(self, y: np.ndarray, split: str = "train") -> np.ndarray:
        """clients x classes matrix of sample counts in ``split`` (labels ``y`` of that set)."""
        y = np.asarray(y)
        n_classes = self.shares.shape[1]
        return np.stack([np.bincount(y[getattr(c, split)], minlength=n_classes) for c in self.clients])

    def subset(self, ids) -> Partition:
        """The partition restricted to clients ``ids`` (renumbered 0..len-1), e.g. one group's
        clients for a per-group baseline.  Samples of the other clients count as unassigned."""
        ids = [int(i) for i in ids]
        clients = [self.clients[i] for i in ids]
        return Partition(
            self.dataset, self.protocol, self.seed, self.n_train, self.n_test,
            self.n_train - sum(len(c.train) + len(c.val) for c in clients),
            self.n_test - sum(len(c.test) for c in clients),
            clients, self.shares[ids], [ids.index(i) for i in self.novel if i in ids],
            dict(self.params, subset_of=self.n_clients, n_clients=len(ids)),
        )  # fmt: skip

    def to_json(self) -> dict:
        return {
            "dataset": self.dataset,
            "protocol": self.protocol,
            "seed": self.seed,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "unassigned": self.unassigned,
            "unassigned_test": self.unassigned_test,
            "novel": list(self.novel),
            "params": self.params,
            "shares": np.round(self.shares, 6).tolist(),
            "clients": [{k: v.tolist() for k, v in asdict(c).items()} for c in self.clients],
        }

    def save(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_json()))

    @classmethod
    def from_json(cls, d: dict) -> Partition:
        clients = [
            ClientSplit(*(np.asarray(c[k], dtype=np.int64) for k in ("train", "val", "test"))) for c in d["clients"]
        ]
        return cls(
            d["dataset"], d["protocol"], d["seed"], d["n_train"], d["n_test"], d["unassigned"],
            d.get("unassigned_test", 0), clients, np.asarray(d["shares"]), d.get("novel", []), d.get("params", {}),
        )  # fmt: skip

    @classmethod
    def load(cls, path) -> Partition:
        return cls.from_json(json.loads(Path(path).read_text()))


# ----------------------------------------------------------------------------- share matrices


def assign_classes(n_clients: int, n_classes: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Boolean clients x classes matrix, k distinct classes per client, holders balanced.

    Each client takes, among the classes it does not hold yet, those held by the fewest
    clients so far (ties broken at random), so every class ends up with
    ``floor`` or ``ceil`` of ``n_clients * k / n_classes`` holders.
    """
    if not 1 <= k <= n_classes:
        raise PflkitError(f"impossible partition: {k} classes per client with {n_classes} classes")
    held = np.zeros((n_clients, n_classes), dtype=bool)
    holders = np.zeros(n_classes, dtype=int)
    for i in range(n_clients):
        for _ in range(k):
            load = np.where(held[i], np.inf, holders + rng.random(n_classes) * 0.5)
            c = int(np.argmin(load))
            held[i, c] = True
            holders[c] += 1
    return held


def shares_pathological(n_clients, n_classes, k, low, high, rng) -> np.ndarray:
    if not 0 < low <= high:
        raise PflkitError(f"impossible partition: shares must satisfy 0 < low <= high, got U({low}, {high})")
    held = assign_classes(n_clients, n_classes, k, rng)
    a = np.where(held, rng.uniform(low, high, size=held.shape), 0.0)
    col = a.sum(axis=0, keepdims=True)
    return np.divide(a, col, out=np.zeros_like(a), where=col > 0)


def shares_pathological_equal(n_clients, n_classes, k, class_sizes, rng) -> np.ndarray:
    held = assign_classes(n_clients, n_classes, k, rng)
    holders = held.sum(axis=0)
    # the same number of samples for every (client, class) pair: the scarcest class decides
    per_pair = min(class_sizes[c] // holders[c] for c in range(n_classes) if holders[c] > 0)
    return held * (per_pair / np.maximum(class_sizes, 1))[None, :]


def shares_dirichlet(n_clients, n_classes, alpha, rng) -> np.ndarray:
    if alpha <= 0:
        raise PflkitError(f"impossible partition: Dirichlet alpha must be > 0, got {alpha}")
    return rng.dirichlet(np.full(n_clients, alpha), size=n_classes).T


def shares_label_clusters(n_clients, n_classes, n_groups, alpha, rng) -> np.ndarray:
    """FedEM's split: shuffled classes in ``n_groups`` near-equal groups; one Dir(alpha) draw over
    clients per group gives every client the same share of each class of the group."""
    if not 1 <= n_groups <= n_classes:
        raise PflkitError(f"impossible partition: {n_groups} label clusters with {n_classes} classes")
    if alpha <= 0:
        raise PflkitError(f"impossible partition: Dirichlet alpha must be > 0, got {alpha}")
    groups = np.array_split(rng.permutation(n_classes), n_groups)
    P = np.zeros((n_clients, n_classes))
    for g in groups:
        P[:, g] = rng.dirichlet(np.full(n_clients, alpha))[:, None]
    return P


def novel_alphas(novel: int, novel_alpha) -> list[float]:
    """The α of each novel client: equal consecutive groups, one per value of ``novel_alpha``."""
    values = [float(a) for a in np.atleast_1d(novel_alpha)]
    return [values[j * len(values) // novel] for j in range(novel)] if novel else []


def shares_dirichlet_normalized(n_clients, n_classes, alpha, novel, novel_alpha, rng) -> np.ndarray:
    alphas = [alpha] * (n_clients - novel) + novel_alphas(novel, novel_alpha)
    if min(alphas) <= 0:
        raise PflkitError("impossible partition: Dirichlet alpha must be > 0")
    p = np.stack([rng.dirichlet(np.full(n_classes, a)) for a in alphas])  # p_i ~ Dir(alpha)
    return p / p.sum(axis=0, keepdims=True)  # normalise so that sum_i p_{i,c} = 1


def shares_coarse(n_clients, n_classes, coarse_of_class, rng) -> np.ndarray:
    if coarse_of_class is None:
        raise PflkitError("the coarse protocol needs a dataset with coarse groups (e.g. cifar100, fashion-mnist)")
    coarse_of_class = np.asarray(coarse_of_class)
    n_groups = int(coarse_of_class.max()) + 1
    # groups handed out round-robin in a random order: each group gets N/G clients (± 1)
    order = rng.permutation(n_groups)
    group = order[np.arange(n_clients) % n_groups]
    holds = group[:, None] == coarse_of_class[None, :]
    holders = holds.sum(axis=0, keepdims=True)
    return np.divide(holds, holders, out=np.zeros(holds.shape), where=holders > 0)


# ----------------------------------------------------------------------------- allocation


def allocate(y: np.ndarray, shares: np.ndarray, rng: np.random.Generator) -> list[list[np.ndarray]]:
    """Split each class's indices among clients by the share matrix.

    Returns ``out[i][c]``: the indices of class ``c`` given to client ``i``.  Client i gets
    the slice between ``round(n_c * cumsum(P[:, c]))`` boundaries of a random permutation.
    """
    n_clients, n_classes = shares.shape
    out = [[np.empty(0, dtype=np.int64) for _ in range(n_classes)] for _ in range(n_clients)]
    for c in range(n_classes):
        idx = rng.permutation(np.flatnonzero(y == c))
        bounds = np.round(np.concatenate([[0.0], np.cumsum(shares[:, c])]) * len(idx)).astype(int)
        bounds = np.minimum(bounds, len(idx))
        for i in range(n_clients):
            out[i][c] = idx[bounds[i] : bounds[i + 1]]
    return out


def make_partition(
    y_train,
    y_test,
    protocol: str,
    n_clients: int,
    seed: int = 0,
    *,
    n_classes: int | None = None,
    classes_per_client: int = 2,
    shares: tuple[float, float] = (0.4, 0.6),
    alpha: float = 0.5,
    novel_clients: int = 0,
    novel_alpha: float | list[float] | None = None,
    label_clusters: int = 3,
    coarse_of_class=None,
    val_fraction: float = 0.1,
    min_train: int = 2,
    dataset: str = "",
) -> Partition:
    """Partition the official train/test sets among ``n_clients`` by ``protocol``."""
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    n_classes = int(n_classes or max(y_train.max(), y_test.max()) + 1)
    if protocol == NATURAL:
        raise PflkitError(
            f"the natural protocol needs a dataset with users (femnist, celeba), not {dataset or 'this one'}"
        )
    if protocol not in PROTOCOLS:
        raise PflkitError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}, {NATURAL}")
    if n_clients < 1 or n_clients * min_train > len(y_train):
        raise PflkitError(
            f"impossible partition: {n_clients} clients need at least {min_train} training samples each, "
            f"the dataset has {len(y_train)}"
        )
    if not 0 <= val_fraction < 1:
        raise PflkitError(f"val_fraction must be in [0, 1), got {val_fraction}")
    if novel_clients and protocol != "dirichlet-normalized":
        raise PflkitError("novel clients are defined for the dirichlet-normalized protocol only")
    if not 0 <= novel_clients < n_clients:
        raise PflkitError(f"impossible partition: {novel_clients} novel clients out of {n_clients}")

    rng = np.random.default_rng(seed)
    class_sizes = np.bincount(y_train, minlength=n_classes)
    params = {"n_clients": n_clients, "val_fraction": val_fraction}
    # Dirichlet draws can leave a client with (almost) nothing: redraw, as is customary
    for _attempt in range(100):
        if protocol == "pathological":
            P = shares_pathological(n_clients, n_classes, classes_per_client, *shares, rng)
            params.update(classes_per_client=classes_per_client, shares=list(shares))
        elif protocol == "pathological-equal":
            P = shares_pathological_equal(n_clients, n_classes, classes_per_client, class_sizes, rng)
            params.update(classes_per_client=classes_per_client)
        elif protocol == "dirichlet":
            P = shares_dirichlet(n_clients, n_classes, alpha, rng)
            params.update(alpha=alpha)
        elif protocol == "dirichlet-normalized":
            na = alpha if novel_alpha is None else novel_alpha
            P = shares_dirichlet_normalized(n_clients, n_classes, alpha, novel_clients, na, rng)
            params.update(alpha=alpha, novel_clients=novel_clients, novel_alpha=novel_alphas(novel_clients, na))
        elif protocol == "label-clusters":
            P = shares_label_clusters(n_clients, n_classes, label_clusters, alpha, rng)
            groups = {}  # the classes of a group share one column of P
            for c in range(n_classes):
                groups.setdefault(tuple(P[:, c]), []).append(c)
            params.update(alpha=alpha, label_clusters=label_clusters, class_groups=sorted(groups.values()))
        elif protocol == "coarse":
            P = shares_coarse(n_clients, n_classes, coarse_of_class, rng)
        else:  # iid
            P = np.full((n_clients, n_classes), 1.0 / n_clients)
        train = allocate(y_train, P, rng)
        sizes = np.array([sum(len(a) for a in row) for row in train])
        if sizes.min() >= min_train or protocol not in ("dirichlet", "dirichlet-normalized", "label-clusters"):
            break
    if sizes.min() < min_train:
        worst = int(np.argmin(sizes))
        raise PflkitError(
            f"impossible partition: client {worst} gets {sizes[worst]} training samples "
            f"(< {min_train}); use fewer clients or another protocol"
        )
    # test shares = the training shares actually realised (after rounding), so that a client is
    # never tested on a class it has no training data of
    realised = np.array([[len(a) for a in row] for row in train]) / np.maximum(class_sizes, 1)[None, :]
    test = allocate(y_test, realised, rng)

    clients = []
    for i in range(n_clients):
        tr, va = [], []
        for c in range(n_classes):
            idx = train[i][c]
            n_val = int(round(val_fraction * len(idx)))
            if n_val == len(idx) and len(idx) > 0:  # never leave a class without training data
                n_val -= 1
            va.append(idx[:n_val])
            tr.append(idx[n_val:])
        clients.append(
            ClientSplit(np.sort(np.concatenate(tr)), np.sort(np.concatenate(va)), np.sort(np.concatenate(test[i])))
        )
    n_assigned = sum(len(c.train) + len(c.val) for c in clients)
    n_assigned_test = sum(len(c.test) for c in clients)
    return Partition(
        dataset=dataset,
        protocol=protocol,
        seed=seed,
        n_train=len(y_train),
        n_test=len(y_test),
        unassigned=len(y_train) - n_assigned,
        unassigned_test=len(y_test) - n_assigned_test,
        clients=clients,
        shares=P,
        novel=list(range(n_clients - novel_clients, n_clients)),
        params=params,
    )


def natural_partition(
    y_train, train_user, test_user, n_users: int, n_clients: int | None = None, seed: int = 0,
    *, n_classes: int | None = None, val_fraction: float = 0.1, dataset: str = "",
) -> Partition:  # fmt: skip
    """One client per user: its training samples (a random ``val_fraction`` of them held out
    for validation, at least one kept for training) and its test samples.  ``n_clients``
    fewer than the users: a random sample of them (in user order)."""
    y_train, train_user, test_user = (np.asarray(a) for a in (y_train, train_user, test_user))
    n_classes = int(n_classes or y_train.max() + 1)
    n_clients = n_users if n_clients is None else n_clients
    if not 1 <= n_clients <= n_users:
        raise PflkitError(f"impossible partition: {n_clients} clients, the dataset has {n_users} users")
    if not 0 <= val_fraction < 1:
        raise PflkitError(f"val_fraction must be in [0, 1), got {val_fraction}")
    rng = np.random.default_rng(seed)
    users = np.arange(n_users) if n_clients == n_users else np.sort(rng.choice(n_users, n_clients, replace=False))
    clients = []
    for u in users:
        own = rng.permutation(np.flatnonzero(train_user == u))
        n_val = min(int(round(val_fraction * len(own))), max(len(own) - 1, 0))
        clients.append(ClientSplit(np.sort(own[n_val:]), np.sort(own[:n_val]), np.flatnonzero(test_user == u)))
    class_sizes = np.maximum(np.bincount(y_train, minlength=n_classes), 1)
    counts = np.stack([np.bincount(y_train[np.concatenate([c.train, c.val])], minlength=n_classes) for c in clients])
    n_assigned = sum(len(c.train) + len(c.val) for c in clients)
    return Partition(
        dataset, "natural", seed, len(y_train), len(test_user), len(y_train) - n_assigned,
        len(test_user) - sum(len(c.test) for c in clients), clients, counts / class_sizes[None, :],
        params={"n_clients": n_clients, "val_fraction": val_fraction, "users": users.tolist()},
    )  # fmt: skip


def partition_dataset(ds, protocol: str, n_clients: int, seed: int = 0, **kwargs) -> Partition:
    """:func:`make_partition` for a :class:`pflkit.data.FedDataset` (and :func:`natural_partition`
    for one with users)."""
    if protocol == NATURAL and "train_user" in ds.info:
        return natural_partition(
            ds.y_train.cpu().numpy(), ds.info["train_user"], ds.info["test_user"], len(ds.info["users"]),
            n_clients, seed, n_classes=ds.n_classes, val_fraction=kwargs.get("val_fraction", 0.1), dataset=ds.name,
        )  # fmt: skip
    return make_partition(
        ds.y_train.cpu().numpy(),
        ds.y_test.cpu().numpy(),
        protocol,
        n_clients,
        seed,
        n_classes=ds.n_classes,
        coarse_of_class=ds.coarse_of_class,
        dataset=ds.name,
        **kwargs,
    )


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """TV distance between two label distributions (pFedHN §5.3)."""
    p, q = np.asarray(p, float), np.asarray(q, float)
    return 0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum())
