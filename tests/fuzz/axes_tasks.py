"""Task axes of the fuzz harness (fuzzlib.py): cases that are not one compile-and-compare.

    kir        hand-edited Kernel IR: the text of a lowered model with one mutation (a loop
               bound past its buffer, an alloc offset past the arena, a matmul size, an index
               constant, a deleted line, stray bytes, a cut) through `parse_ir` +
               `compile_kernel` or `python -m compilerkit.opt`
    cli        `python -m compilerkit` with mutated arguments (bad paths, -o equal to the input,
               an existing header beside a library, bad --input-shape / -O / --target / --emit,
               NUL bytes through the API) in a scratch folder: no file the user did not name
               may change
    fork       compile and run in a forked child of a process whose thread pools and JIT are
               already warm, and under RLIMIT_AS: a clean Python error or the parent's answer,
               never a signal
    segkit     watershed / agglomerate on small affinity volumes, some with NaN, inf, wrong
               shapes or dtypes and bad thresholds; valid ones compared with waterz
    lmskit     Device parameters (NaN, inf, negative, zero, wrong types) and a simulated step
               on a hand-built graph
    memory     RSS of one process over many compiles (native memory that no Python object owns)

Each task returns {"result": class, "detail": text}; the classes are fuzzlib.CLASSES. A task
runs inside a fuzz worker, so a death or hang of the worker itself is caught by the driver.
"""

from __future__ import annotations

import gc
import hashlib
import io
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def reraise_interrupt(e: BaseException) -> None:
    """Cases catch BaseException (xDSL's parse errors derive from it, not from Exception, and
    that is itself a finding), but not the user's Ctrl-C or an exit."""
    if isinstance(e, (KeyboardInterrupt, SystemExit)):
        raise e


def _clean_error(e: BaseException, names=()) -> bool:
    """A compilerkit (or kit) error, or a ValueError/TypeError whose message names one of
    `names` (an option, an argument): what bad input should get."""
    msg = str(e).strip()
    if not msg:
        return False
    if type(e).__module__.split(".")[0] in ("compilerkit", "segkit", "lmskit"):
        return True
    if isinstance(e, (ValueError, TypeError)):
        return not names or any(str(n) in msg for n in names)
    return False


def _small_model(rng: random.Random):
    """A small valid float model (MatMul -> Add -> activation, or a Conv) and its input shape."""
    from onnx import TensorProto, helper, numpy_helper

    g = np.random.default_rng(rng.randrange(1 << 30))
    if rng.random() < 0.6:
        m, k, n = rng.randint(1, 12), rng.randint(1, 12), rng.randint(1, 12)
        nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
                 helper.make_node("Add", ["m", "b"], ["a"]),
                 helper.make_node(rng.choice(["Relu", "Sigmoid", "Tanh"]), ["a"], ["y"])]
        inits = [numpy_helper.from_array(g.standard_normal((k, n)).astype(np.float32), "w"),
                 numpy_helper.from_array(g.standard_normal(n).astype(np.float32), "b")]
        x_shape, y_shape = [m, k], [m, n]
    else:
        c, mo, s = rng.randint(1, 4), rng.randint(1, 4), rng.randint(3, 8)
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["c"], ["y"])]
        inits = [numpy_helper.from_array(
            g.standard_normal((mo, c, 3, 3)).astype(np.float32), "w")]
        x_shape, y_shape = [1, c, s, s], [1, mo, s, s]
    graph = helper.make_graph(nodes, "task", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, x_shape)], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, y_shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), x_shape


def _ort(model_bytes, x):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 4
    s = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})


def _close(a, b) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-3, atol=1e-4, equal_nan=True))


# ---- hand-edited Kernel IR ---------------------------------------------------------------------

# kind -> True when the edited IR must be refused (it reads or writes outside a buffer)
KIR_MUTATIONS = {"identity": False, "bound_beyond": True, "bound_negative": True,
                 "offset_beyond": True, "arg_shape": True, "matmul_sizes": True,
                 "index_const": None, "delete_line": None, "random_bytes": None,
                 "truncate": None, "swap_value": None, "nul_byte": None}


