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

from .basins import QUANT, _find, check_affinities, region_graph, watershed

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


# An open-addressing hash map int64 -> int64 in two arrays (linear probing, tombstones):
# several times faster in numba than numba.typed.Dict for the pair -> edge lookups below.
EMPTY, GONE = -1, -2


@numba.njit(nogil=True, cache=True)
def _get(keys, vals, key):
    mask = len(keys) - 1
    i = (key * 0x9E3779B97F4A7C15) & mask
    while keys[i] != EMPTY:
        if keys[i] == key:
            return vals[i]
        i = (i + 1) & mask
    return -1


@numba.njit(nogil=True, cache=True)
def _put(keys, vals, key, value):
    """Insert (the key must be absent), reusing the first tombstone on the probe path; returns
    1 if a never-used slot was taken (the caller rebuilds the table when too few are left)."""
    mask = len(keys) - 1
    i = (key * 0x9E3779B97F4A7C15) & mask
    while keys[i] != EMPTY and keys[i] != GONE:
        i = (i + 1) & mask
    fresh = 1 if keys[i] == EMPTY else 0
    keys[i] = key
    vals[i] = value
    return fresh


@numba.njit(nogil=True, cache=True)
def _delete(keys, key):
    mask = len(keys) - 1
    i = (key * 0x9E3779B97F4A7C15) & mask
    while keys[i] != EMPTY:
        if keys[i] == key:
            keys[i] = GONE
            return
        i = (i + 1) & mask


@numba.njit(nogil=True, cache=True)
def _less(k1, k2, i, j):
    return k1[i] < k1[j] or (k1[i] == k1[j] and k2[i] < k2[j])


@numba.njit(nogil=True, cache=True)
def _swap(k1, k2, ed, ve, i, j):
    k1[i], k1[j] = k1[j], k1[i]
    k2[i], k2[j] = k2[j], k2[i]
    ed[i], ed[j] = ed[j], ed[i]
    ve[i], ve[j] = ve[j], ve[i]


@numba.njit(nogil=True, cache=True)
def _sift_down(k1, k2, ed, ve, i, n):
    while True:
        c = 2 * i + 1
        if c >= n:
            return
        if c + 1 < n and _less(k1, k2, c + 1, c):
            c += 1
        if not _less(k1, k2, c, i):
            return
        _swap(k1, k2, ed, ve, i, c)
        i = c


