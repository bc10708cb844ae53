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


# ---- index ranges: every krnl.load / krnl.store / krnl.matmul stays inside its buffer -------
#
# The verifier bounds each index by interval arithmetic from the loops' static bounds (the
# induction variable of a loop [lo, hi) ranges over [lo, hi - 1]; a tile loop's value is a tile
# start, also in it), constants, and the integer ops lowering writes (add, sub, mul, min, max:
# a clamp, select, division and remainder by a constant). An index whose range is known and
# leaves its dimension is refused (the code would read or write outside the buffer); one that
# depends on data (a loaded value: Gather's indices, unclamped) has an unknown bound and is
# checked at run time instead (krnl_passes/guard_indices.py). Ranges past +-2**62 count as
# unknown: the machine's i64 arithmetic could wrap there.

LIMIT = 1 << 62
UNKNOWN = (None, None)
_BOUNDED_CASTS = ("arith.index_cast", "arith.extsi", "arith.trunci", "arith.index_castui")


def _checked(lo, hi):
    return (lo if lo is not None and abs(lo) < LIMIT else None,
            hi if hi is not None and abs(hi) < LIMIT else None)


def _iterate_of(arg):
    """The krnl.iterate whose induction variable block argument `arg` is, else None."""
    owner = arg.owner
    if not isinstance(owner, Block):
        return None
    op = owner.parent_op()
    return op if op is not None and op.name == "krnl.iterate" else None


def value_range(v, memo: dict | None = None) -> tuple:
    """(lo, hi), inclusive, of the integer or index value `v` over every execution; a bound is
    None when it is not known (data, or an op the analysis does not model)."""
    memo = {} if memo is None else memo
    key = id(v)
    if key not in memo:
        memo[key] = UNKNOWN  # a cycle (there is none in SSA) stays unknown
        memo[key] = _checked(*_range(v, memo))
    return memo[key]


def _range(v, memo):
    it = _iterate_of(v)
    if it is not None:
        bounds = it.bound_list()
        if v.index >= len(bounds):
            return UNKNOWN
        lo, hi = bounds[v.index]
        return lo, hi - 1
    op = v.owner
    if isinstance(op, Block):
        return UNKNOWN
    name = op.name
    if name == "arith.constant":
        value = getattr(op.value, "value", None)
        data = getattr(value, "data", None)
        return (data, data) if isinstance(data, int) else UNKNOWN
    r = [value_range(x, memo) for x in op.operands] if name.startswith("arith.") else []
    if name in _BOUNDED_CASTS:
        lo, hi = r[0]
        width = getattr(getattr(op.results[0].type, "width", None), "data", 64)
        half = 1 << (width - 1)
        fits = lo is not None and hi is not None and -half <= lo and hi < half
        return r[0] if fits or width >= 64 else UNKNOWN
    if name == "arith.addi":
        (a, b), (c, d) = r
        return (None if a is None or c is None else a + c,
                None if b is None or d is None else b + d)
    if name == "arith.subi":
        (a, b), (c, d) = r
        return (None if a is None or d is None else a - d,
                None if b is None or c is None else b - c)
    if name == "arith.muli":
        if None in r[0] or None in r[1]:
            return UNKNOWN
        corners = [x * y for x in r[0] for y in r[1]]
        return min(corners), max(corners)
    if name in ("arith.maxsi", "arith.minsi"):
        (a, b), (c, d) = r
        if name == "arith.maxsi":  # an unknown low end is -inf: the other one bounds it
            return (max(x for x in (a, c) if x is not None) if (a, c) != (None, None) else None,
                    None if b is None or d is None else max(b, d))
        return (None if a is None or c is None else min(a, c),
                min(x for x in (b, d) if x is not None) if (b, d) != (None, None) else None)
    if name == "arith.select":
        (a, b), (c, d) = r[1], r[2]
        return (None if a is None or c is None else min(a, c),
                None if b is None or d is None else max(b, d))
    if name in ("arith.remsi", "arith.divsi"):
        (a, b), (c, d) = r
        if c is None or d is None or c <= 0:
            return UNKNOWN  # (a divisor that may be 0 or negative: not modelled)
        if name == "arith.remsi":
            top = d - 1
            if a is not None and a >= 0:
                return 0, top if b is None else min(b, top)
            return -top, top if b is None or b >= 0 else 0
        q = lambda x, y: None if x is None else int(x / y)  # noqa: E731 (truncating, as divsi)
        lo = [q(a, c), q(a, d)]
        hi = [q(b, c), q(b, d)]
        return (None if None in lo else min(lo), None if None in hi else max(hi))
    if name == "arith.cmpi":
        return 0, 1
    return UNKNOWN