def _kir_mutate(text: str, kind: str, rng: random.Random) -> tuple[str, str]:
    if kind == "bound_beyond":
        pairs = list(re.finditer(r"\[(-?\d+) : i64, (\d+) : i64\]", text))
        if pairs:
            mt = rng.choice(pairs)
            hi = int(mt.group(2))
            new = rng.choice([hi + 1, hi * 2 + 1, hi + 1000, 2**40])
            return (text[:mt.start()] + f"[{mt.group(1)} : i64, {new} : i64]" + text[mt.end():],
                    f"a loop's upper bound {hi} -> {new}")
    if kind == "bound_negative":
        pairs = list(re.finditer(r"\[(-?\d+) : i64, (\d+) : i64\]", text))
        if pairs:
            mt = rng.choice(pairs)
            new = rng.choice([-1, -5, -(2**40)])
            return (text[:mt.start()] + f"[{new} : i64, {mt.group(2)} : i64]" + text[mt.end():],
                    f"a loop's lower bound -> {new}")
    if kind == "offset_beyond":
        offs = list(re.finditer(r"offset = (\d+) : i64", text))
        arena = re.search(r"arena_bytes = (\d+) : i64", text)
        if offs and arena:
            mt = rng.choice(offs)
            new = int(arena.group(1)) + rng.choice([4, 64, 4096, 2**40])
            return (text[:mt.start()] + f"offset = {new} : i64" + text[mt.end():],
                    f"an alloc's offset -> {new} (arena {arena.group(1)} bytes)")
    if kind == "arg_shape":
        mt = re.search(r"@main_graph\(%0: memref<(\d+)x", text)
        if mt and int(mt.group(1)) > 1:
            return (text[:mt.start(1)] + "1" + text[mt.end(1):],
                    f"input memref's first dim {mt.group(1)} -> 1")
    if kind == "matmul_sizes":
        mt = re.search(r"sizes = \[(\d+) : i64", text)
        if mt:
            new = int(mt.group(1)) + rng.choice([1, 7, 1000])
            return (text[:mt.start(1)] + str(new) + text[mt.end(1):],
                    f"krnl.matmul sizes[0] {mt.group(1)} -> {new}")
    if kind == "index_const":
        consts = list(re.finditer(r"arith.constant (\d+) : index", text))
        if consts:
            mt = rng.choice(consts)
            new = rng.choice([1, 7, -1, 2**40])
            return (text[:mt.start(1)] + str(new) + text[mt.end(1):],
                    f"an index constant {mt.group(1)} -> {new}")
    lines = text.splitlines(keepends=True)
    if kind == "delete_line" and len(lines) > 2:
        k = rng.randrange(1, len(lines) - 1)
        return "".join(lines[:k] + lines[k + 1:]), f"line {k + 1} deleted: {lines[k].strip()[:60]}"
    if kind == "random_bytes":
        b = bytearray(text.encode())
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(32, 127)
        return b.decode("utf-8", "replace"), "random bytes"
    if kind == "truncate":
        cut = rng.randrange(len(text))
        return text[:cut], f"cut at {cut} of {len(text)} chars"
    if kind == "swap_value":
        refs = list(re.finditer(r"%(\d+)\b", text))
        if refs:
            mt = rng.choice(refs)
            other = rng.choice(refs).group(1)
            return text[:mt.start(1)] + other + text[mt.end(1):], f"%{mt.group(1)} -> %{other}"
    if kind == "nul_byte":
        k = rng.randrange(len(text))
        return text[:k] + "\x00" + text[k:], f"a NUL byte at {k}"
    return text, "unchanged"


