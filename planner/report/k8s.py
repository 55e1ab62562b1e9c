"""Kubernetes manifests of a plan or a scenario: built as dicts, dumped once (`--emit k8s -o DIR`).

Per pool:
  Deployment (apps/v1)                 instances within one node: one pod per instance, asking for
                                       exactly its GPUs (requests = limits)
  LeaderWorkerSet                      instances larger than a node (kubernetes-sigs/lws, API
  (leaderworkerset.x-k8s.io/v1)        leaderworkerset.x-k8s.io/v1): one group per instance, a pod
                                       per node, each asking for the GPUs its node gives; the leader
                                       runs the head's command, the workers the others' (vLLM's
                                       multi-node launch, planner/app/serve.py), the addresses
                                       from the variables LWS sets (LWS_LEADER_ADDRESS,
                                       LWS_WORKER_INDEX)
  Service (v1)                         the pool's API port (the leaders of a LeaderWorkerSet)
  InferencePool                        with the llm-d target: the pool behind llm-d's scheduler
  (inference.networking.k8s.io/v1)     (the Gateway API inference extension's resource; its
                                       endpoint picker is deployed with llm-d's own chart)
A disaggregated service is two such pools, its prefill pool and its decode pool, each
with its role's own `vllm serve` arguments (`--kv-transfer-config` with NixlConnector and its
kv_role, as the plan prints them) and its NIXL side channel (VLLM_NIXL_SIDE_CHANNEL_HOST the pod's
own IP from the downward API, which the other side reaches; VLLM_NIXL_SIDE_CHANNEL_PORT the
release's base port, free in every pod's own network namespace), plus the router the plan names:
  Deployment + Service <service>-router  vLLM's documented proxy (toy_proxy_server.py, fetched by an
                                         init container: defaults kubernetes.router_script), given
                                         the two pools' Services as its prefiller and decoder hosts;
                                         it hands each request to a prefill pod, then to a decode
                                         pod with the kv_transfer_params the prefill pod returned
Every pod: the exact `vllm serve` arguments of the plan, a node selector on the label that names the
GPU (NODE_LABEL: GPU feature discovery's nvidia.com/gpu.product, the AMD node labeller's
amd.com/gpu.device-id; its value the chip registry's gpu_product_label, or `--node-selector`; a chip
whose value no public source gives needs `--node-selector`, never a guess), /dev/shm in memory,
the model cache volume, probes on vLLM's /health (200 once the engine serves, 503 when it died:
vllm/entrypoints/serve/instrumentator/health.py), and a Hugging Face token only as a reference to a
Secret the user names (secretKeyRef), never a value.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from planner import defaults
from planner.app.serve import Placeholder
from planner.kinds import Role
from pricing.errors import InputError, mention

LWS_API = "leaderworkerset.x-k8s.io/v1"
INFERENCE_POOL_API = "inference.networking.k8s.io/v1"
LEADER_ADDRESS = Placeholder("$(LWS_LEADER_ADDRESS)")  # LWS sets it in every pod of a group; Kubernetes expands
# $(VAR) in args
WORKER_INDEX = "LWS_WORKER_INDEX"
GPU_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}  # the device plugins' resource names
# the node label whose value names the GPU: NVIDIA GPU feature discovery's product label
# (k8s-device-plugin internal/lm/resource.go), the AMD node labeller's PCI device ID (ROCm/k8s-device-plugin
# cmd/k8s-node-labeller/main.go; its product-name label comes from the board's FRU data and varies by board)
NODE_LABEL = {"nvidia": "nvidia.com/gpu.product", "amd": "amd.com/gpu.device-id"}
CACHE_MOUNT = "/root/.cache/huggingface"  # HF_HOME of the vllm/vllm-openai image (runs as root)


@dataclass(frozen=True)
class K8sOptions:
    """What the manifests are built with; every value a user may change has an option."""

    image: str
    model_source: str | None = None  # what the pods serve instead of the plan's model name
    hf_token_secret: str | None = None  # a Secret holding the Hugging Face token (key `token`)
    model_cache_claim: str | None = None  # a PersistentVolumeClaim for the model cache (else emptyDir)
    namespace: str | None = None
    target: str = "plain"  # plain | llm-d
    epp_port: int = 9002
    node_selector: tuple[tuple[str, str], ...] | None = None  # --node-selector: replaces the registry's label;
    # () schedules on any node with the GPU resource (--node-selector none)
    router_script: str | None = None  # where a disaggregated service's router fetches vLLM's proxy


# Kubernetes' name rules (k8s.io/apimachinery pkg/util/validation/validation.go): a DNS-1123 label
# (IsDNS1123Label: namespaces, ValidateNamespaceName), a DNS-1123 subdomain (IsDNS1123Subdomain:
# Secrets, PersistentVolumeClaims, Deployments), a label key's name part and a label value
# (IsQualifiedName, IsValidLabelValue).
LABEL_RULE = "at most 63 characters of a-z, 0-9 and '-', beginning and ending with a letter or digit"
SUBDOMAIN_RULE = "at most 253 characters: labels of a-z, 0-9 and '-' (each beginning and ending with a letter or " \
                 "digit) joined by '.'"
LABEL_VALUE_RULE = "at most 63 characters of A-Z, a-z, 0-9, '-', '_' and '.', beginning and ending with a letter or " \
                   "digit, or empty"
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_MAX, SUBDOMAIN_MAX = 63, 253
CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # control characters (a newline among them): no value of a manifest holds one


def is_label(text: str) -> bool:
    return len(text) <= LABEL_MAX and DNS1123_LABEL.fullmatch(text) is not None


def is_subdomain(text: str) -> bool:
    return len(text) <= SUBDOMAIN_MAX and DNS1123_SUBDOMAIN.fullmatch(text) is not None


def _label_key(key: str) -> bool:
    """A label key: an optional DNS-1123 subdomain prefix and '/', then a name (IsQualifiedName)."""
    prefix, slash, name = key.rpartition("/")
    return ((not slash or is_subdomain(prefix)) and len(name) <= LABEL_MAX
            and QUALIFIED.fullmatch(name) is not None)


def _label_value(value: str) -> bool:
    return value == "" or (len(value) <= LABEL_MAX and QUALIFIED.fullmatch(value) is not None)


def checked(options: K8sOptions) -> K8sOptions:
    """The options, each value the API server checks checked as it does, before anything is planned
    or written: the namespace a DNS-1123 label, the Secret and the claim DNS-1123 subdomains, the
    node selector's keys and values label keys and values, the image and the router script free of
    spaces and control characters (a newline would end the YAML value), the model source free of
    control characters and not beginning with '-' (`vllm serve` would read it as a flag)."""
    names = (("namespace", options.namespace, is_label, LABEL_RULE),
             ("hf_token_secret", options.hf_token_secret, is_subdomain, SUBDOMAIN_RULE),
             ("model_cache_claim", options.model_cache_claim, is_subdomain, SUBDOMAIN_RULE))
    for field, value, rule, words in names:
        if value is not None and not rule(value):
            raise InputError(field, f"{value!r} is not a Kubernetes name", f"give {words}")
    for field, value, spaces in (("image", options.image, False), ("model_source", options.model_source, True),
                                 ("router_script", options.router_script, False)):
        if value is not None and (not value or CONTROL.search(value) or (not spaces and " " in value)):
            raise InputError(field, f"{value!r} is empty or holds a control character{'' if spaces else ' or a space'}",
                             "give the value on one line" + ("" if spaces else ", without spaces"))
    if options.model_source is not None and options.model_source.startswith("-"):
        raise InputError("model_source", f"{options.model_source!r} begins with '-': `vllm serve` would read it "
                         "as a flag", "give a Hugging Face id or a path, e.g. ./" + options.model_source)
    for key, value in options.node_selector or ():
        if not _label_key(key):
            raise InputError("node_selector", f"{key!r} is not a label key",
                             f"give [a DNS subdomain and '/'] a name of {LABEL_VALUE_RULE.replace(', or empty', '')}")
        if not _label_value(value):
            raise InputError("node_selector", f"{key}={value!r}: the value is not a label value",
                             f"give {LABEL_VALUE_RULE}")
    return options


def escaped(word: str) -> str:
    """A word as Kubernetes passes it on from a container's command or args: each `$` doubled, so
    that no `$(VAR)` in it is expanded (Kubernetes' $$ escape; `$(VAR)` references are expanded
    in command, args and env values: core/v1 Container.args)."""
    return word.replace("$", "$$")


def default_image() -> str:
    return str(defaults.value("kubernetes.image"))


def _name(text: str) -> str:
    """A DNS-1123 label from a pool's name."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:50].strip("-")
    return name or "pool"


DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # a Service's name (ValidateServiceName: IsDNS1035Label)


def resource_names(names: list[str]) -> dict[str, str]:
    """Each pool's or router's name as its resources' (and file's) name, before anything is
    written: two that become one Kubernetes name are refused, naming them (`chat_a`, `chat-a` and
    `Chat.A` are all `chat-a`), and so is a name a Service cannot take (a DNS-1035 label: it begins
    with a letter)."""
    same: dict[str, list[str]] = {}
    for name in names:
        same.setdefault(_name(name), []).append(name)
    for resource, named in same.items():
        if len(named) > 1:
            raise InputError("service", f"{', '.join(map(repr, named))} are all {resource}.yaml as Kubernetes names "
                             "(lower case a-z, 0-9 and '-')", "rename the services so that they differ in letters or "
                             "digits, not only in case or punctuation")
        if not DNS1035_LABEL.fullmatch(resource):
            raise InputError("service", f"{named[0]!r} is {resource!r} as a Kubernetes name, which a Service cannot "
                             "take", "rename it to begin with a letter (a Service's name is a DNS-1035 label: a-z, "
                             "0-9 and '-', beginning with a letter)")
    return {name: _name(name) for name in names}


def _label(chip) -> str | None:
    """The value of the chip's node label (NODE_LABEL), from the chip registry's gpu_product_label."""
    from pricing.registry import load

    entry = load().chip_file(chip.id)["chip"].get("gpu_product_label") or {}
    return None if entry.get("value") is None else str(entry["value"])


