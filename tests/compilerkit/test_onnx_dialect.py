"""The typed `onnx` dialect generated from ONNX's schemas: named operands (optional ones typed
none, the last one variadic), typed attributes with the schema's defaults, Pure, the verifier
from the type constraints, every operator representable and refused only at lowering."""

import numpy as np
import onnx
import pytest
from ckhelpers import check, make_model
from onnx import TensorProto, helper
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, NoneType, i64
from xdsl.traits import Pure
from xdsl.utils.exceptions import DiagnosticException

import compilerkit as ck
from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import import_model
from compilerkit.ir import parse_ir, print_ir
from compilerkit.lowering import SUPPORTED
from compilerkit.onnx_passes import remove_dead_code
from compilerkit.onnx_passes.single_node import main_func

F32 = np.float32


def ops_of(module, name):
    return [op for op in main_func(module).body.block.ops if op.name == f"onnx.{name}"]


def one(module, name):
    (op,) = ops_of(module, name)
    return op


def ir(body: str, args: str, opset: int = 13) -> str:
    return (f"builtin.module {{\n  func.func @main_graph({args}) attributes "
            f"{{onnx_opset = {opset} : i64}} {{\n{body}\n    func.return\n  }}\n}}\n")


def refused(text: str, *needles: str) -> str:
    m = parse_ir(text)
    with pytest.raises(DiagnosticException) as e:
        m.verify()
    msg = str(e.value)
    for n in needles:
        assert n in msg, (n, msg)
    return msg


# ---- one class per schema ----------------------------------------------------------------------

def test_one_op_class_per_default_domain_operator():
    names = {s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == ""}
    assert len(names) == 203  # onnx 1.23; the dialect follows the installed package
    assert set(onnx_d.OPS) == names | {"NoValue"}
    for name, cls in onnx_d.OPS.items():
        assert cls.name == f"onnx.{name}"
        assert cls.has_trait(Pure)  # ONNX operators have no side effects


def test_conv_operands_are_named_and_bias_is_optional():
    m = import_model(make_model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="c")],
        [("x", np.zeros((1, 2, 5, 5), F32))], ["y"], [("w", np.zeros((3, 2, 3, 3), F32))]))
    conv = one(m, "Conv")
    defs = [name for name, _ in type(conv).get_irdl_definition().operands]
    assert defs == ["X", "W", "B"]
    assert conv.X is main_func(m).body.block.args[0]
    assert conv.W.owner.name == "onnx.Constant"
    assert isinstance(conv.B.type, NoneType) and conv.B.owner.name == "onnx.NoValue"
    assert len(conv.operands) == 3  # the absent bias is an operand, as in onnx-mlir


def test_concat_inputs_are_variadic_and_absent_outputs_typed_none():
    x = [(n, np.zeros((1, 2), F32)) for n in "abc"]
    m = import_model(make_model(
        [helper.make_node("Concat", ["a", "b", "c"], ["y"], axis=0, name="cat"),
         helper.make_node("Unsqueeze", ["y", "ax"], ["y4"], name="u"),
         helper.make_node("MaxPool", ["y4"], ["p"], kernel_shape=[1], name="mp")],
        x, ["p"], [("ax", np.array([0], np.int64))]))
    cat = one(m, "Concat")
    assert len(cat.inputs) == 3 and list(cat.inputs) == list(main_func(m).body.block.args)
    mp = one(m, "MaxPool")  # Y and the optional Indices, which the node does not produce
    assert len(mp.results) == 2 and isinstance(mp.Indices.type, NoneType)
    assert mp.Y.type.get_shape() == (1, 3, 2)


def test_attribute_defaults_come_from_the_schema_and_are_not_written():
    m = import_model(make_model(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="c"),
         helper.make_node("LeakyRelu", ["c"], ["y"], name="lr")],
        [("x", np.zeros((1, 1, 3, 3), F32))], ["y"], [("w", np.ones((1, 1, 1, 1), F32))]))
    conv, lr = one(m, "Conv"), one(m, "LeakyRelu")
    assert "group" not in conv.attributes and conv.group == IntegerAttr(1, i64)
    assert conv.auto_pad.data == "NOTSET"
    assert "alpha" not in lr.attributes
    assert isinstance(lr.alpha, FloatAttr) and lr.alpha.value.data == pytest.approx(0.01)
    assert onnx_d.get_attr(lr, "alpha", 0.5) == 0.5  # get_attr keeps the caller's default
    assert 'onnx_node_name = "lr"' in print_ir(m)  # extra attributes are still allowed


