"""Keras model builders: the networks the workbench trains, swaps and compiles.

Builds five functional Keras models, each deterministic given ``seed`` (same seed -> identical
weights, bit for bit):

* ``mlp``          Flatten -> Dense(relu) -> Dense(softmax) on 28x28x1 digits.
* ``lenet``        LeNet-5 style CNN on 28x28x1 digits (two conv/pool stages, three dense layers).
* ``small_resnet`` a few basic residual blocks (Conv-BN-ReLU, projection shortcuts) for 32x32x3
                   or 28x28x1; a few ten thousand weights, so its ONNX file stays far below 1 MB.
* ``resnet50``     ``keras.applications.ResNet50(weights=None)``: the TFLMS paper's ResNet-50.
* ``unet3d``       the 3D U-Net of the TFLMS / data-swapping papers (arXiv 1807.02037,
                   1812.07816) for BraTS: four modalities in, three sigmoid masks (WT, TC, ET) out.

Assumes: Keras 3 on the TensorFlow backend, channels-last tensors, no downloaded weights ever.
Every layer gets an explicit name and every initializer an explicit seed, so two builds in one
process give the same weights *and* the same layer names (ONNX exports are then byte-stable).
Side effect: each builder calls ``keras.utils.set_random_seed(seed)``, which also reseeds Python's
``random``, NumPy's global generator and TensorFlow's (our own data generators never use those).
Batch-norm layers get seeded, non-trivial moving statistics: with the default 0/1 statistics an
inference graph that silently dropped a BatchNormalization would still pass numerical checks.
"""

from __future__ import annotations

import os

# TensorFlow prints pages of start-up logs; keep them out of notebooks and test output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
from keras import layers  # noqa: E402

__all__ = ["mlp", "lenet", "small_resnet", "resnet50", "unet3d", "keras_model", "MODEL_NAMES"]


# --------------------------------------------------------------------------- validation helpers


def _positive_int(name: str, value) -> int:
    # bool is an int subclass; unet3d(side=True) is a bug, not a 1-voxel cube.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return value


def _shape(name: str, value, rank: int) -> tuple[int, ...]:
    try:
        dims = tuple(value)
    except TypeError:
        raise ValueError(
            f"{name} must be a tuple of {rank} positive integers, got {value!r}") from None
    if len(dims) != rank:
        raise ValueError(f"{name} must have {rank} entries, got {value!r}")
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d <= 0:
            raise ValueError(f"{name} must be a tuple of {rank} positive integers, got {value!r}")
    return dims


class _Seeds:
    """Hands out one fresh integer seed per initializer, derived from the model seed."""

    def __init__(self, seed: int):
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        keras.utils.set_random_seed(seed)  # also covers layers we cannot give initializers
        self._next = seed * 1000

    def _take(self) -> int:
        self._next += 1
        return self._next

    def glorot(self):
        return keras.initializers.GlorotUniform(seed=self._take())

    def he(self):
        return keras.initializers.HeNormal(seed=self._take())

    def bias(self):
        # Small non-zero biases: zero biases are folded away by tf2onnx and never get tested.
        return keras.initializers.RandomUniform(-0.05, 0.05, seed=self._take())

    def batch_norm(self, name: str, **kw) -> layers.BatchNormalization:
        return layers.BatchNormalization(
            name=name,
            gamma_initializer=keras.initializers.RandomUniform(0.8, 1.2, seed=self._take()),
            beta_initializer=keras.initializers.RandomUniform(-0.1, 0.1, seed=self._take()),
            moving_mean_initializer=keras.initializers.RandomUniform(-0.1, 0.1, seed=self._take()),
            moving_variance_initializer=keras.initializers.RandomUniform(0.8, 1.2,
                                                                         seed=self._take()),
            **kw,
        )


# --------------------------------------------------------------------------- digit classifiers


def mlp(hidden: int = 128, classes: int = 10, seed: int = 0) -> keras.Model:
    """Two-layer perceptron on 28x28x1 digits: Flatten -> Dense(hidden, relu) -> Dense(softmax)."""
    hidden = _positive_int("hidden", hidden)
    classes = _positive_int("classes", classes)
    s = _Seeds(seed)
    x = inp = keras.Input((28, 28, 1), name="image")
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(hidden, "relu", kernel_initializer=s.glorot(), bias_initializer=s.bias(),
                     name="hidden")(x)
    x = layers.Dense(classes, "softmax", kernel_initializer=s.glorot(), bias_initializer=s.bias(),
                     name="logits")(x)
    return keras.Model(inp, x, name="mlp")


