"""`plan check-log`: a start-up log rebuilt as a deployment, predicted part by part, and each
gap named by the registry value that explains it."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from pricing.calibration.predict import Checkpoint, Prediction, checkpoint_for, predict, record_models
from pricing.calibration.startup_log import ParsedLog
from pricing.errors import InputError, mention
from pricing.units import GiB


class ComponentOut(BaseModel):
    name: str
    predicted: int | float | None  # bytes, tokens or a ratio
    observed: int | float | None
    unit: str  # "bytes" | "tokens" | "x"
    error: float | None  # (predicted − observed) / observed
    explained_by: list[str]


class CheckReport(BaseModel):
    source: str
    release: str | None
    era: str
    graph_estimate_in_budget: bool
    sampler_path: str  # the top-k/top-p path the sampler warm-up is predicted with
    sampler_path_from: str
    model: str
    chip: str
    deployment: dict
    components: list[ComponentOut]
    starts_predicted: bool | None
    refusal_predicted: str | None
    refusal_logged: str | None
    verdict_agrees: bool | None
    evidence: dict
    assumed: list[str] = []  # settings the log does not state, taken at vLLM's default (and the flag to give)


def given_release(log: ParsedLog, release: str, source: str) -> str:
    """The release given for a log (`vllm_version`): one the eras can read (vLLM 0.6 onwards, vllm_eras.yaml),
    and only for a log that states none: a release the log contradicts would predict another engine's memory."""
    from pricing.calibration.eras import release_of

    if release_of(release) is None:
        raise InputError("vllm_version", f"{release!r} names no vLLM release", "give it as the log's engine "
                         "printed it, e.g. 0.19.0")
    if log.release is not None and release_of(log.release) != release_of(release):
        raise InputError("vllm_version", f"{release} contradicts the log, which states vLLM {log.release} (line "
                         f"{log.evidence.get('release', '?')})", "drop it: it is for logs that state no release")
    return release


def _resolve_model(log: ParsedLog, given: str | None, source: str) -> Checkpoint:
    """The model the log's deployment is sized with: the one given, else the log's checkpoint as
    record_models.yaml lists it (with its quantization), by id or by a local path's last part,
    else a card or cached Hugging Face id of that name."""
    from pricing.config import resolve

    if given:
        return Checkpoint(given)
    logged = log.deployment.get("model")
    if not logged:
        raise InputError(source, "the log names no model (no engine arguments or 'non-default args' line)",
                         f"give {mention('model')}")
    checkpoint = checkpoint_for(logged)
    if checkpoint is None:  # a local path: match its last part against the known checkpoints
        tail = logged.rstrip("/").rsplit("/", 1)[-1].lower()
        known = next((k for k in record_models() if k.rsplit("/", 1)[-1] == tail), None)
        checkpoint = None if known is None else checkpoint_for(known)
    if checkpoint is None:
        try:
            resolve(logged, log.registry)
            checkpoint = Checkpoint(logged)
        except InputError:
            raise InputError(source, f"the log's model {logged!r} is not a card, a known checkpoint or a cached "
                             "Hugging Face id", f"give {mention('model')} (a card name or a config.json path)"
                             ) from None
    return checkpoint


def unstated(log: ParsedLog, source: str, model: str | None, chip: str | None,
             release: str | None) -> list[InputError]:
    """Each fact the log does not state and no option gives (the GPU, a known model, the release),
    one error each, so that a reader learns of all of them at once."""
    out = []
    if chip is None:
        out.append(InputError("chip", "the log does not name the GPU", f"give {mention('chip')} (see `plan chips`)"))
    try:
        _resolve_model(log, model, source)
    except InputError as err:
        out.append(err)
    if release is None and log.record(Path(source).name).vllm_version is None:
        out.append(InputError(source, "the log states no release (no 'vLLM API server version' or engine config "
                              "line)", f"give {mention('vllm_version')}, e.g. 0.19.0"))
    return out


