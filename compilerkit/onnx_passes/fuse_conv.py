"""Conv fusion on ONNX IR (`fuse-conv`): fold what follows or precedes a Conv into the Conv, as
onnxruntime's level-1/2 graph optimisers do (PadFusion, ConvMulFusion, ConvAddFusion,
ConvActivationFusion), so the lowering emits one loop nest where the model has three or four.

- Pad -> Conv: a constant-mode, zero-valued Pad of the spatial axes only (constant pads,
  none negative) used only by the Conv becomes extra Conv `pads`;
- Conv -> Mul(c) and Conv -> Add(c), c a constant per output channel (shape [OC, 1, ...],
  [1, OC, 1, ...] or one value): folded into the weights and bias,
  conv(x, W) * c + d == conv(x, W * c) + (b * c + d).
  This is how tf2onnx exports a BatchNormalization it could not fold (after a depthwise Conv
  in Keras MobileNetV2 and EfficientNet); a BatchNormalization node itself is folded into its
  Conv by `decompose`, before this pass;
- ConvTranspose -> Add(c), c a constant per output channel: folded into its bias (a Keras
  Conv3DTranspose's bias comes as that Add);
- Conv -> activation: the activation becomes the Conv's `activation` attribute, with its
  parameters in `activation_params` (onnxruntime's com.microsoft FusedConv names both):

      activation    activation_params   y =
      Relu          []                  max(x, 0)
      LeakyRelu     [alpha]             x < 0 ? alpha * x : x
      Clip          [min, max]          min(max(x, min), max)   (Keras ReLU6: [0, 6])
      Sigmoid       []                  1 / (1 + exp(-x))
      Tanh          []                  tanh(x)
      HardSigmoid   [alpha, beta]       clip(alpha * x + beta, 0, 1)
      HardSwish     []                  x * clip(x / 6 + 1/2, 0, 1)
      Swish         [alpha]             x * sigmoid(alpha * x)  (Keras SiLU: Sigmoid + Mul)

  An activation is the last thing fused into a Conv (a scale after it no longer folds into
  the weights). Lowering (lowering/conv.py) applies it in the Conv nest's epilogue, on each
  output tile right after it is computed. The attributes are not ONNX's: `fused_activation`
  reads them back and refuses a name or parameter count outside this table, naming the node.
- Conv -> Add(s), s any tensor of the Conv's own shape (ResNet's residual sum, oneDNN's "sum"
  post-op, onnxruntime's FusedConv input Z), with `sums` on: the Add gets `fused_conv = k`,
  k the index of its Conv operand. The IR keeps its meaning (the Conv still computes the
  Conv, the Add the sum, and a consumer that ignores the mark computes the same); lowering
  (lowering/__init__.py) computes the Conv where the Add stands and adds s in the Conv's
  epilogue while each output tile is in cache, then the Add's activation (fuse-elementwise
  puts a Relu after the Add there), instead of writing the Conv's output and reading it back.
  Only a Conv with no activation of its own (act(conv) + s is another sum) whose result is
  used by the Add alone; of two such Convs under one Add, the later one (the other's output
  is then ready, and no input lives longer). `summed_conv` reads the mark back and refuses
  one that does not hold, naming the node.

Only Convs whose weights (and bias, if any) are constants and whose result has no other use
are touched. Assumes static shapes and constants folded (run after constant-folding); the
constants it replaces are left for dead-code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, FloatAttr, IntegerAttr, StringAttr, f32
from xdsl.passes import ModulePass

from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError
from compilerkit.frontend.checks import move_declared
from compilerkit.onnx_passes.single_node import main_func, node_label, opset_of

# activation name -> number of parameters (see the table above)
SUM_MARK = "fused_conv"  # on an Add: the index of the Conv operand summed in its epilogue
ACTIVATIONS = {"Relu": 0, "LeakyRelu": 1, "Clip": 2, "Sigmoid": 0, "Tanh": 0,
               "HardSigmoid": 2, "HardSwish": 0, "Swish": 1}


def fused_activation(op) -> tuple[str, list[float]] | None:
    """(name, params) of the activation fused into `op` (a Conv here, an elementwise op by
    fuse_elementwise), or None; a ModelError for an activation this table does not define or
    the wrong number of parameters."""
    kind = onnx_d.op_type(op)
    name = op.attributes.get("activation")
    params = op.attributes.get("activation_params")
    if name is None:
        if params is not None:
            raise ModelError(f"node {node_label(op)!r} ({kind}): activation_params without an "
                             "activation")
        return None
    if not isinstance(name, StringAttr) or name.data not in ACTIVATIONS:
        raise ModelError(f"node {node_label(op)!r} ({kind}): fused activation {name} is not one "
                         f"of {', '.join(ACTIVATIONS)}")
    values = onnx_d.from_mlir_attr(params) if params is not None else []
    if not isinstance(values, list) or not all(isinstance(v, float) for v in values):
        raise ModelError(f"node {node_label(op)!r} ({kind}): activation_params must be a list of "
                         f"floats, got {params}")
    if len(values) != ACTIVATIONS[name.data]:
        raise ModelError(f"node {node_label(op)!r} ({kind}): activation {name.data} takes "
                         f"{ACTIVATIONS[name.data]} parameter(s), got {values}")
    return name.data, values


# ---- helpers ---------------------------------------------------------------------------------

def _only_use(value):
    """The one op using `value`, or None when it has no use or several (or is returned)."""
    uses = list(value.uses)
    if len(uses) != 1:
        return None
    return uses[0].operation


def _is(op, kind) -> bool:
    return getattr(op, "name", None) == f"onnx.{kind}"


def _const(value, module):
    return None if onnx_d.is_absent(value) else onnx_d.constant_value(value, module)


def _fusable(conv, module, kind: str = "Conv") -> bool:
    """A Conv (or ConvTranspose, `kind`) this pass may rewrite: no activation yet, a static
    result, and not all operands constant (constant folding computes those, and knows no fused
    activation)."""
    if not _is(conv, kind) or "activation" in conv.attributes:
        return False
    if not onnx_d.is_static(conv.results[0].type):
        return False
    return any(_const(v, module) is None for v in conv.operands if not onnx_d.is_absent(v))


def _weights(conv, module):
    """(W, b or None) when both are constants (absent b is fine), else None."""
    w = onnx_d.constant_value(conv.W, module)
    if w is None or w.dtype.kind != "f":
        return None
    b = None
    if not onnx_d.is_absent(conv.B):
        b = onnx_d.constant_value(conv.B, module)
        if b is None:
            return None
    return w, b


def _replace(old_value, new_value, module, block, dead):
    move_declared(module, old_value, new_value)
    old_value.replace_all_uses_with(new_value)
    for op in dead:
        block.erase_op(op)


def _set_params(conv, module, block, w, b):
    name = node_label(conv)
    for k, (array, hint) in enumerate(((w, "_w"), (b, "_b")), start=1):
        c = onnx_d.make_constant(np.ascontiguousarray(array), module, name + hint)
        block.insert_op_before(c, conv)
        conv.operands[k] = c.results[0]


def _channel_vector(c, conv, w):
    """The constant `c` as one value per output channel, if it broadcasts against the Conv's
    output [N, OC, spatial...] without growing it (else None)."""
    out = onnx_d.shape_of(conv.results[0])
    if c.ndim > len(out) or c.dtype != w.dtype:
        return None
    full = (1,) * (len(out) - c.ndim) + c.shape
    if any(d != 1 for k, d in enumerate(full) if k != 1) or full[1] not in (1, out[1]):
        return None
    return np.broadcast_to(c.reshape(-1), (out[1],)) if c.size == 1 else c.reshape(-1)


# ---- the rewrites ----------------------------------------------------------------------------

def _channel_user(conv, module, kinds):
    """(the op's one user, W, b or None, c per output channel) where its result goes only to
    an op of one of `kinds` whose other operand is a constant per output channel
    (`_channel_vector`) and the result type stays; else None."""
    params = _weights(conv, module)
    user = _only_use(conv.results[0])
    if params is None or not any(_is(user, kind) for kind in kinds):
        return None
    other = user.operands[1] if user.operands[0] is conv.results[0] else user.operands[0]
    c = onnx_d.constant_value(other, module)
    if c is None or user.results[0].type != conv.results[0].type:
        return None
    vec = _channel_vector(c, conv, params[0])
    return None if vec is None else (user, *params, vec)


def _fold_scale_shift(conv, module, block) -> bool:
    """Conv -> Mul(c) or Add(c) with a per-channel constant c: into W and b."""
    found = _fusable(conv, module) and _channel_user(conv, module, ("Mul", "Add"))
    if not found:
        return False
    user, w, b, vec = found
    oc = w.shape[0]
    bias = b if b is not None else np.zeros(oc, w.dtype)
    if _is(user, "Mul"):
        w = w * vec.reshape((oc,) + (1,) * (w.ndim - 1))
        bias = bias * vec
    else:
        bias = bias + vec
    _set_params(conv, module, block, w.astype(w.dtype), bias.astype(w.dtype))
    _replace(user.results[0], conv.results[0], module, block, [user])
    return True


def _fold_shift_transposed(conv, module, block) -> bool:
    """ConvTranspose -> Add(c) with a per-channel constant c: into its bias (as onnxruntime's
    ConvAddFusion does for Conv; Keras exports a Conv3DTranspose's bias as that Add)."""
    found = _fusable(conv, module, "ConvTranspose") and _channel_user(conv, module, ("Add",))
    if not found:
        return False
    user, w, b, vec = found
    bias = (b if b is not None else np.zeros(vec.shape, w.dtype)) + vec
    const = onnx_d.make_constant(np.ascontiguousarray(bias.astype(w.dtype)), module,
                                 node_label(conv) + "_b")
    block.insert_op_before(const, conv)
    conv.operands[2] = const.results[0]
    _replace(user.results[0], conv.results[0], module, block, [user])
    return True


def _clip_params(op, module):
    if opset_of(op) < 11:
        lo = onnx_d.get_attr(op, "min", float(np.finfo(np.float32).min))
        hi = onnx_d.get_attr(op, "max", float(np.finfo(np.float32).max))
        return [float(lo), float(hi)]
    out = []
    for k, default in ((1, -np.inf), (2, np.inf)):
        if len(op.operands) <= k or onnx_d.is_absent(op.operands[k]):
            out.append(float(default))
            continue
        v = onnx_d.constant_value(op.operands[k], module)
        if v is None or v.size != 1:
            return None
        out.append(float(v.reshape(-1)[0]))
    return out


def activation_of(user, module):
    """(name, params, ops to erase) when `user` (the one use of the Conv's result) is an
    activation this pass fuses, else None."""
    kind = onnx_d.op_type(user) if getattr(user, "name", "").startswith("onnx.") else None
    if kind == "Relu":
        return "Relu", [], [user]
    if kind == "LeakyRelu":
        return "LeakyRelu", [float(onnx_d.get_attr(user, "alpha", 0.01))], [user]
    if kind == "HardSigmoid":
        return "HardSigmoid", [float(onnx_d.get_attr(user, "alpha", 0.2)),
                               float(onnx_d.get_attr(user, "beta", 0.5))], [user]
    if kind in ("Sigmoid", "Tanh", "HardSwish"):
        return kind, [], [user]
    if kind == "Clip":
        params = _clip_params(user, module)
        return ("Clip", params, [user]) if params is not None else None
    return None


def _swish(conv):
    """Sigmoid(y) * y, y the Conv's result used only by those two ops: (Sigmoid, Mul)."""
    y = conv.results[0]
    users = [u.operation for u in y.uses]
    if len(users) != 2:
        return None
    sig = next((u for u in users if _is(u, "Sigmoid")), None)
    mul = next((u for u in users if _is(u, "Mul")), None)
    if sig is None or mul is None or _only_use(sig.results[0]) is not mul:
        return None
    if set(mul.operands) != {y, sig.results[0]}:
        return None
    return sig, mul


def _fuse_activation(conv, module, block) -> bool:
    if not _fusable(conv, module):
        return False
    y = conv.results[0]
    user = _only_use(y)
    found = None
    if user is not None:
        act = activation_of(user, module)
        if act is not None:
            found = (*act, user.results[0])
    else:
        pair = _swish(conv)
        if pair is not None:
            found = ("Swish", [1.0], [pair[1], pair[0]], pair[1].results[0])
    if found is None:
        return False
    name, params, dead, result = found
    if result.type != y.type:
        return False
    conv.attributes["activation"] = StringAttr(name)
    if params:  # absent when empty, as in onnxruntime's FusedConv
        conv.attributes["activation_params"] = ArrayAttr([FloatAttr(p, f32) for p in params])
    _replace(result, y, module, block, dead)
    return True


def pad_pairs(pad, module):
    """The spatial (begin, end) pads of a zero, constant-mode Pad of a rank-N tensor that pads
    only spatial axes (axes 2..), else None."""
    if onnx_d.get_attr(pad, "mode", "constant") != "constant":
        return None
    rank = len(onnx_d.shape_of(pad.results[0]))
    if opset_of(pad) < 11:
        pads = onnx_d.get_attr(pad, "pads", None)
        value = onnx_d.get_attr(pad, "value", 0.0)
        axes = None
    else:
        pads = _const(pad.operands[1], module)
        value = _const(pad.operands[2], module) if len(pad.operands) > 2 else None
        if value is None and len(pad.operands) > 2 and not onnx_d.is_absent(pad.operands[2]):
            return None
        value = 0.0 if value is None else float(np.asarray(value).reshape(-1)[0])
        axes = pad.operands[3] if len(pad.operands) > 3 else None
        if axes is not None and not onnx_d.is_absent(axes):
            return None
    if pads is None or value != 0.0:
        return None
    pads = [int(p) for p in np.asarray(pads).reshape(-1)]
    if len(pads) != 2 * rank or any(p < 0 for p in pads):
        return None
    begin, end = pads[:rank], pads[rank:]
    if begin[:2] != [0, 0] or end[:2] != [0, 0]:
        return None
    return begin[2:], end[2:]


def _fold_pad(conv, module, block) -> bool:
    """Pad -> Conv: the Pad's spatial padding becomes the Conv's."""
    if not _is(conv, "Conv"):
        return False
    pad = getattr(conv.X, "owner", None)
    if not _is(pad, "Pad") or _only_use(pad.results[0]) is not conv:
        return False
    if onnx_d.get_attr(conv, "auto_pad", "NOTSET") != "NOTSET":
        return False
    if not onnx_d.is_static(pad.operands[0].type) or not onnx_d.is_static(pad.results[0].type):
        return False
    pairs = pad_pairs(pad, module)
    if pairs is None:
        return False
    absorb_pad(conv, pad, merged_pads(conv, pairs), block)
    return True


def merged_pads(op, pairs) -> list[int]:
    """`op`'s own pads (begins, then ends) plus a Pad's spatial (begin, end) `pairs`."""
    r = len(pairs[0])
    old = onnx_d.get_attr(op, "pads", None) or [0] * (2 * r)
    return [old[i] + pairs[0][i] for i in range(r)] + [old[r + i] + pairs[1][i] for i in range(r)]


def absorb_pad(op, pad, pads, block) -> None:
    """`op` takes `pads` and reads the Pad's input; the Pad goes."""
    op.attributes["pads"] = onnx_d.to_mlir_attr(pads)
    op.operands[0] = pad.operands[0]
    block.erase_op(pad)


def _fuse_sum(conv, module, block) -> bool:
    """Conv -> Add(s): mark the Add (module docstring)."""
    if not _fusable(conv, module):
        return False
    y = conv.results[0]
    add = _only_use(y)
    if not _is(add, "Add") or SUM_MARK in add.attributes:
        return False
    k = 0 if add.operands[0] is y else 1
    s = add.operands[1 - k]
    if s is y or s.type != y.type or add.results[0].type != y.type:
        return False
    if conv.attributes.get("onnx_guards") != add.attributes.get("onnx_guards"):
        return False  # run-time guards (lowering/guards.py) are per node: keep them apart
    other = getattr(s, "owner", None)
    if (_is(other, "Conv") and _fusable(other, module) and _only_use(s) is add
            and conv.is_before_in_block(other)):
        return False  # the later Conv takes the Add
    add.attributes[SUM_MARK] = IntegerAttr(k, 64)
    return True


def summed_conv(add):
    """(the Conv, its operand index k) when `add` is an Add that fuse-conv marked to sum into
    a Conv's epilogue (`fused_conv = k`), else None; a ModelError naming the node when the mark
    does not hold: no Conv there, the Conv's result used elsewhere or carrying an activation,
    or the other operand's shape not the Conv's."""
    if SUM_MARK not in add.attributes:
        return None
    label = f"node {node_label(add)!r} ({onnx_d.op_type(add)})"
    k = add.attributes[SUM_MARK]
    if not _is(add, "Add") or not isinstance(k, IntegerAttr) or k.value.data not in (0, 1):
        raise ModelError(f"{label}: {SUM_MARK} must be 0 or 1 on an Add, got {k}")
    y = add.operands[k.value.data]
    conv = getattr(y, "owner", None)
    if not _is(conv, "Conv"):
        raise ModelError(f"{label}: {SUM_MARK} = {k.value.data} names an operand that no Conv "
                         "computes")
    if _only_use(y) is not add or "activation" in conv.attributes:
        raise ModelError(f"{label}: {SUM_MARK}: Conv {node_label(conv)!r}'s result has other "
                         "uses or an activation of its own")
    s = add.operands[1 - k.value.data]
    if s.type != y.type or add.results[0].type != y.type:
        raise ModelError(f"{label}: {SUM_MARK}: the summand's type {s.type} is not Conv "
                         f"{node_label(conv)!r}'s {y.type}")
    return conv, k.value.data


def summing_add(conv):
    """The Add that sums into `conv`'s epilogue (`summed_conv`), or None."""
    add = _only_use(conv.results[0])
    return add if _is(add, "Add") and SUM_MARK in add.attributes and (
        summed_conv(add)[0] is conv) else None


def fuse_conv(module, sums: bool = True) -> int:
    """Apply the rewrites until none applies (the residual sum only with `sums`); returns how
    many were made."""
    block = main_func(module).body.block
    count = 0
    changed = True
    while changed:
        changed = False
        for op in list(block.ops):
            if op.parent is not None and _fold_shift_transposed(op, module, block):
                count += 1
                changed = True
            if op.parent is None or not _is(op, "Conv"):
                continue
            while _fold_pad(op, module, block) or _fold_scale_shift(op, module, block):
                count += 1
                changed = True
            if _fuse_activation(op, module, block) or (sums and _fuse_sum(op, module, block)):
                count += 1
                changed = True
    return count


@dataclass(frozen=True)
class FuseConvPass(ModulePass):
    """`fuse-conv`: Pad, per-channel Mul/Add and an activation into the Conv next to them;
    with `sums`, the residual Add after a Conv into its epilogue."""

    name = "fuse-conv"
    sums: bool = True

    def apply(self, ctx, op) -> None:
        if not isinstance(self.sums, bool):
            raise ValueError(f"fuse-conv: sums={self.sums!r} is not true or false")
        fuse_conv(op, self.sums)


__all__ = ["FuseConvPass", "fuse_conv", "fused_activation", "summed_conv", "summing_add",
           "ACTIVATIONS", "SUM_MARK"]
