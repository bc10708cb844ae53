"""Frontend: ONNX protobuf (file, bytes or ModelProto) -> ONNX IR.

Assumes a single ONNX graph (the default domain, no control flow). Graph inputs that are also
initializers are treated as constants. Every dynamic dimension of a real input must be fixed,
either by the model or by `input_shapes`; ONNX's own shape inference (with data propagation)
then types the intermediate values, and compilerkit's shape-inference pass finishes the job
after constant folding.
"""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import ModelProto, helper
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    IntegerAttr,
    ModuleOp,
    NoneType,
    StringAttr,
    UnrankedTensorType,
    i64,
)
from xdsl.ir import Block, Region

from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend.tensors import ModelError, to_array

__all__ = ["ModelError", "UnsupportedOpError", "load_model", "import_model", "to_array"]


class UnsupportedOpError(NotImplementedError):
    """An ONNX node whose operator compilerkit cannot compile."""


def load_model(model) -> tuple[ModelProto, str | None]:
    """A ModelProto and the folder external data may be read from (None for bytes/protos)."""
    if isinstance(model, ModelProto):
        return model, None
    base_dir = None
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            raise ModelError(f"{str(path)!r}: no such ONNX file")
        data = path.read_bytes()
        base_dir = str(path.resolve().parent)
        where = str(path)
    elif isinstance(model, (bytes, bytearray, memoryview)):
        data, where = bytes(model), "<bytes>"
    else:
        raise TypeError(f"expected a path, bytes or onnx.ModelProto, got {type(model).__name__}")
    proto = ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise ModelError(f"{where}: not a valid ONNX model (protobuf decode failed: {e}); "
                         "the file may be truncated or not ONNX at all") from None
    if not proto.HasField("graph") or proto.ir_version == 0 or not proto.graph.output:
        raise ModelError(f"{where}: not an ONNX model (no graph, IR version or outputs); "
                         "the file may be truncated or not ONNX at all")
    return proto, base_dir


def _fix_input_shapes(proto: ModelProto, input_shapes: dict | None) -> ModelProto:
    inits = {t.name for t in proto.graph.initializer}
    input_shapes = dict(input_shapes or {})
    names = [i.name for i in proto.graph.input if i.name not in inits]
    unknown = set(input_shapes) - set(names)
    if unknown:
        raise ModelError(f"input_shapes names unknown inputs {sorted(unknown)}; "
                         f"the model's inputs are {names}")
    proto = proto.__class__.FromString(proto.SerializeToString()) if input_shapes else proto
    for inp in proto.graph.input:
        if inp.name in inits:
            continue
        tt = inp.type.tensor_type
        if inp.name in input_shapes:
            shape = [int(d) for d in input_shapes[inp.name]]
            old = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            if tt.HasField("shape") and len(old) != len(shape):
                raise ModelError(f"input {inp.name!r}: input_shapes gives rank {len(shape)}, "
                                 f"the model says rank {len(old)}")
            # A model may give no shape at all (old is empty): then there is nothing to clash.
            for o, n in zip(old, shape, strict=False):
                if o > 0 and o != n:
                    raise ModelError(f"input {inp.name!r}: input_shapes gives {shape}, "
                                     f"the model fixes it to {old}")
            tt.shape.Clear()
            for d in shape:
                tt.shape.dim.add().dim_value = d
        else:
            if not tt.HasField("shape"):
                raise ModelError(f"input {inp.name!r} has no shape; give it with input_shapes="
                                 f"{{{inp.name!r}: [...]}}")
            for k, d in enumerate(tt.shape.dim):
                if not d.HasField("dim_value") or d.dim_value <= 0:
                    sym = d.dim_param or "?"
                    raise ModelError(
                        f"input {inp.name!r} has a dynamic dimension {k} ({sym!r}); fix it with "
                        f"input_shapes={{{inp.name!r}: [...]}}")
    return proto


def _value_types(proto: ModelProto) -> dict:
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    except Exception:  # noqa: BLE001 - ONNX inference is best effort; our pass completes it
        inferred = proto
    types = {}
    g = inferred.graph
    for vi in list(g.value_info) + list(g.output) + list(g.input):
        tt = vi.type.tensor_type
        if not tt.elem_type:
            continue
        try:
            elem = onnx_d.elem_type(tt.elem_type)
        except NotImplementedError:
            continue
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            types[vi.name] = onnx_d.tensor_type(dims, elem)
        else:
            types[vi.name] = UnrankedTensorType(elem)
    return types


def _onnx_attr_value(a: onnx.AttributeProto, base_dir):
    if a.type == onnx.AttributeProto.TENSOR:
        return to_array(a.t, base_dir)
    if a.type == onnx.AttributeProto.GRAPH or a.type == onnx.AttributeProto.GRAPHS:
        raise UnsupportedOpError("subgraph attributes (control flow) are not supported")
    return helper.get_attribute_value(a)


