"""FedMN: the modular network, the routing decision, block-wise communication, the options that
reproduce the authors' code, and the reduction to FedAvg."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from pflkit.engine import LocalClients, build, run
from pflkit.errors import PflkitError
from pflkit.federated import derive_seed, nbytes, weighted_average
from pflkit.methods.fedmn import ALL_PATHS, APART, PRETRAINING, ROUTING, block_keys, parse_arch, temperature
from tests.conftest import killed_and_resumed, strip, tiny_config

SMALL = {"hidden": 16, "label_dim": 4}


def cfg_(**opts):
    return tiny_config(method="fedmn", rounds=4, options={**SMALL, **opts})


@pytest.mark.parametrize(
    "opts,parts",
    [
        ({}, [PRETRAINING, PRETRAINING, ROUTING, ROUTING]),  # the paper's: encoders pretrained, then routing
        ({"pretrain": "all-paths"}, [ALL_PATHS, ALL_PATHS, ROUTING, ROUTING]),
        ({"start_apart": 1.0}, [PRETRAINING, PRETRAINING, APART, ROUTING]),  # ours: the switch round set apart
        ({"force_paths": 1}, [PRETRAINING, PRETRAINING, ALL_PATHS, ALL_PATHS]),  # the control: no routing
        ({"pretrain_fraction": 0.0}, [ROUTING] * 4),
    ],
)
def test_one_schedule_names_each_rounds_part_for_server_and_client(tiny_fed, opts, parts):
    cfg = cfg_(**{"pretrain_fraction": 0.5, **opts})
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    assert [server.phase(r) for r in range(4)] == parts
    # the server's first message of each part: the keys the client's round reads
    first = {PRETRAINING: "pretrain", ALL_PATHS: "weights", APART: "router_h", ROUTING: "blocks"}
    for r, part in enumerate(parts):
        if part in (ROUTING, APART):  # a routing round asks for its blocks first (Alg. 1, l. 6-7)
            server.receive_request(0, clients[0].request(server.pre_message(0, r), r), r)
            if part == APART:
                server.embeddings = {i: server.embeddings[0] for i in range(3)}  # every client's input in
        assert first[part] in server.message_for(0, r)


def test_paths_and_eq13(tiny_fed):
    cfg = cfg_(arch="2,3,2")
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    net = clients[0].model
    assert net.n_paths == 2 * 3 + 3 * 2 + 2  # E = Σ n_l n_{l+1} + n_L
    x = clients[0].data.split("train")[0][:5]
    net.eval()
    # only encoder 0 → block (layer 2) 1 → block (layer 3) 0 → output
    c = torch.zeros(net.n_paths)
    c[1 * 2 + 0] = 1  # C^(2)[1, 0]
    c[6 + 0 * 3 + 1] = 1  # C^(3)[0, 1]
    c[12 + 0] = 1  # output ← last block 0
    expected = net.blocks[1][0](net.blocks[0][1](net.encoders[0](x)))
    assert torch.allclose(net(x, c), expected)
    assert net.active(c) == [[False, True, False], [True, False]]
    # two connected inputs are averaged (eq. 13)
    c[1 * 2 + 1] = 1
    u = (net.encoders[0](x) + net.encoders[1](x)) / 2
    assert torch.allclose(net(x, c), net.blocks[1][0](net.blocks[0][1](u)))
    # a block whose only input is inactive is inactive itself
    c2 = torch.zeros(net.n_paths)
    c2[6 + 0 * 3 + 1] = 1
    c2[12] = 1
    assert net.active(c2) == [[False, False, False], [False, False]]
    assert torch.equal(net(x, c2), torch.zeros(5, 10))  # nothing reaches the output


def fedavg_round_by_hand(cfg, clients, start, decision_noise=False):
    """Round 0 of FedAvg on the modular network with every path on, by hand: each client from ``start``, the
    engine's batches (after the decision's noise draw, eq. 5, when the round routes), plain SGD on everything but
    the router; then the size-weighted average of everything but the router."""
    by_hand = []
    for c in clients:
        net = copy.deepcopy(start)
        c.generator.manual_seed(derive_seed(cfg.seed, 0, 3, c.cid))
        if decision_noise:
            torch.rand(net.n_paths, generator=c.generator)
        opt = torch.optim.SGD([p for n, p in net.named_parameters() if not n.startswith("router.")], lr=cfg.lr,
                              momentum=cfg.momentum)  # fmt: skip
        for x, y in c.batches():
            loss = F.cross_entropy(net(x, torch.ones(net.n_paths)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        by_hand.append(({k: v for k, v in net.state_dict().items() if not k.startswith("router.")}, c.data.n_train))
    return weighted_average([s for s, _ in by_hand], [n for _, n in by_hand])


def test_all_paths_on_with_one_block_per_layer_is_a_fedavg_round(tiny_fed):
    cfg = cfg_(arch="1,1,1", force_paths=1, dropout=0.0)
    fed = tiny_fed(cfg)
    _, _, server, clients = build(cfg, fed)
    expected = fedavg_round_by_hand(cfg, clients, copy.deepcopy(clients[0].model))
    ran = run(dataclasses_replace(cfg, rounds=1), fed, on_round=lambda r, row, s, cl: server_state.update(s.theta))
    assert ran["history"]
    for k, v in expected.items():
        assert torch.allclose(server_state[k], v, atol=1e-6), k


def test_a_routed_round_with_every_path_on_is_a_fedavg_round(tiny_fed):
    """The routed round itself (router and encoders first, the request, the active blocks, the block-wise
    average), not force_paths: with every binary decision 1 it is FedAvg on the modular network."""
    cfg = cfg_(arch="2,2,2", pretrain_fraction=0.0, decisions="binary", dropout=0.0)
    fed = tiny_fed(cfg)

    def always_on(server, clients=None):  # a router that says "on" to every path: G = 20, so Π ≈ 1
        for k in server.theta:
            if k.startswith("router.h."):
                server.theta[k] = torch.full_like(server.theta[k], 20.0 if k.endswith("bias") else 0.0)

    _, _, server, clients = build(cfg, fed)
    always_on(server)
    start = copy.deepcopy(clients[0].model)
    start.load_state_dict(server.theta)
    expected = fedavg_round_by_hand(cfg, clients, start, decision_noise=True)
    after = {}
    run(
        dataclasses_replace(cfg, rounds=1),
        fed,
        on_setup=always_on,
        on_round=lambda r, row, s, cl: after.update(s.theta),
    )
    for k, v in expected.items():
        assert torch.allclose(after[k], v, atol=1e-6), k


server_state: dict = {}


def dataclasses_replace(cfg, **kw):
    import dataclasses

    return dataclasses.replace(cfg, **kw)


def test_upload_holds_exactly_the_active_blocks(tiny_fed):
    cfg = cfg_(arch="2,3,2", pretrain_fraction=0.0)
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    c = clients[0]
    c.generator.manual_seed(1)
    pre = server.pre_message(0, 0)
    assert set(pre) == {"router", "encoders"}
    request = c.request(pre, 0)
    server.receive_request(0, request, 0)
    msg = server.message_for(0, 0)
    reply, _ = c.train_round(msg, 0)
    active = c.model.active(c.decision[0])
    state = c.model.state_dict()
    want = [k for li, row in enumerate(active) for j, on in enumerate(row) if on for k in block_keys(state, li, j)]
    assert sorted(reply["blocks"]) == sorted(want) and sorted(msg["blocks"]) == sorted(want)
    assert nbytes(reply["blocks"]) == sum(state[k].numel() * state[k].element_size() for k in want)
    assert request["active"].dtype == torch.bool and len(request["active"]) == 3 + 2
    assert {k.split(".")[0] for k in reply["shared"]} == {"encoders", "router"}


def test_router_learns_from_the_task_loss_unless_the_authors_option(tiny_fed):
    def router_moves(**opts):
        cfg = cfg_(arch="2,2,2", pretrain_fraction=0.0, **opts)
        _, _, server, clients = build(cfg, tiny_fed(cfg))
        c = clients[0]
        before = {k: v.clone() for k, v in c.model.router.state_dict().items()}
        for seed in range(50):  # a decision that connects some encoder to the output (else nothing learns)
            c.generator.manual_seed(seed)
            request = c.request(server.pre_message(0, 0), 0)
            if c.model.active(c.decision[0])[-1] and any(c.model.active(c.decision[0])[-1]):
                break
        server.receive_request(0, request, 0)
        c.train_round(server.message_for(0, 0), 0)
        return any(not torch.equal(before[k], v) for k, v in c.model.router.state_dict().items())

    assert router_moves()
    assert router_moves(decisions="softmax")
    assert not router_moves(router_grad=0)  # the authors' `.item()`: no gradient reaches the router


@pytest.mark.parametrize("decisions", ["relaxed", "softmax"])
def test_router_trains_inside_local_training_as_algorithm_1(tiny_fed, decisions):
    """router_step=batch (the default, Alg. 1 l. 19): with one local step on a batch holding every
    training sample and plain SGD, the router moves by exactly −router_lr × the task loss's gradient
    through eqs. 13, 5 and 9, in the same step as the network; router_step=round keeps the stored runs' key."""
    cfg = cfg_(arch="2,2,2", pretrain_fraction=0.0, dropout=0.0, router_lr=0.5, decisions=decisions)
    cfg = dataclasses_replace(cfg, local_steps=1, local_epochs=1, batch_size=10_000, momentum=0.0)
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    c = clients[0]
    for seed in range(50):  # a decision that connects some encoder to the output
        c.generator.manual_seed(seed)
        request = c.request(server.pre_message(0, 0), 0)
        if any(c.model.active(c.decision[0])[-1]):
            break
    server.receive_request(0, request, 0)
    message = server.message_for(0, 0)
    mask, _, noise, tau = c.decision
    net = copy.deepcopy(c.model)
    net.load_state_dict(message["blocks"], strict=False)
    x, y = c.data.split("train")
    loss = F.cross_entropy(net(x, c.weights(mask, c.path_values.__func__(SimpleNamespace(model=net, opt=c.opt), x, y,
                                                                           noise, tau))), y)  # fmt: skip
    params = dict(net.router.named_parameters())
    grads = dict(zip(params, torch.autograd.grad(loss, list(params.values()), allow_unused=True)))
    c.train_round(message, 0)
    for k, p in c.model.router.named_parameters():
        want = params[k].detach() - 0.5 * (grads[k] if grads[k] is not None else 0)
        torch.testing.assert_close(p.detach(), want, rtol=1e-4, atol=1e-6)
    assert any(grads[k] is not None and grads[k].abs().max() > 0 for k in grads)  # the step is not empty
    from pflkit.store import canonical

    old = canonical(cfg_(router_step="round"), 1)["options"]
    assert "router_step" not in old  # a stored run of the one-step-per-round reading keeps its key
    assert canonical(cfg_(), 1)["options"]["router_step"] == "batch"


