"""A printed `vllm serve` command checked against vLLM 0.33's own parser, as data: the flag list
tests/fixtures/vllm-0.33/serve_flags.json (written by scripts/fixtures/vllm_flags.py from the release's
make_arg_parser and vllm/envs.py). Every flag must be one of the parser's spellings, take a value
exactly when the parser's does, and its value must parse as the parser's type and choices."""

from __future__ import annotations

import json
import re
import shlex
from functools import cache
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "vllm-0.33" / "serve_flags.json"
PLACEHOLDER = re.compile(r"\$\(?[A-Z_][A-Z0-9_]*\)?")  # $HEAD_IP, or $(LWS_WORKER_INDEX) in a manifest
ENV = re.compile(r"[A-Z_][A-Z0-9_]*=")


@cache
def parser() -> dict:
    return json.loads(FIXTURE.read_text())


def _value_problem(flag: str, entry: dict, value: str) -> str | None:
    if PLACEHOLDER.fullmatch(value) or ("$" in value and entry["type"] == "str"):
        return None
    kind = entry["type"]
    try:
        if kind == "int":
            int(value)
        elif kind == "float":
            float(value)
        elif kind == "json":
            json.loads(value)
    except ValueError:
        return f"{flag} {value!r} is not a{'n' if kind == 'int' else ''} {kind}"
    choices = entry.get("choices") or parser()["value_choices"].get(flag, {}).get("values")
    if choices and value not in choices:
        return f"{flag} {value!r} is not one of vLLM's choices"
    if flag == "--speculative-config":
        method = json.loads(value).get("method")
        if method not in parser()["value_choices"]["--speculative-config.method"]["values"]:
            return f"--speculative-config method {method!r} is not one of vLLM's"
    return None


def problems(args: list[str], env: list[str] = ()) -> list[str]:
    """What vLLM 0.33's parser would not take in `vllm serve MODEL FLAGS...` (args without the
    leading `vllm serve`), and environment variables vllm/envs.py does not read."""
    flags = parser()["flags"]
    out = [f"environment variable {name} is not one vllm/envs.py reads" for name in env
           if name not in parser()["environment"]["names"]]
    i = 1 if args and not args[0].startswith("-") else 0  # the model tag
    while i < len(args):
        token = args[i]
        if not token.startswith("-"):
            out.append(f"{token!r} is a second positional argument")
            i += 1
            continue
        name, eq, inline = token.partition("=")
        entry = flags.get(name)
        if entry is None:
            out.append(f"{name} is not a flag of vLLM {parser()['release']}'s `vllm serve`")
            i += 2 if not eq and i + 1 < len(args) and not args[i + 1].startswith("-") else 1
            continue
        if not entry["takes_value"]:
            if eq:
                out.append(f"{name} takes no value")
            i += 1
            continue
        if eq:
            value, i = inline, i + 1
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            value, i = args[i + 1], i + 2
        else:
            out.append(f"{name} needs a value")
            i += 1
            continue
        problem = _value_problem(name, entry, value)
        if problem:
            out.append(problem)
    return out


def command_problems(text: str) -> list[str]:
    """The same for a shell line: `[NAME=VALUE ...] vllm serve MODEL FLAGS...`."""
    words = shlex.split(text)
    env = []
    while words and ENV.match(words[0]):
        env.append(words.pop(0).split("=", 1)[0])
    if words[:2] != ["vllm", "serve"]:
        return [f"not a `vllm serve` command: {text[:60]}"]
    return problems(words[2:], env)


PROXY_FIXTURE = FIXTURE.parent / "proxy_flags.json"
TYPES = {"int": int, "str": str}


@cache
def proxy_flags() -> dict:
    return json.loads(PROXY_FIXTURE.read_text())


def proxy_parse(args: list[str]):
    """The printed proxy's flags (after `python toy_proxy_server.py`) as vLLM's proxy parses them:
    its argparse parser rebuilt from tests/fixtures/vllm-0.33/proxy_flags.json (written by
    scripts/fixtures/proxy_flags.py from the file's parse_args), then its own check that hosts and ports pair
    up. Returns the namespace; raises ValueError on what the proxy would refuse."""
    import argparse

    parser = argparse.ArgumentParser(prog="toy_proxy_server.py", exit_on_error=False)
    for entry in {e["dest"]: e for e in proxy_flags()["flags"].values()}.values():
        kwargs = {"default": entry.get("default")}
        if entry["takes_value"]:
            kwargs |= {"type": TYPES[entry["type"]]} | ({"nargs": entry["nargs"]} if "nargs" in entry else {})
        else:
            kwargs["action"] = "store_true"
        parser.add_argument(*entry["spellings"], **kwargs)
    try:
        ns, extra = parser.parse_known_args(args)
    except argparse.ArgumentError as err:
        raise ValueError(str(err)) from err
    if extra:
        raise ValueError(f"not flags of vLLM's proxy: {extra}")
    for side in ("prefiller", "decoder"):
        if len(getattr(ns, f"{side}_hosts")) != len(getattr(ns, f"{side}_ports")):
            raise ValueError(f"Number of {side} hosts must match number of {side} ports")
    return ns
