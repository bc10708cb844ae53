"""The shared matmul micro-kernel (codegen/microkernel.py) and its schedule (tile_matmul.py):
packed B panel, 6 x 2-vector register blocks, 4/2/1-row and narrow-strip tails, the one-row
(x @ W) and one-column (W @ x) paths, tiles larger than the stack panel.

References are independent: numpy in float64 (and onnxruntime for the float32 ONNX cases).
The bit-identity properties check the kernel's promise that blocking, packing and vector width
never change a result bit (every C element is one chain of fused multiply-adds in k order), by
running the same product under different schedules and widths and wanting equal arrays.
"""

import numpy as np
import pytest
from ckhelpers import make_model, ort_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

import compilerkit as ck
from compilerkit.krnl_passes.tile_matmul import PANEL, UNIT_TK, tile_matmul, tile_sizes

SETTINGS = settings(max_examples=8, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
# Dimensions that reach every path: 1 (one row / one column), below and above the 6-row block
# and the 16-column strip, a 1-column tail (49 = 3 x 16 + 1), a multiple of both.
DIMS = st.sampled_from([1, 2, 3, 5, 6, 7, 11, 13, 16, 17, 24, 31, 49])
KS = st.sampled_from([1, 2, 7, 16, 17, 33, 64, 100])


def close(got, a, b, dtype, c=0.0):
    """|got - (a @ b + c)| within a rounding bound that grows with k (float64 reference)."""
    c = np.asarray(c, np.float64)
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64) + c
    bound = np.abs(np.asarray(a, np.float64)) @ np.abs(np.asarray(b, np.float64)) + np.abs(c)
    eps = np.finfo(dtype).eps
    k = a.shape[-1]
    assert got.shape == ref.shape
    assert got.dtype == dtype
    assert np.all(np.abs(got - ref) <= (k + 2) * eps * bound + 1e-30), np.abs(got - ref).max()


def run(model, arrays):
    out = ck.compile(model, opt_level=3, asm=False).run(*arrays)
    return out[0]


@given(m=DIMS, n=DIMS, k=KS, dtype=st.sampled_from([np.float32, np.float64]),
       seed=st.integers(0, 2**16))
@SETTINGS
def test_matmul_matches_numpy(m, n, k, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", a), ("b", b)],
                       ["y"])
    got = run(model, [a, b])
    close(got, a, b, dtype)
    if dtype == np.float32:
        np.testing.assert_allclose(got, ort_run(model, [a, b])[0], rtol=1e-4, atol=1e-5)


@given(m=DIMS, n=DIMS, k=KS, trans_a=st.booleans(), trans_b=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
@SETTINGS
def test_gemm_strided_a_matches_numpy(m, n, k, trans_a, trans_b, dtype, seed):
    # transA: the kernel reads A with row stride 1 and k stride M (a strided A).
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = rng.standard_normal((n,)).astype(dtype)
    ins = [("a", a.T.copy() if trans_a else a), ("b", b.T.copy() if trans_b else b), ("c", c)]
    model = make_model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=int(trans_a),
                                         transB=int(trans_b))], ins, ["y"])
    got = run(model, [x for _, x in ins])
    close(got, a, b, dtype, c)


@given(batch=st.sampled_from([1, 2, 3]), m=DIMS, n=DIMS, k=KS, broadcast_b=st.booleans(),
       seed=st.integers(0, 2**16))
@SETTINGS
def test_batched_matmul_offsets_match_numpy(batch, m, n, k, broadcast_b, seed):
    # Each batch entry is one kernel call with nonzero a/b/c element offsets.
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((k, n) if broadcast_b else (batch, k, n)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", a), ("b", b)],
                       ["y"])
    got = run(model, [a, b])
    for i in range(batch):
        close(got[i], a[i], b if broadcast_b else b[i], np.float32)


def scheduled(model, simd, tile):
    """Kernel IR at -O1 (no schedule: untiled matmul nests), tiled by hand with `tile` and
    `simd`, compiled."""
    k = ck.lower(ck.optimize_onnx(ck.import_onnx(model)), opt_level=1)
    assert tile_matmul(k, simd=simd, tile=tile) >= 1
    return ck.compile_kernel(k, opt_level=3, asm=False)


@given(m=DIMS, n=st.sampled_from([2, 5, 16, 17, 49]), k=KS, seed=st.integers(0, 2**16),
       tile=st.tuples(st.integers(1, 40), st.integers(1, 70), st.integers(1, 120)),
       simd=st.sampled_from([4, 8, 16]))
