"""KT-pFL with homogeneous models, exchanging parameters (Zhang et al. 2021, §5.2.1 "Homogeneous
FL"): the knowledge-coefficient matrix c mixes the clients' *model parameters* instead of their
soft predictions, and is learned by gradient descent as in eq. 7.

The paper describes this variant in one paragraph: "each client maintains a personalized global
model at the server side and each personalized global model is aggregated by a linear combination
of local model parameters and knowledge coefficient matrix"; its details are in an appendix we do
not have (Appendix C).  Our reading, with the soft-prediction method (``ktpfl``) as the template:

**Round.**  The server keeps every client's latest model w_m and c (column n: client n's weights,
starting at 1/N).
    server → client n:  its personalised global model  w̃_n = Σ_m c_mn w_m                (eq. 2's t_n)
    client n:           E epochs of SGD on its private data, starting from w̃_n              (eq. 5)
    client → server:    w_n, n_n
    server:             c ← c − η₃ Σ_n D_n/D ∇_c d_n(c) − 2η₃ρ(c − 1/N)                    (eq. 7)
                        d_n(c) = ½ ‖w̃_n(c) − w_n‖² / ‖w̄ − w_n‖²,  w̄ the plain mean of the models,
                        w̃_n(c) mixed from the models just uploaded (and the latest models of
                        clients not in the round); every column then projected onto the simplex
                        (as in ``ktpfl``)
A client is judged with its own model w_n.

Eq. 7's data term asks the teacher t_n(c) to match client n's own soft predictions; here the
personalised model w̃_n(c) is asked to match client n's own trained model, in squared distance
instead of KL (the same objective in parameter space).  Like eq. 7's, its minimum is c = I (every
client alone); ρ pulls c towards 1/N.  The distance is relative to the plain average's (d_n = ½ at
c = 1/N), so η₃ does not depend on the model's size or on how far a round moves the weights (with
the squared distance averaged over LeNet's parameters instead, the gradient was about 1e-9 after a
round on 20 Fashion-MNIST clients: measured); the authors' code rescales the soft-prediction
method's gradient of c every round for the same reason.  Each column's data term is weighted by
D_n/D (about 1/N) and is at most ½, so with ρ > 0 c settles near 1/N (|c_nn − 1/N| about
(D_n/D)/(2ρ + D_n/D)): ρ decides how far c can move, η₃ how fast.

With client sampling the mix takes every client's latest model (a client not seen yet: the initial
model), the c step updates the columns of the round's clients, and D_n/D is normalised over the
round's clients (as the kit's FedAMP does); "η₃ = 0 is the plain average of the round's models"
then holds only with every client in every round.  It is FedAMP's and FedFomo's round (§5.2.1: "the
difference is that the weights ... are updated in a gradient descent manner").

Reductions (tested): η₃ = 0 keeps c at 1/N, so every client starts from the plain average of the
latest models (FedAvg with equal weights); c = I sends each client its own model back (Local).
"""

from __future__ import annotations

import torch

from ..errors import PflkitError
from ..federated import Client, Server, flatten, snapshot, weighted_average
from . import Method, register
from .ktpfl import EPS, implicit_step


def c_objective(c: torch.Tensor, models: torch.Tensor, own: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Σ_n D_n/D · ½ ‖Σ_m c_mn W_m − w_n‖² / ‖w̄ − w_n‖²: ``models`` W (M × P) the latest models,
    ``own`` (n × P) the round's clients' models, ``c`` (M × n) their columns."""
    mixed = c.T @ models  # w̃_n(c) for the round's clients
    scale = ((models.mean(0) - own) ** 2).sum(1).clamp_min(EPS)  # ‖w̄ − w_n‖², a constant of the round
    return (weights * 0.5 * ((mixed - own) ** 2).sum(1) / scale).sum()


def c_step(c, models, own, weights, lr, rho, n_clients) -> torch.Tensor:
    """One eq. 7 step on the round's columns of c, ρ implicit, then projected (as in ``ktpfl``)."""
    return implicit_step(c, lambda c: c_objective(c, models, own, weights), lr, rho, n_clients)


class KTpFLParamsServer(Server):
    def __init__(self, model, cfg, opts, n_clients):
        super().__init__(model, cfg, opts, n_clients)
        if opts["rho"] < 0 or opts["c_lr"] < 0:
            raise PflkitError(f"KT-pFL's rho and c_lr must be >= 0, got {opts['rho']} and {opts['c_lr']}")
        self.w = [snapshot(model) for _ in range(n_clients)]  # w_m: every client's latest model
        self.c = torch.full((n_clients, n_clients), 1.0 / n_clients, dtype=torch.float64)  # c_0 = 1/N

    def message_for(self, cid, rnd):
        return {"weights": weighted_average(self.w, self.c[:, cid].tolist())}  # w̃_n = Σ_m c_mn w_m

    def eval_message(self, cid):
        return {}  # clients are judged with their own w_n

    def aggregate(self, uploads, rnd):
        ids = sorted(uploads)
        for cid in ids:
            self.w[cid] = uploads[cid]["weights"]
        if not ids or self.opt["c_lr"] == 0:
            return
        models = torch.stack([flatten(w) for w in self.w]).double()
        n = torch.tensor([float(uploads[m]["n"]) for m in ids], dtype=torch.float64)
        cols = self.c[:, ids]
        self.c[:, ids] = c_step(
            cols, models, models[ids], n / n.sum(), self.opt["c_lr"], self.opt["rho"], self.n_clients
        )  # eq. 7, fmt: skip

    def state_dict(self):
        return {"w": self.w, "c": self.c}

    def load_state_dict(self, state):
        self.w, self.c = list(state["w"]), state["c"].clone()


class KTpFLParamsClient(Client):
    def train_round(self, message, rnd):
        self.model.load_state_dict(message["weights"])  # start from w̃_n
        loss = self.sgd()  # E epochs (local_epochs / local_steps) on the private data (eq. 5)
        return {"weights": snapshot(self.model), "n": self.n_samples()}, loss

    def eval_model(self, message):
        return self.model  # w_n


register(
    Method(
        "ktpfl-params",
        KTpFLParamsServer,
        KTpFLParamsClient,
        "Homogeneous KT-pFL: personalised models mixed from everyone's parameters by a learned matrix c",
        "Zhang et al. 2021, §5.2.1",
        options={
            "rho": (1.0, "ρ: pull of c towards 1/N (eq. 4)"),
            "c_lr": (0.1, "η₃: learning rate of c (eq. 7); 0 keeps c at 1/N"),
        },
    )
)
