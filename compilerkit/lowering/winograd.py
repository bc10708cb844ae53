"""Lowering of a Conv to Winograd's minimal filtering F(m, 3) (Lavin & Gray, "Fast Algorithms
for Convolutional Neural Networks", 2016), as Kernel IR loop nests and buffers.

Lowers: a Conv with group 1, 2-D or 3-D, stride 1, dilation 1, any pads (auto_pad resolved),
kernel sizes 3 or 1 per axis (at least one 3: 3x3, 3x3x3, 1x3x3, ...), constant weights,
optional bias and fused activation (onnx_passes/fuse_conv.py), f32 or f64 (f16 sums lose
too much). `applies` says why a Conv is not taken; lowering/conv_algorithm.py then leaves it
to conv.py.

Along an axis with kernel 3 the output is cut into tiles of m (m = 2, 4 or 6), each computed
from an input tile of alpha = m + 2 as Y = A^T [(G g G^T) * (B^T d B)] A, separable over the
axes (an axis with kernel 1 has m = alpha = 1 and identity transforms). The matrices
A^T [m, alpha], G [alpha, 3], B^T [alpha, alpha] come from wincnn's Cook-Toom construction
(conv_tiles.winograd_matrices: wincnn's exact answers, generated into winograd_tables.py,
from the interpolation points 0, 1, -1, 2, -2, 1/2, -1/2: the first m + 1 of them); no
number of them is typed in by hand. With T tiles per batch entry and A = prod(alpha) transformed
positions, the Conv becomes A independent products (the "batched GEMM"):

    M[t] (tiles x K) = V[t] (tiles x C) . U[t] (C x K)      t in [0, A)

- weights: U[t, c, k] = (G g[k, c] G^T)[t], computed in float64 at compile time and kept as
  a constant (krnl.global), so no run time is spent on it; when K is a multiple of the
  target's strip width (matmul.strip_width: 32 on AVX-512), U is stored in strips of output
  channels that the micro-kernel reads unpacked (matmul.in_strips), and each product runs
  strip by strip;
- input: per batch entry the input is copied into a channels-last buffer [padded
  spatial..., C] covering every tile's reads, zeroed once per call (the pads and the last,
  partial tile read zeros); per tile, the input transform B^T d B is one nest per axis
  (`_passes`: the axis unrolled, the other axes and C looped, C innermost so loads and
  stores are contiguous and LLVM vectorises them, the matrices' constants inlined, zero
  entries skipped, +-1 without a multiply), the last writing V[t, tile, c];
- product: one `krnl.matmul` nest per t, each starting from zero (`batched_products`, inside
  a loop over t): at -O3 tile_matmul blocks it onto the micro-kernel (codegen/microkernel.py).
  Rows are tiles and columns output channels, so the kernel's vector axis is K (>= 16 on
  real layers) even when a layer has only a few tiles;
- output: per tile, A^T M A the same way (one nest per axis, K innermost) from M[t, tile, k];
  the last pass adds bias[k], applies the fused activation and stores the m x m (x m) values
  into out[n, k, ...], or, when tiles hang over the output's end (output size not a multiple
  of m), into a whole-tile buffer [K, tiles * m...] copied out after the batch entry.

Two schedules, both per batch entry:

- three-stage: one group of all the tiles: input transform of the whole layer, A products,
  output transform of the whole layer. V and M hold A x tiles x (C + K) values, far more
  than the L2 on large planes.
- fused (the L3 Fusion paper, arXiv 1912.02165): tiles go in groups of whole tile rows
  (first spatial axis), sized so that the group's V and M fit conv_tiles.FUSED_BYTES (at
  least conv_tiles.MIN_GROUP_TILES tiles); per group:
  transform, products, inverse, so the transformed data is still in cache when the product
  and the inverse read it. U is read once per group (it is the same for every group).

Special values: the transforms mix all of a tile's inputs into each of its outputs, so one
NaN, inf or outsized input (1e30 among values near 1) would spoil every output of each tile
whose window holds it, where a direct sum (and onnxruntime) spoils only the outputs that read
it. A screen per batch entry (`screen_input`: max |x| over the channels per position, one
vectorised pass) and per group (`repair_tiles`: each tile's window max against the threshold)
recomputes such tiles directly, under an scf.if; on ordinary data it only costs the screen.
fft.py shares it.

Assumes static shapes; the weights must come from an onnx.Constant (the ONNX passes fold
them), which `applies` checks (the transformed copy is a new krnl.global; the original
weights' global stays in the module). Measured in benchmarks/winograd_bench.py.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading

import numpy as np

from compilerkit.conv_tiles import (
    WINOGRAD_DEFAULT_M,
    fused_band,
    fused_lines,
    winograd_matrices,
)
from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering import matmul
from compilerkit.lowering.builder import (
    KernelBuilder,
    chunk_count,
    fill_outside,
    is_float,
    shape,
)
from compilerkit.lowering.elementwise import activation
from compilerkit.lowering.matmul import emit_matmul, emit_strip_matmul, fill, in_strips
from compilerkit.onnx_passes.fuse_conv import fused_activation
from compilerkit.onnx_passes.single_node import node_label

TILE_SIZES = (2, 4, 6)  # the m of F(m, 3) this lowering offers
# A tile is computed by the transforms only when every input it reads is finite and at most
# SCREEN_RANGE times the geometric mean of the batch entry's per-position channel maxima (and
# below the overflow bound, `overflow_bound`); else directly (`repair_tiles`). The transforms mix a
# tile's inputs into every output of the tile, with rounding errors of the largest input's
# size: one NaN or inf made the whole tile NaN (and its neighbours', whose windows overlap),
# one 1e30 made the small outputs of the tile garbage, where a direct sum (and onnxruntime)
# keeps them finite and right. The same range as the weights' rule for "auto"
# (conv_algorithm.AUTO_MAX_RANGE).
SCREEN_RANGE = 1000.0


# Output channels per iteration of the output transform's outer loop (`_channel_blocks`): one
# AVX-512 vector of f32 (the same on every target: the loop order must not depend on lanes).
CHANNEL_BLOCK = 16
# Most chunks of tile-row groups the threads take (`builder.chunk_count`): each chunk has its
# slot of V, M and temps and works through its groups in turn. Shared buffers kept the group
# loop serial, and the threads could only share each group's small products and output
# transform: the L3-fused 64 -> 64 3x3 at 56 x 56 (28 groups) ran as fast on 2 threads as on 1.
MAX_BAND_CHUNKS = 8
# ... and fewest groups per chunk: a slot filled by one group only is written cold each call
# (F(4,3)'s 7 groups of 64 channels at 56 x 56 as 7 chunks: 1 thread 0.735 -> 0.811 ms), so
# such a count keeps one slot and the serial group loop.
BAND_REUSE = 2


def weights_array(op):
    """The Conv's weights as numpy (from the onnx.Constant feeding it), or None."""
    module = op
    while module.parent_op() is not None:
        module = module.parent_op()
    return onnx_d.constant_value(op.operands[1], module), module


