"""The region graph between the labelled regions of a segmentation (the watershed's basins,
``segkit.basins``), whole or one chunk at a time.

For every pair of adjacent regions, over all voxel edges between them (background
excluded): the maximum affinity (for size-dependent single linkage) and the sum and count (for
mean-affinity agglomeration). Sums are exact integers of affinities in units of 2**-24 (see
``QUANT``), so they are the same whatever order the edges are added in: a chunked run adds
them in another order than a whole-volume run, and floating-point sums would differ in the
last bits and break ties differently (abiss's recurring determinism trouble).

The ids of a chunk's regions are looked up through an open-addressing hash table
(``id_table``, ``lookup``), which ``segkit.linkage`` uses too.
"""

from __future__ import annotations

import numba
import numpy as np

QUANT = 2 ** 24  # affinities are summed as integers: floor(aff * QUANT)

# An open-addressing table (linear probing, Fibonacci hashing) from nonzero uint64 ids to their
# position in an array: the lookups below go through it. 0 marks an empty slot.
FIB = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(nogil=True, cache=True)
def id_table(ids):
    """(keys, positions, shift) for ``lookup``: ``ids`` (uint64, nonzero, distinct)."""
    cap, bits = 4, 2
    while cap < 2 * len(ids) + 2:
        cap *= 2
        bits += 1
    keys = np.zeros(cap, np.uint64)
    pos = np.empty(cap, np.int64)
    shift = np.uint64(64 - bits)
    for i in range(len(ids)):
        h = np.int64((ids[i] * FIB) >> shift)
        while keys[h] != 0:
            h = (h + 1) & (cap - 1)
        keys[h] = ids[i]
        pos[h] = i
    return keys, pos, shift


@numba.njit(nogil=True, cache=True, inline="always")
def lookup(keys, pos, shift, key):
    """Position of ``key`` (nonzero) in the table's ids, or -1."""
    h = np.int64((key * FIB) >> shift)
    while keys[h] != key:
        if keys[h] == 0:
            return -1
        h = (h + 1) & (len(keys) - 1)
    return pos[h]


@numba.njit(nogil=True, cache=True)
def _compact_labels(seg, ids, out):
    """``out`` (same shape, int32 or int64): each voxel's position in ``ids``, -1 for 0.
    Neighbouring voxels mostly share a label: the table is asked only when it changes."""
    keys, pos, shift = id_table(ids)
    flat = seg.reshape(-1)
    res = out.reshape(-1)
    last = np.uint64(0)
    lastv = -1
    for k in range(flat.size):
        s = flat[k]
        if s != last:
            last = s
            lastv = -1 if s == 0 else lookup(keys, pos, shift, s)
        res[k] = lastv
    return out


@numba.njit(nogil=True, cache=True)
def _boundary_rows(cseg, n, aff, halo_lo, origin, full):
    """Every voxel edge (v, v - e_d) between two different labelled regions, owned by v, as rows
    bucketed by the smaller region (a counting sort): per row the larger region, max affinity,
    sum (integer units of 1/QUANT), count and top (see region_graph). ``cseg``: compact labels
    (-1 = background), possibly with a 1-voxel halo on its low sides (``halo_lo[d]`` = 1):
    voxels of the halo are neighbours, never owners. Consecutive edges of the same channel and
    pair (runs along x, common on membranes) are added up on the way, so fewer rows are sorted.
    ``n``: the number of regions (labels 0..n-1). Returns (start of each region's bucket
    (n + 1 entries), b, max, sum, count, top)."""
    zd, yd, xd = cseg.shape
    start = np.zeros(n + 1, np.int64)
    fill = np.zeros(n, np.int64)
    rb = np.empty(0, np.int64)
    rw = np.empty(0, np.float32)
    rq = np.empty(0, np.int64)
    rc = np.empty(0, np.int64)
    rt = np.empty(0, np.int64)
    la = np.empty(3, np.int64)  # the last pair seen per channel (a run continues it)
    lb = np.empty(3, np.int64)
    lr = np.empty(3, np.int64)  # and its row
    for sweep in range(2):  # sweep 0 counts the rows per bucket, sweep 1 fills them
        if sweep == 1:
            for i in range(n):
                start[i + 1] += start[i]
            fill[:] = start[:-1]
            total = start[n]
            rb = np.empty(total, np.int64)
            rw = np.empty(total, np.float32)
            rq = np.empty(total, np.int64)
            rc = np.empty(total, np.int64)
            rt = np.empty(total, np.int64)
        for z in range(halo_lo[0], zd):
            for y in range(halo_lo[1], yd):
                la[:] = -1  # runs do not continue across rows
                for x in range(halo_lo[2], xd):
                    s = cseg[z, y, x]
                    if s < 0:
                        la[:] = -1
                        continue
                    az, ay, ax = z - halo_lo[0], y - halo_lo[1], x - halo_lo[2]
                    for d in range(3):
                        if d == 0:
                            t = cseg[z - 1, y, x] if z > 0 else -1
                        elif d == 1:
                            t = cseg[z, y - 1, x] if y > 0 else -1
                        else:
                            t = cseg[z, y, x - 1] if x > 0 else -1
                        if t < 0 or t == s:
                            la[d] = -1
                            continue
                        lo_id, hi_id = min(s, t), max(s, t)
                        run = la[d] == lo_id and lb[d] == hi_id
                        la[d], lb[d] = lo_id, hi_id
                        if sweep == 0:
                            if not run:
                                start[lo_id + 1] += 1
                            continue
                        val = aff[d, az, ay, ax]
                        qv = np.int64(np.floor(np.float64(val) * QUANT))
                        idx = (((origin[0] + az) * full[1] + origin[1] + ay) * full[2]
                               + origin[2] + ax) * 3 + d
                        if run:  # x grows along a run: idx is the largest so far
                            r = lr[d]
                            rw[r] = max(rw[r], val)
                            rq[r] += qv
                            rc[r] += 1
                            rt[r] = idx
                        else:
                            r = fill[lo_id]
                            fill[lo_id] += 1
                            rb[r], rw[r], rq[r], rc[r], rt[r] = hi_id, val, qv, 1, idx
                            lr[d] = r
    return start, rb, rw, rq, rc, rt


