"""Serving at a request rate: vLLM's scheduler simulated step by step on the step model.

`simulate(inst := Instance.of(kernel), StepCost.of(StepModel(kernel), inst), Traffic(...))` runs a benchmark
as `vllm bench serve` does (Poisson arrivals at a rate, or a closed loop at a concurrency;
fixed, uniform or histogram lengths; a prefix-cache hit rate) through one instance and returns
what it measures: TTFT, TPOT, ITL and end-to-end latency (any percentile), throughput, goodput.
The scheduler is vLLM 0.33's V1 FCFS scheduler (simulate.py), each step priced by the step model
(pricing/step) through cost.py's tables. A prefill pool is the same run with one output token
per request; a decode pool behind it the run with `Traffic(prefilled=True)`."""

from pricing.serving.cost import StepCost
from pricing.serving.simulate import Distribution, Instance, Served, simulate
from pricing.serving.traffic import ClosedLoop, Fixed, Histogram, Poisson, Traffic, Uniform, shipped

__all__ = ["ClosedLoop", "Distribution", "Fixed", "Histogram", "Instance", "Poisson", "Served", "StepCost",
           "Traffic", "Uniform", "shipped", "simulate"]
