"""Scenario files: a capacity review as data (YAML, validated by pydantic).

    review: Q1 capacity review
    defaults: {context_length: 131072, chips: [h200, b200]}
    inventory:
      h200: {gpus: 64, gpus_per_node: 8, price: 4.54}
    services:
      - {name: chat, model: dsv4.1-flash, concurrency: 64}
    variants:
      b200: {chip: b200}
      long: {context_length: 1048576}

A variant is a set of what-if overrides; each key names a field that exists:
`chip` / `chips`, `growth` (every service's concurrency and traffic × the factor), any service
field (applied to every service), `services.<name>.<field>` (one
service), `price.<chip>`, `gpus.<chip>`, `gpus_per_node.<chip>` (the inventory).
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from planner.request import (
    MAX_CONCURRENCY,
    MAX_GPUS,
    MAX_GPUS_PER_NODE,
    MAX_GRID_POINTS,
    MAX_PRICE,
    MAX_SPARE,
    MAX_SPECULATIVE,
    MIN_CONTEXT,
    Count,
    PoolLimits,
    ServiceSpec,
    SloSpec,
    WorkloadSpec,
    rates_in_range,
    service_problems,
    validation_message,
)
from planner.traffic.intervals import Traffic
from planner.traffic.spec import TrafficSpec
from pricing import yaml_fast
from pricing.errors import InputError, render, suggest

if TYPE_CHECKING:
    from pricing.registry import Registry

SPEC_KEYS = {"kv_cache_dtypes": "kv_cache_dtype"}  # a ServiceSpec field -> the file's key, where they differ
SERVICE_FIELDS = ("model", "quantization", "concurrency", "context_length", "headroom", "chips", "kv_cache_dtype",
                  "num_speculative_tokens", "speculative_method", "speculative_acceptance", "tp", "pp", "dp", "dcp",
                  "gpu_memory_utilization",
                  "max_num_batched_tokens", "max_gpus", "tpot_ms", "ttft_ms", "workload", "serving", "slo", "traffic")


class Speculative(BaseModel):
    model_config = ConfigDict(extra="forbid")
    method: str | None = None
    tokens: Count = Field(0, ge=0, le=MAX_SPECULATIVE)
    acceptance: list[float] | None = Field(None, min_length=1, description="the drafter's conditional acceptance by "
                                           "draft position; default: the registry's")

    @field_validator("acceptance")
    @classmethod
    def _rates(cls, v):
        return rates_in_range(v)


class Service(BaseModel):
    """One service of the review: a model at a concurrency and context length."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    model: str | None = None
    quantization: str | None = None
    concurrency: Count | None = Field(None, ge=1, le=MAX_CONCURRENCY,
                                      description="concurrent requests at the context length")
    context_length: Count | None = Field(None, ge=MIN_CONTEXT, description="tokens per request (max_model_len)")
    headroom: float | None = Field(None, ge=0, description="percent of extra concurrency to hold")
    chips: list[str] | None = Field(None, min_length=1, description="chips this service may run on")
    kv_cache_dtype: list[str] | None = Field(None, min_length=1, description="KV cache dtypes the search may choose")
    speculative: Speculative | None = None
    num_speculative_tokens: Count | None = Field(None, ge=0, le=MAX_SPECULATIVE)
    speculative_method: str | None = None
    speculative_acceptance: list[float] | None = Field(None, min_length=1, description="the drafter's conditional "
                                                       "acceptance by draft position; default: the registry's")
    vllm_version: str | None = Field(None, description="the vLLM release to plan for (default 0.33; any from 0.10 "
                                                       "to 0.33, served by its pack)")
    tp: list[Count] | None = Field(None, min_length=1)
    pp: list[Count] | None = Field(None, min_length=1)
    dp: list[Count] | None = Field(None, min_length=1)
    dcp: list[Count] | None = Field(None, min_length=1)
    gpu_memory_utilization: list[float] | None = Field(None, min_length=1)
    max_num_batched_tokens: list[Count] | None = Field(None, min_length=1)
    max_gpus: Count | None = Field(None, ge=1, le=MAX_GPUS)
    tpot_ms: float | None = Field(None, gt=0, description="time per output token each request must get, in ms")
    ttft_ms: float | None = Field(None, gt=0, description="time to first token of the workload's prompt, in ms")
    workload: WorkloadSpec | None = Field(None, description="isl, osl and requests_per_second of the requests")
    serving: Literal["agg", "disagg", "auto"] | None = Field(
        None, description="agg (default): one pool of aggregated instances; disagg: a prefill pool and a decode pool "
        "(vLLM's NixlConnector, sized by workload.requests_per_second and ttft_ms); auto: whichever is cheaper "
        "within the inventory")
    slo: SloSpec | None = Field(None, description="percentile targets at the workload's rate, e.g. {p99_ttft_ms: "
                                "2000, p90_tpot_ms: 40, goodput: 0.99}")
    traffic: TrafficSpec | None = Field(None, description="arrivals over the day, for an autoscaled schedule: "
                                        "hourly_requests_per_second (24), weekly_requests_per_second (168), trace "
                                        "(CSV) or prometheus (query_range JSON); the plan is sized at its peak")

    @field_validator("speculative_acceptance")
    @classmethod
    def _rates(cls, v):
        return rates_in_range(v)

    @field_validator("kv_cache_dtype", "chips", mode="before")
    @classmethod
    def _listify(cls, v):
        return [v] if isinstance(v, str) else v

    @field_validator("tp", "pp", "dp", "dcp", "max_num_batched_tokens", mode="before")
    @classmethod
    def _int_list(cls, v):
        return [v] if isinstance(v, int) and not isinstance(v, bool) else v