def test_temperature_schedule():
    cfg = cfg_(pretrain_fraction=0.25)
    cfg = dataclasses_replace(cfg, rounds=9)
    opts = {"tau_start": 1.0, "tau_end": 0.1, "anneal": 1, "pretrain_fraction": 0.25}
    taus = [temperature(r, cfg, opts) for r in range(9)]
    assert taus[0] == taus[2] == 1.0  # pretraining rounds 0, 1 and the first routing round
    assert taus[-1] == pytest.approx(0.1) and all(a > b for a, b in zip(taus[2:], taus[3:]))
    assert taus[5] == pytest.approx(1.0 * 0.1 ** (3 / 6))  # exponential decay
    assert {temperature(r, cfg, {**opts, "anneal": 0}) for r in range(9)} == {1.0}


def test_shared_modules_use_one_set_of_weights_per_layer(tiny_fed):
    cfg = cfg_(arch="2,3,2", shared_modules=1)
    _, _, _, clients = build(cfg, tiny_fed(cfg))
    net = clients[0].model
    assert net.block(0, 2) is net.blocks[0][0] and net.block(1, 1) is net.blocks[1][0]
    assert len(net.encoders) == len(net.pre_heads) == 1  # the n_1 = 2 encoders are one instance, pretrained as one
    x = clients[0].data.split("train")[0][:4]
    net.eval()
    only_encoder_1 = torch.tensor([0.0, 1, 0, 1, 0, 1] + [1.0] * 6 + [1, 1])  # layer 1 reads encoder node 1 only
    only_encoder_0 = torch.tensor([1.0, 0, 1, 0, 1, 0] + [1.0] * 6 + [1, 1])
    assert net.n_paths == len(only_encoder_0)
    assert torch.equal(net(x, only_encoder_0), net(x, only_encoder_1))  # both nodes carry the same encoder


