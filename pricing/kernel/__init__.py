"""The memory kernel: for one rank of a deployment, what is fixed, what is held before the
budget, and what each request holds (Kernel, shared/spec/memory-model.md); the instance of every
pipeline stage's rank and the figures vLLM takes over them (Instance); whether vLLM starts it
(Startup) and the requests a planner counts on (Capacity)."""

from pricing.kernel.capacity import Capacity
from pricing.kernel.deployment import Deployment, Engine, resolve_engine
from pricing.kernel.instance import Instance
from pricing.kernel.kernel import Kernel
from pricing.kernel.startup import Startup

__all__ = ["Capacity", "Deployment", "Engine", "Instance", "Kernel", "Startup", "resolve_engine"]
