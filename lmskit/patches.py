"""Patches or full volumes: train one 3D U-Net both ways, score it, and size its memory.

A small-scale version of the experiment of arXiv 1812.07816 (Imai et al.): the same 3D U-Net
trained on 128^3 patches (what fits a 16 GB GPU) and on full 192^3 brain volumes (what needs
swapping), compared by Dice on held-out volumes for whole tumour (WT) and tumour core (TC).

* ``sample_patches``: random cubic patches, a fraction of them forced to contain tumour. nnU-Net
  does the same (a third of each batch centred on foreground) because a uniformly placed patch
  in a brain volume mostly sees healthy tissue and the net learns to say "no tumour".
* ``train``: one optimizer loop for both configurations. The model's input side says which it is:
  smaller than the volumes -> patches, equal -> full volumes. Both get the same number of
  optimizer steps at the same batch size, learning rate and seed: the same optimisation schedule,
  so what differs is only what one step sees (a patch sees (p/s)^3 of a volume). Equal voxels
  seen would instead give the patch model (s/p)^3 times more steps, and equal compute about
  the same: budgets that favour patches even more.
* ``sliding_window``: tiled inference over a whole volume with a patch-sized model; overlapping
  tiles are averaged (uniform weights, summed in float64 so an identity model returns its input
  bit for bit). ``predict_volumes`` uses it for both models (one tile for a full-volume model)
  and runs batch norm as it ran in batch-1 training: each input with its own statistics.
* ``dice``: Dice per mask. Convention: two empty masks agree perfectly, Dice 1.0 (as the BraTS
  evaluation does); an empty truth with a non-empty prediction, or the reverse, is 0.0.
* ``training_memory``: capture the real TensorFlow training step of a model with lmskit and
  report its peak, the activations saved for backward, and whether it fits a device, with and
  without swapping; ``scale_memory`` carries the answer to other cube sides (sizes grow with
  the voxels), so one capture sizes every side.

Assumes channels-last cubes ``[n, s, s, s, channels]`` as ``mlsys_datasets.brats_volumes`` makes
them (label channels WT, TC, ET), models from ``mlsys_datasets.unet3d`` (a fixed cubic input
side, sigmoid outputs) and Keras 3 on TensorFlow. Everything random takes a seed.
"""

from __future__ import annotations

import numpy as np

from . import progress

# Label channels of mlsys_datasets.brats (WT, TC, ET); the paper scores WT and TC.
REGIONS = {"WT": 0, "TC": 1}
# Share of patches forced to contain tumour (nnU-Net's oversample_foreground_percent).
FOREGROUND = 1 / 3
THRESHOLD = 0.5


# --------------------------------------------------------------------------- validation


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_patch(side: int, patch: int, depth: int | None = None) -> int:
    """Validate a cubic patch for cubes of ``side``; with ``depth``, for a U-Net of that depth.

    Returns the patch side. Raises ValueError naming the culprit.
    """
    side = _positive_int("side", side)
    patch = _positive_int("patch", patch)
    if patch > side:
        raise ValueError(f"patch {patch} does not fit in volumes of side {side}: "
                         f"the patch must be at most the volume side")
    if depth is not None:
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
            raise ValueError(f"depth must be a non-negative integer, got {depth!r}")
        if patch % 2 ** depth:
            raise ValueError(f"patch {patch} is not a multiple of 2**depth = {2 ** depth}: "
                             f"a U-Net of depth {depth} halves its input {depth} times")
    return patch


def _check_pair(images, labels) -> tuple[np.ndarray, np.ndarray]:
    images, labels = np.asarray(images), np.asarray(labels)
    if images.ndim != 5 or labels.ndim != 5:
        raise ValueError(f"images and labels must be [n, d, h, w, channels], got shapes "
                         f"{images.shape} and {labels.shape}")
    if images.shape[:4] != labels.shape[:4]:
        raise ValueError(f"images {images.shape} and labels {labels.shape} differ in volumes "
                         f"or voxels")
    return images, labels


def model_side(model) -> int:
    """The cubic input side of a 3D model (``[None, s, s, s, c]``)."""
    shape = tuple(model.input_shape)
    if len(shape) != 5 or len(set(shape[1:4])) != 1 or shape[1] is None:
        raise ValueError(f"model {model.name!r} has input shape {shape}: expected a fixed cube "
                         f"[None, s, s, s, channels]")
    return int(shape[1])


# --------------------------------------------------------------------------- Dice


