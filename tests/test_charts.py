"""The charts a reviewer puts in a deck (issue 23, "Charts"; issue 21's two-chip chart): properties
of the figure each chart function draws, checked on the figure itself (matplotlib's Agg renderer,
every text's box on the canvas), for the results a review gives and for a crowded one (many
services, long names); a few through the command line. The results are built by hand here
(`model_construct`: no planning), so each figure a label should show is derived in the test."""

from __future__ import annotations

import errno
import re
from unittest import mock

import pytest

import planner.report.charts as charts
from planner import defaults
from planner.app.fleet import ChipUse, FleetResult, ServicePlan, Shortfall
from planner.app.review import Comparison
from planner.candidates.slo import ParetoPoint, ServingFigures
from planner.search.placement import NodeUse
from pricing.errors import InputError

HOURS = defaults.value("report.hours_per_month")


# -- results built by hand ----------------------------------------------------------------------
def pool(service: str, chip: str, gpus: int, price: float, estimate: bool = False, **more) -> ServicePlan:
    fields = dict(service=service, chip=chip, gpus=gpus, replicas=gpus, tensor_parallel_size=1,
                  cost_per_hour=gpus * price, price_per_gpu_hour=price, price_estimate=estimate,
                  price_as_of="2026-05-01", serving=None, cost_per_million_output_tokens=None)
    return ServicePlan.model_construct(**{**fields, **more})


def result(variant: str, pools: list[ServicePlan], stock: dict[str, int] | None = None,
           short: list[tuple[str, str]] = (), review: str = "review") -> FleetResult:
    stock = stock or {}
    chips = sorted({p.chip for p in pools} | set(stock))
    uses = [ChipUse(chip=c, gpus=sum(p.gpus for p in pools if p.chip == c), available=stock.get(c),
                    cost_per_hour=sum(p.cost_per_hour for p in pools if p.chip == c)) for c in chips]
    feasible = not short
    hour = sum(p.cost_per_hour for p in pools)
    return FleetResult.model_construct(
        review=review, variant=variant, feasible=feasible, services=pools if feasible else [], chips=uses,
        cost_per_hour=hour if feasible else None, cost_per_month=hour * HOURS if feasible else None,
        gpus=sum(p.gpus for p in pools) if feasible else None, nodes=[], hours_per_month=HOURS,
        short=[Shortfall(service=s, reason=f"{s} needs more", brief=b) for s, b in short])


def review_of(base: FleetResult, *variants: FleetResult, name: str = "Q1 review") -> Comparison:
    return Comparison(review=name, base=base, variants=list(variants))


SMALL = review_of(result("base", [pool("chat", "h200", 8, 4.0), pool("code", "b200", 4, 6.0)],
                         {"h200": 16, "b200": 8}),
                  result("cheaper", [pool("chat", "h200", 8, 3.0), pool("code", "b200", 4, 6.0)],
                         {"h200": 16, "b200": 8}),
                  result("no-b200", [], {"h200": 16}, short=[("code", "needs 4 b200")]))
LONG = [f"customer-facing-assistant-{region}-{i}" for i, region in enumerate(
    ["eu-west", "us-east", "ap-south", "eu-central", "us-west", "sa-east", "me-central", "af-south"])]
CROWDED = review_of(
    result("base", [pool(name, "h100" if i % 2 else "h200", 1 + i, 2.99 if i % 2 else 4.54, estimate=i % 3 == 0)
                    for i, name in enumerate(LONG)], {"h100": 24, "h200": 40}),
    *[result(f"what-if-{name}-doubled-traffic", [pool(n, "h200", 2 + i, 4.54) for i, n in enumerate(LONG)],
             {"h200": 40}) for name in ("summer-peak", "black-friday", "product-launch")],
    result("everything-at-one-million-tokens", [], short=[(n, "beyond 131,072 positions") for n in LONG[:5]]
           + [(LONG[5], "needs 24 h200")]),
    name="Quarterly capacity review of every customer-facing assistant and the internal analytics fleet")


