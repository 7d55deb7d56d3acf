"""The KT-pFL chapter's probes and measurements (pflkit.chapters.ktpfl)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from torch import nn

from pflkit.chapters.ktpfl import (
    G_RATIO,
    PARTS,
    W_SELF,
    by_architecture,
    c_moved,
    c_probe,
    channel_frame,
    channel_last,
    class_order,
    coefficient_rows,
    figure5_table,
    kt_probe,
    label_similarity,
    last_c,
    multiply_adds,
    paper_factors,
    pilots_c_moved,
    round_mb,
    rounds_of_updates,
    sampling_rate,
    soft_vs_parameters,
)
from pflkit.chapters.ktpfl_claims import (
    c_mechanism,
    coefficient_claims,
    data_control,
    factor_claims,
    half_updates_why,
    paper_margin,
    table1_claims,
    table2_claims,
)
from pflkit.chapters.ktpfl_page import (
    STRONG,
    accuracy_view,
    architecture_table,
    c_heatmap,
    channel_figure,
    channel_sentence,
    chosen_sentence,
    curves,
    figure5_plot,
    figure5_sentence,
    leads,
    model_cost,
    model_sizes,
    muted_palette,
    setup_rows,
    split_claims,
    split_summary,
    table2_frame,
    table2_outcome,
)
from pflkit.engine import Federation, run
from tests.conftest import tiny_config


def test_multiply_adds_counts_linear_and_convolution_layers():
    assert (
        multiply_adds(nn.Sequential(nn.Flatten(), nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)), (1, 2, 2))
        == 4 * 3 + 3 * 2
    )
    conv = nn.Conv2d(1, 2, kernel_size=3, padding=1)  # 2 × 4 × 4 outputs, 9 weights each
    assert multiply_adds(conv, (1, 4, 4)) == 2 * 4 * 4 * 9


def test_c_moved_and_by_architecture_read_the_records():
    c = [[0.5, 0.2], [0.5, 0.8]]
    rec = {"config": {"rounds": 3, "method": "ktpfl", "options": {"models": "lenet,mlp"}},
           "final": {"per_client_acc": [0.5, 0.7, 0.9, 1.0]}}  # fmt: skip

    class Result:  # the two things the functions read of a SweepResult
        records = {("KT-pFL", 0): rec}

        def probes(self, arm, seed):
            return {3: {"c": c}}

        def __getitem__(self, pair):
            return self.records[pair]

    result = Result()
    assert c_moved(result, "KT-pFL", 0) == pytest.approx(0.3)
    arch = by_architecture(result)
    assert dict(zip(arch.architecture, arch.acc)) == pytest.approx({"lenet": 70.0, "mlp": 85.0})  # dealt in turn


def test_c_mechanism_reads_inert_below_the_threshold_and_acts_above_it():
    far = {0: 0.3, 1: 0.25, 2: 0.35}  # the largest |c − 1/2| per seed

    class Result:
        records = {("KT-pFL", s): {"config": {"rounds": 2}} for s in far}

        def __init__(self, scale):
            self.scale = scale

        def probes(self, arm, seed):
            d = self.scale * far[seed]
            return {2: {"c": [[0.5 + d, 0.5 - d], [0.5 - d, 0.5 + d]]}}

        def __getitem__(self, pair):
            return self.records[pair]

    acts = c_mechanism("c moves", Result(1.0), "KT-pFL", [0, 1, 2, 9], threshold=0.01)  # seed 9: no run, skipped
    assert acts["verdict"] == "reproduces" and acts["kind"] == "mechanism"
    assert acts["_v"].n == 3 and acts["_v"].mean == pytest.approx(0.3 - 0.01)
    assert "0.300" in acts["ours (a − b, 95 % CI)"] and "above 0.01 on 3" in acts["ours (a − b, 95 % CI)"]
    inert = c_mechanism("c moves", Result(0.01), "KT-pFL", [0, 1, 2], threshold=0.01)  # |c − 1/2| ≈ 0.003
    assert inert["verdict"] == "contradicted" and inert["flags"] == ["mechanism inert"]


def test_label_similarity_is_one_on_the_diagonal():
    cfg = tiny_config(partition="pathological", classes_per_client=2, clients=4)
    sim, mix = label_similarity(Federation.from_config(cfg))
    assert np.allclose(np.diag(sim), 1) and np.allclose(sim, sim.T) and np.allclose(mix.sum(1), 1)
    assert ((sim >= 0) & (sim <= 1)).all()


def test_probes_record_c_and_the_channel_in_the_right_methods():
    seen = {}
    for method in ("ktpfl", "fedmd", "fedavg"):
        cfg = tiny_config(method=method, rounds=2, local_steps=None, local_epochs=1, public_images=100,
                          partition="dirichlet", options={"T": 2.0} if method != "fedavg" else {})  # fmt: skip
        run(cfg, Federation.from_config(cfg),
            on_round=lambda r, row, s, cl, m=method: seen.update({(m, r): (c_probe(r, row, s, cl), kt_probe(r, row, s, cl))}))  # fmt: skip
    assert seen["ktpfl", 1][0] is None and len(seen["ktpfl", 2][0]["c"]) == 4  # c after the last round only
    assert "c" in seen["ktpfl", 2][1] and "c" not in seen["ktpfl", 1][1]
    assert len(seen["fedmd", 1][1]["grad_ratio"]) == 4 and seen["fedmd", 1][0] is None
    assert seen["fedavg", 2] == (None, None)


def test_figure_5_ledger_per_client_round_and_the_two_readings():
    import pandas as pd

    class Result:
        def finals(self):
            return pd.DataFrame({"arm": ["soft", "soft", "params"], "seed": [0, 1, 0], "rounds": [2, 4, 2],
                                 "MB_up": [4.0, 16.0, 40.0], "MB_down": [6.0, 24.0, 40.0]})  # fmt: skip

    soft = round_mb(Result(), "soft", n_clients=2)  # seed 1 ran on to twice the rounds: the same per round
    assert soft.to_dict("index") == {0: {"up": 1.0, "down": 1.5}, 1: {"up": 2.0, "down": 3.0}}
    params = round_mb(Result(), "params", n_clients=2)  # 10 up, 10 down
    d = soft_vs_parameters(soft, params, batch_mb=3.0)
    assert list(d["as run"].index) == [0]  # paired seeds only
    assert d["as run"][0] == pytest.approx(np.log(20 / 2.5))
    assert d["batch sent"][0] == pytest.approx(np.log(20 / (2 * 1.0 + 3.0)))


# --- what the page shows -------------------------------------------------------------------------------


class Ledger:
    """The parts of a SweepResult that the page's tables read: per-arm values, improving flags, probes
    and the final ledgers."""

    def __init__(self, values: dict, improving=None, probes=None, finals=None):
        import pandas as pd

        self.arms = list(values)
        self._values = {a: pd.Series(v, index=range(len(v)), dtype=float) for a, v in values.items()}
        self._improving = improving or {}
        self._probes = probes or {}
        self._finals = finals
        self.records = {(a, s): {} for a, v in values.items() for s in range(len(v))}

    def values(self, arm, metric="mean_acc"):
        return self._values[arm]

    def improving(self, arm):
        return self._improving.get(arm, False)

    def probes(self, arm, seed):
        return self._probes[arm, seed]

    def finals(self):
        return self._finals


def test_accuracy_view_names_the_columns_and_dashes_the_missing_paper_numbers():
    import pandas as pd

    t = pd.DataFrame({"paper Fashion_MNIST": [75.481, float("nan")], "ours mean_acc": ["78.4 ± 4.8", "70.0 ± 1.0"],
                      "seeds": [3, 3], "still improving": ["no", "yes"]},
                     index=pd.Index(["KT-pFL", "Local"], name="arm"))  # fmt: skip
    view = accuracy_view(t)
    assert list(view.columns) == ["paper", "ours", "seeds", "still improving"] and view.index.name == "method"
    assert list(view["paper"]) == ["75.48", "—"]


def test_muted_palette_gives_the_paper_method_the_strong_colour_alone():
    pal = muted_palette(["FedMD", "KT-pFL", "KT-pFL (parameters)", "Local"])
    assert pal["KT-pFL"] == STRONG and pal["KT-pFL (parameters)"] == STRONG
    assert STRONG not in (pal["FedMD"], pal["Local"]) and pal["FedMD"] != pal["Local"]


def test_curves_draw_one_panel_per_value_the_mean_over_seeds_and_the_strong_arm_thick():
    import matplotlib.pyplot as plt
    import pandas as pd

    hist = pd.DataFrame({"round": [1, 2, 1, 2, 1, 2], "mean_acc": [10.0, 20.0, 30.0, 40.0, 50.0, 70.0],
                         "arm": ["KT-pFL", "KT-pFL", "KT-pFL", "KT-pFL", "FedMD", "FedMD"], "seed": [0, 0, 1, 1, 0, 0],
                         "split": ["a", "a", "a", "a", "b", "b"]})  # fmt: skip
    fig = curves(hist, "split")
    a, b = fig.axes
    (kt,) = a.get_lines()
    assert list(kt.get_ydata()) == [20.0, 30.0] and kt.get_linewidth() > b.get_lines()[0].get_linewidth()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["KT-pFL", "FedMD"]  # FedMD only in panel b
    assert a.get_title() == "a" and fig.get_size_inches()[0] == pytest.approx(7.0)
    plt.close(fig)


def test_claim_lines_and_split_claims_keep_each_claims_word_and_flags():
    import pandas as pd

    rows = [
        {"claim": "Table 1: KT-pFL beats FedMD", "verdict": "reproduces", "flags": ["budget-limited"],
         "ours (a − b, 95 % CI)": "+1.0 [+0.2, +1.8] (3 seeds)"},
        {"claim": "Table 3: more epochs help", "verdict": "inconclusive", "flags": [], "ours (a − b, 95 % CI)": "+0.1"},
        {"claim": "Table 1: mechanism: c moves", "verdict": "reproduces", "flags": [], "kind": "mechanism",
         "ours (a − b, 95 % CI)": "0.9"},
    ]  # fmt: skip
    from pflkit.pages import claim_bullets

    text = claim_bullets(rows[:1])
    assert text == "* Table 1: KT-pFL beats FedMD: **reproduces** · *budget-limited*, +1.0 [+0.2, +1.8] (3 seeds)."
    table = pd.DataFrame({"verdict": [r["verdict"] for r in rows]}, index=[r["claim"] for r in rows])
    main, noted, own = split_claims(table, rows, aside=("Table 3",))
    assert list(main.index) == [rows[0]["claim"]] and list(noted.index) == [rows[1]["claim"]]
    assert list(own.index) == [rows[2]["claim"]]
    main, noted, own = split_claims(table, rows)
    assert len(main) == 2 and noted.empty


def test_model_sizes_and_cost_compare_each_model_with_its_full_width_one():
    sizes = model_sizes(["lenet"], ["fedavg-cnn"], "book", per_round=100)
    assert sizes.loc["lenet", "ratio"] == pytest.approx(
        sizes.loc["lenet", "parameters"] / sizes.loc["lenet", "its parameters"], abs=1e-4
    )
    assert sizes.loc["lenet", "soft KB a round"] == pytest.approx(4.0)  # 100 × 10 float32
    cost = model_cost(["lenet", "fedavg-cnn", "lenet"])
    assert list(cost.index) == ["lenet", "fedavg-cnn"] and (cost["multiply-adds per image"] > 0).all()
    assert cost.loc["fedavg-cnn", "parameters"] > cost.loc["lenet", "parameters"]


def test_split_summary_counts_images_and_classes_per_client():
    cfg = tiny_config(partition="pathological", classes_per_client=2, clients=4)
    text = split_summary(Federation.from_config(cfg))
    assert text.startswith("training images per client median ") and text.endswith("2.0")


def test_the_channel_frame_last_round_and_sentence():
    import pandas as pd

    probe = lambda w, g: {"self_weight": [w, w], "grad_ratio": [g, g]}  # noqa: E731
    res = Ledger(
        {"KT-pFL": [0], "FedMD": [0], "Local (λ = 0)": [0], "FedDF": [0]},
        probes={
            ("KT-pFL", 0): {1: probe(0.5, 0.2), 2: probe(0.6, 0.3)},
            ("FedMD", 0): {2: probe(0.25, 0.1)},
            ("Local (λ = 0)", 0): {2: probe(0.0, 0.0)},
        },  # fmt: skip
    )
    diag = channel_frame({"Non-IID_1": res}, ("KT-pFL", "FedMD", "Local (λ = 0)"), "Local (λ = 0)")
    assert len(diag) == 4 and diag[diag.arm == "Local (λ = 0)"][W_SELF].isna().all()
    last = channel_last(diag)
    assert last.loc[("Non-IID_1", "KT-pFL"), G_RATIO] == pytest.approx(0.3)
    text = channel_sentence(last, clients=4)
    assert "KT-pFL's distillation gradient is 0.30 of its private one (FedMD's 0.10)" in text and "1/N = 0.25" in text
    assert isinstance(last, pd.DataFrame)


def test_architecture_table_reads_mean_and_lowest_seed_and_counts_collapses():
    import pandas as pd

    groups = pd.DataFrame({"split": ["A"] * 4, "arm": ["KT-pFL"] * 4, "seed": [0, 1, 0, 1],
                           "architecture": ["lenet", "lenet", "mlp", "mlp"], "acc": [80.0, 60.0, 10.0, 30.0]})  # fmt: skip
    table, text = architecture_table(groups, near_chance=20.0)
    assert table.loc[("A", "KT-pFL"), "lenet"] == "70.0 (60.0)" and table.loc[("A", "KT-pFL"), "mlp"] == "20.0 (10.0)"
    assert text.startswith("Architecture-seed pairs below 20 %: KT-pFL on A: 1.") and "seed 0, at 10.0 %" in text


def test_coefficient_rows_class_order_and_last_c():
    c = np.array([[0.6, 0.1, 0.3], [0.2, 0.8, 0.1], [0.2, 0.1, 0.6]])
    sim = np.array([[1.0, 0.1, 0.9], [0.1, 1.0, 0.2], [0.9, 0.2, 1.0]])
    row = coefficient_rows(c, sim)
    assert row["mean self-weight c_nn"] == pytest.approx(2.0 / 3)
    assert row["Spearman(c, label similarity)"] > 0.5  # the large c's sit on the similar pairs
    assert coefficient_rows(np.full((3, 3), 1 / 3), sim)["Spearman(c, label similarity)"] == 0.0  # constant c
    mix = np.array([[0, 0.5, 0, 0.5], [0.5, 0.5, 0, 0], [0, 0.4, 0, 0.6], [0.5, 0.5, 0, 0]])
    order, tags = class_order(mix)
    assert tags == ["0&1", "0&1", "1&3", "1&3"] and sorted(order[:2]) == [1, 3]
    res = Ledger({"KT-pFL": [0]}, probes={("KT-pFL", 0): {2: {"c": [[1.0]]}, 4: {"c": c.tolist()}}})
    got, rnd = last_c(res, "KT-pFL", 0)
    assert rnd == 4 and np.allclose(got, c)


def test_table2_frame_outcome_and_the_papers_margin():
    import pandas as pd

    paper = pd.DataFrame({"setting": ["20 clients / CNN"] * 3, "method": ["Fedavg", "pFedHN", "KT-pFL"],
                          "value": [80.0, 90.0, 94.0]})  # fmt: skip
    res = Ledger({"FedAvg": [70.0, 72.0], "pFedHN": [89.0, 91.0], "KT-pFL (parameters)": [80.0, 82.0], "KT-pFL": [85.0, 85.0]},
                 improving={"FedAvg": True})  # fmt: skip
    t = table2_frame({20: res}, paper, near_points=3.0)
    assert list(t["within 3 points"]) == ["no", "yes", "no", "—"]  # the soft KT-pFL has no row in the paper
    assert t.loc["KT-pFL (parameters)", "ours − paper"] == pytest.approx(-13.0)
    assert paper_margin(paper.set_index("method").value, 20) == "+4.00 vs pFedHN (20 clients)"
    assert paper_margin(pd.Series({"Fedavg": 1.0}), 100).startswith("—")
    assert sampling_rate(20) == 1.0 and sampling_rate(100) == 0.1
    text = table2_outcome(t, 20, near_points=3.0, near_goal=2, profile="book", images_each=270, pool=9000, public=3000,
                          all_images=70000, rounds=20, local_epochs=3, model_words="the kit's LeNet")  # fmt: skip
    assert "1 of 3 methods land within 3 points" in text and "**not met**" in text
    assert (
        "FedAvg still improved" in text and "the kit's LeNet" in text and "KT-pFL (parameters) is our reading" in text
    )
    assert "each would train on" not in text and "about 2625" in text  # 0.75 × 70 000 / 20


def test_paper_factors_read_tables_3_to_6():
    from pflkit.results import paper_results

    pf = paper_factors(paper_results("ktpfl"))
    assert pf["E"][5] == pytest.approx(88.73) and pf["rho"][0.7] == pytest.approx(89.14)
    assert pf["arms"]["E=5"] == pytest.approx(88.73) and pf["arms"]["ρ=0.1"] == pytest.approx(89.49)
    assert pf["arms"]["R=2"] == pytest.approx(89.90) and isinstance(pf["domain"], float)


def test_figure5_table_and_sentence():
    import pandas as pd

    def ledger(arms):  # one seed, 2 clients, 1 round: MB up and down per arm
        return Ledger({a: [0] for a in arms}, finals=pd.DataFrame({"arm": list(arms), "seed": 0, "rounds": 1,
                                                                    "MB_up": [u for u, _ in arms.values()],
                                                                    "MB_down": [d for _, d in arms.values()]}))  # fmt: skip

    hetero = ledger({"KT-pFL": (0.2, 0.3)})
    homog = ledger(
        {"FedAvg": (2.0, 2.0), "FedAMP": (2.0, 2.0), "KT-pFL (parameters)": (2.0, 2.0), "KT-pFL": (0.2, 0.3)}
    )
    fig5 = figure5_table(hetero, homog, clients=2, n=2, batch_mb=1.5)
    assert list(fig5.columns) == PARTS and fig5.loc["FedAvg (parameters)", "parameters (up)"] == pytest.approx(1.0)
    kt = fig5.loc["KT-pFL (homogeneous, soft predictions)"]
    assert kt["soft predictions (up)"] == kt["teacher (down)"] == pytest.approx(0.1)
    assert kt["public batch indices (down)"] == pytest.approx(0.05)
    sent = fig5.loc["KT-pFL (heterogeneous), public batch sent"]
    assert sent["public batch images (down)"] == 1.5 and sent["public batch indices (down)"] == 0.0
    assert "KT-pFL (homogeneous, parameters)" in fig5.index
    text = figure5_sentence(fig5, "LeNet", 1000, 1.5)
    assert "10.0× a KT-pFL upload" in text and "moves 1.70 MB against FedAvg's 2.00 MB" in text
    assert text.endswith("soft predictions still move less.")


def test_protocol_builds_the_chapters_runs_and_reads_the_pilots_choices_in_place():
    from pflkit.chapters.ktpfl import Protocol

    kt, lam, tuned, kt_params = {"T": 10.0, "public_batch": 100}, {}, {}, {"rho": 0.5, "c_lr": 1.0}
    p = Protocol(fields=dict(clients=20, local_epochs=3, lr=0.01), splits={"A": dict(partition="dirichlet", alpha=0.5)},
                 archs="lenet,mlp", homog_model="lenet", rounds=20, evals=10, pilot_rounds=5, kt=kt, lam=lam,
                 lam_default=1.0, kt_params=kt_params, feddf={"server_steps": 20}, tuned=tuned)  # fmt: skip
    cfg = p.config("ktpfl", "A", lr=0.02)
    assert (cfg.clients, cfg.rounds, cfg.eval_every, cfg.lr, cfg.partition) == (20, 20, 2, 0.02, "dirichlet")
    assert cfg.options == {"T": 10.0, "public_batch": 100, "lam": 1.0, "models": "lenet,mlp"}
    lam["ktpfl"], tuned["feddf"] = 30.0, {"server_lr": 1e-3}  # what the pilots choose, read by later configs
    assert p.config("ktpfl", "A").options["lam"] == 30.0 and p.config("fedmd", "A").options["lam"] == 1.0
    assert p.options("feddf") == {"models": "lenet,mlp", "server_steps": 20, "server_lr": 1e-3}
    assert p.options("ktpfl-params") == kt_params and p.options("fedavg") == {}
    local = p.local("A")
    assert local.options["lam"] == 0.0 and local.options["public_batch"] == 1 and local.method == "ktpfl"
    pilot = p.pilot("fedavg", split="A")
    assert (pilot.rounds, pilot.eval_every) == (5, 5)
    h = p.homog("pfedhn", 10, per_round=0.5, final_only=True, split="A")
    assert (h.model, h.clients, h.rounds, h.sample_rate, h.eval_every) == ("lenet", 10, 100, 0.1, 100)
    h = p.homog("fedavg", split="A")
    assert (h.clients, h.sample_rate, h.rounds, h.options) == (20, 1.0, 20, {})


# --- the claims, on sweep results built from synthetic records -------------------------------------------


def record(acc: float, *, method="ktpfl", rounds=4, c=None, hist=None, val=None) -> dict:
    """A finished run's record as the store keeps it, reduced to what the tables and claims read (acc in
    [0, 1]); ``c``: KT-pFL's coefficients after the last round (the probe)."""
    from pflkit.sweeps import FINAL_METRICS

    val = acc if val is None else val
    hist = hist or [(rounds, acc)]
    rec = {
        "config": {"method": method, "rounds": rounds},
        "final": {"round": rounds} | dict.fromkeys(FINAL_METRICS, acc),
        "history": [{"round": r, "mean_acc": a, "pooled_acc": a, "val_mean_acc": val} for r, a in hist],
        "best_by_val": {"round": rounds, "mean_acc": acc, "pooled_acc": acc},
        "improving": 0.0,
        "comm": {"bytes_up": 0, "bytes_down": 0},
        "provenance": {"wall_time_s": 0.0},
    }
    if c is not None:
        rec["probe"] = {"name": "probe", "rounds": {str(rounds): {"c": c}}}
    return rec


