"""KT-pFL (Zhang et al., "Parameterized Knowledge Transfer for Personalized Federated
Learning", NeurIPS 2021, Algorithm 1): clients keep models of their own (of any architecture)
and learn from each other through soft predictions on a public unlabeled set, each through a
personalised teacher that a learned knowledge-coefficient matrix c mixes from everyone's
predictions.

**Objective.**  With s(w, x̂) = softmax(z(w, x̂) / T) the soft prediction of a model on a public
sample x̂ at temperature T, client n's personalised loss is
    L_per,n(w_n) = L_n(w_n) + λ Σ_x̂ KL( Σ_m c_mn s(w_m, x̂) ‖ s(w_n, x̂) )              (eq. 2)
and KT-pFL minimises Σ_n D_n/D L_per,n(w_n) + ρ ‖c − 1/N‖²  over w and c               (eq. 4)
alternately: w by the clients, c by the server.

**Round (Algorithm 1, Figure 1).**  The server draws this round's public batch ξ_r (a two-step
round: every client answers the first message before any gets its second):
    server → client:  the indices of ξ_r in the public set
    client:           E epochs of SGD on its private data,  w_n ← w_n − η₁ ∇L_n(w_n; ξ_n)      (eq. 5)
    client → server:  s(w_n, ξ_r), |ξ_r| × C numbers (no weights cross the network)
    server → client:  its personalised soft prediction  t_n = Σ_m c_mn s(w_m, ξ_r)
    client:           R epochs of distillation on ξ_r,  w_n ← w_n − η₂ λ ∇KL(t_n ‖ s(w_n, ξ_r))  (eq. 6)
    server:           c ← c − η₃ λ Σ_n D_n/D ∇_c KL(t_n(c) ‖ s(w_n, ξ_r)) − 2η₃ρ(c − 1/N)      (eq. 7)
with t_n(c) from the soft predictions the clients sent this round (Figure 1: step ⑥ uses what
steps ②–③ uploaded; nothing else is sent).

Choices where the paper is silent or ambiguous (the chapter lists them):
  * c_mn is client m's weight in client n's teacher: column n of c mixes t_n (eq. 2; eq. 6's
    "m-th row" reads the transpose); c starts at 1/N.
  * After each eq. 7 step every column of c is projected onto the probability simplex, so that
    t_n is a distribution and the KL is defined (eq. 4 only pulls c towards 1/N; the authors' code
    softmaxes each row instead).  The ρ term is taken implicitly (a proximal step,
    c ← (c − η₃λ∇ + 2η₃ρ/N) / (1 + 2η₃ρ)): the same to first order in η₃, stable for any ρ, and
    ρ → ∞ keeps c at 1/N.
  * Eq. 7's data term sums the KL over the round's public batch, as eq. 2 writes it (Σ_x̂ ∈ D_r);
    the batch mean (option ``c_kl=mean``) would shrink it by |ξ_r| against ρ's term (with
    |ξ_r| = 1000 an earlier fill measured c within a few thousandths of 1/N).  η₃ sets how fast c moves; where
    it goes is the fixed point of the implicit step, λ∇ + 2ρ(c − 1/N) = 0 (before the projection).
  * Eq. 6 carries λ as eq. 2's gradient does (η₂λ∇KL), so λ = 0 leaves the private training alone:
    KT-pFL is then Local.  The distillation loss is the batch-mean KL at temperature T, without
    Hinton's T² factor (the paper writes none); it uses its own SGD (lr ``distill_lr``, default
    the run's; momentum the run's) over minibatches of ``distill_batch`` public images.
  * With client sampling the teacher mixes only the soft predictions of the round's clients
    (column n of c restricted to them and renormalised); eq. 7 updates those entries.
  * Clients of different architectures: ``models`` lists model names dealt round-robin by client
    id (``lenet,alexnet-small,resnet18,shufflenet_v2_x0_5`` ...); empty: every client the run's model.

**The paper's baselines that differ only in c** (§5.1), registered here as methods of their own:
``fedmd`` — every teacher the plain average of everyone's soft predictions (c ≡ 1/N, never
learned; Li & Wang's FedMD communicates the same consensus, see the chapter for what differs);
``sim-pfd`` (the paper's Sim-pFL) — c_mn ∝ the cosine similarity of s(w_m, ξ_r) and s(w_n, ξ_r),
recomputed every round, each column's smallest similarity subtracted first as in the authors' code
(option ``similarity``; the paper gives no formula); ``topk-pfd`` (TopK-pFL) — the same restricted, in every column, to the
``top_k`` most similar clients (the client itself included).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..errors import PflkitError
from ..federated import Client, Server
from . import Method, register

EPS = 1e-12
COEFFICIENTS = ("learned", "uniform", "cosine", "topk")


def soft_predictions(model, x: torch.Tensor, temperature: float, chunk: int = 1024) -> torch.Tensor:
    """s(w, x̂) = softmax(z / T) on the public images ``x`` (no gradient)."""
    model.eval()
    with torch.no_grad():
        out = [F.softmax(model(x[i : i + chunk]) / temperature, dim=1) for i in range(0, len(x), chunk)]
    return torch.cat(out) if out else x.new_zeros(0, 0)


def kl(p: torch.Tensor, q: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """KL(p ‖ q) of rows of probabilities (p the teacher, q the student), averaged over the rows
    (``mean``) or summed (``sum``: eq. 2's Σ_x̂)."""
    rows = (p * (torch.log(p.clamp_min(EPS)) - torch.log(q.clamp_min(EPS)))).sum(1)
    return rows.sum() if reduction == "sum" else rows.mean()


def teachers(c: torch.Tensor, soft: torch.Tensor) -> torch.Tensor:
    """t_n = Σ_m c_mn s_m for every n: (M × B × C) soft predictions, (M × M) c → (M × B × C)."""
    return torch.einsum("mn,mbc->nbc", c, soft)


def c_objective(c, soft, weights, reduction="sum") -> torch.Tensor:
    """Σ_n D_n/D Σ_x̂ KL(t_n(c, x̂) ‖ s_n(x̂)): the data term of eq. 7
    (λ outside) on the round's clients, summed over the public batch as
    eq. 2 writes it (``reduction="mean"``: averaged).  ``c``: (M × M)
    coefficients, ``soft``: (M × B × C) soft predictions, ``weights``:
    the M weights D_n/D."""
    t = teachers(c, soft)
    pairs = enumerate(weights)
    return sum(w * kl(t[n], soft[n], reduction) for n, w in pairs)


def project_columns(c: torch.Tensor) -> torch.Tensor:
    """Euclidean projection of every column of c onto the probability simplex."""
    u, _ = torch.sort(c, dim=0, descending=True)
    css = u.cumsum(0) - 1
    k = torch.arange(1, c.shape[0] + 1, dtype=c.dtype, device=c.device)[:, None]
    cond = u - css / k > 0
    rho = cond.to(c.dtype).cumsum(0).argmax(0, keepdim=True)  # the last index where cond holds
    theta = css.gather(0, rho) / (rho + 1).to(c.dtype)
    return (c - theta).clamp_min(0)


def similarity_weights(soft: torch.Tensor, top_k: int = 0, shift: bool = True, rule: str = "k") -> torch.Tensor:
    """Sim-pFL / TopK-pFL: column n ∝ the cosine similarity of every client's flattened soft
    predictions with client n's, kept to the ``top_k`` largest entries of the column when
    ``top_k`` > 0.  ``shift``: the column's smallest similarity is subtracted first (the authors'
    code), so that the weights spread out; at T = 10 the soft predictions are nearly flat and the
    plain cosines all lie near 1, which makes the plain weights almost uniform, i.e. FedMD's.
    Without ``shift`` negative similarities count 0.  ``rule="median"`` (TopK as the authors' code
    runs it): every client above the column's (N/2)-th smallest similarity (about N/2 of them),
    averaged uniformly."""
    flat = F.normalize(soft.reshape(len(soft), -1), dim=1)
    sim = (flat @ flat.T).clamp_min(0)  # sim[m, n] = cos(s_m, s_n)
    if shift:
        sim = sim - sim.min(0, keepdim=True).values
        flat_cols = sim.sum(0) <= EPS  # every client equally similar: the plain average
        sim[:, flat_cols] = 1.0
    if rule == "median":  # the authors' code: above the column's (N/2)-th smallest similarity, N/2 clients
        cut = sim.kthvalue(max(1, len(soft) // 2), dim=0, keepdim=True).values
        sim = (sim > cut).to(sim.dtype)
    elif 0 < top_k < len(soft):
        keep = sim.topk(top_k, dim=0).indices
        sim = torch.zeros_like(sim).scatter(0, keep, sim.gather(0, keep))
    return sim / sim.sum(0, keepdim=True).clamp_min(EPS)


def implicit_step(c, objective, lr, rho, n_clients) -> torch.Tensor:
    """Eq. 7 with the ρ term implicit:
    c ← (c − η₃∇objective(c) + 2η₃ρ/N) / (1 + 2η₃ρ),
    then every column projected onto the simplex.  ``objective`` maps c to
    the data term, λ already in it."""
    c = c.detach().clone().requires_grad_(True)
    grad = torch.autograd.grad(objective(c), c)[0]
    with torch.no_grad():
        step = c - lr * grad + 2 * lr * rho / n_clients
        new = step / (1 + 2 * lr * rho)
    return project_columns(new)


def c_step(c, soft, weights, lam, lr, rho, n_clients, reduction="sum"):
    """One eq. 7 step on the sub-matrix of the round's clients
    (``c``: M × M)."""

    def data_term(c):
        return lam * c_objective(c, soft, weights, reduction)

    return implicit_step(c, data_term, lr, rho, n_clients)


def distill_scale(opts: dict) -> float:
    """The distillation term's weight: λ, times T² with the option ``kd_scale="T2"`` (Hinton's scaling;
    the paper writes none)."""
    return opts["lam"] * (opts["T"] ** 2 if opts["kd_scale"] == "T2" else 1.0)


class KTpFLServer(Server):
    def __init__(self, model, cfg, opts, n_clients):
        super().__init__(model, cfg, opts, n_clients)
        check_options(opts)
        self.c = torch.full((n_clients, n_clients), 1.0 / n_clients, dtype=torch.float64)  # c_0 = 1/N
        self.batch = None  # this round's public batch ξ_r (indices)
        self.soft: dict[int, torch.Tensor] = {}  # s(w_m, ξ_r) of the round's clients

    def pre_message(self, cid, rnd):
        if self.batch is None or self.batch[0] != rnd:  # draw ξ_r once per round (seeded by the round)
            if self.n_public < 1:
                raise PflkitError("KT-pFL needs a public set: set public_images (--public-images) > 0")
            g = torch.Generator().manual_seed(int(self.cfg.seed) * 1_000_003 + rnd)
            size = min(self.opt["public_batch"] or self.n_public, self.n_public)
            self.batch = (rnd, torch.randperm(self.n_public, generator=g)[:size].sort().values.to(torch.int32))
            self.soft = {}
        return {"public_idx": self.batch[1]}

    def receive_request(self, cid, request, rnd):
        self.soft[cid] = request["soft"].double()

    def mixing(self, cid) -> tuple[list[int], torch.Tensor]:
        """The round's clients and column ``cid`` of c over them, renormalised (the teacher's weights)."""
        ids = sorted(self.soft)
        kind = self.opt["coefficients"]
        if kind in ("cosine", "topk"):  # Sim-pFL / TopK-pFL: from this round's soft predictions
            w = similarity_weights(
                torch.stack([self.soft[m] for m in ids]),
                self.opt["top_k"] if kind == "topk" else 0,
                shift=self.opt["similarity"] == "shifted",
                rule=self.opt["topk_rule"] if kind == "topk" else "k",
            )
            return ids, w[:, ids.index(cid)]
        col = self.c[ids, cid].clamp_min(0)
        total = col.sum()
        return ids, col / total if total > 0 else torch.full_like(col, 1.0 / len(ids))

    def teacher(self, cid) -> torch.Tensor:
        """Client ``cid``'s personalised soft prediction on this round's batch (eq. 2)."""
        ids, w = self.mixing(cid)
        return sum(wi * self.soft[m] for wi, m in zip(w, ids))  # t_n = Σ_m c_mn s(w_m, ξ_r)

    def message_for(self, cid, rnd):
        return {"teacher": self.teacher(cid).float()}

    def eval_message(self, cid):
        return {}

    def aggregate(self, uploads, rnd):
        ids = sorted(set(self.soft) & set(uploads))
        if not ids or self.opt["coefficients"] != "learned":  # only KT-pFL learns c
            return
        soft = torch.stack([self.soft[m] for m in ids])
        n = torch.tensor([float(uploads[m]["n"]) for m in ids], dtype=torch.float64)
        sub = self.c[ids][:, ids]
        sub = sub / sub.sum(0, keepdim=True).clamp_min(EPS)  # the teacher's weights this round
        lam, lr, rho = self.opt["lam"], self.opt["c_lr"], self.opt["rho"]
        new = c_step(sub, soft, n / n.sum(), lam, lr, rho, len(ids), self.opt["c_kl"])  # eq. 7
        mass = self.c[ids][:, ids].sum(0, keepdim=True)  # keep the weight the round's clients held in each column
        self.c[torch.tensor(ids)[:, None], torch.tensor(ids)[None, :]] = new * mass

    def state_dict(self):
        return {"c": self.c}

    def load_state_dict(self, state):
        self.c = state["c"].clone()


class KTpFLClient(Client):
    round_state = ("_loss", "_batch")  # the private epochs' loss and the round's public batch

    def request(self, message, rnd):
        """Private training (eq. 5), then the soft predictions on this round's public batch."""
        self._loss = self.sgd()  # E epochs (local_epochs / local_steps) on the private data
        self._batch = message["public_idx"].long()
        x = self.data.x_public[self._batch]
        return {"soft": soft_predictions(self.model, x, self.opt["T"]).float()}

    def train_round(self, message, rnd):
        """Distillation towards the personalised soft prediction (eq. 6): R
        epochs on ξ_r.  (λ, T, R and the optimiser: the options below.)"""
        if self.opt["lam"] > 0:
            x, teacher = self.data.x_public[self._batch], message["teacher"]
            model = self.model
            model.train()
            opt = self.distill_optimizer()
            size = self.opt["distill_batch"] or self.cfg.batch_size
            T, scale = self.opt["T"], distill_scale(self.opt)
            for _ in range(self.opt["distill_epochs"]):
                order = torch.randperm(len(x), generator=self.generator)
                order = order.to(x.device)
                for s in range(0, len(x), size):
                    idx = order[s : s + size]
                    student = F.softmax(model(x[idx]) / T, dim=1)
                    loss = scale * kl(teacher[idx], student)  # eq. 6
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
        return {"n": self.n_samples()}, self._loss

    def distill_optimizer(self):
        """The distillation step's optimiser: the run's, at the rate ``distill_lr`` (0: the run's lr)."""
        return self.optimizer(self.model.parameters(), lr=self.opt["distill_lr"] or None)


def _norm(grads) -> float:
    return float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads if g is not None)))


