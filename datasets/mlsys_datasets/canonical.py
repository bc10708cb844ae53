"""A canonical form for tf2onnx graphs whose node order and names change between processes.

tf2onnx exports of attention and recurrent models are not byte-stable, even with a fixed hash
seed: TensorFlow hands the graph over in an order that changes between processes, and
tf2onnx's duplicate-merging keeps whichever of two equal nodes or constants it meets first
(``lstm0/zeros/Const`` in one run, ``lstm1/zeros/Const`` in the next). The graph computed is the
same; its order and names are luck. ``canonicalise`` makes them a function of the graph alone:

* every tensor gets a structural signature: a hash of the producing node's op, attributes and
  input signatures (graph inputs by name, initializers by content, subgraphs by their own
  canonical bytes);
* nodes are put in topological order, ready nodes taken by signature;
* nodes are renamed ``<op>__<k>`` and their outputs ``<op>__<k>:<j>`` in that order; initializers
  holding Keras variables (``.../ReadVariableOp:0``, never merged: each is its own weight) keep
  their names, the other constants become ``const__<k>`` in order of first use; graph inputs
  and outputs keep theirs. Subgraphs (a Loop's body) get the same treatment, with names
  prefixed by their node's; tf2onnx's ``unk__N`` dimension names are renumbered in order.

Readable layer names are lost for intermediate tensors (they were the unstable part); the
weights keep theirs. Assumes a valid, topologically sortable graph.
"""

from __future__ import annotations

import hashlib

import onnx


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()


def _attribute_bytes(attr, outer_sigs: dict) -> bytes:
    # A subgraph is what its outputs compute: their signatures, outer names resolved.
    if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
        subs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        parts = []
        for sub in subs:
            sigs, _ = _signatures(sub, outer_sigs)
            parts += [sigs[v.name] for v in sub.output]
        return _digest(*parts).encode()
    return attr.SerializeToString(deterministic=True)


def _signatures(g, outer_sigs: dict):
    """Tensor name -> signature, and the nodes in canonical topological order."""
    sigs = dict(outer_sigs)
    for t in g.initializer:
        sigs[t.name] = _digest("init", t.data_type, tuple(t.dims),
                               onnx.numpy_helper.to_array(t).tobytes())
    for i, v in enumerate(g.input):
        sigs[v.name] = _digest("input", i)  # by position: a Loop body's input names are luck
    sigs[""] = _digest("absent")
    produced = {o for n in g.node for o in n.output}
    waiting = {i: {x for x in _reads(n) if x in produced} for i, n in enumerate(g.node)}
    consumers: dict[str, list[int]] = {}
    for i, n in enumerate(g.node):
        for x in _reads(n):
            consumers.setdefault(x, []).append(i)
    order, ready = [], {}

    def sign(i):
        n = g.node[i]
        node_sig = _digest(n.op_type, n.domain,
                           *(_digest(a.name, _attribute_bytes(a, sigs)) for a in n.attribute),
                           *(sigs.get(x, _digest("free", x)) for x in n.input))
        for j, o in enumerate(n.output):
            sigs[o] = _digest(node_sig, j)
        if n.op_type == "Identity":  # a copy computes what its input does
            sigs[n.output[0]] = sigs.get(n.input[0], node_sig)
        return node_sig

    for i, w in waiting.items():
        if not w:
            ready[i] = sign(i)
    while ready:
        i = min(ready, key=lambda k: (ready[k], k))
        del ready[i]
        order.append(i)
        for o in g.node[i].output:
            for c in consumers.get(o, []):
                waiting[c].discard(o)
                if not waiting[c] and c not in ready and c not in order:
                    ready[c] = sign(c)
    if len(order) != len(g.node):
        raise ValueError(f"graph {g.name!r} is not a DAG: {len(g.node) - len(order)} nodes "
                         f"never became ready")
    return sigs, order


