"""pFedMB: the multi-branch layers (eqs. 1-2), the local update (eqs. 3-4), the aggregation
(eqs. 5-6), the reduction to FedAvg, communication, the command line."""

import subprocess
import sys

import pytest
import torch

from pflkit.engine import build, run
from pflkit.federated import nbytes, snapshot, weighted_average
from pflkit.methods.pfedmb import BranchLayer, combined_model, multi_branch
from pflkit.models import build_model
from tests.conftest import strip, tiny_config


def final_server_weights(cfg, fed):
    captured = {}
    run(cfg, fed, on_round=lambda rnd, row, server, clients: captured.update(w=dict(server.w)))
    return captured["w"]


def test_one_branch_is_fedavg_exactly(tiny_fed):
    """B = 1: α ≡ 1, eq. 3 is void, W = W_1, and eq. 5 is FedAvg's average: the same batches
    give the same global weights, bit for bit (and the same accuracies)."""
    fedavg = final_server_weights(tiny_config(method="fedavg"), tiny_fed(tiny_config()))
    cfg = tiny_config(method="pfedmb", options={"branches": 1})
    one = final_server_weights(cfg, tiny_fed(cfg))
    assert set(one) == {"net." + k for k in fedavg}
    for k, v in fedavg.items():
        assert one["net." + k].shape == (1, *v.shape)
        torch.testing.assert_close(one["net." + k][0], v, rtol=0, atol=0)


@pytest.mark.parametrize("shared", [False, True])
def test_combined_weight_forward_equals_branch_sum(shared):
    torch.manual_seed(0)
    plain = build_model("lenet", (1, 28, 28), 10, 4)  # conv and linear layers
    mb = multi_branch(plain, branches=3, shared_alpha=shared, seed=0)
    with torch.no_grad():
        mb.alpha_logits.normal_()
    alpha = mb.alpha()
    assert alpha.shape == (1 if shared else 5, 3)
    x = torch.randn(7, 1, 28, 28)
    # layer by layer: W_l * x (eq. 1) = Σ_b α_{b,l} (W_{b,l} * x) (eq. 2)
    h = x
    kinds = set()
    for m in mb.net.body:
        if isinstance(m, BranchLayer):
            a = alpha[m.index]
            m.alpha = a
            torch.testing.assert_close(m(h), m.branch_sum(h, a), rtol=1e-5, atol=1e-5)
            kinds.add("conv" if m.conv else "linear")
            m.alpha = None
            h = m.branch_sum(h, a)
        else:
            h = m(h)
    assert kinds == {"conv", "linear"}
    # the whole network: the multi-branch net = the plain net with the combined weights
    with torch.no_grad():
        torch.testing.assert_close(mb(x), combined_model(mb, build_model("lenet", (1, 28, 28), 10, 4))(x))
    assert all(m.alpha is None for _, m in mb.branch_layers())  # nothing left behind for deepcopy


def test_multi_branch_leaves_the_model_alone_and_branches_differ():
    plain = build_model("mlp", (1, 8, 8), 10)
    before = snapshot(plain)
    mb = multi_branch(plain, branches=3, shared_alpha=False, seed=0)
    assert all(torch.equal(before[k], v) for k, v in snapshot(plain).items())
    w = mb.net.body[1].weight  # (B, out, in)
    torch.testing.assert_close(w[0], before["body.1.weight"] * 3**0.5)  # branch 1 = the initial model, ×√B
    assert not torch.equal(w[1], w[2]) and not torch.equal(w[0] / 3**0.5, w[1] / 3**0.5)
    unscaled = multi_branch(plain, branches=3, shared_alpha=False, seed=0, scale_init=False)
    torch.testing.assert_close(unscaled.net.body[1].weight, w / 3**0.5)  # scale_init=false: the draws as they are


@pytest.mark.parametrize("shared", [False, True])
def test_alpha_stays_on_simplex_and_moves(tiny_fed, shared):
    cfg = tiny_config(method="pfedmb", rounds=2, options={"branches": 3, "shared_alpha": shared, "alpha_lr": 5.0})
    seen = {}
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, clients: seen.update(a=[c.alpha() for c in clients]))
    for a in seen["a"]:
        assert a.shape == (1 if shared else 3, 3)
        assert (a >= 0).all()
        torch.testing.assert_close(a.sum(1), torch.ones(len(a)))
        assert (a - 1 / 3).abs().max() > 1e-3  # trained away from the uniform start


