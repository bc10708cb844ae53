"""Real models against onnxruntime (rtol 1e-3, atol 1e-5), run by `compilerkit.conformance`:
the "light" architectures shipped inside the onnx package, all at -O3 (the level whose schedules
matter) and one at -O1 (the untiled, unvectorised code path), and every ONNX model of
`mlsys_datasets`.

The light models do not store their weights: `ConstantOfShape` nodes make every filter a
constant, so their outputs (all 0.001 after the softmax) do not depend on the input. Matching
them checks that the networks compile and run with the right shapes and no NaN; the numeric
check on whole networks is the datasets models, whose weights are stored.

Budget (2-core CI): the nine light models compile in about 1-13 s each at -O3; -O1 code runs
an order of magnitude slower, so only squeezenet is run at -O1. `run_model` drops its compiled
model; `test_compiling_again_does_not_grow_memory` checks that doing so frees it.
"""

import gc
import os

import mlsys_datasets
import onnx
import pytest

import compilerkit as ck
from compilerkit import conformance

MODELS = conformance.light_models()


def _check(path, opt_level):
    result = conformance.run_model(path, opt_level)
    gc.collect()
    assert result.status == conformance.PASSED, (
        f"{result.name} -O{opt_level}: {result.status}: {result.reason} "
        f"(max |error| {result.max_error})")


def test_models_are_there():
    assert len(MODELS) == 9, MODELS


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_light_model_O3(name):
    _check(conformance.light_model_path(name), 3)


@pytest.mark.slow
def test_light_model_O1_squeezenet():
    _check(conformance.light_model_path("squeezenet"), 1)


@pytest.mark.slow
@pytest.mark.parametrize("name", mlsys_datasets.ONNX_MODELS)
def test_datasets_model_O3(name):
    _check(str(mlsys_datasets.onnx_path(name)), 3)


def _rss_mb():
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_compiling_again_does_not_grow_memory():
    # A compiled model owns a JIT engine, an arena and the stage texts; dropping it must free
    # them, or a suite compiling hundreds of models runs out of memory.
    path = str(mlsys_datasets.onnx_path("conv_bn_pool"))
    x = conformance.random_inputs(onnx.load(path))

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
