"""What vLLM 0.33's NixlConnector holds for one rank of a disaggregated instance (its `kv_role`).

The connector registers the engine's own KV pool with NIXL and allocates nothing more on the GPU
(registry kv_transfer.nixl.gpu_bytes_beyond_pool; nixl/base_worker.py register_kv_caches). Only with
`kv_buffer_device: cpu` does it stage through the host: one host tensor per layer, shaped as that
layer's view of the pool (num_blocks pages of the layer's own size; initialize_host_xfer_buffer), so
layers that share a pool tensor on the GPU each get their own copy on the host
(kv_transfer.nixl.host_buffer). NIXL/UCX's own allocations are outside vLLM's accounting and not
sized (the provenance says so).
"""

from __future__ import annotations

from dataclasses import dataclass

from pricing.registry import Sourced
from pricing.specs import FullAttentionSpec


@dataclass(frozen=True)
class ConnectorMemory:
    """One rank's connector memory: what it adds on the GPU, what it stages on the host, and the
    KV pool it registers for the other side to read (or to write into)."""

    role: str  # kv_producer (prefill) or kv_consumer (decode)
    gpu_bytes: int  # beyond the KV pool
    host_bytes: int  # the host transfer buffer (kv_buffer_device cpu), 0 otherwise
    registered_bytes: int  # the KV pool registered with NIXL
    provenance: tuple[Sourced, ...] = ()


def connector_memory(kernel) -> ConnectorMemory | None:
    """The connector memory of `kernel`'s rank, None when its deployment states no kv_role."""
    e = kernel.engine
    if e.kv_role is None:
        return None
    reg = kernel.reg
    gpu = reg["kv_transfer.nixl.gpu_bytes_beyond_pool"]
    host = reg["kv_transfer.nixl.host_buffer"]
    layout = kernel.layout()
    blocks = kernel.rank_blocks()
    pool = blocks * layout.bytes_per_block if layout.grouped else max(0, kernel.kv_pool())
    host_bytes = 0
    if e.kv_buffer_device == "cpu":
        host_bytes = blocks * sum(g.layer_bytes for g in layout.groups) if layout.grouped else pool
    return ConnectorMemory(e.kv_role, int(gpu.value), host_bytes, pool, (gpu, host))


def pipeline_refusal(kernel) -> str | None:
    """vLLM 0.33's refusal of a kv_producer with pipeline stages (registry
    kv_transfer.nixl.producer_pipeline_rule), in its words; None when it runs them."""
    e = kernel.engine
    if e.kv_role != "kv_producer" or e.pipeline_parallel_size <= 1:
        return None
    return stages_refused(kernel)


def stages_refused(kernel) -> str | None:
    """Why vLLM 0.33's NixlConnector (pull) would refuse pipeline stages for `kernel`'s caches
    (their kinds do not change with the stages), or None. Its first check refuses any cache that is
    not full attention (MLA is: MLAAttentionSpec subclasses FullAttentionSpec), so Mamba state
    meets it before the Mamba check that follows it."""
    if any(not isinstance(s, FullAttentionSpec) for s in kernel.specs()):
        return ("NixlConnector (pull) does not support pipeline_parallel_size > 1 with hybrid KV cache layouts "
                "(HMA) (vLLM 0.33 nixl/base_worker.py)")
    return None
