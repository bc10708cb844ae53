"""Lowering of Conv (1-D/2-D/3-D: pads, auto_pad, strides, dilations, groups, bias, and the
activation `fuse-conv` attached, onnx_passes/fuse_conv.py) and ConvTranspose to Kernel IR.

Conv takes one of three schedules, all visible in the Kernel IR:

- direct (grouped and depthwise Conv, C/g * prod(kernel) <= MAX_TAPS): one nest per
  (batch entry, group) over (output channel of the group, output positions), the last output
  axis innermost; its body sums all C/g * prod(kernel) taps, unrolled, into one value, adds the
  bias, applies the activation and stores once. The innermost loop walks an output row, whose
  loads are consecutive (stride 1) or evenly spaced (stride s), so LLVM vectorises it. A padded
  Conv first copies each group's input planes into a zero-bordered scratch buffer (the border
  is zeroed once per call), so the taps read without guards; no im2col buffer. Stride-1 2-D
  Convs with rows narrower than FLAT_WIDTH (MobileNet's 14 and 7) loop over flat plane
  positions instead, so the vector loop is not mostly remainder (`_direct_flat`).
- GEMM (everything else): per (batch entry, group, panel of output rows): the output panel is
  set to the bias, the input patches of the panel are copied into a column buffer
  [C/g, kernel..., rows, rest of out spatial] (from the zero-bordered scratch planes when the
  Conv is padded, as above), then out[oc, p] += W[oc, :] . col[:, p] with `krnl.matmul`
  (matmul.py, which -O3 tiles), then the epilogue applies the activation to the panel while it
  is still in cache. Panels hold about PANEL_BYTES of column buffer and output, as
  onnxruntime's MLAS convolution works through its output in cache-sized pieces. A 1x1,
  stride-1, unpadded Conv reads the input directly as the B matrix (a plain GEMM, no copy);
  a strided 1x1 Conv copies only the sampled pixels.
- shifted GEMMs (stride 1, 2-D, few channels on large planes: `_shifted_pays`): one GEMM per
  kernel tap whose B is the (padded) input planes read at the tap's offset, accumulated into
  a row buffer that the epilogue copies out; no column buffer at all.

ConvTranspose is a scatter: each input element adds its products into the output window.
"""

from __future__ import annotations

import itertools
import math

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, shape
from compilerkit.lowering.elementwise import activation
from compilerkit.lowering.matmul import emit_matmul, fill
from compilerkit.onnx_passes.fuse_conv import conv_activation

MAX_TAPS = 64  # most products one direct-convolution body sums (unrolled)
# Column buffer + output of one GEMM panel. Each panel starts the thread team three times (bias
# fill, matmul, epilogue), so fewer, larger panels scale better: 2 MiB (L3-resident; this
# machine's L2 is 512 KiB) measured no slower at 1 thread than 512 KiB and cut thread start-ups.
PANEL_BYTES = 2 * 1024 * 1024
MIN_PANEL = 64  # fewest output columns of a GEMM panel (narrower ones starve the micro-kernel)
FLAT_WIDTH = 32  # stride-1 2-D direct Convs with narrower output rows run flattened
SHIFT_CHANNELS = (16, 64)  # input channels (per group) for the shifted-GEMM schedule ...
SHIFT_MIN_WIDTH = 48  # ... and the narrowest output rows it takes

def _output_with_bias(b, out_dims, elem, bias):
    """The output buffer, holding the bias broadcast over channels (or zeros): both Conv and
    ConvTranspose then only accumulate into it."""
    out = b.alloc(out_dims, elem)
    if bias is not None:
        with b.nest(out_dims) as ivs:
            b.store(b.load(bias, [ivs[1]]), out, ivs)
    else:
        fill(b, out, 0.0)
    return out

