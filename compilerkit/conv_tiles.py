"""The tile arithmetic of the fast convolutions, shared by their lowerings
(lowering/winograd.py, lowering/fft.py, lowering/conv_algorithm.py) and the roofline that
prices them (roofline.py): which variant an algorithm name asks for, Winograd's transform
matrices, the FFT's tile sizes per axis and its modelled cost, and the groups of the fused
schedule. Pure arithmetic on sizes (numpy, and wincnn's matrices), no IR, so both
sides import it without importing each other.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from compilerkit.winograd_tables import MATRICES

# ---- Winograd F(m, 3) ----------------------------------------------------------------------
WINOGRAD_DEFAULT_M = 4
# Interpolation points, in the order Lavin & Gray and wincnn's README use them; F(m, 3) takes
# the first m + 1 (the point at infinity is wincnn's implicit last one).
WINOGRAD_POINTS = ("0", "1", "-1", "2", "-2", "1/2", "-1/2")


@functools.cache
def winograd_variant(name: str) -> tuple[int, bool]:
    """(m of F(m, 3), fused) of a "winograd..." name."""
    parts = name.split("-")[1:]
    sizes = [int(x[1:]) for x in parts if x[:1] == "f" and x[1:].isdigit()]
    return (sizes[0] if sizes else WINOGRAD_DEFAULT_M), "fused" in parts


@functools.cache
def winograd_matrices(m: int, r: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A^T [m, alpha], G [alpha, r], B^T [alpha, alpha]) of F(m, r) in float64, from wincnn's
    Cook-Toom construction (exact rationals, then each rounded to the nearest float64): read
    from winograd_tables.py, which holds wincnn's answers for the usual sizes, so a compile
    need not import sympy; other sizes ask wincnn. F(1, 1) is the identity. Computed once per
    (m, r) and kept; the arrays are read-only, so no caller can change them."""
    if r == 1:
        one = np.ones((1, 1))
        one.flags.writeable = False
        return one, one, one
    if m + r - 2 > len(WINOGRAD_POINTS):
        raise ValueError(f"F({m}, {r}) needs {m + r - 2} interpolation points; "
                         f"{len(WINOGRAD_POINTS)} are defined")
    table = MATRICES.get((m, r))
    if table is not None:
        exact = [[[Fraction(x) for x in row] for row in mat] for mat in table]
    else:
        exact = wincnn_matrices(m, r)
    mats = tuple(np.array([[float(x) for x in row] for row in mat], dtype=np.float64)
                 for mat in exact)
    for a in mats:
        a.flags.writeable = False
    return mats


def wincnn_matrices(m: int, r: int) -> list:
    """(A^T, G, B^T) of F(m, r) for conv_tiles.WINOGRAD_POINTS from wincnn, as rows of exact
    Fractions (sympy, imported here: only for sizes winograd_tables.py does not hold, and by
    the test that checks those tables)."""
    import wincnn
    from sympy import Rational

    pts = [Rational(p) for p in WINOGRAD_POINTS[:m + r - 2]]
    at, g, bt, _ = wincnn.cookToomFilter(pts, m, r)
    return [[[Fraction(int(x.p), int(x.q)) for x in row] for row in mat.tolist()]
            for mat in (at, g, bt)]


# ---- the fused schedule's groups (Winograd's and the FFT's) --------------------------------
# Transformed input and product of one group of the fused schedule: half this machine's L2 per
# core (512 KiB), so U's panels fit beside them. At 1 thread, 128-512 KiB measured alike and
# faster than 1-4 MiB (3 MiB, as much as the whole 64 x 56 x 56 layer, is the three-stage case):
# 64@56 1.66 ms at 256 KiB vs 1.91 at 4 MiB, 32@112 1.93 vs 2.57, 16@112 0.66 vs 0.96.
FUSED_BYTES = 256 * 1024
# Fewest tiles in a group (the products' rows), whatever FUSED_BYTES says: a 14-tile group
# (one tile row of 56 x 56) measured a little slower than 28 (64@56: 1.38 vs 1.35 ms).
MIN_GROUP_TILES = 24


# 3-D Convs whose tile row (a whole plane of tiles) gives V and M of more than
# LINE_GROUP_BYTES group their tiles by lines of the second axis instead (`fused_lines`). A
# row of 16 x 16 tiles of a 64 -> 64 3x3x3 Conv at 32^3 is 8 MB of V and M, four times the
# L2, and its transforms ran at memory speed (the band is at least one row); in groups of 2
# lines (1 MB), 1 thread, F(2,3): 72.3 -> 51.2 ms, 128 -> 64 151 -> 113 ms; the 16^3 layers
# (2-6 MB rows) within the noise either way; limits of 0.5, 2 and 4 MB measured no better.
LINE_GROUP_BYTES = 1024 * 1024


