"""Plain data views of lmskit results, for notebooks and the workbench's pictures.

Everything here turns lmskit objects (Graph, Lifetimes, Simulation) into the plain dicts and lists
that ``mlsys_viz`` draws (nodes / edges, lifetime intervals, live-at-peak rows) or into
small tables (lists of dicts; ``table`` prints them), so the notebooks stay thin:

- graph_view / collapsed_view / rewrite_highlight: a Graph as viz nodes and edges, coloured by
  phase (swap-outs and swap-ins in their own colours), optionally folded into one cluster per
  (phase, layer) so a ~9,000-op ResNet-50 step draws as a few hundred boxes.
- phase_counts, tensor_table, bytes_by_batch: what a captured step holds, symbolically in the
  batch (shape(b) = coef * b + const per dimension, so other batch sizes need no re-trace).
- intervals, live_at_peak, peak_by_batch: Lifetimes as lifetime-chart intervals (host spans of
  swapped tensors included), the breakdown at the peak, and how the peak grows with the batch.
- saved_bytes_by_type, swapin_leads: which op types make the tensors the backward pass reads
  (TFLMS v1 never swaps "atomic" Mul/Add outputs), and how early each swap-in's trigger brings
  its copy back (why v1 gets less out of Keras 3 graphs than the paper did).
- max_batches, sweep_v2, largest_side: the batch-size, parameter-tuning and cube-side studies as
  rows (each row one simulation), with communication overhead = step time - compute time.

Nothing here imports TensorFlow beyond what lmskit already did; nothing draws.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter

from mlsys_viz.units import human_bytes as human

from . import progress
from .graph import PHASES, Graph, producer_name
from .planner import InfeasibleError, evaluate, max_batch_size, plan, saved_tensors
from .rules.common import ATOMIC_TYPES, is_swap
from .schedule import Lifetimes, lifetimes
from .simulate import Simulation, simulate

BACKWARD_SCOPE = "gradient_tape/"
# Ops that only carry bookkeeping; drawing them hides the structure of a small graph.
BOOKKEEPING_TYPES = ("Const", "NoOp", "Shape", "ShapeN", "StridedSlice", "Pack",
                     "BroadcastGradientArgs", "Placeholder")
# Ops drawn aside (a side column or hidden): constants and reads of variables. In ResNet-50's
# step they are ~1,000 of ~9,000 ops, each with one long edge into the layer that uses it.
ASIDE_TYPES = frozenset({"Const", "ReadVariableOp", "VarHandleOp", "VariableV2"})


def group_of(graph: Graph, name: str) -> str:
    """The colour group of an op: swap-out / swap-in for swaps, input / variable for the step's
    placeholders, constant for Const, else its phase."""
    op = graph.ops[name]
    if is_swap(op):
        return "swap-out" if op.attrs["swap"] == "out" else "swap-in"
    if op.type == "Placeholder":
        is_var = name in graph.variables or any(
            graph.tensors[t].dtype == "resource" for t in op.outputs)
        return "variable" if is_var else "input"
    if op.type == "Const":
        return "constant"
    return op.phase


def _shape_text(graph: Graph, tensor: str, batch_size: int) -> str:
    t = graph.tensors[tensor]
    if not t.itemsize:
        return f"{t.dtype}"
    return f"{list(t.shape(batch_size))} {t.dtype} = {human(t.bytes(batch_size))}"


def graph_view(graph: Graph, batch_size: int = 1, drop_types=(), keep=()):
    """(nodes, edges) for viz.graph_figure: one node per op (ops whose type is in drop_types
    are left out, with their edges, unless named in keep), data edges hovering the tensor's
    shape and bytes at batch_size, control edges (swap triggers among them) as kind "control".
    Node "scope" is the op's name, so viz.collapse_scopes folds TensorFlow name scopes."""
    drop_types, keep = set(drop_types), set(keep)
    shown = {n for n, op in graph.ops.items() if op.type not in drop_types or n in keep}
    nodes = []
    for name, op in graph.ops.items():
        if name not in shown:
            continue
        outs = "<br>".join(f"{t}: {_shape_text(graph, t, batch_size)}" for t in op.outputs[:3])
        role = ""
        if is_swap(op):
            role = f"<br>swap-{op.attrs['swap']} of {op.attrs['swap_of']}"
        group = group_of(graph, name)
        nodes.append({"id": name, "label": op.type, "group": group, "scope": name,
                      "aside": op.type in ASIDE_TYPES or group in ("constant", "variable"),
                      "hover": f"<b>{name}</b><br>{op.type} · {op.phase} · {op.device}{role}"
                               f"<br>{outs}"})
    edges = []
    for name, op in graph.ops.items():
        if name not in shown:
            continue
        for t in dict.fromkeys(op.inputs):
            src = producer_name(t)
            if src in shown:
                edges.append({"source": src, "target": name, "kind": "data",
                              "hover": f"{t}<br>{_shape_text(graph, t, batch_size)}"})
        for c in op.control_inputs:
            if c in shown:
                edges.append({"source": c, "target": name, "kind": "control",
                              "hover": f"{c} runs before {name}"})
    return nodes, edges


