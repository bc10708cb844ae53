"""The micro-kernel's prefetch of the next panel (codegen/microkernel.py, NEXT_PANEL): where B is
read in place from strips stored one after another, the k loops fetch exactly the lines of the
next panel (kc rows further on), every one of them; where B was packed on the stack (or is read
with a row stride of its own) they fetch nothing.

The kernel is built alone and run through MCJIT with its `llvm.prefetch` calls renamed to a
recorder, so the test sees the addresses the code asks for (the products are checked too)."""

import ctypes

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest

from compilerkit.backends.host import HostBackend, host_target
from compilerkit.codegen import microkernel as mk

LINE = 64
RECORD = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                          ctypes.c_int32)
I64, PTR = ctypes.c_int64, ctypes.c_void_p
ARGS = [PTR, PTR, PTR] + [I64] * 13 + [PTR, I64, I64, I64, ctypes.c_float, ctypes.c_float,
                                       PTR]


@pytest.fixture(scope="module")
def kernels():
    """rows variant -> (kernel entry, list the recorder appends addresses to); the engine and
    the callback live as long as the module's tests."""
    lanes = host_target().vector_width
    seen: list = []
    recorder = RECORD(lambda addr, rw, locality, kind: seen.append(addr))
    llvm.add_symbol("ck_test_prefetch", ctypes.cast(recorder, ctypes.c_void_p).value)
    m = ir.Module()
    m.triple = llvm.get_process_triple()
    names = {}
    for rows in ("general", "unit"):
        fn = mk.matmul_kernel(m, ir.FloatType(), lanes, rows)
        fn.linkage = "external"
        names[rows] = fn.name
    text = str(m)
    assert "llvm.prefetch.p0i8" in text, "the kernel prefetches nothing"
    mod = llvm.parse_assembly(text.replace("llvm.prefetch.p0i8", "ck_test_prefetch"))
    engine = llvm.create_mcjit_compiler(mod, HostBackend().machine(2))
    engine.finalize_object()
    fns = {rows: ctypes.CFUNCTYPE(None, *ARGS)(engine.get_function_address(name))
           for rows, name in names.items()}
    yield fns, seen, lanes
    del engine, recorder


def aligned(n):
    """n float32 zeros at a 64-byte boundary (a line per 16 floats)."""
    raw = np.zeros(n + LINE // 4, np.float32)
    skip = (-raw.ctypes.data % LINE) // 4
    return raw[skip:skip + n]


def call(fn, A, B, C, m, n, k, sa_r, sa_k, ldb, ldc, table=None):
    fn(A.ctypes.data, B.ctypes.data, C.ctypes.data, 0, m, 0, n, 0, k, 0, 0, 0, sa_r, sa_k,
       ldb, ldc, None, 1, k, 0, 0.0, 0.0, None if table is None else table.ctypes.data)


def lines_of(base, first, count):
    """The line addresses of `count` float32 from element `first` of the buffer at `base`."""
    lo, hi = base + 4 * first, base + 4 * (first + count)
    return set(range(lo - lo % LINE, hi, LINE))


@pytest.mark.parametrize("m", [16, 26, 7])
@pytest.mark.parametrize("k", [64, 9])
def test_strips_in_place_fetch_exactly_the_next_panel(kernels, m, k):
    """General rows (sa_r = k) over one strip of B read in place (ldb = the strip's width):
    the prefetched lines are the next panel's, all of them; the product is right."""
    fns, seen, lanes = kernels
    nr = mk.NV * lanes
    rng = np.random.default_rng(m * k)
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = aligned(2 * k * nr)
    B[:k * nr] = rng.standard_normal(k * nr)
    C = np.zeros((m, nr), np.float32)
    seen.clear()
    call(fns["general"], A, B, C, m, nr, k, k, 1, nr, nr)
    np.testing.assert_allclose(C, A @ B[:k * nr].reshape(k, nr), rtol=1e-5, atol=1e-4)
    assert set(seen) == lines_of(B.ctypes.data, k * nr, k * nr)


@pytest.mark.parametrize("m", [13, 26, 40])
@pytest.mark.parametrize("one_vector", [False, True])
def test_unit_rows_fetch_the_next_panel_of_their_strip(kernels, m, one_vector):
    """Rows one element apart (A's columns through the table, as the transposed GEMMs and
    the tap schedule call it): a strip of NR columns, or one vector (`half_rows`), read in
    place; the next panel's lines, all of them."""
    fns, seen, lanes = kernels
    width = lanes if one_vector else mk.NV * lanes
    k = 48
    rng = np.random.default_rng(m)
    At = rng.standard_normal((k, m)).astype(np.float32)  # A[r, kk] at r + table[kk]
    table = np.arange(k, dtype=np.int64) * m
    B = aligned(2 * k * width)
    B[:k * width] = rng.standard_normal(k * width)
    C = np.zeros((m, width), np.float32)
    seen.clear()
    call(fns["unit"], At, B, C, m, width, k, 1, m, width, width, table)
    np.testing.assert_allclose(C, At.T @ B[:k * width].reshape(k, width), rtol=1e-5,
                               atol=1e-4)
    assert set(seen) == lines_of(B.ctypes.data, k * width, k * width)


def test_packed_or_strided_b_fetches_nothing(kernels):
    """B wider than a strip (ldb = 3 strips): with enough rows the kernel packs it on its
    stack, with few it reads it at its own stride; neither has a next panel to fetch."""
    fns, seen, lanes = kernels
    nr = mk.NV * lanes
    k, n = 32, 3 * nr
    rng = np.random.default_rng(0)
    B = rng.standard_normal((k, n)).astype(np.float32)
    for m in (mk.PACK_MIN_ROWS, 3):
        A = rng.standard_normal((m, k)).astype(np.float32)
        C = np.zeros((m, n), np.float32)
        seen.clear()
        call(fns["general"], A, B, C, m, n, k, k, 1, n, n)
        np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-4)
        assert seen == [], m
