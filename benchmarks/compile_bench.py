"""compilerkit vs onnxruntime on real-weight models: agreement, compile time per stage, latency at
1 and 2 threads (same run, interleaved), and where the time goes (issue 12).

    python benchmarks/compile_bench.py                  # mlsys_datasets' real-weight set, full
    python benchmarks/compile_bench.py --smoke          # small sizes, five models (minutes)
    python benchmarks/compile_bench.py --models resnet50,mobilenet_v2 [--repeat 7]
    python benchmarks/compile_bench.py --light [--models squeezenet]   # onnx's light models
    python benchmarks/compile_bench.py --emulated [--models lenet,mlp]  # s390x/ppc64 rows
    python benchmarks/compile_bench.py --modern [--models vit,lstm]     # the modern set

Default mode, per model of `mlsys_datasets.REAL_WEIGHT_MODELS` (`real_weight_model(name,
size)`, built and cached on first use, never downloaded):

* agreement: max |compilerkit - onnxruntime| over each output, divided by that output's scale
  (max |onnxruntime|), worst output; goal <= 1e-3 (`AGREE`). Also whether the 2-thread answer is
  bit-identical to the 1-thread one.
* compile: wall seconds of `compilerkit.compile` and `CompiledModel.timings` (stage -> seconds),
  of the fastest of COMPILES compiles (`compile_s`; the first one is `first_compile_s`): on
  this shared virtual machine one compile of the same model varied by up to a third between
  runs minutes apart.
* latency: compilerkit and onnxruntime (CPU provider, intra-op threads n, inter-op 1,
  sequential execution) at n = 1 and 2, one call of each of the four per round, rounds
  interleaved, after one untimed call each; the ratio onnxruntime / compilerkit (> 1: faster
  than onnxruntime) uses the **best** of the rounds (the least disturbed by other processes on
  a shared machine); medians are kept too. Geometric means over the models at 1 and 2 threads.
* per-op profile of the three models with the lowest 1-thread ratio: compilerkit's seconds per
  ONNX node timed in context (`compilerkit.measure.profile.profile_nodes`) against onnxruntime's
  profiler (`ort_profile_nodes`), as totals per op type and the ten slowest nodes of each.

The thread API (`compile(..., num_threads=)`, `CompiledModel.run(..., num_threads=)`) is used
when compilerkit has it; otherwise the rows say "threads": "not supported" and the 2-thread
compilerkit column is empty.

--modern: per model of `mlsys_datasets.zoo.MODERN_MODELS` (transformers, recurrent nets, a 2D
U-Net, a detection head, quantised variants) on `zoo.sample_inputs`: op types, file size,
whether it compiles (else the error, first line), agreement with onnxruntime as
tests/compilerkit/test_modern_models.py judges it, one compile's seconds, and compilerkit
against onnxruntime at 1 and 2 threads, interleaved, with `compilerkit.measure.timing.best_of`
(wall clock: the 2-thread runs use threads other than the caller's).

Writes benchmarks/results/compile_bench.json: the default mode under "real_weight" (--smoke:
"real_weight_smoke"), --light under "rows" / "geomean_light_speed_ratio", --emulated under
"emulated_rows", --modern under "modern_rows" and "modern_summary"; each mode keeps the other
keys.
"""

import argparse
import gc
import inspect
import json
import math
import os
import platform
import statistics
import sys
import time
from functools import partial

import numpy as np

import compilerkit as ck
from compilerkit.measure import conformance as cf
from compilerkit.measure import profile as prof
from compilerkit.measure import timing
from compilerkit.oracle import ort_session

AGREE = 1e-3  # max error / output scale (issue 12)
FLOOR = 0.8  # the floor for the geometric-mean ratio at 1 and 2 threads
THREADS = (1, 2)
COMPILES = 2  # compiles per model; the fastest is reported (the first too)
SMOKE_MODELS = ("mobilenet_v2", "resnet50", "efficientnet_b0", "unet3d", "light_squeezenet")


