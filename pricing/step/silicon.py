"""vLLM's measured decode step and first token at a fixed concurrency (validation/vllm_silicon_points.yaml,
from NVIDIA aiconfigurator's `silicon_sample.csv`: closed-loop `max-concurrency` sweeps of vLLM releases, each
row's TPOT and TTFT) beside the step model's, at vLLM's own fitted factors.

Two thirds of the rows whose decode dominates (outputs at least as long as prompts: a closed loop's TPOT
there is the decode step, what the step model's steady state prices) train vLLM's per-step overheads, its
fused-MoE kernels and attention backends (scripts/fits/fit_step.py --engine vllm); the third held back, chosen by
a hash of the row's id, and every row of longer prompts measure them.

`SiliconPoint.predicted` is the step model's steady state (one prompt beside the decodes, no queueing); the
row's closed loop as its benchmark ran it, through the serving simulator, is pricing/serving/silicon.py's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pricing import yaml_fast
from pricing.kernel import Kernel
from pricing.registry import Registry
from pricing.step.measured import held_back, point_kernel
from pricing.step.rates import Efficiency
from pricing.step.serving import Serving, Workload, serving
from pricing.step.step import StepModel

GQA = "gqa"  # the attention backend the shared per-layer floor is fitted on
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

    def kernel(self, registry: Registry | None = None) -> Kernel:
        """The memory kernel of the row's deployment (`point_kernel`), priced with `registry` (None: the shipped
        one)."""
        return point_kernel(self.model, self.quantization, self.chip, self.tp, self.ep, self.isl + self.osl, registry)

    @property
    def decode_dominated(self) -> bool:
        """Outputs at least as long as prompts: the fit's rows (a closed loop's TPOT is then the decode
        step; with longer prompts it is what the loop's waves leave of the prefill, not the steady mix)."""
        return self.osl >= self.isl

    @property
    def held_back(self) -> bool:
        """A third of the rows, chosen by a hash of their id (as validation/measured_points.yaml's)."""
        return held_back(self.id)

    @property
    def training(self) -> bool:
        return self.decode_dominated and not self.held_back

    def moe_kernel_key(self) -> tuple[str, str] | None:
        """(chip generation, routed experts' served format) of the row's deployment, or None when the
        model routes none: the fused-MoE kernel its experts run (StepModel.expert_kernel)."""
        kernel = StepModel(self.kernel()).expert_kernel()
        return None if kernel is None else kernel.key

    def attention_kernel_key(self) -> tuple[str, str] | None:
        """(chip generation, attention backend) of the row's deployment, or None for GQA (whose layers
        pay the shared per-layer floor alone): the backend whose own floor the row measures."""
        kernel = self.kernel()
        backend = kernel.graph.attention_backend
        return None if backend == GQA else (kernel.chip.generation, backend)

    def predicted(self, efficiency: Efficiency | None = None, registry: Registry | None = None) -> Serving:
        """The step model's steady state at the row's concurrency (the middle of the outputs' context)
        and its TTFT for the row's prompt beside those decodes, at vLLM's factors (or `efficiency`)."""
        return serving(StepModel(self.kernel(registry), efficiency=efficiency), self.concurrency,
                       self.isl + self.osl // 2, Workload(self.isl, self.osl))

    def errors(self, efficiency: Efficiency | None = None, registry: Registry | None = None) -> tuple[float, float]:
        """(predicted / measured − 1) of TPOT and of TTFT."""
        s = self.predicted(efficiency, registry)
        return s.tpot_seconds * 1e3 / self.tpot_ms - 1, s.ttft_seconds * 1e3 / self.ttft_ms - 1


def load_silicon(path: Path = SILICON) -> tuple[list[SiliconPoint], dict]:
    """The rows, and the file's description of where they come from."""
    doc = yaml_fast.load(path.read_text())
    rows = [SiliconPoint(r["id"], r["model"], r.get("quantization"), r["chip"], r.get("release"),
                         int(r["tensor_parallel_size"]), bool(r.get("enable_expert_parallel")), int(r["concurrency"]),
                         int(r["isl"]), int(r["osl"]), float(r["ttft_ms"]), float(r["tpot_ms"]), r.get("measured_on"))
            for r in doc["points"]]
    return rows, {k: v for k, v in doc.items() if k != "points"}
