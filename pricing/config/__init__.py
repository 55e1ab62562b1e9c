"""Where a model's architecture comes from: a model card the project ships, a user's
config.json (a file, or a folder holding one and perhaps hf_quant_config.json), or a
Hugging Face id found in the local Hugging Face cache. Never the network.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pricing import yaml_fast
from pricing.config.defaults import DECODER_KEYS, TOWER_KEYS, decoder_config
from pricing.config.fields import check_config
from pricing.errors import InputError, mention, suggest
from pricing.files import read_text
from pricing.registry import Registry, shipped

CARDS = Path(__file__).resolve().parent.parent / "cards"


@dataclass(frozen=True)
class ModelSource:
    """A model's architecture fields (the decoder's, for multimodal wrappers) and its origin."""

    name: str
    hf_id: str
    config: dict = field(hash=False, compare=False)
    hf_quant_config: dict | None = field(default=None, hash=False, compare=False)
    origin: str = ""
    description: str = ""
    folder: Path | None = field(default=None, hash=False, compare=False)  # where its files are (checkpoint check)


def _card(path: Path) -> dict:
    """One card file, read once and kept by the shipped registry, the owner of the package's data
    (Registry.derived; never mutated: callers copy what they change)."""
    return shipped().derived(("config.card", path), lambda: yaml_fast.load(path.read_text()))


def card_index() -> dict[str, Path]:
    """Short name -> card file, with aliases (kept as the cards are)."""
    return shipped().derived(("config.card_index",), _card_index)


def _card_index() -> dict[str, Path]:
    index: dict[str, Path] = {}
    for path in sorted(CARDS.glob("*.yaml")):
        card = _card(path)
        index[card["name"]] = path
        for alias in card.get("aliases", []):
            index[alias] = path
    return index


def list_cards() -> list[dict[str, Any]]:
    """Every shipped card: name, Hugging Face id, description."""
    out = []
    for path in sorted(CARDS.glob("*.yaml")):
        card = _card(path)
        out.append({"name": card["name"], "hf_id": card["hf_id"], "description": card.get("description", ""),
                    "aliases": card.get("aliases", [])})
    return sorted(out, key=lambda c: c["name"])


def _read_json(path: Path, what: str) -> dict:
    """A JSON object from a user's file (pricing/files.py: a regular file, within the registry's cap, UTF-8)."""
    text = read_text(path, "model", shipped().value("input_limits.file_bytes"), what)
    try:
        data = json.loads(text)  # NaN and Infinity too (transformers writes Infinity: Nemotron-H's time_step_limit);
        # the fields the graph sizes by are checked finite (pricing/config/fields.py)
    except json.JSONDecodeError as err:
        raise InputError("model", f"{path} is not valid JSON ({err.msg} at line {err.lineno})",
                         f"fix the {what} or point {mention('model')} at another one") from None
    except RecursionError:
        raise InputError("model", f"{path} nests too deeply to be a {what}", f"fix the {what}") from None
    if not isinstance(data, dict):
        raise InputError("model", f"{path} does not hold a JSON object", f"point {mention('model')} at a {what}")
    return data


def _decoder(raw: dict, where: str, registry: Registry | None) -> dict:
    """The decoder config of `raw`, its values checked before any arithmetic (pricing/config/fields.py)
    against `registry`'s config defaults and ranges (None: the shipped registry's)."""
    for key in DECODER_KEYS + TOWER_KEYS:
        if key in raw and raw[key] is not None and not isinstance(raw[key], dict):
            raise InputError("model", f"{where}: {key}: {raw[key]!r} is not a mapping", f"give {key} as an object")
    cfg = decoder_config(raw, registry)
    check_config(cfg, where, registry)
    return cfg


def _from_folder(folder: Path, name: str, hf_id: str, origin: str, registry: Registry | None) -> ModelSource:
    raw = _read_json(folder / "config.json", "config.json")
    quant_path = folder / "hf_quant_config.json"
    hf_quant = _read_json(quant_path, "hf_quant_config.json") if quant_path.exists() else None
    return ModelSource(name, hf_id, _decoder(raw, str(folder / "config.json"), registry), hf_quant, origin,
                       folder=folder)


def _hf_cache_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("HF_HUB_CACHE"):
        dirs.append(Path(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        dirs.append(Path(os.environ["HF_HOME"]) / "hub")
    dirs.append(Path.home() / ".cache" / "huggingface" / "hub")
    return dirs


def hf_cache_snapshots(hf_id: str) -> list[Path]:
    """The local Hugging Face cache's snapshot folders of `hf_id`, refs/main first."""
    out = []
    for hub in _hf_cache_dirs():
        repo = hub / ("models--" + hf_id.replace("/", "--"))
        snapshots = repo / "snapshots"
        if not snapshots.is_dir():
            continue
        ref = repo / "refs" / "main"
        if ref.exists() and (snapshots / ref.read_text().strip()).is_dir():
            out.append(snapshots / ref.read_text().strip())
        out += [p for p in sorted(snapshots.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True) if p not in out]
    return out


def _from_hf_cache(hf_id: str, registry: Registry | None) -> ModelSource | None:
    for snap in hf_cache_snapshots(hf_id):
        if (snap / "config.json").exists():
            return _from_folder(snap, hf_id, hf_id, f"Hugging Face cache {snap}", registry)
    return None


def load_card(path: Path, registry: Registry | None = None) -> ModelSource:
    """A shipped card (read once, kept by the shipped registry), its config checked against
    `registry` (None: the shipped one)."""
    return _from_card(copy.deepcopy(_card(path)), path, registry)


