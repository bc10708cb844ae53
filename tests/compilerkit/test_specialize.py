"""compilerkit.compile on a model whose input values decide shapes (compilerkit/specialize.py):
compiled per value on first use, checked on every run, a bounded cache, one warning, and
never an answer computed for another value. References: numpy's broadcasting and onnxruntime."""

import numpy as np
import pytest
from ckhelpers import ort_run
from onnx import TensorProto as T
from onnx import helper

import compilerkit as ck
from compilerkit.specialize import DEFAULT_CACHE_SIZE, value_inputs

# Said once per model, on its first run; the first test checks it.
pytestmark = pytest.mark.filterwarnings("ignore::compilerkit.specialize.SpecializationWarning")


def expand_model():
    g = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, [1, 3, 1]),
                           helper.make_tensor_value_info("shape", T.INT64, [3])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


X = np.arange(3, dtype=np.float32).reshape(1, 3, 1)


def quiet_compile(m, **kw):
    return ck.compile(m, opt_level=0, asm=False, **kw)


def test_a_new_value_compiles_again_and_an_old_one_reuses_its_form():
    cm = ck.compile(expand_model(), opt_level=0, asm=False)
    assert isinstance(cm, ck.SpecializedModel) and cm.specialized == ["shape"]
    assert cm.cache_size == DEFAULT_CACHE_SIZE and cm.compiles == 0
    with pytest.warns(ck.SpecializationWarning, match=r"inputs \['shape'\] decide shapes") as w:
        a = cm.run(X, np.array([2, 3, 4]))[0]
        b = cm.run(X, np.array([1, 3, 2]))[0]  # a new value: a new form, never the old one
        c = cm.run(X, np.array([2, 3, 4]))[0]
    assert len(w) == 1  # said once
    np.testing.assert_array_equal(a, np.broadcast_to(X, (2, 3, 4)))
    np.testing.assert_array_equal(b, np.broadcast_to(X, (1, 3, 2)))
    np.testing.assert_array_equal(c, a)
    assert cm.compiles == 2 and len(cm.compiled) == 2
    np.testing.assert_array_equal(b, ort_run(expand_model(), [X, np.array([1, 3, 2])])[0])
    assert "onnx-ir" in cm.stages  # the latest form's attributes


def test_the_cache_keeps_the_last_forms_and_recompiles_an_evicted_value():
    cm = quiet_compile(expand_model(), specialize_cache=2)
    shapes = ([1, 3, 2], [1, 3, 3], [1, 3, 4], [1, 3, 2])
    for s in shapes:  # the fourth was evicted by the third: compiled again
        np.testing.assert_array_equal(cm.run(X, np.array(s))[0], np.broadcast_to(X, s))
    assert cm.compiles == 4 and len(cm.compiled) == 2
    with pytest.raises(ck.OptionError, match="specialize_cache must be a whole number >= 1"):
        ck.compile(expand_model(), specialize_cache=0)


def test_the_guard_checks_the_specialised_input_on_every_run():
    cm = quiet_compile(expand_model())
    with pytest.raises(ck.InputError, match="input 'shape': expected dtype int64, got int32"):
        cm.run(X, np.array([1, 3, 2], np.int32))
    with pytest.raises(ck.InputError, match=r"input 'shape': expected shape \[3\], got \[2\]"):
        cm.run(X, np.array([3, 2]))
    with pytest.raises(ck.InputError, match="expected 2 inputs"):
        cm.run(X)
    # A value the model cannot take is the compile's clear error, at the run that brings it.
    with pytest.raises(ck.ModelError, match="Expand"):
        cm.run(X, np.array([1, 4, 2]))
    with pytest.raises(ck.InputError, match="input 'x'"):  # the form's own input checks
        cm.run(X[:, :2], np.array([1, 3, 2]))


def test_which_inputs_are_specialised():
    # Through other ops (Concat of a value), yes; through Shape (a shape only), no.
    nodes = [helper.make_node("Concat", ["d", "d"], ["dd"], axis=0),
             helper.make_node("Reshape", ["x", "dd"], ["y"]),
             helper.make_node("Shape", ["z"], ["zs"]),
             helper.make_node("Reshape", ["x", "zs"], ["w"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 2]),
                                       helper.make_tensor_value_info("d", T.INT64, [1]),
                                       helper.make_tensor_value_info("z", T.FLOAT, [4, 1])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None),
                           helper.make_tensor_value_info("w", T.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    assert value_inputs(m) == ["d"]
    cm = quiet_compile(m)
    x, z = np.arange(4, dtype=np.float32).reshape(2, 2), np.zeros((4, 1), np.float32)
    y, w = cm.run(x, np.array([1], np.int64) * 2, z)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(w, x.reshape(4, 1))
    # A model without such inputs compiles as before, to one CompiledModel.
    plain = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [2])],
        [helper.make_tensor_value_info("y", T.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 13)])
    assert isinstance(ck.compile(plain, opt_level=0, asm=False), ck.CompiledModel)


def test_range_limits_from_inputs_match_onnxruntime():
    g = helper.make_graph([helper.make_node("Range", ["a", "b", "c"], ["y"])], "g",
                          [helper.make_tensor_value_info(n, T.FLOAT, []) for n in "abc"],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    cm = quiet_compile(m)
    for args in ((0.0, 5.0, 1.5), (2.0, -1.0, -0.5)):
        arrays = [np.array(v, np.float32) for v in args]
        got, ref = cm.run(*arrays)[0], ort_run(m, arrays)[0]
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-6)