def check(log: ParsedLog, source: str, model: str | None = None, chip: str | None = None,
          release: str | None = None, fill: dict | None = None) -> CheckReport:
    """Compare one parsed log with the kernel's prediction of the same deployment (under the registry
    the log was parsed with, `ParsedLog.registry`)."""
    from pricing.chips import get_chip

    if not log.startup_log:
        raise InputError(source, f"is not a vLLM start-up log (it states no release nor engine "
                         f"arguments, and {len(set(log.evidence.values()))} of its {log.lines:,} lines are vLLM's)",
                         "give the engine's start-up output, from its first line to 'Maximum concurrency'")
    if len(log.starts) > 1:  # one comparison of facts read from several start-ups would be none of them
        raise InputError(source, f"holds {len(log.starts)} start-ups (from lines "
                         f"{', '.join(map(str, log.starts))})", "split the file at those lines and check each "
                         "start-up on its own")
    if "available_kv_gib" not in log.observed and log.refusal is None:
        raise InputError(source, "has no 'Available KV cache memory' line (nor v0's 'the rest of "
                         "the memory reserved for KV Cache'), and no start-up error",
                         "give the log up to the KV cache sizing lines")
    missing = unstated(log, source, model, chip, release)
    if missing:
        raise missing[0]
    checkpoint = _resolve_model(log, model, source)
    target = get_chip(chip, log.registry)
    record = log.record(Path(source).name, model=log.deployment.get("model") or checkpoint.name, gpu=target.id)
    if release:
        record.vllm_version = given_release(log, release, source)
    for key, value in (fill or {}).items():  # what the log does not say (--tp, --max-num-seqs, …)
        if value is not None and key not in log.deployment:
            setattr(record, key, value)
    p = predict(record, log.registry, weights="kernel", checkpoint=checkpoint, chip=target)
    if not p.usable:
        raise InputError(source, f"cannot rebuild this deployment: {p.skipped}", "see `plan check-log --help`")
    report = _report(p, log, source, checkpoint.name)
    stated = set(log.deployment) | {k for k, v in (fill or {}).items() if v is not None}
    if "max_concurrency_tokens" in log.observed:
        stated.add("max_model_len")  # "Maximum concurrency for L tokens per request" (ParsedLog.record)
    report.assumed = assumed(p, stated)
    return report


# record field -> (what it is called in the report, the deployment key, the field that gives it: check-log
# names it as its flag)
STATED_OR_DEFAULT = {"tp": ("tp", "tensor_parallel_size", "tp"),
                     "gpu_memory_utilization": ("utilization", "gpu_memory_utilization", "gpu_memory_utilization"),
                     "max_num_seqs": ("max_num_seqs", "max_num_seqs", "max_num_seqs"),
                     "max_num_batched_tokens": ("max_num_batched_tokens", "max_num_batched_tokens", None),
                     "max_model_len": ("max_model_len", "max_model_len", None)}


def assumed(p: Prediction, stated: set[str]) -> list[str]:
    """The settings the prediction takes at vLLM's default because neither the log nor a flag
    states them: said, never silently assumed (a log whose arguments line is missing is checked
    against vLLM's defaults, which may not be what ran)."""
    e = p.kernel.engine
    values = {"tensor_parallel_size": e.tensor_parallel_size, "gpu_memory_utilization": e.gpu_memory_utilization,
              "max_num_seqs": e.max_num_seqs, "max_num_batched_tokens": e.max_num_batched_tokens,
              "max_model_len": e.max_model_len}
    return [f"{label} {values[key]}" + (f" (give {mention(given)} if it differs)" if given else "")
            for field, (label, key, given) in STATED_OR_DEFAULT.items() if field not in stated]


def _explain(p: Prediction, component: str) -> list[str]:
    k = p.kernel
    used = {s.name: s for s in k.provenance()}
    e = k.engine

    def show(name: str, detail: str = "") -> str:
        s = used.get(name)
        value = s.value if s is not None else "?"
        return f"{name} = {value}" + (f" ({detail})" if detail else "")

    if component == "weights":
        fmt = [n for n in used if n.startswith("formats.")]
        return [f"model graph of {k.model.name} ({k.model.quantization})"] + [show(n) for n in fmt[:2]]
    if component == "activation":
        a = k.activation()
        rows = min(e.max_num_seqs, e.max_num_batched_tokens)
        if a.sampler >= a.forward:
            out = [show("cost_model_memory.sampler_bytes_per_logit",
                        f"sampler warm-up: {rows:,} rows × {k.model.vocab_size:,} logits, {p.sampler} top-k/top-p "
                        f"path ({p.sampler_known_from})"),
                   show("cost_model_memory.sampler_hidden_bytes")]
        else:
            fam = f"cost_model_memory.activation_buffers.{k.model.activation_family}"
            out = [show(fam, f"forward at {e.max_num_batched_tokens:,} tokens × hidden {k.model.hidden_size:,}")]
        if a.model_buffers:
            out.append("model buffers: " + ", ".join(a.buffers))
        return out
    if component == "non_torch":
        return [show("cost_model_primitives.non_torch_in_budget", f"largest collective group "
                     f"{max(k.collective_groups().values(), default=1)}")]
    if component == "cuda_graph":
        names = [n for n in used if n.startswith("cost_model_memory.cuda_graph")]
        ceil = k.cuda_graph()[1]
        detail = f"capture ceiling {ceil.mixed} tokens" if ceil else "eager: no graphs"
        return [show(n, detail) for n in names] or [detail]
    if component == "available_kv":
        gap = "the CUDA-graph estimate is taken from the budget" if p.era.graph_estimate_in_budget else \
            "this release does not take the CUDA-graph estimate from the budget"
        return [f"requested = ceil(total × {e.gpu_memory_utilization}) − the parts above; {gap}"]
    return [f"rules pack {k.release.name} (vLLM {k.release.full_version}): {k.layout().rule}"] + (
        [p.pack_note] if p.pack_note else [])


