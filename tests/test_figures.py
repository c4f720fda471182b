"""The docs' heat maps are up to date: the data behind them is recomputed from solutions/."""

import json

import pytest

from grader.authoring.figures import DATA, FIGURES, figure_data, render
from tests.grading import REPO

TOLERANCE = 1e-4  # the data is written with 4 decimals


def test_committed_figures_match_the_solutions():
    committed = json.loads(DATA.read_text(encoding="utf-8"))
    fresh = figure_data()
    assert committed.keys() == fresh.keys(), "run `make figures`"
    for name, figure in fresh.items():
        assert committed[name]["title"] == figure["title"], f"{name}: run `make figures`"
        for got, want in zip(committed[name]["weights"], figure["weights"], strict=True):
            assert got == pytest.approx(want, abs=TOLERANCE), f"{name} is stale: run `make figures`"


def test_every_figure_is_a_png_shown_in_the_docs():
    pages = "".join(p.read_text(encoding="utf-8") for p in (REPO / "docs").glob("*.md"))
    for name in figure_data():
        png = FIGURES / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"(figures/{name}.png)" in pages, f"{name}.png is drawn but no page shows it"


def test_the_figures_show_the_documents_numbers():
    data = figure_data()
    assert data["plain"]["weights"][1][:2] == [0.1385, 0.2379]  # 000/004: attention weights of "journey"
    assert data["causal"]["weights"][1][:2] == [0.5517, 0.4483]  # the masked, renormalised row 2
    assert all(
        sum(row) == pytest.approx(1, abs=1e-3)
        for name in ("plain", "scaled", "causal", "head1", "head2", "cached_chunk")
        for row in data[name]["weights"]
    )
    assert data["cached_chunk"]["weights"] == data["head1"]["weights"][3:]  # a chunk after the cache: the same rows


def test_make_figures_draws_a_png_per_figure(tmp_path):
    data = figure_data()
    written = render(data, tmp_path)
    assert sorted(p.name for p in written) == sorted(f"{name}.png" for name in data)
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000 for p in written)
