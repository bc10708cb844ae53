"""Lowering of MatMul (numpy batch broadcasting, 1-D operands) and Gemm (transA/transB,
alpha, beta, broadcast C) to Kernel IR.

Every product becomes a loop nest over (i, j, k) whose body is one `krnl.matmul` with tile
[1, 1, 1], i.e. one multiply-add; the -O3 krnl pass `tile_matmul` blocks and permutes that nest
and grows the tile, so the same op becomes a vectorised micro-kernel. krnl.matmul needs rows of
B and C contiguous, so a transposed, non-constant B is copied first (constant ones were already
transposed by the decomposition pass).

Constant B operands (a Conv's transposed weights, Winograd's and the FFT's transformed weights)
are stored at compile time in strips (`in_strips`) one micro-kernel register block wide, two
vectors of the target (`strip_width`: 32 columns on AVX-512, 16 on AVX2, 8 on the 4-lane
emulated targets), and multiplied strip by strip (`emit_strip_matmul`): the kernel reads each
strip in place instead of packing it on every call (codegen/microkernel.py: `ldb == NR`).
The lanes are the `lanes` option of the `lower-to-krnl` pass (the compile sets the target's;
`python -m compilerkit.opt -p lower-to-krnl` without it stores AVX-512's). Same sums in the
same order as B read whole: same bits. MatMul with a constant 2-D B (x @ W, a transformer's
projections) takes the same path where it measured faster (`_constant_strips`), all of A's
batch rows as the rows of one product.
"""

from __future__ import annotations

import math

import numpy as np

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.dialects.onnx_schema import onnx_type_name
from compilerkit.frontend import UnsupportedOpError
from compilerkit.lowering.builder import KernelBuilder, broadcast_index, is_float, shape, strides
from compilerkit.onnx_passes.single_node import node_label


def emit_matmul(b: KernelBuilder, a, bm, c, m, n, k, offs, a_strides, ldb, ldc, start=None,
                bias=None, clamp=(None, None), a_taps=None):
    """C[c_off + i*ldc + j] += A[a_off + i*sa + k*sk] * B[b_off + k*ldb + j] over (M, N, K).
    `start` "zero" or "bias" (krnl.matmul's): C's (M, N) block starts from 0 or bias[i]
    instead of its own values. `clamp` (lo, hi), None where unbounded: the finished block
    is clamped (krnl.matmul's clamp_lo / clamp_hi). `a_taps`: A's column k at
    (k // T) * sk + a_taps[k % T] (krnl.matmul's)."""
    if 0 in (m, n):  # no output
        return
    if k == 0:  # nothing to add: C keeps its value, or takes the start's
        cv = b.view(c, [math.prod(shape(c))])
        if start is not None or any(x is not None for x in clamp):
            t = c.type.element_type
            with b.nest([m, n]) as (i, j):
                at = [b.affine([(offs[2], 1), (i, ldc), (j, 1)])]
                v = (b.load(bias, [i]) if start == "bias" else b.const(0.0, t)
                     if start == "zero" else b.load(cv, at))
                for kind, bound in zip(("max", "min"), clamp, strict=True):
                    if bound is not None:
                        v = b.binary(kind, v, b.const(bound, t))
                b.store(v, cv, at)
        return
    with b.nest([m, n, k]) as (i, j, kk):
        b.block.add_op(krnl.MatMulOp(a, bm, c, i, j, kk, offs, sizes=[m, n, k], tile=[1, 1, 1],
                                     strides=[a_strides[0], a_strides[1], ldb, ldc], simd=1,
                                     start=start, bias=bias, clamp=clamp, a_taps=a_taps))


def strip_width(n: int, lanes: int) -> int:
    """Columns per strip of a constant B of `n` columns on a target with `lanes` f32 lanes: the
    micro-kernel's NR, two vectors; a target without vectors (the GPU, 1 lane) keeps B whole,
    one strip of n."""
    return 2 * lanes if lanes > 1 else max(n, 1)  # a strip of no columns would divide by 0


