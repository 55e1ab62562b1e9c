"""vLLM 0.33's start-up checks, in vLLM's own words: whether an instance starts and, when it
does not, the error vLLM raises and what would fit instead.

In the order vLLM meets them:

0. the model's construction: the loader refuses the checkpoint on this chip (the quantization
   method's kernels), or a layer refuses its shard under this split (the release's load checks,
   pricing/rules/load_checks.py: vLLM raises while it builds the model, before any memory is
   profiled).
1. `request_memory` (vllm/v1/worker/utils.py): the free memory at the snapshot (the chip less
   what is held before it) must cover the budget, ceil(total × gpu_memory_utilization).
2. `--kv-cache-memory-bytes` (vllm/v1/worker/gpu_worker.py `determine_available_memory`): the
   pool is taken as given and profiling is skipped ("This does not respect the
   gpu_memory_utilization config"); a pool the device cannot hold beside the fixed memory fails
   when the KV cache tensors are allocated (CUDA out of memory).
3. `_check_enough_kv_cache_memory` (vllm/v1/core/kv_cache_planning.py; kv_cache_utils.py in
   earlier releases): the pool less the null block must be positive ...
4. ... and must hold one request at max_model_len; vLLM then names the longest max_model_len the
   pool holds (`estimate_max_model_len`, a bisection over the same check).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from pricing.errors import InputError
from pricing.kernel.deployment import allows_tensor_parallel
from pricing.kernel.kernel import BudgetLaw, Kernel
from pricing.rules.load_checks import LoadRefusal, Split
from pricing.rules.load_checks import refusal as load_check_refusal
from pricing.units import largest_such

CONSERVING_MEMORY = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"


def format_gib(n: int) -> str:
    """vLLM's format_gib (vllm/utils/mem_utils.py): round(bytes / 2^30, 2)."""
    return f"{round(n / (1 << 30), 2)}"


@dataclass(frozen=True)
class Refusal:
    """Why vLLM would not start: which check, vLLM's message, and the nearest setting that starts."""

    # quantization | load | unverified | free_memory | kv_cache_memory_bytes | no_cache_memory | one_request;
    # "unverified" is no check of vLLM's: a shard no check decides, which the planner does not offer (LoadRefusal)
    check: str
    message: str
    would_fit: str


def kv_pool_check(k: Kernel, budget: int | None = None) -> int:
    """What vLLM checks the pool against: the pool less the null block (kv_cache_planning.py:
    'Reserve the null block BlockPool permanently holds back'); at `budget` when given."""
    return _less_null_block(k, k.kv_pool() if budget is None else k.pool_at(budget))


def _less_null_block(k: Kernel, pool: int) -> int:
    return pool - _null_block_bytes(k.layout())


def _null_block_bytes(layout) -> int:
    """What the null block holds back of the pool: one block of a grouped layout, else nothing."""
    return layout.bytes_per_block if layout.grouped and layout.groups else 0


def estimated_max_model_len(k: Kernel) -> int:
    """vLLM's `estimate_max_model_len`: the longest max_model_len whose one request fits the
    pool vLLM has (the pool held fixed, as vLLM holds `available_memory` fixed); 0 when none."""
    e = k.engine
    pool = k.kv_pool()

    def fits(length: int) -> bool:
        shorter = _same(k, max_model_len=length, kv_cache_memory_bytes=max(0, pool))
        return shorter is not None and shorter.instance.fits_one_request()

    if pool <= 0:
        return 0
    return largest_such(fits, 1, e.max_model_len)


def _same(k: Kernel, **changes):
    """The kernel's deployment with some flags changed (None when vLLM would reject the flags):
    the resolved settings pinned, as vLLM's estimate changes only what it names."""
    flags = k.engine.as_deployment().model_copy(update=changes)
    try:
        return Kernel.of(k.model, flags, k.chip, k.reg, release=k.release,
                         stage=k.stage.index if k.stage else None)
    except InputError:
        return None


def wider_split(k: Kernel) -> str | None:
    """The narrowest wider tensor-parallel split (with expert parallel on a MoE model) within the
    chip's NVLink domain that starts at the same settings, as a flag string."""
    e = k.engine
    for tp in range(e.tensor_parallel_size + 1, k.chip.tp_domain + 1):
        if not allows_tensor_parallel(k.model, tp):
            continue
        ep = k.model.has_experts
        wider = _same(k, tensor_parallel_size=tp, enable_expert_parallel=ep or e.enable_expert_parallel)
        if wider is not None and failed_check(wider) is None:
            return f"-tp {tp}" + (" --enable-expert-parallel" if ep and not e.enable_expert_parallel else "")
    return None


