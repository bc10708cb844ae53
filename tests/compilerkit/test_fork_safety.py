"""A model run on threads, then run again in a forked child (multiprocessing's default start
method on Linux, a notebook's `os.fork()`): the child must get the answer, on threads of its
own, with either code generator. libgomp's thread team, inherited from the parent, hung the
child's first parallel loop forever (loopnest called GOMP_parallel); compilerkit's pool starts
afresh in the child (os.register_at_fork). Each case runs in a subprocess with a timeout, so a
hang fails the test instead of the test session."""

import os
import subprocess
import sys

import pytest
from ckhelpers import skip_unless_codegen_runs

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

CHILD = """
import os, sys, numpy as np
from onnx import TensorProto, helper, numpy_helper
import compilerkit as ck
from compilerkit.backends import threadpool

rng = np.random.default_rng(0)
w = rng.standard_normal((96, 96)).astype(np.float32)
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [192, 96])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [192, 96])],
                      [numpy_helper.from_array(w, "w")])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
cm = ck.compile(model, asm=False, codegen=sys.argv[1])
assert "krnl.parallel" in str(cm.stages["kernel-ir"])
x = rng.standard_normal((192, 96)).astype(np.float32)
want = cm.run(x, num_threads=1)[0]
assert np.array_equal(cm.run(x, num_threads=2)[0], want)  # the parent's threads exist now
pid = os.fork()
if pid == 0:
    ok = all(np.array_equal(cm.run(x, num_threads=n)[0], want) for n in (2, 3, 2))
    workers = len(threadpool.pool().workers) if threadpool.available() else -1
    os.write(1, f"child ok={ok} workers={workers}\\n".encode())
    os._exit(0 if ok else 3)
import signal, time
deadline = time.monotonic() + 120  # a hang, not a speed bound: the child needs about 1 s
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("child status", os.waitstatus_to_exitcode(status))
        break
    if time.monotonic() > deadline:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print("child hung")
        break
    time.sleep(0.05)
print("parent ok", np.array_equal(cm.run(x, num_threads=2)[0], want))
"""


@pytest.mark.parametrize("codegen", ["llvm", "loopnest"])
def test_run_in_a_forked_child_after_threads(codegen):
    skip_unless_codegen_runs(codegen)
    r = subprocess.run([sys.executable, "-c", CHILD, codegen], capture_output=True, text=True,
                       timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "child status 0" in r.stdout, r.stdout + r.stderr[-2000:]
    assert "parent ok True" in r.stdout
    from compilerkit.backends import threadpool

    if threadpool.available():  # the child's loops ran on workers of its own, not serially
        assert "workers=2" in r.stdout, r.stdout


SHORT = """
import os, resource, sys, numpy as np
from onnx import TensorProto, helper, numpy_helper
import compilerkit as ck

rng = np.random.default_rng(1)
w = rng.standard_normal((6, 3)).astype(np.float32)
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                       helper.make_node("Tanh", ["m"], ["y"], name="t")], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [10, 6])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [10, 3])],
                      [numpy_helper.from_array(w, "w")])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
codegen = sys.argv[1]
x = rng.standard_normal((10, 6)).astype(np.float32)
want = ck.compile(model, asm=False, codegen=codegen, num_threads=2).run(x)[0]
for kib in map(int, sys.argv[2:]):
    vm = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    pid = os.fork()
    if pid == 0:
        resource.setrlimit(resource.RLIMIT_AS, (vm + kib * 1024,) * 2)
        try:
            got = ck.compile(model, asm=False, codegen=codegen, num_threads=2).run(x)[0]
            said = "same" if np.allclose(got, want, rtol=1e-5) else "DIFFERENT"
        except MemoryError as e:
            said = "MemoryError" + (" naming LLVM" if "LLVM" in str(e) else "")
        except BaseException as e:
            said = f"UNCLEAR {type(e).__name__}: {e}"
        os.write(1, f"{kib}: {said}\\n".encode())
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status:
        print(f"{kib}: child status {os.waitstatus_to_exitcode(status)}")
"""


@pytest.mark.parametrize("codegen", ["llvm", "loopnest"])
def test_a_forked_child_with_no_address_space_left_gets_a_memory_error(codegen):
    """A forked child under RLIMIT_AS with (almost) no room compiles again: LLVM's C++ ended
    it (std::bad_alloc: SIGABRT; "LLVM ERROR: out of memory") or llvmlite's IR printer
    raised SystemError('... returned NULL without setting an exception'); the room LLVM needs
    is now asked for first, and its lack is a MemoryError naming the LLVM stage."""
    skip_unless_codegen_runs(codegen)
    kibs = [0, 256, 768, 1792, 2816, 3328, 4096, 8192]  # where each failure was seen
    r = subprocess.run([sys.executable, "-c", SHORT, codegen, *map(str, kibs)],
                       capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert len(lines) == len(kibs), r.stdout + r.stderr[-2000:]
    for line in lines:
        assert line.endswith((": same", ": MemoryError naming LLVM", ": MemoryError")), line
    # with (almost) no room the refusal names LLVM, before its C++ can run out
    assert lines[0] == "0: MemoryError naming LLVM" or lines[0].endswith("MemoryError"), lines
