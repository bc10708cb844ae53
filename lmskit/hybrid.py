"""Swap or recompute, per tensor, under the device and host limits: a greedy planner.

After Capuchin (swap or recompute each tensor, from measured access times) and Checkmate
(rematerialization as an optimisation problem). Checkmate solves an integer program; this is a
greedy by cost per byte freed, which is honest about what it is:

1. Simulate the step without any rewrite (its timeline gives each op's start and end).
2. For each forward tensor a backward op reads (a "saved" tensor), estimate
   - swap cost: the round trip that the idle gap between its producer and its first backward
     reader cannot hide, max(0, out + in - gap), plus the copies' latency; a swap also takes
     its bytes of pinned host memory (the device's host_memory_bytes caps the total);
   - recompute cost: the compute time of the ops to re-run (its producer; and the chain back
     to kept tensors, lmskit.recompute.chain), once per backward reader.
   Keep the cheaper option (of those allowed), and rank tensors by cost / bytes.
3. Take the k cheapest per byte, k as small as makes the step fit (doubling, then bisection,
   each candidate plan simulated). Copies back are triggered two copy times ahead of their
   readers, and if no k fits, one, a half, then none (the copy starts when the reader is due:
   it stalls, but holds no memory early); recomputations run just before their readers. Swaps
   are turned into recomputations when the host cap would be exceeded.

Greedy by cost per byte ignores that freeing bytes only matters at the peak, and that copies
contend for one link; the simulation of each candidate plan is what decides whether it fits.
"""

from __future__ import annotations

from .devices import get_device
from .graph import Graph, producer_name
from .recompute import chain, recomputable, recompute
from .rules import v2
from .rules.common import insert_swap, swap_target, trigger_ending_before, valid_trigger
from .schedule import schedule
from .simulate import op_time, simulate


def candidates(graph: Graph, device, batch_size: int, allow=("swap", "recompute"), base=None):
    """Saved tensors with their cheapest allowed option: list of dicts (tensor, bytes, how,
    cost, swap_cost, recompute_cost), cheapest per byte first."""
    dev = get_device(device)
    base = base or simulate(graph, dev, batch_size, timeline=True)
    swappable = set(v2.v2_candidates(graph))
    rows = []
    for t in swappable | {x for x in graph.tensors if x in _saved(graph)}:
        readers = [c for c in graph.consumers(t) if c.phase == "backward" and swap_target(c)]
        if not readers or graph.ops[producer_name(t)].phase != "forward":
            continue
        nbytes = graph.tensors[t].bytes(batch_size)
        if nbytes <= 0:
            continue
        gap = min(base.start[c.name] for c in readers) - base.end[producer_name(t)]
        costs = {}
        if "swap" in allow and t in swappable:
            trip = nbytes / dev.d2h_bandwidth + nbytes / dev.h2d_bandwidth
            costs["swap"] = max(0.0, trip - gap) + 2 * dev.copy_latency_s * len(readers)
        if "recompute" in allow and recomputable(graph, t):
            ops = chain(graph, t, set())
            costs["recompute"] = len(readers) * sum(op_time(graph, p, batch_size, dev)
                                                    for p in ops)
        if not costs:
            continue
        how = min(costs, key=costs.get)
        rows.append({"tensor": t, "bytes": nbytes, "how": how, "cost": costs[how],
                     "swap_cost": costs.get("swap"), "recompute_cost": costs.get("recompute"),
                     "readers": [c.name for c in readers]})
    rows.sort(key=lambda r: (r["cost"] / r["bytes"], -r["bytes"]))
    return rows


def cover_count(sizes, excess: int) -> int:
    """How many of `sizes`, taken in order, it takes to add up to `excess` (at least 1; all of
    them when they never do)."""
    total = 0
    for k, size in enumerate(sizes, start=1):
        total += size
        if total >= excess:
            return k
    return max(1, len(sizes))


def _saved(graph: Graph) -> set:
    cache = graph.cache.setdefault("saved_tensors", {})
    key = len(graph.ops)
    if key not in cache:
        cache[key] = {t for op in graph.ops.values() if op.phase == "backward"
                      for t in op.inputs if graph.ops[producer_name(t)].phase == "forward"}
    return cache[key]


