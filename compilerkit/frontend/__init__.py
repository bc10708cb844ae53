"""Frontend: ONNX protobuf (file, bytes or ModelProto) -> ONNX IR.

Assumes a single ONNX graph (the default domain, opsets MIN_OPSET..MAX_OPSET; older ones are
upgraded to MIN_OPSET with onnx.version_converter, old_opsets.py). If, Loop and Scan are
unrolled and inlined into the graph first (control_flow.py); other subgraphs and non-tensor
graph inputs and outputs are refused as unsupported before the graph is checked. Graph inputs
that are also initializers are treated as constants; sparse initializers become dense ones.
Names are the model's own for the user (any Unicode; bytes that are not UTF-8 are shown
escaped, hygiene.text) and ASCII spellings of them in the IR (_hint).
Every dynamic dimension of a real input must be fixed, either by the model or by `input_shapes`;
those are the only types taken as given. ONNX's own shape inference (strict, with data
propagation, on the model with its declared `value_info`/output types removed) then types the
intermediate values, and compilerkit's shape-inference pass finishes the job after constant
folding. A declared element type that disagrees with the inferred one is a `ModelError`; a
declared shape that disagrees is overridden with a `DeclaredShapeWarning` (onnxruntime's rule,
checks.py). The graph is checked first: one producer per tensor, topological order, every output
produced and named once.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np
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
from compilerkit.frontend.arguments import (
    OptionError,
    check_input_shapes,
    check_max_bytes,
    check_path,
)
from compilerkit.frontend.checks import (
    DEFAULT_MAX_BYTES,
    ConvAccuracyWarning,
    DeclaredShapeWarning,
    ModelError,
    OpsetUpgradeWarning,
    UnsupportedOpError,
    check_bytes,
    compare_declared,
    dtype_name,
    record_declared,
    set_budget,
)
from compilerkit.frontend.control_flow import CONTROL_FLOW, expand_control_flow
from compilerkit.frontend.hygiene import (
    MAX_OPSET,
    MIN_OPSET,
    check_dims,
    check_graph,
    model_opset,
    node_label,
    text,
)
from compilerkit.frontend.old_opsets import upgrade
from compilerkit.frontend.sequences import rewrite as rewrite_sequences
from compilerkit.frontend.tensors import sparse_to_dense, to_array

__all__ = ["ModelError", "UnsupportedOpError", "OptionError", "DeclaredShapeWarning",
           "OpsetUpgradeWarning", "ConvAccuracyWarning",
           "load_model", "import_model", "to_array", "MIN_OPSET", "MAX_OPSET"]


def load_model(model) -> tuple[ModelProto, str | None]:
    """A ModelProto and the folder external data may be read from (None for bytes/protos)."""
    if isinstance(model, ModelProto):
        return model, None
    base_dir = None
    if isinstance(model, (str, os.PathLike)):
        path = Path(check_path("the model path", model))
        if not path.is_file():
            raise ModelError(f"{str(path)!r}: no such ONNX file")
        data = path.read_bytes()
        base_dir = str(path.resolve().parent)
        where = str(path)
    elif isinstance(model, (bytes, bytearray, memoryview)):
        data, where = bytes(model), "<bytes>"
    else:
        raise OptionError(f"the model must be a path, bytes or an onnx.ModelProto (or MLIR: a "
                          f"ModuleOp, its text or a .mlir path), got {type(model).__name__}")
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


LIGHT_BYTES = 4096  # float initializers larger than this reach shape inference as typed inputs


def _light_copy(proto: ModelProto, base_dir=None, budget=None) -> ModelProto:
    """The model for type inference: everything but the data of large non-integer
    initializers, which become graph inputs of their type and shape instead (inference never
    reads float weights; integer tensors, shapes and indices, stay for data propagation).
    Copying and serialising ResNet-50's 100 MB of weights for inference twice took a second of
    its import. An integer initializer stored as external data is read in (from `base_dir`,
    within `budget`): ONNX's inference cannot read external data ("Cannot parse data from
    external tensors"), and a Reshape's shape saved that way is still a constant."""
    light = ModelProto()
    light.ir_version = proto.ir_version
    light.opset_import.extend(proto.opset_import)
    light.functions.extend(proto.functions)
    g, lg = proto.graph, light.graph
    lg.name = g.name
    lg.node.extend(g.node)
    lg.input.extend(g.input)
    lg.output.extend(g.output)
    lg.value_info.extend(g.value_info)
    lg.sparse_initializer.extend(g.sparse_initializer)
    listed = {i.name for i in g.input}
    for t in g.initializer:  # sizes were checked (check_dims) before this runs
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.data_type) if (
            t.data_type in onnx.helper.get_all_tensor_dtypes()) else None
        integer = dtype is not None and dtype.kind in "iub"
        size = math.prod(t.dims) * (dtype.itemsize if dtype is not None else 1)
        external = t.data_location == onnx.TensorProto.EXTERNAL
        if integer and external:
            lg.initializer.append(onnx.numpy_helper.from_array(to_array(t, base_dir, budget),
                                                               t.name))
        elif (integer or size <= LIGHT_BYTES or dtype is None or t.name in listed) and not (
                external and t.name not in listed):
            lg.initializer.append(t)  # (an initializer also listed as an input keeps its data)
        else:
            lg.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims))
    if light.ir_version < 4:  # IR 3's inference types only the initializers listed as inputs
        listed = {i.name for i in lg.input}
        lg.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                        for t in lg.initializer if t.name not in listed)
    return light


