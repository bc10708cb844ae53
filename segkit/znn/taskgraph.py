"""A DAG of tasks run on a pool of threads, with a timeline of who ran what when.

A task is a Python callable plus the tasks it waits for. Each task keeps a count of unfinished
predecessors; a finishing task decrements its successors' counts and queues those that reach
zero (one lock guards the counts and the queue, held for a few operations). The ready queue is
ordered by priority: the longest estimated path from the task to the end of the graph first
(critical-path list scheduling; ZNN's task manager keeps a priority queue too). Work that
matters runs in numba/scipy/numpy with the GIL released, so the threads overlap; the Python
bookkeeping per task is about ten microseconds (8.6 us per task for a graph of no-op tasks on
one thread here), which is why Network(granularity=...) can run a node's edges as one task.

``run`` records (task, thread, start, end) for every task: the Gantt chart of the notebook and
the task costs of the work/span model (segkit.znn.brent).
"""

from __future__ import annotations

import heapq
import os
import queue
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
        self._levels = None   # bottom_levels() by the estimates, kept until a task is added

    def add(self, name, fn, deps=(), **info) -> Task:
        self._levels = None
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
        if cost is None and self._levels is not None:
            return self._levels
        keep = cost is None
        cost = cost or {t: t.estimate for t in self.tasks}
        level = {}
        for task in reversed(self.topological()):
            level[task] = cost[task] + max((level[s] for s in task.succ), default=0.0)
        if keep:
            self._levels = level
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

    The bookkeeping holds the GIL, so its cost per task is what limits small steps on two
    threads: one lock guards the ready heap and the predecessor counts (held for a few
    operations), and an idle worker sleeps in a C-level queue of wake-up tokens, one token per
    ready task (threading.Condition, written in Python, cost twice as much per task here).
    """
    threads = default_threads() if threads is None else arguments(threads=threads)
    tasks = graph.tasks
    if not tasks:
        return [], 0.0
    level = graph.bottom_levels()
    order = {t: i for i, t in enumerate(tasks)}
    waiting = {t: len(t.deps) for t in tasks}
    ready = [(-level[t], order[t], t) for t in tasks if not t.deps]
    heapq.heapify(ready)
    lock = threading.Lock()
    tokens = queue.SimpleQueue()   # True: a task is ready; False: stop
    for _ in ready:
        tokens.put(True)
    state = {"left": len(tasks), "error": None}
    records: list[Record] = []
    t0 = time.perf_counter()

    def stop_all():
        for _ in range(threads):
            tokens.put(False)

    def worker(index):
        get, put, clock, push, pop = tokens.get, tokens.put, time.perf_counter, heapq.heappush, \
            heapq.heappop
        while True:
            if not get() or state["error"] is not None:
                return
            with lock:
                # every True token was put after its task was pushed, so the heap is not empty
                _, _, task = pop(ready)
            start = clock()
            try:
                task.fn()
            except BaseException as error:  # noqa: BLE001 - re-raised in the caller
                with lock:
                    if state["error"] is None:
                        state["error"] = (task, error)
                stop_all()
                return
            end = clock()
            records.append(Record(task, index, start - t0, end - t0))
            newly = 0
            with lock:
                for s in task.succ:
                    waiting[s] -= 1
                    if not waiting[s]:
                        push(ready, (-level[s], order[s], s))
                        newly += 1
                state["left"] -= 1
                left = state["left"]
            if not left:
                stop_all()
                return
            for _ in range(newly):
                put(True)

    # the calling thread is worker 0: one thread fewer to start and wake on every step
    pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(1, threads)]
    for th in pool:
        th.start()
    try:
        worker(0)
    except BaseException as error:  # an interrupt while waiting: stop the others, then raise
        with lock:
            if state["error"] is None:
                state["error"] = (None, error)
        stop_all()
        raise
    finally:
        for th in pool:
            th.join()
    wall = time.perf_counter() - t0
    if state["error"] is not None:
        task, error = state["error"]
        if not isinstance(error, Exception):   # KeyboardInterrupt, SystemExit: as they came
            raise error
        raise RuntimeError(f"znn task {task.name!r} ({task.kind}, layer {task.layer}) failed: "
                           f"{type(error).__name__}: {error}") from error
    if state["left"]:
        raise RuntimeError(f"znn task graph: {state['left']} tasks never became ready")
    return records, wall
