"""The watershed rules on hand-worked lines, and the basins against waterz's."""

import numpy as np
import pytest
import waterz
from hypothesis import given, settings
from hypothesis import strategies as st
from mlsys_datasets import em_volume

import segkit
from segkit import regions


def line(edges, n_y=1):
    """Affinities of a 1 x n_y x (len(edges)+1) volume whose x edges are ``edges``."""
    aff = np.zeros((3, 1, n_y, len(edges) + 1), np.float32)
    aff[2, 0, :, 1:] = edges
    return aff


def same_partition(a, b):
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel().astype(a.dtype)
    pairs = np.unique(np.stack([a, b]), axis=1)
    return pairs.shape[1] == len(np.unique(a)) == len(np.unique(b))


def waterz_basins(aff, low=0.0001, high=0.9999):
    return next(iter(waterz.agglomerate(aff, [0.0], aff_threshold_low=low,
                                        aff_threshold_high=high)))


def test_each_voxel_climbs_to_its_highest_edge():
    # voxels 0..4; edges 0-1: .2, 1-2: .9, 2-3: .4, 3-4: .8. 1<->2 and 3<->4 are mutual maxima.
    seg = segkit.watershed(line([0.2, 0.9, 0.4, 0.8]))
    assert seg.ravel().tolist() == [1, 1, 1, 4, 4]  # ids: 1 + index of the basin's first voxel


def test_a_plateau_is_split_between_its_exits():
    # edges .9 .5 .5 .5 .5 .9: voxels 2,3,4 form a plateau at .5 with exits at 2 (to 1) and
    # 4 (to 5).
    # Seeds 2 and 4 keep their exits; 3 is reached from 2, and when popped both its neighbours
    # have given up pointing back, so it keeps the last direction in bit order (+x): toward 4.
    seg = segkit.watershed(line([0.9, 0.5, 0.5, 0.5, 0.5, 0.9]))
    assert seg.ravel().tolist() == [1, 1, 1, 4, 4, 4, 4]


def test_high_and_low_thresholds():
    # edges >= high join whatever else is the maximum; a voxel whose best edge is <= low is
    # background
    aff = line([0.995, 0.999, 0.0, 0.5])
    assert segkit.watershed(aff, low=0.1, high=0.99).ravel().tolist() == [1, 1, 1, 4, 4]
    assert segkit.watershed(aff, low=0.6, high=0.99).ravel().tolist() == [1, 1, 1, 0, 0]


def test_hand_cases_agree_with_waterz():
    for edges in ([0.2, 0.9, 0.4, 0.8], [0.9, 0.5, 0.5, 0.5, 0.5, 0.9], [0.3, 0.3, 0.3]):
        aff = line(edges)
        assert same_partition(segkit.watershed(aff), waterz_basins(aff)), edges


@pytest.mark.parametrize("seed", [0, 1])
def test_basins_equal_waterz_on_em_volumes(seed):
    aff = em_volume(32, seed=seed).affinities
    ours = segkit.watershed(aff)
    assert same_partition(ours, waterz_basins(aff))
    assert len(np.unique(ours)) > 50  # a real over-segmentation, not a trivial one


def test_basins_equal_waterz_with_plateaus():
    # quantised affinities: many exact ties, so plateau splitting is exercised
    rng = np.random.default_rng(3)
    aff = (np.round(rng.uniform(0, 1, (3, 9, 10, 11)) * 4) / 4).astype(np.float32)
    for low, high in ((0.0001, 0.9999), (0.3, 0.7)):
        assert same_partition(segkit.watershed(aff, low, high), waterz_basins(aff, low, high))


def test_ids_are_canonical_and_dust_is_dropped():
    aff = em_volume(24, seed=2).affinities
    seg = segkit.watershed(aff)
    flat = seg.ravel()
    ids, first = np.unique(flat, return_index=True)
    nz = ids != 0
    assert np.array_equal(ids[nz], first[nz] + 1)  # id = 1 + raster index of first voxel
    dusted = segkit.watershed(aff, size_threshold=20)
    ids, counts = np.unique(dusted[dusted != 0], return_counts=True)
    assert counts.min() >= 20 and (dusted == 0).sum() > (seg == 0).sum()


