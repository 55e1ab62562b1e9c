"""The DeepSeek-V4 family: V4-Flash and V4-Pro (deepseek_v4) and V4.1-Flash with its DSpark
drafter (deepseek_v41). Their layers state their own caches (spec: When the graph states its
caches); facts from shared/reference/deepseek-v4-family.md.

V4: every layer owns a 128-token window ring; ratio-4 layers own a compressed cache, an
indexer K cache and two compressor-state rings; ratio-128 layers own a compressed cache and
one compressor-state ring; the MTP layer is window-only and exists only while speculating.
V4.1: only kv_source_layer_ids own the compressed cache (and, with it, the indexer K cache);
every other compressed layer reads the nearest owner at or below it; index sources without K
read layer 20's; the ratio-2 owners keep a compressor-state ring; every layer, and each of the
three DSpark layers while speculating, owns a window ring.
"""

from __future__ import annotations

from pricing.graph.common import TensorMaker, model_dtype, need, quantization
from pricing.graph.model import ModelGraph
from pricing.graph.nodes import Routing, StatedCache
from pricing.graph.rotary import rope_parameters, rotary_cache

FAMILIES = {"deepseek_v4", "deepseek_v41", "deepseek_v41_text"}
# the order vLLM 0.33's DeepSeek-V4 attention registers a layer's caches (its KV cache groups follow it)
V4_REGISTRATION_ORDER = {"swa": 0, "indexer": 1, "indexer_compressor_state": 2, "compressed": 3, "compressor_state": 4}


