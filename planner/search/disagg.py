"""The disaggregated search: a prefill pool and a decode pool chosen together, with CP-SAT.

Candidates are the oracle's rows (planner/candidates/table.py, memory only; pipeline stages for
prefill instances alone: vLLM 0.33's NixlConnector runs a kv_consumer without them, and a
kv_producer with them only on full-attention layouts, pricing/kernel/connector.py) taken in their roles
(planner/candidates/roles.py): per instance shape, the prefill row with the largest token budget and
the decode row that holds the most. Every prefill × decode pair k is priced in Python first:

    t_x[k]     a request's KV hand-over (pricing/step/transfer.py) over the pair's link
    decode     the largest batch per rank within TPOT whose pool also holds the arriving requests,
               and the requests per second an instance serves (X_d)
    prefill    the fewest prefill ranks whose M/D/1 wait (pricing/serving/queueing.py) keeps
               wait + prompt + t_x + first decode step within the TTFT target, as instances: P_ttft

then the model, for pairs k with y[k] ∈ {0,1} (exactly one), p[k], d[k] the instance counts:

    p[k] ≥ P_ttft[k] · y[k]                       the prefill pool meets TTFT at the rate, queueing included
    link_p[k] · p[k] ≥ rate · y[k]                 the prefill ranks' links hand over the rate's KV bytes
    X_d[k] · d[k] ≥ rate · y[k]                    the decode pool serves the rate within TPOT and memory
    link_d[k] · d[k] ≥ rate · y[k]                 the decode ranks' links take the rate's KV bytes in
    Σ gpus on chip c + spare[c] · Σ_{k on c} y[k] ≤ --max-gpus
                                                   shared GPUs, less the spare whole nodes' GPUs (--spare N:
                                                   N × the chip's node) of a chip the chosen pair uses
                                                   (rates in 1/1000 request per second, capacities floored)

minimising cost per hour, then GPUs, then the pair's rank (larger prefill budget, then the smaller
shapes), in one objective folded as cpsat.py folds its keys. The model takes each pair at its fewest
counts (more only cost more), so a pair priced over one node's NVLink is kept only when those counts
fit the node (`pairs_for`), and the report checks that placement laid it there.

Alternatives are re-solves without the shapes already reported (`build_and_solve`), as the
aggregated plan's are.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from planner.candidates.roles import DECODE, PREFILL, DecodeFigures, PrefillFigures, Refused
from planner.candidates.service import ResolvedService
from planner.candidates.table import ChipTable, Row, candidate_table, priced_chip
from planner.defaults import View
from planner.limits import price_units
from planner.numbers import duration, given, tokens, with_article
from planner.request import PoolLimits, ServiceSpec
from planner.search import cpsat
from planner.search.staged import Budget, Solved, Stage, solve_lexicographic
from planner.search.status import StageStatus
from planner.search.submodels import Inventory, PairChoice
from pricing.chips import Chip
from pricing.errors import InputError, Quoted, mention
from pricing.graph.model import ModelGraph
from pricing.kernel.connector import stages_refused
from pricing.serving.queueing import md1_wait, servers_for_wait
from pricing.step.transfer import Handover, handover, link_between, link_within_node
from pricing.units import cdiv

if TYPE_CHECKING:  # pragma: no cover  (OR-Tools is imported where a model is built or solved)
    from ortools.sat.python import cp_model

RATE_UNITS = 1000  # requests per second are counted in thousandths in the model


@dataclass(frozen=True)
class Reason:
    """Why a pair is not formed, as the report's Explanation states it: the chip ('' when the
    reason is the search's), the constraint by name, and the sentence."""

    chip: str
    constraint: str
    text: str


@dataclass(frozen=True)
class Side:
    """One role's candidates on one chip."""

    chip: Chip
    table: ChipTable
    rows: list[Row]


