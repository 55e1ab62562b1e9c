"""Quantized checkpoints, tensor by tensor: every expected byte count is derived here from the
format's definition (the parameters vLLM 0.33's create_weights / process_weights_after_loading
leave on the GPU), never read from the program."""

import json
import math
import shutil

import pytest

from planner.cli import main as cli_main
from pricing.chips import get_chip
from pricing.config import ModelSource, decoder_config, resolve
from pricing.graph import build_graph
from pricing.kernel import Deployment, Kernel, Startup
from pricing.kernel.weights import WeightSizer
from pricing.registry import shipped

# a small llama: hidden 256, intermediate 512, 2 layers, 4 heads of 64, 2 KV heads, vocab 1024
H, INTER, L, HEADS, KV, D, V = 256, 512, 2, 4, 2, 64, 1024
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "intermediate_size": INTER,
        "num_hidden_layers": L, "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": D,
        "vocab_size": V, "max_position_embeddings": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
# (name, N rows out, K cols in, fused parts) of one decoder layer's linear layers
LINEARS = [("self_attn.q_proj", HEADS * D, H, 1), ("self_attn.k_proj", KV * D, H, 1),
           ("self_attn.v_proj", KV * D, H, 1), ("self_attn.o_proj", H, HEADS * D, 1),
           ("mlp.gate_up_proj", 2 * INTER, H, 2), ("mlp.down_proj", H, INTER, 1)]
# the rotary cos/sin cache (rotary_embedding/base.py): max_position × head_dim at the model's
# 2 bytes, one buffer for both layers (get_rope shares it), never quantized
ROTARY = 4096 * D * 2
PLAIN = 2 * (V * H * 2) + L * 2 * H * 2 + H * 2 + ROTARY  # embedding + lm_head + norms, bf16; the rotary cache


def graph_of(cfg, quantization=None, hf_quant=None):
    return build_graph(ModelSource("tiny", "tiny", decoder_config(cfg), hf_quant, "test config"), quantization)


def weights(cfg, chip="h100", quantization=None, hf_quant=None, **flags):
    k = Kernel.of(graph_of(cfg, quantization, hf_quant), Deployment(**flags), get_chip(chip))
    return k.weight_bytes().weights


def linear_total(per_linear) -> int:
    """PLAIN plus L layers of `per_linear(N, K, parts)` bytes."""
    return PLAIN + L * sum(per_linear(n, k, parts) for _, n, k, parts in LINEARS)


def with_q(qc, **fields):
    cfg = dict(TINY, quantization_config=qc)
    cfg.update(fields)
    return cfg


def ct(weights_args, inputs=None, fmt="pack-quantized", ignore=("lm_head",), **extra):
    group = {"targets": ["Linear"], "weights": weights_args, "input_activations": inputs}
    return dict({"quant_method": "compressed-tensors", "format": fmt, "ignore": list(ignore),
                 "config_groups": {"group_0": group}}, **extra)


FP8_CHANNEL = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False}
TOKEN_DYNAMIC = {"num_bits": 8, "type": "float", "strategy": "token", "symmetric": True, "dynamic": True}


def test_unquantized_is_two_bytes_an_element():
    assert weights(TINY) == linear_total(lambda n, k, parts: 2 * n * k)


# -- compressed-tensors ---------------------------------------------------------------------
def test_ct_fp8_channel_on_hopper():
    # float-quantized: weight fp8 [N, K], weight_scale fp32 [N, 1]
    cfg = with_q(ct(FP8_CHANNEL, TOKEN_DYNAMIC, "float-quantized"))
    assert weights(cfg) == linear_total(lambda n, k, parts: n * k + 4 * n)


def test_ct_fp8_on_a100_is_weight_only_marlin():
    # SM80: FP8 Marlin, same weight bytes, one bf16 scale per output channel
    cfg = with_q(ct(FP8_CHANNEL, TOKEN_DYNAMIC, "float-quantized"))
    assert weights(cfg, "a100-80gb") == linear_total(lambda n, k, parts: n * k + 2 * n)


