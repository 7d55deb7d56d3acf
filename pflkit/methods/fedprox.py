"""FedProx (Li et al., 2020): FedAvg whose local objective adds a proximal term

h_k(w; w_t) = F_k(w) + μ/2 ‖w − w_t‖²                                  (eq. 2)
"""

from __future__ import annotations

from ..federated import proximal_term
from . import Method, register
from .fedavg import FedAvgClient, FedAvgServer


class FedProxClient(FedAvgClient):
    def local_update(self):
        w_t = [p.detach().clone() for p in self.model.parameters()]
        return self.sgd(penalty=proximal_term(w_t, self.opt["mu"]))  # F_k(w) + μ/2 ‖w − w_t‖²


register(
    Method(
        "fedprox",
        FedAvgServer,
        FedProxClient,
        "FedAvg with a proximal term toward the global model",
        "Li et al. 2020",
        options={"mu": (0.01, "proximal weight μ")},
    )
)
