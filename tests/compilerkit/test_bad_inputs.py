"""Bad input gives clear Python errors, never a crash."""

import numpy as np
import onnx
import pytest
from ckhelpers import make_model
from onnx import TensorProto, helper, numpy_helper

import compilerkit as ck


def relu_model(shape=(2, 3)):
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                      [("x", np.zeros(shape, np.float32))], ["y"])


def test_truncated_file(tmp_path):
    data = relu_model().SerializeToString()
    p = tmp_path / "t.onnx"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(ck.ModelError, match="truncated|not a valid|not an ONNX"):
        ck.compile(str(p))


def test_not_onnx(tmp_path):
    p = tmp_path / "t.onnx"
    p.write_text("hello, this is not a protobuf\n")
    with pytest.raises(ck.ModelError):
        ck.compile(str(p))


def test_unsupported_op_names_node_and_lists_supported():
    m = make_model([helper.make_node("RandomUniformLike", ["x"], ["y"], name="the_node")],
                   [("x", np.zeros((2, 3), np.float32))], ["y"])
    with pytest.raises(ck.UnsupportedOpError) as e:
        ck.compile(m)
    msg = str(e.value)
    assert "the_node" in msg and "RandomUniformLike" in msg and "Conv" in msg


def test_dynamic_dim_needs_input_shapes():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3])
    y = helper.make_empty_tensor_value_info("y")
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ck.ModelError, match="'x'.*dynamic|input_shapes"):
        ck.compile(m)
    cm = ck.compile(m, input_shapes={"x": [4, 3]}, asm=False)
    a = np.arange(-6, 6, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(cm.run(a)[0], np.maximum(a, 0))


def test_wrong_shape_and_dtype_checked_before_native_code():
    cm = ck.compile(relu_model(), asm=False)
    with pytest.raises(ck.InputError, match=r"'x'.*\[2, 3\]"):
        cm.run(np.zeros((3, 2), np.float32))
    with pytest.raises(ck.InputError, match="float32"):
        cm.run(np.zeros((2, 3), np.float64))
    with pytest.raises(ck.InputError, match="expected 1 inputs"):
        cm.run()


def test_noncontiguous_and_big_endian_inputs_are_fine():
    cm = ck.compile(relu_model((3, 2)), asm=False)
    a = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(cm.run(a.T)[0], np.maximum(a.T, 0))
    big = a.T.astype(">f4")  # byte order is no part of the type: converted, same answer
    np.testing.assert_array_equal(cm.run(big)[0], np.maximum(a.T, 0))


def test_every_kind_of_array_is_checked_alike():
    """A call takes arrays that already match the signature as they are and checks and
    converts anything else: every form gives the same answer, a bad one the same error."""
    cm = ck.compile(relu_model((2, 3)), asm=False)
    a = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    want = np.maximum(a, 0)
    big_c = a.astype(">f4")  # C-contiguous, but not native byte order
    assert big_c.flags.c_contiguous
    readonly = a.copy()
    readonly.flags.writeable = False
    for form in (a, big_c, readonly, np.asfortranarray(a), a.view(np.recarray),
                 np.ma.masked_array(a), np.repeat(a, 2, axis=1)[:, ::2]):
        got = cm.run(form, num_threads=1)[0]
        np.testing.assert_array_equal(got, want, err_msg=type(form).__name__)
        assert type(got) is np.ndarray and got.dtype == np.float32 and got.flags.c_contiguous
    for bad, match in ((a.astype(np.float64), "float32"), (a.reshape(3, 2), r"\[2, 3\]"),
                       (a.astype(np.int32), "float32"), (a[None], r"\[2, 3\]"),
                       (a.tolist(), "got float64")):  # Python floats are float64
        with pytest.raises(ck.InputError, match=match):
            cm.run(bad, num_threads=1)
    for threads in (0, -1, 1.0, True, "2", 10**6):
        with pytest.raises(ValueError, match="num_threads"):
            cm.run(a, num_threads=threads)
    np.testing.assert_array_equal(cm.run(a, num_threads=np.int64(2))[0], want)
    outs = [cm.run(a)[0] for _ in range(3)]  # a new output array per call
    assert len({o.ctypes.data for o in outs}) == 3
    cm.close()
    with pytest.raises(RuntimeError, match="closed"):
        cm.run(a)


def _external_model(tmp_path, location):
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.ClearField("raw_data")
    w.ClearField("float_data")
    w.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "24")):
        e = w.external_data.add()
        e.key, e.value = k, v
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"])],
                   [("x", np.zeros((2, 3), np.float32))], ["y"])
    m.graph.initializer.append(w)
    d = tmp_path / "model"
    d.mkdir()
    p = d / "m.onnx"
    p.write_bytes(m.SerializeToString())
    return p


def test_external_data_inside_folder_is_read(tmp_path):
    p = _external_model(tmp_path, "w.bin")
    (p.parent / "w.bin").write_bytes(np.full((2, 3), 2.5, "<f4").tobytes())
    cm = ck.compile(str(p), asm=False)
    np.testing.assert_array_equal(cm.run(np.ones((2, 3), np.float32))[0], np.full((2, 3), 3.5))


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd"])
def test_external_data_outside_folder_is_refused(tmp_path, location):
    (tmp_path / "secret.bin").write_bytes(b"\0" * 24)
    p = _external_model(tmp_path, location)
    with pytest.raises(ck.ModelError, match="outside"):
        ck.compile(str(p))


def test_raw_data_is_decoded_little_endian():
    from compilerkit.frontend import to_array
    t = onnx.TensorProto()
    t.data_type = onnx.TensorProto.FLOAT
    t.dims.append(2)
    t.raw_data = np.array([1.5, -2.0], "<f4").tobytes()
    np.testing.assert_array_equal(to_array(t), [1.5, -2.0])
    t.raw_data = np.array([1.5, -2.0], ">f4").tobytes()  # wrong order must NOT round-trip
    assert not np.array_equal(to_array(t), [1.5, -2.0])


def test_an_initializer_of_a_valid_but_uncompiled_type_is_declined_not_called_broken():
    # onnxruntime runs Equal on uint32; compilerkit declines it (UnsupportedOpError), as it
    # does for a graph input of that type, and keeps ModelError for codes ONNX does not have.
    y = helper.make_tensor("y", TensorProto.UINT32, [2], [1, 7])
    g = helper.make_graph([helper.make_node("Equal", ["x", "y"], ["z"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.UINT32, [2])],
                          [helper.make_tensor_value_info("z", TensorProto.BOOL, [2])], [y])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ck.UnsupportedOpError, match=r"element type UINT32 is not supported"):
        ck.compile(model, asm=False)
    model.graph.input.pop()
    model.graph.initializer.append(helper.make_tensor("x", TensorProto.UINT32, [2], [1, 2]))
    with pytest.raises(ck.UnsupportedOpError, match=r"tensor '[xy]': element type UINT32"):
        ck.compile(model, asm=False)
    for t in model.graph.initializer:
        t.data_type = 99
    with pytest.raises(ck.ModelError, match=r"tensor '[xy]': ONNX element type 99 is not an ONNX"):
        ck.compile(model, asm=False)
