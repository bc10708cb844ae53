"""Every krnl.load / krnl.store / krnl.matmul stays inside its buffer (dialects/krnl_ranges.py):
the verifier bounds each index from the loops' ranges and refuses hand-edited Kernel IR whose
loops run past a buffer (it used to pass and write out of bounds: a segfault, or a corrupted
heap for a small overrun, with both code generators); an index computed from data is checked
at run time (krnl_passes/guard_indices.py): a RunError naming the op and the buffer. Also the
schedule passes' numeric options and the thread count, refused with a ValueError naming them
on every route (compile, compilerkit.opt, Python)."""

import itertools
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from ckhelpers import make_model, skip_unless_codegen_runs
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import compilerkit as ck
from compilerkit.backends.base import get_backend
from compilerkit.ir import parse_ir, print_ir
from compilerkit.opt import main as opt_main

CODEGENS = ["llvm", "loopnest"]


RELU = make_model([helper.make_node("Relu", ["x"], ["y"], name="act")],
                  [("x", np.zeros(8, np.float32))], ["y"])


def relu_ir() -> str:
    return print_ir(ck.compile_to("kernel-ir", RELU, opt_level=0))


# ---- static bounds: refused before any code exists ---------------------------------------------

@pytest.mark.parametrize("codegen", CODEGENS)
@pytest.mark.parametrize("hi", [9, 4000])  # one element past the end; far past it
def test_loop_past_the_buffer_is_refused_by_both_code_generators(codegen, hi):
    skip_unless_codegen_runs(codegen)
    bad = relu_ir().replace("[[0 : i64, 8 : i64]]", f"[[0 : i64, {hi} : i64]]")
    with pytest.raises(ck.ModelError, match=rf"krnl.load of model input 'x' \(memref<8xf32>\) "
                                            rf"\(node 'act'\): index 0 ranges over "
                                            rf"\[0, {hi - 1}\]"):
        ck.compile_to("native", bad, codegen=codegen)


def test_a_negative_start_and_the_store_side_are_refused():
    text = relu_ir()
    with pytest.raises(ck.ModelError, match=r"ranges over \[-1, 6\]"):
        ck.compile_to("kernel-ir", text.replace("[[0 : i64, 8 : i64]]", "[[-1 : i64, 7 : i64]]"))
    # the output one element shorter than the loop: the store is the culprit
    short = text.replace("%1: memref<8xf32>", "%1: memref<7xf32>").replace(
        "(f32, memref<8xf32>, index)", "(f32, memref<7xf32>, index)")
    with pytest.raises(ck.ModelError, match=r"krnl.store of model output 'y' \(memref<7xf32>\)"):
        ck.compile_to("kernel-ir", short)


def test_opt_refuses_the_hand_edited_text(tmp_path, capsys):
    path = tmp_path / "bad.mlir"
    path.write_text(relu_ir().replace("[[0 : i64, 8 : i64]]", "[[0 : i64, 12 : i64]]"))
    assert opt_main([str(path), "-p", "plan-buffers"]) == 1
    err = capsys.readouterr().err
    assert "krnl.load of model input 'x'" in err and "outside dimension 0 of size 8" in err
    assert len(err.strip().splitlines()) == 1


def matmul_ir(opt_level=0) -> str:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 5)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                       [("x", np.zeros((4, 6), np.float32))], ["y"], inits=[("w", w)])
    return print_ir(ck.compile_to("kernel-ir", model, opt_level=opt_level), with_resources=True)


def test_a_matmul_tile_past_its_operand_is_refused():
    text = matmul_ir()
    nest = "[[0 : i64, 4 : i64], [0 : i64, 5 : i64], [0 : i64, 6 : i64]]"  # i, j, k
    assert "sizes = [4 : i64, 5 : i64, 6 : i64]" in text and nest in text
    # rows 4 and 5 of A and C, which have 4 (the loop may pass M: a 1 x 1 x 1 tile is not
    # clipped to the sizes)
    bad = text.replace(nest, nest.replace("4 : i64", "6 : i64"))
    with pytest.raises(ck.ModelError, match=r"krnl.matmul \(node 'mm'\): its [AC] tiles reach "
                                            r"elements"):
        ck.compile_to("kernel-ir", bad)


