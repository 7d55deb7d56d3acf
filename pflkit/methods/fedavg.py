"""FedAvg (McMahan et al., 2017, Algorithm 1 "FederatedAveraging").

Server:  w_{t+1} = Σ_k (n_k / n) w^k_{t+1}     over the clients k sampled in round t
Client:  w^k ← w_t; E epochs of minibatch SGD on the local loss; send w^k and n_k.

Evaluation uses the global model on every client's data.  ``shared_prefix`` lets subclasses
(FedPer, LG-FedAvg) average only part of the network and keep the rest on the client.
"""

from __future__ import annotations

from ..federated import Client, Server, snapshot, weighted_average
from . import Method, register


class FedAvgServer(Server):
    shared_prefix = ""  # state-dict keys starting with this are averaged and sent

    def __init__(self, model, cfg, opts, n_clients):
        super().__init__(model, cfg, opts, n_clients)
        self.w = snapshot(model, self.shared_prefix)  # the global (shared) weights w_t

    def message_for(self, cid, rnd):
        return {"weights": self.w}

    def aggregate(self, uploads, rnd):
        if uploads:  # w_{t+1} = Σ_k n_k/n · w^k
            self.w = weighted_average([u["weights"] for u in uploads.values()], [u["n"] for u in uploads.values()])

    def state_dict(self):
        return {"w": self.w}

    def load_state_dict(self, state):
        self.w = state["w"]


class FedAvgClient(Client):
    shared_prefix = ""

    def receive(self, message):
        # strict=False: with a shared_prefix the message holds only the shared part
        self.model.load_state_dict(message["weights"], strict=not self.shared_prefix)

    def train_round(self, message, rnd):
        self.receive(message)  # w^k ← w_t
        loss = self.local_update()
        return {"weights": snapshot(self.model, self.shared_prefix), "n": self.n_samples()}, loss

    def local_update(self) -> float:
        """E local epochs of minibatch SGD on the client loss (subclasses change the objective)."""
        return self.sgd()

    def eval_model(self, message):
        self.receive(message)
        return self.model


register(Method("fedavg", FedAvgServer, FedAvgClient, "Federated averaging of the whole model", "McMahan et al. 2017"))
