"""The model side of sliding-window inference: `inspect` checks that a model has only
'valid' operations (Conv and pooling with stride 1 and no pads, pointwise ops) and finds its
field of view by ONNX shape inference at two input sizes (the package docstring says why)."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

# Ops that keep positions apart (each output voxel from the same voxel of its inputs).
POINTWISE = {"Relu", "LeakyRelu", "Elu", "Selu", "Sigmoid", "Tanh", "Softplus", "HardSigmoid",
             "Identity", "Dropout", "Clip", "Abs", "Neg", "Exp", "Log", "Sqrt",
             "BatchNormalization", "Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "PRelu",
             "Softmax", "LogSoftmax", "Concat"}
WINDOWED = {"Conv", "MaxPool", "AveragePool"}


# ---- the model ---------------------------------------------------------------------------
def _proto(model):
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, bytes | bytearray):
        return onnx.load_from_string(bytes(model))
    return onnx.load(str(model))


def _attr(node, name, default=None):
    import onnx.helper

    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _shapes_at(proto, size) -> dict:
    """ONNX shape inference with the input's spatial dims set to `size`: {tensor: dims}."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(proto)
    dims = m.graph.input[0].type.tensor_type.shape.dim
    for d, s in zip(dims[2:], size, strict=True):
        d.ClearField("dim_param")
        d.dim_value = int(s)
    dims[0].ClearField("dim_param")
    dims[0].dim_value = 1
    del m.graph.value_info[:]
    for o in m.graph.output:
        o.type.tensor_type.ClearField("shape")
    try:
        m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    except Exception as error:  # onnx raises its own InferenceError
        raise ValueError(f"model {proto.graph.name!r}: shape inference fails at input size "
                         f"{tuple(size)}: {error}") from None
    out = {}
    for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            out[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None
                                 for d in t.shape.dim)
    for init in m.graph.initializer:
        out[init.name] = tuple(init.dims)
    return out


@dataclass(frozen=True)
class Conv:
    """One Conv at a patch shape: C in, K out, output spatial shape, kernel, group, dilation."""
    name: str
    c: int
    k: int
    out: tuple
    kernel: tuple
    group: int = 1
    dilated: bool = False


@dataclass
class Net:
    """What the sliding window needs to know of a model (`inspect`)."""
    proto: object = field(repr=False)
    input: str
    output: str
    channels_in: int
    channels_out: int
    fov: tuple
    key: str = field(repr=False, default="")  # a hash of the model, for caches

    def patch_in(self, patch_out) -> tuple:
        return tuple(int(p) + f - 1 for p, f in zip(patch_out, self.fov, strict=True))

    def layers(self, patch_out) -> tuple[list[Conv], list[tuple[str, int, int]]]:
        """The Convs at output patch `patch_out` (their own output shapes), and the pooling ops
        as (name, input elements, output elements)."""
        shapes = _shapes_at(self.proto, self.patch_in(patch_out))
        inits = {i.name for i in self.proto.graph.initializer}
        convs, pools = [], []
        for node in self.proto.graph.node:
            if node.op_type == "Conv":
                ws = shapes[node.input[1]]
                ys = shapes[node.output[0]]
                convs.append(Conv(node.name or node.output[0], ws[1] * (_attr(node, "group", 1)),
                                  ws[0], tuple(ys[2:]), tuple(ws[2:]), _attr(node, "group", 1),
                                  any(d != 1 for d in (_attr(node, "dilations") or [1]))))
            elif node.op_type in ("MaxPool", "AveragePool") or (
                    node.op_type in POINTWISE and not _fused(self.proto, node, inits)):
                ins = sum(math.prod(shapes[i]) for i in node.input if i and i not in inits)
                pools.append((node.name or node.output[0], ins, math.prod(shapes[node.output[0]])))
        return convs, pools


def _fused(proto, node, inits) -> bool:
    """Whether a pointwise node applies to a Conv's output alone (compilerkit fuses the
    activation into the Conv): not counted as a pass of its own."""
    producer = {o: n for n in proto.graph.node for o in n.output}
    src = [i for i in node.input if i and i not in inits]
    return len(src) == 1 and src[0] in producer and producer[src[0]].op_type == "Conv"


