"""compilerkit's thread pool (backends/threadpool.py): a job is done exactly once by the caller
and the partners that joined, never more partners than asked for, jobs that overlap run on
their callers alone, and compiled models give the same bits on the pool as on libgomp."""

import ctypes

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest
from ckhelpers import make_model, on_threads, ort_run
from onnx import helper

import compilerkit as ck
from compilerkit.backends import threadpool

pytestmark = pytest.mark.skipif(not threadpool.available(), reason="the pool needs Linux")

I64 = ir.IntType(64)
CTX = ctypes.c_int64 * 4  # total, next, done, participants


def chunk_body():
    """JIT-compiled `body(ctx)` as codegen writes them: take chunks of 3 from ctx[1] with an
    atomic add until ctx[0] is reached, work on it, add its size to ctx[2]; count the threads
    that ran it in ctx[3]."""
    m = ir.Module("body")
    m.triple = llvm.get_process_triple()
    f = ir.Function(m, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer()]), "body")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    ctx = b.bitcast(f.args[0], I64.as_pointer())
    field = lambda k: b.gep(ctx, [ir.Constant(I64, k)])  # noqa: E731
    who = b.atomic_rmw("add", field(3), ir.Constant(I64, 1), "seq_cst")
    # A partner (not the first thread in) works long on each chunk it takes, so a caller that
    # did not wait for it would return while it still holds a chunk.
    work_per_chunk = b.select(b.icmp_signed(">", who, ir.Constant(I64, 0)),
                              ir.Constant(I64, 100_000), ir.Constant(I64, 2000))
    total = b.load(field(0))
    take, work, done = (f.append_basic_block(n) for n in ("take", "work", "done"))
    b.branch(take)
    b.position_at_end(take)
    first = b.atomic_rmw("add", field(1), ir.Constant(I64, 3), "seq_cst")
    b.cbranch(b.icmp_signed("<", first, total), work, done)
    b.position_at_end(work)
    # The work of a chunk: atomic loads the optimiser keeps.
    spin, after = f.append_basic_block("spin"), f.append_basic_block("after")
    b.branch(spin)
    b.position_at_end(spin)
    i = b.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), work)
    b.load_atomic(field(0), "seq_cst", 8)
    i.add_incoming(b.add(i, ir.Constant(I64, 1)), spin)
    b.cbranch(b.icmp_signed("<", i, work_per_chunk), spin, after)
    b.position_at_end(after)
    last = b.select(b.icmp_signed("<", b.add(first, ir.Constant(I64, 3)), total),
                    b.add(first, ir.Constant(I64, 3)), total)
    b.atomic_rmw("add", field(2), b.sub(last, first), "seq_cst")
    b.branch(take)
    b.position_at_end(done)
    b.ret_void()
    mod = llvm.parse_assembly(str(m))
    engine = llvm.create_mcjit_compiler(mod, llvm.Target.from_default_triple()
                                        .create_target_machine())
    engine.finalize_object()
    return engine, engine.get_function_address("body")


@pytest.fixture(scope="module")
def pool_and_body():
    pool = threadpool.pool()
    pool.ensure_workers(4)
    engine, body = chunk_body()
    call = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                            ctypes.c_int32)(pool.address)
    yield call, body
    del engine


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_a_job_is_done_once_by_at_most_the_threads_asked_for(pool_and_body, threads):
    call, body = pool_and_body
    for total in (0, 1, 5, 100, 1001):
        ctx = CTX(total, 0, 0, 0)
        call(body, ctypes.addressof(ctx), threads, 0)
        assert ctx[2] == total  # every iteration, once: the caller waited for its partners
        assert 1 <= ctx[3] <= threads


def test_overlapping_jobs_from_python_threads_are_each_done_once(pool_and_body):
    call, body = pool_and_body
    results = []

    def work(_):
        for _ in range(200):
            ctx = CTX(997, 0, 0, 0)
            call(body, ctypes.addressof(ctx), 3, 0)
            results.append((ctx[2], ctx[3]))

    errors = on_threads(work, 4)
    assert not errors and len(results) == 800
    assert all(done == 997 and 1 <= n <= 3 for done, n in results)


def _conv_relu_model():
    r = np.random.default_rng(1)
    N = helper.make_node
    w = r.standard_normal((16, 8, 3, 3)).astype(np.float32) / 5
    x = r.standard_normal((1, 8, 24, 24)).astype(np.float32)
    model = make_model([N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), N("Relu", ["c"], ["y"])],
                       [("x", x)], ["y"], [("w", w)])
    return model, x


def test_models_give_libgomps_bits_on_the_pool(monkeypatch):
    model, x = _conv_relu_model()
    ref = ort_run(model, [x])[0]
    answers = {}
    for choice in ("ck", "gomp"):
        monkeypatch.setenv("CK_THREAD_POOL", choice)
        cm = ck.compile(model, asm=False)
        assert (cm.session.pool is not None) == (choice == "ck")
        for threads in (1, 2, 3, 7):
            got = cm.run(x, num_threads=threads)[0]
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
            answers[choice, threads] = got.tobytes()
    assert len(set(answers.values())) == 1