@pytest.fixture
def drawn(monkeypatch):
    """The figures the chart functions hand to `save`, kept instead of written."""
    figures = []
    monkeypatch.setattr(charts, "save", lambda fig, path: figures.append(fig))
    yield figures
    plt = charts._pyplot()
    for fig in figures:
        plt.close(fig)


# -- what the test reads off a figure -------------------------------------------------------------
def text_boxes(fig) -> list[tuple[str, object]]:
    """Every text the figure draws, with its box on the canvas where it is drawn (the words only,
    not an annotation's leader line)."""
    from matplotlib.text import Text

    boxes, draw = [], Text.draw

    def drawing(self, renderer):
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            boxes.append((self.get_text(), Text.get_window_extent(self, renderer)))

    with mock.patch.object(Text, "draw", drawing):
        fig.draw_without_rendering()
    return boxes


def overlaps(fig) -> list[tuple[str, str]]:
    """Pairs of texts whose boxes share more than half a pixel each way."""
    boxes = text_boxes(fig)
    out = []
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            wide = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            high = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if wide > 0.5 and high > 0.5:
                out.append((a, b))
    return out


def words(fig) -> list[str]:
    return [t for t, _ in text_boxes(fig)]


def by_gid(fig, prefix: str) -> list:
    return [a for a in fig.findobj(lambda a: (a.get_gid() or "").startswith(prefix))]


# -- no two texts overlap, in every chart, plain and crowded ------------------------------------------
def pareto(chips=("h100", "h200")) -> ServingFigures:
    """Pools on two chips, 3 ms apart, three of each on the front, one chosen."""
    points = []
    for j, chip in enumerate(chips):
        for r in range(4):
            points.append(ParetoPoint(chip=chip, split="tp 4", replicas=10 + r + j, p99_tpot_ms=40 + 3 * r + j,
                                      cost_per_million_output_tokens=6.0 - r * 0.4 + j * 0.1, front=r < 3,
                                      chosen=(j, r) == (0, 1)))
    return ServingFigures.model_construct(requests_per_second=20, requests_per_second_per_instance=2, pareto=points,
                                          targets=["p99 TTFT ≤ 2,000 ms", "p99 TPOT ≤ 45 ms"])


@pytest.fixture(scope="module")
def every_chart(tmp_path_factory):
    """Every chart function's figure for the small and the crowded review, drawn once for the tests
    that read them: {(review id, chart): figure}."""
    figures: dict = {}
    with pytest.MonkeyPatch.context() as patch:
        for name, review in (("small", SMALL), ("crowded", CROWDED)):
            drawn = []
            patch.setattr(charts, "save", lambda fig, path, drawn=drawn: drawn.append(fig))
            draw_every_chart(review, tmp_path_factory.mktemp(name), crowded=name == "crowded")
            figures.update({(name, chart): fig for chart, fig in zip(CHARTS, drawn, strict=True)})
    yield figures
    for fig in figures.values():
        charts._pyplot().close(fig)


CHARTS = ("variants", "bars", "lines", "pareto", "rate", "targets")


def served(name: str, chip: str, rate: float, cost: float, shift: float = 0.0, estimate: bool = False) -> ServicePlan:
    """A pool with service targets at `rate`: its $/M output tokens and a front whose chosen pool
    lies `shift` ms and dollars from the others'."""
    serving = ServingFigures.model_construct(
        requests_per_second=rate, targets=["p99 TTFT ≤ 2,000 ms"], pareto=[
            ParetoPoint(chip=chip, split="tp 4", replicas=4 + r, p99_tpot_ms=40 + 2 * r + shift,
                        cost_per_million_output_tokens=cost + 0.3 * (2 - r) + shift / 10, front=True, chosen=r == 1)
            for r in range(3)])
    return pool(name, chip, 8, 4.54 if chip == "h200" else 2.99, estimate, serving=serving,
                cost_per_million_output_tokens=cost, replicas=5)


