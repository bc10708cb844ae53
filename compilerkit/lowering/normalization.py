"""Lowering of LayerNormalization, InstanceNormalization, LpNormalization, RMSNormalization,
GroupNormalization and MeanVarianceNormalization to Kernel IR.

Layer, Instance and GroupNormalization normalise x over some dims to mean 0 and variance 1,
then scale and shift: the input is
viewed (krnl.reshape, no copy) as [kept dims..., normalised dims...] and `normalize` computes the
mean and the variance per kept index in two passes (the variance from x - mean, not
E[x^2] - E[x]^2, which cancels when the mean is large against the spread; both on x shifted
by the group's first element), then
(x - mean) * 1 / sqrt(var + epsilon) * scale + bias. MeanVarianceNormalization does the same
over any set of axes in nests of its own; Lp and RMSNormalization divide by a norm.

LayerNormalization's optional Mean and InvStdDev outputs are views of the statistics buffers;
with stash_type giving them another type than X's, they are refused.
"""

from __future__ import annotations

import math

from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError
from compilerkit.lowering.builder import KernelBuilder, is_float, shape
from compilerkit.lowering.matmul import fill
from compilerkit.lowering.norm import ROW_PARTIALS, combine_lanes, over_row
from compilerkit.onnx_passes.single_node import node_label


def normalize(b: KernelBuilder, x, keep, red, eps, affine, want_mean=False):
    """x (shape keep + red) normalised over the `red` dims, `affine(ivs, y)` applied to each
    normalised y; returns (the new buffer (shape keep + red), mean, 1 / std (shape keep));
    the mean buffer holds mean - x0 unless `want_mean`.

    Each group is first shifted by its first element x0 (x - x0 is exact for values near it,
    Sterbenz): the sums see only the spread, not the offset, so a group with mean 1000 and
    spread 1e-2 keeps its digits (summing x itself in f32 lost them: 6x onnxruntime's error).
    """
    elem = x.type.element_type
    sdims = list(keep) or [1]
    mean, var = b.alloc(sdims, elem), b.alloc(sdims, elem)
    fill(b, mean, 0.0)
    fill(b, var, 0.0)
    n = b.const(float(math.prod(red)), elem)
    dims = list(keep) + list(red)

    def at(ivs):
        return ivs[:len(keep)] if keep else [b.index(0)]

    def shifted(ivs):  # x - x0
        zero = b.index(0)
        x0 = b.load(x, ivs[:len(keep)] + [zero] * len(red))
        return b.binary("sub", b.load(x, ivs), x0)

    with b.nest(dims) as ivs:
        s = at(ivs)
        b.store(b.add_(b.load(mean, s), shifted(ivs)), mean, s)
    with b.nest(sdims) as ivs:  # mean holds mean - x0 until the end
        b.store(b.binary("div", b.load(mean, ivs), n), mean, ivs)
    with b.nest(dims) as ivs:
        s = at(ivs)
        d = b.binary("sub", shifted(ivs), b.load(mean, s))
        b.store(b.add_(b.load(var, s), b.mul(d, d)), var, s)
    with b.nest(sdims) as ivs:  # var becomes 1 / sqrt(var / n + eps)
        v = b.add_(b.binary("div", b.load(var, ivs), n), b.const(eps, elem))
        b.store(b.binary("div", b.const(1.0, elem), b.unary("sqrt", v)), var, ivs)
    out = b.alloc(dims, elem)
    with b.nest(dims) as ivs:
        s = at(ivs)
        y = b.mul(b.binary("sub", shifted(ivs), b.load(mean, s)), b.load(var, s))
        b.store(affine(ivs, y), out, ivs)
    if not want_mean:
        return out, mean, var
    with b.nest(sdims) as ivs:  # the mean itself, for LayerNormalization's Mean output
        zero = b.index(0)
        x0 = b.load(x, (list(ivs) if keep else []) + [zero] * len(red))
        b.store(b.add_(x0, b.load(mean, ivs)), mean, ivs)
    return out, mean, var


