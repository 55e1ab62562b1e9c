"""The registry: every magnitude the kernel uses that is not computed from the model graph.

Each value lives in a YAML data file of this folder as `{value, source, how}`: what it is,
where it came from, and how it was obtained. `Registry[name]` returns a `Sourced` value;
names are the dotted path inside the file, prefixed by the file's stem
(`cost_model_memory.activation_floor_bytes`). The chips are one file each, `chips/<id>.yaml`
(chips/README.md): its `chip` part is named `chips.chips.<id>.…`, its `rates` part
`chip_rates.chip_rates.<id>.…`, its `unsourced` entry `chip_rates.unsourced.<id>` and its `network`
part `chip_network.chip_network.<id>.…`. The kernel
lists every value it read in its provenance.

A file is parsed the first time a name under it (or its stem in `raw`) is read, so a plan on one
chip parses that chip's file and the files whose values it reads, not the whole folder.

There is no registry "in use": `shipped()` is the package's, an overlay (`read_overlay`) is a
Registry of its own, and whoever reads values is handed the one to read (a function's `registry`,
None meaning the shipped one; a kernel's `reg`; the planner's resolved service and tables).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import yaml

from pricing import yaml_fast

HERE = Path(__file__).parent

# A chip file's parts, each with the (stem, table) its registry names start with: the `rates` of
# chips/h200.yaml are chip_rates.chip_rates.h200.<field>.
CHIP_PARTS = {"chip": ("chips", "chips"), "rates": ("chip_rates", "chip_rates"),
              "unsourced": ("chip_rates", "unsourced"), "network": ("chip_network", "chip_network")}
CHIP_STEMS = ("chips", "chip_rates", "chip_network")


@dataclass(frozen=True)
class Sourced:
    """One registry value with its provenance."""

    name: str
    value: Any
    source: str
    how: str


def _is_leaf(node: Any) -> bool:
    return isinstance(node, dict) and "value" in node and "source" in node


def _flatten(prefix: str, node: Any, out: dict[str, Sourced]) -> None:
    if _is_leaf(node):
        out[prefix] = Sourced(prefix, node["value"], str(node["source"]), str(node.get("how", "")))
    elif isinstance(node, dict):
        for key, child in node.items():
            _flatten(f"{prefix}.{key}", child, out)


class DataFiles(Mapping):
    """The registry's data files in one folder, by stem (`files["quantization"]`: that file as parsed;
    `files["chips"]` and `files["chip_rates"]` gather every chip file). Each file is read once and
    parsed the first time it is asked for, whether by stem or by one of its names; `parsed` lists the
    files parsed so far, in order."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._stem_files = {p.stem: p for p in sorted(folder.glob("*.yaml"))}
        self._chip_files = {p.stem: p for p in sorted((folder / "chips").glob("*.yaml"))}
        if clash := set(self._stem_files) & set(CHIP_STEMS):
            raise ValueError(f"{folder}: {', '.join(sorted(clash))}.yaml clashes with the chips/ folder's names")
        self._bytes: dict[Path, bytes] = {}
        self._data: dict[Path, Any] = {}
        self._values: dict[Path, dict[str, Sourced]] = {}
        self._found: dict[str, Sourced | None] = {}  # every name looked up, found or not
        self._gathered: dict[str, dict] = {}
        self._digest: str | None = None
        self.parsed: list[Path] = []

    # -- the stems, as a mapping ------------------------------------------------------------------
    def _stems(self) -> list[str]:
        return sorted([*self._stem_files, *(CHIP_STEMS if self._chip_files else ())])

    def __iter__(self) -> Iterator[str]:
        return iter(self._stems())

    def __len__(self) -> int:
        return len(self._stems())

    def __contains__(self, stem: object) -> bool:  # without parsing
        return stem in self._stem_files or (stem in CHIP_STEMS and bool(self._chip_files))

    def __getitem__(self, stem: str) -> Any:
        if stem in self._stem_files:
            return self.data(self._stem_files[stem])
        if stem not in self:
            raise KeyError(stem)
        if stem not in self._gathered:
            tables = {table: {} for part, (s, table) in CHIP_PARTS.items() if s == stem}
            for chip_id in self._chip_files:
                for part, node in self.chip_file(chip_id).items():
                    if CHIP_PARTS[part][0] == stem:
                        tables[CHIP_PARTS[part][1]][chip_id] = node
            self._gathered[stem] = tables
        return self._gathered[stem]

    # -- files ------------------------------------------------------------------------------------
    def chip_ids(self) -> list[str]:
        """The chips' ids: their file names (parses nothing)."""
        return list(self._chip_files)

    def chip_file(self, chip_id: str) -> dict:
        """chips/<id>.yaml as parsed: `chip`, and `rates` or `unsourced` (parses that file only)."""
        return self.data(self._chip_files[chip_id])

    def _read(self, path: Path) -> bytes:
        if path not in self._bytes:
            self._bytes[path] = path.read_bytes()
        return self._bytes[path]

    def data(self, path: Path) -> Any:
        if path not in self._data:
            data = yaml_fast.load(self._read(path).decode("utf-8"))
            self.parsed.append(path)
            if path.parent != self.folder:  # a chip file
                if not isinstance(data, dict) or "chip" not in data or set(data) - set(CHIP_PARTS):
                    raise ValueError(f"{path}: a chip file holds `chip` and `rates` or `unsourced` (chips/README.md), "
                                     f"not {sorted(data) if isinstance(data, dict) else data!r}")
            self._data[path] = data
        return self._data[path]

    def _file_of(self, name: str) -> Path | None:
        """The one file a value named `name` can be in."""
        stem, _, rest = name.partition(".")
        if stem in self._stem_files:
            return self._stem_files[stem]
        if stem in CHIP_STEMS:
            parts = rest.split(".")
            return self._chip_files.get(parts[1]) if len(parts) > 1 else None
        return None

    def _files_under(self, prefix: str) -> list[Path]:
        """The files that may hold names starting with `prefix`."""
        def may_hold(root: str) -> bool:
            return root.startswith(prefix) or prefix.startswith(root + ".")

        out = [p for stem, p in self._stem_files.items() if may_hold(stem)]
        return out + [p for chip_id, p in self._chip_files.items()
                      if any(may_hold(f"{stem}.{table}.{chip_id}") for stem, table in CHIP_PARTS.values())]

    def values(self, path: Path) -> dict[str, Sourced]:
        """The values of one file, by registry name."""
        if path not in self._values:
            out: dict[str, Sourced] = {}
            data = self.data(path)
            if path.parent == self.folder:
                _flatten(path.stem, data, out)
            else:
                for part, node in data.items():
                    stem, table = CHIP_PARTS[part]
                    _flatten(f"{stem}.{table}.{path.stem}", node, out)
            self._values[path] = out
        return self._values[path]

    def lookup(self, name: str) -> Sourced | None:
        """The value named `name`, or None (the answer kept by name: a sweep asks the same few
        names thousands of times)."""
        try:
            return self._found[name]
        except KeyError:
            path = self._file_of(name)
            found = self._found[name] = None if path is None else self.values(path).get(name)
            return found

    def names(self, prefix: str = "") -> set[str]:
        return {n for path in self._files_under(prefix) for n in self.values(path) if n.startswith(prefix)}

    def digest(self) -> str:
        """What the files hold, from their bytes (read, not parsed): equal texts, equal digest."""
        if self._digest is None:
            h = hashlib.sha256()
            labelled = [*self._stem_files.items(), *((f"chips/{c}", p) for c, p in self._chip_files.items())]
            for label, path in labelled:
                text = self._read(path)
                h.update(f"{label}\0{len(text)}\0".encode())
                h.update(text)
            self._digest = h.hexdigest()
        return self._digest


