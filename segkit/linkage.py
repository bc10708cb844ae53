"""Agglomerate watershed basins: size-dependent single linkage, and mean-affinity merging.

**Size-dependent single linkage** (Zlateski & Seung; seung-lab/watershed
``merge_segments_with_function``). Walk the region graph's edges (maximum affinity between two
basins) from the highest affinity down, ties by the larger ids first as upstream's
``stable_sort(greater<tuple>)`` does. For an edge of affinity ``w`` the size limit is
``f(w)``; stop at the first edge where ``f(w) == 0`` (below ``threshold``). Merge the two
current segments when they differ and *either* has fewer voxels than ``f(w)``: small pieces
join their best neighbour, large ones stay apart unless the edge is strong. Finally segments
with fewer than ``dust`` voxels become background (0). Our default ``f`` is upstream's
``square_fn`` with no offset: ``f(w) = size * ((w - threshold) / (1 - threshold))**2``.

**Mean-affinity agglomeration** (waterz's default ``OneMinus<MeanAffinity>``; abiss's score).
Repeatedly merge the two adjacent regions with the highest mean affinity over their shared voxel
edges while it exceeds ``threshold``; a merged region's edge to a neighbour sums both sides' sums
and counts. Exact ties in the mean go to the edge holding the voxel edge that comes last in
raster order (``top``), a rule that depends on the volume alone, never on ids or chunks. A
segment is named by its smallest basin id (1 + the raster index of its first voxel). waterz
merges while ``1 - mean < t``: our ``threshold`` is waterz's ``1 - t``.

The same numba loop runs chunk by chunk (segkit.chunked): regions marked *frozen* (touching a
chunk face: their edges are not all known yet) never merge, and a region whose best remaining
edge leads to a frozen or blocked region is *blocked* for this round. Every merge made is one the
whole-volume run makes too: mean affinity is a reducible linkage (merging two regions never
creates an edge above both of theirs), so a pair that is each other's best edge, with all edges
known, merges in any order of the rounds.
"""

from __future__ import annotations

import numba
import numpy as np

from .basins import _find, watershed
from .regions import FIB, QUANT, id_table, lookup, region_graph, region_ids
from .validate import arguments, labels, size_limits

FREE, FROZEN, BLOCKED = 0, 1, 2


@numba.njit(nogil=True, cache=True)
def size_dependent_linkage(u, v, limits, sizes):
    """Upstream's merge loop over edges already sorted (u, v compact ids, ``limits`` = f(w) as
    integers). Returns the parent array of a union-find (root = smallest id) and the sizes."""
    n = len(sizes)
    parent = np.arange(n, dtype=np.int64)
    size = sizes.copy()
    for k in range(len(u)):
        limit = limits[k]
        if limit == 0:
            break
        s1 = _find(parent, u[k])
        s2 = _find(parent, v[k])
        if s1 != s2 and (size[s1] < limit or size[s2] < limit):
            r, o = min(s1, s2), max(s1, s2)
            parent[o] = r
            size[r] += size[o]
            size[o] = 0
    for i in range(n):
        parent[i] = _find(parent, i)
    return parent, size


# The mean-agglomeration kernel keeps each edge's fields in one row of an int64 table (one
# cache line per edge: the walk below touches edges in random order), pairs of regions in an
# open-addressing hash table (linear probing, Fibonacci hashing) of (key, edge) rows, and each
# region's edges in a linked list of (edge, next) rows.
EMPTY = -1
U, V, SUM, CNT, TOP, VER, ALIVE = 0, 1, 2, 3, 4, 5, 6


@numba.njit(nogil=True, cache=True, inline="always")
def _slot(key, shift):
    return np.int64((np.uint64(key) * FIB) >> shift)


@numba.njit(nogil=True, cache=True, inline="always")
def _mean_key(s, c, scratch, scratch_bits):
    """(s / c) as an int64 that orders like the float64 (bits; negatives flipped)."""
    scratch[0] = s / c
    b = scratch_bits[0]
    if b < 0:
        b ^= 0x7FFFFFFFFFFFFFFF
    return b


@numba.njit(nogil=True, cache=True, inline="always")
def _above(h, i, j):
    """Heap entry i ranks before entry j: higher mean, then higher top."""
    return h[i, 0] > h[j, 0] or (h[i, 0] == h[j, 0] and h[i, 1] > h[j, 1])


