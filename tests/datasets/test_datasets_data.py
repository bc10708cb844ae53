"""Synthetic digits and BraTS-like volumes: shapes, determinism, nesting, contrast, learnability."""

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlsys_datasets import brats_volumes, digits


def _digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(a.tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------- digits


def test_digits_shapes_dtypes_range():
    x, y = digits(500, seed=0)
    assert x.shape == (500, 28, 28, 1) and x.dtype == np.float32
    assert y.shape == (500,) and y.dtype == np.int64
    assert 0.0 <= x.min() and x.max() <= 1.0
    assert set(np.unique(y)) == set(range(10))
    # Mostly dark background, some bright ink in every image.
    assert 0.03 < x.mean() < 0.25
    assert (x.reshape(500, -1).max(1) > 0.7).all()


def test_digits_deterministic_by_seed():
    assert _digest(*digits(64, seed=3)) == _digest(*digits(64, seed=3))
    assert _digest(*digits(64, seed=3)) != _digest(*digits(64, seed=4))
    # Rendering is chunked (512 images at a time): a batch spanning chunks is still well formed.
    x, y = digits(600, seed=1)
    assert np.isfinite(x).all() and (x.reshape(600, -1).max(1) > 0.7).all()


def test_digit_classes_look_different():
    x, y = digits(2000, seed=0)
    means = np.stack([x[y == d].mean(0).ravel() for d in range(10)])
    # Every pair of class-mean images differs clearly (nearest pair still far apart).
    d = np.linalg.norm(means[:, None] - means[None], axis=-1)
    assert d[~np.eye(10, dtype=bool)].min() > 0.5
    # "1" has the least ink, "8" and "0" much more.
    ink = x.reshape(2000, -1).sum(1)
    per = np.array([ink[y == k].mean() for k in range(10)])
    assert per.argmin() == 1


@pytest.mark.parametrize("bad", [0, -5, 2.5, "10", True, None])
def test_digits_bad_n(bad):
    with pytest.raises(ValueError, match="n must be a positive integer"):
        digits(bad)


def test_lenet_learns_synthetic_digits():
    keras = pytest.importorskip("keras")
    from mlsys_datasets import lenet

    x, y = digits(900, seed=0)
    xt, yt = digits(300, seed=1)
    model = lenet(seed=0)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    model.fit(x, y, epochs=3, batch_size=32, verbose=0)
    acc = (model.predict(xt, verbose=0).argmax(1) == yt).mean()
    assert acc > 0.6, acc


# ---------------------------------------------------------------- BraTS-like volumes


@pytest.fixture(scope="module")
def vols():
    return brats_volumes(4, 32, seed=0)


def test_brats_shapes_dtypes(vols):
    v, lab = vols
    assert v.shape == (4, 32, 32, 32, 4) and v.dtype == np.float32
    assert lab.shape == (4, 32, 32, 32, 3) and lab.dtype == np.float32
    assert set(np.unique(lab)) == {0.0, 1.0}
    assert v.min() >= 0 and np.isfinite(v).all()


def test_brats_masks_nested_and_present(vols):
    _, lab = vols
    wt, tc, et = lab[..., 0], lab[..., 1], lab[..., 2]
    assert (et <= tc).all() and (tc <= wt).all()
    for i in range(4):
        assert wt[i].sum() > tc[i].sum() > et[i].sum() > 0  # strict: oedema and necrosis exist


def test_brats_modalities_contrast_by_region(vols):
    v, lab = vols
    wt, tc, et = (lab[..., k].astype(bool) for k in range(3))
    brain = v[..., 0] > 0.1  # background is ~0 in T1
    healthy = brain & ~wt
    oedema, necrosis = wt & ~tc, tc & ~et
    t1, t1ce, t2, flair = (v[..., m] for m in range(4))
    assert flair[oedema].mean() > flair[healthy].mean() + 0.3      # FLAIR: oedema bright
    assert t2[oedema].mean() > t2[healthy].mean() + 0.3            # T2 too
    assert t1ce[et].mean() > t1ce[necrosis].mean() + 0.5           # T1ce: enhancing rim
    assert t1ce[et].mean() > t1ce[healthy].mean() + 0.4
    assert t1[necrosis].mean() < t1[healthy].mean() - 0.15         # T1: necrosis dark
    # Background (corner) is dark, only noise.
    assert v[:, :2, :2, :2].mean() < 0.05


def test_brats_deterministic_by_seed():
    assert _digest(*brats_volumes(2, 12, seed=7)) == _digest(*brats_volumes(2, 12, seed=7))
    assert _digest(*brats_volumes(2, 12, seed=7)) != _digest(*brats_volumes(2, 12, seed=8))


@settings(max_examples=25, deadline=None)
@given(side=st.integers(1, 20), seed=st.integers(0, 2**31), n=st.integers(1, 2))
def test_brats_any_side_nested(side, seed, n):
    v, lab = brats_volumes(n, side, seed=seed)
    assert v.shape == (n, side, side, side, 4) and lab.shape == (n, side, side, side, 3)
    assert (lab[..., 2] <= lab[..., 1]).all() and (lab[..., 1] <= lab[..., 0]).all()


@pytest.mark.parametrize("kw, word", [
    ({"n": 1, "side": 0}, "side"), ({"n": 1, "side": -4}, "side"), ({"n": 1, "side": 8.0}, "side"),
    ({"n": 0, "side": 8}, "n"), ({"n": True, "side": 8}, "n"),
])
def test_brats_bad_sizes(kw, word):
    with pytest.raises(ValueError, match=f"^{word} must be a positive integer"):
        brats_volumes(**kw)
