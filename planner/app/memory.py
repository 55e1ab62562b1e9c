"""`plan memory` as a use case: one rank's memory for one deployment (pricing/kernel/report.py
`memory_report`), with the step model's speed where the chip has peak rates; returned whole, the
kernel kept beside it for the printout."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, PrivateAttr

from pricing.kernel.report import MemoryReport

if TYPE_CHECKING:  # pragma: no cover
    from pricing.kernel import Kernel


class MemoryResult(MemoryReport):
    """`plan memory --json`: the per-rank breakdown, and the step model's figures (`step`, null
    when vLLM would not start the deployment or the chip has no peak rates)."""

    step: dict | None = None
    notes: list[str] = Field(default_factory=list, exclude=True, description="input that had no effect, a line each")
    _kernel: Kernel | None = PrivateAttr(None)

    @property
    def kernel(self) -> Kernel:
        """The kernel the figures were read from (the printout's rows)."""
        return self._kernel


def unused_acceptance(rates: tuple[float, ...] | None, speculative_tokens: int) -> list[str]:
    """Speculative acceptance rates without speculative decoding have no effect: say so."""
    from pricing.errors import mention

    if rates and not speculative_tokens:
        return [f"{mention('speculative_acceptance')} has no effect: no speculative decoding "
                f"({mention('num_speculative_tokens')} 0)"]
    return []


def memory(model: str, chip: str, quantization: str | None = None, memory_bytes: int | None = None,
           tokens: int = 4096, vllm_version: str | None = None, batch: int | None = None, isl: int | None = None,
           osl: int | None = None, speculative_acceptance: tuple[float, ...] | None = None,
           registry=None, **deployment) -> MemoryResult:
    """One rank's memory for `model` on `chip` in the deployment vLLM's flags give (`deployment`:
    pricing/kernel/deployment.py `Deployment`'s fields), at `tokens` of context; with the step
    model's speed at `batch` requests per rank (or the workload `isl`/`osl`). A deployment vLLM
    would not start is an answer (`starts` false, with vLLM's reason); bad input raises InputError.
    `registry`: the command's (its --registry overlay; None: the shipped one)."""
    from planner.request import check_request_fits
    from pricing.chips import get_chip
    from pricing.errors import InputError, mention
    from pricing.graph import load_model
    from pricing.kernel import Deployment, Kernel
    from pricing.kernel.report import ProvenanceOut, memory_report
    from pricing.rules import DEFAULT

    if tokens < 0:
        raise InputError("tokens", f"must not be negative, got {tokens}", "give a request length in tokens")
    graph = load_model(model, quantization, registry)
    if deployment.get("mamba_cache_mode") is not None and not any(d["state"] is not None for _, d in graph.nodes()):
        raise InputError("mamba_cache_mode", f"{graph.name} has no recurrent (Mamba) state for it to cache",
                         "drop the flag")
    target = get_chip(chip, registry).with_overrides(memory_bytes=memory_bytes)
    if (isl is None) != (osl is None):
        missing, given = ("isl", "osl") if isl is None else ("osl", "isl")
        raise InputError(missing, f"is required with {mention(given)}",
                         "give both the mean input and output tokens")
    kernel = Kernel.of(graph, Deployment(**deployment), target, registry, release=vllm_version or DEFAULT)
    check_request_fits(isl, osl, kernel.engine.max_model_len)  # before any speed is priced for it
    report = memory_report(kernel, tokens)
    speed = step_speed(kernel, tokens, batch, isl, osl, speculative_acceptance) if report.starts else None
    if speed:  # the speed line's registry values beside the memory's
        from planner.app.plan import step_provenance

        report.provenance += [ProvenanceOut(name=p.name, value=p.value, source=p.source, how=p.how)
                              for p in step_provenance(kernel)]
    out = MemoryResult(**dict(report), step=speed,
                       notes=unused_acceptance(speculative_acceptance, kernel.engine.num_speculative_tokens))
    out._kernel = kernel
    return out


def step_speed(kernel, tokens: int, batch: int | None, isl: int | None, osl: int | None,
               rates_accepted: tuple[float, ...] | None = None) -> dict | None:
    """The step model's figures for this deployment (None when the chip has no peak rates):
    `batch` requests per rank (default: what one rank holds) at `tokens` of context, or at the
    workload's mean context with `isl` and `osl`; speculating, at `rates_accepted` (default: the
    registry's acceptance)."""
    from planner.candidates.step_fields import step_fields
    from pricing.errors import InputError
    from pricing.kernel import Capacity
    from pricing.step import StepModel, has_rates
    from pricing.step.serving import Workload, serving

    if (isl is None) != (osl is None):
        raise InputError("isl" if isl is None else "osl", "the workload needs both the mean input and output tokens",
                         "give both")
    if batch is not None and batch < 1:
        raise InputError("batch", f"must be at least 1, got {batch}", "give requests per rank")
    if not has_rates(kernel.chip, kernel.reg):
        return None
    b = batch or max(1, min(kernel.engine.max_num_seqs, Capacity(kernel).requests_held() or 1))
    wl = Workload(isl, osl) if isl else None
    context = max(1, tokens)
    s = serving(StepModel(kernel, rates_accepted=rates_accepted), b, context, wl)
    return {**step_fields(s, b, wl.mean_context if wl else context, wl.isl if wl else context),
            "requests_per_second": round(s.requests_per_second, 3) if s.requests_per_second else None}
