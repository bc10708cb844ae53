"""The ONNX model zoo: committed ``.onnx`` files, their manifest, and how to rebuild them.

Builds ``onnx/<name>.onnx`` for every name in ``ONNX_MODELS`` plus ``onnx/manifest.json`` (per
file: sha256, size, how it was made, input/output names, shapes and dtypes). Keras models are
exported through ``keras_export`` (tf2onnx); the rest come from ``handmade`` (``onnx.helper``).

Assumes: the recipes below are the single source of truth, and rebuilding them gives the same
bytes (``check`` verifies exactly that). Kits and notebooks load models by name through
``onnx_path`` / ``load_onnx``, never by relative paths. Importing this module is cheap: onnx is
imported when a model is loaded and TensorFlow only when Keras models are rebuilt.
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


def _check_name(name: str) -> str:
    if name not in ONNX_MODELS:
        raise ValueError(f"unknown ONNX model {name!r}; available: {', '.join(ONNX_MODELS)}")
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


def _build_one(name: str, path: Path) -> dict:
    """Write ``path`` for model ``name``; return its manifest entry (without hash and size)."""
    if name in KERAS_RECIPES:
        from . import models
        from .keras_export import OPSET, export_keras

        builder, params = KERAS_RECIPES[name]
        proto = export_keras(models.keras_model(builder, **params), path)
        args = ", ".join(f"{k}={v!r}" for k, v in params.items())
        source = {"source": "keras", "builder": f"mlsys_datasets.models.{builder}",
                  "params": params, "opset": OPSET,
                  "how": f"keras_model({builder!r}, {args}).export(format='onnx') via tf2onnx, "
                         f"names normalised by mlsys_datasets.keras_export"}
    else:
        from . import handmade

        proto, _ = handmade.BUILDERS[name]()
        path.write_bytes(proto.SerializeToString(deterministic=True))
        source = {"source": "onnx.helper", "builder": f"mlsys_datasets.handmade.{name}",
                  "params": {}, "opset": handmade.OPSET,
                  "how": (handmade.BUILDERS[name].__doc__ or "").split("\n")[0].strip()}
    inits = {t.name for t in proto.graph.initializer}
    source["inputs"] = _io([v for v in proto.graph.input if v.name not in inits])
    source["outputs"] = _io(proto.graph.output)
    source["ops"] = sorted({n.op_type for n in proto.graph.node})
    return source


def _tool_versions() -> dict:
    from importlib.metadata import version

    return {p: version(p) for p in ("onnx", "tf2onnx", "keras", "tensorflow")}


def build(out: Path | str | None = None, names=None, log=print) -> dict:
    """(Re)generate the ONNX files and ``manifest.json`` in ``out`` (default: the package's).

    Returns the manifest. ``names`` limits the build to some models (the manifest then lists
    only those).
    """
    out = Path(out) if out is not None else ONNX_DIR
    out.mkdir(parents=True, exist_ok=True)
    names = ONNX_MODELS if names is None else tuple(_check_name(n) for n in names)
    entries = {}
    for name in names:
        path = out / f"{name}.onnx"
        entry = _build_one(name, path)
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
    """Rebuild everything into a temporary directory and compare with ``reference`` bytes.

    Returns the names of files that differ, are missing, or are unexpected (empty: all good).
    """
    reference = Path(reference) if reference is not None else ONNX_DIR
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        build(tmp, log=None)
        fresh = {p.name for p in Path(tmp).iterdir()}
        committed = {p.name for p in reference.iterdir() if p.suffix in (".onnx", ".json")}
        for fname in sorted(fresh | committed):
            if fname not in committed:
                problems.append(fname)
                log and log(f"MISSING    {fname}: not in {reference}")
            elif fname not in fresh:
                problems.append(fname)
                log and log(f"UNEXPECTED {fname}: in {reference} but not built by any recipe")
            else:
                a, b = (reference / fname).read_bytes(), (Path(tmp) / fname).read_bytes()
                if a != b:
                    problems.append(fname)
                    log and log(f"DIFFERS    {fname}: committed sha256 "
                                f"{hashlib.sha256(a).hexdigest()[:12]}, rebuilt "
                                f"{hashlib.sha256(b).hexdigest()[:12]}")
                elif log:
                    log(f"ok         {fname}")
    return problems
