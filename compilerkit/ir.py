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
from xdsl.utils.exceptions import ParseError

from compilerkit.dialects.dominance import dominance_problem
from compilerkit.dialects.krnl import KRNL
from compilerkit.dialects.onnx import ONNX, numpy_dtype, resources, share_resources
from compilerkit.frontend.checks import DEFAULT_MAX_BYTES, ModelError, check_bytes, set_budget


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


# The next string literal or `//` comment of MLIR text; a string literal's body as xDSL's lexer
# accepts it (plain characters, \\" \\n \\t \\\\ and two-hex-digit escapes). No pattern
# follows the starred group, so it never backtracks: the scan is linear in the text.
_QUOTE_OR_COMMENT = re.compile(r'"|//')
_STRING_BODY = re.compile(r'(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*')


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, pos) + 1
    return text.count("\n", 0, pos) + 1, pos - line_start + 1


def check_string_literals(text: str, where: str = "<mlir text>") -> None:
    """Refuse IR text with an unterminated or malformed string literal before xDSL sees it:
    xDSL's string pattern nests a `+` inside a `*`, and on a string with no valid end (a
    truncated `dialect_resources` blob, a stray quote) it backtracks exponentially, so 40
    characters after a lone `"` never parse."""
    pos = 0
    while (m := _QUOTE_OR_COMMENT.search(text, pos)) is not None:
        if m.group() == "//":  # a comment: its quotes are not strings
            pos = text.find("\n", m.end())
            if pos < 0:
                return
            continue
        end = _STRING_BODY.match(text, m.end()).end()
        if end < len(text) and text[end] == '"':
            pos = end + 1
            continue
        line, col = _line_col(text, m.start())
        if end == len(text):
            why = "has no closing quote before the end of the text"
        elif text[end] == "\\":
            why = (f"has an invalid escape {text[end:end + 3]!r} at column "
                   f"{_line_col(text, end)[1]} (escapes: \\n \\t \\\\ \\\" or two hex digits)")
        else:
            why = f"runs past the end of line {line} (a string literal is one line)"
        raise ModelError(f"{where}:{line}:{col}: the string literal starting here {why}")


def parse_ir(text: str, resources_from: ModuleOp | None = None,
             max_bytes: int | None = None) -> ModuleOp:
    """Parse IR text. Large constants print as dense_resource handles whose bytes live beside
    the module: pass the module the text came from to share its resource table. No tensor or
    memref of the text may need more than `max_bytes` (default 2 GiB; check_text_budget), and
    the module keeps that budget for the passes."""
    check_text_budget(text, max_bytes)
    check_string_literals(text)
    # xDSL keeps declared resource names in one process-wide table and renames repeats
    # (w -> w_0); start from an empty table so handles parse back unchanged.
    blobs = Builtin.get_interface(OpAsmDialectInterface)._blob_storage
    blobs.clear()
    try:
        try:
            module = Parser(context(), text, "<mlir text>").parse_module()
        except ParseError as e:
            # xDSL's ParseError is no compilerkit error (nor a ValueError): one naming the
            # place, with xDSL's own message and its caret under the text.
            loc = e.span.get_location()
            at = ("the text ends before the IR does" if e.span.start >= len(text.rstrip())
                  else "the IR does not parse")
            error = ModelError(f"<mlir text>:{loc.line}:{loc.col}: {at}: {e.msg.strip()}\n"
                               f"{e}")
            error.parse_place = (loc.line, loc.col, e.msg.strip())  # for a one-line report
            raise error from None
        parsed = {k: v for k, v in blobs.items() if v}
    finally:
        blobs.clear()
    problem = dominance_problem(module)
    if problem is not None:
        raise ModelError(problem)
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


def check_main(f) -> None:
    """The interface of a main function given as MLIR (hand-written, or from another tool),
    checked as `pipeline.signature` and the backends read it: `input_names` and
    `output_names` are lists of strings, one per input and output (`num_inputs` an integer
    where Kernel IR has it), `onnx_opset` an integer, and every argument and result a tensor
    or memref of an element type compilerkit computes with. A ModelError names what is wrong
    (a KeyError, zip's ValueError or a NotImplementedError before)."""
    from xdsl.dialects.builtin import IntegerAttr, MemRefType, TensorType, UnrankedTensorType

    where = f"func.func @{f.sym_name.data}"
    args = [a.type for a in f.body.block.args]
    results = list(f.function_type.outputs.data)
    n_in = len(args)
    if "num_inputs" in f.attributes:
        attr = f.attributes["num_inputs"]
        if not isinstance(attr, IntegerAttr) or not 0 <= attr.value.data <= len(args):
            raise ModelError(f"{where}: num_inputs must be an integer from 0 to {len(args)} (its "
                             f"arguments are the inputs, then the output buffers); got {attr}")
        n_in = attr.value.data
    counts = {"input_names": n_in, "output_names": len(args) - n_in if "num_inputs" in
              f.attributes else len(results)}
    for key, count in counts.items():
        attr = f.attributes.get(key)
        if attr is None:
            raise ModelError(f"{where} has no {key} attribute: compilerkit's IR names its "
                             f'inputs and outputs ({key} = ["x", ...], as it prints them)')
        if not isinstance(attr, ArrayAttr) or not all(isinstance(a, StringAttr)
                                                      for a in attr.data):
            raise ModelError(f"{where}: {key} must be a list of strings, got {attr}")
        if len(attr.data) != count:
            raise ModelError(f"{where}: {key} lists {len(attr.data)} names for {count} "
                             f"{key.split('_')[0]}s")
    from compilerkit.frontend.hygiene import MAX_OPSET, MIN_OPSET

    opset = f.attributes.get("onnx_opset")
    if opset is not None and not (isinstance(opset, IntegerAttr)
                                  and MIN_OPSET <= opset.value.data <= MAX_OPSET):
        raise ModelError(f"{where}: onnx_opset must be an integer from {MIN_OPSET} to "
                         f"{MAX_OPSET} (the opsets compilerkit compiles), got {opset}")
    for what, types in (("argument", args), ("result", results)):
        for k, t in enumerate(types):
            if not isinstance(t, (TensorType, UnrankedTensorType, MemRefType)):
                raise ModelError(f"{where}: {what} {k} has type {t}; compilerkit's functions "
                                 "take and return tensors (ONNX IR) or memrefs (Kernel IR)")
            try:
                numpy_dtype(t.element_type)
            except NotImplementedError:
                raise ModelError(f"{where}: {what} {k} has element type {t.element_type}, "
                                 "which compilerkit does not compute with (supported: f32, "
                                 "f64, i64, i32, i16, i8, i1)") from None
