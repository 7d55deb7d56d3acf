"""pFedHN and pFedHN-PC: shapes, the server's update rule, novel clients, communication."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pflkit import engine
from pflkit.chapters.pfedhn_probes import swap_accuracy
from pflkit.data import FedDataset
from pflkit.engine import Federation, RunConfig, build, run
from pflkit.errors import PflkitError
from pflkit.federated import evaluate, flatten, nbytes, snapshot
from pflkit.methods import get_method
from pflkit.methods.pfedhn import PFedHNServer, client_width, train_novel_embedding
from pflkit.models import build_model
from pflkit.partitions import partition_dataset
from tests.conftest import killed_and_resumed, strip, tiny_config

FAST_HN = {"hn_optimizer": "adam", "hn_lr": 1e-3}  # the authors' SGD 1e-2 needs thousands of steps


def model_bytes(model, prefix=""):
    return sum(p.numel() * p.element_size() for k, p in model.named_parameters() if k.startswith(prefix))


def test_client_width_rule():
    opts = {"widths": "S,M,L"}
    assert [client_width(i, 6, opts) for i in range(6)] == ["S", "S", "M", "M", "L", "L"]
    assert [client_width(i, 4, opts) for i in range(4)] == ["S", "S", "M", "L"]
    assert client_width(0, 4, {"widths": ""}) is None


def test_hypernetwork_outputs_lenet_shapes_for_each_width():
    method = get_method("pfedhn")
    opts = method.resolve_options({"widths": "S,M,L", "hn_hidden": 8})
    cfg = RunConfig(method="pfedhn", model="lenet", clients=3, device="cpu")
    server = PFedHNServer(build_model("lenet", (1, 28, 28), 10), cfg, opts, 3)
    for cid, width in enumerate("SML"):
        want = {k: v.shape for k, v in build_model("lenet", (1, 28, 28), 10, width).state_dict().items()}
        got = {k: v.shape for k, v in server.message_for(cid, 0)["weights"].items()}
        assert got == want, width


def test_one_local_step_gives_lr_times_chain_rule_gradient(tiny_fed):
    """With K = 1 local SGD step (no momentum, no weight decay) on batch B, the client sends
    Δθ_i = −η ∇_θ L_B(θ_i), and the server's gradient −(∇_{φ,v_i} θ_i)ᵀ Δθ_i must equal
        η · ∇_{φ,v_i} L_B(f(·; h(v_i; φ)))
    (autograd through the hypernetwork on the same batch), for φ and the embeddings."""
    eta, cid = 0.1, 1
    cfg = tiny_config(method="pfedhn", local_steps=1, momentum=0.0, weight_decay=0.0, lr=eta)
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    client = clients[cid]
    client.generator.manual_seed(123)
    reply, _ = client.train_round(server.message_for(cid, 0), 0)
    g_server = server.gradients({cid: reply})

    client.generator.manual_seed(123)  # the same batch B
    x, y = next(client.batches())
    theta = server.theta(cid)
    loss = F.cross_entropy(torch.func.functional_call(client.model, theta, (x,)), y)
    g_true = torch.autograd.grad(loss, server.params)

    a, b = torch.cat([g.reshape(-1) for g in g_server]), eta * torch.cat([g.reshape(-1) for g in g_true])
    assert b.norm() > 0
    assert (a - b).norm() / b.norm() < 1e-3
    emb_grad = g_server[-1]  # only client cid's embedding receives a gradient
    assert emb_grad[cid].abs().sum() > 0 and emb_grad[torch.arange(len(emb_grad)) != cid].abs().sum() == 0


def test_novel_client_trains_only_its_embedding(tiny_fed):
    cfg = tiny_config(method="pfedhn")
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    phi = [p.detach().clone() for p in server.phi]
    emb = server.hn.embeddings.weight.detach().clone()
    out = train_novel_embedding(server, clients[3], steps=2, lr=0.5)
    assert all(torch.equal(a, b) for a, b in zip(phi, server.phi))
    new = server.hn.embeddings.weight.detach()
    assert not torch.equal(new[3], emb[3])
    assert torch.equal(new[:3], emb[:3])
    assert out["bytes_down"] == out["bytes_up"] == 2 * model_bytes(clients[3].model)
    assert len(out["losses"]) == 2


@pytest.mark.parametrize("method,options", [("pfedhn", FAST_HN), ("pfedhn-pc", {})])
def test_learns_on_tiny_problem(tiny_fed, method, options):
    cfg = tiny_config(method=method, rounds=4, options=options)
    accs = [h["mean_acc"] for h in run(cfg, tiny_fed(cfg))["history"]]
    assert accs[-1] > 0.6, accs  # 3 classes per client: chance is about 1/3


@pytest.mark.parametrize("method,prefix", [("pfedhn", ""), ("pfedhn-pc", "body.")])
def test_message_size_is_target_size_not_hypernetwork_size(tiny_fed, method, prefix, monkeypatch):
    monkeypatch.setattr(engine, "DIVERGE_FACTOR", math.inf)  # bytes only: a tiny hypernetwork's first losses are high
    sizes = []
    for hidden in (8, 64):
        cfg = tiny_config(method=method, rounds=1, options={"hn_hidden": hidden})
        fed, _, server, clients = build(cfg, tiny_fed(cfg))
        target = model_bytes(clients[0].model, prefix)
        assert nbytes(server.message_for(0, 0)) == target
        assert sum(p.numel() for p in server.hn.parameters()) * 4 > target  # the HN is larger
        comm = run(cfg, fed)["comm"]
        assert comm["bytes_down"] == comm["bytes_up"] == cfg.clients * target
        sizes.append(comm)
    assert sizes[0] == sizes[1]


def test_pc_head_stays_on_client(tiny_fed):
    cfg = tiny_config(method="pfedhn-pc", rounds=2)
    fed, _, server, clients = build(cfg, tiny_fed(cfg))
    assert all(k.startswith("body.") for k in server.message_for(0, 0)["weights"])
    seen = {}

    def grab(rnd, row, server, clients):
        heads = [snapshot(c.model, "head.") for c in clients]
        for c, head in zip(clients, heads):  # the server's message leaves the head alone
            after = snapshot(c.eval_model(server.eval_message(c.cid)), "head.")
            assert all(torch.equal(head[k], after[k]) for k in head)
        seen["heads"] = heads

    run(cfg, fed, on_round=grab)
    h0, h1 = seen["heads"][:2]
    assert any(not torch.equal(h0[k], h1[k]) for k in h0)


def test_fixed_embedding_is_not_trained(tiny_fed):
    cfg = tiny_config(method="pfedhn", rounds=1, options={"embedding": "random"})
    captured = {}
    _, _, server, _ = build(cfg, tiny_fed(cfg))
    emb0, phi0 = server.hn.embeddings.weight.clone(), flatten(dict(enumerate(server.phi))).clone()
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: captured.update(s=s))
    s = captured["s"]
    assert torch.equal(s.hn.embeddings.weight, emb0)  # same seed: same initialisation
    assert not torch.equal(flatten(dict(enumerate(s.phi))), phi0)


def test_spectral_norm_sends_and_differentiates_the_same_theta(tiny_fed):
    cfg = tiny_config(method="pfedhn", options={"spectral_norm": 1})
    _, _, server, clients = build(cfg, tiny_fed(cfg))

    def sent_equals_differentiated():
        sent = server.message_for(0, 0)["weights"]
        again = server.theta(0)
        return all(torch.equal(sent[k], again[k].detach()) for k in sent)

    assert sent_equals_differentiated()
    before = server.message_for(0, 0)["weights"]
    server.aggregate({0: clients[0].train_round(server.message_for(0, 0), 0)[0]}, 0)
    after = server.message_for(0, 0)["weights"]
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert sent_equals_differentiated()


def test_spectral_norm_can_spare_the_heads(tiny_fed):
    from torch.nn.utils import parametrize

    def normed(option):
        cfg = tiny_config(method="pfedhn", options={"spectral_norm": option})
        hn = build(cfg, tiny_fed(cfg))[2].hn
        mlp = [parametrize.is_parametrized(m) for m in hn.mlp if isinstance(m, torch.nn.Linear)]
        heads = [parametrize.is_parametrized(h) for hs in hn.heads.values() for h in hs]
        return all(mlp), any(mlp), all(heads), any(heads)

    assert normed(0) == (False, False, False, False)
    assert normed(1) == (True, True, True, True)
    assert normed(2) == (True, True, False, False)  # the MLP normalised, the heads as they are
    with pytest.raises(PflkitError, match="spectral_norm"):
        normed(3)


def test_widths_run_through_the_engine(monkeypatch):
    monkeypatch.setattr(engine, "DIVERGE_FACTOR", math.inf)  # bytes only: noise images, a 4-unit hypernetwork
    g = torch.Generator().manual_seed(0)
    n = 120
    ds = FedDataset(
        "zeros28", torch.randint(0, 255, (n, 1, 28, 28), dtype=torch.uint8, generator=g),
        torch.arange(n) % 10, torch.zeros(30, 1, 28, 28, dtype=torch.uint8), torch.arange(30) % 10,
        classes=[str(i) for i in range(10)], mean=(0.5,), std=(0.25,),
    )  # fmt: skip
    cfg = RunConfig(
        method="pfedhn", dataset="zeros28", partition="pathological", clients=3, rounds=1, model="lenet",
        classes_per_client=4, local_steps=1, batch_size=16, device="cpu",
        options={"widths": "S,M,L", "hn_hidden": 4},
    )  # fmt: skip
    part = partition_dataset(ds, cfg.partition, cfg.clients, cfg.seed, classes_per_client=4, val_fraction=0.0)
    fed = Federation(ds, part, torch.device("cpu"))
    _, _, _, clients = build(cfg, fed)
    assert [c.model.body[0].out_channels for c in clients] == [8, 16, 32]
    comm = run(cfg, fed)["comm"]
    assert comm["bytes_down"] == sum(model_bytes(c.model) for c in clients)


def test_resume_after_kill_equals_uninterrupted(tiny_fed, tmp_path):
    cfg = tiny_config(method="pfedhn", rounds=3, sample_rate=0.5, options=FAST_HN)
    full = run(cfg, tiny_fed(cfg))
    assert strip(killed_and_resumed(cfg, tiny_fed, tmp_path / "ck.pt")) == strip(full)


def test_proportion_embeddings_are_the_normalised_label_histograms(tiny_fed):
    """C.5: v_i = p̂_i, p̂_{i,c} = n_{i,c} / Σ_j n_{j,c}, sent once as histograms (bytes counted)."""
    cfg = tiny_config(method="pfedhn", rounds=1, options={"embedding": "proportions"})
    fed = tiny_fed(cfg)
    captured = {}
    res = run(cfg, fed, on_round=lambda r, row, s, c: captured.update(s=s))
    counts = fed.partition.class_counts(fed.ds.y_train.numpy())
    expected = counts / counts.sum(0, keepdims=True).clip(min=1)
    emb = captured["s"].hn.embeddings.weight.detach().numpy()
    assert emb.shape == counts.shape  # embedding dimension = number of classes
    assert np.allclose(emb, expected, atol=1e-6)  # and frozen through training
    ref = run(tiny_config(method="pfedhn", rounds=1, options={"embedding": "random"}), fed)
    histogram_bytes = cfg.clients * counts.shape[1] * 8  # int64 label counts, once per client
    assert res["comm"]["bytes_up"] - ref["comm"]["bytes_up"] == histogram_bytes


def test_unknown_embedding_kind_is_one_clear_error(tiny_fed):
    cfg = tiny_config(method="pfedhn", options={"embedding": "learned"})
    with pytest.raises(PflkitError, match="embedding must be one of"):
        build(cfg, tiny_fed(cfg))


def test_shared_embedding_generates_one_model_for_every_client(tiny_fed):
    """The mechanism's control: one trainable v for all clients, so θ_i = θ_j before and after training."""
    cfg = tiny_config(method="pfedhn", rounds=2, options={"embedding": "shared"})
    captured = {}
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: captured.update(s=s))
    s = captured["s"]
    assert s.hn.embeddings.weight.shape[0] == 1 and s.hn.embeddings.weight.requires_grad
    first = s.theta(0)
    for cid in range(1, cfg.clients):
        assert all(torch.equal(first[k], t) for k, t in s.theta(cid).items())
    _, _, own, _ = build(tiny_config(method="pfedhn", rounds=2), tiny_fed(cfg))
    assert not torch.equal(own.theta(0)["head.weight"], own.theta(1)["head.weight"])  # trainable: one v_i each


