"""Kubernetes manifests (`--emit k8s -o DIR`): every resource validates, offline, against the
Kubernetes 1.33 schemas kubernetes-validate ships and the custom resources' published schemas
(tests/fixtures/crds/, written by scripts/fixtures/crd_schemas.py: LeaderWorkerSet from kubernetes-sigs/lws
v0.10.0, InferencePool from kubernetes-sigs/gateway-api-inference-extension v1.6.0,
DynamoGraphDeployment v1beta1 from ai-dynamo/dynamo at commit 2a6da14c); the pods ask
for exactly their GPUs, run the plan's own `vllm serve` arguments (every flag in vLLM 0.33's
parser), and nothing secret is written."""

from __future__ import annotations

import json
import os
import re
import shlex
from functools import cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from planner.cli import main
from pricing.errors import InputError
from tests.vllm_flags import problems, proxy_parse

ROOT = Path(__file__).resolve().parents[1]
CRDS = Path(__file__).parent / "fixtures" / "crds"
KUBERNETES = "1.33.0"  # a release kubernetes-validate ships schemas for


@cache
def crd_schemas() -> dict[tuple[str, str], dict]:
    out = {}
    for path in CRDS.glob("*.json"):
        data = json.loads(path.read_text())
        out[(data["apiVersion"], data["kind"])] = data
    return out


def validate(resource: dict) -> None:
    """One resource against its schema; raises on the first error."""
    crd = crd_schemas().get((resource["apiVersion"], resource["kind"]))
    if crd is None:
        kubernetes_validate.validate(resource, KUBERNETES, strict=True)
        return
    jsonschema.validate(resource, crd["schema"])
    if resource["kind"] == "DynamoGraphDeployment":  # each component's pod in full, strictly
        for component in resource["spec"]["components"]:
            kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                                          "template": component["podTemplate"]}, KUBERNETES, strict=True)
    if resource["kind"] == "LeaderWorkerSet":  # the pods in full, strictly, as Kubernetes sees them
        lwt = resource["spec"]["leaderWorkerTemplate"]
        for template in (lwt["leaderTemplate"], lwt["workerTemplate"]):
            kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                                          "template": template}, KUBERNETES, strict=True)


def emitted(folder: Path) -> dict[str, list[dict]]:
    return {p.name: [d for d in yaml.safe_load_all(p.read_text()) if d] for p in sorted(folder.glob("*.yaml"))}


def container_problems(container: dict) -> list[str]:
    """The container's `vllm serve` against vLLM 0.33's parser, after Kubernetes' own expansion of
    $$ (and a shell line's words)."""
    if container["command"] == ["vllm", "serve"]:
        return problems(container["args"])
    assert container["command"] == ["sh", "-c"]
    words = shlex.split(container["args"][0].replace("$$", "$"))
    assert words[:3] == ["exec", "vllm", "serve"]
    return problems([re.sub(r"^\$\(\([A-Z_]+\*\d+\)\)$", "1", w) for w in words[3:]])


def run(capsys, *args) -> str:
    code = main(list(args))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out + out.err


@pytest.fixture(scope="module")
def plan_405b(tmp_path_factory):
    folder = tmp_path_factory.mktemp("k8s") / "out"
    assert main(["--model", "llama-3.1-405b", "--chip", "h100", "--concurrency", "16", "--context-length", "32768",
                 "--emit", "k8s", "-o", str(folder), "--hf-token-secret", "hf-token"]) == 0
    return emitted(folder)


def test_the_schemas_are_the_published_ones():
    schemas = crd_schemas()
    lws = schemas[("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")]["source"]
    pool = schemas[("inference.networking.k8s.io/v1", "InferencePool")]["source"]
    assert (lws["repository"], lws["tag"]) == ("https://github.com/kubernetes-sigs/lws", "v0.10.0")
    assert pool["tag"] == "v1.6.0" and "gateway-api-inference-extension" in pool["repository"]
    assert KUBERNETES in [f"{v}.0" if v.count(".") == 1 else v for v in kubernetes_validate.utils.all_versions()]


def test_validation_catches_a_bad_manifest():
    """The check itself: a GPU count as a list, a LeaderWorkerSet without its template."""
    bad = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"ports": [{"port": "http"}]}}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(bad)
    with pytest.raises(jsonschema.ValidationError):
        validate({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                  "metadata": {"name": "x"}, "spec": {"replicas": 1}})


