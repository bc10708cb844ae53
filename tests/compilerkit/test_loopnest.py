"""codegen="loopnest": machine code straight from Kernel IR, checked against the LLVM path,
numpy and onnxruntime (independent references), on hypothesis-drawn elementwise, matmul and
convolution nests whose sizes leave vector tails; nests it does not handle go to LLVM and the
model still runs; buffers placed against unmapped pages show that no lane reads past them."""

import ctypes
import mmap

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

import compilerkit as ck
from compilerkit.measure import conformance as cf
from compilerkit.measure.provenance import provenance
from compilerkit.pipeline import compile_to

from .ckhelpers import make_model, ort_run

FAST = settings(max_examples=8, deadline=None)


def loopnest(model, **kw):
    return compile_to("native", model, codegen="loopnest", **kw)


def llvm(model, **kw):
    return compile_to("native", model, asm=False, **kw)


def handled(cm):
    """Names of the nodes the loopnest generator wrote itself."""
    return {f.node for f in cm.loopnest.nodes if f.codegen == "loopnest"}


# ---- elementwise nests ------------------------------------------------------------------------

BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
          "Max": np.maximum, "Min": np.minimum}
UNARY = {"Relu": lambda x: np.maximum(x, 0), "Neg": np.negative, "Abs": np.abs,
         "Sqrt": lambda x: np.sqrt(np.abs(x))}


@FAST
@given(shape=st.lists(st.integers(1, 19), min_size=1, max_size=4),
       bdims=st.lists(st.booleans(), min_size=4, max_size=4),
       binop=st.sampled_from(sorted(BINARY)), unop=st.sampled_from(sorted(UNARY)),
       seed=st.integers(0, 2**16))
def test_elementwise_matches_llvm_and_numpy(shape, bdims, binop, unop, seed):
    """y = unop(binop(x, b)) with b broadcast along some axes: bit for bit the LLVM path's
    answer (the same IEEE operations), and numpy's."""
    rng = np.random.default_rng(seed)
    bshape = [1 if bdims[k] else d for k, d in enumerate(shape)]
    x = rng.standard_normal(shape).astype(np.float32)
    b = (rng.standard_normal(bshape) + 3).astype(np.float32)  # no division by ~0
    pre = "Abs" if unop == "Sqrt" else "Identity"
    nodes = [helper.make_node(binop, ["x", "b"], ["t"], name="bin"),
             helper.make_node(pre, ["t"], ["u"], name="pre"),
             helper.make_node(unop, ["u"], ["y"], name="un")]
    model = make_model(nodes, [("x", x), ("b", b)], ["y"])
    cm = loopnest(model)
    # fuse-elementwise moves a Relu into the Add/Sub/Mul/Div before it: then "un" is no node.
    fused = unop == "Relu" and binop in ("Add", "Sub", "Mul", "Div")
    assert ({"bin"} if fused else {"bin", "un"}) <= handled(cm)
    got = cm.run(x, b)[0]
    np.testing.assert_array_equal(got, llvm(model).run(x, b)[0])
    want = UNARY[unop](np.abs(BINARY[binop](x, b)) if unop == "Sqrt" else BINARY[binop](x, b))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_nan_propagates_like_llvm():
    """Max/Min/Relu keep a NaN from either side (vmaxps alone would drop the first one)."""
    x = np.array([np.nan, 1.0, -2.0, np.nan, 3.0, 0.0, -0.0, 5.0, np.nan], np.float32)
    y = np.array([1.0, np.nan, -3.0, np.nan, 2.0, -0.0, 0.0, np.inf, -np.inf], np.float32)
    nodes = [helper.make_node("Max", ["x", "y"], ["m"], name="max"),
             helper.make_node("Min", ["m", "y"], ["n"], name="min"),
             helper.make_node("Relu", ["n"], ["r"], name="relu")]
    model = make_model(nodes, [("x", x), ("y", y)], ["r"])
    got = loopnest(model).run(x, y)[0]
    ref = llvm(model).run(x, y)[0]
    np.testing.assert_array_equal(got.view(np.int32), ref.view(np.int32))
    assert np.isnan(got[[0, 1, 3, 8]]).all()


