"""The command line's error surface (issue 10, item 8): every error is one line
`compilerkit: error: ...` on stderr and exit status 1, never a traceback; `-o` never writes the
C header over the library; a missing output folder is named before anything is compiled."""

import subprocess
import sys

import pytest
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
    assert "int64_t main_graph(void **buffers);" in (tmp_path / "relu.h").read_text()
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
