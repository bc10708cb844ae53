"""Which algorithm lowers a Conv: the `conv_algorithm` compile option, read by lower_conv.

    compilerkit.compile(model, conv_algorithm=NAME)

    NAME                  a Conv it applies to is lowered by
    "auto"                (the default) Winograd F(2, 3) where it measured faster and its
                          error bound holds for the layer (`auto_choice`,
                          `winograd_error_ratio`); for kernels of AUTO_FFT_KERNEL and more,
                          "fft" where compilerkit.roofline predicts it faster than im2col;
                          else "classic"
    "auto-f4"             the same with F(4, 3) first where its bound holds: faster on 3-D
                          nets, 5-30x im2col's rounding error
    "classic"             conv.py's own choice (direct for grouped/depthwise, the tap schedule,
                          transposed GEMMs, im2col + GEMM panels)
    "direct"              conv.py's direct schedule (taps unrolled, no GEMM) where a Conv has
                          at most DIRECT_MAX_TAPS products per output (C/g * prod(kernel))
    "im2col"              conv.py's im2col + GEMM panels
    "winograd"            Winograd F(4, 3), three-stage (lowering/winograd.py)
    "winograd-f2" / "-f4" / "-f6"               F(2, 3) / F(4, 3) / F(6, 3), three-stage
    "winograd-fused", "winograd-f2-fused", ...  the same, L3-fused schedule (tile groups)
    "fft"                 FFT convolution on tiles (lowering/fft.py), tile size from
                          conv_tiles.choose_fft_tile, three-stage; "fft-fused": L3-fused
    "fft-t8" ... "fft-t64", "fft-t16-fused", ...  the same with the tile size t named
    "pznet"               PZnet's channel-blocked (NCDHW8c) direct 3-D Conv for few
                          input channels (lowering/blocked3d.py `applies`), else what "auto"
                          picks; krnl_passes/fold_layout.py drops the layout transforms
                          between consecutive blocked Convs

A Conv the named algorithm does not apply to (a strided 3x3 under "winograd", a strided,
dilated or grouped Conv or a kernel as long as the tile under "fft", a 3x3 with 512 channels
under "direct") gets "classic", so one name can be given for a whole model and every setting
computes the same function. An `conv_algorithm` string attribute on an onnx.Conv
(hand-written ONNX IR, the FileCheck tests) overrides the option for that node.

Why "auto" is the default and takes F(2, 3) only: Winograd spreads rounding error over every
output of a tile, and F(2, 3)'s error on trained layers is below im2col's, F(4, 3)'s 5-30x
above it (max error over the output's max |y|, float64 reference: ResNet-50's 3x3 layers
im2col 0.7-1.9e-6, F(2, 3) 0.2-0.8e-6, F(4, 3) 4-13e-6; the 3D U-Net's 3x3x3 layers 1.3-3.4e-6,
0.3-0.8e-6, 19-72e-6: F(2, 3)'s products sum C terms per transformed element where im2col's
sum 9C or 27C in one chain). Both keep to the layers where the tile's error bound holds
(`winograd_error_ratio`): the fuzz suite's corrupted 3D U-Net (one weight 1.8e16, another
3.9e14), whose sigmoid outputs F(4,3) flipped by the thousands, stays classic. NaN, inf and
outsized inputs are screened: their tiles are computed directly (winograd.py), so special
values reach the outputs classic's reach. F(2, 3) under "auto" ran 1.24-1.87x "classic" on
every layer it took (ResNet-50's and DenseNet-121's 3x3 layers, the U-Net's 3x3x3 ones up to
64 channels; 1 thread, AVX-512 Xeon); whole models: ResNet-50 70.4 -> 61.1 ms, DenseNet-121
71.7 -> 58.6 ms, the 3D U-Net 1.87 -> 1.47 s ("auto-f4": 1.22 s), the others unchanged (no
layer qualifies). Its 3x3x3 layers of 128 to 512 channels (8^3 and 16^3) later came to F(2, 3)
too, 1.55-2.15x the tap schedule's lines (AUTO_FUSED_TILES): the U-Net 775 -> 674 ms at 1
thread, 503 -> 408 ms at 2, its error against onnxruntime 9.9e-6 -> 8.4e-6 of the output's
scale. The price is compile time: the transforms are more Kernel IR (ResNet-50
1.5 -> 2.6 s).

The option is the `conv_algorithm` option of the `lower-to-krnl` pass
(`lower-to-krnl{conv_algorithm=auto}`), which the lowering's KernelBuilder carries to `choose`.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from compilerkit.conv_tiles import FFT_TILES, fft_variant, winograd_variant
from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ConvAccuracyWarning, ModelError
from compilerkit.lowering import blocked3d, conv_taps, fft, winograd
from compilerkit.onnx_passes.single_node import node_label

# "auto" (auto_choice): Winograd for 3x3 Convs with this many channels in and out ...
AUTO_MIN_CHANNELS = 16
# ... and tiles per batch entry: F(4,3) on 7 x 7 (4 tiles) beat classic 1.78x at 512 channels
# once U is read in strips (512@7: 1.36 vs 2.43 ms); on 4 x 4, F(2,3)'s 4 tiles beat classic
# (256@4: 0.13 vs 0.21 ms) where F(4,3)'s one tile did not; one tile (2 x 2) stays classic
AUTO_MIN_TILES = 4
AUTO_FUSED_CHANNELS = 64  # the L3-fused schedule up to this many channels ...
# ... and for 3x3x3 Convs of more channels, from this many tiles per batch entry on (16^3 at
# F(2, 3)). F(2, 3) takes 3x3x3 Convs of any channel count: 1 thread, AVX-512, pad 1 + Relu,
# ms classic (the taps' lines) -> F(2, 3) three-stage / L3-fused: 128 -> 256 at 8^3 6.73 ->
# 4.15 / 4.35, 256 -> 256 at 8^3 16.3 -> 7.57 / 8.76, 512 -> 256 at 8^3 27.2 -> 13.2 / 16.5,
# 64 -> 128 at 16^3 15.3 -> 10.2 / 9.84, 128 -> 128 at 16^3 30.3 -> 17.1 / 16.0, 256 -> 128
# at 16^3 60.2 -> 31.3 / 30.6, 128 -> 64 at 32^3 108 -> 110 / 94.5: on 64 tiles (8^3) the
# fused schedule's groups are a few tiles each, from 16^3 on it is ahead
AUTO_FUSED_TILES = 512
# Fewer input or output channels than this, where "classic" is the tap schedule, stay classic:
# 1 thread, AVX-512, 3x3 pad 1 + Relu, ms F(2, 3) -> taps: 16 -> 64 at 55 x 55 0.720 -> 0.501,
# 32 -> 128 at 27 x 27 0.480 -> 0.445, 128 -> 32 at 56 x 56 2.01 -> 1.87, at 14 x 14 even
# (0.128, 0.127), 3x3x3 32 -> 32 at 32^3 25.0 -> 19.0 (but 64 -> 32 40.5 -> 44.1); with 64
# and more F(2, 3) stays ahead: 64 -> 64 at 56 x 56 1.37 vs 1.82, 128 -> 128 at 28 x 28 1.27
# vs 1.75, 256 -> 256 at 14 x 14 1.39 vs 1.98
AUTO_TAPS_CHANNELS = 64
# ... in 3x3x3 Convs; 3x3 Convs take F(2, 3) from this many on: against the fused schedule
# (its products read U's strips in place, its groups go to threads), 1 thread, ms, taps ->
# F(2, 3) fused: 24 -> 64 at 56 x 56 0.650 -> 0.571, 32 -> 64 0.877 -> 0.690,
# 64 -> 32 0.860 -> 0.713, 32 -> 128 at 27 x 27 0.432 -> 0.338, DenseNet-121's 128 -> 32 at
# 56 x 56 1.68 -> 1.36 and 28 x 28 0.441 -> 0.345 (at 14 x 14, three-stage, 0.124 -> 0.088);
# 16 input channels stay with the taps (16 -> 64 at 55 x 55 0.475 vs 0.534, 16 -> 32 at
# 112 x 112 0.925 vs 1.144). DenseNet-121 43.6 -> 40.1 ms, SqueezeNet 5.85 -> 5.26.
AUTO_TAPS_CHANNELS_2D = 24
# 3x3 Convs with more than AUTO_FUSED_CHANNELS channels take the fused schedule too from this
# many tiles on (28 x 28 at F(2, 3)) when C x K is at most AUTO_FUSED_PRODUCT_2D (U of 1 MiB):
# 1 thread, ms three-stage -> fused: 128 -> 128 at 28 x 28 0.977 -> 0.904, 64 -> 192 at
# 56 x 56 3.61 -> 2.99; 256 -> 256 stays three-stage (at 28 x 28 3.33 vs 3.66, at 56 x 56
# 15.8 vs 16.7), and so do 49 tiles (64 -> 256 at 13 x 13 0.285 vs 0.297).
AUTO_FUSED_TILES_2D = 196
AUTO_FUSED_PRODUCT_2D = 128 * 128
AUTO_MAX_RANGE = 1000.0  # ... and weights whose max |w| is at most this many times the median
# ... and a tile size m whose error bound on the layer (`winograd_error_ratio`: F(m, 3)'s
# worst-case rounding error over direct convolution's) is at most this: 2-D F(4, 3) keeps
# weights up to AUTO_MAX_RANGE medians (36100 / 9 x 1000 ~ 4.0e6), 3-D F(4, 3) up to 16
# (6.86e6 / 27 x 16), F(2, 3) up to AUTO_MAX_RANGE in 2-D and 3-D. Measured at 1 thread on
# real weights (max |w| 2.5-6 medians), max error over the output's max |y|, against float64:
# ResNet-50's 3x3 layers im2col 0.7-1.9e-6, F(2, 3) 0.2-0.8e-6, F(4, 3) 4-13e-6; the 3D
# U-Net's 3x3x3 layers im2col 1.3-3.4e-6, F(2, 3) 0.3-0.8e-6, F(4, 3) 19-72e-6
AUTO_ERROR_RATIO = 4.02e6
AUTO_FFT_KERNEL = 5  # "auto" weighs FFT against im2col (the roofline) from this kernel size on
DIRECT_MAX_TAPS = 576  # unrolled products of one output under "direct" (64 channels x 3x3)
BASIC = ("auto", "auto-f4", "classic", "direct", "im2col")
AUTO_TILES = {"auto": (2,), "auto-f4": (4, 2)}  # Winograd tile sizes m each tries, in order
DEFAULT = "auto"  # the compile option's default (compilerkit.compile, the lower-to-krnl pass)
WINOGRAD = tuple(f"winograd{f}{s}" for s in ("", "-fused") for f in ("", "-f2", "-f4", "-f6"))
FFT = tuple(f"fft{t}{s}" for s in ("", "-fused")
            for t in ("",) + tuple(f"-t{t}" for t in FFT_TILES))
ALGORITHMS = BASIC + WINOGRAD + FFT + ("pznet",)

def check_algorithm(name) -> str:
    """`name` if it is one of ALGORITHMS, else a ValueError listing them."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown conv_algorithm {name!r}; choose one of "
                         f"{', '.join(ALGORITHMS)}")
    return name