def light_models():
    """name -> (kind, path): onnx's light models, then the committed mlsys_datasets models."""
    out = {name: ("light", cf.light_model_path(name)) for name in cf.light_models()}
    try:
        import mlsys_datasets
        for name in mlsys_datasets.ONNX_MODELS:
            out[name] = ("datasets", str(mlsys_datasets.onnx_path(name)))
    except Exception:  # noqa: BLE001 - the datasets package may not be built yet
        pass
    return out


models = light_models  # the name the emulated mode and older callers use


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="", help="comma-separated names (default: all)")
    ap.add_argument("-O", dest="opt", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=None,
                    help="timed rounds per model (default 7, --smoke 3)")
    ap.add_argument("--smoke", action="store_true",
                    help="small sizes and five models (the real-weight mode)")
    ap.add_argument("--profile", type=int, default=3,
                    help="profile the N models with the lowest 1-thread ratio (0: none)")
    ap.add_argument("--light", action="store_true",
                    help="onnx's light models and the committed datasets models, 1 thread")
    ap.add_argument("--emulated", action="store_true",
                    help="time the emulated s390x/ppc64 targets against the host instead")
    ap.add_argument("--modern", action="store_true",
                    help="the modern set (transformers, RNNs, U-Net, detection, quantised)")
    args = ap.parse_args(argv)
    wanted = [m for m in args.models.split(",") if m]
    repeat = args.repeat or (3 if args.smoke else 7)
    if args.modern:
        return modern(wanted, args.opt, repeat)
    if args.emulated:
        return emulated(set(wanted) or set(EMULATED_MODELS), args.opt, min(repeat, 3))
    if args.light:
        return light(set(wanted), args.opt, repeat)
    return real_weight(wanted, args.opt, repeat, args.smoke, args.profile)


# --------------------------------------------------------------------------- real weights


def thread_api() -> bool:
    """Whether compilerkit takes `num_threads` (compile and CompiledModel.run)."""
    return ("num_threads" in inspect.signature(ck.compile).parameters
            and "num_threads" in inspect.signature(ck.CompiledModel.run).parameters)


def relative_error(got, ref) -> float:
    """Worst over the outputs of max |got - ref| / max |ref| (float64)."""
    worst = 0.0
    for g, r in zip(got, ref, strict=True):
        r = np.asarray(r, np.float64)
        g = np.asarray(g, np.float64)
        if g.shape != r.shape:
            return math.inf
        if not r.size:
            continue
        scale = float(np.max(np.abs(r))) or 1.0
        err = float(np.max(np.abs(g - r))) / scale
        worst = max(worst, err if math.isfinite(err) else math.inf)
    return worst


SETTLE_S = 0.15  # idle time before each timed call (see `interleaved`)


