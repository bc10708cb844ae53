"""Shape inference on ONNX IR: give every result a static ranked tensor type.

Assumes the function arguments are static (the frontend fixed them). Each op whose result
types are not yet static is asked of ONNX's own shape inference as a one-node model, with its
constant operands as initializers; ops left dynamic stay so and lowering will refuse them.
"""

from __future__ import annotations

import onnx
from xdsl.dialects.builtin import NoneType

from compilerkit.dialects import onnx as onnx_d
from compilerkit.onnx_passes.single_node import main_func, node_model, refresh_signature, set_type


def infer_shapes(module) -> bool:
    f = main_func(module)
    changed = False
    for op in list(f.body.block.ops):
        if not op.name.startswith("onnx.") or op.name in ("onnx.Constant", "onnx.NoValue"):
            continue
        if all(onnx_d.is_static(r.type) or isinstance(r.type, NoneType) for r in op.results):
            continue
        if not all(onnx_d.is_static(v.type) or isinstance(v.type, NoneType)
                   for v in op.operands):
            continue
        model = node_model(op, module)
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        except Exception:  # noqa: BLE001 - leave it dynamic; lowering names the op if it matters
            continue
        found = {vi.name: vi for vi in inferred.graph.output}
        found.update({vi.name: vi for vi in inferred.graph.value_info})
        for k, res in enumerate(op.results):
            vi = found.get(f"out{k}")
            tt = vi.type.tensor_type if vi is not None else None
            if tt is None or not tt.HasField("shape"):
                continue
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            elem = onnx_d.elem_type(tt.elem_type) if tt.elem_type else res.type.element_type
            t = onnx_d.tensor_type(dims, elem)
            if t != res.type:
                set_type(res, t)
                changed = True
    refresh_signature(f)
    return changed