@SETTINGS
def test_schedule_and_vector_width_change_no_bit(m, n, k, seed, tile, simd):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", a), ("b", b)],
                       ["y"])
    default = run(model, [a, b])
    other = scheduled(model, simd, tile).run(a, b)[0]
    close(other, a, b, np.float32)
    assert np.array_equal(default, other)


@pytest.mark.parametrize("m,n,k", [(13, 300, 2100), (14, 40, 3000), (1, 37, 5000)])
def test_tile_larger_than_the_stack_panel_is_cut_into_pieces(m, n, k):
    # One tile covering the whole product: more than PANEL elements of B, k over KMAX. The
    # kernel must split it (not overflow its stack buffer) and still agree bit for bit with
    # the default schedule.
    assert n * k > PANEL
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", a), ("b", b)],
                       ["y"])
    whole = scheduled(model, 8, (m, n, k)).run(a, b)[0]
    close(whole, a, b, np.float32)
    assert np.array_equal(whole, run(model, [a, b]))


def test_one_column_product_is_the_same_at_every_vector_width():
    # W @ x with one column (a 1x1 conv on 1x1 pixels) uses dot products along k; their
    # order is fixed in bytes, not in the target's lanes, so every width gives the same bits.
    rng = np.random.default_rng(4)
    a = rng.standard_normal((29, 203)).astype(np.float32)
    b = rng.standard_normal((203, 1)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", a), ("b", b)],
                       ["y"])
    outs = [scheduled(model, simd, (29, 1, 203)).run(a, b)[0] for simd in (4, 8, 16)]
    close(outs[0], a, b, np.float32)
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])


def test_tile_sizes_follow_the_shape():
    # Large: (TM, TN, TK) = (480, 128, 256); short K widens the panel; one row takes all of K;
    # a narrow B takes all of K; every size clamped to its dimension.
    assert tile_sizes(1024, 1024, 1024) == (480, 128, 256)
    assert tile_sizes(96, 12544, 16) == (96, 512, 16)
    assert tile_sizes(1, 1000, 2048) == (1, 1000, 2048)
    assert tile_sizes(1000, 1, 2048) == (480, 1, 2048)
    tm, tn, tk = tile_sizes(64, 3136, 576)
    assert (tm, tn, tk) == (64, 128, 256) and tn * tk <= PANEL
    # A's rows one element apart (the tap schedule): K in chunks of UNIT_TK, a wider panel
    assert tile_sizes(3248, 32, 1152, unit_rows=True) == (480, 32, UNIT_TK)
    assert tile_sizes(196, 1024, 256, unit_rows=True) == (196, 256, UNIT_TK)


def test_in_strips_by_hand():
    """matmul.in_strips: B [K, N] as [ceil(N / w), K, w], strip s = B[:, s*w : (s+1)*w], the
    last zero-padded; leading axes (Winograd's positions) carried along."""
    from compilerkit.lowering.matmul import in_strips
    bm = np.arange(2 * 40, dtype=np.float32).reshape(2, 40)  # B[k, n] = 40 k + n
    s = in_strips(bm, 32)
    assert s.shape == (2, 2, 32)
    assert s[0, 1, 5] == 45 and s[1, 0, 7] == 39 and s[1, 1, 0] == 72
    assert np.all(s[1, :, 8:] == 0)
    batched = in_strips(np.stack([bm, -bm]), 32)
    assert batched.shape == (2, 2, 2, 32) and batched[1, 0, 1, 5] == -45
    assert in_strips(bm, 16).shape == (3, 2, 16)


def test_strip_width_follows_the_target():
    """Two vectors of the target the lowering is for: AVX-512 32 columns, AVX2 16, the 4-lane
    emulated targets 8; the GPU (1 lane) keeps B whole; the opt driver's default is 32."""
    from compilerkit.backends import get_backend
    from compilerkit.backends.emulated import emulated_target
    from compilerkit.lowering import LowerToKrnlPass
    from compilerkit.lowering.matmul import strip_width
    from compilerkit.passes import kernel_pipeline

    for lanes, want in [(16, 32), (8, 16), (4, 8), (1, 100)]:
        assert strip_width(100, lanes) == want
    assert strip_width(0, 1) == 1  # never a width of 0 to divide by
    assert strip_width(100, LowerToKrnlPass().lanes) == 32
    for t in (get_backend("host").target, emulated_target("s390x")):
        assert kernel_pipeline(t, 3)[0].lanes == t.vector_width


@pytest.mark.parametrize("op,x_shape,w_shape,extra", [
    ("MatMul", (3, 0), (0, 5), {}), ("MatMul", (3, 4), (4, 0), {}), ("MatMul", (0, 4), (4, 5), {}),
    ("Gemm", (3, 0), (0, 5), {}), ("Gemm", (3, 0), (0, 5), {"beta": 2.0, "c": True})])
