"""What the compile-time work may not change (compilerkit/codegen/llvm_codegen.py LaterStages,
backends/base.py take_weights, backends/host.py map_weights).

A JIT compile ("native") keeps weights of JIT_WEIGHT_MIN_BYTES or more out of the LLVM module
(mapped at load time instead of printed and parsed), and prints its optimised IR and assembly
only when `.stages` is read. Checked here: the stage texts are exactly what `compile_to` prints
for the same model; the optimised code of the JIT module is, function by function, the code
with the weights inside; the answers are onnxruntime's and bit-identical to the weights-inside
path; compile itself prints neither the weights nor the module; every target still lists its
stages. No timings are asserted (benchmarks/compile_bench.py measures them).
"""

from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest
from ckhelpers import BreaksReturn, affine_model, make_model, ort_run
from onnx import helper, numpy_helper

import compilerkit as ck
from compilerkit.backends.base import JIT_WEIGHT_MIN_BYTES
from compilerkit.backends.host import HostBackend, map_weights
from compilerkit.codegen.emit import BytesConstant
from compilerkit.pipeline import Compilation, compile_to, text_stages

N = helper.make_node
R = np.random.default_rng(12)
X = R.standard_normal((1, 8, 10, 10)).astype(np.float32)


@pytest.fixture(scope="module")
def model():
    """Conv (4608 bytes of weights: mapped) + a 64-byte bias and a scalar (kept inside, where
    LLVM may fold them) + Gemm (40 KiB of weights: mapped)."""
    w = R.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.2
    b = R.standard_normal(16).astype(np.float32)
    w2 = R.standard_normal((1024, 10)).astype(np.float32) * 0.05
    b2 = R.standard_normal(10).astype(np.float32)
    nodes = [N("Conv", ["x", "w", "b"], ["c"]), N("Relu", ["c"], ["r"]),
             N("Add", ["r", "half"], ["a"]), N("Flatten", ["a"], ["f"]),
             N("Gemm", ["f", "w2", "b2"], ["y"])]
    return make_model(nodes, [("x", X)], ["y"],
                      inits=[("w", w), ("b", b), ("half", np.float32(0.5)), ("w2", w2),
                             ("b2", b2)])


def _functions(mod) -> dict:
    return {f.name: str(f) for f in mod.functions if not f.is_declaration}


def test_jit_keeps_large_weights_out_and_the_code_is_the_same(model):
    c = Compilation("host", 3)
    k = c.run(model, "kernel-ir")
    be = c.backend
    jit_text = be.emit_llvm(k, external_weights=True)
    mapped = dict(be.external_weights)
    full_text = be.emit_llvm(k)
    assert be.external_weights == {}
    # The two big weights are mapped, the bias and the scalar stay inside.
    assert sorted(d.size for d, _ in mapped.values()) == [4608, 40960]
    assert all(d.size >= JIT_WEIGHT_MIN_BYTES and a == 64 for d, a in mapped.values())
    assert len(jit_text) < len(full_text) - 3 * 40960
    for name in mapped:
        assert f'@"{name}" = external constant' in jit_text
    jit = be.optimize_module(jit_text, 3)
    full = be.optimize_module(full_text, 3)
    assert _functions(jit) == _functions(full)
    assert {g.name for g in jit.global_variables if g.is_declaration} == set(mapped)


def test_lazy_stages_are_what_compile_to_prints(model):
    for opt in (3, 0):
        cm = ck.compile(model, opt_level=opt)
        assert not cm.stages.computed("llvm-ir") and not cm.stages.computed("asm")
        text = compile_to("llvm-ir", model, opt_level=opt)
        assert cm.stages["llvm-ir"] == text
        assert "c\"" in text  # the stage shows the weights' bytes, as before
        assert cm.stages["asm"] == compile_to("asm", model, opt_level=opt)
    # The machine code first, then the IR: the same texts (the code generator got a clone).
    cm = ck.compile(model, opt_level=3)
    assert cm.stages["asm"] == compile_to("asm", model, opt_level=3)
    assert cm.stages["llvm-ir"] == compile_to("llvm-ir", model, opt_level=3)


