"""onnx-mlir issue 2851 made impossible: constants reach a big-endian image in big-endian order.

The model's Gemm weight/bias (float32) and Add constant (int64) have no byte pattern that reads
the same reversed, so a constant whose bytes were not swapped would change the results. The
compiled model matches the host and numpy bit for bit on s390x and ppc64; the object's
read-only data holds the constants' big-endian bytes and not their little-endian ones; and the
buggy variant (`compile_with_host_bytes`: raw little-endian host bytes, as onnx-mlir emits them
when cross-compiling) does hold the little-endian bytes and gives wrong results.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile
from emuhelpers import (
    BIAS,
    OFFSETS,
    TARGETS,
    WEIGHT,
    constants_inputs,
    constants_model,
)

import compilerkit as ck
from mlsys_workbench.experiments.endianness import compile_with_host_bytes, object_bytes


def _expected():
    x, n = constants_inputs()
    # numpy, independently of compilerkit: float32 Gemm (then compared with a tolerance only
    # against numpy; the host comparison is exact).
    return x @ WEIGHT + BIAS, n + OFFSETS


def _data_bytes(obj: bytes) -> bytes:
    """The contents of every .rodata*/.data* section of an ELF object (.lrodata: the host's
    large code model)."""
    elf = ELFFile(io.BytesIO(obj))
    return b"".join(s.data() for s in elf.iter_sections()
                    if s.name.startswith((".rodata", ".data", ".lrodata", ".ldata"))
                    and s["sh_type"] != "SHT_NOBITS")


def test_constants_are_not_palindromes():
    for array in (WEIGHT, BIAS, OFFSETS):
        for value in array.reshape(-1):
            raw = value.tobytes()
            assert raw != raw[::-1]


@pytest.mark.parametrize("target", TARGETS)
def test_constants_model_matches_host_bit_for_bit(target):
    x, n = constants_inputs()
    host_y, host_z = ck.compile(constants_model(), opt_level=3).run(x, n)
    y, z = ck.compile(constants_model(), target=target, opt_level=3).run(x, n)
    assert y.dtype == np.float32 and z.dtype == np.int64
    assert y.tobytes() == host_y.tobytes()
    assert np.array_equal(z, host_z)
    want_y, want_z = _expected()
    np.testing.assert_allclose(y, want_y, rtol=1e-6)
    assert np.array_equal(z, want_z)


@pytest.mark.parametrize("target", TARGETS)
def test_object_holds_constants_big_endian(target):
    # -O0: at -O3 LLVM may fold a small constant into instructions; here it stays data.
    model = ck.compile(constants_model(), target=target, opt_level=0, asm=False)
    data = _data_bytes(object_bytes(model))
    for array in (WEIGHT, BIAS, OFFSETS):
        big = array.astype(array.dtype.newbyteorder(">")).tobytes()
        little = array.astype(array.dtype.newbyteorder("<")).tobytes()
        assert big in data, f"{array.dtype} constant not found big-endian in {target} .rodata"
        assert little not in data


def test_host_object_holds_constants_little_endian():
    data = _data_bytes(object_bytes(ck.compile(constants_model(), opt_level=0, asm=False)))
    assert WEIGHT.astype("<f4").tobytes() in data and OFFSETS.astype("<i8").tobytes() in data


@pytest.mark.parametrize("target", TARGETS)
def test_raw_host_bytes_give_wrong_results(target):
    """The 2851 failure mode, built on purpose: it is visible, in the bytes and the numbers."""
    x, n = constants_inputs()
    buggy = compile_with_host_bytes(constants_model(), target=target, opt_level=0)
    data = _data_bytes(object_bytes(buggy))
    assert WEIGHT.astype("<f4").tobytes() in data  # the host's bytes, unswapped
    y, z = buggy.run(x, n)
    want_y, want_z = _expected()
    # Each int64 offset reads byte-reversed: 258 = 0x0102 becomes 0x0201 << 48.
    swapped = OFFSETS.byteswap()
    assert np.array_equal(z, n + swapped) and not np.array_equal(z, want_z)
    assert not np.allclose(y, want_y, rtol=1e-3, equal_nan=False)


def test_buggy_variant_is_harmless_on_a_little_endian_host():
    x, n = constants_inputs()
    y, z = compile_with_host_bytes(constants_model(), target="host").run(x, n)
    want_y, want_z = _expected()
    np.testing.assert_allclose(y, want_y, rtol=1e-6)
    assert np.array_equal(z, want_z)