def build(graph: Graph, device, batch_size: int, chosen: list[dict], base,
          prefetch: float = 2.0) -> Graph:
    """Apply the chosen swaps (triggered `prefetch` copy times before the reader) and
    recomputations; swaps that would pass the host cap become recomputations when they can."""
    dev = get_device(device)
    sched = schedule(graph)
    pos, order = sched.position, sched.order
    ends = graph.cache.setdefault("hybrid_ends", {})
    key = (id(base), batch_size)
    if key not in ends:
        ends.clear()
        ends[key] = sorted((base.end[n], pos[n], n) for n in order
                           if valid_trigger(graph.ops[n]) and graph.ops[n].outputs
                           and base.end[n] > 0)
    by_end = ends[key]
    host, drop, swaps = 0, [], []
    for r in chosen:
        how = r["how"]
        if how == "swap" and host + r["bytes"] > dev.host_memory_bytes:
            if not recomputable(graph, r["tensor"]):
                continue
            how = "recompute"
        if how == "swap":
            host += r["bytes"]
            swaps.append(r)
        else:
            drop.append(r["tensor"])
    g = recompute(graph, drop) if drop else graph.copy()
    for r in swaps:
        t, nbytes = r["tensor"], r["bytes"]
        for c in r["readers"]:
            due = base.start[c] - prefetch * (dev.copy_latency_s + nbytes / dev.h2d_bandwidth)
            trigger = trigger_ending_before(by_end, due, pos[c], pos[producer_name(t)])
            # The reader may now read a recomputed input, but it still reads t itself.
            if t in g.ops[c].inputs:
                insert_swap(g, t, [c], trigger)
    g.options = {"policy": "swap+recompute", "swapped": len(swaps), "recomputed": len(drop)}
    return g


def hybrid_plan(graph: Graph, device, batch_size: int, budget: int,
                allow=("swap", "recompute")) -> Graph:
    """The fewest cheapest-per-byte swaps/recomputations that make the step fit (module
    docstring); the graph itself when it fits already; everything allowed when nothing fits
    (the caller's simulation then says it does not)."""
    dev = get_device(device)
    base = simulate(graph, dev, batch_size, budget, timeline=True)
    if base.fits:
        return graph
    rows = candidates(graph, dev, batch_size, allow, base)
    if not rows:
        return graph
    best = None
    for prefetch in (2.0, 1.0, 0.5, 0.0):
        # Early copies back hide the copy but hold memory sooner; shorten the prefetch (down to
        # none: the copy starts when its reader is due, stalling) until the step fits.
        g = _fewest(graph, dev, batch_size, budget, rows, base, prefetch)
        if g is not None:
            g.options = {**g.options, "policy": "+".join(allow), "prefetch": prefetch}
            return g
        best = best or build(graph, dev, batch_size, rows, base, 0.0)
    return best


def _fewest(graph, dev, batch_size, budget, rows, base, prefetch):
    """The plan of the smallest k (doubling, then bisection) whose first k rows fit, or None."""
    memo = {}

    def fits(k):
        if k not in memo:
            g = build(graph, dev, batch_size, rows[:k], base, prefetch)
            memo[k] = (simulate(g, dev, batch_size, budget).fits, g)
        return memo[k][0]

    # No plan frees more than the bytes it drops, so fewer rows than cover the excess over the
    # budget cannot fit: start there (saves most of the doubling on large graphs).
    k0 = cover_count([r["bytes"] for r in rows], base.peak_device_bytes - budget)
    lo0, k = k0, k0
    while k < len(rows) and not fits(k):
        lo0, k = k + 1, k * 2
    k = min(k, len(rows))
    if not fits(k):
        return None
    lo, hi = min(lo0, k), k
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid + 1, hi)
    fits(lo)
    g = memo[lo][1]
    g.options = {**g.options, "chosen": lo}
    return g


__all__ = ["hybrid_plan", "candidates", "build"]