def _reads(node) -> list[str]:
    """Names a node reads: its inputs and the outer-scope names its subgraphs use."""
    names = [x for x in node.input if x]
    for a in node.attribute:
        for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
            defined = ({v.name for v in sub.input} | {t.name for t in sub.initializer}
                       | {o for n in sub.node for o in n.output})
            names += [x for n in sub.node for x in _reads(n) if x not in defined]
    return names


def _direct_outputs_first(g) -> None:
    """When two outputs of a subgraph carry one value, x and Identity(x), tf2onnx lists them in
    either order; put x first (the outputs' types stay where they are: they are equal)."""
    copy_of = {n.output[0]: n.input[0] for n in g.node if n.op_type == "Identity"}
    outs = [v.name for v in g.output]
    for i, name in enumerate(outs):
        source = copy_of.get(name)
        if source in outs and outs.index(source) > i:
            j = outs.index(source)
            outs[i], outs[j] = outs[j], outs[i]
    for v, name in zip(g.output, outs, strict=True):
        v.name = name


def _canonical_graph(g, outer_sigs: dict, prefix: str, outer_names: dict | None = None):
    """Rename and reorder ``g`` in place; return the renaming (old name -> new)."""
    if prefix:
        _direct_outputs_first(g)
    sigs, order = _signatures(g, outer_sigs)
    names = dict(outer_names or {})
    if prefix:
        # A subgraph's inputs and outputs are bound by position: rename them too.
        keep = set()
        for i, v in enumerate(g.input):
            names[v.name] = f"{prefix}in__{i}"
    else:
        keep = {v.name for v in g.input} | {v.name for v in g.output}
    nodes = [g.node[i] for i in order]
    for k, n in enumerate(nodes, 1):
        base = f"{prefix}{n.op_type}__{k}"
        n.name = base
        for j, o in enumerate(n.output):
            if o and o not in keep:
                names[o] = f"{base}:{j}"
    k = 0
    inits = {t.name for t in g.initializer}
    for n in nodes:
        for x in _reads(n):
            if x in names or x in keep:
                continue
            if x in inits and not x.endswith("ReadVariableOp:0"):
                k += 1
                names[x] = f"{prefix}const__{k}"
    for n in nodes:
        n.input[:] = [names.get(x, x) for x in n.input]
        n.output[:] = [names.get(x, x) for x in n.output]
        for a in n.attribute:
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                _canonical_graph(sub, sigs, prefix=f"{n.name}/", outer_names=names)
    for t in g.initializer:
        t.name = names.get(t.name, t.name)
    for v in list(g.value_info) + list(g.input) + list(g.output):
        v.name = names.get(v.name, v.name)
    copies = [type(n).FromString(n.SerializeToString()) for n in nodes]
    del g.node[:]
    g.node.extend(copies)
    inits = [type(t).FromString(t.SerializeToString())
             for t in sorted(g.initializer, key=lambda t: t.name)]
    del g.initializer[:]
    g.initializer.extend(inits)
    infos = [type(v).FromString(v.SerializeToString())
             for v in sorted(g.value_info, key=lambda v: v.name)]
    del g.value_info[:]
    g.value_info.extend(infos)
    return names


def _tidy(g, prefix: str, dims: dict) -> None:
    """Subgraph names, empty domains and tf2onnx's ``unk__N`` dimension names (numbered from a
    process-wide counter) made canonical, in this graph and its subgraphs."""
    if prefix:
        g.name = prefix.rstrip("/").replace("/", "_") + "_body"
    g.doc_string = ""
    for n in g.node:
        n.doc_string = ""
        if not n.domain:
            n.ClearField("domain")
        for a in n.attribute:
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                _tidy(sub, f"{n.name}/", dims)
    for v in list(g.input) + list(g.output) + list(g.value_info):
        for d in v.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param.startswith("unk__"):
                d.dim_param = dims.setdefault(d.dim_param, f"unk__{len(dims) + 1}")


def canonicalise(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Put ``proto``'s graph in canonical order with canonical names (in place; returned)."""
    _canonical_graph(proto.graph, {}, prefix="")
    _tidy(proto.graph, "", {})
    return proto
