#!/usr/bin/env python3
"""Write tests/fixtures/vllm-0.33/serve_flags.json: every flag `vllm serve` accepts, read from vLLM's
own argument parser, and every environment variable vllm/envs.py reads.

Run it with the oracle's interpreter (vLLM 0.33 installed, CPU only):

    ~/.cache/vllm-oracle-venv/bin/python scripts/vllm_flags.py          # write the file
    ~/.cache/vllm-oracle-venv/bin/python scripts/vllm_flags.py --check  # compare, write nothing

The parser is the one `vllm serve` builds (vllm/entrypoints/cli/serve.py ServeSubcommand:
entrypoints/common/cli_args.py make_arg_parser: the serve subcommand's own flags such as --headless,
FrontendArgs.add_cli_args, AsyncEngineArgs.add_cli_args in engine/arg_utils.py). On a machine without a
GPU vLLM cannot infer a device, and DeviceConfig's default then raises while the engine's flags are
built; the script names the platform's device type `cuda` first, which changes no flag's spelling.
For each flag: its spellings, whether it takes a value, the value's type, and its choices where the
parser or the Literal type behind it lists them (quantization methods, KV cache dtypes, executor
backends, speculative methods, KV roles).
"""

from __future__ import annotations

import argparse
import json
import sys
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "vllm-0.33" / "serve_flags.json"
SMALL = 64  # choices listed when the parser holds at most this many


def _type_name(action: argparse.Action) -> str:
    """int, float, str or json (a value json.loads parses); `none` for a flag without a value.
    vLLM's optional_type(T) wraps T in a closure: the name is T's."""
    if action.nargs == 0:
        return "none"
    return _kind(action.type)


def _kind(t) -> str:
    for kind in (int, float, str):
        if t is kind:
            return kind.__name__
    if t is None:
        return "str"
    if getattr(t, "__name__", "") == "loads" or "json" in getattr(t, "__module__", ""):
        return "json"
    inner = [c.cell_contents for c in (getattr(t, "__closure__", None) or ()) if callable(c.cell_contents)]
    if inner:
        return _kind(inner[0])
    return "str"


def _literal(tp) -> list[str]:
    return [str(v) for v in typing.get_args(tp)]


def value_choices() -> dict[str, dict]:
    """Flags whose value vLLM checks against a Literal type outside argparse's `choices`."""
    from vllm.config.cache import CacheDType
    from vllm.config.kv_transfer import KVRole
    from vllm.config.parallel import DataParallelBackend, DistributedExecutorBackend
    from vllm.config.speculative import SpeculativeMethod
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

    return {
        "--quantization": {"values": sorted(QUANTIZATION_METHODS),
                           "source": "vllm/model_executor/layers/quantization/__init__.py QUANTIZATION_METHODS"},
        "--kv-cache-dtype": {"values": _literal(CacheDType), "source": "vllm/config/cache.py CacheDType"},
        "--distributed-executor-backend": {"values": _literal(DistributedExecutorBackend),
                                           "source": "vllm/config/parallel.py DistributedExecutorBackend"},
        "--data-parallel-backend": {"values": _literal(DataParallelBackend),
                                    "source": "vllm/config/parallel.py DataParallelBackend"},
        "--speculative-config.method": {"values": sorted(_literal(SpeculativeMethod)),
                                        "source": "vllm/config/speculative.py SpeculativeMethod"},
        "--kv-transfer-config.kv_role": {"values": _literal(KVRole), "source": "vllm/config/kv_transfer.py KVRole"},
    }


def collect() -> dict:
    import vllm
    from vllm.platforms import current_platform

    type(current_platform).device_type = "cuda"
    import vllm.envs as envs
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    flags = {}
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        entry = {"dest": action.dest, "spellings": list(action.option_strings), "takes_value": action.nargs != 0,
                 "type": _type_name(action)}
        if action.nargs not in (None, 0):
            entry["nargs"] = action.nargs
        if action.choices is not None and len(list(action.choices)) <= SMALL:
            entry["choices"] = [str(c) for c in action.choices]
        for spelling in action.option_strings:
            flags[spelling] = entry
    return {
        "release": vllm.__version__,
        "source": "vllm serve's parser: vllm/entrypoints/common/cli_args.py make_arg_parser (the serve subcommand's "
                  "flags, FrontendArgs.add_cli_args, AsyncEngineArgs.add_cli_args of vllm/engine/arg_utils.py)",
        "how": "scripts/vllm_flags.py, run with the interpreter of a venv holding this vLLM release",
        "flags": dict(sorted(flags.items())),
        "value_choices": value_choices(),
        "environment": {"source": "vllm/envs.py environment_variables", "names": sorted(envs.environment_variables)},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the file, write nothing (exit 1 on a change)")
    args = ap.parse_args()
    return write_fixture(OUT, collect(), args.check)


def write_fixture(out: Path, data: dict, check: bool) -> int:
    """Write `data` as the fixture `out` (whole or not at all), or with `check` compare only: exit
    status 1 when it differs."""
    text = json.dumps(data, indent=1) + "\n"
    if check:
        same = out.exists() and out.read_text() == text
        print(f"{out.relative_to(ROOT)}: " + ("unchanged" if same else "differs"))
        return 0 if same else 1
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(out)
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
