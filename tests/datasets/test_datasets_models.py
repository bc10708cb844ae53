"""Keras model builders: shapes, determinism, hand-counted sizes, and clear errors."""

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from mlsys_datasets import models as M  # noqa: E402


def _same_weights(a, b):
    wa, wb = a.get_weights(), b.get_weights()
    return len(wa) == len(wb) and all(np.array_equal(x, y) for x, y in zip(wa, wb, strict=True))


@pytest.mark.parametrize(
    "name, params, in_shape, out_shape",
    [
        ("mlp", {}, (28, 28, 1), (10,)),
        ("mlp", {"hidden": 7, "classes": 3}, (28, 28, 1), (3,)),
        ("lenet", {}, (28, 28, 1), (10,)),
        ("small_resnet", {}, (32, 32, 3), (10,)),
        ("small_resnet", {"input_shape": (28, 28, 1), "classes": 5, "filters": (4, 8),
                          "blocks_per_stage": 2}, (28, 28, 1), (5,)),
    ],
)
def test_classifier_shapes_and_softmax(name, params, in_shape, out_shape):
    model = M.keras_model(name, **params)
    assert model.input_shape == (None, *in_shape)
    assert model.output_shape == (None, *out_shape)
    x = np.random.default_rng(0).random((3, *in_shape), dtype=np.float32)
    y = model.predict(x, verbose=0)
    assert y.shape == (3, *out_shape) and y.dtype == np.float32
    np.testing.assert_allclose(y.sum(-1), 1.0, rtol=1e-5)


def test_mlp_param_count_by_hand():
    assert M.mlp(hidden=128).count_params() == (784 * 128 + 128) + (128 * 10 + 10)


def test_lenet_param_count_by_hand():
    # conv5x5 1->6 (same), pool, conv5x5 6->16 (valid: 14->10), pool -> 5x5x16, 120, 84, 10.
    expected = ((25 * 6 + 6) + (25 * 6 * 16 + 16) + (400 * 120 + 120) + (120 * 84 + 84)
                + (84 * 10 + 10))
    assert M.lenet().count_params() == expected


def test_small_resnet_has_residual_blocks_with_batchnorm():
    model = M.small_resnet()
    kinds = [type(layer).__name__ for layer in model.layers]
    assert kinds.count("Add") == 3
    assert kinds.count("BatchNormalization") >= 7
    assert model.count_params() < 250_000 // 4  # float32 weights stay well under 1 MB


def _unet_params(in_ch, classes, base, depth, bn, transpose):
    """Weights of the documented U-Net shape, counted independently of the builder."""
    def conv(cin, cout, k=3):
        return k**3 * cin * cout + (2 * cout * 2 if bn else cout)  # BN: gamma, beta (+2 stats)
    total, cin, skips = 0, in_ch, []
    for level in range(depth + 1):
        f = base * 2**level
        total += conv(cin, f) + conv(f, 2 * f)
        cin = 2 * f
        skips.append(cin)
    for level in reversed(range(depth)):
        f = base * 2 ** (level + 1)
        if transpose:
            total += 8 * cin * f + f
            cin = f
        total += conv(skips[level] + cin, f) + conv(f, f)
        cin = f
    return total + cin * classes + classes


@pytest.mark.parametrize("bn, up", [(True, "transpose"), (False, "repeat")])
def test_unet3d_small_shapes_and_params(bn, up):
    model = M.unet3d(side=16, base_filters=4, depth=2, batch_norm=bn, upsampling=up)
    assert model.input_shape == (None, 16, 16, 16, 4)
    assert model.output_shape == (None, 16, 16, 16, 3)
    assert model.count_params() == _unet_params(4, 3, 4, 2, bn, up == "transpose")
    kinds = {type(layer).__name__ for layer in model.layers}
    assert {"Conv3D", "MaxPooling3D", "Concatenate"} <= kinds
    assert ("Conv3DTranspose" if up == "transpose" else "UpSampling3D") in kinds
    assert ("BatchNormalization" in kinds) == bn
    y = model.predict(np.random.default_rng(1).random((1, 16, 16, 16, 4), dtype=np.float32),
                      verbose=0)
    assert y.shape == (1, 16, 16, 16, 3) and 0 <= y.min() and y.max() <= 1


def test_unet3d_defaults_are_the_papers_192_cube():
    model = M.unet3d()
    assert model.input_shape == (None, 192, 192, 192, 4)
    assert model.output_shape == (None, 192, 192, 192, 3)
    assert model.count_params() == _unet_params(4, 3, 16, 4, True, True)
    assert sum(type(layer).__name__ == "MaxPooling3D" for layer in model.layers) == 4


def test_resnet50_builds_offline():
    model = M.resnet50()
    assert model.input_shape == (None, 224, 224, 3)
    assert model.output_shape == (None, 1000)
    assert model.count_params() == 25_636_712  # the published ResNet-50 size


@pytest.mark.parametrize("name, params", [
    ("mlp", {}), ("lenet", {}), ("small_resnet", {}),
    ("unet3d", {"side": 8, "base_filters": 2, "depth": 1}),
])
def test_same_seed_same_weights_other_seed_other_weights(name, params):
    a = M.keras_model(name, seed=5, **params)
    b = M.keras_model(name, seed=5, **params)
    c = M.keras_model(name, seed=6, **params)
    assert _same_weights(a, b)
    assert not _same_weights(a, c)
    # Building other models in between must not change what a seed gives.
    M.lenet(seed=99)
    assert _same_weights(a, M.keras_model(name, seed=5, **params))


def test_unet3d_side_not_divisible():
    with pytest.raises(ValueError) as e:
        M.unet3d(side=100, depth=4)
    assert str(e.value) == ("side 100 cannot be halved 4 times (depth=4): "
                            "side must be a multiple of 16")


@pytest.mark.parametrize("call, words", [
    (lambda: M.unet3d(side=0), ["side", "positive", "0"]),
    (lambda: M.unet3d(side=-16), ["side", "-16"]),
    (lambda: M.unet3d(side=32.0), ["side", "32.0"]),
    (lambda: M.unet3d(base_filters=0, side=16), ["base_filters"]),
    (lambda: M.unet3d(depth=-1), ["depth"]),
    (lambda: M.unet3d(side=16, depth=2, upsampling="bilinear"), ["upsampling", "bilinear"]),
    (lambda: M.mlp(hidden=0), ["hidden"]),
    (lambda: M.lenet(classes=-1), ["classes"]),
    (lambda: M.mlp(seed=-3), ["seed"]),
    (lambda: M.small_resnet(filters=()), ["filters"]),
    (lambda: M.small_resnet(input_shape=(2, 2, 3), filters=(4, 8, 16)), ["too small", "halv"]),
    (lambda: M.small_resnet(input_shape=(32, 32)), ["input_shape", "3"]),
    (lambda: M.resnet50(input_shape=(16, 16, 3)), ["32x32"]),
    (lambda: M.keras_model("vgg16"), ["vgg16", "mlp", "lenet", "small_resnet", "resnet50",
                                      "unet3d"]),
    (lambda: M.keras_model("unet3d", sidee=64), ["sidee", "side", "base_filters"]),
])
def test_bad_input_names_the_culprit(call, words):
    with pytest.raises(ValueError) as e:
        call()
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_keras_model_matches_direct_call():
    assert _same_weights(M.keras_model("lenet", seed=2), M.lenet(seed=2))
    assert M.MODEL_NAMES == ("mlp", "lenet", "small_resnet", "resnet50", "unet3d")
