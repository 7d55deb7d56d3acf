"""Each method learns on a tiny problem, and the reductions between methods hold exactly."""

import pytest
import torch

from pflkit.engine import build, run
from pflkit.federated import snapshot
from pflkit.methods import METHODS
from tests.conftest import PUBLIC, tiny_config

# Options for the 4-round tiny problem where a method's defaults are the paper's, tuned for
# thousands of rounds (pFedHN: SGD at 1e-2 on the hypernetwork needs ~25 rounds here).
TINY_OPTIONS = {"pfedhn": {"hn_optimizer": "adam", "hn_lr": 1e-3}}
# Rounds where a method moves less per round by design: FedSGD takes one (full-batch) gradient
# step per round where the others take 8 local steps (32 rounds: the same 4 x 8 steps); FedDist
# moves the server only ε = 0.6 of the way to the clients' mean.
TINY_ROUNDS = {"fedsgd": 32, "feddist": 6, "fedem": 8}  # FedEM: its mixture weights specialise over rounds
# FedMN does not learn this problem in 8 rounds (measured: 0.1-0.4). Not the routing: its modular network (two MLP
# encoders, two layers of freshly initialised blocks, eq. 13's averages between them) sits on the loss plateau far
# longer than the plain MLP. Trained centrally with the same SGD, 30 steps leave it at chance where the MLP reaches
# 0.89; FedAvg on it with every path on (force_paths) reaches 0.44 after 8 rounds; FedMN itself 0.6-0.8 after 30
# rounds (FedAvg on the MLP: 0.95). On Fashion-MNIST at the `book` scale it learns (a 20-round run: 74 % against
# FedAvg's 80 %). strict: the day it learns this problem, this test says so.
NOT_YET = {
    "fedmn": "FedMN's deeper modular network leaves the loss plateau too slowly for this 8-round problem",
    # FedDF's one global model, distilled on the server towards the ensemble of 3-class specialists, stays near
    # chance here (measured after 4 rounds: 0.33 with 100 server steps, 0.46 with 10; FedAvg on the same data 0.55)
    "feddf": "FedDF's fused global model does not fit 3-class clients in 4 rounds (issue 14 measures it)",
}


@pytest.mark.parametrize(
    "method",
    [
        pytest.param(m, marks=pytest.mark.xfail(strict=True, reason=NOT_YET[m])) if m in NOT_YET else m
        for m in sorted(METHODS)
    ],
)
def test_learns_on_tiny_problem(tiny_fed, method):
    cfg = tiny_config(method=method, rounds=TINY_ROUNDS.get(method, 4), options=TINY_OPTIONS.get(method, {}),
                      public_images=200 if method in PUBLIC else 0)  # fmt: skip
    res = run(cfg, tiny_fed(cfg))
    accs = [h["mean_acc"] for h in res["history"]]
    # 3 classes per client: chance is about 1/3
    assert accs[-1] > 0.6, accs


def final_server_state(cfg, fed):
    captured = {}

    def grab(rnd, row, server, clients):
        captured["w"] = {k: v.clone() for k, v in server.w.items()}

    run(cfg, fed, on_round=grab)
    return captured["w"]


def assert_states_equal(a, b):
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)


def test_fedprox_with_mu_zero_is_fedavg(tiny_fed):
    a = final_server_state(tiny_config(method="fedavg"), tiny_fed(tiny_config()))
    b = final_server_state(tiny_config(method="fedprox", options={"mu": 0.0}), tiny_fed(tiny_config()))
    assert_states_equal(a, b)


def test_ditto_global_model_is_fedavg(tiny_fed):
    a = final_server_state(tiny_config(method="fedavg"), tiny_fed(tiny_config()))
    b = final_server_state(tiny_config(method="ditto"), tiny_fed(tiny_config()))
    assert_states_equal(a, b)


def test_fedavg_ft_with_zero_epochs_is_fedavg(tiny_fed):
    a = run(tiny_config(method="fedavg"), tiny_fed(tiny_config()))
    b = run(tiny_config(method="fedavg-ft", options={"ft_epochs": 0}), tiny_fed(tiny_config()))
    assert [h["mean_acc"] for h in a["history"]] == [h["mean_acc"] for h in b["history"]]


def test_fedprox_with_large_mu_stays_near_global(tiny_fed):
    cfg = tiny_config(method="fedprox", rounds=1, options={"mu": 1e3}, lr=1e-4)
    fed, _, server, clients = build(cfg, tiny_fed(cfg))
    msg = server.message_for(0, 0)
    clients[0].train_round(msg, 0)
    drift = sum((snapshot(clients[0].model)[k] - msg["weights"][k]).abs().max() for k in msg["weights"])
    assert drift < 1e-2