@pytest.mark.parametrize("method", ["pfedhn", "pfedhn-pc"])
def test_swap_accuracy_has_each_clients_own_model_on_its_diagonal(tiny_fed, method):
    cfg = tiny_config(method=method, rounds=2)
    captured = {}
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: captured.update(s=s, c=c))
    server, clients = captured["s"], captured["c"]
    mix = np.array(swap_accuracy(server, clients))
    assert mix.shape == (cfg.clients, cfg.clients)
    for i, ci in enumerate(clients):
        x, y = ci.data.split("test")
        own = evaluate(ci.eval_model(server.eval_message(i)), x, y)["correct"] / len(y)
        assert mix[i, i] == own  # and client i's model is back to its own afterwards
        assert evaluate(ci.model, x, y)["correct"] / len(y) == own


def test_swap_accuracy_on_a_subset_is_the_full_matrix_restricted_to_it(tiny_fed):
    cfg = tiny_config(method="pfedhn", rounds=2)
    captured = {}
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: captured.update(s=s, c=c))
    server, clients = captured["s"], captured["c"]
    full = np.array(swap_accuracy(server, clients))
    group = [clients[3], clients[1]]  # one size group of Table 2, in any order: clients by id, not by position
    assert (np.array(swap_accuracy(server, group)) == full[np.ix_([3, 1], [3, 1])]).all()


