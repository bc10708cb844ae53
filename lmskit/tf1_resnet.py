"""The TFLMS paper's ResNet-50 graph, TF1 style, captured as lmskit captures a Keras step.

keras.applications.ResNet50's layout (v1: the stride on the first 1x1 convolution of a block,
convolutions with biases, BatchNorm epsilon 1.001e-5) built as TensorFlow 1 built it: every
BatchNorm one FusedBatchNormV3 kernel (tf.keras's BatchNormalization was fused on 4-D inputs in
TF 1.x; Keras 3's is a chain of elementwise ops) with its moving averages updated as
tf.compat.v1's assign_moving_average does, and MomentumOptimizer's one ResourceApplyMomentum
per variable (lr 0.1, momentum 0.9) instead of Keras 3's SGD arithmetic. Loss: sparse softmax
cross-entropy on the logits, averaged over the batch.

`capture_resnet50(scoping="minimize")` is the headline setting of benchmarks/lmskit_bench.py
(224x224x3, fp32, 1000 classes). `blocks`, `width` and `image` shrink it for tests.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import tensorflow as tf

from .graph import Graph
from .tfcapture import capture_step

BLOCKS_50 = (3, 4, 6, 3)
BN_EPSILON = 1.001e-5
BN_MOMENTUM = 0.99          # tf.keras BatchNormalization's default
LEARNING_RATE, MOMENTUM = 0.1, 0.9


class _Params:
    """Variables of the model (weights, BatchNorm statistics) and the Momentum accumulators."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.trainable: list[tf.Variable] = []
        self.moving: list[tf.Variable] = []

    def weight(self, name, shape, fan_in):
        v = tf.Variable(self.rng.normal(0, (2.0 / fan_in) ** 0.5, shape).astype("float32"),
                        name=name)
        self.trainable.append(v)
        return v

    def const(self, name, shape, value, trainable=True):
        v = tf.Variable(np.full(shape, value, "float32"), name=name, trainable=trainable)
        (self.trainable if trainable else self.moving).append(v)
        return v


def _conv(p: _Params, name, cin, cout, k):
    return (p.weight(f"{name}/kernel", (k, k, cin, cout), k * k * cin),
            p.const(f"{name}/bias", (cout,), 0.0))


def _bn(p: _Params, name, c):
    return (p.const(f"{name}/gamma", (c,), 1.0), p.const(f"{name}/beta", (c,), 0.0),
            p.const(f"{name}/moving_mean", (c,), 0.0, False),
            p.const(f"{name}/moving_variance", (c,), 1.0, False))


def build_resnet50(blocks=BLOCKS_50, width: int = 64, classes: int = 1000, seed: int = 0):
    """(forward(x, training) -> logits, params). Variables are made here, outside any trace."""
    p = _Params(seed)
    stem = (_conv(p, "conv1_conv", 3, width, 7), _bn(p, "conv1_bn", width))
    stages, cin = [], width
    for s, n in enumerate(blocks):
        f = width * 2 ** s
        units = []
        for b in range(n):
            pre = f"conv{s + 2}_block{b + 1}"
            unit = {"1": (_conv(p, f"{pre}_1_conv", cin, f, 1), _bn(p, f"{pre}_1_bn", f)),
                    "2": (_conv(p, f"{pre}_2_conv", f, f, 3), _bn(p, f"{pre}_2_bn", f)),
                    "3": (_conv(p, f"{pre}_3_conv", f, 4 * f, 1), _bn(p, f"{pre}_3_bn", 4 * f))}
            if b == 0:
                unit["0"] = (_conv(p, f"{pre}_0_conv", cin, 4 * f, 1),
                             _bn(p, f"{pre}_0_bn", 4 * f))
            unit["stride"] = 2 if (b == 0 and s > 0) else 1
            units.append(unit)
            cin = 4 * f
        stages.append(units)
    fc = (p.weight("predictions/kernel", (cin, classes), cin),
          p.const("predictions/bias", (classes,), 0.0))
    updates: list = []

    def conv_bn(x, layer, stride=1, padding="SAME", relu=True):
        (kernel, bias), (gamma, beta, mean, var) = layer
        with tf.name_scope(kernel.name.split("/")[0]):
            x = tf.nn.bias_add(tf.nn.conv2d(x, kernel, stride, padding), bias)
        with tf.name_scope(gamma.name.split("/")[0]):
            # TF 1's fused kernel (FusedBatchNormV3), then assign_moving_average's update.
            x, batch_mean, batch_var = tf.compat.v1.nn.fused_batch_norm(
                x, gamma, beta, epsilon=BN_EPSILON, is_training=True)
            for moving, value in ((mean, batch_mean), (var, batch_var)):
                updates.append(moving.assign_sub((moving - value) * (1.0 - BN_MOMENTUM)))
        return tf.nn.relu(x) if relu else x

    def forward(x):
        updates.clear()
        x = tf.pad(x, [[0, 0], [3, 3], [3, 3], [0, 0]])
        x = conv_bn(x, stem, 2, "VALID")
        x = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
        x = tf.nn.max_pool2d(x, 3, 2, "VALID")
        for units in stages:
            for u in units:
                shortcut = conv_bn(x, u["0"], u["stride"], relu=False) if "0" in u else x
                y = conv_bn(x, u["1"], u["stride"])
                y = conv_bn(y, u["2"])
                y = conv_bn(y, u["3"], relu=False)
                x = tf.nn.relu(y + shortcut)
        x = tf.reduce_mean(x, axis=[1, 2])
        return tf.matmul(x, fc[0]) + fc[1], list(updates)

    return forward, p


def resnet50_step(blocks=BLOCKS_50, width: int = 64, classes: int = 1000, seed: int = 0):
    """(step(x, y) -> loss as a tf.function, params, Momentum accumulators)."""
    forward, p = build_resnet50(blocks, width, classes, seed)
    accums = [tf.Variable(tf.zeros_like(v), trainable=False, name=f"Momentum/{i}")
              for i, v in enumerate(p.trainable)]

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            logits, moving_updates = forward(x)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=logits))
        grads = tape.gradient(loss, p.trainable)
        with tf.control_dependencies(moving_updates):   # minimize() under UPDATE_OPS deps
            for v, a, g in zip(p.trainable, accums, grads, strict=True):
                tf.raw_ops.ResourceApplyMomentum(var=v.handle, accum=a.handle,
                                                 lr=LEARNING_RATE, grad=g, momentum=MOMENTUM)
        return loss

    return step, p, accums


def capture_resnet50(image: int = 224, scoping: str = "minimize", blocks=BLOCKS_50,
                     width: int = 64, classes: int = 1000, seed: int = 0) -> Graph:
    """The TF1-style ResNet-50 training step (module docstring) as a Graph; image x image x 3
    fp32 inputs, int32 labels. scoping as in lmskit.capture ("minimize": the paper's usage)."""
    step, _, accums = resnet50_step(blocks, width, classes, seed)
    specs = [tf.TensorSpec([None, image, image, 3], tf.float32, "x"),
             tf.TensorSpec([None], tf.int32, "y")]
    return capture_step(step, specs, optimizer=SimpleNamespace(variables=accums),
                        scoping=scoping)
