"""Synthetic BraTS-like brain MRI volumes with nested tumour masks; no download.

Builds ``brats_volumes(n, side, seed) -> (volumes float32 [n,s,s,s,4], labels float32
[n,s,s,s,3])``. Channels follow BraTS: modalities T1, T1ce (contrast enhanced), T2, FLAIR; masks
WT (whole tumour), TC (tumour core), ET (enhancing tumour), the three overlapping regions the
challenge scores and the 3D U-Net's sigmoid outputs predict.

Per volume:
* brain: a randomly sized and placed ellipsoid (plus a darker ventricle-like core) with smooth
  tissue texture, on a zero background;
* tumour: a lumpy ellipsoid (radius modulated by random low-frequency harmonics) inside the
  brain = WT; a smaller lumpy region inside it = TC; ET = the rim of TC (TC minus a necrotic
  centre). Nesting ET <= TC <= WT is enforced by construction (intersections), not hoped for;
* intensities: each modality has its own contrast per region (oedema bright in T2/FLAIR,
  enhancing rim bright in T1ce, necrosis dark in T1/T1ce), jittered per volume, times a smooth
  multiplicative bias field, plus Gaussian noise; values roughly in [0, 1.5].

Assumes numpy only; works for any cube side >= 1 (tiny sides may contain no tumour voxels).
Computed in float32 one volume at a time, so 192^3 volumes take ~110 MB each, not gigabytes.
"""

from __future__ import annotations

import numpy as np

MODALITIES = ("T1", "T1ce", "T2", "FLAIR")
MASKS = ("WT", "TC", "ET")

# Mean intensity per region (rows) and modality (columns: T1, T1ce, T2, FLAIR).
_CONTRAST = np.array([
    [0.55, 0.50, 0.40, 0.45],   # healthy brain tissue
    [0.45, 0.45, 0.95, 1.00],   # oedema (WT minus TC): bright in T2 and FLAIR
    [0.25, 0.20, 0.85, 0.60],   # necrotic / non-enhancing core (TC minus ET)
    [0.50, 1.20, 0.70, 0.75],   # enhancing tumour (ET): bright in T1ce
], np.float32)
_VENTRICLE = np.array([0.25, 0.25, 0.95, 0.15], np.float32)  # CSF: dark T1/FLAIR, bright T2


def _check(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return int(value)


def _lumpy_radius(rng, x, y, z, harmonics: int = 3, amplitude: float = 0.15):
    """1 + sum of random low-frequency spherical-ish harmonics, evaluated on direction (x,y,z)."""
    r = np.sqrt(x * x + y * y + z * z) + np.float32(1e-6)
    u, v, w = x / r, y / r, z / r
    out = np.ones(np.broadcast_shapes(x.shape, y.shape, z.shape), np.float32)
    for _ in range(harmonics):
        k = rng.normal(0, 2.0, 3).astype(np.float32)
        phase = np.float32(rng.uniform(0, 2 * np.pi))
        out += np.float32(amplitude / harmonics) * np.sin(k[0] * u + k[1] * v + k[2] * w + phase)
    return out


def _smooth_field(rng, x, y, z, terms: int = 4, amplitude: float = 0.3):
    """A smooth random field (sum of a few long-wavelength cosines), mean ~0."""
    out = np.zeros(np.broadcast_shapes(x.shape, y.shape, z.shape), np.float32)
    for _ in range(terms):
        k = rng.normal(0, 2.5, 3).astype(np.float32)
        phase = np.float32(rng.uniform(0, 2 * np.pi))
        out += np.float32(amplitude / terms) * np.cos(k[0] * x + k[1] * y + k[2] * z + phase)
    return out


def _one(rng, side: int) -> tuple[np.ndarray, np.ndarray]:
    c = ((np.arange(side, dtype=np.float32) + 0.5) / side * 2 - 1)  # voxel centres in [-1, 1]
    x, y, z = c[:, None, None], c[None, :, None], c[None, None, :]

    # Brain ellipsoid and ventricles.
    radii = rng.uniform(0.72, 0.9, 3).astype(np.float32)
    centre = rng.uniform(-0.05, 0.05, 3).astype(np.float32)
    bx, by, bz = (x - centre[0]) / radii[0], (y - centre[1]) / radii[1], (z - centre[2]) / radii[2]
    brain_r = np.sqrt(bx * bx + by * by + bz * bz)
    brain = brain_r < 1
    ventricle = brain_r < rng.uniform(0.12, 0.2)

    # Tumour: centre inside the brain, away from its edge.
    tc_centre = centre + rng.uniform(-0.35, 0.35, 3).astype(np.float32) * radii
    tx, ty, tz = x - tc_centre[0], y - tc_centre[1], z - tc_centre[2]
    dist = np.sqrt(tx * tx + ty * ty + tz * tz)
    wt_r = np.float32(rng.uniform(0.25, 0.4)) * _lumpy_radius(rng, tx, ty, tz, 4, 0.3)
    wt = (dist < wt_r) & brain
    core_r = wt_r * np.float32(rng.uniform(0.5, 0.75)) * _lumpy_radius(rng, tx, ty, tz, 3, 0.15)
    tc = (dist < core_r) & wt
    necrosis_r = core_r * np.float32(rng.uniform(0.4, 0.7))
    et = tc & (dist >= necrosis_r)

    # Region index per voxel: 0 healthy, 1 oedema, 2 necrosis, 3 enhancing.
    region = np.where(et, 3, np.where(tc, 2, np.where(wt, 1, 0))).astype(np.int8)
    contrast = _CONTRAST * rng.uniform(0.9, 1.1, _CONTRAST.shape).astype(np.float32)
    vol = np.empty((side, side, side, 4), np.float32)
    bias = 1 + _smooth_field(rng, x, y, z, amplitude=0.25)
    for m in range(4):
        texture = _smooth_field(rng, 3 * x, 3 * y, 3 * z, amplitude=0.08)
        v = contrast[region, m] + texture
        v = np.where(ventricle & ~wt, _VENTRICLE[m], v)
        v = np.where(brain, v * bias, 0).astype(np.float32)
        v += rng.normal(0, 0.03, v.shape).astype(np.float32)
        vol[..., m] = np.maximum(v, 0)
    labels = np.stack([wt, tc, et], -1).astype(np.float32)
    return vol, labels


def brats_volumes(n: int, side: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` BraTS-like cubes: volumes ``[n,side,side,side,4]`` and masks ``[n,side,side,side,3]``.

    Mask channels are WT, TC, ET (binary float32, nested ET <= TC <= WT).
    """
    n = _check("n", n)
    side = _check("side", side)
    rng = np.random.default_rng(seed)
    vols = np.empty((n, side, side, side, 4), np.float32)
    labels = np.empty((n, side, side, side, 3), np.float32)
    for i in range(n):
        vols[i], labels[i] = _one(rng, side)
    return vols, labels
