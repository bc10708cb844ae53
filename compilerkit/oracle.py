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


def ort_session(path, threads: int = 1):
    """An onnxruntime CPU session on `threads` intra-op threads (one inter-op, sequential),
    errors-only logging. `path`: an ONNX file (str or Path), a serialized model (bytes) or a
    ModelProto."""
    import onnxruntime as ort  # heavy, and only the comparisons need it
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Errors only: onnxruntime warns about unused initializers in some light models, noise in
    # a notebook, and not about our compiler.
    so.log_severity_level = 3
    if hasattr(path, "SerializeToString"):
        path = path.SerializeToString()
    elif not isinstance(path, bytes):
        path = str(path)
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_outputs(path, feeds) -> list[np.ndarray]:
    """onnxruntime's outputs (`ort_session`) for `feeds`: a dict or (name, array) pairs."""
    return ort_session(path).run(None, dict(feeds))
