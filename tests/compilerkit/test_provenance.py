"""Op provenance: which lines of each stage came from which ONNX node, checked on a 2-node model
(MatMul then Relu) whose listings are small enough to count by hand, and on hand-written asm and
PTX snippets."""

import os
import sys

import numpy as np
import pytest
from onnx import helper

import compilerkit as ck
from compilerkit.dialects import krnl
from compilerkit.provenance import (
    asm_function_lines,
    kernel_ops,
    label,
    merge,
    nodes_of_function,
    provenance,
    ptx_function_lines,
)
from compilerkit.views import ir_view_data

sys.path.insert(0, os.path.dirname(__file__))
from ckhelpers import make_model  # noqa: E402


def two_nodes():
    x = np.zeros((2, 4), np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["y"], name="relu")]
    return make_model(nodes, [("x", x)], ["y"], [("w", np.ones((4, 3), np.float32))])


@pytest.fixture(scope="module")
def compiled():
    return ck.compile(two_nodes(), opt_level=3)


def lines_of(text, ranges):
    rows = text.splitlines()
    return [rows[n - 1] for a, b in ranges for n in range(a, b + 1)]


def test_onnx_ir_one_line_per_node(compiled):
    p = provenance(compiled)
    assert list(p) == ["mm", "relu"]
    # builtin.module, func.func, the weight's onnx.Constant, then the two nodes.
    assert p["mm"]["onnx-ir"] == [(4, 4)] and p["relu"]["onnx-ir"] == [(5, 5)]


def test_kernel_ir_ranges_cover_each_nodes_ops(compiled):
    text = compiled.stages["kernel-ir"]
    p = provenance(compiled)
    # mm: its alloc (line 4), loop handles, two unroll hints, the zero-fill nest and the
    # wrapped matmul nest, which closes on line 26; relu: handles, hints, one nest (27-36).
    assert p["mm"]["kernel-ir"] == [(4, 26)]
    assert p["relu"]["kernel-ir"] == [(27, 36)]
    mm = lines_of(text, p["mm"]["kernel-ir"])
    assert '"krnl.alloc"' in mm[0] and 'onnx_node = "mm"' in mm[0]
    assert sum('"krnl.unroll"' in t for t in mm) == 2  # untagged, but between mm's ops
    assert '"krnl.matmul"' in "\n".join(mm)
    relu = lines_of(text, p["relu"]["kernel-ir"])
    assert "arith.maximumf" in "\n".join(relu) and relu[-1].strip().startswith("})")
    # The global (a Constant, no node) and the return belong to nobody.
    assert '"krnl.global"' in text.splitlines()[2]


def test_llvm_and_asm_ranges_are_the_outlined_functions_and_their_calls(compiled):
    p = provenance(compiled)
    for node, fn in (("mm", "main_graph_1_mm"), ("relu", "main_graph_2_relu")):
        llvm = lines_of(compiled.stages["llvm-ir"], p[node]["llvm-ir"])
        assert llvm[0].strip().startswith("tail call") and f"@{fn}(" in llvm[0]  # the call
        assert llvm[1].startswith("define") and f"@{fn}(" in llvm[1]
        assert llvm[-1] == "}"
        assert not any("define" in t and fn not in t for t in llvm)  # not the micro-kernel
        asm = lines_of(compiled.stages["asm"], p[node]["asm"])
        assert asm[0].strip() == f"movabsq\t${fn}, %rax"  # main_graph loads its address
        assert f"{fn}:" in asm and asm[-1].strip().startswith(".size")
        assert "ck_matmul_f32_v8:" not in asm


def test_kernel_ir_tags_survive_a_round_trip(compiled):
    text = compiled.stages["kernel-ir"]
    again = ck.print_ir(ck.parse_ir(text))
    assert again == text
    module = ck.parse_ir(text)
    allocs = [op for op in module.walk() if isinstance(op, krnl.AllocOp)]
    assert [a.attributes["onnx_node"].data for a in allocs] == ["mm"]


def test_kernel_ops_groups_regions_by_depth():
    text = """builtin.module {
  func.func @main_graph() {
    %0 = "krnl.alloc"() {onnx_node = "a"} : () -> memref<2xf32>
    "krnl.unroll"(%1) : (!krnl.loop) -> ()
    "krnl.iterate"() ({
      "krnl.iterate"() ({
      }) {bounds = []} : () -> ()
    }) {bounds = [], onnx_node = "a"} : () -> ()
    "krnl.iterate"() ({
    }) {bounds = [], onnx_node = "b \\"q\\""} : () -> ()
    func.return
  }
}
"""
    assert kernel_ops(text) == [(3, 3, "a"), (4, 4, None), (5, 8, "a"), (9, 10, 'b "q"'),
                                (11, 11, None)]


