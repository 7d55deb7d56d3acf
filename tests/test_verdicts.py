"""The verdict rule's "no difference" word and the seed plan."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pflkit.claims import claim_row, claims_table, mechanism, saturation, tally, verdict_text
from pflkit.verdicts import (
    DECISION_FLOOR,
    HEADLINE_SEEDS,
    SATURATED,
    SEED_CAP,
    PaperMargin,
    arm_seeds,
    headline_plan,
    plan_scale,
    planned_seeds,
    pooled_sd,
    sd_upper,
    seed_plan,
    seeds_needed,
    size_of,
    to_clear,
    verdict,
)


def test_no_difference_is_an_interval_inside_the_resolution_whichever_side_it_excludes():
    inside = [0.2, -0.1, 0.3]  # mean +0.13, 95 % CI about [-0.4, +0.7]
    assert verdict(inside).word == "no difference"  # points: m = 1 unless the claim states another
    assert verdict(inside, unit="ARI").word == "inconclusive"  # another unit: no m unless given
    assert verdict(inside, resolution=0.5).word == "inconclusive"  # the interval reaches past ± 0.5
    assert verdict([0.4, 0.5, 0.6]).word == "no difference"  # excludes 0, but wholly inside ± 1: both ways
    assert verdict([-0.4, -0.5, -0.6]).word == "no difference"
    assert verdict([1.4, 1.5, 1.6]).word == "reproduces" and verdict([-1.4, -1.5, -1.6]).word == "contradicted"
    assert verdict([-0.4, -0.5, -0.6], resolution=0.3).word == "contradicted"
    assert verdict([0.2, -0.1]).word == "not tested"
    assert "no difference (" in str(verdict(inside))


def test_a_comparable_claim_is_two_one_sided_tests_on_the_90_percent_interval():
    d = [0.9, -0.5, 0.2, 0.6, -0.3]  # 95 % CI about [-0.6, +0.9]; the 90 % one is narrower
    v = verdict(d, margin=1.0)
    assert v.test == "comparable" and v.level == 0.90 and v.word == "reproduces"
    assert v.hi - v.lo < verdict(d).hi - verdict(d).lo
    assert "90 % CI" in str(v)
    assert verdict([2.5, 3.0, 3.5], margin=1.0).word == "contradicted"
    assert verdict([0.0, 2.0, 1.0], margin=1.0).word == "inconclusive"


def test_a_tie_is_non_inferiority_at_minus_m():
    assert verdict([-0.3, -0.6, -0.4], margin=1.0, test="tie").word == "reproduces"
    assert verdict([-3.0, -3.4, -2.8], margin=1.0, test="tie").word == "contradicted"
    assert verdict([-2.0, 0.5, -1.0], margin=1.0, test="tie").word == "inconclusive"


def test_seeds_needed_is_the_smallest_n_whose_expected_half_width_fits():
    # t(0.975, 5) / √6 = 1.05 > 1 ≥ t(0.975, 6) / √7 = 0.92
    assert seeds_needed(1.0, 1.0) == 7
    assert seeds_needed(0.1, 1.0) == 3  # never fewer than a verdict needs
    assert seeds_needed(10.0, 0.5, most=50) is None


def test_the_spread_is_pooled_and_bounded_from_above():
    sd, dof = pooled_sd([[1, 2, 3], [10, 11, 12], [5]])  # a single seed adds nothing
    assert (sd, dof) == (1.0, 4)
    assert sd_upper(1.0, 2) > 1.5 and sd_upper(1.0, 2000) == pytest.approx(1.0, rel=0.05)
    assert math.isnan(pooled_sd([[1.0]])[0])


def test_the_distance_to_clear_is_to_the_nearest_boundary_a_verdict_can_cross():
    assert to_clear(3.0) == 3.0 and to_clear(-3.0) == 3.0  # a direction: clear 0
    assert to_clear(0.2, resolution=1.0) == 0.8  # near 0: fit inside ± 1 (no difference)
    assert to_clear(0.7, resolution=1.0) == 0.7  # nearer the edge: clear 0
    assert to_clear(-4.7, margin=2.0) == pytest.approx(2.7)  # a "no difference" claim far outside ± 2: contradict it
    assert to_clear(0.5, margin=2.0) == 1.5  # well inside: confirm it


def test_the_plan_names_the_seeds_or_says_underpowered_before_running():
    claims = {"wide": [4.0, -2.0, 6.0], "tight": [0.1, 0.2, 0.0], "lonely": [1.0], "done": [1.0, 1.1, 0.9]}
    own = seed_plan(claims, pool=False)
    assert own.loc["tight", "to clear (points)"] == DECISION_FLOOR  # no plan resolves less than the floor
    assert own.loc["tight", "plan"] == "4 seeds"  # sd 0.1, bounded to 0.21 on 2 dof: 4.30 · 0.21 / √3 > 0.5
    assert (
        own.loc["done", "plan"] == "none added: its pilot seeds decide it (reproduces there)"
        and own.loc["done", "seeds needed"] == 3
    )
    assert own.loc["wide", "plan"].startswith("underpowered (needs ") and own.loc["wide", "seeds needed"] > SEED_CAP
    assert own.loc["lonely", "plan"] == "not tested (no spread)"
    pooled = seed_plan(claims)  # like claims share one spread
    assert pooled["sd assumed"].nunique() == 1 and pooled.loc["lonely", "plan"] != "not tested (no spread)"
    near = seed_plan({"wide": [1.0, -2.0, 1.6]}, resolution=1.0, pool=False)  # mean +0.2: must fit inside ± 1
    far = seed_plan({"wide": [9.0, 2.0, 6.0]}, resolution=1.0, pool=False)  # the same spread, mean +5.7
    assert near.loc["wide", "plan"].startswith("underpowered") and far.loc["wide", "plan"] == "10 seeds"


def test_a_headline_plan_is_sized_to_the_carried_margin_from_the_spread_never_the_mean():
    assert plan_scale((4.0,), m=1.0) == 2.0  # half the carried margin: the interval cannot hold both 0 and it
    assert plan_scale((0.3, 2.0), m=1.0) == DECISION_FLOOR  # a margin below m is a tie: half of m
    assert plan_scale((), m=1.0) == 0.5 and plan_scale((), m=None) == DECISION_FLOOR
    assert plan_scale((-3.0,), m=1.0) == 1.5  # the magnitude
    spread = [1.0, -1.0, 2.0, 0.0, 1.5]
    shifted = [x + 7.0 for x in spread]  # the same spread, another mean: the same plan
    assert headline_plan(spread, (4.0,)) == headline_plan(shifted, (4.0,))
    seeds, need, scale = headline_plan(spread, (4.0,))
    assert scale == 2.0 and need == seeds_needed(sd_upper(*pooled_sd([spread])), 2.0)
    assert seeds == min(SEED_CAP, max(HEADLINE_SEEDS, need))
    assert headline_plan([0.1, 0.2, 0.0], (20.0,))[0] == HEADLINE_SEEDS  # a sure claim still runs five
    wide = headline_plan(spread, (0.6,))  # a tie: half of m, far beyond the cap
    assert wide[0] == SEED_CAP and wide[1] > SEED_CAP
    assert headline_plan(spread, (4.0,), cap=3)[0] == 3  # never past the cap


def test_an_undecided_headline_reads_by_its_own_plan_and_shows_it():
    pm = PaperMargin("+4.0", values=[(84.0, 80.0)])  # carried to our 80 % comparator: +4.0
    short = claim_row("h", verdict([2.0, -0.5, 1.0, 3.0, 0.0]), pm, headline=True, ours_b=80.0)
    planned = headline_plan([2.0, -0.5, 1.0, 3.0, 0.0], (4.0,))
    assert short["verdict"] == "underpowered" and short["plan"] == str(planned[0]) and planned[0] > 5
    assert short["notes"].startswith(f"planned {planned[0]} seeds for a half-width of 2 (half the carried")
    assert f"(5 of {planned[0]} planned seeds)" in short["ours (a − b, 95 % CI)"]
    tie = claim_row(
        "h",
        verdict([0.6, -0.5, 0.2, 0.4, -0.3]),
        PaperMargin("+0.1", values=[(80.1, 80.0)]),
        headline=True,
        ours_b=80.0,
    )  # a tie in the paper: sized to half of m, past the cap
    assert tie["verdict"] == "reproduces" and tie["plan"].startswith(f"{SEED_CAP} (needs ")
    saturated = claim_row("h", verdict([2.0, -0.5, 1.0]), pm, headline=True, ours_b=99.5, saturated="saturated: x")
    assert saturated["plan"] == "" and saturated["verdict"] == "not tested"  # no room for the effect: no plan
    decided = claim_row("h", verdict([5.0, 5.2, 5.4]), pm, headline=True, ours_b=80.0)
    assert decided["verdict"] == "reproduces" and decided["plan"] == "5"  # decided stays decided, plan shown
    assert "(3 of 5 planned seeds)" in decided["ours (a − b, 95 % CI)"]
    assert claim_row("h", verdict([3.0, -2.0, 1.0]), pm, ours_b=80.0)["plan"] == ""  # not a headline: no plan


def test_a_section_plan_sizes_its_headlines_to_the_carried_margin_and_runs_them_there():
    claims = {"head": [1.0, 3.0, 2.0], "rest": [1.0, 3.0, 2.0]}  # the same pilot: only the headline rule differs
    plan = seed_plan(claims, headlines={"head": (3.0,)})
    assert plan.loc["head", "to clear (points)"] == 1.5  # half the carried margin, not the pilot's mean
    runs = int(plan.loc["head", "seeds run"])
    assert (
        runs == min(SEED_CAP, max(HEADLINE_SEEDS, plan.loc["head", "seeds needed"]))
        and plan.loc["head", "plan"] == f"{runs} seeds (a headline)"
    )
    assert pd.isna(plan.loc["rest", "seeds run"])  # not a headline: the pilot's rule
    # seed counts are whole numbers on the page ("3", never "3.0"), a missing one <NA> (shown "—")
    assert all(str(plan[c].dtype) == "Int64" for c in ("pilot seeds", "seeds needed", "seeds run"))
    shifted = seed_plan({"head": [11.0, 13.0, 12.0], "rest": [1.0, 3.0, 2.0]}, headlines={"head": (3.0,)})
    assert shifted.loc["head", "seeds run"] == runs  # the mean is never read
    assert arm_seeds(plan, {"head": ["A", "B"], "rest": ["C"]}, [0, 1, 2])["A"] == list(range(runs))
    row = claim_row("head", verdict([1.0, 3.0, 2.0]), PaperMargin("+3.0", [3.0]), headline=True, plan=plan)
    assert row["plan"] == str(runs) and f"(3 of {runs} planned seeds)" in row["ours (a − b, 95 % CI)"]
    tie = seed_plan({"head": [0.9, -1.0, 0.5]}, headlines={"head": ()}, resolution=1.0)
    assert tie.loc["head", "plan"].startswith("underpowered (needs ") and tie.loc["head", "seeds run"] == SEED_CAP


def test_planned_seeds_run_to_the_largest_decidable_plan():
    plan = seed_plan({"a": [0.1, 0.2, 0.0], "b": [4.0, -2.0, 6.0]}, pool=False)
    assert planned_seeds(plan, [0, 1, 2]) == [0, 1, 2, 3]  # "a" needs 4; "b" is underpowered and adds none
    assert planned_seeds(plan.drop(index="a"), [0, 1, 2]) == [0, 1, 2]
    row = claim_row("b", verdict([4.0, -2.0, 6.0]), plan=plan)
    assert row["verdict"] == "underpowered" and row["notes"].startswith("needs ")
    assert claim_row("b", verdict([4.0, 5.0, 6.0]), plan=plan)["verdict"] == "reproduces"  # decided stays decided


def test_each_arm_runs_to_the_plan_of_the_claims_that_compare_it():
    plan = seed_plan({"a": [0.1, 0.2, 0.0], "b": [4.0, -2.0, 6.0], "c": [1.0, 1.1, 0.9]}, pool=False)
    seeds = arm_seeds(plan, {"a": ["X", "Base"], "b": ["Y", "Base"], "c": ["Z", "Base"]}, [0, 1, 2], arms=["W"])
    assert seeds == {"W": [0, 1, 2], "X": [0, 1, 2, 3], "Base": [0, 1, 2, 3], "Y": [0, 1, 2], "Z": [0, 1, 2]}
    head = arm_seeds(plan, {"a": ["X", "Base"], "c": ["Z"]}, [0, 1, 2], least={"c": 5})  # a headline: 5 at least
    assert head["Z"] == [0, 1, 2, 3, 4] and head["X"] == [0, 1, 2, 3]
    assert arm_seeds(plan, {"c": ["Z"]}, [0, 1, 2], cap=4, least={"c": 5})["Z"] == [0, 1, 2, 3]  # within the cap


class _Result:  # what saturation() reads of a SweepResult: arms and per-seed values
    def __init__(self, means):
        self.arms = list(means)
        self._m = means

    def values(self, arm, metric="mean_acc"):
        return pd.Series([self._m[arm] - 0.1, self._m[arm], self._m[arm] + 0.1])

    def paired(self, a, b, metric="mean_acc"):
        return self.values(a, metric) - self.values(b, metric)


def test_saturation_flags_a_ceiling_or_arms_that_all_agree():
    assert saturation(_Result({"A": 98.5, "B": 90.0})).startswith("saturated: strongest arm 98.5 %")
    assert "all 2 arms within 1 point" in saturation(_Result({"A": 80.0, "B": 80.4}))
    assert saturation(_Result({"A": 80.0, "B": 85.0})) == ""
    row = claim_row("A beats B", verdict([1.0, 1.2, 0.8]), headline=True, saturated="saturated: x")
    assert row["headline"] is False and row["notes"] == "saturated: x" and row["verdict"] == "not tested"
    assert row["flags"] == ["saturated"]


def test_an_inert_mechanism_is_a_flag_beside_the_word_wherever_the_claim_is_printed(tmp_path, monkeypatch):
    from pflkit.claims import flagged, verdict_text

    inert = mechanism("weights differ", verdict([0.1, -0.1, 0.0], resolution=1.0), control="a shared embedding")
    acts = mechanism("weights differ", verdict([5.0, 6.0, 7.0], resolution=1.0), control="a shared embedding")
    assert inert["verdict"] == "no difference" and inert["flags"] == ["mechanism inert"]
    assert (
        inert["notes"] == "against a shared embedding"
        and verdict_text(inert) == "**no difference** · *mechanism inert*"
    )
    assert acts["verdict"] == "reproduces" and acts["flags"] == []
    head = claim_row("beats", verdict([2.0, 3.0, 4.0], budget=True), headline=True, mechanism=inert, rising="A +1.5")
    assert head["verdict"] == "reproduces" and head["headline"] is True and flagged(head, "mechanism inert")
    assert head["flags"] == ["budget-limited (A +1.5 points over the last fifth)", "mechanism inert"]
    assert "mechanism: no difference · mechanism inert, +0.0 [" in head["notes"]  # what the check measured
    assert claim_row("beats", verdict([2.0, 3.0, 4.0]), mechanism=acts)["flags"] == []
    both = claim_row("beats", verdict([2.0, 3.0, 4.0]), mechanism=[acts, inert, inert])  # several checks: one flag
    assert both["flags"] == ["mechanism inert"] and both["notes"].count("mechanism: ") == 3
    f = tmp_path / "claims.csv"
    monkeypatch.setenv("PFLBOOK_CLAIMS_FILE", str(f))
    table = claims_table([inert, acts, head])
    assert list(table.columns)[-1] == "notes" and len(pd.read_csv(f)) == 3
    assert (
        table.loc["beats", "verdict"]
        == "reproduces · budget-limited (A +1.5 points over the last fifth) · mechanism inert"
    )
    t = tally(pd.read_csv(f))
    assert t["claims"] == 3 and t["reproduces"] == 2 and t["no difference"] == 1 and t["mechanism inert"] == 2
    assert t["budget-limited"] == 1 and t["open"] == 0 and "saturated" not in t
    monkeypatch.delenv("PFLBOOK_CLAIMS_FILE")
    assert "notes" not in claims_table([claim_row("c", verdict([1.0, 1.1, 0.9]))]).columns


def test_the_headroom_pilot_picks_the_split_whose_local_validation_is_nearest_the_papers(monkeypatch):
    from pflkit import tuning

    acc = {"c=2": (97.0, 96.0), "c=4": (87.0, 80.0), "c=6": (75.0, 86.5)}  # (validation, test)

    class Fake:
        def finals(self):
            return pd.DataFrame([{"arm": a, "seed": 0, "val_mean_acc": v, "mean_acc": t} for a, (v, t) in acc.items()])

    monkeypatch.setattr(tuning, "sweep", lambda grid, seeds, store, **kw: Fake())
    chosen, table = tuning.headroom(dict.fromkeys(acc), 86.5, [0], None)
    assert chosen == "c=4"  # chosen on validation, although c=6's test accuracy is nearer
    assert list(table["within ±3"]) == ["no", "yes", "no"] and table.loc["c=4", "chosen"] == "←"


def test_the_verdict_rule_page_states_the_kits_numbers():
    from pflkit import pages, verdicts
    from pflkit.sweeps import IMPROVING_POINTS, RISING_POINTS

    text = pages.verdict_rule()
    flat = text.replace("\n   ", " ")
    assert f"at most {verdicts.SEED_CAP}" in text and f"{verdicts.CEILING:g} points of 100 %" in text
    assert f"exceeds {RISING_POINTS:g} point with the lower bound" in flat and "**mechanism inert**" in text
    assert f"gain exceeds {IMPROVING_POINTS:g} point runs on" in flat and f"{100 * verdicts.EQUIVALENCE:.0f} %" in text
    assert "{" not in text.replace("\\mathrm{acc}", "").replace("{0.975", "").replace("\\sqrt{n}", "")


def test_findings_lead_with_mechanisms_and_headlines():
    from pflkit.pages import findings

    mech = mechanism(
        "Mechanism (x): weights differ", verdict([5.0, 6.0, 7.0], resolution=1.0), control="a shared embedding"
    )
    head = claim_row("A beats B", verdict([2.0, 3.0, 4.0]), paper="+1.7", headline=True, mechanism=mech)
    other = claim_row("C beats D", verdict([1.0, -1.0, 2.0]), saturated="saturated: x")
    text = findings([other, head, mech])
    short = text.split(":::")[0]  # the bullets above the folded list
    assert short.index("weights differ: **reproduces**") < short.index("A beats B: **reproduces**")
    assert "+6.0" not in short and "+6.0" in text  # a mechanism's numbers: in the folded list only
    assert "C beats D" not in text and "Mechanism (x)" not in short and "the paper: +1.7" in short
    assert (
        "The paper's 2 claims: 1 not tested, 1 reproduces (flagged: 1 saturated); our 1 own check: 1 reproduces."
        in text
    )
    assert "(mechanism: reproduces, +6.0 [" in text.split(":::")[1]  # the notes, folded
    many = [claim_row(f"H{i} beats B", verdict([2.0, 3.0, 4.0]), headline=True) for i in range(7)]
    bullets = [
        line for line in findings([mech, *many], bullets=5).split(":::")[0].splitlines() if line.startswith("* ")
    ]
    assert len(bullets) == 5 and bullets[-1] == "* 4 more headline claims (4 reproduces): in the list below."
    plain = findings([other, claim_row("E beats F", verdict([2.0, 3.0, 4.0]))])
    assert "* **not tested** (1): C beats D." in plain and ":::" not in plain  # no lead claim: one bullet per word


def test_the_glance_table_leads_with_the_papers_claims_in_the_papers_order_whatever_the_verdict():
    from pflkit.claims import claims_data, lead
    from pflkit.pages import findings, glance

    inert = mechanism("Mechanism: routes differ", verdict([0.0, 0.0, 0.0], resolution=1.0), control="one route")
    second = lead(claim_row("T2: A beats C", verdict([-2.0, -3.0, -4.0]), paper="+4.2 vs pFedMe (CIFAR-10)"), 2,
                  "A beats C", setting="FMNIST, 10 clients", why="the baseline is stronger here")  # fmt: skip
    first = lead(claim_row("T1: A beats B", verdict([2.0, 3.0, 4.0]), mechanism=inert), 1, "A beats B",
                 setting="FMNIST, 50 clients", why="the router gives every client the same decision")  # fmt: skip
    table = glance(claims_data([inert, second, first]))
    assert list(table["The paper claims"]) == ["A beats B", "A beats C"] and len(table.columns) <= 7
    assert list(table["Verdict"]) == ["reproduces · mechanism inert", "contradicted"]
    from pflkit.pages import compact_flag

    assert (
        compact_flag("budget-limited (B=2 +3.1, FedFomo +1.7 points over the last fifth)")
        == "budget-limited (+3.1, +1.7 points still rising)"
    )
    assert compact_flag("saturated") == "saturated"
    assert (
        table.loc[1, "The paper's margin"] == "+4.2 vs pFedMe (CIFAR-10)" and table.loc[0, "The paper's margin"] == "—"
    )
    text = findings([inert, second, first])
    assert text.startswith("**Results at a glance.** Ours: Fashion-MNIST, LeNet-scale models, CPU budgets, 3 seeds")
    assert text.index("| A beats B |") < text.index("| A beats C |") < text.index("Does the mechanism act?")
    assert "The paper's 2 claims: 1 contradicted, 1 reproduces (flagged: 1 mechanism inert); our 1 own check" in text


def test_the_glance_sentence_counts_the_headlines_that_ran_to_their_plan():
    from pflkit.pages import plans_sentence, runs_sentence

    d = pd.DataFrame({"lead": ["1", "2", "3"], "seeds": [5, 7, 3], "plan": ["10 (needs 58)", "7", ""]})
    assert plans_sentence(d).startswith(" 1 of the 2 headlines ran to their seed plan")
    assert runs_sentence(d).endswith(plans_sentence(d)) and "3–7 seeds" in runs_sentence(d)
    assert plans_sentence(d.drop(columns="plan")) == "" and plans_sentence(d.assign(plan="")) == ""


def test_an_undecided_claim_short_of_its_plan_says_how_many_seeds_ran():
    plan = seed_plan({"a": [0.1, 0.2, 0.0]}, pool=False)  # 4 seeds
    row = claim_row("a", verdict([1.5, -0.5, 0.6]), plan=plan)
    assert row["verdict"] == "underpowered" and row["notes"] == "planned 4 seeds, 3 run"
    assert claim_row("a", verdict([0.1, 0.2, 0.0, 0.3]), plan=plan)["notes"] == ""


def test_parameters_read_as_prose():
    from pflkit.pages import Plain, prose

    assert prose([10, 50, 100]) == "10, 50 and 100" and prose([7]) == "7" and prose((None, None)) == "all and all"
    assert prose({"mu": 0.01, "K": 3}) == "mu = 0.01 and K = 3" and prose({}) == "none"
    assert prose(None, none="one epoch") == "one epoch" and prose(5e-3) == "0.005" and prose(1000) == "1000"
    assert repr(Plain("10 clients")) == "10 clients"


def test_missing_values_read_as_a_dash():
    import numpy as np

    from pflkit.pages import missing_as_dash

    html = pd.DataFrame({"paper": [1.5, np.nan], "note": ["NaN flu", None]}).to_html()
    out = missing_as_dash(html)
    assert out.count("<td>—</td>") == 2 and "<td>1.5</td>" in out
    assert "NaN flu" in out  # text that merely contains it stays


def test_an_arm_keeps_its_colour_across_panels():
    from pflkit.plots import arm_palette

    pal = arm_palette(["FedAvg", "pFedHN", "FedAvg", "Local"])
    assert list(pal) == ["FedAvg", "pFedHN", "Local"] and len(set(pal.values())) == 3
    assert arm_palette(["FedAvg", "pFedHN", "Local"]) == pal  # the same arms, the same colours
    lead = arm_palette(["FedAvg", "pFedHN", "Local", "pFedHN-PC", "LG-FedAvg", "FedPer"], method="pFedHN")
    assert lead["pFedHN"] == (214 / 255, 39 / 255, 40 / 255) and lead["pFedHN-PC"] != lead["pFedHN"]
    assert not any(r > 0.6 and g < 0.35 and b < 0.35 for a, (r, g, b) in lead.items() if not a.startswith("pFedHN"))


def test_the_claims_plot_draws_each_claim_in_points_and_the_paper_s_number():
    from pflkit.plots import claims_plot, paper_number

    assert paper_number("+1.7 vs LG-FedAvg (CIFAR-10)") == 1.7 and paper_number("−2.3 (PFLlib)") == -2.3
    assert paper_number("FeSEM(3) − FedAvg: +2.1") is None and paper_number("+78 % denoising") is None
    assert paper_number("3–4 layers best (88.38, 88.42 %)") is None and paper_number("+0.1 (CIFAR-10)") == 0.1
    rows = [claim_row("A beats B", verdict([2.0, 3.0, 4.0]), paper="+1.7 vs B"),
            claim_row("ARI claim", verdict([0.1, 0.2, 0.3], unit="ARI")),  # another unit: left out
            claim_row("C beats D", verdict([1.0]))]  # one seed: no interval to draw  # fmt: skip
    fig = claims_plot(rows)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["A beats B"]
    assert (
        ax.get_title()
        == "1 of the 3 claims: the others are in other units than points or have too few seeds for an interval"
    )
    assert "the paper (×)" in ax.get_xlabel()
    assert claims_plot(rows[1:]) is None
    bare = claims_plot([claim_row("A beats B", verdict([2.0, 3.0, 4.0]))])  # no paper number: no cross
    assert "×" not in bare.axes[0].get_xlabel() and bare.axes[0].get_title() == ""
    assert [h.get_label() for h in bare.axes[0].get_legend().legend_handles] == ["reproduces"]


def test_intervals_print_as_mean_and_half_width_or_the_two_values():
    from pflkit.verdicts import fmt_interval

    assert fmt_interval([1.0]) == "1.0" and fmt_interval([1.0, 3.0]) == "2.0 (1.0, 3.0)"
    assert fmt_interval([1.0, 2.0, 3.0]) == "2.0 ± 2.5"  # t(2) = 4.30 × 1 / √3


def test_short_labels_keep_both_ends():
    from pflkit.plots import short_label

    assert short_label("short", 10) == "short"
    cut = short_label("under concept shift FedMN beats FedEM", 21)
    assert cut == "under conc…eats FedEM" and len(cut) == 21
    alike = [f"ours: the paper's FedMN − {x} (both at the paper arm's tuned rate)" for x in ("softmax", "no annealing")]
    from pflkit.plots import two_line_labels

    two = two_line_labels(["a short one", "pathological: FedPer beats FedAvg's global model", *alike], 30)
    assert two[:2] == ["a short one", "pathological: FedPer beats\nFedAvg's global model"]  # whole words, no cut
    same = two_line_labels([f"{w}: FedPer beats FedAvg's global model" for w in ("pathological", "dirichlet(0.1)")], 30)
    assert same == [
        "pathological: FedPer beats\nFedAvg's global model",
        "dirichlet(0.1): FedPer beats\nFedAvg's global model",
    ]
    assert two[2] == "ours: the paper's FedMN −\nsoftmax (both…m's tuned rate)"  # longer: the rest cut in its middle


def test_findings_name_a_check_made_in_several_settings_once():
    from pflkit.pages import findings

    def mech(where, values):
        return mechanism(f"{where}: mechanism: c moves", verdict(values, resolution=1.0), control="uniform c")

    rows = [mech("Table 1, A", [5.0, 6.0, 7.0]), mech("Table 1, B", [5.0, 6.0, 7.0]), mech("Table 2", [1.0, -1.0, 2.0])]
    bullet = findings(rows).splitlines()[0]
    assert (
        bullet
        == "* **Does the mechanism act?** c moves: **reproduces** (Table 1, A and B), **inconclusive** (Table 2)."
    )
    rows.append(mech("Table 2, C", [5.0, 6.0, 7.0]))
    assert "**reproduces** (Table 1, A and B; Table 2, C)" in findings(rows)
    one = findings([mechanism("Mechanism (x): weights differ", verdict([5.0, 6.0, 7.0]), control="y")])
    assert one.splitlines()[0] == "* **Does the mechanism act?** weights differ: **reproduces**."


def test_seeds_text_says_seeds_as_prose():
    from pflkit.verdicts import seeds_text

    assert seeds_text([4]) == "seed 4" and seeds_text([0, 1, 4]) == "seeds 0, 1 and 4"
    assert seeds_text(1) == "1 seed" and seeds_text(3) == "3 seeds"


def test_the_papers_margin_is_against_its_strongest_comparator_in_the_published_table():
    from pflkit.results import margin_text, paper_margin, paper_results

    p = paper_results("pfedhn")
    t2 = p[(p.table == "Table 2") & (p.dataset == "CIFAR10")]
    by_size = {w: dict(zip(d.method, d.value)) for w in "SML" if len(d := t2[t2.setting.str.endswith(f"size {w}")])}
    assert [margin_text(by_size[w], "pFedHN") for w in "SML"] == ["+4.2 vs pFedMe", "+2.8 vs pFedMe", "+4.1 vs pFedMe"]
    t1 = p[(p.table == "Table 1") & (p.dataset == "CIFAR10")]
    col = {n: dict(zip(d.method, d.value)) for n in (10, 50, 100) if len(d := t1[t1.setting == f"{n} clients"])}
    texts = [margin_text(col[n], "pFedHN", exclude=("pFedHN-PC",), dataset="CIFAR-10") for n in (10, 50, 100)]
    assert texts == ["+1.7 vs LG-FedAvg (CIFAR-10)", "+2.3 vs pFedMe (CIFAR-10)", "+2.7 vs pFedMe (CIFAR-10)"]
    assert paper_margin({"A": 80.0, "A-PC": 90.0, "B": 70.0}, "A", exclude=("A-PC",)) == (10.0, "B")
    with pytest.raises(KeyError):
        paper_margin({"B": 1.0}, "A")


def test_lead_claims_are_marked_in_the_papers_order_and_never_dropped_in_silence():
    from pflkit.claims import mark_leads
    from pflkit.errors import PflkitError

    rows = [claim_row(t, verdict([1.0, 2.0, 3.0])) for t in ("Table 2: A beats B", "Table 1: A beats C", "Table 1: D")]
    marked = mark_leads(rows, [("Table 1: A", "A beats C", "FMNIST", "why"), ("Table 2", "A beats B", "FMNIST", "")])
    assert [r.get("lead") for r in marked] == [2, 1, None] and marked[1]["short"] == "A beats C"
    with pytest.raises(PflkitError, match="2 claims start with 'Table 1'"):
        mark_leads(rows, [("Table 1", "x", "y", "z")])
    with pytest.raises(PflkitError, match="0 claims start with 'Table 9'"):
        mark_leads(rows, [("Table 9", "x", "y", "z")])


def test_a_claims_arms_budget_names_each_arms_rounds_and_last_fifth_gain():
    from pflkit.claims import arms_budget

    class Result:
        def finals(self):
            return pd.DataFrame({"arm": ["A", "A", "B"], "rounds": [40, 40, 20], "gain_last_fifth": [0.2, 0.6, 1.5]})

    assert arms_budget(Result(), "A", "B", "A") == "A 40 rounds (+0.4), B 20 rounds (+1.5)"
    assert arms_budget(Result(), "C") == ""  # an arm without runs says nothing


def test_the_paper_margin_is_carried_as_a_relative_reduction_of_error():
    pm = PaperMargin("+1.7 vs B (CIFAR-10)", [1.72], datasets=["CIFAR10"], values=[(90.83, 89.11)])
    assert str(pm) == "+1.7 vs B (CIFAR-10)"  # prints as its text, wherever a string goes
    (c,) = pm.carried(80.0)  # the paper removes 15.8 % of B's error; ours has 20 points of it
    assert c == pytest.approx((90.83 - 89.11) / (100 - 89.11) * 20.0)
    assert pm.carried(None) == (pytest.approx(1.72),)  # no comparator of ours: as printed
    assert PaperMargin("x", [2.0]).carried(80.0) == (2.0,)  # not a difference of accuracies: as printed
    assert pm.tie(1.0) is False and PaperMargin("x", [0.01]).tie(1.0) is True
    assert PaperMargin("x", values=[(80.0, 78.5)]).margins == (1.5,)  # the margins follow from the accuracies
    named = pm.prefixed("A − B: ")
    assert named == "A − B: +1.7 vs B (CIFAR-10)" and named.values == pm.values and named.margins == pm.margins


def test_the_size_reads_our_interval_against_the_carried_margin_in_the_paper_s_direction():
    assert size_of(0.5, 3.0, [2.0]) == "as the paper's"
    assert size_of(-4.8, 2.9, [7.5]) == "smaller than the paper's"
    assert size_of(3.0, 5.0, [2.0]) == "larger than the paper's"
    assert size_of(-1.0, 3.0, [2.0]) == "size undetermined"
    assert size_of(-3.0, -0.5, [-2.0]) == "as the paper's"  # a negative paper margin: its direction
    assert size_of(-0.4, 0.2, [-2.0]) == "smaller than the paper's"
    assert size_of(-4.0, 2.0, [0.5, 9.0]) == "size undetermined"  # several datasets: their range
    # a comparable claim (the paper: +0.1, no difference) with a large difference of ours: larger, by magnitude
    assert size_of(-7.4, -3.6, [0.1], direction=-1.0) == "larger than the paper's"


def test_claim_rows_judge_size_ties_and_saturation_by_headroom():
    pm = PaperMargin("+7.5 vs FedMD", [7.5], values=[(75.5, 68.0)])
    wide = claim_row("a beats b", verdict([-1.0, 1.0, 0.0]), pm, ours_b=80.0)
    assert wide["size"] == "smaller than the paper's" and wide["carried"] == "+4.7"
    assert wide["verdict"] == "inconclusive" and "carried +4.7" in wide["notes"]
    assert "smaller than the paper's" in verdict_text(wide)
    # the same paper margin near our ceiling: the carried effect (0.5) is below m, no room
    sat = claim_row("a beats b", verdict([-0.4, -0.6, -0.1]), pm, ours_b=98.5, headline=True)
    assert sat["verdict"] == "not tested" and SATURATED in sat["flags"] and not sat["headline"] and sat["size"] == ""
    beyond = claim_row("a beats b", verdict([-3.0, -3.5, -2.5]), pm, ours_b=98.5)
    assert beyond["verdict"] == "contradicted" and SATURATED in beyond["flags"]  # wholly beyond − m
    # a paper margin below m is a tie: non-inferiority at − m
    tie = claim_row(
        "a beats b", verdict([-0.2, -0.6, -0.4]), PaperMargin("+0.01", [0.01], values=[(73.53, 73.52)]), ours_b=80.0
    )
    assert tie["_v"].test == "tie" and tie["verdict"] == "reproduces" and "non-inferiority" in tie["notes"]
    # no numeric margin: no size, and the chapter's own saturation reason stands
    plain = claim_row("a beats b", verdict([2.0, 3.0, 2.5]), "heatmaps", saturated="saturated: 99 %")
    assert plain["size"] == "" and plain["verdict"] == "not tested"


def test_an_undecided_claim_short_of_its_plan_is_underpowered():
    plan = pd.DataFrame({"seeds needed": [6], "plan": ["6 seeds"]}, index=["c"])
    need = 6
    short = claim_row("c", verdict([3.0, -2.0, 4.0]), plan=plan)
    assert need > 3 and short["verdict"] == "underpowered" and f"planned {need} seeds, 3 run" in short["notes"]


def test_the_bottom_line_says_each_lead_claims_word_size_and_flags_in_the_papers_order():
    from pflkit.claims import claims_data, lead
    from pflkit.pages import bottom_line

    pm = PaperMargin("+2.0", [2.0], values=[(80.0, 78.0)])
    rows = [
        lead(
            claim_row("Table 1: A beats B", verdict([2.0, 3.0, 2.5]), pm, ours_b=78.0),
            1,
            "Table 1: A beats B",
            setting="",
        ),
        lead(
            claim_row("Table 2: A beats C", verdict([0.1, -0.2, 0.0]), pm, ours_b=99.5),
            2,
            "Table 2: A beats C",
            setting="",
        ),
        claim_row("ours: A beats D", verdict([2.0, 3.0, 2.5])),  # not a lead claim: not in the sentence
    ]
    line = bottom_line(claims_data(rows), "Paper X", "Our split is milder.")
    assert line.startswith("Of the 2 lead claims of Paper X, on Fashion-MNIST with LeNet-scale models at CPU budgets: ")
    assert "1 reproduces (Table 1: as large as the paper's)" in line
    assert "1 is not tested, saturated, with no room for the paper's effect at our accuracies (Table 2)" in line
    assert line.endswith("Our split is milder.") and "ours: A beats D" not in line
    assert bottom_line(claims_data(rows[2:]), "Paper X") == ""  # no lead claim: nothing to say
    assert "on Fashion-MNIST" not in bottom_line(claims_data(rows), "Paper X", runs=False)


def test_a_baseline_reported_above_local_or_fedavg_and_far_below_it_here_is_marked_weak():
    from pflkit.claims import explain_weak, weak_arms
    from pflkit.results import reported_above

    reported = {"pFedMe": {"Local": ["pFedHN Table 1"], "FedAvg": ["PFLlib"]}, "Per-FedAvg": {"FedAvg": ["PFLlib"]}}
    res = _Result({"Local": 90.0, "FedAvg": 80.0, "pFedMe": 86.9, "Per-FedAvg": 79.5, "Ditto": 60.0, "pFedMe (L)": 70.0,
                   "Local (L)": 71.0})  # fmt: skip
    marks = weak_arms(res, ["pFedMe", "Per-FedAvg", "Ditto", "pFedMe (L)", "Local"], reported=reported)
    # 3.1 below Local: marked; 0.5 below FedAvg: within 1 point; Ditto: no table reports it above; a variant
    # is held against its own variant's Local ("Local (L)", 1 point above: not marked); Local is the reference
    assert marks == {"pFedMe": "pFedMe 3.1 points below Local (pFedHN Table 1 reports it above)"}
    more = _Result({"FedAvg": 80.0, "Per-FedAvg": 79.5})
    more.values = lambda a, m="mean_acc": pd.Series({"FedAvg": {0: 80.0, 1: 80.0, 2: 80.0, 3: 90.0, 4: 90.0},
                                                     "Per-FedAvg": {0: 79.5, 1: 79.5, 2: 79.5}}[a])  # fmt: skip
    assert weak_arms(more, ["Per-FedAvg"], reported=reported) == {}  # 0.5 below on the seeds both ran, not 4.5
    prefixed = _Result({"A · Local": 90.0, "A · pFedMe": 80.0, "B · Local": 70.0, "B · pFedMe": 69.0})  # pFedMB's names
    assert list(weak_arms(prefixed, ["A · pFedMe", "B · pFedMe"], reported=reported)) == ["A · pFedMe"]
    row = claim_row("X beats pFedMe", verdict([1.0, 1.2, 0.8]), weak=marks)
    assert "weak baseline" in row["flags"] and row["unexplained"] == "pFedMe"
    assert "not yet explained" in row["notes"]
    row = claim_row("X beats pFedMe", verdict([1.0, 1.2, 0.8]), weak=marks, explained={"pFedMe": "control run c"})
    assert (
        row["unexplained"] == ""
        and "weak baseline: pFedMe 3.1 points below Local (pFedHN Table 1 reports it above): control run c"
        in row["notes"]
    )
    # by method, for every variant of it; and after the fact, for a reason a later run on the page found
    later = claim_row("X beats pFedMe", verdict([1.0, 1.2, 0.8]), weak={"pFedMe (L)": "pFedMe (L) 9 below"})
    assert later["unexplained"] == "pFedMe (L)" and "pFedMe (L) 9 below: not yet explained" in later["notes"]
    (done,) = explain_weak([later], {"pFedMe": "untuned (pilot p)"})
    assert done["unexplained"] == "" and "pFedMe (L) 9 below: untuned (pilot p)" in done["notes"]
    assert explain_weak([later], {"Ditto": "d"})[0]["unexplained"] == "pFedMe (L)"
    # the published tables: PFLlib reports pFedMe above FedAvg, pFedHN's Table 1 above Local; papers' own methods are no baselines
    table = reported_above()
    assert "PFLlib" in table["pfedme"]["FedAvg"] and "pFedHN Table 1" in table["pfedme"]["Local"]
    assert not any(k.startswith(("pfedhn", "pfedmb", "fesem", "ktpfl", "fedmn")) for k in table)
    assert "cfl" in table and "fedavg+ft" in table  # the tables' ClusteredFL and FedAvg+ under our names
    assert "Local" not in table["fedprox"]  # a global model: against FedAvg only