def loading_split(k: Kernel) -> str:
    """What would fit when the loader refuses the checkpoint: the nearest other tensor-parallel
    size within the chip's NVLink domain (narrower first at equal distance) that starts at the same
    settings; else the nearest whose shards the loader takes; else another chip generation (the
    refusal is the chip's, whatever the split)."""
    e = k.engine
    loads = None
    for tp in sorted(range(1, k.chip.tp_domain + 1), key=lambda tp: (abs(tp - e.tensor_parallel_size), tp)):
        if tp == e.tensor_parallel_size or not allows_tensor_parallel(k.model, tp):
            continue
        other = _same(k, tensor_parallel_size=tp)
        if other is None or other.weight_bytes().refusal:
            continue
        if all(failed_check(s) is None for s in other.instance.ranks):
            return f"-tp {tp} starts (the loader takes its shards)"
        loads = loads or tp
    if loads is not None:
        return (f"-tp {loads} loads the checkpoint, but does not start at these settings (plan memory -tp {loads} "
                "says why)")
    return "no tensor-parallel size within the NVLink domain loads it on this chip: a chip whose generation serves " \
           "this quantization"


def token_budget_binds(k: Kernel) -> str | None:
    """When the activation peak of the token budget outweighs the weights, the budget to lower: the
    fixed memory is then the token budget's, not the model's (a wider split or a smaller model would
    not be the answer)."""
    f = k.fixed_bytes()
    if f.activation_peak <= f.weights:
        return None
    return (f"{format_gib(f.activation_peak)} GiB of it is the activation peak of max_num_batched_tokens "
            f"{k.engine.max_num_batched_tokens:,}: lower max_num_batched_tokens")


def load_refusal(k: Kernel) -> LoadRefusal | None:
    """The first layer of this rank (its pipeline stage's layers) that refuses its shard under the
    engine's split, by the release's load checks (its rules pack's LOAD_CHECKS, reading the pack's
    registry facts), or None; memoised by the graph on the engine fields it reads."""
    def judge(e, reg):
        split = Split(e.tensor_parallel_size, e.data_parallel_size, e.prefill_context_parallel_size,
                      e.enable_expert_parallel, k.chip.generation, e.pipeline_parallel_size)
        return load_check_refusal(e.release.rules.LOAD_CHECKS, k.graph, split, lambda name: e.release.fact(reg, name))
    return k.derived("startup.load_refusal", judge)