ASM = """\t.text
\t.globl\tmain_graph
\t.type\tmain_graph,@function
main_graph:
\tmovabsq\t$main_graph_1_conv_a, %rax
\tcallq\t*%rax
.Lfunc_end0:
\t.size\tmain_graph, .Lfunc_end0-main_graph
\t.type\tmain_graph_1_conv_a,@function
main_graph_1_conv_a:
.LBB1_1:
\tretq
.Lfunc_end1:
\t.size\tmain_graph_1_conv_a, .Lfunc_end1-main_graph_1_conv_a
g_const:
\t.long\t1
"""


def test_asm_functions_and_references():
    assert asm_function_lines(ASM) == {"main_graph": (4, 8), "main_graph_1_conv_a": (10, 14)}
    p = provenance({"onnx-ir": '"onnx.Conv"(%x) {onnx_node_name = "conv/a"}', "asm": ASM})
    # The function, its .type line and the movabsq in main_graph; not .LBB or data labels.
    assert p["conv/a"]["asm"] == [(5, 5), (9, 14)]


PTX = """//
// .globl\tmain_graph_1_relu_0
.visible .entry main_graph_1_relu_0(
\t.param .u64 main_graph_1_relu_0_param_0
)
{
\tret;
}
.visible .entry main_graph_2_relu2(
)
{
}
"""


def test_ptx_kernels_map_to_nodes_with_their_suffix():
    assert ptx_function_lines(PTX) == {"main_graph_1_relu_0": (3, 8),
                                       "main_graph_2_relu2": (9, 12)}
    onnx = '"onnx.Relu"() {onnx_node_name = "relu"}\n"onnx.Relu"() {onnx_node_name = "relu2"}'
    p = provenance({"onnx-ir": onnx, "ptx": PTX})
    assert p["relu"]["ptx"] == [(2, 8)]   # the .globl comment names it too
    assert p["relu2"]["ptx"] == [(9, 12)]


def test_function_names_to_nodes():
    nodes = ["lenet/conv1", "lenet/conv1_1", "relu"]
    assert label("lenet/conv1") == "lenet_conv1"
    assert nodes_of_function("main_graph_3_lenet_conv1", nodes) == ["lenet/conv1"]
    # "_1" could be a GPU kernel suffix or part of the name: both nodes claim it.
    assert nodes_of_function("main_graph_4_lenet_conv1_1", nodes) == nodes[:2]
    assert nodes_of_function("ck_matmul_f32_v8", nodes) == []
    assert nodes_of_function("main_graph", nodes) == []


def test_merge():
    assert merge([5, 3, 4, 4, 9]) == [(3, 5), (9, 9)]
    assert merge([]) == []


def test_view_data_for_a_model(compiled):
    data = ir_view_data(compiled)
    assert list(data["stages"]) == ["onnx-ir", "kernel-ir", "llvm-ir", "asm"]
    assert data["nodes"] == [{"name": "mm", "op": "MatMul"}, {"name": "relu", "op": "Relu"}]
    assert data["ranges"]["relu"]["kernel-ir"] == [(27, 36)]


def test_provenance_needs_the_onnx_ir():
    with pytest.raises(ValueError, match="onnx-ir"):
        provenance({"kernel-ir": ""})


def test_real_ptx_of_a_gpu_compile_maps_every_node():
    # target="gpu" produces PTX on a machine without a GPU; every node's kernels are found in
    # it, and the lines found for a node really are its kernel's entry and body.
    model = ck.compile(two_nodes(), target="gpu", opt_level=3)
    ptx = model.stages["ptx"]
    p = provenance({"onnx-ir": model.stages["onnx-ir"], "ptx": ptx})
    for node in ("mm", "relu"):
        lines = lines_of(ptx, p[node]["ptx"])
        assert any(".entry" in line and f"_{node}" in line for line in lines), node
    relu_body = "\n".join(lines_of(ptx, p["relu"]["ptx"]))
    assert "max.f32" in relu_body or "setp" in relu_body  # a Relu computes a max or a compare
