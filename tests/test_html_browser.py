"""issue 42: the HTML report opened in a real browser — headless Chromium (Debian's `chromium`,
driven by Playwright through its executable_path; .ci/run installs it). Every scenario's page (alone
and with --variants) and a plan's: no console error, no request but the file itself, the headline figures in
the DOM those of the same command's JSON, a screenshot that is not blank, nothing wider than the
viewport at 1280 and at 390 pixels, and printed, every collapsed section shown and nothing wider
than the paper. Without Chromium it fails in CI (CI=true) and is skipped elsewhere, saying why."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
WIDTHS = (1280, 390)
PLAN = ["--model", "llama-3.1-70b", "--chip", "h100", "--requests-per-second", "4", "--isl", "1000", "--osl", "200",
        "--p99-ttft-ms", "2000", "--p90-tpot-ms", "40"]
DISAGG = ["--model", "llama-3.1-70b", "--chip", "h100", "--requests-per-second", "4", "--isl", "1000", "--osl", "200",
          "--ttft-ms", "2000", "--tpot-ms", "40", "--serving", "disagg"]
MAX_RATE = ["--model", "llama-3.1-8b", "--chip", "h100", "--max-rate", "--max-gpus", "2", "--isl", "1000", "--osl",
            "200", "--p99-ttft-ms", "2000", "--p90-tpot-ms", "40"]

# every element wider than the viewport, or beyond its edges, that no scrolling box of its own holds
# (a table's cells inside a box that scrolls sideways are the box's business, not the page's)
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth, out = [];
  const TEXT = ["PRE", "CODE", "P", "LI", "TD", "TH", "DT", "DD", "CAPTION", "SUMMARY", "H1", "H2", "H3", "FIGCAPTION"];
  const clipped = el => { for (let p = el.parentElement; p; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX; if (o === "auto" || o === "scroll" || o === "hidden") return true; }
    return false; };
  for (const el of document.body.querySelectorAll("*:not(svg *)")) {  // a chart: its <svg> box, not its marks
    if (!el.checkVisibility()) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    const spills = TEXT.includes(el.tagName) && getComputedStyle(el).overflowX === "visible"
      && el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0;  // its text runs out of its box
    if ((r.right > width + 0.5 || r.left < -0.5 || spills) && !clipped(el))
      out.push(`${el.tagName.toLowerCase()}#${el.id}.${el.className.baseVal ?? el.className}: ${r.left}..${r.right}`
               + (spills ? ` holds ${el.scrollWidth} px in ${el.clientWidth}` : ""));
  }
  return {scroll: document.documentElement.scrollWidth, width, wide: out.slice(0, 5)};
}"""
FIGURES = """() => Object.fromEntries([...document.querySelectorAll("[data-field]")].map(
  el => [el.dataset.field, [el.dataset.value ?? null, el.textContent.trim()]]))"""