def test_without_sharing_every_encoder_node_has_its_own_encoder(tiny_fed):
    cfg = cfg_(arch="2,3,2")
    net = build(cfg, tiny_fed(cfg))[3][0].model
    assert len(net.encoders) == 2 and net.encoders[0] is not net.encoders[1]


def test_pretraining_then_routing_bytes_and_resume(tiny_fed, tmp_path):
    cfg = cfg_(arch="2,2,2", pretrain_fraction=0.5)
    full = run(cfg, tiny_fed(cfg))
    assert full["comm"]["bytes_up"] > 0 and len(full["round_loss"]) == 4
    assert strip(killed_and_resumed(cfg, tiny_fed, tmp_path / "ck.pt")) == strip(full)


def test_bad_options_are_one_clear_error(tiny_fed):
    with pytest.raises(PflkitError, match="arch"):
        parse_arch("2")
    cfg = cfg_(decisions="gumbel")
    with pytest.raises(PflkitError, match="decisions"):
        build(cfg, tiny_fed(cfg))


def test_pretraining_rounds_are_evaluated_as_they_train(tiny_fed):
    cfg = cfg_(arch="2,2,2", pretrain_fraction=0.5, pretrain="all-paths")
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    server.aggregate({}, 0)  # round 0 (pretraining) done
    assert "all_paths" in server.eval_message(0)
    model = clients[0].eval_model(server.eval_message(0))
    assert torch.equal(model.c, torch.ones(clients[0].model.n_paths))
    server.aggregate({}, 2)  # round 2 (routing) done
    assert "all_paths" not in server.eval_message(0)
    cfg = cfg_(arch="2,2,2", pretrain_fraction=0.5)  # the paper's: the encoder models' mean logits
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    server.aggregate({}, 0)
    model = clients[0].eval_model(server.eval_message(0))
    x = clients[0].data.split("test")[0][:4]
    net = clients[0].model.eval()
    want = (net.pre_heads[0](net.encoders[0](x)) + net.pre_heads[1](net.encoders[1](x))) / 2
    assert torch.allclose(model(x), want)


