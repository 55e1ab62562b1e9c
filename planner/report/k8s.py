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
  InferencePool and its endpoint       with the llm-d target: the pool behind llm-d's scheduler
  picker                               (planner/report/k8s_llmd.py; a P/D service's two pools share one,
                                       its pods labelled by llm-d role, the decode pods' routing sidecar
                                       in front of vLLM)
A disaggregated service is two such pools, its prefill pool and its decode pool, each
with its role's own `vllm serve` arguments (`--kv-transfer-config` with NixlConnector and its
kv_role, as the plan prints them) and its NIXL side channel (VLLM_NIXL_SIDE_CHANNEL_HOST the pod's
own IP from the downward API, which the other side reaches; VLLM_NIXL_SIDE_CHANNEL_PORT the
release's base port, free in every pod's own network namespace), plus the router the plan names:
  Deployment + Service <service>-router  vLLM's documented proxy (toy_proxy_server.py: from --router-image,
                                         or fetched by an init container only with --router-fetch
                                         and run only if its SHA-256 is the one given), given
                                         the two pools' Services as its prefiller and decoder hosts;
                                         it hands each request to a prefill pod, then to a decode
                                         pod with the kv_transfer_params the prefill pod returned
                                         (with the llm-d target: llm-d's scheduler and the decode
                                         pods' sidecar instead; with Dynamo: its frontend)
Every pod is hardened (security_context: no privilege escalation, every capability dropped but IPC_LOCK
with RDMA, seccomp RuntimeDefault; no service-account token; non-root only with --run-as-user, the default
image runs as root) and sized (PodResources: CPU and host memory per rank, the weight shards in the limit,
/dev/shm's sizeLimit), tolerates the GPU taint (or --toleration's), and a P/D or multi-node pod asks for
the RDMA device --rdma names (else NIXL and NCCL use TCP, and a note says so). A P/D service whose hand-over
the plan prices over one node's NVLink has both roles' pods bound to one node (`one_node`: required pod
affinity on kubernetes.io/hostname), in every target.
Every pod: the exact `vllm serve` arguments of the plan, a node selector on the label that names the
GPU (NODE_LABEL: GPU feature discovery's nvidia.com/gpu.product, the AMD node labeller's
amd.com/gpu.device-id; its value the chip registry's gpu_product_label, or `--node-selector`; a chip
whose value no public source gives needs `--node-selector`, never a guess), /dev/shm in memory (sized),
the model cache volume, probes on vLLM's /health (200 once the engine serves, 503 when it died:
vllm/entrypoints/serve/instrumentator/health.py), and a Hugging Face token only as a reference to a
Secret the user names (secretKeyRef), never a value.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

from planner.app.serve import Placeholder
from planner.defaults import Defaults
from planner.kinds import Role
from pricing.errors import InputError, mention

LWS_API = "leaderworkerset.x-k8s.io/v1"
DYNAMO_API = "nvidia.com/v1beta1"  # ai-dynamo/dynamo's DynamoGraphDeployment, as its vLLM examples write it
LEADER_ADDRESS = Placeholder("$(LWS_LEADER_ADDRESS)")  # LWS sets it in every pod of a group; Kubernetes expands
# $(VAR) in args
WORKER_INDEX = "LWS_WORKER_INDEX"
GPU_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}  # the device plugins' resource names
# the node label whose value names the GPU: NVIDIA GPU feature discovery's product label
# (k8s-device-plugin internal/lm/resource.go), the AMD node labeller's PCI device ID (ROCm/k8s-device-plugin
# cmd/k8s-node-labeller/main.go; its product-name label comes from the board's FRU data and varies by board)
NODE_LABEL = {"nvidia": "nvidia.com/gpu.product", "amd": "amd.com/gpu.device-id"}
CACHE_MOUNT = "/root/.cache/huggingface"  # HF_HOME of the vllm/vllm-openai image (runs as root: kubernetes.image_user)
USER_CACHE_MOUNT = "/cache/huggingface"  # HF_HOME with --run-as-user: a non-root user cannot enter /root


