"""The Target description and the Backend interface.

A Target says what codegen needs to know (triple, data layout, byte order, vector width); a
Backend turns LLVM IR into something runnable. `compile(target=...)` looks the name up here and
nothing else branches on it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import llvmlite.binding as llvm

_LLVM_READY: set[str] = set()


def init_llvm(all_targets: bool = False) -> None:
    """Initialise LLVM's code generators once per process: the native one (host JIT), or all
    of them (cross-compiling for s390x, ppc64 and NVPTX)."""
    kind = "all" if all_targets else "native"
    if kind in _LLVM_READY:
        return
    if all_targets:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
    else:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
    _LLVM_READY.add(kind)


@dataclass(frozen=True)
class Target:
    name: str
    triple: str
    data_layout: str
    byte_order: str  # "little" or "big"
    vector_width: int  # f32 lanes of the widest vector unit codegen should use
    cpu: str = ""
    features: str = ""

    def schedule(self, kmodule, opt_level: int) -> None:
        """The Kernel IR schedule for this target, in place: on CPUs, -O3 tiles and permutes
        matrix products for `vector_width` lanes and -O2+ unrolls short inner loops. The GPU
        target overrides this with its grid mapping."""
        from compilerkit.krnl_passes import tile_matmul, unroll_small

        if opt_level >= 3:
            tile_matmul(kmodule, simd=self.vector_width)
        if opt_level >= 2:
            unroll_small(kmodule)


class Backend:
    """Compile an llvmlite module at an optimisation level and load it for running."""

    target: Target
    code_stage = "asm"  # the name of the machine-code stage in `.stages` ("ptx" on the GPU)

    def emit_llvm(self, kmodule) -> str:
        """Kernel IR -> unoptimised LLVM IR text for this target (the GPU overrides it)."""
        from compilerkit.codegen import emit_llvm

        return str(emit_llvm(kmodule, self.target))

    def optimize(self, llvm_ir: str, opt_level: int):  # -> (optimised IR text, binding module)
        raise NotImplementedError

    def assembly(self, module) -> str:
        raise NotImplementedError

    def session(self, module, inputs, outputs):
        """Load the optimised module; return an object with `.run(*arrays) -> list` and
        `.arena_bytes`. `inputs`/`outputs` are [(name, shape, numpy dtype)]; the session checks
        arguments against them before any compiled code runs."""
        raise NotImplementedError


# target name -> (module, class); imported on demand so a missing optional dependency (the
# CUDA bindings, say) only matters to the target that needs it.
BACKENDS = {
    "host": ("compilerkit.backends.host", "HostBackend"),
    "gpu": ("compilerkit.backends.gpu", "GpuBackend"),  # NVPTX + CUDA driver
    "s390x": ("compilerkit.backends.emulated", "S390xBackend"),  # big-endian, in Unicorn
    "ppc64": ("compilerkit.backends.emulated", "Ppc64Backend"),
}
ALIASES = {"native": "host", "cpu": "host"}


def get_backend(name: str) -> Backend:
    key = ALIASES.get(name, name)
    if key not in BACKENDS:
        raise ValueError(f"unknown target {name!r}; available: {sorted(BACKENDS)}")
    module, cls = BACKENDS[key]
    return getattr(importlib.import_module(module), cls)()
