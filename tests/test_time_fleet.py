"""The fleet over the day (planner/search/time_fleet.py): hand-derived small fleets, the peak of the
sum against the sum of peaks as a property over small synthetic fleets, and the brute-force optimum."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.defaults import load
from planner.search.time_fleet import (
    ServiceOverDay,
    ShapeOverDay,
    common_timeline,
    solve_time_fleet,
    spread,
)

HOUR = [60, 60]


def one_gpu(replicas, chip="h100", price=2.0, rank=0, name="shape"):
    return ShapeOverDay(name, chip, 1, price, tuple(replicas), rank)


def test_two_services_peaking_at_different_hours_share_gpus():
    """Chat needs 4 GPUs in hour 0 and 1 in hour 1; batch the reverse. Alone each buys its peak:
    4 + 4 = 8 GPUs. Together the busiest hour holds 4 + 1 = 5, so a stock of 5 serves both (8 would
    not fit), at (4 + 1) + (1 + 4) = 10 GPU-hours × $2 = $20 over the two hours."""
    chat = ServiceOverDay("chat", [one_gpu([4, 1])])
    batch = ServiceOverDay("batch", [one_gpu([1, 4])])
    found = solve_time_fleet([chat, batch], HOUR, {"h100": 5}, reads=load())
    assert found.status == "OPTIMAL"
    assert found.gpus == [5, 5] and found.peak_gpus == 5 and found.sum_of_service_peaks == 8
    assert found.stages[0].value == 20.0 and found.stages[1].value == 5
    assert solve_time_fleet([chat, batch], HOUR, {"h100": 4}, reads=load()).status == "INFEASIBLE"


def test_the_inventory_at_the_busiest_hour_picks_the_shape():
    """Chat's cheaper shape (1 H100 at $2, 4 then 1 replicas: $10) beside batch's 1 then 4 H100s takes
    5 H100s in each hour, one more than a stock of 4; so chat takes its B200 shape (2 GPUs at $3 per
    GPU-hour, 2 then 1 replicas: (4 + 2) × $3 = $18), which leaves the H100s to batch."""
    chat = ServiceOverDay("chat", [one_gpu([4, 1], name="h100 tp1"),
                                   ShapeOverDay("b200 tp2", "b200", 2, 3.0, (2, 1), 1)])
    batch = ServiceOverDay("batch", [one_gpu([1, 4])])
    alone = solve_time_fleet([chat, batch], HOUR, None, reads=load())
    assert [p.option for p in alone.picks] == ["h100 tp1", "shape"] and alone.stages[0].value == 20.0
    found = solve_time_fleet([chat, batch], HOUR, {"h100": 4, "b200": 8}, reads=load())
    assert found.status == "OPTIMAL" and [p.option for p in found.picks] == ["b200 tp2", "shape"]
    assert found.stages[0].value == 18.0 + 10.0
    assert found.gpus == [4 + 1, 2 + 4] and found.peak_gpus == 6 and found.sum_of_service_peaks == 4 + 4


def test_equal_cost_then_the_fewer_peak_gpus():
    """Two shapes of one cost over the day (8 GPU-hours each at $1): flat [4, 4], or [6, 2] on
    hour 0, where batch peaks too. The second stage takes the flat one: peak 4 + 4 = 8, not 6 + 4."""
    chat = ServiceOverDay("chat", [one_gpu([6, 2], price=1.0, name="ramp"), one_gpu([4, 4], price=1.0, rank=1,
                                                                                    name="flat")])
    batch = ServiceOverDay("batch", [one_gpu([4, 0], price=1.0)])
    found = solve_time_fleet([chat, batch], HOUR, None, reads=load())
    assert [p.option for p in found.picks] == ["flat", "shape"] and found.peak_gpus == 8
    assert [s.stage for s in found.stages] == ["cost over the window", "peak GPUs", "rank"]


def test_spare_nodes_come_out_of_a_chip_in_use():
    chat = ServiceOverDay("chat", [one_gpu([4, 1])])
    assert solve_time_fleet([chat], HOUR, {"h100": 12}, {"h100": 8}, reads=load()).status == "OPTIMAL"
    assert solve_time_fleet([chat], HOUR, {"h100": 11}, {"h100": 8}, reads=load()).status == "INFEASIBLE"


def test_a_common_timeline_cuts_every_bin():
    hourly = [(0, 60), (60, 60)]
    quarter = [(0, 30), (30, 30), (60, 60)]
    line = common_timeline([hourly, quarter])
    assert line == [(0, 30), (30, 30), (60, 60)]
    assert spread([7, 9], hourly, line) == (7, 7, 9)
    with pytest.raises(ValueError, match="windows differ"):
        common_timeline([hourly, [(0, 60)]])
    with pytest.raises(ValueError, match="follow one another"):
        common_timeline([[(0, 60), (90, 30)]])


PER_DOLLAR = load().value("solver.price_units_per_dollar")  # the solver's price units, as solve_time_fleet reads them


def brute_force(services, minutes, inventory):
    """Every combination of shapes: the feasible ones' least (cost units, peak GPUs)."""
    best = None
    for combo in itertools.product(*(s.shapes for s in services)):
        fits = all(sum(p.gpus()[t] for p in combo if p.chip == chip) <= stock
                   for chip, stock in inventory.items() for t in range(len(minutes)))
        if not fits:
            continue
        key = (sum(p.cost_units(minutes, PER_DOLLAR) for p in combo),
               max(sum(p.gpus()[t] for p in combo) for t in range(len(minutes))))
        best = key if best is None or key < best else best
    return best


