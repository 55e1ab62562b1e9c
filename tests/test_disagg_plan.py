"""Disaggregated planning: the decode role's admission with the connector's arriving requests (by
hand), the prefill pool's queueing (Pollaczek–Khinchine by hand), the search's properties (a higher
rate, a longer prompt, a tighter TTFT never cost less or need fewer prefill GPUs), the launch flags
and the CLI's answers."""

from __future__ import annotations

import io
import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from planner.app.disagg_plan import plan_disagg
from planner.candidates.roles import DECODE
from planner.candidates.service import ResolvedService
from planner.candidates.table import candidate_table
from planner.cli import main
from planner.request import PoolLimits, ServiceSpec, WorkloadSpec
from planner.search import disagg
from pricing.chips import get_chip
from pricing.serving.queueing import md1_wait, servers_for_wait

GRID = {"tp": (1, 2), "max_num_batched_tokens": (8192,), "gpu_memory_utilization": (0.9,)}


def _service(rate=5.0, isl=2000, osl=200, ttft=1500.0, tpot=30.0, context=8192, **extra) -> ServiceSpec:
    return ServiceSpec(model="llama-3.1-8b", concurrency=1, context_length=context, ttft_ms=ttft, tpot_ms=tpot,
                       workload=WorkloadSpec(isl=isl, osl=osl, requests_per_second=rate), serving="disagg",
                       **{**GRID, **extra})


def test_md1_wait_by_hand():
    # λ = 3/s at μ = 4/s: ρ = 0.75, W = 0.75 / (2 · 4 · 0.25) = 0.375 s
    assert md1_wait(3.0, 4.0) == pytest.approx(0.375)
    assert md1_wait(4.0, 4.0) == math.inf
    # 10/s at 4/s per server within 0.1 s: ρ ≤ 0.8 / 1.8 = 0.444, so 10 / (4 · 0.444) = 5.6: 6 servers
    assert servers_for_wait(10.0, 4.0, 0.1) == 6
    assert md1_wait(10.0 / 6, 4.0) <= 0.1 < md1_wait(10.0 / 5, 4.0)
    assert servers_for_wait(10.0, 4.0, -0.01) is None


def test_a_decode_rank_holds_the_arriving_requests_beside_the_running_ones():
    """Llama-3.1-8B at 131,072 tokens on one H100: its pool holds 3 requests. With a hand-over as
    long as a request's decode (t = osl · TPOT), as many requests arrive as run, each holding its
    whole prompt (a prompt of the context length: share 1): b + b ≤ 3, so one runs."""
    service = ServiceSpec(model="llama-3.1-8b", concurrency=1, context_length=131072,
                          workload=WorkloadSpec(isl=131072 - 200, osl=200, requests_per_second=1.0),
                          tp=(1,), gpu_memory_utilization=(0.9,), max_num_batched_tokens=(8192,))
    chip = get_chip("h100")
    resolved = ResolvedService.of(service, PoolLimits(chips=("h100",)))
    table = candidate_table(disagg.memory_service(resolved), chip, PoolLimits(chips=("h100",)))
    row = table.dominant()[0]
    assert row.held_per_rank == 3
    sm = DECODE.step_model(resolved, chip, row)
    alone = DECODE.figures(sm, service, row, 0.0, 1.0)
    assert alone.batch_per_rank == 3 and alone.arriving_per_rank == 0
    tpot = alone.tpot_seconds
    long = DECODE.figures(sm, service, row, 200 * tpot * 1.01, 1.0)
    assert long.batch_per_rank == 1  # 1 running + ceil(1.01 · 1 · TPOT(1) / TPOT(3)...) ≤ 3; 2 + 2 > 3
    assert long.batch_per_rank + math.ceil(long.arriving_per_rank) <= row.held_per_rank
    assert long.requests_per_second < alone.requests_per_second
    # the decode kernel states its connector role
    assert sm.kernel.engine.kv_role == "kv_consumer" and sm.kernel.connector().gpu_bytes == 0


