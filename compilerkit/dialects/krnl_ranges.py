"""Flat-offset ranges for `krnl.parallel_conflict`: whether the iterations of one loop touch
disjoint parts of a buffer, when its index expressions mix the loop with inner loops.

The per-dimension rule in krnl.py needs one index dimension equal to the loop (times a
constant, plus a fixed offset) in every access. Panel and group schedules write through flat
offsets instead: a Conv panel writes out[oc, jp * W + q] for q < W, its column buffer
col[jp * S + e] for e < S, and a krnl.matmul reads and writes whole tiles at an offset. Here
each access is reduced to its flat element offset in the buffer (row-major over the view it
goes through; krnl.reshape views keep the element order), written as

    m * arg + F + (a sum of inner loop variables times constants) + constant

where `arg` is the loop being made parallel, F the values fixed for the whole nest (outer
induction variables, offsets computed from them), and each inner loop variable ranges over its
loop's static bounds (a krnl.matmul's tile covers rows [0, M) and columns [0, N) of its
operands). Iteration `a` then touches only m * a + F + [lo, hi], where lo and hi bound the
inner sum; when every access to the buffer has the same m and F and hi - lo < |m|, different
iterations touch disjoint offsets. Anything else (an index that is not such a sum: a clamp, a
division, a loaded value) answers "unknown", and the caller keeps the loop serial.
"""

from __future__ import annotations

import math

from xdsl.ir import Block


class _Unknown(Exception):
    pass


def _iv_bounds(v, it):
    """(lo, hi) of block argument v when it is an induction variable of `it` or of a nest
    inside it, else None."""
    owner = v.owner
    if not isinstance(owner, Block):
        return None
    op = owner.parent_op()
    if op is None or op.name != "krnl.iterate":
        return None
    p = op
    while p is not None and p is not it:
        p = p.parent_op()
    if p is None:
        return None
    return op.bound_list()[v.index]


def linear(v, arg, it, fixed) -> tuple[int, dict, list, int]:
    """v as (m, F, inner, const): m * arg + sum(F[x] * x) + sum(c * iv) + const, with `inner`
    a list of (c, lo, hi) for inner loop variables iv in [lo, hi). `fixed(x)` says whether a
    value has one value for the whole nest. Raises _Unknown for anything else."""
    if v is arg:
        return 1, {}, [], 0
    op = v.owner
    if not isinstance(op, Block):
        if op.name == "arith.constant":
            return 0, {}, [], op.value.value.data
        if op.name == "arith.index_cast":
            return linear(op.operands[0], arg, it, fixed)
        if op.name in ("arith.addi", "arith.subi"):
            sign = 1 if op.name == "arith.addi" else -1
            m1, f1, i1, c1 = linear(op.operands[0], arg, it, fixed)
            m2, f2, i2, c2 = linear(op.operands[1], arg, it, fixed)
            f = dict(f1)
            for k, (x, c) in f2.items():
                f[k] = (x, f.get(k, (x, 0))[1] + sign * c)
            return (m1 + sign * m2, f, i1 + [(sign * c, lo, hi) for c, lo, hi in i2],
                    c1 + sign * c2)
        if op.name == "arith.muli":
            for a, b in (op.operands, reversed(op.operands)):
                if not isinstance(b.owner, Block) and b.owner.name == "arith.constant":
                    k = b.owner.value.value.data
                    m, f, inner, c = linear(a, arg, it, fixed)
                    return (m * k, {key: (x, c_ * k) for key, (x, c_) in f.items()},
                            [(c_ * k, lo, hi) for c_, lo, hi in inner], c * k)
    bounds = _iv_bounds(v, it)
    if bounds is not None:
        return 0, {}, [(1, bounds[0], bounds[1])], 0
    if fixed(v):
        return 0, {id(v): (v, 1)}, [], 0
    raise _Unknown


def _span(inner, const):
    lo = hi = const
    for c, a, b in inner:
        ends = (c * a, c * (b - 1))
        lo += min(ends)
        hi += max(ends)
    return lo, hi


