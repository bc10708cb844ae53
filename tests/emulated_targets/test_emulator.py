"""Big-endian machine code (s390x, ppc64) compiled by llvmlite and run in the Unicorn emulator.

Each test hand-writes LLVM IR, compiles it with llvmlite's full -O2 pipeline for both targets
(vectorisers on, so z13 vector and POWER8 VSX instructions appear), loads the object with
`elf_loader`, runs it with `EmulatedMachine`, and compares with numpy or Python computed
independently.  Inputs and outputs cross the emulator boundary as big-endian bytes (`>f4`,
`>i8`), so a byte-order slip anywhere (a constant in .rodata, a relocation, an argument)
changes the numbers.  Float constants are chosen so that none of their byte patterns reads the
same reversed.
"""

from __future__ import annotations

import io
import struct
import time

import llvmlite.binding as llvm
import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

from compilerkit.backends.elf_loader import ElfLoadError, load_object
from compilerkit.backends.emulator import EmulatedMachine, EmulationFault, EmulationLimit

TARGETS = {
    "s390x": ("s390x-ibm-linux", "z13"),
    "ppc64": ("powerpc64-unknown-linux-gnu", "pwr8"),
}
ARCHES = sorted(TARGETS)

COEFFS = np.array([1.7, -0.3125, 3.14159274, 1.0e-3, -2.5e4, 0.7, 6.02e-5, -1.1], np.float32)
DCOEFFS = np.array([2.718281828459045, -1.0e-7, 1234.5678, -0.1], np.float64)
K1, K2, K3 = np.float32(0.3125), np.float32(1.7), np.float32(0.75)


def _f32(value) -> str:
    """LLVM IR spells a float constant as the hex of the equal double."""
    return _f64(np.float32(value))


def _f64(value) -> str:
    return f"0x{struct.unpack('>Q', struct.pack('>d', float(value)))[0]:016X}"


