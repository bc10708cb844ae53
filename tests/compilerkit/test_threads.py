"""CompiledModel.run from many threads at once (issue 10, item 5): each host call takes an
arena of its own from the session's pool, so concurrent runs never share intermediate buffers.
With the old single shared arena about a quarter of the results from 4 threads were wrong."""

import ctypes
import threading

import numpy as np
from ckhelpers import ort_run
from onnx import TensorProto, helper, numpy_helper

import compilerkit as ck


def mlp(width=160, depth=6, seed=0):
    """x -> (MatMul, Add, Relu) x depth: every layer's result lives in the arena."""
    rng = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "x"
    for k in range(depth):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        b = rng.standard_normal(width).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{k}"), numpy_helper.from_array(b, f"b{k}")]
        out = "y" if k == depth - 1 else f"h{k}"
        nodes += [helper.make_node("MatMul", [prev, f"w{k}"], [f"m{k}"]),
                  helper.make_node("Add", [f"m{k}", f"b{k}"], [f"a{k}"]),
                  helper.make_node("Relu", [f"a{k}"], [out])]
        prev = out
    g = helper.make_graph(nodes, "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, width])],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_run_from_threads_matches_onnxruntime():
    model = mlp()
    cm = ck.compile(model, asm=False)
    assert cm.arena_bytes > 0  # the intermediates really are in an arena
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((32, 160)).astype(np.float32) for _ in range(16)]
    refs = [ort_run(model, [x])[0] for x in xs]
    n_threads, rounds = 6, 30
    wrong, errors = [], []
    start = threading.Barrier(n_threads)

    def worker(t):
        try:
            start.wait()
            for r in range(rounds):
                k = (t * 7 + r) % len(xs)
                y = cm.run(xs[k])[0]
                if not np.allclose(y, refs[k], rtol=1e-4, atol=1e-4):
                    wrong.append((t, r))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert not wrong, f"{len(wrong)} of {n_threads * rounds} concurrent runs were wrong"
    # Concurrent calls needed arenas of their own; one thread alone reuses one.
    assert 1 <= len(cm.session._free) <= n_threads
    pool = cm.session.pool
    if pool is not None:  # every run that held compilerkit's pool let go of it
        assert ctypes.c_int32.from_address(pool._address("hold")).value == 0


def test_one_thread_reuses_one_arena():
    cm = ck.compile(mlp(width=16, depth=2), asm=False)
    x = np.ones((32, 16), np.float32)
    for _ in range(5):
        cm.run(x)
    assert len(cm.session._free) == 1
