"""Swap policies, compared on the simulator, and the largest batch each one fits.

Policies:
- "none": no swapping.
- "swap-all": every forward tensor a backward op reads goes to the host, and each copy back
  starts only when the op just before its reader ends (no prefetch), on its own copy streams.
- "save-on-cpu": the same swaps, but synchronous, as PyTorch's save_on_cpu does them: each copy
  runs on the compute stream (compute waits for it), which is why it is 10x slower on the H100.
- "tflms": TFLMS v1 with its defaults (chain_rule, lb=1, ub=10000).
- "tflms-v2": TFLMS v2 autotune, as LMS does it: budget (memory - trainable variables) x 0.9;
  no swapping if that fits; else the largest swapout_threshold that fits, then the largest
  swapin_ahead, then the largest swapin_groupby (binary searches, each step simulated).
- "lmskit": ours. Rank candidate tensors by bytes x idle time, swap the fewest of the top of that
  list that make the step fit, and prefetch each just in time: copies back are laid out on the
  host->device stream backwards from their readers' start times, and each is triggered by the
  last op that ends before its copy must start. When that plan costs time, the TFLMS v2 option
  search runs too (under the same budget) and the faster plan that fits wins.
- "recompute" / "swap+recompute": activation checkpointing alone, or swap and recompute chosen
  per tensor by a greedy planner (lmskit.hybrid, after Capuchin and Checkmate).

Every plan is checked against the device's limits: device memory less its reserve (unless a
budget is given) and the pinned host memory (host_memory_bytes, TFLMS's
TF_GPU_HOST_MEM_LIMIT_IN_MB). max_batch_size(..., max_overhead=0.3) asks for the largest batch
whose step is at most 30% slower than its compute alone.

Triggers chosen by position in the schedule (swap-all, lmskit) are always earlier than the
reader, so every new edge goes forward in one topological order: no cycle.
"""

from __future__ import annotations

import weakref

from . import progress
from .devices import get_device
from .graph import Graph, producer_name
from .rules import swap, v2
from .rules.checker import check
from .rules.common import insert_swap, swap_target, trigger_ending_before, valid_trigger
from .schedule import schedule
from .simulate import check_batch, check_budget, largest_working_set, simulate

POLICIES = ("none", "swap-all", "save-on-cpu", "tflms", "tflms-v2", "lmskit")
# Also accepted by plan(): activation checkpointing, alone and mixed with swapping.
RECOMPUTE_POLICIES = ("recompute", "swap+recompute")
_BATCH_FREE_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class InfeasibleError(ValueError):
    """Even swapping everything cannot fit the step into the budget."""


def _fits(graph: Graph, device, batch: int, budget: int) -> bool:
    return simulate(graph, device, batch, budget).fits


def sync_copies(rewritten: Graph) -> Graph:
    """The same rewrite with every swap copy synchronous (on the compute stream)."""
    g = rewritten.copy()
    for op in g.ops.values():
        if "swap" in op.attrs:
            op.attrs["sync"] = True
    g.options = {**rewritten.options, "policy": "save-on-cpu"}
    return g


def _check_feasible(graph: Graph, batch: int, budget: int) -> None:
    op, need = largest_working_set(graph, batch)
    if need > budget:
        raise InfeasibleError(f"infeasible even with swapping: op {op} needs {need} bytes "
                              f"(its inputs and outputs plus the variables) at batch {batch}, "
                              f"budget {budget} bytes")


def saved_tensors(graph: Graph) -> list[str]:
    """Forward tensors that backward ops read (what autograd saves), in schedule order."""
    return [t for t in v2.v2_candidates(graph)
            if graph.ops[producer_name(t)].phase == "forward"
            and any(c.phase == "backward" and swap_target(c) for c in graph.consumers(t))]


