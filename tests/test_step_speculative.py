"""Speculative decoding in the step model (pricing/step/speculative.py): the acceptance law by
hand, the drafter passes vLLM runs, and properties (no speculation is the plain step; more
accepted tokens never cost time per token; drafting nothing useful never saves time)."""

import json
import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pricing.chips import get_chip
from pricing.errors import InputError
from pricing.graph import load_model
from pricing.graph.nodes import Routing
from pricing.kernel import Deployment, Kernel
from pricing.registry import shipped
from pricing.step import Step, StepModel
from pricing.step.serving import Workload, serving
from pricing.step.speculative import Acceptance, BlockDrafter, SequentialDrafter, acceptance
from pricing.step.step import DRAFTER_PART

FAST = settings(max_examples=25, deadline=None)
DRAFTING = st.sampled_from([("dsv4-flash", "mtp", 1), ("dsv3", "mtp", 8), ("dsv4.1-flash", "dspark", 8)])
CHIPS = st.sampled_from(["h200", "b200", "mi300x"])
_MODELS: dict = {}


def step_model(name: str, chip: str, tp: int, method: str | None = None, k: int = 0, **flags) -> StepModel:
    key = (name, chip, tp, method, k, tuple(sorted(flags.items())))
    if key not in _MODELS:
        model = load_model(name)
        d = Deployment(tensor_parallel_size=tp, max_model_len=min(32768, model.max_position),
                       num_speculative_tokens=k, speculative_method=method, **flags)
        _MODELS[key] = StepModel(Kernel.of(model, d, get_chip(chip)))
    return _MODELS[key]


def with_rates(sm: StepModel, rates) -> StepModel:
    """The same deployment assuming other acceptance rates (a shallow copy: the work is shared)."""
    other = object.__new__(StepModel)
    other.__dict__.update(sm.__dict__)
    other.drafting = replace(sm.drafting, acceptance=Acceptance(sm.drafting.method, tuple(rates)))
    return other


def test_expected_accepted_tokens_by_hand():
    """Rates 0.8 then 0.5 (a third position takes the last rate): 0.8 + 0.8·0.5 + 0.8·0.5·0.5
    = 0.8 + 0.4 + 0.2 = 1.4 accepted, 2.4 tokens a step; one draft: 1.8."""
    a = Acceptance("mtp", (0.8, 0.5))
    assert a.expected_accepted(3) == pytest.approx(1.4)
    assert a.tokens_per_step(3) == pytest.approx(2.4)
    assert a.tokens_per_step(1) == pytest.approx(1.8)
    assert a.tokens_per_step(0) == 1.0


def test_one_rate_for_every_position_is_leviathans_closed_form():
    """Leviathan et al. 2023, eq. 1: (1 − α^(k+1)) / (1 − α) tokens a step; α = 0.6, k = 4:
    (1 − 0.07776) / 0.4 = 2.3056."""
    assert Acceptance("mtp", (0.6,)).tokens_per_step(4) == pytest.approx(2.3056)


def test_the_registry_rates_are_the_sourced_ones():
    """MTP: DeepSeek-V3's report's low end, 0.85, for the first draft (1.85 tokens a step at k = 1).
    DSpark: the vLLM log's unconditional rates 0.739, 0.478, ... come back as products of ours."""
    reg = shipped()
    mtp = acceptance(reg, "mtp")
    assert mtp.tokens_per_step(1) == pytest.approx(1.85)
    assert "2412.19437" in mtp.provenance.source
    dspark = acceptance(reg, "dspark")
    logged = (0.739, 0.478, 0.261, 0.174, 0.130, 0.087, 0.043)
    chain = 1.0
    for j, p in enumerate(logged, start=1):
        chain *= dspark.rate(j)
        assert chain == pytest.approx(p, abs=5e-4)
    assert dspark.tokens_per_step(7) == pytest.approx(2.91, abs=0.005)  # the log's mean acceptance length


def test_bad_rates_in_an_overlay_are_named():
    reg = shipped().with_overrides({"step_model.speculative.mtp.acceptance": [0.9, 1.5]})
    with pytest.raises(InputError, match="speculative.mtp.acceptance"):
        acceptance(reg, "mtp")


