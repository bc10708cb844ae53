"""Concat in place (plan-buffers' slabs): a Concat's inputs are placed in its output and the
copies go, with the same answer as onnxruntime and as the copying plan, at 1 and 2 threads."""

import importlib

import numpy as np
import pytest
from ckhelpers import make_model, ort_run
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

import compilerkit as ck
from compilerkit.dialects import krnl
from compilerkit.onnx_passes.single_node import main_func
from compilerkit.pipeline import compile_to

N = helper.make_node
plan_module = importlib.import_module("compilerkit.krnl_passes.plan_buffers")


def slab_nests(kmodule):
    """The Concat copies left in the planned Kernel IR."""
    return [op for op in main_func(kmodule).body.block.ops
            if isinstance(op, krnl.IterateOp) and krnl.CONCAT_SLAB in op.attributes]


def copying(monkeypatch):
    """Plan every later compile without slabs (the copying plan)."""
    plain = plan_module.plan_buffers
    monkeypatch.setattr(plan_module, "plan_buffers", lambda m, slabs=True: plain(m, slabs=False))


def same_as_onnxruntime_and_copies(model, arrays, monkeypatch):
    ref = ort_run(model, arrays)
    placed = ck.compile(model, asm=False)
    with monkeypatch.context() as m:
        copying(m)
        copied = ck.compile(model, asm=False)
    for threads in (1, 2):
        got = placed.run(*arrays, num_threads=threads)
        want = copied.run(*arrays, num_threads=threads)
        for g, w, r in zip(got, want, ref, strict=True):
            assert np.array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8))
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    return placed


def dense_block(layers=4, growth=3, seed=0):
    """DenseNet's block as its exporter writes it: each layer's features appended to the
    block's (Concat of the previous Concat and the new features), BN+ReLU then Conv."""
    r = np.random.default_rng(seed)
    nodes, inits, feats, ch = [], [], "x", 4
    for k in range(layers):
        inits += [(f"s{k}", r.standard_normal((ch, 1, 1)).astype(np.float32)),
                  (f"w{k}", r.standard_normal((growth, ch, 3, 3)).astype(np.float32) * 0.2)]
        nodes += [N("Mul", [feats, f"s{k}"], [f"m{k}"]), N("Relu", [f"m{k}"], [f"r{k}"]),
                  N("Conv", [f"r{k}", f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1]),
                  N("Concat", [feats, f"c{k}"], [f"f{k}"], axis=1)]
        feats, ch = f"f{k}", ch + growth
    nodes.append(N("Sigmoid", [feats], ["y"]))
    x = r.standard_normal((1, 4, 9, 7)).astype(np.float32)
    return make_model(nodes, [("x", x)], ["y"], inits), x


def test_a_dense_block_copies_nothing(monkeypatch):
    model, x = dense_block()
    k = compile_to("kernel-ir", model)
    # the first Concat's first input is the model's input (an argument, not a buffer): copied
    assert len(slab_nests(k)) == 1
    with monkeypatch.context() as m:
        copying(m)
        assert len(slab_nests(compile_to("kernel-ir", model))) == 8
    same_as_onnxruntime_and_copies(model, [x], monkeypatch)


