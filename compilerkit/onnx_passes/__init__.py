"""Passes over ONNX IR, one module each; `run_onnx_passes` applies them in the usual order."""

from compilerkit.onnx_passes.constant_folding import fold_constants
from compilerkit.onnx_passes.dead_code import remove_dead_code
from compilerkit.onnx_passes.decompose import decompose
from compilerkit.onnx_passes.shape_inference import infer_shapes


def run_onnx_passes(module):
    """Shape inference, constant folding (to a fixed point with shape inference, since folding
    a Shape subgraph makes a Reshape's result type known), decomposition, dead code removal."""
    infer_shapes(module)
    while fold_constants(module):
        infer_shapes(module)
    decompose(module)
    while fold_constants(module):
        infer_shapes(module)
    remove_dead_code(module)
    return module


__all__ = ["infer_shapes", "fold_constants", "decompose", "remove_dead_code", "run_onnx_passes"]
