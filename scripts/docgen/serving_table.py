"""docs/serving.md's serving-simulator validation table, from validation/vllm_serving_runs.yaml:

    python scripts/docs.py --only serving-table   # rewrite it in docs/serving.md, between its markers
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "scripts" / "docgen")]

TOLERANCE = 0.10  # the bar: within 10 % on p50 and p99 TTFT and TPOT

from pricing.serving.simulate import Instance  # noqa: E402
from pricing.serving.validation import FIGURES, compared, runs  # noqa: E402
from pricing.step import StepModel  # noqa: E402


def rows() -> list[tuple]:
    """(run, simulated, errors) for every run."""
    return [(run, *compared(run)) for run in runs()]


SHOWN = ("duration_s", *FIGURES)  # a run's table cells: its duration (s), then the four figures (ms)


def _ms(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def figure_cells(run, sim: dict, err: dict) -> list[str]:
    """A run's SHOWN figures as the docs' tables print them: measured / simulated (error)."""
    return [f"{run.measured[k]:,.1f} / {sim[k]:,.1f} ({err[k]:+.0%})" if k == "duration_s"
            else f"{_ms(run.measured[k])} / {_ms(sim[k])} ({err[k]:+.0%})" for k in SHOWN]


def vllm_factors():
    """vLLM's CUDA factors (step_model.yaml engines.vllm), which these NVIDIA runs are priced at."""
    from pricing.step.rates import Efficiency

    return Efficiency.from_registry(None, "vllm")


def matches(errors: dict[str, float]) -> bool:
    """Whether a run's simulation is within TOLERANCE on the four figures the issue names (p50 and p99
    TTFT and TPOT); its duration and ITL are shown, not judged."""
    return all(abs(errors[k]) <= TOLERANCE for k in FIGURES)


FIGURE_HEADS = ("duration", "p50 TTFT", "p99 TTFT", "p50 TPOT", "p99 TPOT", "all four within 10 %")


def figure_table(heads: list[str], table, lead) -> list[str]:
    """A serving table's header, alignment and one row per (run, simulated, errors): the run's own
    leading cells (`lead(run)`, under `heads`), its measured / simulated figures, and whether all four
    match."""
    lines = ["| " + " | ".join([*heads, *FIGURE_HEADS]) + " |",
             "| " + " | ".join(["---"] * len(heads) + ["---:"] * len(SHOWN) + ["---"]) + " |"]
    for run, sim, err in table:
        lines.append("| " + " | ".join([*lead(run), *figure_cells(run, sim, err), "yes" if matches(err) else "no"])
                     + " |")
    return lines


def matched(table) -> str:
    """How many of the table's runs match on all four figures."""
    return f"{sum(matches(e) for _, _, e in table)} of {len(table)} runs are within 10 % on all four figures"


def median_errors(table) -> str:
    """The median |error| of each of the four figures over (run, simulated, errors) rows, as printed."""
    return ", ".join(f"{k.replace('_ms', '').replace('_', ' ')} {statistics.median(abs(e[k]) for _, _, e in table):.0%}"
                     for k in FIGURES)


def _share(table, keep) -> str:
    rows = [(r, e) for r, _, e in table if keep(r)]
    ok = sum(matches(e) for _, e in rows)
    return f"{ok} of {len(rows)}"


def _span(table, model: str, chip: str = "a100-80gb") -> str:
    """The range of p99 TTFT errors of `model`'s long-prompt runs on `chip`."""
    errors = sorted(e["p99_ttft_ms"] for r, _, e in table
                    if r.model == model and r.chip == chip and r.benchmark["input_len"] >= 2000)
    return f"{errors[0]:+.0%}" if len(errors) == 1 else f"{errors[0]:+.0%} to {errors[-1]:+.0%}"


def _prefill_floor(run) -> float:
    """The least fraction of its chip's bf16 peak each GPU ran the prompts' FLOPs at (the step
    model's count for one prompt, times the prompts, over the whole measured duration)."""
    peak = StepModel(run.kernel()).rates.bf16_flops
    return run.prefill_flops() * run.benchmark["num_prompts"] / run.measured["duration_s"] / peak