def test_ct_fp8_block():
    w = dict(FP8_CHANNEL, strategy="block", block_structure=[128, 128])
    cfg = with_q(ct(w, dict(TOKEN_DYNAMIC, strategy="group", group_size=128), "float-quantized"))
    assert weights(cfg) == linear_total(lambda n, k, parts: n * k + 4 * math.ceil(n / 128) * math.ceil(k / 128))


def test_ct_w8a8_int8_channel():
    w = dict(FP8_CHANNEL, type="int")
    cfg = with_q(ct(w, dict(TOKEN_DYNAMIC, type="int"), "int-quantized"))
    assert weights(cfg) == linear_total(lambda n, k, parts: n * k + 4 * n)


def test_ct_w8a8_int8_static_asymmetric_input():
    # static per-tensor int8 input with zero point: input_scale fp32 + input_zero_point int32 once
    # each, and azp_adj int32 [N]; weight scales per tensor: one fp32 per fused partition
    w = dict(FP8_CHANNEL, type="int", strategy="tensor")
    inp = {"num_bits": 8, "type": "int", "strategy": "tensor", "symmetric": False, "dynamic": False}
    cfg = with_q(ct(w, inp, "int-quantized"))
    assert weights(cfg) == linear_total(lambda n, k, parts: n * k + 4 * parts + 4 + 4 + 4 * n)


