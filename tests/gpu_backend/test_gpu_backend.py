"""The GPU backend (target="gpu").

Everywhere: the PTX stage exists and is well formed for every mlsys_datasets model and a light
model, the grid mapping is visible in Kernel IR, bad arguments are refused before any device
work, and `.run` without a device raises the clear NoCudaDevice error. Marked `gpu` (skipped by
tests/conftest.py without a device): every datasets model and every light model matches the
host backend, compiled independently (rtol 1e-4, atol 1e-5).
"""

import gc
import re

import mlsys_datasets
import numpy as np
import pytest

import compilerkit as ck
from compilerkit.backends import cuda_driver
from compilerkit.measure.conformance import light_model_path, light_models, random_inputs

LIGHT_MODELS = light_models()


def _compile(path, target, feeds, asm=True):
    return ck.compile(path, target=target, asm=asm,
                      input_shapes={n: list(a.shape) for n, a in feeds})


def check_ptx(ptx: str, names):
    """Structural check of a PTX module: header, one .entry per kernel, balanced braces."""
    assert re.search(r"^\.version \d+\.\d+$", ptx, re.M)
    assert re.search(r"^\.target sm_\d+", ptx, re.M)
    assert ".address_size 64" in ptx
    entries = re.findall(r"^\.visible \.entry (\w+)\(", ptx, re.M)
    assert sorted(entries) == sorted(names)
    assert ptx.count("{") == ptx.count("}")
    assert ptx.count("ret;") >= len(names)


@pytest.mark.parametrize("name", mlsys_datasets.ONNX_MODELS)
def test_datasets_model_gives_ptx(name):
    path = str(mlsys_datasets.onnx_path(name))
    cm = _compile(path, "gpu", random_inputs(path))
    launches = cm.session.launches
    check_ptx(cm.stages["ptx"], [k.name for k in launches])
    kir = cm.stages["kernel-ir"]
    # Every top-level nest says how it maps to the grid.
    assert kir.count("gpu_map = ") >= len({s for s in re.findall(r'onnx_node = "([^"]*)"', kir)})
    assert "nvptx64-nvidia-cuda" in cm.stages["llvm-ir"]


def test_light_model_gives_ptx():
    path = light_model_path("squeezenet")
    cm = _compile(path, "gpu", random_inputs(path))
    check_ptx(cm.stages["ptx"], [k.name for k in cm.session.launches])
    kinds = {k.mapping.split()[0] for k in cm.session.launches}
    assert "matmul" in kinds and any(k.startswith("flat") for k in kinds)


def test_matmul_is_tiled_through_shared_memory():
    path = str(mlsys_datasets.onnx_path("matmul_16x16"))
    cm = _compile(path, "gpu", random_inputs(path))
    assert "gpu_map = #krnl.gpu_map<matmul, tile = 16>" in cm.stages["kernel-ir"]
    ptx = cm.stages["ptx"]
    assert ".shared" in ptx and "bar.sync" in ptx and "fma.rn.f32" in ptx
    mm = [k for k in cm.session.launches if k.mapping.startswith("matmul")]
    assert mm and mm[0].block == (16, 16, 1)