@pytest.mark.parametrize("field,value,match", [
    # M raised past A's and C's 4 rows: the nest still stops at row 3, but the tiling and
    # parallel passes, loopnest and the GPU map take M as the nest's extent
    ("sizes", "[5 : i64, 5 : i64, 6 : i64]", r"its A matrix \(sizes \[5, 5, 6\]"),
    ("sizes", "[4 : i64, 5 : i64, 9 : i64]", r"its A matrix \(sizes \[4, 5, 9\]"),
    ("sizes", "[4 : i64, 7 : i64, 6 : i64]", r"its B matrix \(sizes \[4, 7, 6\]"),
    # C's rows 9 apart instead of 5: row 3 lands past C's 20 elements
    ("strides", "[6 : i64, 1 : i64, 5 : i64, 9 : i64]", r"its C matrix .* reaches elements "
                                                         r"\[0, 31\] of model output 'y'"),
])
def test_matmul_sizes_and_strides_past_an_operand_are_refused(field, value, match, tmp_path,
                                                              capsys):
    text = matmul_ir()
    old = {"sizes": "sizes = [4 : i64, 5 : i64, 6 : i64]",
           "strides": "strides = [6 : i64, 1 : i64, 5 : i64, 5 : i64]"}[field]
    assert old in text
    bad = text.replace(old, f"{field} = {value}")
    with pytest.raises(ck.ModelError, match=r"krnl.matmul \(node 'mm'\): " + match):
        ck.compile_kernel(ck.parse_ir(bad), asm=False)
    path = tmp_path / "bad.mlir"
    path.write_text(bad)
    assert opt_main([str(path), "-p", "plan-buffers"]) == 1
    assert "krnl.matmul (node 'mm')" in capsys.readouterr().err


def two_buffer_ir() -> str:
    """Kernel IR with two planned intermediates (Relu -> Neg -> Relu at -O0)."""
    model = make_model([helper.make_node("Relu", ["x"], ["a"], name="r1"),
                        helper.make_node("Neg", ["a"], ["b"], name="n"),
                        helper.make_node("Relu", ["b"], ["y"], name="r2")],
                       [("x", np.zeros(8, np.float32))], ["y"])
    return print_ir(ck.compile_to("kernel-ir", model, opt_level=0))


@pytest.mark.parametrize("offset,match", [
    (4096, r"bytes \[4096, 4128\) of the arena, which has 128 bytes"),
    (2**40, r"bytes \[1099511627776, 1099511627808\)"),
    (120, r"bytes \[120, 152\) of the arena, which has 128 bytes"),  # 24 bytes past the end
    (-64, r"its arena offset -64 is negative"),
    (66, r"its arena offset 66 is not a multiple of its f32 elements' 4 bytes"),
])
def test_an_alloc_outside_the_arena_is_refused(offset, match, tmp_path, capsys):
    text = two_buffer_ir()
    assert "arena_bytes = 128 : i64" in text and "offset = 64 : i64" in text
    bad = text.replace("offset = 64 : i64", f"offset = {offset} : i64")
    with pytest.raises(ck.ModelError, match=r"krnl.alloc of memref<8xf32> \(node '\w+'\): "
                                            + match):
        ck.compile_kernel(ck.parse_ir(bad), asm=False)
    path = tmp_path / "bad.mlir"
    path.write_text(bad)
    assert opt_main([str(path), "-p", "plan-buffers"]) == 1
    assert "krnl.alloc of memref<8xf32>" in capsys.readouterr().err


def test_an_alloc_with_no_arena_is_refused():
    bad = two_buffer_ir().replace("arena_bytes = 128 : i64, ", "")
    with pytest.raises(ck.ModelError, match=r"krnl.alloc of memref<8xf32> \(node 'r1'\): it has "
                                            r"an arena offset but the function has no arena_"):
        ck.compile_kernel(ck.parse_ir(bad), asm=False)


def test_planned_allocs_fill_the_arena_exactly():
    """The planner's own offsets pass: the last buffer ends at arena_bytes."""
    text = two_buffer_ir()
    cm = ck.compile_kernel(ck.parse_ir(text), asm=False)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    np.testing.assert_array_equal(cm.run(x)[0], np.maximum(-np.maximum(x, 0), 0))


