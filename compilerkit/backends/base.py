"""The Target description and the Backend interface.

A Target says what codegen needs to know (triple, data layout, byte order, vector width); a
Backend turns LLVM IR into something runnable. `compile(target=...)` looks the name up here and
nothing else branches on it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str
    triple: str
    data_layout: str
    byte_order: str  # "little" or "big"
    vector_width: int  # f32 lanes of the widest vector unit codegen should use
    cpu: str = ""
    features: str = ""


class Backend:
    """Compile an llvmlite module at an optimisation level and load it for running."""

    target: Target

    def optimize(self, llvm_ir: str, opt_level: int):  # -> (optimised IR text, binding module)
        raise NotImplementedError

    def assembly(self, module) -> str:
        raise NotImplementedError

    def load(self, module, entry: str):  # -> a callable taking a void** array
        raise NotImplementedError


def get_backend(name: str) -> Backend:
    if name in ("host", "native", "cpu"):
        from compilerkit.backends.host import HostBackend

        return HostBackend()
    raise ValueError(f"unknown target {name!r}; available: 'host'")