def task_kir(p: dict, say) -> dict:
    import compilerkit as ck

    rng = random.Random(p["seed"])
    model, x_shape = _small_model(rng)
    mb = model.SerializeToString()
    x = np.random.default_rng(p["seed"]).standard_normal(x_shape).astype(np.float32)
    say(phase="compile")
    kmod = ck.compile_to("kernel-ir", mb, opt_level=p["opt_level"])
    text = ck.print_ir(kmod, with_resources=True)
    kind = p["mutation"]
    edited, what = _kir_mutate(text, kind, rng)
    must_refuse = KIR_MUTATIONS[kind] and edited != text
    desc = f"{kind}: {what}"
    if p.get("via_opt"):
        return _kir_via_opt(edited, desc, must_refuse)
    try:
        say(phase="parse")
        k2 = ck.parse_ir(edited)
        say(phase="compile-kernel")
        cm = ck.compile_kernel(k2, opt_level=p["opt_level"], asm=False,
                               num_threads=p.get("num_threads"))
        say(phase="run")
        out = cm.run(x)
    except BaseException as e:  # noqa: BLE001 (classified; xDSL raises BaseExceptions)
        reraise_interrupt(e)
        cls = "refused" if _clean_error(e) and type(e).__module__.startswith("compilerkit") \
            else "unclear"
        return {"result": cls, "detail": f"{desc}: {type(e).__module__}.{type(e).__name__}: "
                                         f"{str(e)[:300]}"}
    if must_refuse:
        # The code wrote outside its buffers: this process's heap may be corrupt, so the
        # driver retires the worker rather than blame the next case for it.
        return {"result": "wrong", "tainted": True,
                "detail": f"{desc}: accepted and ran (the edited IR reaches outside a buffer)"}
    if kind == "identity":
        say(phase="onnxruntime")
        ref = _ort(mb, x)
        if not _close(out[0], ref[0]):
            return {"result": "wrong", "detail": f"{desc}: the unedited Kernel IR's answer "
                                                 f"differs from onnxruntime"}
        return {"result": "match", "detail": desc}
    return {"result": "accepted", "detail": desc}


def _kir_via_opt(text: str, desc: str, must_refuse: bool) -> dict:
    from compilerkit import opt

    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "in.mlir"
        src.write_text(text.replace("\x00", ""), encoding="utf-8")
        err = io.StringIO()
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            rc = opt.main(["-p", "plan-buffers", str(src), "-o", str(Path(d) / "out.mlir")])
    msg = err.getvalue().strip()
    if rc == 0:
        if must_refuse:
            return {"result": "wrong", "detail": f"{desc}: compilerkit.opt accepted it"}
        return {"result": "accepted", "detail": f"{desc} (compilerkit.opt)"}
    lines = [ln for ln in msg.splitlines() if ln.startswith("compilerkit-opt: error:")]
    if rc != 1 or not lines or "Traceback" in msg:
        return {"result": "unclear", "detail": f"{desc}: compilerkit.opt exit {rc}: {msg[-300:]}"}
    return {"result": "refused", "detail": f"{desc}: {lines[-1][:300]}"}


