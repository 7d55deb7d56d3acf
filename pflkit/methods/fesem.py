"""FeSEM (Long et al., 2023, "Multi-center federated learning", Algorithms 1 and 2):
federated stochastic EM over K centres of the clients' weights.

Objective (eq. 5), over local models W_i, assignments r_i^(k) ∈ {0, 1} and centres W̃^(k):
    Σ_i α_i L_s(W_i) + λ/m Σ_k Σ_i r_i^(k) Dist(W_i, W̃^(k)),       Dist = ‖W_i − W̃^(k)‖² (eq. 3)
Initialisation (Alg. 1 line 1, §6 "Training settings"): every client trains its initial local
    model W_i from the common initial weights (``init_steps`` minibatch steps of SGD, no
    penalty) and uploads it once, before round 1 (the setup handshake; its bytes are counted).
    The server runs k-means on {W_i} 20 times (k-means++ seeding) and keeps the run of least
    intra-cluster distance (inertia): that gives r_i^(k), and eq. 9 on the W_i gives W̃^(k).
Round t (Alg. 1's loop; the engine calls the server's step after the clients'):
    server → client i:  W̃^(k) of its cluster k                        (Alg. 1 line 10)
    client (Alg. 2):    W_i ← W̃^(k); N steps of SGD on
                        L_s(W_i) + λ/m · Dist(W_i, W̃^(k))               (eq. 7)
    client → server:    W_i (and n_i)
    E-step:             r_i^(k) = 1 if k = argmin_j Dist(W_i, W̃^(j))   (eq. 8)
    M-step:             W̃^(k) = Σ_i r_i^(k) W_i / Σ_i r_i^(k)          (eq. 9)
Clients are evaluated with the centre of their cluster.

``local_start``: §4's update text and Alg. 2 restart every client from its centre each round
(``centre``, the default).  Eq. (4.2)'s alternating optimisation can also be read with W_i
persisting between rounds: the client optimises its own W_i from its latest value, pulled towards
its centre by the distance term (``own``).  :func:`assignment_margins` says how far each client is
from moving: its distance to the second-nearest centre over its distance to the nearest.

Choices the paper leaves open, and how they are made here:
* Dist is the squared Euclidean distance of the parameters, over the whole model
  (``distance=all``) or the last layer only (``distance=last``: ``head.weight`` and
  ``head.bias``; the authors' code clusters on the last dense kernel).  The same Dist is
  used in the E-step, in k-means and in the local penalty.
* The initial local models all take the same number of steps (not epochs): with epochs,
  clients with more data move farther from the common start and k-means groups them by size.
* Eq. 7 weights the loss by α_i = n_i/n; the local update here minimises the plain mean
  batch loss plus λ/m · Dist (as every kit method takes the mean loss), m = ``cfg.clients``.
  ``penalty_weight="lambda/(m alpha_i)"`` divides eq. 7 by α_i instead (the server sends α_i,
  from the sizes the clients reported); the authors' code has no such term (``lam=0``).
  Eq. 7 divided by α_i would weight Dist by λ/(m α_i), i.e. by λ for equal client sizes: the
  λ here is m times weaker than that reading of the paper's.
* The initial local models' steps are a head start FedAvg does not get: compare at equal
  rounds with FeSEM(K = 1) too, which has the same head start and one centre, and with
  ``em=fixed-random, head_start=true`` (random clusters, the same head start).
* Eq. 9 is an unweighted mean (the paper, §6: "our objective ... does not take into account
  the number of samples per device").  ``size_weighted=true`` weights by n_i (FedAvg's
  weights); with K = 1 and λ = 0 FeSEM's round is then exactly FedAvg's.  The authors' code
  is *not* size-weighted in effect: its weights are ``len(data)`` of a client's data tuple,
  which is 2 for every client, so its M-step is an unweighted mean, like eq. 9.
* With client sampling (the paper assumes full participation, §8) the E- and M-steps use
  this round's clients: the others keep their assignment, and a centre none of whose clients
  reported (or that the E-step left empty) keeps its weights.

``em=fixed-random`` is what the authors' committed configuration does instead (its centre
update period, 150 rounds, exceeds its 60 rounds): clients get a fixed cluster from k-means
over small random vectors U(−0.01, 0.01) (one per client, of the last layer's kernel size),
every centre starts from the common initial weights, no setup upload, and only the M-step
runs, every round.  ``head_start=true`` (fixed-random only; ``em=paper`` always does it)
gives these fixed clusters the paper's head start: the clients train and upload their
initial local models in the setup handshake as in paper mode, and each fixed cluster's first
centre is the M-step (eq. 9) over its members' initial models, so that fixed-random and the
paper's EM can be compared with and without the initial local models' extra training.

:func:`pflkit.tuning.choose_k` is §5.2's heuristic for K: a few rounds on a sample of clients per K.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from ..errors import PflkitError
from ..federated import Client, Server, derive_seed, evaluate, snapshot, weighted_average
from . import Method, register

DISTANCES = {"all": "", "last": "head."}  # distance option -> prefix of the parameters compared
EM_MODES = ("paper", "fixed-random")
LOCAL_STARTS = ("centre", "own")  # where a client's round starts: its centre (Alg. 2) or its own W_i
KMEANS_RESTARTS = 20  # §6: "pure clustering 20 times with randomized initialization"


# ----------------------------------------------------------------------------- E- and M-steps


def points(states, keys) -> torch.Tensor:
    """One row per state: its parameters named in ``keys``, flattened (float64)."""
    return torch.stack([torch.cat([s[k].reshape(-1).double() for k in keys]) for s in states])


def e_step(points_w: torch.Tensor, points_c: torch.Tensor) -> np.ndarray:
    """r_i = argmin_k ‖W_i − W̃^(k)‖² (eq. 8), ties to the lowest k."""
    return torch.cdist(points_w, points_c).argmin(1).cpu().numpy()


def assignment_margins(points_w: torch.Tensor, points_c: torch.Tensor) -> np.ndarray:
    """Per client, ‖W_i − second-nearest centre‖ / ‖W_i − nearest centre‖ (≥ 1; 1: a tie, the
    E-step could move it; ∞ with one centre).  How far each client is from changing cluster."""
    d = torch.cdist(points_w, points_c)
    if d.shape[1] < 2:
        return np.full(d.shape[0], np.inf)
    two = d.topk(2, dim=1, largest=False).values
    return (two[:, 1] / two[:, 0].clamp_min(1e-12)).cpu().numpy()


def m_step(states, assignment, centers, weights=None) -> list:
    """W̃^(k) = Σ_i r_i^(k) w_i W_i / Σ_i r_i^(k) w_i: eq. 9 with w_i = 1
    (w_i = n_i if given); a centre without clients keeps its weights."""
    weights = [1.0] * len(states) if weights is None else weights
    new = []
    for k, old in enumerate(centers):
        members = [i for i, a in enumerate(assignment) if a == k]
        if not members:
            new.append(old)
            continue
        w = [weights[i] for i in members]
        new.append(weighted_average([states[i] for i in members], w))
    return new


def kmeans(x: torch.Tensor, k: int, seed: int) -> np.ndarray:
    """Labels of the best of 20 k-means runs (least inertia, i.e. intra-cluster distance).

    The m points (rows of ``x``) are first written in coordinates of their own span, from the
    Gram matrix of the centred points: every distance between points and means of points is
    unchanged, so k-means is too, but it runs in m dimensions instead of a model's size.
    """
    xc = x.double() - x.double().mean(0)
    vals, vecs = torch.linalg.eigh(xc @ xc.T)
    coords = (vecs * vals.clamp_min(0).sqrt()).cpu().numpy()
    from sklearn.cluster import KMeans  # here: importing scikit-learn costs a second

    return KMeans(n_clusters=k, n_init=KMEANS_RESTARTS, random_state=seed).fit(coords).labels_


def distance_keys(model, distance: str) -> list[str]:
    if distance not in DISTANCES:
        raise PflkitError(f"fesem: distance must be one of {', '.join(DISTANCES)}, got {distance!r}")
    return [n for n, _ in model.named_parameters() if n.startswith(DISTANCES[distance])]


def distance_penalty(reference: dict, keys: list[str], weight: float):
    """``penalty(model) = weight · Dist(W, W̃)`` over the parameters in ``keys`` (eq. 7's term)."""
    reference = {k: reference[k].detach() for k in keys}

    def penalty(model):
        params = dict(model.named_parameters())
        return weight * sum(((params[k] - r) ** 2).sum() for k, r in reference.items())

    return penalty


# ----------------------------------------------------------------------------- server


KIT_WEIGHT, PAPER_WEIGHT = "lambda/m", "lambda/(m alpha_i)"


class FeSEMServer(Server):
    def __init__(self, model, cfg, opts, n_clients):
        super().__init__(model, cfg, opts, n_clients)
        K = opts["centers"]
        if opts["penalty_weight"] not in (KIT_WEIGHT, PAPER_WEIGHT):
            raise PflkitError(
                f"fesem: penalty_weight must be {KIT_WEIGHT!r} or {PAPER_WEIGHT!r}, got {opts['penalty_weight']!r}"
            )
        if opts["em"] not in EM_MODES:
            raise PflkitError(f"fesem: em must be one of {', '.join(EM_MODES)}, got {opts['em']!r}")
        if opts["local_start"] not in LOCAL_STARTS:
            raise PflkitError(
                f"fesem: local_start must be one of {', '.join(LOCAL_STARTS)}, got {opts['local_start']!r}"
            )
        if not 1 <= K <= n_clients:
            raise PflkitError(f"fesem: centers must be between 1 and the number of clients ({n_clients}), got {K}")
        self.keys = distance_keys(model, opts["distance"])
        w0 = snapshot(model)
        self.local = [w0] * n_clients  # W_i, the clients' latest local models
        self.n = [1.0] * n_clients  # n_i, as the clients report them
        self.centers = [w0] * K  # W̃^(k)
        self.assignment = np.zeros(n_clients, dtype=int)  # k_i: r_i^(k) = 1 iff k = k_i
        if opts["em"] == "fixed-random":  # the authors' code: k-means over small random vectors
            rng = np.random.default_rng(cfg.seed)
            noise = rng.uniform(-0.01, 0.01, size=(n_clients, model.head.weight.numel()))
            self.assignment = kmeans(torch.from_numpy(noise), K, cfg.seed)

    def setup(self, uploads):
        """Initial local models -> k-means (20 restarts) -> r_i^(k), then W̃^(k) by eq. 9.
        (fixed-random with ``head_start``: the fixed clusters are kept, only eq. 9 runs.)"""
        for cid, up in uploads.items():
            self.local[cid], self.n[cid] = up["weights"], float(up["n"])
        if self.opt["em"] == "paper":
            self.assignment = kmeans(points(self.local, self.keys), len(self.centers), self.cfg.seed)
        self.centers = m_step(self.local, self.assignment, self.centers, self.m_weights())

    def m_weights(self):
        return self.n if self.opt["size_weighted"] else None

    def message_for(self, cid, rnd):
        msg = {"weights": self.centers[self.assignment[cid]]}
        if self.opt["penalty_weight"] == PAPER_WEIGHT:  # α_i = n_i / Σ_j n_j, from the sizes clients reported
            msg["alpha_i"] = torch.tensor(self.n[cid] / sum(self.n), dtype=torch.float64)
        return msg

    def aggregate(self, uploads, rnd):
        if not uploads:
            return
        ids = sorted(uploads)
        for cid in ids:
            self.local[cid] = uploads[cid]["weights"]
            self.n[cid] = float(uploads[cid]["n"])
        states = [self.local[i] for i in ids]
        if self.opt["em"] == "paper":  # E-step (eq. 8), this round's clients
            w, c = points(states, self.keys), points(self.centers, self.keys)
            self.assignment[ids] = e_step(w, c)
        weights = None  # eq. 9: a plain mean; FedAvg's n_i if size_weighted
        if self.opt["size_weighted"]:
            weights = [self.n[i] for i in ids]
        r = self.assignment[ids]  # M-step (eq. 9):
        self.centers = m_step(states, r, self.centers, weights)

    def margins(self) -> np.ndarray:
        """:func:`assignment_margins` of the clients' latest local models against the centres."""
        return assignment_margins(points(self.local, self.keys), points(self.centers, self.keys))

    def intra_distance(self) -> float:
        """The objective of eq. 6: 1/m Σ_i Dist(W_i, W̃^(k_i)), over the latest local models."""
        w, c = points(self.local, self.keys), points(self.centers, self.keys)
        return float(((w - c[self.assignment]) ** 2).sum(1).mean())

    def state_dict(self):
        return {
            "centers": self.centers,
            "local": self.local,
            "n": torch.tensor(self.n, dtype=torch.float64),
            "assignment": torch.as_tensor(self.assignment),
        }

    def load_state_dict(self, state):
        self.centers, self.local = list(state["centers"]), list(state["local"])
        self.n = state["n"].tolist()
        self.assignment = state["assignment"].cpu().numpy().copy()


# ----------------------------------------------------------------------------- client


def authors_micro_acc(server: FeSEMServer, clients, split: str = "test") -> dict:
    """The authors' code's "micro acc": every centre's model scored on *all* clients' ``split``
    data pooled, and the maximum over centres reported (a maximum over K models, so it can only
    rise with K).  An evaluation utility for the chapter, not part of the protocol."""
    model = clients[0].scratch_model()
    per_centre = []
    for centre in server.centers:
        model.load_state_dict(centre)
        correct = n = 0
        for c in clients:
            r = evaluate(model, *c.data.split(split))
            correct, n = correct + r["correct"], n + r["n"]
        per_centre.append(correct / max(n, 1))
    return {"per_centre": per_centre, "max": max(per_centre)}


class FeSEMClient(Client):
    def __init__(self, cid, data, model, cfg, opts):
        super().__init__(cid, data, model, cfg, opts)
        if opts["local_start"] == "own":  # W_i persists between rounds: kept apart from the model evaluated
            self.own = copy.deepcopy(model)
            self.persistent = ("model", "own")

    def setup_message(self):
        """The initial local model W_i: ``init_steps`` steps of SGD from the common weights
        (paper mode, or fixed-random with ``head_start``; else nothing is sent)."""
        if self.opt["em"] != "paper" and not self.opt["head_start"]:
            return None
        self.generator.manual_seed(derive_seed(self.cfg.seed, 0, 5, self.cid))
        self.sgd(steps=self.opt["init_steps"])
        if self.opt["local_start"] == "own":
            self.own.load_state_dict(self.model.state_dict())
        return {"weights": snapshot(self.model), "n": self.n_samples()}

    def train_round(self, message, rnd):
        centre = message["weights"]
        own = self.opt["local_start"] == "own"
        self.model.load_state_dict(self.own.state_dict() if own else centre)  # own W_i, or Alg. 2: W_i ← W̃^(k)
        lam = self.opt["lam"]
        keys = distance_keys(self.model, self.opt["distance"])
        weight = lam / self.cfg.clients  # λ/m ...
        if "alpha_i" in message:  # ... or, eq. 7 divided by α_i, λ/(m α_i)
            weight /= float(message["alpha_i"])
        penalty = distance_penalty(centre, keys, weight) if lam else None
        loss = self.sgd(penalty=penalty)  # N steps on L_s(W_i) + weight · Dist(W_i, W̃^(k))  (eq. 7)
        if own:
            self.own.load_state_dict(self.model.state_dict())
        return {"weights": snapshot(self.model), "n": self.n_samples()}, loss

    def eval_model(self, message):
        self.model.load_state_dict(message["weights"])  # the centre of the client's cluster
        return self.model


def setup_steps(options: dict) -> int:
    """Minibatch steps every client trains before round 1: the initial local models W_i of Alg. 1
    line 1 (paper mode, or fixed-random with the head start), none otherwise."""
    return options["init_steps"] if options["em"] == "paper" or options["head_start"] else 0


register(
    Method(
        "fesem",
        FeSEMServer,
        FeSEMClient,
        "Multi-center FL: K centres of the clients' weights by federated stochastic EM",
        "Long et al. 2023",
        options={
            "centers": (3, "K, the number of centres (clusters)"),
            "lam": (0.1, "λ: weight of the distance to the centre in the local loss, λ/m·Dist (eq. 7)"),
            "distance": ("all", "Dist over the whole model (all) or the last layer only (last, as the authors' code)"),
            "em": (
                "paper",
                "paper: E- and M-step every round; fixed-random: the authors' code (random fixed clusters)",
            ),
            "penalty_weight": (
                KIT_WEIGHT,
                f"eq. 7's weight on Dist: {KIT_WEIGHT} or {PAPER_WEIGHT} (the paper's reading)",
            ),
            "size_weighted": (False, "M-step weighted by the clients' data sizes (eq. 9 is unweighted)"),
            "init_steps": (100, "steps of local SGD that make the initial local models clustered by k-means"),
            "local_start": (
                "centre",
                "centre: each round starts from the client's centre (Alg. 2); own: from its own latest W_i "
                "(eq. 4.2's alternating optimisation with W_i persisting)",
            ),
            "head_start": (
                False,
                "em=fixed-random only: train and upload the initial local models (init_steps) before round 1 "
                "and start each fixed cluster's centre at their mean (em=paper always does)",
            ),
        },
        later_options={"local_start": "centre"},
        setup_steps=setup_steps,
    )
)
