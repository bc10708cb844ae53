"""Committed ONNX zoo: integrity, onnxruntime vs Keras / numpy, the CLI's build/check/list."""

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

ort = pytest.importorskip("onnxruntime")

import mlsys_datasets  # noqa: E402
from mlsys_datasets import ONNX_MODELS, load_onnx, manifest, onnx_path, zoo  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _session(name):
    return ort.InferenceSession(str(onnx_path(name)), providers=["CPUExecutionProvider"])


def test_no_top_level_datasets_package():
    # A datasets/__init__.py would shadow the Hugging Face `datasets` library.
    assert not (REPO / "datasets" / "__init__.py").exists()
    assert Path(mlsys_datasets.__file__).parent == REPO / "datasets" / "mlsys_datasets"


def test_manifest_lists_exactly_the_models():
    entries = manifest()["models"]
    assert sorted(entries) == sorted(f"{n}.onnx" for n in zoo.ALL_MODELS)
    on_disk = sorted(p.name for p in zoo.ONNX_DIR.glob("*.onnx"))
    assert on_disk == sorted(entries)


@pytest.mark.parametrize("name", ONNX_MODELS)
def test_committed_file_matches_manifest_and_is_small(name):
    path = onnx_path(name)
    assert path.is_absolute() and path.is_file()
    data = path.read_bytes()
    entry = manifest()["models"][path.name]
    assert len(data) < 1_000_000
    assert entry["size"] == len(data)
    assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    model = load_onnx(name)
    onnx.checker.check_model(model, full_check=True)
    inits = {t.name for t in model.graph.initializer}
    ins = [v for v in model.graph.input if v.name not in inits]
    assert [i["name"] for i in entry["inputs"]] == [v.name for v in ins]
    assert [o["name"] for o in entry["outputs"]] == [v.name for v in model.graph.output]
    for io, v in zip(entry["inputs"] + entry["outputs"], ins + list(model.graph.output),
                     strict=True):
        dims = [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
        assert io["shape"] == dims and io["dtype"] == "float32"
    assert entry["ops"] == sorted({n.op_type for n in model.graph.node})


@pytest.mark.parametrize("bad", ["resnet", "mlp.onnx", "", "../onnx/mlp"])
def test_unknown_model_name(bad):
    with pytest.raises(ValueError) as e:
        onnx_path(bad)
    msg = str(e.value)
    assert repr(bad) in msg and all(n in msg for n in ONNX_MODELS)
    with pytest.raises(ValueError):
        load_onnx(bad)


# ---------------------------------------------------------------- Keras exports vs Keras


@pytest.mark.parametrize("name", list(zoo.KERAS_RECIPES))
def test_keras_export_matches_keras(name):
    pytest.importorskip("keras")
    from mlsys_datasets import keras_model

    entry = manifest()["models"][f"{name}.onnx"]
    assert entry["source"] == "keras"
    builder, params = zoo.KERAS_RECIPES[name]
    assert entry["params"] == params
    model = keras_model(builder, **params)  # same seed -> same weights as the exported model
    shape = tuple(entry["inputs"][0]["shape"][1:])
    assert entry["inputs"][0]["shape"][0] == "batch"
    for batch in (1, 3):
        x = np.random.default_rng(batch).random((batch, *shape), dtype=np.float32)
        (got,) = _session(name).run(None, {"input": x})
        want = model.predict(x, verbose=0)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)
    # A model built with another seed must NOT match: the comparison can fail.
    other = keras_model(builder, **{**params, "seed": params["seed"] + 1})
    assert not np.allclose(_session(name).run(None, {"input": x})[0],
                           other.predict(x, verbose=0), atol=1e-5)


# ---------------------------------------------------------------- hand-built graphs vs numpy


def _inits(name):
    from onnx import numpy_helper

    return {t.name: numpy_helper.to_array(t) for t in load_onnx(name).graph.initializer}


