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

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

# Ops that keep positions apart (each output voxel from the same voxel of its inputs).
POINTWISE = {"Relu", "LeakyRelu", "Elu", "Selu", "Sigmoid", "Tanh", "Softplus", "HardSigmoid",
             "Identity", "Dropout", "Clip", "Abs", "Neg", "Exp", "Log", "Sqrt",
             "BatchNormalization", "Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "PRelu",
             "Softmax", "LogSoftmax", "Concat"}
WINDOWED = {"Conv", "MaxPool", "AveragePool"}
GRID = 14  # patch sides the planner weighs by default, geometric from 1 to max_patch
CALL_SECONDS = 1e-4  # per patch: the call, argument checks and allocation of the output
DEFAULT_ALGORITHMS = ("im2col", "fft")


# ---- the model ---------------------------------------------------------------------------
def _proto(model):
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, bytes | bytearray):
        return onnx.load_from_string(bytes(model))
    return onnx.load(str(model))


def _attr(node, name, default=None):
    import onnx.helper

    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _shapes_at(proto, size) -> dict:
    """ONNX shape inference with the input's spatial dims set to `size`: {tensor: dims}."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(proto)
    dims = m.graph.input[0].type.tensor_type.shape.dim
    for d, s in zip(dims[2:], size, strict=True):
        d.ClearField("dim_param")
        d.dim_value = int(s)
    dims[0].ClearField("dim_param")
    dims[0].dim_value = 1
    del m.graph.value_info[:]
    for o in m.graph.output:
        o.type.tensor_type.ClearField("shape")
    try:
        m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    except Exception as error:  # onnx raises its own InferenceError
        raise ValueError(f"model {proto.graph.name!r}: shape inference fails at input size "
                         f"{tuple(size)}: {error}") from None
    out = {}
    for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            out[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None
                                 for d in t.shape.dim)
    for init in m.graph.initializer:
        out[init.name] = tuple(init.dims)
    return out


@dataclass(frozen=True)
class Conv:
    """One Conv at a patch shape: C in, K out, output spatial shape, kernel, group, dilation."""
    name: str
    c: int
    k: int
    out: tuple
    kernel: tuple
    group: int = 1
    dilated: bool = False


@dataclass
class Net:
    """What the sliding window needs to know of a model (`inspect`)."""
    proto: object = field(repr=False)
    input: str
    output: str
    channels_in: int
    channels_out: int
    fov: tuple
    key: str = field(repr=False, default="")  # a hash of the model, for caches

    def patch_in(self, patch_out) -> tuple:
        return tuple(int(p) + f - 1 for p, f in zip(patch_out, self.fov, strict=True))

    def layers(self, patch_out) -> tuple[list[Conv], list[tuple[str, int, int]]]:
        """The Convs at output patch `patch_out` (their own output shapes), and the pooling ops
        as (name, input elements, output elements)."""
        shapes = _shapes_at(self.proto, self.patch_in(patch_out))
        inits = {i.name for i in self.proto.graph.initializer}
        convs, pools = [], []
        for node in self.proto.graph.node:
            if node.op_type == "Conv":
                ws = shapes[node.input[1]]
                ys = shapes[node.output[0]]
                convs.append(Conv(node.name or node.output[0], ws[1] * (_attr(node, "group", 1)),
                                  ws[0], tuple(ys[2:]), tuple(ws[2:]), _attr(node, "group", 1),
                                  any(d != 1 for d in (_attr(node, "dilations") or [1]))))
            elif node.op_type in ("MaxPool", "AveragePool") or (
                    node.op_type in POINTWISE and not _fused(self.proto, node, inits)):
                ins = sum(math.prod(shapes[i]) for i in node.input if i and i not in inits)
                pools.append((node.name or node.output[0], ins, math.prod(shapes[node.output[0]])))
        return convs, pools


def _fused(proto, node, inits) -> bool:
    """Whether a pointwise node applies to a Conv's output alone (compilerkit fuses the
    activation into the Conv): not counted as a pass of its own."""
    producer = {o: n for n in proto.graph.node for o in n.output}
    src = [i for i in node.input if i and i not in inits]
    return len(src) == 1 and src[0] in producer and producer[src[0]].op_type == "Conv"


def _check_node(node, shapes, inits) -> None:
    """ValueError unless `node` is a 'valid' windowed op or a pointwise one."""
    label = f"node {node.name or node.output[0]!r} ({node.op_type})"
    if node.op_type not in WINDOWED | POINTWISE:
        raise ValueError(f"{label}: not a valid-convolution op; sliding-window inference takes "
                         f"{', '.join(sorted(WINDOWED))} and pointwise ops only")
    if node.op_type in WINDOWED:
        if (_attr(node, "auto_pad", b"NOTSET") or b"NOTSET") not in (b"NOTSET", b"VALID"):
            raise ValueError(f"{label}: auto_pad {_attr(node, 'auto_pad').decode()} pads the "
                             "input; sliding windows need valid (unpadded) convolutions")
        if any(_attr(node, "pads") or [0]):
            raise ValueError(f"{label}: pads {list(_attr(node, 'pads'))}; sliding windows need "
                             "valid (unpadded) convolutions")
        if any(s != 1 for s in (_attr(node, "strides") or [1])):
            raise ValueError(f"{label}: strides {list(_attr(node, 'strides'))}; sliding windows "
                             "need stride 1 (a strided layer depends on the patch's offset)")
        if _attr(node, "ceil_mode", 0):
            raise ValueError(f"{label}: ceil_mode 1 is not a valid pooling")
    elif node.op_type in ("Softmax", "LogSoftmax", "Concat"):
        axis = _attr(node, "axis", -1 if node.op_type != "Concat" else None)
        if axis not in (1, -4):
            raise ValueError(f"{label}: axis {axis} mixes positions; only the channel axis (1) "
                             "keeps a sliding window exact")
    out = shapes.get(node.output[0])
    for name in node.input:
        s = shapes.get(name)
        if name in inits or not name or s is None or out is None or len(s) < 5:
            if name in inits and s is not None and len(s) >= 3 and any(d != 1 for d in s[-3:]) \
                    and node.op_type not in WINDOWED:
                raise ValueError(f"{label}: constant {name!r} of shape {list(s)} varies over "
                                 "space; a sliding window needs per-channel constants")
            continue
        if node.op_type not in WINDOWED and s[2:] != out[2:]:
            raise ValueError(f"{label}: input {name!r} {list(s)} and output {list(out)} differ "
                             "in space (a crop or broadcast: not sliding-window exact)")


def inspect(model) -> Net:
    """Check that `model` (path, bytes or ModelProto) is a fully-convolutional valid 3-D net
    with one input and one output, and find its field of view (ValueError otherwise)."""
    proto = _proto(model)
    g = proto.graph
    inits = {i.name for i in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    if len(inputs) != 1 or len(g.output) != 1:
        raise ValueError(f"model {g.name!r}: {len(inputs)} inputs and {len(g.output)} outputs; "
                         "sliding-window inference takes one of each")
    dims = inputs[0].type.tensor_type.shape.dim
    if len(dims) != 5:
        raise ValueError(f"model {g.name!r}: input {inputs[0].name!r} has rank {len(dims)}; "
                         "expected [N, C, Z, Y, X]")
    c_in = dims[1].dim_value
    if not c_in:
        raise ValueError(f"model {g.name!r}: input {inputs[0].name!r} has no fixed channel "
                         "count")
    # two sizes: a valid net's output shrinks by the same amount at both
    sizes = [(64, 64, 64), (72, 80, 96)]
    found = []
    for size in sizes:
        shapes = _shapes_at(proto, size)
        for node in g.node:
            _check_node(node, shapes, inits)
        out = shapes.get(g.output[0].name)
        if out is None or len(out) != 5 or None in out:
            raise ValueError(f"model {g.name!r}: output {g.output[0].name!r} has shape {out}; "
                             "expected [1, K, Z, Y, X]")
        found.append((tuple(s - o + 1 for s, o in zip(size, out[2:], strict=True)), out[1]))
    if found[0] != found[1] or min(found[0][0]) < 1:
        raise ValueError(f"model {g.name!r}: output shrinks by {found[0][0]} at input "
                         f"{sizes[0]} but by {found[1][0]} at {sizes[1]}: not a valid "
                         "convolutional net")
    key = hashlib.sha1(proto.SerializeToString(deterministic=True)).hexdigest()
    return Net(proto, inputs[0].name, g.output[0].name, c_in, found[0][1], found[0][0], key)


def field_of_view(model) -> tuple:
    """The model's field of view per axis (z, y, x): output = input - fov + 1."""
    return inspect(model).fov


