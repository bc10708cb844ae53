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


@pytest.mark.parametrize("name", ["N4", "VD2D", "VD2D3D"])
def test_a_one_input_net_predicts_without_keras_warnings(name):
    # A one-input model built from a list of inputs expects a list; predict passes a tensor
    # and Keras warned about the input structure in the notebook's output.
    import warnings

    kw = {"recursive": False} if name == "VD2D3D" else {}
    model = boundary.build(name, "smoke", **kw)
    image = np.random.default_rng(0).random((8, 24, 24)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert boundary.predict(model, image).shape == (8, 24, 24, 1)


def test_sparse_max_filter_takes_the_max_of_voxels_dilation_apart():
    layer = boundary._sparse_max_filter_layer()((1, 2, 2), (1, 2, 2))
    x = np.zeros((1, 1, 4, 4, 1), np.float32)
    # output (i, j) = max of x at rows i, i + 2 and columns j, j + 2
    x[0, 0, 2, 3, 0] = 5.0   # row 2 = 0 + 2, column 3 = 1 + 2: output (0, 1) only
    x[0, 0, 0, 0, 0] = 1.0   # output (0, 0) only
    x[0, 0, 1, 1, 0] = 7.0   # output (1, 1) only (a dense 3x3 pool would give 7 at (0, 0))
    out = np.asarray(layer(x))[0, 0, :, :, 0]
    np.testing.assert_array_equal(out, [[1.0, 5.0], [0.0, 7.0]])


def test_boundary_map_marks_both_sides_of_label_changes_on_every_axis():
    labels = np.array([[[1, 1, 2],
                        [1, 1, 2],
                        [0, 3, 3]],
                       [[1, 1, 2],
                        [1, 1, 2],
                        [4, 4, 4]]])
    # section 0: (0,1)|(0,2) and (1,1)|(1,2) differ in x, row 1 differs from row 2 in y, the
    # 0 is background; (0,0) stays inside.  z: only the bottom row changes (0/3 -> 4)
    np.testing.assert_array_equal(boundary.boundary_map(labels),
                                  [[[0, 1, 1],
                                    [1, 1, 1],
                                    [1, 1, 1]],
                                   [[0, 1, 1],
                                    [1, 1, 1],
                                    [1, 1, 1]]])
    # one object cut by a horizontal face: both sections are membrane, as the image draws it
    stacked = np.array([[[5, 5]], [[6, 6]], [[6, 6]]])
    np.testing.assert_array_equal(boundary.boundary_map(stacked)[:, 0], [[1, 1], [1, 1], [0, 0]])
    with pytest.raises(ValueError, match="expected"):
        boundary.boundary_map(labels[0])


def test_standardise_each_section():
    image = np.random.default_rng(0).random((3, 8, 9), dtype=np.float32) * [[[1]], [[5]], [[0]]]
    out = boundary.standardise(image + 7)
    np.testing.assert_allclose(out[:2].mean(axis=(1, 2)), 0, atol=1e-5)
    np.testing.assert_allclose(out[:2].std(axis=(1, 2)), 1, atol=1e-4)
    assert np.all(out[2] == 0)  # a constant section stays finite


def test_rebalance_gives_each_class_half_the_weight():
    y = np.array([1, 0, 0, 0], np.float32)
    np.testing.assert_allclose(boundary.rebalance(y), [2, 2 / 3, 2 / 3, 2 / 3])
    np.testing.assert_allclose(boundary.rebalance(np.zeros(5, np.float32)), 1)


@pytest.mark.parametrize("seed", range(4))
def test_augmented_patches_keep_each_target_under_its_window_centre(seed):
    # target = the volume itself: the output voxel must be the centre of its input window,
    # whatever flip or transpose the sample drew
    rng = np.random.default_rng(seed)
    volume = rng.random((5, 12, 12)).astype(np.float32)

    class Net:
        field_of_view = (3, 5, 5)

    padded = boundary.pad_for(Net, volume)
    xs, y = boundary.sample_patches(rng, [padded], volume, (2, 4, 4), 8, flips=True)
    assert xs[0].shape == (8, 4, 8, 8, 1) and y.shape == (8, 2, 4, 4, 1)
    np.testing.assert_array_equal(xs[0][:, 1:3, 2:6, 2:6], y)
    assert len({x.tobytes() for x in xs[0]}) == 8


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


def _fake_train(calls):
    def train(model, image, target, prior=None, steps=0, **kw):
        calls[model.name] = prior
        return [0.0] * steps
    return train


def test_train_all_feeds_vd2d3d_the_first_nets_map(monkeypatch, tmp_path):
    calls = {}
    monkeypatch.setattr(boundary, "train", _fake_train(calls))
    trained = boundary.train_all("smoke", seed=3, progress=False, cache=tmp_path)
    assert list(trained.models) == ["N4", "VD2D", "VD2D3D"]
    assert calls["N4"] is None and calls["VD2D"] is None
    image = trained.train.image
    # hand wiring, independent of train_all: VD2D's map of the training volume, by one pass
    first = np.asarray(trained.models["VD2D"](
        boundary.pad_for(trained.models["VD2D"], boundary.standardise(image))[None, ..., None],
        training=False))[0, ..., 0]
    np.testing.assert_allclose(calls["VD2D3D"], first, atol=1e-6)
    np.testing.assert_allclose(trained.train_maps["VD2D"], first, atol=1e-6)
    # and at prediction: VD2D3D reads VD2D's map, which changes its output
    keras.utils.set_random_seed(0)
    deep = boundary.vd2d3d(width=0.5)  # wide enough that no branch is dead at random weights
    maps = boundary.predict_all({"VD2D": trained.models["VD2D"], "VD2D3D": deep}, image)
    np.testing.assert_allclose(maps["VD2D3D"], boundary.predict(deep, image, first)[..., 0],
                               atol=1e-6)
    assert np.abs(maps["VD2D3D"]
                  - boundary.predict(deep, image, np.zeros_like(first))[..., 0]).max() > 1e-4
    # a second call with the same settings loads the same weights from the cache
    again = boundary.train_all("smoke", seed=3, progress=False, cache=tmp_path)
    assert again.cached
    for name, model in trained.models.items():
        for a, b in zip(model.get_weights(), again.models[name].get_weights(), strict=True):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="train VD2D too"):
        boundary.train_all("smoke", nets=("VD2D3D",))
    with pytest.raises(ValueError, match="size 'huge'"):
        boundary.train_all("huge")