def _runs(op) -> bool:
    """False when some krnl.iterate around `op` has an empty loop (its body never runs)."""
    p = op.parent_op()
    while p is not None:
        if p.name == "krnl.iterate" and any(hi <= lo for lo, hi in p.bound_list()):
            return False
        p = p.parent_op()
    return True


def _node(op) -> str:
    p = op
    while p is not None:
        tag = p.attributes.get("onnx_node")
        if tag is not None:
            return f" (node {tag.data!r})"
        p = p.parent_op()
    return ""


def _buffer(memref) -> str:
    """The buffer a memref value is, for a message: the model's input or output by name, a
    weight by symbol, else a planned intermediate."""
    root = memref
    while root.owner.__class__.__name__ == "ReshapeOp":
        root = root.owner.source
    what = "an intermediate buffer"
    if isinstance(root.owner, Block):
        fn, k = root.owner.parent_op(), root.index
        names = [[a.data for a in getattr(fn.attributes.get(key), "data", ())]
                 for key in ("input_names", "output_names")]
        if k < len(names[0]):
            what = f"model input {names[0][k]!r}"
        elif k - len(names[0]) < len(names[1]):
            what = f"model output {names[1][k - len(names[0])]!r}"
        else:
            what = f"argument {k}"
    elif root.owner.name == "krnl.global":
        what = f"weight {root.owner.sym_name.data!r}"
    elif root.owner.name == "krnl.alloc":
        what = "an intermediate buffer (krnl.alloc)"
    return f"{what} ({memref.type})"


def unproven_dims(op, memo: dict | None = None) -> list[int]:
    """The dimensions of a krnl.load / krnl.store whose index has an unknown bound: the
    generated code must check them at run time (guard_indices)."""
    if not _runs(op):
        return []
    memo = {} if memo is None else memo
    return [d for d, ix in enumerate(op.indices) if None in value_range(ix, memo)]


def access_problem(op, memo: dict | None = None) -> str | None:
    """Why the krnl.load / krnl.store / krnl.matmul `op` may leave its buffer, judged from the
    index ranges, or None. Unknown bounds are not a problem here (they are checked at run
    time); a known range that leaves a dimension, or a matmul tile that leaves its operand, is."""
    if not _runs(op):
        return None
    memo = {} if memo is None else memo
    if op.name == "krnl.matmul":
        return _matmul_problem(op, memo)
    dims = op.memref.type.get_shape()
    for d, (ix, size) in enumerate(zip(op.indices, dims, strict=True)):
        lo, hi = value_range(ix, memo)
        if (lo is not None and lo < 0) or (hi is not None and hi >= size):
            shown = f"[{'?' if lo is None else lo}, {'?' if hi is None else hi}]"
            return (f"{op.name} of {_buffer(op.memref)}{_node(op)}: index {d} ranges over "
                    f"{shown}, outside dimension {d} of size {size} (valid: [0, {size - 1}])")
    return None


def _span_of(terms, const=0):
    """(lo, hi) of const + sum of c * x for (c, (lo, hi)) in terms; None when unknown."""
    lo = hi = const
    for c, (a, b) in terms:
        if a is None or b is None:
            return None
        lo += min(c * a, c * b)
        hi += max(c * a, c * b)
    return lo, hi


