"""The command line's error surface (issue 10, item 8): every error is one line
`compilerkit: error: ...` on stderr and exit status 1, never a traceback; `-o` never writes the
C header over the library; a missing output folder is named before anything is compiled."""

import subprocess
import sys

import numpy as np
import pytest
from ckhelpers import affine_model, ort_run
from onnx import TensorProto, helper

from compilerkit.__main__ import main


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    path = tmp_path_factory.mktemp("cli") / "relu.onnx"
    path.write_bytes(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    return str(path)


def fails(capsys, argv, *expected):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("compilerkit: error: "), err
    for text in expected:
        assert text in last, last
    return last


def test_bad_mlir_names_file_line_and_problem(tmp_path, capsys):
    bad = tmp_path / "bad.mlir"
    bad.write_text("builtin.module {\n  garbage\n}\n")
    fails(capsys, [str(bad)], f"{bad}:", "not valid ONNX IR or Kernel IR",
          "garbage is not registered")


@pytest.mark.parametrize("spec", ["n=abc", "n", "n=", "=1,4", "n=1,-4", "n=1.5,4"])
def test_bad_input_shape(model, capsys, spec):
    fails(capsys, [model, "--input-shape", spec], f"--input-shape {spec!r}", "NAME=D0,D1")


def test_unknown_target_lists_the_known_ones(model, capsys):
    fails(capsys, [model, "--target", "sparc"], "unknown target 'sparc'", "s390x")


def test_missing_model(tmp_path, capsys):
    fails(capsys, [str(tmp_path / "nope.onnx")], "nope.onnx", "no such model file")


def test_missing_output_folder_is_named_and_nothing_written(model, tmp_path, capsys):
    out = tmp_path / "no" / "such" / "x.ll"
    fails(capsys, [model, "--input-shape", "x=2,4", "--emit", "llvm-ir", "-o", str(out)],
          str(tmp_path / "no" / "such"), "does not exist")
    assert not (tmp_path / "no").exists()


def test_binary_output_needs_a_file(model, capsys):
    fails(capsys, [model, "--input-shape", "x=2,4", "--emit", "obj"], "needs -o OUT")


def test_an_invalid_model_is_one_line(tmp_path, capsys):
    bad = tmp_path / "junk.onnx"
    bad.write_bytes(b"\x08\x07\x12\x04junk" * 3)
    fails(capsys, [str(bad)])


def test_header_never_overwrites_the_library(model, tmp_path, capsys):
    from compilerkit.backends.host import c_compiler

    out = tmp_path / "relu.h"
    fails(capsys, [model, "--input-shape", "x=2,4", "--emit", "lib", "-o", str(out)],
          "header would be written over the library")
    assert not out.exists()
    if c_compiler() is None:
        pytest.skip("no C compiler")
    lib = tmp_path / "relu.so"
    assert main([model, "--input-shape", "x=2,4", "--emit", "lib", "-o", str(lib)]) == 0
    assert lib.read_bytes()[:4] == b"\x7fELF"
    header = (tmp_path / "relu.h").read_text()
    assert "int64_t main_graph(void **buffers, int64_t num_threads);" in header
    # A name without an extension: the header is NAME.h, the library keeps its name.
    bare = tmp_path / "relu_lib"
    assert main([model, "--input-shape", "x=2,4", "--emit", "lib", "-o", str(bare)]) == 0
    assert bare.read_bytes()[:4] == b"\x7fELF" and (tmp_path / "relu_lib.h").exists()


def test_real_process_exit_status_and_no_traceback(model):
    r = subprocess.run([sys.executable, "-m", "compilerkit", model, "--target", "sparc"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip().startswith("compilerkit: error: --target")
    assert "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "compilerkit", model, "-O", "9"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "compilerkit: error: argument -O" in r.stderr


# ---- one CLI run per target and stage (issue 11, item 3) ---------------------------------------
# Each stage's output is checked for facts that do not come from compilerkit: the triple and
# byte order LLVM documents for the target, instruction names of its ISA, the ELF header's
# e_machine (from the bytes), and the numbers onnxruntime computes.

TARGETS = ["host", "gpu", "s390x", "ppc64"]
# ELF e_machine (System V ABI): what each target's object must say it is for.
E_MACHINE = {"x86_64": 62, "aarch64": 183, "s390x": 22, "ppc64": 21}


@pytest.fixture(scope="module")
def affine(tmp_path_factory):
    """y = Relu(x @ W + b), x: 2x4 float32 (ckhelpers.affine_model), as a file."""
    path = tmp_path_factory.mktemp("cli_matrix") / "affine.onnx"
    path.write_bytes(affine_model().SerializeToString())
    return str(path)


def emit(capsys, model, target, stage, opt="-O1", out=None):
    argv = [model, "--target", target, "--emit", stage, opt] + (["-o", out] if out else [])
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def elf_machine(data: bytes) -> tuple[int, str]:
    """(e_machine, "little"|"big") read from an ELF header's bytes (System V gABI layout)."""
    assert data[:4] == b"\x7fELF" and data[4] == 2  # ELFCLASS64
    order = {1: "little", 2: "big"}[data[5]]  # EI_DATA
    return int.from_bytes(data[18:20], order), order


def host_machine() -> str:
    import platform

    return {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(),
                                                          platform.machine().lower())


@pytest.mark.parametrize("target", TARGETS)
def test_cli_onnx_ir(affine, capsys, target):
    status, text, _ = emit(capsys, affine, target, "onnx-ir")
    assert status == 0
    assert "func.func @main_graph" in text and "tensor<2x4xf32>" in text
    for op in ("onnx.MatMul", "onnx.Add"):
        assert op in text
    assert 'activation = "Relu"' in text  # fuse-elementwise moved the Relu into the Add
    assert "krnl." not in text and "memref<" not in text


@pytest.mark.parametrize("target", TARGETS)
def test_cli_kernel_ir(affine, capsys, target):
    status, text, _ = emit(capsys, affine, target, "kernel-ir")
    assert status == 0
    assert "krnl.iterate" in text and "memref<2x4xf32>" in text and "onnx." not in text
    assert "arena_bytes" in text  # buffers planned
    # Only the GPU schedule maps loop nests to the grid.
    assert ("gpu_map = " in text) == (target == "gpu")


@pytest.mark.parametrize("target", TARGETS)
def test_cli_llvm_ir(affine, capsys, target):
    import re

    status, text, _ = emit(capsys, affine, target, "llvm-ir")
    assert status == 0
    triple = re.search(r'^target triple = "([^"]+)"', text, re.M).group(1)
    layout = re.search(r'^target datalayout = "([^"]+)"', text, re.M).group(1)
    kernels = re.findall(r"^define\b[^@\n]*\bptx_kernel\b[^@\n]*@(\w+)", text, re.M)
    annotated = re.search(r'!nvvm\.annotations.*"kernel"', text, re.S)
    if target == "gpu":
        assert triple == "nvptx64-nvidia-cuda"
        # Kernels, not the host's serial entry point (the bug the old CLI had).
        assert kernels or annotated
        assert not re.search(r"^define\b.*@main_graph\(", text, re.M)
    else:
        assert not kernels and not annotated
        assert re.search(r"^define\b.*@main_graph\(", text, re.M)  # the C entry point
    if target == "s390x":
        assert triple.startswith("s390x") and layout.startswith("E-")  # big-endian
    if target == "ppc64":
        assert triple.startswith("powerpc64-") and layout.startswith("E-")
    if target == "host":
        import sys

        assert triple.startswith(host_machine())
        assert layout.startswith("e-" if sys.byteorder == "little" else "E-")


# An instruction each ISA's listing of this model must contain (from the ISA, not from us).
ASM_MARK = {"s390x": r"\bbr\s+%r14\b", "ppc64": r"\bblr\b", "gpu": r"\bret;",
            "x86_64": r"\bretq?\b", "aarch64": r"\bret\b"}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("stage", ["asm", "ptx"])
def test_cli_machine_code(affine, capsys, target, stage):
    import re

    status, text, err = emit(capsys, affine, target, stage)
    if stage == "ptx" and target != "gpu":
        assert status == 1 and "'ptx' is the GPU's" in err
        return
    assert status == 0, err
    if target == "gpu":  # "asm" on the GPU is its PTX
        assert re.search(r"^\.target sm_\d+", text, re.M)
        assert re.search(r"^\.visible \.entry \w+\(", text, re.M)
        assert "fma.rn.f32" in text or "mul.rn.f32" in text or "mul.f32" in text
    mark = ASM_MARK.get(target) or ASM_MARK[host_machine()]
    assert re.search(mark, text), text[:2000]


@pytest.mark.parametrize("target", TARGETS)
def test_cli_obj_is_an_elf_for_the_machine(affine, capsys, tmp_path, target):
    out = tmp_path / f"affine_{target}.o"
    status, _, err = emit(capsys, affine, target, "obj", out=str(out))
    if target == "gpu":
        assert status == 1 and "no object file" in err and "ptx" in err
        assert not out.exists()
        return
    assert status == 0, err
    machine, order = elf_machine(out.read_bytes())
    if target == "host":
        import sys

        assert machine == E_MACHINE[host_machine()] and order == sys.byteorder
    else:
        assert machine == E_MACHINE[target] and order == "big"


@pytest.mark.parametrize("target", TARGETS)
def test_cli_lib_loads_and_matches_onnxruntime(affine, capsys, tmp_path, target):
    from compilerkit.backends.host import SharedLibrary, c_compiler

    lib = tmp_path / f"affine_{target}.so"
    status, _, err = emit(capsys, affine, target, "lib", out=str(lib))
    if target != "host":
        assert status == 1 and "--emit lib" in err and "--emit obj" in err
        assert not lib.exists()
        return
    if c_compiler() is None:
        pytest.skip("no C compiler")
    assert status == 0, err
    header = (tmp_path / f"affine_{target}.h").read_text()
    assert "input  x: float32[2, 4]" in header and "output y: float32[2, 3]" in header
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    ref = ort_run(affine_model(), [x])[0]
    session = SharedLibrary(str(lib)).session([("x", (2, 4), np.dtype(np.float32))],
                                              [("y", (2, 3), np.dtype(np.float32))])
    np.testing.assert_allclose(session.run(x)[0], ref, rtol=1e-6, atol=1e-6)
    assert ref.min() == 0 and ref.max() > 0  # Relu clipped some, kept some


@pytest.mark.parametrize("target", TARGETS)
def test_cli_and_compile_print_the_same_stages(affine, capsys, target):
    """The stages `compile` shows are the CLI's outputs, text for text, at the same -O (the
    old CLI printed host functions for --target gpu)."""
    import compilerkit as ck
    from compilerkit.pipeline import text_stages

    cm = ck.compile(affine, target=target, opt_level=1)
    assert list(cm.stages) == text_stages(target)
    for stage in cm.stages:
        status, text, err = emit(capsys, affine, target, stage)
        assert status == 0, err
        assert text == cm.stages[stage], stage


def test_ir_file_keeps_its_weights_and_reads_back(tmp_path, capsys):
    """An IR file written by the command line carries its weights' bytes, so the opt tool can
    lower it; the same text without them is refused with a message naming the constant."""
    from compilerkit.opt import main as opt_main

    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 32)).astype(np.float32)  # big enough to be a dense_resource
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])],
        [helper.make_tensor("w", TensorProto.FLOAT, [64, 32], w.ravel())])
    path = tmp_path / "mm.onnx"
    path.write_bytes(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    ir_file = tmp_path / "mm.mlir"
    assert main([str(path), "--emit", "onnx-ir", "-o", str(ir_file)]) == 0
    text = ir_file.read_text()
    assert "dense_resource<" in text and "dialect_resources" in text
    assert opt_main(["-p", "lower-to-krnl", str(ir_file)]) == 0
    assert "krnl.matmul" in capsys.readouterr().out
    assert main([str(path), "--emit", "onnx-ir"]) == 0  # on screen: no hex blobs
    shown = capsys.readouterr().out
    assert "dense_resource<" in shown and "dialect_resources" not in shown
    bare = tmp_path / "bare.mlir"
    bare.write_text(shown)
    assert opt_main(["-p", "lower-to-krnl", str(bare)]) == 1
    assert "has no bytes in this module" in capsys.readouterr().err