def normalize_rows(b: KernelBuilder, x, keep, red, eps, affine, want_mean=False):
    """`normalize` for x [rows, d] (keep [rows], red [d]: LayerNormalization on the last
    axes), one nest per row (the row stays in cache over its three passes), the sums in
    ROW_PARTIALS per-lane partials (norm.over_row: one running sum is a chain of dependent
    adds, which kept the loop scalar); the same shift by the row's first element, the mean
    and variance of the same terms added in another order. Returns what `normalize` does."""
    (rows,), (d,) = keep, red
    elem = x.type.element_type
    width = ROW_PARTIALS
    mean, inv = b.alloc([rows], elem), b.alloc([rows], elem)
    sums, spare = b.alloc([rows, width], elem), b.alloc([rows, width], elem)
    out = b.alloc([rows, d], elem)
    n = b.const(float(d), elem)
    with b.nest([rows]) as (o,):
        zero = b.index(0)
        x0 = b.load(x, [o, zero])

        def shifted(j):  # x - x0 - (mean - x0) once mean holds mean - x0
            return b.binary("sub", b.load(x, [o, j]), x0)

        def summed(term):
            """The row's sum of term(column), into the returned buffer's [o, 0]."""
            with b.nest([width]) as (lane,):
                b.store(b.const(0.0, elem), sums, [o, lane])

            def add(j, lane):
                b.store(b.add_(b.load(sums, [o, lane]), term(j)), sums, [o, lane])

            over_row(b, d, width, add)
            return combine_lanes(b, sums, spare, o, "add", width)

        total = summed(shifted)
        with b.nest([1]) as (_,):  # mean holds mean - x0 until the end
            b.store(b.binary("div", b.load(total, [o, zero]), n), mean, [o])

        def centred(j):
            return b.binary("sub", shifted(j), b.load(mean, [o]))

        squares = summed(lambda j: b.mul(centred(j), centred(j)))
        with b.nest([1]) as (_,):  # 1 / sqrt(var / n + eps)
            v = b.add_(b.binary("div", b.load(squares, [o, zero]), n), b.const(eps, elem))
            b.store(b.binary("div", b.const(1.0, elem), b.unary("sqrt", v)), inv, [o])
        with b.nest([d]) as (k,):
            b.store(affine([o, k], b.mul(centred(k), b.load(inv, [o]))), out, [o, k])
        if want_mean:
            with b.nest([1]) as (_,):
                b.store(b.add_(b.load(x, [o, zero]), b.load(mean, [o])), mean, [o])
    return out, mean, inv


def _param_view(b, p, normalized, what):
    """Scale or bias (broadcastable to the normalised dims) as a [D] view, or None where it is
    one value for all; a broadcast within the normalised dims is refused."""
    ps = shape(p)
    while len(ps) > len(normalized) and ps[0] == 1:
        ps = ps[1:]
    d = math.prod(normalized)
    if math.prod(ps) == 1:
        return b.view(p, [1]), True
    aligned = (1,) * (len(normalized) - len(ps)) + ps
    if list(aligned) != list(normalized):
        raise NotImplementedError(f"{what} of shape {list(ps)} broadcast over the normalized "
                                  f"dims {list(normalized)} is not supported")
    return b.view(p, [d]), False


def lower_layer_norm(b: KernelBuilder, op, ins):
    x = ins[0]
    xs = shape(x)
    if not is_float(x.type.element_type):
        raise NotImplementedError(f"LayerNormalization on {x.type.element_type}")
    axis = onnx_d.get_attr(op, "axis", -1)
    axis = axis + len(xs) if axis < 0 else axis
    eps = onnx_d.get_attr(op, "epsilon", 1e-5)
    keep, normalized = [math.prod(xs[:axis])], list(xs[axis:])
    d = math.prod(normalized)
    params = [_param_view(b, p, normalized, name)
              for p, name in zip(ins[1:3], ("Scale", "B"), strict=False)]

    def affine(ivs, y):
        for k, (p, single) in enumerate(params):
            v = b.load(p, [b.index(0)] if single else [ivs[1]])
            y = b.mul(y, v) if k == 0 else b.add_(y, v)
        return y

    want_mean = len(op.results) > 1 and bool(op.results[1].uses)
    rows = normalize_rows if b.lanes > 1 and d >= ROW_PARTIALS else normalize
    out, mean, inv_std = rows(b, b.view(x, keep + [d]), keep, [d], eps, affine, want_mean)
    outs = [b.view(out, xs)]
    for res, buf in zip(op.results[1:], (mean, inv_std), strict=False):
        if getattr(res.type, "element_type", None) != x.type.element_type:
            # lower_to_krnl refuses this output (and the next) where the model uses it.
            break
        outs.append(b.view(buf, onnx_d.shape_of(res)))
    return outs