def interleaved(calls: dict, repeat: int, budget_s: float = 120.0) -> dict:
    """{name: [seconds per round]}: one untimed call of each, then rounds of one call of each
    in turn, so a burst of load from other processes hits every contender alike. Before each
    timed call the process idles SETTLE_S: the previous contender's idle threads must not share
    the two cores with the next one's. onnxruntime's 2-thread pool spins for 30 to 100 ms after
    a run: MobileNetV2 on compilerkit's 2 threads right after it took 28 ms (best of 8), 42 ms
    after a 30 ms pause, 11.5 ms after 100 ms or more (libgomp's threads spin SPIN_COUNT pause
    instructions, compilerkit/runtime.py: milliseconds at most).
    Stops after `repeat` rounds, or after 3 once `budget_s` has passed (the largest models).
    The shared timer's `samples`, wall clock (the 2-thread runs use threads besides ours)."""
    return timing.samples(calls, repeat, "wall", before=partial(time.sleep, SETTLE_S),
                          budget_s=budget_s)


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def bench_model(name: str, size: str, opt: int, repeat: int, threads_ok: bool) -> dict:
    import mlsys_datasets

    path = str(mlsys_datasets.real_weight_model(name, size=size, progress=False))
    row = {"model": name, "size": size, "file_mb": round(os.path.getsize(path) / 2**20, 1),
           "opt_level": opt, "threads": "supported" if threads_ok else "not supported"}
    feeds = cf.random_inputs(path)
    arrays = [a for _, a in feeds]
    row["input_shapes"] = {n: list(a.shape) for n, a in feeds}
    sessions = {n: ort_session(path, n) for n in THREADS}
    ref = sessions[1].run(None, dict(feeds))
    kw = {"num_threads": None} if threads_ok else {}
    made, stages = [], []  # the latest compiled model; each compile's seconds per stage

    def compile_once():
        made.append(ck.compile(path, opt_level=opt, asm=False,
                               input_shapes=row["input_shapes"], **kw))
        stages.append(dict(made[-1].timings))

    def release():  # the previous model is freed before the next compile, untimed
        made.clear()
        gc.collect()
    try:
        seconds = timing.samples(compile_once, COMPILES, "wall", warmup=False, before=release)
    except Exception as error:  # noqa: BLE001 - one model's failure must not end the run
        row["error"] = f"{type(error).__name__}: {error}"
        return row
    cm = made[-1]
    fastest = min(range(COMPILES), key=seconds.__getitem__)
    row["first_compile_s"] = seconds[0]
    row["compile_s"], timings = seconds[fastest], stages[fastest]
    row["stage_s"] = {k: round(v, 4) for k, v in timings.items()}
    row["arena_mb"] = round(cm.arena_bytes / 2**20, 1)

    def ck_run(n, cm=cm):
        return cm.run(*arrays, num_threads=n) if threads_ok else cm.run(*arrays)

    got = ck_run(1)
    row["rel_error"] = relative_error(got, ref)
    row["agrees"] = row["rel_error"] <= AGREE
    calls = {"ck_1": partial(ck_run, 1), "ort_1": partial(sessions[1].run, None, dict(feeds)),
             "ort_2": partial(sessions[2].run, None, dict(feeds))}
    if threads_ok:
        got2 = ck_run(2)
        row["same_at_2_threads"] = all(a.tobytes() == b.tobytes()
                                       for a, b in zip(got, got2, strict=True))
        calls["ck_2"] = partial(ck_run, 2)
    times = interleaved(calls, repeat)
    row["rounds"] = len(times["ck_1"])
    for k, ts in times.items():
        row[f"{k}_best_ms"] = min(ts) * 1e3
        row[f"{k}_median_ms"] = statistics.median(ts) * 1e3
    for n in THREADS:
        ck_ms = row.get(f"ck_{n}_best_ms")
        row[f"ratio_{n}"] = row[f"ort_{n}_best_ms"] / ck_ms if ck_ms else None
        row[f"ratio_{n}_median"] = (row[f"ort_{n}_median_ms"] / row[f"ck_{n}_median_ms"]
                                    if ck_ms else None)
    del cm, sessions, calls, ck_run
    gc.collect()
    return row


def profile_model(name: str, size: str, opt: int, repeat: int) -> dict:
    import mlsys_datasets

    path = str(mlsys_datasets.real_weight_model(name, size=size, progress=False))
    feeds = cf.random_inputs(path)
    ck_rows = prof.profile_nodes(path, num_threads=1, repeat=repeat, feeds=feeds,
                                 opt_level=opt)
    ort_rows = prof.ort_profile_nodes(path, feeds, num_threads=1, repeat=repeat)
    untimed = next((r["seconds"] for r in ck_rows if r["op_type"] == "untimed"), 0.0)

    def brief(rows):
        return [{"node": r["node"], "op_type": r["op_type"], "ms": round(r["seconds"] * 1e3, 4),
                 "share": round(r["share"], 4)} for r in prof.top_nodes(rows, 10)]

    return {"model": name, "threads": 1, "statistic": f"median of {repeat} runs",
            "compilerkit_nodes_ms": round(sum(r["seconds"] for r in ck_rows
                                              if r["op_type"] != "untimed") * 1e3, 3),
            "compilerkit_untimed_ms": round(untimed * 1e3, 3),
            "onnxruntime_nodes_ms": round(sum(r["seconds"] for r in ort_rows) * 1e3, 3),
            "compilerkit_op_ms": {k: round(v * 1e3, 4)
                                  for k, v in prof.op_totals(ck_rows).items()},
            "onnxruntime_op_ms": {k: round(v * 1e3, 4)
                                  for k, v in prof.op_totals(ort_rows).items()},
            "compilerkit_top10": brief(ck_rows), "onnxruntime_top10": brief(ort_rows)}


