"""Traffic over the day: the three forms parsed to exact, hand-derived intervals; bad
traces named by file, row and column; the schedule's policy (lead time before a ramp, scale-down
after) by hand; and properties of the schedule on a real pool shape by the serving simulator: a
flat profile gives the static plan, scaling a profile up never costs less, a longer lead time
never needs fewer replicas before a ramp."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from planner.defaults import load
from planner.traffic.intervals import Interval, Traffic
from planner.traffic.prometheus import read_export
from planner.traffic.schedule import at_risk, hold, length_bin, steps
from planner.traffic.spec import TrafficSpec
from planner.traffic.trace import read_trace
from pricing.errors import InputError
from tests.helpers import cli

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "traffic"
EXPORT = FIXTURES / "vllm-fleet-range.json"


# -- profiles --------------------------------------------------------------------------------------
def test_an_hourly_profile_is_24_hours_at_the_workloads_lengths():
    rates = [float(h) for h in range(1, 25)]
    t = TrafficSpec(hourly_requests_per_second=rates).resolve(512, 128)
    assert [i.start_minute for i in t.intervals] == list(range(0, 1440, 60))
    assert {i.minutes for i in t.intervals} == {60}
    assert [i.requests_per_second for i in t.intervals] == rates
    assert {(i.isl, i.osl) for i in t.intervals} == {(512, 128)}
    assert t.cyclic and t.window_minutes == 1440 and t.peak.start_minute == 23 * 60


def test_a_weekly_profile_is_168_hours():
    t = TrafficSpec(weekly_requests_per_second=[1.0] * 167 + [3.0]).resolve(100, 10)
    assert len(t.intervals) == 168 and t.window_minutes == 7 * 1440 and t.peak.start_minute == 167 * 60


@pytest.mark.parametrize("fields, words", [
    ({"hourly_requests_per_second": [1.0] * 23}, "give 24 rates, one per hour; got 23"),
    ({"weekly_requests_per_second": [1.0] * 24}, "give 168 rates, one per hour; got 24"),
    ({"hourly_requests_per_second": [1.0] * 23 + [-1.0]}, "hour 23: -1.0 requests/s is not within 0"),
    ({"hourly_requests_per_second": [0.0] * 24}, "every hour is 0 requests/s"),
    ({}, "give exactly one of hourly_requests_per_second, weekly_requests_per_second, trace, prometheus"),
    ({"trace": "a.csv", "prometheus": "b.json"}, "got trace, prometheus"),
    ({"hourly_requests_per_second": [1.0] * 24, "interval_minutes": 30}, "a profile is hourly"),
])
def test_a_traffic_block_takes_exactly_one_well_formed_form(fields, words):
    with pytest.raises(ValidationError) as err:
        TrafficSpec(**fields)
    assert words in str(err.value)


def test_a_profile_without_lengths_names_the_workload():
    with pytest.raises(InputError) as err:
        TrafficSpec(hourly_requests_per_second=[1.0] * 24).resolve(None, None)
    assert "give the service workload {isl, osl}" in str(err.value)


# -- traces ------------------------------------------------------------------------------------------
def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_trace_is_binned_by_its_arrivals_with_mean_lengths_rounded_up(tmp_path):
    # 2026-01-01T10:00:00Z is epoch 1767261600; the window starts at 10:00, the first arrival's hour
    path = write(tmp_path, "timestamp,input_tokens,output_tokens\n"
                           "1767261601,100,10\n"                   # 10:00:01
                           "2026-01-01T10:30:00Z,201,21\n"          # 10:30, ISO with Z
                           "2026-01-01T10:59:59,300,30\n"           # 10:59:59, no offset: UTC
                           "1767268800.5,1000,7\n")                 # 12:00:00.5: 11:00 holds nothing
    t = read_trace(path, 60)
    assert [(i.start_minute, i.minutes) for i in t.intervals] == [(0, 60), (60, 60), (120, 60)]
    assert [i.requests_per_second for i in t.intervals] == [3 / 3600, 0.0, 1 / 3600]
    assert (t.intervals[0].isl, t.intervals[0].osl) == (201, 21)  # (100 + 201 + 300) / 3 = 200.33 -> 201
    assert (t.intervals[1].isl, t.intervals[1].osl) == (401, 17)  # empty: the trace's mean, 1601/4, 68/4
    assert (t.intervals[2].isl, t.intervals[2].osl) == (1000, 7)
    # the longest prompt (1000) and the longest output (30): the histograms draw them independently
    assert t.window_start == "2026-01-01T10:00:00Z" and t.longest_request == 1030 and not t.cyclic
    assert t.source == "trace trace.csv (4 requests)"
    # power-of-two bins narrowed to the lengths seen, a weight-0 bin over each gap: prompts 100 in
    # [64, 128), 201 in [128, 256), 300 in [256, 512), 1000 in [512, 1024); outputs 7 in [4, 8),
    # 10 in [8, 16), 21 and 30 in [16, 32)
    assert (t.lengths.prompt.edges, t.lengths.prompt.weights) == ((100, 101, 201, 202, 300, 301, 1000, 1001),
                                                                  (1, 0, 1, 0, 1, 0, 1))
    assert (t.lengths.output.edges, t.lengths.output.weights) == ((7, 8, 10, 11, 21, 31), (1, 0, 1, 0, 2))
    # means: prompts exact, (100 + 201 + 300 + 1000) / 4; outputs (7 + 10 + 2 × (21 + 30) / 2) / 4 = 17
    assert t.lengths.prompt.histogram().mean == 1601 / 4 and t.lengths.output.histogram().mean == 17


def test_a_traces_columns_may_come_in_any_order_beside_others(tmp_path):
    path = write(tmp_path, "output_tokens,user,Timestamp,input_tokens\n5,a,0,7\n6,b,1799,9\n")
    t = read_trace(path, 30)
    assert [(i.requests_per_second, i.isl, i.osl) for i in t.intervals] == [(2 / 1800, 8, 6)]


@pytest.mark.parametrize("body, where, words", [
    ("timestamp,input_tokens,output_tokens\n10,1,1\n5,1,1\n", "row 3, column timestamp",
     "5 is earlier than the row before it (sort the trace by timestamp)"),
    ("timestamp,input_tokens,output_tokens\n10,1,1\n11,-4,1\n", "row 3, column input_tokens",
     "-4 tokens is negative"),
    ("timestamp,input_tokens,output_tokens\n10,1,2.5\n", "row 2, column output_tokens",
     "'2.5' is not a whole number of tokens"),
    ("timestamp,input_tokens\n10,1\n", "row 1, column output_tokens", "missing from the header"),
    ("timestamp,input_tokens,output_tokens\n", "", "the window holds no request"),
    ("", "", "is empty: the window holds no request"),
    ("timestamp,input_tokens,output_tokens\nyesterday,1,1\n", "row 2, column timestamp",
     "'yesterday' is not a time"),
    ("timestamp,input_tokens,output_tokens\n10,1\n", "row 2, column output_tokens", "the row has no such cell"),
])
def test_a_bad_trace_is_one_line_naming_file_row_and_column(tmp_path, body, where, words):
    path = write(tmp_path, body)
    with pytest.raises(InputError) as err:
        read_trace(path, 60)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{path}" + (f", {where}: " if where else ": "))
    assert words in line


# -- a Prometheus range export ---------------------------------------------------------------------
def test_a_prometheus_export_gives_rates_from_counter_increases_and_lengths_from_the_histograms():
    t = read_export(EXPORT, 60)  # figures derived by hand in tests/fixtures/traffic/make_prometheus.py
    assert [(i.start_minute, i.minutes) for i in t.intervals] == [(0, 60), (60, 60)]
    assert t.intervals[0].requests_per_second == pytest.approx(7560 / 3600)
    assert t.intervals[1].requests_per_second == pytest.approx(7460 / 3600)  # engine 1 restarted: 800 counted
    assert [(i.isl, i.osl) for i in t.intervals] == [(1000, 250), (2000, 300)]
    assert t.window_start == "2026-01-01T00:00:00Z"
    assert t.source.startswith("prometheus vllm-fleet-range.json (15,020 requests; lengths from the prompt and")
    # the _bucket histograms: every prompt in (500, 1000] (7,560) or (1000, 2000] (7,460), placed at one
    # fraction of each bucket, fitted to the measured mean 22,480,000 / 15,020: the buckets' tops (f = 1)
    assert (t.lengths.prompt.edges, t.lengths.prompt.weights) == ((1000, 1001, 2000, 2001), (7560, 0, 7460))
    # every output in (200, 500]: the point [201, 500] at the measured mean (7,560 × 250 + 7,460 × 300) / 15,020
    # = 274.83 -> 275
    assert (t.lengths.output.edges, t.lengths.output.weights) == ((275, 276), (15020,))


def test_half_hour_bins_put_each_increase_where_its_span_lies():
    t = read_export(EXPORT, 30)
    assert [round(i.requests_per_second * 1800) for i in t.intervals] == [3780, 3780, 3680, 3780]


def test_without_histograms_the_token_counters_give_the_lengths(tmp_path):
    doc = json.loads(EXPORT.read_text())
    doc["data"]["result"] = [r for r in doc["data"]["result"] if "request_prompt" not in r["metric"]["__name__"]]
    t = read_export(write(tmp_path, json.dumps(doc), "export.json"), 60)
    assert "lengths from the token counters" in t.source and t.lengths is None  # no buckets, no histograms
    assert t.intervals[0].isl == math.ceil(1890 * 4 * 1000 / 7560)  # every request's 1,000 prompt tokens / requests


@pytest.mark.parametrize("change, words", [
    (lambda d: d.update(status="error"), "is not a successful query_range answer"),
    (lambda d: d["data"].update(resultType="vector"), "'vector' is not a range (matrix)"),
    (lambda d: d["data"].update(result=[r for r in d["data"]["result"]
                                        if r["metric"]["__name__"] != "vllm:request_success_total"]),
     "holds no vllm:request_success_total series"),
    (lambda d: d["data"]["result"][0]["metric"].pop("__name__"), "export the raw series"),
    (lambda d: d["data"]["result"][0]["values"].reverse(), "is not after the sample before it"),
])
def test_a_bad_export_is_one_line_naming_where(tmp_path, change, words):
    doc = json.loads(EXPORT.read_text())
    change(doc)
    with pytest.raises(InputError) as err:
        read_export(write(tmp_path, json.dumps(doc), "export.json"), 60)
    assert words in str(err.value) and "\n" not in str(err.value)


# -- the policy, by hand -----------------------------------------------------------------------------
def hours(needs: list[int]) -> list[Interval]:
    return [Interval(start_minute=60 * h, minutes=60, requests_per_second=1.0, isl=1, osl=1) for h in range(len(needs))]


def test_replicas_start_lead_minutes_before_a_ramp_and_stay_the_scale_down_delay_after():
    need = [1, 1, 4, 4, 2, 2]
    assert hold(need, hours(need), 0, 0, cyclic=False) == need
    assert hold(need, hours(need), 10, 0, cyclic=False) == [1, 4, 4, 4, 2, 2]
    assert hold(need, hours(need), 0, 5, cyclic=False) == [1, 1, 4, 4, 4, 2]
    assert hold(need, hours(need), 61, 0, cyclic=False) == [4, 4, 4, 4, 2, 2]  # more than an hour ahead
    # the running replicas as steps: 10 minutes ahead of 02:00, 5 minutes after 04:00
    assert steps(need, hours(need), 10, 5, cyclic=False) == [(0.0, 110.0, 1), (110.0, 245.0, 4), (245.0, 360.0, 2)]


def test_a_profile_is_a_cycle_its_last_hour_ramps_into_its_first():
    need = [5, 1, 1, 1]
    assert hold(need, hours(need), 10, 0, cyclic=True) == [5, 1, 1, 5]
    assert hold(need, hours(need), 10, 0, cyclic=False) == [5, 1, 1, 1]
    assert at_risk(need, hours(need), 10, 0, cyclic=True) == [True, False, False, False]
    assert at_risk(need, hours(need), 0, 0, cyclic=True) == [False] * 4
    assert at_risk(need, hours(need), 10, 0, cyclic=False) == [False] * 4  # nothing known before the window


def test_a_dip_the_scale_down_delay_covers_is_no_ramp_at_risk():
    need = [2, 6, 4, 6, 6, 1, 6]
    assert at_risk(need, hours(need), 5, 5, cyclic=False) == [False, True, False, True, False, False, True]
    assert at_risk(need, hours(need), 5, 60, cyclic=False) == [False, True, False, False, False, False, False]


def test_lengths_are_binned_up_to_two_significant_digits():
    assert [length_bin(n, load()) for n in (7, 99, 100, 101, 512, 1234, 20000)] == [7, 99, 100, 110, 520, 1300, 20000]


@given(need=st.lists(st.integers(0, 20), min_size=2, max_size=30), lead=st.one_of(st.just(0.0), st.floats(0.01, 300)),
       more=st.floats(0, 300),
       down=st.floats(0, 120), cyclic=st.booleans())
def test_a_longer_lead_never_runs_fewer_replicas_and_covers_every_ramp(need, lead, more, down, cyclic):
    intervals = hours(need)
    short, long = hold(need, intervals, lead, down, cyclic), hold(need, intervals, lead + more, down, cyclic)
    assert all(b >= a >= n for a, b, n in zip(short, long, need, strict=True))
    for j in range(1, len(need)):  # before a ramp the replicas it needs already run
        if lead > 0 and need[j] > need[j - 1]:
            assert short[j - 1] >= need[j]
    total = sum((b - a) * n for a, b, n in steps(need, intervals, lead, down, cyclic))
    assert total >= sum(60 * n for n in need) - 1e-6  # the schedule never runs less than the need
    window = 60 * len(need)  # by brute force: interval i runs the need of every j whose held span meets it
    shifts = (-window, 0, window) if cyclic else (0,)
    assert short == [max(n for j, n in enumerate(need) if any(
        60 * i < 60 * (j + 1) + k + down and 60 * (i + 1) > 60 * j + k - lead for k in shifts))
        for i in range(len(need))]


# -- the schedule on a real shape (the serving simulator) -------------------------------------------
@cache
def shape():
    """Llama 3.1 8B on one H100 at isl 512 / osl 128, its first dominant row, with its spec."""
    from planner.candidates.service import ResolvedService
    from planner.request import ServiceSpec, SloSpec, WorkloadSpec
    from planner.scenario import PoolLimits
    from planner.search.cpsat import tables_for
    from planner.traffic.schedule import PoolShape

    spec = ServiceSpec(model="llama-3.1-8b", concurrency=1, workload=WorkloadSpec(isl=512, osl=128,
                       requests_per_second=10.0), slo=SloSpec(p99_ttft_ms=1000, p99_tpot_ms=40))
    table = tables_for(ResolvedService.of(spec, PoolLimits(chips=("h100",))))[0]
    return spec, PoolShape(table, table.dominant()[0])


def planned(rates: list[float], lead: float = 0.0):
    from planner.app.schedule import ScheduleRequest, schedule

    spec, pool = shape()
    traffic = Traffic(intervals=[Interval(start_minute=60 * h, minutes=60, requests_per_second=r, isl=512, osl=128)
                                 for h, r in enumerate(rates)], source="test", lead_minutes=lead, cyclic=True)
    return schedule(ScheduleRequest(name="s", service=spec, traffic=traffic, shape=pool))


SLOW = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SLOW
@given(rate=st.floats(0.5, 120))
def test_a_flat_profile_gives_the_static_plan(rate):
    from planner.candidates import slo
    from planner.candidates.service import sweep_model
    from planner.traffic.schedule import at

    spec, pool = shape()
    static = slo.size(slo.Candidate(sweep_model(spec.model, None), pool.table, at(spec, 512, 128, rate), pool.row,
                                    load()),
                      1, None).replicas  # as the static plan sizes the pool (binned 520 / 130 would not fit 640)
    s = planned([rate] * 24)
    assert {i.replicas for i in s.intervals} == {static} == {s.static_replicas}
    assert s.cost_autoscaled_per_day == s.cost_static_per_day and not any(i.at_risk for i in s.intervals)


@SLOW
@given(rates=st.lists(st.floats(0, 60), min_size=24, max_size=24).filter(any), factor=st.floats(1, 3))
def test_scaling_a_profile_up_never_costs_less(rates, factor):
    low, high = planned(rates), planned([r * factor for r in rates])
    assert high.cost_autoscaled_per_day >= low.cost_autoscaled_per_day
    assert high.cost_static_per_day >= low.cost_static_per_day
    assert all(b.replicas >= a.replicas for a, b in zip(low.intervals, high.intervals, strict=True))


@SLOW
@given(rates=st.lists(st.floats(0, 60), min_size=24, max_size=24).filter(any), lead=st.floats(0, 90),
       more=st.floats(1, 120))
def test_a_longer_lead_time_never_needs_fewer_replicas_before_a_ramp(rates, lead, more):
    short, long = planned(rates, lead), planned(rates, lead + more)
    assert all(b.replicas >= a.replicas for a, b in zip(short.intervals, long.intervals, strict=True))
    assert long.gpu_hours_autoscaled >= short.gpu_hours_autoscaled


def test_every_interval_meets_the_targets_at_its_share_and_the_peak_one_replica_fewer_does_not():
    s = planned([5.0] * 8 + [200.0] * 8 + [150.0] * 8)
    peak = next(i for i in s.intervals if i.interval.requests_per_second == 200.0)
    assert all(i.p99_ttft_ms <= 1000 and i.p99_tpot_ms <= 40 for i in s.intervals)
    assert math.ceil(200.0 / s.per_replica_rate) - 1 <= peak.needed <= math.ceil(200.0 / s.per_replica_rate)
    assert s.gpu_hours_static == 24 * s.static_replicas * s.shape.gpus_per_replica


def test_the_peak_is_checked_by_simulation_both_ways(monkeypatch):
    """An understated rate per replica (half the highest) gives twice the replicas by ceil(rate / it);
    the peak's check, simulated at one replica fewer while that meets, brings it back to the static
    plan's count, and no lower interval needs more than the peak."""
    from planner.candidates import slo
    from planner.candidates.service import sweep_model
    from planner.traffic.schedule import at

    spec, pool = shape()
    static = slo.size(slo.Candidate(sweep_model(spec.model, None), pool.table, at(spec, 512, 128, 90.0), pool.row,
                                    load()),
                      1, None).replicas
    real = slo.highest_rate

    def halved(candidate, ceiling):
        found = real(candidate, ceiling)
        found.rate /= 2
        return found

    monkeypatch.setattr(slo, "highest_rate", halved)
    s = planned([90.0] * 12 + [80.0] * 12)
    assert s.static_replicas == static
    assert max(i.needed for i in s.intervals) == static


