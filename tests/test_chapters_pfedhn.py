"""The pFedHN chapter's experiment, claims and page (pflkit.chapters.pfedhn, pfedhn_claims, pfedhn_page)."""

from __future__ import annotations

import dataclasses
import pickle
from functools import partial
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import pflkit.chapters.pfedhn as ch
import pflkit.chapters.pfedhn_claims as chc
import pflkit.chapters.pfedhn_page as chp
from pflkit.chapters.pfedhn import (
    NovelProbe,
    client_spread,
    embedding_probe,
    embedding_scores,
    hn_size_acc,
    mix_probe,
    novel_rows,
    own_minus_other,
    paper_t1,
    per_round_of,
    purity,
    purity_gains,
    run_config,
    size_swap_probe,
    size_swaps,
    swap_probe,
    t1_best,
    t1_seed_plan,
    t1_text,
    with_budget,
)
from pflkit.chapters.pfedhn_claims import (
    ablation_claims,
    diffs56,
    embedding_claims,
    headroom_claims,
    headroom_rows,
    lead_claims,
    novel_claims,
    novel_diffs,
    prop1_claims,
    spectral_claim,
    table1_claims,
    table2_claims,
    table2_diffs,
    table2h_rows,
)
from pflkit.chapters.pfedhn_page import (
    claims_markdown,
    not_run,
    page_table,
    setup_rows,
    size_trend,
    table1_rows,
    table1_wide,
    table2_table,
)
from pflkit.claims import say
from pflkit.engine import Federation, RunConfig, run
from pflkit.methods import get_method
from pflkit.methods.pfedhn import PFedHNServer
from pflkit.models import build_model
from pflkit.sweeps import FINAL_METRICS, SweepResult
from tests.conftest import tiny_config


def record(acc, val=None, *, method="fedavg", rounds=5, per_client=None, probe=None) -> dict:
    """A finished run's record as the store keeps it, reduced to what the tables read."""
    val = acc if val is None else val
    rec = {
        "config": {"method": method, "rounds": rounds},
        "final": {"round": rounds, "per_client_acc": per_client} | dict.fromkeys(FINAL_METRICS, acc),
        "history": [{"round": rounds, "mean_acc": acc, "pooled_acc": acc, "val_mean_acc": val}],
        "best_by_val": {"round": rounds, "mean_acc": acc, "pooled_acc": acc / 2},
        "improving": 0.0,  # not still improving: no budget flag
        "comm": {"bytes_up": 0, "bytes_down": 0},
        "provenance": {"wall_time_s": 0.0},
    }
    if probe is not None:
        rec["probe"] = {"name": "probe", "rounds": {str(rounds): probe}}
    return rec


def result(by_arm: dict[str, list[dict]]) -> SweepResult:
    """A sweep's result from each arm's records, seed 0, 1, ... in order."""
    seeds = range(max(len(v) for v in by_arm.values()))
    return SweepResult({(a, s): r for a, recs in by_arm.items() for s, r in enumerate(recs)}, list(by_arm), seeds)


# ----------------------------------------------------------------------------- measurements


def test_own_minus_other_is_the_diagonal_against_the_rest():
    assert own_minus_other([[0.9, 0.5], [0.3, 0.8]]) == pytest.approx(100 * (0.85 - 0.4))
    assert own_minus_other([[0.5] * 3] * 3) == 0.0  # every model alike: nothing own


def test_purity_counts_the_nearest_other_point():
    E = np.array([[0.0, 0.0], [0.0, 0.1], [5.0, 5.0], [5.0, 5.1]])
    assert purity(E, np.array([0, 0, 1, 1])) == 1.0
    assert purity(E, np.array([0, 1, 0, 1])) == 0.0


def test_embedding_scores_and_purity_gains_read_the_probe():
    mixed = [[1.0, 1.0], [6.0, 6.0], [1.0, 1.1], [6.0, 6.1]]  # each point's neighbour in the other group
    grouped = [[1.0, 1.0], [1.0, 1.1], [6.0, 6.0], [6.0, 6.1]]
    probes = {0: {"embeddings": mixed, "classes": [[0], [1], [2], [3]]}, 7: {"embeddings": grouped}}
    res = SimpleNamespace(records={("a", 3): None}, probes=lambda arm, s: probes)
    coarse_of_class = [0, 0, 1, 1]
    d = embedding_scores(res, coarse_of_class, rounds=7)
    assert list(d.arm) == ["a"] and list(d.seed) == [3]
    assert d["purity before (%)"][0] == 0.0 and d["purity after (%)"][0] == 100.0
    assert d["silhouette after"][0] > 0.9 > d["silhouette before"][0]
    assert d["median movement (%)"][0] > 0
    gains = purity_gains(res, coarse_of_class, rounds=7)
    assert list(gains) == ["a"] and gains["a"].to_dict() == {3: 100.0}


def test_client_spread_is_zero_with_one_shared_embedding():
    cfg = tiny_config(method="pfedhn")
    spread = client_spread(cfg)
    assert spread and all(v > 0 for v in spread.values())  # one value per generated tensor
    shared = client_spread(dataclasses.replace(cfg, options={"embedding": "shared"}))
    assert shared.keys() == spread.keys() and all(v == 0 for v in shared.values())


def test_with_budget_counts_client_updates_and_server_steps():
    history = pd.DataFrame({"arm": ["HN", "HN", "avg"], "round": [1, 2, 2]})
    res = SimpleNamespace(history=lambda: history)
    arms = {"HN": SimpleNamespace(sample_rate=0.1, clients=10), "avg": SimpleNamespace(sample_rate=0.5, clients=10)}
    h = with_budget(res, arms)
    assert list(h["client updates"]) == [1, 2, 10] and list(h["server steps"]) == [1, 2, 2]


# ----------------------------------------------------------------------------- Table 1


def test_paper_t1_picks_table_1_on_cifar10_at_the_client_count():
    paper = pd.DataFrame(
        {
            "table": ["Table 1", "Table 1", "Table 1", "Table 2"],
            "dataset": ["CIFAR10", "CIFAR10", "CIFAR100", "CIFAR10"],
            "setting": ["10 clients", "50 clients", "10 clients", "10 clients"],
            "method": ["pFedHN", "pFedHN", "pFedHN", "pFedHN"],
            "value": [90.0, 88.0, 60.0, 1.0],
        }
    )
    assert paper_t1(paper, 10) == {"pFedHN": 90.0} and paper_t1(paper, 50) == {"pFedHN": 88.0}


def test_table1_best_baseline_text_and_rows():
    res = result({"pFedHN": [record(0.9, 0.99)] * 2, "FedAvg": [record(0.7)] * 2, "Local": [record(0.8, 0.85)] * 2})
    assert t1_best(res) == "Local"  # the hypernetwork is never a baseline
    assert (
        t1_text(10, "pFedHN", "Local")
        == "Table 1, 10 clients: pFedHN beats the strongest baseline (Local, on validation)"
    )
    rows = table1_rows(res, {"pFedHN": 88.0})
    assert rows.loc["pFedHN", "paper CIFAR-10"] == 88.0
    pooled = rows["ours pooled, best-by-val (authors' code)"]  # the record's pooled accuracy at best validation
    assert [pooled[a].split(" ")[0] for a in ("pFedHN", "FedAvg", "Local")] == ["45.0", "35.0", "40.0"]


def test_t1_plan_extends_only_the_undecided_claims_arms():
    res = result(
        {
            "pFedHN": [record(0.805), record(0.79), record(0.81)],  # − Local: +0.5, −1.0, +1.0 points: undecided
            "pFedHN-PC": [record(0.9)] * 3,  # − Local: +10 on every seed: decided on the pilot
            "FedAvg": [record(0.7, 0.5)] * 3,
            "Local": [record(0.8, 0.9)] * 3,  # the strongest baseline on validation
        }
    )
    plan, seeds = t1_seed_plan({10: res}, [0, 1, 2], cap=10, resolution=1.0)
    undecided, decided = (t1_text(10, hn, "Local") for hn in ("pFedHN", "pFedHN-PC"))
    assert plan.loc[decided, "plan"].startswith("none added")
    need = int(plan.loc[undecided, "seeds needed"])
    assert 3 < need <= 10
    assert seeds[10] == {
        "pFedHN": list(range(need)),
        "Local": list(range(need)),
        "pFedHN-PC": [0, 1, 2],
        "FedAvg": [0, 1, 2],
    }
    _, capped = t1_seed_plan({10: res}, [0, 1, 2], cap=need - 1, resolution=1.0)  # the cap cannot decide it
    assert all(v == [0, 1, 2] for v in capped[10].values())


def test_headroom_claims_take_the_strongest_baseline_and_the_swap_test():
    mix = {"mix": [[0.9, 0.5], [0.3, 0.8]]}  # own − other: 45 points
    res = result(
        {
            "pFedHN": [record(0.9, probe=mix), record(0.8, probe=mix)],
            "pFedHN-PC": [record(0.6, probe={"mix": [[0.5, 0.5], [0.5, 0.5]]})] * 2,
            "FedAvg": [record(0.5, 0.9)] * 2,
            "Local": [record(0.7, 0.6)] * 2,
            "shared": [record(0.85)] * 2,
        }
    )
    arms = {a: SimpleNamespace(rounds=5) for a in res.arms}
    best, diffs = headroom_claims(res, arms, ["FedAvg", "Local"], "shared")
    assert best == "FedAvg"  # on validation, although Local tests higher
    assert diffs["pFedHN − strongest baseline"].tolist() == pytest.approx([40.0, 30.0])
    assert diffs["pFedHN − shared embedding"].tolist() == pytest.approx([5.0, -5.0])
    assert diffs["pFedHN: own − another client's model"].tolist() == pytest.approx([45.0, 45.0])
    assert diffs["pFedHN-PC: own − another client's feature extractor"].tolist() == [0.0, 0.0]