def machine_load() -> dict:
    # libgomp's wait policy decides how parallel loops behave on a loaded machine: say it.
    env = {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")
           if k in os.environ}
    return {"cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()],
            "machine": platform.machine(), "python": platform.python_version(), "env": env}


def real_weight(wanted, opt: int, repeat: int, smoke: bool, n_profile: int):
    import mlsys_datasets
    from tqdm.auto import tqdm

    size = "small" if smoke else "full"
    names = wanted or list(SMOKE_MODELS if smoke else mlsys_datasets.REAL_WEIGHT_MODELS)
    unknown = [n for n in names if n not in mlsys_datasets.REAL_WEIGHT_MODELS]
    if unknown:
        sys.exit(f"unknown model(s) {', '.join(unknown)}; real-weight models: "
                 f"{', '.join(mlsys_datasets.REAL_WEIGHT_MODELS)}")
    threads_ok = thread_api()
    load_start = machine_load()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rows = []
    for name in tqdm(names, desc="compile_bench", disable=not sys.stderr.isatty()):
        row = bench_model(name, size, opt, repeat, threads_ok)
        rows.append(row)
        print(format_row(row), flush=True)
    ok = [r for r in rows if "error" not in r]
    geo = {str(n): geomean([r[f"ratio_{n}"] for r in ok]) for n in THREADS}
    geo_median = {str(n): geomean([r[f"ratio_{n}_median"] for r in ok]) for n in THREADS}
    slowest = sorted(ok, key=lambda r: r["ratio_1"])[:n_profile]
    profiles = []
    for r in slowest:
        try:
            profiles.append(profile_model(r["model"], size, opt, min(repeat, 5)))
        except Exception as error:  # noqa: BLE001 - keep the table even if a profile fails
            profiles.append({"model": r["model"], "error": f"{type(error).__name__}: {error}"})
    result = {
        "size": size, "started_utc": started, "opt_level": opt, "repeat": repeat,
        "threads": "supported" if threads_ok else "not supported",
        "statistic": "ratio = onnxruntime / compilerkit latency, best of the interleaved rounds "
                     "(medians kept as *_median)",
        "onnxruntime": {"version": _version("onnxruntime"), "intra_op_num_threads": "= n",
                        "inter_op_num_threads": 1, "execution_mode": "sequential"},
        "agreement": f"max |ck - ort| / max |ort| over each output, goal <= {AGREE}",
        "load": {"start": load_start, "end": machine_load(),
                 "note": "timings under load: a 2-core machine shared with other sessions; "
                         "ratios are measured interleaved in one run"},
        "rows": rows, "geomean_ratio": geo, "geomean_ratio_median": geo_median,
        "floor": FLOOR, "agree_goal": AGREE,
        "profiles": {"chosen": "lowest 1-thread ratio", "models": profiles},
    }
    print(f"\ngeomean onnxruntime / compilerkit over {len(ok)} models: "
          + ", ".join(f"{n} thread(s) {_fmt(geo[str(n)])}" for n in THREADS)
          + f"  (threads: {result['threads']}; load {load_start['loadavg']})")
    for p in profiles:
        print(format_profile(p))
    write_results({"real_weight_smoke" if smoke else "real_weight": result})
    return result


def _version(pkg):
    from importlib.metadata import version

    return version(pkg)