def sweep_result(by_arm: dict):
    from pflkit.sweeps import SweepResult

    seeds = range(max(len(v) for v in by_arm.values()))
    return SweepResult({(a, s): r for a, recs in by_arm.items() for s, r in enumerate(recs)}, list(by_arm), seeds)


MOVED = [[0.8, 0.3], [0.2, 0.7]]  # c far from 1/2


def test_table1_claims_check_the_mechanisms_first_and_judge_the_papers_pairs():
    import pandas as pd

    def arm(accs, method="fedmd", c=None):
        return [record(a, method=method, c=c) for a in accs]

    res = sweep_result({
        "KT-pFL": arm([0.80, 0.82, 0.81], "ktpfl", MOVED), "FedMD": arm([0.70, 0.71, 0.72]),
        "Sim-pFD": arm([0.79, 0.83, 0.80]), "Local (λ = 0)": arm([0.60, 0.61, 0.62]),
        "FedDF": arm([0.5, 0.5, 0.5], "feddf"), "FedDF, no server distillation": arm([0.4, 0.45, 0.5], "feddf"),
    })  # fmt: skip
    budget = pd.DataFrame({"arm": ["KT-pFL"], "budget": ["1×"], "rounds": [4]})
    pub = {"KT-pFL": 75.0, "FedMD": 68.0, "Sim-pFD": 72.0}
    out = table1_claims("Non-IID_1", res, res, budget, best="FedMD", plan=None, pub=pub, rounds=4, inert_c=0.01,
                        resolution=1.0)  # fmt: skip
    names = [r["claim"] for r in out["claims"]]
    assert names[:2] == [out["mech"]["claim"], out["mech_c"]["claim"]] and len(names) == 4  # best = FedMD: no extra row
    assert out["mech"]["verdict"] == "reproduces" and out["mech_c"]["verdict"] == "reproduces"
    fedmd = out["claims"][2]
    assert fedmd["claim"] == "Table 1, Non-IID_1: KT-pFL beats FedMD (learned c − uniform c)"
    # the paper's margin for the claim's own comparison, and beside it its strongest comparator's
    assert fedmd["verdict"] == "reproduces" and fedmd.get("headline")
    assert fedmd["paper"] == "+7.00 vs FedMD (FMNIST); strongest comparator: +3.00 vs Sim-pFD"
    assert fedmd["paper"].margins == (7.0,) and fedmd["size"] in ("as the paper's", "larger than the paper's")
    assert out["claims"][3]["paper"] == "+3.00 vs Sim-pFD (FMNIST)"
    assert len(out["lines"]) == 1 and out["lines"][0].count("\n* ") == 3  # no arm ran on
    assert out["notes"][0].startswith("* Non-IID_1, control: FedDF's server distillation (FedDF − FedDF, no server")
    ran = table1_claims("Non-IID_1", res, res, budget.assign(budget="2×", rounds=8), best="Sim-pFD", plan=None, pub=pub,
                        rounds=4, inert_c=0.01, resolution=1.0)  # fmt: skip
    assert len(ran["claims"]) == 4 and "KT-pFL ran on to 8 rounds (still improving at 4)" in ran["lines"][1]


