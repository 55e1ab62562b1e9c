"""The golden fixtures (tests/golden/vllm-0.33/*.json, vLLM 0.33's own KV planner via
scripts/fixtures/golden_vllm.py) are well formed: required keys, the vLLM version, a model card and a chip
the project knows, and vLLM's answer present in every case. Comparing the kernel with them is
tests/test_golden.py; this only guards the files themselves."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml

from pricing.kernel.deployment import Deployment

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "vllm-0.33"
FILES = sorted(GOLDEN.glob("*.json"))
CARDS = {p.stem for p in (ROOT / "pricing" / "cards").glob("*.yaml")}
CHIPS = {p.stem: yaml.safe_load(p.read_text())["chip"] for p in (ROOT / "pricing/registry/chips").glob("*.yaml")}
LOG_LINE = re.compile(r"GPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per request: "
                      r"([\d.]+)x")


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_there_are_enough_cases_and_every_card_is_covered():
    assert len(FILES) >= 45
    models = {_load(p)["project"]["model"] for p in FILES}
    assert CARDS - models == set(), f"cards without a golden case: {sorted(CARDS - models)}"


def test_fixture_set_stays_small():
    assert sum(p.stat().st_size for p in FILES) < 2_000_000


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_fixture_is_well_formed(path):
    f = _load(path)
    assert {"case", "why", "project", "oracle", "vllm", "vllm_version"} <= f.keys()
    assert f["case"] == path.stem
    assert f["vllm_version"] == "0.33.0"
    assert f["why"].strip()
    p = f["project"]
    assert p["model"] in CARDS, f"{p['model']} is not a card of pricing/cards"
    sm = f["oracle"].get("sm")  # the generation the oracle emulated, where the generator records it
    assert p["chip"] in CHIPS, f"{p['chip']} is not a chip of pricing/registry/chips/"
    assert sm in (None, CHIPS[p["chip"]]["generation"]), "the oracle emulated another chip generation"
    Deployment(**p["deployment"])  # only Deployment fields, valid values
    memory = p["available_memory_bytes"]  # one figure, or one per pipeline stage
    assert all(isinstance(m, int) and m > 0 for m in (memory if isinstance(memory, list) else [memory]))
    assert f["oracle"]["script"] in ("oracle.py", "dsv4_specs.py", "dsv41_specs.py")
    assert f["oracle"]["input"]["available_memory_bytes"] == p["available_memory_bytes"]
    assert f["oracle"]["input"]["max_model_len"] == p["deployment"]["max_model_len"]


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_case_has_vllms_answer(path):
    f = _load(path)
    v = f["vllm"]
    assert v["groups"], "vLLM formed no KV cache group"
    for g in v["groups"]:
        assert {"layers", "num_layers", "spec", "block_size", "page_size_bytes", "blocks_per_request"} <= g.keys()
        assert len(g["layers"]) == g["num_layers"] > 0
        assert g["block_size"] > 0 and g["page_size_bytes"] > 0 and g["blocks_per_request"] > 0
    if v["error"] is not None:
        assert "memory" in v["error"].lower(), "a refusal carries vLLM's reason"
        assert v["num_blocks"] is None and v["kv_cache_size_tokens"] is None
        return
    assert v["bytes_per_block"] > 0 and v["num_blocks"] > 0
    if f["project"]["deployment"].get("pipeline_parallel_size", 1) == 1:
        # one worker: num_blocks = available // pool block (pipeline stages take the minimum over workers)
        assert v["num_blocks"] == f["project"]["available_memory_bytes"] // v["bytes_per_block"]
    m = LOG_LINE.fullmatch(v["log_line"])
    assert m, v["log_line"]
    assert int(m.group(1).replace(",", "")) == v["kv_cache_size_tokens"]
    assert int(m.group(2).replace(",", "")) == f["project"]["deployment"]["max_model_len"]
    assert m.group(3) == f"{v['max_concurrency']:.2f}"
    # vLLM's law (kv_cache_utils.get_kv_cache_capacity): tokens = int(concurrency x max_model_len),
    # concurrency = num_blocks / sum over groups of the blocks one request holds at max_model_len
    conc = v["num_blocks"] / sum(g["blocks_per_request"] for g in v["groups"])
    assert math.isclose(conc, v["max_concurrency"], rel_tol=1e-12)


def test_a_refusal_is_among_the_cases():
    errors = [_load(p)["vllm"]["error"] for p in FILES]
    assert any(e for e in errors)
