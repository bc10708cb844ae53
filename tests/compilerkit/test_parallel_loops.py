# ruff: noqa: E501  (Kernel IR text below)
"""Parallel loops (issue 12, item 4): `krnl.parallel` outer loops run on libgomp's threads, and
the thread count never changes the answer. Every check runs the same compiled model at 1, 2, 3
and 4 threads, wants the outputs bit-identical to each other, and compares them with
onnxruntime (the independent reference)."""

import threading

import numpy as np
import pytest
from ckhelpers import make_model, ort_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

import compilerkit as ck
from compilerkit.dialects import krnl
from compilerkit.krnl_passes.parallelize import ParallelizePass
from compilerkit.krnl_passes.tile_matmul import TileMatmulPass
from compilerkit.krnl_passes.unroll_small import UnrollSmallPass
from compilerkit.measure.conformance import light_model_path, random_inputs

THREADS = (1, 2, 3, 4)


def parallel_nests(cm) -> int:
    k = cm.provenance.modules["kernel-ir"]
    return sum(krnl.parallel_loop(op) is not None for op in k.walk()
               if isinstance(op, krnl.IterateOp))


def every_loop_that_can(model):
    """Compiled with parallelize{min_work=1}: every safe nest gets a parallel loop, however
    small (the test shapes are small)."""
    simd = ck.get_backend("host").target.vector_width
    return ck.compile_to("native", model, asm=False, schedule=[
        TileMatmulPass(simd=simd), UnrollSmallPass(), ParallelizePass(min_work=1)])


def same_at_every_thread_count(cm, arrays):
    outs = [cm.run(*arrays, num_threads=n) for n in THREADS]
    for n, out in zip(THREADS[1:], outs[1:], strict=True):
        for a, b in zip(outs[0], out, strict=True):
            assert np.array_equal(a, b), f"{n} threads differ from 1 thread"
    return outs[0]


def close_to(out, ref, tol=1e-3):
    for o, r in zip(out, ref, strict=True):
        scale = max(1.0, float(np.abs(r).max()))
        assert o.shape == r.shape
        assert float(np.abs(o - r).max()) <= tol * scale


@st.composite
def op_models(draw):
    """(ONNX model, inputs): one of MatMul+Add+Relu, Conv(+bias), MaxPool, ReduceSum, Softmax
    on drawn shapes."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    kind = draw(st.sampled_from(["gemm", "conv", "pool", "reduce", "softmax"]))
    if kind == "gemm":
        m, k, n = (draw(st.integers(1, 80)) for _ in range(3))
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((k, n)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        nodes = [helper.make_node("MatMul", ["x", "w"], ["t"]),
                 helper.make_node("Add", ["t", "b"], ["u"]),
                 helper.make_node("Relu", ["u"], ["y"])]
        return make_model(nodes, [("x", x)], ["y"], [("w", w), ("b", b)]), [x]
    n, c = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    h, wd = draw(st.integers(4, 14)), draw(st.integers(4, 14))
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    if kind == "conv":
        co, kk = draw(st.integers(1, 12)), draw(st.sampled_from([1, 3]))
        w = rng.standard_normal((co, c, kk, kk)).astype(np.float32)
        b = rng.standard_normal(co).astype(np.float32)
        node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[kk // 2] * 4)
        return make_model([node], [("x", x)], ["y"], [("w", w), ("b", b)]), [x]
    if kind == "pool":
        node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[1, 2])
    elif kind == "reduce":
        axis = draw(st.integers(0, 3))
        return make_model([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)],
                          [("x", x)], ["y"], [("axes", np.array([axis], np.int64))]), [x]
    else:
        node = helper.make_node("Softmax", ["x"], ["y"], axis=draw(st.integers(-1, 3)))
    return make_model([node], [("x", x)], ["y"]), [x]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op_models())
def test_ops_same_answer_at_every_thread_count(case):
    model, arrays = case
    cm = every_loop_that_can(model)
    out = same_at_every_thread_count(cm, arrays)
    close_to(out, ort_run(model, arrays), tol=1e-4)


def test_property_reaches_parallel_loops():
    """The property above is about parallel code: its ops really get krnl.parallel loops."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 10, 10)).astype(np.float32)
    w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    conv = make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1] * 4)],
                      [("x", x)], ["y"], [("w", w)])
    pool = make_model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])],
                      [("x", x)], ["y"])
    for model in (conv, pool):
        cm = every_loop_that_can(model)
        assert parallel_nests(cm) >= 1
        assert "GOMP_parallel" in cm.stages["llvm-ir"]


