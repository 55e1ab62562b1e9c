"""The serving simulator (pricing/serving): hand-derived small cases against the step model itself,
the scheduler's limits, and properties (a higher rate never lowers p99 TTFT; more KV never lowers
throughput)."""

import math
import random

import pytest

from pricing.chips import get_chip
from pricing.errors import InputError
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel
from pricing.serving import (
    ClosedLoop,
    Fixed,
    Histogram,
    Instance,
    Poisson,
    StepCost,
    Traffic,
    Uniform,
    shipped,
    simulate,
)
from pricing.step import Step, StepModel


def rank(name="llama-3.1-8b", chip="h100", tp=1, **flags):
    model = load_model(name)
    flags.setdefault("max_model_len", min(8192, model.max_position))
    kernel = Kernel.of(model, Deployment(tensor_parallel_size=tp, **flags), get_chip(chip))
    step = StepModel(kernel)
    inst = Instance.of(kernel)
    return step, inst, StepCost(step, inst.max_num_seqs, inst.max_num_batched_tokens + inst.max_num_seqs,
                                inst.max_model_len)


LLAMA8 = rank()


def serial_request(step: StepModel, prompt: int, output: int, budget: int) -> tuple[float, float]:
    """TTFT and E2E of one request alone, summed step by step from the step model: the API server's
    time outside the engine (`first_token_seconds`), the prompt in chunks of the budget, then
    output − 1 decode steps, each one token further into the context."""
    ttft, done = step.eff.first_token_seconds, 0
    while done < prompt:
        chunk = min(budget, prompt - done)
        ttft += step.time(Step(chunk=chunk, chunk_offset=done)).seconds
        done += chunk
    e2e = ttft + sum(step.decode(1, prompt + j).seconds for j in range(1, output))
    return ttft, e2e


@pytest.mark.parametrize("prompt", [16, 1000, 2000, 20000])
def test_one_request_takes_its_prefill_steps_then_its_decodes(prompt):
    step, inst, cost = LLAMA8 if prompt < 8192 else rank(max_model_len=32768)
    served = simulate(inst, cost, Traffic(ClosedLoop(1), Fixed(prompt), Fixed(64), count=1))
    ttft, e2e = serial_request(step, prompt, 64, inst.max_num_batched_tokens)
    assert served.ttft.percentile(50) == pytest.approx(ttft, rel=0.01)
    assert served.e2e.percentile(50) == pytest.approx(e2e, rel=0.01)
    assert served.tpot.percentile(50) == pytest.approx((e2e - ttft) / 63, rel=0.01)
    assert served.preemptions == 0


def test_a_closed_loop_at_concurrency_one_is_serial():
    step, inst, cost = LLAMA8
    served = simulate(inst, cost, Traffic(ClosedLoop(1), Fixed(500), Fixed(100), count=20))
    one = simulate(inst, cost, Traffic(ClosedLoop(1), Fixed(500), Fixed(100), count=1))
    assert served.duration == pytest.approx(20 * one.duration, rel=1e-9)
    assert served.ttft.percentile(99) == pytest.approx(one.ttft.percentile(50), rel=1e-9)
    assert served.output_throughput == pytest.approx(100 / one.duration, rel=1e-9)


def test_requests_admitted_together_decode_at_the_step_models_batch_step():
    """C requests sent at once share one prefill step, then decode as a batch of C: every TPOT is
    the mean of the step model's decode steps at batch C (the steady-state closed form)."""
    step, inst, cost = LLAMA8
    c, prompt, output = 32, 200, 129
    served = simulate(inst, cost, Traffic(ClosedLoop(c), Fixed(prompt), Fixed(output), count=c))
    assert served.ttft.percentile(0) == served.ttft.percentile(100)
    # one step of c prompts (c · prompt < budget): the step model's step of c · prompt tokens, each
    # prompt attending to itself alone, and c − 1 more requests' overhead
    whole = Step(chunk=c * prompt)
    flops, nbytes = (c * x for x in step.attention_work(Step(chunk=prompt)))
    attention = max(flops / (step.rates.bf16_flops * step.eff.tensor_compute),
                    nbytes / (step.rates.memory_bandwidth * step.eff.memory_bandwidth))
    prefill = (step.eff.first_token_seconds + step.time(whole).seconds - step.attention_seconds(whole) + attention
               + (c - 1) * step.eff.per_request_seconds)
    assert served.ttft.percentile(50) == pytest.approx(prefill, rel=0.03)
    decode = sum(step.decode(c, prompt + j).seconds for j in range(1, output)) / (output - 1)
    assert served.tpot.percentile(50) == pytest.approx(decode, rel=0.01)
    assert served.itl.percentile(50) == pytest.approx(decode, rel=0.02)