def kir_cases(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        kind = rng.choice(list(KIR_MUTATIONS))
        via_opt = rng.random() < 0.2
        out.append(_task("kir", f"kir {k}: {kind}" + (" (compilerkit.opt)" if via_opt else ""),
                         seed=rng.randrange(1 << 30), mutation=kind, via_opt=via_opt,
                         opt_level=rng.choice([0, 1, 2, 3]),
                         num_threads=rng.choice([1, 2])))
    return out


# ---- command line ------------------------------------------------------------------------------

CLI_MUTATIONS = ("o_is_input", "lib_header_exists", "o_existing", "o_missing_dir", "o_folder",
                 "model_missing", "model_empty", "model_text", "model_folder", "model_devnull",
                 "model_long_name", "bad_input_shape", "bad_opt", "bad_target", "bad_emit",
                 "loopnest_gpu", "api_nul_model", "api_nul_out", "api_out_is_input",
                 "valid_llvm", "valid_lib", "o_devfull")


def _snapshot(folder: Path) -> dict:
    out = {}
    for f in folder.iterdir():
        if f.is_file():
            out[f.name] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def task_cli(p: dict, say) -> dict:
    rng = random.Random(p["seed"])
    model, _ = _small_model(rng)
    kind = p["mutation"]
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "model.onnx").write_bytes(model.SerializeToString())
        (d / "model.h").write_text("/* the user's own header */\n")
        (d / "out.ll").write_text("; the user's own file\n")
        (d / "notes.txt").write_text("notes\n")
        (d / "empty.onnx").write_bytes(b"")
        (d / "sub").mkdir()
        named: set[str] = set()  # files the command may write
        expect_ok = False  # True: must succeed; None: either way, as long as nothing is lost
        argv = ["model.onnx"]
        if kind == "o_is_input":
            argv += ["--emit", rng.choice(["llvm-ir", "kernel-ir", "asm"]), "-o", "model.onnx"]
            expect_ok = None  # refused, or ... (the snapshot says whether the model was lost)
        elif kind == "lib_header_exists":
            argv += ["--emit", "lib", "-o", "model.so"]
            named, expect_ok = {"model.so"}, None
        elif kind == "o_existing":
            argv += ["--emit", "llvm-ir", "-o", "out.ll"]
            named, expect_ok = {"out.ll"}, True
        elif kind == "o_missing_dir":
            argv += ["--emit", "llvm-ir", "-o", "nodir/x.ll"]
        elif kind == "o_folder":
            argv += ["--emit", "llvm-ir", "-o", "sub"]
        elif kind == "o_devfull":
            argv += ["--emit", "llvm-ir", "-o", "/dev/full"]
        elif kind == "model_missing":
            argv = ["missing.onnx"]
        elif kind == "model_empty":
            argv = ["empty.onnx"]
        elif kind == "model_text":
            argv = ["notes.txt"]
        elif kind == "model_folder":
            argv = ["sub"]
        elif kind == "model_devnull":
            argv = ["/dev/null"]
        elif kind == "model_long_name":
            argv = ["m" * rng.choice([300, 5000]) + ".onnx"]
        elif kind == "bad_input_shape":
            argv += ["--input-shape", rng.choice(["x=", "=1", "x=a,b", "x=-1,2",
                                                   "x=99999999999999999999,1", "x=1,,2",
                                                   "nope=1,2", "x=0,0"])]
            expect_ok = None
        elif kind == "bad_opt":
            argv += ["-O", rng.choice(["9", "-1", "x", "1e3"])]
        elif kind == "bad_target":
            argv += ["--target", rng.choice(["bogus", "", "x86_64-unknown-linux", "gpu\n"])]
        elif kind == "bad_emit":
            argv += ["--emit", rng.choice(["bogus", "", "LIB"])]
        elif kind == "loopnest_gpu":
            argv += ["--codegen", "loopnest", "--target", "gpu", "--emit", "asm"]
        elif kind == "valid_llvm":
            argv += ["--emit", rng.choice(["llvm-ir", "kernel-ir", "onnx-ir"]), "-o", "new.ll"]
            named, expect_ok = {"new.ll"}, True
        elif kind == "valid_lib":
            argv += ["--emit", "lib", "-o", "lib/model.so"]
            (d / "lib").mkdir()
            expect_ok = True
        before = _snapshot(d)
        if kind.startswith("api_"):
            return _cli_api(kind, d, before)
        say(phase="cli")
        if p.get("subprocess"):
            try:
                r = subprocess.run([sys.executable, "-m", "compilerkit", *argv], cwd=d,
                                   capture_output=True, timeout=p.get("timeout", 90),
                                   env=dict(os.environ, PYTHONPATH=str(REPO)))
            except subprocess.TimeoutExpired:
                return {"result": "hang", "detail": f"cli {kind} {argv[1:]}: no exit in time"}
            rc, err = r.returncode, r.stderr.decode("utf-8", "replace")
        else:
            from compilerkit import __main__ as cli

            buf, out = io.StringIO(), io.StringIO()
            cwd = os.getcwd()
            os.chdir(d)
            try:
                with redirect_stderr(buf), redirect_stdout(out):
                    rc = cli.main(argv)
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else 1
            except BaseException as e:  # noqa: BLE001
                return {"result": "unclear", "detail": f"cli {kind}: main raised "
                                                       f"{type(e).__name__}: {str(e)[:200]}"}
            finally:
                os.chdir(cwd)
            err = buf.getvalue()
        after = _snapshot(d)
        desc = f"cli {kind} {' '.join(a[:40] for a in argv)}"
        if rc is not None and rc < 0:
            return {"result": "death", "detail": f"{desc}: died of "
                                                 f"{signal.Signals(-rc).name}: {err[-200:]}"}
        changed = sorted(f for f in before if f not in named and after.get(f) != before[f])
        if changed:
            return {"result": "overwrite", "detail": f"{desc}: exit {rc}, wrote over {changed}"}
        if rc == 0:
            if expect_ok is not False:
                return {"result": "match", "detail": f"{desc}: ok"}
            return {"result": "wrong", "detail": f"{desc}: exit 0 for a bad command line"}
        lines = [ln for ln in err.splitlines() if ln.startswith("compilerkit: error:")]
        if rc != 1 or not lines or "Traceback" in err:
            return {"result": "unclear", "detail": f"{desc}: exit {rc}, stderr {err[-300:]!r}"}
        if expect_ok is True:
            return {"result": "false_refusal", "detail": f"{desc}: {lines[-1][:300]}"}
        return {"result": "refused", "detail": f"{desc}: {lines[-1][:300]}"}


