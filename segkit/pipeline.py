"""End to end: image -> boundary nets compiled by compilerkit -> a patch loop
over the volume -> affinities -> watershed + agglomeration -> scores against ground truth.

The steps, each a function a notebook can call on its own:

* ``export_onnx(model, in_shape, path)``: a trained Keras boundary net (``segkit.boundary``) at a
  fixed patch shape -> ONNX.  One-input nets (VD2D, N4) go through the project's exporter
  (``mlsys_datasets.keras_export.export_keras``); that exporter takes one input only, so the
  two-input recursive VD2D3D (image + VD2D's map) is exported here with the same calls
  (``model.export`` + ``normalise``), its inputs named ``input`` and ``boundary_in``.
* ``compile_net(model, patch_out)``: export + ``compilerkit.compile`` for the host, timed.
  If compilerkit refuses the net (``UnsupportedOpError`` / ``ModelError``), the net runs in
  TensorFlow instead and the reason is kept in ``CompiledNet.fallback``: never silently.
* ``patch_loop(run, volumes, fov, patch_out)``: 'valid' convolutions, so an output patch of
  ``patch_out`` voxels needs ``patch_out + fov - 1`` input voxels: neighbouring input patches
  overlap by ``fov - 1`` and the output patches tile the volume exactly (the last patch on each
  axis is moved back to end at the volume's edge: one static shape for the compiled code).
  The input is reflect-padded by half the field of view first (``boundary.pad_for``), so the
  stitched output covers the whole volume, the same as ``boundary.predict`` in one pass.
* ``affinities_from_boundary(b)``: a boundary map -> affinities in waterz's layout (the edge
  between two voxels is as strong as the weaker of the two: ``1 - max(b_i, b_j)``); our
  assumption, as the nets here are trained on boundary maps (``boundary.boundary_map``).
* ``segment(aff)``: ``segkit.agglomerate`` (watershed basins, then mean-affinity agglomeration).
* ``evaluate(trained, tests)``: each net of ``boundary.train_all`` scored on held-out volumes,
  its agglomeration threshold chosen on the training volume (``choose_threshold``).
* ``demo(size="smoke")``: all of it: the nets of ``boundary.train_all`` (trained, or loaded from
  its cache), compiled, run over a held-out volume, segmented and scored; a ``DemoResult``.

Assumes Keras 3 on TensorFlow and tf2onnx (the project's exporter); numbers are float32.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compilerkit.inference import axis_starts, stitch

from . import boundary as _boundary
from .validate import arguments, values


# export and compile ------------------------------------------------------------------------
def _fixed(model, in_shape):
    """The same net (shared weights) with a fixed (1, z, y, x, 1) input per branch, inference
    mode (dropout off): what an ONNX file with static shapes needs."""
    import keras

    ins = [keras.Input((*in_shape, 1), batch_size=1, name=("input", "boundary_in")[k])
           for k in range(len(model.inputs))]
    out = model(ins if len(ins) > 1 else ins[0], training=False)
    return keras.Model(ins if len(ins) > 1 else ins[0], out, name=model.name)


def export_onnx(model, in_shape, path):
    """Export a ``segkit.boundary`` net at input patch ``in_shape`` (z, y, x) to ONNX at
    ``path``; returns the ModelProto."""
    import onnx
    from mlsys_datasets.keras_export import OPSET, export_keras, normalise

    in_shape = tuple(int(s) for s in in_shape)
    fixed = _fixed(model, in_shape)
    if len(fixed.inputs) == 1:
        return export_keras(fixed, path)
    # export_keras takes one input; the recursive VD2D3D has two: same calls, done here
    import tf2onnx.utils

    fixed([np.zeros((1, *in_shape, 1), np.float32)] * len(fixed.inputs))
    tf2onnx.utils.INTERNAL_NAME = 1
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.onnx"
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            fixed.export(str(raw), format="onnx", opset_version=OPSET, verbose=False)
        proto = onnx.load(str(raw))
    proto = normalise(proto, graph_name=model.name)
    g = proto.graph
    old = g.input[1].name
    for node in g.node:
        node.input[:] = ["boundary_in" if n == old else n for n in node.input]
    g.input[1].name = "boundary_in"
    onnx.checker.check_model(proto)
    Path(path).write_bytes(proto.SerializeToString(deterministic=True))
    return proto


@dataclass
class CompiledNet:
    """A boundary net ready for the patch loop: ``run(*patches) -> output patch``."""
    name: str
    fov: tuple
    patch_out: tuple
    patch_in: tuple
    compiled: object = None          # compilerkit.CompiledModel, or None (runs in TensorFlow)
    tf_model: object = None          # the fixed-shape Keras model (reference, and fallback)
    compile_seconds: float = 0.0     # export + compile
    fallback: str | None = None      # why it runs in TensorFlow, if it does
    ops: list = field(default_factory=list)  # the ONNX ops of the exported net

    def run(self, *patches):
        """Output patch (z, y, x) from input patches (z, y, x) of shape ``patch_in``."""
        if self.compiled is None:
            return self.run_tf(*patches)
        xs = [np.ascontiguousarray(p, np.float32)[None, ..., None] for p in patches]
        return self.compiled.run(*xs)[0][0, ..., 0]

    def run_tf(self, *patches):
        """The same patch by the Keras model (TensorFlow): the reference."""
        xs = [np.ascontiguousarray(p, np.float32)[None, ..., None] for p in patches]
        return np.asarray(self.tf_model(xs if len(xs) > 1 else xs[0], training=False))[0, ..., 0]


def compile_net(model, patch_out, path=None, opt_level: int = 3) -> CompiledNet:
    """Export ``model`` (a one-output boundary net) at output patch ``patch_out`` (z, y, x) to
    ONNX and compile it for the host.  Nets compilerkit refuses run in TensorFlow; the reason is
    in ``.fallback`` (and a warning says so)."""
    import compilerkit

    if model.outputs[0].shape[-1] != 1:
        raise ValueError(f"{model.name}: the pipeline takes a one-channel boundary map, the net "
                         f"has {model.outputs[0].shape[-1]} outputs")
    fov = tuple(model.field_of_view)
    patch_out = arguments(patch_out=patch_out)
    patch_in = tuple(p + f - 1 for p, f in zip(patch_out, fov, strict=True))
    net = CompiledNet(model.name, fov, patch_out, patch_in, tf_model=_fixed(model, patch_in))
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = Path(path) if path is not None else Path(tmp) / f"{model.name}.onnx"
        proto = export_onnx(model, patch_in, onnx_path)
        net.ops = sorted({n.op_type for n in proto.graph.node})
        shapes = {i.name: [1, *patch_in, 1] for i in proto.graph.input}
        try:
            net.compiled = compilerkit.compile(proto, input_shapes=shapes, opt_level=opt_level,
                                               asm=False)
        except (compilerkit.UnsupportedOpError, compilerkit.ModelError) as error:
            net.fallback = f"compilerkit refused {model.name}: {error}"
            warnings.warn(f"{net.fallback}; {model.name} runs in TensorFlow", stacklevel=2)
    net.compile_seconds = time.perf_counter() - t
    return net


# the patch loop ----------------------------------------------------------------------------
# The sliding window itself (starts, overlap, stitching) is compilerkit.inference's.
_starts = axis_starts


def patch_loop(run, volumes, fov, patch_out, progress: bool = False) -> np.ndarray:
    """Run ``run(*input_patches) -> output patch`` over (z, y, x) ``volumes`` (the image, and
    for the recursive net VD2D's map) and stitch the outputs into a map of the volume's shape.

    Each volume is reflect-padded by half the field of view ``fov``; an output patch at ``s``
    reads input ``[s, s + patch_out + fov - 1)`` of the padded volume (overlap ``fov - 1``),
    stitched by ``compilerkit.inference.stitch``. ``patch_out`` must fit in the volume (use
    the volume's size on a small axis)."""
    patch_out = arguments(patch_out=patch_out)
    volumes = [values(v, f"volumes[{k}]") for k, v in enumerate(volumes)]
    shape = volumes[0].shape
    if any(v.shape != shape for v in volumes):
        raise ValueError(f"volumes of shapes {[v.shape for v in volumes]}: they must agree")
    if any(p > n for p, n in zip(patch_out, shape, strict=True)):
        raise ValueError(f"output patch {tuple(patch_out)} is larger than the volume {shape}")
    pads = [((f - 1) // 2, f - 1 - (f - 1) // 2) for f in fov]
    padded = [np.pad(v.astype(np.float32), pads, mode="reflect") for v in volumes]
    return stitch(run, padded, fov, patch_out, progress=progress).astype(np.float32, copy=False)


def infer(net: CompiledNet, image, prior=None, tf: bool = False, progress: bool = False):
    """The net's boundary map over the whole volume by the patch loop: compiled (or
    TensorFlow with ``tf=True``); returns (map, voxels per second).  The image is
    ``boundary.standardise``d first, as in training and ``boundary.predict``."""
    volumes = [_boundary.standardise(image)] + (
        [values(prior, "prior", 0, 1, what="boundary probabilities")]
        if prior is not None else [])
    t = time.perf_counter()
    out = patch_loop(net.run_tf if tf else net.run, volumes, net.fov, net.patch_out, progress)
    return out, out.size / (time.perf_counter() - t)


# segmentation ------------------------------------------------------------------------------
def affinities_from_boundary(bmap) -> np.ndarray:
    """(Z, Y, X) boundary probabilities -> (3, Z, Y, X) affinities in waterz's layout: the edge
    from a voxel to its -z / -y / -x neighbour is ``1 - max`` of their boundary values (0 on the
    low faces, which have no neighbour)."""
    b = np.asarray(bmap)
    if b.ndim != 3:
        raise ValueError(f"boundary map of shape {b.shape}: expected (z, y, x)")
    b = values(b, "boundary map", 0, 1, what="boundary probabilities")
    inside = 1 - b
    aff = np.zeros((3, *b.shape), np.float32)
    aff[0, 1:] = np.minimum(inside[1:], inside[:-1])
    aff[1, :, 1:] = np.minimum(inside[:, 1:], inside[:, :-1])
    aff[2, :, :, 1:] = np.minimum(inside[:, :, 1:], inside[:, :, :-1])
    return aff


def segment(aff, threshold: float = 0.5) -> np.ndarray:
    """Watershed basins then mean-affinity agglomeration down to ``threshold`` (segkit)."""
    from .linkage import agglomerate

    return agglomerate(aff, threshold, mode="mean")


# the lecture demo --------------------------------------------------------------------------
def choose_threshold(bmap, truth, quantiles=(0.02, 0.05, 0.1, 0.2, 0.3, 0.5)) -> float:
    """The agglomeration threshold with the best adapted Rand F on a *training* volume, among
    quantiles of its affinities (a briefly trained net is not calibrated: its map may sit in a
    narrow band, so fixed thresholds like 0.5 would merge everything)."""
    from .metrics import adapted_rand

    aff = affinities_from_boundary(bmap)
    candidates = np.unique(np.quantile(aff[:, 1:, 1:, 1:], quantiles))
    best = max(candidates, key=lambda t: adapted_rand(truth, segment(aff, float(t)))["f"])
    return float(best)


def evaluate(trained, tests, maps=None) -> dict:
    """Each trained net scored on held-out volumes: its boundary map -> affinities -> watershed
    + mean agglomeration at its threshold (chosen on the training volume, never on a scored
    one) -> ``segkit.metrics.scores``.  ``maps``: {net: [map per test volume]} (e.g. compiled
    inference); by default ``boundary.predict_all`` (TensorFlow, one pass, recursion wired).
    Returns {net: {"f": mean adapted Rand F, "threshold", "per_volume": [scores, ...]}}."""
    from .metrics import scores

    if maps is None:
        per = [_boundary.predict_all(trained.models, vol.image) for vol in tests]
        maps = {name: [m[name] for m in per] for name in trained.models}
    out = {}
    for name in maps:
        t = choose_threshold(trained.train_maps[name], trained.train.labels)
        per_volume = [scores(vol.labels, segment(affinities_from_boundary(m), t))
                      for vol, m in zip(tests, maps[name], strict=True)]
        out[name] = {"f": float(np.mean([s["f"] for s in per_volume])), "threshold": t,
                     "per_volume": per_volume}
    return out


@dataclass
class DemoResult:
    image: np.ndarray                # held-out image (z, y, x)
    truth: np.ndarray                # its ground truth
    boundary: np.ndarray             # final boundary map, compiled path
    boundary_tf: np.ndarray          # the same by TensorFlow, same patch loop
    segmentation: np.ndarray
    scores: dict                     # segkit.metrics.scores: f, precision, recall, voi...
    max_abs_error: float             # compiled vs TensorFlow, over the volume, every net
    compile_seconds: dict            # net -> export + compile seconds
    voxels_per_second: dict          # net -> compiled patch loop throughput
    tf_voxels_per_second: dict       # net -> TensorFlow patch loop throughput
    compiled: dict                   # net -> True (compilerkit) / False (TensorFlow, see notes)
    notes: list                      # fallbacks, in words
    losses: dict                     # net -> training loss per step
    maps: dict                       # net -> boundary map (compiled path)
    threshold: float                 # agglomeration threshold, chosen on the training volume
    net_scores: dict                 # net -> scores of its own map's segmentation
    thresholds: dict                 # net -> its threshold (chosen on the training volume)
    trained: object = None           # boundary.Trained: the nets, curves, training seconds


INFER_PATCH = {"smoke": (4, 16, 16), "full": (8, 64, 64)}  # output patch of compiled inference


def demo(size: str = "smoke", seed: int = 0, nets=_boundary.NETS, progress: bool = True,
         cache=None, trained=None) -> DemoResult:
    """Image -> the nets of ``boundary.train_all(size, seed)`` (or ``trained``) -> compiled
    inference over the first held-out volume (the recursion wired: VD2D3D reads VD2D's
    compiled map) -> watershed + agglomeration -> scores, with the same patch loop run in
    TensorFlow to check the compiled code.  Thresholds are chosen on the training volume."""
    if trained is None:
        trained = _boundary.train_all(size, seed, nets=nets, progress=progress, cache=cache)
    _, tests = _boundary.volumes(trained.size, trained.seed)
    test = tests[0]
    shape = test.image.shape
    patch = tuple(min(a, b) for a, b in zip(INFER_PATCH[trained.size], shape, strict=True))
    maps, maps_tf, secs, vps, tf_vps, compiled, notes = {}, {}, {}, {}, {}, {}, []
    err = 0.0
    for name, model in trained.models.items():
        net = compile_net(model, patch)
        secs[name], compiled[name] = net.compile_seconds, net.compiled is not None
        if net.fallback:
            notes.append(f"{name} runs in TensorFlow: {net.fallback}")
        recursive = name == "VD2D3D"
        maps[name], vps[name] = infer(net, test.image, maps["VD2D"] if recursive else None,
                                      progress=progress)
        maps_tf[name], tf_vps[name] = infer(net, test.image,
                                            maps_tf["VD2D"] if recursive else None, tf=True)
        err = max(err, float(np.abs(maps[name] - maps_tf[name]).max()))
    scored = evaluate(trained, [test], {name: [m] for name, m in maps.items()})
    segs = {name: segment(affinities_from_boundary(maps[name]), scored[name]["threshold"])
            for name in maps}
    final = list(maps)[-1]
    return DemoResult(test.image, test.labels, maps[final], maps_tf[final], segs[final],
                      scored[final]["per_volume"][0], err, secs, vps, tf_vps, compiled, notes,
                      trained.losses, maps, scored[final]["threshold"],
                      {n: r["per_volume"][0] for n, r in scored.items()},
                      {n: r["threshold"] for n, r in scored.items()}, trained)