def test_default_pipeline_parallelises_a_large_matmul():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((96, 256)).astype(np.float32)
    w = rng.standard_normal((256, 200)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", x)], ["y"],
                       [("w", w)])
    cm = ck.compile(model, asm=False)
    assert parallel_nests(cm) == 1
    out = same_at_every_thread_count(cm, [x])
    close_to(out, ort_run(model, [x]), tol=1e-4)
    # -O1 has no parallelize pass: same model, no thread calls.
    assert "GOMP_parallel" not in ck.compile(model, opt_level=1, asm=False).stages["llvm-ir"]


def _model_check(path):
    feeds = random_inputs(path)  # a dynamic batch dimension becomes 1
    cm = ck.compile(path, asm=False, input_shapes={n: list(a.shape) for n, a in feeds})
    assert parallel_nests(cm) >= 1
    arrays = [a for _, a in feeds]
    out = same_at_every_thread_count(cm, arrays)
    import onnx

    close_to(out, ort_run(onnx.load(path), arrays))


def test_light_squeezenet():
    _model_check(light_model_path("squeezenet"))


@pytest.mark.slow
def test_light_resnet50():
    _model_check(light_model_path("resnet50"))


@pytest.mark.parametrize("name", ["light_squeezenet", pytest.param(
    "mobilenet_v2", marks=pytest.mark.slow), pytest.param("light_resnet50",
                                                          marks=pytest.mark.slow)])
def test_real_weight_models(name):
    from mlsys_datasets import real_weight_model

    _model_check(str(real_weight_model(name, "small", progress=False)))


@pytest.fixture(scope="module")
def matmul_model():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 192)).astype(np.float32)
    w = rng.standard_normal((192, 160)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["t"]),
                        helper.make_node("Relu", ["t"], ["y"])], [("x", x)], ["y"], [("w", w)])
    return model, x


@pytest.mark.parametrize("bad", [0, -1, "x", 1.5, True, 10**6])
def test_bad_num_threads_is_a_value_error(matmul_model, bad):
    model, x = matmul_model
    with pytest.raises(ValueError, match="num_threads"):
        ck.compile(model, asm=False, num_threads=bad)
    cm = ck.compile(model, asm=False)
    with pytest.raises(ValueError, match="num_threads"):
        cm.run(x, num_threads=bad)


def test_num_threads_kept_and_overridden(matmul_model):
    model, x = matmul_model
    cm = ck.compile(model, asm=False, num_threads=3)
    assert cm.num_threads == 3
    ref = ort_run(model, [x])
    close_to(cm.run(x), ref, tol=1e-4)
    assert np.array_equal(cm.run(x)[0], cm.run(x, num_threads=1)[0])


def test_python_threads_with_different_num_threads(matmul_model):
    model, x = matmul_model
    cm = ck.compile(model, asm=False)
    assert parallel_nests(cm) >= 1
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(x.shape).astype(np.float32) for _ in range(6)]
    refs = [cm.run(a, num_threads=1)[0] for a in xs]
    for a, r in zip(xs, refs, strict=True):
        close_to([r], ort_run(model, [a]), tol=1e-4)
    wrong, errors = [], []
    start = threading.Barrier(4)

    def worker(t):
        try:
            start.wait()
            for r in range(15):
                k = (t * 5 + r) % len(xs)
                if not np.array_equal(cm.run(xs[k], num_threads=1 + (t + r) % 4)[0], refs[k]):
                    wrong.append((t, r))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and not wrong