def test_products_with_an_empty_dimension(op, x_shape, w_shape, extra):
    """M, N or K of 0: onnxruntime's answer (zeros, beta * C, or an empty array), where the
    tiling pass once divided by zero or verified a tile of size 0."""
    inputs, inits = ["x", "w"], [("w", np.ones(w_shape, np.float32))]
    attrs = {k: v for k, v in extra.items() if k != "c"}
    if extra.get("c"):
        inputs.append("c")
        inits.append(("c", np.arange(w_shape[1], dtype=np.float32)))
    x = np.ones(x_shape, np.float32)
    model = make_model([helper.make_node(op, inputs, ["y"], **attrs)], [("x", x)], ["y"], inits)
    got = ck.compile(model, input_shapes={"x": list(x_shape)}).run(x)[0]
    ref = ort_run(model, [x])[0]
    assert got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)


def _kernels(cm) -> set:
    """The micro-kernel variants a compiled model calls (from its LLVM IR)."""
    import re

    return set(re.findall(r"@\"?(ck_matmul_f(?:32|64)_v\d+(?:_unit)?)\"?\(", str(
        cm.stages["llvm-ir"])))


@pytest.mark.parametrize("m", [12, 13, 14, 29, 43])
def test_rows_one_element_apart_give_the_general_kernels_bits(m):
    # Gemm transA = 1: A's rows one element apart, the "unit" variant (13-row blocks, 8/4/2/1
    # tails, columns by table, a narrow strip at full width); transA = 0: the general one.
    # The same fused multiply-add chains: the same bits.
    rng = np.random.default_rng(m)
    for n, k in ((17, 100), (64, 7), (49, 300)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        got = {}
        for trans in (0, 1):
            ins = [("a", a.T.copy() if trans else a)]
            model = make_model([helper.make_node("Gemm", ["a", "b"], ["y"], transA=trans)],
                               ins, ["y"], [("b", b)])
            cm = ck.compile(model, asm=False)
            assert any(name.endswith("_unit") for name in _kernels(cm)) == bool(trans)
            got[trans] = cm.run(ins[0][1])[0]
        close(got[1], a, b, np.float32)
        assert np.array_equal(got[0], got[1])


@pytest.mark.parametrize("m", [1, 12, 26, 27, 40, 53])
@pytest.mark.parametrize("k", [7, 100, 1100])
def test_one_vector_products_give_the_general_kernels_bits(m, k):
    # Rows one element apart (Gemm transA = 1) and 16 columns with B's rows 16 apart: on a
    # 16-lane host the unit variant's one-vector blocks (`half_rows`: 26, 13, 8, 4, 2, 1
    # rows; k past the stack panel's KMAX in pieces); elsewhere its strips. The general
    # variant's bits either way.
    rng = np.random.default_rng(m * k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, 16)).astype(np.float32)
    c = rng.standard_normal(16).astype(np.float32)
    got = {}
    for trans in (0, 1):
        ins = [("a", a.T.copy() if trans else a)]
        model = make_model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=trans)],
                           ins, ["y"], [("b", b), ("c", c)])
        got[trans] = ck.compile(model, asm=False).run(ins[0][1])[0]
    close(got[1], a, b, np.float32, c=c)
    assert np.array_equal(got[0], got[1])


def test_a_sum_too_long_for_a_table_takes_the_general_kernel():
    # Rows one element apart but K past UNIT_TABLE_MAX: the general variant (no table of K
    # entries in the module), same bits as the row-major product.
    from compilerkit.codegen.microkernel import UNIT_TABLE_MAX

    rng = np.random.default_rng(8)
    m, n, k = 3, 2, UNIT_TABLE_MAX + 1
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    got = {}
    for trans in (0, 1):
        ins = [("a", a.T.copy() if trans else a)]
        model = make_model([helper.make_node("Gemm", ["a", "b"], ["y"], transA=trans)], ins,
                           ["y"], [("b", b)])
        cm = ck.compile(model, asm=False)
        assert not any(name.endswith("_unit") for name in _kernels(cm))
        got[trans] = cm.run(ins[0][1])[0]
    close(got[1], a, b, np.float32)
    assert np.array_equal(got[0], got[1])


