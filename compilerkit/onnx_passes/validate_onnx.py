"""Op validation on ONNX IR: refuse what the ONNX spec or onnxruntime refuses, before folding or
lowering could compute with it.

ONNX's own shape inference (run strict by the frontend and by shape_inference.py) already checks
most attribute ranges (axes, perms, strides > 0, pads >= 0, Split sizes, broadcasting, MatMul
and Gemm inner dimensions). This pass checks what it lets through but onnxruntime refuses, and
what lowering would otherwise read or write out of bounds (element types against the op's
schema at the model's opset are the dialect's verifier's job, dialects/onnx_schema.py):

- Conv / ConvTranspose: weight rank and channels against the input and `group`, `kernel_shape`
  against the weight, the bias length, an empty output;
- MaxPool / AveragePool: pads at or above the kernel (onnxruntime refuses them), an empty output;
- ConvTranspose's output_padding below max(stride, dilation);
- Gemm's C broadcast, BatchNormalization's parameter lengths, LRN's odd size, Clip's scalar
  bounds, Dropout's ratio in [0, 1), Reduce*'s keepdims in {0, 1};
- Reshape element counts, constant Gather indices in range, Pad to a negative size or edge
  padding of an empty axis, Transpose's perm a permutation of the rank, Range with delta 0,
  `axis`/`axes` within the rank (ONNX reads them as 32 bits) and without repeats;
- the compile budget (checks.py) for every result, before folding allocates it;
- at lowering (`check_result_types`), every result type against ONNX's inference from the
  operands, so a type nobody inferred (hand-written ONNX IR text) is never compiled as given.

Checks needing a shape run once the operands are static, so the pass is run again as shape
inference and folding make more shapes known (validate_op is cheap and idempotent). Errors are
`ModelError`s naming the node, the attribute or operand, its value and what was expected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import onnx
from xdsl.dialects.builtin import NoneType, TensorType
from xdsl.passes import ModulePass

from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError, UnsupportedOpError
from compilerkit.frontend.checks import budget_of, check_bytes
from compilerkit.onnx_passes.single_node import main_func, node_label, node_model, opset_of


def _fail(op, what: str, value, expected: str):
    raise ModelError(f"node {node_label(op)!r} ({onnx_d.op_type(op)}): {what} is {value}; "
                     f"expected {expected}")


def _dims(v):
    """Static dims of a value, or None (absent, unranked or dynamic)."""
    if isinstance(v.type, NoneType) or not onnx_d.is_static(v.type):
        return None
    return onnx_d.shape_of(v)


def _operand(op, k):
    if len(op.operands) <= k or isinstance(op.operands[k].type, NoneType):
        return None
    return op.operands[k]


def _given(v):
    """An optional operand, or None when it is absent (typed none)."""
    return None if isinstance(v.type, NoneType) else v


def _const(op, k, module):
    v = _operand(op, k)
    return None if v is None else onnx_d.constant_value(v, module)


def _ints(op, name, default=None):
    v = onnx_d.get_attr(op, name, default)
    return None if v is None else [int(x) for x in v]


def _conv(op, module):
    x, w = _dims(op.X), _dims(op.W)
    if x is None or w is None:
        return
    kind = onnx_d.op_type(op)
    group = onnx_d.get_attr(op, "group", 1)
    if group < 1:
        _fail(op, "attribute group", group, "a positive integer")
    if len(w) != len(x) or len(x) < 3:
        _fail(op, "the weight W's rank", f"{len(w)} (shape {list(w)})",
              f"the input's rank {len(x)} (at least 3: N, C, spatial...)")
    c = x[1]
    if kind == "Conv":
        if w[1] * group != c:
            _fail(op, "the weight W's input channels x group", f"{w[1]} x {group}",
                  f"the input's {c} channels (W shape {list(w)}, input shape {list(x)})")
        if w[0] % group:
            _fail(op, "the weight W's output channels", w[0], f"a multiple of group={group}")
        out_c = w[0]
    else:
        if w[0] != c:
            _fail(op, "the weight W's first dimension", w[0],
                  f"the input's {c} channels (W shape {list(w)}, input shape {list(x)})")
        if c % group:
            _fail(op, "attribute group", group, f"a divisor of the input's {c} channels")
        out_c = w[1] * group
    ks = _ints(op, "kernel_shape")
    if ks is not None and ks != list(w[2:]):
        _fail(op, "attribute kernel_shape", ks, f"the weight's spatial shape {list(w[2:])}")
    bias = _given(op.B)
    if bias is not None and _dims(bias) is not None and _dims(bias) != (out_c,):
        _fail(op, "the bias B's shape", list(_dims(bias)), f"[{out_c}] (the output channels)")
    if kind == "Conv":
        _positive_output(op, x, list(w[2:]))
    else:
        r = len(w) - 2
        st = _ints(op, "strides") or [1] * r
        dil = _ints(op, "dilations") or [1] * r
        out_pad = _ints(op, "output_padding") or [0] * r
        for d, p in enumerate(out_pad):
            if d < r and d < len(st) and d < len(dil) and not 0 <= p < max(st[d], dil[d]):
                _fail(op, "attribute output_padding", out_pad,
                      "each value in [0, max(stride, dilation)) (onnxruntime refuses others)")
        _output_shape(op, x, w, st, dil, out_pad)


def _output_shape(op, x, w, st, dil, out_pad):
    """ConvTranspose's `output_shape` against what the input can produce. Larger than the
    full result (stride * (in - 1) + output_padding + the dilated kernel) only by what a
    stride leaves over: more would read no input at all, and onnxruntime and the ONNX
    reference refuse it (lowering would pad the result with zeros)."""
    r = len(x) - 2
    shape = _ints(op, "output_shape")
    if not shape or onnx_d.get_attr(op, "auto_pad", "NOTSET") != "NOTSET":
        return
    shape = shape[-r:]  # spatial dims (some exporters write N and C too)
    if len(shape) != r or len(st) != r or len(dil) != r or len(out_pad) != r:
        return  # ONNX's inference names these
    for d in range(r):
        eff = dil[d] * (w[2 + d] - 1) + 1
        full = st[d] * (x[2 + d] - 1) + out_pad[d] + eff
        if shape[d] > full and (shape[d] - eff) // st[d] + 1 != x[2 + d]:
            _fail(op, "attribute output_shape", _ints(op, "output_shape"),
                  f"at most {st[d] * (x[2 + d] - 1) + eff + st[d] - 1} along spatial axis "
                  f"{d}: an input of {x[2 + d]} (kernel {w[2 + d]}, stride {st[d]}, dilation "
                  f"{dil[d]}) cannot produce {shape[d]} (onnxruntime refuses it)")
        if shape[d] < x[2 + d]:
            # ONNX's shape inference stops at such a shape (the result loses its spatial
            # dims), so nothing after it could be typed.
            raise UnsupportedOpError(
                f"node {node_label(op)!r} (ConvTranspose): output_shape {shape} is smaller "
                f"than the input {list(x[2:])} along spatial axis {d}, which is not "
                "supported (ONNX's shape inference gives no shape for it)")


def _positive_output(op, x, ks):
    """Conv/pool windows: at least one output position per spatial dimension. A pool's window
    may hang over the end of its (padded) input by less than a stride: ONNX's shape inference
    and onnxruntime divide the negative span rounding toward zero, which gives one output
    position, whose taps past the input count as padding (a 2-wide window of stride 2 on a
    1-wide input)."""
    pool = onnx_d.op_type(op) in ("MaxPool", "AveragePool")
    if onnx_d.get_attr(op, "auto_pad", "NOTSET") != "NOTSET":
        return
    r = len(ks)
    st = _ints(op, "strides") or [1] * r
    dil = _ints(op, "dilations") or [1] * r
    pads = _ints(op, "pads") or [0] * (2 * r)
    if len(pads) != 2 * r or len(st) != r or len(dil) != r:
        return  # ONNX's inference names these
    for d in range(r):
        span = x[2 + d] + pads[d] + pads[r + d] - dil[d] * (ks[d] - 1) - 1
        if span < 0 and not (pool and -span < st[d]):
            _fail(op, f"the window along spatial axis {d}",
                  f"{dil[d] * (ks[d] - 1) + 1} wide (kernel {ks[d]}, dilation {dil[d]})",
                  f"at most the padded input size {x[2 + d] + pads[d] + pads[r + d]}")


def _pool(op, module):
    ks = _ints(op, "kernel_shape")
    if ks is None:
        _fail(op, "attribute kernel_shape", "missing", "the pooling window's size")
    pads = _ints(op, "pads")
    if pads is not None and onnx_d.get_attr(op, "auto_pad", "NOTSET") == "NOTSET":
        r = len(ks)
        for d in range(min(r, len(pads) // 2)):
            if pads[d] >= ks[d] or pads[r + d] >= ks[d]:
                _fail(op, "attribute pads", pads,
                      f"each pad smaller than the kernel {ks} (onnxruntime refuses larger)")
    x = _dims(op.operands[0])
    if x is not None and len(x) == len(ks) + 2:
        _positive_output(op, x, ks)


def _gemm(op, module):
    a, b, c = (_dims(v) for v in (op.A, op.B, op.C))  # None when absent (C is optional)
    if a is None or b is None or c is None or len(a) != 2 or len(b) != 2:
        return
    m = a[1] if onnx_d.get_attr(op, "transA", 0) else a[0]
    n = b[0] if onnx_d.get_attr(op, "transB", 0) else b[1]
    if len(c) > 2 or any(d not in (1, want)
                         for d, want in zip(reversed(c), (n, m), strict=False)):
        _fail(op, "input C's shape", list(c), f"one that broadcasts to the result [{m}, {n}]")


def _batchnorm(op, module):
    x = _dims(op.X)
    if x is None or len(x) < 2:
        return
    for k, name in enumerate(("scale", "B", "mean", "var"), start=1):
        v = _operand(op, k)  # scale, B, input_mean, input_var
        if v is not None and _dims(v) is not None and _dims(v) != (x[1],):
            _fail(op, f"input {name}'s shape", list(_dims(v)), f"[{x[1]}] (the channels)")


def _lrn(op, module):
    size = onnx_d.get_attr(op, "size", None)
    if size is None or size < 1 or size % 2 == 0:
        _fail(op, "attribute size", size, "a positive odd integer (onnxruntime refuses others)")


def _dropout(op, module):
    ratio = _const(op, 1, module)
    if ratio is not None and not 0 <= float(np.asarray(ratio).reshape(-1)[0]) < 1:
        _fail(op, "input ratio", float(np.asarray(ratio).reshape(-1)[0]), "a value in [0, 1)")


def _reduce(op, module):
    keep = onnx_d.get_attr(op, "keepdims", 1)
    if keep not in (0, 1):
        _fail(op, "attribute keepdims", keep, "0 or 1")
    x, y = _dims(op.operands[0]), _dims(op.results[0]) if op.results else None
    if onnx_d.op_type(op) == "ReduceMean" and x is not None and y is not None and (
            math.prod(x) == 0 < math.prod(y)):
        # The mean of no values: numpy (and so folding) says NaN, onnxruntime says 0.
        _fail(op, "the input's shape", list(x), "no reduced axis of size 0 (the mean of an "
              "empty set is undefined)")


def _clip(op, module):
    for name in ("min", "max"):
        v = _given(getattr(op, name))
        if v is not None and _dims(v) is not None and math.prod(_dims(v)) != 1:
            _fail(op, f"input {name}'s shape", list(_dims(v)), "a scalar")


def _reshape(op, module):
    _shape_vector(op, module)
    x = _dims(op.data)
    target = _const(op, 1, module)
    if x is None or target is None:
        return
    target = [int(d) for d in np.asarray(target).reshape(-1)]
    allowzero = onnx_d.get_attr(op, "allowzero", 0)
    dims = [x[k] if d == 0 and not allowzero and k < len(x) else d
            for k, d in enumerate(target)]
    if any(d < -1 for d in dims) or dims.count(-1) > 1:
        _fail(op, "the target shape", target, "non-negative sizes and at most one -1")
    have, known = math.prod(x), math.prod(d for d in dims if d != -1)
    if -1 in dims:
        if known == 0 or have % known:
            _fail(op, "the target shape", target,
                  f"one the input's {have} elements (shape {list(x)}) can fill")
    elif have != known:
        _fail(op, "the target shape", f"{target} ({known} elements)",
              f"as many elements as the input {list(x)} ({have})")


def _gather(op, module):
    x = _dims(op.data)
    idx = _const(op, 1, module)
    if x is None or idx is None or not len(x):
        return
    axis = onnx_d.get_attr(op, "axis", 0)
    n = x[axis % len(x)]
    idx = np.asarray(idx).astype(np.int64)
    bad = idx[(idx < -n) | (idx >= n)]
    if bad.size:
        _fail(op, "a constant index", int(bad.reshape(-1)[0]),
              f"one in [{-n}, {n - 1}] (axis {axis} of data shape {list(x)})")


def _pad(op, module):
    x = _dims(op.data)
    if x is None:
        return
    pads = (_ints(op, "pads") if opset_of(op) < 11 else
            (None if _const(op, 1, module) is None else
             [int(p) for p in _const(op, 1, module).reshape(-1)]))
    if pads is None:
        return
    axes = _const(op, 3, module)
    axes = (list(range(len(x))) if axes is None else
            [int(a) % len(x) for a in axes.reshape(-1)])
    if len(pads) != 2 * len(axes):
        _fail(op, "the pads", pads, f"{2 * len(axes)} values")
    mode = onnx_d.get_attr(op, "mode", "constant")
    for k, a in enumerate(axes):
        if x[a] + pads[k] + pads[len(axes) + k] < 0:
            _fail(op, "the pads", pads, f"no axis cropped below size 0 (input {list(x)})")
        # edge/reflect/wrap copy from what is left after cropping: onnxruntime needs some of
        # it (reflect: 2 elements, and pads smaller than that extent).
        begin, end = pads[k], pads[len(axes) + k]
        extent = x[a] + min(begin, 0) + min(end, 0)
        need = 2 if mode == "reflect" else 1
        if mode != "constant" and (begin > 0 or end > 0) and (
                extent < need or (mode == "reflect" and max(begin, end) > extent - 1)):
            _fail(op, f"mode {mode!r} on axis {a}",
                  f"padding by {[begin, end]} an extent of {extent} (input {list(x)})",
                  "an extent of at least 2 and pads below it for 'reflect', at least 1 for "
                  "'edge'/'wrap' (onnxruntime refuses others)")


def _shape_vector(op, module):
    """Shape-like inputs (Reshape's shape, Expand's shape, Tile's repeats, ConstantOfShape's
    input) are 1-D, as onnxruntime requires."""
    k = 0 if onnx_d.op_type(op) == "ConstantOfShape" else 1
    v = _operand(op, k)
    if v is not None and _dims(v) is not None and len(_dims(v)) != 1:
        _fail(op, f"input {k}'s shape", list(_dims(v)), "a 1-D tensor (a list of sizes)")


def _transpose(op, module):
    x, perm = _dims(op.data), _ints(op, "perm")
    if x is not None and perm is not None and sorted(perm) != list(range(len(x))):
        _fail(op, "attribute perm", perm, f"a permutation of {list(range(len(x)))}")


def _range(op, module):
    delta = _const(op, 2, module)
    if delta is not None and np.asarray(delta).size == 1 and np.asarray(delta).item() == 0:
        _fail(op, "input delta", 0, "a non-zero step")


def _axis(op, module):
    """An `axis` attribute within the rank (ONNX's C++ inference reads it as 32 bits, so a huge
    value can slip past it)."""
    axis = onnx_d.get_attr(op, "axis", None)
    x = _dims(op.operands[0]) if op.operands else None
    if axis is None or x is None:
        return
    r = len(x) + (1 if onnx_d.op_type(op) == "Flatten" else 0)
    if not -r <= axis < r:
        _fail(op, "attribute axis", axis, f"a value in [{-r}, {r - 1}] (input rank {len(x)})")


def _axes_attr(op, module):
    """`axes` (an attribute, or a constant input in newer opsets) within the rank. Squeeze and
    Unsqueeze need them distinct (ONNX's spec; onnxruntime refuses repeats); a reduction may
    name one axis twice (0 and -2 on rank 2): onnxruntime reduces it once, and so does
    lowering (reduction.reduce_axes)."""
    axes, what = _ints(op, "axes"), "attribute axes"
    if axes is None and len(op.operands) > 1 and _const(op, 1, module) is not None:
        axes, what = [int(a) for a in np.asarray(_const(op, 1, module)).reshape(-1)], "input axes"
    x = _dims(op.operands[0]) if op.operands else None
    if axes is None or x is None:
        return
    r = len(x) + (len(axes) if onnx_d.op_type(op) == "Unsqueeze" else 0)
    bad = [a for a in axes if not -r <= a < r]
    if onnx_d.op_type(op) in ("Squeeze", "Unsqueeze"):
        if bad or len({a % r for a in axes}) != len(axes):
            _fail(op, what, axes, f"distinct values in [{-r}, {r - 1}]")
    elif bad:
        _fail(op, what, axes, f"values in [{-r}, {r - 1}]")


def _prelu(op, module):
    # slope broadcasts to X one way (numpy rules, trailing axes): a per-channel slope of an
    # NCHW tensor is [C, 1, 1], not [C] (which meets the last axis).
    x, slope = _dims(op.operands[0]), _dims(op.operands[1])
    if x is None or slope is None:
        return
    fits = len(slope) <= len(x) and all(
        s in (1, d) for s, d in zip(reversed(slope), reversed(x), strict=False))
    if not fits:
        _fail(op, "slope's shape", list(slope), f"a shape that broadcasts to X's {list(x)} "
              "(numpy rules, from the last axis: a per-channel slope of [N, C, H, W] is "
              "[C, 1, 1])")


def _direction(op, module):
    direction = onnx_d.get_attr(op, "direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        _fail(op, "attribute 'direction'", repr(direction),
              "'forward', 'reverse' or 'bidirectional'")


_CHECKS = {
    "Conv": _conv, "ConvTranspose": _conv, "MaxPool": _pool, "AveragePool": _pool,
    "Gemm": _gemm, "BatchNormalization": _batchnorm, "LRN": _lrn, "Clip": _clip,
    "Reshape": _reshape, "Pad": _pad, "Transpose": _transpose, "Range": _range, "Dropout": _dropout,
}
for _kind in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"):
    _CHECKS[_kind] = lambda op, module: (_reduce(op, module), _axes_attr(op, module))
for _kind in ("Softmax", "LogSoftmax", "Concat", "Split", "Flatten"):
    _CHECKS[_kind] = _axis
_CHECKS["Gather"] = lambda op, module: (_axis(op, module), _gather(op, module))
for _kind in ("Squeeze", "Unsqueeze"):
    _CHECKS[_kind] = _axes_attr
for _kind in ("Expand", "Tile", "ConstantOfShape"):
    _CHECKS[_kind] = _shape_vector
_CHECKS["PRelu"] = _prelu
for _kind in ("LSTM", "GRU", "RNN"):
    _CHECKS[_kind] = _direction


# ---- the budget ----------------------------------------------------------------------------

def planned_dims(op, module):
    """Result shapes of ops whose result can dwarf their operands, from constant operands,
    for when shape inference has not typed the result yet."""
    kind = onnx_d.op_type(op)
    if kind == "ConstantOfShape":
        s = _const(op, 0, module)
        return None if s is None else [int(d) for d in s.reshape(-1)]
    if kind == "Expand":
        x, s = _dims(op.operands[0]), _const(op, 1, module)
        if x is None or s is None:
            return None
        s = [int(d) for d in s.reshape(-1)]
        r = max(len(x), len(s))
        x, s = [1] * (r - len(x)) + list(x), [1] * (r - len(s)) + s
        return [max(a, b) for a, b in zip(x, s, strict=True)]
    if kind == "Tile":
        x, rep = _dims(op.operands[0]), _const(op, 1, module)
        if x is None or rep is None or rep.size != len(x):
            return None
        return [a * int(b) for a, b in zip(x, rep.reshape(-1), strict=True)]
    if kind == "Range":
        vals = [_const(op, k, module) for k in range(3)]
        if any(v is None for v in vals) or np.asarray(vals[2]).item() == 0:
            return None
        start, limit, delta = (np.asarray(v).item() for v in vals)
        return [max(int(math.ceil((limit - start) / delta)), 0)]
    return None


def check_budget(op, module) -> None:
    budget = budget_of(module)
    planned = None
    for k, res in enumerate(op.results):
        if not isinstance(res.type, TensorType):
            continue
        dims = _dims(res)
        if dims is None and k == 0:
            planned = planned_dims(op, module) if planned is None else planned
            dims = planned
        if dims is None:
            continue
        if any(d < 0 for d in dims):
            _fail(op, f"result {k}'s shape", list(dims), "non-negative sizes")
        itemsize = onnx_d.numpy_dtype(res.type.element_type).itemsize
        check_bytes(f"node {node_label(op)!r} ({onnx_d.op_type(op)}) result {k}", dims, itemsize,
                    budget)


# ---- result types against ONNX's inference --------------------------------------------------

def check_result_types(op, module) -> None:
    """The op's static result types are what ONNX's (strict) inference gives from its operands,
    so a type written by hand in ONNX IR text, or left by a pass, is never trusted by lowering.
    Only small constants are shown to ONNX (shape parameters, not weights)."""
    from compilerkit.onnx_passes.shape_inference import correct_dims

    if not op.results or not all(isinstance(v.type, NoneType) or onnx_d.is_static(v.type)
                                 for v in op.operands):
        return
    model = node_model(op, module, max_const_size=1 << 12)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except onnx.shape_inference.InferenceError as e:
        from compilerkit.frontend import inference_message
        msg = inference_message(e).split("): ", 1)[-1]
        raise ModelError(f"node {node_label(op)!r} ({onnx_d.op_type(op)}): {msg}") from None
    except Exception:  # noqa: BLE001 - ONNX cannot say: nothing to compare with
        return
    found = {vi.name: vi for vi in list(inferred.graph.output) + list(inferred.graph.value_info)}
    for k, res in enumerate(op.results):
        vi = found.get(f"out{k}")
        if vi is None or not onnx_d.is_static(res.type) or not res.uses and k > 0:
            continue
        tt = vi.type.tensor_type
        have = list(onnx_d.shape_of(res))
        if tt.elem_type and tt.elem_type in onnx_d._ELEM and (
                onnx_d.elem_type(tt.elem_type) != res.type.element_type):
            _fail(op, f"result {k}'s element type", res.type.element_type,
                  f"{onnx_d.elem_type(tt.elem_type)} (from its operands)")
        if not tt.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        if k == 0:
            dims = correct_dims(op, dims)
        if len(dims) != len(have) or any(0 <= d != h for d, h in zip(dims, have, strict=True)):
            _fail(op, f"result {k}'s shape", have,
                  f"{['?' if d < 0 else d for d in dims]} (from its operands and attributes)")


# ---- entry points --------------------------------------------------------------------------

def validate_op(op, module) -> None:
    """All checks for one onnx op whose operands are known as far as they are now."""
    if not op.name.startswith("onnx.") or op.name in ("onnx.Constant", "onnx.NoValue"):
        return
    check = _CHECKS.get(onnx_d.op_type(op))
    if check is not None:
        check(op, module)
    check_budget(op, module)


def validate_module(module) -> None:
    """validate_op on every op of the main function."""
    for op in main_func(module).body.block.ops:
        validate_op(op, module)


@dataclass(frozen=True)
class ValidatePass(ModulePass):
    """`validate-onnx`: check every op's attributes, constant operands and sizes against what
    lowering assumes (and the compile budget); changes nothing, raises ModelError."""

    name = "validate-onnx"

    def apply(self, ctx, op) -> None:
        validate_module(op)