@dataclass(frozen=True)
class Pair:
    """One prefill × decode choice, priced: its fewest counts and what sets them."""

    prefill: PrefillFigures
    prefill_chip: Chip
    decode: DecodeFigures
    decode_chip: Chip
    handover: Handover
    prefill_min: int  # instances the TTFT target with queueing needs
    prefill_link: int  # capacity per instance, RATE_UNITS
    decode_serve: int  # capacity per instance, RATE_UNITS
    decode_link: int
    queue_seconds: float  # at the counts the model picks, filled in afterwards
    rank: int = 0
    node_gpus: int | None = None  # both pools within one node of this many GPUs (over its NVLink); None: any nodes

    def gpus(self, p: int, d: int) -> int:
        return p * self.prefill.row.gpus + d * self.decode.row.gpus

    def fewest(self, rate_units: int) -> tuple[int, int]:
        p = max(self.prefill_min, cdiv(rate_units, self.prefill_link))
        d = max(cdiv(rate_units, self.decode_serve), cdiv(rate_units, self.decode_link))
        return p, d

    def cost(self, rate_units: int) -> float:
        p, d = self.fewest(rate_units)
        return (p * self.prefill.row.gpus * self.prefill_chip.price_per_gpu_hour
                + d * self.decode.row.gpus * self.decode_chip.price_per_gpu_hour)


def rate_of(service: ServiceSpec) -> float:
    """The request rate a disaggregated fleet is sized for: --requests-per-second."""
    w = service.workload
    if w is None:
        raise InputError("serving", "disaggregated serving is sized by a workload",
                         f"add {mention('isl')} and {mention('osl')}")
    if w.requests_per_second is None:
        raise InputError("serving", "disaggregated serving is sized by a request rate",
                         f"add {mention('requests_per_second')} (or {mention('concurrency')} with {mention('ttft_ms')} "
                         f"and {mention('tpot_ms')})")
    if service.ttft_ms is None:
        raise InputError("serving", "the prefill pool is sized by the time to first token, queueing included",
                         f"add {mention('ttft_ms')}")
    return w.requests_per_second


def memory_service(resolved: ResolvedService, stages: bool = False) -> ResolvedService:
    """The service with its latency targets and workload removed: the oracle's rows by memory alone
    (the roles price their own steps), at the context length the rate gives (shapes.context_length,
    pinned before the workload goes); with `stages`, its pipeline sizes kept (a prefill instance
    may run them), else none (a decode instance runs none)."""
    service = resolved.spec
    return resolved.asking(service.model_copy(update={"tpot_ms": None, "ttft_ms": None, "workload": None, "slo": None,
                                                      "context_length": resolved.context_length,
                                                      "pp": service.pp if stages else (1,), "serving": "agg"}))


def _side(service: ResolvedService, chip_id: str, limits: PoolLimits, role) -> Side:
    chip = priced_chip(chip_id, limits, service.registry)
    table = _table(service, chip, limits)
    if role is PREFILL and (service.spec.pp or table.rows and stages_refused(PREFILL.kernel(service, chip,
                                                                                            table.rows[0])) is None):
        # the stages --pp asks for (each refused with vLLM's reason where it refuses them), or the default
        # grid's when the caches allow a prefill instance stages
        table = _table(service, chip, limits, stages=True)
    if role is PREFILL:  # per shape: the largest token budget, then the most prompts held
        best: dict = {}
        for row in table.rows:
            cur = best.get(row.shape)
            if cur is None or (row.max_num_batched_tokens, row.held_per_rank) > (cur.max_num_batched_tokens,
                                                                                 cur.held_per_rank):
                best[row.shape] = row
        rows = [best[s] for s in sorted(best)]
    else:
        rows = table.dominant()
    return Side(chip, table, rows if role is PREFILL else [r for r in rows if r.shape.pp == 1])


def _valid(service: ResolvedService, side: Side, role) -> tuple[list, list[Reason]]:
    """The side's rows the connector accepts, priced in their role (or why each is refused)."""
    out, why = [], []
    for row in side.rows:
        try:
            if role is PREFILL:
                found = PREFILL.figures(service, side.chip, row)
            else:
                found = (row, DECODE.step_model(service, side.chip, row))
        except InputError as err:
            what = "chip" if err.field == "chip" else "flags"  # the chip's data lacks a figure, or vLLM refuses
            line = Quoted(f"{side.chip.id} tp {row.shape.tp} dcp {row.shape.dcp}: ", err)
            why.append(Reason(side.chip.id, what, line))
            continue
        if isinstance(found, Refused):
            why.append(Reason(side.chip.id, found.constraint,
                              f"{side.chip.id} tp {row.shape.tp} × dp {row.shape.dp}: {found.text}"))
        else:
            out.append(found)
    return out, why


