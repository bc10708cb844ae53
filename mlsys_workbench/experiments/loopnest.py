"""Measuring the two code generators against each other, for benchmarks/tune_bench.py and
notebook 16: compile time per nest (single-op models, from their Kernel IR) and per model
(end to end, with each stage), run time at one thread, and agreement with onnxruntime.

Timings on a shared machine are upper bounds: each pair is measured interleaved (loopnest,
then LLVM, in turn), best of `repeat`, with the load average recorded beside them.
"""

from __future__ import annotations

import os
import time

import numpy as np
from onnx import helper, numpy_helper

from compilerkit.measure.timing import best_of

CODEGEN_STAGES = ("loopnest", "llvm-ir", "asm")  # Kernel IR -> runnable code


def _model(nodes, inputs, inits=(), outputs=("y",)):
    vi = [helper.make_tensor_value_info(n, 1, s) for n, s in inputs]
    vo = [helper.make_empty_tensor_value_info(n) for n in outputs]
    g = helper.make_graph(nodes, "g", vi, vo, [numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def nest_models(scale: float = 1.0) -> dict:
    """name -> one-node ONNX model, ResNet-50's kinds of nest (sizes times `scale`)."""
    rng = np.random.default_rng(0)
    s = max(1, int(56 * scale))
    c = max(4, int(64 * scale))
    n = max(16, int(256 * scale))

    def w(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    return {
        f"matmul {n}^3": _model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                                [("a", [n, n]), ("b", [n, n])]),
        f"conv3x3 {c}ch {s}x{s}": _model(
            [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], name="conv")],
            [("x", [1, c, s, s])], [("w", w(c, c, 3, 3)), ("b", w(c))]),
        f"conv1x1 {c}->{4 * c}": _model(
            [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1")],
            [("x", [1, c, s, s])], [("w", w(4 * c, c, 1, 1))]),
        f"relu {c}x{s}x{s}": _model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                                    [("x", [1, c, s, s])]),
        f"add {c}x{s}x{s}": _model([helper.make_node("Add", ["x", "z"], ["y"], name="add")],
                                   [("x", [1, c, s, s]), ("z", [1, c, s, s])]),
        f"maxpool3x3/2 {c}x{2 * s}": _model(
            [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1], name="pool")], [("x", [1, c, 2 * s, 2 * s])]),
        f"global avgpool {8 * c}x7x7": _model(
            [helper.make_node("GlobalAveragePool", ["x"], ["y"], name="gap")],
            [("x", [1, 8 * c, 7, 7])]),
    }


def codegen_seconds(cm) -> float:
    """Kernel IR -> runnable code: the code generator's stages (LLVM: optimise + JIT)."""
    return sum(cm.timings.get(s, 0.0) for s in CODEGEN_STAGES)


def _inputs(cm, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for _, shape, dtype in cm.inputs]


def _best_run(cms: dict, arrays, repeat: int) -> dict:
    """Best wall seconds per compiled model at one thread, interleaved after a warm-up."""
    return best_of({k: (lambda cm=cm: cm.run(*arrays, num_threads=1)) for k, cm in cms.items()},
                   repeat, "wall")


def compare_nest(model, repeat: int = 3, run_repeat: int = 5) -> dict:
    """One single-op model: both generators from the same Kernel IR, codegen time (best of
    `repeat`, interleaved), run time at one thread, max |difference|."""
    from compilerkit.pipeline import compile_to

    kmodule = compile_to("kernel-ir", model)
    best = {"loopnest": float("inf"), "llvm": float("inf")}
    cpu = dict(best)
    cms = {}
    for _ in range(repeat):
        for gen in best:
            c = time.process_time()
            cm = compile_to("native", kmodule, codegen=gen, asm=False)
            cpu[gen] = min(cpu[gen], time.process_time() - c)
            best[gen] = min(best[gen], codegen_seconds(cm))
            cms[gen] = cm
    arrays = _inputs(cms["llvm"])
    runs = _best_run(cms, arrays, run_repeat)
    a, b = (cms[g].run(*arrays, num_threads=1) for g in ("loopnest", "llvm"))
    functions = [f for f in cms["loopnest"].loopnest.functions if f.node is not None]
    return {"loopnest_codegen_ms": best["loopnest"] * 1e3, "llvm_codegen_ms": best["llvm"] * 1e3,
            "codegen_speedup": best["llvm"] / best["loopnest"],
            # CPU seconds of the whole compile from Kernel IR (planning, printing included)
            "loopnest_compile_cpu_ms": cpu["loopnest"] * 1e3,
            "llvm_compile_cpu_ms": cpu["llvm"] * 1e3,
            "loopnest_run_ms": runs["loopnest"] * 1e3, "llvm_run_ms": runs["llvm"] * 1e3,
            "run_ratio": runs["llvm"] / runs["loopnest"],  # > 1: loopnest's code is faster
            "max_abs_diff": max(float(np.max(np.abs(x - y))) for x, y in zip(a, b, strict=True)),
            "fallback": [f.node for f in functions if f.codegen == "llvm"],
            "instructions": sum(f.instructions for f in cms["loopnest"].loopnest.functions)}


