"""The committed store and its replay check; the CLI's per-method training defaults and help."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from types import SimpleNamespace

import torch

from pflkit import experiments as ex
from pflkit import profiles, replay, store
from pflkit.engine import run
from tests.conftest import tiny_config


def stored(tmp_path, **kw):
    """A store holding one tiny FedAvg run (evaluated every round) and that run's record."""
    res = ex.sweep({"FedAvg": tiny_config(rounds=3, **kw)}, [0], tmp_path / "store", workers=1, progress=False)
    return ex.Store(tmp_path / "store"), res["FedAvg", 0]


def tamper(store, record, edit):
    record = json.loads(json.dumps(record))
    edit(record)
    store.put(record["key"], record)
    return record


def test_stop_after_trains_the_first_rounds_of_the_same_run(tiny_fed):
    cfg = tiny_config(rounds=4, eval_every=2)
    full = run(cfg, tiny_fed(cfg))
    first = run(cfg, tiny_fed(cfg), stop_after=2)
    assert len(full["round_loss"]) == 4 and first["round_loss"] == full["round_loss"][:2]
    assert first["history"] == [] or first["history"][0]["mean_acc"] == full["history"][0]["mean_acc"]
    assert run(cfg, tiny_fed(cfg), stop_after=1)["history"] == []  # stopped before the first evaluation


def test_a_stored_run_replays_identically(tmp_path):
    store, rec = stored(tmp_path)
    assert replay.exact_expected(rec) and rec["provenance"]["cpu"]
    assert replay.replay(rec) == [] and replay.replay_prefix(rec) == []
    assert replay.verdict(rec) == ("replays", ["prefix and first 2 round(s), identical"])
    assert replay.check(store.path, k=3, seed=0, log=lambda _: None) == []


