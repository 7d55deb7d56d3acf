"""The evidence layer: the verdict rule, the budget flag, the result store and sweeps."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from pflkit import experiments as ex
from pflkit.engine import run
from pflkit.errors import PflkitError
from tests.conftest import Killed, strip, tiny_config, torch_threads

ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- the rule


def test_clear_effect_reproduces():
    v = ex.verdict([2.1, 1.8, 2.4, 2.0])
    assert v.word == "reproduces" and v.lo > 0 and v.n == 4
    assert str(v).startswith("reproduces (+2.1 points")


def test_reversed_effect_is_contradicted():
    assert ex.verdict([-2.1, -1.8, -2.4]).word == "contradicted"


def test_noise_is_inconclusive():
    rng = np.random.default_rng(0)
    words = [ex.verdict(rng.normal(0, 1, 5)).word for _ in range(200)]
    # a 95 % interval excludes 0 about 5 % of the time when there is no effect
    assert words.count("inconclusive") + words.count("no difference") > 170  # inside ± 1 point: no difference
    assert ex.verdict([1.0, -1.0, 0.5]).word == "inconclusive"


def test_fewer_than_three_seeds_is_not_tested():
    v = ex.verdict([5.0, 6.0])
    assert v.word == "not tested" and np.isnan(v.lo)
    assert str(v).startswith("not tested") and "reproduces" not in str(v)
    assert ex.verdict([]).word == "not tested"


def test_no_difference_claim_needs_the_whole_interval_inside_the_margin():
    assert ex.verdict([0.1, -0.2, 0.05, 0.0], margin=1).word == "reproduces"
    assert ex.verdict([0.1, -0.2, 0.05, 0.0], margin=0.05).word == "inconclusive"
    assert ex.verdict([3.0, 3.2, 2.9], margin=1).word == "contradicted"
    assert ex.verdict([0.1, -0.2, 3.0], margin=1).word == "inconclusive"  # wide: cannot tell


def test_interval_is_the_t_interval():
    from scipy import stats

    d = np.array([1.0, 2.0, 4.0])
    v = ex.verdict(d)
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / np.sqrt(3)
    assert v.mean == pytest.approx(d.mean()) and v.hi - v.mean == pytest.approx(half)


def test_budget_flag():
    hist = [{"round": r, "val_mean_acc": a} for r, a in [(2, 0.5), (4, 0.6), (6, 0.7), (8, 0.8), (10, 0.85)]]
    gain = ex.improvement(hist, 10)  # best up to round 8 is 0.8, last 0.85
    assert gain == pytest.approx(5.0) and ex.still_improving(gain) is True
    flat = [dict(h, val_mean_acc=0.8) if h["round"] >= 6 else h for h in hist]
    assert ex.still_improving(ex.improvement(flat, 10)) is False
    assert ex.improvement([{"round": 10, "val_mean_acc": 0.8}], 10) is None  # evaluated once: cannot tell
    assert ex.still_improving(None) is None
    v = ex.verdict([2.0, 2.1, 1.9], budget=True)
    assert v.word == "reproduces" and str(v).endswith("budget-limited")


# ----------------------------------------------------------------------------- keys and the store


def test_key_is_canonical():
    a = tiny_config(method="fedprox")
    b = tiny_config(method="fedprox", options={"mu": 0.01})  # the default, given explicitly
    assert ex.run_key(a, 1) == ex.run_key(b, 1)
    assert ex.run_key(a, 1) == ex.run_key(dataclasses.replace(a, checkpoint="x.pt", device="cuda"), 1)
    assert ex.run_key(a, 1) != ex.run_key(dataclasses.replace(a, lr=0.1), 1)
    assert ex.run_key(a, 1) != ex.run_key(a, 2)  # the thread count changes the numbers
    assert ex.run_key(a, 1) != ex.run_key(dataclasses.replace(a, seed=1), 1)


def test_an_option_added_later_keeps_the_keys_of_stored_runs(monkeypatch):
    from pflkit.methods import get_method

    fedprox = get_method("fedprox")
    cfg = tiny_config(method="fedprox")
    before = ex.run_key(cfg, 1)
    monkeypatch.setitem(fedprox.options, "new_knob", (7, "an option added after runs were stored"))
    assert ex.run_key(cfg, 1) != before  # without the declaration every stored run would be recomputed
    monkeypatch.setattr(fedprox, "later_options", {"new_knob": 7})
    assert ex.run_key(cfg, 1) == before  # at its default it is left out of the key
    assert ex.run_key(dataclasses.replace(cfg, options={"new_knob": 8}), 1) != before


def arms():
    return ex.arms_for(["fedavg", "local"], tiny_config(rounds=2))


def test_sweep_reuses_the_store(tmp_path):
    first = ex.sweep(arms(), [0, 1, 2], tmp_path / "s", workers=1, progress=False)
    assert (first.computed, first.reused) == (6, 0) and len(ex.Store(tmp_path / "s")) == 6
    again = ex.sweep(arms(), [0, 1, 2], tmp_path / "s", workers=1, progress=False)
    assert (again.computed, again.reused) == (0, 6)
    assert again.finals().equals(first.finals())
    more = ex.sweep(arms(), [0, 1, 2, 3], tmp_path / "s", workers=1, progress=False)
    assert (more.computed, more.reused) == (2, 6)
    rec = first["FedAvg", 0]
    assert {"config", "history", "final", "comm", "provenance", "key", "canonical"} <= set(rec)
    assert rec["provenance"]["threads"] == 1 and rec["config"]["seed"] == 0
    per_arm = {"FedAvg": [0, 1, 2, 3, 4], "Local": [0, 1]}  # each arm to its own seeds
    planned = ex.sweep(arms(), per_arm, tmp_path / "s", workers=1, progress=False)
    assert (planned.computed, planned.reused) == (1, 6) and planned.seeds == per_arm["FedAvg"]
    assert list(planned.values("Local").index) == [0, 1] and len(planned.paired("FedAvg", "Local")) == 2
    with pytest.raises(PflkitError, match="no seeds for the arm"):
        ex.sweep(arms(), {"FedAvg": [0]}, tmp_path / "s", workers=1, progress=False)


def test_a_planned_sweep_runs_the_pilot_then_each_claims_arms_to_its_plan(tmp_path):
    seen = []

    def diffs(res):  # the claim's pilot differences (fixed here: mean +0.1, sd 0.1 -> 4 seeds)
        seen.append(res.seeds)
        return {"a": [0.1, 0.2, 0.0]}

    res, plan = ex.planned_sweep(arms(), [0, 1, 2], tmp_path, diffs, claim_arms={"a": ["FedAvg"]}, pool=False,
                                 workers=1, progress=False)  # fmt: skip
    assert seen == [[0, 1, 2]] and plan.loc["a", "plan"] == "4 seeds"
    assert list(res.values("FedAvg").index) == [0, 1, 2, 3] and list(res.values("Local").index) == [0, 1, 2]
    every, _ = ex.planned_sweep(arms(), [0, 1, 2], tmp_path, diffs, pool=False, workers=1, progress=False)
    assert every.computed == 1 and list(every.values("Local").index) == [0, 1, 2, 3]  # without claim_arms: every arm
    capped, plan = ex.planned_sweep(arms(), [0, 1, 2], tmp_path, lambda r: {"a": [0.1, 0.3, -0.1]}, pool=False,
                                    run=4, workers=1, progress=False)  # fmt: skip
    assert plan.loc["a", "plan"] == "6 seeds" and capped.seeds == [0, 1, 2, 3]  # the plan says 6; this build runs 4


def test_a_still_improving_arm_runs_on_to_its_cap_at_the_same_per_round_protocol(tmp_path, monkeypatch):
    base = ex.arms_for(["fedavg", "local"], tiny_config(rounds=2, eval_every=1))
    first = ex.sweep(base, {"FedAvg": [0, 1, 2], "Local": [0]}, tmp_path, workers=1, progress=False)
    longer = ex.longer(base["FedAvg"], 2)
    assert (longer.rounds, longer.eval_every, longer.local_steps, longer.lr) == (4, 2, 8, 0.05)
    flagged = {"FedAvg"}  # the budget flag, fixed here: FedAvg rises until 4x its rounds, Local never
    for name in ("improving", "extends"):  # the flag and the run-on rule alike
        monkeypatch.setattr(ex.SweepResult, name, lambda self, a: a in flagged and self[a, 0]["config"]["rounds"] < 8)
    res, report = ex.until_flat(first, base, tmp_path, cap=4, workers=1, progress=False)
    assert [res["FedAvg", s]["config"]["rounds"] for s in (0, 1, 2)] == [8, 8, 8]  # 2x, then 4x: its cap
    assert (
        res["Local", 0]["config"]["rounds"] == 2 and res.computed == 4 + 3 + 3
    )  # the first 4 runs, then 3 seeds at 2x and at 4x
    assert list(res.values("FedAvg").index) == [0, 1, 2] and list(res.values("Local").index) == [0]
    assert (
        report.set_index("arm").loc["FedAvg", "budget"] == "4×" and report.set_index("arm").loc["Local", "rounds"] == 2
    )
    capped, report = ex.until_flat(first, base, tmp_path, cap=2, only=["FedAvg"], workers=1, progress=False)
    assert capped["FedAvg", 0]["config"]["rounds"] == 4 and capped.computed == 4  # stored: nothing run again
    as_run, _ = ex.until_flat(first, None, tmp_path, cap=2, only=["FedAvg"], workers=1, progress=False)
    assert as_run.records == capped.records  # arms=None: each arm's config read from its runs, the same keys
    assert list(report.arm) == ["FedAvg"] and bool(report["still improving"].iloc[0])
    flagged.clear()
    same, _ = ex.until_flat(first, base, tmp_path, workers=1, progress=False)
    assert same.records == first.records  # nothing rising: nothing runs


def test_a_run_on_that_diverges_leaves_the_arm_at_its_last_finished_run_on_that_seed(tmp_path, monkeypatch):
    import pflkit.sweeps as sw

    base = ex.arms_for(["fedavg"], tiny_config(rounds=2, eval_every=1))
    first = ex.sweep(base, [0, 1], tmp_path, workers=1, progress=False)
    real = sw.sweep

    def breaks_on_seed_1(arms, seeds, store, **kw):  # every longer run of seed 1 diverges
        res = real(arms, seeds, store, **kw)
        res.records = {k: (r | {"diverged": "loss became nan"} if k[1] == 1 else r) for k, r in res.records.items()}
        return res

    monkeypatch.setattr(sw, "sweep", breaks_on_seed_1)
    monkeypatch.setattr(ex.SweepResult, "extends", lambda self, a: self[a, 0]["config"]["rounds"] < 8)
    res, report = ex.until_flat(first, base, tmp_path, cap=4, workers=1, progress=False)
    assert res["FedAvg", 0]["config"]["rounds"] == 8 and res["FedAvg", 1] == first["FedAvg", 1]  # kept at 2 rounds
    assert not res["FedAvg", 1].get("diverged") and list(res.values("FedAvg").index) == [0, 1]
    assert report.set_index("arm").loc["FedAvg", "diverged when run on"] == "seed 1 (read at round 2)"
    assert res.computed == 2 + 2 + 1  # 2x on both seeds, then 4x on seed 0 only


def test_a_read_only_store_computes_nothing_and_says_what_it_lacks(tmp_path, monkeypatch):
    ex.sweep(arms(), [0], tmp_path, workers=1, progress=False)
    log = tmp_path / "usage.jsonl"
    monkeypatch.setenv("PFLBOOK_USAGE_LOG", str(log))
    read_only = ex.Store(tmp_path, read_only=True)
    assert ex.sweep(arms(), [0], read_only, workers=1, progress=False).reused == 2  # all there: read back
    with pytest.raises(ex.NotInStore, match=r"not computed yet: 2 of this sweep's 4 runs are not in the store"):
        ex.sweep(arms(), [0, 1], read_only, workers=1, progress=False)
    assert len(ex.Store(tmp_path)) == 2  # nothing was computed
    last = json.loads(log.read_text().splitlines()[-1])
    assert len(last["missing"]) == 2 and len(last["reused"]) == 2 and last["computed"] == []


def test_a_derived_result_is_computed_once_and_a_read_only_store_lacks_it(tmp_path, monkeypatch):
    calls = []

    def compute():
        calls.append(1)
        return {"2": {"acc": 0.5}}

    store = ex.Store(tmp_path)
    assert store.derived("scan", {"k": [1, 2]}, compute) == {"2": {"acc": 0.5}}
    assert store.derived("scan", {"k": [1, 2]}, compute) == {"2": {"acc": 0.5}} and len(calls) == 1  # read back
    assert len(store) == 0  # not a run: sweeps, the replay check and the run count do not see it
    log = tmp_path / "usage.jsonl"
    monkeypatch.setenv("PFLBOOK_USAGE_LOG", str(log))
    read_only = ex.Store(tmp_path, read_only=True)
    assert read_only.derived("scan", {"k": [1, 2]}, compute) == {"2": {"acc": 0.5}}
    with pytest.raises(ex.NotInStore, match="not computed yet: scan is not in the store"):
        read_only.derived("scan", {"k": [1, 2, 3]}, compute)  # another spec: another result
    assert len(calls) == 1 and len(json.loads(log.read_text().splitlines()[-1])["missing"]) == 1
    f = next((tmp_path / "derived").glob("scan-*.json"))  # made by other kit sources: recomputed where runs would be
    record = json.loads(f.read_text())
    f.write_text(json.dumps({**record, "provenance": {**record["provenance"], "code": "other"}}))
    assert ex.Store(tmp_path, reuse="any").derived("scan", {"k": [1, 2]}, compute) and len(calls) == 1
    assert ex.Store(tmp_path).derived("scan", {"k": [1, 2]}, compute) and len(calls) == 2


def test_make_book_reads_the_committed_store_without_filling_it(monkeypatch):
    from pflkit.profiles import COMMITTED
    from pflkit.store import store_for

    monkeypatch.delenv("PFLBOOK_STORE_ROOT", raising=False)
    monkeypatch.delenv("PFLBOOK_FRESH", raising=False)
    monkeypatch.setenv("PFLBOOK_STORE_ONLY", "1")
    committed = store_for("basics", "book")
    assert committed.path == COMMITTED / "basics" and committed.read_only and committed.reuse == "any"
    assert not store_for("basics", "smoke").read_only  # other profiles have no committed store: they compute
    monkeypatch.setenv("PFLBOOK_STORE_ONLY", "0")
    assert not store_for("basics", "book").read_only


def test_cpu_hours_counts_a_shared_run_once():
    def rec(key, cpu):
        return {"key": key, "provenance": {"cpu_time_s": cpu}}

    a = ex.SweepResult({("A", 0): rec("k1", 1800.0), ("B", 0): rec("k2", 3600.0)}, ["A", "B"], [0])
    b = ex.SweepResult({("A again", 0): rec("k1", 1800.0), ("C", 0): rec("k3", None)}, ["A again", "C"], [0])
    assert ex.cpu_hours(a, b) == (3, pytest.approx(1.5))  # k1 once; a run that recorded no CPU time adds 0
    assert ex.cpu_hours() == (0, 0.0)


def test_sweep_numbers_equal_a_plain_run(tmp_path, tiny_fed):
    res = ex.sweep(arms(), [1], tmp_path, workers=1, progress=False)
    cfg = dataclasses.replace(tiny_config(rounds=2), method="fedavg", seed=1)
    with torch_threads(1):  # the sweep's worker ran with one thread; float sums differ with two on some CPUs
        plain = run(cfg, tiny_fed(cfg))
    assert strip(res["FedAvg", 1]) == strip(plain)


def test_numbers_do_not_depend_on_the_schedule(tmp_path):
    one = ex.sweep(arms(), [0, 1], tmp_path / "a", workers=1, progress=False)
    two = ex.sweep(arms(), [0, 1], tmp_path / "b", workers=2, progress=False)
    with ProcessPoolExecutor(2) as pool:
        ext = ex.sweep(arms(), [0, 1], tmp_path / "c", executor=pool, progress=False)
    for other in (two, ext):
        for pair in one.records:
            assert strip(one[pair]) == strip(other[pair])
            assert other[pair]["provenance"]["threads"] == 1


def test_dask_executor(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.Client(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as client:
        res = ex.sweep(arms(), [0], tmp_path, executor=client.get_executor(), progress=False)
    local = ex.sweep(arms(), [0], tmp_path / "local", workers=1, progress=False)
    assert res.computed == 2 and strip(res["Local", 0]) == strip(local["Local", 0])


def test_killed_sweep_resumes(tmp_path):
    def kill_seed_1(rnd, row, server, clients):
        if server.cfg.seed == 1 and rnd == 2:
            raise Killed  # after round 1's checkpoint, before round 2's
        return rnd

    a = {"FedAvg": tiny_config(method="fedavg", rounds=3)}
    with pytest.raises(Killed):
        ex.sweep(a, [0, 1, 2], tmp_path, workers=1, probe=kill_seed_1, progress=False)
    store = ex.Store(tmp_path)
    assert len(store) == 1 and len(list((tmp_path / "checkpoints").glob("*.pt"))) == 1
    resumed = ex.sweep(a, [0, 1, 2], tmp_path, workers=1, progress=False)
    assert resumed.computed == 2 and resumed.reused == 1  # seed 0 kept; seed 1 resumed from round 1
    assert not list((tmp_path / "checkpoints").glob("*.pt"))
    fresh = ex.sweep(a, [1], tmp_path / "fresh", workers=1, progress=False)
    assert strip(resumed["FedAvg", 1]) == strip(fresh["FedAvg", 1])


def test_probe_output_is_kept(tmp_path):
    def n_clients(rnd, row, server, clients):
        return {"round": rnd, "n": len(clients)}

    res = ex.sweep({"FedAvg": tiny_config(rounds=2)}, [0], tmp_path, workers=1, probe=n_clients, progress=False)
    assert res.probes("FedAvg", 0) == {0: {"round": 0, "n": 4}, 1: {"round": 1, "n": 4}, 2: {"round": 2, "n": 4}}
    again = ex.sweep({"FedAvg": tiny_config(rounds=2)}, [0], tmp_path, workers=1, probe=n_clients, progress=False)
    assert again.reused == 1


def test_corrupt_store_file_is_one_clear_error(tmp_path):
    ex.sweep(arms(), [0], tmp_path, workers=1, progress=False)
    f = next(tmp_path.glob("fedavg-*.json"))
    f.write_text(f.read_text()[:100])  # truncated, as by a full disk
    with pytest.raises(PflkitError, match="corrupt.*delete it"):
        ex.sweep(arms(), [0], tmp_path, workers=1, progress=False)
    with pytest.raises(PflkitError, match="is a file"):
        ex.Store(f)


def test_worker_and_thread_arithmetic(monkeypatch):
    from pflkit import sweeps

    monkeypatch.setattr(sweeps, "cores", lambda: 8)
    assert ex._local_workers(None, 1, 100) == 8
    assert ex._local_workers(None, 2, 100) == 4
    assert ex._local_workers(None, 3, 100) == 2
    assert ex._local_workers(None, 16, 100) == 1  # never zero workers
    assert ex._local_workers(None, 1, 3) == 3  # no idle workers
    assert ex._local_workers(2, 4, 100) == 2
    with pytest.raises(PflkitError, match="exceed"):
        ex._local_workers(3, 4, 100)
    with pytest.raises(PflkitError):
        ex._local_workers(0, 1, 100)


# ----------------------------------------------------------------------------- results


def test_selection_only_on_validation(tmp_path):
    res = ex.sweep(arms(), [0, 1], tmp_path, workers=1, progress=False)
    assert res.select(["FedAvg", "Local"]) in {"FedAvg", "Local"}
    for test_metric in ("mean_acc", "pooled_acc", "mean_acc@best_val", "micro_f1"):
        with pytest.raises(PflkitError, match="validation"):
            res.select(["FedAvg", "Local"], by=test_metric)
    best = res.finals().groupby("arm").val_mean_acc.mean().idxmax()
    assert res.select(["FedAvg", "Local"]) == best


def test_a_diverged_run_is_stored_never_chosen_and_not_replayed(tmp_path):
    from pflkit.replay import check, sample

    grid = ex.grid("FedAvg", tiny_config(rounds=2), lr=[0.05, 1e12])  # 1e12: the loss becomes NaN in round 1
    pilot = ex.tune({"FedAvg": grid}, [0, 1, 2], tmp_path, workers=1, progress=False)
    assert pilot.config("FedAvg").lr == 0.05
    assert pilot.table().loc[("FedAvg", "lr=1e+12"), "val_mean_acc"] == "diverged"
    bad = pilot.result["FedAvg · lr=1e+12", 0]
    assert "lower the learning rate" in bad["diverged"] and np.isnan(bad["final"]["mean_acc"])
    # a verdict leaves the diverged seeds out: none is left, so it is not tested
    assert pilot.result.compare("FedAvg · lr=0.05", "FedAvg · lr=1e+12").word == "not tested"
    again = ex.tune({"FedAvg": grid}, [0, 1, 2], tmp_path, workers=1, progress=False)
    assert again.result.computed == 0  # stored: never retried
    assert len(sample(ex.Store(tmp_path), 10, 0)) == 6  # the replay check samples every run and says which diverged
    lines = []
    assert check(tmp_path, k=10, seed=0, log=lines.append) == []
    assert sum(line.startswith("diverged:") for line in lines) == 3 and len(lines) == 6
    with pytest.raises(PflkitError, match="every arm diverged"):
        ex.tune({"FedAvg": {"x": grid["FedAvg · lr=1e+12"]}}, [0], tmp_path, workers=1, progress=False)


def test_an_arm_that_diverges_falls_back_to_its_pilots_best_smaller_value(tmp_path):
    pilot = ex.tune({"FedAvg": ex.grid("FedAvg", tiny_config(rounds=2), lr=[0.01, 0.05, 1e12])}, [0, 1], tmp_path,
                    workers=1, progress=False)  # fmt: skip
    best_stable = pilot.ranked("FedAvg")[0].lr
    assert [c.lr for c in pilot.ranked("FedAvg")] in ([0.01, 0.05], [0.05, 0.01])  # 1e12 diverged: left out
    arms = {"FedAvg": tiny_config(rounds=3, lr=1e12), "Local": tiny_config(method="local", rounds=3)}
    res, notes = ex.sweep_stable(arms, [0, 1], tmp_path, {"FedAvg": (pilot, "FedAvg"), "Local": (pilot, "FedAvg")},
                                 workers=1, progress=False)  # fmt: skip
    assert {res["FedAvg", s]["config"]["lr"] for s in (0, 1)} == {best_stable}  # every seed at the fallback
    assert not res.values("FedAvg", "diverged").any() and list(notes) == ["FedAvg"]
    assert "lr 1e+12 diverged on seeds 0 and 1" in notes["FedAvg"]
    plain = ex.sweep({"Local": arms["Local"]}, [0, 1], tmp_path, workers=1, progress=False)
    assert res["Local", 0] == plain["Local", 0]  # an arm that held is untouched
    per_arm, _ = ex.sweep_stable(
        arms, {"FedAvg": [0, 1], "Local": [0]}, tmp_path, {"FedAvg": (pilot, "FedAvg")}, workers=1, progress=False
    )  # fmt: skip  (seeds per arm, as a seed plan gives them)
    assert per_arm.seeds == [0, 1] and list(per_arm.values("Local").index) == [0]
    assert (per_arm | ex.sweep({"FedProx": tiny_config(method="fedprox", rounds=3)}, [0], tmp_path, workers=1,
                               progress=False)).seeds == [0, 1]  # fmt: skip


def test_a_group_falls_back_together_and_arms_may_have_their_own_probes(tmp_path):
    pilot = ex.tune_axis({"FedAvg": tiny_config(rounds=2), "FedProx": tiny_config(method="fedprox", rounds=2)}, "lr",
                         [0.01, 0.05, 1e12], [0], tmp_path, extend=0, shared=True, workers=1, progress=False)  # fmt: skip
    shared = [c.lr for c in pilot.ranked("FedAvg")]
    assert shared == [c.lr for c in pilot.ranked("FedProx")] and 1e12 not in shared  # one order for the group
    arms = {"FedAvg": tiny_config(rounds=3, lr=1e12), "FedProx": tiny_config(method="fedprox", rounds=3, lr=1e12),
            "Local": tiny_config(method="local", rounds=3)}  # fmt: skip

    def seen(rnd, row, server, clients):
        return {"method": server.cfg.method} if rnd == server.cfg.rounds else None

    # FedProx's pilot is not asked: it moves with FedAvg, the first arm of its group, to one value
    res, notes = ex.sweep_stable(arms, [0], tmp_path, {"FedAvg": (pilot, "FedAvg")}, together=[("FedAvg", "FedProx")],
                                 probe={"FedProx": seen}, workers=1, progress=False)  # fmt: skip
    assert res["FedAvg", 0]["config"]["lr"] == res["FedProx", 0]["config"]["lr"] == shared[0]
    assert set(notes) == {"FedAvg", "FedProx"} and "FedAvg, FedProx of its group" in notes["FedProx"]
    assert res.probes("FedProx", 0) == {3: {"method": "fedprox"}} and "probe" not in res["FedAvg", 0]
    assert "probe" not in res["Local", 0]
    with pytest.raises(PflkitError, match="first arm of a group"):
        ex.sweep_stable(arms, [0], tmp_path, {}, together=[("FedProx", "FedAvg")], workers=1, progress=False)


def test_claims_and_paper_tables(tmp_path):
    res = ex.sweep(arms(), [0, 1, 2], tmp_path, workers=1, progress=False)
    d = res.paired("Local", "FedAvg")
    assert list(d.index) == [0, 1, 2]
    row = ex.claim("Local beats FedAvg", res, "Local", "FedAvg", paper="+10")
    assert row["verdict"] == ex.verdict(d).word and row["paper"] == "+10"
    said = ex.in_words(row)  # the row's own word first, then ours and the notes
    assert said.startswith(f"{ex.verdict_text(row, bold=False)}, {row['ours (a − b, 95 % CI)']}")
    assert said.startswith(row["verdict"]) and "budget-limited" in said  # the word, its flags beside it
    uneven = ex.sweep(arms(), {"FedAvg": [0, 1, 2, 3], "Local": [0, 1, 2]}, tmp_path, workers=1, progress=False)
    table = ex.paper_vs_ours(uneven, {"Local": 50.0})
    common = uneven.values("FedAvg")[[0, 1, 2]].mean()  # on the paired claim's seeds
    assert table.loc["FedAvg", "ours mean_acc"].endswith(f"(4 seeds; {common:.1f} on the 3 all arms ran)")
    assert "seeds" not in table.loc["Local", "ours mean_acc"]
    assert list(table.columns) == list(ex.paper_vs_ours(res, {}).columns)  # no column more
    plan = ex.seed_plan({"far": [1.5, -1.2, 0.4]}, cap=3)
    under = ex.claim_row("far", ex.verdict([1.5, -1.2, 0.4]), plan=plan)
    assert ex.in_words(under).startswith("underpowered, ")  # what the table says, not the bare verdict's word
    two = ex.claim("on two seeds", ex.sweep(arms(), [0, 1], tmp_path, workers=1, progress=False), "Local", "FedAvg")
    assert two["verdict"] == "not tested"
    table = ex.claims_table([row, two])
    assert row["budget"] == "budget-limited"  # two rounds: still rising, and the flag says how far
    flag = row["flags"][0]
    assert flag.startswith("budget-limited (") and flag.endswith(" points over the last fifth)")
    assert list(table.columns) == ["paper", "ours (a − b, 95 % CI)", "verdict"]  # the flags in the verdict's cell
    assert table.loc["Local beats FedAvg", "verdict"] == f"{row['verdict']} · {flag}"
    pv = ex.paper_vs_ours(res, {"FedAvg": 80.0})
    assert pv.loc["FedAvg", "paper"] == 80.0 and np.isnan(pv.loc["Local", "paper"]) and pv.loc["Local", "seeds"] == 3


# ----------------------------------------------------------------------------- layering


def test_the_modules_below_the_round_loop_never_import_it():
    """engine.py is the round loop; building a federation (pflkit.federation) and what it builds on
    sit below it and never import it, or anything above it: the kit has no import circle."""
    below = [
        "federation",
        "grouped",
        "data",
        "data_base",
        "data_more",
        "partitions",
        "federated",
        "models",
        "compute",
        "errors",
    ]
    above = set("engine sweeps experiments store tuning verdicts claims pages cli flower replay".split())
    bad = []
    for name in below:
        tree = ast.parse((ROOT / "pflkit" / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level >= 1 and (node.module or "").split(".")[0] in above:
                bad.append(f"{name}.py imports .{node.module}")
    assert not bad, bad


def test_methods_never_import_the_engine_or_experiments():
    bad = []
    for f in sorted((ROOT / "pflkit" / "methods").glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = "." * node.level + (node.module or "")
                names = [a.name for a in node.names]
                if any(x in (mod.split(".")[-1:] + names) for x in ("engine", "experiments", "cli")):
                    bad.append(f"{f.name}: from {mod} import {', '.join(names)}")
            elif isinstance(node, ast.Import):
                bad += [f"{f.name}: import {a.name}" for a in node.names if a.name.startswith("pflkit.e")]
    assert not bad, bad


# ----------------------------------------------------------------------------- command line


def pflkit(*args):
    return subprocess.run([sys.executable, "-m", "pflkit", *args], capture_output=True, text=True, timeout=300)


RUN = [
    "--dataset",
    "digits",
    "--clients",
    "4",
    "--rounds",
    "2",
    "--model",
    "mlp",
    "--local-steps",
    "4",
    "--no-progress",
]


def test_cli_sweep_and_compare(tmp_path):
    store, out = str(tmp_path / "s"), tmp_path / "t.csv"
    r = pflkit("sweep", "fedavg,fedprox", *RUN, "--seeds", "0,1,2", "--store", store, "--mu", "0.1", "--out", str(out))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert (
        len(lines) == 3 and lines[0].startswith("fedavg") and "mean_acc" in lines[0] and "still improving" in lines[0]
    )
    assert lines[-1] == "computed 6, reused 0"
    assert len(out.read_text().strip().splitlines()) == 7
    again = pflkit("sweep", "fedavg,fedprox", *RUN, "--seeds", "0,1,2", "--store", store, "--mu", "0.1")
    assert again.stdout.strip().splitlines()[-1] == "computed 0, reused 6"
    c = pflkit(
        "compare", "fedprox", "fedavg", *RUN, "--seeds", "0,1,2", "--store", store, "--mu", "0.1", "--margin", "50"
    )
    assert c.returncode == 0, c.stderr
    assert "reproduces" in c.stdout and c.stdout.strip().splitlines()[-1] == "computed 0, reused 6"
    two = pflkit("compare", "fedprox", "fedavg", *RUN, "--seeds", "0,1", "--store", store, "--mu", "0.1")
    assert "not tested" in two.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["sweep", "nope", "--seeds", "0"], "unknown method"),
        (["sweep", "fedavg", "--seeds", ","], "at least one seed"),
        (["sweep", "fedavg", "--seeds", "a"], "integers"),
        (["sweep", "fedavg", "--seeds", "0", "--bogus", "1"], "unrecognized arguments"),
        (["sweep", "fedavg", "--seeds", "0", "--workers", "999"], "exceed"),
        (["compare", "fedavg", "fedavg", "--seeds", "0"], "two different"),
    ],
)  # fmt: skip
def test_cli_bad_input_is_one_line_exit_2(cli, tmp_path, args, needle):
    r = cli(*args, *RUN, "--store", tmp_path / "s")
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_cli_store_that_is_a_file(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    r = pflkit("sweep", "fedavg", *RUN, "--seeds", "0", "--store", str(f))
    assert r.returncode == 2 and "is a file" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_cli_corrupt_store_and_checkpoint(tmp_path):
    store = tmp_path / "s"
    assert pflkit("sweep", "fedavg", *RUN, "--seeds", "0", "--store", str(store)).returncode == 0
    f = next(store.glob("*.json"))
    f.write_bytes(f.read_bytes()[:50])
    r = pflkit("sweep", "fedavg", *RUN, "--seeds", "0", "--store", str(store))
    assert r.returncode == 2 and str(f) in r.stderr and len(r.stderr.strip().splitlines()) == 1
    ckpt = tmp_path / "c.pt"
    assert pflkit("run", "fedavg", *RUN, "--checkpoint", str(ckpt)).returncode == 0
    ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])  # killed while writing, disk full...
    r = pflkit("run", "fedavg", *RUN, "--checkpoint", str(ckpt))
    assert r.returncode == 2 and str(ckpt) in r.stderr and "delete it" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_runs_of_other_code_are_recomputed_unless_any_is_asked(tmp_path):
    ex.sweep(arms(), [0], tmp_path, workers=1, progress=False)
    f = next(tmp_path.glob("local-*.json"))
    rec = json.loads(f.read_text())
    rec["provenance"]["code"] = "older"
    f.write_text(json.dumps(rec))
    assert ex.sweep(arms(), [0], ex.Store(tmp_path, reuse="any"), workers=1, progress=False).computed == 0
    again = ex.sweep(arms(), [0], tmp_path, workers=1, progress=False)
    assert again.computed == 1 and again["Local", 0]["provenance"]["code"] == ex.code_version()


def test_claim_row_for_any_verdict():
    row = ex.claim_row("angle", ex.verdict([0.01, 0.02, 0.0], margin=1, unit="degrees"), "0", digits=2)
    assert row["verdict"] == "reproduces" and "degrees" in row["ours (a − b, 95 % CI)"]
    assert row["ours (a − b, 95 % CI)"].startswith("+0.01 degrees [")
    assert ex.claim_row("x", ex.verdict([1.0]), ours="custom")["ours (a − b, 95 % CI)"] == "custom"
    assert ex.claim_row("x", ex.verdict([1.0]))["verdict"] == "not tested"


def test_tables_follow_the_arms_order_not_the_store(tmp_path):
    ex.sweep({"Local": tiny_config(method="local", rounds=2)}, [1, 0], tmp_path, workers=1, progress=False)
    res = ex.sweep(arms(), [0, 1], tmp_path, workers=1, progress=False)  # Local's runs are reused, FedAvg's not
    assert (res.computed, res.reused) == (2, 2)
    assert list(zip(res.finals().arm, res.finals().seed)) == [("FedAvg", 0), ("FedAvg", 1), ("Local", 0), ("Local", 1)]


def test_grid_and_tune_choose_on_validation(tmp_path):
    base = tiny_config(method="fedprox", rounds=2)
    g = ex.grid("FedProx", base, lr=[0.001, 0.05], mu=[0.0, 0.1])
    assert list(g) == ["FedProx · lr=0.001, mu=0", "FedProx · lr=0.001, mu=0.1", "FedProx · lr=0.05, mu=0",
                       "FedProx · lr=0.05, mu=0.1"]  # fmt: skip
    assert g["FedProx · lr=0.05, mu=0.1"].lr == 0.05 and g["FedProx · lr=0.05, mu=0.1"].options == {"mu": 0.1}
    with pytest.raises(PflkitError, match="neither"):
        ex.grid("FedProx", base, nope=[1])
    # a name that is both a field and an option (Per-FedAvg's alpha, the partition's Dirichlet alpha) must say which
    per = tiny_config(method="perfedavg", rounds=2, partition="dirichlet", alpha=0.5)
    with pytest.raises(PflkitError, match="RunConfig field and an option"):
        ex.grid("Per-FedAvg", per, alpha=[0.01])
    a = ex.grid("Per-FedAvg", per, lr=[0.05], options={"alpha": [0.003, 0.03]})
    assert list(a) == ["Per-FedAvg · lr=0.05, alpha=0.003", "Per-FedAvg · lr=0.05, alpha=0.03"]
    assert {c.options["alpha"] for c in a.values()} == {0.003, 0.03} and {c.alpha for c in a.values()} == {0.5}
    grids = {"FedProx": g, "Local": ex.grid("Local", tiny_config(method="local", rounds=2), lr=[0.001, 0.01, 0.05])}
    t = ex.tune(grids, [0, 1], tmp_path, workers=1, progress=False)
    for label, arms in grids.items():
        means = {a: t.result.values(a, "val_mean_acc").mean() for a in arms}
        assert t.chosen[label] == max(means, key=means.get)
        assert t.config(label) == arms[t.chosen[label]]
    table = t.table()
    assert (table["chosen"] == "yes").sum() == 2 and len(table) == 7
    edge = table.loc["Local"]
    assert (edge["at the grid's edge"] == "yes").sum() == (t.chosen["Local"] != "Local · lr=0.01")
    short = t.summary()  # one row per method: the choice, its metric, at the edge or not
    assert (
        list(short.index) == ["FedProx", "Local"] and short.loc["Local", "chosen"] == t.chosen["Local"].split(" · ")[1]
    )
    assert short.loc["Local", "val_mean_acc"] == table.loc[("Local", short.loc["Local", "chosen"]), "val_mean_acc"]
    from pflkit.pages import folded

    html = folded(table, "every pilot run")._repr_html_()
    assert html.startswith("<details><summary>every pilot run</summary>") and "FedProx" in html
    from pflkit.pages import fit

    narrow = fit(table, ["chosen"], "all of it")._repr_html_()
    shown, hidden = narrow.split("<details>")
    assert "val_mean_acc" not in shown and "val_mean_acc" in hidden and "chosen" in shown
    with pytest.raises(PflkitError, match="validation"):
        ex.tune(grids, [0], tmp_path, by="mean_acc")


def test_tune_axis_grows_a_grid_past_the_end_its_choice_sits_at(tmp_path):
    configs = {"Local": tiny_config(method="local", rounds=2), "FedAvg": tiny_config(method="fedavg", rounds=2)}
    values = [0.001, 0.003, 0.01]  # all small for these tiny problems: the choice sits at the top
    first = ex.tune({k: ex.grid(k, c, lr=values) for k, c in configs.items()}, [0, 1], tmp_path, workers=1,
                    progress=False)  # fmt: skip
    t = ex.tune_axis(configs, "lr", values, [0, 1], tmp_path, extend=2, workers=1, progress=False)
    for label in configs:
        lrs = [c.lr for c in t.grids[label].values()]
        assert lrs[:3] == values or lrs[-3:] == values  # the grid grew at one end only
        if first.chosen[label] == f"{label} · lr=0.01":
            assert lrs[3:] and lrs[3] == 0.03  # 0.01 × (0.01 / 0.003), one significant digit
        if first.chosen[label] == f"{label} · lr=0.003":
            assert lrs == values  # an interior choice: nothing added
        assert len(lrs) <= len(values) + 2  # at most `extend` steps
        means = {a: t.result.values(a, "val_mean_acc").mean() for a in t.grids[label]}
        assert t.chosen[label] == max(means, key=means.get)
        i = list(t.grids[label]).index(t.chosen[label])
        assert 0 < i < len(lrs) - 1 or len(lrs) == len(values) + 2  # an edge choice only once the steps ran out
    grown = ex.tune_axis(configs, "lr", [0.001, 0.01], [0], tmp_path, workers=1, progress=False)
    assert all(len(g) == 2 for g in grown.grids.values())  # two values: no edge to grow past
    low = ex.tune_axis({"Local": configs["Local"]}, "lr", [0.3, 1.0, 3.0], [0], tmp_path, extend=1, workers=1,
                       progress=False)  # fmt: skip
    assert [c.lr for c in low.grids["Local"].values()][0] == 0.09  # grows downward (the grid's ratio) from the bottom
    edges = low.edges().loc["Local"]  # the choice on the grid it started from, and after the grid grew
    assert edges["at its edge first"] == (low.first["Local"] == "Local · lr=0.3")
    assert edges["chosen"] == low.chosen["Local"].split(" · ")[1] and low.start["Local"][0] == "Local · lr=0.3"
    own = ex.tune_axis(configs, "lr", {"Local": [0.001, 0.01], "FedAvg": [0.002, 0.02]}, [0], tmp_path, workers=1,
                       progress=False)  # fmt: skip
    assert [c.lr for c in own.grids["FedAvg"].values()] == [0.002, 0.02]  # each label on its own values
    assert not own.edges()["at its edge first"].any()  # two values: no edge


def test_tune_axis_shared_chooses_one_value_for_every_label(tmp_path):
    configs = {"Local": tiny_config(method="local", rounds=2), "FedAvg": tiny_config(method="fedavg", rounds=2)}
    values = [0.001, 0.003, 0.01]
    t = ex.tune_axis(configs, "lr", values, [0, 1], tmp_path, extend=1, shared=True, workers=1, progress=False)
    grids = [[c.lr for c in g.values()] for g in t.grids.values()]
    assert grids[0] == grids[1]  # one grid, grown as one
    chosen = {t.config(label).lr for label in configs}
    assert len(chosen) == 1  # the same value for both
    # the value of best validation averaged over the labels
    means = {i: np.mean([t.result.values(list(g)[i], "val_mean_acc").mean() for g in t.grids.values()])
             for i in range(len(grids[0]))}  # fmt: skip
    assert grids[0][max(means, key=means.get)] == chosen.pop()
    with pytest.raises(PflkitError, match="one grid"):
        ex.tune_axis(configs, "lr", {"Local": [0.1, 0.2], "FedAvg": [0.1, 0.3]}, [0], tmp_path, shared=True)


def test_the_budget_table_shows_each_headline_arm_with_words_for_its_flag():
    import pandas as pd

    from pflkit.pages import budget_table

    report = pd.DataFrame([{"arm": "FedAvg", "rounds": 40, "budget": "2×", "gain over the last fifth (points)": 0.456,
                            "still improving": False},
                           {"arm": "Local", "rounds": 20, "budget": "1×", "gain over the last fifth (points)": 1.73,
                            "still improving": True}])  # fmt: skip
    table = budget_table(report)
    assert list(table.index) == ["FedAvg", "Local"] and list(table["still improving"]) == ["no", "yes"]
    assert table.loc["FedAvg", "gain over the last fifth (points)"] == 0.5 and table.loc["Local", "budget"] == "1×"


def test_the_setup_card_is_one_short_table_ours_beside_the_papers():
    from pflkit.pages import setup_card

    card = setup_card([("Clients", "20", "20"), ("Model", "LeNet", "")], paper="PFLlib")
    lines = card.splitlines()
    assert lines[0] == ":::{table}" and lines[-1] == ":::"
    assert "|   | ours | PFLlib |" in lines and "| Model | LeNet | — |" in lines  # the paper silent: a dash


def test_the_compact_claims_table_shows_ours_and_the_verdict_and_folds_the_rest():
    import pandas as pd

    from pflkit.pages import compact_claims

    table = pd.DataFrame({"paper": ["+4.2"], "ours (a − b, 95 % CI)": ["+6.5 [+4.3, +8.7] (3 seeds)"],
                          "verdict": ["reproduces"], "notes": ["long note"]}, index=pd.Index(["A beats B"], name="claim"))  # fmt: skip
    html = compact_claims(table)._repr_html_()
    shown, folded_part = html.split("<details", 1)
    assert "+6.5 [+4.3, +8.7]" in shown and "reproduces" in shown and "long note" not in shown
    assert "long note" in folded_part and "+4.2" in folded_part


def test_rising_pools_the_seeds_gains_and_bounds_them_above_zero():
    from pflkit.sweeps import rising

    assert rising([0.8, 0.9, 0.7]) is True  # above 0.5 points, its lower bound above 0
    assert rising([2.0, -0.5, 0.4]) is False  # mean 0.63, but the interval reaches below 0
    assert rising([0.3, 0.4, 0.2]) is False and rising([0.8]) is True  # one seed: its gain alone
    assert rising([0.8, float("nan")]) is None and rising([]) is None


def test_arms_on_different_budgets_are_read_at_the_budget_both_reached(tmp_path):
    from pflkit.sweeps import samples_per_round

    base = ex.arms_for(["fedavg", "local"], tiny_config(rounds=2, eval_every=1))
    longer = {"FedAvg": ex.longer(base["FedAvg"], 2), "Local": base["Local"]}  # FedAvg ran on to 4 rounds
    res = ex.sweep(longer, [0, 1, 2], tmp_path, workers=1, progress=False)
    rec = res["FedAvg", 0]
    per_round = samples_per_round(rec["config"], rec["partition"]["train_sizes"])
    assert res.budget_of("FedAvg", 0) == 4 * per_round and res.budget_of("Local", 0) == 2 * per_round
    common = res.common_budget("Local", "FedAvg")
    assert {s: c[2:] for s, c in common.items()} == {0: (2, 2), 1: (2, 2), 2: (2, 2)}  # FedAvg read at round 2
    at2 = [100 * next(h["mean_acc"] for h in res["FedAvg", s]["history"] if h["round"] == 2) for s in (0, 1, 2)]
    assert [c[1] for c in common.values()] == pytest.approx(at2)
    row = ex.claim("Local beats FedAvg", res, "Local", "FedAvg")
    assert "read at the budget both arms reached (Local at round 2; FedAvg at round 2 of 4)" in row["notes"]
    assert res.common_budget("Local", "Local") is None  # one budget: read at the end as before


def test_a_warm_up_before_round_one_counts_in_the_budget(tmp_path):
    from pflkit.sweeps import samples_per_round, setup_samples

    cfg = tiny_config(method="fesem", rounds=2, eval_every=1, options={"centers": 1, "lam": 0.0, "init_steps": 6})
    arms = {"warm": cfg, "cold": tiny_config(method="fesem", rounds=2, eval_every=1,
                                            options={"centers": 1, "em": "fixed-random", "init_steps": 6})}  # fmt: skip
    res = ex.sweep(arms, [0], tmp_path, workers=1, progress=False)
    rec = res["warm", 0]
    per_round = samples_per_round(rec["config"], rec["partition"]["train_sizes"])
    setup = 6 * cfg.batch_size * cfg.clients  # six minibatch steps on every client
    assert setup_samples(rec["config"]) == setup and setup_samples(res["cold", 0]["config"]) == 0
    assert setup_samples(dataclasses.asdict(tiny_config(method="fedavg"))) == 0  # no warm-up phase
    assert res.budget_of("warm", 0) == 2 * per_round + setup and res.budget_of("cold", 0) == 2 * per_round
    at = res.read_at("warm", 0, 2 * per_round)  # the cold run's budget: the warm run had not reached round 2
    assert at[1] == 1


def test_rates_are_searched_one_axis_at_a_time_and_each_setting_shown_once(tmp_path):
    from pflkit.tuning import tune_rates

    configs = {"pFedMe": tiny_config(method="pfedme", rounds=2, options={"K": 1}),
               "Per-FedAvg": tiny_config(method="perfedavg", rounds=2)}  # fmt: skip
    rate = {"pfedme": "personal_lr", "perfedavg": "alpha"}
    pilot = tune_rates(configs, rate, [0.01, 0.05, 0.1], [0.001, 0.01], [0], tmp_path, start_lr=0.05, extend=0,
                       workers=1, progress=False)  # fmt: skip
    for label, option in (("pFedMe", "personal_lr"), ("Per-FedAvg", "alpha")):
        cfg = pilot.config(label)
        assert cfg.options[option] == pilot.first[label].config(label).options[option]  # the rate chosen first
    table = pilot.table()
    assert len(table) == 2 * (2 + 3 - 1)  # two personal rates at 0.05, three learning rates: (0.05, chosen) once
    assert (table.chosen == "yes").sum() == 2 and not table.duplicated(
        ["method", "learning rate", "personal rate"]
    ).any()


def test_a_tables_run_takes_the_tuned_values_of_its_method_only():
    from pflkit.tuning import with_tuned

    settings = {"pfedme": {"lr": 0.1, "options": {"K": 3, "personal_lr": 0.05}}}
    pfedme = tiny_config(method="pfedme", lr=0.005, options={"K": 3, "lam": 15.0})
    tuned = with_tuned(pfedme, settings)
    assert (tuned.lr, tuned.options) == (0.1, {"K": 3, "lam": 15.0, "personal_lr": 0.05})  # its own options kept
    assert dataclasses.replace(tuned, lr=0.005, options=pfedme.options) == pfedme  # nothing else changes
    fedavg = tiny_config(method="fedavg", lr=0.005)
    assert with_tuned(fedavg, settings) is fedavg and with_tuned(pfedme, None) is pfedme


def test_a_shown_table_has_one_header_row_and_no_index_column():
    import pandas as pd

    from pflkit.pages import fit, flat_html

    named = pd.DataFrame({"a": [1, 2], "b": [None, 3.5]}, index=pd.Index(["x", "y"], name="algorithm"))
    html = fit(named, ["a"])._repr_html_()
    shown = html.split("<details>")[0]
    assert shown.count("<tr") == 3 and "<th>algorithm</th>" in shown and "<th></th>" not in shown  # header + 2 rows
    assert "—" in html.split("<details>")[1]  # a missing value reads "—"
    assert "<td>0</td>" not in flat_html(pd.DataFrame({"a": [5]}))  # a default index is not shown
    clash = pd.DataFrame({"setting": ["x"]}, index=pd.Index(["y"], name="setting"))  # the index's name is a column's
    assert flat_html(clash).count("<th>setting</th>") == 2
    levels = pd.DataFrame({"v": [1.0]}, index=pd.MultiIndex.from_tuples([("Table 1", "a")], names=[None, "claim"]))
    assert "level_0" not in flat_html(levels) and "<th>claim</th>" in flat_html(levels)
    long = "reproduces · as the paper's · budget-limited (FedAvg +3.3 points over the last fifth)"
    assert long in flat_html(pd.DataFrame({"verdict": [long]}))  # never cut by pandas' 50-character default
    styled = named.style.hide(axis="index")
    assert flat_html(styled) == styled._repr_html_()  # a page table as it is


def test_the_worst_tenth_of_the_clients_is_the_mean_of_the_lowest_accuracies():
    from pflkit.sweeps import worst_clients

    accs = [0.9, 0.5, 0.8, 0.7, 0.95, 0.6, 0.85, 0.75, 0.65, 0.99, 0.3]  # 11 clients: ⌈1.1⌉ = 2 of them
    assert worst_clients(accs) == pytest.approx(100 * (0.3 + 0.5) / 2)
    assert worst_clients(accs[:10]) == pytest.approx(50.0)  # 10 clients: the worst one
    assert worst_clients([0.8]) == pytest.approx(80.0) and worst_clients([]) != worst_clients([])  # NaN
    assert worst_clients(accs, share=1.0) == pytest.approx(100 * sum(accs) / len(accs))


def test_a_pilot_table_reads_in_words():
    import pandas as pd

    from pflkit.pages import pilot_view

    t = pd.DataFrame({"val_mean_acc": ["70.0 ± 1.0", "72.0"], "chosen": ["", "yes"]},
                     index=pd.MultiIndex.from_tuples([("KT-pFL η₃, ρ", "c_lr=0.01, rho=0.5"), ("FedAvg", "lr=0.1")],
                                                     names=["method", "setting"]))  # fmt: skip
    v = pilot_view(t)
    assert list(v.columns) == ["validation accuracy (%)", "chosen"] and list(v.chosen) == ["", "yes"]
    assert list(v.index) == [("KT-pFL η₃, ρ", "η₃ = 0.01, ρ = 0.5"), ("FedAvg", "learning rate = 0.1")]
    s = pilot_view(pd.DataFrame({"chosen": ["lr=0.05, K=3"]}, index=["pFedMe"]), words={"K": "local steps K"})
    assert s.loc["pFedMe", "chosen"] == "learning rate = 0.05, local steps K = 3"
