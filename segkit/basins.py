"""Steepest-ascent watershed on a 3D affinity graph: the basins.

The rules are those of Zlateski and Seung's watershed (seung-lab/watershed, zwatershed,
funkey/waterz ``basic_watershed.hpp``); the code is ours, in numba (``nogil``) loops.

Affinities are ``(3, Z, Y, X)`` float32 in [0, 1] (``segkit.validate``), in waterz's layout:
``aff[0, z, y, x]`` is the edge between voxel (z, y, x) and (z-1, y, x); channel 1 the edge to
y-1, channel 2 to x-1. Edges off the volume count as ``low``.

1. **Steepest ascent.** Each voxel marks the edges to its six neighbours whose affinity equals
   its maximum edge ``m``, and every edge ``>= high``; a voxel with ``m <= low`` marks nothing and
   becomes background (0). Directions are bits: -z 0x01, -y 0x02, -x 0x04, +z 0x08, +y 0x10,
   +x 0x20.
2. **Plateaus split evenly.** A marked edge is *bidirectional* when the neighbour marks it back.
   Voxels with a one-way marked edge are exits; in raster order they seed a breadth-first search
   over bidirectional edges; each voxel, when popped, keeps exactly one edge: the last (in the
   bit order above) of its marked edges that is not, or no longer, bidirectional. So a plateau
   drains to its nearest exits, each half toward its own side. Plateaus without an exit (local
   maxima; every ``>= high`` region is one) keep their edges.
3. **Basins** are the connected components of what is left: each voxel follows its edge to a
   plateau without exit. (waterz finds them by a search from each unlabelled voxel; the
   partition is the same as union-find over the kept edges, which is what we do because it also
   works chunk by chunk.)

Basin ids are *canonical*: a basin's id is 1 + the raster (C-order) index of its first voxel.
They do not depend on how the volume is cut into chunks (segkit.chunked relies on it), and sort
in the same order as waterz's ids (which number basins in raster order of their first voxel).
``fastremap.renumber`` makes them compact if you need that.

The region graph between the basins is ``segkit.regions``.
"""

from __future__ import annotations

import numba
import numpy as np

from .validate import arguments

# Bit of each direction: -z, -y, -x, +z, +y, +x (waterz's order).
DIRMASK = np.array([0x01, 0x02, 0x04, 0x08, 0x10, 0x20], np.uint8)
IDIRMASK = np.array([0x08, 0x10, 0x20, 0x01, 0x02, 0x04], np.uint8)
HIGH = 0x80  # flag: the voxel's maximum edge is >= high (its plateau has no exit)


@numba.njit(nogil=True, cache=True)
def steepest_ascent(aff, low, high):
    """Direction bits (uint8, Z x Y x X) of the steepest-ascent edges (rule 1)."""
    _, zd, yd, xd = aff.shape
    bits = np.zeros((zd, yd, xd), np.uint8)
    for z in range(zd):
        for y in range(yd):
            for x in range(xd):
                nz = aff[0, z, y, x] if z > 0 else low
                ny = aff[1, z, y, x] if y > 0 else low
                nx = aff[2, z, y, x] if x > 0 else low
                pz = aff[0, z + 1, y, x] if z < zd - 1 else low
                py = aff[1, z, y + 1, x] if y < yd - 1 else low
                px = aff[2, z, y, x + 1] if x < xd - 1 else low
                m = max(nz, ny, nx, pz, py, px)
                b = 0
                if m > low:
                    if nz == m or nz >= high:
                        b |= 0x01
                    if ny == m or ny >= high:
                        b |= 0x02
                    if nx == m or nx >= high:
                        b |= 0x04
                    if pz == m or pz >= high:
                        b |= 0x08
                    if py == m or py >= high:
                        b |= 0x10
                    if px == m or px >= high:
                        b |= 0x20
                    if m >= high:
                        b |= HIGH
                bits[z, y, x] = b
    return bits


@numba.njit(nogil=True, cache=True)
def _neighbour(z, y, x, d):
    if d == 0:
        return z - 1, y, x
    if d == 1:
        return z, y - 1, x
    if d == 2:
        return z, y, x - 1
    if d == 3:
        return z + 1, y, x
    if d == 4:
        return z, y + 1, x
    return z, y, x + 1


@numba.njit(nogil=True, cache=True)
def _inside(z, y, x, lo, hi):
    return (lo[0] <= z < hi[0]) and (lo[1] <= y < hi[1]) and (lo[2] <= x < hi[2])


