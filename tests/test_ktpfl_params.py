"""Homogeneous KT-pFL exchanging parameters: the c step (eq. 7 in parameter space), its
reductions to the plain average (η₃ = 0) and to Local (c = I), and the bytes of a round."""

from __future__ import annotations

import pytest
import torch

from pflkit.engine import Federation, build, run
from pflkit.federated import flatten, weighted_average
from pflkit.methods.ktpfl_params import c_objective, c_step
from pflkit.models import n_params
from tests.conftest import tiny_config


def cfg_(**opts):
    return tiny_config(method="ktpfl-params", rounds=2, partition="dirichlet", options=opts)


def last_server(cfg, digits):
    seen = {}
    run(cfg, Federation.from_config(cfg, ds=digits), on_round=lambda r, row, s, cl: seen.update(server=s))
    return seen["server"]


def test_c_gradient_matches_finite_differences():
    g = torch.Generator().manual_seed(0)
    models = torch.randn(4, 7, generator=g, dtype=torch.float64)  # 4 clients' flattened models
    ids = [0, 2, 3]
    c = torch.softmax(torch.randn(4, 3, generator=g, dtype=torch.float64), dim=0).requires_grad_(True)
    w = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    grad = torch.autograd.grad(c_objective(c, models, models[ids], w), c)[0]
    scale = ((models.mean(0) - models[ids]) ** 2).sum(1)  # ‖w̄ − w_n‖²
    expected = models @ ((c.detach().T @ models - models[ids]) * (w / scale)[:, None]).T  # by hand
    assert torch.allclose(grad, expected)
    h = 1e-6
    e = torch.zeros(4, 3, dtype=torch.float64)
    e[1, 2] = h
    fd = (c_objective(c.detach() + e, models, models[ids], w) - c_objective(c.detach() - e, models, models[ids], w)) / (2 * h)  # fmt: skip
    assert grad[1, 2].item() == pytest.approx(fd.item(), rel=1e-6)


def test_identity_is_a_fixed_point_and_sends_each_client_its_own_model(digits):
    cfg = cfg_(rho=0.0)
    _, _, server, _ = build(cfg, Federation.from_config(cfg, ds=digits))
    for i in range(cfg.clients):  # a different model for every client
        torch.manual_seed(i)
        server.w[i] = {k: torch.randn_like(v) for k, v in server.w[i].items()}
    server.c = torch.eye(cfg.clients, dtype=torch.float64)
    for i in range(cfg.clients):  # c = I: each client gets its own model back, bit for bit (Local)
        assert all(torch.equal(server.message_for(i, 1)["weights"][k], server.w[i][k]) for k in server.w[i])
    models = torch.stack([flatten(w) for w in server.w]).double()
    w = torch.full((cfg.clients,), 1 / cfg.clients, dtype=torch.float64)
    assert torch.equal(c_step(server.c, models, models, w, 10.0, 0.0, cfg.clients), server.c)  # the minimum of eq. 7


def test_without_a_c_step_every_client_gets_the_plain_average(digits):
    server = last_server(cfg_(c_lr=0.0), digits)
    n = server.n_clients
    assert torch.equal(server.c, torch.full((n, n), 1 / n, dtype=torch.float64))
    mean = weighted_average(server.w, [1.0] * n)
    for i in range(n):
        assert all(torch.allclose(server.message_for(i, 2)["weights"][k], mean[k], atol=1e-7) for k in mean)
    learned = last_server(cfg_(c_lr=50.0, rho=0.0), digits).c  # with a step, c moves and stays on the simplex
    assert not torch.allclose(learned, server.c, atol=1e-4)
    assert (learned >= 0).all() and torch.allclose(learned.sum(0), torch.ones(n, dtype=torch.float64))


def test_a_round_sends_one_model_each_way(digits):
    cfg = cfg_()
    ran = run(cfg, Federation.from_config(cfg, ds=digits))
    _, _, server, _ = build(cfg, Federation.from_config(cfg, ds=digits))
    size = 4 * n_params(server.model)  # float32
    assert ran["comm"]["bytes_down"] == cfg.rounds * cfg.clients * size
    assert ran["comm"]["bytes_up"] == cfg.rounds * cfg.clients * (size + 8)  # the model and n (an int64)
