"""Constants reach the code as bytes in the target's byte order (codegen/emit.py).

Every non-splat constant is an `[n x i8] c"\\XX..."` global holding numpy's bytes of the weights
in the target's order: checked on hand-worked IEEE-754 / two's-complement encodings, then as a
property against numpy's `astype('>f4' / '<f4').tobytes()` (an independent encoder). Large
splats (folded ConstantOfShape) stay zero-initialised globals filled at the first run, and the
bytes path keeps no second copy of a weight in Python memory.
"""

from __future__ import annotations

import re
import tracemalloc

import numpy as np
import pytest
from ckhelpers import make_model, ort_run
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto, helper

import compilerkit as ck
from compilerkit.backends.base import get_backend
from compilerkit.pipeline import compile_to

N = helper.make_node


def _add_model(const: np.ndarray):
    """y = x + const (const an initializer of const's dtype and shape)."""
    x = np.zeros(const.shape, const.dtype)
    return make_model([N("Add", ["x", "c"], ["y"])], [("x", x)], ["y"], inits=[("c", const)])


def _emitted_ir(model, target: str) -> str:
    """The unoptimised LLVM IR codegen writes for `target` (before LLVM parses it)."""
    kmodule = compile_to("kernel-ir", model, target=target, opt_level=0)
    return get_backend(target).emit_llvm(kmodule)


def _global_bytes(ir_text: str) -> bytes:
    """The bytes of the first constant global `@g_... = ... [n x i8] c"..."`, decoded from
    LLVM's string escapes."""
    m = re.search(r'@"?g_\w+"? = .*?\[(\d+) x i8\] c"([^"]*)"', ir_text)
    assert m, "no byte-string constant global in the IR"
    text = m.group(2)
    out = bytearray()
    k = 0
    while k < len(text):
        if text[k] == "\\":
            out.append(int(text[k + 1:k + 3], 16))
            k += 3
        else:
            out.append(ord(text[k]))
            k += 1
    assert len(out) == int(m.group(1))
    return bytes(out)


# ---- hand-worked encodings ------------------------------------------------------------------

def test_float_one_and_minus_two_by_hand():
    # f32 1.0 = sign 0, exponent 127 = 0x7F, mantissa 0 -> 0x3F800000;
    # f32 -2.0 = sign 1, exponent 128 -> 0xC0000000.
    model = _add_model(np.array([1.0, -2.0], np.float32))
    big = _emitted_ir(model, "s390x")
    assert '[8 x i8] c"\\3F\\80\\00\\00\\C0\\00\\00\\00"' in big
    assert _global_bytes(big) == bytes([0x3F, 0x80, 0, 0, 0xC0, 0, 0, 0])
    little = _emitted_ir(model, "host")
    assert '[8 x i8] c"\\00\\00\\80\\3F\\00\\00\\00\\C0"' in little


def test_int64_and_double_by_hand():
    # i64 258 = 0x0102: big-endian 00 00 00 00 00 00 01 02; -1 is eight FF bytes.
    ints = _emitted_ir(_add_model(np.array([258, -1], np.int64)), "ppc64")
    assert _global_bytes(ints) == bytes([0, 0, 0, 0, 0, 0, 1, 2] + [0xFF] * 8)
    # f64 -2.5 = -1.25 * 2^1: sign 1, exponent 1024 = 0x400, mantissa .01 -> 0xC004000000000000.
    doubles = _emitted_ir(_add_model(np.array([-2.5, 0.0], np.float64)), "s390x")
    assert _global_bytes(doubles)[:8] == bytes([0xC0, 0x04, 0, 0, 0, 0, 0, 0])


def test_no_float_list_is_left_in_the_ir():
    text = _emitted_ir(_add_model(np.array([1.5, 2.5, 3.5], np.float32)), "host")
    assert not re.search(r"\[\d+ x float\] \[", text)


# ---- numpy's bytes, any values ----------------------------------------------------------------

_DTYPES = st.sampled_from([np.float32, np.float64, np.int32, np.int64])


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_constant_bytes_are_numpys_in_the_targets_order(data):
    dtype = data.draw(_DTYPES)
    elements = (st.floats(width=np.dtype(dtype).itemsize * 8, allow_nan=False)
                if np.dtype(dtype).kind == "f" else None)
    # Distinct values: a uniform array is folded into a splat (test_large_splat_stays_a_fill).
    array = data.draw(hnp.arrays(dtype, st.integers(2, 40), elements=elements, unique=True))
    model = _add_model(array)
    for target, order in (("host", "<"), ("s390x", ">")):
        want = array.astype(array.dtype.newbyteorder(order)).tobytes()
        assert _global_bytes(_emitted_ir(model, target)) == want, target


