"""Old opsets: a model of default-domain opset 1 to MIN_OPSET - 1 (PyTorch exported opset 6
until 2018) is upgraded to MIN_OPSET with onnx.version_converter on import, with an
`OpsetUpgradeWarning` saying so; the ONNX IR's func records the opset the model came with
(`onnx_opset_upgraded_from`). onnxruntime runs such models through legacy kernels where it has
them; compilerkit compiles the upgraded graph only.

The converter is trusted no further than the user: its output goes through the same hygiene
checks, a conversion it refuses is a `ModelError` naming the node it failed on, and the
meanings it gets wrong, the broadcast it refuses without need and the weights it drops are
repaired here (`_per_channel_prelu`, `_upsample_modes`, `_trailing_broadcasts`,
`_weights_aside`)."""

from __future__ import annotations

import math
import warnings

import onnx
from onnx import ModelProto, helper

from compilerkit.frontend.checks import ModelError, OpsetUpgradeWarning
from compilerkit.frontend.hygiene import MIN_OPSET, check_graph, model_opset, node_label, text


def upgrade(proto: ModelProto, input_shapes: dict | None = None) -> ModelProto:
    """`proto` (opset below MIN_OPSET, already through `check_graph`) converted to MIN_OPSET:
    the smallest step, so the fewest of the converter's adapters run. A new model; the
    caller's is left as it is. `input_shapes` (checked) are written into inputs declared with
    no shape at all first: the converter's broadcast adapters need every operand's rank."""
    old = model_opset(proto)
    shapeless = [i for i in proto.graph.input if text(i.name) in (input_shapes or {})
                 and i.type.HasField("tensor_type") and not i.type.tensor_type.HasField("shape")]
    if shapeless:
        given = proto
        proto = ModelProto()
        proto.CopyFrom(given)
        for i in proto.graph.input:
            if text(i.name) in input_shapes and not i.type.tensor_type.HasField("shape"):
                shape = i.type.tensor_type.shape
                shape.SetInParent()  # a shape even for rank 0 (no dims)
                for d in input_shapes[text(i.name)]:
                    shape.dim.add().dim_value = d
    proto, aside, added = _weights_aside(proto)
    proto = _trailing_broadcasts(proto)
    try:
        new = onnx.version_converter.convert_version(proto, MIN_OPSET)
    except Exception as e:  # noqa: BLE001 - the converter raises bare RuntimeErrors
        raise ModelError(f"opset {old} model: onnx.version_converter could not upgrade it to "
                         f"opset {MIN_OPSET}: {_culprit(proto, e)}") from None
    kept = [i for i in new.graph.input if i.name not in added]
    del new.graph.input[:]
    new.graph.input.extend(kept)
    new.graph.initializer.extend(aside)
    _per_channel_prelu(new)
    _upsample_modes(new)
    warnings.warn(f"the model's opset {old} was upgraded to opset {MIN_OPSET} with "
                  "onnx.version_converter before compiling", OpsetUpgradeWarning, stacklevel=2)
    try:
        check_graph(new)
    except ModelError as e:
        raise ModelError(f"opset {old} model upgraded to opset {MIN_OPSET} by "
                         f"onnx.version_converter is not valid: {e}") from None
    return new


ASIDE_BYTES = 4096  # float initializers larger than this skip the converter (_weights_aside)


def _weights_aside(proto: ModelProto) -> tuple[ModelProto, list, set]:
    """The model the converter is given. Every initializer is also a graph input there: the
    converter reads an IR-3 model's initializers only through its inputs (IR 3 required them
    listed; exporters did not always) and otherwise drops them ("Input w is undefined!").
    External-data and large float initializers are left out, inputs only (no adapter reads
    weights; copying them through the converter twice costs time). Returns (that model, the
    initializers left out, the names of the inputs added), for `upgrade` to undo; `proto`
    itself when there is nothing to do."""
    def aside(t):
        if t.data_location == onnx.TensorProto.EXTERNAL:
            return True
        if t.data_type not in helper.get_all_tensor_dtypes():
            return False
        dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
        return dtype.kind == "f" and math.prod(t.dims) * dtype.itemsize > ASIDE_BYTES

    g = proto.graph
    listed = {i.name for i in g.input}
    moved = [t for t in g.initializer if aside(t)]
    unlisted = [t for t in g.initializer if t.name not in listed]
    if not moved and not unlisted:
        return proto, [], set()
    saved = []
    for t in moved:  # copies: `proto` stays the caller's
        c = onnx.TensorProto()
        c.CopyFrom(t)
        saved.append(c)
    light = ModelProto()
    light.CopyFrom(proto)
    names = {t.name for t in moved}
    kept = [t for t in light.graph.initializer if t.name not in names]
    del light.graph.initializer[:]
    light.graph.initializer.extend(kept)
    light.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                             for t in unlisted)
    return light, saved, {t.name for t in unlisted}


