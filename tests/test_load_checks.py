"""vLLM's load-time shape checks as rules of the release packs (issue 39, first part).

- Golden: the 0.33 pack's checks agree, on every case, with vLLM 0.33's own functions
  (tests/golden/load_checks/vllm-0.33.0.json, written by scripts/fixtures/golden_load_checks.py through the
  oracle: every card with block-FP8 layers under every split the search enumerates on an H200).
- The kernel refuses what vLLM refuses (exit 1, vLLM's exception text) and starts what it starts;
  releases differ: before 0.29 a routed-expert shard that does not divide the FP8 block raises, from
  0.29 it is refined (fused_moe/oracle/fp8.py refine_fp8_moe_block_shape).
- The search never offers a layout a layer refuses.
- Every quantized scheme a shipped card serves is judged by a check or stated as unchecked.
- Weight-only INT scale groups cut by the split (GPTQ / AWQ / compressed-tensors WNA16, dense and MoE) and
  MXFP4's padding: hand-derived from the vLLM 0.33.0 wheel's source (no oracle run), each on a shipped card
  or a ../shared/models config that starts at one split and is refused at another.
"""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.candidates.service import ResolvedService
from planner.cli import cli
from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel, Startup
from pricing.kernel.startup import load_refusal
from pricing.registry import shipped
from pricing.rules import get
from pricing.rules.load_checks import (
    GptOssIntermediateDividesWorld,
    Split,
    ValidateFp8BlockShape,
    ValidateFp8BlockShapeMoe,
    Wna16GroupsSplit,
    _partitions,
    judged,
    refusal,
)

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = json.loads((ROOT / "tests" / "golden" / "load_checks" / "vllm-0.33.0.json").read_text())
CASES = [{**c, **GOLDEN["models"][c["card"]]} for c in GOLDEN["cases"]]  # each case with its model's layers
QWEN_FP8 = "qwen3-235b-a22b-fp8"
WHAT_IF = "fp8_block"


@cache
def graph(card: str):
    """A card's graph; a probe's (scripts/fixtures/golden_load_checks.py PROBES) from its published config.json
    with the fixture's edits, written to a folder."""
    if card.startswith(f"{WHAT_IF}:"):  # a shipped card served as the fp8_block what-if
        return load_model(card.removeprefix(f"{WHAT_IF}:"), WHAT_IF)
    if not card.startswith("probe:"):
        return load_model(card)
    config = next(c["config"] for c in CASES if c["card"] == card)
    cfg = json.loads((ROOT.parent / "shared" / "models" / config["file"]).read_text())
    folder = Path(tempfile.mkdtemp()) / card.removeprefix("probe:")
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**cfg, **config["edits"]}))
    return load_model(str(folder))


def facts(version: str):
    release, reg = get(version), shipped()
    return lambda name: release.fact(reg, name)


def test_the_fixture_is_vllm_0_33_and_covers_every_block_fp8_card():
    assert GOLDEN["vllm"] == "0.33.0" and GOLDEN["chip"] == "h200"
    cards = {c["card"] for c in CASES}
    assert {"qwen3-235b-a22b-fp8", "dsv3", "dsr1", "dsv3.2", "kimi-k2", "minimax-m2.5", "minimax-m2.7",
            "dsv4-flash", "dsv4-pro", "dsv4.1-flash"} <= cards
    assert len(CASES) == 774 and sum(c["card"].startswith("probe:") for c in CASES) == 122
    assert sum(c["card"].startswith(f"{WHAT_IF}:") for c in CASES) == 222
    # vLLM's answers the rules must reproduce, among them: the issue's split refined, not refused ...
    qwen = {c["id"]: c["vllm"]["moe"] for c in CASES if c["card"] == QWEN_FP8}
    issue = {k: v for k, v in qwen[f"{QWEN_FP8}/tp1-dp8-pp1-noep"].items() if k != "kernels_without_fp8"}
    assert issue == {"intermediate_per_rank": 192, "message": None, "moe_tp": 8, "refined": [64, 64], "use_ep": False}
    # ... and a 32-way MoE shard (1,536 / 32 = 48: gcd 16 < 32) refused
    assert qwen[f"{QWEN_FP8}/tp4-dp8-pp1-noep"]["message"] == (
        "ValueError: The output_size of gate's and up's weight = 48 is not divisible by weight quantization "
        "block_n = 128.")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_rules_agree_with_vllm(case):
    s = case["split"]
    split = Split(s["tp"], s["dp"], s["pcp"], s["ep"], "sm90")
    g = graph(case["card"])
    linear = ValidateFp8BlockShape().judge(g, split, facts("0.33"))
    moe = ValidateFp8BlockShapeMoe().judge(g, split, facts("0.33"))
    want_linear = case["vllm"]["linear"]
    assert (linear and linear.message) == (want_linear and want_linear["message"])
    want_moe = case["vllm"]["moe"]
    assert (moe and moe.message) == (want_moe and want_moe["message"])
    if want_moe is not None:
        assert split.moe_tp == want_moe["moe_tp"]
    if want_moe is not None and "kernels_without_fp8" in want_moe:  # a refined block, on a chip without FP8
        kernels = want_moe["kernels_without_fp8"]
        # backends with no kernel class to ask, none of which select_fp8_moe_backend picks by itself
        assert {k.split(":")[0] for k in kernels if k.startswith("unjudged")} == {
            "unjudged NONE", "unjudged EMULATION", "unjudged TRITON_MXFP8", "unjudged AITER_MXFP8"}
        taken = [k for k in kernels if not k.startswith("unjudged")]
        on_a100 = ValidateFp8BlockShapeMoe().judge(g, Split(s["tp"], s["dp"], s["pcp"], s["ep"], "sm80"), facts("0.33"))
        assert (on_a100 and on_a100.message) == (None if taken else
                                                  "NotImplementedError: No FP8 MoE backend supports the deployment "
                                                  "configuration.")


# the shipped hybrid cards whose recurrent mixers hold linear layers, judged as the fp8_block what-if
HYBRID = ("kimi-linear-48b-a3b", "nemotron-3-nano-30b-a3b", "nemotron-h-56b", "qwen3-next-80b-a3b", "qwen3.5-35b-a3b",
          "qwen3.5-397b-a17b")
MIXERS = [(m, tp) for m in GOLDEN["mixers"] for tp in m["tp"]]