def dice(pred, truth) -> float:
    """Dice of two binary masks of one shape: 2|A n B| / (|A| + |B|); 1.0 when both are empty."""
    pred, truth = np.asarray(pred, bool), np.asarray(truth, bool)
    if pred.shape != truth.shape:
        raise ValueError(f"prediction {pred.shape} and truth {truth.shape} differ in shape")
    total = int(pred.sum()) + int(truth.sum())
    if total == 0:
        return 1.0   # nothing to find and nothing found: perfect agreement, not 0/0
    return 2.0 * int(np.logical_and(pred, truth).sum()) / total


def region_dice(probs, labels, threshold: float = THRESHOLD) -> dict[str, list[float]]:
    """Dice per volume for WT and TC: ``{"WT": [...], "TC": [...]}``.

    ``probs`` and ``labels`` are ``[n, d, h, w, channels]``; probabilities above ``threshold``
    count as the region.
    """
    probs, labels = np.asarray(probs), np.asarray(labels)
    if probs.shape != labels.shape:
        raise ValueError(f"predictions {probs.shape} and labels {labels.shape} differ in shape")
    return {region: [dice(p[..., c] > threshold, t[..., c] > 0.5)
                     for p, t in zip(probs, labels, strict=True)]
            for region, c in REGIONS.items()}


# --------------------------------------------------------------------------- patches