def test_encoder_pretraining_is_fedavg_on_each_encoder_model(tiny_fed):
    cfg = cfg_(arch="2,2,2", pretrain_fraction=0.5, dropout=0.0)
    fed = tiny_fed(cfg)
    _, _, server, clients = build(cfg, fed)
    start = copy.deepcopy(clients[0].model)
    msg = server.message_for(0, 0)
    assert {k.split(".")[0] for k in msg["pretrain"]} == {"encoders", "pre_heads"}  # nothing else goes down
    by_hand = []
    for c in clients:  # FedAvg on encoder j + its head, for every j, the same batches
        models = [
            torch.nn.Sequential(copy.deepcopy(start.encoders[j]), copy.deepcopy(start.pre_heads[j])) for j in (0, 1)
        ]
        opts = [torch.optim.SGD(m.parameters(), lr=cfg.lr, momentum=cfg.momentum) for m in models]
        c.generator.manual_seed(derive_seed(cfg.seed, 0, 3, c.cid))
        for x, y in c.batches():
            for m, o in zip(models, opts):
                loss = F.cross_entropy(m(x), y)
                o.zero_grad()
                loss.backward()
                o.step()
        state = {f"{part}.{j}.{k}": v for j, m in enumerate(models)
                 for i, part in enumerate(("encoders", "pre_heads")) for k, v in m[i].state_dict().items()}  # fmt: skip
        by_hand.append((state, c.data.n_train))
    expected = weighted_average([s for s, _ in by_hand], [n for _, n in by_hand])
    seen = {}  # the server's state after each round; with 2 rounds, round 0 pretrains
    run(dataclasses_replace(cfg, rounds=2), fed, on_round=lambda r, row, s, cl: seen.setdefault(r, dict(s.theta)))
    after = seen[min(seen)]
    for k, v in expected.items():
        assert torch.allclose(after[k], v, atol=1e-6), k
    assert not torch.equal(after["encoders.0.1.weight"], start.encoders[0][1].weight)
    assert torch.equal(after["blocks.0.0.0.weight"], start.blocks[0][0][0].weight)  # blocks wait for routing