def import_model(model, input_shapes: dict | None = None) -> ModuleOp:
    """ONNX model (path, bytes or ModelProto) -> ONNX IR module with one `main_graph` func."""
    proto, base_dir = load_model(model)
    # Exporters (tf2onnx, keras2onnx) declare ai.onnx.ml even when no node uses it: refuse a
    # foreign domain only where a node actually belongs to it.
    for node in proto.graph.node:
        if node.domain not in ("", "ai.onnx"):
            raise UnsupportedOpError(f"node {node.name or node.op_type!r}: operator domain "
                                     f"{node.domain!r} ({node.op_type}) is not supported")
    proto = _fix_input_shapes(proto, input_shapes)
    types = _value_types(proto)
    g = proto.graph
    module = ModuleOp([])
    values = {}
    inits = {t.name: t for t in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    for i in inputs:
        if i.name not in types:
            dt = i.type.tensor_type.elem_type
            name = onnx.TensorProto.DataType.Name(dt) if dt else "no tensor type"
            raise UnsupportedOpError(f"input {i.name!r}: element type {name} is not supported "
                                     f"(supported: float, double, int8/16/32/64, bool)")
    arg_types = [types[i.name] for i in inputs]
    block = Block(arg_types=arg_types)
    for inp, arg in zip(inputs, block.args, strict=True):
        values[inp.name] = arg
        arg.name_hint = _hint(inp.name)
    for name, t in inits.items():
        op = onnx_d.make_constant(to_array(t, base_dir), module, name)
        block.add_op(op)
        values[name] = op.results[0]
    none_value = None
    for index, node in enumerate(g.node):
        label = node.name or f"{node.op_type}_{index}"
        if node.domain not in ("", "ai.onnx"):
            raise UnsupportedOpError(f"node {label!r}: op {node.domain}.{node.op_type} is not "
                                     "in the default ONNX domain; not supported")
        if node.op_type not in onnx_d.OPS or node.op_type == "NoValue":
            raise UnsupportedOpError(
                f"node {label!r}: op {node.op_type!r} is not supported; supported ops: "
                f"{', '.join(sorted(onnx_d.ONNX_OPS))}")
        attrs = {a.name: onnx_d.to_mlir_attr(_onnx_attr_value(a, base_dir))
                 for a in node.attribute}
        if node.op_type == "Constant":
            (key, value), = [(a.name, _onnx_attr_value(a, base_dir)) for a in node.attribute]
            import numpy as np
            array = np.asarray(value, dtype=np.float32 if isinstance(value, float) or (
                isinstance(value, list) and value and isinstance(value[0], float)) else None)
            if key not in ("value", "value_float", "value_floats", "value_int", "value_ints"):
                raise UnsupportedOpError(f"node {label!r}: Constant with {key} not supported")
            if array.dtype == np.int64 or key.startswith("value_int"):
                array = array.astype(np.int64)
            op = onnx_d.make_constant(array, module, node.output[0])
            block.add_op(op)
            values[node.output[0]] = op.results[0]
            continue
        operands = []
        for name in node.input:
            if name == "":
                if none_value is None:
                    nv = onnx_d.create("NoValue", [], [NoneType()])
                    block.add_op(nv)
                    none_value = nv.results[0]
                operands.append(none_value)
            elif name not in values:
                raise ModelError(f"node {label!r}: input {name!r} is not produced by any node")
            else:
                operands.append(values[name])
        result_types = []
        for name in node.output:
            t = types.get(name)
            if t is None:
                elem = operands[0].type.element_type if operands and hasattr(
                    operands[0].type, "element_type") else onnx_d.f32
                t = UnrankedTensorType(elem)
            result_types.append(t)
        attrs["onnx_node_name"] = StringAttr(label)
        op = onnx_d.create(node.op_type, operands, result_types, attrs)
        block.add_op(op)
        for name, res in zip(node.output, op.results, strict=True):
            values[name] = res
            if name:
                res.name_hint = _hint(name)
    outs = [values[o.name] for o in g.output]
    block.add_op(func.ReturnOp(*outs))
    f = func.FuncOp("main_graph", (arg_types, [v.type for v in outs]), Region(block))
    f.attributes["input_names"] = ArrayAttr([StringAttr(i.name) for i in inputs])
    f.attributes["output_names"] = ArrayAttr([StringAttr(o.name) for o in g.output])
    opset = max([o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")] or [21])
    f.attributes["onnx_opset"] = IntegerAttr(opset, i64)
    module.body.block.add_op(f)
    return module


def _hint(name: str) -> str | None:
    # SSA names must be [A-Za-z0-9_.$-]; fall back to numbering when an ONNX name is not.
    clean = "".join(ch if ch.isalnum() or ch in "_" else "_" for ch in name)
    if not clean or clean[0].isdigit():
        clean = "v" + clean
    return clean
