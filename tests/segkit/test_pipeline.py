"""segkit.pipeline: compiled boundary nets agree with TensorFlow, the patch loop stitches to the
one-pass prediction, and the demo runs end to end. Nets are tiny and untrained (random weights
are as good as trained ones for agreement); volumes are a few thousand voxels."""

import numpy as np
import pytest

keras = pytest.importorskip("keras")
pytest.importorskip("tf2onnx")

from mlsys_datasets.em import em_volume  # noqa: E402

from segkit import boundary, pipeline  # noqa: E402

WIDTH = 0.1


@pytest.fixture(scope="module")
def volume():
    return em_volume((6, 20, 20), seed=3)


def test_compiled_recursive_net_equals_tensorflow(volume):
    # the two-input VD2D3D: dilated 2x3x3 convs, stride-1 max filters, the sum of two branches
    keras.utils.set_random_seed(1)
    model = boundary.vd2d3d(width=WIDTH)
    net = pipeline.compile_net(model, (2, 8, 8))
    assert net.fallback is None and net.compiled is not None, net.fallback
    assert {"Conv", "MaxPool"} <= set(net.ops)
    prior = np.random.default_rng(0).random(volume.image.shape, dtype=np.float32)
    ours, _ = pipeline.infer(net, volume.image, prior)
    # independent reference: TensorFlow on the whole volume in one pass, no patches
    whole = boundary.predict(model, volume.image, prior)[..., 0]
    assert ours.shape == volume.image.shape
    assert np.abs(ours - whole).max() < 1e-4


def test_stitched_patch_loop_equals_whole_volume(volume):
    keras.utils.set_random_seed(2)
    model = boundary.vd2d(width=WIDTH)
    whole = boundary.predict(model, volume.image)[..., 0]
    fixed = pipeline._fixed(model, tuple(p + f - 1 for p, f in zip((4, 7, 9), model.field_of_view,
                                                                   strict=True)))
    # patches of 4x7x9 do not divide 6x20x20: the last patch on each axis overlaps the one before
    stitched = pipeline.patch_loop(
        lambda x: np.asarray(fixed(x[None, ..., None], training=False))[0, ..., 0],
        [boundary.standardise(volume.image)], model.field_of_view, (4, 7, 9))
    np.testing.assert_allclose(stitched, whole, atol=1e-5)


def test_patch_starts_tile_the_axis():
    assert pipeline._starts(10, 4) == [0, 4, 6]
    assert pipeline._starts(8, 4) == [0, 4]
    assert pipeline._starts(3, 4) == [0]


def test_patch_larger_than_volume_is_named(volume):
    with pytest.raises(ValueError, match="larger than the volume"):
        pipeline.patch_loop(lambda x: x, [volume.image], (1, 3, 3), (7, 4, 4))


def test_affinities_from_boundary_hand_case():
    b = np.zeros((1, 1, 3), np.float32)
    b[0, 0, 1] = 0.9  # a membrane voxel in the middle of a row
    aff = pipeline.affinities_from_boundary(b)
    # x edges: (0,1) and (1,2) both touch the membrane: 1 - 0.9; the low face has no edge
    np.testing.assert_allclose(aff[2, 0, 0], [0, 0.1, 0.1], atol=1e-6)
    assert not aff[0].any() and not aff[1].any()


def test_demo_end_to_end_scores_in_unit_interval(monkeypatch):
    # the plumbing at smoke size (a few training steps: the scores mean little, the agreement
    # of the compiled recursive chain with TensorFlow must hold)
    monkeypatch.setitem(boundary.TRAINING, "smoke",
                        {**boundary.TRAINING["smoke"], "steps": {"VD2D": 2, "VD2D3D": 2}})
    r = pipeline.demo("smoke", nets=("VD2D", "VD2D3D"), progress=False)
    assert r.compiled == {"VD2D": True, "VD2D3D": True}, r.notes
    assert r.max_abs_error < 1e-4
    assert r.segmentation.shape == r.truth.shape == r.boundary.shape
    for key in ("f", "precision", "recall"):
        assert 0 <= r.scores[key] <= 1
    assert r.scores["voi"] >= 0
    assert r.compile_seconds["VD2D"] > 0 and r.voxels_per_second["VD2D3D"] > 0
    # VD2D3D's compiled map is computed from VD2D's compiled map of the same volume
    np.testing.assert_allclose(
        r.maps["VD2D3D"],
        boundary.predict(r.trained.models["VD2D3D"], r.image, r.maps["VD2D"])[..., 0], atol=1e-4)


@pytest.mark.parametrize("value, match", [(np.nan, "NaN"), (1.5, r"outside \[0, 1\]"),
                                          (-0.5, r"outside \[0, 1\]")])
def test_bad_boundary_maps_are_named(value, match):
    # a map outside [0, 1] made affinities outside [0, 1], refused later as "aff": the
    # boundary map is what the caller gave, so it is what the error names
    bmap = np.full((3, 4, 5), 0.25, np.float32)
    bmap[1, 2, 3] = value
    with pytest.raises(ValueError, match=rf"boundary map.*{match}.*\(1, 2, 3\)"):
        pipeline.affinities_from_boundary(bmap)


def test_bad_patch_loop_arguments_are_named():
    vol = np.zeros((4, 6, 6), np.float32)
    with pytest.raises(ValueError, match="patch_out"):
        pipeline.patch_loop(lambda p: p, [vol], (1, 1, 1), (0, 2, 2))
    with pytest.raises(ValueError, match="patch_out"):
        pipeline.patch_loop(lambda p: p, [vol], (1, 1, 1), 2.5)
    vol[1, 2, 3] = np.nan
    with pytest.raises(ValueError, match=r"volumes\[0\] contains NaN"):
        pipeline.patch_loop(lambda p: p, [vol], (1, 1, 1), (2, 2, 2))