@dataclass
class DisaggSearch:
    pairs: list[Pair]
    chosen: tuple[Pair, int, int] | None
    status: str
    evaluated: int
    seconds: float
    explanations: list[Reason]
    model: ModelGraph
    rate: float
    ranked: list[tuple[Pair, int, int]] = field(default_factory=list)  # the chosen, then the alternatives
    stages: list[StageStatus] = field(default_factory=list)  # what each stage of the best fleet's solve proved


def pairs_for(resolved: ResolvedService, prefill_sides: list[Side], decode_sides: list[Side],
              rate: float) -> tuple[list[Pair], list[Reason]]:
    """Every prefill × decode pair that meets the targets at `rate`, priced; and why the rest do not.

    A pair of one chip whose node is one NVLink domain is priced twice: over the network (pools on
    any nodes), and over NVLink with both pools within one node (kept when its fewest counts fit
    the node: `plan`'s model holds it there; a scenario's reports it only where placement lays
    the pools on one node, `fleet_options`)."""
    model, service = resolved.graph, resolved.spec
    w = service.workload
    ttft = service.ttft_ms / 1000
    latent = model.attention_backend != "gqa"
    kv_heads = model.cache_kv_heads  # read by the hand-over only for a cache of heads (not latent)
    units = math.ceil(rate * RATE_UNITS)
    prefills, decodes, why = [], [], []
    for side in prefill_sides:
        found, refused = _valid(resolved, side, PREFILL)
        prefills += [(side, f) for f in found]
        why += refused
    for side in decode_sides:
        found, refused = _valid(resolved, side, DECODE)
        decodes += [(side, row, sm) for row, sm in found]
        why += refused
    if not prefills:
        first = why[0].text if why else None
        why.append(Reason("", "no_shape", first.within("prefill: no candidate instance (", ")")
                          if isinstance(first, Quoted) else
                          "prefill: no candidate instance" + (f" ({first})" if first else "")))
    if not decodes:
        why.append(Reason("", "no_shape", "decode: no candidate instance"))
    pairs: list[Pair] = []
    best_ttft: tuple[float, str] | None = None
    decode_memo: dict = {}
    for pside, pf in prefills:
        for dside, drow, sm in decodes:
            link = link_between(pside.chip, dside.chip, resolved.registry)
            if isinstance(link, str):
                why.append(Reason("", "network", link))
                continue
            links = [(link, None)]
            node = link_within_node(pside.chip, resolved.registry) if pside.chip.id == dside.chip.id else None
            if node is not None and not link.name.startswith("NVLink"):
                links.insert(0, (node, pside.table.gpus_per_node))
            for lk, node_gpus in links:
                kernel = sm.kernel
                bytes_per_rank = kernel.request_kv_bytes(w.isl)
                h = handover(bytes_per_rank, pf.row.shape.tp, drow.shape.tp, latent, kv_heads, lk,
                             pf.stage_share)
                key = (id(sm), round(h.seconds, 6))
                dec = decode_memo.get(key)
                if dec is None:
                    share = bytes_per_rank / kernel.request_bytes()
                    dec = decode_memo[key] = DECODE.figures(sm, service, drow, h.seconds, share)
                if isinstance(dec, Refused):
                    why.append(Reason(dside.chip.id, dec.constraint,
                                      f"decode {dside.chip.id} tp {drow.shape.tp} × dp {drow.shape.dp}: {dec.text}"))
                    continue
                budget = ttft - pf.prompt_seconds - h.seconds - dec.step_seconds
                spent = pf.prompt_seconds + h.seconds + dec.step_seconds
                if best_ttft is None or spent < best_ttft[0]:
                    best_ttft = (spent, f"the fastest pair (prefill {pside.chip.id} tp {pf.row.shape.tp} × dp "
                                        f"{pf.row.shape.dp}, decode {dside.chip.id} tp {drow.shape.tp} × dp "
                                        f"{drow.shape.dp}) takes {duration(pf.prompt_seconds * 1000)} to prefill "
                                        f"{with_article(tokens(w.isl))} prompt (the API server's time to its first "
                                        f"token in it), {duration(h.seconds * 1000)} to hand "
                                        f"it over and {duration(dec.step_seconds * 1000)} for the first decode step, "
                                        f"{duration(spent * 1000)} before any queueing, against "
                                        f"{given(service.ttft_ms)} ms")
                servers = servers_for_wait(rate, pf.service_rate, budget)
                if servers is None:
                    continue
                dp_p, dp_d = pf.row.shape.dp, drow.shape.dp
                p_link = math.floor(h.prefill_rate(dp_p) * RATE_UNITS)
                d_link = math.floor(h.decode_rate(dp_d) * RATE_UNITS)
                d_serve = math.floor(dec.requests_per_second * RATE_UNITS)
                if min(p_link, d_link, d_serve) < 1:
                    continue
                pair = Pair(pf, pside.chip, dec, dside.chip, h, cdiv(servers, dp_p), p_link, d_serve, d_link, 0.0,
                            node_gpus=node_gpus)
                if node_gpus is not None and pair.gpus(*pair.fewest(units)) > node_gpus:
                    continue  # the two pools do not fit one node: their hand-over crosses the network
                pairs.append(pair)
    if not pairs and best_ttft is not None:
        why.append(Reason("", "latency", f"ttft: {best_ttft[1]}"))
    order = sorted(range(len(pairs)), key=lambda i: _rank_key(pairs[i], units))
    ranked = [pairs[i] for i in order]
    return [Pair(**{**p.__dict__, "rank": i}) for i, p in enumerate(ranked)], list(dict.fromkeys(why))


