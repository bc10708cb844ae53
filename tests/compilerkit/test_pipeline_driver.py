"""The stage driver (compilerkit/pipeline.py, issue 11 item 3): one pipeline behind `compile`,
the step functions, the CLI and the endianness demo. Numbers are checked against onnxruntime;
stage texts against facts of the target (its triple, kernels on the GPU); the pass lists
against the pipelines passes.py declares."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from ckhelpers import affine_model, ort_run

import compilerkit as ck
from compilerkit import pipeline
from compilerkit.passes import kernel_pipeline, onnx_pipeline
from compilerkit.pipeline import Compilation, compile_to, stage_of, text_stages

X = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)


def reference(model):
    return ort_run(model, [X])[0]


@pytest.fixture(scope="module")
def model():
    return affine_model()


# ---- what each stage returns -------------------------------------------------------------------

def test_each_stage_returns_its_product(model, tmp_path):
    from xdsl.dialects.builtin import ModuleOp

    onnx_ir = compile_to("onnx-ir", model, opt_level=1)
    kir = compile_to("kernel-ir", model, opt_level=1)
    assert isinstance(onnx_ir, ModuleOp) and stage_of(onnx_ir) == "onnx-ir"
    assert isinstance(kir, ModuleOp) and stage_of(kir) == "kernel-ir"
    assert 'target triple' in compile_to("llvm-ir", model, opt_level=1)
    assert "main_graph" in compile_to("asm", model, opt_level=1)
    assert compile_to("obj", model, opt_level=1)[:4] == b"\x7fELF"
    cm = compile_to("native", model, opt_level=1)
    np.testing.assert_allclose(cm.run(X)[0], reference(model), rtol=1e-6, atol=1e-6)


def test_stage_list_is_what_compile_shows(model):
    for target in ("host", "gpu"):
        cm = ck.compile(model, target=target, opt_level=0)
        assert list(cm.stages) == text_stages(target)
        assert list(cm.timings) == text_stages(target)  # every stage is timed
        assert list(ck.compile(model, target=target, opt_level=0, asm=False).stages) == \
            text_stages(target, asm=False)
    k = ck.lower(ck.optimize_onnx(ck.import_onnx(model)), 1)
    assert list(ck.compile_kernel(k, opt_level=1).stages) == text_stages(
        "host", source_stage="kernel-ir")
    assert text_stages("gpu")[-1] == "ptx" and text_stages("s390x")[-1] == "asm"


def test_every_pass_of_the_declared_pipelines_runs_and_is_timed(model):
    for target, opt in (("host", 3), ("gpu", 2)):
        c = Compilation(target, opt)
        c.run(model, "kernel-ir")
        expected = ["import"] + [p.name for p in onnx_pipeline()] + [
            p.name for p in kernel_pipeline(c.target, opt)]
        assert [name for _, name, _ in c.pass_timings] == expected
        assert all(s >= 0 for _, _, s in c.pass_timings)
        assert {stage for stage, _, _ in c.pass_timings} == {"onnx-ir", "kernel-ir"}
    assert "gpu-map" in expected and "tile-matmul" not in expected


# ---- the step functions are the driver's stages -------------------------------------------------

def test_step_functions_give_the_drivers_texts(model):
    m = ck.optimize_onnx(ck.import_onnx(model))
    before = ck.print_ir(m)
    k = ck.lower(m, 2)
    assert ck.print_ir(m) == before  # lower leaves the ONNX IR module as it was
    assert before == ck.print_ir(compile_to("onnx-ir", model, opt_level=2))
    assert ck.print_ir(k) == ck.print_ir(compile_to("kernel-ir", model, opt_level=2))
    cm = ck.compile(model, opt_level=2)
    assert cm.stages["onnx-ir"] == before and cm.stages["kernel-ir"] == ck.print_ir(k)
    be = ck.get_backend("host")
    assert be.optimize(ck.to_llvm(k), 2)[0] == cm.stages["llvm-ir"]


def test_to_llvm_gives_gpu_kernels_for_the_gpu_target(model):
    gpu = ck.get_backend("gpu").target
    k = ck.lower(ck.optimize_onnx(ck.import_onnx(model)), 1, gpu)
    text = ck.to_llvm(k, gpu)
    assert 'target triple = "nvptx64-nvidia-cuda"' in text
    assert "define ptx_kernel void" in text or "nvvm.annotations" in text
    entry = re.compile(r'^define\b.*@"?main_graph"?\(', re.M)  # the serial host entry
    assert not entry.search(text)
    host = ck.to_llvm(ck.lower(ck.optimize_onnx(ck.import_onnx(model)), 1))
    assert "ptx_kernel" not in host and entry.search(host)


def test_get_backend_of_a_target_keeps_it():
    for name in ("host", "gpu", "s390x"):
        t = ck.get_backend(name).target
        assert ck.get_backend(t).target == t


# ---- MLIR inputs: the level read from the ops --------------------------------------------------

def test_stage_of_reads_ops_not_text(model, monkeypatch):
    from xdsl.printer import Printer

    onnx_ir = compile_to("onnx-ir", model, opt_level=1)
    kir = compile_to("kernel-ir", model, opt_level=1)

    def no_printing(*args, **kwargs):
        raise AssertionError("stage_of printed the module")

    monkeypatch.setattr(Printer, "print_op", no_printing)
    assert stage_of(onnx_ir) == "onnx-ir" and stage_of(kir) == "kernel-ir"


def test_identity_kernel_ir_is_kernel_ir_by_its_memrefs():
    # No krnl op at all: the memref arguments say it is Kernel IR.
    text = ('builtin.module {\n  func.func @main_graph(%x: memref<2xf32>, %y: memref<2xf32>) '
            'attributes {input_names = ["x"], output_names = ["y"], num_inputs = 1 : i64} {\n'
            '    func.return\n  }\n}\n')
    assert stage_of(ck.parse_ir(text)) == "kernel-ir"


def test_mlir_text_and_files_compile_like_the_model(model, tmp_path):
    onnx_text = ck.print_ir(compile_to("onnx-ir", model, opt_level=1), with_resources=True)
    expected = compile_to("llvm-ir", model, opt_level=1)
    assert compile_to("llvm-ir", onnx_text, opt_level=1) == expected
    path = tmp_path / "affine.mlir"
    path.write_text(onnx_text)
    assert compile_to("llvm-ir", str(path), opt_level=1) == expected
    assert compile_to("llvm-ir", path, opt_level=1) == expected  # a PathLike too


def test_unplanned_kernel_ir_is_planned_on_a_copy_and_runs(model):
    from compilerkit.passes import run_passes
    from compilerkit.pipeline import signature  # noqa: F401 (public home of the signature)

    k = compile_to("onnx-ir", model, opt_level=0)
    run_passes(k, [pipeline_pass("lower-to-krnl")])  # lowered, not planned
    before = ck.print_ir(k)
    cm = ck.compile_kernel(k, opt_level=0)
    assert ck.print_ir(k) == before  # the caller's module is only read
    assert "arena_bytes" in cm.stages["kernel-ir"]
    np.testing.assert_allclose(cm.run(X)[0], reference(model), rtol=1e-6, atol=1e-6)


def pipeline_pass(name):
    from compilerkit.passes import parse_pipeline

    return parse_pipeline(name)[0]


def test_host_scheduled_kernel_ir_gets_the_gpu_mapping_on_a_copy(model):
    k = ck.lower(ck.optimize_onnx(ck.import_onnx(model)), 3)  # scheduled for the host
    before = ck.print_ir(k)
    assert "gpu_map" not in before
    cm = ck.compile_kernel(k, target="gpu", opt_level=1)
    assert ck.print_ir(k) == before
    assert "gpu_map" in cm.stages["kernel-ir"]
    assert ".visible .entry" in cm.stages["ptx"]
    assert cm.session.launches


# ---- the endianness demo is an option of the same pipeline ------------------------------------

def test_host_bytes_is_an_emitter_option_not_a_copy_of_the_pipeline(model):
    from mlsys_workbench.experiments import endianness

    source = inspect.getsource(endianness.compile_with_host_bytes)
    assert "compile_to" in source and "_signature" not in inspect.getsource(endianness)
    assert not hasattr(ck, "_signature")
    buggy = endianness.compile_with_host_bytes(model, target="host", opt_level=0)
    good = ck.compile(model, target="host", opt_level=0)
    assert list(buggy.stages) == list(good.stages)
    # W (12 floats = 48 bytes) as bytes in both; the demo only changes the byte order, which
    # on the little-endian host is the host's own: the same IR.
    assert "[48 x i8]" in good.stages["llvm-ir"]
    assert buggy.stages["llvm-ir"] == good.stages["llvm-ir"]
    # On the little-endian host the raw bytes happen to be right.
    np.testing.assert_allclose(buggy.run(X)[0], reference(model), rtol=1e-6, atol=1e-6)


# ---- options ----------------------------------------------------------------------------------

def test_schedule_option_replaces_the_targets_schedule(model):
    tiled = ck.print_ir(compile_to("kernel-ir", model, opt_level=3))
    plain = ck.print_ir(compile_to("kernel-ir", model, opt_level=3, schedule=[]))
    assert plain != tiled
    assert plain == ck.print_ir(compile_to("kernel-ir", model, opt_level=1))  # no -O2/-O3 passes
    cm = compile_to("native", model, opt_level=3, schedule="unroll-small")
    np.testing.assert_allclose(cm.run(X)[0], reference(model), rtol=1e-6, atol=1e-6)


def test_onnx_passes_option(model):
    folded = affine_model(fold=True)
    assert "fold_me" not in ck.print_ir(compile_to("onnx-ir", folded))
    kept = ck.print_ir(compile_to("onnx-ir", folded, onnx_passes="shape-inference"))
    assert "fold_me" in kept
    cm = compile_to("native", folded, onnx_passes=[])
    np.testing.assert_allclose(cm.run(X)[0], reference(folded), rtol=1e-6, atol=1e-6)


def test_pass_timings_and_provenance_reach_the_compiled_model(model):
    cm = ck.compile(model, opt_level=1)
    assert [n for _, n, _ in cm.pass_timings][:2] == ["import", "shape-inference"]
    assert cm.provenance.functions is not None
    assert any(node in ("mm", "add", "relu") for node in cm.provenance.functions.values())


# ---- errors name the culprit ------------------------------------------------------------------

@pytest.mark.parametrize("stage, target, opt, match", [
    ("ptx", "host", 1, "'ptx' is the GPU's"),
    ("obj", "gpu", 1, "no object file"),
    ("lib", "s390x", 1, "emit an object file"),
    ("bitcode", "host", 1, "unknown stage 'bitcode'"),
    ("asm", "sparc", 1, "unknown target 'sparc'"),
    ("asm", "host", 4, "opt_level must be 0..3"),
])
def test_bad_requests_are_named_before_any_work(model, stage, target, opt, match):
    with pytest.raises(ValueError, match=match):
        compile_to(stage, model, target, opt)


def test_bad_combinations(model):
    kir = compile_to("kernel-ir", model, opt_level=0)
    with pytest.raises(ValueError, match="no ONNX IR stage"):
        compile_to("onnx-ir", kir)
    with pytest.raises(ValueError, match="input_shapes"):
        compile_to("llvm-ir", kir, input_shapes={"x": [2, 4]})
    with pytest.raises(ValueError, match="unknown codegen"):
        compile_to("llvm-ir", model, codegen="no-such-codegen")
    with pytest.raises(ValueError, match="GpuEmitter"):
        from compilerkit.backends.emulated import HostBytesEmitter

        compile_to("llvm-ir", model, "gpu", emitter=HostBytesEmitter)
    with pytest.raises(ValueError, match="compile_kernel takes Kernel IR"):
        ck.compile_kernel(compile_to("onnx-ir", model))
    with pytest.raises(ValueError, match="needs an output path"):
        compile_to("lib", model)
    with pytest.raises(ck.ModelError, match="not valid ONNX IR or Kernel IR"):
        compile_to("kernel-ir", "builtin.module {\n  garbage\n}\n")


def test_signature_has_a_public_home(model):
    from compilerkit.onnx_passes.single_node import main_func

    ins, outs = pipeline.signature(main_func(compile_to("kernel-ir", model)))
    assert ins == [("x", (2, 4), np.dtype(np.float32))]
    assert outs == [("y", (2, 3), np.dtype(np.float32))]
    # ONNX IR: the outputs are the function's results.
    assert pipeline.signature(main_func(compile_to("onnx-ir", model))) == (ins, outs)
