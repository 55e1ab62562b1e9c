"""vLLM 0.33's V1 scheduler, step by step, priced by the step model (vllm/v1/core/sched/scheduler.py
`Scheduler.schedule`, FCFS policy, chunked prefill on).

Each step has a token budget of max_num_batched_tokens. The running requests are scheduled first,
in the order they were admitted: each takes min(tokens it has not computed, budget left) tokens
(1 + k for a decoding request verifying k drafts), and the KV blocks those tokens need, whole
blocks of block_size (`KVCacheManager.allocate_slots`); when the pool has too few free blocks the
last-admitted running request is preempted (its blocks freed, back to the front of the waiting
queue, and recomputed when readmitted: prompt and the tokens it has produced, less the whole blocks
the prefix cache still holds, which is all it had computed: a freed block keeps its hash, and the
blocks freed last are evicted last, `FreeKVCacheBlockQueue`). Then,
when no request was preempted in this step, waiting requests are admitted in order while budget
is left, fewer than max_num_seqs run and the pool holds the blocks of their first chunk (a
prompt's prefix-cache hit is not computed again; its blocks are counted as held). A request whose
last uncomputed token is computed in a step samples a token at the step's end: its first token
(TTFT, with the API server's time to it outside the engine, `first_token_seconds`, added: the
client sees both; not for a request that arrives prefilled), or its next (ITL). Prefilling
requests are always the tail of the running order (a request is admitted only with budget left
after every running one, so an earlier one finishes its prefill first), so decoding requests are
kept in aggregate: their count, summed context and blocks (by residue of their context modulo
block_size), advanced together.

Between events (an arrival, a finish, a prefill, the pool running out) every step is the same
pure decode one token further into every context, so those steps are taken at once: their time is
the step model's at the first and last (linear between, the decode's attention growing with the
context); an arrival is found inside such a run by the run's quadratic cumulative time.

Data parallelism: the dp ranks are alike, so one rank is simulated at 1/dp of the traffic (its
rate, its concurrency), and throughput is dp times the rank's. Not modelled: the host's time
between steps beyond the step model's overhead, other requests evicting a preempted request's
cached blocks before it is readmitted, speculative decoding's variance (a decode step yields
1 + E[accepted] tokens on average:
a request needs ceil((osl − 1) / (1 + E[accepted])) decode steps, its context growing one slot a
step), and the network and detokenizer times `vllm bench serve` also measures.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, replace

from pricing.errors import InputError
from pricing.serving.cost import StepCost
from pricing.serving.traffic import ClosedLoop, Poisson, Traffic
from pricing.units import cdiv

DEFAULT_BLOCK_SIZE = 16  # vLLM's CacheConfig.block_size default (vllm/config/cache.py), for a model without KV groups


@dataclass(frozen=True)
class Instance:
    """One data-parallel rank's scheduler limits (vllm/config/scheduler.py, the KV pool)."""

    blocks: int  # KV cache blocks of `block_size` tokens (the null block not counted)
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    dp: int = 1
    prefix_caching: bool = True  # --enable-prefix-caching (vLLM's default)

    @classmethod
    def of(cls, kernel) -> Instance:
        """The kernel's instance: its "GPU KV cache size" tokens in blocks of its first growing group."""
        e = kernel.engine
        grows = [g for g in kernel.layout().groups if g.grows] or kernel.layout().groups
        block = grows[0].members[0].block_tokens if grows else (e.block_size or DEFAULT_BLOCK_SIZE)
        return cls(kernel.instance.kv_cache_tokens() // block, block, e.max_num_seqs, e.max_num_batched_tokens,
                   e.max_model_len, e.data_parallel_size, e.enable_prefix_caching)


