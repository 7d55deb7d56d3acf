"""FedSGD (McMahan et al., 2017, §2 "FederatedSGD"; the FeSEM paper's baseline 2).

Every selected client k computes one gradient of its loss on its whole local training set
(B = ∞, E = 1) at w_t; the server takes one step with the size-weighted mean:
    w_{t+1} = w_t − η Σ_k n_k/n · g_k = Σ_k n_k/n · (w_t − η g_k)
so the client takes the step w_t − η g_k itself and sends its weights, which the server
averages exactly as FedAvg does (same bytes as sending g_k).
"""

from __future__ import annotations

from . import Method, register
from .fedavg import FedAvgClient, FedAvgServer


class FedSGDClient(FedAvgClient):
    def batches(self, epochs=None, steps=None):
        """One batch: the client's whole training split, whatever local_epochs/local_steps say."""
        return self.data.batches(max(self.data.n_train, 1), self.generator, steps=1)


register(
    Method(
        "fedsgd",
        FedAvgServer,
        FedSGDClient,
        "One full-batch gradient step per client and round, averaged (B = ∞, E = 1)",
        "McMahan et al. 2017",
    )
)
