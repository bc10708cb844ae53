"""Lowering of Resize (opsets 10 to 19) and Upsample (7 to 9) to Kernel IR.

Everything but the data is known at compile time (the output shape, the scales or sizes, the
roi), so each resized axis gets a table, computed here in numpy, of the input positions that
feed each output position and their weights: one tap for `nearest`, two for `linear`, four for
`cubic`. The kernel is one nest over the output that loads the tables (krnl.global) and sums
the taps' products over the resized axes (2^n or 4^n loads for n resized axes; taps that never
contribute are dropped and taps that always read the same element merged); an axis that is not
resized reads the output's own index. Indices from the tables lie in range by
construction, and are clamped anyway so the verifier sees the bound.

The coordinate arithmetic follows onnxruntime's (upsamplebase.h), in float32 and in its order
of operations, so that `nearest` rounds exactly where onnxruntime does (a tie at x.5 computed
in float64 can land on the other side):
- x_original from x_resized by `coordinate_transformation_mode` (half_pixel,
  half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn,
  tf_crop_and_resize with the roi);
- nearest: `nearest_mode` (round_prefer_floor, round_prefer_ceil, floor, ceil), the index
  clamped into the axis; opset 10 Resize and Upsample use asymmetric coordinates and truncate
  (ceil when downsampling), as onnxruntime does for them;
- linear: the coordinate clamped into [0, len - 1], the two neighbours weighted by distance;
- cubic: Keys' kernel with `cubic_coeff_a` over the four neighbours, indices clamped to the edge
  (or, with exclude_outside, those outside get weight 0 and the rest are renormalised);
- tf_crop_and_resize: an output whose coordinate falls outside [0, len - 1] on any axis is
  `extrapolation_value`.
Scales given as `sizes` are out/in per axis; keep_aspect_ratio_policy not_larger/not_smaller use
one scale for every listed axis (the min or max of out/in). `antialias` (a filter wider than the
taps when downsampling) is refused.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import i64

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import INDEX, KernelBuilder, is_float, shape
from compilerkit.lowering.indexing import fail

F = np.float32
MODES = ("nearest", "linear", "cubic")
TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
              "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")
NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


def _const(op, k, module, what):
    if len(op.operands) <= k or onnx_d.is_absent(op.operands[k]):
        return None
    v = onnx_d.constant_value(op.operands[k], module)
    if v is None:
        raise NotImplementedError(f"{onnx_d.op_type(op)} with a non-constant {what}")
    return v.reshape(-1)


def _params(op, module, opset, in_dims, out_dims):
    """(mode, transform, nearest_mode, per-axis scales (float32), roi start/end per axis)."""
    kind = onnx_d.op_type(op)
    rank = len(in_dims)
    mode = onnx_d.get_attr(op, "mode", "nearest")
    if mode not in MODES or (kind == "Upsample" or opset < 11) and mode == "cubic":
        raise NotImplementedError(f"{kind} mode {mode!r} (supported: nearest, linear"
                                  f"{', cubic' if kind == 'Resize' and opset >= 11 else ''})")
    if onnx_d.get_attr(op, "antialias", 0):
        raise NotImplementedError(f"{kind} with antialias=1 is not supported (the downsampling "
                                  "filter is wider than the interpolation taps)")
    old = kind == "Upsample" or opset < 11
    if old:
        transform, nearest = "asymmetric", "simple"
        # Upsample-7 has a scales attribute, Upsample-9 an input; the frontend gives Resize-10
        # the modern operand layout (X, roi, scales, sizes) with roi and sizes absent.
        scales = onnx_d.get_attr(op, "scales", None)
        if scales is None:
            scales = _const(op, 1 if kind == "Upsample" else 2, module, "scales")
        roi, sizes, axes = None, None, None
    else:
        transform = onnx_d.get_attr(op, "coordinate_transformation_mode", "half_pixel")
        nearest = onnx_d.get_attr(op, "nearest_mode", "round_prefer_floor")
        roi = _const(op, 1, module, "roi")
        scales = _const(op, 2, module, "scales")
        sizes = _const(op, 3, module, "sizes")
        axes = onnx_d.get_attr(op, "axes", None)
    if transform not in TRANSFORMS:
        raise NotImplementedError(f"Resize coordinate_transformation_mode {transform!r}")
    if nearest not in NEAREST:
        raise NotImplementedError(f"Resize nearest_mode {nearest!r}")
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    full = [F(1)] * rank
    if scales is not None and len(scales) and not all(float(v) > 0 for v in scales):
        fail(op, "scales", [float(v) for v in scales], "values above 0")
    if kind == "Upsample" and scales is not None and not all(float(v) >= 1 for v in scales):
        fail(op, "scales", [float(v) for v in scales], "values of at least 1 (Upsample)")
    if sizes is not None and len(sizes) and any(
            in_dims[a] == 0 and s > 0 for a, s in zip(axes, sizes, strict=True)):
        raise NotImplementedError(f"{kind} of an empty input to a non-empty output")
    if scales is not None and len(scales):
        for a, s in zip(axes, scales, strict=True):
            full[a] = F(s)
    elif sizes is not None and len(sizes):
        policy = onnx_d.get_attr(op, "keep_aspect_ratio_policy", "stretch")
        ratios = [F(s) / F(in_dims[a]) for a, s in zip(axes, sizes, strict=True)]
        if policy == "stretch":
            for a, r in zip(axes, ratios, strict=True):
                full[a] = r
        elif policy in ("not_larger", "not_smaller"):
            one = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:
                full[a] = F(one)
        else:
            raise NotImplementedError(f"Resize keep_aspect_ratio_policy {policy!r}")
    else:
        raise NotImplementedError(f"{kind} needs constant scales or sizes")
    start, end = [F(0)] * rank, [F(1)] * rank
    if transform == "tf_crop_and_resize":
        if roi is None or len(roi) != 2 * len(axes):
            raise NotImplementedError("Resize tf_crop_and_resize needs a constant roi with a "
                                      "start and end per resized axis")
        for k, a in enumerate(axes):
            start[a], end[a] = F(roi[k]), F(roi[len(axes) + k])
    return mode, transform, nearest, full, start, end


def _original(transform, x, scale, n_in, n_out, start, end):
    """onnxruntime's x_original for output positions `x` (float32 array), in float32."""
    x = x.astype(F)
    n_in, n_out = F(n_in), F(n_out)
    if transform == "asymmetric":
        return x / scale
    if transform == "half_pixel":
        return (x + F(0.5)) / scale - F(0.5)
    if transform == "pytorch_half_pixel":
        return (x + F(0.5)) / scale - F(0.5) if n_out > 1 else np.zeros_like(x)
    if transform == "tf_half_pixel_for_nn":
        return (x + F(0.5)) / scale
    if transform == "align_corners":
        return np.zeros_like(x) if n_out == 1 else x * (n_in - F(1)) / (n_out - F(1))
    if transform == "half_pixel_symmetric":
        adjustment = n_out / (scale * n_in)
        offset = (n_in / F(2)) * (F(1) - adjustment)
        # onnxruntime adds the offset in double (its 0.5 literals are doubles), then rounds.
        x64 = x.astype(np.float64)
        return (np.float64(offset) + (x64 + 0.5) / np.float64(scale) - 0.5).astype(F)
    # tf_crop_and_resize
    if n_out > 1:
        return start * (n_in - F(1)) + x * (end - start) * (n_in - F(1)) / (n_out - F(1))
    return np.full_like(x, F(0.5 * np.float64(start + end) * np.float64(n_in - F(1))))


