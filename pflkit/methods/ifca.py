"""IFCA (Ghosh et al., 2020, Algorithm 1, option II "model averaging"): iterative federated
clustering with K cluster models.

The server holds K models θ_1..θ_K.  Round t, for each sampled client i:
    server → client:  θ_1^t, ..., θ_K^t
    client:  ĵ = argmin_j F_i(θ_j^t)              (cluster identity: the lowest training loss)
             θ̃_i ← E epochs of SGD from θ_ĵ^t     (LocalUpdate)
    client → server:  θ̃_i, n_i, ĵ
    server:  θ_j^{t+1} = Σ_{i: ĵ_i = j} n_i θ̃_i / Σ_{i: ĵ_i = j} n_i   for each cluster j chosen
             by someone; a cluster nobody chose keeps θ_j^t.
A client is evaluated with the cluster model it would pick now (argmin of its training loss),
so the evaluation message, like the training one, holds all K models.

Choices: the paper averages a cluster's models uniformly; here they are weighted by n_i as in
FedAvg (the same when clients are equally large), so that with K = 1 IFCA is FedAvg exactly.
θ_1 is the run's initial model and θ_j (j > 1) the architecture re-initialised from seed
(run seed, j): IFCA needs distinct initial models, or every client picks the same cluster.
"""

from __future__ import annotations

import torch

from ..errors import PflkitError
from ..federated import Client, Server, distinct_states, evaluate, snapshot, weighted_average
from . import Method, register


class IFCAServer(Server):
    def __init__(self, model, cfg, opts, n_clients):
        super().__init__(model, cfg, opts, n_clients)
        k = opts["clusters"]
        if k < 1:
            raise PflkitError(f"IFCA needs clusters >= 1, got {k}")
        self.thetas = distinct_states(model, k, cfg.seed)

    def message_for(self, cid, rnd):
        return {"models": self.thetas}  # θ_1^t, ..., θ_K^t

    def aggregate(self, uploads, rnd):
        for j in range(len(self.thetas)):  # θ_j^{t+1}: n-weighted average over the clients of cluster j
            members = [u for u in uploads.values() if int(u["cluster"]) == j]
            if members:
                self.thetas[j] = weighted_average([u["weights"] for u in members], [u["n"] for u in members])

    def state_dict(self):
        return {"thetas": self.thetas}

    def load_state_dict(self, state):
        self.thetas = list(state["thetas"])


class IFCAClient(Client):
    cluster: int | None = None  # the last cluster identity estimate (for figures)

    def pick_cluster(self, models) -> int:
        """ĵ = argmin_j F_i(θ_j), the loss on the client's whole training split; loads θ_ĵ."""
        if len(models) > 1:
            losses = []
            for theta in models:
                self.model.load_state_dict(theta)
                losses.append(evaluate(self.model, *self.data.split("train"))["loss"])
            self.cluster = int(torch.tensor(losses).argmin())
        else:
            self.cluster = 0
        self.model.load_state_dict(models[self.cluster])
        return self.cluster

    def train_round(self, message, rnd):
        j = self.pick_cluster(message["models"])
        loss = self.sgd()  # LocalUpdate(θ_ĵ): E epochs of SGD
        return {"weights": snapshot(self.model), "n": self.n_samples(), "cluster": torch.tensor(j)}, loss

    def eval_model(self, message):
        self.pick_cluster(message["models"])
        return self.model


register(
    Method(
        "ifca",
        IFCAServer,
        IFCAClient,
        "K cluster models; each client trains the one with its lowest loss",
        "Ghosh et al. 2020",
        options={"clusters": (2, "K, the number of cluster models")},
    )
)