@st.composite
def fleets(draw):
    intervals = draw(st.integers(1, 4))
    minutes = draw(st.lists(st.sampled_from([15, 30, 60]), min_size=intervals, max_size=intervals))
    services = []
    for k in range(draw(st.integers(1, 3))):
        shapes = [ShapeOverDay(f"s{k}-{i}", draw(st.sampled_from(["h100", "b200"])), draw(st.sampled_from([1, 2, 4])),
                               draw(st.sampled_from([1.5, 2.0, 3.25])),
                               tuple(draw(st.lists(st.integers(0, 5), min_size=intervals, max_size=intervals))), i)
                  for i in range(draw(st.integers(1, 3)))]
        services.append(ServiceOverDay(f"svc{k}", shapes))
    inventory = {"h100": draw(st.integers(0, 30)), "b200": draw(st.integers(0, 30))}
    return services, minutes, inventory


@settings(max_examples=60, deadline=None)
@given(fleets())
def test_the_fleets_peak_never_exceeds_the_sum_of_peaks_and_is_the_optimum(fleet):
    """Property: max over intervals of the sum ≤ the sum of each service's max; and the solve finds
    the brute-force optimum (cost, then peak GPUs) or proves there is none."""
    services, minutes, inventory = fleet
    found = solve_time_fleet(services, minutes, inventory, reads=load())
    best = brute_force(services, minutes, inventory)
    if best is None:
        assert found.status == "INFEASIBLE" and not found.picks
        return
    assert found.status == "OPTIMAL"
    assert found.peak_gpus <= found.sum_of_service_peaks
    assert (sum(p.cost_units(minutes, PER_DOLLAR) for p in found.picks), found.peak_gpus) == best
    for chip, stock in inventory.items():
        assert all(sum(p.gpus()[t] for p in found.picks if p.chip == chip) <= stock for t in range(len(minutes)))


# -- the autoscaler's manifests (planner/report/autoscaler.py) -------------------------------------------
def deployment(name="chat", namespace=None):
    meta = {"name": name, "labels": {"app.kubernetes.io/instance": name}}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {"replicas": 3}}


def scaling(**changes):
    from planner.report.autoscaler import Autoscaling

    fields = dict(min_replicas=1, max_replicas=6, running_per_replica=12.5, how="Little's law", lead_seconds=240,
                  scale_down_seconds=300, step=3)
    return Autoscaling(**(fields | changes))