def applies(op) -> str | None:
    """None when this lowering takes the Conv `op` (ONNX IR), else why not."""
    w_t = op.operands[1].type
    ws = onnx_d.shape_of(op.operands[1])
    r = len(ws) - 2
    if r not in (2, 3):
        return f"{r}-D (Winograd here is 2-D or 3-D)"
    if not is_float(w_t.element_type) or onnx_d.numpy_dtype(w_t.element_type).itemsize < 4:
        return "not an f32 or f64 Conv"  # f16 sums lose too much in F(4,3) and F(6,3)
    if onnx_d.get_attr(op, "group", 1) != 1:
        return "grouped"
    k_sp = list(ws[2:])
    if any(k not in (1, 3) for k in k_sp) or 3 not in k_sp:
        return f"kernel {'x'.join(map(str, k_sp))} (Winograd here takes 3 or 1 per axis)"
    return dense_constant_conv(op)


def dense_constant_conv(op) -> str | None:
    """None when the Conv `op` has stride 1, dilation 1 and constant weights (what a tiled
    transform needs besides its kernel sizes), else why not. Shared with fft.py."""
    if any(s != 1 for s in (onnx_d.get_attr(op, "strides", None) or [1])):
        return "strided"
    if any(d != 1 for d in (onnx_d.get_attr(op, "dilations", None) or [1])):
        return "dilated"
    if weights_array(op)[0] is None:
        return "weights are not a constant"
    return None


def transformed_weights(wt: np.ndarray, ms) -> np.ndarray:
    """U [A, C, K] = (G g G^T) for every (k, c), G per axis for F(m_d, k_d), in float64."""
    # G_0 (x) G_1 (x) ... maps a flattened kernel (C order) to the flattened transformed tile
    # (C order): one BLAS product for every (k, c) at once (tensordot per axis copied and
    # transposed the weights twice: 0.9 s against 0.04 s for 512 x 512 x 3 x 3)
    kron = np.ones((1, 1))
    for d, m in enumerate(ms):
        kron = np.kron(kron, winograd_matrices(m, wt.shape[2 + d])[1])
    k_out, c_in = wt.shape[:2]
    # rows (c, k), so that the product comes out [A, C, K] contiguous (the strips copy it next);
    # made row-major by the one copy (astype keeps a transposed layout, and the reshape below
    # then copied all of it again: 0.08 s of ResNet-50's lowering)
    flat = wt.reshape(k_out, c_in, -1).transpose(1, 0, 2).astype(np.float64, order="C")
    with blas_on_one_thread():
        return (kron @ flat.reshape(c_in * k_out, -1).T).reshape(-1, c_in, k_out)