# -- a scenario -----------------------------------------------------------------------------------
SCENARIO = """\
review: traffic
services:
  - name: chat
    model: llama-3.1-8b
    chips: [h100]
    slo: {{p99_ttft_ms: 1000, p99_tpot_ms: 40}}
    traffic: {{trace: {trace}, interval_minutes: 60, lead_minutes: 10}}
"""


def test_a_scenario_reads_its_trace_beside_it_and_prints_the_schedule(tmp_path):
    (tmp_path / "logs").mkdir()
    rows = [f"{1767225600 + k * 9},{400 + k % 200},{100 + k % 50}" for k in range(0, 20000)]  # 50 h of 0.11 req/s
    write(tmp_path / "logs", "timestamp,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    scenario = write(tmp_path, SCENARIO.format(trace="logs/trace.csv"), "review.yaml")
    code, out, err = cli(["scenario", str(scenario), "--format", "json"])
    assert code == 0, err
    s = json.loads(out)["schedules"][0]
    assert s["service"] == "chat" and s["source"] == "trace trace.csv (20,000 requests)"
    assert len(s["intervals"]) == 50 and s["lead_minutes"] == 10
    assert {"cost_static_per_day", "cost_autoscaled_per_day"} <= set(s)
    code, out, err = cli(["scenario", str(scenario)])
    assert code == 0 and "chat — schedule" in out and "static peak pool" in out
    code, out, err = cli(["scenario", str(scenario), "--format", "markdown"])
    assert code == 0 and "#### chat — autoscaled schedule" in out and "| from | to | req/s |" in out


def test_a_bad_trace_in_a_scenario_is_exit_2_naming_the_row_and_column(tmp_path):
    write(tmp_path, "timestamp,input_tokens,output_tokens\n5,1,1\n4,1,1\n")
    scenario = write(tmp_path, SCENARIO.format(trace="trace.csv"), "review.yaml")
    code, out, err = cli(["scenario", str(scenario)])
    assert code == 2 and "Traceback" not in err
    assert f"{tmp_path / 'trace.csv'}, row 3, column timestamp: 4 is earlier than the row before it" in err


def test_a_service_with_traffic_needs_service_targets_and_no_second_rate(tmp_path):
    text = ("services:\n  - {name: chat, model: llama-3.1-8b, chips: [h100], concurrency: 4, "
            "workload: {isl: 10, osl: 10, requests_per_second: 3},\n"
            "     traffic: {hourly_requests_per_second: [" + ", ".join(["1"] * 24) + "]}}\n")
    code, _, err = cli(["scenario", str(write(tmp_path, text, "review.yaml"))])
    assert code == 2
    assert "services.chat.slo: a schedule meets service targets" in err
    assert "services.chat.workload.requests_per_second: the traffic gives the rate" in err
    code, _, err = cli(["scenario", str(write(tmp_path, text.replace("concurrency: 4,", "serving: disagg,"),
                                               "review.yaml"))])
    assert code == 2 and "services.chat.serving: a schedule scales one aggregated pool" in err


def test_a_shape_that_misses_another_intervals_lengths_alone_is_a_note_not_a_schedule(tmp_path):
    """The static plan is sized at the busiest interval (short prompts, 1 request/s); a later hour of
    a few 30,000-token prompts misses a 300 ms TTFT on that shape even alone: said, not scheduled."""
    rows = [f"{k},500,100" for k in range(3600)] + [f"{3600 + 360 * k},30000,2000" for k in range(10)]
    write(tmp_path, "timestamp,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    text = SCENARIO.format(trace="trace.csv").replace("p99_ttft_ms: 1000, p99_tpot_ms: 40", "p99_ttft_ms: 300")
    code, out, err = cli(["scenario", str(write(tmp_path, text, "review.yaml")), "--format", "json"])
    result = json.loads(out)
    assert code == 0 and result["schedules"] == []
    assert any(n.startswith("chat: no schedule: ") and "misses the targets at isl 30000, osl 2000 even one request "
               "at a time (p99 ttft" in n for n in result["notes"])


def test_the_chart_draws_the_rate_the_replicas_and_the_cost_beside_the_reviews_own(tmp_path):
    rates = ", ".join(str(r) for r in [5] * 8 + [80] * 8 + [20] * 8)
    text = ("review: day\nservices:\n  - {name: chat, model: llama-3.1-8b, chips: [h100], workload: {isl: 512, "
            "osl: 128},\n     slo: {p99_ttft_ms: 1000, p99_tpot_ms: 40},\n     traffic: {hourly_requests_per_second: "
            f"[{rates}], lead_minutes: 30}}}}\n")
    chart = tmp_path / "review.svg"
    code, _, err = cli(["scenario", str(write(tmp_path, text, "review.yaml")), "--chart", str(chart)])
    drawn = (tmp_path / "review-schedule.svg").read_text()
    assert code == 0 and f"wrote {tmp_path / 'review-schedule.svg'}" in err
    for gid in ("rate-chat", "replicas-chat", "needed-chat", "static-chat", "risk-chat", "cost-chat"):
        assert f'id="{gid}' in drawn, gid


def test_a_growth_variant_scales_the_traffic_and_never_costs_less(tmp_path):
    rates = ", ".join(str(r) for r in [4] * 12 + [40] * 12)
    text = ("review: day\nservices:\n  - {name: chat, model: llama-3.1-8b, chips: [h100], workload: {isl: 512, "
            "osl: 128},\n     slo: {p99_ttft_ms: 1000, p99_tpot_ms: 40},\n     traffic: {hourly_requests_per_second: "
            f"[{rates}]}}}}\nvariants:\n  busy: {{growth: 2.5}}\n")
    code, out, err = cli(["scenario", str(write(tmp_path, text, "review.yaml")), "--variants", "--format", "json"])
    assert code == 0, err
    both = json.loads(out)
    base, busy = both["base"]["schedules"][0], both["variants"][0]["schedules"][0]
    assert [i["interval"]["requests_per_second"] for i in busy["intervals"]] == [10.0] * 12 + [100.0] * 12
    assert busy["source"] == "hourly profile, rates × 2.5" and base["source"] == "hourly profile"
    assert busy["cost_autoscaled_per_day"] > base["cost_autoscaled_per_day"]


def test_a_scale_beyond_the_planners_ceiling_is_named():
    with pytest.raises(InputError) as err:
        TrafficSpec(hourly_requests_per_second=[1.0] * 24, scale=1e9).resolve(10, 10)
    assert str(err.value).startswith("scale: 1e+09 × the busiest interval is 1e+09 requests/s, above the")


def test_a_scenario_with_traffic_validates_against_the_one_schema(tmp_path):
    """Every key of a schedule is one the schema (`plan --schema`) names (tests/test_json_schema.py's
    closed schema: an unnamed key fails)."""
    import jsonschema

    from tests.test_json_schema import closed

    rates = ", ".join(str(r) for r in [2] * 12 + [30] * 12)
    text = ("review: day\nservices:\n  - {name: chat, model: llama-3.1-8b, chips: [h100], workload: {isl: 512, "
            "osl: 128},\n     slo: {p99_ttft_ms: 1000, p99_tpot_ms: 40},\n     traffic: {hourly_requests_per_second: "
            f"[{rates}]}}}}\n")
    code, out, _ = cli(["scenario", str(write(tmp_path, text, "review.yaml")), "--format", "json"])
    _, schema, _ = cli(["--schema"])
    report = json.loads(out)
    assert code == 0 and report["schedules"]
    jsonschema.Draft202012Validator(closed(json.loads(schema))).validate(report)
    report["schedules"][0]["intervals"][0]["not_in_the_schema"] = 1
    assert not jsonschema.Draft202012Validator(closed(json.loads(schema))).is_valid(report)


def test_a_spreadsheets_byte_order_mark_is_no_part_of_the_header(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_bytes("timestamp,input_tokens,output_tokens\r\n0,10,5\r\n".encode("utf-8-sig"))
    assert [(i.isl, i.osl) for i in read_trace(path, 60).intervals] == [(10, 5)]


@pytest.mark.parametrize("body, words", [
    ("timestamp,input_tokens,output_tokens\n1767225600000,1,1\n",
     "row 2, column timestamp: 1767225600000 is too large for epoch seconds (milliseconds?)"),
    ("timestamp,input_tokens,output_tokens\n0,1,1\n604800,1,1\n",
     "row 3, column timestamp: 604800 is 10,081 intervals of 1 minute after the trace's start; at most 10,080"),
])
def test_a_window_no_review_means_is_named_not_binned(tmp_path, body, words):
    with pytest.raises(InputError) as err:
        read_trace(write(tmp_path, body), 1)
    assert words in str(err.value)


def test_a_concurrency_asked_beside_the_traffic_is_held_all_day():
    from planner.app.schedule import ScheduleRequest, schedule

    spec, pool = shape()
    held = spec.model_copy(update={"concurrency": 3 * pool.row.concurrency})  # three replicas' worth
    traffic = Traffic(intervals=[Interval(start_minute=60 * h, minutes=60, requests_per_second=r, isl=512, osl=128)
                                 for h, r in enumerate([1.0] * 12 + [200.0] * 12)], source="test", cyclic=True)
    s = schedule(ScheduleRequest(name="s", service=held, traffic=traffic, shape=pool))
    assert min(i.needed for i in s.intervals) == 3 and s.intervals[0].needed == 3
    assert max(i.needed for i in s.intervals) > 3


# -- length distributions --------------------------------------------------------------------------
# prompts of 256 tokens and, one in 15, 4,096: a mean of (14 × 256 + 4,096) / 15 = 512 exactly; outputs 128
TAIL = {"prompt": {"edges": [256, 257, 4096, 4097], "weights": [14, 0, 1]},
        "output": {"edges": [128, 129], "weights": [1]}}


@cache
def long_shape():
    """Llama 3.1 8B on one H100 with an 8,192-token context (the tail's 4,224-token requests fit)."""
    from planner.candidates.service import ResolvedService
    from planner.request import ServiceSpec, SloSpec, WorkloadSpec
    from planner.scenario import PoolLimits
    from planner.search.cpsat import tables_for
    from planner.traffic.schedule import PoolShape

    spec = ServiceSpec(model="llama-3.1-8b", concurrency=1, context_length=8192, workload=WorkloadSpec(
        isl=512, osl=128, requests_per_second=10.0), slo=SloSpec(p99_ttft_ms=1000, p99_tpot_ms=40))
    table = tables_for(ResolvedService.of(spec, PoolLimits(chips=("h100",))))[0]
    return spec, PoolShape(table, table.dominant()[0])


def test_a_shipped_histogram_gives_the_means_and_the_longest_request_and_is_drawn():
    from planner.candidates.slo import traffic
    from planner.request import ServiceSpec, WorkloadSpec
    from pricing.serving import Histogram

    w = WorkloadSpec(lengths="sharegpt", requests_per_second=2)
    # sharegpt.yaml's means, rounded up: 161.3 and 338.0 (the paper's 161.31 and 337.99)
    assert (w.isl, w.osl) == (162, 338) and w.longest == 2047 + 2047  # each top edge 2,048, half-open
    assert WorkloadSpec(lengths="sharegpt", isl=162, osl=338) == WorkloadSpec(lengths="sharegpt")
    t = traffic(ServiceSpec(model="llama-3.1-8b", concurrency=1, workload=w), 2.0, count=500, reads=load())
    assert isinstance(t.prompt, Histogram) and t.prompt.edges[-1] == 2048
    _, prompts, outputs = t.requests()
    assert len(set(prompts)) > 100 and 4 <= min(prompts) and max(prompts) < 2048 and max(outputs) < 2048


@pytest.mark.parametrize("workload, words", [
    ({"lengths": "sharegp"}, "no shipped length histogram 'sharegp'; use one of: sharegpt"),
    ({"lengths": "sharegpt", "isl": 100}, "isl 100 is not the lengths' mean isl 162 (rounded up); leave isl out or "
     "give 162"),
    ({"lengths": "sharegpt", "range_ratio": 0.2}, "give lengths or range_ratio, not both"),
    ({"lengths": {"prompt": {"edges": [8, 4], "weights": [1]}, "output": {"edges": [1, 2], "weights": [1]}}},
     "edges must rise from at least 1 token"),
])
def test_a_bad_lengths_is_one_line_exit_2(tmp_path, workload, words):
    text = ("review: t\nservices:\n  - {name: chat, model: llama-3.1-8b, chips: [h100], slo: {p99_ttft_ms: 1000},\n"
            f"     workload: {json.dumps({**workload, 'requests_per_second': 2})}}}\n")
    code, out, err = cli(["scenario", str(write(tmp_path, text, "review.yaml"))])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "services.chat.workload" in err and words in err


def test_a_traces_histograms_reach_the_static_plan_and_its_context(tmp_path):
    """The trace's requests: 14 of 256 prompt tokens and one of 4,096 each minute: the static plan
    draws from them (its context covers the longest prompt and output, 4,096 + 128)."""
    rows = [f"{60 * k + j},{4096 if j == 14 else 256},128" for k in range(60) for j in range(15)]
    write(tmp_path, "timestamp,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    code, out, err = cli(["scenario", str(write(tmp_path, SCENARIO.format(trace="trace.csv"), "review.yaml")),
                          "--format", "json"])
    assert code == 0, err
    result = json.loads(out)
    assert "--max-model-len 4224" in json.dumps(result)
    assert result["schedules"][0]["source"] == "trace trace.csv (900 requests)"


@SLOW
@given(rates=st.lists(st.floats(0, 80), min_size=4, max_size=4).filter(any))
def test_a_long_tail_with_the_same_means_never_needs_fewer_replicas(rates):
    """A trace whose mean lengths equal a fixed-length trace's (512 / 128) but whose prompts have a
    long tail needs at least as many replicas in every interval: by its histograms alone (a
    workload's lengths) and as a trace (the histograms beside each interval's means)."""
    from planner.request import LengthsSpec, WorkloadSpec
    from planner.traffic.schedule import demand

    spec, pool = long_shape()
    intervals = [Interval(start_minute=60 * h, minutes=60, requests_per_second=r, isl=512, osl=128)
                 for h, r in enumerate(rates)]
    fixed = demand(spec, pool, Traffic(intervals=intervals, source="fixed")).needed
    drawn = spec.model_copy(update={"workload": WorkloadSpec(lengths=TAIL, requests_per_second=10.0)})
    assert (drawn.workload.isl, drawn.workload.osl) == (512, 128)
    alone = demand(drawn, pool, Traffic(intervals=intervals, source="tail")).needed
    traced = demand(spec, pool, Traffic(intervals=intervals, source="tail", lengths=LengthsSpec(**TAIL))).needed
    assert all(a >= f for a, f in zip(alone, fixed, strict=True))
    assert all(t >= max(a, f) for t, a, f in zip(traced, alone, fixed, strict=True))


def test_the_tail_lowers_the_rate_one_replica_serves():
    """At the same means, one prompt in 15 of 4,096 tokens reaches the p99 TTFT: one replica serves
    fewer requests a second than at the fixed lengths."""
    from planner.request import LengthsSpec
    from planner.traffic.schedule import demand

    spec, pool = long_shape()
    intervals = [Interval(start_minute=0, minutes=60, requests_per_second=60.0, isl=512, osl=128)]
    fixed = demand(spec, pool, Traffic(intervals=intervals, source="fixed"))
    traced = demand(spec, pool, Traffic(intervals=intervals, source="tail", lengths=LengthsSpec(**TAIL)))
    assert traced.rates[(512, 128)] < fixed.rates[(520, 130)]
    assert traced.needed[0] > fixed.needed[0] and traced.bins[0] == (512, 128)


def test_a_traces_interval_needs_the_more_of_its_mean_lengths_and_the_windows_histograms():
    """A busy hour of short prompts (60 requests/s at 256 tokens) and a quieter one of long prompts
    (30 at 2,048): the window's histograms (two of 256 to one of 2,048) carry the first hour's tail,
    the second hour's own mean lengths its longer prompts; each interval needs the more of the two."""
    from planner.request import LengthsSpec, WorkloadSpec
    from planner.traffic.schedule import demand

    spec, pool = long_shape()
    mix = {"prompt": {"edges": [256, 257, 2048, 2049], "weights": [2, 0, 1]},
           "output": {"edges": [128, 129], "weights": [1]}}
    intervals = [Interval(start_minute=0, minutes=60, requests_per_second=60.0, isl=256, osl=128),
                 Interval(start_minute=60, minutes=60, requests_per_second=30.0, isl=2048, osl=128)]
    means = demand(spec, pool, Traffic(intervals=intervals, source="means")).needed
    drawn = spec.model_copy(update={"workload": WorkloadSpec(lengths=mix, requests_per_second=10.0)})
    histograms = demand(drawn, pool, Traffic(intervals=intervals, source="drawn")).needed
    traced = demand(spec, pool, Traffic(intervals=intervals, source="trace", lengths=LengthsSpec(**mix)))
    assert histograms[0] > means[0] and means[1] > histograms[1]  # each way binds once
    assert traced.needed == [max(m, h) for m, h in zip(means, histograms, strict=True)]
    assert traced.bins == [(854, 128), (2100, 130)]  # the mix's means (2 × 256 + 2048) / 3 -> 854; 2,048 binned up
