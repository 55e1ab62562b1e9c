"""The library's errors name a field (`tensor_parallel_size`, `context_length`); the commands name
their flag for it, here and only here: `plan memory` takes vLLM's flags, `plan` and `plan compare`
their own shorter ones where those differ."""

from __future__ import annotations

import functools

import click

from pricing.errors import InputError, render

PLAN_FLAGS = {"tensor_parallel_size": "--tp", "context_length": "--context-length"}  # `plan`'s own names
MEMORY_FIELDS = ("batch", "isl", "osl")  # `plan memory`'s fields beside the deployment's
PARAMS = {"registry": "registry_overlay", "vllm_version": "release", "variant": "variant_names",
          "provenance": "show_provenance", "json": "as_json"}  # fields a
# command's option stores under another name (`--registry` everywhere, check-log's `--vllm-version`, `--variant`)


def option_flag(field: str) -> str:
    """The flag spelling of a field: `tensor_parallel_size` -> `--tensor-parallel-size`."""
    return "--" + field.replace("_", "-")


def memory_flag(field: str) -> str | None:
    """`plan memory`'s flag for a field (vLLM's own for a deployment's), None for no flag."""
    from pricing.kernel import Deployment  # here: `plan --help` and the light commands import no kernel

    return option_flag(field) if field in Deployment.model_fields or field in MEMORY_FIELDS else own_flag(field)


def plan_flag(field: str) -> str | None:
    """`plan`'s flag for a field: its own name, else vLLM's for a deployment's; None for no flag."""
    from pricing.kernel import Deployment

    return PLAN_FLAGS.get(field) or (option_flag(field) if field in Deployment.model_fields else own_flag(field))


def own_flag(field: str, ctx: click.Context | None = None) -> str | None:
    """The flag of the running command (or `ctx`'s) whose option holds `field` (`model` -> `--model`,
    `output_dir` -> `-o`); None when the command takes no such option."""
    ctx = ctx or click.get_current_context(silent=True)
    for param in ctx.command.params if ctx else ():
        if isinstance(param, click.Option) and param.name in (field, PARAMS.get(field)):
            return param.opts[0]
    return None


def file_flag(field: str) -> str | None:
    """`plan scenario`'s name for a field: its own flag, else the scenario file's key (`isl` ->
    `workload.isl`), None for the field itself (a service's key)."""
    from planner.scenario import file_key

    return own_flag(field) or file_key(field)


def service_flag(path: str) -> str:
    """`plan compare`'s flag for a scenario path of its one service: `services[0].context_length`
    -> `--context-length`."""
    return path.replace("services[0].", "--").replace("_", "-")


def in_flags(err: InputError, flag) -> InputError:
    """The error with its field and the fields its text mentions named as the command's flags
    (`flag`: field -> flag, or None to keep the field)."""
    return err.as_named(flag) if flag(err.field) is not None or err.mentions else err


def names_flags(flag=own_flag):
    """A command whose errors name its flags (`flag`: field -> flag, or None to keep the field)."""
    def wrap(command):
        @functools.wraps(command)
        def run(*args, **kwargs):
            try:
                return command(*args, **kwargs)
            except InputError as err:
                raise in_flags(err, flag) from None
            except OverflowError as err:  # the solver's integer range: its text mentions the fields to lower
                raise OverflowError(render(str(err), flag)) from None
        return run
    return wrap
