"""`--k8s-target llm-d`: a P/D plan as llm-d runs it (role-labelled prefill and decode pods, the routing
sidecar on the decode pods, one InferencePool over both and llm-d's scheduler as its endpoint picker), an
aggregated pool with its own picker. Every resource validates (Kubernetes 1.33 strictly; the InferencePool
against the published CRD, tests/fixtures/crds/); the flags and plugin names are checked against the
releases the images are built from (llm-d/llm-d-inference-scheduler v0.8.0, commit 05c91f0d;
kubernetes-sigs/gateway-api-inference-extension v1.5.0, commit df9f8909, which it builds on)."""

from __future__ import annotations

import json

import pytest
import yaml

from planner import defaults
from planner.cli import main
from tests.test_k8s import PD, ROUTER_IMAGE, assert_hardened, container_problems, emitted, pod_specs, run, validate

# the routing sidecar's flags at v0.8.0 (pkg/sidecar/proxy/options.go AddFlags, the non-deprecated ones, and
# controller-runtime's zap flags it binds) and the connectors it supports (supportedKVConnectors)
SIDECAR_FLAGS = {"port", "vllm-port", "data-parallel-size", "kv-connector", "ec-connector", "secure-proxy",
                 "cert-path", "enable-ssrf-protection", "enable-prefiller-sampling", "pool-group", "enable-tls",
                 "tls-insecure-skip-verify", "inference-pool", "max-idle-conns-per-host", "zap-log-level"}
SIDECAR_CONNECTORS = {"nixlv2", "shared-storage", "sglang"}
# the endpoint picker's flags (gateway-api-inference-extension v1.5.0 pkg/epp/server/options.go, and the zap
# logging flags of pkg/common/observability/logging)
EPP_FLAGS = {"pool-name", "pool-namespace", "pool-group", "config-file", "config-text", "grpc-port",
             "grpc-health-port", "metrics-port", "tracing", "metrics-endpoint-auth", "secure-serving", "zap-encoder",
             "v", "ha-enable-leader-election"}
# plugin types registered at those releases: llm-d-inference-scheduler pkg/epp/framework/plugins/register.go and
# the inference extension's cmd/epp/runner/runner.go
PLUGINS = {"disagg-headers-handler", "prefill-filter", "decode-filter", "always-disagg-pd-decider",
           "prefix-based-pd-decider", "disagg-profile-handler", "queue-scorer", "kv-cache-utilization-scorer",
           "prefix-cache-scorer", "max-score-picker", "single-profile-handler"}
ROLE = "llm-d.ai/role"  # llm-d-inference-scheduler v0.8.0 pkg/epp/framework/plugins/scheduling/filter/bylabel/roles.go


def _flags(args: list[str]) -> dict[str, str]:
    """Go pflag's `--name=value` and `--name value` words as a mapping."""
    out, words = {}, list(args)
    while words:
        word = words.pop(0)
        assert word.startswith("--"), word
        name, eq, value = word[2:].partition("=")
        out[name] = value if eq else (words.pop(0) if words and not words[0].startswith("--") else "true")
    return out


def _port(container: dict, flag: str = "--port") -> int:
    return int(container["args"][container["args"].index(flag) + 1])