def test_every_op_class_round_trips_through_text():
    # Each class with a tensor for every input (two for a variadic one) and every output.
    lines, k = [], 0
    for name, cls in sorted(onnx_d.OPS.items()):
        d = cls.get_irdl_definition()
        n_in = sum(2 if type(o).__name__ == "VarOperandDef" else 1 for _, o in d.operands)
        n_out = sum(2 if type(r).__name__ == "VarResultDef" else 1 for _, r in d.results)
        if name == "NoValue":
            lines.append(f'    %r{k} = "onnx.NoValue"() : () -> none')
        else:
            outs = ", ".join(f"%r{k}_{j}" for j in range(n_out))
            lhs = f"{outs} = " if n_out else ""
            ins = ", ".join(["%x"] * n_in)
            lines.append(f'    {lhs}"onnx.{name}"({ins}) {{onnx_node_name = "n{k}"}} : '
                         f'({", ".join(["tensor<2xf32>"] * n_in)}) -> '
                         f'({", ".join(["tensor<2xf32>"] * n_out)})')
        k += 1
    text = ir("\n".join(lines), "%x: tensor<2xf32>")
    m = parse_ir(text)
    ops = list(main_func(m).body.block.ops)[:-1]
    assert [type(op) for op in ops] == [onnx_d.OPS[n] for n in sorted(onnx_d.OPS)]
    again = print_ir(m)
    assert print_ir(parse_ir(again)) == again
    for op in ops:
        assert f'"{op.name}"' in again


# ---- the verifier ------------------------------------------------------------------------------

def test_element_type_outside_the_schema_is_refused_naming_node_and_operand():
    # Sqrt's T is float16/float/double/bfloat16 (hand-checked in onnx/defs/math/defs.cc).
    refused(ir('    %y = "onnx.Sqrt"(%x) {onnx_node_name = "sq"} : (tensor<3xi64>) -> '
               'tensor<3xi64>', "%x: tensor<3xi64>"),
            "node 'sq' (Sqrt)", "operand X", "tensor(int64)", "tensor(float)")
    # Relu accepts int64 since opset 14 (Relu-14 added the integer types), never bool: the
    # verifier reads the schema at the model's opset.
    relu = '    %y = "onnx.Relu"(%x) {onnx_node_name = "r"} : (tensor<3xTY>) -> tensor<3xTY>'
    parse_ir(ir(relu.replace("TY", "i64"), "%x: tensor<3xi64>", opset=14)).verify()
    refused(ir(relu.replace("TY", "i64"), "%x: tensor<3xi64>", opset=13), "node 'r' (Relu)",
            "tensor(int64)")
    refused(ir(relu.replace("TY", "i1"), "%x: tensor<3xi1>", opset=14), "node 'r' (Relu)",
            "tensor(bool)")


def test_types_follow_the_models_opset():
    # Dropout's mask has the input's type T before opset 10 and bool since.
    def dropout(mask, opset):
        return ir('    %n = "onnx.NoValue"() : () -> none\n'
                  '    %y, %m = "onnx.Dropout"(%x, %n, %n) {onnx_node_name = "d"} : '
                  f'(tensor<2xf32>, none, none) -> (tensor<2xf32>, tensor<2x{mask}>)',
                  "%x: tensor<2xf32>", opset=opset)
    parse_ir(dropout("f32", 9)).verify()
    parse_ir(dropout("i1", 13)).verify()
    refused(dropout("f32", 13), "node 'd' (Dropout)", "result mask", "tensor(bool)")


def test_values_of_one_type_letter_must_agree():
    refused(ir('    %y = "onnx.Add"(%a, %b) {onnx_node_name = "add"} : (tensor<3xf32>, '
               'tensor<3xf64>) -> tensor<3xf32>', "%a: tensor<3xf32>, %b: tensor<3xf64>"),
            "node 'add' (Add)", "operand B has", "tensor(double)",
            "tensor(float) like input 0 (A)", "type T")
    refused(ir('    %y = "onnx.Add"(%a, %a) {onnx_node_name = "add"} : (tensor<3xf32>, '
               'tensor<3xf32>) -> tensor<3xi32>', "%a: tensor<3xf32>"),
            "result C has", "like input 0 (A)")