@dataclass(frozen=True)
class K8sOptions:
    """What the manifests are built with; every value a user may change has an option."""

    image: str
    model_source: str | None = None  # what the pods serve instead of the plan's model name
    hf_token_secret: str | None = None  # a Secret holding the Hugging Face token (key `token`)
    model_cache_claim: str | None = None  # a PersistentVolumeClaim for the model cache (else emptyDir)
    namespace: str | None = None
    target: str = "plain"  # plain | llm-d | dynamo
    node_selector: tuple[tuple[str, str], ...] | None = None  # --node-selector: replaces the registry's label;
    # () schedules on any node with the GPU resource (--node-selector none)
    router_script: str | None = None  # where a disaggregated service's router fetches vLLM's proxy
    rdma: tuple[tuple[str, int], ...] = ()  # --rdma RESOURCE=N: the RDMA device of P/D and multi-node pods
    tolerations: tuple[tuple[str, str | None, str], ...] | None = None  # --toleration KEY[=VALUE]:EFFECT;
    # None: the vendor's GPU taint (kubernetes.gpu_tolerations)
    run_as_user: int | None = None  # --run-as-user UID: an image with a non-root user (the default runs as root)
    model_cache_size: str | None = None  # --model-cache-size auto: write the --model-cache-claim PVC, sized
    router_image: str | None = None  # --router-image: an image with vLLM's proxy at ROUTER_SCRIPT (docs/launch.md)
    router_fetch: str | None = None  # --router-fetch SHA256: download the proxy at start-up, checked against it
    defaults: Defaults = dataclasses.field(kw_only=True)  # the command's planner defaults (kubernetes.*, launch.*)


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
                                 ("router_script", options.router_script, False),
                                 ("router_image", options.router_image, False)):
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


def default_image(defaults: Defaults) -> str:
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
    """The value of the chip's node label (NODE_LABEL), from the chip registry's gpu_product_label (its
    file as shipped: an overlay lays values, never a chip's file)."""
    from pricing.registry import shipped

    entry = shipped().chip_file(chip.id)["chip"].get("gpu_product_label") or {}
    return None if entry.get("value") is None else str(entry["value"])


def unlabelled(chip) -> InputError | None:
    """Why the manifests of `chip` need --node-selector (no public value of its node label is known:
    the registry's null, its `how` saying why), or None."""
    from pricing.registry import shipped

    if _label(chip) is not None:
        return None
    entry = shipped().chip_file(chip.id)["chip"].get("gpu_product_label") or {}
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
    if not values or values == ("none",):  # the default, or none at all
        return () if values else None
    out = []
    for text in values:
        key, eq, value = text.partition("=")
        if not eq or not key or "none" in values:
            raise InputError("node_selector", f"{text!r} is not KEY=VALUE",
                             "give a node label, e.g. nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, or none alone")
        out.append((key, value))
    return tuple(out)


