"""Lowering of ONNX's trigonometric and hyperbolic functions and their inverses to Kernel IR:
Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh (Tanh is elementwise.py's).
Each is one elementwise nest (elementwise._map) around one `math` op, which codegen turns into
a call of the math library's function (codegen/mathtrig.py: no libm, the same bits on every
target; f64 inputs are computed through f32, as for the library's other functions).

Float inputs only (ONNX defines them on floats); another dtype is refused as
UnsupportedOpError naming node, op and dtype.
"""

from __future__ import annotations

from xdsl.dialects import math

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, is_float
from compilerkit.lowering.elementwise import _map

MATH_OPS = {
    "Sin": math.SinOp, "Cos": math.CosOp, "Tan": math.TanOp,
    "Asin": math.AsinOp, "Acos": math.AcosOp, "Atan": math.AtanOp,
    "Sinh": math.SinhOp, "Cosh": math.CoshOp,
    "Asinh": math.AsinhOp, "Acosh": math.AcoshOp, "Atanh": math.AtanhOp,
}

OPS = tuple(MATH_OPS)


def lower_trig(b: KernelBuilder, op, ins):
    kind = onnx_d.op_type(op)
    elem = ins[0].type.element_type
    if not is_float(elem):
        raise NotImplementedError(f"{kind} on {elem} is not supported (float inputs only)")
    out = b.alloc(onnx_d.shape_of(op.results[0]), op.results[0].type.element_type)
    _map(b, ins[:1], out, lambda v: b.add(MATH_OPS[kind](v[0])))
    return [out]
