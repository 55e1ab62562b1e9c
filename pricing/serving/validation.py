"""The serving simulator against public `vllm bench serve` runs (validation/vllm_serving_runs.yaml):
each run's deployment through the kernel, its benchmark through the simulator, the p50 and p99
TTFT and TPOT side by side. The runs were made with earlier vLLM releases (their file says which);
the instance is vLLM 0.33's with the run's flags and 0.33's defaults for the rest. A run whose
deployment 0.33 would refuse (`refusal`) is still simulated, on the KV pool 0.33 computes, and says
so where it is shown."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel, Startup
from pricing.kernel.startup import Refusal
from pricing.serving.cost import StepCost
from pricing.serving.simulate import Instance, Served, simulate
from pricing.serving.traffic import ClosedLoop, Fixed, Traffic
from pricing.step import StepModel
from pricing.step.step import Step
from pricing.yaml_fast import load as load_yaml

RUNS = Path(__file__).resolve().parents[2] / "validation" / "vllm_serving_runs.yaml"
FIGURES = ("p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms")
DEPLOYMENT_FLAGS = ("tensor_parallel_size", "data_parallel_size", "pipeline_parallel_size", "enable_expert_parallel",
                    "max_model_len", "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization",
                    "async_scheduling")


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

    def traffic(self) -> Traffic:
        b = self.benchmark
        n = b["num_prompts"]
        arrivals = ClosedLoop(b["max_concurrency"] or n)  # request rate inf: every request sent at once
        return Traffic(arrivals, Fixed(b["input_len"]), Fixed(b["output_len"]), count=n, seed=b.get("seed", 0))

    def kernel(self) -> Kernel:
        """The run's deployment on its chip, vLLM 0.33's defaults for the flags it leaves out."""
        flags = {k: v for k, v in self.deployment.items() if k in DEPLOYMENT_FLAGS}
        return Kernel.of(load_model(self.model), Deployment(**flags), get_chip(self.chip))

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

    def simulate(self) -> Served:
        kernel = self.kernel()
        inst = Instance.of(kernel)
        cost = StepCost(StepModel(kernel), inst.max_num_seqs, inst.max_num_batched_tokens + inst.max_num_seqs,
                        inst.max_model_len)
        return simulate(inst, cost, self.traffic())


def runs(path: Path = RUNS) -> list[Run]:
    data = load_yaml(path.read_text())
    return [Run(**r) for r in data["runs"]]


def simulated_figures(served: Served) -> dict[str, float]:
    return {"p50_ttft_ms": served.ttft.percentile(50) * 1000, "p99_ttft_ms": served.ttft.percentile(99) * 1000,
            "p50_tpot_ms": served.tpot.percentile(50) * 1000, "p99_tpot_ms": served.tpot.percentile(99) * 1000}