def rdma(values: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """`--rdma RESOURCE=N` (repeat): the RDMA device resources P/D and multi-node pods ask for, as the
    cluster's device plugin names them (rdma/rdma_shared_device_a=1, nvidia.com/hostdev=1)."""
    out = []
    for text in values:
        key, eq, count = text.partition("=")
        if not eq or not key or not count.isdigit() or int(count) < 1:
            raise InputError("rdma", f"{text!r} is not RESOURCE=N",
                             "give the device plugin's resource and a count, e.g. rdma/rdma_shared_device_a=1")
        out.append((key, int(count)))
    return tuple(out)


EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")  # a taint's effects (Kubernetes core/v1 Taint)


def tolerations(values: tuple[str, ...]) -> tuple[tuple[str, str | None, str], ...] | None:
    """`--toleration KEY[=VALUE]:EFFECT` (repeat), or `none`: the pods' tolerations instead of the
    GPU's default (None without the option)."""
    if not values or values == ("none",):  # the default, or none at all
        return () if values else None
    out = []
    for text in values:
        taint, colon, effect = text.rpartition(":")
        key, eq, value = taint.partition("=")
        if not colon or not key or effect not in EFFECTS or (eq and not value):
            raise InputError("toleration", f"{text!r} is not KEY[=VALUE]:EFFECT",
                             f"give a taint to tolerate, e.g. nvidia.com/gpu:NoSchedule (EFFECT one of "
                             f"{', '.join(EFFECTS)}), or none alone")
        out.append((key, value if eq else None, effect))
    return tuple(out)


def _tolerations(chip, options: K8sOptions) -> list[dict]:
    """The pods' tolerations: --toleration's, else the vendor's GPU taint (kubernetes.gpu_tolerations);
    a toleration without a value matches the key with any value (operator Exists)."""
    given = options.tolerations
    if given is None:
        default = options.defaults.value("kubernetes.gpu_tolerations").get(chip.vendor)
        given = tolerations((default,)) if default else ()
    return [{"key": key, "operator": "Equal", "value": value, "effect": effect} if value is not None
            else {"key": key, "operator": "Exists", "effect": effect} for key, value, effect in given]


def security_context(rdma_on: bool, options: K8sOptions) -> dict:
    """A container's securityContext: no privilege escalation, every capability dropped but IPC_LOCK
    where RDMA is on (registering memory with the NIC pins it: ibv_reg_mr needs CAP_IPC_LOCK or an
    unlimited memlock), the runtime's default seccomp profile; non-root only with --run-as-user (the
    default image runs as root: kubernetes.image_user)."""
    context = {"allowPrivilegeEscalation": False,
               "capabilities": {"drop": ["ALL"], **({"add": ["IPC_LOCK"]} if rdma_on else {})},
               "seccompProfile": {"type": "RuntimeDefault"}}
    if options.run_as_user is not None:
        context |= {"runAsNonRoot": True, "runAsUser": options.run_as_user}
    return context


@dataclass(frozen=True)
class PodResources:
    """What one vLLM pod asks of its node beside the GPUs: CPU per rank (kubernetes.cpu_per_rank),
    host memory per rank (kubernetes.host_memory_per_rank) plus the connector's host buffer per rank
    and the /dev/shm tmpfs (its pages are the pod's memory); the limit adds every rank's weight
    shard, which the loader reads through host memory. Bytes; CPU in cores."""

    gpus: int
    resource: str
    cpu_request: int
    cpu_limit: int
    memory_request: int
    memory_limit: int
    shm: int
    rdma: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, rank, chip, gpus: int, rdma_devices: tuple[tuple[str, int], ...], defaults: Defaults) -> PodResources:
        """`rank`: the pool's rank bytes (planner/app/fleet.py RankBytes); `defaults`: the command's."""
        per_rank = int(defaults.value("kubernetes.host_memory_per_rank")) + rank.connector_host
        cpu = defaults.value("kubernetes.cpu_per_rank")
        shm = int(defaults.value("kubernetes.shm_size_limit")[chip.vendor])
        request = gpus * per_rank + shm
        return cls(gpus, GPU_RESOURCE[chip.vendor], gpus * int(cpu["request"]), gpus * int(cpu["limit"]), request,
                   request + gpus * rank.shard, shm, rdma_devices)

    def as_k8s(self) -> dict:
        devices = {self.resource: self.gpus, **dict(self.rdma)}
        return {"requests": {**devices, "cpu": self.cpu_request, "memory": self.memory_request},
                "limits": {**devices, "cpu": self.cpu_limit, "memory": self.memory_limit}}


def _leader_args(serve, model: str, port: int, defaults: Defaults) -> list[str]:
    """`vllm serve`'s arguments in a leader's pod (a plan's `Serve`, planner/app/serve.py): the
    model as the pods get it, the API on the pod's own `port`, the head's address from LWS."""
    out = list(serve.args(head=LEADER_ADDRESS, model=model, endpoint=False))
    out[1:1] = ["--host", defaults.value("launch.host"), "--port", str(port)]
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


