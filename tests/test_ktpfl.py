"""KT-pFL: the public set, soft predictions as the only upload, the knowledge-coefficient
matrix c (eq. 7, its gradient, its projection, ρ), and the reductions to Local."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from pflkit.data import available_offline
from pflkit.engine import Federation, build, foreign_public, hold_out_public, run
from pflkit.errors import PflkitError
from pflkit.experiments import run_key
from pflkit.federated import nbytes
from pflkit.methods.ktpfl import c_objective, c_step, kl, project_columns, teachers
from tests.conftest import killed_and_resumed, strip, tiny_config

PUBLIC = 200


def cfg_(**kw):
    opts = kw.pop("options", {})
    base = dict(method="ktpfl", rounds=3, local_steps=None, local_epochs=1, public_images=PUBLIC, partition="dirichlet")
    return tiny_config(**{**base, **kw}, options={"T": 2.0, **opts})


@pytest.fixture
def fed_for(digits):
    return lambda cfg: Federation.from_config(cfg, ds=digits)


def test_public_set_is_held_out_of_the_training_images(digits):
    rest, public = hold_out_public(digits, PUBLIC)
    assert len(public) == PUBLIC and len(rest.y_train) == len(digits.y_train) - PUBLIC
    counts = torch.bincount(digits.y_train, minlength=10) - torch.bincount(rest.y_train, minlength=10)
    assert counts.max() - counts.min() <= 1  # stratified: 20 of each of the 10 classes
    kept = {tuple(x.flatten().tolist()) for x in rest.x_train}
    assert sum(tuple(x.flatten().tolist()) in kept for x in public) <= 2  # (digits has a few duplicate images)
    assert hold_out_public(digits, 0) == (digits, None)
    with pytest.raises(PflkitError, match="leaves no training images"):
        hold_out_public(digits, len(digits.y_train))


def test_a_public_set_from_another_dataset(digits):
    x = foreign_public("digits", 300, (3, 16, 16))  # resized and repeated over colour channels
    assert x.shape == (300, 3, 16, 16) and x.dtype == torch.uint8
    assert torch.equal(x[:, 0], x[:, 2]) and torch.equal(x, foreign_public("digits", 300, (3, 16, 16)))
    same = foreign_public("digits", 300, (1, 8, 8))  # at its own size the images are the dataset's own
    pool = {tuple(v.flatten().tolist()) for v in torch.cat([digits.x_train, digits.x_test])}
    assert all(tuple(v.flatten().tolist()) in pool for v in same)
    assert len(foreign_public("digits", 5000, (1, 8, 8))) == len(digits.y_train) + len(digits.y_test)  # all it has
    with pytest.raises(PflkitError, match="is the run's dataset"):  # its test images would leak into the public set
        Federation.from_config(cfg_(public_source="digits"), ds=digits)


@pytest.mark.skipif(not available_offline("fashion-mnist"), reason="Fashion-MNIST is not on this machine")
def test_another_domain_replaces_the_held_out_images_and_nothing_else(digits):
    cfg = cfg_(public_source="fashion-mnist")
    fed, twin = Federation.from_config(cfg, ds=digits), Federation.from_config(cfg_(), ds=digits)
    assert torch.equal(fed.x_train, twin.x_train) and torch.equal(fed.y_train, twin.y_train)  # the same clients
    assert fed.x_public.shape == twin.x_public.shape and not torch.equal(fed.x_public, twin.x_public)
    assert run_key(cfg, 1) != run_key(cfg_(), 1)


def test_with_lambda_zero_ktpfl_is_local(fed_for):
    cfg = cfg_(options={"lam": 0.0})
    kt = run(cfg, fed_for(cfg))
    local = run(dataclasses.replace(cfg, method="local", options={}), fed_for(cfg))

    def learning(result):  # everything but the bytes (Local sends nothing)
        return [{k: v for k, v in h.items() if not k.startswith(("bytes", "eval_bytes"))} for h in strip(result)]

    assert learning(kt) == learning(local)  # the same batches, the same models, the same accuracies
    assert kt["round_loss"] == local["round_loss"]


def test_upload_is_only_soft_predictions_of_the_public_batch(fed_for):
    cfg = cfg_(clients=4, options={"models": "mlp,mlp3x32", "public_batch": 64})  # two architectures, dealt in turn
    _, _, server, clients = build(cfg, fed_for(cfg))
    assert [c.model.body[1].out_features for c in clients] == [200, 32, 200, 32]
    pre = server.pre_message(0, 0)
    assert set(pre) == {"public_idx"} and len(pre["public_idx"]) == 64
    request = clients[0].request(pre, 0)
    assert set(request) == {"soft"} and nbytes(request) == 64 * 10 * 4  # batch × classes × float32
    assert torch.allclose(request["soft"].sum(1), torch.ones(64))
    ran = run(cfg, fed_for(cfg))
    per_round = 4 * (64 * 10 * 4 + 8)  # soft predictions and n (an int64) from each client
    assert ran["comm"]["bytes_up"] == cfg.rounds * per_round


def test_c_gradient_matches_finite_differences():
    g = torch.Generator().manual_seed(0)
    soft = torch.softmax(torch.randn(3, 5, 4, generator=g, dtype=torch.float64), dim=2)  # 3 clients, 5 samples
    c = torch.softmax(torch.randn(3, 3, generator=g, dtype=torch.float64), dim=0)
    w = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    c.requires_grad_(True)
    grad = torch.autograd.grad(c_objective(c, soft, w), c)[0]
    h = 1e-6
    for i in range(3):
        for j in range(3):
            e = torch.zeros(3, 3, dtype=torch.float64)
            e[i, j] = h
            fd = (c_objective(c.detach() + e, soft, w) - c_objective(c.detach() - e, soft, w)) / (2 * h)
            assert grad[i, j].item() == pytest.approx(fd.item(), rel=1e-6, abs=1e-9)
    t = teachers(c.detach(), soft)
    assert torch.allclose(t[1], sum(c[m, 1].detach() * soft[m] for m in range(3)))  # column n mixes t_n (eq. 2)
    assert kl(soft[0], soft[0]).item() == pytest.approx(0.0, abs=1e-12)


def test_c_objective_sums_the_kl_over_the_public_batch_as_eq_2():
    g = torch.Generator().manual_seed(2)
    soft = torch.softmax(torch.randn(3, 7, 4, generator=g, dtype=torch.float64), dim=2)  # 3 clients, 7 samples
    c = torch.softmax(torch.randn(3, 3, generator=g, dtype=torch.float64), dim=0)
    w = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    by_hand = 0.0
    for n in range(3):
        for b in range(7):
            t = sum(c[m, n] * soft[m, b] for m in range(3))  # t_n(x̂_b) = Σ_m c_mn s_m(x̂_b)
            by_hand += w[n] * (t * (t / soft[n, b]).log()).sum()
    assert c_objective(c, soft, w).item() == pytest.approx(by_hand.item(), rel=1e-12)
    assert c_objective(c, soft, w, "mean").item() == pytest.approx(by_hand.item() / 7, rel=1e-12)


def test_a_whole_c_step_is_eq_7_with_the_implicit_pull_then_the_projection():
    g = torch.Generator().manual_seed(1)
    soft = torch.softmax(torch.randn(3, 6, 4, generator=g, dtype=torch.float64), dim=2)
    c = torch.softmax(torch.randn(3, 3, generator=g, dtype=torch.float64), dim=0)
    w = torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)
    lam, lr, rho, h = 2.0, 0.3, 0.7, 1e-6
    fd = torch.zeros(3, 3, dtype=torch.float64)  # eq. 7's gradient by central differences
    for i in range(3):
        for j in range(3):
            e = torch.zeros(3, 3, dtype=torch.float64)
            e[i, j] = h
            fd[i, j] = (c_objective(c + e, soft, w) - c_objective(c - e, soft, w)) / (2 * h)
    expected = project_columns((c - lr * lam * fd + 2 * lr * rho / 3) / (1 + 2 * lr * rho))
    assert torch.allclose(c_step(c, soft, w, lam, lr, rho, 3), expected, atol=1e-8)
    assert torch.equal(c_step(c, soft, w, 0.0, lr, 0.0, 3), project_columns(c))  # λ = ρ = 0: c stays


def test_projection_onto_the_simplex():
    c = torch.tensor([[0.5, 2.0, -1.0], [0.5, 0.0, 0.2], [0.0, -1.0, 0.3]], dtype=torch.float64)
    p = project_columns(c)
    assert (p >= 0).all() and torch.allclose(p.sum(0), torch.ones(3, dtype=torch.float64))
    assert torch.allclose(p[:, 0], c[:, 0])  # already on the simplex: unchanged
    assert torch.allclose(p[:, 1], torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))


def test_rho_to_infinity_keeps_c_at_one_over_n(fed_for):
    seen = {}
    cfg = cfg_(options={"rho": 1e12, "c_lr": 1.0})
    run(cfg, fed_for(cfg), on_round=lambda r, row, s, cl: seen.update(c=s.c.clone()))
    assert torch.allclose(seen["c"], torch.full_like(seen["c"], 1 / cfg.clients), atol=1e-9)
    cfg = cfg_(options={"rho": 0.0, "c_lr": 5.0})  # without the pull, c learns something
    run(cfg, fed_for(cfg), on_round=lambda r, row, s, cl: seen.update(c=s.c.clone()))
    assert not torch.allclose(seen["c"], torch.full_like(seen["c"], 1 / cfg.clients), atol=1e-3)
    assert torch.allclose(seen["c"].sum(0), torch.ones(cfg.clients, dtype=torch.float64))


def test_resume_after_kill_equals_uninterrupted(fed_for, tmp_path):
    cfg = cfg_(rounds=4, options={"c_lr": 1.0})
    full = run(cfg, fed_for(cfg))
    assert strip(killed_and_resumed(cfg, fed_for, tmp_path / "ck.pt")) == strip(full)


def test_no_public_set_is_one_clear_error(fed_for):
    cfg = cfg_(public_images=0)
    with pytest.raises(PflkitError, match="public set"):
        run(cfg, fed_for(cfg))


def test_similarity_coefficients_and_the_variants(fed_for):
    from pflkit.methods.ktpfl import similarity_weights

    a, b = torch.tensor([[0.9, 0.1]]), torch.tensor([[0.1, 0.9]])
    soft = torch.stack([a, a, b]).double()  # clients 0 and 1 agree, client 2 differs
    w = similarity_weights(soft)
    assert torch.allclose(w.sum(0), torch.ones(3, dtype=torch.float64)) and w[0, 1] > w[2, 1]
    top = similarity_weights(soft, top_k=2)
    assert (top[:, 0] > 0).sum() == 2 and top[2, 0] == 0  # client 0's teacher: itself and client 1
    # shifted (the default, the authors' code): the least similar client gets weight 0; plain: cosines near 1
    # at a high temperature are nearly uniform weights
    assert w[2, 0] == 0 and torch.allclose(w[:2, 0], torch.tensor([0.5, 0.5], dtype=torch.float64))
    flat = torch.softmax(torch.stack([torch.tensor([[3.0, 0.0]]), torch.tensor([[0.0, 3.0]])]) / 10, dim=2).double()
    plain = similarity_weights(flat, shift=False)
    assert (plain - 0.5).abs().max() < 0.02 and torch.equal(
        similarity_weights(flat)[:, 0], torch.tensor([1.0, 0.0]).double()
    )
    same = similarity_weights(torch.stack([a, a]).double())  # all equally similar: the plain average
    assert torch.equal(same, torch.full((2, 2), 0.5, dtype=torch.float64))
    seen = {}
    for name in ("fedmd", "sim-pfd", "topk-pfd"):
        cfg = cfg_(method=name, rounds=2)
        run(cfg, fed_for(cfg), on_round=lambda r, row, s, cl: seen.update(c=s.c.clone()))
        assert torch.equal(seen["c"], torch.full_like(seen["c"], 1 / cfg.clients))  # only KT-pFL learns c


def test_t2_scaling_and_topk_as_the_authors_code_runs_it(fed_for):
    """kd_scale=T2 multiplies the distillation loss by T²: FedMD (c fixed, λ only in the loss) with λ
    and T2 is the run with λ T² and no scaling.  topk_rule=median: the clients above the column's
    median similarity (N/2 of them), averaged uniformly.  Both options at their old values keep stored keys."""
    from pflkit.methods.ktpfl import similarity_weights
    from pflkit.store import canonical

    scaled = cfg_(method="fedmd", rounds=2, options={"lam": 0.5, "kd_scale": "T2"})  # T = 2
    plain = cfg_(method="fedmd", rounds=2, options={"lam": 2.0})
    assert strip(run(scaled, fed_for(scaled))) == strip(run(plain, fed_for(plain)))
    soft = torch.tensor([[[0.9, 0.1]], [[0.8, 0.2]], [[0.5, 0.5]], [[0.1, 0.9]]]).double()
    w = similarity_weights(soft, rule="median")
    assert torch.allclose(w.sum(0), torch.ones(4, dtype=torch.float64))
    assert set(w[:, 0].tolist()) <= {0.0, w[:, 0].max().item()}  # uniform over the clients it keeps
    assert w[0, 0] > 0 and w[3, 0] == 0 and (w[:, 0] > 0).sum() == 2  # client 0 keeps itself and client 1
    old = canonical(cfg_(options={"kd_scale": "1", "topk_rule": "k"}), 1)["options"]
    assert "kd_scale" not in old and "topk_rule" not in old
    with pytest.raises(PflkitError, match="kd_scale"):
        run(cfg_(options={"kd_scale": "T3"}), fed_for(cfg_()))


def test_diagnostics_self_weight_and_gradient_ratio(fed_for):
    """The channel's probe: FedMD's teachers weigh every client 1/N; λ = 0 sends no gradient (ratio
    0); the ratio grows linearly in λ; measuring changes nothing in the models."""
    from pflkit.federated import snapshot
    from pflkit.methods.ktpfl import diagnostics

    seen = {}

    def probe(rnd, row, server, clients):
        before = [snapshot(c.model) for c in clients]
        lam = server.opt["lam"]
        seen[server.cfg.method, lam] = diagnostics(server, clients)
        server.opt["lam"] = 2 * lam  # the same models, twice the weight
        seen[server.cfg.method, 2 * lam] = diagnostics(server, clients)
        server.opt["lam"] = lam
        assert all(torch.equal(b[k], snapshot(c.model)[k]) for b, c in zip(before, clients) for k in b)

    for method, lam in (("fedmd", 1.0), ("ktpfl", 0.0)):
        cfg = cfg_(method=method, rounds=1, options={"lam": lam})
        run(cfg, fed_for(cfg), on_round=probe)
    n = cfg_().clients
    assert seen["fedmd", 1.0]["self_weight"] == pytest.approx([1 / n] * n, abs=1e-5)
    assert seen["ktpfl", 0.0]["grad_ratio"] == [0.0] * n
    one, two = seen["fedmd", 1.0]["grad_ratio"], seen["fedmd", 2.0]["grad_ratio"]
    assert all(r > 0 for r in one) and two == pytest.approx([2 * r for r in one], rel=1e-3)