# blas_on_one_thread: how many are inside, under the lock, and the count to restore
_BLAS_LOCK = threading.Lock()
_BLAS_USERS = [0, None]


@contextlib.contextmanager
def blas_on_one_thread():
    """numpy's BLAS (OpenBLAS) on one thread while inside. The weight transform is a product
    with 9 or 27 terms per entry: OpenBLAS handed it to its threads, and waking them took
    8 ms per layer against 0.1 ms on one (DenseNet-121's 58 Winograd layers: 0.47 s of its
    compile on 2 busy cores). OpenBLAS splits a product's rows and columns between threads,
    never the sum over its inner dimension, so every entry is the same sum in the same order:
    the same bits at any thread count (checked on the transforms of F(2,3) to F(6,3)).
    OpenBLAS's thread count is the process's (`openblas_set_num_threads_local` sets it for
    every thread, despite its name): it is set when the first compile enters and restored
    when the last one leaves (as backends.base.without_lsr does for LLVM's option), so
    another thread's numpy products run on one thread meanwhile, with the same results.
    Where numpy's BLAS is not OpenBLAS (or the function is not found) nothing changes."""
    setter = _openblas_set_threads()
    if setter is None:
        yield
        return
    with _BLAS_LOCK:
        _BLAS_USERS[0] += 1
        if _BLAS_USERS[0] == 1:
            _BLAS_USERS[1] = setter(1)
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS[0] -= 1
            if _BLAS_USERS[0] == 0:
                setter(_BLAS_USERS[1])


@functools.cache
def _openblas_set_threads():
    """`openblas_set_num_threads_local` (count -> the previous count) of the OpenBLAS that
    numpy loaded (its wheel's, in numpy.libs), or None."""
    import ctypes
    import glob
    import os

    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "*openblas*"))):
        try:
            # RTLD_NOLOAD: only the copy numpy already loaded, never a second one
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            fn = lib.openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
        return fn
    return None


def _lincomb(b: KernelBuilder, coefs, vals, elem):
    """sum(coef * val), unrolled: zero coefficients skipped, +-1 without a multiply, a
    positive term first (x - y, not -y + x)."""
    acc = None
    terms = sorted(zip(coefs, vals, strict=True), key=lambda cv: cv[0] < 0)
    for coef, v in terms:
        if coef == 0:
            continue
        if coef in (1, -1):
            if acc is None:
                acc = v if coef == 1 else b.neg(v)
            else:
                acc = b.add_(acc, v) if coef == 1 else b.binary("sub", acc, v)
            continue
        term = b.mul(b.const(float(coef), elem), v)
        acc = term if acc is None else b.add_(acc, term)
    return acc if acc is not None else b.const(0.0, elem)


class ConvSizes:
    """The sizes every tiled Conv lowering needs (this module's and fft.py's plans): operands,
    batch, channels, spatial extents, begin pads and the fused activation."""

    def __init__(self, op, ins, pads):
        self.x, self.w = ins[0], ins[1]
        self.bias = ins[2] if len(ins) > 2 else None
        xs, ws = shape(self.x), shape(self.w)
        self.out_dims = onnx_d.shape_of(op.results[0])
        self.elem = op.results[0].type.element_type
        self.n, self.c, self.k = xs[0], xs[1], ws[0]
        self.in_sp, self.k_sp = list(xs[2:]), list(ws[2:])
        self.out_sp = list(self.out_dims[2:])
        self.r = len(self.k_sp)
        self.pads = list(pads)  # begin pads, auto_pad resolved (conv.conv_geometry)
        self.act = fused_activation(op)