def _fmt(x, spec=".2f", unit="x"):
    return "-" if x is None else f"{x:{spec}}{unit}"


def format_row(r) -> str:
    if "error" in r:
        return f"{r['model']:22s} FAILED: {r['error'][:200]}"
    return (f"{r['model']:22s} compile {r['compile_s']:5.1f}s (first {r['first_compile_s']:4.1f})"
            f"  err {r['rel_error']:.1e}"
            f"  1t ck {r['ck_1_best_ms']:9.2f} ort {r['ort_1_best_ms']:9.2f} ms "
            f"{_fmt(r['ratio_1'])}  2t ck {_fmt(r.get('ck_2_best_ms'), '9.2f', '')} "
            f"ort {r['ort_2_best_ms']:9.2f} ms {_fmt(r['ratio_2'])}")


def format_profile(p) -> str:
    if "error" in p:
        return f"profile {p['model']}: FAILED {p['error'][:200]}"
    lines = [f"profile {p['model']} (1 thread, ms): compilerkit nodes "
             f"{p['compilerkit_nodes_ms']:.2f} (+{p['compilerkit_untimed_ms']:.2f} outside "
             f"nodes), onnxruntime nodes {p['onnxruntime_nodes_ms']:.2f}"]
    ops = list(dict.fromkeys(list(p["compilerkit_op_ms"])[:6] + list(p["onnxruntime_op_ms"])[:6]))
    for op in ops:
        lines.append(f"  {op:24s} ck {p['compilerkit_op_ms'].get(op, 0):9.2f}  "
                     f"ort {p['onnxruntime_op_ms'].get(op, 0):9.2f}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- light models


def light(wanted, opt: int, repeat: int):
    """The previous table: onnx's light models (weights from ConstantOfShape) and the committed
    datasets models, compile time and single-thread latency."""
    rows = []
    for name, (kind, path) in light_models().items():
        if wanted and name not in wanted:
            continue
        row = cf.time_model(path, opt_level=opt, repeat=repeat, name=name)
        row["kind"] = kind
        row["matches_ort"] = row.pop("matches")
        rows.append(row)
        print(f"{name:14s} compile {row['compile_s']:6.2f}s  ck {row['compilerkit_ms']:8.2f} ms"
              f"  ort {row['ort_ms']:8.2f} ms  ratio {row['speed_ratio']:5.2f}x"
              f"  ok={row['matches_ort']}", flush=True)
    geo = geomean([r["speed_ratio"] for r in rows if r["kind"] == "light"])
    if geo:
        print(f"\ngeomean speed vs onnxruntime over the light models: {geo:.3f}x")
    write_results({"rows": rows, "geomean_light_speed_ratio": geo})


def results_path() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                        "compile_bench.json")


def write_results(update, path=None):
    """Merge `update` into `path` (default benchmarks/results/compile_bench.json), keeping the
    other keys (each mode is written by a different run); other benchmarks call it too."""
    path = path or results_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = {}
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
    data.update(update)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, default=_json_default)
    os.replace(tmp, path)


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


# --------------------------------------------------------------------------- emulated targets

# Small models only: emulation runs ~20-40 M instructions/s (s390x vector code slower still).
EMULATED_MODELS = ("mlp", "gemm_mlp", "matmul_16x16", "conv_bn_pool", "lenet", "small_resnet")
EMULATED_TARGETS = ("s390x", "ppc64")


