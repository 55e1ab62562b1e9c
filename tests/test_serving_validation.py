"""The serving simulator against public `vllm bench serve` runs (validation/vllm_serving_runs.yaml):
every run fully stated with its source, and README's table recomputed from the file."""

from pathlib import Path

from pricing.serving.validation import FIGURES, runs
from tests.helpers import script

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return script("readme_serving_table")


def test_every_run_is_fully_stated_with_its_source():
    found = runs()
    assert len(found) >= 8
    assert len({r.id for r in found}) == len(found)
    for r in found:
        assert r.url.startswith("https://github.com/gpustack/gpustack/blob/") and r.release.startswith("v0.")
        b = r.benchmark
        assert b["dataset"] == "random" and b["input_len"] > 0 and b["output_len"] > 0 and b["num_prompts"] > 0
        assert b["request_rate"] == "inf" and b["seed"] == 42
        assert b["backend"] == "openai-chat" and b["endpoint"] == "/v1/chat/completions"  # the client, as stated
        assert all(r.measured[k] > 0 for k in FIGURES), r.id
        # the lengths are the run's own: its totals over its requests
        assert abs(r.measured["input_tokens"] / r.measured["requests"] / b["input_len"] - 1) <= 0.01 + 1e-9
        assert abs(r.measured["output_tokens"] / r.measured["requests"] / b["output_len"] - 1) <= 0.01 + 1e-9


def test_readme_shows_the_simulated_runs():
    readme = (ROOT / "README.md").read_text()
    script = _script()
    start = readme.index(script.BEGIN) + len(script.BEGIN)
    assert readme[start:readme.index(script.END)] == script.section()
