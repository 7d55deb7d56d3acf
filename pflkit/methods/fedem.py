"""FedEM (Marfoq et al., 2021, "Federated Multi-Task Learning under a Mixture of
Distributions", Algorithm 1, the client-server "FedEM", with Algorithm 2's LocalSolver).

Every client t's data distribution is a mixture of M distributions shared by all clients:
    p_t(x, y) = Σ_m π_tm p_m(x, y),   π_t ∈ Δ^M the client's own,   p_m(y | x) = softmax(f_θm(x))_y
The server holds the components θ_1..θ_M; each client keeps its mixture weights π_t.  Round k,
for each sampled client t (n_t training samples (x_i, y_i)):
    server → client:  θ_1^{k-1}, ..., θ_M^{k-1}
    client:  (E)    q_t(z_i = m) = π_tm^{k-1} p_m(y_i | x_i) / Σ_m' π_tm'^{k-1} p_m'(y_i | x_i),
                    p_m(y | x) = exp(−ℓ(θ_m^{k-1}; x, y)), ℓ the cross-entropy, every training sample i
             (M-π)  π_tm^k = Σ_i q_t(z_i = m) / n_t
             (M-θ)  θ_m,t^k ← LocalSolver(θ_m^{k-1}): SGD on Σ_i q_t(z_i = m) ℓ(θ_m; x_i, y_i) / n_t,
                    for every component m
    client → server:  θ_1,t^k, ..., θ_M,t^k, n_t
    server:  (agg)  θ_m^k = Σ_t n_t θ_m,t^k / Σ_t n_t   over the round's clients, every m
Client t's personalised predictor is the mixture
    p_t(y | x) = Σ_m π_tm softmax(f_θm(x))_y,
evaluated as a module whose output is the log of that mixture (:class:`Mixture`): the kit's
argmax and cross-entropy apply to log-probabilities as to logits.

Choices the paper leaves open, and how they are made here:
  * (E) and (M-π) run once per round, on all of the client's training samples, with the
    received θ^{k-1}, before local training (Algorithm 1); the responsibilities stay fixed
    during the local update.  The components are in eval mode for (E).
  * LocalSolver: the run's local budget (``local_steps`` if set, else ``local_epochs``) with the
    run's learning rate, momentum and weight decay, one fresh optimiser per component.  All
    components step on the same minibatches (those :meth:`Client.batches` would draw), and a
    minibatch B's loss for component m is Σ_{i ∈ B} q_t(z_i = m) ℓ(θ_m; x_i, y_i) / |B|, as in
    the authors' code.
  * π_t starts uniform (1/M each), stays on the client (in its checkpoint, never sent) and is
    not refreshed at evaluation (evaluating never changes a client): a client is evaluated with
    the π_t of its last training round, a client that never trained with the uniform mixture.
  * Every component is uploaded and averaged by n_t whatever the client's π_t (Algorithm 1);
    with client sampling, over the round's clients, as in the kit's FedAvg.
  * θ_1 is the run's initial model and θ_m (m > 1) the architecture re-initialised from seed
    (run seed, m), as in IFCA: equal components would get equal updates and never separate.
  * (E) is a softmax over m of log π_tm + log p_m(y_i | x_i) (log-sum-exp, in float64), so it
    cannot underflow when every component gives a sample a tiny likelihood.  A π_tm that
    underflows to exactly 0 stays 0 (a fixed point of EM).
  * With M = 1, q ≡ 1 and π ≡ 1 exactly: a FedEM round is a FedAvg round (the same batches,
    the same weights, the same bytes).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import PflkitError
from ..federated import Client, Server, clone_model, distinct_states, predict, snapshot, weighted_average
from . import Method, register


def responsibilities(log_pi: torch.Tensor, log_lik: torch.Tensor) -> torch.Tensor:
    """(E): q(z_i = m) = π_m p_m(y_i|x_i) / Σ_m' π_m' p_m'(y_i|x_i), n × M, from
    log π (M,) and the log-likelihoods log p_m(y_i | x_i) (n × M), by log-sum-exp."""
    joint = log_pi + log_lik  # log π_m + log p_m(y_i | x_i)
    return (joint - torch.logsumexp(joint, dim=1, keepdim=True)).exp()


class Mixture(nn.Module):
    """log Σ_m π_m softmax(f_θm(x)): a client's personalised predictor as
    log-probabilities (M × the cost of one model).  π is a buffer: fine-tuning moves only the
    components."""

    def __init__(self, components: list[nn.Module], pi: torch.Tensor):
        super().__init__()
        self.components = nn.ModuleList(components)
        self.register_buffer("log_pi", pi.log().float())

    def forward(self, x):
        log_p = torch.stack([F.log_softmax(f(x), dim=1) for f in self.components])  # M × batch × classes
        return torch.logsumexp(self.log_pi[:, None, None] + log_p, dim=0)


class FedEMServer(Server):
    def __init__(self, model, cfg, opts, n_clients):
        super().__init__(model, cfg, opts, n_clients)
        m = opts["components"]
        if m < 1:
            raise PflkitError(f"FedEM needs components >= 1, got {m}")
        self.thetas = distinct_states(model, m, cfg.seed)

    def message_for(self, cid, rnd):
        return {"models": self.thetas}  # θ_1^{k-1}, ..., θ_M^{k-1}

    def aggregate(self, uploads, rnd):
        if uploads:  # θ_m^k = Σ_t n_t θ_m,t^k / Σ_t n_t, for every component m
            n = [u["n"] for u in uploads.values()]
            self.thetas = [
                weighted_average([u["models"][m] for u in uploads.values()], n) for m in range(len(self.thetas))
            ]

    def state_dict(self):
        return {"thetas": self.thetas}

    def load_state_dict(self, state):
        self.thetas = list(state["thetas"])


class FedEMClient(Client):
    def __init__(self, cid, data, model, cfg, opts):
        super().__init__(cid, data, model, cfg, opts)
        m = opts["components"]
        self.components = [model] + [clone_model(model) for _ in range(m - 1)]  # θ_m's working copies
        self.pi = torch.full((m,), 1 / m, dtype=torch.float64, device=data.train_idx.device)  # π_t: uniform

    # checkpoints: π_t is all a client keeps between rounds (the components come every round)
    def state_dict(self):
        return {"pi": self.pi}

    def load_state_dict(self, state):
        self.pi = state["pi"].to(self.data.train_idx.device, torch.float64).clone()

    def receive(self, models) -> list[nn.Module]:
        for f, theta in zip(self.components, models, strict=True):
            f.load_state_dict(theta)
        return self.components

    def log_likelihoods(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """log p_m(y_i | x_i) = −ℓ(θ_m; x_i, y_i), n × M (components in eval mode)."""
        cols = [F.log_softmax(predict(f, x), dim=1).gather(1, y[:, None]) for f in self.components]
        return torch.cat(cols, dim=1).double()

    def batch_positions(self):
        """The minibatches :meth:`Client.batches` would draw now (the same generator calls), as
        positions 0..n_t−1 in the training split, to look the samples' responsibilities up:
        the kit's batching run on a copy of the client's data whose samples are their positions."""
        positions = copy.copy(self.data)
        positions.train_idx = torch.arange(self.data.n_train, device=self.data.train_idx.device)
        positions.x_train = positions.y_train = positions.train_idx
        cfg = self.cfg
        for pos, _ in positions.batches(cfg.batch_size, self.generator, cfg.local_epochs, cfg.local_steps):
            yield pos

    def train_round(self, message, rnd):
        components = self.receive(message["models"])  # θ_m ← θ_m^{k-1}
        x, y = self.data.split("train")
        if len(y):
            q = responsibilities(self.pi.log(), self.log_likelihoods(x, y))  # (E), n × M
            self.pi = q.mean(0)  # (M-π)
            q = q.float()
        optimizers = [self.optimizer(f.parameters()) for f in components]
        for f in components:
            f.train()
        total, steps = torch.zeros((), device=y.device), 0
        for pos in self.batch_positions():  # (M-θ), Alg. 2: every component on the same batches
            for m, (f, opt) in enumerate(zip(components, optimizers)):
                loss = (F.cross_entropy(f(x[pos]), y[pos], reduction="none") * q[pos, m]).sum() / len(pos)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += loss.detach()
            steps += 1
        reply = {"models": [snapshot(f) for f in components], "n": self.n_samples()}  # θ_m,t^k, every m
        return reply, self.check_finite(total / max(steps, 1))  # Σ_m of the mean q-weighted batch loss

    def eval_model(self, message):
        return Mixture(self.receive(message["models"]), self.pi)  # Σ_m π_tm softmax(f_θm(x))


register(
    Method(
        "fedem",
        FedEMServer,
        FedEMClient,
        "M shared component models mixed by per-client weights learned by EM",
        "Marfoq et al. 2021",
        options={"components": (3, "M, the number of shared component models")},
    )
)
