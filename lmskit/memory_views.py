"""What a captured step holds and when, as rows and the intervals ``mlsys_viz`` draws: ops per
phase, the tensors (symbolic in the batch: shape(b) = coef * b + const per dimension, so other
batch sizes need no re-trace), Lifetimes as lifetime-chart intervals (host spans of swapped
tensors included), the breakdown at the peak and how the peak grows with the batch, which op
types make the tensors the backward pass reads (TFLMS v1 never swaps "atomic" Mul/Add outputs)
and how early each swap-in's trigger brings its copy back. Plain data; nothing here draws
(``lmskit.views`` gathers these with the other views)."""

from __future__ import annotations

from collections import Counter

from mlsys_viz.units import human_bytes as human

from .graph import PHASES, Graph, producer_name
from .graph_views import BACKWARD_SCOPE
from .planner import saved_tensors
from .rules.common import ATOMIC_TYPES
from .schedule import Lifetimes, lifetimes
from .simulate import Simulation


def step_series(lt: Lifetimes, sim: Simulation | None = None, graph: Graph | None = None) -> dict:
    """One run for viz.compare_steps: device and host bytes at each position of lt's order,
    placed at the op's simulated start time (never earlier than the op before) when sim
    (simulate(..., timeline=True)) is given, else at the position; with graph, the tensors
    live at the peak for its hover."""
    if sim is not None and not sim.start:
        raise ValueError("run simulate(..., timeline=True) to keep per-op times")
    if sim is None:
        x = list(range(len(lt.order)))
    else:  # copies run on their own streams: keep time monotone along the order
        x, now = [], 0.0
        for name in lt.order:
            now = max(now, sim.start.get(name, now))
            x.append(now)
    run = {"x": x, "device": lt.device_bytes.tolist(), "host": lt.host_bytes.tolist()}
    if graph is not None:
        run["peak_tensors"] = live_at_peak(lt, graph)
    return run


def phase_counts(graph: Graph) -> list[dict]:
    """One row per phase: op count, how many sit under gradient_tape/, the commonest types."""
    rows = []
    for phase in PHASES:
        ops = [op for op in graph.ops.values() if op.phase == phase]
        types = Counter(op.type for op in ops)
        rows.append({"phase": phase, "ops": len(ops),
                     "under gradient_tape/": sum(op.name.startswith(BACKWARD_SCOPE)
                                                 for op in ops),
                     "commonest types": ", ".join(f"{t} {c}" for t, c in types.most_common(5))})
    return rows


def tensor_table(graph: Graph, batch_size: int = 1, top: int | None = None,
                 min_bytes: int = 0) -> list[dict]:
    """Per-step tensors (variables' views excluded) with op, type, phase, kind, symbolic shape
    (b = batch), shape and bytes at batch_size; largest first."""
    rows = []
    for name, t in graph.tensors.items():
        if t.variable is not None or not t.itemsize:
            continue
        nbytes = t.bytes(batch_size)
        if nbytes < min_bytes:
            continue
        op = graph.ops[t.op]
        sym = [(f"{c}b+{k}" if k else ("b" if c == 1 else f"{c}b")) if c else str(k)
               for c, k in zip(t.coef, t.const, strict=True)]
        rows.append({"tensor": name, "type": op.type, "phase": op.phase,
                     "kind": graph.kind(name), "symbolic shape": "[" + ", ".join(sym) + "]",
                     "shape": t.shape(batch_size), "bytes": nbytes})
    rows.sort(key=lambda r: -r["bytes"])
    return rows[:top] if top else rows


def bytes_by_batch(graph: Graph, batches) -> list[dict]:
    """Total bytes of all per-step tensors by kind at each batch size (no re-trace), plus the
    resident variables; each tensor counted once, whatever its lifetime."""
    kinds = {name: graph.kind(name) for name, t in graph.tensors.items()
             if t.variable is None and t.itemsize}
    rows = []
    for b in batches:
        row = {"batch": b}
        for name, kind in kinds.items():
            row[kind] = row.get(kind, 0) + graph.tensors[name].bytes(b)
        for v in graph.variables.values():
            row[v.kind] = row.get(v.kind, 0) + v.bytes
        rows.append(row)
    return rows


