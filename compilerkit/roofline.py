"""A hierarchical roofline (after the L3 Fusion paper, arXiv 1912.02165): the machine's peak
FLOP/s and the bandwidth of each memory level, measured by compilerkit's own generated
kernels, and the time a Conv layer should take with each algorithm.

    m = roofline.machine()            # the cached measurement (measure.machine), else DEFAULT
    roofline.predict(Layer(64, 64, (56, 56)), "winograd-f4", m)   # seconds
    roofline.stages(layer, algorithm, m)                           # what the prediction sums

An algorithm runs in stages one after another (im2col: gather, GEMM; Winograd and FFT: input
transform, batched GEMM, output transform), and a layer's predicted time is the sum over its
stages of each stage's roofline: the largest of its FLOPs over its rate and, for every level,
the bytes it moves there over that level's bandwidth (one roof per level). Bytes go to the
level their working set fits in: a buffer of B bytes read or written once counts B there; so
three-stage Winograd moves V and M through the level all of them fit in, L3-fused through the
level one group's fit in (the paper's point). Rates: the GEMM stages run at the micro-kernel's
peak times `gemm_efficiency` (padded lanes, short depth, few rows); the transforms are
unrolled code vectorised over channels, at `Machine.winograd_flops` (Winograd's, non-zero
matrix terms counted) and `Machine.transform_flops` (the FFT's butterflies, 5 n log2 n per
line). The algorithms modelled: im2col, Winograd F(m,3) three-stage / L3-fused
(lowering/winograd.py) and FFT on tiles (lowering/fft.py), 2-D or 3-D (the rank of `out`),
batch 1, f32. "auto" asks `best_algorithm` between im2col and FFT for kernels of 5 and more
(lowering/conv_algorithm.py).

Measured by `compilerkit.measure.machine` (apart, because it compiles kernels and the
compiler itself reads this module): the peak by a 384 x 384 x 384 MatMul (the micro-kernel),
each level's bandwidth by a chain of y = x + 1 over an array whose x and y together fill about
half that level (L1, L2, L3 as `detect_caches` reads them; DRAM: 64 MiB), all compiled by
compilerkit and run on one thread, best of `repeat`; the f32 lanes of the micro-kernel's
vectors from the host target (its column strips are NR = 2 vectors wide). The two transform
rates are calibrated on the machine (`measure.machine.CALIBRATION`: eight small Winograd and
FFT layers, none of them in the sweep that checks the model): the rate whose predictions
are nearest the measured times, in the median of |log(predicted / measured)|. Cached as JSON
in $XDG_CACHE_HOME/compilerkit (or ~/.cache/compilerkit), keyed by the CPU's model name and
its widest vector ISA. A cache without calibrated rates (`transforms_measured`, written by an
older compilerkit) keeps the defaults below, fitted on the AVX2 machine CACHES describes.
ROW_OVERHEAD alone is fitted (to the first run of `benchmarks/winograd_bench.py --section
sweep` at 1 thread on that machine) and belongs to the model; so is ROW_OVERHEAD_UNPACKED, its
twin for products whose U the kernel reads in strips (fitted on an AVX-512 host).
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from compilerkit import conv_tiles

# The machine the model was fitted on (AMD EPYC, AVX2): L1d 32 KiB, L2 512 KiB, L3 32 MiB
# shared. `measure` records the sizes `detect_caches` reads on the machine it runs on.
CACHES = {"L1": 32 * 1024, "L2": 512 * 1024, "L3": 32 * 1024 * 1024}
_SYSFS_CACHE = "/sys/devices/system/cpu/cpu0/cache"


def detect_caches(root: str = _SYSFS_CACHE) -> dict:
    """level -> bytes of the CPU this runs on, from Linux's sysfs (cpu0's data or unified
    caches: a later AMD EPYC has a 1 MiB L2 where the fitted machine had 512 KiB); CACHES'
    value for a level sysfs does not give."""
    found = {}
    for entry in sorted(Path(root).glob("index*")) if os.path.isdir(root) else []:
        try:
            level = int((entry / "level").read_text().strip())
            kind = (entry / "type").read_text().strip()
            size = (entry / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        if kind not in ("Data", "Unified") or not 1 <= level <= 3:
            continue
        scale = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(size[-1:], 1)
        digits = size.rstrip("KMG")
        if digits.isdigit() and int(digits) > 0:
            found[f"L{level}"] = int(digits) * scale
    return {lv: found.get(lv, CACHES[lv]) for lv in CACHES}
DRAM_TEST_BYTES = 64 * 1024 * 1024
LEVELS = ("L1", "L2", "L3", "DRAM")
TRANSFORM_RATES = ("transform_flops", "winograd_flops")  # calibrated by measure.machine


@dataclass
class Machine:
    peak_flops: float  # FLOP/s of the GEMM micro-kernel, 1 thread
    bandwidth: dict  # level -> bytes/s (read + write), 1 thread
    caches: dict = field(default_factory=lambda: dict(CACHES))  # level -> bytes
    # FLOP/s of the FFT's unrolled butterflies (lowering/fft.py) and of Winograd's unrolled
    # transforms (lowering/winograd.py `_lincomb`), vectorised over channels: calibrated by
    # measure.machine where `transforms_measured`, else these (fitted on the AVX2 machine)
    transform_flops: float = 24e9
    winograd_flops: float = 32e9
    lanes: int = 8  # f32 lanes of the micro-kernel's vectors (AVX2 8, AVX-512 16)
    transforms_measured: bool = False

    def level_of(self, nbytes: float) -> str:
        """The nearest level a working set of `nbytes` fits in."""
        for lv in ("L1", "L2", "L3"):
            if nbytes <= self.caches[lv]:
                return lv
        return "DRAM"


# Rates of this machine at 1 thread, for when nothing is measured yet: the order of what
# `measure` gives here (peak 60-75 GFLOP/s; L3 ~13 GB/s, DRAM ~4.5 GB/s read + write).
DEFAULT = Machine(60e9, {"L1": 90e9, "L2": 60e9, "L3": 13e9, "DRAM": 4.5e9})


@dataclass(frozen=True)
class Layer:
    """A stride-1 'same' Conv + bias: C in, K out, output spatial size, kernel size."""

    c: int
    k: int
    out: tuple
    kernel: int = 3


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    cpu, flags = platform.processor() or platform.machine(), []
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            fields = dict(ln.split(":", 1) for ln in f if ln.startswith(("model name", "flags")))
    except OSError:
        fields = {}
    for name, value in fields.items():
        if name.strip() == "model name":
            cpu = value.strip()
        else:
            flags = value.split()
    key = "".join(ch if ch.isalnum() else "_" for ch in cpu)[:60]
    # One model name covers CPUs with and without AVX-512 (the micro-kernel's width differs)
    isa = next((i for i in ("avx512f", "avx2", "avx") if i in flags), "base")
    return Path(base) / "compilerkit" / f"roofline-{key}-{isa}.json"


def machine() -> Machine:
    """This machine's measurement as `compilerkit.measure.machine` cached it, or DEFAULT
    when nothing is cached (the compiler's "auto" reads this and never measures)."""
    path = cache_path()
    if path.is_file():
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not data.get("transforms_measured"):
            data = {k: v for k, v in data.items() if k not in TRANSFORM_RATES}
        known = Machine.__dataclass_fields__
        return Machine(**{k: v for k, v in data.items() if k in known})
    return DEFAULT


def save(m: Machine) -> Path:
    """Write `m` as this machine's cached measurement (atomically); its path."""
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(asdict(m), f, indent=1)
    os.replace(tmp, path)
    return path


# The GEMM micro-kernel (codegen/microkernel.py): NR columns per register block, two vectors
# (16 on AVX2; stages() take 2 * Machine.lanes; narrower column strips are zero-padded, so
# their lanes idle); per call the accumulators are loaded and stored, worth about
# DEPTH_OVERHEAD steps of k (12 vector loads + 12 stores against 12 FMAs per step); and
# Winograd's and the FFT's products, one per transformed position, each pack or stream their
# U[t] panel (C x K) for only as many rows as there are tiles: fitted as ROW_OVERHEAD rows'
# worth of time per product; ROW_OVERHEAD_UNPACKED where U is stored in strips the kernel
# reads unpacked (winograd.batched_weights: columns in whole strips of its width), which
# leaves the row blocks' loads of U and the accumulators' loads and stores.
NR = 16
DEPTH_OVERHEAD = 4
ROW_OVERHEAD = 16
# Fitted like ROW_OVERHEAD, on the sweep's first 26 layers (AVX-512 EPYC, 1 thread): the least
# median error over 0-16 with the transform rates recalibrated at each (4: 0.107; 0: 0.165,
# 16: 0.174)
ROW_OVERHEAD_UNPACKED = 4
PANEL_BYTES = 2 * 1024 * 1024  # im2col's column buffer + output per panel (lowering/conv.py)


@dataclass
class Stage:
    """One stage of an algorithm: FLOPs at a rate ("gemm": the micro-kernel's peak times
    `efficiency`; "winograd" / "transform": Machine.winograd_flops / transform_flops, the
    unrolled transforms), and the bytes it moves at each level (read + write)."""

    name: str
    flops: float
    rate: str
    moved: dict
    efficiency: float = 1.0
    groups: int = 1  # groups of tiles a tiled algorithm's stages run in (fused; else 1)

    def seconds(self, m: Machine) -> float:
        """The stage's own roofline: max(FLOPs / rate, bytes at each level / bandwidth)."""
        rate = {"transform": m.transform_flops, "winograd": m.winograd_flops}.get(
            self.rate, m.peak_flops * self.efficiency)
        return max([self.flops / rate]
                   + [b / m.bandwidth[lv] for lv, b in self.moved.items() if b])


def gemm_efficiency(cols: int, depth: int, rows: int | None = None, nr: int = NR,
                    unpacked: bool = False) -> float:
    """Fraction of the peak a GEMM with `cols` output columns (the vector axis), depth `depth`
    and, for a product of a batched GEMM, `rows` rows reaches on a micro-kernel `nr` columns
    wide (DEPTH_OVERHEAD, ROW_OVERHEAD; ROW_OVERHEAD_UNPACKED when B is `unpacked`)."""
    eff = cols / (nr * -(-cols // nr)) * depth / (depth + DEPTH_OVERHEAD)
    if rows is None:
        return eff
    return eff * rows / (rows + (ROW_OVERHEAD_UNPACKED if unpacked else ROW_OVERHEAD))


def _moved(m: Machine, *pairs) -> dict:
    """{level: bytes} from (bytes, working set) pairs: bytes go to the nearest level their
    working set fits in."""
    out = {lv: 0.0 for lv in LEVELS}
    for nbytes, working_set in pairs:
        out[m.level_of(working_set)] += nbytes
    return out


def stages(layer: Layer, algorithm: str, m: Machine) -> list[Stage]:
    """The stages of `layer` under `algorithm` ("im2col", "winograd-f<m>[-fused]",
    "fft[-t<t>][-fused]"), each with its FLOPs and bytes per level; `predict` sums their
    rooflines (the stages run one after another: the L3 Fusion paper's model)."""
    c, k, r = layer.c, layer.k, layer.kernel
    out = layer.out
    p = math.prod(out)
    x_bytes = c * math.prod(o + r - 1 for o in out) * 4
    y_bytes = k * p * 4
    if algorithm == "im2col":
        col = c * r ** len(out) * p * 4
        panel = min(col + y_bytes, PANEL_BYTES)
        panels = -(-(col + y_bytes) // PANEL_BYTES)
        w_bytes = k * c * r ** len(out) * 4
        return [
            # copy into the zero-bordered scratch, then gather every tap's window into the
            # column buffer (each value read from the scratch once per tap)
            Stage("im2col", 0.0, "gemm", _moved(m, (2 * x_bytes, 2 * x_bytes),
                                                 (col, x_bytes), (col, panel))),
            # W [K, C r^d] x col: columns are output positions; the output panel is set to
            # the bias, accumulated and passed through the activation
            Stage("gemm", 2.0 * k * c * r ** len(out) * p, "gemm",
                  _moved(m, (col, panel), (panels * w_bytes, w_bytes), (4 * y_bytes, panel)),
                  gemm_efficiency(min(p, max(64, PANEL_BYTES // ((c * r ** len(out) + k) * 4))),
                                  c * r ** len(out), nr=2 * m.lanes)),
        ]
    if algorithm.startswith("fft"):
        return _fft_stages(layer, algorithm, m, x_bytes, y_bytes)
    if not algorithm.startswith("winograd"):
        raise ValueError(f"no traffic model for algorithm {algorithm!r}")
    mm, fused = conv_tiles.winograd_variant(algorithm)
    alpha = mm + r - 1
    rank = len(out)
    a = alpha ** rank
    tiles = math.prod(-(-o // mm) for o in out)
    fin, fout = _winograd_transform_flops(mm, r, rank)
    return _tiled_stages(m, "winograd", x_bytes, y_bytes, tiles, a * 4, c, k,
                         a * c * k * 4, fused, -(-out[0] // mm),
                         fin * tiles * c, fout * tiles * k, 2.0 * a * tiles * c * k, k, c,
                         (alpha / mm) ** rank, [-(-o // mm) for o in out])


@functools.cache
def _winograd_transform_flops(mm: int, r: int, rank: int) -> tuple[float, float]:
    """FLOPs per tile and channel of F(mm, r)'s input transform B^T d B and output transform
    A^T M A over `rank` axes, as generated (lowering/winograd.py `_lincomb`): one pass per
    axis, each output a sum of the matrix row's non-zero terms (a multiply and an add each;
    +-1 terms are counted alike, an upper bound)."""
    at, _, bt = conv_tiles.winograd_matrices(mm, r)
    alpha = mm + r - 1
    fin = sum(2.0 * np.count_nonzero(bt) * alpha ** (rank - 1) for _ in range(rank))
    # the output passes shrink one axis from alpha to mm at a time
    fout = sum(2.0 * np.count_nonzero(at) * mm ** d * alpha ** (rank - 1 - d)
               for d in range(rank))
    return fin, fout


def _tiled_stages(m: Machine, name, x_bytes, y_bytes, tiles, pos_bytes, c, k, u_bytes, fused,
                  first_axis_tiles, in_flops, out_flops, gemm_flops, cols, depth, overlap,
                  axis_tiles=None):
    """Winograd's and the FFT's three stages: input transform (channels-last copy, read the
    overlapping tiles, write V), the products (read V and U, zero and accumulate M), output
    transform (read M, write the output). `pos_bytes`: bytes of one channel of one tile's
    transformed positions. Three-stage keeps all of V and M (the level they fit in); fused
    keeps a group's and reads U once per group (lowering/winograd.py's groups: whole tile
    rows, or where `axis_tiles` (tiles per axis, Winograd's) gives lines, lines of them)."""
    rate = "winograd" if name == "winograd" else "transform"
    unpacked = cols % (2 * m.lanes) == 0  # U in strips of the kernel's width (matmul.py)
    vm_tile = pos_bytes * (c + k)
    v_bytes, m_bytes = tiles * pos_bytes * c, tiles * pos_bytes * k
    groups, ws = 1, v_bytes + m_bytes
    lines = conv_tiles.fused_lines(axis_tiles, vm_tile) if fused and axis_tiles else None
    if lines is not None:  # groups of lines of the second axis, per tile row
        per_line = math.prod(axis_tiles[2:])
        groups = axis_tiles[0] * -(-axis_tiles[1] // lines)
        ws = lines * per_line * vm_tile
    elif fused:  # the lowerings' groups of whole tile rows
        inner = tiles // first_axis_tiles
        band = conv_tiles.fused_band(first_axis_tiles, inner, inner * vm_tile)
        groups, ws = -(-first_axis_tiles // band), band * inner * vm_tile
    return [
        Stage(f"{name} input", in_flops, rate,
              _moved(m, (3 * x_bytes, 2 * x_bytes), (overlap * x_bytes, x_bytes),
                     (v_bytes, ws)), groups=groups),
        Stage(f"{name} products", gemm_flops, "gemm",
              _moved(m, (v_bytes + 3 * m_bytes, ws), (groups * u_bytes, u_bytes)),
              gemm_efficiency(cols, depth, tiles, nr=2 * m.lanes, unpacked=unpacked),
              groups=groups),
        Stage(f"{name} output", out_flops, rate,
              _moved(m, (m_bytes, ws), (y_bytes, y_bytes)), groups=groups),
    ]


def _fft_stages(layer: Layer, algorithm: str, m: Machine, x_bytes, y_bytes):
    """FFT on tiles (lowering/fft.py, conv_tiles.fft_estimate): P complex positions per tile
    as [re | im] f32 pairs; the forward transforms' FLOPs scale with C, the inverse's with K;
    products 8 P T C K (complex), on a GEMM of 2K columns and depth 2C; U is 16 P C K
    bytes."""
    t, fused = conv_tiles.fft_variant(algorithm)
    ks, out = [layer.kernel] * len(layer.out), list(layer.out)
    t = t or conv_tiles.choose_fft_tile(layer.c, layer.k, ks, out)
    e = conv_tiles.fft_estimate(layer.c, layer.k, ks, out, t)
    c, k = layer.c, layer.k
    tile_in = math.prod(a[0] for a in e["axes"])
    tile_out = math.prod(a[1] for a in e["axes"])
    return _tiled_stages(m, "fft", x_bytes, y_bytes, e["tiles"], e["positions"] * 2 * 4, c, k,
                         e["u_bytes"], fused, e["axes"][0][2],
                         e["transform_flops"] * c / (c + k), e["transform_flops"] * k / (c + k),
                         e["product_flops"], 2 * k, 2 * c, tile_in / tile_out)


def traffic(layer: Layer, algorithm: str, m: Machine) -> tuple[float, dict]:
    """(FLOPs, {level: bytes}) of `layer` under `algorithm`: the totals over its `stages`
    (FLOPs of the transforms included)."""
    flops, moved = 0.0, {lv: 0.0 for lv in LEVELS}
    for st in stages(layer, algorithm, m):
        flops += st.flops
        for lv, b in st.moved.items():
            moved[lv] += b
    return flops, moved


def predict(layer: Layer, algorithm: str, m: Machine) -> float:
    """Seconds: the sum over the algorithm's stages of each stage's roofline,
    max(FLOPs / its rate, bytes at each level / that level's bandwidth)."""
    return sum(st.seconds(m) for st in stages(layer, algorithm, m))


def distinct(layer: Layer, algorithms) -> list[str]:
    """`algorithms` less each L3-fused name whose schedule makes one group of all the tiles
    when its three-stage twin is listed too: the lowerings then emit the same program under
    both names, and timing it twice measures only noise."""
    def one_group(a):
        return max(st.groups for st in stages(layer, a, DEFAULT)) == 1
    return [a for a in algorithms
            if not ("-fused" in a and a.replace("-fused", "") in algorithms and one_group(a))]


def best_algorithm(layer: Layer, m: Machine, algorithms) -> str:
    """The algorithm of `algorithms` with the least predicted time; at equal times the
    L3-fused schedule (it never moves more data than three-stage, nor to a farther level)."""
    return min(algorithms, key=lambda a: (predict(layer, a, m), "fused" not in a))