def test_largest_step_within_a_lead_time():
    """Hourly replicas 1, 1, 4, 6, 2: within one hour's lead the schedule adds at most 3 (1 → 4);
    within two hours 5 (1 → 6); cyclic, the seam from 2 back to 1 adds nothing more."""
    from planner.app.fleet_schedule import largest_step

    replicas, minutes = [1, 1, 4, 6, 2], [60] * 5
    assert largest_step(replicas, minutes, 10, cyclic=False) == 3
    assert largest_step(replicas, minutes, 120, cyclic=False) == 5
    assert largest_step([6, 2, 2], [60] * 3, 60, cyclic=True) == 4  # 2 → 6 over the seam
    assert largest_step([6, 2, 2], [60] * 3, 60, cyclic=False) == 1  # never rises: one replica a lead at least


def test_the_hpa_validates_and_carries_the_schedule():
    import kubernetes_validate

    from planner.report.autoscaler import autoscaler

    resources, notes = autoscaler([deployment(namespace="llm")], scaling(), "hpa", defaults=load())
    hpa = resources[-1]
    kubernetes_validate.validate(hpa, "1.33.0", strict=True)
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat"}
    assert (spec["minReplicas"], spec["maxReplicas"]) == (1, 6)
    running, waiting = spec["metrics"]
    assert running["pods"] == {"metric": {"name": "vllm:num_requests_running"},
                               "target": {"type": "AverageValue", "averageValue": "12500m"}}
    assert waiting["pods"]["metric"]["name"] == "vllm:num_requests_waiting"
    assert spec["behavior"]["scaleDown"] == {"stabilizationWindowSeconds": 300}
    assert spec["behavior"]["scaleUp"]["policies"] == [{"type": "Pods", "value": 3, "periodSeconds": 240}]
    assert any("12.5 requests running per replica (Little's law)" in n for n in notes)


def test_the_scaled_object_validates_against_kedas_schema():
    import jsonschema
    import kubernetes_validate

    from planner.report.autoscaler import autoscaler
    from tests.test_k8s import crd_schemas

    resources, _ = autoscaler([deployment(namespace="llm")], scaling(min_replicas=0), "keda", "http://prom:9090",
                              defaults=load())
    so = resources[-1]
    schema = crd_schemas()[("keda.sh/v1alpha1", "ScaledObject")]
    assert schema["source"]["repository"] == "https://github.com/kedacore/keda" and schema["source"]["tag"] == "v2.20.2"
    jsonschema.validate(so, schema["schema"])
    behavior = so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]  # as Kubernetes reads it
    kubernetes_validate.validate({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                                  "metadata": {"name": "t"}, "spec": {"scaleTargetRef": so["spec"]["scaleTargetRef"],
                                                                      "maxReplicas": 6, "behavior": behavior}},
                                 "1.33.0", strict=True)
    running, waiting = so["spec"]["triggers"]
    assert running["metadata"] == {"serverAddress": "http://prom:9090", "threshold": "12.5",
                                   "query": 'sum(vllm:num_requests_running{namespace="llm",service="chat"})'}
    assert waiting["metadata"]["query"] == 'sum(vllm:num_requests_waiting{namespace="llm",service="chat"})'
    assert so["spec"]["minReplicaCount"] == 0 and running["metricType"] == "AverageValue"
    with pytest.raises(jsonschema.ValidationError):  # the check itself: a trigger without its type
        jsonschema.validate({**so, "spec": {**so["spec"], "triggers": [{"metadata": {}}]}}, schema["schema"])


def test_an_hpa_keeps_one_replica_and_a_window_beyond_kubernetes_is_refused():
    from planner.report.autoscaler import autoscaler
    from pricing.errors import InputError

    resources, notes = autoscaler([deployment()], scaling(min_replicas=0), "hpa", defaults=load())
    assert resources[-1]["spec"]["minReplicas"] == 1 and any("keeps at least 1" in n for n in notes)
    with pytest.raises(InputError, match="scale_down_minutes"):
        autoscaler([deployment()], scaling(scale_down_seconds=7200), "hpa", defaults=load())


