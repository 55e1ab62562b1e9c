"""The commands that start a disaggregated fleet, as vLLM 0.33 documents its P/D serving
(docs/features/nixl_connector_usage.md; registry kv_transfer.nixl.*): each instance is the plan's
`vllm serve` plus `--kv-transfer-config` naming NixlConnector and its kv_role, its own API port, and
its own NIXL handshake side channel (VLLM_NIXL_SIDE_CHANNEL_HOST, the address the other side
reaches; VLLM_NIXL_SIDE_CHANNEL_PORT, of which an instance of dp ranks uses base .. base + dp − 1,
nixl/base_scheduler.py). Ranges are disjoint over the whole fleet, so any placement of instances on
hosts is safe. In front of both pools runs the proxy vLLM's docs name (toy_proxy_server.py, from
vLLM's source tree; the wheel ships no router), given every prefiller's and decoder's host and port.
"""

from __future__ import annotations

import json
import shlex

from planner.report.serve import serve_command
from planner.report.serving import Launch
from pricing.kernel import Deployment
from pricing.registry import load

PREFILL_API_PORT = 8100  # the docs' example ports: prefillers from 8100, decoders from 8200, proxy 8192
DECODE_API_PORT = 8200
ROUTER_PORT = 8192


def kv_transfer_config(kv_role: str) -> str:
    """The `--kv-transfer-config` JSON of one role (config/kv_transfer.py KVTransferConfig)."""
    connector = load().value("kv_transfer.nixl.connector")
    return json.dumps({"kv_connector": connector, "kv_role": kv_role}, separators=(",", ":"))


def host_variable(role: str, index: int) -> str:
    return f"${role.upper()}_{index}_HOST"


def role_launches(hf_id: str, d: Deployment, role: str, replicas: int, gpus_per_node: int, quantization: str | None,
                  first_side_port: int) -> list[Launch]:
    """One launch per instance of a role; side-channel ports from `first_side_port`, dp per instance."""
    base = shlex.split(serve_command(hf_id, d, gpus_per_node, quantization))
    api = PREFILL_API_PORT if role == "prefill" else DECODE_API_PORT
    out = []
    for i in range(replicas):
        env = {"VLLM_NIXL_SIDE_CHANNEL_HOST": host_variable(role, i),
               "VLLM_NIXL_SIDE_CHANNEL_PORT": str(first_side_port + i * d.data_parallel_size)}
        args = base + ["--port", str(api + i), "--kv-transfer-config", kv_transfer_config(d.kv_role)]
        line = " ".join(f"{k}={v}" for k, v in env.items()) + " " + shlex.join(args)
        out.append(Launch(env=env, args=args, line=line))
    return out


def side_channel_base() -> int:
    return int(load().value("kv_transfer.nixl.side_channel_port"))


def router(prefills: int, decodes: int) -> Launch:
    """vLLM's documented proxy in front of `prefills` prefillers and `decodes` decoders."""
    args = ["python", "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py", "--port", str(ROUTER_PORT),
            "--prefiller-hosts", *[host_variable("prefill", i) for i in range(prefills)],
            "--prefiller-ports", *[str(PREFILL_API_PORT + i) for i in range(prefills)],
            "--decoder-hosts", *[host_variable("decode", j) for j in range(decodes)],
            "--decoder-ports", *[str(DECODE_API_PORT + j) for j in range(decodes)]]
    line = " ".join(a if a.startswith("$") else shlex.quote(a) for a in args)
    return Launch(env={}, args=args, line=line + "   # from a checkout of vLLM v0.33.0")
