"""A hierarchical roofline (after the L3 Fusion paper, arXiv 1912.02165): the machine's peak
FLOP/s and the bandwidth of each memory level, measured by compilerkit's own generated
kernels, and the time a Conv layer should take with each algorithm.

    m = roofline.machine()            # the cached measurement (roofline_measure), else DEFAULT
    roofline.predict(Layer(64, 64, (56, 56)), "winograd-f4", m)   # seconds
    roofline.traffic(layer, algorithm)                             # what the prediction uses

A layer's predicted time is the largest of its FLOPs over the peak and, for every level, the
bytes it moves there over that level's bandwidth (the roofline, one roof per level). Bytes go
to the level their working set fits in: a buffer of B bytes read or written once counts B
there. The algorithms modelled: im2col, Winograd three-stage / L3-fused (lowering/winograd.py)
and FFT on tiles (lowering/fft.py), 2-D or 3-D (the rank of `out`), batch 1, f32. The FFT's
butterflies are unrolled scalar code over channels, not the micro-kernel: their FLOPs are
added at `Machine.transform_flops` (not under the peak's roof). "auto" asks `best_algorithm`
between im2col and FFT for kernels of 5 and more (lowering/conv_algorithm.py).

Measured by `compilerkit.roofline_measure` (apart, because it compiles kernels and the
compiler itself reads this module): the peak by a 384 x 384 x 384 MatMul (the micro-kernel), each level's
bandwidth by a chain of y = x + 1 over an array whose x and y together fill about half that
level (L1, L2, L3 as `CACHES` says for this machine; DRAM: 64 MiB), all compiled by
compilerkit and run on one thread, best of `repeat`. Cached as JSON in
$XDG_CACHE_HOME/compilerkit (or ~/.cache/compilerkit), keyed by the CPU's model name.
"""

from __future__ import annotations

import json
import math
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path


# This machine (AMD EPYC, 1 thread's share): L1d 32 KiB, L2 512 KiB, L3 32 MiB shared.
CACHES = {"L1": 32 * 1024, "L2": 512 * 1024, "L3": 32 * 1024 * 1024}
DRAM_TEST_BYTES = 64 * 1024 * 1024
LEVELS = ("L1", "L2", "L3", "DRAM")


@dataclass
class Machine:
    peak_flops: float  # FLOP/s of the GEMM micro-kernel, 1 thread
    bandwidth: dict  # level -> bytes/s (read + write), 1 thread
    caches: dict = field(default_factory=lambda: dict(CACHES))  # level -> bytes
    # FLOP/s of the FFT's unrolled butterflies (lowering/fft.py): fitted to 2-D 5x5 layers at
    # 1 thread (64@56, 16@56), not yet measured by `measure`
    transform_flops: float = 16e9

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
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                       cpu)
    except OSError:
        pass
    key = "".join(ch if ch.isalnum() else "_" for ch in cpu)[:60]
    return Path(base) / "compilerkit" / f"roofline-{key}.json"


def machine() -> Machine:
    """This machine's measurement as `compilerkit.roofline_measure` cached it, or DEFAULT
    when nothing is cached (the compiler's "auto" reads this and never measures)."""
    path = cache_path()
    if path.is_file():
        with open(path, encoding="utf-8") as f:
            return Machine(**json.load(f))
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


def traffic(layer: Layer, algorithm: str, m: Machine) -> tuple[float, dict]:
    """(FLOPs, {level: bytes}) of `layer` under `algorithm` ("im2col", "winograd-f<m>", with
    "-fused" for the L3-fused schedule)."""
    from compilerkit.lowering import winograd

    c, k, r = layer.c, layer.k, layer.kernel
    out = layer.out
    rank = len(out)
    p = math.prod(out)
    x_bytes = c * math.prod(o + r - 1 for o in out) * 4
    y_bytes = k * p * 4
    moved = {lv: 0.0 for lv in LEVELS}

    def add(nbytes, working_set=None):
        moved[m.level_of(working_set if working_set is not None else nbytes)] += nbytes

    add(x_bytes + y_bytes, x_bytes + y_bytes)
    if algorithm == "im2col":
        flops = 2.0 * k * c * r ** rank * p
        w_bytes = k * c * r ** rank * 4
        add(w_bytes)
        col = c * r ** rank * p * 4
        add(2 * col, min(col, 2 * 1024 * 1024))  # written then read, panel by panel (conv.py)
        return flops, moved
    if algorithm.startswith("fft"):
        return _fft_traffic(layer, algorithm, m, moved, add)
    if not algorithm.startswith("winograd"):
        raise ValueError(f"no traffic model for algorithm {algorithm!r}")
    mm, fused = winograd.winograd_variant(algorithm)
    alpha = mm + r - 1
    a = alpha ** len(out)
    tiles = math.prod(-(-o // mm) for o in out)
    flops = 2.0 * a * tiles * c * k  # the batched GEMM
    # transforms: each pass computes one output per position as an alpha-term sum
    flops += 2.0 * alpha * tiles * c * a * len(out) + 2.0 * alpha * tiles * k * a * len(out)
    u_bytes = a * c * k * 4
    vm_row = a * (c + k) * 4  # V and M of one tile
    if fused:
        inner = tiles // -(-out[0] // mm)
        group = max(winograd.FUSED_BYTES // (inner * vm_row), 1) * inner
        group = max(group, winograd.MIN_GROUP_TILES)
        groups = -(-tiles // group)
        add(2 * tiles * vm_row, group * vm_row)
        add(groups * u_bytes, u_bytes)
    else:
        add(2 * tiles * vm_row)
        add(u_bytes)
    return flops, moved


def _fft_traffic(layer: Layer, algorithm: str, m: Machine, moved: dict, add):
    """FFT on tiles: the products' FLOPs (the "transform" FLOPs are returned apart, in
    moved["transform_flops"]), U once per group, V and M written and read once."""
    from compilerkit.lowering import fft, winograd

    t, fused = fft.fft_variant(algorithm)
    ks, out = [layer.kernel] * len(layer.out), list(layer.out)
    t = t or fft.choose_tile(layer.c, layer.k, ks, out)
    e = fft.estimate(layer.c, layer.k, ks, out, t)
    tiles, vm_tile = e["tiles"], e["positions"] * 2 * (layer.c + layer.k) * 4
    groups = 1
    if fused:
        inner = tiles // e["axes"][0][2]
        group = max(winograd.FUSED_BYTES // (inner * vm_tile), 1) * inner
        group = min(max(group, winograd.MIN_GROUP_TILES), tiles)
        groups = -(-tiles // group)
        add(2 * tiles * vm_tile, group * vm_tile)
    else:
        add(2 * tiles * vm_tile)
    add(groups * e["u_bytes"], e["u_bytes"])  # 4 f32 per complex weight ([[Wr, Wi], [-Wi, Wr]])
    moved["transform_flops"] = e["transform_flops"]
    return e["product_flops"], moved


def predict(layer: Layer, algorithm: str, m: Machine) -> float:
    """Seconds: max(FLOPs / peak, bytes at each level / its bandwidth), plus the FFT's
    transforms at m.transform_flops."""
    flops, moved = traffic(layer, algorithm, m)
    moved = dict(moved)
    extra = moved.pop("transform_flops", 0.0) / m.transform_flops
    return extra + max([flops / m.peak_flops]
                       + [b / m.bandwidth[lv] for lv, b in moved.items() if b])


def best_algorithm(layer: Layer, m: Machine, algorithms) -> str:
    """The algorithm of `algorithms` with the least predicted time."""
    return min(algorithms, key=lambda a: predict(layer, a, m))
