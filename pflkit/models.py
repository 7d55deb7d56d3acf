"""Models used by the papers.

Every kit model is a :class:`SplitNet`: a feature extractor ``body`` followed by a linear
classifier ``head``.  Methods that share only part of the network (FedPer shares the body,
LG-FedAvg the head, pFedHN-PC generates the body) select parameters by these prefixes.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from .errors import PflkitError

LENET_WIDTHS = {"S": 8, "M": 16, "L": 32}  # pFedHN Table 2: filters in the first conv


class SplitNet(nn.Module):
    def __init__(self, body: nn.Module, head: nn.Linear):
        super().__init__()
        self.body = body
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _flat_dim(body: nn.Module, input_shape) -> int:
    with torch.no_grad():
        return int(body(torch.zeros(1, *input_shape)).shape[1])


def lenet(input_shape=(1, 28, 28), n_classes=10, n_kernels: int = 16, hidden=(120, 84)) -> SplitNet:
    """LeNet of pFedHN / pFedMB: conv5(n) - pool - conv5(2n) - pool - fc 120 - fc 84 - fc out."""
    c = input_shape[0]
    layers: list[nn.Module] = [
        nn.Conv2d(c, n_kernels, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(n_kernels, 2 * n_kernels, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
    ]  # fmt: skip
    dim = _flat_dim(nn.Sequential(*layers), input_shape)
    for h in hidden:
        layers += [nn.Linear(dim, h), nn.ReLU()]
        dim = h
    return SplitNet(nn.Sequential(*layers), nn.Linear(dim, n_classes))


def fedavg_cnn(input_shape=(1, 28, 28), n_classes=10) -> SplitNet:
    """The CNN of McMahan et al. (2017): conv5(32) - pool - conv5(64) - pool - fc 512 - fc out,
    "same" padding (1,663,370 parameters on 28x28 MNIST, as the paper states)."""
    c = input_shape[0]
    layers: list[nn.Module] = [
        nn.Conv2d(c, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
    ]  # fmt: skip
    dim = _flat_dim(nn.Sequential(*layers), input_shape)
    body = nn.Sequential(*layers, nn.Linear(dim, 512), nn.ReLU())
    return SplitNet(body, nn.Linear(512, n_classes))


def mlp(input_shape=(1, 28, 28), n_classes=10, hidden=(200, 200)) -> SplitNet:
    layers: list[nn.Module] = [nn.Flatten()]
    dim = int(torch.tensor(input_shape).prod())
    for h in hidden:
        layers += [nn.Linear(dim, h), nn.ReLU()]
        dim = h
    return SplitNet(nn.Sequential(*layers), nn.Linear(dim, n_classes))


def torchvision_model(name: str, input_shape=(3, 32, 32), n_classes=10) -> SplitNet:
    """A torchvision architecture (e.g. resnet18, shufflenet_v2_x1_0) as body + linear head."""
    from ._compat import import_torchvision

    tv = import_torchvision()
    try:
        net = tv.models.get_model(name, weights=None, num_classes=n_classes)
    except ValueError as err:
        raise PflkitError(f"unknown model {name!r}") from err
    if input_shape[0] != 3:  # grey images: repeat to three channels in front of the net
        net = nn.Sequential(_RepeatChannels(3), net)
    head_owner, attr = _find_head(net)
    head = getattr(head_owner, attr)
    setattr(head_owner, attr, nn.Identity())
    return SplitNet(net, head)


class _RepeatChannels(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def forward(self, x):
        return x.expand(-1, self.n, -1, -1) if x.shape[1] == 1 else x


def _find_head(net: nn.Module):
    """The module that owns the last nn.Linear, and its attribute name."""
    last = None
    for owner in net.modules():
        for attr, child in owner.named_children():
            if isinstance(child, nn.Linear):
                last = (owner, attr)
    if last is None:
        raise PflkitError("model has no linear classifier")
    return last


MODELS = {"lenet": lenet, "fedavg-cnn": fedavg_cnn, "mlp": mlp}


def build_model(name: str, input_shape, n_classes: int, width: str | int | None = None) -> SplitNet:
    """Build a model by name: ``lenet`` (width S/M/L or filter count), ``fedavg-cnn``, ``mlp``,
    ``mlp<L>x<H>`` (L linear layers, hidden ones of H units: ``mlp8x256``), or any torchvision
    classification architecture name."""
    if name == "lenet":
        n_kernels = LENET_WIDTHS.get(width, width) if width is not None else 16
        return lenet(input_shape, n_classes, n_kernels=int(n_kernels))
    if name in MODELS:
        return MODELS[name](input_shape, n_classes)
    deep = re.fullmatch(r"mlp(\d+)x(\d+)", name)
    if deep:  # mlp<L>x<H>: L linear layers, the first L − 1 of H units (FedMN's Figure 2: 8–10 × 256)
        layers, units = int(deep[1]), int(deep[2])
        if layers < 2 or units < 1:
            raise PflkitError(f"model {name!r}: mlp<L>x<H> needs L >= 2 layers and H >= 1 units")
        return mlp(input_shape, n_classes, hidden=(units,) * (layers - 1))
    return torchvision_model(name, input_shape, n_classes)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
