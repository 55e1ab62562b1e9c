"""Issue 43: a disaggregated plan whose prefill and decode pools fit one node is priced with its KV
hand-over over that node's NVLink (planner/app/serving.py Handover.one_node), so its manifests keep
both pools' pods on one node: every vLLM pod of the service carries a required pod affinity
(requiredDuringSchedulingIgnoredDuringExecution, topologyKey kubernetes.io/hostname) whose selector
matches the pods of both roles and no other pod, in every `--k8s-target`. A hand-over across nodes
changes nothing. Every file still validates (Kubernetes 1.33 strict, the published CRDs:
tests/test_k8s.py `validate`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.cli import main
from planner.defaults import load
from tests.test_k8s import DYNAMO_IMAGE, ROUTER_IMAGE, emitted, validate

PD = ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200", "--ttft-ms", "1500",
      "--tpot-ms", "30", "--context-length", "8192", "--serving", "disagg"]
# tests/test_disagg_plan.py: 40 requests/s are 5 prefill + 2 decode H100s, one 8-GPU node (NVLink); 80 outgrow it
ONE_NODE, ACROSS = "40", "80"
TARGETS = {"plain": ["--router-image", ROUTER_IMAGE], "llm-d": [], "dynamo": ["--image", DYNAMO_IMAGE]}
HOSTNAME = "kubernetes.io/hostname"
WARNING = "are bound to one node (pod affinity on kubernetes.io/hostname)"


def _emit(tmp_path: Path, capsys, rate: str, target: str) -> tuple[dict[str, list[dict]], str]:
    folder = tmp_path / f"{target}-{rate}"
    code = main([*PD, "--requests-per-second", rate, "--emit", "k8s", "-o", str(folder), "--k8s-target", target,
                 "--hf-token-secret", "hf", "--model-cache-claim", "cache", *TARGETS[target]])
    out = capsys.readouterr()
    assert code == 0, out.err
    files = emitted(folder)
    for resources in files.values():
        for r in resources:
            validate(r)
    return files, out.out + out.err


def _pods(files: dict[str, list[dict]]) -> list[tuple[dict, dict]]:
    """Every pod template written, as (its labels, its spec): Deployments', LeaderWorkerSets' leaders
    and workers', each DynamoGraphDeployment component's (the operator adds a component's type as
    its own label; the labels here are the template's)."""
    out = []
    for resources in files.values():
        for r in resources:
            if r["kind"] == "Deployment":
                out.append(r["spec"]["template"])
            elif r["kind"] == "LeaderWorkerSet":
                lwt = r["spec"]["leaderWorkerTemplate"]
                out += [lwt["leaderTemplate"], lwt["workerTemplate"]]
            elif r["kind"] == "DynamoGraphDeployment":
                out += [c["podTemplate"] for c in r["spec"]["components"]]
    return [(t.get("metadata", {}).get("labels", {}), t["spec"]) for t in out]


def _selects(selector: dict, labels: dict) -> bool:
    """A label selector (matchLabels, matchExpressions with In) against a pod's labels, as Kubernetes
    reads it (apimachinery LabelSelectorAsSelector: every requirement holds)."""
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for e in selector.get("matchExpressions", []):
        assert e["operator"] == "In"
        if labels.get(e["key"]) not in e["values"]:
            return False
    return True


def _is_vllm(labels: dict, spec: dict) -> bool:
    """A pod running vLLM (a role's), not a router, a scheduler or Dynamo's frontend."""
    return labels.get("app.kubernetes.io/component") in ("prefill", "decode")


@pytest.mark.parametrize("target", list(TARGETS))
def test_a_one_node_pd_plan_binds_both_roles_to_one_node(tmp_path, capsys, target):
    """Every prefill and decode pod requires the node (kubernetes.io/hostname) of the pods one term
    selects; that term selects exactly the service's prefill and decode pods (so the first may start
    anywhere, matching itself, and every later one joins it), never the router's, the scheduler's or
    the frontend's."""
    files, text = _emit(tmp_path, capsys, ONE_NODE, target)
    pods = _pods(files)
    vllm = [(labels, spec) for labels, spec in pods if _is_vllm(labels, spec)]
    assert sorted(labels["app.kubernetes.io/component"] for labels, _ in vllm) == ["decode", "prefill"]
    for _, spec in vllm:
        (term,) = spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert set(spec["affinity"]) == {"podAffinity"} and set(term) == {"labelSelector", "topologyKey"}
        assert term["topologyKey"] == HOSTNAME
        assert [_is_vllm(labels, other) for labels, other in pods] == [
            _selects(term["labelSelector"], labels) for labels, _ in pods]
    for labels, spec in pods:
        if not _is_vllm(labels, spec):
            assert "affinity" not in spec
    assert text.count(WARNING) == 1  # one line for the service, naming what the cluster still must give
    assert "share a PID namespace" in text


@pytest.mark.parametrize("target", list(TARGETS))
def test_a_pd_plan_across_nodes_is_not_bound(tmp_path, capsys, target):
    files, text = _emit(tmp_path, capsys, ACROSS, target)
    pods = _pods(files)
    assert sum(_is_vllm(labels, spec) for labels, spec in pods) == 2
    assert all("affinity" not in spec for _, spec in pods)
    assert WARNING not in text


def test_the_plain_selector_by_hand(tmp_path, capsys):
    """The plain target's term, written out: both pools' Deployments by their instance label."""
    files, _ = _emit(tmp_path, capsys, ONE_NODE, "plain")
    for role in ("prefill", "decode"):
        deployment = files[f"llama-3-1-8b-{role}.yaml"][0]
        assert deployment["spec"]["template"]["spec"]["affinity"] == {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchExpressions": [{"key": "app.kubernetes.io/instance", "operator": "In",
                                                        "values": ["llama-3-1-8b-prefill", "llama-3-1-8b-decode"]}]},
                "topologyKey": HOSTNAME}]}}