def lower_instance_norm(b: KernelBuilder, op, ins):
    x, scale, bias = ins[:3]
    xs = shape(x)
    eps = onnx_d.get_attr(op, "epsilon", 1e-5)
    keep, red = [xs[0], xs[1]], [math.prod(xs[2:])]

    def affine(ivs, y):
        c = [ivs[1]]
        return b.add_(b.mul(y, b.load(scale, c)), b.load(bias, c))

    out = normalize(b, b.view(x, keep + red), keep, red, eps, affine)[0]
    return [b.view(out, xs)]


def lower_lp_norm(b: KernelBuilder, op, ins):
    """LpNormalization: x / ||x||_p along `axis`, p 1 (sum |x|) or 2 (sqrt(sum x^2), summed
    plainly as onnxruntime does, so a norm that underflows or overflows does there too); a zero
    norm gives 0, not NaN (onnxruntime)."""
    x = ins[0]
    xs = shape(x)
    elem = x.type.element_type
    p = onnx_d.get_attr(op, "p", 2)
    if p not in (1, 2):
        raise NotImplementedError(f"LpNormalization with p={p} (ONNX allows 1 or 2)")
    axis = onnx_d.get_attr(op, "axis", -1)
    axis = axis + len(xs) if axis < 0 else axis
    outer, d, inner = math.prod(xs[:axis]), xs[axis], math.prod(xs[axis + 1:])
    xv = b.view(x, [outer, d, inner])
    out = b.alloc(xs, elem)
    ov = b.view(out, [outer, d, inner])
    norm = b.alloc([outer, inner], elem)
    fill(b, norm, 0.0)
    with b.nest([outer, d, inner]) as (o, k, i):
        v = b.load(xv, [o, k, i])
        term = b.unary("abs", v) if p == 1 else b.mul(v, v)
        b.store(b.add_(b.load(norm, [o, i]), term), norm, [o, i])
    if p == 2:
        with b.nest([outer, inner]) as ivs:
            b.store(b.unary("sqrt", b.load(norm, ivs)), norm, ivs)
    with b.nest([outer, d, inner]) as (o, k, i):
        n = b.load(norm, [o, i])
        zero = b.const(0.0, elem)
        y = b.binary("div", b.load(xv, [o, k, i]), n)
        b.store(b.select(b.cmpf("oeq", n, zero), zero, y), ov, [o, k, i])
    return [out]


def lower_rms_norm(b: KernelBuilder, op, ins):
    """RMSNormalization (opset 23): x / sqrt(mean(x^2) + epsilon) * scale over the dims from
    `axis` on, viewed [outer, D] as LayerNormalization's."""
    x, scale = ins[:2]
    xs = shape(x)
    elem = x.type.element_type
    if not is_float(elem):
        raise NotImplementedError(f"RMSNormalization on {elem}")
    axis = onnx_d.get_attr(op, "axis", -1)
    axis = axis + len(xs) if axis < 0 else axis
    eps = onnx_d.get_attr(op, "epsilon", 1e-5)
    outer, normalized = math.prod(xs[:axis]), list(xs[axis:])
    d = math.prod(normalized)
    sv, single = _param_view(b, scale, normalized, "Scale")
    xv = b.view(x, [outer, d])
    out = b.alloc([outer, d], elem)
    ms = b.alloc([outer], elem)
    fill(b, ms, 0.0)
    with b.nest([outer, d]) as (o, k):
        v = b.load(xv, [o, k])
        b.store(b.add_(b.load(ms, [o]), b.mul(v, v)), ms, [o])
    with b.nest([outer]) as ivs:  # ms becomes 1 / sqrt(ms / d + eps)
        m = b.add_(b.binary("div", b.load(ms, ivs), b.const(float(d), elem)),
                   b.const(eps, elem))
        b.store(b.binary("div", b.const(1.0, elem), b.unary("sqrt", m)), ms, ivs)
    with b.nest([outer, d]) as (o, k):
        y = b.mul(b.load(xv, [o, k]), b.load(ms, [o]))
        s = b.load(sv, [b.index(0)] if single else [k])
        b.store(b.mul(y, s), out, [o, k])
    return [b.view(out, xs)]