def _container(name: str, command: list[str], args: list[str], resources: PodResources, options: K8sOptions,
               serves_api: bool, launch_env: dict[str, str] | None = None, shm: bool = True,
               port: int | None = None) -> dict:
    """A vLLM container; `shm`: it mounts its pod's /dev/shm volume (Dynamo's operator mounts its own);
    `port`: the API's (default launch.port)."""
    cache = CACHE_MOUNT if options.run_as_user is None else USER_CACHE_MOUNT
    env = [{"name": "HF_HOME", "value": cache}, *_launch_env(launch_env or {})]
    if resources.rdma and SIDE_CHANNEL_HOST in (launch_env or {}):  # NIXL's UCX, over the RDMA device
        env += [{"name": k, "value": str(v)} for k, v in options.defaults.value("kubernetes.rdma_env").items()]
    if options.hf_token_secret:
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": options.hf_token_secret,
                                                                         "key": "token"}}})
    container = {
        "name": name, "image": options.image, "command": command, "args": args, "env": env,
        "resources": resources.as_k8s(), "securityContext": security_context(bool(resources.rdma), options),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}] * shm + [{"name": "model-cache",
                                                                            "mountPath": cache}],
    }
    if serves_api:
        port = port or int(options.defaults.value("launch.port"))
        probe = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10}
        container["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
        container["startupProbe"] = probe | {"failureThreshold":
                                             int(options.defaults.value("kubernetes.startup_probes"))}
        container["readinessProbe"] = probe | {"failureThreshold": 3}
        container["livenessProbe"] = probe | {"failureThreshold": 3}
    return container


HOSTNAME = "kubernetes.io/hostname"  # the well-known node label, each node's own value (Kubernetes well-known labels)


def one_node(pods: dict) -> dict:
    """A pod's affinity that keeps it on the node of the pods `pods` selects (a label selector):
    required pod affinity on the node's hostname (`requiredDuringSchedulingIgnoredDuringExecution`,
    topologyKey kubernetes.io/hostname). Every pod of a P/D service whose hand-over the plan prices
    over one node's NVLink carries it, selecting both roles' pods: the first may go to any node (the
    scheduler admits a pod that matches its own term when no other pod does), each later one to that
    node, so both pools land where the plan laid them."""
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": pods, "topologyKey": HOSTNAME}]}}


def one_node_note(service: str, gpus: int, options: K8sOptions) -> str:
    """What the manifests of a P/D service handed over on one node say: the pods bound to one node,
    and what the cluster still must give for NIXL to cross that node's NVLink between two pods (CUDA
    IPC between processes of different pods, each with its own PID namespace and its own GPUs, is
    refused and UCX falls back to TCP: github.com/openucx/ucx#10070 and #11978, vllm-project/vllm#55906);
    with --rdma UCX takes the NIC's RDMA device instead (ai-dynamo/nixl#1195)."""
    fallback = (f"the NIC's RDMA device ({mention('rdma')}), at the NIC's speed" if options.rdma
                else "TCP")
    return (f"warning: {_name(service)}: the plan hands the KV cache over on one node's NVLink, so its prefill and "
            f"decode pods ({gpus} GPUs) are bound to one node (pod affinity on {HOSTNAME}); NIXL crosses NVLink "
            "between two pods by CUDA IPC, which (without NVIDIA IMEX fabric handles) needs them to share a PID "
            f"namespace and see each other's GPUs: otherwise UCX falls back to {fallback}")


def _pod(container: dict, selector: dict, options: K8sOptions, labels: dict, tolerate: list[dict],
         shm: int | None, sidecars: tuple[dict, ...] = (), affinity: dict | None = None) -> dict:
    """A vLLM pod; `shm` None: no /dev/shm volume of its own (Dynamo's operator mounts one); `sidecars`:
    native sidecars (init containers with restartPolicy Always), started before vLLM; `affinity`: where
    it must run beside other pods (`one_node`)."""
    cache = ({"persistentVolumeClaim": {"claimName": options.model_cache_claim}} if options.model_cache_claim
             else {"emptyDir": {}})
    dshm = [] if shm is None else [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}}]
    spec = {"automountServiceAccountToken": False, "containers": [container],
            "volumes": [*dshm, {"name": "model-cache", **cache}]}
    if sidecars:
        spec["initContainers"] = list(sidecars)
    if selector:
        spec["nodeSelector"] = selector
    if tolerate:
        spec["tolerations"] = tolerate
    if affinity:
        spec["affinity"] = affinity
    return {"metadata": {"labels": labels}, "spec": spec}


def _meta(name: str, labels: dict, options: K8sOptions) -> dict:
    meta = {"name": name, "labels": labels}
    if options.namespace:
        meta["namespace"] = options.namespace
    return meta


