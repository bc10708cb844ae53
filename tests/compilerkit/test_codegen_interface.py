"""The code-generator interface (compilerkit/codegen/interface.py): every generator in
pipeline.CODEGENS turns a planned Kernel IR module into one CodegenProducts without touching
the Compilation, and Compilation.native builds the CompiledModel from it the same way for all.
The numbers are checked against onnxruntime (compilerkit.oracle) on a Conv -> Relu -> MatMul
model; a loopnest test is skipped on a host without AVX2 + FMA."""

from __future__ import annotations

import numpy as np
import pytest
from ckhelpers import make_model, skip_unless_codegen_runs
from onnx import helper

from compilerkit.codegen.interface import CodegenProducts
from compilerkit.oracle import ort_outputs, random_inputs
from compilerkit.pipeline import CODEGENS, Compilation, compile_to, text_stages


def conv_relu_matmul():
    w = np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype(np.float32)
    m = np.random.default_rng(4).standard_normal((6, 5)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "m"], ["y"], name="matmul")]
    return make_model(nodes, [("x", np.zeros((1, 3, 6, 6), np.float32))], ["y"],
                      inits=[("w", w), ("m", m)])


MODEL = conv_relu_matmul()


def reference():
    feeds = random_inputs(MODEL)
    return [a for _, a in feeds], ort_outputs(MODEL, feeds)[0]


@pytest.mark.parametrize("name", sorted(CODEGENS))
def test_each_generator_gives_products_and_the_driver_builds_the_model(name):
    skip_unless_codegen_runs(name)
    generator = CODEGENS[name]
    assert generator.name == name
    c = Compilation("host", 2, codegen=name)
    kmodule = c.run(MODEL, "kernel-ir")
    stages, timings, passes = list(c.stages), dict(c.timings), list(c.pass_timings)
    products = generator.generate(kmodule, c.backend, opt_level=2, stage="native",
                                  options=c.options, owned=True)
    assert isinstance(products, CodegenProducts)
    # The generator wrote nothing into the Compilation: its products carry everything.
    assert (list(c.stages), dict(c.timings), list(c.pass_timings)) == (stages, timings, passes)
    assert "llvm-ir" in products.timings and all(s >= 0 for s in products.timings.values())
    assert callable(products.load) and callable(products.code)
    assert set(products.functions) >= {"main_graph"}
    cm = c.native(kmodule, products)
    arrays, ref = reference()
    np.testing.assert_allclose(cm.run(*arrays)[0], ref, rtol=1e-4, atol=1e-4)
    assert "main_graph" in cm.stages["asm"]  # the listing products.code makes
    assert cm.provenance.functions == dict(products.functions)
    assert (getattr(cm, "loopnest", None) is not None) == (name == "loopnest")


@pytest.mark.parametrize("name", sorted(CODEGENS))
def test_compile_by_name_agrees_with_onnxruntime_through_the_same_stages(name):
    skip_unless_codegen_runs(name)
    arrays, ref = reference()
    cm = compile_to("native", MODEL, codegen=name)
    np.testing.assert_allclose(cm.run(*arrays)[0], ref, rtol=1e-4, atol=1e-4)
    assert list(cm.stages) == text_stages("host")
    # Every stage is timed: the generator's own ones before the machine code's.
    own = {"llvm": [], "loopnest": ["loopnest"]}[name]
    assert list(cm.timings) == ["onnx-ir", "kernel-ir"] + own + ["llvm-ir", "asm"]
    text = compile_to("llvm-ir", MODEL, codegen=name)
    assert isinstance(text, str) and "target triple" in text
    assert cm.stages["llvm-ir"] == text  # "native" lists what "llvm-ir" returns


def test_a_stage_a_generator_cannot_make_is_refused_naming_it():
    skip_unless_codegen_runs("loopnest")
    with pytest.raises(ValueError, match="codegen='loopnest'.*stage 'obj'.*codegen='llvm'"):
        compile_to("obj", MODEL, codegen="loopnest")