def _round(nearest, xo, downsample):
    if nearest == "round_prefer_floor":
        return np.where(xo == np.floor(xo) + F(0.5), np.floor(xo), np.round(xo))
    if nearest == "round_prefer_ceil":
        return np.where(xo == np.floor(xo) + F(0.5), np.ceil(xo), np.round(xo))
    if nearest == "floor":
        return np.floor(xo)
    if nearest == "ceil":
        return np.ceil(xo)
    return np.ceil(xo) if downsample else np.trunc(xo)  # "simple" (opset 10, Upsample)


def _cubic(ratio, a):
    r = ratio.astype(np.float64)
    a = float(a)

    def far(t):  # |t| in [1, 2)
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a

    def near(t):  # |t| in [0, 1)
        return ((a + 2) * t - (a + 3)) * t * t + 1

    return np.stack([far(r + 1), near(r), near(1 - r), far(2 - r)], axis=-1)


def axis_taps(mode, transform, nearest, scale, n_in, n_out, start, end, a=-0.75,
              exclude_outside=False):
    """(indices [n_out, T] int64, weights [n_out, T] float64, outside [n_out] bool) for one
    axis: output position o reads sum(weights[o, t] * x[indices[o, t]])."""
    xo = _original(transform, np.arange(n_out), scale, n_in, n_out, start, end)
    outside = np.zeros(n_out, bool)
    if transform == "tf_crop_and_resize":
        outside = (xo < 0) | (xo > F(n_in - 1))
    last = n_in - 1
    if mode == "nearest":
        idx = np.clip(_round(nearest, xo, scale < 1), 0, last).astype(np.int64)
        return idx[:, None], np.ones((n_out, 1)), outside
    if mode == "linear":
        xc = np.clip(xo, F(0), F(last))
        lo = np.minimum(np.floor(xc), last).astype(np.int64)
        hi = np.minimum(lo + 1, last)
        frac = (xc - lo.astype(F)).astype(np.float64)
        w = np.stack([1 - frac, frac], -1)
        # Clamped to the last position both taps read it; onnxruntime weights them 0.5 each
        # (not 1 and 0), which rounds a 2-D sum differently: ((a + a) + b) + b.
        w[hi == lo] = 0.5
        return np.stack([lo, hi], -1), w, outside
    base = np.floor(xo).astype(np.int64)
    idx = base[:, None] + np.arange(-1, 3)[None, :]
    w = _cubic((xo - np.floor(xo)).astype(np.float64), a)
    if exclude_outside:
        w = np.where((idx < 0) | (idx > last), 0.0, w)
        w = w / w.sum(-1, keepdims=True)
    return np.clip(idx, 0, last), w, outside


