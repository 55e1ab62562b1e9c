"""Issue 42's "what a reviewer tripped on": each item a reviewer read and questioned, as a test."""

from __future__ import annotations

import json

from planner.cli import main

# a pool sized by a rate at mean targets, no --concurrency (issue 42, item 3)
BY_RATE = ["--model", "qwen3-235b-a22b-fp8", "--chip", "h200", "--isl", "8000", "--osl", "1000",
           "--requests-per-second", "1.9", "--ttft-ms", "3000", "--tpot-ms", "50", "--context-length", "9000"]


def test_a_plan_sized_by_a_rate_claims_no_concurrency_it_was_not_asked(capsys):
    """Item 3: no concurrency was asked, so the title names the rate, not '1 concurrent request',
    and the JSON's asked, required and every headroom are null where the text prints '-'."""
    assert main([*BY_RATE, "--brief"]) == 0
    title = capsys.readouterr().out.splitlines()[0]
    assert "concurrent request" not in title
    assert title.startswith("qwen3-235b-a22b-fp8: 1.9 requests/s at 9,000 tokens, TPOT ≤ 50.0 ms")
    assert title.count("requests/s") == 1
    assert main([*BY_RATE, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    t = out["target"]
    assert (t["asked"], t["required"], t["headroom_percent"]) == (None, None, None)
    assert t["requests_per_second"] == 1.9
    assert out["best"]["held"] > 1 and out["best"]["headroom_percent"] is None
    assert all(p["headroom_percent"] is None for p in out["alternatives"])


def test_a_concurrency_asked_beside_a_rate_is_still_a_target(capsys):
    """Item 3's converse: --concurrency 1 given with the rate is asked, and the JSON says so."""
    assert main([*BY_RATE, "--concurrency", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["target"]["asked"] == 1 and out["target"]["required"] == 1
    assert out["best"]["headroom_percent"] == round((out["best"]["held"] - 1) * 100, 2)


def test_the_handover_link_says_its_unit_truly(capsys):
    """Item 4: a 400 Gb/s NIC per GPU achieving 85% carries 400 / 8 × 0.85 = 42.5 gigabytes per
    second (tests/test_disagg_plan.py's transfer time); the field says gigabytes, not 'gbps'."""
    code = main(["--model", "llama-3.1-8b", "--prefill-chip", "b200", "--decode-chip", "h200", "--isl", "2000",
                 "--osl", "200", "--requests-per-second", "5", "--ttft-ms", "1500", "--tpot-ms", "30",
                 "--context-length", "8192", "--tp", "1", "--tp", "2", "--serving", "disagg", "--json"])
    assert code == 0
    handover = json.loads(capsys.readouterr().out)["serving"]["disaggregated"]["handover"]
    assert handover["link"].startswith("400 Gb/s")
    assert "link_gbps_per_gpu" not in handover
    assert handover["link_gbytes_per_second_per_gpu"] == 400 / 8 * 0.85


def test_compare_help_says_each_chip_is_its_own_point():
    """Item 9: `plan compare` plans each --chip as its own point of the sweep, so its help does not
    say 'choose among chips' (which `plan`'s help still says, truly)."""
    from click.testing import CliRunner

    from planner.cli import cli

    compare = " ".join(CliRunner().invoke(cli, ["compare", "--help"], terminal_width=200).output.split())
    assert "choose among chips" not in compare
    assert "--chip TEXT chip id (repeat to compare: each chip is planned as its own point" in compare
    plan = " ".join(CliRunner().invoke(cli, ["--help"], terminal_width=200).output.split())
    assert "--chip TEXT chip id (repeat to choose among chips" in plan


def test_csv_with_emit_keeps_the_csv_whole(capsys, tmp_path):
    """Item 10: `--format csv --emit k8s -o DIR` prints the plan table as CSV on stdout and what it
    wrote (and the manifests' notes) on stderr, as --json does."""
    import csv
    import io

    code = main(["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--format", "csv",
                 "--emit", "k8s", "-o", str(tmp_path)])
    assert code == 0
    out, err = capsys.readouterr()
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0][1:3] == ["chip", "GPUs"] and rows[1][0] == "best"
    assert {len(r) for r in rows} == {len(rows[0])}  # every line a row of the table
    assert "wrote" not in out and f"wrote {tmp_path / 'llama-3-1-8b.yaml'} (Deployment, Service)" in err
    assert (tmp_path / "llama-3-1-8b.yaml").exists()


def test_counts_in_binds_have_separators_and_their_plural(capsys):
    """Item 11: 'one instance holds 1,368 of the 64 asked' (thousands separators, planner/numbers.py
    count) and 'at 1 replica' (llama-3.1-8b at tp 1 misses p90 TPOT ≤ 20 ms alone at 10 requests/s:
    tests/test_planner_slo.py's figure, so two replicas are needed and one is named)."""
    import re

    assert main(["--model", "dsv4.1-flash", "--chip", "h200", "--concurrency", "64", "--context-length", "32768",
                 "--json"]) == 0
    binds = json.loads(capsys.readouterr().out)["best"]["binds"]
    held = re.search(r"one instance holds ([\d,]+) of the 64 asked", binds).group(1)
    assert int(held.replace(",", "")) >= 1000 and held == f"{int(held.replace(',', '')):,}"
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "1000", "--osl", "200",
                 "--requests-per-second", "10", "--p99-ttft-ms", "1000", "--p90-tpot-ms", "20", "--tp", "1",
                 "--json"]) == 0
    binds = json.loads(capsys.readouterr().out)["best"]["binds"]
    assert "(at 1 replica, 10.00 requests/s each:" in binds and "at 2 replicas (5.00 requests/s each)" in binds
    assert "1 replicas" not in binds


def test_a_grid_over_the_context_length_says_8k_as_the_rest_does(tmp_path):
    """Item 11: a grid's variant names, ranking table, markdown and chart ticks write a context length
    as `plan compare` does (planner/numbers.py tokens_label: 8192 = 8 × 2^10 is '8k'), never 8192."""
    from planner.report.review import markdown
    from planner.scenario import Scenario, grid_points, point_word

    grid = {"context_length": [8192, 32768], "services.chat.max_model_len": [1 << 20], "growth": [1, 1.5]}
    names = [name for name, _ in grid_points(grid)]
    assert names[0] == "context_length 8k, services.chat.max_model_len 1M, growth 1"
    assert names[-1] == "context_length 32k, services.chat.max_model_len 1M, growth 1.5"
    assert point_word(9000, "context_length") == "9,000" and point_word(8192, "gpus.h200") == "8192"

    from planner.app.review import compare

    s = Scenario(review="grid", inventory={"h200": {"gpus_per_node": 8}},
                 services=[{"name": "chat", "model": "llama-3.1-8b", "concurrency": 50, "context_length": 32768}],
                 grid={"context_length": [8192, 32768]})
    c = compare(s, executor="sequential")
    md = markdown(c)
    assert "| 8k |" in md and "| 32k |" in md and "8192" not in md.split("### grid points by cost")[1]


DISAGG = ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200", "--requests-per-second", "5",
          "--ttft-ms", "1500", "--tpot-ms", "30", "--context-length", "8192", "--tp", "1", "--tp", "2"]


