#!/usr/bin/env python3
"""Write tests/fixtures/vllm-0.33/proxy_flags.json: every flag of the proxy a disaggregated plan
prints in front of its pools (tests/v1/kv_connector/nixl_integration/toy_proxy_server.py of vLLM's
source tree, as docs/features/nixl_connector_usage.md names it; the wheel ships no router), read
from that file's own `parse_args` in a checkout of the release:

    python scripts/proxy_flags.py ~/src/vllm --release 0.33.0 --commit SHA          # write the file
    python scripts/proxy_flags.py ~/src/vllm --release 0.33.0 --commit SHA --check  # compare only

The file is read, never imported (it needs fastapi, httpx and uvicorn): each
`parser.add_argument(...)` call of `parse_args` gives a flag's spellings, whether it takes a value
(nargs, or not a store_true/store_false action), the value's type and its default, each a literal
of the source.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "vllm-0.33" / "proxy_flags.json"
PROXY = Path("tests/v1/kv_connector/nixl_integration/toy_proxy_server.py")


def _flag(call: ast.Call) -> dict:
    spellings = [a.value for a in call.args if isinstance(a, ast.Constant)]
    kw = {k.arg: k.value for k in call.keywords}
    action = ast.literal_eval(kw["action"]) if "action" in kw else "store"
    takes = action not in ("store_true", "store_false")
    entry = {"dest": spellings[0].lstrip("-").replace("-", "_"), "spellings": spellings, "takes_value": takes,
             "type": kw["type"].id if takes and isinstance(kw.get("type"), ast.Name) else ("str" if takes else "none")}
    if "nargs" in kw:
        entry["nargs"] = ast.literal_eval(kw["nargs"])
    if "default" in kw:
        entry["default"] = ast.literal_eval(kw["default"])
    return entry


def collect(checkout: Path, release: str, commit: str, note: str = "") -> dict:
    tree = ast.parse((checkout / PROXY).read_text())
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "parse_args"]
    flags = {}
    for node in ast.walk(fn):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            entry = _flag(node)
            for spelling in entry["spellings"]:
                flags[spelling] = entry
    return {
        "release": release,
        "commit": commit,
        "source": f"vLLM {PROXY} parse_args (argparse.ArgumentParser; after parsing it raises ValueError unless "
                  "there are as many --prefiller-hosts as --prefiller-ports and as many --decoder-hosts as "
                  "--decoder-ports), then uvicorn.run(app, host=args.host, port=args.port)",
        "how": "scripts/proxy_flags.py, reading the file of a checkout of this release (no import)",
        "flags": dict(sorted(flags.items())),
    } | ({"note": note} if note else {})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", type=Path, help="a vLLM source tree at the release")
    ap.add_argument("--release", required=True)
    ap.add_argument("--commit", required=True, help="the commit the checkout is at")
    ap.add_argument("--note", default="", help="how the checkout stands to the release, when it is not the tag")
    ap.add_argument("--check", action="store_true", help="compare with the file, write nothing (exit 1 on a change)")
    args = ap.parse_args()
    from vllm_flags import write_fixture  # scripts/vllm_flags.py, beside this script

    return write_fixture(OUT, collect(args.checkout, args.release, args.commit, args.note), args.check)


if __name__ == "__main__":
    sys.exit(main())
