"""An ONNX model or an ONNX IR module as plain nodes and edges for `mlsys_viz`'s graph
drawing (the same drawing lmskit uses for TensorFlow training graphs):

- onnx_graph_view(model): one node per ONNX node, one per graph input and one per initializer
  (weights, drawn aside like TensorFlow's constants); shapes and dtypes from
  `onnx.shape_inference`, symbolic dimensions kept (`batch`) unless `input_shapes` fixes them;
- ir_graph_view(module): one node per onnx-dialect op of the module's function and one per
  function argument; shapes, dtypes and bytes from the result types, edges from SSA uses.

Nodes are coloured by op kind (the "group" key of `viz.graph_figure`): conv / matmul,
elementwise, pool / normalise, shape (ops that move, reshape or compute shapes of data),
constant (Constant ops, initializers) and input; ops that only compute a constant are drawn
aside with the constants. Each node also has "kind" ("op", "input" or "initializer"), "op" (the
ONNX op type) and "outputs" (the tensors or SSA values it produces); each edge "tensor" (the
value it carries), "shape" and "dtype". Draw with ``viz.graph_figure(*onnx_graph_view(m))``.
Nothing here draws.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
from xdsl.dialects.builtin import NoneType

from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError, load_model
from compilerkit.onnx_passes.single_node import main_func
from mlsys_viz.units import human_bytes

MATMUL = {"Conv", "ConvTranspose", "MatMul", "Gemm", "MatMulInteger", "ConvInteger"}
POOL_NORM = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool",
             "BatchNormalization", "InstanceNormalization", "LayerNormalization", "LRN",
             "Softmax", "LogSoftmax", "ReduceL1", "ReduceL2", "ReduceMax", "ReduceMean",
             "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "ReduceLogSumExp",
             "ArgMax", "ArgMin", "Dropout", "MeanVarianceNormalization"}
SHAPE = {"Shape", "Size", "Gather", "GatherElements", "Slice", "Concat", "Reshape", "Flatten",
         "Transpose", "Squeeze", "Unsqueeze", "Cast", "Expand", "Tile", "Split", "Pad",
         "Identity", "Range", "DepthToSpace", "SpaceToDepth", "Resize", "Upsample",
         "NonZero", "NoValue"}
CONSTANT = {"Constant", "ConstantOfShape"}
KINDS = ("conv / matmul", "elementwise", "pool / normalise", "shape", "constant", "input")
MAX_LISTED = 4  # inputs / outputs listed in a node's hover (Concat in DenseNet has ~30)


def op_kind(op_type: str) -> str:
    """The colour group of an ONNX op type (anything not listed is elementwise)."""
    if op_type in MATMUL:
        return "conv / matmul"
    if op_type in POOL_NORM:
        return "pool / normalise"
    if op_type in SHAPE:
        return "shape"
    if op_type in CONSTANT:
        return "constant"
    return "elementwise"


def tensor_text(shape, dtype) -> str:
    """`[1, 6, 28, 28] float32 = 18.4 KiB`; with symbolic dimensions the bytes are per unit of
    each (`batch x 3.1 KiB`); an unknown shape or dtype leaves the bytes out."""
    if shape is None:
        return f"? {dtype}"
    try:  # "?" is unknown here, not numpy's bool
        itemsize = np.dtype(dtype).itemsize if dtype != "?" else 0
    except TypeError:  # an element type numpy does not name
        itemsize = 0
    if not itemsize:
        return f"{list(shape)} {dtype}"
    static = [d for d in shape if isinstance(d, int) and d >= 0]
    symbols = [str(d) for d in shape if not (isinstance(d, int) and d >= 0)]
    nbytes = human_bytes(int(np.prod(static, dtype=np.int64)) * itemsize)
    size = " x ".join(symbols + [nbytes]) if symbols else nbytes
    return f"{list(shape)} {dtype} = {size}"


def _listing(label, names, texts) -> str:
    shown = [f"{label} {n}: {texts.get(n, '?')}" for n in names[:MAX_LISTED]]
    if len(names) > MAX_LISTED:
        shown.append(f"{label} ... {len(names) - MAX_LISTED} more")
    return "<br>".join(shown)


def _lines(*parts) -> str:
    return "<br>".join(p for p in parts if p)


def _unique(name, taken) -> str:
    out, k = name, 1
    while out in taken:
        k += 1
        out = f"{name}#{k}"
    taken.add(out)
    return out


# ---- ONNX models --------------------------------------------------------------------------


def _dtype_name(elem_type: int) -> str:
    """numpy's name of an ONNX element type (`float32`); ONNX's for strings and the like."""
    if not elem_type:
        return "?"
    try:
        name = str(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        name = "object"
    return onnx.TensorProto.DataType.Name(elem_type).lower() if name == "object" else name


def _value_infos(model: onnx.ModelProto) -> dict:
    """tensor name -> (shape or None, dtype name) from shape inference and the initializers."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - inference is best effort; the drawing works without it
        inferred = model
    g = inferred.graph
    out = {}
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            continue
        dtype = _dtype_name(tt.elem_type)
        shape = None
        if tt.HasField("shape"):
            shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                     for d in tt.shape.dim]
        out[vi.name] = (shape, dtype)
    for t in g.initializer:
        out[t.name] = (list(t.dims), _dtype_name(t.data_type))
    return out


