"""Tables fit the console they are printed to (the terminal, COLUMNS, or the pipe width) and never
cut a number or a name: a column that does not fit is left out whole, and named under the table."""

from __future__ import annotations

import itertools
import json
import re

import pytest

from planner import defaults
from planner.numbers import duration, percent, size, tokens, with_article
from planner.report.tables import Col, csv_text, fit, width_needed
from tests.helpers import cli_stdout as run

# wide figures (GPUs and $/month in the thousands and millions) at a size the per-node launch listing prints fast;
# the issue's 1,000,000-request case (14,344 GPUs) reads the same, checked by hand at 80, 120 and piped
MILLION = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "100000", "--context-length", "8192"]


@pytest.fixture(scope="module")
def million() -> dict:
    code, out = run([*MILLION, "--json"])
    assert code == 0
    return json.loads(out)


@pytest.mark.parametrize("columns", ["40", "50", "80", "120", None])
def test_the_plan_table_never_cuts_a_number(monkeypatch, million, columns):
    """At 80 and 120 columns the least important columns go (named under the table); at 40 and 50
    even the kept ones do not fit, and every pool is a block of its own, every column in it."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)  # piped, no COLUMNS: the pipe width
    else:
        monkeypatch.setenv("COLUMNS", columns)
    width = int(columns or defaults.value("report.pipe_width"))
    code, text = run(MILLION)
    assert code == 0
    table = text[:text.index("\nspeed (step model): ")]  # the table, its notes and footnotes: fitted to the width
    assert all(len(line) <= width for line in table.splitlines()), table
    dropped = re.search(r"\(not shown at (\d+) columns: (.*?); widen", " ".join(table.split()))
    hidden = dropped.group(2).split(", ") if dropped else []
    blocks = "(one row a block: the table takes" in " ".join(table.split())
    assert blocks == (columns in ("40", "50"))
    assert (dropped is None) == (columns is None or blocks)  # the pipe width and the blocks show every column
    if dropped:
        assert dropped.group(1) == columns
    hours = defaults.value("report.hours_per_month")
    for pool in [million["best"], *million["alternatives"]]:
        cells = {"GPUs": f"{pool['gpus']:,}", "held": f"{pool['held']:,}",
                 "$/hour": f"{pool['cost_per_hour']:,.2f}", "$/month": f"{pool['cost_per_hour'] * hours:,.0f}",
                 "token budget": f"{pool['max_num_batched_tokens']:,}", "max_num_seqs": f"{pool['max_num_seqs']:,}"}
        for header, cell in cells.items():
            if header in hidden:
                continue
            assert re.search(rf"(?<![\d,.]){re.escape(cell)}(?![\d,])", table), (header, cell, table)
    assert f"{million['best']['gpus']:,}" in table and million["best"]["gpus"] >= 1000  # a figure with a separator


# the disaggregated pools table of the issue's follow-up: 8,192-token prompts at 4 requests/s on h200
SERVING = ["--model", "dsv4-flash", "--chip", "h200", "--isl", "8192", "--osl", "1024", "--requests-per-second", "4",
           "--ttft-ms", "3000", "--tpot-ms", "50"]


@pytest.fixture(scope="module")
def serving_json() -> dict:
    plans = {}
    for mode in ("auto", "disagg"):
        code, out = run([*SERVING, "--serving", mode, "--json"])
        assert code == 0
        plans[mode] = json.loads(out)["serving"]
    return plans


def _hidden(section: str) -> list[str]:
    """The headers a fitted table names as not shown under it (none when every column is shown)."""
    dropped = re.search(r"\(not shown at \d+ columns: (.*?); widen", " ".join(section.split()))
    return dropped.group(1).split(", ") if dropped else []


def _present(section: str, cells: dict[str, str]) -> None:
    """Every cell whose column is shown is in the section whole: no digit or separator either side."""
    hidden = _hidden(section)
    for header, cell in cells.items():
        if header not in hidden:
            assert re.search(rf"(?<![\d,.]){re.escape(cell)}(?![\d,])", section), (header, cell, section)


@pytest.mark.parametrize("mode", ["auto", "disagg"])
@pytest.mark.parametrize("columns", ["80", "120", None])
def test_the_serving_tables_never_cut_a_number(monkeypatch, serving_json, mode, columns):
    """`plan --serving auto|disagg`: the aggregated plan table, the disaggregated pools table and its
    alternatives fit the width, and every figure of the JSON a shown column carries is printed whole;
    a table printed one row a block says so under its title, before its first block."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    width = int(columns or defaults.value("report.pipe_width"))
    code, text = run([*SERVING, "--serving", mode])
    assert code == 0
    assert "…" not in text
    hours = defaults.value("report.hours_per_month")
    plan = serving_json[mode]
    if mode == "auto":
        agg = plan["aggregated"]
        table = text[:text.index("\nspeed (step model): ")]
        assert all(len(line) <= width for line in table.splitlines()), table
        for pool in [agg["best"], *agg["alternatives"]]:
            _present(table, {"GPUs": f"{pool['gpus']:,}", "held": f"{pool['held']:,}",
                             "util.": f"{pool['gpu_memory_utilization']:.2f}",
                             "token budget": f"{pool['max_num_batched_tokens']:,}",
                             "max_num_seqs": f"{pool['max_num_seqs']:,}", "$/hour": f"{pool['cost_per_hour']:,.2f}",
                             "$/month": f"{pool['cost_per_hour'] * hours:,.0f}"})
    dis = plan["disaggregated"]
    start = text.index("disaggregated: dsv4-flash at 4 requests/s")
    pools = text[start:text.index("the chosen fleet and the best fleets", start)]
    alternatives = text[text.index("the chosen fleet and the best fleets", start):text.index("\nhand-over: ", start)]
    for section in (pools, alternatives):
        assert all(len(line) <= width for line in section.splitlines()), section
    for role in ("prefill", "decode"):
        p = dis[role]
        assert re.search(rf"\n\s+{role}\s", pools), pools  # the role's row, named in full
        _present(pools, {"GPUs": f"{p['gpus']:,}", "util.": f"{p['gpu_memory_utilization']:.2f}",
                         "token budget": f"{p['max_num_batched_tokens']:,}",
                         "max_num_seqs": f"{p['max_num_seqs']:,}", "kv_role": p["kv_role"],
                         "$/hour": f"{p['cost_per_hour']:,.2f}", "$/month": f"{p['cost_per_hour'] * hours:,.0f}"})
    _present(pools, {"GPUs": f"{dis['gpus']:,}", "$/hour": f"{dis['cost_per_hour']:,.2f}",
                     "$/month": f"{dis['cost_per_hour'] * hours:,.0f}"})
    assert dis["prefill"]["gpus"] + dis["decode"]["gpus"] == dis["gpus"]
    for fleet in [dis, *dis["alternatives"]]:
        _present(alternatives, {"GPUs": f"{fleet['gpus']:,}", "$/hour": f"{fleet['cost_per_hour']:,.2f}",
                                "$/month": f"{fleet['cost_per_hour'] * hours:,.0f}"})
    assert (_hidden(pools) == []) == (width >= 110)  # role 7, chip 4, GPUs 4, shape 17, util. 5, budget 6, ...
    flat = " ".join(text.split())
    notes = re.findall(r"\(one (\w+) a block: the table takes \d+ columns, not \d+; widen the terminal or set "
                       r"COLUMNS to see it as a table\) (\S+)", flat)
    assert notes and all(first == kind for kind, first in notes), notes  # the note opens the blocks it describes
    assert flat.count("(one group a block") == flat.count("of the group) (one group a block")  # under its title