@pytest.mark.parametrize("method", ["local", "fedavg", "pfedme", "perfedavg"])
def test_a_round_returns_the_upload_and_the_loss_beside_it(tiny_fed, method):
    cfg = tiny_config(method=method, rounds=1)
    fed, _, server, clients = build(cfg, tiny_fed(cfg))
    upload, loss = clients[0].train_round(server.message_for(0, 0), 0)
    assert isinstance(loss, float) and loss > 0  # the simulation's loss trace reads it ...
    assert all(not k.startswith("_") for k in upload)  # ... the server never receives it
    if method == "local":
        assert upload == {}  # Local transmits nothing


@pytest.mark.parametrize("method,shared,private", [("fedper", "body.", "head."), ("lg-fedavg", "head.", "body.")])
def test_partial_sharing_keeps_private_part_on_client(tiny_fed, method, shared, private):
    cfg = tiny_config(method=method, rounds=2)
    fed, _, server, clients = build(cfg, tiny_fed(cfg))
    assert all(k.startswith(shared) for k in server.message_for(0, 0)["weights"])
    states = {}

    def grab(rnd, row, server, clients):
        states["clients"] = [snapshot(c.eval_model(server.eval_message(c.cid))) for c in clients]

    run(cfg, fed, on_round=grab)
    c0, c1 = states["clients"][:2]
    assert all(torch.equal(c0[k], c1[k]) for k in c0 if k.startswith(shared))
    assert any(not torch.equal(c0[k], c1[k]) for k in c0 if k.startswith(private))


def test_pfedme_beta_mixes_server_model(tiny_fed):
    cfg = tiny_config(method="pfedme", rounds=1, options={"beta": 0.0})
    fed, _, server, clients = build(cfg, tiny_fed(cfg))
    before = {k: v.clone() for k, v in server.w.items()}
    server.aggregate({0: clients[0].train_round(server.message_for(0, 0), 0)[0]}, 0)
    assert_states_equal(before, server.w)  # β = 0: the server model does not move


def test_pfedme_inner_start_differs_only_after_a_rounds_first_minibatch(tiny_fed):
    # one minibatch a round: where the inner problem starts cannot matter (θ̃ starts at w_t either way)
    records = {}
    for start in ("w", "theta"):
        for steps in (1, 3):
            cfg = tiny_config(method="pfedme", rounds=2, local_steps=steps, options={"inner_start": start, "K": 2})
            records[start, steps] = run(cfg, tiny_fed(cfg))["history"]
    strip = [[{k: v for k, v in r.items() if k != "wall_s"} for r in records[s, 1]] for s in ("w", "theta")]
    assert strip[0] == strip[1]
    assert records["w", 3][-1]["mean_acc"] != records["theta", 3][-1]["mean_acc"]  # carried over 3 minibatches
    from pflkit.errors import PflkitError

    with pytest.raises(PflkitError, match="inner_start"):
        cfg = tiny_config(method="pfedme", rounds=1, options={"inner_start": "x"})
        run(cfg, tiny_fed(cfg))


def test_pfedme_fresh_personal_model_is_a_round_of_training_from_the_evaluation_message(tiny_fed):
    # personal="fresh": the θ̃ a client is evaluated with is the one a round of Algorithm 1 from the
    # message would leave; "last" evaluates the θ̃ its last training left, untouched
    from pflkit.engine import own_randomness

    models = {}
    for personal in ("last", "fresh"):
        cfg = tiny_config(method="pfedme", rounds=1, options={"personal": personal, "K": 2})
        fed, _, server, clients = build(cfg, tiny_fed(cfg))
        message = server.eval_message(0)
        before = snapshot(clients[0].theta)
        with own_randomness(clients[0], 5, 5):
            models[personal] = snapshot(clients[0].eval_model(message))
        if personal == "last":
            assert_states_equal(before, models["last"])
            with own_randomness(clients[0], 5, 5):
                clients[0].train_round(message, 0)
            models["trained"] = snapshot(clients[0].theta)
    assert_states_equal(models["trained"], models["fresh"])
    assert any(not torch.equal(models["last"][k], models["fresh"][k]) for k in models["last"])


def test_unknown_option_is_an_error():
    from pflkit.errors import PflkitError
    from pflkit.methods import get_method

    with pytest.raises(PflkitError, match="no option"):
        get_method("fedprox").resolve_options({"lam": 1})
