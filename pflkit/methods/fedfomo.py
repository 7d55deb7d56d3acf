"""FedFomo (Zhang et al., 2021, Algorithm 1): first-order model optimisation.

Each client keeps its own model θ_i; the server keeps every client's latest upload θ_n and an
affinity matrix P (p_{i,n}: how useful θ_n has been to client i).  Round t, sampled client i:
    server → client:  M other clients' models θ_n: with probability ε (exploration) M random
                      ones, else the M of highest affinity p_{i,n}   (ε-greedy; ε decays per round)
    client:  on its validation split, for each received θ_n
                 w_n = max(0, (L_i(θ_i^{t-1}) − L_i(θ_n)) / ‖θ_n − θ_i^{t-1}‖),  w ← w / Σ_n w_n
             θ_i^t = θ_i^{t-1} + Σ_n w_n (θ_n − θ_i^{t-1})     (no change if all w_n are 0)
             then E epochs of SGD from θ_i^t
    client → server:  θ_i^t and w (the weights it gave the received models)
    server:  p_{i,n} ← p_{i,n} + w_n; stores θ_i^t
Clients are evaluated with their own θ_i.

Choices: L_i is the loss on the client's validation split (the training split when it has none);
the ε-greedy draw uses a generator seeded by (run seed, round, client); ties in affinity go to
the lower client id; a received model at distance 0 gets w_n = 0.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import PflkitError
from ..federated import Client, Server, derive_seed, evaluate, flatten, snapshot, weighted_average
from . import Method, register


class FedFomoServer(Server):
    def __init__(self, model, cfg, opts, n_clients):
        super().__init__(model, cfg, opts, n_clients)
        if opts["models"] < 1:
            raise PflkitError(f"FedFomo needs models >= 1, got {opts['models']}")
        self.theta = [snapshot(model) for _ in range(n_clients)]  # θ_n: every client's latest upload
        self.P = torch.zeros(n_clients, n_clients, dtype=torch.float64)  # affinity p_{i,n}

    def chosen(self, cid: int, rnd: int) -> list[int]:
        """The M clients whose models client ``cid`` downloads (ε-greedy on its affinities)."""
        others = [n for n in range(self.n_clients) if n != cid]
        m = min(self.opt["models"], len(others))
        rng = np.random.default_rng(derive_seed(self.cfg.seed, rnd, 5, cid))
        eps = max(0.0, self.opt["epsilon"] - self.opt["epsilon_decay"] * rnd)
        if rng.random() < eps:  # explore
            return sorted(rng.choice(others, m, replace=False).tolist())
        affinity = self.P[cid, others]  # exploit: the M of highest affinity (stable: lower id first)
        order = sorted(range(len(others)), key=lambda k: -float(affinity[k]))
        return sorted(others[k] for k in order[:m])

    def message_for(self, cid, rnd):
        ids = self.chosen(cid, max(rnd, 0))
        return {"models": [self.theta[n] for n in ids], "ids": torch.tensor(ids, dtype=torch.long)}

    def eval_message(self, cid):
        return {}  # clients are evaluated with their own θ_i

    def aggregate(self, uploads, rnd):
        for cid, u in uploads.items():
            self.theta[cid] = u["weights"]
            self.P[cid, u["ids"]] += u["w"].double()  # p_{i,n} ← p_{i,n} + w_n

    def state_dict(self):
        return {"theta": self.theta, "P": self.P}

    def load_state_dict(self, state):
        self.theta, self.P = list(state["theta"]), state["P"].cpu()


class FedFomoClient(Client):
    def loss(self, model) -> float:
        split = "val" if len(self.data.val_idx) else "train"
        return evaluate(model, *self.data.split(split))["loss"]

    def weights(self, models) -> torch.Tensor:
        """w_n = max(0, (L_i(θ_i) − L_i(θ_n)) / ‖θ_n − θ_i‖), normalised to sum to 1 (or all 0)."""
        own_loss, own = self.loss(self.model), flatten(snapshot(self.model))
        probe = self.scratch_model()
        w = []
        for theta in models:
            probe.load_state_dict(theta)
            dist = float((flatten(theta) - own).norm())
            w.append(max(0.0, (own_loss - self.loss(probe)) / dist) if dist > 0 else 0.0)
        w = torch.tensor(w, dtype=torch.float64)
        return w / w.sum() if w.sum() > 0 else w

    def train_round(self, message, rnd):
        w = self.weights(message["models"])
        if w.sum() > 0:  # θ_i^t = θ_i^{t-1} + Σ_n w_n (θ_n − θ_i^{t-1}) = Σ_n w_n θ_n   (Σ_n w_n = 1)
            self.model.load_state_dict(weighted_average(message["models"], w.tolist()))
        loss = self.sgd()  # E local epochs
        return {"weights": snapshot(self.model), "ids": message["ids"], "w": w.float()}, loss

    def eval_model(self, message):
        return self.model  # θ_i


register(
    Method(
        "fedfomo",
        FedFomoServer,
        FedFomoClient,
        "Each client combines other clients' models weighted by validation-loss gain per distance",
        "Zhang et al. 2021",
        options={
            "models": (5, "M, the other clients' models each client downloads per round"),
            "epsilon": (0.3, "ε of the ε-greedy choice of models (probability of a random choice)"),
            "epsilon_decay": (0.05, "ε decreases by this much every round"),
        },
    )
)
