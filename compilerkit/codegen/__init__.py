"""Kernel IR -> LLVM IR (llvmlite). See emit.py."""

from compilerkit.codegen.emit import ENTRY, emit_llvm

__all__ = ["emit_llvm", "ENTRY"]
