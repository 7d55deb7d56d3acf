"""FedDF (Lin, Kong, Stich and Jaggi, "Ensemble Distillation for Robust Model Fusion in
Federated Learning", NeurIPS 2020, Algorithm 1), as KT-pFL's paper uses it for heterogeneous
clients, and pFedDF, its personalised version.

The server keeps one model per architecture (a *prototype*).  Round t, for each sampled client:
    server → client:  the prototype of the client's architecture
    client:           local SGD on its private data (the run's epochs or steps)
    client → server:  its weights and n
    server:  for every prototype g:  x_g ← Σ_{k ∈ g} n_k x_k / Σ_{k ∈ g} n_k     (FedAvg within g)
             then ensemble distillation on the public unlabeled set: ``server_steps`` steps of
             Adam (lr ``server_lr``) on KL( mean_k softmax(f_k(x̂)) ‖ softmax(f_g(x̂)) ) over
             minibatches x̂ of ``distill_batch`` public images, the teacher averaging the
             softmax outputs of *every* model received this round, whatever its architecture.
A client is judged by its architecture's fused prototype (FedDF is not personalised).

**pFedDF** (KT-pFL's §5.1 footnote): the fused prototypes are each client's starting point, and
the client fine-tunes it on its private data for ``ft_epochs`` epochs before it is judged (the
fine-tuned copy is discarded, as in ``fedavg-ft``).  The paper fine-tunes after FedDF's last
round; we judge every evaluation that way, so the curve shows what a client would get at any round.

Choices where the paper is silent: the teacher is the mean of the received models' softmax
outputs (FedDF's AVGLOGITS variant averages logits; the KT-pFL paper does not say which); the
distillation runs a fixed number of steps (``server_patience`` > 0: FedDF's early stopping, judged
label-free by the KL to the ensemble on a held-out share of the public set, the best model kept); the
prototypes start from their own initialisation (seeded by the run seed and the architecture's
position).  Clients of different architectures are dealt round-robin from ``models``.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from ..errors import PflkitError
from ..federated import Client, Server, derive_seed, snapshot, weighted_average
from ..models import build_model
from . import Method, register

TEACHER_CHUNK = 512  # public images per forward pass when the teacher's predictions are taken
HELD_OUT = 0.1  # early stopping: the share of the public set held out to judge the distillation
CHECK_EVERY = 10  # early stopping: server steps between two looks at the held-out KL


def architectures(opts) -> list[str]:
    return [m.strip() for m in str(opts["models"]).split(",") if m.strip()]


def client_arch(cid: int, n_clients: int, opts: dict) -> str | None:
    names = architectures(opts)
    return names[cid % len(names)] if names else None


class FedDFServer(Server):
    def __init__(self, model, cfg, opts, n_clients):
        super().__init__(model, cfg, opts, n_clients)
        self.n_clients = n_clients
        self.names = list(dict.fromkeys(architectures(opts)))  # distinct architectures, in order
        # architecture position g -> its prototype (the template when homogeneous); built on first
        # use, since its input shape comes with the public set
        self.prototypes = {g: None for g in range(len(self.names))} if self.names else {0: model}

    def group(self, cid: int) -> int:
        name = client_arch(cid, self.n_clients, self.opt)
        return 0 if name is None else self.names.index(name)

    def prototype(self, g: int):
        if self.prototypes[g] is None:
            if self.x_public is None or len(self.x_public) == 0:
                raise PflkitError("FedDF needs a public set: set public_images (--public-images) > 0")
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(derive_seed(self.cfg.seed, 6, g))
                self.prototypes[g] = build_model(
                    self.names[g], tuple(self.x_public.shape[1:]), self.model.head.out_features
                ).to(self.x_public.device)
        return self.prototypes[g]

    def message_for(self, cid, rnd):
        return {"weights": snapshot(self.prototype(self.group(cid)))}

    def eval_message(self, cid):
        return self.message_for(cid, -1)

    def aggregate(self, uploads, rnd):
        if not uploads:
            return
        if self.x_public is None or len(self.x_public) == 0:
            raise PflkitError("FedDF needs a public set: set public_images (--public-images) > 0")
        target = self.teacher(uploads)  # the ensemble of every model received this round
        for g in sorted({self.group(c) for c in uploads}):
            members = [c for c in uploads if self.group(c) == g]
            fused = self.prototype(g)
            fused.load_state_dict(  # FedAvg within the architecture
                weighted_average([uploads[c]["weights"] for c in members], [uploads[c]["n"] for c in members])
            )
            self.distill(fused, target, rnd, g)

    def teacher(self, uploads) -> torch.Tensor:
        """The ensemble teacher on the whole public set: the mean over every received model, of
        every architecture, of its softmax output (computed once a round: the teachers do not
        change while the prototypes are distilled)."""
        total = None
        for cid, up in uploads.items():
            m = self.scratch(cid)
            m.load_state_dict(up["weights"])
            m.eval()
            with torch.no_grad():
                p = torch.cat([F.softmax(m(x), dim=1) for x in self.x_public.split(TEACHER_CHUNK)])
            total = p if total is None else total + p
        return total / len(uploads)

    def scratch(self, cid):
        """A model of client ``cid``'s architecture to load an upload into (one per architecture,
        reused: each upload's predictions are taken before the next one is loaded)."""
        if not hasattr(self, "_scratch"):
            self._scratch = {}
        g = self.group(cid)
        if g not in self._scratch:
            self._scratch[g] = copy.deepcopy(self.prototype(g))
        return self._scratch[g]

    def distill(self, fused, target, rnd, g):
        """Ensemble distillation into ``fused`` on the public set; ``target`` holds the teacher's
        probabilities for every public image."""
        x_pub = self.x_public
        size = self.opt["distill_batch"] or self.cfg.batch_size
        gen = torch.Generator().manual_seed(derive_seed(self.cfg.seed, rnd, 7, g))
        opt = torch.optim.Adam(fused.parameters(), lr=self.opt["server_lr"])
        pool, held = torch.arange(len(x_pub)), None
        patience = self.opt["server_patience"]
        if patience:  # FedDF's early stopping: a held-out share of the public set, label-free (KL to the ensemble)
            order = torch.randperm(len(x_pub), generator=gen)
            n_held = max(1, int(HELD_OUT * len(x_pub)))
            held, pool = order[:n_held].to(x_pub.device), order[n_held:]
            best, best_state, waited = self.held_out_kl(fused, target, held), snapshot(fused), 0
        fused.train()
        for step in range(self.opt["server_steps"]):
            idx = pool[torch.randint(len(pool), (min(size, len(pool)),), generator=gen)].to(x_pub.device)
            loss = F.kl_div(F.log_softmax(fused(x_pub[idx]), dim=1), target[idx], reduction="batchmean")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if patience and (step + 1) % CHECK_EVERY == 0:
                now = self.held_out_kl(fused, target, held)
                if now < best:
                    best, best_state, waited = now, snapshot(fused), 0
                else:
                    waited += 1
                    if waited >= patience:
                        break
                fused.train()
        if patience:  # keep the best distilled model seen (the fused average itself if none improved on it)
            fused.load_state_dict(best_state)

    def held_out_kl(self, fused, target, held) -> float:
        """KL(ensemble ‖ fused) on the held-out public images: the early-stopping criterion."""
        fused.eval()
        with torch.no_grad():
            logp = torch.cat([F.log_softmax(fused(x), dim=1) for x in self.x_public[held].split(TEACHER_CHUNK)])
            return float(F.kl_div(logp, target[held], reduction="batchmean"))

    def state_dict(self):
        return {"prototypes": {str(g): snapshot(self.prototype(g)) for g in self.prototypes}}

    def load_state_dict(self, state):
        for g, weights in state["prototypes"].items():
            self.prototype(int(g)).load_state_dict(weights)


