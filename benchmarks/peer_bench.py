"""compilerkit against the strongest CPU engines, side by side: onnxruntime, OpenVINO, IREE and
TVM on the real-weight CNN set, the 3D U-Net and a small modern set, at 1 and 2 threads.

    python benchmarks/peer_bench.py                     # the full set (tens of minutes)
    python benchmarks/peer_bench.py --quick             # smoke check: one small model, 3 rounds
    python benchmarks/peer_bench.py --models resnet50,encoder --engines compilerkit,openvino
    python benchmarks/peer_bench.py --out /tmp/peer.json   # elsewhere than benchmarks/results/

Engines (`ENGINES`): `compilerkit` (the default pipeline: `conv_algorithm="auto"`, Winograd
F(2,3) where it pays), `compilerkit-auto` (`conv_algorithm="auto-f4"`: also F(4,3), faster on
3-D nets, more rounding error), `onnxruntime` (CPU provider, intra-op threads n, inter-op 1),
`openvino` (CPU plugin, `INFERENCE_NUM_THREADS` n, `INFERENCE_PRECISION_HINT=f32`: it would
run bfloat16 on CPUs that have it, latency hint, one stream, its own pinning off), `iree`
(`iree-import-onnx`, upgraded to opset 17 where older, `llvm-cpu` for the host CPU; 1 thread:
the `local-sync` driver, n: `local-task` with n task groups) and `tvm` (Relax's ONNX
frontend, the "zero" pipeline, LLVM for the host CPU, no tuning; its thread pool set to n).
The peers are benchmark-only dependencies, the `peers` extra (`pip install -e .[peers]`); one
that is not installed is listed under "absent" with the reason, and one that cannot compile a
model under "skipped".

Models: the CNN set and the 3D U-Net are `mlsys_datasets.real_weight_model(name, "full")`
(built and cached on first use, never downloaded; batch 1). The modern set is built here from
seeded weights with `onnx.helper` (`MODERN`): a BERT-style encoder block, an attention block and
an LSTM; where compilerkit cannot compile one, the reason is recorded and the peers still run.

How it measures:
- the process is pinned (`os.sched_setaffinity`) to the same two cores before any engine
  starts a thread, so every engine's threads share them alike; 1-thread runs use one of the two;
- compile time: wall seconds from the ONNX file to a runnable object, in this process (the
  engine's import done before): compilerkit's `compile`, an onnxruntime session, OpenVINO's
  `compile_model`, IREE's import + compile + load, TVM's import + build + VM. compilerkit and
  TVM compile once for both thread counts (threads are a call-time setting), IREE compiles once
  and loads per count;
- per model and thread count, the engines are called in rounds, in a new random order each
  round, one call each, after an untimed warm-up; before each timed call the process idles
  `--gap` seconds (onnxruntime's and OpenVINO's pools spin for tens of milliseconds after a run
  and would take the cores from the engine called next; TVM's pool neither spins nor binds
  its workers, `_quiet_tvm_pool`); with `--steady` an untimed call of the same engine comes
  right after the gap, so the timed call finds the cores as a loop of calls leaves them (after
  an idle gap a busy virtual machine ran every engine up to 4x slower on its first call); an
  engine slower than `--budget` seconds over its rounds gets fewer (at least one);
- `latency_s` is the best call, `median_s` the median; every engine's output is checked against
  onnxruntime's (`rel_err`: max |engine - onnxruntime| / max |onnxruntime|).

Writes benchmarks/results/peer_bench.json: {"results": {model: {"t1": {engine: {"latency_s",
"median_s", "compile_s", "calls", "rel_err"}}, "t2": {...}}}, "machine", "versions", "load"
(load average before and after), "machine_ceiling_t2" ({model: what two threads gained over one
on perfectly parallel arithmetic just before and after its 2-thread rounds,
compilerkit.measure.timing.parallel_ceiling}), "absent", "skipped", "settings"} and prints the
table.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ENGINES = ("compilerkit", "compilerkit-auto", "onnxruntime", "openvino", "iree", "tvm")
CNN = ("squeezenet", "mobilenet_v2", "efficientnet_b0", "densenet121", "resnet50")
VOLUME = ("unet3d",)
MODERN = ("encoder", "attention", "lstm")
# real_weight_model's names for the models whose table name is shorter
REAL_NAMES = {"squeezenet": "light_squeezenet", "densenet121": "light_densenet121"}
QUICK_MODELS = ("small_resnet",)  # a committed ONNX file: no build, every engine compiles it
THREADS = (1, 2)
RESULTS = Path(__file__).resolve().parent / "results" / "peer_bench.json"


# --------------------------------------------------------------------------- the models


def _modern(name: str):
    """The modern set, seeded, opset 17: `encoder` (LayerNormalization, multi-head attention,
    an Erf GELU feed-forward, residuals), `attention` (the same attention without LayerNorm and
    GELU), `lstm` (an ONNX LSTM over 32 steps and a classifier)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    N = helper.make_node
    inits = []

    def w(name, *shape, scale=None):
        s = scale if scale is not None else 1 / math.sqrt(shape[0])
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * s)
                                             .astype(np.float32), name))
        return name

    def const(name, values, dtype=np.int64):
        inits.append(numpy_helper.from_array(np.asarray(values, dtype=dtype), name))
        return name

    seq, d, heads = 64, 128, 4
    nodes = []
    if name in ("encoder", "attention"):
        x_shape = [1, seq, d]
        h = "x"
        if name == "encoder":
            nodes.append(N("LayerNormalization", ["x", w("ln1_g", d, scale=0.1),
                                                  w("ln1_b", d, scale=0.1)], ["ln1"], axis=-1))
            h = "ln1"
        const("heads_shape", [1, seq, heads, d // heads])
        const("back_shape", [1, seq, d])
        for p in "qkv":
            nodes += [N("MatMul", [h, w(f"w{p}", d, d)], [f"{p}0"]),
                      N("Reshape", [f"{p}0", "heads_shape"], [f"{p}1"]),
                      N("Transpose", [f"{p}1"], [f"{p}h"],
                        perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
        inits.append(numpy_helper.from_array(np.float32(1 / math.sqrt(d // heads)), "scale"))
        nodes += [N("MatMul", ["qh", "kh"], ["s0"]), N("Mul", ["s0", "scale"], ["s1"]),
                  N("Softmax", ["s1"], ["p"], axis=-1), N("MatMul", ["p", "vh"], ["o0"]),
                  N("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
                  N("Reshape", ["o1", "back_shape"], ["o2"]),
                  N("MatMul", ["o2", w("wo", d, d)], ["o3"]), N("Add", ["x", "o3"], ["r1"])]
        if name == "encoder":
            inits.append(numpy_helper.from_array(np.float32(1 / math.sqrt(2)), "rsqrt2"))
            inits.append(numpy_helper.from_array(np.float32(0.5), "half"))
            inits.append(numpy_helper.from_array(np.float32(1.0), "one"))
            nodes += [N("LayerNormalization", ["r1", w("ln2_g", d, scale=0.1),
                                               w("ln2_b", d, scale=0.1)], ["ln2"], axis=-1),
                      N("MatMul", ["ln2", w("w1", d, 4 * d)], ["f0"]),
                      N("Mul", ["f0", "rsqrt2"], ["g0"]), N("Erf", ["g0"], ["g1"]),
                      N("Add", ["g1", "one"], ["g2"]), N("Mul", ["f0", "half"], ["g3"]),
                      N("Mul", ["g3", "g2"], ["g4"]),
                      N("MatMul", ["g4", w("w2", 4 * d, d)], ["f1"]),
                      N("Add", ["r1", "f1"], ["y"])]
        else:
            nodes.append(N("Identity", ["r1"], ["y"]))
        y_shape = [1, seq, d]
    elif name == "lstm":
        steps, inp, hidden, classes = 32, 64, 128, 10
        x_shape = [steps, 1, inp]
        nodes += [N("LSTM", ["x", w("W", 1, 4 * hidden, inp, scale=0.1),
                             w("R", 1, 4 * hidden, hidden, scale=0.1),
                             w("B", 1, 8 * hidden, scale=0.1)], ["", "h"], hidden_size=hidden),
                  N("Reshape", ["h", const("flat", [1, hidden])], ["h1"]),
                  N("MatMul", ["h1", w("wc", hidden, classes)], ["y"])]
        y_shape = [1, classes]
    else:
        raise ValueError(f"unknown modern model {name!r}; available: {', '.join(MODERN)}")
    graph = helper.make_graph(nodes, name,
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def model_path(name: str, size: str, workdir: Path) -> str:
    """The ONNX file of a table model: a real-weight model, the modern set (written into
    workdir) or a committed file of mlsys_datasets (the quick check)."""
    import onnx

    if name in MODERN:
        path = workdir / f"{name}.onnx"
        onnx.save(_modern(name), path)
        return str(path)
    if name in CNN or name in VOLUME:
        from mlsys_datasets import real_weight_model

        return str(real_weight_model(REAL_NAMES.get(name, name), size, progress=False))
    from mlsys_datasets import onnx_path

    return str(onnx_path(name))


def input_of(path: str) -> tuple[str, np.ndarray, int]:
    """The first graph input's name, a seeded array for it (free dimensions 1), the opset."""
    import onnx

    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    inp = next(i for i in m.graph.input if i.name not in inits)
    shape = [d.dim_value if d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    return inp.name, np.random.default_rng(0).standard_normal(shape).astype(np.float32), opset


# --------------------------------------------------------------------------- the engines
# Each engine: `version()` (raises ImportError when absent) and `build(path, name, x, opset,
# threads, cache)` -> a function x -> first output as a numpy array, plus its compile seconds.
# `cache` (one dict per engine and model) keeps what both thread counts share.


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


class CompilerKit:
    def __init__(self, conv_algorithm=None):
        self.conv_algorithm = conv_algorithm

    def version(self):
        import compilerkit  # noqa: F401

        return "this checkout"

    def build(self, path, name, x, opset, threads, cache):
        import compilerkit as ck

        if "cm" not in cache:
            kw = {"conv_algorithm": self.conv_algorithm} if self.conv_algorithm else {}
            # free dimensions (a dynamic batch) fixed as the other engines see them: 1
            kw["input_shapes"] = {name: list(x.shape)}
            cache["cm"], cache["compile_s"] = _timed(lambda: ck.compile(path, asm=False, **kw))
        cm = cache["cm"]
        return (lambda a: cm.run(a, num_threads=threads)[0]), cache["compile_s"]


class OnnxRuntime:
    def version(self):
        import onnxruntime

        return onnxruntime.__version__

    def build(self, path, name, x, opset, threads, cache):
        import onnxruntime as ort

        def make():
            o = ort.SessionOptions()
            o.intra_op_num_threads, o.inter_op_num_threads = threads, 1
            o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])

        sess, seconds = _timed(make)
        return (lambda a: sess.run(None, {name: a})[0]), seconds


class OpenVINO:
    def version(self):
        import openvino

        return openvino.__version__

    def build(self, path, name, x, opset, threads, cache):
        import openvino as ov

        core = cache.setdefault("core", ov.Core())
        config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32",
                  "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1,
                  "ENABLE_CPU_PINNING": False}
        compiled, seconds = _timed(lambda: core.compile_model(path, "CPU", config))
        request = compiled.create_infer_request()
        out = compiled.output(0)
        return (lambda a: request.infer({0: a})[out]), seconds


class IREE:
    def version(self):
        from importlib.metadata import version

        import iree.compiler  # noqa: F401
        import iree.runtime  # noqa: F401

        return version("iree-base-compiler")

    def build(self, path, name, x, opset, threads, cache):
        import iree.compiler as ic
        import iree.runtime as rt
        import onnx

        if "vmfb" not in cache:
            def compile_():
                with tempfile.TemporaryDirectory() as d:
                    mlir = os.path.join(d, "model.mlir")
                    # Older opsets first go to 17: the importer refuses some opset-9 models.
                    cmd = [sys.executable, "-m", "iree.compiler.tools.import_onnx", path,
                           "-o", mlir] + (["--opset-version", "17"] if opset < 17 else [])
                    r = subprocess.run(cmd, capture_output=True, text=True)
                    if r.returncode:
                        raise RuntimeError(f"iree-import-onnx: {r.stderr.strip()[-400:]}")
                    return ic.compile_file(mlir, target_backends=["llvm-cpu"],
                                           extra_args=["--iree-llvmcpu-target-cpu=host"])
            cache["vmfb"], cache["compile_s"] = _timed(compile_)
        graph_name = onnx.load(path, load_external_data=False).graph.name

        def load():
            # IREE creates a driver once per process, its task topology with it: 1 thread is
            # the local-sync driver (on the calling thread), n the local-task driver, its
            # group count set before its first use (this script asks for one n > 1 only).
            if threads == 1:
                config = rt.Config("local-sync")
            else:
                rt.flags.parse_flags(f"--task_topology_group_count={threads}")
                config = rt.Config("local-task")
            ctx = rt.SystemContext(config=config)
            ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, cache["vmfb"]))
            return ctx.modules.module[graph_name]

        fn, seconds = _timed(load)

        def call(a):
            y = fn(a)
            return (y[0] if isinstance(y, (list, tuple)) else y).to_host()
        return call, cache["compile_s"] + seconds


def _quiet_tvm_pool() -> None:
    """Before TVM is first imported: its pool's workers neither spin between calls nor bind to
    cores. By default they spin on a core they are bound to, and every other engine's two
    threads then had one core's time (the machine's ceiling read 0.85-1.13x in this process,
    2.0x outside it): compilerkit and onnxruntime ran two threads 1.8-2x slower than one."""
    os.environ.setdefault("TVM_THREAD_POOL_SPIN_COUNT", "0")
    os.environ.setdefault("TVM_BIND_THREADS", "0")


class TVM:
    threads = None  # the count TVM's pool was last set to

    def version(self):
        _quiet_tvm_pool()
        import tvm

        return tvm.__version__

    def build(self, path, name, x, opset, threads, cache):
        _quiet_tvm_pool()
        import onnx
        import tvm
        from tvm import relax
        from tvm.relax.frontend.onnx import from_onnx

        if "vm" not in cache:
            def compile_():
                mod = from_onnx(onnx.load(path), shape_dict={name: list(x.shape)},
                                keep_params_in_input=False)
                target = tvm.target.Target({"kind": "llvm",
                                            "mcpu": tvm.target.codegen.llvm_get_system_cpu()})
                ex = tvm.compile(relax.get_pipeline("zero")(mod), target=target)
                return relax.VirtualMachine(ex, tvm.cpu())
            cache["vm"], cache["compile_s"] = _timed(compile_)
        vm = cache["vm"]
        config = tvm.get_global_func("runtime.config_threadpool")

        def call(a):
            # TVM's pool is process-wide: set when the count changes (it restarts its threads)
            if TVM.threads != threads:
                config(0, threads)
                TVM.threads = threads
            y = vm["main"](tvm.runtime.tensor(a))
            return (y if hasattr(y, "numpy") else y[0]).numpy()
        return call, cache["compile_s"]


PEERS = {"compilerkit": CompilerKit(), "compilerkit-auto": CompilerKit("auto-f4"),
         "onnxruntime": OnnxRuntime(), "openvino": OpenVINO(), "iree": IREE(), "tvm": TVM()}


def installed(engines) -> tuple[dict, dict]:
    """(engine -> version) for the engines that import, (engine -> reason) for the others."""
    versions, absent = {}, {}
    for e in engines:
        try:
            versions[e] = PEERS[e].version()
        except ImportError as err:
            absent[e] = f"not installed ({err}); pip install -e .[peers]"
    return versions, absent


# --------------------------------------------------------------------------- measuring


def pin(cores: int = 2) -> list[int]:
    """Pin this process to its first `cores` allowed CPUs (threads started later inherit it)."""
    allowed = sorted(os.sched_getaffinity(0))[:cores]
    os.sched_setaffinity(0, allowed)
    return allowed


def rel_err(y, ref) -> float:
    y = np.asarray(y, dtype=np.float64).reshape(ref.shape)
    scale = float(np.max(np.abs(ref))) or 1.0
    return float(np.max(np.abs(y - ref))) / scale


def measure(fns: dict, x, rounds: int, budget: float, gap: float, seed: int,
            steady: bool = False) -> dict:
    """Call every engine's function once per round, in a new random order each round, after a
    warm-up call; an engine whose warm-up shows it would pass `budget` seconds over the rounds
    is called fewer times (at least once); `steady`: an untimed call of the same engine just
    before each timed one, after the gap. Returns engine -> list of call seconds: the shared
    timer's `samples`, wall clock (the engines' pools run on threads besides ours)."""
    from compilerkit.measure import timing  # here, as the engines are: after the pinning

    warm = {}
    for e, fn in fns.items():
        _, warm[e] = _timed(lambda fn=fn: fn(x))
    calls = {e: max(1, min(rounds, int(budget / max(warm[e], 1e-9)))) for e in fns}
    # the gap: other engines' pools stop spinning
    return timing.samples({e: (lambda fn=fn: fn(x)) for e, fn in fns.items()}, calls, "wall",
                          shuffle=seed, warmup=False, before=lambda: time.sleep(gap),
                          steady=steady)


def bench_model(model, engines, size, rounds, budget, gap, workdir, steady=False):
    """One model: {"t1": {...}, "t2": {...}} and engine -> reason for what was skipped."""
    path = model_path(model, size, workdir)
    name, x, opset = input_of(path)
    ref = PEERS["onnxruntime"].build(path, name, x, opset, 1, {})[0](x)
    ref = np.asarray(ref)
    caches = {e: {} for e in engines}
    row, skipped = {}, {}
    for threads in THREADS:
        fns, compile_s, errs = {}, {}, {}
        for e in engines:
            if e in skipped:
                continue
            try:
                fn, compile_s[e] = PEERS[e].build(path, name, x, opset, threads, caches[e])
                errs[e] = rel_err(fn(x), ref)
                fns[e] = fn
            except Exception as err:  # noqa: BLE001 (a peer's failure is data, not a crash)
                skipped[e] = f"{type(err).__name__}: {str(err).strip()[:300]}"
        from compilerkit.measure.timing import parallel_ceiling  # after the pinning, as above

        ceiling = [parallel_ceiling()] if threads > 1 else None
        times = measure(fns, x, rounds, budget, gap, seed=threads, steady=steady)
        if ceiling:   # what two threads could gain at all, just before and after the rounds
            row["machine_ceiling_t2"] = [round(ceiling[0], 3), round(parallel_ceiling(), 3)]
        row[f"t{threads}"] = {e: {"latency_s": min(ts), "median_s": statistics.median(ts),
                                  "compile_s": round(compile_s[e], 4), "calls": len(ts),
                                  "rel_err": float(f"{errs[e]:.3g}")}
                              for e, ts in times.items()}
        del fns
        gc.collect()
    return row, skipped


def machine() -> dict:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu or platform.processor(), "machine": platform.machine(),
            "cores": os.cpu_count(), "python": platform.python_version()}


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def summary(results: dict, engines) -> dict:
    """Per thread count and engine: the geometric mean over the models of onnxruntime's time
    over the engine's (> 1: faster than onnxruntime), from best and from median calls; and
    compilerkit's median 2-thread call over its best 1-thread call, per model."""
    out = {}
    for t in ("t1", "t2"):
        for stat in ("latency_s", "median_s"):
            out[f"{t}_{stat}_ort_over_engine"] = {
                e: geomean([r[t]["onnxruntime"][stat] / r[t][e][stat] for r in results.values()
                            if e in r.get(t, {}) and "onnxruntime" in r.get(t, {})])
                for e in engines}
    out["t2_median_over_t1_best"] = {
        e: {m: round(r["t2"][e]["median_s"] / r["t1"][e]["latency_s"], 3)
            for m, r in results.items() if e in r.get("t1", {}) and e in r.get("t2", {})}
        for e in engines}
    return out


def table(doc: dict) -> str:
    """Markdown: per model, each engine's best ms at 1 and 2 threads, and the geomeans."""
    engines = [e for e in ENGINES if e in doc["versions"]]
    lines = ["| model | threads | " + " | ".join(engines) + " |",
             "|---|---|" + "---|" * len(engines)]
    for m, r in doc["results"].items():
        for t in ("t1", "t2"):
            cells = []
            for e in engines:
                c = r.get(t, {}).get(e)
                cells.append("—" if c is None else
                             f"{c['latency_s'] * 1e3:.1f} ({c['median_s'] * 1e3:.1f})")
            lines.append(f"| {m} | {t[1]} | " + " | ".join(cells) + " |")
    s = doc["summary"]
    for t in ("t1", "t2"):
        g = s[f"{t}_latency_s_ort_over_engine"]
        lines.append(f"| **geomean ort/engine** | {t[1]} | " + " | ".join(
            "—" if g.get(e) is None else f"**{g[e]:.2f}**" for e in engines) + " |")
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke check: {', '.join(QUICK_MODELS)}, 3 rounds, a short gap")
    ap.add_argument("--models", help="comma-separated (default: CNN set, unet3d, modern set)")
    ap.add_argument("--engines", help=f"comma-separated subset of {', '.join(ENGINES)}")
    ap.add_argument("--size", default="full", choices=("small", "full"),
                    help="real-weight model size (default full)")
    ap.add_argument("--rounds", type=int, help="rounds per model and thread count (default 15)")
    ap.add_argument("--budget", type=float, default=20.0,
                    help="seconds of calls per engine, model and thread count before an engine "
                         "gets fewer rounds (default 20)")
    ap.add_argument("--gap", type=float, help="idle seconds before each timed call (0.1)")
    ap.add_argument("--steady", action="store_true",
                    help="an untimed call of the same engine right before each timed one")
    ap.add_argument("--skip", default="",
                    help="model:engine pairs left out of this run (comma-separated), recorded "
                         "under 'skipped', e.g. unet3d:tvm where one call takes minutes")
    ap.add_argument("--out", help=f"JSON path (default {RESULTS})")
    args = ap.parse_args(argv)
    models = (args.models.split(",") if args.models else
              list(QUICK_MODELS) if args.quick else list(CNN + VOLUME + MODERN))
    engines = args.engines.split(",") if args.engines else list(ENGINES)
    bad = [e for e in engines if e not in ENGINES]
    if bad:
        ap.error(f"unknown engine(s) {', '.join(bad)}; choose from {', '.join(ENGINES)}")
    if "onnxruntime" not in engines:
        engines.append("onnxruntime")  # the reference every output is checked against
    rounds = args.rounds or (3 if args.quick else 15)
    gap = args.gap if args.gap is not None else (0.02 if args.quick else 0.1)
    if rounds < 1 or gap < 0 or args.budget <= 0:
        ap.error("--rounds must be >= 1, --gap >= 0 and --budget > 0")
    left_out = {}
    for pair in filter(None, args.skip.split(",")):
        m, _, e = pair.partition(":")
        if e not in ENGINES or e == "onnxruntime":
            ap.error(f"--skip {pair!r}: give model:engine, engine one of the peers or "
                     "compilerkit variants (onnxruntime is the reference)")
        left_out.setdefault(m, []).append(e)
    cores = pin(2)
    versions, absent = installed(engines)
    live = [e for e in engines if e in versions]
    doc = {"benchmark": "peer_bench", "machine": {**machine(), "pinned_to": cores},
           "versions": versions, "absent": absent, "skipped": {}, "results": {},
           "machine_ceiling_t2": {},
           "settings": {"rounds": rounds, "budget_s": args.budget, "gap_s": gap,
                        "steady": args.steady,
                        "size": args.size, "quick": args.quick},
           "load": {"before": [round(v, 2) for v in os.getloadavg()]}}
    for e, why in absent.items():
        print(f"{e}: absent ({why})", flush=True)
    out = Path(args.out) if args.out else RESULTS
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as workdir:
        for m in models:
            print(f"{m} ...", flush=True)
            row, skipped = bench_model(m, [e for e in live if e not in left_out.get(m, ())],
                                       args.size, rounds, args.budget, gap, Path(workdir),
                                       steady=args.steady)
            skipped.update({e: "left out of this run (--skip)" for e in left_out.get(m, ())
                            if e in live})
            ceiling = row.pop("machine_ceiling_t2", None)
            if ceiling:
                doc["machine_ceiling_t2"][m] = ceiling
            doc["results"][m] = row
            if skipped:
                doc["skipped"][m] = skipped
                for e, why in skipped.items():
                    print(f"  {e} skipped: {why}", flush=True)
            # after every model, so that an interrupted run keeps what it measured
            doc["load"]["after"] = [round(v, 2) for v in os.getloadavg()]
            doc["summary"] = summary(doc["results"], live)
            out.write_text(json.dumps(doc, indent=1) + "\n")
    print(table(doc))
    print(f"load average before {doc['load']['before']}, after {doc['load']['after']}; "
          f"wrote {out}")
    return doc


if __name__ == "__main__":
    main()
