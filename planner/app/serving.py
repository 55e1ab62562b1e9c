"""A disaggregated plan as data (`plan --serving disagg|auto --json`, under `serving`): the prefill
pool and the decode pool, each a `PoolPlan` with its role's launch, the link between them, and how a
request's time to first token is made up."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from planner.app.result import Explanation, PlanResult, PoolPlan
from planner.app.same_arrivals import SameArrivals
from planner.candidates.speed_band import SpeedBand
from planner.kinds import Role, Serving


class Launch(BaseModel):
    """One instance's start as data: its environment and its argument list."""

    node: str = Field("", description="the node it runs on (planner/search/placement.py); '' for the router")
    env: dict[str, str] = Field(default_factory=dict, description="variables to set (GPUs, the NIXL side channel)")
    args: list[str] = Field(description="the command as an argument list (`vllm serve ...`)")
    line: str = Field(description="the same as one shell line")


class RolePool(PoolPlan):
    """One role's pool: `replicas` instances of the role (prefill: kv_producer; decode: kv_consumer).
    Its `held` is the requests its instances run at once: prompts (max_num_seqs) per prefill
    rank, running decodes per decode rank."""

    role: Role = Field(description="prefill or decode")
    kv_role: str = Field(description="the NixlConnector role of its instances")
    binds_role: str = Field("", description="what sets this pool's count, with its numbers")
    in_flight: int = Field(0, description="requests the rate keeps in this pool at once (Little's law): prompts "
                                          "waiting or prefilling; running decodes")
    launches: list[Launch] = Field(default_factory=list, description="one per process: every instance, each node "
                                                                     "of a multi-node one")
    memory: dict = Field(default_factory=dict, description="one rank's memory breakdown, bytes "
                                                           "(`plan memory --json`'s shape)")
    connector_gpu_bytes: int = Field(0, description="what the connector adds on the GPU beyond the KV pool")
    connector_host_bytes: int = Field(0, description="the connector's host buffer per rank (kv_buffer_device cpu)")


class Handover(BaseModel):
    link: str = Field(description="what the KV cache crosses: the NIC, or NVLink within an NVL72 rack")
    link_gbytes_per_second_per_gpu: float = Field(description="achieved gigabytes (1e9 bytes) per second per GPU "
                                                  "per direction")
    decode_rank_bytes: int = Field(description="KV bytes each decode rank reads for one request")
    prefill_rank_bytes: int = Field(description="KV bytes the busiest prefill rank sends for one request")
    request_bytes: int = Field(description="KV bytes of one request over all the decode ranks that read it")
    transfer_ms: float
    one_node: bool = Field(False, description="both pools sit on one node and hand over on its NVLink (the plan "
                                              "keeps them there); false: over the network, on any nodes")


class TimeToFirstToken(BaseModel):
    """A request's time to first token in a disaggregated fleet, by part (means)."""

    queue_ms: float = Field(description="waiting at the prefill pool (M/D/1 per rank, pricing/serving/queueing.py)")
    prefill_ms: float = Field(description="the prompt's prefill alone on a prefill rank")
    transfer_ms: float = Field(description="the KV cache crossing to the decode rank")
    first_step_ms: float = Field(description="the decode rank's first step for it")
    total_ms: float
    prefill_utilization: float = Field(description="arrivals over what the prefill ranks serve")


class DisaggPlan(BaseModel):
    feasible: bool
    prefill: RolePool | None = None
    decode: RolePool | None = None
    handover: Handover | None = None
    ttft: TimeToFirstToken | None = None
    requests_per_second: float = Field(0.0, description="the rate the fleet is sized for")
    tpot_ms: float | None = Field(None, description="the decode ranks' time per output token at their running "
                                                    "batch; null when no fleet fits")
    tpot_band: SpeedBand | None = Field(None, description="tpot_ms's measured error in its regime (the decode "
                                        "ranks' running batch), on rows the step model was not fitted on "
                                        "(pricing/registry/speed_bands.yaml)")
    decode_batch_per_rank: int | None = Field(None, description="the running requests per decode rank tpot_ms is "
                                              "priced at")
    gpus: int | None = Field(None, description="GPUs of both pools; null when no fleet fits")
    cost_per_hour: float | None = Field(None, description="USD per hour of both pools; null when no fleet fits")
    cost_per_million_output_tokens: float | None = Field(
        None, description="USD per million output tokens at the workload: both pools' whole cost over its output")
    cost_per_million_input_tokens: float | None = Field(
        None, description="USD per million input tokens at the workload: both pools' whole cost over its input")
    router: Launch | None = Field(None, description="the proxy to start in front of the two pools")
    nodes: list = Field(default_factory=list, description="the nodes both pools are laid on")
    explanations: list[Explanation] = Field(default_factory=list, description="why no fleet fits: each reason's "
                                            "chip ('' for the search's), constraint and sentence")
    solver_status: str = ""
    candidates_evaluated: int = 0
    pairs: int = Field(0, description="prefill × decode candidates the CP-SAT model chose among")
    seconds: float = 0.0
    alternatives: list[DisaggPlan] = Field(default_factory=list, description="the best fleets of the next "
                                           "prefill × decode shapes (chips, tp, dp, ep, dcp, kv dtype), cheapest "
                                           "first, as the aggregated plan's alternatives")
    hours_per_month: int = Field(exclude=True)  # planner/defaults.yaml report.hours_per_month, for the rendering


class ServingChoice(BaseModel):
    """`--serving auto`: both plans, and which is cheaper and why."""

    mode: Serving = Field(description="agg, disagg or auto, as asked")
    chosen: Serving = Field(description="agg or disagg: the cheaper (agg on a tie)")
    why: str
    aggregated: PlanResult | None = None
    disaggregated: DisaggPlan | None = None
    same_arrivals: SameArrivals | None = Field(None, description="auto, both plans fitting: each judged again on the "
                                               "same simulated arrivals (planner/app/same_arrivals.py)")
    notes: list[str] = Field(default_factory=list, exclude=True, description="without an aggregated plan to carry "
                             "them: input that had no effect, a line each (the text prints them)")


class ServingOutput(BaseModel):
    """`plan --serving disagg|auto --json`: the choice between the two kinds of plan."""

    kind: Literal["plan_serving"] = Field("plan_serving", description="which report this is (the schema's "
                                                                      "discriminator)")
    serving: ServingChoice