def fused_lines(tiles: list[int], tile_bytes: int) -> int | None:
    """Lines of the second axis per group of the fused schedule, for a layer of `tiles`
    tiles per axis whose V and M take `tile_bytes` per tile: where a 3-D layer's groups would
    be single tile rows (`fused_band`) of more than LINE_GROUP_BYTES, as many lines as that
    holds, at least one; else None (groups of whole rows). Shared by winograd.py and the
    roofline."""
    inner = math.prod(tiles[1:])
    row_bytes = inner * tile_bytes
    if len(tiles) < 3 or row_bytes <= LINE_GROUP_BYTES or fused_band(
            tiles[0], inner, row_bytes) > 1:
        return None
    return min(tiles[1], max(1, LINE_GROUP_BYTES // (row_bytes // tiles[1])))


def fused_band(rows: int, inner: int, row_bytes: int) -> int:
    """Tile rows per group of the fused schedule, for `rows` tile rows of `inner` tiles whose
    V and M take `row_bytes`: as many as FUSED_BYTES holds, at least MIN_GROUP_TILES tiles'
    worth, at most all of them (then the fused schedule is the three-stage one). Shared by
    winograd.py, fft.py and the roofline."""
    fit = max(FUSED_BYTES // row_bytes, -(-MIN_GROUP_TILES // inner), 1)
    return min(rows, fit)


# ---- FFT on tiles --------------------------------------------------------------------------
FFT_TILES = (8, 16, 32, 64)  # the tile sizes t the FFT lowering offers (powers of two)


def fft_variant(name: str) -> tuple[int | None, bool]:
    """(tile size t, or None for choose_fft_tile's, fused) of an "fft..." name."""
    parts = name.split("-")[1:]
    sizes = [int(x[1:]) for x in parts if x[:1] == "t" and x[1:].isdigit()]
    return (sizes[0] if sizes else None), "fused" in parts


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def fft_axis_tiles(t: int, k_sp, out_sp):
    """[(t_d, m_d, tiles_d)] per axis for tile size t: t = m = 1 on axes of kernel 1; an axis
    whose whole output fits one tile (out + k - 1 <= t) gets one tile of the smallest power
    of two that holds it (ZNNi's patch-sized FFT: the pruned case)."""
    out = []
    for k, o in zip(k_sp, out_sp, strict=True):
        if k == 1:
            out.append((1, 1, o))
        elif o + k - 1 <= t:
            tt = max(_pow2(o + k - 1), 2)
            out.append((tt, tt - k + 1, 1))
        else:
            out.append((t, t - k + 1, -(-o // (t - k + 1))))
    return out


def fft_estimate(c: int, k_out: int, k_sp, out_sp, t: int) -> dict:
    """FLOPs of the products and of the transforms, and the bytes of U, for tile size t:
    what `choose_fft_tile` (and compilerkit.roofline) weigh. Transforms: 5 n log2 n per
    complex n-point FFT (the radix-2 count), per line, halved for the real axis; pruning
    ignored."""
    axes = fft_axis_tiles(t, k_sp, out_sp)
    ts = [a[0] for a in axes]
    moved = [d for d, tt in enumerate(ts) if tt > 1]
    real = moved[-1]
    p = math.prod(ts[:real]) * (ts[real] // 2 + 1) * math.prod(ts[real + 1:])
    tiles = math.prod(a[2] for a in axes)
    per_tile = 0.0
    for d in moved:
        lines = math.prod(ts) / ts[d]
        per_tile += lines * 5 * ts[d] * math.log2(ts[d]) * (0.5 if d == real else 1.0)
    return {"positions": p, "tiles": tiles, "axes": axes,
            "product_flops": 8.0 * p * tiles * c * k_out,
            "transform_flops": per_tile * tiles * (c + k_out),
            "u_bytes": 16.0 * p * c * k_out}


# Rough rates for choose_fft_tile (1 thread, this machine): the micro-kernel's products, the
# unrolled butterflies, and reading U (from the L3 or DRAM). compilerkit.roofline measures them.
PRODUCT_FLOPS, TRANSFORM_FLOPS, U_BYTES_PER_S = 50e9, 8e9, 10e9


def choose_fft_tile(c: int, k_out: int, k_sp, out_sp) -> int:
    """The tile size of FFT_TILES (t > largest kernel) with the least modelled time: products
    at PRODUCT_FLOPS or reading U (once per call) at U_BYTES_PER_S, whichever is slower, plus
    the transforms at TRANSFORM_FLOPS."""
    def cost(t):
        e = fft_estimate(c, k_out, k_sp, out_sp, t)
        return (max(e["product_flops"] / PRODUCT_FLOPS, e["u_bytes"] / U_BYTES_PER_S)
                + e["transform_flops"] / TRANSFORM_FLOPS)
    fits = [t for t in FFT_TILES if t > max(k_sp)]
    return min(fits, key=cost)
