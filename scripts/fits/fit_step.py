"""Fit the step model's efficiency factors (pricing/registry/step_model.yaml) on the training
part of validation/measured_points.yaml and report the error on the held-back part.

    python scripts/fits/fit_step.py            # fit and print the table (writes nothing)
    python scripts/fits/fit_step.py --write    # also write the fitted values into step_model.yaml
    python scripts/fits/fit_step.py --engine vllm --write   # vLLM's own factors (engines.vllm, engines.vllm-rocm)
    python scripts/fits/fit_step.py --operators --write     # the operator step's CPU-side constants
                                                            # (engines.vllm-operators)

The shared factors are fitted on every engine's training points; an engine's own factors (`engines.<engine>`
in step_model.yaml, which the step model reads for that engine: vLLM's for every plan) on that engine's
training points alone, starting from the shared ones.

vLLM's factors come in two sets (pricing.step.step.factor_set). `engines.vllm-rocm`, for AMD chips, is the
fit on vLLM's throughput points. `engines.vllm`, for the CUDA build, starts from it and refits the per-step,
per-layer and per-request overheads, the fused-MoE kernels (`moe_kernels`: expert read efficiency by chip
generation and experts' format) and the attention backends other than GQA (`attention_kernels`: a fixed cost
per layer), each where at least MIN_KERNEL_ROWS training rows run it, on the training rows of
validation/vllm_silicon_points.yaml (NVIDIA chips only): two thirds, by a hash of their id, of the rows
whose decode dominates (pricing/step/silicon.py); the rest measure it.

The objective is the mean |log(predicted / measured)| over the training points (smooth, and
symmetric in over- and under-prediction); coordinate descent over a grid per factor, a few
rounds. The held-back points (a third, by a hash of their id) never enter the fit. The
collective latency and the activation width are sourced values, not fitted.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pricing.registry import Sourced  # noqa: E402
from pricing.serving.silicon import Harness, closed_loop, closed_loop_errors  # noqa: E402
from pricing.step.measured import POINTS, load_points, predict  # noqa: E402
from pricing.step.rates import AttentionKernel, Efficiency, GemmKernel, MoeKernel  # noqa: E402
from pricing.step.silicon import SILICON, SiliconPoint, load_silicon  # noqa: E402
from pricing.step.step import ENGINE, ROCM_ENGINE, StepModel  # noqa: E402

REGISTRY = ROOT / "pricing" / "registry" / "step_model.yaml"
GRIDS = {
    "memory_bandwidth": [round(0.30 + 0.025 * i, 3) for i in range(26)],  # at most 0.925: no read streams at peak
    "expert_bandwidth": [round(0.20 + 0.025 * i, 3) for i in range(33)],
    "tensor_compute": [round(0.30 + 0.025 * i, 3) for i in range(25)],  # 0.3-0.9: a prior floor
    "interconnect": [round(0.30 + 0.05 * i, 2) for i in range(15)],
    "step_seconds": [i * 2.5e-4 for i in range(41)],
    "layer_seconds": [i * 1.0e-5 for i in range(31)],
    "per_request_seconds": [i * 5.0e-6 for i in range(21)],
}


def loss(points, eff: Efficiency) -> float:
    return statistics.fmean(abs(math.log(predict(p, eff) / p.measured)) for p in points)


def descend(loss, start: Efficiency, moves, rounds: int) -> Efficiency:
    """Coordinate descent: each round tries every value of every move's grid on the best so far (a move
    is (grid, (efficiency, value) -> the trial)), keeping a trial that lowers `loss`."""
    best, best_loss = start, loss(start)
    for _ in range(rounds):
        for grid, move in moves:
            for value in grid:
                trial = move(best, value)
                trial_loss = loss(trial)
                if trial_loss < best_loss - 1e-12:
                    best, best_loss = trial, trial_loss
    return best


def factor_moves(grids: dict[str, list]) -> list:
    """A move per factor: its grid, and the efficiency with that factor replaced."""
    return [(grid, lambda eff, value, name=name: eff.replaced(**{name: value})) for name, grid in grids.items()]


def kernel_moves(kernels, grids: dict[type, list]) -> list:
    """A move per fitted kernel: its kind's grid over its one field, and the efficiency with it replaced."""
    return [(grids[type(k)], lambda eff, value, k=k: eff.with_kernel(replace(k, **{type(k).FIELDS[0]: value})))
            for k in kernels]


