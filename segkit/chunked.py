"""Chunked mean-affinity agglomeration on Dask: the whole-volume answer, chunk by chunk.

After Lu, Zlateski and Seung's distributed agglomeration (seung-lab/abiss). The volume lives in
zarr arrays; every task reads only its own chunk from zarr (its halo, a voxel or two deep, comes
from the neighbours' face slabs through Dask) and hands on small graphs.
``chunked_agglomerate(aff, chunks, threshold)`` equals
``segkit.agglomerate(aff, threshold, mode="mean")`` on the whole volume, voxel for voxel (ids
included: both name a segment by its first voxel), for every chunking, ragged ones included.

0. **Shells** (one task per chunk): the chunk's affinities on its six faces, 2 layers deep.
   Reading the halo from zarr instead would decode the 26 neighbouring storage chunks whole.
1. **Basins per chunk** (one task per chunk): steepest ascent with a 2-voxel halo, plateau
   division inside the chunk, components. Two things cross chunk faces: kept edges that point
   into a neighbour chunk (linked afterwards), and the rare plateaus that straddle a face (their
   even split needs the whole plateau: gathered and divided on the client, in global raster
   order, as the whole-volume run would). Fragment labels go to a zarr array; those of the
   three upper faces also go to round 0 of the next chunks (their 1-voxel low halo), and all
   six faces to the linking task (a crossing edge's target lies on the face next door).
2. **Linking** (one task): union-find over the links; a basin's id is its smallest fragment
   id, 1 + the raster index of its first voxel, as in ``segkit.watershed``.
3. **Round 0** (one task per chunk, running beside the linking, not after it): the region
   graph of the chunk's fragments (each voxel edge belongs to the chunk of its upper voxel;
   sums are exact integers, so any order of adding gives the same bits), then mean
   agglomeration in which regions touching an inner chunk face are *frozen* (their interface
   may continue next door) and regions whose best edge leads to a frozen one are *blocked*.
   Linking renames only fragments that round 0 freezes anyway (those on a face, and the rare
   ones next to a deferred plateau voxel), so fragment ids serve: a basin cut into two frozen
   fragments only splits a neighbour's edge to it in two, and the higher of the two parts
   blocks that neighbour whenever the whole edge would. Each merge made is one the
   whole-volume run makes too (see ``segkit.linkage``). Finished regions are dropped; frozen
   and blocked ones, with their edges (sums and counts), go up.
4. **Rounds 1, 2, ...**: a parent task takes up to 2x2x2 children (chunk size doubles in every
   dimension), adds their graphs (round 1 renames fragments to basins first), freezes only
   what touches its own inner faces, and merges again, until one task covers the volume and
   nothing is frozen. The top goes in two steps (``chunk_grid.join_factor``): two halves,
   merged side by side, then a root that joins them across one plane. Each task's summary
   (its merges and statistics, not its graph) rides up with its result.
5. **Relabel** (one task per group of 8 chunks): fragments -> basins -> the merges of every
   round, the maps chained into one: all rounds below the root while the root runs, then the
   root's on top.

The driver submits the whole graph at once and only waits: nothing serial runs on it. Chunks
go to workers in Z-order runs (``chunk_grid.owners``), loosely (Dask may move a task to
balance the load): neighbours then share a worker, so their face slabs, and most parents'
children, stay in its memory instead of crossing between processes. What stays serial is the
root and the last compose step (a few hundredths of the work at 256^3 / 64^3).

The tasks live in ``segkit.chunk_basins`` (steps 0-2) and ``segkit.chunk_rounds`` (3-5), the
grid and the halos in ``segkit.chunk_grid``; this module submits them.

With no ``client``, a ``dask.distributed.LocalCluster`` of threads in this process is started
(and closed after): the kernels release the GIL, and no worker process re-imports the caller's
script (Dask spawns them), so a script needs no main guard. Any ``dask.distributed.Client``
works unchanged (``local_cluster`` for worker processes), provided its workers can open the
zarr arrays (a shared file system for a real cluster). The workdir's stores are never replaced
unasked (``overwrite=True``), nor ever the input's.
"""

