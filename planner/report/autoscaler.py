"""An autoscaled pool's autoscaler (`--emit k8s`): a HorizontalPodAutoscaler
(`autoscaling/v2`) or, with `--autoscaler keda`, a KEDA ScaledObject (keda.sh/v1alpha1), scaling the
pool's Deployment or LeaderWorkerSet on vLLM's per-replica request gauges.

The metrics are vLLM's `vllm:num_requests_running` and `vllm:num_requests_waiting` (vLLM 0.33
v1/metrics/loggers.py, gauges per engine), per replica:
- HPA: two `Pods` metrics through the Prometheus adapter (custom.metrics.k8s.io: an adapter rule that
  discovers the gauges' series by their namespace and pod labels and names them as Prometheus does,
  docs/fleet-over-time.md), target type AverageValue; the HPA scales to the larger of
  the two replica counts (Kubernetes docs, HorizontalPodAutoscaler: 'the HorizontalPodAutoscaler
  calculates proposed replica counts for each metric, and then chooses the one with the highest');
- KEDA: two `prometheus` triggers, each a query summing the gauge over the pool's pods (the series a
  ServiceMonitor on the pool's Service labels `service`), metricType AverageValue: the sum over the
  threshold is the replicas (KEDA docs, Prometheus scaler).

The running target is what the simulator derives at the pool's shape within the service targets:
Little's law, the highest rate one replica serves within them (`per_replica_rate`) × the mean E2E
latency there, requests in the system per replica (E2E counts time queued too, so it is at least the
mean running). The waiting target is planner/defaults.yaml autoscaler.waiting_per_replica. Min and
max replicas come from the schedule; scale-up lets the autoscaler add, within one lead time, the most
replicas the schedule adds within any lead time; scale-down waits the schedule's scale-down delay (the
stabilization window).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.defaults import Defaults
from pricing.errors import InputError

HPA_API = "autoscaling/v2"
KEDA_API = "keda.sh/v1alpha1"
RUNNING, WAITING = "vllm:num_requests_running", "vllm:num_requests_waiting"
WINDOW_MAX = 3600  # Kubernetes' HPA validation: stabilizationWindowSeconds within [0, 3600]
PERIOD_MAX = 1800  # and a scaling policy's periodSeconds within (0, 1800]
KINDS = ("hpa", "keda")


@dataclass(frozen=True)
class Autoscaling:
    """What one pool's autoscaler is set to, from its schedule: replicas at least and at most, the
    target requests per replica (`running_per_replica`: per_replica_rate × mean E2E, Little's law) and
    how it was found, the lead time and the scale-down delay (seconds), and the most replicas the
    schedule adds within one lead time (`step`)."""

    min_replicas: int
    max_replicas: int
    running_per_replica: float
    how: str
    lead_seconds: int
    scale_down_seconds: int
    step: int


def quantity(value: float) -> str:
    """A Kubernetes quantity of `value`, to a thousandth ('12', '12500m')."""
    milli = round(value * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _behavior(a: Autoscaling) -> tuple[dict, list[str]]:
    notes = []
    down = a.scale_down_seconds
    if down > WINDOW_MAX:
        raise InputError("scale_down_minutes", f"{down / 60:g} minutes is beyond the autoscaler's stabilization "
                         f"window (at most {WINDOW_MAX // 60} minutes, Kubernetes' HPA validation)",
                         f"give at most {WINDOW_MAX // 60}")
    period = min(max(1, a.lead_seconds), PERIOD_MAX)
    if a.lead_seconds > PERIOD_MAX:
        notes.append(f"the scale-up policy's period is {PERIOD_MAX} s (Kubernetes' most), shorter than the lead time "
                     f"of {a.lead_seconds} s: it adds at most {a.step} replicas every {PERIOD_MAX} s")
    return {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                        "policies": [{"type": "Pods", "value": a.step, "periodSeconds": period}]},
            "scaleDown": {"stabilizationWindowSeconds": down}}, notes


def _target(workload: dict) -> dict:
    return {"apiVersion": workload["apiVersion"], "kind": workload["kind"], "name": workload["metadata"]["name"]}


def hpa(workload: dict, a: Autoscaling, waiting: float) -> tuple[dict, list[str]]:
    """The HorizontalPodAutoscaler of the pool whose Deployment or LeaderWorkerSet is `workload`
    (`waiting`: requests waiting per replica, planner/defaults.yaml autoscaler.waiting_per_replica)."""
    behavior, notes = _behavior(a)
    lowest = max(1, a.min_replicas)
    if a.min_replicas < 1:
        notes.append("the schedule idles at 0 replicas; a HorizontalPodAutoscaler keeps at least 1 "
                     "(a KEDA ScaledObject scales to 0)")
    metrics = [{"type": "Pods", "pods": {"metric": {"name": name},
                                          "target": {"type": "AverageValue", "averageValue": quantity(value)}}}
               for name, value in ((RUNNING, a.running_per_replica), (WAITING, waiting))]
    return {"apiVersion": HPA_API, "kind": "HorizontalPodAutoscaler", "metadata": dict(workload["metadata"]),
            "spec": {"scaleTargetRef": _target(workload), "minReplicas": lowest,
                     "maxReplicas": max(lowest, a.max_replicas), "metrics": metrics, "behavior": behavior}}, notes


def query(metric: str, service: str, namespace: str | None) -> str:
    """PromQL summing `metric` over the pool's pods (scraped through its Service)."""
    labels = ([f'namespace="{namespace}"'] if namespace else []) + [f'service="{service}"']
    return f"sum({metric}{{{','.join(labels)}}})"


def scaled_object(workload: dict, a: Autoscaling, prometheus: str, waiting: float) -> tuple[dict, list[str]]:
    """The KEDA ScaledObject of the pool whose Deployment or LeaderWorkerSet is `workload`, its
    triggers querying the Prometheus at `prometheus` (`waiting`: as `hpa`'s)."""
    behavior, notes = _behavior(a)
    meta = workload["metadata"]
    triggers = [{"type": "prometheus", "name": metric.split("_", 2)[-1].replace("_", "-"), "metricType": "AverageValue",
                 "metadata": {"serverAddress": prometheus, "query": query(metric, meta["name"], meta.get("namespace")),
                              "threshold": f"{value:g}"}}
                for metric, value in ((RUNNING, a.running_per_replica), (WAITING, waiting))]
    return {"apiVersion": KEDA_API, "kind": "ScaledObject", "metadata": dict(meta),
            "spec": {"scaleTargetRef": _target(workload), "minReplicaCount": a.min_replicas,
                     "maxReplicaCount": max(1, a.max_replicas),
                     "advanced": {"horizontalPodAutoscalerConfig": {"name": meta["name"], "behavior": behavior}},
                     "triggers": triggers}}, notes


def autoscaler(resources: list[dict], a: Autoscaling, kind: str, prometheus: str | None = None, *,
               defaults: Defaults) -> tuple[list[dict], list[str]]:
    """The pool's resources with its autoscaler after them (`kind` hpa or keda), and notes on it;
    the pool's first resource is what it scales (a Deployment or a LeaderWorkerSet); `defaults`:
    the command's planner defaults (autoscaler.*)."""
    workload = resources[0]
    name = workload["metadata"]["name"]
    if workload["kind"] not in ("Deployment", "LeaderWorkerSet"):
        return resources, [f"{name}: no autoscaler: a {workload['kind']} is scaled by its own operator"]
    if kind == "keda":
        made, notes = scaled_object(workload, a, prometheus or defaults.value("autoscaler.prometheus_address"),
                                    defaults.value("autoscaler.waiting_per_replica"))
    else:
        made, notes = hpa(workload, a, defaults.value("autoscaler.waiting_per_replica"))
    notes.append("the ScaledObject's triggers query vllm:num_requests_* of the series a ServiceMonitor on the "
                 "pool's Service labels service=<pool>" if kind == "keda" else "the HorizontalPodAutoscaler's Pods "
                 "metrics need the Prometheus adapter to serve vllm:num_requests_running and vllm:num_requests_waiting "
                 "per pod (docs/fleet-over-time.md)")
    said = [f"{name}: {n}" for n in notes]
    said.append(f"{name}: {'the ScaledObject' if kind == 'keda' else 'the HorizontalPodAutoscaler'} scales "
                f"{a.min_replicas}-{a.max_replicas} replicas at {a.running_per_replica:g} requests running per "
                f"replica ({a.how})")
    return [*resources, made], said


def autoscaled(result) -> dict[str, Autoscaling]:
    """A scenario result's autoscaled pools (planner/app/fleet.py FleetResult, its over_the_day's
    planner/app/fleet_schedule.py AutoscalerSettings): service name -> its Autoscaling, as
    planner/commands/emit.py `emit` takes them."""
    over = result.over_the_day
    if over is None:
        return {}
    out = {}
    for s in over.services:
        a = s.autoscaler
        if a is None:
            continue
        out[s.service] = Autoscaling(a.min_replicas, a.max_replicas, a.running_per_replica,
                                     f"Little's law: {a.per_replica_rate:g} requests/s per replica × "
                                     f"{a.mean_e2e_seconds:.2f} s mean E2E, the serving simulator at the pool's shape",
                                     round(a.lead_minutes * 60), round(a.scale_down_minutes * 60), a.step)
    return out
