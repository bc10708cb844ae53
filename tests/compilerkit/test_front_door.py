"""compilerkit's front door: every option, model and output path a caller hands it is checked
before any work, with an error of compilerkit's own classes naming the culprit; what
onnxruntime runs either runs here with the same answer or is refused as unsupported; and no
output replaces a file the user did not name, or the input.

One section per class; each test fails on the code before its fix. Models are tiny
hand-built ONNX graphs, compared with onnxruntime (or numpy where onnxruntime has no kernel)."""

import os
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort
import pytest
from ckhelpers import check, make_model, ort_run
from onnx import TensorProto, helper, numpy_helper

import compilerkit as ck
from compilerkit.__main__ import main as cli_main

N = helper.make_node
F32 = np.float32


def relu_model(shape=(2, 3)):
    return make_model([N("Relu", ["x"], ["y"], name="r")], [("x", np.zeros(shape, F32))], ["y"])


def has_cc():
    from compilerkit.backends.host import c_compiler
    return c_compiler() is not None


# ---- 1. output paths: never a file the user did not name, never the input -------------------

@pytest.fixture
def model_file(tmp_path):
    p = tmp_path / "relu.onnx"
    p.write_bytes(relu_model().SerializeToString())
    return p


def test_lib_never_replaces_an_existing_header(model_file, tmp_path):
    header = tmp_path / "model.h"
    header.write_text("my own header\n")
    with pytest.raises(ck.OptionError, match=r"model\.h.*already exists.*overwrite=True"):
        ck.compile_to("lib", str(model_file), out=str(tmp_path / "model.so"))
    assert header.read_text() == "my own header\n"
    assert not (tmp_path / "model.so").exists()  # refused before anything was compiled
    if not has_cc():
        pytest.skip("no C compiler")
    ck.compile_to("lib", str(model_file), out=str(tmp_path / "model.so"), overwrite=True)
    assert "main_graph(void **buffers" in header.read_text()