@pytest.mark.parametrize("op", ["Exp", "Softmax", "Log"])
def test_exp_and_log_are_the_llvm_paths_bit_for_bit(op):
    """math.exp (Softmax's) and math.log in the vector code: the LLVM path's ck_expf and
    ck_logf sequences, so the bits agree over the whole range (exp: underflow to subnormals
    and 0, overflow to inf; log: subnormals, 0, negatives, inf; NaN and +-0 for both) and
    the values are within a few ulps of float64's."""
    if op == "Log":
        x = np.concatenate([np.geomspace(1e-45, 3e38, 1001), -np.geomspace(1e-30, 1e30, 20),
                            [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 1.4142135, 1.4142137]])
    else:
        x = np.concatenate([np.linspace(-120.0, 100.0, 1001),
                            [np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72, 88.73, -87.3]])
    x = x.astype(np.float32).reshape(1, -1)
    model = make_model([helper.make_node(op, ["x"], ["y"], name="e")], [("x", x)], ["y"])
    cm = loopnest(model)
    assert "e" in handled(cm)
    got = cm.run(x)[0]
    np.testing.assert_array_equal(got.view(np.int32), llvm(model).run(x)[0].view(np.int32))
    if op == "Softmax":
        np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-5, atol=1e-7)
        return
    normal = np.abs(x) >= 1.17549435e-38 if op == "Log" else np.isfinite(x)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        want = (np.log if op == "Log" else np.exp)(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got[normal], want[normal], rtol=3e-7, atol=1e-44)


# ---- matrix products ---------------------------------------------------------------------------

@FAST
@given(m=st.integers(1, 40), n=st.integers(1, 70), k=st.integers(1, 50),
       opt=st.sampled_from([2, 3]), seed=st.integers(0, 2**16))
def test_matmul_matches_numpy_and_llvm(m, n, k, opt, seed):
    """The 6x16 kernel with row, column (masked) and k tails; -O3 tile loops and the untiled
    -O2 nest (one kernel call)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["c"], name="mm")],
                       [("a", a), ("b", b)], ["c"])
    cm = loopnest(model, opt_level=opt)
    assert "mm" in handled(cm)
    got = cm.run(a, b)[0]
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    np.testing.assert_allclose(got, llvm(model, opt_level=opt).run(a, b)[0], rtol=1e-5,
                               atol=1e-5)


@FAST
@given(m1=st.integers(1, 60), m2=st.integers(1, 60), n=st.integers(1, 70),
       k=st.integers(1, 40), opt=st.sampled_from([2, 3]), seed=st.integers(0, 2**16))
def test_a_kernel_shared_by_products_of_different_sizes(m1, m2, n, k, opt, seed):
    """Two products with the same strides share one kernel, which holds only the paths its
    calls take: the union of both call sites' (m, n, k), e.g. one packed and one not, or row
    remainders 1 and 5. Each must still get every row and column."""
    rng = np.random.default_rng(seed)
    a1 = rng.standard_normal((m1, k)).astype(np.float32)
    a2 = rng.standard_normal((m2, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a1", "b"], ["c1"], name="mm1"),
             helper.make_node("MatMul", ["a2", "b"], ["c2"], name="mm2")]
    model = make_model(nodes, [("a1", a1), ("a2", a2), ("b", b)], ["c1", "c2"])
    cm = loopnest(model, opt_level=opt)
    assert {"mm1", "mm2"} <= handled(cm)
    kernels = [f for f in cm.loopnest.functions if f.name.startswith("ck_ln_matmul_")]
    assert len(kernels) == 1  # same strides (k, 1, n, n): one kernel
    got1, got2 = cm.run(a1, a2, b)
    for got, a in ((got1, a1), (got2, a2)):
        want = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_large_tiled_matmul_and_gemm_match_numpy():
    """Partial tiles in every dimension of the -O3 schedule; Gemm with transB, alpha, beta."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((131, 300)).astype(np.float32)
    w = rng.standard_normal((133, 300)).astype(np.float32)
    c = rng.standard_normal((133,)).astype(np.float32)
    node = helper.make_node("Gemm", ["a", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0,
                            name="gemm")
    model = make_model([node], [("a", a)], ["y"], inits=[("w", w), ("c", c)])
    cm = loopnest(model)
    assert "gemm" in handled(cm)
    want = 0.5 * (a.astype(np.float64) @ w.T.astype(np.float64)) + 2.0 * c
    np.testing.assert_allclose(cm.run(a)[0], want, rtol=1e-4, atol=1e-3)


# ---- convolutions: im2col with guarded (padded) loads, strided gathers --------------------------

@FAST
@given(c=st.integers(1, 5), oc=st.integers(1, 9), hw=st.integers(3, 13),
       kern=st.integers(1, 3), stride=st.integers(1, 2), pad=st.integers(0, 1),
       relu=st.booleans(), seed=st.integers(0, 2**16))
def test_conv_matches_onnxruntime(c, oc, hw, kern, stride, pad, relu, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, c, hw, hw + 2)).astype(np.float32)
    w = rng.standard_normal((oc, c, kern, kern)).astype(np.float32)
    bias = rng.standard_normal((oc,)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t" if relu else "y"],
                              strides=[stride, stride], pads=[pad] * 4, name="conv")]
    if relu:
        nodes.append(helper.make_node("Relu", ["t"], ["y"], name="relu"))
    model = make_model(nodes, [("x", x)], ["y"], inits=[("w", w), ("b", bias)])
    cm = loopnest(model)
    assert "conv" in handled(cm)
    got = cm.run(x)[0]
    np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, llvm(model).run(x)[0], rtol=1e-5, atol=1e-5)


