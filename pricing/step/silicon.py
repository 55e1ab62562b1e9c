"""vLLM's measured decode step and first token at a fixed concurrency (validation/vllm_silicon_points.yaml,
from NVIDIA aiconfigurator's `silicon_sample.csv`: closed-loop `max-concurrency` sweeps of vLLM releases, each
row's TPOT and TTFT) beside the step model's, at vLLM's own fitted factors. None of these rows is in the
step model's fit (validation/measured_points.yaml): they measure it, they do not tune it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pricing import yaml_fast
from pricing.kernel import Kernel
from pricing.step.measured import point_kernel
from pricing.step.serving import Serving, Workload, serving
from pricing.step.step import StepModel

SILICON = Path(__file__).resolve().parents[2] / "validation" / "vllm_silicon_points.yaml"


@dataclass(frozen=True)
class SiliconPoint:
    """One measured row: a deployment of one model on one chip at `concurrency` requests of
    `isl`/`osl` tokens, and the TTFT and TPOT vLLM `release` gave it."""

    id: str
    model: str
    quantization: str | None
    chip: str
    release: str | None  # None: the row does not say
    tp: int
    ep: bool
    concurrency: int
    isl: int
    osl: int
    ttft_ms: float
    tpot_ms: float
    measured_on: str | None  # None: the row does not say

    def kernel(self) -> Kernel:
        """The memory kernel of the row's deployment (`point_kernel`)."""
        return point_kernel(self.model, self.quantization, self.chip, self.tp, self.ep, self.isl + self.osl)

    def predicted(self) -> Serving:
        """The step model's steady state at the row's concurrency (the middle of the outputs' context)
        and its TTFT for the row's prompt beside those decodes, at vLLM's factors."""
        return serving(StepModel(self.kernel()), self.concurrency, self.isl + self.osl // 2,
                       Workload(self.isl, self.osl))

    def errors(self) -> tuple[float, float]:
        """(predicted / measured − 1) of TPOT and of TTFT."""
        s = self.predicted()
        return s.tpot_seconds * 1e3 / self.tpot_ms - 1, s.ttft_seconds * 1e3 / self.ttft_ms - 1


def load_silicon(path: Path = SILICON) -> tuple[list[SiliconPoint], dict]:
    """The rows, and the file's description of where they come from."""
    doc = yaml_fast.load(path.read_text())
    rows = [SiliconPoint(r["id"], r["model"], r.get("quantization"), r["chip"], r.get("release"),
                         int(r["tensor_parallel_size"]), bool(r.get("enable_expert_parallel")), int(r["concurrency"]),
                         int(r["isl"]), int(r["osl"]), float(r["ttft_ms"]), float(r["tpot_ms"]), r.get("measured_on"))
            for r in doc["points"]]
    return rows, {k: v for k, v in doc.items() if k != "points"}
