"""A record predicted by the kernel, component by component, under its release's accounting.

    available KV = ceil(total × utilization) − weights − activation peak − non-torch growth
                   − CUDA-graph estimate (releases that subtract it, §1.4 of vllm-0.33-memory.md)

Each component is the kernel's (the laws of the registry given, else the shipped one); the weights
may be taken as logged instead (`weights="logged"`), which isolates the fixed-memory laws from the
weights (quantized checkpoints are another module's concern).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from pydantic import ValidationError

from pricing import yaml_fast
from pricing.calibration.eras import Era, era_of, has_sampler_law
from pricing.calibration.records import StartupRecord
from pricing.chips import Chip, get_chip
from pricing.errors import InputError
from pricing.kernel.deployment import Deployment
from pricing.kernel.kernel import Kernel
from pricing.registry import Registry, shipped
from pricing.rules import Release
from pricing.rules import get as get_release
from pricing.units import GiB

HERE = Path(__file__).parent
SHARED_MODELS = Path(__file__).resolve().parents[3] / "shared" / "models"
CHECKPOINTS = HERE / "checkpoints"


def record_models() -> dict[str, dict]:
    """The records' models (record_models.yaml), by Hugging Face id in lower case (read once, kept
    by the shipped registry: Registry.derived)."""
    return shipped().derived(("calibration.record_models",), lambda: {
        k.lower(): v for k, v in yaml_fast.load((HERE / "record_models.yaml").read_text()).items()})


def record_logs() -> dict[str, dict]:
    """What the records' own logs state beyond their fields (record_logs.yaml), by record id."""
    return shipped().derived(("calibration.record_logs",),
                             lambda: yaml_fast.load((HERE / "record_logs.yaml").read_text()))


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
    weights_logged_only: bool = False  # its weights are known only where a record logs them


def checkpoint_for(hf_id: str) -> Checkpoint | None:
    """The checkpoint's entry in record_models.yaml, by Hugging Face id (`shared:<file>` is
    ../shared/models/<file>, `checkpoint:<file>` pricing/calibration/checkpoints/<file>); None if it
    is not listed."""
    entry = record_models().get(hf_id.strip().lower())
    if entry is None or "model" not in entry:
        return None
    name = entry["model"]
    if name.startswith("shared:"):
        name = str(SHARED_MODELS / name.removeprefix("shared:"))
    elif name.startswith("checkpoint:"):
        name = str(CHECKPOINTS / name.removeprefix("checkpoint:"))
    return Checkpoint(name, entry.get("quantization"), entry.get("weights") == "logged")


def chip_for(gpu: str | None, registry: Registry | None = None) -> Chip | None:
    """The chip a record's GPU text names ("H100-80GB", "H200 (141GB)", "A100-SXM4-80GB (…)", "RTX PRO 6000
    Blackwell (96 GB, SM120)"): its first word, else its first two or three joined by '-'."""
    if not gpu:
        return None
    words = re.split(r"[(,;]", gpu.strip(), maxsplit=1)[0].split()  # the name before any remark
    for n in range(1, min(len(words), 3) + 1):  # "H100-80GB", "RTX 5090 (32GB)", "RTX PRO 6000 Blackwell"
        try:
            return get_chip("-".join(words[:n]), registry)
        except InputError:
            continue
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
    pack_note: str = ""  # how the rules pack was chosen, when no pack serves the record's release
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


def _spec_method(spec) -> str:
    return str(spec.get("method", "")).lower() if isinstance(spec, dict) else str(spec)


def _drafter(spec) -> tuple[str, int] | None:
    """The record's drafter as the kernel takes it (--speculative-method, --num-speculative-tokens):
    the checkpoint's own MTP or DSpark head; None for another drafter (a separate draft model)."""
    method = _spec_method(spec) if spec else ""
    tokens = spec.get("num_speculative_tokens") if isinstance(spec, dict) else None
    if method in ("mtp", "dspark") and isinstance(tokens, int) and tokens > 0:
        return method, tokens
    return None


def _deployment(r: StartupRecord, default_utilization: float | None) -> Deployment:
    kv = (r.kv_cache_dtype or "auto").lower().split(" (", 1)[0]  # "fp8 (-> fp8_ds_mla)": the flag as given
    if kv in ("bfloat16",):
        kv = "bf16"
    return Deployment(
        tensor_parallel_size=r.tp, data_parallel_size=r.dp, pipeline_parallel_size=r.pp,
        enable_expert_parallel=bool(r.ep) and not str(r.ep).lower().startswith(("false", "disabled", "off")),
        gpu_memory_utilization=r.gpu_memory_utilization or default_utilization,
        max_model_len=r.max_model_len, max_num_seqs=r.max_num_seqs, max_num_batched_tokens=r.max_num_batched_tokens,
        kv_cache_dtype=kv, block_size=r.block_size, enforce_eager=bool(r.enforce_eager),
        enable_prefix_caching=r.prefix_caching is not False,
        **({"speculative_method": d[0], "num_speculative_tokens": d[1]} if (d := _drafter(r.spec_decode)) else {}))


def pack_for(version: str | None) -> Release | None:
    """The rules pack serving a record's logged release, named as that release; None when no pack
    serves it (v0, 0.9, a release not stated)."""
    from pricing.rules import get
    from pricing.rules.release import release_tuple

    text = (version or "").strip()
    if not text or text.lower().startswith(("v0", "not stated")):
        return None
    release = release_tuple(text)  # "0.19.0", "0.11.0+582e4e37.nv25.11", "V1 nightly ~0.11.1 (Nov 2025; ...)"
    try:
        return get(".".join(map(str, release))) if len(release) >= 2 else None
    except InputError:
        return None