def _plan(service: ServiceSpec, chips=("h100",)):
    return plan_disagg(ResolvedService.of(service, PoolLimits(chips=chips)))


def test_the_fleet_adds_up():
    plan = _plan(_service())
    assert plan.feasible
    t = plan.ttft
    assert t.total_ms == pytest.approx(t.queue_ms + t.prefill_ms + t.transfer_ms + t.first_step_ms, abs=0.2)
    assert t.total_ms <= 1500
    assert plan.gpus == plan.prefill.gpus + plan.decode.gpus
    assert plan.cost_per_hour == pytest.approx(plan.gpus * get_chip("h100").price_per_gpu_hour)
    # the hand-over's bytes are the decode rank's pool blocks of the prompt: 125 blocks of 16 tokens, 2 MiB each
    assert plan.handover.request_bytes == 125 * 2 * 1024 * 1024
    assert plan.prefill.kv_role == "kv_producer" and plan.decode.kv_role == "kv_consumer"


def test_pools_on_one_node_hand_over_on_its_nvlink_and_a_wider_fleet_over_the_nic():
    """At 5 requests/s the fleet is 2 H100s: both pools fit one HGX node, whose 8 GPUs share one
    NVSwitch domain, so the 125 blocks of 2 MiB cross NVLink at 450 GB/s per direction (H100 data
    sheet) × 0.85 (registry kv_transfer.link_efficiency): 262,144,000 / 382.5e9 = 0.685 ms, and the
    plan keeps both pools on that node. At 80 requests/s the fleet outgrows the node: the hand-over
    is priced over the 400 Gb/s ConnectX-7, 262,144,000 / 42.5e9 = 6.168 ms."""
    small = _plan(_service(rate=5.0))
    assert small.handover.one_node and small.handover.link == "NVLink (one 8-GPU node)"
    assert small.handover.transfer_ms == pytest.approx(262_144_000 / (450e9 * 0.85) * 1000, abs=1e-3)
    assert small.ttft.transfer_ms == small.handover.transfer_ms
    assert {launch.node for pool in (small.prefill, small.decode) for launch in pool.launches} == {"h100-0"}
    wide = _plan(_service(rate=80.0))
    assert wide.gpus > 8 and not wide.handover.one_node and wide.handover.link.startswith("400 Gb/s")
    assert wide.handover.transfer_ms == pytest.approx(262_144_000 / (400e9 / 8 * 0.85) * 1000, abs=1e-3)
    assert len({launch.node for pool in (wide.prefill, wide.decode) for launch in pool.launches}) > 1


def test_the_alternatives_are_the_next_shapes_each_a_whole_fleet_cheapest_first():
    plan = _plan(_service(rate=20.0, tp=(1, 2, 4)))
    fleets = [plan, *plan.alternatives]
    assert len(fleets) == 6  # report.alternatives: the best and the next five

    def shapes(f):
        return tuple((p.chip, p.tensor_parallel_size, p.data_parallel_size, p.enable_expert_parallel)
                     for p in (f.prefill, f.decode))

    assert len({shapes(f) for f in fleets}) == len(fleets)
    costs = [f.cost_per_hour for f in fleets]
    assert costs == sorted(costs)
    for f in fleets:  # each meets the targets and adds up as the chosen one does
        assert f.ttft.total_ms <= 1500 and f.tpot_ms <= 30
        assert f.gpus == f.prefill.gpus + f.decode.gpus and f.prefill.launches and f.router is not None
    again = _plan(_service(rate=20.0, tp=(1, 2, 4)))  # the same ranking each time
    assert [(shapes(f), f.cost_per_hour) for f in [again, *again.alternatives]] == [
        (shapes(f), f.cost_per_hour) for f in fleets]


