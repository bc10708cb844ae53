"""Both IR levels print as MLIR text and parse back to the same module; schedules show up in
the text and keep results right; buffer planning reuses memory."""

import re

import numpy as np
import pytest
from ckhelpers import check, make_model
from onnx import helper

import compilerkit as ck
from compilerkit.dialects import krnl


def cnn():
    r = np.random.default_rng(0)
    N = helper.make_node
    nodes = [N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), N("Relu", ["c"], ["r"]),
             N("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             N("Flatten", ["p"], ["f"]), N("Gemm", ["f", "fw", "fb"], ["g"], transB=1),
             N("Softmax", ["g"], ["y"])]
    inits = [("w", r.standard_normal((4, 1, 3, 3)).astype(np.float32)),
             ("fw", r.standard_normal((10, 64)).astype(np.float32)),
             ("fb", r.standard_normal(10).astype(np.float32))]
    x = r.standard_normal((1, 1, 8, 8)).astype(np.float32)
    return make_model(nodes, [("x", x)], ["y"], inits), x


def test_onnx_ir_round_trip():
    m = ck.import_onnx(cnn()[0])
    ck.optimize_onnx(m)
    text = ck.print_ir(m)
    assert "onnx.Conv" in text and "onnx.Gemm" in text
    assert ck.print_ir(ck.parse_ir(text)) == text


def test_kernel_ir_round_trip_with_schedule():
    m = ck.import_onnx(cnn()[0])
    ck.optimize_onnx(m)
    k = ck.lower(m, opt_level=3)
    text = ck.print_ir(k)
    assert "krnl.block" in text and "krnl.permute" in text and "krnl.matmul" in text
    assert ck.print_ir(ck.parse_ir(text)) == text


def test_hand_schedule_keeps_results():
    from compilerkit.krnl_passes import block, permute, plan_buffers, unroll
    model, x = cnn()
    ref = check(model, [x])
    m = ck.import_onnx(model)
    ck.optimize_onnx(m)
    k = ck.lower(m, opt_level=0)
    # Block and permute the MaxPool's window nest (per plane, over oh 4 x ow 4) by hand,
    # unroll another.
    nests = [op for op in k.walk() if isinstance(op, krnl.IterateOp)
             and op.bound_list() == [(0, 4), (0, 4)]]
    it = nests[0]
    block(it, 1, 3)          # h, w_o, w_i
    permute(it, [1, 0, 2])
    small = [op for op in k.walk() if isinstance(op, krnl.IterateOp)
             and op.bound_list()[0] == (0, 1)]
    unroll(small[0], 0)
    text = ck.print_ir(k)
    assert "krnl.block" in text and "krnl.unroll" in text
    k2 = ck.parse_ir(text, resources_from=k)
    plan_buffers(k2)
    from compilerkit.backends import get_backend
    from compilerkit.runtime import Session
    be = get_backend("host")
    _, mod = be.optimize(ck.to_llvm(k2, be.target), 2)
    fn, arena, engine, owner = be.load(mod, "main_graph")
    s = Session(fn, arena, [("x", x.shape, np.dtype(np.float32))],
                [("y", (1, 10), np.dtype(np.float32))], keep_alive=(engine, be), owner=owner)
    np.testing.assert_allclose(s.run(x)[0], ref[0], rtol=1e-5, atol=1e-6)


def test_arena_smaller_than_naive_and_stages_present():
    model, x = cnn()
    cm = ck.compile(model)
    assert list(cm.stages) == ["onnx-ir", "kernel-ir", "llvm-ir", "asm"]
    with pytest.raises(KeyError, match="no stage 'krnl'; this compile has onnx-ir, kernel-ir"):
        cm.stages["krnl"]
    assert cm.stages.get("krnl") is None and "krnl" not in cm.stages
    assert "@main_graph" in cm.stages["llvm-ir"]
    assert cm.arena_bytes < cm.naive_bytes
    assert "ck_expf" in ck.to_llvm(ck.lower(ck.optimize_onnx(ck.import_onnx(model))))


