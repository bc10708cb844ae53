"""Lowering of a Conv to FFT convolution on tiles (overlap-save, the "regular FFT" of Zlateski
et al. and the L3 Fusion paper, arXiv 1912.02165), with ZNNi's pruned transforms (Zlateski, Lee
and Seung, SC16), as Kernel IR loop nests and buffers. The FFTs are radix-2 butterflies,
generated here as straight-line arithmetic (no numpy or scipy at run time).

Lowers: a Conv with group 1, 1-D, 2-D or 3-D, stride 1, dilation 1, any pads (auto_pad
resolved), any kernel with at least one axis longer than 1 (each at most MAX_TILE - 1),
constant weights, optional bias and fused activation, f32 or f64. `applies` says why a Conv
is not taken; lowering/conv_algorithm.py then leaves it to conv.py.

Along an axis with kernel k > 1 the output is cut into tiles of m = t - k + 1, each computed
from an input tile of t (a power of two) by circular correlation, exact on the first m
outputs:

    y[i] = sum_j x[i + j] w[j] = (1/t) sum_f X[f] conj(W[f]) e^(2 pi i f i / t),  i < m

(axes of kernel 1 have t = m = 1 and no transform). The input is real, so the last
transformed axis keeps t/2 + 1 frequencies (the rest are conjugates); with P = t^(r-1) (t/2 + 1)
complex positions per tile and T tiles per batch entry the Conv becomes P products, as in
lowering/winograd.py but complex, written as real ones on [re | im] halves:

    M[p] (T x 2K) = V[p] (T x 2C) . U[p] (2C x 2K),  U[p] = [[Wr, Wi], [-Wi, Wr]]

- weights: conj(W) / t^r of every (k, c), the kernel zero-padded to the tile, computed in
  float64 at compile time (numpy's rfftn: the compiler's own arithmetic, not the run time's)
  and kept as a constant (krnl.global "fft_t<t>_<node>");
- input: per batch entry copied channels-last into a zero-bordered buffer (as Winograd's);
  per tile the forward transform is one nest per axis, the last transformed axis first (real
  to half-spectrum), C innermost so LLVM vectorises over channels, the axis itself unrolled
  as a radix-2 decimation-in-time FFT (`fft`): twiddles inlined, multiplications by 0 and
  +-1 dropped, the last pass writing V[p, tile, re | im, c];
- product: one krnl.matmul nest per p, each from zero (winograd.batched_products: the
  micro-kernel at -O3, U in strips it reads unpacked when 2K is whole strips:
  matmul.strip_width);
- output: per tile the inverse the same way, complex axes first, the half-spectrum axis last
  (complex to real: the missing half is the conjugate of the kept one), adding the bias,
  applying the activation and storing into out (or a whole-tile buffer when tiles hang over
  its end, as Winograd's).

ZNNi's pruning: a slab of a tile known to be zero is never transformed, and a slab the inverse
would compute only to throw away is never computed. Generated code knows the data's place
only where an axis has a single tile (the whole axis in one FFT, ZNNi's patch-sized FFT: a
small volume, or a kernel large against it): there the forward pass along another axis loops
only over the data's slab (the pads and the FFT's padding up to t are skipped), and its
butterflies drop the known zeros; in every tile the inverse computes only the first m
outputs of each axis, so the next inverse pass loops over m slabs, not t. Butterflies whose
inputs are zero, and outputs nobody reads, are not emitted (`_Lazy`).

Two schedules per batch entry, as Winograd's: three-stage (all tiles in one group) and fused
(groups of whole tile rows sized to conv_tiles.FUSED_BYTES). The tile size: "fft-t<t>" names it;
"fft" takes `conv_tiles.choose_fft_tile`'s (the least modelled cost). Measured in
benchmarks/winograd_bench.py (its FFT section).
"""

from __future__ import annotations

import math

import numpy as np

from compilerkit.conv_tiles import FFT_TILES, choose_fft_tile, fft_axis_tiles, fused_band
from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, is_float
from compilerkit.lowering.elementwise import activation
from compilerkit.lowering.winograd import (
    ConvSizes,
    Screen,
    _at,
    _bands,
    _tile_index,
    batched_products,
    batched_weights,
    copy_channels_last,
    dense_constant_conv,
    overflow_bound,
    repair_tiles,
    screen_input,
    weights_array,
    zero_around_input,
)
from compilerkit.onnx_passes.single_node import node_label