def test_a_changed_number_is_a_stale_run(tmp_path):
    store, rec = stored(tmp_path)
    bad = tamper(store, rec, lambda r: r["round_loss"].__setitem__(1, r["round_loss"][1] * (1 + 1e-12)))
    assert replay.replay(bad) and "round 2 training loss" in replay.replay(bad)[0]
    bad = tamper(store, rec, lambda r: r["history"][0].__setitem__("val_mean_acc", 0.0))
    (line,) = replay.check(store.path, k=3, seed=0, log=lambda _: None)
    assert "stale run" in line and rec["key"] in line and "val_mean_acc" in line and "make book FILL=1" in line
    r = subprocess.run([sys.executable, "-m", "pflkit", "replay", str(store.path)], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "stale run" in r.stderr


def test_elsewhere_only_the_prefix_is_compared_within_its_tolerance(tmp_path):
    store, rec = stored(tmp_path)
    assert rec["prefix"]["grad"] and len(rec["prefix"]["update"]) == len(rec["prefix"]["grad"])

    def other_cpu(scale, rounds_too=False):
        def edit(r):
            r["provenance"]["cpu"] = "some other CPU"
            r["prefix"]["update"][0] *= 1 + scale
            if rounds_too:
                r["round_loss"][0] *= 1.5  # whole rounds are not compared elsewhere

        return tamper(store, rec, edit)

    assert not replay.exact_expected(other_cpu(0.0))
    assert replay.verdict(other_cpu(1e-6, rounds_too=True))[0] == "replays"  # another CPU's last bits pass
    status, details = replay.verdict(other_cpu(1e-1))
    assert status == "stale" and "update norm" in details[0]  # a real difference does not
    assert (
        replay.verdict(tamper(store, rec, lambda r: r["round_loss"].__setitem__(0, 9.0)))[0] == "stale"
    )  # here: rounds


def test_runs_without_a_loss_trace_cannot_be_replayed(tmp_path):
    store, rec = stored(tmp_path)
    rec = dict(rec)
    del rec["round_loss"]
    assert "no per-round training loss" in replay.replay(rec)[0]


def test_config_round_trips_and_the_sample_follows_the_seed(tmp_path):
    store, rec = stored(tmp_path)
    cfg = replay.config_of(rec)
    assert cfg == dataclasses.replace(tiny_config(rounds=3), checkpoint=None)
    keys = [f"run-{i}" for i in range(10)]
    store_like = SimpleNamespace(keys=lambda: keys, get=lambda key: {"final": {}, "history": []})
    a, b = replay.sample(store_like, 3, 1), replay.sample(store_like, 3, 2)
    assert len(a) == 3 and set(a) <= set(keys) and a == replay.sample(store_like, 3, 1) and a != b


def test_the_sample_keeps_within_its_budget_of_replayed_training_seconds(monkeypatch):
    keys = [f"run-{i}" for i in range(10)]
    cost = {k: float(i) for i, k in enumerate(keys)}  # run-i replays i recorded seconds
    store_like = SimpleNamespace(keys=lambda: keys, get=lambda key: {"key": key})
    monkeypatch.setattr(replay, "replay_cost", lambda record, rounds: cost[record["key"]])
    for seed in range(5):
        kept = replay.sample(store_like, 4, seed, budget_s=6.0)
        assert 1 <= len(kept) <= 4 and sum(cost[k] for k in kept) <= 6.0
    assert replay.sample(store_like, 4, 0, budget_s=1e9) == replay.sample(store_like, 4, 0)  # a loose budget: k runs
    cost.update(dict.fromkeys(keys, 50.0), **{"run-7": 30.0})
    assert replay.sample(store_like, 4, 0, budget_s=6.0) == ["run-7"]  # none fits: the cheapest, never none


def test_book_profile_reads_the_committed_store(monkeypatch, tmp_path):
    monkeypatch.delenv("PFLBOOK_STORE_ROOT", raising=False)
    monkeypatch.delenv("PFLBOOK_FRESH", raising=False)
    book = store.store_for("pfedhn", "book")
    assert book.path == profiles.COMMITTED / "pfedhn" and book.reuse == "any"
    assert all(store.store_for(c, "book").path == profiles.COMMITTED / c for c in profiles.COMMITTED_CHAPTERS)
    pending = store.store_for("a-new-chapter", "book")  # not in the committed store yet: a build store, same code
    assert pending.path.parts[-3:] == ("store", "book", "a-new-chapter") and pending.reuse == "same-code"
    smoke = store.store_for("pfedhn", "smoke")
    assert smoke.path.parts[-3:] == ("store", "smoke", "pfedhn") and smoke.reuse == "same-code"
    monkeypatch.setenv("PFLBOOK_FRESH", "1")  # make book FRESH=1: recompute, do not read results/
    assert store.store_for("pfedhn", "book").path.parts[-3:] == ("store", "book", "pfedhn")
    monkeypatch.setenv("PFLBOOK_STORE_ROOT", str(tmp_path))
    assert store.store_for("pfedhn", "book").path == tmp_path / "book" / "pfedhn"


def test_pfedhn_runs_with_the_authors_client_optimiser_unless_told_otherwise():
    from pflkit.cli import _config, build_parser

    def cfg(*extra):
        args, _ = build_parser().parse_known_args(["run", "pfedhn", "--dataset", "digits", *extra])
        return _config(args, args.method, {})

    c = cfg()
    assert (c.lr, c.momentum, c.weight_decay, c.batch_size, c.local_steps, c.grad_clip) == (5e-3, 0.9, 5e-5, 64, 50, 50)
    assert cfg("--grad-clip", "0").grad_clip == 0.0
    assert c.sample_rate == 1 / c.clients  # Algorithm 1: one client per hypernetwork step
    assert cfg("--sample-rate", "0.5").sample_rate == 0.5
    c = cfg("--lr", "0.1", "--local-epochs", "1")
    assert (c.lr, c.batch_size, c.local_steps, c.local_epochs) == (0.1, 64, None, 1)
    args, _ = build_parser().parse_known_args(["run", "fedavg", "--dataset", "digits"])
    c = _config(args, "fedavg", {})
    assert (c.lr, c.batch_size, c.weight_decay, c.local_steps, c.sample_rate, c.grad_clip) == (
        0.01,
        50,
        0.0,
        None,
        1.0,
        0,
    )


def test_run_method_help_lists_the_methods_options():
    r = subprocess.run([sys.executable, "-m", "pflkit", "run", "pfedhn", "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    assert "--hn-lr" in r.stdout and "--spectral-norm" in r.stdout and "--lr 0.005" in r.stdout
    r = subprocess.run([sys.executable, "-m", "pflkit", "run", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--hn-lr" not in r.stdout


def test_novel_clients_are_part_of_a_config_and_never_train():
    from pflkit.engine import Federation

    cfg = tiny_config(partition="dirichlet-normalized", alpha=0.5, clients=6, novel_clients=2, novel_alpha=(0.1, 1.0))
    fed = Federation.from_config(cfg)
    assert fed.partition.novel == [4, 5] and fed.partition.params["novel_alpha"] == [0.1, 1.0]
    rec = run(cfg, fed)
    assert len(rec["final"]["per_client_acc"]) == 4  # only the training clients are evaluated
    assert replay.config_of(json.loads(json.dumps(rec))) == dataclasses.replace(cfg, checkpoint=None)
    plain = tiny_config()
    assert ex.run_key(plain, 1) == ex.run_key(dataclasses.replace(plain, novel_clients=0, novel_alpha=None), 1)
    assert "novel_clients" not in ex.canonical(plain, 1)  # earlier stored runs keep their keys


def test_replay_runs_through_the_first_evaluation():
    cfg = tiny_config(rounds=100, eval_every=50)
    assert replay.replay_rounds(cfg) == 50
    assert replay.replay_rounds(dataclasses.replace(cfg, eval_every=1)) == 2
    assert replay.replay_rounds(dataclasses.replace(cfg, rounds=1)) == 1
    assert replay.replay_rounds(cfg, exact=False) == 2  # elsewhere: the first rounds only
    assert replay.replay_rounds(cfg, train_s=100.0) == 50  # 50 of 100 rounds: 50 s of training
    assert replay.replay_rounds(cfg, train_s=200.0) == 2  # 100 s to the first evaluation: the first rounds only


def test_grad_clip_bounds_every_local_step(tiny_fed):
    from pflkit.engine import build

    def displacement(clip):
        cfg = tiny_config(method="local", lr=1.0, momentum=0.0, grad_clip=clip)
        _, _, _, clients = build(cfg, tiny_fed(cfg))
        c = clients[0]
        before = torch.cat([p.detach().flatten().clone() for p in c.model.parameters()])
        c.generator.manual_seed(0)
        c.sgd(steps=3)
        return float((torch.cat([p.detach().flatten() for p in c.model.parameters()]) - before).norm())

    clipped = displacement(1e-3)
    assert 0 < clipped <= 3e-3 * (1 + 1e-4)  # three steps of lr × a gradient of norm ≤ 1e-3
    assert displacement(0.0) > 100 * clipped  # unclipped, the same steps move far more
    assert "grad_clip" not in ex.canonical(tiny_config(), 1)  # earlier stored runs keep their keys


def test_cpu_model_tells_generations_apart():
    # a virtual machine may name every generation "AMD EPYC": the family, model and vector width decide
    from pflkit.engine import cpu_identity

    def cpuinfo(family, model, flags, processors=2):
        one = (f"processor\t: {{}}\nvendor_id\t: AuthenticAMD\ncpu family\t: {family}\nmodel\t\t: {model}\n"
               f"model name\t: AMD EPYC\nstepping\t: 1\nflags\t\t: fpu sse2 {flags}\n\n")  # fmt: skip
        return "".join(one.format(i) for i in range(processors))

    milan = cpu_identity(cpuinfo(25, 1, "avx avx2"))
    assert milan == "AMD EPYC (cpu family 25, model 1, stepping 1, avx2)"
    assert cpu_identity(cpuinfo(25, 17, "avx avx2 avx512f")) not in (milan, None)  # Genoa: another model, AVX-512
    assert cpu_identity(cpuinfo(23, 1, "avx avx2")) != milan  # another family
    assert cpu_identity(cpuinfo(25, 1, "avx")) != milan  # the same model with narrower vectors exposed
    assert cpu_identity(cpuinfo(25, 1, "avx avx2", processors=1)) == milan  # the first processor decides
    assert cpu_identity("processor : 0\nflags : fpu\n") is None  # no model name: the caller falls back
