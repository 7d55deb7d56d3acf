"""pFedHN (Shamsian et al., 2021, Algorithm 1): personalised federated hypernetworks.

The server holds a hypernetwork h(·; φ) and one embedding v_i per client; client i's
personal model is generated, never averaged:
    θ_i = h(v_i; φ)                                              (§3.2)
Round, for each sampled client i:
    server → client:  θ_i                                       (only |θ_i| bytes go down)
    client:           θ̃_i ← K steps of SGD on L_i from θ_i
    client → server:  Δθ_i = θ̃_i − θ_i                          (only |θ_i| bytes go up)
    server:           φ  ← φ  + α (∇_φ θ_i)ᵀ Δθ_i                (Alg. 1, update of φ)
                      v_i ← v_i + α (∇_{v_i} θ_i)ᵀ Δθ_i          (Alg. 1, update of v_i)
Δθ_i is a descent direction, so the step moves h(v_i; φ) toward θ̃_i: it is gradient
descent on the surrogate  ½‖θ̃_i − h(v_i; φ)‖²  (θ̃_i held fixed), whose gradient is
−(∇θ_i)ᵀ Δθ_i.  (Algorithm 1 writes the step with a minus sign and Δθ, which reads as
ascent; the authors' code feeds θ_i − θ̃_i to the vector–Jacobian product, i.e. the sign
used here.)  With K = 1 and plain SGD, Δθ_i = −η ∇_θ L_i, and the server's gradient is
η ∇_φ L_i(h(v_i; φ)): exactly the chain rule of eq. 3.

pFedHN-PC (§3.3, eq. 4): h generates only the feature extractor (``body.``); each client
keeps its personal classifier ω_i (``head.``), trained locally together with the body.

Computational budgets (§5.2, Table 2): with ``widths`` = "S,M,L" one hypernetwork
(shared embeddings and MLP) has one set of output heads per LeNet width; clients are split
into equal consecutive groups by a public rule (:func:`client_width`).

Novel clients (§5.3): :func:`train_novel_embedding` freezes φ and learns only v_new.

Client embeddings (App. C.5, option ``embedding``): ``trainable`` (the default), ``random``
(frozen at the random initialisation) or ``proportions``: frozen at the client's class
proportions p̂_i, p̂_{i,c} = n_{i,c} / Σ_j n_{j,c} (§5.3's normalisation), which the server
computes from the label histograms every client uploads once before the first round.
``shared`` is the control of the mechanism check: one trainable embedding for every client, so
h generates one model for all (a global model trained through the hypernetwork).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm as _spectral_norm

from ..errors import PflkitError
from ..federated import Client, Server, derive_seed, nbytes, snapshot
from ..models import build_model
from . import Method, register

DEFAULT = "default"  # the output-head group of clients without a width
EMBEDDINGS = ("trainable", "random", "proportions", "shared")  # App. C.5; shared: the control


# ----------------------------------------------------------------------------- the hypernetwork


class HyperNetwork(nn.Module):
    """h(v_i; φ): embedding → MLP → one linear head per tensor of the target network.

    ``targets`` maps a group (a model width, or ``"default"``) to that target network's
    ``[(name, shape), ...]``; the embeddings and the MLP are shared by all groups.
    The MLP follows the authors' layout: Linear(k, H), then ``layers`` × [ReLU, Linear(H, H)];
    the heads read its last (not rectified) output.
    """

    def __init__(self, n_clients, embed_dim, targets, hidden=100, layers=3, spectral=0):
        super().__init__()
        sn = _spectral_norm if spectral else (lambda m: m)  # C.3: spectral norm on every layer ...
        sn_head = sn if spectral == 1 else (lambda m: m)  # ... or (2) on the MLP only, sparing the heads
        self.embeddings = nn.Embedding(n_clients, embed_dim)  # v_1..v_n, N(0, 1) initialised
        body: list[nn.Module] = [sn(nn.Linear(embed_dim, hidden))]
        for _ in range(layers):
            body += [nn.ReLU(), sn(nn.Linear(hidden, hidden))]
        self.mlp = nn.Sequential(*body)
        self.targets = {g: [(k, torch.Size(s)) for k, s in t] for g, t in targets.items()}
        self.heads = nn.ModuleDict(
            {g: nn.ModuleList(sn_head(nn.Linear(hidden, s.numel())) for _, s in t) for g, t in self.targets.items()}
        )

    def forward(self, cid: int, group: str = DEFAULT) -> dict[str, torch.Tensor]:
        """θ_i = h(v_i; φ) as a state dict of the group's target network."""
        features = self.mlp(self.embeddings.weight[cid])
        return {k: head(features).view(s) for (k, s), head in zip(self.targets[group], self.heads[group])}


