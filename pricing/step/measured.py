"""Measured serving points (validation/measured_points.yaml) priced by the step model: the
prediction of each point's output tokens per second per GPU, the train / held-back split and
the error, for scripts/fits/fit_step.py, the README table and tests/test_step_validation.py."""

from __future__ import annotations

import hashlib
import statistics
from dataclasses import dataclass
from pathlib import Path

from pricing import yaml_fast
from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel
from pricing.registry import Registry, shipped
from pricing.step.rates import Efficiency
from pricing.step.serving import Workload, serving
from pricing.step.step import StepModel, factor_set

POINTS = Path(__file__).resolve().parents[2] / "validation" / "measured_points.yaml"
HOLD_BACK_EVERY = 3  # a third of the points, chosen by a hash of their id, is held back


@dataclass(frozen=True)
class Point:
    id: str
    source: str
    model: str
    quantization: str | None
    chip: str
    engine: str
    tp: int
    ep: bool
    concurrency: int
    isl: int
    osl: int
    measured: float  # output tokens per second per GPU
    date: str
    held_back: bool

    def kernel(self) -> Kernel:
        """The memory kernel of the point's deployment (`point_kernel`)."""
        return point_kernel(self.model, self.quantization, self.chip, self.tp, self.ep, self.isl + self.osl)

    @property
    def sweep(self) -> tuple:
        return (self.source, self.model, self.quantization, self.chip, self.engine, self.tp, self.ep)


def held_back(point_id: str) -> bool:
    """Whether a measured point is held back from the fit: a third of them, chosen by a hash of their id
    (the same rule for the throughput points and the silicon rows)."""
    return int(hashlib.sha256(point_id.encode()).hexdigest(), 16) % HOLD_BACK_EVERY == 0


def load_points(path: Path = POINTS) -> tuple[list[Point], dict]:
    """The points, each marked training or held back, and the sources' descriptions."""
    doc = yaml_fast.load(path.read_text())
    out = []
    for raw in doc["points"]:
        out.append(Point(raw["id"], raw["source"], raw["model"], raw.get("quantization"), raw["chip"], raw["engine"],
                         int(raw["tensor_parallel_size"]), bool(raw.get("enable_expert_parallel")),
                         int(raw["concurrency"]), int(raw["isl"]), int(raw["osl"]),
                         float(raw["output_tokens_per_second_per_gpu"]), str(raw["date"]),
                         held_back(raw["id"])))
    return out, doc["sources"]


def point_kernel(model: str, quantization: str | None, chip: str, tp: int, ep: bool, context: int,
                 registry: Registry | None = None) -> Kernel:
    """The kernel of a point's deployment, by the values that name it, kept by `registry` (None: the
    shipped one; Registry.derived: a fit prices each point under many efficiencies; the kernel never
    changes, and its graph is its own)."""
    reg = registry or shipped()
    return reg.derived(("step.measured.kernel", model, quantization, chip, tp, ep, context),
                       lambda: _built(model, quantization, chip, tp, ep, context, reg))


def _built(model: str, quantization: str | None, chip: str, tp: int, ep: bool, context: int,
           reg: Registry) -> Kernel:
    graph = load_model(model, quantization, reg)
    d = Deployment(tensor_parallel_size=tp, enable_expert_parallel=ep, max_model_len=min(context, graph.max_position))
    return Kernel.of(graph, d, get_chip(chip, reg), registry=reg)


def predict(p: Point, efficiency: Efficiency | None = None) -> float:
    """The step model's output tokens per second per GPU at the point's concurrency and workload."""
    kernel = p.kernel()
    own = factor_set(kernel, p.engine.split()[0])
    sm = StepModel(kernel, efficiency=efficiency or Efficiency.from_registry(kernel.reg, own))
    return serving(sm, p.concurrency, p.isl + p.osl // 2, Workload(p.isl, p.osl)).output_tokens_per_second_per_gpu


def relative_error(p: Point, efficiency: Efficiency | None = None) -> float:
    """(predicted − measured) / measured."""
    return predict(p, efficiency) / p.measured - 1.0


def median_abs_error(points: list[Point], efficiency: Efficiency | None = None) -> float:
    """median |relative_error| over `points`."""
    return statistics.median(abs(relative_error(p, efficiency)) for p in points)


AICONFIGURATOR = POINTS.parent / "aiconfigurator_points.yaml"


@dataclass(frozen=True)
class AiconfiguratorRun:
    """validation/aiconfigurator_points.yaml (written by scripts/collectors/aiconfigurator_points.py): NVIDIA
    aiconfigurator's output tokens/s per GPU for the measured points it prices, and why it prices
    no others. Read only; aiconfigurator itself is never imported by the project."""

    version: str
    predicted: dict[str, float]  # point id -> tokens/s per GPU
    unsupported: dict[str, str]  # point id -> reason
    database_versions: tuple[str, ...]  # "backend version" pairs used
    stand_ins: tuple[str, ...]  # models priced through another checkpoint of the same architecture
    older_engines: tuple[str, ...]  # measured engines older than every database aiconfigurator has for them

    def error(self, p: Point) -> float:
        """(aiconfigurator − measured) / measured."""
        return self.predicted[p.id] / p.measured - 1.0

    def median_abs_error(self, points: list[Point]) -> float:
        """median |error| over `points` (each one it prices)."""
        return statistics.median(abs(self.error(p)) for p in points)


def load_aiconfigurator(path: Path = AICONFIGURATOR) -> AiconfiguratorRun:
    doc = yaml_fast.load(path.read_text())
    rows = doc["points"]
    return AiconfiguratorRun(
        doc["aiconfigurator"],
        {r["id"]: float(r["output_tokens_per_second_per_gpu"]) for r in rows if r["supported"]},
        {r["id"]: r["reason"] for r in rows if not r["supported"]},
        tuple(sorted({f"{r['backend']} {r['database_version']}" for r in rows if r["supported"]})),
        tuple(sorted({r["model"] for r in rows if r.get("model_note")})),
        tuple(sorted({r["measured_engine"] for r in rows if "predates" in r.get("version_rule", "")})))