def _densified(proto: ModelProto, base_dir, budget: int) -> ModelProto:
    """A copy of `proto` whose sparse initializers are dense ones (what onnxruntime does with
    them on loading); the caller's model is left as it is."""
    dense = ModelProto()
    dense.CopyFrom(proto)
    tensors = [sparse_to_dense(sp, base_dir, budget) for sp in dense.graph.sparse_initializer]
    del dense.graph.sparse_initializer[:]
    dense.graph.initializer.extend(tensors)
    return dense


def _fix_input_shapes(proto: ModelProto, input_shapes: dict | None, inits: set) -> ModelProto:
    """Check `input_shapes` against the model's inputs (names in `inits` are weights) and
    write them into `proto` (the light copy: changed in place)."""
    input_shapes = dict(input_shapes or {})
    names = [text(i.name) for i in proto.graph.input if i.name not in inits]
    unknown = set(input_shapes) - set(names)
    if unknown:
        raise ModelError(f"input_shapes names unknown inputs {sorted(unknown)}; "
                         f"the model's inputs are {names}")
    for inp in proto.graph.input:
        if inp.name in inits:
            continue
        tt = inp.type.tensor_type
        if text(inp.name) in input_shapes:
            shape = input_shapes[text(inp.name)]  # checked: non-negative ints
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
            for k, d in enumerate(tt.shape.dim):  # a dim_value of 0 is static (empty)
                if not d.HasField("dim_value") or d.dim_value < 0:
                    sym = d.dim_param or "?"
                    raise ModelError(
                        f"input {inp.name!r} has a dynamic dimension {k} ({sym!r}); fix it with "
                        f"input_shapes={{{inp.name!r}: [...]}}")
    return proto


def _proto_type(vi):
    """(elem or 0, dims with -1 for unknown, or None when the rank is unknown)."""
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return tt.elem_type, None
    return tt.elem_type, [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]


def _infer_types(proto: ModelProto) -> tuple[dict, dict]:
    """The types ONNX's inference (strict, with data propagation) gives every tensor from the
    graph inputs and the nodes' definitions alone: the declared `value_info` and output types
    are removed first, so they never stand in for an inferred type. Returns (inferred types by
    name as (elem, dims), declared types by name)."""
    declared = {vi.name: _proto_type(vi) for vi in list(proto.graph.value_info)
                + list(proto.graph.output) if vi.type.tensor_type.elem_type}
    stripped = proto  # the light copy (_light_copy), changed in place
    del stripped.graph.value_info[:]
    for o in stripped.graph.output:
        o.ClearField("type")
    for k, node in enumerate(stripped.graph.node):
        node.name = node_label(node, k)  # so ONNX's messages name every node as we do
        if node.op_type == "MeanVarianceNormalization" and not any(
                a.name == "axes" for a in node.attribute):
            # ONNX's inference (1.23) fails inside the op's function body ("One and only one
            # of the attributes 'value'...") when `axes` is left to its default: spell it out.
            node.attribute.append(helper.make_attribute("axes", [0, 2, 3]))
    try:
        inferred = onnx.shape_inference.infer_shapes(stripped, strict_mode=True, data_prop=True)
    except Exception as e:  # noqa: BLE001 - ONNX names the node and the rule it broke
        raise ModelError(inference_message(e)) from None
    g = inferred.graph
    types = {vi.name: _proto_type(vi) for vi in list(g.value_info) + list(g.output)
             + list(g.input) if vi.type.tensor_type.elem_type}
    return types, declared


