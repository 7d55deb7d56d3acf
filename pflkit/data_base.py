"""What every dataset loader shares: :class:`FedDataset`, finding and reading the files, the registry
of datasets by name, and the helpers that locate or download a dataset's folder.  The loaders live in
:mod:`pflkit.data` (Fashion-MNIST, digits) and :mod:`pflkit.data_more` (the others)."""

from __future__ import annotations

import dataclasses
import gzip
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .errors import DataUnavailable, PflkitError

REPO_DATA = Path(__file__).resolve().parent.parent / "datasets"


@dataclass
class FedDataset:
    """A labelled image dataset held as tensors (official train and test sets)."""

    name: str
    x_train: torch.Tensor  # uint8, N x C x H x W
    y_train: torch.Tensor  # int64, N
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: list[str]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    # optional grouping of classes, e.g. CIFAR-100's 20 superclasses: coarse id per class
    coarse_of_class: list[int] | None = None
    coarse_names: list[str] | None = None
    info: dict = field(default_factory=dict)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return tuple(self.x_train.shape[1:])  # type: ignore[return-value]

    def to(self, device) -> FedDataset:
        """Move all tensors to ``device`` (returns self)."""
        for name in ("x_train", "y_train", "x_test", "y_test"):
            setattr(self, name, getattr(self, name).to(device))
        return self

    def normalize(self, x_uint8: torch.Tensor) -> torch.Tensor:
        """uint8 images -> float32, scaled to [0, 1] then standardised per channel."""
        mean = torch.tensor(self.mean, device=x_uint8.device).view(1, -1, 1, 1)
        std = torch.tensor(self.std, device=x_uint8.device).view(1, -1, 1, 1)
        return (x_uint8.float().div_(255.0) - mean) / std


# ----------------------------------------------------------------------------- files


def data_roots(root: str | os.PathLike | None = None) -> list[Path]:
    """Folders searched for dataset files, most specific first."""
    roots = []
    if root is not None:
        roots.append(Path(root))
    if os.environ.get("PFLKIT_DATA"):
        roots.append(Path(os.environ["PFLKIT_DATA"]))
    roots.append(REPO_DATA)
    return roots


def download_root(root: str | os.PathLike | None = None) -> Path:
    return data_roots(root)[0]


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file (the MNIST family's format), gzipped or not."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise PflkitError(f"{path} is not an unsigned-byte IDX file")
    shape = struct.unpack(">" + "I" * ndim, raw[4 : 4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def find_file(dirs: list[Path], stem: str) -> Path | None:
    """``stem`` or ``stem.gz`` in the first folder that has it."""
    for d in dirs:
        for name in (stem, stem + ".gz"):
            if (d / name).is_file():
                return d / name
    return None


def load_idx_pair(dirs: list[Path], prefix: str, stem_images: str, stem_labels: str):
    img = find_file(dirs, prefix + stem_images)
    lab = find_file(dirs, prefix + stem_labels)
    if img is None or lab is None:
        return None
    x = torch.from_numpy(read_idx(img).copy())
    y = torch.from_numpy(read_idx(lab).astype(np.int64))
    if x.ndim == 3:
        x = x.unsqueeze(1)
    return x, y


# ----------------------------------------------------------------------------- registry

Loader = Callable[..., FedDataset]
LOADERS: dict[str, Loader] = {}
OFFLINE_CHECKS: dict[str, Callable[[Path | None], bool]] = {}
DESCRIPTIONS: dict[str, str] = {}


def register(name: str, description: str, available: Callable[[Path | None], bool]):
    def deco(fn: Loader) -> Loader:
        LOADERS[name] = fn
        OFFLINE_CHECKS[name] = available
        DESCRIPTIONS[name] = description
        return fn

    return deco


def dataset_names() -> list[str]:
    return sorted(LOADERS)


def load_dataset(name: str, root=None, download: bool = False, **kwargs) -> FedDataset:
    """Load a dataset by name as tensors on the CPU."""
    key = name.lower()
    if key not in LOADERS:
        raise PflkitError(f"unknown dataset {name!r}; known: {', '.join(dataset_names())}")
    return LOADERS[key](root=root, download=download, **kwargs)


def available_offline(name: str, root=None) -> bool:
    return OFFLINE_CHECKS[name.lower()](Path(root) if root else None)


# ----------------------------------------------------------------------------- shared helpers


def _tv():
    from ._compat import import_torchvision

    return import_torchvision()


def _find_dir(dirs: list[Path], stems) -> Path | None:
    """The first folder holding every file in ``stems`` (each possibly gzipped)."""
    for d in dirs:
        if all(find_file([d], s) for s in stems):
            return d
    return None


def _require(label: str, locate, fetch, root, download: bool, hint: str):
    """``locate()``'s folder; if none, download with ``fetch(target)`` when asked to,
    else raise :class:`DataUnavailable` naming ``hint``, what to put where."""
    found = locate()
    if found is None and download:
        fetch(str(download_root(root)))
        found = locate()
    if found is None:
        where = ", ".join(str(r) for r in data_roots(root))
        raise DataUnavailable(
            f"{label} not found under {where}; pass --download on a machine with internet or put {hint} there"
        )
    return found


IDX_STEMS = ("images-idx3-ubyte", "labels-idx1-ubyte")


def _idx_stems(prefixes) -> list[str]:
    return [p + s for p in prefixes for s in IDX_STEMS]


def _idx_sets(d: Path, prefixes) -> list[torch.Tensor]:
    """``[x_train, y_train, x_test, y_test]`` from IDX files in ``d``."""
    return [t for p in prefixes for t in load_idx_pair([d], p, *IDX_STEMS)]


def with_pairs(ds: FedDataset, name: str) -> FedDataset:
    """``ds`` whose coarse groups are its class pairs (0, 1), (2, 3), ...: what the ``coarse`` protocol
    hands out, two clients a pair (pFedMB §V-B)."""
    return dataclasses.replace(
        ds, name=name, coarse_of_class=[c // 2 for c in range(ds.n_classes)],
        coarse_names=[f"pair {p}" for p in range(ds.n_classes // 2)],
    )  # fmt: skip
