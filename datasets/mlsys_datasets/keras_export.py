"""Keras -> ONNX export that gives the same bytes on every run.

Builds an ONNX file from a Keras model with ``model.export(path, format="onnx")`` (tf2onnx
underneath), then normalises what would otherwise depend on process history:

* tf2onnx numbers its helper names from a process-global counter; it is reset before each export
  so a model exported alone or after ten others gets the same names;
* the graph input/output get stable names (``input`` / ``output`` instead of ``keras_tensor_7``
  and ``Identity:0``) and the symbolic batch dimension is called ``batch``;
* doc strings are dropped and the graph is named after the model.

Assumes: a single-input, single-output Keras 3 model on the TensorFlow backend; tf2onnx installed.
The model is called once on zeros first (Keras only exports models that have been called).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import onnx  # noqa: E402

OPSET = 17


def export_keras(model, path, opset: int = OPSET, input_name: str = "input",
                 output_name: str = "output") -> onnx.ModelProto:
    """Export ``model`` to ``path`` (normalised, deterministic bytes); return the ModelProto."""
    import contextlib
    import io
    import warnings

    import tf2onnx.utils

    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise ValueError(f"export_keras handles single-input, single-output models; "
                         f"{model.name!r} has {len(model.inputs)} inputs and "
                         f"{len(model.outputs)} outputs")
    shape = (1,) + tuple(model.inputs[0].shape[1:])
    model(np.zeros(shape, np.float32))
    tf2onnx.utils.INTERNAL_NAME = 1  # helper-name counter: restart it so names never drift
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.onnx"
        # Keras prints "Saved artifact at ..." and tf2onnx warns about np.object; neither helps.
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            model.export(str(raw), format="onnx", opset_version=opset, verbose=False)
        proto = onnx.load(str(raw))
    proto = normalise(proto, graph_name=model.name, input_name=input_name,
                      output_name=output_name)
    onnx.checker.check_model(proto)
    Path(path).write_bytes(proto.SerializeToString(deterministic=True))
    return proto


def normalise(proto: onnx.ModelProto, graph_name: str, input_name: str = "input",
              output_name: str = "output") -> onnx.ModelProto:
    """Rename the single graph input/output, name symbolic dims ``batch``, drop doc strings."""
    g = proto.graph
    renames = {g.input[0].name: input_name, g.output[0].name: output_name}
    for node in g.node:
        node.doc_string = ""
        for i, n in enumerate(node.input):
            if n in renames:
                node.input[i] = renames[n]
        for i, n in enumerate(node.output):
            if n in renames:
                node.output[i] = renames[n]
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.name in renames:
            vi.name = renames[vi.name]
        vi.doc_string = ""
        for i, dim in enumerate(vi.type.tensor_type.shape.dim):
            if dim.HasField("dim_param"):
                # Only the batch dimension is symbolic in the models we export.
                dim.dim_param = "batch" if i == 0 else f"dim{i}"
    _canonical_helper_names(g)
    g.name = graph_name
    g.doc_string = ""
    proto.doc_string = ""
    return proto


_HELPER = re.compile(r"__(\d+)")


def _canonical_helper_names(g) -> None:
    """Renumber tf2onnx's ``name__17`` helper suffixes in order of first use; sort initializers.

    tf2onnx creates helpers while walking Python sets, so their numbers (not the graph) change
    between processes. Renumbering by first appearance in node order (helper initializers become
    ``const__K``) makes the names a function of the graph alone.
    """
    order: dict[str, None] = {}
    for node in g.node:
        for n in (node.name, *node.input, *node.output):
            order.setdefault(n, None)
    for init in sorted(g.initializer, key=lambda t: t.name):
        order.setdefault(init.name, None)
    # Helper constants lose their descriptive stem too: tf2onnx merges equal constants (say
    # const_starts__12 == const_axes__14 == [0]) and which stem survives is set-order luck.
    inits = {t.name for t in g.initializer}
    mapping, k = {}, 0
    for n in order:
        if _HELPER.search(n):
            k += 1
            mapping[n] = f"const__{k}" if n in inits else _HELPER.sub("", n) + f"__{k}"
    if not mapping:
        return
    for node in g.node:
        node.name = mapping.get(node.name, node.name)
        node.input[:] = [mapping.get(n, n) for n in node.input]
        node.output[:] = [mapping.get(n, n) for n in node.output]
    for t in list(g.initializer) + list(g.value_info):
        t.name = mapping.get(t.name, t.name)
    inits = sorted(g.initializer, key=lambda t: t.name)
    # Copy before clearing: the sorted list holds references into the repeated field.
    inits = [type(t).FromString(t.SerializeToString()) for t in inits]
    del g.initializer[:]
    g.initializer.extend(inits)