def test_answers_are_onnxruntimes_and_the_same_as_with_weights_inside(model, monkeypatch):
    ref = ort_run(model, [X])[0]
    lazy = ck.compile(model, asm=False).run(X)[0]
    np.testing.assert_allclose(lazy, ref, rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(HostBackend, "jit_weights", False)  # the print-everything path
    eager = ck.compile(model, asm=False)
    assert eager.stages.computed("llvm-ir")
    np.testing.assert_array_equal(eager.run(X)[0], lazy)


def test_compile_prints_neither_weights_nor_module(model, monkeypatch):
    printed = []
    monkeypatch.setattr(llvm.ModuleRef, "__str__",
                        lambda self, s=llvm.ModuleRef.__str__: printed.append(1) or s(self))
    big = []
    monkeypatch.setattr(BytesConstant, "get_reference", lambda self, g=BytesConstant
                        .get_reference: big.append(self.data.size) or g(self))
    cm = ck.compile(model)
    assert printed == []
    assert all(n < JIT_WEIGHT_MIN_BYTES for n in big)
    np.testing.assert_allclose(cm.run(X)[0], ort_run(model, [X])[0], rtol=1e-4, atol=1e-4)
    assert "define" in cm.stages["llvm-ir"] and printed == [1]
    assert 40960 in big  # the stage prints them, when asked


def test_later_stages_hold_the_module_only_until_both_are_made(model):
    c = Compilation("host", 3)
    cm = c.run(model, "native")
    later = c.later
    assert later.module is None  # nothing compiled again yet
    cm.stages["llvm-ir"]
    assert later.module is not None  # kept for the machine code still to come
    cm.stages["asm"]
    assert later.module is None and later.kmodule is None
    c = Compilation("host", 3, asm=False)
    cm = c.run(model, "native")
    later = c.later
    cm.stages["llvm-ir"]
    assert later.module is None


def test_callers_kernel_ir_gets_the_same_stages(model):
    k = compile_to("kernel-ir", model, opt_level=3)
    before = ck.print_ir(k)
    cm = ck.compile_kernel(k, opt_level=3)
    assert ck.print_ir(k) == before
    assert cm.stages["llvm-ir"] == compile_to("llvm-ir", k, opt_level=3)
    assert cm.stages["asm"] == compile_to("asm", k, opt_level=3)
    np.testing.assert_allclose(cm.run(X)[0], ort_run(model, [X])[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["host", "gpu", "s390x"])
def test_every_target_still_lists_its_stages(target):
    model = affine_model()
    cm = ck.compile(model, target=target, opt_level=2)
    assert list(cm.stages) == text_stages(target)
    triple = cm.backend.target.triple
    assert f'target triple = "{triple}"' in cm.stages["llvm-ir"]
    assert cm.stages["llvm-ir"] == compile_to("llvm-ir", model, target=target, opt_level=2)
    assert len(cm.stages[text_stages(target)[-1]]) > 0


# ---- map_weights on a hand-written module ------------------------------------------------------

_AT = """
@w = external constant [8192 x i8], align 64
define i64 @at(i64 %i) {
  %p = getelementptr [8192 x i8], ptr @w, i64 0, i64 %i
  %v = load i8, ptr %p
  %r = zext i8 %v to i64
  ret i64 %r
}
"""


def _misaligned(n: int) -> np.ndarray:
    buf = np.empty(n + 128, np.uint8)
    start = (-buf.ctypes.data % 64) + 1  # one byte past a 64-byte boundary
    data = buf[start:start + n]
    data[:] = np.arange(n) % 251
    return data


def test_map_weights_aligns_a_misaligned_buffer_and_reads_its_bytes():
    be = HostBackend()
    mod = llvm.parse_assembly(_AT)
    engine = llvm.create_mcjit_compiler(mod, be.machine(3))
    data = _misaligned(8192)
    assert data.ctypes.data % 64 == 1
    keep = map_weights(engine, mod, {"w": (data, 64)})
    engine.finalize_object()
    assert len(keep) == 1 and keep[0].ctypes.data % 64 == 0
    np.testing.assert_array_equal(keep[0], data)
    at = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(engine.get_function_address("at"))
    for i in (0, 1, 250, 251, 8191):
        assert at(i) == i % 251


def test_map_weights_names_a_global_without_bytes():
    be = HostBackend()
    mod = llvm.parse_assembly(_AT)
    engine = llvm.create_mcjit_compiler(mod, be.machine(3))
    with pytest.raises(ValueError, match="@w .*no definition"):
        map_weights(engine, mod, {})


def test_an_object_of_a_jit_module_is_refused_not_written_without_weights(model):
    c = Compilation("host", 1)
    k = c.run(model, "kernel-ir")
    be = c.backend
    mod = be.optimize_module(be.emit_llvm(k, external_weights=True), 1)
    with pytest.raises(ValueError, match="built for the JIT"):
        be.object_code(mod)
    assert compile_to("obj", k, opt_level=1)[:4] == b"\x7fELF"


def test_object_bytes_of_a_jit_compiled_model_holds_its_weights(model):
    # The JIT maps the Gemm's 40 KiB of weights from Python memory; the object the model
    # "would link" (notebook 12's helper) is emitted again with them inside, little-endian.
    from mlsys_workbench.experiments.endianness import object_bytes

    cm = ck.compile(model, opt_level=1, asm=False)
    obj = object_bytes(cm)
    assert obj[:4] == b"\x7fELF"
    w2 = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "w2"))
    assert w2.astype("<f4").tobytes() in obj