def test_the_choice_is_checked(monkeypatch):
    monkeypatch.setenv("CK_THREAD_POOL", "openmp")
    with pytest.raises(ValueError, match="CK_THREAD_POOL"):
        threadpool.available()


def _hold_count(pool):
    return ctypes.c_int32.from_address(pool._address("hold")).value


def test_a_held_run_is_counted_and_released(pool_and_body, monkeypatch):
    """held() raises the native hold count for the run and lowers it after, also when the run
    raises, and jobs inside it are done exactly once."""
    call, body = pool_and_body
    pool = threadpool.pool()
    monkeypatch.setattr(pool, "oversubscribed", lambda: False)
    before = pool.counters()
    with pool.held():
        assert _hold_count(pool) == 1
        for total in (1, 100, 1001):
            ctx = CTX(total, 0, 0, 0)
            call(body, ctypes.addressof(ctx), 2, 0)
            assert ctx[2] == total and 1 <= ctx[3] <= 2
    assert _hold_count(pool) == 0
    with pytest.raises(KeyError), pool.held():
        raise KeyError("a run that fails")
    assert _hold_count(pool) == 0
    after = pool.counters()
    assert after["jobs"] - before["jobs"] == 3
    assert 0 <= after["joins"] - before["joins"] <= 3  # one slot per job (n = 2)


def test_holds_from_many_threads_balance(pool_and_body, monkeypatch):
    call, body = pool_and_body
    pool = threadpool.pool()
    monkeypatch.setattr(pool, "oversubscribed", lambda: False)
    done = []

    def work(_):
        for _ in range(50):
            with pool.held():
                ctx = CTX(301, 0, 0, 0)
                call(body, ctypes.addressof(ctx), 3, 0)
                done.append(ctx[2])

    assert not on_threads(work, 4)
    assert done == [301] * 200
    assert _hold_count(pool) == 0


def test_a_held_worker_still_goes_to_sleep(pool_and_body, monkeypatch):
    """A run that holds the pool but starts no loop for long does not keep workers spinning
    for ever: after HELD_SPINS spins they sleep (polled, no clock in the assertion)."""
    import time

    pool = threadpool.pool()
    monkeypatch.setattr(pool, "oversubscribed", lambda: False)
    before = pool.counters()["sleeps"]
    with pool.held():
        for _ in range(3000):  # up to 30 s on a loaded machine; ~10 ms on an idle one
            if pool.counters()["sleeps"] > before:
                break
            time.sleep(0.01)
        assert pool.counters()["sleeps"] > before


def test_no_hold_on_an_oversubscribed_machine(monkeypatch):
    pool = threadpool.pool()
    for load, busy in ((100.0, True), (0.0, False)):
        monkeypatch.setattr(threadpool.os, "getloadavg", lambda load=load: (load, load, load))
        pool._load_checked = -1e9  # read the load again
        assert pool.oversubscribed() is busy
        with pool.held():
            assert _hold_count(pool) == (0 if busy else 1)
        assert _hold_count(pool) == 0
    pool._load_checked = -1e9


def test_held_runs_keep_workers_off_the_callers_cpu(monkeypatch):
    """A held run gives the workers the caller's CPUs less its own (a worker woken on the
    caller's CPU shared its core while another stood idle); with no CPU to spare for each
    worker, or on an oversubscribed machine, they get all of them. Checked against the
    kernel's own affinity masks."""
    import os

    pool = threadpool.pool()
    pool.ensure_workers(2)
    worker = pool.workers[0]
    allowed = os.sched_getaffinity(0)
    assert threadpool._current_cpu() in allowed | {None}
    monkeypatch.setattr(pool, "oversubscribed", lambda: False)
    monkeypatch.setattr(threadpool, "_current_cpu", lambda: min(allowed))
    with pool.held():
        mask = os.sched_getaffinity(worker.native_id)
    if len(allowed) > len(pool.workers):
        assert mask == allowed - {min(allowed)}
    else:
        assert mask == allowed
    monkeypatch.setattr(pool, "oversubscribed", lambda: True)
    with pool.held():
        assert os.sched_getaffinity(worker.native_id) == allowed
    pool.place(None)
    monkeypatch.setattr(threadpool, "_current_cpu", lambda: 10**6)  # a CPU not ours: all
    monkeypatch.setattr(pool, "oversubscribed", lambda: False)
    with pool.held():
        assert os.sched_getaffinity(worker.native_id) == allowed


def test_compiled_runs_release_their_hold():
    """CompiledModel.run at 2 threads holds the pool only while it runs."""
    model, x = _conv_relu_model()
    cm = ck.compile(model, asm=False)
    pool = threadpool.pool()
    for threads in (1, 2, 3):
        cm.run(x, num_threads=threads)
        assert _hold_count(pool) == 0