def pool_manifests(pool_name: str, pool, chip, options: K8sOptions, service: str | None = None,
                   together: tuple[str, ...] = ()) -> tuple[list[dict], list[str]]:
    """The resources of one pool (a PoolPlan with its instances' commands) and notes on them. The
    pool's role (aggregated, or a disaggregated role) is its `app.kubernetes.io/component` label.
    With the llm-d target (planner/report/k8s_llmd.py) an aggregated pool gets its InferencePool and
    endpoint picker; a role pool of `service` its llm-d role label, no Service of its own (the
    service's InferencePool selects its pods), and, a decode pool, the routing sidecar on the API
    port, vLLM behind it. `together`: the pools (their names, this one among them) whose pods the plan
    lays on one node, each pod bound there (`one_node`, by their `app.kubernetes.io/instance`)."""
    from planner.app.fleet import rank_bytes
    from planner.report import k8s_llmd

    notes = []
    name = _name(pool_name)
    first = pool.instances[0]
    labels = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": name,
              "app.kubernetes.io/component": str(first.role), "app.kubernetes.io/managed-by": "deployment-planner"}
    llm_d_role = options.target == "llm-d" and first.role != Role.AGGREGATED
    if llm_d_role:
        if service is None:
            raise ValueError(f"{name}: an llm-d role pool is written with its service (llm_d_pd_manifests)")
        labels |= k8s_llmd.role_labels(first.role, _name(service))
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
    defaults = options.defaults
    port = int(defaults.value("launch.port"))
    vllm_port = k8s_llmd.decode_vllm_port(defaults) if llm_d_role and first.role == Role.DECODE else port
    sidecars = (k8s_llmd.routing_sidecar(port, security_context(False, options), defaults),) \
        if vllm_port != port else ()
    per_pod = [len(s.gpus) for s in first.slots]
    crosses = first.role != Role.AGGREGATED or len(serves) > 1  # a hand-over or a group across pods
    if crosses and not options.rdma:
        notes.append(f"{name}: " + ("the plan prices the KV hand-over at its link's speed (the report's hand-over "
                                     "line), but these pods ask for no RDMA device: NIXL between them falls back to TCP"
                                     if first.role != Role.AGGREGATED else "the pods of one instance ask for no RDMA "
                                     "device: NCCL between its nodes uses TCP sockets")
                     + f" unless {mention('rdma')} RESOURCE=N names the cluster's RDMA resource")
    pod_rdma = options.rdma if crosses else ()
    tolerate = _tolerations(chip, options)
    rank = rank_bytes(pool)
    resources = PodResources.of(rank, chip, per_pod[0], pod_rdma, defaults)
    leader_args = _leader_args(serves[0], model, vllm_port, defaults)
    head = _container("vllm", ["vllm", "serve"], leader_args, resources, options, serves_api=True,
                      launch_env=envs[0], port=vllm_port)
    affinity = one_node({"matchExpressions": [{"key": "app.kubernetes.io/instance", "operator": "In",
                                               "values": [_name(p) for p in together]}]}) if together else None
    notes += cache_notes(name, model, rank.checkpoint, options)
    out = []
    if len(serves) == 1:
        out.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(name, labels, options),
                    "spec": {"replicas": pool.replicas, "selector": {"matchLabels": labels},
                             "template": _pod(head, selector, options, labels, tolerate, resources.shm,
                                              sidecars, affinity)}})
        service_selector = labels
    else:
        if llm_d_role:
            raise InputError("k8s_target", f"{name}: an instance spans {len(serves)} nodes, and multi-node P/D "
                             "pools are not written for the llm-d target", f"use {mention('k8s_target')} plain "
                             "(a LeaderWorkerSet per role and vLLM's proxy)")
        if len(set(per_pod)) != 1:
            raise InputError("placement", f"{name}: the nodes of one instance give {per_pod} GPUs",
                             "a LeaderWorkerSet asks every worker for the same GPUs")
        command, worker_args = _worker_command(serves[1], model)
        worker = _container("vllm", command, worker_args, resources, options, serves_api=False,
                            launch_env=envs[1])
        out.append({"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": _meta(name, labels, options),
                    "spec": {"replicas": pool.replicas, "startupPolicy": "LeaderCreated",
                             "leaderWorkerTemplate": {
                                 "size": len(serves), "restartPolicy": "RecreateGroupOnPodRestart",
                                 "leaderTemplate": _pod(head, selector, options, labels, tolerate, resources.shm,
                                                        affinity=affinity),
                                 "workerTemplate": _pod(worker, selector, options, labels, tolerate,
                                                        resources.shm, affinity=affinity)}}})
        service_selector = labels | {"leaderworkerset.sigs.k8s.io/worker-index": "0"}  # the leaders serve the API
    if llm_d_role:  # the service's InferencePool selects the pods (llm_d_pd_manifests)
        return out, notes
    out.append({"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, labels, options),
                "spec": {"selector": service_selector,
                         "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}]}})
    if options.target == "llm-d":
        out += k8s_llmd.scheduler(name, service_selector, port, False, options, _meta, security_context(False, options))
        notes.append(k8s_llmd.scheduler_note(name, defaults))
    return out, notes


def llm_d_pd_manifests(service: str, pools: list[tuple[str, object]], router: str, chip_of, options: K8sOptions,
                       named: dict[str, str], together: bool = False) -> tuple[dict[str, list[dict]], list[str]]:
    """A disaggregated service for llm-d (planner/report/k8s_llmd.py): its prefill and its decode pool
    (`pools`: (name, pool) each, pool_manifests with the service's labels) and, in the router's file
    (`router`: its name), the InferencePool over both and the P/D endpoint picker. `named`: each
    pool's and router's file name (resource_names). `together`: the plan lays both pools on one node
    (`one_node`)."""
    from planner.report import k8s_llmd

    files, notes = {}, []
    on_one = tuple(name for name, _ in pools) if together else ()
    for pool_name, pool in pools:
        resources, said = pool_manifests(pool_name, pool, chip_of(pool.chip), options, service=service,
                                         together=on_one)
        files[f"{named[pool_name]}.yaml"] = resources
        notes += said
    name = _name(service)
    selector = {"app.kubernetes.io/name": "vllm", k8s_llmd.PART_OF: name}
    defaults = options.defaults
    port = int(defaults.value("launch.port"))
    files[f"{named[router]}.yaml"] = k8s_llmd.scheduler(name, selector, port, True, options, _meta,
                                                        security_context(False, options))
    notes.append(k8s_llmd.scheduler_note(name, defaults))
    notes.append(f"{name}: each decode pod's routing sidecar {defaults.value('kubernetes.llm_d.sidecar_image')} (a "
                 f"mutable tag: pin it by digest) takes the requests on port {port} and runs the prefill on the pod "
                 "the scheduler names, vLLM behind it on port " + str(k8s_llmd.decode_vllm_port(defaults)))
    return files, notes


def checkpoint_bytes(pool) -> int:
    """The checkpoint's bytes as stored (the model graph's tensors in the checkpoint's layout:
    pricing/kernel/checkpoint_check.py), what a model cache holds of it (vLLM downloads the weight
    files only)."""
    from planner.app.fleet import rank_bytes

    return rank_bytes(pool).checkpoint


def _gib(nbytes: int) -> str:
    """Bytes as a storage quantity, rounded up to whole GiB (printing only)."""
    return f"{-(-nbytes // 2**30)}Gi"


def cache_notes(name: str, model: str, checkpoint: int, options: K8sOptions) -> list[str]:
    """What the manifests of one pool say about the model: the shared cache it should use (the size
    its checkpoint needs) and a gated model without a token (kubernetes.gated_sources)."""
    notes = []
    if not options.model_cache_claim:
        notes.append(f"{name}: every pod downloads the checkpoint ({_gib(checkpoint)}) into its own "
                     f"emptyDir; {mention('model_cache_claim')} NAME shares one cache of that size "
                     f"({mention('model_cache_size')} auto writes the claim)")
    gated = [g for g in options.defaults.value("kubernetes.gated_sources") if model.startswith(g)]
    if gated and not options.hf_token_secret:
        notes.append(f"warning: {name}: {model} is gated on Hugging Face (as every model under {gated[0]} is): "
                     f"the pods cannot download it without a token; give {mention('hf_token_secret')} SECRET")
    return notes


def cache_claim(models: dict[str, int], options: K8sOptions) -> dict:
    """The PersistentVolumeClaim of the shared model cache: the checkpoints of every model served
    (`models`: their bytes) side by side (kubernetes.model_cache_access)."""
    meta = {"name": options.model_cache_claim, "labels": {"app.kubernetes.io/name": "vllm",
                                                          "app.kubernetes.io/component": "model-cache",
                                                          "app.kubernetes.io/managed-by": "deployment-planner"}}
    if options.namespace:
        meta["namespace"] = options.namespace
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
            "spec": {"accessModes": [options.defaults.value("kubernetes.model_cache_access")],
                     "resources": {"requests": {"storage": _gib(sum(models.values()))}}}}


DYNAMO_COMPONENT = {"worker": "VllmWorker", "prefill": "VllmPrefillWorker", "decode": "VllmDecodeWorker"}


def dynamo_manifests(name: str, workers: list[tuple[str, object]], chip_of, options: K8sOptions,
                     together: bool = False) -> tuple[list[dict], list[str]]:
    """One DynamoGraphDeployment (nvidia.com/v1beta1) for a service, laid out as ai-dynamo/dynamo's
    examples/backends/vllm/deploy agg.yaml and disagg.yaml lay it out: a Frontend component (Dynamo's
    OpenAI frontend and router) and a worker component per pool (`workers`: (type, pool), type
    `worker` aggregated, or `prefill` and `decode`), each running `python3 -m dynamo.vllm --model M`
    with the plan's engine flags (a role's with `--disaggregation-mode` as those examples add it), its
    replicas, GPUs, node selector, the hardened and sized pod, /dev/shm by `sharedMemorySize` (the
    operator mounts it). Instances within one node only. `together`: the plan lays the workers on one
    node, each worker pod bound there (`one_node`, by its service and its component)."""
    from planner.app.fleet import rank_bytes

    service = _name(name)
    labels = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": service,
              "app.kubernetes.io/managed-by": "deployment-planner"}
    frontend = {"name": "main", "image": options.image, "resources": _router_resources(options.defaults),
                "securityContext": security_context(False, options)}
    components = [{"name": "Frontend", "type": "frontend", "replicas": 1,
                   "podTemplate": {"spec": {"automountServiceAccountToken": False, "containers": [frontend]}}}]
    notes = []
    affinity = one_node({"matchLabels": {"app.kubernetes.io/instance": service},
                         "matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In",
                                               "values": [kind for kind, _ in workers]}]}) if together else None
    for kind, pool in workers:
        first = pool.instances[0]
        serves = [c.launch.serve for c in first.commands]
        if len(serves) > 1:
            raise InputError("k8s_target", f"{service}: an instance spans {len(serves)} nodes, and multi-node "
                             "workers are not written for the Dynamo target",
                             f"use {mention('k8s_target')} plain (a LeaderWorkerSet)")
        chip = chip_of(pool.chip)
        resource, selector = _gpu(chip, options)
        model = options.model_source or serves[0].model.name
        if model.startswith("$"):
            raise InputError("model_source", f"the weights' location is needed ({mention('model')} named a config "
                             "file with no weights beside it)", "give the folder or Hugging Face id the pods serve")
        words = list(serves[0].args(model=model, endpoint=False))
        args = ["--model", *words] + (["--disaggregation-mode", kind] if kind != "worker" else [])
        crosses = kind != "worker"
        if crosses and not options.rdma:
            notes.append(f"{service} {kind}: the plan prices the KV hand-over at its link's speed, but these pods ask "
                         f"for no RDMA device: NIXL between them falls back to TCP unless {mention('rdma')} "
                         "RESOURCE=N names the cluster's RDMA resource")
        rank = rank_bytes(pool)
        resources = PodResources.of(rank, chip, len(first.slots[0].gpus), options.rdma if crosses else (),
                                    options.defaults)
        container = _container("main", ["python3", "-m", "dynamo.vllm"], args, resources, options, serves_api=False,
                               launch_env=first.commands[0].env, shm=False)
        notes += cache_notes(f"{service} {kind}", model, rank.checkpoint, options)
        components.append({"name": DYNAMO_COMPONENT[kind], "type": kind, "replicas": pool.replicas,
                           "sharedMemorySize": resources.shm,
                           "podTemplate": _pod(container, selector, options, labels | {
                               "app.kubernetes.io/component": kind}, _tolerations(chip, options), None,
                               affinity=affinity)})
    notes.append(f"{service}: Dynamo's operator and its platform (etcd, NATS) come with ai-dynamo's own charts; the "
                 f"image {options.image} must run vLLM 0.33, the release planned")
    return [{"apiVersion": DYNAMO_API, "kind": "DynamoGraphDeployment", "metadata": _meta(service, labels, options),
             "spec": {"backendFramework": "vllm", "components": components}}], notes