def diagnostics(server: KTpFLServer, clients: list[Client], sample: int = 512) -> dict | None:
    """Does the distillation channel act?  After a round, per client of the round: its own weight
    in its teacher (c_nn for KT-pFL, 1/N for FedMD), and the ratio of the distillation loss's
    gradient norm to the private loss's at its current weights: eq. 6's loss as the client runs it
    (λ, T, ``kd_scale``) on up to ``sample`` images of the round's public batch towards the teacher
    of this round's soft predictions, against the cross-entropy on its training split.  Measured in
    eval mode (no dropout; BatchNorm's running statistics), nothing in the model changes.  None
    before any soft prediction was sent."""
    if not server.soft:
        return None
    out: dict = {"self_weight": [], "grad_ratio": []}
    opts = server.opt
    scale = distill_scale(opts)
    for client in clients:
        if client.cid not in server.soft or getattr(client, "_batch", None) is None:
            continue
        ids, w = server.mixing(client.cid)
        out["self_weight"].append(round(float(w[ids.index(client.cid)]), 5))
        model, was = client.model, client.model.training
        model.eval()
        params = [p for p in model.parameters() if p.requires_grad]
        x, y = client.data.split("train")
        private = torch.autograd.grad(F.cross_entropy(model(x), y), params, allow_unused=True)
        ratio = 0.0
        if scale > 0:
            teacher = server.teacher(client.cid).float()[:sample]
            xp = client.data.x_public[client._batch[:sample]]
            loss = scale * kl(teacher, F.softmax(model(xp) / opts["T"], dim=1))
            ratio = _norm(torch.autograd.grad(loss, params, allow_unused=True)) / max(_norm(private), EPS)
        out["grad_ratio"].append(round(ratio, 5))
        model.train(was)
    return out


