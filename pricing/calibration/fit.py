"""Fit the registry's fixed-memory laws to start-up records: bounded least squares.

Each law is linear in its parameters: a row per record (features from the kernel's view of the
deployment: logit rows × vocabulary, tokens × hidden, decoder layers × capture ceiling, …) and
the logged figure as target. The solver is a small active-set bounded least squares on numpy
(no scipy). Each fitted value carries its provenance: the records, the era, the residual.

Laws (registry names):
    cost_model_memory.sampler_bytes_per_logit, .sampler_hidden_bytes   (releases ≥ 0.19)
    vllm_eras.laws_until.sampler_bytes_per_logit[_flashinfer]           (releases ≤ 0.11, by sampler path)
    cost_model_primitives.non_torch_in_budget                           (≥ 0.19, by group size)
    vllm_eras.laws_until.non_torch_in_budget                            (≤ 0.11)
    cost_model_memory.cuda_graph_laws.<family>                          (logged estimates, ≥ 0.19)
    cost_model_primitives.engine_workspace, .communicator_reservation   (start-up free memory)
"""

from __future__ import annotations

from dataclasses import dataclass

from pricing.calibration.eras import era_laws, release_of
from pricing.calibration.predict import Prediction
from pricing.kernel.pipeline import backbone_layers
from pricing.registry import Registry, shipped
from pricing.units import GiB, MiB


def bounded_lstsq(rows: list[list[float]], target: list[float], lower: list[float], upper: list[float]):
    """min ‖A x − b‖² subject to lower ≤ x ≤ upper (active set: solve on the free variables,
    pin the worst violator to its bound, repeat; release a pinned one whose gradient points in)."""
    import numpy as np

    a = np.asarray(rows, dtype=float)
    b = np.asarray(target, dtype=float)
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    n = a.shape[1]
    scale = np.maximum(np.abs(a).max(axis=0), 1e-300)
    a_s = a / scale
    lo_s, hi_s = lo * scale, hi * scale
    x = np.clip(np.zeros(n), lo_s, hi_s)
    pinned: dict[int, float] = {}
    for _ in range(4 * n + 4):
        free = [i for i in range(n) if i not in pinned]
        fixed = np.zeros(n)
        for i, v in pinned.items():
            fixed[i] = v
        rhs = b - a_s @ fixed
        x = fixed.copy()
        if free:
            sol, *_ = np.linalg.lstsq(a_s[:, free], rhs, rcond=None)
            x[free] = sol
        violations = [(max(lo_s[i] - x[i], x[i] - hi_s[i]), i) for i in free if x[i] < lo_s[i] or x[i] > hi_s[i]]
        if violations:
            _, worst = max(violations)
            pinned[worst] = lo_s[worst] if x[worst] < lo_s[worst] else hi_s[worst]
            continue
        grad = a_s.T @ (a_s @ x - b)
        release = [i for i, v in pinned.items() if (v == lo_s[i] and grad[i] < 0) or (v == hi_s[i] and grad[i] > 0)]
        if not release:
            break
        del pinned[release[0]]
    return (x / scale).tolist()


@dataclass
class FittedValue:
    name: str  # registry name
    value: object
    records: list[str]
    residual_rms: float  # bytes
    residual_max: float  # bytes
    era: str
    law: str
    method: str = "bounded least squares of "

    def source(self) -> str:
        shown = ", ".join(self.records[:6]) + (f", … ({len(self.records)} records)" if len(self.records) > 6 else "")
        return f"fitted by plan calibrate on {len(self.records)} start-up records of vLLM {self.era}: {shown}"

    def how(self) -> str:
        return (f"{self.method}{self.law}; residual rms {self.residual_rms / GiB:.3f} GiB, "
                f"max {self.residual_max / GiB:.3f} GiB")


def _release(p: Prediction):
    return p.era.release or ((0, 6) if p.era.engine == "v0" else None)


def _current(reg: Registry):
    """Whether a record is of the releases the current laws are fitted on (vllm_eras.current_laws_since)."""
    since = release_of(str(reg.value("vllm_eras.current_laws_since")))
    return lambda p: _release(p) is not None and _release(p) >= since