@pytest.mark.parametrize("simd", [0, 3, 100000000])
def test_a_hand_edited_matmul_simd_is_refused(simd):
    text = matmul_ir(opt_level=3)
    lanes = get_backend("host").target.vector_width  # the matmul's simd: 8 on AVX2, 16 on AVX-512
    assert f"simd = {lanes} : i64" in text
    with pytest.raises(ck.ModelError, match=rf"krnl.matmul simd must be a power of two.*{simd}"):
        ck.compile_to("kernel-ir", text.replace(f"simd = {lanes} : i64", f"simd = {simd} : i64"))


# ---- data-dependent indices: checked at run time ------------------------------------------------

PICK = '''builtin.module {
  func.func @main_graph(%x: memref<3x4xf32>, %i: memref<2xi64>, %y: memref<2x4xf32>) attributes {input_names = ["x", "i"], output_names = ["y"], num_inputs = 2 : i64} {
    %l:2 = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%l#0, %l#1, %l#0, %l#1) ({
    ^bb0(%a: index, %b: index):
      %r = "krnl.load"(%i, %a) : (memref<2xi64>, index) -> i64
      %ri = arith.index_cast %r : i64 to index
      %v = "krnl.load"(%x, %ri, %b) : (memref<3x4xf32>, index, index) -> f32
      "krnl.store"(%v, %y, %a, %b) : (f32, memref<2x4xf32>, index, index) -> ()
    }) {bounds = [[0 : i64, 2 : i64], [0 : i64, 4 : i64]], n_original = 2 : i64, onnx_node = "pick"} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}'''  # noqa: E501 (Kernel IR lines as the printer writes them)

X = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("codegen", CODEGENS)
def test_an_index_from_data_is_checked_at_run_time(codegen):
    skip_unless_codegen_runs(codegen)
    cm = ck.compile_to("native", PICK, codegen=codegen, asm=False)
    np.testing.assert_array_equal(cm.run(X, np.array([2, 0]))[0], X[[2, 0]])
    for bad in ([3, 0], [0, -1], [1 << 40, 0]):
        with pytest.raises(ck.RunError, match=r"node 'pick': krnl.load of model input 'x' "
                                              r"\(memref<3x4xf32>\): an index computed from "
                                              r"data is out of range"):
            cm.run(X, np.array(bad))
    np.testing.assert_array_equal(cm.run(X, np.array([1, 1]))[0], X[[1, 1]])


def test_a_far_index_from_data_never_touches_memory():
    # In a subprocess: before the check, an index of 2**40 rows read unmapped memory (SIGSEGV).
    code = ("import numpy as np, compilerkit as ck, test_krnl_bounds as t\n"
            "cm = ck.compile_to('native', t.PICK, asm=False)\n"
            "try:\n    cm.run(t.X, np.array([1 << 40, -(1 << 40)]))\n"
            "except ck.RunError as e:\n    print('RunError', e)\n")
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))  # this checkout's compilerkit
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       cwd=here, env={**os.environ, "PYTHONPATH": os.pathsep.join([repo, here])})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "RunError node 'pick'" in r.stdout


