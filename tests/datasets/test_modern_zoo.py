"""The modern set of the ONNX zoo: manifest, sizes, inputs, onnxruntime runs, rebuilding.

Cheap here: the manifest against the files, what each model is made of, onnxruntime on
`sample_inputs`, the canonical form, and a rebuild of two models (one Keras export, one
quantised variant, whose float model is exported on the way) compared byte for byte. The
whole zoo, this set included, is rebuilt by `python -m mlsys_datasets check`
(tests/datasets/test_datasets_onnx.py, marked slow).
"""

from __future__ import annotations

import hashlib

import numpy as np
import onnx
import pytest

ort = pytest.importorskip("onnxruntime")

from mlsys_datasets import manifest, zoo  # noqa: E402
from mlsys_datasets.canonical import canonicalise  # noqa: E402

MODERN = zoo.MODERN_MODELS


def _session(model):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model if isinstance(model, bytes) else str(zoo.onnx_path(model)),
                                so, providers=["CPUExecutionProvider"])


def test_modern_set_is_registered_apart_from_the_classic_one():
    assert not set(MODERN) & set(zoo.ONNX_MODELS)
    assert zoo.ALL_MODELS == zoo.ONNX_MODELS + MODERN
    for name in MODERN:
        assert zoo.onnx_path(name).is_file()
    with pytest.raises(ValueError, match="bert_encoder_qdq"):
        zoo.onnx_path("bert")  # the error lists every model, the modern ones too


@pytest.mark.parametrize("name", MODERN)
def test_manifest_entry(name):
    data = zoo.onnx_path(name).read_bytes()
    entry = manifest()["models"][f"{name}.onnx"]
    assert entry["group"] == "modern"
    assert entry["size"] == len(data) < 400_000
    assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    model = zoo.load_onnx(name)
    onnx.checker.check_model(model, full_check=True)
    assert entry["ops"] == sorted({n.op_type for n in model.graph.node})
    if name in zoo.QUANTISED:
        base, mode, options = zoo.QUANTISED[name]
        assert entry["source"] == "onnxruntime.quantization" and entry["base"] == base
        assert entry["params"] == options
        wanted = ({"QuantizeLinear", "DequantizeLinear"} if mode == "static"
                  else {"DynamicQuantizeLinear"})
        assert wanted <= set(entry["ops"]), entry["ops"]
        if mode == "dynamic":
            assert {"MatMulInteger", "ConvInteger"} & set(entry["ops"])
    else:
        builder, params = zoo.MODERN_RECIPES[name]
        assert entry["source"] == "keras"
        assert entry["builder"] == f"mlsys_datasets.modern.{builder}"
        assert entry["params"] == params


def test_the_set_stays_small_and_has_what_it_promises():
    entries = manifest()["models"]
    assert sum(entries[f"{n}.onnx"]["size"] for n in MODERN) < 4_000_000
    ops = {n: set(entries[f"{n}.onnx"]["ops"]) for n in MODERN}
    assert {"Pow", "Tanh", "Softmax", "Equal"} <= ops["bert_encoder"]  # gelu, padding mask
    assert {"Less", "Softmax"} <= ops["gpt_decoder"]                  # the causal mask
    assert {"Conv", "Softmax"} <= ops["vit"]                          # patches, attention
    assert "LSTM" in ops["lstm"] and "Loop" in ops["gru"]
    assert {"Resize", "Concat", "MaxPool"} <= ops["unet2d"]
    assert {"Resize", "Concat", "Sigmoid", "TopK"} <= ops["detection_head"]
    resize = [n for n in zoo.load_onnx("unet2d").graph.node if n.op_type == "Resize"]
    assert all(a.s == b"linear" for n in resize for a in n.attribute if a.name == "mode")