def test_the_fixture_covers_the_hybrid_cards_as_the_fp8_block_what_if():
    """Every hybrid card with its own mixer projections, under every split the search gives it as the fp8_block
    what-if, and its layer-0 mixer built by vLLM at each tp; among vLLM's answers: Qwen3-Next starts at tp 2
    (its in_proj_ba at the model dtype, as Qwen's FP8 checkpoint keeps it) and at tp 8 its shared expert's
    down projection (512 / 8 = 64 input rows) is refused; block-FP8 in_proj_ba itself is refused from tp 2."""
    assert {c["card"] for c in CASES if c["card"].startswith(f"{WHAT_IF}:")} == {f"{WHAT_IF}:{c}" for c in HYBRID}
    assert {(m["card"], m["variant"]) for m in GOLDEN["mixers"]} == {(c, "what-if") for c in HYBRID} | {
        (c, "in_proj_ba converted") for c in HYBRID if c.startswith("qwen")}
    qwen_next = {c["id"].split("/")[1]: c["vllm"]["linear"] for c in CASES
                 if c["card"] == f"{WHAT_IF}:qwen3-next-80b-a3b"}
    assert qwen_next["tp2-dp1-pp1-noep"] is None
    assert qwen_next["tp8-dp1-pp1-noep"] == {
        "layer": "layers.0.mlp.shared_expert.down_proj",
        "message": "ValueError: Weight input_size_per_partition = 64 is not divisible by weight quantization "
                   "block_k = 128."}
    converted = next(m for m in GOLDEN["mixers"] if m["card"] == "qwen3-next-80b-a3b" and m["variant"] != "what-if")
    assert converted["vllm"]["2"] == {"error": "ValueError: Weight output_partition_size = 32 is not divisible by "
                                               "weight quantization block_n = 128."}
    nemotron = {c["id"].split("/")[1]: c["vllm"]["linear"] for c in CASES if c["card"] == f"{WHAT_IF}:nemotron-h-56b"}
    assert nemotron["tp4-dp1-pp1-noep"] is None and nemotron["tp8-dp1-pp1-noep"] is None  # in_proj's outputs fused
    kimi = {c["id"].split("/")[1]: c["vllm"]["linear"] for c in CASES if c["card"] == f"{WHAT_IF}:kimi-linear-48b-a3b"}
    assert all(kimi[f"tp{tp}-dp1-pp1-noep"] is None for tp in (2, 4, 8))  # in_proj_qkvgfab's beta shard let through
    kda = next(m for m in GOLDEN["mixers"] if m["card"] == "kimi-linear-48b-a3b")
    assert kda["vllm"]["2"]["layers"]["in_proj_qkvgfab"]["output_partition_sizes"] == [2048, 2048, 2048, 16, 128]
    mamba = next(m for m in GOLDEN["mixers"] if m["card"] == "nemotron-h-56b")  # 8 groups on an NVL72 domain's tp 16
    assert mamba["vllm"]["16"] == {"error": "AssertionError: If tensor parallel world size does not divide num_groups, "
                                            "then num_groups must equal 1."}


@cache
def mixer_graph(card: str, variant: str):
    """The graph a mixer case is judged on: the card as the fp8_block what-if, or ("in_proj_ba converted") the card's
    config.json with a block-FP8 quantization_config that converts every linear layer, from a folder."""
    if variant == "what-if":
        return load_model(card, WHAT_IF)
    import yaml

    cfg = yaml.safe_load((ROOT / "pricing" / "cards" / f"{card}.yaml").read_text())["config"]
    cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic",
                                  "weight_block_size": [128, 128]}
    folder = Path(tempfile.mkdtemp()) / card
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return load_model(str(folder))


@pytest.mark.parametrize("mixer, tp", MIXERS, ids=[f"{m['card']}/{m['variant']}/tp{tp}" for m, tp in MIXERS])
def test_recurrent_mixers_are_built_as_vllm_builds_them(mixer, tp):
    """A recurrent mixer's linear layers, as the graph holds them, are the layers vLLM 0.33 builds (its own
    QwenGatedDeltaNetAttention / MambaMixer2 under the checkpoint's Fp8Config, the fixture's `mixers`): the same
    ones quantized, the same output partitions per rank (Qwen3.5's four and two merged outputs, Mamba-2's five),
    the same fused-shard allowance; and the rules refuse a mixer layer exactly where vLLM's construction raises,
    in its words (Qwen3-Next's block-FP8 in_proj_ba from tp 2)."""
    g, split, want = mixer_graph(mixer["card"], mixer["variant"]), Split(int(tp)), mixer["vllm"][tp]
    prefix = mixer["prefix"].removeprefix("model.")
    found = refusal(CHECKS_0_33, g, split, facts("0.33"))
    in_mixer = found if found is not None and (found.layer == prefix or found.layer.startswith(prefix + ".")) else None
    if want["error"] is not None:
        assert in_mixer is not None and in_mixer.message == want["error"], found
        return
    assert in_mixer is None, in_mixer
    tensors = next(d["tensors"] for name, d in g.nodes() if name == prefix)
    by_name = {t.name.removeprefix(prefix + "."): t for t in tensors}
    block_n = mixer["quantization_config"]["weight_block_size"][0]
    for name, layer in want["layers"].items():
        if name == "conv1d" and name not in by_name:  # Kimi-Linear's q, k, v convs, one packed conv1d in vLLM
            assert layer["method"] == "UnquantizedLinearMethod"
            continue
        t = by_name[name]
        assert (str(t.fmt) == WHAT_IF) == (layer["method"] == "Fp8LinearMethod"), name
        if name == "conv1d":  # never quantized (quant_config None in vLLM), a plain tensor in the graph
            continue
        inner, _, parts = _partitions(t, tensors, split.tp)
        if t.split == "replicated":  # ReplicatedLinear (Kimi-Linear's g_a_proj): whole on every rank
            assert [t.rows] == layer["output_partition_sizes"], name
        elif t.split == "row":
            assert (inner, [t.rows]) == (layer["input_size_per_partition"], layer["output_partition_sizes"]), name
        else:
            assert parts == layer["output_partition_sizes"], name
            assert (len(parts) > 1 and any(p % block_n for p in parts)) == layer["allow_fp8_block_shape_mismatch"]


def test_plan_memory_refuses_a_mamba2_mixer_whose_groups_tp_does_not_divide():
    """Nemotron-H's 8 Mamba-2 groups: vLLM 0.33's MambaMixer2 asserts at tp 16 (the fixture's `mixers`), whatever
    the format; tp 8 starts."""
    args = ["memory", "--model", "nemotron-h-56b", "--chip", "gb200"]
    assert CliRunner().invoke(cli, [*args, "-tp", "8"]).exit_code == 0
    done = CliRunner().invoke(cli, [*args, "-tp", "16"])
    assert done.exit_code == 1
    assert ("vLLM would not start (load): AssertionError: If tensor parallel world size does not divide num_groups, "
            "then num_groups must equal 1. (layers.0.mixer") in done.output