def test_factor_claims_gate_the_little_effect_claims_on_what_acts():
    from pflkit.verdicts import verdict

    still = [[0.5, 0.5], [0.5, 0.5]]
    res = sweep_result({
        "E=1": [record(a, c=still) for a in (0.70, 0.71, 0.72)], "E=6": [record(a, c=still) for a in (0.80, 0.80, 0.82)],
        "|D_r|=100": [record(a, c=still) for a in (0.75, 0.76, 0.77)],
        "|D_r|=1000": [record(a, c=still) for a in (0.75, 0.77, 0.76)],
        "ρ=0.1": [record(a, c=still) for a in (0.75, 0.75, 0.76)], "ρ=0.7": [record(a, c=still) for a in (0.75, 0.76, 0.75)],
        "public: digits": [record(a, c=still) for a in (0.75, 0.75, 0.75)],
        "public: held out": [record(a, c=still) for a in (0.75, 0.75, 0.75)],
    })  # fmt: skip
    pf = {"E": {5: 88.0, 20: 89.0}, "rho": {0.1: 89.5, 0.7: 89.1}, "public": {100: 88.0, 1000: 89.0}, "domain": -0.5}
    kw = dict(e=[1, 6], public=[100, 1000], rho=[0.1, 0.7], foreign=("public: digits", "public: held out"), n_foreign=1797,
              public_images=3000, sweep_rounds=8, margin=2.0, inert_c=0.01, seeds=[0, 1, 2], resolution=1.0)  # fmt: skip
    rows, plan = factor_claims(res, pf, helps=verdict([1.0, 2.0, 1.5]), **kw)
    by = {r["claim"].split(":")[0]: r for r in rows}
    assert list(by) == ["Table 3", "Table 6", "Table 4", "Table 5"] and by["Table 3"]["verdict"] == "reproduces"
    assert by["Table 3"]["paper"] == "+1.00 (E=20 vs E=5)" and by["Table 6"]["paper"] == "+1.0 (1000 vs 100)"
    assert by["Table 4"]["verdict"] == "not tested" and "c stayed within 0.01" in by["Table 4"]["ours (a − b, 95 % CI)"]
    assert by["Table 5"]["verdict"] == "reproduces" and "1797 images against 3000" in by["Table 5"]["claim"]
    assert set(plan.index) == {"E", "|D_r|", "ρ", "public set"}
    rows, _ = factor_claims(res, pf, helps=verdict([-1.0, -2.0, -1.5]), **kw)  # distillation did not help
    assert [r["verdict"] for r in rows[2:]] == ["not tested", "not tested"]
    assert "distillation was not shown to help" in rows[3]["ours (a − b, 95 % CI)"]


