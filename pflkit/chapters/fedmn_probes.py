"""FedMN's chapter diagnostics, run as probes on a trained federation: the swap test of routing and the
oracle decisions.  They read the method's server and clients; the method file,
:mod:`pflkit.methods.fedmn`, stays the paper's algorithm."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..errors import PflkitError
from ..federated import Client, evaluate
from ..methods.fedmn import FedMNServer, _Routed


def decision_swap_accuracy(server: FedMNServer, clients: list[Client], partner: dict[int, int]) -> dict[int, tuple]:
    """The swap test of routing: per client i, its test accuracy with its own decision and with the
    decision of ``partner[i]`` (a client of another cluster or group), on the same shared network θ.
    Own − swapped > 0 means that the architecture the router chose for a client is its own."""
    models = {c.cid: c.eval_model(server.eval_message(c.cid)) for c in clients}
    if not all(isinstance(m, _Routed) for m in models.values()):
        raise PflkitError("decision_swap_accuracy() needs a run past its pretraining rounds, with routing on")
    out = {}
    for c in clients:
        x, y = c.data.split("test")
        model = models[c.cid]
        own = evaluate(model, x, y)["correct"] / len(y)
        swapped = evaluate(_Routed(model.net, models[partner[c.cid]].c), x, y)["correct"] / len(y)
        out[c.cid] = (own, swapped)
    return out


def oracle_decisions(
    server: FedMNServer, clients: list[Client], groups, partner: dict[int, int], steps: int = 60, lr: float = 0.1
) -> dict[int, tuple]:  # fmt: skip
    """Is there anything for a personal decision to gain on the trained network?  With θ frozen
    (the encoders' outputs computed once, dropout off), path weights c = σ(z) are fitted by Adam
    (``steps`` full-batch steps from c = ½) on the pooled training data of each group of clients
    (``groups``: a group per client) and on every client's together (the best common decision).
    Per client i, its test accuracy with: the router's decision, the best common one, its own
    group's, and the group of ``partner[i]``'s (a client of another group)."""
    net = clients[0].model
    models = {c.cid: c.eval_model(server.eval_message(c.cid)) for c in clients}  # θ is global: one network
    if not all(isinstance(m, _Routed) for m in models.values()):
        raise PflkitError("oracle_decisions() needs a run past its pretraining rounds, with routing on")
    net.eval()
    with torch.no_grad():
        feats = {c.cid: {s: (net.encode(c.data.split(s)[0]), c.data.split(s)[1]) for s in ("train", "test")}
                 for c in clients}  # fmt: skip

    def fit(cids) -> torch.Tensor:
        outs = [torch.cat([feats[i]["train"][0][k] for i in cids]) for k in range(len(feats[cids[0]]["train"][0]))]
        y = torch.cat([feats[i]["train"][1] for i in cids])
        z = torch.zeros(net.n_paths, requires_grad=True)
        opt = torch.optim.Adam([z], lr=lr)
        for _ in range(steps):
            loss = F.cross_entropy(net.route(outs, torch.sigmoid(z), len(y)), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return torch.sigmoid(z.detach())

    group = dict(zip((c.cid for c in clients), groups))
    fitted = {g: fit([i for i in group if group[i] == g]) for g in sorted(set(group.values()))}
    common = fit(list(group))

    def accuracy(cid, c) -> float:
        outs, y = feats[cid]["test"]
        with torch.no_grad():
            return float((net.route(outs, c, len(y)).argmax(1) == y).float().mean()) if len(y) else float("nan")

    return {i: (accuracy(i, models[i].c), accuracy(i, common), accuracy(i, fitted[group[i]]),
                accuracy(i, fitted[group[partner[i]]])) for i in group}  # fmt: skip
