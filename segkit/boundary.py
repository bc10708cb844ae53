"""Boundary detection nets for anisotropic serial-section EM (Lee, Zlateski et al., "Recursive
training of 2D-3D convolutional networks for neuronal boundary detection"), as Keras models.

The layer specs follow seung-lab/znn-release's ``networks/``: VD2D.znn, VD2D3D.znn and
N4_A.znn.  ZNN trains them densely: a max *filter* (max pooling with stride 1) keeps the output
dense, and every convolution after it is "sparse", i.e. dilated by the product of the strides
the pooling would have had.  Here: MaxPooling3D(strides=1) and Conv3D(dilation_rate=...), which
gives the papers' fields of view (VD2D 109x109x1, VD2D3D 85x85x5, N4 95x95x1) with 'valid'
convolutions.

- VD2D: 2D only (1x3x3 filters, a 1x2x2 one); widths 24-36-48-60-200.
- VD2D3D: two input branches (the image, and VD2D's boundary map: the recursion) summed at
  conv1c, 2D filters first, then a 2x2x2 max filter and 2x3x3 filters for 3D context.
- N4: the earlier 2D max-pooling net (Ciresan et al.): 48 maps, 1x4x4 / 1x5x5 filters.

``width`` scales every hidden layer's maps (1.0 = the published nets: about 230K, 296K and 219K
parameters); the notebooks use smaller widths on a 2-core CPU.  Outputs are ``outputs`` sigmoid
maps: 1 for a boundary map, 3 for affinities.  Dropout (0.5, before the output as in the .znn
files) is active in training only.

Training (``train``, ``train_all``): membrane maps of the ground truth as targets
(``boundary_map``), each section of the image standardised (``standardise``, ZNN's
``standard2D``), Adam on random patches flipped and rotated (``augment``) with a
class-rebalanced binary cross-entropy (``rebalance``); VD2D first, then VD2D3D on the image and
VD2D's map of the training volume (the recursion).  ``TRAINING`` holds the sizes ("smoke" for
tests, "full" for the figures: width 0.25, each net a few minutes on 2 cores).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .validate import arguments, values
from .validate import labels as _labels


def _w(n, width):
    return max(1, int(round(n * width)))


@functools.cache
def _sparse_max_filter_layer():
    """Keras layer class for ZNN's sparse max filter (made on first use: keras loads lazily)."""
    import keras

    @keras.saving.register_keras_serializable(package="segkit")
    class SparseMaxFilter(keras.layers.Layer):
        """Max over ``size`` voxels spaced ``dilation`` apart per axis, 'valid', stride 1:
        ZNN's max_filter after earlier max filters (a max pooling kept dense)."""

        def __init__(self, size, dilation, **kwargs):
            super().__init__(**kwargs)
            self.size, self.dilation = tuple(size), tuple(dilation)

        def call(self, x):
            for axis, (s, d) in enumerate(zip(self.size, self.dilation, strict=True), start=1):
                if s == 1:
                    continue
                n = x.shape[axis] if x.shape[axis] is not None else keras.ops.shape(x)[axis]
                keep = n - (s - 1) * d
                parts = []
                for k in range(s):
                    index = [slice(None)] * 5
                    index[axis] = slice(k * d, k * d + keep)
                    parts.append(x[tuple(index)])
                out = parts[0]
                for p in parts[1:]:
                    out = keras.ops.maximum(out, p)
                x = out
            return x

        def compute_output_shape(self, shape):
            shape = list(shape)
            for axis, (s, d) in enumerate(zip(self.size, self.dilation, strict=True), start=1):
                if shape[axis] is not None:
                    shape[axis] -= (s - 1) * d
            return tuple(shape)

        def get_config(self):
            return {**super().get_config(), "size": self.size, "dilation": self.dilation}

    return SparseMaxFilter


def _stack(x, specs, width, dilation=(1, 1, 1), name=""):
    """Apply ("conv", maps, kernel) / ("pool", size, stride) specs ZNN-style: max filters and
    convolutions dilated by the strides of the poolings before them."""
    import keras

    d = list(dilation)
    for i, spec in enumerate(specs):
        if spec[0] == "conv":
            _, maps, kernel = spec
            x = keras.layers.Conv3D(_w(maps, width), kernel, dilation_rate=tuple(d),
                                    activation="relu", kernel_initializer="he_normal",
                                    name=f"{name}conv{i}")(x)
        else:
            _, size, stride = spec
            if all(dd == 1 for dd in d):
                x = keras.layers.MaxPooling3D(size, strides=1, name=f"{name}pool{i}")(x)
            else:
                x = _sparse_max_filter_layer()(size, tuple(d), name=f"{name}pool{i}")(x)
            d = [dd * st for dd, st in zip(d, stride, strict=True)]
    return x, d