def test_local_update_order_alpha_then_weights(tiny_fed):
    """Eq. 3 moves only α (W^t fixed); eq. 4 moves only W (α fixed)."""
    cfg = tiny_config(method="pfedmb", options={"branches": 2})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    c = clients[0]
    c.receive(server.message_for(0, 0))
    w0, a0 = snapshot(c.model, "net."), c.alpha()
    branches = [p for k, p in c.model.named_parameters() if k.startswith("net.")]
    calls = []
    original = c.sgd

    def spy(model=None, *, params=None, **kw):
        params = list(params)
        which = "alpha" if len(params) == 1 and params[0] is c.model.alpha_logits else "W"
        calls.append((which, [p.requires_grad for p in branches]))
        return original(model, params=params, **kw)

    c.sgd = spy
    c.local_update()
    assert [k for k, _ in calls] == ["alpha", "W"]
    assert not any(calls[0][1]) and all(calls[1][1])  # W frozen during eq. 3
    assert not torch.equal(a0, c.alpha())
    assert any(not torch.equal(w0[k], v) for k, v in snapshot(c.model, "net.").items())


def _uploads(server, alphas, ns, values):
    """Uploads whose every branch tensor is the constant ``values[i][b]`` for client i."""
    out = {}
    for i, (a, n, vals) in enumerate(zip(alphas, ns, values)):
        w = {k: torch.stack([torch.full_like(v[b], vals[b]) for b in range(len(vals))]) for k, v in server.w.items()}
        out[i] = {"weights": w, "n": torch.tensor(n), "alpha": a}
    return out


def test_alpha_weighted_aggregation_hand_computed(tiny_fed):
    """Eq. 5 with two clients and B = 2: W_b = Σ_i n_i α^i_b W^i_b / Σ_i n_i α^i_b."""
    cfg = tiny_config(method="pfedmb", options={"branches": 2, "shared_alpha": True})
    _, _, server, _ = build(cfg, tiny_fed(cfg))
    # client 0 puts all its weight on branch 0, client 1 splits 1/4 : 3/4
    alphas = [torch.tensor([[1.0, 0.0]]), torch.tensor([[0.25, 0.75]])]
    server.aggregate(_uploads(server, alphas, [10, 30], [(1.0, 5.0), (2.0, 3.0)]), 0)
    for v in server.w.values():
        # branch 0: (10·1·1 + 30·¼·2) / (10 + 7.5) = 25 / 17.5; branch 1: only client 1 → 3
        torch.testing.assert_close(v[0], torch.full_like(v[0], 25 / 17.5))
        torch.testing.assert_close(v[1], torch.full_like(v[1], 3.0))
    # a branch nobody puts weight on keeps its weights
    before = {k: v.clone() for k, v in server.w.items()}
    zero = [torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0]])]
    server.aggregate(_uploads(server, zero, [10, 30], [(1.0, 5.0), (2.0, 3.0)]), 1)
    for k, v in server.w.items():
        torch.testing.assert_close(v[0], torch.full_like(v[0], (10 + 60) / 40))
        torch.testing.assert_close(v[1], before[k][1], rtol=0, atol=0)


def test_alpha_weighted_aggregation_per_layer_rows(tiny_fed):
    """Per-layer α: each layer's branches are weighted by that layer's row of α."""
    cfg = tiny_config(method="pfedmb", options={"branches": 2})
    _, _, server, _ = build(cfg, tiny_fed(cfg))
    layers = sorted(set(server.rows.values()))
    assert len(layers) == 3  # the tiny MLP's three linear layers
    # client 0 owns branch 0 and client 1 branch 1 in layer 0; the other way round elsewhere
    a0 = torch.tensor([[1.0, 0.0]] + [[0.0, 1.0]] * (len(layers) - 1))
    server.aggregate(_uploads(server, [a0, 1 - a0], [10, 30], [(1.0, 2.0), (3.0, 4.0)]), 0)
    for k, v in server.w.items():
        if server.rows[k] == 0:
            assert float(v[0].mean()) == 1.0 and float(v[1].mean()) == 4.0
        else:
            assert float(v[0].mean()) == 3.0 and float(v[1].mean()) == 2.0


def test_plain_averaging_is_data_size_average(tiny_fed):
    """alpha_weighted = 0: eq. 6, the FedAvg average by n_i whatever the α."""
    cfg = tiny_config(method="pfedmb", options={"branches": 2, "alpha_weighted": False})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    uploads = {c.cid: c.train_round(server.message_for(c.cid, 0), 0)[0] for c in clients[:3]}
    expected = weighted_average([u["weights"] for u in uploads.values()], [u["n"] for u in uploads.values()])
    server.aggregate(uploads, 0)
    for k in expected:
        torch.testing.assert_close(server.w[k], expected[k], rtol=0, atol=0)


