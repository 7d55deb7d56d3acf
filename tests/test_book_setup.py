"""The book's build settings: the repository setting, its buttons, and the chapters' Colab cell."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import build_book  # noqa: E402


def test_every_chapter_installs_the_kit_on_colab_from_the_configured_repository():
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = [c for c in cells if c["cell_type"] == "code"]
        tagged = [c for c in code if "colab-install" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1 and tagged[0] is code[0], f"{path.name}: the Colab cell must be the first code cell"
        (repo,) = re.findall(r'(?m)^REPOSITORY = "(.*)"$', "".join(tagged[0]["source"]))
        assert repo == url, f"{path.name}: Colab installs from {repo!r}, _config.yml says {url!r}"


def test_buttons_are_hidden_without_a_repository():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    unset = {**cfg, "repository": {**cfg["repository"], "url": ""}}
    build_book.buttons_need_repository(unset)
    assert "repository" not in unset
    assert not unset["html"]["use_repository_button"] and not unset["html"]["use_issues_button"]
    assert not unset["launch_buttons"]["binderhub_url"] and not unset["launch_buttons"]["colab_url"]
    named = {**cfg, "repository": {**cfg["repository"], "url": "https://github.com/o/r"}}
    before = json.dumps(named, sort_keys=True)
    build_book.buttons_need_repository(named)
    assert json.dumps(named, sort_keys=True) == before  # a named repository keeps every button


def test_math_is_served_from_the_book_itself():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "sphinx-mathjax-offline" in cfg["sphinx"]["extra_extensions"]
    assert "mathjax_path" not in cfg["sphinx"]["config"]  # a CDN path here would undo it


def test_a_chapter_is_re_executed_when_its_committed_runs_or_fresh_change(monkeypatch, tmp_path):
    monkeypatch.setattr(build_book, "ROOT", tmp_path)
    store = tmp_path / "results" / "pfedhn"
    store.mkdir(parents=True)
    nb = tmp_path / "book" / "pfedhn.ipynb"
    monkeypatch.delenv("PFLBOOK_FRESH", raising=False)
    empty = build_book.store_stamp(nb, "book")
    (store / "a.json").write_text("{}")
    one = build_book.store_stamp(nb, "book")
    assert one != empty
    (store / "a.json").unlink()  # deleting a run to recompute it changes the stamp back
    assert build_book.store_stamp(nb, "book") == empty
    monkeypatch.setenv("PFLBOOK_FRESH", "1")
    assert build_book.store_stamp(nb, "book") != empty


@pytest.mark.notebooks
def test_a_chapter_whose_store_lacks_runs_renders_not_computed_yet(tmp_path):
    """A chapter executed against a read-only store stops at the first sweep that lacks runs; the
    page keeps what ran, says "not computed yet" in a marked note, and shows no later output."""
    import nbformat
    import papermill as pm

    code = [
        "from pflkit.experiments import Store, arms_for, sweep\nfrom tests.conftest import tiny_config\nprint('before')",
        f"sweep(arms_for(['local'], tiny_config(rounds=1)), [0], Store({str(tmp_path / 's')!r}, read_only=True))",
        "print('after')",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A chapter")])
    nb.cells += [nbformat.v4.new_code_cell(c) for c in code]
    src, out = tmp_path / "chapter.ipynb", tmp_path / "out.ipynb"
    nbformat.write(nb, src)
    with pytest.raises(pm.PapermillExecutionError) as err:
        pm.execute_notebook(str(src), str(out), cwd=str(ROOT), kernel_name="python3", progress_bar=False)
    assert err.value.ename == "NotInStore"
    message = build_book.mark_not_computed(out)
    assert message.startswith("not computed yet: 1 of this sweep's 1 runs are not in the store")
    cells = nbformat.read(out, as_version=4).cells
    assert [c.cell_type for c in cells] == ["markdown", "code", "code", "markdown", "code"]
    assert "Not computed yet" in cells[3].source and "not-computed-yet" in cells[3].metadata["tags"]
    assert "1 of this sweep's 1 runs are not in the store" in cells[3].source
    assert cells[1].outputs[0]["text"] == "before\n"  # what ran before the missing runs stays
    assert not any(o["output_type"] == "error" for c in cells if c.cell_type == "code" for o in c.outputs)
    assert cells[4].outputs == []  # nothing after the note is executed
    assert not list((tmp_path / "s").glob("*.json"))  # and nothing was computed


def test_a_chapter_that_fails_otherwise_is_not_marked(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0")])
    nb.cells[0].outputs = [nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="division by zero")]
    nbformat.write(nb, tmp_path / "x.ipynb")
    assert build_book.mark_not_computed(tmp_path / "x.ipynb") is None


def test_the_report_tallies_every_chapters_claims_file(tmp_path):
    from pflkit.claims import claim_row, write_claims
    from pflkit.verdicts import verdict

    f = tmp_path / "x.claims.csv"
    rows = [claim_row("a", verdict([1.0, 1.1, 0.9])), claim_row("b", verdict([1.0, -1.0, 2.0]))]
    write_claims(rows, str(f))
    t = build_book.claims_tally(f)
    assert (t["claims"], t["reproduces"], t["inconclusive"], t["open"]) == (2, 1, 1, 1)
    assert build_book.claims_tally(tmp_path / "none.csv") == {}
    lines = build_book.claims_section({"book/x.ipynb": {"claims": t}, "book/y.ipynb": {}})
    assert (
        "| x | 2 | 1 | 1 | 1 (50 %) |" in lines and "inconcl." in lines[6] and "| all | 2 | 1 | 1 | 1 (50 %) |" in lines
    )


def test_a_page_that_stopped_early_still_has_its_glued_findings():
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("```{glue:md} findings\n:format: myst\n```")])
    build_book.glue_placeholders(nb)
    glued = nb.cells[-1]
    assert "remove-cell" in glued.metadata["tags"] and glued.outputs[0]["metadata"]["scrapbook"]["name"] == "findings"
    build_book.glue_placeholders(nb)  # a key glued already is left alone
    assert len(nb.cells) == 2


def test_the_landing_page_opens_with_each_papers_lead_claims_and_a_tally_split_three_ways(tmp_path, monkeypatch):
    from pflkit.claims import claim_row, lead, mechanism, write_claims
    from pflkit.verdicts import verdict

    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.md").write_text("# Intro\n\n<!-- findings -->\n")
    nb = ROOT / "book" / "pfedhn.ipynb"
    monkeypatch.setattr(build_book, "chapters", lambda: [ROOT / "book" / "basics.ipynb", nb])
    mech = mechanism("it acts", verdict([5.0, 6.0, 7.0]), control="c")
    second = lead(claim_row("T2: A beats C", verdict([1.0, 1.1, 0.9]), "+2.8 vs pFedMe"), 2, "A beats C",
                  setting="FMNIST", why="w2")  # fmt: skip
    first = lead(claim_row("T1: A beats B", verdict([1.0, -1, 2])), 1, "A beats B", setting="FMNIST", why="w1")
    write_claims(
        [mech, second, first, claim_row("x", verdict([1, -1, 2]))], str(tmp_path / "book" / "pfedhn.claims.csv")
    )
    build_book.write_findings(tmp_path)
    text = (tmp_path / "book" / "intro.md").read_text()
    assert "<!-- findings -->" not in text and text.index("Results at a glance") < text.index("| The paper claims |")
    first_table = text.split(":::{table}")[1]  # the first screen's table: one row a paper, its first lead claim
    assert "(pfedhn.ipynb): A beats B" in first_table and "A beats C" not in first_table.split(":::")[0]
    folded = text.split("::::{dropdown}")[1]  # every lead claim, in the paper's order
    assert folded.index("A beats B") < folded.index("A beats C") and "+2.8 vs pFedMe" in folded
    assert "**The five papers' 3 claims:** 2 inconclusive, 1 reproduces." in text  # the mechanism check is ours
    assert "**The book's 1 own checks**" in text and "* [basics](basics.ipynb): not executed in this build." in text
    assert "* flag *mechanism inert*:" in text and "* *inconclusive*: the claim ran to its seed plan" in text


def test_chapters_executed_side_by_side_keep_every_entry_of_the_report(tmp_path):
    """Two processes adding entries to one execution report at once lose none (the report's lock)."""
    import multiprocessing as mp

    report = tmp_path / "execution.json"

    def write(who):
        for i in range(25):
            build_book.record_execution(report, f"{who}-{i}", {"wall_s": i})

    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=write, args=(w,)) for w in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert {p.exitcode for p in procs} == {0}
    assert len(json.loads(report.read_text())) == 50