def fit(points, start: Efficiency, rounds: int = 3) -> Efficiency:
    return descend(lambda eff: loss(points, eff), start, factor_moves(GRIDS), rounds)


def table(points, eff: Efficiency) -> list[tuple]:
    return [(p, predict(p, eff)) for p in points]


def write(eff: Efficiency, train: int, held: int, train_err: float, held_err: float) -> None:
    text = REGISTRY.read_text()
    how = (f"fitted by scripts/fits/fit_step.py on {train} training points of validation/measured_points.yaml "
           f"(median absolute error of output tokens/s per GPU {train_err:.1%}); "
           f"held-back {held} points: {held_err:.1%}")
    for field, name in Efficiency.NAMES.items():
        if field not in GRIDS:  # sourced, not fitted
            continue
        section, key = name.split(".")
        value = getattr(eff, field)
        pattern = re.compile(rf"(  {key}:\n    value: )[^\n]*\n    source: [^\n]*\n    how: [^\n]*\n")
        block = (f'{float(value):.6e}\n    source: "fit on measured points, validation/measured_points.yaml"\n'
                 f'    how: "{how}"\n')
        text, n = pattern.subn(lambda m, block=block: m.group(1) + block, text, count=1)
        if n != 1:
            raise SystemExit(f"could not find {name} in {REGISTRY}")
    REGISTRY.write_text(text)


ENGINES_BEGIN = "# engines: generated by scripts/fits/fit_step.py --engine"
ENGINES_ABOUT = """. vLLM's factors are two sets (pricing/step/step.py
# factor_set): vllm-rocm (AMD chips), the fit on vLLM's throughput points; vllm (CUDA), that fit with its
# overheads refitted on vLLM's measured decode TPOT (validation/vllm_silicon_points.yaml), its fused-MoE
# kernels' expert reads by chip generation and experts' format (moe_kernels) and its attention backends'
# floors per layer (attention_kernels). Formats, generations and backends not listed take the set's own
# expert_bandwidth and layer_seconds alone.
"""
ENGINES_END = "# end engines\n"


SILICON_GRIDS = {  # the CUDA build's overheads, refitted on the silicon rows
    "step_seconds": GRIDS["step_seconds"],
    "layer_seconds": GRIDS["layer_seconds"],
    "per_request_seconds": GRIDS["per_request_seconds"],
}
KERNEL_GRIDS = {  # a fused-MoE kernel's expert reads (at most the memory grid's top), an attention backend's floor
    MoeKernel: [v for v in GRIDS["expert_bandwidth"] if v <= GRIDS["memory_bandwidth"][-1]],
    AttentionKernel: [i * 5.0e-6 for i in range(41)],
}
# Attention backends no silicon row runs whose layers are MLA's family: each takes MLA's floor as its own.
# DeepSeek-V3.2's sparse MLA runs MLA's projections and decode kernel over the entries its indexer picks, plus
# the indexer (vllm/model_executor/models/deepseek_v2.py); DeepSeek-V4 and V4.1 run MLA backends
# (vllm/v1/attention/backends/mla/sparse_swa.py; V4.1's fused flash_mla_mega_attn.py) beside a compressor and
# an indexer. An assumption each entry's `how` states, not a measurement.
FLOOR_OF = {"sparse_mla": "mla", "deepseek_v4": "mla", "deepseek_v41": "mla"}
MIN_KERNEL_ROWS = 10  # a kernel is fitted apart only on this many training rows of its own
SILICON_FILE = "validation/vllm_silicon_points.yaml"


def silicon_loss(rows: list[SiliconPoint], eff: Efficiency) -> float:
    return statistics.fmean(abs(math.log(r.predicted(eff).tpot_seconds * 1e3 / r.tpot_ms)) for r in rows)


