"""What conv.py's schedules and the GEMM panels (conv_panels.py) share: a Conv's geometry
(`_Conv`), its epilogue (`_finish`: the residual sum and the fused activation; `_clamp`: the
activation as a product's clamp), the zero-bordered scratch planes and the taps read from
them (`_scratch`, `_copy_in`, `_phase_scratch`, `_copy_phases`, `_tap`), and the panel
sizes (`_even_panels`, PANEL_BYTES, COL_BYTES). Kept apart so that conv.py can dispatch
to conv_panels.py and both build on these without an import cycle.
"""

from __future__ import annotations

import math

from compilerkit.lowering.builder import KernelBuilder, fill_outside, shape
from compilerkit.lowering.elementwise import activation

# Column buffer + output of one GEMM panel: 2 MiB (L3-resident; this machine's L2 is 512 KiB)
# measured no slower at 1 thread than 512 KiB.
PANEL_BYTES = 2 * 1024 * 1024
MIN_PANEL = 64  # fewest output columns of a GEMM panel (narrower ones starve the micro-kernel)
PAR_PANELS = 8  # panels wanted when threads share a Conv's panel loop (even counts preferred)
COL_BYTES = 64 * 1024 * 1024  # most column buffer, all panels together, for shared panels


class _Conv:
    """The sizes of one Conv, named once for every schedule."""

    def __init__(self, x, w, bias, out_dims, groups, st, dil, pads, act):
        xs, ws = shape(x), shape(w)
        self.x, self.w, self.bias, self.act = x, w, bias, act
        # fuse-conv's residual sum: s viewed [N, OC, positions], added by `_finish`
        self.summand = None
        self.n, self.c_in, self.in_sp = xs[0], xs[1], list(xs[2:])
        self.oc, self.cg, self.k_sp = ws[0], ws[1], list(ws[2:])
        self.out_sp = list(out_dims[2:])
        self.groups, self.ocg = groups, ws[0] // groups
        self.st, self.dil, self.pads = st, dil, pads
        self.r = len(self.k_sp)
        self.elem = x.type.element_type

    def reach(self, d) -> int:
        """One past the last input position the Conv reads on spatial axis d (padded coords)."""
        return (self.out_sp[d] - 1) * self.st[d] + (self.k_sp[d] - 1) * self.dil[d] + 1

    def guarded(self, d) -> bool:
        """Whether some tap on axis d falls outside the input (into the padding)."""
        return self.pads[d] > 0 or self.reach(d) - self.pads[d] > self.in_sp[d]


def phase_pieces(ranges):
    """How to copy input columns into column-phase planes: `ranges[p]` is the [lo, hi) of
    positions j that phase p has. The positions every phase has go in one piece with all the
    phases, so its nest reads s neighbouring columns per j and writes one to each plane (an
    interleaved group LLVM vectorises with shuffles; a nest per phase reads every s-th
    element, lane by lane); the few positions only some phases have get a piece per phase.
    Returns [(phases, (lo, hi))]."""
    lo, hi = max(r[0] for r in ranges), min(r[1] for r in ranges)
    pieces = [(list(range(len(ranges))), (lo, hi))] if lo < hi else []
    for p, (r0, r1) in enumerate(ranges):
        rest = [(r0, min(r1, lo)), (max(r0, hi), r1)] if lo < hi else [(r0, r1)]
        pieces += [([p], r) for r in rest if r[0] < r[1]]
    return pieces