# ----------------------------------------------------------------------------- Table 2


def table2_result():
    groups = np.array(["S", "S", "M", "M"])
    per_client = [[0.5, 0.6, 0.8, 0.9], [0.6, 0.7, 0.9, 1.0], [0.4, 0.5, 0.7, 0.8]]
    by_arm = {"HN": [record(0.7, method="pfedhn", per_client=p) for p in per_client]}
    for w, shift in (("S", 0.0), ("M", 0.2)):
        by_arm[f"FedAvg ({w})"] = [record(0.4 + shift, 0.9), record(0.5 + shift, 0.9), record(0.3 + shift, 0.9)]
        by_arm[f"Local ({w})"] = [record(0.6 + shift, 0.5)] * 3
    published = pd.DataFrame(
        {
            "setting": ["10 clients / size S"] * 3 + ["10 clients / size M"] * 2,
            "method": ["pFedHN", "FedAvg", "pFedMe", "pFedHN", "FedAvg"],  # pFedMe: the paper's, not among ours
            "value": [80.0, 75.0, 77.0, 82.0, 78.0],
        }
    )
    return result(by_arm), groups, published


def test_table2_helpers_split_the_hypernetwork_by_size():
    res, groups, published = table2_result()
    args = dict(hn="HN", baselines=["FedAvg", "Local"], widths=["S", "M"])
    assert hn_size_acc(res, 0, "S", hn="HN", groups=groups) == pytest.approx(55.0)
    assert hn_size_acc(res, 1, "M", hn="HN", groups=groups) == pytest.approx(95.0)
    best, diffs = table2_diffs(res, ", here", **args, groups=groups)
    assert best == {"S": "FedAvg (S)", "M": "FedAvg (M)"}  # on validation, not on test
    assert list(diffs) == [
        f"Table 2, here, size {w}: one HN beats the strongest per-size baseline (FedAvg ({w}), on validation)"
        for w in "SM"
    ]
    assert list(diffs.values())[0] == pytest.approx([15.0, 15.0, 15.0])  # 55 − 40, 65 − 50, 45 − 30
    table = table2_table(res, **args, groups=groups, published=published)
    assert list(table.index) == ["pFedHN", "FedAvg", "Local"]
    assert list(table.columns) == ["ours FMNIST S", "ours FMNIST M", "paper CIFAR-10 S", "paper CIFAR-10 M"]
    assert table.loc["FedAvg", "paper CIFAR-10 M"] == 78.0 and np.isnan(table.loc["Local", "paper CIFAR-10 S"])
    worst = np.mean([hn_size_acc(res, s, "S", hn="HN", groups=groups, worst=True) for s in res.seeds])
    assert table.loc["pFedHN", "ours FMNIST S"].endswith(f" ({worst:.0f})")  # its worst 10 % of clients
    assert worst <= np.mean([hn_size_acc(res, s, "S", hn="HN", groups=groups) for s in res.seeds])
    assert "(" not in table.loc["FedAvg", "ours FMNIST S"]  # no per-client accuracies in these records: no brackets
    rows, lines = table2_claims(res, best, diffs, None, **args, published=published, resolution=1.0)
    assert [r["claim"] for r in rows] == list(diffs)
    assert (
        rows[0]["verdict"] == "reproduces" and rows[0]["paper"] == "+3.0 vs pFedMe (CIFAR-10)"
    )  # the paper's strongest
    assert rows[1]["paper"] == "+4.0 vs FedAvg (CIFAR-10)" and rows[1]["notes"].startswith("the paper's +4.0, carried")
    assert rows[0]["notes"].startswith("the paper's strongest comparator, pFedMe, is not among our arms here; ")
    assert rows[0]["size"] == "larger than the paper's"  # ours +15 against the paper's +3, carried to our error
    assert lines[0] == (
        "* Size S: pFedHN − FedAvg (S): **reproduces** · *larger than the paper's*, +15.0 [+15.0, +15.0] (3 seeds)."
    )


def test_size_swaps_average_the_sizes_per_seed():
    probes = {4: {"S": [[1.0, 0.0], [0.0, 1.0]], "M": [[0.5, 0.5], [0.5, 0.5]]}}
    res = SimpleNamespace(seeds=[0, 1], probes=lambda arm, s: probes)
    assert size_swaps(res, "HN", 4) == [50.0, 50.0]


def test_size_swap_probe_groups_clients_by_the_servers_width_rule(monkeypatch):
    monkeypatch.setattr(ch, "swap_accuracy", lambda server, clients: [c.cid for c in clients])
    cfg = RunConfig(method="pfedhn", model="lenet", clients=6, rounds=2, device="cpu", options={"widths": "S,M,L"})
    opts = get_method("pfedhn").resolve_options(cfg.options | {"hn_hidden": 4})
    server = PFedHNServer(build_model("lenet", (1, 28, 28), 10), cfg, opts, 6)
    clients = [SimpleNamespace(cid=i) for i in range(6)]
    assert size_swap_probe(2, {}, server, clients) == {"S": [0, 1], "M": [2, 3], "L": [4, 5]}
    assert size_swap_probe(1, {}, server, clients) is None  # only after the last round
    clients = [SimpleNamespace(cid=i, data=SimpleNamespace(test_idx=[] if i == 3 else [i])) for i in range(6)]
    assert size_swap_probe(2, {}, server, clients) == {"S": [0, 1], "M": [2], "L": [4, 5]}  # client 3: no test data


# ----------------------------------------------------------------------------- Figures 2 and 7, 5 and 6


def test_novel_rows_and_diffs():
    def novel(tv_acc):
        return {
            "acc_train": 0.8,
            "novel": [{"alpha": a, "TV to nearest": tv, "acc_novel": acc} for a, tv, acc in tv_acc],
        }

    hn = [novel([(0.1, 0.2, 0.7), (1.0, 0.4, 0.6)]), novel([(0.1, 0.1, 0.8), (1.0, 0.5, 0.4)])]
    other = [novel([(0.1, 0.2, 0.5), (1.0, 0.4, 0.5)])] * 2
    res = result({"pFedHN": [record(0.8, probe=p) for p in hn], "Per-FedAvg": [record(0.8, probe=p) for p in other]})
    arms = {"pFedHN": SimpleNamespace(rounds=5), "Per-FedAvg": SimpleNamespace(rounds=5)}
    rows = novel_rows(res, arms)
    assert len(rows) == 8 and rows["gap"].tolist()[:2] == pytest.approx([-0.1, -0.2])
    diffs = novel_diffs(res, arms, "gap", "corr")
    assert diffs["gap"].tolist() == pytest.approx([15.0, 10.0])  # mean over α of the gaps' difference
    assert diffs["corr"].tolist() == pytest.approx([1.0, 1.0])  # two points: accuracy falls with TV, −r = 1


def test_diffs56_picks_the_best_k_on_validation():
    res = result(
        {
            "K=1": [record(0.5), record(0.6)],
            "K=10": [record(0.7, 0.9), record(0.8, 0.9)],
            "K=25": [record(0.9, 0.8), record(0.9, 0.8)],
            "e=5": [record(0.7), record(0.7)],
            "e=35": [record(0.6), record(0.8)],
            "d=3": [record(0.7), record(0.7)],
            "d=2": [record(0.7), record(0.7)],
        }
    )
    d = diffs56(res, ["K=1", "K=10", "K=25"], "K=1", ("e=5", "e=35"), ("d=3", "d=2"))
    assert d["Figure 5"].name == "K=10 − K=1" and d["Figure 5"].tolist() == pytest.approx([20.0, 20.0])
    assert d["Figure 6a"].tolist() == pytest.approx([10.0, -10.0]) and d["Figure 6b"].tolist() == [0.0, 0.0]


# ----------------------------------------------------------------------------- probes in runs


def test_probes_read_the_hypernetwork_after_the_right_rounds():
    seen = {}
    for method in ("pfedhn", "pfedhn-pc", "fedavg"):
        cfg = tiny_config(method=method, rounds=2, local_steps=2)
        probes = (mix_probe, swap_probe, embedding_probe) if method != "fedavg" else (mix_probe, swap_probe)

        def probe(r, row, s, cl, m=method, ps=probes):
            seen[m, r] = [p(r, row, s, cl) for p in ps]

        run(cfg, Federation.from_config(cfg), on_round=probe, on_setup=lambda s, cl, p=probe: p(0, None, s, cl))
    mix, swap, emb = seen["pfedhn", 2]
    assert mix is None and len(swap["mix"]) == 4 and all(len(r) == 4 for r in swap["mix"])
    assert len(emb["embeddings"]) == 4 and "classes" not in emb
    assert len(seen["pfedhn", 0][2]["classes"]) == 4 and seen["pfedhn", 1][:2] == [None, None]
    mix_pc = seen["pfedhn-pc", 2][0]
    assert len(mix_pc["mix"]) == 4 and all(len(c) == 3 for c in mix_pc["classes"])  # three classes per client
    assert seen["fedavg", 2] == [None, None]