def swap_all(graph: Graph) -> Graph:
    """The save_on_cpu policy (see the module docstring)."""
    order = schedule(graph).order
    pos = schedule(graph).position
    g = graph.copy()
    for t in saved_tensors(graph):
        for c in graph.consumers(t):
            if c.phase == "backward" and swap_target(c):
                trigger = _last_trigger_before(graph, order, pos[c.name] - 1)
                if trigger is not None and pos[trigger] > pos[producer_name(t)]:
                    insert_swap(g, t, [c.name], trigger)
    check(graph, g)
    g.options = {"policy": "swap-all"}
    return g


def _last_trigger_before(graph: Graph, order: list[str], i: int):
    while i >= 0 and not (valid_trigger(graph.ops[order[i]]) and graph.ops[order[i]].outputs):
        i -= 1
    return order[i] if i >= 0 else None


def autotune_v2(graph: Graph, device, batch_size: int, fixed: dict | None = None,
                budget: int | None = None, show_progress: bool = True) -> dict:
    """TFLMS v2's autotune (module docstring); returns swapout_threshold, swapin_ahead and
    swapin_groupby. Values in `fixed` are kept. budget: v2's own rule unless given."""
    dev = get_device(device)
    if budget is None:
        trainable = sum(v.bytes for v in graph.variables.values() if v.trainable)
        budget = int((dev.usable_bytes - trainable) * 0.9) + trainable
    fixed = dict(fixed or {})
    extra = {k: fixed[k] for k in ("sync_mode", "serialization") if k in fixed}
    top = max(schedule(graph).level.values()) + 1

    bar = progress.bar(desc=f"TFLMS v2 autotune, batch {batch_size}", show=show_progress)

    def fits(so, ahead, group):
        g = swap(graph, swapout_threshold=so, swapin_ahead=ahead, swapin_groupby=group, **extra)
        bar.update()
        return _fits(g, dev, batch_size, budget)

    def largest(lo, hi, ok):
        """Largest x in [lo, hi] with ok(x), assuming ok is monotone (True then False)."""
        if not ok(lo):
            return None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
        return lo

    if "swapout_threshold" in fixed:
        so = fixed["swapout_threshold"]
    elif _fits(graph, dev, batch_size, budget):
        bar.close()
        return {"swapout_threshold": top, "swapin_ahead": 1, "swapin_groupby": 0}
    else:
        # A smaller threshold swaps more; search the largest one that still fits.
        so = largest(0, top, lambda th: fits(th, 1, 0))
        so = 0 if so is None else so
    ahead = fixed.get("swapin_ahead")
    if ahead is None:
        ahead = largest(1, max(so, 1), lambda a: fits(so, a, 0)) or 1
    group = fixed.get("swapin_groupby")
    if group is None:
        group = largest(0, ahead, lambda k: fits(so, ahead, k)) or 0
    bar.close()
    return {"swapout_threshold": so, "swapin_ahead": ahead, "swapin_groupby": group}


