"""Subgraphs inlined into their enclosing graph, and the values known at compile time.

`inline_graph` copies a subgraph's nodes (the body of a Loop or Scan, a branch of an If, the
function a SequenceMap applies) into the enclosing graph: its formal inputs become the values
bound to them, every name it defines gets a fresh name (`Names`), its initializers become
Constant nodes, and the names it reads from outer scopes are kept. The subgraphs of the nodes
it holds are copied with fresh names of their own (`freshen`) and read the renamed values, so a
nested If still reads the copy.

`Known` holds the values a compile knows without running the model: initializers, Constant
nodes, the Shape and Size of statically typed tensors, and what the cheap shape-computing ops
(Gather, Slice, Concat, Cast, comparisons, logic...) make of them, each computed by ONNX's
reference evaluator so it means what the spec says. Loop trip counts and conditions, and If
conditions, are read from it (control_flow.py). A value it does not know is either computed
from data (run time) or not typed yet: `tainted` tells them apart (a name produced by a node
inlined since the last type inference, or computed from one).
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import AttributeProto, GraphProto, NodeProto, helper, numpy_helper

# Ops Known evaluates: cheap, deterministic, and what shape and condition arithmetic uses.
FOLDABLE = frozenset({
    "Identity", "Cast", "CastLike", "Gather", "Slice", "Split", "Squeeze", "Unsqueeze", "Concat",
    "Reshape", "Flatten", "Add", "Sub", "Mul", "Div", "Mod", "Neg", "Abs", "Min", "Max",
    "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor",
    "Where", "Ceil", "Floor", "Relu", "Sign", "ReduceProd", "ReduceSum", "ReduceMin",
    "ReduceMax", "Constant"})
KNOWN_LIMIT = 4096  # elements: larger tensors are never folded here (onnx_passes does that)


class Later(Exception):
    """A node that cannot be expanded before the graph is typed again (the reason)."""


def proto_type(vi):
    """(elem, dims with -1 for unknown, or None when the rank is unknown) of a ValueInfo."""
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
        return (tt.elem_type, None)
    return (tt.elem_type, [d.dim_value if d.HasField("dim_value") else -1
                           for d in tt.shape.dim])


class Names:
    """Fresh tensor and node names: none is used anywhere in the model, subgraphs included."""

    def __init__(self, taken):
        self.taken = set(taken)

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name


def subgraphs(node: NodeProto) -> list[GraphProto]:
    out = []
    for a in node.attribute:
        if a.type == AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def all_names(graph: GraphProto) -> set:
    """Every tensor and node name of `graph` and its subgraphs."""
    names = {v.name for v in list(graph.input) + list(graph.output) + list(graph.value_info)}
    names |= {t.name for t in graph.initializer}
    for node in graph.node:
        names.add(node.name)
        names.update(node.input)
        names.update(node.output)
        for g in subgraphs(node):
            names |= all_names(g)
    names.discard("")
    return names


def outer_reads(node: NodeProto) -> list[str]:
    """The outer-scope names `node`'s subgraphs read (inputs it takes besides its own)."""
    out = []

    def walk(graph, local):
        local = local | _defined(graph)
        for n in graph.node:
            out.extend(x for x in n.input if x and x not in local and x not in out)
            for g in subgraphs(n):
                walk(g, local)
        out.extend(o.name for o in graph.output if o.name not in local and o.name not in out)

    for g in subgraphs(node):
        walk(g, set())
    return out


def _defined(graph: GraphProto) -> set:
    return ({i.name for i in graph.input} | {t.name for t in graph.initializer}
            | {t.values.name for t in graph.sparse_initializer}
            | {o for n in graph.node for o in n.output if o})


def rename_outer(graph: GraphProto, mapping: dict) -> None:
    """Rename, in place, the outer-scope names `graph` (and its subgraphs) reads: those in
    `mapping` that the graph does not define itself."""
    local = _defined(graph)
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name and name not in local and name in mapping:
                node.input[k] = mapping[name]
        for g in subgraphs(node):
            rename_outer(g, {k: v for k, v in mapping.items() if k not in local})
    for o in graph.output:
        if o.name not in local and o.name in mapping:
            o.name = mapping[o.name]


def freshen(graph: GraphProto, mapping: dict, names: Names, prefix: str) -> None:
    """Rename, in place, every name `graph` defines (inputs, initializers, node outputs, and
    so on down its subgraphs) to a fresh one, and the outer-scope names it reads by `mapping`.
    Copies of one subgraph must not share names: ONNX's data propagation keys its values by
    name across subgraphs ("Data for input 0 already exists")."""
    local = dict(mapping)
    for v in list(graph.input) + list(graph.initializer):
        new = names.fresh(prefix + v.name)
        local[v.name], v.name = new, new
    for sp in graph.sparse_initializer:
        new = names.fresh(prefix + sp.values.name)
        local[sp.values.name], sp.values.name = new, new
    del graph.value_info[:]  # (types are inferred again)
    for node in graph.node:
        for j, name in enumerate(node.input):
            if name in local:
                node.input[j] = local[name]
        for g in subgraphs(node):
            freshen(g, local, names, prefix)
        for j, name in enumerate(node.output):
            if name:
                local[name] = node.output[j] = names.fresh(prefix + name)
        if node.name:
            node.name = names.fresh(prefix + node.name)
    for o in graph.output:
        o.name = local.get(o.name, o.name)


