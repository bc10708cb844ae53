"""Every segkit entry point refuses the same bad arguments, naming them (segkit.validate):
the whole-volume calls and the chunked one alike, for numpy and zarr volumes."""

import numpy as np
import pytest
import zarr
from mlsys_datasets import em_volume
from scipy import ndimage

import segkit

AFF = em_volume(16, seed=3).affinities


@pytest.fixture(scope="module")
def client():
    from dask.distributed import Client

    with Client(processes=False, n_workers=1, threads_per_worker=2,
                dashboard_address=":0") as c:
        yield c


def same_partition(a, b):
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel().astype(a.dtype)
    pairs = np.unique(np.stack([a, b]), axis=1)
    return pairs.shape[1] == len(np.unique(a)) == len(np.unique(b))


BAD_THRESHOLDS = [
    (dict(low=-0.1), "low"),
    (dict(low=float("nan")), "low"),
    (dict(high=1.5), "high"),
    (dict(low=0.6, high=0.4), "low <= high"),  # chunked: an IndexError deep in linking
    (dict(threshold=float("nan")), "threshold"),
    (dict(threshold=-0.5), "threshold"),
    (dict(threshold=float("inf")), "threshold"),
    (dict(threshold="0.5"), "threshold"),
]


@pytest.mark.parametrize("bad, match", BAD_THRESHOLDS)
def test_bad_thresholds_are_refused_alike_by_whole_and_chunked(client, bad, match):
    kw = {"threshold": 0.5, **bad}
    with pytest.raises(ValueError, match=match):
        segkit.agglomerate(AFF, mode="mean", **kw)
    with pytest.raises(ValueError, match=match):
        segkit.agglomerate(AFF, mode="size-dependent", **kw)
    with pytest.raises(ValueError, match=match):
        segkit.chunked_agglomerate(AFF, 8, client=client, **kw)
    if "threshold" not in bad:
        with pytest.raises(ValueError, match=match):
            segkit.watershed(AFF, **bad)


@pytest.mark.parametrize("value, match", [
    (1.5, r"outside \[0, 1\]"),
    (-0.25, r"outside \[0, 1\]"),
    (1e12, r"outside \[0, 1\]"),  # its integer sum overflowed int64: a wrong segmentation
    (float("nan"), "NaN"),
    (float("inf"), "NaN or infinite"),
])
def test_bad_affinity_values_are_refused_by_every_path_naming_the_voxel(client, tmp_path, value,
                                                                        match):
    aff = AFF.copy()
    aff[1, 9, 10, 11] = value
    where = r"channel 1, voxel \(9, 10, 11\)"
    for run in (lambda: segkit.watershed(aff),
                lambda: segkit.agglomerate(aff, 0.5, mode="mean"),
                lambda: segkit.agglomerate(aff, 0.5),
                lambda: segkit.chunked_agglomerate(aff, 8, 0.5, client=client,
                                                   workdir=tmp_path / "np")):
        with pytest.raises(ValueError, match=match) as error:
            run()
        assert error.match(where)
    # a zarr volume is never read whole by the client: its chunk's task names the voxel
    z = zarr.open_array(store=str(tmp_path / "in.zarr"), mode="w", shape=aff.shape,
                        chunks=(3, 8, 8, 8), dtype="float32")
    z[:] = aff
    with pytest.raises(ValueError, match=match) as error:
        segkit.chunked_agglomerate(z, 8, 0.5, client=client, workdir=tmp_path / "z")
    assert error.match(where)


def test_affinities_of_exactly_0_and_1_are_accepted_and_chunked_equals_whole(client):
    aff = (np.round(AFF) + 0.0).astype(np.float32)  # only 0 and 1: the range's two ends
    whole = segkit.agglomerate(aff, 0.5, mode="mean")
    assert np.array_equal(segkit.chunked_agglomerate(aff, 6, 0.5, client=client)[:], whole)