MAX_TILE = FFT_TILES[-1]


# ---- the FFT, as a lazily emitted expression graph -----------------------------------------
class _Lazy:
    """Real scalar expressions of an FFT: leaves (loaded values), sums, differences,
    negations and products by constants, built in Python and emitted (`emit`) only when a
    stored output needs them, each once. None is a known zero: a sum with it is the other
    term, a product with it is None, so a zero input costs nothing (the pruning)."""

    def __init__(self, b: KernelBuilder, elem):
        self.b, self.elem, self.memo = b, elem, {}

    def add(self, x, y):
        if x is None:
            return y
        if y is None:
            return x
        if x[0] == "neg":
            return self.sub(y, x[1])
        if y[0] == "neg":
            return self.sub(x, y[1])
        return ("add", x, y)

    def sub(self, x, y):
        if y is None:
            return x
        if x is None:
            return self.neg(y)
        if y[0] == "neg":
            return self.add(x, y[1])
        if x[0] == "neg":
            return self.neg(self.add(x[1], y))
        return ("sub", x, y)

    def neg(self, x):
        if x is None:
            return None
        return x[1] if x[0] == "neg" else ("neg", x)

    def scale(self, c: float, x):
        if x is None or c == 0.0:
            return None
        if c == 1.0:
            return x
        if c == -1.0:
            return self.neg(x)
        if x[0] == "neg":
            return ("mul", -c, x[1])
        return ("mul", c, x)

    def emit(self, x):
        """The SSA value of expression `x` (0.0 for a known zero)."""
        b = self.b
        if x is None:
            return b.const(0.0, self.elem)
        if x[0] == "leaf":
            return x[1]
        key = id(x)
        if key in self.memo:
            return self.memo[key][1]
        kind = x[0]
        if kind == "neg":
            v = b.neg(self.emit(x[1]))
        elif kind == "mul":
            v = b.mul(b.const(x[1], self.elem), self.emit(x[2]))
        else:
            v = b.binary(kind, self.emit(x[1]), self.emit(x[2]))
        self.memo[key] = (x, v)  # x kept alive, so its id is not reused
        return v


def twiddle(f: int, n: int, sign: int) -> tuple[float, float]:
    """(cos, sin) of sign * 2 pi f / n, exact where it is 0 or +-1."""
    eighth = (8 * f) % (8 * n)
    exact = {0: (1.0, 0.0), 2 * n: (0.0, 1.0), 4 * n: (-1.0, 0.0), 6 * n: (0.0, -1.0)}
    if eighth in exact:
        c, s = exact[eighth]
    else:
        a = 2 * math.pi * f / n
        c, s = math.cos(a), math.sin(a)
    return c, sign * s


