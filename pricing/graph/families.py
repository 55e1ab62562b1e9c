"""Registers the families that live in their own modules."""

from pricing.graph import register

try:  # each family module registers itself; absent ones simply are not offered
    from pricing.graph import deepseek_v4
    register(deepseek_v4.FAMILIES, deepseek_v4.build)
except ImportError:  # pragma: no cover
    pass
try:
    from pricing.graph import recurrent
    register(recurrent.FAMILIES, recurrent.build)
except ImportError:  # pragma: no cover
    pass
