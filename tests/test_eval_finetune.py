"""Evaluation after local fine-tuning (``RunConfig.eval_finetune_epochs``), the protocol the
pFedMB paper applies to every method: it fine-tunes a copy, never the client's own state."""

import pytest
import torch

from pflkit.engine import build, evaluate_clients, run
from tests.conftest import tiny_config


@pytest.mark.parametrize("method", ["fedavg", "ditto"])
def test_eval_finetune_zero_epochs_changes_nothing(tiny_fed, method):
    cfg = tiny_config(method=method, rounds=2)
    a = run(cfg, tiny_fed(cfg))
    b = run(tiny_config(method=method, rounds=2, eval_finetune_epochs=0), tiny_fed(cfg))
    assert [h["mean_acc"] for h in a["history"]] == [h["mean_acc"] for h in b["history"]]
    assert a["comm"] == b["comm"]


@pytest.mark.parametrize("method", ["fedavg", "ditto", "pfedme", "pfedmb", "ifca", "fedamp", "fedfomo"])
def test_eval_finetune_leaves_client_state_alone(tiny_fed, method):
    cfg = tiny_config(method=method, rounds=1)
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    for c in clients:
        server.aggregate({c.cid: c.train_round(server.message_for(c.cid, 0), 0)[0]}, 0)
    ids = [c.cid for c in clients]
    plain = evaluate_clients(server, clients, ids, eval_seed=7)  # brings each client's state to its evaluation
    states = [{n: {k: v.clone() for k, v in s.items()} for n, s in c.state_dict().items()} for c in clients]
    for c in clients:
        c.cfg = tiny_config(method=method, rounds=1, eval_finetune_epochs=2)
    tuned = evaluate_clients(server, clients, ids, eval_seed=7)
    assert tuned["per_client_acc"] != plain["per_client_acc"]  # fine-tuning did something
    for c, before in zip(clients, states):
        for name, s in c.state_dict().items():
            assert all(torch.equal(before[name][k], v) for k, v in s.items()), (c.cid, name)
    again = evaluate_clients(server, clients, ids, eval_seed=7)
    assert again == tuned  # deterministic


def test_fedavg_ft_is_fedavg_with_eval_finetuning(tiny_fed):
    a = run(tiny_config(method="fedavg-ft", options={"ft_epochs": 1}), tiny_fed(tiny_config()))
    b = run(tiny_config(method="fedavg", eval_finetune_epochs=1), tiny_fed(tiny_config()))
    assert [h["mean_acc"] for h in a["history"]] == [h["mean_acc"] for h in b["history"]]


def test_eval_finetune_changes_accuracy_not_training(tiny_fed):
    cfg = tiny_config(method="ditto", rounds=2)
    a = run(cfg, tiny_fed(cfg))
    b = run(tiny_config(method="ditto", rounds=2, eval_finetune_epochs=1), tiny_fed(cfg))
    assert [h["train_loss"] for h in a["history"]] == [h["train_loss"] for h in b["history"]]
    assert [h["mean_acc"] for h in a["history"]] != [h["mean_acc"] for h in b["history"]]
    assert b["config"]["eval_finetune_epochs"] == 1