def inline_graph(graph: GraphProto, bindings: dict, prefix: str,
                 names: Names) -> tuple[list[NodeProto], list[str]]:
    """(nodes, outputs): `graph`'s nodes copied for the enclosing graph, and the names its
    outputs have there. `bindings` maps each formal input of `graph` to the enclosing value
    bound to it; node names are `prefix` + the node's own; every value the graph defines gets
    a fresh name from `names`. Reusable for any subgraph (If branches, Loop and Scan bodies,
    SequenceMap's body)."""
    ren = dict(bindings)
    nodes = []
    for t in list(graph.initializer):
        new = names.fresh(f"{prefix}{t.name}")
        c = onnx.TensorProto()
        c.CopyFrom(t)
        c.name = ""
        nodes.append(helper.make_node("Constant", [], [new], name=names.fresh(new), value=c))
        ren[t.name] = new
    for sp in graph.sparse_initializer:
        new = names.fresh(f"{prefix}{sp.values.name}")
        nodes.append(helper.make_node("Constant", [], [new], name=names.fresh(new),
                                      sparse_value=sp))
        ren[sp.values.name] = new
    for k, node in enumerate(graph.node):
        copy = NodeProto()
        copy.CopyFrom(node)
        copy.name = names.fresh(prefix + (node.name or f"{node.op_type}_{k}"))
        for j, name in enumerate(node.input):
            if name in ren:
                copy.input[j] = ren[name]
        for g in subgraphs(copy):
            freshen(g, ren, names, prefix)
        for j, name in enumerate(node.output):
            if name:
                ren[name] = copy.output[j] = names.fresh(prefix + name)
        nodes.append(copy)
    return nodes, [ren.get(o.name, o.name) for o in graph.output]


def static_dims(t) -> list | None:
    """The dims of an inferred (elem, dims) type when every one is known, else None."""
    if t is None or t[1] is None or any(d < 0 for d in t[1]):
        return None
    return list(t[1])


class Known:
    """The values known at compile time, by name (see the module docstring). `types` are the
    inferred (elem, dims) of the enclosing graph's values; `opset` the model's."""

    def __init__(self, types: dict, opset: int):
        self.types = types
        self.opset = opset
        self.values: dict = {}
        self.tainted: set = set()

    def get(self, name):
        return self.values.get(name)

    def set(self, name, array) -> None:
        array = np.asarray(array)
        if array.size <= KNOWN_LIMIT:
            self.values[name] = array

    def dims(self, name) -> list | None:
        if name in self.values:
            return list(self.values[name].shape)
        return None if name in self.tainted else static_dims(self.types.get(name))

    def evaluate(self, node: NodeProto, fresh: bool = False) -> None:
        """Learn `node`'s outputs when they follow from known values; `fresh`: the node was
        made since the types were inferred (its unknown outputs are tainted)."""
        outs = [o for o in node.output if o]
        ins = [i for i in node.input if i]
        tainted = fresh or any(i in self.tainted for i in ins)
        try:
            if node.op_type in ("Shape", "Size") and len(ins) == 1:
                dims = self.dims(ins[0])
                if dims is not None:
                    self.set(outs[0], _shape_value(node, dims))
                    return
            elif node.op_type in FOLDABLE and all(i in self.values for i in ins):
                results = _run(node, [self.values[i] if i else None for i in node.input],
                               self.opset)
                for name, value in zip(node.output, results, strict=False):
                    if name:
                        self.set(name, value)
                if all(o in self.values for o in outs):
                    return
        except Exception:  # noqa: BLE001 - an op that cannot run here is left to run time
            pass
        if tainted:
            self.tainted.update(o for o in outs if o not in self.values)


def _shape_value(node, dims):
    if node.op_type == "Size":
        return np.int64(math.prod(dims))
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    start, end = attrs.get("start", 0), attrs.get("end", len(dims))
    r = len(dims)
    start = min(max(start + r if start < 0 else start, 0), r)
    end = min(max(end + r if end < 0 else end, 0), r)
    return np.array(dims[start:end], np.int64)


def _run(node, values, opset):
    from onnx.reference import ReferenceEvaluator

    if node.op_type == "Identity":
        return [values[0]]
    if node.op_type == "Constant":
        a = node.attribute[0]
        if a.name == "value":
            return [numpy_helper.to_array(a.t)]
        if a.name in ("value_int", "value_ints"):
            return [np.array(helper.get_attribute_value(a), np.int64)]
        if a.name in ("value_float", "value_floats"):
            return [np.array(helper.get_attribute_value(a), np.float32)]
        raise ValueError(a.name)
    feeds = {}
    plain = NodeProto()
    plain.CopyFrom(node)
    for k, v in enumerate(values):
        if node.input[k]:
            plain.input[k] = f"in{k}"
            feeds[f"in{k}"] = v
    for k in range(len(plain.output)):
        if plain.output[k]:
            plain.output[k] = f"out{k}"
    ev = ReferenceEvaluator(plain, opsets={"": opset})
    return ev.run(None, feeds)


__all__ = ["Later", "proto_type", "Names", "Known", "inline_graph", "rename_outer", "freshen",
           "outer_reads",
           "all_names", "subgraphs", "static_dims"]