def test_router_starts_from_the_pretrained_encoder_when_routing_begins(tiny_fed):
    cfg = cfg_(arch="2,2,2", pretrain_fraction=0.5)  # rounds 0, 1 pretrain; routing from round 2
    fed = tiny_fed(cfg)
    seen = {}
    run(cfg, fed, on_round=lambda r, row, s, cl: seen.update({r: {k: v.clone() for k, v in s.theta.items()}}))
    first = min(seen)
    pre_last = seen[first + 1]  # state after the last pretraining round
    for k, v in pre_last.items():
        if k.startswith("router.phi_x."):
            assert torch.equal(v, pre_last["encoders.0." + k[len("router.phi_x.") :]]), k
    assert not torch.equal(
        seen[first]["router.phi_x.1.weight"], seen[first]["encoders.0.1.weight"]
    )  # before the switch


def test_a_client_is_judged_at_the_temperature_of_the_round_just_trained(tiny_fed):
    cfg = cfg_(arch="2,2,2", pretrain_fraction=0.0)  # τ: 1.0 at round 0 down to 0.1 at round 3
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    c0, opts = clients[0], clients[0].opt
    x, y = c0.data.split("train")
    for rnd in (0, 1, 3):
        server.aggregate({}, rnd)
        model = c0.eval_model(server.eval_message(0))
        with torch.no_grad():
            v = torch.sigmoid(c0.model.router.logits(x, y) / temperature(rnd, cfg, opts))
        assert torch.allclose(model.c, v * (v > opts["prune"]).float())
    assert temperature(0, cfg, opts) == opts["tau_start"] and temperature(3, cfg, opts) == pytest.approx(
        opts["tau_end"]
    )