def test_cli_lib_refuses_an_existing_header_unless_overwrite(model_file, tmp_path, capsys):
    header = tmp_path / "model.h"
    header.write_text("keep me\n")
    lib = str(tmp_path / "model.so")
    assert cli_main([str(model_file), "--emit", "lib", "-o", lib]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("compilerkit: error: ") and "model.h" in err and "--overwrite" in err
    assert header.read_text() == "keep me\n" and not os.path.exists(lib)
    if not has_cc():
        pytest.skip("no C compiler")
    assert cli_main([str(model_file), "--emit", "lib", "-o", lib, "--overwrite"]) == 0
    assert "main_graph" in header.read_text()


@pytest.mark.parametrize("emit", ["kernel-ir", "llvm-ir", "obj", "lib"])
def test_cli_output_is_never_the_model(model_file, capsys, emit):
    before = model_file.read_bytes()
    assert cli_main([str(model_file), "--emit", emit, "-o", str(model_file)]) == 1
    err = capsys.readouterr().err
    assert "never writes over the file it reads" in err and "Traceback" not in err
    assert model_file.read_bytes() == before


def test_output_through_a_link_to_the_model_is_refused(model_file, tmp_path, capsys):
    link = tmp_path / "link.ll"
    os.link(model_file, link)  # the same file under another name
    before = model_file.read_bytes()
    assert cli_main([str(model_file), "--emit", "llvm-ir", "-o", str(link)]) == 1
    assert "never writes over" in capsys.readouterr().err
    assert model_file.read_bytes() == before


def test_compile_to_lib_over_the_model_is_refused(model_file):
    before = model_file.read_bytes()
    with pytest.raises(ck.OptionError, match="never writes over the file it reads"):
        ck.compile_to("lib", str(model_file), out=str(model_file))
    assert model_file.read_bytes() == before


def test_lib_header_is_valid_c_whatever_the_tensor_names(tmp_path):
    if not has_cc():
        pytest.skip("no C compiler")
    from compilerkit.backends.host import c_compiler

    names = ["x */ !", "y\nz"]
    m = make_model([N("Relu", [names[0]], [names[1]])], [(names[0], np.zeros(3, F32))],
                   [names[1]])
    lib = tmp_path / "m.so"
    ck.compile_to("lib", m, out=str(lib))
    src = tmp_path / "use.c"
    src.write_text('#include "m.h"\nint main(void) { return (int)main_graph_arena_bytes(); }\n')
    r = subprocess.run([c_compiler(), "-fsyntax-only", "-I", str(tmp_path), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "x *\\/ !" in (tmp_path / "m.h").read_text()


def test_opt_output_is_never_its_input(tmp_path, capsys):
    from compilerkit.opt import main as opt_main

    src = tmp_path / "in.mlir"
    src.write_text(ck.compile_to("onnx-ir", relu_model()).__str__())
    before = src.read_text()
    assert opt_main(["-p", "shape-inference", str(src), "-o", str(src)]) == 1
    assert "never writes over" in capsys.readouterr().err
    assert src.read_text() == before


# ---- 2. every option checked, an OptionError naming it ----------------------------------------

@pytest.mark.parametrize("kwargs, named", [
    ({"opt_level": 3.0}, "opt_level"),
    ({"opt_level": "3"}, "opt_level"),
    ({"opt_level": True}, "opt_level"),
    ({"input_shapes": "x"}, "input_shapes"),
    ({"input_shapes": [2, 3]}, "input_shapes"),
    ({"input_shapes": {"x": "2,3"}}, "input_shapes['x']"),
    ({"input_shapes": {0: [2, 3]}}, "input_shapes"),
    ({"max_bytes": 1.5}, "max_bytes"),
    ({"max_bytes": "1"}, "max_bytes"),
    ({"asm": "no"}, "asm"),
    ({"codegen": None}, "codegen"),
    ({"conv_algorithm": 3}, "conv_algorithm"),
    ({"schedule": 5}, "schedule"),
    ({"num_threads": 2.0}, "num_threads"),
    ({"target": 3}, "target"),
    ({"target": "nonesuch"}, "target"),
])
def test_bad_option_is_an_option_error_naming_it(kwargs, named):
    with pytest.raises(ck.OptionError) as e:
        ck.compile(relu_model(), **kwargs)
    assert named in str(e.value)
    assert isinstance(e.value, ValueError) and isinstance(e.value, TypeError)


@pytest.mark.parametrize("call", [
    lambda m: ck.import_onnx(m, input_shapes=[2, 3]),
    lambda m: ck.lower(ck.optimize_onnx(ck.import_onnx(m)), opt_level=2.5),
    lambda m: ck.compile_to("kernel-ir", m, nonesuch=1),
    lambda m: ck.compile_to("lib", m, out=5),
    lambda m: ck.compile_to(3, m),
    lambda m: ck.compile_to("ptx", m),  # the GPU's stage, on the host
    lambda m: ck.compile_to("kernel-ir", ck.compile_to("onnx-ir", m), input_shapes={"x": [2, 3]}),
    lambda m: ck.compile_kernel(ck.compile_to("onnx-ir", m)),
])
def test_every_entry_point_checks_its_options(call):
    with pytest.raises(ck.OptionError):
        call(relu_model())


@pytest.mark.parametrize("kwargs, named", [
    ({"onnx_passes": "nonesuch"}, "onnx_passes 'nonesuch'"),
    ({"schedule": "tile-matmul,nonesuch"}, "schedule 'tile-matmul,nonesuch'"),
    ({"onnx_passes": [1, 2]}, "onnx_passes must be"),
])
def test_pass_pipelines_are_checked_before_any_work(kwargs, named):
    with pytest.raises(ck.OptionError, match=named):
        ck.compile_to("kernel-ir", relu_model(), **kwargs)


@pytest.mark.parametrize("call, expected", [
    (lambda m: ck.optimize_onnx(m), "optimize_onnx takes an IR module.*ModelProto"),
    (lambda m: ck.lower(m), "lower takes an IR module.*ModelProto"),
    (lambda m: ck.lower(None), "lower takes an IR module.*NoneType"),
    (lambda m: ck.to_llvm(ck.import_onnx(m)), "to_llvm takes Kernel IR"),
    (lambda m: ck.lower(ck.lower(ck.import_onnx(m))), "lower takes ONNX IR"),
    (lambda m: ck.compile_kernel("abc"), "compile_kernel takes an IR module.*str"),
])
def test_step_functions_check_their_module(call, expected):
    with pytest.raises(ck.OptionError, match=expected):
        call(relu_model())


@pytest.mark.parametrize("model", ["a\0b.onnx", "a\0b.mlir", None, 123])
def test_bad_model_argument_is_an_option_error(model):
    with pytest.raises(ck.OptionError, match="model"):
        ck.compile(model)


# ---- 3. integer MatMul and Gemm: integer arithmetic, as onnxruntime --------------------------

@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("sa, sb", [((2, 3), (3, 4)), ((2, 1, 3, 5), (4, 5, 2)), ((3,), (3, 5)),
                                    ((4, 3), (3,))])
@pytest.mark.parametrize("opt_level", [0, 3])
def test_integer_matmul_matches_onnxruntime(dtype, sa, sb, opt_level):
    rng = np.random.default_rng(0)
    a = rng.integers(-50, 50, sa).astype(dtype)
    b = rng.integers(-50, 50, sb).astype(dtype)
    m = make_model([N("MatMul", ["a", "b"], ["y"], name="mm")], [("a", a), ("b", b)], ["y"])
    got = check(m, [a, b], opt_level=opt_level, rtol=0, atol=0)[0]
    assert got.dtype == dtype


def test_integer_matmul_wraps_as_onnxruntime():
    a = np.full((1, 2), 2 ** 30, np.int32)
    b = np.full((2, 1), 2, np.int32)
    m = make_model([N("MatMul", ["a", "b"], ["y"])], [("a", a), ("b", b)], ["y"])
    check(m, [a, b], rtol=0, atol=0)


def test_integer_gemm_is_integer_arithmetic():
    # onnxruntime has no integer Gemm kernel: numpy is the reference
    rng = np.random.default_rng(1)
    a = rng.integers(-9, 9, (4, 3)).astype(np.int64)
    b = rng.integers(-9, 9, (5, 4)).astype(np.int64)
    c = rng.integers(-9, 9, (5,)).astype(np.int64)
    m = make_model([N("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=2.0, beta=3.0)],
                   [("a", a), ("b", b), ("c", c)], ["y"])
    got = ck.compile(m, asm=False).run(a, b, c)[0]
    np.testing.assert_array_equal(got, 2 * (a.T @ b.T) + 3 * c)
    m = make_model([N("Gemm", ["a", "b"], ["y"], name="g", transA=1, transB=1, alpha=0.5)],
                   [("a", a), ("b", b)], ["y"])
    with pytest.raises(ck.UnsupportedOpError, match=r"'g' \(Gemm\): alpha=0.5.*int64"):
        ck.compile(m, asm=False)


# ---- 4. names: any name onnxruntime accepts compiles; the user sees the model's names --------

def test_non_ascii_names_compile_and_keep_their_names(tmp_path):
    x = np.arange(6, dtype=F32).reshape(2, 3) - 2
    w = np.arange(12, dtype=F32).reshape(3, 4)
    m = make_model([N("MatMul", ["é x", "ŵ"], ["t€"], name="nœud"),
                    N("Relu", ["t€"], ["ý"], name="ρ")], [("é x", x)], ["ý"], inits=[("ŵ", w)])
    ref = ort_run(m, [x])[0]
    cm = ck.compile(m)
    np.testing.assert_array_equal(cm.run(x)[0], ref)
    assert [n for n, _, _ in cm.inputs] == ["é x"] and [n for n, _, _ in cm.outputs] == ["ý"]
    # The IR text (MLIR escapes non-ASCII string bytes) reads back with the same names
    out = tmp_path / "m.mlir"
    assert cli_main([_save(m, tmp_path), "--emit", "onnx-ir", "-o", str(out)]) == 0
    again = ck.compile(str(out), asm=False)
    assert again.inputs == cm.inputs and again.outputs == cm.outputs
    np.testing.assert_array_equal(again.run(x)[0], ref)
    labels = {op.attributes["onnx_node_name"].data for op in ck.parse_ir(out.read_text())
              .walk() if "onnx_node_name" in op.attributes}
    assert labels == {"nœud", "ρ"}


def _save(model, folder):
    p = folder / "model.onnx"
    p.write_bytes(model.SerializeToString())
    return str(p)


def test_non_utf8_names_compile_as_onnxruntime_runs_them():
    x = np.arange(6, dtype=F32).reshape(2, 3) - 2
    m = make_model([N("Relu", ["xq"], ["tt"], name="nn"), N("Neg", ["tt"], ["y"])],
                   [("xq", x)], ["y"])
    # same-length byte edits: names that are not UTF-8 (protobuf does not check them)
    raw = m.SerializeToString().replace(b"tt", b"t\xff").replace(b"nn", b"n\xfe")
    ref = ort.InferenceSession(raw, providers=["CPUExecutionProvider"]).run(None, {"xq": x})[0]
    np.testing.assert_array_equal(ck.compile(raw, asm=False).run(x)[0], ref)
    cm = ck.compile(raw.replace(b"xq", b"x\xff"), asm=False)
    assert cm.inputs[0][0] == "x\\xff"  # shown escaped; the model keeps its bytes
    np.testing.assert_array_equal(cm.run(x)[0], ref)


# ---- 5. what is not compiled is "unsupported", named; what is, compiles ---------------------

def test_if_reading_an_outer_value_is_unsupported_control_flow():
    out = helper.make_tensor_value_info
    then_g = helper.make_graph([N("Relu", ["x"], ["t"])], "then", [],
                               [out("t", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph([N("Neg", ["x"], ["e"])], "else", [],
                               [out("e", TensorProto.FLOAT, [2])])
    g = helper.make_graph([N("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g,
                             name="branch")], "g", [out("x", TensorProto.FLOAT, [2])],
                          [out("y", TensorProto.FLOAT, [2])],
                          [numpy_helper.from_array(np.array(True), "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    ort_run(m, [np.ones(2, F32)])  # onnxruntime runs it
    with pytest.raises(ck.UnsupportedOpError, match="'branch' \\(If\\).*control flow") as e:
        ck.compile(m, asm=False)
    assert "topologically" not in str(e.value)


def test_sequence_input_is_unsupported_not_a_missing_shape():
    s = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2])
    g = helper.make_graph([N("SequenceLength", ["s"], ["y"])], "g", [s],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ck.UnsupportedOpError, match="input 's' is a sequence") as e:
        ck.compile(m, asm=False)
    assert "input_shapes" not in str(e.value)


@pytest.mark.parametrize("indices", [np.array([1, 5], np.int64),
                                     np.array([[0, 1], [1, 2]], np.int64)])
def test_sparse_initializer_is_a_constant(indices):
    x = np.arange(6, dtype=F32).reshape(2, 3)
    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([5.0, 7.0], F32), "w"),
                                   numpy_helper.from_array(indices, "w_idx"), [2, 3])
    m = make_model([N("Add", ["x", "w"], ["y"], name="add")], [("x", x)], ["y"])
    m.graph.sparse_initializer.append(sp)
    got = check(m, [x], rtol=0, atol=0)[0]
    np.testing.assert_array_equal(got, x + np.array([[0, 5, 0], [0, 0, 7]], F32))
    assert len(m.graph.sparse_initializer) == 1 and not m.graph.initializer  # caller's model


def test_sparse_constant_node_is_a_constant():
    x = np.arange(6, dtype=F32).reshape(2, 3)
    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([5.0, 7.0], F32), "v"),
                                   numpy_helper.from_array(np.array([1, 5], np.int64), "i"),
                                   [2, 3])
    m = make_model([N("Constant", [], ["w"], sparse_value=sp), N("Add", ["x", "w"], ["y"])],
                   [("x", x)], ["y"])
    check(m, [x], rtol=0, atol=0)


def test_attribute_without_an_mlir_form_is_unsupported_and_named():
    # Optional's `type` is a TypeProto: was a bare NotImplementedError naming nothing
    opt = N("Optional", [], ["o"], name="opt",
            type=helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))
    g = helper.make_graph([opt, N("OptionalHasElement", ["o"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.BOOL, [])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ck.UnsupportedOpError, match="'opt' \\(Optional\\): attribute 'type'"):
        ck.compile(m, asm=False)


def test_sparse_initializer_index_out_of_range_is_named():
    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([5.0], F32), "w"),
                                   numpy_helper.from_array(np.array([6], np.int64), "i"), [2, 3])
    m = make_model([N("Add", ["x", "w"], ["y"])], [("x", np.zeros((2, 3), F32))], ["y"])
    m.graph.sparse_initializer.append(sp)
    with pytest.raises(ck.ModelError, match="sparse initializer 'w'.*outside"):
        ck.compile(m, asm=False)


def test_static_zero_dimension_is_not_dynamic():
    x = np.zeros((0, 3), F32)
    m = make_model([N("Relu", ["x"], ["y"])], [("x", x)], ["y"])
    assert check(m, [x])[0].shape == (0, 3)


@pytest.mark.parametrize("opset", [7, 8])
def test_old_opset_integer_initializer_compiles(opset):
    x = np.arange(6, dtype=F32).reshape(2, 3)
    m = make_model([N("Reshape", ["x", "s"], ["y"])], [("x", x)], ["y"],
                   inits=[("s", np.array([3, 2], np.int64))], opset=opset)
    check(m, [x], rtol=0, atol=0)


def test_big_endian_input_is_converted():
    cm = ck.compile(relu_model((2, 3)), asm=False)
    a = np.arange(-3, 3, dtype=F32).reshape(2, 3)
    np.testing.assert_array_equal(cm.run(a.astype(">f4"))[0], np.maximum(a, 0))
    with pytest.raises(ck.InputError, match="expected dtype float32, got float64"):
        cm.run(a.astype(">f8"))


# ---- 6. the budget holds for MLIR text too --------------------------------------------------

def test_mlir_splat_above_the_budget_is_refused_before_parsing():
    big = "tensor<100000x100000xf32>"
    text = ('func.func @main_graph(%x: tensor<2xf32>) -> ' + big + ' attributes '
            '{input_names = ["x"], output_names = ["y"]} {\n'
            f'  %c = "onnx.Constant"() {{value = dense<1.0> : {big}}} : () -> {big}\n'
            f'  func.return %c : {big}\n}}\n')
    t = time.perf_counter()
    with pytest.raises(ck.ModelError, match=r":1: tensor<100000x100000xf32>.*37.3 GiB.*1.0 MiB"):
        ck.compile_to("kernel-ir", text, max_bytes=1 << 20)
    with pytest.raises(ck.ModelError, match="above the compile budget of 2.0 GiB"):
        ck.compile_to("onnx-ir", text)  # the default budget
    assert time.perf_counter() - t < 60  # never expanded (a MemoryError or an OOM kill)


# ---- 6b. MLIR input: the main function's interface is checked, named ---------------------

RELU_IR = ('func.func @main_graph(%x: tensor<2x3xf32>) -> tensor<2x3xf32> attributes '
           '{input_names = ["x"], output_names = ["y"]} {\n'
           '  %y = "onnx.Relu"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>\n'
           '  func.return %y : tensor<2x3xf32>\n}\n')


@pytest.mark.parametrize("old, new, expected", [
    (' attributes {input_names = ["x"], output_names = ["y"]}', "", "no input_names"),
    ('input_names = ["x"]', 'input_names = ["x", "z"]', "input_names lists 2 names for 1"),
    ('input_names = ["x"]', "input_names = [1]", "input_names must be a list of strings"),
    ("f32", "ui8", "element type ui8"),
    ("f32", "f16", "element type f16"),
    ('output_names = ["y"]', 'output_names = ["y"], onnx_opset = "x"', "onnx_opset must be"),
    ('output_names = ["y"]', 'output_names = ["y"], onnx_opset = 3 : i64', "onnx_opset must"),
])
def test_mlir_main_function_interface_is_checked(old, new, expected):
    x = np.ones((2, 3), F32)
    np.testing.assert_array_equal(ck.compile_to("native", RELU_IR).run(x)[0], x)
    with pytest.raises(ck.ModelError, match=expected):
        ck.compile_to("native", RELU_IR.replace(old, new))


def test_mlir_with_two_functions_says_so():
    with pytest.raises(ck.ModelError, match="2 functions"):
        ck.compile_to("kernel-ir", RELU_IR + RELU_IR.replace("main_graph", "other"))


# ---- 7. ConvTranspose output_shape: what the input can produce, as onnxruntime --------------

def _conv_t(out, stride=1, inn=3, k=3):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 1, inn)).astype(F32)
    w = rng.standard_normal((1, 1, k)).astype(F32)
    return make_model([N("ConvTranspose", ["x", "w"], ["y"], output_shape=[out],
                         strides=[stride], name="ct")], [("x", x)], ["y"], inits=[("w", w)]), x


@pytest.mark.parametrize("out, stride", [(6, 1), (20, 1), (9, 2)])
def test_conv_transpose_output_shape_too_large_is_refused(out, stride):
    m, x = _conv_t(out, stride)
    with pytest.raises(Exception):  # noqa: B017 (onnxruntime's own error class)
        ort_run(m, [x])
    with pytest.raises(ck.ModelError, match=r"'ct' \(ConvTranspose\): attribute output_shape"):
        ck.compile(m, asm=False)


@pytest.mark.parametrize("out, stride", [(3, 1), (5, 1), (7, 2), (8, 2)])
def test_conv_transpose_output_shape_in_range_matches_onnxruntime(out, stride):
    m, x = _conv_t(out, stride)
    check(m, [x])


def test_conv_transpose_output_shape_below_the_input_is_unsupported():
    m, x = _conv_t(2)
    ort_run(m, [x])  # onnxruntime runs it; ONNX's shape inference gives up on it
    with pytest.raises(ck.UnsupportedOpError, match=r"'ct' \(ConvTranspose\): output_shape"):
        ck.compile(m, asm=False)


def test_cli_reports_option_errors_in_one_line(model_file):
    r = subprocess.run([sys.executable, "-m", "compilerkit", str(model_file), "-o",
                        str(model_file)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("compilerkit: error: -o ")


def test_onnx_model_object_is_not_changed_by_compiling():
    m = relu_model()
    before = m.SerializeToString()
    ck.compile(m, asm=False)
    assert m.SerializeToString() == before
