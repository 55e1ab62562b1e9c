"""The serving simulator against public `vllm bench serve` runs (validation/vllm_serving_runs.yaml, GPUStack's
performance lab; validation/vllm_spot_check_runs.yaml, vLLM's own spot check with `benchmark_serving.py`;
validation/vllm_published_runs.yaml, runs published one or two at a time in posts and pull requests;
validation/vllm_fresh_runs.yaml, runs of the same kind collected later as a held-out set):
each run's deployment through the kernel, its benchmark through the simulator, the p50 and p99
TTFT and TPOT side by side. The runs were made with earlier vLLM releases (their file says which);
the instance is vLLM 0.33's with the run's flags and 0.33's defaults for the rest. A run whose
deployment 0.33 would refuse (`refusal`) is still simulated, on the KV pool 0.33 computes, and says
so where it is shown."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel, Startup
from pricing.kernel.startup import Refusal
from pricing.registry import Registry, shipped
from pricing.serving.cost import StepCost
from pricing.serving.simulate import Instance, Served, simulate
from pricing.serving.traffic import ClosedLoop, Fixed, Poisson, Traffic, Uniform
from pricing.step import StepModel
from pricing.step.rates import Efficiency
from pricing.step.step import Step, factor_set
from pricing.yaml_fast import load as load_yaml

RUNS = Path(__file__).resolve().parents[2] / "validation" / "vllm_serving_runs.yaml"
SPOT_CHECK = RUNS.with_name("vllm_spot_check_runs.yaml")  # vLLM's own performance spot check (simon-mo/vLLM-Benchmark)
PUBLISHED = RUNS.with_name("vllm_published_runs.yaml")  # posts and pull requests, each run's block quoted
FRESH = RUNS.with_name("vllm_fresh_runs.yaml")  # held out for issue 38: collected 2026-12-08, never fitted
FIGURES = ("p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms")
IMPLIED_RANGE = (0.05, 1.0)  # the fractions of peak tensor FLOP/s `Run.implied_tensor_compute` searches
DEPLOYMENT_FLAGS = ("tensor_parallel_size", "data_parallel_size", "pipeline_parallel_size", "enable_expert_parallel",
                    "max_model_len", "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization",
                    "async_scheduling", "kv_cache_dtype")


@dataclass(frozen=True)
class Run:
    """One public run: where it is, what it served, what it measured."""

    id: str
    url: str
    model: str
    chip: str
    release: str
    deployment: dict
    benchmark: dict
    measured: dict
    machine: str | None = None  # the host, where the source names it (the same command measured on two)
    measured_on: str | None = None  # the day the run was measured (ISO date), where the source says
    stated: str | None = None  # what the source says of the set-up beyond the flags, where it is not modelled
    printed: str | None = None  # the result block as the source prints it, where the run file quotes it
    quantization: str | None = None  # the checkpoint's served format where the card's is not it (a quantized copy)

    def traffic(self) -> Traffic:
        """The benchmark's requests as `vllm bench serve` sends them: at request rate inf every
        request at once (at most `max_concurrency` in flight), else Poisson arrivals at the rate
        (gamma gaps of `burstiness`); lengths fixed, or uniform in [n (1 - r), n (1 + r)] at a
        `range_ratio` r (the random dataset since vLLM 0.10)."""
        b = self.benchmark
        n, rate, cap = b["num_prompts"], b["request_rate"], b.get("max_concurrency")
        arrivals = (ClosedLoop(cap or n) if rate == "inf"
                    else Poisson(float(rate), b.get("burstiness", 1.0), cap))
        ratio = b.get("range_ratio") or 0.0

        def lengths(tokens: int) -> Fixed | Uniform:
            return Uniform.around(tokens, ratio) if ratio else Fixed(tokens)

        return Traffic(arrivals, lengths(b["input_len"]), lengths(b["output_len"]), count=n, seed=b.get("seed", 0))

    def kernel(self, registry: Registry | None = None) -> Kernel:
        """The run's deployment on its chip, vLLM 0.33's defaults for the flags it leaves out, priced with
        `registry` (None: the shipped one)."""
        reg = registry or shipped()
        flags = {k: v for k, v in self.deployment.items() if k in DEPLOYMENT_FLAGS}
        return Kernel.of(load_model(self.model, self.quantization, reg), Deployment(**flags), get_chip(self.chip, reg),
                         registry=reg)

    def refusal(self) -> Refusal | None:
        """The start-up check vLLM 0.33 would fail on this deployment (the run's own release started it)."""
        return Startup(self.kernel()).refusal()

    def prefill_flops(self) -> float:
        """FLOPs one rank runs to prefill one of the run's prompts, in the chunks of
        max_num_batched_tokens the instance schedules, by the step model's own count (linear
        layers, the LM head at each chunk's last token, attention over the causal context)."""
        kernel = self.kernel()
        model, budget = StepModel(kernel), Instance.of(kernel).max_num_batched_tokens
        prompt = self.benchmark["input_len"]
        return sum(model.time(Step(chunk=min(budget, prompt - offset), chunk_offset=offset)).flops
                   for offset in range(0, prompt, budget))

    def simulate(self, efficiency: Efficiency | None = None, registry: Registry | None = None) -> Served:
        """The run through the simulator, each step priced at vLLM's factors (or `efficiency`) with `registry`
        (None: the shipped one)."""
        kernel = self.kernel(registry)
        return self._simulated(kernel, Instance.of(kernel), efficiency)

    def _simulated(self, kernel: Kernel, inst: Instance, efficiency: Efficiency | None) -> Served:
        cost = StepCost.of(StepModel(kernel, efficiency=efficiency), inst)
        return simulate(inst, cost, self.traffic())

    def implied_tensor_compute(self, low: float = IMPLIED_RANGE[0], high: float = IMPLIED_RANGE[1],
                               halvings: int = 9) -> tuple[float | None, Served]:
        """The fraction of the chip's peak tensor FLOP/s (`tensor_compute`, for every GEMM kernel alike:
        the fitted ones set aside; every other factor vLLM's own) at which the simulated duration is the
        measured one, bisected in log space between `low` and `high` (`halvings` halvings: 9 leave it
        within 0.6 %), and the run
        simulated at it. None, and the run at the bound, when even `high` leaves the simulation
        slower than measured (the time it misses is not the prefill's matrix multiplies) or even
        `low` leaves it faster. A diagnosis, fitted to each run by itself: it is the run's own
        training point."""
        kernel = self.kernel()
        inst = Instance.of(kernel)
        base = Efficiency.from_registry(kernel.reg, factor_set(kernel))
        target = self.measured["duration_s"]

        def run(fraction: float) -> Served:
            return self._simulated(kernel, inst, base.replaced(tensor_compute=fraction).with_kernels(gemm=()))

        top = run(high)
        if top.duration > target:
            return None, top
        bottom = run(low)
        if bottom.duration < target:
            return None, bottom
        lo, hi = math.log(low), math.log(high)
        for _ in range(halvings):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if run(math.exp(mid)).duration > target else (lo, mid)
        fraction = math.exp((lo + hi) / 2)
        return fraction, run(fraction)


def runs(path: Path = RUNS) -> list[Run]:
    data = load_yaml(path.read_text())
    return [Run(**r) for r in data["runs"]]


def seen_before(path: Path = FRESH) -> dict[str, str]:
    """The runs of a held-out file whose source the project had read before they were collected (run id: what was
    read, and that none was simulated): its `seen_before`."""
    return load_yaml(path.read_text()).get("seen_before") or {}


def simulated_figures(served: Served) -> dict[str, float]:
    """A simulation's figures under the run file's names: the duration (s), p50/p99 TTFT, TPOT and ITL (ms)."""
    ms = {f"p{q}_{name}_ms": getattr(served, name).percentile(q) * 1000
          for name in ("ttft", "tpot", "itl") for q in (50, 99)}
    return {"duration_s": served.duration} | ms


def compared(run: Run, served: Served | None = None) -> tuple[dict[str, float], dict[str, float]]:
    """A run's simulated figures (`served`, else `run.simulate()`) and each one's relative error
    against the measured, simulated / measured - 1, for every figure the run measured."""
    sim = simulated_figures(served if served is not None else run.simulate())
    return sim, {k: v / run.measured[k] - 1 for k, v in sim.items() if k in run.measured}
