"""Shared fixtures: small instances of the mlsys_datasets Keras models, captured once.

The CPU is split into two logical devices (lmskit.configure_devices) before TensorFlow starts.
"""

import numpy as np
import pytest

import lmskit

lmskit.configure_devices()   # before any TensorFlow op: /CPU:1 stands in for the host


def _models():
    """name -> (model, x shape, y shape, loss); small instances of the workbench's models."""
    import keras
    import mlsys_datasets as zoo

    sce = keras.losses.SparseCategoricalCrossentropy()
    return {
        "mlp": (zoo.mlp(hidden=16), (28, 28, 1), (), sce),
        "lenet": (zoo.lenet(), (28, 28, 1), (), sce),
        "small_resnet": (zoo.small_resnet((8, 8, 3), filters=(4, 8)), (8, 8, 3), (), sce),
        # Two levels, so the skip connections that swap_branches targets are there.
        "unet3d": (zoo.unet3d(side=8, in_channels=2, classes=2, base_filters=2, depth=2),
                   (8, 8, 8, 2), (8, 8, 8, 2), keras.losses.BinaryCrossentropy()),
    }


@pytest.fixture(scope="session")
def captured():
    """name -> (graph, model, (x, y)) for each model, captured once per session."""
    import keras
    import tensorflow as tf

    out = {}
    rng = np.random.default_rng(0)
    for name, (model, xs, ys, loss) in _models().items():
        y_dtype = tf.float32 if ys else tf.int32
        graph = lmskit.capture(model, loss, keras.optimizers.Adam(0.01),
                               (tf.TensorSpec((None, *xs)), tf.TensorSpec((None, *ys), y_dtype)))
        x = rng.normal(size=(5, *xs)).astype("float32")
        if ys:
            y = (rng.random(size=(5, *ys)) > 0.5).astype("float32")
        else:
            y = rng.integers(0, 4, size=5).astype("int32")
        out[name] = (graph, model, (x, y))
    return out