def unlabelled(chip) -> InputError | None:
    """Why the manifests of `chip` need --node-selector (no public value of its node label is known:
    the registry's null, its `how` saying why), or None."""
    from pricing.registry import load

    if _label(chip) is not None:
        return None
    entry = load().chip_file(chip.id)["chip"].get("gpu_product_label") or {}
    why = entry.get("how", "the chip registry has no gpu_product_label for it")
    key, resource = NODE_LABEL[chip.vendor], GPU_RESOURCE[chip.vendor]
    return InputError("node_selector", f"no {key} value is known for {chip.id} ({why})",
                      f"give the label your {chip.id} nodes carry, e.g. {mention('node_selector')} {key}=VALUE "
                      f"(`kubectl get nodes --show-labels`), or {mention('node_selector')} none for any node with "
                      f"{resource}")


def _gpu(chip, options: K8sOptions) -> tuple[str, dict]:
    """The GPU resource and the node selector of a chip: `--node-selector` when given, else the
    vendor's label (NODE_LABEL) at the chip registry's gpu_product_label."""
    if options.node_selector is not None:
        return GPU_RESOURCE[chip.vendor], dict(options.node_selector)
    problem = unlabelled(chip)
    if problem is not None:
        raise problem
    return GPU_RESOURCE[chip.vendor], {NODE_LABEL[chip.vendor]: _label(chip)}


def node_selector(values: tuple[str, ...]) -> tuple[tuple[str, str], ...] | None:
    """`--node-selector KEY=VALUE` (repeat), or `none`: the pods' node selector instead of the registry's."""
    if not values:
        return None
    if values == ("none",):
        return ()
    out = []
    for text in values:
        key, eq, value = text.partition("=")
        if not eq or not key or "none" in values:
            raise InputError("node_selector", f"{text!r} is not KEY=VALUE",
                             "give a node label, e.g. nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, or none alone")
        out.append((key, value))
    return tuple(out)


def _leader_args(serve, model: str) -> list[str]:
    """`vllm serve`'s arguments in a leader's pod (a plan's `Serve`, planner/app/serve.py): the
    model as the pods get it, the API on the pod's own port, the head's address from LWS."""
    out = list(serve.args(head=LEADER_ADDRESS, model=model, endpoint=False))
    out[1:1] = ["--host", defaults.value("launch.host"), "--port", str(defaults.value("launch.port"))]
    return [_pod_word(a) for a in out]