def test_novel_probe_measures_the_novel_clients_and_keeps_its_stored_name():
    probe = NovelProbe(exchanges=2, embed_lr=1.0, n_classes=10)
    assert probe.probe_name == "novel_probe(exchanges=2, embed_lr=1.0)"
    assert pickle.loads(pickle.dumps(probe)) == probe  # worker processes receive it pickled
    out = {}
    for method in ("pfedhn", "fedavg"):
        cfg = tiny_config(method=method, partition="dirichlet-normalized", alpha=0.5, clients=6, rounds=2,
                          novel_clients=2, novel_alpha=(0.1, 1.0), local_steps=2)  # fmt: skip
        run(cfg, Federation.from_config(cfg), on_round=lambda r, row, s, cl, m=method: out.update({(m, r): probe(r, row, s, cl)}))  # fmt: skip
    assert out["pfedhn", 1] is None
    novel = out["pfedhn", 2]["novel"]
    assert [r["client"] for r in novel] == [4, 5] and [r["alpha"] for r in novel] == [0.1, 1.0]
    assert all(0 <= r["TV to nearest"] <= 1 and 0 <= r["acc_novel (random v)"] <= 1 for r in novel)
    assert "acc_novel (random v)" not in out["fedavg", 2]["novel"][0]  # only a hypernetwork learns v_new


# ----------------------------------------------------------------------------- the claims, section by section


def test_table1_claims_compare_each_hypernetwork_with_the_pilots_strongest_baseline():
    res = result(
        {
            "pFedHN": [record(0.80), record(0.82), record(0.81)],  # − Local: +10, +12, +11 points
            "pFedHN-PC": [record(0.70)] * 3,  # − Local: 0 on every seed
            "Local": [record(0.70, 0.9)] * 3,  # the strongest baseline on validation
            "FedAvg": [record(0.75, 0.5)] * 3,
        }
    )
    paper = pd.DataFrame(
        {"table": "Table 1", "dataset": "CIFAR10", "setting": "10 clients", "method": ["pFedHN", "pFedHN-PC", "Local"],
         "value": [90.0, 92.0, 86.0]}
    )  # fmt: skip
    rows, lines, means = table1_claims({10: res}, {10: res}, paper, None, 1.0)
    assert [r["claim"] for r in rows] == [t1_text(10, hn, "Local") for hn in ("pFedHN", "pFedHN-PC")]
    assert [r["verdict"] for r in rows] == ["reproduces", "no difference"]
    assert rows[0]["paper"].startswith("+4.0 vs Local")  # the paper's margin over its strongest baseline
    assert lines[0] == f"* 10 clients, pFedHN − Local: {say(rows[0])}."
    assert means == ["* **10 clients**, mean over seeds (descriptive; the verdicts compare): "
                     "pFedHN (81.0) > FedAvg (75.0) > pFedHN-PC (70.0) > Local (70.0)."]  # fmt: skip


def test_headroom_rows_link_each_headline_claim_to_its_mechanism():
    mix = {"mix": [[0.9, 0.5], [0.3, 0.8]]}  # own − other: 45 points
    flat = {"mix": [[0.5, 0.5], [0.5, 0.5]]}  # pFedHN-PC: no own advantage
    res = result(
        {
            "pFedHN": [record(a, probe=mix) for a in (0.80, 0.82, 0.81)],
            "pFedHN-PC": [record(a, probe=flat) for a in (0.70, 0.72, 0.71)],
            "FedAvg": [record(0.60, 0.9)] * 3,
            "Local": [record(0.65, 0.6)] * 3,
            "shared": [record(0.70)] * 3,
        }
    )
    arms = {a: SimpleNamespace(rounds=5) for a in res.arms}
    published = {"pFedHN": 90.0, "pFedHN-PC": 92.0, "FedAvg": 51.0, "Local": 86.0}
    rows, best, text = headroom_rows(res, arms, ["FedAvg", "Local"], "shared", published, 10, None, 1.0)
    assert best == "FedAvg"  # on validation
    assert [r["kind"] for r in rows] == ["mechanism"] * 3 + ["claim", "claim"]
    assert [r["verdict"] for r in rows] == ["reproduces", "reproduces", "no difference", "reproduces", "reproduces"]
    assert "mechanism inert" in rows[2]["flags"] and "mechanism inert" in rows[4]["flags"]  # pFedHN-PC's swap
    assert "mechanism inert" not in rows[3]["flags"] and rows[3]["headline"]
    assert (
        rows[3]["claim"]
        == "Table 1, 10 clients, headroom split: pFedHN beats the strongest baseline (FedAvg, on validation)"
    )
    assert text.startswith("Not saturated: the strongest arm is 81.0 % and the arms span 21.0 points.\n")


def test_novel_claims_judge_the_gap_and_the_correlation():
    rows = []
    for seed in range(3):
        for method, gap in (("pFedHN", -0.05), ("Per-FedAvg", -0.15)):
            for alpha, tv, acc in ((0.1, 0.1, 0.8), (1.0, 0.5, 0.6)):
                rows.append({"method": method, "seed": seed, "alpha": alpha, "TV to nearest": tv, "acc_novel": acc,
                             "acc_novel (random v)": acc - 0.1, "gap": gap + 0.01 * seed})  # fmt: skip
    novel = pd.DataFrame(rows)
    res = result({"pFedHN": [record(0.8)] * 3, "Per-FedAvg": [record(0.8)] * 3})
    diffs = {"gap": pd.Series([10.0, 10.5, 9.5]), "corr": pd.Series([1.0, 1.0, 1.0])}
    (row_gap, row_corr), text = novel_claims(novel, res, "gap", "corr", diffs, None, 1.0, 5)
    assert row_gap["verdict"] == "reproduces" and row_gap["paper"] == "smaller at every TV (α)"
    assert row_corr["verdict"] == "reproduces"  # −r = 1 on every seed
    assert "α = 0.1: 100%, α = 1: 100%" in text and "per seed: -1.00, -1.00, -1.00" in text
    assert text.endswith(
        "(ours, not a claim of the paper): **reproduces (+10.0 points, 95 % CI [+10.0, +10.0], 3 seeds)**."
    )


def test_ablation_claims_choose_k_and_depth_on_validation():
    res = result(
        {
            "K=1": [record(0.50), record(0.60), record(0.55)],
            "K=10": [record(0.80, 0.9), record(0.81, 0.9), record(0.82, 0.9)],
            "K=25": [record(0.90, 0.8)] * 3,
            "e=5": [record(0.70), record(0.705), record(0.70)],  # − e=35: 0, +0.5, −0.5 points
            "e=35": [record(0.70), record(0.70), record(0.705)],
            "hn_layers=3": [record(0.70, 0.6)] * 3,
            "hn_layers=2": [record(0.70, 0.7)] * 3,
        }
    )
    rows, lines = ablation_claims(res, ["K=1", "K=10", "K=25"], "K=1", ("e=5", "e=35"), ("hn_layers=3", "hn_layers=2"),
                                  ["hn_layers=2", "hn_layers=3"], paper_depths=[88.38, 88.42], margin=2.0,
                                  resolution=1.0, plan=None)  # fmt: skip
    assert rows[0]["claim"] == "Figure 5: several local steps (K=10, on validation) beat the chain rule (K=1)"
    assert [r["verdict"] for r in rows] == ["reproduces", "reproduces", "no difference"]
    assert rows[1]["claim"] == "Figure 6a: e=5 and e=35 do not differ (±2 points)"
    assert rows[2]["paper"] == "3–4 layers best (88.38, 88.42 %)"
    assert lines[-2] == "* Depth chosen on validation accuracy: hn_layers=2 (the paper uses 3)."


# ----------------------------------------------------------------------------- the page


def test_page_table_has_human_headers_no_index_and_dashes():
    t = pd.DataFrame(
        {"paper CIFAR-10": [90.83, np.nan], "ours mean_acc": ["98.3 ± 1.6", "97.0"], "seeds": [3, 3]},
        index=pd.Index(["pFedHN", "Local"], name="arm"),
    )
    shown = page_table(t, ["paper CIFAR-10", "ours mean_acc"])
    assert list(shown.data.columns) == ["method", "paper, CIFAR-10 (%)", "ours, FMNIST (%)"]
    assert shown.data.iloc[:, 1].tolist() == ["90.8", "—"]
    assert "level0_row0" not in shown.to_html()  # no index column


def test_table1_wide_is_methods_by_client_counts():
    idx = pd.MultiIndex.from_tuples([(10, "pFedHN"), (10, "Local"), (10, "option"), (50, "pFedHN")],
                                    names=["clients", "arm"])  # fmt: skip
    t = pd.DataFrame(
        {"paper CIFAR-10": [90.83, 86.46, np.nan, 88.38],
         "ours mean_acc": ["98.3 ± 1.6", "98.5 ± 1.6", "97.0", "98.4 ± 0.3 (8 seeds; 98.2 on the 3 all arms ran)"]},
        index=idx,
    )  # fmt: skip
    wide = table1_wide(t, skip=["option"]).data
    assert list(wide.columns) == [("", "method"), ("10 clients", "ours"), ("10 clients", "paper"),
                                  ("50 clients", "ours"), ("50 clients", "paper")]  # fmt: skip
    assert wide.iloc[0].tolist() == ["pFedHN", "98.3 ± 1.6", "90.8", "98.4 ± 0.3", "88.4"]
    assert wide.iloc[1].tolist() == ["Local", "98.5 ± 1.6", "86.5", "—", "—"]  # Local did not run at 50 here


def test_claims_markdown_folds_the_papers_numbers_and_notes():
    table = pd.DataFrame(
        {"paper": ["+1.7 vs X"], "ours (a − b, 95 % CI)": ["+0.5 [+0.1, +0.9] (3 seeds)"],
         "verdict": ["reproduces · budget-limited"], "notes": ["a | b"]},
        index=pd.Index(["Table 1: A beats B"], name="claim"),
    )  # fmt: skip
    text = claims_markdown(table)
    first, fold = text.split("::::{dropdown} With the paper's numbers and the notes")
    assert (
        "| claim | ours (95 % CI) | verdict |" in first
        and "| Table 1: A beats B | +0.5 [+0.1, +0.9] (3 seeds) |" in first
    )
    assert "| claim | the paper | notes |" in fold and "a \\| b" in fold and fold.rstrip().endswith("::::")


