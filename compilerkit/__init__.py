"""compilerkit: ONNX -> ONNX IR -> Kernel IR -> LLVM IR -> native code, step by step
(after onnx-mlir). Each step is a public function, so a notebook can run them one at a time:

    m = import_onnx("model.onnx")          # ONNX IR (onnx dialect)
    optimize_onnx(m)                        # shape inference, folding, decomposition, DCE
    k = lower(m, opt_level=3)               # Kernel IR (krnl dialect), scheduled, buffers planned
    llvm_ir = to_llvm(k)                    # LLVM IR text
    cm = compile("model.onnx")              # all of it, + `.run(*arrays)` and `.stages`
    cm = compile_kernel(k)                  # from (hand-rescheduled) Kernel IR onwards
"""

from __future__ import annotations

import time
from collections import OrderedDict

from compilerkit.backends import Target, get_backend
from compilerkit.codegen import emit_llvm
from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError, UnsupportedOpError, import_model
from compilerkit.ir import parse_ir, print_ir
from compilerkit.krnl_passes import plan_buffers
from compilerkit.lowering import SUPPORTED, lower_to_krnl
from compilerkit.onnx_passes import run_onnx_passes
from compilerkit.onnx_passes.single_node import main_func
from compilerkit.runtime import InputError, RunError
from compilerkit.stages import Stages, verify_ir

__all__ = ["compile", "compile_kernel", "import_onnx", "optimize_onnx", "lower", "to_llvm",
           "CompiledModel",
           "ModelError", "UnsupportedOpError", "InputError", "RunError", "SUPPORTED", "print_ir",
           "parse_ir", "Target", "get_backend"]


def import_onnx(model, input_shapes=None, max_bytes=None):
    """ONNX file path, bytes or ModelProto -> ONNX IR module (as imported). `max_bytes`
    (default 2 GiB) bounds every tensor and the constants the compile may hold."""
    module = import_model(model, input_shapes, max_bytes)
    verify_ir(module, "import")
    return module


def optimize_onnx(module):
    """The ONNX IR passes (each op validated, the IR verified after each), in place; returns
    the module."""
    return run_onnx_passes(module)


def lower(module, opt_level: int = 3, target: Target | None = None):
    """ONNX IR -> Kernel IR: lowering, the -O3 matmul schedule, -O2+ unrolling of short inner
    loops, buffer planning; the IR verifier runs after each."""
    kmodule = lower_to_krnl(module)
    verify_ir(kmodule, "lowering to Kernel IR")
    (target or get_backend("host").target).schedule(kmodule, opt_level)
    verify_ir(kmodule, "scheduling")
    plan_buffers(kmodule)
    verify_ir(kmodule, "buffer planning")
    return kmodule


def to_llvm(kmodule, target: Target | None = None) -> str:
    """Kernel IR -> LLVM IR text (unoptimised)."""
    return get_backend("host").emit_llvm(kmodule) if target is None else str(
        emit_llvm(kmodule, target))


def _signature(func_op, n_inputs):
    names_in = [a.data for a in func_op.attributes["input_names"].data]
    names_out = [a.data for a in func_op.attributes["output_names"].data]
    args = list(func_op.body.block.args)
    sig = []
    for name, a in zip(names_in + names_out, args, strict=True):
        t = a.type
        sig.append((name, tuple(t.get_shape()), onnx_d.numpy_dtype(t.element_type)))
    return sig[:n_inputs], sig[n_inputs:]


class CompiledModel:
    """A compiled model: `.run(*arrays) -> list[np.ndarray]`, `.stages` (stage -> text; the IR
    texts of `compile` and the machine code ("asm", or "ptx" on the GPU) are generated on first
    access), `.timings` (stage -> seconds; the machine-code entry times loading the code),
    `.arena_bytes` / `.naive_bytes` (buffer planning)."""

    def __init__(self, stages, timings, session, inputs, outputs, arena_bytes, naive_bytes,
                 llvm_module, backend, opt_level):
        self.stages = stages
        self.timings = timings
        self.session = session
        self.inputs = inputs
        self.outputs = outputs
        self.arena_bytes = arena_bytes
        self.naive_bytes = naive_bytes
        self.llvm_module = llvm_module
        self.backend = backend
        self.opt_level = opt_level

    def run(self, *arrays):
        """Run on numpy arrays; returns the outputs. Raises `InputError` for arguments that do
        not match the signature and `RunError` for data the code cannot compute with (a
        Gather index out of range, integer division by zero). Thread-safe: on the host each
        call takes its own arena from a pool (see runtime.Session); emulated and GPU runs of
        one model take turns."""
        return self.session.run(*arrays)

    __call__ = run

    def __repr__(self):
        return (f"CompiledModel(inputs={self.inputs}, outputs={self.outputs}, "
                f"arena={self.arena_bytes} B vs naive {self.naive_bytes} B)")


def compile(model, target: str = "host", opt_level: int = 3, input_shapes=None,
            asm: bool = True, max_bytes: int | None = None) -> CompiledModel:
    """Compile an ONNX model (path, bytes or ModelProto) for `target` at -O`opt_level`.
    `max_bytes` (default 2 GiB) is the compile budget: no tensor, and not all constants
    together, may need more; a model asking for more gets a ModelError naming the op and size
    before anything is allocated."""
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0..3, got {opt_level}")
    backend = get_backend(target)
    timings = OrderedDict()
    stages = Stages()
    t = time.perf_counter()
    module = import_onnx(model, input_shapes, max_bytes)
    optimize_onnx(module)
    # Printed on first access: the module is private to this compile and no longer changes.
    stages.set("onnx-ir", lambda: print_ir(module))
    timings["onnx-ir"] = time.perf_counter() - t
    t = time.perf_counter()
    kmodule = lower(module, opt_level, backend.target)
    timings["kernel-ir"] = time.perf_counter() - t
    stages.set("kernel-ir", lambda: print_ir(kmodule))
    return _native(kmodule, backend, opt_level, stages, timings, asm)


def compile_kernel(kmodule, target: str = "host", opt_level: int = 3,
                   asm: bool = True) -> CompiledModel:
    """Compile a Kernel IR module (from `lower`, perhaps rescheduled by hand with
    `krnl_passes.block` / `permute` / `unroll`) to native code. The module is only read."""
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0..3, got {opt_level}")
    verify_ir(kmodule, "hand-edited Kernel IR")
    stages = Stages()
    stages.set("kernel-ir", print_ir(kmodule))  # now: the caller may change the module later
    return _native(kmodule, get_backend(target), opt_level, stages, OrderedDict(), asm)


def _native(kmodule, backend, opt_level, stages, timings, asm) -> CompiledModel:
    t = time.perf_counter()
    text = backend.emit_llvm(kmodule)
    optimized, mod = backend.optimize(text, opt_level)
    stages.set("llvm-ir", optimized)
    timings["llvm-ir"] = time.perf_counter() - t
    t = time.perf_counter()
    if asm:
        # Produced on first look-up: a second full code generation (stages.py).
        stages.set(backend.code_stage, lambda: backend.assembly(mod, opt_level))
    f = main_func(kmodule)
    n_in = f.attributes["num_inputs"].value.data
    inputs, outputs = _signature(f, n_in)
    session = backend.session(mod, inputs, outputs)
    timings[backend.code_stage] = time.perf_counter() - t
    naive = f.attributes["naive_bytes"].value.data
    return CompiledModel(stages, timings, session, inputs, outputs, session.arena_bytes, naive,
                         mod, backend, opt_level)
