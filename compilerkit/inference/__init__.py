"""Sliding-window inference of a compiled fully-convolutional 3-D model (after ZNNi: Zlateski,
Lee and Seung, SC16): a volume too large to run at once goes through the compiled model patch
by patch, and a planner picks the patch size and Conv algorithm that give the most output
voxels per second under a RAM cap.

    net = inference.inspect(model)                 # checks the model; field of view
    sw = inference.SlidingWindow(model, (32, 32, 32), conv_algorithm="im2col")
    out = sw(volume)                               # (C_out, Z - fov + 1, ...), stitched
    p = inference.plan(model, volume.shape[-3:], ram_bytes=2**30, algorithms=("im2col", "fft"))
    sw = p.sliding_window(model)

Geometry.  The model has one input [1, C, Z, Y, X] and one output [1, K, Z', Y', X'] and only
'valid' operations (Conv and pooling with stride 1 and no pads; pointwise ops), so every output
voxel sees a fixed window of the input, the field of view `fov`, and Z' = Z - fov_z + 1 per axis.
`inspect` finds `fov` by ONNX shape inference at two input sizes (they must give the same
difference) after checking each node; anything else (pads, strides, an op that mixes positions)
is a ValueError naming the node. An output patch of p voxels needs p + fov - 1 input voxels, so
neighbouring input patches overlap by fov - 1 while the output patches tile the output exactly;
where p does not divide an axis, the last patch is moved back to end at the volume's edge (it
recomputes a few voxels; nothing is padded, so the compiled code keeps one static shape).

Memory model.  A patch needs its input (C * prod(p + fov - 1) floats), its output
(K * prod(p)) and the compiled model's scratch arena plus its constants (weights, and the
transformed weights of Winograd or FFT). Arena and constants are not fitted: they are computed
by the compiler's own buffer plan, lowering the model to Kernel IR at that patch shape (no code
generation: tens of milliseconds for im2col, one to two seconds for FFT), cached. The volume
itself is outside the budget (it may live in a memory map or zarr); so are Python's and the
code's own few MB.

Planner.  `plan` takes cube-shaped output patches (clamped to the output on short axes) up to
`max_patch`; per algorithm and size it keeps those whose patch fits `ram_bytes`, then
predicts the time of a patch from compilerkit.roofline, summed over the Conv layers at their
own shapes (`rl.predict`), plus each pooling op and the patch copies at the bandwidth of the
level their bytes fit in, plus CALL_SECONDS per call; and the voxels per second of the whole
volume as out_voxels / (patches * seconds per patch): a large patch
wastes less on the overlap, until the roofline says its working set fell out of a cache. The
pick is the (algorithm, size) with the most predicted voxels per second. The roofline knows the
caches but not everything a large patch costs (on this machine a 128^3 patch ran about 2x its
prediction, a 16^3 one within 30%), so `plan(..., measure=k)` then measures the k best
predicted candidates (a compile and a few runs each) and picks the best measured of them:
predictions narrow the search, a few measurements decide. benchmarks/conv_bench.py --section
znni reports both picks against the best measured.
"""

from compilerkit.inference.net import POINTWISE, WINDOWED, Conv, Net, field_of_view, inspect
from compilerkit.inference.planner import (
    CALL_SECONDS,
    DEFAULT_ALGORITHMS,
    GRID,
    Plan,
    _cube,
    plan,
    predict_patch,
    time_patch,
    volume_throughput,
)
from compilerkit.inference.window import (
    PatchBytes,
    SlidingWindow,
    axis_starts,
    patch_bytes,
    patch_grid,
    stitch,
)

__all__ = ["inspect", "field_of_view", "Net", "Conv", "POINTWISE", "WINDOWED", "axis_starts",
           "patch_grid", "stitch", "PatchBytes", "patch_bytes", "SlidingWindow",
           "predict_patch", "volume_throughput", "Plan", "plan", "time_patch", "GRID",
           "CALL_SECONDS", "DEFAULT_ALGORITHMS", "_cube"]
