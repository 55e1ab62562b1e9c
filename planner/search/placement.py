"""Instances laid onto whole nodes: which node, which GPU indices, which port.

A pool is R identical instances (planner/search/cpsat.py); a scenario's pools share each chip's nodes
(planner/search/fleet.py). The nodes of a chip are its inventory's `gpus // gpus_per_node` (a plan without
an inventory takes as many as it needs). A node's GPUs fall into NVLink domains of the chip's
`tp_domain` GPUs (pricing/chips.py: the NVLink or xGMI domain, or the node over PCIe; a domain wider
than a node, as GB200 NVL72's, is the node here, since an instance within a node stays in it):
every tensor-parallel group of an instance sits inside one domain, and an instance smaller than a
node stays on one node. An instance larger than a node takes whole nodes, as vLLM's `--nnodes` and
multi-node data-parallel launches split the world evenly over them.

First fit, largest instances first, each tp group into the fullest domain that still holds it
(best fit), so small instances fill the gaps large ones leave. Ports count up from the base port
per node (two instances on one node never share a port). `spare` whole nodes per chip are kept
free (N+1 capacity): on a chip with an inventory they are its last whole nodes, set aside before
any instance is placed (the search keeps them out of the pools' GPUs: planner/search/cpsat.py,
fleet.py), else nodes beyond the pools'; they are laid out and named, never used. Every node of an
inventory is listed, the idle ones too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice

from pydantic import BaseModel, Field

from planner.defaults import View
from pricing.errors import InputError
from pricing.units import cdiv

ROLE_AGGREGATED = "aggregated"  # one instance prefills and decodes (vLLM's default); disaggregated roles add others


class Slot(BaseModel):
    """The part of one instance on one node."""

    node: str = Field(description="the node's name: <chip>-<index>")
    gpus: list[int] = Field(description="GPU indices on the node (CUDA_VISIBLE_DEVICES)")
    port: int | None = Field(None, description="the API port on this node; None on a headless worker")


class InstancePlacement(BaseModel):
    pool: str = Field(description="the service (scenario) or the model (plan) the instance serves")
    replica: int = Field(description="the instance's index in its pool, from 0")
    role: str = Field(ROLE_AGGREGATED, description="what the instance does: aggregated (prefill and decode)")
    slots: list[Slot] = Field(description="one per node the instance takes, the head node first")


class NodeUse(BaseModel):
    """One node of the inventory and what runs on it."""

    node: str
    chip: str
    gpus: int
    used_by: list[str] = Field(default_factory=list, description="per GPU index: the pool/replica on it, '' idle")
    spare: bool = Field(False, description="kept free as N+1 spare capacity")


class Placement(BaseModel):
    nodes: list[NodeUse]
    instances: list[InstancePlacement]
    notes: list[str] = Field(default_factory=list, description="what the placement could not do, one line each")


@dataclass(frozen=True)
class PoolShape:
    """What placement needs of a pool: its instances' shape on one chip."""

    pool: str
    chip: str
    replicas: int
    gpus_per_replica: int
    tensor_parallel_size: int
    role: str = ROLE_AGGREGATED

    @property
    def groups(self) -> int:
        """Tensor-parallel groups in one instance (pp stages × dp ranks)."""
        return self.gpus_per_replica // self.tensor_parallel_size


@dataclass(frozen=True)
class ChipNodes:
    """A chip's nodes: the inventory's GPUs of the chip (None: as many nodes as the pools need), in
    nodes of `gpus_per_node` (the last holds the remainder when the count is not whole nodes)."""

    chip: str
    gpus_per_node: int
    domain: int  # GPUs of one NVLink domain within a node
    gpus: int | None = None

    @property
    def nodes(self) -> int | None:
        return None if self.gpus is None else cdiv(self.gpus, self.gpus_per_node)

    def node_size(self, index: int) -> int:
        return self.gpus_per_node if self.gpus is None else min(self.gpus_per_node,
                                                                 self.gpus - index * self.gpus_per_node)


@dataclass
class _Node:
    name: str
    chip: str
    size: int
    domain: int
    used_by: list[str] = field(default_factory=list)
    next_port: int = 0
    index: int = 0

    def __post_init__(self) -> None:
        self.used_by = [""] * self.size

    def free(self) -> int:
        return self.used_by.count("")

    def domains(self) -> list[list[int]]:
        return [list(range(start, min(start + self.domain, self.size))) for start in range(0, self.size, self.domain)]

    def fit(self, groups: int, tp: int) -> list[int] | None:
        """GPU indices for `groups` tp groups of `tp` GPUs, each within one domain (best fit), or None."""
        free = {i: [g for g in d if not self.used_by[g]] for i, d in enumerate(self.domains())}
        out: list[int] = []
        for _ in range(groups):
            fits = [i for i, gpus in free.items() if len(gpus) >= tp]
            if not fits:
                return None
            best = min(fits, key=lambda i: (len(free[i]), i))
            out += free[best][:tp]
            free[best] = free[best][tp:]
        return sorted(out)


def _reserved(chip: ChipNodes, spare: int) -> list[int]:
    """The indices of the inventory's nodes kept as spares: its last whole nodes (fewer when it has
    fewer; the search never lets that happen to a chip in use)."""
    if chip.nodes is None:
        return []
    whole = [i for i in range(chip.nodes) if chip.node_size(i) == chip.gpus_per_node]
    return whole[len(whole) - min(spare, len(whole)):]