def _pod_word(arg: str) -> str:
    """A word of a container's args: escaped for Kubernetes' $(VAR) expansion (`escaped`) but for
    the references this tool writes (`Placeholder`: LWS's variables)."""
    return str(arg) if isinstance(arg, Placeholder) else escaped(arg)


def _worker_command(serve, model: str) -> tuple[list[str], list[str]]:
    """A worker's container command and args: its rank from LWS_WORKER_INDEX. A node rank is the
    index itself (Kubernetes expands $(VAR) in args); a data-parallel start rank is the index times
    the ranks per node, which needs the shell's arithmetic."""
    join = serve.join
    if not join.shell_rank:
        out = serve.args(LEADER_ADDRESS, Placeholder(f"$({WORKER_INDEX})"), model, endpoint=False)
        return ["vllm", "serve"], [_pod_word(a) for a in out]
    # $$ is Kubernetes' escape of $: the shell gets $((...)) and ${LWS_LEADER_ADDRESS}, each other word
    # in the shell's quotes (shlex.quote) with its $ doubled for Kubernetes
    out = serve.args(Placeholder("${LWS_LEADER_ADDRESS}"), Placeholder(f"$$(({WORKER_INDEX}*{join.ranks_per_index}))"),
                     model, endpoint=False)
    return ["sh", "-c"], [" ".join(["exec", "vllm", "serve", *(_shell_word(a) for a in out)])]


def _shell_word(arg: str) -> str:
    """A word of a `sh -c` line in a container's args: the shell's quotes, then Kubernetes' escape."""
    import shlex

    return str(arg) if isinstance(arg, Placeholder) else escaped(shlex.quote(arg))


SIDE_CHANNEL_HOST, SIDE_CHANNEL_PORT = "VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_NIXL_SIDE_CHANNEL_PORT"


def _launch_env(env: dict[str, str]) -> list[dict]:
    """A command's environment as a pod's: its GPUs are the device plugin's (no CUDA_VISIBLE_DEVICES);
    the NIXL side channel listens on the pod's own IP (downward API status.podIP) at the release's
    base port (each pod has its own network namespace, so the plan's per-node port ranges are not
    needed); anything else as the plan sets it."""
    from planner.app.disagg_launch import side_channel_base

    out = []
    for key, value in env.items():
        if key == "CUDA_VISIBLE_DEVICES":
            continue
        if key == SIDE_CHANNEL_HOST:
            out.append({"name": key, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
        elif key == SIDE_CHANNEL_PORT:
            out.append({"name": key, "value": str(side_channel_base())})
        else:
            out.append({"name": key, "value": _pod_word(value)})  # env values are expanded too
    return out


def _container(name: str, command: list[str], args: list[str], gpus: int, resource: str, options: K8sOptions,
               serves_api: bool, launch_env: dict[str, str] | None = None) -> dict:
    env = [{"name": "HF_HOME", "value": CACHE_MOUNT}, *_launch_env(launch_env or {})]
    if options.hf_token_secret:
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": options.hf_token_secret,
                                                                         "key": "token"}}})
    container = {
        "name": name, "image": options.image, "command": command, "args": args, "env": env,
        "resources": {"requests": {resource: gpus}, "limits": {resource: gpus}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                         {"name": "model-cache", "mountPath": CACHE_MOUNT}],
    }
    if serves_api:
        port = int(defaults.value("launch.port"))
        probe = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10}
        container["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
        container["startupProbe"] = probe | {"failureThreshold": int(defaults.value("kubernetes.startup_probes"))}
        container["readinessProbe"] = probe | {"failureThreshold": 3}
        container["livenessProbe"] = probe | {"failureThreshold": 3}
    return container


def _pod(container: dict, selector: dict, options: K8sOptions, labels: dict) -> dict:
    cache = ({"persistentVolumeClaim": {"claimName": options.model_cache_claim}} if options.model_cache_claim
             else {"emptyDir": {}})
    spec = {"containers": [container],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}, {"name": "model-cache", **cache}]}
    if selector:
        spec["nodeSelector"] = selector
    return {"metadata": {"labels": labels}, "spec": spec}


def _meta(name: str, labels: dict, options: K8sOptions) -> dict:
    meta = {"name": name, "labels": labels}
    if options.namespace:
        meta["namespace"] = options.namespace
    return meta


