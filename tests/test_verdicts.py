"""The verdict rule's "no difference" word and the seed plan."""

from __future__ import annotations

import math

import pytest

from pflkit.verdicts import (
    DECISION_FLOOR,
    SEED_CAP,
    pooled_sd,
    sd_upper,
    seed_plan,
    seeds_needed,
    verdict,
)


def test_no_difference_is_an_undecided_interval_inside_the_resolution():
    inside = [0.2, -0.1, 0.3]  # mean +0.13, 95 % CI about [-0.4, +0.7]
    assert verdict(inside).word == "inconclusive"  # without a resolution: the rule as before
    assert verdict(inside, resolution=1.0).word == "no difference"
    assert verdict(inside, resolution=0.5).word == "inconclusive"  # the interval reaches past ± 0.5
    assert verdict([0.4, 0.5, 0.6], resolution=1.0).word == "reproduces"  # a decided direction stays decided
    assert verdict([-0.4, -0.5, -0.6], resolution=1.0).word == "contradicted"
    assert verdict([0.2, -0.1], resolution=1.0).word == "not tested"
    assert "no difference (" in str(verdict(inside, resolution=1.0))


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


def test_the_plan_names_the_seeds_or_says_underpowered_before_running():
    claims = {"wide": [4.0, -2.0, 6.0], "tight": [1.0, 1.1, 0.9], "lonely": [1.0]}
    own = seed_plan(claims, {"wide": 3.0, "tight": 0.1}, pool=False)
    assert own.loc["tight", "scale (± points)"] == DECISION_FLOOR  # no plan resolves less than the floor
    assert own.loc["tight", "plan"] == "4 seeds"  # sd 0.1, bounded to 0.21 on 2 dof: 4.30 · 0.21 / √3 > 0.5
    assert own.loc["wide", "plan"].startswith("underpowered (needs ") and own.loc["wide", "seeds needed"] > SEED_CAP
    assert own.loc["lonely", "plan"] == "not tested (no spread)"
    assert seed_plan(claims, 0.5, pool=False).loc["wide", "plan"] == "underpowered (needs more than 100 seeds)"
    pooled = seed_plan(claims, 1.0)  # like claims share one spread
    assert pooled["sd assumed"].nunique() == 1 and pooled.loc["lonely", "plan"] != "not tested (no spread)"
