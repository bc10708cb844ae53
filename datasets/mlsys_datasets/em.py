"""Synthetic serial-section electron-microscopy volumes with ground truth and affinities.

``em_volume(shape, seed, ...) -> EMVolume(image, labels, affinities)``; no downloads (no PyPI
package ships an EM volume). Arrays are indexed ``[z, y, x]``; z is the cutting direction.

What is in a volume, and why:
* **cells** fill space like neuropil: a Voronoi tessellation of random seeds in *physical*
  coordinates (a z step is ``anisotropy`` times a y/x step, as in serial-section EM where
  sections are 4-8x thicker than the in-plane pixel), warped by a smooth random displacement so
  cells are not convex polyhedra;
* **neurites**: branching tubes (random walks that fork) painted over the cells, each branch
  its own object: the long thin processes that make EM segmentation hard;
* **membranes**: dark voxels where a voxel's neighbour belongs to another object, then a blur
  (thinner in z) and Gaussian noise;
* **missing sections** (blank, noisy slices) and **misaligned sections** (a slice shifted in
  y/x; its ground truth shifts with it, as an annotator would trace it);
* **ground truth** ``labels`` (uint32, dense: every voxel belongs to an object, ids from 1);
* **affinities** ``(3, Z, Y, X)`` float32 in [0, 1] in waterz's layout: channel 0 is the edge
  between ``(z, y, x)`` and ``(z-1, y, x)``, 1 the edge to ``y-1``, 2 to ``x-1``; 1 inside an
  object, 0 across a boundary, then the errors a boundary network makes, with knobs:
  ``noise`` (smooth noise on every edge, the source of over-segmentation), ``gaps`` (blobs where
  a membrane is faint: boundary edges rise, causing merges), ``false_boundaries`` (blobs inside
  cells where affinities drop, causing splits), weaker and noisier z edges, and edges touching a
  missing section set near 0.5 (the network cannot tell).

Seeded (numpy ``default_rng``) and deterministic; a 256^3 volume builds in seconds with numpy
and scipy.ndimage (a dependency of scikit-image).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import ndimage


class EMVolume(NamedTuple):
    image: np.ndarray        # float32 (Z, Y, X), membranes dark, roughly in [0, 1]
    labels: np.ndarray       # uint32 (Z, Y, X), ground truth, ids from 1
    affinities: np.ndarray   # float32 (3, Z, Y, X), waterz layout (z, y, x edges to -1)


def _shape(shape) -> tuple[int, int, int]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape, shape, shape)
    shape = tuple(shape)
    if len(shape) != 3 or not all(isinstance(s, (int, np.integer)) and s >= 2 for s in shape):
        raise ValueError(f"shape must be an int or three ints >= 2 (z, y, x), got {shape!r}")
    return tuple(int(s) for s in shape)


def _smooth_noise(rng, shape, sigma, anisotropy):
    """Zero-mean, unit-std Gaussian-filtered noise (correlation length ``sigma`` pixels in y/x).

    Long correlation lengths are drawn on a coarser grid and interpolated up (same statistics
    to the eye, a fraction of the filtering time at 256^3)."""
    step = max(1, int(sigma // 2))
    zstep = max(1, int(step // anisotropy))
    coarse = tuple(-(-n // k) + (k > 1) for n, k in zip(shape, (zstep, step, step), strict=True))
    field = rng.standard_normal(coarse, dtype=np.float32)
    field = ndimage.gaussian_filter(field, (sigma / anisotropy / zstep, sigma / step, sigma / step),
                                    mode="wrap", truncate=2.5)
    if step > 1 or zstep > 1:
        field = ndimage.zoom(field, (zstep, step, step), order=1, grid_mode=False)
    field = np.ascontiguousarray(field[:shape[0], :shape[1], :shape[2]])
    field -= field.mean()
    field /= field.std() + np.float32(1e-12)
    return field


def _cells(rng, shape, anisotropy, cell_size):
    """Warped Voronoi labels (ids 1..n) in physical coordinates."""
    z, y, x = shape
    extent = np.array([z * anisotropy, y, x], np.float64)
    n = max(2, int(round(np.prod(extent) / cell_size ** 3)))
    seeds = rng.uniform(0, 1, (n, 3)) * extent
    # Nearest seed by an exact distance transform, on a grid 2x coarser in y/x (cells are ~24
    # pixels across; the warp below is looked up at full resolution).
    f = 2 if min(shape[1:]) >= 32 else 1
    coarse = (shape[0], -(-shape[1] // f), -(-shape[2] // f))
    grid = np.zeros(coarse, np.int32)
    idx = np.floor(seeds / [anisotropy, f, f]).astype(np.int64)
    idx = np.minimum(idx, np.array(coarse) - 1)
    grid[idx[:, 0], idx[:, 1], idx[:, 2]] = np.arange(1, n + 1, dtype=np.int32)
    nearest = ndimage.distance_transform_edt(grid == 0, sampling=(anisotropy, f, f),
                                             return_distances=False, return_indices=True)
    grid = grid[nearest[0], nearest[1], nearest[2]]
    del nearest
    # Warp: look each voxel up at a smoothly displaced position (cells become non-convex).
    amp = cell_size / 5
    coords = np.indices(shape, dtype=np.float32)
    coords[1:] /= f
    for axis, scale in enumerate((1 / anisotropy, 1 / f, 1 / f)):
        coords[axis] += np.float32(amp * scale) * _smooth_noise(rng, shape, cell_size / 2,
                                                                anisotropy)
    labels = ndimage.map_coordinates(grid, coords, order=0, mode="nearest")
    return labels.astype(np.uint32)


def _neurites(rng, labels, anisotropy, count, radius, next_id):
    """Paint ``count`` branching tubes (random walks that fork) over ``labels``, in place."""
    shape = np.array(labels.shape)
    extent = shape * [anisotropy, 1, 1]
    step = 3.0 * radius
    for _ in range(count):
        stack = [(rng.uniform(0, 1, 3) * extent, rng.normal(size=3), 2)]
        while stack:
            pos, direction, branches = stack.pop()
            label = next_id
            next_id += 1
            direction = direction / np.linalg.norm(direction)
            r = radius * rng.uniform(0.7, 1.3)
            for _ in range(int(rng.integers(8, 30))):
                new = pos + step * direction
                _paint_segment(labels, pos, new, r, anisotropy, label)
                pos = new
                direction = direction + 0.35 * rng.normal(size=3)
                direction /= np.linalg.norm(direction)
                if np.any(pos < 0) or np.any(pos >= extent):
                    break
                if branches and rng.uniform() < 0.08:  # fork: a new object continues
                    turn = direction + rng.normal(size=3)
                    stack.append((pos.copy(), turn, branches - 1))
                    branches -= 1
    return next_id


def _paint_segment(labels, a, b, r, anisotropy, label):
    """Set voxels within physical distance ``r`` of segment a-b to ``label``."""
    scale = np.array([anisotropy, 1, 1])
    lo = np.maximum(np.floor((np.minimum(a, b) - r) / scale).astype(int), 0)
    hi = np.minimum(np.ceil((np.maximum(a, b) + r) / scale).astype(int) + 1, labels.shape)
    if np.any(hi <= lo):
        return
    zz, yy, xx = np.ogrid[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
    p = (zz * scale[0], yy * 1.0, xx * 1.0)
    ab = b - a
    t = ((p[0] - a[0]) * ab[0] + (p[1] - a[1]) * ab[1] + (p[2] - a[2]) * ab[2]) / max(ab @ ab, 1e-9)
    t = np.clip(t, 0, 1)
    d2 = sum((p[i] - (a[i] + t * ab[i])) ** 2 for i in range(3))
    box = labels[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
    box[d2 <= r * r] = label


def _blobs(rng, shape, count, radius, anisotropy):
    """A boolean mask of ``count`` random ellipsoids (radius in y/x pixels)."""
    mask = np.zeros(shape, bool)
    for _ in range(count):
        c = rng.uniform(0, 1, 3) * shape
        r = radius * rng.uniform(0.5, 1.5)
        rz = max(r / anisotropy, 0.75)
        lo = np.maximum(np.floor(c - [rz, r, r]).astype(int), 0)
        hi = np.minimum(np.ceil(c + [rz, r, r]).astype(int) + 1, shape)
        zz, yy, xx = np.ogrid[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
        inside = ((zz - c[0]) / rz) ** 2 + ((yy - c[1]) / r) ** 2 + ((xx - c[2]) / r) ** 2 <= 1
        mask[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] |= inside
    return mask


def affinities_from_labels(labels: np.ndarray) -> np.ndarray:
    """Exact affinities (3, Z, Y, X) float32: 1 where a voxel and its -z/-y/-x neighbour share a
    nonzero label, else 0 (and 0 on the volume's low faces, which have no neighbour)."""
    labels = np.asarray(labels)
    if labels.ndim != 3:
        raise ValueError(f"labels must be 3D (z, y, x), got shape {labels.shape}")
    aff = np.zeros((3, *labels.shape), np.float32)
    aff[0, 1:] = (labels[1:] == labels[:-1]) & (labels[1:] != 0)
    aff[1, :, 1:] = (labels[:, 1:] == labels[:, :-1]) & (labels[:, 1:] != 0)
    aff[2, :, :, 1:] = (labels[:, :, 1:] == labels[:, :, :-1]) & (labels[:, :, 1:] != 0)
    return aff


def em_volume(shape=64, seed: int = 0, *, anisotropy: float = 4.0, cell_size: float = 24.0,
              neurites: int | None = None, neurite_radius: float = 2.5, noise: float = 0.2,
              gaps: int | None = None, false_boundaries: int | None = None,
              missing_sections: int = 0, misaligned_sections: int = 0,
              image_noise: float = 0.08, blur: float = 1.0, progress: bool = False) -> EMVolume:
    """A seeded synthetic EM volume: ``image, labels, affinities = em_volume(64, seed=0)``.

    ``shape``: side or (z, y, x) in voxels; ``anisotropy``: z step / y-x step (serial sections
    are 4-8x thicker); ``cell_size``: mean cell diameter in y/x pixels; ``neurites``: number of
    branching tubes (default: scales with the volume); ``noise``: std of the smooth noise added
    to every affinity; ``gaps`` / ``false_boundaries``: number of blobs where membranes fade /
    spurious boundaries appear (default: scale with the volume); ``missing_sections`` /
    ``misaligned_sections``: how many z slices are blank / shifted. ``progress``: a tqdm bar of
    the four stages (about 20 s for 256^3 on a 2-core machine).
    """
    shape = _shape(shape)
    if not anisotropy >= 1:
        raise ValueError(f"anisotropy must be >= 1 (z step / y-x step), got {anisotropy!r}")
    if not cell_size > 2:
        raise ValueError(f"cell_size must be > 2 pixels, got {cell_size!r}")
    if missing_sections + misaligned_sections > shape[0] - 2:
        raise ValueError(f"{missing_sections} missing + {misaligned_sections} misaligned sections "
                         f"do not fit in {shape[0]} z slices (first and last stay intact)")
    rng = np.random.default_rng(seed)
    volume = shape[0] * anisotropy * shape[1] * shape[2]
    per = volume / 64 ** 3 / 4  # 1 for a 64^3 volume at anisotropy 4
    neurites = int(round(6 * per)) if neurites is None else int(neurites)
    gaps = int(round(4 * per)) if gaps is None else int(gaps)
    false_boundaries = int(round(6 * per)) if false_boundaries is None else int(false_boundaries)

    from tqdm.auto import tqdm

    # A with-block: a stage that raises still closes the bar (no stale bar in the notebook).
    with tqdm(total=4, desc="em volume", unit="stage", leave=False,
              disable=not progress) as bar:
        labels = _cells(rng, shape, anisotropy, cell_size)
        bar.update()
        _neurites(rng, labels, anisotropy, neurites, neurite_radius, int(labels.max()) + 1)

        # Sections: choose which slices are missing or shifted (never the first or last).
        slices = rng.permutation(np.arange(1, shape[0] - 1))
        missing = np.sort(slices[:missing_sections])
        shifted = np.sort(slices[missing_sections:missing_sections + misaligned_sections])
        for z in shifted:
            dy, dx = rng.integers(-4, 5, 2)
            labels[z] = np.roll(labels[z], (dy, dx), axis=(0, 1))
        # Ids from 1 in order of first appearance is not needed; just make them compact.
        _, labels = np.unique(labels, return_inverse=True)
        labels = (labels.reshape(shape) + 1).astype(np.uint32)

        bar.update()
        aff = affinities_from_labels(labels)
        # Membrane voxels: a neighbour (either side, any axis) belongs to another object.
        boundary = np.zeros(shape, bool)
        for axis in range(3):
            lo = [slice(None)] * 3
            hi = [slice(None)] * 3
            lo[axis], hi[axis] = slice(None, -1), slice(1, None)
            differ = labels[tuple(lo)] != labels[tuple(hi)]
            boundary[tuple(lo)] |= differ
            boundary[tuple(hi)] |= differ
        # Image: per-object grey level, dark membranes, texture, blur, noise.
        grey = rng.uniform(0.55, 0.85, int(labels.max()) + 1).astype(np.float32)
        image = grey[labels]
        image[boundary] = 0.15
        image += np.float32(0.05) * _smooth_noise(rng, shape, 2.0, anisotropy)
        image = ndimage.gaussian_filter(image, (blur / anisotropy, blur, blur))
        image += np.float32(image_noise) * rng.standard_normal(shape, dtype=np.float32)

        bar.update()
        # Affinity errors: smooth noise, fading membranes (gaps), spurious boundaries, weak z edges.
        # (biased upward: like a trained network's, most edges inside a cell saturate at 1)
        for d in range(3):
            aff[d] += np.float32(noise) * (_smooth_noise(rng, shape, 3.0, 1.0) + np.float32(0.3))
        if gaps:
            gap = _blobs(rng, shape, gaps, 0.25 * cell_size, anisotropy)
            aff[:, gap] = np.maximum(aff[:, gap], rng.uniform(0.55, 0.95, (3, int(gap.sum()))))
        if false_boundaries:
            cut = _blobs(rng, shape, false_boundaries, 0.25 * cell_size, anisotropy)
            aff[:, cut] *= rng.uniform(0.2, 0.7, (3, int(cut.sum()))).astype(np.float32)
        # z edges are less certain across serial sections: extra noise on them
        aff[0] += np.float32(noise / 2) * _smooth_noise(rng, shape, 2.0, anisotropy)
        for z in missing:
            image[z] = np.float32(0.5) + np.float32(image_noise) * rng.standard_normal(shape[1:])
            for zz in (z, z + 1):  # the z edges into and out of the blank slice
                aff[0, zz] = 0.5 + 0.1 * rng.standard_normal(shape[1:])
            aff[1:, z] = 0.5 + 0.2 * rng.standard_normal((2, *shape[1:]))
        np.clip(aff, 0, 1, out=aff)
        aff[0, 0] = aff[1, :, 0] = aff[2, :, :, 0] = 0  # no neighbour below the low faces
        np.clip(image, 0, 1, out=image)
        bar.update()
        return EMVolume(image.astype(np.float32), labels, aff.astype(np.float32))
