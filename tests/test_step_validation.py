"""The step model against public measurements (validation/measured_points.yaml): the data file's
shape, and the held-back error the registry and README state, recomputed."""

import re
import statistics

from pricing.registry import load
from pricing.step.measured import load_points, relative_error


def test_at_least_30_points_from_3_sources_each_dated_and_sourced():
    points, sources = load_points()
    assert len(points) >= 30
    used = {p.source for p in points}
    assert len(used) >= 3 and used <= set(sources)
    assert len({p.id for p in points}) == len(points)
    for p in points:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", p.date), p.id
        assert p.measured > 0 and p.concurrency >= 1 and p.isl >= 1 and p.osl >= 1
    for s in sources.values():
        assert s["url"].startswith("https://") and s["title"] and s["how"]
    held = [p for p in points if p.held_back]
    assert 0 < len(held) < len(points) / 2


def test_the_stated_held_back_error_is_what_the_model_gives():
    """step_model.yaml records the held-back median absolute error of the fit that produced it;
    the factors it holds must reproduce that figure (a refit must rewrite it)."""
    points, _ = load_points()
    held = [p for p in points if p.held_back]
    how = load()["step_model.efficiency.memory_bandwidth"].how
    stated = re.search(r"held-back (\d+) points: ([\d.]+)%", how)
    assert stated, how
    assert int(stated.group(1)) == len(held)
    error = statistics.median(abs(relative_error(p)) for p in held)
    assert abs(error * 100 - float(stated.group(2))) < 2.0  # a stale figure fails; kernel drift of a point does not
    assert error <= 0.20  # issue 14's target; the README states the figure whatever it is
