"""Helpers shared by the ONNX IR passes: walking the main function, and turning one onnx op
back into a one-node ONNX model so ONNX's own shape inference and reference evaluator can be
asked about it (the ONNX schema is the authority on each operator's semantics)."""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, NoneType, TensorType

from compilerkit.dialects import onnx as onnx_d

OPSET = 21


def main_func(module) -> func.FuncOp:
    for op in module.body.block.ops:
        if isinstance(op, func.FuncOp):
            return op
    raise ValueError("module has no function")


def node_label(op) -> str:
    """The ONNX node an op came from (its name, or OpType_index as the frontend names it)."""
    a = op.attributes.get("onnx_node_name")
    return a.data if a is not None else op.name.split(".", 1)[-1]


def set_type(value, t) -> None:
    value._type = t  # xDSL keeps the type in a private slot; results are retyped in place


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
        if name == "onnx_node_name":
            continue
        value = onnx_d.from_mlir_attr(attr)
        if isinstance(attr, DenseIntOrFPElementsAttr):
            value = numpy_helper.from_array(onnx_d.attr_array(attr))
        attrs[name] = value
    return attrs


def node_model(op, module, with_constants=True, outputs_typed=False, max_const_size=None):
    """A one-node ModelProto for `op`: non-constant inputs are graph inputs, constants become
    initializers so shape inference can see their values (e.g. Reshape's target shape); with
    `max_const_size`, only constants up to that many elements (shape parameters, not weights)."""
    inputs, inits, names = [], [], []
    for k, v in enumerate(op.operands):
        if isinstance(v.type, NoneType):
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
    outs = [f"out{k}" for k in range(len(op.results))]
    node = helper.make_node(onnx_d.op_type(op), names, outs, **_onnx_attrs(op))
    graph = helper.make_graph([node], "one", inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_of(op))])


def opset_of(op) -> int:
    """The ONNX opset the op's model was written against (attributes moved to inputs
    between opsets, e.g. Unsqueeze axes in 13), kept on the function by the frontend."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    if parent is not None and "onnx_opset" in parent.attributes:
        return parent.attributes["onnx_opset"].value.data
    return OPSET
