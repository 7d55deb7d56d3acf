"""The similarity-based baselines of the pFedMB paper: IFCA, FedAMP, FedFomo (and pFedMB's
checkpoints).  Learning on the tiny problem is checked for all of them in test_methods.py."""

import math

import pytest
import torch

from pflkit.engine import build, run
from pflkit.federated import flatten, nbytes, snapshot
from tests.conftest import killed_and_resumed, strip, tiny_config


def trained(client, server, rnd=0):
    reply = client.train_round(server.message_for(client.cid, rnd), rnd)[0]
    return reply


# ----------------------------------------------------------------------------- IFCA


def test_ifca_with_one_cluster_is_fedavg_exactly(tiny_fed):
    got = {}
    cfg = tiny_config(method="fedavg")
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: got.update(fedavg=dict(s.w)))
    cfg = tiny_config(method="ifca", options={"clusters": 1})
    res = run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: got.update(ifca=dict(s.thetas[0])))
    for k, v in got["fedavg"].items():
        torch.testing.assert_close(got["ifca"][k], v, rtol=0, atol=0)
    assert res["comm"]["bytes_down"] == nbytes(got["fedavg"]) * cfg.clients * cfg.rounds


def test_ifca_client_picks_lowest_loss_cluster_and_server_averages_per_cluster(tiny_fed):
    cfg = tiny_config(method="ifca", options={"clusters": 3})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    assert all(not torch.equal(server.thetas[0][k], server.thetas[1][k]) for k in server.thetas[0])  # distinct inits
    c = clients[0]
    server.thetas[2] = trained(c, server)["weights"]  # a model fitted to client 0: its lowest loss
    before = [dict(t) for t in server.thetas]
    reply = trained(c, server)
    assert int(reply["cluster"]) == 2 == c.cluster
    server.aggregate({0: reply}, 1)
    assert all(torch.equal(server.thetas[2][k], reply["weights"][k]) for k in reply["weights"])
    for j in (0, 1):  # nobody chose them: unchanged
        assert all(torch.equal(server.thetas[j][k], before[j][k]) for k in before[j])
    assert nbytes(server.eval_message(0)) == 3 * nbytes(server.thetas[0])


# ----------------------------------------------------------------------------- FedAMP


def test_fedamp_xi_hand_computed(tiny_fed):
    cfg = tiny_config(method="fedamp", options={"sigma": 2.0, "alpha_k": 0.5})
    _, _, server, _ = build(cfg, tiny_fed(cfg))
    keys = list(server.w[0])
    base = server.w[0]
    # client 1 at squared distance 1 from client 0, client 2 at 4, client 3 at 0 (the same model)
    shifts = [0.0, 1.0, 2.0, 0.0]
    n = sum(v.numel() for v in base.values())
    for i, s in enumerate(shifts):
        server.w[i] = {k: base[k] + s / math.sqrt(n) for k in keys}
    xi = server.xi(0)
    a = lambda d2: 0.5 * math.exp(-d2 / 2.0) / 2.0  # α_k A'(d²), A'(x) = exp(−x/σ)/σ  # noqa: E731
    want = [0.0, a(1.0), a(4.0), a(0.0)]
    want[0] = 1 - sum(want)
    torch.testing.assert_close(xi, torch.tensor(want, dtype=torch.float64), rtol=1e-4, atol=1e-6)
    u = server.message_for(0, 0)["u"]
    expect = sum(x * flatten(server.w[j]).double() for j, x in enumerate(want))
    torch.testing.assert_close(flatten(u).double(), expect, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "opts", [{"sigma": 1e-3}, {"sigma": 1e3, "alpha_k": 1e3}, {"similarity": "cosine", "self_weight": 0.7}]
)
def test_fedamp_xi_is_convex_and_heuristic_self_weight(tiny_fed, opts):
    cfg = tiny_config(method="fedamp", rounds=1, options=opts)
    captured = {}
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: captured.update(s=s))
    for i in range(cfg.clients):
        xi = captured["s"].xi(i)
        assert (xi >= 0).all() and abs(float(xi.sum()) - 1) < 1e-9, xi
        if opts.get("similarity") == "cosine":
            assert abs(float(xi[i]) - 0.7) < 1e-9


