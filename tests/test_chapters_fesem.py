"""The FeSEM chapter's probes and measurements (pflkit.chapters.fesem)."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from pflkit.chapters.fesem import (
    AVG_HS,
    HUMAN,
    MAIN_COLUMNS,
    claim_lines,
    figure4,
    full_tables,
    readable,
    ring_layout,
    setup_rows,
    spread_ratio,
    styled,
    ari_at,
    authors_acc,
    client_images,
    estimate_s,
    fesem_best_count,
    fesem_probe,
    final_ari,
    k_margins,
    label_mix_ari,
    margin_at,
    margin_probe,
    method_configs,
    paper_diff,
    paper_value,
    per_seed,
    show_rows,
    side_by_side,
    trace_of,
    true_groups,
    verdict_row,
    whole_groups,
)
from pflkit.engine import Federation, run
from pflkit.methods.fesem import kmeans
from pflkit.results import paper_results
from pflkit.sweeps import probe_name
from pflkit.verdicts import verdict
from tests.conftest import tiny_config


def fake_result(probes: dict, values: dict | None = None):
    """The parts of a SweepResult the functions read: seeds, records, probes, values, improving."""
    return SimpleNamespace(
        seeds=sorted({s for _, s in probes}), records=dict.fromkeys(probes), arms=list(dict.fromkeys(a for a, _ in probes)),
        probes=lambda a, s: probes.get((a, s), {}), values=lambda a, m: pd.Series(values[a, m]),
        improving=lambda a: False,
    )  # fmt: skip


def test_probes_keep_the_names_the_store_knows_them_by():
    assert probe_name(fesem_probe) == "fesem_probe" and probe_name(margin_probe) == "margin_probe"


def test_fesem_probe_records_clusters_initial_kmeans_and_the_last_round():
    cfg = tiny_config(method="fesem", rounds=2, options={"centers": 2, "init_steps": 4})
    seen = {}
    run(cfg, Federation.from_config(cfg),
        on_setup=lambda s, c: seen.update({0: fesem_probe(0, None, s, c, groups=2), "other K": fesem_probe(0, None, s, c)}),
        on_round=lambda r, row, s, c: seen.update({r: (fesem_probe(r, row, s, c, groups=2), row, margin_probe(r, row, s, c))}))  # fmt: skip
    assert len(seen[0]["kmeans_last"]) == cfg.clients and "kmeans_last" not in seen["other K"]  # only at K = groups
    mid, _, margins = seen[1]
    assert len(mid["labels"]) == cfg.clients and mid["models"] == 2 and "authors" not in mid and "pca_local" not in mid
    assert len(margins["margins"]) == cfg.clients and min(margins["margins"]) >= 1  # second-nearest ÷ nearest
    last, row, _ = seen[2]
    assert last["authors"]["max"] == max(last["authors"]["per_centre"]) and len(last["authors"]["per_centre"]) == 2
    assert np.array(last["pca_local"]).shape == (cfg.clients, 2) and np.array(last["pca_centres"]).shape == (2, 2)
    assert last["intra"] >= 0 and last["train_loss"] == row["train_loss"]
    other = tiny_config(method="fedavg", rounds=1)
    run(other, Federation.from_config(other),
        on_round=lambda r, row, s, c: seen.update(fedavg=(fesem_probe(r, row, s, c), margin_probe(r, row, s, c))))  # fmt: skip
    assert seen["fedavg"] == (None, None)  # one shared model: nothing to record


def test_fesem_probe_reads_ifca_s_picks_and_scores_its_models_like_centres():
    cfg = tiny_config(method="ifca", rounds=1, options={"clusters": 2})
    seen = {}
    run(cfg, Federation.from_config(cfg), on_round=lambda r, row, s, c: seen.update({r: fesem_probe(r, row, s, c)}))
    p = seen[1]
    assert set(p["labels"]) <= {0, 1} and p["models"] == 2 and len(p["authors"]["per_centre"]) == 2
    assert "pca_local" not in p  # FeSEM's extras only


def test_margin_at_reads_the_median_of_a_probed_round():
    result = fake_result({("A", 0): {0: {"margins": [1.0, 3.0, 2.0]}, 3: {"margins": [5.0, 1.5]}}})
    assert margin_at(result, "A", 0, 0) == 2.0 and margin_at(result, "A", 0, -1) == pytest.approx(3.25)


def test_trace_ari_and_moves_against_the_true_groups():
    truth = {0: np.array([0, 0, 1, 1]), 1: np.array([0, 1, 0, 1])}
    probes = {("A", 0): {0: {"labels": [1, 1, 0, 0]}, 1: {"labels": [1, 0, 0, 0]}, 2: {"labels": [1, 1, 0, 0]}},
              ("A", 1): {0: {"labels": [0, 0, 1, 1]}, 2: {"labels": [0, 0, 1, 1]}}}  # fmt: skip
    result = fake_result(probes)
    trace = pd.DataFrame(trace_of(result, "A", truth.get))
    assert len(trace) == 5 and np.isnan(trace.moved.iloc[0])  # nothing to compare the first record with
    assert trace[trace.seed == 0].moved.tolist()[1:] == [1, 1]
    assert trace[trace.seed == 1].moved.tolist()[1:] == [0]
    at2 = ari_at(trace, "A", 2)
    assert at2[0] == pytest.approx(1.0)  # the groups up to renaming
    assert at2[1] == pytest.approx(-0.5)  # crosswise to the groups: below chance
    final = final_ari(result, "A", truth.get, seeds=[0, 1], rounds=2)
    assert final.tolist() == pytest.approx(at2.tolist())
    assert ari_at(trace, "A", 1).index.tolist() == [0]  # seed 1 has no record at round 1


def test_whole_groups_counts_groups_inside_one_cluster():
    groups = [0, 0, 1, 1, 2, 2]
    assert whole_groups([0, 0, 1, 1, 1, 1], groups) == 3
    assert whole_groups([0, 1, 1, 1, 0, 1], groups) == 1  # only group 1 lies in one cluster
    assert whole_groups([0] * 6, groups) == 0  # one cluster: nothing separated


def test_label_mix_ari_is_one_against_the_k_means_of_the_mixes_itself():
    cfg = tiny_config(partition="pathological", classes_per_client=2, clients=6)
    fed = Federation.from_config(cfg)
    counts = fed.partition.class_counts(fed.ds.y_train.numpy()).astype(float)
    mix = kmeans(torch.from_numpy(counts / counts.sum(1, keepdims=True)), 2, 3)
    assert label_mix_ari(fed, mix, 2, 3) == pytest.approx(1.0)
    assert label_mix_ari(fed, [0] * 6, 2, 3) == pytest.approx(0.0)  # one cluster: chance level


def test_k_margins_is_k_groups_minus_the_best_other_k():
    scans = {s: pd.DataFrame({"val_mean_acc": acc, "intra_distance": 0.0}, index=pd.Index([2, 3, 4], name="K"))
             for s, acc in {0: [0.5, 0.6, 0.7], 1: [0.8, 0.6, 0.7]}.items()}  # fmt: skip
    m = k_margins(scans, 4)
    assert m[0] == pytest.approx(10.0) and m[1] == pytest.approx(-10.0)  # points
    assert k_margins(scans, 5) is None  # K = 5 was not scanned


def test_authors_acc_reads_the_probe_or_the_one_model_s_accuracy():
    probes = {("FeSEM(2)", 0): {5: {"authors": {"max": 0.5}}}, ("FeSEM(2)", 1): {5: {"authors": {"max": 0.7}}},
              ("FedAvg", 0): {}, ("FedAvg", 1): {}, ("Local", 0): {}, ("Local", 1): {}}  # fmt: skip
    result = fake_result(probes, {("FedAvg", "pooled_acc"): {0: 60.0, 1: 62.0}})
    assert authors_acc(result, "FeSEM(2)", seeds=[0, 1], rounds=5).tolist() == pytest.approx([50.0, 70.0])
    assert authors_acc(result, "FedAvg", seeds=[0, 1], rounds=5).tolist() == [60.0, 62.0]  # micro acc itself
    assert authors_acc(result, "Local", seeds=[0, 1], rounds=5).empty  # no shared model


def test_paper_lookups_and_the_side_by_side_table():
    paper = paper_results("fesem")
    fedavg = paper_value(paper, "Table 2", "FedAvg")
    assert fedavg == float(paper[(paper.table == "Table 2") & (paper.metric == "micro_acc") & (paper.method == "FedAvg")].value.iloc[0])  # fmt: skip
    assert np.isnan(paper_value(paper, "Table 2", "no such method"))
    assert paper_diff(paper, "FedAvg", "FedAvg") == "FEMNIST +0.0, FedCelebA +0.0"
    n, _, total = fesem_best_count(paper).split()
    assert 0 <= int(n) <= int(total) == paper[paper.method != "FeSEM-MA(3)"].groupby(["table", "metric"]).ngroups
    values = {("FedAvg", "pooled_acc"): {0: 60.0, 1: 62.0}, ("Local", "pooled_acc"): {0: 70.0, 1: 71.0}}
    result = fake_result({("FedAvg", 0): {}, ("FedAvg", 1): {}, ("Local", 0): {}, ("Local", 1): {}}, values)
    t = side_by_side(result, paper, ["micro_acc"], ["Local", "FedAvg"], authors=lambda a: pd.Series(dtype=float),
                     ari=pd.Series({"FedAvg": 0.123}))  # fmt: skip
    assert t.index.tolist() == ["Local", "FedAvg"]  # the order asked for
    assert t.loc["FedAvg", "paper FEMNIST micro_acc"] == fedavg
    assert t.loc["Local", "paper FEMNIST micro_acc"] == paper_value(paper, "Table 2", "NoFed")  # Local is NoFed
    assert t.loc["Local", "paper's row"] == "NoFed" and t.loc["FedAvg", "ours ARI"] == "0.12"
    assert (
        t.loc["Local", "ours ARI"] == "" and t.loc["Local", "ours authors' micro_acc (best centre, all clients)"] == "—"
    )
    assert "ours ARI" not in side_by_side(result, paper, ["micro_acc"], ["FedAvg"]).columns


def test_method_configs_builds_every_method_at_the_chapter_s_options():
    base = tiny_config(rounds=4)
    arms = method_configs(base, 2, fesem_options={"lam": 0.1}, groups=3, baselines=["fedavg", "cfl", "feddist+ws"],
                          fedprox_mu=0.1, avg_hs_options={"centers": 1, "lam": 0.0})  # fmt: skip
    assert list(arms) == ["FeSEM", "FedAvg", "CFL", "FedDist+WS", AVG_HS]
    assert arms["FeSEM"].options == {"lam": 0.1, "centers": 3} and arms["FeSEM"].method == "fesem"
    assert arms["CFL"].options == {"warmup": 2} and arms["FedDist+WS"].options == {"size_weighted": True}
    assert arms[AVG_HS].method == "fesem" and arms[AVG_HS].options == {"centers": 1, "lam": 0.0}
    assert all(c.rounds == 4 for c in arms.values())


def test_estimate_s_counts_rounds_seeds_and_fesem_s_initial_models():
    arms = {"FeSEM": tiny_config(method="fesem", rounds=10, options={"centers": 2}),
            "fixed": tiny_config(method="fesem", rounds=10, options={"em": "fixed-random"}),
            "fixed + head start": tiny_config(method="fesem", rounds=10, options={"em": "fixed-random", "head_start": True}),
            "FedAvg": tiny_config(method="fedavg", rounds=10)}  # fmt: skip
    cost = {"per_round": {"fesem": 3.0, "other": 1.5}, "setup": 12.0}
    assert estimate_s(arms, [0, 1], **cost) == 2 * ((30 + 12) + 30 + (30 + 12) + 15)
    assert estimate_s({}, [0, 1], **cost) == 0.0


def test_grouped_federation_helpers_and_the_image_rows():
    cfg = tiny_config(partition="groups", alpha=0.5, clients=8)
    fed = Federation.from_config(cfg)
    g = true_groups(fed)
    assert g.tolist() == fed.partition.params["groups"] and len(set(g)) == 4
    imgs = client_images(fed, 1, n=3)
    assert len(imgs) == 3 and imgs.dtype == fed.ds.x_train.dtype
    fig = show_rows([("a", imgs), ("b", imgs[:1])], n=3, title="t", show=False)
    assert len(fig.axes) == 6 and sum(bool(ax.images) for ax in fig.axes) == 4  # rows of 3, b has one image
    plt.close(fig)


def test_prose_helpers():
    assert per_seed(pd.Series({0: 0.123, 2: 1.0})) == "seed 0 0.12, seed 2 1.00"
    row = verdict_row("the clusters are the groups", verdict([0.1, 0.2, 0.15], unit="ARI"))
    assert row["claim"] == "the clusters are the groups" and "0.15" in row["ours (a − b, 95 % CI)"]


def side_table():
    """A small side_by_side-shaped table: two arms, one still improving, one paper value missing."""
    return pd.DataFrame(
        {"paper FEMNIST micro_acc": [84.94, np.nan], "ours micro_acc": ["77.8 ± 1.2", "79.1 ± 0.5 (4 seeds; 78.8 on the 3 all arms ran)"],
         "seeds": [3, 4], "still improving": ["no", "yes"], "paper FedCelebA micro_acc": [80.0, 81.0],
         "paper FEMNIST macro_acc": [84.9, 85.0], "ours macro_acc": ["77.6 ± 2.6", "78.0 ± 1.0"],
         "paper FedCelebA macro_acc": [np.nan, 80.0], "ours authors' micro_acc (best centre, all clients)": ["77.8 ± 1.2", "—"],
         "ours ARI": ["", "0.41"], "paper's row": ["FedAvg", ""]},
        index=pd.Index(["FedAvg", "FeSEM(4)"], name="arm"),
    )  # fmt: skip


def test_readable_names_columns_marks_rising_arms_and_dashes_missing_values():
    t = readable(side_table(), MAIN_COLUMNS, short=True)
    assert list(t.columns) == ["method", *MAIN_COLUMNS.values()]
    assert t["method"].tolist() == ["FedAvg", "FeSEM(4) ↗"]  # still improving: marked
    assert t.loc[0, "micro acc, paper (FEMNIST)"] == "84.9" and t.loc[1, "micro acc, paper (FEMNIST)"] == "—"
    assert t.loc[1, "micro acc, ours"] == "79.1 ± 0.5"  # short: the note on the common seeds goes to the notes
    assert t.loc[0, "ARI, ours"] == "—" and t.loc[1, "ARI, ours"] == "0.41"
    whole = readable(side_table(), rising=False)
    assert whole.loc[1, "micro acc, ours"].endswith("all arms ran)") and whole["method"].tolist() == [
        "FedAvg",
        "FeSEM(4)",
    ]
    assert set(whole.columns) <= {"method", *HUMAN.values()} and not any("_" in c for c in whole.columns)
    assert "<th" in styled(t).to_html() and ">0<" not in styled(t).to_html()  # no index column


def test_full_tables_split_the_wide_tables_into_narrow_ones():
    tables = full_tables(side_table(), side_table().rename(columns=lambda c: c.replace("acc", "f1")), "3 seeds")
    assert len(tables) == 5 and all(len(t.columns) <= 5 for _, t in tables)
    assert "3 seeds" in tables[0][0] and tables[0][1].columns[1] == "micro acc, paper (FEMNIST)"
    assert tables[2][1].columns.tolist() == ["method", "micro-F1, paper (FEMNIST)", "micro-F1, paper (FedCelebA)",
                                             "micro-F1, ours"]  # fmt: skip
    assert tables[4][1]["the paper's row"].tolist() == ["FedAvg", "—"]


def test_claim_lines_give_each_claim_its_word_and_numbers():
    rows = [verdict_row("clusters are groups", verdict([0.1, 0.2, 0.15], unit="ARI"))]
    text = claim_lines(rows)
    assert text.startswith("* clusters are groups: **") and "0.15" in text and text.count("\n") == 0
    assert claim_lines([]) == ""


def test_ring_layout_puts_every_client_on_a_ring_around_its_own_centre():
    cxy = np.array([[0.0, 0.0], [10.0, 0.0]])
    labels = np.array([0, 1, 0, 0])
    pos = ring_layout(np.zeros((4, 2)), cxy, labels, 0.5)
    assert np.allclose(np.linalg.norm(pos - cxy[labels], axis=1), 0.5)
    assert np.allclose(pos[1], [10.0, 0.5])  # a lone member on the ring's top
    assert len({tuple(np.round(p, 6)) for p in pos[labels == 0]}) == 3  # members apart
    xy = np.array([[0.1, 0.0], [10.0, 0.2], [0.0, 0.0], [0.0, 0.0]])
    assert spread_ratio(xy, cxy, labels) == pytest.approx(0.02)


def test_figure4_draws_the_rings_and_the_ari_per_round():
    ari = pd.DataFrame([{"arm": a, "seed": s, "round": r, "ARI": 0.5} for a in ("FeSEM(2)", "FeSEM(4)")
                        for s in (0, 1) for r in (0, 1, 2)])  # fmt: skip
    fig = figure4(
        np.zeros((4, 2)), [[0, 0], [5, 5]], [0, 1, 0, 0], [0, 1, 1, 0], ["a", "b"], ari, "FeSEM(4)", [0.4, 0.3]
    )
    top, bottom = fig.axes
    assert sum(len(c.get_offsets()) for c in top.collections) == 4  # every client drawn
    assert top.get_xlabel() == "PC 1 (40 %)" and [t.get_text() for t in top.get_legend().get_texts()] == [
        "a (2)",
        "b (2)",
    ]
    assert [line.get_label() for line in bottom.get_lines()] == ["FeSEM(2)", "FeSEM(4)"]  # the strong arm last, on top
    assert fig.get_size_inches()[0] <= 6.88  # drawn for the column: shown at full size
    plt.close(fig)


def test_setup_rows_say_what_every_run_is():
    rows = setup_rows(clients=20, groups=["identity", "rot90", "invert", "thicken"], alpha=0.5, train=6000, test=4000,
                      rounds=60, steps=8, batch=50, momentum=0.9, init_steps=100, ks=[2, 3, 4], baselines=8, seeds=3,
                      cap=10)  # fmt: skip
    card = dict((what, ours) for what, ours, _ in rows)
    assert "6,000 training" in card["Data"] and "identity, rot90, invert and thicken" in card["Data"]
    assert card["Clients"].startswith("20, 5 a group") and "60 rounds × 8 local steps" in card["Training"]
    assert "K = 2, 3 and 4" in card["Methods"] and card["Seeds"] == "3, up to 10 where a claim's plan asks"
