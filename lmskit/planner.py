"""Swap policies, compared on the simulator, and the largest batch each one fits.

Policies:
- "none": no swapping.
- "swap-all": every forward tensor a backward op reads goes to the host, and each copy back
  starts only when the op just before its reader ends (no prefetch): what PyTorch's save_on_cpu
  does.
- "tflms": TFLMS v1 with its defaults (chain_rule, lb=1, ub=10000).
- "tflms-v2": TFLMS v2 autotune, as LMS does it: budget (memory - trainable variables) x 0.9;
  no swapping if that fits; else the largest swapout_threshold that fits, then the largest
  swapin_ahead, then the largest swapin_groupby (binary searches, each step simulated).
- "lmskit": ours. Rank candidate tensors by bytes x idle time, swap the fewest of the top of that
  list that make the step fit, and prefetch each just in time: copies back are laid out on the
  host->device stream backwards from their readers' start times, and each is triggered by the
  last op that ends before its copy must start. When that plan costs time, the TFLMS v2 option
  search runs too (under the same budget) and the faster plan that fits wins.

Triggers chosen by position in the schedule (swap-all, lmskit) are always earlier than the
reader, so every new edge goes forward in one topological order: no cycle.
"""

from __future__ import annotations

import bisect
import weakref

from .devices import get_device
from .graph import Graph, producer_name
from .rules import swap, v2
from .rules.checker import check
from .rules.common import insert_swap, swap_target, valid_trigger
from .schedule import schedule
from .simulate import largest_working_set, simulate

POLICIES = ("none", "swap-all", "tflms", "tflms-v2", "lmskit")
_BATCH_FREE_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class InfeasibleError(ValueError):
    """Even swapping everything cannot fit the step into the budget."""


def _fits(graph: Graph, device, batch: int, budget: int) -> bool:
    return simulate(graph, device, batch, budget).fits


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
                budget: int | None = None) -> dict:
    """TFLMS v2's autotune (module docstring); returns swapout_threshold, swapin_ahead and
    swapin_groupby. Values in `fixed` are kept. budget: v2's own rule unless given."""
    dev = get_device(device)
    if budget is None:
        trainable = sum(v.bytes for v in graph.variables.values() if v.trainable)
        budget = int((dev.memory_bytes - trainable) * 0.9) + trainable
    fixed = dict(fixed or {})
    extra = {k: fixed[k] for k in ("sync_mode", "serialization") if k in fixed}
    top = max(schedule(graph).level.values()) + 1

    def fits(so, ahead, group):
        g = swap(graph, swapout_threshold=so, swapin_ahead=ahead, swapin_groupby=group, **extra)
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
            trigger = _trigger_ending_before(ends, begin, pos[c], pos[producer_name(t)])
            if trigger is not None:
                insert_swap(g, t, [c], trigger)
        return g

    def fits(g):
        return _fits(g, dev, batch_size, budget)

    for prefetch in (2.0, 1.0, 0.5, 0.25, 0.0):
        # Doubling finds a k that fits (too many swaps can stop fitting again: a saturated
        # copy stream pulls prefetches early), then bisection the fewest below it.
        k = 1
        while k < len(ranked) and not fits(build(k, prefetch)):
            k *= 2
        k = min(k, len(ranked))
        if not ranked or not fits(build(k, prefetch)):
            continue
        lo, hi = k // 2 + 1, k
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
    tuned = swap(graph, **autotune_v2(graph, device, batch_size, budget=budget))
    theirs = simulate(tuned, device, batch_size, budget)
    if theirs.fits and theirs.step_time < mine.step_time:
        tuned.options = {"policy": "lmskit", "via": "tflms-v2 options", **tuned.options}
        return tuned
    return ours


def _trigger_ending_before(ends, time, consumer_pos, producer_pos):
    """The last op (by end time) ending at or before `time`, ordered after the producer and
    before the consumer; else the earliest op after the producer."""
    i = bisect.bisect_right(ends, (time, float("inf"), "")) - 1
    while i >= 0:
        _, p, name = ends[i]
        if producer_pos < p < consumer_pos:
            return name
        if p <= producer_pos:
            break
        i -= 1
    for _, p, name in ends:
        if producer_pos < p < consumer_pos:
            return name
    return None


def plan(graph: Graph, policy: str, device="p100-16gb", batch_size: int = 1,
         budget: int | None = None) -> Graph:
    """The graph rewritten by a policy for a device and batch size."""
    dev = get_device(device)
    budget = dev.memory_bytes if budget is None else budget
    if policy == "none":
        return graph
    _check_feasible(graph, batch_size, budget)
    if policy in ("swap-all", "tflms"):
        # These plans do not depend on the batch: make them once per graph.
        plans = _BATCH_FREE_PLANS.setdefault(graph, {})
        if policy not in plans:
            plans[policy] = swap_all(graph) if policy == "swap-all" else swap(graph)
        return plans[policy]
    if policy == "tflms-v2":
        return swap(graph, **autotune_v2(graph, dev, batch_size))
    if policy == "lmskit":
        return best_plan(graph, dev, batch_size, budget)
    raise ValueError(f"unknown policy {policy!r}: choose one of {POLICIES}")


def compare(graph: Graph, device="p100-16gb", batch_size: int = 1, policies=POLICIES,
            budget: int | None = None) -> dict:
    """policy -> Simulation of the graph that policy makes, all at one device and batch."""
    out = {}
    for p in policies:
        out[p] = simulate(plan(graph, p, device, batch_size, budget), device, batch_size, budget)
    return out


def max_batch_size(graph: Graph, device="p100-16gb", policy: str = "none",
                   budget: int | None = None, limit: int = 1 << 16) -> int:
    """The largest batch whose step fits the device under a policy (no re-trace: sizes are
    affine in the batch). Doubling, then bisection; 0 when not even batch 1 fits."""
    dev = get_device(device)
    budget = dev.memory_bytes if budget is None else budget

    def fits(b):
        try:
            return simulate(plan(graph, policy, dev, b, budget), dev, b, budget).fits
        except InfeasibleError:
            return False

    if not fits(1):
        _check_feasible(graph, 1, budget)   # says which op cannot fit, if one cannot
        return 0
    lo, hi = 1, 2
    while hi <= limit and fits(hi):
        lo, hi = hi, hi * 2
    if hi > limit:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