def lower_group_norm(b: KernelBuilder, op, ins):
    """GroupNormalization (opset 21; onnx refuses opset 18's per-group Scale and B as
    deprecated on import): x [N, C, ...] viewed [N, G, C/G, spatial], each (n, g) normalised
    over its C/G channels and all positions (`normalize`), then scale and bias per channel."""
    x, scale, bias = ins[:3]
    xs = shape(x)
    elem = x.type.element_type
    if not is_float(elem):
        raise NotImplementedError(f"GroupNormalization on {elem}")
    groups = onnx_d.get_attr(op, "num_groups", 1)
    eps = onnx_d.get_attr(op, "epsilon", 1e-5)
    n, ch = xs[0], xs[1]
    if groups < 1 or ch % groups:
        # onnxruntime refuses it too: an invalid model, not a missing feature
        raise ModelError(f"node {node_label(op)!r} (GroupNormalization): num_groups is "
                         f"{groups}; expected a divisor of the {ch} channels")
    per = ch // groups
    keep, red = [n, groups], [per, math.prod(xs[2:])]
    for p, name in ((scale, "scale"), (bias, "bias")):
        if math.prod(shape(p)) != ch:
            raise NotImplementedError(f"{name} of shape {list(shape(p))}: one value per "
                                      f"channel ({ch}) expected")
    sv, bv = b.view(scale, [ch]), b.view(bias, [ch])

    def affine(ivs, y):
        c = [b.affine([(ivs[1], per), (ivs[2], 1)])]
        return b.add_(b.mul(y, b.load(sv, c)), b.load(bv, c))

    out = normalize(b, b.view(x, keep + red), keep, red, eps, affine)[0]
    return [b.view(out, xs)]


MVN_EPSILON = 1e-9  # added to the standard deviation, as ONNX's function body does


def lower_mvn(b: KernelBuilder, op, ins):
    """MeanVarianceNormalization over `axes` (default [0, 2, 3], any set of axes):
    (x - mean) / (std + 1e-9) as ONNX's function body defines it, the variance in two passes
    on x shifted by each group's first element (as `normalize`). onnxruntime differs where the
    spread is tiny against the mean (its E[x^2] - E[x]^2 cancels) and on constant groups (it
    has no epsilon: 0 / 0 = NaN; here 0)."""
    x = ins[0]
    xs = shape(x)
    elem = x.type.element_type
    if not is_float(elem):
        raise NotImplementedError(f"MeanVarianceNormalization on {elem}")
    rank = len(xs)
    axes = {a + rank if a < 0 else a for a in onnx_d.get_attr(op, "axes", [0, 2, 3])}
    kdims = [1 if k in axes else d for k, d in enumerate(xs)]
    count = b.const(float(math.prod(xs[a] for a in axes)), elem)
    mean, var = b.alloc(kdims, elem), b.alloc(kdims, elem)
    fill(b, mean, 0.0)
    fill(b, var, 0.0)

    def group(ivs):  # the index of ivs's group in mean and var
        zero = b.index(0)
        return [zero if k in axes else iv for k, iv in enumerate(ivs)]

    def shifted(ivs):  # x - x0, x0 the group's first element
        return b.binary("sub", b.load(x, ivs), b.load(x, group(ivs)))

    with b.nest(xs) as ivs:
        g = group(ivs)
        b.store(b.add_(b.load(mean, g), shifted(ivs)), mean, g)
    with b.nest(kdims) as ivs:
        b.store(b.binary("div", b.load(mean, ivs), count), mean, ivs)
    with b.nest(xs) as ivs:
        g = group(ivs)
        d = b.binary("sub", shifted(ivs), b.load(mean, g))
        b.store(b.add_(b.load(var, g), b.mul(d, d)), var, g)
    with b.nest(kdims) as ivs:  # var becomes std + epsilon
        std = b.unary("sqrt", b.binary("div", b.load(var, ivs), count))
        b.store(b.add_(std, b.const(MVN_EPSILON, elem)), var, ivs)
    out = b.alloc(xs, elem)
    with b.nest(xs) as ivs:
        g = group(ivs)
        d = b.binary("sub", shifted(ivs), b.load(mean, g))
        b.store(b.binary("div", d, b.load(var, g)), out, ivs)
    return [out]
