"""Lowering of the data-indexed ops to Kernel IR: GatherElements, GatherND, ScatterElements (and
its old name Scatter), ScatterND and OneHot.

Indices come from data, so each one is checked at run time as Gather's are
(shape_ops.lower_gather): a nest of its own loads every index, wraps a negative one (-1 is the
last) and reports one out of range through `krnl.check` (the call raises RunError naming the
node, the axis and the valid range); the nest that then reads or writes clamps the index into
the buffer, so a failed check never becomes a wild access. Scatter writes into a copy of
`data` in the order of the indices (the last update to a duplicated index wins, as in
onnxruntime's serial loop), combining with the old value by the `reduction` attribute
(none/add/mul/max/min). OneHot's out-of-range indices are no error: ONNX gives their row all
`off` values.
"""

from __future__ import annotations

from xdsl.dialects.builtin import i1, i64

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError
from compilerkit.lowering.builder import KernelBuilder, shape
from compilerkit.lowering.shape_ops import wrapped_index

REDUCTIONS = ("none", "add", "mul", "max", "min")


def _name(op) -> str:
    a = op.attributes.get("onnx_node_name")
    return a.data if a is not None else "?"


def fail(op, what: str, value, expected: str):
    """A model ONNX's shape inference let through but onnxruntime refuses: ModelError naming the
    node, what is wrong and what was expected (validate_onnx.py's wording)."""
    raise ModelError(f"node {_name(op)!r} ({onnx_d.op_type(op)}): {what} is {value}; expected "
                     f"{expected}")


def _same_shape(op, what, got, want, expected):
    if tuple(got) != tuple(want):
        fail(op, f"the shape of {what}", list(got), f"{list(want)} ({expected})")


def _axis(op, rank: int) -> int:
    axis = onnx_d.get_attr(op, "axis", 0)
    if not -rank <= axis < rank:
        fail(op, "attribute axis", axis, f"a value in [{-rank}, {rank - 1}]")
    return axis + rank if axis < 0 else axis


def _check(b: KernelBuilder, op, raw, d: int, what: str):
    """krnl.check that the loaded index `raw` lies in [-d, d - 1]."""
    ok = b.in_range([(wrapped_index(b, raw, d), d)])
    b.add(krnl.CheckOp(ok, f"node {_name(op)!r} ({onnx_d.op_type(op)}): an index {what} is out "
                           f"of range; valid indices are [{-d}, {d - 1}]"))


def _safe(b: KernelBuilder, raw, d: int):
    """The loaded index wrapped and clamped into [0, d): in range whenever its check passed."""
    return b.clamp(wrapped_index(b, raw, d), d)


def _copy(b: KernelBuilder, src, elem):
    out = b.alloc(shape(src), elem)
    with b.nest(shape(src)) as ivs:
        b.store(b.load(src, ivs), out, ivs)
    return out


def _reduction(op):
    red = onnx_d.get_attr(op, "reduction", "none")
    if red not in REDUCTIONS:
        raise NotImplementedError(f"{onnx_d.op_type(op)} reduction {red!r} (supported: "
                                  f"{', '.join(REDUCTIONS)})")
    elem = op.results[0].type.element_type
    if red != "none" and elem == i1:
        raise NotImplementedError(f"{onnx_d.op_type(op)} reduction {red!r} on bool")
    return red


def _combine(b: KernelBuilder, red: str, out, dst, new):
    """The value to store at out[dst]: `new`, or the reduction of the old value with it."""
    return new if red == "none" else b.binary(red, b.load(out, dst), new)


def lower_gather_elements(b: KernelBuilder, op, ins):
    """out[i] = data[i with i[axis] replaced by indices[i]]; out has the indices' shape."""
    data, indices = ins
    dd, idims = shape(data), shape(indices)
    if len(idims) != len(dd):
        fail(op, "the rank of indices", len(idims), f"the rank of data, {len(dd)}")
    axis = _axis(op, len(dd))
    d = dd[axis]
    out = b.alloc(onnx_d.shape_of(op.results[0]), data.type.element_type)
    with b.nest(idims) as ivs:
        _check(b, op, b.load(indices, ivs), d, f"on axis {axis}")
    if d == 0:
        return [out]  # every index is out of range (reported); nothing to read
    with b.nest(idims) as ivs:
        src = list(ivs)
        src[axis] = _safe(b, b.load(indices, ivs), d)
        b.store(b.load(data, src), out, ivs)
    return [out]