def test_a_prefill_instance_of_two_stages_prefills_twice_the_prompts_and_holds_half_of_each():
    """Llama-3.1-8B on H100 at tp 1: two stages of 16 layers each. A prompt crosses both in turn,
    so its prefill alone takes about what one GPU takes (plus one hand-off of its hidden states);
    vLLM keeps two batches in flight, so the instance prefills twice the prompts per second of one
    traversal; each stage's pool holds its own layers' half of every prompt."""
    from planner.candidates.roles import PREFILL

    chip = get_chip("h100")
    service = _service(rate=20.0, isl=4000, osl=100, tp=(1,), pp=(1, 2))
    resolved = ResolvedService.of(service, PoolLimits(chips=("h100",)))
    side = disagg._side(resolved, "h100", PoolLimits(chips=("h100",)), PREFILL)
    one, two = (next(PREFILL.figures(resolved, chip, r) for r in side.rows if r.shape.pp == pp) for pp in (1, 2))
    assert two.stage_share == Fraction(16, 32) and one.stage_share == 1
    assert two.prompt_seconds == pytest.approx(one.prompt_seconds, rel=0.05)
    # one traversal of the two stages: the prompts per second at its own prompt time, times the stages
    assert two.service_rate == pytest.approx(2 * one.service_rate * one.prompt_seconds / two.prompt_seconds,
                                             rel=0.02)
    plan = _plan(_service(rate=20.0, isl=4000, osl=100, tp=(1,), pp=(2,)))
    assert plan.prefill.pipeline_parallel_size == 2 and plan.decode.pipeline_parallel_size == 1
    assert plan.handover.prefill_rank_bytes * 2 == plan.handover.request_bytes
    assert all("--pipeline-parallel-size 2" in launch.line for launch in plan.prefill.launches)
    # a hybrid model's prefill instances run no stages: vLLM's pull connector refuses them
    hybrid = ServiceSpec(model="gpt-oss-120b", concurrency=1, context_length=8192, ttft_ms=2000.0, tpot_ms=50.0,
                         workload=WorkloadSpec(isl=4000, osl=100, requests_per_second=5.0), serving="disagg",
                         tp=(2,), pp=(2,), max_num_batched_tokens=(8192,), gpu_memory_utilization=(0.9,))
    assert any("hybrid KV cache layouts" in why.text and (why.chip, why.constraint) == ("h200", "flags")
               for why in _plan(hybrid, chips=("h200",)).explanations)


def test_the_disaggregated_plan_prints(capsys):
    code = main(["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200",
                 "--requests-per-second", "20", "--ttft-ms", "1500", "--tpot-ms", "30", "--context-length", "8192",
                 "--tp", "1", "--tp", "2", "--serving", "disagg"])
    out = capsys.readouterr().out
    assert code == 0
    assert "the chosen fleet and the best fleets of the next prefill × decode shapes" in out
    assert "over NVLink (one 8-GPU node)" in out and "toy_proxy_server.py" in out


def _fleet(service: ServiceSpec) -> tuple[float, int] | None:
    """The cheapest fleet's cost per hour and prefill GPUs (the search alone: no placement, no
    launches), or None when none fits."""
    found = disagg.search(ResolvedService.of(service, PoolLimits(chips=("h100",))), alternatives=0)
    if found.chosen is None:
        return None
    pair, p, d = found.chosen
    cost = (p * pair.prefill.row.gpus * pair.prefill_chip.price_per_gpu_hour
            + d * pair.decode.row.gpus * pair.decode_chip.price_per_gpu_hour)
    return round(cost, 6), p * pair.prefill.row.gpus


# properties over small Llama-3.1-8B fleets on H100 (tp 1 or 2, one token budget): few examples, each a
# search of about 0.1 s, no deadline
PROPERTY = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(low=st.floats(0.5, 30.0), more=st.floats(0.0, 30.0))
def test_a_higher_rate_never_costs_less(low, more):
    """Every pair's fewest counts grow with the rate (its TTFT needs more prefill ranks, its
    capacities are fixed), and a pair that fails at a rate fails above it: the cheapest cannot fall."""
    a, b = _fleet(_service(rate=low)), _fleet(_service(rate=low + more))
    assert a is not None
    assert b is None or b[0] >= a[0]


