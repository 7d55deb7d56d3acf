"""Compatibility guard for importing torchvision next to a CPU-only torch.

torchvision 0.28.0 wheels are CUDA builds; with the CPU torch wheel their compiled
operators fail to register and ``import torchvision`` raises
``operator torchvision::nms does not exist``.  Declaring the two operator schemas that
torchvision's Python side registers fake kernels for makes the import succeed; datasets,
transforms and models then work, while ``nms`` and image decoding stay unavailable.

Import torchvision only through :func:`import_torchvision`.
"""

from __future__ import annotations

import importlib

_LIB = None  # keep the Library object alive: dropping it removes the schemas


def _declare_missing_ops() -> None:
    global _LIB
    import torch

    if _LIB is not None:
        return
    try:
        torch.library.Library("torchvision", "DEF")
    except RuntimeError:
        pass
    lib = torch.library.Library("torchvision", "FRAGMENT")
    for schema in (
        "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
        "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    ):
        try:
            lib.define(schema)
        except RuntimeError:  # already defined (a working torchvision build)
            pass
    _LIB = lib


def import_torchvision():
    """Return the ``torchvision`` module, importable on CPU-only torch as well."""
    try:
        return importlib.import_module("torchvision")
    except (RuntimeError, ImportError) as err:
        if "torchvision::nms" not in str(err):
            raise
    import sys

    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    _declare_missing_ops()
    return importlib.import_module("torchvision")
