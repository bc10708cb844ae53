"""Direct 2-D grouped and depthwise Conv over flat phase planes: conv.py's `_direct` lowers
every 2-D direct Conv (groups with at most DIRECT_CHANNELS input channels: MobileNet's and
EfficientNet's k x k depthwise layers, any stride, pads, dilation) with `direct_2d`.

Assumes `conv` is conv.py's `_Conv` of a 2-D Conv (r == 2) with at least one output. The
schedule, per (batch entry, block of groups): the blocks are dealt out in chunks, the loop
threads share (builder.chunk_count, MAX_CHUNKS). Each chunk owns a slot of scratch planes,
which its blocks fill one after another while it is in cache, and each block its output
channels, so chunks write disjoint memory.

1. Phase planes. The block's input planes are copied into its chunk's slot of a scratch
   buffer [chunks, groups per block * C/g, sh * sw, L], split by the stride's row and column
   phase: input (r, c) goes to plane (r % sh, c % sw) at row r // sh, column c // sw (stride 1: one
   plane, the input itself). Planes are row-major with pitch P = max(plane width, OW), after
   `lead` elements and `top` rows of zeros, with zero rows below: the vertical padding is
   stored zeros. Where no tap reads padding (stride 1, unpadded), the planes are x's own and
   nothing is copied. A stride-1 plane as wide as P is one contiguous copy; otherwise each row
   copies ROW_COPY-multiple columns (a vector loop with no remainder), the excess spilling into
   the next row's slots, which that row's own copy rewrites (the last rows, whose spill would
   read past the input plane, copy exactly, and the zero rows below are written last).
   A stride-1 plane as wide as P (pads within the kernel's reach) on EDGE_MIN_ROWS or more
   output rows is not copied whole (`_Planes.edges`): the positions whose taps all fall
   inside the input read x's plane in place, and only the first and last positions read a
   small scratch holding the zeros above and the first rows, the last rows and the zeros
   below (`_fill_edges`); the same loads and sums, so the same bits.
2. Flat loop. Output (oh, ow) and tap (kh, kw) read one plane at flat position
   q + offset(kh, kw), q = oh * P + ow, so one loop over q computes a whole output plane with
   consecutive loads: one long vector loop, where a loop per output row of 7 or 14 would be
   mostly vector remainder. Its remainder, when 3 or more, is recomputed as one TAIL-position
   block ending at the last output (the same values stored again), two vector iterations in
   place of 3 to 7 scalar ones, each as costly as a vector one.
3. Column masks. Horizontal padding is not stored: at pitch P a tap left or right of the input
   reads a neighbouring row's pixel. The taps of kernel column kw all fall outside the input
   for the same output columns, so per kw their products (all input channels and kernel rows)
   are summed into one partial sum, and `select(column inside, partial, 0)` drops it where
   column ow * sw + kw * dw - pad is outside [0, W): a NaN or inf read there is discarded, not
   multiplied by 0, so a non-finite input spoils exactly the outputs whose window holds it (the
   stored zero rows above and below multiply like onnxruntime's zero padding). `col[q] =
   q mod P`, as a float, is a table filled once per call (when some column needs a mask).
4. Output. When P == OW the loop stores straight into the output planes; otherwise (an
   unpadded Conv, whose output rows are narrower than its input rows) into a row buffer per
   block, and a copy keeps the OW real values of each row.

5. Strided in place. A stride-2 Conv with kernels up to 3 on planes of STRIDED_MIN_COLUMNS
   output columns or more copies nothing (`strided_in_place`, `strided_2d`): at stride 2
   the copy into phase planes read the whole input from memory and only then computed (96 x
   112 x 112: 0.32 ms of copy, 0.13 of sums, none of it overlapped). Instead the interior
   outputs (all taps inside the input) load their taps from x in a vector loop along each
   output row, whose stride-2 loads LLVM interleaves (wide loads and shuffles), and the
   border outputs load clamped, multiply a zero for a row of padding and drop a column of
   padding's partial sum, as the planes do: the same bits.

Bias and the fused activation (`conv.act`) are applied before the one store of each output.
Compared with padded planes (pitch W + pads, the horizontal padding stored too): no throw-away
columns (49 outputs of a 7 x 7 plane are 49 loop positions, not 61), the copy is one
contiguous loop (no scalar 7-wide rows), and the output needs no copy-out. MobileNetV2 /
EfficientNet-B0 layers at 1 thread ran 1.3-2.2x faster than on padded planes (960 x 7 x 7
3x3: 67 -> 36 us; 672 x 14 x 14 5x5: 288 -> 167 us; 576 x 14 x 14 3x3 stride 2: 80 -> 44 us).
"""

