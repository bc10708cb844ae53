"""Run-time guards (issue 10, item 3): input *data* that would make the generated code fault or
read out of bounds raises `RunError` naming the node, as onnxruntime refuses the same data, and
every backend agrees: the host JIT, the shared library (`--emit lib`), and (in
tests/emulated_targets/test_guards.py) the emulated s390x and ppc64. The GPU codegen compiles
the guard (a device status word): checked on the PTX here, without a device.

onnxruntime's behaviour, for the record: Gather indices out of range -> an error ("indices
element out of data bounds"); integer Div by zero -> an error ("Integer division by zero");
integer INT_MIN / -1 -> undefined: the onnxruntime process dies of SIGFPE in one kernel and
returns a wrapped INT_MIN in another (so it is never run here). compilerkit raises RunError for
all three."""

import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from ckhelpers import ort_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import compilerkit as ck


def one_node(node, inputs, out_type, out_shape, opset=13):
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(node.output[0], out_type, out_shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def gather_model(axis=0):
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=axis, name="pick_rows")
    shape = [2, 4] if axis == 0 else [3, 4]  # indices [2, ...] replace the axis
    out = [2, 4] if axis == 0 else [3, 2]
    return one_node(node, [("x", TensorProto.FLOAT, [3, 4]), ("i", TensorProto.INT64, [2])],
                    TensorProto.FLOAT, out if axis else shape)


def div_model(dtype):
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node("Div", ["a", "b"], ["y"], name="ratio")
    return one_node(node, [("a", t, [4]), ("b", t, [4])], t, [4])


X = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.fixture(scope="module")
def gather_cm():
    return ck.compile(gather_model(), asm=False)


@pytest.mark.parametrize("bad", [[0, 3], [-4, 0], [1 << 40, 0], [-(1 << 62), 1]])
def test_gather_index_out_of_range_raises_like_onnxruntime(gather_cm, bad):
    idx = np.array(bad, np.int64)
    with pytest.raises(Exception, match="out of data bounds|out of range"):
        ort_run(gather_model(), [X, idx])
    with pytest.raises(ck.RunError, match=r"node 'pick_rows' \(Gather\).*\[-3, 2\]"):
        gather_cm.run(X, idx)


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_in_range_including_negative_matches_onnxruntime(axis):
    cm = ck.compile(gather_model(axis), asm=False)
    d = X.shape[axis]
    for idx in ([0, d - 1], [-1, -d], [-2, 1]):
        idx = np.array(idx, np.int64)
        np.testing.assert_array_equal(cm.run(X, idx)[0], ort_run(gather_model(axis), [X, idx])[0])


def test_a_failed_check_does_not_stick_to_the_next_run(gather_cm):
    with pytest.raises(ck.RunError):
        gather_cm.run(X, np.array([5, 0], np.int64))
    np.testing.assert_array_equal(gather_cm.run(X, np.array([2, 0], np.int64))[0], X[[2, 0]])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_division_by_zero_raises_like_onnxruntime(dtype):
    a = np.array([7, -7, 9, 1], dtype)
    b = np.array([2, 0, 3, 1], dtype)
    with pytest.raises(Exception, match="division by zero"):
        ort_run(div_model(dtype), [a, b])
    cm = ck.compile(div_model(dtype), asm=False)
    with pytest.raises(ck.RunError, match="node 'ratio': integer division by zero"):
        cm.run(a, b)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_int_min_divided_by_minus_one_raises_instead_of_sigfpe(dtype):
    # onnxruntime may die of SIGFPE here; compilerkit did. Run in a subprocess so a
    # regression fails this test instead of killing the test session.
    code = f"""
import numpy as np, compilerkit as ck
from test_runtime_guards import div_model
cm = ck.compile(div_model(np.{dtype.__name__}), asm=False)
a = np.array([np.iinfo(np.{dtype.__name__}).min, 6, 5, 4], np.{dtype.__name__})
b = np.array([-1, 3, 5, 2], np.{dtype.__name__})
try:
    cm.run(a, b)
except ck.RunError as e:
    print("RunError:", e)
print(cm.run(np.abs(a[1:2]).repeat(4), b)[0].tolist())
"""
    # Run from this directory: `python -c` puts the working directory on sys.path.
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       cwd=os.path.dirname(os.path.abspath(__file__)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "RunError: node 'ratio': integer division overflows" in r.stdout
    assert r.stdout.strip().endswith("[-6, 2, 1, 3]")  # 6 / [-1, 3, 5, 2], truncated


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(-50, 50), min_size=4, max_size=4),
       st.lists(st.integers(-5, 5), min_size=4, max_size=4))