def test_setup_rows_say_this_executions_values():
    p = dict(T1_IMAGES=(None, None), TRAIN_IMAGES=15000, HR_CLASSES=5, HR_IMAGES=100, CLIENT_COUNTS=[10, 50, 100],
             BUDGET_CLIENTS=75, NOVEL_TRAIN=40, N_NOVEL=16, CLIENT_UPDATES=1000, T1_LOCAL_STEPS=50,
             BASELINE_CLIENTS_PER_ROUND=5, UPDATES=500, LOCAL_STEPS=10, SEEDS=[0, 1, 2], SEED_CAP=10)  # fmt: skip
    rows = dict((what, ours) for what, ours, _ in setup_rows(p))
    assert list(rows) == ["Data", "Split", "Clients", "Model", "Training", "Seeds"]
    assert rows["Data"].startswith("Fashion-MNIST: all training images for Tables 1 and 4, 15,000 (stratified)")
    assert "5 classes and 100 images a client" in rows["Split"] and rows["Split"].startswith(
        "2 classes a client, shares"
    )
    assert rows["Clients"] == "Table 1: 10, 50, 100; Table 2: 75 in three sizes; Figure 2: 40 + 16 novel"
    assert rows["Seeds"] == "0, 1, 2 for every arm; a claim's arms to its seed plan, at most 10"


def test_run_config_gives_every_method_the_same_client_updates():
    hn = run_config("pfedhn", clients=10, updates=100, baseline_per_round=5, defaults={"lr": 0.1})
    base = run_config("fedavg", clients=10, updates=100, baseline_per_round=5, defaults={"lr": 0.1}, lr=0.2)
    assert (hn.rounds, hn.sample_rate, hn.eval_every, hn.lr) == (100, 0.1, 20, 0.1)  # one client per step
    assert (base.rounds, base.sample_rate, base.eval_every, base.lr) == (20, 0.5, 4, 0.2)  # a field wins
    assert per_round_of("pfedhn-pc", 5) == 1 and per_round_of("local", 5) == 5
    assert hn.partition == "pathological" and hn.dataset == "fashion-mnist"


def test_prop1_claims_take_the_largest_angle_and_the_denoising_at_k3():
    rows = [{"seed": s, "k": k, "largest angle span(W) vs PCA (°)": 0.01 * k, "‖θ̄ − θ*‖² (local)": 4.0,
             "‖Wv − θ*‖² (hypernetwork)": 1.0 + 0.01 * s} for s in range(3) for k in (1, 2, 3)]  # fmt: skip
    (pca, denoise), text = prop1_claims(pd.DataFrame(rows), 1.0)
    assert pca["verdict"] == "reproduces" and pca["ours (a − b, 95 % CI)"].startswith("+0.0 °")  # within ±1°
    assert denoise["verdict"] == "reproduces" and denoise["ours (a − b, 95 % CI)"].startswith("+74.8 %")
    assert "over $k = 1, 2, 3$ and 3 seeds: at most 0.03°" in text


def test_embedding_claims_judge_the_purity_gain_per_arm():
    scores = pd.DataFrame(
        [{"arm": a, "seed": s, "median movement (%)": 1.0, "purity before (%)": 25.0, "purity after (%)": after + s,
          "silhouette before": 0.0, "silhouette after": 0.1} for a, after in (("lr", 75.0), ("hn", 25.0)) for s in range(3)]
    )  # fmt: skip
    res = result({"lr": [record(0.5)] * 3, "hn": [record(0.5)] * 3})
    rows, lines = embedding_claims(scores, res, ["lr", "hn"], None, 1.0, 4)
    assert [r["verdict"] for r in rows] == ["reproduces", "inconclusive"]  # +51 points; +0, +1, +2: undecided
    assert rows[0]["claim"] == "Figure 4: embeddings group by garment group (lr; 1-NN purity gain)"
    assert lines[0] == "Chance 1-NN purity with 4 equal groups ≈ 25 %."
    assert "purity 25 → 76 %, silhouette 0.00 → 0.10" in lines[1]


def test_spectral_claim_sets_table_4_against_table_1():
    res = result(
        {
            "pFedHN": [record(0.80), record(0.805), record(0.80)],  # SN − plain: 0, −0.5, +0.5 points
            "pFedHN + spectral norm": [record(0.80), record(0.80), record(0.805)],
            "pFedHN + spectral norm, heads spared": [record(0.70)] * 3,
        }
    )
    published = pd.DataFrame({"table": ["Table 1", "Table 4"], "setting": ["10 clients", "10 clients / SN"],
                              "value": [90.83, 90.29]})  # fmt: skip
    row, table, lines = spectral_claim(res, "Table 4, 10 clients: no change", published, 10, 2.0, None)
    assert row["verdict"] == "reproduces" and row["paper"] == "-0.5 (CIFAR-10)"
    assert table.loc["pFedHN + spectral norm", "paper CIFAR-10"] == 90.29 and set(table["clients"]) == {10}
    assert lines[1].startswith("* 10 clients, spectral norm sparing the heads − plain (our variant): **contradicted")


def test_size_trend_names_the_methods_whose_accuracy_rises_with_size():
    published = pd.DataFrame({"setting": ["75 clients / size S", "75 clients / size M", "75 clients / size L"] * 2,
                              "method": ["pFedHN"] * 3 + ["LG-FedAvg"] * 3, "value": [85.0, 86.0, 87.0, 74.0, 53.0, 55.0]})  # fmt: skip
    text = size_trend(published, {"S": 95.3, "M": 95.25, "L": 95.0}, ["S", "M", "L"])
    assert text == ("In the paper's Table 2 (CIFAR-10) accuracy rises from S to M to L for pFedHN; it does not for "
                    "LG-FedAvg (74.0 / 53.0 / 55.0). pFedHN's mean over seeds on our runs (S / M / L): 95.3 / 95.2 / 95.0.")  # fmt: skip


def test_not_run_names_what_this_profile_leaves_out():
    assert (
        not_run([10, 50, 100], [], str.upper)
        == "Every client count and arm of the paper's Table 1 is computed at this profile."
    )
    text = not_run([10, 50], ["pfedme"], {"pfedme": "pFedMe"}.get)
    assert text.startswith("**Not run at this profile:** Table 1 with 100 clients (every arm); pFedMe at 50 clients (")


def test_lead_claims_follow_the_papers_order():
    row = {
        "claim": "a check",
        "ours (a − b, 95 % CI)": "+10.0 [+8.2, +11.8] (7 seeds)",
        "verdict": "reproduces",
        "notes": "n",
    }
    hr_rows = [
        row,
        row,
        row,
        row | {"claim": "Table 1, 10 clients, headroom split: pFedHN beats X", "verdict": "no difference"},
    ]
    res = result({"pFedHN": [record(0.70)] * 3, "Local": [record(0.75, 0.9)] * 3})
    leads = lead_claims(n0=10, counts=[10, 50], hr_rows=hr_rows, best_hr="FedPer", t1={50: res}, t1_pilot={50: res},
                        mech2h=row, widths=["S"], budget_clients=75, fig2="Figure 2: gap", row_gap=row,
                        novel_clients="40 + 16 novel clients", resolution=1.0)  # fmt: skip
    assert [lead[0] for lead in leads] == ["Table 1, 10 clients, headroom split: pFedHN beats", "Table 1, 50 clients: pFedHN beats",
                                           "Table 2, headroom split, size S", "Figure 2: gap"]  # fmt: skip
    assert leads[0][3] == "its models are client-specific (swap +10.0); FedPer does as well"
    assert leads[1][3] == "strongest baseline: Local" and leads[2][3] == "own model beats another of its size (+10.0)"
    assert leads[3][2] == "FMNIST Dir(0.1), 40 + 16 novel clients"


def test_table2h_rows_put_the_mechanism_first_and_link_it():
    res, groups, published = table2_result()
    for arm, seed in list(res.records):  # every record: a swap matrix per size
        res[arm, seed]["probe"] = {
            "name": "p",
            "rounds": {"5": {"S": [[0.9, 0.5], [0.5, 0.9]], "M": [[0.8, 0.6], [0.6, 0.8]]}},
        }
    args = dict(hn="HN", baselines=["FedAvg", "Local"], widths=["S", "M"], groups=groups, published=published)
    plan = pd.DataFrame({"plan": ["3 seeds", "3 seeds"]})
    rows, swap_plan, text = table2h_rows(res, plan, **args, cap=10, resolution=1.0, pilot_seeds=3)
    assert rows[0]["kind"] == "mechanism" and rows[0]["verdict"] == "reproduces"  # own − other: +30 points
    assert [r["claim"].split(":")[0] for r in rows[1:]] == [
        "Table 2, headroom split, size S",
        "Table 2, headroom split, size M",
    ]
    assert all(r["headline"] for r in rows[1:]) and list(swap_plan.index) == ["own − another model of its size"]
    assert text.startswith("* A client's own generated model beats another of its size: **reproduces**")
    assert text.endswith("size S 3 seeds, size M 3 seeds; this build ran 3 seeds.")


# ----------------------------------------------------------------------------- the notebook's configs and glue


def _config(method="pfedhn", **kw):
    return run_config(method, baseline_per_round=5, defaults={"lr": 0.1}, **kw)


