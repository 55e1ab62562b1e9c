"""Collect vLLM's rows of NVIDIA aiconfigurator's measured silicon data into validation/vllm_silicon_points.yaml
(the step model's vLLM TPOT and TTFT against measurements it was not fitted on, README "Step time").

    python scripts/collectors/aiconfigurator_silicon_points.py GIT_DIR
    # GIT_DIR: a clone (or bare mirror) of ai-dynamo/aiconfigurator

`aic-core/src/aiconfigurator_core/systems/silicon_sample.csv` at COMMIT holds, per row, a backend and its
version, the checkpoint, the system, precision, mode, isl/osl, the client's concurrency (`batch_size`;
`silicon_data_source` repeats it as `silicon_concurrency`), tp, pp, attention dp and moe ep, and the measured
TTFT and TPOT in ms (aiconfigurator's accuracy tools take it as ground truth; the file does not say whether
they are means or medians, nor the server's flags or the number of prompts). Kept: backend vllm, mode agg,
pp 1, attention dp at most 1, on the checkpoints and systems below; each row's `measured=` date and
`image=` where its source says. Left out, and counted in the file: other checkpoints (no card), FP4 rows
of a checkpoint that is FP8 (the file names meta-llama/Llama-3.1-70B and MiniMaxAI/MiniMax-M2.5 for both;
moonshotai/Kimi-K2.5, INT4, for its FP4 rows too), rows whose first token came
later than the whole decode after it (TTFT > osl x TPOT: the requests queued for admission, so the client's
concurrency was not the server's batch; gpt-oss-120b at 512 on an H100 has a TTFT of two minutes), and rows
whose deployment vLLM 0.33 would not start (Qwen3-235B-A22B-FP8 at tp 1 on one H200: its weights alone
exceed the GPU; the file's tp may then not be the run's, which the rows kept at tp 2 and 4 share), and rows
repeating an earlier row's deployment, workload and figures as kept here (the file lists some runs twice,
from its database dump and from a dated CSV; kept twice, one copy could train the fit and the other be held
back from it).
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pricing.chips import get_chip  # noqa: E402
from pricing.graph import load_model  # noqa: E402
from pricing.kernel import Deployment, Kernel, Startup  # noqa: E402

OUT = ROOT / "validation" / "vllm_silicon_points.yaml"
REPO = "ai-dynamo/aiconfigurator"
COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
PATH = "aic-core/src/aiconfigurator_core/systems/silicon_sample.csv"
# checkpoint -> (model card, served format where the card's is not it, by the row's precision)
CHECKPOINTS = {"meta-llama/Llama-3.1-70B": ("llama-3.1-70b", {"fp8": "fp8"}),
               "openai/gpt-oss-120b": ("gpt-oss-120b", {"fp4": None}),
               "Qwen/Qwen3-32B": ("qwen3-32b", {"": None, "fp8": "fp8"}),
               "nvidia/Llama-3.1-8B-Instruct-FP8": ("llama-3.1-8b", {"fp8": "fp8"}),
               "Qwen/Qwen3-235B-A22B-FP8": ("qwen3-235b-a22b-fp8", {"fp8": None}),
               "moonshotai/Kimi-K2.5": ("kimi-k2.5", {"int4": None}),
               "MiniMaxAI/MiniMax-M2.5": ("minimax-m2.5", {"fp8": None})}
# the fields that make two rows one run: its deployment and workload, and both figures as kept (TTFT to the
# microsecond, TPOT to 0.1 us: the file prints one run's figures with different last digits in its two sources)
MEASUREMENT = ("model_path", "system", "precision", "backend_version", "tp_size", "pp_size", "attention_dp_size",
               "moe_ep_size", "batch_size", "isl", "osl")
# how the rows' closed loops are simulated (pricing/serving/silicon.py Harness): none of it stated by the source
BENCHMARK = {"prompts_per_client": 10, "length_floor": 0.8, "statistic": "mean",
             "how": (
                     "assumed, not stated by the source: most of the rows' workloads (1024/1024, 1024/8192 and "
                     "8192/1024 tokens at concurrencies 4 to 256) are SemiAnalysis InferenceX's scenarios, whose "
                     "harness runs benchmark_serving.py --request-rate inf --max-concurrency C --num-prompts 10 C "
                     "--random-range-ratio 0.8 --ignore-eos after --num-warmups 2 C (not measured), lengths uniform "
                     "in [0.8 n, n] (the older range-ratio convention); the statistic (mean, not median) chosen on "
                     "the training rows' TTFT (scripts/fits/fit_step.py's split): the median leaves the closed loop's"
                     " first, synchronised wave out and was 14-65 % optimistic there by concurrency bin, either step")}
SYSTEMS = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200", "b300_sxm": "b300"}


def rows_of(git_dir: Path) -> list[dict]:
    text = subprocess.run(["git", "-C", str(git_dir), "show", f"{COMMIT}:{PATH}"], check=True,
                          capture_output=True, text=True).stdout
    return list(csv.DictReader(io.StringIO(text)))


def _field(source: str, name: str) -> str | None:
    found = re.search(rf"(?:^|; ){name}=([^;]+)", source)
    return found.group(1).strip() if found else None


def collect(rows: list[dict]) -> tuple[list[dict], dict[str, int]]:
    points, left_out, seen = [], {}, set()

    def leave(reason: str) -> None:
        left_out[reason] = left_out.get(reason, 0) + 1

    for r in rows:
        if r["backend"] != "vllm" or r["mode"] != "agg":
            continue
        if r["model_path"] not in CHECKPOINTS or r["system"] not in SYSTEMS:
            leave("a checkpoint or system without a card or chip here")
            continue
        card, formats = CHECKPOINTS[r["model_path"]]
        if r["precision"] not in formats:
            leave(f"{r['model_path']} at precision {r['precision']} (the checkpoint named is not that format)")
            continue
        if int(r["pp_size"] or 1) != 1 or int(r["attention_dp_size"] or 1) > 1:
            leave("pipeline or attention data parallelism")
            continue
        ttft, tpot, osl = float(r["silicon_ttft_ms"]), float(r["silicon_tpot_ms"]), int(r["osl"])
        if ttft > osl * tpot:
            leave("a first token later than the whole decode after it (TTFT > osl x TPOT): requests queued for "
                  "admission, so the concurrency is not the batch the server ran")
            continue
        tp, ep = int(r["tp_size"]), int(r["moe_ep_size"] or 1) > 1
        chip, quant = SYSTEMS[r["system"]], formats[r["precision"]]
        kernel = Kernel.of(load_model(card, quant), Deployment(tensor_parallel_size=tp, enable_expert_parallel=ep,
                                                               max_model_len=int(r["isl"]) + int(r["osl"])),
                           get_chip(chip))
        if Startup(kernel).refusal() is not None:
            leave(f"{r['model_path']} at tp {tp} on one {chip}: vLLM 0.33 would not start it")
            continue
        measurement = (*(r[f] for f in MEASUREMENT), round(ttft, 3), round(tpot, 4))
        if measurement in seen:
            leave("the same measurement as an earlier row (one run listed twice, from two of the file's sources)")
            continue
        seen.add(measurement)
        source = r["silicon_data_source"]
        measured = _field(source, "measured")
        points.append({"id": r["id"], "model": card, "quantization": quant, "chip": chip,
                       "release": r["backend_version"] or None, "image": _field(source, "image"),
                       "tensor_parallel_size": tp, "enable_expert_parallel": ep,
                       "concurrency": int(r["batch_size"]), "isl": int(r["isl"]), "osl": int(r["osl"]),
                       "ttft_ms": round(ttft, 3), "tpot_ms": round(tpot, 4),
                       "measured_on": measured[:10] if measured else None,
                       "source_file": _field(source, "source_file")})
    return points, left_out


def main() -> None:
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):  # --help too: the usage is the docstring
        raise SystemExit(__doc__)
    points, left_out = collect(rows_of(Path(sys.argv[1])))
    doc = {"about": ("vLLM's rows of NVIDIA aiconfigurator's measured silicon data, for the step model's "
                     "validation (never its fit). Written by scripts/collectors/aiconfigurator_silicon_points.py; "
                     "TTFT and TPOT are the file's own, rounded."),
           "source": {"title": "ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/systems/silicon_sample.csv",
                      "url": f"https://github.com/{REPO}/blob/{COMMIT}/{PATH}",
                      "how": ("closed-loop runs at a fixed concurrency (the file's batch_size, its "
                              "silicon_concurrency), fixed nominal isl/osl; whether TTFT and TPOT are means or "
                              "medians, the server's flags and the prompts' count are not stated; release null "
                              "where the row names none")},
           "benchmark": BENCHMARK,
           "left_out": dict(sorted(left_out.items())),
           "points": points}
    OUT.write_text(yaml.safe_dump(doc, sort_keys=False, width=120, allow_unicode=True))
    print(f"wrote {OUT.relative_to(ROOT)}: {len(points)} points, {sum(left_out.values())} rows left out")


if __name__ == "__main__":
    main()
