"""A captured step's Graph as the nodes and edges ``mlsys_viz`` draws: one node per op coloured
by phase (swap-outs and swap-ins in their own colours), the graph folded into one cluster per
(phase, layer) so a ~9,000-op ResNet-50 step draws as a few hundred boxes, and a swap rewrite's
before and after with what it touched highlighted. Plain data; nothing here draws
(``lmskit.views`` gathers these with the other views)."""

from __future__ import annotations

from mlsys_viz.units import human_bytes as human

from .graph import Graph, producer_name
from .rules.common import is_swap

BACKWARD_SCOPE = "gradient_tape/"
# Ops that only carry bookkeeping; drawing them hides the structure of a small graph.
BOOKKEEPING_TYPES = ("Const", "NoOp", "Shape", "ShapeN", "StridedSlice", "Pack",
                     "BroadcastGradientArgs", "Placeholder")
# Ops drawn aside (a side column or hidden): constants and reads of variables. In ResNet-50's
# step they are ~1,000 of ~9,000 ops, each with one long edge into the layer that uses it.
ASIDE_TYPES = frozenset({"Const", "ReadVariableOp", "VarHandleOp", "VariableV2"})


def group_of(graph: Graph, name: str) -> str:
    """The colour group of an op: swap-out / swap-in for swaps, input / variable for the step's
    placeholders, constant for Const, else its phase."""
    op = graph.ops[name]
    if is_swap(op):
        return "swap-out" if op.attrs["swap"] == "out" else "swap-in"
    if op.type == "Placeholder":
        is_var = name in graph.variables or any(
            graph.tensors[t].dtype == "resource" for t in op.outputs)
        return "variable" if is_var else "input"
    if op.type == "Const":
        return "constant"
    return op.phase


def _shape_text(graph: Graph, tensor: str, batch_size: int) -> str:
    t = graph.tensors[tensor]
    if not t.itemsize:
        return f"{t.dtype}"
    return f"{list(t.shape(batch_size))} {t.dtype} = {human(t.bytes(batch_size))}"


def graph_view(graph: Graph, batch_size: int = 1, drop_types=(), keep=()):
    """(nodes, edges) for viz.graph_figure: one node per op (ops whose type is in drop_types
    are left out, with their edges, unless named in keep), data edges hovering the tensor's
    shape and bytes at batch_size, control edges (swap triggers among them) as kind "control".
    Node "scope" is the op's name, so viz.collapse_scopes folds TensorFlow name scopes."""
    drop_types, keep = set(drop_types), set(keep)
    shown = {n for n, op in graph.ops.items() if op.type not in drop_types or n in keep}
    nodes = []
    for name, op in graph.ops.items():
        if name not in shown:
            continue
        outs = "<br>".join(f"{t}: {_shape_text(graph, t, batch_size)}" for t in op.outputs[:3])
        role = ""
        if is_swap(op):
            role = f"<br>swap-{op.attrs['swap']} of {op.attrs['swap_of']}"
        group = group_of(graph, name)
        nodes.append({"id": name, "label": op.type, "group": group, "scope": name,
                      "aside": op.type in ASIDE_TYPES or group in ("constant", "variable"),
                      "hover": f"<b>{name}</b><br>{op.type} · {op.phase} · {op.device}{role}"
                               f"<br>{outs}"})
    edges = []
    for name, op in graph.ops.items():
        if name not in shown:
            continue
        for t in dict.fromkeys(op.inputs):
            src = producer_name(t)
            if src in shown:
                edges.append({"source": src, "target": name, "kind": "data",
                              "hover": f"{t}<br>{_shape_text(graph, t, batch_size)}"})
        for c in op.control_inputs:
            if c in shown:
                edges.append({"source": c, "target": name, "kind": "control",
                              "hover": f"{c} runs before {name}"})
    return nodes, edges


def layer_of(name: str, depth: int = 2) -> str:
    """The layer an op belongs to: its name scope cut to `depth` parts, gradient_tape/ removed
    (so a layer's forward and backward ops name the same layer)."""
    if name.startswith(BACKWARD_SCOPE):
        name = name[len(BACKWARD_SCOPE):]
    parts = name.split("/")[:-1]
    return "/".join(parts[:depth]) or "(top level)"


def collapsed_view(graph: Graph, depth: int = 2, batch_size: int = 1):
    """(nodes, edges) with one cluster node per (phase, layer): layer_of(name, depth) and the
    op's group, so forward and backward halves of a layer are two boxes of their own colour.
    Sizes in the hover are the cluster's op count."""
    nodes, edges = graph_view(graph, batch_size)
    for node in nodes:
        # collapse_scopes splits scopes on "/": keep the whole cluster key in the first part.
        key = f"{node['group']} · {layer_of(node['id'], depth).replace('/', '.')}"
        node["scope"] = f"{key}/{node['id'].replace('/', '.')}"
    from mlsys_viz import collapse_scopes

    return collapse_scopes(nodes, edges, depth=1)


def rewrite_highlight(graph: Graph) -> list[str]:
    """Op names to highlight in a rewritten graph: every swap node, the trigger ops of the
    swap-ins, the producers of swapped tensors and the consumers now reading a swap-in."""
    out = []
    for name, op in graph.ops.items():
        if not is_swap(op):
            continue
        out.append(name)
        if op.attrs["swap"] == "out":
            out.append(producer_name(op.inputs[0]))
        else:
            out += op.control_inputs
            out += [c.name for c in graph.consumers(op.outputs[0])]
    return list(dict.fromkeys(out))


def rewrite_views(original: Graph, rewritten: Graph, batch_size: int = 1, drop_types=()):
    """(before, after, highlight) for viz.rewrite_figure: both graphs as (nodes, edges) (ops of
    drop_types left out unless the rewrite touched them) and the ids to highlight: the inserted
    swap-outs and swap-ins, the producers of swapped tensors, the triggers (whose control edges
    to the swap-ins are then drawn bold) and the readers now fed by a swap-in."""
    highlight = rewrite_highlight(rewritten)
    before = graph_view(original, batch_size, drop_types, keep=highlight)
    after = graph_view(rewritten, batch_size, drop_types, keep=highlight)
    return before, after, highlight
