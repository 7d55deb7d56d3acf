"""The FeSEM paper's baselines: FedSGD, FedDist (+WS) and CFL."""

import pytest
import torch
import torch.nn.functional as F

from pflkit.engine import build, derive_seed, run
from pflkit.federated import flatten, weighted_average
from tests.conftest import killed_and_resumed, strip, tiny_config
from tests.test_methods import assert_states_equal, final_server_state


def one_round(server, clients, rnd=0):
    uploads = {}
    for c in clients:
        c.generator.manual_seed(derive_seed(0, rnd, 3, c.cid))
        uploads[c.cid] = c.train_round(server.message_for(c.cid, rnd), rnd)[0]
    server.aggregate(uploads, rnd)
    return uploads


# ----------------------------------------------------------------------------- FedSGD


def test_fedsgd_round_is_one_full_batch_gradient_step(tiny_fed):
    cfg = tiny_config(method="fedsgd", local_steps=8, weight_decay=0.0)
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    w = {k: v.clone() for k, v in server.w.items()}
    expected, sizes = [], []
    for c in clients:  # w − η ∇L_k(w) on all of client k's training samples
        model = c.scratch_model()
        model.load_state_dict(w)
        x, y = c.data.split("train")
        grads = torch.autograd.grad(F.cross_entropy(model(x), y), list(model.parameters()))
        expected.append({k: w[k] - cfg.lr * g for (k, _), g in zip(model.named_parameters(), grads)})
        sizes.append(len(y))
    one_round(server, clients)
    for k, v in weighted_average(expected, sizes).items():  # w_{t+1} = Σ n_k/n (w_t − η g_k)
        torch.testing.assert_close(server.w[k], v, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- FedDist


def test_feddist_with_epsilon_one_and_size_weights_is_fedavg(tiny_fed):
    a = final_server_state(tiny_config(method="fedavg"), tiny_fed(tiny_config()))
    cfg = tiny_config(method="feddist", options={"epsilon": 1.0, "size_weighted": True})
    assert_states_equal(a, final_server_state(cfg, tiny_fed(cfg)))


@pytest.mark.parametrize("size_weighted", [False, True])
def test_feddist_steps_epsilon_of_the_way_to_the_clients_mean(tiny_fed, size_weighted):
    cfg = tiny_config(method="feddist", options={"epsilon": 0.25, "size_weighted": size_weighted})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    w = {k: v.clone() for k, v in server.w.items()}
    ups = one_round(server, clients)
    alpha = [u["n"] for u in ups.values()] if size_weighted else [1] * len(ups)
    mean = weighted_average([u["weights"] for u in ups.values()], alpha)
    for k in w:  # w + ε (Σ α_i W_i − w)
        torch.testing.assert_close(server.w[k], w[k] + 0.25 * (mean[k] - w[k]), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- CFL


def test_cfl_without_a_split_is_fedavg(tiny_fed):
    a = final_server_state(tiny_config(method="fedavg"), tiny_fed(tiny_config()))
    cfg = tiny_config(method="cfl")  # warmup 20 > 3 rounds: never splits
    got = {}
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: got.update(w=s.models[0], n=len(s.models)))
    assert got["n"] == 1
    assert_states_equal(a, got["w"])


def crafted_uploads(server, clients, directions):
    """Client i reports θ + Δ_i with Δ_i = directions[i] (in the flattened parameter space)."""
    theta = server.models[0]
    shapes = [(k, v.shape, v.numel()) for k, v in theta.items()]
    uploads = {}
    for c, d in zip(clients, directions):
        flat, state, at = flatten(theta) + d, {}, 0
        for k, shape, n in shapes:
            state[k] = flat[at : at + n].view(shape).clone()
            at += n
        uploads[c.cid] = {"weights": state, "n": c.n_samples()}
    return uploads


def test_cfl_bipartitions_by_cosine_similarity_when_criterion_holds(tiny_fed):
    cfg = tiny_config(method="cfl", clients=6, classes_per_client=2, options={"eps1": 1.5, "eps2": 1.0, "warmup": 0})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    dim = flatten(server.models[0]).numel()
    gen = torch.Generator().manual_seed(0)
    v = torch.randn(dim, generator=gen)
    v = 2 * v / v.norm()  # ‖Δ_i‖ ≈ 2 > ε₂; opposite directions: the size-weighted mean is < ε₁
    sign = [1, 1, 1, -1, -1, -1]
    noise = [0.02 * torch.randn(dim, generator=gen) / dim**0.5 for _ in sign]
    uploads = crafted_uploads(server, clients, [s * v + e for s, e in zip(sign, noise)])
    server.aggregate(uploads, 0)
    assert sorted(map(sorted, server.clusters)) == [[0, 1, 2], [3, 4, 5]]
    for members, model in zip(server.clusters, server.models):  # FedAvg within each new cluster
        ref = weighted_average([uploads[i]["weights"] for i in members], [uploads[i]["n"] for i in members])
        assert_states_equal(ref, model)
    assert server.message_for(3, 1)["weights"] is server.models[server.assignment[3]]


def test_cfl_does_not_split_when_the_mean_update_is_large(tiny_fed):
    cfg = tiny_config(method="cfl", clients=6, classes_per_client=2, options={"eps1": 0.5, "eps2": 1.0, "warmup": 0})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    v = torch.ones(flatten(server.models[0]).numel())
    uploads = crafted_uploads(server, clients, [v * (1 + 0.1 * i) / v.norm() * 2 for i in range(6)])  # all agree
    server.aggregate(uploads, 0)
    assert len(server.models) == 1


def test_cfl_resume_after_a_split_equals_uninterrupted(tiny_fed, tmp_path):
    opts = {"eps1": 1e9, "eps2": 0.0, "warmup": 1}  # split the 4 clients once, after round 1
    cfg = tiny_config(method="cfl", rounds=3, options=opts)
    seen = []
    full = run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: seen.append(len(s.models)))
    assert seen[0] == 1 and seen[-1] >= 2
    assert strip(killed_and_resumed(cfg, tiny_fed, tmp_path / "c", kill_round=3)) == strip(full)
