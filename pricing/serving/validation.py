"""The serving simulator against public `vllm bench serve` runs (validation/vllm_serving_runs.yaml):
each run's deployment through the kernel, its benchmark through the simulator, the p50 and p99
TTFT and TPOT side by side. The runs were made with earlier vLLM releases (their file says which);
the instance is vLLM 0.33's with the run's flags and 0.33's defaults for the rest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel
from pricing.serving.cost import StepCost
from pricing.serving.simulate import Instance, Served, simulate
from pricing.serving.traffic import ClosedLoop, Fixed, Traffic
from pricing.step import StepModel
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

    def simulate(self) -> Served:
        model = load_model(self.model)
        flags = {k: v for k, v in self.deployment.items() if k in DEPLOYMENT_FLAGS}
        kernel = Kernel.of(model, Deployment(**flags), get_chip(self.chip))
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