def intervals(lt: Lifetimes, graph: Graph, min_bytes: int = 0) -> list[dict]:
    """Lifetimes as viz.lifetime_chart intervals: one per device buffer (name, start, end,
    bytes, kind, hover), largest kinds as lmskit names them. A tensor with a swap-out gets its
    host copy's span in "host"; swap-ins are buffers (rows) of their own."""
    host: dict[str, list] = {}
    for b in lt.buffers:
        if b.place == "host":
            op = graph.ops[b.op]
            src = op.attrs.get("swap_of", b.tensor)
            host.setdefault(src, []).append((b.produced, b.last_use))
    out = []
    for b in lt.buffers:
        if b.place != "device" or b.bytes < min_bytes:
            continue
        item = {"name": b.tensor, "start": b.produced, "end": b.last_use, "bytes": b.bytes,
                "kind": b.kind,
                "hover": f"{b.tensor}<br>{graph.ops[b.op].type} · {b.kind}<br>{list(b.shape)} = "
                         f"{human(b.bytes)}<br>live [{b.produced}, {b.last_use}]"}
        if b.tensor in host:
            item["host"] = host[b.tensor]
        out.append(item)
    return out


def live_at_peak(lt: Lifetimes, graph: Graph, position: int | None = None) -> list[dict]:
    """The breakdown at the peak (or at position) as rows: name (op), type, shape, bytes, kind;
    largest first. The "name" and "bytes" keys are what viz.memory_timeline reads."""
    rows = []
    for r in lt.breakdown(graph, position):
        typ = graph.ops[r["op"]].type if r["op"] in graph.ops else "Variable"
        rows.append({"name": r["op"], "type": typ, "shape": tuple(r["shape"]),
                     "bytes": r["bytes"], "kind": r["kind"]})
    return rows


def peak_by_batch(graph: Graph, batches) -> list[dict]:
    """Peak live device bytes, where it happens, and the peak's split by kind at each batch."""
    rows = []
    for b in batches:
        lt = lifetimes(graph, b)
        rows.append({"batch": b, "peak": lt.peak, "peak op": lt.peak_op, **lt.by_kind(graph)})
    return rows


def saved_bytes_by_type(graph: Graph, batch_size: int = 1) -> list[dict]:
    """Tensors the backward pass reads (planner.saved_tensors), grouped by producer type:
    count, bytes, and whether TFLMS v1 treats that type as atomic (never swapped)."""
    acc: dict[str, list] = {}
    for t in saved_tensors(graph):
        typ = graph.ops[producer_name(t)].type
        row = acc.setdefault(typ, [0, 0])
        row[0] += 1
        row[1] += graph.tensors[t].bytes(batch_size)
    total = sum(b for _, b in acc.values()) or 1
    rows = [{"type": typ, "tensors": n, "bytes": b, "share": b / total,
             "v1 never swaps": typ in ATOMIC_TYPES} for typ, (n, b) in acc.items()]
    rows.sort(key=lambda r: -r["bytes"])
    return rows


def swapin_leads(graph: Graph) -> list[dict]:
    """For each swap-in of a rewritten graph: its trigger and first reader (op and type), and
    the lead: how many positions of the schedule the copy back arrives before it is read
    (large leads hold the copy in device memory for long, undoing the swap)."""
    from .schedule import schedule

    pos = schedule(graph).position
    rows = []
    for name, op in graph.ops.items():
        if op.attrs.get("swap") != "in":
            continue
        readers = sorted(graph.consumers(op.outputs[0]), key=lambda c: pos[c.name])
        if not readers:
            continue
        trig = op.control_inputs[0] if op.control_inputs else None
        rows.append({"swap-in": name, "tensor": op.attrs["swap_of"],
                     "trigger": trig, "trigger type": graph.ops[trig].type if trig else None,
                     "reader": readers[0].name, "reader type": readers[0].type,
                     "lead": pos[readers[0].name] - pos[name]})
    return rows