def load_split(k: Kernel) -> str:
    """What would fit when a layer refuses its shard: the same GPUs with expert parallelism (a MoE
    model without it), then the other splits of tp × dp over the same GPUs, then fewer data-parallel
    ranks, each at the same settings, the first that starts."""
    e = k.engine
    world = e.tensor_parallel_size * e.data_parallel_size
    tries = [dict(enable_expert_parallel=True)] if k.model.has_experts and not e.enable_expert_parallel else []
    tries += [dict(tensor_parallel_size=tp, data_parallel_size=world // tp) for tp in range(1, k.chip.tp_domain + 1)
              if world % tp == 0 and tp != e.tensor_parallel_size and allows_tensor_parallel(k.model, tp)]
    tries += [dict(data_parallel_size=dp) for dp in range(e.data_parallel_size - 1, 0, -1)]
    for change in tries:
        other = _same(k, **change)
        if other is not None and Startup(other).starts:
            return _flags(change, e)
    return "no split of these GPUs starts: another quantization of the model, or another chip"


def _flags(change: dict, e) -> str:
    """A change of split as `plan memory` flags: "-tp 2 -dp 4 starts"."""
    words = {"tensor_parallel_size": "-tp", "data_parallel_size": "-dp"}
    text = " ".join(f"{words[name]} {value}" for name, value in change.items() if name in words)
    if change.get("enable_expert_parallel"):
        text = f"-tp {e.tensor_parallel_size} -dp {e.data_parallel_size} --enable-expert-parallel"
    return f"{text} starts"


def highest_utilization(k: Kernel, step: float = 0.01) -> float:
    """The largest utilization (floored to `step`) whose budget the free memory at the snapshot covers."""
    ticks = round(1 / step)
    total = k.chip.memory_bytes
    return math.floor((total - k.pre_snapshot_bytes()) * ticks / total) / ticks


def failed_check(k: Kernel) -> str | None:
    """The name of the first start-up check this rank (pipeline stage) would fail (cheap: no
    message, no estimate), kept on the kernel."""
    return k.once("startup.failed_check", lambda: failed_check_at(k))


@dataclass(frozen=True)
class _Fixed:
    """What the first checks read that no budget changes, worked out once per kernel (in the
    checks' order, each only when the one before passes): the free memory at the snapshot, the
    quantization refusal, the --kv-cache-memory-bytes check."""

    free: int  # the chip less what is held before the snapshot
    quantization: bool
    kv_cache_memory_bytes: bool | None = None  # not asked when the quantization or a layer is refused
    load: str | None = None  # "load": a layer refuses its shard (load_refusal); "unverified": not verified to start


def _fixed(k: Kernel) -> _Fixed:
    e = k.engine
    total = k.chip.memory_bytes
    pre = k.pre_snapshot_bytes()
    if k.weight_bytes().refusal:
        return _Fixed(total - pre, True)
    found = load_refusal(k)
    if found is not None:
        return _Fixed(total - pre, False, None, "load" if found.vllm_refuses else "unverified")
    return _Fixed(total - pre, False, e.kv_cache_memory_bytes is not None
                  and e.kv_cache_memory_bytes + k.fixed_bytes().total + pre > total)


def failed_check_at(k: Kernel, budget: int | None = None) -> str | None:
    """`failed_check` at `budget` instead of the engine's own when given (the only input of the
    checks a utilization changes: the pool is affine in it)."""
    return start_checks(k).failed_at(k.budget() if budget is None else budget)


@dataclass(frozen=True)
class StartChecks:
    """One rank's start-up checks as a law of its budget, in vLLM's order: what no budget changes
    (`_Fixed`), the pool at the budget (`law`), then the pool less the null block, then one request
    at max_model_len (the release's `fits_one_request` on this rank's layout)."""

    fixed: _Fixed
    law: BudgetLaw
    grouped_cache: bool  # the layout has KV cache groups (no groups: nothing more to check)
    null_block: int  # bytes the null block holds back (grouped layouts), else 0
    fits_one_request: Callable[[int], bool]

    def failed_at(self, budget: int) -> str | None:
        fixed = self.fixed
        if fixed.quantization:
            return "quantization"
        if fixed.load:
            return fixed.load
        if budget > fixed.free:
            return "free_memory"
        if fixed.kv_cache_memory_bytes:
            return "kv_cache_memory_bytes"
        if not self.grouped_cache:
            return None
        pool = self.law.pool(budget)
        if pool - self.null_block <= 0:  # kv_pool_check
            return "no_cache_memory"
        # this rank (pipeline stage); Startup.starts asks every stage
        if not self.fits_one_request(pool):
            return "one_request"
        return None


def start_checks(k: Kernel) -> StartChecks:
    """The rank's `StartChecks`, kept on the kernel."""
    return k.once("startup.checks", lambda: _start_checks(k))


def _start_checks(k: Kernel) -> StartChecks:
    fixed = _fixed(k)
    if fixed.quantization or fixed.load or fixed.kv_cache_memory_bytes:  # failed before the layout is read
        return StartChecks(fixed, BudgetLaw(0, 0, 0), False, 0, bool)
    layout = k.layout()
    return StartChecks(fixed, k.budget_law(), bool(layout.groups), _null_block_bytes(layout), k.one_request_check())


@dataclass(frozen=True)
class Startup:
    """vLLM's start-up verdict on one engine: its checks on every pipeline stage (vLLM plans every
    worker), the first that fails named in vLLM's words with what would fit."""

    kernel: Kernel

    @property
    def starts(self) -> bool:
        """Every stage passes: the budget beside what is held before it, a --kv-cache-memory-bytes
        pool beside the fixed memory, and a pool that holds one request at max_model_len."""
        return all(failed_check(k) is None for k in self.kernel.instance.ranks)

    def failed_check(self) -> str | None:
        """The first check this rank (pipeline stage) fails."""
        return failed_check(self.kernel)

    def refusal(self) -> Refusal | None:
        """The check vLLM would fail, with its message and what would fit; None when it starts (with
        pipeline parallelism: the first stage that fails, named in the message)."""
        for k in self.kernel.instance.ranks:
            r = refusal(k)
            if r is not None:
                return r if k.stage is None else replace(r, message=f"{k.stage}: {r.message}")
        return None

    @property
    def message(self) -> str | None:
        """Why vLLM would not start this deployment, in its own words; None when it starts."""
        r = self.refusal()
        return None if r is None else r.message


def refusal(k: Kernel) -> Refusal | None:
    """The first start-up check this rank would fail, in vLLM's words, or None when it starts."""
    check = failed_check(k)
    if check is None:
        return None
    if check == "quantization":  # the model loader refuses the checkpoint on this chip
        return Refusal(check, k.weight_bytes().refusal, loading_split(k))
    if check in ("load", "unverified"):  # a layer refuses its shard while vLLM builds the model, or no check decides it
        found = load_refusal(k)
        return Refusal(check, f"{found.message} ({found.layer}: vLLM {found.source})", load_split(k))
    e = k.engine
    total = k.chip.memory_bytes
    pre = k.pre_snapshot_bytes()
    budget = k.budget()
    fixed = k.fixed_bytes().total
    free = total - pre
    if check == "free_memory":
        highest = highest_utilization(k)
        return Refusal(
            check,
            f"Free memory on device cuda:0 ({format_gib(max(0, free))}/{format_gib(total)} GiB) on startup is less "
            f"than desired GPU memory utilization ({e.gpu_memory_utilization}, {format_gib(budget)} GiB). Decrease "
            "GPU memory utilization or reduce GPU memory used by other processes.",
            f"--gpu-memory-utilization {highest:g} is the highest whose budget fits beside the "
            f"{format_gib(pre)} GiB held before it" if highest > 0 else
            f"no utilization: the {format_gib(pre)} GiB held before the budget (collective buffers, workspace) "
            f"alone fill the device's {format_gib(total)} GiB")
    if check == "kv_cache_memory_bytes":
        room = total - fixed - pre
        return Refusal(
            check,
            f"CUDA out of memory allocating the KV cache: --kv-cache-memory-bytes {e.kv_cache_memory_bytes} "
            f"({format_gib(e.kv_cache_memory_bytes)} GiB) is reserved without profiling (\"This does not respect "
            f"the gpu_memory_utilization config\"), and with {format_gib(fixed)} GiB of fixed memory and "
            f"{format_gib(pre)} GiB held before the budget it exceeds the device's {format_gib(total)} GiB",
            f"--kv-cache-memory-bytes {room} ({format_gib(room)} GiB) is the most this chip holds" if room > 0
            else f"nothing: the fixed memory alone ({format_gib(fixed)} GiB) exceeds the device")
    if check == "no_cache_memory":
        short = fixed - budget
        way_out = (token_budget_binds(k) or (f"{split} starts" if (split := wider_split(k)) else
                   "no wider split within the NVLink domain starts; quantize, or use a chip with more memory")
                   ) if short > 0 else ""
        return Refusal(
            check,
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
            "the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). "
            f"See {CONSERVING_MEMORY} for more details.",
            (f"the fixed memory ({format_gib(fixed)} GiB per rank) exceeds the budget ({format_gib(budget)} GiB) "
             f"by {format_gib(short)} GiB: {way_out}") if short > 0 else
            f"the pool ({format_gib(max(0, k.kv_pool()))} GiB) does not hold one block: raise "
            "--gpu-memory-utilization")
    layout = k.layout()
    need = layout.bytes_per_block * k.blocks_per_request() if layout.grouped else k.request_bytes()
    longest = estimated_max_model_len(k)
    estimate = (f"Based on the available memory, the estimated maximum model length is {longest}. "
                if longest > 0 else "")
    return Refusal(
        check,
        f"To serve at least one request with the model's max seq len ({e.max_model_len}), "
        f"({format_gib(need)} GiB KV cache is needed, which is larger than the available KV cache memory "
        f"({format_gib(kv_pool_check(k))} GiB). {estimate}Try increasing `gpu_memory_utilization` (which also "
        "controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. "
        f"See {CONSERVING_MEMORY} for more details.",
        f"--max-model-len {longest} fits this pool" + (f"; at max_model_len {e.max_model_len}, {split} starts"
                                                       if (split := wider_split(k)) else "")
        if longest > 0 else "no context length fits this pool: raise --gpu-memory-utilization or split wider")
