"""One deployment's per-rank memory as the spec prints it: the breakdown, the pipeline's stages, the
checkpoint beside the graph, the recurrent state, the KV cache groups and the provenance."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box as boxes
from rich.console import Console

from planner.numbers import block_unit, exact, exact_size, in_unit, size, tokens, with_article
from planner.report.tables import Col, print_table, unwrapped
from pricing.errors import mention, render
from pricing.rules import get as get_release

if TYPE_CHECKING:  # pragma: no cover
    from pricing.kernel import Kernel


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


def render_memory(r, kernel: Kernel, console: Console, provenance: bool = False, named=None) -> None:
    """The per-rank breakdown; memory in GiB (MiB under 1 GiB), never a negative byte count (a field
    its sentences mention named as `named` calls it: the command's flag)."""
    e = kernel.engine
    served = r.hf_id or "weights not located"
    console.print(f"[bold]{r.model}[/bold] ({served}, from {kernel.model.origin or 'the model graph'}) on "
                  f"{kernel.chip.name}, {size(r.chip_memory)} seen by vLLM", soft_wrap=unwrapped(console), markup=True)
    if kernel.release.rules is not get_release().rules:  # the default pack's output stays as it was
        console.print(f"{kernel.release.served_as}: its KV rules, defaults and fitted memory laws",
                      soft_wrap=unwrapped(console))
    pp = f"pp {e.pipeline_parallel_size}, " if e.pipeline_parallel_size > 1 else ""
    console.print(f"tp {e.tensor_parallel_size}, " + pp + f"dp {e.data_parallel_size}, "
                  f"ep {'on' if e.enable_expert_parallel else 'off'}, "
                  f"dcp {e.decode_context_parallel_size}; utilization "
                  f"{e.gpu_memory_utilization}, max_num_batched_tokens {e.max_num_batched_tokens}, max_num_seqs "
                  f"{e.max_num_seqs}, max_model_len {e.max_model_len}, kv_cache_dtype {e.kv_cache_dtype}, "
                  f"cudagraph_mode {e.cudagraph_mode}"
                  + (f", speculative {e.speculative_method} × {e.num_speculative_tokens}" if e.speculative_method
                     else ""),
                  soft_wrap=unwrapped(console))
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
    render_checkpoint(r, kernel, console, named)
    console.print()
    console.print(f"{with_article(tokens(r.sequence.tokens))} request: {size(r.sequence.variable)} of KV cache per "
                  "rank")
    if r.sequence.fixed or r.sequence.admission:
        console.print(f"held regardless of length: {size(r.sequence.fixed)} in steady decode (own pages "
                      f"{size(r.sequence.own_pages_steady)}), {size(r.sequence.admission)} reserved at admission")
    if r.recurrent_state:
        render_recurrent(r.recurrent_state, console)
    if r.activation.buffers:
        console.print("model buffers in the activation peak: " + ", ".join(
            f"{name} {size(value)}" for name, value in r.activation.buffers.items())
            + f" (total {size(r.activation.model_buffers)})", soft_wrap=unwrapped(console))
    console.print()
    pool = (f"KV pool {size(r.kv_pool)}" if not r.short_by else
            f"no KV pool: the fixed memory exceeds the budget by {size(r.short_by)}")
    console.print(f"budget {size(r.budget)}, {pool}, "
                  + (f"{r.num_blocks:,} blocks of {r.block_bytes:,} bytes" if r.grouped else "ungrouped caches"))
    if not kernel.release.fact(kernel.reg, "graph_estimate_in_budget") and f.cuda_graph:
        console.print(f"the CUDA graphs ({size(f.cuda_graph)}) are captured after the pool is sized, outside the "
                      f"budget ({kernel.release.name})", soft_wrap=unwrapped(console))
    if r.starts:
        console.print(f"GPU KV cache size: {r.kv_cache_tokens:,} tokens, Maximum concurrency for "
                      f"{e.max_model_len:,} tokens per request: {r.max_concurrency:.2f}x")
    console.print(f"cache records: {r.cache_bytes_per_token:,.0f} bytes per token before pages")
    if len(r.kv_groups) > 1 or any(g.kind != "FullAttentionSpec" for g in r.kv_groups):
        print_table(console, f"KV cache groups in vLLM's order (one request at max_model_len; page bytes as vLLM "
                    f"{r.vllm_version}'s page_size_bytes of the group)", GROUP_COLUMNS, kv_group_rows(r),
                    box=boxes.HEAVY_HEAD, records=True)
    if provenance:
        render_provenance(r.provenance, console, named)


GROUP_COLUMNS = [Col("group"), Col("spec", "name"), Col("layers", "name"), Col("block tokens"), Col("page bytes"),
                 Col("blocks steady"), Col("blocks admission")]


def kv_group_rows(r) -> list[list[str]]:
    """The KV cache groups table's cells, one row a group in vLLM's order."""
    return [[str(i), g.spec if g.kind == g.spec else f"{g.spec} ({g.kind})", layer_span(g.layers),
             str(g.block_tokens), f"{g.page_bytes:,}", f"{g.blocks_steady:,}", f"{g.blocks_admission:,}"]
            for i, g in enumerate(r.kv_groups)]


def refusal_line(r) -> str:
    """vLLM's refusal as the one line `plan memory` puts on stderr before the breakdown (exit 1); a
    deployment no check of vLLM's decides and that is not verified to start (check "unverified") is
    said to be not offered, with why, never that vLLM would not start it (exit 1 too)."""
    if r.refusal_check == "unverified":
        return f"plan: not offered (not verified to start): {r.refusal}; what would fit: {r.would_fit}"
    return f"plan: vLLM would not start ({r.refusal_check}): {r.refusal}; what would fit: {r.would_fit}"


def render_provenance(rows, console: Console, named=None) -> None:
    cells = []
    for p in rows:
        p = p if isinstance(p, dict) else {"name": p.name, "value": p.value, "source": p.source}
        cells.append([p["name"], registry_value(p["value"], _names_bytes(p["name"])), p["source"]])
    print_table(console, render(f"provenance (every registry value used; `{mention('json')}` adds how each was "
                                "obtained)", named),
                [Col("name", "name"), Col("value", "text"), Col("source", "text")], cells, box=boxes.HEAVY_HEAD,
                records=True)


def _names_bytes(name: str) -> bool:
    """A registry value is a byte count when its name says so ('chips.chips.h100.memory_bytes',
    'cost_model_memory.activation_floor_bytes'); a rate such as 'sampler_bytes_per_logit' is not."""
    return name.rsplit(".", 1)[-1].endswith("_bytes")


def registry_value(value, in_bytes: bool, inner: bool = False) -> str:
    """A registry value as the provenance table prints it: whole byte counts as `exact_size`, other
    numbers as `exact`, tables and lists element by element, their entries apart by '; ' (a comma
    is a thousands separator: '{1: 0; 2: 1,110,328,582}'); text and true/false as stored."""
    if isinstance(value, bool) or not isinstance(value, int | float | dict | list | tuple):
        return repr(value) if inner else str(value)
    if isinstance(value, dict):
        return "{" + "; ".join(f"{registry_value(k, False, True)}: {registry_value(v, in_bytes, True)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        shown = "; ".join(registry_value(v, in_bytes, True) for v in value)
        return f"[{shown}]" if isinstance(value, list) else f"({shown})"
    return exact_size(value) if in_bytes and isinstance(value, int) else exact(value)


def render_checkpoint(r, kernel: Kernel, console: Console, named=None) -> None:
    """The weights' served format and the checkpoint's own bytes beside the graph's."""
    quant = kernel.model.quantization
    if quant != "none":
        console.print(f"served as         {quant}, each tensor as vLLM 0.33's {quant} loader allocates it")
    kv = kernel.model.extras.get("checkpoint_kv_cache")
    if kv:
        used = ("they scale this fp8 cache" if kernel.engine.kv_cache_dtype.startswith("fp8") else
                f"the cache here is {kernel.engine.kv_cache_dtype} (the model dtype); vLLM uses the scales only for "
                f"an fp8 cache ({render(mention('kv_cache_dtype'), named)} fp8)")
        console.print(f"checkpoint KV     the checkpoint states KV-cache scales, {kv}: {used}",
                      soft_wrap=unwrapped(console))
    c = r.checkpoint
    if c is None:
        return
    if not c.found:
        console.print(f"checkpoint        {c.note}", soft_wrap=unwrapped(console))
        return
    console.print(f"checkpoint        {size(c.checkpoint_bytes)} in its files, {size(c.graph_bytes)} in the graph "
                  f"({100 * c.gap:+.2f}%): {c.note}", soft_wrap=unwrapped(console))
    if c.warning:
        console.print(f"[yellow]warning: {c.warning}[/yellow]", soft_wrap=unwrapped(console))
    for u in c.unaccounted[:5]:
        console.print(f"  not in the graph: {u.pattern} ({u.tensors} tensors, {size(u.bytes)})",
                      soft_wrap=unwrapped(console))


def render_stages(p, console: Console) -> None:
    """Every pipeline stage's rank; the breakdown that follows is the binding stage's."""
    columns = [Col("stage", "name"), Col("layers", "name"), *(Col(h) for h in (
        "weights", "activations", "CUDA graphs", "fixed", "KV pool", "block bytes", "own blocks")),
               Col("", "name")]
    rows = [[f"stage {s.index} of {p.size}", f"{s.layers[0]}-{s.layers[1] - 1}", size(s.fixed.weights),
             size(s.fixed.activation_peak), size(s.fixed.cuda_graph), size(s.fixed.total), size(s.kv_pool),
             f"{s.block_bytes:,}", f"{s.own_num_blocks:,}", "binding" if s.index == p.binding_stage else ""]
            for s in p.stages]
    print_table(console, f"pipeline parallel {p.size}: every stage (vLLM plans each and keeps the fewest blocks)",
                columns, rows, box=boxes.HEAVY_HEAD, records=True)
    first = p.stages[p.binding_stage]
    console.print(f"binding: stage {p.binding_stage} of {p.size} (layers {first.layers[0]}-{first.layers[1] - 1}); "
                  "the figures below are its rank's, the KV cache size and concurrency the engine's")


def render_recurrent(s, console: Console) -> None:
    """The recurrent state of a hybrid, apart from the KV cache: its own bytes and the pool pages it takes."""
    where = "a page per block of context, counted with the KV cache" if s.mode == "all" else "held regardless of length"
    console.print(f"recurrent state ({', '.join(s.kinds)}, mode {s.mode}, {where}): {s.layers} layers × "
                  f"{s.state_bytes:,} bytes = {size(s.request_bytes)} per request per rank; {s.pages} page(s) "
                  f"per layer of {s.page_bytes:,} bytes (padded to the attention page of {s.attention_block_tokens:,} "
                  f"tokens), {size(s.held_bytes)} of pool blocks in {s.groups} groups", soft_wrap=unwrapped(console))
