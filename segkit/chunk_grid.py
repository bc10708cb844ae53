"""The chunk grid of ``segkit.chunked``: chunk boxes, their Z-order placement on workers, how
many tasks a parent joins per round, and the halos a task puts together from its neighbours'
face slabs."""

from __future__ import annotations

import itertools

FACES = [(axis, side) for axis in range(3) for side in (0, 1)]


def boxes(shape, chunks):
    """Chunk grid: dict grid index -> (lo, hi) voxel box."""
    grid = [range(-(-s // c)) for s, c in zip(shape, chunks, strict=True)]
    out = {}
    for idx in itertools.product(*grid):
        lo = tuple(i * c for i, c in zip(idx, chunks, strict=True))
        hi = tuple(min(v + c, s) for v, c, s in zip(lo, chunks, shape, strict=True))
        out[idx] = (lo, hi)
    return out


def morton(idx):
    """Z-order key of a grid index: the 2x2x2 children of every parent, at every round, are
    consecutive in this order."""
    key = 0
    for bit in range(21):
        for a in range(3):
            key |= ((idx[a] >> bit) & 1) << (3 * bit + 2 - a)
    return key


def owners(boxes, workers):
    """Chunk -> worker: the chunks in Z-order, cut into one run per worker. Neighbours share a
    worker (their face slabs stay in its memory) and so do most parents' children."""
    order = sorted(boxes, key=morton)
    return {idx: workers[k * len(workers) // len(order)] for k, idx in enumerate(order)}


def inner_faces(lo, hi, shape):
    """(axis, side) of the box faces that are inside the volume (not on its border)."""
    return [(a, s) for a, s in FACES if (lo[a] > 0 if s == 0 else hi[a] < shape[a])]


def join_factor(shape, size):
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


# A task's halo comes from its neighbours' *slabs* (their outer layers), handed over by Dask,
# not read from zarr: reading a box 2 voxels wider than a chunk decodes the 26 neighbouring
# storage chunks whole (27x the chunk's bytes), which cost more than the watershed itself.
AFF_HALO = 2  # steepest ascent of the 1-voxel ring needs the ring's neighbours' edges too


def slab_box(lo, hi, axis, side, width):
    """The ``width`` outermost layers of box [lo, hi) on face (axis, side)."""
    slo, shi = list(lo), list(hi)
    if side == 0:
        shi[axis] = min(hi[axis], lo[axis] + width)
    else:
        slo[axis] = max(lo[axis], hi[axis] - width)
    return tuple(slo), tuple(shi)


def halo_sources(idx, boxes, chunks, elo, ehi):
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


def paste(dst, dlo, pieces):
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
