"""The exact commands that start a plan's instances, in vLLM 0.33's own flag spelling: every flag
printed is one of `vllm serve`'s parser (tests/fixtures/vllm-0.33/serve_flags.json, written from
that parser by scripts/fixtures/vllm_flags.py, holds them; a test checks every command against it).

An instance within one node is one `vllm serve` with its GPUs (`CUDA_VISIBLE_DEVICES`) and its
port. An instance larger than a node is one process per node, as vLLM 0.33 launches across nodes
without Ray:
  pipeline or tensor parallel across nodes   `--nnodes N --node-rank R --master-addr <head>` on
                                              every node, `--headless` on the others
                                              (engine/arg_utils.py, entrypoints/cli/serve.py)
  data parallel across nodes (tp within one)  `--data-parallel-size-local L --data-parallel-address
                                              <head> --data-parallel-rpc-port P` on every node; the
                                              others `--headless --data-parallel-start-rank r × L`
                                              (vLLM docs, data parallel deployment)
and Ray is the alternative (one `vllm serve` on the head of a Ray cluster of the nodes).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import ClassVar

from planner.defaults import View
from pricing.kernel import Deployment
from pricing.registry import Registry


class Placeholder(str):
    """A word this tool writes for the shell to expand (`$HEAD_IP`, `$MODEL_WEIGHTS`, a node's
    `$H200_0_IP`): printed bare. Any other word is quoted (`_quote`), a `$` a user wrote included."""


HEAD = Placeholder("$HEAD_IP")  # the head node's address, for the user to fill in
WEIGHTS = Placeholder("$MODEL_WEIGHTS")  # a bare config.json's model: where the weights are, for the user to fill in


@dataclass(frozen=True)
class ServedModel:
    """What `vllm serve` is given: the model as the user named it (folder path, Hugging Face id,
    or the card's id; `WEIGHTS` for a bare config.json), whether its checkpoint runs custom code
    (`--trust-remote-code`), and the `--quantization` method vLLM is told (None: the checkpoint's)."""

    name: str
    trust_remote_code: bool = False
    quantization: str | None = None

    @property
    def placeholder(self) -> bool:
        return isinstance(self.name, Placeholder)


def served_model(model: str, quantization: str | None = None, release: str | None = None,
                 registry: Registry | None = None) -> ServedModel:
    """The model as `vllm serve` is given it (pricing/config resolve: the folder or id as the user
    gave it, the card's HF id, or WEIGHTS for a bare config.json), `--trust-remote-code` for a
    model type whose checkpoint ships the code the release runs (its registry fact
    remote_code_model_types), and the `--quantization` vLLM is told (a what-if format the
    checkpoint does not carry is refused: pricing/config/quantization.py launch_method), as `registry`
    states them (None: the shipped one)."""
    from pricing import rules
    from pricing.config import resolve
    from pricing.config.quantization import launch_method
    from pricing.errors import InputError
    from pricing.registry import shipped

    reg = registry or shipped()
    source = resolve(model, reg)
    if (source.hf_id or "").startswith("-"):
        raise InputError("model", f"{source.hf_id!r} begins with '-': `vllm serve` would read it as a flag",
                         "name the folder so that it does not begin with '-', e.g. ./" + source.hf_id)
    method = launch_method(source.config, source.hf_quant_config, "bf16", quantization, source.origin or source.name)
    remote = source.config.get("model_type") in rules.get(release).fact(reg, "remote_code_model_types")
    return ServedModel(source.hf_id or WEIGHTS, trust_remote_code=remote, quantization=method)


@dataclass(frozen=True)
class NodeRank:
    """A process of an instance spread over nodes by pipeline or tensor parallelism: `--nnodes N
    --node-rank R --master-addr <head>`, `--headless` but on the head."""

    nodes: int
    rank: int
    shell_rank: ClassVar[bool] = False  # a worker's rank is its index as is: no shell arithmetic in a pod
    ranks_per_index: ClassVar[int] = 1

    def flags(self, head: str, rank: str | None = None) -> tuple[str, ...]:
        """The flags, at `head`'s address and this process's rank (or `rank`, an expression for it)."""
        out = ("--nnodes", str(self.nodes), "--node-rank", rank or str(self.rank), "--master-addr", head)
        return out + (("--headless",) if self.rank else ())


@dataclass(frozen=True)
class DataParallelRanks:
    """A node's data-parallel ranks of an instance whose ranks go across nodes: `--data-parallel-size-local
    L --data-parallel-address <head> --data-parallel-rpc-port P`, the others `--headless
    --data-parallel-start-rank r × L`."""

    local: int
    rpc_port: int
    rank: int
    shell_rank: ClassVar[bool] = True  # a worker's first rank is its index times `local`: the shell's arithmetic

    @property
    def ranks_per_index(self) -> int:
        return self.local

    def flags(self, head: str, rank: str | None = None) -> tuple[str, ...]:
        out = ("--data-parallel-size-local", str(self.local), "--data-parallel-address", head,
               "--data-parallel-rpc-port", str(self.rpc_port))
        if self.rank:
            out += ("--headless", "--data-parallel-start-rank", rank or str(self.rank * self.local))
        return out


@dataclass(frozen=True)
class RayDataParallel:
    """Ray starts the data-parallel ranks on the other nodes: `--data-parallel-backend ray`."""

    local: int

    def flags(self, head: str, rank: str | None = None) -> tuple[str, ...]:
        return ("--data-parallel-size-local", str(self.local), "--data-parallel-address", head,
                "--data-parallel-backend", "ray")


@dataclass(frozen=True)
class RayExecutor:
    """Ray runs the other nodes' workers: `--distributed-executor-backend ray`."""

    def flags(self, head: str, rank: str | None = None) -> tuple[str, ...]:
        return ("--distributed-executor-backend", "ray")


@dataclass(frozen=True)
class Serve:
    """One `vllm serve` process in parts: the model it is given, its API port (the head's; None on
    the others), the engine's flags, how it joins the other nodes of its instance, and what its
    role adds (a disaggregated pool's `--kv-transfer-config`). Rendered to a shell line (`Launch`)
    and to a pod's arguments (planner/report/k8s.py), never parsed back."""

    model: ServedModel
    port: int | None
    engine: tuple[str, ...]
    join: NodeRank | DataParallelRanks | RayDataParallel | RayExecutor | None = None
    role: tuple[str, ...] = ()
    host: str = field(kw_only=True)  # the API's --host (planner/defaults.yaml launch.host, read once)

    def args(self, head: str = HEAD, rank: str | None = None, model: str | None = None,
             endpoint: bool = True) -> tuple[str, ...]:
        """The words after `vllm serve`'s program: the model (or `model`), the API's host and port
        (when it has one and `endpoint`), the engine's flags, the joining flags at `head` (and `rank`),
        the role's."""
        out = (model or self.model.name,)
        if self.port is not None and endpoint:
            out += ("--host", self.host, "--port", str(self.port))
        out += self.engine + (self.join.flags(head, rank) if self.join is not None else ())
        return out + self.role


@dataclass(frozen=True)
class Launch:
    """One process to start on one node: its environment, its command (a `vllm serve` in parts,
    or a command given whole, `plain`), and what it is."""

    node: str
    plain: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    what: str = ""
    serve: Serve | None = None

    @property
    def args(self) -> tuple[str, ...]:
        """The command as words, program first."""
        return ("vllm", "serve", *self.serve.args()) if self.serve is not None else self.plain

    @property
    def text(self) -> str:
        """The command as a shell line: the placeholders ($HEAD_IP, $MODEL_WEIGHTS) left for the shell."""
        env = " ".join(f"{k}={_quote(v)}" for k, v in self.env)
        return (env + " " if env else "") + " ".join(_quote(a) for a in self.args)


def _quote(arg: str) -> str:
    """A word as the shell reads it back unchanged (shlex.quote: any word holding a character the
    shell expands or splits on, `$` included, in single quotes), except the placeholders this tool
    writes (`Placeholder`), left bare for the shell to expand."""
    return arg if isinstance(arg, Placeholder) else shlex.quote(arg)


def engine_flags(model: ServedModel, d: Deployment) -> list[str]:
    """The flags every process of the instance carries: the plan's parallel shape and engine
    settings. Flags left at vLLM's default (pp 1, dp 1, expert parallel off, dcp 1, kv cache dtype
    auto) are omitted."""
    flag = Deployment.flag  # each flag spelled from its field's name, as vLLM spells it
    args = [flag("tensor_parallel_size"), str(d.tensor_parallel_size)]
    for name in ("pipeline_parallel_size", "data_parallel_size"):
        if getattr(d, name) > 1:
            args += [flag(name), str(getattr(d, name))]
    if d.enable_expert_parallel:
        args.append(flag("enable_expert_parallel"))
    if d.decode_context_parallel_size > 1:
        args += [flag("decode_context_parallel_size"), str(d.decode_context_parallel_size)]
    args += [flag("gpu_memory_utilization"), f"{d.gpu_memory_utilization:g}"]
    args += [w for name in ("max_num_batched_tokens", "max_num_seqs", "max_model_len")
             for w in (flag(name), str(getattr(d, name)))]
    if d.kv_cache_dtype != "auto":
        args += [flag("kv_cache_dtype"), d.kv_cache_dtype]
    if model.quantization:
        args += ["--quantization", model.quantization]
    if d.num_speculative_tokens:
        spec = {"method": d.speculative_method, "num_speculative_tokens": d.num_speculative_tokens}
        args += ["--speculative-config", json.dumps(spec)]
    if model.trust_remote_code:
        args.append("--trust-remote-code")
    return args


def spans_by_data_parallel(d: Deployment, gpus_per_node: int) -> bool:
    """A multi-node instance whose data-parallel ranks go across nodes, each rank's tp within one
    (pp 1): vLLM's multi-node data-parallel launch; otherwise the `--nnodes` launch."""
    return d.pipeline_parallel_size == 1 and d.data_parallel_size > 1 and d.tensor_parallel_size <= gpus_per_node


def across_nodes(d: Deployment, gpus_per_node: int) -> str:
    """What goes across the nodes of a multi-node instance, in words."""
    if spans_by_data_parallel(d, gpus_per_node):
        return "data-parallel ranks across nodes, tp within a node"
    if d.pipeline_parallel_size > 1:
        return "pipeline stages across nodes, tp within a node's NVLink domain"
    return "tensor parallel across the nodes of one NVLink domain"


def launches(model: ServedModel, d: Deployment, gpus_per_node: int, slots: list, *, visible: bool = True,
             reads: View) -> list[Launch]:
    """The processes of one placed instance, one per node (its `slots`: node, GPU indices, port;
    planner/search/placement.py), the head node first. `visible` sets CUDA_VISIBLE_DEVICES from the slot
    (a Kubernetes pod gets its GPUs from the device plugin instead). The defaults are read through
    `reads` (the caller's view: a plan's records them)."""
    flags = tuple(engine_flags(model, d))
    host = str(reads.value("launch.host"))
    out = []
    nodes = len(slots)
    for rank, slot in enumerate(slots):
        env = (("CUDA_VISIBLE_DEVICES", ",".join(map(str, slot.gpus))),) if visible else ()
        if nodes == 1:
            out.append(Launch(slot.node, env=env, what="the instance", serve=Serve(model, slot.port, flags, host=host)))
            continue
        if spans_by_data_parallel(d, gpus_per_node):
            join = DataParallelRanks(gpus_per_node // d.tensor_parallel_size,
                                     int(reads.value("launch.data_parallel_rpc_port")), rank)
        else:
            join = NodeRank(nodes, rank)
        out.append(Launch(slot.node, env=env, what="head: serves the API" if rank == 0 else "worker",
                          serve=Serve(model, slot.port, flags, join, host=host)))
    return out


def ray_launch(model: ServedModel, d: Deployment, gpus_per_node: int, slots: list, reads: View) -> list[Launch]:
    """The Ray form of a multi-node instance (vLLM docs, distributed serving and data parallel
    deployment): a Ray cluster of the instance's nodes, then one `vllm serve` on the head with
    Ray as the executor (`--distributed-executor-backend ray`), or for data parallel across nodes
    `--data-parallel-backend ray`, which starts the ranks on the other nodes itself."""
    if len(slots) == 1:
        return []
    port = reads.value("launch.ray_port")
    out = [Launch(slots[0].node, ("ray", "start", "--head", "--port", str(port)), what="Ray head")]
    out += [Launch(s.node, ("ray", "start", Placeholder(f"--address={HEAD}:{port}")), what="joins the Ray cluster")
            for s in slots[1:]]
    join = (RayDataParallel(gpus_per_node // d.tensor_parallel_size) if spans_by_data_parallel(d, gpus_per_node)
            else RayExecutor())
    out.append(Launch(slots[0].node, what="serves the API on the head",
                      serve=Serve(model, slots[0].port, tuple(engine_flags(model, d)), join,
                                  host=str(reads.value("launch.host")))))
    return out


def instance_launches(model: ServedModel, d: Deployment, gpus_per_node: int, placed: list, reads: View) -> list:
    """Each placed instance of a pool (planner/search/placement.py InstancePlacement) with its commands
    (the defaults read through `reads`)."""
    from planner.app.result import CommandLine, InstanceLaunch

    def lines(items: list[Launch]) -> list[CommandLine]:
        return [CommandLine.of(x) for x in items]

    return [InstanceLaunch(replica=i.replica, role=i.role, slots=i.slots,
                           commands=lines(launches(model, d, gpus_per_node, i.slots, reads=reads)),
                           ray=lines(ray_launch(model, d, gpus_per_node, i.slots, reads))) for i in placed]


def pool_launch(instances: list) -> dict:
    """A pool's launch as PoolPlan fields: its instances, and the first instance's commands."""
    first = instances[0].commands
    return {"instances": instances, "vllm_serve": first[0].command,
            "vllm_serve_nodes": [c.command for c in first] if len(first) > 1 else []}


def own_nodes(served: ServedModel, d: Deployment, chip, gpus_per_node: int, pool: str, replicas: int,
              spare: int, reads: View) -> dict:
    """A pool laid on nodes of its own (a plan: planner/search/placement.py), as PoolPlan fields (the
    defaults its placement and launch read recorded in `reads`)."""
    from planner.search.placement import ChipNodes, PoolShape, place

    gpus = d.tensor_parallel_size * d.pipeline_parallel_size * d.data_parallel_size
    shape = PoolShape(pool, chip.id, replicas, gpus, d.tensor_parallel_size)
    laid = place([shape], {chip.id: ChipNodes(chip.id, gpus_per_node, chip.tp_domain)}, spare, reads)
    return pool_launch(instance_launches(served, d, gpus_per_node, laid.instances, reads)) | {"nodes": laid.nodes}