def _span(reg: Registry, law: str) -> tuple[str, str]:
    """The releases (since, until) the era law `law` (registry vllm_eras.laws_until.<law>) holds for."""
    entry = reg.value(f"vllm_eras.laws_until.{law}")
    return str(entry["since"]), str(entry["until"])


def _within(reg: Registry, law: str):
    """Whether a record's release is within the era law `law`'s releases."""
    since, until = (release_of(v) for v in _span(reg, law))
    return lambda p: p.era.release is not None and since <= p.era.release <= until


def _logits(p: Prediction) -> float:
    e = p.kernel.engine
    return min(e.max_num_seqs, e.max_num_batched_tokens) * p.kernel.model.vocab_size


def _token_hidden(p: Prediction) -> float:
    return p.kernel.engine.max_num_batched_tokens * p.kernel.model.hidden_size


def _sampler_dominates(p: Prediction) -> bool:
    """The logged peak is the sampler's when its lowest plausible size (fp32 logits, sorted
    with their int64 indices, 12 bytes a logit) exceeds the forward's."""
    a = p.kernel.activation()
    return 12 * _logits(p) > a.forward and a.model_buffers == 0


def _record_group(p: Prediction) -> int:
    """The largest collective group of the record's deployment as the kernel counts them: tp, or
    tp × dp with expert parallelism (pipeline stages are fitted apart: records with pp > 1 are left out)."""
    r = p.record
    ep = bool(r.ep) and not str(r.ep).lower().startswith(("false", "disabled", "off"))
    return max(r.tp, r.tp * r.dp if ep else 1)


def _unified(p: Prediction) -> bool:
    gpu = (p.record.gpu or "").lower()
    return any(word in gpu for word in ("gb10", "spark", "unified"))


def _graph_era(p: Prediction) -> bool:
    """Releases that take the CUDA-graph estimate from the budget (registry
    vllm_eras.graph_estimate_in_budget_since), the nearest to the current release."""
    return p.era.release is not None and p.era.graph_estimate_in_budget


def _act_target(p: Prediction) -> float:
    """The logged activation peak of the sampler warm-up and forward. A release that takes the
    CUDA-graph estimate from the budget logs it inside its peak (peak_activation_memory =
    transient_peak_headroom + the applied estimate, vllm-0.33-memory.md §1.4 item 10), so that
    record's logged estimate is taken off."""
    estimate = (p.observed["cuda_graph"] or 0) if p.era.graph_estimate_in_budget else 0
    return p.observed["activation"] - estimate


def _act_logged(p: Prediction) -> bool:
    """Whether the record logs its activation peak apart from the CUDA-graph estimate: always
    before the estimate is taken from the budget; from then on, only with the estimate logged."""
    return bool(p.observed["activation"]) and (not p.era.graph_estimate_in_budget
                                                or p.observed["cuda_graph"] is not None)


def _free_drop(p: Prediction) -> float | None:
    o = p.record.observed
    free = o.extra_gib("startup_free_gib")
    if free is None or o.total_gpu_memory_gib is None:
        return None
    return (o.total_gpu_memory_gib - free) * GiB


