"""Steps 3 to 5 of ``segkit.chunked``, as Dask tasks: round 0 (each chunk's region graph and
first merges, with what touches an inner face frozen), the parent rounds that add up their
children's graphs and merge again, and the relabelling of every chunk through the rounds'
merge maps chained into one."""

from __future__ import annotations

import time

import numpy as np

from . import linkage as _agg
from .chunk_grid import inner_faces, paste
from .regions import region_graph


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


def round0_task(aff, frag, lo, hi, own, threshold, halo):
    """Region graph of one chunk and its first round of merging, on fragment ids: it does not
    wait for linking. Linking renames only fragments on a chunk face or next to a deferred
    plateau voxel (``own["held"]``), and round 0 freezes all of those; the parents apply the
    basin map before they merge (see ``parent_task``). ``own``: this chunk's basins_task
    result; ``halo``: (axis, lower neighbour's basins_task result) pairs: their upper faces
    cover the 1-voxel low halo."""
    t0, c0 = time.perf_counter(), time.process_time()
    shape = aff.shape[1:]
    hlo = [1 if v > 0 else 0 for v in lo]
    elo = [v - h for v, h in zip(lo, hlo, strict=True)]
    seg = np.zeros([h - e for e, h in zip(elo, hi, strict=True)], np.uint64)
    seg[hlo[0]:, hlo[1]:, hlo[2]:] = frag[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
    seg = paste(seg, elo, [r["upper"][axis] for axis, r in halo])
    a = np.ascontiguousarray(aff[:, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]], np.float32)
    g = region_graph(seg, a, hlo, lo, shape)
    core = seg[hlo[0]:, hlo[1]:, hlo[2]:]
    faces = {}
    for axis, side in inner_faces(lo, hi, shape):
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


def rename(arr, old, new):
    """``arr`` (uint64) with every id in ``old`` (sorted) replaced by its ``new``, in place."""
    if len(old) and len(arr):
        pos = np.searchsorted(old, arr)
        pos[pos == len(old)] = 0
        hit = old[pos] == arr
        arr[hit] = new[pos[hit]]
    return arr


def parent_task(children, lo, hi, shape, threshold, round_, basin_map=None):
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
            rename(arr, *basin_map)
        for f in child_faces:
            for k, ids in f.items():
                f[k] = rename(ids.copy(), *basin_map)
        inside = a == b
        if inside.any():
            a, b, sums, counts, tops = (x[~inside] for x in (a, b, sums, counts, tops))
    if olds:
        old, new = np.concatenate(olds), np.concatenate(news)
        order = np.argsort(old)
        for arr in (a, b):
            rename(arr, old[order], new[order])
    lo_ab, hi_ab = np.minimum(a, b), np.maximum(a, b)
    faces = {}
    inner = inner_faces(lo, hi, shape)
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


def root_summaries(root):
    return root["done"]


def compose_task(first, results, only_round=None):
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


def relabel_task(frag, out, boxes, maps):
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
                rename(new, so, sn)
        olds.append(np.asarray(o, np.uint64))
        news.append(np.array(n, np.uint64))  # a copy: renamed in place above
    old = np.concatenate([np.zeros(0, np.uint64), *olds])
    new = np.concatenate([np.zeros(0, np.uint64), *news])
    order = np.argsort(old, kind="stable")
    old, new = old[order], new[order]
    first = np.ones(len(old), bool)
    first[1:] = old[1:] != old[:-1]  # the earliest map's entry for each id
    return old[first], new[first]


def _remap(seg, maps):
    for old, new in maps:
        seg = _agg.relabel(seg, old, new)
    return seg