def test_shared_library_runs_threads(matmul_model, tmp_path):
    from compilerkit.backends.host import SharedLibrary, c_compiler

    if c_compiler() is None:
        pytest.skip("no C compiler")
    model, x = matmul_model
    lib = ck.compile_to("lib", model, out=str(tmp_path / "m.so"))
    header = (tmp_path / "m.h").read_text()
    assert "int64_t main_graph(void **buffers, int64_t num_threads);" in header
    cm = ck.compile(model, asm=False)
    session = SharedLibrary(lib).session(cm.inputs, cm.outputs)
    ref = cm.run(x, num_threads=1)[0]
    for n in THREADS:
        assert np.array_equal(session.run(x, num_threads=n)[0], ref)


COLUMN_SUMS = """
builtin.module {
  func.func @main_graph(%x: memref<300x200xf32>, %y: memref<200xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64} {
    %i, %j = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    "krnl.iterate"(%j, %j) ({
    ^bb0(%b: index):
      %z = arith.constant 0.0 : f32
      "krnl.store"(%z, %y, %b) : (f32, memref<200xf32>, index) -> ()
    }) {bounds = [[0 : i64, 200 : i64]], n_original = 1 : i64} : (!krnl.loop, !krnl.loop) -> ()
    %p, %q = "krnl.define_loops"() : () -> (!krnl.loop, !krnl.loop)
    %qo, %qi = "krnl.block"(%q) {tile = 16 : i64} : (!krnl.loop) -> (!krnl.loop, !krnl.loop)
    "krnl.permute"(%p, %qo, %qi) {map = [1 : i64, 0 : i64, 2 : i64]} : (!krnl.loop, !krnl.loop, !krnl.loop) -> ()
    "krnl.parallel"(%qo) : (!krnl.loop) -> ()
    "krnl.iterate"(%p, %q, %qo, %p, %qi) ({
    ^bb1(%a: index, %c: index):
      %v = "krnl.load"(%x, %a, %c) : (memref<300x200xf32>, index, index) -> f32
      %s = "krnl.load"(%y, %c) : (memref<200xf32>, index) -> f32
      %t = arith.addf %s, %v : f32
      "krnl.store"(%t, %y, %c) : (f32, memref<200xf32>, index) -> ()
    }) {bounds = [[0 : i64, 300 : i64], [0 : i64, 200 : i64]], n_original = 2 : i64} : (!krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop, !krnl.loop) -> ()
    func.return
  }
}
"""


def test_hand_written_parallel_tile_loop():
    """Kernel IR written by hand: column sums y[j] = sum_i x[i, j], the column loop blocked by
    16 and its tile loop (13 tiles, the last one short) parallel, the row reduction inside.
    Each thread adds its columns' terms in row order, as numpy's float32 loop does here."""
    cm = ck.compile_kernel(ck.parse_ir(COLUMN_SUMS), asm=False)
    assert "GOMP_parallel" in cm.stages["llvm-ir"]
    x = np.random.default_rng(4).standard_normal((300, 200)).astype(np.float32)
    ref = np.zeros(200, np.float32)
    for row in x:  # row by row, in float32: the same additions in the same order
        ref += row
    out = same_at_every_thread_count(cm, [x])
    assert np.array_equal(out[0], ref)


