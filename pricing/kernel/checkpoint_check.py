"""The graph against the checkpoint's own files: the bytes the graph says the
checkpoint stores (every tensor whole, in its stored layout: `Scheme.params(stored=True)`) beside
the bytes the safetensors headers (or the index's total_size) state, and the checkpoint tensors
the graph does not account for. A gap above the registry's threshold is a warning."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from pricing.config.checkpoint import Checkpoint, find_checkpoint
from pricing.config.quantization import Mags, Placement
from pricing.graph.model import ModelGraph
from pricing.registry import Registry

PREFIXES = ("model.language_model.", "language_model.model.", "language_model.", "model.")
# checkpoint module -> graph tensor name (vLLM's packed_modules_mapping and expert stacking)
RENAMES = (
    (re.compile(r"\.experts\.\d+\.(gate_proj|up_proj|w1|w3)$"), ".experts.w13"),
    (re.compile(r"\.experts\.\d+\.(down_proj|w2)$"), ".experts.w2"),
    (re.compile(r"\.shared_experts?\.(gate_proj|up_proj|w1|w3)$"), r".shared_experts.w13"),
    (re.compile(r"\.shared_experts?\.(down_proj|w2)$"), r".shared_experts.w2"),
    (re.compile(r"\.(gate_proj|up_proj)$"), ".gate_up_proj"),
    # Kimi delta attention's fused projections (an MLA layer's q_proj keeps its own name: tried first)
    (re.compile(r"\.self_attn\.(q_proj|k_proj|v_proj|b_proj|f_a_proj)$"), ".self_attn.in_proj_qkvgfab"),
)


@dataclass(frozen=True)
class Unaccounted:
    pattern: str  # the tensor name with layer numbers as N
    tensors: int
    bytes: int


@dataclass(frozen=True)
class CheckpointCheck:
    found: bool
    note: str
    where: str = ""
    source: str = ""
    checkpoint_bytes: int = 0
    graph_bytes: int = 0
    gap: float = 0.0  # (checkpoint - graph) / checkpoint
    warning: str | None = None
    unaccounted: tuple[Unaccounted, ...] = field(default=())


def graph_stored_bytes(model: ModelGraph, reg: Registry) -> tuple[int, set[str]]:
    """Bytes of every tensor of every node (drafters included: checkpoints ship them) in the
    layout the checkpoint stores, and the graph's tensor names."""
    mags = Mags(reg)
    dtype_bytes = mags.dtype_bytes
    total, names = 0, set()
    for _, data in model.g.nodes(data=True):
        for t in data["tensors"]:
            place = Placement(t.rows, t.cols, t.cols, t.parts, model.dtype, "sm90", t.split.startswith("expert"),
                              stored=True)
            total += sum(p.nbytes(dtype_bytes) for p in t.fmt.params(place, mags)) * t.count
            names.add(t.name)
    return total, names


def graph_candidates(name: str) -> list[str]:
    """Graph tensor names a checkpoint tensor may belong to."""
    for prefix in PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    module, _, leaf = name.rpartition(".")
    out = [name, module]
    for pattern, repl in RENAMES:
        renamed = pattern.sub(repl, module)
        if renamed != module:
            out.append(renamed)
    if module.endswith(".experts"):  # stacked experts (gpt-oss): experts.gate_up_proj_blocks ...
        out.append(module + (".w13" if leaf.startswith(("gate_up", "w13")) else ".w2"))
    if leaf == "bias":  # q_proj.bias -> q_bias
        out.append(re.sub(r"_proj$", "_bias", module))
    parent, _, _ = module.rpartition(".")
    out.append(parent)  # sub-parameters (e.g. rotary inv_freq) count against their layer
    return out


def check_checkpoint(model: ModelGraph, reg: Registry) -> CheckpointCheck:
    folder = model.extras.get("source_folder")
    ckpt: Checkpoint | None = find_checkpoint(folder, model.hf_id)
    if ckpt is None:
        return CheckpointCheck(False, "no model.safetensors.index.json or *.safetensors beside the config or in the "
                                      "local Hugging Face cache: the weights are not cross-checked")
    graph_bytes, names = graph_stored_bytes(model, reg)
    groups: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for tensor, nbytes in ckpt.tensors.items():
        if not any(c in names for c in graph_candidates(tensor)):
            g = groups[re.sub(r"\.\d+\.", ".N.", tensor)]
            g[0] += 1
            g[1] += nbytes
    unaccounted = tuple(sorted((Unaccounted(p, n, b) for p, (n, b) in groups.items()), key=lambda u: -u.bytes))
    gap = (ckpt.total_bytes - graph_bytes) / ckpt.total_bytes if ckpt.total_bytes else 0.0
    threshold = reg["quantization.checkpoint_gap_warning"].value
    warning = None
    if abs(gap) > threshold:
        named = ", ".join(u.pattern for u in unaccounted[:3])
        warning = (f"the checkpoint holds {ckpt.total_bytes:,} bytes and the graph accounts for {graph_bytes:,} "
                   f"({100 * gap:+.1f} %, above {100 * threshold:.0f} %)"
                   + (f"; tensors the graph does not account for: {named}" if named else ""))
    note = f"{ckpt.source} in {ckpt.where}" + (f"; unreadable: {', '.join(ckpt.unreadable)}" if ckpt.unreadable
                                                else "")
    return CheckpointCheck(True, note, ckpt.where, ckpt.source, ckpt.total_bytes, graph_bytes, gap, warning,
                           unaccounted)