def test_the_drafter_passes_vllm_runs_by_hand():
    """MTP, k = 3, 4 requests verifying 1 + 3 tokens each: a first pass over the target's 16
    tokens, then two over one token per request (llm_base_proposer.propose): 24 drafter tokens,
    a draft sampled at 4 positions per pass. DSpark, k = 5: one pass over 4 × 5 = 20 tokens,
    logits at all 20."""
    mtp = SequentialDrafter().passes(decode=4, queries=4, chunk=0, chunk_offset=0, drafts=3)
    assert [(p.decode * p.queries, p.logits) for p in mtp] == [(16, 4), (4, 4), (4, 4)]
    dspark = BlockDrafter().passes(decode=4, queries=6, chunk=0, chunk_offset=0, drafts=5)
    assert [(p.decode * p.queries, p.logits) for p in dspark] == [(20, 20)]


def test_verification_runs_one_plus_k_tokens_per_request_and_reads_each_cache_once():
    """The target's attention: k + 1 queries per request, so k + 1 times the FLOPs of one, and
    the same cache bytes."""
    sm = step_model("dsv4-flash", "h200", 1, "mtp", 2)
    one = sm.attention_work(Step(decode=8, context=4096))
    three = sm.attention_work(Step(decode=8, context=4096, queries=3))
    assert three[0] == pytest.approx(3 * one[0])
    assert three[1] == one[1]


@FAST
@given(DRAFTING, CHIPS, st.integers(1, 256), st.integers(1, 32768))
def test_without_its_drafter_a_speculating_step_is_the_plain_step(drafting, chip, batch, context):
    """k = 0 is today's step: with speculation on, the step but its drafter part, at one query
    per request, is exactly the step of the same deployment without speculation, but for the
    target's bounded rings, which hold 1 + k tokens in flight (same attention FLOPs, the same
    context-cache bytes per token: the drafter's own cache is read by the drafter passes)."""
    name, method, tp = drafting
    step = Step(decode=batch, context=context)
    plain_model, spec_model = step_model(name, chip, tp), step_model(name, chip, tp, method, 1)
    plain = plain_model.time(step)
    assert DRAFTER_PART not in plain.parts
    spec = spec_model.time(step)
    target = {k: v for k, v in spec.parts.items() if k != DRAFTER_PART}
    assert target.keys() == plain.parts.keys()
    for part, seconds in plain.parts.items():
        if part != "attention over the context":
            assert target[part] == pytest.approx(seconds, rel=1e-12), part
    flops, nbytes = plain_model.attention_work(step)
    spec_flops, spec_bytes = spec_model.attention_work(step)
    assert spec_flops == pytest.approx(flops, rel=1e-12) and spec_bytes >= nbytes
    assert spec_model.context.cache_bytes_per_token == plain_model.context.cache_bytes_per_token
    s = serving(step_model(name, chip, tp), batch, context)
    assert s.tokens_per_step == 1.0 and s.tpot_seconds == s.step.seconds and s.speculation is None


@FAST
@given(DRAFTING, CHIPS, st.integers(1, 128), st.integers(1, 32768), st.integers(1, 4),
       st.lists(st.floats(0.0, 1.0), min_size=1, max_size=5), st.data())
def test_more_accepted_tokens_never_make_tpot_worse(drafting, chip, batch, context, k, rates, data):
    name, method, tp = drafting
    sm = step_model(name, chip, tp, method, k)
    better = [min(1.0, r + data.draw(st.floats(0.0, 1.0))) for r in rates]
    worse_tpot = serving(with_rates(sm, rates), batch, context).tpot_seconds
    assert serving(with_rates(sm, better), batch, context).tpot_seconds <= worse_tpot


@FAST
@given(DRAFTING, CHIPS, st.integers(1, 128), st.integers(1, 32768), st.integers(1, 3))
def test_a_larger_k_at_acceptance_zero_never_makes_tpot_better(drafting, chip, batch, context, k):
    name, method, tp = drafting
    plain = serving(step_model(name, chip, tp), batch, context).tpot_seconds
    fewer = serving(with_rates(step_model(name, chip, tp, method, k), [0.0]), batch, context).tpot_seconds
    more = serving(with_rates(step_model(name, chip, tp, method, k + 1), [0.0]), batch, context).tpot_seconds
    assert plain <= fewer <= more