def _cli_api(kind, d: Path, before) -> dict:
    import compilerkit as ck

    try:
        if kind == "api_nul_model":
            ck.compile_to("llvm-ir", str(d / "mod\x00el.onnx"))
        elif kind == "api_nul_out":
            ck.compile_to("lib", str(d / "model.onnx"), out=str(d / "x\x00.so"))
        else:
            ck.compile_to("lib", str(d / "model.onnx"), out=str(d / "model.onnx"))
    except Exception as e:  # noqa: BLE001
        changed = [f for f in before if _snapshot(d).get(f) != before[f]]
        if changed:
            return {"result": "overwrite", "detail": f"{kind}: {type(e).__name__}, and wrote "
                                                     f"over {changed}"}
        ok = _clean_error(e, ("out=", "'out'", "-o ", "model.onnx", "path", "\\x00"))
        return {"result": "refused" if ok else "unclear",
                "detail": f"{kind}: {type(e).__module__}.{type(e).__name__}: {str(e)[:300]}"}
    changed = [f for f in before if _snapshot(d).get(f) != before[f]]
    return {"result": "overwrite" if changed else "wrong",
            "detail": f"{kind}: accepted" + (f", wrote over {changed}" if changed else "")}


def cli_cases(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        kind = rng.choice(CLI_MUTATIONS)
        sub = rng.random() < 0.15 and not kind.startswith("api_")
        out.append(_task("cli", f"cli {k}: {kind}" + (" (subprocess)" if sub else ""),
                         seed=rng.randrange(1 << 30), mutation=kind, subprocess=sub))
    return out


# ---- forked and resource-limited children ------------------------------------------------------

def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _child_ok(e: BaseException) -> bool:
    if isinstance(e, MemoryError) or _clean_error(e):
        return type(e).__module__.startswith("compilerkit") or isinstance(e, MemoryError) or \
            any(w in str(e).lower() for w in ("memory", "allocate", "thread", "resource"))
    return any(w in str(e).lower() for w in ("memory", "allocate", "can't start new thread",
                                             "resource temporarily"))


def task_fork(p: dict, say) -> dict:
    """The parent compiles and runs a model (warming the thread pool and the JIT), then forks;
    the child compiles and runs it again (under RLIMIT_AS for mode "rlimit"), and its answer
    must be the parent's, or its error a clean one."""
    import compilerkit as ck

    rng = random.Random(p["seed"])
    model, x_shape = _small_model(rng)
    mb = model.SerializeToString()
    x = np.random.default_rng(p["seed"]).standard_normal(x_shape).astype(np.float32)
    say(phase="compile")
    cm = ck.compile(mb, asm=False, codegen=p["codegen"], opt_level=3, num_threads=2)
    want = cm.run(x)[0]
    limit = None
    if p["mode"] == "rlimit":
        limit = _vm_bytes() + p["headroom_mb"] * (1 << 20)
    r, w = os.pipe()
    say(phase="fork")
    pid = os.fork()
    if pid == 0:  # the child: never return into the worker's loop
        os.close(r)
        try:
            if limit is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            res = {"ok": True}
            try:
                if p["reuse"]:
                    got = cm.run(x, num_threads=p["threads"])[0]
                else:
                    c2 = ck.compile(mb, asm=False, codegen=p["codegen"], opt_level=3,
                                    num_threads=p["threads"])
                    got = c2.run(x)[0]
                res["same"] = bool(_close(got, want))
            except BaseException as e:  # noqa: BLE001
                res = {"ok": False, "clean": _child_ok(e),
                       "error": f"{type(e).__module__}.{type(e).__name__}: {str(e)[:300]}"}
            os.write(w, json.dumps(res).encode())
        finally:
            os._exit(0)
    os.close(w)
    deadline = time.monotonic() + p.get("timeout", 60)
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.02)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(r)
        return {"result": "hang", "detail": "the forked child did not finish in time"}
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    if os.WIFSIGNALED(status):
        return {"result": "death", "detail": "the forked child died of "
                                             f"{signal.Signals(os.WTERMSIG(status)).name}"}
    try:
        res = json.loads(data)
    except ValueError:
        return {"result": "death", "detail": f"the forked child exited {status} with no answer"}
    if res["ok"]:
        return {"result": "match" if res["same"] else "wrong",
                "detail": "" if res["same"] else "the child's answer differs from the parent's"}
    return {"result": "refused" if res["clean"] else "unclear", "detail": res["error"]}


