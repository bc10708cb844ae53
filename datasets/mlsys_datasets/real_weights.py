"""Real-weight ONNX models: architectures people deploy, with seeded random weights that matter.

The "light" models shipped inside the onnx package (``onnx/backend/test/data/light``) build every
weight with ``ConstantOfShape``, so their outputs hardly depend on the input and agreeing on them
proves little. This module builds, on demand and never by download, models whose weights are
stored tensors drawn from a seeded generator:

* ``light_<arch>`` (nine: alexnet ... zfnet512): the light architecture with each
  ``ConstantOfShape`` weight subgraph replaced by an initializer. Weights are drawn by the role
  of the tensor (its consumer): Conv/Gemm weights He-normal by fan-in, biases and BatchNorm
  shift/mean small uniform, BatchNorm scale/variance near 1, Mul/Add operands of Caffe2's
  scale-bias pairs near 1 / near 0. The few small parameters the light files store for real
  (trained statistics of weights that are no longer there) are redrawn the same way. Then one
  onnxruntime pass over a seeded calibration image (``_calibrate_onnx``) gives every
  BatchNormalization the mean and variance its input really has, and rescales every Conv/Gemm
  not followed by one to zero mean, unit variance (data-dependent initialisation), so
  activations neither vanish nor blow up, and outputs keep depending on the input, through
  the deepest of them. One size: the files fix a 224x224 input (vgg19 is 0.57 GB).
  The files as shipped stay where they are (``compilerkit.measure.conformance.light_model_path``).
* ``mobilenet_v2``, ``resnet50``, ``efficientnet_b0``: ``keras.applications`` with
  ``weights=None`` and ``classifier_activation=None`` (logits out), seeded, BatchNorm moving
  statistics set to those of a seeded calibration batch of 32 images (Keras's defaults, 0 and
  1, would make BatchNorm an identity that a compiler could drop unnoticed), exported through
  ``keras_export`` (EfficientNet's captured Normalization mean/variance, which tf2onnx makes
  graph inputs, are bound back as initializers). ``small``: 64x64 input; ``full``: 224x224.
* ``unet3d``: ``models.unet3d`` (the TFLMS papers' 3D U-Net), calibrated the same way
  (batch of 4).
  ``full``: 64^3 x 4 channels, base_filters 16, depth 4; ``small``: 32^3, base_filters 8, depth 3.

``real_weight_model(name, size)`` returns the path of the built file, building it on first use
into a cache directory (``$MLSYS_DATASETS_CACHE``, else ``$XDG_CACHE_HOME/mlsys_datasets``, else
``~/.cache/mlsys_datasets``). The file name carries a hash of the recipe and of the tool versions,
so a changed recipe or a new onnx/keras builds a new file instead of reusing a stale one. Files
are written atomically (a temporary name, then a rename), so concurrent builds never leave half
a file. Same recipe and tools -> the same bytes.

Assumes: onnx and onnxruntime for the light models; TensorFlow, Keras 3 and tf2onnx for the rest
(imported only when such a model is built).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

RECIPE_VERSION = 1
SIZES = ("small", "full")
SEED = 0

LIGHT_ARCHS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
               "shufflenet", "squeezenet", "vgg19", "zfnet512")

# name -> per-size parameters (JSON-friendly: they go into the cache key).
KERAS_APPS = {
    "mobilenet_v2": "MobileNetV2",
    "resnet50": "ResNet50",
    "efficientnet_b0": "EfficientNetB0",
}
RECIPES: dict[str, dict[str, dict]] = {
    **{f"light_{a}": {"small": {"arch": a}, "full": {"arch": a}} for a in LIGHT_ARCHS},
    **{k: {"small": {"app": v, "side": 64}, "full": {"app": v, "side": 224}}
       for k, v in KERAS_APPS.items()},
    "unet3d": {"small": {"side": 32, "in_channels": 4, "classes": 3, "base_filters": 8,
                         "depth": 3},
               "full": {"side": 64, "in_channels": 4, "classes": 3, "base_filters": 16,
                        "depth": 4}},
}
REAL_WEIGHT_MODELS: tuple[str, ...] = tuple(RECIPES)

# How the last layer ends: tests look at the logits behind a softmax/sigmoid.
FINAL_ACTIVATION = {**{f"light_{a}": "softmax" for a in LIGHT_ARCHS}, "light_densenet121": None,
                    **{k: None for k in KERAS_APPS}, "unet3d": "sigmoid"}

BUILDS: Counter = Counter()  # (name, size) -> times actually built in this process


# --------------------------------------------------------------------------- the cache


def cache_dir() -> Path:
    """Where built models live: $MLSYS_DATASETS_CACHE, $XDG_CACHE_HOME/mlsys_datasets or
    ~/.cache/mlsys_datasets."""
    env = os.environ.get("MLSYS_DATASETS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mlsys_datasets"


def _check(name: str, size: str) -> dict:
    if name not in RECIPES:
        raise ValueError(f"unknown real-weight model {name!r}; available: "
                         f"{', '.join(REAL_WEIGHT_MODELS)}")
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r} for real-weight model {name!r}; "
                         f"sizes: {', '.join(SIZES)}")
    return RECIPES[name][size]


def _tools(name: str) -> dict:
    from importlib.metadata import version

    pkgs = ("onnx", "onnxruntime") if name.startswith("light_") else (
        "onnx", "tf2onnx", "keras", "tensorflow")
    return {p: version(p) for p in pkgs}


def _size_tag(name: str, size: str) -> str:
    # The light files have one size: both names share one file rather than two copies.
    return "fixed" if RECIPES[name]["small"] == RECIPES[name]["full"] else size


def cache_key(name: str, size: str = "small") -> str:
    """12 hex digits naming the recipe and tool versions that build ``name`` at ``size``."""
    params = _check(name, size)
    doc = {"name": name, "size": _size_tag(name, size), "params": params, "seed": SEED,
           "recipe": RECIPE_VERSION, "tools": _tools(name)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]


def cached_path(name: str, size: str = "small") -> Path:
    """The cache file for ``name`` at ``size`` (it may not exist yet)."""
    key = cache_key(name, size)
    return cache_dir() / f"{name}-{_size_tag(name, size)}-{key}.onnx"


def real_weight_model(name: str, size: str = "small", progress: bool = True) -> Path:
    """Path of the real-weight ONNX model ``name`` (one of ``REAL_WEIGHT_MODELS``) at ``size``
    (``"small"`` for tests, ``"full"`` for benchmarks); built and cached on first use."""
    path = cached_path(name, size)
    if path.is_file():
        return path
    params = RECIPES[name][size]
    path.parent.mkdir(parents=True, exist_ok=True)
    if name.startswith("light_"):
        proto = light_model(params["arch"], seed=SEED, progress=progress)
        data = proto.SerializeToString(deterministic=True)
    else:
        data = _keras_bytes(name, params, progress)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    BUILDS[(name, size)] += 1
    return path


# --------------------------------------------------------------------------- light models


def _rng(seed: int, tensor: str) -> np.random.Generator:
    # One generator per tensor, keyed by name: a tensor's values do not depend on build order.
    digest = hashlib.sha256(f"{seed}/{tensor}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _final_consumer(name: str, consumers: dict, shapes: dict):
    """(op_type, input index, node, shape there) of the op that uses ``name`` as a parameter,
    looking through the Unsqueeze/Reshape that reshape weights on the way."""
    seen = name
    while True:
        uses = consumers.get(seen, [])
        if len(uses) != 1:
            return None if not uses else ("many", 0, None, None)
        node, idx = uses[0]
        if node.op_type in ("Unsqueeze", "Reshape") and idx == 0:
            seen = node.output[0]
            continue
        return node.op_type, idx, node, shapes.get(seen)


def _draw(model_name: str, tensor: str, role, shape, seed: int) -> np.ndarray:
    op, idx, node, used_shape = role
    rng = _rng(seed, tensor)
    n = int(np.prod(shape))
    if (op == "Conv" and idx == 1) or (op == "Gemm" and idx == 1):
        s = used_shape or shape
        if op == "Conv":
            fan_in = int(np.prod(s[1:]))
        else:
            trans_b = any(a.name == "transB" and a.i for a in node.attribute)
            fan_in = s[1] if trans_b else s[0]
        w = rng.standard_normal(n) * np.sqrt(2.0 / fan_in)
    elif op in ("Conv", "Gemm") and idx == 2:
        w = rng.uniform(-0.1, 0.1, n)
    elif op == "BatchNormalization" and idx in (1, 4):  # scale, variance
        w = rng.uniform(0.8, 1.2, n)
    elif op == "BatchNormalization" and idx in (2, 3):  # shift, mean
        w = rng.uniform(-0.1, 0.1, n)
    elif op == "Mul":
        w = rng.uniform(0.8, 1.2, n)
    elif op in ("Add", "Sum"):
        w = rng.uniform(-0.1, 0.1, n)
    else:
        raise ValueError(f"light_{model_name}: no weight rule for tensor {tensor!r} of shape "
                         f"{list(shape)} used as input {idx} of a {op} node")
    return w.reshape(shape).astype(np.float32)


def light_model(arch: str, seed: int = SEED, progress: bool = False, calibrate: bool = True):
    """The onnx package's light ``arch`` with seeded real weights (an ``onnx.ModelProto``)."""
    import onnx
    from onnx import numpy_helper, shape_inference

    if arch not in LIGHT_ARCHS:
        raise ValueError(f"unknown light architecture {arch!r}; available: "
                         f"{', '.join(LIGHT_ARCHS)}")
    src = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{arch}.onnx"
    model = onnx.load(str(src))
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
              for vi in shape_inference.infer_shapes(model).graph.value_info}
    consumers: dict[str, list] = {}
    for node in g.node:
        for i, x in enumerate(node.input):
            consumers.setdefault(x, []).append((node, i))

    # Parameters to (re)draw: ConstantOfShape outputs and stored float parameters.
    todo = {}
    for node in g.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            todo[node.output[0]] = [int(d) for d in numpy_helper.to_array(inits[node.input[0]])]
    for t in g.initializer:
        if t.data_type == onnx.TensorProto.FLOAT and _final_consumer(t.name, consumers, shapes):
            todo[t.name] = list(t.dims)
    from tqdm.auto import tqdm

    new = {}
    for tensor, shape in tqdm(sorted(todo.items()), desc=f"light_{arch} weights",
                              disable=not progress, leave=False):
        role = _final_consumer(tensor, consumers, shapes)
        if role is None or role[0] == "many":
            raise ValueError(f"light_{arch}: weight {tensor!r} has {len(consumers.get(tensor, []))}"
                             f" consumers; expected exactly one")
        new[tensor] = _draw(arch, tensor, role, shape, seed)

    kept_nodes = [n for n in g.node if not (n.op_type == "ConstantOfShape" and n.output[0] in new)]
    used = {x for n in kept_nodes for x in n.input}
    out_inits = [numpy_helper.from_array(new[t.name], t.name) if t.name in new else t
                 for t in g.initializer if t.name in used]
    out_inits += [numpy_helper.from_array(new[name], name)
                  for name in sorted(new) if name not in inits]
    init_names = {t.name for t in out_inits}
    graph_inputs = [i for i in g.input if i.name not in init_names and i.name in used]
    del g.node[:]
    g.node.extend(kept_nodes)
    del g.initializer[:]
    g.initializer.extend(out_inits)
    del g.input[:]
    g.input.extend(graph_inputs)
    model.ir_version = max(model.ir_version, 4)  # initializers need not be graph inputs from IR 4
    g.name = f"light_{arch}_real_weights"
    if calibrate:
        _calibrate_onnx(model, seed, progress)
    onnx.checker.check_model(model)
    return model


