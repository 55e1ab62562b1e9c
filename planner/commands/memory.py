"""`plan memory`: one deployment's per-rank memory, as the spec prints it; `plan models`,
`plan chips`: what the tool knows."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table

from planner.commands import ranges
from planner.commands.plan import acceptance_option, unused_acceptance, vllm_version_option
from planner.commands.registry_option import registry_option
from pricing.chips import chip_ids, get_chip
from pricing.config.quantization import methods_help
from pricing.units import GiB, block_unit, in_unit, size

if TYPE_CHECKING:  # pragma: no cover
    from pricing.kernel import Kernel


def _partition(ctx, param, value):
    """'16,16' -> (16, 16), as vLLM parses VLLM_PP_LAYER_PARTITION."""
    if value is None:
        return None
    from pricing.errors import InputError

    try:
        return tuple(int(part) for part in value.split(","))
    except ValueError:
        raise InputError("--pp-layer-partition", f"{value!r} is not a list of layer counts",
                         "give one count per stage, for example 16,16") from None


def vllm_flags(f):
    """vLLM 0.33's own flags, as `vllm serve` spells them."""
    options = [
        click.option("--tensor-parallel-size", "-tp", "--tp", "tensor_parallel_size",
                     type=ranges.at_least(1), default=1, show_default=True),
        click.option("--pipeline-parallel-size", "-pp", "--pp", "pipeline_parallel_size", type=ranges.at_least(1),
                     default=1, show_default=True, help="pipeline stages (layers split as vLLM's get_pp_indices)"),
        click.option("--pp-layer-partition", "pp_layer_partition", callback=_partition, metavar="N,N,...",
                     help="layers per stage, as VLLM_PP_LAYER_PARTITION sets them"),
        click.option("--data-parallel-size", "-dp", "--dp", "data_parallel_size",
                     type=ranges.at_least(1), default=1, show_default=True),
        click.option("--enable-expert-parallel", is_flag=True),
        click.option("--decode-context-parallel-size", "-dcp", "--dcp", "decode_context_parallel_size",
                     type=ranges.at_least(1), default=1),
        click.option("--prefill-context-parallel-size", "-pcp", "--pcp", "prefill_context_parallel_size",
                     type=ranges.at_least(1), default=1),
        click.option("--gpu-memory-utilization", type=ranges.fraction(), help="default 0.92 (vLLM 0.33)"),
        click.option("--max-num-batched-tokens", type=ranges.at_least(1), help="default by chip memory (vLLM 0.33)"),
        click.option("--max-num-seqs", type=ranges.at_least(1), help="default by chip memory (vLLM 0.33)"),
        click.option("--max-model-len", type=ranges.at_least(1), help="default: the model's maximum"),
        click.option("--kv-cache-dtype", default="auto", show_default=True),
        click.option("--block-size", type=ranges.at_least(1),
                     help="tokens per KV block (default: the attention backend's)"),
        click.option("--num-speculative-tokens", type=ranges.at_least(0), default=0),
        click.option("--speculative-method", help="mtp or dspark, where the model ships it"),
        click.option("--enable-eplb", is_flag=True),
        click.option("--num-redundant-experts", type=ranges.at_least(0), default=0),
        click.option("--enforce-eager", is_flag=True),
        click.option("--cudagraph-mode", help="NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE"),
        click.option("--kv-cache-memory-bytes", type=ranges.at_least(1), help="fix the KV pool, as vLLM's flag does"),
        click.option("--no-enable-prefix-caching", "enable_prefix_caching", is_flag=True, flag_value=False,
                     default=True),
        click.option("--no-async-scheduling", "async_scheduling", is_flag=True, flag_value=False, default=True),
        click.option("--mamba-cache-mode", type=click.Choice(["none", "align", "all"])),
        click.option("--mega-attention/--no-mega-attention", default=None,
                     help="DeepSeek-V4.1 on SM100: force the mega-attention backend on or off"),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@click.command()
@registry_option
@click.option("--model", required=True, help="model card name, config.json path or cached HF id")
@click.option("--chip", required=True, help="chip id (see `plan chips`)")
@click.option("--quantization", help=methods_help())
@click.option("--memory-bytes", type=ranges.at_least(1), help="override the chip's memory as vLLM sees it")
@click.option("--tokens", type=ranges.at_least(0), default=4096, show_default=True,
              help="length of the request to price")
@click.option("--json", "as_json", is_flag=True, help="one JSON object with integer bytes (provenance included)")
@click.option("--provenance", "show_provenance", is_flag=True, help="also print every registry value used")
@click.option("--batch", type=ranges.at_least(1),
              help="requests each rank decodes at once, for the step time (default: all it holds)")
@click.option("--isl", type=ranges.at_least(1),
              help="mean input tokens (with --osl: price the step for that workload)")
@click.option("--osl", type=ranges.at_least(1), help="mean output tokens (with --isl)")
@acceptance_option()
@vllm_version_option()
@vllm_flags
@click.pass_context
def memory(ctx, model, chip, quantization, memory_bytes, tokens, as_json, show_provenance, vllm_version, batch, isl,
           osl, speculative_acceptance, **flags):
    """One rank's memory for one deployment: the spec's breakdown, the engine's KV cache size
    and maximum concurrency (with --provenance, every registry value used). Exit status 1, with
    vLLM's own error, when vLLM would not start it."""
    from planner.heap import freeze_imported
    from pricing.errors import InputError
    from pricing.graph import load_model
    from pricing.kernel import Deployment, Kernel
    from pricing.kernel.report import memory_report

    freeze_imported()
    if tokens < 0:
        raise InputError("--tokens", f"must not be negative, got {tokens}", "give a request length in tokens")
    graph = load_model(model, quantization)
    target = get_chip(chip).with_overrides(memory_bytes=memory_bytes)
    kernel = Kernel.of(graph, Deployment(**flags), target, release=vllm_version)
    report = memory_report(kernel, tokens)
    for note in unused_acceptance(speculative_acceptance, kernel.engine.spec_tokens):
        click.echo(f"note: {note}", err=True)
    speed = step_speed(kernel, tokens, batch, isl, osl, speculative_acceptance) if report.starts else None
    if as_json:
        out = report.model_dump()
        out["step"] = speed
        click.echo(json.dumps(out, indent=2, default=str))
    else:
        render_memory(report, kernel, provenance=show_provenance)
        if speed:
            click.echo(f"speed (step model): {speed['tpot_ms']:,.1f} ms per output token at {speed['batch_per_rank']} "
                       f"requests per rank ({speed['context_tokens']:,} tokens of context), first token of a "
                       f"{speed['prompt_tokens']:,}-token prompt in {speed['ttft_ms']:,.1f} ms; "
                       f"{speed['output_tokens_per_second']:,.0f} output tokens/s per instance, "
                       f"{speed['output_tokens_per_second_per_gpu']:,.0f} per GPU; the step is "
                       f"{speed['step_bound']}-bound")
            if speed["speculative"]:
                click.echo(f"speculative decoding: {speed['speculative']}")
    if not report.starts:
        ctx.exit(1)


def step_speed(kernel, tokens: int, batch: int | None, isl: int | None, osl: int | None,
               rates_accepted: tuple[float, ...] | None = None) -> dict | None:
    """The step model's figures for this deployment (None when the chip has no peak rates):
    `batch` requests per rank (default: what one rank holds) at `tokens` of context, or at the
    workload's mean context with --isl/--osl; speculating, at `rates_accepted` (default: the
    registry's acceptance)."""
    from planner.step_fields import step_fields
    from pricing.errors import InputError
    from pricing.step import StepModel, has_rates
    from pricing.step.serving import Workload, serving

    if (isl is None) != (osl is None):
        missing, given = ("--isl", "--osl") if isl is None else ("--osl", "--isl")
        raise InputError(missing, f"is required with {given}", "give both the mean input and output tokens")
    if batch is not None and batch < 1:
        raise InputError("--batch", f"must be at least 1, got {batch}", "give requests per rank")
    if not has_rates(kernel.chip):
        return None
    b = batch or max(1, min(kernel.engine.max_num_seqs, kernel.requests_held() or 1))
    wl = Workload(isl, osl) if isl else None
    context = max(1, tokens)
    s = serving(StepModel(kernel, rates_accepted=rates_accepted), b, context, wl)
    return {**step_fields(s, b, wl.mean_context if wl else context, wl.isl if wl else context),
            "requests_per_second": round(s.requests_per_second, 3) if s.requests_per_second else None}


def console_for_output(width: int = 140) -> Console:
    """A console that does not wrap tables at 80 columns when writing to a file or pipe."""
    probe = Console()
    return Console(highlight=False, width=None if probe.is_terminal else width)


def layer_span(ids) -> str:
    """'layers 2, 8, 14, 20 (8 caches)' from cache ids such as 'layers.2.attn.compressed'."""
    numbers = sorted({int(part.split(".")[1]) for part in ids if part.startswith("layers.")})
    if not numbers:
        return f"{len(ids)} caches"
    runs, start = [], numbers[0]
    for a, b in zip(numbers, numbers[1:] + [None], strict=True):
        if b != a + 1:
            runs.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return f"layers {', '.join(runs)} ({len(ids)} caches)"


def render_memory(r, kernel: Kernel, console: Console | None = None, provenance: bool = False) -> None:
    """The per-rank breakdown; memory in GiB (MiB under 1 GiB), never a negative byte count."""
    console = console or console_for_output()
    e = kernel.engine
    console.print(f"[bold]{r.model}[/bold] ({r.hf_id}, from {kernel.model.origin or 'the model graph'}) on "
                  f"{kernel.chip.name}, {size(r.chip_memory)} seen by vLLM", soft_wrap=True, markup=True)
    console.print(f"tp {e.tp}, " + (f"pp {e.pp}, " if e.pp > 1 else "") + f"dp {e.dp}, ep {'on' if e.ep else 'off'}, "
                  f"dcp {e.dcp}; utilization "
                  f"{e.gpu_memory_utilization}, max_num_batched_tokens {e.max_num_batched_tokens}, max_num_seqs "
                  f"{e.max_num_seqs}, max_model_len {e.max_model_len}, kv_cache_dtype {e.kv_cache_dtype}, "
                  f"cudagraph_mode {e.cudagraph_mode}"
                  + (f", speculative {e.spec_method} × {e.spec_tokens}" if e.spec_method else ""), soft_wrap=True)
    if r.pipeline:
        render_stages(r.pipeline, console)
    f = r.fixed
    rows = [("weights", f.weights), ("activations", f.activation_peak), ("CUDA graphs", f.cuda_graph),
            ("comm buffers", f.comm_buffers), ("EPLB", f.eplb_redundant), ("non-torch", f.non_torch),
            ("fixed per rank", f.total), ("before the budget", r.pre_snapshot)]
    unit = block_unit(value for _, value in rows)  # one unit for the whole block, as the spec prints it
    console.print()
    for name, value in rows:
        console.print(f"{name:<17} {in_unit(value, unit):>9}")
    render_checkpoint(r, kernel, console)
    console.print()
    console.print(f"a {r.sequence.tokens:,}-token request: {size(r.sequence.variable, 1)} of KV cache per rank")
    if r.sequence.fixed or r.sequence.admission:
        console.print(f"held regardless of length: {size(r.sequence.fixed)} in steady decode (own pages "
                      f"{size(r.sequence.own_pages_steady)}), {size(r.sequence.admission)} reserved at admission")
    if r.recurrent_state:
        render_recurrent(r.recurrent_state, console)
    if r.activation.buffers:
        console.print("model buffers in the activation peak: " + ", ".join(
            f"{name} {size(value)}" for name, value in r.activation.buffers.items())
            + f" (total {size(r.activation.model_buffers)})", soft_wrap=True)
    console.print()
    pool = (f"KV pool {size(r.kv_pool)}" if not r.short_by else
            f"no KV pool: the fixed memory exceeds the budget by {size(r.short_by)}")
    console.print(f"budget {size(r.budget)}, {pool}, "
                  + (f"{r.num_blocks:,} blocks of {r.block_bytes:,} bytes" if r.grouped else "ungrouped caches"))
    if r.starts:
        console.print(f"GPU KV cache size: {r.kv_cache_tokens:,} tokens, Maximum concurrency for "
                      f"{e.max_model_len:,} tokens per request: {r.max_concurrency:.2f}x")
    console.print(f"cache records: {r.cache_bytes_per_token:,.0f} bytes per token before pages")
    if not r.starts:
        console.print(f"[bold red]vLLM would not start[/bold red] ({r.refusal_check}): {r.refusal}", soft_wrap=True)
        console.print(f"what would fit: {r.would_fit}", soft_wrap=True)
    if len(r.kv_groups) > 1 or any(g.kind != "FullAttentionSpec" for g in r.kv_groups):
        table = Table(title=f"KV cache groups in vLLM's order (one request at max_model_len; page bytes as vLLM "
                            f"{r.vllm_version}'s page_size_bytes of the group)")
        for col in ("group", "spec", "layers", "block tokens", "page bytes", "blocks steady", "blocks admission"):
            table.add_column(col, justify="right" if col not in ("spec", "layers") else "left")
        for i, g in enumerate(r.kv_groups):
            layers = layer_span(g.layers)
            spec = g.spec if g.kind == g.spec else f"{g.spec} ({g.kind})"
            table.add_row(str(i), spec, layers, str(g.block_tokens), f"{g.page_bytes:,}", f"{g.blocks_steady:,}",
                          f"{g.blocks_admission:,}")
        console.print(table)
    if provenance:
        render_provenance(r.provenance, console)


def render_provenance(rows, console: Console) -> None:
    table = Table(title="provenance (every registry value used; `--json` adds how each was obtained)")
    for col, width in (("name", 44), ("value", 36), ("source", None)):
        table.add_column(col, overflow="fold", max_width=width)
    for p in rows:
        p = p if isinstance(p, dict) else {"name": p.name, "value": p.value, "source": p.source}
        table.add_row(p["name"], str(p["value"]), p["source"])
    console.print(table)


def render_checkpoint(r, kernel: Kernel, console: Console) -> None:
    """The weights' served format and the checkpoint's own bytes beside the graph's (issue 10)."""
    quant = kernel.model.quantization
    if quant != "none":
        console.print(f"served as         {quant}, each tensor as vLLM 0.33's {quant} loader allocates it")
    kv = kernel.model.extras.get("checkpoint_kv_cache")
    if kv:
        used = ("they scale this fp8 cache" if kernel.engine.kv_cache_dtype.startswith("fp8") else
                f"the cache here is {kernel.engine.kv_cache_dtype} (the model dtype); vLLM uses the scales only for "
                "an fp8 cache (--kv-cache-dtype fp8)")
        console.print(f"checkpoint KV     the checkpoint states KV-cache scales, {kv}: {used}", soft_wrap=True)
    c = r.checkpoint
    if c is None:
        return
    if not c.found:
        console.print(f"checkpoint        {c.note}", soft_wrap=True)
        return
    console.print(f"checkpoint        {size(c.checkpoint_bytes)} in its files, {size(c.graph_bytes)} in the graph "
                  f"({100 * c.gap:+.2f} %): {c.note}", soft_wrap=True)
    if c.warning:
        console.print(f"[yellow]warning: {c.warning}[/yellow]", soft_wrap=True)
    for u in c.unaccounted[:5]:
        console.print(f"  not in the graph: {u.pattern} ({u.tensors} tensors, {size(u.bytes)})", soft_wrap=True)


def render_stages(p, console: Console) -> None:
    """Every pipeline stage's rank; the breakdown that follows is the binding stage's."""
    table = Table(title=f"pipeline parallel {p.size}: every stage (vLLM plans each and keeps the fewest blocks)")
    for col in ("stage", "layers", "weights", "activations", "CUDA graphs", "fixed", "KV pool", "block bytes",
                "own blocks", ""):
        table.add_column(col, justify="left" if col in ("stage", "layers", "") else "right", no_wrap=True)
    for s in p.stages:
        binding = "binding" if s.index == p.binding_stage else ""
        table.add_row(f"stage {s.index} of {p.size}", f"{s.layers[0]}-{s.layers[1] - 1}", size(s.fixed.weights, 2),
                      size(s.fixed.activation_peak, 2), size(s.fixed.cuda_graph, 2), size(s.fixed.total, 2),
                      size(s.kv_pool, 2), f"{s.block_bytes:,}", f"{s.own_num_blocks:,}", binding)
    console.print(table)
    first = p.stages[p.binding_stage]
    console.print(f"binding: stage {p.binding_stage} of {p.size} (layers {first.layers[0]}-{first.layers[1] - 1}); "
                  "the figures below are its rank's, the KV cache size and concurrency the engine's")


def render_recurrent(s, console: Console) -> None:
    """The recurrent state of a hybrid, apart from the KV cache: its own bytes and the pool pages it takes."""
    where = "a page per block of context, counted with the KV cache" if s.mode == "all" else "held regardless of length"
    console.print(f"recurrent state ({', '.join(s.kinds)}, mode {s.mode}, {where}): {s.layers} layers × "
                  f"{s.state_bytes:,} bytes = {size(s.request_bytes)} per request per rank; {s.pages} page(s) "
                  f"per layer of {s.page_bytes:,} bytes (padded to the attention page of {s.attention_block_tokens:,} "
                  f"tokens), {size(s.held_bytes)} of pool blocks in {s.groups} groups", soft_wrap=True)


@click.command()
@registry_option
@click.option("--json", "as_json", is_flag=True)
def models(as_json):
    """The model cards the project ships (--model takes the name)."""
    from pricing.config import list_cards, resolve
    from pricing.config.quantization import served_format
    from pricing.graph.common import model_dtype

    cards = list_cards()
    for c in cards:
        source = resolve(c["name"])
        c["format"] = served_format(source.config, source.hf_quant_config, model_dtype(source.config), source.origin)
    if as_json:
        click.echo(json.dumps(cards, indent=2))
        return
    table = Table(title="model cards (format: the checkpoint's quantization as vLLM 0.33 serves it)")
    for col in ("name", "Hugging Face id", "format", "description"):
        table.add_column(col)
    for c in cards:
        table.add_row(c["name"], c["hf_id"], c["format"], c["description"])
    Console().print(table)


@click.command()
@registry_option
@click.option("--json", "as_json", is_flag=True)
def chips(as_json):
    """The chips the project knows, with the memory vLLM sees, how their GPUs connect and a
    default price (`*`: an estimate, dated in the footnote)."""
    rows = [get_chip(c) for c in chip_ids()]
    if as_json:
        click.echo(json.dumps([{"id": c.id, "name": c.name, "generation": c.generation, "memory_bytes": c.memory_bytes,
                                "nvlink_domain": c.nvlink_domain, "gpus_per_node": c.gpus_per_node,
                                "interconnect": c.interconnect, "tp_domain": c.tp_domain, "fp8": c.fp8,
                                "fp4": c.fp4, "price_per_gpu_hour": c.price_per_gpu_hour,
                                "price_estimate": c.price_estimate, "price_as_of": c.price_as_of,
                                "sources": {p.name.rsplit(".", 1)[-1]: p.source for p in c.provenance}}
                               for c in rows], indent=2))
        return
    table = Table(title="chips")
    for col in ("id", "name", "generation", "memory (GiB)", "GPUs/node", "tp within", "$/GPU-hour", "as of"):
        table.add_column(col, justify="right" if col in ("memory (GiB)", "GPUs/node", "$/GPU-hour") else "left",
                         no_wrap=col != "name")
    for c in rows:
        table.add_row(c.id, c.name, c.generation, f"{c.memory_bytes / GiB:.2f}", str(c.gpus_per_node),
                      f"{c.tp_domain} over {c.tp_link}" if c.tp_domain > 1 else "1 (one GPU per node)",
                      c.price_label, c.price_as_of)
    console = console_for_output()
    console.print(table)
    console.print("* an estimate, not a quote (dated in 'as of'); give your own with --price. A chip without NVLink "
                  "runs tensor parallelism over PCIe within a node, as vLLM allows. Sources: `plan chips --json`.")
