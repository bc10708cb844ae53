"""Regressions for what the widened fuzz (tests/fuzz) found at compilerkit's front door: IR text
that hung xDSL's parser or escaped as xDSL's own errors, pass pipeline strings whose error was
a BaseException, and models onnxruntime runs that compilerkit refused (a reduction naming one
axis twice, a pool window hanging over a 1-wide input) or refused as broken (an old opset).

Answers are compared with onnxruntime; each test fails on the code before its fix."""

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from ckhelpers import check, make_model, ort_run
from onnx import helper

import compilerkit as ck
from compilerkit.opt import main as opt_main
from compilerkit.passes import parse_pipeline

N = helper.make_node
F32 = np.float32


def relu_model(opset=13):
    return make_model([N("Relu", ["x"], ["y"], name="r")], [("x", np.zeros((2, 3), F32))], ["y"],
                      opset=opset)


# ---- IR text: a clear ModelError naming line and column, never a hang ------------------------

# Each would take xDSL's string pattern longer than the age of the universe: no closing quote
# (a truncated resource blob), a line break inside the string, an invalid escape.
UNTERMINATED = {
    "end of text": ('"' + "A" * 40, r"<mlir text>:1:1: .*no closing quote"),
    "line break": ('builtin.module attributes {a = "' + "A" * 40 + '\n} {}',
                   r"<mlir text>:1:32: .*runs past the end of line 1"),
    "bad escape": ('builtin.module {\n  "' + "A" * 40 + '\\q"\n}',
                   r"<mlir text>:2:3: .*invalid escape '\\\\q\"' at column 44"),
}


@pytest.mark.parametrize("case", list(UNTERMINATED))
def test_unterminated_string_is_a_model_error_not_a_hang(case):
    text, pattern = UNTERMINATED[case]
    # In a child, so the code before the fix (which never returns) fails the test, not the run.
    code = textwrap.dedent(f"""
        import compilerkit as ck
        try:
            ck.parse_ir({text!r})
        except ck.ModelError as e:
            print("ModelError:", e)
    """)
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"parse_ir hangs on an unterminated string ({case})")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ModelError:"), r.stdout
    assert re.search(pattern, r.stdout), r.stdout


def test_strings_and_comments_that_look_unterminated_still_parse():
    text = ('// a comment with a stray " quote\n'
            'builtin.module attributes {a = "x // not a comment \\" \\n \\\\ \\41"} {\n}\n')
    m = ck.parse_ir(text)
    assert m.attributes["a"].data == 'x // not a comment " \n \\ A'
    # A module with a resource section (strings of hex) round-trips.
    module = ck.import_onnx(make_model(
        [N("Add", ["x", "w"], ["y"], name="add")], [("x", np.zeros((4, 8), F32))], ["y"],
        inits=[("w", np.arange(32, dtype=F32).reshape(4, 8))]))
    assert ck.print_ir(ck.parse_ir(ck.print_ir(module, with_resources=True))) == \
        ck.print_ir(module)


@pytest.mark.parametrize("text, pattern", [
    ("builtin.module {", r"<mlir text>:1:17: the text ends before the IR does"),
    ('builtin.module {\n  %0 = "foo"() : () -> i32\n}',
     r"<mlir text>:2:13: the IR does not parse: Operation foo is not registered"),
])
def test_parse_error_is_a_model_error_naming_line_and_column(text, pattern):
    with pytest.raises(ck.ModelError, match=pattern) as e:
        ck.parse_ir(text)
    assert "^" in str(e.value)  # xDSL's caret under the place stays in the message


# ---- pass pipeline strings: an OptionError, which `except Exception` catches -----------------

@pytest.mark.parametrize("spec", [",,", "tile-matmul{simd=", "tile-matmul{simd=4}}"])
def test_malformed_schedule_is_an_option_error(spec):
    try:
        ck.compile(relu_model(), schedule=spec, asm=False)
    except Exception as e:  # noqa: BLE001 (what a notebook or the CLI catches)
        assert isinstance(e, ck.OptionError), type(e)
        assert f"schedule {spec!r}" in str(e)
    else:
        pytest.fail("compiled")
    with pytest.raises(ck.OptionError, match=r"pass pipeline"):
        parse_pipeline(spec)


