"""FedMN (Wang et al., "Personalized Federated Learning via Heterogeneous Modular Networks",
Algorithm 1): every client assembles its own architecture from a shared pool of module blocks,
chosen by a routing hypernetwork from the client's joint distribution of (x, y).

**Modular network (§II-A).**  Layer 1 holds n_1 encoders (the run's model body, e.g. LeNet's
convolutions, each independently initialised), z^(j) = Encoder^(j)(x)            (eq. 1)
Layers 2..L hold n_l MLP blocks (Linear-ReLU-Dropout; the blocks of layer L are Linear to the
classes).  A decision V_m ∈ {0,1}^E switches the E = Σ_{l<L} n_l n_{l+1} + n_L paths between
successive layers and from layer L to the output.  With C the decisions into block j of layer l,
the block's input is the normalised sum of its connected inputs, and zero when none:
    u_j = Σ_k C_jk ũ_k / Σ_k C_jk   if Σ_k C_jk ≠ 0,   else 0                  (eq. 13)
A block whose input is zero is *inactive* (a_m): its output is not used downstream and its
parameters are neither downloaded nor uploaded.  The output sums the active last blocks likewise.

**Routing hypernetwork (§II-D).**  φ_x (the encoder architecture) embeds each sample, φ_y (a
linear layer) its one-hot label; their normalised concatenation goes through one linear layer h
to E logits, averaged over the client's training data:
    G_m = 1/n_m Σ_i h([φ_x(x_i), φ_y(y_i)])                                       (eq. 9)
    Π_m = σ(G_m)                                                                  (eq. 10)
and V_m is drawn from the binary concrete relaxation of Bern(Π_m), temperature τ:
    v_i = σ((log ε − log(1 − ε) + log π_i/(1 − π_i)) / τ),  ε ~ U(0, 1)          (eq. 5)
By default (``decisions=relaxed``, the paper's "V_m approximated by a vector in [0, 1]^E") the
relaxed values are eq. 13's path weights, C = v·1[v > ``prune``], so a path with a negligible
weight is off and a block can be inactive; the task loss's gradient reaches the router through
eq. 5 (eq. 6).  ``decisions=binary`` uses 1[v > ½] in the forward pass and passes the gradient to
v straight-through.

**Round (Algorithm 1, §II-E).**  For each sampled client m:
    server → client:  router θ_h and the encoders
    client:           Π_m on its data (eq. 10), V_m ~ binaryConcrete(Π_m) (eq. 5), active blocks a_m
    client → server:  a_m                                   (a request: which blocks to send)
    server → client:  the active blocks only
    client:           K local steps on L_m(θ, V_m) with V_m fixed for the round (LocalSolver)
    client → server:  router, encoders, active blocks, n_m
    server:           router, encoders: Σ_m n_m θ^m / Σ_m n_m;  block i: the same average over
                      the clients that used it (a_i^m = 1); a block nobody used keeps its value.
**Encoders pretrained by FedAvg (§IV-B).**  The first ``pretrain_fraction`` of the rounds are
FedAvg on the encoder model: encoder j with a linear head of its own (the baseline's network),
the n_1 of them trained side by side on the same batches (the loss is the sum of their losses, so
each gets exactly its FedAvg gradient) from their own initialisations; clients send encoders and
heads, nothing else.  At the switch to routing the router's φ_x starts from encoder 0 (it "adopts
the same encoder architecture"), the blocks from their initialisation.  These rounds are part of
the run, its ledger and its budget; while they last a client is judged by its pretrained models'
mean logits.  ``pretrain=all-paths`` pretrains the whole modular network instead, every path on
(with n_1 > 1 the averages of eq. 13 shrink its signal and it learns slowly from scratch).

Choices where the paper is silent (the chapter lists them): the decision is drawn once per round
from Π on the whole local training set, and its paths (which blocks take part) stay fixed for the
round, as Algorithm 1 says; the router trains inside the local solver (Alg. 1, l. 19: every batch,
its own SGD at ``router_lr`` with the run's momentum), the weights of the round's paths following it,
with G_m estimated on each batch (``router_step=round``: one plain step at the end of the round
with the K steps' summed gradient); a block's
average is normalised over the clients that used it (the printed Σ_m |D_m|/|D| a_i θ_i^m would
shrink a block that few clients use); τ decays exponentially from ``tau_start`` to ``tau_end``
over the routing rounds; a client is judged without noise, v = σ(G/τ) at the temperature of the
round just trained (binary: the mode 1[Π > ½]).

**The authors' public code departs from the paper** (xztcwang/FedMN); each departure is an option:
``router_grad=0`` (the router's output passes through ``.item()``: no gradient from the task
loss, so the router stays at its initialisation), ``decisions=softmax`` (each node's incoming
paths are weighted by a softmax of the router's logits instead of binary decisions; every block
is then active), ``anneal=0`` (the temperature never leaves ``tau_start``), ``shared_modules=1``
(the blocks of a layer share the first block's weights, and the n_1 encoders are one encoder,
pretrained as one FedAvg model: the code appends the same pretrained instance n_1 times).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import PflkitError
from ..federated import Client, Server, derive_seed, reinitialised, snapshot, weighted_average
from . import Method, register

DECISIONS = ("relaxed", "binary", "softmax")
PRETRAIN = ("encoders", "all-paths")


def parse_arch(spec: str) -> list[int]:
    """ "2,2,2" → [n_1, ..., n_L] (n_1 encoders, then L−1 layers of blocks)."""
    try:
        arch = [int(v) for v in str(spec).replace("x", ",").split(",") if v.strip()]
    except ValueError:
        raise PflkitError(f"arch must be block counts like 2,2,2, got {spec!r}") from None
    if len(arch) < 2 or min(arch) < 1:
        raise PflkitError(f"arch needs encoders and at least one layer of blocks, each >= 1, got {spec!r}")
    return arch


# ----------------------------------------------------------------------------- the network


class Router(nn.Module):
    """The routing hypernetwork: G = mean_i h(normalize([φ_x(x_i), φ_y(y_i)]))   (eq. 9)."""

    def __init__(self, phi_x: nn.Module, feat_dim: int, n_classes: int, label_dim: int, n_paths: int):
        super().__init__()
        self.n_classes = n_classes
        self.phi_x = phi_x  # the encoder architecture, its own weights
        self.phi_y = nn.Linear(n_classes, label_dim)  # one-hot label → R^{d_y}
        self.h = nn.Linear(feat_dim + label_dim, n_paths)  # single-layer perceptron → E logits

    def logits(self, x: torch.Tensor, y: torch.Tensor, chunk: int = 1024):
        """G_m over all the given samples (eq. 9), summed chunk by chunk."""
        total = 0
        for s in range(0, len(y), chunk):
            xs, ys = x[s : s + chunk], y[s : s + chunk]
            y_hot = F.one_hot(ys, self.n_classes).float()
            joint = torch.cat([self.phi_x(xs), self.phi_y(y_hot)], dim=1)
            total = total + self.h(F.normalize(joint, dim=1)).sum(0)
        return total / max(len(y), 1)

    @torch.no_grad()
    def inputs(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, float]:
        """What h reads of a client (a diagnostic, not eq. 9's computation): the mean of the
        normalised [φ_x(x), φ_y(y)] over its samples, and the label part's mean share of a sample's
        squared norm before the normalisation."""
        joint = torch.cat([self.phi_x(x), self.phi_y(F.one_hot(y, self.n_classes).float())], dim=1)
        sq = joint.pow(2)
        label_share = (sq[:, -self.phi_y.out_features :].sum(1) / sq.sum(1).clamp_min(1e-12)).mean()
        return F.normalize(joint, dim=1).mean(0), float(label_share)


class ModularNet(nn.Module):
    """Encoders (layer 1), layers of blocks (2..L) and the router; ``forward(x, c)`` with the
    path weights ``c`` (E values: binary decisions, or softmax weights) and the active layers."""

    def __init__(self, template: nn.Module, arch, hidden: int, dropout: float, label_dim: int, seed: int, shared=False):
        super().__init__()
        body, head = template.body, template.head
        feat, n_classes = head.in_features, head.out_features
        self.arch, self.shared = list(arch), bool(shared)
        n_enc = 1 if self.shared else arch[0]  # shared: one encoder feeds every node of layer 1
        self.encoders = nn.ModuleList(reinitialised(body, derive_seed(seed, 7, j)) for j in range(n_enc))
        with torch.random.fork_rng(devices=[]):  # encoder j's own head while FedAvg pretrains it
            torch.manual_seed(derive_seed(seed, 11))
            self.pre_heads = nn.ModuleList(nn.Linear(feat, n_classes) for _ in range(n_enc))
        layers = []
        for li, n in enumerate(arch[1:], start=1):
            d_in = feat if li == 1 else hidden
            last = li == len(arch) - 1

            def block(d_in=d_in, last=last):
                return (
                    nn.Linear(d_in, n_classes)
                    if last
                    else nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Dropout(dropout))
                )

            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(derive_seed(seed, 8, li))
                layers.append(nn.ModuleList(block() for _ in range(n)))
        self.blocks = nn.ModuleList(layers)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(seed, 9))
            phi_x = reinitialised(body, derive_seed(seed, 10))
            self.router = Router(phi_x, feat, n_classes, label_dim, self.n_paths)
        self.to(next(template.parameters()).device)

    @property
    def n_paths(self) -> int:
        """E = Σ_{l<L} n_l n_{l+1} + n_L."""
        a = self.arch
        return sum(a[i] * a[i + 1] for i in range(len(a) - 1)) + a[-1]

    def path_matrices(self, c: torch.Tensor) -> list[torch.Tensor]:
        """Split the E path weights into C^(l) (n_l × n_{l−1}) per layer, then the output's (1 × n_L)."""
        out, at = [], 0
        sizes = list(zip(self.arch[1:], self.arch[:-1])) + [(1, self.arch[-1])]
        for rows, cols in sizes:
            out.append(c[at : at + rows * cols].view(rows, cols))
            at += rows * cols
        return out

    def block(self, layer: int, j: int) -> nn.Module:
        return self.blocks[layer][0 if self.shared else j]

    def active(self, c: torch.Tensor) -> list[list[bool]]:
        """a_m by layer of blocks: a block is active when some path from an active node is on."""
        mats = self.path_matrices(c.detach())
        prev = [True] * self.arch[0]  # encoders always compute
        act = []
        for C in mats[:-1]:
            on = [(C[j][torch.tensor(prev)] != 0).any().item() for j in range(C.shape[0])]
            act.append(on)
            prev = on
        return act

    def pretrained_logits(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The n_1 encoder models of the pretraining: head_j(encoder_j(x))."""
        return [head(enc(x)) for enc, head in zip(self.encoders, self.pre_heads)]

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return self.route(self.encode(x), c, len(x))

    def encode(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Layer 1: the encoders' outputs (eq. 1)."""
        outs = [enc(x) for enc in self.encoders]
        if self.shared:  # the authors' code: one encoder instance in all n_1 places of layer 1
            outs = outs * self.arch[0]
        return outs

    def route(self, outs: list[torch.Tensor], c: torch.Tensor, n: int):
        """Layers 2..L along the paths weighted by ``c`` (eq. 13), from
        layer 1's outputs.  A path that is off has weight 0 in u_j but still a
        gradient, (ũ_k − u_j)/Σ_k C_jk: under ``decisions=binary`` it reaches
        the router through eq. 5 (straight-through); relaxed, C = v·mask, a
        pruned path gets none."""
        mats = self.path_matrices(c)
        alive = [True] * len(outs)
        for li, C in enumerate(mats):
            last = li == len(mats) - 1
            new, new_alive = [], []
            for j in range(C.shape[0]):
                ks = [k for k in range(C.shape[1]) if alive[k]]
                w = C[j, ks]
                if not ks or w.detach().sum() == 0:  # no input: inactive
                    new.append(None)
                    new_alive.append(False)
                    continue
                # eq. 13: the weighted mean of the block's active inputs
                u = sum(wk * outs[k] for wk, k in zip(w, ks)) / w.sum()
                new.append(u if last else self.block(li, j)(u))
                new_alive.append(True)
            outs, alive = new, new_alive
        logits = outs[0]
        if logits is None:  # no active path to the output: uniform prediction
            return torch.zeros(n, self.router.n_classes, device=c.device)
        return logits


def temperature(rnd: int, cfg, opts) -> float:
    """τ at round ``rnd``: exponential decay from tau_start to tau_end over the routing rounds."""
    start = pretrain_rounds(cfg, opts)
    if not opts["anneal"] or cfg.rounds - start <= 1:
        return opts["tau_start"]
    t = min(max(rnd - start, 0) / (cfg.rounds - start - 1), 1.0)
    return opts["tau_start"] * (opts["tau_end"] / opts["tau_start"]) ** t


def pretrain_rounds(cfg, opts) -> int:
    return int(math.floor(opts["pretrain_fraction"] * cfg.rounds))


# the parts of a run, in their order: which one a round is, the server and the client read from one schedule
PRETRAINING = "pretrain encoders"  # §IV-B: FedAvg on the n_1 encoder models (pretrain=encoders)
ALL_PATHS = "all paths"  # the whole network, every path on (pretrain=all-paths, or force_paths after it)
APART = "start apart"  # ours, a control: the switch round of start_apart (the decisions set apart first)
ROUTING = "routing"  # Algorithm 1's round: decide, ask for the active blocks, train them, send them


def phase(rnd: int, cfg, opts) -> str:
    """The part of the run round ``rnd`` belongs to: the first ``pretrain_fraction`` of the rounds
    pretrain (:data:`PRETRAINING` or :data:`ALL_PATHS`), the rest route (:data:`ROUTING`; its first
    round :data:`APART` under ``start_apart``), or keep every path on (``force_paths``)."""
    start = pretrain_rounds(cfg, opts)
    if rnd < start:
        return PRETRAINING if opts["pretrain"] == "encoders" else ALL_PATHS
    if opts["force_paths"]:
        return ALL_PATHS
    return APART if opts["start_apart"] and rnd == start else ROUTING


def block_keys(state: dict, layer: int, j: int) -> list[str]:
    prefix = f"blocks.{layer}.{j}."
    return [k for k in state if k.startswith(prefix)]


def active_blocks(state: dict, active, shared: bool) -> dict:
    """The tensors of the active blocks (a_m, by layer) in ``state``: what goes over the wire."""
    out = {}
    for li, row in enumerate(active):
        for j, on in enumerate(row):
            if on:
                out.update({k: state[k] for k in block_keys(state, li, 0 if shared else j)})
    return out


def part(state: dict, prefix: str) -> dict:
    return {k: v for k, v in state.items() if k.startswith(prefix)}


# ----------------------------------------------------------------------------- server


class FedMNServer(Server):
    def __init__(self, model, cfg, opts, n_clients):
        super().__init__(model, cfg, opts, n_clients)
        check_options(opts)
        net = build_net(model, cfg, opts)
        self.arch, self.shared = net.arch, net.shared
        self.theta = snapshot(net)  # the global modular pool, encoders and router
        self.requests: dict[int, list[list[bool]]] = {}
        self.embeddings: dict[int, torch.Tensor] = {}  # start_apart: the clients' mean router inputs
        self.apart_sd: float | None = None  # the spread of the logits over the clients as set apart

    def phase(self, rnd: int) -> str:
        return phase(rnd, self.cfg, self.opt)

    def pre_message(self, cid, rnd):
        """Routing rounds: router and encoders first, so that the client can decide (Alg. 1, l. 6–7)."""
        if self.phase(rnd) not in (ROUTING, APART):
            return None
        msg = {"router": part(self.theta, "router."), "encoders": part(self.theta, "encoders.")}
        if self.phase(rnd) == APART:  # start_apart: the client sends its mean router input instead of deciding
            msg["embed"] = torch.tensor(True)
        return msg

    def receive_request(self, cid, request, rnd):
        if "embedding" in request:
            self.embeddings[cid] = request["embedding"]
            return
        self.requests[cid] = unflatten(request["active"], self.arch)

    def set_apart(self) -> None:
        """Ours, a control (``start_apart`` = s > 0): at the switch, h gets a client-specific part, so
        that the clients' decisions start apart and the run shows whether training keeps them apart.
        From the clients' mean router inputs e_m (eq. 9's input averaged; sent once, counted) and
        their mean ē: U, the top two directions of the deviations e_m − ē, σ the deviations' spread
        along them; W += s A diag(1/σ) U, b −= (that) ē with A ~ N(0, ½) (E × 2, seeded by the run).
        As G_m = W e_m + b, client m's logits move by s A diag(1/σ) U (e_m − ē): about s apart over
        the clients on every path, their mean over the clients unchanged."""
        ids = sorted(self.embeddings)
        e = torch.stack([self.embeddings[i] for i in ids]).float()
        mean = e.mean(0)
        _, sv, vh = torch.linalg.svd(e - mean, full_matrices=False)
        k = max(min(2, len(ids) - 1), 1)
        spread = (sv[:k] / math.sqrt(len(ids))).clamp_min(1e-12)
        gen = torch.Generator().manual_seed(derive_seed(self.cfg.seed, 13))
        a = torch.randn(self.theta["router.h.bias"].numel(), k, generator=gen) / math.sqrt(k)
        w_add = self.opt["start_apart"] * a @ torch.diag(1 / spread) @ vh[:k]
        w = self.theta["router.h.weight"]
        self.theta["router.h.weight"] = w + w_add.to(w)
        self.theta["router.h.bias"] = self.theta["router.h.bias"] - (w_add @ mean).to(w)
        g = e @ self.theta["router.h.weight"].T + self.theta["router.h.bias"]  # every G_m as started
        self.apart_sd = float(g.std(0, unbiased=False).mean())  # their spread over the clients (a diagnostic)
        self.embeddings = {}

    def message_for(self, cid, rnd):
        if self.phase(rnd) == PRETRAINING:  # FedAvg on the encoder models: encoders and their heads
            return {"pretrain": part(self.theta, "encoders.") | part(self.theta, "pre_heads.")}
        if self.phase(rnd) == ALL_PATHS:  # all-paths pretraining or force_paths: the whole network
            return {"weights": {k: v for k, v in self.theta.items() if not k.startswith(("router.", "pre_heads."))}}
        if self.phase(rnd) == APART:  # start_apart: h as set apart and every block (the client decides on receipt)
            if self.embeddings:  # the first message of the round: every client's input is in
                self.set_apart()
            every = [[True] * n for n in self.arch[1:]]
            return {"router_h": part(self.theta, "router.h."), "blocks": active_blocks(self.theta, every, self.shared)}
        return {
            "blocks": active_blocks(self.theta, self.requests.pop(cid), self.shared)
        }  # only the active blocks (§II-E)

    def eval_message(self, cid):
        """Evaluation: everything (counted apart, as eval bytes); while pretraining, the network is
        judged as it is trained, every path on."""
        msg = {"weights": self.theta}
        if self.phase(self.rounds_done - 1) == PRETRAINING:  # the round just trained
            msg["pretrained"] = torch.tensor(True)
        elif self.phase(self.rounds_done - 1) == ALL_PATHS:
            msg["all_paths"] = torch.tensor(True)
        else:  # judged at the temperature of the round just trained
            msg["round"] = torch.tensor(self.rounds_done - 1)
        return msg

    rounds_done = 0  # rounds aggregated so far

    def aggregate(self, uploads, rnd):
        self.rounds_done = rnd + 1
        if not uploads:
            return
        ups = list(uploads.values())
        n = [u["n"] for u in ups]
        shared = weighted_average([u["shared"] for u in ups], n)  # router (if routed) and encoders
        self.theta.update(shared)
        keys = {k for u in ups for k in u["blocks"]}
        for k in keys:  # block i: average over the clients that used it (a_i^m = 1)
            users = [(u["blocks"][k], u["n"]) for u in ups if k in u["blocks"]]
            self.theta[k] = weighted_average([{k: t} for t, _ in users], [w for _, w in users])[k]
        if self.phase(rnd) == PRETRAINING and self.phase(rnd + 1) in (ROUTING, APART):
            # routing starts next round: the router's φ_x starts from the pretrained encoder 0
            for k in part(self.theta, "router.phi_x."):
                self.theta[k] = self.theta["encoders.0." + k[len("router.phi_x.") :]].clone()

    def state_dict(self):
        state = {"theta": self.theta, "rounds_done": torch.tensor(self.rounds_done)}
        return state | ({"apart_sd": torch.tensor(self.apart_sd)} if self.apart_sd is not None else {})

    def load_state_dict(self, state):
        self.theta = dict(state["theta"])
        self.rounds_done = int(state["rounds_done"])
        self.apart_sd = float(state["apart_sd"]) if "apart_sd" in state else None


# ----------------------------------------------------------------------------- client


class FedMNClient(Client):
    round_state = ("decision",)

    def __init__(self, cid, data, model, cfg, opts):
        super().__init__(cid, data, model, cfg, opts)
        self.model = build_net(model, cfg, opts)
        self.decision = None  # this round's (path weights c, relaxed v, noise, τ)

    # -- the decision (eqs. 5, 9, 10) --------------------------------------------------------
    def decide(self, rnd: int, train: bool = True):
        """This round's decision: (mask of the paths that are on, relaxed
        values v, noise, τ).  v from eq. 5 is the path weights of eq. 13; a
        weight below ``prune`` counts as 0, so that a block can be inactive.
        Evaluation draws no noise: v = σ(G/τ) at the round's τ.  The options
        ``binary`` and ``softmax``: :meth:`decide_option`."""
        x, y = self.data.split("train")
        with torch.no_grad():
            g = self.model.router.logits(x, y)  # G_m (eq. 9); Π_m = σ(G_m)
        tau = temperature(rnd, self.cfg, self.opt)
        if self.opt["decisions"] != "relaxed":
            return self.decide_option(g, tau, train)
        noise = self.logistic_noise(g) if train else torch.zeros_like(g)
        v = torch.sigmoid((noise + g) / tau)  # eq. 5 (log π/(1−π) = G)
        return (v > self.opt["prune"]).float(), v, noise, tau

    def logistic_noise(self, g):
        """log ε − log(1 − ε), ε ~ U(0, 1) (eq. 5), one value a path."""
        eps = torch.rand(g.shape, generator=self.generator).to(g).clamp(1e-6, 1 - 1e-6)
        return torch.log(eps) - torch.log1p(-eps)

    def decide_option(self, g, tau, train):
        """:meth:`decide` under the options: ``binary``, the paths with v > ½,
        straight-through (evaluation: the mode 1[Π > ½]); ``softmax``, the authors'
        code (every path on, weighted by a softmax of G/τ, no noise)."""
        noise = torch.zeros_like(g)
        if self.opt["decisions"] == "softmax":
            v = softmax_weights(self.model, g / tau)
            return torch.ones_like(v), v, noise, tau
        if train:
            noise = self.logistic_noise(g)
        v = torch.sigmoid((noise + g) / tau)  # eq. 5 (log π/(1−π) = G)
        return (v > 0.5).float(), v, noise, tau

    def weights(self, mask, v):
        """Path weights C for eq. 13 from a decision; differentiable in v."""
        if self.opt["decisions"] == "binary":
            return mask + v - v.detach()  # binary forward, relaxed gradient (straight-through)
        if self.opt["decisions"] == "relaxed":
            return v * mask
        return v

    def request(self, message, rnd):
        """Routing rounds: load router and encoders, decide (eqs. 9, 10, 5), ask for the active blocks."""
        self.model.load_state_dict({**message["router"], **message["encoders"]}, strict=False)
        if (
            phase(rnd, self.cfg, self.opt) == APART
        ):  # ours, start_apart's switch: the mean router input, no decision yet
            return {"embedding": self.model.router.inputs(*self.data.split("train"))[0]}
        self.decision = self.decide(rnd)
        return {"active": torch.tensor([a for row in self.model.active(self.decision[0]) for a in row])}

    # -- a round --------------------------------------------------------------------------
    def train_round(self, message, rnd):
        net, now = self.model, phase(rnd, self.cfg, self.opt)  # the round's part of the run, as the server's
        if now == PRETRAINING:  # FedAvg on the n_1 encoder models, the same batches for all
            net.load_state_dict(message["pretrain"], strict=False)
            return self.pretrain_steps()
        if now == ALL_PATHS:  # pretraining (or force_paths): FedAvg with every path on
            net.load_state_dict(message["weights"], strict=False)
            c = torch.ones(net.n_paths, device=self.data.train_idx.device)
            return self.reply(c, self.local_steps(lambda: c), routed=False)
        if now == APART:  # start_apart's switch round: h as set apart, then the decision
            net.load_state_dict(message["router_h"], strict=False)
            self.decision = self.decide(rnd)
        net.load_state_dict(message["blocks"], strict=False)  # copy the active blocks (§II-E)
        mask, v, noise, tau = self.decision
        route = bool(self.opt["router_grad"])
        if route and self.opt["router_step"] == "batch":  # Algorithm 1, l. 19: θ_h moves on every batch
            loss = self.routed_steps(mask, noise, tau)
            with torch.no_grad():
                c = self.weights(mask, self.path_values(*self.data.split("train"), noise, tau))
            return self.reply(c, loss, routed=True)
        v_leaf = v.detach().clone().requires_grad_(route)
        loss = self.local_steps(lambda: self.weights(mask, v_leaf))  # rebuilt per step: one graph per backward
        c = self.weights(mask, v_leaf)
        if route and v_leaf.grad is not None:
            self.router_step(v_leaf.grad, noise, tau)
        return self.reply(c.detach(), loss, routed=True)

    def pretrain_steps(self):
        """The pretraining's local steps: Σ_j CE(head_j(encoder_j(x)), y), encoders and heads only."""
        net = self.model
        net.train()
        opt = self.optimizer([*net.encoders.parameters(), *net.pre_heads.parameters()])
        total, steps = torch.zeros(()), 0
        for x, y in self.batches():
            loss = sum(F.cross_entropy(z, y) for z in net.pretrained_logits(x))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach().cpu() / len(net.encoders)
            steps += 1
        state = snapshot(net)
        shared = part(state, "encoders.") | part(state, "pre_heads.")
        return {"shared": shared, "blocks": {}, "n": self.n_samples()}, self.check_finite(total / max(steps, 1))

    def local_steps(self, weights):
        """LocalSolver: K steps on L_m(θ, V_m) with V_m fixed (``weights()``: its path weights);
        the router's gradient accumulates in v."""
        net = self.model
        net.train()
        opt = self.optimizer([p for n, p in net.named_parameters() if not n.startswith("router.")])
        total, steps = torch.zeros(()), 0
        for x, y in self.batches():
            loss = F.cross_entropy(net(x, weights()), y)
            if loss.requires_grad:  # no active path to the output leaves nothing to train
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            total += loss.detach().cpu()
            steps += 1
        return self.check_finite(total / max(steps, 1))

    def path_values(self, x, y, noise, tau):
        """v from the router on the samples (x, y): eq. 9 on them, eq. 10, eq. 5 with the round's noise."""
        g = self.model.router.logits(x, y)
        if self.opt["decisions"] == "softmax":
            return softmax_weights(self.model, g / tau)
        return torch.sigmoid((noise + g) / tau)

    def routed_steps(self, mask, noise, tau):
        """LocalSolver with the router inside it (Algorithm 1, l. 19): K steps on L_m(θ, V_m) in which
        every batch also moves θ_h, by its own SGD (``router_lr``, default the run's lr; the run's
        momentum).  The decision's paths (``mask``: which blocks take part) stay fixed for the round;
        their weights v follow the router, G_m estimated on the batch (eq. 9 averages over the client's
        samples: the batch's mean is its unbiased estimate)."""
        net = self.model
        net.train()
        opt = self.optimizer([p for n, p in net.named_parameters() if not n.startswith("router.")])
        r_opt = self.optimizer(net.router.parameters(), lr=self.opt["router_lr"] or self.cfg.lr)
        total, steps = torch.zeros(()), 0
        for x, y in self.batches():
            loss = F.cross_entropy(net(x, self.weights(mask, self.path_values(x, y, noise, tau))), y)
            if loss.requires_grad:
                opt.zero_grad(set_to_none=True)
                r_opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                r_opt.step()
            total += loss.detach().cpu()
            steps += 1
        return self.check_finite(total / max(steps, 1))

    def router_step(self, grad_v, noise, tau):
        """Backpropagate the task loss's gradient on v through eq. 5 and eq. 9 to θ_h, one SGD step
        of ``router_lr`` (default: the client's learning rate) with the K steps' summed gradient."""
        router = self.model.router
        x, y = self.data.split("train")
        g = router.logits(x, y)
        if self.opt["decisions"] == "softmax":
            v = softmax_weights(self.model, g / tau)
        else:
            v = torch.sigmoid((noise + g) / tau)
        router.zero_grad(set_to_none=True)
        (v * grad_v).sum().backward()
        with torch.no_grad():
            for p in router.parameters():
                if p.grad is not None:
                    p -= (self.opt["router_lr"] or self.cfg.lr) * p.grad
        router.zero_grad(set_to_none=True)

    def reply(self, c, loss, routed):
        """Encoders (and, in routing rounds, the router) and the active blocks only (§II-E)."""
        net, state = self.model, snapshot(self.model)
        blocks = active_blocks(state, net.active(c), net.shared)
        shared = part(state, "encoders.") | (part(state, "router.") if routed else {})
        return {"shared": shared, "blocks": blocks, "n": self.n_samples()}, loss

    def eval_model(self, message):
        self.model.load_state_dict(message["weights"])
        if "pretrained" in message:
            return _Pretrained(self.model)
        if "all_paths" in message:
            return _Routed(self.model, torch.ones(self.model.n_paths, device=self.data.train_idx.device))
        mask, v, _, _ = self.decide(int(message["round"]), train=False)
        return _Routed(self.model, self.weights(mask, v).detach())


class _Routed(nn.Module):
    """The client's personalised model: the modular network with its decision fixed."""

    def __init__(self, net: ModularNet, c: torch.Tensor):
        super().__init__()
        self.net, self.c = net, c

    def forward(self, x):
        return self.net(x, self.c)


class _Pretrained(nn.Module):
    """During the encoders' pretraining: the mean logits of the n_1 encoder models."""

    def __init__(self, net: ModularNet):
        super().__init__()
        self.net = net

    def forward(self, x):
        return torch.stack(self.net.pretrained_logits(x)).mean(0)


def routing(server: FedMNServer, clients: list[Client]) -> dict[int, dict]:
    """What the router decides for each client at evaluation (a routing round just trained): Π = σ(G)
    (eq. 10) and the active blocks a_m (by layer).  The mechanism's diagnostics read it: how far Π
    strays from ½, how many distinct architectures the clients get, the share of blocks in use."""
    out = {}
    for c in clients:
        model = c.eval_model(server.eval_message(c.cid))
        if not isinstance(model, _Routed):
            raise PflkitError("routing() needs a run past its pretraining rounds, with routing on")
        with torch.no_grad():
            pi = torch.sigmoid(c.model.router.logits(*c.data.split("train")))
        out[c.cid] = {"pi": pi.tolist(), "active": c.model.active(model.c)}
    return out


def softmax_weights(net: ModularNet, logits: torch.Tensor) -> torch.Tensor:
    """The authors' code: each node's incoming paths weighted by a softmax of their logits."""
    mats = net.path_matrices(logits)
    return torch.cat([torch.softmax(m, dim=1).reshape(-1) for m in mats])


def unflatten(active: torch.Tensor, arch) -> list[list[bool]]:
    """a_m as sent (one bool per block of layers 2..L) → by layer."""
    flat, out, at = active.tolist(), [], 0
    for n in arch[1:]:
        out.append([bool(a) for a in flat[at : at + n]])
        at += n
    return out


def build_net(template, cfg, opts) -> ModularNet:
    return ModularNet(
        template, parse_arch(opts["arch"]), opts["hidden"], opts["dropout"], opts["label_dim"], cfg.seed,
        shared=opts["shared_modules"],
    )  # fmt: skip


def check_options(opts) -> None:
    parse_arch(opts["arch"])
    if opts["decisions"] not in DECISIONS:
        raise PflkitError(f"decisions must be one of {', '.join(DECISIONS)}, not {opts['decisions']!r}")
    if opts["pretrain"] not in PRETRAIN:
        raise PflkitError(f"pretrain must be one of {', '.join(PRETRAIN)}, not {opts['pretrain']!r}")
    if not 0 <= opts["pretrain_fraction"] <= 1:
        raise PflkitError(f"pretrain_fraction must be in [0, 1], got {opts['pretrain_fraction']}")
    if opts["tau_start"] <= 0 or opts["tau_end"] <= 0:
        raise PflkitError("temperatures must be > 0")


register(
    Method(
        "fedmn",
        FedMNServer,
        FedMNClient,
        "Per-client architectures from a shared pool of module blocks, routed by a hypernetwork",
        "Wang et al. 2023",
        options={
            "arch": ("2,2,2", "n_1,...,n_L: encoders, then blocks per layer (the last layer maps to the classes)"),
            "hidden": (256, "units of the MLP blocks"),
            "dropout": (0.2, "dropout in the MLP blocks"),
            "label_dim": (32, "dimension of the router's label embedding φ_y"),
            "tau_start": (1.0, "binary-concrete temperature at the first routing round"),
            "tau_end": (0.1, "temperature at the last round (exponential decay)"),
            "anneal": (1, "1: anneal τ from tau_start to tau_end; 0: keep tau_start (the authors' code)"),
            "pretrain_fraction": (0.2, "share of the rounds that pretrain by FedAvg before routing"),
            "pretrain": (
                "encoders",
                "encoders: FedAvg on each encoder with its own head (paper); all-paths: the network",
            ),
            "router_step": (
                "batch",
                "batch: the router trains inside local training, every batch (Algorithm 1, l. 19); round: one "
                "step per round with the K steps' summed gradient, no momentum",
            ),
            "router_lr": (0.0, "learning rate of the router's optimiser (0: the run's lr)"),
            "router_grad": (1, "1: the task loss trains the router (paper); 0: no gradient (the authors' code)"),
            "decisions": (
                "relaxed",
                "relaxed (paper, eq. 5 in [0,1]), binary (straight-through) or softmax (authors' code)",
            ),
            "prune": (0.01, "relaxed decisions: a path weight below this is 0 (its block may be inactive)"),
            "shared_modules": (
                0,
                "1: the blocks of a layer share one set of weights, the encoders too (the authors' code)",
            ),
            "force_paths": (0, "1: every path on in every round, no routing (FedAvg on the modular network)"),
            "start_apart": (
                0.0,
                "ours, a control: > 0 gives h at the switch a client-specific part (from the clients' mean router "
                "inputs) that sets their logits about this far apart",
            ),
        },
        # runs stored before these options: one router step per round, decisions not started apart
        later_options={"router_step": "round", "start_apart": 0.0},
    )
)