@pytest.mark.parametrize("flags", [
    dict(name="llama-3.1-70b", tp=4), dict(name="qwen3-30b-a3b", tp=2), dict(name="gpt-oss-20b"),
    dict(name="llama-3.1-70b", tp=4, pipeline_parallel_size=2), dict(name="dsv3", chip="h200", tp=8),
])
def test_the_step_cost_is_the_step_models_step(flags):
    name, tp, chip = flags.pop("name"), flags.pop("tp", 1), flags.pop("chip", "h100")
    step, inst, cost = rank(name, chip, tp, **flags)
    rng = random.Random(1)
    for _ in range(40):
        decode, context = rng.randint(0, 256), rng.randint(1, 6000)
        chunk = rng.choice([0, rng.randint(1, 4096)])
        offset = rng.randint(0, 2000) if chunk else 0
        if not decode and not chunk:
            continue
        truth = step.time(step.decode_step(decode, context, chunk, offset)).seconds
        mine = cost.seconds(decode, decode * context, [(chunk, offset)] if chunk else [])
        assert mine == pytest.approx(truth, rel=0.03), (decode, context, chunk, offset)


def test_a_pool_too_small_preempts_the_last_admitted_and_every_request_still_finishes():
    step, inst, cost = LLAMA8
    small = Instance(blocks=200, block_size=16, max_num_seqs=64, max_num_batched_tokens=2048, max_model_len=8192)
    # 16 requests of 100 + 300 tokens need 25 blocks each at the end: 200 blocks hold 8
    served = simulate(small, cost, Traffic(ClosedLoop(16), Fixed(100), Fixed(300), count=16))
    assert served.preemptions > 0
    assert served.output_tokens == 16 * 300
    roomy = simulate(inst, cost, Traffic(ClosedLoop(16), Fixed(100), Fixed(300), count=16))
    assert roomy.preemptions == 0
    assert roomy.output_throughput > served.output_throughput


def test_max_num_seqs_caps_the_running_batch():
    step, inst, cost = LLAMA8
    capped = Instance(inst.blocks, inst.block_size, 4, inst.max_num_batched_tokens, inst.max_model_len)
    served = simulate(capped, cost, Traffic(ClosedLoop(8), Fixed(100), Fixed(50), count=8))
    # two waves of four: the second waits for the first's 50 tokens
    ttfts = sorted(a for a, _, _ in served.per_request)
    assert ttfts[3] < ttfts[4]
    assert ttfts[4] >= ttfts[3] + 49 * step.decode(4, 100).seconds * 0.99


def test_the_token_budget_splits_a_long_prompt_into_chunks_beside_the_decodes():
    step, inst, cost = LLAMA8
    tight = Instance(inst.blocks, inst.block_size, 64, 512, inst.max_model_len)
    one = simulate(tight, cost, Traffic(ClosedLoop(1), Fixed(2000), Fixed(2), count=1))
    chunks = [step.time(Step(chunk=min(512, 2000 - o), chunk_offset=o)).seconds for o in range(0, 2000, 512)]
    assert one.ttft.percentile(50) == pytest.approx(step.eff.first_token_seconds + sum(chunks), rel=0.01)


def test_prefilled_requests_start_decoding_at_once():
    step, inst, cost = LLAMA8
    served = simulate(inst, cost, Traffic(ClosedLoop(1), Fixed(3000), Fixed(11), count=1, prefilled=True))
    assert served.ttft.percentile(50) == 0.0  # its first token, and the API server's time to it, came from prefill
    assert served.e2e.percentile(50) == pytest.approx(sum(step.decode(1, 3000 + j).seconds for j in range(1, 11)),
                                                      rel=0.01)


def test_a_prefix_cache_hit_is_not_computed_again():
    step, inst, cost = LLAMA8
    cold = simulate(inst, cost, Traffic(ClosedLoop(1), Fixed(4000), Fixed(2), count=1))
    warm = simulate(inst, cost, Traffic(ClosedLoop(1), Fixed(4000), Fixed(2), count=1, prefix_hit=0.5))
    assert warm.ttft.percentile(50) == pytest.approx(
        step.eff.first_token_seconds + step.time(Step(chunk=2000, chunk_offset=2000)).seconds, rel=0.01)
    assert warm.ttft.percentile(50) < cold.ttft.percentile(50)


