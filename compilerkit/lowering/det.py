"""Lowering of Det to Kernel IR: the determinant of each square matrix in [*, M, M], by LU
factorisation with partial pivoting (what numpy.linalg.det, ONNX's reference, does through
LAPACK's getrf).

The matrices are copied into a scratch buffer; for each column k (the M steps unrolled at
compile time, M static) the row of largest |a[i, k]|, i >= k, is found (the first one on
ties; NaN never wins), swapped into row k (the sign flips when it moves), and the rows below
lose their multiple f = a[i, k] / a[k, k] of row k (f = 0 when the pivot is 0: the column is
then all zeros and the determinant 0). The determinant is the sign times the product of the
diagonal. M above MAX_ORDER is refused (the unrolled nests grow with M).
"""

from __future__ import annotations

import math

from xdsl.dialects import arith
from xdsl.dialects.builtin import i64

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import INDEX, KernelBuilder, is_float, shape
from compilerkit.lowering.indexing import fail
from compilerkit.lowering.matmul import fill

MAX_ORDER = 64


def lower_det(b: KernelBuilder, op, ins):
    x = ins[0]
    xs = shape(x)
    elem = x.type.element_type
    if not is_float(elem):
        raise NotImplementedError(f"Det on {elem} (float inputs only)")
    if len(xs) < 2 or xs[-1] != xs[-2]:
        fail(op, "the input's shape", list(xs), "[*, M, M] (square matrices)")
    m = xs[-1]
    if m > MAX_ORDER:
        raise NotImplementedError(f"Det of {m} x {m} matrices (at most {MAX_ORDER} x "
                                  f"{MAX_ORDER}: the factorisation is unrolled over columns)")
    batch = math.prod(xs[:-2])
    out = b.alloc(onnx_d.shape_of(op.results[0]), elem)
    ov = b.view(out, [batch])
    if m == 0 or batch == 0:
        fill(b, out, 1.0)
        return [out]
    a = b.alloc([batch, m, m], elem)
    xv = b.view(x, [batch, m, m])
    with b.nest([batch, m, m]) as ivs:
        b.store(b.load(xv, ivs), a, ivs)
    sign = b.alloc([batch], elem)
    fill(b, sign, 1.0)
    best = b.alloc([batch], elem)
    piv = b.alloc([batch], i64)
    factor = b.alloc([batch, m], elem)
    zero = b.const(0.0, elem)
    for k in range(m):
        kk = b.index(k)
        with b.nest([batch, (k, m)]) as (n, i):
            v = b.unary("abs", b.load(a, [n, i, kk]))
            first = b.cmpi("eq", i, b.index(k))
            take = b.add(arith.OrIOp(first, b.cmpf("ogt", v, b.load(best, [n]))))
            b.store(b.select(take, v, b.load(best, [n])), best, [n])
            b.store(b.select(take, b.cast(i, i64), b.load(piv, [n])), piv, [n])
        with b.nest([batch, m]) as (n, j):
            p = b.clamp(b.add(arith.IndexCastOp(b.load(piv, [n]), INDEX)), m)
            top, other = b.load(a, [n, kk, j]), b.load(a, [n, p, j])
            b.store(other, a, [n, kk, j])
            b.store(top, a, [n, p, j])
        with b.nest([batch]) as (n,):
            moved = b.cmpi("ne", b.load(piv, [n]), b.const(k, i64))
            s = b.load(sign, [n])
            b.store(b.select(moved, b.neg(s), s), sign, [n])
        if k + 1 == m:
            break
        with b.nest([batch, (k + 1, m)]) as (n, i):
            pivot = b.load(a, [n, kk, kk])
            f = b.binary("div", b.load(a, [n, i, kk]), pivot)
            b.store(b.select(b.cmpf("oeq", pivot, zero), zero, f), factor, [n, i])
        with b.nest([batch, (k + 1, m), (k, m)]) as (n, i, j):
            v = b.binary("sub", b.load(a, [n, i, j]),
                         b.mul(b.load(factor, [n, i]), b.load(a, [n, kk, j])))
            b.store(v, a, [n, i, j])
    with b.nest([batch]) as (n,):
        acc = b.load(sign, [n])
        for k in range(m):
            d = b.index(k)
            acc = b.mul(acc, b.load(a, [n, d, d]))
        b.store(acc, ov, [n])
    return [out]
