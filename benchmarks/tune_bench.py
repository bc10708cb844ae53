"""LoopStack/LoopTune benchmarks (issue 14), JSON in benchmarks/results/tune_bench.json.

    python benchmarks/tune_bench.py codegen [--models light_resnet50,...] [--smoke]

`codegen`: the two code generators, loopnest (compilerkit/loopnest) against LLVM -O3, from the
same Kernel IR: per nest (single-op models of ResNet-50's kinds) the codegen milliseconds and
the run time at one thread; per model (real-weight models from mlsys_datasets) the end-to-end
compile seconds with each stage, the codegen stage alone, run time at one thread and whether
each matches onnxruntime. Pairs are timed interleaved, best of N; the load average is
recorded (this machine is shared, so every time is an upper bound). Each part writes its own
key, keeping the others (the tuner's rows live beside these).
"""

import argparse
import os
import platform
import sys

from tqdm.auto import tqdm

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from compile_bench import write_results  # noqa: E402  (the merging JSON writer)

from compilerkit.loopnest.bench import compare_model, compare_nest, nest_models  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "results", "tune_bench.json")
MODELS = ("light_resnet50", "light_squeezenet", "light_inception_v1", "resnet50")
SMOKE_MODELS = ("light_squeezenet",)


def codegen(models, smoke: bool) -> dict:
    from mlsys_datasets import real_weight_model

    nests = {}
    for name, model in tqdm(nest_models(0.25 if smoke else 1.0).items(), desc="nests"):
        nests[name] = compare_nest(model, repeat=2 if smoke else 3)
        r = nests[name]
        print(f"{name:26s} codegen loopnest {r['loopnest_codegen_ms']:7.2f} ms  llvm "
              f"{r['llvm_codegen_ms']:8.2f} ms ({r['codegen_speedup']:5.1f}x)  run "
              f"{r['loopnest_run_ms']:7.3f} vs {r['llvm_run_ms']:7.3f} ms "
              f"(llvm/loopnest {r['run_ratio']:4.2f})", flush=True)
    rows = {}
    for name in tqdm(models, desc="models"):
        path = real_weight_model(name, "small")
        rows[name] = r = compare_model(path, run_repeat=3 if smoke else 5)
        print(f"{name:18s} compile {r['loopnest_compile_s']:6.2f} s vs {r['llvm_compile_s']:6.2f} s"
              f" ({r['compile_speedup']:4.1f}x; codegen {r['loopnest_codegen_s']:5.2f} vs "
              f"{r['llvm_codegen_s']:6.2f} s, {r['codegen_speedup']:5.1f}x)  run "
              f"{r['loopnest_run_ms']:7.1f} vs {r['llvm_run_ms']:7.1f} ms (llvm/loopnest "
              f"{r['run_ratio']:4.2f})  ort ok {r['loopnest_matches_ort']}/"
              f"{r['llvm_matches_ort']}  fallbacks {len(r['fallback_nodes'])}  load "
              f"{r['load_before']:.1f}", flush=True)
    return {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "smoke": smoke, "threads": 1, "nests": nests, "models": rows,
            "goals": {"per_nest_ms": 5.0, "resnet50_compile_speedup": 10.0, "run_ratio": 0.9}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=["codegen"])
    ap.add_argument("--models", default="")
    ap.add_argument("--smoke", action="store_true", help="small nests, one small model")
    args = ap.parse_args(argv)
    models = [m for m in args.models.split(",") if m] or list(
        SMOKE_MODELS if args.smoke else MODELS)
    write_results({"codegen": codegen(models, args.smoke)}, RESULTS)
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