def _from_card(card: dict, path: Path, registry: Registry | None) -> ModelSource:
    return ModelSource(card["name"], card["hf_id"], _decoder(card["config"], str(path), registry),
                       card.get("hf_quant_config"), f"model card {path.name}", card.get("description", ""))


CARD_KEYS = {"name": str, "hf_id": str, "config": dict}  # what a card holds (the layout of pricing/cards)


def user_card(path: Path, registry: Registry | None = None) -> ModelSource:
    """A card of one's own (`--model mine.yaml`, the layout of pricing/cards), read as a user's file:
    a regular file within the cap, UTF-8, YAML with unique keys and finite numbers, holding `name`,
    `hf_id` and `config`."""
    text = read_text(path, "model", shipped().value("input_limits.file_bytes"), "model card")
    try:
        card = yaml_fast.load_checked(text)
    except yaml_fast.Refused as err:
        raise InputError("model", f"{path}:{err.line}: {err.path or '(top level)'}: {err.problem}",
                         "fix the card") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise InputError("model", f"{path} is not valid YAML" + (f" (line {mark.line + 1})" if mark else ""),
                         "fix the card's syntax") from None
    if isinstance(card, dict) and "services" in card:
        raise InputError("model", f"{path} is a scenario file, not a model card",
                         "run it with `plan scenario`, or give a card (name, hf_id, config) or a config.json")
    if not isinstance(card, dict):
        raise InputError("model", f"{path} holds {type(card).__name__ if card is not None else 'nothing'}, not a "
                         "model card", "give a card (a mapping of name, hf_id and config; see pricing/cards) or a "
                         "config.json")
    for key, kind in CARD_KEYS.items():
        if not isinstance(card.get(key), kind) or not card[key]:
            what = "a mapping" if kind is dict else "a string"
            raise InputError("model", f"{path}: {key}: " + ("missing" if key not in card else
                             f"{card[key]!r} is not {what}" if not isinstance(card[key], kind) else "is empty"),
                             f"give the card's {key} as {what} (the layout of pricing/cards)")
    if card.get("hf_quant_config") is not None and not isinstance(card["hf_quant_config"], dict):
        raise InputError("model", f"{path}: hf_quant_config: not a mapping", "give it as the checkpoint's "
                         "hf_quant_config.json object, or drop it")
    return _from_card(card, path, registry)


def _card_for(key: str) -> Path | None:
    """The card named `key` (short name, alias or Hugging Face id, case-insensitive). A card's file
    is named after the card (`<name>.yaml`), so a short name is found without reading the others."""
    named = CARDS / f"{key}.yaml"
    if "/" not in key and named.is_file() and _card(named)["name"] == key:
        return named
    index = card_index()
    if key in index:
        return index[key]
    for card in list_cards():
        if card["hf_id"].lower() == key:
            return index[card["name"]]
    return None


def _holds_weights(folder: Path) -> bool:
    """A folder vLLM can load weights from: safetensors (or their index) beside the config."""
    return (folder / "model.safetensors.index.json").exists() or any(folder.glob("*.safetensors"))


def resolve(model: str, registry: Registry | None = None) -> ModelSource:
    """`--model`: a path to config.json or its folder, a path to a card file (the layout of
    pricing/cards), a Hugging Face id in the local cache, or a card's short name or HF id. The
    user's own file wins over a card of the same name (and says so in `origin`); `hf_id` is what
    `vllm serve` is given: the path or id as the user gave it, or the card's HF id; empty for a bare
    config file (no weights beside it): the weights' location is then unknown, never the config's
    `_name_or_path` or the file's name. Its config is checked against `registry` (None: the shipped one)."""
    if not model or not model.strip():
        raise InputError("model", "is empty", "give a card name (see `plan models`), a config.json path or a HF id")
    key = model.strip().lower()
    card = _card_for(key)
    shadow = f" (not the model card {card.name} of the same name)" if card else ""
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise InputError("model", f"folder {path} holds no config.json",
                             f"point {mention('model')} at the model's folder")
        return _from_folder(path, path.name, model, f"folder {path}{shadow}", registry)
    if path.is_file() and path.suffix in (".yaml", ".yml"):  # a card of one's own (the cards' layout)
        return user_card(path, registry)
    if path.exists():  # a file (a FIFO or a device is refused by the reader, before it is opened)
        raw = _read_json(path, "config.json")
        quant = path.parent / "hf_quant_config.json"
        hf_quant = _read_json(quant, "hf_quant_config.json") if quant.exists() and path.name == "config.json" else None
        served = str(Path(model).parent) if path.name == "config.json" and _holds_weights(path.parent) else ""
        return ModelSource(path.stem if path.name != "config.json" else path.parent.name or path.stem, served,
                           _decoder(raw, str(path), registry), hf_quant, f"file {path}{shadow}",
                           folder=path.parent if path.name == "config.json" else None)
    if "/" in model:
        found = _from_hf_cache(model.strip(), registry)
        if found is not None:
            return ModelSource(found.name, found.hf_id, found.config, found.hf_quant_config, found.origin + shadow,
                               folder=found.folder)
    if card is not None:
        return load_card(card, registry)
    cards = list_cards()
    names = [c["name"] for c in cards] + [a for c in cards for a in c["aliases"]] + [c["hf_id"] for c in cards]
    near = suggest(model, names)
    raise InputError("model", f"unknown model {model!r}" + (f"; {near}" if near else ""),
                     "use a card name (see `plan models`), a path to a config.json, or a Hugging Face id in the "
                     "local cache")