def test_ledger_counts_what_the_protocol_sends(tiny_fed):
    """End to end: the run's ``comm`` bytes equal, summed over rounds and clients, what §II-E sends.
    Pretraining rounds: encoders and their heads both ways.  Routing rounds: router + encoders down,
    the request (one bool per block) up, the active blocks down, router + encoders + active blocks +
    n_m up.  The expectation is recomputed from the modules' tensors and the active masks the
    clients decided, not with the kit's byte accounting (``nbytes``, ``active_blocks``)."""
    cfg = cfg_(arch="2,3,2", pretrain_fraction=0.5, prune=0.5)  # rounds 0, 1 pretrain; 2, 3 route
    decided, kinds = {}, set()  # (round, cid) → a_m by layer; (round, keys down, keys up)

    class Recording(LocalClients):  # the in-process transport, recording what passes
        def request(self, calls, rnd):
            replies = super().request(calls, rnd)
            for cid, (msg, _) in calls.items():
                c = self.clients[cid]
                decided[rnd, cid] = c.model.active(c.decision[0])
                assert sorted(msg) == ["encoders", "router"]
                assert replies[cid]["active"].tolist() == [a for row in decided[rnd, cid] for a in row]
            return replies

        def train(self, calls, rnd):
            replies = super().train(calls, rnd)
            for cid, (msg, _) in calls.items():
                kinds.add((rnd, tuple(sorted(msg)), tuple(sorted(replies[cid][0]))))
            return replies

    result = run(cfg, tiny_fed(cfg), transport=Recording)
    net = build(cfg, tiny_fed(cfg))[3][0].model

    def size(*modules):
        return sum(t.numel() * t.element_size() for m in modules for t in m.state_dict().values())

    n_m = 8  # the client's sample count, one int64
    encoders, heads, router = size(net.encoders), size(net.pre_heads), size(net.router)
    blocks = [[size(b) for b in layer] for layer in net.blocks]
    n_blocks = sum(len(layer) for layer in net.blocks)
    up = down = 0
    for rnd in range(cfg.rounds):
        for cid in range(cfg.clients):
            if rnd < 2:  # FedAvg on the encoder models
                down += encoders + heads
                up += encoders + heads + n_m
                continue
            sent = sum(b for layer, on in zip(blocks, decided[rnd, cid]) for b, a in zip(layer, on) if a)
            down += router + encoders + sent
            up += n_blocks + router + encoders + sent + n_m  # the request: one byte per block
    assert result["comm"]["bytes_up"] == up and result["comm"]["bytes_down"] == down
    # the masks are partial (the test tells "the active blocks" from "every block") and not empty
    assert any(0 < sum(map(sum, a)) < n_blocks for a in decided.values())
    reply = ("blocks", "n", "shared")
    assert kinds == {(0, ("pretrain",), reply), (1, ("pretrain",), reply), (2, ("blocks",), reply),
                     (3, ("blocks",), reply)}  # fmt: skip


def test_the_swap_test_scores_a_client_with_another_clients_decision(tiny_fed):
    """decision_swap_accuracy: with each client as its own partner the two accuracies are equal;
    with a partner, the swapped one is the client's test accuracy under the partner's path weights
    on the same θ.  routing() reports Π in (0, 1) and the active blocks of every client."""
    from pflkit.chapters.fedmn_probes import decision_swap_accuracy
    from pflkit.federated import evaluate
    from pflkit.methods.fedmn import _Routed, routing

    cfg = cfg_(arch="2,2,2", pretrain_fraction=0.25, prune=0.3)
    got = {}
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: got.update(server=s, clients=c))
    server, clients = got["server"], got["clients"]
    same = decision_swap_accuracy(server, clients, {c.cid: c.cid for c in clients})
    assert all(own == swapped for own, swapped in same.values())
    partner = {c.cid: clients[(i + 1) % len(clients)].cid for i, c in enumerate(clients)}
    swap = decision_swap_accuracy(server, clients, partner)
    c0, c1 = clients[0], clients[1]
    x, y = c0.data.split("test")
    theirs = c1.eval_model(server.eval_message(c1.cid)).c
    net = c0.eval_model(server.eval_message(c0.cid)).net
    assert swap[c0.cid][1] == evaluate(_Routed(net, theirs), x, y)["correct"] / len(y)
    r = routing(server, clients)
    assert set(r) == {c.cid for c in clients}
    assert all(0 < p < 1 for v in r.values() for p in v["pi"]) and all(len(v["active"]) == 2 for v in r.values())


def test_forward_is_layer_one_then_the_routed_layers_and_the_router_reads_its_input(tiny_fed):
    """ModularNet.forward = route(encode(x)) exactly; Router.inputs gives a unit-or-shorter mean
    embedding and the labels' share of the squared norm, in (0, 1)."""
    cfg = cfg_(arch="2,2,2")
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    net = clients[0].model
    x, y = clients[0].data.split("train")
    c = torch.rand(net.n_paths)
    net.eval()  # no dropout: two passes draw nothing
    with torch.no_grad():
        assert torch.equal(net(x, c), net.route(net.encode(x), c, len(x)))
    e, share = net.router.inputs(x, y)
    assert e.shape == (net.router.h.in_features,) and float(e.norm()) <= 1 + 1e-6 and 0 < share < 1


