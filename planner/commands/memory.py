"""`plan memory`: one deployment's per-rank memory, as the spec prints it; `plan models`,
`plan chips`: what the tool knows."""

from __future__ import annotations

import json

import click

from planner import numbers as fmt
from planner.commands import ranges
from planner.commands.flags import check_options, memory_flag, names_flags
from planner.commands.plan import acceptance_option, vllm_version_option
from planner.commands.registry_option import command_console, command_registry, registry_option, step_model_option
from planner.limits import MAX_MEMORY, MAX_SPECULATIVE, MIN_MEMORY
from planner.numbers import count, number
from planner.report.memory import render_memory
from planner.report.tables import Col, csv_text, print_table
from pricing.chips import chip_ids, get_chip
from pricing.config.quantization import methods_help
from pricing.errors import render
from pricing.units import GiB


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
        click.option("--num-speculative-tokens", type=ranges.at_least(0, high=MAX_SPECULATIVE), default=0),
        click.option("--speculative-method", help="mtp or dspark, where the model ships it"),
        click.option("--enable-eplb", is_flag=True),
        click.option("--num-redundant-experts", type=ranges.at_least(0), default=0,
                     help="vLLM 0.33 takes it in --eplb-config '{\"num_redundant_experts\": N}'"),
        click.option("--enforce-eager", is_flag=True),
        click.option("--cudagraph-mode", help="NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE"),
        click.option("--kv-cache-memory-bytes", type=ranges.at_least(1), help="fix the KV pool, as vLLM's flag does"),
        click.option("--disable-prefix-caching", "--no-enable-prefix-caching", "enable_prefix_caching", is_flag=True,
                     flag_value=False, default=True, help="vLLM 0.33's spelling; the second is kept as an alias"),
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
@step_model_option
@click.option("--model", required=True, help="model card name, config.json path or cached HF id")
@click.option("--chip", required=True, help="chip id (see `plan chips`)")
@click.option("--quantization", help=methods_help())
@click.option("--memory-bytes", type=ranges.Bounded(int, MIN_MEMORY, MAX_MEMORY),
              help="override the chip's memory as vLLM sees it")
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
@names_flags(memory_flag)
def memory(ctx, model, chip, quantization, memory_bytes, tokens, as_json, show_provenance, vllm_version, batch, isl,
           osl, speculative_acceptance, **flags):
    """One rank's memory for one deployment: the spec's breakdown, the engine's KV cache size
    and maximum concurrency (with --provenance, every registry value used). Exit status 1 with
    vLLM's own error when vLLM would not start it, and when it is not verified to start (no check of
    vLLM's decides it and the kernels that would serve it decline it: "not offered", with why)."""
    from planner.app.api import memory as memory_of
    from planner.heap import freeze_imported

    freeze_imported()
    check_options(ctx)  # an option that cannot apply (planner/commands/flags.py NEEDS)
    report = memory_of(model, chip, quantization, memory_bytes, tokens, vllm_version, batch, isl, osl,
                       speculative_acceptance, command_registry(ctx), **flags)
    kernel, speed = report.kernel, report.step
    for note in report.notes:
        click.echo(f"note: {render(note, memory_flag)}", err=True)
    if not report.starts:  # the answer first: vLLM's reason in one line on stderr, the breakdown after
        from planner.report.memory import refusal_line

        click.echo(refusal_line(report), err=True)
    if as_json:
        out = report.model_dump()
        click.echo(json.dumps(out, indent=2, default=str, ensure_ascii=False))
    else:
        render_memory(report, kernel, command_console(ctx), provenance=show_provenance, named=memory_flag)
        if speed:
            model = f"step model from {speed['step_composition']}" if speed["step_composition"] else "step model"
            click.echo(f"speed ({model}): {fmt.duration(speed['tpot_ms'])} per output token at "
                       f"{count(speed['batch_per_rank'])} requests per rank ({count(speed['context_tokens'])} tokens "
                       f"of context), first token of {fmt.with_article(fmt.tokens(speed['prompt_tokens']))} prompt in "
                       f"{fmt.duration(speed['ttft_ms'])}; {count(speed['output_tokens_per_second'])} output tokens/s "
                       f"per instance, {count(speed['output_tokens_per_second_per_gpu'])} per GPU; the step is "
                       f"{speed['step_bound']}-bound")
            if speed["speculative"]:
                click.echo(f"speculative decoding: {speed['speculative']}")
    if not report.starts:
        ctx.exit(1)


