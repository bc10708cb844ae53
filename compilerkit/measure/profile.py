"""Where a compiled model's time goes, per ONNX node, next to onnxruntime's and OpenVINO's own
profilers.

compilerkit side (`profile_nodes`): the model is compiled once more with `ProfilingEmitter`,
the LLVM code generator with a clock around each node. Code generation already makes the nests
of one ONNX node one function that `main_graph` calls (codegen/emit.py, `Emitter.outline`);
this emitter reads `clock_gettime(CLOCK_MONOTONIC)` before and after each such call and adds
the difference to that node's slot in a counter array. So each node is timed *in context*:
inside the whole compiled model, with the inputs its producers just wrote (often still in
cache), at the same -O and thread count, with the same schedules and fusions as a plain
`compile`. What it does not see: ops that are no loop nest of their own (a Reshape that is a
view, a folded constant) cost nothing and get 0 s; nests that a fusion pass moved into another
node's nest are counted under the node the nest is tagged with; the clock itself costs ~50 ns
per node. The rows hold the median over `repeat` runs (after one untimed run) of each node's
seconds, and a last row for the rest of the run (the whole call minus its nodes, median over
the runs: argument checks, the call from Python, ops outside any node's function).

OpenVINO side (`ov_profile_nodes`, a benchmark-only dependency): its CPU plugin's performance
counters per layer, after its own fusions (a Conv with its bias, activation and residual sum).

onnxruntime side (`ort_profile_nodes`): `SessionOptions.enable_profiling`; the JSON trace's
`Node` events named `<node>_kernel_time` are the kernels' times. onnxruntime runs its graph
optimisations first, so a row may be a fused node (`FusedConv`, a Conv that absorbed its
BatchNormalization and Relu) under a name of its own; `op_type` is the kernel's op.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import statistics
import tempfile
from collections import Counter, defaultdict

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import onnx

from compilerkit.codegen.emit import I64, Emitter
from compilerkit.frontend import ModelError
from compilerkit.onnx_passes.single_node import main_func

COUNTERS = "ck_profile_ns"  # global [n x i64]: nanoseconds per slot, summed over calls
CLOCK_MONOTONIC = 1  # Linux


class ProfilingEmitter(Emitter):
    """The LLVM emitter with a monotonic clock read around each ONNX node's outlined call.
    `.slots` maps node name -> counter index (in the order the nodes run)."""

    def emit(self):
        n = max(1, sum(1 for _ in main_func(self.kmodule).body.block.ops))  # >= nodes
        at = ir.ArrayType(I64, n)
        self.counters = ir.GlobalVariable(self.module, at, name=COUNTERS)
        self.counters.initializer = ir.Constant(at, None)  # external: kept, readable by name
        self.slots = {}
        self._now = self._clock_function()
        return super().emit()

    def _clock_function(self):
        # i64 ck_profile_now(void): CLOCK_MONOTONIC in ns, through libc's clock_gettime.
        ts = ir.LiteralStructType([I64, I64])
        cg = ir.Function(self.module, ir.FunctionType(ir.IntType(32), [ir.IntType(32),
                                                                       ts.as_pointer()]),
                         "clock_gettime")
        fn = ir.Function(self.module, ir.FunctionType(I64, []), "ck_profile_now")
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        slot = b.alloca(ts)
        b.call(cg, [ir.Constant(ir.IntType(32), CLOCK_MONOTONIC), slot])
        sec = b.load(b.gep(slot, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), 0)]))
        nsec = b.load(b.gep(slot, [ir.Constant(ir.IntType(32), 0),
                                   ir.Constant(ir.IntType(32), 1)]))
        b.ret(b.add(b.mul(sec, ir.Constant(I64, 1_000_000_000)), nsec))
        return fn

    def outline(self, nests, *args, **kwargs):
        tag = nests[0].attributes.get("onnx_node")
        node = tag.data if tag is not None else "(untagged nest)"
        k = self.slots.setdefault(node, len(self.slots))
        start = self.b.call(self._now, [])
        result = super().outline(nests, *args, **kwargs)
        stop = self.b.call(self._now, [])
        zero = ir.Constant(ir.IntType(32), 0)
        p = self.b.gep(self.counters, [zero, ir.Constant(ir.IntType(32), k)])
        self.b.store(self.b.add(self.b.load(p), self.b.sub(stop, start)), p)
        return result


def _clock_symbol():
    # MCJIT resolves `clock_gettime` by name; say where libc's is rather than rely on the
    # process's symbol search.
    addr = ctypes.cast(ctypes.CDLL(None).clock_gettime, ctypes.c_void_p).value
    llvm.add_symbol("clock_gettime", addr)


def _load_model(model) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        return onnx.load_from_string(bytes(model))
    path = os.fspath(model)
    if not os.path.isfile(path):
        raise ModelError(f"{path!r}: no such ONNX file")
    try:
        return onnx.load(path, load_external_data=False)
    except Exception as error:  # noqa: BLE001 - protobuf's errors name no file
        raise ModelError(f"{path!r} is not an ONNX model: {error}") from error


def node_labels(proto: onnx.ModelProto) -> list[tuple[str, str]]:
    """[(node label, op type)] in graph order; a node without a name is `OpType_index`, as the
    frontend labels it."""
    return [(n.name or f"{n.op_type}_{k}", n.op_type) for k, n in enumerate(proto.graph.node)]


def _supports_threads(cm) -> bool:
    import inspect

    try:
        return "num_threads" in inspect.signature(cm.run).parameters
    except (TypeError, ValueError):
        return False


def _ir_op_types(cm) -> dict[str, str]:
    """node name -> op type in the ONNX IR the compile lowered ({} when it kept none)."""
    prov = getattr(cm, "provenance", None)
    if prov is None or prov.modules.get("onnx-ir") is None:
        return {}
    return {n["name"]: n["op"] for n in prov.nodes}


def profile_nodes(model, num_threads: int = 1, repeat: int = 5, input_shapes=None,
                  feeds=None, opt_level: int = 3, **options) -> list[dict]:
    """Per-node seconds of compilerkit's code for `model` (path, bytes or ModelProto), timed in
    context (see the module docstring). One row per ONNX node, in graph order:
    {"node", "op_type", "seconds" (median over `repeat` runs), "share" (of the nodes' sum)},
    then a row for each node a pass made (fuse-gelu's Gelu, op type from the ONNX IR),
    then one row {"node": "(rest of the run)", "op_type": "untimed", ...}: the whole run minus
    the nodes (median over the runs). `feeds`: [(name, array)]; default `oracle.random_inputs`.
    `num_threads` is passed to the compiled model when compilerkit supports threads; a row
    field "threads" says what ran ("not supported" otherwise). `options` are compile's (e.g.
    conv_algorithm="auto")."""
    import time

    from compilerkit.oracle import random_inputs
    from compilerkit.pipeline import compile_to

    proto = _load_model(model)
    if not proto.graph.node:
        where = repr(os.fspath(model)) if isinstance(model, (str, os.PathLike)) else "the model"
        raise ModelError(f"{where}: the graph has no nodes, nothing to profile")
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    feeds = list(feeds) if feeds is not None else random_inputs(proto)
    shapes = input_shapes or {n: list(a.shape) for n, a in feeds}
    arrays = [a for _, a in feeds]
    _clock_symbol()
    cm = compile_to("native", proto, "host", opt_level, shapes, emitter=ProfilingEmitter,
                    asm=False, **options)
    emitted = cm.backend.emitted
    engine = cm.session.keep_alive[0]
    counts = np.ctypeslib.as_array(
        (ctypes.c_int64 * max(1, len(emitted.slots))).from_address(
            engine.get_global_value_address(COUNTERS)))
    threads = _supports_threads(cm)
    kw = {"num_threads": num_threads} if threads else {}
    cm.run(*arrays, **kw)
    per_run, wall = [], []
    for _ in range(repeat):
        counts[:] = 0
        t = time.perf_counter()
        cm.run(*arrays, **kw)
        wall.append(time.perf_counter() - t)
        per_run.append(counts.copy())
    seconds = {node: statistics.median(int(r[k]) for r in per_run) * 1e-9
               for node, k in emitted.slots.items()}
    rows, labels = [], node_labels(proto)
    known = {label for label, _ in labels}
    for label, op_type in labels:
        rows.append({"node": label, "op_type": op_type, "seconds": seconds.get(label, 0.0)})
    # Nests tagged with a name the ONNX graph does not have: a node a pass created (fuse-gelu's
    # Gelu); its op type is the compile's ONNX IR's.
    made = _ir_op_types(cm) if set(seconds) - known else {}
    rows += [{"node": node, "op_type": made.get(node, "?"), "seconds": s}
             for node, s in seconds.items() if node not in known]
    total = sum(r["seconds"] for r in rows)
    for r in rows:
        r["share"] = r["seconds"] / total if total else 0.0
        r["threads"] = num_threads if threads else "not supported"
    # Per run, the whole call minus its nodes; then the median (a median of sums is not the
    # sum of medians when other processes load the machine).
    rest = max(0.0, statistics.median(w - int(r.sum()) * 1e-9
                                      for w, r in zip(wall, per_run, strict=True)))
    rows.append({"node": "(rest of the run)", "op_type": "untimed", "seconds": rest,
                 "share": None, "threads": rows[0]["threads"]})
    cm = None  # drop the JIT engine now, not at the next collection
    return rows


def ort_profile_nodes(model, feeds, num_threads: int = 1, repeat: int = 5) -> list[dict]:
    """Per-node seconds of onnxruntime (CPU provider, intra-op `num_threads`, one inter-op
    thread, sequential execution) from its profiler: one row per kernel node as onnxruntime
    ran it (after its graph optimisations), {"node", "op_type", "seconds" (median over the
    `repeat` runs after the first), "share"}, in order of first run."""
    import onnxruntime as ort

    proto = _load_model(model)
    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.intra_op_num_threads = num_threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tmp, "ort")
        sess = ort.InferenceSession(proto.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        d = dict(feeds)
        for _ in range(repeat + 1):
            sess.run(None, d)
        path = sess.end_profiling()
        with open(path) as f:
            events = json.load(f)
    return parse_ort_profile(events, skip_runs=1)


def parse_ort_profile(events, skip_runs: int = 1) -> list[dict]:
    """Rows {"node", "op_type", "seconds", "share"} from onnxruntime's profile JSON (a list of
    Chrome-trace events): each `Node` event `<name>_kernel_time` is one kernel run; its runs
    after the first `skip_runs` (warm-up) give the median seconds."""
    times, ops = defaultdict(list), {}
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        name = e["name"].removesuffix("_kernel_time")
        times[name].append(e["dur"] * 1e-6)  # microseconds
        ops[name] = e.get("args", {}).get("op_name", "?")
    rows = []
    for name, ts in times.items():
        ts = ts[skip_runs:] or ts
        rows.append({"node": name, "op_type": ops[name], "seconds": statistics.median(ts)})
    total = sum(r["seconds"] for r in rows)
    for r in rows:
        r["share"] = r["seconds"] / total if total else 0.0
    return rows


def ov_profile_nodes(model, feeds, num_threads: int = 1, repeat: int = 5) -> list[dict]:
    """Per-layer seconds of OpenVINO (CPU plugin, `num_threads` inference threads, f32, one
    stream, latency hint, its pinning off: peer_bench's settings) from its performance
    counters (`PERF_COUNT`): rows as `parse_ov_profile` gives them. OpenVINO is a
    benchmark-only dependency (the `peers` extra): without it, an ImportError saying so."""
    try:
        import openvino as ov
    except ImportError as e:
        raise ImportError("ov_profile_nodes needs OpenVINO, a benchmark-only dependency: "
                          "pip install -e '.[peers]'") from e
    proto = _load_model(model)
    core = ov.Core()
    compiled = core.compile_model(
        core.read_model(proto.SerializeToString(), b""), "CPU",
        {"INFERENCE_NUM_THREADS": num_threads, "INFERENCE_PRECISION_HINT": "f32",
         "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "ENABLE_CPU_PINNING": False,
         "PERF_COUNT": True})
    request = compiled.create_infer_request()
    arrays = [a for _, a in feeds]
    runs = []
    for _ in range(repeat + 1):
        request.infer(arrays)
        runs.append([{"node": p.node_name, "op_type": p.node_type, "exec_type": p.exec_type,
                      "seconds": p.real_time.total_seconds(), "status": p.status.name}
                     for p in request.get_profiling_info()])
    return parse_ov_profile(runs, skip_runs=1)


def parse_ov_profile(runs, skip_runs: int = 1) -> list[dict]:
    """Rows {"node", "op_type" (OpenVINO's layer type), "exec_type" (its kernel, e.g.
    brgconv_avx512_1x1_f32), "seconds" (median over the runs after the first `skip_runs`),
    "share"} from one list of counter records per run ({"node", "op_type", "exec_type",
    "seconds", "status"}), in the order of the first run; layers not EXECUTED (folded,
    optimised out) are left out. OpenVINO fuses a Conv's bias, activation and residual sum
    into it and names the layer `<Conv node>/WithoutBiases`: `node` is the ONNX node's name
    again with that suffix dropped."""
    times, kinds = defaultdict(list), {}
    for run in runs[skip_runs:] or runs:
        for r in run:
            if r["status"] != "EXECUTED":
                continue
            name = r["node"].removesuffix("/WithoutBiases")
            times[name].append(r["seconds"])
            kinds.setdefault(name, (r["op_type"], r["exec_type"]))
    rows = [{"node": n, "op_type": kinds[n][0], "exec_type": kinds[n][1],
             "seconds": statistics.median(ts)} for n, ts in times.items()]
    total = sum(r["seconds"] for r in rows)
    for r in rows:
        r["share"] = r["seconds"] / total if total else 0.0
    return rows


def op_totals(rows) -> dict[str, float]:
    """Seconds per op type over profile rows (the untimed remainder left out), largest first."""
    c = Counter()
    for r in rows:
        if r["op_type"] != "untimed":
            c[r["op_type"]] += r["seconds"]
    return dict(c.most_common())


def top_nodes(rows, k: int = 10) -> list[dict]:
    """The `k` slowest node rows (the untimed remainder left out)."""
    return sorted((r for r in rows if r["op_type"] != "untimed"),
                  key=lambda r: -r["seconds"])[:k]


# --------------------------------------------------------------------------- the benchmark's table

STAGE_NAMES = {"onnx-ir": "import + ONNX passes", "kernel-ir": "lowering + schedules",
               "llvm-ir": "LLVM IR + LLVM -O", "asm": "machine code + load"}


def bench_table(result: dict) -> str:
    """A markdown table of `benchmarks/compile_bench.py`'s real-weight result (the JSON's
    "real_weight" entry): per model agreement, compile seconds and the latency ratios."""
    head = ["model", "max err / scale", "compile s", "ck ms (1t)", "ort ms (1t)",
            "ort/ck 1t", "ck ms (2t)", "ort ms (2t)", "ort/ck 2t"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def f(x, spec):
        return "-" if x is None else format(x, spec)

    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['model']} | failed: {r['error'][:80].replace('|', '/')} |"
                         + " |" * (len(head) - 2))
            continue
        lines.append(" | ".join([
            f"| {r['model']}", f(r["rel_error"], ".1e"), f(r["compile_s"], ".1f"),
            f(r["ck_1_best_ms"], ".1f"), f(r["ort_1_best_ms"], ".1f"), f(r["ratio_1"], ".2f"),
            f(r.get("ck_2_best_ms"), ".1f"), f(r["ort_2_best_ms"], ".1f"),
            f(r.get("ratio_2"), ".2f")]) + " |")
    g = result["geomean_ratio"]
    lines.append(f"| **geomean** | | | | | **{f(g['1'], '.2f')}** | | | **{f(g['2'], '.2f')}** |")
    return "\n".join(lines)


def bench_figure(result: dict, floor: float | None = None):
    """Two panels from `benchmarks/compile_bench.py`'s real-weight result: the latency ratio
    onnxruntime / compilerkit per model at 1 and 2 threads (log scale, the issue's floor as a
    line), and compile seconds per stage. plotly is imported here, not with compilerkit."""
    from plotly.subplots import make_subplots

    rows = [r for r in result["rows"] if "error" not in r]
    names = [r["model"] for r in rows]
    floor = result.get("floor", 0.8) if floor is None else floor
    g = result["geomean_ratio"]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.55, 0.45], subplot_titles=(
        "latency ratio onnxruntime / compilerkit (> 1: compilerkit faster)",
        "compile seconds per stage"))
    for n, colour in (("1", "#4e79a7"), ("2", "#f28e2b")):
        ys = [r.get(f"ratio_{n}") for r in rows]
        fig.add_bar(x=names, y=ys, name=f"{n} thread{'s' if n != '1' else ''} "
                    f"(geomean {g[n]:.2f}x)" if g.get(n) else f"{n} threads: not measured",
                    marker_color=colour, text=[f"{y:.2f}" if y else "" for y in ys],
                    textposition="outside", row=1, col=1)
    fig.add_hline(y=floor, line_dash="dash", line_color="#e15759", row=1, col=1)
    # On a log axis an annotation's y is log10 of the value.
    fig.add_annotation(x=1, xref="x domain", y=math.log10(floor), yref="y", showarrow=False,
                       text=f"target floor: {floor}x", xanchor="right", yanchor="top",
                       font_color="#e15759")
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888", row=1, col=1)
    stages = list(dict.fromkeys(k for r in rows for k in r["stage_s"]))
    palette = ["#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"]
    base = [0.0] * len(rows)
    for k, stage in enumerate(stages):
        # Stacked by hand (a shared offset group and a base): the figure's bar mode is
        # "group" for the ratios.
        ys = [r["stage_s"].get(stage, 0.0) for r in rows]
        fig.add_bar(x=names, y=ys, base=list(base), offsetgroup="stages",
                    name=STAGE_NAMES.get(stage, stage), marker_color=palette[k % len(palette)],
                    row=1, col=2)
        base = [b + y for b, y in zip(base, ys, strict=True)]
    ratios = [r.get(f"ratio_{n}") for r in rows for n in ("1", "2") if r.get(f"ratio_{n}")]
    lo, hi = min(ratios + [floor]) / 1.5, max(ratios + [1.0]) * 1.6
    fig.update_yaxes(type="log", title_text="ratio (log)", range=[math.log10(lo),
                                                                  math.log10(hi)], row=1, col=1)
    fig.update_yaxes(title_text="s", row=1, col=2)
    load = result.get("load", {}).get("start", {}).get("loadavg")
    fig.update_layout(
        barmode="group", height=560, width=1300, legend=dict(orientation="h", y=-0.35),
        title=f"Real-weight models ({result.get('size')} size) against onnxruntime; best of "
              f"{result.get('repeat')} interleaved rounds; load average {load} on "
              f"{result.get('load', {}).get('start', {}).get('cpus')} cores")
    return fig


def profile_table(entry: dict, k: int = 8) -> str:
    """A markdown table of one profiled model of the benchmark (the JSON's
    "profiles"/"models" entries): milliseconds per op type, compilerkit against onnxruntime,
    the `k` op types that take longest on either side."""
    if "error" in entry:
        return f"{entry['model']}: profile failed ({entry['error'][:200]})"
    ck_ops, ort_ops = entry["compilerkit_op_ms"], entry["onnxruntime_op_ms"]
    ops = list(dict.fromkeys(list(ck_ops)[:k] + list(ort_ops)[:k]))
    lines = [f"**{entry['model']}** ({entry['statistic']}, {entry['threads']} thread): "
             f"compilerkit {entry['compilerkit_nodes_ms']:.2f} ms in nodes "
             f"(+{entry['compilerkit_untimed_ms']:.2f} ms outside), onnxruntime "
             f"{entry['onnxruntime_nodes_ms']:.2f} ms in kernels",
             "", "| op type | compilerkit ms | onnxruntime ms |", "|---|---|---|"]
    lines += [f"| {op} | {ck_ops.get(op, 0.0):.2f} | {ort_ops.get(op, 0.0):.2f} |" for op in ops]
    return "\n".join(lines)