def test_405b_is_a_leaderworkerset_of_two_pods_of_eight_gpus(plan_405b):
    """Done when: llama-3.1-405b at 16 × 32k on H100 writes a LeaderWorkerSet of 2 pods × 8 GPUs that validates."""
    (resources,) = plan_405b.values()
    kinds = [r["kind"] for r in resources]
    assert kinds == ["LeaderWorkerSet", "Service"]
    for r in resources:
        validate(r)
    lws = resources[0]["spec"]
    assert lws["leaderWorkerTemplate"]["size"] == 2 and lws["replicas"] == 1
    for role in ("leaderTemplate", "workerTemplate"):
        pod = lws["leaderWorkerTemplate"][role]["spec"]
        (container,) = pod["containers"]
        assert container["resources"]["requests"]["nvidia.com/gpu"] == container["resources"]["limits"][
            "nvidia.com/gpu"] == 8
        assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": 2 * 2**30}} in pod["volumes"]
        assert container_problems(container) == []
        token = next(e for e in container["env"] if e["name"] == "HF_TOKEN")
        assert token == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}
    leader = lws["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    worker = lws["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert leader["readinessProbe"]["httpGet"]["path"] == "/health" and "readinessProbe" not in worker
    assert leader["args"][leader["args"].index("--node-rank") + 1] == "0"
    assert worker["args"][worker["args"].index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)"
    assert "--headless" in worker["args"] and "$(LWS_LEADER_ADDRESS)" in worker["args"]
    service = resources[1]["spec"]
    assert service["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"


def test_every_scenario_pool_gets_its_set_and_all_validate(tmp_path, capsys):
    """Done when: `plan scenario FILE --emit k8s -o DIR` writes one set per pool, all valid (llm-d target:
    an InferencePool per pool too)."""
    out = tmp_path / "fleet"
    text = run(capsys, "scenario", str(ROOT / "scenarios" / "mixed-fleet-shared-inventory.yaml"), "--emit", "k8s",
               "-o", str(out), "--k8s-target", "llm-d")
    files = emitted(out)
    assert sorted(files) == ["agents.yaml", "analytics.yaml", "chat.yaml"] and "wrote" in text
    for resources in files.values():
        assert [r["kind"] for r in resources] == ["Deployment", "Service", "InferencePool", "ServiceAccount", "Role",
                                                  "RoleBinding", "ConfigMap", "Deployment", "Service"]
        for r in resources:
            validate(r)
        deployment, pool = resources[0], resources[2]
        assert pool["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert container_problems(container) == []
        assert container["args"][container["args"].index("--port") + 1] == "8000"


def test_data_parallel_across_nodes_in_a_leaderworkerset(tmp_path, capsys):
    out = tmp_path / "dp"
    run(capsys, "--model", "qwen3-235b-a22b", "--chip", "h200", "--concurrency", "64", "--tp", "4", "--dp", "4",
        "--pp", "1", "--gpus-per-node", "8", "--emit", "k8s", "-o", str(out))
    (resources,) = emitted(out).values()
    for r in resources:
        validate(r)
    lwt = resources[0]["spec"]["leaderWorkerTemplate"]
    worker = lwt["workerTemplate"]["spec"]["containers"][0]
    assert worker["command"] == ["sh", "-c"] and "--data-parallel-start-rank $$((LWS_WORKER_INDEX*2))" in worker[
        "args"][0]
    assert container_problems(worker) == [] and container_problems(lwt["leaderTemplate"]["spec"]["containers"][0]) == []


def test_no_secret_is_ever_written(tmp_path, capsys, monkeypatch):
    """A token in the environment never reaches a manifest: only the Secret's name does."""
    token = "hf_" + "Zq8w" * 9
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", token)
    out = tmp_path / "secret"
    run(capsys, "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--context-length", "8192",
        "--emit", "k8s", "-o", str(out), "--hf-token-secret", "my-hf")
    text = "".join(p.read_text() for p in out.glob("*"))
    secrets = [v for k, v in os.environ.items() if re.search(r"TOKEN|SECRET|PASSWORD|KEY", k) and len(v) >= 8]
    assert token in secrets and not [v for v in secrets if v in text]
    assert not re.search(r"hf_[A-Za-z0-9]{20,}", text) and "name: my-hf" in text


def test_nothing_is_written_half_way(tmp_path, monkeypatch):
    from planner.report import k8s

    target = tmp_path / "out"
    calls = []

    def failing(resources):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        return "kind: x\n"

    monkeypatch.setattr(k8s, "dump", failing)
    with pytest.raises(InputError, match="^output_dir: cannot write .*disk full"):
        k8s.write({"a.yaml": [{}], "b.yaml": [{}]}, str(target))
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_bad_emit_input_is_one_line(tmp_path, capsys, shared_models):
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--emit", "k8s"]) == 2
    assert "--emit" in capsys.readouterr().err
    bare = tmp_path / "Qwen--Qwen3-8B.json"
    bare.write_text((shared_models / "Qwen--Qwen3-8B.json").read_text())
    code = main(["--model", str(bare), "--chip", "h100", "--concurrency", "4", "--context-length", "8192",
                 "--emit", "k8s", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "--model-source" in err and not (tmp_path / "o").exists()
    assert main(["--model", str(bare), "--chip", "h100", "--concurrency", "4", "--context-length", "8192",
                 "--emit", "k8s", "-o", str(tmp_path / "o"), "--model-source", "Qwen/Qwen3-8B"]) == 0
    (resources,) = emitted(tmp_path / "o").values()
    assert resources[0]["spec"]["template"]["spec"]["containers"][0]["args"][0] == "Qwen/Qwen3-8B"


def test_replicas_and_amd_gpus(tmp_path, capsys):
    """A pool of single-node instances is one Deployment of `replicas` pods, each asking for its
    instance's GPUs; an AMD chip asks for amd.com/gpu and selects nodes on the AMD node labeller's
    device ID (MI300X: 74a1, the example of ROCm/k8s-device-plugin docs/user-guide/installation.md)."""
    out = tmp_path / "rep"
    run(capsys, "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "400", "--context-length", "8192",
        "--emit", "k8s", "-o", str(out))
    (resources,) = emitted(out).values()
    deployment = resources[0]
    assert deployment["kind"] == "Deployment" and deployment["spec"]["replicas"] == 7
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert "CUDA_VISIBLE_DEVICES" not in json.dumps(deployment)  # the device plugin gives each pod its GPUs
    amd = tmp_path / "amd"
    text = run(capsys, "--model", "llama-3.1-70b", "--chip", "mi300x", "--concurrency", "16", "--context-length",
               "8192", "--emit", "k8s", "-o", str(amd))
    (resources,) = emitted(amd).values()
    for r in resources:
        validate(r)
    pod = resources[0]["spec"]["template"]["spec"]
    assert [k for k in pod["containers"][0]["resources"]["limits"] if "gpu" in k] == ["amd.com/gpu"]
    assert "tolerations" not in pod  # no common GPU taint is documented for AMD nodes (kubernetes.gpu_tolerations)
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": 8 * 2**30}} in pod["volumes"]
    assert pod["nodeSelector"] == {"amd.com/gpu.device-id": "74a1"} and "node selector" not in text


def _sanitised(nvml: str) -> str:
    """GPU feature discovery's product label of an NVML name, by hand: characters outside
    [A-Za-z0-9-_. ] dropped, runs of spaces joined by '-' (k8s-device-plugin internal/lm/resource.go)."""
    kept = "".join(c for c in nvml if c.isascii() and (c.isalnum() or c in "-_. "))
    return "-".join(kept.split())


def test_every_chip_names_its_node_label_or_says_why_not():
    """Each chip file states its node label's value with its source, or null with the reason; an
    NVIDIA value is GPU feature discovery's sanitised NVML name the source quotes."""
    from pricing.chips import get_chip
    from pricing.registry import shipped

    reg = shipped()
    files = sorted((ROOT / "pricing" / "registry" / "chips").glob("*.yaml"))
    unknown = []
    for path in files:
        chip = get_chip(path.stem)
        entry = reg.chip_file(path.stem)["chip"]["gpu_product_label"]
        assert entry["source"].strip() and entry["how"].strip(), path.name
        if entry["value"] is None:
            assert entry["how"].startswith("unknown:") and "--node-selector" in entry["how"], path.name
            unknown.append(path.stem)
            continue
        if chip.vendor == "nvidia":
            (nvml,) = re.findall(r"NVML name '([^']+)'", entry["source"])
            assert entry["value"] == _sanitised(nvml), path.name
        else:
            assert re.fullmatch(r"[0-9a-f]{4}", entry["value"]) and entry["value"].upper() in entry["source"]
    assert unknown == ["h20-141gb", "mi250x"]
    assert _sanitised("NVIDIA H100 PCIe") == "NVIDIA-H100-PCIe"  # GFD's own MIG label reads NVIDIA-H100-PCIe-MIG-…
    values = {p.stem: reg.chip_file(p.stem)["chip"]["gpu_product_label"]["value"] for p in files}
    assert values["rtx-pro-6000"] == "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"
    assert values["gh200-144gb"] == "NVIDIA-GH200-144G-HBM3e" and values["mi355x"] == "75a3"


def test_a_chip_without_a_known_label_needs_node_selector(tmp_path, capsys):
    """No guess: without a known label value, emitting asks for --node-selector before any planning
    (exit 2, nothing written); the option gives the selector, and `none` says the pods have none."""
    args = ["--model", "llama-3.1-8b", "--chip", "mi250x", "--concurrency", "4", "--context-length", "8192",
            "--emit", "k8s"]
    assert main([*args, "-o", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "--node-selector" in err and "mi250x" in err and not (tmp_path / "a").exists()
    run(capsys, *args, "-o", str(tmp_path / "b"), "--node-selector", "amd.com/gpu.device-id=7408")
    (resources,) = emitted(tmp_path / "b").values()
    for r in resources:
        validate(r)
    assert resources[0]["spec"]["template"]["spec"]["nodeSelector"] == {"amd.com/gpu.device-id": "7408"}
    text = run(capsys, *args, "-o", str(tmp_path / "c"), "--node-selector", "none")
    (resources,) = emitted(tmp_path / "c").values()
    assert "nodeSelector" not in resources[0]["spec"]["template"]["spec"] and "no node selector" in text
    assert main([*args, "-o", str(tmp_path / "d"), "--node-selector", "gpu"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


ROUTER_IMAGE = "registry.example/vllm-router@sha256:" + "ab" * 32  # built from docs/launch.md's Dockerfile
PD = ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200", "--requests-per-second", "40",
      "--ttft-ms", "1500", "--tpot-ms", "30", "--context-length", "8192", "--tp", "1", "--tp", "2"]


def _without_host_port(args: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(args):
        if args[i] in ("--host", "--port"):
            i += 2
            continue
        out.append(args[i])
        i += 1
    return out


@pytest.fixture(scope="module")
def pd_plan(tmp_path_factory):
    """`plan --serving disagg --emit k8s`: the plan's JSON and the files written."""
    import contextlib
    import io

    folder = tmp_path_factory.mktemp("pd") / "out"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*PD, "--serving", "disagg", "--json", "--emit", "k8s", "-o", str(folder),
                     "--router-image", ROUTER_IMAGE]) == 0
    return json.loads(out.getvalue())["serving"]["disaggregated"], emitted(folder)


def test_a_disaggregated_plan_is_one_set_per_role_and_its_router(pd_plan):
    """Issue 20: a Deployment and a Service per role pool, each pod asking for its instance's GPUs
    and running its role's exact `vllm serve` arguments (`--kv-transfer-config` as the plan prints it:
    NixlConnector with kv_producer or kv_consumer), its NIXL side channel on the pod's own IP; and
    vLLM's proxy in front, given the two pools' Services. Every file validates."""
    plan, files = pd_plan
    assert sorted(files) == ["llama-3-1-8b-decode.yaml", "llama-3-1-8b-prefill.yaml", "llama-3-1-8b-router.yaml"]
    for resources in files.values():
        for r in resources:
            validate(r)
    assert plan["prefill"]["replicas"] + plan["decode"]["replicas"] > 2  # a fleet, not one of each
    for role, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
        pool = plan[role]
        deployment, service = files[f"llama-3-1-8b-{role}.yaml"]
        assert (deployment["kind"], service["kind"]) == ("Deployment", "Service")
        assert deployment["spec"]["replicas"] == pool["replicas"]
        assert deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == role
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        gpus = pool["gpus_per_replica"]
        assert container["resources"]["requests"]["nvidia.com/gpu"] == container["resources"]["limits"][
            "nvidia.com/gpu"] == gpus
        args = container["args"]
        printed = pool["launches"][0]["args"]  # the plan's own launch of its first instance
        assert _without_host_port(args) == _without_host_port(printed[2:])  # the same flags, in the same order
        assert args[args.index("--port") + 1] == "8000" and args[args.index("--host") + 1] == "0.0.0.0"
        config = args[args.index("--kv-transfer-config") + 1]
        assert config == printed[printed.index("--kv-transfer-config") + 1]
        assert json.loads(config) == {"kv_connector": "NixlConnector", "kv_role": kv_role}
        env = {e["name"]: e for e in container["env"]}
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5600"  # vLLM's default, free in the pod's own netns
        assert "CUDA_VISIBLE_DEVICES" not in env
        assert container_problems(container) == []
        assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    router, router_service = files["llama-3-1-8b-router.yaml"]
    (proxy,) = router["spec"]["template"]["spec"]["containers"]
    a = proxy["args"]
    assert a[a.index("--prefiller-hosts") + 1] == "llama-3-1-8b-prefill"
    assert a[a.index("--decoder-hosts") + 1] == "llama-3-1-8b-decode"
    assert a[a.index("--prefiller-ports") + 1] == a[a.index("--decoder-ports") + 1] == "8000"
    assert a[a.index("--host") + 1] == "0.0.0.0"  # the proxy's own default is 127.0.0.1
    assert proxy_parse(a).decoder_ports == [8000]  # the flags vLLM's proxy parses (tests/vllm_flags.py)
    assert a[a.index("--port") + 1] == plan["router"]["args"][plan["router"]["args"].index("--port") + 1]
    assert proxy["image"] == ROUTER_IMAGE and proxy["command"] == ["python3", "/opt/vllm-router/toy_proxy_server.py"]
    assert "initContainers" not in router["spec"]["template"]["spec"]  # nothing fetched at start-up
    assert router_service["spec"]["ports"][0]["port"] == 8192


def test_a_disaggregated_scenario_service_gets_its_pools_and_router(tmp_path, capsys):
    """A scenario service with `serving: disagg` is its two role pools and its router, beside the
    other services' pools (the llm-d target's: tests/test_k8s_llmd.py)."""
    from tests.test_disagg_plan import SCENARIO

    path = tmp_path / "pd.yaml"
    path.write_text(SCENARIO.replace("SERVING", "disagg"))
    run(capsys, "scenario", str(path), "--emit", "k8s", "-o", str(tmp_path / "out"), "--router-image", ROUTER_IMAGE)
    files = emitted(tmp_path / "out")
    assert sorted(files) == ["batch.yaml", "chat-decode.yaml", "chat-prefill.yaml", "chat-router.yaml"]
    for resources in files.values():
        for r in resources:
            validate(r)
    for role, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
        (container,) = files[f"chat-{role}.yaml"][0]["spec"]["template"]["spec"]["containers"]
        config = json.loads(container["args"][container["args"].index("--kv-transfer-config") + 1])
        assert config["kv_role"] == kv_role and container_problems(container) == []
    (batch,) = files["batch.yaml"][0]["spec"]["template"]["spec"]["containers"]
    assert "--kv-transfer-config" not in batch["args"]


def test_auto_emits_the_plan_it_chose(tmp_path, capsys):
    """`--serving auto --emit k8s` writes the cheaper plan's manifests: a router and two role pools
    when disaggregated serving wins, one pool when aggregated does."""
    assert main([*PD, "--serving", "auto", "--json", "--emit", "k8s", "-o", str(tmp_path / "auto"),
                 "--router-image", ROUTER_IMAGE]) == 0
    chosen = json.loads(capsys.readouterr().out)["serving"]["chosen"]
    files = emitted(tmp_path / "auto")
    expected = (["llama-3-1-8b-decode.yaml", "llama-3-1-8b-prefill.yaml", "llama-3-1-8b-router.yaml"]
                if chosen == "disagg" else ["llama-3-1-8b.yaml"])
    assert sorted(files) == expected
    for resources in files.values():
        for r in resources:
            validate(r)


# -- hardened pods, interconnect on request ---------------------------------------------------------------
GB = 10**9
SHM_NVIDIA = 2 * 2**30  # vLLM docs/deployment/k8s.md, the NVIDIA example's /dev/shm sizeLimit "2Gi"


def pod_specs(resources: list[dict]) -> list[dict]:
    """Every pod template of a file's resources: a Deployment's, a LeaderWorkerSet's leader and worker."""
    out = []
    for r in resources:
        if r["kind"] == "Deployment":
            out.append(r["spec"]["template"]["spec"])
        elif r["kind"] == "LeaderWorkerSet":
            lwt = r["spec"]["leaderWorkerTemplate"]
            out += [lwt["leaderTemplate"]["spec"], lwt["workerTemplate"]["spec"]]
    return out


def assert_hardened(pod: dict, ipc_lock: bool = False) -> None:
    """No service-account token, every container without privilege escalation, every capability dropped
    (IPC_LOCK added back only with RDMA), the runtime's seccomp profile, CPU and memory asked for and bounded."""
    assert pod["automountServiceAccountToken"] is False
    for c in pod["containers"] + pod.get("initContainers", []):
        context = c["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"]["drop"] == ["ALL"]
        assert context["capabilities"].get("add", []) == (["IPC_LOCK"] if ipc_lock else [])
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        assert "runAsNonRoot" not in context  # the default image runs as root (kubernetes.image_user)
        for bound in ("requests", "limits"):
            assert c["resources"][bound]["cpu"] >= 1 and c["resources"][bound]["memory"] >= GB
        assert c["resources"]["requests"]["memory"] <= c["resources"]["limits"]["memory"]


def test_every_pod_is_hardened_and_sized(plan_405b, pd_plan):
    """Done when: for a multi-node (LeaderWorkerSet), an aggregated-per-role and a P/D plan
    with its router, every pod has the hardened securityContext, CPU/memory requests and limits, a
    sized /dev/shm and no automounted token."""
    _, files = pd_plan
    for resources in [*plan_405b.values(), *files.values()]:
        for pod in pod_specs(resources):
            assert_hardened(pod)
            if pod["containers"][0]["name"] == "vllm":
                assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_NVIDIA}} in pod["volumes"]
                assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists",
                                               "effect": "NoSchedule"}]
            else:
                assert "tolerations" not in pod and "nvidia.com/gpu" not in json.dumps(pod)  # the router: no GPU


def test_host_memory_of_a_405b_pod_by_hand(plan_405b):
    """A 405B pod of 8 ranks (tp 8, pp 2): requests 8 × 6 GB (vLLM's k8s example's request per GPU) +
    the 2 GiB /dev/shm; the limit adds 8 rank shards. A stage's shard by hand from Llama 3.1 405B's
    config (hidden 16384, 126 layers, 53248 intermediate, 128 heads of 128, 8 KV heads, vocab 128256):
    63 layers × (2·16384² + 2·16384·1024 + 3·16384·53248) / 8 + 63 × 2·16384 norms + 128256·16384/8
    (embedding or head) + 16384 = 25,367,658,496 parameters, 50.74 GB in bf16."""
    (resources,) = plan_405b.values()
    lwt = resources[0]["spec"]["leaderWorkerTemplate"]
    layer = (2 * 16384**2 + 2 * 16384 * 1024 + 3 * 16384 * 53248) // 8 + 2 * 16384
    shard = 2 * (63 * layer + 128256 * 16384 // 8 + 16384)
    assert shard == 50_735_316_992
    for role in ("leaderTemplate", "workerTemplate"):
        (c,) = lwt[role]["spec"]["containers"]
        asked = c["resources"]
        assert asked["requests"]["memory"] == 8 * 6 * GB + SHM_NVIDIA
        assert asked["requests"]["cpu"] == 8 * 2 and asked["limits"]["cpu"] == 8 * 10
        per_rank = (asked["limits"]["memory"] - asked["requests"]["memory"]) / 8
        assert abs(per_rank / shard - 1) < 0.001, per_rank


def test_rdma_on_request_for_the_pd_pods(tmp_path, capsys):
    """`--rdma RESOURCE=N`: the prefill and decode pods ask for the device (requests = limits), add
    IPC_LOCK back and set UCX's registration-cache bound vLLM's NIXL wants; the router does not.
    Without it the P/D pools' notes say NIXL falls back to TCP."""
    text = run(capsys, *PD, "--serving", "disagg", "--emit", "k8s", "-o", str(tmp_path / "tcp"),
               "--router-image", ROUTER_IMAGE)
    assert text.count("falls back to TCP unless --rdma RESOURCE=N") == 2
    text = run(capsys, *PD, "--serving", "disagg", "--emit", "k8s", "-o", str(tmp_path / "rdma"),
               "--rdma", "rdma/rdma_shared_device_a=1", "--router-image", ROUTER_IMAGE)
    assert "TCP" not in text
    files = emitted(tmp_path / "rdma")
    for role in ("prefill", "decode"):
        resources = files[f"llama-3-1-8b-{role}.yaml"]
        for r in resources:
            validate(r)
        (pod,) = pod_specs(resources)
        assert_hardened(pod, ipc_lock=True)
        (c,) = pod["containers"]
        assert c["resources"]["requests"]["rdma/rdma_shared_device_a"] == 1
        assert c["resources"]["limits"]["rdma/rdma_shared_device_a"] == 1
        assert {"name": "UCX_RCACHE_MAX_UNRELEASED", "value": "1024"} in c["env"]
    (router,) = pod_specs(files["llama-3-1-8b-router.yaml"])
    assert_hardened(router)
    assert "rdma" not in json.dumps(router)


def test_rdma_for_a_multi_node_group_and_not_for_one_node(tmp_path, capsys):
    """A LeaderWorkerSet's pods carry the device and IPC_LOCK (NCCL between nodes; no NIXL, so no UCX
    setting); a plan within one node has no pod that needs it, and says so."""
    args = ["--model", "llama-3.1-405b", "--chip", "h100", "--concurrency", "16", "--context-length", "32768",
            "--emit", "k8s", "--rdma", "nvidia.com/hostdev=2"]
    text = run(capsys, *args, "-o", str(tmp_path / "lws"))
    assert "uses TCP" not in text  # no note on the manifests (the plan's own network line stays: test_k8s_network.py)
    (resources,) = emitted(tmp_path / "lws").values()
    for r in resources:
        validate(r)
    for pod in pod_specs(resources):
        assert_hardened(pod, ipc_lock=True)
        (c,) = pod["containers"]
        assert c["resources"]["limits"]["nvidia.com/hostdev"] == 2
        assert "UCX_RCACHE_MAX_UNRELEASED" not in json.dumps(c["env"])
    text = run(capsys, "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--context-length", "8192",
               "--emit", "k8s", "-o", str(tmp_path / "one"), "--rdma", "nvidia.com/hostdev=1")
    (resources,) = emitted(tmp_path / "one").values()
    (pod,) = pod_specs(resources)
    assert_hardened(pod)
    assert "hostdev" not in json.dumps(pod)
    assert "--rdma: no pool" in text


@pytest.mark.parametrize("bad", ["rdma/x", "rdma/x=0", "=1", "rdma/x=one"])
def test_a_bad_rdma_resource_is_one_line(tmp_path, capsys, bad):
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--emit", "k8s",
                 "-o", str(tmp_path / "o"), "--rdma", bad]) == 2
    err = capsys.readouterr().err
    assert "--rdma" in err and "RESOURCE=N" in err and "Traceback" not in err and not (tmp_path / "o").exists()


def test_tolerations_and_user_and_image_digest(tmp_path, capsys):
    """--toleration replaces the GPU taint's toleration (a value: operator Equal; none: no toleration);
    --run-as-user runs the pods as that non-root user with the model cache where it can enter; --image
    takes a digest as written."""
    image = "vllm/vllm-openai@sha256:" + "0123456789abcdef" * 4
    base = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--context-length", "8192",
            "--emit", "k8s"]
    run(capsys, *base, "-o", str(tmp_path / "a"), "--toleration", "dedicated=inference:NoExecute",
        "--toleration", "nvidia.com/gpu:NoSchedule", "--run-as-user", "2000", "--image", image)
    (resources,) = emitted(tmp_path / "a").values()
    for r in resources:
        validate(r)
    (pod,) = pod_specs(resources)
    assert pod["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoExecute"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    (c,) = pod["containers"]
    assert c["image"] == image
    assert c["securityContext"]["runAsNonRoot"] is True and c["securityContext"]["runAsUser"] == 2000
    home = next(e["value"] for e in c["env"] if e["name"] == "HF_HOME")
    assert not home.startswith("/root") and {"name": "model-cache", "mountPath": home} in c["volumeMounts"]
    run(capsys, *base, "-o", str(tmp_path / "b"), "--toleration", "none")
    (resources,) = emitted(tmp_path / "b").values()
    assert "tolerations" not in pod_specs(resources)[0]
    for bad in (["--toleration", "gpu"], ["--toleration", "gpu:Sometimes"], ["--toleration", "k=:NoSchedule"],
                ["--run-as-user", "0"]):
        assert main([*base, "-o", str(tmp_path / "c"), *bad]) == 2, bad
        err = capsys.readouterr().err
        assert bad[0] in err and "Traceback" not in err and not (tmp_path / "c").exists()


@pytest.mark.parametrize("option", [["--rdma", "rdma/x=1"], ["--toleration", "none"], ["--run-as-user", "2000"]])
def test_k8s_options_need_emit(capsys, option):
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", *option]) == 2
    assert "--emit" in capsys.readouterr().err


# -- the model cache -------------------------------------------------------------------------------------
LLAMA_8B_BYTES = 8_030_261_248 * 2  # Llama 3.1 8B's parameters in bf16: its model.safetensors.index.json total_size


def test_the_cache_claim_is_recommended_and_written_at_the_checkpoint_size(tmp_path, capsys):
    """Without a claim, the notes say each pod downloads the checkpoint and what size a shared cache
    needs (15Gi: 16,060,522,496 bytes rounded up to GiB); --model-cache-size auto writes that claim,
    ReadWriteMany, and the pods mount it; P/D pools of one model count it once."""
    base = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--context-length", "8192",
            "--emit", "k8s", "--hf-token-secret", "hf"]
    text = run(capsys, *base, "-o", str(tmp_path / "a"))
    assert -(-LLAMA_8B_BYTES // 2**30) == 15
    assert "downloads the checkpoint (15Gi)" in text and "--model-cache-claim NAME" in text
    text = run(capsys, *PD, "--serving", "disagg", "--emit", "k8s", "-o", str(tmp_path / "b"), "--hf-token-secret",
               "hf", "--model-cache-claim", "models", "--model-cache-size", "auto", "--router-image", ROUTER_IMAGE)
    files = emitted(tmp_path / "b")
    (claim,) = files["models.yaml"]
    validate(claim)
    assert claim["kind"] == "PersistentVolumeClaim" and claim["metadata"]["name"] == "models"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "15Gi"
    assert "downloads the checkpoint" not in text
    for role in ("prefill", "decode"):
        (pod,) = pod_specs(files[f"llama-3-1-8b-{role}.yaml"])
        assert {"name": "model-cache", "persistentVolumeClaim": {"claimName": "models"}} in pod["volumes"]
    assert main([*base, "-o", str(tmp_path / "c"), "--model-cache-size", "auto"]) == 2
    assert "--model-cache-claim" in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_a_gated_model_without_a_token_is_warned(tmp_path, capsys):
    """meta-llama's checkpoints are gated (kubernetes.gated_sources): without --hf-token-secret the
    manifests come with a warning; Qwen's are not."""
    base = ["--chip", "h100", "--concurrency", "8", "--context-length", "8192", "--emit", "k8s"]
    text = run(capsys, "--model", "llama-3.1-8b", *base, "-o", str(tmp_path / "a"))
    assert "warning: llama-3-1-8b: meta-llama/Meta-Llama-3.1-8B is gated" in text and "--hf-token-secret" in text
    text = run(capsys, "--model", "llama-3.1-8b", *base, "-o", str(tmp_path / "b"), "--hf-token-secret", "hf")
    assert "is gated on" not in text
    text = run(capsys, "--model", "qwen3-8b", *base, "-o", str(tmp_path / "c"))
    assert "is gated on" not in text


# -- the router: nothing unpinned fetched at start-up -------------------------------------------------------
def test_a_disaggregated_plan_needs_a_router_image_or_the_checked_fetch(tmp_path, capsys):
    """Without --router-image or --router-fetch a disaggregated plan's manifests are refused before
    any planning (the vLLM image ships no proxy); a bad digest, both options, or --router-script
    without the opt-in are one line each."""
    base = [*PD, "--serving", "disagg", "--emit", "k8s"]
    assert main([*base, "-o", str(tmp_path / "a")]) == 2
    out = capsys.readouterr()
    assert "--router-image" in out.err and "--router-fetch" in out.err and not (tmp_path / "a").exists()
    assert out.out == ""  # refused before planning: no plan printed
    for bad in (["--router-fetch", "abc"], ["--router-fetch", "a" * 64, "--router-image", ROUTER_IMAGE],
                ["--router-image", ROUTER_IMAGE, "--router-script", "https://mirror/p.py"]):
        assert main([*base, "-o", str(tmp_path / "b"), *bad]) == 2, bad
        err = capsys.readouterr().err
        assert "Traceback" not in err and "--router-fetch" in err and not (tmp_path / "b").exists()
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--emit", "k8s", "-o",
                 str(tmp_path / "c"), "--router-image", ROUTER_IMAGE]) == 2
    assert "disaggregated" in capsys.readouterr().err


