"""Chunked agglomeration on Dask equals the whole-volume answer, for every chunking."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mlsys_datasets import em_volume

import segkit


@pytest.fixture(scope="module")
def client():
    from dask.distributed import Client

    # in-process workers: fast to start; the real-process path has its own test below
    with Client(processes=False, n_workers=1, threads_per_worker=2,
                dashboard_address=":0") as c:
        yield c


@st.composite
def volumes(draw):
    """Small affinity volumes, often quantised (many exact ties: plateaus and equal means),
    with a chunk shape that may be ragged, tiny or bigger than the volume."""
    shape = tuple(draw(st.integers(2, 12)) for _ in range(3))
    seed = draw(st.integers(0, 2 ** 16))
    levels = draw(st.sampled_from([0, 2, 4, 8]))
    rng = np.random.default_rng(seed)
    aff = rng.uniform(0, 1, (3, *shape))
    if levels:
        aff = np.round(aff * levels) / levels
    chunks = tuple(draw(st.integers(1, 14)) for _ in range(3))
    threshold = draw(st.sampled_from([0.2, 0.5, 0.75]))
    return aff.astype(np.float32), chunks, threshold


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(case=volumes())
def test_chunked_equals_whole_for_any_chunking(client, case):
    aff, chunks, threshold = case
    whole = segkit.agglomerate(aff, threshold, mode="mean", low=0.1, high=0.9)
    seg = segkit.chunked_agglomerate(aff, chunks, threshold, client=client, low=0.1, high=0.9)
    assert np.array_equal(seg[:], whole)  # same ids too: both name a segment by its first voxel


@pytest.mark.parametrize("chunks", [(16, 16, 16), (10, 13, 7), (40, 5, 40), (40, 40, 40)])
def test_chunked_equals_whole_on_an_em_volume(client, chunks):
    aff = em_volume(40, seed=7, missing_sections=1, misaligned_sections=1).affinities
    whole = segkit.agglomerate(aff, 0.5, mode="mean")
    seg, info = segkit.chunked_agglomerate(aff, chunks, 0.5, client=client, return_info=True)
    assert np.array_equal(seg[:], whole)
    n_chunks = len(info["rounds"][0])
    assert len(info["rounds"][-1]) == 1
    if n_chunks > 1:  # something was frozen in the first round and resolved later
        assert sum(len(r["frozen"]) for r in info["rounds"][0]) > 0
        assert sum(r["merges"] for r in info["rounds"][-1]) > 0


def test_zarr_input_and_rerun_bit_identical(client, tmp_path):
    import zarr

    aff = em_volume(24, seed=8).affinities
    z = zarr.open_array(store=str(tmp_path / "aff.zarr"), mode="w", shape=aff.shape,
                        chunks=(3, 8, 8, 8), dtype="float32")
    z[:] = aff
    a = segkit.chunked_agglomerate(z, 8, 0.5, client=client, workdir=tmp_path / "a")[:]
    b = segkit.chunked_agglomerate(z, 8, 0.5, client=client, workdir=tmp_path / "b")[:]
    assert a.dtype == np.uint64 and np.array_equal(a, b)
    assert np.array_equal(a, segkit.agglomerate(aff, 0.5, mode="mean"))


@pytest.mark.parametrize("seed", [8, 78])
@pytest.mark.parametrize("threshold", [0.2, 0.5])
def test_round0_freezes_fragments_next_to_deferred_plateaus(client, seed, threshold):
    # Round 0 runs before linking, on fragment ids. Besides the face fragments, linking can
    # rename a fragment inside the chunk that a deferred plateau voxel drains into; round 0
    # must freeze it too. These quantised volumes (found by hypothesis) go wrong without that.
    rng = np.random.default_rng(seed)
    aff = (np.round(rng.uniform(0, 1, (3, 4, 4, 6)) * 4) / 4).astype(np.float32)
    seg = segkit.chunked_agglomerate(aff, (4, 3, 4), threshold, client=client)
    assert np.array_equal(seg[:], segkit.agglomerate(aff, threshold, mode="mean"))


def test_without_a_client_a_local_cluster_runs_it():
    aff = em_volume(24, seed=9).affinities
    seg = segkit.chunked_agglomerate(aff, (12, 12, 12), 0.5, n_workers=2)
    assert np.array_equal(seg[:], segkit.agglomerate(aff, 0.5, mode="mean"))


def test_a_cluster_of_worker_processes_runs_it():
    from dask.distributed import Client

    aff = em_volume(24, seed=9).affinities
    with segkit.local_cluster(2) as cluster, Client(cluster) as c:
        seg = segkit.chunked_agglomerate(aff, (12, 12, 12), 0.5, client=c)[:]
    assert np.array_equal(seg, segkit.agglomerate(aff, 0.5, mode="mean"))


def _script(tmp_path, code):
    import subprocess
    import sys

    path = tmp_path / "user_script.py"
    path.write_text(code)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)


def test_a_script_without_a_main_guard_runs_on_the_default_cluster(tmp_path):
    # Worker processes started by spawn re-import the script, which started them again: the
    # run died with an empty "Nanny failed to start". The default cluster now has its
    # workers in the script's own process.
    r = _script(tmp_path, (
        "import numpy as np\n"
        "import segkit\n"
        "from mlsys_datasets import em_volume\n"
        "aff = em_volume(16, seed=9).affinities\n"
        "seg = segkit.chunked_agglomerate(aff, 8, 0.5)\n"
        "print('equal', np.array_equal(seg[:], segkit.agglomerate(aff, 0.5, mode='mean')))\n"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "equal True" in r.stdout


def test_worker_processes_started_by_a_script_without_a_main_guard_say_what_to_do(tmp_path):
    r = _script(tmp_path, "import segkit\nsegkit.local_cluster(1).close()\nprint('started')\n")
    assert r.returncode != 0 and "started" not in r.stdout
    assert 'if __name__ == "__main__":' in r.stderr and "processes=False" in r.stderr, \
        r.stderr[-3000:]


def test_stores_in_the_workdir_are_never_replaced_unasked(client, tmp_path):
    import zarr

    aff = em_volume(16, seed=5).affinities
    whole = segkit.agglomerate(aff, 0.5, mode="mean")
    # the user's own array happens to be called segmentation.zarr: it survives, named
    mine = zarr.open_array(store=str(tmp_path / "segmentation.zarr"), mode="w", shape=(5,),
                           dtype="int32")
    mine[:] = np.arange(5)
    with pytest.raises(FileExistsError, match="segmentation.zarr.*overwrite=True"):
        segkit.chunked_agglomerate(aff, 8, 0.5, client=client, workdir=tmp_path)
    assert np.array_equal(zarr.open_array(str(tmp_path / "segmentation.zarr"))[:],
                          np.arange(5))
    assert not (tmp_path / "aff.zarr").exists() and not (tmp_path / "fragments.zarr").exists()
    # a second run into the first one's workdir: refused, the first result intact
    first = segkit.chunked_agglomerate(aff, 8, 0.5, client=client, workdir=tmp_path / "run")
    with pytest.raises(FileExistsError, match="aff.zarr"):
        segkit.chunked_agglomerate(aff[:, ::-1].copy(), 8, 0.5, client=client,
                                   workdir=tmp_path / "run")
    assert np.array_equal(first[:], whole)
    # asked: replaced
    again = segkit.chunked_agglomerate(aff, 4, 0.5, client=client, workdir=tmp_path / "run",
                                       overwrite=True)
    assert np.array_equal(again[:], whole)
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="workdir.*not a folder"):
        segkit.chunked_agglomerate(aff, 8, 0.5, client=client, workdir=tmp_path / "file")


@pytest.mark.parametrize("name", ["segmentation.zarr", "fragments.zarr", "sub"])
def test_the_input_store_is_never_destroyed(client, tmp_path, name):
    import zarr

    aff = em_volume(16, seed=6).affinities
    # the input lives where the run would write (or the workdir is inside it): refused even
    # with overwrite=True, and the input keeps every value
    path = tmp_path / name if name != "sub" else tmp_path / "in.zarr"
    work = tmp_path if name != "sub" else path / name
    z = zarr.open_array(store=str(path), mode="w", shape=aff.shape, chunks=(3, 8, 8, 8),
                        dtype="float32")
    z[:] = aff
    with pytest.raises(ValueError, match="input"):
        segkit.chunked_agglomerate(z, 8, 0.5, client=client, workdir=work, overwrite=True)
    assert np.array_equal(zarr.open_array(str(path))[:], aff)


def test_a_zarr_input_called_aff_zarr_in_the_workdir_is_read_not_rewritten(client, tmp_path):
    import zarr

    aff = em_volume(16, seed=6).affinities
    z = zarr.open_array(store=str(tmp_path / "aff.zarr"), mode="w", shape=aff.shape,
                        chunks=(3, 8, 8, 8), dtype="float32")
    z[:] = aff
    seg = segkit.chunked_agglomerate(z, 4, 0.5, client=client, workdir=tmp_path)
    assert np.array_equal(seg[:], segkit.agglomerate(aff, 0.5, mode="mean"))
    assert np.array_equal(zarr.open_array(str(tmp_path / "aff.zarr"))[:], aff)


def test_local_cluster_workers_keep_glibc_malloc_trimming_and_one_blas_thread():
    import os

    from dask.distributed import Client

    with segkit.local_cluster(1) as cluster, Client(cluster) as c:
        env = list(c.run(lambda: (os.environ.get("MALLOC_TRIM_THRESHOLD_"),
                                  os.environ.get("OMP_NUM_THREADS"))).values())
        assert list(c.scheduler_info()["workers"].values())[0]["nthreads"] == 1
    # Dask's nanny would set MALLOC_TRIM_THRESHOLD_=65536 (see local_cluster); its other
    # settings stay, and the global Dask config is left as it was
    assert env == [(os.environ.get("MALLOC_TRIM_THRESHOLD_"), "1")]
    import dask
    assert dask.config.get("distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_") == 65536


def test_bad_chunks_are_named(client):
    aff = np.zeros((3, 4, 4, 4), np.float32)
    with pytest.raises(ValueError, match="chunks"):
        segkit.chunked_agglomerate(aff, (4, 0, 4), 0.5, client=client)
    with pytest.raises(ValueError, match="chunks"):
        segkit.chunked_agglomerate(aff, (4, 4), 0.5, client=client)


@pytest.mark.parametrize("shape, size, factor", [
    ((256, 256, 256), (64, 64, 64), [2, 2, 2]),     # 4x4x4 tasks: chunk size doubles
    ((256, 256, 256), (128, 128, 128), [1, 2, 2]),  # 2x2x2: two z-halves first ...
    ((256, 256, 256), (128, 256, 256), [2, 1, 1]),  # ... then the root joins them
    ((100, 64, 200), (64, 64, 64), [2, 1, 2]),      # 2x1x4: not the top yet
    ((100, 64, 128), (64, 64, 64), [1, 1, 2]),      # 2x1x2: z-halves; z is joined last
    ((64, 300, 64), (64, 256, 64), [1, 2, 1]),      # two tasks: the root joins them
])
def test_join_factor_splits_only_the_top_round(shape, size, factor):
    from segkit import chunk_grid

    assert chunk_grid.join_factor(shape, size) == factor


@settings(max_examples=40, deadline=None)
@given(shape=st.tuples(*[st.integers(1, 9)] * 3), chunks=st.tuples(*[st.integers(1, 5)] * 3),
       seed=st.integers(0, 2 ** 16))
def test_halos_from_neighbour_slabs_equal_the_box_read_from_the_volume(shape, chunks, seed):
    """The basins task's 2-voxel halo and round 0's 1-voxel low halo, put together from the
    neighbours' face slabs, are exactly the wider box cut from the volume (chunks of 1 voxel
    included, whose halo reaches two chunks away)."""
    from segkit import chunk_basins, chunk_grid

    rng = np.random.default_rng(seed)
    aff = rng.uniform(0, 1, (3, *shape)).astype(np.float32)
    labels = rng.integers(1, 50, shape).astype(np.uint64)
    boxes = chunk_grid.boxes(shape, chunks)
    shells = {idx: chunk_basins.shell_task(aff, lo, hi) for idx, (lo, hi) in boxes.items()}
    for idx, (lo, hi) in boxes.items():
        elo = [max(0, v - chunk_grid.AFF_HALO) for v in lo]
        ehi = [min(s, h + chunk_grid.AFF_HALO) for s, h in zip(shape, hi, strict=True)]
        box = np.full((3, *[h - e for e, h in zip(elo, ehi, strict=True)]), np.nan, np.float32)
        box[:, lo[0] - elo[0]:hi[0] - elo[0], lo[1] - elo[1]:hi[1] - elo[1],
            lo[2] - elo[2]:hi[2] - elo[2]] = aff[:, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
        sources = chunk_grid.halo_sources(idx, boxes, chunks, elo, ehi)
        chunk_grid.paste(box, elo, [shells[n][(a, s)] for n, a, s in sources])
        assert np.array_equal(box, aff[:, elo[0]:ehi[0], elo[1]:ehi[1], elo[2]:ehi[2]])

        # round 0: the lower neighbours' upper faces (as basins_task returns them)
        llo = [max(0, v - 1) for v in lo]
        seg = np.zeros([h - e for e, h in zip(llo, hi, strict=True)], np.uint64)
        seg[lo[0] - llo[0]:, lo[1] - llo[1]:, lo[2] - llo[2]:] = labels[lo[0]:hi[0],
                                                                       lo[1]:hi[1], lo[2]:hi[2]]
        pieces = []
        for n, axis, side in chunk_grid.halo_sources(idx, boxes, chunks, llo, hi):
            assert side == 1  # only chunks below along that axis
            nlo, nhi = boxes[n]
            slo, shi = chunk_grid.slab_box(nlo, nhi, axis, 1, 1)
            pieces.append((slo, labels[slo[0]:shi[0], slo[1]:shi[1], slo[2]:shi[2]]))
        chunk_grid.paste(seg, llo, pieces)
        assert np.array_equal(seg, labels[llo[0]:hi[0], llo[1]:hi[1], llo[2]:hi[2]])


def test_z_order_owners_keep_each_parents_children_on_one_worker():
    """4x4x4 chunks on 2 workers: 32 each, and the 8 children of every round-1 parent (and
    the 4 parents of each half of the root) on the same worker."""
    from segkit import chunk_grid

    boxes = chunk_grid.boxes((64, 64, 64), (16, 16, 16))
    owner = chunk_grid.owners(boxes, ["a", "b"])
    assert sorted(owner.values()).count("a") == 32
    for parent in np.ndindex(2, 2, 2):
        kids = {owner[tuple(2 * p + d for p, d in zip(parent, o, strict=True))]
                for o in np.ndindex(2, 2, 2)}
        assert kids == {"a" if parent[0] == 0 else "b"}  # z is the slowest Z-order bit


@settings(max_examples=40, deadline=None)
@given(shape=st.tuples(*[st.integers(1, 9)] * 3), chunks=st.tuples(*[st.integers(1, 5)] * 3),
       seed=st.integers(0, 2 ** 16))
def test_target_labels_from_face_layers_equal_the_volume(shape, chunks, seed):
    """The linking task reads a target voxel's fragment from the face layers the basins
    tasks return (a voxel inside a chunk, as a divided plateau's edge may reach, from the
    zarr array): the same label as the volume holds there."""
    import zarr

    from segkit import chunk_basins, chunk_grid

    rng = np.random.default_rng(seed)
    labels = rng.integers(1, 50, shape).astype(np.uint64)
    results = []
    for lo, hi in chunk_grid.boxes(shape, chunks).values():
        core = labels[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
        lower = {a: np.take(core, 0, axis=a) for a in range(3)}
        upper = {a: (None, np.take(core, [-1], axis=a)) for a in range(3)}
        results.append(({"lo": lo, "hi": hi, "lower": lower}, upper))
    target = rng.integers(0, labels.size, 30)
    frag = zarr.array(labels)
    out = chunk_basins.target_labels(results, target, frag, shape, chunks)
    assert np.array_equal(out, labels.ravel()[target])