# ---- patches and stitching ---------------------------------------------------------------
def axis_starts(n: int, p: int) -> list[int]:
    """Output patch starts along an axis of `n` output voxels, patches of `p`: tiles, the
    last one moved back to end at `n` (so it overlaps the one before; nothing is padded)."""
    if p >= n:
        return [0]
    return list(range(0, n - p, p)) + [n - p]


def patch_grid(out_shape, patch_out) -> list[tuple]:
    """Every output patch start (z, y, x) over an output of `out_shape`."""
    import itertools

    return list(itertools.product(*(axis_starts(n, p)
                                     for n, p in zip(out_shape, patch_out, strict=True))))


def stitch(run, volumes, fov, patch_out, progress: bool = False, desc: str = "patches"):
    """Run `run(*input_patches) -> output patch` over `volumes` (arrays whose last three axes
    are z, y, x, all of one spatial shape) and stitch the results into one array: leading
    axes as `run` returns them, spatial shape volume - fov + 1. The output patch at s reads
    input [s, s + patch_out + fov - 1) on each axis (overlap fov - 1)."""
    from tqdm.auto import tqdm

    shape = volumes[0].shape[-3:]
    if any(v.shape[-3:] != shape for v in volumes):
        raise ValueError(f"volumes of shapes {[v.shape for v in volumes]}: their last three "
                         "axes must agree")
    out_shape = tuple(n - f + 1 for n, f in zip(shape, fov, strict=True))
    if min(out_shape) < 1:
        raise ValueError(f"volume {tuple(shape)} is smaller than the field of view "
                         f"{tuple(fov)} on an axis")
    patch_out = tuple(int(p) for p in patch_out)
    if len(patch_out) != 3 or min(patch_out) < 1:
        raise ValueError(f"patch_out must be three sizes >= 1 (z, y, x), got {patch_out!r}")
    if any(p > n for p, n in zip(patch_out, out_shape, strict=True)):
        raise ValueError(f"output patch {patch_out} is larger than the output {out_shape} "
                         f"(volume {tuple(shape)}, field of view {tuple(fov)})")
    out = None
    for z, y, x in tqdm(patch_grid(out_shape, patch_out), disable=not progress, desc=desc):
        window = (Ellipsis,) + tuple(slice(s, s + p + f - 1) for s, p, f in
                                     zip((z, y, x), patch_out, fov, strict=True))
        result = np.asarray(run(*[v[window] for v in volumes]))
        if result.shape[-3:] != patch_out:
            raise ValueError(f"the model returned a patch of {result.shape}, expected "
                             f"spatial {patch_out}")
        if out is None:
            out = np.empty(result.shape[:-3] + out_shape, result.dtype)
        out[..., z:z + patch_out[0], y:y + patch_out[1], x:x + patch_out[2]] = result
    return out