from __future__ import annotations

import atexit
import itertools
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from . import chunk_basins as _frag
from . import chunk_grid as _grid
from . import chunk_rounds as _rounds
from .validate import arguments

RELABEL_GROUP = 8  # chunks per relabel task


# ----------------------------------------------------------------------------- driver
def local_cluster(n_workers: int = 2, **kwargs):
    """A ``dask.distributed.LocalCluster`` of ``n_workers`` single-threaded worker processes
    on loopback (the dashboard on a free port); ``processes=False``: threads in this process,
    as ``chunked_agglomerate`` starts one when given no client. Worker processes re-import the
    main script (Dask's start method is spawn): a script that calls this needs an
    ``if __name__ == "__main__":`` guard, and a clear RuntimeError says so when it has none.

    Unlike Dask's default, the workers keep glibc's own malloc trimming. Dask's nanny sets
    ``MALLOC_TRIM_THRESHOLD_=65536`` to hand freed memory back to the system sooner; setting
    it also freezes glibc's adaptive mmap threshold, so every array over 128 KiB is a fresh
    mmap whose pages fault in one by one. Each task here allocates megabytes of chunk arrays:
    with the setting, reading every affinity chunk of a 256^3 volume once took twice the CPU
    of the same reads in a plain process (0.62 against 0.29 s), and a whole chunked run 1.65x
    the time. Other keyword arguments go to ``LocalCluster``."""
    import dask
    from dask.distributed import LocalCluster

    n_workers = arguments(n_workers=n_workers)
    options = {"n_workers": n_workers, "threads_per_worker": 1, "processes": True,
               "dashboard_address": "127.0.0.1:0", **kwargs}
    if options["processes"]:  # (workers in this process talk in-process, not over TCP)
        options.setdefault("host", "127.0.0.1")
    # None drops the variable from what the nannies set before starting their workers
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
        try:
            return LocalCluster(**options)
        except Exception as error:
            hint = _spawn_hint() if options["processes"] else None
            if hint is None:
                raise
            raise RuntimeError(hint) from error


def _spawn_hint():
    """Why worker processes may have failed to start, when this is a script without a main
    guard (Dask's "Nanny failed to start" says nothing of it), else None."""
    import sys

    import dask

    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    method = dask.config.get("distributed.worker.multiprocessing-method", "spawn")
    if script is None or method == "fork":
        return None
    return (f"Dask could not start its worker processes. With the {method!r} start method "
            f"each worker re-imports the main script {script!r}; if that script starts the "
            "cluster (segkit.local_cluster, or a chunked run on it) at import time, every "
            "worker tries again and fails. Put the script's code under `if __name__ == "
            "\"__main__\":`, or use workers in this process: local_cluster(n, processes=False) "
            "(what chunked_agglomerate starts when given no client).")


# The stores a run writes in its workdir (aff.zarr only for a numpy input).
STORES = ("aff.zarr", "fragments.zarr", "segmentation.zarr")


def _store_dir(arr):
    """The folder of a zarr array kept in a local directory store, else None."""
    root = getattr(getattr(arr, "store", None), "root", None)  # zarr 3's LocalStore
    if root is None:
        return None
    return (Path(root) / (getattr(arr, "path", "") or "")).resolve()