def test_pooling_reductions_are_exact():
    """AveragePool (a sum into each output element over the window, padded: one nest per
    region of the output with the same taps, lowering/pool.py) and GlobalAveragePool (a sum
    into it): the vector loop runs along the output, so each element's sum keeps its order
    and the bits equal the LLVM path's. A float MaxPool's planes are redone under an scf.if
    where the fast fold may differ (pool.py `_pool_peeled`), which loopnest leaves to LLVM:
    the same bits either way."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 11, 9, 10)).astype(np.float32)
    for kind in ("AveragePool", "MaxPool"):
        nodes = [helper.make_node(kind, ["x"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                  strides=[2, 2], name="pool"),
                 helper.make_node("GlobalAveragePool", ["p"], ["y"], name="gap")]
        model = make_model(nodes, [("x", x)], ["y"])
        cm = loopnest(model)
        assert ({"pool", "gap"} if kind == "AveragePool" else {"gap"}) <= handled(cm)
        got = cm.run(x)[0]
        np.testing.assert_array_equal(got, llvm(model).run(x)[0])
        np.testing.assert_allclose(got, ort_run(model, [x])[0], rtol=1e-5, atol=1e-6)


# ---- fallback to LLVM --------------------------------------------------------------------------

def test_unsupported_nodes_fall_back_and_the_model_runs():
    """tanh (a math-library call loopnest does not have) and an integer Gather index
    (data-dependent) go to LLVM; the rest is loopnest's; the run-time check of the LLVM part
    still reports through the machine-code entry point."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 12)).astype(np.float32)
    idx = np.array([4, 0, 2], np.int64)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Tanh", ["r"], ["e"], name="tanh"),
             helper.make_node("Gather", ["e", "i"], ["g"], axis=0, name="gather"),
             helper.make_node("Add", ["g", "g"], ["y"], name="add")]
    model = make_model(nodes, [("x", x), ("i", idx)], ["y"])
    cm = loopnest(model)
    kinds = {f.node: f.codegen for f in cm.loopnest.nodes}
    assert kinds["relu"] == kinds["add"] == "loopnest"
    assert kinds["tanh"] == "llvm" and kinds["gather"] == "llvm"
    assert all(f.reason for f in cm.loopnest.fallbacks())
    np.testing.assert_allclose(cm.run(x, idx)[0], ort_run(model, [x, idx])[0], rtol=1e-6)
    with pytest.raises(ck.RunError, match="gather"):
        cm.run(x, np.array([0, 5, 1], np.int64))
    # thread count never changes the answer
    np.testing.assert_array_equal(cm.run(x, idx, num_threads=1)[0],
                                  cm.run(x, idx, num_threads=2)[0])


