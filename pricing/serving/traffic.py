"""The requests a serving benchmark sends: when each is sent, its prompt and output lengths, and
how much of its prompt the prefix cache already holds, drawn as `vllm bench serve` draws them
(vllm/benchmarks/serve.py `get_request`: inter-arrival gaps from a gamma distribution of shape
`burstiness` and mean 1 / rate, exponential at burstiness 1; a semaphore of `--max-concurrency`
holding back a request until one in flight finishes)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from pricing.errors import InputError
from pricing.registry import shipped as shipped_registry
from pricing.yaml_fast import load as load_yaml

HISTOGRAMS = Path(__file__).with_name("lengths")


class Lengths:
    """A distribution of token counts; `draw` takes the benchmark's seeded generator."""

    mean: float

    def draw(self, rng: random.Random) -> int:
        raise NotImplementedError


@dataclass(frozen=True)
class Fixed(Lengths):
    """Every request the same length (`vllm bench serve --dataset-name random --random-range-ratio 0`)."""

    tokens: int

    def __post_init__(self):
        if self.tokens < 1:
            raise InputError("length", f"{self.tokens} tokens", "give at least 1 token")

    @property
    def mean(self) -> float:
        return float(self.tokens)

    def draw(self, rng: random.Random) -> int:
        return self.tokens


@dataclass(frozen=True)
class Uniform(Lengths):
    """Uniform integers in [low, high] (the random dataset's `--random-range-ratio r` draws
    [n (1 − r), n (1 + r)])."""

    low: int
    high: int

    def __post_init__(self):
        if not 1 <= self.low <= self.high:
            raise InputError("length", f"uniform [{self.low}, {self.high}]", "give 1 <= low <= high")

    @classmethod
    def around(cls, tokens: int, ratio: float) -> Uniform:
        return cls(max(1, math.floor(tokens * (1 - ratio))), max(1, math.ceil(tokens * (1 + ratio))))

    @property
    def mean(self) -> float:
        return (self.low + self.high) / 2

    def draw(self, rng: random.Random) -> int:
        return rng.randint(self.low, self.high)


@dataclass(frozen=True)
class Histogram(Lengths):
    """Lengths drawn by bin weight, uniform within a bin [edges[i], edges[i + 1])."""

    edges: tuple[int, ...]
    weights: tuple[float, ...]
    source: str = ""

    def __post_init__(self):
        rising = all(a < b for a, b in zip(self.edges, self.edges[1:], strict=False))
        if len(self.edges) != len(self.weights) + 1 or not rising:
            raise InputError("histogram", "edges must rise and be one more than the weights", "fix the bins")

    @property
    def mean(self) -> float:
        total = sum(self.weights)
        bins = zip(self.weights, self.edges, self.edges[1:], strict=False)
        return sum(w * (a + b - 1) / 2 for w, a, b in bins) / total

    def draw(self, rng: random.Random) -> int:
        i = rng.choices(range(len(self.weights)), weights=self.weights)[0]
        return rng.randrange(self.edges[i], self.edges[i + 1])


def shipped(name: str) -> tuple[Histogram, Histogram]:
    """The prompt and output length histograms shipped as `lengths/<name>.yaml`, with their source
    (read once, kept by the shipped registry: Registry.derived)."""
    return shipped_registry().derived(("serving.lengths", name), lambda: _histograms(name))


def _histograms(name: str) -> tuple[Histogram, Histogram]:
    path = HISTOGRAMS / f"{name}.yaml"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in HISTOGRAMS.glob("*.yaml")))
        raise InputError("lengths", f"no shipped length histogram {name!r}", f"use one of: {known}")
    data = load_yaml(path.read_text())
    source = f"{data['source']} ({data['how']})"
    return tuple(Histogram(tuple(data[k]["edges"]), tuple(data[k]["weights"]), source)
                 for k in ("prompt", "output"))


@dataclass(frozen=True)
class Poisson:
    """Requests sent at `rate` per second, gaps gamma(burstiness, 1 / (rate · burstiness))
    (exponential at burstiness 1), as `vllm bench serve --request-rate`; with `max_concurrency`,
    a request waits until fewer than that many are in flight."""

    rate: float
    burstiness: float = 1.0
    max_concurrency: int | None = None

    def __post_init__(self):
        if not self.rate > 0:
            raise InputError("rate", f"{self.rate}", "give a positive rate")

    def times(self, n: int, rng: random.Random) -> list[float]:
        t, out = 0.0, []
        theta = 1.0 / (self.rate * self.burstiness)
        for _ in range(n):
            out.append(t)
            t += rng.gammavariate(self.burstiness, theta)
        return out


@dataclass(frozen=True)
class ClosedLoop:
    """Every request ready at once and at most `concurrency` in flight: `vllm bench serve
    --request-rate inf --max-concurrency C` (a finished request's slot goes to the next at once)."""

    concurrency: int

    def __post_init__(self):
        if self.concurrency < 1:
            raise InputError("concurrency", f"{self.concurrency}", "give at least 1")

    @property
    def max_concurrency(self) -> int:
        return self.concurrency

    def times(self, n: int, rng: random.Random) -> list[float]:
        return [0.0] * n


Arrivals = Poisson | ClosedLoop


@dataclass(frozen=True)
class Traffic:
    """A benchmark's requests: `count` of them, sent by `arrivals`, with `prompt` and `output`
    lengths, a `prefix_hit` fraction of each prompt already in the prefix cache (whole blocks),
    drawn from the generator seeded with `seed`. `prefilled`: each arrives with its prompt already
    in the KV cache and its first token out (a decode pool behind a disaggregated prefill)."""

    arrivals: Poisson | ClosedLoop
    prompt: Lengths
    output: Lengths
    count: int = 1000  # vllm bench serve's default --num-prompts
    prefix_hit: float = 0.0
    seed: int = 0
    prefilled: bool = False

    def __post_init__(self):
        if self.count < 1:
            raise InputError("count", f"{self.count}", "give at least one request")
        if not 0.0 <= self.prefix_hit <= 1.0:
            raise InputError("prefix_hit", f"{self.prefix_hit}", "give a fraction in [0, 1]")

    def requests(self) -> tuple[list[float], list[int], list[int]]:
        """Send times, prompt and output lengths of every request, in sending order."""
        rng = random.Random(self.seed)
        prompts = [self.prompt.draw(rng) for _ in range(self.count)]
        outputs = [self.output.draw(rng) for _ in range(self.count)]
        return self.arrivals.times(self.count, rng), prompts, outputs