def rate_sweep(crowded: bool) -> tuple[list[dict], list[FleetResult]]:
    chips = ("h100", "h200", "l40s") if crowded else ("h100", "h200")
    rates = (5, 10, 20) if crowded else (10, 20)
    points, results = [], []
    for j, chip in enumerate(chips):
        for k, rate in enumerate(rates):
            points.append({"chip": chip, "model": "llama-3.1-70b", "requests_per_second": rate})
            if crowded and (j, k) == (2, 2):
                results.append(result(f"{rate} on {chip}", [], short=[("what-if", "needs 64 l40s")]))
            else:
                results.append(result(f"{rate} on {chip}", [served("what-if", chip, rate, 5.0 + 0.05 * j - 0.1 * k,
                                                                   shift=j, estimate=chip == "l40s")]))
    return points, results


def draw_every_chart(review: Comparison, tmp_path, crowded: bool = False) -> None:
    charts.variants_chart(review, str(tmp_path / "v.png"))
    groups = [r.variant for r in review.results]
    gpus = {"h100": [r.gpus for r in review.results], "h200": [r.gpus and r.gpus + 1 for r in review.results]}
    cost = {c: [r.cost_per_month for r in review.results] for c in gpus}
    charts.bar_chart(groups, gpus, cost, str(tmp_path / "b.png"), review.review, "variant",
                     {(c, i): charts.shortfall_label(r, False) for c in gpus for i, r in enumerate(review.results)
                      if not r.feasible}, {"h100"}, hours=HOURS)
    series = {chip: [(x, None if k == 3 else 2 ** k, None if k == 3 else 1000.0 * 2 ** k,
                      "infeasible\nneeds 16 " + chip if k == 3 else "", chip == "h100")
                     for k, x in enumerate((8192, 32768, 131072, 1 << 20))] for chip in ("h100", "h200")}
    charts.line_chart(series, str(tmp_path / "l.png"), "context length (tokens)", review.review, log_x=True,
                      hours=HOURS)
    charts.pareto_chart(pareto(), str(tmp_path / "p.png"), f"{review.review} at 20 requests/s", {"h100"})
    points, results = rate_sweep(crowded)
    charts.rate_chart(points, results, str(tmp_path / "r.png"), review.review)
    names = LONG[:4] if crowded else ["chat"]
    targets = review_of(*[result(v, [served(n, "h200", rate * (1 + i), 1.0 + 0.02 * i, shift=i)
                                      for i, n in enumerate(names)])
                          for v, rate in (("base", 8), ("busy", 16), ("peak", 24))], name=review.review)
    charts.targets_chart(targets, str(tmp_path / "t.png"))


@pytest.mark.parametrize("review", ["small", "crowded"])
@pytest.mark.parametrize("chart", CHARTS)
def test_no_two_texts_overlap_in_any_chart(every_chart, review, chart):
    assert overlaps(every_chart[review, chart]) == []


