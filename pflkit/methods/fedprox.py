"""FedProx (Li et al., 2020): FedAvg whose local objective adds a proximal term

h_k(w; w_t) = F_k(w) + μ/2 ‖w − w_t‖²                                  (eq. 2)
"""

from __future__ import annotations

from . import Method, register
from .fedavg import FedAvgClient, FedAvgServer


class FedProxClient(FedAvgClient):
    def local_update(self):
        w_t = [p.detach().clone() for p in self.model.parameters()]
        mu = self.opt["mu"]

        def proximal(model):  # μ/2 ‖w − w_t‖²
            return mu / 2 * sum(((p - q) ** 2).sum() for p, q in zip(model.parameters(), w_t))

        return self.sgd(penalty=proximal)


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