def choose(op, asked: str = DEFAULT, lanes: int = 16, taps: bool = True) -> str:
    """The algorithm for the Conv `op` (ONNX IR): the node's `conv_algorithm` attribute, else
    `asked` (the compile option), falling back to "classic" where it does not apply. On a
    target without vectors (`lanes` 1: the GPU) "auto" is "classic": the Winograd and FFT
    tile schedules are written for CPU cores and caches (a fused Winograd Conv ran as one
    serial GPU kernel). `taps`: whether "classic" may take the tap schedule (conv_taps.py), which
    "auto" weighs against Winograd."""
    attr = op.attributes.get("conv_algorithm")
    if attr is not None:
        name = getattr(attr, "data", None)
        if name not in ALGORITHMS:
            raise ModelError(f"node {node_label(op)!r}: conv_algorithm attribute {attr} is not "
                             f"one of {', '.join(ALGORITHMS)}")
    else:
        name = check_algorithm(asked)
    if name in AUTO_TILES:
        return auto_choice(op, AUTO_TILES[name], taps) if lanes > 1 else "classic"
    if name.startswith("winograd"):
        return _asked(op, name) if winograd.applies(op) is None else "classic"
    if name.startswith("fft"):
        return _asked(op, name) if fft.applies(op, fft_variant(name)[0]) is None else "classic"
    if name == "pznet":
        return name if blocked3d.applies(op) is None else auto_choice(op)
    if name == "direct":
        taps = math.prod(onnx_d.shape_of(op.operands[1])[1:])
        return name if taps <= DIRECT_MAX_TAPS else "classic"
    return name


