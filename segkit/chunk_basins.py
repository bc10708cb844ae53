"""Steps 0 to 2 of ``segkit.chunked``, as Dask tasks: each chunk's face shells, its fragments
(watershed basins with a halo, the plateaus that straddle a face deferred), and the one linking
task that joins fragments across chunk faces into basins (union-find: a basin's id is its
smallest fragment id)."""

from __future__ import annotations

import numba
import numpy as np

from . import basins as _ws
from .chunk_grid import AFF_HALO, FACES, paste, slab_box
from .validate import affinities as _check_affinities


def shell_task(aff, lo, hi):
    """The chunk's affinities on each of its six faces, ``AFF_HALO`` layers deep: what its
    neighbours need of it as halo. Reads only the chunk itself."""
    a = np.ascontiguousarray(aff[:, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]], np.float32)
    out = {}
    for axis, side in FACES:
        slo, shi = slab_box(lo, hi, axis, side, AFF_HALO)
        sl = tuple(slice(p - o, q - o) for p, q, o in zip(slo, shi, lo, strict=True))
        out[(axis, side)] = (slo, np.ascontiguousarray(a[(slice(None), *sl)]))
    return out


def basins_task(aff, frag, lo, hi, low, high, halo):
    """Fragments of one chunk; returns crossing links, the deferred plateau voxels, and the
    fragment labels of its three upper faces (the next chunks' 1-voxel halo in round 0).
    ``halo``: (face, neighbour's shell_task result) pairs covering the AFF_HALO-voxel ring."""
    shape = aff.shape[1:]
    elo = [max(0, v - AFF_HALO) for v in lo]
    ehi = [min(s, h + AFF_HALO) for s, h in zip(shape, hi, strict=True)]
    a = np.empty((3, *[h - e for e, h in zip(elo, ehi, strict=True)]), np.float32)
    core = tuple(slice(v - e, h - e) for v, h, e in zip(lo, hi, elo, strict=True))
    # the one task that reads every chunk of a zarr input (its values were never seen by the
    # client): NaN or values outside [0, 1] are refused here, naming the voxel
    a[(slice(None), *core)] = _check_affinities(aff[:, lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]],
                                                origin=lo)
    paste(a, elo, [shell[face] for face, shell in halo])
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
        slo, _ = slab_box(lo, hi, axis, 1, 1)
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


def target_labels(results, target, frag, shape, chunks):
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
    right = target_labels(results, target, frag, shape, chunks)
    ids = np.unique(np.concatenate([left, right]))
    parent = np.arange(len(ids), dtype=np.int64)
    u = np.searchsorted(ids, left)
    v = np.searchsorted(ids, right)
    parent = _union(parent, u, v)  # root = smallest index = smallest id
    new = ids[parent]
    changed = new != ids
    return ids[changed], new[changed]


def link_task(frag, shape, chunks, results):
    return _link([(r["link"], r["upper"]) for r in results], frag, shape, chunks)


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
