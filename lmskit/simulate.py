"""Replay a (rewritten) Graph on a device model: compute stream, copy streams, memory, stalls.

Model (simple enough to check by hand):
- Ops run in schedule order. Compute ops share one compute stream; swap-outs share the
  device->host copy stream and swap-ins the host->device stream. Each stream serves its ops in
  schedule order; an op starts when its stream is free and every op it waits for (data and
  control) has ended.
- A compute op takes max(FLOPs / (peak x efficiency), bytes moved / (bandwidth x efficiency)),
  times the device's calibrated factor for its type, + launch overhead (roofline), or, with a
  three-coefficient calibration (the CPU's), a x the FLOP term + b x the byte term + c; bookkeeping
  ops (Const, Shape, variable reads, aliases) are free. A copy takes latency + bytes / link
  bandwidth, stretched by 1 / duplex_efficiency when the other direction's stream is busy as
  it starts (contention; one pass in schedule order, so of two copies that start together the
  one reached second pays).
- Synchronous copies (attrs sync=True: PyTorch's save_on_cpu copies on the compute stream) run
  on the compute stream, so compute waits for them.
- Recomputed ops (attrs recompute_of, see lmskit.recompute) are compute ops like any other.
- Memory: an op's output buffer (rounded up to the allocator's granularity) is allocated when
  the op starts and freed when its last reader ends (a swap-out reading a device buffer frees it
  when the copy ends). Variables are resident. At equal times frees come before allocations.
  Same-place aliases share their root's buffer. The step fits when the device peak stays within
  the budget (device memory - reserve, unless given) and the host peak within the device's
  host_memory_bytes (TFLMS's pinned-host cap).
- Back-pressure (Device.alloc_wait_s > 0, TF's BFC allocator: 10 s): an op whose outputs do not
  fit waits until enough buffers are freed, at most alloc_wait_s, and its stream with it; the
  step grows by the wait (Simulation.alloc_wait_time, part of the overhead). Out of memory only
  when no free comes in time. With alloc_wait_s = 0 any peak over the budget is out of memory.
- No swapping would take the sum of the original compute ops' times (one stream never waits),
  so overhead = step time / that sum - 1 (recomputation and synchronous copies count as
  overhead). A stall is the time a compute op waited for a swap-in.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from .devices import Device, get_device
from .graph import ALIAS_TYPES, Graph, producer_name
from .schedule import buffer_roots, schedule

FREE_TYPES = frozenset({"NoOp", "Const", "Placeholder", "ReadVariableOp", "VarHandleOp", "Shape",
                        "ShapeN", "Size", "Rank", "IdentityN", "BroadcastGradientArgs"}
                       | ALIAS_TYPES)


def op_flops(graph: Graph, name: str, batch: int) -> float:
    """FLOPs of one op at a batch size (2 per multiply-add; 1 per element otherwise)."""
    op = graph.ops[name]
    shape = lambda t: graph.tensors[t].shape(batch)  # noqa: E731
    prod = lambda s: float(math.prod(s))  # noqa: E731
    if not op.outputs:
        return 0.0
    try:
        return _special_flops(op, shape, prod, batch)
    except (IndexError, KeyError):
        pass   # unexpected arity or rank (hand-made graphs): count it as elementwise
    sizes = [prod(shape(x)) for x in op.inputs + op.outputs if graph.tensors[x].itemsize]
    return max(sizes, default=0.0)


def _special_flops(op, shape, prod, batch):
    """FLOPs of the op types that are not elementwise; raises IndexError on odd arity."""
    out = shape(op.outputs[0])
    t = op.type
    if t == "MatMul":
        a = shape(op.inputs[0])
        k = a[0] if op.attrs.get("transpose_a") else a[1]
        return 2.0 * prod(out) * k
    if t.startswith("BatchMatMul"):
        a = shape(op.inputs[0])
        k = a[-2] if op.attrs.get("adj_x") else a[-1]
        return 2.0 * prod(out) * k
    if t in ("Conv2D", "Conv3D"):
        return 2.0 * prod(out) * prod(shape(op.inputs[1])[:-1])
    if t == "DepthwiseConv2dNative":
        return 2.0 * prod(out) * prod(shape(op.inputs[1])[:2])
    if t in ("Conv2DBackpropInput", "Conv3DBackpropInputV2"):
        return 2.0 * prod(shape(op.inputs[2])) * prod(shape(op.inputs[1])[:-1])
    if t in ("Conv2DBackpropFilter", "Conv3DBackpropFilterV2"):
        return 2.0 * prod(shape(op.inputs[2])) * prod(out[:-1])
    raise KeyError(t)


def op_bytes(graph: Graph, name: str, batch: int) -> float:
    op = graph.ops[name]
    return float(sum(graph.tensors[t].bytes(batch) for t in op.inputs + op.outputs))


CONV_TYPES = frozenset({"Conv2D", "Conv3D", "Conv2DBackpropInput", "Conv3DBackpropInputV2",
                        "Conv2DBackpropFilter", "Conv3DBackpropFilterV2"})


def op_patch_bytes(graph: Graph, name: str, batch: int) -> float:
    """Bytes of the patch matrix (im2col) a convolution works through on a CPU: one row of
    kernel-volume x input-channels values per output position, FLOPs / (2 x output channels)
    values in all (forward and both gradients; Eigen and TF's CPU kernels pack or materialise
    it). Its cost does not shrink with the output channels the way the FLOPs do: LeNet's
    1-to-6-channel convolutions spend most of their time on it. 0 for other ops, and for a
    hand-made convolution without a filter tensor of known rank."""
    op = graph.ops[name]
    if op.type not in CONV_TYPES:
        return 0.0
    try:
        tensor = graph.tensors[op.outputs[0] if "Filter" in op.type else op.inputs[1]]
        cout = tensor.shape(batch)[-1]
    except (IndexError, KeyError):
        return 0.0
    return tensor.itemsize * op_flops(graph, name, batch) / (2.0 * cout) if cout else 0.0


def _linear_costs(graph: Graph):
    """Per op (FLOPs, bytes, patch bytes) as a*batch + c, measured at batch 1 and 2; shared by
    rewrites."""
    table = graph.cache.setdefault("linear_costs", {})
    for name in graph.ops:
        if name not in table:
            f1, f2 = op_flops(graph, name, 1), op_flops(graph, name, 2)
            b1, b2 = op_bytes(graph, name, 1), op_bytes(graph, name, 2)
            p1, p2 = op_patch_bytes(graph, name, 1), op_patch_bytes(graph, name, 2)
            table[name] = (f2 - f1, 2 * f1 - f2, b2 - b1, 2 * b1 - b2, p2 - p1, 2 * p1 - p2)
    return table


def op_time(graph: Graph, name: str, batch: int, device: Device, costs=None) -> float:
    """Roofline time of one compute op (calibrated), or the copy time of a swap (uncontended)."""
    op = graph.ops[name]
    role = op.attrs.get("swap")
    if role is not None:
        nbytes = graph.tensors[op.inputs[0]].bytes(batch)
        return device.copy_latency_s + nbytes / (device.d2h_bandwidth if role == "out"
                                                 else device.h2d_bandwidth)
    if op.type in FREE_TYPES:
        return 0.0
    fa, fc, ba, bc, pa, pc = (costs or _linear_costs(graph))[name]
    compute = (fa * batch + fc) / (device.flops * device.compute_efficiency)
    memory = (ba * batch + bc) / (device.memory_bandwidth * device.bandwidth_efficiency)
    split = device.split_factors(op.type)
    if split is not None:   # the CPU's per-term form (Device.type_factor)
        a, b, c, d = split
        patch = (pa * batch + pc) / (device.memory_bandwidth * device.bandwidth_efficiency)
        return a * compute + b * memory + c + d * patch + device.launch_overhead_s
    factor, per_op = device.factor(op.type)
    return max(compute, memory) * factor + per_op + device.launch_overhead_s


def check_batch(batch_size) -> int:
    """batch_size must be an integer >= 1 (ValueError naming it otherwise)."""
    import numbers

    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return int(batch_size)


def check_budget(budget, device: Device) -> int:
    """The device budget: memory - reserve unless given; a given one must be positive."""
    if budget is None:
        return device.usable_bytes
    try:
        finite = math.isfinite(float(budget))
    except (OverflowError, TypeError, ValueError):
        finite = False
    if (isinstance(budget, bool) or not isinstance(budget, (int, float)) or not finite
            or budget <= 0):
        raise ValueError(f"budget must be a positive, finite number of bytes, got {budget!r}")
    return int(budget)


@dataclass
class Simulation:
    device: str
    batch_size: int
    budget: int
    peak_device_bytes: int
    peak_host_bytes: int
    step_time: float
    compute_time: float          # sum of the original compute ops' times: the no-swap step
    stall_time: float            # compute time lost waiting for swap-ins
    swapped_bytes: int           # bytes copied to the host
    oom_op: str | None           # first op whose allocation exceeded the budget
    host_budget: int = 0         # pinned host memory allowed (the device's host_memory_bytes)
    recompute_time: float = 0.0  # time spent re-running forward ops (lmskit.recompute)
    alloc_wait_time: float = 0.0  # time ops waited for the allocator (Device.alloc_wait_s)
    start: dict = field(repr=False, default_factory=dict)
    end: dict = field(repr=False, default_factory=dict)
    memory: tuple = field(repr=False, default=())   # (times, device bytes) after each event

    @property
    def fits(self) -> bool:
        return self.oom_op is None and self.host_fits

    @property
    def host_fits(self) -> bool:
        return not self.host_budget or self.peak_host_bytes <= self.host_budget

    @property
    def overhead(self) -> float:
        return self.step_time / self.compute_time - 1.0 if self.compute_time else 0.0


class _WaitingAllocator:
    """Device memory as TensorFlow's BFC allocator sees it while the step runs, for
    back-pressure (Device.alloc_wait_s > 0): an allocation that does not fit waits for frees,
    up to alloc_wait_s (TF 1's AllocateRaw retries for 10 s, woken by each deallocation), and
    the op starts that much later; when nothing would free in time the step is out of memory.

    Ops are placed in schedule order, so a buffer's free time is known once every reader of it
    has been placed; until then it counts as held. What an op may use at time s is the budget
    less the variables, the held buffers and the placed buffers freed after s. A buffer another
    stream allocates later than s already counts from s, so the memory curve the step really
    draws never exceeds the budget (a conservative rule; it only bites when copies run ahead).
    Each stream starts its ops in order, so frees before every stream's next start can be
    forgotten: the lists stay as short as the live set."""

    def __init__(self, graph: Graph, order, root, batch: int, rounding: int, base: int,
                 budget: int, wait_s: float):
        self.graph, self.root, self.budget, self.wait_s = graph, root, budget, wait_s
        self.base = base
        self.need: dict[str, list] = {}      # op -> [(root tensor, bytes)] it allocates
        self.readers: dict[str, int] = {}    # root -> readers not placed yet
        self.free_at: dict[str, float] = {}  # root -> latest end of its placed readers
        self.held = 0                         # allocated bytes whose free time is unknown
        self.times: list[float] = []         # known future frees, sorted by time
        self.sizes: list[int] = []
        self.first = 0                        # frees before self.first are past
        self.future = 0                       # bytes of self.sizes[self.first:]
        self.kept = {root[t] for t in graph.fetches if t in root}
        self.nbytes: dict[str, int] = {}
        for name in order:
            op = graph.ops[name]
            for r in {root[t] for t in op.inputs}:
                self.readers[r] = self.readers.get(r, 0) + 1
            if op.device != "device":
                continue
            for t in op.outputs:
                if root[t] != t or graph.tensors[t].variable is not None:
                    continue
                n = graph.tensors[t].bytes(batch)
                if n > 0:
                    n = -(-n // rounding) * rounding
                    self.need.setdefault(name, []).append((t, n))
                    self.nbytes[t] = n

    def _used_after(self, s: float) -> int:
        """Bytes in use at every time >= s as far as is known (variables, held, freed later)."""
        i = bisect.bisect_right(self.times, s, self.first)
        return self.base + self.held + self.future - sum(self.sizes[self.first:i])

    def wait(self, name: str, s: float) -> float | None:
        """Seconds op `name` waits at time s for its outputs' memory; None: out of memory (no
        free in time)."""
        n = sum(b for _, b in self.need.get(name, ()))
        if not n:
            return 0.0
        used = self._used_after(s)
        if used + n <= self.budget:
            return 0.0
        i = bisect.bisect_right(self.times, s, self.first)
        for j in range(i, len(self.times)):
            if self.times[j] - s > self.wait_s:
                return None
            used -= self.sizes[j]
            if used + n <= self.budget:
                return self.times[j] - s
        return None

    def place(self, name: str, end: float, ends: dict, horizon: float) -> None:
        """Op `name` has started and ends at `end`: allocate its outputs, release its inputs'
        claims (ends: every placed op's end).
        horizon: the earliest time any stream can start its next op."""
        op = self.graph.ops[name]
        for t, n in self.need.get(name, ()):
            self.held += n
            if not self.readers.get(t) and t not in self.kept:
                self._known(t, end)
        for r in {self.root[t] for t in op.inputs}:
            self.free_at[r] = max(self.free_at.get(r, 0.0), end)
            self.readers[r] -= 1
            if not self.readers[r] and r in self.nbytes and r not in self.kept:
                self._known(r, max(self.free_at[r], ends[self.graph.tensors[r].op]))
        while self.first < len(self.times) and self.times[self.first] <= horizon:
            self.future -= self.sizes[self.first]
            self.first += 1

    def _known(self, r: str, t: float) -> None:
        n = self.nbytes[r]
        self.held -= n
        i = bisect.bisect_right(self.times, t, self.first)
        self.times.insert(i, t)
        self.sizes.insert(i, n)
        self.future += n


def simulate(graph: Graph, device="p100-16gb", batch_size: int = 1, budget: int | None = None,
             timeline: bool = False) -> Simulation:
    """Event simulation of one step. budget defaults to the device memory less its reserve.
    timeline=True keeps per-op start/end times and the device-memory curve. With
    device.alloc_wait_s > 0 an allocation that does not fit waits for frees (back-pressure,
    _WaitingAllocator) and the step grows; out of memory only when no free comes in time."""
    dev = get_device(device)
    batch_size = check_batch(batch_size)
    budget = check_budget(budget, dev)
    sched = schedule(graph)
    order = sched.order
    ops = graph.ops
    root = buffer_roots(graph)
    costs = _linear_costs(graph)
    end: dict[str, float] = {}
    start: dict[str, float] = {}
    free = {"compute": 0.0, "out": 0.0, "in": 0.0}
    compute_time = stall = swapped = recompute = waited = 0.0
    alloc = wait_oom = None
    if dev.alloc_wait_s > 0:
        alloc = _WaitingAllocator(graph, order, root, batch_size, dev.allocator_rounding,
                                  graph.variable_bytes(), budget, dev.alloc_wait_s)
    for name in order:
        op = ops[name]
        role = op.attrs.get("swap")
        stream = "compute" if role is None or op.attrs.get("sync") else role
        dur = op_time(graph, name, batch_size, dev, costs)
        ready = 0.0
        ready_no_swapin = 0.0
        for t in op.inputs:
            p = producer_name(t)
            ready = max(ready, end[p])
            if ops[p].attrs.get("swap") != "in":
                ready_no_swapin = max(ready_no_swapin, end[p])
        for p in op.control_inputs:
            ready = max(ready, end[p])
            ready_no_swapin = max(ready_no_swapin, end[p])
        s = max(free[stream], ready)
        w = 0.0
        if alloc is not None and dur > 0.0:
            w = alloc.wait(name, s)
            if w is None:
                wait_oom, w = wait_oom or name, 0.0   # nothing frees in time: out of memory
            waited += w
            s += w
        if role is not None:
            other = free["in" if role == "out" else "out"]
            if stream != "compute" and other > s and dev.duplex_efficiency < 1:
                # The other direction is busy: this copy shares the link and host memory.
                dur = dev.copy_latency_s + (dur - dev.copy_latency_s) / dev.duplex_efficiency
            if role == "out":
                swapped += graph.tensors[op.inputs[0]].bytes(batch_size)
        elif stream == "compute":
            if dur == 0.0:
                # Free ops (Const, Shape, ...) do not occupy the stream.
                start[name] = end[name] = ready
                if alloc is not None:
                    alloc.place(name, ready, end, min(free.values()))
                continue
            if "recompute_of" in op.attrs:
                recompute += dur
            else:
                compute_time += dur
            # The allocator's wait is not a stall for a swap-in: it is counted apart.
            stall += s - w - max(free[stream], ready_no_swapin)
        start[name] = s
        end[name] = s + dur
        free[stream] = s + dur
        if alloc is not None:
            alloc.place(name, s + dur, end, min(free.values()))

    # Memory events: allocate at producer start, free at the last reader's end.
    last_end: dict[str, float] = {}
    for name in order:
        op = ops[name]
        for t in op.inputs:
            r = root[t]
            last_end[r] = max(last_end.get(r, 0.0), end[name])
    step_time = max(end.values(), default=0.0)
    for t in graph.fetches:
        if t in root:
            last_end[root[t]] = step_time
    rounding = dev.allocator_rounding
    events = []   # (time, 0 = free / 1 = alloc, bytes, place, op)
    for name in order:
        op = ops[name]
        for t in op.outputs:
            if root[t] != t or graph.tensors[t].variable is not None:
                continue
            nbytes = graph.tensors[t].bytes(batch_size)
            if nbytes <= 0:
                continue
            nbytes = -(-nbytes // rounding) * rounding
            events.append((start[name], 1, nbytes, op.device, name))
            events.append((max(last_end.get(t, end[name]), end[name]), 0, -nbytes, op.device,
                           name))
    events.sort(key=lambda e: (e[0], e[1]))
    base = graph.variable_bytes()
    dev_bytes, host_bytes = base, 0
    peak_dev, peak_host, oom = base, 0, None
    if base > budget:
        oom = "(variables)"
    times, curve = [], []
    for t, kind, nbytes, place, name in events:
        if place == "device":
            dev_bytes += nbytes
            if dev_bytes > peak_dev:
                peak_dev = dev_bytes
            if oom is None and kind == 1 and dev_bytes > budget:
                oom = name
            if timeline:
                times.append(t)
                curve.append(dev_bytes)
        else:
            host_bytes += nbytes
            peak_host = max(peak_host, host_bytes)
    if wait_oom is not None and oom != "(variables)":
        oom = wait_oom   # where the waiting allocator gave up
    # The step's fixed cost outside its ops (Device.step_overhead_s) is paid with or without
    # swapping, so it counts in the no-swap step too.
    step_time += dev.step_overhead_s
    compute_time += dev.step_overhead_s
    return Simulation(dev.name, batch_size, budget, int(peak_dev), int(peak_host), step_time,
                      compute_time, stall, int(swapped), oom, int(dev.host_memory_bytes),
                      recompute, waited, start if timeline else {}, end if timeline else {},
                      (times, curve) if timeline else ())


def largest_working_set(graph: Graph, batch_size: int) -> tuple[str, int]:
    """The op whose inputs + outputs (plus the resident variables) need the most device memory:
    no swap plan can go below this."""
    best, best_bytes = None, -1
    for name, op in graph.ops.items():
        if op.device != "device" or "swap_of" in op.attrs:
            continue
        nbytes = 0
        for t in set(op.inputs + op.outputs):
            tensor = graph.tensors[t]
            if tensor.variable is None:
                nbytes += tensor.bytes(batch_size)
        if nbytes > best_bytes:
            best, best_bytes = name, nbytes
    return best, best_bytes + graph.variable_bytes()