def test_plan_memory_starts_qwen3_next_fp8_block_at_tp_2_and_refuses_tp_8():
    """As vLLM 0.33 does with a block-FP8 Qwen3-Next whose in_proj_ba stays at the model dtype (the fixture's
    cases): tp 2 starts; tp 8 leaves the shared expert's down projection 64 input rows per rank, under a block."""
    args = ["memory", "--model", "qwen3-next-80b-a3b", "--chip", "h200", "--quantization", WHAT_IF]
    done = CliRunner().invoke(cli, [*args, "-tp", "2"])
    assert done.exit_code == 0, done.output
    done = CliRunner().invoke(cli, [*args, "-tp", "8"])
    assert done.exit_code == 1
    assert ("vLLM would not start (load): ValueError: Weight input_size_per_partition = 64 is not divisible by weight "
            "quantization block_k = 128. (layers.0.mlp.shared_expert.down_proj") in done.output


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_kimi_linear_fp8_block_starts_as_vllm_builds_its_fused_kda_projection(tp):
    """vLLM 0.33 fuses Kimi-Linear's q, k, v, b and f_a into one merged in_proj_qkvgfab, f_a whole on every rank
    (kimi_gdn_linear_attn.py: output sizes [4,096, 4,096, 4,096, 32, 128 × tp]); its 32 / tp beta rows are off
    the 128 block, which the fused allowance lets through, so the block-FP8 what-if builds at tp 2, 4 and 8 (the
    fixture's cases and its mixer built by vLLM). The graph states the layer so, and plan memory starts it."""
    g = load_model("kimi-linear-48b-a3b", WHAT_IF)
    tensors = next(d["tensors"] for name, d in g.nodes() if name == "layers.0.self_attn")
    fused = next(t for t in tensors if t.name.endswith("in_proj_qkvgfab"))
    assert not any(t.name.endswith((".q_proj", ".k_proj", ".v_proj", ".b_proj", ".f_a_proj")) for t in tensors)
    assert _partitions(fused, tensors, tp) == (2304, 3 * 4096 + 32 + 128 * tp, [4096 // tp] * 3 + [32 // tp, 128])
    assert refusal(CHECKS_0_33, g, Split(tp), facts("0.33")) is None
    done = CliRunner().invoke(cli, ["memory", "--model", "kimi-linear-48b-a3b", "--chip", "h200", "--quantization",
                                    WHAT_IF, "-tp", str(tp)])
    assert done.exit_code == 0, done.output
    assert "would not start" not in done.output


def _memory(*args):
    return CliRunner().invoke(cli, ["memory", "--model", QWEN_FP8, "--chip", "h200", *args])


def test_plan_memory_starts_what_vllm_0_33_refines():
    """tp 1 × dp 8 without EP: 1,536 / 8 = 192 per rank, refined to 64 × 64 blocks (gcd(128, 128, 192,
    4,096) = 64 >= 32) and served by the Triton experts on an H200: it starts (the fixture's case)."""
    done = _memory("-dp", "8")
    assert done.exit_code == 0, done.output
    assert "would not start" not in done.output


def test_plan_memory_refuses_a_shard_vllm_0_33_refuses():
    done = _memory("-tp", "4", "-dp", "8")
    assert done.exit_code == 1
    assert ("plan: vLLM would not start (load): ValueError: The output_size of gate's and up's weight = 48 is not "
            "divisible by weight quantization block_n = 128.") in done.output
    assert "what would fit: -tp 4 -dp 8 --enable-expert-parallel starts" in done.output
    assert _memory("-tp", "4", "-dp", "8", "--enable-expert-parallel").exit_code == 0


def test_plan_memory_refuses_the_issues_split_on_a_release_without_refinement():
    """vLLM 0.28 (the 0.28.0 wheel's Fp8MoEMethod.create_weights) raises on 192 per rank; -dp 4 (384)
    and -dp 8 with expert parallelism (1,536 whole) start."""
    done = _memory("-dp", "8", "--vllm-version", "0.28")
    assert done.exit_code == 1
    assert ("ValueError: The output_size of gate's and up's weight = 192 is not divisible by weight quantization "
            "block_n = 128.") in done.output
    assert _memory("-dp", "4", "--vllm-version", "0.28").exit_code == 0
    assert _memory("-dp", "8", "--enable-expert-parallel", "--vllm-version", "0.28").exit_code == 0
    # from 0.29 (the 0.26 pack's last release) the shard is refined, as in 0.33
    assert _memory("-dp", "8", "--vllm-version", "0.29").exit_code == 0


def test_a_refined_block_needs_an_fp8_platform():
    """Hand-derived from vLLM 0.33: only TritonExperts takes a refined block (experts/triton_moe.py,
    where current_platform.supports_fp8(): CUDA capability >= 89), so on an A100 (sm80) no FP8 MoE
    backend is left (oracle/fp8.py select_fp8_moe_backend raises NotImplementedError)."""
    g = graph(QWEN_FP8)
    check = ValidateFp8BlockShapeMoe()
    assert check.judge(g, Split(1, 8, 1, False, "sm90"), facts("0.33")) is None
    refused = check.judge(g, Split(1, 8, 1, False, "sm80"), facts("0.33"))
    assert refused.message == "NotImplementedError: No FP8 MoE backend supports the deployment configuration."
    assert check.judge(g, Split(1, 8, 1, True, "sm80"), facts("0.33")) is None


def test_moe_tp_is_flattened_across_dp_and_pcp_without_expert_parallelism():
    assert Split(2, 4).moe_tp == 8 and Split(2, 4, 2).moe_tp == 16
    assert Split(2, 4, ep=True).moe_tp == 1 and Split(1, 1, ep=True).moe_tp == 1


def test_older_packs_check_fused_shards_without_the_allowance():
    """Hand-derived from the 0.10.2 wheel (fp8.py Fp8LinearMethod.create_weights) and 0.11.0's
    validate_fp8_block_shape, which have no _maybe_allow_fp8_block_shape_mismatch: the head-dim-96
    probe's QKV at tp 8 has shards [8 × 96, 96, 96] (8 KV heads, one per rank) of an output of
    (64 + 16) × 96 = 7,680 = 8 × 960, so it is split tp ways and every shard is checked: 96 is off
    the 128 block. From 0.19 the layer is let through (vLLM 0.33 starts it: the fixture's case)."""
    g = graph("probe:qwen3-32b-fp8-head-dim-96")
    message = "ValueError: Weight output_partition_size = 96 is not divisible by weight quantization block_n = 128."
    for version in ("0.10", "0.11"):
        assert ValidateFp8BlockShape().judge(g, Split(8), facts(version)).message == message
        assert ValidateFp8BlockShape().judge(g, Split(1), facts(version)) is None  # [6,144, 768] checked, 768 last
    for version in ("0.19", "0.21", "0.26", "0.33"):
        assert ValidateFp8BlockShape().judge(g, Split(8), facts(version)) is None
    case = next(c for c in CASES if c["id"] == "probe:qwen3-32b-fp8-head-dim-96/tp8-dp1-pp1-noep")
    assert case["vllm"]["linear"] is None


def test_the_search_never_offers_a_refused_layout():
    """The issue's command on vLLM 0.28: its picks (tp 1 × dp 8 without EP before) are all layouts the
    load checks pass, and tp 1 × dp 8 is offered only with expert parallelism."""
    from planner.candidates.table import candidate_table
    from planner.request import PoolLimits, ServiceSpec

    service = ServiceSpec(model=QWEN_FP8, concurrency=1, context_length=9000, vllm_version="0.28")
    chip = get_chip("h200")
    limits = PoolLimits(chips=("h200",))
    table = candidate_table(ResolvedService.of(service, limits), chip, limits)
    shapes = {(r.shape.tp, r.shape.dp, r.shape.ep) for r in table.rows}
    assert (1, 8, True) in shapes and (1, 8, False) not in shapes and (2, 4, False) not in shapes
    assert (1, 4, False) in shapes
    g = graph(QWEN_FP8)
    for tp, dp, ep in shapes:
        k = Kernel.of(g, Deployment(tensor_parallel_size=tp, data_parallel_size=dp, enable_expert_parallel=ep,
                                    max_model_len=9000), chip, release="0.28")
        assert load_refusal(k) is None and Startup(k).failed_check() != "load"
    refused = [v for v in table.verdicts if v.refusal == "load"]
    assert {(v.shape.tp, v.shape.dp, v.shape.ep) for v in refused} >= {(1, 8, False), (2, 4, False), (4, 2, False)}


def test_every_quantized_scheme_a_card_serves_is_checked_or_stated():
    release = get()
    unchecked = release.fact(shipped(), "load_checks_unchecked")
    served = set()
    for card in sorted(p.stem for p in (ROOT / "pricing" / "cards").glob("*.yaml")):
        for _, data in graph(card).nodes():
            served |= {str(t.fmt) for t in data["tensors"]}
    quantized = served - {"bf16", "fp16", "fp32"}
    assert quantized == {"fp8_block", "fp8_block_ue8m0", "mxfp4", "int4_g32_marlin"}
    for scheme in sorted(quantized):
        assert judged(release.rules.LOAD_CHECKS, scheme) or scheme in unchecked, \
            f"{scheme}: neither checked nor stated as unchecked"
    assert not any(judged(release.rules.LOAD_CHECKS, scheme) for scheme in unchecked)
    assert judged(release.rules.LOAD_CHECKS, "int4_g32_marlin") and not judged(release.rules.LOAD_CHECKS, "mxfp4")
    assert not judged(release.rules.LOAD_CHECKS, "int4_ch_marlin")  # per channel: no group to cut
    assert judged(release.rules.LOAD_CHECKS, "int3_g128_gptq") and not judged(release.rules.LOAD_CHECKS, "int8_w8a8")


def test_plan_names_the_layer_when_every_split_is_refused(tmp_path):
    """A config whose q_b_proj shard at tp 8 (120 heads / 8 × 192 = 2,880) is off the 128 block, searched
    at tp 8 only: every shape is refused at load, and the reason is vLLM's (not a KV cache it never
    reaches), with the split that starts."""
    config = next(c["config"] for c in CASES if c["card"] == "probe:dsv3-120-heads")
    cfg = json.loads((ROOT.parent / "shared" / "models" / config["file"]).read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, **config["edits"]}))
    done = CliRunner().invoke(cli, ["--model", str(tmp_path), "--chip", "h200", "--tp", "8", "--pp", "1",
                                    "--concurrency", "1", "--context-length", "4096"])
    assert done.exit_code == 1
    assert ("vLLM would not load the checkpoint at tp 8, " in done.output
            and "ValueError: Weight output_partition_size = 2880 is not divisible by weight quantization block_n = 128."
            in done.output and "Nearest fit: --tp 1 --dp 8 starts." in done.output)
    assert "KV cache per rank" not in done.output


