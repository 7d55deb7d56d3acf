"""FedDist (the FeSEM paper's baselines 9 and 10): Reptile's update (Nichol et al., 2018)
run federatedly.

Reptile moves the shared weights toward the tasks' adapted weights, i.e. takes a step on
the distance objective  ½ Σ_i α_i ‖w − W_i‖²  with the W_i held fixed:
    client i:  W_i ← E local epochs of SGD from w_t
    server:    w_{t+1} = w_t + ε Σ_i α_i (W_i − w_t)
FedDist weights the sampled clients equally, α_i = 1/m; FedDist+WS (``size_weighted``) by
their data sizes, α_i = n_i / Σ_j n_j.  ε = 1 is FedAvg (with plain or size-weighted
averaging).  The default ε = 0.6 is the authors' code's; their FedDist+WS step additionally
divides by the number of clients, which we do not.
"""

from __future__ import annotations

from ..federated import weighted_average
from . import Method, register
from .fedavg import FedAvgClient, FedAvgServer


class FedDistServer(FedAvgServer):
    def aggregate(self, uploads, rnd):
        if not uploads:
            return
        ups = list(uploads.values())
        alpha = [u["n"] for u in ups] if self.opt["size_weighted"] else [1] * len(ups)
        target = weighted_average([u["weights"] for u in ups], alpha)  # Σ_i α_i W_i
        eps = self.opt["epsilon"]
        self.w = weighted_average([self.w, target], [1 - eps, eps])  # w + ε (Σ_i α_i W_i − w)


register(
    Method(
        "feddist",
        FedDistServer,
        FedAvgClient,
        "Reptile's interpolation step toward the clients' weights (FedDist, FedDist+WS)",
        "FeSEM paper's baseline after Nichol et al. 2018",
        options={
            "epsilon": (0.6, "ε, the server's step toward the mean of the clients' weights"),
            "size_weighted": (False, "weight clients by data size (FedDist+WS)"),
        },
    )
)