def test_table2_claims_data_control_and_coefficient_claims():
    import pandas as pd

    kp = "KT-pFL (parameters)"
    res = sweep_result({
        kp: [record(a, method="ktpfl-params", c=MOVED) for a in (0.85, 0.86, 0.87)],
        "KT-pFL": [record(a) for a in (0.80, 0.80, 0.81)], "pFedHN": [record(a, method="pfedhn") for a in (0.80, 0.80, 0.81)],
        "FedAvg + FT": [record(a, method="fedavg-ft") for a in (0.70, 0.71, 0.72)],
    })  # fmt: skip
    budget = pd.DataFrame({"arm": [kp], "budget": ["1×"], "rounds": [4]})
    pub = pd.Series({"KT-pFL": 93.93, "pFedHN": 92.22, "Fedavg-Local FT": 90.17})
    out = table2_claims(res, res, budget, 20, best="pFedHN", pub=pub, seeds=[0, 1, 2], inert_c=0.01, kp=kp)
    assert out["mech"]["verdict"] == "reproduces" and out["ran_on"] == ""
    head = out["claims"][0]
    assert head["claim"].startswith("Table 2, 20 clients: KT-pFL (parameters) beats the strongest other method (pFedHN")
    assert head["verdict"] == "reproduces" and head["paper"] == "+1.71 vs pFedHN (20 clients)"
    assert out["claims"][2]["claim"].startswith("Table 2, 20 clients (ours): exchanging parameters")
    from pflkit.chapters.ktpfl_claims import table2_more_counts

    pubs = pd.DataFrame({"setting": ["100 clients"] * 2, "method": ["KT-pFL", "pFedHN"], "value": [90.0, 88.0]})
    more = table2_more_counts({20: res, 100: res}, [100], pubs, seeds=[0, 1, 2], inert_c=0.01, kp=kp)
    assert [r["claim"].split(":")[0] for r in more[:2]] == [
        "Table 2, 100 clients, KT-pFL (parameters)",
        "Table 2, 100 clients",
    ]
    assert more[1]["paper"] == "+2.00 vs pFedHN (100 clients)" and len(more) == 4  # the mechanism, then the three
    full = sweep_result({"FedAvg + FT, all training images": [record(a) for a in (0.80, 0.82, 0.81)]})
    table, claims = data_control(res, full, 20, ["FedAvg + FT"], pub, (270, 2400), resolution=1.0)
    assert (
        table.loc["FedAvg + FT", "ours, all images"] == pytest.approx(81.0)
        and table.loc["FedAvg + FT", "paper"] == 90.2
    )
    assert claims[0]["verdict"] == "reproduces" and claims[0]["claim"].endswith("(the data-per-client control)")
    assert "81.0 % on all images, 71.0 % on the subset" in claims[0]["notes"]
    corr = pd.DataFrame({"split": ["A"] * 3, "seed": [0, 1, 2], "Spearman(c, label similarity)": [0.4, 0.5, 0.45]})
    (row,) = coefficient_claims(corr, {"A": res}, {"A": out["mech"]})
    assert row["claim"].startswith("A: c puts more weight") and row["verdict"] == "reproduces"


def test_leads_name_the_papers_three_lead_claims_with_our_setting():
    mech = {
        s: {"verdict": "underpowered", "ours (a − b, 95 % CI)": "+1.8 [-0.0, +3.7] (3 seeds)"}
        for s in ("Non-IID_1", "Non-IID_2")
    }
    claims = [
        {
            "claim": "Table 2, 20 clients (ours): every training image lifts FedAvg + FT",
            "ours (a − b, 95 % CI)": "+9.4 [+8, +10]",
        }
    ]
    rows = leads(mech, claims, 20, 3, 9000)
    assert [r[1] for r in rows] == ["KT-pFL beats FedMD (Table 1, Non-IID_1)", "KT-pFL beats Sim-pFD (Table 1, Non-IID_2)",
                                    "KT-pFL beats every baseline (Table 2)"]  # fmt: skip
    assert rows[0][2] == "FMNIST Non-IID_1, 20 clients, E = 3 (paper: 20)" and rows[0][3].endswith(
        "underpowered (+1.8)"
    )
    assert (
        rows[2][3] == "few images a client: all of them lift FedAvg + FT by +9.4"
        and leads(mech, [], 20, 3, None)[2][3] == ""
    )


def test_chosen_sentence_pilots_c_moved_and_rounds_of_updates():
    text = chosen_sentence({"lr": 0.08, "lam": 0.3}, {"FedDF": 0.04}, ("Local (λ = 0)", 0.04),
                           {"KT-pFL": {"c_lr": 0.01, "rho": 0.5}}, {"FedAvg": 0.04}, {"FedAMP": {"sigma": 10.0}})  # fmt: skip
    assert text == ("Chosen: the four soft-prediction methods lr 0.08 and λ 0.3; FedDF lr 0.04; Local (λ = 0) on its own lr "
                    "0.04 (Table 1 runs it at 0.08); KT-pFL's η₃ 0.01 and ρ 0.5; homogeneous: FedAvg 0.04; the baselines' "
                    "own: FedAMP σ 10.")  # fmt: skip

    class Pilot:
        grids = {"g": ["a", "b"]}
        result = sweep_result({"a": [record(0.5, c=MOVED)], "b": [record(0.5, c=[[0.5, 0.5], [0.5, 0.5]])]})

    moved = pilots_c_moved([Pilot()], [0])
    assert list(moved.iloc[:, 0]) == pytest.approx([0.3, 0.0]) and list(moved.index) == ["a (seed 0)", "b (seed 0)"]
    res = sweep_result({"FedAvg": [record(0.5, method="fedavg", hist=[(1, 0.4), (2, 0.5)])],
                        "pFedHN": [record(0.5, method="pfedhn", hist=[(10, 0.4), (20, 0.5)])]})  # fmt: skip
    h = rounds_of_updates({100: res})  # 100 clients at 0.1: ten pFedHN steps make a round
    assert list(h[h.arm == "pFedHN"]["round"]) == [1.0, 2.0] and list(h[h.arm == "FedAvg"]["round"]) == [1, 2]
    assert (h.clients == 100).all()