def test_required_input_and_the_models_opset():
    nv = '    %n = "onnx.NoValue"() : () -> none\n'
    body = nv + ('    %y = "onnx.Unsqueeze"(%x, %n) {onnx_node_name = "u", axes = [0 : i64]} : '
                 '(tensor<3xf32>, none) -> tensor<1x3xf32>')
    parse_ir(ir(body, "%x: tensor<3xf32>", opset=11)).verify()  # axes was an attribute
    refused(ir(body, "%x: tensor<3xf32>", opset=13), "node 'u' (Unsqueeze)",
            "operand axes is required")
    body = ('    %y = "onnx.Unsqueeze"(%x, %a) {onnx_node_name = "u"} : (tensor<3xf32>, '
            'tensor<1xi64>) -> tensor<1x3xf32>')
    refused(ir(body, "%x: tensor<3xf32>, %a: tensor<1xi64>", opset=11), "does not exist")


def test_required_attribute_is_checked():
    # Cast's `to` is required (onnx/defs/tensor/defs.cc); Relu has no required attribute.
    refused(ir('    %y = "onnx.Cast"(%x) {onnx_node_name = "c"} : (tensor<3xf32>) -> '
               'tensor<3xi64>', "%x: tensor<3xf32>"), "node 'c' (Cast)",
            "attribute to is required")
    parse_ir(ir('    %y = "onnx.Cast"(%x) {to = 7 : i64} : (tensor<3xf32>) -> tensor<3xi64>',
                "%x: tensor<3xf32>")).verify()


def test_older_opsets_keep_their_node_layout():
    # Resize-10 has (X, scales); the newest Resize has (X, roi, scales, sizes).
    m = import_model(make_model(
        [helper.make_node("Resize", ["x", "s"], ["y"], name="rs")],
        [("x", np.zeros((1, 1, 2, 2), F32))], ["y"],
        [("s", np.array([1, 1, 2, 2], F32))], opset=10))
    rs = one(m, "Resize")
    assert isinstance(rs.roi.type, NoneType) and isinstance(rs.sizes.type, NoneType)
    assert rs.scales.owner.name == "onnx.Constant"
    assert onnx_d.onnx_inputs(rs) == [rs.X, rs.scales]
    assert rs.Y.type.get_shape() == (1, 1, 4, 4)  # ONNX's inference saw the scales


def test_arranged_inputs_give_back_the_nodes_inputs_at_every_opset():
    # For every operator and every opset version of it: place k inputs (all present) in the
    # newest schema's slots, then read them back as the node at that opset has them.
    from xdsl.dialects import func
    from xdsl.dialects.builtin import TensorType, f32
    from xdsl.ir import Block, Region

    from compilerkit.dialects.onnx_schema import _schema_at

    seen, unplaced = set(), set()
    for name in sorted(onnx_d.INFO):
        kind = name.split(".", 1)[1]
        for opset in range(7, onnx.defs.onnx_opset_version() + 1):
            old = _schema_at(kind, opset)
            if old is None or (kind, old.since_version) in seen:
                continue
            seen.add((kind, old.since_version))
            if old.inputs and onnx_d.input_slots(kind, opset) == ():
                unplaced.add((kind, opset))
                continue
            n = len(old.inputs) + (1 if old.inputs and str(
                old.inputs[-1].option).endswith("Variadic") else 0)
            block = Block(arg_types=[TensorType(f32, [k + 1]) for k in range(n)])
            none = onnx_d.create("NoValue", [], [NoneType()])
            block.add_op(none)
            args = list(block.args)
            operands = onnx_d.arrange_inputs(kind, opset, args, none.results[0])
            op = onnx_d.create(kind, operands, [])
            block.add_op(op)
            f = func.FuncOp("f", ([a.type for a in args], []), Region(block))
            f.attributes["onnx_opset"] = IntegerAttr(opset, i64)
            assert onnx_d.onnx_inputs(op) == args, (kind, opset)
    # Scan-8's first input, sequence_lens, was dropped in Scan-9 (and Scan needs subgraphs).
    assert unplaced == {("Scan", 8)}


