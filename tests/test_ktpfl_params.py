"""Homogeneous KT-pFL exchanging parameters: the c step (eq. 7 in parameter space), its
reductions to the plain average (η₃ = 0) and to Local (c = I), and the bytes of a round."""

from __future__ import annotations

import pytest
import torch

from pflkit.engine import Federation, build, run
from pflkit.federated import flatten, weighted_average
from pflkit.methods.ktpfl import project_columns
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


def test_a_whole_c_step_is_eq_7_with_the_implicit_pull_then_the_projection():
    g = torch.Generator().manual_seed(2)
    models = torch.randn(4, 9, generator=g, dtype=torch.float64)
    ids = [1, 3]
    c = torch.softmax(torch.randn(4, 2, generator=g, dtype=torch.float64), dim=0)
    w = torch.tensor([0.4, 0.6], dtype=torch.float64)
    lr, rho = 0.3, 0.8
    scale = ((models.mean(0) - models[ids]) ** 2).sum(1)
    grad = models @ ((c.T @ models - models[ids]) * (w / scale)[:, None]).T
    expected = project_columns((c - lr * grad + 2 * lr * rho / 4) / (1 + 2 * lr * rho))
    assert torch.allclose(c_step(c, models, models[ids], w, lr, rho, 4), expected)
    assert not torch.allclose(expected, project_columns(c))  # the step moves c: the check has teeth


def test_only_the_round_s_columns_are_learned(digits):
    cfg = tiny_config(method="ktpfl-params", rounds=1, partition="dirichlet", sample_rate=0.5,
                      options={"c_lr": 5.0, "rho": 0.0})  # fmt: skip
    seen = {}
    run(cfg, Federation.from_config(cfg, ds=digits), on_round=lambda r, row, s, cl: seen.update(server=s))
    c = seen["server"].c
    moved = [n for n in range(cfg.clients) if not torch.equal(c[:, n], torch.full_like(c[:, n], 1 / cfg.clients))]
    assert len(moved) == int(cfg.clients * cfg.sample_rate)  # the two clients of the round, no others


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