def test_parallel_loops_run_on_threads_with_the_same_bits():
    """Nests whose outer loop is krnl.parallel become chunk functions run through libgomp;
    every thread count gives the LLVM path's bits (each thread takes whole tiles / rows)."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 32, 28, 30)).astype(np.float32)
    w = (rng.standard_normal((48, 32, 3, 3)) * 0.1).astype(np.float32)
    m = rng.standard_normal((30, 70)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("MatMul", ["c", "m"], ["y"], name="mm")]
    model = make_model(nodes, [("x", x)], ["y"], inits=[("w", w), ("m", m)])
    kir = compile_to("kernel-ir", model)
    if "krnl.parallel" not in ck.print_ir(kir):
        pytest.skip("this pipeline marks no loop krnl.parallel")
    cm = loopnest(kir)
    assert any("_chunk_" in f.name for f in cm.loopnest.functions)
    want = llvm(kir).run(x, num_threads=1)[0]
    for n in (1, 2, 3, 5):
        np.testing.assert_array_equal(cm.run(x, num_threads=n)[0], want)


TWO_STORES = """
func.func @two_stores(%x: memref<8xf32>, %y: memref<2x9xf32>) attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64, arena_bytes = 0 : i64, naive_bytes = 0 : i64} {
  %i = "krnl.define_loops"() {onnx_node = "copy"} : () -> !krnl.loop
  "krnl.iterate"(%i, %i) ({
  ^bb0(%a: index):
    %v = "krnl.load"(%x, %a) : (memref<8xf32>, index) -> f32
    %r0 = arith.constant 0 : index
    %r1 = arith.constant ROW : index
    %one = arith.constant 1 : index
    %b = arith.addi %a, %one : index
    "krnl.store"(%v, %y, %r0, %a) : (f32, memref<2x9xf32>, index, index) -> ()
    "krnl.store"(%v, %y, %r1, %b) : (f32, memref<2x9xf32>, index, index) -> ()
  }) {bounds = [[0 : i64, 8 : i64]], n_original = 1 : i64, onnx_node = "copy"} : (!krnl.loop, !krnl.loop) -> ()
  func.return
}
"""  # noqa: E501 (Kernel IR lines as the printer writes them)


@pytest.mark.parametrize("row", [0, 1])
def test_two_stores_into_one_buffer(row):
    """y[0, i] = x[i]; y[row, i + 1] = x[i] for i < 8. Row 1: the stores write different rows
    (a phase copy's two planes), so loopnest vectorises the nest. Row 0: y[0, 1..7] is written
    by both stores, and only in program order is the last write x[i] (the vector loop would
    store all first stores, then all second ones, and leave x[i - 1]): loopnest must refuse
    the nest and LLVM writes it, in order."""
    x = np.arange(1, 9, dtype=np.float32)
    cm = loopnest(TWO_STORES.replace("ROW", str(row)))
    want, written = np.zeros((2, 9), np.float32), np.zeros((2, 9), bool)
    for i in range(8):  # the nest, in program order
        want[0, i] = x[i]
        want[row, i + 1] = x[i]
        written[0, i] = written[row, i + 1] = True
    np.testing.assert_array_equal(cm.run(x)[0][written], want[written])  # the rest: unset
    if row:
        assert "copy" in handled(cm)
    else:
        assert "copy" not in handled(cm)
        assert any("may write one element" in f.reason for f in cm.loopnest.fallbacks())


def test_refusals_name_the_problem():
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                       [("x", np.zeros((2, 3), np.float32))], ["y"])
    with pytest.raises(ValueError, match="codegen='llvm'"):
        compile_to("obj", model, codegen="loopnest")
    with pytest.raises(ValueError, match="unknown codegen"):
        compile_to("native", model, codegen="loopnests")
    with pytest.raises(ValueError, match="AVX2"):
        compile_to("native", model, codegen="loopnest", target="s390x")


# ---- memory safety: buffers against unmapped pages --------------------------------------------

class GuardedArray:
    """A float32 array whose bytes touch an unmapped (PROT_NONE) page on one side: any read
    past that end faults, so a test that returns proves no lane read there."""

    def __init__(self, values: np.ndarray, at_end: bool):
        page = mmap.PAGESIZE
        n = values.nbytes
        pages = -(-n // page)
        self.buf = mmap.mmap(-1, (pages + 2) * page)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.buf))
        libc = ctypes.CDLL(None)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        assert libc.mprotect(base, page, 0) == 0
        assert libc.mprotect(base + (pages + 1) * page, page, 0) == 0
        start = page + ((pages * page - n) if at_end else 0)
        self.array = np.frombuffer(self.buf, np.float32, values.size, start).reshape(values.shape)
        self.array[...] = values


@pytest.mark.parametrize("at_end", [True, False])
def test_no_lane_reads_outside_a_buffer(at_end):
    """Vector tails (width 13), padded 3x3 Conv (guarded loads at both edges), a strided
    load, a matmul with a masked column tail reading A, and one packing B (masked last
    strip), on an input touching an unmapped page."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 3, 7, 13)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    m = rng.standard_normal((13, 11)).astype(np.float32)
    q = rng.standard_normal((30, 7)).astype(np.float32)  # 30 rows: B (x) is packed
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Conv", ["x", "w"], ["s"], strides=[2, 2], name="strided"),
             helper.make_node("MatMul", ["x", "m"], ["p"], name="mm"),
             helper.make_node("MatMul", ["q", "x"], ["b"], name="packed"),
             helper.make_node("Relu", ["x"], ["r"], name="relu")]
    model = make_model(nodes, [("x", x)], ["c", "s", "p", "b", "r"],
                       inits=[("w", w), ("m", m), ("q", q)])
    cm = loopnest(model)
    assert {"conv", "strided", "mm", "packed", "relu"} <= handled(cm)
    g = GuardedArray(x, at_end)
    got = cm.run(g.array)
    for o, r in zip(got, ort_run(model, [x]), strict=True):
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("at_end", [True, False])
def test_stride_two_full_vectors_stay_inside_the_buffer(at_end):
    """AveragePool 3x3/2 reads its input at stride 2 (x[2j] and x[2j + 1]); full vectors load
    16 consecutive floats and keep every other one. The odd reads' 16 floats end at the last
    element only if they start one float early; against an unmapped page on either side,
    the run proves which start each read took is inside the input. (A float MaxPool has a
    repair branch loopnest leaves to LLVM, test_pooling_reductions_are_exact.)"""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 2, 5, 32)).astype(np.float32)  # 16 columns a phase: 2 vectors
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1], name="pool")
    model = make_model([node], [("x", x)], ["y"])
    cm = loopnest(model)
    assert "pool" in handled(cm)
    g = GuardedArray(x, at_end)
    np.testing.assert_allclose(cm.run(g.array)[0], ort_run(model, [x])[0], rtol=1e-6,
                               atol=1e-6)