@numba.njit(nogil=True, cache=True)
def _sift_down(h, i, n):
    """Heap rows (mean key, top, edge, version), best first: move row i down into place."""
    k0, k1, k2, k3 = h[i, 0], h[i, 1], h[i, 2], h[i, 3]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _above(h, c + 1, c):
            c += 1
        if not (h[c, 0] > k0 or (h[c, 0] == k0 and h[c, 1] > k1)):
            break
        h[i, 0], h[i, 1], h[i, 2], h[i, 3] = h[c, 0], h[c, 1], h[c, 2], h[c, 3]
        i = c
    h[i, 0], h[i, 1], h[i, 2], h[i, 3] = k0, k1, k2, k3


@numba.njit(nogil=True, cache=True)
def _push(h, n, k0, k1, e, ver):
    """Add a row to the heap of n rows; returns n + 1."""
    i = n
    while i > 0:
        p = (i - 1) // 2
        if not (k0 > h[p, 0] or (k0 == h[p, 0] and k1 > h[p, 1])):
            break
        h[i, 0], h[i, 1], h[i, 2], h[i, 3] = h[p, 0], h[p, 1], h[p, 2], h[p, 3]
        i = p
    h[i, 0], h[i, 1], h[i, 2], h[i, 3] = k0, k1, e, ver
    return n + 1


@numba.njit(nogil=True, cache=True)
def mean_agglomeration(canon, eu, ev, esum, ecount, etop, threshold, state):
    """Merge by highest mean affinity while it exceeds ``threshold`` (see module docstring).

    ``canon``: region ids (int64); ``eu, ev``: edge endpoints as indices into ``canon``;
    ``esum``, ``ecount``: exact integer sums and counts; ``etop``: each edge's largest voxel-edge
    index (ties in the mean go to the larger ``top``; a merged edge takes the larger of its
    parts' ``top``, so, like the mean, it never ranks above both parts: the order stays
    reducible and chunk-independent); ``state``: FREE or FROZEN per region, updated in place
    (BLOCKED added). Returns (merges: int64 (m, 2) of (absorbed index, kept index), heights:
    mean affinity of each merge, id per index after merging (a group's smallest), alive edge
    mask, edge endpoints, sums, counts and tops after merging)."""
    n = len(canon)
    m = len(eu)
    cid = canon.copy()
    E = np.empty((m, 8), np.int64)
    for e in range(m):
        E[e, U], E[e, V], E[e, SUM], E[e, CNT] = eu[e], ev[e], esum[e], ecount[e]
        E[e, TOP], E[e, VER], E[e, ALIVE] = etop[e], 0, 1
    hcap, bits = 16, 4
    while hcap < 2 * m + 16:
        hcap *= 2
        bits += 1
    shift = np.uint64(64 - bits)
    mask = hcap - 1
    H = np.full((hcap, 2), EMPTY, np.int64)  # (key, edge) per slot
    used = 0
    R = np.full((n, 3), -1, np.int64)  # head, tail, length of each region's edge list
    R[:, 2] = 0
    L = np.full((2 * m, 2), -1, np.int64)  # (edge, next entry)
    k = 0
    for e in range(m):
        a, b = E[e, U], E[e, V]
        key = min(a, b) * n + max(a, b)
        i = _slot(key, shift)
        while H[i, 0] != EMPTY:
            i = (i + 1) & mask
        H[i, 0], H[i, 1] = key, e
        used += 1
        for x in (a, b):
            L[k, 0] = e
            if R[x, 0] < 0:
                R[x, 0] = k
            else:
                L[R[x, 1], 1] = k
            R[x, 1] = k
            R[x, 2] += 1
            k += 1
    # The queue: the edges above threshold at the start, sorted once (mean, then top, both
    # descending), and a heap for the edges whose mean changes later (pushed again with a new
    # version; older entries are skipped when they come up).
    scratch = np.empty(1, np.float64)
    scratch_bits = scratch.view(np.int64)
    ik0 = np.empty(m, np.int64)
    ik1 = np.empty(m, np.int64)
    ie = np.empty(m, np.int64)
    p = 0
    for e in range(m):
        if (E[e, SUM] / E[e, CNT]) / QUANT > threshold:
            ik0[p] = _mean_key(E[e, SUM], E[e, CNT], scratch, scratch_bits)
            ik1[p], ie[p] = E[e, TOP], e
            p += 1
    order = np.argsort(-ik1[:p], kind="mergesort")
    order = order[np.argsort(-ik0[:p][order], kind="mergesort")]
    ik0, ik1, ie = ik0[:p][order], ik1[:p][order], ie[:p][order]
    ni = p
    p = 0
    heap = np.empty((m + 1, 4), np.int64)
    hn = 0
    out = np.empty((max(n - 1, 0), 2), np.int64)  # at most n - 1 merges
    hts = np.empty(max(n - 1, 0), np.float64)
    nm = 0
    while p < ni or hn > 0:
        if hn == 0 or (p < ni and (ik0[p] > heap[0, 0] or (ik0[p] == heap[0, 0]
                                                          and ik1[p] > heap[0, 1]))):
            e, ver = ie[p], 0
            p += 1
        else:
            e, ver = heap[0, 2], heap[0, 3]
            hn -= 1
            heap[0, :] = heap[hn, :]
            _sift_down(heap, 0, hn)
        if E[e, ALIVE] == 0 or ver != E[e, VER]:
            continue
        a, b = E[e, U], E[e, V]
        if state[a] != 0 or state[b] != 0:
            if state[a] == 0:
                state[a] = 2
            if state[b] == 0:
                state[b] = 2
            continue
        if R[a, 2] < R[b, 2]:
            a, b = b, a
        cid[a] = min(cid[a], cid[b])
        out[nm, 0], out[nm, 1] = b, a
        hts[nm] = (E[e, SUM] / E[e, CNT]) / QUANT
        nm += 1
        E[e, ALIVE] = 0
        i = R[b, 0]
        first = last = -1  # b's list, rebuilt with its live entries only
        while i >= 0:
            f = L[i, 0]
            here = i
            i = L[i, 1]
            if E[f, ALIVE] == 0:
                continue
            c = E[f, V] if E[f, U] == b else E[f, U]
            key = min(a, c) * n + max(a, c)
            s = _slot(key, shift)
            while H[s, 0] != EMPTY and H[s, 0] != key:
                s = (s + 1) & mask
            if H[s, 0] == key:  # a already has an edge to c: add f into it
                g = H[s, 1]
                E[g, SUM] += E[f, SUM]
                E[g, CNT] += E[f, CNT]
                E[g, TOP] = max(E[g, TOP], E[f, TOP])
                E[f, ALIVE] = 0
                E[g, VER] += 1
                if (E[g, SUM] / E[g, CNT]) / QUANT > threshold:
                    hn = _push(heap, hn, _mean_key(E[g, SUM], E[g, CNT], scratch, scratch_bits),
                               E[g, TOP], g, E[g, VER])
            else:  # f moves to a; its key (b, c) stays behind, stale (b is gone for good)
                if E[f, U] == b:
                    E[f, U] = a
                else:
                    E[f, V] = a
                H[s, 0], H[s, 1] = key, f
                used += 1
                if first < 0:
                    first = here
                else:
                    L[last, 1] = here
                last = here
                if used > hcap - hcap // 4:  # too many stale keys: rebuild from the live edges
                    H[:, 0] = EMPTY
                    used = 0
                    for h in range(m):
                        if E[h, ALIVE]:
                            kk = min(E[h, U], E[h, V]) * n + max(E[h, U], E[h, V])
                            s = _slot(kk, shift)
                            while H[s, 0] != EMPTY:
                                s = (s + 1) & mask
                            H[s, 0], H[s, 1] = kk, h
                            used += 1
        if first >= 0:
            L[last, 1] = -1
            if R[a, 0] < 0:
                R[a, 0] = first
            else:
                L[R[a, 1], 1] = first
            R[a, 1] = last
        R[a, 2] += R[b, 2]
        R[b, 0] = R[b, 1] = -1
        R[b, 2] = 0
    out, hts = out[:nm].copy(), hts[:nm].copy()
    alive = E[:, ALIVE] == 1
    return (out, hts, cid, alive, E[:, U].copy(), E[:, V].copy(), E[:, SUM].copy(),
            E[:, CNT].copy(), E[:, TOP].copy())


