"""Ops reading a tensor with a zero-length axis (a Slice that kept nothing). A padded read of
an empty buffer has no element to clamp to: the compiled code must give the padding value, not
a load the verifier rightly calls out of bounds (which refused models onnxruntime runs)."""

import numpy as np
import pytest
from ckhelpers import make_model, ort_run
from onnx import helper

import compilerkit as ck

N = helper.make_node
F32 = np.float32


@pytest.mark.parametrize("codegen", ["llvm", "loopnest"])
@pytest.mark.parametrize("shape,axis,pads", [((2,), 0, [2, 2]), ((1, 3, 4), 1, [0, 1, 0, 0, 2, 1]),
                                             ((1, 3, 4), 2, [1, 0, 1, 0, 0, 3])])
def test_constant_pad_of_an_empty_axis_is_all_padding(codegen, shape, axis, pads):
    x = np.arange(np.prod(shape), dtype=F32).reshape(shape)
    nodes = [N("Slice", ["x", "st", "en", "ax"], ["e"], name="keep_nothing"),
             N("Pad", ["e", "p", "v"], ["y"], name="pad", mode="constant")]
    inits = [("st", np.array([1], np.int64)), ("en", np.array([1], np.int64)),
             ("ax", np.array([axis], np.int64)), ("p", np.array(pads, np.int64)),
             ("v", np.array(7.5, F32))]
    model = make_model(nodes, [("x", x)], ["y"], inits=inits)
    ref = ort_run(model, [x])[0]
    assert ref.size and np.all(ref == 7.5)
    got = ck.compile(model, asm=False, codegen=codegen).run(x)[0]
    np.testing.assert_array_equal(got, ref)
