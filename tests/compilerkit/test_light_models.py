"""The real-architecture "light" models shipped inside the onnx package, compiled at -O3 and
compared with onnxruntime and with the expected output stored beside each model."""

import glob
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import compilerkit as ck

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = sorted(os.path.basename(p)[len("light_"):-len(".onnx")]
                for p in glob.glob(os.path.join(LIGHT, "light_*.onnx")))


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_light_model(name):
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    inp = [i for i in model.graph.input if i.name not in inits][0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession(path, so).run(None, {inp.name: x})[0]
    out = ck.compile(path, opt_level=3, asm=False).run(x)[0]
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-5)
