#!/usr/bin/env python3
"""Write the published OpenAPI schemas of the custom resources the Kubernetes manifests use
(tests/fixtures/crds/*.json), so the tests validate every emitted manifest offline.

    python scripts/crd_schemas.py LWS_GIT_DIR GIE_GIT_DIR DYNAMO_GIT_DIR KEDA_GIT_DIR

Each argument is a git directory of the public repository (a bare clone is enough; `-` keeps that
repository's files as they are):
kubernetes-sigs/lws (LeaderWorkerSet) and kubernetes-sigs/gateway-api-inference-extension
(InferencePool, the resource llm-d's scheduler serves), ai-dynamo/dynamo (DynamoGraphDeployment,
v1beta1 only: the version its vLLM examples use; read at a commit of its main branch, the copy at hand
having no release tags: the fork wxsms/dynamo's snapshot, whose history is upstream's), kedacore/keda
(ScaledObject, the autoscaler `--autoscaler keda` writes). The CRD file
is read at the release tag (or commit) named below; the schema of each served version is kept as
published, without its `description` fields (prose, not constraints), with the repository, tag,
commit and path it came from.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "crds"
CRDS = [  # (argument index, repository, tag or commit, path, the versions kept: None for every served one)
    (0, "kubernetes-sigs/lws", "v0.10.0", "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml", None),
    (1, "kubernetes-sigs/gateway-api-inference-extension", "v1.6.0",
     "config/crd/bases/inference.networking.k8s.io_inferencepools.yaml", None),
    (2, "ai-dynamo/dynamo", "2a6da14c83617f5412caba5777dbf0e2399e9c5f",
     "deploy/operator/config/crd/bases/nvidia.com_dynamographdeployments.yaml", ("v1beta1",)),
    (3, "kedacore/keda", "v2.20.2", "config/crd/bases/keda.sh_scaledobjects.yaml", None),
]


def _strip(node):
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def main(argv: list[str]) -> int:
    if len(argv) != len(CRDS):
        print(__doc__)
        return 2
    for index, repo, tag, path, versions in CRDS:
        if argv[index] == "-":  # that repository not at hand: its file is kept as it is
            continue
        git = ["git", f"--git-dir={argv[index]}"]
        commit = subprocess.check_output([*git, "rev-list", "-n", "1", tag], text=True).strip()
        crd = yaml.safe_load(subprocess.check_output([*git, "show", f"{tag}:{path}"], text=True))
        spec = crd["spec"]
        for version in spec["versions"]:
            if not version.get("served") or (versions and version["name"] not in versions):
                continue
            out = {"group": spec["group"], "kind": spec["names"]["kind"], "version": version["name"],
                   "apiVersion": f"{spec['group']}/{version['name']}",
                   "source": {"repository": f"https://github.com/{repo}", "tag": tag, "commit": commit, "path": path},
                   "how": "scripts/crd_schemas.py: spec.versions[].schema.openAPIV3Schema of the CRD, its "
                          "description fields dropped",
                   "schema": _strip(version["schema"]["openAPIV3Schema"])}
            name = OUT / f"{spec['names']['plural']}.{spec['group']}_{version['name']}.json"
            OUT.mkdir(parents=True, exist_ok=True)
            tmp = name.with_suffix(".tmp")
            tmp.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
            tmp.replace(name)
            print(f"wrote {name.relative_to(ROOT)} ({name.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