def test_the_execution_report_lists_the_budgets_of_the_claims_the_papers_lead_with(tmp_path):
    import pandas as pd

    (tmp_path / "book").mkdir()
    pd.DataFrame([
        {"claim": "Table 1: A beats B", "lead": 1, "short": "A beats B", "arms": "A 40 rounds (+0.4), B 20 rounds (+1.5)",
         "verdict": "reproduces", "flags": "budget-limited (B +1.5 points over the last fifth)"},
        {"claim": "ours: a check", "lead": "", "short": "", "arms": "", "verdict": "inconclusive", "flags": ""},
    ]).to_csv(tmp_path / "book" / "demo.claims.csv", index=False)  # fmt: skip
    lines = build_book.budget_section(tmp_path)
    assert lines[0] == "## Budgets of the headline claims"
    rows = [ln for ln in lines if ln.startswith("| demo")]
    assert rows == ["| demo | A beats B | A 40 rounds (+0.4), B 20 rounds (+1.5) | reproduces · budget-limited (B +1.5 "
                    "points over the last fifth) |"]  # fmt: skip


def test_the_execution_report_says_what_the_paper_profile_runs_and_costs():
    lines = build_book.paper_section()
    assert lines[0] == "## The papers' own experiments: what `make paper` runs and costs"
    rows = [ln for ln in "\n".join(lines).splitlines() if ln.startswith("| ")]
    assert rows[0].startswith("| chapter | datasets | runs | steps (M) | GPU-hours (est.) |")
    assert [r.split(" | ")[0][2:] for r in rows[1:]] == ["basics", "pfedhn", "pfedmb", "fesem", "fedmn", "ktpfl"]
    assert "| cifar10, cifar100 |" in rows[2]  # pFedHN's Table 1 datasets at `paper`


MAX_NOTEBOOK_CODE_LINES = 300  # a chapter reads in Jupyter Lab (which ignores the page's folds) as on its page


@pytest.mark.parametrize("chapter", sorted(p.stem for p in (ROOT / "book").glob("*.ipynb")))
def test_a_chapter_notebook_holds_at_most_300_lines_of_code(chapter):
    import nbformat

    nb = nbformat.read(ROOT / "book" / f"{chapter}.ipynb", as_version=4)
    lines = sum(len(c.source.splitlines()) for c in nb.cells if c.cell_type == "code")
    assert lines <= MAX_NOTEBOOK_CODE_LINES, (
        f"{chapter}: {lines} lines of code (move table- and prose-building code to pflkit/chapters/{chapter}*.py)"
    )
