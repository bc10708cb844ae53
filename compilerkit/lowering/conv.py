"""Lowering of Conv (1-D/2-D/3-D: pads, auto_pad, strides, dilations, groups, bias, and the
activation `fuse-conv` attached, onnx_passes/fuse_conv.py) to Kernel IR; its geometry
(`conv_geometry`) and output start (`output_with_bias`) serve ConvTranspose too
(conv_transpose.py).

Conv takes one of five schedules, all visible in the Kernel IR, each with one loop that
threads can share (the parallelize pass marks it: krnl_passes/parallelize.py):

- direct (grouped and depthwise Conv, C/g * prod(kernel) <= MAX_TAPS): 2-D Convs go to
  depthwise.py (`direct_2d`): per (batch entry, block of groups), the input planes are copied
  into flat phase planes (zero rows for the vertical padding, split by stride phase), and one
  loop over flat output positions per output channel sums all taps with consecutive loads,
  the horizontal padding dropped by a select per kernel column (large planes read x in
  place instead: the interior of stride-1 planes, every output of wide stride-2 ones,
  `strided_2d`). 1-D and 3-D Convs: one nest
  per (batch entry, group) over (output channel of the group, output positions), the last
  output axis innermost; its body sums all C/g * prod(kernel) taps, unrolled, into one value,
  adds the bias, applies the activation and stores once. The innermost loop walks an output
  row with consecutive loads, so LLVM vectorises it. A padded Conv first copies the group's
  input planes into its own zero-bordered planes of a scratch buffer [groups, C/g, padded...]
  (border and interior rewritten per (batch entry, group), just before the taps read them),
  so the taps read without guards; no im2col buffer; strided ones split the last axis by phase
  (`_phase_scratch`). Groups write disjoint scratch planes and outputs, so the (batch entry,
  group) loop runs on threads.
- GEMM (everything else; conv_panels.py): per (batch entry, group, panel of output rows):
  the output panel is set to the bias, the input patches of the panel are copied into a
  column buffer [panels, C/g, kernel..., rows, rest of out spatial] (one slot per panel when
  threads share the panel loop, else one slot; from the zero-bordered scratch planes when the
  Conv is padded, as above), then out[oc, p] += W[oc, :] . col[:, p] with `krnl.matmul`
  (matmul.py, which -O3 tiles), then the epilogue applies the activation to the panel while
  it is still in cache. Panels hold about PANEL_BYTES of column buffer and output, as
  onnxruntime's MLAS convolution works through its output in cache-sized pieces. A 1x1,
  stride-1, unpadded Conv reads the input directly as the B matrix (a plain GEMM, no copy); a
  strided 1x1 Conv copies only the sampled pixels. Where it pays (`_strips_pay`: enough
  output channels per group that the micro-kernel would pack B, deep enough sums) the column
  buffer is written already cut into strips of the micro-kernel's width, [slots, strips,
  (C/g, kernel...) x strip columns] (`_strip_panel`), and multiplied strip by strip: the
  kernel reads each strip in place instead of packing the panel again on its stack. Same
  sums in the same order either way: bit-identical results.
- taps (conv_taps.py; ungrouped, constant weights, stride 1 or 2, several taps, f32 with
  vectors, few throw-away positions computed (`conv_taps.computes_little`; none in 3-D, which
  runs line by line): `conv_taps.taps_pay`):
  the transposed GEMM below with X^T read in place from the zero-bordered input planes (at
  stride 2 split by phase first), one table entry per (channel, tap) column (krnl.matmul
  `a_taps`), per panel of whole rows of the padded grid; no column buffer at all.
  Bit-identical to the GEMM panels.
- transposed GEMM (ungrouped, constant weights, at most TRANSPOSE_MAX_POSITIONS output
  positions per image, 64+ output channels: `_transposed_pays`): t[q, oc] = bias +
  sum X^T[q, :] W^T[:, oc], then out[oc, q] = act(t[q, oc]). The micro-kernel's vector axis
  is the GEMM's columns: 49 positions (ResNet-50's 7 x 7) fill 49 of 64 lanes, 512 output
  channels all of them. W^T is stored at compile time in strips of the target's micro-kernel
  width (matmul.strip_width) that the kernel reads in place (no run-time packing); X^T is x
  read with row stride 1 for a plain 1x1 Conv, else im2col columns written position-major.
  Same sums in the same order as the GEMM panels: bit-identical results.
- transposed GEMM panels (ungrouped, constant weights, few output channels: whole strips, at
  most TRANSPOSE_FEW_STRIPS, a kernel with several taps and deep sums, on any plane:
  `_transposed_pays`; DenseNet-121's 128 -> 32 3x3 Convs): the transposed GEMM per panel of
  output rows (column buffer within TRANSPOSE_PANEL_BYTES): t = bias, the panel's patches
  position-major into its column buffer, t += colT W^T, then the epilogue (activation,
  transpose back to NCHW) while t is in cache. Threads share a loop of 2 chunks, each with
  its own column buffer and t that its panels reuse in turn. Bit-identical as above.

"""