@pytest.fixture(scope="module")
def llmd_pd(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llmd") / "out"
    code = main([*PD, "--serving", "disagg", "--emit", "k8s", "-o", str(folder), "--k8s-target", "llm-d",
                 "--rdma", "rdma/rdma_shared_device_a=1"])
    assert code == 0
    return emitted(folder)


def test_a_pd_plan_is_two_role_pools_and_its_scheduler_all_valid(llmd_pd):
    assert sorted(llmd_pd) == ["llama-3-1-8b-decode.yaml", "llama-3-1-8b-prefill.yaml", "llama-3-1-8b-router.yaml"]
    for resources in llmd_pd.values():
        for r in resources:
            validate(r)
    assert [r["kind"] for r in llmd_pd["llama-3-1-8b-prefill.yaml"]] == ["Deployment"]  # no Service: the pool's
    assert [r["kind"] for r in llmd_pd["llama-3-1-8b-decode.yaml"]] == ["Deployment"]
    assert [r["kind"] for r in llmd_pd["llama-3-1-8b-router.yaml"]] == [
        "InferencePool", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment", "Service"]


def test_the_pool_selects_both_roles_on_the_port_each_serves(llmd_pd):
    """The InferencePool's selector matches the prefill and the decode pods (and nothing else written);
    its target port is the prefill pods' vLLM and the decode pods' routing sidecar, which hands the decode
    to vLLM on the port vLLM listens on; the roles are llm-d's labels."""
    (pool, *_) = llmd_pd["llama-3-1-8b-router.yaml"]
    selector = pool["spec"]["selector"]["matchLabels"]
    (target,) = pool["spec"]["targetPorts"]
    pods = {}
    for role in ("prefill", "decode"):
        (deployment,) = llmd_pd[f"llama-3-1-8b-{role}.yaml"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert labels[ROLE] == role and selector.items() <= labels.items()
        assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
        pods[role] = deployment["spec"]["template"]["spec"]
    epp_pod = llmd_pd["llama-3-1-8b-router.yaml"][5]["spec"]["template"]["metadata"]["labels"]
    assert not selector.items() <= epp_pod.items()
    (prefill,) = pods["prefill"]["containers"]
    assert _port(prefill) == target["number"] == defaults.value("launch.port") and "initContainers" not in pods[
        "prefill"]
    (decode,) = pods["decode"]["containers"]
    (sidecar,) = pods["decode"]["initContainers"]
    flags = _flags(sidecar["args"])
    assert set(flags) <= SIDECAR_FLAGS and flags["kv-connector"] in SIDECAR_CONNECTORS
    assert int(flags["port"]) == target["number"] and sidecar["ports"][0]["containerPort"] == target["number"]
    assert int(flags["vllm-port"]) == _port(decode) == 8200 != target["number"]
    assert decode["ports"][0]["containerPort"] == 8200 and flags["secure-proxy"] == "false"
    assert sidecar["restartPolicy"] == "Always"  # a native sidecar: up before vLLM, beside it after
    assert sidecar["image"] == "ghcr.io/llm-d/llm-d-routing-sidecar:v0.8.0"
    for c, kv_role in ((prefill, "kv_producer"), (decode, "kv_consumer")):
        assert container_problems(c) == []  # every flag in vLLM 0.33's parser
        assert json.loads(c["args"][c["args"].index("--kv-transfer-config") + 1])["kv_role"] == kv_role


def test_the_role_pods_are_hardened_and_carry_rdma(llmd_pd):
    for role in ("prefill", "decode"):
        (pod,) = pod_specs(llmd_pd[f"llama-3-1-8b-{role}.yaml"])
        vllm = pod["containers"][0]
        assert vllm["resources"]["limits"]["rdma/rdma_shared_device_a"] == 1
        assert vllm["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        for sidecar in pod.get("initContainers", []):  # its image's user (Dockerfile.sidecar USER 65532)
            assert sidecar["securityContext"]["runAsNonRoot"] is True and "add" not in sidecar["securityContext"][
                "capabilities"]
            assert sidecar["securityContext"]["runAsUser"] == 65532
            assert "rdma" not in json.dumps(sidecar)
        assert_hardened({**pod, "initContainers": []}, ipc_lock=True)


def test_the_endpoint_picker_is_llm_ds_scheduler_with_the_pd_profiles(llmd_pd):
    """The EPP: llm-d's scheduler image, its pool the InferencePool, its config the ConfigMap's P/D profiles
    (every plugin a registered type, every reference declared, every request prefilled on a prefill pod),
    its Service the port the InferencePool's endpointPickerRef names, its Role reading what it watches."""
    pool, account, role, binding, config, deployment, service = llmd_pd["llama-3-1-8b-router.yaml"]
    ref = pool["spec"]["endpointPickerRef"]  # required by the v1.5.0 CRD the picker is built on (v1.6.0 relaxed it)
    assert ref["name"] == service["metadata"]["name"] == deployment["metadata"]["name"] == account["metadata"]["name"]
    assert ref["port"]["number"] in [p["port"] for p in service["spec"]["ports"]]
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    pod = deployment["spec"]["template"]["spec"]
    (epp,) = pod["containers"]
    assert epp["image"] == "ghcr.io/llm-d/llm-d-inference-scheduler:v0.8.0"
    assert ref["port"]["number"] in [p["containerPort"] for p in epp["ports"]]
    flags = _flags(epp["args"])
    assert set(flags) <= EPP_FLAGS and flags["pool-name"] == pool["metadata"]["name"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"]}]
    watched = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert {("", "pods"), ("inference.networking.k8s.io", "inferencepools")} <= watched
    (mount,) = epp["volumeMounts"]
    (volume,) = pod["volumes"]
    assert volume["configMap"]["name"] == config["metadata"]["name"] and volume["name"] == mount["name"]
    (key,) = config["data"]
    assert flags["config-file"] == f"{mount['mountPath']}/{key}"
    scheduling = yaml.safe_load(config["data"][key])
    declared = {p.get("name", p["type"]) for p in scheduling["plugins"]}
    assert {p["type"] for p in scheduling["plugins"]} <= PLUGINS
    profiles = {p["name"]: [r["pluginRef"] for r in p["plugins"]] for p in scheduling["schedulingProfiles"]}
    assert set(profiles) == {"prefill", "decode"} and all(set(refs) <= declared for refs in profiles.values())
    assert "prefill-filter" in profiles["prefill"] and "decode-filter" in profiles["decode"]
    (handler,) = [p for p in scheduling["plugins"] if p["type"] == "disagg-profile-handler"]
    assert handler["parameters"]["deciders"]["prefill"] == "always-disagg-pd-decider" in declared
    assert "disagg-headers-handler" in declared  # hands the prefill pod's address to the decode pod's sidecar
    context = epp["securityContext"]
    assert context["allowPrivilegeEscalation"] is False and context["runAsNonRoot"] is True
    assert context["capabilities"] == {"drop": ["ALL"]}


def test_an_aggregated_pool_gets_its_own_picker(tmp_path, capsys):
    run(capsys, "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--emit", "k8s", "-o",
        str(tmp_path / "agg"), "--k8s-target", "llm-d", "--namespace", "serving")
    (resources,) = emitted(tmp_path / "agg").values()
    for r in resources:
        validate(r)
        assert r["metadata"]["namespace"] == "serving"
    deployment, _, pool, _, _, binding, config, epp, _ = resources
    assert pool["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert ROLE not in deployment["spec"]["template"]["metadata"]["labels"]
    assert binding["subjects"][0]["namespace"] == "serving"
    scheduling = yaml.safe_load(next(iter(config["data"].values())))
    assert {p["type"] for p in scheduling["plugins"]} <= PLUGINS
    assert [p["name"] for p in scheduling["schedulingProfiles"]] == ["default"]
    assert _flags(epp["spec"]["template"]["spec"]["containers"][0]["args"])["pool-name"] == pool["metadata"]["name"]


def test_a_disaggregated_scenario_service_for_llm_d(tmp_path, capsys):
    """A scenario's P/D service: its two role pools and its scheduler; the aggregated service beside it
    keeps its own pool and picker."""
    from tests.test_disagg_plan import SCENARIO

    path = tmp_path / "pd.yaml"
    path.write_text(SCENARIO.replace("SERVING", "disagg"))
    run(capsys, "scenario", str(path), "--emit", "k8s", "-o", str(tmp_path / "out"), "--k8s-target", "llm-d")
    files = emitted(tmp_path / "out")
    assert sorted(files) == ["batch.yaml", "chat-decode.yaml", "chat-prefill.yaml", "chat-router.yaml"]
    for resources in files.values():
        for r in resources:
            validate(r)
    assert files["chat-router.yaml"][0]["kind"] == "InferencePool"
    assert [r["kind"] for r in files["batch.yaml"]][:3] == ["Deployment", "Service", "InferencePool"]


def test_llm_d_takes_no_router_of_vllms(tmp_path, capsys):
    """llm-d's scheduler routes: --router-image (vLLM's proxy) is refused with it, in one line, nothing written."""
    code = main([*PD, "--serving", "disagg", "--emit", "k8s", "-o", str(tmp_path / "x"), "--k8s-target", "llm-d",
                 "--router-image", ROUTER_IMAGE])
    err = capsys.readouterr().err
    assert code == 2 and "--router-image" in err and "llm-d" in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_the_recorded_proxy_digest_is_the_one_checked(tmp_path, capsys):
    """kubernetes.router_script_sha256 (vLLM v0.33.0's toy_proxy_server.py): --router-fetch with it for the
    default URL is quiet; another digest for that URL is warned about (the init container would refuse it)."""
    known = defaults.value("kubernetes.router_script_sha256")
    assert len(known) == 64 and int(known, 16) >= 0
    text = run(capsys, *PD, "--serving", "disagg", "--emit", "k8s", "-o", str(tmp_path / "a"), "--router-fetch", known)
    assert "warning: llama-3-1-8b-router" not in text
    text = run(capsys, *PD, "--serving", "disagg", "--emit", "k8s", "-o", str(tmp_path / "b"), "--router-fetch",
               "0" * 64)
    assert f"vLLM v0.33.0's proxy has SHA-256 {known}" in text


@pytest.mark.parametrize("target", ["llm-d", "dynamo"])
def test_the_cache_claim_holds_a_pd_services_model(tmp_path, capsys, target):
    """--model-cache-size auto sizes the claim for every model served, a P/D service's too, whichever target
    writes its pools (the checkpoint's 15Gi for llama-3.1-8b, as the plain target's claim)."""
    image = ["--image", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:planned"] if target == "dynamo" else []
    run(capsys, *PD, "--serving", "disagg", "--emit", "k8s", "-o", str(tmp_path / "out"), "--k8s-target", target,
        "--model-cache-claim", "models", "--model-cache-size", "auto", *image)
    (claim,) = emitted(tmp_path / "out")["models.yaml"]
    validate(claim)
    assert claim["spec"]["resources"]["requests"]["storage"] == "15Gi"