def test_ct_w4a16_group128_symmetric():
    # pack-quantized -> Marlin: int4 (K*N/2 bytes), bf16 scales [K/128, N], weight_shape int64[2]
    w = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}
    cfg = with_q(ct(w))
    assert weights(cfg) == linear_total(lambda n, k, parts: n * k // 2 + 2 * (k // 128) * n + 16)


def test_ct_w4a16_asymmetric_act_order_at_tp2():
    # zero points int4 packed into int32 [groups, N/8]; act order keeps g_idx and its sort
    # indices (int32 [K] each); on the row-parallel o_proj and down_proj every rank keeps the
    # whole layer's K/group scales and zero points (marlin_repeat_scales_on_all_ranks)
    w = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 64, "symmetric": False,
         "actorder": "group"}
    cfg = with_q(ct(w))
    expected = V * H + V * H + L * 2 * H * 2 + H * 2 + ROTARY  # embedding and lm_head halved by tp 2; the
    # rotary cache whole on each rank
    for name, n, k, _ in LINEARS:
        row = name.endswith(("o_proj", "down_proj"))
        n_rank, k_rank = (n, k // 2) if row else ((n // 2, k) if not name.endswith(("k_proj", "v_proj")) else
                                                  (n // 2, k))
        groups = (k if row else k_rank) // 64
        expected += L * (n_rank * k_rank // 2 + 2 * groups * n_rank + 4 * groups * n_rank // 8 + 8 * k_rank + 16)
    assert weights(cfg, tensor_parallel_size=2) == expected


def test_ct_w4a16_marlin_tile_padding():
    # N = K = 320 fails both Marlin tile families: padded to the cheaper, (320, 384) for group 32
    # (n % 64 with k a multiple of lcm(128, 32)); bytes of the padded int4 weight and its scales
    cfg = dict(TINY, hidden_size=320, num_attention_heads=5, num_key_value_heads=5)
    w = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True}
    g = graph_of(with_q(ct(w), **{k: cfg[k] for k in ("hidden_size", "num_attention_heads",
                                                      "num_key_value_heads")}))
    t = next(t for _, d in g.nodes() for t in d["tensors"] if t.name == "layers.0.self_attn.q_proj")
    sizer = WeightSizer(g, Kernel.of(g, Deployment(), get_chip("h100")).engine, "sm90", shipped())
    assert sizer.one(t) == 320 * 384 // 2 + 2 * (384 // 32) * 320 + 16


def test_ct_nvfp4_on_blackwell_and_hopper():
    w = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True}
    cfg = with_q(ct(w, dict(w, dynamic="local"), "nvfp4-pack-quantized"))

    def sm100(n, k, parts):  # uint8 [N32, K32/2], swizzled FP8 scales [N128, (K/16)4], 2 fp32 per part, alpha
        r = lambda x, m: -(-x // m) * m  # noqa: E731
        return r(n, 32) * r(k, 32) // 2 + r(n, 128) * r(k // 16, 4) + 8 * parts + 4

    assert weights(cfg, "b200") == linear_total(sm100)
    # Hopper: FP4 Marlin, unswizzled scales [K/16, N], one bf16 global scale
    assert weights(cfg, "h100") == linear_total(lambda n, k, parts: n * k // 2 + (k // 16) * n + 2)


def test_ct_marlin_24():
    # 2:4 sparse int4: weight int32 [K/32, N*16/8] (N*K/4 bytes), meta int16 [K/32, 2N] (N*K/8),
    # scales [K/128, N] bf16, weight_shape int64[2], workspace int32 [N/128*64]
    w = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}
    cfg = with_q(ct(w, fmt="marlin-24"))
    assert weights(cfg) == linear_total(lambda n, k, parts: n * k // 4 + n * k // 8 + 2 * (k // 128) * n + 16
                                        + 4 * (n // 128 * 64))


def test_ct_ignore_regex_and_unsizeable_scheme(capsys):
    w = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}
    cfg = with_q(ct(w, ignore=["lm_head", "re:.*self_attn.*"]))
    attn = [x for x in LINEARS if x[0].startswith("self_attn")]
    mlp = [x for x in LINEARS if x[0].startswith("mlp")]
    expected = PLAIN + L * (sum(2 * n * k for _, n, k, _ in attn)
                            + sum(n * k // 2 + 2 * (k // 128) * n + 16 for _, n, k, _ in mlp))
    assert weights(cfg) == expected


# -- GPTQ, AWQ --------------------------------------------------------------------------------
def test_gptq_marlin_act_order():
    cfg = with_q({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True, "sym": True})
    # Marlin: int4 weights, fp... model-dtype scales [K/128, N], g_idx + sort indices int32 [K]; qzeros dropped (sym)
    assert weights(cfg) == linear_total(lambda n, k, parts: n * k // 2 + 2 * (k // 128) * n + 8 * k)
    assert graph_of(cfg).quantization == "gptq_marlin"


def test_gptq_forced_plain_kernel_and_3_bit():
    cfg = with_q({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True, "sym": True})
    # --quantization gptq: qweight int32 [K/8, N], g_idx int32 [K], qzeros int32 [K/128, N/8], scales
    assert weights(cfg, quantization="gptq") == linear_total(
        lambda n, k, parts: n * k // 2 + 4 * k + 4 * (k // 128) * (n // 8) + 2 * (k // 128) * n)
    three = with_q({"quant_method": "gptq", "bits": 3, "group_size": -1, "desc_act": False, "sym": True})
    # 3-bit is not Marlin: qweight [K*3/32, N] int32, one group: qzeros [1, N*3/32], scales [1, N]
    assert weights(three) == linear_total(lambda n, k, parts: k * 3 // 32 * n * 4 + 4 * k + 4 * (n * 3 // 32) + 2 * n)


def test_gptq_lm_head_quantized():
    cfg = with_q({"quant_method": "gptq", "bits": 8, "group_size": 128, "desc_act": False, "sym": True,
                  "lm_head": True})
    per = lambda n, k, parts: n * k + 2 * (k // 128) * n  # noqa: E731  (int8 Marlin, no act order)
    expected = (V * H * 2 + L * 2 * H * 2 + H * 2 + ROTARY + per(V, H, 1)
                + L * sum(per(n, k, p) for _, n, k, p in LINEARS))
    assert weights(cfg) == expected


def test_awq_marlin_and_plain_on_rocm():
    cfg = with_q({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"})
    # awq_marlin: int4, scales [K/128, N] model dtype, zero points int32 [K/128, N/8]
    per = lambda n, k, parts: n * k // 2 + 2 * (k // 128) * n + 4 * (k // 128) * (n // 8)  # noqa: E731
    assert weights(cfg, "h100") == linear_total(per)
    assert weights(cfg, "mi300x") == linear_total(per)  # plain AWQ layout: the same bytes


# -- bitsandbytes, fbgemm, ModelOpt, Quark, online FP8 --------------------------------------
def test_bitsandbytes_nf4_double_quant_and_skip(shared_models):
    qc = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
          "bnb_4bit_use_double_quant": True, "llm_int8_skip_modules": ["down_proj"]}

    def per(n, k, parts):  # per fused shard: absmax uint8 per 64, nested fp32 per 256 blocks, 256+1 fp32, code 16
        blocks = n * k // parts // 64
        return n * k // 2 + parts * (blocks + 4 * -(-blocks // 256) + 4 * 256 + 4 + 4 * 16)
    expected = PLAIN + L * sum(2 * n * k if name.endswith("down_proj") else per(n, k, parts)
                               for name, n, k, parts in LINEARS)
    assert weights(with_q(qc)) == expected


def test_bitsandbytes_8bit():
    qc = {"quant_method": "bitsandbytes", "load_in_8bit": True}
    assert weights(with_q(qc)) == linear_total(lambda n, k, parts: n * k + 4 * n)


def test_fbgemm_fp8():
    qc = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": ["lm_head"]}
    assert weights(with_q(qc)) == linear_total(lambda n, k, parts: n * k + 4 * n + 4)


def test_modelopt_fp8_sidecar():
    hq = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8",
                                                             "exclude_modules": ["lm_head"]}}
    # weight fp8, one fp32 weight scale and one input scale after requantization to the max
    assert weights(TINY, hf_quant=hq) == linear_total(lambda n, k, parts: n * k + 4 + 4)


def test_modelopt_mixed_precision_per_layer():
    q = {"quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "model.layers.0.mlp.gate_proj": {"quant_algo": "FP8"}, "model.layers.0.mlp.up_proj": {"quant_algo": "FP8"},
        "model.layers.1.mlp.down_proj": {"quant_algo": "NVFP4", "group_size": 16}}}
    dense = sum(2 * n * k for _, n, k, _ in LINEARS)
    gu = next(x for x in LINEARS if x[0] == "mlp.gate_up_proj")
    down = next(x for x in LINEARS if x[0] == "mlp.down_proj")
    n, k = down[1], down[2]
    expected = (PLAIN + 2 * dense - 2 * gu[1] * gu[2] + gu[1] * gu[2] + 8 - 2 * n * k
                + (n * k // 2 + (k // 16) * n + 2))  # down_proj: NVFP4 through Marlin on Hopper
    assert weights(TINY, hf_quant={"quantization": q}) == expected


def test_quark_fp8_and_mxfp4():
    fp8 = {"quant_method": "quark", "global_quant_config": {
        "weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor"},
        "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}}, "exclude": ["lm_head"]}
    assert weights(with_q(fp8)) == linear_total(lambda n, k, parts: n * k + 4 + 4)
    mx = {"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "fp4", "qscheme": "per_group",
                                                                      "group_size": 32}}, "exclude": ["lm_head"]}
    assert weights(with_q(mx)) == linear_total(lambda n, k, parts: n * k // 2 + n * k // 32)


def test_online_fp8_of_a_bf16_checkpoint():
    assert weights(TINY, quantization="fp8") == linear_total(lambda n, k, parts: n * k + 4)


# -- published checkpoints ------------------------------------------------------------------
def tensor(graph, name):
    return next(t for _, d in graph.nodes() for t in d["tensors"] if t.name == name)


def sizer_for(graph, chip="h100", **flags):
    k = Kernel.of(graph, Deployment(**flags), get_chip(chip))
    return WeightSizer(graph, k.engine, get_chip(chip).generation, shipped())


def test_thebloke_genz_70b_gptq_tp4(shared_models):
    g = build_graph(resolve(str(shared_models / "TheBloke--Genz-70b-GPTQ.json")))
    s = sizer_for(g, tensor_parallel_size=4)
    # down_proj: N 8192, K 28672 / 4 = 7168 per rank; act order: scales for all 28672/128 = 224 groups (fp16)
    assert s.one(tensor(g, "layers.0.mlp.down_proj")) == 8192 * 7168 // 2 + 2 * 224 * 8192 + 8 * 7168
    # q_proj column-parallel: N 8192 / 4, K 8192: its own 64 groups
    assert s.one(tensor(g, "layers.0.self_attn.q_proj")) == 2048 * 8192 // 2 + 2 * 64 * 2048 + 8 * 8192


def test_thebloke_wizard_vicuna_gptq_per_channel(shared_models):
    g = build_graph(resolve(str(shared_models / "TheBloke--Wizard-Vicuna-30B-Uncensored-GPTQ.json")))
    s = sizer_for(g)
    # group_size -1: one fp16 scale row [1, N]; desc_act is moot per channel (no g_idx)
    assert s.one(tensor(g, "layers.0.mlp.down_proj")) == 6656 * 17920 // 2 + 2 * 6656


def test_ldcc_qwen25_72b_awq(shared_models):
    g = build_graph(resolve(str(shared_models / "LDCC--Qwen2.5-72B-Instruct-ko-AWQ.json")))
    assert g.quantization == "awq_marlin"
    n, k = 8192, 29568  # hidden, intermediate of its config: 231 groups of 128
    assert sizer_for(g).one(tensor(g, "layers.0.mlp.down_proj")) == n * k // 2 + 2 * 231 * n + 4 * 231 * (n // 8)
    # at tp 2 the row-parallel shard is 14,784 wide, 115.5 groups: vLLM refuses to load it (a load check)
    k2 = Kernel.of(g, Deployment(tensor_parallel_size=2), get_chip("h100"))
    assert not Startup(k2).starts and "not aligned" in Startup(k2).message
    assert k2.weight_bytes().refusal is None  # sized whole: the refusal is the release's, not the sizer's


def test_kocdigital_bnb_nf4(shared_models):
    g = build_graph(resolve(str(shared_models / "KOCDIGITAL--Kocdigital-LLM-8b-v0.1.json")))
    s = sizer_for(g)
    n, k = 4096, 14336
    blocks = n * k // 64
    assert s.one(tensor(g, "layers.0.mlp.down_proj")) == n * k // 2 + blocks + 4 * -(-blocks // 256) + 4 * 257 + 64


def test_amd_fp8_kv_static(shared_models):
    g = build_graph(resolve(str(shared_models / "amd--Llama-3.1-8B-Instruct-FP8-KV.json")))
    s = sizer_for(g)
    # fp8 per tensor, static activations: weight + one weight scale + one input scale; lm_head ignored
    assert s.one(tensor(g, "layers.0.mlp.down_proj")) == 4096 * 14336 + 4 + 4
    assert str(tensor(g, "lm_head").fmt) == "bf16"


def test_kimi_k25_int4_experts(shared_models):
    g = build_graph(resolve(str(shared_models / "moonshotai--Kimi-K2.5.json")))
    cfg = json.loads((shared_models / "moonshotai--Kimi-K2.5.json").read_text())["text_config"]
    s = sizer_for(g, "h200", tensor_parallel_size=8)
    h, inter = cfg["hidden_size"], cfg["moe_intermediate_size"] // 8
    # routed experts: INT4 group 32 symmetric through Marlin, w2 row-parallel (K = inter / 8 per rank)
    assert s.one(tensor(g, "layers.1.mlp.experts.w2")) == h * inter // 2 + 2 * (inter // 32) * h + 16
    # attention and shared experts are in `ignore`: bf16
    assert str(tensor(g, "layers.1.self_attn.kv_b_proj").fmt) == "bf16"
    assert str(tensor(g, "layers.1.mlp.shared_experts.gate_up_proj").fmt) == "bf16"


def test_nvidia_qwen3_235b_nvfp4_sidecar(tmp_path, shared_models):
    shutil.copy(shared_models / "nvidia--Qwen3-235B-A22B-NVFP4.json", tmp_path / "config.json")
    shutil.copy(shared_models / "nvidia--Qwen3-235B-A22B-NVFP4.hf_quant_config.json", tmp_path / "hf_quant_config.json")
    g = build_graph(resolve(str(tmp_path)))
    assert g.quantization == "modelopt_fp4"
    s = sizer_for(g, "b200", tensor_parallel_size=4, enable_expert_parallel=True)
    # an expert's w2 on SM100: uint8 [4096, 1536/2], swizzled FP8 scales [4096, 96], fp32 weight and
    # input global scales and the GEMM alpha (one each per expert)
    assert s.one(tensor(g, "layers.0.mlp.experts.w2")) == 4096 * 1536 // 2 + 4096 * 96 + 12
    assert str(tensor(g, "layers.0.mlp.router").fmt) == "bf16"


def test_redhat_dsv4_nvfp4_fp8(shared_models):
    g = build_graph(resolve(str(shared_models / "RedHatAI--DeepSeek-V4-Flash-NVFP4-FP8.json")))
    assert str(tensor(g, "layers.0.ffn.experts.w13").fmt) == "nvfp4"
    assert str(tensor(g, "layers.0.attn.wq_b").fmt) == "fp8_block"


# -- bad input and the command line ---------------------------------------------------------
def run(args, capsys):
    code = cli_main(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_unknown_method_is_one_line_naming_method_and_file(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps(with_q({"quant_method": "hqq", "nbits": 4})))
    code, out = run(["memory", "--model", str(tmp_path), "--chip", "h100"], capsys)
    assert code == 2
    line = out.strip().splitlines()[-1]
    assert "hqq" in line and str(tmp_path) in line and len(out.strip().splitlines()) == 1


def test_mismatched_quantization_flag_is_bad_input(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps(with_q({"quant_method": "awq", "bits": 4, "group_size": 128})))
    code, out = run(["memory", "--model", str(tmp_path), "--chip", "h100", "--quantization", "gptq"], capsys)
    assert code == 2 and "gptq" in out and "awq" in out


@pytest.mark.parametrize("method", ["compressed-tensors", "gptq_marlin", "awq", "bitsandbytes", "modelopt_fp4",
                                    "quark", "fbgemm_fp8"])
def test_help_lists_every_method_from_one_place(method, capsys):
    for command in (["memory", "--help"], ["--help"]):
        code, out = run(command, capsys)
        assert code == 0 and method in " ".join(out.split())


def test_minimax_m2_fp8_block_tp4(shared_models):
    """MiniMax-M2.7 (vLLM 0.33 minimax_m2.py) at tp 4: FP8 with 128 x 128 block scales in fp32 on the
    linears and experts; q_norm / k_norm over all heads, divided with the heads; an fp32 router and
    score bias, replicated; the rotary cache rotary_dim (64) wide, not head_dim (128)."""
    g = build_graph(resolve(str(shared_models / "MiniMaxAI--MiniMax-M2.7.json")))
    cfg = json.loads((shared_models / "MiniMaxAI--MiniMax-M2.7.json").read_text())
    s = sizer_for(g, "h200", tensor_parallel_size=4)
    h, d, e, inter = cfg["hidden_size"], cfg["head_dim"], cfg["num_local_experts"], cfg["intermediate_size"]
    assert (h, d, e, inter) == (3072, 128, 256, 1536)
    # w13 of one expert: N = 2 x 1536 / 4 = 768 rows per rank, K = 3072; one byte each, scales 6 x 24 fp32
    assert s.one(tensor(g, "layers.0.mlp.experts.w13")) == 768 * 3072 + 6 * 24 * 4
    # o_proj row-parallel: K = 48 x 128 / 4 = 1536 per rank, N = 3072; scales 24 x 12
    assert s.one(tensor(g, "layers.0.self_attn.o_proj")) == 3072 * 1536 + 24 * 12 * 4
    assert s.one(tensor(g, "layers.0.self_attn.q_norm")) == 48 * 128 // 4 * 2
    assert s.one(tensor(g, "layers.0.self_attn.k_norm")) == 8 * 128 // 4 * 2
    assert s.one(tensor(g, "layers.0.mlp.gate")) == e * h * 4
    assert s.one(tensor(g, "layers.0.mlp.e_score_correction_bias")) == e * 4
    rotary = [b for _, n in g.nodes() for b in n.get("buffers", []) if b is not None]
    assert {(b.rows, b.rotary_dim) for b in rotary} == {(cfg["max_position_embeddings"], 64)}
