"""llm-d's resources of a plan (`--k8s-target llm-d`), as llm-d deploys them: the pools' pods behind an
InferencePool (the Gateway API inference extension's, inference.networking.k8s.io/v1) and its endpoint
picker (EPP: llm-d's inference scheduler, kubernetes.llm_d.scheduler_image), which the gateway asks
for the pod of each request.

Aggregated pool (<pool>.yaml)   Deployment + Service (planner/report/k8s.py), InferencePool <pool> over
                                its pods, the EPP <pool>-epp scoring them (queue, KV-cache use, prefix)
P/D service                     <service>-prefill.yaml, <service>-decode.yaml: a Deployment per role,
                                its pods labelled llm-d.ai/role prefill or decode (the scheduler's
                                prefill-filter and decode-filter select on it: llm-d-inference-scheduler
                                v0.8.0 pkg/epp/framework/plugins/scheduling/filter/bylabel/roles.go);
                                each decode pod runs the routing sidecar (a native sidecar: an init
                                container with restartPolicy Always) on the pool's API port, vLLM
                                behind it on kubernetes.llm_d.decode_vllm_port;
                                <service>-router.yaml: InferencePool <service> over both roles' pods,
                                its target port the prefill pods' vLLM and the decode pods' sidecar,
                                and the EPP <service>-epp with llm-d's P/D profile: every request
                                prefilled on a prefill pod (always-disagg-pd-decider: the plan prices
                                every request's prefill on the prefill pool), the prefill pod's address
                                handed to the decode pod's sidecar (disagg-headers-handler), which
                                runs the prefill there and the decode beside it (NIXL, nixlv2)
The EPP is written as the Gateway API inference extension's `inferencepool` chart renders it (the
chart llm-d's guides install the EPP with; its v1.5.0 templates, the release llm-d-inference-scheduler
v0.8.0 builds on): a ServiceAccount, a Role to read pods, InferencePools,
InferenceObjectives and InferenceModelRewrites, its RoleBinding, the plugins' ConfigMap, the
Deployment (one replica, Recreate) and its Service. The Gateway and its HTTPRoute to the InferencePool
are the cluster's (its gateway class).
"""

from __future__ import annotations

from planner.defaults import Defaults
from planner.kinds import Role

ROLE_LABEL = "llm-d.ai/role"  # llm-d-inference-scheduler v0.8.0 filter/bylabel/roles.go RoleLabel
PART_OF = "app.kubernetes.io/part-of"  # the service both roles' pods serve: the InferencePool's selector
INFERENCE_POOL_API = "inference.networking.k8s.io/v1"
EPP_CONFIG = "scheduler.yaml"  # the ConfigMap's key, the EPP's --config-file under /config
EPP_API = "inference.networking.x-k8s.io/v1alpha1"  # EndpointPickerConfig's apiVersion (llm-d-inference-scheduler
# v0.8.0 deploy/config/*.yaml)

# the scheduler's plugins (llm-d-inference-scheduler v0.8.0: deploy/config/epp-config.yaml and pd-epp-config.yaml,
# docs/disaggregation.md), by the plugin types registered there
AGGREGATED_CONFIG = """\
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: prefix-cache-scorer
- type: max-score-picker
- type: single-profile-handler
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: max-score-picker
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: prefix-cache-scorer
    weight: 3
"""
PD_CONFIG = """\
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: disagg-headers-handler
- type: prefill-filter
- type: decode-filter
- type: queue-scorer
- type: prefix-cache-scorer
- type: max-score-picker
- type: always-disagg-pd-decider
- type: disagg-profile-handler
  parameters:
    deciders:
      prefill: always-disagg-pd-decider
schedulingProfiles:
- name: prefill
  plugins:
  - pluginRef: prefill-filter
  - pluginRef: max-score-picker
  - pluginRef: queue-scorer
    weight: 1
- name: decode
  plugins:
  - pluginRef: decode-filter
  - pluginRef: max-score-picker
  - pluginRef: prefix-cache-scorer
    weight: 2
  - pluginRef: queue-scorer
    weight: 1
"""


def _flag(name: str, value) -> str:
    """A Go program's flag and its value as one word (pflag's --name=value: a boolean flag takes its
    value only so)."""
    return f"{name}={value}"


def _image_user(defaults: Defaults) -> dict:
    """The scheduler's and the sidecar's images' own non-root user (kubernetes.llm_d.image_user)."""
    return {"runAsNonRoot": True, "runAsUser": int(defaults.value("kubernetes.llm_d.image_user"))}


def role_labels(role: Role, service: str) -> dict[str, str]:
    """A P/D pool's extra labels: its llm-d role and the service whose InferencePool selects it."""
    return {ROLE_LABEL: str(role), PART_OF: service}


def decode_vllm_port(defaults: Defaults) -> int:
    return int(defaults.value("kubernetes.llm_d.decode_vllm_port"))


