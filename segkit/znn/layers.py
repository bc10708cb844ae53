"""A Keras model read as a chain of ZNN layers: convolutions, max pooling, activations.

ZNN's networks are graphs of nodes (feature maps) joined by edges (convolutions, max filters);
the Keras models it takes here are chains of Conv3D (any kernel shape, stride 1, 'valid'),
MaxPooling3D ('valid', any pool size and stride: stride 1 is ZNN's max filter) and elementwise
activations (Activation, ReLU, or a Conv3D's own activation), channels last.  Anything else is
refused with an error naming the layer and the attribute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ACTIVATIONS = ("linear", "relu", "sigmoid", "tanh")


def activate(name, z):
    if name == "linear":
        return z
    if name == "relu":
        return np.maximum(z, 0, out=z)
    if name == "sigmoid":
        with np.errstate(over="ignore"):
            return np.divide(1.0, 1.0 + np.exp(-z), out=z)
    if name == "tanh":
        return np.tanh(z, out=z)
    raise ValueError(f"unknown activation {name!r}")


def derivative_times(name, y, g):
    """g * f'(z), written with the output y = f(z) (all four have derivatives in terms of y)."""
    if name == "linear":
        return g
    if name == "relu":
        return g * (y > 0)
    if name == "sigmoid":
        return g * y * (1.0 - y)
    if name == "tanh":
        return g * (1.0 - y * y)
    raise ValueError(f"unknown activation {name!r}")


@dataclass
class Conv:
    name: str
    kernel_size: tuple
    cin: int
    cout: int
    activation: str
    kernel_var: object
    bias_var: object | None
    method: str = "direct"


@dataclass
class Pool:
    name: str
    pool: tuple
    strides: tuple


@dataclass
class Act:
    name: str
    activation: str


def _activation_name(layer, fn) -> str:
    name = getattr(fn, "__name__", str(fn))
    if name not in ACTIVATIONS:
        raise ValueError(f"layer {layer.name!r}: activation {name!r} is not supported by "
                         f"segkit.znn (use one of {', '.join(ACTIVATIONS)})")
    return name


def _check_chain(model) -> list:
    layers = [layer for layer in model.layers if type(layer).__name__ != "InputLayer"]
    if not layers:
        raise ValueError(f"model {model.name!r} has no layers")
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise ValueError(f"model {model.name!r}: segkit.znn takes one input and one output, got "
                         f"{len(model.inputs)} inputs and {len(model.outputs)} outputs")
    return layers


def read_model(model) -> tuple[list, tuple]:
    """The layers of a Keras model as Conv / Pool / Act, and its input shape (D, H, W, C)."""
    layers = _check_chain(model)
    shape = tuple(model.inputs[0].shape[1:])
    if len(shape) != 4:
        raise ValueError(f"model {model.name!r}: input shape {shape} is not (depth, height, "
                         "width, channels)")
    channels = shape[3]
    out = []
    for layer in layers:
        kind = type(layer).__name__
        fmt = getattr(layer, "data_format", "channels_last")
        if fmt != "channels_last":
            raise ValueError(f"layer {layer.name!r}: data_format {fmt!r}; segkit.znn needs "
                             "channels_last")
        if kind == "Conv3D":
            for attr, ok in (("strides", (1, 1, 1)), ("dilation_rate", (1, 1, 1))):
                if tuple(getattr(layer, attr)) != ok:
                    raise ValueError(f"layer {layer.name!r}: {attr}={getattr(layer, attr)} is "
                                     f"not supported (only {ok})")
            if layer.padding != "valid":
                raise ValueError(f"layer {layer.name!r}: padding={layer.padding!r}; segkit.znn "
                                 "convolves with 'valid' padding only (ZNN's convention)")
            if getattr(layer, "groups", 1) != 1:
                raise ValueError(f"layer {layer.name!r}: groups={layer.groups} not supported")
            out.append(Conv(layer.name, tuple(layer.kernel_size), channels, layer.filters,
                            _activation_name(layer, layer.activation), layer.kernel,
                            layer.bias if layer.use_bias else None))
            channels = layer.filters
        elif kind == "MaxPooling3D":
            if layer.padding != "valid":
                raise ValueError(f"layer {layer.name!r}: padding={layer.padding!r}; only 'valid'")
            out.append(Pool(layer.name, tuple(layer.pool_size), tuple(layer.strides)))
        elif kind == "Activation":
            out.append(Act(layer.name, _activation_name(layer, layer.activation)))
        elif kind == "ReLU":
            if (layer.max_value is not None or float(layer.negative_slope) != 0.0
                    or float(layer.threshold) != 0.0):
                raise ValueError(f"layer {layer.name!r}: ReLU with max_value, negative_slope or "
                                 "threshold is not supported")
            out.append(Act(layer.name, "relu"))
        else:
            raise ValueError(f"layer {layer.name!r}: {kind} is not supported by segkit.znn "
                             "(Conv3D, MaxPooling3D, Activation, ReLU)")
    return out, shape


def output_size(spec, n) -> tuple:
    """Spatial size after one layer, or a clear error when the volume is too small."""
    if isinstance(spec, Conv):
        out = tuple(s - k + 1 for s, k in zip(n, spec.kernel_size, strict=True))
    elif isinstance(spec, Pool):
        out = tuple((s - p) // st + 1 if s >= p else 0
                    for s, p, st in zip(n, spec.pool, spec.strides, strict=True))
    else:
        out = tuple(n)
    if min(out) < 1:
        raise ValueError(f"layer {spec.name!r}: input of spatial size {tuple(n)} is too small "
                         f"(output would be {out})")
    return out
