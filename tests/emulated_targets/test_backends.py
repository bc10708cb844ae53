"""The s390x and ppc64 backends as `compilerkit.compile` and the CLI see them: targets from
LLVM, the "asm" stage, objects, inputs checked before emulation, bounded runs."""

from __future__ import annotations

import io
import subprocess
import sys

import llvmlite.binding as llvm
import mlsys_datasets
import numpy as np
import pytest
from elftools.elf.elffile import ELFFile
from emuhelpers import TARGETS, feeds_for

import compilerkit as ck
from compilerkit.backends.emulated import EmulationLimit, emulated_target

LENET = str(mlsys_datasets.onnx_path("lenet"))
SHAPES = {n: list(a.shape) for n, a in feeds_for(LENET)}  # the batch dimension fixed to 1
MACHINE = {"s390x": "EM_S390", "ppc64": "EM_PPC64"}
ASM_MARK = {"s390x": "%r15", "ppc64": "blr"}  # the s390x stack pointer; the POWER return


@pytest.fixture(scope="module")
def lenet():
    arrays = [a for _, a in feeds_for(LENET)]
    compiled = {t: ck.compile(LENET, target=t, opt_level=2, input_shapes=SHAPES)
                for t in TARGETS}
    return compiled, arrays, ck.compile(LENET, opt_level=2, input_shapes=SHAPES).run(*arrays)


@pytest.mark.parametrize("target", TARGETS)
def test_target_description_comes_from_llvm(target):
    t = ck.get_backend(target).target
    assert t.name == target and t.byte_order == "big" and t.vector_width == 4
    assert t.data_layout.startswith("E-")  # LLVM's big-endian marker
    llvm.initialize_all_targets()
    tm = llvm.Target.from_triple(t.triple).create_target_machine(cpu=t.cpu)
    assert str(tm.target_data) == t.data_layout == emulated_target(target).data_layout


@pytest.mark.parametrize("target", TARGETS)
def test_stages_show_target_assembly(lenet, target):
    cm = lenet[0][target]
    assert list(cm.stages)[-1] == "asm"
    assert ASM_MARK[target] in cm.stages["asm"] and "main_graph" in cm.stages["asm"]
    assert f'target triple = "{cm.backend.target.triple}"' in cm.stages["llvm-ir"]


@pytest.mark.parametrize("target", TARGETS)
def test_runs_and_reports_arena_from_the_emulated_code(lenet, target):
    compiled, arrays, ref = lenet
    cm = compiled[target]
    out = cm.run(*arrays)
    assert all(o.dtype.isnative for o in out)
    assert all(o.tobytes() == r.tobytes() for o, r in zip(out, ref, strict=True))
    assert cm.arena_bytes == cm.session.arena_bytes > 0
    assert cm.session.last_seconds > 0
    again = cm.run(*arrays)  # buffers are reused; a second run gives the same
    assert all(np.array_equal(a, o) for a, o in zip(again, out, strict=True))


@pytest.mark.parametrize("target", TARGETS)
def test_bad_inputs_refused_before_emulation(lenet, target):
    compiled, arrays, _ = lenet
    cm = compiled[target]
    cm.session.last_seconds = None
    x = arrays[0]
    with pytest.raises(ck.InputError, match="shape"):
        cm.run(x[..., :-1])
    with pytest.raises(ck.InputError, match="dtype"):
        cm.run(x.astype(np.float64))
    with pytest.raises(ck.InputError, match="expected 1 inputs"):
        cm.run(x, x)
    assert cm.session.last_seconds is None  # nothing was emulated


@pytest.mark.parametrize("target", TARGETS)
def test_instruction_budget_and_time_limit(lenet, target):
    compiled, arrays, ref = lenet
    session = compiled[target].session
    session.max_instructions, session.timeout_s = 10_000, 3600.0  # the budget stops it
    with pytest.raises(EmulationLimit, match="budget of 10000 instructions"):
        session.run(*arrays)
    session.max_instructions, session.timeout_s = None, 1e-4
    with pytest.raises(EmulationLimit, match="time limit"):
        session.run(*arrays)
    session.max_instructions, session.timeout_s = 2_000_000_000, 3600.0  # a safety net
    assert session.run(*arrays)[0].tobytes() == ref[0].tobytes()


@pytest.mark.parametrize("target", TARGETS)
def test_cli_emits_asm_and_obj(tmp_path, target):
    cli = [sys.executable, "-m", "compilerkit", LENET, "--target", target, "-O2"] + [
        f"--input-shape={n}={','.join(map(str, s))}" for n, s in SHAPES.items()]
    asm = subprocess.run(cli + ["--emit", "asm"], capture_output=True, text=True, check=True)
    assert ASM_MARK[target] in asm.stdout
    obj = tmp_path / "lenet.o"
    subprocess.run(cli + ["--emit", "obj", "-o", str(obj)], check=True)
    elf = ELFFile(io.BytesIO(obj.read_bytes()))
    assert elf["e_machine"] == MACHINE[target] and not elf.little_endian
    lib = subprocess.run(cli + ["--emit", "lib", "-o", str(tmp_path / "x.so")],
                         capture_output=True, text=True)
    assert lib.returncode != 0 and "--emit obj" in lib.stderr