from __future__ import annotations

import itertools
import math

import numpy as np

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering import conv_taps, matmul
from compilerkit.lowering.builder import KernelBuilder, shape
from compilerkit.lowering.conv_algorithm import choose, lower_chosen
from compilerkit.lowering.conv_common import (
    MIN_PANEL,
    _bias_at,
    _bias_rows,
    _Conv,
    _copy_in,
    _copy_phases,
    _finish,
    _phase_scratch,
    _phase_tap_index,
    _reads_x_in_place,
    _scratch,
    _tap,
    transposing_nests,
)
from compilerkit.lowering.conv_panels import gemm, sum_pays
from compilerkit.lowering.depthwise import direct_2d
from compilerkit.lowering.elementwise import activation, lower_binary
from compilerkit.lowering.matmul import emit_matmul, emit_strip_matmul, fill, in_strips
from compilerkit.lowering.winograd import weights_array
from compilerkit.onnx_passes.fuse_conv import fused_activation
from compilerkit.onnx_passes.single_node import node_label

MAX_TAPS = 64  # most products one direct-convolution body sums (unrolled)
# Grouped Convs with at most this many input channels per group (depthwise: 1) run direct;
# more go to a GEMM per group: ShuffleNet's 1x1 group-4 Convs with 34 channels per group took
# 0.365 ms direct, 0.174 ms as GEMMs (16 per group: 0.095 / 0.068 ms; 8: 0.028 / 0.024;
# 4: 0.040 / 0.043, direct still ahead).
DIRECT_CHANNELS = 4
# Convs with at most this many output positions per image run as out^T = X^T W^T
# (`_transposed_gemm`): output channels become the micro-kernel's vector axis, and W^T is
# stored in strips (matmul.strip_width) that the micro-kernel reads unpacked
TRANSPOSE_MAX_POSITIONS = 256
# ... but from this many positions on, only with sums deeper than TRANSPOSE_DEEP products per
# output (C/g x taps): the transposed product's epilogue writes t back to NCHW column by column
# (about a cycle per output), a cost the shallow sums do not hide, where the plain GEMM
# (y = W . X, its columns the positions) stores its output in place and wastes at most a
# vector's lanes per row. 1 thread, AVX-512, 1x1 at 14 x 14 and 13 x 13, ms transposed ->
# GEMM: 96 -> 576 0.172 -> 0.146, 192 -> 1152 0.648 -> 0.536, 256 -> 1024 0.721 -> 0.636,
# 64 -> 256 (13 x 13) 0.051 -> 0.043, 256 -> 256 (13 x 13) 0.143 -> 0.132 (2 threads
# 1.03-1.20x); deeper sums stay transposed: 576 -> 96 0.142 / 0.147, 512 -> 1000 at 13 x 13
# 1.04 / 1.06; and 7 x 7 planes (49 positions in 64 lanes) at any depth: 160 -> 960 0.121 /
# 0.125, 320 -> 1280 0.318 / 0.347.
TRANSPOSE_FEW_POSITIONS = 128
TRANSPOSE_DEEP = 256
# ... and so do Convs with at most this many strips of output channels, on any plane, panel by
# panel (`_transposed_panels`; the measurements are at `_transposed_pays`) ...
TRANSPOSE_FEW_STRIPS = 3
TRANSPOSE_MIN_DEPTH = 1024  # ... and at least this many products per output (C/g x taps)
# ... with at most this much column buffer per panel (1 thread, 128 -> 32 channels: 56 x 56
# with 4 rows (1 MB) 2.5 ms, 2 rows 2.7 ms; 28 x 28 with 7 rows (0.9 MB) 0.57 ms, 14 rows 0.61)
TRANSPOSE_PANEL_BYTES = 1024 * 1024

