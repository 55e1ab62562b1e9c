"""Waiting before service at a pool of identical servers, in closed form.

Requests arrive as a Poisson stream at rate λ and are spread evenly and at random over c servers,
each serving one request in a fixed time 1/μ (a prefill rank running one prompt's chunks): every
server is then an M/D/1 queue at λ/c, and its mean wait is Pollaczek–Khinchine's

    W = ρ / (2 μ (1 − ρ)),   ρ = λ / (c μ) < 1.

Random spreading is the conservative case: a router that alternates (vLLM's toy proxy cycles
through its prefillers) or joins the shortest queue waits less.
"""

from __future__ import annotations

import math


def md1_wait(arrival_rate: float, service_rate: float) -> float:
    """Mean seconds a request waits at one M/D/1 server; infinite at utilization 1 or above."""
    rho = arrival_rate / service_rate
    if rho >= 1.0:
        return math.inf
    return rho / (2.0 * service_rate * (1.0 - rho))


def servers_for_wait(arrival_rate: float, service_rate: float, wait_budget: float) -> int | None:
    """The fewest servers whose mean wait is within `wait_budget` seconds (None: no budget left).
    W falls as servers are added, so the bound is W ≤ B ⇔ ρ ≤ 2μB / (1 + 2μB)."""
    if wait_budget < 0 or service_rate <= 0:
        return None
    if arrival_rate <= 0:
        return 0
    x = 2.0 * service_rate * wait_budget
    rho_max = x / (1.0 + x)
    if rho_max <= 0:
        return None
    c = max(1, math.ceil(arrival_rate / (service_rate * rho_max) - 1e-12))
    while md1_wait(arrival_rate / c, service_rate) > wait_budget:  # float rounding at the bound
        c += 1
    return c
