"""issue 42: `--format html -o FILE` — one self-contained page (nothing it could request, one inline
script, ids unique), every user value escaped, under 3 MB for every scenario (with --variants too),
its headline figures those of the JSON of the same command; bad use is one line, exit 2.
(tests/test_html_browser.py opens the pages in Chromium.)"""

from __future__ import annotations

import json
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from planner import defaults
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
MAX_BYTES = 3 * 1024 * 1024
HOURS = defaults.value("report.hours_per_month")


class Page(HTMLParser):
    """A page read as a browser's parser reads it: every element's tag and attributes, the figures
    marked with data-field (their shown text), the tables' cells by row, the text outside scripts."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.figures: dict[str, tuple[str, str]] = {}  # data-field -> (data-value, shown text)
        self.tables: dict[str, list[list[str]]] = {}  # table id -> rows (the header row first)
        self.texts: dict[str, str] = {}  # element id -> its text
        self._open: list[tuple[str, dict, list[str]]] = []
        self._table: str | None = None
        self._row: list[str] | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.elements.append((tag, a))
        if tag in ("meta", "br", "img", "input", "link", "hr", "path", "use", "rect", "stop"):
            return  # void elements, and SVG's self-closed ones: no end tag follows
        self._open.append((tag, a, []))
        if tag == "table":
            self._table = a.get("id") or f"table{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr":
            self._row = []

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        while self._open:
            name, a, words = self._open.pop()
            text = " ".join("".join(words).split())
            for _, _, outer in self._open:
                outer.append("".join(words))
            if "data-field" in a and "data-value" in a:
                self.figures[a["data-field"]] = (a["data-value"], text)
            if "id" in a:
                self.texts[a["id"]] = text
            if name in ("td", "th") and self._row is not None:
                self._row.append(text)
            if name == "tr" and self._table is not None:
                self.tables[self._table].append(self._row)
                self._row = None
            if name == tag:
                break

    def handle_data(self, data):
        if self._open:
            self._open[-1][2].append(data)

    def shown(self, field: str) -> str:
        return self.figures[field][1]

    def value(self, field: str):
        return json.loads(self.figures[field][0])


def dollars(text: str) -> float:
    """'$18.16/hour', '$13,257*' -> the figure."""
    return float(re.sub(r"[^0-9.]", "", text.split("/")[0]))


def run(argv: list[str]) -> tuple[int, str, str]:
    """`plan ...` as typed (the words after `plan`), in this process."""
    assert argv[0] == "plan"
    return cli(argv[1:])


def page_of(tmp_path: Path, argv: list[str], name: str = "r.html") -> tuple[int, str, str]:
    """`plan argv --format html -o FILE`: its exit status, the page, stderr."""
    target = tmp_path / name
    code, out, err = run([*argv, "--format", "html", "-o", str(target)])
    assert out == "", out  # the page goes to its file, nothing to stdout
    return code, target.read_text(encoding="utf-8"), err


def self_contained(html: str) -> None:
    """Nothing the page could fetch: no external reference in any attribute or style, no <link>,
    no <img>, no @import or url() but a fragment's, one <script> (the template's), ids unique."""
    page = Page(html)
    tags = [t for t, _ in page.elements]
    assert "link" not in tags and "img" not in tags and "iframe" not in tags and "object" not in tags
    assert tags.count("script") == 1 and "<script>addEventListener(\"beforeprint\"" in html
    for tag, attrs in page.elements:
        for key, value in attrs.items():
            if key in ("src", "href", "xlink:href", "action", "poster", "srcset", "data"):
                assert (value or "").startswith("#"), (tag, key, value)
    assert "@import" not in html and "@font-face" not in html
    assert not re.search(r"url\((?!#)", html), re.search(r"url\((?!#).{0,60}", html).group(0)
    ids = [a["id"] for _, a in page.elements if "id" in a]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})[:5]


def test_a_plan_page_leads_with_the_answer_and_its_figures_are_the_jsons(tmp_path):
    argv = ["plan", "--model", "llama-3.1-70b", "--chip", "h100", "--requests-per-second", "4", "--isl", "1000",
            "--osl", "200", "--p99-ttft-ms", "2000", "--p90-tpot-ms", "40"]
    code, html, err = page_of(tmp_path, argv)
    assert code == 0 and f"plan: wrote {tmp_path / 'r.html'}" in err
    jcode, out, _ = run([*argv, "--json"])
    assert jcode == 0
    best = json.loads(out)["best"]
    result = json.loads(out)
    page = Page(html)
    assert page.value("gpus") == best["gpus"] and page.shown("gpus") == str(best["gpus"])
    assert page.value("chip") == best["chip"] and page.shown("chip") == best["chip"]
    assert page.value("cost_per_hour") == best["cost_per_hour"]
    assert dollars(page.shown("cost_per_hour")) == round(best["cost_per_hour"], 2)
    assert dollars(page.shown("cost_per_month")) == round(best["cost_per_hour"] * HOURS)
    assert dollars(page.shown("cost_per_million_output_tokens")) == round(best["cost_per_million_output_tokens"], 3)
    assert page.value("solver_status") == page.shown("solver_status") == result["search"]["solver_status"]
    # the answer comes first: the figures before the pools' table, the charts, the details
    order = [html.index(s) for s in ('id="answer"', 'id="pools"', 'id="why"', 'id="charts"', 'id="serving"',
                                     'id="assumptions"', 'id="launch"', 'id="manifests"', 'id="about"')]
    assert order == sorted(order)
    # the simulated percentiles are the JSON's, and the chart is inline SVG (the same figure as --chart)
    serving = best["serving"]
    served = next(t for t in page.tables.values() if t and t[0] == ["metric", "p50", "p90", "p99"])
    for row in served[1:]:
        figures = serving[f"{row[0].lower()}_ms"]
        assert [float(c.replace(",", "").split()[0]) for c in row[1:]] == pytest.approx(
            [figures[k] for k in ("p50", "p90", "p99")], abs=0.051), row
    assert html.count("<svg") == 1 and 'class="chart"' in html and "pools-h100" in html
    # collapsed: the launch command as the JSON gives it, copyable
    assert re.search(r'<details id="launch">\s*<summary>', html)
    assert best["vllm_serve"].split(" --")[0] in html
    assert "kind: Deployment" in html
    self_contained(html)
    about = page.texts["about"]
    assert "vLLM 0.33" in about and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", about)
    assert "plan --model llama-3.1-70b --chip h100" in about


def test_a_plan_nothing_fits_is_a_page_that_says_why(tmp_path):
    argv = ["plan", "--model", "dsv4.1-flash", "--chip", "h100", "--concurrency", "64", "--max-gpus", "2"]
    code, html, err = page_of(tmp_path, argv)
    _, out, jerr = run([*argv, "--json"])
    reasons = [e["text"] for e in json.loads(out)["explanations"]]
    assert code == 1 and err.startswith("plan: no pool fits dsv4.1-flash") and reasons
    assert err.splitlines()[0] == jerr.splitlines()[0] and all(r in err for r in reasons)  # as --json says it
    page = Page(html)
    assert page.texts["verdict"] == "No pool fits."
    items = re.findall(r"<li>(.*?)</li>", html[html.index('id="verdict"'):html.index('id="status"')], re.S)
    assert [i.replace("&#39;", "'").replace("&amp;", "&") for i in items] == reasons
    assert page.texts["status"] == "solver INFEASIBLE"
    self_contained(html)


DISAGG = ["plan", "--model", "llama-3.1-70b", "--chip", "h100", "--requests-per-second", "4", "--isl", "1000",
          "--osl", "200", "--ttft-ms", "2000", "--tpot-ms", "40"]


def test_a_disagg_page_leads_with_both_pools_and_its_figures_are_the_jsons(tmp_path):
    argv = [*DISAGG, "--serving", "disagg"]
    code, html, err = page_of(tmp_path, argv)
    assert code == 0 and f"plan: wrote {tmp_path / 'r.html'}" in err
    _, out, _ = run([*argv, "--json"])
    plan = json.loads(out)["serving"]["disaggregated"]
    page = Page(html)
    for field in ("gpus", "cost_per_hour", "cost_per_million_output_tokens", "cost_per_million_input_tokens",
                  "solver_status"):
        assert page.value(field) == plan[field], field
    for role in ("prefill", "decode"):
        assert page.value(f"{role}.gpus") == plan[role]["gpus"]
        assert page.shown(f"{role}.gpus") == f"{plan[role]['gpus']} {plan[role]['chip']}"
    assert page.shown("gpus") == str(plan["gpus"]) == str(plan["prefill"]["gpus"] + plan["decode"]["gpus"])
    assert dollars(page.shown("cost_per_hour")) == round(plan["cost_per_hour"], 2)
    assert dollars(page.shown("cost_per_month")) == round(plan["cost_per_hour"] * HOURS)
    assert dollars(page.shown("cost_per_million_output_tokens")) == round(plan["cost_per_million_output_tokens"], 3)
    assert page.value("ttft.total_ms") == plan["ttft"]["total_ms"]
    assert page.shown("solver_status") == plan["solver_status"] and plan["solver_status"] in page.texts["status"]
    # the pools' table: one row per role and their total, as the text prints it
    rows = page.tables["pools"]
    assert [r[0] for r in rows[1:]] == ["prefill", "decode", "total"]
    assert [r[2] for r in rows[1:]] == [str(plan["prefill"]["gpus"]), str(plan["decode"]["gpus"]), str(plan["gpus"])]
    # the answer first, then the hand-over and TTFT, then the collapsed details
    order = [html.index(s) for s in ('id="lead"', 'id="answer"', 'id="pools"', 'id="why"', 'id="provenance"',
                                     'id="memory-1"', 'id="launch"', 'id="manifests"', 'id="about"')]
    assert order == sorted(order)
    # the text's own words (planner/report/disagg_render.py): every line of its hand-over and binds is on the page
    _, text, _ = run(argv)
    said = " ".join(text.split())
    why = re.findall(r"<li>(.*?)</li>", html[html.index('id="why"'):html.index('id="provenance"')], re.S)
    assert len(why) >= 5 and all(" ".join(unescape(line).split()) in said for line in why)
    assert any(unescape(line).startswith("time to first token: queue") for line in why)
    # every process's command and the router's, and the manifests as --emit k8s writes them
    for role in ("prefill", "decode"):
        for launch in plan[role]["launches"]:
            assert launch["line"] in unescape(html)
    assert plan["router"]["line"] in unescape(html)
    manifests = page.texts["manifests"]
    assert manifests.count("kind: Deployment") == 2 and "kv_producer" in manifests and "kv_consumer" in manifests
    assert "llama-3.1-70b router" in manifests and "the router runs vLLM's proxy" in unescape(manifests)
    self_contained(html)


def test_a_disagg_page_nothing_fits_says_why(tmp_path):
    argv = [*DISAGG, "--serving", "disagg", "--max-gpus", "1"]
    code, html, err = page_of(tmp_path, argv)
    _, out, _ = run([*argv, "--json"])
    plan = json.loads(out)["serving"]["disaggregated"]
    reasons = [e["text"] for e in plan["explanations"]]
    assert code == 1 and not plan["feasible"] and reasons
    assert err.startswith("plan: no disaggregated fleet fits llama-3.1-70b") and all(r in err for r in reasons)
    page = Page(html)
    assert page.texts["verdict"] == "No disaggregated fleet fits."
    items = re.findall(r"<li>(.*?)</li>", html[html.index('id="verdict"'):html.index('id="status"')], re.S)
    assert [unescape(i) for i in items] == reasons
    self_contained(html)


def test_an_auto_page_is_the_chosen_plans_and_says_why(tmp_path):
    argv = ["plan", "--model", "llama-3.1-8b", "--chip", "h100", "--requests-per-second", "2", "--isl", "100",
            "--osl", "100", "--ttft-ms", "1000", "--serving", "auto"]
    code, html, _ = page_of(tmp_path, argv)
    _, out, _ = run([*argv, "--json"])
    choice = json.loads(out)["serving"]
    assert code == 0 and choice["chosen"] == "agg"  # the aggregated plan's page, its best pool's figures
    best = choice["aggregated"]["best"]
    page = Page(html)
    assert page.value("gpus") == best["gpus"] and page.value("cost_per_hour") == best["cost_per_hour"]
    assert page.texts["chosen"] == " ".join(f"--serving auto chose the aggregated plan. {choice['why']}".split())
    same = choice["same_arrivals"]
    said = page.texts["choice"]
    for kind in ("aggregated", "disaggregated"):  # each plan's figures on the same arrivals
        assert f"{kind}, {same['requests']:,} Poisson requests" in said
        assert f"mean TTFT {same[kind]['ttft_ms']:.1f} ms" in said
    assert html.index('id="answer"') < html.index('id="choice"') < html.index('id="pools"')
    self_contained(html)


MAX_RATE = ["plan", "--model", "llama-3.1-8b", "--chip", "h100", "--max-rate", "--max-gpus", "2", "--isl", "1000",
            "--osl", "200", "--p99-ttft-ms", "2000", "--p90-tpot-ms", "40"]


def test_a_max_rate_page_leads_with_the_rate_and_its_figures_are_the_jsons(tmp_path):
    code, html, err = page_of(tmp_path, MAX_RATE)
    _, out, _ = run([*MAX_RATE, "--json"])
    result = json.loads(out)
    best = result["best"]
    assert code == 0 and result["feasible"] and f"plan: wrote {tmp_path / 'r.html'}" in err
    page = Page(html)
    assert page.value("requests_per_second") == result["requests_per_second"] > 0
    assert page.value("best.gpus") == best["gpus"] and page.value("best.chip") == best["chip"]
    assert page.value("cost_per_hour") == best["cost_per_hour"]
    assert dollars(page.shown("cost_per_hour")) == round(best["cost_per_hour"], 2)
    assert page.value("best.cost_per_million_output_tokens") == best["cost_per_million_output_tokens"]
    assert page.texts["binds"] == " ".join(f"What binds at the next rate: {result['binds']}".split())
    assert f"at most {page.shown('requests_per_second')} requests/s" in page.texts["lead"]
    shapes = page.tables["pools"]  # every shape simulated, the most first, as the JSON lists them
    assert [(r[0], r[1]) for r in shapes[1:]] == [(s["chip"], s["split"]) for s in result["shapes"]]
    assert best["vllm_serve"].split(" --")[0] in html and "kind: Deployment" in html
    order = [html.index(s) for s in ('id="lead"', 'id="answer"', 'id="binds"', 'id="pools"', 'id="why"',
                                     'id="launch"', 'id="manifests"')]
    assert order == sorted(order)
    self_contained(html)


def test_a_disagg_max_rate_page_gives_the_fleet_at_the_rate(tmp_path):
    argv = ["plan", "--model", "llama-3.1-70b", "--chip", "h100", "--max-rate", "--max-gpus", "8", "--isl", "1000",
            "--osl", "200", "--ttft-ms", "2000", "--tpot-ms", "40", "--serving", "disagg"]
    code, html, _ = page_of(tmp_path, argv)
    result = json.loads(run([*argv, "--json"])[1])
    fleet = result["fleet"]
    assert code == 0 and fleet is not None
    page = Page(html)
    assert page.value("requests_per_second") == result["requests_per_second"]
    assert page.value("fleet.gpus") == fleet["gpus"] == fleet["prefill"]["gpus"] + fleet["decode"]["gpus"]
    assert page.value("cost_per_hour") == fleet["cost_per_hour"]
    assert page.value("fleet.cost_per_million_output_tokens") == fleet["cost_per_million_output_tokens"]
    assert [r[0] for r in page.tables["pools"][1:]] == ["prefill", "decode", "total"]
    assert fleet["router"]["line"] in unescape(html) and "llama-3.1-70b router" in page.texts["manifests"]
    self_contained(html)


def test_a_max_rate_page_no_rate_serves_says_why(tmp_path):
    argv = [*MAX_RATE[:-4], "--p99-ttft-ms", "1", "--p90-tpot-ms", "1"]
    code, html, err = page_of(tmp_path, argv)
    result = json.loads(run([*argv, "--json"])[1])
    assert code == 1 and not result["feasible"]
    assert err.startswith("plan: llama-3.1-8b (--max-gpus 2): serves no rate within")
    page = Page(html)
    assert "serves no rate" in page.texts["lead"] and "answer" not in page.texts
    assert all(e["text"] in unescape(html) for e in result["explanations"])
    self_contained(html)


@pytest.mark.parametrize("variants", [False, True], ids=["base", "variants"])
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_is_a_page_under_3_mb_whose_figures_are_the_jsons(tmp_path, path, variants):
    argv = ["plan", "scenario", str(path), "--executor", "sequential"] + (["--variants"] if variants else [])
    code, html, _ = page_of(tmp_path, argv)
    jcode, out, _ = run([*argv, "--format", "json"])
    assert code == jcode
    assert len(html.encode()) < MAX_BYTES
    self_contained(html)
    data = json.loads(out)
    base = data["base"] if variants else data
    page = Page(html)
    if base["feasible"]:
        assert page.value("gpus") == base["gpus"]
        assert page.value("cost_per_hour") == base["cost_per_hour"]
        assert dollars(page.shown("cost_per_hour")) == round(base["cost_per_hour"], 2)
        assert dollars(page.shown("cost_per_month")) == round(base["cost_per_month"])
        assert page.value("solver_status") == page.shown("solver_status") == base["solver_status"]
        for p in base["services"]:  # each pool's manifests; a disaggregated service's router says what it needs
            assert p["instances"][0]["commands"][0]["command"].split(" --")[0].replace("'", "&#39;") in html
        if any(p["role"] == "decode" for p in base["services"]):
            assert "router: the router runs vLLM&#39;s proxy" in html and "(--router-image IMAGE)" in html
        assert html.count("kind: Deployment") >= len(base["services"])
    else:
        assert page.texts["verdict"] == "Not every service can be served."
        assert "solver_status" not in page.figures
    if variants and data["variants"]:  # the variants' table: each variant's $/hour, the JSON's
        table = page.tables["table-1"]
        column = table[0].index("$/hour")
        shown = {row[0]: row[column] for row in table[1:]}
        for r in [data["base"], *data["variants"]]:
            assert shown[r["variant"]] == ("infeasible" if not r["feasible"] else
                                           f"{r['cost_per_hour']:,.2f}" + ("*" if any(
                                               p["price_estimate"] for p in r["services"]) else ""))
        if data["ranking"]:
            ranks = page.tables["table-2"]
            assert [int(row[0]) for row in ranks[1:]] == [g["rank"] for g in data["ranking"]]


def test_the_diurnal_page_shows_each_schedule_and_the_fleet_over_the_day(tmp_path):
    """Services with traffic: the headline's peak of the sum, sum of peaks and $/day over the day are
    the JSON's; each service's schedule table holds every interval's replicas and GPUs (the JSON's),
    its lines its $/day, its chart inline; the fleet over the day's lines carry every solver stage;
    the manifests give each autoscaled pool its HorizontalPodAutoscaler, as `--emit k8s` writes it."""
    path = ROOT / "scenarios" / "diurnal-three-services.yaml"
    argv = ["plan", "scenario", str(path), "--executor", "sequential"]
    code, html, _ = page_of(tmp_path, argv)
    jcode, out, _ = run([*argv, "--format", "json"])
    data = json.loads(out)
    assert code == jcode == 0 and data["schedules"] and data["over_the_day"]
    page = Page(html)
    over = data["over_the_day"]
    assert page.value("peak_gpus") == data["peak_gpus"] == over["peak_gpus"]
    assert page.shown("peak_gpus") == str(data["peak_gpus"])
    assert page.value("sum_of_service_peaks") == data["sum_of_service_peaks"]
    assert page.shown("sum_of_service_peaks") == str(data["sum_of_service_peaks"])
    assert page.value("over_the_day.cost_autoscaled_per_day") == over["cost_autoscaled_per_day"]
    assert dollars(page.shown("over_the_day.cost_autoscaled_per_day")) == round(over["cost_autoscaled_per_day"])
    section = html[html.index('id="schedules"'):html.index('id="over-the-day"')]
    for k, s in enumerate(data["schedules"], 1):
        table = page.tables[f"schedule-{k}-table"]
        head, rows = table[0], table[1:]

        def minute(clock: str) -> int:
            hours, minutes = clock.split(":")
            return int(hours) * 60 + int(minutes)

        for i in s["intervals"]:  # the row whose span holds the interval runs its replicas on its GPUs
            start = i["interval"]["start_minute"]
            row = next(r for r in rows if minute(r[0]) <= start < minute(r[1]))
            assert int(row[head.index("replicas")]) == i["replicas"] and int(row[head.index("GPUs")]) == i["gpus"]
            assert (row[head.index("ramp")] == "at risk") == i["at_risk"]
        assert minute(rows[0][0]) == 0 and minute(rows[-1][1]) == sum(i["interval"]["minutes"] for i in s["intervals"])
        assert f"${s['cost_autoscaled_per_day']:,.2f}/day" in section
        assert f"${s['cost_static_per_day']:,.2f}/day" in section
        assert f'id="s{k - 1}-0-rate-{s["service"]}"' in section  # its chart, inline, its ids its own
    fleet = page.texts["over-the-day"]
    assert f"peak of the sum: {over['peak_gpus']} GPUs" in fleet and f"against {over['sum_of_service_peaks']}" in fleet
    assert f"${over['cost_autoscaled_per_day']:,.2f}/day over the day" in fleet
    assert f"${over['cost_static_per_day']:,.2f}/day" in fleet
    assert all(f"{st['stage']} {st['status']}" in fleet for st in over["solver_stages"])
    assert 'id="f0-peak-of-sum"' in html and 'id="f0-sum-of-peaks"' in html
    scaled = [s for s in over["services"] if s["autoscaler"]]
    manifests = html[html.index('id="manifests"'):]
    assert scaled and manifests.count("kind: HorizontalPodAutoscaler") == len(scaled)
    for s in scaled:
        assert f"maxReplicas: {s['autoscaler']['max_replicas']}" in manifests
    folder = tmp_path / "k8s"  # each pool's YAML on the page is the file `--emit k8s` writes, byte for byte
    folder.mkdir()
    assert run([*argv, "--emit", "k8s", "-o", str(folder)])[0] == 0
    shown = re.findall(r'<h3>([^<]*)</h3>\n<pre class="copy">(.*?)</pre>', manifests, re.S)
    assert sorted(name for name, _ in shown) == sorted(p.name for p in folder.iterdir())
    for name, yaml in shown:
        assert unescape(yaml) == (folder / name).read_text(encoding="utf-8"), name
    self_contained(html)


def test_a_fleet_over_the_day_that_fits_where_the_static_plan_does_not_is_on_the_page(tmp_path):
    """48 H100s: fewer than the services' own peaks (57), more than the fleet's busiest hour (45):
    the page says the static plan is short, then gives the fleet over the day's figures (the JSON's),
    its section and the manifests `--emit k8s` writes then, the pools over the day with their HPAs."""
    text = (ROOT / "scenarios" / "diurnal-three-services.yaml").read_text()
    assert "h100: {gpus: 64," in text
    path = tmp_path / "tight.yaml"
    path.write_text(text.replace("h100: {gpus: 64,", "h100: {gpus: 48,"))
    argv = ["plan", "scenario", str(path), "--executor", "sequential"]
    code, html, _ = page_of(tmp_path, argv)
    jcode, out, _ = run([*argv, "--format", "json"])
    data = json.loads(out)
    assert code == jcode == 1 and not data["feasible"] and data["peak_gpus"] <= 48 < data["sum_of_service_peaks"]
    page = Page(html)
    assert page.texts["verdict"] == "Not every service can be served."
    assert page.value("peak_gpus") == data["peak_gpus"]
    assert page.value("sum_of_service_peaks") == data["sum_of_service_peaks"]
    assert "the inventory (h100 48) holds the fleet at every interval" in page.texts["over-the-day"]
    manifests = html[html.index('id="manifests"'):]
    assert manifests.count("kind: HorizontalPodAutoscaler") == sum(1 for s in data["over_the_day"]["services"]
                                                                   if s["autoscaler"])
    self_contained(html)


def test_a_compare_sweep_is_a_page(tmp_path):
    argv = ["plan", "compare", "--model", "llama-3.1-8b", "--chip", "h100", "--chip", "h200", "--concurrency", "8",
            "--executor", "sequential"]
    code, html, _ = page_of(tmp_path, argv)
    assert code == 0
    jcode, out, _ = run([*argv, "--json"])
    data = json.loads(out)
    page = Page(html)
    assert page.value("cost_per_hour") == data["base"]["cost_per_hour"]
    table = page.tables["table-1"]
    assert [row[0] for row in table[1:]] == [r["variant"] for r in [data["base"], *data["variants"]]]
    assert html.count("<svg") == 1
    self_contained(html)


def test_a_compare_file_is_a_page_of_every_variant(tmp_path):
    path = ROOT / "scenarios" / "kv-cache-fp8-vs-bf16.yaml"
    argv = ["plan", "compare", str(path), "--executor", "sequential"]
    code, html, _ = page_of(tmp_path, argv)
    jcode, out, _ = run([*argv, "--json"])
    data = json.loads(out)
    assert code == jcode == 0 and data["variants"]
    table = Page(html).tables["table-1"]
    assert [row[0] for row in table[1:]] == [r["variant"] for r in [data["base"], *data["variants"]]]
    command = Page(html).texts["about"].split("Command: ")[1]  # as given (in the command's order of options)
    assert command.startswith(f"plan compare {path} ") and "--executor sequential" in command
    self_contained(html)


def test_every_user_value_is_escaped(tmp_path):
    """A service named <script>alert(1)</script> and a review titled &"'<> are text on the page."""
    scenario = tmp_path / "x.yaml"
    scenario.write_text("review: \"&\\\"'<> review\"\nservices:\n  - name: \"<script>alert(1)</script>\"\n"
                        "    model: llama-3.1-8b\n    concurrency: 8\n    chips: [h100]\n")
    code, html, _ = page_of(tmp_path, ["plan", "scenario", str(scenario)])
    assert code == 0
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '<h1 id="heading">&amp;&#34;&#39;&lt;&gt; review</h1>' in html
    assert "<title>&amp;&#34;&#39;&lt;&gt; review</title>" in html
    page = Page(html)
    assert page.texts["heading"] == "&\"'<> review"
    assert page.tables["table-1"][1][0] == "<script>alert(1)</script>"  # read back as the text it is
    self_contained(html)