@numba.njit(nogil=True, cache=True)
def _push(k1, k2, ed, ve, n, a, b, e, v):
    """Push (a, b) -> edge e, version v on the array heap of size n; returns n + 1. numba's
    heapq on a list of tuples is several times slower than these four arrays."""
    k1[n], k2[n], ed[n], ve[n] = a, b, e, v
    i = n
    while i > 0:
        p = (i - 1) // 2
        if not _less(k1, k2, i, p):
            break
        _swap(k1, k2, ed, ve, i, p)
        i = p
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
    cid = canon.copy()
    m = len(eu)
    su = eu.copy()
    sv = ev.copy()
    ssum = esum.copy()
    scount = ecount.copy()
    stop = etop.copy()
    alive = np.ones(m, np.bool_)
    version = np.zeros(m, np.int64)
    # Adjacency: one hash map (pair of slots -> edge) and, per region, a linked list of its
    # edge entries (dead entries are skipped). Merging splices the absorbed region's list onto
    # the kept one's, after moving or combining each of its edges: the smaller list is walked.
    hcap = 1
    while hcap < 4 * m + 16:
        hcap *= 2
    hkeys = np.full(hcap, EMPTY, np.int64)
    hvals = np.empty(hcap, np.int64)
    used = 0
    head = np.full(n, -1, np.int64)
    tail = np.full(n, -1, np.int64)
    size = np.zeros(n, np.int64)
    nxt = np.full(2 * m, -1, np.int64)
    entry = np.empty(2 * m, np.int64)
    k = 0
    for e in range(m):
        used += _put(hkeys, hvals, min(su[e], sv[e]) * n + max(su[e], sv[e]), e)
        for x in (su[e], sv[e]):
            entry[k] = e
            if head[x] < 0:
                head[x] = k
            else:
                nxt[tail[x]] = k
            tail[x] = k
            size[x] += 1
            k += 1
    # the priority queue: (-mean, -top) smallest first, as four arrays (see _push)
    cap = 2 * m + 1
    k1 = np.empty(cap, np.float64)
    k2 = np.empty(cap, np.int64)
    ed = np.empty(cap, np.int64)
    ve = np.empty(cap, np.int64)
    for e in range(m):
        k1[e], k2[e], ed[e], ve[e] = -(ssum[e] / scount[e]) / QUANT, -stop[e], e, 0
    hn = m
    for i in range(m // 2 - 1, -1, -1):
        _sift_down(k1, k2, ed, ve, i, hn)
    merges = []
    heights = []
    while hn > 0:
        negm, e, ver = k1[0], ed[0], ve[0]
        hn -= 1
        _swap(k1, k2, ed, ve, 0, hn)
        _sift_down(k1, k2, ed, ve, 0, hn)
        if not alive[e] or ver != version[e]:
            continue
        if -negm <= threshold:
            break
        a, b = su[e], sv[e]
        if state[a] != 0 or state[b] != 0:
            if state[a] == 0:
                state[a] = 2
            if state[b] == 0:
                state[b] = 2
            continue
        if size[a] < size[b]:  # walk the shorter list; the kept region takes the smaller id
            a, b = b, a
        cid[a] = min(cid[a], cid[b])
        merges.append((b, a))
        heights.append(-negm)
        alive[e] = False
        _delete(hkeys, min(a, b) * n + max(a, b))
        i = head[b]
        while i >= 0:
            f = entry[i]
            i = nxt[i]
            if not alive[f]:
                continue
            c = sv[f] if su[f] == b else su[f]
            _delete(hkeys, min(b, c) * n + max(b, c))
            key = min(a, c) * n + max(a, c)
            g = _get(hkeys, hvals, key)
            if g >= 0:
                ssum[g] += ssum[f]
                scount[g] += scount[f]
                stop[g] = max(stop[g], stop[f])
                alive[f] = False
                version[g] += 1
                hn = _push(k1, k2, ed, ve, hn, -(ssum[g] / scount[g]) / QUANT, -stop[g], g,
                           version[g])
            else:  # the edge moves to a unchanged: its entry in the heap stays valid
                if su[f] == b:
                    su[f] = a
                else:
                    sv[f] = a
                used += _put(hkeys, hvals, key, f)
                if used > hcap // 2:  # too many tombstones: rebuild from the live edges
                    hkeys[:] = EMPTY
                    used = 0
                    for h in range(m):
                        if alive[h]:
                            used += _put(hkeys, hvals, min(su[h], sv[h]) * n + max(su[h], sv[h]),
                                         h)
        if head[b] >= 0:
            if head[a] < 0:
                head[a] = head[b]
            else:
                nxt[tail[a]] = head[b]
            tail[a] = tail[b]
        size[a] += size[b]
        head[b] = tail[b] = -1
        size[b] = 0
    out = np.empty((len(merges), 2), np.int64)
    hts = np.empty(len(merges), np.float64)
    for k in range(len(merges)):
        out[k, 0] = merges[k][0]
        out[k, 1] = merges[k][1]
        hts[k] = heights[k]
    return out, hts, cid, alive, su, sv, ssum, scount, stop


def _compact(graph, ids=None):
    """Map the region graph's uint64 ids to 0..n-1 (sorted, so order is kept)."""
    if ids is None:
        ids = np.unique(np.concatenate([graph["a"], graph["b"]]))
    u = np.searchsorted(ids, graph["a"]).astype(np.int64)
    v = np.searchsorted(ids, graph["b"]).astype(np.int64)
    return ids, u, v


def _resolve(merges, n):
    """Union-find parents (index -> final index) from (absorbed, kept) pairs."""
    parent = np.arange(n, dtype=np.int64)
    for b, a in merges:  # each absorbed index is absorbed once, into a live one
        parent[b] = a
    # follow chains (a kept index may be absorbed later)
    while True:
        nxt = parent[parent]
        if np.array_equal(nxt, parent):
            return parent
        parent = nxt


def relabel(seg, old, new):
    """Replace ids ``old`` by ``new`` in ``seg`` (uint64); ids not in ``old`` stay."""
    if len(old) == 0:
        return seg
    import fastremap

    present = np.isin(old, fastremap.unique(seg))  # only the ids this array holds
    if not present.any():
        return seg
    mapping = dict(zip(old[present].tolist(), new[present].tolist(), strict=True))
    return fastremap.remap(seg, mapping, preserve_missing_labels=True, in_place=False)


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
    ``height`` (the affinity of that merge).
    """
    aff = check_affinities(aff)
    if mode not in ("size-dependent", "mean"):
        raise ValueError(f"mode must be 'size-dependent' or 'mean', got {mode!r}")
    if not np.isfinite(threshold):
        raise ValueError(f"threshold must be a finite affinity, got {threshold!r}")
    if basins is None:
        basins = watershed(aff, low, high)
    else:
        basins = np.asarray(basins)
        if basins.shape != aff.shape[1:]:
            raise ValueError(f"basins shape {basins.shape} != affinity volume {aff.shape[1:]}")
        basins = np.ascontiguousarray(basins, dtype=np.uint64)
    graph = region_graph(basins, aff)
    if mode == "mean":
        ids, u, v = _compact(graph)
        state = np.zeros(len(ids), np.uint8)
        merges, heights, *_ = mean_agglomeration(ids.astype(np.int64), u, v, graph["sum"],
                                                 graph["count"], graph["top"], float(threshold),
                                                 state)
        parent = _resolve(merges, len(ids))
        # canonical name of each final region: its smallest id
        root_min = np.full(len(ids), np.iinfo(np.int64).max, np.int64)
        np.minimum.at(root_min, parent, ids.astype(np.int64))
        new = root_min[parent].astype(np.uint64)
        changed = new != ids
        seg = relabel(basins, ids[changed], new[changed])
        history = {"a": ids[merges[:, 1]], "b": ids[merges[:, 0]], "height": heights}
    else:
        import fastremap

        ids, counts = fastremap.unique(basins, return_counts=True)  # sorted; faster than numpy
        if len(ids) and ids[0] == 0:
            ids, counts = ids[1:], counts[1:]
        _, u, v = _compact(graph, ids)
        # upstream order: affinity descending, then ids descending (stable sort on the tuple)
        order = np.lexsort((-v, -u, -graph["max"].astype(np.float64)))
        f = size_fn if size_fn is not None else square_size_fn(threshold, size)
        limits = np.asarray(f(graph["max"][order]), np.float64)
        if limits.shape != order.shape or np.any(limits < 0) or not np.isfinite(limits).all():
            raise ValueError("size_fn must map an array of affinities to sizes >= 0")
        parent, sizes = size_dependent_linkage(u[order], v[order], limits.astype(np.int64),
                                               counts.astype(np.int64))
        new = ids[parent]
        new[sizes[parent] < dust] = 0
        changed = new != ids
        seg = relabel(basins, ids[changed], new[changed])
        merged = parent != np.arange(len(ids))
        history = {"a": ids[parent][merged], "b": ids[merged], "height": None}
    if return_merges:
        return seg, history
    return seg