def output_with_bias(b, out_dims, elem, bias):
    """The output buffer, holding the bias broadcast over channels (or zeros): both Conv and
    ConvTranspose then only accumulate into it."""
    out = b.alloc(out_dims, elem)
    if bias is not None:
        with b.nest(out_dims) as ivs:
            b.store(b.load(bias, [ivs[1]]), out, ivs)
    else:
        fill(b, out, 0.0)
    return out

def _empty_conv(b: KernelBuilder, op, out_dims, bias):
    """A Conv with nothing to sum: no outputs (no output channels, batch 0), or no input
    channels, where each output is act(bias) (act(0) without one), as onnxruntime answers.
    No product to emit: a GEMM of depth 0 or width 0 would be a tile of size 0."""
    out = output_with_bias(b, out_dims, op.results[0].type.element_type, bias)
    act = fused_activation(op)
    if act is not None and math.prod(out_dims):
        with b.nest(out_dims) as ivs:
            b.store(activation(b, b.load(out, ivs), *act), out, ivs)
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


def lower_conv(b: KernelBuilder, op, ins, sum_with=None):
    """The Conv's output buffer, in a list. `sum_with`: (the Add that fuse-conv marked to sum
    into this Conv's epilogue, the Conv's operand index in it, the other operand's buffer s):
    the result is then act(conv + s), act the Add's activation. The tap and transposed
    schedules add s in their epilogues, on each output tile while it is in cache (same value
    and bits as the Add after it: conv + s is one rounding either way), the GEMM panels where
    that pays (conv_panels.sum_pays); the others compute the Add after the Conv, as if
    unmarked."""
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    xs, ws = shape(x), shape(w)
    out_dims = onnx_d.shape_of(op.results[0])
    in_sp, k_sp, out_sp = list(xs[2:]), list(ws[2:]), list(out_dims[2:])
    groups = onnx_d.get_attr(op, "group", 1)
    st, dil, pads = conv_geometry(op, in_sp, k_sp, out_sp)
    if math.prod(out_dims) == 0 or xs[1] == 0:
        return _sum_after(b, _empty_conv(b, op, out_dims, bias), sum_with)
    algo = choose(op, b.conv_algorithm, b.lanes, b.taps)  # lower-to-krnl{conv_algorithm=...}
    if algo not in ("classic", "direct", "im2col"):
        return _sum_after(b, lower_chosen(b, op, ins, algo, pads), sum_with)
    conv = _Conv(x, w, bias, out_dims, groups, st, dil, pads, fused_activation(op))
    out = b.alloc(out_dims, op.results[0].type.element_type)
    if algo == "direct" or (algo == "classic" and groups > 1 and conv.cg <= DIRECT_CHANNELS
                            and conv.cg * math.prod(k_sp) <= MAX_TAPS):
        _direct(b, conv, out)
        return _sum_after(b, out, sum_with)
    if (algo == "classic" and b.taps and weights_array(op)[0] is not None
            and conv_taps.taps_pay(conv, b.lanes)):
        schedule = "taps"
    else:
        schedule = _transposed_pays(conv, op, b.lanes, sum_with is not None) or "gemm"
    if sum_with is not None and (schedule != "gemm" or sum_pays(conv, b.lanes)):
        # the schedule's epilogue adds s (conv_common._finish), then the Add's activation
        add, _, s = sum_with
        conv.act = fused_activation(add)
        conv.summand = b.view(s, [conv.n, conv.oc, math.prod(out_sp)])
        sum_with = None
    if schedule == "taps":
        conv_taps.tap_panels(b, conv, out, *_stored_wt(b, conv, op, narrow=True))
    elif schedule == "gemm":
        gemm(b, conv, out)
    else:
        (_transposed_gemm if schedule == "image" else _transposed_panels)(
            b, conv, out, *_stored_wt(b, conv, op))
    return _sum_after(b, out, sum_with)


