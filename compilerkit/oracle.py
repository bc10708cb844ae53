"""The reference oracle: onnxruntime on one thread, and the seeded inputs every comparison
feeds both sides. Conformance, profiling, the experiments, the benchmarks and the tests all ask
onnxruntime the same way through here, so "what onnxruntime says" means one thing."""

from __future__ import annotations

import numpy as np
import onnx


def random_inputs(model) -> list[tuple[str, np.ndarray]]:
    """Seeded standard-normal inputs (seed = input position) for the graph inputs that are not
    initializers; symbolic or unknown dimensions become 1. `model`: a ModelProto or a path."""
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(model)
    inits = {i.name for i in model.graph.initializer}
    out = []
    for k, inp in enumerate(i for i in model.graph.input if i.name not in inits):
        tt = inp.type.tensor_type
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        out.append((inp.name, np.random.default_rng(k).standard_normal(shape).astype(dtype)))
    return out


def ort_session(path):
    """An onnxruntime CPU session on one thread (intra- and inter-op), errors-only logging.
    `path`: an ONNX file, or a serialized model (bytes), as onnxruntime takes."""
    import onnxruntime as ort  # heavy, and only the comparisons need it
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    # Errors only: onnxruntime warns about unused initializers in some light models, noise in
    # a notebook, and not about our compiler.
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_outputs(path, feeds) -> list[np.ndarray]:
    """onnxruntime's outputs (`ort_session`) for `feeds`: a dict or (name, array) pairs."""
    return ort_session(path).run(None, dict(feeds))
