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
"""

from __future__ import annotations

import functools

import numpy as np


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
    model = keras.Model(inputs, _head(x, outputs, dropout, "vd2d3d_"), name="VD2D3D")
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
    """1 where a voxel's in-plane neighbour (y or x, +1) has another label or the label is 0
    (membrane / background), else 0: the boundary target of 2D boundary detection."""
    labels = np.asarray(labels)
    if labels.ndim != 3:
        raise ValueError(f"labels of shape {labels.shape}: expected (z, y, x)")
    b = labels == 0
    b[:, :-1, :] |= labels[:, :-1, :] != labels[:, 1:, :]
    b[:, :, :-1] |= labels[:, :, :-1] != labels[:, :, 1:]
    return b.astype(np.float32)


def pad_for(model, volume: np.ndarray) -> np.ndarray:
    """Reflect-pad a (z, y, x) volume by half the field of view, so that the net's 'valid'
    output covers the whole volume."""
    fz, fy, fx = model.field_of_view
    pads = [((f - 1) // 2, f - 1 - (f - 1) // 2) for f in (fz, fy, fx)]
    return np.pad(volume, pads, mode="reflect")


def predict(model, image: np.ndarray, prior: np.ndarray | None = None) -> np.ndarray:
    """The model's output over the whole (z, y, x) volume, densely (one pass, padded)."""
    inputs = [pad_for(model, image)[None, ..., None].astype(np.float32)]
    if prior is not None:
        inputs.append(pad_for(model, prior)[None, ..., None].astype(np.float32))
    depth = model.inputs[0].shape[1]
    if depth is not None and depth != inputs[0].shape[1]:
        raise ValueError(f"{model.name} was built for {depth} sections of padded input; "
                         f"the padded volume has {inputs[0].shape[1]}")
    out = model(inputs if len(inputs) > 1 else inputs[0], training=False)
    return np.asarray(out)[0]


def sample_patches(rng, padded, target, out_shape, batch):
    """Random training patches: ``padded`` inputs (reflect-padded by ``pad_for``) and the
    targets of the same place, ``out_shape`` voxels each."""
    size = target.shape
    if any(o > s for o, s in zip(out_shape, size, strict=True)):
        raise ValueError(f"volume {size} is smaller than one output patch {tuple(out_shape)}")
    ins = [o + p - s for o, p, s in zip(out_shape, padded[0].shape, size, strict=True)]
    xs, ys = [[] for _ in padded], []
    for _ in range(batch):
        c = [int(rng.integers(0, s - o + 1)) for s, o in zip(size, out_shape, strict=True)]
        for k, arr in enumerate(padded):
            xs[k].append(arr[c[0]:c[0] + ins[0], c[1]:c[1] + ins[1], c[2]:c[2] + ins[2]])
        ys.append(target[c[0]:c[0] + out_shape[0], c[1]:c[1] + out_shape[1],
                         c[2]:c[2] + out_shape[2]])
    return [np.stack(x)[..., None].astype(np.float32) for x in xs], \
        np.stack(ys)[..., None].astype(np.float32)


def train(model, image, target, prior=None, steps: int = 200, batch: int = 4,
          out_shape=(1, 8, 8), learning_rate: float = 1e-3, seed: int = 0,
          progress: bool = True) -> list[float]:
    """Train on random patches of one volume with Keras (Adam, binary cross-entropy); returns
    the loss per step.  ``prior`` is VD2D's boundary map for the recursive VD2D3D."""
    import keras
    from tqdm.auto import trange

    if image.shape != target.shape or (prior is not None and prior.shape != image.shape):
        raise ValueError(f"image {image.shape}, target {target.shape}"
                         + (f", prior {prior.shape}" if prior is not None else "")
                         + ": shapes must agree")
    depth = model.inputs[0].shape[1]
    if depth is not None:
        out_shape = (depth - model.field_of_view[0] + 1, *out_shape[1:])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss="binary_crossentropy")
    rng = np.random.default_rng(seed)
    padded = [pad_for(model, image)] + ([pad_for(model, prior)] if prior is not None else [])
    losses = []
    for _ in trange(steps, disable=not progress, desc=model.name):
        xs, y = sample_patches(rng, padded, target, out_shape, batch)
        losses.append(float(model.train_on_batch(xs if len(xs) > 1 else xs[0], y)))
    return losses