# ---- splats stay fills ------------------------------------------------------------------------

def _splat_model(n: int, value: float):
    """y = x + ConstantOfShape([n], value): folded into one broadcast value, not n copies."""
    fill = helper.make_tensor("v", TensorProto.FLOAT, [1], [value])
    return make_model([N("ConstantOfShape", ["s"], ["k"], value=fill),
                       N("Add", ["x", "k"], ["y"])],
                      [("x", np.zeros(n, np.float32))], ["y"],
                      inits=[("s", np.array([n], np.int64))])


def test_large_splat_stays_a_fill():
    n = 4096
    model = _splat_model(n, 0.75)
    for target in ("host", "s390x"):
        text = _emitted_ir(model, target)
        assert f"[{n} x float] zeroinitializer" in text
        assert f"[{4 * n} x i8]" not in text and "c\"" not in text.split("@main_graph")[0]
        assert "ck_fill_float" in text
    x = np.linspace(-1, 1, n, dtype=np.float32)
    y = ck.compile(model, opt_level=2, asm=False).run(x)[0]
    np.testing.assert_array_equal(y, ort_run(model, [x])[0])


# ---- memory -----------------------------------------------------------------------------------

def test_emitting_keeps_no_copy_of_the_weights():
    """On the little-endian host a weight's bytes are a view of the array: building the module
    allocates almost nothing in Python, and printing it only the text (3 characters a byte)
    plus transient buffers of the same order, never a list of numbers."""
    from compilerkit.codegen.emit import Emitter

    w = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)  # 4 MiB
    kmodule = compile_to("kernel-ir", _add_model(w), opt_level=0)
    backend = get_backend("host")
    tracemalloc.start()
    try:
        emitter = Emitter(kmodule, backend.target)
        emitter.emit()
        _, built = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        text = str(emitter.module)
        _, printed = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert built < w.nbytes // 4, f"emit allocated {built} bytes for a {w.nbytes}-byte weight"
    assert len(text) > 3 * w.nbytes
    # The text and its pieces (llvmlite joins each global's line, then the module's lines):
    # the old float list took ~30 bytes a byte; a list of per-byte strings far more.
    assert printed < 12 * w.nbytes, printed


# ---- the emulated big-endian targets run the bytes bit-identically to the host ----------------

@pytest.mark.parametrize("target", ["s390x", "ppc64"])
def test_random_weight_conv_is_bit_identical_to_host(target):
    rng = np.random.default_rng(12)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    model = make_model([N("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]),
                        N("Relu", ["y"], ["z"])],
                       [("x", np.zeros((1, 3, 6, 6), np.float32))], ["z"],
                       inits=[("w", w), ("b", b)])
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    host = ck.compile(model, opt_level=3, asm=False).run(x)[0]
    emulated = ck.compile(model, target=target, opt_level=3, asm=False).run(x)[0]
    assert emulated.tobytes() == host.tobytes()
    np.testing.assert_allclose(host, ort_run(model, [x])[0], rtol=1e-5, atol=1e-5)


# ---- the GPU: constants are one uploaded buffer, never in the PTX -----------------------------

def test_gpu_constant_buffer_holds_the_little_endian_bytes():
    """No device needed: the constant buffer the GPU backend uploads, and the PTX text."""
    w = np.array([1.0, -2.0, 0.5], np.float32)  # 3F800000, C0000000, 3F000000
    model = _add_model(w)
    kmodule = compile_to("kernel-ir", model, target="gpu", opt_level=0)
    backend = get_backend("gpu")
    ir_text = backend.emit_llvm(kmodule)
    image = backend.emitted.constants.image()
    assert bytes(image[:12]) == bytes([0, 0, 0x80, 0x3F, 0, 0, 0, 0xC0, 0, 0, 0, 0x3F])
    # The weights reach the kernels as a pointer parameter, not as data in the module.
    assert "x i8] c\"" not in ir_text and "0x3FF0000000000000" not in ir_text
    ptx = compile_to("ptx", model, target="gpu", opt_level=0)
    # PTX spells a float immediate 0f3F800000 (1.0) and a .global array by its values.
    assert "0fC0000000" not in ptx and "1065353216" not in ptx