def place(pools: list[PoolShape], chips: dict[str, ChipNodes], spare: int, reads: View) -> Placement:
    """Every instance of every pool on whole nodes; `spare` free nodes kept per chip (the port read
    through `reads`, the caller's view of the planner defaults)."""
    base = int(reads.value("launch.port"))
    nodes: dict[str, list[_Node]] = {c: [] for c in chips}
    reserved = {c: _reserved(chip, spare) for c, chip in chips.items()}
    placed: list[InstancePlacement] = []
    notes: list[str] = []
    first_open = dict.fromkeys(chips, 0)  # per chip: its nodes before this one are full

    def make(chip: ChipNodes, index: int) -> _Node:
        size = chip.node_size(index)
        node = _Node(f"{chip.chip}-{index}", chip.chip, size, min(chip.domain, size), next_port=base, index=index)
        nodes[chip.chip].append(node)
        return node

    def new_node(chip: ChipNodes) -> _Node | None:
        taken = {n.index for n in nodes[chip.chip]} | set(reserved[chip.chip])
        index = next(i for i in range(len(taken) + 1) if i not in taken)
        if chip.nodes is not None and index >= chip.nodes:
            return None
        return make(chip, index)

    order = sorted(((p, r) for p in pools for r in range(p.replicas)), key=lambda pr: -pr[0].gpus_per_replica)
    for pool, replica in order:
        chip = chips[pool.chip]
        label = f"{pool.pool}/{replica}"
        if pool.gpus_per_replica > chip.gpus_per_node:
            slots = _whole_nodes(pool, chip, label, nodes, new_node)
        else:
            have = nodes[pool.chip]
            while first_open[pool.chip] < len(have) and not have[first_open[pool.chip]].free():
                first_open[pool.chip] += 1  # a full node stays full: nothing placed is ever moved
            slots = _within_node(pool, label, islice(have, first_open[pool.chip], None),
                                 lambda c=chip: new_node(c))
        if slots is None:
            kept = f", {len(reserved[pool.chip])} kept as spares" if reserved[pool.chip] else ""
            raise InputError("placement", f"{label} ({pool.gpus_per_replica} {pool.chip} GPUs) does not fit on the "
                             f"{chip.gpus} GPUs in nodes of {chip.gpus_per_node}{kept}",
                             "give the inventory whole nodes")
        placed.append(InstancePlacement(pool=pool.pool, replica=replica, role=pool.role, slots=slots))
    uses = []
    for chip in chips.values():
        for index in reserved[chip.chip]:
            make(chip, index).used_by = ["spare"] * chip.gpus_per_node
        if chip.nodes is None:
            for _ in range(spare):
                new_node(chip).used_by = ["spare"] * chip.gpus_per_node
        elif len(reserved[chip.chip]) < spare:
            notes.append(f"spare: {spare} whole {chip.chip} node{'s' if spare > 1 else ''} for N+1 capacity, but the "
                         f"inventory has {len(reserved[chip.chip])}")
        while chip.nodes is not None and new_node(chip) is not None:
            pass  # the inventory's other nodes, idle
        uses += [NodeUse(node=n.name, chip=n.chip, gpus=n.size, spare=n.used_by[:1] == ["spare"],
                         used_by=[] if n.used_by[:1] == ["spare"] else n.used_by)
                 for n in sorted(nodes[chip.chip], key=lambda n: n.index)]
    placed.sort(key=lambda i: ([p.pool for p in pools].index(i.pool), i.replica))
    return Placement(nodes=uses, instances=placed, notes=notes)


def _within_node(pool: PoolShape, label: str, have: Iterable[_Node], new_node) -> list[Slot] | None:
    """The first node with room for the instance (each tp group within one NVLink domain), else a new one.
    A node with fewer free GPUs than the instance's is passed over without trying its domains: the
    answer is the same, and a fleet of thousands of instances is laid out in linear time."""
    need = pool.groups * pool.tensor_parallel_size
    for node in have:
        if node.used_by.count("") < need:
            continue
        gpus = node.fit(pool.groups, pool.tensor_parallel_size)
        if gpus is not None:
            break
    else:
        node = new_node()
        if node is None:
            return None
        gpus = node.fit(pool.groups, pool.tensor_parallel_size)
        if gpus is None:
            return None
    for g in gpus:
        node.used_by[g] = label
    port, node.next_port = node.next_port, node.next_port + 1
    return [Slot(node=node.name, gpus=gpus, port=port)]


def _whole_nodes(pool: PoolShape, chip: ChipNodes, label: str, nodes: dict[str, list[_Node]],
                 new_node) -> list[Slot] | None:
    """An instance larger than a node: whole empty nodes, the head first (it serves the API)."""
    count = cdiv(pool.gpus_per_replica, chip.gpus_per_node)
    empty = [n for n in nodes[chip.chip] if n.free() == n.size == chip.gpus_per_node]
    while len(empty) < count:
        node = new_node(chip)
        if node is None:
            return None
        empty.append(node)
    slots = []
    for rank, node in enumerate(empty[:count]):
        node.used_by = [label] * node.size
        port = None
        if rank == 0:
            port, node.next_port = node.next_port, node.next_port + 1
        slots.append(Slot(node=node.name, gpus=list(range(node.size)), port=port))
    return slots