IR = f"""
@coeffs = internal constant [8 x float] [{", ".join(f"float {_f32(c)}" for c in COEFFS)}]
@dcoeffs = internal constant [4 x double] [{", ".join(f"double {_f64(c)}" for c in DCOEFFS)}]

; out[i] = ((x*coeffs[i%8] + y) * x - K1*y) / K2
define void @poly(ptr noalias %x, ptr noalias %y, ptr noalias %out, i64 %n) {{
entry:
  %empty = icmp eq i64 %n, 0
  br i1 %empty, label %exit, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %px = getelementptr float, ptr %x, i64 %i
  %vx = load float, ptr %px
  %py = getelementptr float, ptr %y, i64 %i
  %vy = load float, ptr %py
  %k = and i64 %i, 7
  %pc = getelementptr [8 x float], ptr @coeffs, i64 0, i64 %k
  %c = load float, ptr %pc
  %t = fmul float %vx, %c
  %u = fadd float %t, %vy
  %v = fmul float %u, %vx
  %w = fmul float %vy, {_f32(K1)}
  %r = fsub float %v, %w
  %q = fdiv float %r, {_f32(K2)}
  %po = getelementptr float, ptr %out, i64 %i
  store float %q, ptr %po
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}}

; out[i] = x*dcoeffs[i%4] + sqrt(|x|)
define void @dpoly(ptr noalias %x, ptr noalias %out, i64 %n) {{
entry:
  %empty = icmp eq i64 %n, 0
  br i1 %empty, label %exit, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %px = getelementptr double, ptr %x, i64 %i
  %vx = load double, ptr %px
  %k = and i64 %i, 3
  %pc = getelementptr [4 x double], ptr @dcoeffs, i64 0, i64 %k
  %c = load double, ptr %pc
  %t = fmul double %vx, %c
  %a = call double @llvm.fabs.f64(double %vx)
  %s = call double @llvm.sqrt.f64(double %a)
  %r = fadd double %t, %s
  %po = getelementptr double, ptr %out, i64 %i
  store double %r, ptr %po
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}}

; out[i] = ((a*b + (a >>s 3)) ^ (b udiv 7)) - (a srem 13)
define void @imath(ptr noalias %a, ptr noalias %b, ptr noalias %out, i64 %n) {{
entry:
  %empty = icmp eq i64 %n, 0
  br i1 %empty, label %exit, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %pa = getelementptr i64, ptr %a, i64 %i
  %va = load i64, ptr %pa
  %pb = getelementptr i64, ptr %b, i64 %i
  %vb = load i64, ptr %pb
  %m = mul i64 %va, %vb
  %s = ashr i64 %va, 3
  %t = add i64 %m, %s
  %d = udiv i64 %vb, 7
  %x = xor i64 %t, %d
  %r = srem i64 %va, 13
  %y = sub i64 %x, %r
  %po = getelementptr i64, ptr %out, i64 %i
  store i64 %y, ptr %po
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}}

; FNV-1a-like fold with a rotate; returns the hash (a loop-carried i64 dependence).
define i64 @hash(ptr %a, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %h = phi i64 [-3750763034362895579, %entry], [%h3, %loop]
  %pa = getelementptr i64, ptr %a, i64 %i
  %va = load i64, ptr %pa
  %h1 = xor i64 %h, %va
  %h2 = mul i64 %h1, 1099511628211
  %rot = call i64 @llvm.fshl.i64(i64 %h2, i64 %h2, i64 29)
  %h3 = xor i64 %rot, %i
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret i64 %h3
}}

; An internal call per element: out[i] = blend(x[i], y[i]) = x*K3 + y
define internal float @blend(float %a, float %b) noinline {{
  %m = fmul float %a, {_f32(K3)}
  %s = fadd float %m, %b
  ret float %s
}}
define void @blend_all(ptr %x, ptr %y, ptr %out, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %px = getelementptr float, ptr %x, i64 %i
  %vx = load float, ptr %px
  %py = getelementptr float, ptr %y, i64 %i
  %vy = load float, ptr %py
  %r = call float @blend(float %vx, float %vy)
  %po = getelementptr float, ptr %out, i64 %i
  store float %r, ptr %po
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}}

; Recursion: nested frames, saved return addresses, callee-saved registers.
define internal i64 @fib(i64 %n) noinline {{
entry:
  %small = icmp ult i64 %n, 2
  br i1 %small, label %base, label %rec
base:
  ret i64 %n
rec:
  %n1 = sub i64 %n, 1
  %n2 = sub i64 %n, 2
  %f1 = call i64 @fib(i64 %n1)
  %f2 = call i64 @fib(i64 %n2)
  %s = add i64 %f1, %f2
  ret i64 %s
}}
define i64 @fib_entry(i64 %n) {{
  %r = call i64 @fib(i64 %n)
  ret i64 %r
}}

; A zero-fill loop: -O2 turns it into a call to memset.
define void @zero_fill(ptr %p, i64 %n) {{
entry:
  %empty = icmp eq i64 %n, 0
  br i1 %empty, label %exit, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %pp = getelementptr float, ptr %p, i64 %i
  store float 0.0, ptr %pp
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}}

define void @copy(ptr %dst, ptr %src, i64 %nbytes) {{
  call void @llvm.memcpy.p0.p0.i64(ptr %dst, ptr %src, i64 %nbytes, i1 false)
  ret void
}}

define void @move(ptr %dst, ptr %src, i64 %nbytes) {{
  call void @llvm.memmove.p0.p0.i64(ptr %dst, ptr %src, i64 %nbytes, i1 false)
  ret void
}}

; Twelve arguments: more than either ABI passes in registers (s390x 5, ppc64 8).
define i64 @many_args(i64 %a0, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, i64 %a6,
                      i64 %a7, i64 %a8, i64 %a9, i64 %a10, ptr %out) {{
  %w0 = mul i64 %a0, 1
  %w1 = mul i64 %a1, 2
  %w2 = mul i64 %a2, 3
  %w3 = mul i64 %a3, 4
  %w4 = mul i64 %a4, 5
  %w5 = mul i64 %a5, 6
  %w6 = mul i64 %a6, 7
  %w7 = mul i64 %a7, 8
  %w8 = mul i64 %a8, 9
  %w9 = mul i64 %a9, 10
  %w10 = mul i64 %a10, 11
  store i64 %w0, ptr %out
  %o1 = getelementptr i64, ptr %out, i64 1
  store i64 %w1, ptr %o1
  %o2 = getelementptr i64, ptr %out, i64 2
  store i64 %w2, ptr %o2
  %o3 = getelementptr i64, ptr %out, i64 3
  store i64 %w3, ptr %o3
  %o4 = getelementptr i64, ptr %out, i64 4
  store i64 %w4, ptr %o4
  %o5 = getelementptr i64, ptr %out, i64 5
  store i64 %w5, ptr %o5
  %o6 = getelementptr i64, ptr %out, i64 6
  store i64 %w6, ptr %o6
  %o7 = getelementptr i64, ptr %out, i64 7
  store i64 %w7, ptr %o7
  %o8 = getelementptr i64, ptr %out, i64 8
  store i64 %w8, ptr %o8
  %o9 = getelementptr i64, ptr %out, i64 9
  store i64 %w9, ptr %o9
  %o10 = getelementptr i64, ptr %out, i64 10
  store i64 %w10, ptr %o10
  %s1 = add i64 %w0, %w1
  %s2 = add i64 %s1, %w2
  %s3 = add i64 %s2, %w3
  %s4 = add i64 %s3, %w4
  %s5 = add i64 %s4, %w5
  %s6 = add i64 %s5, %w6
  %s7 = add i64 %s6, %w7
  %s8 = add i64 %s7, %w8
  %s9 = add i64 %s8, %w9
  %s10 = add i64 %s9, %w10
  ret i64 %s10
}}

; Sequential float accumulation: sum of 1.25*i for i < n (the speed benchmark).
define void @accumulate(ptr %out, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %acc = phi float [0.0, %entry], [%acc2, %loop]
  %f = uitofp i64 %i to float
  %m = fmul float %f, 1.25
  %acc2 = fadd float %acc, %m
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  store float %acc2, ptr %out
  ret void
}}

; Never returns: the volatile store keeps the loop from being optimised away.
define void @spin(ptr %p) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  store volatile i64 %i, ptr %p
  %next = add i64 %i, 1
  br label %loop
}}

define void @poke(ptr %p) {{
  store volatile i32 1, ptr %p
  ret void
}}

declare double @llvm.fabs.f64(double)
declare double @llvm.sqrt.f64(double)
declare i64 @llvm.fshl.i64(i64, i64, i64)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1)
"""