def test_gpt_oss_asserts_its_intermediate_size_divides_the_world():
    """Hand-derived from models/gpt_oss.py (assert config.intermediate_size % self.world_size == 0):
    gpt-oss's 2,880 = 2^6 × 45 divides every world the search offers (powers of two up to 64 GPUs)
    but not 8 × 16 = 128 ranks; pipeline stages count in the world."""
    g = graph("gpt-oss-120b")
    check = GptOssIntermediateDividesWorld()
    assert check.judge(g, Split(8, 8), facts("0.33")) is None
    assert check.judge(g, Split(8, 4, pp=2), facts("0.33")) is None
    assert check.judge(g, Split(8, 16), facts("0.33")).message == (
        "AssertionError: config.intermediate_size % self.world_size == 0 (2880 over a world of 128 ranks)")
    assert check.judge(g, Split(8, 8, pp=2), facts("0.33")) is not None
    assert check.judge(graph(QWEN_FP8), Split(8, 16), facts("0.33")) is None  # another model's own check
    done = CliRunner().invoke(cli, ["memory", "--model", "gpt-oss-120b", "--chip", "h200", "-tp", "8", "-dp", "16"])
    assert done.exit_code == 1 and "vLLM would not start (load): AssertionError" in done.output


def test_the_fixture_holds_every_case_the_search_gives_today():
    """The cases scripts/fixtures/golden_load_checks.py enumerates now (every block-FP8 card and probe under every
    split planner/candidates/shapes.py gives, with what each hands vLLM) are the fixture's: a new card,
    a changed graph or a wider shape grid makes the fixture stale until it is regenerated through vLLM."""
    import importlib.util

    path = ROOT / "scripts" / "fixtures" / "golden_load_checks.py"
    spec = importlib.util.spec_from_file_location("golden_load_checks", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    today = script.cases()
    assert [c["id"] for c in today] == [c["id"] for c in CASES]
    for now, fixed in zip(today, CASES, strict=True):
        assert {k: v for k, v in fixed.items() if k != "vllm"} == json.loads(json.dumps(now)), now["id"]


@pytest.mark.parametrize("card, tp, message, source", [
    # 64 attention heads: 3 does not divide them (config/model.py verify_with_parallel_config's ValueError text)
    ("llama-3.1-70b", 3, "ValueError: Total number of attention heads (64) must be divisible by tensor parallel "
                         "size (3).", "config/model.py ModelConfig.verify_with_parallel_config"),
    # 28 heads, 4 KV heads: tp 7 divides the heads; 7 ≥ 4 replicates KV heads, divide(7, 4) asserts
    ("qwen2.5-7b", 7, "AssertionError: 7 is not divisible by 4", "QKVParallelLinear.__init__"),
    # 28 heads, 4 KV heads: tp 14 the same, divide(14, 4)
    ("qwen2.5-7b", 14, "AssertionError: 14 is not divisible by 4", "QKVParallelLinear.__init__"),
])
def test_heads_that_tp_does_not_split_are_refused_as_vllm_refuses(card, tp, message, source):
    """Hand-derived from vLLM 0.33's source (no oracle run here): the engine config's heads check and
    QKVParallelLinear's divide() are load checks of every pack; `plan memory` exits 1 with vLLM's words
    and where they come from (an input error, exit 2, before)."""
    done = CliRunner().invoke(cli, ["memory", "--model", card, "--chip", "h200", "-tp", str(tp)])
    assert done.exit_code == 1, done.output
    assert f"plan: vLLM would not start (load): {message}" in done.output
    assert source in done.output
    for version in ("0.10", "0.21", "0.33"):
        heads = [c for c in get(version).rules.LOAD_CHECKS if c.name in ("attention_heads", "kv_heads")]
        assert len(heads) == 2 and any(c.judge(graph(card), Split(tp), facts(version)) for c in heads)


def test_heads_tp_splits_and_mla_pass():
    """tp 4 splits llama-3.1-70b's 8 KV heads two a rank; tp 16 replicates each twice; dsv3's latent
    attention has no KV heads to split (only its 128 attention heads constrain tp)."""
    from pricing.rules.load_checks import heads_refusal

    assert heads_refusal(graph("llama-3.1-70b"), 4) is None
    assert heads_refusal(graph("llama-3.1-70b"), 16) is None
    assert heads_refusal(graph("dsv3"), 128) is None
    assert heads_refusal(graph("dsv3"), 3).check == "attention_heads"


def test_nvfp4_input_features_per_rank_are_a_multiple_of_16(tmp_path):
    """Hand-derived from modelopt.py ModelOptNvFp4LinearMethod.create_weights (input_size_per_partition
    % 16): Qwen3-8B's config with intermediate_size 12,304 = 16 × 769 served as NVFP4: the row-parallel
    down_proj takes 12,304 at tp 1 and 6,152 (16 × 384.5) at tp 2, which vLLM 0.33 refuses."""
    folder = tmp_path / "m"
    folder.mkdir()
    cfg = json.loads((ROOT.parent / "shared" / "models" / "Qwen--Qwen3-8B.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "intermediate_size": 12304}))
    argv = ["memory", "--model", str(folder), "--quantization", "nvfp4", "--chip", "b200"]
    assert CliRunner().invoke(cli, [*argv, "-tp", "1"]).exit_code == 0
    done = CliRunner().invoke(cli, [*argv, "-tp", "2"])
    assert done.exit_code == 1
    assert ("vLLM would not start (load): ValueError: Unsupported model when in features size is not multiple of 16 "
            "(layers.0.mlp.down_proj: vLLM model_executor/layers/quantization/modelopt.py") in done.output


# -- weight-only INT groups (GPTQ / AWQ / compressed-tensors WNA16) and MXFP4, read in the vLLM 0.33.0 wheel --
MODELS = ROOT.parent / "shared" / "models"
CHECKS_0_33 = get("0.33").rules.LOAD_CHECKS


def _config(tmp_path, name: str, file: str, **edits) -> str:
    """A folder holding `file` (../shared/models) with `edits`: a checkpoint's config.json."""
    folder = tmp_path / name
    folder.mkdir()
    cfg = json.loads((MODELS / file).read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, **edits}))
    return str(folder)


def _refused(g, split, version="0.33"):
    return refusal(get(version).rules.LOAD_CHECKS, g, split, facts(version))


def test_awq_rows_that_cut_a_group_are_refused_in_auto_awqs_words():
    """Hand-derived from vLLM 0.33 auto_awq.py: AutoAWQConfig.get_quant_method sends a layer whose input
    shard cuts a group (check_marlin_supports_layer, allow_tile_padding) to AutoAWQLinearMethod, whose
    create_weights raises. LDCC's Qwen2.5-72B AWQ: intermediate 29,568 = 231 groups of 128; tp 2 gives
    the down projection 14,784 = 115.5 groups and tp 4 7,392 = 57.75; tp 1 starts."""
    g = load_model(str(MODELS / "LDCC--Qwen2.5-72B-Instruct-ko-AWQ.json"))
    assert _refused(g, Split(1)) is None
    for tp in (2, 4):
        found = _refused(g, Split(tp))
        assert (found.check, found.layer) == ("wna16_groups", "layers.0.mlp.down_proj")
        assert found.message == ("ValueError: The input size is not aligned with the quantized weight shape. This "
                                 "can be caused by too large tensor parallel size.")
        assert found.source.startswith("model_executor/layers/quantization/auto_awq.py AutoAWQLinearMethod.")
    done = CliRunner().invoke(cli, ["memory", "--model", str(MODELS / "LDCC--Qwen2.5-72B-Instruct-ko-AWQ.json"),
                                    "--chip", "h100", "-tp", "2"])
    assert done.exit_code == 1 and "plan: vLLM would not start (load): ValueError: The input size is not aligned" \
        in done.output


def test_compressed_tensors_rows_that_cut_a_group_are_refused_in_vllms_words(tmp_path):
    """Hand-derived from vLLM 0.33 compressed_tensors_wNa16.py CompressedTensorsWNA16.create_weights
    (distributed/utils.py verify_group_size_divides_partition): Qwen3-8B's config with intermediate
    12,416 = 97 groups of 128, served as compressed-tensors W4A16 group 128: tp 1 starts, tp 2 gives
    the down projection 6,208 = 48.5 groups, which vLLM refuses naming the layer by its module prefix."""
    quant = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
             "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                 "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128}}}}
    folder = _config(tmp_path, "ct", "Qwen--Qwen3-8B.json", intermediate_size=12416, quantization_config=quant)
    g = load_model(folder)
    assert _refused(g, Split(1)) is None
    assert _refused(g, Split(2)).message == (
        "ValueError: Weight input_size_per_partition=6208 for layer 'model.layers.0.mlp.down_proj' is not divisible "
        "by group_size=128. This happens when tensor_parallel_size splits the layer input into shards that are not "
        "a whole number of quant groups. Consider reducing tensor_parallel_size.")
    argv = ["memory", "--model", folder, "--chip", "h100"]
    assert CliRunner().invoke(cli, [*argv, "-tp", "1"]).exit_code == 0
    done = CliRunner().invoke(cli, [*argv, "-tp", "2"])
    assert done.exit_code == 1 and "compressed_tensors_wNa16.py CompressedTensorsWNA16.create_weights" in done.output