def client_arch(cid: int, n_clients: int, opts: dict) -> str | None:
    names = [m.strip() for m in str(opts["models"]).split(",") if m.strip()]
    return names[cid % len(names)] if names else None


def check_options(opts) -> None:
    for k in ("lam", "rho", "c_lr"):
        if opts[k] < 0:
            raise PflkitError(f"KT-pFL's {k} must be >= 0, got {opts[k]}")
    if opts["coefficients"] not in COEFFICIENTS:
        raise PflkitError(f"coefficients must be one of {', '.join(COEFFICIENTS)}, not {opts['coefficients']!r}")
    if opts["T"] <= 0:
        raise PflkitError(f"KT-pFL's temperature T must be > 0, got {opts['T']}")
    if opts.get("c_kl", "sum") not in ("sum", "mean"):
        raise PflkitError(f"c_kl must be sum or mean, not {opts['c_kl']!r}")
    if opts["kd_scale"] not in ("1", "T2"):
        raise PflkitError(f"kd_scale must be 1 or T2, not {opts['kd_scale']!r}")
    if opts["topk_rule"] not in ("k", "median"):
        raise PflkitError(f"topk_rule must be k or median, not {opts['topk_rule']!r}")
    if opts["similarity"] not in ("shifted", "plain"):
        raise PflkitError(f"similarity must be shifted or plain, not {opts['similarity']!r}")