def test_upload_is_b_times_fedavg(tiny_fed):
    B = 3
    cfg = tiny_config(method="pfedmb", rounds=1, options={"branches": B})
    fed = tiny_fed(cfg)
    mb_comm = run(cfg, fed)["comm"]
    fa_comm = run(tiny_config(method="fedavg", rounds=1), fed)["comm"]
    _, _, server, clients = build(cfg, fed)
    model_bytes = nbytes(snapshot(clients[0].plain))
    alpha_bytes = nbytes(clients[0].alpha())
    n_bytes = 8
    assert fa_comm["bytes_up"] == cfg.clients * (model_bytes + n_bytes)
    assert mb_comm["bytes_up"] == cfg.clients * (B * model_bytes + alpha_bytes + n_bytes)  # W^{t+1,i}, α, n
    assert mb_comm["bytes_down"] == B * fa_comm["bytes_down"]  # W^t
    assert abs(mb_comm["bytes_up"] / fa_comm["bytes_up"] - B) < 0.01


def test_evaluated_with_the_plain_combined_model(tiny_fed):
    cfg = tiny_config(method="pfedmb", rounds=1, options={"branches": 2})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    c = clients[1]
    model = c.eval_model(server.eval_message(1))
    assert type(model) is type(c.plain) and not any(isinstance(m, BranchLayer) for m in model.modules())
    x = c.data.split("test")[0]
    with torch.no_grad():
        torch.testing.assert_close(model(x), c.model(x))