def _rank_key(p: Pair, units: int) -> tuple:
    ps, ds = p.prefill.row.shape, p.decode.row.shape
    return (round(p.cost(units), 6), p.node_gpus is None, -p.prefill.row.max_num_batched_tokens, ps.tp, ps.dp, ps.ep,
            ds.tp, ds.dp, ds.ep, ds.dcp, p.prefill_chip.id, p.decode_chip.id)


def shapes_of(pair: Pair) -> tuple:
    """What an alternative must differ in: the two pools' chips and instance shapes."""
    return pair.prefill_chip.id, pair.prefill.row.shape, pair.decode_chip.id, pair.decode.row.shape


def build_and_solve(pairs: list[Pair], rate: float, limits: PoolLimits, wanted: int,
                    per_node: dict[str, int] | None, budget: Budget) -> tuple[str, list[tuple[Pair, int, int]]]:
    """The best fleet (the CP-SAT model of the module's docstring: the chosen pair and its two
    counts), then the best fleets of the next shapes, `wanted` in all: `ranked_fleets`. The
    status is the first solve's."""
    status, _, ranked = ranked_fleets(pairs, rate, limits, wanted, per_node, budget)
    return status, ranked


def ranked_fleets(pairs: list[Pair], rate: float, limits: PoolLimits, wanted: int,
                  per_node: dict[str, int] | None, budget: Budget
                  ) -> tuple[str, list[StageStatus], list[tuple[Pair, int, int]]]:
    """The best fleet, then the best fleets of the next shapes, `wanted` in all: each re-solve
    leaves out every pair of the shapes already reported, as the aggregated plan's alternatives do
    (planner/search/cpsat.py search), and every solve draws on one `budget` (its view of the planner
    defaults the models read too). `per_node`: GPUs per node of each chip, for its --spare nodes.
    The status and stages are the first solve's."""
    status, stages, ranked, left = "INFEASIBLE", [], [], list(pairs)
    for n in range(wanted):
        solved, found = pair_model(left, rate, limits, per_node or {}, budget.reads).solve(budget)
        if n == 0:
            status, stages = solved.status, solved.stages
        if found is None:
            break
        ranked.append(found)
        seen = shapes_of(found[0])
        left = [q for q in left if shapes_of(q) != seen]
        if not left:
            break
    return status, stages, ranked


