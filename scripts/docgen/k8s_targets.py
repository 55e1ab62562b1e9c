"""docs/launch.md's `k8s-targets` section: one plan emitted for each Kubernetes target (plain, a
multi-node LeaderWorkerSet, Dynamo, llm-d), each its command, what `plan` printed (the files written and
the notes) and an excerpt of one file it wrote, as the tool writes them now (`python scripts/docs.py
--only k8s-targets` rewrites it)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts" / "docgen")]

from examples import run  # noqa: E402  (the in-process `plan` runner of every docs example)

COLUMNS = 120
PD = ("--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200", "--requests-per-second", "80",
      "--ttft-ms", "1500", "--tpot-ms", "30", "--context-length", "8192", "--serving", "disagg")
RDMA = ("--rdma", "rdma/rdma_shared_device_a=1")
TOKEN = ("--hf-token-secret", "hf-token")


def _container(resource: dict, index: int = 0) -> dict:
    return resource["spec"]["template"]["spec"]["containers"][index]


def _plain(files: dict[str, list[dict]]) -> tuple[str, str, object]:
    deployment = files["llama-3-1-8b.yaml"][0]
    c = _container(deployment)
    return "llama-3-1-8b.yaml", "the Deployment's vLLM container", {k: c[k] for k in ("args", "resources")}


def _lws(files: dict[str, list[dict]]) -> tuple[str, str, object]:
    lws = files["llama-3-1-405b.yaml"][0]["spec"]
    worker = lws["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    return ("llama-3-1-405b.yaml", "the LeaderWorkerSet: a group of two pods, the worker's command",
            {"replicas": lws["replicas"], "leaderWorkerTemplate": {"size": lws["leaderWorkerTemplate"]["size"]},
             "workerTemplate container": {k: worker[k] for k in ("command", "args", "resources")}})


def _dynamo(files: dict[str, list[dict]]) -> tuple[str, str, object]:
    (graph,) = files["llama-3-1-8b.yaml"]
    components = [{"name": c["name"], "type": c["type"], "replicas": c["replicas"],
                   **({"args": c["podTemplate"]["spec"]["containers"][0]["args"]} if c["type"] == "decode" else {})}
                  for c in graph["spec"]["components"]]
    return "llama-3-1-8b.yaml", "the DynamoGraphDeployment's components (the decode worker's arguments)", components


def _llm_d(files: dict[str, list[dict]]) -> tuple[str, str, object]:
    pool = files["llama-3-1-8b-router.yaml"][0]
    decode = files["llama-3-1-8b-decode.yaml"][0]["spec"]["template"]
    sidecar = decode["spec"]["initContainers"][0]
    return ("llama-3-1-8b-router.yaml, llama-3-1-8b-decode.yaml",
            "the InferencePool; a decode pod's labels and routing sidecar",
            {"InferencePool spec": pool["spec"], "decode pod labels": decode["metadata"]["labels"],
             "routing sidecar": {k: sidecar[k] for k in ("image", "restartPolicy", "args")}})


TARGETS = (  # (what the plan shows, its argv after `plan`, the excerpt of what it wrote)
    ("plain: an aggregated pool, a Deployment and its Service",
     ("--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "64", "--context-length", "8192", "--emit", "k8s",
      "-o", "k8s", *TOKEN),
     _plain),
    ("plain, multi-node: an instance larger than a node, a LeaderWorkerSet",
     ("--model", "llama-3.1-405b", "--chip", "h100", "--concurrency", "16", "--context-length", "32768", "--emit",
      "k8s", "-o", "k8s", *TOKEN, *RDMA), _lws),
    ("dynamo: a P/D plan as one DynamoGraphDeployment (TAG: a vllm-runtime tag whose vLLM is 0.33)",
     (*PD, "--emit", "k8s", "-o", "k8s", "--k8s-target", "dynamo", "--image",
      "nvcr.io/nvidia/ai-dynamo/vllm-runtime:TAG", *TOKEN, *RDMA), _dynamo),
    ("llm-d: a P/D plan as llm-d runs it, role-labelled pools behind an InferencePool and llm-d's scheduler",
     (*PD, "--emit", "k8s", "-o", "k8s", "--k8s-target", "llm-d", *TOKEN, *RDMA), _llm_d),
)


def emitted(argv: tuple[str, ...]) -> tuple[list[str], dict[str, list[dict]]]:
    """`plan ARGV` run in a fresh folder at COLUMNS columns: the lines it printed about the files
    (`wrote`, `note:`, `warning:`), and the files it wrote there (-o k8s), each its resources."""
    with tempfile.TemporaryDirectory() as folder:
        code, out, err = run(argv, COLUMNS, Path(folder))
        files = {p.name: [d for d in yaml.safe_load_all(p.read_text()) if d]
                 for p in sorted(Path(folder, "k8s").glob("*.yaml"))}
    if code != 0:
        raise SystemExit(f"plan {' '.join(argv)} exited {code}: {err}")
    lines = [line.rstrip() for line in (out + err).splitlines()
             if line.startswith(("wrote ", "note: ", "warning: "))]
    return lines, files


def section() -> str:
    parts = []
    for title, argv, excerpt in TARGETS:
        lines, files = emitted(argv)
        names, what, shown = excerpt(files)
        text = yaml.safe_dump(shown, sort_keys=False, default_flow_style=None, width=COLUMNS).rstrip()
        parts.append(f"**{title}**\n\n```console\n$ plan {' '.join(argv)}\n" + "\n".join(lines) + "\n```\n\n"
                     f"```yaml\n# k8s/{names}: {what}\n{text}\n```\n")
    return "\n".join(parts)