OPTIONS = {
    "lam": (1.0, "λ: weight of the distillation term (eqs. 2, 6, 7)"),
    "T": (10.0, "softmax temperature of the soft predictions (the authors' code: 10)"),
    "rho": (1.0, "ρ: pull of c towards 1/N (eq. 4)"),
    "c_lr": (0.1, "η₃: learning rate of c (eq. 7)"),
    "coefficients": ("learned", "c: learned (KT-pFL), uniform (FedMD), cosine (Sim-pFL) or topk (TopK-pFL)"),
    "top_k": (5, "TopK-pFL: clients per teacher (the paper: 5)"),
    "similarity": (
        "shifted",
        "Sim-/TopK-pFL weights: shifted (each column's smallest cosine subtracted, the authors' code) or plain",
    ),
    "topk_rule": (
        "k",
        "TopK-pFL's teachers: k (the top_k most similar, weighted by similarity) or median (the authors' code: the "
        "clients above the median similarity, about N/2, averaged uniformly)",
    ),
    "distill_epochs": (1, "R: epochs of distillation on the round's public batch"),
    "kd_scale": (
        "1",
        "the distillation loss times λ (1) or times λ T² (T2: Hinton's scaling, the gradients' size kept as T grows)",
    ),
    "distill_lr": (0.0, "η₂: learning rate of the distillation (0: the run's lr)"),
    "distill_batch": (0, "minibatch size of the distillation (0: the run's batch size)"),
    "public_batch": (0, "public images per round, |ξ_r| (0: the whole public set)"),
    "models": ("", "heterogeneous clients: model names dealt round-robin (empty: the run's model)"),
}


