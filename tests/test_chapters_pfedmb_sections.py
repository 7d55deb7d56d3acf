"""The pFedMB chapter's sections (pflkit.chapters.pfedmb_sections, pfedmb_pairs, pfedmb_table2 and pfedmb_notes),
one test each, on small synthetic sweeps: the values of the tables, texts, figures and claims rows each section
builds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import pflkit.chapters.pfedmb_glue as sec_glue
import pflkit.chapters.pfedmb_notes as sec_notes
import pflkit.chapters.pfedmb_pairs as sec_pairs
import pflkit.chapters.pfedmb_sections as sec
import pflkit.chapters.pfedmb_table2 as sec_t2
from pflkit.chapters.pfedmb import PFEDMB, PROSE_NAMES, arm, eval_every, mb_label
from pflkit.chapters.pfedmb_pairs import PairPartitions, Table1
from pflkit.chapters.pfedmb_sections import EQ5, EQ6, OTHERS, PAIR_MAIN, Params, Pilot
from pflkit.chapters.pfedmb_table2 import Eq6Control, Table2Arms
from pflkit.claims import mechanism
from pflkit.experiments import MIN_SEEDS, RESOLUTION, SEED_CAP
from pflkit.sweeps import FINAL_METRICS, SweepResult
from pflkit.verdicts import verdict
from tests.conftest import tiny_config

S15, K15, R15 = "Dirichlet 0.4 / 15 clients", "random 3 classes / 15 clients", "random 2 classes / 15 clients"
F5 = "Dirichlet 0.4 / 50 clients"


def params(**kw) -> Params:
    """Small parameters: three Table II settings (two headline), Figure 5 at B = 2, 5, 10, three seeds."""
    base = dict(
        profile="test", datasets=["fashion-mnist"], val_fraction=0.1, seeds=[0, 1, 2], pilot_seeds=[0], data_fraction=0.1, test_images=None, epochs=1,
        paper_epochs=5, momentum=0.9, batch=64, lr_grid=[0.05], alpha_lr_grid={"momentum": [1.0], "no momentum": [1.0]},
        extend=0, sigma_grid=[1.0], baseline_grids={}, pair_rounds=4, pair_pilot_rounds=2, pair_branches=3, pair_clients=4, visits=2,
        dirichlet_visits=4, client_setups=((15, 1.0), (50, 0.2)), pilot_visits=2, k_classes=3,
        table2_settings=[S15, K15, R15], pilot_branches=5, rho_resolution=0.1, table2_run=2, amp_evals=10,
        ifca_evals=10, branch_choices=[2, 5], fig5_setting=F5, fig5_branches=[2, 5, 10], fig5_visits=2,
        eq2_images=8, concentrated_alpha=0.5, scale_shift=5.0, local_high=90.0, amp_self_local=0.9,
        amp_self_average=0.1, amp_peak_flat=1.5, train_images=6000, margin=1.0, width="8", pilot_lr=0.05,
        options={"pfedme": {"K": 3, "personal_lr": 0.05}, "ifca": {"clusters": 5}, "fedamp": {"lam": 0.1}},
    )  # fmt: skip
    return Params(**base | kw)


def record(acc, val=None, *, method="fedavg", rounds=4, probe=None, history=None, improving=0.0, up=1e6, down=1e6,
           wall=1.0, diverged=False, clients=4, sample_rate=1.0) -> dict:  # fmt: skip
    """A stored run as SweepResult reads it: accuracy ``acc`` (0-1) at the end, validation ``val``."""
    val = acc if val is None else val
    rec = {
        "config": {"method": method, "rounds": rounds, "lr": 0.05, "clients": clients, "sample_rate": sample_rate},
        "final": {"round": rounds} | dict.fromkeys(FINAL_METRICS, acc),
        "history": history or [{"round": rounds, "mean_acc": acc, "pooled_acc": acc, "val_mean_acc": val}],
        "best_by_val": {"round": rounds, "mean_acc": acc, "pooled_acc": acc},
        "improving": improving,
        "comm": {"bytes_up": up, "bytes_down": down},
        "provenance": {"wall_time_s": wall},
    }
    if diverged:
        rec["diverged"] = "loss left the bound"
        rec["final"] = {"round": 1} | dict.fromkeys(FINAL_METRICS, float("nan"))
    if probe is not None:
        rec["probe"] = {"name": "probe", "rounds": {str(r): p for r, p in probe.items()}}
    return rec


def result(by_arm: dict[str, list[dict]]) -> SweepResult:
    """A sweep's result from each arm's records, seeds 0, 1, ... in order."""
    seeds = range(max(len(v) for v in by_arm.values()))
    return SweepResult({(a, s): r for a, recs in by_arm.items() for s, r in enumerate(recs)}, list(by_arm), seeds)


def paper_frame() -> pd.DataFrame:
    """The paper's numbers: Table I, Table II in its six settings (pFedMB behind FedAvg in Dirichlet 0.4),
    Table III."""
    rows = [("Table I", "CIFAR10", "pairs", m, v) for m, v in
            {"Local": 80.0, "FedAvg": 70.0, EQ6: 84.0, EQ5: 85.0}.items()]  # fmt: skip
    paper_methods = ["pFedMe", "IFCA", "FedFomo", "FedAmp", "FedProx", "FedPer", "FedAvg", "Local"]
    for i, (data, setting) in enumerate(s["paper"] for s in params().settings.values()):
        values = dict(zip(paper_methods, [60.0, 61.0, 62.0, 63.0, 64.0, 65.0, 72.5, 50.0]))
        values["pFedMB"] = 70.0 if setting.startswith("Dirichlet") else 80.0 + i
        rows += [("Table II", data, setting, m, v) for m, v in values.items()]
        rows.append(("Table III", data, setting, "pFedMB", 3.0 if data == "CIFAR100" else 6.0 + i))
    out = pd.DataFrame(rows, columns=["table", "dataset", "setting", "method", "value"])
    return out.assign(std=np.nan)


@pytest.fixture
def shown(monkeypatch):
    """What the sections show: every displayed object and printed note, in order (figures not shown)."""
    import matplotlib.pyplot as plt

    out = []
    for module in (sec, sec_pairs, sec_t2, sec_notes):
        monkeypatch.setattr(module, "display", lambda *a: out.extend(a))
    monkeypatch.setattr(sec_notes, "say", lambda *a, **k: out.append(" ".join(map(str, a))))
    monkeypatch.setattr(plt, "show", lambda: None)
    return out


@pytest.fixture
def glued(monkeypatch):
    """The figures the notes glue, by name (kept open)."""
    import matplotlib.pyplot as plt

    out = {}
    monkeypatch.setattr(sec_notes, "_glue_figure", lambda name: out.__setitem__(name, plt.gcf()))
    yield out
    plt.close("all")


def text(items) -> str:
    """The words among shown items (Markdown and printed notes)."""
    return "\n".join(getattr(i, "data", i) for i in items if isinstance(getattr(i, "data", i), str))


# ----------------------------------------------------------------------------- the parameters and the pilot


def test_params_derive_the_settings_the_headline_and_the_prose_values():
    P = params()
    assert len(P.settings) == 6 and P.settings["random 3 classes / 50 clients"]["cfg"]["sample_rate"] == 0.2
    assert P.settings[K15]["paper"] == ("CIFAR100", "random 20 classes with different size / 15 clients")
    assert P.headline == [S15, K15]
    assert P.choices_of(F5) == [2, 5, 10] and P.choices_of(S15) == [2, 5]
    assert P.visits_of(S15) == 4 and P.visits_of(R15) == 2
    prose = P.prose_values()
    assert list(prose) == list(PROSE_NAMES)
    assert prose["SEEDS"] == [0, 1, 2] and prose["MIN_SEEDS"] == MIN_SEEDS and prose["RESOLUTION"] == RESOLUTION
    assert prose["TABLE2_RUN"] == 2 and prose["MARGIN"] == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        P.seeds = [0]  # frozen


def test_params_give_each_setting_its_dataset_and_the_paper_profile_its_headline():
    P = params()  # the book: every setting on its one dataset
    assert {s["cfg"]["dataset"] for s in P.settings.values()} == {"fashion-mnist"}
    R20, D50 = "random 20 classes / 50 clients", "Dirichlet 0.4 / 50 clients"
    P = params(
        datasets=["cifar10", "cifar100"], k_classes=20, table2_settings=[D50, R20, "random 2 classes / 50 clients"]
    )
    assert P.settings[D50]["cfg"]["dataset"] == "cifar10" and P.settings["random 2 classes / 15 clients"]["cfg"][
        "dataset"] == "cifar10"  # fmt: skip
    assert P.settings[R20]["cfg"]["dataset"] == "cifar100" and P.settings[R20]["cfg"]["classes_per_client"] == 20
    assert P.settings[R20]["paper"] == ("CIFAR100", "random 20 classes with different size / 50 clients")
    assert P.headline == [D50, R20]  # random 20 classes is a headline setting; random 2 classes is not


def test_pilot_tuner_chooses_on_validation_and_returns_its_sweeps(tmp_path, monkeypatch):
    from pflkit.experiments import Store

    real = sec.tune_axis
    monkeypatch.setattr(sec, "tune_axis", lambda *a, **k: real(*a, workers=1, **k))  # in this process: no pool
    P = params(alpha_lr_grid={"momentum": [0.5], "no momentum": [0.5]}, lr_grid=[0.05], pilot_seeds=[0])
    tuned = sec.pilot_tuner(P, Store(str(tmp_path / "store")))
    base = tiny_config(rounds=1, local_steps=2, val_fraction=0.25)
    pilot = tuned(base, ["local"], mb_options={"branches": 2}, probe=None)
    assert set(pilot.chosen) == {"Local", PFEDMB}
    mb = pilot.chosen[PFEDMB]
    assert mb.method == "pfedmb" and mb.lr == 0.05 and mb.options["alpha_lr"] == 0.5
    assert mb.options["branches"] == 2 and mb.options["alpha_momentum"] in (-1.0, 0.0)
    assert pilot.chosen["Local"].method == "local" and pilot.chosen["Local"].lr == 0.05
    assert len(pilot.sweeps) == 2  # η_α, then the learning rate (no FedAMP: no σ)
    assert sum(len(s.records) for s in pilot.sweeps) == 5  # 2 variants on α, 3 labels on the learning rate
    assert {"chosen first", "chosen", "at its edge"} <= set(pilot.edges.columns)
    assert set(pilot.table.index.get_level_values("setting")) == {"η_α = 0.5", "η = 0.05"}  # in words
    lr_pilot, grid = pilot.fallback[PFEDMB]
    assert grid.startswith(f"{PFEDMB}, branches") and pilot.fallback["Local"][1] == "Local"


# ----------------------------------------------------------------------------- the pairs


def test_pair_arms_switch_only_the_averaging_and_the_scale():
    mb = tiny_config(method="pfedmb", options={"branches": 5, "scale_init": True, "alpha_lr": 0.1})
    pick = {PFEDMB: mb, "FedAvg": tiny_config(method="fedavg"), "Local": tiny_config(method="local")}
    pair = sec_pairs.pair_arms_of(params(pair_rounds=10), pick)
    assert pair.scaled is True and pair.alt == ", branches as drawn" and pair.mb is mb
    arms = pair.arms
    assert list(arms) == [EQ5, EQ6, EQ5 + pair.alt, EQ6 + pair.alt, "FedAvg", "Local"]
    assert arms[EQ5].options["alpha_weighted"] is True and arms[EQ6].options["alpha_weighted"] is False
    assert arms[EQ5 + pair.alt].options["scale_init"] is False and arms[EQ5 + pair.alt].eval_every == eval_every(10)
    assert arms[EQ5].rounds == 10 and arms[EQ5].eval_every == 1 and arms["Local"].method == "local"
    flat = sec_pairs.pair_arms_of(
        params(), {**pick, PFEDMB: tiny_config(method="pfedmb", options={"scale_init": False})}
    )
    assert flat.alt == ", branches × √B" and flat.arms[EQ5 + flat.alt].options["scale_init"] is True


def alphas_of(pid, rounds, sharp=0.9, b=3):
    """Each client's α over ``b`` branches at rounds 1..``rounds``: the clients of pair p on branch p % b,
    more sharply with every round."""
    out = {}
    for r in range(1, rounds + 1):
        w = 1 / b + (sharp - 1 / b) * r / rounds
        a = np.full((len(pid), b), (1 - w) / (b - 1))
        a[np.arange(len(pid)), pid % b] = w
        out[r] = a.tolist()
    return out


def pairs_world(seeds=3, rounds=4, alt=", branches as drawn"):
    """The pairs' sweep: four clients in two pairs, α on the pair's own branch (eq. 5) or on one branch for all
    (eq. 6), accuracies per round for Table I and Figure 4."""
    pid = np.array([0, 0, 1, 1])

    def hist(acc):
        return [{"round": r, "mean_acc": acc * r / rounds, "pooled_acc": acc, "val_mean_acc": acc}
                for r in range(1, rounds + 1)]  # fmt: skip

    accs = {"Local": 0.80, "FedAvg": 0.70, EQ6: 0.82, EQ5: 0.85, EQ5 + alt: 0.84, EQ6 + alt: 0.83}
    by_arm = {}
    for a, acc in accs.items():
        recs = []
        for s in range(seeds):
            probe = None
            if a.startswith(PFEDMB):
                probe = alphas_of(pid if a.startswith(EQ5) and "w/o" not in a else np.zeros(4, int), rounds)
            recs.append(record(acc + 0.01 * s, method="pfedmb" if probe else a.lower(), rounds=rounds,
                               probe=probe, history=hist(acc + 0.01 * s), up=3e6 if probe else 1e6))  # fmt: skip
        by_arm[a] = recs
    pairs = result(by_arm)
    part = PairPartitions(
        s0=0, pair_id={s: pid for s in range(seeds)}, order=np.arange(4), part0=None, table=pd.DataFrame(),
        alphas={a: {s: {r: np.array(v) for r, v in pairs.probes(a, s).items()} for s in range(seeds)}
                for a in (EQ5, EQ6, EQ5 + alt, EQ6 + alt)},
    )  # fmt: skip
    return pairs, part


def test_pair_partitions_read_each_seeds_pairs_and_alpha(digits):
    base = tiny_config(partition="pathological", classes_per_client=2, clients=4)
    pairs, _ = pairs_world(seeds=2)
    classes = [f"c{i}/long name" for i in range(10)]
    part = sec_pairs.pair_partitions(pairs, base=base, alt=", branches as drawn", classes=classes)
    assert part.s0 == 0 and set(part.pair_id) == {0, 1}
    counts = part.part0.class_counts(digits.y_train.cpu().numpy())
    first = [int(np.flatnonzero(row)[0]) for row in counts]
    assert list(part.pair_id[0]) == [c // 2 for c in first]
    assert list(part.order) == list(np.argsort(part.pair_id[0], kind="stable"))
    assert set(part.alphas) == {EQ5, EQ6, EQ5 + ", branches as drawn", EQ6 + ", branches as drawn"}
    assert part.alphas[EQ5][1][4].shape == (4, 3)
    t = part.table
    assert list(t.index) == list(part.order) and list(t.columns) == ["pair", "classes", "train", "val", "test"]
    assert t["classes"].iloc[0].count(" & ") == 1 and "/" not in t["classes"].iloc[0]
    assert t["train"].sum() == sum(len(c.train) for c in part.part0.clients)


def test_draw_fig3_shows_alpha_per_client_at_a_few_rounds(shown):
    _, part = pairs_world(rounds=4)
    fig = sec_pairs.draw_fig3(params(pair_rounds=4), part)
    axes = fig.axes
    assert len(axes) == 2 * 3  # eq. 5 and eq. 6 at rounds 1, 2, 4
    assert [ax.get_title() for ax in axes[:3]] == ["round 1", "round 2", "round 4"]
    assert axes[0].get_ylabel() == "eq. 5: client" and axes[3].get_ylabel() == "eq. 6: client"
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["b1", "b2", "b3"]
    assert [t.get_text() for t in axes[0].get_yticklabels()] == ["0 (pair 0)", "1 (pair 0)", "2 (pair 1)", "3 (pair 1)"]
    assert [t.get_text() for t in axes[2].texts][:3] == ["0.9", "0.1", "0.1"]  # client 0 at the last round


def test_draw_fig3_at_one_round_shows_that_round_alone(shown):
    _, part = pairs_world(rounds=1)  # the paper profile's dry run: one round of the pairs
    fig = sec_pairs.draw_fig3(params(pair_rounds=1), part)
    assert [ax.get_title() for ax in fig.axes] == ["round 1", "round 1"]


def test_fig3_claims_judge_the_pairs_alpha_and_say_round_one(shown):
    pairs, part = pairs_world(rounds=4)
    mb = tiny_config(method="pfedmb", options={"alpha_lr": 1.0, "alpha_momentum": 0.0})
    fig3 = sec_pairs.fig3_claims(params(pair_rounds=4), pairs, part=part, mb=mb)
    assert [r["claim"][:10] for r in fig3.rows] == ["Figure 3a:", "Figure 3b:", "Figure 3b:"]
    assert fig3.rows[0]["verdict"] == "reproduces"  # within-pair cosine 1 against across-pair below it
    assert fig3.last.loc[(EQ5, 0), "within"] == pytest.approx(1.0)
    assert fig3.last.loc[(EQ5, 0), "distinct branches"] == 2 and fig3.last.loc[(EQ6, 0), "distinct branches"] == 1
    assert fig3.rows[2]["_v"].mean == pytest.approx(1.0)  # eq. 5 − eq. 6: one more distinct branch
    assert set(fig3.main_scores.variant) == {EQ5, EQ6} and fig3.main_scores["round"].max() == 4
    assert "The 2 pairs end on 2.0 distinct branches with eq. 5 and 1.0 without" in text(shown)
    # after round 1 the largest α_b is 1/3 + (0.9 − 1/3)/4 = 0.47: at most the concentration threshold
    assert "largest α_b is 0.47" in fig3.round1 and "That is at most 0.5" in fig3.round1


def test_table1_and_fig4_read_the_papers_two_orders_and_draw_the_curves(shown):
    import matplotlib.pyplot as plt

    pairs, _ = pairs_world()
    t1 = sec_pairs.table1_and_fig4(pairs, paper_frame())
    assert list(t1.table.index) == PAIR_MAIN
    assert (
        t1.table.loc[EQ5, "paper, text's reading (%)"] == 85.0 and t1.table.loc[EQ5, "paper, printed order (%)"] == 84.0
    )
    assert "ours, test (%)" in t1.table.columns and t1.printed[EQ6] == 85.0
    assert (
        t1.paper_diff(EQ5, "FedAvg") == "text's reading +15.00 (85.00 vs 70.00); printed order +14.00 (84.00 vs 70.00)"
    )
    assert set(t1.curves.arm) == set(PAIR_MAIN)  # the other scale's arms are not drawn
    ax = t1.fig.axes[0]
    assert ax.get_ylabel() == "mean accuracy (%)" and ax.get_xlabel() == "round"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == PAIR_MAIN
    plt.close(t1.fig)


def table1_of(pairs) -> Table1:
    return sec_pairs.table1_and_fig4(pairs, paper_frame())


def test_table1_claims_judge_eq5_and_the_baselines_and_the_pilot_words(shown):
    pairs, _ = pairs_world()
    t1 = table1_of(pairs)
    out = sec_pairs.table1_claims(params(seeds=[0]), pairs, plan=pd.DataFrame(), t1=t1, alt=", branches as drawn")
    assert [r["claim"] for r in out.rows][:3] == [
        "Table I: pFedMB beats FedAvg", "Table I: pFedMB beats Local",
        "Table I: α-weighted averaging (eq. 5) improves accuracy over eq. 6",
    ]  # fmt: skip
    assert len(out.rows) == 5 and out.rows[0]["verdict"] == "reproduces"  # +15 points on every seed
    assert out.rows[0]["paper"].startswith("text's reading +15.00")
    assert out.saturated == ""
    # one pilot seed tests nothing: every claim reads "not tested" there, unlike on the three seeds
    assert out.pilot_words.startswith("Every claim here is judged on every seed its arms ran (3 seeds). On the pilot")
    assert "*Table I: pFedMB beats FedAvg* read *not tested*, where all the seeds give *reproduces*" in out.pilot_words
    assert "* Table I: pFedMB beats FedAvg: **reproduces** · *larger than the paper's*" in text(shown)


def test_scale_diagnostic_compares_eq5_and_eq6_at_both_scales(shown):
    pairs, _ = pairs_world()
    t1 = table1_of(pairs)
    pick = {PFEDMB: tiny_config(method="pfedmb", options={"scale_init": True}), "FedAvg": tiny_config(),
            "Local": tiny_config(method="local")}  # fmt: skip
    pair = sec_pairs.pair_arms_of(params(), pick)
    scale = sec_pairs.scale_diagnostic(pairs, pd.DataFrame(), arms=pair, t1=t1, saturated="")
    assert scale.chosen == "branches × √B"
    assert list(scale.table.columns) == ["branches × √B (chosen, as above)", "branches as drawn"]
    assert list(scale.table.index) == [EQ5, EQ6]
    assert scale.v_main.mean == pytest.approx(3.0) and scale.v_alt.mean == pytest.approx(1.0)
    (row,) = scale.rows
    assert row["claim"] == "Table I with the branches as drawn (our diagnostic): eq. 5 improves accuracy over eq. 6"
    assert row["_v"].mean == pytest.approx(1.0) and "printed order" in row["paper"]


# ----------------------------------------------------------------------------- Table II


def test_paper_table2_reads_each_of_our_settings_column_and_the_gap():
    paper = sec_t2.paper_table2(params(), paper_frame())
    assert paper.col(S15)["FedAvg"] == 72.5 and paper.col(K15)["pFedMB"] == 82.0
    assert paper.of(S15, "FedAMP") == 63.0  # the paper spells it FedAmp
    assert np.isnan(paper.of(S15, "pFedMB (B = 5)"))
    assert paper.gap[("CIFAR10", S15)] == -2.5 and paper.gap[("CIFAR10", R15)] == 80.0 - 72.5
    assert paper.wide.shape == (6, 9)


BASE_ACC = {"Local": 0.60, "FedAvg": 0.70, "FedProx": 0.69, "FedPer": 0.65, "FedAMP": 0.62, "FedFomo": 0.61,
            "IFCA": 0.66, "pFedMe": 0.64, mb_label(2): 0.72, mb_label(5): 0.71, mb_label(10): 0.68}  # fmt: skip
SHIFT = {S15: 0.0, K15: 0.05, R15: 0.2, F5: 0.01}


_MADE: dict = {}  # the synthetic sweeps and plans, built once (no test changes them)


def t2_runs(seeds=3, lost=(), amp_self=0.95):
    """Table II's and Figure 5's runs (built once per arguments): see :func:`make_t2_runs`."""
    key = ("runs", seeds, frozenset(lost), amp_self)
    if key not in _MADE:
        _MADE[key] = make_t2_runs(seeds, lost, amp_self)
    return _MADE[key]


def make_t2_runs(seeds, lost, amp_self):
    """Table II's and Figure 5's runs: every row in each setting, α of pFedMB (three layers × B) at the end,
    FedAMP's self-weights and IFCA's picks every round; ``lost``: (arm, seed) that diverged."""
    by_arm = {}
    for name in (F5, S15, K15, R15):
        labels = [mb_label(b) for b in (10, 5, 2)] + ["FedAvg", "Local"] if name == F5 else (
            [mb_label(5), mb_label(2)] + OTHERS)  # fmt: skip
        for label in labels:
            recs = []
            for s in range(seeds):
                acc = BASE_ACC[label] + SHIFT[name] + 0.004 * s
                probe = None
                if label.startswith(PFEDMB):
                    b = int(label.rsplit("=", 1)[1])
                    probe = {
                        4: [[[1.0] + [0.0] * (b - 1)] * 3, [[1 / b] * b] * 3]
                    }  # 3 layers; one client on one branch
                elif label == "FedAMP":
                    probe = {r: {"self": amp_self, "peak": 1.2, "d2": 3.0, "self_min": 0.9, "self_max": 1.0}
                             for r in (2, 4)}  # fmt: skip
                    probe[4]["self_trace"] = [[0.9, amp_self, 1.0]] * 4
                elif label == "IFCA":
                    probe = {r: {"clusters": [0, 0, 1, 1] if s else [0, 0, 0, 0], "models": 5} for r in (2, 4)}
                method = "pfedmb" if probe and label.startswith(PFEDMB) else label.lower()
                recs.append(record(acc, acc - 0.01, method=method, probe=probe, diverged=(name + " · " + label, s) in lost,
                                   up=3e6 if label.startswith(PFEDMB) else 1e6, wall=2.0 if label.startswith(PFEDMB)
                                   else 1.0, clients=15))  # fmt: skip
            by_arm[arm(name, label)] = recs
    return result(by_arm)


def t2_arms(runs) -> Table2Arms:
    cfg = {a: tiny_config(method=runs[a, 0]["config"]["method"], options={"branches": 2}) for a in runs.arms}
    edges = pd.DataFrame({"chosen first": ["lr=0.1"], "chosen": ["lr=0.1"], "at its edge first": [True],
                          "at its edge": [True]}, index=pd.MultiIndex.from_tuples([(S15, "FedAvg")],
                                                                                  names=["pilot", "grid"]))  # fmt: skip
    return Table2Arms(cfg, [a for a in cfg if a.endswith("FedAMP")], {}, edges, [(S15, "FedAvg", "η = 0.1")], None,
                      {arm(F5, mb_label(10)): "lr 0.1 -> 0.03: diverged"})  # fmt: skip


def t2_plan(runs):
    key = ("plan", id(runs))
    if key not in _MADE:
        _MADE[key] = sec_t2.table2_plan(
            params(), runs, arms=t2_arms(runs), paper=sec_t2.paper_table2(params(), paper_frame())
        )
    return _MADE[key]


def test_table2_arms_build_every_settings_runs_and_the_edges(monkeypatch):
    P = params()
    mb = tiny_config(method="pfedmb", lr=0.03, options={"branches": 5, "alpha_lr": 1.0, "alpha_momentum": 0.0,
                                                        "scale_init": True})  # fmt: skip
    edges = pd.DataFrame({"chosen first": ["lr=0.1"], "chosen": ["lr=0.3"], "at its edge first": [True],
                          "at its edge": [True]}, index=pd.Index(["FedAvg"], name="grid"))  # fmt: skip

    def pilot(methods):
        chosen = {PFEDMB: mb} | {m: tiny_config(method=m.lower(), lr=0.1) for m in methods}
        return Pilot(chosen, pd.DataFrame(), edges, {k: ("lr pilot", k) for k in chosen}, [])

    pilots = {n: pilot(OTHERS) for n in P.table2_settings} | {F5: pilot(["FedAvg", "Local"])}
    t2 = sec_t2.table2_arms(P, pilots, pair_pilot=pilot(["FedAvg", "Local"]), store="the store")
    assert list(t2.arms)[:5] == [arm(F5, mb_label(b)) for b in (10, 5, 2)] + [arm(F5, "FedAvg"), arm(F5, "Local")]
    assert len(t2.arms) == 5 + 3 * (2 + len(OTHERS))
    assert t2.arms[arm(S15, mb_label(2))].options["branches"] == 2 and t2.arms[arm(S15, mb_label(2))].rounds == 4
    assert t2.arms[arm(R15, "FedAvg")].rounds == 2  # visits per client ÷ all clients taking part
    assert t2.amp_arms == [arm(n, "FedAMP") for n in P.table2_settings]
    assert t2.fallback[arm(S15, mb_label(2))] == ("lr pilot", PFEDMB) and t2.fallback[arm(S15, "IFCA")][1] == "IFCA"
    assert list(t2.edges.index.get_level_values("pilot"))[:2] == ["pairs", S15]
    assert t2.edges["chosen"].iloc[0] == "η = 0.3"
    assert len(t2.edge_used) == 5 and t2.edge_used_text.startswith("η = 0.3 (FedAvg) in pairs; η = 0.3 (FedAvg) in")
    calls = []

    def sweep_stable(arms, seeds, store, fallback, probe, progress):
        calls.append((sorted(arms), probe, store))
        return result({a: [record(0.5)] for a in arms}), {a: "note" for a in arms if a.endswith("FedAMP")}

    monkeypatch.setattr(sec_t2, "sweep_stable", sweep_stable)
    runs = t2.sweep([0])
    assert [c[1] for c in calls] == [sec_t2.table2_probe, sec_t2.amp_probe] and calls[0][2] == "the store"
    assert calls[1][0] == sorted(t2.amp_arms) and set(runs.arms) == set(t2.arms)
    assert t2.notes == dict.fromkeys(t2.amp_arms, "note")


def test_table2_plan_chooses_on_validation_and_sizes_the_claims():
    runs = t2_runs()
    plan = t2_plan(runs)
    assert plan.chosen_b == {S15: 2, K15: 2, R15: 2, F5: 2}
    assert plan.rival == {S15: "FedAvg", K15: "FedAvg", R15: "FedAvg"} and plan.fed_rival[R15] == "FedAvg"
    assert plan.fig5_mid == arm(F5, mb_label(5))
    assert plan.arm_of(S15, PFEDMB) == arm(S15, mb_label(2))
    assert plan.arm_of(S15, f"{PFEDMB} (B = 5)") == arm(S15, mb_label(5)) and plan.arm_of(S15, "IFCA") == arm(
        S15, "IFCA"
    )
    claims = plan.claims
    assert claims[f"{S15}: pFedMB − FedAvg"] == ([(1, arm(S15, mb_label(2)), arm(S15, "FedAvg"))], 1.0)  # comparable
    assert claims[f"{R15}: pFedMB − FedAvg"][1] is None  # the paper's pFedMB is best there
    assert claims[f"{R15}: FedAvg − pFedMB"][1] == 1.0
    assert [k for k in claims if "behind" in k] == [
        f"{m} behind: {h} − {R15}" for h in (S15, K15) for m in ("FedAMP", "FedFomo")
    ]
    assert f"Figure 5: {mb_label(5)} − B=2" in claims and f"Figure 5: {mb_label(5)} − B=10" in claims
    assert set(plan.plan.index) == set(claims)
    heads = {f"{n}: pFedMB − {plan.rival[n]}" for n in params().headline}  # planned on the carried margin
    lead = {a for k in heads for _, x, y in claims[k][0] for a in (x, y)}
    assert all(len(s) <= 2 for a, s in plan.seeds.items() if a not in lead) and set(plan.seeds) == set(runs.arms)
    for k in heads:  # a headline's arms run its own plan, past the run cap
        assert plan.plan.loc[k, "plan"].endswith("(a headline)") or "a headline runs" in plan.plan.loc[k, "plan"]
        assert all(len(plan.seeds[a]) >= plan.plan.loc[k, "seeds run"] for _, x, y in claims[k][0] for a in (x, y))


def test_eq6_control_switches_only_the_averaging_of_the_chosen_b():
    runs = t2_runs()
    plan, arms = t2_plan(runs), t2_arms(runs)
    eq6 = sec_t2.eq6_control_arms(params(), plan, arms=arms)
    assert eq6.arm_of == {S15: f"{S15} · {PFEDMB} (eq. 6)", K15: f"{K15} · {PFEDMB} (eq. 6)"}
    assert eq6.text[S15] == f"{S15}: mechanism (our check): α-weighted averaging (eq. 5) beats plain averaging (eq. 6)"
    control = eq6.arms[eq6.arm_of[S15]]
    assert control.options["alpha_weighted"] is False
    assert control.options["branches"] == arms.arms[arm(S15, mb_label(2))].options["branches"]


def test_t2_cap_text_says_what_the_cap_does():
    capped = sec_t2.t2_cap_text(SEED_CAP - 1)
    assert (
        f"at most {SEED_CAP - 1}" in capped and f"runs {SEED_CAP - 1} and" in capped and "reads underpowered" in capped
    )
    assert f"arms at most {SEED_CAP}; a headline's arms run its own plan" in sec_t2.t2_cap_text(SEED_CAP)


def test_table2_results_fill_ours_beside_the_paper_and_the_saturation_check():
    runs = t2_runs()
    res = sec_t2.table2_results(params(), runs, plan=t2_plan(runs), paper=sec_t2.paper_table2(params(), paper_frame()))
    assert res.row_names[:2] == ["Local", "FedAvg"] and res.row_names[-2:] == [PFEDMB, f"{PFEDMB} (B = 5)"]
    t = res.table
    assert list(t.columns)[:2] == [f"{S15} · ours", f"{S15} · paper CIFAR10"]
    assert f"{R15} (no headline) · ours" in t.columns and f"{K15} · paper CIFAR100" in t.columns
    assert t.loc[PFEDMB, f"{S15} · ours"].startswith("72.4 ±")  # B = 2 chosen: 72, 72.4, 72.8
    assert (
        np.isnan(t.loc[f"{PFEDMB} (B = 5)", f"{S15} · paper CIFAR10"])
        and t.loc["FedAvg", f"{S15} · paper CIFAR10"] == 72.5
    )
    assert list(res.sat_table.index) == [S15, K15, R15, F5]
    assert res.sat_table.loc[F5, "rows run"] == f"Local, FedAvg, {PFEDMB}, {PFEDMB} (B = 5)"
    assert (
        res.sat_table.loc[F5, "used for"] == "Figure 5"
        and res.sat_table.loc[S15, "headline (fixed in advance, by name)"] == "yes"
    )
    assert res.sat_table.loc[S15, "Local, test (%)"] == pytest.approx(60.4)
    assert res.sat_flag[S15] == "" and res.improving == {}
    assert len(res.finals) == len(runs.records)


def t2_claims_of(monkeypatch, shown, amp_self=0.95):
    runs = t2_runs(amp_self=amp_self)
    P, plan, arms = params(), t2_plan(runs), t2_arms(runs)
    paper = sec_t2.paper_table2(P, paper_frame())
    res = sec_t2.table2_results(P, runs, plan=plan, paper=paper)
    eq6 = Eq6Control({n: f"{n}: mechanism (our check): eq. 5 beats eq. 6" for n in P.headline},
                     {n: f"{n} · {PFEDMB} (eq. 6)" for n in P.headline}, {})  # fmt: skip
    eq6_runs = result({eq6.arm_of[n]: [record(0.70 + SHIFT[n] + 0.004 * s) for s in range(3)] for n in P.headline})
    monkeypatch.setattr(sec_t2, "alpha_follows_data", lambda runs, a, cfg: pd.Series({0: 0.5, 1: 0.55, 2: 0.6}))
    pilots = {n: Pilot({"FedAMP": tiny_config(method="fedamp", options={"sigma": 10.0})}, None, None, {}, [])
              for n in P.table2_settings}  # fmt: skip
    return runs, sec_t2.table2_claims(P, runs, plan=plan, paper=paper, results=res, arms=arms, pilots=pilots, eq6=eq6,
                                      eq6_runs=eq6_runs, eq5_plan=pd.DataFrame())  # fmt: skip


def test_table2_claims_judge_every_setting_the_mechanisms_and_fedamp(monkeypatch, shown):
    _, c = t2_claims_of(monkeypatch, shown)
    claims = [r["claim"] for r in c.rows]
    assert claims[:4] == [c.mech_alpha[S15]["claim"], c.mech_alpha[K15]["claim"], c.mech_eq5[S15]["claim"],
                          c.mech_eq5[K15]["claim"]]  # fmt: skip
    assert c.mech_eq5[S15]["_v"].mean == pytest.approx(2.0)  # pFedMB B=2 (72) against its eq. 6 control (70)
    assert c.mech_alpha[S15]["_v"].mean == pytest.approx(0.55)
    assert (
        claims[4] == f"Table II, {S15}: pFedMB is comparable (±1) to the strongest other method (FedAvg, on validation)"
    )
    assert claims[5] == f"Table II, {S15}: pFedMB beats Local" and claims[7] == f"Table II, {K15}: pFedMB beats Local"
    assert c.rows[5]["paper"].endswith("vs Local") and "Local" not in claims[8]  # headline settings only
    assert (
        claims[8]
        == f"Table II, {R15} (not a headline setting): pFedMB beats the strongest other method (FedAvg, on validation)"
    )
    assert claims[9].startswith("Table II: pFedMB is the most balanced method") and "than FedAvg" in claims[9]
    assert (
        claims[10] == f"Table II, {R15} (not a headline setting): FedAvg with fine-tuning is within ±1 point of pFedMB"
    )
    assert claims[11:] == [f"Table II: {m} falls further behind pFedMB in {h} than in {R15}"
                           for h in (S15, K15) for m in ("FedAMP", "FedFomo")]  # fmt: skip
    assert c.rows[8]["verdict"] == "reproduces" and c.rows[8]["paper"] == "+7.50 vs FedAvg"
    assert c.amp_regime == dict.fromkeys([K15, R15, S15], "local")  # self-weight 0.95 > 0.9
    assert c.amp_end.loc[S15, "σ (chosen)"] == 10.0 and c.amp_end.loc[S15, "self"] == pytest.approx(0.95)
    assert "FedAMP's attention is inert here: close to Local training in" in c.rows[11]["notes"]
    assert list(c.gap_means.index)[0] == PFEDMB and c.gap_means[PFEDMB] == pytest.approx(0.0)
    assert c.paper_worst["pFedMB"] == pytest.approx(2.5) and c.paper_other == "FedAvg"
    assert c.all_other == "FedAvg" and c.t2_all.shape == (6, 9)
    assert text(shown).startswith("*Our checks.* Clients with similar label mixes get similar α:")


def test_table2_claim_notes_say_how_strongly_alpha_follows_the_data(shown):
    v = verdict([0.05, 0.06, 0.07], unit="ρ", resolution=0.1)
    alpha = {S15: mechanism(f"{S15}: α follows", v, control="ρ = 0", digits=2)}
    eq5 = {S15: mechanism(f"{S15}: eq. 5 acts", verdict([1.0, 1.5, 2.0], resolution=RESOLUTION), control="eq. 6")}
    worst = pd.Series({"pFedMB": 2.0, "FedAvg": 1.0})
    claims = sec_t2.Table2Claims([], alpha, eq5, pd.DataFrame(), {}, {}, pd.Series({PFEDMB: 0.5, "FedAvg": 1.5}),
                                 worst, "FedAvg", pd.Series({"pFedMB": 1.0, "FedAvg": 2.0}), "FedAvg",
                                 pd.DataFrame(index=range(6)))  # fmt: skip
    sec_notes.table2_claim_notes(claims)
    words = text(shown)
    assert f"**How strongly α follows the data.** In {S15}, ρ = +0.06 [" in words and "very weak but nonzero" in words
    assert f"in {S15}, pFedMB − the same with plain averaging:" in words
    # pFedMB the most balanced on our headline settings' paper numbers, not over all six: the claim says so
    assert (
        "worst gap of 2.00 points against FedAvg's 1.00; over all 6 of its settings, 1.00 against FedAvg's 2.00"
        in words
    )
    assert "do not make pFedMB the most balanced" in words
    assert shown[-1].loc[PFEDMB, "worst gap"] == 0.5


def test_amp_ifca_notes_show_the_self_weights_and_the_clusters(monkeypatch, shown, glued):
    runs, c = t2_claims_of(monkeypatch, shown)
    shown.clear()
    inert = sec_notes.amp_ifca_notes(params(), runs, claims=c)
    assert inert is True
    ax = glued["pfedmb_amp_selfweight"].axes[0]
    assert ax.get_ylabel() == "ξ_ii" and [line.get_label() for line in ax.get_lines()] == [S15, K15, R15]
    assert list(ax.get_lines()[0].get_ydata()) == pytest.approx([0.95] * 4)
    words = text(shown)
    assert (
        f"* **{S15}**: FedAMP's mean self-weight ξ_ii 0.95" in words
        and "FedAMP's similarity-based aggregation is inert" in words
    )
    assert "IFCA's cluster models in use (of K = 5)" in words
    assert (
        f"* **{S15}**: at the last round the clients use 1 (seed 0), 2 (seed 1), 2 (seed 2) of IFCA's 5 models; one model for all clients on 1 of 3 seeds"
        in words
    )
    _, mixed = t2_claims_of(monkeypatch, shown, amp_self=0.5)
    assert sec_notes.amp_ifca_notes(params(), runs, claims=mixed) is False


# ----------------------------------------------------------------------------- Figure 5 and Table III


def fig5_of(runs, shown):
    return sec_t2.draw_fig5(params(), runs, finals=runs.finals(), chosen_b=t2_plan(runs).chosen_b, paper=paper_frame())


def test_draw_fig5_draws_accuracy_over_b_and_table3(shown):
    lost = {(arm(F5, mb_label(10)), 1)}
    runs = t2_runs(lost=lost)
    fig5 = fig5_of(runs, shown)
    assert fig5.lost == {10: [1]}
    assert fig5.fedavg == pytest.approx(71.4) and fig5.local == pytest.approx(61.4)
    ax = fig5.fig.axes[0]
    assert list(ax.get_xticks()) == [2, 5, 10]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:2] == ["test", "validation"] and "FedAvg (test)" in labels and "Local (test)" in labels
    assert "B = 10, test: diverged on seed 1; 2 seeds left" in labels
    t3 = fig5.table3
    assert list(t3.index) == [S15, K15, R15, F5] and t3.loc[F5, "B chosen by validation"] == 2
    assert t3.loc[K15, "paper's tuned B"] == 3 and t3.loc[F5, "choices"] == "2, 5, 10"
    assert t3.loc[F5, "paper's setting"] == "CIFAR10 / Dirichlet 0.4 / 50 clients"


def test_fig5_claims_set_the_interior_b_against_both_ends(shown):
    runs = t2_runs()
    plan = t2_plan(runs)
    fig5 = fig5_of(runs, shown)
    out = sec_t2.fig5_claims(params(), runs, fig5=fig5, plan=plan, sat_flag={F5: ""}, notes={}, n_classes=10)
    assert (out.lo, out.hi, out.mid, out.paper_peak) == (2, 10, 5, 9)  # the paper's Table III at its Figure 5 setting
    assert out.rows[0]["claim"].startswith("Figure 5: accuracy peaks at an intermediate B: B = 5") and out.rows[0][
        "claim"
    ].endswith("B = 2")
    assert out.rows[0]["verdict"] == "contradicted" and out.rows[1]["verdict"] == "reproduces"  # 71 vs 72, vs 68
    assert out.rows[2]["ours (a − b, 95 % CI)"] == "not testable: Fashion-MNIST has 10 classes"
    assert "* Figure 5: accuracy peaks" in text(shown)
    P = params(datasets=["cifar10", "cifar100"])  # the paper's two datasets: listed in Table III, not judged
    out = sec_t2.fig5_claims(P, runs, fig5=fig5, plan=plan, sat_flag={F5: ""}, notes={}, n_classes=10)
    assert out.rows[2]["ours (a − b, 95 % CI)"].startswith("not judged: Table III lists the B validation chose")


def test_fig5_notes_say_the_spread_over_b_and_whether_local_saturates(shown):
    runs = t2_runs(lost={(arm(F5, mb_label(10)), 1)})
    plan = t2_plan(runs)
    fig5 = fig5_of(runs, shown)
    claims = sec_t2.fig5_claims(params(), runs, fig5=fig5, plan=plan, sat_flag={F5: ""}, notes={}, n_classes=10)
    shown.clear()
    sec_notes.fig5_notes(params(), runs, fig5=fig5, claims=claims, chosen_b=plan.chosen_b)
    words = text(shown)
    assert "Over B = 2, 5 the mean test accuracy spans 1.0 points (B = 10 is left out: it diverged on seed 1)" in words
    assert "validation picks B = 2 overall" in words and "FedAvg reaches 71.4 %, pFedMB at best 73.4 % (B = 2)" in words
    assert "Local is at most 90 %" in words
    assert "By the paired rule the peak is not shown to be interior: B = 5 does not beat both ends" in words


# ----------------------------------------------------------------------------- what reproduced and the notes


def test_what_reproduced_marks_the_lead_claims_and_folds_our_checks(monkeypatch, shown):
    import myst_nb

    glued = {}
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: glued.__setitem__(name, value))
    runs, c = t2_claims_of(monkeypatch, shown)
    shown.clear()
    rep = sec.what_reproduced(params(), c.rows)
    assert len(rep.paper_rows) == len(c.rows) - 4 and len(rep.our_rows) == 4  # the four mechanism checks
    assert list(rep.claims["claim of"])[:4] == ["ours"] * 4 and rep.claims["claim of"].iloc[4] == "the paper"
    leads = [r for r in rep.rows if r.get("lead")]
    assert [r["claim"].split(":")[0] for r in leads] == [f"Table II, {S15}", f"Table II, {K15}"]
    assert [r["lead"] for r in leads] == [1, 2] and leads[0][
        "setting"
    ] == "FMNIST Dirichlet 0.4, 15 clients, E = 1 (paper: 5)"
    assert not any(r.get("lead") for r in c.rows)  # the rows given are not marked
    compact, own = shown
    assert isinstance(compact, sec.Compact) and len(compact.table) == len(c.rows) - 4
    assert "Our own checks (4)" in own._repr_html_()
    assert "findings" in glued


def test_eq2_check_holds_layer_by_layer_and_counts_the_parameters(shown):
    import torch

    class Full:  # a Fashion-MNIST-shaped dataset
        input_shape, n_classes = (1, 28, 28), 10
        x_test = torch.rand(16, 1, 28, 28)

        @staticmethod
        def normalize(x):
            return x

    eq2 = sec_notes.eq2_check(params(pair_branches=3, eq2_images=8), Full())
    assert eq2.params > 0 and eq2.branch_params == 3 * eq2.params  # every layer branched, B = 3
    assert (eq2.table["max |eq.1 − eq.2|"] < 1e-4).all() and list(eq2.table.kind)[-1] == "linear"
    assert eq2.net.alpha_logits.shape[-1] == 3
    words = text(shown)
    assert f"FedAvg's LeNet P = {eq2.params:,}; pFedMB's branches = {eq2.branch_params:,} = 3 × P" in words


def test_run_setup_note_says_the_run_and_shows_the_pairs_pilot(shown):
    pairs, part = pairs_world()

    class Full:
        y_train, y_test = np.zeros(600), np.zeros(100)

    mb = tiny_config(method="pfedmb", lr=0.03, options={"alpha_lr": 1.0, "alpha_momentum": 0.0, "scale_init": True})
    table = pd.DataFrame({"method": ["FedAvg"], "setting": ["η = 0.1"], "val_mean_acc": [70.0], "chosen": ["yes"],
                          "at the grid's edge": [""]}).set_index(["method", "setting"])  # fmt: skip
    pilot = Pilot({"FedAvg": tiny_config(lr=0.1), PFEDMB: mb}, table, None, {}, [])
    part = part._replace(table=pd.DataFrame({"pair": [0]}))
    sec_notes.run_setup_note(params(train_images=60), pairs, full=Full(), pilot=pilot, plan=pd.DataFrame({"plan": ["3 seeds"]}),
                             part=part)  # fmt: skip
    words = text(shown)
    assert words.startswith("profile=test, device=") and "60 of 600 training images, 100 of 100 test images" in words
    assert "pilot: learning rates [0.05], stage 1 at 0.05, seeds [0]" in words
    assert "Chosen on validation for the pairs: FedAvg η = 0.1; pFedMB: η_W = 0.03" in words
    assert "pairs: 0 runs computed, 0 reused from the store; seeds [0, 1, 2]" in words
    assert shown[-1] is part.table


def test_draw_alpha_similarity_plots_within_and_across_pairs(shown, glued):
    pairs, part = pairs_world()
    fig3 = sec_pairs.fig3_claims(params(pair_rounds=4), pairs, part=part, mb=tiny_config(options={"alpha_lr": 1.0,
                                                                                               "alpha_momentum": 0.0}))  # fmt: skip
    shown.clear()
    sec_notes.draw_alpha_similarity(pairs, fig3)
    ax = glued["pfedmb_alpha_similarity"].axes[0]
    assert ax.get_title() == "cosine similarity of α: within vs across pairs (3 seeds, band: range)"
    assert ax.get_ylim() == (0, 1.02) and ax.get_ylabel() == "cosine"
    summary, round1 = shown
    assert list(summary.columns) == [EQ5, EQ6] and summary.loc["within", EQ5] == pytest.approx(1.0)
    assert summary.loc["distinct branches", EQ6] == 1 and round1.data == fig3.round1


def test_implicit_similarity_draws_c_and_the_weight_on_a_clients_pair(shown, glued):
    _, part = pairs_world()

    class Part0:
        clients = [type("C", (), {"train": range(10)})() for _ in range(4)]

    sec_notes.implicit_similarity(params(pair_rounds=4), part._replace(part0=Part0()))
    axes = glued["pfedmb_collaboration"].axes
    assert axes[0].get_title() == "C, with α-weighted averaging (eq. 5)" and axes[1].get_title() == "C, without (eq. 6)"
    assert axes[0].get_xlabel() == "client j (uploads)"
    # eq. 6: every upload weighs 1/4, half of it in the pair; eq. 5: α on the pair's own branch keeps more
    (note,) = shown
    assert note.endswith("eq. 6 0.50 (uniform weights: 0.50)") and "eq. 5 0.8" in note


def test_table1_readings_set_both_margins_side_by_side(shown):
    pairs, _ = pairs_world()
    sec_notes.table1_readings(
        paper_frame(), table1_of(pairs), pilot_words="The pilot seeds alone give each of them the same word."
    )
    words = text(shown)
    assert "reports no spread for Tables I and II" in words
    assert (
        "(pFedMB against FedAvg: +15.00 or +14.00 points by the two readings; eq. 5 against eq. 6: +1.00 or -1.00)"
        in words
    )
    assert words.endswith("The pilot seeds alone give each of them the same word.")


def test_table2_setup_notes_say_the_edges_choices_seeds_and_saturation(shown):
    runs = t2_runs()
    P, plan, arms = params(), t2_plan(runs), t2_arms(runs)
    res = sec_t2.table2_results(P, runs, plan=plan, paper=sec_t2.paper_table2(P, paper_frame()))
    res = res._replace(improving={S15: ["FedAMP", "FedAvg"]})
    table = pd.DataFrame({"method": ["FedAvg"], "setting": ["η = 0.1"], "val_mean_acc": [70.0], "chosen": ["yes"],
                          "at the grid's edge": [""]}).set_index(["method", "setting"])  # fmt: skip
    mb = tiny_config(method="pfedmb", lr=0.03, options={"alpha_lr": 1.0, "alpha_momentum": 0.0, "scale_init": True})
    pilots = {S15: Pilot({"FedAvg": tiny_config(lr=0.1), PFEDMB: mb}, table, None, {}, [])}
    sec_notes.table2_setup_notes(P, runs, arms=arms, pilots=pilots, plan=plan, results=res, eq5_plan=pd.DataFrame())
    words = text(shown)
    assert "**Choices at an edge of their grid**: 1 of 1 on the grids" in words
    assert "1 of them choices the runs use: η = 0.1 (FedAvg) in Dirichlet 0.4 / 15 clients." in words
    assert f"* **{S15}**: FedAvg η = 0.1; pFedMB: η_W = 0.03, η_α = 1 without momentum on α" in words
    assert f"{arm(F5, mb_label(10))}: η = 0.1 -> 0.03: diverged" in words
    assert f"pFedMB's B chosen by validation: {S15}: 2, {K15}: 2, {R15}: 2" in words
    assert f"in {S15}, FedAMP, FedAvg." in words


def test_closing_summary_says_where_and_why(monkeypatch, shown):
    runs, c = t2_claims_of(monkeypatch, shown)
    pairs, part = pairs_world()
    fig3 = sec_pairs.fig3_claims(params(pair_rounds=4), pairs, part=part, mb=tiny_config(options={"alpha_lr": 1.0,
                                                                                               "alpha_momentum": 0.0}))  # fmt: skip
    import myst_nb

    monkeypatch.setattr(myst_nb, "glue", lambda *a, **k: None)
    rep = sec.what_reproduced(params(), c.rows)
    shown.clear()
    P = params()
    sec_notes.closing_summary(P, pairs, runs=runs, reproduced=rep, fig3=fig3, arms=t2_arms(runs), plan=t2_plan(runs),
                              row_names=sec_t2.table2_results(P, runs, plan=t2_plan(runs), paper=sec_t2.paper_table2(
                                  P, paper_frame())).row_names, cap_text="CAP", inert_all=True, n_train=600)  # fmt: skip
    (words,) = [s.data for s in shown]
    assert words.startswith(f"Of the paper's {len(rep.paper_rows)} claims, at the test profile:")
    assert "of our 4 own checks" in words and "0 rows rest on an arm still improving" in words
    assert "pFedMB's accuracy in the pairs ranges from 85.0 % to 87.0 %" in words
    assert (
        "each client was visited 2 times (on average, where only a share takes part; 4 in Dirichlet 0.4) for E = 1 epoch on 6000 of"
        in words
    )
    # the B = 5 runs' α: one client on one branch, one uniform: mean largest α 0.6
    assert f"0.60 in {S15}" in words and "(mean over layers, clients and seeds; uniform: 0.20, one branch: 1)" in words
    assert "the seed plan under Table II says how many seeds each claim needs: CAP." in words
    assert (
        "1 of the pilots' 1 choices sat at an edge" in words and "the runs use 1 of them: η = 0.1 (FedAvg) in" in words
    )
    assert "* **FedAMP.** In every setting FedAMP's attention is inert" in words
    shown.clear()
    sec_notes.closing_summary(params(seeds=[0]), pairs, runs=runs, reproduced=rep, fig3=fig3, arms=t2_arms(runs),
                              plan=t2_plan(runs), row_names=[], cap_text="", inert_all=False, n_train=600)  # fmt: skip
    assert shown[0].data.endswith("With 1 seed no claim is tested at this profile.")


def test_costs_ledger_sets_traffic_and_time_against_fedavg(shown):
    from pflkit.methods.pfedmb import multi_branch
    from pflkit.models import build_model

    runs = t2_runs(lost={(arm(F5, mb_label(10)), 2)})
    pairs, _ = pairs_world()
    net = multi_branch(build_model("mlp", (64,), 10, None), branches=3, shared_alpha=True, seed=0)
    ratio = sec_notes.costs_ledger(params(), pairs, runs=runs, finals=runs.finals(), net=net, s0=0)
    assert ratio == pytest.approx(3.0)
    note, ledger, md = shown
    assert note.startswith("pairs runs (B = 3): pFedMB uploads 3.00 × and downloads 1.00 × FedAvg's bytes")
    assert (
        set(ledger.setting) == {S15, F5} and len(ledger) == 10 + 3
    )  # every row of the first setting, pFedMB in Figure 5's
    row = ledger.set_index(["setting", "method"]).loc[(S15, mb_label(2))]
    assert row["up ÷ FedAvg"] == pytest.approx(3.0) and row["wall time ÷ FedAvg"] == pytest.approx(2.0)
    assert row["KB up per visit"] == pytest.approx(3e6 / 1e3 / (4 * 15))
    assert "pFedMB's wall time is 2.0 to 2.0 times FedAvg's at B = 2, 5" in md.data
    assert f"{mb_label(10)} in {F5}: timed on seeds 0 and 1" in md.data


def test_branch_cuts_count_the_traffic_of_partial_branching_and_dropped_branches(shown):
    from pflkit.methods.pfedmb import multi_branch
    from pflkit.models import build_model

    runs = t2_runs()
    pairs, _ = pairs_world()
    plain = build_model("mlp", (64,), 10, None)
    n_plain = sum(p.numel() for p in plain.parameters())
    net = multi_branch(plain, branches=3, shared_alpha=True, seed=0)
    sec_notes.branch_cuts(params(pair_branches=3, pilot_branches=5), pairs, runs=runs, net=net, n_plain=n_plain)
    partial, _, cuts = shown
    assert partial["share of P"].iloc[-1] == pytest.approx(1.0, abs=0.01)  # every layer branched: (about) all of P
    assert partial["traffic ÷ FedAvg (B = 3)"].iloc[-1] == pytest.approx(3.0, abs=0.02)
    assert list(cuts.index) == [0.01, 0.05, 0.1]
    # eq. 5 in the pairs: α 0.9 on one branch and 0.05 on the others: τ = 0.1 keeps one of three
    assert cuts.loc[0.1, "pairs, eq. 5 (shared α, B=3)"] == 0.33  # shown to two decimals
    assert cuts.loc[0.01, "pairs, eq. 5 (shared α, B=3)"] == pytest.approx(1.0)
    # Table II, B = 5: one client on one branch (1/5 kept), one uniform (all kept at 0.1 < 0.2)
    assert cuts.loc[0.1, f"{S15} (per-layer α, B=5)"] == pytest.approx((0.2 + 1.0) / 2)


def test_deviations_table_lists_the_baselines_options_in_words(shown):
    chosen = {PFEDMB: tiny_config(method="pfedmb"), "FedProx": tiny_config(method="fedprox", options={"mu": 0.25})}
    sec_notes.deviations_table(params(table2_settings=["S"]), {"S": Pilot(chosen, None, None, {}, [])})
    assert "(S;" in shown[0].data
    table = shown[1]
    assert table.loc[("FedProx", "proximal weight μ"), "value"] == "0.25"
    assert PFEDMB not in table.index.get_level_values("method")


def test_glue_texts_glue_the_parameters_sentences_and_setup_card(monkeypatch, shown):
    import myst_nb

    values, glued = {}, {}
    monkeypatch.setattr(sec_glue, "glue_values", values.update)
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: glued.__setitem__(name, value))
    runs = t2_runs()
    P = params()
    sec_glue.glue_texts(P, runs, paper=sec_t2.paper_table2(P, paper_frame()), cap_text="CAP", paper_peak=10)
    assert set(PROSE_NAMES) <= set(values) and values["SEEDS"] == [0, 1, 2]
    assert values["PAPER_GAP"].startswith("CIFAR10 Dirichlet 0.4 / 15 clients: -2.50")
    assert values["IFCA_K"] == 5 and values["PFEDME_K"] == 3 and values["FEDAMP_LAM"] == 0.1
    assert values["T2_CAP_TEXT"] == "CAP" and values["PAPER_PEAK"] == 10 and values["PAIR_GROUPS"] == 2
    assert values["SETTINGS_RUN_TEXT"].startswith("This profile runs 3 of the 6:")
    assert values["R2_LOCAL_TEXT"] == f"Local reaches 80.4 % in our {R15} runs (Table II)"
    assert values["PAPER_LOCAL_R2_50"] == "50.00" and values["WIDTH_TEXT"] == "8 and 16"
    assert values["E_TEXT"] == "E = 1 local epoch at this profile, against the paper's 5 (§V-A)."
    assert values["FIG5_ROUNDS_TEXT"] == "50 clients, 20 % per round: 10 rounds"
    assert values["CLIENT_SETUPS_TEXT"] == "15 clients, all in every round; 50 clients, 20 % per round"
    assert "| Seeds |" in glued["setup_card"].data or "Seeds" in glued["setup_card"].data
    assert values["DATA_TEXT"] == "Fashion-MNIST" and values["DEVIATIONS_TEXT"].startswith("Fashion-MNIST instead of")
    assert values["TRAIN_IMAGES_TEXT"] == "6000 (a 0.1 share of the 60 000)"
    P = params(datasets=["cifar10", "cifar100"], train_images=None, data_fraction=1.0)  # the paper's data
    sec_glue.glue_texts(P, runs, paper=sec_t2.paper_table2(P, paper_frame()), cap_text="CAP", paper_peak=10)
    assert values["DATA_TEXT"] == "CIFAR-10 and CIFAR-100" and values["TRAIN_IMAGES_TEXT"] == "all 50 000"
    assert values["DEVIATIONS_TEXT"].startswith("cifar10 and cifar100 as in the paper, the kit's LeNet with 8 and 16")
    P = params(alpha_lr_grid={"momentum": [1.0]})  # the paper profile's dry run: one variant on α
    sec_glue.glue_texts(P, runs, paper=sec_t2.paper_table2(P, paper_frame()), cap_text="CAP", paper_peak=10)
    assert values["ALPHA_GRID_MOM"] == [1.0] and values["ALPHA_GRID_PLAIN"] == []


def test_a_tuned_baseline_still_weak_is_explained_by_its_own_pilot_and_the_tables_seeds():
    from types import SimpleNamespace

    import pandas as pd

    from pflkit.chapters.pfedmb_sections import Pilot, tuned_baselines_why
    from pflkit.sweeps import SweepResult
    from tests.conftest import tiny_config

    val = {"lr=0.1 pFedMe": [0.78, 0.74], "lr=0.1 Local": [0.85, 0.84]}
    lr = SimpleNamespace(chosen={"pFedMe": "lr=0.1 pFedMe", "Local": "lr=0.1 Local"},
                         result=SimpleNamespace(values=lambda arm, m: 100 * pd.Series(val[arm])))  # fmt: skip
    cfg = tiny_config(method="pfedme", lr=0.1, options={"K": 3, "personal_lr": 0.03, "lam": 40.0})
    pilot = Pilot({"pFedMe": cfg, "Local": tiny_config()}, None, None, {"pFedMe": (lr, "pFedMe")}, [])
    setting = "Dirichlet 0.4 / 15 clients"

    def runs(gaps):  # pFedMe − Local per seed, in points
        rec = lambda acc: {"config": {"method": "x"}, "final": {"round": 1, "mean_acc": acc}, "diverged": True}  # noqa: E731
        records = {(f"{setting} · Local", s): rec(0.9) for s in range(len(gaps))}
        records |= {(f"{setting} · pFedMe", s): rec(0.9 + g / 100) for s, g in enumerate(gaps)}
        result = SweepResult(records, [f"{setting} · pFedMe", f"{setting} · Local"], range(len(gaps)))
        result.values = lambda arm, m: pd.Series(
            {s: 100 * records[arm, s]["final"]["mean_acc"] for s in range(len(gaps))}
        )
        return result

    grids = {"pfedme": {"personal_lr": [0.03], "lam": [15.0]}, "fedprox": {"mu": [0.01]}}
    why = tuned_baselines_why(
        {setting: pilot, "pairs": pilot._replace(chosen={"Local": cfg})}, grids, runs([-4.0, -3.5, -4.5])
    )
    assert list(why) == [f"{setting} · pFedMe"]  # a pilot without the method (or FedProx's FedAvg) explains nothing
    text = why[f"{setting} · pFedMe"]
    assert "personal η 0.03, λ 40, learning rate 0.1" in text and "76.0 % against Local's 84.5 %" in text
    assert "pFedMe − Local is -4.0" in text and "the method's at this budget" in text
    near = tuned_baselines_why({setting: pilot}, grids, runs([-2.0, 1.0, -2.0]))[f"{setting} · pFedMe"]
    assert "an interval that holds 0" in near