def _check_node(node, shapes, inits) -> None:
    """ValueError unless `node` is a 'valid' windowed op or a pointwise one."""
    label = f"node {node.name or node.output[0]!r} ({node.op_type})"
    if node.op_type not in WINDOWED | POINTWISE:
        raise ValueError(f"{label}: not a valid-convolution op; sliding-window inference takes "
                         f"{', '.join(sorted(WINDOWED))} and pointwise ops only")
    if node.op_type in WINDOWED:
        if (_attr(node, "auto_pad", b"NOTSET") or b"NOTSET") not in (b"NOTSET", b"VALID"):
            raise ValueError(f"{label}: auto_pad {_attr(node, 'auto_pad').decode()} pads the "
                             "input; sliding windows need valid (unpadded) convolutions")
        if any(_attr(node, "pads") or [0]):
            raise ValueError(f"{label}: pads {list(_attr(node, 'pads'))}; sliding windows need "
                             "valid (unpadded) convolutions")
        if any(s != 1 for s in (_attr(node, "strides") or [1])):
            raise ValueError(f"{label}: strides {list(_attr(node, 'strides'))}; sliding windows "
                             "need stride 1 (a strided layer depends on the patch's offset)")
        if _attr(node, "ceil_mode", 0):
            raise ValueError(f"{label}: ceil_mode 1 is not a valid pooling")
    elif node.op_type in ("Softmax", "LogSoftmax", "Concat"):
        axis = _attr(node, "axis", -1 if node.op_type != "Concat" else None)
        if axis not in (1, -4):
            raise ValueError(f"{label}: axis {axis} mixes positions; only the channel axis (1) "
                             "keeps a sliding window exact")
    out = shapes.get(node.output[0])
    for name in node.input:
        s = shapes.get(name)
        if name in inits or not name or s is None or out is None or len(s) < 5:
            if name in inits and s is not None and len(s) >= 3 and any(d != 1 for d in s[-3:]) \
                    and node.op_type not in WINDOWED:
                raise ValueError(f"{label}: constant {name!r} of shape {list(s)} varies over "
                                 "space; a sliding window needs per-channel constants")
            continue
        if node.op_type not in WINDOWED and s[2:] != out[2:]:
            raise ValueError(f"{label}: input {name!r} {list(s)} and output {list(out)} differ "
                             "in space (a crop or broadcast: not sliding-window exact)")


def inspect(model) -> Net:
    """Check that `model` (path, bytes or ModelProto) is a fully-convolutional valid 3-D net
    with one input and one output, and find its field of view (ValueError otherwise)."""
    proto = _proto(model)
    g = proto.graph
    inits = {i.name for i in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    if len(inputs) != 1 or len(g.output) != 1:
        raise ValueError(f"model {g.name!r}: {len(inputs)} inputs and {len(g.output)} outputs; "
                         "sliding-window inference takes one of each")
    dims = inputs[0].type.tensor_type.shape.dim
    if len(dims) != 5:
        raise ValueError(f"model {g.name!r}: input {inputs[0].name!r} has rank {len(dims)}; "
                         "expected [N, C, Z, Y, X]")
    c_in = dims[1].dim_value
    if not c_in:
        raise ValueError(f"model {g.name!r}: input {inputs[0].name!r} has no fixed channel "
                         "count")
    # two sizes: a valid net's output shrinks by the same amount at both
    sizes = [(64, 64, 64), (72, 80, 96)]
    found = []
    for size in sizes:
        shapes = _shapes_at(proto, size)
        for node in g.node:
            _check_node(node, shapes, inits)
        out = shapes.get(g.output[0].name)
        if out is None or len(out) != 5 or None in out:
            raise ValueError(f"model {g.name!r}: output {g.output[0].name!r} has shape {out}; "
                             "expected [1, K, Z, Y, X]")
        found.append((tuple(s - o + 1 for s, o in zip(size, out[2:], strict=True)), out[1]))
    if found[0] != found[1] or min(found[0][0]) < 1:
        raise ValueError(f"model {g.name!r}: output shrinks by {found[0][0]} at input "
                         f"{sizes[0]} but by {found[1][0]} at {sizes[1]}: not a valid "
                         "convolutional net")
    key = hashlib.sha1(proto.SerializeToString(deterministic=True)).hexdigest()
    return Net(proto, inputs[0].name, g.output[0].name, c_in, found[0][1], found[0][0], key)


def field_of_view(model) -> tuple:
    """The model's field of view per axis (z, y, x): output = input - fov + 1."""
    return inspect(model).fov