def spare_gpus(limits: PoolLimits, per_node: dict[str, int]) -> dict[str, int]:
    """GPUs of each chip's --spare whole nodes, where an inventory (--max-gpus) must keep them."""
    if limits.max_gpus is None or not limits.spare:
        return {}
    return {chip: limits.spare * node for chip, node in per_node.items()}


@dataclass
class PairModel:
    """The module's CP-SAT model over some pairs: the PairChoice, the Inventory of --max-gpus
    (with the --spare nodes of the chips in use), and its two stages: cost, then (GPUs, then rank)
    folded with `rank_range`."""

    model: cp_model.CpModel
    choice: PairChoice
    rank_range: int
    price_units: int  # per dollar

    def stages(self) -> list[Stage]:
        units, fold = self.price_units, self.rank_range
        return [Stage("cost", self.choice.cost, lambda value, bound: (value / units, max(bound, 0) / units)),
                Stage("GPUs, then rank", self.choice.gpus * fold + self.choice.rank,
                      lambda value, bound: (value // fold, max(bound, 0) // fold))]

    def solve(self, budget: Budget) -> tuple[Solved, tuple[Pair, int, int] | None]:
        """The lexicographic solve (planner/search/staged.py) and the chosen pair with its counts."""
        solved = solve_lexicographic(self.model, self.stages(), budget)
        return solved, (self.choice.picked(solved) if solved.solver is not None else None)


def pair_model(pairs: list[Pair], rate: float, limits: PoolLimits, per_node: dict[str, int],
               reads: View) -> PairModel:
    """The module's CP-SAT model over `pairs`, started from the cheapest pair at its fewest counts
    (optimal without an inventory; its price units read through `reads`)."""
    from ortools.sat.python import cp_model  # OR-Tools is imported when a model is built (bench/bench_cli.py)
    units = math.ceil(rate * RATE_UNITS)
    m = cp_model.CpModel()
    per_dollar = reads.value("solver.price_units_per_dollar")
    cap = limits.max_gpus
    kept = spare_gpus(limits, per_node)
    ceiling = []
    for pair in pairs:
        p_lo, d_lo = pair.fewest(units)
        p_hi = max(p_lo, (cap - kept.get(pair.prefill_chip.id, 0)) // pair.prefill.row.gpus) if cap else p_lo
        d_hi = max(d_lo, (cap - kept.get(pair.decode_chip.id, 0)) // pair.decode.row.gpus) if cap else d_lo
        ceiling.append((p_hi, d_hi))
    prices = {c.id: price_units(c.price_per_gpu_hour, reads) for pair in pairs
              for c in (pair.prefill_chip, pair.decode_chip)}
    choice = PairChoice(m, pairs, units, prices, ceiling)
    if cap is not None:
        chips = sorted({c for pair in pairs for c in (pair.prefill_chip.id, pair.decode_chip.id)})
        Inventory(m, [choice], dict.fromkeys(chips, cap), kept)
    rank_range = max(p.rank for p in pairs) + 2
    if (choice.top(ceiling) + 1) * rank_range >= cpsat.INT_LIMIT:
        raise OverflowError(f"the objective exceeds 2^62: lower {mention('max_gpus')} or the rate")
    best = min(range(len(pairs)), key=lambda i: (pairs[i].cost(units), pairs[i].rank))
    p_best, d_best = pairs[best].fewest(units)
    for var, value in ((choice.y[best], 1), (choice.p[best], p_best), (choice.d[best], d_best)):
        m.add_hint(var, value)  # the cheapest pair at its fewest counts: optimal without an inventory
    return PairModel(m, choice, rank_range, per_dollar)


def search(resolved: ResolvedService, alternatives: int | None = None, budget: Budget | None = None) -> DisaggSearch:
    """The cheapest prefill and decode pools for the service at its request rate (the chips: --chip,
    or --prefill-chip / --decode-chip), and the best fleets of the next `alternatives` shapes
    (default: the planner's report.alternatives), every solve within one `budget` (default: one of
    --time-limit; `plan --serving auto` may share one with the aggregated search)."""
    unrecorded = resolved.defaults.unrecorded  # a P/D result lists no planner defaults
    wanted = 1 + (alternatives if alternatives is not None else unrecorded.value("report.alternatives"))
    limits, model = resolved.limits, resolved.graph
    prefill_chips, decode_chips = limits.prefill_chips, limits.decode_chips
    start = time.perf_counter()
    rate = rate_of(resolved.spec)
    p_sides = [_side(resolved, c, limits, PREFILL) for c in (prefill_chips or limits.chips)]
    d_sides = [_side(resolved, c, limits, DECODE) for c in (decode_chips or limits.chips)]
    evaluated = sum(s.table.evaluated for s in {id(s.table): s for s in p_sides + d_sides}.values())
    pairs, why = pairs_for(resolved, p_sides, d_sides, rate)
    if not pairs:
        return DisaggSearch([], None, "INFEASIBLE", evaluated, time.perf_counter() - start, why, model, rate)
    per_node = {s.chip.id: s.table.gpus_per_node for s in p_sides + d_sides}
    status, stages, ranked = ranked_fleets(pairs, rate, limits, wanted, per_node,
                                           budget or Budget(limits.time_limit, unrecorded))
    ranked = [(Pair(**{**pair.__dict__, "queue_seconds": md1_wait(rate / (p * pair.prefill.row.shape.dp),
                                                                   pair.prefill.service_rate)}), p, d)
              for pair, p, d in ranked]
    chosen = ranked[0] if ranked else None
    if chosen is None:
        why = why or [Reason("", "max_gpus", beyond_inventory(pairs, rate, limits, per_node))]
    return DisaggSearch(pairs, chosen, status, evaluated, time.perf_counter() - start, why, model, rate,
                        ranked, stages)


def beyond_inventory(pairs: list[Pair], rate: float, limits: PoolLimits, per_node: dict[str, int]) -> str:
    """Why no pair fits --max-gpus (with its --spare nodes kept on every chip the pair uses), and
    the nearest --max-gpus that holds one: the least, over the pairs at their fewest counts, of the
    most GPUs the pair and its spares take on one chip."""
    units = math.ceil(rate * RATE_UNITS)
    kept = spare_gpus(limits, per_node)

    def need(pair: Pair) -> int:
        fleet = FleetPair(pair, *pair.fewest(units), 0)
        return max(fleet.gpus_on(c) + kept.get(c, 0) for c in fleet.chips)

    spares = ""
    if kept:
        nodes = ", ".join(f"{n} GPUs of {c}" for c, n in sorted(kept.items()))
        plural = "s" if limits.spare > 1 else ""
        spares = (f" beside the {mention('spare')} {limits.spare} whole node{plural} kept free on each chip a pair "
                  f"uses ({nodes})")
    max_gpus = mention("max_gpus")
    return (f"no prefill × decode pair fits within {max_gpus} {limits.max_gpus}{spares}; nearest fit: {max_gpus} "
            f"{min(need(p) for p in pairs)}")


def _table(service: ResolvedService, chip: Chip, limits: PoolLimits, stages: bool = False) -> ChipTable:
    return candidate_table(memory_service(service, stages), chip, limits.model_copy(update={"chips": (chip.id,)}))



@dataclass(frozen=True)
class FleetPair:
    """A prefill pool and a decode pool at their fewest counts, as one choice of a scenario's CP-SAT
    model (planner/search/fleet.py): taken once or not at all, it serves the service's rate, so it
    counts as holding the service's whole concurrency."""

    pair: Pair
    prefill: int  # instances
    decode: int
    concurrency: int
    within_node: Pair | None = None  # the same pools priced over one node's NVLink, met by these counts

    @property
    def chip(self) -> str:
        return self.pair.prefill_chip.id

    @property
    def chips(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.pair.prefill_chip.id, self.pair.decode_chip.id)))

    @property
    def gpus(self) -> int:
        return self.prefill * self.pair.prefill.row.gpus + self.decode * self.pair.decode.row.gpus

    def instances(self, chip: str) -> list[tuple[int, int]]:
        out = []
        if chip == self.pair.prefill_chip.id:
            out.append((self.pair.prefill.row.gpus, self.prefill))
        if chip == self.pair.decode_chip.id:
            out.append((self.pair.decode.row.gpus, self.decode))
        return out

    def gpus_on(self, chip: str) -> int:
        return sum(g * n for g, n in self.instances(chip))


@dataclass(frozen=True)
class PairOption:
    """A FleetPair as one of a scenario service's pool choices (planner/search/submodels.py
    `Choosable`): taken once or not at all, at its own cost, both pools' (no price per GPU: its two
    pools may be on chips of two prices)."""

    fleet: FleetPair
    rank: int
    cost_units: int  # per hour, in planner/defaults.yaml solver.price_units_per_dollar
    cost: float  # USD per hour
    rmin: int = 1
    rmax: int = 1

    @property
    def row(self) -> FleetPair:
        """What the model chooses, as a candidate row's `Option.row`: the two pools at their counts."""
        return self.fleet


def _pools_of(pair: Pair) -> tuple:
    """What makes two pairs the same two pools: chips and rows (the link apart)."""
    return pair.prefill_chip.id, pair.prefill.row, pair.decode_chip.id, pair.decode.row


def fleet_options(resolved: ResolvedService, stock: dict[str, int | None], first_rank: int,
                  per_node: dict[str, int]) -> tuple[list[PairOption], list[Reason]]:
    """The service's prefill × decode pairs as scenario options (one replica each, at their fewest
    counts), those no other pair beats on cost with as few GPUs on every chip, within the stock;
    and why there are none. The options are priced over the network (the scenario's nodes are
    shared, so the model cannot hold two pools on one node); each carries its twin priced over one
    node's NVLink where the pools at its counts fit a node, for the report to use where placement
    lays them there."""
    service, limits = resolved.spec, resolved.limits
    unrecorded = resolved.defaults.unrecorded  # a fleet's result lists no planner defaults
    rate = rate_of(service)
    chip_limits = {c: limits.model_copy(update={"gpus_per_node":
                                                per_node.get(priced_chip(c, limits, resolved.registry).id)})
                   for c in limits.chips}
    p_sides = [_side(resolved, c, chip_limits[c], PREFILL) for c in (limits.prefill_chips or limits.chips)]
    d_sides = [_side(resolved, c, chip_limits[c], DECODE) for c in (limits.decode_chips or limits.chips)]
    priced, why = pairs_for(resolved, p_sides, d_sides, rate)
    units = math.ceil(rate * RATE_UNITS)
    pairs = [q for q in priced if q.node_gpus is None]  # nodes shared: chosen over the network
    twins = {_pools_of(q): q for q in priced if q.node_gpus is not None}
    found = []
    for pair in pairs:
        p, d = pair.fewest(units)
        twin = twins.get(_pools_of(pair))
        if twin is not None and any(a > b for a, b in zip(twin.fewest(units), (p, d), strict=True)):
            twin = None  # over NVLink it would need more instances than the network pair has
        row = FleetPair(pair, p, d, service.required, twin)
        if any(stock.get(c) is not None and row.gpus_on(c) > stock[c] for c in row.chips):
            continue
        cost_units = (price_units(pair.prefill_chip.price_per_gpu_hour, unrecorded) * p * pair.prefill.row.gpus
                      + price_units(pair.decode_chip.price_per_gpu_hour, unrecorded) * d * pair.decode.row.gpus)
        found.append((cost_units, pair.rank, row, pair.cost(units)))
    found.sort(key=lambda f: (f[0], f[1]))
    kept: list = []
    for cost_units, _, row, dollars in found:  # Pareto: drop a pair another beats on cost and on every chip
        use = {c: row.gpus_on(c) for c in row.chips}
        if any(all(k[2].gpus_on(c) <= n for c, n in use.items()) for k in kept):
            continue
        kept.append((cost_units, dollars, row))
    if not kept and not why:
        why = [Reason("", "max_gpus", "no prefill × decode pair fits the stock ("
                      + ", ".join(f"{c} {n}" for c, n in stock.items()) + ")")]
    return [PairOption(row, first_rank + i, cost_units, dollars)
            for i, (cost_units, dollars, row) in enumerate(kept)], why
