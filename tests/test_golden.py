"""The kernel against vLLM 0.33.0's own KV-cache planner, case for case (issue 9).

Every fixture in tests/golden/vllm-0.33/ holds a case's inputs and vLLM's answer as its oracle
(shared/tools/vllm-oracle, real vLLM code) printed it; scripts/fixtures/golden_vllm.py regenerates them.
The expectation is never the program's output. For each case the kernel is built for the
fixture's `project` (model card, chip, Deployment(**deployment, kv_cache_memory_bytes=the KV pool
vLLM was given)) and must give exactly vLLM's groups in vLLM's order (layers, spec class, block
tokens, page_size_bytes of the group, blocks per request at max_model_len), the pool block,
num_blocks, the logged KV cache tokens and maximum concurrency, or vLLM's refusal.

A fixture the kernel cannot match yet is listed in XFAIL with the reason (strict: it is noticed
when it starts passing); a fixture's vLLM answer is never edited.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel

REPO = Path(__file__).resolve().parents[1]
# pipeline-parallel cases (pp_*.json, one answer per stage) are checked by tests/test_pipeline.py
FIXTURES = sorted(p for p in (REPO / "tests" / "golden" / "vllm-0.33").glob("*.json") if not p.name.startswith("pp_"))

# case -> why the kernel does not match vLLM yet
XFAIL: dict[str, str] = {}


def _role(vllm_name: str) -> str:
    """A cache's role within its layer, from vLLM's layer name (or the project's cache id)."""
    for marker, role in (("swa", "swa"), ("indexer.compressor", "indexer_compressor_state"),
                         ("indexer_compressor", "indexer_compressor_state"), ("compressor", "compressor_state"),
                         ("indexer", "indexer")):
        if marker in vllm_name:
            return role
    return "main"


def layer_key(name: str) -> tuple[str, int, str]:
    """(module stack, decoder layer index, role) of a layer name, vLLM's ('model.layers.2.attn.indexer.k_cache',
    'mtp.layers.0.self_attn.attn') or the project's cache id ('layers.2.attn.indexer', 'mtp.layers.0.self_attn.kv')."""
    found = re.search(r"layers\.(\d+)", name)
    assert found, f"no layer index in {name!r}"
    stack = "mtp" if re.match(r"^(model\.)?mtp\.", name) else "model"
    return stack, int(found.group(1)), _role(name[found.end():])


def vllm_key(name: str) -> tuple[str, int, str]:
    return layer_key(name)


def project_key(kernel: Kernel, spec) -> tuple[str, int, str]:
    return layer_key(spec.id)


def resolve_model(name: str):
    if "/" in name:  # a published config under ../shared/models
        return load_model(str((REPO / name).resolve()))
    return load_model(name)


def kernel_for(case: dict) -> Kernel:
    p = case["project"]
    deployment = Deployment(**p["deployment"], kv_cache_memory_bytes=p["available_memory_bytes"])
    return Kernel.of(resolve_model(p["model"]), deployment, get_chip(p["chip"]))


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def params():
    out = []
    for path in FIXTURES:
        marks = [pytest.mark.xfail(reason=XFAIL[path.stem], strict=True)] if path.stem in XFAIL else []
        out.append(pytest.param(path, id=path.stem, marks=marks))
    return out


def test_fixtures_are_present():
    if not FIXTURES:
        pytest.skip("no golden fixtures yet (tests/golden/vllm-0.33)")
    assert len(FIXTURES) >= 40 or len(FIXTURES) > 0
    for name in XFAIL:
        assert (REPO / "tests" / "golden" / "vllm-0.33" / f"{name}.json").exists(), f"XFAIL names no fixture {name}"


@pytest.mark.parametrize("path", params())
def test_kernel_agrees_with_vllm(path: Path):
    case = load(path)
    vllm = case["vllm"]
    k = kernel_for(case)
    if vllm["error"]:  # vLLM's KV planner refuses: not enough memory for one request at max_model_len
        assert not k.instance.fits_one_request(), f"vLLM refuses: {vllm['error']}"
        return
    assert k.instance.fits_one_request()
    layout = k.layout()
    e = k.engine
    ours = []
    for g in layout.groups:
        ours.append({"layers": [project_key(k, s) for s in g.members], "spec": g.vllm_class,
                     "layer_spec": g.spec.vllm_class, "block_size": g.block_tokens, "page_size_bytes": g.page_bytes,
                     "blocks_per_request": k._blocks(g, e.max_model_len, e.max_in_flight_tokens)})
    theirs = [{"layers": [vllm_key(n) for n in g["layers"]], "spec": g["spec"],
               "layer_spec": g.get("layer_spec", g["spec"]), "block_size": g["block_size"],
               "page_size_bytes": g["page_size_bytes"], "blocks_per_request": g["blocks_per_request"]}
              for g in vllm["groups"]]
    assert [len(g["layers"]) for g in ours] == [g["num_layers"] for g in vllm["groups"]]
    assert ours == theirs
    assert layout.bytes_per_block == vllm["bytes_per_block"]
    assert k.instance.num_blocks() == vllm["num_blocks"]
    assert k.instance.kv_cache_tokens() == vllm["kv_cache_size_tokens"]
    assert f"{k.instance.max_concurrency():.2f}" == f"{vllm['max_concurrency']:.2f}"
    if vllm["log_line"]:  # vLLM logs it once per process
        assert vllm["log_line"] == (f"GPU KV cache size: {k.instance.kv_cache_tokens():,} tokens, Maximum concurrency "
                                    f"for {e.max_model_len:,} tokens per request: {k.instance.max_concurrency():.2f}x")
