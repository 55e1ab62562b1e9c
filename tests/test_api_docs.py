"""The Python API (planner/app/api.py) as docs/api.md shows it: every code block of the page runs,
prints what its `#>` lines say, and, where its first line names the command it stands for
(`# same as: plan ...`), leaves a `result` whose JSON is what that command prints. Also: the
library never prints, and `import planner` loads nothing heavy."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "api.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
SAME_AS = "# same as: plan "


def _without_wall_time(data):
    """The JSON less its wall-clock seconds (the only figure two runs of one plan differ in)."""
    if isinstance(data, dict):
        return {k: _without_wall_time(v) for k, v in data.items() if k != "seconds"}
    if isinstance(data, list):
        return [_without_wall_time(v) for v in data]
    return data


def test_the_page_has_examples_and_each_names_its_command():
    assert len(BLOCKS) >= 7
    assert sum(b.startswith(SAME_AS) for b in BLOCKS) >= 6


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_each_example_prints_what_the_page_says_and_matches_its_command(block, monkeypatch):
    monkeypatch.chdir(ROOT)
    out, err = io.StringIO(), io.StringIO()
    scope: dict = {}
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        exec(compile(block, str(PAGE), "exec"), scope)
    said = [line[3:] for line in block.splitlines() if line.startswith("#> ")]
    assert out.getvalue().splitlines() == said
    assert err.getvalue() == ""  # the library never prints, not even on stderr
    if block.startswith(SAME_AS):
        argv = shlex.split(block.splitlines()[0][len(SAME_AS):])
        code, stdout, _ = cli(argv)
        assert code in (0, 1)
        assert _without_wall_time(json.loads(scope["result"].model_dump_json())) == \
            _without_wall_time(json.loads(stdout))


def test_a_plan_is_the_commands_json_to_the_character():
    """`plan --json` prints `PlanResult.model_dump_json(indent=2)`: the API's result, dumped the
    same way, is the same text (wall-clock seconds aside)."""
    import planner

    result = planner.plan(model="llama-3.1-8b", chip="h100", concurrency=400, context_length=8192, max_gpus=8)
    code, stdout, _ = cli(["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "400", "--context-length",
                           "8192", "--max-gpus", "8", "--json"])
    assert code == 0
    wall = re.compile(r'"seconds": [0-9.e-]+')
    assert wall.sub("", result.model_dump_json(indent=2)) + "\n" == wall.sub("", stdout)


def test_the_api_names_fields_as_asked():
    """A note mentions a field: by its own name through the API, by the flag through `plan`."""
    import planner

    notes = planner.plan(model="llama-3.1-8b", chip="h100", concurrency=8, context_length=8192,
                         prices={"h200": 3.0}).notes
    assert notes[0].startswith("price h200=3 has no effect: h200 is not among the chips planned")
    code, stdout, _ = cli(["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--context-length",
                           "8192", "--price", "h200=3", "--json"])
    assert json.loads(stdout)["notes"][0].startswith("--price h200=3 has no effect")


def test_an_aggregated_call_for_another_serving_mode_is_bad_input():
    import planner

    with pytest.raises(planner.InputError) as err:
        planner.plan(model="llama-3.1-8b", chip="h100", concurrency=8, serving="disagg")
    assert err.value.field == "serving"


def test_import_planner_is_light():
    """`import planner` loads neither pydantic nor OR-Tools: the API's names resolve when used."""
    code = ("import sys, planner; heavy = [m for m in ('pydantic', 'ortools', 'planner.app.api') if m in sys.modules]; "
            "print(heavy); print(callable(planner.plan))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "True"]