def compare_model(path, input_shapes=None, run_repeat: int = 5) -> dict:
    """One ONNX model end to end with each generator (loopnest first, then LLVM): compile
    seconds and stages, per-node codegen milliseconds, run time at one thread, agreement with
    onnxruntime (conformance's rtol, the absolute floor scaled by the largest output)."""
    from compilerkit.measure import conformance as cf
    from compilerkit.oracle import ort_outputs, random_inputs
    from compilerkit.pipeline import compile_to

    feeds = random_inputs(str(path))
    shapes = input_shapes or {n: list(a.shape) for n, a in feeds}
    out = {"load_before": os.getloadavg()[0]}
    cms = {}
    for gen in ("loopnest", "llvm"):
        t, c = time.perf_counter(), time.process_time()
        cms[gen] = compile_to("native", str(path), codegen=gen, asm=False, input_shapes=shapes)
        out[f"{gen}_compile_s"] = time.perf_counter() - t
        out[f"{gen}_compile_cpu_s"] = time.process_time() - c
        out[f"{gen}_stage_s"] = dict(cms[gen].timings)
        out[f"{gen}_codegen_s"] = codegen_seconds(cms[gen])
    out["compile_speedup"] = out["llvm_compile_s"] / out["loopnest_compile_s"]
    out["compile_cpu_speedup"] = out["llvm_compile_cpu_s"] / out["loopnest_compile_cpu_s"]
    out["codegen_speedup"] = out["llvm_codegen_s"] / out["loopnest_codegen_s"]
    rep = cms["loopnest"].loopnest
    # per node function (its parallel chunks included) and per shared kernel
    timed = [f for f in rep.functions if f.codegen == "loopnest" and "_chunk_" not in f.name]
    per_node = [f.seconds * 1e3 for f in timed]
    per_cpu = [f.cpu_seconds * 1e3 for f in timed]
    out["per_function_cpu_ms"] = {"median": float(np.median(per_cpu)) if per_cpu else 0.0,
                                  "p90": float(np.percentile(per_cpu, 90)) if per_cpu else 0.0,
                                  "max": max(per_cpu, default=0.0)}
    out["loopnest_functions"] = len(per_node)
    out["per_function_ms"] = {"median": float(np.median(per_node)) if per_node else 0.0,
                              "p90": float(np.percentile(per_node, 90)) if per_node else 0.0,
                              "max": max(per_node, default=0.0)}
    out["fallback_nodes"] = {f.node: f.reason for f in rep.fallbacks()}
    arrays = [a for _, a in feeds]
    runs = _best_run(cms, arrays, run_repeat)
    out["loopnest_run_ms"], out["llvm_run_ms"] = runs["loopnest"] * 1e3, runs["llvm"] * 1e3
    out["run_ratio"] = runs["llvm"] / runs["loopnest"]
    ref = ort_outputs(str(path), dict(feeds))
    # A whole network's float error grows with its outputs' scale (ResNet-50's logits: 2e-4
    # against numbers near 10): the absolute floor is relative to the largest output, as the
    # real-model tests compare.
    scale = max([1.0] + [float(np.max(np.abs(r))) for r in ref if np.size(r)])
    for gen, cm in cms.items():
        ok, worst, _ = cf.compare(cm.run(*arrays, num_threads=1), ref, atol=cf.RTOL * scale)
        out[f"{gen}_matches_ort"], out[f"{gen}_max_error"] = bool(ok), worst
    out["load_after"] = os.getloadavg()[0]
    return out