def lmskit_plan(graph: Graph, device, batch_size: int, budget: int) -> Graph:
    """Our policy (module docstring): fewest high-value swaps, just-in-time prefetch.

    Candidates are (tensor, reader) pairs of any v2-swappable tensor, valued by bytes x the time
    the reader leaves it idle; the k most valuable are swapped, k as small as fits. Prefetch
    starts generous (each copy planned to start two copy times before its reader is due, on
    a stream shared with the other copies) and is shortened (1, 1/2, 1/4, 0 copy times) only
    when nothing fits, trading stall time for memory, down to save_on_cpu's no-prefetch.
    """
    dev = get_device(device)
    base = simulate(graph, dev, batch_size, budget, timeline=True)
    if base.fits:
        return graph
    pos = schedule(graph).position
    order = schedule(graph).order
    start, end = base.start, base.end
    ranked = []
    for t in v2.v2_candidates(graph):
        made = end[producer_name(t)]
        nbytes = graph.tensors[t].bytes(batch_size)
        copy = nbytes / dev.d2h_bandwidth + nbytes / dev.h2d_bandwidth
        for c in graph.consumers(t):
            idle = start[c.name] - made
            if swap_target(c) and idle > 0:
                # Gaps shorter than a round trip cannot hide the copies: they come last.
                ranked.append((idle > copy, nbytes * idle, t, c.name))
    ranked.sort(key=lambda r: (not r[0], -r[1]))
    ends = sorted((end[n], pos[n], n) for n in order
                  if valid_trigger(graph.ops[n]) and graph.ops[n].outputs and end[n] > 0)

    def build(k, prefetch):
        copies = sorted(((start[c], t, c) for _, _, t, c in ranked[:k]), reverse=True)
        g = graph.copy()
        stream_free = base.step_time
        for deadline, t, c in copies:
            # Lay copies back-to-back on the host->device stream, latest deadline first.
            dur = prefetch * graph.tensors[t].bytes(batch_size) / dev.h2d_bandwidth
            begin = min(deadline, stream_free) - dur
            stream_free = begin
            trigger = trigger_ending_before(ends, begin, pos[c], pos[producer_name(t)])
            if trigger is not None:
                insert_swap(g, t, [c], trigger)
        return g

    def fits(g):
        return _fits(g, dev, batch_size, budget)

    # Fewer swaps than cover the excess over the budget cannot fit (a swap frees at most its
    # tensor's bytes): the search starts there.
    from .hybrid import cover_count

    seen: set = set()
    sizes = [0 if t in seen or seen.add(t) else graph.tensors[t].bytes(batch_size)
             for _, _, t, _ in ranked]   # a tensor's bytes count once
    k0 = cover_count(sizes, base.peak_device_bytes - budget)
    for prefetch in (2.0, 1.0, 0.5, 0.25, 0.0):
        # Doubling finds a k that fits (too many swaps can stop fitting again: a saturated
        # copy stream pulls prefetches early), then bisection the fewest below it.
        lo0, k = k0, k0
        while k < len(ranked) and not fits(build(k, prefetch)):
            lo0, k = k + 1, k * 2
        k = min(k, len(ranked))
        if not ranked or not fits(build(k, prefetch)):
            continue
        lo, hi = min(lo0, k), k
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if fits(build(mid, prefetch)) else (mid + 1, hi)
        g = build(lo, prefetch)
        check(graph, g)
        g.options = {"policy": "lmskit", "swaps": lo, "prefetch": prefetch}
        return g
    return build(len(ranked), 0.0)   # best effort; the caller sees it does not fit


def best_plan(graph: Graph, device, batch_size: int, budget: int) -> Graph:
    """The "lmskit" policy: our greedy plan, and when it costs time the TFLMS v2 option search
    as well; the faster of the two that fits (the greedy one when neither does)."""
    ours = lmskit_plan(graph, device, batch_size, budget)
    mine = simulate(ours, device, batch_size, budget)
    if not mine.fits or mine.overhead <= 0.005:
        return ours
    tuned = swap(graph, **autotune_v2(graph, device, batch_size, budget=budget,
                                      show_progress=False))
    theirs = simulate(tuned, device, batch_size, budget)
    if theirs.fits and theirs.step_time < mine.step_time:
        tuned.options = {"policy": "lmskit", "via": "tflms-v2 options", **tuned.options}
        return tuned
    return ours


def plan(graph: Graph, policy: str, device="p100-16gb", batch_size: int = 1,
         budget: int | None = None) -> Graph:
    """The graph rewritten by a policy for a device and batch size."""
    dev = get_device(device)
    batch_size = check_batch(batch_size)
    budget = check_budget(budget, dev)
    if policy == "none":
        return graph
    _check_feasible(graph, batch_size, budget)
    if policy in ("swap-all", "tflms", "save-on-cpu"):
        # These plans do not depend on the batch: make them once per graph.
        plans = _BATCH_FREE_PLANS.setdefault(graph, {})
        if policy not in plans:
            if policy == "tflms":
                plans[policy] = swap(graph)
            elif policy == "swap-all":
                plans[policy] = swap_all(graph)
            else:
                plans[policy] = sync_copies(plan(graph, "swap-all", dev, batch_size, budget))
        return plans[policy]
    if policy in RECOMPUTE_POLICIES:
        from .hybrid import hybrid_plan
        allow = ("recompute",) if policy == "recompute" else ("swap", "recompute")
        return hybrid_plan(graph, dev, batch_size, budget, allow=allow)
    if policy == "tflms-v2":
        return swap(graph, **autotune_v2(graph, dev, batch_size, show_progress=False))
    if policy == "lmskit":
        return best_plan(graph, dev, batch_size, budget)
    raise ValueError(f"unknown policy {policy!r}: choose one of {POLICIES + RECOMPUTE_POLICIES}")


