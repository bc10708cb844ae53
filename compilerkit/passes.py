"""The pass registry and the per-target pipelines.

Every transformation of compilerkit's IR is a named xDSL `ModulePass` defined beside the code
it runs (onnx_passes/, lowering/, krnl_passes/). This module only lists them:

    PASSES                      name -> pass class (what `python -m compilerkit.opt -p` accepts)
    onnx_pipeline()             the ONNX IR passes, in order
    kernel_pipeline(target, O)  lowering, then the target's Kernel IR schedule, then buffers
    run_passes(module, passes)  apply them in order, verifying the module after each one

A pipeline is a plain list of pass instances, so a notebook can print it, cut it short, or run
one pass at a time.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import ArgSpecParseError

from compilerkit.frontend.arguments import OptionError
from compilerkit.krnl_passes.fold_layout import FoldLayoutPass
from compilerkit.krnl_passes.fuse_nests import FuseNestsPass
from compilerkit.krnl_passes.gpu_map import GpuMapPass
from compilerkit.krnl_passes.guard_indices import GuardIndicesPass
from compilerkit.krnl_passes.parallelize import ParallelizePass
from compilerkit.krnl_passes.plan_buffers import PlanBuffersPass
from compilerkit.krnl_passes.tile_matmul import TileMatmulPass
from compilerkit.krnl_passes.unroll_small import UnrollSmallPass
from compilerkit.lowering import LowerToKrnlPass
from compilerkit.lowering.conv_algorithm import DEFAULT as DEFAULT_CONV_ALGORITHM
from compilerkit.onnx_passes.constant_folding import ConstantFoldingPass
from compilerkit.onnx_passes.dead_code import DeadCodePass
from compilerkit.onnx_passes.decompose import DecomposePass
from compilerkit.onnx_passes.fold_pool_pad import FoldPoolPadPass
from compilerkit.onnx_passes.fuse_conv import FuseConvPass
from compilerkit.onnx_passes.fuse_elementwise import FuseElementwisePass
from compilerkit.onnx_passes.fuse_gelu import FuseGeluPass
from compilerkit.onnx_passes.shape_inference import ShapeInferencePass
from compilerkit.onnx_passes.validate_onnx import ValidatePass
from compilerkit.stages import verify_ir

PASSES: dict[str, type[ModulePass]] = {p.name: p for p in (
    ShapeInferencePass, ValidatePass, ConstantFoldingPass, DecomposePass, FuseConvPass,
    FuseElementwisePass, FuseGeluPass, FoldPoolPadPass, DeadCodePass,
    LowerToKrnlPass, FoldLayoutPass, FuseNestsPass, TileMatmulPass, UnrollSmallPass,
    ParallelizePass, GpuMapPass,
    GuardIndicesPass, PlanBuffersPass)}


def onnx_pipeline() -> list[ModulePass]:
    """ONNX IR -> optimised ONNX IR. Shape inference first (ONNX's own, per node), validation
    of what lowering will assume, folding to a fixed point with shape inference, decomposition
    (BatchNormalization into Conv, Gemm), folding again, Conv fusion (Pad, per-channel
    Mul/Add and the activation into the Conv), GELU written out as elementwise nodes (exact
    or tanh form) into one Gelu, an activation into the Add/Sub/Mul/Div before it, a zero Pad
    of a non-negative tensor into the MaxPool after it, dead code, and validation of what is
    left."""
    return [ShapeInferencePass(), ValidatePass(), ConstantFoldingPass(), DecomposePass(),
            ConstantFoldingPass(), FuseConvPass(), FuseGeluPass(), FuseElementwisePass(),
            FoldPoolPadPass(), DeadCodePass(), ValidatePass()]


def kernel_pipeline(target, opt_level: int, schedule=None,
                    conv_algorithm: str = DEFAULT_CONV_ALGORITHM,
                    fuse: bool = True, taps: bool = True) -> list[ModulePass]:
    """Optimised ONNX IR -> planned Kernel IR for `target` (a backends.Target) at -O`opt_level`:
    lowering (Convs by `conv_algorithm`, constant matrices in strips of the target's lanes),
    the blocked-layout fold (a no-op without conv_algorithm="pznet"), from -O1 and with `fuse`
    the fusion of elementwise chains into one nest (fuse-nests: fewer passes over memory, and
    fewer functions for LLVM to compile), the target's schedule (Target.schedule_passes, or
    the passes `schedule` when given), buffer planning. `taps`: Convs may take the tap
    schedule (lowering/conv_taps.py)."""
    if schedule is None:
        schedule = target.schedule_passes(opt_level)
    lowering = LowerToKrnlPass(conv_algorithm=conv_algorithm, lanes=target.vector_width,
                               taps=taps)
    fusion = [FuseNestsPass()] if fuse and opt_level >= 1 else []
    return [lowering, FoldLayoutPass(), *fusion, *schedule, PlanBuffersPass()]


def parse_pipeline(spec: str, option: str = "pass pipeline") -> list[ModulePass]:
    """`"shape-inference,tile-matmul{simd=4}"` -> pass instances (xDSL's pipeline syntax).
    A spec that does not parse, or names an unknown pass or argument, is an OptionError
    naming `option` and the text."""
    try:
        return list(PassPipeline.parse_spec(
            {name: (lambda c=cls: c) for name, cls in PASSES.items()}, spec).passes)
    except (ArgSpecParseError, Exception) as e:  # noqa: BLE001 (see below)
        # xDSL's syntax errors are ArgSpecParseError, a BaseException that `except
        # Exception` (a notebook's, the command line's) lets through; an unknown pass or
        # argument is a ValueError, a bad argument value a TypeError or more.
        raise OptionError(f"{option} {spec!r}: {e} (python -m compilerkit.opt "
                          "--list-passes names the passes)") from None


def run_passes(module, passes, after_each=None, verify: str = "each",
               unverified=()) -> None:
    """Apply `passes` to `module` in place, verifying it after every pass (a failure is a
    ModelError naming the pass). `after_each(pass_, module)` is called after each pass and its
    verification (for tracing and timing). `verify="last"` verifies once, after the last pass
    (re-verifying a real model's Kernel IR after every pass took a tenth of its compile); a
    failure then names them all, after `unverified` (the names of passes that ran before
    without a verification of their own). `verify="none"` verifies nothing (the compile
    driver's choice for the Kernel IR of its own passes, unless its option verify="all"; see
    pipeline.py). `python -m compilerkit.opt` runs them one at a time, verifying each."""
    if verify not in ("each", "last", "none"):
        raise ValueError(f"verify must be 'each', 'last' or 'none', got {verify!r}")
    ctx = Context()
    for k, p in enumerate(passes):
        p.apply(ctx, module)
        if verify == "each":
            verify_ir(module, f"pass {p.name!r}")
        elif verify == "last" and k == len(passes) - 1:
            names = list(unverified) + [q.name for q in passes]
            verify_ir(module, "passes " + ", ".join(repr(n) for n in names))
        if after_each is not None:
            after_each(p, module)


__all__ = ["PASSES", "onnx_pipeline", "kernel_pipeline", "parse_pipeline",
           "run_passes"]
