"""The reference pages, from the tool itself: every command's `--help` (docs/commands.md) and the
scenario file's fields, from the JSON Schema `plan scenario --file-schema` prints
(docs/scenario-format.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "scripts" / "docgen")]
from examples import output  # noqa: E402

COLUMNS = 100  # the help text's width: a page's code block without a scroll bar


def commands() -> str:
    """`plan --help`, then each subcommand's, in the order `plan --help` lists them."""
    from planner.cli import cli

    parts = [("plan", output(["--help"], COLUMNS))]
    names = cli.list_commands(None)
    parts += [(f"plan {name}", output([name, "--help"], COLUMNS)) for name in names]
    return "".join(f"## `{title}`\n\n```text\n$ {title} --help\n{text}\n```\n\n" for title, text in parts)


def _type(node: dict) -> str:
    """A schema node's type in words, a definition by its name (linked to its table)."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in node:
        kinds = [_type(each) for each in node["anyOf"] if each.get("type") != "null"]
        return " or ".join(kinds) + (" or null" if len(kinds) < len(node["anyOf"]) else "")
    kind = node.get("type", "any")
    if kind == "array":
        return f"list of {_type(node.get('items', {}))}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map of name to {_type(node['additionalProperties'])}"
    bounds = [f"{word} {node[key]}" for key, word in (("minimum", "≥"), ("exclusiveMinimum", ">"),
                                                       ("maximum", "≤"), ("exclusiveMaximum", "<"))
              if key in node]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(title: str, model: dict) -> str:
    required = set(model.get("required", []))
    rows = ["| field | type | default | what |", "| --- | --- | --- | --- |"]
    for name, node in model.get("properties", {}).items():
        kind = _type(node)
        default = "required" if name in required else (f"`{json.dumps(node['default'])}`" if "default" in node else "")
        rows.append(f"| `{name}` | {_cell(kind)} | {default} | {_cell(node.get('description', ''))} |")
    extra = "" if model.get("additionalProperties", True) is not False else "\nNo other field is taken.\n"
    return f"## {title}\n\n{model.get('description', '')}\n\n" + "\n".join(rows) + "\n" + extra + "\n"


def scenario_schema() -> str:
    """One table per object of the scenario file, the file's own first, from `plan scenario --file-schema`."""
    schema = json.loads(output(["scenario", "--file-schema"], COLUMNS))
    parts = [_table(schema["title"], schema)]
    parts += [_table(name, model) for name, model in schema["$defs"].items()]
    return "".join(parts)
