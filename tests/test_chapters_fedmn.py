"""The FedMN chapter's probes and measurements, claims and page (pflkit.chapters.fedmn, fedmn_claims, fedmn_page)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from pflkit.chapters.fedmn import (
    client_groups,
    common_seed_means,
    decision_ari,
    oracle_table,
    pi_spread,
    router_probe,
    router_trace,
    routing_probe,
    swap_gain,
    swap_partners,
)
from pflkit.chapters.fedmn_claims import clipped_interval
from pflkit.chapters.fedmn_page import arrangements_text, plain_pilot
from pflkit.engine import Federation, run
from pflkit.errors import PflkitError
from tests.conftest import tiny_config


def test_swap_partners_take_the_next_client_of_another_group():
    assert swap_partners([0, 0, 1, 1]) == {0: 2, 1: 2, 2: 0, 3: 0}
    assert swap_partners([1, 1, 1]) == {0: 0, 1: 1, 2: 2}  # one group: nobody to swap with


def test_decision_ari_is_one_on_separated_groups_and_undefined_without_spread():
    paths = [[0.9, 0.1], [0.8, 0.2], [0.1, 0.9], [0.2, 0.8]]
    assert decision_ari(paths, [0, 0, 1, 1], 2) == pytest.approx(1.0)
    assert decision_ari(paths, [0, 1, 0, 1], 2) < 0.5
    assert np.isnan(decision_ari([[0.5, 0.5]] * 4, [0, 0, 1, 1], 2))


def test_swap_gain_and_pi_spread_read_the_probe():
    probes = {("FedMN", 0): {5: {"swap": [[0.9, 0.7], [0.8, 0.8]], "pi": [[0.2, 0.5], [0.6, 0.5]]}},
              ("FedMN", 1): {5: {"swap": [[0.5, 0.6], [0.5, 0.6]], "pi": [[0.5, 0.5], [0.5, 0.5]]}}}  # fmt: skip
    result = SimpleNamespace(seeds=[0, 1, 2], records=dict.fromkeys(probes), probes=lambda a, s: probes[a, s])
    gain = swap_gain(result, "FedMN", 5)
    assert list(gain.index) == [0, 1]  # seed 2 has no run
    assert gain[0] == pytest.approx(10.0) and gain[1] == pytest.approx(-10.0)  # points
    assert pi_spread(result, "FedMN", 0, 5) == pytest.approx(0.1)  # std over clients 0.2 and 0, mean over paths
    assert pi_spread(result, "FedMN", 1, 5) == 0.0


def test_routing_probe_records_decisions_and_the_swap_test_after_the_last_round():
    cfg = tiny_config(method="fedmn", partition="label-clusters", label_clusters=2, alpha=0.4, rounds=2,
                      options={"hidden": 16, "label_dim": 4, "arch": "2,2,2"})  # fmt: skip
    fed = Federation.from_config(cfg)
    seen = {}
    run(cfg, fed, on_round=lambda r, row, server, clients: seen.update({r: routing_probe(r, row, server, clients)}))
    assert seen[1] is None  # only after the last round
    p = seen[2]
    assert len(p["paths"]) == len(p["pi"]) == len(p["active"]) == len(p["swap"]) == cfg.clients
    assert all(0 <= v <= 1 for row in p["pi"] for v in row)
    groups = client_groups(fed)
    assert set(groups) <= {0, 1} and len(groups) == cfg.clients
    other = tiny_config(method="fedavg", rounds=1)
    assert run(other, Federation.from_config(other), on_round=lambda *a: seen.update(fedavg=routing_probe(*a)))
    assert seen["fedavg"] is None


def test_arrangements_text_names_every_block_count():
    assert arrangements_text({9: ["1,4,4", "1,3,5", "1,2,6"], 10: ["1,5,4"]}) == (
        "for 9 blocks [1×4×4], [1×3×5] and [1×2×6]; for 10 blocks [1×5×4]"
    )


def test_clipped_interval_cuts_the_interval_to_the_ari_range():
    v = SimpleNamespace(mean=0.6, lo=0.1, hi=1.1, n=3)
    assert clipped_interval(v) == "+0.60 ARI [+0.10, +1.00] (3 seeds)"
    assert (
        clipped_interval(SimpleNamespace(mean=-0.2, lo=-1.5, hi=0.3, n=3), digits=1)
        == "-0.2 ARI [-1.0, +0.3] (3 seeds)"
    )
    assert clipped_interval(SimpleNamespace(mean=0.5, lo=float("nan"), hi=float("nan"), n=1)) == "+0.50 ARI (1 seed)"
    assert clipped_interval(v, unit="") == "+0.60 [+0.10, +1.00] (3 seeds)"


def test_plain_pilot_shows_the_chosen_value_and_accuracy():
    summary = pd.DataFrame({"chosen": ["lr=0.05", "router_lr=1"], "val_mean_acc": ["73.8", "80.9"],
                            "at the grid's edge": ["", "yes"]}, index=["Local", "FedMN"])  # fmt: skip
    out = plain_pilot(summary)
    assert list(out.columns) == ["chosen learning rate", "validation accuracy (%)", "at the grid's edge"]
    assert list(out["chosen learning rate"]) == ["0.05", "1"]
    assert list(summary["chosen"]) == ["lr=0.05", "router_lr=1"]  # the input is left alone


def test_common_seed_means_use_only_the_seeds_every_arm_ran():
    values = {
        "A": pd.Series({0: 80.0, 1: 82.0, 2: 84.0, 3: 90.0, 4: 90.0}),
        "B": pd.Series({0: 85.0, 1: 85.0, 2: 86.0}),
    }
    means, common = common_seed_means(values)
    assert common == [0, 1, 2]
    assert list(means.index) == ["B", "A"]
    assert means["A"] == pytest.approx(82.0) and means["B"] == pytest.approx(85.333333)


def test_router_probe_adds_the_routers_input_every_routing_round_and_the_oracle_at_the_end():
    cfg = tiny_config(method="fedmn", partition="label-clusters", label_clusters=2, alpha=0.4, rounds=4, eval_every=1,
                      options={"hidden": 16, "label_dim": 4, "arch": "2,2,2", "pretrain_fraction": 0.25})  # fmt: skip
    seen = {}
    run(cfg, Federation.from_config(cfg), on_round=lambda r, row, s, c: seen.update({r: router_probe(r, row, s, c)}))
    assert {r for r, p in seen.items() if p} == {1, 2, 3, 4}  # from the switch (after round 1) on
    assert all(p["gap"] >= 0 and 0 < p["label_share"] < 1 and p["g_sd"] >= 0 for p in seen.values())
    assert "oracle" not in seen[3] and len(seen[4]["oracle"]) == cfg.clients and "swap" in seen[4]
    records = {("FedMN", 0): {"config": {"rounds": 4}}}
    result = type("R", (), {"records": records, "probes": lambda self, a, s: seen,
                            "__getitem__": lambda self, k: records[k]})()  # fmt: skip
    trace = router_trace(result, "FedMN")
    assert list(trace["round"]) == [1, 2, 3, 4] and list(trace.columns) == [
        "seed",
        "round",
        "gap",
        "label_share",
        "g_sd",
    ]
    table = oracle_table(result, "FedMN")
    assert table.shape == (1, 4) and 0 <= table.values.min() and table.values.max() <= 100


# ----------------------------------------------------------------------------- the page's words and tables


def test_grid_note_names_the_papers_values_and_those_above():
    from pflkit.chapters.fedmn_page import grid_note

    paper = [1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2]
    assert grid_note(paper, paper) == "the paper's grid"
    assert grid_note([0.02, 0.05, 0.1], paper) == "0.02 and 0.05 of the paper's grid and 0.1 above it"
    assert grid_note([0.02, 0.05], paper) == "0.02 and 0.05 of the paper's grid"


def test_split_text_reads_clusters_sizes_and_the_papers_table():
    from pflkit.chapters.fedmn_page import split_text

    datasets = pd.DataFrame({"num_clients": [80.0], "num_samples": [60000.0]}, index=["CIFAR10"])
    text = split_text([[0, 1], [2]], ["T-shirt/top", "Trouser", "Bag"], [100, 300, 200],
                      np.array([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8]]), datasets, seed=0)  # fmt: skip
    assert "0: T-shirt, Trouser; 1: Bag" in text
    assert "CIFAR10 80 clients, 60,000 samples (750 per client)" in text
    assert "median 200 (min 100, max 300)" in text and "holds 73 % of its images" in text


def test_router_lr_text_names_the_grown_values_and_the_ratio():
    from pflkit.chapters.fedmn_page import router_lr_text

    text = router_lr_text([1.0, 0.01, 0.1, 10.0], [0.01, 0.1, 1.0], 10.0, True, 0.05)
    assert text.startswith("The router's step size was tried at 0.01, 0.1, 1 and 10 (the edge rule added 10)")
    assert "10 was kept, still at the grid's edge, 200× FedMN's learning rate of 0.05." in text
    assert "edge rule" not in router_lr_text([0.01, 0.1], [0.01, 0.1], 0.1, False, 0.1)


def test_with_paper_adds_a_column_per_dataset_under_the_papers_names():
    from pflkit.chapters.fedmn import with_paper

    ours = pd.DataFrame({"acc": [80.0, 81.0, 82.0]}, index=["FedAvg + FT", "FedMN", "FedMN, no routing"])
    pub = pd.DataFrame({"CIFAR10": [82.3, 83.4]}, index=["FedAvg+", "FedMN"])
    out = with_paper(ours, pub, {"FedAvg + FT": "FedAvg+"})
    assert list(out.columns) == ["acc", "paper CIFAR10"]
    assert out["paper CIFAR10"].tolist()[:2] == [82.3, 83.4] and np.isnan(out["paper CIFAR10"].iloc[2])
    assert list(ours.columns) == ["acc"]  # the input is left alone


def test_best_round_text_names_the_seeds_in_pretraining():
    from pflkit.chapters.fedmn_page import best_round_text

    assert best_round_text({0: 60, 1: 54}, 12).endswith("seed 0 round 60, seed 1 round 54 (all in the routing rounds).")
    assert "on seed 1 it falls in the encoders' pretraining" in best_round_text({0: 60, 1: 12}, 12)


def test_bytes_text_sets_fedmn_against_fedavg_fedem_and_no_routing():
    from pflkit.chapters.fedmn_page import bytes_text

    up = pd.Series({"FedMN": 300.0, "FedAvg": 100.0, "FedEM": 150.0, "flat": 250.0})
    text = bytes_text(up, 1.0, 1000, 48, 20, "flat")
    assert "3.0× FedAvg's bytes and 2.0× FedEM's, and 1.20× those" in text
    assert "saves nothing here" in text and "50 MB each way" in text
    assert "(1,000 parameters, 4 MB each way over the 48 routing rounds of 20 clients)" in text
    assert "use 50% of the blocks" in bytes_text(up, 0.5, 1000, 48, 20, "flat")


def test_sizes_text_orders_the_arms_and_says_who_ran_more_seeds():
    from pflkit.chapters.fedmn_page import sizes_text

    means = pd.Series({"FedEM": 89.2, "FedMN": 87.0})
    text = sizes_text(means, [0, 1, 2], ["FedEM"], 5, 1000, 3, 200)
    assert text.startswith("Mean over seeds 0, 1 and 2, the seeds every arm ran: FedEM (89.2) > FedMN (87.0).")
    assert "FedEM ran 5 seeds" in text and "FedEM's 3 components 600, every other method's LeNet 200" in text
    assert "ran 5 seeds" not in sizes_text(means, [0, 1, 2], [], 0, 1000, 3, 200)


def test_routing_row_and_text_read_the_probe():
    from pflkit.chapters.fedmn import routing_row
    from pflkit.chapters.fedmn_page import routing_text

    probe = {"paths": [[0.9, 0.1], [0.8, 0.2], [0.1, 0.9], [0.2, 0.8]], "active": [[1, 1], [1, 1], [1, 0], [1, 0]],
             "pi": [[0.5, 0.4], [0.5, 0.4], [0.5, 0.6], [0.5, 0.6]]}  # fmt: skip
    row = routing_row(probe, [0, 0, 1, 1], 2, 0.04)
    assert row["distinct architectures"] == 2 and row["blocks in use (share)"] == 0.75
    assert row["Π over the paths"] == "0.400 to 0.600" and row["Π's spread over clients"] == 0.05
    assert row["swap test (points)"] == 0.0 and row["ARI (path weights vs label cluster)"] == 1.0
    assert "differ between clients by 0.0050 on average: the clustering" in routing_text(1, "0.4 to 0.6", 0.005)
    assert routing_text(2, "0.4 to 0.6", 0.05).startswith("On every seed the clients use at most 2 architectures")


def test_step_table_averages_per_way_of_stepping_and_formats():
    from pflkit.chapters.fedmn import step_row, step_table

    probe = {"active": [[1, 1], [1, 1]], "pi": [[0.2, 0.5], [0.6, 0.5]]}
    rows = [step_row(probe, 80.0, True), step_row(probe, 84.0, True), step_row(probe, 70.0, False)]
    raw = step_table(rows, formatted=False)
    assert raw.loc["every batch", "mean client accuracy (%)"] == 82.0
    assert raw.loc["once a round", "Π's spread over clients"] == pytest.approx(0.1)
    shown = step_table(rows)
    assert (
        shown.loc["every batch", "Π lowest"] == "0.200"
        and shown.loc["once a round", "mean client accuracy (%)"] == "70.0"
    )


def test_change_row_router_text_and_with_mean():
    from pflkit.chapters.fedmn_page import change_row, router_text, with_mean

    idx = pd.MultiIndex.from_tuples([("A", 0), ("A", 1), ("B", 0)], names=["arm", "seed"])
    first = pd.DataFrame({"gap": [0.5, 0.6, 0.5], "label_share": [0.2] * 3, "g_sd": [1.0, 1.0, 1.0]}, index=idx)
    last = pd.DataFrame({"gap": [0.05, 0.04, 0.3], "label_share": [0.1] * 3, "g_sd": [0.1, 0.2, 0.5]}, index=idx)
    row = change_row(first.iloc[0], last.iloc[0], 1, 0.004)
    assert row == {"cluster gap": "0.500 → 0.050", "label share": "0.200 → 0.100", "G spread": "1 → 0.1",
                   "architectures": 1, "swap (points)": 0.0}  # fmt: skip
    text = router_text(first, last, "A", "B")
    assert "from 0.50–0.60 to 0.040–0.050 with the tuned router step, and to 0.30–0.30" in text
    assert "end 0.1–0.2 times as far apart" in text and "step size 0.5–0.5 times" in text
    table = with_mean(pd.DataFrame({"x": [1.0, 2.0]}, index=[0, 1]))
    assert list(table["seed"]) == [0, 1, "mean"] and table["x"].iloc[-1] == 1.5


def test_f2_diffs_pair_each_claims_arms_on_their_common_seeds():
    from pflkit.chapters.fedmn import f2_diffs

    values = {"mn a": pd.Series({0: 80.0, 1: 82.0, 2: 90.0}), "mn b": pd.Series({0: 70.0, 1: 72.0}),
              "avg": pd.Series({0: 60.0, 1: 61.0, 2: 62.0}), "flat": pd.Series({0: 79.0, 1: 80.0, 2: 88.0})}  # fmt: skip
    out = f2_diffs(values, {8: ["mn a", "mn b"]}, {8: "avg"}, {8: "flat"}, "routing")
    assert out["8 blocks"].to_dict() == {0: 15.0, 1: 16.0}  # seed 2: "mn b" did not run it
    assert out["routing"].to_dict() == {0: 1.0, 1: 2.0, 2: 2.0}


def test_f2_text_and_sent_whole_text():
    from pflkit.chapters.fedmn_page import f2_text, sent_whole_text

    acc = pd.Series({"FedMN [1×4×3]": 80.0, "flat": 79.5, "avg": 70.0})
    par = pd.Series({"FedMN [1×4×3]": 10.0, "flat": 9.0, "avg": 12.0})
    text = f2_text(acc, par, {8: ["FedMN [1×4×3]"]}, {8: "avg"}, {8: "flat"}, 0.5)
    assert "([1×4×3]) reach 79.5 % at 9.0 M" in text and "beats FedAvg's MLPs by +9.5 points" in text
    assert "fewer parameters still" in text and text.endswith("little of it from routing.")
    assert "saves 20% of that" in sent_whole_text(0.8, 1.0) and "saves nothing here" in sent_whole_text(1.2, 1.0)


def test_frozen_and_shared_blocks_texts():
    from pflkit.chapters.fedmn_page import frozen_text, shared_blocks_text

    assert "training lowers it" in frozen_text(0.4, 0.6, 0.002, 0.001)
    assert frozen_text(0.4, 0.6, 0.002, 0.001).endswith("too small to change a decision.")
    assert "leaves it as it is" in frozen_text(0.5, 0.5, 0.2, 0.001)
    active = [[[1, 1, 0], [1, 0, 1]], [[1, 1, 1], [1, 1, 1]]]
    text = shared_blocks_text(active, True, 0.0, "+0.10 [-0.7, +1.0] (3 seeds)")
    assert "use 2.5 of the 3 blocks on average, and 2.0 blocks are active for every client" in text
    assert "swap test +0.0 points, ARI +0.10" in text
    assert shared_blocks_text([[[1, 0], [0, 1]]], True, 0.0, "").endswith("no block serves every group.")


def test_lead_text_follows_the_mechanism():
    from pflkit.chapters.fedmn_page import lead_text

    m = {"inert": True, "swap": 0.0, "swap_ours": "+0.0", "g_sd": 0.0026, "in_use": 1.0, "gap": (0.33, 0.04),
         "gain": 0.6, "bytes": 2.5, "f2": 17.5, "f2_flat": 16.9}  # fmt: skip
    lead, why = lead_text(m)
    assert lead.startswith("**In short.** At the last round the router's logits differ between clients by 0.0026")
    assert "every block stays in use" in lead and "(gap between their mean embeddings 0.33 → 0.04)" in lead
    assert lead.endswith(
        "It sends 2.5× FedAvg's bytes; Figure 2's +17.5 points over FedAvg hold without routing (+16.9)."
    )
    assert why.startswith("one decision for every client (swap test +0.0)")
    assert "0.33 → 0.04), clients' decisions started apart end alike (their logits' spread falls to at most 0.05 of its " \
        "start), and" in lead_text(m | {"apart": 0.05})[0]  # fmt: skip
    assert (
        "but decisions started apart stay apart (their logits' spread ends at up to 0.5"
        in lead_text(m | {"apart": 0.5})[0]
    )
    lead, why = lead_text(m | {"inert": False, "swap": 2.0, "swap_ours": "+2.0"})
    assert "worth +2.0 points against another group's" in lead and why.endswith("+2.0 against another group's")


def test_paper_and_own_split_the_claims_table():
    from pflkit.chapters.fedmn_page import paper_and_own
    from pflkit.claims import is_own

    rows = [{"claim": "Table II: FedMN beats FedEM"}, {"claim": "ours: routing beats every path on"}]
    table = pd.DataFrame({"verdict": ["reproduces", "inconclusive"]}, index=[r["claim"] for r in rows])
    paper_rows, own_rows = paper_and_own(table, rows)
    assert [is_own(r) for r in rows] == [False, True]
    assert list(paper_rows.index) == ["Table II: FedMN beats FedEM"] and list(own_rows.index) == [rows[1]["claim"]]


class _Result:
    """A sweep result as the chapter's functions read it: records, probes, seeds, arms."""

    def __init__(self, probes: dict, rounds: int):
        self._probes, self.rounds = probes, rounds
        self.records = {k: {"config": {"rounds": rounds}} for k in probes}
        self.seeds = sorted({s for _, s in probes})
        self.arms = list(dict.fromkeys(a for a, _ in probes))

    def probes(self, arm, seed):
        return self._probes.get((arm, seed), {})

    def __getitem__(self, key):
        return self.records[key]


