"""The checkpoint's own size, for the cross-check against the graph: read from the safetensors
headers (every tensor's dtype, shape and byte range, without touching the data) or, when only
the index is at hand, from `model.safetensors.index.json` (its `metadata.total_size`).

A safetensors file starts with an 8-byte little-endian header length, then that many bytes of
JSON: {tensor name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}
(huggingface/safetensors, format specification). Only the header is read.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

HEADER_LIMIT = 100 << 20  # the safetensors format's own bound on the header (100 MB)


@dataclass(frozen=True)
class Checkpoint:
    """What the files say: per-tensor bytes (when headers were read) and the total."""

    where: str  # the folder read
    total_bytes: int
    tensors: dict[str, int] = field(default_factory=dict)  # name -> bytes (empty: index only)
    source: str = ""  # "safetensors headers (N files)" | "model.safetensors.index.json"
    unreadable: tuple[str, ...] = ()  # files whose header could not be read (e.g. Git LFS pointers)


def read_header(path: Path) -> dict:
    """One file's safetensors header (tensor entries only)."""
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("shorter than the 8-byte header length")
        (size,) = struct.unpack("<Q", head)
        if size <= 0 or size > HEADER_LIMIT:
            raise ValueError(f"header length {size} out of range")
        raw = f.read(size)
    if len(raw) < size:
        raise ValueError("truncated header")
    header = json.loads(raw)
    return {k: v for k, v in header.items() if k != "__metadata__"}


def tensor_bytes(entry: dict) -> int:
    begin, end = entry["data_offsets"]
    return int(end) - int(begin)


def read_checkpoint(folder: Path) -> Checkpoint | None:
    """The checkpoint in `folder`: its safetensors headers, else its index; None when neither."""
    files = sorted(folder.glob("*.safetensors"))
    tensors: dict[str, int] = {}
    unreadable = []
    for path in files:
        try:
            for name, entry in read_header(path).items():
                tensors[name] = tensor_bytes(entry)
        except (OSError, ValueError, KeyError, TypeError) as err:
            unreadable.append(f"{path.name} ({err})")
    if tensors:
        return Checkpoint(str(folder), sum(tensors.values()), tensors, f"safetensors headers ({len(files)} files)",
                          tuple(unreadable))
    index = folder / "model.safetensors.index.json"
    if index.exists():
        try:
            total = int(json.loads(index.read_text())["metadata"]["total_size"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return Checkpoint(str(folder), total, {}, "model.safetensors.index.json", tuple(unreadable))
    return None


def find_checkpoint(folder: Path | None, hf_id: str) -> Checkpoint | None:
    """The checkpoint beside the model's config.json, else in the local Hugging Face cache."""
    from pricing.config import hf_cache_snapshots

    places = [folder] if folder is not None else []
    if "/" in hf_id:
        places += hf_cache_snapshots(hf_id)
    for place in places:
        found = read_checkpoint(place)
        if found is not None:
            return found
    return None