def test_the_notes_figures_draw():
    import matplotlib.pyplot as plt
    import pandas as pd

    diag = pd.DataFrame({"split": ["A", "A"], "arm": ["KT-pFL", "FedMD"], "seed": 0, "round": [1, 1], W_SELF: [0.5, 0.25],
                         G_RATIO: [0.1, 0.2]})  # fmt: skip
    fig = channel_figure(diag, ("KT-pFL", "FedMD"))
    assert len(fig.axes) == 2 and fig.axes[0].get_ylabel() == "self-weight\nin the teacher"
    assert fig.axes[0].get_title() == "A" and fig.axes[1].get_title() == ""  # one title a column
    fig2 = c_heatmap(np.eye(3), [2, 0, 1], ["a", "b", "c"])
    assert [t.get_text() for t in fig2.axes[0].get_xticklabels()] == ["a", "b", "c"]
    fig5 = pd.DataFrame([[1.0, 1.0, 0.1, 0.0, 0.0, 0.0]], columns=PARTS, index=["KT-pFL"])
    fig3 = figure5_plot(fig5)
    assert fig3.axes[0].get_xlabel() == "MB per client and round"
    for f in (fig, fig2, fig3):
        plt.close(f)


def test_setup_rows_state_ours_beside_the_papers():
    p = dict(TRAIN_IMAGES=9000, TEST_IMAGES=None, DIRICHLET_ALPHA=0.5, CLIENTS=20, ARCHS="lenet,alexnet-16",
             HOMOG_MODEL="lenet", PUBLIC_IMAGES=3000, PUBLIC_PER_ROUND=1000, ROUNDS=20, LOCAL_EPOCHS=3,
             DISTILL_EPOCHS=1, TEMPERATURE=10.0, EXTEND_CAP=2, SEEDS=[0, 1, 2], T1_RUN=6)  # fmt: skip
    rows = dict((what, (ours, paper)) for what, ours, paper in setup_rows(p))
    assert list(rows) == ["Data", "Splits", "Clients, models", "Public set", "Training", "Tuning", "Seeds"]
    assert rows["Data"][0].startswith("Fashion-MNIST, 9000 training and all test images")
    assert rows["Clients, models"][0] == "20, five per architecture: lenet and alexnet-16; Table 2: all lenet"
    assert "T = 10;" in rows["Training"][0] and rows["Seeds"] == (
        "0, 1 and 2; a claim's arms to its seed plan, at most 6 in Table 1",
        "",
    )
    assert rows["Public set"] == ("3000 held-out Fashion-MNIST images, 1000 a round", "MNIST, 3000 a round")
    assert rows["Data"][1] == "Fashion-MNIST; each client's data split 75/25"
    assert setup_rows(p | {"PUBLIC_SETS": {"fashion-mnist": ""}}) == setup_rows(p)  # `book`'s card as it was
    paper = dict((what, (ours, theirs)) for what, ours, theirs in setup_rows(
        p | {"PUBLIC_SETS": {"fashion-mnist": "mnist", "emnist-balanced": "mnist", "cifar10": "cifar100"}}))  # fmt: skip
    assert paper["Data"][0].startswith("Fashion-MNIST, EMNIST Balanced and CIFAR-10, 9000 training")
    assert paper["Data"][1] == "Fashion_MNIST, EMNIST and CIFAR-10; each client's data split 75/25"
    assert paper["Public set"][0] == (
        "3000 images of MNIST for Fashion-MNIST; MNIST for EMNIST Balanced; CIFAR-100 for CIFAR-10, 1000 a round"
    )


def test_table1_arms_fallback_notes_and_table1_frame():
    import pandas as pd

    from pflkit.chapters.ktpfl import LOCAL, NO_SERVER, TOPK_A, Protocol, fallback_notes, table1_arms
    from pflkit.chapters.ktpfl_page import table1_frame

    p = Protocol(fields=dict(clients=4), splits={"Non-IID_1": {}, "Non-IID_2": {}}, archs="lenet", homog_model="lenet",
                 rounds=2, evals=1, pilot_rounds=1, kt={}, lam={}, lam_default=1.0, kt_params={},
                 feddf={"server_steps": 20}, tuned={})  # fmt: skip
    lr = {"fedmd": 0.08, "feddf": 0.04, "topk-pfd": 0.08, "ktpfl": 0.08}
    arms = table1_arms(p, "Non-IID_1", lr, soft_lr=0.08)
    assert list(arms) == ["FedMD", "FedDF", "TopK-pFD", "KT-pFL", LOCAL, NO_SERVER, TOPK_A]
    assert arms[NO_SERVER].options["server_steps"] == 0 and arms[NO_SERVER].lr == 0.04
    assert arms[TOPK_A].options["topk_rule"] == "median" and arms[LOCAL].options["lam"] == 0.0
    assert TOPK_A not in table1_arms(p, "Non-IID_2", lr, soft_lr=0.08)
    notes = fallback_notes(
        "A", {"FedMD": "lr 0.08 diverged", "KT-pFL": "lr 0.08 diverged", "FedDF": "lr 0.04 diverged"}
    )
    assert notes == ["A: lr 0.08 diverged", "A, FedDF: lr 0.04 diverged"]
    res = sweep_result({"KT-pFL": [record(a) for a in (0.80, 0.82)], "FedMD": [record(a) for a in (0.70, 0.72)]})
    paper = pd.DataFrame({"setting": ["A / 20 clients"] * 2, "method": ["KT-pFL", "FedMD"], "value": [75.48, 68.0]})
    t = table1_frame({"A": res}, paper)
    assert list(t.index) == [("A", "KT-pFL"), ("A", "FedMD")] and t.index.names == ["split", "method"]
    assert list(t["paper"]) == ["75.48", "68.00"] and t.loc[("A", "KT-pFL"), "ours"] == "81.0 (80.0, 82.0)"
    assert "ours, pooled (best-val round)" in t.columns


# --- the notebook's plumbing: the pilots' and sweeps' arms, sentences, glued values ------------------------


def _protocol(tuned=None):
    from pflkit.chapters.ktpfl import Protocol

    return Protocol(fields=dict(clients=4), splits={"Non-IID_1": {}, "Non-IID_2": {}}, archs="lenet,mlp",
                    homog_model="lenet", rounds=6, evals=3, pilot_rounds=2, kt={"T": 10.0}, lam={}, lam_default=1.0,
                    kt_params={"rho": 0.5}, feddf={"server_steps": 20}, tuned={} if tuned is None else tuned)  # fmt: skip


def test_pilot_arms_cover_each_method_once_at_the_pilots_budget():
    from pflkit.chapters.ktpfl import LOCAL, baseline_pilot_arms, chosen, feddf_pilot_arms, homog_label, lr_pilot_arms
    from pflkit.methods import display_name

    p = _protocol()
    arms = lr_pilot_arms(p, ["fedmd", "feddf", "ktpfl"], ["fedavg", "pfedhn", "ktpfl-params"])
    fedavg, kp = homog_label("fedavg"), homog_label("ktpfl-params")
    assert list(arms) == [display_name("feddf"), LOCAL, fedavg, kp]  # soft methods and pFedHN piloted elsewhere
    assert fedavg == f"{display_name('fedavg')} (homogeneous)"
    assert all(c.rounds == 2 and c.eval_every == 2 for c in arms.values())
    assert arms[LOCAL].options["lam"] == 0.0 and arms[fedavg].model == "lenet" and arms[kp].options == {"rho": 0.5}
    grids = {"fedamp": {"sigma": [0.1, 1.0]}, "feddf": {"server_steps": [5, 10]}}
    hyper = baseline_pilot_arms(p, grids, {"feddf": 0.04}, {"fedamp": 0.02}, ["feddf"])
    label, g = hyper["fedamp"]
    assert label == f"{display_name('fedamp')} (sigma)" and len(g) == 2
    assert sorted(c.options["sigma"] for c in g.values()) == [0.1, 1.0]
    assert {c.lr for c in g.values()} == {0.02} and {c.model for c in g.values()} == {"lenet"}  # Table 2's model
    assert {c.lr for c in hyper["feddf"][1].values()} == {0.04}  # a Table 1 method: its models, its rate
    dd = feddf_pilot_arms(p, {"feddf": 0.04, "pfeddf": 0.08}, patience=3)
    assert [c.options["server_patience"] for c in dd.values()] == [3, 3] and [c.lr for c in dd.values()] == [0.04, 0.08]

    class Pilot:  # what chosen() reads of a pilot's result
        def config(self, label):
            return type("C", (), {"options": {"c_lr": 1.0, "rho": 0.1, "lam": 3.0}})()

    assert chosen(Pilot(), "any", ("c_lr", "rho")) == {"c_lr": 1.0, "rho": 0.1}