def inference_message(e: Exception) -> str:
    """ONNX's "Inference error(s): (op_type:Conv, node name: c): [ShapeInferenceError] msg"
    as "node 'c' (Conv): msg"."""
    text = " ".join(str(e).split())
    found = re.findall(r"\(op_type:(\w+), node name: ([^)]*)\): (?:\[\w+\] )?(.*?)"
                       r"(?= \(op_type:|$)", text)
    if not found:
        return f"the model is not valid ONNX: {text}"
    # An op defined by a function body (MeanVarianceNormalization) reports its body's errors
    # nested, without node names: the first of them is the reason.
    nested = re.findall(r"\(op_type:(\w+)\): (?:\[\w+\] )?(.*?)(?= \(op_type:|$)", text)
    parts = []
    for op, name, msg in found:
        if msg.rstrip().endswith("Inference error(s):") and nested:
            msg = "in its function body, {}: {}".format(*nested[0])
        parts.append(f"node {name!r} ({op}): {msg}")
    return "; ".join(parts)


def _mlir_type(t):
    elem_code, dims = t
    try:
        elem = onnx_d.elem_type(elem_code)
    except NotImplementedError:
        return None
    return UnrankedTensorType(elem) if dims is None else onnx_d.tensor_type(dims, elem)


def _onnx_attr_value(a: onnx.AttributeProto, base_dir, max_bytes=None):
    if a.type == onnx.AttributeProto.TENSOR:
        return to_array(a.t, base_dir, max_bytes)
    if a.type == onnx.AttributeProto.SPARSE_TENSOR:  # Constant's sparse_value
        return to_array(sparse_to_dense(a.sparse_tensor, base_dir, max_bytes))
    if a.type == onnx.AttributeProto.GRAPH or a.type == onnx.AttributeProto.GRAPHS:
        raise UnsupportedOpError("subgraph attributes (control flow) are not supported")
    return helper.get_attribute_value(a)


def import_model(model, input_shapes: dict | None = None,
                 max_bytes: int | None = None, max_unroll: int | None = None) -> ModuleOp:
    """ONNX model (path, bytes or ModelProto) -> ONNX IR module with one `main_graph` func.
    `max_bytes` (default checks.DEFAULT_MAX_BYTES) bounds every tensor the compile holds;
    `max_unroll` (default control_flow.DEFAULT_MAX_UNROLL) the loop iterations and scan steps
    unrolled (If, Loop and Scan are inlined on import: control_flow.py)."""
    proto, base_dir = load_model(model)
    try:
        return _import(proto, base_dir, input_shapes, max_bytes, max_unroll)
    except UnicodeDecodeError as e:
        # protobuf decodes string fields (names, attributes) only when they are read.
        raise ModelError(f"the model holds a name or string that is not valid UTF-8 ({e}); "
                         "the file may be corrupt") from None


def _refuse_unsupported(proto) -> None:
    """Refuse what compilerkit does not compile: foreign domains, names no ONNX operator has,
    subgraphs outside If/Loop/Scan, graph inputs and outputs that are not tensors."""
    # What compilerkit does not compile is refused as unsupported before the hygiene checks,
    # which would otherwise misread it (a subgraph's outer-scope reads look unsorted to the
    # checker; a sequence input has no tensor shape).
    # Exporters (tf2onnx, keras2onnx) declare ai.onnx.ml even when no node uses it: refuse a
    # foreign domain only where a node actually belongs to it.
    for index, node in enumerate(proto.graph.node):
        label = node_label(node, index)
        if node.domain not in ("", "ai.onnx"):
            raise UnsupportedOpError(f"node {label!r}: operator domain "
                                     f"{text(node.domain)!r} ({text(node.op_type)}) is not "
                                     "supported")
        if node.op_type not in onnx_d.OPS or node.op_type == "NoValue":
            # Every ONNX operator imports (lowering refuses those it cannot compile): this is
            # a name the default domain does not define.
            raise UnsupportedOpError(
                f"node {label!r}: op {text(node.op_type)!r} is not an operator of the default "
                f"ONNX domain (onnx {onnx.__version__} defines {len(onnx_d.OPS) - 1})")
        for a in node.attribute:
            if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) and (
                    node.op_type not in CONTROL_FLOW):
                raise UnsupportedOpError(
                    f"node {label!r} ({node.op_type}): attribute {text(a.name)!r} is a "
                    "subgraph; control flow (If, Loop, Scan) is not supported")
    for what, values in (("input", proto.graph.input), ("output", proto.graph.output)):
        for vi in values:
            kind = vi.type.WhichOneof("value")
            if kind not in ("tensor_type", None):
                raise UnsupportedOpError(
                    f"graph {what} {text(vi.name)!r} is a {kind.replace('_type', '')}, not a "
                    "tensor; compilerkit compiles tensors only")