# ---- listing and provenance --------------------------------------------------------------------

def test_asm_stage_is_the_code_written_with_provenance():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((9, 20)).astype(np.float32)
    b = rng.standard_normal((20, 17)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["c"], name="mm"),
             helper.make_node("Relu", ["c"], ["y"], name="act")]
    model = make_model(nodes, [("a", a), ("b", b)], ["y"])
    cm = loopnest(model)
    asm = cm.stages["asm"]
    assert "vfmadd231ps" in asm and "vmaxps" in asm
    prov = provenance(cm)
    lines = asm.splitlines()
    for node, opcode in (("mm", "call"), ("act", "vmaxps")):
        spans = prov[node]["asm"]
        assert spans, node
        text = "\n".join(lines[a - 1] for a0, b0 in spans for a in range(a0, b0 + 1))
        assert opcode in text
    # nothing was left to LLVM: its module defines no function
    assert "define" not in cm.stages["llvm-ir"]


# ---- whole models ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["squeezenet"])
def test_light_model_matches_onnxruntime(name):
    path = cf.light_model_path(name)
    feeds = cf.random_inputs(onnx.load(path))
    cm = loopnest(path)
    # the Softmax (exp), and the MaxPools (their repair branch, test_pooling_reductions_...)
    kinds = {n.name: n.op_type for n in onnx.load(path).graph.node}
    assert {kinds.get(f.node) for f in cm.loopnest.fallbacks()} <= {"Softmax", "MaxPool"}
    got = cm.run(*[v for _, v in feeds])
    ok, worst, reason = cf.compare(got, cf.ort_outputs(path, dict(feeds)))
    assert ok, (worst, reason)


def test_compile_and_the_command_line_choose_the_code_generator(tmp_path, capsys):
    """`compile(codegen=...)` and `python -m compilerkit --codegen` reach the same generator as
    compile_to: the asm stage of loopnest is its own listing (no LLVM function labels for the
    nodes it writes), and the answer equals numpy's."""
    from compilerkit.__main__ import main

    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    w = rng.standard_normal((32, 24)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["t"]),
                        helper.make_node("Relu", ["t"], ["y"])], [("x", x)], ["y"], [("w", w)])
    cm = ck.compile(model, codegen="loopnest", num_threads=1)
    assert handled(cm)  # the loopnest generator wrote at least one node itself
    np.testing.assert_allclose(cm.run(x)[0], np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="unknown codegen"):
        ck.compile(model, codegen="no-such-codegen")
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    assert main([str(path), "--emit", "asm", "--codegen", "loopnest"]) == 0
    listing = capsys.readouterr().out
    assert main([str(path), "--emit", "asm"]) == 0
    assert capsys.readouterr().out != listing
    assert main([str(path), "--codegen", "gcc"]) == 1
    assert "--codegen" in capsys.readouterr().err
