"""Decomposition on ONNX IR: rewrite ops into simpler ones that lowering already knows.

- inference BatchNormalization with constant parameters -> Mul(x, scale') + Add(shift'),
  scale' = scale / sqrt(var + eps), shift' = B - mean * scale' (shaped [C, 1, ...] to broadcast);
  when the input is a Conv with constant weights used only here, the scale and shift are folded
  into that Conv's weights and bias instead (no extra pass over the activation at all);
- Dropout (inference) and Identity -> their input;
- Gemm with a constant transposed operand -> the constant transposed, trans flag cleared;
- Sum/Max/Min/Mean of one operand -> that operand.
Assumes static shapes (run after shape inference).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, StringAttr, i64
from xdsl.passes import ModulePass

from compilerkit.dialects import onnx as onnx_d
from compilerkit.onnx_passes.single_node import main_func


def _name(op) -> str:
    a = op.attributes.get("onnx_node_name")
    return a.data if a is not None else onnx_d.op_type(op)


def _const(block, before, array, module, hint):
    c = onnx_d.make_constant(array, module, hint)
    block.insert_op_before(c, before)
    return c.results[0]


def _fold_into_conv(conv, scale, shift, module, block) -> bool:
    """y = (conv(x, W) + b) * s + t  ==  conv(x, W * s) + (b * s + t)."""
    if getattr(conv, "name", None) != "onnx.Conv" or len(list(conv.results[0].uses)) != 1:
        return False
    w = onnx_d.constant_value(conv.W, module)
    if w is None:
        return False
    has_bias = not onnx_d.is_absent(conv.B)
    b = onnx_d.constant_value(conv.B, module) if has_bias else None
    if has_bias and b is None:
        return False
    out_c = w.shape[0]
    if scale.shape[0] != out_c:
        return False
    new_w = (w * scale.reshape((out_c,) + (1,) * (w.ndim - 1))).astype(w.dtype)
    if onnx_d.is_splat(w) and np.all(scale == scale[0]):
        new_w = np.broadcast_to(new_w.reshape(-1)[0], w.shape)  # keep splat weights compact
    new_b = ((b if b is not None else 0) * scale + shift).astype(w.dtype)
    wv = _const(block, conv, new_w, module, _name(conv) + "_w")
    bv = _const(block, conv, new_b, module, _name(conv) + "_b")
    operands = [conv.X, wv, bv]
    new = onnx_d.create("Conv", operands, [conv.results[0].type], dict(conv.attributes))
    block.insert_op_before(new, conv)
    conv.results[0].replace_all_uses_with(new.results[0])
    block.erase_op(conv)
    return True


def _batchnorm(op, module, block) -> bool:
    if any(r.uses for r in op.results[1:]):  # training outputs (absent ones are typed none)
        return False
    if onnx_d.get_attr(op, "training_mode", 0):
        return False  # batch statistics, not the running ones: lowering refuses it
    params = [onnx_d.constant_value(v, module)
              for v in (op.scale, op.B, op.input_mean, op.input_var)]
    if any(p is None for p in params):
        return False
    scale, bias, mean, var = (p.astype(np.float64) for p in params)
    eps = onnx_d.get_attr(op, "epsilon", 1e-5)
    s = scale / np.sqrt(var + np.float32(eps))
    t = bias - mean * s
    x = op.X
    rank = len(onnx_d.shape_of(x))
    dtype = onnx_d.numpy_dtype(x.type.element_type)
    if _fold_into_conv(getattr(x, "owner", None), s, t, module, block):
        op.Y.replace_all_uses_with(op.X)  # the new Conv's result, not the erased `x`
        block.erase_op(op)
        return True
    bshape = (s.shape[0],) + (1,) * (rank - 2)
    sv = _const(block, op, s.astype(dtype).reshape(bshape), module, _name(op) + "_scale")
    tv = _const(block, op, t.astype(dtype).reshape(bshape), module, _name(op) + "_shift")
    mul = onnx_d.create("Mul", [x, sv], [x.type],
                        {"onnx_node_name": StringAttr(_name(op) + "_mul")})
    add = onnx_d.create("Add", [mul.results[0], tv], [x.type],
                        {"onnx_node_name": StringAttr(_name(op) + "_add")})
    block.insert_ops_before([mul, add], op)
    op.results[0].replace_all_uses_with(add.results[0])
    block.erase_op(op)
    return True


def _gemm(op, module, block) -> bool:
    changed = False
    for k, flag in ((0, "transA"), (1, "transB")):
        if onnx_d.get_attr(op, flag, 0):
            value = onnx_d.constant_value(op.operands[k], module)
            if value is None:
                continue
            t = (np.broadcast_to(value.reshape(-1)[0], value.T.shape) if onnx_d.is_splat(value)
                 else np.ascontiguousarray(value.T))
            v = _const(block, op, t, module, f"{_name(op)}_{flag}")
            op.operands[k] = v
            op.attributes[flag] = IntegerAttr(0, i64)
            changed = True
    return changed


def _training(op, module) -> bool:
    # Dropout is the identity only at inference (training_mode absent or constant false).
    if onnx_d.is_absent(op.training_mode):
        return False
    v = onnx_d.constant_value(op.training_mode, module)
    return v is None or bool(np.asarray(v).reshape(-1)[0])


def decompose(module) -> bool:
    f = main_func(module)
    block = f.body.block
    changed = False
    for op in list(block.ops):
        kind = onnx_d.op_type(op) if op.name.startswith("onnx.") else None
        if kind == "BatchNormalization":
            changed |= _batchnorm(op, module, block)
        elif kind in ("Dropout", "Identity") or (
                kind in ("Sum", "Max", "Min", "Mean") and len(op.operands) == 1):
            if any(r.uses for r in op.results[1:]) or (kind == "Dropout" and _training(op, module)):
                continue
            op.results[0].replace_all_uses_with(op.operands[0])
            block.erase_op(op)
            changed = True
        elif kind == "Gemm":
            changed |= _gemm(op, module, block)
    # Returned values that are now function arguments are fine: func.return takes any value.
    return changed


@dataclass(frozen=True)
class DecomposePass(ModulePass):
    """`decompose`: BatchNormalization and Gemm into simpler ops (folded into Conv where it can)."""

    name = "decompose"

    def apply(self, ctx, op) -> None:
        decompose(op)
