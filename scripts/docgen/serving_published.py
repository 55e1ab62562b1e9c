"""docs/serving.md's serving-simulator validation against runs published one or two at a time (a blog post,
pull requests, vLLM's perf-dashboard and recipes), from validation/vllm_published_runs.yaml: each run
measured / simulated, and the simulated decode step at the run's concurrency taken apart:

    python scripts/docs.py --only serving-published   # rewrite it in docs/serving.md, between its markers
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "scripts" / "docgen")]
from serving_table import SHOWN, figure_table, matched, median_errors  # noqa: E402

from pricing.serving.simulate import Instance  # noqa: E402
from pricing.serving.validation import PUBLISHED, Run, compared, runs  # noqa: E402
from pricing.step import StepModel  # noqa: E402
from pricing.step.measured import load_points  # noqa: E402
from pricing.step.work import linear_groups, routes_experts  # noqa: E402


@functools.cache
def _published() -> tuple[Run, ...]:
    return tuple(runs(PUBLISHED))


def rows() -> list[tuple[Run, dict, dict]]:
    """(run, simulated, errors) for every run."""
    return [(run, *compared(run)) for run in _published()]


def batch(run: Run) -> int:
    """The requests a run's decode steps hold: its client's concurrency, at most the engine's max_num_seqs."""
    return min(run.benchmark["max_concurrency"], Instance.of(run.kernel()).max_num_seqs)


