"""FedEM: the reduction to FedAvg, the E- and M-steps, the mixture predictor, the bytes, and
checkpoints."""

import math

import pytest
import torch
import torch.nn.functional as F

from pflkit.engine import build, run
from pflkit.errors import PflkitError
from pflkit.federated import evaluate, nbytes, snapshot
from pflkit.methods.fedem import responsibilities
from tests.conftest import killed_and_resumed, strip, tiny_config

LOSSES = ("train_loss", "loss", "val_loss")


def trained(client, server, rnd=0):
    reply = client.train_round(server.message_for(client.cid, rnd), rnd)[0]
    return reply


# ----------------------------------------------------------------------------- reduction


def test_fedem_with_one_component_is_fedavg(tiny_fed):
    """M = 1: q ≡ 1 and π ≡ 1, so the same batches give the same weights, bit for bit, and the same
    bytes.  Only the losses may differ in the last float32 digits: the weighted loss Σ q ℓ / n and
    the log-mixture log_softmax(f) are summed and shifted in another order than cross_entropy(f)."""
    got = {}
    cfg = tiny_config(method="fedavg")
    avg = run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: got.update(fedavg=dict(s.w)))
    cfg = tiny_config(method="fedem", options={"components": 1})
    em = run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: got.update(fedem=dict(s.thetas[0])))
    for k, v in got["fedavg"].items():
        torch.testing.assert_close(got["fedem"][k], v, rtol=0, atol=0)
    assert em["comm"] == avg["comm"]
    for a, b in zip(strip(avg), strip(em), strict=True):
        assert {k: v for k, v in a.items() if k not in LOSSES} == {k: v for k, v in b.items() if k not in LOSSES}
        for k in LOSSES:
            assert math.isclose(a[k], b[k], rel_tol=1e-6), (k, a[k], b[k])


def test_fedem_needs_a_component(tiny_fed):
    cfg = tiny_config(method="fedem", options={"components": 0})
    with pytest.raises(PflkitError, match="components >= 1"):
        build(cfg, tiny_fed(cfg))


# ----------------------------------------------------------------------------- E- and M-steps


def test_responsibilities_are_stable_and_sum_to_one():
    log_pi = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64).log()
    log_lik = -torch.rand(50, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 5
    q = responsibilities(log_pi, log_lik)
    naive = log_pi.exp() * log_lik.exp()
    torch.testing.assert_close(q, naive / naive.sum(1, keepdim=True))
    torch.testing.assert_close(q.sum(1), torch.ones(50, dtype=torch.float64), rtol=0, atol=1e-12)
    # likelihoods that underflow (e^-1000): the naive formula gives 0/0, log-sum-exp the right answer
    far = responsibilities(torch.tensor([0.5, 0.5]).double().log(), torch.tensor([[-1000.0, -1001.0]]).double())
    torch.testing.assert_close(far, torch.tensor([[1.0, math.exp(-1)]]).double() / (1 + math.exp(-1)))
    # a component with π_m = 0 gets no responsibility
    zero = responsibilities(torch.tensor([0.0, 1.0]).double().log(), log_lik[:, :2])
    assert (zero[:, 0] == 0).all() and (zero[:, 1] == 1).all()


def test_client_moves_pi_toward_the_component_that_fits_its_data(tiny_fed):
    cfg = tiny_config(method="fedem", options={"components": 2})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    c = clients[0]
    torch.testing.assert_close(c.pi, torch.full((2,), 0.5, dtype=torch.float64))  # uniform start
    fitted = c.components[0]  # component 2 := the initial model after 60 steps of SGD on client 0's data
    fitted.load_state_dict(server.thetas[1])
    c.sgd(fitted, steps=60)
    server.thetas[1] = snapshot(fitted)
    # the E-step the client will take, computed beside it
    c.receive(server.message_for(0, 0)["models"])
    x, y = c.data.split("train")
    q = responsibilities(c.pi.log(), c.log_likelihoods(x, y))
    torch.testing.assert_close(q.sum(1), torch.ones(len(y), dtype=torch.float64), rtol=0, atol=1e-12)
    assert (q >= 0).all()
    trained(c, server)
    torch.testing.assert_close(c.pi, q.mean(0), rtol=0, atol=0)  # M-step: π_m = mean_i q(z_i = m)
    assert c.pi[1] > 0.9, c.pi  # the fitted component takes (nearly) all of client 0's samples


def test_pi_stays_on_the_simplex_during_a_run(tiny_fed):
    cfg = tiny_config(method="fedem", rounds=2, options={"components": 3})
    seen = []
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: seen.extend(cl.pi.clone() for cl in c))
    assert len(seen) == 2 * cfg.clients
    for pi in seen:
        assert (pi >= 0).all() and abs(float(pi.sum()) - 1) < 1e-12, pi
    assert any(not torch.allclose(pi, torch.full((3,), 1 / 3, dtype=torch.float64)) for pi in seen)  # π learns


def test_client_is_evaluated_with_the_mixture_of_its_components(tiny_fed):
    cfg = tiny_config(method="fedem", options={"components": 3})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    c = clients[1]
    c.pi = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64)
    mixture = c.eval_model(server.eval_message(1))
    x, y = c.data.split("test")
    with torch.no_grad():
        want = sum(p * F.softmax(f(x), dim=1) for p, f in zip(c.pi.float(), c.components))
        out = mixture(x)
    torch.testing.assert_close(out.exp(), want)  # log Σ_m π_m softmax(f_θm(x))
    torch.testing.assert_close(out.exp().sum(1), torch.ones(len(x)))
    ev = evaluate(mixture, x, y)
    assert ev["correct"] == int((want.argmax(1) == y).sum())
    assert math.isclose(ev["loss"], float(-want[torch.arange(len(y)), y].log().mean()), rel_tol=1e-5)
    assert nbytes(server.eval_message(1)) == 3 * nbytes(server.thetas[0])


# ----------------------------------------------------------------------------- bytes


def test_upload_is_m_models_and_n(tiny_fed):
    m = 3
    cfg = tiny_config(method="fedem", rounds=2, options={"components": m})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    model_bytes = nbytes(server.thetas[0])
    reply = trained(clients[0], server)
    assert len(reply["models"]) == m
    assert nbytes(reply) == m * model_bytes + nbytes(clients[0].n_samples())
    res = run(cfg, tiny_fed(cfg))
    per_client = cfg.rounds * cfg.clients
    assert res["comm"]["bytes_up"] == per_client * (m * model_bytes + 8)  # n: one int64
    assert res["comm"]["bytes_down"] == per_client * m * model_bytes


# ----------------------------------------------------------------------------- checkpoints


def test_resume_after_kill_equals_uninterrupted(tiny_fed, tmp_path):
    """The components (server) and every client's π survive a checkpoint."""
    cfg = tiny_config(method="fedem", rounds=3, sample_rate=0.5, options={"components": 2})
    full = run(cfg, tiny_fed(cfg))
    resumed = killed_and_resumed(cfg, tiny_fed, tmp_path / "ck.pt")
    assert strip(resumed) == strip(full)
