"""pFedMe (Dinh et al., 2020, Algorithm 1): personalisation with Moreau envelopes.

Client i, local rounds r = 0..R−1 on minibatches D:
    θ̃_i = argmin_θ  f̃_i(θ; D) + λ/2 ‖θ − w_{i,r}‖²     (approx.: K gradient steps, lr = personal_lr)
    w_{i,r+1} = w_{i,r} − η λ (w_{i,r} − θ̃_i)
Server:
    w_{t+1} = (1 − β) w_t + β · (1/S) Σ_{i∈S} w_{i,R}
Clients are evaluated with their personalised model θ̃_i.

Algorithm 1 has every client update every round (the server samples only whose w_{i,R} it averages);
the kit trains only the sampled clients, so an unsampled client's θ̃ dates from its last round of
training (``personal="last"``).  ``personal="fresh"`` computes every client's θ̃ at evaluation from the
current global model, as Algorithm 1 would have it, at one local round's cost per client evaluated.

Algorithm 1 does not say where the inner problem starts; the kit starts each minibatch's at the local
model w_{i,r} (``inner_start="w"``).  The authors' code and PFLlib start it at the last θ̃ instead, so
that θ̃ moves on from minibatch to minibatch within a round (``inner_start="theta"``; at w_t when the
round begins).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..errors import PflkitError
from ..federated import Client, clone_model, proximal_term, snapshot, weighted_average
from . import Method, register
from .fedavg import FedAvgServer


class PFedMeServer(FedAvgServer):
    def aggregate(self, uploads, rnd):
        if not uploads:
            return
        mean = weighted_average([u["weights"] for u in uploads.values()], [1] * len(uploads))  # (1/S) Σ w_i
        beta = self.opt["beta"]
        self.w = {k: (1 - beta) * self.w[k] + beta * mean[k] for k in self.w}


class PFedMeClient(Client):
    persistent = ("model", "theta")

    def __init__(self, cid, data, model, cfg, opts):
        super().__init__(cid, data, model, cfg, opts)
        for name, allowed in {"inner_start": ("w", "theta"), "personal": ("last", "fresh")}.items():
            if opts[name] not in allowed:
                raise PflkitError(f"pFedMe's {name} must be one of {', '.join(allowed)}, got {opts[name]!r}")
        self.theta = clone_model(model)  # personalised model θ̃_i

    def train_round(self, message, rnd):
        self.model.load_state_dict(message["weights"])  # w_{i,0} = w_t
        lam, K, eta = self.opt["lam"], self.opt["K"], self.cfg.lr
        inner = torch.optim.SGD(self.theta.parameters(), lr=self.opt["personal_lr"])
        w = list(self.model.parameters())
        carry = self.opt["inner_start"] == "theta"
        total, n = 0.0, 0
        for i, (x, y) in enumerate(self.batches()):
            if not carry or i == 0:
                with torch.no_grad():  # start the inner problem at θ = w_{i,r} (carry: only the round's first)
                    for t, p in zip(self.theta.parameters(), w):
                        t.copy_(p)
            moreau = proximal_term(w, lam)
            for _ in range(K):  # θ̃ ≈ argmin f̃(θ; D) + λ/2 ‖θ − w‖²
                loss = F.cross_entropy(self.theta(x), y) + moreau(self.theta)
                inner.zero_grad(set_to_none=True)
                loss.backward()
                inner.step()
            with torch.no_grad():  # w ← w − η λ (w − θ̃)
                for p, t in zip(w, self.theta.parameters()):
                    p.sub_(eta * lam * (p - t))
            total += loss.detach()
            n += 1
        loss = self.check_finite(total / max(n, 1))
        return {"weights": snapshot(self.model)}, loss

    def eval_model(self, message):
        if self.opt["personal"] == "fresh":  # Algorithm 1: every client updates from w_t, sampled or not
            self.train_round(message, None)  # (its w_{i,R} goes nowhere: the next round starts from the message)
        return self.theta


register(
    Method(
        "pfedme",
        PFedMeServer,
        PFedMeClient,
        "Moreau-envelope personalisation; bi-level local problem",
        "Dinh et al. 2020",
        options={
            "lam": (15.0, "λ, strength of the Moreau envelope"),
            "K": (5, "gradient steps on the inner problem"),
            "personal_lr": (0.01, "learning rate of the inner problem"),
            "beta": (1.0, "server mixing β (1 = plain average)"),
            "inner_start": (
                "w",
                "each minibatch's inner problem starts at w (kit) or at the last θ̃ (theta: the "
                "authors' and PFLlib's code)",
            ),
            "personal": (
                "last",
                "the θ̃ a client is evaluated with: from its last round of training (last), or computed at "
                "evaluation from the current global model (fresh: Algorithm 1's every client every round)",
            ),
        },
        later_options={"inner_start": "w", "personal": "last"},
    )
)
