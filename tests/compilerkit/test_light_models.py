"""Real models against onnxruntime (rtol 1e-3, atol 1e-5): the "light" architectures shipped
inside the onnx package, all at -O3 (the level whose schedules matter) and one at -O1 (the
untiled, unvectorised code path), and every ONNX model of `mlsys_datasets`.

Budget (2-core CI): the nine light models compile in about 1-13 s each at -O3; -O1 code runs
an order of magnitude slower, so only squeezenet is run at -O1. Each test drops its compiled
model; `test_compiling_again_does_not_grow_memory` checks that doing so frees it.
"""

import gc
import glob
import os

import mlsys_datasets
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import compilerkit as ck

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = sorted(os.path.basename(p)[len("light_"):-len(".onnx")]
                for p in glob.glob(os.path.join(LIGHT, "light_*.onnx")))


def _inputs(model):
    inits = {i.name for i in model.graph.initializer}
    out = []
    for k, inp in enumerate(i for i in model.graph.input if i.name not in inits):
        tt = inp.type.tensor_type
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        out.append((inp.name, np.random.default_rng(k).standard_normal(shape).astype(dtype)))
    return out


def _check_against_ort(path, opt_level):
    model = onnx.load(path)
    feeds = _inputs(model)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(
        None, dict(feeds))
    cm = ck.compile(path, opt_level=opt_level, asm=False,
                    input_shapes={n: list(a.shape) for n, a in feeds})
    out = cm.run(*[a for _, a in feeds])
    assert len(out) == len(ref)
    for o, r in zip(out, ref, strict=True):
        np.testing.assert_allclose(o, r, rtol=1e-3, atol=1e-5)
    del cm
    gc.collect()


def test_models_are_there():
    assert len(MODELS) == 9, MODELS


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_light_model_O3(name):
    _check_against_ort(os.path.join(LIGHT, f"light_{name}.onnx"), 3)


@pytest.mark.slow
def test_light_model_O1_squeezenet():
    _check_against_ort(os.path.join(LIGHT, "light_squeezenet.onnx"), 1)


@pytest.mark.slow
@pytest.mark.parametrize("name", mlsys_datasets.ONNX_MODELS)
def test_datasets_model_O3(name):
    _check_against_ort(str(mlsys_datasets.onnx_path(name)), 3)


def _rss_mb():
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_compiling_again_does_not_grow_memory():
    # A compiled model owns a JIT engine, an arena and the stage texts; dropping it must free
    # them, or a suite compiling hundreds of models runs out of memory.
    path = str(mlsys_datasets.onnx_path("conv_bn_pool"))
    x = _inputs(onnx.load(path))

    def once():
        cm = ck.compile(path, opt_level=3, input_shapes={n: list(a.shape) for n, a in x})
        cm.run(*[a for _, a in x])
        assert cm.stages["asm"]
        del cm
        gc.collect()

    for _ in range(3):
        once()
    before = _rss_mb()
    for _ in range(10):
        once()
    assert _rss_mb() - before < 40, f"RSS grew {_rss_mb() - before:.0f} MiB over 10 compiles"
