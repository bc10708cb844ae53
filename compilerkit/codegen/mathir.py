"""The small LLVM IR helpers the math library's functions are built from (mathlib.py,
mathtrig.py, mathpow.py): an internal always-inline f32 function, float constants, fused
multiply-add, Horner polynomials, the exact intrinsics. No function of its own."""

from __future__ import annotations

import llvmlite.ir as ir

F32 = ir.FloatType()
F64 = ir.DoubleType()
I32 = ir.IntType(32)
I64 = ir.IntType(64)


def fn(module, name, nargs=1, t=F32):
    """An internal, always-inline function of `nargs` arguments of type t, and a builder at its
    entry."""
    f = ir.Function(module, ir.FunctionType(t, [t] * nargs), name)
    f.linkage = "internal"
    f.attributes.add("alwaysinline")
    return f, ir.IRBuilder(f.append_basic_block("entry"))


def c(v, t=F32):
    return ir.Constant(t, v)


def declare(module, name, t, nargs):
    """The declaration of an LLVM intrinsic `name` taking nargs values of type t."""
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(t, [t] * nargs), name)


def suffix(t) -> str:
    return "f64" if t == F64 else "f32"


def intrinsic(module, name, t=F32):
    """llvm.<name>.f32 (or .f64) of one argument: sqrt, floor, ceil, fabs."""
    return declare(module, f"llvm.{name}.{suffix(t)}", t, 1)


def copysign(module, t=F32):
    return declare(module, f"llvm.copysign.{suffix(t)}", t, 2)


def fma(b, a, x, y):
    """a * x + y, rounded once (llvm.fma)."""
    return b.call(declare(b.module, f"llvm.fma.{suffix(a.type)}", a.type, 3), [a, x, y])


def poly(b, x, coeffs):
    """Horner: coeffs from the highest degree down, one fused multiply-add per degree."""
    acc = c(coeffs[0], x.type)
    for k in coeffs[1:]:
        acc = fma(b, acc, x, c(k, x.type))
    return acc


def select(b, cond, a, other):
    return b.select(cond, a, other)