def flat_access(memref, indices, arg, it, fixed):
    """(m, F, inner, const) of a krnl.load/store at `indices` of `memref` (row-major)."""
    dims = memref.type.get_shape()
    m, f, inner, const = 0, {}, [], 0
    for d, ix in enumerate(indices):
        stride = math.prod(dims[d + 1:])
        m_, f_, i_, c_ = linear(ix, arg, it, fixed)
        m += m_ * stride
        for k, (x, c) in f_.items():
            f[k] = (x, f.get(k, (x, 0))[1] + c * stride)
        inner += [(c * stride, lo, hi) for c, lo, hi in i_]
        const += c_ * stride
    return m, f, inner, const


def flat_tile(off, rows, row_stride, cols, col_stride, arg, it, fixed):
    """(m, F, inner, const) of a matmul operand: off + r * row_stride + q * col_stride for
    r < rows, q < cols."""
    m, f, inner, const = linear(off, arg, it, fixed)
    return m, f, inner + [(row_stride, 0, rows), (col_stride, 0, cols)], const


def _disjoint(uses) -> str | None:
    """None when accesses [(m, F, inner, const)] are disjoint across iterations, else why not."""
    m = uses[0][0]
    if m == 0:
        return "the same offsets are written by every iteration"
    key = {k: c for k, (_, c) in uses[0][1].items() if c}
    for m2, f2, _, _ in uses[1:]:
        if m2 != m or {k: c for k, (_, c) in f2.items() if c} != key:
            return "its accesses move differently with the loop"
    spans = [_span(inner, const) for _, _, inner, const in uses]
    lo, hi = min(a for a, _ in spans), max(b for _, b in spans)
    if hi - lo >= abs(m):
        return (f"one iteration spans {hi - lo + 1} elements, more than the {abs(m)} "
                "between iterations")
    return None


def _columns(use, row, trips):
    """The part of a flat offset within rows of `row` elements: drop the terms that are whole
    rows, and check that what is left stays in [0, row) for every iteration (then offset =
    row * r + column is unique, and disjoint columns mean disjoint elements). None if not."""
    m, f, inner, const = use
    if any(c % row for _, c in f.values()):
        return None  # a fixed offset inside a row: its range is not known
    inner = [(c, lo, hi) for c, lo, hi in inner if c % row]
    const %= row
    lo, hi = _span(inner + [(m, trips[0], trips[1])], const)
    if lo < 0 or hi >= row:
        return None
    return m, {}, inner, const


def flat_conflict(accesses, arg, it, fixed, trips) -> str | None:
    """Apply the flat-offset rule to one buffer's accesses: ("element", memref, indices) or
    ("tile", off, rows, row_stride, cols, col_stride); `trips` = (lo, hi) of the loop.
    First on whole offsets, then within rows: a matmul writing a column strip of every row of
    C (a panel of output pixels for all output channels) is disjoint by columns."""
    try:
        uses = [flat_access(a[1], a[2], arg, it, fixed) if a[0] == "element"
                else flat_tile(*a[1:], arg, it, fixed) for a in accesses]
    except _Unknown:
        return "an index is not a sum of loop variables and fixed offsets"
    # Row lengths to try: the matmuls' row strides and every view's trailing sizes (a row, a
    # plane, ...).
    rows = {a[3] for a in accesses if a[0] == "tile"}
    for a in accesses:
        if a[0] == "element":
            dims = a[1].type.get_shape()
            rows |= {math.prod(dims[d:]) for d in range(1, len(dims))}
    return disjoint_forms(uses, trips, rows)


def disjoint_forms(uses, trips, rows=()) -> str | None:
    """None when the accesses [(m, F, inner, const)] touch disjoint offsets for different
    values of the loop variable in [trips[0], trips[1]), by whole offsets or, for some length
    in `rows`, by the part of the offset within rows of that length; else why not."""
    why = _disjoint(uses)
    if why is None:
        return None
    for row in sorted(r for r in rows if r > 1):
        cols = [_columns(u, row, trips) for u in uses]
        if all(c is not None for c in cols) and _disjoint(cols) is None:
            return None
    return why
