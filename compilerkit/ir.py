"""Printing and parsing compilerkit IR as MLIR text (both levels, plus the upstream dialects
they use: builtin, func, arith, math, and scf's if for the tiled Convs' rare paths)."""

from __future__ import annotations

import io
import math
import re

import numpy as np
from xdsl.context import Context
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import (
    ArrayAttr,
    Builtin,
    BytesAttr,
    DenseResourceAttr,
    ModuleOp,
    StringAttr,
)
from xdsl.dialects.func import Func
from xdsl.dialects.math import Math
from xdsl.dialects.scf import Scf
from xdsl.parser import Parser
from xdsl.printer import Printer

from compilerkit.dialects.krnl import KRNL
from compilerkit.dialects.onnx import ONNX, numpy_dtype, resources, share_resources
from compilerkit.frontend.checks import DEFAULT_MAX_BYTES, check_bytes, set_budget


def context() -> Context:
    ctx = Context()
    for d in (Builtin, Func, Arith, Math, Scf, ONNX, KRNL):
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


# A shaped type of the text: tensor<2x3xf32>, memref<4xi64> (dynamic `?` dims need no bytes).
_SHAPED = re.compile(r"\b(tensor|memref)<((?:\d+x)+)(f16|bf16|f32|f64|i1|i8|i16|i32|i64|index)\b")
_ITEMSIZE = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4,
             "i64": 8, "index": 8}


def check_text_budget(text: str, max_bytes: int | None = None, where: str = "<mlir text>"
                      ) -> None:
    """Refuse IR text naming a tensor or memref above the compile budget (`max_bytes`,
    default 2 GiB) before parsing it: a 70-byte `dense<1.0> : tensor<100000x100000xf32>`
    splat is expanded by the parser into 10^10 values (a MemoryError, or the machine's memory
    gone) before any pass could check its size."""
    budget = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    head = text.split("{-#", 1)[0]  # not the resource blobs' hex
    for m in _SHAPED.finditer(head):
        dims = [int(d) for d in m.group(2).split("x")[:-1]]
        n = math.prod(dims) * _ITEMSIZE[m.group(3)]
        if n > budget:
            line = head.count("\n", 0, m.start()) + 1
            check_bytes(f"{where}:{line}: {m.group(0)}>", dims, _ITEMSIZE[m.group(3)], budget)


def _text_attr(attr):
    if isinstance(attr, BytesAttr):
        return StringAttr(attr.data.decode("utf-8", "backslashreplace"))
    if isinstance(attr, ArrayAttr) and any(isinstance(a, BytesAttr) for a in attr.data):
        return ArrayAttr([_text_attr(a) for a in attr.data])
    return attr


def _strings_as_text(module: ModuleOp) -> None:
    """xDSL prints a string holding non-ASCII characters with escapes ("\\C3\\A9 x" for a
    tensor named 'é x') and parses any escaped string back as a BytesAttr: names would come
    back as bytes. compilerkit's IR has no bytes attributes; they are made text again."""
    for op in module.walk():
        for table in (op.attributes, op.properties):
            for key, attr in list(table.items()):
                new = _text_attr(attr)
                if new is not attr:
                    table[key] = new


def parse_ir(text: str, resources_from: ModuleOp | None = None,
             max_bytes: int | None = None) -> ModuleOp:
    """Parse IR text. Large constants print as dense_resource handles whose bytes live beside
    the module: pass the module the text came from to share its resource table. No tensor or
    memref of the text may need more than `max_bytes` (default 2 GiB; check_text_budget), and
    the module keeps that budget for the passes."""
    check_text_budget(text, max_bytes)
    # xDSL keeps declared resource names in one process-wide table and renames repeats
    # (w -> w_0); start from an empty table so handles parse back unchanged.
    blobs = Builtin.get_interface(OpAsmDialectInterface)._blob_storage
    blobs.clear()
    try:
        module = Parser(context(), text).parse_module()
        parsed = {k: v for k, v in blobs.items() if v}
    finally:
        blobs.clear()
    set_budget(module, max_bytes)
    _strings_as_text(module)
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