from __future__ import annotations

import itertools

from xdsl.dialects.builtin import i64

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, chunk_count
from compilerkit.lowering.conv_common import interior, phase_pieces
from compilerkit.lowering.elementwise import activation

# The recomputed last block of a flat loop: two 8-lane vectors (LLVM's loop vectoriser takes
# 16 positions as two 256-bit iterations; loops of 8 it left scalar: 960 x 7 x 7 in blocks of
# 8 ran 3x slower), one vector where its loops are 512-bit (AVX-512 hosts; 32 there was no
# faster: 8 MobileNetV2/EfficientNet-B0 layers within 5%) ...
TAIL = 16
# ... used when the loop's remainder mod 8 is at least this: one scalar position costs about
# what a vector iteration does, so a remainder of 1 or 2 is cheaper than two vector
# iterations (384 x 14 x 14 3x3, remainder 4: 49 -> 45 us with the block).
TAIL_MIN = 3
# Input columns per step of a row copy (step 1): a multiple of 8 lanes, and more than
# unroll-small's MAX_TRIP (8), so the copy stays a loop the loop vectoriser takes, with a
# run-time overlap check (inside the threads' loop the buffers are not `noalias` and the SLP
# vectoriser, which has no such check, left unrolled copies scalar: 576 x 14 x 14 stride 2
# took 55 us with 8, 40 us with 16, 51 us with 32).
ROW_COPY = 16
# Groups per iteration of the threads' loop on tiny planes: all their planes are copied
# before the first is computed on, and the loop overhead is shared. Measured at 1 thread:
# 960 x 7 x 7 3x3 39 -> 35 us with 4 (8: 36, 16: 37), 1152 x 7 x 7 5x5 85 -> 82 us; 14 x 14
# planes were slower blocked (384 channels, 3x3: 47 -> 51 us with 8), so blocks hold at most
# GROUP_BLOCK_BYTES of planes.
GROUP_BLOCK = 4
GROUP_BLOCK_BYTES = 1536
# Most chunks of blocks the threads take (builder.chunk_count), each with one slot of phase
# planes its blocks refill in turn while it is in cache. A slot per block copied the whole
# input into a scratch as large first (4.9 MB for MobileNetV2's 96 x 112 x 112 stride-2
# layer). 1 thread, AVX-512, 3x3 + Clip, us, a slot per block -> per chunk: 96 x 112 x 112
# stride 2 480 -> 385, 144 x 56 x 56 stride 2 223 -> 128, 192 x 28 x 28 stride 2 57 -> 37,
# 144 x 56 x 56 244 -> 220; MobileNetV2 1.05-1.07x, EfficientNet-B0 1.02-1.04x (2 threads:
# 1.03-1.04x). MobileNetV2 at 1 and 2 threads, best of 50 calls, ms, at 2 / 4 / 8 / 16
# chunks: 6.99 / 7.01 / 7.03 / 6.99 and 4.63 / 4.42 / 4.46 / 4.43 (2 left the threads'
# shares uneven); EfficientNet-B0 the same within 2%.
MAX_CHUNKS = 8


# Stride-1 Convs with padding and at least this many output rows read the interior of their
# input in place (`_Planes.edges`): the copy was a third of a large layer's time. 1 thread,
# AVX-512, 3x3 pad 1 + Relu unless named, ms whole planes -> edges (same bits): 32 x 112 x
# 112 0.228 -> 0.170, 144 x 56 x 56 0.199 -> 0.179, 96 x 56 x 56 5x5 0.261 -> 0.243,
# MobileNetV2 7.49 -> 7.34 (best of 60 calls interleaved). Small planes lost: 240 x 28 x 28
# 5x5 0.155 -> 0.178, 480 x 14 x 14 0.043 -> 0.083 (their first and last positions, a
# tenth to a fifth of the plane, run as scalar loops, and the copies are short loops too).
EDGE_MIN_ROWS = 48
# Stride-2 Convs with kernels up to 3 and at least this many output columns read x in place
# (`strided_in_place`). 1 thread, AVX-512, + Relu, ms phase planes -> in place (same bits):
# 96 x 112 x 112 3x3 0.465 -> 0.260, 16 x 224 x 224 0.383 -> 0.204, 24 x 100 x 130 0.126 ->
# 0.105; MobileNetV2 7.07 -> 6.91 at 1 thread, 5.00 -> 4.73 at 2 (best of 40 interleaved).
# Slower in place where an output row is one vector and a long remainder, or 5x5 taps make
# five interleaved loads per row: 144 x 56 x 56 3x3 0.110 -> 0.123, 5x5 0.155 -> 0.259,
# 32 x 112 x 112 5x5 0.201 -> 0.213.
STRIDED_MIN_COLUMNS = 48


