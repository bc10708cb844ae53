"""fuse-nests (krnl_passes/fuse_nests.py): an elementwise chain becomes one nest and one LLVM
function, with the same bits as the nests one by one (-O0 leaves them apart); a buffer that is
a model output or that another node reads too is never fused away."""

import numpy as np
from ckhelpers import make_model, ort_run
from onnx import helper

import compilerkit as ck
from compilerkit.dialects import krnl
from compilerkit.krnl_passes.fuse_nests import fuse_nests
from compilerkit.onnx_passes.single_node import main_func
from compilerkit.pipeline import compile_to


def bn_chain(extra_output=None, seed=0):
    """DenseNet's pre-activation BatchNormalization as its exporter leaves it after
    decomposition: x * s1 + t1, then * s2 + t2, then Relu (per-channel constants)."""
    r = np.random.default_rng(seed)
    N = helper.make_node
    consts = [(n, r.standard_normal((6, 1, 1)).astype(np.float32)) for n in
              ("s1", "t1", "s2", "t2")]
    nodes = [N("Mul", ["x", "s1"], ["a"], name="mul1"), N("Add", ["a", "t1"], ["b"], name="add1"),
             N("Mul", ["b", "s2"], ["c"], name="mul2"), N("Add", ["c", "t2"], ["d"], name="add2"),
             N("Relu", ["d"], ["y"], name="relu")]
    x = r.standard_normal((1, 6, 5, 7)).astype(np.float32)
    outputs = ["y"] + ([extra_output] if extra_output else [])
    return make_model(nodes, [("x", x)], outputs, consts), x


def nests(kmodule):
    return [op for op in main_func(kmodule).body.block.ops if isinstance(op, krnl.IterateOp)]


def test_a_chain_is_one_nest_with_the_same_bits():
    model, x = bn_chain()
    k3 = compile_to("kernel-ir", model)
    (nest,) = nests(k3)
    assert nest.attributes["onnx_node"].data == "add2"  # Relu fused into it by fuse-elementwise
    assert [a.data for a in nest.attributes["fused_nodes"].data] == ["mul1", "add1", "mul2"]
    assert len(nests(compile_to("kernel-ir", model, opt_level=0))) == 4
    fused = ck.compile(model, asm=False).run(x)[0]
    apart = ck.compile(model, opt_level=0, asm=False).run(x)[0]
    assert np.array_equal(fused.view(np.uint32), apart.view(np.uint32))
    np.testing.assert_allclose(fused, ort_run(model, [x])[0], rtol=1e-6, atol=1e-6)


def test_one_function_for_the_chain():
    model, _ = bn_chain()
    cm = ck.compile(model, asm=False)
    nodes = {n for n in cm.provenance.functions.values() if n}
    assert nodes == {"add2"}


def test_a_model_output_in_the_chain_stays():
    # "b" is an output too: its buffer is the caller's, so mul1 -> add1 fuse but add1's nest
    # stays and writes it; mul2 -> add2 fuse after it.
    model, x = bn_chain(extra_output="b")
    k = compile_to("kernel-ir", model)
    assert len(nests(k)) == 2
    got = ck.compile(model, asm=False).run(x)
    ref = ort_run(model, [x])
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-6)


def test_a_buffer_read_by_two_nodes_stays():
    model, x = bn_chain()
    g = model.graph
    g.node.append(helper.make_node("Neg", ["b"], ["z"], name="neg"))
    g.output.append(helper.make_empty_tensor_value_info("z"))
    k = compile_to("kernel-ir", model)
    # mul1 -> add1 fuse; "b" has two readers (mul2 and neg), so add1's nest stays.
    assert any("fused_nodes" in n.attributes and
               [a.data for a in n.attributes["fused_nodes"].data] == ["mul1"] for n in nests(k))
    got = ck.compile(model, asm=False).run(x)
    for o, r in zip(got, ort_run(model, [x]), strict=True):
        np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-6)


def test_fusing_is_idempotent():
    model, _ = bn_chain()
    k = compile_to("kernel-ir", model, opt_level=0)
    assert fuse_nests(k) == 3
    assert fuse_nests(k) == 0
    k.verify()