def test_the_two_chip_plan_chart_of_issue_21_has_no_overlapping_label(tmp_path, capsys, monkeypatch):
    """`plan ... --chip h100 --chip h200 ... --chart F` (issue 21's Done-when command): its title
    ran over the top tick label; each chip is drawn in its own colour, the chosen pool with its
    figures as the plan prints them."""
    from planner.cli import main

    found = []  # the overlaps, read before the figure is written and closed
    real = charts.save
    monkeypatch.setattr(charts, "save", lambda fig, path: (found.append((overlaps(fig), words(fig), {
        a.get_gid() for a in by_gid(fig, "pools-")})), real(fig, path)))
    out = tmp_path / "front.png"
    assert main(["--model", "llama-3.1-70b", "--chip", "h100", "--chip", "h200", "--isl", "2000", "--osl", "500",
                 "--requests-per-second", "20", "--p99-ttft-ms", "2000", "--p90-tpot-ms", "40", "--json",
                 "--chart", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"plan: wrote {out} (" in captured.err and out.read_bytes().startswith(b"\x89PNG")
    import json

    best = json.loads(captured.out)["best"]
    ((crossing, texts, pools),) = found
    assert crossing == []
    chips = {p["chip"] for p in best["serving"]["pareto"]}
    assert len(chips) == 2 and pools == {f"pools-{c}" for c in chips}
    cost = f"${best['cost_per_million_output_tokens']:,.3f}"  # as the plan's text prints it
    assert any(t.startswith(f"chosen: {best['replicas']} × {best['chip']} tp ") and cost in t for t in texts)


def test_the_chosen_label_hides_no_pool_and_no_stretch_of_the_front(tmp_path, monkeypatch):
    """Qwen3-30B-A3B at 15 requests/s on H100s and H200s: its cheapest pools crowd the chosen one,
    and the label was put over three of them and the front's last step. Read from the figure: no
    scattered pool's centre and no point of the front's step line (sampled every pixel) lies
    inside the label's box."""
    import numpy as np
    from matplotlib.collections import PathCollection
    from matplotlib.text import Annotation

    from planner.cli import main

    found = []
    real = charts.save

    def inspect(fig, path):
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        (ax,) = [a for a in fig.axes if a.get_lines()]
        (label,) = [t for t in ax.texts if isinstance(t, Annotation) and t.get_text().startswith("chosen:")]
        box = label.get_bbox_patch().get_window_extent(renderer)
        centres = [xy for c in ax.collections if isinstance(c, PathCollection) and c.get_gid().startswith("pools-")
                   for xy in c.get_offset_transform().transform(c.get_offsets())]
        (front,) = by_gid(fig, "front-")
        xy = front.get_transform().transform(front.get_path().vertices)
        line = [a + (b - a) * k / 100 for a, b in zip(xy, xy[1:], strict=False) for k in range(101)]
        found.append([tuple(np.round(p)) for p in centres + line if box.contains(*p)])
        real(fig, path)

    monkeypatch.setattr(charts, "save", inspect)
    assert main(["--model", "qwen3-30b-a3b", "--chip", "h100", "--chip", "h200", "--isl", "4000", "--osl", "300",
                 "--requests-per-second", "15", "--p99-ttft-ms", "1500", "--p99-tpot-ms", "30", "--goodput", "0.99",
                 "--chart", str(tmp_path / "front.png")]) == 0
    assert found == [[]]


def test_the_two_chip_compare_chart_of_issue_21_has_no_overlapping_label(tmp_path, monkeypatch):
    """`plan compare` of issue 21's workload on h100 and h200 at two rates: on main the chosen
    pools' labels of three fronts lay over each other ('chosen: 4 × h100 tp 8' over 'chosen: 15 ×
    h100 tp 4' and 'chosen: 13 × h200 tp 4'); each is named once, beside its rate."""
    from click.testing import CliRunner

    from planner.cli import cli

    found = []
    real = charts.save
    monkeypatch.setattr(charts, "save", lambda fig, path: (found.append((overlaps(fig), words(fig))),
                                                           real(fig, path)))
    out = tmp_path / "rate.png"
    result = CliRunner().invoke(cli, ["compare", "--model", "llama-3.1-70b", "--chip", "h100", "--chip", "h200",
                                      "--isl", "2000", "--osl", "500", "--requests-per-second", "10",
                                      "--requests-per-second", "20", "--p99-ttft-ms", "2000", "--p90-tpot-ms", "40",
                                      "--format", "json", "--chart", str(out)])
    assert result.exit_code == 0, result.output
    ((crossing, texts),) = found
    assert crossing == []
    import json

    data = json.loads(result.stdout)
    for r in [data["base"], *data["variants"]]:  # every rate's chosen pool is labelled, with its $/M as printed
        p = r["services"][0]
        assert texts.count(f"{p['replicas']} × {p['chip']} tp {p['tensor_parallel_size']}\n"
                           f"${p['cost_per_million_output_tokens']:,.3f}") == 1
    assert f"plan: wrote {out} (" in result.stderr


def test_labels_of_close_chosen_pools_are_moved_apart_with_a_leader(drawn, tmp_path):
    """Issue 21's compare chart: four fronts whose chosen pools lie within a few ms of each other."""
    from planner.report.charts import _pareto_panel, figure, place_labels

    fig, (ax,) = figure(6, 4)
    labels = []
    for k in range(4):
        serving = pareto()
        labels += _pareto_panel(ax, serving.pareto, f"C{k}", f"front {k}")
    assert overlaps(fig)  # the labels as first put
    place_labels(fig, labels)
    assert overlaps(fig) == []
    assert sum(a.arrow_patch.get_visible() for a in labels) >= 2  # a moved label points back to its star


# -- what each chart shows --------------------------------------------------------------------------
def test_a_review_chart_stacks_each_variant_by_service_with_its_total_change_and_inventory(every_chart):
    fig = every_chart["small", "variants"]
    texts = words(fig)
    # base: chat 8 × $4 + code 4 × $6 = $56/hour; cheaper: 8 × $3 + 4 × $6 = $48/hour (-14.3%)
    base, cheaper = 56 * HOURS, 48 * HOURS
    assert f"${base:,.0f}" in texts and f"${cheaper:,.0f}\n-14.3% against base" in texts
    segments = {a.get_gid(): a.get_height() for a in by_gid(fig, "cost-")}
    assert segments == {"cost-0-chat": 32 * HOURS, "cost-0-code": 24 * HOURS, "cost-1-chat": 24 * HOURS,
                        "cost-1-code": 24 * HOURS}
    assert {a.get_gid(): a.get_height() for a in by_gid(fig, "bars-")} == {
        "bars-h200-0-chat": 8, "bars-b200-0-code": 4, "bars-h200-1-chat": 8, "bars-b200-1-code": 4}
    inventory = {a.get_gid(): a.get_segments()[0][0][1] for a in by_gid(fig, "inventory-")}
    assert inventory == {"inventory-h200-0": 16, "inventory-b200-0": 8, "inventory-h200-1": 16,
                         "inventory-b200-1": 8}
    assert "8 h200" in texts and "16 h200 in stock" in texts and "4 b200" in texts
    legend = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert legend == ["chat", "code", "inventory", "infeasible (nothing drawn)"]


def test_an_infeasible_variant_is_an_x_with_why_and_no_bar(every_chart):
    fig = every_chart["small", "variants"]
    assert not [a for a in by_gid(fig, "bars-") + by_gid(fig, "cost-") if a.get_gid().split("-")[-2] == "2"]
    marks = by_gid(fig, "infeasible-2")
    assert len(marks) == 2 and all(m.get_marker() == "x" for m in marks)  # one ✕ in each panel
    assert words(fig).count("infeasible\ncode: needs 4 b200") == 2
    for ax in fig.axes:  # no bar stands at the infeasible variant's place
        assert all(abs(p.get_x() + p.get_width() / 2 - 2) > 0.5 for p in ax.patches if p.get_height() > 0)


def test_many_services_short_for_one_reason_are_counted_not_listed(every_chart):
    fig = every_chart["crowded", "variants"]
    why = next(t for t in words(fig) if t.startswith("infeasible\n"))
    assert all(len(line) <= charts.SHORTFALL_LINE for line in why.splitlines())
    assert why.replace("-\n  ", "-").replace("\n  ", " ").splitlines() == [
        "infeasible", "5 services: beyond 131,072 positions", f"{LONG[5]}: needs 24 h200"]


def test_the_legend_names_only_chips_with_a_bar(drawn, tmp_path):
    """A chip no point is served on is not a legend entry with a colour and no bar."""
    charts.bar_chart(["qwen3-32b", "llama-3.1-8b"], {"h100": [None, None], "h200": [None, 1]},
                     {"h100": [None, None], "h200": [None, 3314.2]}, str(tmp_path / "b.png"), "t", "model",
                     {("h100", 0): "infeasible\nneeds 2 h100", ("h100", 1): "infeasible\nneeds 2 h100",
                      ("h200", 0): "infeasible\nneeds 2 h200"}, hours=HOURS)
    (fig,) = drawn
    legend = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert legend == ["h200", "infeasible (nothing drawn)"]
    assert {a.get_gid() for a in by_gid(fig, "bars-")} == {"bars-h200-1"}
    assert len(by_gid(fig, "infeasible-")) == 2 * 3 and "$3,314" in words(fig)


def test_a_sweep_is_markers_with_no_line_between_the_points(drawn, tmp_path):
    series = {"h200": [(8192, 1, 2183.0, "", False), (32768, 2, 4366.0, "", False)]}
    charts.line_chart(series, str(tmp_path / "l.png"), "context length (tokens)", "t", log_x=True, hours=HOURS)
    (fig,) = drawn
    lines = by_gid(fig, "line-") + by_gid(fig, "cost-")
    assert len(lines) == 2 and all(line.get_linestyle() == "None" for line in lines)
    assert {"1", "2", "$2,183", "$4,366"} <= set(words(fig))


def test_only_the_pareto_front_is_a_step_line(drawn, tmp_path):
    charts.pareto_chart(pareto(), str(tmp_path / "p.png"), "t")
    (fig,) = drawn
    (front,) = by_gid(fig, "front-")
    assert front.get_drawstyle() == "steps-post"
    assert [line.get_gid() for line in fig.axes[0].lines if line.get_linestyle() == "-"] == ["front-pareto"]


def test_an_estimated_price_is_starred_with_its_footnote(drawn, tmp_path):
    review = review_of(result("base", [pool("chat", "l40s", 3, 0.93, estimate=True)]),
                       result("h100", [pool("chat", "h100", 1, 2.99)]))
    charts.variants_chart(review, str(tmp_path / "v.png"), {"price": "--price"}.get)  # as `plan compare` names it
    (fig,) = drawn
    texts = words(fig)
    assert f"${3 * 0.93 * HOURS:,.0f}*" in texts  # 3 × $0.93 × 730 h = $2,037, an estimate
    assert any(t.startswith(f"${2.99 * HOURS:,.0f}\n") for t in texts)  # h100's price is a quote: no star
    assert "* l40s: $0.93/GPU-hour is an estimate as of 2026-05-01, not a quote (give yours with --price)" in texts


def test_figures_are_printed_as_the_text_prints_them(drawn, tmp_path):
    """Thousands separators and whole dollars, never '$31.3k' or '14344'."""
    review = review_of(result("base", [pool("chat", "h100", 14_344, 2.99)]))
    charts.variants_chart(review, str(tmp_path / "v.png"))
    (fig,) = drawn
    texts = words(fig)
    assert "14,344 h100" in texts and f"${14_344 * 2.99 * HOURS:,.0f}" in texts
    assert not [t for t in texts if re.search(r"\d[kM]\b", t) or re.fullmatch(r"\d{5,}", t)]


def test_the_title_is_the_review_and_each_panel_says_what_it_draws(every_chart):
    small, crowded = every_chart["small", "variants"], every_chart["crowded", "variants"]
    assert small._suptitle.get_text() == "Q1 review"  # no list of variants in it
    assert crowded._suptitle.get_text().replace("\n", " ") == CROWDED.review
    for fig in (small, crowded):
        width = fig.get_figwidth() * fig.dpi
        (_, box), = [(t, b) for t, b in text_boxes(fig) if t == fig._suptitle.get_text()]
        assert box.width <= width
        assert all(ax.get_title() for ax in fig.axes)


def test_long_variant_names_are_wrapped_or_upright_never_crossing(every_chart):
    fig = every_chart["crowded", "variants"]
    for ax in fig.axes:
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert [t.replace("\n", "") for t in ticks] == [r.variant for r in CROWDED.results] or \
            all(t.get_rotation() == 90 for t in ax.get_xticklabels())
    assert overlaps(fig) == []


def test_a_node_map_names_only_what_fits_its_cell(drawn, tmp_path):
    nodes = [NodeUse(node="h200-0", chip="h200", gpus=8, used_by=[f"{LONG[g]}/0" for g in range(6)] + ["", ""]),
             NodeUse(node="h200-1", chip="h200", gpus=8, used_by=[f"{LONG[6]}/0"] * 8)]
    fleet = result("base", [pool(n, "h200", 1, 4.54) for n in LONG[:7]], {"h200": 16}).model_copy(
        update={"nodes": nodes})
    charts.node_chart(fleet, str(tmp_path / "n.png"))
    (fig,) = drawn
    texts = words(fig)
    assert f"{LONG[6]} #0" in texts and texts.count("#0") == 6  # the wide cell named, the narrow ones numbered
    assert overlaps(fig) == []


# -- the file: written whole or not at all, and said ------------------------------------------------
def test_a_chart_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    target = tmp_path / "review.png"
    charts.variants_chart(SMALL, str(target))
    first = target.read_bytes()
    assert first.startswith(b"\x89PNG") and oct(target.stat().st_mode & 0o777) != "0o600"

    def full_disk(self, out, **kwargs):
        out.write(b"\x89PNG half")
        raise OSError(errno.ENOSPC, "No space left on device", str(target))

    monkeypatch.setattr(Figure, "savefig", full_disk)
    with pytest.raises(InputError, match="^chart_path: cannot write .*No space left on device"):
        charts.variants_chart(SMALL, str(target))
    assert target.read_bytes() == first  # the old chart as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["review.png"]  # no half-written file beside it
    with pytest.raises(InputError):
        charts.variants_chart(SMALL, str(tmp_path / "new.png"))
    assert not (tmp_path / "new.png").exists()


def test_a_chart_the_disk_refuses_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from matplotlib.figure import Figure

    from planner.cli import main

    def full_disk(self, out, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full_disk)
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--isl", "1000", "--osl", "200",
                 "--requests-per-second", "8", "--p99-ttft-ms", "1000", "--p90-tpot-ms", "15", "--json",
                 "--chart", str(tmp_path / "f.png")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.splitlines() == [
        f"plan: error: --chart: cannot write {tmp_path / 'f.png'}: No space left on device; nothing was written (name "
        "a place you can write, on a disk with room)"]
    assert list(tmp_path.iterdir()) == []  # and nothing half-written


def test_a_review_says_every_chart_file_it_wrote(tmp_path):
    review = SMALL.model_copy(update={"base": SMALL.base.model_copy(update={"nodes": [
        NodeUse(node="h200-0", chip="h200", gpus=8, used_by=["chat/0"] * 8)]})})
    written = charts.chart(review, str(tmp_path / "r.svg"))
    assert [p for p, _ in written] == [str(tmp_path / "r.svg"), str(tmp_path / "r-nodes.svg")]
    assert all((tmp_path / p).exists() for p, _ in written)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r-nodes.svg", "r.svg"]


def test_a_review_writes_all_its_charts_or_none(tmp_path, monkeypatch):
    """The node map failing after the variants chart was drawn leaves neither file (nor a part of one)."""
    from matplotlib.figure import Figure

    review = SMALL.model_copy(update={"base": SMALL.base.model_copy(update={"nodes": [
        NodeUse(node="h200-0", chip="h200", gpus=8, used_by=["chat/0"] * 8)]})})
    real, calls = Figure.savefig, []

    def second_fails(self, out, **kwargs):
        calls.append(out)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, out, **kwargs)

    monkeypatch.setattr(Figure, "savefig", second_fails)
    with pytest.raises(InputError, match="r-nodes.svg: No space left on device; nothing was written"):
        charts.chart(review, str(tmp_path / "r.svg"))
    assert len(calls) == 2 and list(tmp_path.iterdir()) == []


def test_a_plan_nothing_fits_says_its_chart_was_not_written(tmp_path, capsys):
    from planner.cli import main

    out = tmp_path / "front.png"
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--max-gpus", "1", "--isl", "1000",
                 "--osl", "200", "--requests-per-second", "50", "--p99-ttft-ms", "1000", "--p90-tpot-ms", "15",
                 "--chart", str(out)]) == 1
    assert f"--chart wrote nothing: no pool fits ({out} not written)" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_a_chip_in_stock_that_no_variant_uses_shows_its_inventory(drawn, tmp_path):
    """Idle inventory is part of the answer: its line stands over an empty place."""
    review = review_of(result("base", [pool("chat", "b200", 9, 6.03)], {"h200": 32, "b200": 16}))
    charts.variants_chart(review, str(tmp_path / "v.png"))
    (fig,) = drawn
    assert {a.get_gid() for a in by_gid(fig, "inventory-")} == {"inventory-b200-0", "inventory-h200-0"}
    assert {a.get_gid() for a in by_gid(fig, "bars-")} == {"bars-b200-0-chat"}
    assert {"32 h200 in stock", "16 b200 in stock", "9 b200"} <= set(words(fig)) and overlaps(fig) == []