@numba.njit(nogil=True, cache=True)
def defer_crossing_plateaus(bits, lo, hi):
    """Mark (uint8 1) the voxels of the core box [lo, hi) whose plateau (voxels joined by
    bidirectional edges) crosses the box's boundary: their division needs voxels beyond the box.
    Plateaus of ``>= high`` edges (flag HIGH) have no exit and are never divided: not deferred.
    What is left is rare: sub-``high`` plateaus and mutual maxima that straddle the face."""
    zd, yd, xd = bits.shape
    deferred = np.zeros((zd, yd, xd), np.uint8)
    stack = []
    for z in range(lo[0], hi[0]):
        for y in range(lo[1], hi[1]):
            for x in range(lo[2], hi[2]):
                b = bits[z, y, x]
                if b & HIGH:
                    continue
                for d in range(6):
                    if b & DIRMASK[d]:
                        nz, ny, nx = _neighbour(z, y, x, d)
                        if not _inside(nz, ny, nx, lo, hi) and 0 <= nz < zd and 0 <= ny < yd \
                                and 0 <= nx < xd and bits[nz, ny, nx] & IDIRMASK[d]:
                            if deferred[z, y, x] == 0:
                                deferred[z, y, x] = 1
                                stack.append((z, y, x))
    while len(stack):
        z, y, x = stack.pop()
        b = bits[z, y, x]
        for d in range(6):
            if b & DIRMASK[d]:
                nz, ny, nx = _neighbour(z, y, x, d)
                if _inside(nz, ny, nx, lo, hi) and bits[nz, ny, nx] & IDIRMASK[d] \
                        and deferred[nz, ny, nx] == 0:
                    deferred[nz, ny, nx] = 1
                    stack.append((nz, ny, nx))
    return deferred


@numba.njit(nogil=True, cache=True)
def divide_plateaus(bits, lo, hi, deferred):
    """Rule 2 in place on the core box [lo, hi) of ``bits`` (a box with a 1-voxel ring, or the
    whole volume with lo=0, hi=shape), skipping ``deferred`` voxels (whole plateaus)."""
    zd, yd, xd = bits.shape
    visited = np.zeros((zd, yd, xd), np.uint8)
    queue = []
    for z in range(lo[0], hi[0]):
        for y in range(lo[1], hi[1]):
            for x in range(lo[2], hi[2]):
                if deferred[z, y, x]:
                    continue
                b = bits[z, y, x]
                for d in range(6):
                    if b & DIRMASK[d]:
                        nz, ny, nx = _neighbour(z, y, x, d)
                        if not (0 <= nz < zd and 0 <= ny < yd and 0 <= nx < xd) \
                                or not (bits[nz, ny, nx] & IDIRMASK[d]):
                            visited[z, y, x] = 1
                            queue.append((z, y, x))
                            break
    head = 0
    while head < len(queue):
        z, y, x = queue[head]
        head += 1
        b = bits[z, y, x]
        keep = 0
        for d in range(6):
            if b & DIRMASK[d]:
                nz, ny, nx = _neighbour(z, y, x, d)
                if 0 <= nz < zd and 0 <= ny < yd and 0 <= nx < xd \
                        and bits[nz, ny, nx] & IDIRMASK[d]:
                    if visited[nz, ny, nx] == 0:
                        visited[nz, ny, nx] = 1
                        queue.append((nz, ny, nx))
                else:
                    keep = DIRMASK[d]
        bits[z, y, x] = keep


@numba.njit(nogil=True, cache=True)
def _find(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@numba.njit(nogil=True, cache=True)
def components(bits, lo, hi, origin, full, skip):
    """Rule 3 on the core box [lo, hi) of ``bits``, as waterz does it: from each unlabelled
    voxel in raster order, a search along kept edges (inside the box) either reaches a labelled
    voxel (and takes its label) or not (and the voxel names a new basin).

    Returns (labels of the core box, uint64: 1 + global raster index of each component's first
    voxel, 0 for background; crossing, int64 (n, 2): (label, global index of the target) for
    each kept edge leaving the box). ``origin``: global position of the core box's first voxel;
    ``full``: the volume's shape; ``skip``: voxels whose own edges are not followed here
    (deferred plateaus, resolved elsewhere). The first voxel of a search is the smallest index
    of its component (all smaller ones are labelled by then), so labels are canonical.
    """
    cz, cy, cx = hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]
    labels = np.zeros((cz, cy, cx), np.uint64)
    queued = np.zeros((cz, cy, cx), np.uint8)
    ez = []
    ey = []
    ex = []
    et = []
    qz = np.empty(cz * cy * cx, np.int32)  # the search queue, as coordinates (no divisions)
    qy = np.empty(cz * cy * cx, np.int32)
    qx = np.empty(cz * cy * cx, np.int32)
    for z0 in range(cz):
        for y0 in range(cy):
            for x0 in range(cx):
                if labels[z0, y0, x0] != 0:
                    continue
                if bits[z0 + lo[0], y0 + lo[1], x0 + lo[2]] == 0 \
                        and not skip[z0 + lo[0], y0 + lo[1], x0 + lo[2]]:
                    continue
                n = 1
                qz[0], qy[0], qx[0] = z0, y0, x0
                queued[z0, y0, x0] = 1
                head = 0
                found = np.uint64(0)
                while head < n and found == 0:
                    z, y, x = qz[head], qy[head], qx[head]
                    head += 1
                    if skip[z + lo[0], y + lo[1], x + lo[2]]:
                        continue
                    b = bits[z + lo[0], y + lo[1], x + lo[2]]
                    for d in range(6):
                        if b & DIRMASK[d]:
                            nz, ny, nx = _neighbour(z, y, x, d)
                            if 0 <= nz < cz and 0 <= ny < cy and 0 <= nx < cx:
                                if labels[nz, ny, nx] != 0:
                                    found = labels[nz, ny, nx]
                                    break
                                if queued[nz, ny, nx] == 0:
                                    queued[nz, ny, nx] = 1
                                    qz[n], qy[n], qx[n] = nz, ny, nx
                                    n += 1
                            else:
                                ez.append(z)
                                ey.append(y)
                                ex.append(x)
                                et.append(((origin[0] + nz) * full[1] + origin[1] + ny) * full[2]
                                          + origin[2] + nx)
                if found == 0:
                    found = np.uint64(((origin[0] + z0) * full[1] + origin[1] + y0) * full[2]
                                      + origin[2] + x0 + 1)
                for k in range(n):
                    labels[qz[k], qy[k], qx[k]] = found
    crossing = np.empty((len(et), 2), np.int64)
    for k in range(len(et)):
        crossing[k, 0] = labels[ez[k], ey[k], ex[k]]
        crossing[k, 1] = et[k]
    return labels, crossing