@pytest.mark.parametrize("name", MODERN)
def test_onnxruntime_runs_it_on_sample_inputs(name):
    feeds = zoo.sample_inputs(name, batch=2)
    entry = manifest()["models"][f"{name}.onnx"]
    (out,) = _session(name).run(None, feeds)
    want = entry["outputs"][0]["shape"]  # tf2onnx leaves the decoder's length symbolic
    assert out.shape[0] == 2 and len(out.shape) == len(want) and np.isfinite(out).all()
    assert all(d == w for d, w in zip(out.shape, want, strict=True) if isinstance(w, int))
    # The batch rows are computed independently, except under dynamic quantisation: its
    # activation scale is the whole tensor's range, batch included.
    (one,) = _session(name).run(None, {k: v[:1] for k, v in feeds.items()})
    if zoo.QUANTISED.get(name, ("", ""))[1] == "dynamic":
        assert not np.allclose(out[:1], one, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_allclose(out[:1], one, rtol=1e-5, atol=1e-5)


def test_sample_inputs_pad_the_token_ids():
    feeds = zoo.sample_inputs("bert_encoder", batch=3, seed=1)
    (ids,) = feeds.values()
    vocab = zoo.MODERN_RECIPES["bert_encoder"][1]["vocab"]
    assert ids.shape == (3, 16) and ids.dtype == np.int32
    assert (ids[:, 12:] == 0).all() and (ids[:, :12] >= 1).all() and ids.max() < vocab
    assert not np.array_equal(ids, zoo.sample_inputs("bert_encoder", batch=3, seed=2)["input"])
    assert set(zoo.sample_inputs("bert_encoder_qdq")) == {"input"}


def test_padding_is_masked():
    # What sits in the padded positions must not change the classification.
    feeds = zoo.sample_inputs("bert_encoder")
    other = {k: v.copy() for k, v in feeds.items()}
    other["input"][:, 12:] = 5  # real tokens where padding was: the answer changes
    a = _session("bert_encoder").run(None, feeds)[0]
    b = _session("bert_encoder").run(None, other)[0]
    assert not np.allclose(a, b)


def test_causal_mask_hides_the_future():
    feeds = zoo.sample_inputs("gpt_decoder")
    later = {k: v.copy() for k, v in feeds.items()}
    later["input"][:, 8:] = 7
    a = _session("gpt_decoder").run(None, feeds)[0]
    b = _session("gpt_decoder").run(None, later)[0]
    np.testing.assert_array_equal(a[:, :8], b[:, :8])
    assert not np.allclose(a[:, 8:], b[:, 8:])


@pytest.mark.parametrize("name", ["gru", "bert_encoder"])
def test_canonical_form_is_a_fixed_point_and_keeps_the_answer(name):
    committed = zoo.onnx_path(name).read_bytes()
    again = canonicalise(onnx.load_from_string(committed))
    assert again.SerializeToString(deterministic=True) == committed


def test_canonical_form_does_not_depend_on_node_order():
    model = zoo.load_onnx("lstm")
    shuffled = onnx.ModelProto.FromString(model.SerializeToString())
    # Nodes backwards (not even topologically sorted) under other names.
    nodes = [type(n).FromString(n.SerializeToString()) for n in reversed(shuffled.graph.node)]
    for k, n in enumerate(nodes):
        n.name = f"renamed_{k}"
    del shuffled.graph.node[:]
    shuffled.graph.node.extend(nodes)
    assert (canonicalise(shuffled).SerializeToString(deterministic=True)
            == zoo.onnx_path("lstm").read_bytes())


def test_rebuilding_two_models_gives_the_committed_bytes(tmp_path):
    pytest.importorskip("keras")
    names = ["lstm", "unet2d_dynamic"]
    doc = zoo.build(tmp_path, names=names, log=None)
    assert sorted(doc["models"]) == sorted(f"{n}.onnx" for n in names)
    for n in names:
        assert (tmp_path / f"{n}.onnx").read_bytes() == zoo.onnx_path(n).read_bytes(), n
        assert doc["models"][f"{n}.onnx"] == manifest()["models"][f"{n}.onnx"]


def test_keras_lstm_matches_its_export():
    pytest.importorskip("keras")
    from mlsys_datasets.modern import modern_model

    builder, params = zoo.MODERN_RECIPES["lstm"]
    x = zoo.sample_inputs("lstm", batch=3)["input"]
    want = modern_model(builder, **params).predict(x, verbose=0)
    np.testing.assert_allclose(_session("lstm").run(None, {"input": x})[0], want,
                               rtol=1e-4, atol=1e-5)


def test_readme_lists_the_modern_set_with_sizes():
    readme = (zoo.ONNX_DIR.parents[1] / "README.md").read_text()
    for name in MODERN:
        size = manifest()["models"][f"{name}.onnx"]["size"]
        assert f"| `{name}` | {size:,d} |" in readme, name
