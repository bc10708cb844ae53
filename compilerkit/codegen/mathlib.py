"""The IR-level math library: exp, log, tanh, erf written in LLVM IR by compilerkit.

Calling the C library would make results depend on each target's libm; these functions are
plain float arithmetic (range reduction + polynomials, as in Cephes), so every target computes
the same values. sqrt, floor, ceil and fabs are LLVM intrinsics: IEEE-exact everywhere.
All are internal and always-inline so loops that use them still vectorise.
"""

from __future__ import annotations

import llvmlite.ir as ir

F32 = ir.FloatType()
I32 = ir.IntType(32)


def _fn(module, name, nargs=1):
    f = ir.Function(module, ir.FunctionType(F32, [F32] * nargs), name)
    f.linkage = "internal"
    f.attributes.add("alwaysinline")
    return f, ir.IRBuilder(f.append_basic_block("entry"))


def _intrinsic(module, name):
    full = f"llvm.{name}.f32"
    if full in module.globals:
        return module.globals[full]
    return ir.Function(module, ir.FunctionType(F32, [F32]), full)


def _c(v):
    return ir.Constant(F32, v)


def _poly(b, x, coeffs):
    # Horner: coeffs from the highest degree down.
    acc = _c(coeffs[0])
    for c in coeffs[1:]:
        acc = b.fadd(b.fmul(acc, x), _c(c))
    return acc


def _select(b, cond, a, c):
    return b.select(cond, a, c)


def build_exp(module):
    f, b = _fn(module, "ck_expf")
    x = f.args[0]
    # exp(x) = 2^n * exp(r), n = round(x / ln2), |r| <= ln2/2.
    hi = b.fcmp_ordered(">", x, _c(88.72283))
    lo = b.fcmp_ordered("<", x, _c(-103.97208))
    xc = _select(b, b.fcmp_ordered(">", x, _c(88.0)), _c(88.0), x)
    xc = _select(b, b.fcmp_ordered("<", xc, _c(-87.0)), _c(-87.0), xc)
    n = b.call(_intrinsic(module, "floor"), [b.fadd(b.fmul(xc, _c(1.4426950408889634)), _c(0.5))])
    r = b.fsub(xc, b.fmul(n, _c(0.693359375)))
    r = b.fsub(r, b.fmul(n, _c(-2.12194440e-4)))
    p = _poly(b, r, [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                     1.6666665459e-1, 5.0000001201e-1])
    p = b.fadd(b.fadd(b.fmul(b.fmul(p, r), r), r), _c(1.0))
    ni = b.fptosi(n, I32)
    scale = b.bitcast(b.shl(b.add(ni, ir.Constant(I32, 127)), ir.Constant(I32, 23)), F32)
    y = b.fmul(p, scale)
    y = _select(b, hi, _c(float("inf")), y)
    y = _select(b, lo, _c(0.0), y)
    # Values between -103.97 and -87 underflow towards 0; report 0 (within float precision).
    y = _select(b, b.fcmp_ordered("<", x, _c(-87.0)), _c(0.0), y)
    y = _select(b, b.fcmp_unordered("uno", x, x), x, y)
    b.ret(y)
    return f


def build_log(module):
    f, b = _fn(module, "ck_logf")
    x = f.args[0]
    bits = b.bitcast(x, I32)
    e = b.sub(b.and_(b.lshr(bits, ir.Constant(I32, 23)), ir.Constant(I32, 255)),
              ir.Constant(I32, 127))
    m = b.bitcast(b.or_(b.and_(bits, ir.Constant(I32, 0x7FFFFF)), ir.Constant(I32, 0x3F800000)),
                  F32)
    big = b.fcmp_ordered(">", m, _c(1.41421356))
    m = _select(b, big, b.fmul(m, _c(0.5)), m)
    e = _select(b, big, b.add(e, ir.Constant(I32, 1)), e)
    fm = b.fsub(m, _c(1.0))
    s = b.fdiv(fm, b.fadd(fm, _c(2.0)))
    s2 = b.fmul(s, s)
    p = _poly(b, s2, [2.0 / 11, 2.0 / 9, 2.0 / 7, 2.0 / 5, 2.0 / 3, 2.0])
    y = b.fadd(b.fmul(p, s), b.fmul(b.sitofp(e, F32), _c(0.6931471805599453)))
    # Special cases: log(0) = -inf, log(x<0) = nan, log(inf) = inf, denormals are tiny anyway.
    y = _select(b, b.fcmp_ordered("==", x, _c(0.0)), _c(float("-inf")), y)
    y = _select(b, b.fcmp_ordered("<", x, _c(0.0)), _c(float("nan")), y)
    y = _select(b, b.fcmp_ordered("==", x, _c(float("inf"))), x, y)
    y = _select(b, b.fcmp_ordered("<", x, _c(1.17549435e-38)),
                _select(b, b.fcmp_ordered(">", x, _c(0.0)), _c(-87.33654), y), y)
    y = _select(b, b.fcmp_unordered("uno", x, x), x, y)
    b.ret(y)
    return f


def build_tanh(module, exp):
    f, b = _fn(module, "ck_tanhf")
    x = f.args[0]
    ax = b.call(_intrinsic(module, "fabs"), [x])
    t = b.call(exp, [b.fmul(ax, _c(-2.0))])
    y = b.fdiv(b.fsub(_c(1.0), t), b.fadd(_c(1.0), t))
    small = b.fsub(ax, b.fmul(b.fmul(b.fmul(ax, ax), ax), _c(1.0 / 3)))
    y = _select(b, b.fcmp_ordered("<", ax, _c(0.004)), small, y)
    neg = b.fcmp_ordered("<", x, _c(0.0))
    b.ret(_select(b, neg, b.fsub(_c(0.0), y), y))
    return f


def build_erf(module, exp):
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
    f, b = _fn(module, "ck_erff")
    x = f.args[0]
    ax = b.call(_intrinsic(module, "fabs"), [x])
    t = b.fdiv(_c(1.0), b.fadd(_c(1.0), b.fmul(_c(0.3275911), ax)))
    p = _poly(b, t, [1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592])
    p = b.fmul(p, t)
    y = b.fsub(_c(1.0), b.fmul(p, b.call(exp, [b.fsub(_c(0.0), b.fmul(ax, ax))])))
    b.ret(_select(b, b.fcmp_ordered("<", x, _c(0.0)), b.fsub(_c(0.0), y), y))
    return f


class MathLib:
    """Builds each function on first use in the module being generated."""

    def __init__(self, module):
        self.module = module
        self.funcs = {}

    def get(self, name):
        if name not in self.funcs:
            if name == "exp":
                self.funcs[name] = build_exp(self.module)
            elif name == "log":
                self.funcs[name] = build_log(self.module)
            elif name == "tanh":
                self.funcs[name] = build_tanh(self.module, self.get("exp"))
            elif name == "erf":
                self.funcs[name] = build_erf(self.module, self.get("exp"))
            elif name in ("sqrt", "floor", "ceil", "fabs"):
                self.funcs[name] = _intrinsic(self.module, name)
            else:
                raise NotImplementedError(f"math function {name}")
        return self.funcs[name]