def test_table1_config_and_arms_follow_algorithm_1():
    t1c = partial(
        ch.table1_config, _config, updates=100, local_steps=7, images=(300, 100), clip=50.0,
        options={"pfedme": {"K": 3}}, evals=4,
    )  # fmt: skip
    hn, me = t1c("pfedhn", 10), t1c("pfedme", 10)
    assert (hn.rounds, hn.eval_every, hn.grad_clip, hn.local_steps, hn.train_images) == (100, 25, 50.0, 7, 300)
    assert (me.rounds, me.eval_every, me.grad_clip, me.options) == (20, 5, 0.0, {"K": 3})
    arms = ch.table1_arms(t1c, [10, 50], ["pfedhn", "pfedme"], ["pfedme"], str.upper, averaged="avg",
                          averaged_clients=5, no_clip="noclip")  # fmt: skip
    assert list(arms[10]) == ["PFEDHN", "PFEDME", "avg", "noclip"] and list(arms[50]) == ["PFEDHN"]
    assert arms[10]["avg"].rounds == 20 and arms[10]["noclip"].grad_clip == 0.0 and arms[50]["PFEDHN"].clients == 50
    grid = ch.headroom_pilot_grid(t1c, 10, [4, 6], [100], updates=40, per_round=5, evals=4)
    assert list(grid) == ["4 classes, 100 images", "6 classes, 100 images"]
    g = grid["6 classes, 100 images"]
    assert (g.method, g.classes_per_client, g.train_images, g.rounds, g.eval_every) == ("local", 6, 1000, 8, 2)


def test_table2_arms_split_the_baselines_by_size():
    arms = ch.table2_arms(_config, methods=["pfedhn", "fedavg"], clients=12, updates=30, widths=["S", "L"], hn="HN",
                          hn_options={"widths": "S,L"}, images=600, test_images=300, options={}, name=str.title)  # fmt: skip
    assert list(arms) == ["HN", "Fedavg (S)", "Fedavg (L)"]
    assert (arms["HN"].clients, arms["HN"].rounds, arms["HN"].options) == (12, 60, {"widths": "S,L"})
    s = arms["Fedavg (S)"]
    assert (s.clients, s.width, s.train_images, s.test_images, s.rounds) == (6, "S", 200, 100, 6)
    hr = ch.table2_arms(_config, methods=["fedavg"], clients=12, updates=30, widths=["S", "L"], hn="HN", hn_options={},
                        images=600, test_images=300, options={}, name=str.title, classes_per_client=4, train_images=120)  # fmt: skip
    assert hr["Fedavg (L)"].train_images == 40 and hr["HN"].train_images == 120 and hr["HN"].classes_per_client == 4


def test_option_checks_and_texts_say_the_numbers():
    res = SimpleNamespace(compare=lambda a, b: f"{a} vs {b}")
    checks = chp.option_checks(res, 10, 1000, 50.0, "avg", "noclip")
    assert len(checks) == 2 and "pFedHN vs avg" in checks[0] and "norm 50 (10 clients)" in checks[1]
    table = pd.DataFrame({"Local, validation (%)": [61.25]}, index=["4 classes, 100 images"])
    text = chp.headroom_choice(table, "4 classes, 100 images", 4, 100, 300, 0, 70.0)
    assert "**4 classes and 100 training images per client**" in text and "61.2 %" in text and "70.0 %" in text
    assert "**7 seeds**, at most 10; this build ran 5" in chp.headroom_plan_text(3, 0.9, 7, 10, 5)
    assert "90 % upper bound" in chp.headroom_plan_text(3, 0.9, 7, 10, 5)
    avg = "pFedHN, averaged"
    arms = {
        "pFedHN": SimpleNamespace(rounds=100),
        avg: SimpleNamespace(rounds=20),
        "FedAvg": SimpleNamespace(rounds=20),
    }
    steps = chp.steps_text(arms, 100, avg, 5)
    assert "took 100 hypernetwork steps" in steps and "took 20 steps" in steps and "20 rounds of 5" in steps
    comm = pd.DataFrame({"KB per message": [12.4]}, index=["pFedHN-PC"])
    assert chp.comm_text(10, 12345, comm).endswith("12,345; pFedHN-PC's message (the feature extractor only): 12 KB.")
    assert "at most 4×" in chp.budget_intro(4)
    assert "pilot of 3 seeds, at most 10 seeds" in chp.plans_intro("3 seeds", 10)
    assert chp.images_text((None, None)) == "all the training and test"
    assert chp.images_text((3000, 1000)) == "3000 training and 1000 test"
    assert chp.glue_params({"A": 1, "b": 2}, {"d": 3}, {"X": 4}) == {
        "A": 1, "PROP1_D": 3, "REGIME_TOLERANCE": chp.REGIME_TOLERANCE, "REGIME_GAP": chp.REGIME_GAP, "X": 4,
    }  # fmt: skip


def test_headroom_plan_pools_the_swaps_apart():
    diffs = {"a − b": [1.0, 1.2, 0.8], "c − b": [2.0, 2.1, 1.9], "own − other": [5.0, -5.0, 5.0]}
    plan = chc.headroom_plan(diffs, ["own − other"], cap=10, resolution=1.0)
    assert list(plan.index) == ["a − b", "c − b", "own − other"]
    alone = ch.seed_plan({"own − other": diffs["own − other"]}, cap=10, resolution=1.0)
    assert plan.loc["own − other"].equals(alone.loc["own − other"])  # its own spread, not the pooled one


def test_tally_counts_the_verdicts_and_the_budget_flags():
    rows = [{"verdict": "reproduced", "budget": ""}, {"verdict": "reproduced", "budget": "budget-limited"},
            {"verdict": "refuted", "budget": ""}]  # fmt: skip
    assert (
        chp.tally(rows)
        == "3 claims: 2 reproduced, 1 refuted; 1 of them rest on runs still improving at the end of their budget."
    )


def test_comm_table_and_c5_summary_read_the_finals():
    def rec(acc, up):
        r = record(acc)
        r["comm"] = {"bytes_up": up, "bytes_down": 2 * up}
        return r

    trainable, fixed = chc.C5_ARMS
    res = result(
        {
            trainable: [rec(80, 1000), rec(81, 1000), rec(82, 1000)],
            fixed: [rec(80.5, 1500), rec(81, 1500), rec(82.5, 1500)],
        }
    )
    comm = ch.comm_table(res, updates=4)
    assert comm.loc[fixed, "KB per message"] == pytest.approx(1e3 * 3000 / 1e6 / 4)
    assert list(comm.columns) == ["MB up", "MB down", "KB per message"] and comm.index.name == "method"
    paper = pd.DataFrame({"table": ["Appendix C.5"] * 2, "setting": ["50 clients / fixed embedding", "50 clients / trainable embedding"],
                          "value": [84.0, 83.5]})  # fmt: skip
    row, extra, table = chc.c5_summary(res, paper, "C.5 claim", 2.0, None)
    assert extra == pytest.approx(500) and row["claim"] == "C.5 claim" and "+0.5" in row["paper"]
    assert set(table.index) == {trainable, fixed}


def test_prop1_table_finds_the_pca_subspace():
    t = ch.prop1_table(dict(n_clients=20, d=8, k_true=2, n_samples=30, noise=0.1), [0], steps=400)
    assert list(t["k"]) == [1, 2] and len(t.columns) == 5
    assert t["‖Wv − θ*‖² (hypernetwork)"].iloc[-1] < t["‖θ̄ − θ*‖² (local)"].iloc[-1]  # rank k_true denoises


def test_spectral_shrink_divides_the_plain_spread():
    arms = {"plain": 0, "every": 1, "spared": 2}
    spread = lambda cfg: {"w": 6.0 / (1 + cfg.options["spectral_norm"]), "b": 1.0}  # noqa: E731
    s = ch.spectral_shrink(lambda n: tiny_config(method="pfedhn", clients=n), [4], [0, 1], arms, spread=spread)
    assert len(s) == 2 * 2 * 2 and set(s.arm) == {"every", "spared"}
    assert s[(s.arm == "every") & (s.tensor == "w")]["shrink (×)"].tolist() == [2.0, 2.0]
    rng = s.groupby("arm")["shrink (×)"].agg(["min", "median", "max"])
    text = chp.shrink_text(rng, "every", "spared")
    assert "1.0× to 2.0× (median 1.5×)" in text and "sparing the heads, 1.0× to 3.0×" in text


def test_built_runs_measure_the_hypernetwork():
    cfg = tiny_config(method="pfedhn")
    assert ch.hn_parameters(cfg) > 1000
    assert ch.embedding_gradient_ratio(cfg, 0) > 0


def test_embedding_snapshots_take_the_first_and_last_probe():
    probes = {
        0: {"classes": [[0, 1], [2, 3]], "embeddings": [[0.0, 1.0], [1.0, 0.0]]},
        5: {"embeddings": [[2.0, 2.0], [3.0, 3.0]]},
    }
    res = SimpleNamespace(probes=lambda arm, s: probes)
    groups, emb = ch.embedding_snapshots(res, {"a": None}, 0, 5, [0, 0, 1, 1])
    assert (
        groups.tolist() == [0, 1] and list(emb) == ["initial (random)", "trained, a"] and emb["trained, a"][1, 0] == 3.0
    )


# ----------------------------------------------------------------------------- figures


def _texts(fig):
    return [ax.get_title() for ax in fig.axes], [ax.get_xlabel() for ax in fig.axes]