@numba.njit(nogil=True, cache=True)
def _sum_rows(start, rb, rw, rq, rc, rt):
    """Add up the rows of each pair: buckets in order of the smaller region, and inside a
    bucket by the larger one (a scratch slot per region finds the pair's output row)."""
    n = len(start) - 1
    slot = np.full(n, -1, np.int64)
    m = len(rb)
    oa = np.empty(m, np.int64)
    ob = np.empty(m, np.int64)
    ow = np.empty(m, np.float32)
    oq = np.empty(m, np.int64)
    oc = np.empty(m, np.int64)
    ot = np.empty(m, np.int64)
    k = 0
    for a in range(n):
        first = k
        for r in range(start[a], start[a + 1]):
            b = rb[r]
            j = slot[b]
            if j < 0:
                slot[b] = k
                oa[k], ob[k], ow[k], oq[k], oc[k], ot[k] = a, b, rw[r], rq[r], rc[r], rt[r]
                k += 1
            else:
                ow[j] = max(ow[j], rw[r])
                oq[j] += rq[r]
                oc[j] += rc[r]
                ot[j] = max(ot[j], rt[r])
        for i in range(first, k):  # insertion sort by b: a bucket holds a few pairs
            slot[ob[i]] = -1
            j = i
            while j > first and ob[j - 1] > ob[j]:
                ob[j - 1], ob[j] = ob[j], ob[j - 1]
                ow[j - 1], ow[j] = ow[j], ow[j - 1]
                oq[j - 1], oq[j] = oq[j], oq[j - 1]
                oc[j - 1], oc[j] = oc[j], oc[j - 1]
                ot[j - 1], ot[j] = ot[j], ot[j - 1]
                j -= 1
    return oa[:k], ob[:k], ow[:k], oq[:k], oc[:k], ot[:k]


@numba.njit(nogil=True, cache=True)
def _distinct_nonzero(flat):
    """The distinct nonzero labels of ``flat``, unsorted. Only a voxel whose label differs
    from the previous voxel's is looked up in the (open-addressing, Fibonacci) set: runs along
    x make that a few voxels in ten."""
    cap, bits = 1024, 10
    keys = np.zeros(cap, np.uint64)
    out = np.empty(64, np.uint64)
    n = 0
    last = np.uint64(0)
    for k in range(flat.size):
        s = flat[k]
        if s == last or s == 0:
            last = s
            continue
        last = s
        h = np.int64((s * FIB) >> np.uint64(64 - bits))
        while keys[h] != 0 and keys[h] != s:
            h = (h + 1) & (cap - 1)
        if keys[h] == s:
            continue
        keys[h] = s
        if n == len(out):
            out = np.concatenate((out, np.empty(n, np.uint64)))
        out[n] = s
        n += 1
        if 2 * n > cap:  # keep the set at most half full: rebuild it twice as large
            cap *= 2
            bits += 1
            keys = np.zeros(cap, np.uint64)
            for i in range(n):
                g = np.int64((out[i] * FIB) >> np.uint64(64 - bits))
                while keys[g] != 0:
                    g = (g + 1) & (cap - 1)
                keys[g] = out[i]
    return out[:n]


def region_ids(seg) -> np.ndarray:
    """The nonzero labels of ``seg``, sorted (uint64)."""
    # A set of the labels, then a sort of the few distinct ones: 3-5x faster than sorting
    # every voxel (fastremap.unique), and every chunked task asks this of its chunk.
    ids = _distinct_nonzero(np.ascontiguousarray(seg, np.uint64).reshape(-1))
    ids.sort()
    return ids


def region_graph(seg, aff, halo_lo=(0, 0, 0), origin=(0, 0, 0), full=None):
    """Edges between adjacent regions of ``seg``: a dict of arrays ``a < b`` (uint64, sorted by
    (a, b)), ``max`` (float32, maximum affinity), ``sum`` (int64, in units of 1/QUANT),
    ``count`` (int64, number of voxel edges) and ``top`` (int64, the largest global index
    ``3 * voxel + channel`` of its voxel edges: the tie-breaker of mean agglomeration); and
    ``ids`` (every nonzero label of ``seg``, sorted), with ``u``, ``v`` (int64): the positions
    of ``a`` and ``b`` in ``ids``. ``aff`` covers the voxels that own edges (``seg`` without its
    low halo); ``origin`` is the global position of its first voxel and ``full`` the volume's
    shape (default: ``aff``'s)."""
    full = aff.shape[1:] if full is None else full
    seg = np.ascontiguousarray(seg, dtype=np.uint64)
    ids = region_ids(seg)
    cseg = _compact_labels(seg, ids, np.empty(seg.shape, np.int32 if len(ids) < 2 ** 31 - 1
                                              else np.int64))
    rows = _boundary_rows(cseg, len(ids), aff, np.asarray(halo_lo, np.int64),
                          np.asarray(origin, np.int64), np.asarray(full, np.int64))
    u, v, w, q, c, top = _sum_rows(*rows)
    return {"a": ids[u], "b": ids[v], "max": w, "sum": q, "count": c, "top": top,
            "ids": ids, "u": u, "v": v}
