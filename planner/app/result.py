"""The plan as data: the JSON object `plan --json` prints.

Fields marked `exclude=True` feed the rich rendering and are not part of the JSON shape."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, SkipValidation, field_serializer

from planner.candidates.slo import ServingFigures
from planner.candidates.step_fields import StepFigures
from planner.kinds import Role
from planner.request import implicit_concurrency
from planner.search.placement import NodeUse, Slot
from planner.search.status import StageStatus
from pricing.kernel import Deployment
from pricing.kernel.report import MemoryReport

if TYPE_CHECKING:  # pragma: no cover
    from pricing.kernel import Kernel


class Target(BaseModel):
    """What was asked, every target restated (the title of every report says it too)."""

    asked: int = Field(description="concurrent requests the user asked for (before headroom); 1 when only "
                                   "service targets at a rate were asked")
    context_length: int = Field(description="max_model_len every request is sized at")
    headroom_percent: float = Field(0.0, description="the extra concurrency asked for, in percent (--headroom)")
    required: int = Field(0, description="requests the pool must hold: concurrency with the headroom")
    tpot_ms: float | None = Field(None, description="time per output token every request must get (--tpot-ms)")
    ttft_ms: float | None = Field(None, description="time to first token of a prompt (--ttft-ms)")
    isl: int | None = Field(None, description="mean input tokens of a request (--isl)")
    osl: int | None = Field(None, description="mean output tokens of a request (--osl)")
    requests_per_second: float | None = Field(None, description="the workload's rate, when asked")
    service_targets: list[str] = Field(default_factory=list, description="the percentile targets, in words")
    sized_by_rate: bool = Field(False, exclude=True, description="no concurrency was asked: the rate and the mean "
                                "targets size the pool (planner/app/api.py _sized_by_rate)")

    @field_serializer("asked", "required", "headroom_percent")
    def _unless_implicit(self, value: float) -> float | None:
        """No concurrency was asked (a rate sizes the pool): the 1 held in its place, and a headroom
        over it, are no target, so the JSON says null where the text says '-'."""
        return None if self.implicit_concurrency else value

    @classmethod
    def of(cls, service, context_length: int, service_targets: list[str] | None = None) -> Target:
        """The target of a planner/request.py ServiceSpec at its resolved context length."""
        w = service.workload
        return cls(asked=service.concurrency, context_length=context_length,
                   headroom_percent=service.headroom, required=service.required, tpot_ms=service.tpot_ms,
                   ttft_ms=service.ttft_ms, isl=w.isl if w else None, osl=w.osl if w else None,
                   requests_per_second=w.requests_per_second if w else None, service_targets=service_targets or [])

    @property
    def implicit_concurrency(self) -> bool:
        """Only service targets at a rate were asked: the concurrency (1) is no target, so neither
        is a headroom over it (planner/request.py implicit_concurrency, as its ServiceSpec decides);
        likewise a pool sized by a rate at mean targets with no concurrency asked."""
        return self.sized_by_rate or implicit_concurrency(bool(self.service_targets), self.asked)


class CommandLine(BaseModel):
    """One command to run on one node, complete (environment, host, port)."""

    node: str
    command: str
    what: str = Field("", description="what the process is: the instance, the head, a worker, the Ray head ...")
    args: list[str] = Field(default_factory=list, description="the command as words (program first)")
    env: dict[str, str] = Field(default_factory=dict, description="the environment it is started with")
    launch: SkipValidation[Any] = Field(None, exclude=True, description="the process in parts "
                                        "(planner/app/serve.py Launch), for its other renderings")

    @classmethod
    def of(cls, launch) -> CommandLine:
        """A launch (planner/app/serve.py) as the plan prints it: one shell line, its words and environment."""
        return cls(node=launch.node, command=launch.text, what=launch.what, args=list(launch.args),
                   env=dict(launch.env), launch=launch)


class InstanceLaunch(BaseModel):
    """One instance of a pool where it runs (planner/search/placement.py) and the commands that start it."""

    replica: int
    role: Role = Field(Role.AGGREGATED, description="aggregated: the instance prefills and decodes")
    slots: list[Slot] = Field(description="node, GPU indices and port, one per node, the head first")
    commands: list[CommandLine] = Field(description="one per node, the head first (vLLM's own launch, no Ray)")
    ray: list[CommandLine] = Field(default_factory=list, description="a multi-node instance: the same launch "
                                   "with Ray (a Ray cluster of its nodes, one `vllm serve` on the head)")


class PoolPlan(BaseModel):
    """One pool: `replicas` identical vLLM instances of `gpus_per_replica` GPUs on one chip."""

    model: str = Field("", description="the model as the user named it (card name, path or Hugging Face id)")
    chip: str
    gpus: int
    replicas: int
    gpus_per_replica: int
    tensor_parallel_size: int
    pipeline_parallel_size: int = 1
    nodes_per_replica: int = Field(1, description="nodes one instance takes (a multi-node instance fills them)")
    data_parallel_size: int
    enable_expert_parallel: bool
    decode_context_parallel_size: int
    gpu_memory_utilization: float
    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    kv_cache_dtype: str
    held: int = Field(description="requests the whole pool holds at the context length (what is asked: the "
                                  "target's `asked` and `required`)")
    headroom: float = Field(exclude=True, description="held / asked − 1 (0.25 is 25% spare)")
    headroom_percent: float | None = Field(0.0, description="spare concurrency in percent, as --headroom takes "
                                           "it; null when no concurrency was asked (a rate sizes the pool)")
    binds: str = Field("", description="what sets the pool's size, with its numbers")
    cost_per_hour: float = Field(description="GPUs × USD per GPU-hour")
    price_per_gpu_hour: float = Field(0.0, description="USD per GPU-hour the cost is counted at")
    price_estimate: bool = Field(False, description="the price is the catalogue's estimate, not a quote")
    price_as_of: str = Field("", description="the date of the catalogue price")
    vllm_serve: str = Field(description="the command that starts the first instance (on its head node)")
    vllm_serve_nodes: list[str] = Field(default_factory=list, description="one command per node of the first "
                                        "instance when it spans nodes, the head node first")
    instances: list[InstanceLaunch] = Field(default_factory=list, description="every instance: where it runs and "
                                            "the commands that start it")
    nodes: list[NodeUse] = Field(default_factory=list, description="the nodes the pool is laid on (a plan's own; "
                                 "a scenario's are the fleet's)")
    step: StepFigures | None = Field(None, description="latency and throughput; None when the chip has no peak rates")
    memory: MemoryReport | None = Field(None, description="`plan`'s best pool: one rank's memory breakdown, as the "
                                        "text prints it (`plan memory --json`'s shape; its provenance is the plan's "
                                        "`provenance`); null for the other pools")
    serving: ServingFigures | None = Field(None, description="with service targets: the simulated benchmark")
    cost_per_million_output_tokens: float | None = Field(
        None, description="USD per million output tokens at the workload: the pool's whole cost over its output")
    cost_per_million_input_tokens: float | None = Field(
        None, description="USD per million input tokens at the workload: the pool's whole cost over its input")

    # the pick whole, for the rendering and the manifests (not part of the JSON shape)
    deployment: Deployment | None = Field(None, exclude=True, description="one instance's vLLM configuration, as "
                                          "the kernel verified it")
    _kernel: Kernel | None = PrivateAttr(None)

    @property
    def kernel(self) -> Kernel | None:
        """One rank's kernel, as the plan verified it (None where the pool was not verified here)."""
        return self._kernel

    def with_kernel(self, kernel: Kernel) -> PoolPlan:
        """This pool carrying the kernel it was verified with."""
        self._kernel = kernel
        return self


