"""Passes over ONNX IR, one module each (each with its ModulePass); compilerkit.passes
lists them and gives their usual order (`onnx_pipeline`)."""

from compilerkit.onnx_passes.constant_folding import fold_constants
from compilerkit.onnx_passes.dead_code import remove_dead_code
from compilerkit.onnx_passes.decompose import decompose
from compilerkit.onnx_passes.shape_inference import infer_shapes
from compilerkit.onnx_passes.validate_onnx import validate_module

__all__ = ["infer_shapes", "fold_constants", "decompose", "remove_dead_code", "validate_module"]
