"""The IR math library (codegen/mathlib.py, mathtrig.py) and the elementwise lowering that uses
it: accurate to a few ulp over the whole float line, the same bits on big-endian targets, and
vectorised.

Accuracy is measured against numpy in float64, rounded to float32 (an independent reference:
numpy's exp/tanh are libm's, correctly rounded to well under an ulp in float64), as the
distance in units in the last place between the float32 results: 0 ulp is the correctly
rounded answer. Subnormal results (exp(x) for x < -87.3, sigmoid(x) for x < -87.3) count in
subnormal ulps, so flushing them to 0 would fail. Infinities, NaN and +-0 must match exactly.

The vectorisation check reads the optimised LLVM IR of a Sigmoid / Swish loop: the exp must
appear as vector code (`<N x float>` floor and fdiv), not as a scalar loop.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from ckhelpers import make_model
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from onnx import helper

import compilerkit as ck
from compilerkit.lowering.elementwise import merged_dims

N = 256  # elements per hypothesis example (one compiled model per op, reused)

REFERENCE = {
    "Exp": np.exp,
    "Sigmoid": lambda d: 1.0 / (1.0 + np.exp(-d)),
    "Tanh": np.tanh,
}
# Measured maxima over 2.5 million floats spread over the whole float line: 1, 2, 1 ulp.
MAX_ULP = {"Exp": 2, "Sigmoid": 3, "Tanh": 2}


def _unary(op, shape):
    x = np.zeros(shape, np.float32)
    return make_model([helper.make_node(op, ["x"], ["y"])], [("x", x)], ["y"])


@pytest.fixture(scope="module")
def compiled():
    return {op: ck.compile(_unary(op, (N,)), asm=False) for op in REFERENCE}


def _ordered(v):
    """float32 -> integers in float order (adjacent floats differ by 1, -0 == +0)."""
    i = v.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def ulp_error(op, x, got):
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        ref = REFERENCE[op](x.astype(np.float64)).astype(np.float32)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan), f"{op}: NaN where numpy has none, or the reverse"
    return np.abs(_ordered(got[~nan]) - _ordered(ref[~nan])), ref


def _check(compiled, op, x):
    got = compiled[op].run(x)[0]
    err, ref = ulp_error(op, x, got)
    worst = int(np.argmax(err)) if err.size else 0
    assert err.size == 0 or err.max() <= MAX_ULP[op], (
        f"{op}({x[~np.isnan(ref)][worst]!r}) = {got[~np.isnan(ref)][worst]!r}, "
        f"numpy {ref[~np.isnan(ref)][worst]!r}: {err.max()} ulp")


FLOATS = st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True)
# Where the interesting things happen: overflow/underflow edges of exp, tanh's switch at 0.625.
EDGES = st.floats(min_value=-110.0, max_value=95.0, width=32)


@pytest.mark.parametrize("op", sorted(REFERENCE))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_accuracy_in_ulp_hypothesis(compiled, op, data):
    x = data.draw(arrays(np.float32, N, elements=st.one_of(FLOATS, EDGES)))
    _check(compiled, op, x)


def _float_line(count):
    """`count` float32 spread evenly by bit pattern over [0, inf], both signs, + NaN."""
    bits = np.linspace(0, 0x7F800000, count).astype(np.uint32)
    pos = bits.view(np.float32)
    return np.concatenate([pos, -pos, np.float32([np.nan, -np.nan])])


@pytest.mark.parametrize("op", sorted(REFERENCE))
def test_accuracy_over_the_whole_float_line(compiled, op):
    x = np.concatenate([_float_line(20_000),
                        np.linspace(-105, 90, 20_000, dtype=np.float32),
                        np.linspace(-1, 1, 4_000, dtype=np.float32)])
    x = np.resize(x, (-(-x.size // N) * N,)).astype(np.float32)
    for chunk in x.reshape(-1, N):
        _check(compiled, op, chunk)


def test_special_values_exactly(compiled):
    x = np.zeros(N, np.float32)
    x[:8] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 89.0, -104.0, -87.5]
    e = compiled["Exp"].run(x)[0]
    s = compiled["Sigmoid"].run(x)[0]
    t = compiled["Tanh"].run(x)[0]
    assert e[0] == np.inf and e[1] == 0 and np.isnan(e[2]) and e[3] == 1 and e[5] == np.inf
    assert e[6] == 0
    assert 0 < e[7] < np.finfo(np.float32).tiny  # a subnormal, not flushed to 0
    assert s[0] == 1 and s[1] == 0 and np.isnan(s[2]) and s[3] == 0.5
    assert 0 < s[7] < np.finfo(np.float32).tiny
    assert t[0] == 1 and t[1] == -1 and np.isnan(t[2]) and t[3] == 0
    assert np.signbit(t[4])  # tanh(-0) = -0


@pytest.mark.parametrize("target", ["s390x", "ppc64"])
def test_big_endian_targets_give_the_same_bits(compiled, target):
    rng = np.random.default_rng(3)
    x = np.concatenate([np.float32([np.inf, -np.inf, np.nan, 0.0, -0.0, 88.7, -87.5, -103.0]),
                        (rng.standard_normal(N - 8) * 30).astype(np.float32)])
    for op in REFERENCE:
        host = compiled[op].run(x)[0]
        emulated = ck.compile(_unary(op, (N,)), target=target, asm=False).run(x)[0]
        assert emulated.tobytes() == host.tobytes(), op


# ---- vector code -------------------------------------------------------------------------------

VECTOR = re.compile(r"<(\d+) x float>")


def _swish(shape):
    x = np.zeros(shape, np.float32)
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    return make_model(nodes, [("x", x)], ["y"])


@pytest.mark.parametrize("model", ["Sigmoid", "Swish", "Tanh"])
def test_optimised_ir_has_vector_exp(model):
    # 1x32x14x14: rows of 14, too short for LLVM to vectorise a loop over one row; the lowering
    # merges them (merged_dims), and the exp inlined into the loop becomes vector code.
    shape = (1, 32, 14, 14)
    m = _swish(shape) if model == "Swish" else _unary(model, shape)
    ir_text = ck.compile(m).stages["llvm-ir"]
    if ck.get_backend("host").target.vector_width < 4:
        pytest.skip("host has no float vectors")
    assert VECTOR.search(ir_text), "no vector float code in the optimised IR"
    # exp's rounding step and its 2^n scaling, as vector instructions
    assert re.search(r"@llvm\.floor\.v\d+f32", ir_text), "exp's floor is not vectorised"
    assert re.search(r"fptosi <\d+ x float>", ir_text), "exp's 2^n is not vectorised"
    assert re.search(r"fdiv <\d+ x float>", ir_text), "the sigmoid's divide is not vectorised"
    assert "@ck_expf" not in ir_text  # inlined everywhere, no scalar calls left


def test_loops_take_the_hosts_full_vector_width():
    """On an AVX-512 host the loops LLVM vectorises itself are 16 lanes wide, as the
    micro-kernels are (the host target turns off LLVM's preference for 256-bit vectors);
    the answer is the same bits either way (no fast-math: each lane computes as scalar code)."""
    target = ck.get_backend("host").target
    if target.vector_width != 16:
        pytest.skip("host has no AVX-512")
    assert "-prefer-256-bit" in target.features.split(",")
    asm = ck.compile(_unary("Sigmoid", (1, 32, 14, 14))).stages["asm"]
    assert re.search(r"\bzmm\d+", asm), "the Sigmoid loop is not 512-bit code"


# ---- merging short trailing dims (lowering/elementwise.py) --------------------------------------

def test_merged_dims_hand_worked():
    # Unary on 1x672x14x14: rows of 14 merge into 196 (>= MIN_INNER 64), channels stay.
    assert merged_dims((1, 672, 14, 14), [(1, 672, 14, 14)]) == 2
    # EfficientNet's squeeze-excite scale x[1,672,14,14] * s[1,672,1,1]: s is broadcast over
    # both merged dims, so it stays a plain view of shape [1, 672, 1].
    assert merged_dims((1, 672, 14, 14), [(1, 672, 14, 14), (1, 672, 1, 1)]) == 2
    # A bias over the last dim only ([14]) is full in one and broadcast in the other: no merge.
    assert merged_dims((1, 672, 14, 14), [(1, 672, 14, 14), (14,)]) is None
    # Rows of 7: 7*7 = 49 < 64, so the channels join too (all full).
    assert merged_dims((1, 1280, 7, 7), [(1, 1280, 7, 7)]) == 1
    # Long rows and small nests are left alone.
    assert merged_dims((1, 32, 112, 112), [(1, 32, 112, 112)]) is None
    assert merged_dims((2, 4), [(2, 4)]) is None


@pytest.mark.parametrize("other", [(1, 24, 1, 1), (24, 1, 1), (1, 1, 14, 14), (1,), ()])
def test_merged_broadcasting_matches_numpy(other):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 24, 14, 14)).astype(np.float32)
    b = rng.standard_normal(other).astype(np.float32)
    m = make_model([helper.make_node("Mul", ["a", "b"], ["y"])], [("a", a), ("b", b)], ["y"])
    y = ck.compile(m, asm=False).run(a, b)[0]
    assert y.shape == a.shape
    np.testing.assert_array_equal(y, a * b)  # one rounding per element: exact


# ---- the trigonometric and hyperbolic functions and their inverses (codegen/mathtrig.py) --------

TRIG_REFERENCE = {
    "Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos,
    "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh,
    "Acosh": np.arccosh, "Atanh": np.arctanh,
}
# Measured maxima over the float line below plus 200,000 points in [-10, 10] and [-1, 1]
# (sin and cos include every huge argument up to 3.4e38, through Payne-Hanek): 1, 1, 3, 2,
# 1, 3, 2, 1, 3, 2, 1 ulp; one more is allowed, as above.
TRIG_MAX_ULP = {"Sin": 2, "Cos": 2, "Tan": 4, "Asin": 3, "Acos": 2, "Atan": 4, "Sinh": 3,
                "Cosh": 2, "Asinh": 4, "Acosh": 3, "Atanh": 2}


def _trig_model(op):
    return make_model([helper.make_node(op, ["x"], ["y"])], [("x", np.zeros(N, np.float32))],
                      ["y"], opset=22)


@pytest.mark.parametrize("op", sorted(TRIG_REFERENCE))
def test_trig_accuracy_over_the_whole_float_line(op):
    cm = ck.compile(_trig_model(op), asm=False)
    x = np.concatenate([_float_line(6_000), np.linspace(-10, 10, 4_000, dtype=np.float32),
                        np.linspace(-1, 1, 2_000, dtype=np.float32),
                        np.float32([np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1.0, -1.0])])
    x = np.resize(x, (-(-x.size // N) * N,)).astype(np.float32)
    got = np.concatenate([cm.run(chunk)[0] for chunk in x.reshape(-1, N)])
    with np.errstate(all="ignore"):
        ref = TRIG_REFERENCE[op](x.astype(np.float64)).astype(np.float32)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan), x[np.isnan(got) != nan][:5]
    err = np.abs(_ordered(got[~nan]) - _ordered(ref[~nan]))
    worst = int(np.argmax(err))
    assert err.max() <= TRIG_MAX_ULP[op], (
        f"{op}({x[~nan][worst]!r}) = {got[~nan][worst]!r}, numpy {ref[~nan][worst]!r}: "
        f"{err.max()} ulp")
    zero = (x == 0) & ~nan
    assert np.array_equal(np.signbit(got[zero]), np.signbit(ref[zero]))  # sin(-0) = -0, ...


def test_sin_cos_of_huge_arguments_and_big_endian_bits():
    # Payne-Hanek reads 2/pi from a table of i32 words: the same bits on s390x (big-endian).
    x = np.float32([1e5, 71476.0625, 71476.06, 1e10, -1e20, 3.4e38, 8.5e37, 12345678.0,
                    np.pi * 2 ** 20, -7e30, np.inf, np.nan])
    for op, ref in (("Sin", np.sin), ("Cos", np.cos)):
        m = make_model([helper.make_node(op, ["x"], ["y"])], [("x", x)], ["y"], opset=22)
        host = ck.compile(m, asm=False).run(x)[0]
        with np.errstate(invalid="ignore"):
            r = ref(x.astype(np.float64)).astype(np.float32)
        assert np.array_equal(np.isnan(host), np.isnan(r))
        assert np.abs(_ordered(host[:-2]) - _ordered(r[:-2])).max() <= 1
        if op == "Sin":
            emulated = ck.compile(m, target="s390x", asm=False).run(x)[0]
            assert emulated.tobytes() == host.tobytes()


def test_optimised_ir_has_vector_sin():
    if ck.get_backend("host").target.vector_width < 4:
        pytest.skip("host has no float vectors")
    x = np.zeros((1, 32, 14, 14), np.float32)
    m = make_model([helper.make_node("Sin", ["x"], ["y"])], [("x", x)], ["y"], opset=22)
    ir_text = ck.compile(m).stages["llvm-ir"]
    assert VECTOR.search(ir_text), "no vector float code in the optimised IR"
    assert "@ck_sinf" not in ir_text  # inlined, the table read a vector gather
