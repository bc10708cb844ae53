"""Passes over ONNX IR, one module each; `run_onnx_passes` applies them in the usual order."""

from compilerkit.onnx_passes.constant_folding import fold_constants
from compilerkit.onnx_passes.dead_code import remove_dead_code
from compilerkit.onnx_passes.decompose import decompose
from compilerkit.onnx_passes.shape_inference import infer_shapes
from compilerkit.onnx_passes.validate import validate_module
from compilerkit.stages import verify_ir


def run_onnx_passes(module):
    """Shape inference, validation, constant folding (to a fixed point with shape inference,
    since folding a Shape subgraph makes a Reshape's result type known; folding validates each
    op before computing it), decomposition, dead code removal, validation of what is left;
    the IR verifier runs after each stage."""
    check = verify_ir
    infer_shapes(module)
    check(module, "shape-inference")
    validate_module(module)
    while fold_constants(module):
        infer_shapes(module)
    check(module, "constant-folding")
    decompose(module)
    check(module, "decompose")
    while fold_constants(module):
        infer_shapes(module)
    remove_dead_code(module)
    validate_module(module)
    check(module, "dead-code")
    return module


__all__ = ["infer_shapes", "fold_constants", "decompose", "remove_dead_code", "validate_module",
           "run_onnx_passes"]