def test_draw_fig2_has_the_gap_and_the_novel_panels():
    novel = pd.DataFrame({"method": ["pFedHN", "Per-FedAvg"] * 4, "alpha": [0.1, 0.1, 1.0, 1.0] * 2, "seed": [0] * 4 + [1] * 4,
                          "TV to nearest": np.linspace(0.1, 0.8, 8), "gap": np.linspace(-5, 1, 8), "acc_novel": np.linspace(60, 90, 8)})  # fmt: skip
    fig = chp.draw_fig2(novel)
    titles, xlabels = _texts(fig)
    assert titles == ["Figure 2: generalization gap", "Figure 7: pFedHN, novel clients"]
    assert xlabels[1] == "TV distance to the nearest training client" and fig.axes[0].get_xscale() == "log"
    means = chp.fig2_means(novel)
    assert len(means) == 4 and means.set_index(["method", "alpha"]).loc[("pFedHN", 0.1), "gap"] == pytest.approx(
        100 * (-5 + 6 / 7 * 2)
    )  # fractions in, points out


def test_draw_fig3_labels_clients_by_their_classes():
    fig = chp.draw_fig3([[0.9, 0.1], [0.2, 0.8]], [[0, 1], [2, 3]], ["T-shirt/top", "Trouser", "Pullover", "Dress"], 0)
    ax = fig.axes[0]
    assert ax.get_title() == "Figure 3 (seed 0), row-normalised"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["T-shirt & Trouser", "Pullover & Dress"]
    assert [t.get_text() for t in ax.texts] == ["1.00", "0.00", "0.00", "1.00"]  # row-normalised


def test_draw_fig4_has_a_panel_per_embedding_set():
    rng = np.random.default_rng(0)
    emb = {"initial (random)": rng.normal(size=(6, 3)), "trained, a": rng.normal(size=(6, 3))}
    fig = chp.draw_fig4(emb, ["tops", "tops", "shoes", "shoes", "bags", "bags"], 0)
    assert [ax.get_title() for ax in fig.axes] == list(emb) and fig._suptitle.get_text().endswith("seed 0")
    assert fig.axes[-1].get_legend() is not None and fig.axes[0].get_legend() is None


def test_draw_fig56_has_the_three_ablation_panels():
    hist = pd.DataFrame({"arm": ["K=1", "K=1", "K=5", "K=5"], "round": [1, 2, 1, 2], "mean_acc": [50, 60, 55, 70]})
    fin = pd.DataFrame(
        {"arm": ["embed_dim=5", "embed_dim=35", "hn_layers=2", "hn_layers=3"] * 2, "mean_acc": np.arange(8.0)}
    )
    res = SimpleNamespace(history=lambda: hist, finals=lambda: fin)
    fig = chp.draw_fig56(
        res, {"K=1": 0, "K=5": 0}, {"embed_dim=5": 0, "embed_dim=35": 0}, {"hn_layers=2": 0, "hn_layers=3": 0}
    )
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["Fig. 5: local steps K", "Fig. 6a: embedding size", "Fig. 6b: hidden layers"]
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["5", "35"]


def test_draw_claims_says_when_no_claim_has_an_interval():
    fig = chp.draw_claims([])
    assert [t.get_text() for t in fig.texts] == ["no claim has an interval at this profile"]


def test_draw_curves_has_two_panels_per_client_count():
    history = pd.DataFrame(
        {"arm": ["pFedHN", "pFedHN", "FedAvg", "FedAvg"], "round": [1, 2, 1, 2], "mean_acc": [50, 60, 55, 58]}
    )
    res = SimpleNamespace(history=lambda: history)
    arms = {
        "pFedHN": SimpleNamespace(sample_rate=0.1, clients=10),
        "FedAvg": SimpleNamespace(sample_rate=0.5, clients=10),
    }
    fig = chp.draw_curves({10: res, 50: res}, {10: arms, 50: arms})
    assert [ax.get_title() for ax in fig.axes] == [
        "10 clients",
        "10 clients: hypernetwork steps",
        "50 clients",
        "50 clients: hypernetwork steps",
    ]
    assert sorted(t.get_text() for t in fig.legends[0].get_texts()) == ["FedAvg", "pFedHN"]


# ----------------------------------------------------------------------------- the paper profile


def test_datasets_are_named_and_set_beside_the_papers_column():
    assert [ch.data_label(d) for d in ("fashion-mnist", "cifar10", "cifar100")] == ["FMNIST", "CIFAR-10", "CIFAR-100"]
    assert [ch.paper_dataset(d) for d in ("fashion-mnist", "cifar10", "cifar100")] == ["CIFAR10", "CIFAR10", "CIFAR100"]
    assert [ch.paper_label(d) for d in ("fashion-mnist", "cifar10", "cifar100")] == [
        "CIFAR-10",
        "CIFAR-10",
        "CIFAR-100",
    ]
    classes = {"cifar10": 2, "cifar100": 10}
    assert ch.data_fields("cifar100", classes) == {"dataset": "cifar100", "classes_per_client": 10}
    assert (
        ch.where("cifar10", ["cifar10", "cifar100"]) == ""
        and ch.where("cifar100", ["cifar10", "cifar100"]) == ", CIFAR-100"
    )
    assert ch.data_heading("cifar100", ["cifar10", "cifar100"]) == ["**CIFAR-100**"]
    assert ch.data_heading("fashion-mnist", ["fashion-mnist"]) == []  # one dataset: the book's page as it was


def test_table1_on_cifar100_reads_the_papers_cifar100_column():
    paper = pd.DataFrame(
        {"table": "Table 1", "dataset": ["CIFAR10", "CIFAR100", "CIFAR100", "CIFAR100"], "setting": "10 clients",
         "method": ["pFedHN", "pFedHN", "Local", "pFedHN-PC"], "value": [90.0, 65.74, 58.98, 68.15]}
    )  # fmt: skip
    assert paper_t1(paper, 10, "CIFAR100") == {"pFedHN": 65.74, "Local": 58.98, "pFedHN-PC": 68.15}
    assert t1_text(10, "pFedHN", "Local", ", CIFAR-100") == (
        "Table 1, CIFAR-100, 10 clients: pFedHN beats the strongest baseline (Local, on validation)"
    )
    res = result({"pFedHN": [record(0.80), record(0.82), record(0.81)], "pFedHN-PC": [record(0.7)] * 3,
                  "Local": [record(0.70, 0.9)] * 3})  # fmt: skip
    rows, lines, means = table1_claims({10: res}, {10: res}, paper, None, 1.0, dataset="CIFAR100", where=", CIFAR-100")
    assert rows[0]["claim"] == t1_text(10, "pFedHN", "Local", ", CIFAR-100")
    assert rows[0]["paper"] == "+6.8 vs Local (CIFAR-100)"  # 65.74 − 58.98
    assert lines[0].startswith("* 10 clients, CIFAR-100, pFedHN − Local:") and means[0].startswith(
        "* **10 clients, CIFAR-100**"
    )
    table = table1_rows(res, {"pFedHN": 65.74}, "CIFAR-100")
    assert table.loc["pFedHN", "paper CIFAR-100"] == 65.74
    wide = table1_wide(pd.concat({10: table}, names=["clients"]), label="CIFAR-100").data
    assert wide.iloc[0].tolist()[:3] == ["pFedHN", table.loc["pFedHN", "ours mean_acc"].split(" (")[0], "65.7"]
    shown = page_table(table, ["paper CIFAR-100", "ours mean_acc"], data="CIFAR-100")
    assert list(shown.data.columns) == ["method", "paper, CIFAR-100 (%)", "ours, CIFAR-100 (%)"]


def test_table2_names_its_dataset_and_the_papers():
    res, groups, published = table2_result()
    args = dict(hn="HN", baselines=["FedAvg", "Local"], widths=["S", "M"])
    table = table2_table(res, **args, groups=groups, published=published, data="CIFAR-100", label="CIFAR-100")
    assert list(table.columns) == ["ours CIFAR-100 S", "ours CIFAR-100 M", "paper CIFAR-100 S", "paper CIFAR-100 M"]
    best, diffs = table2_diffs(res, ", CIFAR-100", **args, groups=groups)
    rows, _ = table2_claims(res, best, diffs, None, **args, published=published, resolution=1.0, label="CIFAR-100")
    assert (
        rows[0]["claim"].startswith("Table 2, CIFAR-100, size S:") and rows[0]["paper"] == "+3.0 vs pFedMe (CIFAR-100)"
    )


def test_run_config_takes_the_dataset_from_its_defaults_and_a_field_wins():
    defaults = {"dataset": "cifar10", "classes_per_client": 2, "val_fraction": 0.2}
    cfg = run_config("fedavg", clients=10, updates=100, baseline_per_round=5, defaults=defaults)
    assert (cfg.dataset, cfg.classes_per_client, cfg.val_fraction) == ("cifar10", 2, 0.2)
    other = run_config("fedavg", clients=10, updates=100, baseline_per_round=5, defaults=defaults,
                       **ch.data_fields("cifar100", {"cifar100": 10}))  # fmt: skip
    assert (other.dataset, other.classes_per_client) == ("cifar100", 10)
    assert run_config("fedavg", clients=10, updates=100, baseline_per_round=5).dataset == "fashion-mnist"


