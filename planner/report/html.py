"""`--format html -o FILE`: one self-contained page a capacity review shares (`plan`, `plan scenario`,
`plan compare`). The answer first (pools, GPUs, cost, solver status), then what binds, the charts
(planner/report/charts.py's, drawn as SVG and inlined), the service targets and the simulated
percentiles, and, collapsed, the assumptions, the provenance, the launch commands and the manifests;
the tool's version, the vLLM release and the date last.

Rendered from the app layer's result models through Jinja2 templates (planner/report/templates/),
autoescaped: every value from a user's file or flag is escaped. The page requests nothing: its CSS
and SVG are inline, its one line of script opens the collapsed sections for print, it loads no web
font. Written whole or not at all (atomic.py)."""

from __future__ import annotations

import io
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from markupsafe import Markup
from rich.console import Console

from planner import numbers as fmt
from planner.app.fleet import FleetResult
from planner.app.max_rate import MaxRateResult
from planner.app.result import PlanResult, PoolPlan
from planner.app.review import Comparison
from planner.app.serving import DisaggPlan, ServingChoice
from planner.defaults import Defaults
from planner.kinds import Role, Serving
from planner.report import render as text
from planner.report.autoscaler import autoscaled
from planner.report.review import binding, chips_of, delta, gpus_by_chip, search_line
from planner.report.words import no_plan_cell, price_footnotes, solver_phrase, unserved_words
from pricing.errors import InputError
from pricing.errors import render as named_text
from pricing.kernel.report import memory_report

OUTPUT_FIELD = "output_dir"  # the option `-o` is stored under (a system error names it)
Draw = Callable[[str], list[tuple[str, str]]]  # draws the charts at a path: each (file written, what it shows)


