"""segkit.znn's gradients against TensorFlow's GradientTape on the same Keras model."""

import numpy as np
import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from segkit import znn  # noqa: E402

TOL = 1e-4


def tf_loss_and_grads(model, x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    return float(loss), [g.numpy() for g in tape.gradient(loss, model.trainable_weights)]


def relative_error(ours, ref):
    """Largest |ours - ref| over the largest |ref|, per weight tensor, then the worst.  A
    tensor whose gradient is exactly zero (every ReLU dead) is compared with a floor of 1e-5:
    FFTs of float32 leave roundoff of ~1e-10 where TensorFlow has exact zeros."""
    return max(float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-5))
               for a, b in zip(ours, ref, strict=True))


@st.composite
def nets(draw):
    """A small chain: 1-3 Conv3D layers with any kernel up to 3 per axis (1x3x3, 2x3x3, ...),
    an optional max filter / max pool, activations of all four kinds."""
    layers, size = [], [draw(st.integers(4, 7)), draw(st.integers(5, 9)), draw(st.integers(5, 9))]
    channels = draw(st.integers(1, 3))
    spatial = list(size)
    for _ in range(draw(st.integers(1, 3))):
        kernel = tuple(draw(st.integers(1, min(3, s))) for s in spatial)
        filters = draw(st.integers(1, 3))
        act = draw(st.sampled_from(["relu", "tanh", "sigmoid", "linear"]))
        layers.append(("conv", filters, kernel, act, draw(st.booleans())))
        spatial = [s - k + 1 for s, k in zip(spatial, kernel, strict=True)]
        if min(spatial) >= 2 and draw(st.booleans()):
            stride = draw(st.sampled_from([1, 2]))
            layers.append(("pool", stride))
            spatial = [spatial[0]] + [(s - 2) // stride + 1 for s in spatial[1:]]
        if draw(st.booleans()):
            layers.append(("act", draw(st.sampled_from(["tanh", "sigmoid"]))))
    batch = draw(st.integers(1, 2))
    seed = draw(st.integers(0, 2**16))
    return layers, (batch, *size, channels), seed


def keras_layers(specs):
    """Keras layers from the plain specs the strategy draws (Keras itself stays out of it)."""
    out = []
    for spec in specs:
        if spec[0] == "conv":
            _, filters, kernel, act, bias = spec
            out.append(keras.layers.Conv3D(filters, kernel, activation=act, use_bias=bias))
        elif spec[0] == "pool":
            out.append(keras.layers.MaxPooling3D((1, 2, 2), strides=(1, spec[1], spec[1])))
        else:
            out.append(keras.layers.Activation(spec[1]))
    return out


def build(layers, shape, seed):
    keras.utils.set_random_seed(seed)
    if layers and isinstance(layers[0], tuple):
        layers = keras_layers(layers)
    model = keras.Sequential([keras.Input(shape[1:]), *layers])
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape).astype(np.float32)
    y = rng.normal(size=model(x).shape).astype(np.float32)
    return model, x, y


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nets(), st.sampled_from(["direct", "fft"]), st.sampled_from([1, 2]),
       st.sampled_from(["edge", "node"]))
def test_gradients_equal_tensorflows(net, method, threads, granularity):
    model, x, y = build(*net)
    ref_loss, ref = tf_loss_and_grads(model, x, y)
    loss, grads = znn.Network(model, method=method, granularity=granularity).gradients(
        x, y, threads=threads)
    assert [g.shape for g in grads] == [tuple(w.shape) for w in model.trainable_weights]
    assert loss == pytest.approx(ref_loss, rel=TOL)
    assert relative_error(grads, ref) < TOL


def test_vd2d3d_style_anisotropic_kernels_with_fft_and_direct():
    # The paper's mix: 1x3x3 (2D) filters, a 1x2x2 max filter, then 2x3x3 (3D) filters.
    layers = [keras.layers.Conv3D(4, (1, 3, 3), activation="relu"),
              keras.layers.MaxPooling3D((1, 2, 2), strides=1),
              keras.layers.Conv3D(4, (2, 3, 3), activation="relu"),
              keras.layers.Conv3D(2, (2, 3, 3), activation="tanh"),
              keras.layers.Conv3D(1, 1, activation="sigmoid")]
    model, x, y = build(layers, (2, 5, 14, 14, 1), seed=3)
    _, ref = tf_loss_and_grads(model, x, y)
    for method in ("direct", "fft"):
        for granularity in ("edge", "node"):
            grads = znn.Network(model, method=method, granularity=granularity).gradients(
                x, y, threads=2)[1]
            assert relative_error(grads, ref) < TOL, (method, granularity)


def test_large_kernel_fft_layer_matches():
    model, x, y = build([keras.layers.Conv3D(3, 5, activation="relu"),
                         keras.layers.Conv3D(2, 5)], (1, 12, 12, 12, 2), seed=5)
    net = znn.Network(model)  # auto picks FFT for 5x5x5 kernels with several channels
    assert [p[2] for p in net.plan((12, 12, 12))] == ["fft", "fft"]
    _, ref = tf_loss_and_grads(model, x, y)
    _, grads = net.gradients(x, y, threads=2)
    assert relative_error(grads, ref) < TOL


def test_forward_equals_keras():
    model, x, _ = build([keras.layers.Conv3D(3, (2, 3, 3), activation="relu"),
                         keras.layers.MaxPooling3D(2),
                         keras.layers.Conv3D(2, (1, 2, 2), activation="sigmoid")],
                        (2, 6, 10, 10, 2), seed=1)
    for method in ("direct", "fft"):
        out = znn.Network(model, method=method).forward(x, threads=2)
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-4, atol=1e-5)


def test_max_pool_ties_follow_tensorflows_rule():
    # TensorFlow's CPU MaxPool3DGrad gives the whole gradient to every input within 1e-5 of
    # the window's max: (0,1) and (0,2) tie exactly, (1,1) is 5e-6 below (a tie), (1,2) is 2e-5
    # below (not a tie).  A max filter after a ReLU layer makes such plateaus.
    image = np.array([[1.0, 3.0, 3.0, 2.0],
                      [0.0, 3.0 - 5e-6, 3.0 - 2e-5, 1.0]], np.float32).reshape(1, 1, 2, 4, 1)
    model = keras.Sequential([keras.Input((1, 2, 4, 1)),
                              keras.layers.Conv3D(1, 1, use_bias=False,
                                                  kernel_initializer="ones"),
                              keras.layers.MaxPooling3D((1, 2, 2), strides=1)])
    y = np.array([0.0, 10.0, 100.0], np.float32).reshape(1, 1, 1, 3, 1)
    _, ref = tf_loss_and_grads(model, image, y)
    _, grads = znn.Network(model, method="direct").gradients(image, y, threads=1)
    np.testing.assert_allclose(grads[0], ref[0], rtol=1e-5)
    # by hand: outputs are all 3; d loss / d out = 2 (out - y) / 3 = (2, -14/3, -194/3), and
    # the kernel gradient is sum over routed inputs of input x that: window 0 routes to (0,1),
    # (1,1); window 1 to (0,1), (0,2), (1,1); window 2 to (0,2)
    d = 2 * (3.0 - np.array([0.0, 10.0, 100.0])) / 3
    by_hand = (d[0] * (3 + 3 - 5e-6) + d[1] * (3 + 3 + 3 - 5e-6) + d[2] * 3)
    assert grads[0].ravel()[0] == pytest.approx(by_hand, rel=1e-5)
