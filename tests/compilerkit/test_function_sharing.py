"""Codegen shares node functions: nodes whose functions would be identical (same shapes, same
schedule; weights are pointer parameters) call one function, each parallel nest is one function
`body(ctx)` that GOMP_parallel and the one-thread path both call, and sharing never changes an
answer (onnxruntime is the reference) nor merges functions whose code differs (the nests' key
is checked against the emitted text)."""

import itertools
import re

import mlsys_datasets
import numpy as np
import onnx
import pytest
from ckhelpers import make_model, ort_run
from onnx import TensorProto, helper

import compilerkit as ck
from compilerkit.backends import get_backend
from compilerkit.codegen.emit import Emitter
from compilerkit.dialects import krnl
from compilerkit.measure.provenance import function_ranges
from compilerkit.pipeline import compile_to


def conv_chain(channels=(8, 8, 8), side=16, seed=0):
    """Conv+Relu layers (pads 1) with seeded weights: equal channel counts give equal shapes."""
    r = np.random.default_rng(seed)
    N = helper.make_node
    nodes, inits, prev = [], [], "x"
    for k, (cin, cout) in enumerate(itertools.pairwise(channels)):
        w = r.standard_normal((cout, cin, 3, 3)).astype(np.float32) / 3
        inits.append((f"w{k}", w))
        nodes += [N("Conv", [prev, f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1], name=f"conv{k}"),
                  N("Relu", [f"c{k}"], [f"r{k}"], name=f"relu{k}")]
        prev = f"r{k}"
    nodes.append(N("Identity", [prev], ["y"], name="out"))
    x = r.standard_normal((1, channels[0], side, side)).astype(np.float32)
    return make_model(nodes, [("x", x)], ["y"], inits), x


def node_functions(cm):
    return {f: n for f, n in cm.provenance.functions.items() if n}


def defined(llvm_ir):
    return re.findall(r'^define [^@]*@"?([\w.$]+)"?\(', llvm_ir, re.M)


def test_convs_of_one_shape_share_a_function_and_keep_their_answers():
    model, x = conv_chain((16, 16, 16, 16), side=32)
    ref = ort_run(model, [x])[0]
    cm = ck.compile(model, asm=False)
    fns = node_functions(cm)
    # Input, weights and outputs are all pointer parameters: the three convs (their Relus
    # fused) have the same code, one function with its parallel bodies, called three times.
    shared = [f for f, n in fns.items() if n == ("conv0", "conv1", "conv2")]
    assert shared == list(fns) and all(f.startswith(shared[0]) for f in shared), fns
    calls = re.findall(r'call (?:fastcc )?i64 @"?([\w.]+)"?\(', cm.stages["llvm-ir"])
    assert calls.count(shared[0]) == 3, calls
    for n in (1, 2):  # one thread (the direct call) and two (GOMP_parallel): the same bits
        got = cm.run(x, num_threads=n)[0]
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        if n == 1:
            first = got
    np.testing.assert_array_equal(first, got)


def test_different_shapes_are_not_shared():
    model, x = conv_chain((4, 8, 16), side=16)
    cm = ck.compile(model, asm=False)
    assert all(isinstance(n, str) for n in node_functions(cm).values())
    np.testing.assert_allclose(cm.run(x)[0], ort_run(model, [x])[0], rtol=1e-4, atol=1e-4)


def test_one_function_per_parallel_nest_and_no_wrapper():
    model, x = conv_chain((16, 16), side=32)
    cm = ck.compile(model, asm=False)
    kir = cm.provenance.modules["kernel-ir"]
    parallel = [op for op in kir.walk() if isinstance(op, krnl.IterateOp)
                and krnl.parallel_loop(op) is not None]
    assert parallel
    be = get_backend("host")
    text = be.emit_llvm(kir)
    names = defined(text)
    bodies = [n for n in names if "_par" in n]
    assert len(bodies) == len(parallel) and not any(n.endswith("_omp") for n in names)
    for body in bodies:  # GOMP runs it on the threads, and the one-thread path calls it
        assert re.search(rf'call void @"?GOMP_parallel"?\(void \(i8\*\)\* @"?{body}"?,', text)
        assert re.search(rf'call void @"?{body}"?\(i8\* ', text)


def test_checks_that_name_their_node_are_not_shared():
    # Two integer Divs of one shape: their division guards name different nodes.
    t = TensorProto.INT64
    N = helper.make_node
    nodes = [N("Div", ["a", "b"], ["q"], name="first"), N("Div", ["q", "c"], ["y"], name="second")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(v, t, [4])
                                           for v in "abc"],
                              [helper.make_tensor_value_info("y", t, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    cm = ck.compile(model, asm=False)
    assert set(node_functions(cm).values()) == {"first", "second"}
    a, ok, zero = (np.array(v, np.int64) for v in ([80, 90, 100, 110], [2, 3, 1, 2], [2, 0, 1, 2]))
    np.testing.assert_array_equal(cm.run(a, ok, ok)[0], ort_run(model, [a, ok, ok])[0])
    with pytest.raises(ck.RunError, match="node 'first': integer division by zero"):
        cm.run(a, zero, ok)
    with pytest.raises(ck.RunError, match="node 'second': integer division by zero"):
        cm.run(a, ok, zero)


class VerifyingEmitter(Emitter):
    verify_sharing = True  # emit every function, and fail if a key hit has other code


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2", "light_squeezenet",
                                  "light_inception_v1"])
def test_the_nests_key_never_merges_different_code(name):
    path = str(mlsys_datasets.real_weight_model(name, size="small", progress=False))
    inp = onnx.load(path, load_external_data=False).graph.input[0]
    shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
    kir = compile_to("kernel-ir", path, "host", 3, {inp.name: shape})
    be = get_backend("host")
    be.emit_llvm(kir, emitter=VerifyingEmitter)  # raises AssertionError on a wrong merge
    checked = be.emitted
    be.emit_llvm(kir)
    fast = be.emitted
    assert checked.functions == fast.functions or len(checked.functions) == len(fast.functions)
    assert sum(isinstance(n, tuple) for n in fast.functions.values()) > 0  # some are shared


def test_provenance_gives_a_shared_function_to_each_of_its_nodes():
    model, _ = conv_chain((16, 16, 16, 16), side=32)
    cm = ck.compile(model, asm=False)
    text = cm.stages["llvm-ir"]
    ranges = function_ranges("llvm-ir", text, cm.provenance.functions)
    rows = text.splitlines()
    for node in ("conv1", "conv2"):
        lines = [rows[n - 1] for a, b in ranges[node] for n in range(a, b + 1)]
        assert any(t.startswith("define") for t in lines), node