class Registry:
    """The registry's values by dotted name: the data files' (parsed as their names are read), with
    an overlay of values laid over them. `raw` holds the files as parsed, by stem."""

    def __init__(self, files: DataFiles, overlay: dict[str, Sourced] | None = None):
        self._files = files
        self._overlay = dict(overlay or {})
        self.raw: Mapping[str, Any] = files
        self._derived: dict = {}

    def derived(self, key, compute):
        """compute(), once per `key` on this registry: a registry never changes once built (an
        overlay is a new one), so what is worked out from its values alone (a chip's rates, a
        scheme's parameters at a placement) is kept on it, keyed by the other values it depends on."""
        store = self._derived
        try:
            return store[key]
        except KeyError:
            value = store[key] = compute()
            return value

    def _get(self, name: str) -> Sourced | None:
        return self._overlay[name] if name in self._overlay else self._files.lookup(name)

    def __getitem__(self, name: str) -> Sourced:
        found = self._get(name)
        if found is None:
            raise KeyError(f"registry has no value named {name!r}")
        return found

    def __contains__(self, name: str) -> bool:
        return self._get(name) is not None

    def value(self, name: str) -> Any:
        return self[name].value

    def names(self, prefix: str = "") -> list[str]:
        return sorted(self._files.names(prefix) | {n for n in self._overlay if n.startswith(prefix)})

    def chip_ids(self) -> list[str]:
        """The ids of the shipped chips (their file names; parses none)."""
        return self._files.chip_ids()

    def chip_file(self, chip_id: str) -> dict:
        """One chip's data file as parsed (`chip`, and `rates` or `unsourced`), parsing no other."""
        return self._files.chip_file(chip_id)

    def with_overrides(self, overrides: dict[str, Any]) -> Registry:
        """A copy with some values replaced (used for what-ifs and tests); provenance says so."""
        values = {name: Sourced(name, value, "user override", "given on the command line or in a scenario")
                  for name, value in overrides.items()}
        return Registry(self._files, {**self._overlay, **values})

    def overlay(self, values: dict[str, Sourced]) -> Registry:
        """A copy with `values` laid over it, each keeping its own provenance."""
        return Registry(self._files, {**self._overlay, **values})

    def __reduce__(self):
        """Pickled (to a worker process, with the service that carries it) as its overlay over the
        package's files, which the worker reads itself: the shipped registry arrives as the worker's
        own, an overlay as the same values over it."""
        if self._files is not SHIPPED._files:
            return Registry, (self._files, self._overlay)
        return (_shipped_with, (self._overlay,))

    def __hash__(self) -> int:  # memo keys hold the registry whole: equal content, equal key
        return hash(self._key())

    def __eq__(self, other) -> bool:
        return isinstance(other, Registry) and self._key() == other._key()

    def _key(self):
        """The files' texts (so nothing is parsed to hash a registry) and the overlay's values that
        differ from theirs (parsing only the files those are in)."""
        if not hasattr(self, "_cached_key"):
            changed = []
            for name, laid in self._overlay.items():
                under = self._files.lookup(name)
                if under is None or repr(under.value) != repr(laid.value):
                    changed.append((name, repr(laid.value)))
            self._cached_key = (self._files.digest(), tuple(sorted(changed)))
        return self._cached_key