def variant(name: str, summary: str, paper: str, coefficients: str) -> Method:
    opts = dict(OPTIONS)
    opts["coefficients"] = (coefficients, OPTIONS["coefficients"][1])
    if coefficients == "learned":  # only KT-pFL learns c
        opts["c_kl"] = (
            "sum",
            "eq. 7's KL over the public batch: sum (eq. 2's Σ_x̂; the pull of ρ is then on the paper's scale) or mean",
        )
    later = {"kd_scale": "1", "topk_rule": "k"}  # options added after runs were stored: their values then
    return register(Method(name, KTpFLServer, KTpFLClient, summary, paper, options=opts, client_arch=client_arch,
                           later_options=later))  # fmt: skip


variant("ktpfl", "Personalised teachers mixed from everyone's soft predictions on public data by a learned matrix c",
        "Zhang et al. 2021", "learned")  # fmt: skip
variant("fedmd", "Distillation towards the average of everyone's soft predictions on public data (c = 1/N)",
        "Li and Wang 2019, as a KT-pFL baseline", "uniform")  # fmt: skip
variant("sim-pfd", "Teachers mixed by the cosine similarity of the clients' soft predictions (Sim-pFL)",
        "Zhang et al. 2021, §5.1", "cosine")  # fmt: skip
variant("topk-pfd", "Teachers from the top-K most similar clients' soft predictions (TopK-pFL)",
        "Zhang et al. 2021, §5.1", "topk")  # fmt: skip