def _checked_types(proto, light) -> tuple[dict, dict]:
    """ONNX's inferred type of every value (``light``: the model with its input shapes fixed)
    as MLIR types, and the declared types to check once compilerkit types their values;
    element types compilerkit cannot compile are refused, naming the input or node."""
    inferred, declared = _infer_types(light)
    producers = {o: node_label(n, k) for k, n in enumerate(proto.graph.node) for o in n.output}
    deferred = {}
    for name, decl in declared.items():
        got = inferred.get(name)
        # A disagreeing element type is refused; a disagreeing shape is warned about once and
        # the inferred one compiled (checks.compare_declared: onnxruntime's rule).
        if got is not None and compare_declared(name, producers.get(name, "<graph input>"),
                                                decl, got):
            continue
        if got is None or got[1] is None or any(d < 0 for d in got[1]):
            deferred[name] = decl  # not static yet: checked when compilerkit types it
    init_names = {t.name for t in proto.graph.initializer}
    for i in proto.graph.input:  # the inputs' own types first: every other type derives
        dt = i.type.tensor_type.elem_type
        if i.name not in init_names and dt not in onnx_d._ELEM:
            name = dtype_name(dt) if dt else "no tensor type"
            raise UnsupportedOpError(f"input {i.name!r}: element type {name} is not supported "
                                     f"(supported: float, double, int8/16/32/64, uint8/16, bool)")
    for k, node in enumerate(proto.graph.node):
        for name in node.output:
            elem = inferred.get(name, (0, None))[0]
            if elem and elem not in onnx_d._ELEM:
                raise UnsupportedOpError(
                    f"node {node_label(node, k)!r} ({node.op_type}): output {name!r} has "
                    f"element type {dtype_name(elem)}, which is not "
                    "supported (supported: float, double, int8/16/32/64, uint8/16, bool)")
    types = {name: t for name, t in ((n, _mlir_type(t)) for n, t in inferred.items())
             if t is not None}
    return types, deferred


def _constant_op(node, label, base_dir, budget, module):
    """The onnx.Constant op of a Constant node: its one value attribute as an array."""
    if len(node.attribute) != 1 or len(node.output) != 1:
        raise ModelError(f"node {label!r}: a Constant needs exactly one attribute and "
                         "one output")
    key = node.attribute[0].name
    if key not in ("value", "value_float", "value_floats", "value_int", "value_ints",
                   "sparse_value"):
        raise UnsupportedOpError(f"node {label!r}: Constant with {key} not supported")
    value = _onnx_attr_value(node.attribute[0], base_dir, budget)
    array = np.asarray(value, dtype=np.float32 if isinstance(value, float) or (
        isinstance(value, list) and value and isinstance(value[0], float)) else None)
    if array.dtype == np.int64 or key.startswith("value_int"):
        array = array.astype(np.int64)
    return onnx_d.make_constant(array, module, _hint(text(node.output[0])))