def pool_manifests(pool_name: str, pool, chip, options: K8sOptions) -> tuple[list[dict], list[str]]:
    """The resources of one pool (a PoolPlan with its instances' commands) and notes on them. The
    pool's role (aggregated, or a disaggregated role) is its `app.kubernetes.io/component` label."""
    notes = []
    name = _name(pool_name)
    first = pool.instances[0]
    labels = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": name,
              "app.kubernetes.io/component": str(first.role), "app.kubernetes.io/managed-by": "deployment-planner"}
    resource, selector = _gpu(chip, options)
    if not selector:
        notes.append(f"{name}: no node selector ({mention('node_selector')} none): the pods go to any node with "
                     f"{resource}")
    serves = [c.launch.serve for c in first.commands]
    envs = [c.env for c in first.commands]
    model = options.model_source or serves[0].model.name
    if options.model_source is None and serves[0].model.placeholder:
        raise InputError("model_source", f"the weights' location is needed ({mention('model')} named a config file "
                         "with no weights beside it)", "give the folder or Hugging Face id the pods serve")
    port = int(defaults.value("launch.port"))
    per_pod = [len(s.gpus) for s in first.slots]
    leader_args = _leader_args(serves[0], model)
    head = _container("vllm", ["vllm", "serve"], leader_args, per_pod[0], resource, options, serves_api=True,
                      launch_env=envs[0])
    out = []
    if len(serves) == 1:
        out.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(name, labels, options),
                    "spec": {"replicas": pool.replicas, "selector": {"matchLabels": labels},
                             "template": _pod(head, selector, options, labels)}})
        service_selector = labels
    else:
        if len(set(per_pod)) != 1:
            raise InputError("placement", f"{name}: the nodes of one instance give {per_pod} GPUs",
                             "a LeaderWorkerSet asks every worker for the same GPUs")
        command, worker_args = _worker_command(serves[1], model)
        worker = _container("vllm", command, worker_args, per_pod[1], resource, options, serves_api=False,
                            launch_env=envs[1])
        out.append({"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": _meta(name, labels, options),
                    "spec": {"replicas": pool.replicas, "startupPolicy": "LeaderCreated",
                             "leaderWorkerTemplate": {
                                 "size": len(serves), "restartPolicy": "RecreateGroupOnPodRestart",
                                 "leaderTemplate": _pod(head, selector, options, labels),
                                 "workerTemplate": _pod(worker, selector, options, labels)}}})
        service_selector = labels | {"leaderworkerset.sigs.k8s.io/worker-index": "0"}  # the leaders serve the API
    out.append({"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, labels, options),
                "spec": {"selector": service_selector,
                         "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}]}})
    if options.target == "llm-d" and first.role != Role.AGGREGATED:
        raise no_llm_d(name)
    if options.target == "llm-d":
        out.append({"apiVersion": INFERENCE_POOL_API, "kind": "InferencePool", "metadata": _meta(name, labels, options),
                    "spec": {"selector": {"matchLabels": service_selector}, "targetPorts": [{"number": port}],
                             "endpointPickerRef": {"name": f"{name}-epp", "port": {"number": options.epp_port}}}})
        notes.append(f"{name}: the InferencePool's endpoint picker is the Service {name}-epp (port "
                     f"{options.epp_port}), deployed with llm-d's inference scheduler chart")
    return out, notes


def no_llm_d(name: str) -> InputError:
    """The llm-d target and a disaggregated service: not written (never half of it)."""
    return InputError("k8s_target", f"{name}: llm-d's prefill/decode scheduling (its P/D profile handler and the "
                      "decode pods' routing sidecar) is not written by this tool",
                      f"use {mention('k8s_target')} plain: vLLM's proxy in front of the two pools")


def router_manifests(name: str, prefill: str, decode: str, options: K8sOptions) -> tuple[list[dict], list[str]]:
    """The router of a disaggregated service in front of its prefill and decode pools' Services
    (`prefill`, `decode`: their pool names): vLLM's proxy, as the plan names it (planner/report/
    disagg_launch.py `router`), on all addresses (its own default is 127.0.0.1), with a Service."""
    from planner.app.disagg_launch import ROUTER_PORT, router_host

    router = _name(name)
    if options.target == "llm-d":
        raise no_llm_d(router)
    labels = {"app.kubernetes.io/name": "vllm-router", "app.kubernetes.io/instance": router,
              "app.kubernetes.io/component": "router", "app.kubernetes.io/managed-by": "deployment-planner"}
    api = str(int(defaults.value("launch.port")))
    script = options.router_script or str(defaults.value("kubernetes.router_script"))
    path = "/router/toy_proxy_server.py"
    fetch = {"name": "fetch-proxy", "image": options.image, "command": ["python3", "-c"],
             "args": ["import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])",
                      escaped(script), path],
             "volumeMounts": [{"name": "router", "mountPath": "/router"}]}
    probe = {"httpGet": {"path": "/healthcheck", "port": "http"}, "periodSeconds": 10, "failureThreshold": 3}
    proxy = {"name": "router", "image": options.image, "command": ["python3", path],
             "args": ["--host", router_host(), "--port", str(ROUTER_PORT), "--prefiller-hosts", _name(prefill),
                      "--prefiller-ports", api, "--decoder-hosts", _name(decode), "--decoder-ports", api],
             "ports": [{"name": "http", "containerPort": ROUTER_PORT, "protocol": "TCP"}],
             "readinessProbe": probe, "livenessProbe": probe,
             "volumeMounts": [{"name": "router", "mountPath": "/router"}]}
    pod = {"metadata": {"labels": labels},
           "spec": {"initContainers": [fetch], "containers": [proxy],
                    "volumes": [{"name": "router", "emptyDir": {}}]}}
    out = [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(router, labels, options),
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": pod}},
           {"apiVersion": "v1", "kind": "Service", "metadata": _meta(router, labels, options),
            "spec": {"selector": labels, "ports": [{"name": "http", "port": ROUTER_PORT, "targetPort": "http",
                                                    "protocol": "TCP"}]}}]
    notes = [f"{router}: vLLM's toy proxy (its init container downloads {script}); llm-d's inference scheduler or "
             "Dynamo's router serve in production"]
    return out, notes


def dump(resources: list[dict]) -> str:
    """The resources as one YAML stream, each object written out in full (no anchors)."""
    import yaml

    class Plain(yaml.SafeDumper):
        def ignore_aliases(self, data) -> bool:
            return True

    return yaml.dump_all(resources, Dumper=Plain, sort_keys=False, default_flow_style=False)


def writable_folder(out_dir: str) -> tuple[Path, Path]:
    """The folder to write (its absolute path) and its parent, or an error: not a folder, a place
    that cannot be written, or a folder that is not the tool's to replace (it is replaced whole:
    one holding anything but .yaml files, or the working folder or one above it, is refused rather
    than removed)."""
    target = Path(os.path.abspath(out_dir))
    if target.exists() and not target.is_dir():
        raise InputError("output_dir", f"{out_dir} is not a folder", "name a folder (it is created)")
    cwd = Path.cwd()
    if target == cwd or target in cwd.parents:
        raise InputError("output_dir", f"{out_dir} is the working folder or holds it, and the folder is replaced "
                         "whole", f"name a folder of its own for the manifests, e.g. {mention('output_dir')} k8s")
    if target.is_dir() and not target.is_symlink():
        other = sorted(p.name for p in target.iterdir() if p.suffix != ".yaml" or not p.is_file() or p.is_symlink())
        if other:
            raise InputError("output_dir", f"{out_dir} holds {', '.join(other[:3])}{' ...' if len(other) > 3 else ''}"
                             ", not manifests, and the folder is replaced whole", "name a folder of its own for the "
                             "manifests (a new one, or one holding only .yaml files)")
    parent = target.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise InputError("output_dir", f"cannot write into {parent}", "name a folder in a place you can write")
    return target, parent


def write(files: dict[str, list[dict]], out_dir: str) -> list[Path]:
    """The folder `out_dir` holding exactly each file's resources, swapped in whole or not at all
    (planner/report/atomic.py: what was in it before is replaced, never mixed with the new files)."""
    from planner.report.atomic import write_folder

    target, _ = writable_folder(out_dir)
    write_folder(target, {file: (lambda r=resources: dump(r)) for file, resources in files.items()}, "output_dir")
    return [Path(out_dir) / file for file in files]  # as the user named the folder