def test_opt_reports_a_malformed_pipeline_in_one_line(tmp_path, capsys):
    src = tmp_path / "m.mlir"
    src.write_text("builtin.module {\n}\n")
    assert opt_main(["-p", "tile-matmul{simd=", str(src)]) == 1
    assert "tile-matmul{simd=" in capsys.readouterr().err


# ---- models onnxruntime runs --------------------------------------------------------------

@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduction_naming_one_axis_twice_reduces_it_once(keepdims):
    x = np.arange(12, dtype=F32).reshape(3, 4) - 5
    m = make_model([N("ReduceMean", ["x"], ["y"], axes=[0, -2], keepdims=keepdims, name="rm")],
                   [("x", x)], ["y"])
    out = check(m, [x])
    np.testing.assert_allclose(out[0].reshape(-1), x.mean(axis=0), rtol=1e-6)


def test_reduction_with_repeated_axes_input():
    x = np.arange(24, dtype=F32).reshape(2, 3, 4)
    m = make_model([N("ReduceSum", ["x", "axes"], ["y"], name="rs")], [("x", x)], ["y"],
                   inits=[("axes", np.array([1, -1, 1], np.int64))])
    check(m, [x])


def test_squeeze_with_repeated_axes_is_still_refused():
    m = make_model([N("Squeeze", ["x", "axes"], ["y"], name="sq")],
                   [("x", np.zeros((1, 3), F32))], ["y"],
                   inits=[("axes", np.array([0, -2], np.int64))])
    with pytest.raises(ck.ModelError, match=r"'sq' \(Squeeze\): input axes .*distinct"):
        ck.compile(m, asm=False)


@pytest.mark.parametrize("op, attrs, shape", [
    ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2]), (1, 2, 6, 1)),
    ("MaxPool", dict(kernel_shape=[4], strides=[3]), (2, 3, 2)),
    ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2]), (1, 2, 1, 1)),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2]), (1, 2, 6, 1)),
    ("AveragePool", dict(kernel_shape=[2, 3], strides=[2, 3], pads=[0, 0, 0, 1],
                         count_include_pad=1), (1, 2, 6, 1)),
])
@pytest.mark.parametrize("codegen", ["llvm", "loopnest"])
def test_pool_window_hanging_over_a_narrow_input(op, attrs, shape, codegen):
    """The window is wider than the input by less than a stride: one output position (ONNX's
    inference and onnxruntime), its taps past the input left out as padding."""
    x = np.random.default_rng(0).standard_normal(shape).astype(F32) - 3  # all negative
    m = make_model([N(op, ["x"], ["y"], name="p", **attrs)], [("x", x)], ["y"], opset=19)
    ref = ort_run(m, [x])[0]
    out = ck.compile(m, asm=False, codegen=codegen).run(x)[0]
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_pool_window_past_the_input_by_a_stride_is_still_refused():
    m = make_model([N("MaxPool", ["x"], ["y"], name="p", kernel_shape=[3, 3])],
                   [("x", np.zeros((1, 1, 6, 1), F32))], ["y"])  # onnxruntime refuses it too
    with pytest.raises(ck.ModelError, match=r"'p' \(MaxPool\): the window along spatial axis 1"):
        ck.compile(m, asm=False)


@pytest.mark.parametrize("opset", [1, 6])
def test_too_old_opset_is_upgraded_on_import(opset):
    # Once declined with the advice to run onnx.version_converter; compilerkit now runs it
    # itself and says so (onnxruntime has no Relu-1 kernel: numpy is the reference).
    m = relu_model(opset)
    x = np.linspace(-1, 1, 6, dtype=F32).reshape(2, 3)
    with pytest.warns(ck.OpsetUpgradeWarning, match=rf"opset {opset} was upgraded to opset 7"):
        np.testing.assert_array_equal(ck.compile(m, asm=False).run(x)[0], np.maximum(x, 0))