class SearchInfo(BaseModel):
    candidates_evaluated: int = Field(description="kernel evaluations in the oracle sweep")
    solver_status: str = Field(description="CP-SAT status of the best pool's solve: OPTIMAL means every stage "
                                           "proved its optimum")
    solver_stages: list[StageStatus] = Field(default_factory=list, description="what each stage of that solve "
                                             "proved: status, value, bound, gap")
    seconds: float = Field(description="wall time of the oracle sweep and the solves")
    shapes_skipped: int = Field(0, description="instance shapes not evaluated: one instance costs more than the "
                                               "pools reported (planner/search/cpsat.py tables_for)")


class Margin(BaseModel):
    """The share of each rank's predicted KV pool the plan does not count on (`--margin`)."""

    fraction: float = Field(description="0.012 holds back 1.2 % of every rank's predicted KV pool")
    source: str = Field(description="where the figure comes from: the calibration's residuals, or --margin")


CONSTRAINTS = ("no_shape", "flags", "chip", "checkpoint", "latency", "weights", "context", "max_gpus",
               "service_targets", "network", "time_limit")


class Explanation(BaseModel):
    """Why nothing fits on one chip: the constraint that binds, by name, and in a sentence with its
    numbers and the nearest change that fits (planner/app/explain.py)."""

    chip: str = Field(description="the chip's id; '' when the reason is the search's, not a chip's")
    constraint: Literal[CONSTRAINTS] = Field(description="no_shape: the splits allowed leave no instance shape; "
                                             "flags: vLLM rejects every shape's flags; chip: the chip's registry file "
                                             "lacks a figure the role needs; checkpoint: the model loader "
                                             "refuses the checkpoint at every split; latency: the latency targets "
                                             "leave no configuration; weights: the fixed memory exceeds the budget "
                                             "at every split; context: one request at the context length does not "
                                             "fit the KV pool; max_gpus: the GPUs allowed hold too few requests; "
                                             "service_targets: no split meets the targets at the rate, even alone "
                                             "or on the GPUs allowed; "
                                             "network: no link to hand a prompt's KV cache from prefill to decode; "
                                             "time_limit: the solver found no plan in time")
    text: str = Field(description="the reason in words, with its numbers and the nearest fit")


class PlanResult(BaseModel):
    """`plan --json`: the cheapest pool for one service (`best`, with its per-rank memory), the
    alternatives, what was asked (`target`) and, when nothing fits, why (`explanations`)."""

    kind: Literal["plan"] = Field("plan", description="which report this is (the schema's discriminator)")
    feasible: bool
    target: Target
    best: PoolPlan | None
    alternatives: list[PoolPlan]
    search: SearchInfo
    model: str = Field("", description="the model as the user named it")
    hf_id: str = Field("", description="the name `vllm serve` is given")
    origin: str = Field("", description="where the model's architecture was read")
    explanations: list[Explanation] = Field(default_factory=list, description="why nothing fits, one per chip")
    notes: list[str] = Field(default_factory=list, description="input that had no effect, one line each")
    provenance: list[dict] = Field(default_factory=list,
                                   description="every registry and planner default the best plan used")
    margin: Margin | None = None

    # for the rendering only
    required: int = Field(0, exclude=True, description="concurrency with the headroom the user asked for")
    headroom_percent: float = Field(0.0, exclude=True)
    hours_per_month: int = Field(exclude=True)  # planner/defaults.yaml report.hours_per_month, as the plan read it
