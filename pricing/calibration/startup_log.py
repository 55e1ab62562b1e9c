"""vLLM start-up logs, release 0.6 to 0.33, read into a start-up record.

One pattern per logged fact and era (a line is matched wherever it sits, whatever prefix the
worker or the logger put before it):

    release     "vLLM API server version X", "Initializing a V1 LLM engine (vX) with config: …"
    arguments   "non-default args: {…}", the engine config line (model=…, tensor_parallel_size=…),
                "Chunked prefill is enabled with max_num_batched_tokens=N", "Using max model len N"
    weights     "Model loading took X GiB" (V1), "Loading model weights took X GB" (v0, GiB in fact),
                "model weights take X GiB" (v0 0.6-0.8)
    activation  "torch peak memory increase: X GiB" (0.9-0.10), "PyTorch activation peak memory
                takes X GiB" (v0), "X GiB for peak activation" (0.11+)
    non-torch   "non-torch forward increase memory: X GiB", "non_torch_memory takes X GiB",
                "X GiB for non-torch memory"
    graphs      "Graph capturing finished in N secs, took X GiB", "X GiB for CUDAGraph memory",
                "Estimated CUDA graph memory: X GiB total", "CUDA graph pool memory: A GiB (actual),
                E GiB (estimated)"
    KV memory   "Available KV cache memory: X GiB", "the rest of the memory reserved for KV Cache is
                X GiB" / "kv_cache_size=X GiB" / "available_kv_cache_memory X GiB" (v0)
    engine      "GPU KV cache size: N tokens", "Maximum concurrency for L tokens per request: C x",
                "# GPU blocks: N" (v0)
    device      "Free memory on device (F/T GiB) on startup", "total_gpu_memory (T GiB)" /
                "total_gpu_memory=T GiB", "Desired GPU memory utilization is (U, R GiB)"
    sampler     "Using FlashInfer for top-p & top-k sampling" (FlashInfer's kernel in the sampler
                warm-up), "Falling back to the PyTorch-native implementation of top-p & top-k
                sampling" / "FlashInfer top-p/top-k sampling unavailable" / "… is available but
                disabled by default" (0.11.1+, DEBUG) / "disabled via VLLM_USE_FLASHINFER_SAMPLER=0"
                (the native path): v1/sample/ops/topk_topp_sampler.py
    refusal     vLLM's own start-up errors (KV cache too small, none left, free memory short)

Several workers print the same lines: the first figure of each is kept, and for the available
KV memory the smallest (the engine takes the minimum over workers).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from pydantic import ValidationError

from pricing.calibration.records import Observed, StartupRecord
from pricing.errors import InputError
from pricing.registry import Registry

NUM = r"(-?\d+(?:\.\d+)?)"
INT = r"(\d[\d,]*)"

# observed figure -> patterns (first group is the value, in GiB unless noted)
OBSERVED_PATTERNS: dict[str, tuple[str, ...]] = {
    "weights_gib": (r"Model loading took " + NUM + r" ?GiB", r"Loading model weights took " + NUM + r" ?GB",
                    r"model weights take\s+" + NUM + r" ?GiB"),
    "activation_peak_gib": (r"torch peak memory increase: " + NUM + r" ?GiB",
                            r"PyTorch activation peak memory(?: takes)?\s+" + NUM + r" ?GiB",
                            NUM + r" GiB for peak activation"),
    "non_torch_gib": (r"non-torch forward increase memory: " + NUM + r" ?GiB",
                      r"non_torch_memory(?: takes)?[\s=]+" + NUM + r" ?GiB", NUM + r" GiB for non-torch memory"),
    "cuda_graph_gib": (r"Graph capturing finished in \d+ secs?, took " + NUM + r" ?GiB",
                       NUM + r" GiB for CUDAGraph memory", r"CUDA graph pool memory: " + NUM + r" GiB \(actual\)"),
    "cuda_graph_estimated_gib": (r"Estimated CUDA graph memory: " + NUM + r" GiB",
                                 r"CUDA graph pool memory: -?[\d.]+ GiB \(actual\), " + NUM + r" GiB \(estimated\)"),
    "available_kv_gib": (r"Available KV cache memory: " + NUM + r" ?GiB",
                         r"the rest of the memory reserved for KV Cache is " + NUM + r" ?GiB",
                         r"available_kv_cache_memory\s+" + NUM + r" ?GiB", r"\bkv_cache_size=" + NUM + r" ?GiB"),
    "total_gpu_memory_gib": (r"Free memory on device[^(]*\([\d.]+/" + NUM + r" GiB\) on startup",
                             r"total_gpu_memory[\s=(]+" + NUM + r" ?GiB"),
    "startup_free_gib": (r"Free memory on device[^(]*\(" + NUM + r"/[\d.]+ GiB\) on startup",),
    "requested_memory_gib": (r"Desired GPU memory utilization is \([\d.]+, " + NUM + r" GiB\)",
                             r"the current vLLM instance can use[^=]*=\s*" + NUM + r" ?GiB",
                             r"the current vLLM instance can use\s+" + NUM + r" ?GiB"),
}
TOKENS = re.compile(r"GPU KV cache size: " + INT + r" tokens")
CONCURRENCY = re.compile(r"Maximum concurrency for " + INT + r" tokens per request: " + NUM + r" ?x")
BLOCKS = re.compile(r"# (?:GPU|CUDA) blocks: (\d+)|num_gpu_blocks is: (\d+)")
VERSION = (re.compile(r"vLLM API server version (\S+)"), re.compile(r"LLM engine \(v?([^)\s]+)\) with config"))
V0_ENGINE = re.compile(r"Initializing a V0 LLM engine|Initializing an LLM engine|(?<![\w])worker\.py:\d+\]|"
                       r"Loading model weights took|# (?:GPU|CUDA) blocks:|Memory profiling results")
ENGINE_CONFIG = re.compile(r"LLM engine \([^)]*\) with config: (.*)")
NON_DEFAULT = re.compile(r"non-default args: (\{.*\})")
CHUNKED = re.compile(r"max_num_batched_tokens=(\d+)")
MAX_LEN = re.compile(r"Using max model len (\d+)")
UTIL = (re.compile(r"Desired GPU memory utilization is \(" + NUM), re.compile(r"gpu_memory_utilization[\s=(]+" + NUM))
SAMPLER_PATHS = (  # the top-k/top-p sampler's own start-up line -> the path its warm-up takes
    (re.compile(r"Using FlashInfer for top-p & top-k sampling"), "flashinfer"),
    (re.compile(r"PyTorch-native implementation of top-p & top-k sampling|FlashInfer top-p/top-k sampling "
                r"(?:unavailable|disabled via|is available but disabled)|FlashInfer version >= 0\.2\.3 required"),
     "native"),
)
REFUSALS = (
    r"To serve at least one request with the models?'s max seq len \(\d+\).*",
    r"No available memory for the cache blocks.*",
    r"The model's max seq len \(\d+\) is larger than the maximum number of tokens that can be stored in KV cache.*",
    r"Free memory on device .* on startup is less than desired GPU memory utilization.*",
    r"CUDA out of memory occurred when warming up sampler.*",
)
CONFIG_KEYS = {  # engine config line key -> record field
    "tensor_parallel_size": "tp", "pipeline_parallel_size": "pp", "data_parallel_size": "dp",
    "max_seq_len": "max_model_len", "quantization": "quantization", "enforce_eager": "enforce_eager",
    "kv_cache_dtype": "kv_cache_dtype", "dtype": "dtype", "enable_prefix_caching": "prefix_caching",
}
ARG_KEYS = {  # non-default args key -> record field
    "model": "model", "tensor_parallel_size": "tp", "pipeline_parallel_size": "pp", "data_parallel_size": "dp",
    "gpu_memory_utilization": "gpu_memory_utilization", "max_model_len": "max_model_len",
    "max_num_seqs": "max_num_seqs", "max_num_batched_tokens": "max_num_batched_tokens",
    "kv_cache_dtype": "kv_cache_dtype", "block_size": "block_size", "enforce_eager": "enforce_eager",
    "quantization": "quantization", "enable_prefix_caching": "prefix_caching", "dtype": "dtype",
    "enable_expert_parallel": "ep",
}


def fact_share(registry: Registry | None = None) -> float:
    """The least share of a log excerpt's non-blank lines that must carry a vLLM fact (registry
    startup_logs.fact_share, measured on the shipped logs and README.md; None: the shipped registry)."""
    from pricing.registry import shipped

    return float((registry or shipped())["startup_logs.fact_share"].value)


@dataclass
class ParsedLog:
    """What a start-up log says, and on which line (1-based) each fact was read."""

    release: str | None = None
    engine: str | None = None  # "v0" when the log comes from the V0 engine
    deployment: dict = field(default_factory=dict)
    observed: dict = field(default_factory=dict)
    refusal: str | None = None
    sampler: str | None = None  # "flashinfer" | "native" as the sampler's line states; None: no line
    evidence: dict = field(default_factory=dict)  # fact -> line number
    lines: int = 0  # lines that are not blank
    starts: list = field(default_factory=list)  # the line of each start-up the text holds (its API server's
    # version line, or its "non-default args" line): more than one is several start-ups run into one file
    registry: Registry | None = field(default=None, repr=False, compare=False)  # read with (None: shipped)

    @property
    def empty(self) -> bool:
        return not self.observed and not self.deployment and self.release is None and self.refusal is None

    @property
    def startup_log(self) -> bool:
        """Whether the text reads as a start-up log: it states the release or the engine's arguments,
        or its lines are mostly vLLM's (a log excerpt). A document that quotes a few of vLLM's lines
        (README.md: 4 fact lines in 1,200) is not one (registry startup_logs.fact_share)."""
        if self.empty:
            return False
        if self.release is not None or self.deployment:
            return True
        return len(set(self.evidence.values())) >= fact_share(self.registry) * max(1, self.lines)

    def record(self, name: str = "log", model: str | None = None, gpu: str | None = None) -> StartupRecord:
        """The log as a start-up record (the calibration's format)."""
        d = dict(self.deployment)
        if "max_model_len" not in d and "max_concurrency_tokens" in self.observed:
            d["max_model_len"] = self.observed["max_concurrency_tokens"]  # "Maximum concurrency for L tokens"
        version = self.release or ("v0 engine" if self.engine == "v0" else None)
        status = "ok"
        if self.refusal:
            status = "failed_no_kv_memory" if self.refusal.startswith("No available") else "failed_kv_too_small"
        obs = {k: v for k, v in self.observed.items() if k in Observed.model_fields}
        extra = {k: v for k, v in self.observed.items() if k not in Observed.model_fields}
        try:
            return StartupRecord(id=name, vllm_version=version, model=model or d.pop("model", None) or "",
                                 gpu=gpu, observed=Observed(**obs, extra=extra), status=status, sampler=self.sampler,
                                 **{k: v for k, v in d.items() if k != "model" and v is not None})
        except ValidationError as err:  # a setting or figure no start-up has (max_model_len nan): named, one line
            first = err.errors()[0]
            raise InputError("FILE", f"{name}: {'.'.join(map(str, first['loc']))} {first['input']!r} as the log "
                             f"states it: {first['msg'][:1].lower() + first['msg'][1:]}",
                             "give the log as vLLM printed it") from None


def _value(text: str):
    text = text.strip().strip("'\"")
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _engine_config(text: str) -> dict:
    out = {}
    m = re.search(r"\bmodel='([^']+)'", text)
    if m:
        out["model"] = m.group(1)
    for key, name in CONFIG_KEYS.items():
        m = re.search(rf"(?<![\w.]){key}=([^,\s]+)", text)
        if m:
            value = _value(m.group(1))
            if name == "dtype" and isinstance(value, str):
                value = value.replace("torch.", "")
            out[name] = value
    return out


def _non_default(text: str) -> dict:
    try:
        args = ast.literal_eval(text)
    except (ValueError, SyntaxError):  # objects such as KVTransferConfig(...): read the plain pairs
        args = {m.group(1): _value(m.group(2)) for m in re.finditer(r"'(\w+)': ('[^']*'|[\w.+-]+)", text)}
    out = {}
    for key, value in args.items():
        if key in ARG_KEYS and not isinstance(value, dict):
            out[ARG_KEYS[key]] = value
    return out


ARGS_CONTINUATION_LINES = 8  # how far a hard-wrapped "non-default args: {…}" line is followed


def _lines(text: str) -> list[tuple[int, str]]:
    """The log's lines, numbered from 1, with a "non-default args: {…}" line that a terminal or a
    copy hard-wrapped joined back to its closing brace (it is numbered by its first line)."""
    raw = text.splitlines()
    out, i = [], 0
    while i < len(raw):
        line, number = raw[i], i + 1
        if "non-default args: {" in line:
            j = i
            while line.count("{") > line.count("}") and j + 1 < len(raw) and j - i < ARGS_CONTINUATION_LINES:
                j += 1
                line += raw[j]
            if line.count("{") == line.count("}"):
                i = j
            else:
                line = raw[i]  # never closed: the line as it is
        out.append((number, line))
        i += 1
    return out


def parse(text: str, registry: Registry | None = None) -> ParsedLog:
    """Read every fact the log states (see the module docstring for the lines), its share of fact
    lines judged by `registry` (None: the shipped one)."""
    log = ParsedLog(registry=registry)
    patterns = {name: [re.compile(p) for p in pats] for name, pats in OBSERVED_PATTERNS.items()}
    refusals = [re.compile(p) for p in REFUSALS]
    log.lines = sum(1 for line in text.splitlines() if line.strip())
    versions, arguments = [], []
    for number, line in _lines(text):
        if VERSION[0].search(line):
            versions.append(number)
        if NON_DEFAULT.search(line):
            arguments.append(number)
        if log.release is None:
            for rx in VERSION:
                m = rx.search(line)
                if m:
                    log.release = m.group(1)
                    log.evidence["release"] = number
                    break
        if V0_ENGINE.search(line) and "V1" not in line:
            log.engine = log.engine or "v0"
        m = ENGINE_CONFIG.search(line)
        if m:
            for k, v in _engine_config(m.group(1)).items():
                log.deployment.setdefault(k, v)
            log.evidence.setdefault("engine arguments", number)
        m = NON_DEFAULT.search(line)
        if m:
            log.deployment.update(_non_default(m.group(1)))  # what the user gave wins over derived values
            log.evidence["engine arguments"] = number
        if "Chunked prefill is enabled" in line and (m := CHUNKED.search(line)):
            log.deployment.setdefault("max_num_batched_tokens", int(m.group(1)))
        if "Cudagraph is disabled under eager mode" in line or "enforce-eager is enabled" in line:
            log.deployment.setdefault("enforce_eager", True)
        if m := MAX_LEN.search(line):
            log.deployment.setdefault("max_model_len", int(m.group(1)))
        for rx in UTIL:
            if "gpu_memory_utilization" not in log.deployment and (m := rx.search(line)) and "--gpu-memory" not in line:
                log.deployment["gpu_memory_utilization"] = float(m.group(1))
        for name, rxs in patterns.items():
            for rx in rxs:
                m = rx.search(line)
                if not m:
                    continue
                value = float(m.group(1))
                if name == "available_kv_gib" and name in log.observed:
                    log.observed[name] = min(log.observed[name], value)
                elif name not in log.observed:
                    log.observed[name] = value
                    log.evidence[name] = number
                break
        if m := TOKENS.search(line):
            log.observed.setdefault("kv_cache_tokens", int(m.group(1).replace(",", "")))
            log.evidence.setdefault("kv_cache_tokens", number)
        if m := CONCURRENCY.search(line):
            log.observed.setdefault("max_concurrency_tokens", int(m.group(1).replace(",", "")))
            log.observed.setdefault("max_concurrency", float(m.group(2)))
            log.evidence.setdefault("max_concurrency", number)
        if m := BLOCKS.search(line):
            log.observed.setdefault("kv_cache_blocks", int(m.group(1) or m.group(2)))
        if log.sampler is None:
            for rx, path in SAMPLER_PATHS:
                if rx.search(line):
                    log.sampler = path
                    log.evidence["sampler"] = number
                    break
        if log.refusal is None:
            for rx in refusals:
                if m := rx.search(line):
                    log.refusal = m.group(0).strip()
                    log.evidence["refusal"] = number
                    break
    log.starts = max(versions, arguments, key=len)
    return log
