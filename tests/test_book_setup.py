"""The book's build settings: the repository setting, its buttons, and the chapters' Colab cell."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

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