def test_the_opt_in_fetch_runs_the_proxy_only_with_its_digest(tmp_path, capsys):
    """--router-fetch SHA256: the init container downloads the proxy and writes it where the proxy runs
    only if the download's SHA-256 is the one given. Its program, run here on a file:// URL: the right
    digest writes the file, a wrong one exits non-zero and writes nothing."""
    import hashlib
    import subprocess
    import sys

    payload = tmp_path / "proxy.py"
    payload.write_bytes(b"print('proxy')\n")
    digest = hashlib.sha256(payload.read_bytes()).hexdigest()
    run(capsys, *PD, "--serving", "disagg", "--emit", "k8s", "-o", str(tmp_path / "out"), "--router-fetch",
        digest.upper(), "--router-script", payload.as_uri())
    resources = emitted(tmp_path / "out")["llama-3-1-8b-router.yaml"]
    for r in resources:
        validate(r)
    (pod,) = pod_specs(resources)
    assert_hardened(pod)
    (fetch,) = pod["initContainers"]
    (proxy,) = pod["containers"]
    program, url, want, path = fetch["args"]
    assert (url, want) == (payload.as_uri(), digest) and proxy["command"] == ["python3", path]
    target = tmp_path / "run" / "toy_proxy_server.py"
    target.parent.mkdir()
    ok = subprocess.run([sys.executable, "-c", program, url, want, str(target)], capture_output=True, text=True)
    assert ok.returncode == 0 and target.read_bytes() == payload.read_bytes()
    target.unlink()
    bad = subprocess.run([sys.executable, "-c", program, url, "0" * 64, str(target)], capture_output=True, text=True)
    assert bad.returncode != 0 and "expected" in bad.stderr and not target.exists()