@pytest.mark.parametrize("mode", [["--serving", "disagg"], ["--serving", "auto"], ["--max-rate", "--max-gpus", "1"]],
                         ids=["disagg", "auto", "max-rate"])
def test_a_model_path_is_text_on_every_mode_s_page(tmp_path, mode):
    """A config.json in a folder named <b>&"x: its path, on the heading, the tables and the manifests, escaped."""
    folder = tmp_path / '<b>&"x'
    folder.mkdir()
    (folder / "config.json").write_text((ROOT.parent / "shared" / "models" / "Qwen--Qwen2.5-7B-Instruct.json")
                                        .read_text(encoding="utf-8"))
    targets = (["--ttft-ms", "1000"] if mode[0] == "--serving" else ["--p99-ttft-ms", "2000"])
    code, html, err = page_of(tmp_path, ["plan", "--model", str(folder / "config.json"), "--chip", "h100",
                                         "--requests-per-second", "2", "--isl", "100", "--osl", "100", *targets, *mode]
                              if mode[0] == "--serving" else
                              ["plan", "--model", str(folder / "config.json"), "--chip", "h100", "--isl", "100",
                               "--osl", "100", *targets, *mode])
    assert code == 0, err
    assert '<b>&"x' not in html and "&lt;b&gt;&amp;&#34;x" in html
    assert '<b>&"x' in Page(html).texts["about"]  # read back as the text it is
    self_contained(html)