def _sum_after(b: KernelBuilder, out, sum_with):
    """[out], or, for a Conv whose schedule has no epilogue to add s in, [the marked Add
    computed after it] (elementwise.lower_binary: s + out in the Add's operand order, then
    its activation)."""
    if sum_with is None:
        return [out]
    add, k, s = sum_with
    return lower_binary(b, add, [out, s] if k == 0 else [s, out])


def _stored_wt(b: KernelBuilder, conv: _Conv, op, narrow: bool = False):
    """(W^T as a constant in strips of the micro-kernel's width, that width) for the
    transposed and tap schedules; `narrow`: one vector wide where the output channels fit
    one (the micro-kernel's one-vector blocks, `microkernel.half_rows`)."""
    w_np, module = weights_array(op)
    strip = matmul.strip_width(conv.oc, b.lanes)
    if narrow and 1 < b.lanes and conv.oc <= b.lanes:
        strip = b.lanes
    return b.constant(_columns_weights(conv, w_np, strip), module, f"wt_{node_label(op)}",
                      conv.elem), strip


# ---- direct convolution (grouped, depthwise) ---------------------------------------------------


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


def _by_group(b: KernelBuilder, conv: _Conv, out):
    """out viewed as [N, groups, OC/g, spatial...]: a group's outputs are indexed by the group
    itself, so the (batch, group) loop can run in parallel."""
    return b.view(out, [conv.n, conv.groups, conv.ocg] + conv.out_sp)


def _direct(b: KernelBuilder, conv: _Conv, out):
    """The direct schedule: 2-D Convs over flat phase planes (depthwise.py); 1-D and 3-D ones
    as one nest per (batch entry, group) over output channels and positions, described in the
    module docstring."""
    if conv.r == 2:
        return direct_2d(b, conv, out)
    if conv.st[-1] > 1:  # strided: the taps read a phase-split copy (always copied)
        scratch, phased = _phase_scratch(b, conv), True
    else:
        scratch, phased = _scratch(b, conv), False
    padded = scratch is not None
    og = _by_group(b, conv, out)
    with b.nest([conv.n, conv.groups]) as (nn, g):
        if phased:
            _copy_phases(b, conv, scratch, nn, g)
        elif padded:
            _copy_in(b, conv, scratch, nn, g)
        with b.nest([conv.ocg] + conv.out_sp) as ivs:
            o, pos = ivs[0], ivs[1:]
            oc = b.affine([(g, conv.ocg), (o, 1)])

            def tap(cc, ks):
                if phased:
                    return b.load(scratch, [g, cc] + _phase_tap_index(b, conv, pos, ks))
                # position o * s + k * d, less the padding when x is read directly
                at = [b.affine([(p, conv.st[d])],
                               ks[d] * conv.dil[d] - (0 if padded else conv.pads[d]))
                      for d, p in enumerate(pos)]
                return _tap(b, conv, scratch, nn, g, cc, at)

            b.store(_sum_taps(b, conv, oc, tap), og, [nn, g, o] + pos)


# ---- out^T = X^T W^T: output channels on the vector axis ---------------------------------------