def ints_of(attr) -> list[int]:
    """An ArrayAttr of IntegerAttrs as ints. It lives here, not in krnl.py, because krnl.py's
    verifier calls this module: krnl.py imports it from here (krnl.ints_of), never back."""
    return [a.value.data for a in attr.data]


def _matmul_problem(op, memo) -> str | None:
    m, n, k = ints_of(op.sizes)
    tm, tn, tk = ints_of(op.tile)
    whole = (tm, tn, tk) != (1, 1, 1)  # a tile is clipped to the sizes; one element is not

    def rows(v, t, size):
        lo, hi = value_range(v, memo)
        if lo is None or hi is None:
            return None
        return lo, (min(hi + t - 1, size - 1) if whole else hi)

    # The sizes first: the tiling and parallel passes, loopnest and the GPU map take [M, N, K]
    # as the nest's extent, so the whole M x K, K x N and M x N matrices must fit their
    # operands whatever the loops written now cover.
    if 0 not in (m, n, k):
        why = _operands_problem(op, (0, m - 1), (0, n - 1), (0, k - 1), memo, "matrix")
        if why is not None:
            return why
    r, c, q = rows(op.i, tm, m), rows(op.j, tn, n), rows(op.k, tk, k)
    if r is None or c is None or q is None:
        return (f"krnl.matmul{_node(op)}: its tile position (i, j, k) depends on data; "
                "the verifier cannot bound it")
    if r[0] > r[1] or c[0] > c[1] or q[0] > q[1]:
        return None  # no element is computed
    why = _operands_problem(op, r, c, q, memo, "tiles")
    if why is not None:
        return why
    for name, v, size in (("i", op.i, m), ("j", op.j, n), ("k", op.k, k)):
        lo, hi = value_range(v, memo)
        if lo < 0 or hi >= size:
            # A tile is clipped to the sizes, so a tile starting outside [0, size) computes
            # nothing; but a loop that puts it there is not a nest any lowering writes (tile
            # starts come from loops over [0, size)), and it may run 2**40 empty tiles.
            return (f"krnl.matmul{_node(op)}: its tile position {name} ranges over "
                    f"[{lo}, {hi}], outside [0, {size - 1}] of its sizes {ints_of(op.sizes)} "
                    "(a loop bound beyond the matrix)")
    return None


def _operands_problem(op, r, c, q, memo, what_part) -> str | None:
    """Why rows r, columns c and k range q (inclusive) of a krnl.matmul's A, B and C, at
    their offsets and strides, leave an operand's buffer, or None."""
    sa, sk, ldb, ldc = ints_of(op.strides)
    a_terms = [(sa, r), (sk, q)]
    if op.taps is not None:  # column k at (k // T) * sk + taps[k % T]
        t = len(op.taps)
        a_terms = [(sa, r), (sk, (q[0] // t, q[1] // t)), (1, (min(op.taps), max(op.taps)))]
    for what, mem, off, terms in (("A", op.a, op.a_off, a_terms),
                                  ("B", op.b, op.b_off, [(ldb, q), (1, c)]),
                                  ("C", op.c, op.c_off, [(ldc, r), (1, c)])):
        base = value_range(off, memo)
        span = _span_of(terms + [(1, base)])
        size = math.prod(mem.type.get_shape())
        if span is None:
            return (f"krnl.matmul{_node(op)}: the offset of {what} in {_buffer(mem)} depends "
                    "on data; the verifier cannot bound it")
        if span[0] < 0 or span[1] >= size:
            if what_part == "matrix":
                return (f"krnl.matmul{_node(op)}: its {what} matrix (sizes "
                        f"{ints_of(op.sizes)}, strides {ints_of(op.strides)}) reaches elements "
                        f"[{span[0]}, {span[1]}] of {_buffer(mem)}, which has {size}")
            return (f"krnl.matmul{_node(op)}: its {what} tiles reach elements [{span[0]}, "
                    f"{span[1]}] of {_buffer(mem)}, which has {size} (rows {list(r)}, "
                    f"columns {list(c)}, k {list(q)})")
    return None