def test_cli_runs_pfedmb_with_options(tmp_path):
    out = tmp_path / "r.json"
    args = ["run", "pfedmb", "--dataset", "digits", "--model", "mlp", "--clients", "3", "--rounds", "1",
            "--local-steps", "2", "--branches", "2", "--shared-alpha", "1", "--alpha-weighted", "0",
            "--eval-finetune-epochs", "1", "--no-progress", "--out", str(out)]  # fmt: skip
    r = subprocess.run([sys.executable, "-m", "pflkit", *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    import json

    d = json.loads(out.read_text())
    assert d["config"]["options"] == {
        "branches": 2,
        "shared_alpha": True,
        "alpha_weighted": False,
        "scale_init": True,
        "alpha_lr": 1.0,
        "alpha_momentum": -1.0,
    }
    assert d["config"]["eval_finetune_epochs"] == 1


def test_alpha_is_frozen_in_the_w_phase_and_each_phase_runs_e_epochs(tiny_fed):
    """Eq. 4 leaves α^{t+1,i} as eq. 3 left it; both phases run the E local epochs."""
    cfg = tiny_config(method="pfedmb", local_steps=None, local_epochs=2, batch_size=32, options={"branches": 2})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    c = clients[0]
    c.receive(server.message_for(0, 0))
    calls, original_sgd, original_batches = [], c.sgd, c.batches

    def count_batches(*a, **kw):
        for b in original_batches(*a, **kw):
            calls[-1]["batches"] += 1
            yield b

    def spy(model=None, *, params=None, **kw):
        params = list(params)
        phase = "alpha" if len(params) == 1 and params[0] is c.model.alpha_logits else "W"
        calls.append({"phase": phase, "alpha_grad": c.model.alpha_logits.requires_grad, "batches": 0,
                      "alpha_before": c.alpha(), "momentum": kw.get("momentum")})  # fmt: skip
        out = original_sgd(model, params=params, **kw)
        calls[-1]["alpha_after"] = c.alpha()
        return out

    c.sgd, c.batches = spy, count_batches
    c.local_update()
    per_epoch = -(-c.data.n_train // cfg.batch_size)
    assert [k["phase"] for k in calls] == ["alpha", "W"]
    assert [k["batches"] for k in calls] == [2 * per_epoch, 2 * per_epoch]  # E epochs each
    w_phase = calls[1]
    assert not w_phase["alpha_grad"] and torch.equal(w_phase["alpha_before"], w_phase["alpha_after"])
    assert not torch.equal(calls[0]["alpha_before"], calls[0]["alpha_after"])
    assert calls[0]["momentum"] is None  # default: the run's momentum


def test_alpha_momentum_option(tiny_fed):
    def alpha_after(momentum):
        cfg = tiny_config(method="pfedmb", options={"branches": 2, "alpha_momentum": momentum})
        _, _, server, clients = build(cfg, tiny_fed(cfg))
        c = clients[0]
        c.receive(server.message_for(0, 0))
        seen = []
        original = c.optimizer
        c.optimizer = lambda params, lr=None, momentum=None: seen.append(momentum) or original(params, lr, momentum)
        c.generator.manual_seed(0)
        c.local_update()
        return seen[0], c.alpha()

    m_default, a_default = alpha_after(-1.0)
    m_zero, a_zero = alpha_after(0.0)
    assert m_default is None and m_zero == 0.0 and not torch.equal(a_default, a_zero)


def test_alpha_weighted_aggregation_on_conv_layers():
    """Eq. 5 on a convolution's (B, out, in, k, k) weight, hand-computed."""
    from pflkit.data import FedDataset
    from pflkit.engine import Federation, RunConfig

    g = torch.Generator().manual_seed(0)
    ds = FedDataset(
        "zeros28", torch.randint(0, 255, (60, 1, 28, 28), dtype=torch.uint8, generator=g), torch.arange(60) % 10,
        torch.zeros(20, 1, 28, 28, dtype=torch.uint8), torch.arange(20) % 10,
        classes=[str(i) for i in range(10)], mean=(0.5,), std=(0.25,),
    )  # fmt: skip
    cfg = RunConfig(method="pfedmb", dataset="zeros28", clients=2, model="lenet", options={"branches": 2}, device="cpu")
    _, _, server, _ = build(cfg, Federation.from_config(cfg, ds=ds))
    conv = [k for k in server.rows if k.endswith("weight") and server.w[k].dim() == 5]
    assert conv  # LeNet's two convolutions are branched
    rows = len(set(server.rows.values()))
    alphas = [torch.tensor([[0.5, 0.5]] * rows), torch.tensor([[0.0, 1.0]] * rows)]
    server.aggregate(_uploads(server, alphas, [20, 60], [(1.0, 2.0), (7.0, 3.0)]), 0)
    for k in conv:
        # branch 0: only client 0 → 1; branch 1: (20·½·2 + 60·1·3) / (10 + 60) = 200 / 70
        torch.testing.assert_close(server.w[k][0], torch.full_like(server.w[k][0], 1.0))
        torch.testing.assert_close(server.w[k][1], torch.full_like(server.w[k][1], 200 / 70))


def test_pilot_grid_over_pfedmb_options():
    """The chapter's pilot: a grid over η_α (an option) and the learning rate (a config field),
    with and without momentum on α and both initial scales, names one arm per setting."""
    from pflkit.experiments import grid

    base = tiny_config(method="pfedmb", options={"branches": 2, "alpha_momentum": 0.0, "scale_init": False})
    arms = grid("pFedMB", base, alpha_lr=[0.1, 1.0], lr=[0.01, 0.05])
    assert list(arms) == [
        "pFedMB · alpha_lr=0.1, lr=0.01", "pFedMB · alpha_lr=0.1, lr=0.05",
        "pFedMB · alpha_lr=1, lr=0.01", "pFedMB · alpha_lr=1, lr=0.05",
    ]  # fmt: skip
    cfg = arms["pFedMB · alpha_lr=1, lr=0.05"]
    assert cfg.lr == 0.05 and cfg.options == {
        "branches": 2,
        "alpha_momentum": 0.0,
        "scale_init": False,
        "alpha_lr": 1.0,
    }


def test_reading_fedamp_xi_in_a_probe_changes_nothing(tiny_fed):
    """The chapter's FedAMP diagnostic reads ξ_i· from the server after every round: the run must
    be the same as without the probe, and every row of ξ is a convex combination."""
    cfg = tiny_config(method="fedamp", rounds=3, options={"sigma": 1.0})
    rows = []

    def probe(rnd, row, server, clients):
        xi = torch.stack([server.xi(i) for i in range(len(server.w))])
        rows.append(xi)

    with_probe = run(cfg, tiny_fed(cfg), on_round=probe)
    without = run(cfg, tiny_fed(cfg))
    assert strip(with_probe) == strip(without)
    for xi in rows:
        assert (xi >= -1e-12).all()
        torch.testing.assert_close(xi.sum(1), torch.ones(len(xi), dtype=xi.dtype))


def test_fedamp_records_the_self_weight_it_sent_every_round(tiny_fed):
    """FedAMP's server keeps ξ_{i,i} of every cloud model it sent, one {client: ξ_ii} per round
    (the chapter's every-round diagnostic): each equals ξ(i)[i] at the time it was sent, and a run
    killed and resumed from its checkpoint keeps the record of the rounds before."""
    cfg = tiny_config(method="fedamp", rounds=3, options={"sigma": 1.0})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    sent = {c.cid: float(server.xi(c.cid)[c.cid]) for c in clients}
    replies = {c.cid: c.train_round(server.message_for(c.cid, 0), 0)[0] for c in clients}
    server.aggregate(replies, 0)
    assert server.self_trace == [sent] and server.sent_self == {}
    got = {}
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: got.update(trace=list(s.self_trace)))
    assert len(got["trace"]) == cfg.rounds and all(len(t) == cfg.clients for t in got["trace"])
    assert all(0 <= v <= 1 for t in got["trace"] for v in t.values())
    state = server.state_dict()
    server.self_trace = []
    server.load_state_dict(state)
    assert server.self_trace == [sent]