class Reads:
    """A registry that records every value it returns: what a computation read is, by
    construction, its provenance (`read`, by name, in the order first read). It answers what a
    Registry answers; reading through it is the only way the kernel reads the registry."""

    __slots__ = ("registry", "read")

    def __init__(self, registry: Registry | Reads):
        self.registry = registry
        self.read: dict[str, Sourced] = {}

    def __getitem__(self, name: str) -> Sourced:
        entry = self.registry[name]
        self.read[name] = entry
        return entry

    def value(self, name: str) -> Any:
        return self[name].value

    def __contains__(self, name: str) -> bool:  # asking is not reading: a missing law is no value used
        return name in self.registry

    def record(self, entries: dict[str, Sourced]) -> None:
        """Entries read for a result shared between computations (a tensor's sizing), or rules a
        computation states beside the values it read, recorded as if read here."""
        self.read.update(entries)
        if isinstance(self.registry, Reads):
            self.registry.record(entries)

    def nested(self) -> Reads:
        """A view recording into its own `read` and into this one's."""
        return Reads(self)

    def derived(self, key, compute):
        return self.registry.derived(key, compute)


def overlay_from(data: dict, base: Registry | None = None) -> Registry:
    """An overlay given as data (the layout of an overlay file) laid over the shipped registry."""
    base = base or shipped()
    values: dict[str, Sourced] = {}
    for stem, node in data.items():
        _flatten(stem, node, values)
    return base.overlay(values)