@numba.njit(nogil=True, cache=True)
def _resolve(merges, n):
    """Union-find parents (index -> final index) from (absorbed, kept) pairs."""
    parent = np.arange(n, dtype=np.int64)
    for k in range(len(merges)):  # each absorbed index is absorbed once, into a live one
        parent[merges[k, 0]] = merges[k, 1]
    for i in range(n):  # follow chains (a kept index may be absorbed later)
        r = i
        while parent[r] != r:
            r = parent[r]
        j = i
        while parent[j] != r:
            parent[j], j = r, parent[j]
    return parent


@numba.njit(nogil=True, cache=True)
def _remap(seg, old, new, out):
    """``out`` = ``seg`` with ids ``old`` replaced by ``new`` (the table is asked only when the
    label changes from one voxel to the next)."""
    keys, pos, shift = id_table(old)
    flat = seg.reshape(-1)
    res = out.reshape(-1)
    last = np.uint64(0)
    lastv = np.uint64(0)
    for k in range(flat.size):
        s = flat[k]
        if s != last:
            last = s
            lastv = s
            if s != 0:
                i = lookup(keys, pos, shift, s)
                if i >= 0:
                    lastv = new[i]
        res[k] = lastv
    return out


def relabel(seg, old, new):
    """Replace ids ``old`` by ``new`` in ``seg`` (uint64); ids not in ``old`` stay."""
    old = np.asarray(old, np.uint64)
    if len(old) == 0:
        return seg
    seg = np.ascontiguousarray(seg, np.uint64)
    present = region_ids(seg)  # only the ids this array holds: a small table per chunk
    so, sn = old, np.asarray(new, np.uint64)
    if not np.all(so[1:] > so[:-1]):  # callers with one big map sort it once (chunked)
        order = np.argsort(old)
        so, sn = so[order], sn[order]
    pos = np.searchsorted(so, present)
    pos[pos == len(so)] = 0
    hit = so[pos] == present
    if not hit.any():
        return seg
    return _remap(seg, present[hit], sn[pos[hit]], np.empty_like(seg))