def test_routing_table_and_ari_table_read_each_seeds_last_probe():
    from pflkit.chapters.fedmn import ari_table, routing_table

    apart = {"paths": [[0.9, 0.1], [0.8, 0.2], [0.1, 0.9], [0.2, 0.8]], "active": [[1, 1]] * 4, "pi": [[0.5, 0.5]] * 4,
             "swap": [[0.8, 0.7]] * 4}  # fmt: skip
    same = {**apart, "paths": [[0.5, 0.5]] * 4, "swap": [[0.8, 0.8]] * 4}
    result = _Result({("A", 0): {3: apart}, ("A", 1): {3: same}, ("B", 0): {3: same}}, rounds=3)
    groups = {0: [0, 0, 1, 1], 1: [0, 0, 1, 1]}
    table = routing_table(result, "A", [0, 1], groups, 2, 3)
    assert list(table.index) == [0, 1] and table.loc[0, "swap test (points)"] == 10.0
    assert table.loc[0, "ARI (path weights vs label cluster)"] == 1.0
    assert np.isnan(table.loc[1, "ARI (path weights vs label cluster)"])
    ari = ari_table(result, ("A", "B"), groups, 2, 3)
    assert list(ari.index) == [0] and ari.loc[0, "A"] == 1.0 and np.isnan(ari.loc[0, "B"])  # seed 1: B did not run