def test_setup_rows_and_lead_claims_name_the_papers_datasets():
    p = dict(T1_IMAGES=(None, None), TRAIN_IMAGES=None, HR_CLASSES=5, HR_IMAGES=100, CLIENT_COUNTS=[10, 50, 100],
             BUDGET_CLIENTS=75, NOVEL_TRAIN=90, N_NOVEL=12, CLIENT_UPDATES=5000, T1_LOCAL_STEPS=50,
             BASELINE_CLIENTS_PER_ROUND=5, UPDATES=5000, LOCAL_STEPS=50, SEEDS=[0, 1, 2], SEED_CAP=10,
             DATASETS=["cifar10", "cifar100"], CLASSES_PER_CLIENT={"cifar10": 2, "cifar100": 10})  # fmt: skip
    rows = dict((what, ours) for what, ours, _ in setup_rows(p))
    assert rows["Data"].startswith("CIFAR-10 and CIFAR-100: all training images for Tables 1 and 4, all (stratified)")
    assert rows["Split"].startswith("2 classes a client (CIFAR-10), 10 classes a client (CIFAR-100), shares U(.4, .6)")
    row = {
        "claim": "a check",
        "ours (a − b, 95 % CI)": "+10.0 [+8.2, +11.8] (7 seeds)",
        "verdict": "reproduces",
        "notes": "n",
    }
    hr_rows = [row, row, row, row | {"claim": "Table 1, 10 clients, headroom split: pFedHN beats X"}]
    res = result({"pFedHN": [record(0.70)] * 3, "Local": [record(0.75, 0.9)] * 3})
    leads = lead_claims(n0=10, counts=[10, 50], hr_rows=hr_rows, best_hr="FedPer", t1={50: res}, t1_pilot={50: res},
                        mech2h=row, widths=["S"], budget_clients=75, fig2="Figure 2: gap", row_gap=row,
                        novel_clients="90 + 12 novel clients", resolution=1.0, data="CIFAR-10")  # fmt: skip
    assert [lead[2] for lead in leads] == ["CIFAR-10, our headroom split, 10 clients", "CIFAR-10, the paper's split, 50 clients",
                                           "CIFAR-10, our headroom split, 75 clients", "CIFAR-10 Dir(0.1), 90 + 12 novel clients"]  # fmt: skip


def test_paper_cost_counts_the_paper_profiles_runs_and_steps():
    from pflkit.paper import parameters

    p = parameters("pfedhn", "paper")
    assert p["DATASETS"] == ["cifar10", "cifar100"] and p["CLASSES_PER_CLIENT"]["cifar100"] == 10
    cost = ch.paper_cost(p)
    # one dataset's Tables 1 and 2, by hand (cap 10, pilot 3 seeds, 5 baseline clients a round, K = 50):
    # a run of Table 1 is 5000 client updates × 50 steps = 250,000 steps (pFedMe × 3 = 750,000).
    # Table 1, each client count: pFedHN, pFedHN-PC at 10 seeds (5.0 M), the strongest baseline as pFedMe at
    # 10 (7.5 M), the other five baselines at 3 (3.75 M): 45 runs, 16.25 M; at 10 clients also the averaging
    # and no-clip arms at 3 (1.5 M): 51 runs, 17.75 M. Table 1: 141 runs, 50.25 M steps.
    # Table 2: the HN (15,000 updates × 50 = 750,000) at 3 seeds, FedAvg, Per-FedAvg, LG-FedAvg per size at 3
    # (27 runs × 250,000), pFedMe per size at 3 (9 × 750,000): 39 runs, 15.75 M. One dataset: 180 runs, 66.0 M.
    one = ch.paper_cost(p | {"DATASETS": ["cifar10"]})
    assert (cost["runs"] - one["runs"], cost["steps"] - one["steps"]) == (180, 66_000_000)
    # the rest, on the first dataset: headroom pilot 9 × 50,000 and 80 × 250,000; Table 2 on it 130 runs, 52.5 M,
    # its extensions (2× and 4×) 80 runs, 180 M; Figures 2/7 20 runs, 5.3 M; Figure 4 20, 5.0 M;
    # Figure 5 50 runs, 10 × 5000 × (1 + 25 + 50 + 100 + 200) = 18.8 M; Figure 6 80, 20 M; Table 4 60, 15 M; C.5 20, 5 M
    assert (cost["runs"], cost["steps"]) == (360 + 549, 132_000_000 + 322_050_000)
    assert cost["datasets"] == ["cifar10", "cifar100"] and cost["seeds"] == {"pilot": 3, "cap": 10}
    assert cost["clients"]["Table 1"] == [10, 50, 100] and cost["rounds"]["Table 1"] == 5000 and cost["note"]


NAMES = {"pfedhn": "pFedHN", "pfedhn-pc": "pFedHN-PC", "local": "Local"}


def fake_run(calls: list, acc: dict):
    """A sweep's stand-in: every arm on its seeds, each run's accuracy ``acc[arm] + seed / 100``."""

    def run(arms, seeds):
        calls.append((list(arms), seeds))
        by_arm = {a: list(seeds[a] if isinstance(seeds, dict) else seeds) for a in arms}
        records = {(a, s): record(acc[a] + s / 100) for a in arms for s in by_arm[a]}
        return SweepResult(records, list(arms), sorted({s for v in by_arm.values() for s in v}))

    return run


def test_table1_runs_pilot_plan_and_runs_per_client_count():
    t1c = partial(ch.table1_config, _config, updates=100, local_steps=7, images=(None, None), clip=50.0, options={},
                  evals=4)  # fmt: skip
    calls = []
    run = fake_run(calls, {"pFedHN": 0.9, "pFedHN-PC": 0.85, "Local": 0.7, "pFedHN avg": 0.8, "pFedHN noclip": 0.8})
    out = ch.table1_runs(t1c, [10, 50], ["pfedhn", "pfedhn-pc", "local"], [], NAMES.get, run=run, seeds=[0, 1, 2],
                         cap=10, resolution=1.0, where=", CIFAR-100", averaged="pFedHN avg", averaged_clients=5,
                         no_clip="pFedHN noclip")  # fmt: skip
    assert list(out) == ["config", "arms", "pilot", "plan", "runs"] and out["config"] is t1c
    assert list(out["runs"]) == [10, 50] and list(out["arms"][10]) == [
        "pFedHN",
        "pFedHN-PC",
        "Local",
        "pFedHN avg",
        "pFedHN noclip",
    ]
    assert len(calls) == 4 and calls[0] == (list(out["arms"][10]), [0, 1, 2])  # the pilots, then each count's runs
    assert list(out["plan"].index) == [t1_text(n, hn, "Local", ", CIFAR-100") for n in (10, 50) for hn in NAMES.values()
                                       if hn != "Local"]  # fmt: skip
    assert out["runs"][50].values("pFedHN").tolist() == pytest.approx([90.0, 91.0, 92.0])  # decided at the pilot


def test_table1_shown_and_claims_set_each_dataset_beside_the_papers_same_dataset():
    res = result({"pFedHN": [record(0.80), record(0.82), record(0.81)], "pFedHN-PC": [record(0.7)] * 3,
                  "Local": [record(0.70, 0.9)] * 3})  # fmt: skip
    t1 = {d: {"runs": {10: res}, "pilot": {10: res}, "plan": None} for d in ("cifar10", "cifar100")}
    paper = pd.DataFrame(
        {"table": "Table 1", "dataset": ["CIFAR10"] * 3 + ["CIFAR100"] * 3, "setting": "10 clients",
         "method": ["pFedHN", "pFedHN-PC", "Local"] * 2, "value": [90.83, 92.47, 86.46, 65.74, 68.15, 58.98]}
    )  # fmt: skip
    shown = chp.table1_shown(t1, paper, ["cifar10", "cifar100"])
    assert len(shown) == 6 and [shown[0].data, shown[3].data] == ["**CIFAR-10**", "**CIFAR-100**"]
    assert shown[1].data.iloc[0].tolist()[2] == "90.8" and shown[4].data.iloc[0].tolist()[2] == "65.7"
    assert len(chp.table1_shown({"fashion-mnist": t1["cifar10"]}, paper, ["fashion-mnist"])) == 2  # no heading
    rows, lines, means = chc.table1_claims_all(t1, ["cifar10", "cifar100"], paper, 1.0)
    assert [r["claim"] for r in rows] == [
        t1_text(10, hn, "Local", w) for w in ("", ", CIFAR-100") for hn in ("pFedHN", "pFedHN-PC")
    ]
    assert [r["paper"] for r in rows[::2]] == ["+4.4 vs Local (CIFAR-10)", "+6.8 vs Local (CIFAR-100)"]
    assert lines[0] == "**CIFAR-10**" and lines[3] == "**CIFAR-100**" and len(means) == 2


def test_table2_shown_and_claims_on_every_dataset():
    res, groups, published = table2_result()
    args = dict(hn="HN", baselines=["FedAvg", "Local"], widths=["S", "M"])
    t2, pub = {"cifar10": res, "cifar100": res}, {"cifar10": published, "cifar100": published}
    shown = chp.table2_shown(t2, ["cifar10", "cifar100"], pub, args=args, groups=groups)
    assert len(shown) == 4 and shown[2].data == "**CIFAR-100**"
    assert "ours, CIFAR-100 (%)" not in shown[3].data.columns and "ours CIFAR-100 S" in shown[3].data.columns
    rows, lines, plans = chc.table2_claims_all(t2, ["cifar10", "cifar100"], pub, args=args, groups=groups, cap=10,
                                              resolution=1.0)  # fmt: skip
    assert [r["claim"].split(":")[0] for r in rows] == ["Table 2, size S", "Table 2, size M", "Table 2, CIFAR-100, size S",
                                                         "Table 2, CIFAR-100, size M"]  # fmt: skip
    assert rows[2]["paper"] == "+3.0 vs pFedMe (CIFAR-100)" and list(plans) == ["cifar10", "cifar100"]
    assert lines[0] == "**CIFAR-10**" and lines[3] == "**CIFAR-100**"
    one, _, _ = chc.table2_claims_all({"fashion-mnist": res}, ["fashion-mnist"], {"fashion-mnist": published}, args=args,
                                     groups=groups, cap=10, resolution=1.0)  # fmt: skip
    assert one[0]["paper"] == "+3.0 vs pFedMe (CIFAR-10)"  # `book`: the paper's CIFAR-10 column, for orientation


