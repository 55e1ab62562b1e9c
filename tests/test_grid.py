"""A scenario's `grid:` is every combination of its axes as variants, named by their values;
growth scales each service's concurrency (rounded up); the report ranks the points by cost and
charts cost against each axis."""

from __future__ import annotations

import pytest

from planner.app.review import compare
from planner.report.charts import grid_chart
from planner.report.review import markdown
from planner.scenario import Scenario
from pricing.errors import InputError


def review(**grid) -> Scenario:
    return Scenario(review="grid", inventory={"h200": {"gpus_per_node": 8}, "h100": {"gpus_per_node": 8}},
                    services=[{"name": "chat", "model": "llama-3.1-8b", "concurrency": 50, "context_length": 32768},
                              {"name": "code", "model": "qwen3-8b", "concurrency": 33, "context_length": 16384}],
                    grid=grid)


def test_every_combination_is_a_variant_named_by_its_values():
    s = review(growth=[1, 1.5], chips=[["h200"], ["h100"]])
    assert list(s.variants) == ["growth 1, chips h200", "growth 1, chips h100", "growth 1.5, chips h200",
                                "growth 1.5, chips h100"]
    grown = s.apply("growth 1.5, chips h100")
    assert [x.concurrency for x in grown.services] == [75, 50]  # 50 × 1.5, 33 × 1.5 = 49.5 up to 50
    assert [grown.chips_of(x) for x in grown.services] == [["h100"], ["h100"]]


def test_a_growth_that_is_no_factor_is_bad_input():
    with pytest.raises(InputError, match="growth"):
        review(growth=[-1]).apply("growth -1")


def test_the_report_ranks_the_points_by_cost_and_charts_them(tmp_path):
    c = compare(review(growth=[1, 2], chips=[["h200"], ["h100"]]), executor="sequential")
    costs = [g.cost_per_month for g in c.ranking]
    assert len(c.ranking) == 4 and costs == sorted(costs) and [g.rank for g in c.ranking] == [1, 2, 3, 4]
    by_name = {r.variant: r for r in c.variants}
    assert all(by_name[g.variant].cost_per_month == g.cost_per_month for g in c.ranking)
    grown = by_name["growth 2, chips h200"]
    assert [p.asked for p in grown.services] == [100, 66]
    assert "### grid points by cost" in markdown(c)
    path = tmp_path / "grid.svg"
    grid_chart(c, str(path))
    svg = path.read_text()
    assert 'id="cheapest-growth-0"' in svg and 'id="cheapest-chips-1"' in svg  # the cheapest at each value


@pytest.mark.parametrize("width", [30, 50, 120])
def test_the_grid_ranking_never_cuts_a_number(width):
    """The grid's points by cost fit the console: every $/month and GPU count whole (a plain table
    cut them at narrow widths), one point a block where even its columns do not fit."""
    import io
    import re

    from rich.console import Console

    from planner.numbers import count
    from planner.report.render import render_comparison

    c = compare(review(growth=[1, 2], chips=[["h200"], ["h100"]]), executor="sequential")
    out = io.StringIO()
    render_comparison(c, Console(file=out, width=width, highlight=False))
    text = out.getvalue()
    ranking = text[text.index("grid points by cost"):text.index("\ncheapest: ")]  # then the answer, prose
    assert all(len(line) <= width for line in ranking.splitlines()), ranking
    for g in c.ranking:
        for cell in (f"{g.cost_per_month:,.0f}", count(g.gpus)):
            assert re.search(rf"(?<![\d,.]){re.escape(cell)}(?![\d,])", ranking), (cell, ranking)