def _floors(table) -> tuple[str, str]:
    """Per model, release and chip, the range of `_prefill_floor` over its long-prompt runs; and,
    for a model and release on two chips with the same prompts, how many times the one fraction
    is the other."""
    floors = {(r.model, r.release, r.chip, r.benchmark["input_len"], r.benchmark["output_len"]): _prefill_floor(r)
              for r, _, _ in table if r.benchmark["input_len"] >= 2000}
    spans: dict[tuple, list[float]] = {}
    for (model, release, chip, _, _), f in floors.items():
        spans.setdefault((model, release, chip), []).append(f)
    parts = []
    for (model, release, chip), values in spans.items():
        low, high = f"{min(values):.0%}", f"{max(values):.0%}"
        parts.append(f"{model} ({release}) on {chip} {low if low == high else f'{low} to {high}'}")
    pairs = []
    for (model, release, chip, isl, osl), f in floors.items():
        for (m2, r2, c2, i2, o2), g in floors.items():
            if (m2, r2, i2, o2) == (model, release, isl, osl) and c2 > chip:
                hi, lo, chips = (f, g, (chip, c2)) if f >= g else (g, f, (c2, chip))
                pairs.append(f"{model} {isl:,}/{osl} on {chips[0]} {hi / lo:.1f} times its fraction on {chips[1]}")
    return "; ".join(parts), "; ".join(pairs)


def _refused(table) -> str:
    """The runs vLLM 0.33 would not start: the check, and the KV pool 0.33 computes for each."""
    refused = [r for r, _, _ in table if r.refusal() is not None]
    if not refused:
        return ""
    pools = sorted({(r.model, r.chip, Instance.of(r.kernel())) for r in refused}, key=lambda x: x[:2])
    checks = sorted({r.refusal().check for r in refused})
    return (f"- \\* {len(refused)} runs vLLM 0.33 with its defaults would not start (its check "
            f"{', '.join(checks)}: one request of max_model_len needs more KV cache than the pool 0.33 computes: "
            + ", ".join(f"{m} on {c} {i.max_model_len:,} tokens against {i.blocks * i.block_size:,}"
                        for m, c, i in pools)
            + "); the run's own release started them, so its pool was larger. They are simulated on 0.33's pool.")


def _recipe_tpot_ms() -> float:
    """The step model's steady TPOT for vLLM's Nemotron-3-Nano recipe run: FP8 on one H200, 1,024 requests of
    1,024/1,024 tokens at once (max_num_seqs 1,024, vLLM's default on an H200, which the recipe's server
    command leaves)."""
    from pricing.chips import get_chip
    from pricing.graph import load_model
    from pricing.kernel import Deployment, Kernel
    from pricing.step.serving import Workload, serving

    kernel = Kernel.of(load_model("nemotron-3-nano-30b-a3b", "fp8"), Deployment(max_num_seqs=1024), get_chip("h200"))
    return serving(StepModel(kernel), 1024, 1024 + 512, Workload(1024, 1024)).tpot_seconds * 1e3


def _across_all(table) -> str:
    """One line over the three files of public runs (this table's, the spot check's, the published ones):
    how many match on all four figures, and which."""
    from pricing.serving.validation import PUBLISHED, SPOT_CHECK

    every = [*table, *((run, *compared(run)) for path in (SPOT_CHECK, PUBLISHED) for run in runs(path))]
    hits = [run for run, _, err in every if matches(err)]
    kinds: dict[tuple, list] = {}
    for run in hits:
        command = (run.benchmark["input_len"], run.benchmark["output_len"], tuple(sorted(run.deployment.items())))
        kinds.setdefault((run.model, run.chip, run.release), []).append(command)

    def said(key, commands) -> str:
        model, chip, release = key
        distinct = len(set(commands))
        again = f", {distinct} commands measured again on other hosts or days" if distinct < len(commands) else ""
        return f"{len(commands)} of {model} on {chip}, {release}{again}"

    return (f"**All the public runs below, none of them in the step model's fit: {len(hits)} of {len(every)} within "
            "10 % on p50 and p99 TTFT and TPOT** ("
            + "; ".join(said(k, c) for k, c in sorted(kinds.items(), key=lambda kv: -len(kv[1])))
            + "; `tests/test_serving_validation.py` recomputes them).")


