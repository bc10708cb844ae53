"""Constant folding on ONNX IR: an op whose operands are all constants becomes a constant.

Covers the shape-computing subgraphs Keras/tf2onnx export (Shape -> Gather/Slice -> Concat ->
Cast/Unsqueeze -> Reshape): `Shape` and `Size` of a statically shaped value fold even though
their operand is not constant. Values are computed by ONNX's reference evaluator, so folding
means what the ONNX spec says. ConstantOfShape folds to a splat kept as a zero-copy broadcast
(the light models build all their weights this way). Operands or results above FOLD_LIMIT
elements are left alone unless they are splats (the result size is known before evaluating:
from its type, or from Expand/Tile/Range's constant operands), so folding never blows up the
model; every op is validated (validate_onnx.py, the compile budget included) before it is folded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from xdsl.dialects.builtin import NoneType
from xdsl.passes import ModulePass

from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend.checks import check_declared, move_declared
from compilerkit.onnx_passes.single_node import elem_code, main_func, node_model
from compilerkit.onnx_passes.validate_onnx import planned_dims, validate_op

FOLD_LIMIT = 1 << 22
# Ops never folded: they have side inputs of no value, or folding would only copy.
_NEVER = {"Constant", "NoValue", "Dropout"}
# Ops whose result may be far larger than their operands.
_GROWING = {"Expand", "Tile", "Range", "Pad", "ConvTranspose", "Resize", "Upsample"}


class BatchNormalization(OpRun):
    """BatchNormalization as onnxruntime and the lowering compute it when only Y is used.

    ONNX's reference evaluator runs opsets 7-13 in training mode (opset 7-8: `is_test` is gone,
    so it reads as false; opset 9-13: `momentum` always has its default, which it takes for a
    training request) and so folds a constant input with batch statistics, not the running
    ones. Opsets 7-13 have no training attribute: one used output means inference."""

    op_domain = ""

    def _run(self, x, scale, bias, mean, var, epsilon=None, momentum=None, training_mode=None,
             is_test=None, spatial=None):  # noqa: ARG002 - the schema's attributes
        eps = 1e-5 if epsilon is None else epsilon
        dims = (-1,) + (1,) * (x.ndim - 2)
        y = (scale.reshape(dims) * (x - mean.reshape(dims)) / np.sqrt(var.reshape(dims) + eps)
             + bias.reshape(dims))
        return (y.astype(x.dtype),)


class LRN(OpRun):
    """LRN summing over channels, as the spec says. The reference evaluator's loop runs over
    the batch axis (`range(x.shape[0])`), so for N != C it leaves channels unnormalised or
    fails: ONNX's node tests (N = C = 5) never show it."""

    op_domain = ""

    def _run(self, x, alpha=None, beta=None, bias=None, size=None):
        alpha = 1e-4 if alpha is None else alpha
        beta = 0.75 if beta is None else beta
        bias = 1.0 if bias is None else bias
        channels = x.shape[1]
        before, after = (size - 1) // 2, -(-(size - 1) // 2)
        squares = x ** 2
        total = np.zeros_like(squares)
        for c in range(channels):
            total[:, c] = squares[:, max(0, c - before):min(channels, c + after + 1)].sum(axis=1)
        return ((x / (bias + (alpha / size) * total) ** beta).astype(x.dtype),)


class LpNormalization(OpRun):
    """x / ||x||_p along `axis`. The reference evaluator sums x**p without the absolute value,
    so an L1 norm of mixed signs cancels (x = [1, -2] gave [-1, 2], not [1/3, -2/3])."""

    op_domain = ""

    def _run(self, x, axis=None, p=None):
        axis = -1 if axis is None else axis
        p = 2 if p is None else p
        norm = np.power(np.power(np.abs(x), p).sum(axis=axis, keepdims=True), 1.0 / p)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (np.where(norm == 0, 0, x / norm).astype(x.dtype),)  # 0/0 is 0, as its spec


# The reference evaluator's ops that disagree with the ONNX spec (and onnxruntime); the fuzz's
# judge of special values (tests/fuzz/classify.py) uses the same corrections.
REFERENCE_FIXES = [BatchNormalization, LRN, LpNormalization]


def _evaluate(op, module):
    kind = onnx_d.op_type(op)
    operands = [v for v in op.operands if not isinstance(v.type, NoneType)]
    if kind in ("Shape", "Size") and all(onnx_d.is_static(v.type) for v in operands):
        shape = np.array(onnx_d.shape_of(operands[0]), dtype=np.int64)
        if kind == "Size":
            return [np.array(int(np.prod(shape)), dtype=np.int64)]
        start = onnx_d.get_attr(op, "start", 0)
        end = onnx_d.get_attr(op, "end", None)
        return [shape[start:end]]
    values = [onnx_d.constant_value(v, module) for v in operands]
    if any(v is None for v in values):
        return None
    if _divides_wild(kind, values):
        return None  # the run time's guard raises RunError naming the node
    if kind == "BatchNormalization" and (len(op.results) > 1 and any(
            r.uses for r in op.results[1:]) or onnx_d.get_attr(op, "training_mode", 0)):
        return None  # batch statistics: lowering refuses training mode by name
    if kind == "ConstantOfShape":
        fill = onnx_d.get_attr(op, "value", np.zeros(1, np.float32))
        fill = np.asarray(fill).reshape(-1)[:1]
        shape = tuple(int(d) for d in values[0])
        return [np.broadcast_to(fill.reshape(()), shape)]
    if any(v.size > FOLD_LIMIT for v in values) or _result_size(op, module) > FOLD_LIMIT:
        return None  # lowering computes it at run time instead of the compiler holding it
    model = node_model(op, module, with_constants=False)
    feeds = {f"in{k}": np.array(onnx_d.constant_value(v, module), order="C")
             for k, v in enumerate(onnx_d.onnx_inputs(op)) if v is not None}
    try:
        results = list(ReferenceEvaluator(model, new_ops=REFERENCE_FIXES).run(None, feeds))
    except Exception:  # noqa: BLE001 - not foldable here; lowering will compile it instead
        return None
    return [_compact(r) for r in results]


