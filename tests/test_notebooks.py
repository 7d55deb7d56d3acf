"""Every chapter executes with papermill at the `smoke` profile, once, and at the `paper` profile's dry run.

The executed copies land in _build/smoke/stage/, from which `make test` builds the book.  Then a
sample of the runs each chapter computed is recomputed whole and must give identical records
(same seed, same numbers: what a second execution of the chapters would check, at a fraction of
its cost).  No test asserts wall time (a loaded machine is slower, not wrong): each chapter's
time goes to the execution report.  The dry run executes every chapter at `paper` on stand-in data of
the papers' datasets (:mod:`pflkit.fixtures`), so that a change that breaks the paper profile fails here.
"""

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import build_book  # noqa: E402

CHAPTERS = build_book.chapters()
# `make test` executes the chapters on both cores (pytest-xdist, --dist loadgroup): a chapter's two
# tests share a worker, in order, and each worker keeps to one core (see pin_to_one_core)
BY_CHAPTER = [pytest.param(nb, id=nb.stem, marks=pytest.mark.xdist_group(nb.stem)) for nb in CHAPTERS]
# its dry run at `paper` is a group of its own: twelve groups balance better on two workers than six
DRY_BY_CHAPTER = [pytest.param(nb, id=nb.stem, marks=pytest.mark.xdist_group(f"{nb.stem}-dry")) for nb in CHAPTERS]


def pin_to_one_core() -> None:
    """Under pytest-xdist, this worker (and the kernels it starts) keeps to one core of its own, so
    a chapter's sweeps run one worker of one torch thread beside the other worker's chapter: the
    same runs, the same store keys as on two cores."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[int(worker[2:]) % len(cores)]})


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
@pytest.mark.parametrize("nb", BY_CHAPTER)
def test_chapter_executes_at_smoke(nb):
    pin_to_one_core()
    report = build_book.execute("smoke", force=True, only=[nb.stem])
    rel = str(nb.relative_to(ROOT))
    out = ROOT / "_build" / "smoke" / "stage" / rel
    executed = nbformat.read(out, as_version=4)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    print(json.dumps({rel: report[rel]["wall_s"]}))  # to the log; the budget is checked by people, not here


@pytest.fixture(scope="session")
def paper_data(tmp_path_factory) -> Path:
    """Stand-ins for every paper dataset, in their real formats (:mod:`pflkit.fixtures`; a second)."""
    from pflkit.fixtures import FIXTURES, write_fixture

    root = tmp_path_factory.mktemp("paper-data")
    for name in FIXTURES:
        write_fixture(name, root)
    return root


@pytest.mark.notebooks
@pytest.mark.paper_dry
@pytest.mark.parametrize("nb", DRY_BY_CHAPTER)
def test_chapter_executes_at_the_paper_profile_dry(nb, paper_data, tmp_path, monkeypatch):
    """The paper profile's dry run: the chapter at `paper` (the papers' datasets, models, partitions and
    client counts) on fixture data of the papers' shapes, every budget at its dry value (one round of a few
    steps, one seed, one value a grid), on the CPU: a change that breaks the paper profile fails here.  Its
    preflight passes first (the datasets are there)."""
    from pflkit.paper import preflight

    pin_to_one_core()
    for k, v in {"PFLKIT_DATA": str(paper_data), "PFLBOOK_DRY": "1", "PFLBOOK_ALLOW_CPU": "1",
                 "PFLBOOK_STORE_ROOT": str(tmp_path / "store")}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    assert preflight([nb.stem]) is None
    report = build_book.execute("paper", force=True, only=[nb.stem])
    rel = str(nb.relative_to(ROOT))
    executed = nbformat.read(ROOT / "_build" / "paper-dry" / "stage" / rel, as_version=4)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    print(json.dumps({f"{rel} (paper, dry)": report[rel]["wall_s"]}))


SMOKE_REPLAYS = 2  # runs per chapter recomputed whole


@pytest.mark.notebooks
@pytest.mark.parametrize("nb", BY_CHAPTER)
def test_the_chapters_smoke_runs_recompute_identically(nb):
    from pflkit.replay import check
    from pflkit.store import store_for

    store = store_for(nb.stem, "smoke").path
    if not any(store.glob("*.json")):
        pytest.skip(f"{nb.stem} stored no smoke runs (it did not execute in this session)")
    lines = []
    stale = check(store, k=SMOKE_REPLAYS, seed=0, rounds=10**6, log=lines.append)
    print("\n".join(lines))
    assert not stale and len(lines) == min(SMOKE_REPLAYS, len(list(store.glob("*.json"))))
    assert all("identical" in line for line in lines)
