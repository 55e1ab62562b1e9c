"""The chips a deployment can run on (registry/chips/<id>.yaml, one file each), with the user's overrides."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pricing.errors import InputError, suggest
from pricing.registry import Registry, Sourced, shipped


@dataclass(frozen=True)
class Chip:
    id: str
    name: str
    vendor: str
    generation: str
    memory_bytes: int
    nvlink_domain: int
    gpus_per_node: int
    fp8: bool
    fp4: bool
    price_per_gpu_hour: float
    provenance: tuple[Sourced, ...] = ()
    interconnect: str = "nvlink"  # nvlink | nvlink-bridge | pcie | xgmi | nvlink-c2c (chips/README.md)
    price_estimate: bool = False  # the price is an estimate, not a quote (the chip file's `estimate: true`)
    price_as_of: str = ""

    @property
    def tp_domain(self) -> int:
        """GPUs one tensor-parallel group may span: the NVLink (or xGMI) domain; on a part without
        one, the node, since vLLM runs tensor parallelism over PCIe (NCCL; its custom all-reduce
        then serves at most two PCIe-only GPUs, custom_all_reduce.py)."""
        return self.nvlink_domain if self.nvlink_domain > 1 else self.gpus_per_node

    @property
    def tp_link(self) -> str:
        """What a tensor-parallel group within `tp_domain` runs over, in words."""
        if self.nvlink_domain > 1:
            return {"xgmi": "xGMI"}.get(self.interconnect, "NVLink")
        return "PCIe" if self.gpus_per_node > 1 else "one GPU per node"

    @property
    def price_label(self) -> str:
        """'2.99', or '2.00*' for an estimate (see `price_note`)."""
        return f"{self.price_per_gpu_hour:,.2f}" + ("*" if self.price_estimate else "")

    @property
    def price_note(self) -> str | None:
        """The footnote an estimated price carries wherever it is printed."""
        if not self.price_estimate:
            return None
        return (f"* {self.id}: ${self.price_per_gpu_hour:.2f}/GPU-hour is an estimate as of {self.price_as_of}, "
                "not a quote")

    @property
    def sm100_family(self) -> bool:
        return self.generation in ("sm100", "sm103")

    def with_overrides(self, memory_bytes: int | None = None, price: float | None = None) -> Chip:
        chip = self
        prov = list(self.provenance)
        if memory_bytes is not None:
            if memory_bytes <= 0:
                raise InputError("memory_bytes", f"must be positive, got {memory_bytes}", "give the chip's bytes")
            chip = replace(chip, memory_bytes=int(memory_bytes))
            prov = [p for p in prov if not p.name.endswith(".memory_bytes")]
            prov.append(Sourced(f"chips.{self.id}.memory_bytes", int(memory_bytes), "user override", "given"))
        if price is not None:
            if price < 0:
                raise InputError("price", f"must not be negative, got {price}", "give USD per GPU-hour")
            chip = replace(chip, price_per_gpu_hour=float(price), price_estimate=False, price_as_of="given")
            prov = [p for p in prov if not p.name.endswith(".price_per_gpu_hour")]
            prov.append(Sourced(f"chips.{self.id}.price_per_gpu_hour", float(price), "user override", "given"))
        return replace(chip, provenance=tuple(prov))


def _aliases(registry: Registry | None = None) -> dict[str, str]:
    """Alias (lower case) -> chip id; reads every chip's file (once per registry: Registry.derived)."""
    reg = registry or shipped()

    def aliases() -> dict[str, str]:
        chips = reg.raw["chips"]["chips"]
        return {alias.lower(): chip_id for chip_id, data in chips.items() for alias in data.get("aliases", [])}

    return reg.derived(("chips.aliases",), aliases)


def chip_ids(registry: Registry | None = None) -> list[str]:
    return sorted((registry or shipped()).chip_ids())


def get_chip(name: str, registry: Registry | None = None) -> Chip:
    """A chip by id or alias (case-insensitive), as `registry` states it (None: the shipped one). An
    id reads that chip's file only; an alias or a misspelt name reads them all. Built once per
    registry and name (Registry.derived)."""
    reg = registry or shipped()
    return reg.derived(("chips.chip", name), lambda: _chip(name, reg))


def _chip(name: str, reg: Registry) -> Chip:
    key = (name or "").strip().lower()
    chip_id = key if key in reg.chip_ids() else _aliases(reg).get(key)
    if chip_id is None:
        near = suggest(key, [*chip_ids(reg), *_aliases(reg)])
        raise InputError("chip", f"unknown chip {name!r}" + (f"; {near}" if near else ""),
                         "see `plan chips`" if near else f"use one of {', '.join(chip_ids(reg))}")
    data = reg.chip_file(chip_id)["chip"]
    base = f"chips.chips.{chip_id}"
    fields = ("memory_bytes", "nvlink_domain", "gpus_per_node", "fp8", "fp4", "price_per_gpu_hour")
    if "interconnect" in data:
        fields += ("interconnect",)
    prov = tuple(reg[f"{base}.{f}"] for f in fields)
    price = data["price_per_gpu_hour"]
    nvlink = int(data["nvlink_domain"]["value"])
    default_link = ("xgmi" if data["vendor"] == "amd" else "nvlink") if nvlink > 1 else "pcie"
    link = data["interconnect"]["value"] if "interconnect" in data else default_link
    return Chip(chip_id, data["name"], data["vendor"], data["generation"], int(data["memory_bytes"]["value"]),
                nvlink, int(data["gpus_per_node"]["value"]), bool(data["fp8"]["value"]),
                bool(data["fp4"]["value"]), float(price["value"]), prov, link, bool(price.get("estimate", False)),
                str(price.get("as_of", "")))
