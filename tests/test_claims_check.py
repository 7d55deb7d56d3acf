"""The guard of the published claims (tools/claims_check.py): it passes on a faithful page and
claims file, and names the claim on a planted change of either."""

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import claims_check  # noqa: E402

from pflkit.claims import claim_row, claims_data, say  # noqa: E402
from pflkit.verdicts import verdict  # noqa: E402


def claims():
    rows = [
        claim_row("Table 1: A beats B", verdict([2.0, 2.1, 1.9])),
        claim_row("Table 2: A beats C", verdict([1.0, -1.0, 2.0]), plan=None),
    ]
    rows[1]["verdict"] = "underpowered"  # as its seed plan would say
    return rows, claims_data(rows).astype({"seeds": int})


def test_the_golden_check_passes_on_the_same_claims_and_names_a_planted_change():
    rows, data = claims()
    assert claims_check.golden_differences(data, data.copy(), "ch") == []
    changed = data.copy()
    changed.loc[1, "verdict"] = "inconclusive"
    changed.loc[0, "hi"] = data.loc[0, "hi"] + 0.3
    out = claims_check.golden_differences(changed, data, "ch")
    assert len(out) == 2 and "'Table 2: A beats C': verdict 'underpowered' -> 'inconclusive'" in out[1]
    assert "'Table 1: A beats B'" in out[0] and "hi" in out[0]
    out = claims_check.golden_differences(data.iloc[:1], data, "ch")
    assert out == ["ch: claim missing: 'Table 2: A beats C'"]
    within = data.copy()
    within.loc[0, "mean"] += 0.001  # another CPU's last bits
    assert claims_check.golden_differences(within, data, "ch") == []
    sized = data.copy()
    sized.loc[0, "size"] = "smaller than the paper's"  # the size is guarded as the word is
    assert claims_check.golden_differences(sized, data, "ch") == [
        "ch: 'Table 1: A beats B': size '' -> \"smaller than the paper's\""
    ]


def test_a_page_that_prints_a_bare_verdicts_word_beside_a_claim_is_caught():
    rows, data = claims()
    faithful = f"* Table 2: {say(rows[1])}.\n* Table 1: {say(rows[0])}."
    assert claims_check.printed_differences(faithful, data, "ch") == []
    planted = f"* Size S: pFedHN − LG-FedAvg (S): **{rows[1]['_v']}**."  # the bare verdict: 'inconclusive'
    out = claims_check.printed_differences(planted, data, "ch")
    assert len(out) == 1 and "printed 'inconclusive'" in out[0] and "its row says 'underpowered'" in out[0]
    table = "| claim | ours | verdict |\n| A | " + rows[1]["ours (a − b, 95 % CI)"] + " | inconclusive |"
    assert claims_check.printed_differences(table, data, "ch") == []  # tables are read by the golden check


def test_the_command_compares_a_stage_with_its_golden_folder(tmp_path, monkeypatch, capsys):
    _, data = claims()
    stage, golden = tmp_path / "stage", tmp_path / "golden"
    stage.mkdir()
    data.to_csv(stage / "ch.claims.csv", index=False)
    monkeypatch.setattr(sys, "argv", ["claims_check", "--stage", str(stage), "--golden", str(golden), "--update"])
    claims_check.main()
    assert pd.read_csv(golden / "ch.claims.csv").equals(pd.read_csv(stage / "ch.claims.csv"))
    monkeypatch.setattr(sys, "argv", ["claims_check", "--stage", str(stage), "--golden", str(golden)])
    try:
        claims_check.main()
    except SystemExit as e:
        assert e.code == 0
    data.assign(verdict="contradicted").to_csv(stage / "ch.claims.csv", index=False)
    try:
        claims_check.main()
        raise AssertionError("a changed verdict must fail")
    except SystemExit as e:
        assert e.code == 1 and "verdict 'reproduces' -> 'contradicted'" in capsys.readouterr().out


def test_the_readmes_glance_table_is_the_golden_claims():
    text = claims_check.README.read_text()
    assert claims_check.with_glance(text, claims_check.readme_glance()) == text, (
        "README's glance table is stale: python tools/claims_check.py --readme"
    )
