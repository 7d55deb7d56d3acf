"""FedAMP (Huang et al., 2021, Algorithm 1): federated attentive message passing.

Objective: Σ_i F_i(w_i) + λ Σ_{i<j} A(‖w_i − w_j‖²), with the attention-inducing function
A(x) = 1 − exp(−x/σ), so A'(x) = exp(−x/σ)/σ: close models attract each other, distant ones
hardly at all.  The server keeps every client's latest personalised model w_j.
Round k, for each sampled client i:
    server:  u_i = Σ_j ξ_{i,j} w_j,   ξ_{i,j} = α_k A'(‖w_i − w_j‖²)  (j ≠ i),
             ξ_{i,i} = 1 − Σ_{j≠i} ξ_{i,j}            (the personalised cloud model: one gradient
                                                     step of size α_k on the attention term)
    server → client:  u_i
    client:  w_i ← argmin_w F_i(w) + λ/(2α_k) ‖w − u_i‖²   (approximately: E epochs of SGD
                                                            starting from u_i)
    client → server:  w_i
Clients are evaluated with their personalised model w_i; the server sends nothing for it.

HeurFedAMP (``similarity = cosine``, the paper's heuristic for deep networks): ξ_{i,i} is the
fixed ``self_weight`` and ξ_{i,j} ∝ exp(σ cos(w_i, w_j)) over j ≠ i, scaled to sum to 1 − ξ_{i,i}.

Choices: ξ must be a convex combination (ξ_{i,i} ≥ 0), which α_k A'(0) (N − 1) = α_k (N − 1)/σ
≤ 1 guarantees; where the sum of the ξ_{i,j} exceeds 1 they are scaled down to sum to 1
(ξ_{i,i} = 0).  σ is on the scale of squared weight distances, which depends on the model: tune
it (with σ far below ‖w_i − w_j‖², FedAMP is local training with a proximal term).
"""

from __future__ import annotations

import torch

from ..errors import PflkitError
from ..federated import Client, Server, flatten, proximal_term, snapshot, weighted_average
from . import Method, register

SIMILARITIES = ("distance", "cosine")


class FedAMPServer(Server):
    def __init__(self, model, cfg, opts, n_clients):
        super().__init__(model, cfg, opts, n_clients)
        if opts["similarity"] not in SIMILARITIES:
            raise PflkitError(f"FedAMP similarity must be one of {', '.join(SIMILARITIES)}, got {opts['similarity']!r}")
        if opts["sigma"] <= 0 or opts["alpha_k"] <= 0:
            raise PflkitError("FedAMP needs sigma > 0 and alpha_k > 0")
        self.w = [snapshot(model) for _ in range(n_clients)]  # w_j: every client's latest model
        self._flat = None  # the w_j flattened, one row each; rebuilt after the w_j change
        # a diagnostic, not part of the protocol: ξ_{i,i} of the u_i sent this round, then one
        # {client: ξ_{i,i}} per round (what a probe reads at evaluated rounds)
        self.sent_self: dict[int, float] = {}
        self.self_trace: list[dict[int, float]] = []

    def flat(self) -> torch.Tensor:
        if self._flat is None:
            self._flat = torch.stack([flatten(w) for w in self.w]).double()
        return self._flat

    def xi(self, cid: int) -> torch.Tensor:
        """ξ_{i,·}: the weights of u_i = Σ_j ξ_{i,j} w_j (a row of the convex combination)."""
        flat = self.flat()
        others = torch.arange(len(self.w), device=flat.device) != cid
        sigma = self.opt["sigma"]
        if not others.any():  # a single client: u_i = w_i
            return (~others).double()
        if self.opt["similarity"] == "distance":  # ξ_{i,j} = α_k A'(‖w_i − w_j‖²)
            d2 = ((flat - flat[cid]) ** 2).sum(1)
            xi = self.opt["alpha_k"] * torch.exp(-d2 / sigma) / sigma * others
            if xi.sum() > 1:  # keep ξ_{i,i} = 1 − Σ ξ_{i,j} ≥ 0
                xi = xi / xi.sum()
        else:  # HeurFedAMP: ξ_{i,j} ∝ exp(σ cos(w_i, w_j)), j ≠ i
            cos = torch.nn.functional.cosine_similarity(flat, flat[cid].expand_as(flat), dim=1)
            xi = torch.softmax(torch.where(others, sigma * cos, -torch.inf), 0) * (1 - self.opt["self_weight"])
        xi[cid] = 1 - xi.sum()
        return xi

    def message_for(self, cid, rnd):
        xi = self.xi(cid)
        self.sent_self[cid] = float(xi[cid])
        return {"u": weighted_average(self.w, xi.tolist())}  # u_i = Σ_j ξ_{i,j} w_j

    def eval_message(self, cid):
        return {}  # clients are evaluated with their own w_i

    def aggregate(self, uploads, rnd):
        for cid, u in uploads.items():
            self.w[cid] = u["weights"]
        self._flat = None
        self.self_trace.append(self.sent_self)
        self.sent_self = {}

    def state_dict(self):
        return {"w": self.w, "self_trace": self.self_trace}

    def load_state_dict(self, state):
        self.w = list(state["w"])
        self.self_trace = list(state.get("self_trace", []))
        self._flat = None


class FedAMPClient(Client):
    def train_round(self, message, rnd):
        self.model.load_state_dict(message["u"])  # start from u_i
        u = [p.detach().clone() for p in self.model.parameters()]
        # w_i ← argmin F_i(w) + λ/(2α_k) ‖w − u_i‖²
        loss = self.sgd(penalty=proximal_term(u, self.opt["lam"] / self.opt["alpha_k"]))
        return {"weights": snapshot(self.model)}, loss

    def eval_model(self, message):
        return self.model  # w_i


register(
    Method(
        "fedamp",
        FedAMPServer,
        FedAMPClient,
        "Personalised cloud models by attentive message passing; proximal local training",
        "Huang et al. 2021",
        options={
            "lam": (1.0, "λ, weight of the attention term (the proximal weight is λ/α_k)"),
            "alpha_k": (1.0, "α_k, the server's step size on the attention term"),
            "sigma": (1.0, "σ of A(x) = 1 − exp(−x/σ); with cosine similarity: the scale of exp(σ cos)"),
            "similarity": ("distance", "distance (FedAMP) or cosine (HeurFedAMP)"),
            "self_weight": (0.5, "ξ_{i,i} of HeurFedAMP (similarity = cosine)"),
        },
    )
)
