"""Rules packs: how each vLLM line groups caches into KV cache groups that share one pool, sizes
its blocks and logs its capacity. One module per pack, each building its `Release` (rules pack +
registry namespace + enumerations + defaults + the releases it serves). Nothing here imports the
kernel: the packs combine cache specs (pricing.specs)."""

from __future__ import annotations

from pricing.errors import InputError
from pricing.rules import vllm_0_10, vllm_0_11, vllm_0_19, vllm_0_21, vllm_0_26, vllm_0_33
from pricing.rules.release import Release, release_tuple

PACKS: tuple[Release, ...] = (vllm_0_10.RELEASE, vllm_0_11.RELEASE, vllm_0_19.RELEASE, vllm_0_21.RELEASE,
                              vllm_0_26.RELEASE, vllm_0_33.RELEASE)
RELEASES: dict[str, Release] = {r.version: r for r in PACKS}
DEFAULT = "0.33"


def served() -> str:
    """The releases the packs serve, for messages: "0.10 to 0.33 (packs 0.10, 0.11, ...)"."""
    return f"{PACKS[0].covers[0]} to {PACKS[-1].covers[1]} (packs {', '.join(RELEASES)})"


def get(version: str | Release | None = None) -> Release:
    """The pack serving vLLM `version` ("0.19.1", "0.27", "vllm-0.33", "v0.26.1rc1.dev608+g99a10304d"),
    named as that release; the default when None."""
    if isinstance(version, Release):
        return version
    text = (version or DEFAULT).strip().lower().removeprefix("vllm-").removeprefix("vllm ").removeprefix("v")
    asked = release_tuple(text)
    if len(asked) >= 2 and text.startswith(".".join(map(str, asked[:2]))):
        for pack in PACKS:
            if pack.serves(asked):
                exact = ".".join(map(str, asked))
                if exact in (pack.version, pack.full_version):
                    return pack
                return pack.as_release(exact)
    raise InputError("vllm_version", f"unknown vLLM release {version!r}: no rules pack serves it",
                     f"use a release from {served()}")


__all__ = ["DEFAULT", "PACKS", "RELEASES", "Release", "get", "served"]