# ---- memory ------------------------------------------------------------------------------
_PLANNED: dict = {}  # (model hash, patch_in, algorithm) -> (arena, constant bytes)


def _planned_bytes(net: Net, patch_in: tuple, algorithm: str) -> tuple[int, int]:
    """(arena, constant bytes) of the model lowered to Kernel IR at `patch_in` (cached)."""
    from compilerkit.dialects import onnx as onnx_d
    from compilerkit.onnx_passes.single_node import main_func
    from compilerkit.pipeline import compile_to

    key = (net.key, patch_in, algorithm)
    if key in _PLANNED:
        return _PLANNED[key]
    k = compile_to("kernel-ir", net.proto,
                   input_shapes={net.input: [1, net.channels_in, *patch_in]},
                   conv_algorithm=algorithm)
    arena = main_func(k).attributes["arena_bytes"].value.data
    consts = 0
    for op in k.walk():
        if op.name == "krnl.global":
            t = op.results[0].type
            consts += math.prod(t.get_shape()) * onnx_d.numpy_dtype(t.element_type).itemsize
    _PLANNED[key] = (int(arena), int(consts))
    return _PLANNED[key]


@dataclass(frozen=True)
class PatchBytes:
    """The memory model of one patch (bytes)."""
    input: int
    output: int
    arena: int
    constants: int

    @property
    def total(self) -> int:
        return self.input + self.output + self.arena + self.constants


