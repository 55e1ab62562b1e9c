"""The README's serving-simulator validation against vLLM's own performance spot check, from
validation/vllm_spot_check_runs.yaml: each run measured / simulated, and how far the same command,
measured again on the same machine or on another, moves its own figures:

    python scripts/readme_serving_spot_check.py           # print it
    python scripts/readme_serving_spot_check.py --write   # replace it in README.md, between its markers
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
import readme_section  # noqa: E402
from readme_serving_table import TOLERANCE, _ms  # noqa: E402

from pricing.serving.validation import FIGURES, SPOT_CHECK, Run, runs, simulated_figures  # noqa: E402

SHOWN = ("duration_s", *FIGURES)


def rows() -> list[tuple[Run, dict, dict]]:
    """(run, simulated, errors) for every run."""
    out = []
    for run in runs(SPOT_CHECK):
        served = run.simulate()
        sim = simulated_figures(served) | {"duration_s": served.duration}
        out.append((run, sim, {k: sim[k] / run.measured[k] - 1 for k in SHOWN}))
    return out


def setup(run: Run) -> tuple[int, int, bool]:
    """What a run's command states: its lengths and whether expert parallelism is on."""
    b = run.benchmark
    return b["input_len"], b["output_len"], bool(run.deployment.get("enable_expert_parallel"))


def spread(measured: list[Run]) -> dict[str, float]:
    """How much larger each figure's largest measurement is than its smallest, over runs of one command."""
    return {k: max(r.measured[k] for r in measured) / min(r.measured[k] for r in measured) - 1 for k in SHOWN}


def repeats(table) -> list[tuple[tuple, str, list[Run]]]:
    """The commands measured more than once: (setup, "one machine" or "two machines", their runs)."""
    by_setup: dict[tuple, list[Run]] = {}
    for run, _, _ in table:
        by_setup.setdefault(setup(run), []).append(run)
    out = []
    for key, measured in sorted(by_setup.items()):
        machines = sorted({r.machine for r in measured})
        for machine in machines:  # the same machine on two days
            same = [r for r in measured if r.machine == machine]
            if len(same) > 1:
                out.append((key, "one machine", same))
        if len(machines) > 1:  # one run per machine, the first of each
            out.append((key, "two machines", [next(r for r in measured if r.machine == m) for m in machines]))
    return out


def _label(key: tuple) -> str:
    isl, osl, ep = key
    return f"{isl:,}/{osl:,}{' ep' if ep else ''}"


def _day(run: Run) -> str:
    return run.id.rsplit(":", 1)[-1]