@dataclass(frozen=True)
class About:
    """What made the page: the tool's version, the vLLM releases planned for, the command, the time (UTC)."""

    vllm_releases: list[str]
    command: str = ""
    defaults: Defaults = field(kw_only=True)  # the planner defaults the command made (its manifests' kubernetes.*)
    made: str = field(default_factory=lambda: datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    version: str = field(default_factory=lambda: tool_version())


@dataclass(frozen=True)
class Chart:
    what: str
    svg: Markup


@dataclass(frozen=True)
class Figure:
    """One headline figure: its label, the text shown, and the JSON field and value it equals (data-*)."""

    label: str
    shown: str
    key: str = ""
    value: object = None


@dataclass(frozen=True)
class Table:
    title: str
    head: list[str]
    rows: list[list[str]]
    numeric: list[bool] = field(default_factory=list)  # right-aligned columns
    wrap: bool = False  # cells of long unbroken words (names, paths) broken anywhere to fit the page
    scroll: bool = False  # a long table of short cells: rows on a narrow screen too, the box scrolling sideways


def tool_version() -> str:
    """deployment-planner's installed version, or what says it is not installed (a source checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("deployment-planner")
    except PackageNotFoundError:
        return "unknown (run from a source checkout, not installed)"


# -- charts ----------------------------------------------------------------------------------------
PROLOG = re.compile(r"<\?xml.*?\?>|<!DOCTYPE.*?>|<!--.*?-->|<metadata>.*?</metadata>", re.S)
IDS = re.compile(r'(\bid="|href="#|url\(#)')
ID = re.compile(r' id="([^"]+)"')


def inline_svg(svg: str, prefix: str, what: str) -> Markup:
    """matplotlib's SVG as a fragment of the page: no prolog, doctype, comments or metadata, every
    id prefixed (several charts on one page keep theirs apart), scaled to the page's width. Its
    texts are matplotlib's, escaped by its SVG writer; the label is escaped here."""
    body = IDS.sub(lambda m: m.group(1) + prefix, PROLOG.sub("", svg)).strip()
    seen: dict[str, int] = {}

    def once(m: re.Match) -> str:  # a gid charts.py gives two panels' marks alike: the second made its own
        seen[m.group(1)] = seen.get(m.group(1), 0) + 1
        return m.group(0) if seen[m.group(1)] == 1 else f' id="{m.group(1)}-{seen[m.group(1)]}"'

    body = ID.sub(once, body)
    label = Markup(' role="img" aria-label="{}"').format(what)
    return Markup(body.replace("<svg ", f"<svg{label} class=\"chart\" ", 1))


def inline_charts(draw: Draw | None, prefix: str = "c") -> list[Chart]:
    """The charts `draw` writes, as SVG into a temporary folder, inlined (none without `draw`); their
    ids prefixed `<prefix><i>-` (each call on a page its own `prefix`)."""
    if draw is None:
        return []
    with tempfile.TemporaryDirectory(prefix="plan-html-") as folder:
        written = draw(str(Path(folder) / "chart.svg"))
        return [Chart(what, inline_svg(Path(path).read_text(encoding="utf-8"), f"{prefix}{i}-", what))
                for i, (path, what) in enumerate(written)]


# -- pieces the pages share ------------------------------------------------------------------------
TEXT_COLUMNS = 100  # the width the memory breakdown's tables are laid out at for the page's <pre> (it scrolls)


def captured(draw: Callable[[Console], None], width: int = TEXT_COLUMNS) -> str:
    """What a rich renderer prints, as plain text (the terminal's own words for the page's <pre>)."""
    out = io.StringIO()
    draw(Console(file=out, width=width, color_system=None, force_terminal=False, highlight=False, soft_wrap=False))
    return out.getvalue().rstrip("\n")


def serving_table(p: PoolPlan, label: str = "") -> Table | None:
    """The simulated percentiles of a pool sized to service targets (p50, p90, p99 of each metric)."""
    s = p.serving
    if s is None:
        return None
    rows = [[name, *(fmt.duration(figures[k]) for k in ("p50", "p90", "p99"))]
            for name, figures in (("TTFT", s.ttft_ms), ("TPOT", s.tpot_ms), ("ITL", s.itl_ms), ("E2E", s.e2e_ms))]
    title = (f"{label}: " if label else "") + (f"{', '.join(s.targets)} at {fmt.given(s.requests_per_second)} "
                                               f"requests/s; goodput {fmt.percent(s.goodput)}")
    return Table(title, ["metric", "p50", "p90", "p99"], rows, [False, True, True, True])


def node_table(nodes, pools, title: str) -> Table:
    head = [c.header for c in text.NODE_MAP_COLUMNS]
    return Table(title, head, text.node_map_rows(nodes, pools), [False] * len(head))


def launch_text(pools: list[tuple[str, PoolPlan]], named) -> str:
    """Where every instance runs and the commands that start it, as the terminal prints them."""
    def draw(console: Console) -> None:
        for label, p in pools:
            if getattr(p, "instance_commands", None):  # a role's pool: one line per process
                text.command(console, f"# {label}, one line per process"
                             + (", then the router" if p.role == Role.DECODE else ""))
                for line in p.instance_commands:
                    text.command(console, line)
                continue
            text.render_launch(p, console, label, named)
    return captured(draw)  # commands are printed whole, never wrapped (render.py `command`); the page wraps them


def manifests(pools: list[tuple[str, PoolPlan]], named, defaults: Defaults, autoscaled: dict | None = None,
              routers: list[Router] = ()) -> list[tuple[str, str, list[str]]]:
    """Each pool's Kubernetes manifests as `--emit k8s` writes them with its defaults (`defaults`: the
    command's planner defaults, its About's): (file name,
    YAML, notes), or (the pool, why none, []) where the defaults do not suffice; an autoscaled pool
    (`autoscaled`: its name -> planner/report/autoscaler.py Autoscaling) with its
    HorizontalPodAutoscaler after it, the default `--autoscaler hpa`, and what it says of it; each
    disaggregated service's router (`routers`) last, refused without its image."""
    from planner.report import k8s
    from planner.report.autoscaler import autoscaler
    from pricing.chips import get_chip

    def refused(err: InputError) -> str:
        problem, fix = (named_text(part, named) for part in err.text)
        return f"# not written with the defaults: {problem}" + (f" ({fix})" if fix else "")

    options = k8s.checked(k8s.K8sOptions(image=k8s.default_image(defaults), defaults=defaults))
    try:
        names = k8s.resource_names([name for name, _ in pools] + [r.name for r in routers])
    except InputError as err:  # names --emit k8s refuses (two alike as Kubernetes names): the page says so
        return [("the manifests", refused(err), [])]
    together = {}  # a P/D service handed over on one node's NVLink: both pools' pods on one node (k8s.one_node)
    for r in routers:
        if r.one_node:
            together |= dict.fromkeys(r.pools, r.pools)
    out = []
    for name, pool in pools:
        try:
            resources, _ = k8s.pool_manifests(name, pool, get_chip(pool.chip), options,
                                              together=together.get(name, ()))
            said = []
            if name in (autoscaled or {}):
                resources, said = autoscaler(resources, autoscaled[name], "hpa", defaults=defaults)
        except InputError as err:
            out.append((name, refused(err), []))
            continue
        out.append((f"{names[name]}.yaml", k8s.dump(resources), said))
    return out + [(r.name, refused(k8s.no_router_image(names[r.name])), []) for r in routers]


@dataclass(frozen=True)
class Router:
    """A disaggregated service's router as the manifests name it: `<service> router`, its two pools
    (`<service> prefill`, `<service> decode`), and whether the plan hands over on one node's NVLink."""

    service: str
    one_node: bool

    @property
    def name(self) -> str:
        return f"{self.service} router"

    @property
    def pools(self) -> tuple[str, str]:
        return (f"{self.service} {Role.PREFILL}", f"{self.service} {Role.DECODE}")


def fleet_routers(pools: list[PoolPlan]) -> list[Router]:
    """A result's disaggregated services' routers (one per decode pool)."""
    return [Router(p.served or p.service, bool(p.handover and p.handover.one_node))
            for p in pools if p.role == Role.DECODE]


def fleet_pools(pools: list[PoolPlan]) -> list[tuple[str, PoolPlan]]:
    """A result's pools by name: a service's, or `<service> <role>` for a disaggregated one's."""
    return [(p.service if p.role == Role.AGGREGATED else f"{p.served or p.service} {p.role}", p) for p in pools]


def money_figures(cost_per_hour: float, cost_per_month: float, estimate: bool, hours: int) -> list[Figure]:
    return [Figure("$/hour", fmt.money(cost_per_hour, estimate), "cost_per_hour", cost_per_hour),
            Figure(f"$/month ({hours} h)", fmt.money(cost_per_month, estimate, cents=False), "cost_per_month",
                   cost_per_month)]


# -- `plan` ----------------------------------------------------------------------------------------
def plan_page(result: PlanResult, about: About, draw: Draw | None = None, named=None,
              choice: Choice | None = None) -> str:
    """`plan --format html`: the best pool and its alternatives, or why nothing fits; with `choice`
    (`--serving auto` chose it) why this one."""
    hours = result.hours_per_month
    heading = f"{result.model}: {text.target_phrase(result)}"
    status = named_text(solver_phrase(result.search.solver_status, result.search.solver_stages), named)
    context = {"title": heading, "heading": heading, "about": about, "feasible": result.feasible,
               "status": status, "notes": result.notes, "choice": choice}
    if not result.feasible:
        context["reasons"] = [e.text for e in result.explanations]
        return _render("plan.html.j2", context)
    best = result.best
    answer = [Figure("chip", best.chip, "chip", best.chip), Figure("GPUs", fmt.count(best.gpus), "gpus", best.gpus),
              *money_figures(best.cost_per_hour, best.cost_per_hour * hours, best.price_estimate, hours)]
    if best.cost_per_million_output_tokens is not None:
        answer.append(Figure("$/M output tokens", fmt.per_million_tokens(best.cost_per_million_output_tokens,
                                                                          best.price_estimate),
                             "cost_per_million_output_tokens", best.cost_per_million_output_tokens))
    if best.cost_per_million_input_tokens is not None:
        answer.append(Figure("$/M input tokens", fmt.per_million_tokens(best.cost_per_million_input_tokens,
                                                                         best.price_estimate),
                             "cost_per_million_input_tokens", best.cost_per_million_input_tokens))
    answer.append(Figure("requests held", fmt.count(best.held), "held", best.held))
    answer.append(Figure("solver", result.search.solver_status, "solver_status", result.search.solver_status))
    pools = Table("the best pool and the alternatives", [c.header.replace("\n", " ") for c in text.PLAN_COLUMNS],
                  text.plan_rows(result), [c.align == "right" for c in text.PLAN_COLUMNS])
    pools.head[0] = "pool"
    why = [f"binds: {best.binds}", *text.speed_lines(best), *text.cost_lines(best)]
    assumptions = [f"context length {fmt.count(result.target.context_length)} tokens (max_model_len); cost is GPUs × "
                   f"$/GPU-hour, {hours} hours a month; ties go to fewer GPUs, then more headroom, then the larger "
                   "token budget", f"search: {result.search.candidates_evaluated:,} kernel evaluations, {status}"]
    if result.margin is not None:
        assumptions.append(named_text(text.margin_line(result), named))
    memory = captured(lambda console: text.render_memory(
        best.memory or memory_report(best.kernel, result.target.context_length), best.kernel, console,
        named=named)) if best.memory is not None or best.kernel is not None else ""
    served = serving_table(best)
    title = f"node map: {best.chip} nodes of {best.nodes[0].gpus} GPUs" if best.nodes else "node map"
    context |= {"lead": text.best_line(best), "answer": answer, "tables": [pools],
                "footnotes": price_footnotes([best, *result.alternatives], named),
                "why": why, "charts": inline_charts(draw), "serving": [served] if served else [],
                "assumptions": assumptions, "provenance": provenance_table(result.provenance),
                "memory": memory, "nodes": node_table(best.nodes, [(best.model, best.instances)], title),
                "launch": launch_text([("", best)], named),
                "manifests": manifests([(best.model, best)], named, about.defaults)}
    return _render("plan.html.j2", context)


def provenance_table(rows: list[dict]) -> Table | None:
    if not rows:
        return None
    from planner.report.memory import _names_bytes, registry_value

    return Table("every registry value and planner default the plan used",
                 ["name", "value", "source", "how"],
                 [[str(p.get("name", "")), registry_value(p.get("value"), _names_bytes(str(p.get("name", "")))),
                   str(p.get("source", "")), str(p.get("how", ""))] for p in rows], [False] * 4, wrap=True)


# -- `plan --serving disagg|auto` ------------------------------------------------------------------
def disagg_page(plan: DisaggPlan, about: About, workload: str, hours: int, named=None,
                notes: list[str] = (), choice: Choice | None = None) -> str:
    """`plan --serving disagg --format html`: the prefill and decode pools, the hand-over and the time
    to first token by part, what binds each role, each role's memory, the commands and the manifests
    (planner/report/disagg_render.py's words); or why no fleet fits. With `choice` (`--serving auto`
    chose it) why this one."""
    from planner.report import disagg_render as pd

    heading = f"disaggregated: {workload}"
    context = {"title": heading, "heading": heading, "about": about, "feasible": plan.feasible,
               "notes": list(notes), "choice": choice}
    if not plan.feasible:
        context |= {"status": named_text(solver_phrase(plan.solver_status), named),
                    "reasons": [e.text for e in plan.explanations]}
        return _render("disagg.html.j2", context)
    p, d = plan.prefill, plan.decode
    estimate = p.price_estimate or d.price_estimate
    lead, status = pd.answer_lines(plan, named)
    answer = [Figure(f"{r.role} GPUs", f"{fmt.count(r.gpus)} {r.chip}", f"{r.role}.gpus", r.gpus) for r in (p, d)]
    answer += [Figure("GPUs", fmt.count(plan.gpus), "gpus", plan.gpus),
               *money_figures(plan.cost_per_hour, plan.cost_per_hour * hours, estimate, hours)]
    if plan.cost_per_million_output_tokens is not None:
        answer += [Figure("$/M output tokens", fmt.per_million_tokens(plan.cost_per_million_output_tokens, estimate),
                          "cost_per_million_output_tokens", plan.cost_per_million_output_tokens),
                   Figure("$/M input tokens", fmt.per_million_tokens(plan.cost_per_million_input_tokens, estimate),
                          "cost_per_million_input_tokens", plan.cost_per_million_input_tokens)]
    answer += [Figure("TTFT (mean)", fmt.duration(plan.ttft.total_ms), "ttft.total_ms", plan.ttft.total_ms),
               Figure("solver", plan.solver_status, "solver_status", plan.solver_status)]
    pools = Table("the prefill and decode pools", [c.header.replace("\n", " ") for c in pd.POOL_COLUMNS],
                  pd.pools_rows(plan, hours), [c.align == "right" for c in pd.POOL_COLUMNS])
    tables = [pools]
    if plan.alternatives:
        tables.append(Table("the chosen fleet and the best fleets of the next prefill × decode shapes",
                            [c.header.replace("\n", " ") for c in pd.ALTERNATIVE_COLUMNS],
                            pd.alternatives_rows(plan, hours), [c.align == "right" for c in pd.ALTERNATIVE_COLUMNS]))
    service = p.model
    roles = [(f"{service} {r.role}", r) for r in (p, d)]
    context |= {"lead": lead, "status": status, "answer": answer, "tables": tables,
                "footnotes": price_footnotes([p, d], named), "why": pd.detail_lines(plan, named),
                "memory": [(f"{r.role}: one rank", captured(lambda c, r=r: pd.render_role_memory(r, c, named)))
                           for r in (p, d)],
                "provenance": provenance_table(role_provenance(p, d)),
                "launch": captured(lambda c: pd.render_launches(plan, c)),
                "manifests": manifests(roles, named, about.defaults, routers=[Router(service, plan.handover.one_node)])}
    return _render("disagg.html.j2", context)


def role_provenance(*pools) -> list[dict]:
    """Every registry value each role's kernel read, and the planner defaults, once each."""
    from planner.app.plan import _provenance

    rows: dict[str, dict] = {}
    for p in pools:
        for row in _provenance(p.kernel):
            rows.setdefault(row["name"], row)
    return list(rows.values())


@dataclass(frozen=True)
class Choice:
    """`--serving auto`: which kind of plan it chose and why, in the tool's words (ServingChoice.why),
    and both plans' figures on the same simulated arrivals when they were judged there."""

    chosen: str
    why: str
    same_arrivals: list[str] = field(default_factory=list)


def choice_of(choice: ServingChoice) -> Choice:
    """ServingChoice's words for the page, each plan's figures on the same arrivals a line."""
    label = {Serving.AGG: "aggregated", Serving.DISAGG: "disaggregated"}[choice.chosen]
    same = choice.same_arrivals
    if same is None:
        return Choice(label, choice.why)

    def line(kind: str, sim) -> str:
        figures = ", ".join(w for w in (f"mean TTFT {fmt.duration(sim.ttft_ms)}, mean TPOT "
                                        f"{fmt.duration(sim.tpot_ms)}", sim.figures_words()) if w)
        verdict = "meets the targets" if sim.meets else f"misses {', '.join(sim.misses) or 'a target'}"
        return (f"{kind}, {fmt.count(same.requests)} Poisson requests at {fmt.given(same.requests_per_second)} "
                f"requests/s (seed {same.seed}): {figures}; {verdict}")
    return Choice(label, choice.why, [line("aggregated", same.aggregated), line("disaggregated", same.disaggregated)])


# -- `plan --max-rate` ----------------------------------------------------------------------------
def max_rate_page(result: MaxRateResult, about: About, named=None) -> str:
    """`plan --max-rate --format html`: the most requests per second the pool serves within the
    targets, the pool (or fleet) at that rate, its cost and what the next rate misses; every shape's
    most (an aggregated pool); the commands and the manifests (planner/report/max_rate.py's words)."""
    from planner.report import disagg_render as pd
    from planner.report import max_rate as mr

    hours = result.hours_per_month
    heading = f"{result.model}: the most requests per second {fmt.plural(result.max_gpus, 'GPU')} serve"
    context = {"title": heading, "heading": heading, "about": about, "feasible": result.feasible,
               "lead": mr.max_rate_line(result, named), "notes": result.notes, "status": "",
               "reasons": [e.text for e in result.explanations], "why": [], "launch": "", "manifests": []}
    shapes = Table("the most each instance shape serves in the pool", [c.header for c in mr.SHAPE_COLUMNS],
                   mr.shape_rows(result), [c.align == "right" for c in mr.SHAPE_COLUMNS])
    context["tables"] = [shapes] if shapes.rows else []
    if not result.feasible:
        return _render("max_rate.html.j2", context)
    rate = result.requests_per_second
    answer = [Figure("requests/s", fmt.given(rate), "requests_per_second", rate)]
    f, best = result.fleet, result.best
    if f is not None:  # a disaggregated fleet at that rate
        p, d = f.prefill, f.decode
        estimate = p.price_estimate or d.price_estimate
        answer += [Figure(f"{r.role} GPUs", f"{fmt.count(r.gpus)} {r.chip}", f"fleet.{r.role}.gpus", r.gpus)
                   for r in (p, d)]
        answer += [Figure("GPUs", fmt.count(f.gpus), "fleet.gpus", f.gpus),
                   *money_figures(f.cost_per_hour, f.cost_per_hour * hours, estimate, hours)]
        per_m, key = f.cost_per_million_output_tokens, "fleet.cost_per_million_output_tokens"
        context["status"] = pd.answer_lines(f, named)[1]
        context["tables"] = [Table("the prefill and decode pools at that rate",
                                   [c.header.replace("\n", " ") for c in pd.POOL_COLUMNS], pd.pools_rows(f, hours),
                                   [c.align == "right" for c in pd.POOL_COLUMNS])]
        context["why"] = [f"binds: {result.binds}", *pd.detail_lines(f, named)]
        context["launch"] = captured(lambda c: pd.render_launches(f, c))
        context["manifests"] = manifests([(f"{p.model} {r.role}", r) for r in (p, d)], named, about.defaults,
                                         routers=[Router(p.model, f.handover.one_node)])
    else:
        estimate = best.price_estimate
        answer += [Figure("chip", best.chip, "best.chip", best.chip),
                   Figure("GPUs", fmt.count(best.gpus), "best.gpus", best.gpus),
                   *money_figures(best.cost_per_hour, best.cost_per_hour * hours, estimate, hours)]
        per_m, key = best.cost_per_million_output_tokens, "best.cost_per_million_output_tokens"
        context["why"] = [text.best_line(best), f"binds: {best.binds}", *text.speed_lines(best),
                          *text.serving_lines(best), *text.cost_lines(best)]
        context["launch"] = launch_text([("", best)], named)
        context["manifests"] = manifests([(best.model, best)], named, about.defaults)
    if per_m is not None:
        answer.append(Figure("$/M output tokens", fmt.per_million_tokens(per_m, estimate), key, per_m))
    context["answer"] = answer
    context["footnotes"] = price_footnotes([f.prefill, f.decode] if f is not None else [best], named)
    context["binds"] = result.binds
    return _render("max_rate.html.j2", context)


# -- `plan scenario` and `plan compare` ------------------------------------------------------------
def review_page(c: Comparison, about: About, draw: Draw | None = None, named=None, with_variants: bool = True) -> str:
    """`plan scenario --format html` (the base; with `with_variants` the variants and the grid beside
    it) and `plan compare --format html` (every point)."""
    hours = c.base.hours_per_month
    results = c.results if with_variants else [c.base]
    base = c.base
    heading = c.review or "capacity review"
    context = {"title": heading, "heading": heading, "about": about, "feasible": base.feasible,
               "status": search_line(base, named),
               "notes": list(dict.fromkeys(n for r in results for n in r.notes))}
    estimate = any(p.price_estimate for p in base.services)
    if base.feasible:
        chips = ", ".join(f"{fmt.count(u.gpus)} {u.chip}" for u in base.chips)
        context["lead"] = (f"{base.variant}: {fmt.plural(len(base.services), 'pool')} on "
                           f"{fmt.plural(base.gpus, 'GPU')} ({chips}), {fmt.money(base.cost_per_hour, estimate)}/hour")
        answer = [Figure("GPUs", fmt.count(base.gpus), "gpus", base.gpus),
                  *money_figures(base.cost_per_hour, base.cost_per_month, estimate, hours),
                  Figure("solver", base.solver_status, "solver_status", base.solver_status)]
        answer[1:1] = over_the_day_figures(base)
        for p in base.services:
            if p.cost_per_million_output_tokens is not None:
                answer.insert(-1, Figure(f"{p.service}: $/M output tokens", fmt.per_million_tokens(
                    p.cost_per_million_output_tokens, p.price_estimate)))
        context["answer"] = answer
    else:
        headline = named_text(unserved_words(base), named)
        context["verdict"] = headline[0].upper() + headline[1:] + "."
        context["reasons"] = [f"{s.service} is short: {s.reason}" for s in base.short]
        context["answer"] = over_the_day_figures(base)  # the fleet over the day may fit though the static plan does not
    tables = [services_table(r, hours) for r in ([base] if base.feasible else [])]
    if with_variants and c.variants:
        tables.insert(0, variants_table(c, hours))
        if c.ranking:
            tables.insert(1, grid_table(c, hours))
    why = fleet_lines(base) if base.feasible else []
    served = [t for r in results if r.feasible for p in r.services
              if (t := serving_table(p, p.service if len(results) == 1 else f"{r.variant}, {p.service}"))]
    assumptions = [f"{p.service}: {text.target_phrase(p)}" for p in base.services]
    assumptions += [f"{r.variant}: {search_line(r, named)}" for r in results]
    assumptions += [f"{r.variant}: {note}" for r in results for note in r.placement_notes]
    details = [(f"{r.variant}: its pools and what binds them", services_table(r, hours), fleet_lines(r))
               for r in results[1:] if r.feasible]
    used = sum(1 for n in base.nodes if any(n.used_by))
    over_the_day_pools = base.emitted_pools is not base.services  # with traffic: what --emit k8s writes
    context |= {
        "answer": context.get("answer", []), "tables": tables,
        "footnotes": price_footnotes([p for r in results for p in r.services], named),
        "why": why, "charts": inline_charts(draw), "serving": served, "assumptions": assumptions,
        "variant_tables": details,
        "nodes": node_table(base.nodes, [(p.service, p.instances) for p in base.services],
                            f"node map of {base.variant}: {used} of the {len(base.nodes)} nodes in use")
        if base.feasible and base.nodes else None,
        "schedules": schedule_sections(base, named) if base.feasible else [],
        "over_the_day": over_the_day_section(base),
        "launch": launch_text(fleet_pools(base.services), named) if base.feasible else "",
        "manifests": manifests(fleet_pools(base.emitted_pools), named, about.defaults, autoscaled(base),
                               fleet_routers(base.emitted_pools))
        if base.feasible or over_the_day_pools else [],  # as --emit k8s writes them (planner/commands/scenario.py)
        "manifests_over_the_day": over_the_day_pools,
        "launch_of": base.variant}
    return _render("review.html.j2", context)


def services_table(r: FleetResult, hours: int) -> Table:
    columns = text.fleet_columns(hours)
    return Table(f"{r.review or 'scenario'} — {r.variant}: the pools", [c.header.replace("\n", " ") for c in columns],
                 text.fleet_rows(r, hours), [c.align == "right" for c in columns])


def variants_table(c: Comparison, hours: int) -> Table:
    chips = chips_of(c)
    head = ["variant", *[f"{chip} GPUs" for chip in chips], "$/hour", f"$/month ({hours} h)", "vs base", "binds"]
    rows = []
    for r in c.results:
        estimate = any(p.price_estimate for p in r.services)
        figures = ([fmt.amount(r.cost_per_hour, estimate), fmt.amount(r.cost_per_month, estimate, cents=False),
                    "—" if r is c.base else delta(r.cost_per_hour, c.base.cost_per_hour)]
                   if r.feasible else [no_plan_cell(r), no_plan_cell(r), "—"])
        rows.append([r.variant, *[fmt.count(gpus_by_chip(r, chip)) if r.feasible else "—" for chip in chips],
                     *figures, binding(r)])
    return Table(f"{c.review or 'scenario'}: variants", head, rows,
                 [False, *[True] * (len(chips) + 3), False])


def grid_table(c: Comparison, hours: int) -> Table:
    from planner.scenario import point_word

    marked = {r.variant for r in c.results if any(p.price_estimate for p in r.services)}
    rows = [[fmt.count(g.rank), *[point_word(g.values[a], a) for a in c.grid],
             fmt.amount(g.cost_per_month, g.variant in marked, cents=False) if g.feasible else "infeasible",
             fmt.count(g.gpus) if g.feasible else "—"] for g in c.ranking]
    return Table(f"{c.review or 'scenario'}: grid points by cost",
                 ["rank", *c.grid, f"$/month ({hours} h)", "GPUs"], rows, [True, *[False] * len(c.grid), True, True])


def fleet_lines(r: FleetResult) -> list[str]:
    """What binds each service's pool, and how fast it serves (as the terminal prints them)."""
    out = []
    for p in r.services:
        lines = ([f"binds: {p.binds}", *text.speed_lines(p), *text.cost_lines(p)] if p.role == Role.AGGREGATED
                 else [f"binds: {p.binds}"])
        out += [f"{p.service}: {line}" for line in lines]
    return out


# -- traffic: the schedules and the fleet over the day ---------------------------------------------
@dataclass(frozen=True)
class Section:
    """A part of a review the text prints as a table and its lines (planner/report/schedule.py, fleet_schedule.py),
    here with its chart."""

    table: Table
    lines: list[str]
    chart: Chart | None = None


def over_the_day_figures(r: FleetResult) -> list[Figure]:
    """The headline figures of services with traffic: the peak of the sum, the sum of the services'
    own peaks and the fleet's $/day over the day (none without traffic, or when no fleet fits)."""
    over = r.over_the_day
    if over is None or r.peak_gpus is None:
        return []
    return [Figure("peak GPUs over the day", fmt.count(r.peak_gpus), "peak_gpus", r.peak_gpus),
            Figure("sum of the services' peaks", fmt.count(r.sum_of_service_peaks), "sum_of_service_peaks",
                   r.sum_of_service_peaks),
            Figure("$/day autoscaled", fmt.money(over.cost_autoscaled_per_day, cents=False),
                   "over_the_day.cost_autoscaled_per_day", over.cost_autoscaled_per_day)]


def _table(title: str, columns, rows: list[list[str]], scroll: bool = False) -> Table:
    return Table(title, [c.header for c in columns], rows, [c.align == "right" for c in columns], scroll=scroll)


def schedule_sections(r: FleetResult, named=None) -> list[Section]:
    """Each service with traffic: its schedule's runs of alike intervals and what it saves, as the
    text prints them (planner/report/schedule.py), and its chart (planner/report/schedule_chart.py)."""
    from planner.report import schedule
    from planner.report.schedule_chart import schedule_chart

    out = []
    for k, s in enumerate(r.schedules):
        notes = price_footnotes([p for p in r.services if p.service == s.service], named)

        def draw(path: str, s=s, notes=notes) -> list[tuple[str, str]]:
            schedule_chart([s], path, s.service, notes)  # its title names the service, the page the review
            return [(path, f"{s.service}: requests/s, replicas and $/day over the window")]

        out.append(Section(_table(schedule.title(s), schedule.COLUMNS, schedule.rows(s), scroll=True),
                           schedule.summary_lines(s), inline_charts(draw, f"s{k}-")[0]))
    return out


def over_the_day_section(r: FleetResult) -> Section | None:
    """The fleet over the day as the text prints it (planner/report/fleet_schedule.py) and its chart
    (planner/report/fleet_chart.py); None without traffic."""
    over = r.over_the_day
    if over is None:
        return None
    from planner.report import charts, fleet_schedule
    from planner.report.fleet_chart import fleet_written

    def draw(path: str) -> list[tuple[str, str]]:
        with charts.Batch() as batch:
            written = fleet_written(r, path, batch)
        return [written]

    table = _table(fleet_schedule.TITLE, fleet_schedule.COLUMNS, fleet_schedule.rows(over))
    chart = inline_charts(draw, "f")[0] if over.peak_gpus is not None else None
    return Section(table, fleet_schedule.summary_lines(over) + over.notes, chart)


# -- the templates ---------------------------------------------------------------------------------
def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(loader=PackageLoader("planner.report", "templates"),
                      autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["json_value"] = _json_value
    return env


def _json_value(value) -> str:
    """A figure's value as a data attribute holds it: JSON, as `--json` writes it."""
    import json

    return json.dumps(value, ensure_ascii=False)


def _render(template: str, context: dict) -> str:
    return _environment().get_template(template).render(**context)


def write(path: str, page: str) -> None:
    """The page written to `path` whole or not at all (planner/report/atomic.py); a system error is
    one line naming -o."""
    from planner.report.atomic import write_file

    write_file(path, lambda out: out.write(page.encode("utf-8")), OUTPUT_FIELD)
