"""pFedHN's chapter diagnostics, run as probes on a trained federation: the swap test of Figure 3 (each
client's accuracy with the models generated for the others).  They read the method's server and
clients; the method file, :mod:`pflkit.methods.pfedhn`, stays the paper's algorithm."""

from __future__ import annotations

from ..federated import Client, evaluate
from ..methods.pfedhn import PFedHNServer


def swap_accuracy(server: PFedHNServer, clients: list[Client]) -> list[list[float]]:
    """Figure 3's mix and match: entry (i, j) is the test accuracy of ``clients[i]`` with the weights
    the hypernetwork generates for ``clients[j]`` (pFedHN: the whole model θ_j; pFedHN-PC: the feature
    extractor θ_j under client i's own classifier ω_i).  The diagonal is each client's own model.
    ``clients`` may be any subset whose models share one architecture (one size group of Table 2)."""
    messages = {c.cid: server.eval_message(c.cid) for c in clients}  # each θ_j generated once, not once a row
    mix = []
    for ci in clients:
        x, y = ci.data.split("test")
        model = ci.eval_model(messages[ci.cid])  # client i's model: θ_i (and its head ω_i)
        row = []
        for cj in clients:
            model.load_state_dict(messages[cj.cid]["weights"], strict=False)  # θ_j, anything else kept
            row.append(evaluate(model, x, y)["correct"] / len(y))
        model.load_state_dict(messages[ci.cid]["weights"], strict=False)
        mix.append(row)
    return mix