VD2D_LAYERS = [("conv", 24, (1, 3, 3)), ("conv", 24, (1, 3, 3)), ("conv", 24, (1, 2, 2)),
               ("pool", (1, 2, 2), (1, 2, 2)),
               ("conv", 36, (1, 3, 3)), ("conv", 36, (1, 3, 3)), ("pool", (1, 2, 2), (1, 2, 2)),
               ("conv", 48, (1, 3, 3)), ("conv", 48, (1, 3, 3)), ("pool", (1, 2, 2), (1, 2, 2)),
               ("conv", 60, (1, 3, 3)), ("conv", 60, (1, 3, 3)), ("pool", (1, 2, 2), (1, 2, 2)),
               ("conv", 200, (1, 3, 3))]
# after the two input branches meet at conv1c
VD2D3D_TRUNK = [("pool", (1, 2, 2), (1, 2, 2)),
                ("conv", 36, (1, 3, 3)), ("conv", 36, (1, 3, 3)), ("pool", (1, 2, 2), (1, 2, 2)),
                ("conv", 48, (1, 3, 3)), ("conv", 48, (1, 3, 3)), ("pool", (2, 2, 2), (1, 2, 2)),
                ("conv", 60, (2, 3, 3)), ("conv", 60, (2, 3, 3)), ("conv", 100, (2, 3, 3))]
N4_LAYERS = [("conv", 48, (1, 4, 4)), ("pool", (1, 2, 2), (1, 2, 2)),
             ("conv", 48, (1, 5, 5)), ("pool", (1, 2, 2), (1, 2, 2)),
             ("conv", 48, (1, 4, 4)), ("pool", (1, 2, 2), (1, 2, 2)),
             ("conv", 48, (1, 4, 4)), ("pool", (1, 2, 2), (1, 2, 2)),
             ("conv", 200, (1, 3, 3))]


def field_of_view(specs, dilation=(1, 1, 1)) -> tuple[int, int, int]:
    """Voxels of input seen by one output voxel, per axis (z, y, x)."""
    fov, d = [1, 1, 1], list(dilation)
    for spec in specs:
        size = spec[2] if spec[0] == "conv" else spec[1]
        fov = [f + (s - 1) * dd for f, s, dd in zip(fov, size, d, strict=True)]
        if spec[0] == "pool":
            d = [dd * st for dd, st in zip(d, spec[2], strict=True)]
    return tuple(fov)


FOV = {"vd2d": field_of_view(VD2D_LAYERS),
       "vd2d3d": field_of_view(VD2D_LAYERS[:3] + VD2D3D_TRUNK),
       "n4": field_of_view(N4_LAYERS)}


def _head(x, outputs, dropout, name):
    import keras

    if dropout:
        x = keras.layers.Dropout(dropout, name=f"{name}dropout")(x)
    return keras.layers.Conv3D(outputs, 1, activation="sigmoid", name=f"{name}output")(x)


def vd2d(width: float = 1.0, outputs: int = 1, depth: int | None = None,
         dropout: float = 0.5):
    """VD2D: a deep 2D net, section by section (output depth = input depth)."""
    import keras

    fov = FOV["vd2d"]
    inp = keras.Input((depth, None, None, 1), name="image")
    x, _ = _stack(inp, VD2D_LAYERS, width, name="vd2d_")
    model = keras.Model(inp, _head(x, outputs, dropout, "vd2d_"), name="VD2D")
    model.field_of_view = fov
    return model