def test_compressed_tensors_experts_that_cut_a_group_are_refused():
    """Hand-derived from vLLM 0.33 compressed_tensors_moe_wna16.py CompressedTensorsWNA16MoEMethod.create_weights:
    Kimi-K2.5's experts (intermediate 2,048, INT4 group 32, hidden 7,168) over a MoE tp of 8 × 8 = 64 hold
    32 each, one group; 8 × 16 = 128 ranks without expert parallelism hold 16, half a group: refused; with
    expert parallelism each rank holds whole experts."""
    g = graph("kimi-k2.5")
    assert _refused(g, Split(8, 8)) is None
    assert _refused(g, Split(8, 16)).message == (
        "ValueError: CompressedTensors WNA16 MoE with static group scales requires the MoE intermediate size per "
        "tensor-parallel partition (16) to be divisible by group_size (32). Scale groups would otherwise cross TP "
        "shard boundaries; use a compatible TP size or enable expert parallelism.")
    assert _refused(g, Split(8, 16, ep=True)) is None
    done = CliRunner().invoke(cli, ["memory", "--model", "kimi-k2.5", "--chip", "h200", "-tp", "8", "-dp", "16"])
    assert done.exit_code == 1 and "vLLM would not start (load): ValueError: CompressedTensors WNA16 MoE" in done.output


