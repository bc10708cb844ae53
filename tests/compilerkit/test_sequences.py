"""Sequences and optionals resolved when compiling (compilerkit/frontend/sequences.py),
compared with onnxruntime on hand-built models: positions counted from the end, every form of
SplitToSequence, ConcatFromSequence with and without new_axis, SequenceMap, optionals; and the
clear errors for what cannot be known when compiling."""

import warnings

import numpy as np
import pytest
from ckhelpers import ort_run
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import compilerkit as ck

OPSET = 17


def model(nodes, inputs, outputs, inits=(), opset=OPSET):
    """inputs/outputs: [(name, elem type, shape or None)]; an output whose shape is the
    string "seq" is a sequence of that element type."""
    def vi(name, elem, shape):
        if shape == "seq":
            return helper.make_tensor_sequence_value_info(name, elem, None)
        return helper.make_tensor_value_info(name, elem, shape)
    g = helper.make_graph(nodes, "g", [vi(*i) for i in inputs], [vi(*o) for o in outputs],
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def run(m, *arrays):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ck.SpecializationWarning)
        return ck.compile(m, opt_level=0, asm=False).run(*arrays)


def same(got, ref):
    assert len(got) == len(ref)
    for g, r in zip(got, ref, strict=True):
        if isinstance(r, list):
            assert isinstance(g, list) and len(g) == len(r)
            for gi, ri in zip(g, r, strict=True):
                np.testing.assert_allclose(gi, ri, rtol=1e-6)
                assert gi.shape == np.asarray(ri).shape
        else:
            assert np.asarray(g).shape == np.asarray(r).shape
            np.testing.assert_allclose(g, r, rtol=1e-6)


rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3)).astype(np.float32)
Y = rng.standard_normal((2, 3)).astype(np.float32)
Z = rng.standard_normal((2, 3)).astype(np.float32)


def test_insert_erase_at_count_negative_positions_from_the_end():
    m = model([helper.make_node("SequenceConstruct", ["x", "y"], ["s1"]),
               helper.make_node("SequenceInsert", ["s1", "z", "p_ins"], ["s2"]),  # front
               helper.make_node("SequenceInsert", ["s2", "x"], ["s3"]),  # the back
               helper.make_node("SequenceErase", ["s3", "p_er"], ["s4"]),
               helper.make_node("SequenceAt", ["s4", "p_at"], ["a"]),
               helper.make_node("SequenceAt", ["s4", "zero"], ["b"]),
               helper.make_node("SequenceLength", ["s4"], ["n"])],
              [("x", T.FLOAT, [2, 3]), ("y", T.FLOAT, [2, 3]), ("z", T.FLOAT, [2, 3])],
              [("a", T.FLOAT, None), ("b", T.FLOAT, None), ("n", T.INT64, None)],
              [("p_ins", np.array(-2, np.int64)), ("p_er", np.array(-3, np.int64)),
               ("p_at", np.array(-1, np.int64)), ("zero", np.array(0, np.int32))])
    # [x, y] -> [z, x, y] -> [z, x, y, x] -> erase -3 (x) -> [z, y, x]: a = x, b = z, n = 3
    got, ref = run(m, X, Y, Z), ort_run(m, [X, Y, Z])
    same(got, ref)
    np.testing.assert_array_equal(got[0], X)
    assert int(got[2]) == 3


@pytest.mark.parametrize("split,keepdims,axis", [
    (None, 1, 1), (None, 0, -1),  # one piece per index, kept or squeezed
    (np.array(2, np.int64), 1, 1),  # chunks of 2, the last shorter (5 = 2 + 2 + 1)
    (np.array([1, 3, 1], np.int64), 0, 1),  # sizes given; keepdims ignored with a split
])
def test_split_to_sequence_forms_match_onnxruntime(split, keepdims, axis):
    x = rng.standard_normal((2, 5)).astype(np.float32)
    ins = ["x"] + (["split"] if split is not None else [])
    m = model([helper.make_node("SplitToSequence", ins, ["s"], axis=axis, keepdims=keepdims)],
              [("x", T.FLOAT, [2, 5])], [("s", T.FLOAT, "seq")],
              [("split", split)] if split is not None else [])
    got, ref = run(m, x), ort_run(m, [x])
    same(got, ref)  # the sequence output comes back as a list of arrays