def lenet(classes: int = 10, seed: int = 0) -> keras.Model:
    """LeNet-5 style CNN on 28x28x1: conv5x5(6)-pool-conv5x5(16)-pool-dense(120)-dense(84)-out.

    The first convolution is padded ("same") as in the usual 28x28 MNIST adaptation of LeNet-5,
    whose original input was 32x32.
    """
    classes = _positive_int("classes", classes)
    s = _Seeds(seed)
    x = inp = keras.Input((28, 28, 1), name="image")
    x = layers.Conv2D(6, 5, padding="same", activation="relu", kernel_initializer=s.he(),
                      bias_initializer=s.bias(), name="conv1")(x)
    x = layers.MaxPooling2D(2, name="pool1")(x)
    x = layers.Conv2D(16, 5, activation="relu", kernel_initializer=s.he(),
                      bias_initializer=s.bias(), name="conv2")(x)
    x = layers.MaxPooling2D(2, name="pool2")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(120, "relu", kernel_initializer=s.he(), bias_initializer=s.bias(),
                     name="fc1")(x)
    x = layers.Dense(84, "relu", kernel_initializer=s.he(), bias_initializer=s.bias(),
                     name="fc2")(x)
    x = layers.Dense(classes, "softmax", kernel_initializer=s.glorot(), bias_initializer=s.bias(),
                     name="logits")(x)
    return keras.Model(inp, x, name="lenet")


def small_resnet(input_shape=(32, 32, 3), classes: int = 10, filters=(8, 16, 32),
                 blocks_per_stage: int = 1, seed: int = 0) -> keras.Model:
    """A small ResNet: stem conv, one stage per entry of ``filters``, GAP, softmax.

    Each stage has ``blocks_per_stage`` basic blocks (conv3x3-BN-ReLU-conv3x3-BN + shortcut,
    ReLU). Every stage after the first halves the resolution with a stride-2 first conv and a
    1x1 stride-2 projection on the shortcut (ResNet "option B").
    """
    h, w, c = _shape("input_shape", input_shape, 3)
    classes = _positive_int("classes", classes)
    blocks_per_stage = _positive_int("blocks_per_stage", blocks_per_stage)
    filters = tuple(_positive_int("filters entry", f) for f in _as_tuple("filters", filters))
    if not filters:
        raise ValueError("filters must name at least one stage, got ()")
    halvings = len(filters) - 1
    if min(h, w) < 2 ** halvings:
        raise ValueError(f"input_shape {tuple(input_shape)} is too small for {len(filters)} "
                         f"stages: each stage after the first halves it ({halvings} halvings)")
    s = _Seeds(seed)

    def conv(x, f, k, stride, name):
        return layers.Conv2D(f, k, strides=stride, padding="same", use_bias=False,
                             kernel_initializer=s.he(), name=name)(x)

    x = inp = keras.Input((h, w, c), name="image")
    x = conv(x, filters[0], 3, 1, "stem_conv")
    x = s.batch_norm("stem_bn")(x)
    x = layers.ReLU(name="stem_relu")(x)
    for i, f in enumerate(filters):
        for b in range(blocks_per_stage):
            p = f"stage{i + 1}_block{b + 1}"
            stride = 2 if (i > 0 and b == 0) else 1
            shortcut = x
            y = conv(x, f, 3, stride, p + "_conv1")
            y = s.batch_norm(p + "_bn1")(y)
            y = layers.ReLU(name=p + "_relu1")(y)
            y = conv(y, f, 3, 1, p + "_conv2")
            y = s.batch_norm(p + "_bn2")(y)
            if stride != 1 or shortcut.shape[-1] != f:
                shortcut = conv(shortcut, f, 1, stride, p + "_proj")
                shortcut = s.batch_norm(p + "_proj_bn")(shortcut)
            x = layers.Add(name=p + "_add")([shortcut, y])
            x = layers.ReLU(name=p + "_out")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    x = layers.Dense(classes, "softmax", kernel_initializer=s.glorot(), bias_initializer=s.bias(),
                     name="logits")(x)
    return keras.Model(inp, x, name="small_resnet")


def _as_tuple(name, value) -> tuple:
    try:
        return tuple(value)
    except TypeError:
        raise ValueError(f"{name} must be a sequence, got {value!r}") from None


def resnet50(input_shape=(224, 224, 3), classes: int = 1000, seed: int = 0) -> keras.Model:
    """ResNet-50 from ``keras.applications`` with random (seeded) weights; never downloads."""
    dims = _shape("input_shape", input_shape, 3)
    classes = _positive_int("classes", classes)
    if min(dims[:2]) < 32:
        raise ValueError(f"input_shape {dims} is too small: ResNet-50 needs at least 32x32 pixels")
    _Seeds(seed)  # keras.applications takes no initializers; the global seed makes it repeatable
    return keras.applications.ResNet50(weights=None, input_shape=dims, classes=classes)


# --------------------------------------------------------------------------- 3D U-Net


UNET3D_DEFAULTS = dict(side=192, in_channels=4, classes=3, base_filters=16, depth=4,
                       batch_norm=True, upsampling="transpose", seed=0)