def test_a_scenario_service_on_one_node_is_bound_and_one_split_over_two_is_not(tmp_path, capsys):
    """A scenario's P/D service carries its own hand-over (planner/app/fleet.py ServicePlan.handover):
    scenarios/disaggregated-chat-h200-b200.yaml's chat lands on one B200 node, SPLIT's over two
    (tests/test_disagg_plan.py)."""
    from tests.test_disagg_plan import SPLIT

    split = tmp_path / "split.yaml"
    split.write_text(SPLIT)
    example = Path(__file__).resolve().parents[1] / "scenarios" / "disaggregated-chat-h200-b200.yaml"
    for path, bound in ((example, True), (split, False)):
        folder = tmp_path / path.stem
        assert main(["scenario", str(path), "--emit", "k8s", "-o", str(folder), "--router-image", ROUTER_IMAGE,
                     "--hf-token-secret", "hf"]) == 0, capsys.readouterr().err
        capsys.readouterr()
        files = emitted(folder)
        for resources in files.values():
            for r in resources:
                validate(r)
        chat = [(labels, spec) for labels, spec in _pods(files)
                if labels.get("app.kubernetes.io/instance", "").startswith("chat-")]
        assert sorted(labels["app.kubernetes.io/component"] for labels, _ in chat) == ["decode", "prefill", "router"]
        for labels, spec in chat:
            assert ("affinity" in spec) == (bound and labels["app.kubernetes.io/component"] != "router")
        others = [spec for labels, spec in _pods(files) if labels not in [c for c, _ in chat]]
        assert others and all("affinity" not in spec for spec in others)


def test_a_leaderworkerset_binds_its_leaders_and_workers():
    """A pool written with `together` binds both templates of its LeaderWorkerSet (a one-node pair
    never has an instance wider than the node, so this is the pool builder's own contract, on the
    405B's two-node instance)."""
    from planner.app.plan import plan
    from planner.report import k8s
    from pricing.chips import get_chip
    from tests.test_launch import request

    pool = plan(request("llama-3.1-405b", "h100", 16, 32768)).best
    options = k8s.K8sOptions(image=k8s.default_image(load()), hf_token_secret="hf", defaults=load())
    resources, _ = k8s.pool_manifests("big", pool, get_chip("h100"), options, together=("big", "other"))
    (lws,) = [r for r in resources if r["kind"] == "LeaderWorkerSet"]
    validate(lws)
    lwt = lws["spec"]["leaderWorkerTemplate"]
    for template in (lwt["leaderTemplate"], lwt["workerTemplate"]):
        (term,) = template["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == HOSTNAME and _selects(term["labelSelector"], template["metadata"]["labels"])
        assert _selects(term["labelSelector"], {"app.kubernetes.io/instance": "other"})
    alone, _ = k8s.pool_manifests("big", pool, get_chip("h100"), options)
    assert "affinity" not in str(alone)


def test_with_rdma_the_one_node_warning_names_the_nic_not_tcp(tmp_path, capsys):
    """Where CUDA IPC between the pods is refused, UCX falls back to the best transport it has: the
    RDMA device --rdma gives (ai-dynamo/nixl#1195), else TCP."""
    code = main([*PD, "--requests-per-second", ONE_NODE, "--emit", "k8s", "-o", str(tmp_path / "rdma"),
                 "--router-image", ROUTER_IMAGE, "--rdma", "rdma/rdma_shared_device_a=1", "--hf-token-secret", "hf"])
    text = "".join(capsys.readouterr())
    assert code == 0 and text.count(WARNING) == 1
    assert "falls back to the NIC's RDMA device (--rdma), at the NIC's speed" in text and "TCP" not in text


def test_the_review_page_shows_the_manifests_emit_writes(tmp_path, capsys):
    """`--format html` shows each pool's manifests as `--emit k8s` writes them (planner/report/html.py
    `manifests`): the one-node chat service's two pools bound to one node, the split one's not."""
    from tests.test_disagg_plan import SPLIT

    split = tmp_path / "split.yaml"
    split.write_text(SPLIT)
    example = Path(__file__).resolve().parents[1] / "scenarios" / "disaggregated-chat-h200-b200.yaml"
    for path, terms in ((example, 2), (split, 0)):
        page = tmp_path / f"{path.stem}.html"
        assert main(["scenario", str(path), "--format", "html", "-o", str(page)]) == 0, capsys.readouterr().err
        assert page.read_text().count(HOSTNAME) == terms