@pytest.mark.parametrize("tile, threads", [(2, (1, 2, 3, 7)), (1, (2, 5, 64))])
def test_dynamic_hand_out_covers_every_iteration_once(tile, threads):
    """The parallel loop is handed out in chunks of trip / (GRAINS_PER_THREAD x threads)
    iterations, the first thread to arrive taking them from the front and the others from the
    back, one compare-and-swap each (codegen/emit.py _take_chunk): with 100 or 200
    column tiles the chunks are several tiles long and the last one is short, and more
    threads than chunks leaves some threads nothing. A tile computed twice or skipped would
    double or zero its column sums; the reference adds rows in order as the code does."""
    from compilerkit.codegen.emit import GRAINS_PER_THREAD

    text = COLUMN_SUMS.replace("{tile = 16 : i64}", f"{{tile = {tile} : i64}}")
    cm = ck.compile_kernel(ck.parse_ir(text), asm=False)
    trips = 200 // tile
    assert any(trips // (GRAINS_PER_THREAD * n) > 1 for n in threads)  # chunks of several
    x = np.random.default_rng(5).standard_normal((300, 200)).astype(np.float32)
    ref = np.zeros(200, np.float32)
    for row in x:
        ref += row
    for n in threads:
        for _ in range(3):  # a different hand-out order each run, the same bits
            assert np.array_equal(cm.run(x, num_threads=n)[0], ref), f"{n} threads"


@pytest.mark.parametrize("x_shape, w_shape, op, tile", [
    # a 1x1 Conv whose product is one tile-matmul tile (32 -> 32 channels at 32 x 32: M 32,
    # N 1024): its column tile is cut (parallelize.split_cols), not its rows, so that each
    # thread packs only its own columns of B
    ((1, 32, 32, 32), (32, 32, 1, 1), "Conv", [32, 256]),
    # x @ W with one row (a classifier's last MatMul): the micro-kernel streams W's rows
    # whole, and column blocks made it read pieces of them (slower at 1 thread, no faster at
    # 2): one tile, and split_rows has no rows to cut
    ((1, 1280), (1280, 1000), "MatMul", [1, 1000]),
])
def test_one_tile_products_for_the_threads(x_shape, w_shape, op, tile):
    """How a product that is one tile is shared by threads; same bits at every thread
    count, onnxruntime's answer."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) * 0.2).astype(np.float32)
    model = make_model([helper.make_node(op, ["x", "w"], ["y"])], [("x", x)], ["y"],
                       [("w", w)])
    cm = ck.compile(model, asm=False)
    (mm,) = [o for o in cm.provenance.modules["kernel-ir"].walk()
             if isinstance(o, krnl.MatMulOp)]
    assert krnl.ints_of(mm.tile)[:2] == tile
    out = same_at_every_thread_count(cm, [x])
    np.testing.assert_allclose(out[0], ort_run(model, [x])[0], rtol=1e-4, atol=1e-4)


def test_hand_schedule_replaces_the_parallel_mark():
    """Rescheduling a nest by hand (notebooks 10 and 11 do) drops the mark the parallelize pass
    left on the old outermost loop; `parallel(it)` marks the new outermost loop, and the
    verifier accepts it because the hand order keeps the rows (i) outermost."""
    from compilerkit.krnl_passes import matmul_nests, parallel, permute

    rng = np.random.default_rng(3)
    x = rng.standard_normal((96, 256)).astype(np.float32)
    w = rng.standard_normal((256, 200)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", x)], ["y"],
                       [("w", w)])
    k = ck.lower(ck.optimize_onnx(ck.import_onnx(model)), opt_level=2)
    it, _ = matmul_nests(k)[0]
    assert krnl.parallel_loop(it) is not None
    permute(it, [0, 2, 1])  # i, j, k -> i, k, j
    assert krnl.parallel_loop(it) is None
    assert not any(isinstance(op, krnl.ParallelOp) for op in k.walk())
    k.verify()
    parallel(it)
    assert krnl.parallel_loop(it) is not None
    cm = ck.compile_kernel(k, asm=False)
    assert "GOMP_parallel" in cm.stages["llvm-ir"]
    out = same_at_every_thread_count(cm, [x])
    close_to(out, ort_run(model, [x]), tol=1e-4)


@pytest.mark.parametrize("load, env, expected", [
    (0.2, {}, ("GOMP_SPINCOUNT", "10000")),        # idle machine: spin a while, then sleep
    (5.0, {}, ("OMP_WAIT_POLICY", "passive")),     # busy: sleep at once
    (0.2, {"OMP_WAIT_POLICY": "active"}, ("OMP_WAIT_POLICY", "active")),  # the user's choice
    (5.0, {"GOMP_SPINCOUNT": "7"}, ("GOMP_SPINCOUNT", "7")),
])
def test_openmp_wait_policy_follows_the_load(monkeypatch, load, env, expected):
    from compilerkit import runtime

    for key in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(runtime.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(runtime.os, "cpu_count", lambda: 2)
    runtime.openmp_defaults()
    assert runtime.os.environ.get(expected[0]) == expected[1]
    other = {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} - {expected[0]} - set(env)
    assert not any(k in runtime.os.environ for k in other)
