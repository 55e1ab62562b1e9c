"""Bad input: one line naming the field and the fix, exit status 2, no traceback; and where a
model may come from (card, config.json file or folder, the local Hugging Face cache)."""

import json
import shutil

import pytest
from click.testing import CliRunner

from planner.cli import main
from pricing.config import resolve
from pricing.errors import InputError
from pricing.graph import build_graph, load_model


def run(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("args, field", [
    (["memory", "--model", "no-such-model", "--chip", "h200"], "--model"),
    (["memory", "--model", "dsv3", "--chip", "tpu9"], "--chip"),
    # `plan memory -tp 3` on heads it does not divide is vLLM's refusal, exit 1 (tests/test_load_checks.py)
    (["--model", "llama-3.1-70b", "--chip", "h200", "--concurrency", "8", "--tp", "3"], "--tp"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h200", "--gpu-memory-utilization", "1.5"],
     "--gpu-memory-utilization"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h200", "--gpu-memory-utilization", "0"],
     "--gpu-memory-utilization"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h200", "--max-num-batched-tokens", "0"],
     "--max-num-batched-tokens"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h200", "-tp", "8", "-dcp", "3"],
     "--decode-context-parallel-size"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h200", "--enable-expert-parallel"], "--enable-expert-parallel"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h200", "--max-model-len", "999999999"], "--max-model-len"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h200", "--kv-cache-dtype", "int3"], "--kv-cache-dtype"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h200", "--num-speculative-tokens", "2"],
     "--num-speculative-tokens"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h200", "--quantization", "int2"], "--quantization"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h200", "--tokens", "-5"], "--tokens"),
])
def test_bad_input_is_one_line_with_exit_status_2(args, field, capsys):
    code, out, err = run(args, capsys)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and field in lines[0]
    assert "Traceback" not in err


def test_malformed_config_json(tmp_path, capsys):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    code, _, err = run(["memory", "--model", str(bad), "--chip", "h200"], capsys)
    assert code == 2 and "not valid JSON" in err and len(err.strip().splitlines()) == 1


def test_config_missing_a_field_names_it(tmp_path, shared_models, capsys):
    cfg = json.loads((shared_models / "meta-llama--Meta-Llama-3.1-8B.json").read_text())
    del cfg["num_attention_heads"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, _, err = run(["memory", "--model", str(tmp_path), "--chip", "h200"], capsys)
    assert code == 2 and "num_attention_heads" in err


def test_unknown_family(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    code, _, err = run(["memory", "--model", str(tmp_path / "config.json"), "--chip", "h200"], capsys)
    assert code == 2 and "model_type" in err


def test_a_users_config_json_prices_like_the_card(shared_models):
    from_card = load_model("llama-3.1-70b")
    from_file = build_graph(resolve(str(shared_models / "meta-llama--Meta-Llama-3.1-70B.json")))
    tensors = lambda m: sorted((t.name, t.rows, t.cols, t.fmt) for _, d in m.nodes() for t in d["tensors"])  # noqa: E731
    assert tensors(from_card) == tensors(from_file)


def test_folder_with_hf_quant_config(tmp_path, shared_models):
    shutil.copy(shared_models / "nvidia--DeepSeek-V4-Flash-NVFP4.json", tmp_path / "config.json")
    shutil.copy(shared_models / "nvidia--DeepSeek-V4-Flash-NVFP4.hf_quant_config.json",
                tmp_path / "hf_quant_config.json")
    graph = build_graph(resolve(str(tmp_path)))
    fmts = {str(t.fmt) for _, d in graph.nodes() for t in d["tensors"] if t.split.startswith("expert")}
    assert "nvfp4" in fmts


def test_hugging_face_cache_offline(tmp_path, monkeypatch, shared_models):
    snap = tmp_path / "hub" / "models--acme--tiny-llama" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    shutil.copy(shared_models / "meta-llama--Meta-Llama-3.1-8B.json", snap / "config.json")
    (tmp_path / "hub" / "models--acme--tiny-llama" / "refs").mkdir()
    (tmp_path / "hub" / "models--acme--tiny-llama" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    source = resolve("acme/tiny-llama")
    assert source.hf_id == "acme/tiny-llama" and source.config["hidden_size"] == 4096
    with pytest.raises(InputError, match="^model: ") as err:  # the field; `plan` says --model
        resolve("acme/not-cached")
    assert err.value.field == "model"


def test_graph_is_a_dag_with_data_flow(shared_models):
    import networkx as nx

    g = load_model("dsv3").g
    assert nx.is_directed_acyclic_graph(g)
    assert nx.has_path(g, "embed_tokens", "lm_head")


def test_every_card_builds():
    from pricing.config import list_cards

    for card in list_cards():
        load_model(card["name"])


def test_each_card_file_is_named_after_its_card_and_found_by_any_of_its_names():
    """`resolve` reads only `<name>.yaml` for a short name; aliases and HF ids go through the index."""
    from pricing.config import CARDS, _card, _card_for, list_cards

    for path in sorted(CARDS.glob("*.yaml")):
        assert _card(path)["name"] == path.stem, f"{path.name} holds card {_card(path)['name']!r}"
    for card in list_cards():
        path = CARDS / f"{card['name']}.yaml"
        assert _card_for(card["name"]) == path
        assert _card_for(card["hf_id"].lower()) == path
        for alias in card["aliases"]:
            assert _card_for(alias.lower()) == path


def test_plan_models_lists_the_cards():
    result = CliRunner().invoke(__import__("planner.cli", fromlist=["cli"]).cli, ["models", "--json"])
    names = {c["name"] for c in json.loads(result.stdout)}
    required = {"dsv3", "dsv3.2", "kimi-k2", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen3-8b", "qwen3-32b",
                "qwen3-30b-a3b", "qwen3-235b-a22b", "mixtral-8x7b", "gpt-oss-20b", "gpt-oss-120b", "gemma-3-27b",
                "dsv4-flash", "dsv4-pro", "dsv4.1-flash"}
    assert required <= names


def test_a_card_file_given_by_path_is_read_as_a_card(tmp_path):
    """`--model path/to/card.yaml`: a card of one's own, in pricing/cards' layout (the calibration's
    record-only descriptions are read so); its name and Hugging Face id are the file's."""
    from pricing.config import CARDS

    card = tmp_path / "mine.yaml"
    card.write_text((CARDS / "qwen3-8b.yaml").read_text().replace("name: qwen3-8b", "name: mine", 1))
    source = resolve(str(card))
    assert (source.name, source.hf_id, source.config["num_hidden_layers"]) == ("mine", "Qwen/Qwen3-8B", 36)
    assert source.origin == "model card mine.yaml"