def fit_silicon(rows: list[SiliconPoint], start: Efficiency, rounds: int = 6) -> Efficiency:
    """`start` with its overheads, and the fused-MoE kernels and attention backends that enough rows run,
    fitted on `rows`' TPOT."""
    counts: dict[tuple, int] = {}
    for r in rows:
        for kind, key in ((MoeKernel, r.moe_kernel_key()), (AttentionKernel, r.attention_kernel_key())):
            if key is not None:
                counts[(kind, key)] = counts.get((kind, key), 0) + 1
    kernels = [start.moe_kernel(*key) if kind is MoeKernel else start.attention_kernel(*key)
               for (kind, key), n in sorted(counts.items(), key=str) if n >= MIN_KERNEL_ROWS]
    first = start.with_kernels(tuple(k for k in kernels if isinstance(k, MoeKernel)),
                               tuple(k for k in kernels if isinstance(k, AttentionKernel)))
    return descend(lambda eff: silicon_loss(rows, eff), first,
                   factor_moves(SILICON_GRIDS) + kernel_moves(kernels, KERNEL_GRIDS), rounds)


TTFT_CONCURRENCY = 4  # rows at most this concurrent train the first token: a prompt beside few others
TTFT_GRIDS = {
    "first_token_seconds": [i * 2.0e-3 for i in range(41)],
    "interconnect": GRIDS["interconnect"],
}
GEMM_GRID = [round(0.10 + 0.025 * i, 3) for i in range(33)]  # 0.1-0.9 of the peak (block FP8 sat at an 0.2 floor)
GEMM_SHARE = 0.5  # a format is a row's GEMM kernel when its matrices run most of the prompt's FLOPs


def gemm_keys(row: SiliconPoint) -> set[tuple[str, str]]:
    """(chip generation, weight format) of the matrix multiplies that run at least GEMM_SHARE of the row's
    prompt FLOPs (routed experts' in their format's group)."""
    model = StepModel(row.kernel())
    flops = model.prompt_flops_by_format()
    total = sum(flops.values())
    return {model.eff.gemm_kernel(model.kernel.chip.generation, f).key for f, v in flops.items()
            if v >= GEMM_SHARE * total}


def ttft_loss(rows: list[SiliconPoint], eff: Efficiency, harness: Harness) -> float:
    return statistics.fmean(abs(math.log(closed_loop(r, harness, eff)[1] * 1e3 / r.ttft_ms)) for r in rows)


def fit_silicon_ttft(rows: list[SiliconPoint], start: Efficiency, harness: Harness, rounds: int = 3) -> Efficiency:
    """`start` with the API server's time to a first token, the interconnect's efficiency and the GEMM
    kernels that enough rows run (effective prefill efficiency by weight format) fitted on `rows`' TTFT, each
    row's closed loop simulated as `harness` describes its benchmark (pricing/serving/silicon.py closed_loop)."""
    counts: dict[tuple, int] = {}
    for r in rows:
        for key in gemm_keys(r):
            counts[key] = counts.get(key, 0) + 1
    gemm = tuple(start.gemm_kernel(*key) for key, n in sorted(counts.items()) if n >= MIN_KERNEL_ROWS)
    return descend(lambda eff: ttft_loss(rows, eff, harness), start.with_kernels(gemm=gemm),
                   factor_moves(TTFT_GRIDS) + kernel_moves(gemm, {GemmKernel: GEMM_GRID}), rounds)


def ttft_errors(rows: list[SiliconPoint], eff: Efficiency, harness: Harness) -> list[float]:
    return [closed_loop_errors(r, harness, eff)[1] for r in rows]


def silicon_errors(rows: list[SiliconPoint], eff: Efficiency) -> list[float]:
    return [r.predicted(eff).tpot_seconds * 1e3 / r.tpot_ms - 1 for r in rows]


def _yaml_entry(indent: str, key: str, value: float, source: str, how: str) -> str:
    return (f"{indent}{key}:\n{indent}  value: {float(value):.6e}\n"
            f'{indent}  source: "{source}"\n{indent}  how: "{how}"')


