"""The commands that start a disaggregated fleet, as vLLM 0.33 documents its P/D serving
(docs/features/nixl_connector_usage.md; registry kv_transfer.nixl.*): each instance is placed and
launched as any other (planner/search/placement.py, planner/app/serve.py: GPUs, host, port,
multi-node flags), plus `--kv-transfer-config` naming NixlConnector and its kv_role, and its own
NIXL handshake side channel: VLLM_NIXL_SIDE_CHANNEL_HOST, the address of the node it runs on (the
other side connects to it), and VLLM_NIXL_SIDE_CHANNEL_PORT, of which an instance of dp ranks uses
port .. port + dp − 1 (nixl/base_scheduler.py: the port plus the data-parallel index). Ranges are
disjoint over the whole fleet. In front of both pools runs the proxy vLLM's docs name
(toy_proxy_server.py, from vLLM's source tree; the wheel ships no router), given every prefiller's
and decoder's head node and port, and listening on every interface of its node (launch.host: the
proxy's own default, 127.0.0.1, takes no connection from another machine).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from planner.app.serve import Launch, Placeholder, ServedModel, _quote, launches, ray_launch
from planner.app.serving import Launch as LaunchData
from planner.defaults import View
from pricing.kernel import Deployment
from pricing.registry import shipped

ROUTER_PORT = 8192  # the docs' proxy port


def kv_transfer_config(kv_role: str) -> str:
    """The `--kv-transfer-config` JSON of one role (config/kv_transfer.py KVTransferConfig): vLLM's
    connector, as the package states it (a fact of vLLM's code, which an overlay of laws leaves)."""
    connector = shipped().value("kv_transfer.nixl.connector")
    return json.dumps({"kv_connector": connector, "kv_role": kv_role}, separators=(",", ":"))


def node_address(node: str) -> str:
    """The placeholder of a node's address: h200-0 -> $H200_0_IP (for the user to fill in)."""
    return Placeholder("$" + re.sub(r"[^A-Z0-9_]", "_", node.upper()) + "_IP")


def side_channel_base() -> int:
    """NixlConnector's side-channel port (vLLM's default, as the package states it)."""
    return int(shipped().value("kv_transfer.nixl.side_channel_port"))


def _with_connector(x: Launch, kv_role: str, side_port: int) -> Launch:
    if x.serve is None:
        return x  # `ray start`: no engine
    env = (*x.env, ("VLLM_NIXL_SIDE_CHANNEL_HOST", node_address(x.node)),
           ("VLLM_NIXL_SIDE_CHANNEL_PORT", str(side_port)))
    return replace(x, serve=replace(x.serve, role=("--kv-transfer-config", kv_transfer_config(kv_role))), env=env)


def role_instances(model: ServedModel, d: Deployment, gpus_per_node: int, placed: list, first_side_port: int,
                   reads: View):
    """Each placed instance of a role's pool (InstancePlacement, with its role) with its commands:
    the pool's launch plus the connector's flag and side channel. Returns the InstanceLaunch
    records (planner/app/result.py) and, per process, its environment and argument list (the
    launch defaults read through `reads`)."""
    from planner.app.result import CommandLine, InstanceLaunch

    out, data = [], []
    for n, inst in enumerate(placed):
        port = first_side_port + n * d.data_parallel_size
        own = [_with_connector(x, d.kv_role, port) for x in launches(model, d, gpus_per_node, inst.slots, reads=reads)]
        ray = [_with_connector(x, d.kv_role, port) for x in ray_launch(model, d, gpus_per_node, inst.slots, reads)]
        out.append(InstanceLaunch(
            replica=inst.replica, role=inst.role, slots=inst.slots,
            commands=[CommandLine.of(x) for x in own], ray=[CommandLine.of(x) for x in ray]))
        data += [LaunchData(node=x.node, env=dict(x.env), args=list(x.args), line=x.text) for x in own]
    return out, data


def router_host(reads: View) -> str:
    """Where the proxy listens: every interface (planner/defaults.yaml launch.host, read through
    `reads`), never its own default of loopback alone (tests/fixtures/vllm-0.33/proxy_flags.json --host)."""
    return str(reads.value("launch.host"))


def router(prefill: list, decode: list, reads: View) -> LaunchData:
    """vLLM's documented proxy in front of the placed prefill and decode instances (their head slots)."""
    def hosts(placed):
        return [node_address(i.slots[0].node) for i in placed], [str(i.slots[0].port) for i in placed]

    p_hosts, p_ports = hosts(prefill)
    d_hosts, d_ports = hosts(decode)
    args = ["python", "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py", "--host", router_host(reads),
            "--port", str(ROUTER_PORT),
            "--prefiller-hosts", *p_hosts, "--prefiller-ports", *p_ports,
            "--decoder-hosts", *d_hosts, "--decoder-ports", *d_ports]
    return LaunchData(node="", env={}, args=args,
                      line=" ".join(_quote(a) for a in args) + "   # from a checkout of vLLM v0.33.0")