_EVALUATED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_EVALUATED_MAX = 256   # (plan, simulation) pairs kept per graph


def evaluate(graph: Graph, policy: str, device, batch_size: int, budget: int | None = None):
    """(the policy's plan, its Simulation) at one device, batch and budget; remembered per
    graph, so a search that probes a batch twice (the any-slowdown and the within-30% searches,
    a throughput curve, compare) plans and simulates it once. Raises InfeasibleError as plan."""
    dev = get_device(device)
    key = (policy, dev, check_batch(batch_size), budget)
    memo = _EVALUATED.setdefault(graph, {})
    if key not in memo:
        g = plan(graph, policy, dev, batch_size, budget)
        if len(memo) >= _EVALUATED_MAX:
            memo.pop(next(iter(memo)))
        memo[key] = (g, simulate(g, dev, batch_size, budget))
    return memo[key]


def compare(graph: Graph, device="p100-16gb", batch_size: int = 1, policies=POLICIES,
            budget: int | None = None) -> dict:
    """policy -> Simulation of the graph that policy makes, all at one device and batch."""
    return {p: evaluate(graph, p, device, batch_size, budget)[1]
            for p in progress.bar(policies, desc=f"policies at batch {batch_size}")}


def max_batch_size(graph: Graph, device="p100-16gb", policy: str = "none",
                   budget: int | None = None, limit: int = 1 << 16,
                   max_overhead: float | None = None, start: int | None = None) -> int:
    """The largest batch whose step fits the device (memory less reserve, host limit) under a
    policy, and, when max_overhead is given, whose overhead (step / compute - 1) is at most that
    (0.3: at most 30% slower). No re-trace: sizes are affine in the batch. Doubling from
    `start` (a guess, e.g. the no-swap maximum), then bisection; 0 when neither `start` nor
    batch 1 does.
    Assumes the test is monotone in the batch (a larger batch never fits where a smaller one
    does not): true for memory; for the overhead it is the usual case, not a law."""
    dev = get_device(device)
    budget = check_budget(budget, dev)
    if max_overhead is not None and (isinstance(max_overhead, bool) or not max_overhead >= 0):
        raise ValueError(f"max_overhead must be a number >= 0, got {max_overhead!r}")
    limit = check_batch(limit)
    bar = progress.bar(desc=f"max batch {policy} on {dev.name}")
    seen = {}

    def fits(b):
        if b not in seen:
            try:
                s = evaluate(graph, policy, dev, b, budget)[1]
                seen[b] = s.fits and (max_overhead is None or s.overhead <= max_overhead + 1e-9)
            except InfeasibleError:
                seen[b] = False
            bar.update()
            bar.set_postfix(batch=b, ok=seen[b])
        return seen[b]

    try:
        s = min(check_batch(start), limit) if start is not None and start > 1 else None
        if s is not None and fits(s):
            # The search goes up from a start that passes. Batch 1 is not asked: with
            # max_overhead it can fail where the start passes (at tiny batches the copies'
            # latency, not the link, sets the overhead), and it would end the search at 0.
            lo, hi = s, 2 * s
        elif not fits(1):
            if max_overhead is None:
                _check_feasible(graph, 1, budget)   # says which op cannot fit, if one cannot
            return 0
        else:
            lo, hi = 1, 2 if s is None else s
        while hi <= limit and fits(hi):   # a failed start is cached: no doubling then
            lo, hi = hi, hi * 2
        if hi > limit:
            return lo
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        return lo
    finally:
        bar.close()
