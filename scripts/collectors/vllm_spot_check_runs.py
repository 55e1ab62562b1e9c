"""Collect the fully stated vLLM runs of simon-mo/vLLM-Benchmark (vLLM's "interactive performance spot
check", by a vLLM maintainer) into validation/vllm_spot_check_runs.yaml (the serving simulator's
validation, README "Service targets").

    python scripts/collectors/vllm_spot_check_runs.py GIT_DIR [RERUN_DIR]
    # GIT_DIR: a clone (or bare mirror) of simon-mo/vLLM-Benchmark; RERUN_DIR: of Michaelvll/llm-ie-benchmarks

What the repository states, at the commit that saved each set of results:
- the release: the Justfile's `uvx --with 'vllm==0.8.4'` (README: "H200, vLLM 0.8.4"; results under
  saved-results/v0.8.4);
- the server: `VLLM_USE_FLASHINFER_SAMPLER=1 vllm serve deepseek-ai/DeepSeek-R1 --tensor-parallel-size 8
  --trust-remote-code --no-enable-prefix-caching --disable-log-requests` on one node of 8 H200 (the Justfile's
  `_serve-vllm`), with `--enable-expert-parallel` in the Justfile of 2025-04-16 (ef8b39a) and, on 2025-04-18,
  for the files whose name ends in `-ep` (README: "vLLM_EP: --enable-expert-parallel");
- the client: `benchmark_serving.py --model deepseek-ai/DeepSeek-R1 --dataset-name random --ignore-eos
  --num-prompts 50 --request-rate 10 --random-input-len I --random-output-len O` (the Justfile's `run-scenario`;
  the random dataset's lengths fixed, Poisson arrivals, seed 0, backend vllm on /v1/completions);
- the machines: Berkeley's DGX H200 (Xeon 8480C) and Nebius's H200 (Xeon 8468) (README, LOG.md 04/18/2025).
Every figure is the saved result's own (`--save-result` JSON), rounded to 0.01. The ShareGPT runs are left out:
their per-request lengths are not stated.

Michaelvll/llm-ie-benchmarks ran the same Justfile again (its vllm/setup.sh clones simon-mo/vLLM-Benchmark; `just
serve vllm deepseek-r1`, whose Justfile then had expert parallelism off) on Nebius H200 nodes through SkyPilot,
twice, and committed each run's whole log (vllm/logs/vllm-deepseek-r1.log at 391045f and ba52c1f): nvidia-smi, lscpu
(Xeon 8468), `vllm --version` (0.8.4), each client's command line and parsed arguments, and its printed result.
Those runs are read from the logs' printed blocks (two decimals as printed).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import bench_serve_block  # scripts/collectors/: python puts the script's own folder first on sys.path
import yaml

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "validation" / "vllm_spot_check_runs.yaml"
REPO = "simon-mo/vLLM-Benchmark"
RELEASE = "v0.8.4"
# the commit that saved each set, its machine, and whether every run of it had expert parallelism on
SETS = {"h200/2025-04-16": ("ef8b39a0ba030c9e8b33010bc23547b4efb049df", "Berkeley DGX H200 (Xeon 8480C)", True),
        "h200/2025-04-18": ("6e8f7dab0b9d9674b4dbe95dc31276fc4e1fc011", "Berkeley DGX H200 (Xeon 8480C)", None),
        "nebius-h200/2025-04-18": ("c28e1dc6ce0e8edd2d102b12af2d6b6307511787", "Nebius H200 (Xeon 8468)", None)}
NAME = re.compile(r"vllm-(?P<isl>\d+)-(?P<osl>\d+)(?:-(?P<ep>ep)?)?\.json$")
# a saved result JSON's keys -> the run file's
SAVED = {"completed": "requests", "duration": "duration_s", "total_input_tokens": "input_tokens",
         "total_output_tokens": "output_tokens", "output_throughput": "output_tokens_per_second",
         "median_ttft_ms": "p50_ttft_ms", "p99_ttft_ms": "p99_ttft_ms", "median_tpot_ms": "p50_tpot_ms",
         "p99_tpot_ms": "p99_tpot_ms", "median_itl_ms": "p50_itl_ms", "p99_itl_ms": "p99_itl_ms"}


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(git_dir), *args], check=True, capture_output=True, text=True).stdout


def runs_of(git_dir: Path) -> list[dict]:
    out = []
    for folder, (commit, machine, all_ep) in SETS.items():
        files = _git(git_dir, "ls-tree", "-r", "--name-only", commit, f"saved-results/v0.8.4/deepseek-r1/{folder}")
        for path in sorted(files.split()):
            name = NAME.search(path)
            if not name:  # the ShareGPT runs and the other engines' files
                continue
            saved = json.loads(_git(git_dir, "show", f"{commit}:{path}"))
            # the 04-16 set names the weights by their local copy, /data/nm/models/DeepSeek-R1
            assert saved["model_id"].endswith("/DeepSeek-R1") and saved["backend"] == "vllm", path
            assert saved["num_prompts"] == 50 and saved["request_rate"] == 10.0 and saved["burstiness"] == 1.0, path
            assert saved["max_concurrency"] is None, path
            ep = all_ep if all_ep is not None else name["ep"] == "ep"
            isl, osl = int(name["isl"]), int(name["osl"])
            out.append({
                "id": f"spot-check:dsr1:h200:tp8{':ep' if ep else ''}:{isl}/{osl}:{folder.replace('/', ':')}",
                "url": f"https://github.com/{REPO}/blob/{commit}/{path}",
                "model": "dsr1", "chip": "h200", "release": RELEASE, "machine": machine,
                "measured_on": folder.split("/")[1],
                "deployment": {"tensor_parallel_size": 8, **({"enable_expert_parallel": True} if ep else {})},
                "benchmark": {"dataset": "random", "input_len": isl, "output_len": osl,
                              "num_prompts": saved["num_prompts"], "request_rate": saved["request_rate"],
                              "max_concurrency": None, "seed": 0, "backend": "vllm", "endpoint": "/v1/completions",
                              "ignore_eos": True},
                "measured": {ours: round(float(saved[theirs]), 2) for theirs, ours in SAVED.items()},
            })
    return out


RERUNS = {"391045fa882482453fef6af677dbfa5321207982": "2025-04-20",  # each log's commit -> the day its run started
          "ba52c1f8c4c9d901443d8ce533250a996177184e": "2025-04-20"}
RERUN_LOG = "vllm/logs/vllm-deepseek-r1.log"
CLIENT = re.compile(r"benchmark_serving\.py .*?--random-input-len (?P<isl>\d+) --random-output-len (?P<osl>\d+) .*?"
                    r"Namespace\((?P<args>.*?)\)\n.*?=+ Serving Benchmark Result =+\n(?P<out>.*?)\n=+\n", re.S)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def reruns_of(git_dir: Path) -> list[dict]:
    """The SkyPilot reruns' results, from each committed log: its client's parsed arguments checked
    against the stated command, its host and release checked against the log's own lines."""
    out = []
    for commit, day in RERUNS.items():
        log = ANSI.sub("", _git(git_dir, "show", f"{commit}:{RERUN_LOG}"))
        log = re.sub(r"^\((?:vllm-benchmark,|setup) pid=\d+\) ?", "", log, flags=re.M)
        assert "Intel(R) Xeon(R) Platinum 8468" in log and log.count("NVIDIA H200") >= 8, commit
        for found in CLIENT.finditer(log):
            args = found["args"]
            for stated in ("backend='vllm'", "endpoint='/v1/completions'", "dataset_name='random'", "num_prompts=50",
                           "request_rate=10.0", "burstiness=1.0", "seed=0", "ignore_eos=True",
                           "random_range_ratio=0.0", "max_concurrency=None", "model='deepseek-ai/DeepSeek-R1'"):
                assert stated in args, (commit, stated)
            figures = bench_serve_block.figures(found["out"])
            isl, osl = int(found["isl"]), int(found["osl"])
            out.append({
                "id": f"spot-check:dsr1:h200:tp8:{isl}/{osl}:nebius-h200:{day}:{commit[:7]}",
                "url": f"https://github.com/Michaelvll/llm-ie-benchmarks/blob/{commit}/{RERUN_LOG}",
                "model": "dsr1", "chip": "h200", "release": RELEASE, "machine": "Nebius H200 (Xeon 8468)",
                "measured_on": day,
                "deployment": {"tensor_parallel_size": 8},
                "benchmark": {"dataset": "random", "input_len": isl, "output_len": osl, "num_prompts": 50,
                              "request_rate": 10.0, "max_concurrency": None, "seed": 0, "backend": "vllm",
                              "endpoint": "/v1/completions", "ignore_eos": True},
                "measured": {k: figures[k] for k in bench_serve_block.FIGURES.values()},
            })
    return out


def main() -> None:
    if len(sys.argv) not in (2, 3) or sys.argv[1].startswith("-"):  # --help too: the usage is the docstring
        sys.exit(__doc__)
    data = {"about": "Fully stated vLLM runs of simon-mo/vLLM-Benchmark (vLLM's interactive performance spot check) "
                     "for the serving simulator's validation. Written by scripts/collectors/vllm_spot_check_runs.py; "
                     "every figure is the saved benchmark_serving.py result's own, rounded to 0.01.",
            "source": {"title": "vLLM's performance spot check (simon-mo/vLLM-Benchmark)",
                       "url": f"https://github.com/{REPO}/tree/d538cdc9366989e6b356514ff5d5d7ff6be6903e"},
            "runs": runs_of(Path(sys.argv[1])) + (reruns_of(Path(sys.argv[2])) if len(sys.argv) == 3 else [])}
    OUT.write_text(yaml.safe_dump(data, sort_keys=False, width=120))
    print(f"{len(data['runs'])} runs -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