def test_region_graph_by_hand():
    # 1 x 2 x 2: A = left column, B top right, C bottom right
    seg = np.array([[[1, 2], [1, 4]]], np.uint64)
    aff = np.zeros((3, 1, 2, 2), np.float32)
    aff[2, 0, 0, 1], aff[2, 0, 1, 1], aff[1, 0, 1, 1] = 0.8, 0.4, 0.95
    g = regions.region_graph(seg, aff)
    got = {(int(a), int(b)): (float(m), int(s), int(c))
           for a, b, m, s, c in zip(g["a"], g["b"], g["max"], g["sum"], g["count"], strict=True)}
    q = lambda x: int(np.floor(np.float64(np.float32(x)) * 2 ** 24))  # noqa: E731
    assert got == {(1, 2): (np.float32(0.8), q(0.8), 1), (1, 4): (np.float32(0.4), q(0.4), 1),
                   (2, 4): (np.float32(0.95), q(0.95), 1)}


@pytest.mark.parametrize("bad, match", [
    (np.zeros((2, 4, 4, 4), np.float32), r"shape \(3, Z, Y, X\)"),
    (np.zeros((3, 4, 4), np.float32), r"shape \(3, Z, Y, X\)"),
    (np.zeros((3, 2, 2, 2), np.int32), "floating point"),
    (np.full((3, 2, 2, 2), np.nan, np.float32), "NaN"),
])
def test_bad_affinities_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        segkit.watershed(bad)
    with pytest.raises(ValueError, match=match):
        segkit.agglomerate(bad, 0.5)


def brute_region_graph(seg, aff):
    """Plain-Python reference: every voxel edge between two different nonzero labels."""
    out = {}
    zd, yd, xd = seg.shape
    for z in range(zd):
        for y in range(yd):
            for x in range(xd):
                for d, (dz, dy, dx) in enumerate([(1, 0, 0), (0, 1, 0), (0, 0, 1)]):
                    if z - dz < 0 or y - dy < 0 or x - dx < 0:
                        continue
                    s, t = int(seg[z, y, x]), int(seg[z - dz, y - dy, x - dx])
                    if s == 0 or t == 0 or s == t:
                        continue
                    w = aff[d, z, y, x]
                    key = (min(s, t), max(s, t))
                    m, q, c, top = out.get(key, (-1.0, 0, 0, -1))
                    idx = ((z * yd + y) * xd + x) * 3 + d
                    out[key] = (max(m, float(w)), q + int(np.floor(np.float64(w) * 2 ** 24)),
                                c + 1, max(top, idx))
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2 ** 16), st.tuples(*[st.integers(1, 7)] * 3), st.integers(1, 6))
def test_region_graph_equals_a_brute_force_count(seed, shape, k):
    rng = np.random.default_rng(seed)
    seg = (rng.integers(0, k, shape) * rng.integers(1, 2 ** 40)).astype(np.uint64)
    aff = rng.uniform(0, 1, (3, *shape)).astype(np.float32)
    g = regions.region_graph(seg, aff)
    got = {(int(a), int(b)): (float(m), int(q), int(c), int(t)) for a, b, m, q, c, t in
           zip(g["a"], g["b"], g["max"], g["sum"], g["count"], g["top"], strict=True)}
    assert got == brute_region_graph(seg, aff)
    keys = list(zip(g["a"].tolist(), g["b"].tolist(), strict=True))
    assert keys == sorted(keys)  # sorted by (a, b)
    assert np.array_equal(g["ids"], np.unique(seg[seg != 0]))
    assert np.array_equal(g["ids"][g["u"]], g["a"]) and np.array_equal(g["ids"][g["v"]], g["b"])


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 16), st.integers(1, 5000), st.integers(1, 3000),
       st.sampled_from([1, 2 ** 20, 2 ** 63]))
def test_region_ids_are_the_sorted_distinct_nonzero_labels(seed, size, k, scale):
    # up to thousands of distinct labels: the label set grows several times past its start
    rng = np.random.default_rng(seed)
    seg = rng.integers(0, k, size).astype(np.uint64) * np.uint64(scale)
    seg = np.repeat(seg, rng.integers(1, 4, size))  # runs, as along x in a segmentation
    want = np.unique(seg)
    assert np.array_equal(regions.region_ids(seg.reshape(1, 1, -1)), want[want != 0])
    assert regions.region_ids(seg.reshape(1, 1, -1)).dtype == np.uint64
