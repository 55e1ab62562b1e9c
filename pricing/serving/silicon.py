"""The silicon rows' closed loops (validation/vllm_silicon_points.yaml, pricing/step/silicon.py) through the serving
simulator: vLLM's scheduler step by step, chunked prefill under max_num_batched_tokens, each row's benchmark as the
file's `benchmark` block describes it (`Harness`): C clients sending at once, lengths drawn below the nominal ones,
a new prompt's prefill waiting behind the others' chunks and sharing mixed steps with their decodes. Both steps'
first-token constants and the operator step's CPU constants are fitted on it (scripts/fits/fit_step.py, training
rows), and both steps judged on it (scripts/operators/validate.py, held-back rows)."""

from __future__ import annotations

from dataclasses import dataclass

from pricing.registry import Registry
from pricing.serving.cost import StepCost
from pricing.serving.simulate import Instance, Served, simulate
from pricing.serving.traffic import ClosedLoop, Traffic, Uniform
from pricing.step.rates import Efficiency
from pricing.step.silicon import SiliconPoint
from pricing.step.step import StepModel


@dataclass(frozen=True)
class Harness:
    """The benchmark a row's closed loop is simulated as (the file's `benchmark` block: the source states none
    of it, so each value is an assumption with its reason there): `prompts_per_client` × C requests at most C in
    flight, all ready at once (`--request-rate inf --max-concurrency C`), each prompt and output length uniform
    in [`length_floor` · n, n] for the nominal n (`--random-range-ratio` in the older convention), TTFT and
    TPOT read as the `statistic` (mean or median) over the requests."""

    prompts_per_client: int
    length_floor: float
    statistic: str
    source: str

    STATISTICS = ("mean", "median")

    def __post_init__(self):
        if self.prompts_per_client < 1 or not 0.0 < self.length_floor <= 1.0 or self.statistic not in self.STATISTICS:
            raise ValueError(f"benchmark: {self}")

    @classmethod
    def of(cls, about: dict) -> Harness:
        """The harness the file's `benchmark` block (load_silicon's second answer) states."""
        b = about["benchmark"]
        return cls(int(b["prompts_per_client"]), float(b["length_floor"]), str(b["statistic"]), str(b["how"]))

    def lengths(self, nominal: int) -> Uniform:
        return Uniform(max(1, int(nominal * self.length_floor)), nominal)

    def read(self, values) -> float:
        """`values` (a simulated Distribution) read as the harness's statistic."""
        return values.mean if self.statistic == "mean" else values.percentile(50)


def traffic(row: SiliconPoint, harness: Harness) -> Traffic:
    """The row's benchmark as `harness` sends it: C clients, all ready at once."""
    return Traffic(ClosedLoop(row.concurrency), harness.lengths(row.isl), harness.lengths(row.osl),
                   count=harness.prompts_per_client * row.concurrency)


def simulated(row: SiliconPoint, harness: Harness, efficiency: Efficiency | None = None,
              registry: Registry | None = None) -> Served:
    """The row's closed loop through the serving simulator, each step priced at vLLM's factors (or
    `efficiency`) with `registry` (None: the shipped one)."""
    kernel = row.kernel(registry)
    inst = Instance.of(kernel)
    return simulate(inst, StepCost.of(StepModel(kernel, efficiency=efficiency), inst), traffic(row, harness))


def closed_loop(row: SiliconPoint, harness: Harness, efficiency: Efficiency | None = None,
                registry: Registry | None = None) -> tuple[float, float]:
    """(TPOT, TTFT) in seconds of the simulated closed loop, read as the harness reads them."""
    served = simulated(row, harness, efficiency, registry)
    return harness.read(served.tpot), harness.read(served.ttft)


def closed_loop_errors(row: SiliconPoint, harness: Harness, efficiency: Efficiency | None = None,
                       registry: Registry | None = None) -> tuple[float, float]:
    """(simulated / measured − 1) of TPOT and of TTFT (`closed_loop`)."""
    tpot, ttft = closed_loop(row, harness, efficiency, registry)
    return tpot * 1e3 / row.tpot_ms - 1, ttft * 1e3 / row.ttft_ms - 1
