"""`plan check-log`'s text: the deployment the log was rebuilt as, then predicted against logged
memory per component in a table that fits the terminal (narrower than planner/defaults.yaml
report.check_log_inline_width the explanations follow the table, one paragraph each, wrapped at the
terminal's width; a figure is never cut), then the start-up verdicts."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from pricing.units import GiB


def _figure(value, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "bytes":
        return f"{value / GiB:.2f} GiB"
    if unit == "tokens":
        return f"{int(value):,}"
    return f"{value:.2f}x"


def render(r, console: Console, inline_width: int) -> None:
    """Print a CheckReport (pricing/calibration/check.py) on `console`, every line within its width."""
    d = r.deployment

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False)

    say(f"{r.source}: vLLM {r.release} (era {r.era}; CUDA-graph estimate "
        f"{'in' if r.graph_estimate_in_budget else 'not in'} the budget), {r.model} on {r.chip}, "
        f"tp {d['tensor_parallel_size']}, utilization {d['gpu_memory_utilization']}, max_model_len "
        f"{d['max_model_len']:,}, max_num_seqs {d['max_num_seqs']}, max_num_batched_tokens "
        f"{d['max_num_batched_tokens']:,}, {d['cudagraph_mode']}")
    say("")
    narrow = console.width < inline_width  # explanations after the table (report.check_log_inline_width)
    table = Table(box=box.SIMPLE_HEAD, expand=not narrow)
    table.add_column("component", overflow="fold")
    for header in ("predicted", "logged", "error"):
        table.add_column(header, justify="right", no_wrap=True)
    if not narrow:
        table.add_column("explained by", ratio=1, overflow="fold")
    for c in r.components:
        cells = [Text(c.name), _figure(c.predicted, c.unit), _figure(c.observed, c.unit),
                 "" if c.error is None else f"{c.error:+.1%}"]
        table.add_row(*cells, *([] if narrow else [Text("; ".join(c.explained_by))]))
    console.print(table)
    if narrow:
        say("explained by:")
        for c in r.components:
            if c.explained_by:
                console.print(Padding(Text(f"{c.name}: {'; '.join(c.explained_by)}"), (0, 0, 0, 2)))
        say("")
    if r.assumed:
        say("not in the log, taken at vLLM's default: " + "; ".join(r.assumed))
    if r.refusal_logged or r.starts_predicted is False:
        say(f"logged: {r.refusal_logged or 'started'}")
        say(f"predicted: {r.refusal_predicted or 'starts'}"
            + ("" if r.verdict_agrees is None else f" ({'agrees' if r.verdict_agrees else 'DISAGREES'})"))
    elif r.starts_predicted:
        say("logged: started; predicted: starts")