def test_lowered_models_need_no_run_time_index_checks():
    # Lowering clamps its own data-dependent indices (Gather): the verifier bounds them all.
    from compilerkit.krnl_passes.guard_indices import unguarded

    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0, name="g")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                      [3, 4]),
                                        helper.make_tensor_value_info("i", TensorProto.INT64,
                                                                      [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    assert unguarded(ck.compile_to("kernel-ir", model)) == []
    assert len(unguarded(parse_ir(PICK))) == 1  # the hand-written one: the x load


# ---- the range analysis is sound: every value it can take lies in the range it gives ----------

OPS = ["addi", "subi", "muli", "maxsi", "minsi", "remsi", "divsi", "select"]


def _expr(draw, depth, names):
    """(MLIR lines, name, python evaluator) of a random index expression over %a, %b; `names`
    counts the values defined (each gets a name of its own)."""
    kind = draw(st.sampled_from(["iv", "const"] + (OPS if depth else [])))
    n = next(names)
    if kind == "iv":
        which = draw(st.sampled_from(["a", "b"]))
        return [], f"%{which}", lambda env: env[which]
    if kind == "const":
        c = draw(st.integers(-7, 9))
        name = f"%c{n}"
        return [f"{name} = arith.constant {c} : index"], name, lambda env: c
    lx, x, fx = _expr(draw, depth - 1, names)
    if kind in ("remsi", "divsi"):  # by a positive constant, as lowering writes them
        c = draw(st.integers(1, 5))
        ly, y, fy = [f"%d{n} = arith.constant {c} : index"], f"%d{n}", lambda env: c
    else:
        ly, y, fy = _expr(draw, depth - 1, names)
    name = f"%e{n}"
    if kind == "select":
        lc = [f"%p{n} = arith.cmpi slt, {x}, {y} : index",
              f"{name} = arith.select %p{n}, {x}, {y} : index"]
        return lx + ly + lc, name, lambda env: fx(env) if fx(env) < fy(env) else fy(env)
    py = {"addi": lambda p, q: p + q, "subi": lambda p, q: p - q, "muli": lambda p, q: p * q,
          "maxsi": max, "minsi": min, "remsi": lambda p, q: int(np.fmod(p, q)),
          "divsi": lambda p, q: int(p / q)}[kind]
    return lx + ly + [f"{name} = arith.{kind} {x}, {y} : index"], name, \
        lambda env: py(fx(env), fy(env))


@st.composite
def expressions(draw):
    return _expr(draw, draw(st.integers(1, 4)), itertools.count()), draw(st.integers(-3, 2)), \
        draw(st.integers(0, 4)), draw(st.integers(1, 5))


@settings(max_examples=150, deadline=None)
@given(expressions())
def test_ranges_hold_every_value(case):
    from compilerkit.dialects.krnl_ranges import value_range

    (lines, name, fn), lo_a, lo_b, span = case
    hi_a, hi_b = lo_a + span, lo_b + 2
    body = "\n      ".join(lines)
    text = f'''builtin.module {{
  func.func @f(%m: memref<4xf32>) {{
    %l:2 = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%l#0, %l#1, %l#0, %l#1) ({{
    ^bb0(%a: index, %b: index):
      {body}
      %keep = arith.addi {name}, {name} : index
    }}) {{bounds = [[{lo_a} : i64, {hi_a} : i64], [{lo_b} : i64, {hi_b} : i64]], n_original = 2 : i64}} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }}
}}'''  # noqa: E501 (Kernel IR lines as the printer writes them)
    module = parse_ir(text)
    v = next(op for op in module.walk() if getattr(op, "results", None)
             and op.results and op.results[0].name_hint == "keep").operands[0]
    lo, hi = value_range(v)
    values = [fn({"a": a, "b": b}) for a, b in itertools.product(range(lo_a, hi_a),
                                                                  range(lo_b, hi_b))]
    assert lo is None or lo <= min(values), (lo, min(values), lines)
    assert hi is None or hi >= max(values), (hi, max(values), lines)


# ---- schedule options and thread counts: one rule each, on every route -------------------------

BAD_OPTIONS = [("tile-matmul{simd=0}", "tile-matmul{simd}"),
               ("tile-matmul{simd=3}", "power of two"),
               ("tile-matmul{simd=100000000}", "power of two from 1 to 64"),
               ("tile-matmul{simd=true}", "whole number"),
               ("unroll-small{max_trip=1000000000}", "unroll-small{max_trip} must be 0..64"),
               ("unroll-small{max_body=-1}", "unroll-small{max_body}"),
               ("parallelize{min_work=-5}", "parallelize{min_work}")]


@pytest.mark.parametrize("spec,match", BAD_OPTIONS)
def test_bad_schedule_options_are_refused_everywhere(spec, match, tmp_path, capsys):
    from compilerkit.passes import parse_pipeline

    with pytest.raises(ValueError, match=match.replace("{", r"\{").replace("}", r"\}")):
        parse_pipeline(spec)
    with pytest.raises(ValueError, match=r"\{"):
        ck.compile(RELU, schedule=spec, asm=False)
    path = tmp_path / "in.mlir"
    path.write_text(relu_ir())
    assert opt_main([str(path), "-p", spec]) == 1
    assert match.split("{")[0] in capsys.readouterr().err


def test_schedule_options_checked_when_made_in_python():
    from compilerkit.krnl_passes.parallelize import ParallelizePass
    from compilerkit.krnl_passes.tile_matmul import TileMatmulPass
    from compilerkit.krnl_passes.unroll_small import UnrollSmallPass

    for make in (lambda: TileMatmulPass(simd=0), lambda: TileMatmulPass(simd=2.0),
                 lambda: UnrollSmallPass(max_trip=10**9), lambda: ParallelizePass(min_work=-1)):
        with pytest.raises(ValueError, match=r"\{"):
            make()
    assert TileMatmulPass(simd=16).simd == 16 and TileMatmulPass(simd=1).simd == 1


@pytest.mark.parametrize("simd", [1, 4, 16])
def test_every_accepted_simd_compiles_the_right_product(simd):
    rng = np.random.default_rng(simd)
    a = rng.standard_normal((20, 33)).astype(np.float32)
    b = rng.standard_normal((33, 19)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                       [("a", a), ("b", b)], ["y"])
    cm = ck.compile(model, schedule=f"tile-matmul{{simd={simd}}}", asm=False)
    np.testing.assert_allclose(cm.run(a, b)[0], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bad", [1024, 257, 0, True, 2.0, 10**12])
def test_thread_counts_above_the_cap_are_refused(bad):
    from compilerkit.runtime import MAX_THREADS

    assert MAX_THREADS == 256
    with pytest.raises(ValueError, match="num_threads"):
        ck.compile(RELU, asm=False, num_threads=bad)


def test_a_refused_worker_thread_leaves_the_pool_working(monkeypatch):
    # Under a memory cap the system refuses threads: the pool keeps the workers it has and
    # the caller runs the loop (libgomp aborted the process instead).
    import threading

    from compilerkit.backends import threadpool

    if not threadpool.available():
        pytest.skip("compilerkit's pool is not used here")
    x = np.random.default_rng(0).standard_normal((4096, 16)).astype(np.float32)
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="act")], [("x", x)], ["y"])
    cm = ck.compile(model, asm=False, codegen="loopnest")
    assert "krnl.parallel" in str(cm.stages["kernel-ir"])
    pool = threadpool.pool()
    before = len(pool.workers)

    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    try:
        np.testing.assert_array_equal(cm.run(x, num_threads=200)[0], np.maximum(x, 0))
        assert len(pool.workers) == before and pool.refused
    finally:
        pool.refused = False


