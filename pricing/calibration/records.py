"""Real vLLM start-up records (the JSONL layout of shared/calibration/README.md).

A record is a deployment (model, GPU, tp/pp/dp, flags) and what vLLM printed about its memory,
in GiB (2^30 bytes) per GPU as vLLM prints them. Unknown fields are None. `plan check-log`
turns a start-up log into the same shape, so a fleet's own logs and the published records go
through one fit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from pricing.errors import InputError
from pricing.files import read_text
from pricing.registry import shipped


class Observed(BaseModel):
    model_config = ConfigDict(extra="allow")

    weights_gib: float | None = None
    activation_peak_gib: float | None = None
    non_torch_gib: float | None = None
    cuda_graph_gib: float | None = None
    available_kv_gib: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens: int | None = None
    total_gpu_memory_gib: float | None = None
    extra: dict[str, Any] = {}

    def extra_gib(self, name: str) -> float | None:
        value = (self.extra or {}).get(name)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class StartupRecord(BaseModel):
    """One start-up: the deployment and what the engine logged."""

    model_config = ConfigDict(extra="allow")

    id: str
    source_url: str | None = None
    vllm_version: str | None = None
    model: str
    gpu: str | None = None
    num_gpus: int | None = None
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: Any = None
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_dtype: str | None = "auto"
    quantization: str | None = None
    dtype: str | None = None
    block_size: int | None = None
    prefix_caching: bool | None = None
    spec_decode: Any = None
    enforce_eager: bool | None = None
    sampler: str | None = None  # the top-k/top-p path the log states: "flashinfer" | "native"; None: not stated
    observed: Observed = Observed()
    status: str = "ok"
    notes: str | None = None

    @property
    def refused(self) -> bool:
        """The record says vLLM refused to start (KV cache too small, none left, OOM after sizing)."""
        return self.status.startswith("failed")

    @property
    def verdict_stated(self) -> bool:
        """Whether the record states a start-up verdict (it started and sized its cache, or refused)."""
        return self.status in ("ok",) or self.refused


def _not_finite(word: str):
    raise ValueError(f"{word} is not a finite number")


def load_records(*paths: str | Path) -> list[StartupRecord]:
    """Records from JSONL files (one object a line); a bad line is one InputError naming it."""
    out: list[StartupRecord] = []
    for path in paths:
        path = Path(path)
        text = read_text(path, "RECORDS", shipped().value("input_limits.file_bytes"), "JSONL file of records")
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(StartupRecord.model_validate(json.loads(line, parse_constant=_not_finite)))
            except (json.JSONDecodeError, ValueError, RecursionError) as err:
                first = str(err).splitlines()[0]
                raise InputError("RECORDS", f"{path}:{number} is not a start-up record ({first})",
                                 "one JSON object a line, as in shared/calibration/README.md") from None
    return out