def test_integer_division_property(int_div_cm, a, b):
    """Either some divisor is zero and compilerkit raises RunError, or the quotient is
    onnxruntime's (C's: truncated towards zero)."""
    a, b = np.array(a, np.int32), np.array(b, np.int32)
    if (b == 0).any():
        with pytest.raises(ck.RunError):
            int_div_cm.run(a, b)
    else:
        np.testing.assert_array_equal(int_div_cm.run(a, b)[0],
                                      ort_run(div_model(np.int32), [a, b])[0])


@pytest.fixture(scope="module")
def int_div_cm():
    return ck.compile(div_model(np.int32), asm=False)


def test_shared_library_reports_the_same_errors(tmp_path):
    from compilerkit.backends.host import SharedLibrary, c_compiler

    if c_compiler() is None:
        pytest.skip("no C compiler to link a shared library")
    path = tmp_path / "gather.onnx"
    path.write_bytes(gather_model().SerializeToString())
    lib = tmp_path / "gather.so"
    r = subprocess.run([sys.executable, "-m", "compilerkit", str(path), "--emit", "lib", "-o",
                        str(lib)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    header = (tmp_path / "gather.h").read_text()
    assert "int64_t main_graph(void **buffers, int64_t num_threads);" in header
    assert "main_graph_check_message(int64_t status)" in header
    cm = ck.compile(gather_model(), asm=False)
    session = SharedLibrary(str(lib)).session(cm.inputs, cm.outputs)
    np.testing.assert_array_equal(session.run(X, np.array([2, -1], np.int64))[0], X[[2, -1]])
    with pytest.raises(ck.RunError, match=r"node 'pick_rows' \(Gather\)"):
        session.run(X, np.array([0, 3], np.int64))


def test_gpu_codegen_compiles_the_guards():
    """No device needed: the PTX stores a failed check's number into the `ck_status` global
    that the GPU session reads after the launches, and the session knows the messages."""
    cm = ck.compile(gather_model(), target="gpu")
    ptx = cm.stages["ptx"]
    assert ".global .align 8 .u64 ck_status" in ptx and "[ck_status]" in ptx
    assert cm.session.checks == ["node 'pick_rows' (Gather): an index on axis 0 is out of "
                                 "range; valid indices are [-3, 2]"]
    cm = ck.compile(div_model(np.int64), target="gpu")
    assert "[ck_status]" in cm.stages["ptx"]
    assert any("integer division by zero" in m for m in cm.session.checks)


def test_float_division_by_zero_is_not_an_error():
    """IEEE division is well defined (inf, nan), as in onnxruntime: no guard, no error."""
    cm = ck.compile(div_model(np.float32), asm=False)
    a, b = np.array([1, -1, 0, 2], np.float32), np.array([0, 0, 0, 4], np.float32)
    np.testing.assert_array_equal(cm.run(a, b)[0], ort_run(div_model(np.float32), [a, b])[0])


def test_onnxruntime_reference_is_the_cpu_provider():
    assert "CPUExecutionProvider" in ort.get_available_providers()


def test_indices_are_checked_even_when_the_output_is_empty():
    """onnxruntime checks every index, also when the result has no elements (found by the
    fuzzer: a Slice that leaves an empty axis, then a Gather on another axis)."""
    from onnx import numpy_helper

    consts = [numpy_helper.from_array(np.array([v], np.int64), n)
              for n, v in (("st", -5), ("en", 5), ("ax", 1), ("sp", -1))]
    g = helper.make_graph(
        [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["e"]),  # [3, 0]: empty
         helper.make_node("Gather", ["e", "i"], ["y"], axis=0, name="empty_rows")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 0])], consts)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    bad = np.array([1, 7], np.int64)
    with pytest.raises(Exception, match="out of data bounds"):
        ort_run(model, [X, bad])
    cm = ck.compile(model, asm=False)
    with pytest.raises(ck.RunError, match=r"node 'empty_rows'.*\[-3, 2\]"):
        cm.run(X, bad)
    assert cm.run(X, np.array([2, -3], np.int64))[0].shape == (2, 0)


def test_a_scalar_index_is_checked_too():
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1, name="one_col")
    model = one_node(node, [("x", TensorProto.FLOAT, [3, 4]), ("i", TensorProto.INT64, [])],
                     TensorProto.FLOAT, [3])
    cm = ck.compile(model, asm=False)
    np.testing.assert_array_equal(cm.run(X, np.array(-1, np.int64))[0], X[:, -1])
    with pytest.raises(ck.RunError, match=r"valid indices are \[-4, 3\]"):
        cm.run(X, np.array(4, np.int64))
