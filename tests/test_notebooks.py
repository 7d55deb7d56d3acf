"""Every chapter executes with papermill at the `smoke` profile within its budget.

The executed copies land in _build/smoke/stage/, where `make test` then runs nbval on the
regression cells and builds the book from them.
"""

import json
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import build_book  # noqa: E402

CHAPTERS = build_book.chapters()
SMOKE_BUDGET_S = 120


def test_every_chapter_is_in_the_toc():
    on_disk = {p.resolve() for p in (ROOT / "book").glob("*.ipynb")}
    assert on_disk == {p.resolve() for p in CHAPTERS}


@pytest.mark.parametrize("nb", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_structure(nb):
    book = nbformat.read(nb, as_version=4)
    params = [c for c in book.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and "PFLBOOK_PROFILE" in params[0].source
    assert any(c.cell_type == "markdown" and "## Deviations and choices" in c.source for c in book.cells)
    assert any("NBVAL_CHECK_OUTPUT" in c.source for c in book.cells if c.cell_type == "code")
    assert all(not c.get("outputs") for c in book.cells if c.cell_type == "code"), "commit chapters without outputs"


@pytest.mark.notebooks
@pytest.mark.parametrize("nb", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_executes_at_smoke(nb):
    report = build_book.execute("smoke", force=True, only=[nb.stem])
    rel = str(nb.relative_to(ROOT))
    out = ROOT / "_build" / "smoke" / "stage" / rel
    executed = nbformat.read(out, as_version=4)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    wall = report[rel]["wall_s"]
    print(json.dumps({rel: wall}))
    # the budget is 2 minutes on a 2-core CPU; allow slack for a loaded CI machine
    assert wall <= 2 * SMOKE_BUDGET_S, f"{rel} took {wall:.0f} s at smoke (budget {SMOKE_BUDGET_S} s)"
