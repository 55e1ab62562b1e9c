"""`--registry overlay.yaml`: every command can lay an overlay (a team's own fitted laws, as
`plan calibrate --out` writes) over the shipped registry. It applies to that command: the overlay
is read once, kept on the command's click context (`command_registry`), and handed to the use
cases it calls (planner/app/api.py: each takes `registry`), never set aside for code below to find."""

from __future__ import annotations

import click

from pricing.registry import Registry

KEY = "planner.registry"  # where the command's context keeps its overlay (click's Context.meta)
TABLES = "planner.tables"  # where it keeps its store of graphs and candidate tables (`command_tables`)


def _activate(ctx: click.Context, param: click.Parameter, value: str | None):
    if value:
        from planner.commands.flags import in_flags, own_flag
        from pricing.errors import InputError
        from pricing.registry import read_overlay

        try:
            overlay = read_overlay(value, ctx.meta.get(KEY))  # over --step-model's choice, when click read it first
        except InputError as err:
            raise in_flags(err, lambda field: own_flag(field, ctx)) from None
        ctx.meta[KEY] = overlay
    return value


def _step_model(ctx: click.Context, param: click.Parameter, value: str | None):
    if value:
        from pricing.registry import shipped
        from pricing.step.composed import with_composition

        ctx.meta[KEY] = with_composition(ctx.meta.get(KEY) or shipped(), value, "the --step-model option")
    return value


STEP_MODEL_HELP = ("the step every speed figure is priced with: 'fitted' (the default: rooflines at efficiencies "
                   "fitted end to end, registry step_model.composition) or 'operators' (each GEMM, fused MoE, "
                   "attention and all-reduce from the measured operator tables, only the CPU-side constants "
                   "fitted; less accurate on the public runs so far: docs/step-model.md)")


def step_model_option(f):
    """`--step-model fitted|operators`: which step prices the command's speed figures (registry
    step_model.composition, for this command: kept with the command's overlay, `command_registry`)."""
    return click.option("--step-model", "step_model", type=click.Choice(["fitted", "operators"]),
                        expose_value=False, callback=_step_model, is_eager=True, help=STEP_MODEL_HELP)(f)


def command_registry(ctx: click.Context) -> Registry | None:
    """The command's registry: the `--registry` overlay and `--step-model`'s choice (None: neither given, the
    shipped registry applies)."""
    return ctx.meta.get(KEY)


def command_tables(ctx: click.Context):
    """The command's store of model graphs and candidate tables (planner/app/api.py `table_store`),
    made once per command by planner/cli.py and handed to each use case it calls (None: none made,
    each call keeps its own)."""
    return ctx.meta.get(TABLES)


def command_defaults(ctx: click.Context | None):
    """The command's planner defaults (planner/defaults.py `Defaults`): the ones its store carries
    (made once by planner/cli.py, `command_tables`), else read here (a command without a store:
    `plan models`, `plan chips`, a click option's help)."""
    tables = command_tables(ctx) if ctx is not None else None
    if tables is not None:
        return tables.defaults
    from planner import defaults

    return defaults.load()


def command_console(ctx: click.Context | None, *, stderr: bool = False):
    """The console the command prints to (planner/report/tables.py `console_for_output`), piped at
    the command's report.pipe_width."""
    from planner.report.tables import console_for_output

    return console_for_output(command_defaults(ctx).value("report.pipe_width"), stderr=stderr)


def registry_option(f):
    return click.option("--registry", "registry_overlay", metavar="OVERLAY.yaml", expose_value=False,
                        callback=_activate, is_eager=True,
                        help="lay an overlay of registry values over the shipped registry (plan calibrate --out)")(f)