def test_router_changes_put_the_tuned_arm_first():
    from pflkit.chapters.fedmn_page import router_changes, router_text

    def probe(gap, sd, last=False):
        p = {"gap": gap, "label_share": 0.2, "g_sd": sd}
        return p | ({"active": [[1, 1], [1, 0]], "swap": [[0.5, 0.5]] * 2} if last else {})

    started = {2: probe(0.6, 2.0), 3: probe(0.5, 0.9) | {"g_sd_apart": 1.5}, 4: probe(0.05, 0.1, True)}
    result = _Result({("B", 0): {2: probe(0.5, 1.0), 4: probe(0.3, 0.5, True)},
                      ("A", 0): {2: probe(0.6, 2.0), 4: probe(0.06, 0.2, True)}, ("C", 0): started}, rounds=4)  # fmt: skip
    table, first, last = router_changes(result, "A", 4)
    assert list(table.index) == [("tuned step", 0), ("network's step", 0), ("started apart", 0)]
    assert table.loc[("tuned step", 0), "cluster gap"] == "0.600 → 0.060"
    assert table.loc[("tuned step", 0), "architectures"] == 2
    assert first.loc[("B", 0), "round"] == 2 and last.loc[("A", 0), "g_sd"] == 0.2
    # started apart: at the switch, the spread as the server set it apart (not the plain router's 2.0)
    assert first.loc[("C", 0), "g_sd"] == 1.5 and table.loc[("started apart", 0), "G spread"] == "1.5 → 0.1"
    text = router_text(first, last, "A", "B", "C")
    assert (
        "Started apart (the clients' logits 1.5–1.5 apart at the switch), they end 0.1–0.1 apart, 0.067–0.067" in text
    )
    assert text.endswith("embeddings ends at 0.050–0.050.")


def test_fig2_points_name_method_blocks_and_parameters():
    from pflkit.chapters.fedmn import fig2_points

    fin = pd.DataFrame({"arm": ["FedAvg, 8-layer MLP", "FedMN [1×4×3]", "FedMN [1×4×3], no routing"],
                        "MB_up": [4.0, 2.0, 1.0], "MB_down": [4.0, 2.0, 3.0], "mean_acc": [70.0, 80.0, 79.0]})  # fmt: skip
    out = fig2_points(fin, {8: "FedAvg, 8-layer MLP"}, {8: "FedMN [1×4×3], no routing"}, {8: ["FedMN [1×4×3]"]})
    assert list(out["method"]) == ["FedAvg", "FedMN", "FedMN, no routing"]
    assert list(out["blocks"]) == [8, 8, 8] and list(out["parameters transmitted (M)"]) == [2.0, 1.0, 1.0]
    assert "method" not in fin  # the input is left alone


def test_model_sizes_and_whole_ratio_count_parameters():
    from pflkit.chapters.fedmn import model_sizes, whole_ratio

    cfg = tiny_config(method="fedmn", model="mlp2x16", options={"hidden": 16, "label_dim": 4, "arch": "1,2,2"})
    sizes = model_sizes(cfg)
    assert 0 < sizes["router"] < sizes["FedMN"] and sizes["model"] > 0
    ratio = whole_ratio([cfg], ["mlp2x16"], 10, 0.0)  # no pretraining: every round sends encoders, router, blocks
    assert ratio == pytest.approx(sizes["FedMN"] / sizes["model"])