def _transposed_pays(conv: _Conv, op, lanes: int, summed: bool = False) -> str | None:
    """Which transposed schedule takes the Conv: "image" (`_transposed_gemm`), "panels"
    (`_transposed_panels`) or None (the GEMM panels). Both need one group and constant
    weights (W^T is stored in strips at compile time); grouped Convs keep the panels (each
    group's channels are few).

    - "image": few output positions (ResNet-50's 7 x 7 and 14 x 14 stages): the
      micro-kernel's vector axis is the GEMM's columns, and 49 positions fill 49 of 64 lanes
      (AVX-512: two strips of 32) where 512 or 2048 output channels fill them all. From
      TRANSPOSE_FEW_POSITIONS positions on, only deep sums (TRANSPOSE_DEEP) or a Conv with
      a residual sum (`summed`: the epilogue adds it, where the GEMM adds it panel by panel;
      ResNet-50's 256 -> 1024 1x1s at 14 x 14 made the model 1.6% slower as GEMMs).
    - "panels": whole strips of output channels, at most TRANSPOSE_FEW_STRIPS of them, more
      than one kernel tap and at least TRANSPOSE_MIN_DEPTH products per output, on any plane
      (DenseNet-121's 128 -> 32 3x3 Convs): as the GEMM's rows, 32 channels are a few
      register blocks for every packed panel of im2col columns; as its columns, one strip
      read in place. The position-major im2col costs about a cycle per element (a
      transpose: no vector stores), the GEMM about a cycle per element and strip, so the
      schedule pays with deep sums and whole strips. 1 thread, AVX-512, pad 1, ms GEMM
      panels -> transposed panels: 128 -> 32 channels at 56 x 56 2.68 -> 2.53, 28 x 28 0.64
      -> 0.57, 14 x 14 0.24 -> 0.15, 7 x 7 0.085 -> 0.047; 128 -> 64 at 56 x 56 3.77 ->
      3.50, 28 x 28 0.93 -> 0.81; 128 -> 96 at 56 x 56 5.48 -> 4.89; 2 threads 128 -> 32 at
      56 x 56 1.64 -> 1.36. Slower: part strips (128 -> 48 at 56 x 56 3.17 -> 3.39, 128 ->
      16 1.93 -> 2.59), shallow sums (3 -> 32 stride 2 at 224 x 224 0.34 -> 0.54, 16 -> 64
      at 56 x 56 0.50 -> 0.55; 64 -> 32 at 56 x 56 even, 0.95). A 1x1 Conv has no im2col
      to write and reads x in place as the GEMM's B. Targets without vectors (1 lane) keep
      the GEMM panels."""
    if conv.groups != 1 or weights_array(op)[0] is None:
        return None
    positions, depth = math.prod(conv.out_sp), conv.cg * math.prod(conv.k_sp)
    if (positions <= TRANSPOSE_MAX_POSITIONS and conv.oc >= 64
            and (positions < TRANSPOSE_FEW_POSITIONS or depth > TRANSPOSE_DEEP or summed)):
        return "image"
    strip = matmul.strip_width(conv.oc, lanes)
    if (lanes > 1 and math.prod(conv.k_sp) > 1 and conv.oc % strip == 0
            and conv.oc <= TRANSPOSE_FEW_STRIPS * strip
            and conv.cg * math.prod(conv.k_sp) >= TRANSPOSE_MIN_DEPTH):
        return "panels"
    return None


def _columns_weights(conv: _Conv, w, width: int):
    """W^T in strips (matmul.in_strips): [K / width, C k..., width], zero-padded to whole
    strips. `w`: the weights, numpy."""
    dtype = onnx_d.numpy_dtype(conv.elem)
    if onnx_d.is_splat(w) and conv.oc % width == 0:
        # one value everywhere (a folded ConstantOfShape, the light models' weights): W^T is
        # the same value, kept a splat so codegen fills it at run time instead of spelling
        # out its bytes
        return np.broadcast_to(np.asarray(w.flat[0], dtype), (conv.oc // width, w[0].size,
                                                               width))
    return in_strips(w.reshape(conv.oc, -1).T.astype(dtype), width)