def fork_cases(n: int, seed: int, x86: bool) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        mode = rng.choice(["fork", "rlimit"])
        codegen = "loopnest" if x86 and rng.random() < 0.4 else "llvm"
        head = rng.choice([0, 4, 16, 64, 256])
        reuse = rng.random() < 0.3
        out.append(_task("fork", f"fork {k}: {mode}" + (f" +{head} MB" if mode == "rlimit"
                                                        else "") +
                         (" reuse" if reuse else " recompile") + f" [{codegen}]",
                         seed=rng.randrange(1 << 30), mode=mode, codegen=codegen,
                         headroom_mb=head, reuse=reuse, threads=rng.choice([1, 2, 3])))
    return out


# ---- segkit ------------------------------------------------------------------------------------

SEG_MUTATIONS = ("valid", "valid", "valid_mean", "valid_chunked", "nan", "inf", "neg_inf",
                 "above_one", "negative", "int_dtype",
                 "two_channels", "rank3", "empty", "low_nan", "low_gt_high", "high_nan",
                 "low_negative", "size_threshold_neg", "threshold_nan", "threshold_inf",
                 "mode_bad", "basins_shape", "chunks_zero", "chunks_negative", "chunks_rank")


def task_segkit(p: dict, say) -> dict:
    import segkit
    from segkit import reference

    rng = np.random.default_rng(p["seed"])
    z, y, x = (int(v) for v in rng.integers(2, 9, size=3))
    aff = rng.random((3, z, y, x)).astype(np.float32)
    kind = p["mutation"]
    call, kwargs, names = "watershed", {}, ("aff",)
    if kind == "nan":
        aff[tuple(rng.integers(0, s) for s in aff.shape)] = np.nan
    elif kind == "inf":
        aff[0, 0, 0, 0] = np.inf
    elif kind == "neg_inf":
        aff[1, -1, -1, -1] = -np.inf
    elif kind == "above_one":
        aff[2, 0, -1, 0] = 1.5
    elif kind == "negative":
        aff[0, -1, 0, -1] = -0.25
    elif kind == "int_dtype":
        aff = (aff * 10).astype(np.int32)
    elif kind == "two_channels":
        aff = aff[:2]
    elif kind == "rank3":
        aff = aff[0]
    elif kind == "empty":
        aff = aff[:, :0]
    elif kind == "low_nan":
        kwargs, names = {"low": float("nan")}, ("low",)
    elif kind == "low_gt_high":
        kwargs, names = {"low": 0.9, "high": 0.1}, ("low", "high")
    elif kind == "high_nan":
        kwargs, names = {"high": float("nan")}, ("high",)
    elif kind == "low_negative":
        kwargs, names = {"low": -0.5}, ("low",)
    elif kind == "size_threshold_neg":
        kwargs, names = {"size_threshold": -1}, ("size_threshold",)
    elif kind.startswith("threshold") or kind in ("mode_bad", "basins_shape", "valid_mean"):
        call = "agglomerate"
        kwargs = {"threshold": {"threshold_nan": float("nan"), "threshold_inf": float("inf")
                                }.get(kind, 0.5), "mode": "mean"}
        names = ("threshold",)
        if kind == "mode_bad":
            kwargs["mode"], names = "garbage", ("mode",)
        if kind == "basins_shape":
            kwargs["basins"], names = np.ones((z + 1, y, x), np.uint64), ("basins",)
    elif kind.startswith("chunks") or kind == "valid_chunked":
        call = "chunked"
        kwargs = {"chunks": {"chunks_zero": 0, "chunks_negative": (-2, 4, 4),
                             "chunks_rank": (4, 4)}.get(kind, int(rng.integers(2, 5))),
                  "threshold": 0.5}
        names = ("chunks",)
    valid = kind.startswith("valid")
    say(phase=call)
    try:
        if call == "watershed":
            got = segkit.watershed(aff, **kwargs)
        elif call == "agglomerate":
            got = segkit.agglomerate(aff, **kwargs)
        else:
            got = segkit.chunked_agglomerate(aff, **kwargs)[:]
    except Exception as e:  # noqa: BLE001
        desc = f"segkit {call} {kind} {aff.shape}: {type(e).__name__}: {str(e)[:300]}"
        if valid:
            return {"result": "false_refusal", "detail": desc}
        ok = isinstance(e, (ValueError, TypeError)) and any(n in str(e) for n in names)
        return {"result": "refused" if ok else "unclear", "detail": desc}
    if not valid:
        return {"result": "wrong", "detail": f"segkit {call} {kind} {kwargs}: accepted bad "
                                             f"input silently"}
    say(phase="waterz")
    if call == "watershed":
        ref = reference.waterz_basins(aff)
    elif call == "chunked":  # chunk by chunk: the whole-volume answer, voxel for voxel
        ref = segkit.agglomerate(aff, 0.5, mode="mean")
        if not np.array_equal(got, ref):
            return {"result": "wrong", "detail": f"segkit chunked {kwargs['chunks']} "
                                                 f"{aff.shape}: not the whole-volume answer"}
        ref = reference.waterz_mean(aff, [0.5])[0.5]
    else:
        ref = reference.waterz_mean(aff, [0.5])[0.5]
    same = reference.same_partition(got, ref)
    return {"result": "match" if same else "wrong",
            "detail": "" if same else f"segkit {call} {kind} {aff.shape}: not waterz's "
                                      f"partition"}