def layer_of(name: str, depth: int = 2) -> str:
    """The layer an op belongs to: its name scope cut to `depth` parts, gradient_tape/ removed
    (so a layer's forward and backward ops name the same layer)."""
    if name.startswith(BACKWARD_SCOPE):
        name = name[len(BACKWARD_SCOPE):]
    parts = name.split("/")[:-1]
    return "/".join(parts[:depth]) or "(top level)"


def collapsed_view(graph: Graph, depth: int = 2, batch_size: int = 1):
    """(nodes, edges) with one cluster node per (phase, layer): layer_of(name, depth) and the
    op's group, so forward and backward halves of a layer are two boxes of their own colour.
    Sizes in the hover are the cluster's op count."""
    nodes, edges = graph_view(graph, batch_size)
    for node in nodes:
        # collapse_scopes splits scopes on "/": keep the whole cluster key in the first part.
        key = f"{node['group']} · {layer_of(node['id'], depth).replace('/', '.')}"
        node["scope"] = f"{key}/{node['id'].replace('/', '.')}"
    from mlsys_viz import collapse_scopes

    return collapse_scopes(nodes, edges, depth=1)


def rewrite_highlight(graph: Graph) -> list[str]:
    """Op names to highlight in a rewritten graph: every swap node, the trigger ops of the
    swap-ins, the producers of swapped tensors and the consumers now reading a swap-in."""
    out = []
    for name, op in graph.ops.items():
        if not is_swap(op):
            continue
        out.append(name)
        if op.attrs["swap"] == "out":
            out.append(producer_name(op.inputs[0]))
        else:
            out += op.control_inputs
            out += [c.name for c in graph.consumers(op.outputs[0])]
    return list(dict.fromkeys(out))


def rewrite_views(original: Graph, rewritten: Graph, batch_size: int = 1, drop_types=()):
    """(before, after, highlight) for viz.rewrite_figure: both graphs as (nodes, edges) (ops of
    drop_types left out unless the rewrite touched them) and the ids to highlight: the inserted
    swap-outs and swap-ins, the producers of swapped tensors, the triggers (whose control edges
    to the swap-ins are then drawn bold) and the readers now fed by a swap-in."""
    highlight = rewrite_highlight(rewritten)
    before = graph_view(original, batch_size, drop_types, keep=highlight)
    after = graph_view(rewritten, batch_size, drop_types, keep=highlight)
    return before, after, highlight


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


def sim_row(sim: Simulation, **extra) -> dict:
    """One simulation as a flat row; comm = step time - compute time (what swapping costs)."""
    return {**extra, "fits": sim.fits, "step_s": sim.step_time, "compute_s": sim.compute_time,
            "comm_s": sim.step_time - sim.compute_time, "overhead": sim.overhead,
            "stall_s": sim.stall_time, "peak": sim.peak_device_bytes,
            "host_peak": sim.peak_host_bytes, "swapped": sim.swapped_bytes,
            "oom_op": sim.oom_op}


def max_batches(graph: Graph, device, policies, budget: int | None = None,
                max_overhead: float | None = None, throughput: bool = False) -> list[dict]:
    """For each policy: the largest batch that fits (planner.max_batch_size; within
    max_overhead when given), the ratio to "none" (when "none" is among the policies), the
    simulation at that batch and the search time. throughput=True adds the throughput-optimal
    batch (best_throughput) and its images per second."""
    rows = []
    start = None
    for policy in progress.bar(policies, desc="max batch per policy"):
        t0 = time.perf_counter()
        try:
            # Swapping never fits less than no swapping: start the search at that batch.
            b = max_batch_size(graph, device, policy, budget, max_overhead=max_overhead,
                               start=start)
        except InfeasibleError:
            b = 0
        if policy == "none" and b:
            start = b
        row = {"policy": policy, "max batch": b}
        if b:
            sim = evaluate(graph, policy, device, b, budget)[1]
            row.update(sim_row(sim))
            row["images_per_s"] = b / sim.step_time if sim.step_time else None
            if throughput:
                row.update(best_throughput(graph, device, policy, b, budget))
        row["search_s"] = time.perf_counter() - t0
        rows.append(row)
    base = next((r["max batch"] for r in rows if r["policy"] == "none"), 0)
    for r in rows:
        r["ratio"] = r["max batch"] / base if base else None
    return rows


