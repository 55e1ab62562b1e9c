"""The library's errors name a field (`tensor_parallel_size`); each command names its own flag for
it: `plan memory` takes vLLM's flags, `plan` its shorter ones."""

from __future__ import annotations

from pricing.errors import InputError

PLAN_FLAGS = {"tensor_parallel_size": "--tp"}  # fields whose `plan` flag is not vLLM's name


def vllm_flag(field: str) -> str:
    """vLLM's flag for a deployment field: `tensor_parallel_size` -> `--tensor-parallel-size`."""
    return "--" + field.replace("_", "-")


def in_flags(err: InputError, flag) -> InputError:
    """The error with its field named as the command's flag (`flag`: field -> flag, or None to keep it)."""
    name = flag(err.field)
    return err if name is None else InputError(name, err.problem, err.fix)