def test_probes_pairs_and_factor_arms():
    from pflkit.chapters.ktpfl import LOCAL, channel_probes, factor_arms, table1_pairs

    probes = channel_probes(["KT-pFL", "FedDF", LOCAL])
    assert probes == {"KT-pFL": kt_probe, "FedDF": c_probe, LOCAL: kt_probe}
    assert table1_pairs("FedDF")["KT-pFL − strongest other"] == ("KT-pFL", "FedDF")
    assert table1_pairs("FedDF")["KT-pFL − Local"] == ("KT-pFL", LOCAL)
    base = tiny_config(method="ktpfl", local_epochs=3, options={"rho": 0.5, "public_batch": 100})
    arms, own, foreign = factor_arms(base, e=[1, 3], r=[2], rho=[0.1], public=[10], foreign="digits")
    assert list(arms) == ["E=1", "E=3", "R=2", "ρ=0.1", "|D_r|=10", own, foreign]
    assert arms["E=1"].local_epochs == 1 and arms["R=2"].options == {
        "rho": 0.5,
        "public_batch": 100,
        "distill_epochs": 2,
    }
    assert arms["ρ=0.1"].options["rho"] == 0.1 and arms["|D_r|=10"].options["public_batch"] == 10
    assert arms[own] == base and arms[foreign].public_source == "digits" and foreign == "public: digits"
    # a base on another public set (the `paper` profile's MNIST): the own arm is the held-out set, the foreign one the base
    mnist = dataclasses.replace(base, public_source="mnist")
    arms, own, foreign = factor_arms(mnist, e=[], r=[], rho=[], public=[], foreign="mnist")
    assert arms[own] == base and arms[foreign] == mnist and list(arms) == [own, foreign]
    assert base.options == {"rho": 0.5, "public_batch": 100}  # the base is left as it was


def test_images_per_client_and_foreign_images():
    from pflkit.chapters.ktpfl import foreign_images, images_per_client
    from pflkit.engine import RunConfig

    keep = 1 - RunConfig().val_fraction
    assert images_per_client(9000, 3000, 20, 60000) == pytest.approx(300 * keep)
    assert images_per_client(None, 3000, 20, 60000) == pytest.approx(2850 * keep)  # None: every training image
    assert foreign_images("digits", 100) == 100 and foreign_images("digits", 10**6) == 1797  # all of digits


def test_factor_table_reads_c_beside_the_papers_values():
    import pandas as pd

    from pflkit.chapters.ktpfl_page import factor_table

    res = sweep_result(
        {
            "E=1": [record(0.8, method="ktpfl", c=MOVED)] * 2,
            "E=3": [record(0.7, method="ktpfl", c=[[0.5, 0.5], [0.5, 0.5]])] * 2,
        }
    )
    t = factor_table(res, {"E=1": 80.5}, seeds=[0, 1])
    assert list(t.columns)[-1] == "max |c − 1/N| (mean over seeds)"
    assert t.loc["E=1", "paper Fashion_MNIST"] == 80.5 and t.loc["E=1"].iloc[-1] == pytest.approx(0.3)
    assert t.loc["E=3"].iloc[-1] == 0 and pd.isna(t.loc["E=3", "paper Fashion_MNIST"])


def test_figure5_claims_summary_and_cost_sentence():
    import pandas as pd

    from pflkit.chapters.ktpfl_claims import figure5_claims
    from pflkit.chapters.ktpfl_page import claims_summary, cost_sentence

    d = {"batch sent": pd.Series([0.9, 1.0, 1.1]), "as run": pd.Series([2.0, 2.1, 2.2])}
    rows = figure5_claims(d, "LeNet")
    assert [r["claim"].split(":")[0] for r in rows] == ["Figure 5", "Figure 5 (ours)"]
    assert all("(LeNet; " in r["claim"] and r["verdict"] == "reproduces" for r in rows)
    claims = [{"verdict": "reproduced", "budget": ""}, {"verdict": "reproduced", "budget": "budget-limited"},
              {"verdict": "not reproduced", "budget": ""}]  # fmt: skip
    text = claims_summary(claims, 12, 1.234)
    assert text.startswith("3 claims: 2 reproduced, 1 not reproduced; 1 of them rest on runs still improving")
    assert "The 12 runs behind this page took 1.23 CPU-hours" in text
    cost = pd.DataFrame({"parameters": [10, 250], "multiply-adds per image": [100, 3000]}, index=["lenet", "cnn"])
    assert cost_sentence(cost, "lenet", "cnn") == (
        "The paper's CNN (`cnn`, run at `paper`) has 25× the parameters of Table 2's `lenet` and 30× its multiply-adds."
    )


def test_prose_values_and_setup_card_read_the_notebooks_parameters():
    from pflkit.chapters.ktpfl_page import PROSE_NAMES, SETUP_NAMES, prose_values, setup_markdown
    from pflkit.engine import RunConfig

    ns = dict.fromkeys(PROSE_NAMES, 3) | {"BASELINE_GRIDS": {"fedamp": {"sigma": [0.1, 1.0]}, "pfedme": {"lam": [5.0]}}}
    ns |= {"TRAIN_IMAGES": 9000, "TEST_IMAGES": None, "ARCHS": "lenet,mlp", "SEEDS": [0, 1, 2], "unused": 1}
    v = prose_values(ns)
    assert list(v) == PROSE_NAMES and "unused" not in v
    assert v["VAL_SHARE"] == f"{RunConfig().val_fraction:.0%}" and v["TRAIN_IMAGES"] == 9000
    assert (
        v["BASELINE_GRID_WORDS"].startswith("FedAMP's σ over 0.1") and "; pFedMe's λ over 5" in v["BASELINE_GRID_WORDS"]
    )
    card = setup_markdown({k: ns.get(k, 3) for k in SETUP_NAMES} | {"PUBLIC_SETS": {"fashion-mnist": ""}})
    assert "9000 training" in card and "lenet and mlp" in card and "held-out Fashion-MNIST images" in card
    assert "PUBLIC_SETS" in SETUP_NAMES  # the card names each dataset's public set


def test_glue_figure_closes_and_style_page_sets_the_tables_options():
    import matplotlib.pyplot as plt
    import pandas as pd

    from pflkit.chapters.ktpfl_page import glue_figure, style_page

    glue_figure("nothing", None)  # a plot with nothing to show glues nothing
    fig = plt.figure()
    glue_figure("a_figure", fig)
    assert not plt.fignum_exists(fig.number)
    style_page()
    assert pd.get_option("display.max_colwidth") is None


# --- the paper profile: the headline on each dataset, and its cost -----------------------------------------------


def test_a_protocol_on_another_dataset_changes_the_dataset_and_public_set_only():
    from pflkit.chapters.ktpfl import on_label, paper_rows
    from pflkit.engine import RunConfig
    from pflkit.results import paper_results

    p = _protocol()
    book = p.config("ktpfl")
    assert book.dataset == "fashion-mnist" and book.public_source == RunConfig().public_source == ""  # `book`'s keys
    cifar = p.on("cifar10", "cifar100")
    c = cifar.config("ktpfl", "Non-IID_2", lr=0.02)
    assert (c.dataset, c.public_source, c.lr) == ("cifar10", "cifar100", 0.02)
    assert dataclasses.replace(c, dataset="fashion-mnist", public_source="", lr=book.lr) == p.config(
        "ktpfl", "Non-IID_2"
    )
    assert (
        cifar.homog("fedavg", 100, per_round=0.1).public_source == "cifar100"
        and p.config("fedavg").dataset == "fashion-mnist"
    )
    assert cifar.kt is p.kt and cifar.tuned is p.tuned  # the pilots fill one set of options for every dataset
    assert on_label("fashion-mnist", "fashion-mnist") == "" and on_label("cifar10", "fashion-mnist") == "CIFAR-10, "
    rows = paper_rows(paper_results("ktpfl"), "Table 1", "emnist-balanced")
    assert len(rows) == 12 and set(rows.dataset) == {"EMNIST"} and set(rows.table) == {"Table 1"}
    assert set(paper_rows(paper_results("ktpfl"), "Table 2", "cifar10").dataset) == {"CIFAR-10"}


def _fake_runs(monkeypatch, diverged=()):
    """table1_runs's and table2_runs's sweeps replaced by synthetic results (KT-pFL 0.80, FedMD best of the rest);
    returns the calls made."""
    import pandas as pd

    import pflkit.experiments as ex

    calls = {"sweep": [], "flat": []}

    def sweep_stable(arms, seeds, store, pilots, together=(), probe=None):
        calls["sweep"].append((dict(arms), seeds))
        acc = {"KT-pFL": 0.80, "FedMD": 0.75, "FedAvg": 0.74}
        res = sweep_result({a: [record(acc.get(a, 0.70) + 0.01 * s, method=cfg.method, c=MOVED if "KT-pFL" in a else None) for s in range(3)]
                            for a, cfg in arms.items()})  # fmt: skip
        return res, {a: "diverged at 0.02; ran at 0.01" for a in diverged if a in arms}

    def until_flat(result, arms, store, only=None, cap=2, probe=None):
        calls["flat"].append((list(only), cap))
        return result, pd.DataFrame({"arm": list(only), "budget": ["1×"] * len(only)})

    monkeypatch.setattr(ex, "sweep_stable", sweep_stable)
    monkeypatch.setattr(ex, "until_flat", until_flat)
    return calls


