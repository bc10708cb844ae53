"""codegen="llvm": Kernel IR -> LLVM IR by the target's backend (`Backend.emit_llvm`, which is
how the GPU gets kernels), LLVM's optimiser at -O, then LLVM's code generator for the machine
code, the object file and the loaded model. One CodeGenerator (codegen/interface.py).

A JIT compile ("native" on a backend with `jit_weights`) keeps the weights out of the module
and prints neither the IR nor the machine code: LaterStages makes them on first look.
"""

from __future__ import annotations

import time

import llvmlite.binding as llvm

from compilerkit.codegen.interface import CodegenProducts


def private_copy(kmodule):
    """A clone of a Kernel IR module sharing its constants' bytes and run-time check table."""
    from compilerkit.dialects import onnx as onnx_d
    from compilerkit.frontend.checks import share_checks

    copy = kmodule.clone()
    onnx_d.share_resources(kmodule, copy)
    share_checks(kmodule, copy)
    return copy


class LlvmCodegen:
    """The default code generator: LLVM for everything after Kernel IR."""

    name = "llvm"

    def llvm_ir(self, kmodule, backend, emitter=None, **how) -> str:
        """Kernel IR -> unoptimised LLVM IR text by the target's backend (the GPU's emits
        kernels); `emitter` (an Emitter subclass) replaces the backend's default emitter
        class; `how`: external_weights=True for a JIT (see Backend.emit_llvm)."""
        return backend.emit_llvm(kmodule, emitter=emitter, **how)

    def generate(self, kmodule, backend, *, opt_level: int, stage: str, options,
                 owned: bool) -> CodegenProducts:
        started = time.perf_counter()
        jit = stage == "native" and backend.jit_weights
        if jit:
            # optimize=: the backend may optimise parts while the rest is emitted (then
            # `ir_text` is what its optimize_module finishes; Backend.emit_llvm). On the host
            # the "emit" step then overlaps the first partitions' LLVM work, and "optimize"
            # is the rest of it, their machine code included (backends/split.py).
            ir_text = self.llvm_ir(kmodule, backend, options.emitter, external_weights=True,
                                   optimize=opt_level)
        else:
            ir_text = self.llvm_ir(kmodule, backend, options.emitter)
        emitted = time.perf_counter()
        later = None
        if jit:
            mod = backend.optimize_module(ir_text, opt_level)
            later = LaterStages(self, backend, opt_level, options.emitter,
                                kmodule if owned else private_copy(kmodule))
            text = later.llvm_ir
        else:
            text, mod = backend.optimize(ir_text, opt_level)
        del ir_text
        done = time.perf_counter()
        return CodegenProducts(
            llvm_ir=text, llvm_module=mod,
            load=lambda inputs, outputs: backend.session(mod, inputs, outputs),
            code=self._listing(backend, opt_level, stage, options, mod, text, later),
            obj=((lambda: backend.object_code(mod, opt_level))
                 if hasattr(backend, "object_code") else None),
            functions=getattr(backend.emitted, "functions", None),
            timings={"llvm-ir": done - started},
            pass_timings=[("llvm-ir", "emit", emitted - started),
                          ("llvm-ir", f"optimize -O{opt_level}", done - emitted)],
            started=started, later=later)

    @staticmethod
    def _listing(backend, opt_level, stage, options, mod, text, later):
        """The machine-code listing, made when called. Asked for as the stage itself, it is
        that of `mod`. For "native" (only if `options.asm`) it is not made from `mod`: loading
        it runs LLVM's code generator, whose preparation passes rewrite the module in place,
        and the listing should be the one `compile_to("asm")` and the CLI print; so it is a
        second code generation, from the IR text (or LaterStages' module) on first look."""
        if stage != "native":
            return lambda: backend.assembly(mod, opt_level)
        if not options.asm:
            return None
        if later is not None:
            later.wanted.add(backend.code_stage)
            return later.code
        return lambda: backend.assembly(llvm.parse_assembly(text), opt_level)


class LaterStages:
    """The "llvm-ir" and machine-code stages of a JIT compile, made on first look (printing a
    large model's optimised IR took as long as the rest of its compile): `kmodule` compiled
    again with its weights inside by a backend of its own (the JIT's keeps the record of its
    emit), so the texts are those `compile_to("llvm-ir")` and `compile_to("asm")` give. The
    code generator rewrites the module it reads (and a clone's use lists differ, so would its
    register choices): it gets the module the IR text was printed from once that text is
    made, else one of its own. A module is kept only while a stage still wants it."""

    def __init__(self, generator: LlvmCodegen, backend, opt_level: int, emitter, kmodule):
        self.generator, self.jit_backend = generator, backend
        self.opt_level, self.emitter = opt_level, emitter
        self.kmodule = kmodule
        self.module = self.backend = None
        self.wanted = {"llvm-ir"}

    def _compile(self):
        self.backend = self.jit_backend.for_target(self.jit_backend.target)
        text = self.generator.llvm_ir(self.kmodule, self.backend, self.emitter)
        return self.backend.optimize_module(text, self.opt_level)

    def _made(self, stage: str) -> None:
        self.wanted.discard(stage)
        if not self.wanted:
            self.module = self.backend = self.kmodule = self.jit_backend = None

    def llvm_ir(self) -> str:
        self.module = self._compile()
        text = str(self.module)
        self._made("llvm-ir")
        return text

    def code(self) -> str:
        mod = self.module if "llvm-ir" not in self.wanted else self._compile()
        self.module = None
        code = self.backend.assembly(mod, self.opt_level)
        self._made(self.backend.code_stage)
        return code
