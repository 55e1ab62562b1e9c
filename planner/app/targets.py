"""The service targets in words, through the number formatter: the targets asked ('p99 TTFT ≤
2,000 ms', 'goodput ≥ 99.0%'), the percentiles a simulated benchmark measured, and which target
sets a pool's replica count (the candidates carry the values: planner/candidates/slo.py)."""

from __future__ import annotations

from planner.numbers import duration, given, percent, plural
from planner.request import METRIC_NAMES, ServiceSpec


def target_words(service: ServiceSpec) -> list[str]:
    """The service targets in words: 'p99 TTFT ≤ 2,000 ms', 'goodput ≥ 99.0%'; none without targets."""
    if service.slo is None:
        return []
    words = [f"p{p} {METRIC_NAMES[m]} ≤ {given(ms)} ms" for m, p, ms in service.slo.targets]
    if service.slo.goodput is not None:
        words.append(f"goodput ≥ {percent(service.slo.goodput)}")
    return words


def measured_words(service: ServiceSpec, served) -> str:
    """The measured percentiles the targets name, in words: 'p99 TTFT 1,234.5 ms'."""
    return ", ".join(f"p{p} {METRIC_NAMES[m]} {duration(served.metric(m).percentile(p) * 1000)}"
                     for m, p, _ in service.slo.targets)


def binds_words(service: ServiceSpec, sizing) -> str | None:
    """Which target sets the replica count, with the figures one replica fewer; None when memory
    (the concurrency held) does."""
    from planner.candidates import slo

    found = slo.binding(service, sizing)
    if found is None:
        return None
    r, missed = found
    rate = service.workload.requests_per_second
    said = []
    for metric, p, bound, got in missed:
        if metric == "goodput":
            said.append(f"goodput {percent(bound)} (at {plural(r - 1, 'replica')} {percent(got)} of requests meet "
                        "every bound)")
        else:
            said.append(f"p{p} {METRIC_NAMES[metric]} ≤ {given(bound)} ms (at {plural(r - 1, 'replica')}, "
                        f"{rate / (r - 1):,.2f} requests/s each: {duration(got)})")
    return (f"service targets at {given(rate)} requests/s: " + "; ".join(said)
            + f"; at {plural(r, 'replica')} ({rate / r:,.2f} requests/s each): "
            f"{measured_words(service, sizing.served)}")


def missed_phrases(missed: list[tuple[str, int, float, float]]) -> list[str]:
    """Each target a benchmark missed, as slo.misses gives it, in words: 'p99 TPOT 4.9 ms against
    ≤ 2 ms', 'goodput 97.4% against ≥ 99.0%'."""
    return [f"goodput {percent(got)} against ≥ {percent(bound)}" if metric == "goodput" else
            f"p{p} {METRIC_NAMES[metric]} {duration(got)} against ≤ {given(bound)} ms"
            for metric, p, bound, got in missed]


def narrower_words(service: ServiceSpec, sizing, replicas: int, sized: dict | None) -> str | None:
    """Why a pool sized to service targets takes more GPUs than one replica needs for memory: the
    narrowest split on its chip that would use fewer GPUs misses the targets there (at the most
    replicas that fit in fewer GPUs, or even one request at a time), as the search simulated it;
    None when no narrower split was simulated or one meets them."""
    from planner.candidates import slo

    row = sizing.candidate.row
    gpus = row.gpus * replicas
    rate = service.workload.requests_per_second
    found = []
    for (chip, other), s in (sized or {}).items():
        most = (gpus - 1) // other.gpus
        if chip != row.chip or other.gpus >= gpus or most < max(1, s.memory):
            continue
        missed = slo.misses(service, s.alone or s.at(most))
        if not missed:
            return None  # a narrower pool meets them: something else (the inventory) sets this one
        found.append((other.gpus, other.shape, most, s, missed))
    if not found:
        return None
    _, shape, most, s, missed = min(found, key=lambda f: f[:2])
    said = ", ".join(missed_phrases(missed))
    where = ("even one request at a time" if s.alone is not None else
             f"at {most} replica{'s' if most > 1 else ''} ({rate / most:,.2f} requests/s each)")
    return (f"service targets at {given(rate)} requests/s: on fewer GPUs, {shape.split()} (the narrowest split "
            f"simulated) misses them {where}: {said}; "
            f"at {replicas} × {row.shape.split()} ({rate / replicas:,.2f} requests/s each): "
            f"{measured_words(service, sizing.served)}")


def met_words(service: ServiceSpec, sizing, replicas: int) -> str:
    """A pool that memory alone would size, sized to service targets with no concurrency asked:
    the fewest replicas of its split meet the targets at the rate, with their figures."""
    row = sizing.candidate.row
    rate = service.workload.requests_per_second
    return (f"service targets at {given(rate)} requests/s: met by {replicas} × {row.shape.split()} "
            f"({rate / replicas:,.2f} requests/s each), the fewest of this split: "
            f"{measured_words(service, sizing.served)}")
