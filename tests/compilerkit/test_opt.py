"""The pass registry and `python -m compilerkit.opt` (mlir-opt's interface): named passes,
xDSL pipeline syntax, verification after each pass, resources that survive the text round trip,
split input files, one-line errors."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ckhelpers import BreaksReturn
from xdsl.dialects.builtin import ModuleOp

from compilerkit import ModelError, parse_ir, print_ir
from compilerkit.dialects import onnx as onnx_d
from compilerkit.passes import PASSES, kernel_pipeline, onnx_pipeline, parse_pipeline, run_passes

RELU = """builtin.module {
  func.func @%(name)s(%%x: tensor<2x3xf32>) -> tensor<2x3xf32>
      attributes {input_names = ["x"], output_names = ["y"], onnx_opset = 13 : i64} {
    %%s = "onnx.Shape"(%%x) : (tensor<2x3xf32>) -> tensor<?xi64>
    %%y = "onnx.Relu"(%%x) {onnx_node_name = "r"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    func.return %%y : tensor<2x3xf32>
  }
}
"""


def opt(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "compilerkit.opt", *args], input=stdin,
                          capture_output=True, text=True)


def test_registry_names_are_the_classes_names():
    for name, cls in PASSES.items():
        assert cls.name == name
        assert cls.__doc__ and name in cls.__doc__  # each says what it does under its name
    assert {"shape-inference", "constant-folding", "decompose", "dead-code", "validate-onnx",
            "lower-to-krnl", "tile-matmul", "unroll-small", "gpu-map", "plan-buffers"} <= set(
                PASSES)


# The lowering is a folder (one module per op family); its pass lives in the folder's
# __init__.py, and its FileCheck files are the lower_*.mlir, lower_to_krnl_options.mlir
# among them.
PASS_MODULE_EXCEPTIONS = {"lower-to-krnl": "compilerkit.lowering"}
FILECHECK_DIR = Path(__file__).resolve().parent.parent / "filecheck"


@pytest.mark.parametrize("name", sorted(PASSES))
def test_pass_module_and_filecheck_file_are_named_after_the_pass(name):
    """A reader finds `-p some-pass` in compilerkit/<folder>/some_pass.py and its FileCheck
    file in tests/filecheck/<folder prefix>_some_pass*.mlir, one of whose RUN lines runs it."""
    cls, stem = PASSES[name], name.replace("-", "_")
    expected = PASS_MODULE_EXCEPTIONS.get(name)
    if expected is None:
        assert cls.__module__.rsplit(".", 1)[-1] == stem, (name, cls.__module__)
    else:
        assert cls.__module__ == expected, (name, cls.__module__)
    files = [f for f in FILECHECK_DIR.glob("*.mlir")
             if stem in (f.stem, f.stem.split("_", 1)[-1])
             or f.stem.startswith(stem + "_") or f.stem.split("_", 1)[-1].startswith(stem + "_")]
    assert files, f"no tests/filecheck/*_{stem}*.mlir for pass {name!r}"
    assert any(re.search(rf"RUN:.*-p '?[^ ]*\b{name}\b", f.read_text()) for f in files), (
        name, [f.name for f in files])


def test_pipeline_spec_parses_options():
    ps = parse_pipeline("dead-code,tile-matmul{simd=4},unroll-small{max_trip=3 max_body=9}")
    assert [p.name for p in ps] == ["dead-code", "tile-matmul", "unroll-small"]
    assert ps[1].simd == 4 and (ps[2].max_trip, ps[2].max_body) == (3, 9)
    with pytest.raises(ValueError, match="nope"):
        parse_pipeline("dead-code,nope")


def test_target_pipelines():
    from compilerkit.backends import get_backend

    host = get_backend("host").target
    names = [p.name for p in kernel_pipeline(host, 3)]
    assert names == ["lower-to-krnl", "fold-layout", "fuse-nests", "tile-matmul",
                     "unroll-small", "parallelize", "plan-buffers"]
    assert [p.name for p in kernel_pipeline(host, 0)] == ["lower-to-krnl", "fold-layout",
                                                          "plan-buffers"]
    assert "fuse-nests" not in [p.name for p in kernel_pipeline(host, 3, fuse=False)]
    assert kernel_pipeline(host, 3)[3].simd == host.vector_width
    # The lowering's compile choices are its options, shown in the pipeline's spec.
    lowering = kernel_pipeline(host, 3, conv_algorithm="classic")[0]
    assert (lowering.conv_algorithm, lowering.lanes) == ("classic", host.vector_width)
    # xDSL's spec leaves out options at their default (conv_algorithm="auto"; lanes=16: an
    # AVX-512 host's width)
    lanes = "" if host.vector_width == 16 else f" lanes={host.vector_width}"
    assert str(lowering.pipeline_pass_spec()) == (
        f'lower-to-krnl{{conv_algorithm="classic"{lanes}}}')


def test_lowering_options_are_checked():
    (p,) = parse_pipeline("lower-to-krnl{conv_algorithm=winograd-f2 lanes=4}")
    assert (p.conv_algorithm, p.lanes) == ("winograd-f2", 4)
    m = parse_ir(RELU % {"name": "main_graph"})
    for bad, words in [("conv_algorithm=fast", "unknown conv_algorithm 'fast'"),
                       ("lanes=3", "lanes=3 is not a power of two")]:
        (p,) = parse_pipeline(f"lower-to-krnl{{{bad}}}")
        with pytest.raises(ValueError, match=words):
            run_passes(m.clone(), [p])
    assert [p.name for p in onnx_pipeline()][0] == "shape-inference"


def test_run_passes_verifies_after_each_pass():
    m = parse_ir(RELU % {"name": "main_graph"})
    seen = []
    with pytest.raises(ModelError, match="after pass 'breaks'"):
        run_passes(m, [parse_pipeline("dead-code")[0], BreaksReturn()],
                   after_each=lambda p, _: seen.append(p.name))
    assert seen == ["dead-code"]


def test_resources_round_trip_through_text():
    m = ModuleOp([])
    w = np.arange(40, dtype=np.float32).reshape(5, 8) / 7
    k = np.arange(-12, 12, dtype=np.int64)
    for arr, hint in ((w, "w"), (k, "k")):
        m.body.block.add_op(onnx_d.make_constant(arr, m, hint))
    text = print_ir(m, with_resources=True)
    assert "dialect_resources" in text and "dialect_resources" not in print_ir(m)
    back = parse_ir(text)
    np.testing.assert_array_equal(onnx_d.resources(back)["w"], w)
    np.testing.assert_array_equal(onnx_d.resources(back)["k"], k)


def test_opt_cli_runs_passes_from_stdin_and_lists_them():
    r = opt("-p", "dead-code", stdin=RELU % {"name": "main_graph"})
    assert r.returncode == 0, r.stderr
    assert "onnx.Relu" in r.stdout and "onnx.Shape" not in r.stdout
    r = opt("--list-passes")
    assert r.returncode == 0 and all(name in r.stdout for name in PASSES)


def test_opt_cli_split_input_file_keeps_going_after_an_error(tmp_path):
    bad = RELU.replace("onnx.Relu", "onnx.NotAnOp") % {"name": "bad"}
    src = tmp_path / "cases.mlir"
    src.write_text(RELU % {"name": "one"} + "// -----\n" + bad + "// -----\n"
                   + RELU % {"name": "two"})
    r = opt("--split-input-file", "-p", "dead-code,lower-to-krnl", str(src))
    assert r.returncode == 1
    assert r.stdout.count("// -----") == 1  # two pieces printed, the bad one reported
    assert "func.func @one" in r.stdout and "func.func @two" in r.stdout
    assert "krnl.iterate" in r.stdout
    assert r.stderr.count("compilerkit-opt: error:") == 1 and "piece 2" in r.stderr


def test_opt_cli_errors_are_one_line(tmp_path):
    r = opt("-p", "nope", stdin=RELU % {"name": "main_graph"})
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1].startswith(
        "compilerkit-opt: error:") and "nope" in r.stderr
    unlowered = RELU.replace('"onnx.Shape"(%%x) : (tensor<2x3xf32>) -> tensor<?xi64>',
                             '"onnx.NonZero"(%%x) : (tensor<2x3xf32>) -> tensor<2x?xi64>')
    r = opt("-p", "lower-to-krnl", stdin=unlowered % {"name": "main_graph"})  # not lowered
    assert r.returncode == 1 and "NonZero" in r.stderr and "Traceback" not in r.stderr
    r = opt(str(tmp_path / "missing.mlir"))
    assert r.returncode == 1 and "missing.mlir" in r.stderr
