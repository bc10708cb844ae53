"""Native objects (LLVM contexts, modules, engines, Unicorn instances) are released by their
owners, in order, whenever and however a compiled model is dropped: explicitly, by reference
counting, or by the garbage collector inside a reference cycle (a traceback that keeps a
model, as pytest and notebooks keep the last error). A wrong order is a crash of the whole
process, so the stress part runs in a subprocess and the test reads its exit status.

Script mode runs the stress outside the suite (many rounds, several threads):

    python tests/compilerkit/test_native_lifetimes.py --rounds 500 --threads 3

It prints one line per 10 rounds and "ok" at the end; a crash is a nonzero exit status (-11:
SIGSEGV). Each round, each thread compiles one model of a kind taken in turn (the split
host JIT, a shared library, s390x, ppc64, loopnest, a compile that fails, a run stopped by
EmulationLimit, a run with a failed run-time check), checks its answer against numpy, and
drops it in one of several ways; the collector runs at random points.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import subprocess
import sys
import tempfile
import threading

import numpy as np
from onnx import TensorProto, helper, numpy_helper

# Enough node functions for backends/split.py to cut the host module in two partitions:
# MatMuls of different shapes (equal nodes would share one function), a Relu between each.
CHAIN = 9
WIDTHS = [6 + k for k in range(CHAIN + 1)]
KINDS = ("split", "lib", "s390x", "ppc64", "loopnest", "bad-model", "limit", "run-error")
HERE = os.path.abspath(__file__)


def chain_model(seed: int):
    """x @ W0 -> Relu -> ... @ W8 (W_k of WIDTHS[k] x WIDTHS[k+1]): (serialised model,
    input, numpy's float64 answer)."""
    r = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "x"
    ws = []
    for k in range(CHAIN):
        w = (r.standard_normal((WIDTHS[k], WIDTHS[k + 1])) / np.sqrt(WIDTHS[k])).astype(
            np.float32)
        ws.append(w)
        inits.append(numpy_helper.from_array(w, f"w{k}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{k}"], [f"m{k}"]))
        prev = f"m{k}"
        if k < CHAIN - 1:
            nodes.append(helper.make_node("Relu", [prev], [f"r{k}"]))
            prev = f"r{k}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, WIDTHS[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, WIDTHS[-1]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = r.standard_normal((2, WIDTHS[0])).astype(np.float32)
    ref = x.astype(np.float64)
    for k, w in enumerate(ws):
        ref = ref @ w.astype(np.float64)
        if k < CHAIN - 1:
            ref = np.maximum(ref, 0)
    return model.SerializeToString(), x, ref


