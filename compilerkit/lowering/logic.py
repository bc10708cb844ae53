"""Lowering of ONNX's comparison, logic, selection and integer ops to Kernel IR: Equal, Less,
Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor, Where, IsNaN, IsInf, Sign, Mod and the
Bitwise ops. Each is one elementwise nest (elementwise._map: numpy broadcasting, short trailing
dims merged) around a scalar function of the loaded inputs.

Semantics follow onnxruntime, which is what the tests compare with:
- float comparisons are ordered (NaN compares false, so Equal(NaN, NaN) is false), -0 == +0;
- Sign keeps NaN and gives +0 for -0;
- Mod on integers: fmod=0 takes the divisor's sign (Python's %), fmod=1 the dividend's (C's %);
  a zero divisor is a RunError, as for Div (codegen's guarded remainder). x % -1 is 0 (the
  divisor -1 is replaced by 1 here, so INT_MIN % -1 never reaches the overflowing division).
- BitShift (signed types, opset 28): the right shift is arithmetic; a shift amount that is
  negative or at least the width gives what the sign extension alone gives (0, or -1 for a
  right shift of a negative x), so LLVM's shift never sees an amount it leaves undefined.
What the code generator cannot compute exactly is refused here as UnsupportedOpError naming the
attribute or dtype: float Mod (fmod needs an exact remainder the math library does not have).
Not registered yet: Not (its every ONNX node test is opset 1, below the opsets compilerkit
compiles, and every lowered op must pass one; `NOT` below is its lowering, ready for when old
opsets are upgraded on import). ONNX's unsigned BitShift is refused with the unsigned types.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import i1

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, is_float
from compilerkit.lowering.elementwise import _map

# ONNX comparison -> (ordered float predicate, signed integer predicate)
COMPARE = {"Equal": ("oeq", "eq"), "Less": ("olt", "slt"), "Greater": ("ogt", "sgt"),
           "LessOrEqual": ("ole", "sle"), "GreaterOrEqual": ("oge", "sge")}


def _ori(b, x, y):
    return b.add(arith.OrIOp(x, y))


def _xori(b, x, y):
    if x.type == i1:
        return b.cmpi("ne", x, y)
    return b.add(arith.XOrIOp(x, y))


def _compare(b, op, x, y):
    fp, ip = COMPARE[onnx_d.op_type(op)]
    if is_float(x.type):
        return b.cmpf(fp, x, y)
    return b.cmpi(ip, x, y)


def _sign(b, op, x):
    t = x.type
    zero, one, minus = b.const(0, t), b.const(1, t), b.const(-1, t)
    if is_float(t):
        rest = b.select(b.cmpf("uno", x, x), x, zero)  # NaN stays NaN; -0 and +0 give +0
        return b.select(b.cmpf("ogt", x, zero), one, b.select(b.cmpf("olt", x, zero), minus,
                                                                rest))
    return b.select(b.cmpi("sgt", x, zero), one, b.select(b.cmpi("slt", x, zero), minus, zero))


def _is_inf(b, op, x):
    pos = onnx_d.get_attr(op, "detect_positive", 1)
    neg = onnx_d.get_attr(op, "detect_negative", 1)
    hits = [b.cmpf("oeq", x, b.const(v, x.type))
            for v, on in ((float("inf"), pos), (float("-inf"), neg)) if on]
    if not hits:
        return b.const(0, i1)
    return hits[0] if len(hits) == 1 else _ori(b, *hits)


def _bitshift(b, op, x, y):
    t = x.type
    width = t.width.data
    left = onnx_d.get_attr(op, "direction", "") == "LEFT"
    fits = b.and_(b.cmpi("sge", y, b.const(0, t)), b.cmpi("slt", y, b.const(width, t)))
    if left:
        shifted = b.add(arith.ShLIOp(x, b.select(fits, y, b.const(0, t))))
        return b.select(fits, shifted, b.const(0, t))
    # Shifting by width - 1 is the sign extension alone: 0 or -1.
    return b.add(arith.ShRSIOp(x, b.select(fits, y, b.const(width - 1, t))))


def _mod(b, op, x, y):
    t = x.type
    zero, one = b.const(0, t), b.const(1, t)
    # x % -1 is 0: dividing by 1 instead gives it and keeps INT_MIN / -1 out of the remainder.
    y1 = b.select(b.cmpi("eq", y, b.const(-1, t)), one, y)
    r = b.add(arith.RemSIOp(x, y1))
    if onnx_d.get_attr(op, "fmod", 0):
        return r
    # Python's %: a non-zero remainder whose sign differs from the divisor's moves by y.
    differ = b.cmpi("ne", b.cmpi("slt", r, zero), b.cmpi("slt", y, zero))
    fix = b.and_(b.cmpi("ne", r, zero), differ)
    return b.select(fix, b.binary("add", r, y), r)


UNARY = {
    "IsNaN": lambda b, op, x: b.cmpf("uno", x, x),
    "IsInf": _is_inf,
    "Sign": _sign,
    "BitwiseNot": lambda b, op, x: b.binary("sub", b.const(-1, x.type), x),
}

BINARY = {
    **{name: _compare for name in COMPARE},
    "And": lambda b, op, x, y: b.and_(x, y),
    "Or": lambda b, op, x, y: _ori(b, x, y),
    "Xor": lambda b, op, x, y: _xori(b, x, y),
    "BitwiseAnd": lambda b, op, x, y: b.and_(x, y),
    "BitwiseOr": lambda b, op, x, y: _ori(b, x, y),
    "BitwiseXor": lambda b, op, x, y: _xori(b, x, y),
    "Mod": _mod,
    "BitShift": _bitshift,
}

# Not, for when it can be registered (see the module docstring).
NOT = {"Not": lambda b, op, x: b.cmpi("eq", x, b.const(0, i1))}

OPS = (*UNARY, *BINARY, "Where")


def _refuse(op, what: str):
    # lower_to_krnl turns NotImplementedError into UnsupportedOpError naming node and op.
    raise NotImplementedError(what)


def _check(op, ins):
    kind = onnx_d.op_type(op)
    elem = ins[0].type.element_type
    if kind == "Mod" and is_float(elem):
        _refuse(op, f"Mod on {elem} (fmod={onnx_d.get_attr(op, 'fmod', 0)}) is not supported: "
                    "only integer Mod is lowered")
    if kind in ("IsNaN", "IsInf") and not is_float(elem):
        _refuse(op, f"{kind} on {elem}: ONNX defines it on floating-point inputs")
    if kind.startswith("Bit") and (is_float(elem) or elem == i1):
        _refuse(op, f"{kind} on {elem}: ONNX defines it on integer inputs")
    if kind == "Sign" and elem == i1:
        _refuse(op, "Sign on bool: ONNX defines it on numeric inputs")


def lower_logic(b: KernelBuilder, op, ins):
    """out = f(inputs) elementwise, f from UNARY / BINARY, or Where's select."""
    _check(op, ins)
    kind = onnx_d.op_type(op)
    out = b.alloc(onnx_d.shape_of(op.results[0]), op.results[0].type.element_type)
    if kind == "Where":
        scalar = lambda v: b.select(v[0], v[1], v[2])  # noqa: E731
        _map(b, ins[:3], out, scalar)
    elif kind in UNARY:
        _map(b, ins[:1], out, lambda v: UNARY[kind](b, op, v[0]))
    else:
        _map(b, ins[:2], out, lambda v: BINARY[kind](b, op, v[0], v[1]))
    return [out]
