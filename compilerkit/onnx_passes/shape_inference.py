"""Shape inference on ONNX IR: give every result a static ranked tensor type.

Assumes the function arguments are static (the frontend fixed them). Each op whose result
types are not yet static is asked of ONNX's own shape inference as a one-node model, with its
constant operands as initializers; ops left dynamic stay so and lowering will refuse them.
An op whose operands are all static but that ONNX's (strict) inference refuses is a ModelError
naming the node, and a newly inferred type is checked against the model's declared one.
Where ONNX's C++ inference lags its own spec, the result is corrected here (pool_output_size).
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx
from xdsl.dialects.builtin import NoneType
from xdsl.passes import ModulePass

from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError, inference_message
from compilerkit.frontend.checks import check_declared
from compilerkit.onnx_passes.single_node import (
    elem_code,
    main_func,
    node_label,
    node_model,
    refresh_signature,
    set_type,
)


def pool_output_size(in_size, k, s, d, pad_begin, pad_end, ceil_mode) -> int:
    """MaxPool/AveragePool output length. With ceil_mode, a last window that would start in the
    right padding is dropped (the ONNX spec since opset 19 and onnxruntime do this; onnx's
    C++ shape inference does not)."""
    span = in_size + pad_begin + pad_end - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= in_size + pad_begin:
        out -= 1
    return out


def correct_dims(op, dims):
    """Result 0's dims as ONNX's inference gives them, corrected where it lags its spec."""
    return _pool_dims(op, dims)


def _pool_dims(op, dims):
    if onnx_d.op_type(op) not in ("MaxPool", "AveragePool") or len(dims) < 3:
        return dims
    if not onnx_d.get_attr(op, "ceil_mode", 0) or onnx_d.get_attr(
            op, "auto_pad", "NOTSET") != "NOTSET":
        return dims
    k = onnx_d.get_attr(op, "kernel_shape")
    r = len(k)
    st = onnx_d.get_attr(op, "strides", None) or [1] * r
    dil = onnx_d.get_attr(op, "dilations", None) or [1] * r
    pads = onnx_d.get_attr(op, "pads", None) or [0] * (2 * r)
    in_sp = onnx_d.shape_of(op.X)[2:]
    return list(dims[:2]) + [pool_output_size(in_sp[i], k[i], st[i], dil[i], pads[i],
                                              pads[r + i], 1) for i in range(r)]


def _forget_downstream(value, module):
    """Make every result computed from `value` dynamic again, so this pass re-infers it (users
    come later in the block) from the corrected shape."""
    stack = [value]
    while stack:
        v = stack.pop()
        for user in {use.operation for use in v.uses}:
            for r in list(user.results):
                if isinstance(r.type, NoneType) or not hasattr(r.type, "get_shape"):
                    continue
                if onnx_d.is_static(r.type):
                    stack.append(set_type(r, onnx_d.tensor_type(
                        [-1] * len(r.type.get_shape()), r.type.element_type), module))


# Ops whose one result has their first input's type by definition, where ONNX's inference
# (1.23) gives no shape.
SAME_TYPE_AS_INPUT = ("GroupNormalization",)


def infer_shapes(module) -> bool:
    f = main_func(module)
    changed = False
    for op in list(f.body.block.ops):
        if not op.name.startswith("onnx.") or op.name in ("onnx.Constant", "onnx.NoValue"):
            continue
        res0 = op.results[0] if op.results else None
        if res0 is not None and onnx_d.is_static(res0.type):
            # The frontend's whole-model inference may already have typed it: correct pools.
            dims = list(onnx_d.shape_of(res0))
            fixed = _pool_dims(op, dims)
            if fixed != dims:
                res0 = set_type(res0, onnx_d.tensor_type(fixed, res0.type.element_type), module)
                _forget_downstream(res0, module)
                changed = True
        if all(onnx_d.is_static(r.type) or isinstance(r.type, NoneType) for r in op.results):
            continue
        if not all(onnx_d.is_static(v.type) or isinstance(v.type, NoneType)
                   for v in op.operands):
            continue
        if onnx_d.op_type(op) in SAME_TYPE_AS_INPUT:
            res, t = op.results[0], op.operands[0].type
            check_declared(module, res, elem_code(t.element_type), list(t.get_shape()))
            set_type(res, t, module)
            changed = True
            continue
        model = node_model(op, module)
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        except onnx.shape_inference.InferenceError as e:
            # Its operands are all known: ONNX's definition of the op refuses them.
            msg = inference_message(e).split("): ", 1)[-1]
            raise ModelError(f"node {node_label(op)!r} ({onnx_d.op_type(op)}): {msg}") from None
        except Exception:  # noqa: BLE001 - leave it dynamic; lowering names the op if it matters
            continue
        found = {vi.name: vi for vi in inferred.graph.output}
        found.update({vi.name: vi for vi in inferred.graph.value_info})
        for k, res in enumerate(list(op.results)):
            vi = found.get(f"out{k}")
            tt = vi.type.tensor_type if vi is not None else None
            if tt is None or not tt.HasField("shape"):
                continue
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            if k == 0:
                dims = _pool_dims(op, dims)
            elem = onnx_d.elem_type(tt.elem_type) if tt.elem_type else res.type.element_type
            t = onnx_d.tensor_type(dims, elem)
            if t != res.type:
                check_declared(module, res, tt.elem_type or elem_code(elem), dims)
                set_type(res, t, module)
                changed = True
    refresh_signature(f)
    return changed


@dataclass(frozen=True)
class ShapeInferencePass(ModulePass):
    """`shape-inference`: give every result a static type where ONNX's inference can."""

    name = "shape-inference"

    def apply(self, ctx, op) -> None:
        infer_shapes(op)