def _auc(score, truth):
    """Area under the ROC curve by ranks (Mann-Whitney): the chance that a membrane voxel scores
    above an interior one; 0.5 is chance, and calibration does not matter."""
    from scipy.stats import rankdata

    ranks, on = rankdata(score.ravel()), truth.ravel() > 0.5
    n1, n0 = on.sum(), (~on).sum()
    return (ranks[on].sum() - n1 * (n1 + 1) / 2) / (n1 * n0)


def test_auc_hand_case():
    assert _auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == 0.75


def test_trained_vd2d_beats_the_untrained_net_on_a_held_out_volume():
    from mlsys_datasets.em import em_volume

    train_vol = em_volume((5, 40, 40), seed=11)
    test_vol = em_volume((5, 40, 40), seed=12)
    keras.utils.set_random_seed(0)
    model = boundary.vd2d(width=0.25, dropout=0.0)
    target = boundary.boundary_map(test_vol.labels)
    before = _auc(boundary.predict(model, test_vol.image)[..., 0], target)
    boundary.train(model, train_vol.image, boundary.boundary_map(train_vol.labels), steps=60,
                   batch=2, out_shape=(1, 16, 16), learning_rate=3e-3, progress=False)
    after = _auc(boundary.predict(model, test_vol.image)[..., 0], target)
    assert after > before + 0.08 and after > 0.85, (before, after)


def test_nan_images_bad_targets_and_bad_training_options_are_named():
    # a NaN voxel turned its whole standardised section into NaN, and training on it gave
    # NaN losses in silence
    image = np.random.default_rng(0).normal(size=(5, 24, 24)).astype(np.float32)
    target = np.zeros(image.shape, np.float32)
    target[:, ::4] = 1
    bad = image.copy()
    bad[2, 3, 4] = np.nan
    with pytest.raises(ValueError, match=r"image contains NaN.*\(2, 3, 4\)"):
        boundary.standardise(bad)
    model = boundary.n4(width=0.05)
    with pytest.raises(ValueError, match="image contains NaN"):
        boundary.predict(model, bad)
    with pytest.raises(ValueError, match="image contains NaN"):
        boundary.train(model, bad, target, steps=1, progress=False)
    wrong = target.copy()
    wrong[0, 0, 0] = 2.0
    with pytest.raises(ValueError, match=r"target has boundary labels outside \[0, 1\]"):
        boundary.train(model, image, wrong, steps=1, progress=False)
    for kw, name in [(dict(batch=0), "batch"), (dict(steps=2.5), "steps"),
                     (dict(learning_rate=np.nan), "learning_rate"),
                     (dict(out_shape=(1, 0, 8)), "out_shape")]:
        with pytest.raises(ValueError, match=name):
            boundary.train(model, image, target, progress=False, **kw)
