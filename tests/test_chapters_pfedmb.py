"""The pFedMB chapter's probes and measurements (pflkit.chapters.pfedmb)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from pflkit import data
from pflkit.chapters.pfedmb import (
    PAIR_DATA,
    PFEDMB,
    alpha_data_rho,
    alpha_follows_data,
    amp_probe,
    amp_regime,
    amp_state,
    arm,
    cell_text,
    chosen_text,
    collaboration,
    derived_claim,
    diverged_note,
    eval_every,
    final_alphas,
    grid_used,
    is_our_check,
    kept_share,
    main_run,
    mb_label,
    pair_alpha,
    pair_diffs,
    pair_scores,
    paper_cost,
    paper_diff,
    per_seed,
    pilot_configs,
    pilot_summary,
    pilot_table,
    run_steps,
    seed_table,
    setting_arms,
    setting_base,
    strength,
    t2_diffs,
    table2_probe,
    value_words,
    worst_gap,
)
from pflkit.claims import words_text
from pflkit.engine import Federation, run
from pflkit.methods import display_name
from tests.conftest import tiny_config


class Result:
    """The parts of a SweepResult the functions read: per-arm values by seed, probes, records."""

    def __init__(self, values=None, probes=None, records=None, history=None):
        self._values, self._probes, self._history = values or {}, probes or {}, history
        self.records = records or dict.fromkeys(self._probes)
        self.seeds = sorted({s for _, s in self.records})

    def values(self, a, metric="mean_acc"):
        return pd.Series(self._values[a, metric])

    def paired(self, a, b):
        va, vb = self.values(a), self.values(b)
        common = va.index.intersection(vb.index)
        return (va[common] - vb[common]).sort_index()

    def probes(self, a, s):
        return self._probes[a, s]

    def history(self):
        return self._history

    def budget(self, *arms):
        return False

    def __getitem__(self, pair):
        return self.records[pair]


def test_eval_every_evaluates_the_start_of_the_last_fifth_and_main_run_sets_the_budget():
    assert eval_every(40) == 32 and eval_every(5) == 4 and eval_every(1) == 1
    cfg = main_run(tiny_config(), 40)
    assert (cfg.rounds, cfg.eval_every) == (40, 32)
    assert main_run(tiny_config(), 40, 1).eval_every == 1


def test_setting_arms_turn_visits_into_rounds_and_keep_the_picks():
    setting = dict(partition="dirichlet", clients=10, sample_rate=0.2, alpha=0.4)
    base = setting_base(setting, 2, dict(dataset="digits", model="mlp", lr=0.05))
    assert (base.rounds, base.eval_every, base.sample_rate, base.clients) == (10, 8, 0.2, 10)
    picks = {PFEDMB: tiny_config(method="pfedmb", lr=0.1, options={"branches": 5, "alpha_lr": 1.0}),
             display_name("fedamp"): tiny_config(method="fedamp"), display_name("fedavg"): tiny_config(method="fedavg")}  # fmt: skip
    arms = setting_arms("S", setting, picks, [2, 5], ["fedamp", "fedavg"], 2, amp_evals=10, ifca_evals=10)
    assert list(arms) == [arm("S", mb_label(5)), arm("S", mb_label(2)), arm("S", "FedAMP"), arm("S", "FedAvg")]
    assert arm("S", mb_label(2)) == "S · pFedMB B=2"
    mb2 = arms[arm("S", mb_label(2))]
    assert mb2.options == {"branches": 2, "alpha_lr": 1.0} and mb2.lr == 0.1  # the pick, at B = 2
    assert all(c.rounds == 10 and c.partition == "dirichlet" and c.sample_rate == 0.2 for c in arms.values())
    assert arms["S · FedAMP"].eval_every == 1 and arms["S · FedAvg"].eval_every == 8  # FedAMP: 10 evaluations


def test_pair_scores_separate_pairs_on_their_own_branches():
    a = np.array([[0.9, 0.1, 0.0], [0.8, 0.2, 0.0], [0.0, 0.1, 0.9], [0.1, 0.0, 0.9]])
    s = pair_scores(a, np.array([0, 0, 1, 1]), concentrated=0.5)
    assert s["within"] > 0.9 > 0.2 > s["across"]
    assert (s["pairs on one branch"], s["distinct branches"]) == (2, 2)
    assert s["mean max α"] == pytest.approx(0.875)
    assert pair_scores(a, np.array([0, 0, 1, 1]), concentrated=0.85)["pairs on one branch"] == 1  # 0.8 < 0.85
    same = pair_scores(np.full((4, 3), 1 / 3), np.array([0, 0, 1, 1]), concentrated=0.5)
    assert same["within"] == pytest.approx(1) and same["across"] == pytest.approx(1) and same["distinct branches"] == 1
    last = pd.Series([0.5, 0.1, 0.2], index=pd.MultiIndex.from_tuples([("eq5", 1), ("eq5", 0), ("eq6", 0)],
                                                                       names=["variant", "seed"]))  # fmt: skip
    assert per_seed(last, "eq5", [0, 1, 2]).tolist()[:2] == [0.1, 0.5] and np.isnan(per_seed(last, "eq5", [0, 1, 2])[2])


def test_collaboration_rows_are_convex_and_follow_the_branches():
    n = np.array([10.0, 30.0, 20.0, 40.0])
    a = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])  # two pairs on two branches
    c = collaboration(a, n, True)
    assert np.allclose(c.sum(1), 1)
    assert np.allclose(c[:2, :2], [[0.25, 0.75], [0.25, 0.75]]) and np.allclose(c[:2, 2:], 0)  # own pair, by n
    assert np.allclose(collaboration(a, n, False), np.tile(n / n.sum(), (4, 1)))  # eq. 6: everybody by n
    mixed = collaboration(np.array([[0.6, 0.4], [0.3, 0.7], [0.5, 0.5], [0.9, 0.1]]), n, True)
    assert np.allclose(mixed.sum(1), 1) and (mixed > 0).all()


def test_alpha_follows_data_is_one_when_alpha_mirrors_the_label_mix():
    cfg = tiny_config(partition="pathological", classes_per_client=3, clients=6)
    counts = {}
    for s in (0, 1):
        fed = Federation.from_config(dataclasses.replace(cfg, seed=s))
        counts[s] = fed.partition.class_counts(fed.ds.y_train.cpu().numpy())
    # α as clients × 1 layer × classes, equal to the class counts up to scale: the same cosines
    probes = {("A", s): {1: None, 3: (2 * c[:, None, :]).tolist()} for s, c in counts.items()}
    rho = alpha_follows_data(Result(probes=probes), "A", cfg)
    assert list(rho.index) == [0, 1] and np.allclose(rho, 1)
    assert alpha_data_rho(counts[0], counts[0]) == pytest.approx(1)
    mix = [[1, 0], [1, 0.1], [0, 1]]  # client pairs (0, 1), (0, 2), (1, 2) rank 3, 1, 2 by cosine
    assert alpha_data_rho([[[0, 1]], [[1, 0.1]], [[1, 0]]], mix) == pytest.approx(0.5)  # α's rank 2, 1, 3
    assert final_alphas(Result(probes=probes), "A", [1, 0]) == [probes["A", 1][3], probes["A", 0][3]]


def test_kept_share_counts_the_branch_bytes_above_the_threshold():
    sizes = [1, 3]  # one branch's parameters in each of two layers
    per_layer = [[[0.6, 0.4], [0.1, 0.9]]]  # one client: layers × branches
    assert kept_share(per_layer, 0.0, sizes) == 1.0
    assert kept_share(per_layer, 0.95, sizes) == 0.0
    assert kept_share(per_layer, 0.5, sizes) == pytest.approx((1 + 3) / 8)
    assert kept_share(per_layer, 0.3, sizes) == pytest.approx((2 + 3) / 8)
    assert kept_share([[[0.6, 0.4]]], 0.5, sizes) == pytest.approx(0.5)  # one α row shared by the layers
    assert kept_share([[[0.6, 0.4]], [[0.2, 0.8]]], 0.7, sizes) == pytest.approx(0.25)  # mean over clients


def test_seed_table_and_worst_gap_use_the_chosen_b():
    rows = []
    for setting, accs in (("S1", {"FedAvg": 80, "Local": 70, mb_label(2): 60, mb_label(5): 82}),
                          ("S2", {"FedAvg": 75, "Local": 79, mb_label(2): 78, mb_label(5): 50})):  # fmt: skip
        for label, acc in accs.items():
            rows += [{"arm": arm(setting, label), "seed": s, "mean_acc": acc + s} for s in (0, 1)]
    finals = pd.DataFrame(rows)
    chosen = {"S1": 5, "S2": 2}
    t = seed_table(finals, "mean_acc", ["S1", "S2"], others=["FedAvg", "Local"], chosen_b=chosen)
    assert list(t.columns) == ["FedAvg", "Local", PFEDMB] and t.loc[("S2", 1), PFEDMB] == 79
    gap = worst_gap(finals, "mean_acc", ["S1", "S2"], others=["FedAvg", "Local"], chosen_b=chosen)
    assert gap.loc[0].to_dict() == {"FedAvg": 4, "Local": 12, PFEDMB: 1}  # worst of S1's and S2's gaps
    assert (gap.loc[0] == gap.loc[1]).all()  # the same shift on every arm


def test_pair_diffs_and_t2_diffs_are_paired_differences():
    v = {("E5", "mean_acc"): {0: 80.0, 1: 82.0, 2: 81.0}, ("E6", "mean_acc"): {0: 79.0, 1: 80.0},
         ("FedAvg", "mean_acc"): {0: 70.0, 1: 71.0, 2: 72.0}, ("Local", "mean_acc"): {0: 75.0, 1: 75.0, 2: 75.0},
         ("E5 alt", "mean_acc"): {0: 50.0}, ("E6 alt", "mean_acc"): {0: 52.0}}  # fmt: skip
    hist = pd.DataFrame([{"arm": a, "seed": s, "round": r, "mean_acc": acc + r}
                         for a, acc in (("E5", 60.0), ("E6", 55.0), ("FedAvg", 50.0)) for s in (0, 1) for r in (1, 2)])  # fmt: skip
    d = pair_diffs(Result(values=v, history=hist), eq5="E5", eq6="E6", alt=" alt")
    assert d["pFedMB − FedAvg"].tolist() == [10.0, 11.0, 9.0] and d["eq. 5 − eq. 6"].tolist() == [1.0, 2.0]
    assert d["eq. 5 − eq. 6, over the rounds"].tolist() == [5.0, 5.0]
    assert d["pFedMB − FedAvg, over the rounds"].tolist() == [10.0, 10.0]
    assert d["eq. 5 − eq. 6 alt"].tolist() == [-2.0] and d["pFedMB − Local"].tolist() == [5.0, 7.0, 6.0]
    claims = {"one": ([(1, "E5", "FedAvg")], None), "behind": ([(1, "E5", "FedAvg"), (-1, "E5", "Local")], 1.0)}
    t2 = t2_diffs(Result(values=v), claims)
    assert t2["one"].tolist() == [10.0, 11.0, 9.0]
    assert t2["behind"].tolist() == [5.0, 4.0, 3.0]  # (E5 − FedAvg) − (E5 − Local) = Local − FedAvg
    assert t2_diffs(Result(values=v), {"same": ([(1, "E5", "E5")], None)})["same"].tolist() == [0.0, 0.0, 0.0]


def test_pilot_summary_and_chosen_text():
    t = pd.DataFrame({"method": ["FedAvg", "FedAvg", "pFedMB, α"], "setting": ["lr=0.01", "lr=0.1", "alpha_lr=1"],
                      "val_mean_acc": [70.0, 75.0, 80.0], "chosen": ["", "yes", "yes"],
                      "at the grid's edge": ["", "yes", ""]}).set_index(["method", "setting"])  # fmt: skip
    s = pilot_summary({"pairs": t})
    assert list(s.index) == [("pairs", "FedAvg"), ("pairs", "pFedMB, α")]
    assert (
        s.loc[("pairs", "FedAvg"), "chosen"] == "lr=0.1" and s.loc[("pairs", "FedAvg"), "at the grid's edge"] == "yes"
    )
    assert s.loc[("pairs", "FedAvg"), "validation accuracy (%) per value"] == "lr=0.01: 70.0 | lr=0.1: 75.0"
    mb = tiny_config(method="pfedmb", lr=0.03, momentum=0.9,
                     options={"alpha_lr": 1.0, "alpha_momentum": -1.0, "scale_init": True})  # fmt: skip
    chosen = {"FedAvg": tiny_config(method="fedavg", lr=0.1), PFEDMB: mb,
              "FedAMP": tiny_config(method="fedamp", lr=0.01, options={"sigma": 10.0})}  # fmt: skip
    text = chosen_text(chosen)
    assert text == ("FedAvg η = 0.1; FedAMP η = 0.01; pFedMB: η_W = 0.03, η_α = 1 with momentum 0.9 on α, "
                    "branches × √B; FedAMP σ = 10")  # fmt: skip
    flat = {PFEDMB: dataclasses.replace(mb, options={**mb.options, "alpha_momentum": 0.0, "scale_init": False})}
    assert chosen_text(flat) == "pFedMB: η_W = 0.03, η_α = 1 without momentum on α, branches as drawn"


def test_derived_claim_paper_diff_and_the_notes():
    row = derived_claim("a beats b", [2.0, 2.5, 3.0, 2.2], Result(), ["a", "b"], paper="+1")
    assert row["verdict"] == "reproduces" and row["_v"].n == 4 and row["paper"] == "+1"
    assert derived_claim("a beats b", [0.1, -0.1, 0.05], Result(), ["a"])["verdict"] == "no difference"  # ± 1 point
    assert derived_claim("a beats b", [0.1, -0.1, 0.05], Result(), ["a"], unit="ρ")["verdict"] == "inconclusive"
    assert paper_diff({"a": 80.0, "b": 78.5}, "a", "b") == "+1.50 (80.00 vs 78.50)"
    assert paper_diff({"a": 80.0}, "a", "b") == ""
    kw = dict(self_local=0.9, self_average=0.1, peak_flat=1.5)
    v = {"self": 0.95, "peak": 1.2, "d2": 3.0, "σ (chosen)": 1.0}
    assert "close to Local training" in amp_state(v, **kw)
    assert "plain average" in amp_state({**v, "self": 0.05}, **kw)
    assert "plain average" in amp_state({**v, "self": 0.05, "peak": float("nan")}, **kw)
    middle = amp_state({**v, "self": 0.5}, **kw)
    assert "between 0.1 and 0.9" in middle and "σ = 1" in middle
    res = Result(values={("S · pFedMB B=20", "diverged"): {0: False, 1: True, 2: True},
                         ("S · FedAvg", "diverged"): {0: False}},
                 records={("S · pFedMB B=20", 1): {"config": {"lr": 0.03}}})  # fmt: skip
    assert diverged_note(res, "S · FedAvg", {}) == ""
    note = diverged_note(res, "S · pFedMB B=20", {"S · pFedMB B=20": "lr 0.1 -> 0.03: diverged"})
    assert note.startswith("pFedMB B=20 diverged on seeds 1 and 2") and "at learning rate 0.03" in note
    assert note.endswith("(learning rate 0.1 -> 0.03)")


def test_probes_record_alpha_xi_and_clusters_in_their_methods():
    seen = {}
    for method, opts in (("pfedmb", {"branches": 3, "shared_alpha": True}), ("pfedmb", {"branches": 2}),
                         ("fedamp", {"sigma": 1.0}), ("ifca", {"clusters": 2}), ("fedavg", {})):  # fmt: skip
        cfg = tiny_config(method=method, rounds=2, options=opts)
        key = (method, opts.get("shared_alpha", False))
        amp = amp_probe if method == "fedamp" else lambda *a: None  # FedAMP's arms only: its server's record
        run(cfg, Federation.from_config(cfg), on_round=lambda r, row, s, cl, k=key, amp=amp: seen.update(
            {(k, r): (pair_alpha(r, row, s, cl), table2_probe(r, row, s, cl), amp(r, row, s, cl))}))  # fmt: skip
    shared, per_layer = ("pfedmb", True), ("pfedmb", False)
    a = np.array(seen[shared, 1][0])
    assert a.shape == (4, 3) and np.allclose(a.sum(1), 1)  # every client's shared α after round 1
    assert seen[per_layer, 1][0] is None  # per-layer α: not Figure 3's
    assert seen[per_layer, 1][1] is None  # α after the last round only
    al = np.array(seen[per_layer, 2][1])
    assert al.ndim == 3 and al.shape[0] == 4 and al.shape[2] == 2 and np.allclose(al.sum(-1), 1)
    amp1, amp2 = seen[("fedamp", False), 1][2], seen[("fedamp", False), 2][2]
    assert seen[("fedamp", False), 1][1] == amp1  # before the last round: table2_probe's record
    assert 0 <= amp1["self_min"] <= amp1["self"] <= amp1["self_max"] <= 1 and amp1["d2"] >= 0
    assert "self_trace" not in amp1 and "self_trace" not in seen[("fedamp", False), 2][1]
    assert len(amp2["self_trace"]) == 2 and all(lo <= m <= hi for lo, m, hi in amp2["self_trace"])
    assert seen[("ifca", False), 1][1]["models"] == 2  # every evaluated round
    ifca = seen[("ifca", False), 2][1]
    assert ifca["models"] == 2 and len(ifca["clusters"]) == 4 and set(ifca["clusters"]) <= {0, 1}
    assert seen[("fedavg", False), 2] == (None, None, None)
    assert pair_alpha.__qualname__ == "pair_alpha" and table2_probe.__qualname__ == "table2_probe"
    assert amp_probe.__qualname__ == "amp_probe"  # the stored runs' probe names


def test_the_page_words_for_values_seeds_and_tallies():
    assert value_words("alpha_lr=0.1") == "η_α = 0.1" and value_words("lr=0.03") == "η = 0.03"
    assert value_words("sigma=10") == "σ = 10" and value_words("K=3") == "K = 3" and value_words("x") == "x"
    v = pd.Series({0: 80.0, 1: 82.0, 2: 84.0, 3: 10.0})
    assert cell_text(v, [0, 1, 2]) == "82.0 ± 5.0"  # seed 3 left out; t(0.975, 2) × 2 / √3 = 4.97
    assert cell_text(v, [0, 1, 2, 5]) == "82.0 ± 5.0 (3 seeds)" and cell_text(v, [7]) == "—"
    worst = pd.Series({0: 50.0, 1: 60.0, 2: float("nan"), 3: 0.0})  # seed 2 without per-client accuracies
    assert cell_text(v, [0, 1, 2], worst) == "82.0 ± 5.0 (55)"  # the worst 10 % of clients, over the cell's seeds
    assert cell_text(v, [0, 1, 2], worst * float("nan")) == "82.0 ± 5.0"  # none measured: no brackets
    rows = [{"claim": "Table I: a beats b", "verdict": "reproduces", "kind": "claim"},
            {"claim": "Table I with x (our diagnostic): a beats b", "verdict": "reproduces", "kind": "claim"},
            {"claim": "Mechanism: α follows the data", "verdict": "no difference", "kind": "mechanism", "flags": ["mechanism inert"]},
            {"claim": "Table II: c beats d", "verdict": "contradicted", "kind": "claim"},
            {"claim": "Table II: e beats f", "verdict": "reproduces", "kind": "claim"}]  # fmt: skip
    assert [is_our_check(r) for r in rows] == [False, True, True, False, False]
    assert words_text([r for r in rows if not is_our_check(r)]) == "2 reproduces, 1 contradicted"
    assert (
        words_text([r for r in rows if is_our_check(r)]) == "1 reproduces, 1 no difference (flagged: 1 mechanism inert)"
    )
    assert words_text([]) == "none"
    assert [strength(x) for x in (0.08, -0.16, 0.3, 0.49, 0.9)] == [
        "very weak",
        "weak",
        "moderate",
        "moderate",
        "strong",
    ]
    kw = dict(self_local=0.9, self_average=0.1, peak_flat=1.5)
    assert amp_regime({"self": 0.95, "peak": 1.2}, **kw) == "local"
    assert amp_regime({"self": 0.0, "peak": 1.03}, **kw) == "average"
    assert amp_regime({"self": 0.0, "peak": float("nan")}, **kw) == "average"
    assert amp_regime({"self": 0.0, "peak": 3.0}, **kw) == "" and amp_regime({"self": 0.5, "peak": 1.0}, **kw) == ""
    mb = tiny_config(method="pfedmb", options={"alpha_momentum": 0.0, "scale_init": True})
    assert grid_used("FedAMP, σ", mb) and grid_used(f"{PFEDMB}, no momentum on α", mb)
    assert grid_used(f"{PFEDMB}, branches × √B", mb) and not grid_used(f"{PFEDMB}, branches as drawn", mb)
    assert not grid_used(f"{PFEDMB}, momentum on α", mb)
    mom = dataclasses.replace(mb, options={"alpha_momentum": -1.0, "scale_init": False})
    assert grid_used(f"{PFEDMB}, momentum on α", mom) and grid_used(f"{PFEDMB}, branches as drawn", mom)


def test_pilot_table_shows_each_value_in_words_with_its_two_seeds():
    from pflkit.tuning import Tuning

    pilot = Tuning(
        by="val_mean_acc",
        grids={"FedAvg": {"FedAvg · lr=0.01": None, "FedAvg · lr=0.03": None, "FedAvg · lr=0.1": None}},
        chosen={"FedAvg": "FedAvg · lr=0.1"},
        result=Result(values={("FedAvg · lr=0.01", "val_mean_acc"): {0: 70.0, 1: 72.0},
                                ("FedAvg · lr=0.03", "val_mean_acc"): {0: 75.0, 1: 79.0},
                                ("FedAvg · lr=0.1", "val_mean_acc"): {0: 80.0, 1: 81.0},
                                ("FedAvg · lr=0.01", "diverged"): {0: False, 1: False},
                                ("FedAvg · lr=0.03", "diverged"): {0: False, 1: True},
                                ("FedAvg · lr=0.1", "diverged"): {0: False, 1: False}}),
    )  # fmt: skip
    t = pilot_table(pilot)
    assert list(t.index) == [("FedAvg", "η = 0.01"), ("FedAvg", "η = 0.03"), ("FedAvg", "η = 0.1")]
    assert t["val_mean_acc"].tolist() == ["71.0 (70.0, 72.0)", "diverged", "80.5 (80.0, 81.0)"]
    assert t["chosen"].tolist() == ["", "", "yes"] and t["at the grid's edge"].tolist() == ["", "", "yes"]
    s = pilot_summary({"pairs": t})
    assert s.loc[("pairs", "FedAvg"), "validation accuracy (%) per value"] == (
        "η = 0.01: 71.0 (70.0, 72.0) | η = 0.03: diverged | η = 0.1: 80.5 (80.0, 81.0)"
    )
    assert s.loc[("pairs", "FedAvg"), "chosen"] == "η = 0.1"


def test_table_views_group_table2_and_rename_table3():
    from pflkit.chapters.pfedmb import table2_view, table3_view

    t2 = pd.DataFrame(
        {"Dirichlet 0.4 / 15 clients · ours": ["86.2 ± 2.0", "—"],
         "Dirichlet 0.4 / 15 clients · paper CIFAR10": [67.54, np.nan],
         "random 2 classes / 15 clients (no headline) · ours": ["97.8 ± 1.0", "96.5 ± 4.8"],
         "random 2 classes / 15 clients (no headline) · paper CIFAR10": [90.01, np.nan]},
        index=["Local", "pFedMB (B = 5)"],
    )  # fmt: skip
    v = table2_view(t2)
    assert list(v.columns) == [
        ("Dirichlet 0.4, 15 clients (CIFAR10)", "ours"),
        ("Dirichlet 0.4, 15 clients (CIFAR10)", "paper"),
        ("random 2 classes, 15 clients (CIFAR10)", "ours"),
        ("random 2 classes, 15 clients (CIFAR10)", "paper"),
    ]
    assert v.iloc[0].tolist() == ["86.2\u00a0±\u00a02.0", "67.54", "97.8\u00a0±\u00a01.0", "90.01"]
    assert v.iloc[1].tolist() == ["—", "—", "96.5\u00a0±\u00a04.8", "—"]
    t3 = pd.DataFrame({"B chosen by validation": [10], "choices": ["2, 5, 10"], "paper's tuned B": [7],
                       "paper's setting": ["CIFAR10 / Dirichlet 0.4 / 15 clients"]},
                      index=pd.Index(["Dirichlet 0.4 / 15 clients"], name="setting (ours, FMNIST)"))  # fmt: skip
    v3 = table3_view(t3)
    assert list(v3.columns) == ["B (ours, validation)", "grid", "B (paper)", "the paper's setting"]
    assert v3.index.name == "setting (ours, Fashion-MNIST)" and v3.iloc[0, 0] == 10


def test_setup_rows_say_ours_beside_the_papers():
    from pflkit.chapters.pfedmb import setup_rows

    rows = setup_rows(train_images=6000, data_fraction=0.1, width="8", branch_choices=[2, 5, 10], pair_clients=10,
                      pair_branches=5, settings=["Dirichlet 0.4 / 15 clients"], epochs=1, paper_epochs=5, batch=64,
                      momentum=0.9, pair_rounds=40, visits=80, dirichlet_visits=160, fig5_visits=100, seeds=[0, 1, 2],
                      cap=10)  # fmt: skip
    card = {what: (ours, paper) for what, ours, paper in rows}
    assert list(card) == ["Data", "Splits", "Model", "Training", "Tuning", "Seeds"]
    assert card["Data"][0] == "Fashion-MNIST, 6,000 (0.1 of the 60,000) training images"
    assert "8 and 16 filters" in card["Model"][0] and "among 2, 5, 10" in card["Model"][0]
    assert "E = 1" in card["Training"][0] and "80 visits a client (160 in Dirichlet 0.4)" in card["Training"][0]
    assert (
        card["Training"][1].startswith("E = 5")
        and card["Seeds"][0] == "0, 1, 2, then as many as a claim's plan asks (at most 10)"
    )
    everything = setup_rows(train_images=None, data_fraction=1.0, width="8", branch_choices=[2], pair_clients=10,
                            pair_branches=5, settings=[], epochs=5, paper_epochs=5, batch=64, momentum=0.9,
                            pair_rounds=100, visits=100, dirichlet_visits=100, fig5_visits=100, seeds=[0], cap=10)  # fmt: skip
    assert everything[0][1] == "Fashion-MNIST, all 60,000 training images"
    assert "Dirichlet" not in everything[3][1]  # the same visits everywhere


def test_short_claims_bullets_and_the_compact_table():
    from pflkit.chapters.pfedmb import Compact, mechanism_line, short_claim
    from pflkit.pages import claim_bullets

    assert short_claim("Table II, X: pFedMB beats the best other method (FedAvg, on validation)") == (
        "Table II, X: pFedMB beats the best other method"
    )
    assert short_claim("Table I: pFedMB beats FedAvg") == "Table I: pFedMB beats FedAvg"
    assert short_claim("A (±1) to B (C (nested), D)") == "A (±1) to B" and short_claim("(all)") == "(all)"
    rows = [
        {"claim": "Table I: a beats b (mean over rounds)", "verdict": "reproduces", "flags": ["saturated"],
         "ours (a − b, 95 % CI)": "+2.2 [+0.8, +3.5] (7 seeds)", "paper": "+0.4", "notes": ""},
        {"claim": "Table III: many classes need fewer branches", "verdict": "not tested", "flags": [],
         "ours (a − b, 95 % CI)": "not testable: 10 classes", "paper": "B = 3", "notes": "a note"},
    ]  # fmt: skip
    bullets = claim_bullets(rows).splitlines()
    assert (
        bullets[0]
        == "* Table I: a beats b (mean over rounds): **reproduces** · *saturated*, +2.2 [+0.8, +3.5] (7 seeds)."
    )
    assert bullets[1] == "* Table III: many classes need fewer branches: **not tested**, not testable: 10 classes."
    table = pd.DataFrame(
        {"paper": ["+0.4", "B = 3"], "ours (a − b, 95 % CI)": [r["ours (a − b, 95 % CI)"] for r in rows],
         "verdict": ["reproduces · saturated", "not tested"], "notes": ["", "a note"]},
        index=pd.Index([r["claim"] for r in rows], name="claim"),
    )  # fmt: skip
    c = Compact(table, "in full")
    shown = c.shown()
    assert list(shown.index) == ["Table I: a beats b", "Table III: many classes need fewer branches"]
    assert shown["ours (a − b, 95 % CI)"].tolist() == ["+2.2 [+0.8,\u00a0+3.5]", "not testable: 10 classes"]
    assert shown["seeds"].tolist() == ["7", "—"] and shown["verdict"].tolist() == table["verdict"].tolist()
    html = c._repr_html_()
    assert html.split("<details>")[0].count("<tr>") == 3 and "<details><summary>in full</summary>" in html
    assert "a note" in html.split("<details>")[1] and "a note" not in html.split("<details>")[0]
    # a 90 % interval keeps its level beside ours, its seeds go to their column; a run short of its plan says so
    levels = table.assign(
        **{"ours (a − b, 95 % CI)": ["-0.9 [-1.5, -0.3] (90 %, 10 seeds)", "+1.0 (5 of 10 planned seeds)"]}
    )
    shown = Compact(levels, "t").shown()
    assert shown["seeds"].tolist() == ["10", "5 of 10 planned"]
    assert shown["ours (a − b, 95 % CI)"].tolist() == ["-0.9 [-1.5,\u00a0-0.3]\u00a0(90\u00a0%)", "+1.0"]
    same = Compact(table.rename(index={table.index[1]: "Table I: a beats b (other)"}), "t").shown()
    assert list(same.index) == ["Table I: a beats b (mean over rounds)", "Table I: a beats b (other)"]
    mech = {
        "S1": {"verdict": "reproduces", "flags": []},
        "S2": {"verdict": "no difference", "flags": ["mechanism inert"]},
    }
    line = mechanism_line(mech, {"S1": {"verdict": "underpowered", "flags": []}})
    assert line == (
        "*Our checks.* Clients with similar label mixes get similar α: **reproduces** in S1; **no difference · "
        "mechanism inert** in S2. α-weighted averaging (eq. 5) beats plain averaging (eq. 6): **underpowered** in S1."
    )


def test_eq2_table_holds_in_every_branch_layer_and_the_prose_names():
    import torch

    from pflkit.chapters.pfedmb import PROSE_NAMES, eq2_table
    from pflkit.methods.pfedmb import multi_branch
    from pflkit.models import build_model

    torch.manual_seed(0)
    mb = multi_branch(build_model("lenet", (1, 28, 28), 10, "4"), branches=3, shared_alpha=False, seed=0)
    with torch.no_grad():
        mb.alpha_logits.normal_(std=2.0)
    t = eq2_table(mb, torch.randn(5, 1, 28, 28))
    assert t["kind"].tolist()[:2] == ["conv", "conv"] and t["kind"].tolist()[-1] == "linear"
    assert all(shape[0] == 3 for shape in t["branch tensor"])  # B branches in every layer
    assert (t["max |eq.1 − eq.2|"] < 1e-4).all() and (t["max |output|"] > 0).all()
    assert len(set(PROSE_NAMES)) == len(PROSE_NAMES) and all(n.isupper() for n in PROSE_NAMES)


def test_scale_words_say_whether_the_initial_scale_moves_the_comparison():
    from pflkit.chapters.pfedmb import scale_words

    class V:  # a verdict: its word, and an interval that clears 0 where the word is a direction
        def __init__(self, mean, word):
            self.mean, self.word, self.n = mean, word, 3
            half = abs(mean) / 2 if word in ("reproduces", "contradicted") else abs(mean) + 1
            self.lo, self.hi = mean - half, mean + half

    kw = dict(chosen="branches × √B", other="branches as drawn", shift=5.0, local_high=90.0)
    moved = scale_words(V(1.0, "reproduces"), V(-7.0, "contradicted"), local=98.7, **kw)
    # the intervals without a word: the claims rows carry the words
    assert moved.startswith("Eq. 5 minus eq. 6, paired over the seeds: with the branches × √B **+1.0 points, 95 % CI "
                            "[+0.5, +1.5], 3 seeds**")  # fmt: skip
    assert "8.0 apart, more than 5" in moved and moved.endswith("little for collaboration to add.")
    words = scale_words(V(1.5, "reproduces"), V(1.3, "inconclusive"), local=80.0, **kw)
    assert "only the runs with the branches × √B have an interval" in words and words.endswith("(mean over seeds).")
    words = scale_words(V(1.5, "inconclusive"), V(1.3, "reproduces"), local=80.0, **kw)
    assert "only the runs with the branches as drawn have" in words
    assert "different verdicts" in scale_words(V(1.0, "reproduces"), V(-1.0, "no difference"), local=80.0, **kw)
    assert "does not change the verdict word" in scale_words(V(1.0, "inconclusive"), V(0.5, "inconclusive"),
                                                              local=80.0, **kw)  # fmt: skip


def test_say_wraps_a_printed_note_to_the_column(capsys):
    from pflkit.chapters.pfedmb import say

    say("word " * 40, "end", width=30)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 5 and all(len(x) <= 30 for x in lines) and lines[-1].endswith("end")
    assert lines[1].startswith("  ")  # a wrapped line is indented
    say("a\n\nb")
    assert capsys.readouterr().out == "a\n\nb\n"


# ----------------------------------------------------------------------------- the paper profile


def test_a_settings_own_dataset_replaces_the_training_options_one():
    setting = dict(dataset="cifar100", partition="pathological", clients=15, sample_rate=1.0, classes_per_client=20)
    base = setting_base(setting, 2, dict(dataset="cifar10", model="lenet", lr=0.05))
    assert (base.dataset, base.classes_per_client, base.rounds) == ("cifar100", 20, 2)


def test_the_pairs_dataset_groups_the_classes_two_by_two():
    ds = data.with_pairs(data.load_dataset("digits"), "digits-pairs")
    assert ds.name == "digits-pairs" and ds.coarse_of_class == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert ds.coarse_names == [f"pair {p}" for p in range(5)] and len(ds.y_train) > 0
    assert PAIR_DATA == "cifar10-pairs" and PAIR_DATA in data.dataset_names()


def test_run_steps_count_batches_rounds_clients_and_fine_tuning():
    p = {"DATA_FRACTION": 1.0, "VAL_FRACTION": 0.2, "BATCH": 64, "EPOCHS": 5}
    # CIFAR-10, 15 clients: 40 000 / 15 = 2667 images, 42 batches, 210 a round; 100 rounds, 2 evaluations
    assert run_steps(p, "cifar10", 15, 1.0, 100, evals=2, mb=False) == 100 * 15 * 210 + 2 * 15 * 210 == 321_300
    assert run_steps(p, "cifar10", 15, 1.0, 100, evals=2, mb=True) == 636_300  # E on α, then E on the branches
    # CIFAR-100, 50 clients at 20 %: 800 images, 13 batches, 65 a round; 500 rounds of 10 clients
    assert run_steps(p, "cifar100", 50, 0.2, 500, evals=2, mb=False) == 500 * 10 * 65 + 2 * 50 * 65 == 331_500


def test_pilot_configs_count_every_grid_extended_once():
    p = {"EXTEND": 1, "LR_GRID": [0.01, 0.1], "SIGMA_GRID": [1.0], "ALPHA_LR_GRID": {"a": [1.0], "b": [1.0, 2.0]},
         "BASELINE_GRIDS": {"pfedme": {"personal_lr": [0.1], "lam": [1.0, 5.0]}}}  # fmt: skip
    assert pilot_configs(p, 2) == (2 + 3 + 2 * 3, 2 * 3)  # η_α (2 + 3), pFedMB's two scales × 3 rates; 2 × 3
    assert pilot_configs(p, 8) == (11, 2 + 2 + 3 + 8 * 3)  # FedAMP's σ (1 + 1), pFedMe's (1 + 1, 2 + 1); 8 methods


def test_paper_cost_on_the_real_parameters_counts_by_hand():
    from pflkit.paper import parameters

    p = parameters("pfedmb", "paper")
    c = paper_cost(p)
    assert c["datasets"] == ["cifar10", "cifar100"] and c["clients"] == [10, 15, 50] and c["seeds"]["cap"] == 10
    # Dirichlet 0.4 / 15 clients on CIFAR-10, 100 rounds (50 in the pilot), 210 steps a client a round:
    # pilot, 3 seeds: pFedMB 14 η_α + 2 × 5 rates = 24 configs of 50 × 15 × 420 + 2 × 15 × 210 = 321 300 steps,
    # 63 others (7 σ, 5 + 6 of pFedMe's personal rate and λ, 5 of FedProx's μ, 8 methods × 5 rates) of 50 × 15 × 210
    # + 6 300 = 163 800;
    # runs, 10 seeds: pFedMB at 8 B and the eq. 6 control (636 300 each), six methods at 321 300, FedAMP and
    # IFCA (10 evaluations) at 315 000 + 31 500
    pilot = 72 * 321_300 + 189 * 163_800
    main = 90 * 636_300 + 60 * 321_300 + 20 * 346_500
    assert c["by_part"]["Dirichlet 0.4 / 15 clients"] == (72 + 189 + 170, pilot + main) == (431, 137_566_800)
    # every part: the pairs (102 pilot runs, 6 arms × 10 seeds), four headline settings as above, random 2 classes
    # at 15 clients (8 B) and at 50 (Figure 5's 11 B)
    assert c["by_part"]["pairs"][0] == 162 and c["runs"] == 162 + 4 * 431 + (261 + 80 + 80) + (261 + 110 + 80) == 2758
    assert c["steps"] == sum(s for _, s in c["by_part"].values()) and c["note"]
