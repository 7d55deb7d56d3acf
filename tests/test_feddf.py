"""FedDF and pFedDF: per-architecture FedAvg, ensemble distillation on the public set, and the
reductions (no distillation steps: FedAvg; pFedDF = FedDF judged after fine-tuning)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from pflkit.engine import Federation, build, run
from pflkit.errors import PflkitError
from tests.conftest import killed_and_resumed, strip, tiny_config


def cfg_(**kw):
    opts = kw.pop("options", {})
    base = dict(method="feddf", rounds=2, public_images=200, partition="dirichlet")
    return tiny_config(**{**base, **kw}, options={"server_steps": 5, **opts})


@pytest.fixture
def fed_for(digits):
    return lambda cfg: Federation.from_config(cfg, ds=digits)


def test_without_distillation_steps_feddf_is_fedavg(fed_for):
    cfg = cfg_(options={"server_steps": 0})
    df = run(cfg, fed_for(cfg))
    avg = run(dataclasses.replace(cfg, method="fedavg", options={}), fed_for(cfg))
    assert strip(df) == strip(avg)


def test_one_prototype_per_architecture_and_distillation_moves_it(fed_for):
    cfg = cfg_(clients=4, options={"models": "mlp,mlp3x32"})
    _, _, server, clients = build(cfg, fed_for(cfg))
    assert [server.group(c) for c in range(4)] == [0, 1, 0, 1]
    msgs = [server.message_for(c, 0)["weights"] for c in range(4)]
    assert msgs[0]["body.1.weight"].shape == (200, 64) and msgs[1]["body.1.weight"].shape == (32, 64)
    for c in clients:
        assert c.model.load_state_dict(server.message_for(c.cid, 0)["weights"]) is not None
    ups = {c.cid: c.train_round(server.message_for(c.cid, 0), 0)[0] for c in clients}
    before = {g: {k: v.clone() for k, v in server.prototype(g).state_dict().items()} for g in (0, 1)}
    server.aggregate(ups, 0)
    avg0 = (ups[0]["weights"]["head.weight"] * ups[0]["n"] + ups[2]["weights"]["head.weight"] * ups[2]["n"]) / (
        ups[0]["n"] + ups[2]["n"]
    )
    moved = server.prototype(0).state_dict()["head.weight"]
    assert not torch.equal(moved, before[0]["head.weight"]) and not torch.allclose(moved, avg0, atol=1e-7)


def test_pfeddf_is_feddf_judged_after_fine_tuning(fed_for):
    cfg = cfg_()
    df, p = run(cfg, fed_for(cfg)), run(dataclasses.replace(cfg, method="pfeddf"), fed_for(cfg))
    assert df["round_loss"] == p["round_loss"]  # the same training
    assert df["final"]["mean_acc"] != p["final"]["mean_acc"]  # judged differently


def test_resume_and_the_public_set_is_required(fed_for, tmp_path):
    cfg = cfg_(rounds=3, options={"models": "mlp,mlp3x32"})
    assert strip(killed_and_resumed(cfg, fed_for, tmp_path / "ck.pt")) == strip(run(cfg, fed_for(cfg)))
    cfg = cfg_(public_images=0)
    with pytest.raises(PflkitError, match="public set"):
        run(cfg, fed_for(cfg))


def test_the_teacher_averages_every_received_model(fed_for):
    """The ensemble is the mean softmax of all uploads, two per architecture here (a cached model
    per architecture once made every upload of an architecture the last one loaded)."""
    cfg = cfg_(clients=4, options={"models": "mlp,mlp3x32"})
    _, _, server, clients = build(cfg, fed_for(cfg))
    ups = {c.cid: c.train_round(server.message_for(c.cid, 0), 0)[0] for c in clients}
    x = server.x_public
    probs = []
    for c in clients:  # each client's own trained model, evaluated by itself
        c.model.load_state_dict(ups[c.cid]["weights"])
        with torch.no_grad():
            probs.append(torch.softmax(c.model.eval()(x), dim=1))
    assert not torch.allclose(probs[0], probs[2])  # two different models of one architecture
    torch.testing.assert_close(server.teacher(ups), torch.stack(probs).mean(0), atol=1e-6, rtol=1e-5)


def test_early_stopping_keeps_the_distilled_model_of_least_held_out_kl(fed_for):
    """server_patience > 0 (FedDF's early stopping): the KL to the ensemble on the held-out public
    images is looked at every 10 steps; the run stops after `patience` looks without improvement
    and keeps the best model seen, the FedAvg start included.  At 0 the stored runs keep their key."""
    from pflkit.federated import derive_seed
    from pflkit.methods.feddf import HELD_OUT
    from pflkit.store import canonical

    cfg = cfg_(options={"server_steps": 400, "server_patience": 2, "server_lr": 0.05})
    _, _, server, clients = build(cfg, fed_for(cfg))
    looks = []
    real = server.held_out_kl
    server.held_out_kl = lambda fused, target, held: looks.append(real(fused, target, held)) or looks[-1]
    ups = {c.cid: c.train_round(server.message_for(c.cid, 0), 0)[0] for c in clients}
    server.aggregate(ups, 0)
    assert 1 < len(looks) < 400 // 10 + 1  # the FedAvg start, then some looks: it stopped early
    n = len(server.x_public)  # the held-out images, drawn as the server draws them
    held = torch.randperm(n, generator=torch.Generator().manual_seed(derive_seed(cfg.seed, 0, 7, 0)))
    held = held[: max(1, int(HELD_OUT * n))]
    kept = real(server.prototype(0), server.teacher(ups), held)
    assert kept == pytest.approx(min(looks), rel=1e-6)  # the model kept is the best one looked at
    assert "server_patience" not in canonical(cfg_(options={"server_patience": 0}), 1)["options"]
    assert canonical(cfg, 1)["options"]["server_patience"] == 2