@FAST
@given(DRAFTING, CHIPS, st.integers(1, 4), st.integers(0, 128), st.integers(1, 65536), st.integers(0, 4096),
       st.integers(0, 65536))
def test_parts_of_a_speculating_step_sum_to_the_step(drafting, chip, k, decode, context, chunk, offset):
    name, method, tp = drafting
    sm = step_model(name, chip, tp, method, k)
    t = sm.time(sm.decode_step(decode, context, chunk=chunk, chunk_offset=offset))
    assert math.isclose(sum(t.parts.values()), t.seconds, rel_tol=1e-9)
    by_bound = t.memory_seconds + t.compute_seconds + t.comm_seconds + t.overhead_seconds
    assert math.isclose(by_bound, t.seconds, rel_tol=1e-9)
    assert all(v >= 0 for v in t.parts.values())


def test_tpot_is_the_step_over_the_tokens_it_yields_and_the_budget_holds_the_drafts():
    """dsv4-flash MTP k = 1 on one H200: 16 requests at 8,192 tokens; the steady step yields
    1.85 tokens per request, so TPOT = step / 1.85 and the instance emits 16 × 1.85 per step.
    With a workload each decoding request takes 2 tokens of the 2,048-token budget."""
    sm = step_model("dsv4-flash", "h200", 1, "mtp", 1)
    s = serving(sm, 16, 8192)
    assert s.tokens_per_step == pytest.approx(1.85)
    assert s.tpot_seconds == pytest.approx(s.step.seconds / 1.85)
    assert s.output_tokens_per_second == pytest.approx(16 * 1.85 / s.step.seconds)
    assert "0.85" in s.speculation and "step_model.speculative.mtp.acceptance" in s.speculation
    assert sm.decode_step(16, 8192).tokens == 32
    assert s.step.parts[DRAFTER_PART] > 0
    w = serving(sm, 16, 8192, Workload(1024, 1024))
    assert w.tokens_per_step == pytest.approx(1.85)


def test_each_decoding_request_takes_one_plus_k_tokens_of_the_budget():
    """vLLM schedules a running request's drafts with it: at 16 requests verifying 1 + 3 tokens,
    a 2,048-token budget leaves 2,048 − 64 = 1,984 tokens to a prompt's chunk, so a 1,984-token
    prompt is one step and a 1,985-token one two."""
    sm = step_model("dsv4-flash", "h200", 1, "mtp", 3, max_num_batched_tokens=2048)
    from pricing.step.serving import ttft

    front = sm.eff.first_token_seconds  # the API server's time to a first token, beside the steps
    one = sm.time(sm.decode_step(16, 8192, chunk=1984)).seconds
    assert ttft(sm, 17, 8192, 1984) == pytest.approx(front + one)
    last = sm.time(sm.decode_step(16, 8192, chunk=1, chunk_offset=1984)).seconds
    assert ttft(sm, 17, 8192, 1985) == pytest.approx(front + one + last)

    from pricing.step.serving import steady_step

    # prefill-bound (16 × 4,096 × 2.82 prompt tokens to prefill per 64 output tokens, 1,984 a step):
    # every step prefills 1,984 tokens, so 1,984 × 64 / 4,096 = 31 tokens come out of each
    assert steady_step(sm, 16, 8192, Workload(4096, 64))[1] == pytest.approx(31.0)


SPEC = ["--model", "dsv4-flash", "--chip", "h200", "--concurrency", "64", "--context-length", "131072"]


