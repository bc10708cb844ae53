"""Synthetic handwritten-style digits: a stand-in for MNIST that needs no download.

Builds ``digits(n, seed) -> (images float32 [n,28,28,1] in [0,1], labels int64 [n])``. Each digit
0-9 is a glyph of polyline strokes in a unit box. Every sample gets its own random affine jitter
(rotation, scale, shear, translation), stroke width, ink level and pixel noise; strokes are drawn
anti-aliased from the distance of each pixel centre to the nearest stroke segment.

Assumes numpy only. The whole batch is rendered at once (samples x segments x pixels), chunked so
memory stays bounded; the same seed gives the same bytes on every platform because the random
numbers come from ``numpy.random.default_rng(seed)`` and the arithmetic is plain float64.
"""

from __future__ import annotations

import numpy as np

SIDE = 28


def _ellipse(cx, cy, rx, ry, start=0.0, stop=360.0, k=12):
    t = np.deg2rad(np.linspace(start, stop, k))
    return list(zip(cx + rx * np.cos(t), cy + ry * np.sin(t), strict=True))


# Strokes per digit, in a unit box (x to the right, y down). Curves are short polylines.
_GLYPHS: dict[int, list[list[tuple[float, float]]]] = {
    0: [_ellipse(0.5, 0.5, 0.28, 0.4, k=13)],
    1: [[(0.32, 0.25), (0.52, 0.08), (0.52, 0.92)]],
    2: [_ellipse(0.5, 0.32, 0.27, 0.22, 200, 370, 6) + [(0.2, 0.9), (0.82, 0.9)]],
    3: [_ellipse(0.48, 0.3, 0.26, 0.2, 210, 450, 7), _ellipse(0.48, 0.7, 0.3, 0.22, 270, 510, 7)],
    4: [[(0.62, 0.92), (0.62, 0.08), (0.18, 0.65), (0.85, 0.65)]],
    5: [[(0.78, 0.1), (0.3, 0.1), (0.25, 0.45)] + _ellipse(0.48, 0.65, 0.3, 0.25, 250, 485, 7)],
    6: [[(0.68, 0.08), (0.35, 0.4)] + _ellipse(0.5, 0.68, 0.26, 0.23, 180, 540, 12)],
    7: [[(0.18, 0.1), (0.82, 0.1), (0.42, 0.92)], [(0.38, 0.52), (0.7, 0.52)]],
    8: [_ellipse(0.5, 0.29, 0.2, 0.19, k=11), _ellipse(0.5, 0.7, 0.26, 0.22, k=12)],
    9: [_ellipse(0.48, 0.32, 0.25, 0.23, k=12), [(0.73, 0.32), (0.62, 0.92)]],
}


def _segments() -> tuple[np.ndarray, np.ndarray]:
    """All glyphs as padded segment arrays: starts/ends [10, S, 2] and a validity mask [10, S]."""
    segs = []
    for d in range(10):
        s = [(p, q) for stroke in _GLYPHS[d] for p, q in zip(stroke[:-1], stroke[1:], strict=True)]
        segs.append(s)
    m = max(len(s) for s in segs)
    a = np.zeros((10, m, 2))
    b = np.zeros((10, m, 2))
    valid = np.zeros((10, m), bool)
    for d, s in enumerate(segs):
        arr = np.array(s)  # [k, 2 (start/end), 2 (x/y)]
        a[d, : len(s)], b[d, : len(s)], valid[d, : len(s)] = arr[:, 0], arr[:, 1], True
    return a, b, valid


_A, _B, _VALID = _segments()


def _check_count(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if n <= 0:
        raise ValueError(f"n must be a positive integer, got {n}")
    return int(n)


def digits(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` synthetic digit images ``[n,28,28,1]`` float32 in [0,1] and labels ``[n]`` int64."""
    n = _check_count(n)
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n).astype(np.int64)
    theta = rng.uniform(-0.25, 0.25, n)          # rotation, radians (~ +-14 degrees)
    scale = rng.uniform(16.0, 21.0, n)           # glyph box size in pixels
    aspect = rng.uniform(0.8, 1.15, n)           # width / height
    shear = rng.uniform(-0.3, 0.3, n)            # italic slant
    shift = rng.uniform(-2.0, 2.0, (n, 2))       # translation, pixels
    width = rng.uniform(1.0, 2.2, n)             # stroke width, pixels
    ink = rng.uniform(0.75, 1.0, n)              # stroke brightness
    noise = rng.normal(0.0, 0.06, (n, SIDE, SIDE))

    # Per-sample 2x2 linear map: rotation @ shear @ diag(scale*aspect, scale).
    c, s = np.cos(theta), np.sin(theta)
    rot = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)      # [n,2,2]
    shr = np.zeros((n, 2, 2))
    shr[:, 0, 0] = scale * aspect
    shr[:, 0, 1] = -shear * scale                                        # slant the top right
    shr[:, 1, 1] = scale
    lin = rot @ shr
    centre = SIDE / 2 + shift                                            # [n,2]

    yy, xx = np.mgrid[0:SIDE, 0:SIDE] + 0.5
    pix = np.stack([xx.ravel(), yy.ravel()], -1)                         # [P,2]

    images = np.empty((n, SIDE * SIDE))
    chunk = 512
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        lab = labels[lo:hi]
        a = np.einsum("nij,nsj->nsi", lin[lo:hi], _A[lab] - 0.5) + centre[lo:hi, None]  # [k,S,2]
        b = np.einsum("nij,nsj->nsi", lin[lo:hi], _B[lab] - 0.5) + centre[lo:hi, None]
        ab = b - a                                                        # [k,S,2]
        # Pixel-to-segment distance, x and y kept apart (faster than a trailing axis of 2).
        apx = pix[:, 0] - a[..., 0:1]                                     # [k,S,P]
        apy = pix[:, 1] - a[..., 1:2]
        abx, aby = ab[..., 0:1], ab[..., 1:2]
        t = np.clip((apx * abx + apy * aby) / np.maximum(abx**2 + aby**2, 1e-9), 0.0, 1.0)
        d2 = (apx - t * abx) ** 2 + (apy - t * aby) ** 2
        d2[~_VALID[lab]] = np.inf                                         # padding segments
        d = np.sqrt(d2.min(1))                                            # [k,P]
        # Anti-aliased stroke: full ink within width/2, linear falloff over one pixel.
        images[lo:hi] = np.clip(width[lo:hi, None] / 2 + 0.5 - d, 0.0, 1.0) * ink[lo:hi, None]
    images = np.clip(images.reshape(n, SIDE, SIDE) + noise, 0.0, 1.0)
    return images[..., None].astype(np.float32), labels