def test_awq_experts_halve_their_group_in_0_33_and_were_refused_before(tmp_path):
    """Hand-derived from vLLM 0.33 auto_awq.py get_quant_method (experts Marlin cannot take go to
    moe_wna16.py MoeWNA16Method, whose create_weights halves the group until it divides the shard and the
    hidden size, asserting it stays >= 32): Mixtral-8x7B (intermediate 14,336, hidden 4,096) as AWQ group
    128 over a MoE tp of 32 holds 448 (group 64 divides it), of 64 holds 224 (group 32), of 128 holds 112
    (16 < 32: AssertionError). The older packs keep the weight sizer's refusal of any cut group."""
    quant = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
    g = load_model(_config(tmp_path, "mixtral-awq", "mistralai--Mixtral-8x7B-v0.1.json", quantization_config=quant))
    assert _refused(g, Split(8, 4)) is None and _refused(g, Split(8, 8)) is None
    assert _refused(g, Split(8, 16)).message == (
        "AssertionError: assert group_size >= 32 (a group of 128 halved to divide 112 and 4096)")
    assert _refused(g, Split(8, 2)) is None  # 896 = 7 groups of 128: Marlin takes it
    assert _refused(g, Split(8, 4), "0.26").message.startswith("ValueError: The input size is not aligned")


def test_gptq_rows_that_cut_a_group_are_not_offered_and_say_why():
    """vLLM 0.33 auto_gptq.py AutoGPTQLinearMethod.create_weights has no such check: Marlin and Triton W4A16
    refuse the shard (mixed_precision/marlin.py: "in_features per partition ... is not divisible by
    group_size"), and the remaining kernels take it with scale groups that straddle it. Genz-70B GPTQ
    (intermediate 28,672 = 224 groups of 128): tp 8 holds 3,584 (28 groups); tp 64, 448 (3.5). That is
    no refusal of vLLM's: the rule says the shard is not verified to start (vllm_refuses false)."""
    g = load_model(genz_static_order())
    assert _refused(g, Split(8)) is None
    found = _refused(g, Split(64))
    assert (found.check, found.vllm_refuses) == ("wna16_groups", False)
    assert found.message.startswith(
        "vLLM 0.33 has no check here (AutoGPTQLinearMethod.create_weights raises nothing on the shard); "
        "MarlinLinearKernel cannot implement due to: in_features per partition 448 is not divisible by "
        "group_size = 128.")
    assert found.message.endswith("was not verified")
    awq = _refused(load_model(str(MODELS / "LDCC--Qwen2.5-72B-Instruct-ko-AWQ.json")), Split(2))
    assert awq.vllm_refuses is True  # AWQ's create_weights raises: vLLM's own refusal


@cache
def genz_static_order() -> str:
    """Genz-70B GPTQ's published config.json with desc_act false: vLLM 0.33 refuses its published desc_act
    true whatever the split (utils/gptq_utils.py normalize_and_validate_gptq_desc_act, the oracle's
    gptq-genz-70b cases), so the split's own check is shown on static activation order."""
    cfg = json.loads((MODELS / "TheBloke--Genz-70b-GPTQ.json").read_text())
    folder = Path(tempfile.mkdtemp()) / "genz-static-order"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**cfg, "quantization_config": {
        **cfg["quantization_config"], "desc_act": False}}))
    return str(folder)


def test_plan_memory_says_not_offered_not_that_vllm_would_not_start():
    """`plan memory` on a shard no check of vLLM's decides: exit 1 (the planner does not offer what it cannot
    say starts; `--help` says so), one line "not offered (not verified to start)", never "vLLM would not
    start"; --json says starts false with refusal_check "unverified"."""
    argv = ["memory", "--model", genz_static_order(), "--chip", "gb200"]
    done = CliRunner().invoke(cli, [*argv, "-tp", "64"])
    assert done.exit_code == 1, done.output
    assert done.output.startswith("plan: not offered (not verified to start): vLLM 0.33 has no check here (")
    assert "would not start" not in done.output
    out = json.loads(CliRunner().invoke(cli, [*argv, "-tp", "64", "--json"]).stdout)
    assert (out["starts"], out["refusal_check"]) == (False, "unverified")
    assert CliRunner().invoke(cli, [*argv, "-tp", "8"]).exit_code == 0
    # a shard vLLM itself refuses keeps vLLM's wording (AWQ at tp 2)
    awq = CliRunner().invoke(cli, ["memory", "--model", str(MODELS / "LDCC--Qwen2.5-72B-Instruct-ko-AWQ.json"),
                                   "--chip", "h100", "-tp", "2"])
    assert awq.exit_code == 1 and awq.output.startswith("plan: vLLM would not start (load): ValueError:")
    helped = " ".join(CliRunner().invoke(cli, ["memory", "--help"]).output.split())
    assert "Exit status 1 with vLLM's own error when vLLM would not start it, and when it is not verified to " \
           "start" in helped


def test_plan_says_not_offered_when_every_split_is_unverified():
    """The search's explanation of a chip where every split is only not verified to start: "not offered",
    with why, never that vLLM would not load the checkpoint."""
    done = CliRunner().invoke(cli, ["--model", genz_static_order(), "--chip", "gb200", "--tp", "64",
                                    "--concurrency", "1", "--context-length", "4096"])
    assert done.exit_code == 1
    text = " ".join(done.output.split())
    assert "NVIDIA GB200 NVL72 (per GPU) 186GB: not offered at tp 64, " in text
    assert ", not verified to start: vLLM 0.33 has no check here" in text
    assert "would not load" not in text and "would not start" not in text


def test_the_weight_sizer_no_longer_refuses_a_cut_group():
    """The refusal is the release's load check: without it in LOAD_CHECKS nothing refuses the shard."""
    g = load_model(str(MODELS / "LDCC--Qwen2.5-72B-Instruct-ko-AWQ.json"))
    others = tuple(c for c in CHECKS_0_33 if not isinstance(c, Wna16GroupsSplit))
    assert refusal(others, g, Split(2), facts("0.33")) is None
    k = Kernel.of(g, Deployment(tensor_parallel_size=2), get_chip("h100"))
    assert k.weight_bytes().refusal is None and load_refusal(k).check == "wna16_groups"


def test_mxfp4_experts_are_padded_not_refused():
    """vLLM 0.33 (mxfp4.py maybe_roundup_sizes -> fused_moe/oracle/mxfp4.py
    mxfp4_round_up_hidden_size_and_intermediate_size) pads an MXFP4 expert shard to the backend's tile
    and raises nothing on it: gpt-oss-120b's 2,880 over 64 MoE ranks is 45 each (not a multiple of 32),
    which starts (the model's own check: 2,880 % 64 = 0), sized as Marlin's 128-wide pad on an H200."""
    from pricing.config.quantization import Mags, Mxfp4, Placement

    assert facts("0.33")("mxfp4_moe_pads") is True
    g = graph("gpt-oss-120b")
    assert _refused(g, Split(1, 64)) is None and _refused(g, Split(8, 8)) is None
    k = Kernel.of(g, Deployment(data_parallel_size=64), get_chip("h200"))
    assert load_refusal(k) is None
    w2 = Mxfp4("mxfp4").params(Placement(2880, 45, 2880, expert=True, generation="sm90"), Mags(shipped()))
    assert w2[0].shape == (3072, 64)  # hidden 2,880 to 256s, intermediate 45 to 128, two E2M1 a byte