class _Compared:
    """A sweep result as :func:`pflkit.claims.claim` reads it: each pair's per-seed differences."""

    def __init__(self, diffs: dict, improving=()):
        self.diffs, self._improving = diffs, set(improving)

    def compare(self, a, b, metric, margin, resolution):
        from pflkit.experiments import verdict

        return verdict(self.diffs[a, b], margin=margin, resolution=resolution, budget=self.improving(a))

    def improving(self, arm):
        return arm in self._improving

    def values(self, arm, metric="mean_acc"):  # every arm at 80 %: what carries the paper's margins
        return pd.Series([80.0, 80.0, 80.0])

    def budget(self, *arms):
        return any(self.improving(a) for a in arms)

    def finals(self):
        arms = sorted({x for pair in self.diffs for x in pair})
        return pd.DataFrame({"arm": arms, "rounds": 60, "gain_last_fifth": 0.1})


def test_table2_claims_put_the_mechanism_first_and_the_papers_margins_beside():
    from pflkit.chapters.fedmn_claims import table2_claims

    diffs = {("FedMN", "flat"): [0.1, -0.2, 0.3], ("FedMN", "FedEM"): [-2.0, -3.0, -2.5],
             ("FedEM", "FedAvg + FT"): [2.0, 3.0, 2.5], ("FedAvg + FT", "FedAvg"): [1.0, 1.5, 1.2]}  # fmt: skip
    pub = pd.DataFrame({"CIFAR10": [80.0, 79.0, 81.0, 78.0]}, index=["FedMN", "FedEM", "FedAvg+", "FedAvg"])
    rows = table2_claims(_Compared(diffs), pub, {"FedAvg + FT": "FedAvg+"}, "FedEM", "FedAvg + FT", [0.0, 0.0, 0.0],
                         flat="flat")  # fmt: skip
    assert [r["claim"].split(":")[0] for r in rows] == ["Table II", "ours", "Table II", "Table II", "Table II"]
    assert rows[0]["kind"] == "mechanism" and rows[0]["verdict"] == "no difference"
    assert rows[2]["paper"] == "vs FedEM: CIFAR10 +1.0" and rows[2]["verdict"] == "contradicted"
    assert rows[3]["paper"] == "CIFAR10 -2.0" and rows[4]["paper"] == "CIFAR10 +3.0"
    assert rows[4]["verdict"] == "reproduces" and rows[1]["verdict"] == "no difference"


def test_concept_claims_end_with_the_mechanism_and_the_ari():
    from pflkit.chapters.fedmn_claims import concept_claims

    diffs = {("FedMN", b): [-40.0, -41.0, -42.0] for b in ("FedEM", "FedAvg", "Local", "flat")}
    rows = concept_claims(_Compared(diffs), [0.0, 0.0, 0.0], [0.9, 0.8, 1.0], flat="flat")
    assert len(rows) == 6 and all(r["claim"].startswith("beyond the paper: under concept shift") for r in rows[:4])
    assert rows[0]["verdict"] == "contradicted" and rows[4]["claim"].startswith("Concept shift: mechanism")
    assert rows[5]["verdict"] == "reproduces" and rows[5]["ours (a − b, 95 % CI)"].endswith("(3 seeds)")


def test_fig2_claims_one_per_block_count_then_routing_and_bytes():
    from pflkit.chapters.fedmn_claims import fig2_claims

    diffs = {"8 blocks": pd.Series([9.0, 10.0, 11.0]), "9 blocks": pd.Series([-0.1, 0.1, 0.0]),
             "routing": pd.Series([0.5, 0.6, 0.7])}  # fmt: skip
    mn_of = {8: ["FedMN [1×4×3]", "FedMN [1×3×4]"], 9: ["FedMN [1×4×4]"]}
    rows = fig2_claims(_Compared({}), diffs, mn_of, {"8 blocks": [], "9 blocks": []}, {8: "a", 9: "b"},
                       pd.Series([0.8, 0.85, 0.9]), rounds=20, routing="routing")  # fmt: skip
    assert rows[0]["claim"] == (
        "Figure 2, 8 blocks: FedMN (mean of its 2 architectures) is more accurate than an 8-layer FedAvg MLP at round 20"
    )
    assert "than a 9-layer" in rows[1]["claim"] and rows[1]["verdict"] == "no difference"
    assert rows[0]["verdict"] == "reproduces" and rows[2]["claim"].startswith("ours, Figure 2: routing")
    assert rows[3]["verdict"] == "reproduces" and "(−log ratio)" in rows[3]["ours (a − b, 95 % CI)"]


def test_routing_claims_note_the_spread_and_the_inert_mechanism():
    from pflkit.chapters.fedmn import step_row, step_table
    from pflkit.chapters.fedmn_claims import routing_claims
    from pflkit.experiments import mechanism, verdict

    mech = mechanism("swap", verdict([0.0, 0.0, 0.0], resolution=1.0), control="another client's decision")
    probe = {"active": [[1, 1], [1, 1]], "pi": [[0.2, 0.5], [0.201, 0.5]]}
    step = step_table([step_row(probe, 80.0, True), step_row(probe, 80.0, False)], formatted=False)
    ari, spread_row = routing_claims([0.5, 0.6, 0.7], 0.0026, mech, [-0.002, -0.0021, -0.0019], step)
    assert ari["verdict"] == "reproduces" and ari["ours (a − b, 95 % CI)"].startswith("+0.60 ARI")
    assert "differ by 0.0026 on average" in ari["notes"] and "mechanism inert" in ari["notes"]
    assert spread_row["kind"] == "mechanism" and spread_row["verdict"] == "contradicted"
    assert "once a round leaves Π between 0.20 and 0.50" in spread_row["notes"]


def test_oracle_and_departure_claims():
    from pflkit.chapters.fedmn_claims import departure_claims, oracle_claims
    from pflkit.experiments import mechanism, verdict

    oracle = pd.DataFrame({"own cluster's": [80.0, 81.0, 82.0], "partner cluster's": [77.0, 78.0, 78.5],
                           "best common": [79.8, 80.9, 82.1]})  # fmt: skip
    swap, gain, rate = oracle_claims(oracle, [0.0, 0.01, -0.01])
    assert swap["verdict"] == "reproduces" and gain["verdict"] == "no difference" and rate["verdict"] == "reproduces"
    assert rate["claim"].endswith("(swap test within ±1 point)")
    *_, apart = oracle_claims(oracle, [0.0, 0.01, -0.01], apart_swap=[3.0, 4.0, 5.0])
    assert (
        apart["claim"].startswith("ours: decisions started apart end interchangeable")
        and apart["verdict"] != "reproduces"
    )
    diffs = {("paper", "FedMN, softmax decisions"): [1.0, 1.5, 1.2]}
    ari = pd.DataFrame({"paper": [0.5, 0.6, 0.4], "frozen": [0.6, 0.7, 0.5]})
    mech = mechanism("swap", verdict([0.0, 0.0, 0.0]), control="another client's decision")
    rows = departure_claims(_Compared(diffs), ["softmax decisions"], ari, mech, paper_arm="paper", frozen="frozen")
    assert rows[0]["claim"] == "ours: the paper's FedMN − softmax decisions (both at the paper arm's tuned rate)"
    assert rows[0]["verdict"] == "reproduces" and rows[1]["verdict"] == "contradicted"


def test_setup_rows_state_the_parameters_beside_the_paper():
    from pflkit.chapters.fedmn_page import setup_rows

    v = {"TRAIN_IMAGES": 12000, "TEST_IMAGES": 4000, "LABEL_CLUSTERS": 3, "ALPHA": 0.4, "CLIENTS": 20, "ARCH": "3,3,3",
         "HIDDEN": 256, "ROUNDS": 60, "MOMENTUM": 0.9, "PRETRAIN_FRACTION": 0.2, "PILOT_ROUNDS": 20, "SEEDS": [0, 1, 2]}  # fmt: skip
    rows = dict((what, (ours, paper)) for what, ours, paper in setup_rows(v))
    assert rows["Data"][0] == "Fashion-MNIST, 12,000 training and 4,000 test images"
    assert rows["Model"][0].startswith("LeNet; FedMN [3×3×3]") and "the first 20% pretrain" in rows["Training"][0]
    assert rows["Seeds"] == ("seeds 0, 1 and 2 to start, more where a claim's plan asks", "")


# ------------------------------------------------------------------ the notebook's plumbing and figures