def _unfitted_gemms(table, eff) -> str:
    """The runs' prefill GEMM kernels (the format running most of a prompt's FLOPs, on the run's chip
    generation) that `gemm_kernels` has no entry for, by format."""
    fitted = {(k.generation, k.fmt) for k in eff.gemm_kernels}
    missing: dict[str, set[str]] = {}
    for run, _, _ in table:
        model = StepModel(run.kernel())
        flops = model.prompt_flops_by_format()
        key = eff.gemm_kernel(model.kernel.chip.generation, max(flops, key=flops.get)).key
        if key not in fitted:
            missing.setdefault(key[1], set()).add(key[0])
    return "; ".join(f"{fmt} on {', '.join(sorted(gens))}" for fmt, gens in sorted(missing.items()))


def _lead(run) -> list[str]:
    """A GPUStack run's leading cells: its link (model, chip, tp and flags, lengths, requests) and release."""
    b, d = run.benchmark, run.deployment
    tp = d.get("tensor_parallel_size", 1)
    extra = "".join(f" {k}" for k, on in (("pp" + str(d.get("pipeline_parallel_size", "")),
                                             d.get("pipeline_parallel_size", 1) > 1),
                                            ("ep", d.get("enable_expert_parallel")),
                                            ("async", d.get("async_scheduling"))) if on)
    extra += f" mnbt {d['max_num_batched_tokens']}" if "max_num_batched_tokens" in d else ""
    refused = " \\*" if run.refusal() is not None else ""
    name = f"{run.model}, {run.chip}, tp{tp}{extra}, {b['input_len']}/{b['output_len']}, {b['num_prompts']}"
    return [f"[{name}]({run.url})", f"{run.release}{refused}"]