class Defaults(Service):
    """Fields every service takes unless it sets its own."""

    name: str = "defaults"


class Stock(BaseModel):
    """What the review may draw on for one chip."""

    model_config = ConfigDict(extra="forbid")

    gpus: Count | None = Field(None, ge=0, le=MAX_GPUS, description="GPUs available; absent: unlimited")
    gpus_per_node: Count | None = Field(None, ge=1, le=MAX_GPUS_PER_NODE)
    price: float | None = Field(None, ge=0, le=MAX_PRICE,
                                description="USD per GPU-hour; absent: the registry's default")


class Scenario(BaseModel):
    """A capacity review: services to serve, the inventory they share, and what-if variants."""

    model_config = ConfigDict(extra="forbid")

    review: str = ""
    defaults: Defaults = Field(default_factory=Defaults)
    inventory: dict[str, Stock] = Field(default_factory=dict)
    services: list[Service] = Field(min_length=1)
    variants: dict[str, dict[str, Any]] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="what-if axes, each a variant key "
                                       "(growth, chips, context_length, price.<chip>, ...) with its values: every "
                                       "combination is a variant named by its values")

    @field_validator("grid")
    @classmethod
    def _axes(cls, grid):
        for axis, values in grid.items():
            if not values:
                raise ValueError(f"grid.{axis} has no values")
        points = math.prod(len(v) for v in grid.values()) if grid else 0
        if points > MAX_GRID_POINTS:
            raise ValueError(f"the grid has {points:,} points; at most {MAX_GRID_POINTS:,}")
        return grid

    @model_validator(mode="after")
    def _grid_points_are_variants(self):
        for name, overrides in grid_points(self.grid):
            if name in self.variants:
                raise ValueError(f"grid point {name!r} has the name of a variant")
            self.variants[name] = overrides
        return self
    spare: Count = Field(0, ge=0, le=MAX_SPARE, description="whole nodes per chip kept free as spare capacity (1: N+1)")

    @field_validator("services")
    @classmethod
    def _unique_names(cls, services):
        names = [s.name for s in services]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"service names must be unique; repeated: {', '.join(dupes)}")
        return services

    # -- resolution -------------------------------------------------------------------------------
    def merged(self, service: Service) -> Service:
        """The service with the defaults filled in."""
        data = {k: v for k, v in self.defaults.model_dump(exclude_unset=True).items() if k != "name"}
        data.update(service.model_dump(exclude_unset=True))
        return Service(**data)

    def chips_of(self, service: Service, merged: Service | None = None) -> list[str]:
        """The chips the service may be planned on (`merged`: the service with the defaults filled
        in, when the caller has it)."""
        merged = merged or self.merged(service)
        if merged.chips:
            return merged.chips
        if self.inventory:
            return list(self.inventory)
        raise InputError(f"services[{self.services.index(service)}].chips", "no chip to plan on",
                         "give `chips` to the service or the defaults, or an inventory")

    def service_spec(self, service: Service) -> ServiceSpec:
        s = self.merged(service)
        tokens = s.num_speculative_tokens if s.num_speculative_tokens is not None else (
            s.speculative.tokens if s.speculative else 0)
        method = s.speculative_method or (s.speculative.method if s.speculative else None)
        rates = s.speculative_acceptance or (s.speculative.acceptance if s.speculative else None)
        concurrency = s.concurrency if s.concurrency is not None else 1  # service targets alone: a rate
        workload, context = s.workload, s.context_length
        if s.traffic is not None:  # sized at the peak interval: the static plan (planner/traffic/schedule.py)
            traffic = self.traffic_of(service)
            ratio = s.workload.range_ratio if s.workload else 0.0
            peak = traffic.peak
            lengths = traffic.lengths or (s.workload.lengths if s.workload else None)  # drawn from, when given
            rate = peak.requests_per_second
            workload = WorkloadSpec(requests_per_second=rate, lengths=lengths) if lengths else WorkloadSpec(
                isl=peak.isl, osl=peak.osl, requests_per_second=rate, range_ratio=ratio)
            if context is None:  # every interval's requests fit, as a rate's context holds its longest request
                context = max([MIN_CONTEXT, traffic.longest_request or 0] + [
                    WorkloadSpec(isl=i.isl, osl=i.osl, range_ratio=ratio).longest for i in traffic.intervals]
                    + [workload.longest])
        return ServiceSpec(model=s.model, quantization=s.quantization, concurrency=concurrency,
                           context_length=context, headroom=s.headroom or 0.0,
                           num_speculative_tokens=tokens, speculative_method=method,
                           speculative_acceptance=tuple(rates) if rates else None,
                           kv_cache_dtypes=tuple(s.kv_cache_dtype or ("auto",)),
                           tp=tuple(s.tp) if s.tp else None, pp=tuple(s.pp) if s.pp else None,
                           dp=tuple(s.dp) if s.dp else None,
                           dcp=tuple(s.dcp) if s.dcp else None,
                           gpu_memory_utilization=tuple(s.gpu_memory_utilization) if s.gpu_memory_utilization else None,
                           max_num_batched_tokens=tuple(s.max_num_batched_tokens) if s.max_num_batched_tokens
                           else None, tpot_ms=s.tpot_ms, ttft_ms=s.ttft_ms, workload=workload, slo=s.slo,
                           serving=s.serving or "agg",
                           **({"vllm_version": s.vllm_version} if s.vllm_version else {}))

    def traffic_of(self, service: Service) -> Traffic | None:
        """The service's traffic as intervals (None without `traffic:`); a file is read once."""
        s = self.merged(service)
        if s.traffic is None:
            return None
        w = s.workload
        key = (s.traffic.model_dump_json(), w.isl if w else None, w.osl if w else None, s.traffic.file_stamp())
        if key not in _TRAFFIC:
            if len(_TRAFFIC) >= TRAFFIC_KEPT:
                _TRAFFIC.clear()
            _TRAFFIC[key] = s.traffic.resolve(w.isl if w else None, w.osl if w else None)
        return _TRAFFIC[key]

    def limits(self, service: Service) -> PoolLimits:
        merged = self.merged(service)
        chips = tuple(self.chips_of(service, merged))
        prices = {c: self.inventory[c].price for c in chips
                  if c in self.inventory and self.inventory[c].price is not None}
        per_node = {self.inventory[c].gpus_per_node for c in chips if c in self.inventory} - {None}
        return PoolLimits(chips=chips, prices=prices, max_gpus=merged.max_gpus,
                          gpus_per_node=per_node.pop() if len(per_node) == 1 else None)

    def apply(self, variant: str) -> Scenario:
        """This scenario under one named variant's overrides."""
        if variant not in self.variants:
            near = suggest(variant, list(self.variants))
            raise InputError("variant", f"no variant named {variant!r}" + (f"; {near}" if near else ""),
                             f"use one of {', '.join(self.variants) or '(the file has none)'}")
        overrides = self.variants[variant]
        data = self.model_dump(exclude_unset=True)
        data.pop("variants", None)
        data.pop("grid", None)
        data.setdefault("defaults", {})
        for key, value in overrides.items():
            _override(data, key, value, f"variants.{variant}.{key}")
        try:
            return Scenario(**data)
        except ValidationError as err:
            raise InputError(f"variants.{variant}", _first_error(err), "fix the variant's value") from None




