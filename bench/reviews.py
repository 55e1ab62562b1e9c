"""Generated capacity reviews for the fleet-scale bench (bench/bench_fleet.py).

    python bench/reviews.py --services 500 --inventory loose --out review.yaml
    python bench/reviews.py --grid --out grid.yaml
    python bench/reviews.py --services 120 --inventory tight --seed 7 --out fresh.yaml

A review of N services drawn with a fixed seed: the shipped cards in turn (every card appears
before any repeats, in a shuffled order), a context length from 8k to 128k within the model's
positions, 1 to 3 chips from the data-centre parts, a concurrency from 8 to 256. Inventories:

- `free`: no GPU counts (each service's own optimum is the answer);
- `loose`: twice the GPUs the free answer uses on each chip, in whole nodes;
- `tight`: the free answer's GPUs in whole nodes, the most used chip 10 % short (whole nodes) and
  the other chips 10 % over, so the services' own optima do not fit together and some move.

The loose and tight inventories read the free answer's GPUs per chip, planned in this process
(`need`). The grid is the 50-service review (cards with at least 32k positions, so every point's
context is within every model) with a `grid:` of 5 growth factors × 5 prices of h200 × 4 context
lengths: 100 points.
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

SEED = 24
CHIPS = ("h100", "h200", "b200", "b300", "a100-80gb", "mi300x", "mi325x", "h20", "gb200")
CONTEXTS = (8192, 16384, 32768, 65536, 131072)
CONCURRENCY = (8, 16, 32, 64, 128, 256)
GRID = {"growth": [1.0, 1.25, 1.5, 2.0, 3.0], "price.h200": [3.0, 3.5, 4.0, 4.5, 5.0],
        "context_length": [8192, 16384, 24576, 32768]}
GRID_SERVICES = 50
GRID_MIN_POSITIONS = 32768


def cards() -> dict[str, int]:
    """Every shipped card and its positions (the model's maximum context)."""
    from pricing.graph import load_model

    folder = Path(__file__).resolve().parents[1] / "pricing" / "cards"
    return {p.stem: load_model(p.stem).max_position for p in sorted(folder.glob("*.yaml"))}


def services(n: int, min_positions: int = 0, seed: int = SEED) -> list[dict]:
    """N services drawn with `seed`: every card in turn, its context within its positions."""
    rng = random.Random(seed)
    pool = {name: positions for name, positions in cards().items() if positions >= min_positions}
    order: list[str] = []
    out = []
    for i in range(n):
        if not order:
            order = sorted(pool)
            rng.shuffle(order)
        model = order.pop()
        context = rng.choice([c for c in CONTEXTS if c <= pool[model]])
        chips = sorted(rng.sample(CHIPS, rng.randint(1, 3)))
        out.append({"name": f"s{i}", "model": model, "concurrency": rng.choice(CONCURRENCY),
                    "context_length": context, "chips": chips})
    return out


def render(title: str, listed: list[dict], inventory: dict[str, dict], grid: dict | None = None) -> str:
    lines = [f"review: {title}", "inventory:"]
    for chip in sorted(inventory):
        fields = ", ".join(f"{k}: {v}" for k, v in inventory[chip].items())
        lines.append(f"  {chip}: {{{fields}}}")
    lines.append("services:")
    for s in listed:
        lines.append(f"  - {{name: {s['name']}, model: {s['model']}, concurrency: {s['concurrency']}, "
                     f"context_length: {s['context_length']}, chips: [{', '.join(s['chips'])}]}}")
    if grid:
        lines.append("grid:")
        for axis, values in grid.items():
            lines.append(f"  {axis}: [{', '.join(f'{v:g}' if isinstance(v, float) else str(v) for v in values)}]")
    return "\n".join(lines) + "\n"


def node_size(chip: str) -> int:
    from pricing.chips import get_chip

    return get_chip(chip).gpus_per_node


def free_inventory(listed: list[dict]) -> dict[str, dict]:
    return {chip: {"gpus_per_node": node_size(chip)} for chip in sorted({c for s in listed for c in s["chips"]})}


def need(listed: list[dict], title: str) -> dict[str, int]:
    """GPUs per chip of the free review's answer (each service's own optimum), planned here."""
    from planner.app.fleet import plan_scenario
    from planner.scenario import Scenario
    from pricing import yaml_fast

    scenario = Scenario(**yaml_fast.load(render(title, listed, free_inventory(listed))))
    result = plan_scenario(scenario, time_limit=600)
    if not result.feasible:
        raise SystemExit(f"the free review of {len(listed)} services is infeasible: {result.short[:3]}")
    return {u.chip: u.gpus for u in result.chips}


def whole_nodes(gpus: float, chip: str) -> int:
    per = node_size(chip)
    return max(per, math.ceil(gpus / per) * per)


def inventory(listed: list[dict], kind: str, title: str) -> dict[str, dict]:
    free = free_inventory(listed)
    if kind == "free":
        return free
    used = need(listed, title)
    out = {}
    busiest = max(used, key=lambda c: (used[c], c))
    for chip, fields in free.items():
        gpus = used.get(chip, 0)
        if kind == "loose":
            stock = whole_nodes(2 * gpus, chip)
        elif chip == busiest:
            stock = whole_nodes(gpus * 0.9, chip)
            stock = stock if stock < gpus else stock - node_size(chip)
        else:
            stock = whole_nodes(gpus * 1.1, chip) if gpus else 0
        out[chip] = {"gpus": stock, **fields}
    return out


def review(n: int, kind: str, seed: int = SEED) -> str:
    listed = services(n, seed=seed)
    title = f"bench {n} services, {kind} inventory" + (f", seed {seed}" if seed != SEED else "")
    return render(title, listed, inventory(listed, kind, title))


def grid_review() -> str:
    listed = services(GRID_SERVICES, min_positions=GRID_MIN_POSITIONS)
    return render(f"bench grid of {GRID_SERVICES} services", listed, free_inventory(listed), GRID)


def grid_points() -> list[tuple[str, dict]]:
    """The grid's points as named variants of overrides (the expansion `plan scenario` makes of
    `grid:`): growth scales each service's concurrency (rounded up), the others set a field."""
    import itertools

    listed = services(GRID_SERVICES, min_positions=GRID_MIN_POSITIONS)
    points = []
    for growth, price, context in itertools.product(*GRID.values()):
        overrides: dict = {f"services.{s['name']}.concurrency": math.ceil(s["concurrency"] * growth) for s in listed}
        overrides.update({"price.h200": price, "context_length": context})
        points.append((f"growth {growth:g}, price.h200 {price:g}, context_length {context}", overrides))
    return points


def grid_as_variants() -> str:
    """The grid review with its points written out as variants (for code that reads no `grid:`)."""
    listed = services(GRID_SERVICES, min_positions=GRID_MIN_POSITIONS)
    text = render(f"bench grid of {GRID_SERVICES} services", listed, free_inventory(listed))
    lines = ["variants:"]
    for name, overrides in grid_points():
        fields = ", ".join(f"{k}: {v}" for k, v in overrides.items())
        lines.append(f"  '{name}': {{{fields}}}")
    return text + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=50)
    parser.add_argument("--inventory", choices=("free", "loose", "tight"), default="free")
    parser.add_argument("--grid", action="store_true", help="the 100-point grid of a 50-service review")
    parser.add_argument("--expanded", action="store_true", help="the grid's points written out as variants")
    parser.add_argument("--seed", type=int, default=SEED, help=f"the draw's seed (default {SEED}, the benches'; "
                        "another gives a fresh review to judge a change on that the benches' reviews did not shape)")
    parser.add_argument("--out", required=True)
    opts = parser.parse_args()
    if opts.grid:
        Path(opts.out).write_text(grid_as_variants() if opts.expanded else grid_review())
    else:
        Path(opts.out).write_text(review(opts.services, opts.inventory, opts.seed))


if __name__ == "__main__":
    main()