def test_split_then_concat_round_trips_and_new_axis_stacks():
    x = rng.standard_normal((3, 4)).astype(np.float32)
    m = model([helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0),
               helper.make_node("ConcatFromSequence", ["s"], ["stacked"], axis=-1,
                                new_axis=1),
               helper.make_node("ConcatFromSequence", ["s"], ["joined"], axis=0)],
              [("x", T.FLOAT, [3, 4])], [("stacked", T.FLOAT, None),
                                         ("joined", T.FLOAT, None)])
    got, ref = run(m, x), ort_run(m, [x])
    same(got, ref)
    np.testing.assert_array_equal(got[0], x.T)  # new axis last: (4, 3)


def test_sequence_map_inlines_its_body_per_element_with_an_extra_tensor():
    body = helper.make_graph(
        [helper.make_node("Add", ["e", "t"], ["u"]), helper.make_node("Shape", ["u"], ["sh"])],
        "body", [helper.make_tensor_value_info("e", T.FLOAT, None),
                 helper.make_tensor_value_info("t", T.FLOAT, None)],
        [helper.make_tensor_value_info("u", T.FLOAT, None),
         helper.make_tensor_value_info("sh", T.INT64, None)])
    m = model([helper.make_node("SequenceConstruct", ["x", "y"], ["s"]),
               helper.make_node("SequenceMap", ["s", "z"], ["us", "shapes"], body=body),
               helper.make_node("ConcatFromSequence", ["us"], ["u"], axis=0)],
              [("x", T.FLOAT, [2, 3]), ("y", T.FLOAT, [2, 3]), ("z", T.FLOAT, [2, 3])],
              [("u", T.FLOAT, None), ("shapes", T.INT64, "seq")])
    got, ref = run(m, X, Y, Z), ort_run(m, [X, Y, Z])
    same(got, ref)
    np.testing.assert_allclose(got[0], np.concatenate([X + Z, Y + Z]), rtol=1e-6)


def test_optionals_known_when_compiling():
    tensor_type = helper.make_tensor_type_proto(T.FLOAT, [2, 3])
    m = model([helper.make_node("Optional", ["x"], ["o"]),
               helper.make_node("Optional", [], ["none"], type=tensor_type),
               helper.make_node("OptionalHasElement", ["o"], ["has"]),
               helper.make_node("OptionalHasElement", ["none"], ["has_none"]),
               helper.make_node("OptionalGetElement", ["o"], ["e"]),
               helper.make_node("Add", ["e", "x"], ["twice"])],
              [("x", T.FLOAT, [2, 3])],
              [("has", T.BOOL, None), ("has_none", T.BOOL, None), ("twice", T.FLOAT, None)],
              opset=18)
    got, ref = run(m, X), ort_run(m, [X])
    same(got, ref)
    assert bool(got[0]) and not bool(got[1])


