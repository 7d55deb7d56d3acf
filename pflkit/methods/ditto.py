"""Ditto (Li et al., 2021, Algorithm 1).

Global part, as FedAvg:   w^k ← SGD on F_k starting from w_t; the server averages the w^k.
Personal part, kept on the client:
    v_k ← v_k − η (∇F_k(v_k) + λ (v_k − w_t))                     (the personal objective)
Clients are evaluated with their personal model v_k.
"""

from __future__ import annotations

from ..federated import clone_model, proximal_term
from . import Method, register
from .fedavg import FedAvgClient, FedAvgServer


class DittoClient(FedAvgClient):
    persistent = ("model", "personal")

    def __init__(self, cid, data, model, cfg, opts):
        super().__init__(cid, data, model, cfg, opts)
        self.personal = clone_model(model)  # v_k

    def local_update(self):
        w_t = [p.detach().clone() for p in self.model.parameters()]
        loss = self.sgd()  # global update w^k, sent to the server (exactly FedAvg's)
        self.sgd(self.personal, penalty=proximal_term(w_t, self.opt["lam"]))  # v_k: F_k(v) + λ/2 ‖v − w_t‖²
        return loss

    def eval_model(self, message):
        return self.personal


register(
    Method(
        "ditto",
        FedAvgServer,
        DittoClient,
        "FedAvg plus a personal model regularised toward the global one",
        "Li et al. 2021",
        options={"lam": (0.1, "regularisation λ toward the global model")},
    )
)