HEADLINE_RANK = ["memory", "--model", "dsv4.1-flash", "--chip", "h200", "-dp", "4", "--enable-expert-parallel"]


@pytest.mark.parametrize("columns", ["80", "120", None])
def test_the_kv_cache_group_table_never_cuts_a_cell(monkeypatch, columns):
    """The headline's rank: nine groups whose spec cells ('SlidingWindowMLASpec
    (UniformTypeKVCacheSpecs)') and layer cells are read from the JSON and found whole, in their
    row (a table) or their block (one group a block, where the table is wider than the terminal)."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out = run([*HEADLINE_RANK, "--json"])
    groups = json.loads(out)["kv_groups"]
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    width = int(columns or defaults.value("report.pipe_width"))
    code, text = run(HEADLINE_RANK)
    assert code == 0
    table = text[text.index("KV cache groups in vLLM's order"):text.index("\nspeed (step model)")]
    assert all(len(line) <= width for line in table.splitlines()) and "…" not in table, table
    flat = " ".join(table.split())
    as_table = not re.search(r"\(one group a block: the table takes (\d+) columns, not " + str(width), flat)
    assert as_table == (width >= 163)  # the widest spec cell, 46 characters, and a 39-character layer cell
    assert len(groups) == 9
    for i, g in enumerate(groups):
        numbers = sorted({int(name.split(".")[1]) for name in g["layers"]})
        assert all(b - a > 1 for a, b in itertools.pairwise(numbers))  # no run of layers to write as 'a-b'
        cells = [str(i), f"{g['spec']} ({g['kind']})", f"layers {', '.join(map(str, numbers))} ({len(g['layers'])} "
                 "caches)", str(g["block_tokens"]), f"{g['page_bytes']:,}", f"{g['blocks_steady']:,}",
                 f"{g['blocks_admission']:,}"]
        if as_table:
            assert "│ " + " │ ".join(cells) + " │" in flat, (i, cells)
        else:
            headers = ["group", "spec", "layers", "block tokens", "page bytes", "blocks steady", "blocks admission"]
            assert " ".join(f"{h} {c}" for h, c in zip(headers, cells, strict=True)) in flat, (i, cells)
    assert "SlidingWindowMLASpec (UniformTypeKVCacheSpecs)" in flat and "CircularBufferSpec" in flat


@pytest.mark.parametrize("columns", ["80", None])
def test_model_cards_are_never_cut(monkeypatch, columns):
    from pricing.config import list_cards

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    code, text = run(["models"])
    assert code == 0
    words = set(text.split())
    assert all(card["name"] in words for card in list_cards())
    assert "…" not in text


def test_fit_drops_the_least_important_column_first_and_never_a_kept_one():
    cols = [Col("name", "name"), Col("big", drop=2), Col("less", drop=1), Col("text", "text")]
    rows = [["a-very-long-model-name", "1,234,567,890", "9,876,543", "some words that wrap"]]
    # name 22 + less 9 + text 5 ("words"), 2 of padding each, 4 of edges and separators: 46
    table, dropped = fit(None, cols, rows, 50)
    assert dropped == ["big"] and width_needed(table) == 46
    table, dropped = fit(None, cols, rows, 40)
    assert dropped == ["big", "less"] and width_needed(table) <= 40
    table, dropped = fit(None, cols, rows, 200)
    assert dropped == []


def test_csv_carries_every_column_with_plain_numbers():
    cols = [Col("chip", "name"), Col("GPUs"), Col("token\nbudget")]
    assert csv_text(cols, [["h200", "14,344", "2,048"]]) == "chip,GPUs,token budget\nh200,14344,2048\n"


def test_plan_csv_and_brief(million):
    code, text = run([*MILLION, "--format", "csv"])
    assert code == 0
    header, *rows = text.splitlines()
    assert header.startswith(",chip,GPUs,nodes") and len(rows) == 1 + len(million["alternatives"])
    assert rows[0].split(",")[:3] == ["best", "h100", str(million["best"]["gpus"])]
    code, text = run([*MILLION, "--brief"])
    assert code == 0
    lines = text.splitlines()
    assert lines[0] == "llama-3.1-8b: 100,000 concurrent requests at 8,192 tokens"
    assert lines[1].startswith(f"best: {million['best']['gpus']:,} × h100 GPUs") and lines[2].startswith("binds: ")
    assert any("vllm serve " in line for line in lines) and "KV cache groups" not in text


def test_plan_csv_when_nothing_fits_is_still_csv_with_the_reasons_on_stderr():
    """4,000 requests of 8,192 tokens on one H100 (--max-gpus 1) do not fit: stdout is the CSV
    header and no pool row, a spreadsheet still reads it; why is on stderr; the exit status 1."""
    import csv
    import io

    from tests.helpers import cli

    code, out, err = cli(["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "4000",
                          "--context-length", "8192", "--max-gpus", "1", "--format", "csv"])
    assert code == 1
    (header,) = list(csv.reader(io.StringIO(out)))
    assert header[:3] == ["", "chip", "GPUs"]
    assert "no pool fits" in err and "Nearest fit: --max-gpus" in err


# -- one number style ------------------------------------------------------------------------------
def test_the_number_style():
    assert size(82_258_362_368) == "76.61 GiB" and size(671_088_640) == "640.0 MiB"
    assert size(1008 * 2**20) == "1,008.0 MiB" and size(4096) == "4,096 bytes"
    assert percent(0.562) == "56.2%" and percent(2.41, 0) == "241%"
    assert duration(3642.7) == "3,642.7 ms" and duration(17_240) == "17.2 s" and duration(448_000) == "448 s"
    assert with_article(tokens(8192)) == "an 8,192-token" and with_article(tokens(1_048_576)) == "a 1,048,576-token"
    assert with_article(tokens(11)) == "an 11-token" and with_article(tokens(110)) == "a 110-token"
    assert with_article(tokens(18_000)) == "an 18,000-token"


def test_headroom_title_says_required_not_held():
    code, text = run(["--model", "llama-3.1-70b", "--chip", "h200", "--concurrency", "256", "--context-length",
                      "32768", "--headroom", "20", "--brief"])
    assert code == 0
    assert text.splitlines()[0].endswith("(+20% headroom: 308 required)")  # ceil(256 × 1.2) = 308


def test_targets_are_restated_in_the_title_and_the_json():
    argv = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "16", "--context-length", "8192",
            "--tpot-ms", "50", "--isl", "1024", "--osl", "256", "--requests-per-second", "2"]
    code, text = run([*argv, "--brief"])
    assert code == 0
    assert "TPOT ≤ 50.0 ms" in text.splitlines()[0] and "2 requests/s" in text.splitlines()[0]
    code, out = run([*argv, "--json"])
    target = json.loads(out)["target"]
    assert target["tpot_ms"] == 50 and target["isl"] == 1024 and target["osl"] == 256
    assert target["requests_per_second"] == 2 and target["required"] == 16


def test_binds_and_the_breakdown_read_the_same_request():
    # gpt-oss-120b: binds' bytes per request are the breakdown's KV cache plus its admission reservation
    argv = ["--model", "gpt-oss-120b", "--chip", "h200", "--concurrency", "128", "--context-length", "131072"]
    code, text = run(argv)
    assert code == 0
    binds = next(line for line in text.splitlines() if line.startswith("binds: "))
    each = re.search(r"([\d.,]+) MiB each: ([\d.,]+) MiB of KV cache and ([\d.,]+) MiB reserved at admission", binds)
    request = re.search(r"a 131,072-token request: ([\d.,]+) MiB of KV cache per rank", text)
    assert each and request and each.group(2) == request.group(1), (binds, request)
    assert abs(float(each.group(1)) - float(each.group(2)) - float(each.group(3))) <= 0.1
    vllm = re.search(r"Maximum concurrency for 131,072 tokens per request: ([\d.]+)x", text).group(1)
    assert f"vLLM's maximum concurrency, {vllm}×" in binds  # the breakdown's figure, named as what it is


def test_each_requests_per_rank_figure_is_named_as_what_it_is():
    # 40 requests/s within a 40 ms TPOT: binds counts what a rank holds within the targets, the speed line
    # the load the rate brings per rank; one output must not say "at 58 per rank" and then "at 33" unexplained
    argv = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "16", "--context-length", "8192",
            "--isl", "1024", "--osl", "256", "--requests-per-second", "40", "--tpot-ms", "40"]
    code, text = run(argv)
    assert code == 0
    binds = next(line for line in text.splitlines() if line.startswith("binds: "))
    speed = next(line for line in text.splitlines() if line.startswith("speed (step model): "))
    code, out = run([*argv, "--json"])
    best = json.loads(out)["best"]
    ranks = best["replicas"] * best["data_parallel_size"]
    holds = best["held"] // ranks  # what each rank of the pool holds, by hand from the JSON
    load = best["step"]["batch_per_rank"]
    assert load < holds  # the case the issue found: two figures per rank in one output
    assert f"at the {holds:,} requests per rank it holds" in binds
    assert f"at {load:,} requests per rank (" in speed
    assert f"the load asked over the pool's {ranks:,} ranks, each holding up to {holds:,}" in speed
    per_rank = {int(n.replace(",", "")) for n in re.findall(r"([\d,]+) requests per rank", binds + speed)}
    assert per_rank == {load, holds}


ESTIMATES = """review: estimates
services:
  - {name: small, model: llama-3.1-8b, concurrency: 8, context_length: 8192, chips: [l40s]}
