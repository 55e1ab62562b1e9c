"""Shared pieces of the family builders: reading config fields, the served width of each
tensor (the checkpoint's quantization), and the layers every decoder has."""

from __future__ import annotations

from pricing.config.dtypes import DTYPES, model_dtype  # noqa: F401  (the builders read them here)
from pricing.config.quantization import QuantConfig, Unquantized, checkpoint_names, read
from pricing.errors import InputError
from pricing.graph.nodes import Tensor


def need(cfg: dict, field: str, family: str):
    """A config field the family cannot do without; a clear error naming it when absent."""
    if field not in cfg or cfg[field] is None:
        raise InputError(f"config.json: {field}", f"missing, and the {family} family needs it",
                         "add the field to the model's config.json")
    return cfg[field]


def quantization(cfg: dict, hf_quant: dict | None, dtype: str, override: str | None,
                 where: str = "config.json") -> QuantConfig:
    """The served widths: the checkpoint's quantization_config (or hf_quant_config.json), or
    `--quantization` (pricing/config/quantization.py reads every method vLLM 0.33 loads)."""
    return read(cfg, hf_quant, dtype, override, where)


class TensorMaker:
    """Makes tensors at the width the quantization serves them in: each linear layer and expert
    with the scheme its checkpoint rule gives it (unquantized where the rules leave it)."""

    def __init__(self, quant: QuantConfig, dtype: str):
        self.quant = quant
        self.dtype = dtype
        self.dense = Unquantized(dtype)

    def linear(self, module: str, rows: int, cols: int, split: str, *, expert_count: int = 0,
               heads: int = 0, quantized: bool = True, outputs: tuple[int, ...] = (),
               replicated_output: int = -1) -> Tensor:
        expert = expert_count > 0
        scheme = (self.quant.scheme(module, expert) if quantized else None) or self.dense
        parts = len(checkpoint_names(module))
        if outputs and sum(outputs) != rows:
            raise ValueError(f"{module}: merged outputs {outputs} do not add up to its {rows} rows")
        return Tensor(module, rows, cols, scheme, split, count=max(1, expert_count), heads=heads, parts=parts,
                      outputs=tuple(outputs), replicated_output=replicated_output)

    def plain(self, module: str, rows: int, cols: int = 1, split: str = "replicated", fmt: str | None = None,
              count: int = 1, heads: int = 0) -> Tensor:
        """Norms, biases, embeddings: served at the checkpoint's width, never quantized."""
        scheme = Unquantized(fmt) if fmt else self.dense
        return Tensor(module, rows, cols, scheme, split, count=count, heads=heads)

    def head(self, module: str, rows: int, cols: int) -> Tensor:
        """The LM head: at the checkpoint's width unless the method quantizes it (GPTQ lm_head)."""
        scheme = self.quant.lm_head or self.dense
        return Tensor(module, rows, cols, scheme, "vocab")


def dense_mlp(make: TensorMaker, p: str, hidden: int, inter: int) -> list[Tensor]:
    """A gated MLP: gate and up fused column-parallel, down row-parallel (MergedColumnParallelLinear)."""
    return [make.linear(f"{p}.gate_up_proj", 2 * inter, hidden, "column"),
            make.linear(f"{p}.down_proj", hidden, inter, "row")]


def routed_moe(make: TensorMaker, p: str, hidden: int, inter: int, experts: int, shared: int = 0,
               score_bias: bool = True, shared_name: str = "shared_experts") -> list[Tensor]:
    """DeepSeek-style routed experts: an unquantized replicated gate (with its fp32 score bias),
    fused w13 and w2 per expert, and `shared` intermediate width of always-on shared experts."""
    t = [make.plain(f"{p}.gate", experts, hidden)]
    if score_bias:
        t.append(make.plain(f"{p}.gate.e_score_correction_bias", experts, fmt="fp32"))
    t += [make.linear(f"{p}.experts.w13", 2 * inter, hidden, "expert_column", expert_count=experts),
          make.linear(f"{p}.experts.w2", hidden, inter, "expert_row", expert_count=experts)]
    if shared:
        t += dense_mlp(make, f"{p}.{shared_name}", hidden, shared)
    return t


def add_mtp_projection(m, make: TensorMaker, layer: int, name: str, norms: tuple[str, str, str], placement: str,
                       prev: str) -> str:
    """An MTP layer's input, held only while speculating: the norms of the token's embedding and
    of the previous hidden state (`norms[0]`, `norms[1]`), the unquantized projection `name` of
    their concatenation (2 × hidden → hidden, `placement` over the ranks) and the norm after it
    (`norms[2]`), flowing from `prev`. Returns the projection's node."""
    hidden = m.hidden_size
    node = m.add(name, "projection", layer=layer, speculative="mtp", tensors=[
        make.plain(norms[0], hidden), make.plain(norms[1], hidden),
        make.linear(name, hidden, 2 * hidden, placement, quantized=False), make.plain(norms[2], hidden)])
    m.flow(prev, node)
    return node


def add_final_norm_and_head(m, make: TensorMaker, cfg: dict, prev: str, final_name: str = "norm") -> str:
    """The final norm and, unless tied to the embedding, the LM head (ParallelLMHead at the
    checkpoint width, divided like the embedding). Returns the final norm's node."""
    final = m.add(final_name, "norm", tensors=[make.plain(final_name, m.hidden_size)])
    m.flow(prev, final)
    if not cfg.get("tie_word_embeddings", False):
        head = m.add("lm_head", "lm_head", tensors=[make.head("lm_head", m.vocab_size, m.hidden_size)])
        m.flow(final, head)
    else:
        m.conventions.append("LM head tied to the embedding: held once")
    return final