def engine_block(engine: str, eff: Efficiency) -> str:
    """`engines.<engine>` of step_model.yaml: its fitted factors and its fused-MoE kernels, each with
    the source and how its provenance carries."""
    prov = {p.name.rsplit(".", 1)[-1]: p for p in eff.provenance}
    lines = [f"  {engine}:"]
    sections: dict[str, list[str]] = {}
    for field, name in Efficiency.NAMES.items():
        if field in GRIDS or field in TTFT_GRIDS:
            section, key = name.split(".")
            p = prov[key]
            sections.setdefault(section, []).append(_yaml_entry("      ", key, getattr(eff, field), p.source, p.how))
    for section, entries in sections.items():
        lines.append(f"    {section}:")
        lines += entries
    for kernels in (eff.moe_kernels, eff.attention_kernels, eff.gemm_kernels):
        if not kernels:
            continue
        lines.append(f"    {type(kernels[0]).TABLE}:")
        for generation in sorted({k.generation for k in kernels}):
            lines.append(f"      {generation}:")
            for k in (k for k in kernels if k.generation == generation):
                lines.append(f"        {k.key[1]}:")
                for p, field in zip(k.provenance, type(k).FIELDS, strict=True):
                    lines.append(_yaml_entry("          ", field, getattr(k, field), p.source, p.how))
    return "\n".join(lines)


def write_engines(blocks: dict[str, str]) -> None:
    """Replace step_model.yaml's engines, between their markers, by `blocks` (engine -> engine_block); the
    operator step's own (engines.vllm-operators, `--operators`) is kept."""
    text = REGISTRY.read_text()
    if ENGINES_BEGIN in text:
        section = text[text.index(ENGINES_BEGIN):text.index(ENGINES_END)]
        kept = re.search(r"\n(  vllm-operators:\n(?:    .*\n|      .*\n)*)", section + "\n")
        if kept and "vllm-operators" not in blocks:
            blocks = {**blocks, "vllm-operators": kept.group(1).rstrip("\n")}
    block = ENGINES_BEGIN + ENGINES_ABOUT + "\n".join(["engines:", *blocks.values()]) + "\n" + ENGINES_END
    text = REGISTRY.read_text()
    if ENGINES_BEGIN in text:
        text = text[:text.index(ENGINES_BEGIN)] + block + text[text.index(ENGINES_END) + len(ENGINES_END):]
    else:
        text = text.rstrip("\n") + "\n" + block
    REGISTRY.write_text(text)


def fitted_engine(engine: str, eff: Efficiency, train: int, held: int, train_err: float, held_err: float) -> Efficiency:
    """`eff` with the source and how of a fit on an engine's throughput points."""
    how = (f"fitted by scripts/fits/fit_step.py --engine {engine} on the {train} {engine} training points of "
           f"validation/measured_points.yaml (median absolute error of output tokens/s per GPU {train_err:.1%}); "
           f"its {held} held-back points: {held_err:.1%}")
    return eff.stamped(GRIDS, f"fit on measured {engine} points, validation/measured_points.yaml", how)