def test_a_review_planned_in_worker_processes_still_writes_sized_pods(tmp_path, capsys):
    """`plan scenario FILE --variants --emit k8s`: the base comes back from a worker process without its
    kernel (it does not pickle); what the manifests read of it comes with it, so the pods are sized."""
    run(capsys, "scenario", str(ROOT / "scenarios" / "kv-cache-fp8-vs-bf16.yaml"), "--variants", "--executor", "pool",
        "--emit", "k8s", "-o", str(tmp_path / "out"))
    files = emitted(tmp_path / "out")
    assert files
    for resources in files.values():
        for r in resources:
            validate(r)
        for pod in pod_specs(resources):
            assert_hardened(pod)
            (c,) = pod["containers"]
            assert c["resources"]["limits"]["memory"] - c["resources"]["requests"]["memory"] > 10 * GB  # 70B shards


# -- the Dynamo target ---------------------------------------------------------------------------------------
DYNAMO_IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:planned"


def _dynamo_engine_args(args: list[str]) -> list[str]:
    """dynamo.vllm's arguments as `vllm serve`'s: the model positional, Dynamo's own flag dropped."""
    assert args[0] == "--model"
    out = list(args[1:])
    if "--disaggregation-mode" in out:
        i = out.index("--disaggregation-mode")
        del out[i:i + 2]
    return out