def conv_geometry(op, in_spatial, k_spatial, out_spatial, transpose=False):
    """(strides, dilations, begin pads) with auto_pad resolved."""
    r = len(in_spatial)
    st = onnx_d.get_attr(op, "strides", None) or [1] * r
    dil = onnx_d.get_attr(op, "dilations", None) or [1] * r
    pads = onnx_d.get_attr(op, "pads", None) or [0] * (2 * r)
    auto = onnx_d.get_attr(op, "auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        # ONNX: SAME_UPPER puts the odd padding element at the end, for Conv and ConvTranspose
        # alike (onnxruntime follows; older runtimes swapped it for ConvTranspose).
        out_pad = onnx_d.get_attr(op, "output_padding", None) or [0] * r
        begin = []
        for i in range(r):
            if transpose:
                total = max(st[i] * (in_spatial[i] - 1) + out_pad[i]
                            + (k_spatial[i] - 1) * dil[i] + 1 - out_spatial[i], 0)
            else:
                total = max((out_spatial[i] - 1) * st[i] + (k_spatial[i] - 1) * dil[i] + 1
                            - in_spatial[i], 0)
            begin.append(total // 2 if auto == "SAME_UPPER" else total - total // 2)
        pads = begin
    elif transpose and onnx_d.get_attr(op, "output_shape", None):
        out_pad = onnx_d.get_attr(op, "output_padding", None) or [0] * r
        pads = []
        for i in range(r):
            total = max(st[i] * (in_spatial[i] - 1) + out_pad[i]
                        + (k_spatial[i] - 1) * dil[i] + 1 - out_spatial[i], 0)
            pads.append(total - total // 2)
    elif auto == "VALID":
        pads = [0] * r
    return list(st), list(dil), list(pads[:r])


def lower_conv(b: KernelBuilder, op, ins):
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    xs, ws = shape(x), shape(w)
    out_dims = onnx_d.shape_of(op.results[0])
    in_sp, k_sp, out_sp = list(xs[2:]), list(ws[2:]), list(out_dims[2:])
    groups = onnx_d.get_attr(op, "group", 1)
    st, dil, pads = conv_geometry(op, in_sp, k_sp, out_sp)
    conv = _Conv(x, w, bias, out_dims, groups, st, dil, pads, conv_activation(op))
    out = b.alloc(out_dims, op.results[0].type.element_type)
    if groups > 1 and conv.cg * math.prod(k_sp) <= MAX_TAPS:
        _direct(b, conv, out)
    elif _shifted_pays(conv):
        _shifted_gemm(b, conv, out)
    else:
        _gemm(b, conv, out)
    return [out]


class _Conv:
    """The sizes of one Conv, named once for every schedule."""

    def __init__(self, x, w, bias, out_dims, groups, st, dil, pads, act):
        xs, ws = shape(x), shape(w)
        self.x, self.w, self.bias, self.act = x, w, bias, act
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


def _finish(b, conv, v):
    """The epilogue of one output value: the fused activation, if any."""
    return activation(b, v, *conv.act) if conv.act is not None else v


# ---- direct convolution (grouped, depthwise) ---------------------------------------------------

def _scratch(b: KernelBuilder, conv: _Conv):
    """A zeroed buffer [C/g, padded spatial...] for one group's input planes when some tap
    falls into the padding (else None): copied into its interior per (batch entry, group) by
    `_copy_in`, it lets every tap read without a guard. Zeroed once per call: the copies
    write only the interior, so the border stays 0."""
    if not any(conv.guarded(d) for d in range(conv.r)):
        return None
    ext = [max(conv.pads[d] + conv.in_sp[d], conv.reach(d)) for d in range(conv.r)]
    scratch = b.alloc([conv.cg] + ext, conv.elem)
    fill(b, scratch, 0.0)
    return scratch


def _copy_in(b: KernelBuilder, conv: _Conv, scratch, nn, g):
    with b.nest([conv.cg] + conv.in_sp) as ivs:
        ch = b.affine([(g, conv.cg), (ivs[0], 1)])
        v = b.load(conv.x, [nn, ch] + ivs[1:])
        at = [b.affine([(i, 1)], conv.pads[d]) for d, i in enumerate(ivs[1:])]
        b.store(v, scratch, [ivs[0]] + at)


def _tap(b: KernelBuilder, conv: _Conv, scratch, nn, g, c, at):
    """Input channel c of group g at spatial positions `at`, given in padded coordinates
    (o * stride + k * dilation): from the scratch planes, or from x when nothing is padded."""
    if scratch is not None:
        return b.load(scratch, [c] + at)
    ch = b.affine([(g, conv.cg), (c, 1)])
    return b.load(conv.x, [nn, ch] + at)


def _sum_taps(b: KernelBuilder, conv: _Conv, oc, tap):
    """bias[oc] + sum over input channels c and kernel taps k of tap(c, k) * W[oc, c, k...],
    unrolled in (c, k) order, then the fused activation (exp and tanh are inlined, branch-free
    math library code, so the tap loop still vectorises): one output value."""
    acc = b.load(conv.bias, [oc]) if conv.bias is not None else None
    for c in range(conv.cg):
        cc = b.index(c)
        for ks in itertools.product(*(range(k) for k in conv.k_sp)):
            prod = b.mul(tap(cc, ks), b.load(conv.w, [oc, cc] + [b.index(k) for k in ks]))
            acc = prod if acc is None else b.add_(acc, prod)
    return _finish(b, conv, acc)


def _direct(b: KernelBuilder, conv: _Conv, out):
    scratch = _scratch(b, conv)
    padded = scratch is not None
    if conv.r == 2 and conv.st == [1, 1] and conv.out_sp[1] < FLAT_WIDTH:
        return _direct_flat(b, conv, out, scratch)
    with b.nest([conv.n, conv.groups]) as (nn, g):
        if padded:
            _copy_in(b, conv, scratch, nn, g)
        with b.nest([conv.ocg] + conv.out_sp) as ivs:
            o, pos = ivs[0], ivs[1:]
            oc = b.affine([(g, conv.ocg), (o, 1)])

            def tap(cc, ks):
                # position o * s + k * d, less the padding when x is read directly
                at = [b.affine([(p, conv.st[d])],
                               ks[d] * conv.dil[d] - (0 if padded else conv.pads[d]))
                      for d, p in enumerate(pos)]
                return _tap(b, conv, scratch, nn, g, cc, at)

            b.store(_sum_taps(b, conv, oc, tap), out, [nn, oc] + pos)


def _direct_flat(b: KernelBuilder, conv: _Conv, out, scratch):
    """Stride-1 2-D direct Conv with narrow output rows (7 or 14 wide: a vector loop along one
    row would be mostly remainder). Row-major planes make output (oh, ow) and tap (kh, kw) read
    flat position q + kh*dh*pitch + kw*dw, q = oh * pitch + ow, for the input's row pitch, so
    one loop over q in [0, (OH - 1) * pitch + OW) computes every output, plus pitch - OW
    throw-away values per row, into a row buffer; a copy then keeps the OW real ones per row."""
    oh, ow = conv.out_sp
    rows, pitch = (shape(scratch)[1:] if scratch is not None else conv.in_sp)
    span = (oh - 1) * pitch + ow
    ybuf = b.alloc([conv.ocg, span], conv.elem)
    src = (b.view(scratch, [conv.cg, rows * pitch]) if scratch is not None
           else b.view(conv.x, [conv.n, conv.c_in, rows * pitch]))
    with b.nest([conv.n, conv.groups]) as (nn, g):
        if scratch is not None:
            _copy_in(b, conv, scratch, nn, g)
        with b.nest([conv.ocg, span]) as (o, q):
            oc = b.affine([(g, conv.ocg), (o, 1)])

            def tap(cc, ks):
                at = b.affine([(q, 1)], ks[0] * conv.dil[0] * pitch + ks[1] * conv.dil[1])
                if scratch is not None:
                    return b.load(src, [cc, at])
                return b.load(src, [nn, b.affine([(g, conv.cg), (cc, 1)]), at])

            b.store(_sum_taps(b, conv, oc, tap), ybuf, [o, q])
        with b.nest([conv.ocg, oh, ow]) as (o, i, j):
            b.store(b.load(ybuf, [o, b.affine([(i, pitch), (j, 1)])]), out,
                    [nn, b.affine([(g, conv.ocg), (o, 1)]), i, j])


# ---- stride-1 Conv as a sum of shifted GEMMs -------------------------------------------------

def _shifted_pays(conv: _Conv) -> bool:
    """Stride-1 2-D Convs with several taps over large planes of few channels (ResNet's 3x3 at
    56 x 56 x 64) run as one GEMM per tap, without im2col: there the column buffer (9 x the
    input) costs more than re-reading the output once per tap. With more channels or smaller
    planes, im2col measured faster (128 x 28 x 28: 3.5 vs 4.0 ms; 256 x 14 x 14: 3.4 vs 5.6)."""
    if conv.r != 2 or conv.st != [1, 1] or math.prod(conv.k_sp) == 1:
        return False
    return SHIFT_CHANNELS[0] <= conv.cg <= SHIFT_CHANNELS[1] and conv.out_sp[1] >= SHIFT_MIN_WIDTH


def _shifted_gemm(b: KernelBuilder, conv: _Conv, out):
    """out = sum over taps (kh, kw) of W[:, :, kh, kw] . (input planes shifted by the tap).
    With the (padded) input planes row-major, output (oh, ow) and tap (kh, kw) read flat
    position q + kh*dh*pitch + kw*dw of each channel's plane, q = oh * pitch + ow: so for one
    tap, the products over all outputs are one GEMM whose B is the planes themselves at that
    offset (K = input channels, row stride = one plane), no im2col copy. The results go to a
    row buffer over q in [0, (OH - 1) * pitch + OW) (pitch - OW throw-away values per row),
    which starts as the bias; the epilogue then copies the real OW per row out, applying the
    activation."""
    scratch = _scratch(b, conv)
    oh, ow = conv.out_sp
    rows, pitch = (shape(scratch)[1:] if scratch is not None else conv.in_sp)
    plane = rows * pitch
    span = (oh - 1) * pitch + ow
    kk = math.prod(conv.k_sp)
    ybuf = b.alloc([conv.ocg, span], conv.elem)
    with b.nest([conv.n, conv.groups]) as (nn, g):
        if scratch is not None:
            _copy_in(b, conv, scratch, nn, g)
            src, base = scratch, []
        else:
            src, base = conv.x, [(nn, conv.c_in * plane), (g, conv.cg * plane)]
        with b.nest([conv.ocg, span]) as (o, q):
            oc = b.affine([(g, conv.ocg), (o, 1)])
            v = b.load(conv.bias, [oc]) if conv.bias is not None else b.const(0.0, conv.elem)
            b.store(v, ybuf, [o, q])
        for t, (kh, kw) in enumerate(itertools.product(*(range(k) for k in conv.k_sp))):
            a_off = b.affine([(g, conv.ocg * conv.cg * kk)], t)
            b_off = b.affine(base, kh * conv.dil[0] * pitch + kw * conv.dil[1])
            emit_matmul(b, conv.w, src, ybuf, conv.ocg, span, conv.cg,
                        [a_off, b_off, b.index(0)], (conv.cg * kk, kk), plane, span)
        with b.nest([conv.ocg, oh, ow]) as (o, i, j):
            v = b.load(ybuf, [o, b.affine([(i, pitch), (j, 1)])])
            oc = b.affine([(g, conv.ocg), (o, 1)])
            b.store(_finish(b, conv, v), out, [nn, oc, i, j])


# ---- im2col + GEMM, panel by panel -------------------------------------------------------------

def _panel_rows(conv: _Conv, kdim: int, col: bool) -> int:
    """Output rows (first spatial axis) per panel. All rows when the column buffer (or, for a
    plain GEMM, the output) fits in PANEL_BYTES; else the largest row count that fits and
    divides the rows evenly (no ragged last panel) down to half of that, or failing that the
    count that fits; never fewer than MIN_PANEL columns."""
    rows, inner = conv.out_sp[0], math.prod(conv.out_sp[1:])
    per_row = (kdim if col else conv.ocg) * inner * onnx_d.numpy_dtype(conv.elem).itemsize
    fit = max(1, PANEL_BYTES // per_row, -(-MIN_PANEL // inner))
    if fit >= rows:
        return rows
    even = [h for h in range(fit, (fit + 1) // 2 - 1, -1) if rows % h == 0]
    return even[0] if even else fit


def _gemm(b: KernelBuilder, conv: _Conv, out):
    r = conv.r
    p = math.prod(conv.out_sp)
    hw = math.prod(conv.in_sp)
    kdim = conv.cg * math.prod(conv.k_sp)
    rows, inner = conv.out_sp[0], math.prod(conv.out_sp[1:])
    direct = all(k == 1 for k in conv.k_sp) and all(s == 1 for s in conv.st) and not any(
        conv.pads) and all(conv.reach(d) <= conv.in_sp[d] for d in range(r))
    # A plain GEMM without an activation needs no panels: one product over all columns.
    per_panel = rows if direct and conv.act is None else _panel_rows(conv, kdim, not direct)
    n_full, rest = divmod(rows, per_panel)
    ov = b.view(out, [conv.n, conv.oc, p])
    panels = [(count, height, first) for count, height, first in
              ((n_full, per_panel, 0), (1 if rest else 0, rest, n_full * per_panel)) if count]
    cols = [None if direct else b.alloc([conv.cg] + conv.k_sp + [height] + conv.out_sp[1:],
                                        conv.elem) for _, height, _ in panels]
    scratch = None if direct else _scratch(b, conv)
    with b.nest([conv.n, conv.groups]) as (nn, g):
        if scratch is not None:
            _copy_in(b, conv, scratch, nn, g)
        for (count, height, first), col in zip(panels, cols, strict=True):
            with b.nest([count]) as (jp,):
                # this panel: output rows first + jp * height ..., columns q0 .. q0 + height*inner
                q0 = b.affine([(jp, height * inner)], first * inner)
                _panel(b, conv, ov, col, scratch, nn, g, jp, height, first, q0, kdim, p, hw,
                       direct)


def _panel(b, conv, ov, col, scratch, nn, g, jp, height, first, q0, kdim, p, hw, direct):
    width = height * math.prod(conv.out_sp[1:])
    # 1. the output panel starts as the bias
    with b.nest([conv.ocg, width]) as (o, q):
        oc = b.affine([(g, conv.ocg), (o, 1)])
        v = b.load(conv.bias, [oc]) if conv.bias is not None else b.const(0.0, conv.elem)
        b.store(v, ov, [nn, oc, b.affine([(q0, 1), (q, 1)])])
    # 2. its input patches into the column buffer
    if direct:
        src, b_off, ldb = conv.x, b.affine([(nn, conv.c_in * hw), (g, conv.cg * hw), (q0, 1)]), hw
    else:
        r = conv.r
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
            b.store(_tap(b, conv, scratch, nn, g, c, spatial), col, ivs)
        src, b_off, ldb = col, b.index(0), width
    # 3. out[oc, q0 + j] += W[oc, :] . col[:, j]
    a_off = b.affine([(g, conv.ocg * kdim)])
    c_off = b.affine([(nn, conv.oc * p), (g, conv.ocg * p), (q0, 1)])
    emit_matmul(b, conv.w, src, ov, conv.ocg, width, kdim, [a_off, b_off, c_off], (kdim, 1),
                ldb, p)
    # 4. the epilogue, on the panel just computed
    if conv.act is not None:
        with b.nest([conv.ocg, width]) as (o, q):
            at = [nn, b.affine([(g, conv.ocg), (o, 1)]), b.affine([(q0, 1), (q, 1)])]
            b.store(_finish(b, conv, b.load(ov, at)), ov, at)


def lower_conv_transpose(b: KernelBuilder, op, ins):
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    xs, ws = shape(x), shape(w)
    out_dims = onnx_d.shape_of(op.results[0])
    groups = onnx_d.get_attr(op, "group", 1)
    c_in, cg_out, k_sp = xs[1], ws[1], list(ws[2:])
    cg_in = c_in // groups
    r = len(k_sp)
    st, dil, pads = conv_geometry(op, list(xs[2:]), k_sp, list(out_dims[2:]), transpose=True)
    elem = op.results[0].type.element_type
    out = _output_with_bias(b, out_dims, elem, bias)
    # out[n, g*cg_out + co, i*s + k*d - pad] += x[n, g*cg_in + ci, i] * w[g*cg_in + ci, co, k]
    with b.nest([xs[0], groups, cg_in, cg_out] + list(xs[2:]) + k_sp) as ivs:
        nn, g, ci, co = ivs[:4]
        isp, ks = ivs[4:4 + r], ivs[4 + r:]
        cin = b.affine([(g, cg_in), (ci, 1)])
        cout = b.affine([(g, cg_out), (co, 1)])
        osp = [b.affine([(i, st[d]), (kk, dil[d])], -pads[d])
               for d, (i, kk) in enumerate(zip(isp, ks, strict=True))]
        prod = b.mul(b.load(x, [nn, cin] + isp), b.load(w, [cin, co] + ks))
        inside = b.in_range(list(zip(osp, out_dims[2:], strict=True)))
        safe = [b.clamp(o, d) for o, d in zip(osp, out_dims[2:], strict=True)]
        target = [nn, cout] + safe
        old = b.load(out, target)
        # Out-of-range contributions add 0 at a clamped (valid) address: no branch needed.
        b.store(b.add_(old, b.select(inside, prod, b.const(0.0, elem))), out, target)
    return [out]
