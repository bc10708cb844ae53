"""Conv's GEMM schedule (conv.py's module docstring, "GEMM"): im2col + GEMM, one panel of
output rows at a time, per (batch entry, group). Each panel: the output panel set to the bias,
the panel's input patches copied into a column buffer, out += W . col with `krnl.matmul`, then
the epilogue (the activation) while the panel is in cache. The column buffer is row-major
[C/g, kernel..., panel positions] (`_panel`), or, where it pays (`_strips_pay`), written
already cut into strips of the micro-kernel's width, strip-major as matmul.in_strips lays out
a constant B (`_strip_panel`): the micro-kernel then reads each strip in place (ldb == NR)
instead of packing the panel's B on its stack in every call. Same sums in the same k order
either way: bit-identical results.
"""

from __future__ import annotations

import contextlib
import itertools
import math

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering import matmul
from compilerkit.lowering.builder import KernelBuilder
from compilerkit.lowering.conv_common import (
    COL_BYTES,
    MIN_PANEL,
    PANEL_BYTES,
    _clamp,
    _Conv,
    _copy_in,
    _even_panels,
    _finish,
    _reads_x_in_place,
    _scratch,
    _tap,
)
from compilerkit.lowering.matmul import emit_matmul, emit_strip_matmul

SUM_PANEL_BYTES = 1024 * 1024  # most output per panel of a plain GEMM with a summand
STRIP_MIN_DEPTH = 32  # fewest products per output (C/g x taps) for im2col in strips: see
# `_strips_pay`