def fitted_silicon(eff: Efficiency, train: int, held: int, train_err: float, held_err: float,
                   signed: float, ttft: tuple) -> Efficiency:
    """`eff` (the CUDA build's) with the source and how of the silicon fit on its overheads and kernels;
    `ttft`: (training rows, held-back rows, training error, held-back error, signed) of the TTFT stage."""
    how = (f"fitted by scripts/fits/fit_step.py --engine vllm on the TPOT of {train} training rows of {SILICON_FILE} "
           f"(decode-dominated rows, outputs at least as long as prompts; median absolute error {train_err:.1%}); "
           f"its {held} held-back decode-dominated rows: {held_err:.1%}, signed {signed:+.1%}")
    source = f"fit on vLLM's measured TPOT, {SILICON_FILE} (NVIDIA aiconfigurator silicon data)"
    eff = eff.stamped(SILICON_GRIDS, source, how)
    tables: dict[type, list] = {MoeKernel: [], AttentionKernel: []}
    for k in (*eff.moe_kernels, *eff.attention_kernels):
        what = (f"experts served as {k.fmt} on {k.generation}, the fused-MoE kernel vLLM picks for them there"
                if isinstance(k, MoeKernel) else
                f"{k.backend} attention on {k.generation}: its fixed seconds per decoder layer beyond the shared "
                "layer_seconds (the Kimi-K2.5 rows; DeepSeek-R1's runs, held back, measure it)")
        prov = tuple(Sourced(f"step_model.engines.{ENGINE}.{k.TABLE}.{k.generation}.{k.key[1]}.{f}",
                             getattr(k, f), source, f"{how}; {what}") for f in type(k).FIELDS)
        tables[type(k)].append(replace(k, provenance=prov))
    for backend, fitted in FLOOR_OF.items():
        for k in [k for k in tables[AttentionKernel] if k.backend == fitted]:
            name = f"step_model.engines.{ENGINE}.{k.TABLE}.{k.generation}.{backend}.layer_seconds"
            prov = (Sourced(name, k.layer_seconds, k.provenance[0].source,
                            f"{fitted}'s floor on {k.generation}, assumed (no {backend} row in the silicon data): "
                            f"{backend} layers run vLLM's MLA-family kernels (scripts/fits/fit_step.py FLOOR_OF)"),)
            tables[AttentionKernel].append(replace(k, backend=backend, provenance=prov))
    ttft_how = (f"fitted by scripts/fits/fit_step.py --engine vllm on the TTFT of {ttft[0]} training rows of "
                f"{SILICON_FILE} at most {TTFT_CONCURRENCY} concurrent (a prompt's prefill beside few decodes, "
                "each row's closed loop simulated as the file's benchmark block describes it; "
                f"median absolute error {ttft[2]:.1%}); its {ttft[1]} held-back rows: {ttft[3]:.1%}, signed "
                f"{ttft[4]:+.1%}")
    ttft_source = f"fit on vLLM's measured TTFT, {SILICON_FILE} (NVIDIA aiconfigurator silicon data)"
    eff = eff.stamped(TTFT_GRIDS, ttft_source, ttft_how)
    gemm = tuple(replace(k, provenance=(Sourced(
        f"step_model.engines.{ENGINE}.{k.TABLE}.{k.generation}.{k.fmt}.tensor_compute", k.tensor_compute,
        ttft_source, f"{ttft_how}; weights served as {k.fmt} on {k.generation}: an effective prefill efficiency, "
        "what the prompt's other costs the step model does not price (MLA's prefill path, the host's time "
        "between steps; the closed loop's queueing behind other prompts is simulated) leave of the GEMMs' "
        "peak"),)) for k in eff.gemm_kernels)
    return eff.with_kernels(tuple(tables[MoeKernel]), tuple(tables[AttentionKernel]), gemm)


OPERATOR_GRIDS = {  # the operator step's CPU-side constants (pricing/step/composed.py)
    "step_seconds": [i * 1.0e-4 for i in range(101)],
    "layer_seconds": [i * 2.0e-6 for i in range(51)],
    "per_request_seconds": [i * 2.0e-6 for i in range(51)],
    "per_token_seconds": [i * 2.0e-7 for i in range(51)],
}
OPERATOR_TTFT_GRID = [i * 2.0e-3 for i in range(61)]


def _operator_registry():
    """The registry in use with the operator step chosen and its constants zeroed (their features measured
    against this base)."""
    from pricing.registry import shipped
    from pricing.step.composed import COMPOSITION, OPERATOR_ENGINE

    reg = shipped()
    values = {COMPOSITION: Sourced(COMPOSITION, "operators", "scripts/fits/fit_step.py --operators", "the fit's base")}
    for field in (*OPERATOR_GRIDS, "first_token_seconds"):
        name = f"step_model.engines.{OPERATOR_ENGINE}.{Efficiency.NAMES[field]}"
        values[name] = Sourced(name, 0.0, "fit in progress", "zero: the fit's base")
    return reg.overlay(values)


FIGURES = ("tpot", "ttft")  # closed_loop's order


def _closed_loop(row: SiliconPoint, harness: Harness, eff: Efficiency, reg, figure: str) -> float:
    """`figure` (tpot or ttft, seconds) of the row's simulated closed loop."""
    return closed_loop(row, harness, eff, reg)[FIGURES.index(figure)]