def test_the_plan_says_the_acceptance_it_assumed_and_takes_the_users(capsys):
    from planner.cli import main

    assert main([*SPEC, "--num-speculative-tokens", "1", "--json"]) == 0
    step = json.loads(capsys.readouterr().out)["best"]["step"]
    assert step["acceptance"] == [0.85] and step["tokens_per_step"] == pytest.approx(1.85)
    assert step["tpot_ms"] == pytest.approx(step["step_ms"] / 1.85, rel=1e-3)
    assert sum(step["parts_ms"].values()) == pytest.approx(step["step_ms"], abs=0.01)
    assert "step_model.speculative.mtp.acceptance" in step["speculative"]
    assert main([*SPEC, "--num-speculative-tokens", "1", "--speculative-acceptance", "0.6", "--json"]) == 0
    given = json.loads(capsys.readouterr().out)["best"]["step"]
    assert given["acceptance"] == [0.6] and given["tokens_per_step"] == pytest.approx(1.6)
    assert given["tpot_ms"] > step["tpot_ms"]
    assert main([*SPEC, "--num-speculative-tokens", "1", "--acceptance", "0.6"]) == 0
    assert "speculative decoding: mtp × 1: acceptance 0.60" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["1.5", "x", "0.8,-0.1"])
def test_bad_acceptance_is_one_line_naming_the_flag(capsys, value):
    from planner.cli import main

    assert main([*SPEC, "--num-speculative-tokens", "1", "--acceptance", value]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--speculative-acceptance" in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_acceptance_without_speculation_is_refused_as_having_no_effect(capsys):
    """An option that cannot apply is refused in one line (issue 39; planner/commands/flags.py NEEDS)."""
    from planner.cli import main

    assert main([*SPEC, "--acceptance", "0.6"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--speculative-acceptance: has no effect without speculative decoding" in err


def test_a_scenario_service_gives_its_acceptance(tmp_path):
    from planner.scenario import load_scenario

    path = tmp_path / "review.yaml"
    path.write_text("review: r\nservices:\n  - {name: chat, model: dsv4.1-flash, concurrency: 8, chips: [h200],\n"
                    "     speculative: {method: dspark, tokens: 5, acceptance: [0.8, 0.7]}}\n")
    scenario = load_scenario(path)
    assert scenario.service_spec(scenario.services[0]).speculative_acceptance == (0.8, 0.7)
    path.write_text(path.read_text().replace("0.7]", "1.7]"))
    with pytest.raises(InputError, match=r"services\.chat\.speculative\.acceptance: every rate must be in \[0, 1\]"):
        load_scenario(path)


# -- the drafter's own layers: its experts and its caches ---------------------------------------

def _moe_routing(model, speculative):
    return {d["routing"] for _, d in model.g.nodes(data=True) if d["kind"] == "moe" and d["speculative"] == speculative}


def test_the_dspark_layers_state_their_own_experts():
    """DeepSeek-V4.1-Flash's config (shared/models, text_config): the backbone routes each token
    to 6 of 384 experts, the three DSpark layers to dspark_num_experts_per_tok = 3 of
    dspark_n_routed_experts = 128 (vLLM deepseek_v41/nvidia/model.py DeepseekV4MoE builds the
    layers past num_hidden_layers so); V4-Flash's MTP layer routes as its backbone does."""
    v41 = load_model("dsv4.1-flash")
    assert _moe_routing(v41, None) == {Routing(384, 6)}
    assert _moe_routing(v41, "dspark") == {Routing(128, 3)}
    drafter_experts = {t.count for _, d in v41.g.nodes(data=True) if d["speculative"] == "dspark"
                       for t in d["tensors"] if t.split.startswith("expert")}
    assert drafter_experts == {128}
    v4 = load_model("dsv4-flash")
    assert _moe_routing(v4, "mtp") == _moe_routing(v4, None) and len(_moe_routing(v4, None)) == 1


def test_the_drafters_experts_by_hand():
    """DSpark × 5 at tp 8 (no expert parallelism: every expert sliced over 8 ranks), 2 requests:
    its one pass runs 2 × 5 = 10 tokens through 3 MoE layers of 128 experts, top-3. One expert
    per token: w13 (2 × 2304 / 8 rows × 5120) and w2 (5120 × 2304 / 8), 2 FLOPs each: 6 × 5120 ×
    2304 / 8 FLOPs; 10 tokens × 3 experts × 3 layers of it. Experts touched per layer:
    128 (1 − (1 − 3/128)^10) ≈ 27.03 (the backbone's 384 and top-6 would give 55.95)."""
    sm = step_model("dsv4.1-flash", "h200", 8, "dspark", 5)
    (g,) = [g for g in sm.drafting.work.groups if g.moe_layers]
    assert (g.experts, g.top_k, g.moe_layers, g.local_experts) == (128, 3, 3, 128)
    assert g.expert_flops_per_token == 6 * 5120 * 2304 // 8
    touched = 128 * (1 - (1 - 3 / 128) ** 10)
    assert touched == pytest.approx(27.03, abs=0.01)
    flops, nbytes = g.routed_work(10)
    assert flops == pytest.approx(3 * (6 * 5120 * 2304 / 8) * 10 * 3)
    assert nbytes == pytest.approx(3 * g.expert_bytes * touched)


def test_the_step_prices_the_drafter_with_its_own_routing():
    """The same DSpark step with its drafter's MoE group given the backbone's routing (384
    experts, top-6, all held): by hand, the step gains 3 layers × 10 tokens × (6 − 3) experts of
    FLOPs and 3 × expert bytes × (384 (1 − (1 − 6/384)^10) − 128 (1 − (1 − 3/128)^10)) bytes."""
    sm = step_model("dsv4.1-flash", "h200", 8, "dspark", 5)
    step = sm.decode_step(2, 4096)
    own = sm.time(step)
    (g,) = [g for g in sm.drafting.work.groups if g.moe_layers]
    other = object.__new__(StepModel)
    other.__dict__.update(sm.__dict__)
    groups = [replace(x, experts=384, top_k=6, local_experts=384) if x is g else x for x in sm.drafting.work.groups]
    other.drafting = replace(sm.drafting, work=replace(sm.drafting.work, groups=groups))
    target = other.time(step)
    assert target.flops - own.flops == pytest.approx(3 * g.expert_flops_per_token * 10 * (6 - 3))
    touched = 384 * (1 - (1 - 6 / 384) ** 10) - 128 * (1 - (1 - 3 / 128) ** 10)
    assert target.bytes - own.bytes == pytest.approx(3 * g.expert_bytes * touched)


def test_each_mtp_pass_reads_the_drafters_cache():
    """DeepSeek-V3, MTP × 3, fp8 KV cache: every layer's MLA record is 512 + 64 = 576 bytes a
    token; the target's 61 layers hold 61 × 576, the MTP layer 576, and together they are the
    kernel's total. The three drafter passes (the first over 4 × 4 tokens, two over one token per
    request) each read the MTP layer's cache of the 4 requests: 3 × 4 × 576 × 8192 bytes."""
    sm = step_model("dsv3", "h200", 8, "mtp", 3, kv_cache_dtype="fp8")
    drafter = sm.drafting.work.context
    assert drafter.cache_bytes_per_token == 576
    assert sm.context.cache_bytes_per_token == 61 * 576
    assert drafter.cache_bytes_per_token + sm.context.cache_bytes_per_token == sm.kernel.cache_bytes_per_token()
    step = sm.decode_step(4, 8192)
    read = sum(StepModel._attention_work(drafter, Step(decode=p.decode, context=8192, queries=p.queries))[1]
               for p in sm.drafting.passes(step))
    assert read == 3 * 4 * 576 * 8192


@pytest.mark.parametrize("name, method, tp", [("dsv4.1-flash", "dspark", 8), ("dsv4-flash", "mtp", 4)])
def test_the_drafters_rings_and_the_targets_sum_to_the_kernels(name, method, tp):
    """The bounded pages a request holds in steady decode, split by who reads them: the drafter's
    window rings (its passes) and the target's (the verification) sum to the kernel's, and the
    drafter holds some."""
    sm = step_model(name, "h200", tp, method, 3)
    k = sm.kernel
    drafter, target = k.own_page_bytes_steady(drafter=True), k.own_page_bytes_steady(drafter=False)
    assert sm.drafting.work.context.bounded_bytes_per_request == drafter > 0
    assert sm.context.bounded_bytes_per_request == target
    assert drafter + target == k.own_page_bytes_steady()