@pytest.mark.parametrize("lengths", [(Fixed(1000), Fixed(200)), (Uniform(200, 1800), Uniform(50, 350)),
                                     shipped("sharegpt")])
def test_a_higher_rate_never_lowers_p99_ttft(lengths):
    step, inst, cost = LLAMA8
    p99 = [simulate(inst, cost, Traffic(Poisson(rate), *lengths, count=400, seed=3)).ttft.percentile(99)
           for rate in (1, 4, 8, 16, 32, 64)]
    assert p99 == sorted(p99)


def test_more_kv_never_lowers_throughput():
    step, inst, cost = LLAMA8
    out = []
    for blocks in (150, 300, 600, 1200, 2400, 4800):
        pool = Instance(blocks, 16, 256, 8192, 8192)
        out.append(simulate(pool, cost, Traffic(ClosedLoop(64), Fixed(500), Fixed(200), count=256)).output_throughput)
    assert out == sorted(out)


def test_poisson_arrivals_are_seeded_and_at_the_rate():
    times = Poisson(10.0).times(5000, random.Random(0))
    assert times == Poisson(10.0).times(5000, random.Random(0))
    assert 5000 / times[-1] == pytest.approx(10.0, rel=0.05)


def test_lengths_draw_within_their_bounds_at_their_mean():
    rng = random.Random(0)
    u = Uniform.around(1000, 0.5)
    draws = [u.draw(rng) for _ in range(20000)]
    assert (min(draws), max(draws)) == (500, 1500)
    assert sum(draws) / len(draws) == pytest.approx(u.mean, rel=0.01)
    prompt, output = shipped("sharegpt")
    assert prompt.mean == pytest.approx(161.31, rel=0.01) and output.mean == pytest.approx(337.99, rel=0.01)
    assert "arXiv 2309.06180" in prompt.source
    draws = [output.draw(rng) for _ in range(20000)]
    assert 4 <= min(draws) and max(draws) < 2048
    assert sum(draws) / len(draws) == pytest.approx(output.mean, rel=0.03)


def test_bad_traffic_is_one_line_naming_the_field():
    with pytest.raises(InputError, match="^rate: "):
        Poisson(0)
    with pytest.raises(InputError, match="histogram"):
        Histogram((4, 8), (0.5, 0.5))
    with pytest.raises(InputError, match="^lengths: no shipped length histogram"):
        shipped("nope")
    step, inst, cost = LLAMA8
    with pytest.raises(InputError, match="does not fit"):
        simulate(inst, cost, Traffic(ClosedLoop(1), Fixed(9000), Fixed(10), count=1))


def test_goodput_counts_the_requests_meeting_every_bound():
    step, inst, cost = LLAMA8
    served = simulate(inst, cost, Traffic(Poisson(8), Fixed(1000), Fixed(200), count=300, seed=1))
    bound = served.ttft.percentile(50)
    assert served.goodput(ttft=bound) == pytest.approx(0.5, abs=0.01)
    assert served.goodput() == 1.0
    assert served.goodput(ttft=bound, tpot=0.0) == 0.0
    assert not math.isnan(served.itl.mean)


def test_the_last_admitted_request_is_the_one_preempted():
    """Two requests of 100 + 400 tokens need 32 blocks each at the end; a pool of 40 holds one:
    the second (admitted last) is preempted, recomputed after, and finishes after the first."""
    step, inst, cost = LLAMA8
    small = Instance(blocks=40, block_size=16, max_num_seqs=8, max_num_batched_tokens=2048, max_model_len=8192)
    served = simulate(small, cost, Traffic(ClosedLoop(2), Fixed(100), Fixed(400), count=2))
    assert served.preemptions >= 1
    (_, _, first_e2e), (_, _, second_e2e) = served.per_request
    assert first_e2e < second_e2e
    # the first ran without interruption: its decodes are the step model's at batch 2, then alone
    alone = simulate(small, cost, Traffic(ClosedLoop(1), Fixed(100), Fixed(400), count=1))
    assert first_e2e < 1.5 * alone.e2e.percentile(50)