def test_table1_runs_runs_each_split_to_its_plan_and_the_headline_pair_on(monkeypatch):
    from pflkit.chapters.ktpfl import LOCAL, table1_runs

    calls = _fake_runs(monkeypatch, diverged=["FedMD"])
    p = _protocol().on("emnist-balanced", "mnist")
    lr = dict.fromkeys(["fedmd", "feddf", "pfeddf", "sim-pfd", "topk-pfd", "ktpfl"], 0.01)
    h = table1_runs(p, lr, 0.01, {}, None, [0, 1, 2], run_cap=4, extend_cap=3, label="EMNIST, ")
    assert list(h["runs"]) == ["Non-IID_1", "Non-IID_2"] and h["best"]["Non-IID_1"] == "FedMD"
    assert len(calls["sweep"]) == 4  # per split: the plan's pilot on SEEDS, then its arms to their plan
    pilot_arms, pilot_seeds = calls["sweep"][0]
    assert pilot_seeds == [0, 1, 2] and {c.dataset for c in pilot_arms.values()} == {"emnist-balanced"}
    assert {c.public_source for c in pilot_arms.values()} == {"mnist"} and pilot_arms[LOCAL].options["lam"] == 0.0
    planned = calls["sweep"][1][1]
    assert set(planned) == set(pilot_arms) and all(1 <= len(s) <= 4 for s in planned.values())  # at most run_cap
    assert planned["KT-pFL"] == planned["FedMD"] == [0, 1, 2, 3]  # the headline: five seeds at least, within run_cap
    assert calls["flat"] == [(["KT-pFL", "FedMD"], 3)] * 2
    assert h["fallbacks"] == ["EMNIST, Non-IID_1, FedMD: diverged at 0.02; ran at 0.01",
                              "EMNIST, Non-IID_2, FedMD: diverged at 0.02; ran at 0.01"]  # fmt: skip
    assert (
        h["pairs"]["Non-IID_2"]["KT-pFL − strongest other"] == ("KT-pFL", "FedMD")
        and h["first"]["Non-IID_1"] is not None
    )


def test_table2_runs_and_table2_on_set_ours_beside_the_papers_numbers_of_the_dataset(monkeypatch):
    from pflkit.chapters.ktpfl import table2_runs
    from pflkit.chapters.ktpfl_page import table2_on
    from pflkit.results import paper_results

    calls = _fake_runs(monkeypatch, diverged=["FedAvg"])
    p = _protocol().on("cifar10", "cifar100")
    methods = ["fedavg", "ktpfl-params", "ktpfl"]
    h = table2_runs(p, methods, [20, 100], dict.fromkeys(methods, 0.005), {}, None, [0, 1, 2], extend_cap=4,
                    label="CIFAR-10, ")  # fmt: skip
    assert (
        list(h["runs"]) == [20, 100]
        and h["best"] == "FedAvg"
        and calls["flat"] == [(["KT-pFL (parameters)", "FedAvg"], 4)]
    )
    at100 = calls["sweep"][1][0]
    assert {c.clients for c in at100.values()} == {100} and {c.sample_rate for c in at100.values()} == {0.1}
    assert {c.dataset for c in at100.values()} == {"cifar10"} and {c.model for c in at100.values()} == {"lenet"}
    assert h["fallbacks"] == ["CIFAR-10, 20 clients, FedAvg: diverged at 0.02; ran at 0.01",
                              "CIFAR-10, 100 clients, FedAvg: diverged at 0.02; ran at 0.01"]  # fmt: skip
    pub = paper_results("ktpfl")
    view, rows = table2_on(h, pub[(pub.table == "Table 2") & (pub.dataset == "CIFAR-10")], 20, near_points=3.0,
                           seeds=[0, 1, 2], inert_c=0.01, kp="KT-pFL (parameters)", label="CIFAR-10, ")  # fmt: skip
    assert (
        view.loc[view.clients == 20, "paper"].loc["FedAvg"] == "51.94"
    )  # the paper's CIFAR-10 row, not Fashion_MNIST's
    assert view.loc[view.clients == 100, "paper"].loc["KT-pFL (parameters)"] == "58.29"
    assert len(rows) == 4 and all(r["claim"].startswith("Table 2, CIFAR-10, 20 clients") for r in rows)


def test_table2_runs_runs_the_headlines_arms_to_the_plan_on_the_papers_margin(monkeypatch):
    from pflkit.chapters.ktpfl import T2_HEADLINE, paper_rows, table2_runs
    from pflkit.results import paper_results

    calls = _fake_runs(monkeypatch)
    p = _protocol()
    methods = ["fedavg", "fedmd", "ktpfl-params", "ktpfl"]
    pub = paper_rows(paper_results("ktpfl"), "Table 2", "fashion-mnist")
    h = table2_runs(p, methods, [20, 100], dict.fromkeys(methods, 0.005), {}, None, [0, 1, 2], extend_cap=4,
                    pub=pub, resolution=1.0)  # fmt: skip
    assert len(calls["sweep"]) == 4  # per count: every arm on the seeds, then the headline's arms to its plan
    for n, (_, planned) in zip([20, 100], calls["sweep"][1::2]):
        runs = int(h["plans"][n].loc[T2_HEADLINE, "seeds run"])
        assert 5 <= runs <= 10 and planned["KT-pFL (parameters)"] == planned["FedMD"] == list(range(runs))
        assert planned["FedAvg"] == planned["KT-pFL"] == [0, 1, 2]  # the other arms: the seeds given
    # without the paper's numbers no plan is made, and every arm runs the seeds given
    calls["sweep"].clear()
    assert (
        table2_runs(p, methods, [20], dict.fromkeys(methods, 0.005), {}, None, [0, 1, 2], extend_cap=4)["plans"] == {}
    )
    assert len(calls["sweep"]) == 1


def test_client_steps_count_private_and_public_batches():
    from pflkit.chapters.ktpfl import client_steps

    p = {"PUBLIC_IMAGES": 5000, "BATCH": 128, "LOCAL_EPOCHS": 20, "DISTILL_EPOCHS": 1, "PUBLIC_BATCH": 256}
    # Fashion-MNIST at 20 clients: (60 000 − 5000) / 20 × 0.9 = 2475 images, 20 batches of 128, 20 epochs
    assert client_steps(p, "fashion-mnist", 20) == 400
    assert client_steps(p, "fashion-mnist", 20, public=3000) == 400 + 12  # 3000 public images in batches of 256
    assert client_steps(p, "fashion-mnist", 100) == 4 * 20  # 495 images
    assert client_steps(p, "cifar10", 20, epochs=5) == 16 * 5  # (50 000 − 5000) / 20 × 0.9 = 2025 images
    assert client_steps(p, "emnist-balanced", 20) == 38 * 20  # (112 800 − 5000) / 20 × 0.9 = 4851 images


def test_paper_cost_counts_the_paper_profiles_runs_and_steps(monkeypatch):
    """The cost on the real parameters cell at `paper`, Fashion-MNIST's headline counted by hand."""
    from pflkit.chapters.ktpfl import paper_cost
    from pflkit.paper import parameters

    monkeypatch.delenv("PFLBOOK_DRY", raising=False)
    cost = paper_cost(parameters("ktpfl", "paper"))
    assert cost["datasets"] == ["fashion-mnist", "emnist-balanced", "cifar10"]
    assert cost["clients"] == {"Table 1": 20, "Table 2": [20, 100]} and cost["rounds"] == 30
    assert cost["seeds"] == {"Table 1": 10, "Table 2": 5, "pilots": 3}
    # Fashion-MNIST, Table 1: per split 9 arms (Non-IID_1: the six methods, Local, FedDF's control, the authors' TopK)
    # and 8 (Non-IID_2), 10 seeds each; a client's round: 400 private steps, + 12 public ones for the 5 (4) soft arms
    t1_runs = (9 + 8) * 10
    t1 = ((5 * 412 + 4 * 400) + (4 * 412 + 4 * 400)) * 20 * 30 * 10
    t1 += 2 * 2 * (4 - 1) * 30 * 412 * 20 * 10  # per split KT-pFL and the strongest other run on to 4 × 30 rounds
    # Table 2: 9 methods × 5 seeds at 20 clients (every one a round) and at 100 (10 a round, 495 images: 80 steps)
    t2_runs = 9 * 2 * 5
    t2 = (8 * 400 + 412) * 20 * 30 * 5 + (8 * 80 + 92) * 10 * 30 * 5 + 2 * (4 - 1) * 30 * 400 * 20 * 5
    assert cost["per_dataset"]["fashion-mnist"] == {"runs": t1_runs + t2_runs, "steps": t1 + t2}
    assert (t1_runs + t2_runs, t1 + t2) == (260, 90_246_000)
    assert cost["runs"] == sum(c["runs"] for c in cost["per_dataset"].values()) + cost["notes"]["runs"]
    assert cost["steps"] == sum(c["steps"] for c in cost["per_dataset"].values()) + cost["notes"]["steps"]
    assert cost["per_dataset"]["emnist-balanced"]["steps"] > cost["per_dataset"]["fashion-mnist"]["steps"]
    assert cost["note"] and cost["runs"] == 1210