def segkit_cases(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [_task("segkit", f"segkit {k}: {m}", seed=rng.randrange(1 << 30), mutation=m)
            for k, m in enumerate(rng.choice(SEG_MUTATIONS) for _ in range(n))]


# ---- lmskit ------------------------------------------------------------------------------------

LMS_FIELDS = ("memory_bytes", "flops", "memory_bandwidth", "h2d_bandwidth", "d2h_bandwidth",
              "host_memory_bytes", "compute_efficiency", "bandwidth_efficiency",
              "launch_overhead_s", "reserve_bytes", "allocator_rounding", "copy_latency_s",
              "duplex_efficiency")
LMS_VALUES = (float("nan"), float("inf"), -1, 0, -0.0, "16GB", None, True, 1e400, 2**80)


def _lms_graph():
    from lmskit.graph import Graph, Op, Tensor

    rows = [("x", "Placeholder", [], "forward", ("B", 4)), ("a", "Relu", ["x"], "forward",
            ("B", 4)), ("b", "Tanh", ["a"], "forward", ("B", 8)),
            ("loss", "Sum", ["b"], "forward", ()),
            ("gradient_tape/gb", "Mul", ["b", "loss"], "backward", ("B", 8)),
            ("gradient_tape/ga", "Mul", ["gradient_tape/gb", "a"], "backward", ("B", 4))]
    ops, tensors = [], []
    for name, typ, inputs, phase, shape in rows:
        ops.append(Op(name, typ, inputs=[i + ":0" for i in inputs], control_inputs=[],
                      outputs=[name + ":0"], phase=phase))
        tensors.append(Tensor(name + ":0", name, "float32",
                              tuple(1 if d == "B" else 0 for d in shape),
                              tuple(0 if d == "B" else d for d in shape)))
    return Graph(ops, tensors)


def task_lmskit(p: dict, say) -> dict:
    import dataclasses

    import lmskit

    rng = random.Random(p["seed"])
    base = lmskit.get_device(rng.choice(["p100-16gb", "v100-16gb", "h100-80gb-pcie"]))
    field = p["field"]
    value = p["value"]
    valid = field is None
    batch = p["batch"]
    names = (field, "batch_size") if field else ("batch_size",)
    say(phase="device")
    try:
        dev = base if valid else dataclasses.replace(base, **{field: value})
        sim = lmskit.simulate(_lms_graph(), dev, batch_size=batch)
    except Exception as e:  # noqa: BLE001
        desc = f"lmskit {field}={value!r} batch={batch!r}: {type(e).__name__}: {str(e)[:300]}"
        bad_batch = not (isinstance(batch, int) and not isinstance(batch, bool) and batch >= 1)
        if valid and not bad_batch:
            return {"result": "false_refusal", "detail": desc}
        ok = isinstance(e, (ValueError, TypeError)) and any(str(n) in str(e) for n in names)
        return {"result": "refused" if ok else "unclear", "detail": desc}
    nums = [sim.step_time, sim.compute_time, sim.stall_time, sim.peak_device_bytes]
    finite = all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in nums)
    desc = f"lmskit {field}={value!r} batch={batch!r}: step {sim.step_time!r} peak " \
           f"{sim.peak_device_bytes!r}"
    if not finite:
        return {"result": "wrong", "detail": f"{desc}: a non-finite or negative result"}
    if valid:
        # The reference: the same step by hand. The chain's forward tensors a (4B floats) and
        # b (8B floats) are live together with gb (8B) in the backward pass: a peak of at least
        # (4 + 8 + 8) * 4 * B bytes.
        return {"result": "match" if sim.peak_device_bytes >= 80 * batch else "wrong",
                "detail": desc}
    # An accepted odd value is fine when the device stays sane (e.g. a huge but finite size;
    # a zero, or -0.0, where a field may be zero).
    may_be_zero = field in ("launch_overhead_s", "reserve_bytes", "copy_latency_s")
    sane = isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value) and (value > 0 or (may_be_zero and value == 0))
    return {"result": "accepted" if sane else "wrong",
            "detail": f"{desc}: accepted {field}={value!r}" if not sane else desc}