@pytest.mark.parametrize("skip_is_output", [False, True])
def test_a_skip_connection_read_later_keeps_its_value(skip_is_output, monkeypatch):
    """U-Net's skip: the encoder's features go into a Concat in the decoder and are read by
    the pooling in between; the buffer is the Concat's slab from its producer on."""
    r = np.random.default_rng(1)
    w = r.standard_normal((3, 3, 3, 3)).astype(np.float32) * 0.3
    nodes = [N("Conv", ["x", "w"], ["e"], pads=[1, 1, 1, 1]), N("Relu", ["e"], ["s"]),
             N("MaxPool", ["s"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             N("Conv", ["p", "w"], ["q"], pads=[1, 1, 1, 1]),
             N("Resize", ["q", "", "sc"], ["u"], mode="nearest"),
             N("Concat", ["s", "u"], ["c"], axis=1), N("Tanh", ["c"], ["y"]),
             N("Concat", ["u", "s"], ["c2"], axis=1), N("Sigmoid", ["c2"], ["y2"])]
    x = r.standard_normal((1, 3, 8, 8)).astype(np.float32)
    sc = np.array([1, 1, 2, 2], np.float32)
    outputs = ["y", "y2"] + (["s"] if skip_is_output else [])
    model = make_model(nodes, [("x", x)], outputs, [("w", w), ("sc", sc)])
    k = compile_to("kernel-ir", model)
    # s and u go into the first Concat, the second copies both (each sits in one slab only);
    # a model output is written where the caller says, so its copy stays
    assert len(slab_nests(k)) == (3 if skip_is_output else 2)
    same_as_onnxruntime_and_copies(model, [x], monkeypatch)


@pytest.mark.parametrize("axis,shape,placed", [
    (0, (2, 3, 4), True),     # nothing before axis 0
    (1, (1, 3, 4), True),     # batch 1
    (-1, (1, 1, 4), True),    # ones before the last axis
    (1, (2, 3, 4), False),    # two batch rows: each input is two pieces of the output
    (2, (1, 3, 4), False)])
def test_only_contiguous_slabs_are_placed(axis, shape, placed, monkeypatch):
    r = np.random.default_rng(2)
    a = r.standard_normal(shape).astype(np.float32)
    nodes = [N("Exp", ["a"], ["e"]), N("Neg", ["a"], ["n"]),
             N("Concat", ["e", "n", "e"], ["c"], axis=axis), N("Abs", ["c"], ["y"])]
    model = make_model(nodes, [("a", a)], ["y"])
    k = compile_to("kernel-ir", model, opt_level=0)  # no fusion of Exp/Neg into the copies
    # placed: e and n in their slabs, e's second copy stays
    assert len(slab_nests(k)) == (1 if placed else 0)
    same_as_onnxruntime_and_copies(model, [a], monkeypatch)


def test_integers_and_an_input_used_twice(monkeypatch):
    a = np.arange(24, dtype=np.int64).reshape(1, 2, 12)
    nodes = [N("Add", ["a", "a"], ["d"]), N("Concat", ["d", "d"], ["c"], axis=1),
             N("Mul", ["c", "c"], ["y"])]
    model = make_model(nodes, [("a", a)], ["y"])
    same_as_onnxruntime_and_copies(model, [a], monkeypatch)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3), st.booleans()),
                min_size=1, max_size=4),
       st.integers(0, 10_000))
def test_random_concat_chains_agree(layers, seed):
    """Chains of Concats over computed tensors, some appended twice or to two Concats: the
    placing plan gives the copying plan's bits and onnxruntime's answer."""
    r = np.random.default_rng(seed)
    x = r.standard_normal((1, 6, 4)).astype(np.float32)
    nodes, inits, feats, made = [], [], "x", []
    for k, (start, width, again) in enumerate(layers):
        inits += [(f"s{k}", np.array([start], np.int64)),
                  (f"e{k}", np.array([start + width], np.int64)), (f"ax{k}", np.array([1]))]
        nodes += [N("Slice", ["x", f"s{k}", f"e{k}", f"ax{k}"], [f"t{k}"]),
                  N("Exp", [f"t{k}"], [f"h{k}"])]
        extra = [made[-1]] if again and made else []
        nodes.append(N("Concat", [feats, f"h{k}", *extra], [f"f{k}"], axis=1))
        made.append(f"h{k}")
        feats = f"f{k}"
    nodes.append(N("Softsign", [feats], ["y"]))
    model = make_model(nodes, [("x", x)], ["y"], inits)
    with pytest.MonkeyPatch.context() as mp:
        same_as_onnxruntime_and_copies(model, [x], mp)
