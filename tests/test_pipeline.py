"""Pipeline parallelism in the kernel (issue 12): vLLM's layer partition, what each stage holds, each
stage's KV pool and the binding rank, derived by hand from the published configs; vLLM's own planner
(golden fixtures pp_*.json); the logged weights of the pp start-ups in ../shared/calibration."""

import json
from fractions import Fraction
from pathlib import Path

import pytest

from planner.cli import main
from pricing.errors import InputError
from pricing.kernel.pipeline import layer_partition
from pricing.registry import shipped
from tests.helpers import kernel

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
GOLDEN = sorted((ROOT / "tests" / "golden" / "vllm-0.33").glob("pp_*.json"))
BF16 = 2
GiB = 1 << 30


def config(name: str) -> dict:
    path = SHARED / "models" / name
    if not path.exists():
        pytest.skip("../shared/models is not present")
    return json.loads(path.read_text())


# -- the partition: vllm/distributed/utils.py get_pp_indices --------------------------------------

@pytest.mark.parametrize("layers,pp,expected", [
    (32, 2, (16, 16)), (32, 4, (8, 8, 8, 8)), (32, 3, (11, 11, 10)),  # remainder before the last stage
    (61, 2, (31, 30)), (61, 4, (15, 15, 16, 15)),  # one extra layer: the second-to-last stage
    (126, 4, (31, 32, 32, 31)), (10, 4, (2, 3, 3, 2)), (7, 1, (7,)),
])
def test_layer_partition_as_get_pp_indices(layers, pp, expected):
    assert layer_partition(layers, pp) == expected


def test_vllm_pp_layer_partition_is_checked_as_vllm_checks_it():
    assert layer_partition(32, 2, (12, 20)) == (12, 20)
    with pytest.raises(InputError, match="does not match pp_size"):
        layer_partition(32, 2, (10, 10, 12))
    with pytest.raises(InputError, match="does not match num_hidden_layers"):
        layer_partition(32, 2, (12, 12))
    with pytest.raises(InputError, match="at most 32"):
        layer_partition(32, 33)


# -- weights per stage, by hand -------------------------------------------------------------------