def _tokens_for_pool(p: Prediction, pool: int) -> tuple[int, float]:
    from pricing.kernel.kernel import Kernel

    k = p.kernel
    engine = k.engine.__class__(**{**k.engine.__dict__, "kv_cache_memory_bytes": max(0, int(pool))})
    probe = Kernel(k.model, engine, k.chip, k.reg)
    return probe.instance.kv_cache_tokens(), probe.instance.max_concurrency()


def _report(p: Prediction, log: ParsedLog, source: str, name: str) -> CheckReport:
    comps = []
    labels = {"weights": "weights", "activation": "activation peak", "non_torch": "non-torch memory",
              "cuda_graph": "CUDA graphs (estimate)", "available_kv": "available KV cache memory"}
    for key, label in labels.items():
        pred, obs = p.predicted.get(key), p.observed.get(key)
        if key == "cuda_graph" and obs is None and log.observed.get("cuda_graph_gib") is not None:
            obs = int(round(log.observed["cuda_graph_gib"] * GiB))  # only the actual capture was logged
            label = "CUDA graphs (estimate vs actual)"
        comps.append(ComponentOut(name=label, predicted=pred, observed=obs, unit="bytes",
                                  error=None if obs in (None, 0) or pred is None else (pred - obs) / abs(obs),
                                  explained_by=_explain(p, key)))
    pool = p.predicted["available_kv"]
    tokens, conc = _tokens_for_pool(p, pool)
    obs_tokens = log.observed.get("kv_cache_tokens")
    obs_conc = log.observed.get("max_concurrency")
    rule = _explain(p, "layout")
    comps.append(ComponentOut(name="GPU KV cache size", predicted=tokens, observed=obs_tokens, unit="tokens",
                              error=None if not obs_tokens else (tokens - obs_tokens) / obs_tokens, explained_by=rule))
    comps.append(ComponentOut(name="maximum concurrency", predicted=round(conc, 2), observed=obs_conc, unit="x",
                              error=None if not obs_conc else (conc - obs_conc) / obs_conc, explained_by=rule))
    if p.observed.get("available_kv") and p.observed["available_kv"] > 0 and obs_tokens:
        exact, _ = _tokens_for_pool(p, p.observed["available_kv"])
        comps.append(ComponentOut(name="GPU KV cache size from the logged pool", predicted=exact, observed=obs_tokens,
                                  unit="tokens", error=(exact - obs_tokens) / obs_tokens,
                                  explained_by=["the KV rules alone (groups, blocks, tokens), the fixed memory aside"]))
    e = p.kernel.engine
    deployment = {"tensor_parallel_size": e.tensor_parallel_size, "data_parallel_size": e.data_parallel_size,
                  "gpu_memory_utilization": e.gpu_memory_utilization, "max_model_len": e.max_model_len,
                  "max_num_seqs": e.max_num_seqs,
                  "max_num_batched_tokens": e.max_num_batched_tokens, "kv_cache_dtype": e.kv_cache_dtype,
                  "block_size": e.block_size, "cudagraph_mode": e.cudagraph_mode,
                  "total_memory_bytes": p.kernel.chip.memory_bytes}
    refused = log.refusal is not None
    agrees = None if p.starts is None or (not refused and "available_kv_gib" not in log.observed) else (
        p.starts != refused)
    return CheckReport(source=source, release=p.record.vllm_version, era=p.era.label,
                       graph_estimate_in_budget=p.era.graph_estimate_in_budget, sampler_path=p.sampler,
                       sampler_path_from=p.sampler_known_from, model=name, chip=p.kernel.chip.id,
                       deployment=deployment, components=comps, starts_predicted=p.starts,
                       refusal_predicted=p.refusal, refusal_logged=log.refusal, verdict_agrees=agrees,
                       evidence=log.evidence)