ROUTER_SCRIPT = "/opt/vllm-router/toy_proxy_server.py"  # where docs/launch.md's Dockerfile puts vLLM's proxy
SHA256 = re.compile(r"[0-9a-f]{64}")
# the opt-in fetch: the script is written where the proxy runs only when its SHA-256 is the one given
CHECKED_FETCH = ("import hashlib, sys, urllib.request\n"
                 "url, want, path = sys.argv[1:4]\n"
                 "data = urllib.request.urlopen(url, timeout=60).read()\n"
                 "got = hashlib.sha256(data).hexdigest()\n"
                 "if got != want:\n"
                 "    sys.exit(f'{url}: SHA-256 {got}, expected {want}: not run')\n"
                 "open(path, 'wb').write(data)\n")


def router_fetch(value: str | None) -> str | None:
    """`--router-fetch SHA256`: the SHA-256 (64 hex digits) the downloaded proxy must have."""
    if value is None:
        return None
    if not SHA256.fullmatch(value.lower()):
        raise InputError("router_fetch", f"{value!r} is not a SHA-256 (64 hex digits)",
                         "give the proxy file's digest: curl -sL URL | sha256sum")
    return value.lower()


def no_router_image(name: str) -> InputError:
    """A disaggregated service's router with neither --router-image nor --router-fetch: the vLLM
    image ships no proxy, and nothing unpinned is fetched at start-up."""
    return InputError("router_image", f"{name}: the router runs vLLM's proxy, which the vLLM image does not ship",
                      f"build the image docs/launch.md gives and name it ({mention('router_image')} IMAGE), or opt "
                      f"in to downloading the proxy at start-up, checked against its digest "
                      f"({mention('router_fetch')} SHA256)")


