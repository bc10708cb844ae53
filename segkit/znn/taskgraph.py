"""A DAG of tasks run on a pool of threads, with a timeline of who ran what when.

A task is a Python callable plus the tasks it waits for.  Each task keeps a count of unfinished
predecessors behind its own small lock; a finishing task decrements its successors' counts and
queues those that reach zero.  The ready queue is ordered by priority: the longest estimated
path from the task to the end of the graph first (critical-path list scheduling; ZNN's task
manager keeps a priority queue too).  Work that matters runs in numba/scipy/numpy with the GIL
released, so the threads overlap; the Python bookkeeping per task is a few tens of
microseconds.

``run`` records (task, thread, start, end) for every task: the Gantt chart of the notebook and
the task costs of the work/span model (segkit.znn.brent).
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from dataclasses import dataclass, field

from ..validate import arguments


@dataclass(eq=False)
class Task:
    name: str
    fn: object
    kind: str = "task"       # conv / fft / ifft / node / pool / loss / wgrad ...
    phase: str = "forward"   # forward / backward / update (colours the drawing)
    layer: int = -1
    estimate: float = 1.0    # estimated cost (relative), for priorities before measuring
    deps: list = field(default_factory=list)
    succ: list = field(default_factory=list, repr=False)


class TaskGraph:
    def __init__(self):
        self.tasks: list[Task] = []

    def add(self, name, fn, deps=(), **info) -> Task:
        deps = [d for d in deps if d is not None]
        task = Task(name, fn, deps=deps, **info)
        for d in deps:
            d.succ.append(task)
        self.tasks.append(task)
        return task

    def __len__(self):
        return len(self.tasks)

    def bottom_levels(self, cost=None) -> dict:
        """Longest path (by ``cost``, default the estimates) from each task to a sink."""
        cost = cost or {t: t.estimate for t in self.tasks}
        level = {}
        for task in reversed(self.topological()):
            level[task] = cost[task] + max((level[s] for s in task.succ), default=0.0)
        return level

    def topological(self) -> list[Task]:
        indeg = {t: len(t.deps) for t in self.tasks}
        order = [t for t in self.tasks if indeg[t] == 0]
        i = 0
        while i < len(order):
            for s in order[i].succ:
                indeg[s] -= 1
                if indeg[s] == 0:
                    order.append(s)
            i += 1
        if len(order) != len(self.tasks):
            raise ValueError("task graph has a cycle")
        return order

    def plain(self):
        """(nodes, edges) as plain dicts for mlsys_viz.graph_figure."""
        ids = {t: f"{i}:{t.name}" for i, t in enumerate(self.tasks)}
        nodes = [{"id": ids[t], "label": t.name, "group": t.phase,
                  "hover": f"{t.name}<br>{t.kind}, layer {t.layer}"} for t in self.tasks]
        edges = [{"source": ids[d], "target": ids[t]} for t in self.tasks for d in t.deps]
        return nodes, edges


@dataclass
class Record:
    task: Task
    thread: int
    start: float
    end: float


def default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def run(graph: TaskGraph, threads: int | None = None) -> tuple[list[Record], float]:
    """Run every task once, respecting dependencies, on ``threads`` threads (None: every core).

    Returns the timeline records and the wall time.  An exception in a task stops the run and
    is raised here with the task's name; the run never hangs on a failed task.
    """
    threads = default_threads() if threads is None else arguments(threads=threads)
    tasks = graph.tasks
    if not tasks:
        return [], 0.0
    level = graph.bottom_levels()
    order = {t: i for i, t in enumerate(tasks)}
    waiting = {t: len(t.deps) for t in tasks}
    locks = {t: threading.Lock() for t in tasks}
    ready = [(-level[t], order[t], t) for t in tasks if not t.deps]
    heapq.heapify(ready)
    cond = threading.Condition()
    state = {"left": len(tasks), "error": None}
    records: list[Record] = []
    t0 = time.perf_counter()

    def worker(index):
        while True:
            with cond:
                while not ready and state["left"] and state["error"] is None:
                    cond.wait()
                if state["error"] is not None or not state["left"]:
                    return
                _, _, task = heapq.heappop(ready)
            start = time.perf_counter()
            try:
                task.fn()
            except BaseException as error:  # noqa: BLE001 - re-raised in the caller
                with cond:
                    state["error"] = (task, error)
                    cond.notify_all()
                return
            end = time.perf_counter()
            records.append(Record(task, index, start - t0, end - t0))
            now_ready = []
            for s in task.succ:
                with locks[s]:
                    waiting[s] -= 1
                    if waiting[s] == 0:
                        now_ready.append(s)
            with cond:
                state["left"] -= 1
                for s in now_ready:
                    heapq.heappush(ready, (-level[s], order[s], s))
                cond.notify(len(now_ready)) if state["left"] else cond.notify_all()

    if threads == 1:
        worker(0)
    else:
        pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join()
    wall = time.perf_counter() - t0
    if state["error"] is not None:
        task, error = state["error"]
        raise RuntimeError(f"znn task {task.name!r} ({task.kind}, layer {task.layer}) failed: "
                           f"{type(error).__name__}: {error}") from error
    if state["left"]:
        raise RuntimeError(f"znn task graph: {state['left']} tasks never became ready")
    return records, wall