def _divides_wild(kind: str, values) -> bool:
    """Whether an integer Div or Mod has a divisor of 0, or divides the most negative value
    by -1: what the run time's guard refuses (codegen/emit.py safe_divide) and numpy answers
    in silence (0, or a wrapped quotient). Folding such a node would give one answer at
    compile time and `RunError` for the same data at run time, so it is left unfolded."""
    if kind not in ("Div", "Mod") or len(values) != 2:
        return False
    x, y = (np.asarray(v) for v in values)
    if not (np.issubdtype(x.dtype, np.integer) and np.issubdtype(y.dtype, np.integer)):
        return False
    if np.any(y == 0):
        return True
    if not np.issubdtype(y.dtype, np.signedinteger):
        return False
    x, y = np.broadcast_arrays(x, y)
    return bool(np.any((x == np.iinfo(x.dtype).min) & (y == -1)))


def _opaque(op) -> bool:
    """Ops with a value the dialect cannot hold as a constant (sequences, maps, optionals: an
    input or output whose schema type has no tensor) are left to lowering, which refuses them."""
    info = onnx_d.INFO.get(op.name)
    return info is None or any(not f.tensors for f in info.inputs + info.outputs)


def _result_size(op, module) -> int:
    """Elements of the op's results, known before evaluating it: from static result types, or
    from the constant operands for ops whose result can dwarf their inputs (Expand, Tile,
    Range); otherwise 0 (the result is no larger than the inputs FOLD_LIMIT bounds)."""
    total = 0
    for k, r in enumerate(op.results):
        if onnx_d.is_static(r.type):
            total += int(np.prod(onnx_d.shape_of(r), dtype=object))
        elif k == 0:
            dims = planned_dims(op, module)
            if dims is None and onnx_d.op_type(op) in _GROWING:
                return FOLD_LIMIT + 1  # unknown size: do not fold blind
            total += int(np.prod(dims, dtype=object)) if dims is not None else 0
    return total


def _compact(array):
    """A large result holding one value (a Reshape/Transpose of a splat weight) is kept as a
    zero-copy broadcast, so codegen still emits it as a fill instead of megabytes of text."""
    array = np.asarray(array)
    if array.size > 1024 and np.all(array == array.reshape(-1)[0]):
        return np.broadcast_to(array.reshape(-1)[0], array.shape)
    return array


def fold_constants(module) -> bool:
    """Fold every all-constant op; returns whether anything changed."""
    f = main_func(module)
    block = f.body.block
    changed = False
    for op in list(f.body.block.ops):
        if not op.name.startswith("onnx.") or onnx_d.op_type(op) in _NEVER:
            continue
        # Results of type none are absent optional outputs: they have no value to fold.
        results = [r for r in op.results if not isinstance(r.type, NoneType)]
        if not results or not all(r.uses for r in results) or _opaque(op):
            continue
        validate_op(op, module)  # never compute with what the ONNX spec refuses
        outs = _evaluate(op, module)
        if outs is None:
            continue
        hint = op.attributes["onnx_node_name"].data if "onnx_node_name" in op.attributes else "c"
        new_ops = []
        for res, value in zip(results, outs, strict=True):
            value = np.asarray(value)
            want = res.type.element_type if hasattr(res.type, "element_type") else None
            if want is not None:
                value = value.astype(onnx_d.numpy_dtype(want), copy=False)
            c = onnx_d.make_constant(value, module, hint)
            new_ops.append(c)
        f.body.block.insert_ops_before(new_ops, op)
        for res, c in zip(results, new_ops, strict=True):
            t = c.results[0].type
            check_declared(module, res, elem_code(t.element_type), t.get_shape())
            move_declared(module, res, c.results[0])
            res.replace_all_uses_with(c.results[0])
        block.erase_op(op)
        changed = True
    return changed


@dataclass(frozen=True)
class ConstantFoldingPass(ModulePass):
    """`constant-folding`: fold to a fixed point, re-running shape inference after each sweep
    (folding a Shape subgraph makes a Reshape's result type known, which may let more fold)."""

    name = "constant-folding"

    def apply(self, ctx, op) -> None:
        from compilerkit.onnx_passes.shape_inference import infer_shapes

        while fold_constants(op):
            infer_shapes(op)