def patch_bytes(net: Net, patch_out, algorithm: str = "classic") -> PatchBytes:
    """Input + output patch (f32) + the compiled model's arena and constants at that patch
    (from the compiler's buffer plan: `_planned_bytes`)."""
    patch_out = tuple(int(p) for p in patch_out)
    patch_in = net.patch_in(patch_out)
    arena, consts = _planned_bytes(net, patch_in, algorithm)
    return PatchBytes(4 * net.channels_in * math.prod(patch_in),
                      4 * net.channels_out * math.prod(patch_out), arena, consts)


# ---- running -----------------------------------------------------------------------------
class SlidingWindow:
    """A model compiled at one output patch; call it on a volume to run it patch by patch."""

    def __init__(self, model, patch_out, conv_algorithm: str = "classic", num_threads=1,
                 net: Net | None = None, **compile_options):
        import compilerkit

        self.net = net or inspect(model)
        self.patch_out = tuple(int(p) for p in patch_out)
        if len(self.patch_out) != 3 or min(self.patch_out) < 1:
            raise ValueError(f"patch_out must be three sizes >= 1 (z, y, x), got {patch_out!r}")
        self.patch_in = self.net.patch_in(self.patch_out)
        self.conv_algorithm = conv_algorithm
        self.compiled = compilerkit.compile(
            self.net.proto, input_shapes={self.net.input: [1, self.net.channels_in,
                                                           *self.patch_in]},
            conv_algorithm=conv_algorithm, num_threads=num_threads, **compile_options)

    @property
    def fov(self) -> tuple:
        return self.net.fov

    def bytes(self) -> PatchBytes:
        """The memory model of this patch (patch_bytes)."""
        return patch_bytes(self.net, self.patch_out, self.conv_algorithm)

    def run_patch(self, x):
        """(C, *patch_in) -> (K, *patch_out)."""
        return self.compiled.run(np.ascontiguousarray(x, np.float32)[None])[0][0]

    def __call__(self, volume, progress: bool = True):
        """(C, Z, Y, X) volume, or (Z, Y, X) for a one-channel model -> (K, Z', Y', X')."""
        v = np.asarray(volume, np.float32)
        if v.ndim == 3 and self.net.channels_in == 1:
            v = v[None]
        if v.ndim != 4 or v.shape[0] != self.net.channels_in:
            raise ValueError(f"volume of shape {v.shape}: expected ({self.net.channels_in}, "
                             "Z, Y, X)")
        out_shape = tuple(n - f + 1 for n, f in zip(v.shape[1:], self.fov, strict=True))
        if min(out_shape) < 1:
            raise ValueError(f"volume {v.shape[1:]} is smaller than the field of view "
                             f"{self.fov} on an axis")
        return stitch(self.run_patch, [v], self.fov, self.patch_out, progress=progress)