_TRAFFIC: dict[tuple, Traffic] = {}  # a traffic block, its lengths and its file's stamp -> its intervals
TRAFFIC_KEPT = 64  # traffic blocks kept read at once: a review's services and variants, not a process's history


def grid_points(grid: dict[str, list[Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Every combination of the grid's axes (the first axis slowest), each a variant's overrides
    named by its values: "growth 1.5, price.h200 3.5"."""
    if not grid:
        return []
    out = []
    for combo in itertools.product(*grid.values()):
        overrides = dict(zip(grid, combo, strict=True))
        out.append((", ".join(f"{axis} {point_word(v, axis)}" for axis, v in overrides.items()), overrides))
    return out


TOKEN_AXES = ("context_length", "max_model_len")  # a grid axis whose values are token counts ('32k')


def point_word(value: Any, axis: str = "") -> str:
    """A grid point's value on `axis` as the variants' names, tables and charts write it: a context
    length as '32k' (planner/numbers.py tokens_label, as `plan compare` says it), a list 'h200+h100'."""
    from planner.numbers import tokens_label

    if axis.rsplit(".", 1)[-1] in TOKEN_AXES and isinstance(value, int) and not isinstance(value, bool):
        return tokens_label(value)
    if isinstance(value, list):
        return "+".join(map(str, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def _override(data: dict, key: str, value: Any, where: str) -> None:
    parts = key.split(".")
    head = parts[0]
    if head == "growth" and len(parts) == 1:  # every service's concurrency × the factor, rounded up
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise InputError(where, f"growth {value!r} is not a positive factor", "give e.g. 1.5 for 50 % more")
        every = data["defaults"].get("concurrency")
        for s in data["services"]:
            base = s.get("concurrency", every)
            if base is not None:
                s["concurrency"] = math.ceil(base * value)
        for entry in [data["defaults"], *data["services"]]:  # and every traffic's rates × the factor
            if isinstance(entry.get("traffic"), dict):
                entry["traffic"]["scale"] = entry["traffic"].get("scale", 1.0) * value
        return
    if head in ("chip", "chips") and len(parts) == 1:
        chips = [value] if isinstance(value, str) else list(value)
        data["defaults"]["chips"] = chips
        for s in data["services"]:
            s.pop("chips", None)
        return
    if head in ("price", "gpus", "gpus_per_node") and len(parts) == 2:
        data.setdefault("inventory", {}).setdefault(parts[1], {})[head] = value
        return
    if head == "services" and len(parts) == 3:
        for s in data["services"]:
            if s["name"] == parts[1]:
                if parts[2] not in Service.model_fields:
                    raise InputError(where, f"services have no field {parts[2]!r}",
                                     f"use one of {', '.join(SERVICE_FIELDS)}")
                s[parts[2]] = value
                return
        names = [s["name"] for s in data["services"]]
        near = suggest(parts[1], names)
        raise InputError(where, f"no service named {parts[1]!r}" + (f"; {near}" if near else ""),
                         f"use one of {', '.join(names)}")
    if len(parts) == 1 and head in Service.model_fields and head != "name":
        data["defaults"][head] = value
        for s in data["services"]:
            s.pop(head, None)
        return
    raise InputError(where, f"{key!r} is not a field a variant can set",
                     "use chip, growth, price.<chip>, gpus.<chip>, services.<name>.<field>, or a service field ("
                     + ", ".join(SERVICE_FIELDS) + ")")


def _path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _first_error(err: ValidationError) -> str:
    e = err.errors()[0]
    return f"{_path(e['loc'])}: {validation_message(e)}"


class ScenarioErrors(InputError):
    """Every problem of a scenario file, one line each: file, path inside it, what is expected."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        ValueError.__init__(self, "\n".join(lines))
        self.field, self.problem, self.fix, self.text = "scenario", lines[0], "", (lines[0], "")

    def __reduce__(self):
        return (type(self), (self.lines,))


def load_scenario(path: str | Path, registry: Registry | None = None) -> Scenario:
    """Read and validate a scenario file (safe YAML loader); every error reported before any planning,
    its models read against `registry` (the command's; None: the shipped one)."""
    from pricing.files import read_text
    from pricing.registry import shipped

    path = Path(path)
    text = read_text(path, "FILE", shipped().value("input_limits.file_bytes"), "scenario YAML file")
    try:
        raw = yaml_fast.load_checked(text)
    except yaml_fast.Refused as err:  # a key given twice, a number that is not finite
        raise InputError(f"{path}:{err.line}: {err.path or '(top level)'}", err.problem, "fix the file") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise InputError(str(path), f"not valid YAML{where}", "fix the syntax") from None
    if not isinstance(raw, dict):
        raise InputError(str(path), "does not hold a mapping", "see `plan scenario --schema`")
    _models_from_the_files_folder(raw, path.parent)
    where = str(path)
    lines = _raw_inventory(raw, where)
    try:
        scenario = Scenario(**raw)
    except ValidationError as err:
        for e in err.errors():
            expected = validation_message(e)
            if e["type"] == "extra_forbidden":
                expected = "unknown key (see `plan scenario --schema`)"
            lines.append(f"{path}: {_path(e['loc'])}: {expected}")
        lines += (_raw_references(raw, where, registry) + _valid_fields_limits(raw, err, where, registry)
                  + _raw_grid(raw, where))
        scenario = None
    if scenario is not None:
        lines += check_scenario(scenario, where, registry=registry)
    if lines:
        raise ScenarioErrors(as_written(list(dict.fromkeys(lines)), where, raw, text))
    return scenario


def grid_line(where: str, axis: str, err: InputError) -> str:
    """A grid axis's error at `grid.<axis>` (not at each point it generates)."""
    return f"{where}: grid.{axis}: {err.problem}" + (f" ({err.fix})" if err.fix else "")


def _raw_grid(raw: dict, where: str) -> list[str]:
    """Each grid axis whose key, or one of whose values, no variant can set, checked on the file as
    written (so that it is said beside the services' errors, in the same run), once per axis."""
    grid = raw.get("grid") if isinstance(raw.get("grid"), dict) else {}
    services = raw.get("services") if isinstance(raw.get("services"), list) else []
    names = [{"name": s.get("name")} for s in services if isinstance(s, dict)]
    lines = []
    for axis, values in grid.items():
        for value in values if isinstance(values, list) else []:
            data = {"defaults": {}, "services": [dict(n) for n in names]}
            try:
                _override(data, str(axis), value, f"grid.{axis}")
            except InputError as err:
                lines.append(grid_line(where, str(axis), err))
    return list(dict.fromkeys(lines))


def _raw_inventory(raw: dict, where: str) -> list[str]:
    """The chips the file names outside its services: the inventory's, and those a variant's
    price.<chip>, gpus.<chip> or gpus_per_node.<chip> names (under the variant's own key); and a
    service limited to a chip the inventory does not hold (with an inventory, what it lacks is not
    unlimited)."""
    from pricing.chips import get_chip

    def unknown(chip) -> str | None:
        try:
            get_chip(str(chip))
        except InputError as err:
            return err.problem
        return None

    inventory = raw.get("inventory") if isinstance(raw.get("inventory"), dict) else {}
    lines = [f"{where}: inventory.{chip}: {problem}" for chip in inventory if (problem := unknown(chip))]
    for name, overrides in (raw.get("variants") or {}).items() if isinstance(raw.get("variants"), dict) else []:
        for key in overrides if isinstance(overrides, dict) else []:
            parts = str(key).split(".")
            if len(parts) == 2 and parts[0] in ("price", "gpus", "gpus_per_node") and (problem := unknown(parts[1])):
                lines.append(f"{where}: variants.{name}.{key}: {problem}")
    if inventory:
        held = {get_chip(c).id for c in inventory if not unknown(c)}
        defaults = raw.get("defaults") if isinstance(raw.get("defaults"), dict) else {}
        services = raw.get("services") if isinstance(raw.get("services"), list) else []
        for i, service in enumerate(services):
            if not isinstance(service, dict):
                continue
            chips = service.get("chips", defaults.get("chips"))
            for chip in [chips] if isinstance(chips, str) else chips if isinstance(chips, list) else []:
                if not unknown(chip) and get_chip(str(chip)).id not in held:
                    lines.append(f"{where}: services[{i}].chips: {chip} is not in the inventory ("
                                 f"{', '.join(inventory)}); add it to the inventory with its GPUs, or drop it")
    return lines


PATH_PART = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def as_written(lines: list[str], where: str, raw: dict, text: str) -> list[str]:
    """Each error line with the path as the file writes it and its line: a service by its name
    (`services.chat.concurrency`, or 1-based `services[2]` when it has none), `file:LINE: path: ...`
    (PyYAML's node marks; the deepest node of the path the file has)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        root = None
    services = raw.get("services") if isinstance(raw.get("services"), list) else []

    def named(m: re.Match) -> str:
        i = int(m.group(1))
        name = services[i].get("name") if i < len(services) and isinstance(services[i], dict) else None
        return f"services.{name}" if isinstance(name, str) and name and "." not in name else f"services[{i + 1}]"

    out: list[tuple[int, str]] = []
    for line in lines:
        if not line.startswith(f"{where}: "):
            out.append((0, line))
            continue
        rest = line[len(where) + 2:]
        path, _, message = rest.partition(": ")
        number = _line_of(root, path) if root is not None else None
        path = re.sub(r"^services\[(\d+)\]", named, path)
        out.append((number or 0, f"{where}{f':{number}' if number else ''}: {path}: {message}"))
    return [line for _, line in sorted(out, key=lambda pair: pair[0])]


def _line_of(node, path: str) -> int | None:
    """The 1-based line of the deepest node of `path` ('services[0].tp', 'variants.cheap.price.h999':
    a key may hold dots) that the composed YAML has."""
    parts = [m.group(1) if m.group(1) is not None else m.group(2) for m in PATH_PART.finditer(path)]
    line = None
    while parts and node is not None:
        if isinstance(node, yaml.SequenceNode) and parts[0].isdigit():
            i = int(parts.pop(0))
            node = node.value[i] if i < len(node.value) else None
            if node is not None:
                line = node.start_mark.line + 1
            continue
        if not isinstance(node, yaml.MappingNode):
            break
        for k in range(len(parts), 0, -1):
            key = ".".join(parts[:k])
            found = next(((kn, vn) for kn, vn in node.value if kn.value == key), None)
            if found:
                line = found[0].start_mark.line + 1
                node, parts = found[1], parts[k:]
                break
        else:
            break
    return line


def _models_from_the_files_folder(raw: dict, folder: Path) -> None:
    """A relative `model:` path is the file's: `./models/mine` next to the file, wherever the
    review is run from (a path that exists only from the current directory is left as it is, and
    read from there, as on the command line)."""
    def local(value):
        if isinstance(value, str) and not Path(value).expanduser().is_absolute() and (folder / value).exists():
            return str(folder / value)
        return value

    services = raw.get("services") if isinstance(raw.get("services"), list) else []  # else: reported as invalid
    for entry in [raw.get("defaults"), *services]:
        if isinstance(entry, dict) and "model" in entry:
            entry["model"] = local(entry["model"])
    for entry in [raw.get("defaults"), *services]:
        traffic = entry.get("traffic") if isinstance(entry, dict) else None
        for key in ("trace", "prometheus"):
            if isinstance(traffic, dict) and isinstance(traffic.get(key), str):
                traffic[key] = _beside(traffic[key], folder)
    variants = raw.get("variants") if isinstance(raw.get("variants"), dict) else {}
    for overrides in variants.values():
        if isinstance(overrides, dict):
            for key in overrides:
                if str(key) == "model" or str(key).endswith(".model"):
                    overrides[key] = local(overrides[key])


def _beside(value: str, folder: Path) -> str:
    """A traffic file's path as the scenario file reads it: relative to the file's folder."""
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else folder / path)


def _valid_fields_limits(raw: dict, err: ValidationError, where: str, registry: Registry | None) -> list[str]:
    """The model-dependent limits (check_limits) of a file that does not validate, on each
    service's fields that do, so that every error comes at once (models read against `registry`)."""
    from functools import partial

    from pricing.graph import read_model

    bad = {(e["loc"][1], e["loc"][2]) for e in err.errors() if len(e["loc"]) > 2 and e["loc"][0] == "services"}
    services = raw.get("services") if isinstance(raw.get("services"), list) else []
    defaults = raw.get("defaults") if isinstance(raw.get("defaults"), dict) else {}
    lines = []
    for i, service in enumerate(services):
        if not isinstance(service, dict):
            continue
        try:
            kept = {k: v for k, v in service.items() if (i, k) not in bad}
            kept.setdefault("name", f"service {i + 1}")  # a missing name is reported above; check the rest
            one = Scenario(defaults=defaults, services=[kept])
        except ValidationError:
            continue  # the defaults do not validate either: reported above
        lines += [line.replace(f"{where}: services[0]", f"{where}: services[{i}]", 1)
                  for line in check_limits(one, where, read=partial(read_model, registry=registry))]
    return lines


def _raw_references(raw: dict, where: str, registry: Registry | None) -> list[str]:
    """Model and chip names in a file that does not validate, so that every error comes at once
    (models resolved against `registry`)."""
    from pricing.chips import get_chip
    from pricing.config import resolve

    lines = []
    services = raw.get("services") if isinstance(raw.get("services"), list) else []
    for i, service in enumerate(services):
        if not isinstance(service, dict):
            continue
        if isinstance(service.get("model"), str):
            try:
                resolve(service["model"], registry)
            except InputError as err:
                lines.append(f"{where}: services[{i}].model: {err.problem}")
        chips = service.get("chips")
        for chip in [chips] if isinstance(chips, str) else chips if isinstance(chips, list) else []:
            try:
                get_chip(str(chip))
            except InputError as err:
                lines.append(f"{where}: services[{i}].chips: {err.problem}")
    return lines


def file_key(field: str) -> str | None:
    """A scenario file's key for a field a sentence mentions: within a service (None: the field
    itself; a service target or the workload under its block), or a chip's price in the inventory."""
    if field == "price":
        return "inventory.<chip>.price"
    if field in SloSpec.model_fields:
        return f"slo.{field}"
    return f"workload.{field}" if field in WorkloadSpec.model_fields else None


def check_scenario(scenario: Scenario, where: str, positions: bool = True, name=file_key,
                   applies: bool = True, registry: Registry | None = None) -> list[str]:
    """Every problem of a scenario, one line each with its path inside the file: names that do
    not exist (with the nearest), and limits that depend on the model (positions, heads,
    drafters, KV cache dtypes), for the base and each variant.

    A context beyond a model's positions is an error of the services as written (`positions`),
    but not of a variant: a what-if across context lengths is answered, the variant infeasible
    with vLLM's reason (planner/app/fleet.py `refused_context`). `name`: a mentioned field ->
    how the reader calls it (the file's key; `plan compare` its flag). `applies`: a field that
    cannot apply is refused (planner/applies.py; `plan compare`'s points share the command's
    options, which its own table judges). Models are read against `registry` (the command's; None:
    the shipped one)."""
    from functools import cache, partial

    from pricing.graph import read_model

    read = cache(partial(read_model, registry=registry))  # its own: every variant names the base's models again
    lines = (check_references(scenario, where, variants=False, name=name, read=read)
             + check_limits(scenario, where, positions, read=read, name=name, applies=applies))
    base = {line.split(": ", 1)[1] for line in lines}
    points = {name for name, _ in grid_points(scenario.grid)}
    for variant in scenario.variants:
        try:
            varied = scenario.apply(variant)
        except InputError as err:
            key = err.field.removeprefix(f"variants.{variant}.")
            if variant in points and key in scenario.grid:  # an axis's key or value: said once, at the axis
                lines.append(grid_line(where, key, err))
            else:
                lines.append(f"{where}: {err}")
            continue
        prefix = f"{where}: variants.{variant}"
        found = (check_references(varied, prefix, variants=False, name=name, read=read)
                 + check_limits(varied, prefix, positions=False, read=read, name=name, applies=applies))
        lines += [line for line in found if line.split(": variants.", 1)[-1].split(": ", 1)[-1] not in base]
    return list(dict.fromkeys(lines))


def check_limits(scenario: Scenario, where: str, positions: bool = True, read=None, name=file_key,
                 applies: bool = True) -> list[str]:
    """What vLLM would reject for the model of each service: a context beyond its positions (with
    `positions`), a tensor-parallel size that does not divide its heads; and planner/request.py
    service_problems, as `plan` checks them: a drafter the model does not ship, a KV cache dtype
    the release does not know (pricing/kernel/deployment.py resolve_engine's checks), percentile
    targets on a disaggregated fleet, a workload beyond the context. `read`: the graph reader
    (pricing.graph.read_model unless given); `name`: a mentioned field -> how the reader calls it."""
    from pricing.graph import read_model

    read_model = read or read_model
    from planner.applies import service_cannot_apply
    from pricing.kernel.deployment import beyond_positions, check_tensor_parallel
    from pricing.rules import get as release_of

    lines = []
    for i, service in enumerate(scenario.services):
        s = scenario.merged(service)
        try:
            release_of(s.vllm_version)  # a release no rules pack serves
        except InputError as err:
            lines.append(f"{where}: services[{i}].vllm_version: {err.problem}")
            continue
        try:
            model = read_model(s.model, s.quantization) if s.model is not None else None
        except InputError:
            model = None
        if model is None:
            continue  # a name that does not resolve: check_references reports it
        at = f"{where}: services[{i}]"
        if s.traffic is not None:
            try:
                scenario.traffic_of(service)
            except InputError:
                continue  # a traffic file that does not read: check_references reports it
        if positions and s.context_length is not None and (problem := beyond_positions(model, s.context_length)):
            lines.append(f"{at}.context_length: {problem} (use at most {model.max_position})")
        for tp in s.tp or []:
            try:
                check_tensor_parallel(model, tp)
            except InputError as err:
                lines.append(f"{at}.tp: {err.problem} ({err.fix})")
                break
        for key, values in (("dp", s.dp), ("dcp", s.dcp), ("max_num_batched_tokens", s.max_num_batched_tokens)):
            if any(v < 1 for v in values or []):
                lines.append(f"{at}.{key}: every value must be at least 1")
        if any(not 0 < u <= 1 for u in s.gpu_memory_utilization or []):
            lines.append(f"{at}.gpu_memory_utilization: every value must be in (0, 1]")
        try:
            spec = scenario.service_spec(service)
        except ValidationError as err:  # what the file's own fields do not say: a headroom beyond the range
            lines += [f"{at}.{_path(e['loc'])}: {validation_message(e)}" for e in err.errors()
                      if e["loc"] == ("headroom",)]
            continue
        lines += [f"{at}.{SPEC_KEYS.get(field, field)}: {render(problem, name)} ({render(fix, name)})"
                  for field, problem, fix in service_problems(spec, model)]
        lines += [f"{at}.{field}: {problem} ({fix})" for field, problem, fix in  # a field that cannot apply
                  service_cannot_apply(service.model_fields_set, s.model_dump(),
                                       None if model.has_experts else model.name) if applies]
    return lines


def check_references(scenario: Scenario, where: str, variants: bool = True, name=file_key,
                     read=None) -> list[str]:
    """Models, chips and variants that name things that do not exist; one line each (`read`: the
    graph reader, pricing.graph.read_model unless given)."""
    from pricing.chips import get_chip
    from pricing.graph import read_model

    read_model = read or read_model

    lines = []  # the inventory's chips: _raw_inventory, under the key the file writes
    for i, service in enumerate(scenario.services):
        merged = scenario.merged(service)
        if merged.model is None:
            lines.append(f"{where}: services[{i}].model: required (here or in defaults)")
        else:
            try:
                read_model(merged.model, merged.quantization)
            except InputError as err:
                field = "quantization" if err.field == "quantization" else "model"
                problem, fix = err.parts(name)
                lines.append(f"{where}: services[{i}].{field}: {problem}" + (f" ({fix})" if field != "model"
                                                                             else ""))
        if merged.concurrency is None and merged.slo is None:
            lines.append(f"{where}: services[{i}].concurrency: required (here or in defaults), or service targets "
                         "at a rate (slo with a workload's requests_per_second)")
        if merged.traffic is not None:
            lines += _traffic_problems(scenario, service, merged, f"{where}: services[{i}]")
        elif merged.slo is not None and (merged.workload is None or merged.workload.requests_per_second is None):
            lines.append(f"{where}: services[{i}].slo: service targets are met at a rate: give workload "
                         "{isl, osl, requests_per_second}")
        for chip in merged.chips or []:
            try:
                get_chip(chip)
            except InputError as err:
                lines.append(f"{where}: services[{i}].chips: {err.problem}")
        if not merged.chips and not scenario.inventory:
            lines.append(f"{where}: services[{i}].chips: no chip to plan on (give chips here, in defaults, or an "
                         "inventory)")
    if variants:
        for variant in scenario.variants:
            try:
                varied = scenario.apply(variant)
                lines += check_references(varied, f"{where}: variants.{variant}", variants=False, name=name)
            except InputError as err:
                lines.append(f"{where}: {err}")
    return lines


def _traffic_problems(scenario: Scenario, service: Service, merged: Service, at: str) -> list[str]:
    """A service with `traffic:`: service targets to schedule against, the lengths a profile needs,
    no second rate beside it, an aggregated pool, and its file read (a bad trace's row and column named)."""
    lines = []
    if merged.slo is None:
        lines.append(f"{at}.slo: a schedule meets service targets at each interval's rate: give slo, e.g. "
                     "{p99_ttft_ms: 2000, p99_tpot_ms: 50}")
    if merged.workload is not None and merged.workload.requests_per_second is not None:
        lines.append(f"{at}.workload.requests_per_second: the traffic gives the rate; drop it from the workload")
    if merged.serving not in (None, "agg"):
        lines.append(f"{at}.serving: a schedule scales one aggregated pool; give serving: agg with traffic "
                     f"(not {merged.serving})")
    try:
        scenario.traffic_of(service)
    except InputError as err:
        lines.append(f"{at}.traffic: {err}")
    return lines


def schema() -> dict:
    """The JSON Schema of scenario files (`plan scenario --schema`)."""
    return Scenario.model_json_schema()
