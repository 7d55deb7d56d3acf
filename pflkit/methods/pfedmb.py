"""pFedMB (Mori et al., 2022, Algorithm 1): personalised FL with a multi-branch architecture.

Every linear layer l (convolution or fully connected) is split into B branches, mixed by
weights α on the simplex that belong to the client:
    W_l = α_{1,l} W_{1,l} + ... + α_{B,l} W_{B,l},   α_{b,l} ≥ 0,  Σ_b α_{b,l} = 1       (eq. 1)
    W_l * x = Σ_b α_{b,l} (W_{b,l} * x)                                                (eq. 2)
The branches W = {W_{b,l}} are global; client i's α^i never leaves it except to weight the
aggregation, and the server never forms a global α.  Round t, for each sampled client i:
    server → client:  W^t (all B branches)
    client:  α^{t+1,i} ← α^{t,i};  E epochs of SGD on α with W^t fixed               (eq. 3)
             W^{t+1,i} ← W^t;       E epochs of SGD on W with α^{t+1,i} fixed          (eq. 4)
    client → server:  W^{t+1,i}, α^{t+1,i}, n_i
    server:  W^{t+1}_{l,b} = Σ_i n_i α^{t+1,i}_{l,b} W^{t+1,i}_{l,b} / Σ_j n_j α^{t+1,j}_{l,b}   (eq. 5)
      or, with ``alpha_weighted = 0`` (§V-B's ablation),
             W^{t+1}_{l,b} = Σ_i n_i W^{t+1,i}_{l,b} / Σ_j n_j                                 (eq. 6)
    (Σ over the clients sampled this round, as FedAvg; a branch whose weights Σ_i n_i α^i
    underflow to 0 keeps W^t.)
Client i's personal model is (W^T, α^{T,i}).  It is evaluated, as it would be used, as one
plain kit model with the combined weights of eq. 1 (:func:`combined_model`): inference costs
what FedAvg's does; training and communication cost B times as much (§VI).

Choices the paper leaves open:
  * α is parameterised by free logits, α_{·,l} = softmax(a_{·,l}).  The simplex constraint then
    holds by construction, eq. 3 is plain SGD (on a), and a = 0 is the paper's initial α, "the
    same value for all branches" (§V-A).  Projected SGD on α itself could reach exact zeros; the
    softmax only approaches them.
  * Biases are branched with the weights (as in CondConv): b_l = Σ_b α_{b,l} b_{b,l}.
  * Initialisation: branch 1 is the run's initial model; branch b > 1 is the same architecture
    re-drawn by PyTorch's default layer initialisation from seed (run seed, b).  The draws must be
    independent: identical branches get identical gradients, and α could never move.  All
    branches are then multiplied by √B, so that the combined layer at the initial, uniform α
    (the mean of B independent draws) has the variance of the default initialisation; unscaled,
    every layer would start √B times too small and the network's signal would fade with depth
    (on the tiny digits problem of the tests: 52% instead of 97% mean accuracy after 4 rounds).
    The price: once α concentrates on one branch, that layer is √B times the default scale.
    ``scale_init = false`` keeps the branches as drawn, to compare.
  * ``shared_alpha``: one α for all layers (§V-B's setting) instead of one per layer.
  * η_α is the option ``alpha_lr``; η_W is the run's ``lr``.  Both phases use the run's
    weight decay (the decay pulls the logits toward uniform α) and, unless ``alpha_momentum``
    says otherwise, its momentum: with momentum 0.9 an α step is about ten times η_α.  While α is
    spread out, a step on the branches moves the combined W_l by η_W Σ_b α_{b,l}² ∇ (η_W/B at
    uniform α): the effective step size grows as α concentrates on a branch.
  * With B = 1, α ≡ 1 and eq. 3 has nothing to learn, so it is skipped: pFedMB is then exactly
    FedAvg (the same batches, the same weights).
  * Parameters outside conv/linear layers (e.g. BatchNorm in torchvision models) are shared
    whole and averaged by n_i, as in FedAvg.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import PflkitError
from ..federated import clone_model, derive_seed, reinitialised, weighted_average
from . import Method, register
from .fedavg import FedAvgClient, FedAvgServer

# ----------------------------------------------------------------------------- the architecture


class BranchLayer(nn.Module):
    """B branches of one conv or linear layer: ``weight`` is (B, *W_l.shape), ``bias`` (B, out).
    The forward pass uses the combined weight of eq. 1 (mathematically eq. 2, at one layer's cost);
    ``alpha`` (α_{·,l}) is set by the enclosing :class:`MultiBranchNet` for each forward pass."""

    def __init__(self, layers: list[nn.Module], index: int):
        super().__init__()
        first = layers[0]
        self.weight = nn.Parameter(torch.stack([m.weight.detach() for m in layers]))
        self.bias = nn.Parameter(torch.stack([m.bias.detach() for m in layers])) if first.bias is not None else None
        self.index = index  # the row of α this layer reads
        if isinstance(first, nn.Conv2d):
            if first.padding_mode != "zeros":
                raise PflkitError(f"pFedMB supports zero-padded convolutions only, not {first.padding_mode!r}")
            self.conv = dict(stride=first.stride, padding=first.padding, dilation=first.dilation, groups=first.groups)
        else:
            self.conv = None
        self.alpha: torch.Tensor | None = None

    def combined(self, alpha: torch.Tensor):
        """(W_l, b_l) = Σ_b α_b (W_{b,l}, b_{b,l}) (eq. 1); b_l is None for a
        layer without bias."""
        bias = None
        if self.bias is not None:
            bias = torch.tensordot(alpha, self.bias, dims=1)
        return torch.tensordot(alpha, self.weight, dims=1), bias

    def apply_weights(self, x, weight, bias):
        return F.conv2d(x, weight, bias, **self.conv) if self.conv is not None else F.linear(x, weight, bias)

    def forward(self, x):
        return self.apply_weights(x, *self.combined(self.alpha))

    def branch_sum(self, x, alpha):
        """Σ_b α_b (W_{b,l} * x + b_{b,l}): eq. 2 literally, one pass per branch (for tests)."""
        return sum(
            a * self.apply_weights(x, self.weight[b], self.bias[b] if self.bias is not None else None)
            for b, a in enumerate(alpha)
        )


class MultiBranchNet(nn.Module):
    """A kit model whose nn.Conv2d / nn.Linear layers are :class:`BranchLayer` s of B branches,
    taken from ``models`` (B models of one architecture, branch b from model b), and the client's
    logits a (``alpha_logits``: one row per layer, or one row shared by all layers)."""

    def __init__(self, models: list[nn.Module], shared_alpha: bool = False):
        super().__init__()
        net = clone_model(models[0])  # the inputs stay untouched
        names = [n for n, m in net.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
        if not names:
            raise PflkitError("pFedMB needs a model with conv or linear layers")
        others = [dict(m.named_modules()) for m in models]
        for index, name in enumerate(names):
            layer = BranchLayer([o[name] for o in others], 0 if shared_alpha else index)
            parent, _, attr = name.rpartition(".")
            setattr(net.get_submodule(parent), attr, layer)
        self.net = net
        rows = 1 if shared_alpha else len(names)
        device = next(net.parameters()).device
        self.alpha_logits = nn.Parameter(torch.zeros(rows, len(models), device=device))  # a = 0: α uniform

    def alpha(self) -> torch.Tensor:
        """α: (layers or 1) × B, every row on the simplex."""
        return torch.softmax(self.alpha_logits, dim=1)

    def branch_layers(self):
        return [(n, m) for n, m in self.net.named_modules() if isinstance(m, BranchLayer)]

    def forward(self, x):
        alpha = self.alpha()
        layers = [m for _, m in self.branch_layers()]
        for m in layers:
            m.alpha = alpha[m.index]
        try:
            return self.net(x)
        finally:
            for m in layers:
                m.alpha = None  # no graph tensors left on the modules (they are deep-copied)


def multi_branch(
    model: nn.Module, branches: int, shared_alpha: bool, seed: int, scale_init: bool = True
) -> MultiBranchNet:
    """The multi-branch version of a kit model: branch 1 = ``model``'s weights, branch b > 1 =
    the architecture re-initialised from seed (``seed``, b); all branches scaled by √B unless
    ``scale_init`` is false."""
    if branches < 1:
        raise PflkitError(f"pFedMB needs branches >= 1, got {branches}")
    copies = [model] + [reinitialised(model, derive_seed(seed, b)) for b in range(1, branches)]
    mb = MultiBranchNet(copies, shared_alpha)
    if not scale_init:
        return mb
    with torch.no_grad():  # √B: at the initial, uniform α the combined layer has the default variance
        for _, layer in mb.branch_layers():
            for p in layer.parameters():
                p.mul_(math.sqrt(branches))
    return mb


@torch.no_grad()
def combined_state(mb: MultiBranchNet) -> dict[str, torch.Tensor]:
    """The state dict of the plain architecture with W_l = Σ_b α_{b,l} W_{b,l} (eq. 1)."""
    alpha = mb.alpha()
    state = {k: v.detach().clone() for k, v in mb.net.state_dict().items()}
    for name, layer in mb.branch_layers():
        weight, bias = layer.combined(alpha[layer.index])
        state[f"{name}.weight"] = weight
        if bias is not None:
            state[f"{name}.bias"] = bias
    return state


def combined_model(mb: MultiBranchNet, plain: nn.Module) -> nn.Module:
    """``plain`` (a model of the original architecture) loaded with the combined weights: the
    client's personalised model at inference, at the cost of FedAvg's."""
    plain.load_state_dict(combined_state(mb))
    return plain


# ----------------------------------------------------------------------------- aggregation


def alpha_weighted_average(states, n, alphas, rows, previous):
    """Eq. 5, key by key: for a branched tensor (key in ``rows``, shape
    (B, ...)) branch b gets Σ_i n_i α^i_{r,b} W^i_b / Σ_i n_i α^i_{r,b},
    r = ``rows[key]``; other keys: Σ_i n_i W^i / Σ_i n_i.  Returns the
    averaged state dict (``rows``: key -> α's row; ``previous``: W^t)."""
    # eq. 6, and the final value for the unbranched keys
    out = weighted_average(states, n)
    for k, r in rows.items():
        scaled = [float(m) * a[r].double() for m, a in zip(n, alphas)]
        c = torch.stack(scaled)  # (clients, B): n_i α^i_b
        total = c.sum(0)
        w = c / torch.where(total > 0, total, torch.ones_like(total))
        ref = states[0][k]
        shape = (-1,) + (1,) * (ref.dim() - 1)
        acc = sum(x.view(shape) * s[k].double() for x, s in zip(w, states))
        # a branch nobody uses (underflowed): keep W^t_b
        used = (total > 0).view(shape)
        acc = torch.where(used, acc, previous[k].double())
        out[k] = acc.to(ref.dtype)
    return out


# ----------------------------------------------------------------------------- server & client


class PFedMBServer(FedAvgServer):
    shared_prefix = "net."  # the branches W (and any unbranched layer); not the client's α

    def __init__(self, model, cfg, opts, n_clients):
        mb = multi_branch(model, opts["branches"], opts["shared_alpha"], cfg.seed, opts["scale_init"])
        super().__init__(mb, cfg, opts, n_clients)
        self.rows = {}  # state-dict key of a branched tensor -> its row of α
        for name, layer in mb.branch_layers():
            for p in ("weight", "bias") if layer.bias is not None else ("weight",):
                self.rows[f"net.{name}.{p}"] = layer.index

    def aggregate(self, uploads, rnd):
        if not uploads:
            return
        states = [u["weights"] for u in uploads.values()]
        n = [u["n"] for u in uploads.values()]
        if self.opt["alpha_weighted"]:  # eq. 5
            self.w = alpha_weighted_average(states, n, [u["alpha"] for u in uploads.values()], self.rows, self.w)
        else:  # eq. 6
            self.w = weighted_average(states, n)


class PFedMBClient(FedAvgClient):
    shared_prefix = "net."
    persistent = ("model",)  # the branches and the client's own α (its logits)

    def __init__(self, cid, data, model, cfg, opts):
        mb = multi_branch(model, opts["branches"], opts["shared_alpha"], cfg.seed, opts["scale_init"])
        super().__init__(cid, data, mb, cfg, opts)
        self.plain = model  # the original architecture, loaded with the combined weights to evaluate

    def train_round(self, message, rnd):
        reply, loss = super().train_round(message, rnd)  # W^{t+1,i} ← W^t; local update; W^{t+1,i}, n_i
        reply["alpha"] = self.alpha()  # α^{t+1,i}, for the weights of eq. 5 only
        return reply, loss

    def local_update(self):
        mb = self.model
        branches = [p for k, p in mb.named_parameters() if k.startswith(self.shared_prefix)]
        if self.opt["branches"] > 1:  # with one branch α ≡ 1: nothing to learn
            with frozen(branches):  # eq. 3: α for E epochs, W^t fixed
                momentum = None if self.opt["alpha_momentum"] < 0 else self.opt["alpha_momentum"]
                self.sgd(params=[mb.alpha_logits], lr=self.opt["alpha_lr"], momentum=momentum)
        with frozen([mb.alpha_logits]):  # eq. 4: W for E epochs, α^{t+1,i} fixed
            return self.sgd(params=branches)

    def alpha(self) -> torch.Tensor:
        """α^i, (layers or 1) × B."""
        return self.model.alpha().detach().clone()

    def eval_model(self, message):
        self.receive(message)  # W^t
        return combined_model(self.model, self.plain)  # W_l = Σ_b α^i_{b,l} W_{b,l}   (eq. 1)


@contextlib.contextmanager
def frozen(params):
    """Hold ``params`` fixed (no gradients computed) inside the block."""
    params = list(params)
    before = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, r in zip(params, before):
            p.requires_grad_(r)


register(
    Method(
        "pfedmb",
        PFedMBServer,
        PFedMBClient,
        "Multi-branch layers mixed by client-specific α; α-weighted aggregation",
        "Mori et al. 2022",
        options={
            "branches": (5, "B, branches per conv/linear layer (§V-B uses 5; Table III: 3 to 10)"),
            "shared_alpha": (False, "one α for all layers (§V-B) instead of one per layer"),
            "alpha_weighted": (True, "aggregate branches weighted by n_i α^i (eq. 5); false: by n_i (eq. 6)"),
            "scale_init": (True, "multiply the initial branches by √B (false: each branch as drawn)"),
            "alpha_lr": (1.0, "η_α, the SGD learning rate of α's softmax logits (eq. 3)"),
            "alpha_momentum": (-1.0, "momentum of the α step (eq. 3); -1: the run's momentum"),
        },
    )
)
