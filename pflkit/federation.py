"""Building a federation from a run's configuration, below the round loop (:mod:`pflkit.engine`):
the config itself (:class:`RunConfig`), the dataset read once per process, its subsets and public
hold-outs, and the partition, as one :class:`Federation` of tensors on the device (grouped and
concept-shift federations from :mod:`pflkit.grouped`).  :mod:`pflkit.federated` holds what a client
does with its data; this module holds how the data are dealt out."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from .data import FedDataset, load_dataset
from .errors import PflkitError
from .federated import ClientData
from .partitions import Partition, partition_dataset


@dataclass
class RunConfig:
    method: str = "fedavg"
    dataset: str = "fashion-mnist"
    partition: str = "pathological"
    clients: int = 20
    rounds: int = 10
    seed: int = 0
    # partition protocol options
    classes_per_client: int = 2
    shares: tuple[float, float] = (0.4, 0.6)
    alpha: float = 0.5
    label_clusters: int = 3  # groups: of classes (label-clusters, FedEM's split), of label maps (concept)
    val_fraction: float = 0.1
    # held-out novel clients (dirichlet-normalized only, pFedHN §5.3): the last ``novel_clients``
    # clients never train; their label mixes are drawn with ``novel_alpha`` (one value, or one per
    # equal consecutive group of novel clients)
    novel_clients: int = 0
    novel_alpha: tuple[float, ...] | None = None
    # a stratified random subset of the dataset's official train / test images (None: all of
    # them), drawn with a fixed seed: the same images for every run seed
    train_images: int | None = None
    test_images: int | None = None
    # a public, unlabeled set held out of the training images before the partition (KT-pFL and the
    # distillation baselines): a stratified subset of this many, the same for every run seed
    public_images: int = 0
    # where the public set comes from: "" the held-out images above; another dataset's name (e.g.
    # "digits"): ``public_images`` images of that dataset (all of them if it has fewer), resized to
    # the run's images, in their place. The held-out images still leave the clients, so a run
    # differs from its twin with the held-out set in the public set's domain only
    public_source: str = ""
    # model and local training
    model: str = "lenet"
    width: str | None = None
    sample_rate: float = 1.0
    local_epochs: int = 1
    local_steps: int | None = None  # if set, replaces local_epochs
    batch_size: int = 50
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 0.0
    grad_clip: float = 0.0  # clip each local step's gradient norm at this (0: no clipping)
    # engine
    eval_every: int = 1
    # evaluate every client after this many epochs of local fine-tuning of (a copy of) the model
    # it is judged by, on its own training split: the protocol of pFedMB §V-A, for any method
    eval_finetune_epochs: int = 0
    device: str = "auto"
    checkpoint: str | None = None  # file to checkpoint to every round, resumed from if present
    options: dict = field(default_factory=dict)  # method-specific options

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["shares"] = list(self.shares)
        d["novel_alpha"] = None if self.novel_alpha is None else list(self.novel_alpha)
        return d


def config_of(record: dict) -> RunConfig:
    """The RunConfig a stored run was made from (fields added to the kit later keep their defaults)."""
    names = {f.name for f in dataclasses.fields(RunConfig)}
    d = dict(record["config"])
    unknown = sorted(set(d) - names)
    if unknown:
        raise PflkitError(f"run {record.get('key', '?')} has config fields this kit lacks: {', '.join(unknown)}")
    d["shares"] = tuple(d.get("shares", (0.4, 0.6)))
    if d.get("novel_alpha") is not None:
        d["novel_alpha"] = tuple(d["novel_alpha"])
    d["checkpoint"] = None
    return RunConfig(**d)


def pick_device(name: str = "auto") -> torch.device:
    """``auto``: cuda if present, then mps, then cpu."""
    if name != "auto":
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


class Federation:
    """The dataset as normalised float tensors on the device, and the partition."""

    def __init__(self, ds: FedDataset, partition: Partition, device: torch.device, public=None):
        self.ds, self.partition, self.device = ds, partition, device
        # the public unlabeled images every party may use (normalised like the rest), or none
        self.x_public = ds.normalize(public.to(device)) if public is not None else ds.x_train[:0].to(device).float()
        self.x_train = ds.normalize(ds.x_train.to(device))
        self.y_train = ds.y_train.to(device)
        self.x_test = ds.normalize(ds.x_test.to(device))
        self.y_test = ds.y_test.to(device)
        self.clients = [ClientData(self, split) for split in partition.clients]

    @classmethod
    def from_config(cls, cfg: RunConfig, ds: FedDataset | None = None, download: bool = False) -> Federation:
        """The federation a config describes: its dataset (or ``ds``), subset to
        ``train_images``/``test_images``, split by its partition protocol (``groups``: the
        grouped federation of :mod:`pflkit.grouped`; ``concept``: its concept-shift federation)."""
        ds = subsample(ds or dataset(cfg.dataset, download), cfg.train_images, cfg.test_images)
        ds, public = hold_out_public(ds, cfg.public_images)
        if cfg.public_source and public is not None:  # another domain's images replace the held-out ones
            if cfg.public_source == cfg.dataset:
                raise PflkitError(
                    f"public_source {cfg.public_source!r} is the run's dataset: leave it empty for a held-out set"
                )
            public = foreign_public(cfg.public_source, cfg.public_images, ds.input_shape, download=download)
        if public is not None and cfg.partition in ("groups", "concept"):
            raise PflkitError(f"a public set is not supported with the {cfg.partition} partition")
        if cfg.partition == "groups":  # clients in latent groups of image transforms
            from .grouped import grouped_federation

            g = grouped_federation(ds, cfg.clients, cfg.seed, alpha=cfg.alpha, val_fraction=cfg.val_fraction)
            return cls(g.ds, g.partition, pick_device(cfg.device))
        if cfg.partition == "concept":  # iid clients in label_clusters groups that differ in p(y|x)
            from .grouped import concept_federation

            g = concept_federation(
                ds, cfg.clients, cfg.seed, n_groups=cfg.label_clusters, val_fraction=cfg.val_fraction
            )
            return cls(g.ds, g.partition, pick_device(cfg.device))
        part = partition_dataset(
            ds, cfg.partition, cfg.clients, cfg.seed, classes_per_client=cfg.classes_per_client,
            shares=tuple(cfg.shares), alpha=cfg.alpha, val_fraction=cfg.val_fraction,
            novel_clients=cfg.novel_clients, novel_alpha=None if cfg.novel_alpha is None else list(cfg.novel_alpha),
            label_clusters=cfg.label_clusters,
        )  # fmt: skip
        return cls(ds, part, pick_device(cfg.device), public)


_DATASETS: dict[str, FedDataset] = {}


def dataset(name: str, download: bool = False) -> FedDataset:
    """``load_dataset(name)``, read once per process (a sweep's worker runs many configs)."""
    if name not in _DATASETS:
        _DATASETS[name] = load_dataset(name, download=download)
    return _DATASETS[name]


def _stratified(y: torch.Tensor, n: int | None, seed, salt: int) -> torch.Tensor | None:
    """Sorted indices of a stratified random subset of ``n`` of the labels ``y`` (None: all)."""
    if n is None or n >= len(y):
        return None
    if n < 1:
        raise PflkitError(f"a subset needs at least one image, got {n}")
    rng = np.random.default_rng([seed, salt])
    y = y.cpu().numpy()
    classes, counts = np.unique(y, return_counts=True)
    exact = n * counts / len(y)  # each class keeps its share; the rounding remainders go to the largest fractions
    quota = np.floor(exact).astype(int)
    quota[np.argsort(quota - exact)[: n - quota.sum()]] += 1
    keep = np.concatenate([rng.choice(np.flatnonzero(y == c), q, replace=False) for c, q in zip(classes, quota)])
    return torch.as_tensor(np.sort(keep))


def hold_out_public(ds: FedDataset, n: int, seed: int = 0) -> tuple[FedDataset, torch.Tensor | None]:
    """A stratified subset of ``n`` training images taken out of ``ds`` as the public unlabeled
    set (its labels are dropped), the same for every run seed; ``n = 0``: no public set."""
    if not n:
        return ds, None
    if n >= len(ds.y_train):
        raise PflkitError(f"a public set of {n} images leaves no training images (the set has {len(ds.y_train)})")
    public = _stratified(ds.y_train, n, seed, 3)
    rest = torch.ones(len(ds.y_train), dtype=torch.bool)
    rest[public] = False
    out = dataclasses.replace(
        ds, x_train=ds.x_train[rest], y_train=ds.y_train[rest], info=_users_kept(ds.info, "train", rest)
    )
    return out, ds.x_train[public]


def foreign_public(
    name: str, n: int, shape: tuple[int, int, int], seed: int = 0, download: bool = False
) -> torch.Tensor:
    """``n`` images of dataset ``name`` (official train and test sets together; all of them if it
    has fewer, else a stratified subset drawn with a fixed seed; labels dropped) resized bilinearly
    to ``shape`` (C × H × W; grey images are repeated over colour channels, colour images averaged
    to grey): a public set from another domain, as uint8 like every dataset's images."""
    src = dataset(name, download)
    x, y = torch.cat([src.x_train, src.x_test]), torch.cat([src.y_train, src.y_test])
    if n < 1:
        raise PflkitError(f"a public set from {name} needs at least one image (public_images), got {n}")
    keep = _stratified(y, n, seed, 4)
    x = (x if keep is None else x[keep]).float()
    c, h, w = shape
    x = torch.nn.functional.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)
    if x.shape[1] != c:
        x = x.mean(1, keepdim=True).expand(-1, c, -1, -1)
    return x.round().clamp(0, 255).to(torch.uint8).contiguous()


def subsample(ds: FedDataset, train: int | None, test: int | None, seed: int = 0) -> FedDataset:
    """A stratified random subset of ``train`` training and ``test`` test images (None: all),
    the same for every run seed (drawn from ``seed``)."""
    tr, te = _stratified(ds.y_train, train, seed, 1), _stratified(ds.y_test, test, seed, 2)
    if tr is None and te is None:
        return ds
    out = ds
    if tr is not None:
        out = dataclasses.replace(
            out, x_train=out.x_train[tr], y_train=out.y_train[tr], info=_users_kept(out.info, "train", tr)
        )
    if te is not None:
        out = dataclasses.replace(
            out, x_test=out.x_test[te], y_test=out.y_test[te], info=_users_kept(out.info, "test", te)
        )
    return out


def _users_kept(info: dict, split: str, keep) -> dict:
    """``info`` with its per-image writers of ``split`` (``train_user``/``test_user``: a dataset with
    users, LEAF's) cut to the images ``keep`` (indices or a mask), as the images are."""
    key = f"{split}_user"
    return info if key not in info else dict(info, **{key: torch.as_tensor(info[key])[keep]})


# ----------------------------------------------------------------------------- metrics