def read_overlay(path: str | Path, base: Registry | None = None) -> Registry:
    """`--registry overlay.yaml`: the shipped registry with the overlay's values laid over it.

    The overlay has the registry's own layout: file stem, then the dotted path, each leaf
    `{value, source, how}` (`plan calibrate --out` writes one). A leaf must replace a value the
    registry has, or add one inside a table it has (a new family's law), with a value of the same
    shape (`overlay_problem`); anything else is named as bad input with the file, line and key, so
    a typo is never silently ignored and a bad value never reaches the arithmetic.
    """
    from pricing.errors import InputError, mention
    from pricing.files import read_text

    base = base or shipped()
    path = Path(path)
    text = read_text(path, "registry", base.value("input_limits.file_bytes"), "overlay YAML file")
    lines: dict[str, int] = {}
    try:
        data = yaml_fast.load_checked(text, lines)
    except yaml_fast.Refused as err:
        raise InputError(f"{path}:{err.line}: {err.path or '(top level)'}", err.problem, "fix the overlay") from None
    except yaml.YAMLError as err:
        raise InputError("registry", f"{path} is not valid YAML ({str(err).splitlines()[0]})",
                         "fix the file, or write one with `plan calibrate --out`") from None
    if not isinstance(data, dict):
        raise InputError("registry", f"{path} holds no mapping", "give registry file stems as top-level keys")

    def where(name: str) -> str:
        line = lines.get(name) or lines.get(name.rsplit(".", 1)[0])
        return f"{path}:{line}: {name}" if line else f"{path}: {name}"

    values: dict[str, Sourced] = {}
    for stem, node in data.items():
        if stem == "chips":
            raise InputError("registry", f"{path}: chips cannot be overlaid",
                             f"give a chip's memory or price with {mention('memory_bytes')} / {mention('price')}")
        if stem not in base.raw:
            raise InputError("registry", f"{path}: {stem!r} is not a registry file",
                             f"use one of {', '.join(sorted(base.raw))}")
        for name in _not_leaves(str(stem), node):
            raise InputError(where(name), "is not a registry value {value, source, how}",
                             "give each value as {value: ..., source: ..., how: ...}, as `plan calibrate --out` "
                             "writes them")
        _flatten(stem, node, values)
    shipped_only = base.value("input_limits.read_as_shipped")
    for name, laid in values.items():
        if fixed := next((p for p in shipped_only if fnmatch(name, p) or fnmatch(name, p + ".*")), None):
            raise InputError(where(name), f"is read as the package ships it, never from an overlay ({fixed}: "
                             "registry input_limits.read_as_shipped)", "remove it from the overlay")
        parent = name.rsplit(".", 1)[0]
        if name not in base and not ("." in parent and _is_table(base, parent) and parent not in base):
            raise InputError("registry", f"{path}: {name} is not a registry value",
                             "check the name against `plan memory --provenance` or the registry files")
        shipped_value = base.value(name) if name in base else _sibling(base, parent)
        problem = overlay_problem(laid.value, shipped_value, positive=name.rsplit(".", 1)[-1] in _positive_keys())
        if problem is not None:
            raise InputError(where(name), problem, f"give a value of the shape the shipped registry has ("
                             f"{_shown(shipped_value)})")
    return base.overlay(values)


LEAF_KEYS = {"value", "source", "how"}


def _not_leaves(prefix: str, node: Any) -> list[str]:
    """The names under `node` that are neither a table nor a leaf of exactly {value, source, how}."""
    if isinstance(node, dict) and ("value" in node or "source" in node):
        return [] if set(node) == LEAF_KEYS and isinstance(node["source"], str) and node["source"].strip() else [prefix]
    if isinstance(node, dict) and node:
        return [name for key, child in node.items() for name in _not_leaves(f"{prefix}.{key}", child)]
    return [prefix]


