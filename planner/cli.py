"""The `plan` command line. Each command is thin: parse flags into models, call the library,
render. Bad input is one line on stderr naming the field and the fix, exit status 2."""

from __future__ import annotations

import sys
from pathlib import Path

from planner.commands import signals

if __name__ == "__main__" or Path(sys.argv[0]).name == "plan":  # started as the command: from its first imports
    signals.while_starting()  # on, a signal is one line and 130 or 143 (`main` then takes over)

import click  # noqa: E402

from planner.commands import plan  # noqa: E402
from planner.commands.flags import check_argv, one_line_each  # noqa: E402
from planner.commands.signals import exit_on_signals, interrupted_in, said, when_done  # noqa: E402
from planner.report.atomic import Interrupted  # noqa: E402
from pricing.errors import InputError  # noqa: E402


class Commands(click.Group):
    """Subcommands imported when used: `plan --help`, `plan models` and `plan chips` load neither
    OR-Tools nor matplotlib (bench/bench_cli.py measures it)."""

    lazy = {"memory": "planner.commands.memory:memory", "models": "planner.commands.memory:models",
            "chips": "planner.commands.memory:chips", "scenario": "planner.commands.scenario:scenario_command",
            "compare": "planner.commands.scenario:compare_command",
            "check-log": "planner.commands.calibration:check_log",
            "calibrate": "planner.commands.calibration:calibrate"}

    # each subcommand's first docstring line, so that `plan --help` lists them without importing them
    # (tests/test_bad_input.py checks it against the commands' own help)
    summaries = {"memory": "One rank's memory for one deployment: the spec's breakdown, the engine's KV cache size "
                           "and maximum concurrency",
                  "models": "The model cards the project ships (--model takes the name).",
                  "chips": "The chips the project knows, with the memory vLLM sees, how their GPUs connect and a "
                          "default price",
                  "scenario": "Plan every service of a scenario FILE together over its inventory.",
                  "compare": "The same scenario under each variant (FILE), or a sweep given on the command line",
                  "check-log": "Read a vLLM start-up log (FILE, or - for standard input) of any release from 0.6 to "
                              "0.33, rebuild its deployment, and print predicted against logged memory per component",
                  "calibrate": "Fit the fixed-memory laws (sampler bytes per logit, non-torch memory, CUDA-graph "
                              "laws, engine workspace) to RECORDS"}

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def format_commands(self, ctx, formatter):
        """The subcommands and their short help, none imported."""
        rows = [(name, self.summaries[name]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx, name):
        found = super().get_command(ctx, name)
        if found is None and name in self.lazy:
            import importlib

            module, attr = self.lazy[name].split(":")
            found = getattr(importlib.import_module(module), attr)
        return found


@click.group(cls=Commands, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=None, package_name="deployment-planner", prog_name="plan",
                      message="%(prog)s %(version)s (deployment-planner; vLLM 0.33 memory rules)")
@plan.plan_options
@click.pass_context
def cli(ctx: click.Context, **options):
    """Plan the cheapest pool of GPUs that serves a model at a target concurrency.

    Without a subcommand: plan one service (see the options). Subcommands: memory (one
    deployment's per-rank memory), models, chips, scenario, compare, check-log (a vLLM start-up
    log against the kernel), calibrate (fit the fixed-memory laws to start-up records).
    """
    if ctx.invoked_subcommand not in ("models", "chips"):  # those print text: no candidate tables, no kernel
        from planner.app.api import table_store
        from planner.commands.registry_option import TABLES

        # one command's services and variants share their graphs and candidate tables: one store, handed down
        ctx.meta[TABLES] = ctx.with_resource(table_store())
    if ctx.invoked_subcommand is None:
        plan.run(ctx, **options)


def main(argv: list[str] | None = None) -> int:
    """Entry point: one-line errors, exit status 2 for bad input, no traceback."""
    try:
        return _main(argv)
    finally:
        when_done()  # the answer is given: a signal from here on changes nothing


def _main(argv: list[str] | None) -> int:
    try:
        with exit_on_signals():  # SIGINT, SIGTERM: one line, exit 130 or 143 (planner/commands/signals.py)
            check_argv(cli, sys.argv[1:] if argv is None else argv)  # a repeated single-valued option, an empty value
            result = cli.main(args=argv, prog_name="plan", standalone_mode=False)
    except Interrupted as err:
        click.echo(said(err.code), err=True)
        return err.code
    except InputError as err:  # one line (a scenario file's: one per error), whatever the input held
        click.echo(f"plan: error: {one_line_each(getattr(err, 'lines', None) or [str(err)])}", err=True)
        return 2
    except OverflowError as err:  # the solver's integer range (planner/search.py _weights): input too large
        click.echo(f"plan: error: {err}", err=True)
        return 2
    except click.UsageError as err:
        hint = f" (see `plan {err.ctx.info_name if err.ctx and err.ctx.parent else ''} --help`)".replace("  ", " ")
        click.echo(f"plan: error: {err.format_message()}{hint}", err=True)
        return 2
    except click.exceptions.Abort:
        click.echo("plan: aborted", err=True)
        return 1
    except click.ClickException as err:
        click.echo(f"plan: error: {err.format_message()}", err=True)
        return err.exit_code
    except Exception as err:  # a signal's Interrupted that Python wrapped (signals.interrupted_in), else a bug
        stopped = interrupted_in(err)
        if stopped is None:
            raise
        click.echo(said(stopped.code), err=True)
        return stopped.code
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