def _check_agreed(op, mode, transform, scale, n_in: int, n_out: int, ax: int):
    """Refuse what ONNX's spec and its reference implementation answer differently (the
    node tests hold the reference's answer, onnxruntime follows the spec): align_corners and
    tf_crop_and_resize divide by length_resized - 1, the output's integer length in the spec
    and onnxruntime, the fractional scale * length_original in the reference; with a scale
    that makes the latter fractional, the two disagree. pytorch_half_pixel to a length of 1
    starts at 0 in onnxruntime and at -0.5 in the reference, which changes cubic taps."""
    kind = onnx_d.op_type(op)
    exact = float(np.float32(scale)) * n_in
    # (A float32 scale such as 0.6 gives 3.0000001 for 5 * 0.6: that is agreement.)
    if transform in ("align_corners", "tf_crop_and_resize") and abs(exact - n_out) > 1e-4 * n_out:
        raise NotImplementedError(
            f"{kind} {transform} with scale {float(scale):g} on axis {ax} (length {n_in}): "
            f"ONNX's spec divides by the output length {n_out} - 1 (as onnxruntime does), its "
            f"reference implementation by scale * length - 1 = {exact:g} - 1, and the two "
            "answers differ; give `sizes` instead of `scales`")
    if transform == "pytorch_half_pixel" and mode == "cubic" and n_out == 1:
        raise NotImplementedError(
            f"{kind} pytorch_half_pixel cubic to length 1 on axis {ax}: onnxruntime samples at "
            "0 and ONNX's reference at -0.5")


def _fewer_taps(idx, w):
    """The taps of one axis with those that never contribute (weight 0 at every position)
    dropped and those that read the same input index at every position merged (weights
    added): a length-1 axis or an integer cubic position needs one load, not four. Exact for
    finite inputs; an infinite input that a zero weight multiplied would have given NaN."""
    cols_i, cols_w = [], []
    for t in range(idx.shape[1]):
        if not w[:, t].any():
            continue
        for k, ci in enumerate(cols_i):
            if (ci == idx[:, t]).all():
                cols_w[k] = cols_w[k] + w[:, t]
                break
        else:
            cols_i.append(idx[:, t])
            cols_w.append(w[:, t])
    if not cols_i:
        return idx[:, :1], w[:, :1]
    return np.stack(cols_i, -1), np.stack(cols_w, -1)


