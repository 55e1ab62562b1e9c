"""The checkpoint's own size beside the graph's: safetensors headers written here (header only,
no data: the check never reads data), the index's total_size, and neither."""

import json
import struct

from planner.cli import main
from pricing.chips import get_chip
from pricing.config import resolve
from pricing.config.checkpoint import read_header
from pricing.graph import build_graph
from pricing.kernel import Deployment, Kernel
from pricing.kernel.report import memory_report
from tests.test_quantization import HEADS, INTER, KV, TINY, D, H, L, V

BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "U8": 1}


def write_safetensors(path, tensors):
    """tensors: name -> (dtype, shape). Writes the 8-byte length and the JSON header only."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (dtype, shape) in tensors.items():
        n = BYTES[dtype]
        for s in shape:
            n *= s
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    return offset


def tiny_tensors(dtype="BF16"):
    """The tiny llama as its checkpoint names it (HF layout: gate and up apart)."""
    t = {"model.embed_tokens.weight": (dtype, (V, H)), "lm_head.weight": (dtype, (V, H)),
         "model.norm.weight": (dtype, (H,))}
    for i in range(L):
        p = f"model.layers.{i}"
        t.update({f"{p}.self_attn.q_proj.weight": (dtype, (HEADS * D, H)),
                  f"{p}.self_attn.k_proj.weight": (dtype, (KV * D, H)),
                  f"{p}.self_attn.v_proj.weight": (dtype, (KV * D, H)),
                  f"{p}.self_attn.o_proj.weight": (dtype, (H, HEADS * D)),
                  f"{p}.mlp.gate_proj.weight": (dtype, (INTER, H)), f"{p}.mlp.up_proj.weight": (dtype, (INTER, H)),
                  f"{p}.mlp.down_proj.weight": (dtype, (H, INTER)),
                  f"{p}.input_layernorm.weight": (dtype, (H,)), f"{p}.post_attention_layernorm.weight": (dtype, (H,))})
    return t


def report_for(folder):
    graph = build_graph(resolve(str(folder)))
    return memory_report(Kernel.of(graph, Deployment(), get_chip("h100")), 1024)


def test_header_is_read_without_data(tmp_path):
    total = write_safetensors(tmp_path / "x.safetensors", {"a": ("F32", (3, 5)), "b": ("U8", (7,))})
    header = read_header(tmp_path / "x.safetensors")
    assert set(header) == {"a", "b"} and total == 3 * 5 * 4 + 7
    assert (tmp_path / "x.safetensors").stat().st_size < 200  # no data was ever written


def test_matching_checkpoint_has_no_gap(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    total = write_safetensors(tmp_path / "model.safetensors", tiny_tensors())
    # by hand: 2 bytes for every element of the tiny llama
    elements = 2 * V * H + H + L * (HEADS * D * H + 2 * KV * D * H + H * HEADS * D + 3 * INTER * H + 2 * H)
    assert total == 2 * elements
    c = report_for(tmp_path).checkpoint
    assert c.found and c.checkpoint_bytes == total and c.graph_bytes == total
    assert c.warning is None and c.unaccounted == []


def test_a_gap_above_2_percent_warns_and_names_the_tensors(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    tensors = tiny_tensors()
    tensors["vision_tower.blocks.0.proj.weight"] = ("F32", (256, 256))
    tensors["vision_tower.blocks.1.proj.weight"] = ("F32", (256, 256))
    write_safetensors(tmp_path / "model-00001-of-00001.safetensors", tensors)
    r = report_for(tmp_path)
    assert r.checkpoint.warning and "vision_tower.blocks.N.proj.weight" in r.checkpoint.warning
    assert r.warnings == [r.checkpoint.warning]
    assert r.checkpoint.unaccounted[0].tensors == 2 and r.checkpoint.unaccounted[0].bytes == 2 * 256 * 256 * 4
    code = main(["memory", "--model", str(tmp_path), "--chip", "h100"])
    out = capsys.readouterr().out
    assert code == 0 and "warning:" in out and "vision_tower.blocks.N.proj.weight" in out
    code = main(["memory", "--model", str(tmp_path), "--chip", "h100", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["warnings"] and data["checkpoint"]["unaccounted"][0]["pattern"] == "vision_tower.blocks.N.proj.weight"


def test_gptq_checkpoint_in_its_stored_layout(tmp_path):
    qc = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True, "sym": True}
    (tmp_path / "config.json").write_text(json.dumps(dict(TINY, quantization_config=qc, torch_dtype="float16")))
    tensors = {k: v for k, v in tiny_tensors("F16").items() if "proj" not in k}
    for i in range(L):
        for name, n, k in (("self_attn.q_proj", HEADS * D, H), ("self_attn.k_proj", KV * D, H),
                           ("self_attn.v_proj", KV * D, H), ("self_attn.o_proj", H, HEADS * D),
                           ("mlp.gate_proj", INTER, H), ("mlp.up_proj", INTER, H), ("mlp.down_proj", H, INTER)):
            p = f"model.layers.{i}.{name}"
            # AutoGPTQ: qweight int32 [K/8, N], qzeros int32 [K/128, N/8], scales fp16 [K/128, N], g_idx int32 [K]
            tensors.update({f"{p}.qweight": ("I32", (k // 8, n)), f"{p}.qzeros": ("I32", (k // 128, n // 8)),
                            f"{p}.scales": ("F16", (k // 128, n)), f"{p}.g_idx": ("I32", (k,))})
    total = write_safetensors(tmp_path / "model.safetensors", tensors)
    c = report_for(tmp_path).checkpoint
    assert c.checkpoint_bytes == total and c.graph_bytes == total and c.unaccounted == []


def test_index_only(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 123456789},
                                                                       "weight_map": {}}))
    c = report_for(tmp_path).checkpoint
    assert c.found and c.checkpoint_bytes == 123456789 and "index" in c.note and c.warning


def test_neither_is_said_once(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    code = main(["memory", "--model", str(tmp_path), "--chip", "h100"])
    out = capsys.readouterr().out
    assert code == 0 and out.count("not cross-checked") == 1