def fft(lz: _Lazy, xs, sign: int):
    """The DFT sum_j xs[j] e^(sign 2 pi i f j / n) of complex values xs [(re, im)] (n a power
    of two), radix-2 decimation in time: X[f] = E[f] + w^f O[f], X[f + n/2] = E[f] - w^f O[f]
    with E, O the DFTs of the even and odd entries and w = e^(sign 2 pi i / n)."""
    n = len(xs)
    if n == 1:
        return list(xs)
    even, odd = fft(lz, xs[0::2], sign), fft(lz, xs[1::2], sign)
    out = [None] * n
    for f in range(n // 2):
        c, s = twiddle(f, n, sign)
        o_re, o_im = odd[f]
        t_re = lz.sub(lz.scale(c, o_re), lz.scale(s, o_im))
        t_im = lz.add(lz.scale(c, o_im), lz.scale(s, o_re))
        e_re, e_im = even[f]
        out[f] = (lz.add(e_re, t_re), lz.add(e_im, t_im))
        out[f + n // 2] = (lz.sub(e_re, t_re), lz.sub(e_im, t_im))
    return out


# ---- which Convs, which tiles --------------------------------------------------------------
def applies(op, t: int | None = None) -> str | None:
    """None when this lowering takes the Conv `op` (ONNX IR) with tiles of t (None: any of
    FFT_TILES), else why not."""
    w_t = op.operands[1].type
    ws = onnx_d.shape_of(op.operands[1])
    r = len(ws) - 2
    if r not in (1, 2, 3):
        return f"{r}-D (FFT here is 1-D, 2-D or 3-D)"
    if not is_float(w_t.element_type) or onnx_d.numpy_dtype(w_t.element_type).itemsize < 4:
        return "not an f32 or f64 Conv"
    if onnx_d.get_attr(op, "group", 1) != 1:
        return "grouped"
    k_sp = list(ws[2:])
    if max(k_sp) < 2:
        return "kernel 1 on every axis (nothing to transform)"
    if max(k_sp) >= (t or MAX_TILE):
        return f"kernel {'x'.join(map(str, k_sp))} (needs tiles larger than {t or MAX_TILE})"
    return dense_constant_conv(op)


# ---- the plan and the lowering -------------------------------------------------------------
class _Plan(ConvSizes):
    """The sizes of one FFT Conv."""

    def __init__(self, op, ins, pads, t: int | None, fused: bool):
        super().__init__(op, ins, pads)
        if t is None:
            t = choose_fft_tile(self.c, self.k, self.k_sp, self.out_sp)
        self.t = t
        axes = fft_axis_tiles(t, self.k_sp, self.out_sp)
        self.ts = [a[0] for a in axes]
        self.ms = [a[1] for a in axes]
        self.tiles = [a[2] for a in axes]
        self.single = [n_t == 1 and tt > 1 for tt, n_t in zip(self.ts, self.tiles, strict=True)]
        self.moved = [d for d in range(self.r) if self.ts[d] > 1]  # transformed axes
        self.real = self.moved[-1]  # the half-spectrum axis
        self.freq = [tt // 2 + 1 if d == self.real else tt for d, tt in enumerate(self.ts)]
        self.p = math.prod(self.freq)
        # where a tile holds data: all of it, except on single-tile axes (the pads and the
        # padding up to t are known zeros there)
        self.live = [(pd, pd + n) if s else (0, tt) for pd, n, tt, s in zip(
            self.pads, self.in_sp, self.ts, self.single, strict=True)]
        # outputs computed per tile: m, or the whole output on a single-tile axis
        self.need = [o if s else m for o, m, s in zip(self.out_sp, self.ms, self.single,
                                                       strict=True)]
        self.ext = [pd + n if s else (nt - 1) * m + tt for pd, n, s, nt, m, tt in zip(
            self.pads, self.in_sp, self.single, self.tiles, self.ms, self.ts, strict=True)]
        self.whole = [o if s else nt * m for o, s, nt, m in zip(
            self.out_sp, self.single, self.tiles, self.ms, strict=True)]
        self.inner = math.prod(self.tiles[1:])
        item = onnx_d.numpy_dtype(self.elem).itemsize
        row_bytes = self.inner * self.p * 2 * (self.c + self.k) * item
        self.band = fused_band(self.tiles[0], self.inner, row_bytes) if fused else self.tiles[0]


def transformed_weights(wt: np.ndarray, ts, real: int) -> np.ndarray:
    """U [P, 2C, 2K] = [[Wr, Wi], [-Wi, Wr]] of conj(W) / prod(t), W the DFT of each kernel
    zero-padded to the tile (half spectrum along axis `real`), float64, positions row-major."""
    k_out, c_in = wt.shape[:2]
    padded = np.zeros((k_out, c_in) + tuple(ts))
    padded[(slice(None), slice(None)) + tuple(slice(0, k) for k in wt.shape[2:])] = wt
    axes = [2 + d for d in range(len(ts)) if ts[d] > 1 and d != real] + [2 + real]
    spec = np.conj(np.fft.rfftn(padded, axes=axes)) / math.prod(ts)
    spec = spec.reshape(k_out, c_in, -1).transpose(2, 1, 0)  # [P, C, K]
    u = np.empty((spec.shape[0], 2 * c_in, 2 * k_out))
    u[:, :c_in, :k_out] = spec.real
    u[:, :c_in, k_out:] = spec.imag
    u[:, c_in:, :k_out] = -spec.imag
    u[:, c_in:, k_out:] = spec.real
    return u


def lower_fft(b: KernelBuilder, op, ins, pads, t: int | None = None, fused: bool = False):
    """Lower the Conv `op` (which `applies` accepted; `pads`: its begin pads, auto_pad
    resolved) by FFT on tiles of t (None: choose_fft_tile's); returns the output."""
    p = _Plan(op, ins, pads, t, fused)
    wt, module = weights_array(op)
    u_np = transformed_weights(wt, p.ts, p.real).astype(onnx_d.numpy_dtype(p.elem))
    u_np, width = batched_weights(u_np, b.lanes)
    hint = f"fft_t{p.t}_{node_label(op)}"
    u = b.constant(u_np, module, hint, p.elem)
    out = p.out = b.alloc(p.out_dims, p.elem)
    y = out if p.whole == p.out_sp else b.alloc([p.k] + p.whole, p.elem)
    xp = b.alloc(p.ext + [p.c], p.elem)
    rows = p.band * p.inner
    v = b.alloc([p.p * rows * 2 * p.c], p.elem)
    mm = b.alloc([p.p * rows * 2 * p.k], p.elem)
    t_in = _temps(b, p, forward=True)
    t_out = _temps(b, p, forward=False)
    p.xp = xp
    # the screen of winograd.py: tiles with NaN, inf or outsized inputs computed directly
    # (an FFT spreads them over the whole tile); the gain bound: forward and inverse sums of
    # prod(t) terms each (twice for the half spectrum), 2C products with max |U|
    size = math.prod(p.ts)
    scr = Screen(b, p, overflow_bound(2.0 * size * size * 2 * p.c * float(np.abs(u_np).max()),
                                      p.elem), module, f"screen_bound_{node_label(op)}")
    zero_around_input(b, p, xp)
    with b.nest([p.n]) as (nn,):
        copy_channels_last(b, p, xp, nn)
        screen_input(b, p, scr, nn)
        for count, height, first in _bands(p, chunked=False):  # a serial group loop
            with b.nest([count]) as (jb,):
                row0 = b.affine([(jb, height)], first)
                g = height * p.inner
                _forward(b, p, xp, v, row0, height, t_in)
                batched_products(b, v, u, mm, p.p, g, 2 * p.k, 2 * p.c, width)
                _inverse(b, p, mm, y, nn, row0, height, t_out)
                repair_tiles(b, p, scr, y, nn, row0, height, p.need)
        if y is not out:
            with b.nest([p.k] + p.out_sp) as ivs:
                b.store(b.load(y, ivs), out, [nn] + ivs)
    return out


def _orders(p: _Plan):
    """The axes of the forward passes (half-spectrum axis first, then the others last to
    first) and of the inverse passes (the reverse)."""
    fwd = [p.real] + [d for d in reversed(p.moved) if d != p.real]
    return fwd, fwd[::-1]


def _stages(p: _Plan, forward: bool):
    """Per pass: (axis, ranges of every axis before the pass, full sizes after it)."""
    order = _orders(p)[0 if forward else 1]
    ranges = list(p.live) if forward else [(0, f) for f in p.freq]
    sizes = list(p.ts) if forward else list(p.freq)
    out = []
    for d in order:
        before = list(ranges)
        ranges[d] = (0, p.freq[d]) if forward else (0, p.need[d])
        sizes[d] = p.freq[d] if forward else p.need[d]
        out.append((d, before, list(sizes)))
    return out


def _temps(b: KernelBuilder, p: _Plan, forward: bool):
    """The buffers between passes: one tile's values [sizes..., re | im, C or K]."""
    inner = p.c if forward else p.k
    return [b.alloc(sizes + [2, inner], p.elem) for _, _, sizes in _stages(p, forward)[:-1]]


def _pass(b: KernelBuilder, p: _Plan, d, ranges, inner, load, store, forward, last_real):
    """One transform pass along axis d: a nest over the other axes' `ranges` and the channel
    (innermost), the FFT along d unrolled. load(coords, c) -> (re, im) expressions (None:
    zero) at full coordinates; store(coords, c, part, value) writes one real part (0 re,
    1 im) of an output."""
    other = [ranges[e] for e in range(p.r) if e != d]
    with b.nest(other + [inner]) as ivs:
        o, c = ivs[:-1], ivs[-1]
        lz = _Lazy(b, p.elem)

        def full(j, o=o):
            return list(o[:d]) + [j] + list(o[d:])
        lo, hi = ranges[d]
        vals = [load(full(j), c, lz) if lo <= j < hi else (None, None)
                for j in range(hi if not forward else p.ts[d])]
        if forward:
            vals += [(None, None)] * (p.ts[d] - len(vals))
            res = fft(lz, vals, -1)[:p.freq[d]]
            for f, (re, im) in enumerate(res):
                store(full(f), c, 0, lz.emit(re))
                store(full(f), c, 1, lz.emit(im))
            return
        if last_real:  # complex to real: rebuild the conjugate half, keep real parts
            t = p.ts[d]
            half = [vals[0][:1] + (None,)] + vals[1:t // 2] + [vals[t // 2][:1] + (None,)]
            vals = half + [(re, lz.neg(im)) for re, im in reversed(vals[1:t // 2])]
        res = fft(lz, vals, +1)[:p.need[d]]
        for n, (re, im) in enumerate(res):
            store(full(n), c, 0, lz.emit(re))
            if not last_real:
                store(full(n), c, 1, lz.emit(im))


def _idx(b, coords):
    return [b.index(x) if isinstance(x, int) else x for x in coords]


def _tile_origin(b, p: _Plan, row0, ts):
    return [b.affine([(row0, p.ms[0]), (ts[0], p.ms[0])])] + [
        b.affine([(t, p.ms[d])]) for d, t in enumerate(ts[1:], start=1)]


def _run_passes(b, p: _Plan, forward, inner, first_load, last_store, temps):
    stages = _stages(p, forward)
    for i, (d, ranges, _) in enumerate(stages):
        if i == 0:
            load = first_load
        else:
            tmp = temps[i - 1]

            def load(co, c, lz, tmp=tmp):
                at = _idx(b, co)
                return (("leaf", b.load(tmp, at + [b.index(0), c])),
                        ("leaf", b.load(tmp, at + [b.index(1), c])))
        if i == len(stages) - 1:
            store = last_store
        else:
            tmp = temps[i]

            def store(co, c, part, value, tmp=tmp):
                b.store(value, tmp, _idx(b, co) + [b.index(part), c])
        _pass(b, p, d, ranges, inner, load, store, forward,
              last_real=not forward and d == p.real)


def _forward(b: KernelBuilder, p: _Plan, xp, v, row0, height, temps):
    """V[q, tile, re | im, c] = DFT of the group's input tiles (C innermost)."""
    g = height * p.inner
    q_strides = [math.prod(p.freq[d + 1:]) * g * 2 * p.c for d in range(p.r)]
    with b.nest([height] + p.tiles[1:]) as ts:
        origin = _tile_origin(b, p, row0, ts)
        tile = _tile_index(b, p, ts[0], ts[1:])

        def load(coords, c, lz):
            at = [_at(b, [x], [1], [(o, 1)]) for x, o in zip(coords, origin, strict=True)]
            return ("leaf", b.load(xp, at + [c])), None

        def store(coords, c, part, value):
            b.store(value, v, [_at(b, coords, q_strides, [(tile, 2 * p.c), (c, 1)],
                                   part * p.c)])

        _run_passes(b, p, True, p.c, load, store, temps)


def _inverse(b: KernelBuilder, p: _Plan, mm, y, nn, row0, height, temps):
    """y[k, tile origin + i] = act(bias[k] + inverse DFT of M)[i] for the first m (need)
    outputs per axis of the group's tiles (K innermost)."""
    g = height * p.inner
    q_strides = [math.prod(p.freq[d + 1:]) * g * 2 * p.k for d in range(p.r)]
    with b.nest([height] + p.tiles[1:]) as ts:
        origin = _tile_origin(b, p, row0, ts)
        tile = _tile_index(b, p, ts[0], ts[1:])

        def load(coords, k, lz):
            re = b.load(mm, [_at(b, coords, q_strides, [(tile, 2 * p.k), (k, 1)])])
            im = b.load(mm, [_at(b, coords, q_strides, [(tile, 2 * p.k), (k, 1)], p.k)])
            return ("leaf", re), ("leaf", im)

        bias = {}

        def store(coords, k, part, value):
            if p.bias is not None:
                if k not in bias:
                    bias[k] = b.load(p.bias, [k])
                value = b.add_(value, bias[k])
            if p.act is not None:
                value = activation(b, value, *p.act)
            at = [_at(b, [x], [1], [(o, 1)]) for x, o in zip(coords, origin, strict=True)]
            b.store(value, y, ([nn] if y is p.out else []) + [k] + at)

        _run_passes(b, p, False, p.k, load, store, temps)