def _import(proto, base_dir, input_shapes, max_bytes, max_unroll=None) -> ModuleOp:
    budget = DEFAULT_MAX_BYTES if max_bytes is None else check_max_bytes(max_bytes)
    input_shapes = check_input_shapes(input_shapes)
    # If, Loop and Scan are unrolled and inlined first (control_flow.py): what follows sees
    # one flat graph; `cf_tags` marks the nodes of conditional regions for the lowering.
    proto, cf_tags = expand_control_flow(
        proto, lambda p: _fix_input_shapes(_light_copy(p, base_dir, budget), input_shapes,
                                           {t.name for t in p.graph.initializer}),
        inference_message, max_unroll)
    # Sequences and optionals known when compiling become lists of tensors (sequences.py).
    proto, _ = rewrite_sequences(proto, input_shapes)
    _refuse_unsupported(proto)
    if proto.graph.sparse_initializer:
        proto = _densified(proto, base_dir, budget)
    opset = model_opset(proto)
    check_graph(proto)
    upgraded_from = None
    if opset < MIN_OPSET:  # checked as it came, then upgraded and checked again
        proto, upgraded_from, opset = upgrade(proto, input_shapes), opset, MIN_OPSET
    for t in proto.graph.initializer:  # sizes first: nothing below reads a tensor unchecked
        check_dims(t, budget)
    light = _fix_input_shapes(_light_copy(proto, base_dir, budget), input_shapes,
                              {t.name for t in proto.graph.initializer})
    types, deferred = _checked_types(proto, light)
    g = proto.graph
    module = ModuleOp([])
    set_budget(module, budget)
    values = {}
    inits = {t.name: t for t in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    for i in inputs:
        if i.name not in types:
            dt = i.type.tensor_type.elem_type
            name = dtype_name(dt) if dt else "no tensor type"
            raise UnsupportedOpError(f"input {i.name!r}: element type {name} is not supported "
                                     f"(supported: float, double, int8/16/32/64, uint8/16, bool)")
        check_bytes(f"input {i.name!r}", types[i.name].get_shape(),
                    onnx_d.numpy_dtype(types[i.name].element_type).itemsize, budget)
    arg_types = [types[i.name] for i in inputs]
    block = Block(arg_types=arg_types)
    for inp, arg in zip(inputs, block.args, strict=True):
        values[inp.name] = arg
        arg.name_hint = _hint(text(inp.name))
    for name, t in inits.items():
        op = onnx_d.make_constant(to_array(t, base_dir, budget), module, _hint(text(name)))
        block.add_op(op)
        values[name] = op.results[0]
    none_value = None
    for index, node in enumerate(g.node):
        label = node_label(node, index)
        attrs = {}
        for a in node.attribute:
            try:
                attrs[a.name] = onnx_d.to_mlir_attr(_onnx_attr_value(a, base_dir, budget))
            except NotImplementedError:  # a type_proto(s) attribute: no MLIR form here
                raise UnsupportedOpError(
                    f"node {label!r} ({node.op_type}): attribute {text(a.name)!r} of type "
                    f"{onnx.AttributeProto.AttributeType.Name(a.type)} is not supported"
                    ) from None
        if node.op_type == "Constant":
            op = _constant_op(node, label, base_dir, budget, module)
            block.add_op(op)
            values[node.output[0]] = op.results[0]
            continue
        # _check_graph made sure every input is defined; absent ones ("") refer to the one
        # onnx.NoValue, and every input of the newest schema gets its operand slot.
        given = [values[name] if name else None for name in node.input]
        try:
            operands = onnx_d.arrange_inputs(node.op_type, opset, given, _ABSENT)
        except ValueError as e:
            raise UnsupportedOpError(f"node {label!r} ({node.op_type}): {e}") from None
        if _ABSENT in operands:
            if none_value is None:
                nv = onnx_d.create("NoValue", [], [NoneType()])
                block.add_op(nv)
                none_value = nv.results[0]
            operands = [none_value if v is _ABSENT else v for v in operands]
        try:
            n_results = onnx_d.arrange_outputs(node.op_type, len(node.output))
        except ValueError as e:
            raise UnsupportedOpError(f"node {label!r} ({node.op_type}): {e}") from None
        outputs = list(node.output) + [""] * (n_results - len(node.output))
        result_types = []
        for name in outputs:
            t = types.get(name) if name else NoneType()  # an absent optional output
            if t is None:
                first = next((v for v in given if v is not None), None)
                elem = first.type.element_type if first is not None and hasattr(
                    first.type, "element_type") else onnx_d.f32
                t = UnrankedTensorType(elem)
            result_types.append(t)
        attrs["onnx_node_name"] = StringAttr(label)
        attrs.update(cf_tags.attributes(label))
        op = onnx_d.create(node.op_type, operands, result_types, attrs)
        block.add_op(op)
        for name, res in zip(node.output, op.results, strict=False):
            if name:
                values[name] = res
                res.name_hint = _hint(text(name))
                if name in deferred:
                    record_declared(module, res, name, label, deferred[name])
    outs = [values[o.name] for o in g.output]
    block.add_op(func.ReturnOp(*outs))
    f = func.FuncOp("main_graph", (arg_types, [v.type for v in outs]), Region(block))
    # The model's own names, for the user (signatures, messages, the C header); the IR's SSA
    # names and symbols are ASCII spellings of them (_hint, onnx.dense_attr's handles).
    f.attributes["input_names"] = ArrayAttr([StringAttr(text(i.name)) for i in inputs])
    f.attributes["output_names"] = ArrayAttr([StringAttr(text(o.name)) for o in g.output])
    f.attributes["onnx_opset"] = IntegerAttr(opset, i64)
    if upgraded_from is not None:  # the opset the model came with (old_opsets.py)
        f.attributes["onnx_opset_upgraded_from"] = IntegerAttr(upgraded_from, i64)
    module.body.block.add_op(f)
    return module


_ABSENT = object()  # an absent input while the operands are arranged


def _hint(name: str) -> str | None:
    # SSA names must be ASCII [A-Za-z0-9_.$-] (xDSL refuses 'é'; str.isalnum takes it): any
    # other character becomes '_'. The model's names stay in input_names/output_names and
    # onnx_node_name.
    clean = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else "_" for ch in name)
    if not clean or clean[0].isdigit():
        clean = "v" + clean
    return clean
