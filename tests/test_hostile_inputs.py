"""Hostile and careless inputs (issue 39): each is one line naming the file, key or flag and the fix,
exit status 2, before any arithmetic; or a true answer. Every case here broke the tool before."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import cli as run

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
if not MODELS.is_dir():  # CI lays shared/ beside the clone
    MODELS = Path("/work/shared/models")
QWEN = json.loads((MODELS / "Qwen--Qwen3-8B.json").read_text())
PLAN = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "4"]


def one_line_error(argv: list[str], *needles: str) -> str:
    code, out, err = run(argv)
    assert code == 2, (argv, code, out[-500:], err[-2000:])
    assert out == "" and err.count("\n") == 1 and err.startswith("plan: error: "), (argv, err)
    for needle in needles:
        assert needle in err, (argv, err)
    return err


def config(tmp_path: Path, **changes) -> str:
    path = tmp_path / "m" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({**QWEN, **changes}))
    return str(path)


# -- config.json: every value the graph sizes a model by, checked before any arithmetic -----------
@pytest.mark.parametrize("key,value,needle", [
    ("hidden_size", 4096.5, "hidden_size: 4096.5 is not a whole number"),
    ("hidden_size", "4096", "hidden_size: '4096' is not a whole number"),
    ("num_hidden_layers", True, "num_hidden_layers: True is not a whole number"),
    ("hidden_size", -4096, "hidden_size: -4,096 is outside 1 … 131,072"),
    ("num_attention_heads", 0, "num_attention_heads: 0 is outside 1 … 1,024"),
    ("vocab_size", 0, "vocab_size: 0 is outside 1 … 2,097,152"),
    ("intermediate_size", -1, "intermediate_size: -1 is outside 1 … 524,288"),
    ("num_hidden_layers", 10**9, "num_hidden_layers: 1,000,000,000 is outside 1 … 1,024"),
    ("max_position_embeddings", 0, "max_position_embeddings: 0 is outside 1 … 67,108,864"),
    ("torch_dtype", "float7", "torch_dtype: unknown dtype 'float7' (give one of bfloat16"),
])
def test_a_config_value_out_of_type_or_range_is_one_line_naming_file_and_key(tmp_path, key, value, needle):
    path = config(tmp_path, **{key: value})
    for argv in (["memory", "--model", path, "--chip", "h100"], ["--model", path, "--chip", "h100",
                                                                  "--concurrency", "4"]):
        err = one_line_error(argv, f"--model: {path}: {needle}")
        assert "use at most 0" not in err


def test_every_shipped_card_and_published_config_is_inside_the_ranges():
    """The ranges (registry input_limits.yaml) refuse no model the project ships or was published."""
    from pricing.config import list_cards, resolve

    for card in list_cards():
        resolve(card["name"])
    for path in MODELS.glob("*.json"):
        if "hf_quant" not in path.name:
            resolve(str(path))


# -- files: special files refused before reading, a size cap, what was expected said -----------
def test_a_device_or_fifo_given_as_a_file_is_refused_before_it_is_read(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)  # reading it would block for ever
    one_line_error(["memory", "--model", str(fifo), "--chip", "h100"], f"--model: {fifo} is a FIFO, not a regular")
    one_line_error(["memory", "--model", "/dev/zero", "--chip", "h100"], "--model: /dev/zero is a device")
    one_line_error(["check-log", "/dev/zero"], "/dev/zero is a device")
    one_line_error([*PLAN, "--registry", "/dev/zero"], "--registry: /dev/zero is a device")
    one_line_error(["scenario", str(fifo)], f"{fifo} is a FIFO")


def test_a_file_over_the_cap_is_refused_without_reading_it_whole(tmp_path, monkeypatch):
    from pricing.registry import shipped

    cap = shipped().value("input_limits.file_bytes")
    big = tmp_path / "config.json"
    with open(big, "wb") as f:  # sparse: no disk used
        f.truncate(cap + 1)
    one_line_error(["memory", "--model", str(big), "--chip", "h100"], f"larger than the {cap:,} bytes")


CARD = {"name": "mine", "hf_id": "me/mine", "config": QWEN}


@pytest.mark.parametrize("text,needle", [
    ("services:\n  - {name: chat, model: llama-3.1-8b, concurrency: 4}\n", "is a scenario file, not a model card"),
    ("hello\n", "holds str, not a model card"),
    ("a: [\n", "is not valid YAML (line 2)"),
    (json.dumps({k: v for k, v in CARD.items() if k != "hf_id"}), "hf_id: missing"),
    (json.dumps({**CARD, "hf_id": ""}), "hf_id: is empty"),
    ("name: a\nname: b\n", ":2: name: the key 'name' is given twice (first on line 1)"),
    (json.dumps({**CARD, "config": {**QWEN, "hidden_size": -1}}), "hidden_size: -1 is outside"),
])
def test_a_yaml_given_to_model_that_is_no_card_says_what_was_expected(tmp_path, text, needle):
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    one_line_error(["memory", "--model", str(path), "--chip", "h100"], "--model: ", needle)