def _sibling(reg: Registry, table: str) -> Any:
    """A value of the table `table` (a new entry of a table is shaped as the ones it has), or None."""
    names = [n for n in reg.names(table + ".") if n.count(".") == table.count(".") + 1]
    return reg.value(names[0]) if names else None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def overlay_problem(value: Any, shipped: Any, at: str = "", positive: bool = False) -> str | None:
    """What makes `value` no stand-in for the shipped `shipped` (None: nothing): another type, a
    number that is not finite or has the other sign (a positive law stays positive: `block_size: 0`,
    a utilization of -5), an empty table or list where the shipped one has entries, or an entry of
    it missing a key every shipped entry has or holding one no shipped entry has (a row is shaped by
    every shipped row, a number of a list by the least shipped one). `at` is the path inside the value,
    for the message."""
    here = f" at {at}" if at else ""
    if shipped is None:
        return None
    if isinstance(shipped, bool) or isinstance(value, bool):
        return None if isinstance(shipped, bool) and isinstance(value, bool) else \
            f"{value!r}{here} is not {'true or false' if isinstance(shipped, bool) else 'a number'}"
    if isinstance(shipped, (int, float)):
        if not isinstance(value, (int, float)):
            return f"{value!r}{here} is not a number"
        if not math.isfinite(value):
            return f"{value!r}{here} is not a finite number"
        if positive and value <= 0:
            return f"{value!r}{here} must be positive (registry input_limits.positive_overlay_keys)"
        if shipped >= 0 and value < 0:
            return f"{value!r}{here} must not be negative, as the shipped {shipped!r} is not"
        return None
    if isinstance(shipped, str):
        return None if isinstance(value, str) and value.strip() else f"{value!r}{here} is not a word"
    if isinstance(shipped, dict):
        if not isinstance(value, dict):
            return f"{_shown(value)}{here} is not a table"
        if shipped and not value:
            return f"the table{here} is empty"
        for key, item in value.items():
            problem = overlay_problem(item, shipped.get(key, _first(shipped.values())), f"{at}.{key}" if at else key,
                                      positive or key in _positive_keys())
            if problem:
                return problem
        return None
    if isinstance(shipped, list):
        if not isinstance(value, list):
            return f"{_shown(value)}{here} is not a list"
        if shipped and not value:
            return f"the list{here} is empty"
        entries = [e for e in shipped if isinstance(e, dict)]
        required = set.intersection(*(set(e) for e in entries)) if entries and len(entries) == len(shipped) else set()
        row = _row_shape(entries)
        numbers = [e for e in shipped if isinstance(e, (int, float)) and not isinstance(e, bool)]
        for i, item in enumerate(value):
            if required and isinstance(item, dict) and required - set(item):
                return f"entry {i}{here} lacks {', '.join(sorted(required - set(item)))}"
            if row and isinstance(item, dict) and set(item) - set(row):
                return (f"entry {i}{here} has {', '.join(map(str, sorted(set(item) - set(row), key=str)))}, "
                        f"which no shipped entry has (keys: {', '.join(row)})")
            if row and isinstance(item, dict):
                like = row
            elif numbers and isinstance(item, (int, float)) and not isinstance(item, bool):
                like = min(numbers)  # a sign some shipped entry has (an operator table's negative ln_ratio) is none
            else:
                like = next((e for e in shipped if type(e) is type(item)), shipped[0] if shipped else None)
            problem = overlay_problem(item, like, f"{at}[{i}]", positive)
            if problem:
                return problem
        return None
    return None


def _row_shape(entries: list[dict]) -> dict:
    """The shape of a row of a list of tables: every key some shipped row has, each with the value of
    the first row that has it (a key only some rows have, as scheduler_defaults' exclude_generations,
    is shaped by the rows that have it, not by the first row's first value)."""
    shape: dict = {}
    for entry in entries:
        for key, item in entry.items():
            shape.setdefault(key, item)
    return shape


def _positive_keys() -> frozenset[str]:
    """The keys whose numbers an overlay must keep positive (sizes and counts the kernel divides by)."""
    return frozenset(shipped().value("input_limits.positive_overlay_keys"))


def _first(values) -> Any:
    return next(iter(values), None)


def _is_table(reg: Registry, dotted: str) -> bool:
    stem, _, rest = dotted.partition(".")
    node = reg.raw.get(stem)
    for part in rest.split(".") if rest else []:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return isinstance(node, dict) and not _is_leaf(node)


SHIPPED = Registry(DataFiles(HERE))  # the package's own data: each file parsed when first read


def _shipped_with(overlay: dict[str, Sourced]) -> Registry:
    """The shipped registry (this process's), or `overlay` laid over it (`Registry.__reduce__`)."""
    return SHIPPED.overlay(overlay) if overlay else SHIPPED


def shipped() -> Registry:
    """The registry shipped with the package (its files parsed as their values are read): the one
    owner of what is worked out from the package's data files alone (`Registry.derived`)."""
    return SHIPPED
