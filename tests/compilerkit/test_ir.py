"""Both IR levels print as MLIR text and parse back to the same module; schedules show up in
the text and keep results right; buffer planning reuses memory."""

import os
import sys

import numpy as np
from onnx import helper

sys.path.insert(0, os.path.dirname(__file__))
from ckhelpers import check, make_model  # noqa: E402

import compilerkit as ck  # noqa: E402
from compilerkit.dialects import krnl  # noqa: E402


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
    # Block and permute the first elementwise nest by hand, unroll another.
    nests = [op for op in k.walk() if isinstance(op, krnl.IterateOp) and len(op.emitted) == 4]
    it = nests[0]
    block(it, 3, 3)          # n, c, h, w_o, w_i
    permute(it, [1, 0, 2, 3, 4])
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
    fn, arena, engine = be.load(mod, "main_graph")
    s = Session(fn, arena, [("x", x.shape, np.dtype(np.float32))],
                [("y", (1, 10), np.dtype(np.float32))], keep_alive=(engine, be))
    np.testing.assert_allclose(s.run(x)[0], ref[0], rtol=1e-5, atol=1e-6)


def test_arena_smaller_than_naive_and_stages_present():
    model, x = cnn()
    cm = ck.compile(model)
    assert list(cm.stages) == ["onnx-ir", "kernel-ir", "llvm-ir", "asm"]
    assert "define void @main_graph" in cm.stages["llvm-ir"] or "@main_graph" in cm.stages["llvm-ir"]
    assert cm.arena_bytes < cm.naive_bytes
    assert "ck_expf" in ck.to_llvm(ck.lower(ck.optimize_onnx(ck.import_onnx(model))))


def test_constants_are_typed_globals():
    model, _ = cnn()
    text = ck.to_llvm(ck.lower(ck.optimize_onnx(ck.import_onnx(model))))
    assert "x float] [float 0x" in text
