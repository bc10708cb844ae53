"""The activation functions of LSTM, GRU and RNN (lowering/recurrent.py), as the ONNX spec
lists them, with their attributes.

Activations are the spec's list (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu,
ScaledTanh, HardSigmoid, Elu, Softsign, Softplus, names in any case); activation_alpha and
activation_beta are consumed in order by the functions that take them, as onnxruntime reads
the spec. Where the spec's default and onnxruntime's differ (ThresholdedRelu's alpha, Affine's
and ScaledTanh's, which no current ONNX op defines), the value must be given; a model that
leaves it out is refused rather than answered one way or the other. `clip` bounds the gates'
pre-activations; LSTM's h(C_t) takes the cell state unclipped, as in onnxruntime (whose
reading of the spec is the reference here; the ONNX reference implementation ignores clip).
"""

from __future__ import annotations

from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError, UnsupportedOpError
from compilerkit.lowering.builder import KernelBuilder
from compilerkit.lowering.elementwise import _sigmoid, _softplus
from compilerkit.onnx_passes.single_node import node_label

DEFAULT_ACTIVATIONS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"),
                       "RNN": ("Tanh",)}
# (takes alpha, takes beta) per activation, and the defaults both the spec (the ONNX op of
# that name) and onnxruntime use; None: must be given.
TAKES = {"relu": (0, 0), "tanh": (0, 0), "sigmoid": (0, 0), "softsign": (0, 0),
         "softplus": (0, 0), "affine": (1, 1), "leakyrelu": (1, 0), "thresholdedrelu": (1, 0),
         "scaledtanh": (1, 1), "hardsigmoid": (1, 1), "elu": (1, 0)}
DEFAULTS = {"leakyrelu": (0.01, None), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None)}


def fail(op, what, value, expected):
    raise ModelError(f"node {node_label(op)!r} ({onnx_d.op_type(op)}): {what} is {value}; "
                     f"expected {expected}")


def activations(op, kind: str, nd: int):
    """Per direction, the activation list [(lowercase name, alpha, beta)]."""
    n = len(DEFAULT_ACTIVATIONS[kind])
    names = onnx_d.get_attr(op, "activations", None)
    if names is None:
        names = list(DEFAULT_ACTIVATIONS[kind]) * nd
    names = [x.decode() if isinstance(x, bytes) else str(x) for x in names]
    if len(names) != n * nd:
        fail(op, "the number of activations", len(names),
              f"{n * nd} ({n} per direction, {nd} direction(s))")
    alphas = list(onnx_d.get_attr(op, "activation_alpha", None) or [])
    betas = list(onnx_d.get_attr(op, "activation_beta", None) or [])
    out = []
    for name in names:
        key = name.lower()
        if key not in TAKES:
            raise UnsupportedOpError(
                f"node {node_label(op)!r} ({kind}): activation {name!r} is not one of the "
                f"spec's: {', '.join(sorted(TAKES))}")
        takes_a, takes_b = TAKES[key]
        da, db = DEFAULTS.get(key, (None, None))
        a = alphas.pop(0) if takes_a and alphas else da
        bt = betas.pop(0) if takes_b and betas else db
        for attr, takes, v in (("activation_alpha", takes_a, a), ("activation_beta", takes_b,
                                                                   bt)):
            if takes and v is None:
                raise UnsupportedOpError(
                    f"node {node_label(op)!r} ({kind}): activation {name!r} without a value in "
                    f"{attr}: its default differs between the ONNX spec and onnxruntime, so "
                    f"give it explicitly")
        out.append((key, a, bt))
    return [out[d * n:(d + 1) * n] for d in range(nd)]


def apply_activation(b: KernelBuilder, x, act, clip):
    """act = (name, alpha, beta) applied to x, clipped to [-clip, clip] first when clip."""
    t = x.type
    if clip is not None:
        x = b.binary("min", b.binary("max", x, b.const(-clip, t)), b.const(clip, t))
    name, alpha, beta = act
    zero = b.const(0.0, t)
    if name == "relu":
        return b.binary("max", x, zero)
    if name == "tanh":
        return b.unary("tanh", x)
    if name == "sigmoid":
        return _sigmoid(b, x, None)
    if name == "softsign":
        return b.binary("div", x, b.add_(b.const(1.0, t), b.unary("abs", x)))
    if name == "softplus":
        return _softplus(b, x, None)
    a = b.const(alpha, t)
    if name == "affine":
        return b.add_(b.mul(a, x), b.const(beta, t))
    if name == "leakyrelu":
        return b.select(b.cmpf("olt", x, zero), b.mul(a, x), x)
    if name == "thresholdedrelu":  # x > alpha, as the ThresholdedRelu op and onnxruntime
        return b.select(b.cmpf("ogt", x, a), x, zero)
    if name == "scaledtanh":
        return b.mul(a, b.unary("tanh", b.mul(b.const(beta, t), x)))
    if name == "hardsigmoid":
        y = b.add_(b.mul(a, x), b.const(beta, t))
        return b.binary("min", b.binary("max", y, zero), b.const(1.0, t))
    if name == "elu":
        e = b.mul(a, b.binary("sub", b.unary("exp", x), b.const(1.0, t)))
        return b.select(b.cmpf("olt", x, zero), e, x)
    raise NotImplementedError(f"activation {name!r}")
