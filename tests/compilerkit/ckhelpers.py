"""Shared helpers: build one-node ONNX models and compare compilerkit with onnxruntime."""

import threading

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import compilerkit as ck


def make_model(nodes, inputs, outputs, inits=(), opset=13):
    """inputs: [(name, array)], outputs: [name]; shapes of outputs left to inference."""
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
          for n, a in inputs]
    vo = [helper.make_empty_tensor_value_info(n) for n in outputs]
    g = helper.make_graph(nodes, "g", vi, vo,
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def ort_run(model, arrays):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {i.name: a for i, a in zip(s.get_inputs(), arrays, strict=True)}
    return s.run(None, feeds)


def scaled_error(model, x, algo):
    """max |compilerkit - onnxruntime| / max |onnxruntime| of a model's first output, compiled
    with conv_algorithm=`algo`."""
    ref = ort_run(model, [x])[0]
    got = ck.compile(model, asm=False, conv_algorithm=algo).run(x)[0]
    assert got.shape == ref.shape
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


def check(model, arrays, opt_level=3, rtol=1e-4, atol=1e-5):
    ref = ort_run(model, arrays)
    out = ck.compile(model, opt_level=opt_level, asm=False).run(*arrays)
    assert len(out) == len(ref)
    for o, r in zip(out, ref, strict=True):
        assert o.shape == r.shape
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)
    return out


@pytest.fixture
def rng():
    return np.random.default_rng(0)


AFFINE_W = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5.5) / 4
AFFINE_B = np.array([0.5, -1.0, 2.0], np.float32)


def affine_model(fold=False):
    """y = Relu(x @ W + b) (x: 2x4), W and b initializers: constants whose bytes must come out
    in the target's byte order. With `fold`, b is computed as c + c
    from a constant c: an expression the constant-folding pass removes."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"),
             helper.make_node("Add", ["xw", "b"], ["xb"], name="add"),
             helper.make_node("Relu", ["xb"], ["y"], name="relu")]
    inits = [numpy_helper.from_array(AFFINE_W, "W")]
    if fold:
        nodes.insert(0, helper.make_node("Add", ["c", "c"], ["b"], name="fold_me"))
        inits.append(numpy_helper.from_array(AFFINE_B / 2, "c"))
    else:
        inits.append(numpy_helper.from_array(AFFINE_B, "b"))
    g = helper.make_graph(nodes, "affine",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


class BreaksReturn:
    """A pass that leaves invalid IR: a func.return giving back nothing from a function
    declared to return a tensor (func.return's verifier must refuse it). Records its runs in
    `ran` when given."""

    name = "breaks"

    def __init__(self, ran=None):
        self.ran = ran

    def apply(self, ctx, module):
        from xdsl.dialects import func

        block = next(iter(module.body.block.ops)).body.block
        block.erase_op(block.last_op)
        block.add_op(func.ReturnOp())
        if self.ran is not None:
            self.ran.append(self.name)


def on_threads(work, n: int) -> list:
    """[work(0), ..., work(n - 1)] run on n Python threads at once; the exceptions any raised,
    listed (the caller asserts there are none)."""
    errors = []

    def run(k):
        try:
            work(k)
        except Exception as error:  # noqa: BLE001 - reported to the caller
            errors.append(error)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


# Node-test results by case name, for this pytest process: the whole-registry run
# (test_onnx_backend.py) and the per-family runs (test_ops_*.py) check the same cases, so each
# case is compiled and run once and its result shared (the result is deterministic: fixed data,
# fixed options).
_NODE_RESULTS: dict = {}


def node_results(cases) -> list:
    """`conformance.run_node_case` for each of `cases`, each case run at most once per process."""
    from compilerkit.measure import conformance

    out = []
    for case in cases:
        if case.name not in _NODE_RESULTS:
            _NODE_RESULTS[case.name] = conformance.run_node_case(case)
        out.append(_NODE_RESULTS[case.name])
    return out


def node_test_passes(ops) -> dict:
    """Run every ONNX backend node test that uses one of `ops`; fail on any wrong answer and
    return, per op, how many cases passed (a case of several ops counts for each)."""
    from compilerkit.measure import conformance

    ops = set(ops)
    results = node_results(c for c in conformance.node_cases()
                           if ops & set(conformance._ops_of(c.model)))
    wrong = [r.name for r in results if r.status == conformance.WRONG]
    assert not wrong, f"wrong answers: {wrong}"
    passed = {op: sum(r.status == conformance.PASSED and op in r.op.split("+")
                      for r in results) for op in ops}
    print("node tests passed per op:", passed)
    return passed


def keras_to_onnx(net):
    """A Keras 3 model exported as users export it (`model.export(format="onnx")`, tf2onnx),
    loaded back as an onnx.ModelProto."""
    import os
    import tempfile

    import onnx

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        net.export(path, format="onnx", verbose=False)
        return onnx.load(path)


def skip_unless_codegen_runs(codegen: str) -> None:
    """Skip the test when ``codegen`` cannot run here (loopnest writes x86-64 code only)."""
    if codegen == "loopnest":
        from compilerkit.backends.host import host_target
        from compilerkit.loopnest.driver import check_host

        try:
            check_host(host_target())
        except ValueError as e:
            pytest.skip(str(e))


def seeded(shape, seed, scale=1.0):
    """A float32 array of standard normals times `scale`, from `seed`."""
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def conv_act_model(x, w_shape, bias=True, act=None, **attrs):
    """Conv of input `x` (+ a Relu or Clip the fuse-conv pass folds into it), weights and bias
    constant (seeded 2 and 3)."""
    inputs = ["x", "w", "b"] if bias else ["x", "w"]
    inits = [("w", seeded(w_shape, 2, 0.3))] + ([("b", seeded((w_shape[0],), 3))] if bias
                                                 else [])
    nodes = [helper.make_node("Conv", inputs, ["y" if act else "z"], **attrs)]
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["y"], ["z"]))
    elif act == "Clip":
        nodes.append(helper.make_node("Clip", ["y", "lo", "hi"], ["z"]))
        inits += [("lo", np.float32(-0.5)), ("hi", np.float32(0.75))]
    return make_model(nodes, [("x", x)], ["z"], inits, opset=17)


def lowering_refusal(module, op_name: str, attrs: dict, match: str) -> str:
    """Set `attrs` on the first `op_name` op of an ONNX IR module, lower it, and return the
    ModelError's text (pytest fails unless lowering raises one matching `match`): a hand-made
    bad attribute must be refused naming its node, never lowered."""
    from compilerkit.dialects import onnx as onnx_d
    from compilerkit.frontend import ModelError
    from compilerkit.lowering import lower_to_krnl

    op = next(o for o in module.walk() if o.name == op_name)
    for key, value in attrs.items():
        op.attributes[key] = onnx_d.to_mlir_attr(value)
    with pytest.raises(ModelError, match=match) as e:
        lower_to_krnl(module)
    return str(e.value)