def _linear_features(rows: list[SiliconPoint], figure: str, reg, harness: Harness) -> list[tuple[float, list[float]]]:
    """Each row's `figure` (tpot or ttft, seconds, of its simulated closed loop) at zero CPU-side constants and
    its change per unit of each (every step's time is linear in them, and a closed loop whose clients are all
    ready at once schedules the same steps whatever they cost, so TPOT and TTFT are too: checked below)."""
    from pricing.step.composed import OPERATOR_ENGINE

    out = []
    for r in rows:
        model = StepModel(r.kernel(reg))
        assert model.composition == "operators", r.id
        base = Efficiency.from_registry(model.kernel.reg, OPERATOR_ENGINE)
        zero = _closed_loop(r, harness, base, reg, figure)
        slopes = [_closed_loop(r, harness, base.replaced(**{f: 1e-3}), reg, figure) / 1e-3 - zero / 1e-3
                  for f in OPERATOR_GRIDS]
        out.append((zero, slopes))
    return out


def _linear_loss(features, measured: list[float], theta: list[float], front: float = 0.0) -> float:
    return statistics.fmean(abs(math.log((z + front + sum(t * x for t, x in zip(theta, xs, strict=True))) / m))
                            for (z, xs), m in zip(features, measured, strict=True))


def fit_operator_constants(write: bool) -> None:
    """The operator step's CPU-side constants on the silicon rows' training split, each row's closed loop
    simulated as the file's `benchmark` block describes it (pricing/serving/silicon.py Harness): per step, per
    decoder layer, per request, per token on the decode-dominated training rows' TPOT; the API server's time to
    a first token on the training rows at most TTFT_CONCURRENCY concurrent. The held-back rows are scored, never
    fitted; the public runs are not read."""
    from pricing.step.composed import OPERATOR_ENGINE

    rows, about = load_silicon(SILICON)
    harness = Harness.of(about)
    reg = _operator_registry()
    rows = [r for r in rows if StepModel(r.kernel(reg)).composition == "operators"]
    train = [r for r in rows if r.training]
    low_train = [r for r in rows if r.concurrency <= TTFT_CONCURRENCY and not r.held_back]
    feats = _linear_features(train, "tpot", reg, harness)
    measured = [r.tpot_ms / 1e3 for r in train]
    theta = [0.0] * len(OPERATOR_GRIDS)
    best = _linear_loss(feats, measured, theta)
    for _ in range(6):
        for j, grid in enumerate(OPERATOR_GRIDS.values()):
            for v in grid:
                trial = theta[:j] + [v] + theta[j + 1:]
                loss_ = _linear_loss(feats, measured, trial)
                if loss_ < best - 1e-12:
                    theta, best = trial, loss_
    fitted = dict(zip(OPERATOR_GRIDS, theta, strict=True))
    base = Efficiency.from_registry(reg, OPERATOR_ENGINE)
    eff = base.replaced(**fitted)
    tfeats = [(_closed_loop(r, harness, eff, reg, "ttft"), []) for r in low_train]
    tmeasured = [r.ttft_ms / 1e3 for r in low_train]
    front = min(OPERATOR_TTFT_GRID, key=lambda c: _linear_loss(tfeats, tmeasured, [], c))
    eff = eff.replaced(first_token_seconds=front)
    check = max(abs(_closed_loop(r, harness, eff, reg, "tpot")
                    / (z + sum(t * x for t, x in zip(theta, xs, strict=True))) - 1)
                for r, (z, xs) in zip(train[:20], feats[:20], strict=True))
    closed = {r.id: closed_loop_errors(r, harness, eff, reg) for r in {*train, *low_train}}
    train_err = [closed[r.id][0] for r in train]
    ttft_train = [closed[r.id][1] for r in low_train]
    print(f"operator step, CPU-side constants fitted on {len(train)} training rows (TPOT) and "
          f"{len(low_train)} (TTFT) of {SILICON_FILE}:")
    for field, value in (*fitted.items(), ("first_token_seconds", front)):
        print(f"{field:24s} {value:.6g}")
    print(f"linearity check (20 rows): largest |prediction / linear model - 1| {check:.2e}")
    tpot_med = statistics.median(abs(e) for e in train_err)
    ttft_med = statistics.median(abs(e) for e in ttft_train)
    print(f"training TPOT median |error| {tpot_med:.1%}, signed {statistics.median(train_err):+.1%}; "
          f"training TTFT median |error| {ttft_med:.1%}, signed {statistics.median(ttft_train):+.1%}")
    if write:
        write_operator_engine(fitted, front, len(train), tpot_med, len(low_train), ttft_med)
        print(f"wrote {REGISTRY.relative_to(ROOT)}")


