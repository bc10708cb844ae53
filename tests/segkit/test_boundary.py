"""segkit.boundary: the VD2D / VD2D3D / N4 nets after znn-release's networks/*.znn."""

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from segkit import boundary  # noqa: E402


def test_fields_of_view_are_the_papers():
    # Lee et al. 2015: VD2D 109x109x1, VD2D3D 85x85x5; N4 (Ciresan et al.) 95x95x1
    assert boundary.FOV == {"vd2d": (1, 109, 109), "vd2d3d": (5, 85, 85), "n4": (1, 95, 95)}


@pytest.mark.parametrize("name", ["vd2d", "vd2d3d", "n4"])
def test_one_field_of_view_of_input_gives_one_output_voxel(name):
    keras.utils.set_random_seed(0)
    model = boundary.BUILDERS[name](width=0.1, outputs=3)
    fz, fy, fx = model.field_of_view
    x = np.random.default_rng(0).random((1, fz, fy + 1, fx, 1), dtype=np.float32)
    assert model.inputs[0].shape[1] is None  # any number of sections
    out = model([x, x] if len(model.inputs) == 2 else x)
    assert out.shape == (1, 1, 2, 1, 3)


def test_published_widths_give_the_papers_parameter_counts():
    # hand count from VD2D.znn: sum of maps_in * maps_out * kernel volume, + biases
    convs = [(1, 24, 9), (24, 24, 9), (24, 24, 4), (24, 36, 9), (36, 36, 9), (36, 48, 9),
             (48, 48, 9), (48, 60, 9), (60, 60, 9), (60, 200, 9), (200, 1, 1)]
    expected = sum(a * b * k + b for a, b, k in convs)
    assert boundary.vd2d().count_params() == expected
    assert 220_000 <= expected <= 310_000
    assert 220_000 <= boundary.vd2d3d().count_params() <= 310_000


def test_vd2d3d_mixes_2d_and_3d_filters_and_takes_the_recursive_map():
    model = boundary.vd2d3d(width=0.25)
    assert [tuple(i.shape[1:]) for i in model.inputs] == [(None, None, None, 1)] * 2
    kernels = [layer.kernel_size for layer in model.layers
               if isinstance(layer, keras.layers.Conv3D)]
    assert kernels.count((2, 3, 3)) == 3 and kernels.count((1, 3, 3)) >= 6
    assert len(boundary.vd2d3d(width=0.25, recursive=False).inputs) == 1
    with pytest.raises(ValueError, match="sees 5 sections"):
        boundary.vd2d3d(depth=3)


def test_sparse_max_filter_takes_the_max_of_voxels_dilation_apart():
    layer = boundary._sparse_max_filter_layer()((1, 2, 2), (1, 2, 2))
    x = np.zeros((1, 1, 4, 4, 1), np.float32)
    # output (i, j) = max of x at rows i, i + 2 and columns j, j + 2
    x[0, 0, 2, 3, 0] = 5.0   # row 2 = 0 + 2, column 3 = 1 + 2: output (0, 1) only
    x[0, 0, 0, 0, 0] = 1.0   # output (0, 0) only
    x[0, 0, 1, 1, 0] = 7.0   # output (1, 1) only (a dense 3x3 pool would give 7 at (0, 0))
    out = np.asarray(layer(x))[0, 0, :, :, 0]
    np.testing.assert_array_equal(out, [[1.0, 5.0], [0.0, 7.0]])


def test_boundary_map_marks_label_changes_and_background():
    labels = np.array([[[1, 1, 2],
                        [1, 1, 2],
                        [0, 3, 3]]])
    np.testing.assert_array_equal(boundary.boundary_map(labels)[0],
                                  [[0, 1, 0],
                                   [1, 1, 1],
                                   [1, 0, 0]])
    with pytest.raises(ValueError, match="expected"):
        boundary.boundary_map(labels[0])


def test_training_runs_and_predicts_the_whole_volume():
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(1, 17).reshape(4, 4), 8, 0).repeat(8, 1)[None].repeat(5, 0)
    target = boundary.boundary_map(labels)
    image = (1 - target + 0.1 * rng.normal(size=target.shape)).astype(np.float32)
    model = boundary.n4(width=0.1)
    before = [w.numpy().copy() for w in model.trainable_weights]
    losses = boundary.train(model, image, target, steps=3, batch=2, out_shape=(1, 4, 4),
                            progress=False)
    assert len(losses) == 3 and all(np.isfinite(losses))
    after = [w.numpy() for w in model.trainable_weights]
    assert any(not np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    assert boundary.predict(model, image).shape == (5, 32, 32, 1)
    # the recursive net: image and the first net's map in, 3D context, same output size
    deep = boundary.vd2d3d(width=0.1)
    prior = boundary.predict(model, image)[..., 0]
    boundary.train(deep, image, target, prior=prior, steps=1, batch=1, out_shape=(1, 4, 4),
                   progress=False)
    assert boundary.predict(deep, image, prior).shape == (5, 32, 32, 1)
