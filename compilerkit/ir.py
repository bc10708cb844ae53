"""Printing and parsing compilerkit IR as MLIR text (both levels, plus the upstream dialects
they use: builtin, func, arith, math)."""

from __future__ import annotations

import io

import numpy as np
from xdsl.context import Context
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, DenseResourceAttr, ModuleOp
from xdsl.dialects.func import Func
from xdsl.dialects.math import Math
from xdsl.parser import Parser
from xdsl.printer import Printer

from compilerkit.dialects.krnl import KRNL
from compilerkit.dialects.onnx import ONNX, numpy_dtype, resources, share_resources


def context() -> Context:
    ctx = Context()
    for d in (Builtin, Func, Arith, Math, ONNX, KRNL):
        ctx.load_dialect(d)
    return ctx


def print_ir(module: ModuleOp, with_resources: bool = False) -> str:
    """MLIR text of `module`. Large constants print as `dense_resource<handle>`; with
    `with_resources` their bytes follow in MLIR's `{-# dialect_resources: ... #-}` section (as
    mlir-opt prints them), so the text alone parses back to the same module."""
    out = io.StringIO()
    printer = Printer(stream=out)
    blobs = Builtin.get_interface(OpAsmDialectInterface)._blob_storage
    blobs.clear()
    if with_resources:
        blobs.update({k: _blob(v) for k, v in resources(module).items()})
    try:
        printer.print_op(module)
        if with_resources:
            printer.print_metadata([Builtin])
    finally:
        blobs.clear()
    return out.getvalue() + "\n"


def _blob(array) -> str:
    # MLIR's blob encoding: a little-endian u32 alignment, then the raw bytes, as hex.
    a = np.ascontiguousarray(array)
    data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
    return "0x" + int(max(a.dtype.alignment, 1)).to_bytes(4, "little").hex().upper() + \
        data.hex().upper()


def _array_of_blob(blob: str, ttype) -> np.ndarray:
    raw = bytes.fromhex(blob[2:])[4:]  # drop "0x" and the alignment word
    dtype = np.dtype(numpy_dtype(ttype.element_type)).newbyteorder("<")
    shape = tuple(ttype.get_shape())
    n = int(np.prod(shape, dtype=np.int64))
    if len(raw) != n * dtype.itemsize:
        raise ValueError(f"resource blob holds {len(raw)} bytes; {ttype} needs "
                         f"{n * dtype.itemsize}")
    return np.frombuffer(raw, dtype).astype(dtype.newbyteorder("=")).reshape(shape)


def parse_ir(text: str, resources_from: ModuleOp | None = None) -> ModuleOp:
    """Parse IR text. Large constants print as dense_resource handles whose bytes live beside
    the module: pass the module the text came from to share its resource table."""
    # xDSL keeps declared resource names in one process-wide table and renames repeats
    # (w -> w_0); start from an empty table so handles parse back unchanged.
    blobs = Builtin.get_interface(OpAsmDialectInterface)._blob_storage
    blobs.clear()
    try:
        module = Parser(context(), text).parse_module()
        parsed = {k: v for k, v in blobs.items() if v}
    finally:
        blobs.clear()
    if resources_from is not None:
        share_resources(resources_from, module)
    elif parsed:
        # A `dialect_resources` section came with the text: its blobs become the table.
        table = resources(module)
        for op in module.walk():
            for attr in (*op.attributes.values(), *op.properties.values()):
                if isinstance(attr, DenseResourceAttr) and attr.resource_handle.data in parsed:
                    handle = attr.resource_handle.data
                    table[handle] = _array_of_blob(parsed[handle], attr.type)
    return module
