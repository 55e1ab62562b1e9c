"""The parts every search's CP-SAT model is made of (the cpsat-primer's submodels): each a small
class that adds its variables and constraints to one shared model and exposes the linear terms
the others and the objective read. A search composes them (planner/search/cpsat.py `build`,
disagg.py `pair_model`, fleet.py `fleet_model`) and solves the composition with
planner/search/staged.py `solve_lexicographic`.

    PoolChoice   one service: one option x[i] ∈ {0,1} (exactly one, or at most one where a service
                 may go unserved) at its fewest replicas r[i] = rmin · x[i]; Σ held · r ≥ required
    PairChoice   one disaggregated service: one prefill × decode pair y[k] and its two instance counts,
                 matched to the request rate (planner/search/disagg.py's docstring)
    ChipInUse    u[c] ∈ {0,1}: a chosen option takes GPUs on chip c (x ⇒ u)
    Inventory    Σ GPUs on chip c + spare[c] · u[c] ≤ inventory[c]  (--max-gpus, a scenario's stock, --spare)
    NodePacking  a scenario's node packing: instances larger than a node take whole nodes, beside the
                 spare nodes of a chip in use (planner/search/fleet.py)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from pricing.units import cdiv

if TYPE_CHECKING:  # pragma: no cover  (OR-Tools is imported where a model is built)
    from ortools.sat.python import cp_model


class Chosen(Protocol):
    """What the model reads of a chosen thing (a candidate row, or a prefill × decode fleet)."""

    concurrency: int

    @property
    def gpus(self) -> int: ...

    @property
    def chips(self) -> tuple[str, ...]: ...

    def gpus_on(self, chip: str) -> int: ...

    def instances(self, chip: str) -> list[tuple[int, int]]: ...


class Choosable(Protocol):
    """A pool choice as the model takes it: the thing chosen, its cost and replica bounds, its rank."""

    row: Chosen
    rmin: int
    rmax: int
    rank: int

    @property
    def cost_units(self) -> int: ...


class Part(Protocol):
    """A submodel whose choice takes GPUs: the terms per chip and the literals that choose it."""

    def gpus_on(self, chip: str) -> list: ...

    def uses(self, chip: str) -> list: ...


class PoolChoice:
    """One service's pool: exactly one option x[i] (at most one when `optional`), at its fewest
    replicas, r[i] = rmin · x[i]; with `required`, the requests held reaching it.

    The fewest replicas are the only count an optimum takes: one more replica costs more and takes
    more GPUs (cost, then GPUs, lead every search's keys) and only tightens the inventory and the
    node packing, so fixing r at rmin leaves every optimum in place and takes the replica variables
    out of the model (a 500-service review's model falls from 87,000 variables to 44,000)."""

    def __init__(self, m: cp_model.CpModel, options: Sequence[Choosable], index: int, required: int | None = None,
                 optional: bool = False):
        self.options = list(options)
        self.x = [m.new_bool_var(f"x{index}_{i}") for i in range(len(self.options))]
        self.r = [o.rmin * xi for o, xi in zip(self.options, self.x, strict=True)]
        if optional:
            m.add(sum(self.x) <= 1)
        else:
            m.add_exactly_one(self.x)
        if required is not None:
            m.add(sum(o.row.concurrency * ri for o, ri in self._pairs()) >= required)

    def _pairs(self):
        return zip(self.options, self.r, strict=True)

    def gpus_on(self, chip: str) -> list:
        return [o.row.gpus_on(chip) * ri for o, ri in self._pairs() if chip in o.row.chips]

    def uses(self, chip: str) -> list:
        return [xi for o, xi in zip(self.options, self.x, strict=True) if chip in o.row.chips]

    def instances(self, chip: str) -> Iterable[tuple[int, int, cp_model.LinearExpr]]:
        """(GPUs per instance, instances per replica, replicas) of every option on `chip`."""
        for o, ri in self._pairs():
            for gpus, count in o.row.instances(chip):
                yield gpus, count, ri

    @property
    def cost(self):
        return sum(o.cost_units * ri for o, ri in self._pairs())

    @property
    def gpus(self):
        return sum(o.row.gpus * ri for o, ri in self._pairs())

    @property
    def held(self):
        return sum(o.row.concurrency * ri for o, ri in self._pairs())

    @property
    def rank(self):
        return sum(o.rank * xi for o, xi in zip(self.options, self.x, strict=True))

    @property
    def served(self):
        return sum(self.x)

    def picked(self, solved) -> tuple[int, Choosable, int] | None:
        """The chosen option's index, the option and its replicas in a solution (None: unserved)."""
        i = next((i for i, xi in enumerate(self.x) if solved.boolean_value(xi)), None)
        return None if i is None else (i, self.options[i], solved.value(self.r[i]))


class PairChoice:
    """One disaggregated service: exactly one prefill × decode pair y[k], with its prefill count
    p[k] and decode count d[k] matched to the rate (in planner/search/disagg.py RATE_UNITS): at
    least the instances the TTFT target needs, and prefill links, decode capacity and decode links
    that carry the rate. `price_units[chip]` prices a GPU-hour; `ceiling[k]` bounds (p, d)."""

    def __init__(self, m: cp_model.CpModel, pairs: Sequence, units: int, price_units: dict[str, int],
                 ceiling: Sequence[tuple[int, int]]):
        self.pairs = list(pairs)
        self.y, self.p, self.d = [], [], []
        self.price_units = price_units
        for k, (pair, (p_hi, d_hi)) in enumerate(zip(self.pairs, ceiling, strict=True)):
            y = m.new_bool_var(f"y{k}")
            p = m.new_int_var(0, p_hi, f"p{k}")
            d = m.new_int_var(0, d_hi, f"d{k}")
            m.add(p >= pair.prefill_min * y)
            m.add(pair.prefill_link * p >= units * y)
            m.add(pair.decode_serve * d >= units * y)
            m.add(pair.decode_link * d >= units * y)
            m.add(p <= p_hi * y)
            m.add(d <= d_hi * y)
            self.y.append(y)
            self.p.append(p)
            self.d.append(d)
        m.add_exactly_one(self.y)

    def _pools(self):
        """(pair, its prefill count, its decode count) per pair."""
        return zip(self.pairs, self.p, self.d, strict=True)

    def gpus_on(self, chip: str) -> list:
        use = [pair.prefill.row.gpus * p for pair, p, _ in self._pools() if pair.prefill_chip.id == chip]
        return use + [pair.decode.row.gpus * d for pair, _, d in self._pools() if pair.decode_chip.id == chip]

    def uses(self, chip: str) -> list:
        return [y for pair, y in zip(self.pairs, self.y, strict=True)
                if chip in (pair.prefill_chip.id, pair.decode_chip.id)]

    def top(self, ceiling: Sequence[tuple[int, int]]) -> int:
        """The largest cost any one pair can reach, in price units (for the objective's fold)."""
        return max((self._unit(pair.prefill_chip) * pair.prefill.row.gpus * p_hi
                    + self._unit(pair.decode_chip) * pair.decode.row.gpus * d_hi
                    for pair, (p_hi, d_hi) in zip(self.pairs, ceiling, strict=True)), default=0)

    def _unit(self, chip) -> int:
        return self.price_units[chip.id]

    @property
    def cost(self):
        return sum(self._unit(pair.prefill_chip) * pair.prefill.row.gpus * p
                   + self._unit(pair.decode_chip) * pair.decode.row.gpus * d for pair, p, d in self._pools())

    @property
    def gpus(self):
        return sum(pair.prefill.row.gpus * p + pair.decode.row.gpus * d for pair, p, d in self._pools())

    @property
    def rank(self):
        return sum(pair.rank * y for pair, y in zip(self.pairs, self.y, strict=True))

    def picked(self, solved) -> tuple:
        """The chosen pair and its two counts in a solution."""
        k = next(k for k, y in enumerate(self.y) if solved.boolean_value(y))
        return self.pairs[k], solved.value(self.p[k]), solved.value(self.d[k])


class ChipInUse:
    """u[c]: 1 when a chosen option takes GPUs on `chip` (x ⇒ u), so what is kept for the chip's
    spare nodes counts only where the chip is used (the solver sets it 0 otherwise: it only tightens)."""

    def __init__(self, m: cp_model.CpModel, parts: Sequence[Part], chip: str):
        self.u = m.new_bool_var(f"used_{chip}")
        for part in parts:
            for x in part.uses(chip):
                m.add_implication(x, self.u)


class Inventory:
    """Shared GPUs: on each chip with a count, the chosen pools' GPUs, and the GPUs of the chip's
    spare whole nodes (`spare[c]`) when the chip is in use, within the count. `used` holds u[c]
    where spares are kept (for NodePacking)."""

    def __init__(self, m: cp_model.CpModel, parts: Sequence[Part], inventory: dict[str, int] | None,
                 spare: dict[str, int] | None = None):
        self.used: dict[str, cp_model.IntVar] = {}
        for chip, limit in sorted((inventory or {}).items()):
            use = [term for part in parts for term in part.gpus_on(chip)]
            if not use:
                continue
            kept = (spare or {}).get(chip, 0)
            if kept:
                self.used[chip] = ChipInUse(m, parts, chip).u
                m.add(sum(use) + kept * self.used[chip] <= limit)
            else:
                m.add(sum(use) <= limit)


class NodePacking:
    """A scenario's nodes: instances larger than a node take whole nodes; the rest share nodes
    (power-of-two sizes pack a node exactly), so whole nodes of large instances plus the GPUs of
    small ones fit, beside the `spare` whole nodes of a chip in use (`used`: Inventory's u[c])."""

    def __init__(self, m: cp_model.CpModel, pools: Sequence[PoolChoice], stock: dict[str, tuple[int, int]],
                 spare: int, used: dict[str, cp_model.IntVar]):
        for chip, (gpus, node) in stock.items():
            big, small = [], []
            for pool in pools:
                for per_instance, count, ri in pool.instances(chip):
                    if per_instance > node:
                        big.append(cdiv(per_instance, node) * count * ri)
                    else:
                        small.append(per_instance * count * ri)
            u = used.get(chip)
            kept = spare * u if u is not None else 0
            if big:
                m.add(sum(big) + kept <= gpus // node)
                m.add(node * sum(big) + sum(small) + node * kept <= gpus)