def test_swap_accuracy_under_a_shared_embedding_is_the_same_for_every_donor(tiny_fed):
    cfg = tiny_config(method="pfedhn", rounds=2, options={"embedding": "shared"})
    captured = {}
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: captured.update(s=s, c=c))
    mix = np.array(swap_accuracy(captured["s"], captured["c"]))
    assert (mix == mix[:, :1]).all()  # one generated model: own and swapped are the same


def test_swap_accuracy_generates_each_clients_model_once_and_matches_generating_it_per_pair(tiny_fed):
    cfg = tiny_config(method="pfedhn-pc", rounds=2)
    captured = {}
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: captured.update(s=s, c=c))
    server, clients = captured["s"], captured["c"]
    per_pair = []  # the matrix with θ_j generated afresh for every (i, j)
    for ci in clients:
        x, y = ci.data.split("test")
        model = ci.eval_model(server.eval_message(ci.cid))
        per_pair.append([])
        for cj in clients:
            model.load_state_dict(server.eval_message(cj.cid)["weights"], strict=False)
            per_pair[-1].append(evaluate(model, x, y)["correct"] / len(y))
        model.load_state_dict(server.eval_message(ci.cid)["weights"], strict=False)
    calls = []
    generate = server.eval_message
    server.eval_message = lambda cid: calls.append(cid) or generate(cid)
    assert swap_accuracy(server, clients) == per_pair
    assert sorted(calls) == [c.cid for c in clients]  # n hypernetwork passes, not n²