def _calibration_batch(shape, seed: int, n: int = 4) -> np.ndarray:
    shape = [n] + [d if d > 0 else 1 for d in shape[1:]]
    return np.random.default_rng(seed + 1).standard_normal(shape).astype(np.float32)


def _calibrate_onnx(model, seed: int, progress: bool) -> None:
    """Data-dependent initialisation in one onnxruntime pass over a seeded calibration image.

    A probe copy of the graph (1) feeds every BatchNormalization the per-channel mean and
    variance its input has (so each normalises exactly, given the layers before it), and (2)
    normalises every Conv/Gemm output that does not go straight into a BatchNormalization to
    zero mean, unit variance (per channel for Conv, over all units for Gemm: the light files
    fix batch 1) -- the data-dependent initialisation of Kraehenbuehl et al. (2015) and LSUV.
    Without (2) the deep ReLU stacks with no BatchNorm (inception_v1, vgg19) map every input
    to almost the same output. The statistics it reports are then folded into the weights:
    BN mean/var initializers, Conv/Gemm ``W / s`` and ``(b - m) / s``.
    """
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper, shape_inference

    g = model.graph
    inits = {t.name: t for t in g.initializer}
    consumers: dict[str, list] = {}
    for node in g.node:
        for x in node.input:
            consumers.setdefault(x, []).append(node)
    producers = {o: n for n in g.node for o in n.output}
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
              for vi in shape_inference.infer_shapes(model).graph.value_info}
    shapes.update({vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
                   for vi in g.output})

    def weight_init(name: str) -> str:
        # The initializer behind a weight that reaches its op through Reshape/Unsqueeze.
        while name not in inits:
            name = producers[name].input[0]
        return name

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    pg = probe.graph
    nodes, stats = [], []  # stats: (kind, node index in g.node, mean name, scale/var name)
    eps = numpy_helper.from_array(np.array(1e-5, np.float32), "calib__eps")
    pg.initializer.append(eps)
    for k, original in enumerate(g.node):
        node = onnx.NodeProto()
        node.CopyFrom(original)  # a copy: pg.node is cleared and refilled below
        if node.op_type == "BatchNormalization":
            x, tag = node.input[0], f"calib__{k}"
            nodes += [
                helper.make_node("ReduceMean", [x], [tag + "_m4"], axes=[0, 2, 3], keepdims=1),
                helper.make_node("Sub", [x, tag + "_m4"], [tag + "_d"]),
                helper.make_node("Mul", [tag + "_d", tag + "_d"], [tag + "_d2"]),
                helper.make_node("ReduceMean", [x], [tag + "_m"], axes=[0, 2, 3], keepdims=0),
                helper.make_node("ReduceMean", [tag + "_d2"], [tag + "_v"], axes=[0, 2, 3],
                                 keepdims=0),
            ]
            node.input[3], node.input[4] = tag + "_m", tag + "_v"
            nodes.append(node)
            stats.append(("bn", k, tag + "_m", tag + "_v"))
            continue
        users = consumers.get(original.output[0], []) if original.output else []
        if node.op_type in ("Conv", "Gemm") and not (
                len(users) == 1 and users[0].op_type == "BatchNormalization"):
            y, tag = node.output[0], f"calib__{k}"
            # Per channel where a channel has enough positions to measure; else one scalar
            # (Gemm, and 1x1-map classifier Convs such as densenet121's fc6).
            dims = shapes.get(y) or [0, 0, 0, 0]
            per_channel = node.op_type == "Conv" and int(np.prod(dims[2:])) >= 16
            axes = [0, 2, 3] if per_channel else list(range(len(dims)))
            node.output[0] = tag + "_raw"
            nodes += [node,
                      helper.make_node("ReduceMean", [tag + "_raw"], [tag + "_m"], axes=axes,
                                       keepdims=1),
                      helper.make_node("Sub", [tag + "_raw", tag + "_m"], [tag + "_d"]),
                      helper.make_node("Mul", [tag + "_d", tag + "_d"], [tag + "_d2"]),
                      helper.make_node("ReduceMean", [tag + "_d2"], [tag + "_v"], axes=axes,
                                       keepdims=1),
                      helper.make_node("Add", [tag + "_v", "calib__eps"], [tag + "_ve"]),
                      helper.make_node("Sqrt", [tag + "_ve"], [tag + "_s"]),
                      helper.make_node("Div", [tag + "_d", tag + "_s"], [y])]
            stats.append((node.op_type, k, tag + "_m", tag + "_s"))
            continue
        nodes.append(node)
    if not stats:
        return
    del pg.node[:]
    pg.node.extend(nodes)
    del pg.output[:]
    pg.output.extend(helper.make_empty_tensor_value_info(n) for _, _, m, s in stats
                     for n in (m, s))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(probe.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    data = g.input[0]
    x = _calibration_batch([d.dim_value for d in data.type.tensor_type.shape.dim], seed, n=1)
    outs = sess.run(None, {data.name: x})
    from tqdm.auto import tqdm

    for j, (kind, k, _, _) in enumerate(tqdm(stats, desc=f"{g.name} calibration",
                                             disable=not progress, leave=False)):
        node = g.node[k]
        m, s = (_round(np.asarray(o, np.float32).reshape(-1)) for o in outs[2 * j:2 * j + 2])
        if kind == "bn":
            for idx, value in ((3, m), (4, s)):
                name = node.input[idx]
                inits[name].CopyFrom(numpy_helper.from_array(value, name))
            continue
        wname = weight_init(node.input[1])
        w = numpy_helper.to_array(inits[wname])
        if s.size > 1:  # per output channel (a Conv weight, stored as used)
            w = w / s.reshape((-1,) + (1,) * (w.ndim - 1))
        else:  # one scalar: any reshaping on the way does not matter
            w = w / s[0]
        inits[wname].CopyFrom(numpy_helper.from_array(w.astype(np.float32), wname))
        if len(node.input) > 2 and node.input[2]:
            bname = weight_init(node.input[2])
            b = (numpy_helper.to_array(inits[bname]) - m) / s
            inits[bname].CopyFrom(numpy_helper.from_array(b.astype(np.float32), bname))
        else:  # a bias-free Conv gets the bias that centres it
            name = f"{node.output[0]}__calib_bias"
            g.initializer.append(numpy_helper.from_array((-m / s).astype(np.float32), name))
            node.input.append(name)


def _round(a: np.ndarray) -> np.ndarray:
    # Keep 10 mantissa bits: statistics that differ only in the last bits between machines
    # (summation order) still give the same bytes.
    bits = a.astype(np.float32).view(np.uint32)
    bits = (bits + np.uint32(1 << 12)) & np.uint32(0xFFFFE000)
    return bits.view(np.float32)


# --------------------------------------------------------------------------- Keras models


def _keras_model(name: str, params: dict):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras

    keras.utils.set_random_seed(SEED)
    if name == "unet3d":
        from .models import unet3d

        return unet3d(**params, seed=SEED), (params["side"],) * 3 + (params["in_channels"],)
    side = params["side"]
    app = getattr(keras.applications, params["app"])
    model = app(weights=None, input_shape=(side, side, 3), classes=1000,
                classifier_activation=None)
    return model, (side, side, 3)


def _calibrate_keras_batch_norm(model, shape, seed: int) -> None:
    """Randomise BatchNorm scale/shift a little, then set the moving statistics to those of a
    seeded batch: one training-mode call with momentum 0 (dropout switched off), so every layer
    normalises with the statistics its input really has once the layers before it are set."""
    import keras

    bns = [la for la in _all_layers(model) if isinstance(la, keras.layers.BatchNormalization)]
    drops = [la for la in _all_layers(model) if isinstance(la, keras.layers.Dropout)]
    rng = np.random.default_rng(seed + 2)
    for la in bns:
        c = la.gamma.shape[0] if la.gamma is not None else la.moving_mean.shape[0]
        if la.gamma is not None:
            la.gamma.assign(rng.uniform(0.8, 1.2, c).astype(np.float32))
        if la.beta is not None:
            la.beta.assign(rng.uniform(-0.1, 0.1, c).astype(np.float32))
    saved = [(la, la.momentum) for la in bns], [(la, la.rate) for la in drops]
    for la in bns:
        la.momentum = 0.0
    for la in drops:
        la.rate = 0.0
    try:
        # Enough images that even the last 2x2 maps of the 64x64 models give >= 128 samples
        # per channel: statistics from a handful overfit the batch and blow other inputs up.
        x = _calibration_batch((1,) + tuple(shape), seed, n=4 if len(shape) == 4 else 32)
        model(x, training=True)
    finally:
        for la, m in saved[0]:
            la.momentum = m
        for la, r in saved[1]:
            la.rate = r
    for la in bns:
        la.moving_mean.assign(_round(np.asarray(la.moving_mean.numpy())))
        la.moving_variance.assign(_round(np.asarray(la.moving_variance.numpy())))


def _all_layers(model):
    out = []
    for la in model.layers:
        out.append(la)
        if hasattr(la, "layers"):
            out.extend(_all_layers(la))
    return out


def _keras_bytes(name: str, params: dict, progress: bool) -> bytes:
    from tqdm.auto import tqdm

    from .keras_export import export_keras

    steps = ["build Keras model", "calibrate BatchNorm", "export to ONNX (tf2onnx)"]
    with tqdm(total=len(steps), desc=name, disable=not progress, leave=False) as bar:
        bar.set_postfix_str(steps[0])
        model, shape = _keras_model(name, params)
        bar.update()
        bar.set_postfix_str(steps[1])
        _calibrate_keras_batch_norm(model, shape, SEED)
        bar.update()
        bar.set_postfix_str(steps[2])
        with tempfile.TemporaryDirectory() as tmp:
            proto = export_keras(model, Path(tmp) / "model.onnx")
        _bind_normalization_inputs(proto, model, name)
        data = proto.SerializeToString(deterministic=True)
        bar.update()
    return data


def _bind_normalization_inputs(proto, model, name: str) -> None:
    """tf2onnx turns the mean and variance that a Keras ``Normalization`` layer captures
    (EfficientNet's input normalisation) into extra graph inputs; make them initializers
    holding the layer's values, so the model has its one image input."""
    import keras
    import onnx
    from onnx import numpy_helper

    g = proto.graph
    extra = [i for i in g.input[1:] if i.name not in {t.name for t in g.initializer}]
    if not extra:
        return
    norms = [la for la in _all_layers(model) if isinstance(la, keras.layers.Normalization)]
    used = {x for n in g.node for x in n.input}
    keep = [onnx.ValueInfoProto.FromString(g.input[0].SerializeToString())]
    for inp in extra:
        if inp.name not in used:
            continue
        kind = ("mean" if inp.name.endswith("/Sub/y:0") else
                "variance" if inp.name.endswith("/Sqrt/x:0") else None)
        if len(norms) != 1 or kind is None or "normalization" not in inp.name:
            raise ValueError(f"{name}: the ONNX export has an unexpected extra input "
                             f"{inp.name!r}; only a Normalization layer's mean/variance are "
                             f"bound to initializers")
        value = np.asarray(getattr(norms[0], kind), np.float32)
        dims = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        g.initializer.append(numpy_helper.from_array(value.reshape(dims), inp.name))
    del g.input[:]
    g.input.extend(keep)
    onnx.checker.check_model(proto)