def emulated(wanted, opt, repeat):
    """Emulated time per inference relative to the host, same model, same -O level."""
    rows = []
    for name, (kind, path) in light_models().items():
        if name not in wanted:
            continue
        feeds = cf.random_inputs(path)
        shapes = {n: list(a.shape) for n, a in feeds}
        arrays = [a for _, a in feeds]
        host = ck.compile(path, opt_level=opt, input_shapes=shapes, asm=False)
        ref = host.run(*arrays)
        host_s = cf.best_seconds(partial(host.run, *arrays), 5)
        for target in EMULATED_TARGETS:
            t = time.perf_counter()
            cm = ck.compile(path, target=target, opt_level=opt, input_shapes=shapes, asm=False)
            compile_s = time.perf_counter() - t
            out = cm.run(*arrays)
            diff = max(float(np.max(np.abs(o.astype(np.float64) - r))) if o.size else 0.0
                       for o, r in zip(out, ref, strict=True))
            emu_s = cf.best_seconds(partial(cm.run, *arrays), repeat)
            rows.append(dict(model=name, kind=kind, target=target, opt_level=opt,
                             compile_s=compile_s, host_ms=host_s * 1e3, emulated_ms=emu_s * 1e3,
                             slowdown=emu_s / host_s, max_abs_diff_vs_host=diff,
                             bit_identical=all(o.tobytes() == r.tobytes()
                                               for o, r in zip(out, ref, strict=True))))
            print(f"{name:14s} {target:6s} host {host_s*1e3:8.3f} ms  emulated "
                  f"{emu_s*1e3:9.2f} ms  x{emu_s/host_s:8.0f}  max|diff| {diff:.1e}", flush=True)
            del cm
    write_results({"emulated_rows": rows})



# --------------------------------------------------------------------------- the modern set


def modern_agreement(name, got, feeds) -> dict:
    """Error against onnxruntime as tests/compilerkit/test_modern_models.py judges it: QDQ
    models against the graph as written (basic optimisation), within one output step; the
    rest within AGREE of the output's scale."""
    import onnx
    import onnxruntime as ort
    from mlsys_datasets import zoo

    path = str(zoo.onnx_path(name))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    qdq = zoo.QUANTISED.get(name, ("", ""))[1] == "static"
    if qdq:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    err = max(float(np.max(np.abs(np.asarray(g, np.float64) - r))) for g, r in
              zip(got, ref, strict=True))
    scale = max(float(np.max(np.abs(r))) for r in ref) or 1.0
    row = {"max_abs_error": err, "rel_error": err / scale}
    if qdq:
        model = onnx.load(path)
        inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
        made_by = {o: n for n in model.graph.node for o in n.output}
        step = float(np.max(inits[made_by[model.graph.output[0].name].input[1]]))
        row.update(output_step=step, error_steps=err / step, agrees=err <= step * (1 + 1e-6),
                   reference="onnxruntime, basic optimisation (QDQ as written)")
    else:
        row.update(agrees=err / scale <= AGREE, reference="onnxruntime")
    return row


def bench_modern(name: str, opt: int, repeat: int, threads_ok: bool) -> dict:
    from collections import Counter

    import onnx
    from mlsys_datasets import zoo

    path = str(zoo.onnx_path(name))
    entry = zoo.manifest()["models"][f"{name}.onnx"]
    model_ops = Counter(n.op_type for n in onnx.load(path).graph.node)
    feeds = zoo.sample_inputs(name)
    arrays = list(feeds.values())
    row = {"model": name, "made_by": entry["source"], "bytes": entry["size"],
           "nodes": sum(model_ops.values()), "ops": sorted(model_ops),
           "input_shapes": {k: list(v.shape) for k, v in feeds.items()}, "opt_level": opt}
    gc.collect()
    t = time.perf_counter()
    try:
        cm = ck.compile(path, opt_level=opt, asm=False, input_shapes=row["input_shapes"],
                        **({"num_threads": None} if threads_ok else {}))
        got = cm.run(*arrays)
    except Exception as error:  # noqa: BLE001 - one model's failure must not end the run
        row["compiles"] = False
        row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
        return row
    row["compiles"] = True
    row["compile_s"] = time.perf_counter() - t
    row["stage_s"] = {k: round(v, 4) for k, v in cm.timings.items()}
    row.update(modern_agreement(name, got, feeds))
    sessions = {n: ort_session(path, n) for n in THREADS}
    calls = {f"ort_{n}": partial(sessions[n].run, None, feeds) for n in THREADS}
    for n in THREADS if threads_ok else (1,):
        calls[f"ck_{n}"] = (partial(cm.run, *arrays, num_threads=n) if threads_ok
                            else partial(cm.run, *arrays))
    best = timing.best_of(calls, repeat, clock_name="wall")
    for k, v in best.items():
        row[f"{k}_ms"] = v * 1e3
    for n in THREADS:
        ck_ms = row.get(f"ck_{n}_ms")
        row[f"ratio_{n}"] = row[f"ort_{n}_ms"] / ck_ms if ck_ms else None
    del cm, sessions, calls
    gc.collect()
    return row