# ---- the planner -------------------------------------------------------------------------
def _layer_algorithm(conv: Conv, algorithm: str) -> str:
    """What the roofline models for this Conv under `algorithm` (conv_algorithm.choose's
    fall-backs: FFT needs a kernel > 1, group 1, no dilation; Winograd 3x3x3; else im2col)."""
    if algorithm.startswith("fft") and max(conv.kernel) > 1 and conv.group == 1 \
            and not conv.dilated:
        return algorithm
    if algorithm.startswith("winograd") and conv.kernel == (3, 3, 3) and conv.group == 1 \
            and not conv.dilated:
        return algorithm
    return "im2col"


def predict_patch(net: Net, patch_out, algorithm: str, machine=None) -> dict:
    """Predicted seconds of one patch: per Conv `roofline.predict` at its own shape (the
    kernel taken as a cube of its largest side), per pooling or unfused pointwise op its
    bytes at the bandwidth of the level they fit in, the input and output copies, and
    CALL_SECONDS. Returns {"seconds", "layers": {name: seconds}}."""
    from compilerkit import roofline as rl

    m = machine or rl.machine()
    convs, pools = net.layers(patch_out)
    per = {}
    for cv in convs:
        a = _layer_algorithm(cv, algorithm)
        per[cv.name] = rl.predict(rl.Layer(cv.c, cv.k, cv.out, max(cv.kernel)), a, m)
    for name, n_in, n_out in pools:
        nbytes = 4 * (n_in + n_out)
        per[name] = nbytes / m.bandwidth[m.level_of(nbytes)]
    io = 4 * (net.channels_in * math.prod(net.patch_in(patch_out))
              + net.channels_out * math.prod(patch_out))
    per["copies"] = 2 * io / m.bandwidth[m.level_of(io)] + CALL_SECONDS
    return {"seconds": sum(per.values()), "layers": per}


def volume_throughput(out_shape, patch_out, seconds_per_patch: float) -> float:
    """Output voxels per second over a whole output of `out_shape` at `seconds_per_patch`."""
    return math.prod(out_shape) / (len(patch_grid(out_shape, patch_out)) * seconds_per_patch)


@dataclass
class Plan:
    """The planner's pick and every candidate it weighed."""
    algorithm: str
    patch_out: tuple
    patch_in: tuple
    bytes: PatchBytes
    predicted_seconds: float  # per patch
    predicted_voxels_per_s: float  # over the whole volume
    patches: int
    ram_bytes: int
    candidates: list = field(default_factory=list)  # dicts: algorithm, size, bytes, ...
    measured: bool = False  # picked among the top predictions by measurement (plan's measure)

    def sliding_window(self, model, **options) -> SlidingWindow:
        return SlidingWindow(model, self.patch_out, conv_algorithm=self.algorithm, **options)


def _cube(s: int, out_shape) -> tuple:
    return tuple(min(s, n) for n in out_shape)


def time_patch(net: Net, algorithm: str, patch_out, repeat: int = 2) -> float:
    """Measured seconds of one patch: compiled at `patch_out` (1 thread), best thread CPU
    time of `repeat` calls after a warm-up (time.thread_time: the code runs on the calling
    thread, so time the core was lent to other processes is left out)."""
    import time

    sw = SlidingWindow(net.proto, patch_out, conv_algorithm=algorithm, num_threads=1, net=net,
                       asm=False)
    x = np.random.default_rng(0).standard_normal((net.channels_in, *sw.patch_in))
    x = x.astype(np.float32)
    sw.run_patch(x)
    best = math.inf
    for _ in range(repeat):
        t = time.thread_time()
        sw.run_patch(x)
        best = min(best, time.thread_time() - t)
    return best