def lmskit_cases(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        field = rng.choice((None,) + LMS_FIELDS)
        value = rng.choice(LMS_VALUES) if field else None
        batch = rng.choice([1, 1, 2, 8, 0, -1, 1.5, "2"]) if rng.random() < 0.3 else 1
        out.append(_task("lmskit", f"lmskit {k}: {field}={value!r} batch={batch!r}",
                         seed=rng.randrange(1 << 30), field=field, value=value, batch=batch))
    return out


# ---- native memory over many compiles ----------------------------------------------------------

def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def task_memory(p: dict, say) -> dict:
    """Compile (and run) small models `compiles` times in this process; RSS after a warm-up
    against RSS at the end. A leak of native memory (JIT engines, loopnest code pages, arenas
    no Python object owns any more) shows as growth; freed memory does not."""
    import compilerkit as ck

    rng = random.Random(p["seed"])
    models = []
    for _ in range(8):
        model, x_shape = _small_model(rng)
        models.append((model.SerializeToString(), x_shape))
    x86 = os.uname().machine in ("x86_64", "amd64")
    n, warm = p["compiles"], p.get("warmup", max(10, p["compiles"] // 10))
    series = []
    say(phase="compile")
    base = None
    for k in range(n):
        mb, x_shape = models[k % len(models)]
        codegen = "loopnest" if x86 and k % 2 else "llvm"
        cm = ck.compile(mb, asm=False, codegen=codegen, opt_level=k % 4, num_threads=1 + k % 2)
        cm.run(np.ones(x_shape, np.float32))
        del cm
        if k + 1 == warm or (k + 1) % max(1, n // 20) == 0 or k + 1 == n:
            gc.collect()
            if k + 1 >= warm:
                series.append((k + 1, rss_bytes()))
                if base is None:
                    base = series[-1][1]
    growth = (series[-1][1] - base) / 2**20
    # The bound is per compile: the growth measured after the warm-up, scaled to all n.
    scaled = growth * n / max(1, n - warm)
    limit = p["limit_mb"]
    return {"result": "match" if scaled < limit else "leak",
            "detail": f"RSS grew {growth:.1f} MB over {n - warm} compiles after {warm} of "
                      f"warm-up: {scaled:.1f} MB per {n} compiles (limit {limit:.1f} MB)",
            "growth_mb": round(growth, 2), "growth_per_n_mb": round(scaled, 2),
            "compiles": n, "warmup": warm,
            "series_mb": [(k, round(b / 2**20, 1)) for k, b in series]}


# ---- dispatch ----------------------------------------------------------------------------------

TASKS = {"kir": task_kir, "cli": task_cli, "fork": task_fork, "segkit": task_segkit,
         "lmskit": task_lmskit, "memory": task_memory}


def _task(task: str, desc: str, **params) -> dict:
    return {"source": task, "desc": desc, "kind": "task", "task": task, "params": params,
            "model": b"", "input_shapes": None, "opt_level": 0, "seed": params.get("seed", 0)}


def run_task(case: dict, say) -> dict:
    try:
        return TASKS[case["task"]](case["params"], say)
    except BaseException as e:  # noqa: BLE001 (a fault of the task's set-up is itself a finding)
        reraise_interrupt(e)
        return {"result": "unclear", "detail": f"task {case['task']} failed outside its "
                                               f"check: {type(e).__name__}: {str(e)[:300]}"}
