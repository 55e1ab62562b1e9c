"""The step model's measured error where it was not fitted, by regime (pricing/registry/speed_bands.yaml,
written by scripts/fits/speed_bands.py from the held-back rows of validation/vllm_silicon_points.yaml): the
band a plan prints beside its TPOT and TTFT. Only vLLM's CUDA factors are measured there; a chip priced
at the ROCm build's (pricing/step/step.py factor_set) has no band."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SpeedBand(BaseModel):
    """The error of one printed speed figure's regime, on rows the step model was not fitted on."""

    requests_from: int = Field(description="the regime: concurrent requests per rank, from")
    requests_to: int | None = Field(description="to (inclusive); null: no top")
    median_abs_error: float = Field(description="median |predicted / measured - 1| over its held-back rows")
    p90_abs_error: float = Field(description="90th percentile of the same")
    rows: int = Field(description="held-back rows in the regime")
    context_to: int = Field(description="the longest context (TPOT) or prompt (TTFT) those rows are priced at")
    applies: bool = Field(description="the figure's context is within context_to; false: beyond what the rows "
                                      "measure, and the band is not printed")
    source: str = Field(description="the registry value it is read from (speed_bands.<metric>.<regime>)")

    def words(self) -> str:
        """'held-out rows at 32+ requests: median |error| 8%, p90 20%, n = 76', or that the figure's
        context is beyond what they measure."""
        span = (f"{self.requests_from}+" if self.requests_to is None else
                f"{self.requests_from}-{self.requests_to}")
        if not self.applies:
            return f"no held-out band: the held-out rows at {span} requests reach only {self.context_to:,} tokens"
        return (f"held-out rows at {span} requests: median |error| {self.median_abs_error:.0%}, "
                f"p90 {self.p90_abs_error:.0%}, n = {self.rows}")


def band(metric: str, requests: int, context: int, kernel) -> SpeedBand | None:
    """The band of `metric` ('tpot' or 'ttft') at `requests` per rank and `context` tokens (the
    context TPOT is priced at, or the prompt) for the kernel's chip, or None: no held-back row
    measures that many requests, or the chip's factors are not the CUDA set the rows measure."""
    from pricing.step.composed import OPERATORS, composition
    from pricing.step.step import ROCM_ENGINE, factor_set

    if factor_set(kernel) == ROCM_ENGINE or composition(kernel.reg) == OPERATORS:
        return None  # the bands measure the fitted step (the operator step's: scripts/operators/validate.py)
    reg = kernel.reg  # the registry the kernel was priced with
    for name in reg.names(f"speed_bands.{metric}."):
        v = reg.value(name)
        if v["requests_from"] <= requests and (v["requests_to"] is None or requests <= v["requests_to"]):
            return SpeedBand(**{k: v[k] for k in ("requests_from", "requests_to", "median_abs_error",
                                                  "p90_abs_error", "rows", "context_to")},
                             applies=context <= v["context_to"], source=name)
    return None
