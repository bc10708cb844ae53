"""compilerkit: ONNX -> ONNX IR -> Kernel IR -> LLVM IR -> native code, step by step
(after onnx-mlir). Each step is a public function, so a notebook can run them one at a time:

    m = import_onnx("model.onnx")          # ONNX IR (onnx dialect)
    optimize_onnx(m)                        # shape inference, folding, decomposition, DCE
    k = lower(m, opt_level=3)               # Kernel IR (krnl dialect), scheduled, buffers planned
    llvm_ir = to_llvm(k)                    # LLVM IR text
    cm = compile("model.onnx")              # all of it, + `.run(*arrays)` and `.stages`
    cm = compile_kernel(k)                  # from (hand-rescheduled) Kernel IR onwards
    compile_to("ptx", "model.onnx", target="gpu")   # any stage, any target: the one driver

Every one of these is a call into the stage driver, compilerkit/pipeline.py; so is the command
line, `python -m compilerkit MODEL --emit STAGE --target TARGET`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compilerkit.frontend import (
    ConvAccuracyWarning,
    DeclaredShapeWarning,
    ModelError,
    OpsetUpgradeWarning,
    OptionError,
    UnsupportedOpError,
)
from compilerkit.runtime import InputError, RunError, check_num_threads
from compilerkit.specialize import (
    DEFAULT_CACHE_SIZE,
    SpecializationWarning,
    SpecializedModel,
    specializing_model,
)

if TYPE_CHECKING:
    from compilerkit.backends import Target
    from compilerkit.pipeline import CompiledModel

# The stage driver and the backends (LLVM through llvmlite, the code generators) are imported
# on first use, not here: every `python -m compilerkit.opt` imports this package first, and
# the FileCheck tests start about ninety of them, which parse IR and run passes, never LLVM.
# The names below resolve on first access (PEP 562); so does any submodule, as `compilerkit.X`
# did when this file imported them all.
_LAZY = {"Target": "compilerkit.backends", "get_backend": "compilerkit.backends",
         "parse_ir": "compilerkit.ir", "print_ir": "compilerkit.ir",
         "SUPPORTED": "compilerkit.lowering",
         **{name: "compilerkit.pipeline" for name in (
             "Compilation", "CompiledModel", "check_module", "check_opt_level",
             "check_options", "compile_to")}}


def __getattr__(name: str):
    import importlib
    import importlib.util

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def _driver():
    """compilerkit.pipeline, the stage driver (imported on first use, see above)."""
    from compilerkit import pipeline

    return pipeline


__all__ = ["compile", "compile_kernel", "compile_to", "import_onnx", "optimize_onnx", "lower",
           "to_llvm", "CompiledModel",
           "ModelError", "UnsupportedOpError", "OptionError", "InputError", "RunError",
           "DeclaredShapeWarning", "OpsetUpgradeWarning", "SpecializationWarning",
           "ConvAccuracyWarning",
           "SpecializedModel",
           "SUPPORTED", "print_ir",
           "parse_ir", "Target", "get_backend"]

# Each function below is one call into the stage driver (compilerkit/pipeline.py, `_driver`).


def import_onnx(model, input_shapes=None, max_bytes=None, max_unroll=None):
    """ONNX file path, bytes or ModelProto -> ONNX IR module (as imported). `max_bytes`
    (default 2 GiB) bounds every tensor and the constants the compile may hold; `max_unroll`
    the loop iterations unrolled (as `compile`'s)."""
    return _driver().Compilation(input_shapes=input_shapes, max_bytes=max_bytes,
                                 max_unroll=max_unroll).import_model(model)


def optimize_onnx(module):
    """The ONNX IR passes (`passes.onnx_pipeline()`; each op validated, the IR verified after
    them), in place; returns the module."""
    driver = _driver()
    driver.check_module("optimize_onnx", module, "onnx-ir")
    return driver.Compilation().optimize(module)


def lower(module, opt_level: int = 3, target: Target | None = None):
    """ONNX IR -> Kernel IR: lowering, the target's schedule (on CPUs: -O3 tiles matrix
    products, -O2+ unrolls short inner loops and marks parallel loops; on the GPU: the grid
    mapping), buffer planning; the IR verifier runs once, after them all, with verify="all"
    (CK_VERIFY=all; see compilerkit/pipeline.py). Returns a new module: `module` stays ONNX
    IR."""
    driver = _driver()
    driver.check_module("lower", module, "onnx-ir")
    return driver.Compilation(target or "host", opt_level).lower(module)


def to_llvm(kmodule, target: Target | None = None) -> str:
    """Kernel IR -> unoptimised LLVM IR text for `target` (default: the host), through its
    backend: NVPTX kernels for the GPU target."""
    driver = _driver()
    driver.check_module("to_llvm", kmodule, "kernel-ir")
    return driver.Compilation(target or "host").emit(kmodule)


def compile(model, target: str = "host", opt_level: int = 3, input_shapes=None,
            asm: bool = True, max_bytes: int | None = None, max_unroll: int | None = None,
            num_threads: int | None = None, codegen: str = "llvm",
            conv_algorithm: str = "auto", schedule=None,
            specialize_cache: int = DEFAULT_CACHE_SIZE, verify: str | None = None
            ) -> CompiledModel:
    """Compile an ONNX model (path, bytes or ModelProto) for `target` at -O`opt_level`.
    `max_bytes` (default 2 GiB) is the compile budget: no tensor, and not all constants
    together, may need more; a model asking for more gets a ModelError naming the op and size
    before anything is allocated. If, Loop and Scan are unrolled and inlined on import
    (frontend/control_flow.py): `max_unroll` (default 1024) bounds the loop iterations and scan
    steps of the whole model, a model needing more gets an UnsupportedOpError naming the node.
    `num_threads` (None: the machine's cores) is how many threads
    the parallel loops (-O2+) use by default, kept as `.num_threads`; `run(...,
    num_threads=n)` overrides it per call, and the answer is the same for every count.
    `codegen` writes the machine code: "llvm" (LLVM IR, then LLVM's optimiser and code
    generator) or "loopnest" (x86-64 AVX2 code straight from the Kernel IR nests, after
    LoopStack; nodes it cannot write go to LLVM). `conv_algorithm` lowers Convs with "auto"
    (the default: Winograd F(2, 3) where it measured faster and its error bound holds, else
    "classic"), "auto-f4" (F(4, 3) first: faster on 3-D nets, more rounding error), "classic"
    (conv.py's choice), "direct", "im2col", "winograd" (F(4, 3)), "winograd-f2"/"-f6", or
    "winograd-fused" (L3-fused tile groups), "fft", "fft-fused" or "fft-t<8|16|32|64>"
    (lowering/fft.py; "auto" picks it for kernels of 5 and up where the roofline predicts it
    faster), where it applies (lowering/conv_algorithm.py, which says why "auto" is the
    default and takes F(2, 3) only). `schedule` replaces the Kernel IR schedule
    passes: None (the target's at -O`opt_level`), a pass pipeline string, or "tuned" (after
    `import compilerkit.tune`: LoopTune's policy tunes every matmul nest, cached by shape).
    A model with inputs whose values decide shapes (Expand's shape, Range's limits...),
    sequence or optional inputs, or sequence outputs is compiled on its first run for those
    values and again for each new one, the last `specialize_cache` forms kept: a
    SpecializedModel (compilerkit/specialize.py; a SpecializationWarning says so once).
    `verify`: "input" verifies the IR that does not come from compilerkit's own passes, "all"
    (a compile's own Kernel IR too, for finding compilerkit bugs) everything; None: the
    environment's CK_VERIFY, else "input" (compilerkit/pipeline.py says which IR).
    Otherwise the same as `compile_to("native", model, ...)`."""
    driver = _driver()
    driver.check_opt_level(opt_level)
    check_num_threads(num_threads)
    driver.check_options(target, opt_level, input_shapes=input_shapes, max_bytes=max_bytes,
                         asm=asm, codegen=codegen, conv_algorithm=conv_algorithm,
                         schedule=schedule, max_unroll=max_unroll, verify=verify)

    def compile_form(proto, shapes):
        cm = driver.compile_to("native", proto, target, opt_level, shapes, max_bytes, asm=asm,
                               codegen=codegen, conv_algorithm=conv_algorithm,
                               schedule=schedule, max_unroll=max_unroll, verify=verify)
        cm.num_threads = num_threads
        return cm

    special, source = specializing_model(model, compile_form, input_shapes, specialize_cache,
                                         num_threads)
    if special is not None:
        return special
    return compile_form(source, input_shapes)


def compile_kernel(kmodule, target: str = "host", opt_level: int = 3,
                   asm: bool = True, num_threads: int | None = None) -> CompiledModel:
    """Compile a Kernel IR module (from `lower`, perhaps rescheduled by hand with
    `krnl_passes.block` / `permute` / `unroll` / `krnl.parallel`) to native code. The module is
    only read. `num_threads` as in `compile`."""
    driver = _driver()
    driver.check_opt_level(opt_level)
    check_num_threads(num_threads)
    # ONNX IR: compile_to('native', m)
    driver.check_module("compile_kernel", kmodule, "kernel-ir")
    cm = driver.compile_to("native", kmodule, target, opt_level, asm=asm)
    cm.num_threads = num_threads
    return cm