def _compile(ir: str, arch: str, triple: str | None = None, cpu: str | None = None,
             reloc: str = "static") -> bytes:
    """Object code for `arch` after LLVM's -O2 pipeline (what a backend would hand over)."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    default_triple, default_cpu = TARGETS.get(arch, (None, None))
    triple, cpu = triple or default_triple, cpu or default_cpu
    tm = llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, opt=2, reloc=reloc, codemodel="small")
    module = llvm.parse_assembly(ir)
    module.triple, module.data_layout = triple, str(tm.target_data)
    module.verify()
    tuning = llvm.create_pipeline_tuning_options(speed_level=2)
    tuning.loop_vectorization = tuning.slp_vectorization = True
    builder = llvm.create_pass_builder(tm, tuning)
    builder.getModulePassManager().run(module, builder)
    return tm.emit_object(module)


@pytest.fixture(scope="module")
def objects() -> dict[str, bytes]:
    return {arch: _compile(IR, arch) for arch in ARCHES}


@pytest.fixture(scope="module")
def machines(objects) -> dict[str, EmulatedMachine]:
    return {arch: EmulatedMachine(arch, objects[arch]) for arch in ARCHES}


@pytest.fixture
def machine(machines, request) -> EmulatedMachine:
    em = machines[request.param]
    em.reset_heap()
    return em


def _put(em: EmulatedMachine, array: np.ndarray) -> int:
    """Copy `array` into emulated memory in big-endian byte order; returns its address."""
    big = array.astype(array.dtype.newbyteorder(">"))
    address = em.alloc(big.nbytes)
    em.write(address, big.tobytes())
    return address


def _get(em: EmulatedMachine, address: int, dtype, count: int) -> np.ndarray:
    return np.frombuffer(em.read(address, np.dtype(dtype).itemsize * count),
                         np.dtype(dtype).newbyteorder(">")).astype(dtype)


def _undefined_symbols(obj: bytes) -> set[str]:
    symtab = ELFFile(io.BytesIO(obj)).get_section_by_name(".symtab")
    return {s.name for s in symtab.iter_symbols()
            if s["st_shndx"] == "SHN_UNDEF" and s.name and s.name != ".TOC."}


by_arch = pytest.mark.parametrize("machine", ARCHES, indirect=True)
RNG = np.random.default_rng(20240613)


def test_constants_are_not_palindromes():
    # The point of the constant tables: a byte-swapped load must give a different number.
    for value in list(COEFFS) + [K1, K2, K3]:
        raw = struct.pack(">f", value)
        assert raw != raw[::-1], value
    for value in DCOEFFS:
        raw = struct.pack(">d", value)
        assert raw != raw[::-1], value


@by_arch
def test_float_math_with_rodata_constants(machine):
    n = 203  # not a multiple of any vector width: the scalar remainder loop runs too
    x = RNG.standard_normal(n).astype(np.float32) * 3
    y = RNG.standard_normal(n).astype(np.float32)
    px, py, out = _put(machine, x), _put(machine, y), machine.alloc(4 * n)
    machine.call("poly", [px, py, out, n])
    c = COEFFS[np.arange(n) % 8]
    expected = ((x * c + y) * x - K1 * y) / K2
    np.testing.assert_array_equal(_get(machine, out, np.float32, n), expected)


@by_arch
def test_double_math_sqrt_and_rodata(machine):
    n = 101
    x = RNG.standard_normal(n) * 1e3
    px, out = _put(machine, x), machine.alloc(8 * n)
    machine.call("dpoly", [px, out, n])
    expected = x * DCOEFFS[np.arange(n) % 4] + np.sqrt(np.abs(x))
    np.testing.assert_array_equal(_get(machine, out, np.float64, n), expected)


@by_arch
def test_i64_math(machine):
    n = 77
    a = RNG.integers(-(2**62), 2**62, n, dtype=np.int64)
    b = RNG.integers(-(2**62), 2**62, n, dtype=np.int64)
    pa, pb, out = _put(machine, a), _put(machine, b), machine.alloc(8 * n)
    machine.call("imath", [pa, pb, out, n])
    with np.errstate(over="ignore"):
        expected = ((a * b + (a >> 3)) ^ (b.view(np.uint64) // np.uint64(7)).view(np.int64)) \
            - np.fmod(a, 13)
    np.testing.assert_array_equal(_get(machine, out, np.int64, n), expected)


@by_arch
def test_i64_loop_carried_hash_return_value(machine):
    n = 500
    a = RNG.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
    result = machine.call("hash", [_put(machine, a), n])["result"]
    mask = 2**64 - 1
    h = -3750763034362895579 & mask
    for i, value in enumerate(a.view(np.uint64).tolist()):
        h = ((h ^ value) * 1099511628211) & mask
        h = ((h << 29) | (h >> 35)) & mask
        h ^= i
    assert result == h


@by_arch
def test_internal_calls(machine):
    n = 64
    x = RNG.standard_normal(n).astype(np.float32)
    y = RNG.standard_normal(n).astype(np.float32)
    px, py, out = _put(machine, x), _put(machine, y), machine.alloc(4 * n)
    machine.call("blend_all", [px, py, out, n])
    np.testing.assert_array_equal(_get(machine, out, np.float32, n), x * K3 + y)


@by_arch
def test_recursion(machine):
    fib = [0, 1]
    while len(fib) <= 20:
        fib.append(fib[-1] + fib[-2])
    assert machine.call("fib_entry", [20])["result"] == fib[20] == 6765


# The library calls LLVM leaves in each object, checked so that the tests below are known to
# reach the stubs.  SystemZ expands memset and memcpy of any length inline (XC/MVC loops);
# only memmove stays a call there.
LIBRARY_CALLS = {"s390x": {"memmove"}, "ppc64": {"memset", "memcpy", "memmove"}}


@by_arch
def test_zero_fill_loop_becomes_memset(machine, objects):
    assert _undefined_symbols(objects[machine.arch]) == LIBRARY_CALLS[machine.arch]
    n = 1000
    p = _put(machine, np.full(n + 1, 7.5, np.float32))
    machine.call("zero_fill", [p, n])
    got = _get(machine, p, np.float32, n + 1)
    np.testing.assert_array_equal(got[:n], np.zeros(n, np.float32))
    assert got[n] == 7.5  # and not one byte further


@by_arch
def test_memcpy_and_memmove(machine, objects):
    assert _undefined_symbols(objects[machine.arch]) == LIBRARY_CALLS[machine.arch]
    data = RNG.integers(0, 256, 4099, dtype=np.uint8)
    src, dst = _put(machine, data), machine.alloc(4099)
    machine.call("copy", [dst, src, 4099])
    np.testing.assert_array_equal(_get(machine, dst, np.uint8, 4099), data)
    # Overlapping move: shift the buffer right by 3 bytes in place.
    machine.call("move", [src + 3, src, 4000])
    expected = data.copy()
    expected[3:4003] = data[:4000]
    np.testing.assert_array_equal(_get(machine, src, np.uint8, 4099), expected)


@by_arch
def test_stack_passed_arguments(machine):
    args = [int(v) for v in RNG.integers(-(2**40), 2**40, 11)]
    out = machine.alloc(8 * 11)
    result = machine.call("many_args", args + [out])["result"]
    weighted = np.array(args, np.int64) * np.arange(1, 12, dtype=np.int64)
    np.testing.assert_array_equal(_get(machine, out, np.int64, 11), weighted)
    assert np.int64(np.uint64(result)) == weighted.sum()


@by_arch
def test_sequential_float_accumulation(machine):
    n = 100_000
    out = machine.alloc(4)
    machine.call("accumulate", [out, n])
    expected = np.cumsum(np.arange(n, dtype=np.float32) * np.float32(1.25), dtype=np.float32)[-1]
    assert _get(machine, out, np.float32, 1)[0] == expected


@by_arch
def test_instruction_budget_stops_an_infinite_loop(machine):
    p = machine.alloc(8)
    start = time.perf_counter()
    with pytest.raises(EmulationLimit, match="budget of 100000 instructions"):
        machine.call("spin", [p], max_instructions=100_000)
    assert time.perf_counter() - start < 600  # a safety net: it stopped, not how fast
    counter = _get(machine, p, np.int64, 1)[0]
    assert 1000 < counter < 100_000  # it really ran, and stopped
    # The machine stays usable after a stopped call.
    assert machine.call("fib_entry", [10])["result"] == 55


@by_arch
def test_time_limit_stops_an_infinite_loop(machine):
    p = machine.alloc(8)
    start = time.perf_counter()
    with pytest.raises(EmulationLimit, match="time limit"):
        machine.call("spin", [p], max_instructions=None, timeout_s=0.3)
    # it waited for its limit, and then stopped (the upper bound is a safety net, not a speed)
    assert 0.25 < time.perf_counter() - start < 600
    assert machine.call("fib_entry", [10])["result"] == 55


@by_arch
def test_wild_pointer_faults_naming_the_pc(machine):
    entry, _ = machine.image.entry("poke")
    with pytest.raises(EmulationFault, match=r"poke faulted at pc=0x[0-9a-f]+") as caught:
        machine.call("poke", [0x7000_0000_0000])
    pc = int(str(caught.value).split("pc=")[1].split(":")[0], 16)
    assert entry <= pc < entry + 64  # the store inside poke, not somewhere else
    assert machine.call("fib_entry", [10])["result"] == 55


@by_arch
def test_illegal_instruction_faults_at_its_address(machine, objects):
    em = EmulatedMachine(machine.arch, objects[machine.arch])  # a machine of its own to spoil
    entry, _ = em.image.entry("poke")
    second = entry + {"s390x": 6, "ppc64": 4}[em.arch]  # after the first instruction
    em.write(second, bytes(4))  # all-zero is an illegal instruction on both
    with pytest.raises(EmulationFault, match=f"pc={second:#x}: .*instruction bytes 0000"):
        em.call("poke", [em.alloc(8)])


@pytest.mark.parametrize("arch, cpu", [("s390x", "z14"), ("ppc64", "pwr10")])
def test_instructions_newer_than_the_emulator_fault_with_advice(arch, cpu):
    # For z14 LLVM vectorises float32 math with vfmsb & co.; for POWER10 it uses prefixed
    # instructions (pli) and ISA 3.1 splats.  Unicorn models neither.
    newest = {"s390x": "z13", "ppc64": "pwr8"}[arch]
    n = 203
    x = RNG.standard_normal(n).astype(np.float32)
    y = RNG.standard_normal(n).astype(np.float32)
    for target_cpu in (cpu, newest):
        em = EmulatedMachine(arch, _compile(IR, arch, cpu=target_cpu))
        px, py, out = _put(em, x), _put(em, y), em.alloc(4 * n)
        if target_cpu == cpu:
            with pytest.raises(EmulationFault,
                               match=f"instruction bytes [0-9a-f]+: .* up to {newest}"):
                em.call("poly", [px, py, out, n])
        else:  # the same IR built for the newest CPU Unicorn models runs, and runs right
            em.call("poly", [px, py, out, n])
            expected = ((x * COEFFS[np.arange(n) % 8] + y) * x - K1 * y) / K2
            np.testing.assert_array_equal(_get(em, out, np.float32, n), expected)


def test_unknown_relocation_is_refused_by_name(objects):
    for arch, obj in objects.items():
        elf = ELFFile(io.BytesIO(obj))
        rela = elf.get_section_by_name(".rela.text")
        patched = bytearray(obj)
        # Elf64_Rela is r_offset, r_info, r_addend; r_info's low 32 bits are the type.
        # Type 14 is R_390_GOTPC on s390x and R_PPC64_GOT16 on ppc64: neither is supported.
        struct.pack_into(">I", patched, rela["sh_offset"] + 12, 14)
        name = {"s390x": "R_390_GOTPC", "ppc64": "R_PPC64_GOT16"}[arch]
        with pytest.raises(ElfLoadError, match=f"unsupported {arch} relocation 14 \\({name}\\)"):
            load_object(bytes(patched), 0x100000, {"memset": 0, "memcpy": 0, "memmove": 0})


def test_position_independent_object_is_refused():
    ir = "@g = global i64 5\ndefine i64 @f() {\n %v = load i64, ptr @g\n ret i64 %v\n}\n"
    with pytest.raises(ElfLoadError, match=r"unsupported s390x relocation \d+ \(R_390_GOT"):
        load_object(_compile(ir, "s390x", reloc="pic"), 0x100000)


def test_non_elf_is_refused():
    with pytest.raises(ElfLoadError, match="not an ELF object"):
        load_object(b"\x7fELG not really an object", 0x100000)
    with pytest.raises(ElfLoadError, match="not an ELF object"):
        EmulatedMachine("s390x", b"")


@pytest.mark.parametrize("triple, cpu", [("powerpc64le-unknown-linux-gnu", "pwr8"),
                                          ("x86_64-unknown-linux-gnu", "x86-64")])
def test_little_endian_object_is_refused(triple, cpu):
    obj = _compile("define void @f() {\n ret void\n}\n", "", triple=triple, cpu=cpu)
    with pytest.raises(ElfLoadError, match="little-endian.*want 64-bit big-endian"):
        load_object(obj, 0x100000)


def test_unknown_architecture_and_missing_symbol(objects):
    with pytest.raises(ValueError, match="unknown emulated architecture 'mips'"):
        EmulatedMachine("mips", objects["s390x"])
    em = EmulatedMachine("ppc64", objects["ppc64"])
    with pytest.raises(ElfLoadError, match="no symbol 'nope'"):
        em.call("nope", [])