def _claim_stores(workdir, aff, overwrite):
    """{name: path} of the stores this run writes in ``workdir``. Refuses (naming the path) a
    store that exists unless ``overwrite``, and always one that holds or contains the input
    ``aff`` (a zarr array stored inside the workdir): replacing it would destroy the input."""
    import zarr

    work = Path(workdir)
    if work.exists() and not work.is_dir():
        raise ValueError(f"workdir {str(work)!r} is not a folder")
    names = STORES[1:] if isinstance(aff, zarr.Array) else STORES
    paths = {n: work / n for n in names}
    source = _store_dir(aff) if isinstance(aff, zarr.Array) else None
    for p in paths.values():
        q = p.resolve()
        if source is not None and (q == source or q in source.parents or source in q.parents):
            raise ValueError(f"chunked_agglomerate would write {str(p)!r}, which holds its input "
                             f"aff ({str(source)!r}): choose another workdir")
    existing = [str(p) for p in paths.values() if p.exists()]
    if existing and not overwrite:
        raise FileExistsError(f"{existing[0]!r} exists: chunked_agglomerate writes "
                              f"{', '.join(names)} in workdir {str(work)!r}; pass "
                              "overwrite=True to replace them, or choose another workdir")
    return paths


def _check_input(aff):
    """A numpy ``aff`` checked whole (``segkit.validate``); a zarr one by shape and dtype here,
    its values chunk by chunk where the tasks read them (``chunk_basins.basins_task``)."""
    import zarr

    if not isinstance(aff, zarr.Array):
        return arguments(aff=aff)
    if aff.ndim != 4 or aff.shape[0] != 3 or min(aff.shape[1:], default=0) < 1:
        raise ValueError(f"aff must have shape (3, Z, Y, X), got {aff.shape}")
    if not np.issubdtype(aff.dtype, np.floating):
        raise ValueError(f"aff must be floating point affinities in [0, 1], got {aff.dtype}")
    return aff


def _as_zarr(aff, chunks, path, mode):
    """``aff`` (checked by ``_check_input``) as a zarr array: a numpy one written to ``path``."""
    import zarr

    if isinstance(aff, zarr.Array):
        return aff
    z = zarr.open_array(store=str(path), mode=mode, shape=aff.shape, chunks=(3, *chunks),
                        dtype="float32")
    z[:] = aff
    return z