@pytest.mark.parametrize("limit", [1e30, 2.0 ** 70, 1e300])
def test_a_huge_size_limit_merges_every_touching_basin(limit):
    # f(w) far above the voxel count: every segment is "small", so every edge merges and the
    # segments are the 6-connected components of the basins' voxels (the independent
    # reference). The int64 cast of 1e30 once gave a negative limit: no merge at all.
    aff = em_volume(16, seed=4).affinities
    basins = segkit.watershed(aff)
    reference, n = ndimage.label(basins != 0)
    seg = segkit.agglomerate(aff, 0.0, size_fn=lambda w: np.full(len(w), limit), dust=0)
    assert n < len(np.unique(basins)) - 1  # merging happened in the reference
    assert same_partition(seg, reference)
    with_dust = segkit.agglomerate(aff, 0.0, size_fn=lambda w: np.full(len(w), limit))
    sizes = np.bincount(reference.ravel())
    kept = np.isin(reference, np.flatnonzero(sizes >= 100)) & (reference != 0)
    assert np.array_equal(with_dust != 0, kept)


def _boom(w):
    raise ZeroDivisionError("boom")


@pytest.mark.parametrize("size_fn", [
    lambda w: np.full(len(w), np.nan),
    lambda w: np.full(len(w), np.inf),
    lambda w: -np.ones(len(w)),
    lambda w: 5.0,                       # not one limit per edge
    lambda w: np.array(["big"] * len(w)),
    _boom,
    "square",
])
def test_bad_size_functions_are_named(size_fn):
    with pytest.raises(ValueError, match="size_fn"):
        segkit.agglomerate(AFF, 0.5, size_fn=size_fn)


@pytest.mark.parametrize("kw, match", [
    (dict(size=-1), "size"),
    (dict(size=float("nan")), "size"),
    (dict(dust=float("nan")), "dust"),
    (dict(dust=-3), "dust"),
    (dict(mode="median"), "mode"),
    (dict(basins=np.full(AFF.shape[1:], 1.5)), "basins"),
    (dict(basins=-np.ones(AFF.shape[1:], np.int64)), "basins"),
])
def test_bad_agglomeration_options_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        segkit.agglomerate(AFF, 0.5, **kw)


@pytest.mark.parametrize("size_threshold", [-1, float("nan"), "10"])
def test_bad_dust_sizes_of_the_watershed_are_named(size_threshold):
    with pytest.raises(ValueError, match="size_threshold"):
        segkit.watershed(AFF, size_threshold=size_threshold)


@pytest.mark.parametrize("chunks", [2.5, True, "8", (8, 8, 8.0), (8, 8), (8, 0, 8), None,
                                    (8, 8, -1)])
def test_bad_chunks_are_named(client, chunks):
    with pytest.raises(ValueError, match="chunks"):
        segkit.chunked_agglomerate(AFF, chunks, 0.5, client=client)


@pytest.mark.parametrize("n_workers", [0, -2, 1.5, None])
def test_bad_worker_counts_are_named_not_a_hang(n_workers):
    # n_workers=0 once started a cluster without workers, and the run waited for ever
    with pytest.raises(ValueError, match="n_workers"):
        segkit.chunked_agglomerate(AFF, 8, 0.5, n_workers=n_workers)
    with pytest.raises(ValueError, match="n_workers"):
        segkit.local_cluster(n_workers)


@pytest.mark.parametrize("bad", [np.nan, -1.0, 2.5])
def test_bad_labels_are_named_by_the_metrics_and_the_boundary_map(bad):
    # cast to uint64 as they were, NaN and -1 became huge ids: a score of a wrong labelling
    from segkit import boundary, metrics

    truth = np.repeat(np.arange(4.0), 16).reshape(4, 4, 4)
    seg = truth.copy()
    seg[1, 2, 3] = bad
    with pytest.raises(ValueError, match=r"seg must be integer labels >= 0; seg\[1, 2, 3\]"):
        metrics.scores(truth, seg)
    with pytest.raises(ValueError, match=r"truth must be integer labels"):
        metrics.adapted_rand(seg, truth)
    with pytest.raises(ValueError, match=r"labels must be integer labels"):
        boundary.boundary_map(seg)
    assert metrics.adapted_rand(truth, truth.astype(np.int64))["f"] == pytest.approx(1.0)


def test_a_client_that_is_not_a_client_is_named():
    with pytest.raises(ValueError, match="client must be a dask.distributed.Client"):
        segkit.chunked_agglomerate(AFF, 8, 0.5, client="local")
