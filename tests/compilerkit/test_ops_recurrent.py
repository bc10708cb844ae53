"""LSTM, GRU and RNN (lowering/recurrent.py) against onnxruntime: ONNX's node tests, then
randomised attribute combinations (directions x layouts x activations x optional inputs and
outputs x sequence_lens), run-time lengths, refusals, f64 and the big-endian emulated target.

onnxruntime has no layout=1 (batch-major) kernel: those cases are checked against the same
op in layout 0 with the inputs and outputs transposed, an independent path through both."""


import numpy as np
import pytest
from ckhelpers import keras_to_onnx, node_test_passes, ort_run
from onnx import helper, numpy_helper

import compilerkit as ck

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
N_ACTS = {"LSTM": 3, "GRU": 2, "RNN": 1}
ACTIVATIONS = ["Sigmoid", "Tanh", "Relu", "HardSigmoid", "Affine", "LeakyRelu",
               "ThresholdedRelu", "ScaledTanh", "Elu", "Softsign", "Softplus"]
# (takes alpha, takes beta): onnxruntime hands the attribute lists to these in order.
TAKES = {"Affine": (1, 1), "LeakyRelu": (1, 0), "ThresholdedRelu": (1, 0),
         "ScaledTanh": (1, 1), "HardSigmoid": (1, 1), "Elu": (1, 0)}


def _model(kind, inputs, outputs, attrs, layout=0, opset=14):
    """One recurrent node; inputs: [(name or "", array, is_initializer)], outputs as named
    (absent ones ""), graph inputs are the non-initializer arrays."""
    if layout:
        attrs = dict(attrs, layout=1)
    names = [n for n, _, _ in inputs]
    while names and names[-1] == "":
        names.pop()
    outs = list(outputs)
    while outs and outs[-1] == "":
        outs.pop()
    node = helper.make_node(kind, names, outs, name="rec", **attrs)
    feeds = [(n, a) for n, a, init in inputs if n and not init]
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
          for n, a in feeds]
    vo = [helper.make_empty_tensor_value_info(o) for o in outs if o]
    g = helper.make_graph([node], "g", vi, vo,
                          [numpy_helper.from_array(a, n) for n, a, init in inputs if n and init])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), [
        a for _, a in feeds]


def _case(kind, rng, direction="forward", layout=0, acts=None, with_b=True, lens=None,
          with_h=True, with_c=True, with_p=True, clip=None, extra=None,
          outputs=("Y", "Y_h", "Y_c"), seq=4, batch=3, inp=5, hid=4, dtype=np.float32):
    """(model, feeds, the same op in layout 0 with its feeds: onnxruntime's reference)."""
    nd = 2 if direction == "bidirectional" else 1
    g = GATES[kind] * hid
    x = rng.standard_normal((seq, batch, inp)).astype(dtype)
    w = (rng.standard_normal((nd, g, inp)) * 0.5).astype(dtype)
    r = (rng.standard_normal((nd, g, hid)) * 0.5).astype(dtype)
    bias = rng.standard_normal((nd, 2 * g)).astype(dtype)
    h0 = rng.standard_normal((nd, batch, hid)).astype(dtype)
    c0 = rng.standard_normal((nd, batch, hid)).astype(dtype)
    p = rng.standard_normal((nd, 3 * hid)).astype(dtype)
    attrs = dict(hidden_size=hid, direction=direction, **(extra or {}))
    if acts is not None:
        attrs["activations"] = acts
        alpha, beta = [], []
        for a in acts:
            takes_a, takes_b = TAKES.get(a, (0, 0))
            if takes_a:
                alpha.append(float(rng.uniform(0.2, 1.5)))
            if takes_b:
                beta.append(float(rng.uniform(0.5, 1.5) if a == "ScaledTanh" else
                                  rng.uniform(-0.5, 0.5)))
        if alpha:
            attrs["activation_alpha"] = alpha
        if beta:
            attrs["activation_beta"] = beta
    if clip is not None:
        attrs["clip"] = clip
    n_out = 3 if kind == "LSTM" else 2
    outs = [o if o in outputs else "" for o in ("Y", "Y_h", "Y_c")[:n_out]]

    def inputs(tr):
        ins = [("X", tr(x, (1, 0, 2)), False), ("W", w, True), ("R", r, True),
               ("B" if with_b else "", bias, True),
               ("L" if lens is not None else "", lens, False),
               ("H0" if with_h else "", tr(h0, (1, 0, 2)), False)]
        if kind == "LSTM":
            ins += [("C0" if with_c else "", tr(c0, (1, 0, 2)), False),
                    ("P" if with_p else "", p, True)]
        return ins

    model, feeds = _model(kind, inputs(lambda a, perm: np.transpose(a, perm) if layout else a),
                          outs, attrs, layout)
    ref_model, ref_feeds = _model(kind, inputs(lambda a, perm: a), outs, attrs)
    return model, feeds, ref_model, ref_feeds, [o for o in outs if o]