def predict(r: StartupRecord, registry: Registry | None = None, weights: str = "auto",
            checkpoint: Checkpoint | None = None, chip: Chip | None = None) -> Prediction:
    """Predict one record with its own release's rules pack (the pack's defaults, start-up check,
    CUDA-graph accounting and fitted era laws). `weights`: "kernel", "logged", or "auto" (logged
    where logged); `checkpoint`: the model it is sized with, else the record's own (checkpoint_for),
    which a record_models.yaml entry may hold back with the reason (`held_back`)."""
    from pricing.graph import load_model

    reg = registry or shipped()
    era = era_of(r.vllm_version, reg)
    path, known_from = sampler_path(r, reg)
    if path != "native" and not has_sampler_law(reg, era, path):
        known_from += f"; vLLM {era.label} has no {path} law in the registry: the native path's applies"
    p = Prediction(r, era, path, known_from)
    o = r.observed
    p.observed = {"weights": _bytes(o.weights_gib), "activation": _bytes(o.activation_peak_gib),
                  "non_torch": _bytes(o.non_torch_gib),
                  "cuda_graph": _bytes(o.extra_gib("cuda_graph_estimated_gib")),
                  "available_kv": _bytes(o.available_kv_gib)}
    given_checkpoint = checkpoint
    checkpoint = checkpoint or checkpoint_for(r.model)
    if checkpoint is None:
        why = record_models().get(r.model.strip().lower(), {}).get("why")
        p.skipped = "no model description for this checkpoint" + (
            f": {why}" if why else " (no card, no record_models.yaml entry, no config.json in shared/models)")
        return p
    held = record_models().get(r.model.strip().lower(), {}).get("held_back") if given_checkpoint is None else None
    if held:
        p.skipped = held
        return p
    if checkpoint.weights_logged_only and (weights == "kernel" or o.weights_gib is None):
        p.skipped = ("no model description for this checkpoint's weights: "
                     + record_models()[r.model.strip().lower()]["how"]
                     + ("; this record logs none" if o.weights_gib is None
                        else "; the kernel's own weights were asked for"))
        return p
    chip = chip or chip_for(r.gpu, reg)
    if chip is None:
        p.skipped = f"chip {r.gpu!r} is not in the registry"
        return p
    if o.total_gpu_memory_gib is not None:
        chip = chip.with_overrides(memory_bytes=int(round(o.total_gpu_memory_gib * GiB)))
    drafter = _drafter(r.spec_decode)
    if r.spec_decode and drafter is None:
        p.skipped = (f"speculative decoding by {_spec_method(r.spec_decode)!r}: "
                     "not a drafter the kernel models (the checkpoint's own mtp or dspark head)")
        return p
    if not era.known:
        p.skipped = "release unknown"
        return p
    release = pack_for(r.vllm_version)
    borrowed = release is None  # a v0 or 0.9 start-up: no pack serves it
    if borrowed:
        release = get_release()
        p.pack_note = (f"no rules pack serves vLLM {r.vllm_version}: its KV cache rules are taken as "
                       f"{release.name}'s, its memory accounting as era {era.label}'s (registry vllm_eras)")
    try:
        model = load_model(checkpoint.name, checkpoint.quantization, reg)
        k = Kernel.of(model, _deployment(r, era.default_utilization if borrowed else None), chip, reg,
                      release=release, sampler=path)
        f = k.fixed_bytes()
        pool = k.kv_pool()
    except InputError as err:
        p.skipped = f"deployment not modelled ({err})"
        return p
    except ValidationError as err:  # a setting no deployment takes (a log's tp 0): named, one line
        first = err.errors()[0]
        p.skipped = (f"deployment not modelled ({'.'.join(map(str, first['loc']))} {first['input']!r}: "
                     f"{first['msg'][:1].lower() + first['msg'][1:]})")
        return p
    p.kernel = k
    in_budget = bool(release.fact(k.reg, "graph_estimate_in_budget"))
    if borrowed and in_budget and not era.graph_estimate_in_budget:
        pool += f.cuda_graph
        in_budget = False
    p.era = replace(era, graph_estimate_in_budget=in_budget, default_utilization=k.engine.gpu_memory_utilization)
    p.family = model.activation_family
    logged_w = p.observed["weights"]
    use_logged = weights == "logged" or (weights == "auto" and logged_w is not None)
    kernel_w = f.weights + f.eplb_redundant
    w = logged_w if use_logged and logged_w is not None else kernel_w
    p.weights_source = "logged" if use_logged and logged_w is not None else "kernel"
    p.predicted = {"weights": w, "activation": f.activation_peak, "non_torch": f.non_torch,
                   "cuda_graph": f.cuda_graph, "available_kv": pool + kernel_w - w}
    pool = p.predicted["available_kv"]
    if pool <= 0:
        p.starts, p.refusal = False, "No available memory for the cache blocks"
    else:
        p.starts = k.rules.fits_one_request(pool, k.layout(), k.blocks_per_request(), k._request_layer_bytes()) \
            if k.layout().groups else True
        if not p.starts:
            need = k.request_bytes()
            p.refusal = (f"To serve at least one request with the models's max seq len ({k.engine.max_model_len}), "
                         f"({need / GiB:.2f} GiB KV cache is needed, which is larger than the available KV cache "
                         f"memory ({pool / GiB:.2f} GiB)")
    return p


def predict_all(records, registry: Registry | None = None, weights: str = "auto") -> list[Prediction]:
    return [predict(r, registry, weights) for r in records]