@pytest.mark.parametrize(("argv", "line"), [
    (["plan", "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--format", "html"],
     "--format: html is written to a file, never to the terminal (add -o FILE.html)"),
    (["plan", "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--format", "html", "-o", "r.txt"],
     "-o: r.txt is not an .html file (name the page's file, e.g. review.html)"),
    (["plan", "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--format", "html", "-o",
      "r.html", "--emit", "k8s"], "--emit: writes a folder and --format html a file, and -o names only one"),
    (["plan", "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--format", "html", "-o",
      "r.html", "--brief"], "--brief: has no effect on --format html"),
    (["plan", "--model", "llama-3.1-8b", "--chip", "h100", "--requests-per-second", "2", "--isl", "100", "--osl",
      "100", "--ttft-ms", "1000", "--serving", "disagg", "--format", "csv"],
     "--format: has no effect without an aggregated plan"),  # html draws a disaggregated plan; csv is agg's table
    (["plan", "scenario", str(SCENARIOS[0]), "--format", "html"], "--format: html is written to a file"),
    (["plan", "scenario", str(SCENARIOS[0]), "--format", "html", "-o", "r.html", "--emit", "k8s"],
     "--emit: writes a folder and --format html a file"),
    (["plan", "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--format", "csv", "-o", "r.html"],
     "-o: has nothing to write (add --emit k8s for a folder of manifests, or --format html for a page)"),
    (["plan", "compare", "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "-o", "r.html"],
     "-o: has nothing to write (add --format html)"),
    (["plan", "compare", "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--format", "html",
      "-o", "missing/r.html"], "-o: folder missing does not exist"),
])
def test_html_without_its_file_is_one_line_and_nothing_written(tmp_path, monkeypatch, argv, line):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and line in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_file_the_system_refuses_leaves_the_old_page(tmp_path, monkeypatch):
    """Written whole or not at all (planner/report/atomic.py): a failing write is one line naming -o."""
    import planner.report.atomic as atomic

    target = tmp_path / "r.html"
    target.write_text("old")

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic, "_mode", refuse)
    code, out, err = run(["plan", "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--format",
                          "html", "-o", str(target)])
    assert code == 2 and err.startswith("plan: error: -o: ") and "No space left on device" in err
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]