def _reference(ref_model, ref_feeds, names, layout):
    ref = ort_run(ref_model, ref_feeds)
    if not layout:
        return ref
    return [np.transpose(v, (2, 0, 1, 3)) if n == "Y" else np.transpose(v, (1, 0, 2))
            for v, n in zip(ref, names, strict=True)]


def _check(case, layout=0, target="host", rtol=1e-4, atol=1e-5):
    model, feeds, ref_model, ref_feeds, names = case
    ref = _reference(ref_model, ref_feeds, names, layout)
    got = ck.compile(model, asm=False, target=target).run(*feeds)
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)
    return got


def test_onnx_node_tests_for_recurrent_ops():
    passed = node_test_passes({"LSTM", "GRU", "RNN"})
    assert passed == {"LSTM": 6, "GRU": 6, "RNN": 6}


def _draw(seed):
    """A random combination of everything the ops take, from `seed`."""
    rng = np.random.default_rng(seed)
    kind = ["LSTM", "GRU", "RNN"][seed % 3]
    direction = ["forward", "reverse", "bidirectional"][(seed // 3) % 3]
    layout = int(rng.integers(2))
    nd = 2 if direction == "bidirectional" else 1
    acts = None if rng.random() < 0.3 else [str(a) for a in rng.choice(
        ACTIVATIONS, N_ACTS[kind] * nd)]
    seq, batch = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    lens = rng.integers(0, seq + 1, batch).astype(np.int32) if rng.random() < 0.5 else None
    extra = {}
    if kind == "GRU":
        extra["linear_before_reset"] = int(rng.integers(2))
    if kind == "LSTM" and rng.random() < 0.4:
        extra["input_forget"] = 1
    n_out = 3 if kind == "LSTM" else 2
    outputs = [o for o in ("Y", "Y_h", "Y_c")[:n_out] if rng.random() < 0.7] or ["Y_h"]
    flags = rng.random(4) < 0.6
    return dict(kind=kind, rng=rng, direction=direction, layout=layout, acts=acts,
                with_b=bool(flags[0]), lens=lens, with_h=bool(flags[1]), with_c=bool(flags[2]),
                with_p=bool(flags[3]), clip=float(rng.uniform(0.5, 3)) if rng.random() < 0.3
                else None, extra=extra, outputs=outputs, seq=seq, batch=batch,
                inp=int(rng.integers(1, 7)), hid=int(rng.integers(1, 6)))


@pytest.mark.parametrize("seed", range(27))
def test_random_combinations_against_onnxruntime(seed):
    draw = _draw(seed)
    _check(_case(**draw), layout=draw["layout"])


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["reverse", "bidirectional"])
def test_sequence_lens_at_run_time(kind, direction):
    # One compiled model, several length vectors: 0 (zero states), full, and in between; past
    # a length Y is zero and Y_h is the state at the last valid step.
    rng = np.random.default_rng(7)
    lens = np.array([4, 0, 2, 1], np.int32)
    case = _case(kind, rng, direction, lens=lens, batch=4, clip=2.0)
    model, feeds, ref_model, ref_feeds, names = case
    compiled = ck.compile(model, asm=False)
    for new in ([4, 0, 2, 1], [1, 4, 3, 0], [4, 4, 4, 4]):
        lens[:] = new
        ref = ort_run(ref_model, ref_feeds)
        got = compiled.run(*feeds)
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)
        y = got[0]
        for b, n in enumerate(new):
            assert not y[n:, :, b].any()


def test_sequence_lens_out_of_range_is_a_run_error():
    rng = np.random.default_rng(1)
    model, feeds, *_ = _case("GRU", rng, lens=np.array([2, 5, 1], np.int32))
    with pytest.raises(ck.RunError, match=r"node 'rec' \(GRU\).*sequence_lens.*\[0, 4\]"):
        ck.compile(model, asm=False).run(*feeds)


def test_activation_without_its_alpha_is_refused():
    rng = np.random.default_rng(2)
    model, *_ = _case("RNN", rng, extra={"activations": ["ThresholdedRelu"]})
    with pytest.raises(ck.UnsupportedOpError,
                       match=r"node 'rec' \(RNN\): activation 'ThresholdedRelu' without a value "
                             r"in activation_alpha"):
        ck.compile(model, asm=False)


def test_unknown_activation_and_wrong_count_are_refused():
    rng = np.random.default_rng(3)
    model, *_ = _case("GRU", rng, extra={"activations": ["Sigmoid", "Gelu"]})
    with pytest.raises(ck.UnsupportedOpError, match=r"node 'rec' \(GRU\): activation 'Gelu'"):
        ck.compile(model, asm=False)
    model, *_ = _case("GRU", rng, direction="bidirectional",
                      extra={"activations": ["Sigmoid", "Tanh"]})
    with pytest.raises(ck.ModelError, match=r"node 'rec' \(GRU\): the number of activations "
                                            r"is 2; expected 4"):
        ck.compile(model, asm=False)


