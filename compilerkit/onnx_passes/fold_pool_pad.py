"""Pad -> MaxPool on ONNX IR (`fold-pool-pad`): a zero Pad before a MaxPool becomes the
MaxPool's own pads when the padded tensor is never negative. ResNet-50 as tf2onnx exports it
pads the stem's ReLU output with zeros and pools it unpadded; onnxruntime's pooling reads the
padding in place, and here the two nodes cost a copy of the whole 64 x 112 x 112 tensor.

MaxPool pads with -inf, the Pad with 0. The two take the same maximum when

- every value of the input is >= 0: it comes from a Relu, or from an op whose fused
  activation (fuse-conv and fuse-elementwise run first) is Relu, Sigmoid or HardSigmoid, or
  Clip with a minimum >= 0; then 0 adds nothing to a window holding one input value;
- every window holds an input value: each side's pads (the Pad's and the MaxPool's own,
  together) are shorter than the window's extent, (k - 1) * dilation + 1, and ceil_mode is
  off (a ceil-mode window may start past the input);
- the MaxPool's Indices are not used (they index the padded tensor).

The Pad must be a constant-mode, zero-valued Pad of the spatial axes only (the rule
fuse-conv's Pad -> Conv applies, `fuse_conv.pad_pairs`), used by the MaxPool alone.
Assumes static shapes and constants folded; the Pad's constants are left for dead-code.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.passes import ModulePass

from compilerkit.dialects import onnx as onnx_d
from compilerkit.onnx_passes.fuse_conv import absorb_pad, fused_activation, merged_pads, pad_pairs
from compilerkit.onnx_passes.single_node import main_func

NON_NEGATIVE_ACTIVATIONS = ("Relu", "Sigmoid", "HardSigmoid")


def _is(op, kind) -> bool:
    return getattr(op, "name", None) == f"onnx.{kind}"


def never_negative(value) -> bool:
    """Whether every element of `value` is >= 0 (or NaN) by how it is made."""
    op = getattr(value, "owner", None)
    if _is(op, "Relu"):
        return True
    if "activation" in getattr(op, "attributes", {}):  # fuse-conv's, fuse-elementwise's
        act = fused_activation(op)
        return act is not None and (act[0] in NON_NEGATIVE_ACTIVATIONS
                                    or (act[0] == "Clip" and act[1][0] >= 0.0))
    return False


def _fold(pool, module, block) -> bool:
    pad = getattr(pool.operands[0], "owner", None)
    if not _is(pad, "Pad") or len(list(pad.results[0].uses)) != 1:
        return False
    if len(pool.results) > 1 and list(pool.results[1].uses):
        return False
    if (onnx_d.get_attr(pool, "auto_pad", "NOTSET") != "NOTSET"
            or onnx_d.get_attr(pool, "ceil_mode", 0)):
        return False
    if not all(onnx_d.is_static(v.type) for v in (pad.operands[0], pad.results[0])):
        return False
    pairs = pad_pairs(pad, module)
    if pairs is None or not never_negative(pad.operands[0]):
        return False
    ks = onnx_d.get_attr(pool, "kernel_shape", None)
    r = len(pairs[0])
    if ks is None or len(ks) != r:
        return False
    dil = onnx_d.get_attr(pool, "dilations", None) or [1] * r
    new = merged_pads(pool, pairs)
    extent = [(k - 1) * d + 1 for k, d in zip(ks, dil, strict=True)]
    if any(new[i] >= extent[i] or new[r + i] >= extent[i] for i in range(r)):
        return False
    absorb_pad(pool, pad, new, block)
    return True


def fold_pool_pad(module) -> int:
    """Fold every Pad that qualifies into its MaxPool; returns how many."""
    block = main_func(module).body.block
    return sum(_fold(op, module, block) for op in list(block.ops) if _is(op, "MaxPool"))


@dataclass(frozen=True)
class FoldPoolPadPass(ModulePass):
    """`fold-pool-pad`: a zero Pad of a never-negative tensor into the MaxPool after it."""

    name = "fold-pool-pad"

    def apply(self, ctx, op) -> None:
        fold_pool_pad(op)
