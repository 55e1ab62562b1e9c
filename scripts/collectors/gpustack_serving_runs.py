"""Collect fully stated `vllm bench serve` runs from GPUStack's performance lab into
validation/vllm_serving_runs.yaml (the serving simulator's validation, README "Service targets").

    python scripts/collectors/gpustack_serving_runs.py DOCS_DIR COMMIT
    # DOCS_DIR: a gpustack checkout's docs/performance-lab

A run is kept when its document states the hardware, the vLLM release, the `vllm serve` command (only flags the
planner models: tp, dp, pp, expert parallel, max-model-len, max-num-seqs, max-num-batched-tokens, gpu-memory-
utilization, async scheduling; the API server's tokenizer mode and reasoning and tool parsers are passed over, as
the engine never sees them), on at most the GPUs its hardware states, and the benchmark is one of its random
datasets (fixed lengths, every request sent at once, the client's backend and endpoint stated: `vllm bench serve
--backend openai-chat --endpoint /v1/chat/completions --dataset-name random --random-input-len I
--random-output-len O --num-prompts N --seed 42`, no --request-rate, no --max-concurrency). ShareGPT runs are
left out: their per-request lengths are not stated. Every figure is copied from the document's result block.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import bench_serve_block  # scripts/collectors/: python puts the script's own folder first on sys.path
import yaml

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "validation" / "vllm_serving_runs.yaml"
CARDS = {"Qwen/Qwen3-32B": "qwen3-32b", "openai/gpt-oss-20b": "gpt-oss-20b", "openai/gpt-oss-120b": "gpt-oss-120b",
         "Qwen/Qwen3-8B": "qwen3-8b", "Qwen/Qwen3-235B-A22B-Instruct-2507": "qwen3-235b-a22b",
         "deepseek-ai/DeepSeek-R1-0528": "dsr1", "deepseek-ai/DeepSeek-V3.2": "dsv3.2",
         # the 2507 FP8 checkpoint: the card's architecture and FP8 block quantization, its 40,960 positions
         # (2507's 262,144 only raise max_model_len, which no run here reaches)
         "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": "qwen3-235b-a22b-fp8"}
CHIPS = {"H100 SXM": "h100", "H100 80GB": "h100", "H200": "h200", "A100 SXM 80GB": "a100-80gb"}
FLAGS = {"--tensor-parallel-size": "tensor_parallel_size", "-tp": "tensor_parallel_size",
         "--tp": "tensor_parallel_size",
         "--max-model-len": "max_model_len", "--max-num-seqs": "max_num_seqs",
         "--max-num-batched-tokens": "max_num_batched_tokens", "--gpu-memory-utilization": "gpu_memory_utilization",
         "--data-parallel-size": "data_parallel_size", "-dp": "data_parallel_size",
         "--pipeline-parallel-size": "pipeline_parallel_size", "-pp": "pipeline_parallel_size"}
# the API server's own: how text becomes tokens and replies are parsed, nothing the engine schedules or runs
FRONTEND = {"--tokenizer-mode": True, "--reasoning-parser": True, "--tool-call-parser": True,
            "--enable-auto-tool-choice": False}
SWITCHES = {"--enable-expert-parallel": ("enable_expert_parallel", True),
            "--async-scheduling": ("async_scheduling", True)}
BLOCK = re.compile(r'"[^"\n]*[Ss]erving script"\s*```(?:bash)?\s*(?P<cmd>.*?)```.*?"[^"\n]*[Bb]enchmark results?"\s*'
                   r'```(?:bash)?\s*(?P<out>.*?)```', re.S)


def flags_of(command: str) -> dict | None:
    """The deployment a `vllm serve` command states, or None when it sets a flag the planner does not model."""
    words = command.replace("\\\n", " ").split()
    if words[:2] != ["vllm", "serve"] or len(words) < 3:
        return None
    out, i = {"hf_id": words[2]}, 3
    while i < len(words):
        w = words[i]
        key, _, value = w.partition("=")
        if key in FLAGS:
            if not value:
                i += 1
                value = words[i]
            out[FLAGS[key]] = float(value) if "." in value else int(value)
        elif key in SWITCHES:
            out[SWITCHES[key][0]] = SWITCHES[key][1]
        elif key in FRONTEND:
            i += FRONTEND[key] and not value
        else:
            return None
        i += 1
    return out


def runs_of(path: Path, url: str) -> list[dict]:
    text = path.read_text()
    release = re.search(r"- vLLM: (v[\d.]+\S*)", text)
    hardware = re.search(r"### Hardware\s+(.+)", text)
    lengths = [tuple(int(x) for x in m) for m in re.findall(r"(\d+) input tokens, (\d+) output tokens", text)]
    bench = re.search(r"vllm bench serve[^\n]*--dataset-name random[^\n]*", text)
    if not release or not hardware or not lengths or not bench:
        return []
    words = bench.group(0).split()
    client = {k: words[words.index(f) + 1] for k, f in (("backend", "--backend"), ("backend", "--endpoint-type"),
                                                        ("endpoint", "--endpoint"), ("seed", "--seed")) if f in words}
    if set(client) != {"backend", "endpoint", "seed"}:
        return []
    hw = hardware.group(1)
    chip = next((c for name, c in CHIPS.items() if name in hw), None)
    count = re.search(r"(\d+) ×", hw)
    gpus = int(count.group(1)) if count else 1
    found = []
    for m in BLOCK.finditer(text):
        deployment = flags_of(" ".join(line.strip() for line in m.group("cmd").strip().splitlines()))
        if deployment is None or deployment["hf_id"] not in CARDS or chip is None:
            continue
        for result in m.group("out").split("Serving Benchmark Result")[1:]:
            run = _run(result, lengths, deployment, chip, gpus, release.group(1), url, client)
            if run is not None:
                found.append(run)
    return found


def _run(result: str, lengths, deployment: dict, chip: str, gpus: int, release: str, url: str,
         client: dict) -> dict | None:
    """One result block as a run, when its lengths are one of the document's random datasets (mean
    input within 1 %, every output token generated to within 1 %)."""
    deployment = dict(deployment)
    figures = bench_serve_block.figures(result)
    if "requests" not in figures or "p99_tpot_ms" not in figures:
        return None
    n = int(figures["requests"])
    isl, osl = figures["input_tokens"] / n, figures["output_tokens"] / n
    match = next(((i, o) for i, o in lengths if abs(isl - i) <= 0.01 * i and abs(osl - o) <= 0.01 * o), None)
    if match is None:  # ShareGPT, or outputs that stopped early: lengths not as stated
        return None
    deployment.setdefault("tensor_parallel_size", 1)
    world = (deployment["tensor_parallel_size"] * deployment.get("data_parallel_size", 1)
             * deployment.get("pipeline_parallel_size", 1))
    if world > gpus:  # a run on fewer of the machine's GPUs than it has is as stated (tp 4 on an 8-GPU node)
        return None
    flags = "".join(f":{k}={v}" for k, v in sorted(deployment.items())
                    if k not in ("hf_id", "tensor_parallel_size"))
    return {
        "id": f"gpustack:{CARDS[deployment['hf_id']]}:{chip}:tp{world}{flags}:{match[0]}/{match[1]}:n{n}",
        "url": url, "model": CARDS[deployment.pop("hf_id")], "chip": chip, "release": release,
        "deployment": deployment,
        # the client's backend and endpoint: openai-chat sends each prompt through the model's chat template
        "benchmark": {"dataset": "random", "input_len": match[0], "output_len": match[1], "num_prompts": n,
                      "request_rate": "inf", "max_concurrency": None, "seed": int(client["seed"]),
                      "backend": client["backend"], "endpoint": client["endpoint"]},
        "measured": {k: figures[k] for k in bench_serve_block.FIGURES.values() if k in figures},
    }


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1].startswith("-"):  # --help too: the usage is the docstring
        sys.exit(__doc__)
    docs, commit = Path(sys.argv[1]), sys.argv[2]
    runs = []
    for path in sorted(docs.glob("*/*.md")):
        rel = path.relative_to(docs.parent.parent)
        runs += runs_of(path, f"https://github.com/gpustack/gpustack/blob/{commit}/{rel}")
    seen = set()
    unique = [r for r in runs if not (r["id"] in seen or seen.add(r["id"]))]
    data = {"about": "Fully stated public `vllm bench serve` runs (random dataset, fixed lengths, every request sent "
                     "at once) from GPUStack's performance lab, for the serving simulator's validation. Written by "
                     "scripts/collectors/gpustack_serving_runs.py; every figure is copied from the document's "
                     "result block.",
            "source": {"title": "GPUStack performance lab (docs/performance-lab/*/)",
                       "url": f"https://github.com/gpustack/gpustack/tree/{commit}/docs/performance-lab"},
            "runs": unique}
    OUT.write_text(yaml.safe_dump(data, sort_keys=False, width=120))
    print(f"{len(unique)} runs -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
