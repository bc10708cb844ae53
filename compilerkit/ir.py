"""Printing and parsing compilerkit IR as MLIR text (both levels, plus the upstream dialects
they use: builtin, func, arith, math)."""

from __future__ import annotations

import io

from xdsl.context import Context
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.dialects.math import Math
from xdsl.parser import Parser
from xdsl.printer import Printer

from compilerkit.dialects.krnl import KRNL
from compilerkit.dialects.onnx import ONNX, share_resources


def context() -> Context:
    ctx = Context()
    for d in (Builtin, Func, Arith, Math, ONNX, KRNL):
        ctx.load_dialect(d)
    return ctx


def print_ir(module: ModuleOp) -> str:
    out = io.StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue() + "\n"


def parse_ir(text: str, resources_from: ModuleOp | None = None) -> ModuleOp:
    """Parse IR text. Large constants print as dense_resource handles whose bytes live beside
    the module: pass the module the text came from to share its resource table."""
    # xDSL keeps declared resource names in one process-wide table and renames repeats
    # (w -> w_0); start from an empty table so handles parse back unchanged.
    Builtin.get_interface(OpAsmDialectInterface)._blob_storage.clear()
    module = Parser(context(), text).parse_module()
    if resources_from is not None:
        share_resources(resources_from, module)
    return module