def unet3d(side: int = 192, in_channels: int = 4, classes: int = 3, base_filters: int = 16,
           depth: int = 4, batch_norm: bool = True, upsampling: str = "transpose",
           seed: int = 0) -> keras.Model:
    """3D U-Net for BraTS-like volumes: ``side^3 x in_channels`` -> ``side^3 x classes`` sigmoid.

    Shape (after Cicek et al., arXiv 1606.06650, as used for BraTS in the TFLMS papers):
    ``depth`` down-sampling steps, so ``depth + 1`` resolution levels. Level ``l`` runs two
    3x3x3 convolutions with ``base_filters * 2**l`` and ``base_filters * 2**(l+1)`` filters
    (Conv3D [-BN] -ReLU each); MaxPool3D(2) goes down. Going up, each level doubles the
    resolution (``upsampling="transpose"``: Conv3DTranspose(2, stride 2); ``"repeat"``:
    UpSampling3D), concatenates the encoder's output at that level (the long skip connections
    that TFLMS's ``swap_branches`` targets) and runs two convolutions. A 1x1x1 convolution with
    sigmoid gives the three overlapping BraTS masks: whole tumour, tumour core, enhancing tumour.

    Defaults: 192^3 input (the full BraTS crop of arXiv 1812.07816, trainable only with
    swapping), four modalities, three masks, base_filters=16 and depth=4 (192 -> 12 at the
    bottom, 256 -> 512 filters there, ~15.5 M weights), batch norm on. ``base_filters=32,
    depth=3`` gives the shape of the Keras 3D U-Net (3DUnetCNN) those experiments started from.
    """
    side = _positive_int("side", side)
    in_channels = _positive_int("in_channels", in_channels)
    classes = _positive_int("classes", classes)
    base_filters = _positive_int("base_filters", base_filters)
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValueError(f"depth must be a non-negative integer, got {depth!r}")
    if not isinstance(batch_norm, bool):
        raise ValueError(f"batch_norm must be True or False, got {batch_norm!r}")
    if upsampling not in ("transpose", "repeat"):
        raise ValueError(f"upsampling must be 'transpose' or 'repeat', got {upsampling!r}")
    if side % (2 ** depth):
        raise ValueError(f"side {side} cannot be halved {depth} times (depth={depth}): "
                         f"side must be a multiple of {2 ** depth}")
    s = _Seeds(seed)

    def conv_block(x, f, name):
        x = layers.Conv3D(f, 3, padding="same", use_bias=not batch_norm,
                          kernel_initializer=s.he(),
                          bias_initializer="zeros" if batch_norm else s.bias(), name=name)(x)
        if batch_norm:
            x = s.batch_norm(name + "_bn")(x)
        return layers.ReLU(name=name + "_relu")(x)

    x = inp = keras.Input((side, side, side, in_channels), name="volume")
    skips = []
    for level in range(depth + 1):
        f = base_filters * 2 ** level
        x = conv_block(x, f, f"enc{level}_conv1")
        x = conv_block(x, 2 * f, f"enc{level}_conv2")
        if level < depth:
            skips.append(x)
            x = layers.MaxPooling3D(2, name=f"enc{level}_pool")(x)
    for level in reversed(range(depth)):
        f = base_filters * 2 ** (level + 1)
        if upsampling == "transpose":
            x = layers.Conv3DTranspose(f, 2, strides=2, kernel_initializer=s.he(),
                                       bias_initializer=s.bias(), name=f"dec{level}_up")(x)
        else:
            x = layers.UpSampling3D(2, name=f"dec{level}_up")(x)
        x = layers.Concatenate(name=f"dec{level}_concat")([skips[level], x])
        x = conv_block(x, f, f"dec{level}_conv1")
        x = conv_block(x, f, f"dec{level}_conv2")
    x = layers.Conv3D(classes, 1, activation="sigmoid", kernel_initializer=s.glorot(),
                      bias_initializer=s.bias(), name="masks")(x)
    return keras.Model(inp, x, name="unet3d")


# --------------------------------------------------------------------------- dispatch


_BUILDERS = {"mlp": mlp, "lenet": lenet, "small_resnet": small_resnet, "resnet50": resnet50,
             "unet3d": unet3d}
MODEL_NAMES = tuple(_BUILDERS)


def keras_model(name: str, **params) -> keras.Model:
    """Build a model by name: ``keras_model("unet3d", side=64, depth=3)``."""
    import inspect

    if name not in _BUILDERS:
        raise ValueError(f"unknown model {name!r}; valid names: {', '.join(MODEL_NAMES)}")
    builder = _BUILDERS[name]
    allowed = list(inspect.signature(builder).parameters)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)} for model {name!r}; "
                         f"valid parameters: {', '.join(allowed)}")
    return builder(**params)