def throughput_curve(graph: Graph, device, policy: str, max_batch: int,
                     budget: int | None = None, points: int = 8) -> list[dict]:
    """Images per second under a policy at `points` batches spread geometrically from 1 to
    max_batch: rows of batch, images_per_s, overhead, fits."""
    cands = sorted({max(1, round(max_batch ** (i / (points - 1)))) for i in range(points)}
                   | {max_batch})
    out = []
    for b in progress.bar(cands, desc=f"{policy}: batches"):
        try:
            s = evaluate(graph, policy, device, b, budget)[1]
        except InfeasibleError:
            continue
        out.append({"batch": b, "fits": s.fits, "overhead": s.overhead,
                    "images_per_s": b / s.step_time if s.fits and s.step_time else 0.0})
    return out


def best_throughput(graph: Graph, device, policy: str, max_batch: int,
                    budget: int | None = None, points: int = 8) -> dict:
    """The batch of throughput_curve with the most images per second:
    {"best batch", "best images_per_s"}."""
    curve = throughput_curve(graph, device, policy, max_batch, budget, points)
    best = max(curve, key=lambda r: r["images_per_s"], default={"batch": 0, "images_per_s": 0.0})
    return {"best batch": best["batch"], "best images_per_s": best["images_per_s"]}


def sweep_v2(graph: Graph, device, batch_size: int, swapout_threshold, swapin_ahead,
             swapin_groupby, budget: int | None = None) -> list[dict]:
    """Simulate the TFLMS v2 rewrite for every combination of the three parameters; one row
    each with the options and sim_row's fields."""
    from .rules import swap

    rows = []
    grid = list(itertools.product(swapout_threshold, swapin_ahead, swapin_groupby))
    for so, ahead, group in progress.bar(grid, desc="TFLMS v2 parameter sweep"):
        g = swap(graph, swapout_threshold=so, swapin_ahead=ahead, swapin_groupby=group)
        sim = simulate(g, device, batch_size, budget)
        rows.append(sim_row(sim, swapout_threshold=so, swapin_ahead=ahead,
                            swapin_groupby=group))
    return rows


def tuning_gain(rows: list[dict], baseline: dict) -> dict:
    """The best fitting row of a sweep against a baseline row: communication time (step -
    compute) of each and the relative cut, 1 - best / baseline."""
    fitting = [r for r in rows if r["fits"]]
    if not fitting:
        raise ValueError("no setting in the sweep fits the budget")
    best = min(fitting, key=lambda r: r["step_s"])
    cut = 1 - best["comm_s"] / baseline["comm_s"] if baseline["comm_s"] > 0 else 0.0
    return {"baseline": baseline, "best": best, "comm_cut": cut}


def largest_side(capture_side, sides, device, policies, batch_size: int = 1,
                 budget: int | None = None) -> list[dict]:
    """For each cube side (one capture each: the side is not the batch), whether each policy
    fits at batch_size. capture_side(side) -> Graph. Stops after a side nothing fits."""
    rows = []
    for side in progress.bar(sides, desc="cube sides"):
        g = capture_side(side)
        row = {"side": side}
        for policy in policies:
            try:
                sim = simulate(plan(g, policy, device, batch_size, budget), device, batch_size,
                               budget)
                row[policy] = sim.fits
                row[f"{policy} overhead"] = sim.overhead if sim.fits else None
            except InfeasibleError:
                row[policy] = False
                row[f"{policy} overhead"] = None
        rows.append(row)
        if not any(row[p] for p in policies):
            break
    return rows


def table(rows: list[dict], columns=None, max_rows: int = 40) -> str:
    """Rows of dicts as a fixed-width text table; byte columns (named bytes / peak / swapped /
    host_peak or a kind) shown human-readable, floats with 3 significant digits."""
    if not rows:
        return "(no rows)"
    columns = list(columns or dict.fromkeys(k for r in rows for k in r))
    bytes_cols = {"bytes", "peak", "swapped", "host_peak", "weight", "activation", "gradient",
                  "optimizer-state", "temporary"}

    def fmt(col, v):
        if v is None:
            return "-"
        if col in bytes_cols and isinstance(v, (int, float)) and not isinstance(v, bool):
            return human(v)
        if isinstance(v, float):
            return f"{v:.3g}"
        return str(v)

    shown = rows[:max_rows]
    cells = [[fmt(c, r.get(c)) for c in columns] for r in shown]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    if len(rows) > max_rows:
        lines.append(f"... {len(rows) - max_rows} more rows")
    return "\n".join(lines)


__all__ = ["human", "group_of", "graph_view", "layer_of", "collapsed_view", "rewrite_highlight",
           "rewrite_views", "step_series", "ASIDE_TYPES",
           "phase_counts", "tensor_table", "bytes_by_batch", "intervals", "live_at_peak",
           "peak_by_batch", "saved_bytes_by_type", "swapin_leads", "sim_row", "max_batches",
           "best_throughput", "throughput_curve",
           "sweep_v2",
           "tuning_gain", "largest_side", "table", "BOOKKEEPING_TYPES"]