def interior(conv) -> list[tuple[int, int]]:
    """[(lo, hi)] per spatial axis: the output positions whose taps all read inside the input
    (no padding), an empty range (lo, lo) where there are none."""
    out = []
    for size, osize, s, d, p, k in zip(conv.in_sp, conv.out_sp, conv.st, conv.dil,
                                       conv.pads, conv.k_sp, strict=True):
        lo = -(-p // s)
        hi = min(osize, (size - 1 - (k - 1) * d + p) // s + 1)
        out.append((lo, max(lo, hi)))
    return out


def _finish(b, conv, v, at=None):
    """The epilogue of one output value: plus the summand at `at` ([batch entry, channel,
    flat position]) when the Conv has one, then the fused activation, if any."""
    if conv.summand is not None:
        v = b.add_(v, b.load(conv.summand, at))
    return activation(b, v, *conv.act) if conv.act is not None else v


def _bias_at(b: KernelBuilder, conv: _Conv, o):
    """Output channel o's start value: its bias, or 0 without one."""
    return b.load(conv.bias, [o]) if conv.bias is not None else b.const(0.0, conv.elem)


EPILOGUE_BLOCK = 16  # channels x positions per block of a transposing epilogue


def transposing_nests(b: KernelBuilder, channels: int, dims: list[int], body):
    """The loops of an epilogue that reads t[position, channel] and writes the output
    channel-major: `body(o, ivs)` emitted for every channel o < `channels` and position `ivs`
    of `dims` (the positions' axes, the last one contiguous in the output). Where channels
    and the last axis have whole blocks of EPILOGUE_BLOCK, the loops go block by block
    (EPILOGUE_BLOCK channels x as many positions innermost), the leftover channels and
    positions in nests of their own: a block's rows of t, a cache line each, are read once
    from L1, where a walk down t's columns took each line from L2 or farther once per
    channel. 1 thread, AVX-512, + Relu, ms: ResNet-50's 7x7 stride-2 stem (the tap schedule)
    2.12 -> 1.88, 16 -> 32 3x3 at 224 x 224 4.25 -> 3.75, 32 -> 64 at 112 x 112 3.55 -> 3.36;
    3x3x3 16 -> 32 at 64^3 60.1 -> 58.7; the same bits."""
    n = EPILOGUE_BLOCK
    lead, last = list(dims[:-1]), dims[-1]
    oc_whole, pos_whole = channels // n * n, last // n * n
    if not oc_whole or not pos_whole:
        with b.nest([channels] + list(dims)) as ivs:
            body(ivs[0], ivs[1:])
        return
    with b.nest([oc_whole // n] + lead + [pos_whole // n, n, n]) as ivs:
        ob, mid, xb, oi, xi = ivs[0], ivs[1:-3], ivs[-3], ivs[-2], ivs[-1]
        body(b.affine([(ob, n), (oi, 1)]), list(mid) + [b.affine([(xb, n), (xi, 1)])])
    if pos_whole < last:  # the last axis's leftover positions, every block of channels
        with b.nest([oc_whole] + lead + [last - pos_whole]) as ivs:
            body(ivs[0], list(ivs[1:-1]) + [b.affine([(ivs[-1], 1)], pos_whole)])
    if oc_whole < channels:  # the leftover channels, every position
        with b.nest([channels - oc_whole] + list(dims)) as ivs:
            body(b.affine([(ivs[0], 1)], oc_whole), ivs[1:])


def _bias_rows(b: KernelBuilder, conv: _Conv, t, slot, positions: int, width: int):
    """The start of a transposed product (out^T in t[slot, positions, width + ...], or in
    t[positions, width + ...] with `slot` None): every row the bias (0 without one), and 0
    in the columns past the output channels (computed with zero weights, never read)."""
    at = [] if slot is None else [slot]
    with b.nest([positions, conv.oc]) as (q, o):
        b.store(_bias_at(b, conv, o), t, at + [q, o])
    if width > conv.oc:
        with b.nest([positions, (conv.oc, width)]) as (q, o):
            b.store(b.const(0.0, conv.elem), t, at + [q, o])


def _clamp(conv) -> tuple[float | None, float | None] | None:
    """The fused activation as krnl.matmul's clamp (lo, hi; None where unbounded) when it is
    one: Relu, or Clip with bounds that are numbers (an infinite bound on its own side
    clamps nothing: `activation` skips it too). None otherwise (an epilogue applies it), and
    always with a summand (the activation comes after the sum)."""
    if conv.act is None or conv.summand is not None:
        return None
    name, params = conv.act
    if name == "Relu":
        return 0.0, None
    if name != "Clip":
        return None
    lo, hi = params
    lo = None if lo == -math.inf else lo
    hi = None if hi == math.inf else hi
    if any(x is not None and not math.isfinite(x) for x in (lo, hi)):
        return None
    return lo, hi


def _scratch(b: KernelBuilder, conv: _Conv, always=False, extra_rows=0):
    """A buffer [groups, C/g, padded spatial...] for the input planes when some tap falls into
    the padding (or `always`), else None: `_copy_in` zeroes group g's planes and copies the
    input into their interior, so every tap reads without a guard. One set of planes per
    group, so that groups (and the threads that take them) never share one. `extra_rows`
    adds rows at the end of each plane for schedules that read a little past the last row
    (the tap schedule's throw-away positions, conv_taps.py)."""
    if not always and not any(conv.guarded(d) for d in range(conv.r)):
        return None
    ext = [max(conv.pads[d] + conv.in_sp[d], conv.reach(d)) for d in range(conv.r)]
    ext[0] += extra_rows
    return b.alloc([conv.groups, conv.cg] + ext, conv.elem)


def _copy_in(b: KernelBuilder, conv: _Conv, scratch, nn, g, border=0.0):
    """Group g's planes of batch entry nn into the scratch: `border` in the padding (the
    arena is shared with other buffers, so it is rewritten every call), then the input
    inside. The planes are written just before the group's taps read them, while in cache.
    Only the padding is filled (`builder.fill_outside`): filling the whole planes first
    wrote every input element twice, a 3-D net's 37 MB planes too."""
    fill_outside(b, scratch, [g], [None] + [(conv.pads[d], conv.pads[d] + conv.in_sp[d])
                                            for d in range(conv.r)], border)
    with b.nest([conv.cg] + conv.in_sp) as ivs:
        ch = b.affine([(g, conv.cg), (ivs[0], 1)])
        v = b.load(conv.x, [nn, ch] + ivs[1:])
        at = [b.affine([(i, 1)], conv.pads[d]) for d, i in enumerate(ivs[1:])]
        b.store(v, scratch, [g, ivs[0]] + at)


def _phase_scratch(b: KernelBuilder, conv: _Conv):
    """For a stride s > 1 on the last axis: a buffer [groups, C/g, padded spatial..., s,
    ceil(padded width / s)] holding the padded input with its last axis split by column phase
    (padded column j*s + p at [p, j]). A tap's column o*s + k*d is then phase (k*d) % s,
    position o + (k*d) // s: consecutive over the output row, so the tap loop vectorises with
    plain loads (with stride-s loads LLVM gathers lane by lane, or keeps a max scalar)."""
    s = conv.st[-1]
    ext = [max(conv.pads[d] + conv.in_sp[d], conv.reach(d)) for d in range(conv.r)]
    return b.alloc([conv.groups, conv.cg] + ext[:-1] + [s, -(-ext[-1] // s)], conv.elem)


def _copy_phases(b: KernelBuilder, conv: _Conv, scratch, nn, g, border=0.0):
    """Group g's planes of x[nn] into the phase-split buffer: `border` everywhere, then the
    input columns j*s + q (padded column j*s + q + pad: phase (q + pad) % s, position
    j + (q + pad) // s), all phases q in one nest where they all have column j
    (`phase_pieces`)."""
    s, pad, width = conv.st[-1], conv.pads[-1], conv.in_sp[-1]
    with b.nest(shape(scratch)[1:]) as ivs:
        b.store(b.const(border, conv.elem), scratch, [g] + ivs)
    cols = [(0, -(-(width - q) // s)) for q in range(min(s, width))]
    for phases, span_j in phase_pieces(cols):
        with b.nest([conv.cg] + conv.in_sp[:-1] + [span_j]) as ivs:
            c, rows, j = ivs[0], ivs[1:-1], ivs[-1]
            ch = b.affine([(g, conv.cg), (c, 1)])
            at = [b.affine([(i, 1)], conv.pads[d]) for d, i in enumerate(rows)]
            for q in phases:
                v = b.load(conv.x, [nn, ch] + rows + [b.affine([(j, s)], q)])
                phase = [b.index((q + pad) % s), b.affine([(j, 1)], (q + pad) // s)]
                b.store(v, scratch, [g, c] + at + phase)


def _phase_tap_index(b: KernelBuilder, conv: _Conv, pos, ks):
    """Indices into a phase-split buffer of the tap at kernel position ks (numbers) for
    output positions pos: o*s + k*d on the leading axes, (phase, o + (k*d) // s) on the last."""
    at = [b.affine([(p, conv.st[d])], ks[d] * conv.dil[d]) for d, p in enumerate(pos[:-1])]
    kd = ks[-1] * conv.dil[-1]
    s = conv.st[-1]
    return at + [b.index(kd % s), b.affine([(pos[-1], 1)], kd // s)]


def _tap(b: KernelBuilder, conv: _Conv, scratch, nn, g, c, at):
    """Input channel c of group g at spatial positions `at`, given in padded coordinates
    (o * stride + k * dilation): from the scratch planes, or from x when nothing is padded."""
    if scratch is not None:
        return b.load(scratch, [g, c] + at)
    ch = b.affine([(g, conv.cg), (c, 1)])
    return b.load(conv.x, [nn, ch] + at)


def _even_panels(rows: int, lo: int, hi: int) -> int | None:
    """Rows per panel for a panel loop that threads share: a height in [lo, hi] dividing `rows`
    evenly (a ragged last panel would be a serial loop of its own), for at least 2 panels that
    2 threads share evenly (an even count, or many: 11 panels leave one thread 6 of 11), up to
    PAR_PANELS, preferring more panels; None if none."""
    best = None
    for h in range(max(lo, 1), min(hi, rows) + 1):
        if rows % h == 0:
            p = rows // h
            key = (p > 1, -(p % 2) / p, min(p, PAR_PANELS), -p)
            if best is None or key > best[0]:
                best = (key, h)
    return None if best is None else best[1]


def _reads_x_in_place(conv: _Conv) -> bool:
    """A 1x1, stride-1, unpadded Conv: x itself is the GEMM's operand (no im2col)."""
    return all(k == 1 for k in conv.k_sp) and all(s == 1 for s in conv.st) and not any(
        conv.pads) and all(conv.reach(d) <= conv.in_sp[d] for d in range(conv.r))
