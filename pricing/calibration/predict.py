"""A record predicted by the kernel, component by component, under its release's accounting.

    available KV = ceil(total × utilization) − weights − activation peak − non-torch growth
                   − CUDA-graph estimate (releases that subtract it, §1.4 of vllm-0.33-memory.md)

Each component is the kernel's (the laws of the registry in use); the weights may be taken as
logged instead (`weights="logged"`), which isolates the fixed-memory laws from the weights
(quantized checkpoints are another module's concern).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import NamedTuple

from pricing import yaml_fast
from pricing.calibration.eras import Era, era_of, era_registry, has_sampler_law
from pricing.calibration.records import StartupRecord
from pricing.chips import Chip, get_chip
from pricing.errors import InputError
from pricing.kernel.deployment import Deployment
from pricing.kernel.kernel import Kernel
from pricing.registry import Registry, load
from pricing.units import GiB

HERE = Path(__file__).parent
SHARED_MODELS = Path(__file__).resolve().parents[3] / "shared" / "models"


@cache
def record_models() -> dict[str, dict]:
    return {k.lower(): v for k, v in yaml_fast.load((HERE / "record_models.yaml").read_text()).items()}


@cache
def record_logs() -> dict[str, dict]:
    """What the records' own logs state beyond their fields (record_logs.yaml), by record id."""
    return yaml_fast.load((HERE / "record_logs.yaml").read_text())


def sampler_path(r: StartupRecord, reg: Registry) -> tuple[str, str]:
    """The top-k/top-p path of the record's sampler warm-up, and where that is known from: the
    record's own field (a log read by `plan check-log`), its published log (record_logs.yaml), or
    the registry's vllm_eras.sampler_path_unstated."""
    if r.sampler:
        return r.sampler, "the log's sampler line"
    stated = record_logs().get(r.id, {}).get("sampler")
    if stated:
        return stated, "the record's published log (pricing/calibration/record_logs.yaml)"
    return str(reg.value("vllm_eras.sampler_path_unstated")), "not stated: vllm_eras.sampler_path_unstated"


class Checkpoint(NamedTuple):
    """The model description a checkpoint is sized with (record_models.yaml): a card name or the
    path of a published config, and the `--quantization` it is loaded with, if any."""

    name: str
    quantization: str | None = None


def checkpoint_for(hf_id: str) -> Checkpoint | None:
    """The checkpoint's entry in record_models.yaml, by Hugging Face id (`shared:<file>` is
    ../shared/models/<file>); None if it is not listed."""
    entry = record_models().get(hf_id.strip().lower())
    if entry is None:
        return None
    name = entry["model"]
    path = str(SHARED_MODELS / name.removeprefix("shared:")) if name.startswith("shared:") else name
    return Checkpoint(path, entry.get("quantization"))


def chip_for(gpu: str | None) -> Chip | None:
    """The chip a record's GPU text names ("H100-80GB", "H200 (141GB)", "A100-SXM4-80GB (…)")."""
    if not gpu:
        return None
    head = re.split(r"[ (,;]", gpu.strip(), maxsplit=1)[0]
    try:
        return get_chip(head)
    except InputError:
        return None


@dataclass
class Prediction:
    """One record, predicted and observed, in bytes per GPU (observed from the logged GiB)."""

    record: StartupRecord
    era: Era
    sampler: str = "native"  # the top-k/top-p path of the sampler warm-up (sampler_path)
    sampler_known_from: str = ""
    family: str = ""
    predicted: dict[str, int] = field(default_factory=dict)
    observed: dict[str, int | None] = field(default_factory=dict)
    weights_source: str = "kernel"
    starts: bool | None = None
    refusal: str | None = None
    skipped: str | None = None  # why the record could not be predicted
    kernel: Kernel | None = None

    @property
    def usable(self) -> bool:
        return self.skipped is None

    def error(self, component: str = "available_kv") -> float | None:
        """(predicted − observed) / observed; positive = the plan promises more than the engine had."""
        obs = self.observed.get(component)
        if obs is None or component not in self.predicted or obs == 0:
            return None
        return (self.predicted[component] - obs) / obs


def _bytes(gib: float | None) -> int | None:
    return None if gib is None else int(round(gib * GiB))


