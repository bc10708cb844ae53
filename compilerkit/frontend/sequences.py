"""Sequences and optionals resolved at compile time: a frontend rewrite of the ONNX graph, run
before the graph is checked and imported, that leaves only tensor ops.

compilerkit compiles static-shape graphs, so a sequence whose length and element positions
are known when compiling is nothing but a list of tensors, and an optional whose presence is
known is either its element or nothing. `rewrite` walks the nodes in order, keeps for every
sequence value the names of its element tensors (and for every optional its element or
None), and replaces the ops on them (the ONNX spec, opset 11 to 24):

    SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceErase  the list changes, no node
    SequenceAt        an Identity of the element        SequenceLength  a Constant
    SplitToSequence   Slices (and Squeezes: keepdims=0 without `split`) of the input
    ConcatFromSequence  a Concat (of Unsqueezed elements when new_axis=1)
    SequenceMap       its body inlined once per element (subgraphs.inline_graph)
    Optional, OptionalGetElement, OptionalHasElement, Identity of a sequence or optional

Positions (SequenceInsert/Erase/At), splits and the split input's shape must be known when
compiling: a constant, or computed from constants (evaluated with ONNX's reference
evaluator). A position computed from run-time data, a sequence-typed graph input or output
(the IR's functions take and return tensors: `compilerkit.compile` specialises on a sequence
input's length and returns a sequence output as a list, see compilerkit/specialize.py), or
any other op reading a sequence is an UnsupportedOpError naming the node and the input; an
out-of-range position is a ModelError, as onnxruntime's run-time error.

A model without sequence or optional ops is returned as it came (the same object).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import ModelProto, helper, numpy_helper

from compilerkit.frontend.checks import ModelError, UnsupportedOpError
from compilerkit.frontend.hygiene import check_graph, model_opset, node_label, text
from compilerkit.frontend.subgraphs import Names, all_names, inline_graph

SEQUENCE_OPS = ("SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase",
                "SequenceAt", "SequenceLength", "SplitToSequence", "ConcatFromSequence",
                "SequenceMap")
OPTIONAL_OPS = ("Optional", "OptionalGetElement", "OptionalHasElement")

# Operands the rewrite needs as compile-time values, by node input position.
POSITION_OPERANDS = {"SequenceInsert": (2,), "SequenceErase": (1,), "SequenceAt": (1,),
                     "SplitToSequence": (1,)}

TENSOR, SEQUENCE, OPTIONAL = "tensor", "sequence", "optional"
EMPTY = "empty"  # the element of an empty optional


def uses_sequences(proto: ModelProto) -> bool:
    """Whether the graph has a sequence or optional op, or a graph input or output that is
    not a tensor (what `rewrite` changes)."""
    g = proto.graph
    if any(n.op_type in SEQUENCE_OPS + OPTIONAL_OPS for n in g.node):
        return True
    return any(v.type.WhichOneof("value") in ("sequence_type", "optional_type")
               for v in list(g.input) + list(g.output))


def rewrite(proto: ModelProto, input_shapes: dict | None = None,
            flatten_outputs: bool = False) -> tuple[ModelProto, list]:
    """(the model with tensor ops only, its outputs' layout). The layout has one entry per
    graph output of `proto`: (TENSOR, [its name]), (SEQUENCE, [the element outputs' names]) or
    (OPTIONAL, [name] or []). Sequence and optional graph outputs become tensor outputs only
    with `flatten_outputs` (the caller regroups them); otherwise they are refused.
    `input_shapes` fixes dynamic dimensions of tensor inputs (as for `import_model`)."""
    g = proto.graph
    layout = [(TENSOR, [o.name]) for o in g.output]
    if not uses_sequences(proto):
        return proto, layout
    for vi in g.input:
        kind = vi.type.WhichOneof("value")
        if kind in ("sequence_type", "optional_type") and vi.name not in {
                t.name for t in g.initializer}:
            raise UnsupportedOpError(
                f"graph input {text(vi.name)!r} is {_a(kind.removesuffix('_type'))}: the IR's "
                "functions take tensors; compilerkit.compile specialises on its length (or "
                "presence) at run time")
    _check_definitions(proto)
    return _Rewriter(proto, input_shapes, flatten_outputs).run()


def _check_definitions(proto: ModelProto) -> None:
    """One producer per name, sorted: what the walk relies on. The import's full hygiene
    check where no node holds a subgraph; with one (If, Loop, SequenceMap), only unique
    definitions: ONNX's node checker, given no outer scope, reads a body's outer-scope reads
    as unsorted nodes."""
    g = proto.graph
    if not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for n in g.node for a in n.attribute):
        check_graph(proto)
        return
    seen = {t.name for t in g.initializer} | {i.name for i in g.input}
    for k, n in enumerate(g.node):
        for name in n.output:
            if name and name in seen:
                raise ModelError(f"tensor {text(name)!r} is defined twice (again by node "
                                 f"{node_label(n, k)!r}); every tensor needs exactly one "
                                 "producer")
            seen.add(name)


class _Rewriter:
    def __init__(self, proto, input_shapes, flatten_outputs):
        self.proto = proto
        self.opset = model_opset(proto)
        self.input_shapes = dict(input_shapes or {})
        self.flatten = flatten_outputs
        g = proto.graph
        self.seqs = {}  # sequence name -> [element tensor names]
        self.opts = {}  # optional name -> (TENSOR | SEQUENCE, element name) or EMPTY
        self.nodes = []  # the rewritten nodes, in order
        self.inits = list(g.initializer)
        self.values = {}  # tensor name -> numpy value known when compiling (memo)
        self.producer = {}  # tensor name -> the rewritten node making it
        self.used = {t.name for t in g.initializer} | {i.name for i in g.input}
        for n in g.node:
            self.used.update(n.output)
            self.used.update(n.input)
        self._count = 0

    # ---- names and small nodes ----------------------------------------------------------
    def fresh(self, base: str) -> str:
        while True:
            self._count += 1
            name = f"{base}__seq{self._count}"
            if name not in self.used:
                self.used.add(name)
                return name

    def const(self, base: str, array) -> str:
        name = self.fresh(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        self.values[name] = np.asarray(array)
        return name

    def add(self, op, inputs, outputs, label, **attrs):
        node = helper.make_node(op, inputs, outputs, name=self.fresh(label) if label else "",
                                **attrs)
        self.nodes.append(node)
        for o in outputs:
            self.producer[o] = node
        return node

    def squeeze(self, op, x, axis, out, label):
        """Squeeze/Unsqueeze of one axis at the model's opset (axes an input from 13)."""
        if self.opset >= 13:
            self.add(op, [x, self.const(label + "_axes", np.array([axis], np.int64))], [out],
                     label)
        else:
            self.add(op, [x], [out], label, axes=[axis])

    # ---- what is known when compiling -------------------------------------------------------
    def value(self, name, node, label, what):
        """The value of tensor `name` when compiling: an initializer, or computed from them
        by the rewritten nodes (ONNX's reference evaluator); else an UnsupportedOpError."""
        found = self._value(name, set())
        if found is None:
            raise UnsupportedOpError(
                f"node {label!r} ({node.op_type}): input {text(name)!r} ({what}) is computed "
                "at run time; compilerkit resolves sequences when compiling, so it must be a "
                "constant (compilerkit.compile specialises on a graph input's value)")
        return found

    def _value(self, name, seen):
        if name in self.values:
            return self.values[name]
        if name in seen:
            return None
        seen.add(name)
        for t in self.inits:
            if t.name == name:
                if t.data_location == onnx.TensorProto.EXTERNAL:
                    return None
                self.values[name] = numpy_helper.to_array(t)
                return self.values[name]
        node = self.producer.get(name)
        if node is None or node.op_type.startswith("Random") or any(
                a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                for a in node.attribute):
            return None
        args = [self._value(i, seen) if i else None for i in node.input]
        if any(a is None for a, i in zip(args, node.input, strict=True) if i):
            return None
        from onnx.reference import ReferenceEvaluator

        model = helper.make_model(helper.make_graph(
            [node], "fold",
            [helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for i, a in zip(node.input, args, strict=True) if i],
            [helper.make_tensor_value_info(o, 0, None) for o in node.output if o]),
            opset_imports=[helper.make_opsetid("", self.opset)])
        try:
            results = ReferenceEvaluator(model).run(
                None, {i: a for i, a in zip(node.input, args, strict=True) if i})
        except Exception:  # noqa: BLE001 - not foldable here: the caller says what it needed
            return None
        for o, r in zip([o for o in node.output if o], results, strict=True):
            self.values[o] = np.asarray(r)
        return self.values.get(name)

    def shape(self, name, node, label):
        """The static shape of tensor `name`, from ONNX's shape inference on the rewritten
        nodes so far (the graph inputs with `input_shapes` applied)."""
        g = self.proto.graph
        inputs = []
        for vi in g.input:
            if vi.name in {t.name for t in self.inits}:
                continue
            vi2 = onnx.ValueInfoProto()
            vi2.CopyFrom(vi)
            if text(vi.name) in self.input_shapes and vi2.type.HasField("tensor_type"):
                vi2.type.tensor_type.shape.Clear()
                for d in self.input_shapes[text(vi.name)]:
                    vi2.type.tensor_type.shape.dim.add().dim_value = d
            inputs.append(vi2)
        model = helper.make_model(
            helper.make_graph(self.nodes, "prefix", inputs, [], self.inits),
            opset_imports=list(self.proto.opset_import), ir_version=self.proto.ir_version)
        dims = None
        try:
            inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
            for vi in list(inferred.graph.value_info) + list(inferred.graph.input):
                if vi.name == name and vi.type.tensor_type.HasField("shape"):
                    dims = [d.dim_value if d.HasField("dim_value") else -1
                            for d in vi.type.tensor_type.shape.dim]
        except Exception:  # noqa: BLE001 - the refusal below says what was needed
            dims = None
        for t in self.inits:
            if t.name == name:
                dims = list(t.dims)
        if dims is None or any(d < 0 for d in dims):
            raise UnsupportedOpError(
                f"node {label!r} ({node.op_type}): the shape of input {text(name)!r} is not "
                "known when compiling (fix the inputs' dynamic dimensions with input_shapes)")
        return dims

    # ---- reading sequence and optional values ------------------------------------------------
    def sequence(self, name, node, label):
        if name in self.seqs:
            return self.seqs[name]
        if name in self.opts and self.opts[name] != EMPTY and self.opts[name][0] == SEQUENCE:
            return self.seqs[self.opts[name][1]]
        raise UnsupportedOpError(f"node {label!r} ({node.op_type}): input {text(name)!r} is not "
                                 "a sequence known when compiling")

    def position(self, node, label, k, n, default, insert=False):
        """Input k of `node` as an index into a sequence of n (negative counts from the end;
        SequenceInsert may also name n, the end)."""
        if len(node.input) <= k or not node.input[k]:
            return default
        p = self.value(node.input[k], node, label, "a position")
        if p.size != 1 or p.dtype.kind not in "iu":
            raise ModelError(f"node {label!r} ({node.op_type}): position {text(node.input[k])!r}"
                             f" must be an integer scalar, got shape {list(p.shape)} "
                             f"{p.dtype.name}")
        p = int(p.reshape(()))
        hi = n if insert else n - 1
        if not -n <= p <= hi:
            raise ModelError(f"node {label!r} ({node.op_type}): position {p} is out of range "
                             f"[{-n}, {hi}] for a sequence of {n} tensors")
        return p + n if p < 0 else p

    # ---- the walk ---------------------------------------------------------------------------
    def run(self):
        g = self.proto.graph
        for k, node in enumerate(g.node):
            self.node(node, node_label(node, k))
        outputs, layout = [], []
        for o in g.output:
            declared = o.type.WhichOneof("value")
            if declared in ("sequence_type", "optional_type") and not (
                    o.name in self.seqs or o.name in self.opts):
                made_by = next((f" made by node {node_label(n, k)!r} ({n.op_type})"
                                for k, n in enumerate(g.node) if o.name in n.output), "")
                raise UnsupportedOpError(
                    f"graph output {text(o.name)!r} is {_a(declared.removesuffix('_type'))}"
                    f"{made_by}, which compilerkit cannot resolve when compiling (the "
                    "sequence and optional ops, and SequenceMap, are resolved)")
            if o.name in self.seqs or o.name in self.opts:
                kind = SEQUENCE if o.name in self.seqs else OPTIONAL
                if not self.flatten:
                    raise UnsupportedOpError(
                        f"graph output {text(o.name)!r} is {_a(kind)}: the IR's functions return "
                        "tensors; compilerkit.compile returns it as a list")
                if kind == SEQUENCE:
                    elems = self.seqs[o.name]
                else:
                    opt = self.opts[o.name]
                    if opt != EMPTY and opt[0] == SEQUENCE:
                        kind, elems = SEQUENCE, self.seqs[opt[1]]
                    else:
                        elems = [] if opt == EMPTY else [opt[1]]
                names = []
                elem = _element_type(o.type)
                for e in elems:  # each element its own output, made by a node of its own
                    names.append(self.fresh(o.name))
                    self.add("Identity", [e], [names[-1]], "output")
                    outputs.append(helper.make_tensor_value_info(names[-1], elem, None)
                                   if elem else helper.make_empty_tensor_value_info(names[-1]))
                layout.append((kind, names))
            else:
                outputs.append(o)
                layout.append((TENSOR, [o.name]))
        if not outputs:
            raise UnsupportedOpError("every graph output is an empty sequence or optional: "
                                     "there is nothing to compute")
        out = ModelProto()
        out.CopyFrom(self.proto)
        g2 = out.graph
        del g2.node[:]
        g2.node.extend(self.nodes)
        del g2.initializer[:]
        g2.initializer.extend(self.inits)
        del g2.output[:]
        g2.output.extend(outputs)
        # value_info of sequences and optionals describes values that no longer exist.
        keep = [vi for vi in g2.value_info if vi.type.WhichOneof("value") == "tensor_type"]
        del g2.value_info[:]
        g2.value_info.extend(keep)
        return out, layout

    def node(self, node, label):
        op = node.op_type
        handler = getattr(self, "op_" + op, None) if node.domain in ("", "ai.onnx") else None
        if handler is not None:
            handler(node, label)
            return
        for k, name in enumerate(node.input):
            if name in self.seqs or name in self.opts:
                kind = SEQUENCE if name in self.seqs else OPTIONAL
                raise UnsupportedOpError(
                    f"node {label!r} ({op}): input {k} {text(name)!r} is {_a(kind)}; compilerkit "
                    f"resolves sequences and optionals when compiling, and {op} on one is not "
                    "supported")
        self.nodes.append(node)
        for o in node.output:
            self.producer[o] = node

    def op_Identity(self, node, label):
        x, y = node.input[0], node.output[0]
        if x in self.seqs:
            self.seqs[y] = list(self.seqs[x])
        elif x in self.opts:
            self.opts[y] = self.opts[x]
        else:
            self.nodes.append(node)
            self.producer[y] = node

    def op_SequenceEmpty(self, node, label):
        self.seqs[node.output[0]] = []

    def op_SequenceConstruct(self, node, label):
        for name in node.input:
            if name in self.seqs or name in self.opts:
                raise UnsupportedOpError(f"node {label!r} (SequenceConstruct): input "
                                         f"{text(name)!r} is not a tensor")
        self.seqs[node.output[0]] = list(node.input)

    def op_SequenceInsert(self, node, label):
        elems = list(self.sequence(node.input[0], node, label))
        at = self.position(node, label, 2, len(elems), len(elems), insert=True)
        elems.insert(at, node.input[1])
        self.seqs[node.output[0]] = elems

    def op_SequenceErase(self, node, label):
        elems = list(self.sequence(node.input[0], node, label))
        if not elems:
            raise ModelError(f"node {label!r} (SequenceErase): the sequence is empty")
        del elems[self.position(node, label, 1, len(elems), len(elems) - 1)]
        self.seqs[node.output[0]] = elems

    def op_SequenceAt(self, node, label):
        elems = self.sequence(node.input[0], node, label)
        if len(node.input) < 2 or not node.input[1]:
            raise ModelError(f"node {label!r} (SequenceAt): the position input is required")
        at = self.position(node, label, 1, len(elems), None)
        self.add("Identity", [elems[at]], [node.output[0]], label)

    def op_SequenceLength(self, node, label):
        n = len(self.sequence(node.input[0], node, label))
        self.add("Constant", [], [node.output[0]], label,
                 value=numpy_helper.from_array(np.array(n, np.int64)))
        self.values[node.output[0]] = np.array(n, np.int64)

    def op_SplitToSequence(self, node, label):
        x = node.input[0]
        dims = self.shape(x, node, label)
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        axis, keepdims = attrs.get("axis", 0), attrs.get("keepdims", 1)
        if not -len(dims) <= axis < len(dims):
            raise ModelError(f"node {label!r} (SplitToSequence): axis {axis} is out of range "
                             f"for input {text(x)!r} of rank {len(dims)}")
        axis %= len(dims)
        d = dims[axis]
        squeeze = False
        if len(node.input) < 2 or not node.input[1]:
            sizes, squeeze = [1] * d, not keepdims
        else:
            split = self.value(node.input[1], node, label, "the split")
            if split.ndim == 0:
                s = int(split)
                if s <= 0:
                    raise ModelError(f"node {label!r} (SplitToSequence): split {s} must be "
                                     "positive")
                sizes = [min(s, d - i) for i in range(0, d, s)]
            else:
                sizes = [int(v) for v in split.reshape(-1)]
                if any(v < 0 for v in sizes) or sum(sizes) != d:
                    raise ModelError(
                        f"node {label!r} (SplitToSequence): split {sizes} must be non-negative"
                        f" and sum to the length {d} of axis {axis}")
        elems, start = [], 0
        for size in sizes:
            piece = self.fresh(node.output[0])
            self.add("Slice", [x, self.const(label + "_starts", np.array([start], np.int64)),
                               self.const(label + "_ends", np.array([start + size], np.int64)),
                               self.const(label + "_axes", np.array([axis], np.int64))],
                     [piece], label)
            if squeeze:
                squeezed = self.fresh(node.output[0])
                self.squeeze("Squeeze", piece, axis, squeezed, label)
                piece = squeezed
            elems.append(piece)
            start += size
        self.seqs[node.output[0]] = elems

    def op_ConcatFromSequence(self, node, label):
        elems = self.sequence(node.input[0], node, label)
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if "axis" not in attrs:
            raise ModelError(f"node {label!r} (ConcatFromSequence): attribute 'axis' is "
                             "required")
        axis, new_axis = attrs["axis"], attrs.get("new_axis", 0)
        if not elems:
            raise ModelError(f"node {label!r} (ConcatFromSequence): the sequence is empty; "
                             "there is nothing to concatenate")
        if new_axis:
            grown = []
            for e in elems:  # Unsqueeze's axis counts in the output's rank, as new_axis's
                grown.append(self.fresh(node.output[0]))
                self.squeeze("Unsqueeze", e, axis, grown[-1], label)
            elems = grown
        self.add("Concat", list(elems), [node.output[0]], label, axis=axis)

    def op_SequenceMap(self, node, label):
        body = next((a.g for a in node.attribute if a.name == "body"), None)
        if body is None:
            raise ModelError(f"node {label!r} (SequenceMap): attribute 'body' is required")
        for inner in body.node:
            if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                   for a in inner.attribute):
                raise UnsupportedOpError(f"node {label!r} (SequenceMap): its body holds a "
                                         f"subgraph ({inner.op_type}), which is not supported")
        if len(body.input) != len(node.input) or len(body.output) != len(node.output):
            raise ModelError(f"node {label!r} (SequenceMap): the body takes "
                             f"{len(body.input)} inputs and gives {len(body.output)} outputs; "
                             f"the node has {len(node.input)} and {len(node.output)}")
        n = len(self.sequence(node.input[0], node, label))
        for name in node.input[1:]:
            if name in self.seqs and len(self.seqs[name]) != n:
                raise ModelError(f"node {label!r} (SequenceMap): sequence {text(name)!r} has "
                                 f"{len(self.seqs[name])} tensors, the first one {n}")
        results = [[] for _ in node.output]
        # The body copied once per element by the frontend's one subgraph inliner
        # (subgraphs.inline_graph: fresh names, initializers as Constants, outer reads kept).
        names = Names(self.used | all_names(self.proto.graph))
        for i in range(n):
            bindings = {b.name: self.seqs[name][i] if name in self.seqs else name
                        for b, name in zip(body.input, node.input, strict=True)}
            nodes, outs = inline_graph(body, bindings, f"{label}/{i}/", names)
            self.used |= names.taken
            for copy in nodes:
                self.node(copy, copy.name)
            for r, o in zip(results, outs, strict=True):
                r.append(o)
        for name, elems in zip(node.output, results, strict=True):
            if name:
                self.seqs[name] = elems

    def op_Optional(self, node, label):
        out = node.output[0]
        if not node.input or not node.input[0]:
            self.opts[out] = EMPTY
        elif node.input[0] in self.seqs:
            self.opts[out] = (SEQUENCE, node.input[0])
        elif node.input[0] in self.opts:
            raise UnsupportedOpError(f"node {label!r} (Optional): an optional of an optional")
        else:
            self.opts[out] = (TENSOR, node.input[0])

    def op_OptionalHasElement(self, node, label):
        x = node.input[0] if node.input else ""
        has = bool(x) and self.opts.get(x) != EMPTY
        self.add("Constant", [], [node.output[0]], label,
                 value=numpy_helper.from_array(np.array(has)))
        self.values[node.output[0]] = np.array(has)

    def op_OptionalGetElement(self, node, label):
        x, y = node.input[0], node.output[0]
        got = self.opts.get(x)
        if got == EMPTY:
            raise ModelError(f"node {label!r} (OptionalGetElement): optional {text(x)!r} is "
                             "empty")
        if got is not None:
            x = got[1]
        if x in self.seqs:
            self.seqs[y] = list(self.seqs[x])
        else:  # a tensor, optional or not (opset 18 takes both)
            self.add("Identity", [x], [y], label)


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _element_type(tp) -> int:
    """The element type of the tensors inside a sequence or optional type (0: not said)."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        return tp.tensor_type.elem_type
    if kind == "sequence_type":
        return _element_type(tp.sequence_type.elem_type)
    if kind == "optional_type":
        return _element_type(tp.optional_type.elem_type)
    return 0


def element_count(layout) -> int:
    """How many tensor outputs a rewritten model has for `layout`."""
    return sum(len(names) for _, names in layout)


def regroup(arrays, layout) -> list:
    """The outputs of a rewritten model (`arrays`, in its output order) as the original
    model's: a tensor, a list of tensors for a sequence, and for an optional its element or
    None."""
    out, k = [], 0
    for kind, names in layout:
        part = list(arrays[k:k + len(names)])
        k += len(names)
        if kind == TENSOR:
            out.append(part[0])
        elif kind == SEQUENCE:
            out.append(part)
        else:
            out.append(part[0] if part else None)
    assert k == len(arrays), (k, len(arrays))
    return out