def vd2d3d(width: float = 1.0, outputs: int = 1, depth: int | None = None, dropout: float = 0.5,
           recursive: bool = True):
    """VD2D3D: the image and (``recursive``) VD2D's boundary map in, 3D context from a 2x2x2
    max filter and 2x3x3 filters; input depth (if fixed) >= 5, the z field of view."""
    import keras

    fov = FOV["vd2d3d"]
    if depth is not None and depth < fov[0]:
        raise ValueError(f"VD2D3D sees {fov[0]} sections; depth={depth} is too small")
    image = keras.Input((depth, None, None, 1), name="image")
    branches = [image]
    inputs = [image]
    if recursive:
        prior = keras.Input((depth, None, None, 1), name="boundary_in")
        inputs.append(prior)
        branches.append(prior)
    summed = []
    for b, src in enumerate(branches):
        tag = ("img_", "rec_")[b]
        x, _ = _stack(src, VD2D_LAYERS[:2], width, name=tag)
        # conv1c of each branch, summed into one node (ZNN's sum node nconv1c), one bias
        summed.append(keras.layers.Conv3D(_w(24, width), (1, 2, 2), use_bias=(b == 0),
                                          kernel_initializer="he_normal",
                                          name=f"{tag}conv1c")(x))
    x = summed[0] if len(summed) == 1 else keras.layers.Add(name="conv1c_sum")(summed)
    x = keras.layers.Activation("relu", name="conv1c_relu")(x)
    x, _ = _stack(x, VD2D3D_TRUNK, width, name="vd2d3d_")
    # one input given alone, not as a list: Keras warns when called with a bare tensor otherwise
    model = keras.Model(inputs if len(inputs) > 1 else image, _head(x, outputs, dropout, "vd2d3d_"),
                        name="VD2D3D")
    model.field_of_view = fov
    return model


def n4(width: float = 1.0, outputs: int = 1, depth: int | None = None, dropout: float = 0.0):
    """N4: the 2D max-pooling baseline (Ciresan et al. 2012), as in ZNN's N4_A.znn."""
    import keras

    inp = keras.Input((depth, None, None, 1), name="image")
    x, _ = _stack(inp, N4_LAYERS, width, name="n4_")
    model = keras.Model(inp, _head(x, outputs, dropout, "n4_"), name="N4")
    model.field_of_view = FOV["n4"]
    return model


BUILDERS = {"vd2d": vd2d, "vd2d3d": vd2d3d, "n4": n4}


# data ------------------------------------------------------------------------------------
def boundary_map(labels: np.ndarray) -> np.ndarray:
    """1 on membrane voxels, else 0: a voxel whose neighbour along z, y or x (either side) has
    another label, or whose label is 0 (background).

    The same rule draws the dark membranes of the synthetic EM image (``mlsys_datasets.em``), so
    the target is what the image shows, including the faces between objects stacked in z (the
    sections where one cell ends and the next begins); and it is symmetric (both sides of a
    label change), so flipped and rotated patches keep their targets (``augment``)."""
    labels = np.asarray(labels)
    if labels.ndim != 3:
        raise ValueError(f"labels of shape {labels.shape}: expected (z, y, x)")
    labels = _labels(labels, "labels")  # a NaN label differs from itself: a false membrane
    b = labels == 0
    for axis in range(3):
        lo, hi = [slice(None)] * 3, [slice(None)] * 3
        lo[axis], hi[axis] = slice(None, -1), slice(1, None)
        differ = labels[tuple(lo)] != labels[tuple(hi)]
        b[tuple(lo)] |= differ
        b[tuple(hi)] |= differ
    return b.astype(np.float32)


def standardise(image: np.ndarray) -> np.ndarray:
    """ZNN's ``standard2D`` preprocessing of the image: each section to zero mean and unit
    standard deviation (the nets see contrast, not the microscope's brightness of the day).
    ``train``, ``predict`` and ``segkit.pipeline.infer`` apply it to the image (not to VD2D's
    boundary map, the recursive input, which is a probability already)."""
    image = np.asarray(image)
    if image.ndim != 3:
        raise ValueError(f"image of shape {image.shape}: expected (z, y, x)")
    image = values(image, "image")  # one NaN voxel would turn its whole section into NaN
    mean = image.mean(axis=(1, 2), keepdims=True)
    std = image.std(axis=(1, 2), keepdims=True)
    return (image - mean) / np.maximum(std, np.float32(1e-6))