def test_softplus_of_large_inputs_follows_the_spec():
    # log(1 + e^x) for x up to 200: onnxruntime's RNN overflows to inf there; the spec's
    # function is finite, so this one is checked against numpy in float64.
    x = np.linspace(-200, 200, 9, dtype=np.float32).reshape(1, 9, 1)
    w = np.ones((1, 1, 1), np.float32)
    r = np.zeros((1, 1, 1), np.float32)
    model, feeds = _model("RNN", [("X", x, False), ("W", w, True), ("R", r, True)],
                          ["Y"], dict(hidden_size=1, activations=["Softplus"]))
    got = ck.compile(model, asm=False).run(*feeds)[0].ravel()
    x64 = x.astype(np.float64).ravel()
    np.testing.assert_allclose(got, np.logaddexp(0, x64), rtol=1e-6, atol=1e-40)  # subnormals


def test_f64_lstm_and_opset_7():
    # onnxruntime has no f64 LSTM: the f64 model runs on values exactly representable in f32,
    # against onnxruntime's f32 answer on the same values.
    rng = np.random.default_rng(4)
    model, feeds, *_ = _case("LSTM", rng, "bidirectional", dtype=np.float64, clip=1.5)
    for init in model.graph.initializer:
        init.CopyFrom(numpy_helper.from_array(
            numpy_helper.to_array(init).astype(np.float32).astype(np.float64), init.name))
    feeds = [f.astype(np.float32).astype(np.float64) for f in feeds]
    got = ck.compile(model, asm=False).run(*feeds)
    model32, feeds32, *_ = _case("LSTM", np.random.default_rng(4), "bidirectional", clip=1.5)
    ref = ort_run(model32, feeds32)
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
    model, feeds, *_ = _case("GRU", rng, "reverse", extra={"linear_before_reset": 1})
    model.opset_import[0].version = 7
    np.testing.assert_allclose(ck.compile(model, asm=False).run(*feeds)[0],
                               ort_run(model, feeds)[0], rtol=1e-4, atol=1e-5)


def test_emulated_s390x_bidirectional_lstm_with_lengths():
    rng = np.random.default_rng(5)
    case = _case("LSTM", rng, "bidirectional", lens=np.array([3, 1], np.int32), batch=2,
                 seq=3, inp=3, hid=3)
    got = _check(case, target="s390x")
    host = ck.compile(case[0], asm=False).run(*case[1])
    for g, h in zip(got, host, strict=True):
        np.testing.assert_allclose(g, h, rtol=1e-6, atol=1e-7)


@pytest.mark.slow  # importing Keras and TensorFlow takes most of it
def test_keras_bidirectional_lstm_export_matches_keras():
    # Keras 3's ONNX export (tf2onnx) of Bidirectional(LSTM) -> LSTM: two LSTM nodes, one
    # bidirectional, with Shape/Expand initial states. (A Keras GRU exports as a Loop.)
    keras = pytest.importorskip("keras")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6, 3)), keras.layers.Bidirectional(
        keras.layers.LSTM(4, return_sequences=True)), keras.layers.LSTM(5)])
    x = np.random.default_rng(6).standard_normal((2, 6, 3)).astype(np.float32)
    want = np.asarray(model(x))
    exported = keras_to_onnx(model)
    assert [n.op_type for n in exported.graph.node].count("LSTM") == 2
    name = exported.graph.input[0].name
    got = ck.compile(exported, asm=False, input_shapes={name: [2, 6, 3]}).run(x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, ort_run(exported, [x])[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("what", "bad", "message"), [
    ("W", np.zeros((1, 7, 3), np.float32), r"the shape of W is \[1, 7, 3\]; expected \[1, 8, 3\]"),
    ("P", np.zeros((1, 5), np.float32), r"the shape of P is \[1, 5\]; expected \[1, 6\]")])
def test_inconsistent_weight_shapes_are_model_errors(what, bad, message):
    x = np.zeros((2, 1, 3), np.float32)
    ins = {"X": (x, False), "W": (np.zeros((1, 8, 3), np.float32), True),
           "R": (np.zeros((1, 8, 2), np.float32), True), "P": (None, True)}
    ins[what] = (bad, True)
    order = ["X", "W", "R", "", "", "", "", "P"] if ins["P"][0] is not None else ["X", "W", "R"]
    model, _ = _model("LSTM", [(n, *ins[n]) if n else ("", None, True) for n in order], ["Y"],
                      dict(hidden_size=2))
    with pytest.raises(ck.ModelError, match=r"node 'rec' \(LSTM\): " + message):
        ck.compile(model, asm=False)


def test_threads_give_the_same_bits():
    # Parallel loops inside the time loop (the products, the state update): 1 and 2 threads
    # agree bit for bit, and with onnxruntime.
    rng = np.random.default_rng(8)
    model, feeds, ref_model, ref_feeds, _ = _case(
        "LSTM", rng, "bidirectional", lens=rng.integers(0, 9, 32).astype(np.int32), seq=8,
        batch=32, inp=16, hid=32)
    compiled = ck.compile(model, asm=False)
    assert "krnl.parallel" in compiled.stages["kernel-ir"]
    one, two = compiled.run(*feeds, num_threads=1), compiled.run(*feeds, num_threads=2)
    for a, b, r in zip(one, two, ort_run(ref_model, ref_feeds), strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=2e-5)