def plan(model, volume_shape, ram_bytes: int, algorithms=DEFAULT_ALGORITHMS,
         max_patch: int | None = None, sizes=None, machine=None, measure: int = 0,
         timer=None) -> Plan:
    """The (algorithm, output patch) with the most predicted output voxels per second over a
    volume of `volume_shape` (z, y, x) whose patch fits `ram_bytes` (the memory model).
    Patches are cubes of side s (clamped to the output on short axes): the sides in `sizes`
    (a list, or {algorithm: list}), else GRID sides spaced geometrically from 1 to
    `max_patch` (default: the output's largest side). Each side's memory is the compiler's
    plan (`patch_bytes`, not assumed monotone in the side: the Conv schedules change with the
    shape); its time is predicted
    (`predict_patch`). With `measure=k` the k candidates of most predicted throughput are
    then measured (`timer(algorithm, patch_out) -> seconds`, default `time_patch`: a compile
    and a few runs each) and the pick is the best measured of them; else predictions only."""
    from compilerkit import roofline as rl
    from compilerkit.lowering.conv_algorithm import check_algorithm

    net = model if isinstance(model, Net) else inspect(model)
    m = machine or rl.machine()
    volume_shape = tuple(int(s) for s in volume_shape)
    out_shape = tuple(n - f + 1 for n, f in zip(volume_shape, net.fov, strict=True))
    if len(volume_shape) != 3 or min(out_shape) < 1:
        raise ValueError(f"volume {volume_shape} is smaller than the field of view {net.fov} "
                         "on an axis (or not three sizes z, y, x)")
    if not algorithms:
        raise ValueError("algorithms: name at least one conv_algorithm")
    for a in algorithms:
        check_algorithm(a)
    top = min(max_patch or max(out_shape), max(out_shape))
    default = np.unique(np.geomspace(1, top, GRID).round().astype(int)).tolist()
    candidates, smallest = [], {}
    for a in algorithms:
        grid = (sizes.get(a, []) if isinstance(sizes, dict) else sizes) or default
        grid = sorted({int(s) for s in grid if 1 <= s <= top})
        smallest[a] = patch_bytes(net, (1, 1, 1), a).total
        for s in grid:
            p = _cube(s, out_shape)
            need = patch_bytes(net, p, a).total
            if need > ram_bytes:
                continue
            pred = predict_patch(net, p, a, m)
            candidates.append({"algorithm": a, "side": s, "patch_out": p, "bytes": need,
                               "predicted_seconds": pred["seconds"],
                               "predicted_patch_voxels_per_s": math.prod(p) / pred["seconds"],
                               "predicted_voxels_per_s": volume_throughput(out_shape, p,
                                                                           pred["seconds"]),
                               "patches": len(patch_grid(out_shape, p))})
    if not candidates:
        need = min(smallest.values())
        raise ValueError(f"ram_bytes {ram_bytes} is below the smallest valid patch (output "
                         f"1x1x1, input {net.patch_in((1, 1, 1))}), which needs {need} bytes "
                         f"({', '.join(f'{a}: {b}' for a, b in smallest.items())})")
    best = max(candidates, key=lambda r: r["predicted_voxels_per_s"])
    if measure:
        timer = timer or (lambda a, p: time_patch(net, a, p))
        top = sorted(candidates, key=lambda r: -r["predicted_voxels_per_s"])[:measure]
        for r in top:
            r["measured_seconds"] = float(timer(r["algorithm"], r["patch_out"]))
            r["measured_voxels_per_s"] = volume_throughput(out_shape, r["patch_out"],
                                                           r["measured_seconds"])
        best = max(top, key=lambda r: r["measured_voxels_per_s"])
    p = best["patch_out"]
    return Plan(best["algorithm"], p, net.patch_in(p), patch_bytes(net, p, best["algorithm"]),
                best["predicted_seconds"], best["predicted_voxels_per_s"], best["patches"],
                int(ram_bytes), candidates, bool(measure))