TABLE_FORMATS = click.Choice(["table", "csv"])
MODEL_COLUMNS = (Col("name", "name"), Col("Hugging Face id", "name", drop=1), Col("format", "name", drop=2),
                 Col("description", "text", drop=3))
CHIP_COLUMNS = (Col("id", "name"), Col("name", "text", drop=4), Col("generation", "name", drop=3),
                Col("memory (GiB)"), Col("GPUs/node", drop=2), Col("tp within", "text", drop=5), Col("$/GPU-hour"),
                Col("as of", "name", drop=1))


@click.command()
@registry_option
@click.option("--json", "as_json", is_flag=True)
@click.option("--format", "fmt", type=TABLE_FORMATS, default="table", show_default=True)
@names_flags()
@click.pass_context
def models(ctx, as_json, fmt):
    """The model cards the project ships (--model takes the name)."""
    from pricing.config import list_cards, resolve
    from pricing.config.dtypes import model_dtype
    from pricing.config.quantization import served_format

    cards = list_cards()
    for c in cards:
        source = resolve(c["name"], command_registry(ctx))
        c["format"] = served_format(source.config, source.hf_quant_config, model_dtype(source.config), source.origin)
    if as_json:
        click.echo(json.dumps(cards, indent=2, ensure_ascii=False))
        return
    rows = [[c["name"], c["hf_id"], c["format"], c["description"]] for c in cards]
    if fmt == "csv":
        click.echo(csv_text(MODEL_COLUMNS, rows), nl=False)
        return
    print_table(command_console(ctx), "model cards (format: the checkpoint's quantization as vLLM 0.33 serves it)",
                MODEL_COLUMNS, rows, csv_hint=True)


@click.command()
@registry_option
@click.option("--json", "as_json", is_flag=True)
@click.option("--format", "fmt", type=TABLE_FORMATS, default="table", show_default=True)
@names_flags()
@click.pass_context
def chips(ctx, as_json, fmt):
    """The chips the project knows, with the memory vLLM sees, how their GPUs connect and a
    default price (`*`: an estimate, dated in the footnote)."""
    rows = [get_chip(c, command_registry(ctx)) for c in chip_ids()]
    if as_json:
        click.echo(json.dumps([{"id": c.id, "name": c.name, "generation": c.generation, "memory_bytes": c.memory_bytes,
                                "nvlink_domain": c.nvlink_domain, "gpus_per_node": c.gpus_per_node,
                                "interconnect": c.interconnect, "tp_domain": c.tp_domain, "fp8": c.fp8,
                                "fp4": c.fp4, "price_per_gpu_hour": c.price_per_gpu_hour,
                                "price_estimate": c.price_estimate, "price_as_of": c.price_as_of,
                                "sources": {p.name.rsplit(".", 1)[-1]: p.source for p in c.provenance}}
                               for c in rows], indent=2, ensure_ascii=False))
        return
    cells = [[c.id, c.name, c.generation, number(c.memory_bytes / GiB), count(c.gpus_per_node),
              f"{c.tp_domain} over {c.tp_link}" if c.tp_domain > 1 else "1 (one GPU per node)", c.price_label,
              c.price_as_of] for c in rows]
    if fmt == "csv":
        click.echo(csv_text(CHIP_COLUMNS, cells), nl=False)
        return
    console = command_console(ctx)
    print_table(console, "chips", CHIP_COLUMNS, cells, csv_hint=True)
    console.print("* an estimate, not a quote (dated in 'as of'); give your own with --price. A chip without NVLink "
                  "runs tensor parallelism over PCIe within a node, as vLLM allows. Sources: `plan chips --json`.")