def section() -> str:
    table = rows()
    within = [r for r, _, e in table if all(abs(e[k]) <= TOLERANCE for k in FIGURES)]
    data = runs(SPOT_CHECK)
    machines = sorted({r.machine for r in data})
    lines = ["**Against vLLM's own performance spot check.** `validation/vllm_spot_check_runs.yaml`: "
             f"{len(table)} fully stated runs from simon-mo/vLLM-Benchmark, a vLLM maintainer's reproducible "
             "comparison (`scripts/vllm_spot_check_runs.py`: the Justfile's `vllm==0.8.4`, its `vllm serve "
             "deepseek-ai/DeepSeek-R1 --tensor-parallel-size 8 --no-enable-prefix-caching` with or without "
             "`--enable-expert-parallel`, its client `benchmark_serving.py --dataset-name random --ignore-eos "
             "--num-prompts 50 --request-rate 10`, each saved result's own figures), on "
             + " and ".join(machines) + ". vLLM 0.8.4 is older than the rules packs (0.10 to 0.33), so each run "
             "is simulated as vLLM 0.33 with its defaults would serve it; none of them is in the step model's fit. "
             "Measured / simulated, in ms (duration in s):", "",
             "| run (input/output tokens, machine, day) | duration | p50 TTFT | p99 TTFT | p50 TPOT | p99 TPOT | "
             "all four within 10 % |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for run, sim, err in table:
        cells = [f"{run.measured[k]:,.1f} / {sim[k]:,.1f} ({err[k]:+.0%})" if k == "duration_s"
                 else f"{_ms(run.measured[k])} / {_ms(sim[k])} ({err[k]:+.0%})" for k in SHOWN]
        host = run.machine.split(" (")[0]
        lines.append(f"| [{_label(setup(run))}, {host}, {_day(run)}]({run.url}) | " + " | ".join(cells)
                     + f" | {'yes' if run in within else 'no'} |")
    medians = {k: statistics.median(abs(e[k]) for _, _, e in table) for k in FIGURES}
    again = repeats(table)
    across = [(key, s) for key, how, rs in again if how == "two machines" for s in [spread(rs)]]
    same = [(key, s) for key, how, rs in again if how == "one machine" for s in [spread(rs)]]
    beyond = [key for key, s in across if any(s[k] > TOLERANCE for k in FIGURES)]
    short = [(r, s) for r, s, _ in table if r.benchmark["input_len"] <= 1000]
    lines += ["", f"{len(within)} of {len(table)} runs are within 10 % on all four figures; median |error|: "
              + ", ".join(f"{k.replace('_ms', '').replace('_', ' ')} {v:.0%}" for k, v in medians.items()) + ".", "",
              "The same command measured again, the largest measurement over the smallest of each figure "
              "(a spread the simulator, which knows the chip and not the host, cannot follow):", "",
              "| command (input/output tokens) | measured on | duration | p50 TTFT | p99 TTFT | p50 TPOT | p99 TPOT |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for key, how, measured in again:
        s = spread(measured)
        where = (f"{measured[0].machine.split(' (')[0]}, " + " and ".join(_day(r) for r in measured)
                 if how == "one machine" else " and ".join(r.machine for r in measured))
        lines.append(f"| {_label(key)} | {where} | " + " | ".join(f"+{s[k]:.0%}" for k in SHOWN) + " |")
    lines += ["",
              "- On two machines (the repository's LOG.md: their CPUs, Xeon 8480C and 8468, clock differently), "
              f"{len(beyond)} of "
              f"{len(across)} commands differ from themselves by more than 10 % on at least one of the four figures "
              f"(their p50 TPOT by {min(s['p50_tpot_ms'] for _, s in across):.0%} to "
              f"{max(s['p50_tpot_ms'] for _, s in across):.0%}); on one machine two days apart, the duration moves by "
              f"at most {max(s['duration_s'] for _, s in same):.0%} and p50 TPOT by at most "
              f"{max(s['p50_tpot_ms'] for _, s in same):.0%}. At 10 requests/s the engine steps are short enough "
              "that the host's time per step (scheduling, the API server's detokenizing and streaming in 0.8.4's one "
              "front-end process) is a large part of each, and it is not the chip's.",
              f"- 1,000-token prompts ({len(short)} runs): measured p50 TTFT "
              f"{min(r.measured['p50_ttft_ms'] for r, _ in short):,.0f} to "
              f"{max(r.measured['p50_ttft_ms'] for r, _ in short):,.0f} ms, simulated "
              f"{min(s['p50_ttft_ms'] for _, s in short):,.0f} ms: the engine prefills such a prompt in one step "
              "beside the running decodes; the rest is time outside the engine's steps (the front end, the "
              "request's way in), which the simulator does not model.",
              "- Prompts of 5,000 tokens or more: the simulated p50 TTFT is "
              + _range([e["p50_ttft_ms"] for r, _, e in table if r.benchmark["input_len"] >= 5000])
              + ": vLLM 0.33's defaults (8,192 tokens a step on an H200) at the step model's prefill rate for "
              "vLLM, against 0.8.4's own MLA prefill and scheduler.", ""]
    return "\n".join(lines)


def _range(errors: list[float]) -> str:
    return f"{min(errors):+.0%} to {max(errors):+.0%}"


if __name__ == "__main__":
    readme_section.main("readme_serving_spot_check", section, __doc__.splitlines()[0])