def chunked_agglomerate(aff, chunks, threshold: float, client=None, *, low: float = 0.0001,
                        high: float = 0.9999, workdir=None, n_workers: int = 2,
                        return_info: bool = False, progress: bool = False,
                        overwrite: bool = False):
    """Mean-affinity agglomeration of ``aff`` (numpy or zarr, (3, Z, Y, X)) chunk by chunk on
    Dask; returns the segmentation as a zarr array (``[:]`` for numpy), equal to
    ``segkit.agglomerate(aff, threshold, mode="mean", low=low, high=high)``, and refusing what
    it refuses (``segkit.validate``; a zarr input's values as its chunks are read).

    ``chunks``: the first round's chunk shape (int or (z, y, x)); later rounds double it.
    ``client``: a ``dask.distributed.Client``; None starts a LocalCluster of ``n_workers``
    single-threaded workers in this process (threads: the numba kernels release the GIL; no
    process is spawned, so a script needs no ``if __name__ == "__main__":`` guard) and closes
    it afterwards; for worker processes pass ``Client(segkit.local_cluster(n))``.
    ``workdir``: where the zarr arrays go (default: a temporary folder removed at exit): it
    writes ``STORES`` there (``aff.zarr`` for a numpy input only) and refuses to replace one
    that exists unless ``overwrite=True``, or ever the input itself. ``return_info=True`` also
    returns per-round statistics (frozen and blocked regions, merges, seconds and bytes per
    task). ``progress=True`` shows a tqdm bar of finished tasks.
    """
    import zarr
    from dask.distributed import wait

    threshold, low, high, chunks, n_workers = arguments(
        threshold=threshold, low=low, high=high, chunks=chunks, n_workers=n_workers)
    aff = _check_input(aff)
    if client is not None and not callable(getattr(client, "submit", None)):
        raise ValueError(f"client must be a dask.distributed.Client (or None: a local cluster "
                         f"of threads), got {client!r}")
    if workdir is None:
        workdir = tempfile.mkdtemp(prefix="segkit-")
        atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    paths = _claim_stores(workdir, aff, overwrite)
    mode = "w" if overwrite else "w-"  # "w-": a store made since the check is not replaced
    own_cluster = client is None
    if own_cluster:
        from dask.distributed import Client

        # memory_limit=0: each in-process worker would measure the whole process's memory
        # against its share of the machine's, and pause (the run stalls) far too early
        cluster = local_cluster(n_workers, processes=False, memory_limit=0)
        client = Client(cluster)
    try:
        Path(workdir).mkdir(parents=True, exist_ok=True)
        aff_z = _as_zarr(aff, chunks, paths.get("aff.zarr"), mode)
        shape = tuple(aff_z.shape[1:])
        frag = zarr.open_array(store=str(paths["fragments.zarr"]), mode=mode, shape=shape,
                               chunks=chunks, dtype="uint64", fill_value=0)
        seg = zarr.open_array(store=str(paths["segmentation.zarr"]), mode=mode, shape=shape,
                              chunks=chunks, dtype="uint64", fill_value=0)
        boxes = _grid.boxes(shape, chunks)
        # (no workers yet, as on a cluster still scaling up: no placement)
        owner = _grid.owners(boxes, sorted(client.scheduler_info()["workers"]) or [None])

        def submit(fn, *args, priority=0):
            return client.submit(fn, *args, pure=False, priority=priority)

        def submit_all(fn, args, priority=0):
            """One task per key of ``args`` (key -> argument tuple), sent in one message per
            worker: each goes to its key's owner, loosely (Dask may still move it to balance
            the load)."""
            out = {}
            for w in dict.fromkeys(owner[k] for k in args):
                keys = [k for k in args if owner[k] == w]
                columns = zip(*[args[k] for k in keys], strict=True)
                futures = (client.map(fn, *columns, pure=False, priority=priority)
                           if w is None else
                           client.map(fn, *columns, pure=False, priority=priority, workers=[w],
                                      allow_other_workers=True))
                out.update(zip(keys, futures, strict=True))
            return {k: out[k] for k in args}

        t0 = time.perf_counter()
        # The whole graph goes in at once (the driver then only waits); the zarr handles go
        # to the workers once, not pickled into every task.
        aff_f, frag_f, seg_f = client.scatter([aff_z, frag, seg], broadcast=True, hash=False)
        # every chunk reads itself once; its face slabs go to its neighbours through Dask
        # Shells, basins and linking first (priority 1): the parents wait for the linking,
        # which waits for every basin; round 0 fills the time around it.
        shells = submit_all(_frag.shell_task,
                            {idx: (aff_f, lo, hi) for idx, (lo, hi) in boxes.items()}, priority=1)
        args = {}
        for idx, (lo, hi) in boxes.items():
            elo = [max(0, v - _grid.AFF_HALO) for v in lo]
            ehi = [min(s, h + _grid.AFF_HALO) for s, h in zip(shape, hi, strict=True)]
            halo = [((axis, side), shells[n])
                    for n, axis, side in _grid.halo_sources(idx, boxes, chunks, elo, ehi)]
            args[idx] = (aff_f, frag_f, lo, hi, low, high, halo)
        basins = submit_all(_frag.basins_task, args, priority=1)
        del shells  # released once the basins tasks are done with them
        bm = submit(_frag.link_task, frag_f, shape, chunks, list(basins.values()), priority=1)
        args = {}
        for idx, (lo, hi) in boxes.items():
            elo = [max(0, v - 1) for v in lo]
            halo = [(axis, basins[n])
                    for n, axis, _ in _grid.halo_sources(idx, boxes, chunks, elo, hi)]
            args[idx] = (aff_f, frag_f, lo, hi, basins[idx], threshold, halo)
        level = submit_all(_rounds.round0_task, args)
        del basins
        rounds = [level]

        def placed(round_, idx):  # round 0's tasks are keyed by grid index, later ones' by
            return owner[(round_, idx) if round_ else idx]  # (round, grid index)

        size = list(chunks)
        while len(level) > 1:
            factor = _grid.join_factor(shape, size)
            size = [s * f for s, f in zip(size, factor, strict=True)]
            args = {}
            for pidx, (lo, hi) in _grid.boxes(shape, size).items():
                kids = [k for k in itertools.product(*[range(f * i, f * i + f)
                                                       for i, f in zip(pidx, factor,
                                                                       strict=True)])
                        if k in level]
                # a parent goes where its first child is (in Z-order all its children are
                # consecutive, so mostly on one worker)
                owner[(len(rounds), pidx)] = placed(len(rounds) - 1, kids[0])
                args[(len(rounds), pidx)] = ([level[k] for k in kids], lo, hi, shape,
                                             threshold, len(rounds),
                                             bm if len(rounds) == 1 else None)
            nxt = submit_all(_rounds.parent_task, args)
            level = {k[1]: f for k, f in nxt.items()}
            rounds.append(level)
        (root,) = level.values()
        # submitted before the relabel tasks, so it runs right after the root
        summaries_f = submit(_rounds.root_summaries, root) if return_info else None
        # the maps of every round, chained into one (sorted once, not in every relabel task):
        # all but the root's while the root merges, then the root's on top
        if len(rounds) > 1:  # (on the worker of the last half: the root goes to the first's)
            top, last = len(rounds) - 1, list(rounds[-2])[-1]
            owner["below"] = placed(top - 1, last)
            below = submit_all(_rounds.compose_task, {"below": (bm, list(rounds[-2].values()))})
            final = submit(_rounds.compose_task, below["below"], [root], top)
        else:
            final = submit(_rounds.compose_task, bm, [root])
        # in Z-order runs of up to 8 chunks (one owner's 2x2x2 blocks, mostly)
        order = sorted(boxes, key=_grid.morton)
        groups = {order[k]: [boxes[i] for i in order[k:k + RELABEL_GROUP]]
                  for k in range(0, len(order), RELABEL_GROUP)}
        done = list(submit_all(_rounds.relabel_task, {idx: (frag_f, seg_f, group, [final])
                                               for idx, group in groups.items()}).values())
        if progress:
            from dask.distributed import as_completed
            from tqdm.auto import tqdm

            pending = [f for r in rounds for f in r.values()] + done
            for _ in tqdm(as_completed(pending), total=len(pending), desc="chunk tasks"):
                pass
        wait([bm])
        t_basins = time.perf_counter() - t0
        wait([root])
        t_rounds = time.perf_counter() - t0 - t_basins
        if return_info:  # the root's summaries (the graphs stay on the workers), fetched
            # while the relabel tasks run rather than after them
            basin_map, summaries = client.gather([bm, summaries_f])
        client.gather(done)
        if return_info:
            results = [[] for _ in rounds]
            for d in summaries:
                if d["round"] == 0:  # in basin ids, as every later round names them
                    for k in ("frozen", "blocked"):
                        d[k] = np.unique(_rounds.rename(d[k].copy(), *basin_map))
                results[d["round"]].append(d)
            for res in results:  # grid order, as the tasks were made
                res.sort(key=lambda d: tuple(d["lo"]))
        t_total = time.perf_counter() - t0
    finally:
        if own_cluster:
            client.close()
            cluster.close()
    if not return_info:
        return seg
    info = {"chunks": chunks, "shape": shape, "seconds": {"basins": t_basins,
            "rounds": t_rounds, "total": t_total}, "basin_map": basin_map, "rounds": [],
            "fragments": frag}
    for _k, res in enumerate(results):
        info["rounds"].append([{"lo": r["lo"], "hi": r["hi"], "frozen": r["frozen"],
                                "blocked": r["blocked"], "merges": r["merges"],
                                "map": r["map"], "edges_up": r["edges_up"],
                                "seconds": r["seconds"], "cpu_seconds": r["cpu_seconds"],
                                "bytes": r["bytes"]} for r in res])
    return seg, info
