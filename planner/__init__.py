"""deployment-planner: how many GPUs, of which chip, in which vLLM configuration, serve a model,
and what it costs. The Python API is planner/app/api.py's (docs/api.md):

    import planner
    result = planner.plan(model="dsv4.1-flash", chip="h200", concurrency=64)  # plan --json's PlanResult

Its names resolve when first used, so `import planner` loads neither pydantic models nor OR-Tools."""

API = ("plan", "plan_serving", "max_rate", "review", "compare", "compare_points", "memory", "request_of")

__all__ = [*API, "InputError"]


def __getattr__(name: str):
    if name in API:
        from planner.app import api

        return getattr(api, name)
    if name == "InputError":
        from pricing.errors import InputError

        return InputError
    raise AttributeError(f"module 'planner' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