def square_size_fn(threshold: float, size: float):
    """Upstream's ``square_fn`` without offset: f(w) = size ((w - t) / (1 - t))^2, 0 below t."""
    def f(w):
        w = np.asarray(w, np.float64)
        out = size * np.square((w - threshold) / max(1 - threshold, 1e-12))
        return np.where(w < threshold, 0, out)
    return f


def agglomerate(aff, threshold: float, mode: str = "size-dependent", basins=None, *,
                low: float = 0.0001, high: float = 0.9999, size: float = 2000,
                size_fn=None, dust: int = 100, return_merges: bool = False):
    """Segment an affinity graph: watershed basins (or ``basins``), then agglomeration.

    ``mode="size-dependent"``: single linkage with size limit ``size_fn(w)`` (default
    ``square_size_fn(threshold, size)``), then segments below ``dust`` voxels -> 0.
    ``mode="mean"``: merge by mean affinity while it exceeds ``threshold`` (no dust rule).
    Returns a uint64 segmentation whose ids are canonical (a segment's smallest basin id); with
    ``return_merges=True`` also a dict with the merges in order: ``a``, ``b`` (ids merged),
    ``height`` (the affinity of that merge). Arguments are checked by ``segkit.validate``
    (affinities and thresholds in [0, 1]); ``size_fn``'s limits above the volume's voxel count
    mean "merge at any size" and are held to it.
    """
    aff, threshold, mode, low, high, size, size_fn, dust = arguments(
        aff=aff, threshold=threshold, mode=mode, low=low, high=high, size=size,
        size_fn=size_fn, dust=dust)
    if basins is None:
        basins = watershed(aff, low, high)
    else:
        basins = labels(basins, "basins")
        if basins.shape != aff.shape[1:]:
            raise ValueError(f"basins shape {basins.shape} != affinity volume {aff.shape[1:]}")
        basins = np.ascontiguousarray(basins, dtype=np.uint64)
    graph = region_graph(basins, aff)
    ids, u, v = graph["ids"], graph["u"], graph["v"]  # every basin, sorted, and edge ends
    if mode == "mean":
        state = np.zeros(len(ids), np.uint8)
        merges, heights, cid, *_ = mean_agglomeration(ids.astype(np.int64), u, v, graph["sum"],
                                                      graph["count"], graph["top"],
                                                      float(threshold), state)
        parent = _resolve(merges, len(ids))
        new = cid[parent].astype(np.uint64)  # a final region's name: its smallest id
        changed = new != ids
        seg = _remap(basins, ids[changed], new[changed], np.empty_like(basins)) \
            if changed.any() else basins
        history = {"a": ids[merges[:, 1]], "b": ids[merges[:, 0]], "height": heights}
    else:
        import fastremap

        uniq, counts = fastremap.unique(basins, return_counts=True)  # sorted, as graph["ids"]
        counts = counts[1:] if len(uniq) and uniq[0] == 0 else counts
        # upstream order: affinity descending, then ids descending (stable sort on the tuple)
        order = np.lexsort((-v, -u, -graph["max"].astype(np.float64)))
        f = size_fn if size_fn is not None else square_size_fn(threshold, size)
        limits = size_limits(f, graph["max"][order], basins.size)
        parent, sizes = size_dependent_linkage(u[order], v[order], limits,
                                               counts.astype(np.int64))
        new = ids[parent]
        new[sizes[parent] < dust] = 0
        changed = new != ids
        seg = _remap(basins, ids[changed], new[changed], np.empty_like(basins)) \
            if changed.any() else basins
        merged = parent != np.arange(len(ids))
        history = {"a": ids[parent][merged], "b": ids[merged], "height": None}
    if return_merges:
        return seg, history
    return seg