def gather_model():
    """y = Gather(table, i): an index out of range is a RunError naming the node."""
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["t", "i"], ["y"], name="lookup")], "gather",
        [helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(table, "t")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


class Stress:
    """Shared state of one stress run: models kept for later, errors kept with their
    tracebacks (cycles through the frames that hold models)."""

    def __init__(self, seed: int, tmp: str):
        self.rng = random.Random(seed)
        self.tmp = tmp
        self.lock = threading.Lock()
        self.kept: list = []  # models and exc_info tuples, dropped some rounds later
        self.model, self.x, self.ref = chain_model(seed)
        self.counts = {k: 0 for k in KINDS}
        self.failures: list[str] = []

    def keep(self, thing) -> None:
        with self.lock:
            self.kept.append(thing)
            if len(self.kept) > 6:
                del self.kept[self.rng.randrange(len(self.kept))]

    def check(self, kind, got) -> None:
        if not np.allclose(got, self.ref, rtol=1e-4, atol=1e-5):
            with self.lock:
                self.failures.append(f"{kind}: wrong answer {got!r}, numpy {self.ref!r}")

    def drop(self, cm, rng) -> None:
        """One of: close it, drop it, keep it for later, put it in a cycle."""
        way = rng.randrange(4)
        if way == 0:
            cm.close()
        elif way == 1:
            self.keep(cm)
        elif way == 2:
            box = [cm]
            box.append(box)  # garbage only the collector frees
        if rng.random() < 0.3:
            gc.collect(rng.choice((0, 1, 2)))

    def task(self, kind: str, rng) -> None:
        import compilerkit as ck
        from compilerkit.backends.emulated import EmulationLimit
        from compilerkit.backends.host import SharedLibrary
        from compilerkit.frontend import ModelError
        from compilerkit.runtime import RunError

        if kind == "split":
            cm = ck.compile(self.model, asm=rng.random() < 0.5)
            self.check(kind, cm.run(self.x)[0])
            if rng.random() < 0.5:
                assert "define" in cm.stages["llvm-ir"]
        elif kind == "lib":
            path = os.path.join(self.tmp, f"m{threading.get_ident()}_{rng.randrange(1 << 30)}.so")
            ck.compile_to("lib", self.model, out=path)
            lib = SharedLibrary(path)
            session = lib.session([("x", (2, WIDTHS[0]), np.dtype(np.float32))],
                                  [("y", (2, WIDTHS[-1]), np.dtype(np.float32))])
            self.check(kind, session.run(self.x)[0])
            cm = session
        elif kind in ("s390x", "ppc64"):
            cm = ck.compile(self.model, target=kind, asm=False)
            self.check(kind, cm.run(self.x)[0])
        elif kind == "loopnest":
            cm = ck.compile(self.model, codegen="loopnest", asm=rng.random() < 0.5)
            self.check(kind, cm.run(self.x)[0])
        elif kind == "bad-model":
            try:
                ck.compile(self.model[: len(self.model) // 2])
            except (ModelError, ValueError) as error:
                self.keep((type(error), error, error.__traceback__))
            return
        elif kind == "limit":
            cm = ck.compile(self.model, target=rng.choice(("s390x", "ppc64")), asm=False)
            # An instruction budget, not a time limit: the run stops whatever the machine's
            # speed (a 1 us limit let 33 of 125 runs of this small model end first).
            cm.session.max_instructions = 100
            try:
                cm.run(self.x)
            except EmulationLimit as error:
                self.keep((type(error), error, error.__traceback__))  # frames hold `cm`
            else:
                raise AssertionError("a run limited to 100 instructions ended")
            cm.session.max_instructions = None
            self.check(kind, cm.run(self.x)[0])  # the machine still works after a stop
        else:  # run-error
            cm = ck.compile(gather_model(), target=rng.choice(("host", "s390x", "ppc64")),
                            asm=False)
            try:
                cm.run(np.array([1, 7], np.int64))
            except RunError as error:
                self.keep((type(error), error, error.__traceback__))
            else:
                raise AssertionError("an index out of range gave no RunError")
        self.drop(cm, rng)

    def round(self, k: int, threads: int) -> None:
        seeds = [self.rng.randrange(1 << 30) for _ in range(threads)]
        kinds = [KINDS[(k * threads + t) % len(KINDS)] for t in range(threads)]
        errors: list = []

        def work(t):
            rng = random.Random(seeds[t])
            try:
                self.task(kinds[t], rng)
            except BaseException as error:  # noqa: BLE001 - reported after the join
                errors.append(f"{kinds[t]}: {type(error).__name__}: {error}")

        pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        self.failures += errors
        for kind in kinds:
            self.counts[kind] += 1
        if self.rng.random() < 0.5:
            with self.lock:
                self.kept.reverse() if self.rng.random() < 0.5 else self.kept.clear()
            gc.collect()


def stress(rounds: int, threads: int, seed: int = 0) -> int:
    # Two partitions whatever the machine's cores (backends/split.py).
    os.environ.setdefault("CK_COMPILE_THREADS", "2")
    with tempfile.TemporaryDirectory() as tmp:
        s = Stress(seed, tmp)
        for k in range(rounds):
            s.round(k, threads)
            if (k + 1) % 10 == 0 or k + 1 == rounds:
                print(f"round {k + 1}/{rounds}: {s.counts}", flush=True)
        s.kept.clear()
        gc.collect()
    for line in s.failures:
        print("FAILED", line, flush=True)
    if not s.failures:
        print("ok", flush=True)
    return 1 if s.failures else 0


def _run_script(*args, timeout=600, env=None):
    return subprocess.run([sys.executable, HERE, *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


# ---- the tests -----------------------------------------------------------------------------

def test_stress_in_a_subprocess_survives():
    # Every kind comes up once (8 kinds, 2 threads, 4 rounds).
    done = _run_script("--rounds", "4", "--threads", "2")
    assert done.returncode == 0, (done.returncode, done.stdout[-3000:], done.stderr[-3000:])
    assert done.stdout.strip().endswith("ok")


def test_a_split_model_in_a_cycle_is_collected_safely():
    # The partitions' LLVM modules and contexts in one garbage cycle: the collector used to
    # free a context before its module, and the process died (SIGSEGV).
    done = _run_script("--cycle")
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    assert "collected" in done.stdout


def test_a_dropped_emulated_model_frees_its_address_space_without_gc():
    done = _run_script("--address-space")
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    freed = [float(v) for v in done.stdout.split()[-2:]]
    # Each instance takes over 64 MiB (its translation buffer); it all comes back but what
    # the six compiles themselves left (before: nothing came back until a collection).
    assert freed[0] > 4 * 64 and freed[1] > 0.75 * freed[0], done.stdout


def test_short_address_space_is_a_memory_error_not_an_exit():
    # Under `ulimit -v` Unicorn exited the process from C ("Could not allocate dynamic
    # translator buffer", status 1).
    done = _run_script("--ulimit")
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-3000:])
    assert "MemoryError" in done.stdout and "address space" in done.stdout


def test_closed_models_raise_instead_of_running_freed_code():
    import pytest

    import compilerkit as ck

    model, x, ref = chain_model(1)
    for target in ("host", "s390x"):
        with ck.compile(model, target=target, asm=False) as cm:
            np.testing.assert_allclose(cm.run(x)[0], ref, rtol=1e-4, atol=1e-5)
        cm.close()  # a second time: nothing happens
        with pytest.raises(RuntimeError, match="closed"):
            cm.run(x)


# ---- script-mode helpers for the tests -------------------------------------------------------

def _vsz_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _cycle() -> None:
    import compilerkit as ck

    os.environ["CK_COMPILE_THREADS"] = "2"
    model, x, ref = chain_model(2)
    for _ in range(2):
        cm = ck.compile(model, asm=False)
        assert type(cm.llvm_module).__name__ == "Partitions"
        assert np.allclose(cm.run(x)[0], ref, rtol=1e-4, atol=1e-5)
        box = [cm]
        box.append(box)
        del cm, box
        gc.collect()
    print("collected")


def _address_space() -> None:
    import compilerkit as ck

    model, x, _ = chain_model(3)
    gc.disable()  # what is freed here is freed without the collector
    for target in ("s390x", "ppc64"):
        ck.compile(model, target=target, asm=False).run(x)  # warm: LLVM's own first-use
    before = _vsz_mib()
    models = [ck.compile(model, target=t, asm=False) for t in ("s390x", "ppc64") * 3]
    for cm in models:
        cm.run(x)
    live = _vsz_mib()
    del models, cm
    after = _vsz_mib()
    print("MiB taken, freed:", live - before, live - after)


def _ulimit() -> None:
    import resource

    import compilerkit as ck
    from compilerkit.backends.emulator import EmulatedMachine

    model, x, _ = chain_model(4)
    obj = ck.compile_to("obj", model, target="s390x")
    limit = int((_vsz_mib() + 16) * 2**20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    try:
        EmulatedMachine("s390x", obj)
    except MemoryError as error:
        print("MemoryError:", error)
    else:
        print("no error under the limit")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=500)
    p.add_argument("--threads", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cycle", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--address-space", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--ulimit", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for flag, fn in (("cycle", _cycle), ("address_space", _address_space),
                     ("ulimit", _ulimit)):
        if getattr(args, flag):
            fn()
            return 0
    return stress(args.rounds, args.threads, args.seed)


if __name__ == "__main__":
    sys.exit(main())
