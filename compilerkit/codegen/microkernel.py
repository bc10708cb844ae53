"""The matmul micro-kernel, emitted once per (element type, vector width) and shared by every
`krnl.matmul` of the model.

    void ck_matmul_<t>_v<simd>(A, B, C, i0, i1, j0, j1, k0, k1, a_off, b_off, c_off,
                               sa_r, sa_k, ldb, ldc)
    C[c_off + r*ldc + c] += A[a_off + r*sa_r + k*sa_k] * B[b_off + k*ldb + c]
    for r in [i0, i1), c in [j0, j1), k in [k0, k1)

Sizes and strides are run-time arguments, so one function serves every Conv/Gemm/MatMul tile:
LLVM optimises it once instead of once per op (inlining a vectorised kernel into each op made
-O3 compile times grow with the number of layers). The body is register-blocked: 4 rows x
2 vectors of `simd` lanes of accumulators, each B row vector is loaded once per k and used by
4 rows; leftover rows use 1-row blocks, leftover columns scalar dot products.
"""

from __future__ import annotations

import llvmlite.ir as ir

I64 = ir.IntType(64)
MR, NV = 4, 2  # accumulator block: MR rows x NV vectors (6 rows measured no faster)


def counted_loop(b: ir.IRBuilder, lo, hi, step, body):
    """for (iv = lo; iv < hi; iv += step) body(iv); returns the induction variable (its value
    after the loop is the first index not visited)."""
    pre = b.block
    head = b.append_basic_block("loop")
    inner = b.append_basic_block("body")
    done = b.append_basic_block("done")
    b.branch(head)
    b.position_at_end(head)
    iv = b.phi(I64)
    iv.add_incoming(lo, pre)
    b.cbranch(b.icmp_signed("<", iv, hi), inner, done)
    b.position_at_end(inner)
    body(iv)
    iv.add_incoming(b.add(iv, step), b.block)
    b.branch(head)
    b.position_at_end(done)
    return iv


def _fmuladd(module, vt):
    """llvm.fmuladd for a vector type or (no `count`) a scalar type."""
    element = getattr(vt, "element", vt)
    suffix = "f32" if element == ir.FloatType() else "f64"
    name = f"llvm.fmuladd.{f'v{vt.count}' if hasattr(vt, 'count') else ''}{suffix}"
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(vt, [vt, vt, vt]), name)


def matmul_kernel(module: ir.Module, elem_t, simd: int) -> ir.Function:
    """The shared kernel for `elem_t` (float or double) with `simd` lanes (built on first use)."""
    name = f"ck_matmul_{'f32' if elem_t == ir.FloatType() else 'f64'}_v{simd}"
    if name in module.globals:
        return module.globals[name]
    p = elem_t.as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [p, p, p] + [I64] * 13), name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("nounwind")
    for k in range(3):
        fn.args[k].add_attribute("noalias")  # C never overlaps A or B (distinct buffers)
    a, bm, c, i0, i1, j0, j1, k0, k1, a_off, b_off, c_off, sa_r, sa_k, ldb, ldc = fn.args
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    C = lambda v: ir.Constant(I64, v)  # noqa: E731
    vt = ir.VectorType(elem_t, simd)
    vp = vt.as_pointer()
    fma = _fmuladd(module, vt)
    scalar_fma = _fmuladd(module, elem_t)

    def alloca(t):
        # Accumulators live in entry-block allocas; SROA turns them into registers.
        with b.goto_block(entry):
            b.position_at_start(entry)
            return b.alloca(t)

    def a_at(row, k):
        return b.load(b.gep(a, [b.add(a_off, b.add(b.mul(row, sa_r), b.mul(k, sa_k)))]))

    def rows_block(rows, ii):
        accs = [[alloca(vt) for _ in range(NV)] for _ in range(rows)]

        def cols(jj):
            cptrs = [[b.bitcast(b.gep(c, [b.add(c_off, b.add(
                b.mul(b.add(ii, C(r)), ldc), b.add(jj, C(v * simd))))]), vp)
                for v in range(NV)] for r in range(rows)]
            for r in range(rows):
                for v in range(NV):
                    b.store(b.load(cptrs[r][v], align=4), accs[r][v])

            def ks(k):
                brow = b.add(b_off, b.mul(k, ldb))
                bvs = [b.load(b.bitcast(b.gep(bm, [b.add(brow, b.add(jj, C(v * simd)))]), vp),
                              align=4) for v in range(NV)]
                for r in range(rows):
                    s = a_at(b.add(ii, C(r)), k)
                    splat = b.shuffle_vector(
                        b.insert_element(ir.Constant(vt, None), s, C(0)),
                        ir.Constant(vt, None),
                        ir.Constant(ir.VectorType(ir.IntType(32), simd), None))
                    for v in range(NV):
                        b.store(b.call(fma, [splat, bvs[v], b.load(accs[r][v])]), accs[r][v])

            counted_loop(b, k0, k1, C(1), ks)
            for r in range(rows):
                for v in range(NV):
                    b.store(b.load(accs[r][v]), cptrs[r][v], align=4)

        jv = counted_loop(b, j0, b.sub(j1, C(NV * simd - 1)), C(NV * simd), cols)

        def scalar_col(j):
            # Columns left over after the vector blocks: one dot product each.
            for r in range(rows):
                row = b.add(ii, C(r))
                cp = b.gep(c, [b.add(c_off, b.add(b.mul(row, ldc), j))])
                acc = alloca(elem_t)
                b.store(b.load(cp), acc)

                def ks(k, row=row, acc=acc):
                    bv = b.load(b.gep(bm, [b.add(b_off, b.add(b.mul(k, ldb), j))]))
                    # fmuladd, as in the vector blocks: a C element is then rounded the same
                    # whichever block holds it, so results do not depend on `simd` (AVX2 vs
                    # AVX-512 hosts, 4-lane s390x/ppc64 targets agree bit for bit).
                    b.store(b.call(scalar_fma, [a_at(row, k), bv, b.load(acc)]), acc)

                counted_loop(b, k0, k1, C(1), ks)
                b.store(b.load(acc), cp)

        counted_loop(b, jv, j1, C(1), scalar_col)

    iv = counted_loop(b, i0, b.sub(i1, C(MR - 1)), C(MR), lambda ii: rows_block(MR, ii))
    counted_loop(b, iv, i1, C(1), lambda ii: rows_block(1, ii))
    b.ret_void()
    return fn
