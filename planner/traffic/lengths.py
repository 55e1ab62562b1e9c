"""A trace's length distribution: its prompt and output token counts tallied into histograms the
serving simulator draws from (pricing/serving/traffic.py Histogram: by bin weight, uniform within
a bin).

The bins are powers of two, [2^k, 2^(k+1)), as pricing/serving/lengths/sharegpt.yaml's, each
narrowed to the lengths seen in it, [least, most + 1), with a bin of weight 0 over each gap: fixed
edges make the tally one pass of constant memory (a count, a least and a most per bin) whatever the
trace's size, where quantile bins would keep every length or a sketch; narrowing keeps a trace of
one length exact (every draw that length) and each draw within a factor of two of a length the
trace holds, its bin's mean off the trace's by less than half the bin. A length of 0 counts as 1
(the simulator's least: a request has a prompt and yields a token), as the interval means do."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from planner.request import LengthHistogram, LengthsSpec


@dataclass
class Tally:
    """Token counts by power-of-two bin: how many, the least and the most seen in each."""

    counts: dict[int, int] = field(default_factory=dict)
    least: dict[int, int] = field(default_factory=dict)
    most: dict[int, int] = field(default_factory=dict)

    def add(self, tokens: int) -> None:
        tokens = max(1, tokens)
        k = tokens.bit_length() - 1  # 2^k <= tokens < 2^(k+1)
        if k in self.counts:
            self.counts[k] += 1
            self.least[k] = min(self.least[k], tokens)
            self.most[k] = max(self.most[k], tokens)
        else:
            self.counts[k], self.least[k], self.most[k] = 1, tokens, tokens

    @property
    def longest(self) -> int:
        return max(self.most.values())

    def histogram(self) -> LengthHistogram:
        """The bins seen, each [least, most + 1) weighted by its count, a weight-0 bin over each gap."""
        edges: list[int] = []
        weights: list[float] = []
        for k in sorted(self.counts):
            low, high = self.least[k], self.most[k] + 1
            if edges and edges[-1] < low:
                edges.append(low)
                weights.append(0.0)
            elif not edges:
                edges.append(low)
            edges.append(high)
            weights.append(float(self.counts[k]))
        return LengthHistogram(edges=tuple(edges), weights=tuple(weights))


def points(counts: list[tuple[int, float]]) -> LengthHistogram:
    """A histogram of lengths at points: each (tokens, count) a bin [tokens, tokens + 1), rising, a
    weight-0 bin over each gap (the lengths of a bucketed export, planner/traffic/prometheus.py)."""
    merged: dict[int, float] = defaultdict(float)
    for tokens, count in counts:
        merged[max(1, tokens)] += count
    edges: list[int] = []
    weights: list[float] = []
    for tokens in sorted(merged):
        if edges and edges[-1] < tokens:
            edges.append(tokens)
            weights.append(0.0)
        elif not edges:
            edges.append(tokens)
        edges.append(tokens + 1)
        weights.append(merged[tokens])
    return LengthHistogram(edges=tuple(edges), weights=tuple(weights))


def of(prompt: Tally, output: Tally, source: str) -> LengthsSpec:
    """The prompt and output histograms of two tallies."""
    return LengthsSpec(prompt=prompt.histogram(), output=output.histogram(), source=source)