def _router_resources(defaults: Defaults) -> dict:
    """The router container's CPU and memory, requests = limits (kubernetes.router_resources)."""
    size = defaults.value("kubernetes.router_resources")
    amounts = {"cpu": int(size["cpu"]), "memory": int(size["memory"])}
    return {"requests": amounts, "limits": dict(amounts)}


def router_manifests(name: str, prefill: str, decode: str, options: K8sOptions) -> tuple[list[dict], list[str]]:
    """The router of a disaggregated service in front of its prefill and decode pools' Services
    (`prefill`, `decode`: their pool names): vLLM's proxy, as the plan names it (planner/report/
    disagg_launch.py `router`), on all addresses (its own default is 127.0.0.1), with a Service. It
    runs from --router-image (the proxy at ROUTER_SCRIPT), or, opted in with --router-fetch SHA256,
    from the vLLM image after an init container downloaded it and checked its digest."""
    from planner.app.disagg_launch import ROUTER_PORT, router_host

    router = _name(name)
    if not options.router_image and not options.router_fetch:
        raise no_router_image(router)
    labels = {"app.kubernetes.io/name": "vllm-router", "app.kubernetes.io/instance": router,
              "app.kubernetes.io/component": "router", "app.kubernetes.io/managed-by": "deployment-planner"}
    defaults = options.defaults
    api = str(int(defaults.value("launch.port")))
    probe = {"httpGet": {"path": "/healthcheck", "port": "http"}, "periodSeconds": 10, "failureThreshold": 3}
    script = ROUTER_SCRIPT if options.router_image else "/router/toy_proxy_server.py"
    proxy = {"name": "router", "image": options.router_image or options.image, "command": ["python3", script],
             "args": ["--host", router_host(defaults), "--port", str(ROUTER_PORT), "--prefiller-hosts", _name(prefill),
                      "--prefiller-ports", api, "--decoder-hosts", _name(decode), "--decoder-ports", api],
             "ports": [{"name": "http", "containerPort": ROUTER_PORT, "protocol": "TCP"}],
             "readinessProbe": probe, "livenessProbe": probe,
             "resources": _router_resources(defaults), "securityContext": security_context(False, options)}
    spec = {"automountServiceAccountToken": False, "containers": [proxy]}
    if options.router_image:
        notes = [f"{router}: vLLM's toy proxy from {options.router_image}; llm-d's inference scheduler or Dynamo's "
                 "router serve in production"]
    else:
        url = options.router_script or str(defaults.value("kubernetes.router_script"))
        mount = [{"name": "router", "mountPath": "/router"}]
        spec["initContainers"] = [{"name": "fetch-proxy", "image": options.image, "command": ["python3", "-c"],
                                   "args": [CHECKED_FETCH, escaped(url), options.router_fetch, script],
                                   "volumeMounts": mount,
                                   "resources": _router_resources(defaults),
                                   "securityContext": security_context(False, options)}]
        proxy["volumeMounts"] = mount
        spec["volumes"] = [{"name": "router", "emptyDir": {}}]
        notes = [f"{router}: vLLM's toy proxy, downloaded at start-up from {url} and run only if its SHA-256 is "
                 f"{options.router_fetch}; llm-d's inference scheduler or Dynamo's router serve in production"]
        known = defaults.value("kubernetes.router_script_sha256")
        if options.router_script is None and options.router_fetch != known:
            notes.append(f"warning: {router}: vLLM v0.33.0's proxy has SHA-256 {known} "
                         "(planner/defaults.yaml kubernetes.router_script_sha256), not the one given: the init "
                         "container will refuse to run it")
    pod = {"metadata": {"labels": labels}, "spec": spec}
    out = [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(router, labels, options),
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": pod}},
           {"apiVersion": "v1", "kind": "Service", "metadata": _meta(router, labels, options),
            "spec": {"selector": labels, "ports": [{"name": "http", "port": ROUTER_PORT, "targetPort": "http",
                                                    "protocol": "TCP"}]}}]
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