@pytest.mark.parametrize("hi", [5, 1000, 2**40])
def test_a_tiled_matmul_loop_past_its_sizes_is_refused_not_run(hi):
    # Tiles are clipped to the sizes, so a tile loop running past M reads nothing out of
    # bounds; but no lowering writes one, and 2**40 empty tiles take hours (a hang).
    text = matmul_ir(opt_level=3)
    assert "tile = [4 : i64, 5 : i64, 6 : i64]" in text  # whole-matrix tiles: clipped
    nest = "[[0 : i64, 4 : i64], [0 : i64, 5 : i64], [0 : i64, 6 : i64]]"
    assert nest in text
    bad = text.replace(nest, nest.replace("[0 : i64, 4 : i64]", f"[0 : i64, {hi} : i64]"))
    with pytest.raises(ck.ModelError, match=rf"its tile position i ranges over \[0, {hi - 1}\], "
                                            r"outside \[0, 3\]"):
        ck.compile_to("kernel-ir", bad)


def test_a_value_used_outside_the_block_defining_it_is_refused():
    # xDSL's parser resolves names anywhere; the code generators then failed with a KeyError
    text = relu_ir()
    uses = re.findall(r'"krnl.load"\((%\d+), (%\d+)\)', text)
    assert uses
    memref, iv = uses[0]
    later = "%99 = arith.constant 0 : index\n    func.return"
    bad = text.replace("func.return", later).replace(f'"krnl.load"({memref}, {iv})',
                                                     f'"krnl.load"({memref}, %99)')
    with pytest.raises(ck.ModelError, match=r"krnl.load \(operand 1\) uses .* not defined before "
                                            r"it"):
        ck.parse_ir(bad)