def test_a_kernel_is_built_once_and_printed_from_its_kept_text(monkeypatch):
    """A second module gets the kernel's kept body (no rebuild) and the same text, so the
    host's machine-code cache (split.HELPER_OBJECTS) finds it; a changed block size rebuilds."""
    import llvmlite.binding as llvm
    import llvmlite.ir as ir

    from compilerkit.codegen import microkernel as mk

    monkeypatch.setattr(mk, "_BODIES", {})

    def build():
        m = ir.Module()
        fns = [mk.matmul_kernel(m, ir.FloatType(), 16, rows) for rows in mk.ROWS]
        return m, fns

    first, made = build()
    second, kept = build()
    assert not any(isinstance(f, mk._PrintedFunction) for f in made)
    assert all(isinstance(f, mk._PrintedFunction) and not f.is_declaration for f in kept)
    assert str(first) == str(second)
    llvm.parse_assembly(str(second)).verify()
    monkeypatch.setattr(mk, "WIDE_ROWS", 12)
    third, rebuilt = build()
    assert not any(isinstance(f, mk._PrintedFunction) for f in rebuilt)
    assert str(third) != str(first)  # the unit variant's register block changed


@pytest.mark.parametrize("trans", [0, 1])
def test_k_taken_several_at_a_time_changes_no_bit(monkeypatch, trans):
    """Full register blocks run k K_UNROLL at a time, the rest one at a time: the same chain
    of fused multiply-adds in k order, so the same bits as K_UNROLL = 1, for every remainder
    of k, in the general variant (trans 0) and the unit one (trans 1), and across k pieces
    (k past the tile's TK)."""
    from compilerkit.backends import split
    from compilerkit.codegen import microkernel as mk

    assert mk.K_UNROLL > 1
    rng = np.random.default_rng(11 + trans)
    cases = [(m, n, k) for m, n, k in ((29, 64, 1), (29, 64, 3), (40, 33, 4), (17, 64, 5),
                                       (64, 70, 9), (48, 96, 255), (30, 40, 258), (50, 64, 517))]
    got, kernels = {}, set()
    for unroll in (mk.K_UNROLL, 1):
        monkeypatch.setattr(mk, "K_UNROLL", unroll)
        monkeypatch.setattr(mk, "_BODIES", {})  # build the kernel afresh with this unroll
        monkeypatch.setattr(split, "HELPER_OBJECTS", {})
        for m, n, k in cases:
            a = rng.standard_normal((m, k)).astype(np.float32) if unroll > 1 else got[
                (m, n, k)][1]
            b = rng.standard_normal((k, n)).astype(np.float32) if unroll > 1 else got[
                (m, n, k)][2]
            ins = [("a", a.T.copy() if trans else a)]
            model = make_model([helper.make_node("Gemm", ["a", "b"], ["y"], transA=trans)],
                               ins, ["y"], [("b", b)])
            cm = ck.compile(model, asm=False)
            kernels |= _kernels(cm)
            y = cm.run(ins[0][1])[0]
            if unroll > 1:
                close(y, a, b, np.float32)
                got[(m, n, k)] = (y, a, b)
            else:
                assert np.array_equal(got[(m, n, k)][0], y), (m, n, k)
    assert any(name.endswith("_unit") == bool(trans) for name in kernels)


@pytest.mark.parametrize("rows", ["general", "unit"])
def test_full_register_blocks_keep_their_accumulators_in_registers(rows):
    """The k loop of a full register block (K_UNROLL k per trip) holds every accumulator in a
    vector register: no vector is stored to the stack inside it (a spilled accumulator is
    stored back at every k; a value that stays the same may be reloaded). With 14-row unit
    blocks LLVM spilled two accumulators at every k once B's vectors were loaded two k ahead:
    3-10% slower. On a host with 512-bit vectors, where the blocks are widest."""
    import re

    import llvmlite.binding as llvm
    import llvmlite.ir as ir

    from compilerkit.backends.base import run_default_pipeline
    from compilerkit.backends.host import HostBackend, host_target
    from compilerkit.codegen import microkernel as mk

    if host_target().vector_width < 16:
        pytest.skip("the host has no 512-bit vectors")
    m = ir.Module()
    m.triple = llvm.get_process_triple()
    mk.matmul_kernel(m, ir.FloatType(), 16, rows).linkage = "external"
    backend = HostBackend()
    mod = llvm.parse_assembly(str(m))
    machine = backend.machine(3)
    run_default_pipeline(machine, 3, mod)
    asm = machine.emit_assembly(mod)
    block_rows = mk.WIDE_ROWS if rows == "unit" else mk.block_rows(ir.FloatType(), 16)
    fmas = mk.K_UNROLL * mk.NV * block_rows
    loops = [b for b in re.split(r"\n(?=\.LBB)", asm) if b.count("vfmadd") >= fmas]
    assert loops, f"no block with the {fmas} multiply-adds of a full {rows} block"
    stores = re.compile(r"vmov\w*\s+%zmm\d+, -?\d*\(%rsp\)")
    spills = [len(stores.findall(b)) for b in loops]
    assert not any(spills), f"vectors stored to the stack in the {rows} k loop: {spills}"