def _conv2d(x, w, b, pad, stride):
    """Naive NCHW convolution, independent of onnxruntime."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    k = w.shape[-1]
    oh, ow = (h - k) // stride + 1, (wd - k) // stride + 1
    out = np.zeros((n, w.shape[0], oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + k, j * stride:j * stride + k]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out + b[None, :, None, None]


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_gemm_mlp_numpy():
    w = _inits("gemm_mlp")
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    want = _softmax(np.maximum(x @ w["W1"] + w["b1"], 0) @ w["W2"].T + w["b2"])
    (got,) = _session("gemm_mlp").run(None, {"input": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_conv_bn_pool_numpy():
    w = _inits("conv_bn_pool")
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    c1 = _conv2d(x, w["W1"], w["b1"], pad=1, stride=1)
    bn = lambda v: v[None, :, None, None]  # noqa: E731
    c1 = (c1 - bn(w["bn_mean"])) / np.sqrt(bn(w["bn_var"]) + 1e-5) * bn(w["bn_scale"]) \
        + bn(w["bn_bias"])
    r1 = np.maximum(c1, 0)
    p1 = r1.reshape(1, 8, 8, 2, 8, 2).max((3, 5))
    r2 = np.maximum(_conv2d(p1, w["W2"], w["b2"], pad=1, stride=2), 0)
    want = r2.mean((2, 3))
    (got,) = _session("conv_bn_pool").run(None, {"input": x})
    assert got.shape == (1, 16)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_broadcast_elementwise_numpy():
    w = _inits("broadcast_elementwise")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 1)).astype(np.float32)
    c = rng.standard_normal(4).astype(np.float32)
    t = np.tanh(a + b) * c
    u = 1 / (1 + np.exp(-a)) - 0.5
    want = np.sqrt(np.exp(np.maximum(t, u) / (np.abs(b) + 1)) + w["w"])
    (got,) = _session("broadcast_elementwise").run(None, {"a": a, "b": b, "c": c})
    assert got.shape == (2, 3, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batch", [1, 5, 32])
def test_dynamic_batch_mlp_numpy(batch):
    w = _inits("dynamic_batch_mlp")
    x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
    want = np.maximum(x @ w["W1"] + w["b1"], 0) @ w["W2"] + w["b2"]
    (got,) = _session("dynamic_batch_mlp").run(None, {"input": x})
    assert got.shape == (batch, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert manifest()["models"]["dynamic_batch_mlp.onnx"]["inputs"][0]["shape"] == ["N", 16]


def test_matmul_16x16_numpy():
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((16, 16)).astype(np.float32) for _ in range(2))
    (got,) = _session("matmul_16x16").run(None, {"a": a, "b": b})
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_handmade_weights_are_little_endian_raw_data():
    for name in zoo.HANDMADE:
        for t in load_onnx(name).graph.initializer:
            assert t.raw_data and not t.float_data, (name, t.name)


# ---------------------------------------------------------------- CLI


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "mlsys_datasets", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=900)


def test_cli_list():
    r = _cli("list")
    assert r.returncode == 0, r.stderr
    for name in ONNX_MODELS:
        assert name in r.stdout
    assert "input[N,16] -> output[N,4]" in r.stdout


@pytest.mark.slow  # rebuilds the whole zoo once, the modern set included (half a minute or more)
def test_check_passes_on_committed_files_and_names_the_file_that_differs(tmp_path, monkeypatch,
                                                                         capsys):
    """`python -m mlsys_datasets check` (its `main`; test_cli_list runs the entry point in a
    process of its own): on the committed files it passes; against a copy with one corrupted
    file and a stray one it names exactly those. One rebuild serves both checks, the costly part
    (a whole-zoo rebuild each): the first check's rebuild, in this process after other Keras
    models were built in it, must match every committed file byte for byte; its files are kept
    and are what the second check compares."""
    from mlsys_datasets.__main__ import main

    rebuilt, build = tmp_path / "rebuilt", zoo.build

    def build_and_keep(out, **kw):
        doc = build(out, **kw)
        shutil.copytree(out, rebuilt)
        return doc

    monkeypatch.setattr(zoo, "build", build_and_keep)
    assert main(["check"]) == 0, capsys.readouterr().err
    assert "check passed" in capsys.readouterr().out

    monkeypatch.setattr(zoo, "build",
                        lambda out, **kw: shutil.copytree(rebuilt, out, dirs_exist_ok=True))
    ref = tmp_path / "onnx"
    shutil.copytree(zoo.ONNX_DIR, ref)
    data = bytearray((ref / "lenet.onnx").read_bytes())
    data[-1] ^= 0xFF
    (ref / "lenet.onnx").write_bytes(bytes(data))
    (ref / "stray.onnx").write_bytes(b"")
    monkeypatch.setattr(zoo, "ONNX_DIR", ref)
    assert main(["check"]) == 1
    err = capsys.readouterr().err
    # Every other committed file matches the in-process rebuild; only the corrupted and the
    # stray file are reported.
    assert "check FAILED: lenet.onnx, stray.onnx differ" in err


def test_build_subset_into_directory(tmp_path):
    doc = zoo.build(tmp_path, names=["gemm_mlp", "matmul_16x16"], log=None)
    assert sorted(doc["models"]) == ["gemm_mlp.onnx", "matmul_16x16.onnx"]
    for f in ("gemm_mlp.onnx", "matmul_16x16.onnx"):
        assert (tmp_path / f).read_bytes() == (zoo.ONNX_DIR / f).read_bytes()
    with pytest.raises(ValueError, match="unknown ONNX model 'vgg'"):
        zoo.build(tmp_path, names=["vgg"], log=None)


def test_readme_lists_every_artifact_with_its_size():
    readme = (REPO / "datasets" / "README.md").read_text()
    for name in ONNX_MODELS:
        size = manifest()["models"][f"{name}.onnx"]["size"]
        assert f"| `{name}` | {size:,d} |" in readme, name


def test_rounding_only_accepts_an_ulp_and_nothing_else():
    """`check`'s second look at a model whose bytes differ: the same graph with constants a
    few ulps of their tensor's scale apart passes (TF's BatchNorm folding rounds differently
    on AVX2 and AVX-512 hosts); a larger change, a NaN moved, or another op does not."""
    import onnx
    from onnx import helper, numpy_helper

    def model(w, op="Add"):
        g = helper.make_graph([helper.make_node(op, ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])],
                              [numpy_helper.from_array(w, "w")])
        return helper.make_model(g).SerializeToString(deterministic=True)

    w = np.array([0.5, -0.25, 1e-9, np.nan], np.float32)
    near = w.copy()
    near[:3] = np.nextafter(near[:3], np.float32(1))
    far, nan_moved = w.copy(), w.copy()
    far[0] *= 1.001
    nan_moved[2:] = [np.nan, 0.0]
    assert zoo.rounding_only(model(w), model(w)) and zoo.rounding_only(model(w), model(near))
    assert not zoo.rounding_only(model(w), model(far))
    assert not zoo.rounding_only(model(w), model(nan_moved))
    assert not zoo.rounding_only(model(w), model(w, "Mul"))
    assert not zoo.rounding_only(model(w), b"not a model")
