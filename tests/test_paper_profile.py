"""The `paper` profile: its dry switch, the fixture datasets of the papers' shapes, and the preflight
that stops with one line (a dataset missing, no GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pflkit import data, paper
from pflkit.fixtures import FIXTURES, write_fixture
from pflkit.fixtures import main as fixtures_main
from pflkit.profiles import budget, build_name, pick

SHAPES = {  # the papers' datasets as the fixtures must give them: image shape, classes, users (LEAF)
    "mnist": ((1, 28, 28), 10, 0), "fashion-mnist": ((1, 28, 28), 10, 0), "emnist-balanced": ((1, 28, 28), 47, 0),
    "emnist-byclass": ((1, 28, 28), 62, 0), "cifar10": ((3, 32, 32), 10, 0), "cifar100": ((3, 32, 32), 100, 0),
    "omniglot": ((1, 28, 28), 15, 0), "femnist": ((1, 28, 28), 62, 24), "celeba": ((3, 84, 84), 2, 24),
}  # fmt: skip


def test_budget_is_its_dry_value_or_smokes_in_the_paper_profiles_dry_run_and_pick_is_not(monkeypatch):
    monkeypatch.delenv("PFLBOOK_DRY", raising=False)
    assert budget(1, 2, 3, "paper") == 3 and budget(1, 2, 3, "book") == 2 and build_name("paper") == "paper"
    monkeypatch.setenv("PFLBOOK_DRY", "1")
    assert budget(1, 2, 3, "paper") == 1 and budget(1, 2, 3, "book") == 2  # dry touches the paper profile only
    assert pick(1, 2, 3, "paper") == 3 and build_name("paper") == "paper-dry" and build_name("book") == "book"
    assert budget(1, 2, 3, "paper", dry=0) == 0 and budget(1, 2, 3, "paper", dry=None) is None  # its own dry value
    assert budget(1, 2, 3, "smoke", dry=0) == 1 and budget(1, 2, 3, "book", dry=0) == 2
    monkeypatch.delenv("PFLBOOK_DRY")
    assert budget(1, 2, 3, "paper", dry=0) == 3  # outside the dry run the dry value is never read


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_loads_with_its_papers_shapes(name, no_real_data):
    assert not data.available_offline(name)
    write_fixture(name, no_real_data)
    assert data.available_offline(name)
    ds = data.load_dataset(name)
    shape, classes, users = SHAPES[name]
    assert ds.input_shape == shape and ds.n_classes == classes and len(ds.info.get("users", [])) == users
    assert len(ds.y_train) > len(ds.y_test) > 0 and set(ds.y_train.tolist()) <= set(range(classes))


def test_fixtures_command_writes_the_named_ones_and_refuses_unknown_names(tmp_path, capsys):
    assert fixtures_main([str(tmp_path), "cifar10"]) == 0 and (tmp_path / "cifar-10-batches-py").is_dir()
    assert fixtures_main([str(tmp_path), "imagenet"]) == 2 and "no fixture for 'imagenet'" in capsys.readouterr().err
    assert fixtures_main([]) == 2


def _book_with(tmp_path: Path, source: str) -> Path:
    nb = {"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": source, "outputs": []}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}  # fmt: skip
    (tmp_path / "ch.ipynb").write_text(json.dumps(nb))
    return tmp_path


def test_preflight_stops_with_one_line_naming_the_fetch_command(tmp_path, no_real_data, monkeypatch):
    book = _book_with(
        tmp_path, "from pflkit.profiles import pick\nDATASETS = pick(['digits'], ['digits'], ['digits', 'cifar100'])"
    )
    assert paper.datasets("ch", "paper", book) == ["digits", "cifar100"] and paper.datasets("ch", "book", book) == [
        "digits"
    ]
    why = paper.preflight(["ch"], book, gpu=True)
    assert why == paper.missing_line("ch", "cifar100") and "\n" not in why
    assert "`python -m pflkit fetch cifar100`" in why
    write_fixture("cifar100", no_real_data)
    assert paper.preflight(["ch"], book, gpu=True) is None
    monkeypatch.delenv("PFLBOOK_ALLOW_CPU", raising=False)
    assert paper.preflight(["ch"], book, gpu=False) == paper.NO_GPU and "PFLBOOK_ALLOW_CPU=1" in paper.NO_GPU
    monkeypatch.setenv("PFLBOOK_ALLOW_CPU", "1")
    assert paper.preflight(["ch"], book, gpu=False) is None


def test_a_chapter_without_datasets_or_parameters_is_one_clear_error(tmp_path):
    from pflkit.errors import PflkitError

    with pytest.raises(PflkitError, match="names no DATASETS"):
        paper.datasets("ch", "paper", _book_with(tmp_path, "X = 1"))
    with pytest.raises(PflkitError, match="no chapter 'nope'"):
        paper.datasets("nope", "paper", tmp_path)


@pytest.mark.parametrize("chapter", paper.CHAPTERS)
def test_every_chapter_names_its_datasets_at_every_profile(chapter):
    """At `smoke` and `book` the book's Fashion-MNIST; at `paper` the paper's own datasets, each one the kit
    loads (and the dry run has a fixture for)."""
    for profile in ("smoke", "book"):
        assert "fashion-mnist" in paper.datasets(chapter, profile)
    names = paper.datasets(chapter, "paper")
    assert set(names) <= set(FIXTURES) | {"digits"} and set(names) <= set(data.dataset_names())


def test_paper_check_command_says_one_line_and_exits_2(no_real_data, capsys):
    from pflkit.cli import main

    assert main(["paper-check", "pfedhn"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: chapter pfedhn needs the dataset") and "\n" not in err


def test_step_seconds_is_a_rounds_gpu_time_over_its_steps(tmp_path):
    (tmp_path / "results" / "ch").mkdir(parents=True)
    for name, clients, rate, steps in (("a.json", 10, 0.5, 50), ("b.json", 4, 1.0, 10), ("c.json", 2, 1.0, 1)):
        cfg = {"clients": clients, "sample_rate": rate, "local_steps": steps}
        (tmp_path / "results" / "ch" / name).write_text(json.dumps({"config": cfg}))
    bench = tmp_path / "gpu.jsonl"
    lines = [{"run": "a.json", "gpu": "G", "gpu_s_per_round": 0.5}, {"run": "b.json", "gpu": "G", "gpu_s_per_round": 0.08},
             {"run": "c.json", "gpu": "H", "gpu_s_per_round": 0.006}, {"run": "gone.json", "gpu": "G", "gpu_s_per_round": 9}]  # fmt: skip
    bench.write_text("\n".join(map(json.dumps, lines)))
    seconds, gpu = paper.step_seconds(bench, tmp_path / "results")
    assert seconds == pytest.approx(0.002) and gpu == "G, H"  # the median of 2, 2 and 3 ms
    assert 1e-4 < paper.step_seconds()[0] < 0.1  # the committed measurements