def missing(reason: str) -> None:
    """No browser to test with: a failure in CI (CI=true), elsewhere a skip that says why."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        missing("no chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("no playwright (pip install '.[test]')")
    with sync_playwright() as p:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium refuses its sandbox to root
        browser = p.chromium.launch(executable_path=executable, args=args)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> list[tuple[str, Path, dict]]:
    """Every scenario's page, alone and with --variants, a disaggregated plan's, a --max-rate page, and a
    plan's with service targets (a chart), each with its JSON's headline object: (name, page, object)."""
    folder = tmp_path_factory.mktemp("pages")
    out = []
    for path in SCENARIOS:
        argv = ["scenario", str(path), "--variants", "--executor", "sequential"]
        base = json.loads(cli([*argv, "--format", "json"])[1])["base"]  # the base's figures, with variants or not
        for name, given in ((f"{path.stem}-variants", argv), (path.stem, argv[:2])):
            target = folder / f"{name}.html"
            code, _, err = cli([*given, "--format", "html", "-o", str(target)])
            assert code in (0, 1) and target.exists(), err
            out.append((name, target, base))
    target = folder / "disagg.html"  # a disaggregated plan's (--serving disagg)
    assert cli([*DISAGG, "--format", "html", "-o", str(target)])[0] == 0
    plan = json.loads(cli([*DISAGG, "--json"])[1])["serving"]["disaggregated"]
    out.append(("disagg", target, {k: plan[k] for k in ("gpus", "cost_per_hour", "solver_status")}))
    target = folder / "max-rate.html"  # --max-rate: the rate, the pool at it and its cost
    assert cli([*MAX_RATE, "--format", "html", "-o", str(target)])[0] == 0
    result = json.loads(cli([*MAX_RATE, "--json"])[1])
    out.append(("max-rate", target, {"requests_per_second": result["requests_per_second"],
                                     "cost_per_hour": result["best"]["cost_per_hour"]}))
    target = folder / "plan.html"  # last: the page test_a_print_opens_every_section opens
    assert cli([*PLAN, "--format", "html", "-o", str(target)])[0] == 0
    best = json.loads(cli([*PLAN, "--json"])[1])["best"]
    out.append(("plan", target, best))
    return out


class Tab:
    """One browser tab at `width` × 900 pixels, which opens page after page and keeps what each
    logged (console errors and warnings, uncaught errors) and requested."""

    def __init__(self, browser, width: int):
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))

    def open(self, path: Path):
        self.page.emulate_media(media="screen")
        self.errors.clear()
        self.requests.clear()
        self.page.goto(path.as_uri(), wait_until="load")
        return self.page


def test_every_page_renders_alone_with_the_jsons_figures_and_fits_the_screen(browser, pages, tmp_path):
    from matplotlib.image import imread

    for width in WIDTHS:
        tab = Tab(browser, width)
        for name, path, expected in pages:
            page = tab.open(path)
            assert tab.errors == [], (name, width, tab.errors)
            assert tab.requests == [path.as_uri()], (name, width, tab.requests)
            figures = page.evaluate(FIGURES)
            if expected.get("feasible", True):  # a review's base, or a plan's best pool
                for field in ("gpus", "cost_per_hour", "solver_status", "peak_gpus", "sum_of_service_peaks",
                              "requests_per_second"):
                    if expected.get(field) is not None:  # the last two: a review whose services have traffic
                        assert json.loads(figures[field][0]) == expected[field], (name, field)
                assert float(figures["cost_per_hour"][1].strip("$*").replace(",", "")) == \
                    round(expected["cost_per_hour"], 2)
            else:
                assert page.text_content("#verdict") == "Not every service can be served."
            fits = page.evaluate(OVERFLOW)
            assert fits["scroll"] <= fits["width"] and fits["wide"] == [], (name, width, fits)
            shot = tmp_path / f"{name}-{width}.png"
            page.screenshot(path=str(shot), full_page=name in ("plan", "disagg"))  # two pages whole, the top of each
            pixels = imread(str(shot))
            assert shot.stat().st_size > 10_000 and pixels.shape[1] == width and pixels.std() > 0.05, name
            page.emulate_media(media="print")  # printed: every section open, nothing wider than the paper
            assert page.evaluate("[...document.querySelectorAll('details > :not(summary)')]"
                                 ".every(el => el.checkVisibility())"), (name, width)
            fits = page.evaluate(OVERFLOW)
            assert fits["scroll"] <= fits["width"] and fits["wide"] == [], (name, width, "print", fits)
            assert tab.errors == [], (name, width, tab.errors)
        tab.context.close()


def test_a_print_opens_every_section(browser, pages):
    """The beforeprint script, for a browser without the print style's ::details-content."""
    tab = Tab(browser, 1280)
    page = tab.open(pages[-1][1])
    assert page.evaluate("document.querySelectorAll('details:not([open])').length") > 0
    page.evaluate("dispatchEvent(new Event('beforeprint'))")
    assert page.evaluate("document.querySelectorAll('details:not([open])').length") == 0 and tab.errors == []
    tab.context.close()
