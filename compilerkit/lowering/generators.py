"""Lowering of the ops whose output follows from shapes and attributes alone, not from the
input's values: EyeLike, HannWindow, HammingWindow, BlackmanWindow, Shape and Size.

EyeLike is one nest: 1 where column - row == k, else 0, in the `dtype` attribute's type (the
input's without it). A window's length is its output's static shape (the size input was a
constant, or shape inference could not have known it), so its values are computed at compile
time in float64 with ONNX's formulas (n / N with N the size when periodic, size - 1 when
symmetric) and stored as a constant; a run-time krnl.check confirms the size input holds that
length. Shape (start / end sliced as Python slices, as the spec clamps them) and Size of a
static input are constants as well; constant folding usually removes them before lowering, and
this keeps a model that still has them compiling.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from xdsl.dialects.builtin import i64

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, is_float, shape
from compilerkit.lowering.indexing import fail
from compilerkit.onnx_passes.single_node import node_label

# Constant names are unique in a module (LLVM globals), as pool.py's window counts are.
_NAMES = itertools.count()


def _constant(b: KernelBuilder, values, module, hint: str, elem):
    return b.constant(values, module, f"{hint}_{next(_NAMES)}", elem)


def lower_eye_like(b: KernelBuilder, op, ins):
    dims = shape(ins[0])
    if len(dims) != 2:
        fail(op, "the rank of input", len(dims), "2")
    k = onnx_d.get_attr(op, "k", 0)
    elem = op.results[0].type.element_type
    out = b.alloc(dims, elem)
    one, zero = (b.const(1.0, elem), b.const(0.0, elem)) if is_float(elem) else (
        b.const(1, elem), b.const(0, elem))
    with b.nest(dims) as (r, c):
        on = b.cmpi("eq", b.cast(b.affine([(c, 1), (r, -1)]), i64), b.const(k, i64))
        b.store(b.select(on, one, zero), out, [r, c])
    return [out]


def window_values(kind: str, size: int, periodic: bool) -> np.ndarray:
    """ONNX's window of `size` points, float64 (N - 1 = 0 gives NaN, as its reference does)."""
    n = np.arange(size, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = n / (size if periodic else size - 1)
        if kind == "HannWindow":
            return np.sin(np.pi * x) ** 2
        if kind == "HammingWindow":
            alpha = 25.0 / 46.0
            return alpha - (1 - alpha) * np.cos(2 * np.pi * x)
        return 0.42 - 0.5 * np.cos(2 * np.pi * x) + 0.08 * np.cos(4 * np.pi * x)


def lower_window(b: KernelBuilder, op, ins, module=None):
    kind = onnx_d.op_type(op)
    (size,) = onnx_d.shape_of(op.results[0])
    elem = op.results[0].type.element_type
    periodic = bool(onnx_d.get_attr(op, "periodic", 1))
    values = window_values(kind, size, periodic).astype(onnx_d.numpy_dtype(elem))
    ok = b.cmpi("eq", b.cast(b.load(ins[0], [b.index(0) for _ in shape(ins[0])]), i64),
                b.const(size, i64))
    b.add(krnl.CheckOp(ok, f"node {node_label(op)!r} ({kind}): the size input differs from "
                           f"the compiled window length {size}"))
    return [_constant(b, values, module, kind.lower(), elem)]


def lower_shape(b: KernelBuilder, op, ins, module=None):
    dims = list(shape(ins[0]))
    if onnx_d.op_type(op) == "Size":
        value = np.array(math.prod(dims), np.int64)
    else:
        start = onnx_d.get_attr(op, "start", 0)
        end = onnx_d.get_attr(op, "end", None)
        value = np.array(dims[start:end], np.int64)
    return [_constant(b, value, module, onnx_d.op_type(op).lower(), i64)]