# Ops of opsets 1 to 6 with the legacy `broadcast` / `axis` attributes.
_LEGACY_BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater",
                     "Less"}


def _ranks(model: ModelProto) -> dict:
    """Tensor name -> rank, where ONNX's inference (lenient) knows it."""
    try:
        typed = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - then the converter decides, as without this repair
        typed = model
    g = typed.graph
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in list(g.input)
             + list(g.value_info) + list(g.output) if vi.type.tensor_type.HasField("shape")}
    ranks.update({t.name: len(t.dims) for t in g.initializer})
    return ranks


def _trailing_broadcasts(proto: ModelProto) -> ModelProto:
    """Opset 6's `broadcast=1, axis=k` lines B up with A's axes k.. (a [C] bias on axis 1 of
    [N, C, L], as PyTorch exported Conv1d biases). The converter's adapter refuses the case
    where B does not reach A's last axis ("Dimension 0 of input 2 does not match dimension 0
    of input 1", onnx 1.23). Where it does not, B is unsqueezed with trailing 1s (Unsqueeze-1
    exists at every opset) and `axis` dropped: the same meaning, as a trailing broadcast the
    adapter converts. Returns `proto` itself when nothing changes, else a changed copy."""
    if not any(n.op_type in _LEGACY_BROADCAST and any(a.name == "axis" for a in n.attribute)
               for n in proto.graph.node):
        return proto
    ranks = _ranks(proto)
    fixed = ModelProto()
    fixed.CopyFrom(proto)
    g = fixed.graph
    taken = {o for n in g.node for o in n.output} | {i.name for i in g.input} | {
        t.name for t in g.initializer}
    nodes, changed = [], False
    for k, node in enumerate(g.node):
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        ra, rb = (ranks.get(n) for n in node.input[:2]) if len(node.input) == 2 else (None, None)
        if (node.op_type in _LEGACY_BROADCAST and attrs.get("broadcast") == 1
                and "axis" in attrs and ra is not None and rb is not None):
            axis = attrs["axis"] + ra if attrs["axis"] < 0 else attrs["axis"]
            if 0 <= axis and axis + rb < ra:
                name = f"{node.input[1]}_at_axis_{axis}"
                while name in taken:
                    name += "_"
                taken.add(name)
                nodes.append(helper.make_node("Unsqueeze", [node.input[1]], [name],
                                              name=f"{node_label(node, k)}_broadcast_at_axis",
                                              axes=list(range(rb, ra - axis))))
                node.input[1] = name
                kept = [a for a in node.attribute if a.name != "axis"]
                del node.attribute[:]
                node.attribute.extend(kept)
                changed = True
        copy = onnx.NodeProto()  # a copy: the graph's own nodes are cleared below
        copy.CopyFrom(node)
        nodes.append(copy)
    if not changed:
        return proto
    del g.node[:]
    g.node.extend(nodes)
    return fixed


def _reason(error: Exception) -> str:
    # The converter's messages are C++ assertions: "file.cc:76: fn: Assertion `cond` failed:
    # what went wrong". The last part is the reason.
    message = " ".join(str(error).split())
    return message.rsplit(" failed: ", 1)[-1]


