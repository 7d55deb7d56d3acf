"""Per-FedAvg (Fallah et al., 2020), first-order version (Per-FedAvg FO).

Client, for each local step with two independent minibatches D, D':
    w̃ = w − α ∇f_i(w; D)                      (one step of adaptation)
    w  ← w − β ∇f_i(w̃; D')                    (FO: the gradient at w̃ is applied to w)
Server: plain average of the clients' w.
Evaluation: the global w adapted by one step of α on one local training minibatch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import Method, register
from .fedavg import FedAvgClient, FedAvgServer


class PerFedAvgClient(FedAvgClient):
    def local_update(self):
        alpha = self.opt["alpha"]
        params = list(self.model.parameters())
        outer = self.optimizer(params)  # β = the run's learning rate
        batches = self.batches()
        total, n = 0.0, 0
        for (x1, y1), (x2, y2) in zip(batches, batches):
            w = [p.detach().clone() for p in params]
            grads = torch.autograd.grad(F.cross_entropy(self.model(x1), y1), params)
            with torch.no_grad():  # w̃ = w − α ∇f(w; D)
                for p, g in zip(params, grads):
                    p.sub_(alpha * g)
            loss = F.cross_entropy(self.model(x2), y2)
            grads = torch.autograd.grad(loss, params)  # ∇f(w̃; D')
            with torch.no_grad():
                for p, wi, g in zip(params, w, grads):
                    p.copy_(wi)
                    p.grad = g
            outer.step()  # w ← w − β ∇f(w̃; D')
            total += loss.detach()
            n += 1
        return self.check_finite(total / max(n, 1))

    def train_round(self, message, rnd):
        reply, loss = super().train_round(message, rnd)
        reply["n"] = torch.tensor(1)  # Per-FedAvg averages clients uniformly
        return reply, loss

    def eval_model(self, message):
        adapted = self.scratch_model()
        adapted.load_state_dict(message["weights"])
        self.sgd(adapted, lr=self.opt["alpha"], steps=1)  # one step of adaptation
        return adapted


register(
    Method(
        "perfedavg",
        FedAvgServer,
        PerFedAvgClient,
        "MAML-style FedAvg; one local adaptation step at evaluation (first-order)",
        "Fallah et al. 2020",
        options={"alpha": (0.01, "step size α of the adaptation step")},
    )
)
