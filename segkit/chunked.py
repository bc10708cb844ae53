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
   nothing is frozen. The top goes in two steps (``_join_factor``): two halves, merged side
   by side, then a root that joins them across one plane. Each task's summary (its merges
   and statistics, not its graph) rides up with its result.
5. **Relabel** (one task per group of 8 chunks): fragments -> basins -> the merges of every
   round, the maps chained into one: all rounds below the root while the root runs, then the
   root's on top.

The driver submits the whole graph at once and only waits: nothing serial runs on it. Chunks
go to workers in Z-order runs (``_owners``), loosely (Dask may move a task to balance the
load): neighbours then share a worker, so their face slabs, and most parents' children, stay
in its memory instead of crossing between processes. What stays serial is the root and the
last compose step (a few hundredths of the work at 256^3 / 64^3).

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

import numba
import numpy as np

from . import basins as _ws
from . import linkage as _agg
from .validate import affinities as _check_affinities
from .validate import arguments

FACES = [(axis, side) for axis in range(3) for side in (0, 1)]
RELABEL_GROUP = 8  # chunks per relabel task


# ----------------------------------------------------------------------------- geometry
def _boxes(shape, chunks):
    """Chunk grid: dict grid index -> (lo, hi) voxel box."""
    grid = [range(-(-s // c)) for s, c in zip(shape, chunks, strict=True)]
    out = {}
    for idx in itertools.product(*grid):
        lo = tuple(i * c for i, c in zip(idx, chunks, strict=True))
        hi = tuple(min(v + c, s) for v, c, s in zip(lo, chunks, shape, strict=True))
        out[idx] = (lo, hi)
    return out


def _morton(idx):
    """Z-order key of a grid index: the 2x2x2 children of every parent, at every round, are
    consecutive in this order."""
    key = 0
    for bit in range(21):
        for a in range(3):
            key |= ((idx[a] >> bit) & 1) << (3 * bit + 2 - a)
    return key


def _owners(boxes, workers):
    """Chunk -> worker: the chunks in Z-order, cut into one run per worker. Neighbours share a
    worker (their face slabs stay in its memory) and so do most parents' children."""
    order = sorted(boxes, key=_morton)
    return {idx: workers[k * len(workers) // len(order)] for k, idx in enumerate(order)}


def _inner_faces(lo, hi, shape):
    """(axis, side) of the box faces that are inside the volume (not on its border)."""
    return [(a, s) for a, s in FACES if (lo[a] > 0 if s == 0 else hi[a] < shape[a])]


def _join_factor(shape, size):
    """How many of the current round's tasks (boxes of ``size``) a parent joins per axis: 2
    along every axis with more than one task, so chunk size doubles. Except at the top: when
    that would join more than two tasks into the root, the round joins all those axes but the
    first, leaving two halves that merge side by side on two workers, and the root (one round
    later) joins the halves across one plane: its graph is only what they froze there."""
    grid = [-(-s // c) for s, c in zip(shape, size, strict=True)]
    factor = [2 if g > 1 else 1 for g in grid]
    if max(grid) <= 2 and factor.count(2) > 1:
        factor[factor.index(2)] = 1
    return factor


# ----------------------------------------------------------------------------- halos
# A task's halo comes from its neighbours' *slabs* (their outer layers), handed over by Dask,
# not read from zarr: reading a box 2 voxels wider than a chunk decodes the 26 neighbouring
# storage chunks whole (27x the chunk's bytes), which cost more than the watershed itself.
AFF_HALO = 2  # steepest ascent of the 1-voxel ring needs the ring's neighbours' edges too


def _slab_box(lo, hi, axis, side, width):
    """The ``width`` outermost layers of box [lo, hi) on face (axis, side)."""
    slo, shi = list(lo), list(hi)
    if side == 0:
        shi[axis] = min(hi[axis], lo[axis] + width)
    else:
        slo[axis] = max(lo[axis], hi[axis] - width)
    return tuple(slo), tuple(shi)


def _halo_sources(idx, boxes, chunks, elo, ehi):
    """(neighbour grid index, axis, side) of the slabs that cover [elo, ehi) outside chunk
    ``idx``: each neighbour whose box meets it, with the face that looks toward ``idx`` along
    the first axis where the two differ (a slab of width >= the halo holds that part)."""
    ranges = [range(e // c, (h - 1) // c + 1) for e, h, c in zip(elo, ehi, chunks, strict=True)]
    out = []
    for n in itertools.product(*ranges):
        if n == idx or n not in boxes:
            continue
        axis = next(a for a in range(3) if n[a] != idx[a])
        out.append((n, axis, 1 if n[axis] < idx[axis] else 0))
    return out


def _paste(dst, dlo, pieces):
    """Copy each (piece lo, piece array) into ``dst`` (box starting at ``dlo``) where they
    overlap; the last axes of a piece are z, y, x."""
    dhi = [d + n for d, n in zip(dlo, dst.shape[-3:], strict=True)]
    for plo, piece in pieces:
        phi = [p + n for p, n in zip(plo, piece.shape[-3:], strict=True)]
        ilo = [max(a, b) for a, b in zip(plo, dlo, strict=True)]
        ihi = [min(a, b) for a, b in zip(phi, dhi, strict=True)]
        if any(a >= b for a, b in zip(ilo, ihi, strict=True)):
            continue
        d = tuple(slice(a - o, b - o) for a, b, o in zip(ilo, ihi, dlo, strict=True))
        q = tuple(slice(a - o, b - o) for a, b, o in zip(ilo, ihi, plo, strict=True))
        dst[(Ellipsis, *d)] = piece[(Ellipsis, *q)]
    return dst


def _shell_task(aff, lo, hi):
    """The chunk's affinities on each of its six faces, ``AFF_HALO`` layers deep: what its
    neighbours need of it as halo. Reads only the chunk itself."""
    a = np.ascontiguousarray(aff[:, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]], np.float32)
    out = {}
    for axis, side in FACES:
        slo, shi = _slab_box(lo, hi, axis, side, AFF_HALO)
        sl = tuple(slice(p - o, q - o) for p, q, o in zip(slo, shi, lo, strict=True))
        out[(axis, side)] = (slo, np.ascontiguousarray(a[(slice(None), *sl)]))
    return out


# ----------------------------------------------------------------------------- step 1
def _basins_task(aff, frag, lo, hi, low, high, halo):
    """Fragments of one chunk; returns crossing links, the deferred plateau voxels, and the
    fragment labels of its three upper faces (the next chunks' 1-voxel halo in round 0).
    ``halo``: (face, neighbour's _shell_task result) pairs covering the AFF_HALO-voxel ring."""
    shape = aff.shape[1:]
    elo = [max(0, v - AFF_HALO) for v in lo]
    ehi = [min(s, h + AFF_HALO) for s, h in zip(shape, hi, strict=True)]
    a = np.empty((3, *[h - e for e, h in zip(elo, ehi, strict=True)]), np.float32)
    core = tuple(slice(v - e, h - e) for v, h, e in zip(lo, hi, elo, strict=True))
    # the one task that reads every chunk of a zarr input (its values were never seen by the
    # client): NaN or values outside [0, 1] are refused here, naming the voxel
    a[(slice(None), *core)] = _check_affinities(aff[:, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]],
                                                origin=lo)
    _paste(a, elo, [shell[face] for face, shell in halo])
    bits = _ws.steepest_ascent(a, np.float32(low), np.float32(high))
    clo = np.array([v - e for v, e in zip(lo, elo, strict=True)], np.int64)
    chi = np.array([h - e for h, e in zip(hi, elo, strict=True)], np.int64)
    deferred = _ws.defer_crossing_plateaus(bits, clo, chi)
    raw = bits.copy()
    _ws.divide_plateaus(bits, clo, chi, deferred)
    labels, crossing = _ws.components(bits, clo, chi, np.array(lo, np.int64),
                                      np.array(shape, np.int64), deferred)
    frag[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] = labels
    core = (slice(clo[0], chi[0]), slice(clo[1], chi[1]), slice(clo[2], chi[2]))
    dz, dy, dx = np.nonzero(deferred[core])
    index = ((dz + lo[0]) * shape[1] + dy + lo[1]) * shape[2] + dx + lo[2]
    upper = {}
    for axis in range(3):
        slo, _ = _slab_box(lo, hi, axis, 1, 1)
        upper[axis] = (slo, np.ascontiguousarray(np.take(labels, [-1], axis=axis)))
    # the lower faces too: a crossing edge's target lies on a face of the chunk next door
    lower = {axis: np.ascontiguousarray(np.take(labels, 0, axis=axis)) for axis in range(3)}
    return {"link": {"crossing": crossing, "deferred": index.astype(np.int64),
                     "deferred_bits": raw[core][dz, dy, dx],
                     "deferred_labels": labels[dz, dy, dx], "lo": lo, "hi": hi,
                     "lower": lower}, "upper": upper,
            "held": _near_deferred(labels, dz, dy, dx)}


def _near_deferred(labels, dz, dy, dx):
    """Fragments of the deferred plateau voxels and of their neighbours in the chunk: besides
    the fragments on the chunk's faces, the only ones that linking may rename (it joins a
    deferred voxel's fragment with the fragment one step away that its divided edge points
    to). Round 0 freezes them, so it can run before linking is done."""
    pos = np.stack([dz, dy, dx]).astype(np.int64)
    found = [labels[dz, dy, dx]]
    for axis in range(3):
        for step in (-1, 1):
            q = pos.copy()
            q[axis] += step
            inside = (q[axis] >= 0) & (q[axis] < labels.shape[axis])
            found.append(labels[q[0, inside], q[1, inside], q[2, inside]])
    ids = np.unique(np.concatenate(found).astype(np.uint64))
    return ids[ids != 0]


def _target_labels(results, target, frag, shape, chunks):
    """Fragment label of each target voxel (global raster index), read from the chunks' face
    layers (where every crossing edge's target lies: one step into the chunk next door);
    any other target (a divided plateau's edge may end inside a chunk: rare) from ``frag``."""
    faces = {}
    for link, upper in results:
        faces[tuple(link["lo"])] = (link["hi"], link["lower"],
                                    {a: np.take(upper[a][1], 0, axis=a) for a in range(3)})
    z, rem = np.divmod(target, shape[1] * shape[2])
    y, x = np.divmod(rem, shape[2])
    pos = np.stack([z, y, x])
    step = np.array(chunks, np.int64)[:, None]
    grid = pos // step
    n = [-(-v // c) for v, c in zip(shape, chunks, strict=True)]
    key = (grid[0] * n[1] + grid[1]) * n[2] + grid[2]
    order = np.argsort(key, kind="stable")
    starts = np.flatnonzero(np.r_[True, key[order][1:] != key[order][:-1]])
    out = np.zeros(len(target), np.uint64)
    found = np.zeros(len(target), bool)
    for first, last in zip(starts, [*starts[1:], len(order)], strict=True):
        sel = order[first:last]
        lo = grid[:, sel[0]] * step[:, 0]
        hi, lower, upper = faces[tuple(int(v) for v in lo)]
        loc = pos[:, sel] - lo[:, None]
        got = np.zeros(len(sel), bool)
        for axis, side in FACES:
            on = ~got & (loc[axis] == (0 if side == 0 else hi[axis] - lo[axis] - 1))
            a, b = [d for d in range(3) if d != axis]
            layer = (lower if side == 0 else upper)[axis]
            out[sel[on]] = layer[loc[a, on], loc[b, on]]
            got |= on
        found[sel] = got
    if not found.all():
        miss = ~found
        out[miss] = np.asarray(frag.vindex[z[miss], y[miss], x[miss]], np.uint64)
    return out


def _link(results, frag, shape, chunks):
    """Basin id (smallest fragment id) for every fragment that a link joins: (old, new)."""
    links = [link for link, _ in results]
    crossing = [r["crossing"] for r in links if len(r["crossing"])]
    pairs_l = [c[:, 0] for c in crossing]
    pairs_t = [c[:, 1] for c in crossing]
    index = np.concatenate([r["deferred"] for r in links] + [np.zeros(0, np.int64)])
    if len(index):
        order = np.argsort(index)
        index = index[order]
        bits = np.concatenate([r["deferred_bits"] for r in links])[order]
        labels = np.concatenate([r["deferred_labels"] for r in links])[order]
        _, src, tgt = _ws.divide_plateaus_sparse(index, bits, np.array(shape, np.int64))
        pairs_l.append(labels[src].astype(np.int64))
        pairs_t.append(tgt)
    if not pairs_l:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    left = np.concatenate(pairs_l).astype(np.uint64)
    target = np.concatenate(pairs_t)
    right = _target_labels(results, target, frag, shape, chunks)
    ids = np.unique(np.concatenate([left, right]))
    parent = np.arange(len(ids), dtype=np.int64)
    u = np.searchsorted(ids, left)
    v = np.searchsorted(ids, right)
    parent = _union(parent, u, v)  # root = smallest index = smallest id
    new = ids[parent]
    changed = new != ids
    return ids[changed], new[changed]


def _link_task(frag, shape, chunks, results):
    return _link([(r["link"], r["upper"]) for r in results], frag, shape, chunks)


def _remap(seg, maps):
    for old, new in maps:
        seg = _agg.relabel(seg, old, new)
    return seg


# ----------------------------------------------------------------------------- rounds
def _agglomerate_graph(a, b, sums, counts, tops, frozen_ids, threshold):
    """Mean agglomeration of one task's graph with ``frozen_ids`` frozen. Returns the merges
    as (old ids, new ids) and what goes up: remaining edges and ids, blocked ids."""
    ids = np.unique(np.concatenate([a, b]))
    u = np.searchsorted(ids, a).astype(np.int64)
    v = np.searchsorted(ids, b).astype(np.int64)
    state = np.zeros(len(ids), np.uint8)
    state[np.isin(ids, frozen_ids)] = _agg.FROZEN
    merges, heights, cid, alive, su, sv, ssum, scount, stop = _agg.mean_agglomeration(
        ids.astype(np.int64), u, v, sums, counts, tops, float(threshold), state)
    parent = _agg._resolve(merges, len(ids))
    new = cid[parent].astype(np.uint64)  # a kept slot carries its group's smallest id
    changed = new != ids
    keep = alive & (state[su] != _agg.FREE) & (state[sv] != _agg.FREE)
    ra, rb = cid[su[keep]].astype(np.uint64), cid[sv[keep]].astype(np.uint64)
    lo, hi = np.minimum(ra, rb), np.maximum(ra, rb)
    return {"map": (ids[changed], new[changed]), "a": lo, "b": hi, "sum": ssum[keep],
            "count": scount[keep], "top": stop[keep], "frozen": ids[state == _agg.FROZEN],
            "blocked": ids[state == _agg.BLOCKED], "merges": int(len(merges)),
            "heights": heights}


def _round0_task(aff, frag, lo, hi, own, threshold, halo):
    """Region graph of one chunk and its first round of merging, on fragment ids: it does not
    wait for linking. Linking renames only fragments on a chunk face or next to a deferred
    plateau voxel (``own["held"]``), and round 0 freezes all of those; the parents apply the
    basin map before they merge (see ``_parent_task``). ``own``: this chunk's _basins_task
    result; ``halo``: (axis, lower neighbour's _basins_task result) pairs: their upper faces
    cover the 1-voxel low halo."""
    t0, c0 = time.perf_counter(), time.process_time()
    shape = aff.shape[1:]
    hlo = [1 if v > 0 else 0 for v in lo]
    elo = [v - h for v, h in zip(lo, hlo, strict=True)]
    seg = np.zeros([h - e for e, h in zip(elo, hi, strict=True)], np.uint64)
    seg[hlo[0]:, hlo[1]:, hlo[2]:] = frag[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
    seg = _paste(seg, elo, [r["upper"][axis] for axis, r in halo])
    a = np.ascontiguousarray(aff[:, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]], np.float32)
    g = _ws.region_graph(seg, a, hlo, lo, shape)
    core = seg[hlo[0]:, hlo[1]:, hlo[2]:]
    faces = {}
    for axis, side in _inner_faces(lo, hi, shape):
        layer = np.take(core, 0 if side == 0 else -1, axis=axis)
        if side == 0:  # the halo layer's basins are next door: frozen too
            layer = np.concatenate([layer.ravel(), np.take(seg, 0, axis=axis).ravel()])
        ids = np.unique(layer)
        faces[(axis, side)] = ids[ids != 0]
    frozen = np.unique(np.concatenate([np.zeros(0, np.uint64), own["held"], *faces.values()]))
    out = _agglomerate_graph(g["a"], g["b"], g["sum"], g["count"], g["top"], frozen, threshold)
    out.update(faces=faces, lo=lo, hi=hi, seconds=time.perf_counter() - t0,
               cpu_seconds=time.process_time() - c0, bytes=int(a.nbytes + seg.nbytes * 2))
    out["done"] = [_summary(out, 0)]
    return out


def _rename(arr, old, new):
    """``arr`` (uint64) with every id in ``old`` (sorted) replaced by its ``new``, in place."""
    if len(old) and len(arr):
        pos = np.searchsorted(old, arr)
        pos[pos == len(old)] = 0
        hit = old[pos] == arr
        arr[hit] = new[pos[hit]]
    return arr


def _parent_task(children, lo, hi, shape, threshold, round_, basin_map=None):
    """Add up to 8 children's graphs; freeze what touches this box's inner faces; merge.
    Round 1 gets the ``basin_map`` too: its children (round 0) name frozen regions by
    fragment ids, so it renames those first; two fragments of one basin then share their
    edges to a neighbour (summed below), and an edge between them is inside the basin
    (dropped)."""
    t0, c0 = time.perf_counter(), time.process_time()
    olds = [c["map"][0] for c in children if len(c["map"][0])]
    news = [c["map"][1] for c in children if len(c["map"][1])]
    a = np.concatenate([c["a"] for c in children])
    b = np.concatenate([c["b"] for c in children])
    sums = np.concatenate([c["sum"] for c in children])
    counts = np.concatenate([c["count"] for c in children])
    tops = np.concatenate([c["top"] for c in children])
    child_faces = [dict(c["faces"]) for c in children]
    if basin_map is not None:
        for arr in (a, b):
            _rename(arr, *basin_map)
        for f in child_faces:
            for k, ids in f.items():
                f[k] = _rename(ids.copy(), *basin_map)
        inside = a == b
        if inside.any():
            a, b, sums, counts, tops = (x[~inside] for x in (a, b, sums, counts, tops))
    if olds:
        old, new = np.concatenate(olds), np.concatenate(news)
        order = np.argsort(old)
        for arr in (a, b):
            _rename(arr, old[order], new[order])
    lo_ab, hi_ab = np.minimum(a, b), np.maximum(a, b)
    faces = {}
    inner = _inner_faces(lo, hi, shape)
    for axis, side in inner:
        edge = lo[axis] if side == 0 else hi[axis]
        parts = [f[(axis, side)] for c, f in zip(children, child_faces, strict=True)
                 if (axis, side) in f
                 and (c["lo"][axis] if side == 0 else c["hi"][axis]) == edge]
        faces[(axis, side)] = np.unique(np.concatenate([np.zeros(0, np.uint64), *parts]))
    frozen = np.unique(np.concatenate([np.zeros(0, np.uint64), *faces.values()]))
    if len(lo_ab):
        key = np.stack([lo_ab, hi_ab])
        order = np.lexsort((hi_ab, lo_ab))
        key = key[:, order]
        start = np.flatnonzero(np.r_[True, np.any(key[:, 1:] != key[:, :-1], axis=0)])
        lo_ab, hi_ab = key[0, start], key[1, start]
        sums = np.add.reduceat(sums[order], start)
        counts = np.add.reduceat(counts[order], start)
        tops = np.maximum.reduceat(tops[order], start)
    out = _agglomerate_graph(lo_ab, hi_ab, sums, counts, tops, frozen, threshold)
    out.update(faces=faces, lo=lo, hi=hi, seconds=time.perf_counter() - t0,
               cpu_seconds=time.process_time() - c0,
               bytes=int(sum(c["a"].nbytes * 4 for c in children)))
    # the subtree's summaries ride up with the graph: the driver gathers only the root
    out["done"] = [d for c in children for d in c["done"]] + [_summary(out, round_)]
    return out


def _summary(r, round_):
    """A task's result without its graph (which only its parent needs)."""
    return {k: r[k] for k in ("map", "lo", "hi", "frozen", "blocked", "merges", "seconds",
                              "cpu_seconds", "bytes")} | {"edges_up": int(len(r["a"])),
                                                          "round": round_}


def _summaries(root):
    return root["done"]


def _compose_task(first, results, only_round=None):
    """``first`` (a map: old ids, new ids) followed by the merges of every task summarised in
    ``results``' subtrees, round by round (tasks in grid order), chained into one map; with
    ``only_round``, only that round's merges follow."""
    rounds = {}
    for d in (d for r in results for d in r["done"]):
        if only_round is None or d["round"] == only_round:
            rounds.setdefault(d["round"], []).append(d)
    maps = [first]
    for r in sorted(rounds):
        res = sorted(rounds[r], key=lambda d: tuple(d["lo"]))
        maps.append((np.concatenate([d["map"][0] for d in res]),
                     np.concatenate([d["map"][1] for d in res])))
    return _compose(maps)


def _relabel_task(frag, out, boxes, maps):
    """Fragments -> final ids for a few chunks (``boxes``: (lo, hi) pairs): each chunk takes
    milliseconds, less than a task costs the scheduler, so they go in groups."""
    n = 0
    for lo, hi in boxes:
        seg = np.ascontiguousarray(frag[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]], np.uint64)
        out[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] = _remap(seg, maps)
        n += seg.nbytes
    return n


def _compose(maps):
    """Chain maps (old ids -> new ids) applied in order into one, sorted by old id. An id
    renamed by an earlier map keeps that entry (a merged-away id is gone from later rounds,
    so this does not happen; np.isin per map to check it cost a second)."""
    olds, news = [], []
    for o, n in maps:
        if len(o) == 0:
            continue
        if news:  # ids already renamed and renamed again
            order = np.argsort(o)
            so, sn = o[order], n[order]
            for new in news:
                _rename(new, so, sn)
        olds.append(np.asarray(o, np.uint64))
        news.append(np.array(n, np.uint64))  # a copy: renamed in place above
    old = np.concatenate([np.zeros(0, np.uint64), *olds])
    new = np.concatenate([np.zeros(0, np.uint64), *news])
    order = np.argsort(old, kind="stable")
    old, new = old[order], new[order]
    first = np.ones(len(old), bool)
    first[1:] = old[1:] != old[:-1]  # the earliest map's entry for each id
    return old[first], new[first]


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
    its values chunk by chunk where the tasks read them (``_basins_task``)."""
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
        boxes = _boxes(shape, chunks)
        # (no workers yet, as on a cluster still scaling up: no placement)
        owner = _owners(boxes, sorted(client.scheduler_info()["workers"]) or [None])

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
        shells = submit_all(_shell_task, {idx: (aff_f, lo, hi) for idx, (lo, hi) in boxes.items()},
                            priority=1)
        args = {}
        for idx, (lo, hi) in boxes.items():
            elo = [max(0, v - AFF_HALO) for v in lo]
            ehi = [min(s, h + AFF_HALO) for s, h in zip(shape, hi, strict=True)]
            halo = [((axis, side), shells[n])
                    for n, axis, side in _halo_sources(idx, boxes, chunks, elo, ehi)]
            args[idx] = (aff_f, frag_f, lo, hi, low, high, halo)
        basins = submit_all(_basins_task, args, priority=1)
        del shells  # released once the basins tasks are done with them
        bm = submit(_link_task, frag_f, shape, chunks, list(basins.values()), priority=1)
        args = {}
        for idx, (lo, hi) in boxes.items():
            elo = [max(0, v - 1) for v in lo]
            halo = [(axis, basins[n])
                    for n, axis, _ in _halo_sources(idx, boxes, chunks, elo, hi)]
            args[idx] = (aff_f, frag_f, lo, hi, basins[idx], threshold, halo)
        level = submit_all(_round0_task, args)
        del basins
        rounds = [level]

        def placed(round_, idx):  # round 0's tasks are keyed by grid index, later ones' by
            return owner[(round_, idx) if round_ else idx]  # (round, grid index)

        size = list(chunks)
        while len(level) > 1:
            factor = _join_factor(shape, size)
            size = [s * f for s, f in zip(size, factor, strict=True)]
            args = {}
            for pidx, (lo, hi) in _boxes(shape, size).items():
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
            nxt = submit_all(_parent_task, args)
            level = {k[1]: f for k, f in nxt.items()}
            rounds.append(level)
        (root,) = level.values()
        # submitted before the relabel tasks, so it runs right after the root
        summaries_f = submit(_summaries, root) if return_info else None
        # the maps of every round, chained into one (sorted once, not in every relabel task):
        # all but the root's while the root merges, then the root's on top
        if len(rounds) > 1:  # (on the worker of the last half: the root goes to the first's)
            top, last = len(rounds) - 1, list(rounds[-2])[-1]
            owner["below"] = placed(top - 1, last)
            below = submit_all(_compose_task, {"below": (bm, list(rounds[-2].values()))})
            final = submit(_compose_task, below["below"], [root], top)
        else:
            final = submit(_compose_task, bm, [root])
        # in Z-order runs of up to 8 chunks (one owner's 2x2x2 blocks, mostly)
        order = sorted(boxes, key=_morton)
        groups = {order[k]: [boxes[i] for i in order[k:k + RELABEL_GROUP]]
                  for k in range(0, len(order), RELABEL_GROUP)}
        done = list(submit_all(_relabel_task, {idx: (frag_f, seg_f, group, [final])
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
                        d[k] = np.unique(_rename(d[k].copy(), *basin_map))
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


@numba.njit(nogil=True, cache=True)
def _union(parent, u, v):
    for k in range(len(u)):
        i = u[k]
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        j = v[k]
        while parent[j] != j:
            parent[j] = parent[parent[j]]
            j = parent[j]
        if i < j:
            parent[j] = i
        elif j < i:
            parent[i] = j
    for k in range(len(parent)):
        i = k
        while parent[i] != i:
            i = parent[i]
        parent[k] = i
    return parent