def patch_corner(rng: np.random.Generator, mask, patch: int, foreground: bool) -> tuple:
    """One patch's corner in a volume whose tumour mask is ``mask`` ([d, h, w]).

    foreground=True centres the patch on a random tumour voxel (moved inward where it would
    cross the border); False, or a volume without tumour, places it uniformly.
    """
    shape = np.asarray(mask).shape
    hi = [s - patch for s in shape]   # largest valid corner per axis
    if foreground:
        voxels = np.argwhere(mask)
        if len(voxels):
            centre = voxels[rng.integers(len(voxels))]
            return tuple(int(np.clip(c - patch // 2, 0, h)) for c, h in zip(centre, hi,
                                                                             strict=True))
    return tuple(int(rng.integers(h + 1)) for h in hi)


def sample_patches(images, labels, patch: int, count: int, seed: int = 0,
                   foreground: float = FOREGROUND):
    """``count`` random cubic patches: ``(x [count,p,p,p,c], y [count,p,p,p,k], where)``.

    ``where`` lists ``(volume, corner)`` per patch. Each patch comes from a random volume; with
    probability ``foreground`` it is centred on a tumour (WT) voxel, else placed uniformly.
    """
    images, labels = _check_pair(images, labels)
    count = _positive_int("count", count)
    if not 0 <= foreground <= 1:
        raise ValueError(f"foreground must be a probability in [0, 1], got {foreground!r}")
    for s in images.shape[1:4]:
        check_patch(s, patch)
    return _sample(np.random.default_rng(seed), images, labels, patch, count, foreground)


def _sample(rng, images, labels, patch, count, foreground):
    x = np.empty((count, patch, patch, patch, images.shape[-1]), images.dtype)
    y = np.empty((count, patch, patch, patch, labels.shape[-1]), labels.dtype)
    where = []
    for i in range(count):
        v = int(rng.integers(len(images)))
        corner = patch_corner(rng, labels[v, ..., REGIONS["WT"]] > 0.5, patch,
                              bool(rng.random() < foreground))
        box = tuple(slice(c, c + patch) for c in corner)
        x[i], y[i] = images[v][box], labels[v][box]
        where.append((v, corner))
    return x, y, where


# --------------------------------------------------------------------------- sliding window


def tile_starts(length: int, patch: int, overlap: float = 0.5) -> list[int]:
    """Tile corners along one axis: stride ``patch * (1 - overlap)``, the last tile flush with
    the end, so every voxel is covered."""
    length = _positive_int("length", length)
    check_patch(length, patch)
    if not 0 <= overlap < 1:
        raise ValueError(f"overlap must be in [0, 1), got {overlap!r}")
    stride = max(1, int(patch * (1 - overlap)))
    starts = list(range(0, length - patch + 1, stride))
    if starts[-1] != length - patch:
        starts.append(length - patch)
    return starts


def sliding_window(predict, volume, patch: int, overlap: float = 0.5, batch: int = 4):
    """Predict a whole volume ``[d, h, w, c]`` with a model of cubic input ``patch``.

    ``predict`` maps ``[b, p, p, p, c]`` to ``[b, p, p, p, k]``; tiles overlap by ``overlap``
    and their predictions are averaged voxel by voxel. Returns ``[d, h, w, k]`` float32.
    """
    volume = np.asarray(volume)
    if volume.ndim != 4:
        raise ValueError(f"volume must be [d, h, w, channels], got shape {volume.shape}")
    batch = _positive_int("batch", batch)
    axes = [tile_starts(s, patch, overlap) for s in volume.shape[:3]]
    corners = [(a, b, c) for a in axes[0] for b in axes[1] for c in axes[2]]
    total = count = None
    for i in range(0, len(corners), batch):
        group = corners[i:i + batch]
        boxes = [tuple(slice(c, c + patch) for c in corner) for corner in group]
        out = np.asarray(predict(np.stack([volume[box] for box in boxes])))
        if total is None:
            # float64 sums of float32 values are exact, so averaging n equal values returns them.
            total = np.zeros(volume.shape[:3] + out.shape[-1:], np.float64)
            count = np.zeros(volume.shape[:3] + (1,), np.int64)
        for box, tile in zip(boxes, out, strict=True):
            total[box] += tile
            count[box] += 1
    return (total / count).astype(np.float32)


def has_batch_norm(model) -> bool:
    import keras

    return any(isinstance(layer, keras.layers.BatchNormalization) for layer in model.layers)


def predictor(model):
    """A numpy -> numpy function running a Keras model for inference.

    Batch-norm layers normalise each input with its own statistics, one input at a time: at
    batch 1 that is how they ran in training (instance normalisation, as nnU-Net uses), while
    the moving averages lag the weights after a short run. Side effect: those runs also update
    the layers' moving averages, which nothing here reads.
    """
    if not has_batch_norm(model):
        return lambda x: model(x, training=False).numpy()
    return lambda x: np.concatenate([model(x[i:i + 1], training=True).numpy()
                                     for i in range(len(x))])


def predict_volumes(model, images, overlap: float = 0.5) -> np.ndarray:
    """Probabilities for whole volumes: one tile when the model takes whole volumes, a sliding
    window of the model's input side otherwise."""
    images = np.asarray(images)
    patch = model_side(model)
    run = predictor(model)
    return np.stack([sliding_window(run, v, patch, overlap) for v in images])


def evaluate(model, images, labels, overlap: float = 0.5) -> dict[str, list[float]]:
    """Dice per held-out volume for WT and TC (see ``region_dice``)."""
    images, labels = _check_pair(images, labels)
    return region_dice(predict_volumes(model, images, overlap), labels)


# --------------------------------------------------------------------------- training


def loss(y_true, y_pred):
    """Soft Dice over the three masks plus binary cross-entropy.

    Dice alone ignores how rare tumour voxels are (the reason it is used for BraTS); the
    cross-entropy term gives useful gradients while the prediction is still all background.
    """
    import tensorflow as tf

    axes = [1, 2, 3]
    inter = tf.reduce_sum(y_true * y_pred, axes)
    sizes = tf.reduce_sum(y_true, axes) + tf.reduce_sum(y_pred, axes)
    soft_dice = tf.reduce_mean((2 * inter + 1) / (sizes + 1))   # +1: defined for empty masks
    eps = 1e-6
    bce = -tf.reduce_mean(y_true * tf.math.log(y_pred + eps)
                          + (1 - y_true) * tf.math.log(1 - y_pred + eps))
    return 1 - soft_dice + bce


def optimizer(learning_rate: float = 3e-3):
    import keras

    return keras.optimizers.Adam(learning_rate)


def train(model, images, labels, steps: int, seed: int = 0, batch: int = 1,
          learning_rate: float = 3e-3, foreground: float = FOREGROUND) -> list[float]:
    """Train ``model`` in place for ``steps`` optimizer steps; returns the loss of each step.

    A model whose input side is smaller than the volumes trains on patches of that side (see
    ``sample_patches``); one of the volumes' side trains on whole volumes drawn at random.
    Batch-norm models should train at ``batch=1``: ``predict_volumes`` normalises each input by
    its own statistics, which is what batch norm does in training only at batch 1.
    """
    import tensorflow as tf

    images, labels = _check_pair(images, labels)
    steps = _positive_int("steps", steps)
    batch = _positive_int("batch", batch)
    side = images.shape[1]
    if images.shape[1:4] != (side,) * 3:
        raise ValueError(f"volumes must be cubes, got {images.shape[1:4]}")
    patch = check_patch(side, model_side(model))
    if model.input_shape[-1] != images.shape[-1] or model.output_shape[-1] != labels.shape[-1]:
        raise ValueError(f"model maps {model.input_shape[-1]} channels to "
                         f"{model.output_shape[-1]}, data has {images.shape[-1]} and "
                         f"{labels.shape[-1]}")
    opt = optimizer(learning_rate)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            value = loss(y, model(x, training=True))
        grads = tape.gradient(value, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return value

    rng = np.random.default_rng(seed)
    losses = []
    kind = "patches" if patch < side else "full volumes"
    for _ in progress.bar(range(steps), desc=f"training on {kind}"):
        if patch == side:
            pick = rng.integers(len(images), size=batch)
            x, y = images[pick], labels[pick]
        else:
            x, y, _ = _sample(rng, images, labels, patch, batch, foreground)
        losses.append(float(step(tf.constant(x), tf.constant(y))))
    return losses


def make_deterministic(seed: int = 0) -> None:
    """Seed Python, NumPy and TensorFlow and ask TF for deterministic kernels.

    Call before building models; two runs in fresh processes then give identical weights and
    Dice. Op determinism is process-wide: it can make some GPU kernels slower or unavailable.
    """
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()


# --------------------------------------------------------------------------- memory


def training_memory(model, batch: int = 1, device="p100-16gb", swapping: bool = False) -> dict:
    """What one training step of ``model`` needs on ``device``, from lmskit's capture.

    The step captured is the one ``train`` runs (this module's loss, Adam). Returns bytes:
    ``peak`` (everything live at the peak, weights and optimizer state included), ``weights``
    (variables: weights and Adam's two slots), ``activations`` (all forward tensors saved for the
    backward pass), ``fits`` (peak <= ``budget``: no swapping needed) and, with
    ``swapping=True``, ``fits_swapping`` and ``peak_swapping`` under lmskit's planner.
    ``budget`` is what the step may use: ``memory`` minus the device's ``reserve`` (CUDA
    context, conv workspace, allocator slack), the same limit the simulator applies; a peak
    between the two does not fit, as in a real run.
    """
    import tensorflow as tf

    from .devices import get_device
    from .planner import InfeasibleError, plan
    from .schedule import lifetimes
    from .simulate import simulate
    from .tfcapture import capture

    batch = _positive_int("batch", batch)
    dev = get_device(device)
    side = model_side(model)
    graph = capture(model, loss, optimizer(),
                    (tf.TensorSpec((None, side, side, side, model.input_shape[-1])),
                     tf.TensorSpec((None, side, side, side, model.output_shape[-1]))))
    lt = lifetimes(graph, batch)
    # All saved activations, not those live at the peak: in a tiny model the peak can fall in
    # the update phase, where none is left.
    saved = sum(b.bytes for b in lt.buffers if b.kind == "activation")
    budget = dev.usable_bytes
    out = {"side": side, "batch": batch, "device": dev.name, "memory": int(dev.memory_bytes),
           "reserve": int(dev.reserve_bytes), "budget": budget,
           "peak": int(lt.peak), "weights": int(graph.variable_bytes()),
           "activations": int(saved), "fits": int(lt.peak) <= budget}
    if swapping:
        try:
            sim = simulate(plan(graph, "lmskit", dev, batch), dev, batch)
            out["fits_swapping"], out["peak_swapping"] = sim.fits, int(sim.peak_device_bytes)
        except InfeasibleError:
            out["fits_swapping"], out["peak_swapping"] = False, None
    return out


def scale_memory(memory: dict, side: int) -> dict:
    """``training_memory``'s answer carried to another cube side without a new capture.

    Every tensor of a fully convolutional step except the variables has one entry per voxel
    (times channels), so activations and the peak minus the variables grow as side^3 while the
    weights stay. Exact up to the few scalars (the loss) that do not scale. The budget (device
    memory less its reserve) is carried unchanged: it belongs to the device, not the model.
    """
    side = _positive_int("side", side)
    grow = (side / memory["side"]) ** 3
    weights = memory["weights"]
    peak = int(round(weights + (memory["peak"] - weights) * grow))
    kept = {k: memory[k] for k in ("memory", "reserve") if k in memory}
    return {"side": side, "batch": memory["batch"], "device": memory["device"], **kept,
            "budget": memory["budget"], "peak": peak, "weights": weights,
            "activations": int(round(memory["activations"] * grow)),
            "fits": peak <= memory["budget"]}


__all__ = ["REGIONS", "FOREGROUND", "check_patch", "model_side", "dice", "region_dice",
           "patch_corner", "sample_patches", "tile_starts", "sliding_window", "has_batch_norm",
           "predictor", "predict_volumes", "evaluate", "loss", "optimizer", "train",
           "make_deterministic", "training_memory", "scale_memory"]