def in_strips(bmat: np.ndarray, width: int) -> np.ndarray:
    """B [..., K, N] as strips [..., ceil(N / width), K, width], N zero-padded to whole
    strips: strip s holds B[..., :, s*width : (s+1)*width], each of its rows contiguous."""
    *lead, k, n = bmat.shape
    strips = -(-n // width)
    padded = np.zeros((*lead, k, strips * width), bmat.dtype)
    padded[..., :n] = bmat
    return np.ascontiguousarray(
        np.moveaxis(padded.reshape(*lead, k, strips, width), -2, -3))


def emit_strip_matmul(b: KernelBuilder, a, strips, c, m, n, k, offs, a_strides, ldc, width,
                      start=None, bias=None, clamp=(None, None), a_taps=None):
    """C[c_off + i*ldc + j] += A[a_off + i*sa + k*sk] * B[k, j] over (M, N, K), B stored by
    `in_strips(.., width)` from element offs[1] on; N a multiple of `width` (C's columns past
    the real ones, if B was padded, are C's to spare). One product per strip, strip-major.
    `start`, `bias`, `clamp`, `a_taps`: emit_matmul's."""
    if n % width:
        raise ValueError(f"emit_strip_matmul: {n} columns are not whole strips of {width}")
    a_off, b_off, c_off = offs
    with b.nest([n // width]) as (s,):
        at = [a_off, b.affine([(b_off, 1), (s, k * width)]), b.affine([(c_off, 1), (s, width)])]
        emit_matmul(b, a, strips, c, m, width, k, at, a_strides, width, ldc, start, bias, clamp,
                    a_taps)


def fill(b: KernelBuilder, out, value):
    with b.nest(shape(out)) as ivs:
        b.store(b.const(value, out.type.element_type), out, ivs)


def integer_matmul(b: KernelBuilder, a, bm, out, batch, m, n, k, trans_a=False, trans_b=False):
    """out[..., i, j] += sum over k of A[..., i, k] * B[..., k, j] in integer arithmetic
    (wrapping, as onnxruntime's integer MatMul does), batch dims broadcast; `a`, `bm`, `out`
    are views with 2 + batch-or-fewer dims, `trans_*` read A as [K, M] / B as [N, K].
    krnl.matmul is floating point only (its nest and micro-kernel are fused multiply-adds),
    so integer products are a plain nest, (i, k, j) with j innermost: rows of B and C at
    stride 1, a vector loop (wrapping sums: any order gives the same bits)."""
    with b.nest(list(batch) + [m, k, n]) as ivs:
        *outer, i, kk, j = ivs
        a_at = broadcast_index(b, outer, shape(a)[:-2]) + ([kk, i] if trans_a else [i, kk])
        b_at = broadcast_index(b, outer, shape(bm)[:-2]) + ([j, kk] if trans_b else [kk, j])
        at = list(outer) + [i, j]
        b.store(b.add_(b.load(out, at), b.mul(b.load(a, a_at), b.load(bm, b_at))), out, at)


def lower_matmul(b: KernelBuilder, op, ins, module=None):
    a, bm = ins
    sa, sb = list(shape(a)), list(shape(bm))
    a2 = [1] + sa if len(sa) == 1 else sa
    b2 = sb + [1] if len(sb) == 1 else sb
    m, k = a2[-2], a2[-1]
    n = b2[-1]
    out_dims = onnx_d.shape_of(op.results[0])
    out = b.alloc(out_dims, op.results[0].type.element_type)
    batch = list(np.broadcast_shapes(tuple(a2[:-2]), tuple(b2[:-2])))
    if not is_float(op.results[0].type.element_type):
        fill(b, out, 0.0)
        integer_matmul(b, b.view(a, a2), b.view(bm, b2), b.view(out, batch + [m, n]), batch,
                       m, n, k)
        return [out]
    a_batch, b_batch = a2[:-2], b2[:-2]
    rows = math.prod(batch) * m
    strips = _constant_strips(b, op, module, rows, n, k) if len(sb) == 2 else None
    if strips is not None:
        # x @ W with a constant W: every batch entry's rows are rows of one product.
        zero = b.index(0)
        emit_strip_matmul(b, a, strips, out, rows, n, k, [zero, zero, zero],
                          (k, 1), n, strip_width(n, b.lanes), start="zero")
        return [out]
    with b.nest(batch) as ivs:
        # Element offsets of this batch entry in each flat buffer (broadcast batch dims).
        def offset(dims, mat_size):
            idx = broadcast_index(b, ivs, dims) if dims else []
            st = strides(dims)
            terms = [(iv, s * mat_size) for iv, s, d in zip(idx, st, dims, strict=True) if d != 1]
            return b.affine(terms)

        offs = [offset(a_batch, m * k), offset(b_batch, k * n),
                b.affine([(iv, s * m * n) for iv, s in zip(ivs, strides(batch), strict=True)])]
        emit_matmul(b, a, bm, out, m, n, k, offs, (k, 1), n, n, start="zero")
    return [out]


STRIP_MIN_ROWS = 24  # fewer rows: the micro-kernel reads B in place anyway (PACK_MIN_ROWS)
STRIP_MAX_COLUMNS = 512  # wider: one product per strip re-reads A too often


def _constant_strips(b: KernelBuilder, op, module, m: int, n: int, k: int):
    """A constant 2-D float B (a layer's weights) as `in_strips` in the module, for the
    micro-kernel to read in place (the module docstring); None when B is not constant, the
    target has no vectors, or N is not whole strips (C would need padding columns), and
    outside the sizes where it measured faster than packing B (1 thread, AVX2: 128 x 256 x
    256 0.77x -> 0.90x onnxruntime, 64 x 128 x 512 0.73x -> 0.88x, 128 x 1024 x 256 0.83x
    -> 0.97x; 128 x 256 x 1024 and one-row products were slower in strips)."""
    if (module is None or b.lanes <= 1 or n % strip_width(n, b.lanes)
            or m < STRIP_MIN_ROWS or n > STRIP_MAX_COLUMNS):
        return None
    elem = op.results[0].type.element_type
    bnp = onnx_d.constant_value(op.operands[1], module)
    if bnp is None or not is_float(elem):
        return None
    bnp = np.asarray(bnp).reshape(k, n).astype(onnx_d.numpy_dtype(elem), copy=False)
    return b.constant(in_strips(bnp, strip_width(n, b.lanes)), module,
                      f"bt_{node_label(op)}", elem)


def lower_gemm(b: KernelBuilder, op, ins):
    a, bm = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else None
    trans_a = onnx_d.get_attr(op, "transA", 0)
    trans_b = onnx_d.get_attr(op, "transB", 0)
    alpha = onnx_d.get_attr(op, "alpha", 1.0)
    beta = onnx_d.get_attr(op, "beta", 1.0)
    m, n = onnx_d.shape_of(op.results[0])
    k = shape(a)[0] if trans_a else shape(a)[1]
    elem = op.results[0].type.element_type
    if not is_float(elem):
        return _integer_gemm(b, op, a, bm, c, m, n, k, trans_a, trans_b, alpha, beta)
    if trans_b:
        # Copy B^T into a row-major (K, N) buffer: the micro-kernel reads rows of B.
        bt = b.alloc([k, n], elem)
        with b.nest([k, n]) as (kk, j):
            b.store(b.load(bm, [j, kk]), bt, [kk, j])
        bm = bt
    out = b.alloc([m, n], elem)
    scale_after = alpha != 1.0
    if c is not None and beta != 0.0 and not scale_after:
        with b.nest([m, n]) as ivs:
            v = b.load(c, broadcast_index(b, ivs, shape(c)))
            if beta != 1.0:
                v = b.mul(v, b.const(beta, elem))
            b.store(v, out, ivs)
    zero = b.index(0)
    # without a C to start from, the product starts its tiles from zero (krnl.matmul start)
    start = None if c is not None and beta != 0.0 and not scale_after else "zero"
    emit_matmul(b, a, bm, out, m, n, k, [zero, zero, zero], (1, m) if trans_a else (k, 1), n, n,
                start=start)
    if scale_after:
        with b.nest([m, n]) as ivs:
            v = b.mul(b.load(out, ivs), b.const(alpha, elem))
            if c is not None and beta != 0.0:
                cv = b.mul(b.load(c, broadcast_index(b, ivs, shape(c))), b.const(beta, elem))
                v = b.add_(v, cv)
            b.store(v, out, ivs)
    return [out]


def _integer_gemm(b: KernelBuilder, op, a, bm, c, m, n, k, trans_a, trans_b, alpha, beta):
    """alpha * A @ B + beta * C for integer tensors, with whole-number alpha and beta (the
    float attributes have no integer meaning otherwise; onnxruntime has no integer Gemm)."""
    elem = op.results[0].type.element_type
    for name, value in (("alpha", alpha), ("beta", beta)):
        if float(value) != int(value):
            raise UnsupportedOpError(
                f"node {node_label(op)!r} (Gemm): {name}={value} "
                f"on {onnx_type_name(op.results[0].type)} tensors is not supported (integer "
                "Gemm is computed in integer arithmetic: alpha and beta must be whole numbers)")
    out = b.alloc([m, n], elem)
    fill(b, out, 0.0)
    integer_matmul(b, a, bm, out, [], m, n, k, trans_a, trans_b)
    if alpha != 1 or (c is not None and beta != 0):
        with b.nest([m, n]) as ivs:
            v = b.load(out, ivs)
            if alpha != 1:
                v = b.mul(v, b.const(int(alpha), elem))
            if c is not None and beta != 0:
                cv = b.load(c, broadcast_index(b, ivs, shape(c)))
                v = b.add_(v, cv if beta == 1 else b.mul(cv, b.const(int(beta), elem)))
            b.store(v, out, ivs)
    return [out]