@PROPERTY
@given(short=st.integers(200, 6000), more=st.integers(0, 1900), rate=st.floats(1.0, 30.0))
def test_a_longer_prompt_never_needs_fewer_prefill_gpus(short, more, rate):
    a, b = (_fleet(_service(rate=rate, isl=isl, osl=100)) for isl in (short, short + more))
    if b is None:  # the longer prompt fits no fleet: nothing to compare
        return
    assert a is not None
    assert b[1] >= a[1] and b[0] >= a[0]


@PROPERTY
@given(tight=st.floats(150.0, 1500.0), looser=st.floats(0.0, 1500.0), rate=st.floats(1.0, 30.0))
@example(tight=150.0, looser=1.0, rate=3.0)  # stage 1's cost read back as the float 209299.99999999985
def test_a_tighter_ttft_never_costs_less(tight, looser, rate):
    a, b = (_fleet(_service(rate=rate, isl=4000, ttft=t)) for t in (tight + looser, tight))
    if b is None:
        return
    assert a is not None and b[0] >= a[0]


def test_an_infeasible_ttft_explains_itself_with_numbers():
    plan = _plan(_service(isl=7000, ttft=20.0))
    assert not plan.feasible
    (line,) = [e.text for e in plan.explanations if e.constraint == "latency" and e.text.startswith("ttft:")]
    assert "to prefill a 7,000-token prompt" in line and "against 20 ms" in line


def test_the_pools_table_prints_its_counts_with_thousands_separators():
    """The pools table's figures go through planner/numbers.py: a fleet of 12,000 GPUs and a
    decode rank of 1,024 sequences read with separators, not '12000' and '1024'."""
    from rich.console import Console

    from planner.report.disagg_render import POOL_COLUMNS, pools_rows
    from planner.report.tables import print_table

    plan = _plan(_service())
    wide = plan.model_copy(update={"gpus": 12_000, "decode": plan.decode.model_copy(
        update={"gpus": 6_000, "max_num_seqs": 1_024})})
    console = Console(width=200, record=True, file=io.StringIO())
    print_table(console, "t", POOL_COLUMNS, pools_rows(wide, 730))
    text = console.export_text()
    assert "12,000" in text and "6,000" in text and "1,024" in text
    assert "12000" not in text and "1024" not in text.replace("1,024", "")


def test_launch_flags_are_vllms():
    """Each instance names NixlConnector with its role (config/kv_transfer.py KVRole: kv_producer,
    kv_consumer, kv_both), is placed with its own GPUs and port, and has a side channel of its own:
    ranges of dp ports (base + data_parallel_index, nixl/base_scheduler.py) disjoint over the fleet.
    Every command passes vLLM 0.33's parser and envs.py (tests/vllm_flags.py)."""
    from tests.vllm_flags import command_problems

    plan = _plan(_service(rate=40.0))
    seen, gpus = [], []
    for pool in (plan.prefill, plan.decode):
        for launch in pool.launches:
            i = launch.args.index("--kv-transfer-config")
            config = json.loads(launch.args[i + 1])
            assert config == {"kv_connector": "NixlConnector", "kv_role": pool.kv_role}
            port = int(launch.env["VLLM_NIXL_SIDE_CHANNEL_PORT"])
            seen.append(set(range(port, port + pool.data_parallel_size)))
            assert launch.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "$" + launch.node.upper().replace("-", "_") + "_IP"
            gpus.append((launch.node, launch.env["CUDA_VISIBLE_DEVICES"]))
            assert launch.args[:2] == ["vllm", "serve"] and "--port" in launch.args
            assert command_problems(launch.line) == [], launch.line
    assert sum(len(s) for s in seen) == len(set().union(*seen))
    assert len(set(gpus)) == len(gpus)  # no two instances on the same GPUs
    assert plan.prefill.replicas + plan.decode.replicas > 2
    args = plan.router.args
    ports = [str(i.slots[0].port) for i in plan.prefill.instances]
    assert args[args.index("--prefiller-ports") + 1:args.index("--decoder-hosts")] == ports