def watershed(aff, low: float = 0.0001, high: float = 0.9999, size_threshold: int = 0):
    """Steepest-ascent watershed basins (uint64, canonical ids, 0 = background).

    ``low`` / ``high``: affinity thresholds (waterz's defaults); ``size_threshold``: basins with
    fewer voxels become background (the "dust" rule; 0 keeps every basin).
    """
    aff, low, high, size_threshold = arguments(aff=aff, low=low, high=high,
                                               size_threshold=size_threshold)
    shape = np.array(aff.shape[1:], np.int64)
    bits = steepest_ascent(aff, np.float32(low), np.float32(high))
    zero = np.zeros(3, np.int64)
    none = np.zeros(bits.shape, np.uint8)
    divide_plateaus(bits, zero, shape, none)
    basins, crossing = components(bits, zero, shape, zero, shape, none)
    assert len(crossing) == 0
    if size_threshold > 0:
        ids, counts = np.unique(basins, return_counts=True)
        small = ids[(counts < size_threshold) & (ids != 0)]
        if len(small):
            basins[np.isin(basins, small)] = 0
    return basins


@numba.njit(nogil=True, cache=True)
def divide_plateaus_sparse(index, bits, full):
    """Rule 2 on a scattered set of voxels (whole plateaus that straddle chunk faces), given by
    their sorted global raster ``index`` and raw ``bits``; ``full``: the volume's shape.
    Neighbours outside the set count as not pointing back (a neighbour that did would be on
    the same plateau, hence in the set). Returns the kept bits, exactly what ``divide_plateaus``
    gives these voxels on the whole volume (seeds in raster order, the same search), and the
    kept edges as (position in the set, global index of the target)."""
    n = len(index)
    out = bits.copy()
    visited = np.zeros(n, np.uint8)
    step = np.array([-full[1] * full[2], -full[2], -1, full[1] * full[2], full[2], 1], np.int64)
    nbr = np.full((n, 6), -1, np.int64)  # position of each neighbour in the set, or -1
    for k in range(n):
        g = index[k]
        z = g // (full[1] * full[2])
        y = (g // full[2]) % full[1]
        x = g % full[2]
        coords = (z, y, x)
        for d in range(6):
            axis = d % 3
            c = coords[axis] + (-1 if d < 3 else 1)
            if c < 0 or c >= full[axis]:
                continue
            t = g + step[d]
            j = np.searchsorted(index, t)
            if j < n and index[j] == t:
                nbr[k, d] = j
    queue = []
    for k in range(n):
        b = out[k]
        for d in range(6):
            if b & DIRMASK[d]:
                j = nbr[k, d]
                if j < 0 or not (out[j] & IDIRMASK[d]):
                    visited[k] = 1
                    queue.append(k)
                    break
    head = 0
    while head < len(queue):
        k = queue[head]
        head += 1
        b = out[k]
        keep = 0
        for d in range(6):
            if b & DIRMASK[d]:
                j = nbr[k, d]
                if j >= 0 and out[j] & IDIRMASK[d]:
                    if visited[j] == 0:
                        visited[j] = 1
                        queue.append(j)
                else:
                    keep = DIRMASK[d]
        out[k] = keep
    sources = []
    targets = []
    for k in range(n):
        b = out[k]
        for d in range(6):
            if b & DIRMASK[d]:
                sources.append(k)
                targets.append(index[k] + step[d])
    src = np.empty(len(sources), np.int64)
    tgt = np.empty(len(sources), np.int64)
    for i in range(len(sources)):
        src[i] = sources[i]
        tgt[i] = targets[i]
    return out, src, tgt