class _Edges:
    """A stride-1 plane read in place: output positions [lo, hi) read every tap inside x's
    plane; the first and last positions read a scratch of `length`: plane positions
    [0, head) (the zeros above, the first rows), then [tail_start, plane_length) (the last
    rows, the zeros below)."""

    def __init__(self, lo, hi, head, tail_start, plane_length):
        self.lo, self.hi, self.head, self.tail_start = lo, hi, head, tail_start
        self.length = head + plane_length - tail_start


class _Planes:
    """Where each input pixel and each tap lives in the phase planes (module docstring, 1.),
    in flat positions of one plane."""

    def __init__(self, conv):
        (self.h, self.w), (self.oh, self.ow) = conv.in_sp, conv.out_sp
        (self.sh, self.sw), (dh, dw), (pt, pl) = conv.st, conv.dil, conv.pads
        self.kh, self.kw = conv.k_sp
        # kernel row kh reads input row oh * sh + kh * dh - pt: row phase a, plane row oh + fr
        self.rows = [divmod(k * dh - pt, self.sh)[::-1] for k in range(self.kh)]  # (a, fr)
        self.cols = [divmod(k * dw - pl, self.sw)[::-1] for k in range(self.kw)]  # (b, fc)
        # rows (columns) of phase a (b): input r = i * s + a, i < ceil((size - a) / s)
        self.hq = [-(-(self.h - a) // self.sh) for a in range(self.sh)]
        self.wq = [-(-(self.w - b) // self.sw) for b in range(self.sw)]
        self.pitch = max(max(self.wq), self.ow)
        self.top = max(0, -min(fr for _, fr in self.rows))
        self.lead = max(0, -min(fc for _, fc in self.cols))
        self.start = self.lead + self.top * self.pitch  # the first input pixel of a plane
        self.span = (self.oh - 1) * self.pitch + self.ow  # flat positions the loop computes
        reach = self.offset(max(fr for _, fr in self.rows),
                            max(fc for _, fc in self.cols)) + self.span
        self.data_end = [self.start + hq * self.pitch for hq in self.hq]  # per row phase
        self.length = max(reach, max(self.data_end))
        # a stride-1 plane as wide as the pitch is one contiguous copy; other planes are
        # copied row by row, `width` columns at a time
        self.contiguous = self.phases == 1 and self.w == self.pitch
        self.width = -(-max(self.wq) // ROW_COPY) * ROW_COPY
        if not self.contiguous:  # room for the last row's excess, zeroed with the rows below
            self.length = max(self.length, self.start + (max(self.hq) - 1) * self.pitch
                              + self.width)
        # no tap reads padding: the taps read x's planes themselves, nothing is copied
        self.in_place = self.contiguous and self.start == 0 and self.length == self.h * self.w

    def edges(self):
        """Where a stride-1 Conv with padding reads its input in place (module docstring,
        1.): None where the planes are copied whole (strided, rows narrower than the pitch,
        fewer than EDGE_MIN_ROWS output rows), else an _Edges."""
        if self.phases != 1 or not self.contiguous or self.in_place or self.oh < EDGE_MIN_ROWS:
            return None
        fr = [fr for _, fr in self.rows]
        fc = [fc for _, fc in self.cols]
        low = min(fr) * self.pitch + min(fc)  # the taps' reach around q, in x's flat positions
        high = max(fr) * self.pitch + max(fc)
        lo, hi = max(0, -low), min(self.span, self.h * self.w - high)
        if hi - lo < max(2 * self.pitch, TAIL):
            return None
        return _Edges(lo, hi, self.start + lo + high, self.start + hi + low, self.length)

    @property
    def phases(self) -> int:
        return self.sh * self.sw

    def offset(self, fr: int, fc: int) -> int:
        """The flat position output q = 0 reads for a tap at plane row fr, column fc."""
        return self.start + fr * self.pitch + fc

    def column_range(self, kw: int):
        """The output columns [lo, hi) whose kernel column kw reads inside the input, or None
        when every one of the OW does."""
        b, fc = self.cols[kw]
        lo, hi = -fc, self.wq[b] - fc
        return None if lo <= 0 and hi >= self.ow else (lo, hi)


def direct_2d(b: KernelBuilder, conv, out):
    """out = act(bias + conv(x, w)) for a 2-D direct Conv, as the module docstring lays out."""
    if strided_in_place(conv):
        return strided_2d(b, conv, out)
    pl = _Planes(conv)
    edges = pl.edges()
    per = 1 if edges else _groups_per_block(conv, pl)
    blocks, planes, outs = conv.groups // per, per * conv.cg, per * conv.ocg
    chunks = chunk_count(blocks, MAX_CHUNKS)
    xf = b.view(conv.x, [conv.n, conv.c_in, pl.h * pl.w])  # x's planes, flat
    if edges:  # only the first and last rows are copied (module docstring, 1.)
        scratch = b.alloc([chunks, planes, 1, edges.length], conv.elem)
    else:
        scratch = None if pl.in_place else b.alloc([chunks, planes, pl.phases, pl.length],
                                                   conv.elem)
    masked = any(pl.column_range(kw) is not None for kw in range(pl.kw))
    col = _column_table(b, pl, conv.elem) if masked else None
    direct = pl.pitch == pl.ow
    if direct:
        dst = b.view(out, [conv.n, blocks, outs, pl.oh * pl.ow])
    else:
        dst = b.alloc([chunks, outs, pl.span], conv.elem)  # the row buffer
        og = b.view(out, [conv.n, blocks, outs, pl.oh, pl.ow])
    with b.nest([conv.n, chunks, blocks // chunks]) as (nn, jc, ji):
        gb = b.affine([(jc, blocks // chunks), (ji, 1)])  # this block of groups
        if edges:
            _fill_edges(b, conv, pl, edges, scratch, xf, nn, jc, gb, planes)
        elif scratch is not None:
            _fill_planes(b, conv, pl, scratch, xf, nn, jc, gb, planes)
        with b.nest([per, conv.ocg]) as (j, o):
            och = b.affine([(j, conv.ocg), (o, 1)])  # output channel within the block
            oc = b.affine([(gb, outs), (och, 1)])
            bias, w = _weights(b, conv, oc)

            def tap(c, phase, at, shift=0, planes_own=scratch is None):
                """Input channel c of the group, phase plane `phase`, flat position `at`
                (+ `shift`, where the positions' planes start elsewhere)."""
                if planes_own:  # the planes are x's own
                    ch = b.affine([(gb, planes), (j, conv.cg)], c)
                    return b.load(xf, [nn, ch, b.affine([(at, 1)], shift) if shift else at])
                plane = b.affine([(j, conv.cg)], c)  # among the block's planes
                return b.load(scratch, [jc, plane, b.index(phase),
                                        b.affine([(at, 1)], shift) if shift else at])

            def output(q, tap=tap):
                v = _sum(b, conv, pl, tap, col, bias, w, q)
                b.store(v, dst, [nn, gb, och, q] if direct else [jc, och, q])

            if edges:  # the first positions, the interior read in x, the last positions
                flat_loop(b, edges.lo, output)
                flat_loop(b, edges.hi, lambda q: output(q, lambda c, phase, at: tap(
                    c, phase, at, -pl.start, planes_own=True)), lo=edges.lo)
                flat_loop(b, pl.span, lambda q: output(q, lambda c, phase, at: tap(
                    c, phase, at, edges.head - edges.tail_start)), lo=edges.hi)
            else:
                flat_loop(b, pl.span, output)
        if not direct:
            with b.nest([outs, pl.oh, pl.ow]) as (o, i, jj):
                v = b.load(dst, [jc, o, b.affine([(i, pl.pitch), (jj, 1)])])
                b.store(v, og, [nn, gb, o, i, jj])


def _groups_per_block(conv, pl: _Planes) -> int:
    """Groups per iteration of the threads' loop: the largest divisor of the group count up to
    GROUP_BLOCK whose planes fit in GROUP_BLOCK_BYTES (1 on all but tiny planes)."""
    plane = conv.cg * pl.phases * pl.length * onnx_d.numpy_dtype(conv.elem).itemsize
    return max(d for d in range(1, GROUP_BLOCK + 1)
               if conv.groups % d == 0 and (d == 1 or d * plane <= GROUP_BLOCK_BYTES))


def flat_loop(b: KernelBuilder, n: int, body, lo: int = 0):
    """body(q) for q in [lo, n): one loop, or, when its remainder mod 8 is TAIL_MIN or more, a
    loop over the multiple of 8 and a TAIL-position block ending at n that recomputes the
    positions before (module docstring, 2.: `body` must store values that depend only on q)."""
    rest = (n - lo) % 8
    if rest >= TAIL_MIN and n - lo >= TAIL:
        with b.nest([(lo, n - rest)]) as (q,):
            body(q)
        with b.nest([TAIL]) as (q,):
            body(b.affine([(q, 1)], n - TAIL))
    elif n > lo:
        with b.nest([(lo, n)]) as (q,):
            body(q)


def _column_table(b: KernelBuilder, pl: _Planes, elem):
    """col[q] = q mod pitch (the output column of flat position q) as `elem`, for the column
    masks; written once per call, outside the threads' loop."""
    col = b.alloc([pl.oh * pl.pitch], elem)
    with b.nest([pl.oh, pl.pitch]) as (i, j):
        b.store(b.cast(b.cast(j, i64), elem), col, [b.affine([(i, pl.pitch), (j, 1)])])
    return col


def _fill_planes(b: KernelBuilder, conv, pl: _Planes, scratch, xf, nn, slot, gb,
                 planes: int):
    """Block gb's phase planes for batch entry nn, into the scratch's `slot` (module
    docstring, 1.): zeros above, the input, then zeros below (after the row copies, whose last
    spill lands there). Rewritten for every block: the slot is its chunk's, and the arena is
    shared with other buffers. Columns between a phase's width and the pitch are only ever
    read by masked-out taps and stay as they are."""
    zero = b.const(0.0, conv.elem)

    def zeros(phase: int, lo: int, hi: int):
        if hi > lo:
            with b.nest([planes]) as (c,):
                at = b.index(phase)
                flat_loop(b, hi - lo, lambda q: b.store(
                    zero, scratch, [slot, c, at, b.affine([(q, 1)], lo)]))

    for phase in range(pl.phases):
        zeros(phase, 0, pl.start)
    if pl.contiguous:  # stride 1, rows as wide as the pitch: one copy
        with b.nest([planes]) as (c,):
            ch = b.affine([(gb, planes), (c, 1)])
            at = b.index(0)
            flat_loop(b, pl.h * pl.w, lambda q: b.store(
                b.load(xf, [nn, ch, q]), scratch, [slot, c, at, b.affine([(q, 1)], pl.start)]))
    else:
        _copy_rows(b, conv, pl, scratch, xf, nn, slot, gb, planes)
    for a, bb in itertools.product(range(pl.sh), range(pl.sw)):
        zeros(a * pl.sw + bb, pl.data_end[a], pl.length)


def _fill_edges(b: KernelBuilder, conv, pl: _Planes, edges: _Edges, scratch, xf, nn, slot, gb,
                planes: int):
    """The first and last rows of block gb's planes, with the zeros above and below, into the
    scratch's `slot` (`_Edges`): what the edge positions read outside x's plane."""
    zero = b.const(0.0, conv.elem)
    end = pl.start + pl.h * pl.w  # the plane position after the input's last pixel
    with b.nest([planes]) as (c,):
        ch = b.affine([(gb, planes), (c, 1)])
        at = b.index(0)

        def copy(lo, hi, to):  # plane positions [lo, hi) of the input to scratch lo + to
            flat_loop(b, hi, lambda f: b.store(
                b.load(xf, [nn, ch, b.affine([(f, 1)], -pl.start)]), scratch,
                [slot, c, at, b.affine([(f, 1)], to)]), lo=lo)

        def zeros(lo, hi, to):
            flat_loop(b, hi, lambda f: b.store(
                zero, scratch, [slot, c, at, b.affine([(f, 1)], to)]), lo=lo)

        zeros(0, pl.start, 0)
        copy(pl.start, edges.head, 0)
        tail = edges.head - edges.tail_start
        copy(edges.tail_start, end, tail)
        zeros(max(end, edges.tail_start), pl.length, tail)


def _copy_rows(b: KernelBuilder, conv, pl: _Planes, scratch, xf, nn, slot, gb,
               planes: int):
    """The input rows into their phase planes: `width` (a multiple of ROW_COPY) columns per
    row for the first rows of every row phase, in one nest (input row i * sh + a, column
    j * sw + b to plane (a, b), row i, column j: the excess of a row lands in the next row's
    slots, rewritten by that row after it), then exactly, per row phase, the rows whose excess
    would read past the input plane or write past the scratch plane."""
    width = pl.width
    wide = min(_wide_rows(pl, a, width) for a in range(pl.sh))
    if wide:
        with b.nest([planes, pl.sh, wide, width]) as (c, a, i, j):
            ch = b.affine([(gb, planes), (c, 1)])
            at = b.affine([(i, pl.pitch), (j, 1)], pl.start)
            for bb in range(pl.sw):
                v = b.load(xf, [nn, ch, b.affine([(i, pl.sh * pl.w), (a, pl.w), (j, pl.sw)],
                                                 bb)])
                b.store(v, scratch, [slot, c, b.affine([(a, pl.sw)], bb), at])
    for a in range(pl.sh):
        if wide >= pl.hq[a]:
            continue
        for phases, (lo, hi) in phase_pieces([(0, wq) for wq in pl.wq]):
            with b.nest([planes, (wide, pl.hq[a]), (lo, hi)]) as (c, i, j):
                ch = b.affine([(gb, planes), (c, 1)])
                row = b.affine([(i, pl.sh)], a)
                at = b.affine([(i, pl.pitch), (j, 1)], pl.start)
                for bb in phases:
                    v = b.load(conv.x, [nn, ch, row, b.affine([(j, pl.sw)], bb)])
                    b.store(v, scratch, [slot, c, b.index(a * pl.sw + bb), at])


def _wide_rows(pl: _Planes, a: int, width: int) -> int:
    """How many first rows of row phase a copy `width` columns and stay inside the input
    plane (reads) and the scratch plane (writes)."""
    count = 0
    for i in range(pl.hq[a]):
        last_read = (i * pl.sh + a) * pl.w + (width - 1) * pl.sw + pl.sw - 1
        last_write = pl.start + i * pl.pitch + width - 1
        if last_read >= pl.h * pl.w or last_write >= pl.length:
            break
        count = i + 1
    return count


def _weights(b: KernelBuilder, conv, oc):
    """(bias[oc] or None, {(c, kh, kw): W[oc, c, kh, kw]}), loaded before the flat loop: inside
    it, a store to the output might alias W for all LLVM knows, which kept it reloading them."""
    bias = b.load(conv.bias, [oc]) if conv.bias is not None else None
    kh, kw = conv.k_sp
    return bias, {(c, i, j): b.load(conv.w, [oc, b.index(c), b.index(i), b.index(j)])
                  for c in range(conv.cg) for i in range(kh) for j in range(kw)}


def _sum(b: KernelBuilder, conv, pl: _Planes, tap, col, bias, w, q):
    """act(bias + the taps of flat output q) (module docstring, 3.): per kernel column kw, the
    products of all input channels and kernel rows summed, then dropped by a select where
    that column is padding. The products go into the sum by fused multiply-adds (math.fma,
    one rounding each, as the GEMM micro-kernel's): a multiply and an add per tap were a
    third more vector instructions. 1 thread, AVX-512, 3x3 + Relu unless named, us: 384 x 14
    x 14 64.7 -> 46.6, 192 x 28 x 28 117 -> 93, 576 x 14 x 14 stride 2 60.9 -> 50.8, 672 x 14
    x 14 5x5 189 -> 164; planes of 56 x 56 and more, which stream from memory, 1.03-1.06x."""
    acc, column = bias, None
    for kw in range(pl.kw):
        bb, fc = pl.cols[kw]
        part = None
        for c in range(conv.cg):
            for kh in range(pl.kh):
                a, fr = pl.rows[kh]
                at = b.affine([(q, 1)], pl.offset(fr, fc))
                x = tap(c, a * pl.sw + bb, at)
                part = b.mul(x, w[c, kh, kw]) if part is None else b.fma(x, w[c, kh, kw], part)
        inside = pl.column_range(kw)
        if inside is not None:
            column = column if column is not None else b.load(col, [q])
            lo, hi = inside
            ok = b.cmpf("oge", column, b.const(lo, conv.elem)) if lo > 0 else None
            if hi < pl.ow:
                below = b.cmpf("olt", column, b.const(hi, conv.elem))
                ok = below if ok is None else b.and_(ok, below)
            part = b.select(ok, part, b.const(0.0, conv.elem))
        acc = part if acc is None else b.add_(acc, part)
    return activation(b, acc, *conv.act) if conv.act is not None else acc


# ---- strided Convs read in place ---------------------------------------------------------------

def strided_in_place(conv) -> bool:
    """Whether `strided_2d` takes the Conv: stride 2 on both axes, kernels up to 3,
    STRIDED_MIN_COLUMNS or more output columns, and an interior (outputs whose taps all fall
    inside the input, `conv_common.interior`) of at least half the plane."""
    if (tuple(conv.st) != (2, 2) or max(conv.k_sp) > 3
            or conv.out_sp[1] < STRIDED_MIN_COLUMNS):
        return False
    (r0, r1), (c0, c1) = interior(conv)
    return 2 * (r1 - r0) * (c1 - c0) >= conv.out_sp[0] * conv.out_sp[1]


def strided_2d(b: KernelBuilder, conv, out):
    """out = act(bias + conv(x, w)) for a strided 2-D direct Conv, reading x in place: the
    interior outputs (`conv_common.interior`) load their taps directly, a vector loop along
    each output row whose strided loads LLVM interleaves (wide loads and shuffles); the
    border outputs load clamped and drop what falls outside, as the phase planes do: rows of
    vertical padding multiply zeros, columns of horizontal padding drop their partial sum
    (the same bits as `direct_2d`)."""
    (r0, r1), (c0, c1) = interior(conv)
    oh, ow = conv.out_sp
    chunks = chunk_count(conv.groups, MAX_CHUNKS)
    with b.nest([conv.n, chunks, conv.groups // chunks]) as (nn, jc, ji):
        g = b.affine([(jc, conv.groups // chunks), (ji, 1)])
        with b.nest([conv.ocg]) as (o,):
            oc = b.affine([(g, conv.ocg), (o, 1)])
            bias, w = _weights(b, conv, oc)

            def output(i, j, border):
                v = _strided_sum(b, conv, nn, g, i, j, bias, w, border)
                b.store(v, out, [nn, oc, i, j])

            with b.nest([(r0, r1), (c0, c1)]) as (i, j):
                output(i, j, False)
            for rows, cols in (((0, r0), (0, ow)), ((r1, oh), (0, ow)), ((r0, r1), (0, c0)),
                               ((r0, r1), (c1, ow))):
                if rows[1] > rows[0] and cols[1] > cols[0]:
                    with b.nest([rows, cols]) as (i, j):
                        output(i, j, True)


def _strided_sum(b: KernelBuilder, conv, nn, g, i, j, bias, w, border):
    """`_sum`'s value for output (i, j), its taps read from x: per kernel column the products
    of all input channels and kernel rows, a row outside the input read as 0, a column
    outside dropping its partial sum (border outputs; interior ones read every tap in place)."""
    (sh, sw), (dh, dw), (pt, pl) = conv.st, conv.dil, conv.pads
    kh, kw = conv.k_sp
    h, wd = conv.in_sp
    zero = b.const(0.0, conv.elem)
    acc = bias
    for cw in range(kw):
        col = b.affine([(j, sw)], cw * dw - pl)
        part = None
        for c in range(conv.cg):
            ch = b.affine([(g, conv.cg)], c)
            for ch_row in range(kh):
                row = b.affine([(i, sh)], ch_row * dh - pt)
                if border:
                    x = b.load(conv.x, [nn, ch, b.clamp(row, h), b.clamp(col, wd)])
                    x = b.select(b.in_range([(row, h)]), x, zero)
                else:
                    x = b.load(conv.x, [nn, ch, row, col])
                wt = w[c, ch_row, cw]
                part = b.mul(x, wt) if part is None else b.fma(x, wt, part)
        if border:
            part = b.select(b.in_range([(col, wd)]), part, zero)
        acc = part if acc is None else b.add_(acc, part)
    return activation(b, acc, *conv.act) if conv.act is not None else acc