def _transposed_gemm(b: KernelBuilder, conv: _Conv, out, wt, strip: int):
    """Per image: t[q, oc] = bias[oc] + sum_j A[q, j] W^T[j, oc], then out[oc, q] = act(t[q,
    oc]). A is X^T read in place when the Conv is a plain 1x1 (row stride 1, depth stride one
    plane), else the im2col columns written position-major (colT[q, c k...], contiguous).
    `wt`: W^T in strips of `strip` columns (`_columns_weights`)."""
    p, hw = math.prod(conv.out_sp), math.prod(conv.in_sp)
    kdim = conv.cg * math.prod(conv.k_sp)
    direct = _reads_x_in_place(conv)
    width = -(-conv.oc // strip) * strip
    # t's rows one cache line longer than the strips: the epilogue reads a column of t, and
    # rows 2048 floats apart (8 KiB) would all fall in one L1 set (measured 1.3x slower)
    t = b.alloc([p, width + 16], conv.elem)
    col = None if direct else b.alloc(conv.out_sp + [conv.cg] + conv.k_sp, conv.elem)
    scratch = None if direct else _scratch(b, conv)
    ov = b.view(out, [conv.n, conv.oc, p])
    zero = b.index(0)
    whole = width == conv.oc  # whole strips: one loop over them does everything (below)
    with b.nest([conv.n]) as (nn,):
        if not whole:
            _bias_rows(b, conv, t, None, p, width)
        if direct:
            src, a_off, a_strides = conv.x, b.affine([(nn, conv.c_in * hw)]), (1, hw)
        else:
            if scratch is not None:
                _copy_in(b, conv, scratch, nn, zero)
            with b.nest(conv.out_sp + [conv.cg] + conv.k_sp) as ivs:
                os_, c, ks = ivs[:conv.r], ivs[conv.r], ivs[conv.r + 1:]
                at = [b.affine([(o, conv.st[d]), (k, conv.dil[d])])
                      for d, (o, k) in enumerate(zip(os_, ks, strict=True))]
                b.store(_tap(b, conv, scratch, nn, zero, c, at), col, ivs)
            src, a_off, a_strides = col, zero, (kdim, 1)
        if whole:
            _strip_by_strip(b, conv, src, wt, t, ov, nn, p, kdim, a_off, a_strides, strip)
            return
        emit_strip_matmul(b, src, wt, t, p, width, kdim, [a_off, zero, zero], a_strides,
                          width + 16, strip)

        def write(o, ivs):
            q = ivs[0]
            b.store(_finish(b, conv, b.load(t, [q, o]), [nn, o, q]), ov, [nn, o, q])

        transposing_nests(b, conv.oc, [p], write)


def _strip_by_strip(b: KernelBuilder, conv: _Conv, src, wt, t, ov, nn, p: int, kdim: int,
                    a_off, a_strides, strip: int):
    """`_transposed_gemm` for output channels in whole strips: one loop over the strips, each
    iteration its columns of t set to the bias, its product, and its channels written out
    through the activation. The loop is the Conv's one parallel loop (threads take strips);
    bias and epilogue nests of their own were too small to be shared (below the parallelize
    pass's MIN_WORK: ran on one thread) and their strips' t went cold in between."""
    with b.nest([conv.oc // strip]) as (s,):
        with b.nest([p, strip]) as (q, j):
            o = b.affine([(s, strip), (j, 1)])
            b.store(_bias_at(b, conv, o), t, [q, o])
        at = [a_off, b.affine([(s, kdim * strip)]), b.affine([(s, strip)])]
        emit_matmul(b, src, wt, t, p, strip, kdim, at, a_strides, strip, conv.oc + 16)

        def write(j, ivs):
            o, q = b.affine([(s, strip), (j, 1)]), ivs[0]
            b.store(_finish(b, conv, b.load(t, [q, o]), [nn, o, q]), ov, [nn, o, q])

        transposing_nests(b, strip, [p], write)


def _transposed_panel_rows(conv: _Conv, kdim: int) -> tuple[int, int]:
    """(output rows (first spatial axis) per panel, chunks) for `_transposed_panels`: the
    most rows that divide the rows evenly and keep the panel's column buffer within
    TRANSPOSE_PANEL_BYTES, preferring an even panel count with MIN_PANEL positions or more
    per panel (then 2 chunks, one per thread); failing an even count, 1 chunk."""
    rows, inner = conv.out_sp[0], math.prod(conv.out_sp[1:])
    per_row = kdim * inner * onnx_d.numpy_dtype(conv.elem).itemsize
    fits = [h for h in range(1, rows + 1)
            if rows % h == 0 and h * per_row <= TRANSPOSE_PANEL_BYTES] or [1]
    even = [h for h in fits if (rows // h) % 2 == 0 and h * inner >= MIN_PANEL]
    height = max(even or fits)
    return height, 2 if (rows // height) % 2 == 0 else 1


def _transposed_panels(b: KernelBuilder, conv: _Conv, out, wt, strip: int):
    """`_transposed_gemm` panel by panel, for Convs with few output channels on planes of
    any size (`_transposed_pays`): per panel of output rows (`_transposed_panel_rows`),
    t[q, oc] = bias[oc], the panel's input patches are written position-major into its
    column buffer (colT[q, c k...]), t += colT W^T (W^T in strips, read in place), then the
    epilogue out[oc, q0 + q] = act(t[q, oc]) while t is in cache. Threads share the chunk
    loop: each chunk has its own column buffer and t and works through its panels in turn,
    reusing them while they are in cache (a slot per panel, as `_gemm` gives threads, wrote
    7 x 1.8 MB more at 56 x 56 x 1152: 1 thread 2.9 vs 2.5 ms). Same sums in the same k
    order as the GEMM panels: bit-identical results."""
    p = math.prod(conv.out_sp)
    kdim = conv.cg * math.prod(conv.k_sp)
    inner = math.prod(conv.out_sp[1:])
    height, chunks = _transposed_panel_rows(conv, kdim)
    per_chunk = conv.out_sp[0] // (height * chunks)
    pw = height * inner  # output positions per panel
    width = -(-conv.oc // strip) * strip
    ldt = width + 16  # t's rows one cache line longer than the strips: see _transposed_gemm
    col = b.alloc([chunks, height] + conv.out_sp[1:] + [conv.cg] + conv.k_sp, conv.elem)
    t = b.alloc([chunks, pw, ldt], conv.elem)
    scratch = _scratch(b, conv)
    ov = b.view(out, [conv.n, conv.oc, p])
    zero = b.index(0)
    with b.nest([conv.n]) as (nn,):
        if scratch is not None:
            _copy_in(b, conv, scratch, nn, zero)
        with b.nest([chunks, per_chunk]) as (jc, ji):
            jp = b.affine([(jc, per_chunk), (ji, 1)])  # this panel: rows jp * height ...
            _bias_rows(b, conv, t, jc, pw, width)
            with b.nest([height] + conv.out_sp[1:] + [conv.cg] + conv.k_sp) as ivs:
                os_, c, ks = ivs[:conv.r], ivs[conv.r], ivs[conv.r + 1:]
                spatial = []
                for d, (o, kk) in enumerate(zip(os_, ks, strict=True)):
                    terms = [(o, conv.st[d]), (kk, conv.dil[d])]
                    if d == 0:
                        terms.append((jp, height * conv.st[0]))
                    spatial.append(b.affine(terms, 0 if scratch is not None else -conv.pads[d]))
                b.store(_tap(b, conv, scratch, nn, zero, c, spatial), col, [jc] + ivs)
            emit_strip_matmul(b, col, wt, t, pw, width, kdim,
                              [b.affine([(jc, pw * kdim)]), zero, b.affine([(jc, pw * ldt)])],
                              (kdim, 1), ldt, strip)
            q0 = b.affine([(jp, pw)])

            def write(o, ivs):
                q = ivs[0]
                at = [nn, o, b.affine([(q0, 1), (q, 1)])]
                b.store(_finish(b, conv, b.load(t, [jc, q, o]), at), ov, at)

            transposing_nests(b, conv.oc, [pw], write)