def test_a_sequence_input_is_specialised_on_its_length():
    m = model([helper.make_node("SequenceInsert", ["s", "x"], ["s2"]),
               helper.make_node("ConcatFromSequence", ["s2"], ["out"], axis=0)],
              [("s", T.FLOAT, "seq"), ("x", T.FLOAT, [2, 3])], [("out", T.FLOAT, None)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ck.SpecializationWarning)
        cm = ck.compile(m, opt_level=0, asm=False)
        for seq in ([Y], [Y, Z], [Y]):
            got = cm.run(seq, X)
            np.testing.assert_array_equal(got[0], np.concatenate(seq + [X]))
    assert cm.compiles == 2  # lengths 1 and 2; the third run reuses the first form
    with pytest.raises(ck.InputError, match="'s' is a sequence: give a list"):
        cm.run(Y, X)


# ---- what cannot be known when compiling: clear errors ----------------------------------------

def test_a_position_computed_from_data_is_refused_naming_node_and_input():
    m = model([helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
               helper.make_node("ReduceMax", ["x"], ["mx"], keepdims=0),
               helper.make_node("Cast", ["mx"], ["pos"], to=T.INT64),
               helper.make_node("SequenceAt", ["s", "pos"], ["out"], name="pick")],
              [("x", T.FLOAT, [2, 3])], [("out", T.FLOAT, None)])
    with pytest.raises(ck.UnsupportedOpError, match=r"node 'pick' \(SequenceAt\): input 'pos'"):
        ck.import_onnx(m)
    # compile() specialises on x instead, whose value decides the position: still right.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ck.SpecializationWarning)
        cm = ck.compile(m, opt_level=0, asm=False)
        x = np.zeros((2, 3), np.float32)
        x[0, 0] = 1.0  # position 1
        np.testing.assert_array_equal(cm.run(x)[0], x)
        with pytest.raises(ck.ModelError, match="position 5 is out of range"):
            cm.run(x * 5)


def test_out_of_range_position_and_empty_concat_are_model_errors():
    m = model([helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
               helper.make_node("SequenceAt", ["s", "p"], ["out"], name="at")],
              [("x", T.FLOAT, [2, 3])], [("out", T.FLOAT, None)],
              [("p", np.array(2, np.int64))])
    with pytest.raises(ck.ModelError, match=r"'at' \(SequenceAt\): position 2 is out of "
                                            r"range \[-2, 1\]"):
        run(m, X)
    m = model([helper.make_node("SequenceEmpty", [], ["s"]),
               helper.make_node("ConcatFromSequence", ["s"], ["out"], axis=0, name="cat")],
              [("x", T.FLOAT, [2, 3])], [("out", T.FLOAT, None)])
    with pytest.raises(ck.ModelError, match=r"'cat' \(ConcatFromSequence\): the sequence is "
                                            "empty"):
        run(m, X)


def test_split_sizes_that_do_not_add_up_are_a_model_error():
    m = model([helper.make_node("SplitToSequence", ["x", "split"], ["s"], axis=1, name="sp"),
               helper.make_node("SequenceLength", ["s"], ["n"])],
              [("x", T.FLOAT, [2, 3])], [("n", T.INT64, None)],
              [("split", np.array([1, 1], np.int64))])
    with pytest.raises(ck.ModelError, match=r"'sp' \(SplitToSequence\): split \[1, 1\] must"):
        run(m, X)


def test_the_ir_functions_take_and_return_tensors_only():
    """import_onnx makes one IR function of tensors: a sequence graph output or input is
    refused there, pointing at compile (which returns a list / specialises)."""
    m = model([helper.make_node("SequenceConstruct", ["x"], ["s"])],
              [("x", T.FLOAT, [2, 3])], [("s", T.FLOAT, "seq")])
    with pytest.raises(ck.UnsupportedOpError, match="graph output 's' is a sequence.*list"):
        ck.import_onnx(m)
    m = model([helper.make_node("SequenceLength", ["s"], ["n"])],
              [("s", T.FLOAT, "seq")], [("n", T.INT64, None)])
    with pytest.raises(ck.UnsupportedOpError, match="graph input 's' is a sequence"):
        ck.import_onnx(m)


def test_a_model_without_sequences_is_left_as_it_came():
    from compilerkit.frontend.sequences import rewrite

    m = model([helper.make_node("Relu", ["x"], ["y"])], [("x", T.FLOAT, [2])],
              [("y", T.FLOAT, None)])
    out, layout = rewrite(m)
    assert out is m and layout == [("tensor", ["y"])]


def test_a_sequence_made_by_control_flow_is_refused_naming_its_node():
    """An If whose branches build sequences: compilerkit resolves sequences only through the
    sequence ops, so it names the node rather than misreading the output."""
    def branch(n):
        return helper.make_graph([helper.make_node("SequenceConstruct", ["x"] * n, ["s"])],
                                 f"b{n}", [], [helper.make_tensor_sequence_value_info(
                                     "s", T.FLOAT, None)])
    m = model([helper.make_node("If", ["c"], ["res"], then_branch=branch(1),
                                else_branch=branch(2), name="choose")],
              [("c", T.BOOL, []), ("x", T.FLOAT, [2, 3])], [("res", T.FLOAT, "seq")])
    with pytest.raises(ck.UnsupportedOpError,
                       match=r"graph output 'res' is a sequence made by node 'choose' \(If\)"):
        run(m, np.array(True), X)
