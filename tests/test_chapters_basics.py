"""The basics chapter's measurements (pflkit.chapters.basics)."""

from __future__ import annotations

import pandas as pd

from pflkit.chapters.basics import (
    LEADS,
    claim_specs,
    paper_gap,
    published,
    published_table,
    ran_on_text,
    room,
    selection_optimism,
    strip_times,
    summary_table,
    tally,
)


def test_published_reads_the_settings_with_the_prefix_only():
    df = pd.DataFrame({"setting": ["Dirichlet 0.1", "pathological", "Dirichlet 0.1"],
                       "method": ["FedAvg", "FedAvg", "Ditto"], "value": [80.0, 70.0, 90.0]})  # fmt: skip
    assert published(df, "Dirichlet") == {"FedAvg": 80.0, "Ditto": 90.0}
    assert published(df, "IID") == {}


def test_paper_gap_needs_both_methods():
    source = {"FedAvg": 80.0, "Ditto": 90.5}
    assert paper_gap(source, "Ditto", "FedAvg") == 10.5
    assert paper_gap(source, "FedAvg", "FedAvg") == 0.0
    assert paper_gap(source, "Local", "FedAvg") is None


def test_strip_times_drops_only_the_wall_clock():
    a = {"history": [{"round": 1, "mean_acc": 0.5, "wall_s": 1.0}, {"round": 2, "mean_acc": 0.6, "wall_s": 2.0}]}
    b = {"history": [{"round": 1, "mean_acc": 0.5, "wall_s": 9.0}, {"round": 2, "mean_acc": 0.6, "wall_s": 7.0}]}
    assert strip_times(a) == strip_times(b) == [{"round": 1, "mean_acc": 0.5}, {"round": 2, "mean_acc": 0.6}]
    b["history"][1]["mean_acc"] = 0.61
    assert strip_times(a) != strip_times(b)


def finals_frame():
    return pd.DataFrame({
        "setting": ["s"] * 4, "arm": ["FedAvg", "FedAvg", "Ditto", "Ditto"], "seed": [0, 1, 0, 1],
        "mean_acc": [70.0, 72.0, 80.0, 84.0], "val_mean_acc": [71.0, 71.0, 81.0, 83.0], "wall_s": [2.0, 4.0, 3.0, 3.0],
        "mean_acc@best_val": [70.0, 72.0, 80.0, 84.0], "mean_acc@best_test": [71.0, 72.0, 82.0, 84.0],
        "pooled_acc@best_val": [69.0, 70.0, 79.0, 80.0], "pooled_acc@best_test": [69.0, 71.0, 79.0, 81.0],
    })  # fmt: skip


def test_published_table_sets_ours_beside_the_sources_and_leaves_a_gap_where_they_are_silent():
    t = published_table(finals_frame(), ["FedAvg", "Ditto"], {"FedAvg": False, "Ditto": True}, {"FedAvg": 75.0})
    assert list(t.index) == ["FedAvg", "Ditto"]
    assert t.loc["Ditto", "ours: last round"].startswith("82.0") and t.loc["Ditto", "still improving"] == "yes"
    assert t.loc["FedAvg", "PFLlib"] == 75.0 and pd.isna(t.loc["Ditto", "PFLlib"])  # shown as "—"
    assert t.loc["FedAvg", "seeds"] == 2 and "KT-pFL Table 2 (all labels)" not in t
    assert published_table(finals_frame(), ["Ditto"], {}, {}, {"Ditto": 90.0}).loc["Ditto", "still improving"] == (
        "not measured")  # fmt: skip


def test_selection_optimism_is_best_test_minus_best_val_per_arm():
    t = selection_optimism(finals_frame())
    assert t.loc["Ditto", ("mean over clients", "s")].startswith("1.0")  # (2 + 0) / 2
    assert t.loc["FedAvg", ("pooled", "s")].startswith("0.5")


def test_room_names_the_strongest_personalized_arm_and_the_ceiling():
    ours = pd.Series({"FedAvg": 70.0, "Ditto": 80.0, "Local": 85.0})
    r = room(ours, {"FedAvg": 90.0, "Ditto": 99.5}, ["Ditto", "Local"], 1.0, "")
    assert r["ours: strongest personalized"] == "85.0 (Local)" and r["PFLlib: strongest personalized"] == "99.5 (Ditto)"
    assert r["PFLlib within 1 points of 100 %"] == "yes" and r["saturated (ours)"] == "no"
    assert room(ours, {"FedAvg": 90.0, "Ditto": 95.0}, ["Ditto"], 1.0, "every arm within 1")["saturated (ours)"] == (
        "every arm within 1")  # fmt: skip


def test_claim_specs_put_fedavg_ft_on_dirichlet_splits_only_and_fedprox_last():
    path, dirich = claim_specs("pathological", 1.0), claim_specs("dirichlet(0.1)", 1.0)
    assert [m for m, _ in path.values()] == [*LEADS, "FedProx"]
    assert [m for m, _ in dirich.values()] == [*LEADS, "FedAvg + FT", "FedProx"]
    assert list(path.values())[-1] == ("FedProx", 1.0) and all(mg is None for m, mg in path.values() if m != "FedProx")


def test_summary_table_has_human_headers_and_no_index_name():
    t = summary_table(finals_frame())
    assert t.loc["Ditto", ("accuracy (%)", "s")] == 82.0 and t.loc["FedAvg", ("seconds a run", "s")] == 3.0
    assert t.loc["FedAvg", ("seeds", "s")] == 2 and t.index.name is None


def test_ran_on_text_names_only_arms_past_the_first_budget():
    b = {"dirichlet": pd.DataFrame({"budget": ["1×", "2×", "4×"]}, index=["FedAvg", "Ditto", "Local"]),
         "pathological": pd.DataFrame({"budget": ["1×"]}, index=["FedAvg"])}  # fmt: skip
    text = ran_on_text(b, 30)
    assert "Ditto and Local ran on past 30 rounds" in text and "pathological" not in text and "FedAvg" not in text
    assert ran_on_text({"x": b["pathological"]}, 30) == ""


def test_tally_counts_the_words_and_names_saturated_settings_and_contradictions():
    class V:
        word = "contradicted"

        def __str__(self):
            return "−2.0 [−3.0, −1.0]"

    claims = pd.DataFrame({"verdict": ["reproduces", "contradicted · budget-limited (+1.2)", "reproduces"]})
    rows = [{"claim": "A beats B", "_v": V()}]
    lines = tally(claims, rows, {"pathological": "saturated: 98 %", "dirichlet": ""})
    assert lines[0].startswith("Of 3 claims: **2** reproduces, **1** contradicted") and "1 of them rest" in lines[0]
    assert (
        lines[1]
        == "* The pathological setting is **saturated: 98 %**: its claims stay in the table, labelled, and lead no finding."
    )
    assert lines[2] == "* *A beats B*: −2.0 [−3.0, −1.0]."
