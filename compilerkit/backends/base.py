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

    def schedule_passes(self, opt_level: int) -> list:
        """The Kernel IR schedule for this target, as passes: on CPUs, -O3 tiles and permutes
        matrix products for `vector_width` lanes and -O2+ unrolls short inner loops. The GPU
        target overrides this with its grid mapping."""
        from compilerkit.krnl_passes.tile_matmul import TileMatmulPass
        from compilerkit.krnl_passes.unroll_small import UnrollSmallPass

        return ([TileMatmulPass(simd=self.vector_width)] if opt_level >= 3 else []) + (
            [UnrollSmallPass()] if opt_level >= 2 else [])

    def completion_passes(self, kmodule) -> list:
        """The passes Kernel IR scheduled elsewhere (by hand, or for another target) still
        needs before this target's codegen: none on CPUs; the GPU's grid mapping."""
        return []


class Backend:
    """Compile an llvmlite module at an optimisation level and load it for running."""

    target: Target
    emitted = None  # the codegen Emitter of the latest emit_llvm
    code_stage = "asm"  # the name of the machine-code stage in `.stages` ("ptx" on the GPU)

    @classmethod
    def for_target(cls, target: Target) -> Backend:
        """The backend for `target` (a Target this class made); the GPU keeps its sm."""
        return cls()

    def emit_llvm(self, kmodule, emitter=None) -> str:
        """Kernel IR -> unoptimised LLVM IR text for this target (the GPU overrides it).
        `emitter`: an Emitter subclass to use instead of codegen's (pipeline.Options).
        The emitter that ran stays in `self.emitted` (`.functions`: which ONNX node each
        function came from, for provenance)."""
        from compilerkit.codegen.emit import Emitter

        self.emitted = (emitter or Emitter)(kmodule, self.target)
        self.emitted.emit()
        return str(self.emitted.module)

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


def check_target_name(name: str) -> str:
    """The backend key for a target name; a ValueError listing the known ones otherwise."""
    key = ALIASES.get(name, name) if isinstance(name, str) else None
    if key not in BACKENDS:
        raise ValueError(f"unknown target {name!r}; available: {sorted(BACKENDS)}")
    return key


def get_backend(name: str | Target) -> Backend:
    """A new backend for a target name ("host", "gpu", "s390x", "ppc64"; "native" and "cpu"
    mean "host") or for a Target a backend made (`backend.target`)."""
    target = name if isinstance(name, Target) else None
    module, cls = BACKENDS[check_target_name(target.name if target else name)]
    cls = getattr(importlib.import_module(module), cls)
    return cls() if target is None else cls.for_target(target)