def decode_parts(run: Run) -> dict[str, float]:
    """The step model's decode step of `batch(run)` requests at the middle of their outputs (ms):
    the whole step, the per-request overhead in it (vLLM's fitted `per_request_seconds` times the
    requests), its MoE layers, and the routed experts' weights the step reads (uniform routing, the
    step model's count) at the chip's whole peak bandwidth, a floor on any MoE layer's time."""
    kernel, n = run.kernel(), batch(run)
    model = StepModel(kernel)
    b = run.benchmark
    step = model.decode(n, b["input_len"] + b["output_len"] // 2)
    expert_bytes = sum(g.routed_work(n)[1] for g in linear_groups(kernel))
    return {"step": step.seconds * 1e3, "per_request": model.eff.per_request_seconds * n * 1e3,
            "moe": step.parts.get("MoE layers", 0.0) * 1e3,
            "experts_at_peak": expert_bytes / model.rates.memory_bandwidth * 1e3}


def _at_nvlink_latency(run: Run) -> float:
    """The p50 TPOT error of `run` simulated with its PCIe all-reduces at NVLink's latency."""
    eff = StepModel(run.kernel()).eff
    nvlink = eff.replaced(pcie_collective_latency_seconds=eff.collective_latency_seconds)
    return compared(run, run.simulate(nvlink))[1]["p50_tpot_ms"]


def rows_error(table, run: Run, figure: str) -> float:
    return next(err[figure] for r, _, err in table if r is run)


def _name(run: Run) -> str:
    b, d = run.benchmark, run.deployment
    quant = f" ({run.quantization})" if run.quantization else ""
    return (f"{run.model}{quant}, {run.chip}, tp{d.get('tensor_parallel_size', 1)}, "
            f"{b['input_len']:,}/{b['output_len']:,}, c{b['max_concurrency']}, {b['num_prompts']}")


def _source(run: Run) -> str:
    return run.id.split(":")[0]


def section() -> str:
    table = rows()
    lines = ["**Against runs published one or two at a time.** `validation/vllm_published_runs.yaml`: "
             f"{len(table)} fully stated runs at a fixed concurrency (`--max-concurrency C`, every prompt of one "
             "length), each transcribed with its release, server and client commands from the source at the commit "
             "or thread its link names, the printed result block quoted beside its figures (the perf-dashboard run: "
             "its saved result JSON): a blog post's two runs on four RTX PRO 6000 cards over PCIe (kubesimplify), "
             "a pull request's baseline (vllm-project/vllm 23151), a run in vLLM's perf-dashboard committed with its "
             "whole server log, and an AMD recipe's sample output on one MI355X. Each is simulated with vLLM 0.33's "
             "defaults for what its command leaves out; none of them is in the step model's fit. Measured / "
             "simulated, in ms (duration in s):", "",
             *figure_table(["run (model, chip, tp, input/output tokens, concurrency, requests)", "release"], table,
                           lambda run: [f"[{_name(run)}]({run.url}) ({_source(run)})", run.release])]
    lines += ["", matched(table) + "; median |error|: "
              + median_errors(table) + ".", "",
              "The simulated decode step at each run's concurrency (the step model at vLLM's factors, in the middle "
              "of the outputs), against the measured p50 TPOT (a decode step and its share of the prefills beside "
              "it), in ms:", "",
              "| run | decode step | per-request overhead in it | MoE layers in it | routed experts' weights "
              "at peak bandwidth | measured p50 TPOT |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    parts = [(run, decode_parts(run)) for run, _, _ in table]
    for run, p in parts:
        moe = (f"{p['moe']:,.1f}", f"{p['experts_at_peak']:,.1f}") if p["moe"] else ("-", "-")
        lines.append(f"| {_name(run)} | {p['step']:,.1f} | {p['per_request']:,.1f} | {moe[0]} | {moe[1]} | "
                     f"{run.measured['p50_tpot_ms']:,.2f} |")
    moe_runs = [(run, p) for run, p in parts if p["moe"] and batch(run) >= 8]
    floors = [p["experts_at_peak"] / run.measured["p50_tpot_ms"] for run, p in moe_runs]
    assert max(floors) < 1, "the experts' floor exceeds a measured step: the paragraph below no longer holds"
    train = [p for p in load_points()[0] if p.engine.split()[0] == "vllm" and not p.held_back]
    moe_train = [p for p in train if routes_experts(p.kernel())]
    models = {p.model: sorted(q.concurrency for q in moe_train if q.model == p.model) for p in moe_train}
    own, default = [], []
    for run, p in moe_runs:
        model = StepModel(run.kernel())
        kernel = model.expert_kernel()
        said = (f"{run.model} on {run.chip} ({kernel.fmt} experts on {kernel.generation}), "
                f"{p['step'] / run.measured['p50_tpot_ms']:.1f} times")
        (own if kernel.provenance else default).append((said, kernel.expert_bandwidth))
    fallback = StepModel(moe_runs[0][0].kernel()).eff.expert_bandwidth
    eff = StepModel(table[0][0].kernel()).eff
    single = next(run for run, _, _ in table if batch(run) == 1)
    dense = next((run, err) for run, _, err in table if not decode_parts(run)["moe"])
    near = [k for k in SHOWN if abs(dense[1][k]) <= 0.20]
    lines += ["",
              f"- Mixture-of-experts models at 10 to 64 requests a step ({len(moe_runs)} runs): the simulated decode "
              "step over the measured p50 TPOT is "
              + "; ".join(f"{said}, its fused-MoE kernel fitted apart on the silicon rows ({bw:g} of peak bandwidth)"
                          for said, bw in own)
              + ("; " if own and default else "")
              + "; ".join(f"{said}" for said, _ in default)
              + (f". No silicon row runs the latter's kernels, so their experts are read at the throughput fit's "
                 f"{fallback:g} of peak, fitted on {len(train)} points whose mixture-of-experts ones are "
                 + " and ".join(f"{m} at {', '.join(map(str, c))} requests" for m, c in models.items())
                 + "; reading every expert a uniform router would touch at the chip's whole peak bandwidth takes "
                 f"{min(floors):.0%} to {max(floors):.0%} of the measured TPOT. These runs are the kind of vLLM "
                 "point that fit lacks (held back here, not fitted)." if default else "."),
              f"- One request at a time over PCIe ({single.machine}): each of the step's all-reduces is priced at "
              f"PCIe's small-message latency, {eff.pcie_collective_latency_seconds * 1e6:.0f} us (NVIDIA/nccl issue "
              "1530, step_model.yaml), and the simulated p50 TPOT is "
              f"{rows_error(table, single, 'p50_tpot_ms'):+.0%}; at NVLink's "
              f"{eff.collective_latency_seconds * 1e6:.0f} us it would be {_at_nvlink_latency(single):+.0%}.",
              f"- The dense {dense[0].model} on one {dense[0].chip} is the nearest: within 20 % on "
              + ", ".join(k.replace("_ms", "").replace("_s", "").replace("_", " ") for k in near)
              + "; its p99 TTFT is the second round of 64 long prompts queued behind the first, and follows the "
              "prefill rate.", ""]
    return "\n".join(lines)
