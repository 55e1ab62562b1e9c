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
