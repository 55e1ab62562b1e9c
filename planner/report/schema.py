"""The one JSON schema of every report the tool prints as JSON (`--schema` on `plan`, `plan
scenario` and `plan compare`): a `plan`, a `plan --serving disagg|auto`, a `plan --max-rate`, a
scenario's result, a comparison of variants and a `plan compare --max-rate`, told apart by `kind`.
They share their parts: a pool is `plan`'s `PoolPlan` wherever it appears (a scenario's service
adds its name), `target` is the same object (`asked`, `required` and every target restated), and a
pool's `held` is what it holds."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, TypeAdapter

from planner.app.fleet import FleetResult
from planner.app.max_rate import MaxRateResult
from planner.app.result import PlanResult
from planner.app.review import Comparison, MaxRateComparison
from planner.app.serving import ServingOutput

Report = Annotated[PlanResult | ServingOutput | FleetResult | Comparison | MaxRateResult | MaxRateComparison,
                   Field(discriminator="kind")]


def report_schema() -> dict:
    """The JSON Schema (draft 2020-12) of every `--json` / `--format json` report, as printed."""
    schema = TypeAdapter(Report).json_schema(mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "deployment-planner report",
            "description": __doc__.split("\n\n")[0].replace("\n", " "), **schema}