def _record(acc: float, method: str = "fedavg", rounds: int = 10, probe=None, up: float = 2e6) -> dict:
    """A stored run as :class:`pflkit.sweeps.SweepResult` reads it: accuracy ``acc`` (0-1) at every round."""
    final = {"round": rounds, "mean_acc": acc, "pooled_acc": acc + 0.01, "macro_f1": acc, "micro_f1": acc}
    history = [
        {"round": r, "mean_acc": acc * r / rounds, "pooled_acc": acc, "val_mean_acc": acc}
        for r in (rounds // 2, rounds)
    ]
    rec = {"config": {"method": method, "rounds": rounds}, "final": final, "history": history,
           "best_by_val": {"round": rounds // 2, "mean_acc": acc, "pooled_acc": acc}, "improving": 0.0,
           "comm": {"bytes_up": up, "bytes_down": 2 * up}, "provenance": {"wall_time_s": 1.0}}  # fmt: skip
    if probe is not None:
        rec["probe"] = {"name": "probe", "rounds": {str(rounds): probe}}
    return rec


def _sweep(accs: dict, probe=None, rounds: int = 10):
    """A sweep result: arm → accuracy per seed (FedMN's runs carry ``probe`` at the last round)."""
    from pflkit.sweeps import SweepResult

    records = {(a, s): _record(v, "fedmn" if a == "FedMN" else "fedavg", rounds, probe if a == "FedMN" else None)
               for a, vals in accs.items() for s, v in enumerate(vals)}  # fmt: skip
    return SweepResult(records, list(accs), range(max(len(v) for v in accs.values())))


def test_config_factory_reads_the_options_when_called_and_adds_cfls_warmup():
    from pflkit.chapters.fedmn import config_factory

    options = {"fedmn": {"arch": "1,2,2"}}
    config = config_factory(options, rounds=20, evals=5, clients=6, lr=0.02)
    cfg = config("fedmn", lr=0.1)
    assert (cfg.method, cfg.rounds, cfg.eval_every, cfg.clients, cfg.lr) == ("fedmn", 20, 4, 6, 0.1)
    assert cfg.partition == "label-clusters" and cfg.local_epochs == 1 and cfg.options == {"arch": "1,2,2"}
    options["fedmn"] = {"arch": "3,3,3"}  # a later change shows in the next config
    assert config("fedmn").options == {"arch": "3,3,3"}
    assert config("cfl", rounds=10).options == {"warmup": 2} and config("cfl", rounds=10).eval_every == 2


def test_federations_build_each_seed_once(monkeypatch):
    from pflkit.chapters import fedmn

    built = []
    monkeypatch.setattr(fedmn.Federation, "from_config", staticmethod(lambda cfg: built.append(cfg) or len(built)))
    fed_of = fedmn.federations(lambda method, seed: (method, seed))
    assert fed_of(0) == 1 and fed_of(1) == 2 and fed_of(0) == 1
    assert built == [("fedavg", 0), ("fedavg", 1)]


def test_claim_bullets_and_counts_text():
    from pflkit.chapters.fedmn_page import counts_text
    from pflkit.pages import claim_bullets

    ours = {"ours (a − b, 95 % CI)": "+2.0 [+1.0, +3.0]"}
    rows = [{"claim": "A beats B", "verdict": "reproduces", "budget": "", **ours},
            {"claim": "C beats D", "verdict": "inconclusive", "budget": "budget-limited", **ours},
            {"claim": "E beats F", "verdict": "reproduces", "budget": "", **ours}]  # fmt: skip
    text = claim_bullets(rows, notes=True)
    assert text.count("\n") == 2 and text.startswith("* A beats B: **reproduces") and "+2.0 [+1.0, +3.0]**." in text
    counts = counts_text(rows, 12).data
    assert counts.startswith("3 claims: 2 reproduces, 1 inconclusive; 1 of them") and counts.endswith("shows 12 runs.")


def test_table2_seeds_plan_every_claim_and_cap_the_seeds_run():
    from pflkit.chapters.fedmn import table2_seeds

    swap = {"swap": [[0.80, 0.70]] * 4}  # own decision 10 points better: the mechanism acts
    t = _sweep({"FedMN": [0.80, 0.82, 0.81], "B": [0.70, 0.73, 0.70], "C": [0.60, 0.64, 0.61]}, probe=swap)
    claims = {"FedMN − strongest baseline": ("FedMN", "B"), "B − C": ("B", "C")}
    arms = dict.fromkeys(["FedMN", "B", "C"])
    plan, seeds = table2_seeds(t, claims, "swap", arms, [0, 1, 2], 10, resolution=1.0, run=2)
    assert list(plan.index) == ["FedMN − strongest baseline", "B − C", "swap"]
    assert set(seeds) == set(arms) and all(len(s) <= 2 and set(s) <= {0, 1, 2} for s in seeds.values())
    _, five = table2_seeds(t, claims, "swap", arms, [0, 1, 2], 10, resolution=1.0, run=7)
    assert five["FedMN"] == five["B"] == [0, 1, 2, 3, 4] and five["C"] == [0, 1, 2]  # the headline: five at least


def test_table2_table_shown_and_notes():
    from pflkit.chapters.fedmn import ACC, table2_table
    from pflkit.chapters.fedmn_page import table2_notes, table2_shown

    active = {"active": [[1, 0], [1, 1]], "swap": [[0.8, 0.8]] * 2}
    accs = {
        "FedMN": [0.8, 0.82, 0.81],
        "FedMN, no routing": [0.8, 0.8, 0.8],
        "FedEM": [0.75, 0.76, 0.75],
        "CFL": [0.7, 0.71, 0.7],
        "FedAvg": [0.7, 0.71, 0.7],
    }
    t = _sweep(accs, probe=active)
    pub = pd.DataFrame({"CIFAR10": [80.0, 70.0], "EMNIST": [82.0, 71.0]}, index=["FedMN", "ClusteredFL"])
    table = table2_table(t, pub, {"CFL": "ClusteredFL"})
    assert list(table.index) == list(accs) and table.loc["CFL", "paper CIFAR10"] == 70.0
    assert table.loc["FedMN", ACC].startswith("81.0") and table.loc["FedMN", "seeds"] == 3
    shown = table2_shown(table, pub, {"FedMN": "lr 0.1 diverged"})
    assert "learning rate 0.1 diverged" in shown[0].data and list(shown[1].columns)[-2:] == [
        "paper CIFAR10",
        "paper EMNIST",
    ]
    assert len(table2_shown(table, pub, {})) == 2  # no fallback: no line
    plan = pd.DataFrame({"seeds needed": [3]}, index=["FedMN − FedAvg"])
    up, share, notes = table2_notes(t, plan, table, {"FedMN": 1000, "router": 100, "model": 500}, seeds=[0, 1, 2],
                                    mn_seeds=[0, 1, 2], run=5, rounds=10, pretrain_end=2, components=3, clients=2,
                                    cfl_eps={"eps1": 0.4, "eps2": 1.6}, flat="FedMN, no routing")  # fmt: skip
    assert up["FedMN"] == 2.0 and share == 0.75 and len(notes) == 5
    assert "CFL never split a cluster here" in notes[2].data  # CFL's runs equal FedAvg's


def test_fig2_names_arms_diffs_plan_and_means():
    from pflkit.chapters.fedmn import f2_run_diffs, fig2_arms, fig2_names, fig2_plan
    from pflkit.chapters.fedmn_page import fig2_means

    archs = {8: ["1,4,3", "1,3,4"], 9: ["1,4,4"]}
    fedavg, fedmn, mn_of, flat, routing, claim_arms = fig2_names(archs)
    assert fedavg[8] == "FedAvg, 8-layer MLP" and fedmn[9] == "FedMN, 9 blocks"
    assert mn_of[8] == ["FedMN [1×4×3]", "FedMN [1×3×4]"] and flat[9] == "FedMN [1×4×4], no routing"
    assert claim_arms["8 blocks"] == ["FedMN [1×4×3]", "FedMN [1×3×4]", "FedAvg, 8-layer MLP"]
    assert claim_arms[routing] == ["FedMN [1×4×3]", flat[8], "FedMN [1×4×4]", flat[9]]
    lrs = {fedavg[8]: 0.1, fedavg[9]: 0.05, fedmn[8]: 0.02, fedmn[9]: 0.01}
    arms = fig2_arms(lambda b, **f: ("avg", b, f["lr"]), lambda a, o=(), **f: ("mn", a, dict(o), f["lr"]), archs, lrs)
    assert list(arms) == [fedavg[8], fedavg[9], *mn_of[8], *mn_of[9], flat[8], flat[9]]
    assert arms[mn_of[8][1]] == ("mn", "1,3,4", {}, 0.02) and arms[flat[9]] == ("mn", "1,4,4", {"force_paths": 1}, 0.01)
    accs = {
        fedavg[8]: [0.7, 0.7, 0.7],
        mn_of[8][0]: [0.8, 0.81, 0.8],
        mn_of[8][1]: [0.8, 0.8, 0.82],
        flat[8]: [0.79, 0.8, 0.8],
    }
    d = f2_run_diffs(_sweep(accs), {8: mn_of[8]}, {8: fedavg[8]}, {8: flat[8]}, routing)
    assert set(d) == {"8 blocks", routing} and d["8 blocks"].iloc[0] == pytest.approx(10.0)
    assert list(fig2_plan(d, routing, 1.0).index) == ["8 blocks", routing]
    fin = pd.DataFrame({"arm": ["a", "a", "b"], "method": ["FedMN"] * 3, "blocks": [8, 8, 9], "seed": [0, 1, 0],
                        "parameters transmitted (M)": [1.0, 3.0, 5.0], "mean_acc": [70.0, 80.0, 60.0]})  # fmt: skip
    pts = fig2_means(fin)
    assert (
        list(pts.arm) == ["a", "b"]
        and pts.loc[0, "mean_acc"] == 75.0
        and pts.loc[0, "parameters transmitted (M)"] == 2.0
    )


def test_oracle_shown_reads_the_switch_and_the_oracles_claims():
    from pflkit.chapters.fedmn_page import oracle_shown

    first = pd.DataFrame({"round": [12, 12], "gap": [0.6, 0.5], "label_share": [0.2, 0.2], "g_sd": [2.0, 1.0]},
                         index=pd.MultiIndex.from_tuples([("A", 0), ("B", 0)], names=["arm", "seed"]))  # fmt: skip
    last = first.assign(round=60, gap=[0.06, 0.3], g_sd=[0.2, 0.5])
    v = SimpleNamespace(mean=0.3, lo=-0.2, hi=0.8, n=3, unit="points")
    row = {"claim": "c", "verdict": "reproduces", "_v": v, "ours (a − b, 95 % CI)": "+0.3 [-0.2, +0.8]", "flags": ""}
    oracle = pd.DataFrame({"router's decision": [80.0], "best common": [81.0]}, index=pd.Index([0], name="seed"))
    shown = oracle_shown(pd.DataFrame(), oracle, first, last, 60, "A", "B", (row, row, row), 1.0)
    assert shown[0].data == "From the switch (round 12) to the last round (60), per seed:"
    assert "a personal one is worth little over the best shared one" in shown[-1].data  # gain 0.3 < 1 point
    assert len(shown) == 5 and "mean" in shown[3].to_string()  # the oracle with its mean row
    apart = oracle_shown(pd.DataFrame(), oracle, first, last, 60, "A", "B", (row, row, row, row), 1.0, apart="B")
    assert "Started apart" in apart[-1].data and apart[-1].data.endswith("; with decisions started apart, **reproduces**, "
                                                                            "+0.3 [-0.2, +0.8].")  # fmt: skip


def _texts(fig) -> set[str]:
    from matplotlib.text import Text

    return {t.get_text() for t in fig.findobj(Text) if t.get_text().strip()}


def test_draw_functions_return_figures_with_their_panels_and_labels():
    from pflkit.chapters import fedmn_page as ch
    from pflkit.plots import MIN_TEXT_PX, shown_text_px

    history = pd.DataFrame({"arm": ["FedMN", "FedMN", "FedEM", "FedEM", "Local", "Local", "flat", "flat"],
                            "round": [1, 2] * 4, "mean_acc": [50.0, 60.0, 45.0, 55.0, 30.0, 35.0, 48.0, 58.0]})  # fmt: skip
    fig = ch.draw_table2_curves(history, ["Local", "FedEM", "flat", "FedMN"], "flat", 1)
    assert len(fig.axes) == 1 and fig.axes[0].get_ylabel() == "mean client test accuracy (%)"
    assert {"FedMN", "FedEM", "flat", "the 1 other baselines"} <= _texts(fig)
    pts = pd.DataFrame({"parameters transmitted (M)": [1.0, 2.0, 1.5], "mean_acc": [70.0, 60.0, 69.0],
                        "method": ["FedMN", "FedAvg", "FedMN, no routing"], "blocks": [8, 8, 8]})  # fmt: skip
    fig2 = ch.draw_figure2(pts, 20)
    assert fig2.axes[0].get_ylabel() == "mean client test accuracy, round 20 (%)" and "FedAvg" in _texts(fig2)
    mix = np.array([[0.9, 0.1, 0.0], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8], [0.6, 0.4, 0.0]])
    split = ch.draw_split(mix, mix.argmax(1), 0)
    assert split.axes[0].get_title() == "seed 0: label clusters per client" and "cluster 2" in _texts(split)
    paths = [[0.9, 0.1], [0.2, 0.8], [0.5, 0.5], [0.8, 0.2]]
    dec = ch.draw_decisions(paths, np.array([0, 1, 1, 0]), 60, 0)
    assert len(dec.axes) == 2 and dec.axes[0].get_xlabel() == "path (E = 2)"  # the heatmap and its colour bar
    assert [t.get_text() for t in dec.axes[0].get_yticklabels()] == ["c0 (cluster 0)", "c3 (cluster 0)", "c1 (cluster 1)",
                                                                     "c2 (cluster 1)"]  # fmt: skip
    wide = ch.draw_decisions([[0.5] * 27] * 4, np.array([0, 1, 1, 0]), 60, 0)  # 27 paths: a label every 4th
    assert [t.get_text() for t in wide.axes[0].get_xticklabels()] == ["0", "4", "8", "12", "16", "20", "24"]
    probe = {"gap": 0.5, "label_share": 0.2, "g_sd": 1.0}
    three = {(a, 0): {2: probe, 4: probe} for a in "ABC"}
    trace = ch.draw_router_trace(_Result(three, rounds=4))
    assert [ax.get_title() for ax in trace.axes] == ["cluster gap", "labels' share", "spread of G"]
    assert trace.axes[2].get_yscale() == "log" and {"tuned router step", "decisions started apart"} <= _texts(trace)
    assert [len(ax.get_lines()) for ax in trace.axes] == [3, 3, 3]
    for f in (fig, fig2, split, dec, trace):  # legible at the book's column
        assert shown_text_px(f) >= MIN_TEXT_PX


# ------------------------------------------------------- the paper profile: Table II on each dataset, its cost


def test_paper_cost_counts_table2_on_cifar10_and_the_notes_by_hand(monkeypatch):
    from pflkit.chapters.fedmn import notes_cost, paper_cost, round_steps, table2_cost
    from pflkit.paper import parameters

    monkeypatch.delenv("PFLBOOK_DRY", raising=False)
    p = parameters("fedmn", "paper")
    assert p["DATASETS"] == ["cifar10", "cifar100", "emnist-byclass", "femnist"] and p["BATCH"] == 128
    # CIFAR-10: 80 clients of 50 000 images less 10 % validation = 562.5 each, ⌈562.5 / 128⌉ = 5 steps
    assert round_steps("cifar10", p["SPLITS"]["cifar10"], 128) == 80 * 5
    # pilots: 8 methods × (6 rates + 1) + the router's 6 step sizes + 1, on 3 seeds, 50 rounds; 9 arms × 10 seeds, 150 rounds
    assert table2_cost(p, "cifar10") == (8 * 7 * 3 + 7 * 3 + 9 * 10, ((8 * 7 + 7) * 3 * 50 + 9 * 10 * 150) * 400)
    # EMNIST: FedEM's 10 % of 697 932 images over 100 clients, less validation: 628 a client, 5 steps
    assert round_steps("emnist-byclass", p["SPLITS"]["emnist-byclass"], 128) == 100 * 5
    # FEMNIST: 539 of about 3 500 writers hold 124 011 images, 207 a writer after validation: 2 steps
    assert round_steps("femnist", p["SPLITS"]["femnist"], 128) == 539 * 2
    # the notes on CIFAR-10: 5 + 20 runs of 150 rounds, Figure 2's 126 pilot and 180 arm runs of 20 rounds, 60 departure
    # runs of 150 rounds at 400 steps; 50 concept runs of 150 rounds, 30 iid clients of 1 500 images (12 steps each)
    runs, steps = notes_cost(p)
    assert runs == 5 + 20 + 126 + 180 + 60 + 50
    assert steps == (25 * 150 + 306 * 20 + 60 * 150) * 400 + 50 * 150 * 30 * 12
    cost = paper_cost(p)
    assert cost["runs"] == 4 * 279 + runs and cost["steps"] == sum(table2_cost(p, d)[1] for d in p["DATASETS"]) + steps
    assert cost["clients"] == {"cifar10": 80, "cifar100": 100, "emnist-byclass": 100, "femnist": 539}
    assert (cost["rounds"], cost["seeds"], cost["datasets"]) == (150, 10, p["DATASETS"]) and cost["note"]


def _fake_dataset(monkeypatch, users: int, train: int, test: int):
    import torch

    import pflkit.federation

    ds = SimpleNamespace(info={"users": list(range(users))}, y_train=torch.zeros(train), y_test=torch.zeros(test))
    monkeypatch.setattr(pflkit.federation, "dataset", lambda name, download=False: ds)


def test_split_fields_give_fedems_split_the_writers_and_fedems_share_of_the_images(monkeypatch):
    from pflkit.chapters.fedmn import split_fields

    monkeypatch.delenv("PFLBOOK_DRY", raising=False)
    _fake_dataset(monkeypatch, users=24, train=1000, test=300)
    assert split_fields("cifar10", (80, 3, 1.0, "mobilenet_v2", "2,2,2"), (None, None)) == {
        "dataset": "cifar10", "model": "mobilenet_v2", "partition": "label-clusters", "label_clusters": 3,
        "clients": 80, "train_images": None, "test_images": None}  # fmt: skip
    assert split_fields("cifar10", (80, 3, 1.0, "lenet", "2,2,2"), (1200, 400), cap=6)["clients"] == 6  # the dry run
    writers = split_fields("femnist", (539, 0, 1.0, "fedavg-cnn", "3,3,3"), (None, None))
    assert writers["partition"] == "natural" and writers["clients"] == 24 and "label_clusters" not in writers
    emnist = split_fields("emnist-byclass", (100, 62, 0.1, "fedavg-cnn", "3,3,3"), (None, None))
    assert (emnist["train_images"], emnist["test_images"], emnist["label_clusters"]) == (100, 30, 62)
    assert split_fields("emnist-byclass", (100, 62, 0.1, "fedavg-cnn", "3,3,3"), (50, 20))["train_images"] == 50
    monkeypatch.setenv("PFLBOOK_PROFILE", "paper")
    monkeypatch.setenv("PFLBOOK_DRY", "1")  # the dry run's fixtures: half the images a class for validation
    assert split_fields("cifar10", (80, 3, 1.0, "lenet", "2,2,2"), (1200, 400), cap=6)["val_fraction"] == 0.5
    monkeypatch.setenv("PFLBOOK_PROFILE", "smoke")
    assert "val_fraction" not in split_fields("cifar10", (80, 3, 1.0, "lenet", "2,2,2"), (1200, 400))


def test_dataset_configs_leave_the_books_run_unchanged_and_give_each_dataset_its_network():
    from pflkit.chapters.fedmn import config_factory, dataset_configs

    options = {"fedmn": {"arch": "3,3,3"}, "fedem": {"components": 3}}
    fields = dict(rounds=60, evals=10, alpha=0.4, batch_size=32, lr=0.02, momentum=0.9)
    book = dataset_configs(["fashion-mnist"], {"fashion-mnist": (20, 3, 1.0, "lenet", "3,3,3")}, options,
                           images=(12000, 4000), cap=None, **fields)  # fmt: skip
    config, opts = book["fashion-mnist"]
    old = config_factory(options, label_clusters=3, clients=20, train_images=12000, test_images=4000, **fields)
    assert opts is options and config("fedmn").to_dict() == old("fedmn").to_dict()  # the same store keys as before
    assert config("fedmn").dataset == "fashion-mnist" and config("cfl").options == {"warmup": 12}
    two = dataset_configs(["fashion-mnist", "digits"], {"fashion-mnist": (20, 3, 1.0, "lenet", "3,3,3"),
                                                       "digits": (4, 2, 1.0, "mlp", "2,2,2")}, options,
                          images=(None, None), cap=None, **fields)  # fmt: skip
    config, opts = two["digits"]
    assert opts is not options and opts["fedmn"]["arch"] == "2,2,2" and opts["fedem"]["components"] == 2
    assert options["fedmn"]["arch"] == "3,3,3"  # the first dataset's options untouched
    assert (config("fedmn").dataset, config("fedmn").model, config("fedmn").clients) == ("digits", "mlp", 4)


def test_claims_of_a_later_dataset_are_named_by_it_and_the_paper_column_is_its_own():
    from pflkit.chapters.fedmn import pub_for
    from pflkit.chapters.fedmn_claims import on_dataset

    rows = [{"claim": "Table II: FedMN beats X", "v": 1}, {"claim": "ours: routing beats Y"}, {"claim": "other"}]
    named = on_dataset(rows, "cifar100")
    assert [r["claim"] for r in named] == [
        "Table II on CIFAR100: FedMN beats X",
        "ours, CIFAR100: routing beats Y",
        "other",
    ]
    assert named[0]["v"] == 1 and rows[0]["claim"] == "Table II: FedMN beats X"  # a copy
    pub = pd.DataFrame({"CIFAR10": [1.0], "EMNIST": [2.0]}, index=["FedMN"])
    assert list(pub_for(pub, "emnist-byclass").columns) == ["EMNIST"]
    assert list(pub_for(pub, "fashion-mnist").columns) == ["CIFAR10", "EMNIST"]  # the book: beside all of them


def test_table2_claims_on_pass_each_dataset_its_column_and_name_the_later_ones(monkeypatch):
    import pflkit.chapters.fedmn_claims as ch

    seen = []

    def fake_claims(result, pub, paper_row, best, best_other, swap, **kw):
        seen.append((result, list(pub.columns), best, kw["plan"]))
        return [{"claim": f"Table II: FedMN beats {best}"}]

    monkeypatch.setattr(ch, "table2_claims", fake_claims)
    monkeypatch.setattr(ch, "swap_gain", lambda result, arm, rounds: pd.Series(dtype=float))
    runs = {d: SimpleNamespace(t2=d, best="FedEM", best_other="FedAvg", plan="plan") for d in ("cifar10", "femnist")}
    v = {"PAPER_ROW": {}, "ROUNDS": 5, "NO_ROUTE": "flat", "SWAP": "swap", "RESOLUTION": 1.0}
    pub = pd.DataFrame({"CIFAR10": [1.0], "FEMNIST": [2.0]}, index=["FedMN"])
    out = ch.table2_claims_on(runs, pub, v)
    assert seen == [("cifar10", ["CIFAR10"], "FedEM", "plan"), ("femnist", ["FEMNIST"], "FedEM", "plan")]
    assert out == {"cifar10": [{"claim": "Table II: FedMN beats FedEM"}],
                   "femnist": [{"claim": "Table II on FEMNIST: FedMN beats FedEM"}]}  # fmt: skip


def test_a_natural_split_makes_every_writer_its_own_group():
    part = SimpleNamespace(params={"n_clients": 4}, protocol="natural", n_clients=4)
    assert client_groups(SimpleNamespace(partition=part)).tolist() == [0, 1, 2, 3]
    concept = SimpleNamespace(params={"groups": [1, 0, 1]}, protocol="concept", n_clients=3)
    assert client_groups(SimpleNamespace(partition=concept)).tolist() == [1, 0, 1]


def test_table2_heading_and_shown_per_dataset():
    from pflkit.chapters.fedmn import ACC, config_factory
    from pflkit.chapters.fedmn_page import table2_heading, table2_shown

    config = config_factory({"fedmn": {"arch": "2,2,2"}}, rounds=5, evals=1, dataset="cifar10", clients=80,
                            label_clusters=3, alpha=0.4, model="mobilenet_v2")  # fmt: skip
    assert table2_heading("cifar10", config("fedmn")) == (
        "**CIFAR10**: 80 clients, FedEM's label clusters (3 groups of classes, Dir(0.4)), all images, model "
        "mobilenet_v2, FedMN [2×2×2]"
    )
    writers = config("fedmn", partition="natural", clients=539, train_images=None)
    assert "539 clients, one client per writer" in table2_heading("femnist", writers)
    table = pd.DataFrame({ACC: [80.0], "seeds": [3], "still improving": [""], "paper CIFAR10": [83.4]}, index=["FedMN"])
    pub = pd.DataFrame({"CIFAR10": [83.4]}, index=["FedMN"])
    heading, shown = table2_shown(table, pub, {}, heading="**CIFAR10**")
    assert heading.data == "**CIFAR10**" and list(shown.columns) == [ACC, "seeds", "still improving", "paper CIFAR10"]
    assert len(table2_shown(table, pub, {"FedMN": "lr 0.1 diverged"}, heading="h")) == 3


def test_table2_on_tunes_then_runs_the_planned_seeds_and_sets_the_router_step_in_the_datasets_options(monkeypatch):
    import pflkit.chapters.fedmn as ch
    import pflkit.experiments

    options = {"fedmn": {"arch": "2,2,2"}}
    config = ch.config_factory(options, rounds=6, evals=2)
    calls = []

    class Tuned:
        def __init__(self, configs, axis, values):
            self.configs, self.axis, self.grids = configs, axis, {k: {} for k in configs}

        def config(self, label):  # the grid's last value is chosen
            c = self.configs[label]
            return (
                c.__class__(**{**c.__dict__, "lr": 0.05})
                if self.axis == "lr"
                else SimpleNamespace(options={"router_lr": 0.3})
            )

    def tune_axis(configs, axis, values, seeds, store, extend=0):
        calls.append(("tune", axis, sorted(configs), list(values)))
        return Tuned(configs, axis, values)

    class Result:
        def select(self, arms, by):
            return arms[0]

        def __getitem__(self, key):
            return {"config": {"lr": 0.02 if key[0] == "FedAvg" else 0.05}}  # FedAvg fell back

    def sweep_stable(arms, seeds, store, tunings, probe):
        calls.append(("sweep", sorted(arms), seeds, probe["FedMN"].__name__))
        return Result(), {}

    monkeypatch.setattr(pflkit.experiments, "tune_axis", tune_axis)
    monkeypatch.setattr(pflkit.experiments, "sweep_stable", sweep_stable)
    monkeypatch.setattr(ch, "table2_seeds", lambda *a, **k: ("plan", {"FedMN": [0, 1, 2]}))
    monkeypatch.setattr(ch, "table2_table", lambda result, pub, row: ("table", pub))
    monkeypatch.setattr(ch, "diverged_everywhere", lambda configs, values, seeds, store: ["pFedMe"])
    v = {"TABLE2_METHODS": ["fedavg", "fedmn", "pfedme"], "STORE": None, "ROUNDS": 6, "PILOT_ROUNDS": 2, "LR_GRID": [0.02, 0.05],
         "ROUTER_LR_GRID": [0.1, 0.3], "PILOT_SEEDS": [0], "LR_EXTEND": 1, "NO_ROUTE": "FedMN, no routing",
         "SWAP": "swap", "SEEDS": [0], "RESOLUTION": 1.0, "TABLE2_RUN": 3, "PAPER_ROW": {}}  # fmt: skip
    r = ch.table2_on(config, options, "pub", v)
    assert [c[:2] for c in calls] == [("tune", "lr"), ("tune", "router_lr"), ("sweep", ["FedAvg", "FedMN", "FedMN, no routing"]),
                                      ("sweep", ["FedAvg", "FedMN", "FedMN, no routing"])]  # fmt: skip
    assert calls[2][2] == [0] and calls[3][2] == {"FedMN": [0, 1, 2]} and calls[3][3] == "router_probe"
    assert options["fedmn"] == {"arch": "2,2,2", "router_lr": 0.3} and r.fedmn is options["fedmn"]
    assert r.arms["FedMN, no routing"].options["force_paths"] == 1 and r.arms["FedMN"].options["router_lr"] == 0.3
    assert r.lr == {"fedavg": 0.02, "fedmn": 0.05} and r.fedmn_t2.lr == 0.05 and r.table == ("table", "pub")
    assert (r.best, r.plan, r.seeds, r.router_lr) == ("FedAvg", "plan", {"FedMN": [0, 1, 2]}, 0.3)
    assert r.fallbacks == {"pFedMe": "diverged at every learning rate of the pilot ([0.02, 0.05]): left out"}
    monkeypatch.setattr(ch, "diverged_everywhere", lambda configs, values, seeds, store: ["FedEM"])
    with pytest.raises(PflkitError, match="FedEM diverged at every learning rate"):
        ch.table2_on(config, options, "pub", v)


def test_diverged_everywhere_names_the_labels_whose_every_rate_diverged(monkeypatch):
    import pflkit.experiments
    from pflkit.chapters.fedmn import config_factory, diverged_everywhere

    config = config_factory({}, rounds=2, evals=1)
    bad = {"pFedMe · lr=0.01", "pFedMe · lr=0.1", "FedAvg · lr=0.1"}  # FedAvg still has a rate that trained

    def sweep(arms, seeds, store):
        assert set(arms) == {f"{m} · lr={lr:g}" for m in ("FedAvg", "pFedMe") for lr in (0.01, 0.1)} and seeds == [0]
        return SimpleNamespace(values=lambda a, metric: pd.Series([a in bad, False]))

    monkeypatch.setattr(pflkit.experiments, "sweep", sweep)
    configs = {"FedAvg": config("fedavg"), "pFedMe": config("pfedme")}
    assert diverged_everywhere(configs, [0.1, 0.01], [0], None) == ["pFedMe"]


def test_the_setup_card_names_every_dataset_at_the_paper_profile(monkeypatch):
    from pflkit.chapters.fedmn_page import setup_rows
    from pflkit.paper import parameters

    monkeypatch.delenv("PFLBOOK_DRY", raising=False)
    rows = dict((what, ours) for what, ours, _ in setup_rows(parameters("fedmn", "paper")))
    assert rows["Clients"] == "CIFAR10 80; CIFAR100 100; EMNIST 100; FEMNIST 539, every one in every round"
    assert "EMNIST FedEM's 10% of the images" in rows["Data"] and rows["Data"].endswith("after Table II on CIFAR10")
    assert "FEMNIST one client per writer" in rows["Split"] and "CIFAR100 20 label clusters, Dir(0.4)" in rows["Split"]
    assert "CIFAR10 mobilenet_v2, FedMN [2×2×2]" in rows["Model"] and "batch 128" in rows["Training"]
    book = dict((what, ours) for what, ours, _ in setup_rows(parameters("fedmn", "book")))
    assert book["Data"] == "Fashion-MNIST, 12,000 training and 4,000 test images"


def test_sizes_are_counted_on_the_configs_own_images_and_classes():
    from pflkit.chapters.fedmn import config_factory, model_sizes, shape_of
    from pflkit.models import build_model, n_params

    config = config_factory({"fedmn": {"arch": "2,2,2"}}, rounds=2, evals=1, dataset="digits", model="mlp")
    assert shape_of(config("fedmn")) == ((1, 8, 8), 10)
    sizes = model_sizes(config("fedmn"))
    assert (
        sizes["model"] == n_params(build_model("mlp", (1, 8, 8), 10)) != n_params(build_model("mlp", (1, 28, 28), 10))
    )
    assert sizes["FedMN"] > sizes["router"] > 0


def test_the_swap_test_leaves_out_a_client_without_test_images():
    cfg = tiny_config(method="fedmn", partition="label-clusters", label_clusters=2, alpha=0.4, rounds=2,
                      options={"hidden": 16, "label_dim": 4, "arch": "2,2,2"})  # fmt: skip
    fed = Federation.from_config(cfg)
    fed.clients[1].test_idx = fed.clients[1].test_idx[:0]  # a client the split left without test images
    seen = {}
    run(cfg, fed, on_round=lambda r, row, server, clients: seen.update({r: routing_probe(r, row, server, clients)}))
    assert len(seen[2]["swap"]) == cfg.clients - 1 and len(seen[2]["paths"]) == cfg.clients