# -- the three-service scenario (scenarios/diurnal-three-services.yaml) -------------------------------------
SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "diurnal-three-services.yaml"


@pytest.fixture(scope="module")
def diurnal(tmp_path_factory):
    """`plan scenario --format json --emit k8s` of the scenario, with the HPA and the KEDA manifests."""
    import json
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("diurnal")
    runs = {}
    for kind in ("hpa", "keda"):
        done = subprocess.run([sys.executable, "-m", "planner.cli", "scenario", str(SCENARIO), "--format", "json",
                               "--emit", "k8s", "-o", str(out / kind), "--autoscaler", kind, "--namespace", "llm"],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        runs[kind] = json.loads(done.stdout), done.stderr
    return out, runs


def test_the_diurnal_fleet_peaks_below_the_sum_of_peaks(diurnal):
    """Done when: chat by day, batch by night, a flat API on one inventory report a fleet peak below the
    sum of the services' peaks. Each service's GPUs over the day sum to the fleet's at every hour; the
    peak is the busiest hour's; the sum of peaks is each service's own busiest hour's, added."""
    _, runs = diurnal
    result, _ = runs["hpa"]
    over = result["over_the_day"]
    assert result["feasible"] and over["solver_status"] == "OPTIMAL"
    by = {s["service"]: s for s in over["services"]}
    fleet = [sum(s["gpus"][t] for s in by.values()) for t in range(24)]
    assert over["gpus"] == fleet and result["peak_gpus"] == over["peak_gpus"] == max(fleet)
    assert result["sum_of_service_peaks"] == sum(max(s["gpus"]) for s in by.values())
    assert result["peak_gpus"] < result["sum_of_service_peaks"]
    assert max(fleet) <= 64  # the inventory's H100s, at every hour
    chat, batch = by["chat"]["gpus"], by["batch"]["gpus"]
    assert chat.index(max(chat)) in range(8, 18) and batch.index(max(batch)) not in range(8, 18)  # offset peaks
    assert len(set(by["api"]["replicas"])) == 1  # flat
    assert over["cost_autoscaled_per_day"] < over["cost_static_per_day"]
    for s in by.values():  # each interval's cost: GPUs × an hour × the price
        assert s["cost_per_day"] == pytest.approx(sum(s["gpus"]) * s["price_per_gpu_hour"], abs=0.01)


def test_the_diurnal_fleets_autoscalers_validate(diurnal):
    """Done when: the scenario emits autoscaler manifests that validate: an HPA (Kubernetes' schema) or a
    ScaledObject (KEDA's CRD schema) per autoscaled pool, min/max replicas from the schedule over the day,
    the target the simulator's per-replica rate × mean E2E."""
    import jsonschema
    import kubernetes_validate

    from tests.test_k8s import crd_schemas, emitted, validate

    out, runs = diurnal
    result, _ = runs["hpa"]
    by = {s["service"]: s for s in result["over_the_day"]["services"]}
    for kind, last in (("hpa", "HorizontalPodAutoscaler"), ("keda", "ScaledObject")):
        files = emitted(out / kind)
        assert sorted(files) == ["api.yaml", "batch.yaml", "chat.yaml"]
        for name, resources in files.items():
            for r in resources:
                validate(r)
            scaler, service = resources[-1], by[name.removesuffix(".yaml")]
            assert scaler["kind"] == last and scaler["metadata"]["namespace"] == "llm"
            settings = service["autoscaler"]
            assert settings["running_per_replica"] == pytest.approx(
                settings["per_replica_rate"] * settings["mean_e2e_seconds"], abs=1e-3)
            low, high = min(service["replicas"]), max(service["replicas"])
            workload = resources[0]
            assert scaler["spec"]["scaleTargetRef"]["name"] == workload["metadata"]["name"]
            args = workload["spec"]["template"]["spec"]["containers"][0]["args"]
            assert args[args.index("--tensor-parallel-size") + 1] == str(service["tensor_parallel_size"])
            if kind == "hpa":
                assert (scaler["spec"]["minReplicas"], scaler["spec"]["maxReplicas"]) == (max(1, low), high)
            else:
                assert (scaler["spec"]["minReplicaCount"], scaler["spec"]["maxReplicaCount"]) == (low, high)
                schema = crd_schemas()[("keda.sh/v1alpha1", "ScaledObject")]["schema"]
                jsonschema.validate(scaler, schema)
                kubernetes_validate.validate(
                    {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "t"},
                     "spec": {"scaleTargetRef": scaler["spec"]["scaleTargetRef"], "maxReplicas": high,
                              "behavior": scaler["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]}},
                    "1.33.0", strict=True)


def test_an_autoscaler_without_traffic_is_refused(capsys):
    from planner.cli import main

    code = main(["scenario", str(SCENARIO.parent / "mixed-fleet-shared-inventory.yaml"), "--emit", "k8s", "-o",
                 "/nonexistent-never-written", "--autoscaler", "keda"])
    assert code == 2 and "--autoscaler: has no effect without a service's traffic:" in capsys.readouterr().err


def test_a_tight_inventory_holds_the_fleet_over_the_day_but_not_every_peak():
    """The scenario's tight-inventory variant: 48 H100s, below the 57 of the services' own peaks, above
    the fleet's busiest hour: the static plan is short, the fleet over the day fits (peak ≤ 48)."""
    from planner.app.fleet import plan_scenario
    from planner.scenario import load_scenario

    r = plan_scenario(load_scenario(SCENARIO).apply("tight-inventory"), "tight-inventory")
    assert not r.feasible and r.short
    over = r.over_the_day
    assert over.solver_status == "OPTIMAL" and over.inventory == {"h100": 48}
    assert over.peak_gpus <= 48 < over.sum_of_service_peaks
    assert r.emitted_pools and {p.service for p in r.emitted_pools} == {"chat", "batch", "api"}


def test_the_fleet_chart_draws_the_peak_of_the_sum_against_the_sum_of_peaks(monkeypatch):
    """Chat 4 then 1 GPUs, batch 1 then 4 (the first hand case): the stacked areas top out at 5, the
    peak line at 5, the sum-of-peaks line at 8, the inventory at 6; no two texts overlap."""
    from planner.app.fleet_schedule import FleetOverTheDay, ServiceOverTheDay, TimelineInterval
    from planner.report import charts
    from planner.report.fleet_chart import fleet_chart
    from tests.test_charts import by_gid, overlaps

    def service(name, replicas):
        return ServiceOverTheDay(service=name, autoscaled=True, chip="h100", tensor_parallel_size=1,
                                 pipeline_parallel_size=1, data_parallel_size=1, gpus_per_replica=1,
                                 price_per_gpu_hour=2.0, replicas=replicas, gpus=replicas, peak_gpus=max(replicas),
                                 cost_per_day=10.0, cost_static_per_day=16.0, same_as_static=True,
                                 shapes_considered=1)

    over = FleetOverTheDay(timeline=[TimelineInterval(start_minute=0, minutes=720),
                                     TimelineInterval(start_minute=720, minutes=720)],
                           services=[service("chat", [4, 1]), service("batch", [1, 4])], gpus=[5, 5], peak_gpus=5,
                           sum_of_service_peaks=8, busiest_start_minute=0, cost_autoscaled_per_day=20.0,
                           cost_static_per_day=32.0, solver_status="OPTIMAL")
    figures = []
    monkeypatch.setattr(charts, "save", lambda fig, path: figures.append(fig))
    fleet_chart(over, "fleet.png", "two services", inventory=6)
    (fig,) = figures
    lines = {a.get_gid(): a.get_ydata()[0] for a in by_gid(fig, "") if a.get_gid() in
             ("peak-of-sum", "sum-of-peaks", "inventory")}
    assert lines == {"peak-of-sum": 5, "sum-of-peaks": 8, "inventory": 6}
    (top,) = by_gid(fig, "gpus-batch")
    assert max(v[1] for v in top.get_paths()[0].vertices) == 5  # batch stacked on chat: the fleet's GPUs
    assert {a.get_gid(): a.get_height() for a in by_gid(fig, "cost-")} == {"cost-static": 32.0,
                                                                         "cost-over-the-day": 20.0}
    assert overlaps(fig) == []


def test_the_least_cost_over_the_window_by_hand():
    """A shape of 4 GPUs at $2.50 over 24 hourly intervals, 4 of them without requests: at least one
    replica in each of the 20 busy hours, $200; with min_replicas 1, every hour, $240. The schedule
    never runs fewer (its need is at least 1 where requests arrive, and its policy only adds)."""
    from types import SimpleNamespace

    from planner.app.fleet_schedule import _least_cost
    from planner.traffic.intervals import Interval, Traffic

    rates = [0.0] * 4 + [3.0] * 20
    intervals = [Interval(start_minute=60 * h, minutes=60, requests_per_second=r, isl=100, osl=10)
                 for h, r in enumerate(rates)]
    option = SimpleNamespace(row=SimpleNamespace(gpus=4), price=2.5)
    assert _least_cost(option, Traffic(intervals=intervals, source="t", min_replicas=0)) == pytest.approx(200.0)
    assert _least_cost(option, Traffic(intervals=intervals, source="t", min_replicas=1)) == pytest.approx(240.0)


def test_a_days_profile_repeats_over_a_weeks(diurnal):
    """The API's flat 10 requests/s given as a week (168 hours) beside the others' days: the days repeat
    over the week, so the fleet's GPUs are the day's seven times over, its peak and cost a day the same."""
    import yaml

    from planner.app.fleet import plan_scenario
    from planner.scenario import load_scenario

    out, runs = diurnal
    daily = runs["hpa"][0]["over_the_day"]
    raw = yaml.safe_load(SCENARIO.read_text())
    raw["services"][2]["traffic"] = {"hourly_requests_per_second": None, "weekly_requests_per_second": [10] * 168}
    raw["services"][2]["traffic"].pop("hourly_requests_per_second")
    (out / "weekly.yaml").write_text(yaml.safe_dump(raw))
    over = plan_scenario(load_scenario(out / "weekly.yaml")).over_the_day
    assert len(over.timeline) == 168 and over.gpus == daily["gpus"] * 7
    assert over.peak_gpus == daily["peak_gpus"] and over.cost_autoscaled_per_day == daily["cost_autoscaled_per_day"]


def test_a_leaderworkerset_is_scaled_and_a_dynamo_graph_is_left_to_its_operator():
    import kubernetes_validate

    from planner.report.autoscaler import autoscaler
    from planner.report.k8s import LWS_API

    lws = {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": {"name": "big"}, "spec": {}}
    resources, _ = autoscaler([lws], scaling(), "hpa", defaults=load())
    kubernetes_validate.validate(resources[-1], "1.33.0", strict=True)
    assert resources[-1]["spec"]["scaleTargetRef"] == {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "name": "big"}
    graph = {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"}}
    resources, notes = autoscaler([graph], scaling(), "keda", defaults=load())
    assert resources == [graph] and notes == ["g: no autoscaler: a DynamoGraphDeployment is scaled by its own operator"]


def test_the_dynamo_target_says_it_writes_no_autoscaler(tmp_path, monkeypatch):
    """A DynamoGraphDeployment is scaled by Dynamo's planner: an autoscaled pool there is told, not dropped."""
    from types import SimpleNamespace

    from planner.commands import emit
    from planner.report import k8s

    monkeypatch.setattr(k8s, "dynamo_manifests", lambda name, workers, chip_of, options, together: (
        [{"kind": "DynamoGraphDeployment"}], []))
    to = emit.Emit(SimpleNamespace(target="dynamo", model_cache_size=None, rdma=()), str(tmp_path / "out"))
    said = emit.emit([("chat", SimpleNamespace(chip="h100"))], to=to, autoscaled={"chat": scaling()})
    assert "note: chat: no autoscaler: a DynamoGraphDeployment is scaled by Dynamo's own planner" in said
