"""The compute path: how a run's arithmetic is laid out on this machine, recorded with every run.

Two runs of one config give identical numbers only on one CPU model, one torch version and one
compute path.  The path is what the kit or the environment chooses without changing the
mathematics:

* the **memory format** of convolutional models: channels-last (NHWC) trains faster than
  contiguous (NCHW) on the CPU for some model families (``benchmarks/memory_format.py``
  measures it, both formats in one run).  ``auto`` uses the family's measured choice
  (:data:`CHANNELS_LAST`); ``contiguous`` and ``channels_last`` force one for every model
  (``PFLKIT_MEMORY_FORMAT`` or :func:`set_memory_format`; the replay check sets a stored
  run's own);
* the environment variables that pick other CPU kernels (oneDNN's ``ONEDNN_MAX_CPU_ISA``,
  ATen's ``ATEN_CPU_CAPABILITY``, MKL's ``MKL_ENABLE_INSTRUCTIONS`` and ``MKL_CBWR``).
"""

from __future__ import annotations

import os

import torch
from torch import nn

from .errors import PflkitError

MODES = ("auto", "contiguous", "channels_last")
ENV_KNOBS = ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR")

# Model families that train channels-last under ``auto``: those at least 1.1× faster that way at
# every batch size measured (10, 50, 64; one torch thread) on the book's CPU machine kind
# (benchmarks/memory_format.py; AMD EPYC, 2026-11-26: LeNet 1.32-1.37×, the FedAvg CNN 1.19-1.25×,
# small AlexNet 1.22-1.23×, ShuffleNetV2 1.33-1.48×; small ResNet-18 0.98-1.09× stays contiguous;
# MLPs have no convolutions).
CHANNELS_LAST = frozenset({"lenet", "fedavg-cnn", "alexnet", "shufflenet_v2_x0_5"})

_mode: list[str] = []  # set_memory_format's choice for this process, if any


def memory_format_mode() -> str:
    """``auto``, ``contiguous`` or ``channels_last``: :func:`set_memory_format`'s choice, else
    ``PFLKIT_MEMORY_FORMAT``, else ``auto``."""
    mode = _mode[-1] if _mode else os.environ.get("PFLKIT_MEMORY_FORMAT", "auto")
    if mode not in MODES:
        raise PflkitError(f"PFLKIT_MEMORY_FORMAT must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def set_memory_format(mode: str | None) -> None:
    """Force a memory format for the models this process builds from now on (None: back to the
    environment's choice)."""
    if mode is not None and mode not in MODES:
        raise PflkitError(f"memory format must be one of {', '.join(MODES)}, got {mode!r}")
    _mode.clear()
    if mode is not None:
        _mode.append(mode)


def family(name: str) -> str:
    """A model name's family: ``alexnet-16`` → ``alexnet``, ``mlp8x256`` → ``mlp``."""
    head = name.split("-")[0] if name.startswith(("alexnet-", "resnet18-")) else name
    return "mlp" if head.startswith("mlp") else head


def laid_out(model: nn.Module, name: str) -> nn.Module:
    """``model`` in the memory format the compute path gives its family (convolutions only)."""
    mode = memory_format_mode()
    last = mode == "channels_last" or (mode == "auto" and family(name) in CHANNELS_LAST)
    if last and any(p.dim() == 4 for p in model.parameters()):
        model = model.to(memory_format=torch.channels_last)
    return model


def compute_path() -> dict:
    """What the provenance of a run records of its compute path."""
    path = {"memory_format": memory_format_mode()}
    env = {k: os.environ[k] for k in ENV_KNOBS if os.environ.get(k)}
    if env:
        path["env"] = env
    return path


# runs stored before the compute path was recorded: contiguous models, the default kernels
DEFAULT_PATH = {"memory_format": "contiguous"}


def recorded_path(provenance: dict) -> dict:
    """The compute path a stored run records (:data:`DEFAULT_PATH` for runs made before it did)."""
    return provenance.get("compute") or dict(DEFAULT_PATH)