def test_elementwise_is_flat_and_reduction_loops_stay_sequential():
    # Softmax-like: the reduction axis must never be a thread index (two threads would add
    # into one element).
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 50])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 50])
    g = helper.make_graph([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1),
                           helper.make_node("Relu", ["x"], ["z"])], "g", [x], [y, z],
                          [helper.make_tensor("axes", TensorProto.INT64, [1], [1])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    cm = ck.compile(model, target="gpu")
    mappings = [k.mapping for k in cm.session.launches]
    # Relu: both loops (200 threads: 7 warps); ReduceSum's accumulation: rows only (4: 1 warp).
    assert "flat(0,1) block 224" in mappings
    assert "flat(0) block 32" in mappings


def test_no_device_error_is_clear_and_inputs_are_checked_first():
    path = str(mlsys_datasets.onnx_path("mlp"))
    feeds = random_inputs(path)
    cm = _compile(path, "gpu", feeds)
    with pytest.raises(ck.InputError):
        cm.run(np.zeros((3, 3), np.float32))
    if cuda_driver.cuda_available():
        pytest.skip("a CUDA device exists here")
    with pytest.raises(cuda_driver.NoCudaDevice, match="no CUDA device found"):
        cm.run(*[a for _, a in feeds])


def test_ptx_targets_the_device_or_a_default():
    from compilerkit.backends.gpu import DEFAULT_SM, GpuBackend

    sm = GpuBackend().sm
    expected = cuda_driver.context().info.sm if cuda_driver.cuda_available() else DEFAULT_SM
    assert sm == expected
    assert GpuBackend("sm_90").target.cpu == "sm_90"


def _against_host(path):
    feeds = random_inputs(path)
    arrays = [a for _, a in feeds]
    ref = _compile(path, "host", feeds, asm=False).run(*arrays)
    cm = _compile(path, "gpu", feeds, asm=False)
    out = cm.run(*arrays)
    assert len(out) == len(ref)
    for o, r in zip(out, ref, strict=True):
        assert o.shape == r.shape and o.dtype == r.dtype
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-5)
    # A second run reuses the device buffers and gives the same answer.
    again = cm.run(*arrays)
    for o, a in zip(out, again, strict=True):
        np.testing.assert_array_equal(o, a)
    del cm
    gc.collect()


@pytest.mark.gpu
@pytest.mark.parametrize("name", mlsys_datasets.ONNX_MODELS)
def test_datasets_model_matches_host(name):
    _against_host(str(mlsys_datasets.onnx_path(name)))


@pytest.mark.gpu
@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_matches_host(name):
    _against_host(light_model_path(name))


def _conv_model(channels=64, side=56, group=1):
    """Conv 3x3, pad 1, with bias and a Relu after it: big enough that the host's GEMM
    schedule cuts its output into panels sharing one column buffer (a split inside the batch
    x group split)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    w = rng.standard_normal((channels, channels // group, 3, 3)).astype(np.float32) * 0.1
    bias = rng.standard_normal(channels).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, side, side])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], group=group),
         helper.make_node("Relu", ["c"], ["y"])], "conv", [x], [y],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")])
    # IR version 9: what onnxruntime releases since 1.16 read (onnx's default may be newer).
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def test_conv_kernels_all_run_on_threads_with_their_outer_indices():
    cm = ck.compile(_conv_model(), target="gpu")
    launches = cm.session.launches
    assert len({k.name for k in launches}) == len(launches)
    # Every nest of the Conv (bias, column copy, product, epilogue) is threads, none serial:
    # panel offsets (q0 + q) count as the loop's own index.
    assert not [k.name for k in launches if k.mapping == "serial"]
    for k, extra in cm.session.steps:
        assert len(extra) == launches[k].n_extra
    check_ptx(cm.stages["ptx"], [k.name for k in launches])


@pytest.mark.gpu
@pytest.mark.parametrize("group", [1, 4, 64])
def test_conv_matches_onnxruntime(group):
    from compilerkit.measure.conformance import ort_session

    model = _conv_model(group=group)
    x = np.random.default_rng(group).standard_normal((1, 64, 56, 56)).astype(np.float32)
    ref = ort_session(model.SerializeToString()).run(None, {"x": x})[0]
    out = ck.compile(model, target="gpu", asm=False).run(x)[0]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_graph_replay_reads_each_runs_inputs_and_matches_kernel_by_kernel():
    path = str(mlsys_datasets.onnx_path("small_resnet"))
    feeds = random_inputs(path)
    host = _compile(path, "host", feeds, asm=False)
    cm = _compile(path, "gpu", feeds, asm=False)
    first = cm.run(*[a for _, a in feeds])
    assert cm.session.graph is not None, cm.session.graph_error
    # A second run with other inputs: the replayed launches read the new upload.
    other = [np.random.default_rng(99).standard_normal(a.shape).astype(a.dtype) for _, a in feeds]
    replayed = cm.run(*other)
    for o, r in zip(replayed, host.run(*other), strict=True):
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-5)
    cm.session.use_graph = False
    for o, r in zip(cm.run(*other), replayed, strict=True):
        np.testing.assert_array_equal(o, r)
    assert not all(np.array_equal(a, b) for a, b in zip(first, replayed, strict=True))
