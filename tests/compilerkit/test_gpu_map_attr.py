"""The GPU mapping as a structured Kernel IR attribute, `#krnl.gpu_map<...>`: written by the
gpu-map pass, printed and parsed back, refused by its verifier when it is nonsense, and what the
GPU code generator runs (a hand-edited block or tile shows in the launches and, as NVVM's
`reqntid`, in the LLVM IR and PTX). Needs no device: only the emitted code is read."""

import re

import mlsys_datasets
import pytest
from onnx import TensorProto, helper
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException

import compilerkit as ck
from compilerkit.backends import get_backend
from compilerkit.backends.gpu import ptx_kernel
from compilerkit.codegen.gpu import emit_gpu
from compilerkit.dialects.krnl import GpuMapAttr, IterateOp
from compilerkit.ir import context
from compilerkit.krnl_passes import gpu_map as gpu_map_pass


def sum_and_relu():
    """ReduceSum over axis 1 and Relu of one [4, 50] input: 200 points per elementwise nest."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 50])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 50])
    g = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1, name="sum"),
         helper.make_node("Relu", ["x"], ["z"], name="relu")], "g", [x], [y, z],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [1])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def gpu_kernel_ir(model, target=None):
    m = ck.import_onnx(model)
    ck.optimize_onnx(m)
    return ck.lower(m, 3, target or get_backend("gpu").target)


@pytest.fixture(scope="module")
def backend():
    return get_backend("gpu")


@pytest.fixture(scope="module")
def kir(backend):
    return gpu_kernel_ir(sum_and_relu(), backend.target)


def edited(kir, old, new):
    text = ck.print_ir(kir)
    assert text.count(old) == 1, old
    return ck.parse_ir(text.replace(old, new), resources_from=kir)


def ptx_of(emitter, backend):
    _, mod = backend.optimize(str(emitter.module), 3)
    return backend.assembly(mod, 3)


RELU = "#krnl.gpu_map<flat, loops = [0, 1], block = 224>"


def test_the_pass_writes_a_structured_attribute(kir):
    text = ck.print_ir(kir)
    # Relu: both loops are threads; 200 points need 7 warps of 32 (224 threads), one block.
    assert f"gpu_map = {RELU}" in text
    # ReduceSum's accumulation nest (4 x 50, storing y[i, 0]): only the row loop is threads.
    acc = [op for op in gpu_map_pass.kernels(kir) if op.bound_list() == [(0, 4), (0, 50)]
           and op.attributes["onnx_node"].data == "sum"]
    assert [op.attributes["gpu_map"] for op in acc] == [GpuMapAttr("flat", [0], block=32)]


def test_round_trip_through_text(kir):
    text = ck.print_ir(kir)
    again = ck.parse_ir(text, resources_from=kir)
    assert ck.print_ir(again) == text
    before = [op.attributes["gpu_map"] for op in gpu_map_pass.kernels(kir)]
    after = [op.attributes["gpu_map"] for op in gpu_map_pass.kernels(again)]
    assert after == before and all(isinstance(a, GpuMapAttr) for a in after)


@pytest.mark.parametrize("text,why", [
    ("#krnl.gpu_map<flat, loops = [0], block = 0>", "block must be 1..1024"),
    ("#krnl.gpu_map<flat, loops = [0], block = 2048>", "block must be 1..1024"),
    ("#krnl.gpu_map<flat, loops = [], block = 32>", "maps no loop"),
    ("#krnl.gpu_map<flat, loops = [1, 1], block = 32>", "distinct"),
    ("#krnl.gpu_map<flat, loops = [-1], block = 32>", "distinct"),
    ("#krnl.gpu_map<matmul, tile = 64>", "tile x tile <= 1024"),
    ("#krnl.gpu_map<matmul, tile = 0>", "tile must be >= 1"),
    ("#krnl.gpu_map<matmul, block = 16, tile = 16>", "no block size"),
    ("#krnl.gpu_map<flat, loops = [0], block = 32, tile = 4>", "no tile"),
    ("#krnl.gpu_map<serial, loops = [0]>", "maps no loop"),
    ("#krnl.gpu_map<split, loops = []>", "splits no loop"),
    ("#krnl.gpu_map<warp>", "kind must be one of"),
])
def test_verifier_refuses_nonsense(text, why):
    with pytest.raises(VerifyException, match=re.escape(why)):
        Parser(context(), text).parse_attribute()


def test_malformed_text_is_a_parse_error():
    for text in ("#krnl.gpu_map<flat, loops = [0], block = 32, block = 64>",
                 "#krnl.gpu_map<flat, loops = [0], blocks = 32>"):
        with pytest.raises(ParseError):
            Parser(context(), text).parse_attribute()


def test_a_module_with_a_zero_block_does_not_parse(kir):
    with pytest.raises(VerifyException, match="block must be 1..1024"):
        edited(kir, RELU, RELU.replace("224", "0"))


def test_the_module_verifier_checks_loop_positions(kir):
    bad = edited(kir, RELU, "#krnl.gpu_map<flat, loops = [0, 2], block = 32>")
    with pytest.raises(VerifyException, match="krnl.iterate has 2 loops.*names loop 2"):
        bad.verify()


def launch(emitter, node, mapping_prefix="flat"):
    hits = [k for k in emitter.launches if k.node == node and k.mapping.startswith(mapping_prefix)]
    assert len(hits) == 1, [k.mapping for k in emitter.launches]
    return hits[0]


def test_codegen_runs_the_pass_mapping(kir, backend):
    e = emit_gpu(kir, backend.target)
    relu = launch(e, "relu")
    assert (relu.grid, relu.block) == ((1, 1, 1), (224, 1, 1))
    assert '!"reqntidx", i32 224' in str(e.module)
    assert ".reqntid 224, 1, 1" in ptx_kernel(ptx_of(e, backend), relu.name)


def test_codegen_honours_a_hand_edited_block(kir, backend):
    e = emit_gpu(edited(kir, RELU, RELU.replace("224", "64")), backend.target)
    relu = launch(e, "relu")
    # 200 points in blocks of 64: 4 blocks (the last one a quarter full).
    assert (relu.grid, relu.block) == ((4, 1, 1), (64, 1, 1))
    assert relu.mapping == "flat(0,1) block 64"
    llvm = str(e.module)
    assert re.search(rf'@"?{relu.name}"?, !"reqntidx", i32 64 }}', llvm)
    kernel = ptx_kernel(ptx_of(e, backend), relu.name)
    assert ".reqntid 64, 1, 1" in kernel
    # Threads past the 200 points leave: the bound check stays.
    assert re.search(r'icmp slt i64 %"[.\w]+", 200\n', llvm)


def test_codegen_honours_a_hand_edited_loop_choice(kir, backend):
    # Map only the row loop of Relu: 4 threads, each running the 50 columns as a loop.
    e = emit_gpu(edited(kir, RELU, "#krnl.gpu_map<flat, loops = [0], block = 32>"),
                 backend.target)
    relu = launch(e, "relu")
    assert (relu.grid, relu.block, relu.mapping) == ((1, 1, 1), (32, 1, 1), "flat(0) block 32")


def test_codegen_honours_a_hand_edited_matmul_tile(backend):
    k = gpu_kernel_ir(str(mlsys_datasets.onnx_path("matmul_16x16")), backend.target)
    text = ck.print_ir(k)
    assert text.count("#krnl.gpu_map<matmul, tile = 16>") == 1
    e = emit_gpu(edited(k, "#krnl.gpu_map<matmul, tile = 16>", "#krnl.gpu_map<matmul, tile = 8>"),
                 backend.target)
    mm = [x for x in e.launches if x.mapping.startswith("matmul")]
    # A 16 x 16 result in 8 x 8 tiles: a 2 x 2 grid of 8 x 8 blocks, 8 x 8 shared tiles.
    assert [(x.grid, x.block) for x in mm] == [((2, 2, 1), (8, 8, 1))]
    assert "[64 x float]" in str(e.module) and "[256 x float]" not in str(e.module)
    assert ".reqntid 8, 8, 1" in ptx_kernel(ptx_of(e, backend), mm[0].name)


def test_codegen_refuses_a_mapping_that_would_race(kir, backend):
    acc = "#krnl.gpu_map<flat, loops = [0], block = 32>"
    bad = edited(kir, f'onnx_node = "sum", gpu_map = {acc}',
                 'onnx_node = "sum", gpu_map = #krnl.gpu_map<flat, loops = [0, 1], block = 32>')
    with pytest.raises(ValueError, match=r"node 'sum'.*loop 1 write the same elements"):
        emit_gpu(bad, backend.target)


@pytest.mark.parametrize("attr,why", [
    ("#krnl.gpu_map<flat, loops = [0, 2], block = 32>", r"loop\(s\) \[2\], but the nest has 2"),
    ("#krnl.gpu_map<matmul, tile = 16>", "not a float krnl.matmul nest"),
    ("#krnl.gpu_map<split, loops = [0, 1]>", "can be split"),
])
def test_codegen_refuses_a_mapping_that_does_not_fit(kir, backend, attr, why):
    with pytest.raises(ValueError, match=why):
        emit_gpu(edited(kir, RELU, attr), backend.target)


def test_codegen_refuses_a_module_without_mappings(backend):
    host_scheduled = gpu_kernel_ir(sum_and_relu(), get_backend("host").target)
    with pytest.raises(ValueError, match="no #krnl.gpu_map attribute.*run the gpu-map pass"):
        emit_gpu(host_scheduled, backend.target)


def test_codegen_reads_the_attribute_and_never_plans(kir, backend, monkeypatch):
    def no_planning(it):
        raise AssertionError("codegen called plan()")

    monkeypatch.setattr(gpu_map_pass, "plan", no_planning)
    e = emit_gpu(kir, backend.target)
    assert len(e.launches) == len([op for op in gpu_map_pass.kernels(kir)
                                   if isinstance(op, IterateOp)])


def test_the_same_module_gives_the_same_code(kir, backend):
    assert str(emit_gpu(kir, backend.target).module) == str(emit_gpu(kir, backend.target).module)
