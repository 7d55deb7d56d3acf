"""The FeSEM chapter's probes and measurements, and its page (pflkit.chapters.fesem, fesem_page)."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from pflkit.chapters.fesem import (
    AVG_EQ,
    AVG_HS,
    LEAF_TABLE,
    ari_at,
    arm_labels,
    authors_acc,
    chapter_arms,
    cluster_claims,
    cluster_trace,
    estimate_s,
    federations,
    fesem_best_count,
    fesem_config,
    fesem_probe,
    final_ari,
    head_start_claims,
    head_start_comparisons,
    initial_ari,
    k_claim,
    k_margins,
    k_seed_plan,
    label_mix_ari,
    last_mean,
    leaf_arms,
    leaf_steps,
    leaf_table,
    margin_at,
    margin_probe,
    method_configs,
    paper_cost,
    paper_diff,
    paper_value,
    readings_claims,
    readings_table,
    scan_frame,
    scan_seed,
    seed_plans,
    side_by_side,
    table_claims,
    trace_of,
    true_groups,
    verdict_row,
    whole_groups,
)
from pflkit.chapters.fesem_page import (
    HUMAN,
    MAIN_COLUMNS,
    budget_line,
    cfl_line,
    chapter_cost,
    client_images,
    cluster_notes,
    cluster_rows,
    collapse_check,
    collapse_figure,
    composition_notes,
    cost_line,
    federation_summary,
    figure3,
    figure4,
    full_tables,
    group_rows,
    groups_figure,
    head_start_grid,
    head_start_notes,
    label_skew,
    leads,
    leaf_tables,
    per_seed,
    pilot_notes,
    pilot_report,
    readable,
    readings_notes,
    ring_layout,
    scan_figure,
    scan_notes,
    scan_table,
    setup_rows,
    show_rows,
    spread_ratio,
    styled,
    table_notes,
    why_lines,
)
from pflkit.claims import mechanism
from pflkit.engine import Federation, RunConfig, run
from pflkit.methods.fesem import PAPER_WEIGHT, kmeans
from pflkit.paper import parameters
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
         "worst 10 % of clients": [60.1, 64.0],
         "paper FedCelebA macro_acc": [np.nan, 80.0], "ours authors' micro_acc (best centre, all clients)": ["77.8 ± 1.2", "—"],
         "ours ARI": ["", "0.41"], "paper's row": ["FedAvg", ""]},
        index=pd.Index(["FedAvg", "FeSEM(4)"], name="arm"),
    )  # fmt: skip


def test_readable_names_columns_marks_rising_arms_and_dashes_missing_values():
    t = readable(side_table(), MAIN_COLUMNS, short=True)
    assert list(t.columns) == ["method", *MAIN_COLUMNS.values()]
    assert "ARI, ours" in readable(side_table().drop(columns="worst 10 % of clients"), MAIN_COLUMNS)  # what it has
    assert t["worst 10 % of clients, ours"].tolist() == ["60.1", "64.0"]  # one decimal, as the paper's numbers
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
    from pflkit.pages import claim_bullets

    text = claim_bullets(rows, notes=True)
    assert text.startswith("* clusters are groups: **") and "0.15" in text and text.count("\n") == 0
    assert claim_bullets([], notes=True) == ""


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


def test_why_lines_give_a_reason_for_each_claim_that_did_not_reproduce():
    no, yes = verdict([-1.0, -2.0, -1.5]), verdict([1.0, 2.0, 1.5])
    row = {"verdict": "reproduces", "ours (a − b, 95 % CI)": "+1.5", "flags": []}
    kw = dict(best_other="Local", v_best=no, acc=pd.Series({"Local": 82.0, "FeSEM(3)": 79.0}), k_sel="FeSEM(3)",
              alpha=0.5, skew=0.54, ari_g=0.45, fe_g="FeSEM(4)", ari_labels=pd.Series([0.1, 0.2]), v_avg=yes,
              ref=AVG_HS, v_one=yes, hs_row=row, init_steps=100, hs_gain=2.5, em_row=row, rounds=60, local_steps=8,
              k_em=4, v_split=yes, v_groups=no, ari4=pd.Series([0.4, 0.5]), moves=0, groups=4, label_note=0.3,
              still=["FeSEM(4)"], improving=1.0, collapsed=["CFL"], seeds=3, min_seeds=3)  # fmt: skip
    text = why_lines(**kw)
    assert "**NoFed (Local) is the strongest baseline** (82.0 against FeSEM(3)'s 79.0" in text
    assert "54 %" in text and "+2.5 points" in text and "never moves a client" in text and "at most 0.3" in text
    assert "**Not converged**: FeSEM(4)" in text and "**Collapsed baselines**: CFL" in text
    assert "does not clearly beat FedAvg" not in text and "*not tested*" not in text  # reproduced; enough seeds
    calm = why_lines(**kw | dict(best_other="CFL", hs_row={"verdict": "inconclusive"}, v_groups=yes, still=[],
                                 collapsed=[]))  # fmt: skip
    assert calm == "Every claim above reproduces on our setting."
    assert "*not tested*" in why_lines(**kw | dict(seeds=1))


def test_collapse_check_finds_a_method_on_one_cluster():
    probes = {("CFL", 0): {1: {"labels": [0, 0, 0], "models": 1, "norms": [[0.5, 2.0]]},
                           2: {"labels": [0, 0, 0], "models": 1, "norms": [[0.3, 2.5]]}},
              ("IFCA", 0): {1: {"labels": [0, 1, 1], "models": 2}, 2: {"labels": [0, 1, 0], "models": 2}}}  # fmt: skip
    trace = pd.DataFrame([{"arm": a, "seed": 0, "round": 2, "ARI": x} for a, x in (("CFL", 0.0), ("IFCA", 0.333))])
    diag, summary, collapsed, lines = collapse_check(fake_result(probes), ["CFL", "IFCA", "FedAvg"], [0], trace, 2)
    assert len(diag) == 4 and collapsed == ["CFL"]
    assert summary.loc[("IFCA", 0), "most clusters in any round"] == 2
    assert summary.loc[("IFCA", 0), "ARI with the groups (last round)"] == 0.33
    assert "**CFL collapsed** on every seed" in lines[0] and "IFCA did not collapse: 2 models" in lines[1]
    line = cfl_line(diag, {"eps1": 0.4, "eps2": 1.6}, 20)
    assert "mean update norm 0.30–0.50" in line and "largest client update 2.00–2.50" in line and "20 rounds" in line
    assert collapse_check(fake_result({}), ["FedAvg"], [0], trace, 2)[3] == []


def test_pilot_notes_name_the_choices_grown_grids_and_edges():
    text = pilot_notes({"FedAvg": 0.1, "CFL": 0.03}, {"eps1": 0.4, "eps2": 1.6}, {"FedAvg": [0.01, 0.03, 0.1, 0.3]},
                       [0.01, 0.03, 0.1], ["FedAvg"], 30, "3 seeds")  # fmt: skip
    assert text.startswith("Chosen on validation micro accuracy after 30 rounds (3 seeds): FedAvg lr 0.1, CFL lr 0.03")
    assert "CFL ε₁ = 0.4, ε₂ = 1.6" in text and "FedAvg (0.01, 0.03, 0.1, 0.3): grids grown" in text
    assert text.endswith("Still at the edge of its grid: FedAvg (a wider grid might choose otherwise).")
    assert pilot_notes({"A": 0.1}, {}, {"A": [0.1]}, [0.1], [], 2, "1 seed").endswith(
        "No choice sits at the edge of its grid."
    )


def test_table_notes_say_the_choices_the_penalty_and_the_authors_evaluation():
    row = {"claim": "eq. 7 helps", "verdict": "no difference", "ours (a − b, 95 % CI)": "+0.1", "flags": []}
    mean = pd.DataFrame({"pooled_acc": [80.0, 81.0, 40.0]}, index=["FeSEM(2)", "FeSEM(4)", "FedSGD"])
    text = table_notes(k_sel="FeSEM(4)", val={"FeSEM(2)": 79.0, "FeSEM(4)": 80.5, "CFL": 82.0},
                       fesem_arms=["FeSEM(2)", "FeSEM(4)"], best_other="CFL", claims={"eq. 7": row}, mean=mean,
                       rounds=60, local_steps=8, n_classes=10, paper_fedsgd=70.1, lam=0.1, clients=20, fe_g="FeSEM(4)",
                       intra=2.0, loss=0.5, inert_share=0.05, eq7="E7", intra7=1.0, loss7=0.6, k_em=4,
                       auth={"FeSEM(2)": 70.0, "FeSEM(4)": 60.0}, v_auth="contradicted", ref=AVG_HS)  # fmt: skip
    assert "FeSEM(4) (FeSEM(2) 79.0, FeSEM(4) 80.5); the strongest baseline by the same rule: CFL (82.0)" in text
    assert "* eq. 7 helps: **no difference, +0.1**." in text and "480 minibatch steps" in text
    assert "λ/m · Dist ≈ 0.0100" in text and "2.0 % of it, below 5 %" in text  # 0.1 / 20 × 2.0 against 0.5
    assert "FeSEM(4) 60.0 against 81.0" in text and "below the paper's definition here" in text


def test_cluster_notes_say_why_nobody_moves():
    init = pd.DataFrame({"whole model": [0.5, 0.7]}, index=[0, 1])
    kw = dict(last_ari=pd.Series({"FeSEM(2)": 0.3, "FeSEM(4)": 0.45, "FR": 0.0}), fesem_arms=["FeSEM(2)", "FeSEM(4)"],
              fe_g="FeSEM(4)", v_groups="contradicted", fr_hs="FR", v_chance="reproduces",
              moves=pd.DataFrame({0: [0, 0], 1: [0, np.nan]}, index=["FeSEM(2)", "FeSEM(4)"]), late=0, settle_round=10,
              any_moves=0, g_moves=0, local_steps=8, mech_word="no difference", v_conv="not tested", v_e="no difference",
              groups=4, restarts=20, init_steps=100, init_ari=init, ari_labels=pd.Series({0: 0.1}),
              ari4=pd.Series({0: 0.4}))  # fmt: skip
    text = cluster_notes(**kw)
    assert "FeSEM(2) 0.30, FeSEM(4) 0.45" in text and "(FR, ARI 0.00): **reproduces**" in text
    assert "FeSEM(2): 0, 0; FeSEM(4): 0 (0 after round 10)" in text and "No client ever leaves" in text
    assert "0.60 over the whole model [seed 0 0.50, seed 1 0.70]" in text
    moved = cluster_notes(**kw | dict(any_moves=3, g_moves=3, v_conv="reproduces"))
    assert "Clients do move (3 moves in FeSEM(4)). The clustering settled by round 10: **reproduces**" in moved


def test_cluster_claims_judge_the_clusters_against_the_groups():
    trace = pd.DataFrame([{"arm": a, "seed": s, "round": r, "ARI": x, "moved": np.nan if r == 0 else 0}
                          for a, x in (("FeSEM(4)", 0.5), ("FR", 0.0)) for s in (0, 1, 2) for r in (0, 10, 20)])  # fmt: skip
    trace.loc[trace.arm == "FeSEM(4)", "ARI"] += 0.01 * trace.loc[trace.arm == "FeSEM(4)", "seed"]
    res = SimpleNamespace(improving=lambda a: False, budget=lambda *a: None)
    ari = trace[trace.arm == "FeSEM(4)"]
    cl = cluster_claims(res, trace, ari, None, fe_g="FeSEM(4)", fr_hs="FR", k_em=4, seeds=[0, 1, 2], rounds=20,
                        ari_margin=0.2, settle_round=10, settle_margin=0.05, em_resolution=0.05)  # fmt: skip
    assert [r["claim"][:9] for r in cl.rows] == ["Figure 4:", "ours: FeS", "Mechanis", "§6.2: the"][:2] + [
        r["claim"][:9] for r in cl.rows[2:]]  # fmt: skip
    assert cl.rows[0]["verdict"] == "contradicted" and cl.rows[1]["verdict"] == "reproduces"  # ARI 0.5: far from 1
    assert cl.any_moves == 0 and cl.g_moves == 0 and cl.rows[2]["kind"] == "mechanism"
    assert (
        cl.rows[3]["verdict"] == "not tested"
        and "no client of FeSEM(4) changed cluster" in cl.rows[3]["ours (a − b, 95 % CI)"]
    )


def test_table_claims_put_the_headline_first_with_its_mechanism():
    paper = paper_results("fesem")
    arms = ["FeSEM(2)", "FeSEM(3)", "FeSEM(4)", "FeSEM(1)", AVG_HS, "FedAvg", "CFL", "E7"]
    vals = {a: {s: 70.0 + i + 0.3 * s * (i % 3) for s in range(3)} for i, a in enumerate(arms)}
    res = SimpleNamespace(
        values=lambda a, m: pd.Series(vals[a]), budget=lambda *a: None, improving=lambda a: False,
        compare=lambda a, b, m, margin=None, resolution=None: verdict(
            list(pd.Series(vals[a]) - pd.Series(vals[b])), resolution=resolution),
        paired=lambda a, b, m: pd.Series(vals[a]) - pd.Series(vals[b]),
        finals=lambda: pd.DataFrame([{"arm": a, "seed": s, "rounds": 60, "gain_last_fifth": 0.1} for a in arms for s in range(3)]),
    )  # fmt: skip
    rows = table_claims(res, paper, None, lambda a: pd.Series(vals[a]), k_sel="FeSEM(3)", ref=AVG_HS,
                        best_other="CFL", fe_few="FeSEM(2)", fe_most="FeSEM(4)", fe_next="FeSEM(3)", k_most=4, k_em=4,
                        eq7="E7", init_steps=100, resolution=1.0)  # fmt: skip
    assert list(rows)[:2] == ["beats FedAvg", "beats FeSEM(1)"] and rows["beats FedAvg"]["headline"]
    assert rows["beats FedAvg"]["notes"].count("mechanism: ") == 1  # its centres against one centre
    still = mechanism("E-steps move clients", verdict([0.0, 0.0, 0.0], resolution=0.05), control="round 0")
    inert = table_claims(res, paper, None, lambda a: pd.Series(vals[a]), k_sel="FeSEM(3)", ref=AVG_HS, best_other="CFL",
                         fe_few="FeSEM(2)", fe_most="FeSEM(4)", fe_next="FeSEM(3)", k_most=4, k_em=4, eq7="E7",
                         init_steps=100, resolution=1.0, e_step=still)["beats FedAvg"]  # fmt: skip
    assert inert["flags"].count("mechanism inert") == 1 and inert["notes"].count("mechanism: ") == 2  # and the E-steps
    assert rows["beats FeSEM(1)"]["kind"] == "mechanism" and "FeSEM(3) by validation" in rows["beats FedAvg"]["claim"]
    assert rows["best K"]["claim"] == "Figure 3: K = 4 is the best K (FeSEM(4) vs FeSEM(3))"
    assert rows["beats FedAvg"]["verdict"] == "contradicted"  # FeSEM(3) is below FedAvg + head start in the fake
    assert rows["eq. 7"]["verdict"] == "reproduces" and "FEMNIST" in rows["more centres"]["paper"]


def test_federation_readings_and_head_start_prose():
    cfg = tiny_config(partition="groups", alpha=0.5, clients=8)
    fed = Federation.from_config(cfg)
    leaf = pd.DataFrame({"num_devices": [100.0], "num_data_points": [2500.0]}, index=["FEMNIST"])
    text, table = federation_summary(fed, true_groups(fed), fed.partition.params["transforms"], 0, 0.1, leaf)
    assert text.startswith("8 clients, 4 groups") and "10 % of each client's" in text and "(25 per user)" in text
    assert table["clients"].sum() == 8 and list(table.columns) == ["group", "clients", "train images", "test images"]
    probes = {
        ("A", 0): {
            0: {"labels": [0, 0, 1, 1], "margins": [2.0, 2.0]},
            3: {"labels": [0, 1, 1, 1], "margins": [1.0, 3.0]},
        }
    }
    readings = fake_result(probes, {("A", "pooled_acc"): {0: 80.0}})
    em = readings_table(readings, {0: np.array([0, 0, 1, 1])}.get)
    assert em.loc[("A", 0), "moves"] == 1 and em.loc[("A", 0), "ARI round 0"] == pytest.approx(1.0)
    assert em.loc[("A", 0), "median margin, last round"] == 2.0 and em.loc[("A", 0), "micro acc"] == 80.0
    t = pd.DataFrame({"moves": [0.0, 4.0], "median margin, last round": [3.2, 1.1]}, index=["c", "o"])
    mech = {"verdict": "reproduces", "ours (a − b, 95 % CI)": "+0.10"}
    line = readings_notes(t, "c", "o", mech, {"_v": "inconclusive"})
    assert "0 restarting from the centre, 4 with W_i persisting" in line and "3.20 at the last round" in line
    assert "**reproduces** (+0.10)" in line and "**inconclusive**" in line
    row = {"verdict": "reproduces", "ours (a − b, 95 % CI)": "+2.0", "flags": []}
    hs = head_start_notes(em_row=row, hs_row=row, k_em=4, v_full="reproduces", v_hs1="x", v_inter="y", margin=1.0,
                          v_lead=SimpleNamespace(mean=3.0))  # fmt: skip
    assert "within ±1 points: y" in hs and "FeSEM(4)'s lead over FedAvg, +3.0 points" in hs


def test_scan_prose_figure_and_the_leads():
    notes = scan_notes(k_pick=pd.Series({0: 4, 1: 5}), groups=4, v_k="inconclusive", intra_mono=pd.Series([True, False]),
                       sample=8, k_scan=[2, 3, 4, 5], nofed_rank=2, rows=12, k_sel="FeSEM(3)")  # fmt: skip
    assert "seed 0 K = 4, seed 1 K = 5" in notes and "on 1 of 2 seeds" in notes and "1.6 clients per centre" in notes
    scan = pd.DataFrame(
        {"seed": [0, 0, 1, 1], "K": [2, 3, 2, 3], "val_mean_acc": [70, 72, 71, 73], "intra_distance": [2, 1, 2, 1]}
    )
    fig = scan_figure(scan)
    assert len(fig.axes) == 2 and fig.get_size_inches()[0] <= 6.88
    plt.close(fig)
    acc = pd.Series({"FedAvg": 78.0, AVG_HS: 76.0, "FeSEM(3)": 79.0, "CFL": 84.0, "Local": 82.0})
    rows = leads(acc, k_sel="FeSEM(3)", ref=AVG_HS, init_steps=100, setting="FMNIST")
    assert [r[0] for r in rows] == ["Tables 2/3 as compared there:", "Tables 2/3: FeSEM beats FedAvg — headline, at "
                                    "equal local work", "Tables 2/3: FeSEM is the best method"]  # fmt: skip
    assert rows[1][3] == f"our reference, {AVG_HS}, scores 76.0 %, plain FedAvg 78.0 %"
    assert rows[2][3] == "above FeSEM(3) (79.0): CFL (84.0), Local (82.0)"


def test_seed_plans_give_each_arm_the_seeds_its_claims_ask_for():
    probes = {(a, s): {5: {"labels": lab}} for s in (0, 1, 2) for a, lab in (("F", [0, 0, 1, 1]), ("R", [0, 1, 0, 1]))}
    vals = {("F", "pooled_acc"): {0: 80.0, 1: 82.0, 2: 78.0}, ("A", "pooled_acc"): {0: 79.0, 1: 80.5, 2: 78.2}}
    res = fake_result(probes, vals)
    res.paired = lambda a, b, m: res.values(a, m) - res.values(b, m)
    plan, ari_plan, planned = seed_plans(res, ["F", "R", "A", "X"], [0, 1, 2], lambda s: np.array([0, 0, 1, 1]),
                                         pairs={"headline": ("F", "A")}, fe_g="F", fr_hs="R", rounds=5, cap=10,
                                         resolution=1.0, ari_margin=0.2, em_resolution=0.05)  # fmt: skip
    assert list(plan.index) == ["headline"] and list(ari_plan.index) == [
        "clusters are the groups",
        "more than random clusters",
    ]
    assert planned["X"] == [0, 1, 2]  # in no claim: the pilot's seeds
    *_, five = seed_plans(res, ["F", "R", "A"], [0, 1, 2], lambda s: np.array([0, 0, 1, 1]), pairs={"headline": ("F", "A")},
                          fe_g="F", fr_hs="R", rounds=5, cap=10, resolution=1.0, ari_margin=0.2, em_resolution=0.05,
                          least={"headline": 5})  # fmt: skip
    assert len(five["A"]) >= 5 and len(five["F"]) >= 5  # a lead claim: at least five seeds
    assert len(planned["F"]) >= len(planned["A"]) >= 3 and planned["F"][:3] == [0, 1, 2]


def test_seed_plans_plan_the_headline_on_the_papers_carried_margin(monkeypatch):
    import pflkit.chapters.fesem as fs
    from pflkit.results import PaperMargin

    probes = {(a, s): {5: {"labels": lab}} for s in (0, 1, 2) for a, lab in (("F", [0, 0, 1, 1]), ("R", [0, 1, 0, 1]))}
    vals = {("F", "pooled_acc"): {0: 80.0, 1: 82.0, 2: 78.0}, ("A", "pooled_acc"): {0: 79.0, 1: 80.5, 2: 78.2}}
    res = fake_result(probes, vals)
    res.paired = lambda a, b, m: res.values(a, m) - res.values(b, m)
    monkeypatch.setattr(fs, "paper_diff", lambda paper, a, b: PaperMargin("+3.0", [3.0]))
    plan, _, planned = seed_plans(res, ["F", "R", "A"], [0, 1, 2], lambda s: np.array([0, 0, 1, 1]),
                                  pairs={"headline": ("F", "A")}, fe_g="F", fr_hs="R", rounds=5, cap=10, resolution=1.0,
                                  ari_margin=0.2, em_resolution=0.05, least=None, paper=pd.DataFrame())  # fmt: skip
    assert plan.loc["headline", "to clear (points)"] == 1.5  # half the carried +3.0, not the pilot's mean
    runs = int(plan.loc["headline", "seeds run"])
    assert 5 <= runs <= 10 and len(planned["F"]) == len(planned["A"]) == runs


def test_head_start_comparisons_change_one_factor_each():
    c = head_start_comparisons(fr="FR", fr_hs="FR+", k_em=4, avg_hs=AVG_HS)
    assert len(c) == 6 and c["head start: fixed random clusters"] == ("FR+", "FR")
    assert c["clustering: the paper's EM − fixed random clusters, with head start"] == ("FeSEM(4)", "FR+")


def test_figure_5_rows_and_composition_prose():
    fed = Federation.from_config(tiny_config(partition="groups", alpha=0.5, clients=8))
    groups = true_groups(fed)
    rows = cluster_rows(fed, [1, 0, 1, 1, 1, 0, 0, 1], groups, ["i", "r", "v", "t"], per=2)
    assert [r[0].split(",")[0] for r in rows] == ["cluster 0", "cluster 0", "cluster 1", "cluster 1"]
    assert rows[0][0] == f"cluster 0, client 1 ({'irvt'[groups[1]]})" and len(rows[0][1]) == 8
    comp = pd.DataFrame({"i": [2, 0], "r": [0, 2]}, index=[0, 1])
    text = composition_notes(comp, {0: 2, 1: 1}, seed=0, groups=4, fe_few="FeSEM(2)", ari=pd.Series({0: 1.0, 1: 0.5}),
                             v_alike="reproduces")  # fmt: skip
    assert text.startswith("Seed 0: cluster 0: 2×i, cluster 1: 2×r. Groups lying wholly in one FeSEM(2) cluster: ")
    assert "seed 0 2 of 4, seed 1 1 of 4; ARI seed 0 1.00, seed 1 0.50" in text and text.endswith("**reproduces**.")


def test_k_claim_reads_not_tested_without_the_number_of_groups_in_the_scan():
    scans = {s: pd.DataFrame({"val_mean_acc": acc}, index=pd.Index([3, 4, 5], name="K"))
             for s, acc in {0: [0.70, 0.75, 0.72], 1: [0.70, 0.76, 0.73], 2: [0.71, 0.77, 0.72]}.items()}  # fmt: skip
    from pflkit.verdicts import seed_plan

    plan = seed_plan({"K": list(k_margins(scans, 4))}, cap=10, pool=False, resolution=1.0)
    row, v = k_claim(scans, plan, groups=4, k_scan=[3, 4, 5], resolution=1.0)
    assert row["verdict"] == "reproduces" and v.mean == pytest.approx(3.67, abs=0.01)  # points over the best other K
    row, v = k_claim(scans, None, groups=6, k_scan=[3, 4, 5], resolution=1.0)
    assert row["verdict"] == "not tested" and row["ours (a − b, 95 % CI)"] == "K = 6 not in the scan [3, 4, 5]"


def test_readings_and_head_start_claims():
    em = pd.DataFrame({"ARI last": [0.5, 0.5, 0.5], "ARI round 0": [0.5, 0.5, 0.5], "moves": [0, 0, 0]},
                      index=pd.MultiIndex.from_product([["own"], [0, 1, 2]]))  # fmt: skip
    vals = {"own": {0: 60.0, 1: 61.0, 2: 62.0}, "centre": {0: 79.0, 1: 80.0, 2: 80.5}}
    fake = SimpleNamespace(
        budget=lambda *a: None, improving=lambda a: False, values=lambda a, m: pd.Series(vals[a]),
        compare=lambda a, b, m, margin=None, resolution=None: verdict(
            list(pd.Series(vals[a]) - pd.Series(vals[b])), resolution=resolution),
        finals=lambda: pd.DataFrame([{"arm": a, "seed": s, "rounds": 60, "pooled_acc": v}
                                     for a, d in vals.items() for s, v in d.items()]),
    )  # fmt: skip
    mech, acc = readings_claims(fake, em, own="own", centre="centre", fe_g="F", resolution=1.0, em_resolution=0.05)
    assert (
        mech["kind"] == "mechanism"
        and mech["ours (a − b, 95 % CI)"] == "+0.00 on every seed: no client changed cluster"
    )
    assert acc["verdict"] == "contradicted" and acc["claim"].startswith("ours: with W_i persisting, F beats itself")
    vals |= {"FeSEM(4)": {0: 80.0, 1: 81.0, 2: 82.0}, "FR+": {0: 79.0, 1: 79.0, 2: 80.5}, "FR": {0: 76.0, 1: 77.0, 2: 78.0},
             "FeSEM(1)": {0: 75.0, 1: 76.0, 2: 76.0}, "FedAvg": {0: 77.0, 1: 78.0, 2: 78.0}}  # fmt: skip
    em_row, hs_row, inter = head_start_claims(fake, None, fr="FR", fr_hs="FR+", k_em=4, resolution=1.0, margin=1.0)
    assert hs_row["verdict"] == "reproduces" and "(K = 4)" in em_row["claim"]
    assert inter.mean == pytest.approx(((3 + 2 + 2.5) - (-2 - 2 - 2)) / 3)  # random clusters' gain − one model's


def test_initial_ari_budget_and_cost_lines():
    probes = {("F", 0): {0: {"labels": [0, 0, 1, 1], "kmeans_last": [0, 1, 0, 1]}}}
    t = initial_ari(fake_result(probes), "F", {0: [1, 1, 0, 0]}, [0])
    assert (
        t.loc[0, "whole model (FeSEM's Dist)"] == pytest.approx(1.0) and t.loc[0, "last layer (the authors' code)"] < 0
    )
    line = budget_line(pd.Series({"A": 1.234, "B": -0.4}), ["A", "B"], {"A": True, "B": False}.get)
    assert line.endswith("A +1.2 points (still improving), B -0.4 points (levelled off).")
    cost = cost_line(arms=16, seeds=3, rounds=60, pilot_arms=30, pilot_seeds=3, pilot_rounds=30, estimate_s=7200,
                     recorded_h=1.234, full=False)  # fmt: skip
    assert (
        "This page runs 138 runs: 16 arms × 3 seeds of 60 rounds" in cost and "estimate 2.00 CPU-hours (at the" in cost
    )
    assert cost.endswith("recorded 1.23 CPU-hours of their own.")


def test_federations_build_each_seed_once_and_group_of_adds_seeds():
    base = tiny_config(partition="groups", alpha=0.5, clients=8)
    feds, groups, group_of = federations(base, [0])
    assert list(feds) == [0] and groups[0].tolist() == feds[0].partition.params["groups"]
    g1 = group_of(1)  # a seed past the pilot's: built and kept
    assert 1 in groups and group_of(1) is g1 and len(g1) == 8 and group_of(0) is groups[0]
    share, line = label_skew(feds[0])
    counts = feds[0].partition.class_counts(feds[0].ds.y_train.numpy())
    assert 2 / feds[0].ds.n_classes <= share <= 1.0
    assert share == pytest.approx(np.mean(np.sort(counts, 1)[:, -2:].sum(1) / counts.sum(1)))
    assert line.startswith(f"Label skew: a client's two largest classes hold {100 * share:.0f} % of its training")
    assert line.endswith(f"({100 * 2 / feds[0].ds.n_classes:.0f} % if its labels were uniform over the 10 classes).")
    rows = group_rows(feds[0], groups[0], feds[0].partition.params["transforms"])
    assert len(rows) == len(set(groups[0].tolist()))  # one client of every group
    first = int(np.flatnonzero(groups[0] == 0)[0])
    assert rows[0][0].endswith(f": client {first}") and len(rows[0][1]) == 8
    fig = groups_figure(feds[0], groups[0], feds[0].partition.params["transforms"])
    assert len(fig.axes) == 8 * len(rows) and fig._suptitle.get_text().startswith("one client of every group")
    plt.close(fig)


def test_pilot_report_names_the_choices_and_folds_every_run():
    cfg = {"FedAvg": SimpleNamespace(lr=0.01), "FedAvg2": SimpleNamespace(lr=0.1)}
    table = pd.DataFrame({"val_pooled_acc": [70.0, 75.0], "at the grid's edge": ["no", "yes"]},
                         index=pd.MultiIndex.from_tuples([("FedAvg", 0.01), ("FedAvg", 0.1)]))  # fmt: skip
    pilot = SimpleNamespace(table=lambda: table, grids={"FedAvg": cfg},
                            summary=lambda: pd.DataFrame({"val_pooled_acc": [75.0]}, index=["FedAvg"]))  # fmt: skip
    text, summary, every = pilot_report([pilot], {"FedAvg": 0.1}, {}, [0.01, 0.1], 30, 3)
    assert text.startswith("Chosen on validation micro accuracy after 30 rounds (3 seeds): FedAvg lr 0.1")
    assert "Still at the edge of its grid: FedAvg" in text
    assert list(summary.columns) == ["validation micro acc (%)"] and summary.iloc[0, 0] == 75.0
    html = every._repr_html_() if hasattr(every, "_repr_html_") else str(every)
    assert "validation micro acc (%)" in html and "over 3 seeds" in html and "val_pooled_acc" not in html


def test_chapter_arms_build_the_controls_and_the_baselines_at_their_pilot_rates():
    assert arm_labels([2, 3, 4], 4) == (["FeSEM(2)", "FeSEM(3)", "FeSEM(4)"], "FeSEM(4)", "FeSEM(2)", "FeSEM(4)",
                                        "FeSEM(3)", "FeSEM(4) fixed-random", "FeSEM(4) fixed-random + head start",
                                        "FeSEM(4) + eq. 7")  # fmt: skip
    with pytest.raises(AssertionError):
        arm_labels([2, 3], 4)  # Figure 4 needs K = the groups
    base = tiny_config(rounds=6, eval_every=3)
    main = method_configs(base, 2, fesem_options={"lam": 0.1}, groups=3, baselines=["local", "fedavg", "cfl"],
                          fedprox_mu=0.1, avg_hs_options={"centers": 1, "lam": 0.0})  # fmt: skip
    lr = {"FeSEM": 0.1, "Local": 0.01, "FedAvg": 0.03, "CFL": 0.05, AVG_HS: 0.3}
    fesem = partial(fesem_config, base, lr["FeSEM"], {"lam": 0.1})
    assert fesem(centers=2).options == {"lam": 0.1, "centers": 2} and fesem().method == "fesem"
    arms, base_arms = chapter_arms(main, fesem, lr, {"eps1": 0.4}, k_choices=[2, 3], k_em=3)
    assert list(arms) == ["FeSEM(2)", "FeSEM(3)", "FeSEM(1)", "FeSEM(3) fixed-random + head start",
                          "FeSEM(3) fixed-random", "FeSEM(3) + eq. 7", AVG_HS, AVG_EQ, "Local", "FedAvg", "CFL"]  # fmt: skip
    assert list(base_arms) == ["Local", "FedAvg", "CFL"] and all(arms[a] == c for a, c in base_arms.items())
    assert [arms[a].eval_every for a in arms] == [1, 1, 3, 3, 3, 3, 1, 1, 3, 1, 1]
    assert [arms[a].lr for a in arms] == [0.1] * 6 + [0.3, 0.03, 0.01, 0.03, 0.05]
    assert arms[AVG_EQ].rounds == 6 + 13 and arms[AVG_EQ].method == "fedavg"  # FeSEM's 100 warm-up steps at 8 a round
    assert arms["CFL"].options == {"warmup": 2, "eps1": 0.4}
    assert arms["FeSEM(3) fixed-random + head start"].options == {"lam": 0.1, "centers": 3, "em": "fixed-random",
                                                                 "head_start": True}  # fmt: skip
    assert arms["FeSEM(3) + eq. 7"].options["penalty_weight"] == PAPER_WEIGHT
    assert arms[AVG_HS].options == {"centers": 1, "lam": 0.0}


def test_cluster_trace_last_mean_and_the_head_start_grid():
    truth = {0: np.array([0, 0, 1, 1]), 1: np.array([0, 1, 0, 1])}
    probes = {("A", 0): {0: {"labels": [1, 1, 0, 0], "intra": 1.0}, 2: {"labels": [1, 1, 0, 0], "intra": 3.0}},
              ("A", 1): {0: {"labels": [0, 0, 1, 1], "intra": 2.0}, 2: {"labels": [0, 0, 1, 1], "intra": 5.0}},
              ("B", 0): {}, ("B", 1): {}}  # fmt: skip
    res = fake_result(probes)
    trace, last = cluster_trace(res, [0, 1], 2, truth.get)
    assert set(trace.arm) == {"A"} and len(trace) == 4  # B has no cluster probes
    assert last["A"] == pytest.approx((1.0 - 0.5) / 2)  # seed 0 the groups, seed 1 crosswise
    assert last_mean(res, "A", "intra", seeds=[0, 1], rounds=2) == pytest.approx(4.0)
    values = {(a, "pooled_acc"): {0: x, 1: x + 2.0} for a, x in
              (("FedAvg", 70.0), ("FeSEM(1)", 72.0), ("F", 71.0), ("F+", 74.0), ("FeSEM(4)", 75.0))}  # fmt: skip
    grid = head_start_grid(fake_result({}, values), k_em=4, fr="F", fr_hs="F+", init_steps=100, seeds=2)
    assert list(grid.columns) == ["without head start", "with head start (100 steps)"]
    assert grid.index.name == "micro acc (%), mean ± 95 % CI over 2 seeds"
    assert grid.loc["the paper's EM (K = 4)", "without head start"] == "— (nothing to cluster)"
    assert grid.loc["fixed random clusters (K = 4)", "with head start (100 steps)"].startswith("75.0")
    assert grid.loc["no clustering (one model)", "with head start (100 steps)"].endswith("  [FeSEM(1)]")


def test_scan_frame_table_and_seed_plan():
    scans = {s: pd.DataFrame({"val_mean_acc": acc, "intra_distance": d}, index=pd.Index([3, 4, 5], name="K"))
             for s, acc, d in ((0, [0.70, 0.75, 0.72], [3.0, 2.0, 1.0]), (1, [0.70, 0.76, 0.78], [3.0, 4.0, 1.0]))}  # fmt: skip
    scan, k_pick, mono = scan_frame(scans)
    assert scan.val_mean_acc.tolist() == pytest.approx([70, 75, 72, 70, 76, 78]) and list(scan.columns[:2]) == [
        "seed",
        "K",
    ]
    assert k_pick.tolist() == [4, 5] and mono.tolist() == [True, False]
    html = scan_table(scan)._repr_html_()
    assert "validation accuracy (%)" in html and "intra-cluster distance (eq. 6)" in html and "val_mean_acc" not in html
    assert k_seed_plan(scans, 6, cap=10, resolution=1.0) is None  # K = 6 not scanned
    plan = k_seed_plan(scans, 4, cap=10, resolution=1.0)
    assert list(plan.index) == ["K"]


def test_chapter_cost_counts_the_sweep_and_the_pilot_arms_once():
    arms = {"FeSEM": tiny_config(method="fesem", rounds=10), "FedAvg": tiny_config(method="fedavg", rounds=10)}
    rec = {
        "a": {"key": "k1", "provenance": {"cpu_time_s": 3600.0}},
        "b": {"key": "k2", "provenance": {"cpu_time_s": 1800.0}},
    }
    pilot = SimpleNamespace(grids={"FedAvg": {"FedAvg lr 0.1": tiny_config(method="fedavg", rounds=4)}},
                            result=SimpleNamespace(records={"a": rec["a"]}))  # fmt: skip
    res = SimpleNamespace(records=rec)
    line = chapter_cost(arms, [pilot], res, seeds=[0, 1], pilot_seeds=[0], rounds=10, pilot_rounds=4,
                        per_round={"fesem": 3.0, "other": 1.5}, setup=12.0, full=False)  # fmt: skip
    assert line == cost_line(arms=2, seeds=2, rounds=10, pilot_arms=1, pilot_seeds=1, pilot_rounds=4,
                             estimate_s=2 * (30 + 12 + 15) + 6, recorded_h=1.5, full=False)  # fmt: skip


def test_figure3_and_the_collapse_figure_draw_every_arm():
    hist = pd.DataFrame([{"arm": a, "seed": s, "round": r, "pooled_acc": 50.0 + r + s}
                         for a in ("FeSEM(2)", "FeSEM(3)", "FedAvg", "CFL") for s in (0, 1) for r in (0, 1, 2)])  # fmt: skip
    fig = figure3(hist, ["FeSEM(2)", "FeSEM(3)"])
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["FeSEM(2)", "FeSEM(3)", "FedAvg"] and ax.get_ylabel() == "micro accuracy (%)"
    assert min(min(line.get_xdata()) for line in ax.lines if len(line.get_xdata())) >= 1  # from round 1
    plt.close(fig)
    diag = pd.DataFrame({"arm": ["CFL"] * 2, "seed": [0, 0], "round": [1, 2], "clusters in use": [1, 2]})
    fig = collapse_figure(diag)
    assert fig.axes[0].get_title().startswith("clusters in use per round") and fig.get_size_inches()[0] <= 6.88
    plt.close(fig)
    assert "No clustered baseline" in collapse_figure(diag.iloc[:0]).data  # nothing to draw: a line instead


# ----------------------------------------------------------------------------- the paper profile


def test_leaf_arms_run_the_paper_s_tables_on_every_user_at_the_paper_s_setting():
    setting = {"lr": 0.003, "local_epochs": 5, "model": "fedavg-cnn", "batch_size": 10, "momentum": 0.0}
    base = RunConfig(partition="groups", train_images=6000, test_images=4000, local_steps=8, rounds=100)
    arms = leaf_arms(base, "femnist", setting, k_choices=[2, 3, 4], clients=3550,
                     baselines=["local", "fedsgd", "fedavg", "feddist", "feddist+ws", "cfl", "fedprox", "ifca"],
                     fesem_options={"lam": 0.1, "init_steps": 100}, fedprox_mu=0.1, warmup=33)  # fmt: skip
    assert list(arms)[:3] == ["FeSEM(2)", "FeSEM(3)", "FeSEM(4)"] and len(arms) == 11
    assert "FedAvg + head start" not in arms and "FeSEM" not in arms
    for cfg in arms.values():  # every method: the natural split, every user, all images, the paper's setting
        assert (cfg.dataset, cfg.partition, cfg.clients, cfg.rounds) == ("femnist", "natural", 3550, 100)
        assert cfg.train_images is None and cfg.test_images is None and cfg.local_steps is None
        assert (cfg.lr, cfg.local_epochs, cfg.model, cfg.batch_size, cfg.momentum) == (0.003, 5, "fedavg-cnn", 10, 0.0)
    assert arms["FeSEM(3)"].options == {"lam": 0.1, "init_steps": 100, "centers": 3}
    assert arms["IFCA"].options["clusters"] == 3 and arms["CFL"].options["warmup"] == 33  # HypoCluster(3)'s row
    assert arms["FedProx"].options["mu"] == 0.1 and arms["FedDist+WS"].options == {"size_weighted": True}


def test_leaf_table_sets_ours_beside_the_paper_s_table_of_the_same_dataset():
    paper = paper_results("fesem")
    values = {(a, m): {0: v, 1: v + 2.0} for a, v in (("FeSEM(2)", 80.0), ("Local", 70.0))
              for m in ("pooled_acc", "mean_acc", "micro_f1", "macro_f1", "worst10_acc")}  # fmt: skip
    result = fake_result({(a, s): {} for a in ("FeSEM(2)", "Local") for s in (0, 1)}, values)
    for name, tab in LEAF_TABLE.items():
        t = leaf_table(result, paper, name)
        assert t.method.tolist() == ["FeSEM(2)", "Local"] and t["the paper's row"].tolist() == ["FeSEM(2)", "NoFed"]
        assert t.columns[1:9].tolist() == [f"{m}, {w}" for m in ("Micro-Acc", "Micro-F1", "Macro-Acc", "Macro-F1")
                                           for w in ("paper", "ours")]  # fmt: skip
        assert t.loc[1, "Micro-Acc, paper"] == f"{paper_value(paper, tab, 'NoFed'):.1f}"  # Local is NoFed
        assert t.loc[0, "Macro-F1, paper"] == f"{paper_value(paper, tab, 'FeSEM(2)', 'macro_f1'):.1f}"
        assert t.loc[0, "Micro-Acc, ours"].startswith("81.0 ") and t.seeds.tolist() == [2, 2]
    assert leaf_table(result, paper, "femnist").loc[1, "Micro-Acc, paper"] == "79.0"  # Table 2's NoFed
    assert leaf_table(result, paper, "celeba").loc[1, "Micro-Acc, paper"] == "83.8"  # Table 3's NoFed


def test_leaf_steps_are_epochs_of_the_mean_client_s_batches():
    # FEMNIST: 805 263 × 0.8 × 0.9 / 3 550 = 163.3 images a client → 17 batches of 10, × 5 epochs
    assert leaf_steps("femnist", epochs=5, batch=10, val_fraction=0.1) == 85
    # FedCelebA: 200 288 × 0.8 × 0.9 / 9 343 = 15.4 images → 2 batches, × 10 epochs
    assert leaf_steps("celeba", epochs=10, batch=10, val_fraction=0.1) == 20
    assert leaf_steps("celeba", epochs=1, batch=100, val_fraction=0.0) == 1


def test_paper_cost_counts_the_paper_profile_s_runs_and_steps(monkeypatch):
    monkeypatch.delenv("PFLBOOK_DRY", raising=False)
    p = parameters("fesem", "paper")
    cost = paper_cost(p)
    assert cost["datasets"] == ["femnist", "celeba", "fashion-mnist"] and cost["rounds"] == 100 and cost["seeds"] == 5
    assert cost["clients"] == {"femnist": 3550, "celeba": 9343, "laboratory": 20}
    # FEMNIST's Table 2 by hand: 11 arms (FeSEM(2..4), 8 baselines) × 5 seeds = 55 runs; a round of 3 550 clients,
    # 85 steps each (10 arms) or one (FedSGD); the three FeSEM arms add 100 initial steps a client
    femnist = 5 * (100 * 3550 * (10 * 85 + 1) + 3 * 3550 * 100)
    assert femnist == 1_515_850_000
    celeba = 5 * (100 * 9343 * (10 * 20 + 1) + 3 * 9343 * 100)  # 20 steps a client and round
    # the laboratory, 20 clients of 50 steps: the rate pilot (10 arms × 5 rates × 3 seeds, 50 rounds, FeSEM and
    # FedAvg + head start warm, FedSGD one step), CFL's 2 × 2 ε (3 seeds), the main sweep (16 arms × 10 seeds,
    # 100 rounds, 7 warm), the two readings (5 seeds), §5.2 (6 K × 10 seeds on 8 clients, 3 rounds + 100 steps)
    pilot = 3 * (50 * 20 * (45 * 50 + 5) + 10 * 20 * 100)
    main = 10 * (100 * 20 * (15 * 50 + 1) + 7 * 20 * 100)
    lab = pilot + 12 * 50 * 20 * 50 + main + 5 * (100 * 20 * 2 * 50 + 2 * 20 * 100) + 60 * 8 * (3 * 50 + 100)
    assert lab == 23_725_000
    assert cost["steps"] == femnist + celeba + lab
    assert cost["runs"] == 2 * 55 + (150 + 12 + 160 + 10 + 60)
    one = paper_cost(p | {"DATASETS": ["femnist", "fashion-mnist"]})  # one LEAF table and the laboratory
    assert (one["runs"], one["steps"]) == (55 + 392, femnist + lab)


def test_leaf_tables_run_every_leaf_dataset_and_say_where_they_run_when_none(monkeypatch):
    import pflkit.chapters.fesem as chapter
    import pflkit.chapters.fesem_page as page

    paper, ran = paper_results("fesem"), {}
    methods = {"k_choices": [2, 3], "fesem_options": {"lam": 0.1}, "groups": 4, "baselines": ["local"],
               "fedprox_mu": 0.1, "avg_hs_options": {}}  # fmt: skip
    leaf = {n: {"lr": 0.01, "local_epochs": 1} for n in ("femnist", "celeba")}
    [note] = leaf_tables(["fashion-mnist"], RunConfig(rounds=9), leaf, [0], None, paper, methods, 3)
    assert "`paper` profile" in note.data  # smoke and book: no LEAF data, one sentence

    def fake_sweep(arms, seeds, store):
        ran[next(iter(arms.values())).dataset] = arms
        values = {
            (a, m): {0: 50.0} for a in arms for m in ("pooled_acc", "mean_acc", "micro_f1", "macro_f1", "worst10_acc")
        }
        return SimpleNamespace(**vars(fake_result({(a, 0): {} for a in arms}, values)), computed=len(arms), reused=0)

    monkeypatch.setattr(page, "sweep", fake_sweep)  # leaf_tables runs the sweep
    monkeypatch.setattr(chapter, "leaf_users", lambda name: 24)  # leaf_arms counts the users
    out = leaf_tables(["femnist", "celeba", "fashion-mnist"], RunConfig(rounds=9), leaf, [0], None, paper, methods, 3)
    assert [o.data.split("**")[1] for o in out[::2]] == [
        "The paper's Table 2 on femnist",
        "The paper's Table 3 on celeba",
    ]
    assert list(ran) == ["femnist", "celeba"] and list(ran["celeba"]) == ["FeSEM(2)", "FeSEM(3)", "Local"]
    assert "3 runs computed, 0 reused" in out[0].data and ran["femnist"]["FeSEM(2)"].clients == 24
    assert ran["celeba"]["Local"].lr == 0.01 and ran["celeba"]["FeSEM(3)"].options["centers"] == 3
    table = out[3].data  # a Styler over leaf_table's frame
    assert table.method.tolist() == ["FeSEM(2)", "FeSEM(3)", "Local"] and table.loc[0, "Micro-Acc, ours"].startswith(
        "50.0"
    )
    assert table.loc[2, "Micro-Acc, paper"] == "83.8"  # Table 3's NoFed
    leaf_tables(["celeba"], RunConfig(rounds=9), leaf, [0], None, paper, methods, 3, clients=4)  # the dry run's cut
    assert {cfg.clients for cfg in ran["celeba"].values()} == {4}  # 4 of the users, every arm


def test_scan_seed_scans_a_seed_s_federation_and_builds_a_missing_one(monkeypatch):
    import pflkit.chapters.fesem as chapter

    calls = []
    monkeypatch.setattr(
        chapter, "choose_k", lambda cfg, fed, **kw: calls.append((cfg.seed, fed, kw)) or {1: {"a": 1.0}, 2: {"a": 2.0}}
    )
    monkeypatch.setattr(chapter.Federation, "from_config", classmethod(lambda cls, cfg: f"built {cfg.seed}"))
    fesem = RunConfig(method="fesem", seed=0)
    t = scan_seed({0: "fed 0"}, RunConfig(), fesem, 0, ks=[1, 2], sample=4, rounds=3, store="S")
    assert t.index.tolist() == [1, 2] and t.a.tolist() == [1.0, 2.0]  # one row per K
    scan_seed({0: "fed 0"}, RunConfig(), fesem, 7, ks=[1, 2], sample=4, rounds=3, store="S")
    assert calls == [(0, "fed 0", {"ks": [1, 2], "sample": 4, "rounds": 3, "store": "S"}),
                     (7, "built 7", {"ks": [1, 2], "sample": 4, "rounds": 3, "store": "S"})]  # fmt: skip
