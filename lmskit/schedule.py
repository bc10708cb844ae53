"""Topological orders, topological levels, tensor lifetimes and live bytes.

Order: like TensorFlow's executor, a FIFO ready queue. Ops with nothing to wait for start in
definition order; when an op finishes, the successors it made ready join the back of the queue.
Levels: an op's level is 1 + the highest level among the ops it waits for (sources are level 0),
the grouping TFLMS v2 walks.

Lifetimes: a buffer is allocated when its producer runs and freed after its last consumer runs,
both inclusive, in positions of the order. Same-place Identity-like ops forward their input's
buffer (graph.ALIAS_TYPES), so an alias extends its root buffer's life instead of adding bytes.
Variables are resident all step and counted on the device. Tensors the step returns live to
the end.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from .graph import ALIAS_TYPES, Graph, producer_name


class CycleError(ValueError):
    """The graph is not a DAG (a rewrite added an edge that closes a loop)."""


@dataclass
class Schedule:
    order: list[str]            # op names in execution order
    position: dict[str, int]    # op name -> index in order
    level: dict[str, int]       # op name -> topological level


def schedule(graph: Graph) -> Schedule:
    """FIFO topological order and levels; raises CycleError naming ops left on a cycle."""
    if graph._schedule is not None:
        return graph._schedule
    succ = graph.successors()
    pending = {name: 0 for name in graph.ops}
    for outs in succ.values():
        for s in outs:
            pending[s] += 1
    level = {name: 0 for name in graph.ops}
    ready = deque(name for name, n in pending.items() if n == 0)
    order = []
    while ready:
        name = ready.popleft()
        order.append(name)
        for s in succ[name]:
            level[s] = max(level[s], level[name] + 1)
            pending[s] -= 1
            if pending[s] == 0:
                ready.append(s)
    if len(order) != len(graph.ops):
        stuck = [n for n, k in pending.items() if k > 0]
        raise CycleError(f"graph has a cycle through {len(stuck)} ops, e.g. {stuck[:5]}")
    result = Schedule(order, {n: i for i, n in enumerate(order)}, level)
    graph._schedule = result
    return result


def buffer_roots(graph: Graph) -> dict[str, str]:
    """tensor name -> the tensor whose buffer it uses (itself unless it is a same-place alias)."""
    root: dict[str, str] = {}
    for name in schedule(graph).order:
        op = graph.ops[name]
        for i, t in enumerate(op.outputs):
            r = t
            if (i == 0 and op.type in ALIAS_TYPES and op.inputs
                    and graph.producer(op.inputs[0]).device == op.device):
                r = root.get(op.inputs[0], op.inputs[0])
            root[t] = r
    return root


@dataclass
class Buffer:
    tensor: str        # root tensor owning the buffer
    op: str
    place: str         # "device" or "host"
    kind: str
    produced: int      # position in the order
    last_use: int      # position of the last reader (inclusive)
    bytes: int
    shape: tuple


@dataclass
class Lifetimes:
    """Per-buffer intervals and live bytes at each position of the order."""

    batch_size: int
    order: list[str]
    buffers: list[Buffer]
    device_bytes: np.ndarray     # live device bytes at each position, variables included
    host_bytes: np.ndarray
    variable_bytes: int

    @property
    def peak(self) -> int:
        return int(self.device_bytes.max()) if len(self.device_bytes) else self.variable_bytes

    @property
    def peak_position(self) -> int:
        return int(self.device_bytes.argmax())

    @property
    def peak_op(self) -> str:
        return self.order[self.peak_position]

    def live_at(self, position: int, place: str = "device") -> list[Buffer]:
        return [b for b in self.buffers
                if b.place == place and b.produced <= position <= b.last_use]

    def breakdown(self, graph: Graph, position: int | None = None) -> list[dict]:
        """What is live on the device at a position (default: the peak), largest first."""
        pos = self.peak_position if position is None else position
        rows = [dict(op=b.op, tensor=b.tensor, shape=b.shape, bytes=b.bytes, kind=b.kind)
                for b in self.live_at(pos)]
        for v in graph.variables.values():
            rows.append(dict(op=v.name, tensor=v.name, shape=v.shape, bytes=v.bytes, kind=v.kind))
        rows.sort(key=lambda r: -r["bytes"])
        return rows

    def by_kind(self, graph: Graph, position: int | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.breakdown(graph, position):
            out[row["kind"]] = out.get(row["kind"], 0) + row["bytes"]
        return out


def lifetimes(graph: Graph, batch_size: int) -> Lifetimes:
    """[produced, last used] for every buffer and live bytes over the step at batch_size."""
    sched = schedule(graph)
    pos = sched.position
    root = buffer_roots(graph)
    produced: dict[str, int] = {}
    last: dict[str, int] = {}
    for name in sched.order:
        op = graph.ops[name]
        p = pos[name]
        for t in op.outputs:
            r = root[t]
            if r == t:
                produced[r] = p
            last[r] = max(last.get(r, p), p)
        for t in op.inputs:
            r = root[t]
            last[r] = max(last.get(r, p), p)
    end = len(sched.order) - 1
    for t in graph.fetches:
        if t in root:
            last[root[t]] = end
    n = len(sched.order)
    dev = np.zeros(n + 1, dtype=np.int64)
    host = np.zeros(n + 1, dtype=np.int64)
    buffers = []
    for r, p in produced.items():
        tensor = graph.tensors[r]
        if tensor.variable is not None:
            continue
        nbytes = tensor.bytes(batch_size)
        if nbytes <= 0:
            continue
        op = graph.ops[tensor.op]
        b = Buffer(r, op.name, op.device, graph.kind(r), p, last[r], nbytes,
                   tensor.shape(batch_size))
        buffers.append(b)
        arr = dev if op.device == "device" else host
        arr[p] += nbytes
        arr[b.last_use + 1] -= nbytes
    var_bytes = graph.variable_bytes()
    return Lifetimes(batch_size, sched.order, buffers, np.cumsum(dev)[:n] + var_bytes,
                     np.cumsum(host)[:n], var_bytes)


def reachable(graph: Graph, start: str) -> set[str]:
    """Op names reachable from `start` through data and control edges (start excluded)."""
    if graph._succ is None:
        graph._succ = graph.successors()
    succ = graph._succ
    seen, stack = set(), [start]
    while stack:
        for s in succ[stack.pop()]:
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return seen


__all__ = ["Schedule", "schedule", "Lifetimes", "Buffer", "lifetimes", "buffer_roots",
           "reachable", "CycleError", "producer_name"]