def test_table2_arms_take_all_of_the_runs_dataset_without_image_counts(monkeypatch):
    import pflkit.engine

    seen = []
    monkeypatch.setattr(pflkit.engine, "dataset", lambda name: seen.append(name) or SimpleNamespace(y_train=range(900),
                        y_test=range(300)))  # fmt: skip
    arms = ch.table2_arms(_config, methods=["fedavg"], clients=12, updates=30, widths=["S", "L"], hn="HN", hn_options={},
                          images=None, test_images=None, options={}, name=str.title, dataset="cifar100")  # fmt: skip
    assert seen == ["cifar100"] and (arms["Fedavg (S)"].train_images, arms["Fedavg (S)"].test_images) == (300, 100)
    assert arms["Fedavg (S)"].dataset == "cifar100" and arms["HN"].train_images is None


def test_hn_size_acc_skips_the_clients_without_test_data(monkeypatch):
    groups = np.array(["S", "S", "M", "M"])
    res = result({"HN": [record(0.7, method="pfedhn", per_client=[0.5, 0.8, 0.9])]})  # client 1 had no test data
    monkeypatch.setattr(ch, "tested_clients", lambda rec: np.array([True, False, True, True]))
    assert hn_size_acc(res, 0, "S", hn="HN", groups=groups) == pytest.approx(50.0)
    assert hn_size_acc(res, 0, "M", hn="HN", groups=groups) == pytest.approx(85.0)


def test_tested_clients_rebuild_the_runs_federation(monkeypatch):
    clients = [SimpleNamespace(test_idx=[1, 2]), SimpleNamespace(test_idx=[])]
    seen = []
    monkeypatch.setattr(ch.Federation, "from_config", lambda cfg: seen.append(cfg) or SimpleNamespace(clients=clients))
    rec = {"config": RunConfig(method="pfedhn", clients=2, dataset="cifar10").to_dict()}
    assert ch.tested_clients(rec).tolist() == [True, False]
    assert (seen[0].dataset, seen[0].clients, seen[0].device) == ("cifar10", 2, "cpu")


def test_novel_probe_skips_a_novel_client_without_test_data():
    probe = NovelProbe(exchanges=1, embed_lr=1.0, n_classes=10)
    cfg = tiny_config(method="fedavg", partition="dirichlet-normalized", alpha=0.5, clients=6, rounds=1,
                      novel_clients=2, novel_alpha=(0.1, 1.0), local_steps=1)  # fmt: skip
    out = {}

    def on_round(r, row, server, clients):
        clients[5].data.test_idx = clients[5].data.test_idx[:0]  # client 5: no test data
        out.update(probe(r, row, server, clients) or {})

    run(cfg, Federation.from_config(cfg), on_round=on_round)
    assert [r["client"] for r in out["novel"]] == [4]


def test_the_tuned_baselines_explain_their_weak_marks_with_the_pilots_numbers(tmp_path):
    from pflkit.tuning import tune_rates
    from tests.conftest import tiny_config

    arms = {"pFedMe (M)": tiny_config(method="pfedme", rounds=2, options={"K": 1}), "pFedMe (S)": tiny_config(),
            "Per-FedAvg (M)": tiny_config(method="perfedavg", rounds=2)}  # fmt: skip
    configs = ch.width_arms(arms, "M")
    assert list(configs) == ["pFedMe", "Per-FedAvg"]
    pilot = tune_rates(configs, ch.RATE, [0.005, 0.05], [0.01, 0.05], [0], tmp_path, start_lr=0.005, workers=1,
                       progress=False)  # fmt: skip
    why = chc.tuned_why(pilot, 0.005, "M", 0)
    table = pilot.table().set_index(["method", "learning rate", "personal rate"])
    for label in configs:
        chosen = pilot.config(label)
        shared = table.loc[(label, 0.005, 0.01), "val_mean_acc"]
        best = table.loc[(label, chosen.lr, chosen.options[ch.RATE[chosen.method]]), "val_mean_acc"]
        assert f"chooses {chosen.lr:g}" in why[label] and f"{best} % against {shared} %" in why[label]
        arm, rate = ch._shared_rate(pilot, label)  # the run at the shared values, shown beside the tuned one
        assert rate == 0.01 and pilot.first[label].grids[label][arm].lr == 0.005
        assert pilot.settings()[chosen.method] == {"lr": chosen.lr, "options": chosen.options}
    fresh = ch.fresh_config(pilot)
    assert fresh.options["personal"] == "fresh" and dataclasses.replace(fresh, options={}) == dataclasses.replace(
        pilot.config("pFedMe"), options={}
    )


def test_the_tuned_baselines_are_shown_beside_the_tables_arms_with_what_one_seed_says():
    rows = [("pFedHN (one HN, S/M/L), size M", "the authors'", 86.9), ("FedAvg (M)", "our tables'", 71.5),
            ("pFedMe (M)", "shared: lr=0.005, personal_lr=0.01", 48.3), ("LG-FedAvg (M)", "our tables'", 81.5),
            ("pFedMe (M)", "tuned: lr=0.1, personal_lr=0.05 (our tables')", 84.5),
            ("pFedMe (M)", "tuned, every client's θ̃ from the current model", 87.6)]  # fmt: skip
    beside = pd.DataFrame([{"arm": a, "setting": s, "rounds": 100, "test accuracy (%)": v} for a, s, v in rows])
    grid = pd.DataFrame([{"method": "pFedMe", "learning rate": 0.005, "personal rate": 0.01, "val_mean_acc": "47.9",
                          "chosen": ""}])  # fmt: skip
    pilot = SimpleNamespace(rate={"pFedMe": "personal_lr"}, table=lambda: grid.copy())
    shown = chp.tuned_shown(pilot, beside, 0)
    assert shown[0].data["learning rate"].iloc[0] == "0.005"  # a rate as written, not rounded away
    text = shown[2].data
    assert "the tuned pFedMe 84.5 % (at the shared values: 48.3 %)" in text and "as Algorithm 1 has it, 87.6 %" in text
    assert "the hypernetwork 86.9 %" in text and "LG-FedAvg (M), 81.5 %" in text
    alone = chp.tuned_shown(pilot, beside[~beside.setting.str.startswith("our")], 0)[2].data  # smoke: no such arms
    assert "the tuned pFedMe 84.5 % (at the shared values: 48.3 %);" in alone and "best of our tables" not in alone
    cfg = {"local_steps": 50, "clients": 10}
    recs = {("Per-FedAvg", 0): {"config": cfg, "final": {"mean_acc": 0.825}},
            ("Per-FedAvg", 1): {"config": cfg, "final": {"mean_acc": float("nan")}, "diverged": "loss became nan"}}  # fmt: skip
    carried = type("R", (), {"seeds": [0, 1], "records": recs, "__getitem__": lambda self, k: recs[k]})()
    line = chp.tuned_shown(pilot, beside, 0, carried)[2].data
    assert line.endswith("at Table 1's 50 local steps a round (10 clients, headroom split) Per-FedAvg at the tuned "
                         "values diverged on 1 of 2 seeds (seed 0: 82.5 %).")  # fmt: skip


def test_the_regime_pilot_finds_the_papers_structure_local_near_its_own_and_fedavg_far_below():
    t1c = partial(
        ch.table1_config, _config, updates=20, local_steps=2, images=(None, None), clip=0.0, options={}, evals=4
    )
    pilot = ch.headroom_pilot_grid(t1c, 10, [6], [100], updates=40, per_round=5, evals=4)["6 classes, 100 images"]
    arms = ch.regime_arms(pilot, ["fashion-mnist", "fashion-mnist-tops"], [100, 300])
    assert list(arms)[:2] == ["FMNIST, 2 classes, 100 images · Local", "FMNIST, 2 classes, 100 images · FedAvg"]
    tops = arms["FMNIST tops, 2 classes, 300 images · FedAvg"]
    assert (tops.method, tops.dataset, tops.classes_per_client, tops.train_images, tops.rounds) == (
        "fedavg", "fashion-mnist-tops", 2, 3000, 8)  # fmt: skip
    assert arms["FMNIST, 2 classes, 100 images · Local"] == dataclasses.replace(pilot, classes_per_client=2)
    res = result({"A, 2 classes · Local": [record(0.97)], "A, 2 classes · FedAvg": [record(0.71)],
                  "B, 2 classes · Local": [record(0.87)], "B, 2 classes · FedAvg": [record(0.69)],
                  "C, 2 classes · Local": [record(0.86)], "C, 2 classes · FedAvg": [record(0.80)]})  # fmt: skip
    t = chp.regime_table(res, 86.5)
    assert list(t.index) == ["A, 2 classes", "B, 2 classes", "C, 2 classes"]
    assert list(t["the paper's structure"]) == ["no", "yes", "no"]  # A: Local too high; C: FedAvg too near Local
    assert t.loc["B, 2 classes", "Local − FedAvg"] == pytest.approx(18.0)
    text = chp.regime_text(t, {"Local": 86.5, "FedAvg": 51.4})
    assert "exists on *B, 2 classes*: Local reads 87.0 % and FedAvg's global model 69.0 % there" in text
    assert chp.regime_text(t.drop(index="B, 2 classes"), {"Local": 86.5, "FedAvg": 51.4}).startswith("No split")
    shown = chp.regime_shown(res, {"Local": 86.5, "FedAvg": 51.4})
    assert len(shown) == 3 and "exists on" in shown[2].data
