"""Models used by the papers.

Every kit model is a :class:`SplitNet`: a feature extractor ``body`` followed by a linear
classifier ``head``.  Methods that share only part of the network (FedPer shares the body,
LG-FedAvg the head, pFedHN-PC generates the body) select parameters by these prefixes.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from .compute import laid_out
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


def pfllib_cnn(input_shape=(1, 28, 28), n_classes=10) -> SplitNet:
    """PFLlib's 4-layer CNN (``FedAvgCNN``, its ``-m CNN``): the layers of :func:`fedavg_cnn` without
    padding, so 64 x 4 x 4 features reach the hidden layer (582,026 parameters on 28x28 grey images);
    its head, as in PFLlib's FedPer, is the last linear layer."""
    c = input_shape[0]
    layers: list[nn.Module] = [
        nn.Conv2d(c, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
    ]  # fmt: skip
    dim = _flat_dim(nn.Sequential(*layers), input_shape)
    return SplitNet(nn.Sequential(*layers, nn.Linear(dim, 512), nn.ReLU()), nn.Linear(512, n_classes))


def mlp(input_shape=(1, 28, 28), n_classes=10, hidden=(200, 200)) -> SplitNet:
    layers: list[nn.Module] = [nn.Flatten()]
    dim = int(torch.tensor(input_shape).prod())
    for h in hidden:
        layers += [nn.Linear(dim, h), nn.ReLU()]
        dim = h
    return SplitNet(nn.Sequential(*layers), nn.Linear(dim, n_classes))


def alexnet_small(input_shape=(1, 28, 28), n_classes=10, base: int = 64) -> SplitNet:
    """The small-image AlexNet of KT-pFL's code: five 3x3 convolutions (base, 3b, 6b, 4b, 4b
    channels; the first with stride 2) and three max-pools, then two hidden layers of b² units
    (base 64: 64-192-384-256-256 and 4096-4096, about 20 M parameters; ``alexnet-<base>``
    scales every width)."""
    c, b = input_shape[0], base
    layers: list[nn.Module] = [
        nn.Conv2d(c, b, 3, stride=2, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(b, 3 * b, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(3 * b, 6 * b, 3, padding=1), nn.ReLU(),
        nn.Conv2d(6 * b, 4 * b, 3, padding=1), nn.ReLU(),
        nn.Conv2d(4 * b, 4 * b, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(1), nn.Flatten(),
        nn.Dropout(0.5), nn.Linear(4 * b, b * b), nn.ReLU(), nn.Dropout(0.5), nn.Linear(b * b, b * b), nn.ReLU(),
    ]  # fmt: skip
    return SplitNet(nn.Sequential(*layers), nn.Linear(b * b, n_classes))


def resnet18_small(input_shape=(1, 28, 28), n_classes=10, base: int = 64) -> SplitNet:
    """ResNet-18 for small images (a 3x3 stem without max-pool, as for CIFAR), torchvision's
    BasicBlocks, stages of base, 2b, 4b and 8b channels (base 64: 11.2 M parameters;
    ``resnet18-<base>`` narrows it)."""
    from ._compat import import_torchvision

    BasicBlock = import_torchvision().models.resnet.BasicBlock
    layers: list[nn.Module] = [
        nn.Conv2d(input_shape[0], base, 3, padding=1, bias=False),
        nn.BatchNorm2d(base),
        nn.ReLU(),
    ]
    inplanes = base
    for i, planes in enumerate((base, 2 * base, 4 * base, 8 * base)):
        for j in range(2):
            stride = 2 if i > 0 and j == 0 else 1
            down = None
            if stride != 1 or inplanes != planes:
                down = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))
            layers.append(BasicBlock(inplanes, planes, stride, down))
            inplanes = planes
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    return SplitNet(nn.Sequential(*layers), nn.Linear(inplanes, n_classes))


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


MODELS = {"lenet": lenet, "fedavg-cnn": fedavg_cnn, "pfllib-cnn": pfllib_cnn, "mlp": mlp}


def build_model(name: str, input_shape, n_classes: int, width: str | int | None = None) -> SplitNet:
    """Build a model by name: ``lenet`` (width S/M/L or filter count), ``fedavg-cnn``, ``pfllib-cnn``, ``mlp``,
    ``mlp<L>x<H>`` (L linear layers, hidden ones of H units: ``mlp8x256``), ``alexnet-<base>`` and
    ``resnet18-<base>`` (small-image AlexNet / ResNet-18; base 64 is full size), or any torchvision
    classification architecture name; in the memory format of the compute path
    (:func:`pflkit.compute.laid_out`)."""
    return laid_out(_build(name, input_shape, n_classes, width), name)


def _build(name: str, input_shape, n_classes: int, width: str | int | None = None) -> SplitNet:
    if name == "lenet":
        n_kernels = LENET_WIDTHS.get(width, width) if width is not None else 16
        return lenet(input_shape, n_classes, n_kernels=int(n_kernels))
    if name in MODELS:
        return MODELS[name](input_shape, n_classes)
    small = re.fullmatch(r"(alexnet|resnet18)-(\d+)", name)
    if small:  # small-image AlexNet / ResNet-18 of a given base width (KT-pFL's heterogeneous clients)
        build = alexnet_small if small[1] == "alexnet" else resnet18_small
        return build(input_shape, n_classes, base=int(small[2]))
    deep = re.fullmatch(r"mlp(\d+)x(\d+)", name)
    if deep:  # mlp<L>x<H>: L linear layers, the first L − 1 of H units (FedMN's Figure 2: 8–10 × 256)
        layers, units = int(deep[1]), int(deep[2])
        if layers < 2 or units < 1:
            raise PflkitError(f"model {name!r}: mlp<L>x<H> needs L >= 2 layers and H >= 1 units")
        return mlp(input_shape, n_classes, hidden=(units,) * (layers - 1))
    return torchvision_model(name, input_shape, n_classes)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
