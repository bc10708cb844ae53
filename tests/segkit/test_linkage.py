"""Size-dependent single linkage and mean agglomeration on hand-worked cases, against waterz."""

import numpy as np
import pytest
import waterz
from hypothesis import given, settings
from hypothesis import strategies as st
from mlsys_datasets import em_volume

import segkit
from segkit import metrics


def line_with_basins(sizes, edges):
    """A 1 x 1 x N line cut into basins of ``sizes`` voxels; ``edges[i]`` is the affinity of
    the one voxel edge between basin i and i+1 (edges inside a basin are 1)."""
    n = sum(sizes)
    aff = np.zeros((3, 1, 1, n), np.float32)
    aff[2, 0, 0, 1:] = 1.0
    seg = np.zeros((1, 1, n), np.uint64)
    start = 0
    for i, s in enumerate(sizes):
        seg[0, 0, start:start + s] = start + 1
        if i:
            aff[2, 0, 0, start] = edges[i - 1]
        start += s
    return aff, seg


def const(size, above):
    return lambda w: np.where(np.asarray(w) >= above, size, 0)


def test_merge_while_either_side_is_small():
    # A(2) -.9- B(5) -.8- C(1) -.6- D(5), f = 3 above 0.5. Walk edges high to low:
    # A-B: A has 2 < 3 -> merge (7). B-C: C has 1 < 3 -> merge (8). C-D: 8 and 5 >= 3 -> no.
    aff, basins = line_with_basins([2, 5, 1, 5], [0.9, 0.8, 0.6])
    seg = segkit.agglomerate(aff, 0.5, basins=basins, size_fn=const(3, 0.5), dust=0)
    assert seg.ravel().tolist() == [1] * 8 + [9] * 5
    # dust: segments under 6 voxels become background
    seg = segkit.agglomerate(aff, 0.5, basins=basins, size_fn=const(3, 0.5), dust=6)
    assert seg.ravel().tolist() == [1] * 8 + [0] * 5


def test_order_matters_high_to_low():
    # A(1) -.9- B(1) -.8- C(10), f = 2: A-B merge (size 2); then 2 and 10 are both >= 2.
    aff, basins = line_with_basins([1, 1, 10], [0.9, 0.8])
    seg = segkit.agglomerate(aff, 0.5, basins=basins, size_fn=const(2, 0.5), dust=0)
    assert seg.ravel().tolist() == [1, 1] + [3] * 10


def test_linkage_stops_where_the_size_limit_is_zero():
    aff, basins = line_with_basins([1, 1, 1], [0.9, 0.2])
    seg = segkit.agglomerate(aff, 0.5, basins=basins, size_fn=const(100, 0.5), dust=0)
    assert seg.ravel().tolist() == [1, 1, 3]


def test_default_size_function_is_upstream_square():
    f = segkit.square_size_fn(0.3, 1000)
    assert f(0.2) == 0 and f(1.0) == pytest.approx(1000) and f(0.65) == pytest.approx(250)


def mean_case():
    # 1 x 2 x 2: A = left column (id 1), B = top right (2), C = bottom right (4).
    # A-B .8, A-C .4, B-C .95. Mean linkage merges B-C first; then A-(BC) = (.8+.4)/2 = .6.
    seg = np.array([[[1, 2], [1, 4]]], np.uint64)
    aff = np.zeros((3, 1, 2, 2), np.float32)
    aff[1, 0, 1, 0] = 1.0
    aff[2, 0, 0, 1], aff[2, 0, 1, 1], aff[1, 0, 1, 1] = 0.8, 0.4, 0.95
    return aff, seg


def test_mean_affinity_merges_whole_interfaces():
    aff, basins = mean_case()
    at7 = segkit.agglomerate(aff, 0.7, mode="mean", basins=basins)
    assert at7.ravel().tolist() == [1, 2, 1, 2]  # A alone even though A-B is .8
    at5 = segkit.agglomerate(aff, 0.5, mode="mean", basins=basins)
    assert at5.ravel().tolist() == [1, 1, 1, 1]
    _, merges = segkit.agglomerate(aff, 0.5, mode="mean", basins=basins, return_merges=True)
    assert np.allclose(merges["height"], [0.95, 0.6], atol=1e-6)


def test_mean_case_agrees_with_waterz():
    aff, basins = mean_case()
    for t in (0.7, 0.5):
        ours = segkit.agglomerate(aff, t, mode="mean", basins=basins)
        theirs = next(iter(waterz.agglomerate(aff, [1 - t], fragments=basins.copy())))
        assert len(np.unique(ours)) == len(np.unique(theirs))


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.8])
def test_mean_agglomeration_equals_waterz_on_em_volume(threshold):
    aff = em_volume(32, seed=4).affinities
    ours = segkit.agglomerate(aff, threshold, mode="mean")
    theirs = next(iter(waterz.agglomerate(aff, [1 - threshold])))
    pairs = np.unique(np.stack([ours.ravel(), theirs.ravel()]), axis=1)
    assert pairs.shape[1] == len(np.unique(ours)) == len(np.unique(theirs))


def test_size_dependent_linkage_beats_plain_watershed():
    v = em_volume(48, seed=5)
    plain = metrics.adapted_rand(v.labels, segkit.watershed(v.affinities))["f"]
    sdsl = metrics.adapted_rand(v.labels, segkit.agglomerate(v.affinities, 0.3, size=500))["f"]
    assert sdsl > plain + 0.05


def test_reruns_are_bit_identical():
    aff = em_volume(32, seed=6).affinities
    for mode in ("mean", "size-dependent"):
        a = segkit.agglomerate(aff, 0.5, mode=mode)
        b = segkit.agglomerate(aff.copy(), 0.5, mode=mode)
        assert a.dtype == np.uint64 and np.array_equal(a, b)


def test_bad_arguments_are_named():
    aff, basins = mean_case()
    with pytest.raises(ValueError, match="mode"):
        segkit.agglomerate(aff, 0.5, mode="median")
    with pytest.raises(ValueError, match="basins shape"):
        segkit.agglomerate(aff, 0.5, basins=basins[:, :1])
    with pytest.raises(ValueError, match="size_fn"):
        segkit.agglomerate(aff, 0.5, basins=basins, size_fn=lambda w: -np.ones_like(w))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2 ** 16), st.tuples(*[st.integers(1, 6)] * 2), st.integers(1, 8))
def test_relabel_matches_a_dictionary(seed, shape, k):
    from segkit.linkage import relabel

    rng = np.random.default_rng(seed)
    seg = rng.integers(0, k, shape).astype(np.uint64) * np.uint64(rng.integers(1, 2 ** 50))
    old = np.unique(rng.integers(0, k + 2, k).astype(np.uint64) * seg.max())  # some absent
    old = old[old != 0]
    rng.shuffle(old)
    new = rng.integers(1, 2 ** 60, len(old)).astype(np.uint64)
    table = dict(zip(old.tolist(), new.tolist(), strict=True))
    want = np.array([table.get(int(s), int(s)) for s in seg.ravel()], np.uint64).reshape(shape)
    assert np.array_equal(relabel(seg, old, new), want)