def _culprit(proto: ModelProto, error: Exception) -> str:
    """The converter names no node when it fails (often not even the op): convert each node
    alone, its inputs typed as ONNX's inference types them in the whole model, and name the
    first that fails with the same kind of error. Runs only when the whole model failed."""
    try:
        typed = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - then the inputs stay untyped
        typed = proto
    g = typed.graph
    types = {vi.name: vi for vi in list(g.input) + list(g.value_info) + list(g.output)}
    inits = {t.name: t for t in g.initializer}
    for k, node in enumerate(proto.graph.node):
        names = [n for n in dict.fromkeys(node.input) if n]
        inputs = [types.get(n) or helper.make_empty_tensor_value_info(n) for n in names]
        alone = helper.make_graph(
            [node], "alone", inputs,
            [helper.make_empty_tensor_value_info(o) for o in node.output if o],
            initializer=[inits[n] for n in names if n in inits])
        model = helper.make_model(alone, opset_imports=list(proto.opset_import),
                                  ir_version=proto.ir_version)
        try:
            onnx.version_converter.convert_version(model, MIN_OPSET)
        except Exception as e:  # noqa: BLE001 - as above
            return f"node {node_label(node, k)!r} ({text(node.op_type)}): {_reason(e)}"
    return _reason(error)


# Upsample-1's modes under their opset-7 names (same meaning: the scales of opset 1 are on the
# two spatial axes only, so "linear" is bilinear).
_UPSAMPLE_MODES = {b"NN": b"nearest", b"BILINEAR": b"linear"}


def _upsample_modes(model: ModelProto) -> None:
    """The converter rewrites Upsample-1's width/height scales to opset 7's `scales` but keeps
    its mode names, which opset 7 does not know ("NN", "BILINEAR"): renamed here, in place."""
    for node in model.graph.node:
        if node.op_type == "Upsample":
            for a in node.attribute:
                if a.name == "mode" and a.s in _UPSAMPLE_MODES:
                    a.s = _UPSAMPLE_MODES[a.s]


def _per_channel_prelu(model: ModelProto) -> None:
    """PRelu's slope is per channel before opset 7 (a [C] slope scales axis 1 of an [N, C, ...]
    input, as PyTorch's nn.PReLU exported it); from opset 7 it broadcasts numpy-style, against
    the last axis. The converter keeps the node as it is, which either fails to broadcast or,
    where the last axis also has C elements, answers wrong in silence. An Unsqueeze to
    [C, 1, ..., 1] restores the per-channel meaning. Changes `model` in place."""
    g = model.graph
    if not any(n.op_type == "PRelu" for n in g.node):
        return
    try:
        typed = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - the strict inference after this refuses such a model
        typed = model
    shapes = {}
    for vi in list(typed.graph.input) + list(typed.graph.value_info):
        tt = vi.type.tensor_type
        if tt.HasField("shape"):
            shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else -1
                               for d in tt.shape.dim]
    shapes.update({t.name: list(t.dims) for t in g.initializer})
    nodes = []
    taken = {o for n in g.node for o in n.output} | {i.name for i in g.input} | {
        t.name for t in g.initializer}
    for k, node in enumerate(g.node):
        x, slope = (shapes.get(n) for n in node.input[:2]) if (
            node.op_type == "PRelu" and len(node.input) == 2) else (None, None)
        per_channel = slope is not None and len(slope) == 1 and slope[0] > 1
        if per_channel and x is None:  # without the rank, the repair cannot be made
            raise ModelError(f"node {node_label(node, k)!r} (PRelu): before opset "
                             f"{MIN_OPSET} its slope is per channel, and the rank of its input "
                             "is unknown when the model is upgraded; give the graph inputs' "
                             "shapes (input_shapes)")
        if per_channel and len(x) >= 3 and x[1] in (slope[0], -1):
            name = f"{node.input[1]}_per_channel"
            while name in taken:
                name += "_"
            taken.add(name)
            nodes.append(helper.make_node("Unsqueeze", [node.input[1]], [name],
                                          name=f"{node_label(node, k)}_slope_per_channel",
                                          axes=list(range(1, len(x) - 1))))
            node.input[1] = name
        kept = onnx.NodeProto()  # a copy: the graph's own nodes are cleared below
        kept.CopyFrom(node)
        nodes.append(kept)
    del g.node[:]
    g.node.extend(nodes)