def parse_widths(spec: str) -> list[str]:
    return [w.strip() for w in str(spec or "").split(",") if w.strip()]


def client_width(cid: int, n_clients: int, opts: dict) -> str | None:
    """Public rule for Table 2: client i has widths[⌊i · |widths| / n⌋] (equal consecutive
    groups), or the run's width when ``widths`` is empty.  The server knows it as it knows
    the architecture: it is configuration, not client data."""
    widths = parse_widths(opts["widths"])
    return widths[cid * len(widths) // n_clients] if widths else None


def _lenet_input_shape(template: nn.Module) -> tuple[int, int, int]:
    """An input shape giving ``template`` (a LeNet) its parameter shapes.  LeNet's shapes
    depend on the image only through the flattened size 2n·s², so a square s recovers it."""
    conv = next(m for m in template.body if isinstance(m, nn.Conv2d))
    fc = next(m for m in template.body if isinstance(m, nn.Linear))
    s = math.isqrt(fc.in_features // (2 * conv.out_channels))
    return (conv.in_channels, 4 * s + 12, 4 * s + 12)  # conv5, pool2, conv5, pool2 → s × s


# ----------------------------------------------------------------------------- server


class PFedHNServer(Server):
    generated_prefix = ""  # the target tensors h generates ("body." for pFedHN-PC)

    def __init__(self, model, cfg, opts, n_clients):
        super().__init__(model, cfg, opts, n_clients)
        if opts["hn_optimizer"] not in ("sgd", "adam"):
            raise PflkitError(f"hn_optimizer must be sgd or adam, not {opts['hn_optimizer']!r}")
        self.widths = parse_widths(opts["widths"])
        groups = {g: self.target_network(g) for g in (self.widths or [DEFAULT])}
        targets = {
            g: [(k, p.shape) for k, p in net.named_parameters() if k.startswith(self.generated_prefix)]
            for g, net in groups.items()
        }
        if opts["spectral_norm"] not in (0, 1, 2):
            raise PflkitError(f"spectral_norm must be 0, 1 or 2, not {opts['spectral_norm']!r}")
        if opts["embedding"] not in EMBEDDINGS:
            raise PflkitError(f"embedding must be one of {', '.join(EMBEDDINGS)}, not {opts['embedding']!r}")
        embed_dim = opts["embed_dim"] or int(1 + n_clients / 4)  # ⌊1 + n/4⌋ (§5)
        if opts["embedding"] == "proportions":  # v_i = p̂_i: one coordinate per class
            embed_dim = model.head.out_features
        device = next(model.parameters()).device
        self.shared = opts["embedding"] == "shared"  # the control: v_i = v for every client
        self.hn = HyperNetwork(
            1 if self.shared else n_clients,
            embed_dim,
            targets,
            opts["hn_hidden"],
            opts["hn_layers"],
            int(opts["spectral_norm"]),
        ).to(device)
        self.hn.eval()  # spectral norm: power iterations only in refresh_spectral_norm()
        emb = self.hn.embeddings.weight
        if opts["embedding"] in ("random", "proportions"):  # C.5: v_i fixed (random, or p̂_i after setup())
            emb.requires_grad_(False)
        self.phi = [p for n, p in self.hn.named_parameters() if not n.startswith("embeddings.")]
        self.params = self.phi + ([emb] if emb.requires_grad else [])
        self.embed_lr = opts["embed_lr"] or opts["hn_lr"]
        groups_ = [{"params": self.phi}]
        if emb.requires_grad:
            groups_.append({"params": [emb], "lr": self.embed_lr})
        lr, wd = opts["hn_lr"], opts["hn_wd"]
        if opts["hn_optimizer"] == "sgd":
            self.optimizer = torch.optim.SGD(groups_, lr=lr, momentum=0.9, weight_decay=wd)
        else:
            self.optimizer = torch.optim.Adam(groups_, lr=lr, weight_decay=wd)

    def target_network(self, group: str) -> nn.Module:
        """The architecture of a group's clients (the run's model, or LeNet at that width)."""
        if group == DEFAULT:
            return self.model
        if self.cfg.model != "lenet":
            raise PflkitError("the widths option (computational budgets) needs model lenet")
        n_classes = self.model.head.out_features
        return build_model("lenet", _lenet_input_shape(self.model), n_classes, group)

    def setup(self, uploads):
        """``embedding=proportions``: v_i ← p̂_i from the clients' label histograms n_{i,c}."""
        if self.opt["embedding"] != "proportions":
            return
        counts = torch.zeros_like(self.hn.embeddings.weight)
        for cid, up in uploads.items():
            counts[cid] = up["label_counts"].to(counts)
        with torch.no_grad():  # p̂_{i,c} = n_{i,c} / Σ_j n_{j,c}
            self.hn.embeddings.weight.copy_(counts / counts.sum(0, keepdim=True).clamp_min(1))

    def group(self, cid: int) -> str:
        return client_width(cid, self.n_clients, self.opt) or DEFAULT

    def theta(self, cid: int) -> dict[str, torch.Tensor]:
        """θ_i = h(v_i; φ), with its graph to φ and v_i."""
        return self.hn(0 if self.shared else cid, self.group(cid))

    def message_for(self, cid, rnd):
        with torch.no_grad():
            return {"weights": self.theta(cid)}

    def gradients(self, uploads, params=None) -> list[torch.Tensor]:
        """The server's gradient for ``params`` (default: φ and the embeddings).

        Per client: g_i = −(∇ θ_i)ᵀ Δθ_i, the gradient of ½‖θ̃_i − h(v_i; φ)‖²
        (θ̃_i fixed).  φ is shared: it gets the mean over the round's clients.
        v_i gets only its own client's term, which it receives in full (as in
        Algorithm 1, one client per step).
        """
        params = self.params if params is None else params
        total = [torch.zeros_like(p) for p in params]
        for cid, up in uploads.items():
            theta = self.theta(cid)
            grads = torch.autograd.grad(
                list(theta.values()),
                params,
                grad_outputs=[-up["delta"][k] for k in theta],
                allow_unused=True,
            )
            for t, g in zip(total, grads):
                if g is not None:
                    t += g
        shared = {id(p) for p in self.phi}
        n = len(uploads)
        return [t / n if id(p) in shared else t for p, t in zip(params, total)]

    def aggregate(self, uploads, rnd):
        if not uploads:
            return
        for p, g in zip(self.params, self.gradients(uploads)):
            p.grad = g
        if self.opt["hn_clip"]:  # as the authors (50)
            nn.utils.clip_grad_norm_(self.params, self.opt["hn_clip"])
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.refresh_spectral_norm()

    def refresh_spectral_norm(self) -> None:
        """One power iteration per spectrally normalised layer, after φ moved (kept out of
        the forward passes so that θ_i recomputed in :meth:`gradients` is the θ_i sent)."""
        if not self.opt["spectral_norm"]:
            return
        self.hn.train()
        with torch.no_grad():
            for m in self.hn.modules():
                if isinstance(m, nn.Linear):
                    m.weight  # noqa: B018  (the parametrisation updates its u, v on access)
        self.hn.eval()

    def state_dict(self):
        return {"hn": self.hn.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state):
        self.hn.load_state_dict(state["hn"])
        self.optimizer.load_state_dict(state["optimizer"])


# ----------------------------------------------------------------------------- client


class PFedHNClient(Client):
    def setup_message(self):
        """``embedding=proportions``: upload the label histogram once (10 integers for FMNIST)."""
        if self.opt["embedding"] != "proportions":
            return None
        n_classes = self.model.head.out_features
        return {"label_counts": torch.bincount(self.data.split("train")[1], minlength=n_classes).cpu()}

    def receive(self, message) -> dict[str, torch.Tensor]:
        """Load θ_i; with pFedHN-PC θ_i is the body only and the personal head stays."""
        theta = message["weights"]
        missing, unexpected = self.model.load_state_dict(theta, strict=False)
        if unexpected:
            raise PflkitError(f"client {self.cid}: the server sent tensors its model lacks: {unexpected}")
        return theta

    def train_round(self, message, rnd):
        theta = self.receive(message)  # θ̃_i ← θ_i
        # K local steps (pFedHN-PC: body and personal head together)
        loss = self.sgd()
        tilde = snapshot(self.model)
        delta = {k: tilde[k] - theta[k] for k in theta}  # Δθ_i = θ̃_i − θ_i
        return {"delta": delta}, loss

    def eval_model(self, message):
        self.receive(message)
        return self.model


class PFedHNPCServer(PFedHNServer):
    generated_prefix = "body."  # h generates the feature extractor θ_i; ω_i stays on the client


# ----------------------------------------------------------------------------- novel clients


def train_novel_embedding(server: PFedHNServer, client: Client, steps: int, lr: float | None = None) -> dict:
    """§5.3: fit a new client's embedding v_new with φ frozen, by the training protocol
    (θ_new = h(v_new; φ) down, Δθ up, v_new ← v_new + lr (∇_v θ_new)ᵀ Δθ).  ``steps`` is
    the number of exchanges; ``lr`` defaults to the embeddings' learning rate.  Returns the
    clients' training losses and the bytes exchanged."""
    lr = server.embed_lr if lr is None else lr
    emb, cid = server.hn.embeddings.weight, client.cid
    trainable = emb.requires_grad
    emb.requires_grad_(True)  # also with a fixed embedding: v_new is what is learned here
    out = {"losses": [], "bytes_down": 0, "bytes_up": 0}
    try:
        for step in range(steps):
            msg = server.message_for(cid, step)
            client.generator.manual_seed(derive_seed(server.cfg.seed, step, 5, cid))
            reply, loss = client.train_round(msg, step)
            out["losses"].append(loss)
            out["bytes_down"] += nbytes(msg)
            out["bytes_up"] += nbytes(reply)
            (g,) = server.gradients({cid: reply}, params=[emb])  # no gradient reaches φ
            with torch.no_grad():
                emb[cid] -= lr * g[cid]
    finally:
        emb.requires_grad_(trainable)
    return out


# ----------------------------------------------------------------------------- registration


# the authors' client optimiser and local steps (their code; the paper is silent): SGD, lr 5e-3,
# momentum 0.9, weight decay 5e-5, batch 64, K = 50; one client per round (Algorithm 1)
AUTHORS_TRAINING = {
    "lr": 5e-3, "momentum": 0.9, "weight_decay": 5e-5, "batch_size": 64, "local_steps": 50,
    "grad_clip": 50.0,  # the authors' clients clip each step's gradient at this norm
    "clients_per_round": 1,  # Algorithm 1: one client per hypernetwork step
}  # fmt: skip


def _options(hn_lr: float) -> dict[str, tuple]:
    return {
        "embed_dim": (0, "client embedding dimension (0: ⌊1 + n/4⌋, n = number of clients)"),
        "hn_hidden": (100, "units per hidden layer of the hypernetwork"),
        "hn_layers": (3, "hidden layers of the hypernetwork (Linear(k,H) then this many ReLU-Linear(H,H))"),
        "hn_lr": (hn_lr, "hypernetwork learning rate α"),
        "embed_lr": (0.0, "learning rate of the embeddings (0: hn_lr)"),
        "hn_optimizer": ("sgd", "sgd (momentum 0.9) or adam"),
        "hn_wd": (1e-3, "weight decay of the hypernetwork optimizer"),
        "hn_clip": (50.0, "clip the server's gradient norm (0: no clipping)"),
        "spectral_norm": (0, "spectral normalisation (App. C.3): 1 on every layer, 2 on the MLP but not the heads"),
        "embedding": (
            "trainable",
            "client embeddings: trainable, random (frozen), proportions (frozen p̂_i, C.5) "
            "or shared (one for all clients: the control)",
        ),
        "widths": ("", "LeNet widths of client groups, e.g. S,M,L (Table 2); empty: the run's width"),
    }


register(
    Method(
        "pfedhn",
        PFedHNServer,
        PFedHNClient,
        "A server hypernetwork generates each client's model from its embedding",
        "Shamsian et al. 2021",
        options=_options(1e-2),  # the authors' defaults: α = 1e-2 (pFedHN), 5e-2 (pFedHN-PC)
        client_width=client_width,
        training=AUTHORS_TRAINING,
    )
)
register(
    Method(
        "pfedhn-pc",
        PFedHNPCServer,
        PFedHNClient,
        "pFedHN generating the feature extractor; personal classifier on each client",
        "Shamsian et al. 2021",
        options=_options(5e-2),
        client_width=client_width,
        training=AUTHORS_TRAINING,
    )
)
