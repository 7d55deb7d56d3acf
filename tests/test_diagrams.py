"""The methods' diagrams (pflkit.diagrams): drawn, labelled with the paper's symbols, legible."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

from pflkit import diagrams  # noqa: E402


def texts(fig):
    return [t for ax in fig.axes for t in ax.texts]


def test_fedmn_shows_the_router_the_decision_and_the_blocks_its_paths_reach():
    fig = diagrams.fedmn()
    words = " ".join(t.get_text() for t in texts(fig))
    for symbol in ("\\phi^x", "\\phi^y", "\\mathbf{V}_m", "eq. 5", "eq. 9", "eq. 13", "encoder", "output"):
        assert symbol in words
    dashed = [p for p in fig.axes[0].patches if getattr(p, "get_linestyle", lambda: "-")() == "--"]
    assert len(dashed) == 2  # the default decision leaves one block of layers 2 and 3 without a path in
    every = {(li, j, k) for li, m, prev in [(1, 3, 3), (2, 3, 3), (3, 1, 3)] for j in range(m) for k in range(prev)}
    on_all = [p for p in diagrams.fedmn(on=every).axes[0].patches if p.get_linestyle() == "--"]
    assert on_all == []  # every path on: every block active
    width_in = fig.get_size_inches()[0]
    smallest_px = min(t.get_fontsize() for t in texts(fig)) / 72 * 688 / width_in
    assert smallest_px >= 9  # at the book's 688-px column


SYMBOLS = {
    "pfedhn": ["\\varphi", "v_i", "\\theta_i", "\\Delta\\theta_i", "server", "client"],
    "pfedmb": ["W_{1,l}", "\\alpha_{1,l}", "eq. 2", "eq. 3"],
    "fesem": ["E-step (eq. 8)", "M-step (eq. 9)", "eq. 7", "\\tilde W^{(1)}"],
    "ktpfl": ["\\xi_r", "c_{mn}", "eq. 7", "\\rho", "server", "clients"],
}


@pytest.mark.parametrize("method", sorted(SYMBOLS))
def test_every_method_has_a_diagram_in_the_papers_symbols_legible_at_the_column(method):
    fig = getattr(diagrams, method)()
    words = " ".join(t.get_text() for t in texts(fig))
    assert all(s in words for s in SYMBOLS[method]), [s for s in SYMBOLS[method] if s not in words]
    smallest_px = min(t.get_fontsize() for t in texts(fig)) / 72 * 688 / fig.get_size_inches()[0]
    assert smallest_px >= 9