def test_the_oracle_fits_decisions_per_group_and_scores_every_client_four_ways(tiny_fed):
    """oracle_decisions: the network is unchanged by the fit; one group per client gives the own
    group's decision == its partner's when the partner is itself; every accuracy in [0, 1]."""
    from pflkit.chapters.fedmn_probes import oracle_decisions

    cfg = cfg_(arch="2,2,2", pretrain_fraction=0.25)
    got = {}
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: got.update(server=s, clients=c))
    server, clients = got["server"], got["clients"]
    before = {k: v.clone() for k, v in server.theta.items()}
    groups = [i % 2 for i in range(len(clients))]
    same = oracle_decisions(server, clients, groups, {c.cid: c.cid for c in clients}, steps=5)
    assert all(len(v) == 4 and own == partner for v in same.values() for own, partner in [v[2:]])
    other = oracle_decisions(server, clients, groups, {c.cid: clients[(i + 1) % 4].cid for i, c in enumerate(clients)},
                             steps=5)  # fmt: skip
    assert all(0 <= a <= 1 for v in other.values() for a in v)
    assert all(torch.equal(before[k], server.theta[k]) for k in before)  # fitting decisions leaves θ as it was


def test_decisions_started_apart_spread_the_logits_and_keep_their_mean(tiny_fed):
    """start_apart (ours, a control): at the switch every client sends its mean router input first (counted
    up), and gets h as set apart with every block (counted down); the server gives h a client-specific part
    from those inputs, so that the clients' logits G_m = W e_m + b spread about ``start_apart`` over the
    clients on every path while their mean over the clients stays."""
    apart = cfg_(arch="2,2,2", pretrain_fraction=0.5, start_apart=3.0)  # rounds 0, 1 pretrain; the switch at 2
    sent = {}

    class Recording(LocalClients):
        def request(self, calls, rnd):
            replies = super().request(calls, rnd)
            sent[rnd] = {cid: tuple(sorted(r)) for cid, r in replies.items()}
            return replies

        def train(self, calls, rnd):
            sent[rnd, "down"] = {cid: sorted(m) for cid, (m, _) in calls.items()}
            return super().train(calls, rnd)

    res = run(apart, tiny_fed(apart), transport=Recording)
    assert set(sent[2].values()) == {("embedding",)} and set(sent[3].values()) == {("active",)}
    assert set(map(tuple, sent[2, "down"].values())) == {("blocks", "router_h")}
    assert res["comm"]["bytes_up"] > 0
    # the server's part: set_apart on given inputs moves G by a zero-mean, spread-out part
    _, _, server, _ = build(apart, tiny_fed(apart))
    e = torch.randn(6, server.theta["router.h.weight"].shape[1])
    server.embeddings = dict(enumerate(e))
    w, b = server.theta["router.h.weight"].clone(), server.theta["router.h.bias"].clone()
    server.set_apart()
    g0, g1 = e @ w.T + b, e @ server.theta["router.h.weight"].T + server.theta["router.h.bias"]
    assert torch.allclose(g1.mean(0), g0.mean(0), atol=1e-4)  # the mean logits unchanged
    spread = (g1 - g0).std(0, unbiased=False)  # per path, over the clients
    assert 1.0 < float(spread.mean()) < 6.0 and server.embeddings == {}
    assert server.apart_sd == pytest.approx(float(g1.std(0, unbiased=False).mean()), rel=1e-4)


def test_a_run_started_apart_resumes_bit_for_bit(tiny_fed, tmp_path):
    cfg = cfg_(arch="2,2,2", pretrain_fraction=0.5, start_apart=2.0)
    resumed = killed_and_resumed(cfg, tiny_fed, tmp_path / "ck.pt", kill_round=3)  # past the switch (round 3)
    assert strip(resumed) == strip(run(cfg, tiny_fed(cfg)))