def _proxy_line(out: str) -> list[str]:
    import shlex

    (line,) = [x for x in out.splitlines() if "toy_proxy_server.py" in x and "--port" in x]
    words = shlex.split(line, comments=True)
    assert words[:2] == ["python", "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py"]
    return words[2:]


def test_the_printed_router_is_vllms_proxy_listening_for_the_other_nodes(capsys):
    """The router line the plan prints parses as vLLM's proxy parses it (its parse_args rebuilt from
    tests/fixtures/vllm-0.33/proxy_flags.json, its hosts-to-ports check included) and listens on
    every interface: the proxy's own --host default (127.0.0.1 in the fixture) is loopback alone,
    where no client on another machine reaches it. Its prefillers and decoders are the plan's
    instances, head node and port each."""
    import ipaddress

    from tests.vllm_flags import proxy_flags, proxy_parse

    assert ipaddress.ip_address(proxy_flags()["flags"]["--host"]["default"]).is_loopback
    argv = ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200",
            "--requests-per-second", "40", "--ttft-ms", "1500", "--tpot-ms", "30", "--context-length", "8192",
            "--tp", "1", "--tp", "2", "--serving", "disagg"]
    assert main(argv) == 0
    printed = _proxy_line(capsys.readouterr().out)
    assert main([*argv, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["serving"]["disaggregated"]
    assert printed == plan["router"]["args"][2:]
    ns = proxy_parse(printed)
    assert ipaddress.ip_address(ns.host).is_unspecified  # 0.0.0.0: every interface of the router's node
    for side, pool in (("prefiller", plan["prefill"]), ("decoder", plan["decode"])):
        heads = [i["slots"][0] for i in pool["instances"]]
        assert getattr(ns, f"{side}_ports") == [s["port"] for s in heads]
        assert getattr(ns, f"{side}_hosts") == ["$" + s["node"].upper().replace("-", "_") + "_IP" for s in heads]
    # a scenario review prints the same router after its decode pool's commands
    from planner.app.fleet import plan_scenario
    from planner.scenario import load_scenario

    path = Path(__file__).resolve().parents[1] / "scenarios" / "disaggregated-chat-h200-b200.yaml"
    decode = next(p for p in plan_scenario(load_scenario(path)).services if p.role == "decode")
    assert ipaddress.ip_address(proxy_parse(_proxy_line(decode.instance_commands[-1])).host).is_unspecified


def test_heterogeneous_pools_plan_on_their_own_chips(capsys):
    code = main(["--model", "llama-3.1-8b", "--prefill-chip", "b200", "--decode-chip", "h200", "--isl", "2000",
                 "--osl", "200", "--requests-per-second", "5", "--ttft-ms", "1500", "--tpot-ms", "30",
                 "--context-length", "8192", "--tp", "1", "--tp", "2", "--serving", "disagg", "--json"])
    assert code == 0
    plan = json.loads(capsys.readouterr().out)["serving"]["disaggregated"]
    assert plan["prefill"]["chip"] == "b200" and plan["decode"]["chip"] == "h200"
    assert plan["handover"]["link"].startswith("400 Gb/s")


def test_auto_shows_both_and_says_which_is_cheaper(capsys):
    code = main(["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200",
                 "--requests-per-second", "5", "--ttft-ms", "1500", "--tpot-ms", "30", "--context-length", "8192",
                 "--tp", "1", "--tp", "2", "--serving", "auto", "--json"])
    assert code == 0
    serving = json.loads(capsys.readouterr().out)["serving"]
    agg, dis = serving["aggregated"], serving["disaggregated"]
    assert agg["feasible"] and dis["feasible"]
    cheaper = "disagg" if dis["cost_per_hour"] < agg["best"]["cost_per_hour"] else "agg"
    assert serving["chosen"] == cheaper and "cheaper" in serving["why"]
    # without --concurrency the aggregated pool is sized by the rate at its own throughput, as the decode pool is
    assert agg["target"]["asked"] is None  # none was asked (issue 42, item 3): the JSON's null, the text's '-'
    assert agg["best"]["step"]["pool_requests_per_second"] >= 5


def test_disaggregated_serving_needs_a_rate_and_a_ttft(capsys):
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--serving", "disagg"]) == 2
    assert "--serving: disaggregated serving is sized by a workload" in capsys.readouterr().err
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--decode-chip", "h200"]) == 2
    assert "no effect on an aggregated plan" in capsys.readouterr().err


SCENARIO = """
review: "P/D beside aggregated"
inventory:
  h100: {gpus: 16, gpus_per_node: 8}
services:
  - name: chat
    model: llama-3.1-8b
    concurrency: 64
    context_length: 8192
    tp: [1, 2]
    serving: SERVING
    ttft_ms: 1500
    tpot_ms: 30
    workload: {isl: 2000, osl: 200, requests_per_second: 5}
  - {name: batch, model: qwen3-8b, concurrency: 32, context_length: 16384, tp: [1, 2]}
"""


def _review(tmp_path, serving: str):
    from planner.app.fleet import plan_scenario
    from planner.scenario import load_scenario

    path = tmp_path / f"{serving}.yaml"
    path.write_text(SCENARIO.replace("SERVING", serving))
    return plan_scenario(load_scenario(path))


def test_a_disaggregated_service_plans_in_a_fleet_review(tmp_path):
    result = _review(tmp_path, "disagg")
    assert result.feasible
    roles = {p.service: p.role for p in result.services}
    assert roles == {"chat (prefill)": "prefill", "chat (decode)": "decode", "batch": "aggregated"}
    assert result.gpus == sum(p.gpus for p in result.services) <= 16
    assert result.cost_per_hour == pytest.approx(sum(p.cost_per_hour for p in result.services))
    decode = next(p for p in result.services if p.role == "decode")
    assert "--kv-transfer-config" in decode.instance_commands[0] and "toy_proxy_server" in decode.instance_commands[-1]
    # the pools are the ones `plan --serving disagg` chooses for the service on its own
    alone = plan_disagg(ResolvedService.of(_service(rate=5.0), PoolLimits(chips=("h100",))))
    assert {p.role: p.gpus for p in result.services if p.role != "aggregated"} == {
        "prefill": alone.prefill.gpus, "decode": alone.decode.gpus}


def test_auto_in_a_review_is_never_dearer_than_either_mode(tmp_path):
    auto, agg, dis = (_review(tmp_path, mode) for mode in ("auto", "agg", "disagg"))
    assert auto.feasible and agg.feasible and dis.feasible
    assert auto.cost_per_hour <= min(agg.cost_per_hour, dis.cost_per_hour) + 1e-9


SPLIT = """
review: "P/D pools split by placement"
inventory:
  b200: {gpus: 16, gpus_per_node: 8}
services:
  - {name: chat, model: llama-3.1-70b, concurrency: 1, context_length: 9216, serving: disagg, ttft_ms: 2000,
     tpot_ms: 50, workload: {isl: 8192, osl: 1024, requests_per_second: 2}}
  - {name: batch, model: qwen3-8b, concurrency: 256, context_length: 16384, tp: [4]}
"""


def test_a_review_hands_over_on_nvlink_only_where_placement_lays_both_pools_on_one_node(tmp_path):
    """A scenario chooses a disaggregated service's pools over the network (its nodes are shared),
    then states the hand-over as placement lays them. The chat service of
    scenarios/disaggregated-chat-h200-b200.yaml, 3 × tp 2 prefill + 1 × tp 2 decode instances of
    Llama-3.1-70B on B200, lands on one 8-GPU node: its KV cache crosses the node's NVLink. Beside a
    tp 4 batch instance laid first (the largest instance first) the same pools span two nodes: the
    NIC. By hand, each decode rank reads an 8,192-token prompt's KV of its 4 of 8 KV heads: 8,192 ×
    80 layers × 4 heads × 128 × 2 (K, V) × 2 bytes, from one prefill rank (tp 2 to tp 2), at the
    link's rate × the registry's efficiency (B200: NVLink 900 GB/s, NIC 400 Gb/s)."""
    from planner.app.fleet import plan_scenario
    from planner.scenario import load_scenario
    from pricing.registry import shipped

    reg = shipped()
    eff = float(reg.value("kv_transfer.link_efficiency"))
    rank_bytes = 8192 * 80 * 4 * 128 * 2 * 2
    nvlink = float(reg.value("chip_rates.chip_rates.b200.scale_up_bandwidth")) * eff
    nic = float(reg.value("chip_network.chip_network.b200.scale_out_bandwidth")) * eff
    split = tmp_path / "split.yaml"
    split.write_text(SPLIT)
    example = Path(__file__).resolve().parents[1] / "scenarios" / "disaggregated-chat-h200-b200.yaml"
    for path, link, rate in ((example, "NVLink (one 8-GPU node)", nvlink), (split, "400 Gb/s", nic)):
        pools = [p for p in plan_scenario(load_scenario(path)).services if p.role != "aggregated"]
        nodes = {s.node for p in pools for i in p.instances for s in i.slots}
        assert [(p.role, p.chip, p.gpus) for p in pools] == [("prefill", "b200", 6), ("decode", "b200", 2)]
        assert len(nodes) == (1 if path == example else 2)
        for pool in pools:
            h = pool.handover
            assert h.link.startswith(link) and h.one_node == (path == example)
            assert h.decode_rank_bytes == h.prefill_rank_bytes == rank_bytes
            assert h.transfer_ms == pytest.approx(rank_bytes / rate * 1000, abs=1e-3)
        assert f"over {pools[0].handover.link}" in pools[0].binds


def test_the_example_scenario_plans_its_disaggregated_service(capsys):
    """scenarios/disaggregated-chat-h200-b200.yaml: the chat's two pools and the batch pool in one
    review, printed once each (one total line)."""

    path = Path(__file__).resolve().parents[1] / "scenarios" / "disaggregated-chat-h200-b200.yaml"
    assert main(["scenario", str(path)]) == 0
    out = capsys.readouterr().out
    assert "chat (prefill)" in out and "chat (decode)" in out and "kv_producer" in out
    assert sum(line.startswith("total: ") for line in out.splitlines()) == 1


def test_a_prefill_instance_serves_prompts_at_its_engines_rate_not_the_api_servers():
    """A prompt's time to its first token holds the API server's time (first_token_seconds) beside the
    prefill's steps; the prompts a prefill rank takes per second are the engine's alone. Llama-3.1-8B
    on one H100 with 9,000-token prompts (none whole in a step): service rate = 1 / (prompt time − that)."""
    from planner.candidates.roles import PREFILL
    from pricing.step.rates import Efficiency

    chip = get_chip("h100")
    service = _service(rate=5.0, isl=9000, osl=100, tp=(1,), pp=(1,))
    resolved = ResolvedService.of(service, PoolLimits(chips=("h100",)))
    side = disagg._side(resolved, "h100", PoolLimits(chips=("h100",)), PREFILL)
    row = next(r for r in side.rows if r.max_num_batched_tokens // 9000 < 2)
    fig = PREFILL.figures(resolved, chip, row)
    front = Efficiency.from_registry(None, "vllm").first_token_seconds
    assert front > 0
    assert fig.service_rate == pytest.approx(1 / (fig.prompt_seconds - front), rel=1e-12)