variants:
  quoted: {price.l40s: 1.5}
"""


def test_estimated_prices_are_marked_wherever_a_price_is_shown(tmp_path):
    from pricing.chips import get_chip

    assert get_chip("l40s").price_estimate  # the catalogue's l40s price is an estimate; the variant quotes one
    path = tmp_path / "estimates.yaml"
    path.write_text(ESTIMATES)
    code, md = run(["scenario", str(path), "--variants", "--format", "markdown"])
    assert code == 0
    base, quoted = md.split("\n### base\n")[1].split("\n### quoted\n")
    summary = md.split("\n### base\n")[0]
    row = {line.split(" | ")[0].strip("| "): line for line in summary.splitlines() if line.startswith("| ")}
    money_cells = [cell.strip() for cell in row["base"].split("|")[-5:-3]]  # $/hour, $/month of the estimate
    assert all(cell.endswith("\\*") for cell in money_cells), row["base"]
    assert "\\*" not in row["quoted"]  # a quoted price carries no mark
    assert "\n\\* l40s: $" in summary and "is an estimate" in summary  # the mark explained, never a list item
    total = next(line for line in base.splitlines() if line.startswith("total: "))
    assert total.count("\\*") == 2 and total.startswith("total: 1 GPU, ")
    assert "\\*" not in next(line for line in quoted.splitlines() if line.startswith("total: "))
    code, text = run(["scenario", str(path), "--variants"])
    totals = [line for line in text.splitlines() if line.startswith("total: ")]
    assert len(totals) == 2  # one total per result, not an unmarked copy beside the marked one
    assert totals[0].count("*") == 2 and "*" not in totals[1]
    variants = text[text.index("estimates: variants"):]  # the variant summary, as `plan compare` prints it too
    base_row = next(line for line in variants.splitlines() if line.strip().startswith("base "))
    quoted_row = next(line for line in variants.splitlines() if line.strip().startswith("quoted "))
    assert base_row.count("*") == 2 and "*" not in quoted_row and "\n* l40s: $" in variants
    assert "cost per token: $" in text and re.search(r"cost per token: \$[\d.,]+\* per million", text)


# -- one voice: every figure through planner/numbers.py --------------------------------------
# lines that are not prose: launch commands, their comments, the node map (ports), provenance values
NOT_PROSE = re.compile(r"vllm serve|toy_proxy_server|^\s*#|CUDA_VISIBLE_DEVICES|ray start|^\s*\S+-\d+\s+[\d,-]+\s|"
                       r"--\S+=")
FLAG = re.compile(r"(?<!\w)--?[a-z][\w-]* \d+")
VOICE = {
    "a space before %": re.compile(r"\d %"),
    "GiB not to two decimals": re.compile(r"(?<![\d.,])\d[\d,]*(?:\.\d|\.\d{3,})? GiB\b"),
    "MiB not to one decimal": re.compile(r"(?<![\d.,])\d[\d,]*(?:\.\d{2,})? MiB\b"),
    "'a' before a number spoken with 'an'": re.compile(r"\ba (?:8|11[-,]|18[-,])"),
    "a plural after one": re.compile(r"(?<![\d.,])1 (?:concurrent )?requests\b"),
    "ms at or above 10 s": re.compile(r"(?<![\d.,])\d{2,3},\d{3}(?:\.\d)? ms\b"),
    "s under 10 s": re.compile(r"(?<![\d.,])\d(?:\.\d+)? s\b"),
    "s under 100 s without its decimal": re.compile(r"(?<![\d.,])\d{2} s\b"),
    "a count without separators": re.compile(r"(?<![\w.,/:=$-])\d{4,}(?![\d.,%x×\w-])"),
}
VOICES = [
    ["--model", "gpt-oss-120b", "--chip", "h200", "--concurrency", "128", "--context-length", "131072",
     "--headroom", "20"],
    ["--model", "llama-3.1-8b", "--chip", "h100", "--context-length", "8192", "--isl", "1024", "--osl", "256",
     "--requests-per-second", "10", "--p99-ttft-ms", "2000"],
    ["--model", "dsv3", "--chip", "l40s", "--concurrency", "8", "--max-gpus", "8"],  # why nothing fits: weights
    ["--model", "llama-3.1-70b", "--chip", "h100", "--concurrency", "8", "--context-length", "131072", "--tp", "2",
     "--pp", "1"],  # why nothing fits: one request's KV cache
    ["memory", "--model", "gpt-oss-120b", "--chip", "h200"],
    ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "8192", "--osl", "256", "--requests-per-second", "10",
     "--ttft-ms", "2000", "--serving", "auto"],  # the aggregated plan, the disaggregated one and the choice
    ["scenario", "scenarios/mixed-fleet-shared-inventory.yaml", "--variants"],
    ["scenario", "scenarios/mixed-fleet-shared-inventory.yaml", "--variants", "--format", "markdown"],
]


@pytest.mark.parametrize("argv", VOICES, ids=lambda a: " ".join(a[:4]))
def test_one_voice_for_every_figure(monkeypatch, argv):
    from pathlib import Path

    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    _, text = run(argv)
    prose = [FLAG.sub("", line) for line in text.splitlines() if not NOT_PROSE.search(line)]  # a flag as typed
    found = [(name, m.group(0), line.strip()[:160]) for line in prose for name, rule in VOICE.items()
             for m in rule.finditer(line)]
    assert found == []
    assert all(len(line) <= 120 for line in text.splitlines() if line.startswith("margin: "))


def test_the_voice_rules_catch_what_the_issue_found():
    said = ["76.6 GiB", "1008 MiB", "640 MiB", "241 %", "1000000 concurrent requests", "a 8,192-token prompt",
            "in 17 s", "in 12,345.0 ms", "took 0.35 s"]
    for text in said:
        assert any(rule.search(text) for rule in VOICE.values()), text
    for text in ["76.61 GiB", "1,008.0 MiB", "640.0 MiB", "241%", "1,000,000 concurrent requests",
                 "an 8,192-token prompt", "in 17.2 s", "in 3,642.7 ms", "in 350.0 ms"]:
        assert not any(rule.search(text) for rule in VOICE.values()), text


# -- the refusals candidates and search word: their times in duration's style, their targets as given ----------
TIME = re.compile(r"(?<![\w.,])(\d[\d,]*(?:\.\d+)?) (ms|s)\b")
REFUSALS = [
    # the disaggregated TTFT refusal: a 20,000-token prompt's prefill, hand-over and first step against 100 ms
    (["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "20000", "--osl", "200", "--requests-per-second", "20",
      "--context-length", "32768", "--tp", "2", "--serving", "disagg", "--ttft-ms", "100", "--tpot-ms", "30"],
     "- ttft: the fastest pair", ", against 100 ms"),
    # the latency note of a chip none of whose rows meets --tpot-ms 1
    (["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "10", "--tpot-ms", "1", "--isl", "20000",
      "--osl", "200", "--context-length", "32768", "--tp", "8"],
     "no instance meets the latency targets", " outside the engine: step_model.yaml first_token_seconds)."),
]


def _times_in_style(sentence: str) -> list[str]:
    """The times in a sentence that do not read as `duration` prints them: each figure read back
    and printed again ('728 ms' reads 728.0 ms, which prints '728.0 ms'; '0.33 s' prints '330.0 ms')."""
    wrong = []
    for m in TIME.finditer(sentence):
        value = float(m.group(1).replace(",", "")) * (1000 if m.group(2) == "s" else 1)
        if duration(value) != m.group(0):
            wrong.append(m.group(0))
    return wrong


@pytest.mark.parametrize(("argv", "starts", "ends"), REFUSALS, ids=["disagg ttft", "latency note"])
def test_refusals_print_their_times_as_duration_does(argv, starts, ends):
    code, text = run(argv)
    assert code == 1
    lines = [line for line in text.splitlines() if starts in line]
    assert lines, text
    sentence = lines[0]
    assert sentence.endswith(ends)  # the target as the user gave it ('100 ms', as targets.py words targets)
    assert len(TIME.findall(sentence.removesuffix(ends))) >= 2
    assert _times_in_style(sentence.removesuffix(ends)) == []


def test_the_decode_tpot_refusal_prints_its_figures_in_the_one_style(monkeypatch):
    """A decode row whose one request takes 1,234.56 ms per output token against a 1,000 ms target:
    the time as `duration` prints it, the target with its thousands separator as given."""
    from types import SimpleNamespace

    from planner.candidates import roles
    from planner.request import ServiceSpec, WorkloadSpec

    monkeypatch.setattr(roles, "largest_batch", lambda *a, **k: 0)  # no batch meets the target
    monkeypatch.setattr(roles, "step_seconds_per_token", lambda *a: 1.23456)
    service = ServiceSpec(model="llama-3.1-8b", concurrency=1, context_length=8192, ttft_ms=1500.0, tpot_ms=1000.0,
                          workload=WorkloadSpec(isl=2000, osl=200, requests_per_second=1.0), serving="disagg")
    refused = roles.DECODE.figures(None, service, SimpleNamespace(held_per_rank=4), 0.0, 1.0)
    assert refused == roles.Refused("latency", "one request takes 1,234.6 ms per output token, above the "
                                               "1,000 ms target")


def test_only_a_command_that_takes_format_csv_says_so(monkeypatch):
    """The note under a narrowed table names `--format csv` only where the command takes it (`plan`,
    `plan models`, `plan chips`); `plan scenario` has no csv format and says to widen the terminal."""
    monkeypatch.setenv("COLUMNS", "70")
    from pathlib import Path

    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "mixed-fleet-shared-inventory.yaml"
    code, review = run(["scenario", str(scenario)])
    assert code == 0 and "(not shown at 70 columns" in review
    assert "--format csv" not in " ".join(review.split())
    code, chips = run(["chips"])
    assert code == 0 and "`--format csv`" in " ".join(chips.split())
