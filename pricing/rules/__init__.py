"""Rules packs: how one vLLM release groups caches into KV cache groups that share one pool. One
module per release, each building its `Release` (rules pack + registry namespace + enumerations +
defaults). Nothing here imports the kernel: the packs combine cache specs (pricing.specs)."""

from __future__ import annotations

from pricing.errors import InputError
from pricing.rules import vllm_0_33
from pricing.rules.release import Release

RELEASES: dict[str, Release] = {r.version: r for r in (vllm_0_33.RELEASE,)}
DEFAULT = "0.33"


def get(version: str | Release | None = None) -> Release:
    """The release named `version` ("0.33", "vllm-0.33" or "0.33.0"); the default when None."""
    if isinstance(version, Release):
        return version
    key = (version or DEFAULT).strip().lower().removeprefix("vllm-").removeprefix("v")
    for release in RELEASES.values():
        if key in (release.version, release.full_version):
            return release
    raise InputError("--vllm-version", f"unknown vLLM release {version!r}",
                     f"use one of {', '.join(sorted(RELEASES))}")


__all__ = ["DEFAULT", "RELEASES", "Release", "get"]