def pad_for(model, volume: np.ndarray) -> np.ndarray:
    """Reflect-pad a (z, y, x) volume by half the field of view, so that the net's 'valid'
    output covers the whole volume."""
    fz, fy, fx = model.field_of_view
    pads = [((f - 1) // 2, f - 1 - (f - 1) // 2) for f in (fz, fy, fx)]
    return np.pad(volume, pads, mode="reflect")


def predict(model, image: np.ndarray, prior: np.ndarray | None = None) -> np.ndarray:
    """The model's output over the whole (z, y, x) volume, densely (one pass, padded); the
    image is ``standardise``d first."""
    inputs = [pad_for(model, standardise(image))[None, ..., None].astype(np.float32)]
    if prior is not None:
        prior = values(prior, "prior", 0, 1, what="boundary probabilities")
        inputs.append(pad_for(model, prior)[None, ..., None].astype(np.float32))
    depth = model.inputs[0].shape[1]
    if depth is not None and depth != inputs[0].shape[1]:
        raise ValueError(f"{model.name} was built for {depth} sections of padded input; "
                         f"the padded volume has {inputs[0].shape[1]}")
    out = model(inputs if len(inputs) > 1 else inputs[0], training=False)
    return np.asarray(out)[0]


def augment(rng, arrays):
    """One random symmetry for one training sample, the same for every array of it (inputs and
    target): flips in z, y and x and a y/x transpose (with the flips: the eight rotations and
    reflections of the section).  Input and output patches stay aligned because each output
    voxel's window is centred on it (odd fields of view) and y/x patches are square."""
    flip_z, flip_y, flip_x, swap = (bool(b) for b in rng.integers(0, 2, 4))
    out = []
    for a in arrays:
        if flip_z:
            a = a[::-1]
        if flip_y:
            a = a[:, ::-1]
        if flip_x:
            a = a[:, :, ::-1]
        if swap and a.shape[1] == a.shape[2]:
            a = a.transpose(0, 2, 1)
        out.append(a)
    return out


def rebalance(y: np.ndarray) -> np.ndarray:
    """Per-voxel loss weights so that boundary and interior voxels each carry half of the loss
    (ZNN's ``rebalance``): without it a net predicting 'interior' everywhere is already close to
    the minimum, since most voxels are interior."""
    pos = y > 0.5
    n, npos = y.size, int(pos.sum())
    if npos in (0, n):
        return np.ones(y.shape, np.float32)
    return np.where(pos, 0.5 * n / npos, 0.5 * n / (n - npos)).astype(np.float32)


def sample_patches(rng, padded, target, out_shape, batch, flips: bool = False):
    """Random training patches: ``padded`` inputs (reflect-padded by ``pad_for``) and the
    targets of the same place, ``out_shape`` voxels each (``flips``: ``augment`` each)."""
    size = target.shape
    if any(o > s for o, s in zip(out_shape, size, strict=True)):
        raise ValueError(f"volume {size} is smaller than one output patch {tuple(out_shape)}")
    ins = [o + p - s for o, p, s in zip(out_shape, padded[0].shape, size, strict=True)]
    xs, ys = [[] for _ in padded], []
    for _ in range(batch):
        c = [int(rng.integers(0, s - o + 1)) for s, o in zip(size, out_shape, strict=True)]
        sample = [arr[c[0]:c[0] + ins[0], c[1]:c[1] + ins[1], c[2]:c[2] + ins[2]]
                  for arr in padded]
        sample.append(target[c[0]:c[0] + out_shape[0], c[1]:c[1] + out_shape[1],
                             c[2]:c[2] + out_shape[2]])
        if flips:
            sample = augment(rng, sample)
        for k in range(len(padded)):
            xs[k].append(sample[k])
        ys.append(sample[-1])
    return [np.stack(x)[..., None].astype(np.float32) for x in xs], \
        np.stack(ys)[..., None].astype(np.float32)


def train(model, image, target, prior=None, steps: int = 200, batch: int = 4,
          out_shape=(1, 8, 8), learning_rate: float = 1e-3, seed: int = 0,
          progress: bool = True, flips: bool = True, balance: bool = True) -> list[float]:
    """Train on random patches of one volume with Keras: Adam, binary cross-entropy,
    ``balance``: class-rebalanced (``rebalance``), ``flips``: augmented (``augment``); returns
    the loss per step.  ``prior`` is VD2D's boundary map for the recursive VD2D3D."""
    import keras
    from tqdm.auto import trange

    steps, batch, out_shape, learning_rate = arguments(
        steps=steps, batch=batch, out_shape=out_shape, learning_rate=learning_rate)
    target = values(target, "target", 0, 1, what="boundary labels")
    if prior is not None:
        prior = values(prior, "prior", 0, 1, what="boundary probabilities")
    if image.shape != target.shape or (prior is not None and prior.shape != image.shape):
        raise ValueError(f"image {image.shape}, target {target.shape}"
                         + (f", prior {prior.shape}" if prior is not None else "")
                         + ": shapes must agree")
    if (prior is not None) != (len(model.inputs) == 2):
        raise ValueError(f"{model.name} takes {len(model.inputs)} input(s): "
                         + ("give VD2D's map as prior" if prior is None else "no prior"))
    depth = model.inputs[0].shape[1]
    if depth is not None:
        out_shape = (depth - model.field_of_view[0] + 1, *out_shape[1:])
    if flips and any(f % 2 == 0 for f in model.field_of_view):
        raise ValueError(f"{model.name}: field of view {model.field_of_view} is even on an axis; "
                         "flipped patches would shift against their targets (flips=False)")
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss="binary_crossentropy")
    rng = np.random.default_rng(seed)
    padded = [pad_for(model, standardise(image))]
    if prior is not None:
        padded.append(pad_for(model, prior))
    losses = []
    for _ in trange(steps, disable=not progress, desc=model.name):
        xs, y = sample_patches(rng, padded, target, out_shape, batch, flips=flips)
        weight = rebalance(y[..., 0]) if balance else None
        losses.append(float(model.train_on_batch(xs if len(xs) > 1 else xs[0], y,
                                                 sample_weight=weight)))
    return losses


def predict_all(models: dict, image: np.ndarray) -> dict:
    """Each net's boundary map of ``image`` (``predict``), in order, wired as the paper's
    recursion: VD2D3D's second input is VD2D's map of the same image."""
    maps = {}
    for name, model in models.items():
        if name == "VD2D3D" and "VD2D" not in maps:
            raise ValueError("VD2D3D reads VD2D's map: put VD2D before it")
        prior = maps["VD2D"] if name == "VD2D3D" else None
        maps[name] = predict(model, image, prior)[..., 0]
    return maps


# the three nets, trained in turn ---------------------------------------------------------
# Scaled to a 2-core CPU: every hidden layer's maps x ``width`` (fields of view as published),
# output patches of one section of ``patch`` voxels (VD2D3D: 5 sections in, 1 out), ``steps``
# Adam steps per net; VD2D3D trains on VD2D's map of the training volume (the recursion).
TRAINING = {
    "smoke": dict(shape=(7, 32, 32), width=0.2, patch=(1, 12, 12), batch=2,
                  steps={"N4": 8, "VD2D": 8, "VD2D3D": 6}, learning_rate=3e-3,
                  missing_sections=1, heldout=1),
    "full": dict(shape=(24, 192, 192), width=0.25, patch=(1, 64, 64), batch=1,
                 steps={"N4": 600, "VD2D": 600, "VD2D3D": 300}, learning_rate=1e-3,
                 missing_sections=2, heldout=2),
}
NETS = ("N4", "VD2D", "VD2D3D")


def volumes(size: str = "full", seed: int = 0):
    """The training volume and the held-out ones (``mlsys_datasets.em``), with missing sections:
    (train, [test, ...]); seeds ``seed + 1`` and ``seed + 101, seed + 102, ...``."""
    from mlsys_datasets.em import em_volume

    cfg = _config(size)
    kw = dict(missing_sections=cfg["missing_sections"])
    return (em_volume(cfg["shape"], seed=seed + 1, **kw),
            [em_volume(cfg["shape"], seed=seed + 101 + k, **kw) for k in range(cfg["heldout"])])


def _config(size):
    if size not in TRAINING:
        raise ValueError(f"size {size!r}: one of {sorted(TRAINING)}")
    return TRAINING[size]


@dataclass
class Trained:
    """``train_all``'s result: the nets by name, their losses per step and training seconds, the
    training volume and each net's map of it (VD2D3D's input, thresholds are chosen on them)."""
    size: str
    seed: int
    models: dict
    losses: dict
    seconds: dict
    train: object                  # mlsys_datasets.em.EMVolume
    train_maps: dict = field(default_factory=dict)
    cached: bool = False


def build(name: str, size: str = "full", **kw):
    """A net of ``NETS`` at the width of ``TRAINING[size]``, with dropout off (see train_all)."""
    builders = {"N4": n4, "VD2D": vd2d, "VD2D3D": vd2d3d}
    if name not in builders:
        raise ValueError(f"net {name!r}: one of {list(builders)}")
    return builders[name](width=_config(size)["width"], dropout=0.0, **kw)


def train_all(size: str = "full", seed: int = 0, nets=NETS, progress: bool = True,
              cache=None) -> Trained:
    """Train N4, VD2D, then the recursive VD2D3D on VD2D's map, at ``TRAINING[size]``.

    Deterministic for a seed (Keras' and numpy's generators seeded; patches drawn in order).
    Dropout is off: the .znn files' 0.5 dropout regularises days of training, ours lasts
    minutes on fresh, augmented patches.  Each net's seed is ``seed`` plus its place in
    ``NETS``, so a net trains the same whichever of the others are trained with it.
    ``cache``: a folder; weights and curves of a run with the same size, seed and settings
    that trained at least ``nets`` are loaded from it instead of retrained (the figure
    notebooks 32 and 34 share one training, 34 at smoke size without N4)."""
    import json

    import keras

    cfg = _config(size)
    nets = tuple(nets)
    if "VD2D3D" in nets and "VD2D" not in nets:
        raise ValueError("VD2D3D is trained on VD2D's map: train VD2D too")
    order = [n for n in NETS if n in nets]
    train_vol, _ = volumes(size, seed)
    target = boundary_map(train_vol.labels)
    key = json.dumps({"cfg": cfg, "seed": seed, "nets": order, "version": 2}, sort_keys=True)
    folder = Path(cache) / f"boundary_{size}_seed{seed}" if cache is not None else None
    result = Trained(size, seed, {}, {}, {}, train_vol)
    if folder is not None and (folder / "run.json").exists():
        meta = json.loads((folder / "run.json").read_text())
        if _cache_serves(json.loads(meta["key"]), json.loads(key)):
            for name in order:
                result.models[name] = build(name, size)
                result.models[name].load_weights(folder / f"{name}.weights.h5")
            result.losses = {n: meta["losses"][n] for n in order}
            result.seconds = {n: meta["seconds"][n] for n in order}
            result.cached = True
    for k, name in ((NETS.index(n), n) for n in order):
        if not result.cached:
            keras.utils.set_random_seed(seed + k)
            model = result.models[name] = build(name, size)
            # the recursion: VD2D3D learns from VD2D's map of the training volume
            prior = result.train_maps["VD2D"] if name == "VD2D3D" else None
            t = time.perf_counter()
            result.losses[name] = train(model, train_vol.image, target, prior=prior,
                                        steps=cfg["steps"][name], batch=cfg["batch"],
                                        out_shape=cfg["patch"],
                                        learning_rate=cfg["learning_rate"], seed=seed + k,
                                        progress=progress)
            result.seconds[name] = time.perf_counter() - t
        prior = result.train_maps["VD2D"] if name == "VD2D3D" else None
        result.train_maps[name] = predict(result.models[name], train_vol.image, prior)[..., 0]
    if folder is not None and not result.cached:
        folder.mkdir(parents=True, exist_ok=True)
        for name, model in result.models.items():
            model.save_weights(folder / f"{name}.weights.h5")
        (folder / "run.json").write_text(json.dumps(
            {"key": key, "losses": result.losses, "seconds": result.seconds}))
    return result


def _cache_serves(stored: dict, wanted: dict) -> bool:
    """Whether a cached run (its key, as ``train_all`` writes it) holds the nets ``wanted``
    asks for, trained the same way: same settings and seed, and every wanted net among its
    nets (each net's training depends only on the nets before it: VD2D3D on VD2D).  Version 1
    seeded the nets by their place in the list trained, which is their place in ``NETS`` only
    when all of them were; version 2 seeds by ``NETS`` always."""
    same_seeds = stored.get("version") == 2 or (stored.get("version") == 1
                                                and stored.get("nets") == list(NETS))
    return (same_seeds and stored.get("cfg") == wanted["cfg"]
            and stored.get("seed") == wanted["seed"]
            and set(wanted["nets"]) <= set(stored.get("nets", ())))
