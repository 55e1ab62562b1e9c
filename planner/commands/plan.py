"""`plan --model M --chip C --concurrency N`: the cheapest pool (placeholder until the planner lands)."""

from __future__ import annotations

import click


def plan_options(f):
    f = click.option("--model", help="model card name, config.json path or cached HF id")(f)
    f = click.option("--chip", multiple=True, help="chip id (repeat to choose among chips)")(f)
    f = click.option("--concurrency", type=int, help="concurrent requests to serve")(f)
    return f


def run(ctx: click.Context, **options) -> None:
    if not options.get("model"):
        click.echo(ctx.get_help())
        return
    raise click.UsageError("the planner is not built yet")