def test_brief_names_no_node_map_it_does_not_print(capsys):
    """Item 1: `--brief` prints no node map, so its launch line points at the node each command's
    comment names ('# h200-0: replica 0'), not at 'the node the node map names'."""
    assert main([*BY_RATE, "--brief"]) == 0
    brief = capsys.readouterr().out
    assert "node map" not in brief
    lines = brief.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("start 1 replica of 8 GPUs"))
    assert "on the node named in the comment above it" in lines[start]
    assert lines[start + 1] == "# h200-0: replica 0" and lines[start + 2].startswith("CUDA_VISIBLE_DEVICES=0,1,2,")


def test_brief_with_disagg_is_refused_not_ignored(capsys):
    """Item 1: `--brief` with `--serving disagg` is refused (exit 2, one line naming --brief), not
    silently ignored (planner/commands/flags.py NEEDS)."""
    assert main([*DISAGG, "--serving", "disagg", "--brief"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("plan: error: --brief:")


def test_a_pure_disaggregated_plan_says_nothing_of_an_aggregated_pool_or_a_choice(capsys):
    """Item 2: `--serving disagg` plans no aggregated pool, so no note says how one is sized and no
    closing line says 'disaggregated. disaggregated serving was asked for'; `auto` still states
    its choice and the aggregated pool's sizing."""
    assert main([*DISAGG, "--serving", "disagg"]) == 0
    text = capsys.readouterr().out
    assert "aggregated pool is sized" not in text and "serving disagg:" not in text
    assert "was asked for" not in text
    from planner.app import api

    choice = api.plan_serving(model="llama-3.1-8b", chip=["h100"], tp=[1, 2], context_length=8192, ttft_ms=1500,
                              tpot_ms=30, workload={"isl": 2000, "osl": 200, "requests_per_second": 5}).serving
    assert choice.aggregated is None and not any("aggregated pool" in n for n in choice.notes)
    assert main([*DISAGG, "--serving", "auto"]) == 0
    text = capsys.readouterr().out
    assert "note: no --concurrency: the aggregated pool is sized by 5 requests/s" in text
    assert "serving auto: aggregated." in text


def test_binds_says_why_fewer_gpus_do_not_serve_the_target():
    """Item 5: dsv4.1-flash on b200 at 64 requests of 1M tokens is one 4-GPU instance holding 304;
    the KV cache binds not because a rank holds 76 (the pool holds 304) but because 2 GPUs hold
    only 32 (16 per rank, tp 1 × dp 2, the table's 2 × (1,1,2) row holding 64 at 4 GPUs)."""
    from planner.app.api import plan

    p = plan(model="dsv4.1-flash", chip="b200", concurrency=64)
    assert (p.best.gpus, p.best.replicas, p.best.held) == (4, 1, 304)
    pair = next(a for a in p.alternatives if a.gpus_per_replica == 2)
    assert (pair.replicas, pair.held) == (2, 64)
    assert p.best.binds.startswith("KV cache: fewer than 4 b200 GPUs hold at most 32 of the 64 asked "
                                   "(1 × (tp 1 × dp 2 with expert parallel), 16 requests of 1,048,576 tokens per rank)")
    assert "its 4 ranks hold 76 each, 304 in all" in p.best.binds


def test_binds_says_the_tpot_target_forced_the_split():
    """Item 5: llama-3.1-70b at 64 requests of 8k with TPOT ≤ 30 ms is 1 × tp 4 on h200; without the
    target 2 × tp 2 (the same 4 GPUs) would serve too; within 30 ms a tp-2 rank serves 28, 56 in all."""
    from planner.app.api import plan

    ask = dict(model="llama-3.1-70b", chip="h200", concurrency=64, context_length=8192)
    free = plan(**ask)
    assert any(a.gpus == 4 and a.tensor_parallel_size == 2 for a in [free.best, *free.alternatives])
    p = plan(**ask, tpot_ms=30)
    assert (p.best.gpus, p.best.tensor_parallel_size) == (4, 4)
    three = next(a for a in p.alternatives if a.tensor_parallel_size == 2)
    assert three.gpus == 6 and three.max_num_seqs == 28  # tp 2 at the target: 28 per rank, 3 replicas
    assert p.best.binds.startswith("tpot 30.0 ms forced (tp 4): 2 × (tp 2) on 4 GPUs serve 56 of the 64 asked")
    assert "KV cache: fewer than 4 h200 GPUs hold at most" in p.best.binds


def test_the_documented_completion_commands_print_completion_scripts():
    """Shell completion (issue 42): each command docs/command-line.md gives prints the shell's
    script (click's), and the script's words complete: `plan sce` offers `scenario`."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    doc = (Path(__file__).parents[1] / "docs" / "command-line.md").read_text()
    found = {shell: source for source, shell in re.findall(r"_PLAN_COMPLETE=((bash|zsh|fish)_source) plan", doc)}
    assert set(found) == {"bash", "zsh", "fish"}
    run = [sys.executable, "-c", "from planner.cli import main; main()"]
    mark = {"bash": "complete -o nosort -F _plan_completion plan", "zsh": "#compdef plan",
            "fish": "complete --no-files --command plan"}
    for shell, source in found.items():
        out = subprocess.run(run, env={**os.environ, "_PLAN_COMPLETE": source}, capture_output=True, text=True)
        assert out.returncode == 0 and mark[shell] in out.stdout, (shell, out.stdout[:200], out.stderr[-300:])
    words = subprocess.run(run, env={**os.environ, "_PLAN_COMPLETE": "bash_complete", "COMP_WORDS": "plan sce",
                                     "COMP_CWORD": "1"}, capture_output=True, text=True)
    assert words.stdout.split() == ["plain,scenario"]


def test_a_rate_sized_plan_under_serving_auto_claims_no_concurrency(capsys):
    """Item 3 under `--serving auto` (issue 42): the aggregated plan sized by the rate names the rate,
    not '1 concurrent request', quotes no '… of the 1 asked', and counts one GPU as one GPU."""
    args = ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200", "--requests-per-second",
            "5", "--ttft-ms", "1500", "--tpot-ms", "30"]
    assert main([*args, "--serving", "auto"]) == 0
    text = capsys.readouterr().out
    assert "concurrent request" not in text and "of the 1 asked" not in text
    assert "llama-3.1-8b: 5 requests/s at 2,200 tokens" in text
    assert "best: 1 × h100 GPU as" in text and "aggregated: 1 h100 GPU at" in text and "1 h100 GPUs" not in text
    assert "binds: one GPU is the smallest pool: it holds 216;" in text
    assert main([*args, "--serving", "auto", "--json"]) == 0
    agg = json.loads(capsys.readouterr().out)["serving"]["aggregated"]
    assert agg["target"]["asked"] is None and agg["best"]["headroom_percent"] is None
    assert main([*args, "--concurrency", "8", "--serving", "auto"]) == 0  # asked: quoted
    assert "of the 8 asked" in capsys.readouterr().out


CHECKED_LOG = "tests/fixtures/startup_logs/v0.10-issue25350-fp8-kv-100k.log"  # states no model, release nor GPU


def test_check_log_fits_80_columns(capsys, monkeypatch):
    """Item 7: at COLUMNS=80 every line of `plan check-log` fits 80 cells (the table's lines were
    up to 280), each figure whole and every explanation printed (after the table, wrapped)."""
    from pathlib import Path

    from rich.cells import cell_len

    monkeypatch.setenv("COLUMNS", "80")
    log = str(Path(__file__).parents[1] / CHECKED_LOG)
    assert main(["check-log", log, "--chip", "h100", "--model", "llama-3.1-8b", "--vllm-version", "0.10.2"]) == 0
    text = capsys.readouterr().out
    assert max(cell_len(line.rstrip()) for line in text.splitlines()) <= 80
    row = next(line.split() for line in text.splitlines() if line.strip().startswith("available KV cache memory"))
    assert row[-5:] == ["51.37", "GiB", "10.55", "GiB", "+387.0%"]
    flat = " ".join(text.split())
    assert "(sampler warm-up: 1,024 rows × 128,256 logits" in flat  # an explanation, whole
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["check-log", log, "--chip", "h100", "--model", "llama-3.1-8b", "--vllm-version", "0.10.2"]) == 0
    wide = capsys.readouterr().out  # wide enough: the explanation beside its figures
    assert any("51.37 GiB" in line and "ceil(total × 0.9)" in line for line in wide.splitlines())


def test_check_log_names_every_missing_option_in_one_run(capsys):
    """Item 7: a log that states neither its GPU, its model nor its release names all three at once."""
    from pathlib import Path

    assert main(["check-log", str(Path(__file__).parents[1] / CHECKED_LOG)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3
    assert lines[0] == "plan: error: --chip: the log does not name the GPU (give --chip (see `plan chips`))"
    assert "the log names no model" in lines[1] and lines[1].endswith("(give --model)")
    assert "the log states no release" in lines[2] and "(give --vllm-version, e.g. 0.19.0)" in lines[2]


def _scenario(tmp_path, grid: str, concurrency: int = 16):
    path = tmp_path / "review.yaml"
    path.write_text("review: item 8\ndefaults:\n  chips: [h200]\nservices:\n  - name: chat\n    model: llama-3.1-8b\n"
                    f"    concurrency: {concurrency}\ngrid:\n{grid}")
    return path


def test_scenario_errors_come_at_once_and_a_grid_axis_at_its_line(tmp_path, capsys):
    """Item 8: a negative concurrency and a bad grid axis in one run, the axis at `grid.bogus` with its
    line (line 10), once, not once per generated variant ('variants.growth 1, bogus 1.bogus')."""
    path = _scenario(tmp_path, "  growth: [1, 2]\n  bogus: [1]\n", concurrency=-4)
    assert main(["scenario", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == f"plan: error: {path}:7: services.chat.concurrency: Input should be greater than or equal to 1"
    assert len(lines) == 2 and lines[1].startswith(f"{path}:10: grid.bogus: 'bogus' is not a field a variant can set")
    path = _scenario(tmp_path, "  growth: [1, 2]\n  bogus: [1]\n")  # the services valid: the same line, once
    assert main(["scenario", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"plan: error: {path}:10: grid.bogus: 'bogus' is not a field a variant can set (use chip, "
                     "growth, price.<chip>, gpus.<chip>, services.<name>.<field>, or a service field (model, "
                     "quantization, concurrency, context_length, headroom, chips, kv_cache_dtype, "
                     "num_speculative_tokens, speculative_method, speculative_acceptance, tp, pp, dp, dcp, "
                     "gpu_memory_utilization, max_num_batched_tokens, max_gpus, tpot_ms, ttft_ms, workload, serving, "
                     "slo, traffic))"]
    path = _scenario(tmp_path, "  growth: [1, -1]\n")  # a value no variant can take: at its axis too
    assert main(["scenario", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (f"plan: error: {path}:9: grid.growth: growth -1 is not a positive "
                                               "factor (give e.g. 1.5 for 50 % more)")


def test_a_grid_without_variants_is_said_in_one_line(tmp_path, capsys):
    """Item 8: without --variants the grid is not planned, and stderr says so in one line."""
    path = _scenario(tmp_path, "  growth: [1, 2]\n")
    assert main(["scenario", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["plan: note: only the base is planned: the file's 2 grid points (growth) are "
                                        "planned with --variants (or --variant NAME)"]
    assert main(["scenario", str(path), "--variants"]) == 0
    assert "only the base" not in capsys.readouterr().err


ROOT = __import__("pathlib").Path(__file__).parents[1]
PLAN = "import sys; from planner.cli import main; sys.exit(main())"


def _last_screen(args: list[str], tmp_path) -> str:
    """What an 80 × 24 terminal (tmux, its own server) shows once `plan ARGS` has ended and the shell
    prints its prompt ('$ ', the last line, as a user's shell would)."""
    import shlex
    import subprocess
    import sys
    import time

    sock = str(tmp_path / "tmux.sock")  # its own server, its socket removed with the test's folder
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/bash\ncd {shlex.quote(str(ROOT))}\nunset COLUMNS LINES\n"
                      f"export PYTHONPATH={shlex.quote(str(ROOT))}\n"
                      f"{shlex.quote(sys.executable)} -c {shlex.quote(PLAN)} "
                      + " ".join(map(shlex.quote, args)) + "\necho '$ '\nsleep 600\n")
    script.chmod(0o755)
    subprocess.run(["tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "24", str(script)],
                   check=True)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            time.sleep(0.5)
            shot = subprocess.run(["tmux", "-S", sock, "capture-pane", "-p"], capture_output=True, text=True).stdout
            if shot.rstrip().endswith("$"):
                return shot
        raise AssertionError(f"plan {' '.join(args)} did not end: {shot}")
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)


@__import__("pytest").mark.skipif(__import__("shutil").which("tmux") is None, reason="tmux is not installed")
@__import__("pytest").mark.parametrize("args, answer", [
    (["--model", "dsv4.1-flash", "--chip", "b200", "--concurrency", "64"],
     ["best: 4 × b200 GPUs as 1 × (tp 1, pp 1, dp 4, ep on, dcp 1), 304 requests held, $24.12/hour",
      "search: 127 kernel evaluations, solver OPTIMAL (optimum proven)"]),
    (["scenario", "scenarios/chat-dsv4.1-flash-h200-vs-b200.yaml"],
     ["chat: 4 × h200 GPUs as 1 × (tp 1, pp 1, dp 4, ep on, dcp 1), 100 requests held, $18.16/hour",
      "total: 4 GPUs (h200 4), $18.16/hour, $13,257/month; solver OPTIMAL (optimum proven)"]),
    (["compare", "--model", "llama-3.1-8b", "--chip", "h100", "--chip", "h200", "--concurrency", "16"],
     ["cheapest: on h100", "4 × h100 GPUs as 1 × (tp 4, pp 1, dp 1, ep off, dcp 1), 16 requests held, $11.96/hour",
      "total: 4 GPUs (h100 4), $11.96/hour, $8,731/month; solver OPTIMAL (optimum proven)"]),
])
def test_the_answer_is_on_the_last_screen_of_an_80_by_24_terminal(args, answer, tmp_path):
    """Item 12: `plan`, `plan scenario` and `plan compare` end with the answer (the best pool, its
    cost, the solver status), so a 24-line terminal shows it when the command ends; its prose is
    wrapped at spaces to the 80 columns (no line of the answer broken inside a word)."""
    from rich.cells import cell_len

    screen = _last_screen(args, tmp_path)
    lines = screen.rstrip().splitlines()
    assert len(lines) <= 24 and all(cell_len(line) <= 80 for line in lines)
    tail = lines[lines.index(next(line for line in lines if line.startswith(answer[0].split(" ")[0]))):]
    flat = " ".join(" ".join(tail).split())
    for part in answer:  # lines joined at a space: a word the terminal broke would not match
        assert part in flat, (part, screen)


# report.progress_after at 0 s in the one table every command's view reads (planner/defaults.py load)
LOWERED = ("import dataclasses; import planner.defaults as d; t = d.load().table; "
           "t['report.progress_after'] = dataclasses.replace(t['report.progress_after'], value=0.0); ")


def test_progress_shows_on_a_terminal_and_is_cleared(tmp_path):
    """Progress (issue 42): on a terminal's stderr a plan that works past the delay shows its stages
    and candidate counts, and clears the line when done (the delay lowered to 0 s for the test)."""
    import os
    import sys

    import pexpect

    lowered = LOWERED + PLAN
    child = pexpect.spawn(sys.executable, ["-c", lowered, "--model", "llama-3.1-8b", "--chip", "h100",
                                           "--concurrency", "8"], cwd=str(ROOT), dimensions=(24, 80),
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, encoding="utf-8", timeout=300)
    child.expect(pexpect.EOF)
    shown = child.before
    child.close()
    assert child.exitstatus == 0
    assert "candidates evaluated; CP-SAT: pool" in shown  # a stage, with its count
    assert "\x1b[2K" in shown  # the progress line erased once the work ended
    assert shown.rstrip().endswith("solver OPTIMAL (optimum proven)")


def test_a_review_without_variants_shows_its_stages_on_a_terminal():
    """Progress (issue 42): `plan scenario FILE` alone (no variants bar) shows the fleet search's
    stages on a terminal (the delay lowered to 0 s), and its answer still ends the screen."""
    import os
    import sys

    import pexpect

    lowered = LOWERED + PLAN
    child = pexpect.spawn(sys.executable, ["-c", lowered, "scenario", "scenarios/mixed-fleet-shared-inventory.yaml"],
                          cwd=str(ROOT), dimensions=(24, 80), env={**os.environ, "PYTHONPATH": str(ROOT)},
                          encoding="utf-8", timeout=300)
    child.expect(pexpect.EOF)
    shown = child.before
    child.close()
    assert child.exitstatus == 0
    assert "sweeping the instance shapes of 3 services" in shown
    assert "\x1b[2K" in shown
    assert "solver OPTIMAL" in " ".join(" ".join(shown.rstrip().splitlines()[-3:]).split())  # wrapped at 80


def test_progress_is_silent_on_a_pipe_and_with_json(tmp_path):
    """Progress (issue 42): piped, stderr holds nothing (the delay lowered to 0 s); on a terminal
    with --json neither (a program reads the output)."""
    import os
    import subprocess
    import sys

    import pexpect

    lowered = LOWERED + PLAN
    args = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    piped = subprocess.run([sys.executable, "-c", lowered, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stderr == "" and "solver OPTIMAL" in piped.stdout
    child = pexpect.spawn(sys.executable, ["-c", lowered, *args, "--json"], cwd=str(ROOT), dimensions=(24, 80),
                          env=env, encoding="utf-8", timeout=300)
    child.expect(pexpect.EOF)
    shown = child.before
    child.close()
    assert child.exitstatus == 0 and "CP-SAT: pool" not in shown and shown.lstrip().startswith("{")
    json.loads(shown.replace("\r\n", "\n"))


# -- item 13: charts ---------------------------------------------------------------------------------
def _figures(monkeypatch, argv: list[str]) -> dict:
    """The figures a command writes, by path, read before they are written and closed, with the
    facts the tests below check: every text's box, each visible leader line's box, and each label's
    framed box beside its axes' top."""
    from matplotlib.text import Annotation

    from planner.report import charts
    from tests.test_charts import overlaps, text_boxes

    found = {}
    real = charts.Batch.save

    def keep(self, fig, path):
        boxes = text_boxes(fig)
        renderer = fig.canvas.get_renderer()
        leaders, frames = [], []
        for ax in fig.axes:
            for t in ax.texts:
                if isinstance(t, Annotation) and t.get_visible():
                    t.update_bbox_position_size(renderer)  # the label's white frame, around its words
                    frame = t.get_bbox_patch().get_window_extent(renderer) if t.get_bbox_patch() else None
                    frames.append((t.get_text(), max(charts.extent(t, renderer).y1, frame.y1 if frame else 0),
                                   ax.bbox.y1))
                    if t.arrow_patch is not None and t.arrow_patch.get_visible():
                        leaders.append((t.get_text(), t.arrow_patch.get_window_extent(renderer)))
        found[path] = dict(fig=fig, overlaps=overlaps(fig), boxes=boxes, leaders=leaders, frames=frames,
                           inches=tuple(fig.get_size_inches()))
        real(self, fig, path)

    monkeypatch.setattr(charts.Batch, "save", keep)
    assert main(argv) in (0, 1)
    return found


def test_the_plan_chart_draws_the_percentile_the_target_names(monkeypatch, tmp_path, capsys):
    """Item 13: a p90 TPOT target is drawn against p90 TPOT (not p99), as a dotted line; the pools
    that miss it are hollow (`missing-…`), and the 'cheapest pool' line stops within it."""
    out = str(tmp_path / "front.png")
    figs = _figures(monkeypatch, ["--model", "llama-3.1-70b", "--chip", "h100", "--chip", "h200", "--isl", "2000",
                                  "--osl", "500", "--requests-per-second", "20", "--p99-ttft-ms", "2000",
                                  "--p90-tpot-ms", "40", "--json", "--chart", out])
    pareto = json.loads(capsys.readouterr().out)["best"]["serving"]["pareto"]
    fig = figs[out]["fig"]
    ax = fig.axes[0]
    assert ax.get_xlabel() == "p90 TPOT, simulated (ms)"
    assert [line.get_xdata()[0] for line in ax.get_lines() if line.get_label() == "target: p90 TPOT ≤ 40.0 ms"] \
        == [40]
    (front,) = [line for line in ax.get_lines() if line.get_gid() == "front-pareto"]
    assert max(front.get_xdata()) <= 40
    missed = [p for p in pareto if not p["meets_tpot"]]
    assert missed and all(p["tpot_percentile"] == 90 and p["tpot_ms"] > 40 for p in missed)
    assert any(p["front"] for p in missed)  # cheaper pools that miss: drawn as missing, not on the line
    assert all(p["tpot_ms"] <= 40 for p in pareto if p["chosen"])
    hollow = [c for c in fig.findobj(lambda a: (a.get_gid() or "").startswith("missing-"))]
    assert sum(len(c.get_offsets()) for c in hollow) == len(missed)
    assert any(t.startswith("chosen: ") and "p90 TPOT" in t for t, _ in figs[out]["boxes"])


def test_the_infeasible_review_chart_has_no_label_over_another(monkeypatch, tmp_path):
    """Item 13: scenarios/infeasible-review.yaml's chart: no two texts overlap, and no leader line
    runs through another label (the bar's '16 h200' crossed '16 h200 in stock')."""
    out = str(tmp_path / "review.png")
    figs = _figures(monkeypatch, ["scenario", str(ROOT / "scenarios" / "infeasible-review.yaml"), "--variants",
                                  "--chart", out])
    drawn = figs[out]
    assert drawn["overlaps"] == []
    for label, line in drawn["leaders"]:
        for text, box in drawn["boxes"]:
            if text != label:
                wide = min(line.x1, box.x1) - max(line.x0, box.x0)
                high = min(line.y1, box.y1) - max(line.y0, box.y0)
                assert wide <= 0.5 or high <= 0.5, (label, text)
    assert "16 h200, all in stock" in [t for t, _ in drawn["boxes"]]


def test_the_grid_chart_is_landscape(monkeypatch, tmp_path):
    """Item 13: a grid of three axes is three panels side by side (it was 832 × 1898, three strips
    one above the other)."""
    path = tmp_path / "grid.yaml"
    path.write_text("review: grid\ndefaults:\n  chips: [h200]\nservices:\n  - name: chat\n    model: llama-3.1-8b\n"
                    "    concurrency: 64\n    context_length: 8192\ngrid:\n  growth: [1, 2]\n  price.h200: [3, 5]\n"
                    "  context_length: [8192, 16384]\n")
    out = str(tmp_path / "grid.png")
    figs = _figures(monkeypatch, ["scenario", str(path), "--variants", "--chart", out])
    width, height = figs[out]["inches"]
    assert width > 2 * height
    panels = [ax for ax in figs[out]["fig"].axes if ax.get_xlabel()]
    assert len(panels) == 3 and len({round(ax.get_position().y0, 3) for ax in panels}) == 1  # one row


def test_the_rate_charts_top_label_stays_inside_its_axes(monkeypatch, tmp_path):
    """Item 13: a label's white frame stays below its axes' top line, 2 pixels clear (charts.py
    LABEL_GAP_PX; the rate chart's top label's frame reached 627.3 px against a top at 627 and hid it)."""
    out = str(tmp_path / "rate.png")
    figs = _figures(monkeypatch, ["compare", "--model", "llama-3.1-70b", "--chip", "h100", "--isl", "2000", "--osl",
                                  "500", "--requests-per-second", "5", "--requests-per-second", "10",
                                  "--requests-per-second", "20", "--p99-ttft-ms", "2000", "--p90-tpot-ms", "40",
                                  "--chart", out])
    frames = figs[out]["frames"]
    assert frames and all(top <= axes_top - 2 for _, top, axes_top in frames), frames  # clear of the top line