def routing_sidecar(api_port: int, security_context: dict, defaults: Defaults) -> dict:
    """The decode pod's routing sidecar (llm-d-inference-scheduler v0.8.0 cmd/pd-sidecar, its flags in
    pkg/sidecar/proxy/options.go): on the pool's API port, vLLM beside it on decode_vllm_port, the
    NIXL protocol (nixlv2), plain HTTP (--secure-proxy=false: the pods serve HTTP, as llm-d's guides
    run it). A native sidecar (restartPolicy Always), as those guides write it, as its image's user."""
    size = defaults.value("kubernetes.llm_d.sidecar_resources")
    amounts = {"cpu": int(size["cpu"]), "memory": int(size["memory"])}
    return {"name": "routing-sidecar", "image": str(defaults.value("kubernetes.llm_d.sidecar_image")),
            "restartPolicy": "Always",
            "args": [_flag("--port", api_port), _flag("--vllm-port", decode_vllm_port(defaults)),
                     _flag("--kv-connector", "nixlv2"), _flag("--secure-proxy", "false")],
            "ports": [{"name": "sidecar", "containerPort": api_port, "protocol": "TCP"}],
            "resources": {"requests": amounts, "limits": dict(amounts)},
            "securityContext": security_context | _image_user(defaults)}


def scheduler(name: str, selector: dict[str, str], api_port: int, disaggregated: bool, options, meta,
              security_context: dict) -> list[dict]:
    """The InferencePool `name` over the pods `selector` matches, on `api_port`, and its EPP `name`-epp
    (`meta`: planner/report/k8s.py's metadata of a resource, `security_context` a hardened container's;
    the planner defaults `options.defaults`)."""
    defaults = options.defaults
    epp = f"{name}-epp"
    ports = defaults.value("kubernetes.llm_d.epp_ports")
    size = defaults.value("kubernetes.llm_d.epp_resources")
    timing = defaults.value("kubernetes.llm_d.epp_timing")
    labels = {"app.kubernetes.io/name": "llm-d-inference-scheduler", "app.kubernetes.io/instance": epp,
              "app.kubernetes.io/component": "endpoint-picker", "app.kubernetes.io/managed-by": "deployment-planner"}
    pod_labels = {"inferencepool": epp}  # the chart's selector label
    pool = {"apiVersion": INFERENCE_POOL_API, "kind": "InferencePool",
            "metadata": meta(name, {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": name,
                                    "app.kubernetes.io/managed-by": "deployment-planner"}, options),
            "spec": {"selector": {"matchLabels": selector}, "targetPorts": [{"number": api_port}],
                     "endpointPickerRef": {"name": epp, "port": {"number": int(ports["grpc"])},
                                           "failureMode": "FailOpen"}}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(epp, labels, options),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list"]},
                      {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"],
                       "verbs": ["get", "watch", "list"]},
                      {"apiGroups": ["inference.networking.x-k8s.io"],
                       "resources": ["inferenceobjectives", "inferencemodelrewrites"],
                       "verbs": ["get", "watch", "list"]}]}
    subject = {"kind": "ServiceAccount", "name": epp}
    if options.namespace:
        subject["namespace"] = options.namespace
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": meta(epp, labels, options), "subjects": [subject],
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": epp}}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(epp, labels, options),
              "data": {EPP_CONFIG: PD_CONFIG if disaggregated else AGGREGATED_CONFIG}}
    grpc_probe = {"grpc": {"port": int(ports["health"]), "service": "inference-extension"}}
    container = {
        "name": "epp", "image": str(defaults.value("kubernetes.llm_d.scheduler_image")),
        "args": ["--pool-name", name, "--pool-group", "inference.networking.k8s.io", "--zap-encoder", "json",
                 "--config-file", f"/config/{EPP_CONFIG}", _flag("--tracing", "false"),
                 _flag("--metrics-endpoint-auth", "false")],
        "ports": [{"name": "grpc", "containerPort": int(ports["grpc"])},
                  {"name": "grpc-health", "containerPort": int(ports["health"])},
                  {"name": "metrics", "containerPort": int(ports["metrics"])}],
        "env": [{"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "resources": {"requests": {"cpu": int(size["cpu_request"]), "memory": int(size["memory_request"])},
                      "limits": {"memory": int(size["memory_limit"])}},
        "livenessProbe": grpc_probe | {"initialDelaySeconds": int(timing["liveness_delay_seconds"]),
                                       "periodSeconds": int(timing["liveness_period_seconds"])},
        "readinessProbe": grpc_probe | {"periodSeconds": int(timing["readiness_period_seconds"])},
        "volumeMounts": [{"name": "plugins-config", "mountPath": "/config"}],
        "securityContext": security_context | _image_user(defaults),
    }
    pod = {"serviceAccountName": epp, "terminationGracePeriodSeconds": int(timing["grace_seconds"]),
           "containers": [container], "volumes": [{"name": "plugins-config", "configMap": {"name": epp}}]}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(epp, labels, options),
                  "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": pod_labels},
                           "template": {"metadata": {"labels": pod_labels | labels}, "spec": pod}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": meta(epp, labels, options),
               "spec": {"selector": pod_labels, "type": "ClusterIP",
                        "ports": [{"name": "grpc-ext-proc", "protocol": "TCP", "port": int(ports["grpc"])},
                                  {"name": "http-metrics", "protocol": "TCP", "port": int(ports["metrics"])}]}}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(epp, labels, options)}
    return [pool, account, role, binding, config, deployment, service]


def scheduler_note(name: str, defaults: Defaults) -> str:
    return (f"{name}: the gateway reaches the pods through InferencePool {name} (an HTTPRoute backendRef, group "
            f"inference.networking.k8s.io, kind InferencePool) and its endpoint picker {name}-epp, llm-d's "
            f"scheduler {defaults.value('kubernetes.llm_d.scheduler_image')} (a mutable tag: pin it by digest); the "
            "Gateway API and inference extension CRDs and the Gateway are the cluster's")