def onnx_graph_view(model, input_shapes: dict | None = None):
    """(nodes, edges) for viz.graph_figure of an ONNX model (path, bytes or ModelProto).

    One node per ONNX node (id: its name, made unique; kind "op"), per graph input (kind
    "input") and per initializer (kind "initializer", aside); Constant nodes and ops fed only
    by constants are aside too. One data edge per (tensor, consumer), hovering the tensor's
    shape, dtype and bytes. ``input_shapes`` ({input: [dims]}) fixes symbolic dimensions before
    shape inference, as for import_onnx. Raises ModelError when a node reads a tensor that no
    node, initializer or graph input produces."""
    proto, _ = load_model(model)
    if input_shapes:
        from compilerkit.frontend import _fix_input_shapes

        if proto is model:  # the caller's ModelProto: fix the shapes on a copy
            proto = type(model)()
            proto.CopyFrom(model)
        proto = _fix_input_shapes(proto, input_shapes, {t.name for t in proto.graph.initializer})
    g = proto.graph
    infos = _value_infos(proto)
    texts = {name: tensor_text(*info) for name, info in infos.items()}
    taken: set[str] = set()
    nodes, producer, inputs_of = [], {}, {}
    init_names = {t.name for t in g.initializer}
    for inp in g.input:
        if inp.name in init_names:
            continue  # old exporters list initializers among the inputs too
        nid = _unique(inp.name, taken)
        producer[inp.name] = nid
        nodes.append({"id": nid, "label": inp.name, "group": "input", "kind": "input",
                      "op": "input", "scope": inp.name, "outputs": [inp.name],
                      "hover": f"<b>{inp.name}</b><br>graph input<br>{texts.get(inp.name)}"})
    for t in g.initializer:
        nid = _unique(t.name, taken)
        producer[t.name] = nid
        nodes.append({"id": nid, "label": t.name, "group": "constant", "kind": "initializer",
                      "op": "initializer", "scope": t.name, "aside": True, "outputs": [t.name],
                      "hover": f"<b>{t.name}</b><br>initializer (weight)<br>{texts[t.name]}"})
    outputs = {o.name for o in g.output}
    for k, node in enumerate(g.node):
        name = node.name or f"{node.op_type}_{k}"
        nid = _unique(name, taken)
        for out in node.output:
            if out:
                producer[out] = nid
        inputs_of[nid] = [t for t in node.input if t]
        ins = _listing("in", inputs_of[nid], texts)
        outs = _listing("out", [t for t in node.output if t], texts)
        graph_out = "(graph output)" if outputs & set(node.output) else ""
        nodes.append({"id": nid, "label": node.op_type, "group": op_kind(node.op_type),
                      "kind": "op", "op": node.op_type, "scope": name,
                      "outputs": [t for t in node.output if t],
                      "aside": node.op_type == "Constant",
                      "hover": _lines(f"<b>{name}</b>",
                                      f"{node.op_type} · {op_kind(node.op_type)}", ins, outs,
                                      graph_out)})
    edges = []
    for node_id, tensors in inputs_of.items():
        for t in dict.fromkeys(tensors):
            if t not in producer:
                raise ModelError(f"node {node_id!r} reads tensor {t!r}, which no node, "
                                 f"initializer or graph input produces")
            shape, dtype = infos.get(t, (None, "?"))
            edges.append({"source": producer[t], "target": node_id, "kind": "data",
                          "tensor": t, "shape": shape, "dtype": dtype,
                          "hover": f"{t}<br>{texts.get(t, '?')}"})
    _aside_constant_ops(nodes, edges)
    return nodes, edges


def _aside_constant_ops(nodes, edges) -> None:
    """Ops that compute a constant (every input from a constant: DenseNet's weights are a
    ConstantOfShape of a shape initializer, then an Unsqueeze) are drawn aside with the
    constants; they keep their op kind's colour. Nodes in graph (topological) order."""
    preds: dict[str, list] = {}
    for e in edges:
        preds.setdefault(e["target"], []).append(e["source"])
    aside = {n["id"] for n in nodes if n.get("aside")}
    for node in nodes:
        if node["kind"] != "op" or node["id"] in aside:
            continue
        ps = preds.get(node["id"], [])
        if (ps or node["op"] in CONSTANT) and all(p in aside for p in ps):
            node["aside"] = True
            node["hover"] += "<br>(computes a constant: drawn aside)"
            aside.add(node["id"])