class Distribution:
    """Samples (with weights, for ITL), read at percentiles as numpy's default (linear); sorted
    when first read."""

    def __init__(self, values, weights=None):
        self._raw = (values, weights)
        self._sorted = None

    @classmethod
    def of(cls, values, weights=None) -> Distribution:
        return cls(values, weights)

    def _samples(self) -> tuple[list[float], list[float] | None]:
        if self._sorted is None:
            values, weights = self._raw
            if weights is None:
                self._sorted = (sorted(values), None)
            else:
                order = sorted(range(len(values)), key=values.__getitem__)
                self._sorted = ([values[i] for i in order], [weights[i] for i in order])
        return self._sorted

    def percentile(self, p: float) -> float:
        v, weights = self._samples()
        if not v:
            return math.nan
        if weights is None:
            x = p / 100 * (len(v) - 1)
            i = min(int(x), len(v) - 2) if len(v) > 1 else 0
            return v[i] + (v[min(i + 1, len(v) - 1)] - v[i]) * (x - i)
        target = p / 100 * sum(weights)
        acc = 0.0
        for value, w in zip(v, weights, strict=True):
            acc += w
            if acc >= target:
                return value
        return v[-1]

    @property
    def mean(self) -> float:
        values, weights = self._raw
        if not values:
            return math.nan
        if weights is None:
            return sum(values) / len(values)
        return sum(a * w for a, w in zip(values, weights, strict=True)) / sum(weights)


@dataclass(frozen=True)
class Served:
    """What a benchmark of `requests` measures (seconds): per request TTFT, TPOT (the decode time
    over its output tokens after the first), E2E; ITL over every token gap; per instance the
    duration, tokens, preemptions."""

    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2e: Distribution
    per_request: tuple[tuple[float, float, float], ...]  # (ttft, tpot, e2e) in sending order
    duration: float
    requests: int
    input_tokens: int
    output_tokens: int
    preemptions: int
    dp: int = 1

    @property
    def request_throughput(self) -> float:
        """Requests per second of the instance (every rank)."""
        return self.dp * self.requests / self.duration

    @property
    def output_throughput(self) -> float:
        return self.dp * self.output_tokens / self.duration

    @property
    def input_throughput(self) -> float:
        return self.dp * self.input_tokens / self.duration

    def metric(self, name: str) -> Distribution:
        return {"ttft": self.ttft, "tpot": self.tpot, "itl": self.itl, "e2e": self.e2e}[name]

    def goodput(self, ttft: float | None = None, tpot: float | None = None, e2e: float | None = None) -> float:
        """The fraction of requests meeting every given per-request bound (`vllm bench serve
        --goodput`); its rate is this times `request_throughput`."""
        ok = sum(1 for a, b, c in self.per_request
                 if (ttft is None or a <= ttft) and (tpot is None or b <= tpot) and (e2e is None or c <= e2e))
        return ok / len(self.per_request)


def per_rank(traffic: Traffic, dp: int) -> Traffic:
    """The traffic one of `dp` alike ranks sees."""
    if dp == 1:
        return traffic
    a = traffic.arrivals
    if isinstance(a, ClosedLoop):
        arrivals = ClosedLoop(max(1, cdiv(a.concurrency, dp)))
    else:
        cap = max(1, cdiv(a.max_concurrency, dp)) if a.max_concurrency else None
        arrivals = Poisson(a.rate / dp, a.burstiness, cap)
    return replace(traffic, arrivals=arrivals)


def simulate(instance: Instance, cost: StepCost, traffic: Traffic) -> Served:
    """Run `traffic` through one rank of `instance`, each step priced by `cost` (see the module)."""
    return _Run(instance, cost, per_rank(traffic, instance.dp)).run()