def _asked(op, name: str) -> str:
    """`name` (a Winograd or FFT algorithm the Conv was given by name, which applies), with a
    ConvAccuracyWarning naming the node when its weights are constants and not
    `well_scaled`."""
    if winograd.weights_array(op)[0] is None:
        return name
    spread = weight_spread(op)  # one median of the weights (`well_scaled`'s test, once)
    if spread > AUTO_MAX_RANGE:
        warnings.warn(ConvAccuracyWarning(
            f"node {node_label(op)!r}: conv_algorithm {name!r} on weights whose max |w| is "
            f"{spread:.3g} times their median (above {AUTO_MAX_RANGE:g}, or not finite): its "
            f"rounding error in every output of a tile scales with the largest weight; "
            f"'classic' or 'auto' keeps each output's error to its own terms"), stacklevel=2)
    return name


def auto_choice(op, tiles=AUTO_TILES["auto"], taps: bool = True) -> str:
    """"auto": Winograd F(m, 3) for the 3x3 and 3x3x3 Convs it takes with at least
    AUTO_MIN_CHANNELS input and output channels and at least AUTO_MIN_TILES tiles per batch
    entry at the first m of `tiles` ((2,) for "auto", (4, 2) for "auto-f4") that gives them
    and whose error bound holds for the layer (`winograd_error_ratio` <= AUTO_ERROR_RATIO)
    (the products are tiles x K x C, the transformed weights alpha^r x C x K: with one tile
    they are bound by reading U, and im2col stays faster); L3-fused when both channel counts
    are at most AUTO_FUSED_CHANNELS or, 3x3x3, there are AUTO_FUSED_TILES tiles or more, or,
    3x3, AUTO_FUSED_TILES_2D tiles and C x K at most AUTO_FUSED_PRODUCT_2D. Not where
    "classic" takes the tap schedule (`taps`) and a channel count is below
    AUTO_TAPS_CHANNELS (3x3x3) or AUTO_TAPS_CHANNELS_2D (3x3): there the taps are faster.
    Else "classic". Measured at 1 thread in
    benchmarks/winograd_bench.py (benchmarks/results/winograd_bench.json, same run, against
    "classic"; 3x3x3 layers of 16 to 512 channels: AUTO_FUSED_TILES' comment)."""
    ws = onnx_d.shape_of(op.operands[1])
    xs = onnx_d.shape_of(op.operands[0])
    if max(ws[2:], default=0) >= AUTO_FFT_KERNEL:
        return _auto_fft(op, ws)
    few = max(ws[0], xs[1]) <= AUTO_FUSED_CHANNELS
    if list(ws[2:]) not in ([3, 3], [3, 3, 3]) or min(ws[0], ws[1]) < AUTO_MIN_CHANNELS or (
            winograd.applies(op) is not None):
        return "classic"
    if onnx_d.is_splat(winograd.weights_array(op)[0]):
        # one value everywhere (ConstantOfShape's weights, the light models): classic keeps
        # W^T a splat filled at run time, Winograd would spell out every transformed weight
        # (zfnet512's 512x256 3x3 layer: 19 MB of LLVM IR)
        return "classic"
    spread = weight_spread(op)
    if spread > AUTO_MAX_RANGE:
        return "classic"
    out = onnx_d.shape_of(op.results[0])[2:]
    taps_below = AUTO_TAPS_CHANNELS if len(out) == 3 else AUTO_TAPS_CHANNELS_2D
    if taps and min(ws[0], ws[1]) < taps_below and _taps_take(op, ws, out):
        return "classic"  # the tap schedule (conv_taps.py) beats F(2, 3) on few channels
    for m in tiles:
        count = math.prod(-(-o // m) for o in out)
        if count >= AUTO_MIN_TILES and winograd_error_ratio(op, m, spread) <= AUTO_ERROR_RATIO:
            fused = few or (len(out) == 3 and count >= AUTO_FUSED_TILES) or (
                len(out) == 2 and count >= AUTO_FUSED_TILES_2D
                and ws[0] * ws[1] <= AUTO_FUSED_PRODUCT_2D)
            return f"winograd-f{m}{'-fused' if fused else ''}"
    return "classic"


def _taps_take(op, ws, out) -> bool:
    """Whether "auto" may prefer conv_taps.py's tap schedule for the Conv `op` (f32, 16 lanes:
    auto_choice runs for targets with vectors): "classic" takes it, on a grid with few
    throw-away positions (3-D volumes of 16^3 and less run it line by line under "classic",
    but lose to Winograd there)."""
    r = len(ws) - 2
    st = onnx_d.get_attr(op, "strides", [1] * r)
    dil = onnx_d.get_attr(op, "dilations", [1] * r)
    elem = onnx_d.numpy_dtype(op.results[0].type.element_type).itemsize
    return (conv_taps.taps_apply(onnx_d.get_attr(op, "group", 1), list(st), ws[2:], elem, 16)
            # the grid's bound even in 3-D: where the grid wastes more (volumes of 16^3 and
            # less), Winograd beat the taps' lines (16 -> 16 at 16^3: F(4, 3) 0.70 ms, F(2, 3)
            # 1.05, lines 0.99; 48 -> 48: 3.12, 4.06, 5.73)
            and conv_taps.waste(ws[2:], list(dil), out, list(st)) <= conv_taps.MAX_WASTE
            and ws[0] >= conv_taps.MIN_OUT_CHANNELS)


def winograd_error_ratio(op, m: int, spread: float | None = None) -> float:
    """The worst-case rounding-error bound of F(m, 3) on the Conv `op` over direct
    convolution's, both summing the same products (im2col's and onnxruntime's order aside):
    per axis of kernel 3 the transforms' gain ||A^T|| ||G|| ||B^T|| (infinity norms, from
    wincnn's matrices: 9 for F(2, 3), 190 for F(4, 3), 1252 for F(6, 3)), over the products a
    direct output sums per channel (prod(kernel)), times the weights' `weight_spread` (a
    direct sum's error in an output scales with that output's own terms, Winograd's with the
    largest weight of the tile's channels). `spread`: the op's weight_spread, if known."""
    from compilerkit.conv_tiles import winograd_matrices

    ws = onnx_d.shape_of(op.operands[1])
    gain = 1.0
    for k in ws[2:]:
        if k == 3:
            gain *= float(np.prod([np.abs(a).sum(axis=1).max()
                                   for a in winograd_matrices(m, 3)]))
    spread = weight_spread(op) if spread is None else spread
    return gain / math.prod(ws[2:]) * spread


def _auto_fft(op, ws) -> str:
    """"fft" where it applies, the weights are well scaled and compilerkit.roofline (the
    cached measurement of this machine, or its DEFAULT rates: a compile never measures)
    predicts it faster than im2col, else "classic". The layer is modelled as a cube kernel
    of the largest size, 'same' output: an approximation for uneven kernels."""
    from compilerkit import roofline

    if fft.applies(op) is not None or not well_scaled(op):
        return "classic"
    out = tuple(onnx_d.shape_of(op.results[0])[2:])
    layer = roofline.Layer(ws[1], ws[0], out, max(ws[2:]))
    m = roofline.machine()
    best = roofline.best_algorithm(layer, m, ["im2col", "fft"])
    return "fft" if best == "fft" else "classic"


def well_scaled(op) -> bool:
    """Whether the Conv's weights are finite with max |w| at most AUTO_MAX_RANGE times their
    median |w| (`weight_spread`). Winograd's rounding error in every output of a tile scales
    with the largest weight (the transforms mix all taps), where a direct sum's error in an
    output scales with that output's own terms: one outlier weight (1.8e16 among weights of
    0.05, a corrupted model in the fuzz suite) made F(4,3) flip the sign of thousands of
    outputs that im2col and onnxruntime agree on. Trained and initialised weights sit far
    inside the bound."""
    return weight_spread(op) <= AUTO_MAX_RANGE


def weight_spread(op) -> float:
    """max |w| / median |w| of the Conv's weights (the median, not the RMS: one outlier among
    thousands of weights carries the RMS with it); 1 for all-zero weights (Winograd is exact
    on them), inf for none, a NaN or inf among them, or a zero median under a nonzero max."""
    w = winograd.weights_array(op)[0]
    # |w| in the weights' own precision (a float64 copy of ResNet-50's 2.4M weights doubled
    # the time), the median by partition: 0.22 -> 0.1 s of ResNet-50's compile under "auto"
    w = np.abs(np.asarray(w).reshape(-1))
    if w.size == 0 or not np.all(np.isfinite(w)):
        return math.inf
    peak, median = float(w.max()), float(np.median(w))
    if peak == 0.0:
        return 1.0
    return peak / median if median > 0 else math.inf


def lower_chosen(b, op, ins, name: str, pads):
    """Lower the Conv `op` with `name`, one of the algorithms conv.py does not hold itself
    (`choose` gave it, so it applies), `pads` the begin pads (conv.conv_geometry); returns
    the output buffer."""
    if name == "pznet":
        return blocked3d.lower_blocked(b, op, ins, pads)
    if name.startswith("fft"):
        t, fused = fft_variant(name)
        return fft.lower_fft(b, op, ins, pads, t, fused)
    m, fused = winograd_variant(name)
    return winograd.lower_winograd(b, op, ins, pads, m, fused)
