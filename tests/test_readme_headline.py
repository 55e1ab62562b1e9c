"""README's headline example is what `plan` prints for it (scripts/readme_headline.py --write
regenerates it): the table, the margin, search, binds, speed and cost lines, the node map and the
launch command, at 120 columns."""

from __future__ import annotations

from tests.helpers import script as _load


def _script():
    return _load("readme_headline")


def test_readme_headline_is_the_commands_output():
    script = _script()
    shown = script.readme_section.shown("readme_headline")
    assert shown == script.section(), "README's headline is not the output: scripts/readme_headline.py --write"
    # the block is the command's whole output but the elided breakdown: its first and last lines are there
    lines = script.output().splitlines()
    assert lines[0] in shown and lines[-1] in shown and lines[-1].startswith("CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve")