def llama_layer_bytes(c: dict, tp: int = 1) -> int:
    h, inter, heads, kv = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"], c["num_key_value_heads"]
    d = h // heads
    q = h // tp * h
    k_v = 2 * max(1, kv // tp) * d * h
    o = h * (h // tp)
    mlp = 2 * inter // tp * h + h * (inter // tp)
    return (q + k_v + o + mlp + 2 * h) * BF16  # two RMSNorms


def qwen3_moe_layer_bytes(c: dict) -> int:
    h, heads, kv, d = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    attn = heads * d * h + 2 * kv * d * h + h * heads * d + 2 * d  # q, k, v, o, q_norm, k_norm
    experts = c["num_experts"] * (2 * c["moe_intermediate_size"] * h + h * c["moe_intermediate_size"])
    return (attn + c["num_experts"] * h + experts + 2 * h) * BF16  # router, experts, two norms


def dsv3_layer_bytes(c: dict, layer: int, tp: int) -> int:
    """DeepSeek-V3 served in bf16: MLA attention, dense MLP on the first layers, MoE after."""
    h, heads = c["hidden_size"], c["num_attention_heads"]
    qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    attn = (c["q_lora_rank"] * h + c["q_lora_rank"] + heads * qk // tp * c["q_lora_rank"]
            + (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * h + c["kv_lora_rank"]
            + heads * (c["qk_nope_head_dim"] + c["v_head_dim"]) // tp * c["kv_lora_rank"]
            + h * (heads * c["v_head_dim"] // tp))
    if layer < c["first_k_dense_replace"]:
        mlp = 3 * c["intermediate_size"] // tp * h
        extra = 0
    else:
        m = c["moe_intermediate_size"]
        routed, shared = c["n_routed_experts"], c["n_shared_experts"]
        mlp = routed * 3 * m // tp * h + 3 * shared * m // tp * h + routed * h  # experts, shared experts, router
        extra = c["n_routed_experts"] * 4  # the fp32 score-correction bias
    return (attn + mlp + 2 * h) * BF16 + extra


def vocab_bytes(c: dict, tp: int = 1) -> int:
    return c["vocab_size"] // tp * c["hidden_size"] * BF16  # these vocabularies are multiples of 64 × tp


def rotary_bytes(c: dict) -> int:
    """The one cos/sin cache every decoder layer shares (get_rope's _ROPE_DICT), bf16, whole on every
    rank and on every stage that builds a layer: rows × rotary width. Llama-3 and default ropes cover
    max_position_embeddings rows of head_dim; DeepSeek's YaRN original_max_position_embeddings ×
    factor rows of qk_rope_head_dim (rotary_embedding/llama3_rope.py, deepseek_scaling_rope.py)."""
    if "qk_rope_head_dim" in c:
        rope = c["rope_scaling"]
        return rope["original_max_position_embeddings"] * rope["factor"] * c["qk_rope_head_dim"] * BF16
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    return c["max_position_embeddings"] * head_dim * BF16


def hand_stage_weights(c: dict, per_layer, counts: tuple[int, ...], tp: int = 1) -> list[int]:
    out, start = [], 0
    for i, n in enumerate(counts):
        w = sum(per_layer(layer) for layer in range(start, start + n)) + rotary_bytes(c)
        if i == 0:
            w += vocab_bytes(c, tp)  # embed_tokens
        if i == len(counts) - 1:
            w += vocab_bytes(c, tp) + c["hidden_size"] * BF16  # lm_head + final norm
        out.append(w)
        start += n
    return out


@pytest.mark.parametrize("pp", [2, 4])
def test_dense_stage_weights_by_hand(pp):
    c = config("meta-llama--Meta-Llama-3.1-8B.json")
    k = kernel("llama-3.1-8b", "h100", pipeline_parallel_size=pp)
    counts = (32 // pp,) * pp
    expected = hand_stage_weights(c, lambda i: llama_layer_bytes(c), counts)
    assert [s.fixed_bytes().weights for s in k.instance.ranks] == expected
    # untied: nothing held twice but the rotary cache, which every stage builds
    assert sum(expected) - (pp - 1) * rotary_bytes(c) == kernel("llama-3.1-8b", "h100").fixed_bytes().weights


@pytest.mark.parametrize("pp", [2, 4])
def test_moe_stage_weights_by_hand(pp):
    c = config("Qwen--Qwen3-30B-A3B.json")
    k = kernel("qwen3-30b-a3b", "h100", pipeline_parallel_size=pp)
    expected = hand_stage_weights(c, lambda i: qwen3_moe_layer_bytes(c), (48 // pp,) * pp)
    assert [s.fixed_bytes().weights for s in k.instance.ranks] == expected


@pytest.mark.parametrize("pp,counts", [(2, (31, 30)), (4, (15, 15, 16, 15))])
def test_mla_stage_weights_by_hand(pp, counts):
    c = config("deepseek-ai--DeepSeek-V3.json")
    k = kernel("dsv3", "b200", quantization="bf16", tensor_parallel_size=8, pipeline_parallel_size=pp)
    expected = hand_stage_weights(c, lambda i: dsv3_layer_bytes(c, i, 8), counts, tp=8)
    assert [s.fixed_bytes().weights for s in k.instance.ranks] == expected


# the tied embedding on the first and the last stage, with gemma-3's vision tower on both:
# tests/test_vision.py::test_every_pipeline_stage_holds_the_tower


def test_a_drafter_sits_on_the_last_stage():
    plain = kernel("dsv3", "h200", tensor_parallel_size=8, pipeline_parallel_size=2)
    mtp = kernel("dsv3", "h200", tensor_parallel_size=8, pipeline_parallel_size=2, num_speculative_tokens=1)
    first, last = (s.fixed_bytes().weights for s in plain.instance.ranks)
    first_mtp, last_mtp = (s.fixed_bytes().weights for s in mtp.instance.ranks)
    assert first_mtp == first and last_mtp > last
    assert len(mtp.instance.ranks[1].specs()) == 31  # 30 layers + the MTP layer's cache


# -- KV per stage and the binding rank, by hand ---------------------------------------------------

@pytest.mark.parametrize("pp", [2, 4])
def test_dense_stage_pools_and_the_binding_rank_by_hand(pp):
    """Each stage's pool is its budget less its own fixed memory; its block is its own layers' pages
    (16 tokens × 8 KV heads × 128 × 2 tensors × 2 bytes each); vLLM keeps the fewest blocks. The
    stages hold equal layers and the embedding weighs as much as the LM head, so the last stage,
    which alone runs the sampler warm-up, binds."""
    c = config("meta-llama--Meta-Llama-3.1-8B.json")
    k = kernel("llama-3.1-8b", "h100", pipeline_parallel_size=pp, max_model_len=32768)
    e = k.engine
    weights = hand_stage_weights(c, lambda i: llama_layer_bytes(c), (32 // pp,) * pp)
    reg = shipped()
    forward = int(reg.value("cost_model_memory.activation_buffers.llama")[1] * e.max_num_batched_tokens
                  * c["hidden_size"] * reg.value("cost_model_memory.activation_element_bytes"))
    rows = min(e.max_num_seqs, e.max_num_batched_tokens)
    sampler = int(Fraction(str(reg.value("cost_model_memory.sampler_bytes_per_logit"))) * rows * c["vocab_size"]
                  + Fraction(str(reg.value("cost_model_memory.sampler_hidden_bytes"))) * e.max_num_batched_tokens
                  * c["hidden_size"])
    law = reg.value("cost_model_memory.cuda_graph_laws.llama")["mixed"]  # the piecewise graphs, per layer
    ceiling = k.cuda_graph()[1].mixed
    graphs = int(law["floor"] + (law["per_token"] + law["per_layer_token"] * (32 // pp)) * ceiling)
    budget = -(-k.chip.memory_bytes * 92 // 100)
    assert k.budget() == budget
    block = (32 // pp) * 16 * 8 * 128 * 2 * 2
    blocks = []
    for i, stage in enumerate(k.instance.ranks):
        act = max(forward, sampler) if i == pp - 1 else forward
        assert stage.cuda_graph()[0] == graphs  # this stage's 32 / pp layers
        fixed = weights[i] + act + graphs + stage.non_torch_bytes()
        assert stage.fixed_bytes().total == fixed
        assert stage.layout().bytes_per_block == block
        blocks.append((budget - fixed) // block)
    assert k.instance.num_blocks() == min(blocks)
    assert k.stage.index == pp - 1 == blocks.index(min(blocks))
    assert k.instance.kv_cache_tokens() == min(blocks) * 16  # a full-attention model: blocks × block tokens
    # a request at 4,096 tokens holds 256 blocks of this stage's size on every stage
    assert k.sequence_variable_bytes(4096) == 256 * block


def test_a_kernel_is_one_rank_and_its_instance_combines_the_stages():
    """Kernel holds one rank's memory; the stages' combination (fewest blocks, every stage's start-up
    check, the binding stage) is the Instance's (pricing/kernel/instance.py), the same for every rank."""
    from pricing.chips import get_chip
    from pricing.graph import load_model
    from pricing.kernel import Deployment, Kernel
    from pricing.kernel.instance import Instance

    assert [n for n in ("stages", "binding_stage", "num_blocks", "max_concurrency", "kv_cache_tokens",
                        "fits_one_request") if hasattr(Kernel, n)] == []
    k = Kernel.of(load_model("llama-3.1-8b"), Deployment(pipeline_parallel_size=3), get_chip("h200"))
    instance = k.instance
    assert isinstance(instance, Instance) and [s.stage.index for s in instance.ranks] == [0, 1, 2]
    assert all(s.instance is instance for s in instance.ranks) and instance.binding() is k
    assert instance.num_blocks() == min(s.rank_blocks() for s in instance.ranks)
    assert instance.fits_one_request() == all(s.rank_fits_one_request() for s in instance.ranks)
    one = Kernel.of(load_model("llama-3.1-8b"), Deployment(), get_chip("h200"))
    assert one.instance.ranks == (one,) and one.instance.num_blocks() == one.rank_blocks()


def test_the_stage_with_more_layers_binds():
    """32 layers at pp 3 split 11 + 11 + 10: the 10-layer last stage has the smaller block."""
    k = kernel("llama-3.1-8b", "h100", pipeline_parallel_size=3, kv_cache_memory_bytes=30 * GiB)
    blocks = [s.layout().bytes_per_block for s in k.instance.ranks]
    assert blocks == [11 * 65536, 11 * 65536, 10 * 65536]
    assert k.instance.num_blocks() == 30 * GiB // (11 * 65536) and k.stage.index == 0


def test_mla_stage_blocks_and_binding_by_hand():
    """Kimi-K2, tp 8 pp 4, fp8 latent cache: 576 bytes per token per layer, never divided by tp,
    64-token blocks (FlashMLA); 61 layers as 15, 15, 16, 15, so the third stage's block is widest."""
    k = kernel("kimi-k2", "h100", tensor_parallel_size=8, pipeline_parallel_size=4, kv_cache_dtype="fp8",
               max_model_len=32768, kv_cache_memory_bytes=20 * GiB)
    assert [s.layout().bytes_per_block for s in k.instance.ranks] == [n * 64 * 576 for n in (15, 15, 16, 15)]
    assert k.instance.num_blocks() == 20 * GiB // (16 * 64 * 576) and k.stage.index == 2
    assert k.blocks_per_request() == 32768 // 64


def test_pp_plus_one_batches_in_flight_widen_the_window_rings():
    """gpt-oss: a window ring reserves window − 1 + (pp + 1) × max_num_batched_tokens on admission."""
    for pp, batches in ((1, 2), (2, 3), (4, 5)):
        k = kernel("gpt-oss-120b", "h100", pipeline_parallel_size=pp, max_num_batched_tokens=8192)
        assert k.engine.max_in_flight_tokens == batches * 8192
        window = next(g for g in k.layout().groups if not g.grows)
        assert k.blocks_per_request() - 8192 == -(-(127 + batches * 8192) // 16) + 1
        assert window.block_tokens == 16
    sync = kernel("gpt-oss-120b", "h100", pipeline_parallel_size=2, async_scheduling=False)
    assert sync.engine.in_flight_batches == 2


def test_more_stages_never_hold_more_weights_per_rank():
    w = [kernel("llama-3.1-70b", "h100", pipeline_parallel_size=pp).fixed_bytes().weights for pp in (1, 2, 4, 8)]
    assert w == sorted(w, reverse=True)


# -- vLLM's own planner ---------------------------------------------------------------------------

@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_golden_pp_fixture(path):
    case = json.loads(path.read_text())
    p, v = case["project"], case["vllm"]
    memory = p["available_memory_bytes"]
    per_stage = memory if isinstance(memory, list) else [memory] * p["deployment"]["pipeline_parallel_size"]
    k = kernel(p["model"], p["chip"], kv_cache_memory_bytes=per_stage[0], **p["deployment"])
    stages = k.instance.ranks
    assert [s.layout().bytes_per_block for s in stages] == [w["bytes_per_block"] for w in v["workers"]]
    assert [len(s.specs()) for s in stages] == [w["layers"] for w in v["workers"]]
    assert k.blocks_per_request() == v["blocks_per_request_total"]
    assert k.engine.max_in_flight_tokens == v["max_in_flight_tokens"]
    for stage in stages:  # vLLM's global groups, projected onto each stage
        mine = [[n for n in g["layers"] if _in_stage(n, stage.stage)] for g in v["groups"]]
        assert [len(g.layers) for g in stage.layout().groups] == [len(m) for m in mine]
    assert min(m // s.layout().bytes_per_block for m, s in zip(per_stage, stages, strict=True)) == v["num_blocks"]
    if not isinstance(memory, list):
        assert k.instance.num_blocks() == v["num_blocks"]
        assert k.instance.kv_cache_tokens() == v["kv_cache_size_tokens"]
        assert k.instance.max_concurrency() == pytest.approx(v["max_concurrency"], rel=1e-12)
        assert f"{k.instance.kv_cache_tokens():,} tokens" in v["log_line"]


def _in_stage(vllm_layer: str, stage) -> bool:
    """Whether vLLM's layer name ('model.layers.12.self_attn.attn') lies in `stage`."""
    number = int(vllm_layer.split(".")[2])
    return stage.first_layer <= number < stage.end_layer


# -- real start-ups ------------------------------------------------------------------------------

CARDS = {"meta-llama/Llama-3.1-8B-Instruct": ("llama-3.1-8b", "h100"), "Qwen/Qwen3-32B": ("qwen3-32b", "h100")}


def pp_records():
    path = SHARED / "calibration" / "vllm-startups-train.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if (r.get("pp") or 1) > 1 and r["observed"].get("weights_gib") and r["model"] in CARDS]


@pytest.mark.parametrize("record", pp_records(), ids=lambda r: r["id"])
def test_stage_weights_match_the_logged_pp_startups_within_1_percent(record):
    card, chip = CARDS[record["model"]]
    k = kernel(card, chip, tensor_parallel_size=record["tp"], pipeline_parallel_size=record["pp"])
    logged = record["observed"]["weights_gib"]
    for stage in k.instance.ranks:  # every worker logged the same 'Model loading took' figure
        assert stage.fixed_bytes().weights / GiB == pytest.approx(logged, rel=0.01)


def test_the_pp_records_are_found():
    assert len(pp_records()) == 2 or not (SHARED / "calibration").exists()


# -- plan memory -pp N ---------------------------------------------------------------------------

def test_plan_memory_shows_every_stage(capsys):
    assert main(["memory", "--model", "llama-3.1-8b", "--chip", "h100", "-pp", "2", "--max-model-len", "8192"]) == 0
    out = capsys.readouterr().out
    assert "stage 0 of 2 │ 0-15" in out and "stage 1 of 2 │ 16-31" in out
    assert "binding: stage 1 of 2 (layers 16-31)" in out


def test_plan_memory_json_lists_every_stage(capsys):
    assert main(["memory", "--model", "llama-3.1-8b", "--chip", "h100", "-pp", "4", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    stages = report["pipeline"]["stages"]
    assert [s["layers"] for s in stages] == [[0, 8], [8, 16], [16, 24], [24, 32]]
    assert report["pipeline"]["binding_stage"] == 3
    assert report["fixed"]["weights"] == stages[3]["fixed"]["weights"]
    assert min(s["own_num_blocks"] for s in stages) == report["num_blocks"]
