"""Work, span and Brent's theorem: how fast can P threads run this task graph?

With task costs measured at one thread, the work W is their sum and the span S the longest
path through the graph.  Brent's theorem bounds a greedy scheduler on P workers:

    max(W / P, S)  <=  T_P  <=  (W - S) / P + S

(the form of the bound the issue quotes, T_P <= W/P + S, is slightly looser).  For a wide net the
span is a small part of the work, so the bound is nearly W / P: linear speed-up, ZNN's claim.
The prediction we set beside measured times is the upper bound, with the scheduler's own
per-task overhead (measured at one thread: wall time minus the tasks' time) counted as work.
``simulate`` also plays the greedy critical-path-first scheduler with the measured costs, which
is what the pool in segkit.znn.taskgraph does.
"""

from __future__ import annotations

import heapq
from collections import defaultdict


def task_costs(records, wall: float | None = None) -> dict:
    """Cost of each task from a run's records; with ``wall``, the time between tasks is
    spread evenly over them (the scheduler's per-task overhead)."""
    cost = {r.task: r.end - r.start for r in records}
    if wall is not None and cost:
        overhead = max(0.0, wall - sum(cost.values())) / len(cost)
        cost = {t: c + overhead for t, c in cost.items()}
    return cost


def work_span(graph, cost: dict) -> tuple[float, float]:
    missing = [t.name for t in graph.tasks if t not in cost]
    if missing:
        raise ValueError(f"no measured cost for tasks {missing[:3]}")
    work = sum(cost[t] for t in graph.tasks)
    span = max(graph.bottom_levels(cost).values())
    return work, span


def brent(work: float, span: float, threads: int) -> dict:
    """Lower bound, Brent's upper bound (the prediction) and the speed-up it implies."""
    if threads < 1:
        raise ValueError("threads must be >= 1")
    upper = (work - span) / threads + span
    return {"threads": threads, "lower": max(work / threads, span), "predicted": upper,
            "loose": work / threads + span, "speedup": work / upper}


def simulate(graph, cost: dict, threads: int) -> float:
    """Makespan of greedy list scheduling, highest bottom level first, with these costs."""
    level = graph.bottom_levels(cost)
    order = {t: i for i, t in enumerate(graph.tasks)}
    waiting = {t: len(t.deps) for t in graph.tasks}
    ready = [(-level[t], order[t], t) for t in graph.tasks if not t.deps]
    heapq.heapify(ready)
    running: list = []   # (finish time, order, task)
    free, now = threads, 0.0
    while ready or running:
        while ready and free:
            _, i, t = heapq.heappop(ready)
            heapq.heappush(running, (now + cost[t], i, t))
            free -= 1
        now, _, t = heapq.heappop(running)
        free += 1
        for s in t.succ:
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(ready, (-level[s], order[s], s))
    return now


def gantt(records) -> list[dict]:
    """Plain rows for a timeline chart: one per task, with thread, start, end (ms), kind."""
    return [{"thread": r.thread, "start_ms": 1e3 * r.start, "end_ms": 1e3 * r.end,
             "task": r.task.name, "kind": r.task.kind, "phase": r.task.phase,
             "layer": r.task.layer} for r in sorted(records, key=lambda r: r.start)]


def busy_fraction(records, wall: float, threads: int) -> float:
    """Share of the threads' time spent inside tasks."""
    per = defaultdict(float)
    for r in records:
        per[r.thread] += r.end - r.start
    return sum(per.values()) / (wall * threads) if wall > 0 else 0.0