# -- the heads, weight-only INT group and NVFP4 checks against vLLM 0.33's own functions --
# (tests/golden/load_checks/vllm-0.33.0-heads-groups.json, scripts/fixtures/golden_load_checks.py --only quant)
QUANT_GOLDEN = json.loads((ROOT / "tests" / "golden" / "load_checks" / "vllm-0.33.0-heads-groups.json").read_text())
HEADS = QUANT_GOLDEN["heads"]["cards"]
GROUP_CASES = [{**c, **QUANT_GOLDEN["groups"]["models"][c["model"]]} for c in QUANT_GOLDEN["groups"]["cases"]]
CHECK_OF = {"verify_with_parallel_config": "attention_heads", "QKVParallelLinear": "kv_heads",
            "linear": "linear_shards"}


def _script():
    import importlib.util

    path = ROOT / "scripts" / "fixtures" / "golden_load_checks.py"
    spec = importlib.util.spec_from_file_location("golden_load_checks", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_heads_groups_fixture_is_vllm_0_33_and_covers_every_card():
    """Every shipped card's heads at every tp from 1 to 72 (the search's sizes on any shipped chip, NVL72's
    up to 72, and the refused ones between), and the group-quantized models under the splits the search
    gives them; among vLLM's answers: the engine config's ValueError and QKVParallelLinear's divide()."""
    assert QUANT_GOLDEN["vllm"] == "0.33.0" and QUANT_GOLDEN["heads"]["tp"] == list(range(1, 73))
    assert set(HEADS) == {p.stem for p in (ROOT / "pricing" / "cards").glob("*.yaml")}
    assert HEADS["llama-3.1-70b"]["refused"]["3"] == {
        "check": "verify_with_parallel_config",
        "message": "ValueError: Total number of attention heads (64) must be divisible by tensor parallel size (3)."}
    assert HEADS["qwen2.5-7b"]["refused"]["7"] == {"check": "QKVParallelLinear",
                                                   "message": "AssertionError: 7 is not divisible by 4"}
    assert "16" not in HEADS["llama-3.1-70b"]["refused"]  # 8 KV heads replicated twice
    models = {c["model"] for c in GROUP_CASES}
    assert {"kimi-k2.5", "awq-qwen2.5-72b", "gptq-genz-70b", "ct-qwen3-8b-intermediate-12416", "awq-mixtral-8x7b",
            "nvfp4-qwen3-8b-intermediate-12304"} <= models
    kimi = {c["id"]: c["vllm"]["moe"] for c in GROUP_CASES if c["model"] == "kimi-k2.5"}
    assert kimi["kimi-k2.5/tp8-dp16-noep"]["message"].startswith(
        "ValueError: CompressedTensors WNA16 MoE with static group scales requires the MoE intermediate size per "
        "tensor-parallel partition (16)")
    assert kimi["kimi-k2.5/tp8-dp16-ep"]["message"] is None


@pytest.mark.parametrize("card", sorted(HEADS))
def test_heads_and_shards_rules_agree_with_vllm(card):
    """The rules pack's heads checks (heads_refusal: the engine config's, then QKVParallelLinear's), then
    LinearShardsDivide, give vLLM 0.33's verdict, in its words, at every tp from 1 to 72: on the heads vLLM
    reads from the card's config.json (a latent-attention model builds no QKVParallelLinear), and on every
    other tensor-parallel linear layer of the graph built as vLLM's Row/MergedColumnParallelLinear."""
    from pricing.rules.load_checks import LinearShardsDivide, heads_refusal

    want, g = HEADS[card], graph(card)
    shards = LinearShardsDivide()
    assert g.num_attention_heads == want["heads"]
    assert (g.attention_backend == "gqa") == (not want["use_mla"])
    if not want["use_mla"]:
        assert max(1, g.num_kv_heads) == want["kv_heads"]
    for tp in QUANT_GOLDEN["heads"]["tp"]:
        found = heads_refusal(g, tp) or shards.judge(g, Split(tp), None)
        refused = want["refused"].get(str(tp))
        assert (found is None) == (refused is None), (card, tp)
        assert found is None or _same_words(found.message, refused["message"]), (card, tp, found.message)
        if refused:
            assert found.check == CHECK_OF[refused["check"]]
            assert found.layer == refused.get("layer", found.layer)


@cache
def group_graph(model: str):
    """A group model's graph (scripts/fixtures/golden_load_checks.py GROUP_MODELS): a card, or a published config.json
    with the fixture's edits, from a folder, under its --quantization."""
    config = QUANT_GOLDEN["groups"]["models"][model].get("config")
    if config is None:
        return load_model(model)
    cfg = json.loads((MODELS / config["file"]).read_text())
    folder = Path(tempfile.mkdtemp()) / model
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**cfg, **config["edits"]}))
    return load_model(str(folder), config["quantization"])


BARE_ASSERTS = ("AssertionError: assert group_size >= 32 (",  # moe_wna16.py MoeWNA16Method.create_weights
                "AssertionError: assert all(output_size % self.tp_size == 0 for output_size in output_sizes) (")


def _same_words(rule: str, vllm: str) -> bool:
    """The rule's message is vLLM's; a bare assert of vLLM's (moe_wna16.py's `assert group_size >= 32`,
    MergedColumnParallelLinear's) has no text, which the rule gives as the assert with the numbers that led to it."""
    if vllm == "AssertionError: ":
        return rule.startswith(BARE_ASSERTS)
    return rule == vllm


@pytest.mark.parametrize("case", GROUP_CASES, ids=[c["id"] for c in GROUP_CASES])
def test_group_rules_agree_with_vllm(case):
    """The 0.33 pack's load checks on a weight-only INT or NVFP4 model agree with vLLM 0.33 building its
    layers (RowParallelLinear / ColumnParallelLinear with the checkpoint's quantization config, the routed
    experts' quant method from get_quant_method and its create_weights) under the split: vLLM's refusal in
    its words; where vLLM raises nothing but Marlin declines the shard (GPTQ: no check of its own), the rule
    says it is not verified to start (vllm_refuses false), quoting Marlin's reason and naming the kernel
    vLLM picked instead."""
    s = case["split"]
    split = Split(s["tp"], s["dp"], s["pcp"], s["ep"], case["gpu"])
    found = refusal(CHECKS_0_33, group_graph(case["model"]), split, facts("0.33"))
    linear, moe = case["vllm"]["linear"], case["vllm"]["moe"]
    refused = [v for v in (linear, moe) if v is not None and v["message"] is not None]
    marlin = (linear or {}).get("declined", {}).get("MarlinLinearKernel", "")
    if refused:
        assert found is not None and found.vllm_refuses, case["id"]
        assert _same_words(found.message, refused[0]["message"]), (found.message, refused[0]["message"])
    elif marlin.startswith("in_features per partition"):  # Marlin declines a cut group; vLLM picks another kernel
        assert found is not None and not found.vllm_refuses, case["id"]
        assert f"MarlinLinearKernel cannot implement due to: {marlin}" in found.message
        assert linear["kernel"].removesuffix("LinearKernel") in found.message
    else:
        assert found is None, (case["id"], found)
    if moe is not None:
        assert split.moe_tp == moe["moe_tp"]