def fit(predictions: list[Prediction], registry: Registry | None = None) -> list[FittedValue]:
    """Fit every law the records can inform; laws without rows keep the registry's value. The
    releases each law is fitted on are the registry's (vllm_eras)."""
    reg = registry or shipped()
    current = _current(reg)
    # the logged peak and graphs of a pipeline stage are that stage's (the sampler runs on the last
    # one only): pipeline-parallel records inform the laws below through their own module, not here
    usable = [p for p in predictions if p.usable and p.record.pp == 1]
    out: list[FittedValue] = []

    # 1. sampler warm-up, current era: rows × vocab × a + tokens × hidden × b (the native path:
    # a start-up whose log states FlashInfer's sampler is not this law's)
    rows = [p for p in usable if current(p) and _act_logged(p) and _sampler_dominates(p) and p.sampler == "native"]
    per_hidden = None
    if len(rows) >= 2:
        x = _solve(rows, lambda p: [_logits(p), _token_hidden(p)], _act_target, [6, 0], [64, 16])
        per_hidden = x[1]
        out += _emit(rows, x, lambda p: [_logits(p), _token_hidden(p)], _act_target,
                     ["cost_model_memory.sampler_bytes_per_logit", "cost_model_memory.sampler_hidden_bytes"],
                     [lambda v: round(v, 3), lambda v: round(v, 3)],
                     f"≥{reg.value('vllm_eras.current_laws_since')} (V1 model runner)",
                     "activation peak = logit rows × vocab × bytes per logit + tokens × hidden × bytes")
    # 2. sampler warm-up, early V1 (≤ 0.11), one law per top-k/top-p path (the records' logs say
    # which; vllm_eras.laws_until.sampler_bytes_per_logit*): bytes per logit, the hidden term as above.
    # A path no record of the era logs an activation peak for keeps the registry's value.
    # Each row informs the era law its own prediction took (eras.era_laws, in the registry it was
    # predicted with).
    early: dict[str, list[Prediction]] = {}
    for p in usable:
        if per_hidden is not None and _act_logged(p) and _sampler_dominates(p):
            for name in era_laws(p.kernel.reg, p.era, p.sampler):
                if p.kernel.reg[name].value["law"] == "cost_model_memory.sampler_bytes_per_logit":
                    early.setdefault(name, []).append(p)
    for name, rows in sorted(early.items()):
        entry = rows[0].kernel.reg[name]
        target = lambda p: _act_target(p) - per_hidden * _token_hidden(p)  # noqa: E731
        x = _solve(rows, lambda p: [_logits(p)], target, [6], [96])
        out += _emit(rows, x, lambda p: [_logits(p)], target, [name],
                     [lambda v, entry=entry: {**entry.value, "value": round(v, 3)}],
                     f"≤{entry.value['until']} (early V1, {entry.value.get('sampler', 'native')} top-k/top-p path)",
                     "activation peak − tokens × hidden term = logit rows × vocab × bytes per logit")
    # 3-4. non-torch growth inside the budget, by the largest collective group (1, ≥ 2). It needs
    # no model: every record that logs it counts. It changed across releases (~2 GiB at group
    # size ≥ 2 in 0.17-0.19, under 1 GiB from 0.21), so each era has its own value and vLLM 0.33
    # takes the newest era's.
    every = [p for p in predictions if p.observed.get("non_torch") is not None and p.record.pp == 1]
    eras = [(_graph_era, "cost_model_primitives.non_torch_in_budget",
             f"≥{reg.value('vllm_eras.graph_estimate_in_budget_since')}", None)]
    for law in ("non_torch_mid", "non_torch_in_budget"):
        span = _span(reg, law)
        eras.append((_within(reg, law), f"vllm_eras.laws_until.{law}", "–".join(span), span))
    for select, name, era, span in eras:
        table, used, resid = {}, [], []
        for size, match in ((1, lambda g: g == 1), (2, lambda g: g >= 2)):
            rows = [p for p in every if select(p) and match(_record_group(p))]
            if not rows:
                continue
            x = _solve(rows, lambda p: [1.0], lambda p: p.observed["non_torch"], [0], [8 * GiB])
            table[size] = int(round(x[0]))
            used += rows
            resid += [p.observed["non_torch"] - x[0] for p in rows]
        if table:
            value = table if span is None else {"since": span[0], "until": span[1],
                                                "law": "cost_model_primitives.non_torch_in_budget", "value": table}
            out.append(FittedValue(name, value, _ids(used), _rms(resid), max(abs(r) for r in resid), era,
                                   "non-torch memory = a constant per collective group size (1, ≥ 2)"))
    # 5. CUDA-graph estimate: floor + per-layer-token × decoder layers × capture ceiling, by family
    rows = [p for p in usable if current(p) and p.observed["cuda_graph"] and p.kernel.engine.cudagraph_mode
            == "FULL_AND_PIECEWISE"]
    feats = lambda p: [1.0, backbone_layers(p.kernel.model) * p.kernel.cuda_graph()[1].mixed]  # noqa: E731
    pooled = _solve(rows, feats, lambda p: p.observed["cuda_graph"], [0, 0], [2 * GiB, MiB]) if rows else None
    for family in sorted({p.family for p in rows}):
        own = [p for p in rows if p.family == family]
        x = _solve(own, feats, lambda p: p.observed["cuda_graph"], [0, 0], [2 * GiB, MiB]) if len(own) >= 3 else pooled
        law = {"mixed": {"floor": int(round(x[0])), "per_token": 0, "per_layer_token": round(x[1], 2)},
               "decode": {"floor": 0, "per_token": 0}}
        resid = [p.observed["cuda_graph"] - (x[0] + x[1] * feats(p)[1]) for p in own]
        note = "" if len(own) >= 3 else " (pooled over every family: fewer than 3 records of its own)"
        out.append(FittedValue(f"cost_model_memory.cuda_graph_laws.{family}", law, _ids(own if len(own) >= 3
                               else rows), _rms(resid), max(abs(r) for r in resid), "≥0.19 (logged estimates)",
                               "estimate = floor + per_layer_token × layers × mixed ceiling; the FULL decode graphs "
                               "share the pool and the records' ceilings coincide, so their part is folded in" + note))
    # 6. memory held before the snapshot: the CUDA context and workspace (tp 1), the communicator.
    # Every record that logs its start-up free memory counts (no model needed); unified-memory
    # parts (GB10, DGX Spark) report host memory as free and are left out.
    rows = [p for p in predictions if _free_drop(p) is not None and not _unified(p) and p.record.pp == 1]
    solo = [p for p in rows if _record_group(p) == 1]
    if solo:
        x = _solve(solo, lambda p: [1.0], _free_drop, [0], [8 * GiB])
        resid = [_free_drop(p) - x[0] for p in solo]
        out.append(FittedValue("cost_model_primitives.engine_workspace", int(round(x[0])), _ids(solo), _rms(resid),
                               max(abs(r) for r in resid), "all releases with the line",
                               "total − free memory at start-up, single-GPU ranks"))
        table = {1: 0}
        resid = []
        used = []
        for size in (2, 4, 8):
            group = [p for p in rows if min(_record_group(p), 8) == size]
            if not group:
                continue
            y = _solve(group, lambda p: [1.0], lambda p: _free_drop(p) - x[0], [0], [8 * GiB])
            table[size] = int(round(y[0]))
            used += group
            resid += [_free_drop(p) - x[0] - y[0] for p in group]
        for size in (4, 8):  # a size no record measured takes the next smaller one's value
            table.setdefault(size, table[max(k for k in table if k < size)])
        if used:
            out.append(FittedValue("cost_model_primitives.communicator_reservation", table, _ids(used), _rms(resid),
                                   max(abs(r) for r in resid), "all releases with the line",
                                   "total − free memory at start-up − engine workspace, by collective group size "
                                   "(a size no record measured takes the next smaller one's value)"))
    return out


