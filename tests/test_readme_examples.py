"""README's console examples are what the commands print (scripts/readme_examples.py --write
regenerates them): each block, between its markers, is the command and the lines of its output
the example shows."""

from __future__ import annotations

import pytest

from tests.helpers import script as _load

SCRIPT = _load("readme_examples")


@pytest.mark.parametrize("key", list(SCRIPT.EXAMPLES))
def test_readme_example_is_the_commands_output(key):
    shown = SCRIPT.readme_section.shown("readme_examples", key)
    assert shown == SCRIPT.EXAMPLES[key].section(), f"README's {key} example: scripts/readme_examples.py --write"


def test_an_excerpt_marks_what_it_leaves_out():
    lines = ["a 1", "b 2", "", "c 3", "a 4", "d 5"]
    assert SCRIPT.excerpt(lines, ("a",)) == ["a 1", "...", "a 4", "..."]
    assert SCRIPT.excerpt(lines, ("a", "b")) == ["a 1", "b 2", "...", "a 4", "..."]
    assert SCRIPT.excerpt(["x", "a 1"], ("a",)) == ["a 1"]


def test_readme_names_every_constraint_an_explanation_can_bind():
    """README's `--json` paragraph lists the constraints; an explanation's `constraint` is one of
    planner/app/result.py CONSTRAINTS, each of which README names."""
    from planner.app.result import CONSTRAINTS

    text = SCRIPT.readme_section.README.read_text()
    paragraph = text[text.index("the `constraint` that binds ("):].split(")")[0]
    assert {c.strip(" `\n") for c in paragraph.split("(", 1)[1].split(",")} == set(CONSTRAINTS)
