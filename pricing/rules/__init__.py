"""Rules packs: how one vLLM release groups caches into KV cache groups that share one pool,
and how many blocks a request holds in each group. One module per release."""

from pricing.rules import vllm_0_33

PACKS = {"vllm-0.33": vllm_0_33}
DEFAULT = "vllm-0.33"


def get(name: str = DEFAULT):
    return PACKS[name]