def write_operator_engine(fitted: dict, front: float, train: int, tpot_err: float, low: int, ttft_err: float) -> None:
    """engines.vllm-operators of step_model.yaml: the operator step's constants, each with its split and fit error."""
    from pricing.step.composed import OPERATOR_ENGINE

    source = f"fit on vLLM's measured TPOT and TTFT, {SILICON_FILE} training split (NVIDIA aiconfigurator silicon data)"
    how = (f"fitted by scripts/fits/fit_step.py --operators on the TPOT of the {train} training rows of {SILICON_FILE} "
           "(decode-dominated, not held back by the hash of their id; each row's closed loop simulated as the file's "
           "benchmark block describes it; the step from measured operators, these "
           f"constants the only end-to-end fit; training median |error| {tpot_err:.1%}); the held-back rows and "
           "the public runs judge it (scripts/operators/validate.py)")
    front_how = (f"fitted by scripts/fits/fit_step.py --operators on the TTFT of the {low} training rows of "
                 f"{SILICON_FILE} "
                 f"at most {TTFT_CONCURRENCY} concurrent, each closed loop simulated, the other constants fixed "
                 "(training median |error| "
                 f"{ttft_err:.1%}): the API server's time outside the engine's steps")
    lines = [f"  {OPERATOR_ENGINE}:", "    overhead:"]
    for field, value in fitted.items():
        lines.append(_yaml_entry("      ", field, value, source, how))
    lines.append(_yaml_entry("      ", "first_token_seconds", front, source, front_how))
    block = "\n".join(lines)
    text = REGISTRY.read_text()
    begin = text.index(ENGINES_BEGIN)
    end = text.index(ENGINES_END)
    section = text[begin:end]
    marker = f"\n  {OPERATOR_ENGINE}:\n"
    if marker in section:
        start = section.index(marker) + 1
        rest = re.search(r"\n  [a-z]", section[start:])
        stop = start + rest.start() + 1 if rest else len(section)
        section = section[:start] + block + "\n" + section[stop:]
    else:
        section = section.rstrip("\n") + "\n" + block + "\n"
    REGISTRY.write_text(text[:begin] + section + text[end:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the fitted factors into step_model.yaml")
    ap.add_argument("--engine", help="fit one engine's own factors on its points alone (vllm, sglang, trt-llm)")
    ap.add_argument("--operators", action="store_true",
                    help="fit the operator step's CPU-side constants (engines.vllm-operators) on the silicon "
                    "training rows")
    args = ap.parse_args()
    if args.operators:
        fit_operator_constants(args.write)
        return
    points, sources = load_points(POINTS)
    if args.engine:
        points = [p for p in points if p.engine.split()[0] == args.engine]
    train = [p for p in points if not p.held_back]
    held = [p for p in points if p.held_back]
    start = Efficiency.from_registry()
    eff = fit(train, start)
    train_err = statistics.median(abs(pred / p.measured - 1) for p, pred in table(train, eff))
    held_rows = table(held, eff)
    held_err = statistics.median(abs(pred / p.measured - 1) for p, pred in held_rows)
    for field in Efficiency.NAMES:
        print(f"{field:28s} {getattr(eff, field):.6g}")
    print(f"training points {len(train)}, median |error| {train_err:.1%}")
    print(f"held-back points {len(held)}, median |error| {held_err:.1%}")
    print("| point | measured tok/s/GPU | predicted | error |")
    print("|---|---:|---:|---:|")
    for p, pred in held_rows:
        print(f"| {p.model} {p.chip} {p.engine} tp{p.tp}{' ep' if p.ep else ''} {p.isl}/{p.osl} c{p.concurrency} "
              f"| {p.measured:,.1f} | {pred:,.1f} | {pred / p.measured - 1:+.0%} |")
    if args.engine == ENGINE:
        rocm = fitted_engine(ENGINE, eff, len(train), len(held), train_err, held_err)
        cuda = silicon(rocm)
        rocm = front_end_of(rocm, cuda)
        if args.write:
            write_engines({ROCM_ENGINE: engine_block(ROCM_ENGINE, rocm), ENGINE: engine_block(ENGINE, cuda)})
            print(f"wrote {REGISTRY.relative_to(ROOT)}")
    elif args.write and args.engine:
        fitted = fitted_engine(args.engine, eff, len(train), len(held), train_err, held_err)
        write_engines({args.engine: engine_block(args.engine, fitted)})
        print(f"wrote {REGISTRY.relative_to(ROOT)}")
    elif args.write:
        write(eff, len(train), len(held), train_err, held_err)
        print(f"wrote {REGISTRY.relative_to(ROOT)}")


def front_end_of(rocm: Efficiency, cuda: Efficiency) -> Efficiency:
    """The ROCm set with the CUDA fit's time to a first token outside the engine: the API server runs on the
    host, the same code on either build (no AMD row measures TTFT)."""
    p = next(p for p in cuda.provenance if p.name.endswith(".first_token_seconds"))
    out = rocm.replaced(first_token_seconds=cuda.first_token_seconds)
    return out.stamped({"first_token_seconds"}, p.source, f"the CUDA set's ({p.how}): the API server runs on the "
                       "host, the same code on ROCm; no AMD row measures TTFT")


def silicon(start: Efficiency) -> Efficiency:
    """vLLM's CUDA factors: `start` with its overheads, fused-MoE kernels and attention floors fitted on the
    decode-dominated silicon rows' TPOT, its first-token time, interconnect and GEMM kernels on the
    low-concurrency rows' TTFT, then the TPOT stage again at those."""
    rows, about = load_silicon(SILICON)
    harness = Harness.of(about)
    train = [r for r in rows if r.training]
    held = [r for r in rows if r.decode_dominated and r.held_back]
    low = [r for r in rows if r.concurrency <= TTFT_CONCURRENCY]
    low_train = [r for r in low if not r.held_back]
    low_held = [r for r in low if r.held_back]
    eff = fit_silicon(train, start)
    eff = fit_silicon_ttft(low_train, eff, harness)
    eff = fit_silicon(train, eff)
    train_err = statistics.median(abs(e) for e in silicon_errors(train, eff))
    held_errors = silicon_errors(held, eff)
    held_err = statistics.median(abs(e) for e in held_errors)
    signed = statistics.median(held_errors)
    ttft_train = statistics.median(abs(e) for e in ttft_errors(low_train, eff, harness))
    ttft_held = ttft_errors(low_held, eff, harness)
    ttft_figures = (len(low_train), len(low_held), ttft_train, statistics.median(abs(e) for e in ttft_held),
                    statistics.median(ttft_held))
    print(f"\nvLLM's CUDA factors, refitted on {len(train)} silicon rows (TPOT) and {len(low_train)} (TTFT):")
    for field in (*SILICON_GRIDS, *TTFT_GRIDS):
        print(f"{field:28s} {getattr(eff, field):.6g}")
    for k in eff.moe_kernels:
        print(f"moe kernel {k.generation} {k.fmt:18s} expert_bandwidth {k.expert_bandwidth:g}")
    for k in eff.attention_kernels:
        print(f"attention {k.generation} {k.backend:18s} layer_seconds {k.layer_seconds:g}")
    for k in eff.gemm_kernels:
        print(f"gemm {k.generation} {k.fmt:18s} tensor_compute {k.tensor_compute:g}")
    print(f"training rows {len(train)}, median |error| {train_err:.1%}")
    print(f"held-back decode-dominated rows {len(held)}, median |error| {held_err:.1%}, signed {signed:+.1%}")
    print(f"TTFT: training rows {ttft_figures[0]}, median |error| {ttft_train:.1%}; held-back {ttft_figures[1]}: "
          f"{ttft_figures[3]:.1%}, signed {ttft_figures[4]:+.1%}")
    return fitted_silicon(eff, len(train), len(held), train_err, held_err, signed, ttft_figures)


if __name__ == "__main__":
    main()