# ---- every operator imports; lowering refuses what it cannot compile ---------------------------

@pytest.mark.parametrize("node", [
    helper.make_node("RandomUniformLike", ["x"], ["y"], name="ru"),
    helper.make_node("Multinomial", ["x"], ["y"], name="mn"),
])
def test_unlowered_op_imports_and_is_refused_at_lowering(node):
    m = make_model([node], [("x", np.ones((2, 3), F32))], ["y"])
    module = import_model(m)
    assert one(module, node.op_type).attributes["onnx_node_name"].data == node.name
    with pytest.raises(ck.UnsupportedOpError) as e:
        ck.compile(m, asm=False)
    assert str(e.value) == (f"node {node.name!r}: op {node.op_type!r} cannot be lowered to "
                            f"Kernel IR; supported ops: {', '.join(SUPPORTED)}")


def test_a_name_outside_onnx_is_refused_at_import():
    m = make_model([helper.make_node("NoSuchOp", ["x"], ["y"], name="z")],
                   [("x", np.ones(2, F32))], ["y"])
    with pytest.raises(ck.UnsupportedOpError, match="'z'.*'NoSuchOp'.*not an operator"):
        import_model(m)


def test_passes_leave_ops_they_do_not_know_alone():
    # TopK: shape inference types it, folding computes it (constant input), validation and
    # dead code pass over it; Hardmax stays for lowering to refuse.
    m = make_model([helper.make_node("TopK", ["c", "k"], ["v", "i"], name="tk"),
                    helper.make_node("Hardmax", ["x"], ["h"], name="hm"),
                    helper.make_node("Add", ["h", "v"], ["y"], name="add")],
                   [("x", np.ones((1, 2), F32))], ["y", "i"],
                   [("c", np.array([[3, 1, 2]], F32)), ("k", np.array([2], np.int64))])
    module = import_model(m)
    from compilerkit.passes import onnx_pipeline, run_passes
    run_passes(module, onnx_pipeline())
    assert not ops_of(module, "TopK")  # folded: its values were constants
    assert one(module, "Hardmax").results[0].type.get_shape() == (1, 2)


# ---- Pure, dead code, hand-written IR ----------------------------------------------------------

def test_dead_code_is_xdsls_and_removes_unused_chains():
    body = ('    %a = "onnx.Relu"(%x) : (tensor<3xf32>) -> tensor<3xf32>\n'
            '    %b = "onnx.Neg"(%a) : (tensor<3xf32>) -> tensor<3xf32>\n'
            '    %c = "onnx.Exp"(%x) : (tensor<3xf32>) -> tensor<3xf32>\n'
            '    func.return %c : tensor<3xf32>')
    text = ("builtin.module {\n  func.func @main_graph(%x: tensor<3xf32>) -> tensor<3xf32> "
            "{\n" + body + "\n  }\n}\n")
    m = parse_ir(text)
    assert remove_dead_code(m) == 2
    assert [op.name for op in main_func(m).body.block.ops] == ["onnx.Exp", "func.return"]


def test_short_hand_written_ops_are_refused_by_the_verifier():
    # ONNX lets a node leave out trailing optional inputs and outputs; the IR spells them out
    # (onnx.NoValue, results typed none), so the short form is an error, not a guess.
    text = ir('    %y = "onnx.Conv"(%x, %w) {onnx_node_name = "c"} : (tensor<1x1x3x3xf32>, '
              'tensor<1x1x1x1xf32>) -> tensor<1x1x3x3xf32>\n'
              '    %z = "onnx.Dropout"(%y) : (tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>',
              "%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x1x1xf32>")
    m = parse_ir(text)
    with pytest.raises(DiagnosticException, match="operand"):
        m.verify()


def test_typed_model_still_compiles_and_matches_onnxruntime():

    x = np.arange(-6, 6, dtype=F32).reshape(1, 3, 2, 2)
    m = make_model([helper.make_node("Conv", ["x", "w"], ["c"], name="c"),
                    helper.make_node("Clip", ["c", "", "hi"], ["y"], name="clip")],
                   [("x", x)], ["y"],
                   [("w", np.ones((2, 3, 1, 1), F32)), ("hi", np.array(2.0, F32))])
    check(m, [x])
    assert TensorProto.FLOAT == 1
