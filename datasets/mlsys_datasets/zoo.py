"""The ONNX model zoo: committed ``.onnx`` files, their manifest, and how to rebuild them.

Builds ``onnx/<name>.onnx`` for every name in ``ALL_MODELS`` plus ``onnx/manifest.json`` (per
file: sha256, size, how it was made, input/output names, shapes and dtypes). Keras models are
exported through ``keras_export`` (tf2onnx); the handmade ones come from ``handmade``
(``onnx.helper``); the modern set (``MODERN_MODELS``: transformers, recurrent nets, a 2D U-Net,
a detection head, from ``modern``) is exported like the Keras models, and its quantised
variants are made from those exports by onnxruntime's quantisers (``quantised``).

``ONNX_MODELS`` is the classic set that every backend's suite runs; ``MODERN_MODELS`` are
checked by their own tests (tests/compilerkit/test_modern_models.py), which say which of them
compile today.

Assumes: the recipes below are the single source of truth, and rebuilding them gives the same
bytes on the same kind of CPU (``check`` verifies that; on another, constants that TF folds
with its vector code may round an ulp apart, which ``check`` accepts and says). Kits and
notebooks load models by name through ``onnx_path`` / ``load_onnx``, never by relative paths.
Importing this module is cheap: onnx is imported when a model is loaded and TensorFlow only
when Keras models are rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

ONNX_DIR = Path(__file__).resolve().parent / "onnx"
MANIFEST = "manifest.json"

# name -> (Keras builder in mlsys_datasets.models, its parameters). Parameters are JSON-friendly
# so the manifest can record them and tests can rebuild the exact Keras model.
KERAS_RECIPES: dict[str, tuple[str, dict]] = {
    "mlp": ("mlp", {"hidden": 128, "classes": 10, "seed": 0}),
    "lenet": ("lenet", {"classes": 10, "seed": 0}),
    "small_resnet": ("small_resnet", {"input_shape": [32, 32, 3], "classes": 10,
                                      "filters": [8, 16, 32], "blocks_per_stage": 1,
                                      "seed": 0}),
    "unet3d_tiny": ("unet3d", {"side": 16, "in_channels": 4, "classes": 3, "base_filters": 4,
                               "depth": 2, "batch_norm": True, "upsampling": "transpose",
                               "seed": 0}),
}
HANDMADE = ("gemm_mlp", "conv_bn_pool", "broadcast_elementwise", "dynamic_batch_mlp",
            "matmul_16x16")
ONNX_MODELS: tuple[str, ...] = tuple(KERAS_RECIPES) + HANDMADE

# The modern set: name -> (builder in mlsys_datasets.modern, its parameters), exported as the
# Keras recipes are. Widths tiny, structure whole.
MODERN_RECIPES: dict[str, tuple[str, dict]] = {
    "bert_encoder": ("bert_encoder", {"vocab": 64, "seq": 16, "dim": 32, "heads": 2, "ff": 64,
                                      "depth": 2, "classes": 4, "seed": 0}),
    "gpt_decoder": ("gpt_decoder", {"vocab": 64, "seq": 16, "dim": 32, "heads": 2, "ff": 64,
                                    "depth": 2, "seed": 0}),
    "vit": ("vit", {"image": 16, "patch": 4, "channels": 3, "dim": 32, "heads": 2, "ff": 64,
                    "depth": 2, "classes": 10, "seed": 0}),
    "lstm": ("lstm_model", {"steps": 12, "features": 8, "units": 16, "classes": 4, "seed": 0}),
    "gru": ("gru_model", {"steps": 12, "features": 8, "units": 16, "classes": 4, "seed": 0}),
    "unet2d": ("unet2d", {"side": 32, "channels": 3, "classes": 2, "base_filters": 8,
                          "depth": 2, "seed": 0}),
    "detection_head": ("detection_head", {"side": 32, "channels": 3, "filters": 16,
                                          "anchors": 2, "top_k": 8, "seed": 0}),
}
# Quantised variants: name -> (float model of MODERN_RECIPES, "static" (QDQ) or "dynamic",
# options of mlsys_datasets.quantised).
QUANTISED: dict[str, tuple[str, str, dict]] = {
    "bert_encoder_qdq": ("bert_encoder", "static", {"per_channel": False}),
    "bert_encoder_dynamic": ("bert_encoder", "dynamic", {}),
    "unet2d_qdq": ("unet2d", "static", {"per_channel": True}),
    "unet2d_dynamic": ("unet2d", "dynamic", {}),
}
MODERN_MODELS: tuple[str, ...] = tuple(MODERN_RECIPES) + tuple(QUANTISED)
ALL_MODELS: tuple[str, ...] = ONNX_MODELS + MODERN_MODELS


def _check_name(name: str) -> str:
    if name not in ALL_MODELS:
        raise ValueError(f"unknown ONNX model {name!r}; available: {', '.join(ALL_MODELS)}")
    return name


def onnx_path(name: str) -> Path:
    """Absolute path of the committed ONNX file ``name`` (one of ``ONNX_MODELS``)."""
    path = ONNX_DIR / f"{_check_name(name)}.onnx"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; regenerate it with "
                                f"`python -m mlsys_datasets build`")
    return path


def load_onnx(name: str):
    """The committed ONNX model ``name`` as an ``onnx.ModelProto``."""
    import onnx

    return onnx.load(str(onnx_path(name)))


def manifest(directory: Path | str | None = None) -> dict:
    """The manifest (``{"models": {file: entry}, ...}``) of the committed zoo or ``directory``."""
    d = Path(directory) if directory is not None else ONNX_DIR
    return json.loads((d / MANIFEST).read_text())


# --------------------------------------------------------------------------- building


def _io(values) -> list[dict]:
    from onnx import helper

    out = []
    for v in values:
        t = v.type.tensor_type
        shape = [d.dim_param if d.HasField("dim_param") else d.dim_value for d in t.shape.dim]
        out.append({"name": v.name, "shape": shape,
                    "dtype": helper.tensor_dtype_to_np_dtype(t.elem_type).name})
    return out


def sample_inputs(name: str, batch: int = 1, seed: int = 0) -> dict:
    """{input name: array}: a deterministic, meaningful input for the committed model ``name``.

    Token ids (integer inputs) are drawn from [1, vocab) with the last quarter of each row
    padding (id 0), so a padding mask has something to hide; float inputs are uniform in
    [0, 1) (images, sequences). Symbolic dimensions become ``batch``. Reads the manifest and
    the recipes only: no onnx, no TensorFlow.
    """
    entry = manifest()["models"][f"{_check_name(name)}.onnx"]
    return _draw(name, entry["inputs"], batch, seed)


def _draw(name: str, inputs: list[dict], batch: int, seed: int) -> dict:
    import numpy as np

    base = QUANTISED[name][0] if name in QUANTISED else name
    vocab = MODERN_RECIPES[base][1].get("vocab") if base in MODERN_RECIPES else None
    rng = np.random.default_rng(seed)
    feeds = {}
    for io in inputs:
        shape = [d if isinstance(d, int) else batch for d in io["shape"]]
        dtype = np.dtype(io["dtype"])
        if np.issubdtype(dtype, np.integer):
            if vocab is None:
                raise ValueError(f"model {name!r} has integer input {io['name']!r} but no "
                                 f"vocabulary in its recipe")
            ids = rng.integers(1, vocab, size=shape)
            ids[..., shape[-1] - shape[-1] // 4:] = 0
            feeds[io["name"]] = ids.astype(dtype)
        else:
            feeds[io["name"]] = rng.random(shape, dtype=np.float32).astype(dtype)
    return feeds


def _keras_source(module: str, builder: str, params: dict, opset: int) -> dict:
    args = ", ".join(f"{k}={v!r}" for k, v in params.items())
    call = "keras_model" if module == "models" else "modern_model"
    return {"source": "keras", "builder": f"mlsys_datasets.{module}.{builder}",
            "params": params, "opset": opset,
            "how": f"{call}({builder!r}, {args}).export(format='onnx') via tf2onnx, "
                   f"names normalised by mlsys_datasets.keras_export"}


def _build_quantised(name: str, path: Path, built: dict) -> tuple:
    """Quantise the float model ``QUANTISED[name][0]``, reusing its file if this build just
    wrote it (``built``: name -> path), else exporting it into a temporary directory."""
    from . import quantised

    base, mode, options = QUANTISED[name]
    with tempfile.TemporaryDirectory() as tmp:
        float_path = built.get(base)
        if float_path is None:
            float_path = Path(tmp) / f"{base}.onnx"
            _build_one(base, float_path, {})
        if mode == "static":
            calibration = [_feeds_for(base, float_path, seed)
                           for seed in range(100, 100 + quantised.CALIBRATION_BATCHES)]
            proto = quantised.quantise_static(float_path, path, calibration,
                                              graph_name=name, **options)
            how = (f"onnxruntime.quantization.quantize_static({base}.onnx, QDQ, activations "
                   f"uint8, weights int8, MinMax on {quantised.CALIBRATION_BATCHES} batches of "
                   f"zoo.sample_inputs(seed=100..), {options})")
        else:
            proto = quantised.quantise_dynamic(float_path, path, graph_name=name, **options)
            how = (f"onnxruntime.quantization.quantize_dynamic({base}.onnx, weights int8, "
                   f"reduce_range=True)")
    from importlib.metadata import version

    source = {"source": "onnxruntime.quantization", "group": "modern",
              "builder": f"mlsys_datasets.quantised.quantise_{mode}", "base": base,
              "params": options, "opset": _opset(proto), "how": how,
              "onnxruntime": version("onnxruntime")}
    return proto, source


def _feeds_for(base: str, float_path: Path, seed: int) -> dict:
    """sample_inputs for a float model being built (its manifest entry may not exist yet)."""
    import onnx

    proto = onnx.load(str(float_path))
    inits = {t.name for t in proto.graph.initializer}
    return _draw(base, _io([v for v in proto.graph.input if v.name not in inits]), 1, seed)


def _opset(proto) -> int:
    return next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))


def _build_one(name: str, path: Path, built: dict) -> dict:
    """Write ``path`` for model ``name``; return its manifest entry (without hash and size)."""
    if name in QUANTISED:
        proto, source = _build_quantised(name, path, built)
    elif name in MODERN_RECIPES:
        import onnx

        from . import modern
        from .canonical import canonicalise
        from .keras_export import OPSET, export_keras

        builder, params = MODERN_RECIPES[name]
        # Attention and recurrent exports change order and names between processes:
        # canonical form (mlsys_datasets.canonical) makes the bytes a function of the graph.
        proto = canonicalise(export_keras(modern.modern_model(builder, **params), path))
        onnx.checker.check_model(proto)
        path.write_bytes(proto.SerializeToString(deterministic=True))
        source = _keras_source("modern", builder, params, OPSET)
        source["group"] = "modern"
        source["how"] += ", then mlsys_datasets.canonical.canonicalise"
    elif name in KERAS_RECIPES:
        from . import models
        from .keras_export import OPSET, export_keras

        builder, params = KERAS_RECIPES[name]
        proto = export_keras(models.keras_model(builder, **params), path)
        source = _keras_source("models", builder, params, OPSET)
    else:
        from . import handmade

        proto, _ = handmade.BUILDERS[name]()
        path.write_bytes(proto.SerializeToString(deterministic=True))
        source = {"source": "onnx.helper", "builder": f"mlsys_datasets.handmade.{name}",
                  "params": {}, "opset": handmade.OPSET,
                  "how": (handmade.BUILDERS[name].__doc__ or "").split("\n")[0].strip()}
    inits = {t.name for t in proto.graph.initializer}
    built[name] = path
    source["inputs"] = _io([v for v in proto.graph.input if v.name not in inits])
    source["outputs"] = _io(proto.graph.output)
    source["ops"] = sorted({n.op_type for n in proto.graph.node})
    return source


def _tool_versions() -> dict:
    from importlib.metadata import version

    return {p: version(p) for p in ("onnx", "tf2onnx", "keras", "tensorflow", "onnxruntime")}


def build(out: Path | str | None = None, names=None, log=print) -> dict:
    """(Re)generate the ONNX files and ``manifest.json`` in ``out`` (default: the package's).

    Returns the manifest. ``names`` limits the build to some models (the manifest then lists
    only those).
    """
    out = Path(out) if out is not None else ONNX_DIR
    out.mkdir(parents=True, exist_ok=True)
    names = ALL_MODELS if names is None else tuple(_check_name(n) for n in names)
    entries, built = {}, {}
    for name in names:
        path = out / f"{name}.onnx"
        entry = _build_one(name, path, built)
        data = path.read_bytes()
        entry["sha256"] = hashlib.sha256(data).hexdigest()
        entry["size"] = len(data)
        entries[path.name] = entry
        if log:
            log(f"built {path.name:28s} {len(data):>9,d} bytes  ({entry['source']})")
    doc = {"generator": "python -m mlsys_datasets build", "tools": _tool_versions(),
           "models": entries}
    (out / MANIFEST).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return doc


def check(reference: Path | str | None = None, log=print) -> list[str]:
    """Rebuild everything into a temporary directory and compare with ``reference``.

    Byte for byte first. A model whose bytes differ still passes when it is the same graph
    with every constant within ROUNDING_ULPS units in the last place (`rounding_only`): TF
    folds BatchNorm into the Conv weights at export with this CPU's vector code, whose rounding
    differs between AVX2 and AVX-512 hosts by an ulp here and there; the manifest then passes
    when it differs only in those files' sha256 and size. Returns the names of files that
    differ otherwise, are missing, or are unexpected (empty: all good).
    """
    reference = Path(reference) if reference is not None else ONNX_DIR
    problems, rounded = [], []
    with tempfile.TemporaryDirectory() as tmp:
        build(tmp, log=None)
        fresh = {p.name for p in Path(tmp).iterdir()}
        committed = {p.name for p in reference.iterdir() if p.suffix in (".onnx", ".json")}
        for fname in sorted(fresh | committed, key=lambda f: (f == MANIFEST, f)):
            if fname not in committed:
                problems.append(fname)
                log and log(f"MISSING    {fname}: not in {reference}")
            elif fname not in fresh:
                problems.append(fname)
                log and log(f"UNEXPECTED {fname}: in {reference} but not built by any recipe")
            else:
                a, b = (reference / fname).read_bytes(), (Path(tmp) / fname).read_bytes()
                if a == b:
                    log and log(f"ok         {fname}")
                elif fname.endswith(".onnx") and rounding_only(a, b):
                    rounded.append(fname)
                    log and log(f"ok         {fname} (constants within {ROUNDING_ULPS} ulp)")
                elif fname == MANIFEST and _manifests_agree(a, b, rounded):
                    log and log(f"ok         {fname} (sha256 and size of "
                                f"{', '.join(rounded)} aside)")
                else:
                    problems.append(fname)
                    log and log(f"DIFFERS    {fname}: committed sha256 "
                                f"{hashlib.sha256(a).hexdigest()[:12]}, rebuilt "
                                f"{hashlib.sha256(b).hexdigest()[:12]}")
    return problems


ROUNDING_ULPS = 4  # how far a rebuilt constant may be from the committed one (`rounding_only`)


def rounding_only(a: bytes, b: bytes) -> bool:
    """Whether two serialised models are the same graph (nodes, attributes, inputs, outputs,
    the same initializers by name, type and shape), every floating-point constant within
    ROUNDING_ULPS units in the last place of its tensor's largest magnitude from the other's,
    NaN and inf exactly where the other's are, and every other constant equal."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    try:
        ma, mb = onnx.load_from_string(a), onnx.load_from_string(b)
    except Exception:  # noqa: BLE001 (a file that does not parse differs)
        return False
    ia = {t.name: t for t in ma.graph.initializer}
    ib = {t.name: t for t in mb.graph.initializer}
    if ia.keys() != ib.keys():
        return False
    for name, ta in ia.items():
        x, y = numpy_helper.to_array(ta), numpy_helper.to_array(ib[name])
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        if x.dtype.kind != "f":
            if not np.array_equal(x, y):
                return False
            continue
        ok = np.isfinite(x)
        if not (np.array_equal(ok, np.isfinite(y))
                and np.array_equal(x[~ok], y[~ok], equal_nan=True)):
            return False  # NaN and inf exactly where the other has them
        # within ROUNDING_ULPS units in the last place of the tensor's largest magnitude: a
        # folded BatchNorm shift (beta - mean * scale) cancels, so its own ulps are no measure
        xs, ys = x[ok].astype(np.float64), y[ok].astype(np.float64)
        if xs.size:
            scale = max(float(np.abs(xs).max()), float(np.abs(ys).max()))
            if float(np.abs(xs - ys).max()) > ROUNDING_ULPS * float(np.finfo(x.dtype).eps) * scale:
                return False
    for m in (ma, mb):
        del m.graph.initializer[:]
    return ma.SerializeToString(deterministic=True) == mb.SerializeToString(deterministic=True)


def _manifests_agree(a: bytes, b: bytes, rounded: list) -> bool:
    """Whether two manifests differ at most in the sha256 and size of the files in `rounded`."""
    docs = json.loads(a), json.loads(b)
    for doc in docs:
        for fname in rounded:
            entry = doc.get("models", {}).get(fname)
            if isinstance(entry, dict):
                entry.pop("sha256", None)
                entry.pop("size", None)
    return docs[0] == docs[1]