class _Plan(ConvSizes):
    """The sizes of one Winograd Conv."""

    def __init__(self, op, ins, pads, m: int, fused: bool):
        super().__init__(op, ins, pads)
        self.ms = [m if k == 3 else 1 for k in self.k_sp]
        self.mats = [winograd_matrices(mm, k)
                     for mm, k in zip(self.ms, self.k_sp, strict=True)]
        self.alphas = [mm + k - 1 for mm, k in zip(self.ms, self.k_sp, strict=True)]
        self.tiles = [-(-o // mm) for o, mm in zip(self.out_sp, self.ms, strict=True)]
        self.a = math.prod(self.alphas)
        # padded input extent: every tile reads alpha from its origin t * m
        self.ext = [t * mm + k - 1 for t, mm, k in zip(self.tiles, self.ms, self.k_sp,
                                                         strict=True)]
        self.inner = math.prod(self.tiles[1:])  # tiles per tile row
        item = onnx_d.numpy_dtype(self.elem).itemsize
        row_bytes = self.inner * self.a * (self.c + self.k) * item
        self.band = fused_band(self.tiles[0], self.inner, row_bytes) if fused else self.tiles[0]
        # lines of the second axis per group where groups split tile rows (3-D, large rows)
        self.lines = fused_lines(self.tiles, row_bytes // self.inner) if fused else None

    def group_tiles(self) -> int:
        """Tiles of the largest group."""
        if self.lines is not None:
            return self.lines * math.prod(self.tiles[2:])
        return self.band * self.inner


def _bands(p: _Plan, chunked: bool = True):
    """[(count, height, first tile row)]: `count` groups of `height` tile rows from `first` on
    (the ragged last group is a loop of its own). `chunked` (the group loop goes to threads in
    chunks, `chunk_count`): where the whole groups would go to an odd number of chunks (7
    groups, one chunk), one group is a loop of its own too, so the others go to an even
    number: two threads then share them. The fused 32 -> 128 and 128 -> 32 3x3 Convs at
    28 x 28 (7 groups of 2 tile rows) ran no faster on 2 threads than on 1 (0.33 ms both);
    split so, 0.22 ms on 2."""
    full, rest = divmod(p.tiles[0], p.band)
    odd = chunked and full > 2 * BAND_REUSE and chunk_count(full, MAX_BAND_CHUNKS,
                                                             BAND_REUSE) % 2
    whole = full - 1 if odd else full
    groups = [(whole, p.band, 0), (1 if odd else 0, p.band, whole * p.band),
              (1 if rest else 0, rest, full * p.band)]
    return [g for g in groups if g[0] > 0]



def zero_around_input(b: KernelBuilder, p, xp) -> None:
    """xp's positions outside the input (at p.pads from its start) set to 0, the inside left
    to `copy_channels_last` (`builder.fill_outside`). Shared with fft.py."""
    fill_outside(b, xp, [], [(pad, pad + n) for pad, n in zip(p.pads, p.in_sp, strict=True)]
                 + [None], 0.0)


def copy_channels_last(b: KernelBuilder, p, xp, nn) -> None:
    """x[nn] (p.x, NC...) into xp, the zeroed padded input channels last, at p.pads from its
    start (unguarded: a guarded copy of every element measured slower). Shared with fft.py."""
    with b.nest(p.in_sp + [p.c]) as ivs:
        pos, c = ivs[:-1], ivs[-1]
        at = [b.affine([(i, 1)], p.pads[d]) for d, i in enumerate(pos)]
        b.store(b.load(p.x, [nn, c] + pos), xp, at + [c])

def overflow_bound(growth: float, elem) -> float:
    """The largest input magnitude whose transformed values, products over the channels and
    inverse stay finite with a margin of 16: the type's largest value over `growth`, the
    transform's worst-case gain (row sums of |B^T| and |A^T| per axis, channels, max |U|)."""
    big = float(np.finfo(onnx_d.numpy_dtype(elem)).max)
    return big / (16.0 * max(growth, 1.0))


class Screen:
    """Buffers of the special-value screen of a tiled Conv (winograd.py and fft.py): `s`, the
    padded extent's max |x| over the channels, `thr` [1] the batch entry's threshold, `acc`
    [2] scratch accumulators, allocated with the lowering's other buffers; and `bound` [1],
    the overflow bound (it depends on the layer's weights), a constant buffer beside the
    transformed weights rather than a number in the code: layers of the same shape then
    have the same code, which the code generator emits once (codegen/emit.py `outline`)."""

    def __init__(self, b: KernelBuilder, p, bound: float, module, hint: str, slots: int = 1):
        self.bound = b.constant(np.array([bound], onnx_d.numpy_dtype(p.elem)), module, hint,
                                p.elem)
        self.s = b.alloc(list(p.ext), p.elem)
        self.thr = b.alloc([1], p.elem)
        # screen_input's two accumulators; `repair_tiles` after it, acc[slot] per chunk
        self.acc = b.alloc([max(2, slots)], p.elem)


def screen_input(b: KernelBuilder, p, scr: Screen, nn) -> None:
    """scr.s = max over c of |x[nn, c, pos]| at the padded positions (0 in the pads; NaN
    wins: a NaN-propagating max), then scr.thr = min(bound, SCREEN_RANGE x the geometric mean
    of s over the positions where it is nonzero and within the bound). The geometric mean,
    not the arithmetic one: one 1e30 among 144 positions raised the mean (and the threshold)
    past itself, and the geometric mean only 1.6x. One pass over x, spatial innermost (it
    vectorises), plus one over the plane."""
    fill(b, scr.s, 0.0)
    with b.nest([p.c] + p.in_sp) as ivs:
        c, pos = ivs[0], ivs[1:]
        at = [b.affine([(i, 1)], p.pads[d]) for d, i in enumerate(pos)]
        v = b.unary("abs", b.load(p.x, [nn, c] + pos))
        b.store(b.binary("max", b.load(scr.s, at), v), scr.s, at)
    zero, one = [b.index(0)], [b.index(1)]
    b.store(b.const(0.0, p.elem), scr.acc, zero)
    b.store(b.const(0.0, p.elem), scr.acc, one)
    bound = b.load(scr.bound, zero)
    with b.nest(list(p.ext)) as ivs:
        v = b.load(scr.s, ivs)
        ok = b.and_(b.cmpf("ole", v, bound), b.cmpf("ogt", v, b.const(0.0, p.elem)))
        logv = b.unary("log", b.select(ok, v, b.const(1.0, p.elem)))
        b.store(b.add_(b.load(scr.acc, zero), logv), scr.acc, zero)
        b.store(b.add_(b.load(scr.acc, one), b.select(ok, b.const(1.0, p.elem),
                                                       b.const(0.0, p.elem))), scr.acc, one)
    count = b.binary("max", b.load(scr.acc, one), b.const(1.0, p.elem))
    mean = b.unary("exp", b.binary("div", b.load(scr.acc, zero), count))
    b.store(b.binary("min", b.mul(mean, b.const(SCREEN_RANGE, p.elem)), bound), scr.thr, zero)


def repair_tiles(b: KernelBuilder, p, scr: Screen, y, nn, row0, height, need,
                 slot=None, lines=None) -> None:
    """For each tile of the group whose input window (the screen's positions its outputs
    read) holds a value above the threshold, NaN or inf: recompute its outputs by a direct
    sum over (c, taps) from the padded channels-last input, with the bias and activation,
    over what the transforms wrote. `need[d]`: outputs per tile along axis d (its origin is
    the tile index times p.ms[d]); reads past the padded extent are zeros (fft's single-tile
    axes, whose end pads the FFT supplies). `slot`: the chunk whose accumulator it uses
    (scr.acc[slot]; None: the first). `lines` (line0, count): of the rows, those lines of the
    second axis only (`_group_tiles`)."""
    acc = [b.index(0) if slot is None else slot]
    reach = [n + k - 1 for n, k in zip(need, p.k_sp, strict=True)]
    guard = any(t == 1 and r > e for r, e, t in zip(reach, p.ext, p.tiles, strict=True))
    win = [min(r, e) if t == 1 else r for r, e, t in zip(reach, p.ext, p.tiles, strict=True)]
    with _group_tiles(b, p, (row0, height) + tuple(lines or ())) as (origin, _):
        b.store(b.const(0.0, p.elem), scr.acc, acc)
        with b.nest(win) as ws:
            at = [b.affine([(o, 1), (w, 1)]) for o, w in zip(origin, ws, strict=True)]
            b.store(b.binary("max", b.load(scr.acc, acc), b.load(scr.s, at)), scr.acc, acc)
        bad = b.cmpf("ugt", b.load(scr.acc, acc), b.load(scr.thr, [b.index(0)]))
        with b.if_then(bad), b.nest([p.k] + list(need)) as ivs:
            k, pos = ivs[0], ivs[1:]
            b.store(b.const(0.0, p.elem), scr.acc, acc)
            with b.nest([p.c] + p.k_sp) as jvs:
                c, taps = jvs[0], jvs[1:]
                at = [b.affine([(o, 1), (i, 1), (t, 1)])
                      for o, i, t in zip(origin, pos, taps, strict=True)]
                xv = (b.guarded_load(p.xp, at + [c], 0.0) if guard
                      else b.load(p.xp, at + [c]))
                term = b.mul(b.load(p.w, [k, c] + taps), xv)
                b.store(b.add_(b.load(scr.acc, acc), term), scr.acc, acc)
            value = b.load(scr.acc, acc)
            if p.bias is not None:
                value = b.add_(value, b.load(p.bias, [k]))
            if p.act is not None:
                value = activation(b, value, *p.act)
            out_at = [b.affine([(o, 1), (i, 1)]) for o, i in zip(origin, pos, strict=True)]
            b.store(value, y, ([nn] if y is p.out else []) + [k] + out_at)


def _winograd_growth(p, u_np) -> float:
    """Worst-case gain from an input to any intermediate of F(m, 3) (see overflow_bound)."""
    g_in = math.prod(float(np.abs(mat[2]).sum(axis=1).max()) for mat in p.mats)
    g_out = math.prod(float(np.abs(mat[0]).sum(axis=1).max()) for mat in p.mats)
    u_max = float(np.abs(u_np).max()) if u_np.size else 0.0
    return g_in * p.c * u_max * g_out


def lower_winograd(b: KernelBuilder, op, ins, pads, m: int = WINOGRAD_DEFAULT_M,
                   fused: bool = False):
    """Lower the Conv `op` (which `applies` accepted; `pads`: its begin pads, auto_pad
    resolved) with F(m, 3); returns the output."""
    p = _Plan(op, ins, pads, m, fused)
    wt, module = weights_array(op)
    u_np = transformed_weights(wt, p.ms).astype(onnx_d.numpy_dtype(p.elem))
    u_np, width = batched_weights(u_np, b.lanes)
    hint = f"winograd_f{m}_{node_label(op)}"
    u = b.constant(u_np, module, hint, p.elem)
    out = p.out = b.alloc(p.out_dims, p.elem)
    # Tiles hanging over the output's end write whole tiles here, copied out after: one
    # output-transform nest for all tiles (a nest per kind of partial tile multiplied the code)
    whole = [t * mm for t, mm in zip(p.tiles, p.ms, strict=True)]
    y = out if whole == p.out_sp else b.alloc([p.k] + whole, p.elem)
    xp = b.alloc(p.ext + [p.c], p.elem)  # zero-bordered, channels last
    rows = p.group_tiles()
    bands = _bands(p) if p.lines is None else [(p.tiles[0], 1, 0)]
    reuse = BAND_REUSE if p.lines is None else 1  # a row of line groups reuses its slot
    slots = max(chunk_count(count, MAX_BAND_CHUNKS, reuse) for count, _, _ in bands)
    # V [A, tiles, C] and M [A, tiles, K] of a group, flat, a slot per chunk of groups (below):
    # a smaller group uses the front of its slot
    v_size, m_size = p.a * rows * p.c, p.a * rows * p.k
    v = b.alloc([slots * v_size], p.elem)
    mm = b.alloc([slots * m_size], p.elem)
    t_in = _temps(b, p, [mat[2] for mat in p.mats], p.c, slots)
    t_out = _temps(b, p, [mat[0] for mat in p.mats], p.k, slots)
    p.xp = xp
    scr = Screen(b, p, overflow_bound(_winograd_growth(p, u_np), p.elem), module,
                 f"screen_bound_{node_label(op)}", slots)
    # zeros around the input (pads, and reads of partial tiles), written on every call (the
    # arena is shared with other buffers); the batch entries overwrite only the inside
    zero_around_input(b, p, xp)
    with b.nest([p.n]) as (nn,):
        copy_channels_last(b, p, xp, nn)
        screen_input(b, p, scr, nn)
        for count, height, first in bands:
            # the threads take chunks of groups, each chunk with its slot of V, M, temps and
            # repair accumulator (`chunk_count`), its groups one after another
            chunks = chunk_count(count, MAX_BAND_CHUNKS, reuse)
            with b.nest([chunks, count // chunks]) as (jc, ji):
                row0 = b.affine([(jc, (count // chunks) * height), (ji, height)], first)
                if p.lines is None:
                    _group(b, p, xp, v, u, mm, y, nn, (row0, height), (t_in, t_out), jc,
                           (v_size, m_size), width, scr)
                    continue
                full, rest = divmod(p.tiles[1], p.lines)
                for n_groups, lines, line_first in ((full, p.lines, 0),
                                                    (1 if rest else 0, rest, full * p.lines)):
                    if n_groups:
                        with b.nest([n_groups]) as (gi,):
                            line0 = b.affine([(gi, lines)], line_first)
                            _group(b, p, xp, v, u, mm, y, nn, (row0, height, line0, lines),
                                   (t_in, t_out), jc, (v_size, m_size), width, scr)
        if y is not out:
            with b.nest([p.k] + p.out_sp) as ivs:
                b.store(b.load(y, ivs), out, [nn] + ivs)
    return out


def batched_weights(u: np.ndarray, lanes: int) -> tuple[np.ndarray, int | None]:
    """(U as stored, its strip width or None) for `batched_products`: U [A, depth, cols] goes
    in strips (matmul.in_strips, the target's width) when its columns are whole strips, so
    the micro-kernel reads each strip in place instead of packing a panel of U per group and
    position. Other widths keep U as it is: padding M's rows to whole strips would add
    products on 16-channel layers. Shared with fft.py."""
    width = matmul.strip_width(u.shape[-1], lanes)
    if u.shape[-1] % width == 0:
        return in_strips(u, width), width
    return u, None


def batched_products(b: KernelBuilder, v, u, mm, count: int, rows: int, cols: int,
                     depth: int, width: int | None, at=None) -> None:
    """M[t] = V[t] U[t] for t < count, on flat buffers: V[t] [rows, depth], M[t] [rows,
    cols], U from `batched_weights` (in strips of `width`, or [count, depth, cols] when
    None). One krnl.matmul nest per t (matmul.py): at -O3 tile_matmul blocks it onto the
    micro-kernel, whose vector axis is then the columns (output channels), however few rows
    (tiles) a group has. Each product starts from zero (krnl.matmul's start): M is written,
    never read before (a pass zeroing M first wrote 0.8 MB per call and the products read it
    back, on SqueezeNet's 64 -> 256 3x3 at 13 x 13). `at`: (V's, M's) first element (a
    chunk's slot), index values; None: 0."""
    v_at, m_at = ([(at[0], 1)], [(at[1], 1)]) if at is not None else ([], [])
    with b.nest([count]) as (t,):
        offs = [b.affine([(t, rows * depth)] + v_at), b.affine([(t, depth * cols)]),
                b.affine([(t, rows * cols)] + m_at)]
        if width:
            emit_strip_matmul(b, v, u, mm, rows, cols, depth, offs, (depth, 1), cols, width,
                              start="zero")
        else:
            emit_matmul(b, v, u, mm, rows, cols, depth, offs, (depth, 1), cols, cols,
                        start="zero")


def _group(b: KernelBuilder, p: _Plan, xp, v, u, mm, y, nn, grp, temps, slot, sizes, width,
           scr) -> None:
    """One group of tiles (`grp`: (first tile row, rows) or (first tile row, rows, first
    line, lines), as `_group_tiles`): input transform, products, output transform and
    repair, in V's, M's and the temps' `slot`."""
    (t_in, t_out), (v_size, m_size) = temps, sizes
    _input_transform(b, p, xp, v, grp, t_in, slot, v_size)
    batched_products(b, v, u, mm, p.a, math.prod(_group_sizes(p, grp)), p.k, p.c, width,
                     (b.affine([(slot, v_size)]), b.affine([(slot, m_size)])))
    _output_transform(b, p, mm, y, nn, grp, t_out, slot, m_size)
    repair_tiles(b, p, scr, y, nn, grp[0], grp[1], p.ms, slot, lines=grp[2:] or None)


def _group_sizes(p, grp) -> list[int]:
    """The tile counts per axis of the group `grp` (`_group_tiles`)."""
    sizes = [grp[1]] + list(p.tiles[1:])
    if len(grp) > 2:
        sizes[1] = grp[3]
    return sizes


@contextlib.contextmanager
def _group_tiles(b: KernelBuilder, p, grp):
    """The loops over the tiles of a group, `grp` = (row0, height): tile rows row0 ... of the
    first axis, every tile of the others; or (row0, height, line0, lines): of those rows,
    lines line0 ... of the second axis only (`_Plan.lines`). Yields (origin, tile): the
    tile's first output position per axis (its first input position in the padded input)
    and its row in the group's V and M, row-major over the group."""
    sizes = _group_sizes(p, grp)
    starts = [grp[0]] + ([grp[2]] if len(grp) > 2 else [])
    with b.nest(sizes) as ts:
        origin = [b.affine([(s0, p.ms[d]), (ts[d], p.ms[d])]) for d, s0 in enumerate(starts)]
        origin += [b.affine([(t, p.ms[d])]) for d, t in enumerate(ts[len(starts):],
                                                                   start=len(starts))]
        yield origin, b.affine([(t, math.prod(sizes[d + 1:])) for d, t in enumerate(ts)])


def _tile_index(b: KernelBuilder, p: _Plan, r0, rest):
    """The tile's row in V and M within its group: r0 * (tiles per row) + the rest, row-major."""
    terms = [(r0, p.inner)]
    for d, t in enumerate(rest, start=1):
        terms.append((t, math.prod(p.tiles[d + 1:])))
    return b.affine(terms)


def _at(b: KernelBuilder, coords, strides, terms=(), const=0):
    """sum(coord * stride) + sum(terms) + const, where a coordinate is a loop variable or a
    number (an unrolled position)."""
    terms = list(terms)
    for x, s in zip(coords, strides, strict=True):
        if isinstance(x, int):
            const += x * s
        else:
            terms.append((x, s))
    return b.affine(terms, const)


def _passes(b: KernelBuilder, p: _Plan, mats, inner, load, store, temps, slot, block=None):
    """The separable transform of one tile: mats[d] ([out_d, in_d]) applied along each axis d,
    last axis first, each as its own nest over the other axes' positions and the innermost
    dimension `inner` (C or K, the vector loop), with the axis itself unrolled (axes of
    kernel 1 need no pass):
    out[.., a, ..] = sum_j mats[d][a, j] * in[.., j, ..]. load(coords, c) reads the tile,
    store(coords, c, value) writes the result, temps[k] holds the values between passes k
    and k + 1. Unrolling one axis at a time keeps each body small (alpha loads, alpha
    outputs): unrolling the whole tile made compile times grow with alpha^r. `block` = (cb,
    width): only channels cb * width ... + width - 1 (`_channel_blocks`). `slot`: the temps'
    slot (their first index: a chunk's, `_temps`)."""
    def co_idx(coords):
        return [slot] + [b.index(x) if isinstance(x, int) else x for x in coords]

    sizes = [mat.shape[1] for mat in mats]
    order = _pass_axes(mats)
    for k, d in enumerate(order):
        src = load if k == 0 else (lambda co, c, t=temps[k - 1]: b.load(t, co_idx(co) + [c]))
        last = k == len(order) - 1
        other = [s for e, s in enumerate(sizes) if e != d]
        with b.nest(other + [inner if block is None else block[1]]) as ivs:
            o, c = ivs[:-1], ivs[-1]
            if block is not None:
                c = b.affine([(block[0], block[1]), (c, 1)])

            def full(j, o=o, d=d):
                return list(o[:d]) + [j] + list(o[d:])
            vals = [src(full(j), c) for j in range(sizes[d])]
            for a in range(mats[d].shape[0]):
                v = _lincomb(b, mats[d][a], vals, p.elem)
                if last:
                    store(full(a), c, v)
                else:
                    b.store(v, temps[k], co_idx(full(a)) + [c])
        sizes[d] = mats[d].shape[0]


def _pass_axes(mats):
    """The axes `_passes` transforms, last first: not those of kernel 1 (identity, size 1)."""
    return [d for d in reversed(range(len(mats))) if mats[d].shape != (1, 1)]


def _temps(b: KernelBuilder, p: _Plan, mats, inner, slots: int = 1):
    """The buffers between the passes of `_passes` (one tile's values, [slots, sizes...,
    inner]: a slot per chunk of tile-row groups)."""
    sizes = [mat.shape[1] for mat in mats]
    out = []
    for d in _pass_axes(mats)[:-1]:
        sizes[d] = mats[d].shape[0]
        out.append(b.alloc([slots] + list(sizes) + [inner], p.elem))
    return out


def _input_transform(b: KernelBuilder, p: _Plan, xp, v, grp, temps, slot, size):
    """V[t, tile, c] = (B^T d B)[t] for the group's tiles (`grp`: `_group_tiles`; C
    innermost), in V's and the temps' `slot` (V's slot: `size` elements)."""
    g = math.prod(_group_sizes(p, grp))
    a_strides = [math.prod(p.alphas[d + 1:]) * g * p.c for d in range(p.r)]
    with _group_tiles(b, p, grp) as (origin, tile):

        def load(coords, c):
            return b.load(xp, [_at(b, [x], [1], [(o, 1)]) for x, o in zip(
                coords, origin, strict=True)] + [c])

        def store(coords, c, value):
            b.store(value, v, [_at(b, coords, a_strides, [(tile, p.c), (c, 1), (slot, size)])])

        _passes(b, p, [mat[2] for mat in p.mats], p.c, load, store, temps, slot)


def _channel_blocks(n: int) -> int:
    """Blocks of CHANNEL_BLOCK channels the output transform's outer loop walks: n /
    CHANNEL_BLOCK when that divides and gives 2 or more, else 1 (the whole of n)."""
    return n // CHANNEL_BLOCK if n % CHANNEL_BLOCK == 0 and n >= 2 * CHANNEL_BLOCK else 1


def _output_transform(b: KernelBuilder, p: _Plan, mm, y, nn, grp, temps, slot, size):
    """y[k, tile origin + i] = act(bias[k] + (A^T M A)[i]) for the group's tiles (K
    innermost); y is out[nn] itself, or the whole-tile buffer when tiles hang over its end.
    The outer loop walks blocks of output channels (`_channel_blocks`), all tiles in each:
    threads then write whole planes of their own channels (tile rows of a small plane share
    cache lines between threads) and each temps element belongs to one block. M and the
    temps are read from `slot` (M's slot: `size` elements)."""
    g = math.prod(_group_sizes(p, grp))
    a_strides = [math.prod(p.alphas[d + 1:]) * g * p.k for d in range(p.r)]
    blocks = _channel_blocks(p.k)
    with b.nest([blocks]) as (kb,), _group_tiles(b, p, grp) as (origin, tile):

        def load(coords, k):
            return b.load(mm, [_at(b, coords, a_strides, [(tile, p.k), (k, 1), (slot, size)])])

        bias = {}  # bias[k], loaded once per iteration of the last pass

        def store(coords, k, value):
            if p.bias is not None:
                if k not in bias:
                    bias[k] = b.load(p.bias, [k])
                value = b.add_(value, bias[k])
            if p.act is not None:
                value = activation(b, value, *p.act)
            at = [_at(b, [x], [1], [(o, 1)]) for x, o in zip(coords, origin, strict=True)]
            b.store(value, y, ([nn] if y is p.out else []) + [k] + at)

        _passes(b, p, [mat[0] for mat in p.mats], p.k, load, store, temps, slot,
                block=(kb, p.k // blocks) if blocks > 1 else None)