def format_modern(r) -> str:
    if not r["compiles"]:
        return f"{r['model']:22s} does not compile: {r['error'][:160]}"
    agree = f"{r['error_steps']:.2f} steps" if "error_steps" in r else f"{r['rel_error']:.1e}"
    return (f"{r['model']:22s} {r['nodes']:4d} nodes  compile {r['compile_s']:6.1f}s  "
            f"err {agree:>10s} {'ok' if r['agrees'] else 'DISAGREES'}  "
            f"1t ck {r['ck_1_ms']:8.3f} ort {r['ort_1_ms']:8.3f} ms {_fmt(r['ratio_1'])}  "
            f"2t ck {_fmt(r.get('ck_2_ms'), '8.3f', '')} ort {r['ort_2_ms']:8.3f} ms "
            f"{_fmt(r['ratio_2'])}")


def modern(wanted, opt: int, repeat: int):
    from mlsys_datasets import zoo

    names = wanted or list(zoo.MODERN_MODELS)
    unknown = [n for n in names if n not in zoo.MODERN_MODELS]
    if unknown:
        sys.exit(f"unknown model(s) {', '.join(unknown)}; the modern set: "
                 f"{', '.join(zoo.MODERN_MODELS)}")
    threads_ok = thread_api()
    load_start = timing.load()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rows = []
    for name in names:
        rows.append(bench_modern(name, opt, repeat, threads_ok))
        print(format_modern(rows[-1]), flush=True)
    ok = [r for r in rows if r["compiles"]]
    families = {"transformer": ("bert_encoder", "gpt_decoder", "vit"),
                "recurrent": ("lstm", "gru")}
    summary = {
        "started_utc": started, "opt_level": opt, "repeat": repeat,
        "threads": "supported" if threads_ok else "not supported",
        "statistic": "ms: best of `repeat` interleaved rounds (compilerkit.measure.timing."
                     "best_of, wall clock); ratio = onnxruntime / compilerkit (> 1: faster)",
        "compile": "one compile per model, wall seconds",
        "onnxruntime": {"version": _version("onnxruntime"), "intra_op_num_threads": "= n",
                        "inter_op_num_threads": 1, "execution_mode": "sequential",
                        "graph_optimization": "all (the timed sessions)"},
        "load": {"start": load_start, "end": timing.load(), "cpus": os.cpu_count(),
                 "note": "timings under load: a 2-core machine shared with other sessions; "
                         "the contenders are interleaved round by round"},
        "compiled": f"{len(ok)} of {len(rows)}",
        "agree": sum(bool(r.get("agrees")) for r in ok),
        "geomean_ratio": {str(n): geomean([r[f"ratio_{n}"] for r in ok]) for n in THREADS},
        "geomean_ratio_by_family": {
            fam: {str(n): geomean([r[f"ratio_{n}"] for r in ok if r["model"] in members])
                  for n in THREADS} for fam, members in families.items()},
    }
    print(f"\n{summary['compiled']} compile, {summary['agree']} agree; geomean onnxruntime / "
          f"compilerkit: " + ", ".join(f"{n} thread(s) {_fmt(summary['geomean_ratio'][str(n)])}"
                                        for n in THREADS)
          + f"  (load {load_start} -> {summary['load']['end']})")
    write_results({"modern_rows": rows, "modern_summary": summary})
    return rows


if __name__ == "__main__":
    main()