class _Run:
    """One benchmark run's state."""

    def __init__(self, inst: Instance, cost: StepCost, traffic: Traffic):
        self.inst, self.cost, self.traffic = inst, cost, traffic
        self.send, self.prompt, self.osl = traffic.requests()
        n = len(self.send)
        bs = inst.block_size
        for i in range(n):
            need = math.ceil((self.prompt[i] + self.osl[i]) / bs)
            if self.prompt[i] + self.osl[i] > inst.max_model_len or need > inst.blocks:
                raise InputError("workload", f"a request of {self.prompt[i]} + {self.osl[i]} tokens does not fit "
                                 f"one rank (max_model_len {inst.max_model_len}, {inst.blocks * bs} KV tokens)",
                                 "give shorter requests or a larger instance")
        tps = cost.tokens_per_step
        # output "tokens" are decode steps when speculating: 1 (the prefill's) + ceil((osl - 1) / tps)
        self.steps_out = [o if tps == 1.0 else 1 + math.ceil((o - 1) / tps) for o in self.osl]
        hit = traffic.prefix_hit
        self.bs = bs
        self.cached = [min(p - 1, int(p * hit) // bs * bs) if hit else 0 for p in self.prompt]
        self.first = [0.0] * n
        self.finish = [0.0] * n
        self.sent = [0.0] * n
        self.last_token = [0.0] * n
        self.produced = [0] * n  # output tokens (decode steps) so far, when not decoding in aggregate
        self.computed = [0] * n
        self.held = [0] * n  # blocks of a prefilling request
        self.resume = [0] * n  # tokens a preempted request finds in the prefix cache when readmitted
        self.started = [False] * n
        cap = traffic.arrivals.max_concurrency
        self.cap = cap if cap else n
        self.itl_values: list[float] = []
        self.itl_weights: list[float] = []
        self.preemptions = 0
        # decoding requests in aggregate: id -> key (context - gen), residue counts, sums
        self.decoders: dict[int, int] = {}
        self.by_residue = [0] * (2 * bs)  # decoding requests by key mod bs, the list twice over
        self.blocks_held = 0
        self.key_sum = 0
        self.gen = 0  # decode steps every decoding request has taken
        self.done: list[tuple[int, int]] = []  # (gen at which it finishes, id)
        self.done_at: dict[int, int] = {}
        self.prefilling: list[int] = []
        self.prefill_blocks = 0
        self.waiting: deque[int] = deque()
        self.next_send = 0
        self.in_flight = 0
        self.now = 0.0
        self.boundary = -math.inf

    # -- decoding requests in aggregate -------------------------------------------------------
    def decode_blocks(self, steps: int = 0) -> int:
        """Blocks the decoding requests hold `steps` steps from now: each holds
        ceil((key + gen) / block_size), so a step adds one block for each request whose context
        is a whole number of blocks (`by_residue` counts them by key mod block_size)."""
        bs = self.bs
        if steps <= 1:
            return self.blocks_held + (self.by_residue[-self.gen % bs] if steps else 0)
        cycles, rest = divmod(steps, bs)
        added = cycles * len(self.decoders)
        if rest:  # residues -gen, -gen - 1, ..., -gen - rest + 1: one run of the doubled counts
            start = (-self.gen - rest + 1) % bs
            added += sum(self.by_residue[start:start + rest])
        return self.blocks_held + added

    def start_decoding(self, i: int, context: int, produced: int) -> None:
        left = self.steps_out[i] - produced
        if left <= 0:
            self.finished(i)
            return
        gen, bs, by_residue = self.gen, self.bs, self.by_residue
        key = context - gen
        self.decoders[i] = key
        r = key % bs
        by_residue[r] += 1
        by_residue[r + bs] += 1
        self.blocks_held += cdiv(context, bs)
        self.key_sum += key
        self.done_at[i] = gen + left
        heapq.heappush(self.done, (gen + left, i))

    def stop_decoding(self, i: int) -> int:
        """Take `i` out of the aggregate; the decode steps it has produced."""
        key = self.decoders.pop(i)
        bs, by_residue = self.bs, self.by_residue
        r = key % bs
        by_residue[r] -= 1
        by_residue[r + bs] -= 1
        self.blocks_held -= cdiv(key + self.gen, bs)
        self.key_sum -= key
        return self.steps_out[i] - (self.done_at.pop(i) - self.gen)

    def finished(self, i: int) -> None:
        self.finish[i] = self.now
        self.in_flight -= 1

    # -- arrivals -----------------------------------------------------------------------------
    def release(self) -> None:
        """Send every request due by now while fewer than the cap are in flight."""
        send, sent, waiting, now, boundary = self.send, self.sent, self.waiting, self.now, self.boundary
        i, n = self.next_send, len(send)
        room = self.cap - self.in_flight
        start = i
        while i < n and room > 0 and send[i] <= now:
            t = send[i]
            sent[i] = t if t > boundary else now
            waiting.append(i)
            room -= 1
            i += 1
        self.in_flight += i - start
        self.next_send = i

    def next_arrival(self) -> float:
        if self.next_send < len(self.send) and self.in_flight < self.cap:
            return self.send[self.next_send]
        return math.inf

    # -- preemption ---------------------------------------------------------------------------
    def preempt(self) -> int | None:
        """Preempt the last-admitted running request (vLLM's FCFS `running.pop()`); its id."""
        if self.prefilling:
            i = self.prefilling.pop()
            self.prefill_blocks -= self.held[i]
            self.held[i] = 0
            done = self.computed[i]
        elif self.decoders:
            i = next(reversed(self.decoders))
            done = self.decoders[i] + self.gen
            self.produced[i] = self.stop_decoding(i)
            self.last_token[i] = self.now
        else:
            return None
        if self.inst.prefix_caching:  # its freed blocks keep their hashes: readmitted, it hits them
            self.resume[i] = done // self.inst.block_size * self.inst.block_size
        self.computed[i] = 0
        self.waiting.appendleft(i)
        self.preemptions += 1
        return i

    def start(self, i: int) -> int:
        """Tokens of waiting request `i` already in the cache when it is admitted: its prefix-cache
        hit (its whole prompt when it arrives prefilled); after a preemption, the whole blocks it had
        computed when the prefix cache is on (none when off), never its last token."""
        if self.started[i]:
            return min(self.resume[i], self.prompt[i] + self.produced[i] - 1)
        return self.prompt[i] if self.traffic.prefilled else self.cached[i]

    # -- one step -----------------------------------------------------------------------------
    def step(self) -> bool:
        """One scheduler step; False when it could schedule nothing."""
        inst, cost = self.inst, self.cost
        bs, total_blocks = inst.block_size, inst.blocks
        budget = inst.max_num_batched_tokens
        preempted = False
        grown = self.blocks_held + self.by_residue[-self.gen % bs]  # decode_blocks(1)
        while self.decoders and grown + self.prefill_blocks > total_blocks:
            self.preempt()
            preempted = True
            grown = self.decode_blocks(1)
        decode = len(self.decoders)
        budget -= decode * cost.queries
        chunks: list[tuple[int, int]] = []
        scheduled: list[tuple[int, int]] = []
        joined = False
        prompt, produced, computed, held = self.prompt, self.produced, self.computed, self.held
        prefilling = self.prefilling
        for i in list(prefilling) if prefilling else ():
            if budget <= 0 or i not in prefilling:  # (preempted for an earlier one)
                break
            tokens = min(prompt[i] + produced[i] - computed[i], budget)
            blocks = cdiv(computed[i] + tokens, bs) - held[i]
            while blocks > total_blocks - grown - self.prefill_blocks:
                victim = self.preempt()
                preempted = True
                grown = self.decode_blocks(1)
                if victim is None or victim == i:
                    break
            if i not in prefilling:
                break
            held[i] += blocks
            self.prefill_blocks += blocks
            chunks.append((tokens, computed[i]))
            scheduled.append((i, tokens))
            budget -= tokens
        waiting = self.waiting
        if not preempted and waiting:
            free = total_blocks - grown - self.prefill_blocks
            while waiting and budget > 0 and decode + len(prefilling) < inst.max_num_seqs:
                i = waiting[0]
                start = self.start(i)
                tokens = min(prompt[i] + produced[i] - start, budget)
                blocks = cdiv(start + max(tokens, 1), bs)
                if blocks > free:
                    break
                waiting.popleft()
                self.started[i] = True
                free -= blocks
                if tokens == 0:  # arrived with its prompt in the cache: decodes from the next step
                    self.first[i] = self.last_token[i] = self.now
                    produced[i] = 1
                    self.start_decoding(i, start, 1)
                    joined = True
                    continue
                computed[i] = start
                held[i] = blocks
                self.prefill_blocks += blocks
                prefilling.append(i)
                chunks.append((tokens, start))
                scheduled.append((i, tokens))
                budget -= tokens
        if not decode and not chunks:
            return joined
        self.advance(cost.seconds(decode, self.key_sum + decode * (self.gen + 1), chunks), 1, decode)
        for i, tokens in scheduled:
            computed[i] += tokens
            if computed[i] == prompt[i] + produced[i]:
                prefilling.remove(i)
                self.prefill_blocks -= held[i]
                held[i] = 0
                if produced[i] == 0:
                    self.first[i] = self.now
                else:
                    self.itl_values.append(self.now - self.last_token[i])
                    self.itl_weights.append(1.0)
                produced[i] += 1
                self.start_decoding(i, computed[i], produced[i])
        return True

    def advance(self, seconds: float, steps: int, decode: int) -> None:
        """`steps` steps taken in `seconds`: the decodes advance and those due finish (`decode`:
        the token gaps of a single step's decodes to record)."""
        self.boundary = self.now
        self.now += seconds
        if decode:
            self.itl_values.append(seconds)
            self.itl_weights.append(float(decode))
        done = self.done
        self.blocks_held = self.decode_blocks(steps)
        self.gen += steps
        while done and done[0][0] <= self.gen:
            g, i = heapq.heappop(done)
            if self.done_at.get(i) != g:
                continue  # preempted since
            self.stop_decoding(i)
            self.finished(i)

    def jump(self) -> bool:
        """Take runs of identical pure-decode steps at once while the next step is one (through
        the finishes that change nothing else); False if the next step is not one."""
        inst, cost = self.inst, self.cost
        if self.prefilling:
            return False
        if self.waiting and len(self.decoders) < inst.max_num_seqs:
            need = cdiv(self.start(self.waiting[0]) + 1, inst.block_size)
            if need <= inst.blocks - self.decode_blocks(1):
                return False  # it would be admitted next step
        done, done_at = self.done, self.done_at
        moved = False
        while True:
            decode = len(self.decoders)
            if not decode or decode * cost.queries > inst.max_num_batched_tokens:
                return moved
            while done_at.get(done[0][1]) != done[0][0]:
                heapq.heappop(done)
            steps = done[0][0] - self.gen
            bound = self.blocks_held + (steps // inst.block_size + 1) * decode
            if bound > inst.blocks and self.decode_blocks(steps) > inst.blocks:  # the pool runs out first
                lo, hi = 0, steps
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if self.decode_blocks(mid) <= inst.blocks:
                        lo = mid
                    else:
                        hi = mid - 1
                steps = lo
            if steps <= 1:
                return moved
            base = self.key_sum + decode * self.gen
            t1 = cost.decode_seconds(decode, base + decode)
            tk = cost.decode_seconds(decode, base + decode * steps)
            arrival = self.next_arrival()
            if arrival < math.inf:
                slope = (tk - t1) / (steps - 1)
                gap = arrival - self.now
                # the smallest k with k t1 + slope k (k - 1) / 2 >= gap: the step it arrives in
                if slope > 0:
                    b = t1 - slope / 2
                    k = max(1, math.ceil((-b + math.sqrt(b * b + 2 * slope * gap)) / slope))
                else:
                    k = max(1, math.ceil(gap / t1))
                if k < steps:
                    steps = k
                    tk = cost.decode_seconds(decode, base + decode * steps)
                if steps <= 1:
                    return moved
            self.itl_values += (t1, tk)
            self.itl_weights += (decode * steps / 2, decode * steps / 2)
            self.advance(steps * (t1 + tk) / 2, steps, 0)
            moved = True
            if self.waiting or self.next_arrival() <= self.now:
                return True

    def run(self) -> Served:
        n = len(self.send)
        send = self.send
        while True:
            if self.next_send < n and send[self.next_send] <= self.now and self.in_flight < self.cap:
                self.release()
            if not self.decoders and not self.prefilling and not self.waiting:
                if self.next_send >= n:
                    break
                self.boundary = self.now
                self.now = max(self.now, self.send[self.next_send])
                continue
            if self.jump():
                continue
            if not self.step():
                raise InputError("workload", "a waiting request can never be admitted", "give a larger instance")
        # the API server's time to a first token, beside the engine's steps; a prefilled request's first
        # token came from its prefill pool, whose TTFT holds it
        front = 0.0 if self.traffic.prefilled else self.cost.model.eff.first_token_seconds
        ttft = [first - sent + front for first, sent in zip(self.first, self.sent, strict=True)]
        e2e = [finish - sent + front for finish, sent in zip(self.finish, self.sent, strict=True)]
        tpot = [(f - a) / (o - 1) if o > 1 else 0.0 for f, a, o in zip(self.finish, self.first, self.osl, strict=True)]
        start = min(self.sent)
        return Served(Distribution.of(ttft), Distribution.of(tpot),
                      Distribution.of(self.itl_values, self.itl_weights), Distribution.of(e2e),
                      tuple(zip(ttft, tpot, e2e, strict=True)), max(self.finish) - start, n, sum(self.prompt),
                      sum(self.osl), self.preemptions, self.inst.dp)
