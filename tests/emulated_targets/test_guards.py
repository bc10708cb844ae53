"""Issue 10 on the emulated big-endian targets: the run-time guards raise the host's RunError
(ppc64 divides by zero without a trap and s390x traps, but a compiled model behaves as on the
host on both), runs from threads take turns, the limits are checked, and emulator faults are
named for what they are."""

from __future__ import annotations

import threading

import llvmlite.binding as llvm
import numpy as np
import pytest
from onnx import TensorProto, helper

import compilerkit as ck
from compilerkit.backends.emulated import EmulatedSession, Ppc64Backend, S390xBackend
from compilerkit.backends.emulator import EmulatedMachine, EmulationFault

TARGETS = ("s390x", "ppc64")


def one_node(node, inputs, out_type, out_shape):
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(node.output[0], out_type, out_shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


GATHER = one_node(helper.make_node("Gather", ["x", "i"], ["y"], axis=1, name="cols"),
                  [("x", TensorProto.FLOAT, [2, 3]), ("i", TensorProto.INT64, [2])],
                  TensorProto.FLOAT, [2, 2])
DIV = one_node(helper.make_node("Div", ["a", "b"], ["y"], name="quot"),
               [("a", TensorProto.INT64, [3]), ("b", TensorProto.INT64, [3])],
               TensorProto.INT64, [3])
X = np.array([[1.5, -2.0, 3.25], [4.0, 5.5, -6.0]], np.float32)


@pytest.fixture(scope="module", params=TARGETS)
def compiled(request):
    return request.param, ck.compile(GATHER, target=request.param, opt_level=2, asm=False), \
        ck.compile(DIV, target=request.param, opt_level=2, asm=False)


def test_gather_guard_agrees_with_the_host(compiled):
    target, gather, _ = compiled
    host = ck.compile(GATHER, asm=False)
    np.testing.assert_array_equal(gather.run(X, np.array([2, -3]))[0], X[:, [2, 0]])
    messages = []
    for cm in (host, gather):
        with pytest.raises(ck.RunError) as caught:
            cm.run(X, np.array([0, 3]))
        messages.append(str(caught.value))
    assert messages[0] == messages[1] == ("node 'cols' (Gather): an index on axis 1 is out of "
                                          "range; valid indices are [-3, 2]")


def test_integer_division_guards_agree_with_the_host(compiled):
    target, _, div = compiled
    a, b = np.array([7, -7, 9], np.int64), np.array([2, 2, -4], np.int64)
    np.testing.assert_array_equal(div.run(a, b)[0], [3, -3, -2])  # truncated, as C and ORT
    with pytest.raises(ck.RunError, match="node 'quot': integer division by zero"):
        div.run(a, np.array([1, 0, 1], np.int64))
    with pytest.raises(ck.RunError, match="integer division overflows"):
        div.run(np.array([np.iinfo(np.int64).min, 1, 1]), np.array([-1, 1, 1], np.int64))
    np.testing.assert_array_equal(div.run(a, b)[0], [3, -3, -2])  # and runs on


def test_runs_from_threads_take_turns(compiled):
    target, gather, _ = compiled
    results, errors = [], []

    def worker(k):
        try:
            idx = np.array([k % 3, (k + 1) % 3])
            results.append((idx, gather.run(X, idx)[0]))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 6
    for idx, out in results:
        np.testing.assert_array_equal(out, X[:, idx])


@pytest.mark.parametrize("backend", [S390xBackend, Ppc64Backend])
@pytest.mark.parametrize("limits", [dict(timeout_s=0), dict(timeout_s=-1.0),
                                    dict(timeout_s=float("nan")), dict(max_instructions=-1),
                                    dict(max_instructions=0)])
def test_limits_out_of_range_are_value_errors(backend, limits):
    with pytest.raises(ValueError, match=next(iter(limits))):
        backend(**limits)


def test_limits_set_on_a_session_are_checked_before_running(compiled):
    target, gather, _ = compiled
    session: EmulatedSession = gather.session
    session.timeout_s = 0
    try:
        with pytest.raises(ValueError, match="timeout_s"):
            gather.run(X, np.array([0, 1]))
    finally:
        session.timeout_s = 60.0
    session.max_instructions = -3
    try:
        with pytest.raises(ValueError, match="max_instructions"):
            gather.run(X, np.array([0, 1]))
    finally:
        session.max_instructions = None


# ---- raw machine code: the fault names --------------------------------------------------------

IR = """
define i64 @peek(ptr %p, i64 %i) {
  %q = getelementptr i64, ptr %p, i64 %i
  %v = load i64, ptr %q
  ret i64 %v
}
define void @poke(ptr %p) {
  store volatile i32 1, ptr %p
  ret void
}
define i64 @divide(i64 %a, i64 %b) {
  %q = sdiv i64 %a, %b
  ret i64 %q
}
"""


@pytest.fixture(scope="module", params=TARGETS)
def machine(request):
    backend = {"s390x": S390xBackend, "ppc64": Ppc64Backend}[request.param]()
    mod = llvm.parse_assembly(IR)
    mod.triple, mod.data_layout = backend.target.triple, backend.target.data_layout
    return EmulatedMachine(request.param, backend.object_code(mod, 2))


@pytest.mark.parametrize("call", [("peek", [0x7000_0000_0000, 0]), ("peek", [0x10, 0]),
                                  ("poke", [0x7000_0000_0000])])
def test_out_of_bounds_access_is_named_so(machine, call):
    name, args = call
    with pytest.raises(EmulationFault) as caught:
        machine.call(name, args)
    text = str(caught.value)
    assert "out-of-bounds" in text and f"{args[0]:#x}" in text
    assert "illegal instruction" not in text


def test_division_faults_are_named_so(machine):
    if machine.arch == "ppc64":
        # POWER's divd does not trap: the quotient is undefined. Compiled models never get
        # here (the guard above); raw code just returns something.
        machine.call("divide", [7, 0])
        return
    for a, b in ((7, 0), (-(2**63), -1)):
        with pytest.raises(EmulationFault, match="integer divide exception") as caught:
            machine.call("divide", [a, b])
        assert "illegal instruction" not in str(caught.value)
    assert machine.call("divide", [7, 2])["result"] == 3