def test_dry_fields_only_in_the_paper_profiles_dry_run(monkeypatch):
    from pflkit.chapters.ktpfl import dry_fields

    monkeypatch.delenv("PFLBOOK_DRY", raising=False)
    assert dry_fields("paper") == {} and dry_fields("book") == {}
    monkeypatch.setenv("PFLBOOK_DRY", "1")
    assert dry_fields("paper") == {"val_fraction": 0.5} and dry_fields("smoke") == {} and dry_fields("book") == {}


def test_the_dry_runs_table2_runs_the_papers_first_count(monkeypatch):
    """The dry run's Table 2 (its parameters cell's ``dry=``): the paper's first count, every client a round (the
    larger count's code runs at `book` from the committed store); smoke's, book's and paper's stay as they were."""
    from pflkit.chapters.ktpfl import sampling_rate
    from pflkit.paper import parameters

    monkeypatch.setenv("PFLBOOK_DRY", "1")
    counts = parameters("ktpfl", "paper")["TABLE2_CLIENT_COUNTS"]
    assert counts == [20] and sampling_rate(20) == 1.0 and sampling_rate(100) == 0.1
    monkeypatch.delenv("PFLBOOK_DRY")
    assert parameters("ktpfl", "paper")["TABLE2_CLIENT_COUNTS"] == [20, 100]
    assert parameters("ktpfl", "book")["TABLE2_CLIENT_COUNTS"] == [20, 100]
    assert parameters("ktpfl", "smoke")["TABLE2_CLIENT_COUNTS"] == [4]


def test_the_paper_profiles_models_take_each_paper_datasets_images(monkeypatch):
    """The dry run narrows the architectures (their widths are a budget) and runs Table 2 on smoke's model; the
    full-width ones of the `paper` profile and Table 2's CNN build and classify each headline dataset's images here."""
    import torch

    from pflkit.models import build_model
    from pflkit.paper import parameters

    monkeypatch.delenv("PFLBOOK_DRY", raising=False)
    p = parameters("ktpfl", "paper")
    shapes = {"fashion-mnist": ((1, 28, 28), 10), "emnist-balanced": ((1, 28, 28), 47), "cifar10": ((3, 32, 32), 10)}
    assert list(p["PUBLIC_SETS"]) == list(shapes) and p["HOMOG_MODEL"] == "fedavg-cnn"
    assert p["ARCHS"] == "lenet,alexnet-64,resnet18-64,shufflenet_v2_x1_0"
    with torch.no_grad():
        for shape, k in shapes.values():
            for name in [*p["ARCHS"].split(","), p["HOMOG_MODEL"]]:
                assert build_model(name, shape, k).eval()(torch.zeros(2, *shape)).shape == (2, k)
    monkeypatch.setenv("PFLBOOK_DRY", "1")
    assert parameters("ktpfl", "paper")["ARCHS"] == parameters("ktpfl", "smoke")["ARCHS"]  # the dry run's
    assert parameters("ktpfl", "paper")["HOMOG_MODEL"] == parameters("ktpfl", "smoke")["HOMOG_MODEL"]  # its Table 2's


def test_per_fedavgs_weak_mark_is_read_at_equal_model_updates():
    from pflkit.sweeps import SweepResult

    def rec(curve):  # accuracy (%) at rounds 2, 4, ..., 20
        hist = [{"round": 2 * (i + 1), "mean_acc": v / 100} for i, v in enumerate(curve)]
        return {"history": hist, "final": hist[-1]}

    fedavg = [10 * i for i in range(1, 11)]  # 10 % ... 100 %: 50 % at round 10, half its 20 rounds
    records = {("FedAvg", s): rec(fedavg) for s in (0, 1)} | {("Per-FedAvg", s): rec([70.0] * 10) for s in (0, 1)}
    why = half_updates_why(SweepResult(records, ["FedAvg", "Per-FedAvg"], [0, 1, 2]), 20)
    assert "round 10 of 20" in why["Per-FedAvg"] and "70.0 % against FedAvg's 50.0 %" in why["Per-FedAvg"]
    assert "2 seeds" in why["Per-FedAvg"]  # seed 2 ran neither arm
    assert half_updates_why(SweepResult({}, ["FedAvg"], [0]), 20) == {}


def test_the_coefficients_pilot_reads_in_words():
    import pandas as pd

    from pflkit.chapters.ktpfl_page import c_moved_view

    t = pd.DataFrame({"max |c − 1/N| after the pilot": [0.95, 0.123456]},
                     index=["KT-pFL η₃, ρ · c_lr=0.01, rho=0.1 (seed 0)", "KT-pFL (parameters) η₃, ρ · c_lr=10, rho=0.5 (seed 0)"])  # fmt: skip
    v = c_moved_view(t)
    assert list(v.index) == ["KT-pFL: η₃ = 0.01, ρ = 0.1 (seed 0)", "KT-pFL (parameters): η₃ = 10, ρ = 0.5 (seed 0)"]
    assert v.iloc[1, 0] == 0.12 and v.index.name == "pilot arm"


def test_an_arm_below_fedavg_where_each_client_trains_twice_is_explained_by_its_budget():
    from pflkit.chapters.ktpfl_claims import undertrained_why

    hist = [(r, 0.3 + 0.02 * r) for r in range(1, 21)]
    res = sweep_result({"FedAvg": [record(0.6, method="fedavg", rounds=20, hist=hist, val=None)] * 3,
                        "pFedMe": [record(0.5, method="pfedme", rounds=20, hist=hist)] * 3})  # fmt: skip
    for r in res.records.values():
        r["config"] = r["config"] | {"sample_rate": 0.1}
        r["improving"] = 3.0  # the stored gain over the last fifth: still rising
    why = undertrained_why(res, 100)
    assert list(why) == ["pFedMe"] and "each client trains about 2 times in 20 rounds" in why["pFedMe"]
    assert "(FedAvg " in why["pFedMe"] and "3 seeds" in why["pFedMe"]
    assert undertrained_why(sweep_result({"pFedMe": [record(0.5)]}), 100) == {}  # no FedAvg: nothing to say
    falling = sweep_result({"FedAvg": [record(0.6, method="fedavg", rounds=20, hist=hist)] * 3,
                            "Per-FedAvg": [record(0.2, rounds=20, hist=hist[::-1])] * 3})  # fmt: skip
    for (arm, _), r in falling.records.items():
        r["config"] = r["config"] | {"sample_rate": 0.1}
        r["improving"] = 3.0 if arm == "FedAvg" else -2.0
    assert undertrained_why(falling, 100) == {}  # an arm that falls is not under-trained


def test_per_fedavg_at_one_minibatch_a_client_is_explained_by_its_step_count_control():
    from pflkit.chapters.ktpfl import STEPS_CTL
    from pflkit.chapters.ktpfl_claims import steps_why

    res = sweep_result({"FedAvg": [record(0.52), record(0.58), record(0.56)], "Per-FedAvg": [record(0.16)] * 3})
    for r in res.records.values():
        r["config"] = r["config"] | {"local_epochs": 3, "batch_size": 128}
    ctl = sweep_result({STEPS_CTL: [record(0.55), record(0.51)]})  # two seeds: seed 2 has no control
    why = steps_why(res, ctl, 100, 54.0)["Per-FedAvg"]
    assert "a client with about 54 training images (minibatches of 128) makes 1 model update a round" in why
    assert "where FedAvg makes 3; at twice the local epochs" in why
    assert (
        "it reads 53.0 % against FedAvg's 55.0 % (16.0 % at 3 epochs): the updates account for 95 % of the gap" in why
    )
    ahead = steps_why(res, sweep_result({STEPS_CTL: [record(0.69)] * 3}), 100, 54.0)["Per-FedAvg"]
    assert "the updates account for the whole gap (Table 2, 100 clients, 3 seeds)" in ahead
    assert "(Table 2, 100 clients, 2 seeds)" in why
    weak = sweep_result({STEPS_CTL: [record(0.30), record(0.30)]})  # closes less than half of the gap: not the reason
    assert steps_why(res, weak, 100, 54.0) == {} and steps_why(res, sweep_result({STEPS_CTL: []}), 100, 54.0) == {}