def _panel_rows(conv: _Conv, kdim: int, col: bool) -> tuple[int, bool]:
    """(output rows (first spatial axis) per panel, whether threads may share the panels).
    Panels hold at most PANEL_BYTES of column buffer (or, for a plain GEMM, output) and never
    fewer than MIN_PANEL columns. When every panel can have its own column buffer (all of them
    together within COL_BYTES) and the rows split evenly (`_even_panels`), the panels are
    threads' work; else the largest count that fits and divides the rows evenly (no ragged
    last panel) down to half of that, or failing that the count that fits, in one serial loop
    (the threads then share each panel's product)."""
    rows, inner = conv.out_sp[0], math.prod(conv.out_sp[1:])
    per_row = (kdim if col else conv.ocg) * inner * onnx_d.numpy_dtype(conv.elem).itemsize
    fit = max(1, PANEL_BYTES // per_row, -(-MIN_PANEL // inner))
    if not col or rows * per_row <= COL_BYTES:
        even = _even_panels(rows, -(-MIN_PANEL // inner), fit)
        if even is not None and even < rows:
            return even, True
    if fit >= rows:
        return rows, False
    even = [h for h in range(fit, (fit + 1) // 2 - 1, -1) if rows % h == 0]
    return (even[0] if even else fit), False


def gemm(b: KernelBuilder, conv: _Conv, out):
    """The GEMM schedule (conv.py's module docstring): per (batch entry, group), panel by
    panel (`_panel_rows`), each in row-major or, where it pays (`_strips_pay`), in strips."""
    p = math.prod(conv.out_sp)
    hw = math.prod(conv.in_sp)
    kdim = conv.cg * math.prod(conv.k_sp)
    rows, inner = conv.out_sp[0], math.prod(conv.out_sp[1:])
    direct = _reads_x_in_place(conv)
    # A plain GEMM without an epilogue (no activation, or one its product applies,
    # `_clamp`; no summand) needs no panels: one product over all columns.
    if direct and not _epilogue(conv):
        per_panel, shared = rows, False
    elif direct and conv.summand is not None:
        # x read in place: panels are blocks of flat positions, whole strips wide
        rows, inner = p, 1
        per_panel, shared = _sum_columns(conv, b.lanes), True
    else:
        per_panel, shared = _panel_rows(conv, kdim, not direct)
    n_full, rest = divmod(rows, per_panel)
    ov = b.view(out, [conv.n, conv.oc, p])
    panels = [(count, height, first) for count, height, first in
              ((n_full, per_panel, 0), (1 if rest else 0, rest, n_full * per_panel)) if count]
    # Threads sharing the panels need a column buffer each; a serial panel loop reuses one.
    # In strips (`_strips_pay`): [slots, strips, (C/g, kernel...) x strip columns].
    # Threads share a lone panel's strip loop (its offset a constant), but not that of a
    # panel of a serial loop (the parallelize pass cannot prove its C tiles disjoint: the
    # panel's offset lies inside C's rows; each strip's rows got split among threads
    # instead, 1.9x slower at 2 threads): such a loop in strips runs as 2 chunks of panels,
    # each with its own column buffer, that threads share (as `_transposed_panels` does);
    # an odd count keeps the row-major buffer.
    strip = matmul.strip_width(conv.ocg, b.lanes) if not direct and _strips_pay(
        conv, b.lanes) else None
    if strip and not shared and any(count % 2 and count > 1 for count, _, _ in panels):
        strip = None
    chunks = 2 if strip and not shared else 1
    cols = []
    for count, height, _ in panels:
        slots = count if shared else chunks if count > 1 else 1
        if direct:
            cols.append(None)
        elif strip:
            cols.append(b.alloc([slots, -(-height * inner // strip), kdim * strip], conv.elem))
        else:
            cols.append(b.alloc([slots, conv.cg] + conv.k_sp + [height] + conv.out_sp[1:],
                                conv.elem))
    scratch = None if direct else _scratch(b, conv)
    with b.nest([conv.n, conv.groups]) as (nn, g):
        if scratch is not None:
            _copy_in(b, conv, scratch, nn, g)
        for (count, height, first), col in zip(panels, cols, strict=True):
            parts = chunks if count > 1 else 1
            with b.nest([parts, count // parts] if parts > 1 else [count]) as ivs:
                if parts > 1:  # chunk ivs[0], its panel ivs[1]; the chunk's column buffer
                    jp, slot = b.affine([(ivs[0], count // parts), (ivs[1], 1)]), ivs[0]
                elif strip and count == 1:  # a lone panel: its offsets are constants
                    jp, slot = b.index(0), None
                else:
                    jp = ivs[0]
                    slot = jp if shared else None
                # this panel: output rows first + jp * height ..., columns q0 .. q0 + height*inner
                q0 = b.affine([(jp, height * inner)], first * inner)
                _panel(b, conv, ov, col, scratch, nn, g, slot, jp, height * inner, first, q0,
                       kdim, p, hw, direct, strip)


def _panel(b, conv, ov, col, scratch, nn, g, slot, jp, width, first, q0, kdim, p, hw, direct,
           strip=None):
    """One panel of `width` output positions from q0: bias, im2col into column buffer `slot`
    (None: the one buffer), product, epilogue. `strip`: the column buffer is in strips of
    that many columns (`_strip_panel`)."""
    height = width // math.prod(conv.out_sp[1:])  # output rows (im2col's panels are rows)
    # 1. the output panel starts as the bias: the product starts its tiles from it (the
    # micro-kernel fills each tile just before it sums into it, in cache), or, for a grouped
    # Conv's bias (rows g * C/g + o), a fill of the panel here
    start = _start(conv)
    if start is None:
        with b.nest([conv.ocg, width]) as (o, q):
            oc = b.affine([(g, conv.ocg), (o, 1)])
            b.store(b.load(conv.bias, [oc]), ov, [nn, oc, b.affine([(q0, 1), (q, 1)])])
    if strip is not None:
        # 2-3. im2col in strips, then the product strip by strip
        _strip_panel(b, conv, ov, col, scratch, nn, g, slot, jp, height, first, q0, kdim, p,
                     strip)
    else:
        # 2. its input patches into the column buffer
        if direct:
            src, ldb = conv.x, hw
            b_off = b.affine([(nn, conv.c_in * hw), (g, conv.cg * hw), (q0, 1)])
        else:
            r = conv.r
            at = b.index(0) if slot is None else slot
            with b.nest([conv.cg] + conv.k_sp + [height] + conv.out_sp[1:]) as ivs:
                c, ks, os_ = ivs[0], ivs[1:1 + r], ivs[1 + r:]
                spatial = []
                for d, (o, kk) in enumerate(zip(os_, ks, strict=True)):
                    terms = [(o, conv.st[d]), (kk, conv.dil[d])]
                    const = 0 if scratch is not None else -conv.pads[d]
                    if d == 0:  # the panel's rows start at first + jp * height
                        terms.append((jp, height * conv.st[0]))
                        const += first * conv.st[0]
                    spatial.append(b.affine(terms, const))
                b.store(_tap(b, conv, scratch, nn, g, c, spatial), col, [at] + ivs)
            src, ldb = col, width
            b_off = b.index(0) if slot is None else b.affine([(slot, kdim * width)])
        # 3. out[oc, q0 + j] += W[oc, :] . col[:, j]
        a_off = b.affine([(g, conv.ocg * kdim)])
        c_off = b.affine([(nn, conv.oc * p), (g, conv.ocg * p), (q0, 1)])
        emit_matmul(b, conv.w, src, ov, conv.ocg, width, kdim, [a_off, b_off, c_off],
                    (kdim, 1), ldb, p, *_start_args(conv))
    # 4. the epilogue, on the panel just computed, unless the product applied it as it
    # stored (a Relu or Clip: the product's clamp)
    if _epilogue(conv):
        with b.nest([conv.ocg, width]) as (o, q):
            at = [nn, b.affine([(g, conv.ocg), (o, 1)]), b.affine([(q0, 1), (q, 1)])]
            b.store(_finish(b, conv, b.load(ov, at), at), ov, at)


def sum_pays(conv: _Conv, lanes: int) -> bool:
    """Whether the GEMM schedule adds a summand (fuse-conv's residual sum) in its panels'
    epilogue, while each panel is in cache: always where it has panels anyway (im2col); a
    plain GEMM, otherwise one product over all columns, where its positions split into
    blocks of whole strips (`_sum_columns`)."""
    return not _reads_x_in_place(conv) or _sum_columns(conv, lanes) is not None


def _sum_columns(conv: _Conv, lanes: int) -> int | None:
    """Positions per panel for a plain GEMM (x read in place) with a summand: whole strips of
    the micro-kernel's width, at least 2 panels (threads share them), at most SUM_PANEL_BYTES
    of output each (the epilogue reads it back with as much summand), preferring an even
    count, then the widest; None if the positions make fewer than 2 such panels. Panels of
    whole output rows had a ragged strip each: 1 thread, 128 -> 512 1x1 at 28 x 28 in panels
    of 7 rows (196 columns) 0.90 -> 0.99 ms, more than ResNet-50's Add saved (0.16 ms)."""
    p = math.prod(conv.out_sp)
    strip = matmul.strip_width(conv.ocg, lanes)
    most = SUM_PANEL_BYTES // (conv.ocg * onnx_d.numpy_dtype(conv.elem).itemsize)
    best = None
    for width in range(strip, min(most, p // 2) + 1, strip):
        if width < MIN_PANEL:
            continue
        key = ((p // width) % 2 == 0, width)
        if best is None or key > best[0]:
            best = (key, width)
    return None if best is None else best[1]


def _epilogue(conv: _Conv) -> bool:
    """Whether a panel needs an epilogue pass: a summand, or an activation the product's
    clamp does not apply."""
    return conv.summand is not None or (conv.act is not None and _clamp(conv) is None)


# ---- im2col in strips ---------------------------------------------------------------------------

def _strips_pay(conv: _Conv, lanes: int) -> bool:
    """Whether `gemm`'s panels write their column buffer in strips (`_strip_panel`): f32 on a
    target with vectors (the strips are the f32 micro-kernel's NR; the GPU keeps B whole), at
    least matmul.STRIP_MIN_ROWS output channels per group (fewer: the micro-kernel reads a
    row-major B in place anyway, and one call per 32 columns costs more than it saves) and at
    least STRIP_MIN_DEPTH products per output (shallower: even at best). 1 thread, AVX-512 host,
    best of interleaved calls, ms row-major -> strips: 7x7 stride-2 stems 3 -> 64 at 224 x 224
    2.20 -> 1.89 (in DenseNet-121 2.89 -> 2.21, ResNet-50 2.99 -> 2.36); ResNet-50's 3x3 128 ->
    128 at 28 x 28 1.79 -> 1.65, 1x1 stride 2 256 -> 512 1.53 -> 1.44, 256 -> 128 0.50 -> 0.475;
    SqueezeNet's 3x3 16 -> 64 at 55 x 55 0.54 -> 0.48, 32 -> 128 at 27 x 27 0.46 -> 0.45; 3D
    U-Net 3x3x3 32 -> 32 at 32^3 23.9 -> 18.9, 256 -> 128 at 16^3 72.4 -> 52.9, 32 -> 32 at 64^3
    207 -> 185, 512 -> 256 at 8^3 30.2 -> 28.8; 24 -> 24 even (at 128 x 128 2.74 -> 2.21 in one
    run, 2.79 -> 2.85 in another; at 56 x 56 0.66 -> 0.68). 2 threads: the stem 1.24 -> 1.11,
    128 -> 128 at 28 x 28 1.01 -> 0.95, U-Net 32 -> 32 at 32^3 14.4 -> 9.2, 256 -> 128 at 16^3
    41.3 -> 25.9. Slower with few channels: 8 -> 8 at 128 x 128 0.42 -> 0.55, group 8 of 8 -> 8
    at 56 x 56 0.46 -> 0.52; 16 -> 16 at 56 x 56 0.195 -> 0.203 (but 4 -> 16 3x3x3 at 64^3, rows
    4096 floats apart, 17.6 -> 14.5). Even with shallow sums: 3 -> 64 3x3 stride 2 (K = 27) 0.61
    -> 0.62 (in SqueezeNet 0.61 -> 0.65), 3 -> 32 0.37 -> 0.36 (in MobileNetV2 0.36 -> 0.38, in
    EfficientNet-B0 0.56 -> 0.54), K = 16 0.101 -> 0.102, K = 48 0.26 -> 0.25. The transposed
    schedules stay faster where they take a Conv (`_transposed_pays`; strips with the GEMM
    panels instead: 128 -> 32 at 14 x 14 0.16 -> 0.22, 56 x 56 2.75 -> 2.71; 256 -> 256 at 14 x
    14 1.63 -> 1.98, 512 -> 512 at 7 x 7 1.80 -> 2.28)."""
    return (lanes > 1 and onnx_d.numpy_dtype(conv.elem).itemsize == 4
            and conv.ocg >= matmul.STRIP_MIN_ROWS
            and conv.cg * math.prod(conv.k_sp) >= STRIP_MIN_DEPTH)


def _strip_runs(sp: list[int], lines, strip: int):
    """Runs of output positions for the strip im2col: `lines` (leading coordinates of lines of
    the last axis of a grid `sp`, in order, starting at flat position 0) cut where a line or
    a strip ends: (strip s, column j0 in it, the line's leading coordinates, first position
    i0 on the last axis, length n). Each run is consecutive in the strip and in the input."""
    last, runs, q = sp[-1], [], 0
    for lead in lines:
        for i0 in range(last):
            s, j0 = divmod(q + i0, strip)
            if i0 == 0 or j0 == 0:
                runs.append([s, j0, lead, i0, 0])
            runs[-1][4] += 1
        q += last
    return runs


def _start(conv) -> str | None:
    """krnl.matmul's `start` for a panel's product: "zero" without a bias, "bias" with one
    the product's rows index (one group); None (the panel filled first) for a grouped bias."""
    if conv.bias is None:
        return "zero"
    return "bias" if conv.groups == 1 else None


def _start_args(conv) -> tuple:
    """emit_matmul's start, bias and clamp for a panel's product."""
    start = _start(conv)
    return start, (conv.bias if start == "bias" else None), _clamp(conv) or (None, None)


def _strip_panel(b, conv, ov, col, scratch, nn, g, slot, jp, height, first, q0, kdim, p,
                 strip):
    """im2col and product of one GEMM panel (`_panel`) with the column buffer cut into strips
    of `strip` columns, strip-major (col[slot, s, (c k...) * strip + j] = B[c k..., s *
    strip + j], as matmul.in_strips lays out a constant B): the micro-kernel reads each full
    strip in place (ldb == NR) instead of packing the panel's B on its stack in every call.
    Each (c, k...) row of the buffer is written as runs (`_strip_runs`) consecutive in both
    the strip and an input line, so they vectorise as the row-major im2col does. Lines
    repeat their cuts every `period` lines (period x line length = whole strips): when the
    period divides the lines of the second-to-last axis, a loop over groups of `period`
    lines holds the runs of one group (s offset by the group's whole strips; spelling out
    all of a panel's runs made 8-channel Convs at 112 x 112 1.11x slower than row-major,
    grouped 1.03x), else the runs of the whole panel are spelled out. The last, narrower
    strip (when the panel is not whole strips) is one product of that width with row stride
    `strip`: the kernel packs it zero-padded, as it packs the narrow strip of a row-major B,
    and C keeps its other columns. Same sums in the same k order as `_panel`: same bits."""
    width = height * math.prod(conv.out_sp[1:])
    r = conv.r
    sp = [height] + conv.out_sp[1:]
    period = strip // math.gcd(sp[-1], strip)
    grouped = r >= 2 and sp[-2] % period == 0
    if grouped:  # loops over sp[:-2] and groups of `period` lines; runs of one group
        loops = sp[:-2] + [sp[-2] // period]
        lines = [(0,) * (r - 2) + (lp,) for lp in range(period)]
    else:
        loops = []
        lines = list(itertools.product(*(range(n) for n in sp[:-1])))
    at = b.index(0) if slot is None else slot
    with b.nest([conv.cg] + conv.k_sp) as ivs:
        c, ks = ivs[0], ivs[1:]
        with b.nest(loops) if loops else contextlib.nullcontext([]) as outer:
            # the group's leading coordinates ((loop, coefficient) terms per leading axis)
            # and its first strip: its first line times the line length, whole strips
            lead_terms = [[] for _ in range(r - 1)]
            if grouped:
                lead_terms = [[(iv, 1)] for iv in outer[:-1]] + [[(outer[-1], period)]]
            s_terms = [(iv, k * math.prod(sp[d + 1:]) // strip)
                       for d, terms in enumerate(lead_terms) for iv, k in terms]
            for s, j0, lead, i0, n in _strip_runs(sp, lines, strip):
                with b.nest([n]) as (i,):
                    spatial = []
                    for d in range(r):
                        if d == r - 1:
                            terms, pos = [(i, conv.st[d])], i0
                        else:
                            terms = [(iv, k * conv.st[d]) for iv, k in lead_terms[d]]
                            pos = lead[d]
                        const = pos * conv.st[d] - (0 if scratch is not None else conv.pads[d])
                        if d == 0:  # the panel's rows start at first + jp * height
                            terms.append((jp, height * conv.st[0]))
                            const += first * conv.st[0]
                        spatial.append(b.affine(terms + [(ks[d], conv.dil[d])], const))
                    # row (c, k...) of strip s, column j0 + i
                    row = [(c, kdim // conv.cg * strip)] + [
                        (kk, math.prod(conv.k_sp[d + 1:]) * strip) for d, kk in enumerate(ks)]
                    b.store(_tap(b, conv, scratch, nn, g, c, spatial), col,
                            [at, b.affine(s_terms, s), b.affine(row + [(i, 1)], j0)])
    nfull, tail = divmod(width, strip)
    a_off = b.affine([(g, conv.ocg * kdim)])
    c_off = b.affine([(nn, conv.oc * p), (g, conv.ocg * p), (q0, 1)])
    base = b.index(0) if slot is None else b.affine([(slot, -(-width // strip) * kdim * strip)])
    if nfull:
        emit_strip_matmul(b, conv.w, col, ov, conv.ocg, nfull * strip, kdim,
                          [a_off, base, c_off], (kdim, 1), p, strip, *_start_args(conv))
    if tail:
        emit_matmul(b, conv.w, col, ov, conv.ocg, tail, kdim,
                    [a_off, b.affine([(base, 1)], nfull * kdim * strip),
                     b.affine([(c_off, 1)], nfull * strip)], (kdim, 1), strip, p,
                    *_start_args(conv))