def _deployment(r: StartupRecord, era: Era) -> Deployment:
    kv = (r.kv_cache_dtype or "auto").lower()
    if kv in ("bfloat16",):
        kv = "bf16"
    return Deployment(
        tensor_parallel_size=r.tp, data_parallel_size=r.dp, pipeline_parallel_size=r.pp,
        enable_expert_parallel=bool(r.ep) and not str(r.ep).lower().startswith(("false", "disabled", "off")),
        gpu_memory_utilization=r.gpu_memory_utilization or era.default_utilization,
        max_model_len=r.max_model_len, max_num_seqs=r.max_num_seqs, max_num_batched_tokens=r.max_num_batched_tokens,
        kv_cache_dtype=kv, block_size=r.block_size, enforce_eager=bool(r.enforce_eager),
        enable_prefix_caching=r.prefix_caching is not False)


def predict(r: StartupRecord, registry: Registry | None = None, weights: str = "auto",
            checkpoint: Checkpoint | None = None, chip: Chip | None = None) -> Prediction:
    """Predict one record. `weights`: "kernel", "logged", or "auto" (logged where logged);
    `checkpoint`: the model it is sized with, else the record's own (checkpoint_for)."""
    from pricing.graph import load_model

    reg = registry or load()
    era = era_of(r.vllm_version, reg)
    path, known_from = sampler_path(r, reg)
    if path != "native" and not has_sampler_law(reg, era, path):
        known_from += f"; vLLM {era.label} has no {path} law in the registry: the native path's applies"
    reg = era_registry(reg, era, path)
    p = Prediction(r, era, path, known_from)
    o = r.observed
    p.observed = {"weights": _bytes(o.weights_gib), "activation": _bytes(o.activation_peak_gib),
                  "non_torch": _bytes(o.non_torch_gib),
                  "cuda_graph": _bytes(o.extra_gib("cuda_graph_estimated_gib")),
                  "available_kv": _bytes(o.available_kv_gib)}
    checkpoint = checkpoint or checkpoint_for(r.model)
    if checkpoint is None:
        p.skipped = "no model description for this checkpoint"
        return p
    chip = chip or chip_for(r.gpu)
    if chip is None:
        p.skipped = f"chip {r.gpu!r} is not in the registry"
        return p
    if o.total_gpu_memory_gib is not None:
        chip = chip.with_overrides(memory_bytes=int(round(o.total_gpu_memory_gib * GiB)))
    if r.spec_decode:
        p.skipped = "speculative decoding (drafter not mapped)"
        return p
    if not era.known:
        p.skipped = "release unknown"
        return p
    try:
        model = load_model(checkpoint.name, checkpoint.quantization)
        k = Kernel.of(model, _deployment(r, era), chip, reg)
        f = k.fixed_bytes()
    except InputError as err:
        p.skipped = f"deployment not modelled ({err})"
        return p
    p.kernel = k
    p.family = model.activation_family
    logged_w = p.observed["weights"]
    use_logged = weights == "logged" or (weights == "auto" and logged_w is not None)
    w = logged_w if use_logged and logged_w is not None else f.weights + f.eplb_redundant
    p.weights_source = "logged" if use_logged and logged_w is not None else "kernel"
    graph = f.cuda_graph if era.graph_estimate_in_budget else 0
    budget = math.ceil(chip.memory_bytes * k.engine.gpu_memory_utilization)
    p.predicted = {"weights": w, "activation": f.activation_peak, "non_torch": f.non_torch,
                   "cuda_graph": f.cuda_graph, "available_kv": budget - w - f.activation_peak - f.non_torch - graph}
    pool = p.predicted["available_kv"]
    if pool <= 0:
        p.starts, p.refusal = False, "No available memory for the cache blocks"
    else:
        need = k.request_bytes()
        block = k.layout().bytes_per_block
        p.starts = pool - block >= need if k.layout().grouped else pool >= need
        if not p.starts:
            p.refusal = (f"To serve at least one request with the models's max seq len ({k.engine.max_model_len}), "
                         f"({need / GiB:.2f} GiB KV cache is needed, which is larger than the available KV cache "
                         f"memory ({pool / GiB:.2f} GiB)")
    return p


def predict_all(records, registry: Registry | None = None, weights: str = "auto") -> list[Prediction]:
    return [predict(r, registry, weights) for r in records]
