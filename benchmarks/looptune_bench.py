"""LoopTune over Kernel IR (issue 14, item 2), JSON in benchmarks/results/looptune_bench.json.

    python benchmarks/looptune_bench.py [--smoke] [--budget 60] [--shapes 0,2]

Per held-out matmul shape (compilerkit/tune/shapes.py TEST_SHAPES, never trained on; `--shapes`
picks some by index and writes looptune_bench_subset.json): the shipped policy's tuning
(seconds, GFLOP/s; "policy": `agent="policy"`, its rollout then its best few moves measured
for POLICY_BUDGET_S seconds; "policy_rollout": LoopTune's greedy rollout alone), greedy,
random and beam search with `--budget` seconds each (beam: width 16, depth 15, stopped at the
budget: the paper's 60 s reference; every agent measures with its own empty cache), the
untuned nest through loopnest
(LoopNest's default: one micro-kernel call over the whole product), the LLVM -O2 i-j-k nest,
and numpy's BLAS on one thread. After tuning, every schedule's code and numpy are timed
interleaved, best of `--repeat`, so the ratios come from the same moments of this run. The
load average is recorded: on a shared machine every time is an upper bound.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # numpy's BLAS on one thread, as our code runs

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from compilerkit.measure.timing import best_of  # noqa: E402
from compilerkit.tune import Measurer, Task, tune_task  # noqa: E402
from compilerkit.tune.shapes import SMOKE_TEST_SHAPES, TEST_SHAPES  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "results", "looptune_bench.json")
POLICY_BUDGET_S = 3.0  # the tuning budget per nest


def _best(fns: dict, repeat: int) -> dict:
    return best_of(fns, repeat, "wall")


def bench_shape(shape, budget: float, repeat: int) -> dict:
    import compilerkit

    task = Task.matmul(*shape)
    # Each agent measures with its own empty cache, so its tuning seconds are its own.
    results = {"policy": tune_task(task, "policy", budget_s=POLICY_BUDGET_S,
                                   measurer=Measurer()),
               "policy_rollout": tune_task(task, "policy", measurer=Measurer(), search=False)}
    for agent, opts in (("greedy", {}), ("random", {}), ("beam", {"width": 16, "depth": 15})):
        results[agent] = tune_task(task, agent, budget_s=budget, measurer=Measurer(), **opts)
    measurer = Measurer()
    a, b = task.arrays()
    o2 = compilerkit.compile(task.model, opt_level=2)
    t = time.perf_counter()
    o2.run(a, b, num_threads=1)
    o2_s = time.perf_counter() - t  # seconds per run: one run is plenty at this speed
    fns = {"numpy": lambda: a @ b}
    cms = {"default": measurer.compile(task, task.default())}
    for agent, r in results.items():
        cms[agent] = measurer.compile(task, r.schedule)
    for k, cm in cms.items():
        fns[k] = lambda cm=cm: cm.run(a, b, num_threads=1)
    want = a.astype(np.float64) @ b.astype(np.float64)
    err = max(float(np.max(np.abs(cm.run(a, b, num_threads=1)[0] - want)))
              for cm in cms.values())
    secs = _best(fns, repeat)
    g = {k: task.flops / s / 1e9 for k, s in secs.items()}
    g["llvm_O2_ijk"] = task.flops / o2_s / 1e9
    row = {"shape": list(shape), "gflops": g, "max_abs_error": err,
           "tune_seconds": {k: r.tune_seconds for k, r in results.items()},
           "schedules": {k: r.schedule.describe() for k, r in results.items()},
           "policy_actions": results["policy"].actions,
           "policy_vs_numpy": g["policy"] / g["numpy"],
           "policy_vs_O2_ijk": g["policy"] / g["llvm_O2_ijk"],
           "policy_vs_beam": g["policy"] / g["beam"],
           "policy_rollout_vs_numpy": g["policy_rollout"] / g["numpy"],
           "policy_rollout_vs_beam": g["policy_rollout"] / g["beam"],
           "speedup_over_default": {k: g[k] / g["default"] for k in results},
           }
    print(f"{'x'.join(map(str, shape)):14s} numpy {g['numpy']:5.1f}  O2 {g['llvm_O2_ijk']:5.2f}"
          f"  default {g['default']:5.1f}  policy {g['policy']:5.1f} "
          f"({results['policy'].tune_seconds:.2f} s)  rollout {g['policy_rollout']:5.1f}  greedy "
          f"{g['greedy']:5.1f}  random "
          f"{g['random']:5.1f}  beam {g['beam']:5.1f} GFLOP/s", flush=True)
    return row


def geomean(xs):
    return float(np.exp(np.mean(np.log(xs))))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="two small shapes, 5 s searches")
    p.add_argument("--budget", type=float, default=None, help="search seconds (60; smoke 5)")
    p.add_argument("--repeat", type=int, default=None)
    p.add_argument("--shapes", default=None, help="indices into TEST_SHAPES, e.g. 0,2,5")
    args = p.parse_args(argv)
    shapes = SMOKE_TEST_SHAPES if args.smoke else TEST_SHAPES
    if args.shapes:
        shapes = [shapes[int(i)] for i in args.shapes.split(",")]
    budget = args.budget or (5.0 if args.smoke else 60.0)
    repeat = args.repeat or (3 if args.smoke else 7)
    load = os.getloadavg()
    rows = [bench_shape(s, budget, repeat) for s in tqdm(shapes, desc="shapes")]
    summary = {
        "policy_vs_numpy_geomean": geomean([r["policy_vs_numpy"] for r in rows]),
        "policy_vs_numpy_min": min(r["policy_vs_numpy"] for r in rows),
        "policy_vs_O2_ijk_min": min(r["policy_vs_O2_ijk"] for r in rows),
        "policy_vs_beam_geomean": geomean([r["policy_vs_beam"] for r in rows]),
        "policy_vs_beam_min": min(r["policy_vs_beam"] for r in rows),
        "policy_speedup_over_default_geomean": geomean(
            [r["speedup_over_default"]["policy"] for r in rows]),
        "beam_speedup_over_default_geomean": geomean(
            [r["speedup_over_default"]["beam"] for r in rows]),
        "policy_tune_seconds_max": max(r["tune_seconds"]["policy"] for r in rows),
        "policy_rollout_vs_numpy_min": min(r["policy_rollout_vs_numpy"] for r in rows),
        "policy_rollout_vs_beam_min": min(r["policy_rollout_vs_beam"] for r in rows),
    }
    summary["goals"] = {
        "policy >= 0.8x numpy (every shape)": bool(summary["policy_vs_numpy_min"] >= 0.8),
        "policy >= 3x -O2 i-j-k (every shape)": bool(summary["policy_vs_O2_ijk_min"] >= 3),
        "policy within 15% of beam (every shape)": bool(summary["policy_vs_beam_min"] >= 0.85),
        "policy <= 3 s tuning per nest": bool(summary["policy_tune_seconds_max"] <= 3),
    }
    from compilerkit.tune.dqn import QNet

    meta = QNet.load().meta
    out = {"smoke": args.smoke, "budget_s": budget, "policy_budget_s": POLICY_BUDGET_S,
           "repeat": repeat, "loadavg_before": load,
           "loadavg_after": os.getloadavg(), "machine": platform.processor() or platform.machine(),
           "policy_training": {k: meta[k] for k in ("command", "episodes", "seconds")
                               if k in meta},
           "rows": rows, "summary": summary}
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    path = RESULTS.replace(".json", "_smoke.json") if args.smoke else RESULTS
    if args.shapes:
        path = path.replace(".json", "_subset.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1, default=float)
    print(json.dumps(summary, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
