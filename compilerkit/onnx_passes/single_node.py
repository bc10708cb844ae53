"""Helpers shared by the ONNX IR passes: walking the main function, and turning one onnx op
back into a one-node ONNX model so ONNX's own shape inference and reference evaluator can be
asked about it (the ONNX schema is the authority on each operator's semantics)."""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, NoneType, TensorType
from xdsl.rewriter import Rewriter

from compilerkit.dialects import onnx as onnx_d
from compilerkit.dialects.onnx_schema import opset_of  # noqa: F401 - shared with the passes
from compilerkit.frontend.checks import ModelError, move_declared


def main_func(module) -> func.FuncOp:
    """The module's one function (a model is one graph). A module with several would have all
    but one silently skipped by every pass, so it is refused, naming them."""
    funcs = [op for op in module.body.block.ops if isinstance(op, func.FuncOp)]
    if len(funcs) != 1:
        names = ", ".join(f"@{f.sym_name.data}" for f in funcs)
        raise ModelError(f"the module has {len(funcs)} functions ({names or 'none'}); "
                         "compilerkit compiles one function (the model's graph) per module")
    return funcs[0]


def node_label(op) -> str:
    """The ONNX node an op came from (its name, or OpType_index as the frontend names it)."""
    a = op.attributes.get("onnx_node_name")
    return a.data if a is not None else op.name.split(".", 1)[-1]


def set_type(value, t, module=None):
    """Retype an op result through xDSL's rewriter (a new SSA value replaces `value` in every
    use; the model's declared type, if any, follows it). Returns the new value."""
    new = Rewriter.replace_value_with_new_type(value, t)
    if module is not None:
        move_declared(module, value, new)
    return new


def refresh_signature(f: func.FuncOp) -> None:
    ret = f.body.block.last_op
    f.function_type = f.function_type.__class__.from_lists(
        [a.type for a in f.body.block.args], [v.type for v in ret.operands])


def elem_code(elem) -> int:
    """The ONNX TensorProto data type of an MLIR element type."""
    for code, e in onnx_d._ELEM.items():
        if e == elem:
            return code
    raise NotImplementedError(str(elem))


def _onnx_attrs(op) -> dict:
    attrs = {}
    for name, attr in op.attributes.items():
        if name in ("onnx_node_name", "onnx_guards", "onnx_guard"):  # compilerkit's own tags
            continue
        value = onnx_d.from_mlir_attr(attr)
        if isinstance(attr, DenseIntOrFPElementsAttr):
            value = numpy_helper.from_array(onnx_d.attr_array(attr))
        attrs[name] = value
    if onnx_d.op_type(op) == "MeanVarianceNormalization":
        # ONNX's inference (1.23) fails inside the op's function body when `axes` is left to
        # its default (see frontend._infer_types): spell it out.
        attrs.setdefault("axes", [0, 2, 3])
    return attrs


def node_model(op, module, with_constants=True, max_const_size=None):
    """A one-node ModelProto for `op`: non-constant inputs are graph inputs, constants become
    initializers so shape inference can see their values (e.g. Reshape's target shape); with
    `max_const_size`, only constants up to that many elements (shape parameters, not weights)."""
    inputs, inits, names = [], [], []
    for k, v in enumerate(onnx_d.onnx_inputs(op)):  # in the order of the model's opset
        if v is None:
            names.append("")
            continue
        name = f"in{k}"
        names.append(name)
        value = onnx_d.constant_value(v, module) if with_constants else None
        if value is not None and max_const_size is not None and value.size > max_const_size:
            value = None
        if value is not None:
            inits.append(numpy_helper.from_array(np.array(value, order="C"), name))
        t = v.type
        shape = list(t.get_shape()) if isinstance(t, TensorType) else None
        if shape is not None:
            shape = [d if d >= 0 else None for d in shape]
        inputs.append(helper.make_tensor_value_info(name, elem_code(t.element_type), shape))
    # Result k is output `out{k}`; an absent optional output (type none) has no name.
    outs = ["" if isinstance(r.type, NoneType) else f"out{k}" for k, r in enumerate(op.results)]
    while outs and not outs[-1]:
        outs.pop()
    node = helper.make_node(onnx_d.op_type(op), names, outs, **_onnx_attrs(op))
    graph = helper.make_graph([node], "one", inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outs if o], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_of(op))])
