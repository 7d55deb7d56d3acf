"""Figures as the book shows them (pflkit.plots): the smallest text of a figure, measured and carried
in its PNG for the browser check, and the claims plot legible at the column."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from pflkit import plots  # noqa: E402
from pflkit.verdicts import Verdict  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def test_the_smallest_text_is_measured_in_the_figures_pixels_and_scaled_to_the_column():
    fig, ax = plt.subplots(figsize=(5, 3), dpi=100)
    ax.set_title("a title", fontsize=6)  # the smallest: 6 pt at 100 dpi = 8.33 px
    ax.set_xlabel("x", fontsize=12)
    ax.tick_params(labelsize=11)
    assert plots.min_text_px(fig) == pytest.approx(6 * 100 / 72)
    assert plots.shown_text_px(fig) == pytest.approx(6 * 100 / 72)  # 500 px wide: shown at its size
    fig.set_size_inches(13.76, 3)  # twice the column: shown at half its size
    assert plots.shown_text_px(fig) == pytest.approx(6 * 100 / 72 / 2)
    ax.set_title("")  # an empty text does not count
    assert plots.min_text_px(fig) == pytest.approx(11 * 100 / 72)
    plt.close(fig)


def test_the_png_carries_its_smallest_text_and_the_browser_check_scales_it(tmp_path):
    fig, ax = plt.subplots(figsize=(4, 2), dpi=100)
    ax.set_title("t", fontsize=9)
    ax.tick_params(labelsize=10)
    png = plots.png_with_text_size(fig)
    with Image.open(io.BytesIO(png)) as im:
        assert float(im.text[plots.TEXT_KEY]) == pytest.approx(9 * 100 / 72, abs=0.01)
    (tmp_path / "_images").mkdir()
    (tmp_path / "_images" / "f.png").write_bytes(png)
    fig.savefig(tmp_path / "_images" / "plain.png")  # a PNG that does not say
    sys.path.insert(0, str(ROOT / "tools"))
    import browser_check

    page = tmp_path / "book" / "page.html"
    assert browser_check.figure_text(tmp_path, page, "../_images/f.png", 0.5) == pytest.approx(6.25, abs=0.01)
    assert browser_check.figure_text(tmp_path, page, "../_images/missing.png", 1.0) is None
    assert browser_check.figure_text(tmp_path, page, "../_images/plain.png", 1.0) is None  # another PNG: no claim
    plt.close(fig)


def test_the_claims_plot_is_legible_at_the_column():
    rows = [
        {"claim": f"claim {i}: a method beats a baseline by some margin", "verdict": "reproduces", "paper": "+1.0",
         "_v": Verdict("reproduces", mean=1.0 + i, lo=0.2 + i, hi=1.8 + i, n=3)}
        for i in range(5)
    ]  # fmt: skip
    fig = plots.claims_plot(rows)
    assert plots.shown_text_px(fig) >= plots.MIN_TEXT_PX
    plt.close(fig)


def test_the_claims_figure_stands_in_a_line_where_no_claim_has_an_interval():
    row = {
        "claim": "a",
        "verdict": "not tested",
        "paper": "",
        "_v": Verdict("not tested", 1.0, float("nan"), float("nan"), 1),
    }
    assert "No claim" in plots.claims_figure([row]).data
    good = {"claim": "b", "verdict": "reproduces", "paper": "", "_v": Verdict("reproduces", 1.0, 0.5, 1.5, 3)}
    fig = plots.claims_figure([row, good])
    assert len(fig.axes[0].get_yticklabels()) == 1
    plt.close(fig)