def test_constants_are_byte_globals():
    model, _ = cnn()
    text = ck.to_llvm(ck.lower(ck.optimize_onnx(ck.import_onnx(model))))
    # Weights are byte strings in the target's order (test_constant_bytes.py), not float lists.
    assert re.search(r'@"?g_\w+"? = internal (unnamed_addr )?constant \[\d+ x i8\] c"', text)
    assert not re.search(r"\[\d+ x float\] \[float", text)


def test_asm_stage_is_generated_on_first_access():
    model, x = cnn()
    cm = ck.compile(model)
    assert not cm.stages.computed("asm")
    asm = cm.stages["asm"]
    assert cm.stages.computed("asm") and cm.stages["asm"] is asm
    assert "main_graph:" in asm
    assert "asm" not in ck.compile(model, asm=False).stages


def test_one_llvm_function_per_onnx_node_and_one_shared_matmul_kernel():
    from compilerkit.views.show import asm_function, llvm_function, llvm_functions
    model, x = cnn()
    cm = ck.compile(model, opt_level=3)
    names = llvm_functions(cm.stages["llvm-ir"])
    kernels = [n for n in names if n.startswith("ck_matmul_")]
    assert len(kernels) == 1  # the Conv and the Gemm share it
    nests = [n for n in names if n.startswith("main_graph_") and n not in (
             "main_graph_arena_bytes", "main_graph_check_message")]
    # Conv (its Relu fused into the epilogue), MaxPool, Gemm, Softmax: one function each
    # (Flatten is a view, no loops).
    assert len(nests) == 4, nests
    body = llvm_function(cm.stages["llvm-ir"], kernels[0])
    assert "fmuladd" in body and body.startswith("define internal")
    assert asm_function(cm.stages["asm"], kernels[0]).startswith(kernels[0] + ":")


def test_compile_kernel_runs_a_hand_rescheduled_module():
    from ckhelpers import ort_run

    from compilerkit.krnl_passes import block, matmul_nests, permute
    model, x = cnn()
    ref = ort_run(model, [x])[0]
    k = ck.lower(ck.optimize_onnx(ck.import_onnx(model)), opt_level=2)
    for it, _ in matmul_nests(k):
        permute(it, [0, 2, 1])
        block(it, 2, 4)
    cm = ck.compile_kernel(k, opt_level=2)
    assert "krnl.block" in cm.stages["kernel-ir"] and "krnl.permute" in cm.stages["kernel-ir"]
    np.testing.assert_allclose(cm.run(x)[0], ref, rtol=1e-5, atol=1e-6)


def test_pool_output_size_drops_a_window_starting_in_the_right_padding():
    from compilerkit.onnx_passes.shape_inference import pool_output_size
    # in 7, k 2, s 2, pads 1+1, ceil: windows start at -1, 1, 3, 5, 7; 7 = in + pad_begin - 1
    # still starts inside (the last input row is 6, padded row 7 is the right padding): drop.
    assert pool_output_size(7, 2, 2, 1, 1, 1, 1) == 4
    assert pool_output_size(7, 2, 2, 1, 1, 1, 0) == 4
    assert pool_output_size(8, 3, 2, 1, 0, 0, 1) == 4  # (8-3)/2 = 2.5 -> 3 + 1, kept
    assert pool_output_size(5, 2, 2, 1, 1, 1, 1) == 3


def test_dilated_average_pool_counts_taps():
    from onnx import helper as h

    from compilerkit.lowering.pool import window_counts
    m = ck.optimize_onnx(ck.import_onnx(make_model(
        [h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3], dilations=[2], pads=[2, 2])],
        [("x", np.zeros((1, 1, 5), np.float32))], ["y"], opset=19)))
    op = next(o for o in m.walk() if o.name == "onnx.AveragePool")
    # taps at start + {0, 2, 4} for start = -2, -1, 0, 1, 2 (output 5): inside [0, 5)
    counts = window_counts(op, [5], [5], [1], [2], [2])
    np.testing.assert_array_equal(counts, [2, 2, 3, 2, 2])
