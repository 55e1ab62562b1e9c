"""Reference deployment A (shared/spec/README.md): DeepSeek-V3 on 8 × H200, tp 8, fp8 KV.

The spec's printed figures are reproduced with the spec's own registry values (the overlay
pricing/registry/overlays/spec-reference.yaml); the shipped registry carries the laws refitted
on real start-ups, which vLLM follows (tests/test_calibration.py)."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.cli import cli
from pricing.registry import read_overlay
from pricing.units import GiB, MiB
from tests.helpers import kernel

SPEC = str(Path(__file__).resolve().parents[1] / "pricing" / "registry" / "overlays" / "spec-reference.yaml")
FLAGS = dict(tensor_parallel_size=8, kv_cache_dtype="fp8", max_num_batched_tokens=8192, max_num_seqs=1024)


@pytest.fixture(scope="module")
def k():
    return kernel("dsv3", "h200", registry=read_overlay(SPEC), **FLAGS)


def test_printed_figures(k):
    f = k.fixed_bytes()
    assert 78.1 <= f.weights / GiB <= 79.6
    assert round(f.weights / GiB, 1) == 79.3  # vLLM's own loading rules (see the spec's README)
    assert f"{f.activation_peak / GiB:.1f}" == "1.1"
    assert f"{f.cuda_graph / GiB:.1f}" == "0.8"
    assert f.comm_buffers == 0 and f.eplb_redundant == 0
    assert f.total == f.weights + f.activation_peak + f.cuda_graph
    assert f"{k.pre_snapshot_bytes() / GiB:.1f}" == "3.9"
    assert f"{k.sequence_variable_bytes(4096) / MiB:.0f}" == "137"


def test_hand_checked_parts(k):
    # activations: 10 buffers (MoE, tp 8) × 8192 tokens × hidden 7168 × 2 bytes
    assert k.activation().forward == 10 * 8192 * 7168 * 2
    # the sampler pass: 1024 rows × 129,280 vocab × (2 + 4) bytes, smaller than the forward
    assert k.activation().sampler == 1024 * 129280 * 6
    # before the budget: 392 MiB NCCL reservation at tp 8 + 3.5 GiB engine workspace
    assert k.pre_snapshot_bytes() == 411041792 + 3758096384
    # KV: 576 one-byte elements per token in each of 61 layers
    assert k.cache_bytes_per_token() == 35136
    assert k.sequence_variable_bytes(4096) == 35136 * 4096


def test_note_simple_rule_gives_78_2(k):
    """The note's rule on the same graph: every linear layer (router, LM head included) at the
    served FP8 width divided by tp, the embedding at BF16 divided too, no scales: 78.23 GiB."""
    tp = 8
    total = 0
    for _, data in k.model.nodes(None):
        for t in data["tensors"]:
            if t.name == "embed_tokens":
                total += t.rows * t.cols * 2 / tp
            elif t.cols > 1:
                total += t.rows * t.cols * t.count / tp
    assert f"{total / GiB:.2f}" == "78.23"
    assert f"{total / GiB:.1f}" == "78.2"


def test_cli_prints_the_breakdown():
    result = CliRunner().invoke(cli, ["memory", "--registry", SPEC, "--model", "dsv3", "--chip", "h200", "-tp", "8",
                                      "--kv-cache-dtype", "fp8", "--max-num-batched-tokens", "8192",
                                      "--max-num-seqs", "1024"])
    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.output.splitlines()]
    # the spec's printout (one unit, GiB, for the whole fixed block; the spec rounds to one decimal,
    # the tool prints two, planner/numbers.py): each printed figure rounds to the spec's
    printed = {}
    for line in lines:
        m = re.fullmatch(r"(.+?) ([\d,.]+) (GiB|MiB)", line)
        if m:
            printed[m.group(1)] = (float(m.group(2).replace(",", "")), m.group(3))
    for name, spec_value in (("weights", "79.3"), ("activations", "1.1"), ("CUDA graphs", "0.8"),
                             ("comm buffers", "0.0"), ("EPLB", "0.0"), ("fixed per rank", "81.2"),
                             ("before the budget", "3.9")):
        value, unit = printed[name]
        assert unit == "GiB" and f"{value:.1f}" == spec_value, (name, value)
    request = next(line for line in lines if line.startswith("a 4,096-token request:"))
    value = float(re.search(r": ([\d.]+) MiB of KV cache per rank", request).group(1))
    assert f"{value:.0f}" == "137"  # the spec's 137 MiB


def test_cli_json_has_integer_bytes():
    result = CliRunner().invoke(cli, ["memory", "--registry", SPEC, "--model", "dsv3", "--chip", "h200", "-tp", "8",
                                      "--kv-cache-dtype", "fp8", "--max-num-batched-tokens", "8192",
                                      "--max-num-seqs", "1024", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data["fixed"]) == {"weights", "activation_peak", "cuda_graph", "comm_buffers", "eplb_redundant",
                                  "non_torch", "total"}
    assert all(isinstance(v, int) for v in data["fixed"].values())
    assert data["pre_snapshot"] == 411041792 + 3758096384
    assert data["sequence"]["variable"] == 35136 * 4096
    assert data["activation"]["forward"] + data["activation"]["model_buffers"] == data["fixed"]["activation_peak"]
    assert data["kv_groups"][0]["layers"][0] == "layers.0.self_attn.kv"
    assert {"name", "value", "source", "how"} <= set(data["provenance"][0])
    names = {p["name"] for p in data["provenance"]}
    assert "cost_model_memory.activation_buffers.moe" in names
    assert "cost_model_primitives.engine_workspace" in names
