"""Registry of methods.  Each method is one file in this package, reading like its paper's
algorithm: a :class:`~pflkit.federated.Server` subclass, a
:class:`~pflkit.federated.Client` subclass, and a :class:`Method` entry naming them."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import PflkitError
from ..federated import Client, Server

METHODS: dict[str, Method] = {}

# The one name under which the book shows each method (tables, legends, claims).
DISPLAY = {
    "local": "Local", "fedavg": "FedAvg", "fedavg-ft": "FedAvg + FT", "fedsgd": "FedSGD", "fedprox": "FedProx",
    "fedper": "FedPer", "lg-fedavg": "LG-FedAvg", "ditto": "Ditto", "pfedme": "pFedMe", "perfedavg": "Per-FedAvg",
    "pfedhn": "pFedHN", "pfedhn-pc": "pFedHN-PC", "pfedmb": "pFedMB", "ifca": "IFCA", "fedamp": "FedAMP",
    "fedfomo": "FedFomo", "fesem": "FeSEM", "cfl": "CFL", "feddist": "FedDist", "fedem": "FedEM", "fedmn": "FedMN",
    "ktpfl": "KT-pFL", "fedmd": "FedMD", "sim-pfd": "Sim-pFD", "topk-pfd": "TopK-pFD", "feddf": "FedDF",
    "pfeddf": "pFedDF", "ktpfl-params": "KT-pFL (parameters)",
}  # fmt: skip


@dataclass
class Method:
    name: str
    server: type[Server]
    client: type[Client]
    summary: str
    paper: str = ""
    # method options: name -> (default, help)
    options: dict[str, tuple] = field(default_factory=dict)
    # clients of different model widths (pFedHN's computational budgets):
    # (client id, number of clients, options) -> width for build_model, or None for cfg.width
    client_width: Callable[[int, int, dict], str | int | None] | None = None
    # clients of different architectures (KT-pFL's heterogeneous models):
    # (client id, number of clients, options) -> a model name for build_model, or None for cfg.model
    client_arch: Callable[[int, int, dict], str | None] | None = None
    # options added after runs of this method were stored (name -> default): at their default they
    # are left out of a run's key, so that stored runs keep their keys (add every new option here)
    later_options: dict = field(default_factory=dict)
    # options -> minibatch steps every client trains before round 1 (FeSEM's initial local models):
    # work the run's budget counts (:func:`pflkit.sweeps.setup_samples`); None: no such phase
    setup_steps: Callable[[dict], int] | None = None
    # the client optimiser the authors' setting uses (RunConfig fields: lr, batch_size, local_steps, ...);
    # ``python -m pflkit run`` takes them for the fields the user leaves out
    training: dict = field(default_factory=dict)

    def resolve_options(self, given: dict | None) -> dict:
        given = dict(given or {})
        unknown = sorted(set(given) - set(self.options))
        if unknown:
            raise PflkitError(
                f"method {self.name} has no option(s) {', '.join(unknown)}; it has: {', '.join(self.options) or 'none'}"
            )
        return {k: given.get(k, default) for k, (default, _help) in self.options.items()}

    @property
    def display(self) -> str:
        return DISPLAY.get(self.name, self.name)

    @staticmethod
    def clone(model):
        return copy.deepcopy(model)


def register(method: Method) -> Method:
    METHODS[method.name] = method
    return method


def get_method(name: str) -> Method:
    if name not in METHODS:
        raise PflkitError(f"unknown method {name!r}; known: {', '.join(sorted(METHODS))}")
    return METHODS[name]


def display_name(name: str) -> str:
    """The book's name of a kit method (``"perfedavg"`` -> ``"Per-FedAvg"``)."""
    return get_method(name).display


# importing the method files registers them
from . import (  # noqa: E402, F401
    cfl,
    ditto,
    fedamp,
    fedavg,
    fedavg_ft,
    feddf,
    feddist,
    fedem,
    fedfomo,
    fedmn,
    fedper,
    fedprox,
    fedsgd,
    fesem,
    ifca,
    ktpfl,
    ktpfl_params,
    lgfedavg,
    local,
    perfedavg,
    pfedhn,
    pfedmb,
    pfedme,
)