def test_dynamo_writes_a_graph_deployment_per_service(tmp_path, capsys):
    """--k8s-target dynamo: an aggregated plan and a P/D plan each become one DynamoGraphDeployment
    (nvidia.com/v1beta1) that validates against ai-dynamo/dynamo's CRD (its pods strictly): a Frontend
    and the workers as its vLLM examples lay them out, each worker running dynamo.vllm with the
    plan's exact engine flags, its replicas, GPUs, node selector, the hardened pod and sharedMemorySize."""
    schema = crd_schemas()[("nvidia.com/v1beta1", "DynamoGraphDeployment")]
    assert schema["source"]["repository"] == "https://github.com/ai-dynamo/dynamo"
    base = ["--emit", "k8s", "--k8s-target", "dynamo", "--image", DYNAMO_IMAGE, "--hf-token-secret", "hf"]
    run(capsys, "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "400", "--context-length", "8192",
        *base, "-o", str(tmp_path / "agg"))
    ((graph,),) = emitted(tmp_path / "agg").values()
    validate(graph)
    frontend, worker = graph["spec"]["components"]
    assert (frontend["type"], worker["type"], worker["replicas"]) == ("frontend", "worker", 7)
    (c,) = worker["podTemplate"]["spec"]["containers"]
    assert c["command"] == ["python3", "-m", "dynamo.vllm"] and c["image"] == DYNAMO_IMAGE
    assert container_problems({"command": ["vllm", "serve"], "args": _dynamo_engine_args(c["args"])}) == []
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1 and worker["sharedMemorySize"] == SHM_NVIDIA
    assert worker["podTemplate"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert "dshm" not in json.dumps(worker)  # the operator mounts /dev/shm (sharedMemorySize)
    for component in (frontend, worker):
        assert_hardened(component["podTemplate"]["spec"])

    assert main([*PD, "--serving", "disagg", "--json", *base, "-o", str(tmp_path / "pd")]) == 0
    plan = json.loads(capsys.readouterr().out)["serving"]["disaggregated"]
    ((graph,),) = emitted(tmp_path / "pd").values()  # no router file: Dynamo's frontend routes
    validate(graph)
    types = {comp["type"]: comp for comp in graph["spec"]["components"]}
    assert sorted(types) == ["decode", "frontend", "prefill"]
    for role in ("prefill", "decode"):
        component = types[role]
        assert component["replicas"] == plan[role]["replicas"]
        (c,) = component["podTemplate"]["spec"]["containers"]
        printed = plan[role]["launches"][0]["args"]
        assert _dynamo_engine_args(c["args"]) == _without_host_port(printed[2:])  # the plan's flags, in order
        assert c["args"][c["args"].index("--disaggregation-mode") + 1] == role
        assert c["resources"]["limits"]["nvidia.com/gpu"] == plan[role]["gpus_per_replica"]


def test_dynamo_refuses_what_it_cannot_write(tmp_path, capsys):
    """No default image (Dynamo's runtime must carry vLLM 0.33: the user names it); multi-node workers
    are not written; the plain target's router options do not apply."""
    agg = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--context-length", "8192", "--emit",
           "k8s", "--k8s-target", "dynamo"]
    assert main([*agg, "-o", str(tmp_path / "a")]) == 2
    assert "--image" in capsys.readouterr().err and not (tmp_path / "a").exists()
    assert main(["--model", "llama-3.1-405b", "--chip", "h100", "--concurrency", "16", "--context-length", "32768",
                 "--emit", "k8s", "--k8s-target", "dynamo", "--image", DYNAMO_IMAGE, "-o", str(tmp_path / "b")]) == 2
    assert "multi-node" in capsys.readouterr().err and not (tmp_path / "b").exists()
    assert main([*PD, "--serving", "disagg", "--emit", "k8s", "--k8s-target", "dynamo", "--image", DYNAMO_IMAGE,
                 "--router-image", ROUTER_IMAGE, "-o", str(tmp_path / "c")]) == 2
    assert "--router-image" in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_what_many_pools_are_told_alike_is_one_line_naming_them():
    """A 500-service emit printed the gated-model warning 500 times (and filled a pipe its caller did not
    read); a note that several pools get alike is one line naming them, in order, the rest counted."""
    from planner.commands.emit import grouped

    names = ["chat", "chat prefill", "a", "b", "c"]
    notes = ["warning: chat prefill: m is gated", "chat: x", "warning: a: m is gated", "warning: b: m is gated",
             "warning: c: m is gated", "--rdma: no pool asks"]
    assert grouped(notes, names) == ["warning: chat prefill, a, b and 1 more: m is gated", "chat: x",
                                     "--rdma: no pool asks"]
