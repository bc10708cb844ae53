"""The code-generator interface: what every name in `pipeline.CODEGENS` does with a planned
Kernel IR module, so the stage driver (pipeline.Compilation) treats them all alike.

    generator.generate(kmodule, backend, opt_level=, stage=, options=, owned=) -> CodegenProducts
    generator.llvm_ir(kmodule, backend, emitter=None, **how) -> unoptimised LLVM IR text

`generate` makes what the stages after Kernel IR need ("llvm-ir", the machine code, "obj",
"lib", "native") and returns it in one CodegenProducts; it never writes into the Compilation.
The driver records the products' texts and times, returns the stage asked for, and builds the
CompiledModel from them in one place, whichever generator ran. A generator that cannot make a
stage raises ValueError naming the stage and the generator to use instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class CodegenProducts:
    """What one code generator made of one Kernel IR module."""

    # The "llvm-ir" stage: its text, or a zero-argument callable making it on first look.
    llvm_ir: str | Callable[[], str]
    # The optimised llvmlite module the CompiledModel keeps (None: the generator has none).
    llvm_module: Any
    # (inputs, outputs) -> a loaded, runnable session (Backend.session's contract); the
    # signatures are [(name, shape, numpy dtype)], read by the driver from the Kernel IR.
    load: Callable[[list, list], Any]
    # The machine-code listing (the "asm"/"ptx" stage), made when called; None: not listed
    # (a "native" compile with asm=False).
    code: Callable[[], str] | None = None
    # An ELF object file, made when called; None: this generator or target makes none.
    obj: Callable[[], bytes] | None = None
    # Function name -> the ONNX node it came from (None: unknown), for provenance.
    functions: dict | None = None
    # Stage -> seconds this generator spent on it, in pipeline order; the machine-code stage's
    # time is the rest of generate and load (CodegenProducts.started on).
    timings: dict = field(default_factory=dict)
    pass_timings: list = field(default_factory=list)  # [(stage, step, seconds)]
    started: float = 0.0  # time.perf_counter() when generate began
    # Attributes the CompiledModel gets besides the common ones (loopnest: `.loopnest`, its
    # report, and `.generated`, the code itself).
    attributes: dict = field(default_factory=dict)
    # The LLVM JIT's stages made on first look (llvm_codegen.LaterStages), or None.
    later: Any = None


class CodeGenerator(Protocol):
    """A code generator registered in pipeline.CODEGENS (chosen with codegen=NAME)."""

    name: str

    def generate(self, kmodule, backend, *, opt_level: int, stage: str, options,
                 owned: bool) -> CodegenProducts:
        """`kmodule` (planned Kernel IR) -> the products of the stages after it, for
        `backend` at -O`opt_level`. `stage` is the last one wanted ("llvm-ir", the backend's
        code stage, "obj", "lib" or "native"); `options` is the Compilation's
        pipeline.Options (`asm`, `emitter`); `owned` is False when `kmodule` is a caller's
        module, which a generator that keeps it past this call must copy
        (llvm_codegen.private_copy)."""
        ...

    def llvm_ir(self, kmodule, backend, emitter=None, **how) -> str:
        """The unoptimised LLVM IR text this generator hands LLVM (`compilerkit.to_llvm`)."""
        ...