class FedDFClient(Client):
    def train_round(self, message, rnd):
        self.model.load_state_dict(message["weights"])
        loss = self.sgd()
        return {"weights": snapshot(self.model), "n": self.n_samples()}, loss

    def eval_model(self, message):
        self.model.load_state_dict(message["weights"])
        if self.opt["ft_epochs"]:  # pFedDF: fine-tune the fused prototype on the private data first
            return self.fine_tuned(self.model, self.opt["ft_epochs"])
        return self.model


OPTIONS = {
    "models": ("", "heterogeneous clients: model names dealt round-robin (empty: the run's model)"),
    "server_steps": (100, "ensemble-distillation steps on the server per round"),
    "server_lr": (1e-3, "Adam learning rate of the server's distillation (FedDF: 1e-3)"),
    "distill_batch": (0, "public images per distillation step (0: the run's batch size)"),
    "ft_epochs": (0, "epochs of private fine-tuning before a client is judged (pFedDF; 0: FedDF)"),
    "server_patience": (
        0,
        "FedDF's early stopping: 0 off (always server_steps steps); n: every 10 steps the KL to the ensemble on a "
        "held-out 10 % of the public set, stop after n looks without improvement and keep the best model",
    ),
}
LATER = {"server_patience": 0}  # options added after runs were stored: their values then
register(Method("feddf", FedDFServer, FedDFClient, "Per-architecture FedAvg, then ensemble distillation on public data",
                "Lin et al. 2020", options=OPTIONS, client_arch=client_arch, later_options=LATER))  # fmt: skip
register(
    Method(
        "pfeddf", FedDFServer, FedDFClient, "FedDF, each client judged after fine-tuning the fused model on its data",
        "Zhang et al. 2021, §5.1", options=OPTIONS | {"ft_epochs": (1, OPTIONS["ft_epochs"][1])}, client_arch=client_arch,
        later_options=LATER,
    )
)  # fmt: skip
