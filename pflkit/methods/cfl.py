"""CFL, clustered federated learning (Sattler, Müller and Samek, 2020, Algorithm 1;
"FedCluster" among the FeSEM paper's baselines).

One model θ_c per cluster c; at first a single cluster holds every client.  Round:
    server → client i in cluster c:  θ_c
    client:   θ_i ← E local epochs of SGD from θ_c;  sends θ_i and n_i,  Δθ_i = θ_i − θ_c
    server, for every cluster c:
        if  ‖Σ_{i∈c} n_i/n_c Δθ_i‖ < ε₁     (the federation is near a stationary point of
        and max_{i∈c} ‖Δθ_i‖ > ε₂           the mixture, but single clients are far from
        and |c| > 2 and t > warmup:          theirs: their risks differ)
            split c in two by the cosine similarities of the updates,
                α_ij = ⟨Δθ_i, Δθ_j⟩ / (‖Δθ_i‖ ‖Δθ_j‖),
            with complete-linkage agglomerative clustering of the distances 1 − α_ij
            (the bipartition with the smallest largest cross-similarity, as the authors' code)
        θ_c ← Σ_{i∈c} n_i/n_c θ_i  for every (new) cluster (= θ_c + the size-weighted mean update)
Clients are evaluated with the model of their cluster.  ``warmup`` (20) is the authors'
code's guard against splitting in the first rounds; ε₁ = 0.4 and ε₂ = 1.6 are their
values for their models, and depend on the model, learning rate and local epochs.  A
cluster is split only in a round where all its clients reported (the paper assumes that
every client takes part).  Without a split, CFL is FedAvg.
"""

from __future__ import annotations

import numpy as np
import torch

from ..federated import Server, flatten, snapshot, weighted_average
from . import Method, register
from .fedavg import FedAvgClient


def bipartition(updates: torch.Tensor) -> tuple[list[int], list[int]]:
    """Split the rows of ``updates`` in two by cosine similarity (complete linkage)."""
    unit = updates / updates.norm(dim=1, keepdim=True).clamp_min(1e-12)
    similarity = (unit @ unit.T).cpu().numpy()
    from sklearn.cluster import AgglomerativeClustering  # here: importing scikit-learn costs a second

    labels = AgglomerativeClustering(n_clusters=2, metric="precomputed", linkage="complete").fit(1 - similarity).labels_
    return np.flatnonzero(labels == 0).tolist(), np.flatnonzero(labels == 1).tolist()


class CFLServer(Server):
    def __init__(self, model, cfg, opts, n_clients):
        super().__init__(model, cfg, opts, n_clients)
        self.clusters: list[list[int]] = [list(range(n_clients))]
        self.models = [snapshot(model)]  # θ_c, one per cluster
        self.cluster_of = np.zeros(n_clients, dtype=int)
        # the split criterion's two norms, per cluster that reported in the last round (read-only,
        # for figures): (‖Σ n_i/n_c Δθ_i‖ against ε₁, max ‖Δθ_i‖ against ε₂)
        self.norms: list[tuple[float, float]] = []

    @property
    def assignment(self) -> np.ndarray:
        """The cluster of every client (as FeSEM's ``assignment``)."""
        return self.cluster_of

    def message_for(self, cid, rnd):
        return {"weights": self.models[self.cluster_of[cid]]}

    def aggregate(self, uploads, rnd):
        clusters, models, norms = [], [], []
        for members, theta in zip(self.clusters, self.models):
            reported = [i for i in members if i in uploads]
            if not reported:
                clusters.append(members)
                models.append(theta)
                continue
            base = flatten(theta)
            dtheta = torch.stack([flatten(uploads[i]["weights"]) - base for i in reported])  # Δθ_i
            n = torch.tensor([float(uploads[i]["n"]) for i in reported])
            mean_norm = float((n[:, None] * dtheta).sum(0).norm() / n.sum())
            max_norm = float(dtheta.norm(dim=1).max())
            norms.append((mean_norm, max_norm))
            groups = [reported]
            if (len(reported) == len(members) > 2 and rnd + 1 > self.opt["warmup"]
                    and mean_norm < self.opt["eps1"] and max_norm > self.opt["eps2"]):  # fmt: skip
                groups = [[reported[j] for j in part] for part in bipartition(dtheta)]
            for g in groups:  # FedAvg within each (new) cluster
                clusters.append(g if len(groups) > 1 else members)
                models.append(weighted_average([uploads[i]["weights"] for i in g], [uploads[i]["n"] for i in g]))
        self.clusters, self.models, self.norms = clusters, models, norms
        for c, members in enumerate(clusters):
            self.cluster_of[members] = c

    def state_dict(self):
        return {"models": self.models, "cluster_of": torch.as_tensor(self.cluster_of)}

    def load_state_dict(self, state):
        self.models = list(state["models"])
        self.cluster_of = state["cluster_of"].cpu().numpy().copy()
        self.clusters = [np.flatnonzero(self.cluster_of == c).tolist() for c in range(len(self.models))]


register(
    Method(
        "cfl",
        CFLServer,
        FedAvgClient,  # receive θ_c, train, send θ_i and n_i
        "Clustered FL: recursive bipartition by cosine similarity of the clients' updates",
        "Sattler et al. 2020",
        options={
            "eps1": (0.4, "ε₁: split only when the norm of the mean update is below this"),
            "eps2": (1.6, "ε₂: ... and the largest client update norm is above this"),
            "warmup": (20, "no split in the first this many rounds (the authors' code: 20)"),
        },
    )
)