def _attention_tensors(make: TensorMaker, cfg: dict, p: str) -> list:
    hidden, heads, head_dim = cfg["hidden_size"], cfg["num_attention_heads"], cfg["head_dim"]
    q_lora, o_lora, o_groups = cfg["q_lora_rank"], cfg["o_lora_rank"], cfg["o_groups"]
    return [
        make.plain(f"{p}.attn_norm", hidden),
        make.linear(f"{p}.attn.wq_a", q_lora, hidden, "replicated"),
        make.plain(f"{p}.attn.q_norm", q_lora),
        make.linear(f"{p}.attn.wq_b", heads * head_dim, q_lora, "column"),
        make.linear(f"{p}.attn.wkv", head_dim, hidden, "replicated"),
        make.plain(f"{p}.attn.kv_norm", head_dim),
        make.linear(f"{p}.attn.wo_a", o_groups * o_lora, heads * head_dim // o_groups, "column"),
        make.linear(f"{p}.attn.wo_b", hidden, o_groups * o_lora, "row"),
        make.plain(f"{p}.attn.attn_sink", heads, 1, "column", fmt="fp32"),
    ]


def _hyper_connection_tensors(make: TensorMaker, cfg: dict, p: str) -> list:
    """mHC mixing weights (fp32): (2 + hc) × hc rows over hc × hidden inputs, before attention and FFN."""
    hc, hidden = cfg.get("hc_mult", 1), cfg["hidden_size"]
    if hc <= 1:
        return []
    mix = (2 + hc) * hc
    return [make.plain(f"{p}.hc_{part}_fn", mix, hc * hidden, fmt="fp32") for part in ("attn", "ffn")] + [
        make.plain(f"{p}.hc_{part}_base", mix, fmt="fp32") for part in ("attn", "ffn")]


def _moe_tensors(make: TensorMaker, cfg: dict, p: str, experts: int, hash_routed: bool) -> list:
    hidden, inter = cfg["hidden_size"], cfg["moe_intermediate_size"]
    shared = (cfg.get("n_shared_experts") or 0) * inter
    t = [make.plain(f"{p}.ffn_norm", hidden)]
    if hash_routed:  # hash-routed layers look experts up by token id (tid2eid) instead of a learned gate
        t.append(make.plain(f"{p}.ffn.gate.tid2eid", cfg["vocab_size"], cfg["num_experts_per_tok"], fmt="fp32"))
    else:
        t += [make.plain(f"{p}.ffn.gate", experts, hidden),
              make.plain(f"{p}.ffn.gate.bias", experts, fmt="fp32")]
    t += [make.linear(f"{p}.ffn.experts.w13", 2 * inter, hidden, "expert_column", expert_count=experts),
          make.linear(f"{p}.ffn.experts.w2", hidden, inter, "expert_row", expert_count=experts)]
    if shared:
        t += [make.linear(f"{p}.ffn.shared_experts.w13", 2 * shared, hidden, "column"),
              make.linear(f"{p}.ffn.shared_experts.w2", hidden, shared, "row")]
    return t


def _drafter_routing(cfg: dict, method: str) -> Routing:
    """A drafter layer's experts: DSpark's own (vLLM builds the layers past num_hidden_layers with
    `dspark_n_routed_experts or n_routed_experts` experts, each token picking
    `dspark_num_experts_per_tok or num_experts_per_tok`: vllm/models/deepseek_v41/nvidia/model.py
    DeepseekV4MoE; V4.1-Flash: 128 and 3, against the backbone's 384 and 6); V4's MTP layer the
    backbone's."""
    experts, top_k = cfg["n_routed_experts"], need(cfg, "num_experts_per_tok", "deepseek_v4")
    if method == "dspark":
        return Routing(cfg.get("dspark_n_routed_experts") or experts, cfg.get("dspark_num_experts_per_tok") or top_k)
    return Routing(experts, top_k)


NEEDED = ("hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads", "head_dim", "qk_rope_head_dim",
          "q_lora_rank", "o_lora_rank", "o_groups", "sliding_window", "compress_ratios", "n_routed_experts",
          "moe_intermediate_size", "max_position_embeddings", "index_n_heads", "index_head_dim", "index_topk")


class V4:
    """DeepSeek-V4 (Flash, Pro): the layers and caches of the family's first member. Each step of
    the build is a method; V41 overrides the steps where V4.1 differs. The record formats and
    page geometry are the kernel's (pricing/registry/deepseek_v4.yaml): a cache states only what
    the config does (its role, compress ratio, bound)."""

    family = "deepseek_v4"
    version = "v4"

    def __init__(self, source, override: str | None):
        cfg = self.cfg = source.config
        for name in NEEDED:
            need(cfg, name, self.family)
        self.n_layers = cfg["num_hidden_layers"]
        self.ratios = list(cfg["compress_ratios"])
        if len(self.ratios) < self.n_layers:
            from pricing.errors import InputError

            raise InputError("config.json: compress_ratios", f"has {len(self.ratios)} entries for {self.n_layers} "
                             "layers", "give one compress ratio per layer")
        dtype = model_dtype(cfg)
        quant = quantization(cfg, source.hf_quant_config, dtype, override)
        self.make = TensorMaker(quant, dtype)
        self.n_draft = cfg.get("num_nextn_predict_layers", 0) or 0
        self.methods = self.drafters()
        self.m = ModelGraph(source.name, source.hf_id, cfg.get("model_type", ""), self.family, "moe", dtype,
                            cfg["hidden_size"], cfg["vocab_size"], cfg["num_attention_heads"], 1,
                            cfg["max_position_embeddings"], routed_experts=cfg["n_routed_experts"],
                            speculative_methods=self.methods, quantization=quant.method,
                            attention_backend=self.family)
        self.attn_nodes: dict[int, str] = {}

    # -- what differs between the members -------------------------------------------------------
    def drafters(self) -> tuple[str, ...]:
        return ("mtp",) if self.n_draft else ()

    def conventions(self) -> list[str]:
        return [
            "DeepSeek-V4 caches are stated per layer: compressed, indexer and window-ring records, one page "
            "geometry each",
            "routed experts served per expert_dtype (fp4 -> MXFP4); other linear layers per quantization_config",
            "the router (gate) is unquantized at model dtype and replicated; hash-routed layers keep a token-id table",
        ]

    def owns_compressed(self, i: int) -> bool:
        return True

    def gated_compressor(self, ratio: int) -> bool:
        """Whether the layer's compressor has a gate and a compressor-state ring."""
        return True

    def state_geometry(self, ratio: int) -> str:
        return f"state_ratio_{ratio}"

    def has_indexer(self, i: int, ratio: int) -> bool:
        return ratio == 4

    def owns_indexer_k(self, i: int) -> bool:
        return True

    def indexer_k(self, p: str, ratio: int, tensors: list, caches: list) -> None:
        """The indexer's own K path: V4 compresses it (a gated compressor and its state ring)."""
        idx_dim, hidden = self.cfg["index_head_dim"], self.cfg["hidden_size"]
        tensors += [self.make.linear(f"{p}.attn.indexer.compressor.wkv", 2 * idx_dim, hidden, "replicated"),
                    self.make.linear(f"{p}.attn.indexer.compressor.wgate", 2 * idx_dim, hidden, "replicated")]
        caches.append(StatedCache("indexer_compressor_state", 1, "entries", entries=ratio, geometry="state_indexer"))

    def ordered(self, caches: list) -> list:
        """V4's modules register the indexer's caches before the attention's own (vLLM 0.33 oracle)."""
        return sorted(caches, key=lambda c: V4_REGISTRATION_ORDER[c.name])

    def shared_caches(self, i: int, ratio: int, attn: str) -> None:
        """Edges from the layer that owns a cache this layer reads (none in V4: each owns its own)."""

    def drafter_inputs(self, final: str) -> str:
        return final

    # -- the build ----------------------------------------------------------------------------
    def window(self) -> StatedCache:
        return StatedCache("swa", 1, "window", window=self.cfg["sliding_window"], geometry="window")

    def layer(self, i: int) -> tuple[list, list]:
        cfg, make, p, ratio = self.cfg, self.make, f"layers.{i}", self.ratios[i]
        hidden, head_dim = cfg["hidden_size"], cfg["head_dim"]
        tensors = _attention_tensors(make, cfg, p) + _hyper_connection_tensors(make, cfg, p)
        caches = [self.window()]
        if ratio > 0:
            coff = 2 if ratio != 128 else 1
            if self.owns_compressed(i):
                caches.append(StatedCache("compressed", ratio, "context", geometry="compressed"))
                tensors += [make.linear(f"{p}.attn.compressor.wkv", coff * head_dim, hidden, "replicated"),
                            make.plain(f"{p}.attn.compressor.norm", head_dim)]
                if self.gated_compressor(ratio):
                    tensors.append(make.linear(f"{p}.attn.compressor.wgate", coff * head_dim, hidden, "replicated"))
                    tensors.append(make.plain(f"{p}.attn.compressor.ape", ratio, coff * head_dim, fmt="fp32"))
                    caches.append(StatedCache("compressor_state", 1, "entries", entries=ratio,
                                              geometry=self.state_geometry(ratio)))
            if self.has_indexer(i, ratio):
                idx_heads, idx_dim = cfg["index_n_heads"], cfg["index_head_dim"]
                tensors += [make.linear(f"{p}.attn.indexer.wq_b", idx_heads * idx_dim, cfg["q_lora_rank"],
                                        "replicated"),
                            make.plain(f"{p}.attn.indexer.weights_proj", idx_heads, hidden)]
                if self.owns_indexer_k(i):
                    caches.append(StatedCache("indexer", ratio, "context", geometry="compressed"))
                    self.indexer_k(p, ratio, tensors, caches)
        return tensors, self.ordered(caches)

    def build(self) -> ModelGraph:
        cfg, make, m = self.cfg, self.make, self.m
        hidden, vocab, experts = cfg["hidden_size"], cfg["vocab_size"], cfg["n_routed_experts"]
        m.extras.update(version=self.version, o_groups=cfg["o_groups"], sliding_window=cfg["sliding_window"],
                        index_topk=cfg["index_topk"], hc_mult=cfg.get("hc_mult", 1),
                        candidate_topk_blocks=cfg.get("candidate_topk_blocks", 0), ratios=self.ratios)
        m.conventions += self.conventions()
        prev = m.add("embed_tokens", "embedding", tensors=[make.plain("embed_tokens", vocab, hidden, "vocab")])
        hash_layers = cfg.get("num_hash_layers", 0) or 0
        # two ropes (deepseek-v4-family.md §3): window-only layers the plain one (rope_theta, no scaling),
        # compressed layers YaRN at compress_rope_theta; both over rope_dim and the whole position window
        rope_dim = cfg["qk_rope_head_dim"]
        self.plain_rope = rotary_cache(m, rope_dim, m.max_position, {"rope_type": "default"},
                                       base=cfg.get("rope_theta"), rotary_dim=rope_dim)
        yarn_rope = rotary_cache(m, rope_dim, m.max_position, rope_parameters(cfg),
                                 base=cfg.get("compress_rope_theta"), rotary_dim=rope_dim)
        for i in range(self.n_layers):
            p, ratio = f"layers.{i}", self.ratios[i]
            tensors, caches = self.layer(i)
            attn = m.add(f"{p}.attn", "attention", layer=i, tensors=tensors, caches=caches,
                         buffers=[yarn_rope if ratio > 0 else self.plain_rope])
            self.attn_nodes[i] = attn
            m.flow(prev, attn)
            self.shared_caches(i, ratio, attn)
            ffn = m.add(f"{p}.ffn", "moe", layer=i, tensors=_moe_tensors(make, cfg, p, experts, i < hash_layers))
            m.flow(attn, ffn)
            prev = ffn
        final = m.add("norm", "norm", tensors=[make.plain("norm", hidden)] + (
            [make.plain("hc_head_fn", cfg["hc_mult"], cfg["hc_mult"] * hidden, fmt="fp32")]
            if cfg.get("hc_mult") else []))
        m.flow(prev, final)
        head = m.add("lm_head", "lm_head", tensors=[make.head("lm_head", vocab, hidden)])
        m.flow(final, head)
        self.drafter(final)
        return m

    def drafter(self, final: str) -> None:
        """V4's MTP layer, V4.1's DSpark stages: window-only layers, held only while speculating."""
        cfg, make, m = self.cfg, self.make, self.m
        hidden, method = cfg["hidden_size"], self.methods[0] if self.methods else None
        draft_prev = self.drafter_inputs(final)
        for j in range(self.n_draft if method else 0):
            i = self.n_layers + j
            p = f"layers.{i}"
            tensors = _attention_tensors(make, cfg, p) + _hyper_connection_tensors(make, cfg, p)
            if method == "mtp":
                tensors += [make.plain(f"{p}.enorm", hidden), make.plain(f"{p}.hnorm", hidden),
                            make.linear(f"{p}.e_proj", hidden, hidden, "replicated"),
                            make.linear(f"{p}.h_proj", hidden, hidden, "replicated")]
            attn = m.add(f"{p}.attn", "attention", layer=i, tensors=tensors, caches=[self.window()],
                         speculative=method, buffers=[self.plain_rope])
            m.flow(draft_prev, attn)
            routing = _drafter_routing(cfg, method)
            ffn = m.add(f"{p}.ffn", "moe", layer=i, speculative=method, routing=routing,
                        tensors=_moe_tensors(make, cfg, p, routing.experts, False))
            m.flow(attn, ffn)
            draft_prev = ffn


class V41(V4):
    """DeepSeek-V4.1 (Flash, with its DSpark drafter): only kv_source_layer_ids own the compressed
    cache (and, with it, the indexer K cache), which other compressed layers read from the nearest
    owner at or below them; index sources without K read the owner's; only the ratio-2 owners keep
    a gated compressor and its state ring; the indexer's K is projected, not compressed."""

    family = "deepseek_v41"
    version = "v41"

    def __init__(self, source, override: str | None):
        cfg = source.config
        self.kv_sources = list(cfg.get("kv_source_layer_ids") or [])
        self.index_sources = list(cfg.get("index_source_layer_ids") or [])
        super().__init__(source, override)

    def drafters(self) -> tuple[str, ...]:
        if self.cfg.get("dspark_target_layer_ids"):
            return ("dspark",)
        return super().drafters()

    def conventions(self) -> list[str]:
        return super().conventions() + ["V4.1 engram embedding tables live in host memory "
                                        "(engram_config.verify_host_memory): not counted on the GPU"]

    def owns_compressed(self, i: int) -> bool:
        return i in self.kv_sources

    def gated_compressor(self, ratio: int) -> bool:
        return ratio == 2

    def state_geometry(self, ratio: int) -> str:
        return "state"

    def has_indexer(self, i: int, ratio: int) -> bool:
        return i in self.index_sources

    def owns_indexer_k(self, i: int) -> bool:
        return i in self.kv_sources

    def indexer_k(self, p: str, ratio: int, tensors: list, caches: list) -> None:
        idx_dim, head_dim = self.cfg["index_head_dim"], self.cfg["head_dim"]
        tensors += [self.make.linear(f"{p}.attn.indexer.wk", idx_dim, head_dim, "replicated"),
                    self.make.plain(f"{p}.attn.indexer.k_norm", idx_dim)]

    def ordered(self, caches: list) -> list:
        return caches

    def _owner(self, i: int) -> int | None:
        below = [s for s in self.kv_sources if s <= i]
        return max(below) if below else None

    def shared_caches(self, i: int, ratio: int, attn: str) -> None:
        owner = self._owner(i)
        if owner is None or i in self.kv_sources:
            return
        if ratio > 0:
            self.m.reads_cache(self.attn_nodes[owner], attn, "compressed")
        if i in self.index_sources:
            self.m.reads_cache(self.attn_nodes[owner], attn, "indexer")

    def drafter_inputs(self, final: str) -> str:
        if self.methods != ("dspark",):
            return final
        cfg, make, hidden, vocab = self.cfg, self.make, self.cfg["hidden_size"], self.cfg["vocab_size"]
        targets = cfg["dspark_target_layer_ids"]
        rank = cfg.get("dspark_markov_rank", 256)
        proj = self.m.add("dspark.main_proj", "projection", speculative="dspark", tensors=[
            make.linear("dspark.main_proj", hidden, len(targets) * hidden, "replicated"),
            make.plain("dspark.main_norm", hidden),
            make.plain("dspark.markov_head.u", vocab, rank, "vocab"),
            make.plain("dspark.markov_head.v", rank, hidden)])
        for t in targets:
            self.m.flow(self.attn_nodes[t], proj)
        return proj


def build(source, override: str | None) -> ModelGraph:
    """The graph of a DeepSeek-V4 family member, by its model_type."""
    member = V41 if source.config.get("model_type", "").startswith("deepseek_v41") else V4
    return member(source, override).build()
