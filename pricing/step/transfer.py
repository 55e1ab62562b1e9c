"""The hand-over of a request's KV cache from a prefill instance to a decode instance (vLLM 0.33
NixlConnector, pull mode: each decode rank READs its blocks from the prefill ranks its tp mapping
names, nixl/tp_mapping.py `compute_tp_mapping`).

Bytes: each decode rank reads what its own pool holds for the prompt, `Kernel.request_kv_bytes(isl)`
(every group in whole blocks: context caches, window rings clipped to the window, recurrent state),
so the decode side's tp/dp layout sets them. A latent (MLA) cache is whole on every rank: each decode
rank reads one full copy from prefill rank `tp_rank · P / D`, so min(P, D) prefill ranks serve D
reads. A head-sharded cache is read slice by slice: with D ≥ P each decode rank reads from one
prefill rank, with D < P from P / D of them, duplicated heads read once, so min(P, max(D, KV heads))
ranks serve it. The busiest prefill rank sends D · (decode rank bytes) / sources.

Time: the larger of the two ends over the link each GPU has (its NIC; or NVLink when both pools
sit in one NVLink domain that spans nodes, as GB200/GB300 NVL72 racks do, or on one node whose GPUs
share one NVLink domain, as an HGX board's NVSwitch does: NIXL's UCX reads GPU to GPU there over
cuda_ipc), at the achieved fraction of its rate (registry kv_transfer.link_efficiency). The link
also bounds the rate an instance hands over: one request per (busiest rank's bytes / link) seconds
on each data-parallel rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from pricing.chips import Chip
from pricing.registry import Registry, Sourced, shipped


@dataclass(frozen=True)
class Link:
    """What a prefill GPU and a decode GPU hand a request's KV cache over, per GPU per direction."""

    name: str  # in words: "NVLink (NVL72 domain)" or the NIC
    peak: float  # bytes per second per GPU per direction (data sheet)
    efficiency: float  # achieved fraction (registry kv_transfer.link_efficiency)
    provenance: tuple[Sourced, ...] = ()

    @property
    def bandwidth(self) -> float:
        return self.peak * self.efficiency


def _network(chip: Chip, reg: Registry) -> tuple[Sourced, Sourced] | None:
    base = f"chip_network.chip_network.{chip.id}"
    if f"{base}.scale_out_bandwidth" not in reg:
        return None
    return reg[f"{base}.scale_out_bandwidth"], reg[f"{base}.scale_out_fabric"]


def link_between(prefill: Chip, decode: Chip, registry: Registry | None = None) -> Link | str:
    """The link a prefill pool on `prefill` and a decode pool on `decode` hand over on, or why
    there is none (a chip whose network no source gives)."""
    reg = registry or shipped()
    eff = reg["kv_transfer.link_efficiency"]
    if prefill.id == decode.id and prefill.nvlink_domain > prefill.gpus_per_node:
        rate = reg[f"chip_rates.chip_rates.{prefill.id}.scale_up_bandwidth"]
        return Link(f"NVLink ({prefill.nvlink_domain}-GPU domain)", float(rate.value), float(eff.value), (rate, eff))
    ends = []
    for chip in (prefill, decode):
        found = _network(chip, reg)
        if found is None:
            return (f"{chip.id} has no scale-out network in pricing/registry/chips/{chip.id}.yaml (`network`), so "
                    "no KV hand-over can be priced")
        ends.append(found)
    (bw_p, fab_p), (bw_d, fab_d) = ends
    slower = min(float(bw_p.value), float(bw_d.value))
    name = str(fab_p.value) if fab_p.value == fab_d.value else f"{fab_p.value} to {fab_d.value}"
    return Link(name, slower, float(eff.value), (bw_p, fab_p, bw_d, fab_d, eff))


def link_within_node(chip: Chip, registry: Registry | None = None) -> Link | None:
    """NVLink between a prefill GPU and a decode GPU on one node of `chip`, when every GPU of its node
    sits in one NVLink domain (HGX boards; a domain wider than the node is `link_between`'s); None on
    parts whose node is not one NVLink domain (PCIe, NVLink bridges, xGMI)."""
    if chip.interconnect != "nvlink" or chip.nvlink_domain < chip.gpus_per_node or chip.gpus_per_node < 2:
        return None
    reg = registry or shipped()
    rate, eff = reg[f"chip_rates.chip_rates.{chip.id}.scale_up_bandwidth"], reg["kv_transfer.link_efficiency"]
    return Link(f"NVLink (one {chip.gpus_per_node}-GPU node)", float(rate.value), float(eff.value), (rate, eff))


@dataclass(frozen=True)
class Handover:
    """One request's KV cache crossing from a prefill instance to a decode instance."""

    decode_rank_bytes: int  # each decode rank of the request's data-parallel group reads this
    prefill_rank_bytes: int  # the busiest prefill rank sends this
    request_bytes: int  # all the decode ranks read together
    seconds: float  # the slower end over the link
    link: Link

    def prefill_rate(self, dp: int) -> float:
        """Requests per second a prefill instance of `dp` data-parallel ranks can hand over."""
        return dp * self.link.bandwidth / self.prefill_rank_bytes if self.prefill_rank_bytes else float("inf")

    def decode_rate(self, dp: int) -> float:
        """Requests per second a decode instance of `dp` data-parallel ranks can take in."""
        return dp * self.link.bandwidth / self.decode_rank_bytes if self.decode_rank_bytes else float("inf")


def sources(prefill_tp: int, decode_tp: int, latent: bool, kv_heads: int) -> int:
    """Prefill ranks one request's reads are served by (nixl/tp_mapping.py compute_tp_mapping)."""
    if latent:
        return min(prefill_tp, decode_tp)
    return min(prefill_tp, max(decode_tp, kv_heads))


def handover(decode_rank_bytes: int, prefill_tp: int, decode_tp: int, latent: bool, kv_heads: int,
             link: Link, stage_share: Fraction = Fraction(1)) -> Handover:
    """The hand-over of a request whose KV cache takes `decode_rank_bytes` on each decode rank.
    A prefill instance of pipeline stages sends from every stage, each its own layers' blocks
    (the decode side reads every stage: nixl/base_worker.py _nixl_handshake), so its busiest rank
    sends the largest stage's `stage_share` of what one rank of one stage would."""
    served_by = sources(prefill_tp, decode_tp, latent, kv_heads)
    total = decode_tp * decode_rank_bytes
    busiest = math.ceil(total * stage_share / served_by)  # exact: a Fraction
    seconds = max(decode_rank_bytes, busiest) / link.bandwidth
    return Handover(decode_rank_bytes, busiest, total, seconds, link)