def test_the_heads_groups_fixture_holds_every_case_the_search_gives_today():
    """The cards and group cases scripts/fixtures/golden_load_checks.py enumerates now are the fixture's (a new card,
    a changed graph or a wider shape grid makes it stale until it is regenerated through vLLM)."""
    script = _script()
    heads = script.heads_cases()
    assert [c["card"] for c in heads] == sorted(HEADS)
    assert [c["linear"] for c in heads] == [HEADS[c]["linear"] for c in sorted(HEADS)]
    today = script.group_cases()
    assert [c["id"] for c in today] == [c["id"] for c in GROUP_CASES]
    for now, fixed in zip(today, GROUP_CASES, strict=True):
        assert {k: v for k, v in fixed.items() if k != "vllm"} == json.loads(json.dumps(now)), now["id"]


GENZ = MODELS / "TheBloke--Genz-70b-GPTQ.json"  # published with desc_act true, group 128
GPTQ_DESC_ACT = ("ValueError: GPTQ group activation ordering (desc_act=True) is no longer supported. Use a checkpoint "
                 "with static activation ordering or desc_act=False.")


def test_gptq_desc_act_is_refused_by_the_0_33_pack_alone():
    """vLLM 0.33 (from the 0.30.0 wheel; auto_gptq.py AutoGPTQConfig.__init__ -> utils/gptq_utils.py
    normalize_and_validate_gptq_desc_act) refuses a GPTQ checkpoint with desc_act true and groups whatever the
    split, in its words; the 0.26 pack (0.28.0 wheel: no such check) and older do not; desc_act false, and
    desc_act true per channel (a no-op, vLLM drops it), pass."""
    g = load_model(str(GENZ))
    for tp in (1, 2, 4, 8):
        found = refusal(CHECKS_0_33, g, Split(tp), facts("0.33"))
        assert found is not None and found.check == "gptq_desc_act" and found.vllm_refuses
        assert found.message == GPTQ_DESC_ACT
    for version in ("0.10", "0.11", "0.19", "0.21", "0.26"):
        assert all(c.name != "gptq_desc_act" for c in get(version).rules.LOAD_CHECKS), version
        assert refusal(get(version).rules.LOAD_CHECKS, g, Split(4), facts(version)) is None, version
    assert refusal(CHECKS_0_33, load_model(genz_static_order()), Split(4), facts("0.33")) is None
    cfg = json.loads(GENZ.read_text())
    folder = Path(tempfile.mkdtemp()) / "genz-per-channel"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**cfg, "quantization_config": {
        **cfg["quantization_config"], "group_size": -1}}))
    assert refusal(CHECKS_0_33, load_model(str(folder)), Split(4), facts("0.33")) is None


def test_gptq_desc_act_exits_1_and_the_search_never_offers_it():
    """`plan memory` exits 1 with vLLM's message; the search offers no split of it (exit 1, every split named
    with vLLM's reason); under --vllm-version 0.28 (no such check) the same checkpoint starts."""
    argv = ["memory", "--model", str(GENZ), "--chip", "h200", "-tp", "4"]
    done = CliRunner().invoke(cli, argv)
    assert done.exit_code == 1, done.output
    assert done.output.startswith(f"plan: vLLM would not start (load): {GPTQ_DESC_ACT} (quantization_config.desc_act")
    assert CliRunner().invoke(cli, [*argv, "--vllm-version", "0.28"]).exit_code == 0
    plan = CliRunner().invoke(cli, ["--model", str(GENZ), "--chip", "h200", "--concurrency", "1",
                                    "--context-length", "4096"])
    assert plan.exit_code == 1, plan.output
    text = " ".join(plan.output.split())
    assert "no pool fits" in text and "vLLM would not load the checkpoint at tp 1, tp 2, tp 4, tp 8" in text
    assert GPTQ_DESC_ACT in text


CT_ACTORDER = ("ValueError: Compressed-tensors group/dynamic activation ordering (actorder={!r}) is no longer "
               "supported. Use a checkpoint with static/weight activation ordering or without activation ordering.")
# vLLM 0.33.0's words, from the oracle (CompressedTensorsConfig._quantization_scheme_map_from_config on this config
# group with actorder true and "dynamic": actorder='group' and actorder='dynamic'; "weight" accepted)


def _ct_w4a16(tmp_path, actorder) -> str:
    """Qwen3-8B's config.json (../shared/models) as a compressed-tensors W4A16 checkpoint, pack-quantized INT4 in
    groups of 128 (Kimi-K2.5's scheme at another group), its weights' `actorder` as given (absent when None)."""
    weights = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}
    if actorder is not None:
        weights["actorder"] = actorder
    quant = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
             "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}}}
    return _config(tmp_path, f"qwen3-8b-ct-{actorder}", "Qwen--Qwen3-8B.json", quantization_config=quant)


@pytest.mark.parametrize("actorder, refused", [(True, "group"), ("group", "group"), ("GROUP", "group"),
                                               ("dynamic", "dynamic"), ("weight", None), ("static", None),
                                               (False, None), (None, None)])
def test_ct_group_activation_ordering_is_refused_by_the_0_33_pack_alone(tmp_path, actorder, refused):
    """vLLM 0.33 (compressed_tensors.py _quantization_scheme_map_from_config) refuses a compressed-tensors weight
    scheme with actorder true, "group" or "dynamic" (compressed-tensors reads true as "group" and names in lower
    case) whatever the split, in its words; "weight", "static", false and none pass; the parsed scheme keeps the
    actorder as read; the 0.26 pack and older have no such check."""
    from pricing.config.quantization import PackedInt

    g = load_model(_ct_w4a16(tmp_path, actorder))
    fmt = next(t.fmt for _, d in g.nodes() for t in d["tensors"] if t.name.endswith("q_proj"))
    assert isinstance(fmt, PackedInt) and fmt.actorder == ({True: "group", False: None}.get(actorder, actorder)
                                                           if not isinstance(actorder, str) else actorder.lower())
    for tp in (1, 2, 4, 8):
        found = refusal(CHECKS_0_33, g, Split(tp), facts("0.33"))
        if refused is None:
            assert found is None, (tp, found)
        else:
            assert found is not None and found.check == "ct_actorder" and found.vllm_refuses
            assert found.message == CT_ACTORDER.format(refused)
    for version in ("0.10", "0.19", "0.26"):
        assert all(c.name != "ct_actorder" for c in get(version).rules.LOAD_CHECKS), version
        assert refusal(get(version).rules.LOAD_CHECKS, g, Split(2), facts(version)) is None, version


def test_ct_group_activation_ordering_exits_1_with_vllms_words(tmp_path):
    """`plan memory` on the config.json with actorder "group" exits 1 with vLLM's message; with "weight" it starts."""
    argv = ["memory", "--model", _ct_w4a16(tmp_path, "group"), "--chip", "h200", "-tp", "2"]
    done = CliRunner().invoke(cli, argv)
    assert done.exit_code == 1, done.output
    assert done.output.startswith(f"plan: vLLM would not start (load): {CT_ACTORDER.format('group')} "), done.output
    weight = _ct_w4a16(tmp_path, "weight")
    started = CliRunner().invoke(cli, ["memory", "--model", weight, "--chip", "h200", "-tp", "2"])
    assert started.exit_code == 0, started.output
