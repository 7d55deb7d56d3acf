"""The basics chapter's measurements (pflkit.chapters.basics)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch

from pflkit.chapters.basics import (
    LEADS,
    claim_specs,
    headline_margins,
    kt_note,
    paper_cost,
    paper_gap,
    published,
    published_by_setting,
    published_table,
    ran_on_text,
    room,
    selection_optimism,
    settings_for,
    steps_a_round,
    strip_times,
    summary_table,
    tally,
    training_text,
)
from pflkit.errors import NotInStore
from pflkit.paper import parameters
from tests.conftest import tiny_config


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


def test_headline_margins_carry_pfllibs_margin_and_skip_what_the_claims_do_not_head():
    specs = claim_specs("dirichlet(0.1)", 1.0)
    pfllib = {"FedAvg": 80.0, "FedPer": 90.0, "Ditto": 95.0, "pFedMe": 85.0, "Per-FedAvg": 80.0}
    heads = headline_margins(specs, pfllib, 60.0)
    assert set(heads) == {t for t, (m, mg) in specs.items() if mg is None and m != "FedAvg + FT"}
    per = {specs[t][0]: c for t, c in heads.items()}
    # PFLlib's relative error reduction (20 % → 10 %: a half) on our FedAvg's 40 % error: 20 points
    assert per["FedPer"] == pytest.approx((20.0,)) and per["Per-FedAvg"] == pytest.approx((0.0,))
    assert per["Local"] == ()  # PFLlib reports no Local: planned on m, not on a margin
    # in a saturated setting a claim without the paper's margin is not tested, so it plans nothing
    assert "Local" not in {specs[t][0] for t in headline_margins(specs, pfllib, 60.0, saturated="saturated")}


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


def test_room_leaves_a_dash_where_pfllib_has_no_such_setting():
    r = room(pd.Series({"FedAvg": 50.0, "Ditto": 60.0}), {}, ["Ditto"], 1.0, "")
    assert r["ours: strongest personalized"] == "60.0 (Ditto)" and r["PFLlib: strongest personalized"] == "—"
    assert r["PFLlib: FedAvg"] == "—" and r["PFLlib within 1 points of 100 %"] == "—"


def test_settings_name_the_dataset_only_when_there_are_several():
    one = settings_for(["fashion-mnist"], 0.1)
    assert list(one) == ["pathological", "dirichlet(0.1)"]
    assert one["pathological"] == dict(dataset="fashion-mnist", partition="pathological", classes_per_client=2,
                                       shares=(0.4, 0.6))  # fmt: skip
    assert one["dirichlet(0.1)"] == dict(dataset="fashion-mnist", partition="dirichlet", alpha=0.1)
    two = settings_for(["fashion-mnist", "cifar10"], 0.1)
    assert list(two) == ["pathological on Fashion-MNIST", "dirichlet(0.1) on Fashion-MNIST",
                         "pathological on CIFAR-10", "dirichlet(0.1) on CIFAR-10"]  # fmt: skip
    assert two["dirichlet(0.1) on CIFAR-10"]["dataset"] == "cifar10"
    assert list(claim_specs("dirichlet(0.1) on CIFAR-10", 3.0).values())[-2] == ("FedAvg + FT", None)


def published_frames():
    pfllib = pd.DataFrame({"dataset": ["FMNIST", "FMNIST", "FMNIST"], "method": ["FedAvg", "FedAvg", "Ditto"],
                           "setting": ["pathological / 20 clients", "Dirichlet 0.1 / 20 clients",
                                       "Dirichlet 0.1 / 20 clients"], "value": [80.4, 85.9, 97.5]})  # fmt: skip
    kt = pd.DataFrame({"table": ["Table 2", "Table 2", "Table 2", "Table 1"],
                       "dataset": ["CIFAR-10", "CIFAR-10", "Fashion_MNIST", "CIFAR-10"],
                       "setting": ["20 clients / homogeneous CNN", "100 clients (sampling rate 0.1) / homogeneous CNN",
                                   "20 clients / homogeneous CNN", "20 clients / heterogeneous"],
                       "method": ["Fedavg-Local FT", "Fedavg", "Fedavg", "FedMD"], "value": [42.9, 43.6, 80.7, 1.0]})  # fmt: skip
    return pfllib, kt


def test_published_by_setting_reads_each_settings_dataset_and_split():
    pf, kt = published_by_setting(*published_frames(), settings_for(["fashion-mnist", "cifar10"], 0.1))
    assert pf["pathological on Fashion-MNIST"] == {"FedAvg": 80.4}
    assert pf["dirichlet(0.1) on Fashion-MNIST"] == {"FedAvg": 85.9, "Ditto": 97.5}
    assert pf["dirichlet(0.1) on CIFAR-10"] == {}  # PFLlib reports no CIFAR-10
    assert kt["dirichlet(0.1) on CIFAR-10"] == {"FedAvg + FT": 42.9}  # 20 clients, Table 2 only, the kit's names
    assert kt["pathological on Fashion-MNIST"] == kt["dirichlet(0.1) on Fashion-MNIST"] == {"FedAvg": 80.7}


def test_kt_note_names_the_strongest_personalized_baseline_or_nothing():
    note = kt_note({"FedAvg": 80.69, "pFedMe": 90.97, "FedAvg + FT": 90.17}, "fashion-mnist", ["FedAvg + FT", "pFedMe"])
    assert note == ("KT-pFL's Table 2 (Fashion-MNIST, 20 clients holding all labels in different counts): strongest "
                    "personalized 91.0 % (pFedMe), FedAvg 80.7 %.")  # fmt: skip
    assert kt_note({}, "cifar10", ["pFedMe"]) == ""


def test_training_text_says_what_the_profile_sets():
    assert training_text(30, None, 2, [0.003, 0.01]) == (
        "30 rounds of one local epoch; a headline arm still improving runs on, to 2×; learning rate tuned per "
        "method on validation")  # fmt: skip
    assert training_text(2000, None, 1, [0.005], 10, 0.0) == (
        "2000 rounds of one local epoch; learning rate 0.005, batch 10, plain SGD (no momentum)"
    )
    assert training_text(3, 2, 2, [0.01]).startswith("3 rounds of 2 local steps; a headline")


def test_steps_a_round_is_an_epoch_of_each_clients_share_or_its_local_steps():
    assert steps_a_round("fashion-mnist", 20, batch_size=10) == 20 * 270  # 60 000 × 0.9 / 20 = 2 700 images
    assert steps_a_round("cifar10", 20, batch_size=10) == 20 * 225  # 50 000 × 0.9 / 20 = 2 250
    assert steps_a_round("cifar10", 20, batch_size=50) == 20 * 45
    assert steps_a_round("fashion-mnist", 6, batch_size=50, local_steps=2) == 12
    assert steps_a_round("fashion-mnist", 10, batch_size=50, train_images=3000) == 10 * 6  # 270 images: 6 batches


def test_paper_cost_counts_the_paper_profiles_runs_and_steps(monkeypatch):
    monkeypatch.delenv("PFLBOOK_DRY", raising=False)
    p = parameters("basics", "paper")
    cost = paper_cost(p)
    assert cost["datasets"] == ["fashion-mnist"] and cost["clients"] == 20
    assert cost["rounds"] == 2000 and cost["seeds"] == 5
    # a run: 2000 rounds x 20 clients x 270 batches of 10 (60 000 images less 10 % validation: 2 700 a client)
    assert cost["steps_per_run"] == {"fashion-mnist": 10_800_000}
    # 2 splits x 9 methods x 5 seeds, no running on (EXTEND_CAP 1), the pilot is the seed-0 run (one rate,
    # 2000 rounds); + Flower's 2 runs of 3 rounds x 10 clients x 108 batches of 50
    assert cost["runs"] == 2 * 9 * 5 + 2 == 92
    assert cost["steps"] == 2 * 9 * 5 * 10_800_000 + 2 * 3 * 10 * 108 == 972_006_480


def test_paper_cost_adds_each_dataset():
    p = parameters("basics", "book") | {"DATASETS": ["fashion-mnist", "cifar10"], "SEED_CAP": 1, "EXTEND_CAP": 1,
                                        "LR_GRID": [0.01], "PILOT_ROUNDS": 30}  # fmt: skip
    cost = paper_cost(p)  # book's 30 rounds of one epoch in batches of 50: 54 and 45 batches a client
    assert cost["steps_per_run"] == {"fashion-mnist": 30 * 20 * 54, "cifar10": 30 * 20 * 45}
    assert cost["runs"] == 2 * 2 * 9 + 2 and cost["steps"] == 2 * 9 * 30 * 20 * (54 + 45) + 2 * 3 * 10 * 108


def test_paper_cost_counts_the_running_on_and_a_pilot_that_is_not_the_runs_themselves():
    p = {"DATASETS": ["fashion-mnist"], "DIRICHLET_ALPHA": 0.1, "METHODS": ["fedavg", "ditto"], "ROUNDS": 10,
         "SEED_CAP": 3, "EXTEND_CAP": 4, "LR_GRID": [0.01, 0.1], "PILOT_ROUNDS": 2, "PILOT_SEEDS": [0], "SEEDS": [0],
         "N_CLIENTS": 20, "LOCAL_STEPS": 1, "TRAIN_IMAGES": None, "FEDPROX_MARGIN": 3.0, "FLOWER_ROUNDS": 1,
         "FLOWER_CLIENTS": 2}  # fmt: skip
    cost = paper_cost(p)
    # per split: 2 methods x 3 seeds at 10 rounds; its lead arms (FedAvg + 5 leads, + FedAvg + FT on the
    # Dirichlet split) x 3 seeds at 20 and 40 rounds; the pilot: 2 methods x 2 rates x 1 seed at 2 rounds
    runs = 2 * (2 * 3 + 2 * 2) + (6 + 7) * 3 * 2 + 2
    assert cost["runs"] == runs
    a_round = 20  # 20 clients x 1 local step
    steps = 2 * (2 * 3 * 10 + 2 * 2 * 2) * a_round + (6 + 7) * 3 * (20 + 40) * a_round + 2 * 1 * 2
    assert cost["steps"] == steps


def test_the_engines_comparison_is_kept_in_the_store_and_computed_once(tmp_path, monkeypatch):
    import pflkit.flower
    from pflkit.chapters.basics import on_both_engines
    from pflkit.engine import run
    from pflkit.store import Store

    calls = []

    def fake_flower(cfg):  # Flower's simulation is tested in tests/test_flower.py; here: the keeping
        calls.append(torch.get_num_threads())
        return run(cfg)

    monkeypatch.setattr(pflkit.flower, "run_flower", fake_flower)
    cfg = tiny_config(clients=2, rounds=1)
    store = Store(tmp_path)
    first = on_both_engines(cfg, store)
    assert calls == [1] and set(first) == {"in-process", "Flower simulation"}
    assert on_both_engines(cfg, store) == first and calls == [1]  # the second call reads the store
    assert on_both_engines(dataclasses.replace(cfg, seed=1), store) != first and len(calls) == 2
    with pytest.raises(NotInStore):
        on_both_engines(dataclasses.replace(cfg, seed=2), Store(tmp_path, read_only=True))