def test_compile_verifies_after_a_stages_passes_and_names_them(model):
    ran = []

    class Keeps:
        name = "keeps"

        def apply(self, ctx, module):
            ran.append(self.name)

    with pytest.raises(ck.ModelError, match="after passes 'breaks', 'keeps' does not verify"):
        compile_to("onnx-ir", model, onnx_passes=[BreaksReturn(ran), Keeps()])
    assert ran == ["breaks", "keeps"]  # one verification, after the last pass


def test_compile_keeps_the_callers_objects_out_of_full_collections():
    """caller_objects_frozen: during a compile the caller's objects sit in the permanent
    generation (so full collections walk only the compile's own objects) and full collections
    are rarer, afterwards both are back; a caller that froze objects itself keeps its frozen
    set untouched."""
    import gc

    from compilerkit.pipeline import FULL_COLLECTION_EVERY, caller_objects_frozen

    seen = []
    assert gc.get_freeze_count() == 0
    existing = len(gc.get_objects())
    thresholds = gc.get_threshold()
    with caller_objects_frozen():
        seen.append(gc.get_freeze_count())
        assert gc.get_threshold() == (*thresholds[:2], max(thresholds[2],
                                                            FULL_COLLECTION_EVERY))
    assert seen[0] >= existing * 0.9  # what existed (a few frames' objects come and go)
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds
    gc.freeze()
    try:
        mine = gc.get_freeze_count()
        # Frozen objects still die by reference counting (another thread's frames, say), so the
        # count may drift down a little; freezing again would add these fresh tracked objects,
        # unfreezing would empty it.
        fresh = [[] for _ in range(1000)]
        with caller_objects_frozen():
            assert mine - 100 <= gc.get_freeze_count() <= mine
        assert mine - 100 <= gc.get_freeze_count() <= mine  # not unfrozen by the compile
        del fresh
    finally:
        gc.unfreeze()
    # a compile inside someone else's frozen set still gives onnxruntime's answer
    m = affine_model()
    x = R.standard_normal((2, 4)).astype(np.float32)
    gc.freeze()
    try:
        got = ck.compile(m).run(x)[0]
    finally:
        gc.unfreeze()
    np.testing.assert_allclose(got, ort_run(m, [x])[0], rtol=1e-5, atol=1e-6)


def test_the_compiles_own_ir_is_frozen_during_code_generation(monkeypatch):
    """Before the code generator runs, the IR the compile made (it lives to the end) joins the
    frozen objects, so a full collection during code generation walks only what codegen makes;
    all of it is unfrozen when the compile returns. Not when the caller froze objects."""
    import gc

    import compilerkit.loopnest.driver as driver
    from compilerkit.pipeline import Compilation

    counts = {"lower": [], "codegen": []}
    real_finish, real_lower = driver.finish, Compilation.lower

    def finish(*args, **kw):
        counts["codegen"].append(gc.get_freeze_count())
        return real_finish(*args, **kw)

    def lower(self, module):
        counts["lower"].append(gc.get_freeze_count())
        return real_lower(self, module)

    monkeypatch.setattr(driver, "finish", finish)
    monkeypatch.setattr(Compilation, "lower", lower)
    assert gc.get_freeze_count() == 0
    m = affine_model()
    x = R.standard_normal((2, 4)).astype(np.float32)
    got = ck.compile(m, codegen="loopnest").run(x)[0]
    # the caller's objects from the start; the ONNX and Kernel IR (hundreds of objects) too
    assert counts["lower"][0] > 0 and counts["codegen"][0] > counts["lower"][0] + 200
    assert gc.get_freeze_count() == 0
    np.testing.assert_allclose(got, ort_run(m, [x])[0], rtol=1e-5, atol=1e-6)
    gc.freeze()
    try:
        mine = gc.get_freeze_count()
        ck.compile(m, codegen="loopnest")
        # (frozen objects may still die by reference count: the count only never grows)
        assert counts["codegen"][-1] <= mine and gc.get_freeze_count() <= mine
    finally:
        gc.unfreeze()