def section() -> str:
    table = rows()
    eff = vllm_factors()
    chips = sorted({r.chip for r, _, _ in table})
    short = [(r, s) for r, s, _ in table if r.benchmark["output_len"] <= 4]
    long_ = [(r, s) for r, s, _ in table if r.benchmark["input_len"] >= 2000]
    ratio = sorted(r.measured["duration_s"] / s["duration_s"] for r, s in short if r.chip != "a100-80gb")
    floors, pairs = _floors(table)
    lines = [_across_all(table), "",
             f"**Against public `vllm bench serve` runs.** `validation/vllm_serving_runs.yaml`: {len(table)} fully "
             "stated runs from GPUStack's performance lab (`scripts/collectors/gpustack_serving_runs.py`: the "
             "document's hardware, vLLM release and `vllm serve` command, the client's `--backend openai-chat "
             "--endpoint "
             "/v1/chat/completions`, a random dataset of fixed lengths with every request sent at once, "
             "`--num-prompts N --seed 42`), each simulated with vLLM 0.33's defaults for what the command leaves "
             "out. None of them is in the step model's fit. Measured / simulated, in ms (duration in s):", "",
             *figure_table(["run (model, chip, tp, input/output tokens, requests)", "release"], table, _lead)]
    lines += ["", matched(table) + " (by chip: "
              + ", ".join(f"{c} {_share(table, lambda r, c=c: r.chip == c)}" for c in chips)
              + f"; prompts of 2,000 tokens or more {_share(table, lambda r: r.benchmark['input_len'] >= 2000)}, "
              f"128-token prompts of 4 output tokens {_share(table, lambda r: r.benchmark['output_len'] <= 4)}); "
              "median |error|: "
              + median_errors(table)
              + ". Where it misses:", "",
              f"- With every request sent at once, a run of long prompts ({len(long_)} here) queues for admission: "
              "p50 and p99 TTFT are about half and all of the duration, and TPOT is the step of decodes beside "
              "a prompt's chunk, so these four figures follow the engine's prefill throughput (the duration "
              "column); the step model prices a prompt's GEMMs at vLLM's effective prefill efficiency for their "
              "format and chip generation (`gemm_kernels`: "
              + "; ".join(f"{k.fmt} on {k.generation} {k.tensor_compute:g}" for k in eff.gemm_kernels)
              + f"), fitted on silicon rows of at most 4 requests, or the throughput fit's {eff.tensor_compute:g} "
              f"of peak for a format and generation that has none ({_unfitted_gemms(table, eff)}): fitted on "
              "points where decoding dominates, which hardly constrain it.",
              f"- 128-token prompts of 4 output tokens ({len(short)} runs): off the A100, the measured duration is "
              f"{ratio[0]:.1f} to {ratio[-1]:.1f} times the simulated: per-request work outside the engine step "
              "(the API server's HTTP, chat template, tokenizing and detokenizing, which `vllm bench serve` "
              f"times). The step model adds the API server's time to each first token as a latency "
              f"({eff.first_token_seconds * 1e3:.0f} ms, fitted on silicon rows of at most 4 requests), not as "
              "a server that a burst of a thousand requests queues for, one at a time.",
              "- A100 (no vLLM throughput point on it in the step model's fit): on prompts of 2,000 tokens or "
              "more, dense Qwen3-32B's p99 TTFT is "
              f"{_span(table, 'qwen3-32b')} in the simulator, gpt-oss-120b's (MXFP4 weights, served weight-only on "
              f"Ampere) {_span(table, 'gpt-oss-120b')}: one fraction of the chip's peak cannot serve both.",
              "- Prefill takes at most a run's whole duration, so the prompts' FLOPs (the step model's count) over "
              "the measured duration are a floor on the fraction of the chip's bf16 peak each GPU reached, "
              f"long-prompt runs: {floors}. With the same prompts, {pairs}. At the one fraction the step model "
              "prices every chip's prefill at (`tensor_compute`), Qwen3-32B's p99 TTFT there is "
              f"{_span(table, 'qwen3-32b')} on the A100 and {_span(table, 'qwen3-32b', 'h100')} on the H100: the "
              "fraction reached differs by chip for one model and release, as it does by model on one chip.",
              "- Releases before 0.33 (each run's own) and the chat template's tokens (the engine prefills them; "
              "the client's input count leaves them out; not stated per run).",
              *([_refused(table)] if _refused(table) else []),
              "",
              "Each step is priced at vLLM's own factors (`step_model.yaml` `engines.vllm`: six throughput points at "
              "a fixed concurrency, then the overheads, fused-MoE kernels and MLA floor refitted on the silicon rows' "
              "TPOT below, the API server's time and GEMM kernels on their TTFT; none of these runs is among them).",
              "",
              "Other public vLLM serving runs looked at and left out, for want of a stated release, server command or "
              "output length: InferenceX's dashboard fixture (SemiAnalysisAI/InferenceX-app, "
              "`cypress/fixtures/api/benchmarks.json` at 3a600f1, every record read: DeepSeek-R1 on SGLang, "
              "TensorRT-LLM, Dynamo and ATOM only, no vLLM run); InferenceX's own repository, every branch and pull "
              "request ref (its `token_position_decode_slo` results run a nightly image with no server command, and "
              "`together_runner`'s gpt-oss B200 files report a 197 ms median end-to-end latency for 1,024 output "
              "tokens at 6.2 ms per token, so their outputs were not the length stated); vLLM's recipes, every "
              "version and pull request head (their result blocks name no release, but for two: AMD's Llama-3.3-70B "
              "on one MI355X, below, and Nemotron-3-Nano-30B-A3B FP8 on one H200 with v0.12.0, 1,024 concurrent "
              "requests of 1,024/1,024 tokens, where the step model's steady TPOT at that concurrency, "
              f"{_recipe_tpot_ms():.0f} ms, is {_recipe_tpot_ms() / 61 - 1:+.0%} against the measured 61 ms (not a "
              "run here: the FP8 checkpoint's config, which layers it keeps in BF16, is in no public copy at hand, so "
              "the BF16 card served as FP8 stands in for it); its "
              "DeepSeek-R1 runs on MI300X name only the `rocm/vllm:latest` image); GPUStack's newer documents "
              "(Qwen3.5), measured with guidellm, not `vllm bench serve`; vLLM's own pull requests and issues (their "
              "result blocks seldom come with the GPU, the server command and the release together; one that does "
              "is below); dstackai/benchmarks (ShareGPT and sonnet datasets); btbtyler09/mi100-llm-testing (Qwen3 on "
              "AMD MI100, a chip the registry does not rate, one of its two runs cut short without --ignore-eos); "
              "AMD's ROCm blogs, ROCm/MAD and the ROCm documentation's performance pages (plots, offline throughput "
              "and `benchmark_latency` tables, no serving percentiles); llm-d's benchmark results (several replicas "
              "behind a router, or prefill and decode apart, on shared-prefix workloads); the vLLM blog (tables of "
              "medians, or figures). The runs of vLLM's own performance spot check, and those published one or two "
              "at a time, are below.",
              ""]
    return "\n".join(lines)