def test_fedamp_large_proximal_weight_stays_at_cloud_model(tiny_fed):
    cfg = tiny_config(method="fedamp", rounds=1, options={"lam": 1e3}, lr=1e-4)
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    msg = server.message_for(0, 0)
    w = trained(clients[0], server)["weights"]
    assert max(float((w[k] - msg["u"][k]).abs().max()) for k in w) < 1e-2
    assert server.eval_message(0) == {}  # evaluated with its own w_i


# ----------------------------------------------------------------------------- FedFomo


def test_fedfomo_weights_favour_models_that_lower_the_validation_loss(tiny_fed):
    cfg = tiny_config(method="fedfomo", options={"models": 3})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    c = clients[0]
    start = snapshot(c.model)
    better = trained(c, server)["weights"]  # client 0's own data: lower validation loss
    c.model.load_state_dict(start)
    worse = {k: v + 0.5 * torch.randn_like(v) for k, v in start.items()}  # noise: higher loss
    w = c.weights([better, worse, start])
    assert w[0] == 1 and w[1] == 0 and w[2] == 0  # normalised; distance 0 gives 0
    assert torch.equal(c.weights([worse]), torch.zeros(1, dtype=torch.float64))


def test_fedfomo_affinity_and_greedy_choice(tiny_fed):
    cfg = tiny_config(method="fedfomo", options={"models": 2, "epsilon": 0.0})
    _, _, server, _ = build(cfg, tiny_fed(cfg))
    assert server.chosen(0, 0) == [1, 2]  # no affinity yet: lowest ids
    upload = {"weights": server.theta[0], "ids": torch.tensor([1, 3]), "w": torch.tensor([0.25, 0.75])}
    server.aggregate({0: upload}, 0)
    assert server.P[0].tolist() == [0, 0.25, 0, 0.75]
    assert server.chosen(0, 1) == [1, 3]
    assert len(server.message_for(0, 1)["models"]) == 2
    explore = tiny_config(method="fedfomo", options={"models": 2, "epsilon": 1.0, "epsilon_decay": 0.0})
    _, _, server, _ = build(explore, tiny_fed(explore))
    picks = {tuple(server.chosen(0, r)) for r in range(20)}
    assert len(picks) > 1 and all(0 not in p for p in picks)


# ----------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("method", ["pfedmb", "ifca", "fedamp", "fedfomo"])
def test_resume_after_kill_equals_uninterrupted(tiny_fed, tmp_path, method):
    """Client α (pFedMB), cluster models (IFCA), stored client models (FedAMP) and the affinity
    matrix (FedFomo) survive a checkpoint."""
    cfg = tiny_config(method=method, rounds=3, sample_rate=0.5)
    full = run(cfg, tiny_fed(cfg))
    resumed = killed_and_resumed(cfg, tiny_fed, tmp_path / "ck.pt")
    assert strip(resumed) == strip(full)


# ----------------------------------------------------------------------------- CFL's split criterion, for figures


def test_cfl_records_its_split_norms_per_cluster(tiny_fed):
    """``CFLServer.norms`` (read by the FeSEM chapter's probe): per cluster that reported, the norm of
    the size-weighted mean update (against ε₁) and the largest client update norm (against ε₂)."""
    cfg = tiny_config(method="cfl", clients=4, rounds=1)  # warmup 20: no split
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    assert server.norms == []
    theta = flatten(server.models[0])
    uploads = {c.cid: trained(c, server) for c in clients}
    dtheta = torch.stack([flatten(u["weights"]) - theta for u in uploads.values()])
    n = torch.tensor([float(u["n"]) for u in uploads.values()])
    server.aggregate(uploads, 0)
    assert len(server.norms) == len(server.models) == 1
    mean_norm, max_norm = server.norms[0]
    assert mean_norm == pytest.approx(float((n[:, None] * dtheta).sum(0).norm() / n.sum()))
    assert max_norm == pytest.approx(float(dtheta.norm(dim=1).max()))
