"""What a capacity reviewer meets at the command line (issue 13): refusals are answers, input
names the nearest thing that exists, the user's own file wins over a card."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.cli import main
from pricing.chips import get_chip
from pricing.config import card_index, load_card
from pricing.errors import InputError
from pricing.kernel import Startup
from pricing.units import GiB
from tests.helpers import kernel


def _memory(capsys, *args) -> tuple[int, dict]:
    code = main(["memory", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _no_negative_bytes(node, path="") -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            _no_negative_bytes(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _no_negative_bytes(value, f"{path}[{i}]")
    elif isinstance(node, int) and not isinstance(node, bool):
        assert node >= 0, f"{path} is {node}"


# -- refusals are answers -------------------------------------------------------------------------
def test_memory_refuses_a_negative_pool_with_vllms_words(capsys):
    # dsv4.1-flash at tp 1 on one H200: 277.8 GiB of weights against a 128.6 GiB budget
    code, out = _memory(capsys, "--model", "dsv4.1-flash", "--chip", "h200")
    assert code == 1
    assert out["starts"] is False and out["refusal_check"] == "no_cache_memory"
    assert out["refusal"].startswith("No available memory for the cache blocks. Try increasing "
                                     "`gpu_memory_utilization` when initializing the engine")
    assert out["kv_pool"] == 0 and out["short_by"] == out["fixed"]["total"] - out["budget"] > 0
    assert "-tp 4 --enable-expert-parallel starts" in out["would_fit"]
    _no_negative_bytes(out)


def test_memory_text_refusal_exits_1_and_prints_no_negative_pool(capsys):
    assert main(["memory", "--model", "dsv4.1-flash", "--chip", "h200"]) == 1
    captured = capsys.readouterr()
    text, err = captured.out, captured.err
    # the answer first: vLLM's reason as one line on stderr, the breakdown on stdout after it
    assert err.count("\n") == 1 and err.startswith("plan: vLLM would not start (no_cache_memory): No available "
                                                    "memory for the cache blocks")
    assert "-tp 4 --enable-expert-parallel starts" in err
    assert "vLLM would not start" not in text and text.startswith("dsv4.1-flash")
    k = kernel("dsv4.1-flash", "h200")
    short = (k.fixed_bytes().total - k.budget()) / GiB  # the registry's laws decide the figure
    assert short > 100 and "KV pool -" not in text and f"-{short:.0f}" not in text
    assert f"no KV pool: the fixed memory exceeds the budget by {short:.2f} GiB" in text


def test_memory_refuses_one_request_too_long_and_names_the_longest_that_fits(capsys):
    # vllm-0.33-memory.md §10 appendix: 8 GiB logs 65,536 tokens at 1.00x, yet with the null block
    # held back one 65,536-token request does not fit; 2 MiB blocks of 16 tokens: 4,095 usable blocks
    # hold 65,520 tokens
    code, out = _memory(capsys, "--model", "llama-3.1-8b", "--chip", "h200", "--kv-cache-memory-bytes",
                        str(8 * GiB), "--max-model-len", "65536")
    assert code == 1 and out["starts"] is False and out["refusal_check"] == "one_request"
    assert out["refusal"].startswith("To serve at least one request with the model's max seq len (65536), (8.0 GiB "
                                     "KV cache is needed, which is larger than the available KV cache memory")
    assert "the estimated maximum model length is 65520." in out["refusal"]
    assert out["would_fit"].startswith("--max-model-len 65520 fits")


def test_estimated_max_model_len_is_the_longest_that_fits():
    k = kernel("llama-3.1-70b", "h100", tensor_parallel_size=2, max_model_len=131072)
    r = Startup(k).refusal()
    assert r.check == "one_request"
    longest = int(r.would_fit.split()[1])
    fits = kernel("llama-3.1-70b", "h100", tensor_parallel_size=2, max_model_len=longest,
                  kv_cache_memory_bytes=k.kv_pool())
    over = kernel("llama-3.1-70b", "h100", tensor_parallel_size=2, max_model_len=longest + 16,
                  kv_cache_memory_bytes=k.kv_pool())
    assert fits.instance.fits_one_request() and not over.instance.fits_one_request()


def test_kv_cache_memory_bytes_beyond_the_chip_is_refused(capsys):
    # 200 GB of KV cache on an 80 GB H100 cannot be allocated, whatever vLLM's own check skips
    code, out = _memory(capsys, "--model", "llama-3.1-8b", "--chip", "h100", "--kv-cache-memory-bytes",
                        "200000000000")
    assert code == 1 and out["starts"] is False and out["refusal_check"] == "kv_cache_memory_bytes"
    assert out["requests_held"] == 0
    room = get_chip("h100").memory_bytes - out["fixed"]["total"] - out["pre_snapshot"]
    assert f"--kv-cache-memory-bytes {room} " in out["would_fit"]
    code, out = _memory(capsys, "--model", "llama-3.1-8b", "--chip", "h100", "--kv-cache-memory-bytes", str(room))
    assert code == 0 and out["starts"] is True


def test_budget_beside_what_is_held_before_it_beyond_the_chip_is_refused(capsys):
    code, out = _memory(capsys, "--model", "llama-3.1-8b", "--chip", "h100", "--gpu-memory-utilization", "1.0")
    assert code == 1 and out["starts"] is False and out["refusal_check"] == "free_memory"
    total = get_chip("h100").memory_bytes
    free = total - out["pre_snapshot"]
    assert out["refusal"] == (f"Free memory on device cuda:0 ({round(free / GiB, 2)}/{round(total / GiB, 2)} GiB) on "
                              f"startup is less than desired GPU memory utilization (1.0, {round(total / GiB, 2)} "
                              "GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
    highest = float(out["would_fit"].split()[1])
    assert highest * total <= free < (highest + 0.01) * total


def test_a_deployment_that_starts_exits_0(capsys):
    code, out = _memory(capsys, "--model", "llama-3.1-8b", "--chip", "h200")
    assert code == 0 and out["starts"] is True and out["refusal"] is None and out["short_by"] == 0


# -- suggestions ----------------------------------------------------------------------------------
@pytest.mark.parametrize("typo, nearest", [("dsv41-flash", "dsv4.1-flash"), ("gpt-oss-120", "gpt-oss-120b"),
                                           ("llama3.1-70b", "llama-3.1-70b")])
def test_a_mistyped_model_gets_the_nearest_names_not_the_whole_list(capsys, typo, nearest):
    assert main(["memory", "--model", typo, "--chip", "h200"]) == 2
    err = capsys.readouterr().err
    assert f"did you mean {nearest!r}" in err
    assert "qwen2.5-7b" not in err  # not the whole card list
    assert len(err.strip().splitlines()) == 1


def test_a_mistyped_chip_gets_the_nearest_chip(capsys):
    assert main(["--model", "llama-3.1-8b", "--chip", "h20o", "--concurrency", "4"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'h20' or 'h200'" in err and "mi300x" not in err


# -- the user's file wins -------------------------------------------------------------------------
def _cached(tmp_path: Path, hf_id: str, config: dict) -> Path:
    snap = tmp_path / ("models--" + hf_id.replace("/", "--")) / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(config))
    return snap


def test_a_cached_config_wins_over_the_card_with_the_same_hf_id(tmp_path, monkeypatch):
    from pricing.config import resolve

    card = load_card(card_index()["llama-3.1-8b"])
    mine = dict(card.config, max_position_embeddings=12288)
    _cached(tmp_path, card.hf_id, mine)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    source = resolve(card.hf_id)
    assert source.config["max_position_embeddings"] == 12288
    assert source.origin.startswith("Hugging Face cache") and "not the model card llama-3.1-8b" in source.origin


def test_a_local_folder_wins_over_a_card_of_the_same_name_and_is_served_by_its_path(tmp_path, monkeypatch):
    from pricing.config import resolve

    card = load_card(card_index()["llama-3.1-8b"])
    folder = tmp_path / "llama-3.1-8b"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(dict(card.config, max_position_embeddings=8192)))
    monkeypatch.chdir(tmp_path)
    source = resolve("llama-3.1-8b")
    assert source.config["max_position_embeddings"] == 8192 and source.hf_id == "llama-3.1-8b"
    assert "not the model card llama-3.1-8b" in source.origin
    given = str(folder)
    assert resolve(given).hf_id == given


def test_the_kernel_refusal_is_none_when_it_starts():
    assert Startup(kernel("llama-3.1-8b", "h200")).refusal() is None
    with pytest.raises(InputError):
        kernel("llama-3.1-8b", "h200", max_model_len=10**9)


# -- vLLM's own refusals (golden fixtures from its planner, tests/golden/vllm-0.33/*_refused.json) -----
GOLDEN = Path(__file__).resolve().parent / "golden" / "vllm-0.33"
REFUSED = sorted(p for p in GOLDEN.glob("*.json") if json.loads(p.read_text())["vllm"].get("error"))


@pytest.mark.parametrize("path", REFUSED, ids=[p.stem for p in REFUSED])
def test_the_refusal_is_vllms_own_text(path):
    case = json.loads(path.read_text())
    project = case["project"]
    k = kernel(project["model"], project["chip"], kv_cache_memory_bytes=project["available_memory_bytes"],
               **project["deployment"])
    assert Startup(k).refusal() is not None and Startup(k).refusal().check == "one_request"
    assert Startup(k).message == case["vllm"]["error"]


AWQ_72B = "LDCC--Qwen2.5-72B-Instruct-ko-AWQ.json"  # 29,568-wide MLP: 231 groups of 128, odd, so tp 2 splits one


def test_an_awq_shard_refusal_suggests_the_split_that_starts_not_another_chip(capsys, shared_models):
    # at tp 2 the down projection's 14,784-wide input shard is 115.5 groups of 128: the loader refuses it
    # (a load check of the release: vLLM 0.33 auto_awq.py AutoAWQLinearMethod.create_weights);
    # at tp 1 the 231 groups are whole and the ~39 GiB of weights fit an H100 (the same chip generation)
    config = str(shared_models / AWQ_72B)
    code, out = _memory(capsys, "--model", config, "--chip", "h100", "-tp", "2")
    assert code == 1 and out["refusal_check"] == "load" and "not aligned" in out["refusal"]
    assert out["would_fit"].startswith("-tp 1 -dp 2 starts") and "generation" not in out["would_fit"]
    code, out = _memory(capsys, "--model", config, "--chip", "h100", "-tp", "1")
    assert code == 0 and out["starts"] is True  # the suggestion is true
    assert main(["--model", config, "--chip", "h100", "--concurrency", "4", "--context-length", "8192",
                 "--tp", "2"]) == 1
    text = capsys.readouterr().out
    assert "vLLM would not load the checkpoint at tp 2" in text and "Nearest fit: --tp 1 --dp 2 starts" in text
    assert "KV cache per rank" not in text  # not a memory story: no request is too large here


def test_when_nothing_fits_the_answer_is_one_line_on_stderr_before_the_reasons(capsys):
    assert main(["--model", "dsv3", "--chip", "l40s", "--concurrency", "8", "--max-gpus", "8"]) == 1
    captured = capsys.readouterr()
    assert captured.err == ("plan: no pool fits dsv3: 8 concurrent requests at 163,840 tokens (l40s: weights; the "
                            "reasons follow)\n")
    assert "weights alone need" in captured.out  # the breakdown after, on stdout
    review = Path(__file__).resolve().parents[1] / "scenarios" / "infeasible-review.yaml"
    assert main(["scenario", str(review), "--variant", "two-h200-nodes-16-users"]) == 1  # no note: a variant is asked
    err = capsys.readouterr().err
    assert err.startswith("plan: Kimi K2 on one H100 node (infeasible) — base: not every service can be served: kimi (")
    assert err.count("\n") == 1
    # a point vLLM would not start (qwen3-32b has 40,960 positions) is refused in its words' short form
    assert main(["compare", "--model", "qwen3-32b", "--chip", "h100", "--concurrency", "8", "--context-length", "8192",
                 "--context-length", "131072"]) == 1
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("plan: ")] == [
        "plan: what-if sweep — @ 128k: not every service can be served: what-if (beyond 40,960 positions)"]


def test_compare_carries_every_plan_option_it_takes_or_refuses_it(capsys):
    """A sweep's points carry --pp as `plan` reads it (and --spare); --margin, which a review's
    services cannot carry, is refused in one line (exit 2), never dropped."""
    sweep = ["compare", "--model", "llama-3.1-70b", "--chip", "h100", "--concurrency", "64", "--context-length", "8192"]
    assert main([*sweep, "--pp", "2", "--json"]) == 0
    staged = json.loads(capsys.readouterr().out)["base"]["services"][0]
    assert staged["pipeline_parallel_size"] == 2
    assert main(["--model", "llama-3.1-70b", "--chip", "h100", "--concurrency", "64", "--context-length", "8192",
                 "--pp", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["best"]["gpus"] == staged["gpus"]  # as `plan --pp 2` plans it
    assert main([*sweep, "--margin", "0.05"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--margin: is not carried into the compared points" in err