# ---- ONNX IR modules ----------------------------------------------------------------------


def _type_info(t):
    """(shape or None, dtype name) of an xDSL tensor type."""
    elem = getattr(t, "element_type", None)
    try:
        dtype = str(onnx_d.numpy_dtype(elem)) if elem is not None else "?"
    except NotImplementedError:
        dtype = str(elem)
    if not hasattr(t, "get_shape"):
        return None, dtype
    return [d if d >= 0 else "?" for d in t.get_shape()], dtype


def ir_graph_view(module):
    """(nodes, edges) for viz.graph_figure of an ONNX IR module (import_onnx / optimize_onnx).

    One node per onnx-dialect op in the module's function but onnx.NoValue (id: its
    `onnx_node_name`, else
    op type and position; kind "op"; onnx.Constant aside) and one per function argument (kind
    "input", named after `input_names`); one data edge per (value, user) from the SSA uses,
    hovering the value's type as shape, dtype and bytes."""
    f = main_func(module)
    block = f.body.block
    names_attr = f.attributes.get("input_names")
    arg_names = [a.data for a in names_attr.data] if names_attr is not None else []
    taken: set[str] = set()
    nodes, producer, infos, op_ids = [], {}, {}, {}
    value_names = _value_names(module)
    for k, arg in enumerate(block.args):
        name = arg_names[k] if k < len(arg_names) else (arg.name_hint or f"arg{k}")
        nid = _unique(name, taken)
        producer[arg] = nid
        infos[arg] = (value_names.get(arg, f"%arg{k}"), *_type_info(arg.type))
        nodes.append({"id": nid, "label": name, "group": "input", "kind": "input",
                      "op": "input", "scope": name, "outputs": [infos[arg][0]],
                      "hover": f"<b>{name}</b><br>function argument<br>"
                               f"{tensor_text(*infos[arg][1:])}"})
    # An absent optional input (an onnx.NoValue, typed none) is not a node or an edge.
    ops = [op for op in block.ops if op.name.startswith("onnx.") and op.name != "onnx.NoValue"]
    for k, op in enumerate(ops):
        typ = onnx_d.op_type(op)
        tag = op.attributes.get("onnx_node_name")
        # Constants carry no node name: use their value's name in the printed IR (`%6`).
        name = (tag.data if tag is not None else
                value_names.get(op.results[0], f"{typ}_{k}") if op.results else f"{typ}_{k}")
        nid = op_ids[op] = _unique(name, taken)
        results = [r for r in op.results if not isinstance(r.type, NoneType)]
        for r in results:
            producer[r] = nid
            infos[r] = (value_names.get(r, "%?"), *_type_info(r.type))

        def listing(label, values):
            texts = {infos[v][0]: tensor_text(*infos[v][1:]) for v in values if v in infos}
            return _listing(label, [infos[v][0] for v in values if v in infos], texts)

        nodes.append({"id": nid, "label": typ, "group": op_kind(typ), "kind": "op", "op": typ,
                      "outputs": [infos[r][0] for r in results],
                      "scope": name, "aside": typ == "Constant",
                      "hover": _lines(f"<b>{name}</b>", f"{op.name} · {op_kind(typ)}",
                                      listing("in", list(op.operands)),
                                      listing("out", results))})
    edges = []
    for op in ops:
        target = op_ids[op]
        for v in dict.fromkeys(op.operands):
            if v not in producer:
                continue  # a value from outside the onnx ops (none in compilerkit's modules)
            name, shape, dtype = infos[v]
            edges.append({"source": producer[v], "target": target, "kind": "data",
                          "tensor": name, "shape": shape, "dtype": dtype,
                          "hover": f"{name}<br>{tensor_text(shape, dtype)}"})
    _aside_constant_ops(nodes, edges)
    return nodes, edges


def _value_names(module) -> dict:
    """SSA value -> its name as the printer writes it (`%lenet_1_conv1_1_Relu`, `%3`)."""
    from io import StringIO

    from xdsl.printer import Printer

    printer = Printer(stream=StringIO())
    printer.print_op(module)
    names = getattr(printer, "_ssa_values", {})  # what the printer named each value
    block = main_func(module).body.block
    values = list(block.args) + [r for op in block.ops for r in op.results]
    return {v: "%" + names[v] for v in values if v in names}


def node_counts(nodes) -> dict:
    """{"ops": n, "inputs": n, "initializers": n, "aside": n} of a view's nodes."""
    return {"ops": sum(n["kind"] == "op" for n in nodes),
            "inputs": sum(n["kind"] == "input" for n in nodes),
            "initializers": sum(n["kind"] == "initializer" for n in nodes),
            "aside": sum(bool(n.get("aside")) for n in nodes)}


__all__ = ["onnx_graph_view", "ir_graph_view", "op_kind", "tensor_text", "node_counts", "KINDS"]