def lower_gather_nd(b: KernelBuilder, op, ins):
    """out[batch, j, rest] = data[batch, indices[batch, j, 0..k-1], rest]: the last dim of
    indices (k) indexes k dims of data after the `batch_dims` leading ones."""
    data, indices = ins
    dd, idims = shape(data), shape(indices)
    nb = onnx_d.get_attr(op, "batch_dims", 0)
    k = idims[-1]
    if nb + k > len(dd):
        fail(op, "batch_dims plus the last dim of indices", nb + k,
             f"at most the rank of data, {len(dd)}")
    _same_shape(op, "indices' batch dims", idims[:nb], dd[:nb], "data's first batch_dims dims")
    out = b.alloc(onnx_d.shape_of(op.results[0]), data.type.element_type)
    lead = list(idims[:-1])
    with b.nest(lead) as ivs:
        for c in range(k):
            _check(b, op, b.load(indices, list(ivs) + [b.index(c)]), dd[nb + c],
                   f"for data axis {nb + c}")
    if any(dd[nb + c] == 0 for c in range(k)):
        return [out]
    rest = list(dd[nb + k:])
    with b.nest(lead + rest) as ivs:
        at, tail = list(ivs[:len(lead)]), list(ivs[len(lead):])
        picked = [_safe(b, b.load(indices, at + [b.index(c)]), dd[nb + c]) for c in range(k)]
        src = at[:nb] + picked + tail
        b.store(b.load(data, src), b.view(out, lead + rest), ivs)
    return [out]


def lower_scatter_elements(b: KernelBuilder, op, ins):
    """out = data; then for every position i of indices, in order:
    out[i with i[axis] = indices[i]] = reduce(that element, updates[i])."""
    data, indices, updates = ins
    dd, idims = shape(data), shape(indices)
    if len(idims) != len(dd):
        fail(op, "the rank of indices", len(idims), f"the rank of data, {len(dd)}")
    _same_shape(op, "updates", shape(updates), idims, "the shape of indices")
    axis = _axis(op, len(dd))
    red = _reduction(op)
    d = dd[axis]
    out = _copy(b, data, data.type.element_type)
    with b.nest(idims) as ivs:
        _check(b, op, b.load(indices, ivs), d, f"on axis {axis}")
    if d == 0:
        return [out]
    with b.nest(idims) as ivs:
        dst = list(ivs)
        dst[axis] = _safe(b, b.load(indices, ivs), d)
        b.store(_combine(b, red, out, dst, b.load(updates, ivs)), out, dst)
    return [out]


def lower_scatter_nd(b: KernelBuilder, op, ins):
    """out = data; then for every index tuple indices[j] (its last dim, k long, addresses the
    first k dims of data), in order: out[indices[j], rest] = reduce(.., updates[j, rest])."""
    data, indices, updates = ins
    dd, idims = shape(data), shape(indices)
    k = idims[-1]
    if k > len(dd):
        fail(op, "the last dim of indices", k, f"at most the rank of data, {len(dd)}")
    _same_shape(op, "updates", shape(updates), list(idims[:-1]) + list(dd[k:]),
                "indices' shape without its last dim, then data's dims after the indexed ones")
    red = _reduction(op)
    out = _copy(b, data, data.type.element_type)
    lead = list(idims[:-1])
    with b.nest(lead) as ivs:
        for c in range(k):
            _check(b, op, b.load(indices, list(ivs) + [b.index(c)]), dd[c], f"for data axis {c}")
    if any(dd[c] == 0 for c in range(k)):
        return [out]
    rest = list(dd[k:])
    with b.nest(lead + rest) as ivs:
        at, tail = list(ivs[:len(lead)]), list(ivs[len(lead):])
        dst = [_safe(b, b.load(indices, at + [b.index(c)]), dd[c]) for c in range(k)] + tail
        new = b.load(b.view(updates, lead + rest), ivs)
        b.store(_combine(b, red, out, dst, new), out, dst)
    return [out]


def lower_one_hot(b: KernelBuilder, op, ins, module=None):
    """out[..., j (at axis), ...] = on if indices[...] (negative ones wrapped by depth) == j
    else off; values = [off, on] is read at run time, depth must be a constant (it is the
    output's size). Float indices are truncated toward zero, as ONNX's reference casts them."""
    indices, _depth, values = ins
    depth = onnx_d.constant_value(op.operands[1], module)
    if depth is None:
        raise NotImplementedError("OneHot with a non-constant depth")
    depth = int(depth.reshape(-1)[0])
    out_dims = onnx_d.shape_of(op.results[0])
    axis = onnx_d.get_attr(op, "axis", -1)
    axis = axis + len(out_dims) if axis < 0 else axis
    elem = op.results[0].type.element_type
    out = b.alloc(out_dims, elem)
    _same_shape(op, "values", shape(values), [2], "[off, on]")
    with b.nest(out_dims) as ivs:
        # Read inside the nest (LLVM hoists them): a value loaded before the nest would be a
        # capture the loopnest code generator's outlined nests do not see.
        off, on = b.load(values, [b.index(0)]), b.load(values, [b.index(1)])
        raw = b.load(indices, list(ivs[:axis]) + list(ivs[axis + 1:]))
        raw = b.cast(raw, i64)  # float indices: truncated (fptosi)
        neg = b.cmpi("slt", raw, b.const(0, i64))
        idx = b.select(neg, b.add_(raw, b.const(depth, i64)), raw)
        hit = b.cmpi("eq", idx, b.cast(ivs[axis], i64))
        b.store(b.select(hit, on, off), out, ivs)
    return [out]


__all__ = ["lower_gather_elements", "lower_gather_nd", "lower_scatter_elements",
           "lower_scatter_nd", "lower_one_hot"]