def _solve(rows, features, target, lower, upper):
    return bounded_lstsq([features(p) for p in rows], [target(p) for p in rows], lower, upper)


def _emit(rows, x, features, target, names, writers, era, law) -> list[FittedValue]:
    resid = [target(p) - sum(a * b for a, b in zip(features(p), x, strict=True)) for p in rows]
    return [FittedValue(n, w(v), _ids(rows), _rms(resid), max(abs(r) for r in resid), era, law)
            for n, w, v in zip(names, writers, x, strict=True)]


def _ids(rows) -> list[str]:
    return sorted({p.record.id for p in rows})


def _rms(values) -> float:
    return (sum(v * v for v in values) / len(values)) ** 0.5 if values else 0.0


def overlay(values: list[FittedValue]) -> dict:
    """The fitted values in the registry's layout (file stem → nested keys → leaf), as YAML data."""
    out: dict = {}
    for v in values:
        parts = v.name.split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = {"value": v.value, "source": v.source(), "how": v.how()}
    return out


def margin_value(predictions: list[Prediction]) -> FittedValue:
    """The planner's KV margin: the 90th percentile of the optimistic error of the available KV
    memory over the records (negative errors count as zero), rounded up to 0.1 %."""
    import math

    from pricing.calibration.residuals import kv_errors, percentile

    pairs = kv_errors(predictions)
    errors = [max(e, 0.0) for _, e in pairs]
    p90 = percentile(errors, 0.9)
    value = math.ceil(p90 * 1000) / 1000
    return FittedValue("cost_model_memory.kv_pool_margin", value, _ids([p for p, _ in pairs]), 0.0, 0.0,
                       "of the records", f"90th percentile of the optimistic error of the available KV memory "
                       f"({p90:.2%}) after the fit, rounded up to 0.1 %", method="")