def lower_resize(b: KernelBuilder, op, ins, module=None, opset=19):
    x = ins[0]
    in_dims = shape(x)
    out_dims = onnx_d.shape_of(op.results[0])
    elem = x.type.element_type
    mode, transform, nearest, scales, start, end = _params(op, module, opset, in_dims, out_dims)
    if mode != "nearest" and not is_float(elem):
        raise NotImplementedError(f"{onnx_d.op_type(op)} mode {mode!r} on {elem} (float data "
                                  "only; nearest takes any type)")
    a = onnx_d.get_attr(op, "cubic_coeff_a", -0.75)
    exclude = bool(onnx_d.get_attr(op, "exclude_outside", 0))
    extrapolation = onnx_d.get_attr(op, "extrapolation_value", 0.0)
    out = b.alloc(out_dims, elem)
    if math.prod(out_dims) == 0:
        return [out]
    if math.prod(in_dims) == 0:
        raise NotImplementedError(f"{onnx_d.op_type(op)} of an empty input to a non-empty "
                                  "output")
    tables = {}  # axis -> (index global, weight global or None, outside global or None, taps)
    name = op.attributes.get("onnx_node_name")
    hint = (name.data if name else "resize").replace("/", "_")
    for ax, (n_in, n_out) in enumerate(zip(in_dims, out_dims, strict=True)):
        identity = n_in == n_out and scales[ax] == F(1) and transform != "tf_crop_and_resize"
        if identity:
            continue
        _check_agreed(op, mode, transform, scales[ax], n_in, n_out, ax)
        idx, w, outside = axis_taps(mode, transform, nearest, scales[ax], n_in, n_out,
                                    start[ax], end[ax], a, exclude)
        idx, w = _fewer_taps(idx, w)
        if idx.shape[1] == 1 and not outside.any() and (idx[:, 0] == np.arange(n_out)).all() \
                and (w == 1).all():
            continue  # the axis maps each position to itself (an N or C axis of a crop)
        ig = b.constant(idx, module, f"{hint}_idx{ax}", i64)
        wg = None if mode == "nearest" else b.constant(
            w.astype(onnx_d.numpy_dtype(elem)), module, f"{hint}_w{ax}", elem)
        og = None
        if outside.any():
            og = b.constant(outside.astype(np.int64), module, f"{hint}_out{ax}", i64)
        tables[ax] = (ig, wg, og, idx.shape[1], n_in)
    with b.nest(out_dims) as ivs:
        # Per resized axis and tap: the input index and (linear, cubic) the weight.
        per_axis = []
        for ax, iv in enumerate(ivs):
            if ax not in tables:
                per_axis.append([(iv, None)])
                continue
            ig, wg, _, taps, n_in = tables[ax]
            choices = []
            for t in range(taps):
                at = [iv, b.index(t)]
                i = b.clamp(b.cast(b.load(ig, at), INDEX), n_in)
                choices.append((i, None if wg is None else b.load(wg, at)))
            per_axis.append(choices)
        acc = None
        for combo in _product(per_axis):
            v = b.load(x, [i for i, _ in combo])
            # onnxruntime's order: the weights' product first, innermost axis first
            # ((wx * wy) * wz), then times the input. Rounded otherwise (v * wy * wx), a
            # quantised model's next QuantizeLinear lands on the other side of a tie.
            ws = [w for _, w in reversed(combo) if w is not None]
            if ws:
                w = ws[0]
                for more in ws[1:]:
                    w = b.mul(w, more)
                v = b.mul(w, v)
            acc = v if acc is None else b.add_(acc, v)
        outs = [(og, iv) for ax, iv in enumerate(ivs) if ax in tables
                for og in [tables[ax][2]] if og is not None]
        for og, iv in outs:
            off = b.cmpi("ne", b.load(og, [iv]), b.const(0, i64))
            acc = b.select(off, b.const(extrapolation, elem), acc)
        b.store(acc, out, ivs)
    return [out]


def _product(lists):
    if not lists:
        yield ()
        return
    for head in lists[0]:
        for rest in _product(lists[1:]):
            yield (head,) + rest
