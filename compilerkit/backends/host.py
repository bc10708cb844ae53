"""The host backend: llvmlite's native target, the new pass manager at -O0..-O3, MCJIT to run
in-process, and a standalone shared library (+ C header, + a ctypes loader) via the system C
compiler when one exists. A JIT compile of a model with many nodes is optimised and turned into
machine code in partitions, on one thread per core, the first ones while the code generator
still emits the rest (backends/split.py, PartitionStream), then linked by one engine;
CK_COMPILE_THREADS=1 keeps it one module."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

import llvmlite.binding as llvm
import numpy as np

from compilerkit.backends import threadpool
from compilerkit.backends.base import (
    NO_FUNCTION_SPECIALIZATION,
    Backend,
    Target,
    init_llvm,
    reserve_address_space,
    run_default_pipeline,
    without_lsr,
)
from compilerkit.backends.lifetimes import NativeOwner
from compilerkit.backends.split import (  # noqa: F401 (Partitions: the JIT path's module)
    Partitions,
    PartitionStream,
    check_links,
    compile_threads,
    emit_objects,
    optimise_parts,
    partition_texts,
    unlocked,
)
from compilerkit.backends.split import object_code as partition_object_code
from compilerkit.codegen.emit import ENTRY
from compilerkit.runtime import Session, load_libgomp, openmp_defaults

# Address space LLVM's stages need for a model, with room: its C++ ends the process when an
# allocation fails (std::bad_alloc through the C API: terminate; "LLVM ERROR: out of memory":
# abort) and llvmlite's IR printer turns the failure into a SystemError. A small model needs
# under 16 MiB; the space is asked for before each stage (_llvm_headroom).
LLVM_HEADROOM = 32 << 20


def _llvm_headroom(what: str) -> None:
    """A MemoryError naming `what` unless LLVM_HEADROOM of address space can be mapped now
    (under `ulimit -v`, a container's limit, or in a forked child with no room)."""
    reserve_address_space(LLVM_HEADROOM, what)


def host_target() -> Target:
    init_llvm()
    triple = llvm.get_process_triple()
    features = llvm.get_host_cpu_features()
    flat = features.flatten()
    width = 16 if features.get("avx512f") else 8 if features.get("avx") else 4
    cpu = llvm.get_host_cpu_name()
    if width == 16:
        # LLVM tunes its AVX-512 CPUs (Skylake-server on) to prefer 256-bit vectors in the
        # loops it vectorises itself (TuningPrefer256Bit: a 512-bit instruction can lower the
        # clock). The micro-kernels run 512-bit code anyway, so the clock is paid for; with
        # every loop 16 lanes wide, the same bits came 1.0-1.15x faster (1 thread, calls
        # interleaved in one process: EfficientNet-B0 1.15x, the encoder block 1.07x,
        # SqueezeNet 1.03x, ResNet-50 1.01x, MobileNetV2 0.99x).
        flat += ",-prefer-256-bit"
    tm = llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=flat)
    return Target("host", triple, str(tm.target_data), sys.byteorder, width, cpu, flat)


class HostBackend(Backend):
    jit_weights = True  # `session` maps weights kept out of the module (Backend.emit_llvm)

    def __init__(self):
        init_llvm()
        self.target = host_target()

    def machine(self, opt_level: int, reloc: str = "default"):
        t = self.target
        return llvm.Target.from_triple(t.triple).create_target_machine(
            cpu=t.cpu, features=t.features, opt=opt_level, reloc=reloc, codemodel="jitdefault")

    def emit_llvm(self, kmodule, emitter=None, external_weights: bool = False,
                  optimize: int | None = None):
        # llvmlite's IR builder, short of memory, raised SystemError('error return without
        # exception set') from CPython instead of a MemoryError
        _llvm_headroom("building the LLVM IR")
        return super().emit_llvm(kmodule, emitter, external_weights, optimize)

    def stream(self, emitted, opt_level: int):
        """A PartitionStream (backends/split.py) on compile_threads() threads, hooked to the
        emitter, when there is more than one; else None."""
        threads = compile_threads()
        if threads <= 1:
            return None
        _llvm_headroom("printing the LLVM IR")

        def compile_part(text, context, owner, optimise=True):
            mod = owner.add(llvm.parse_assembly(text, context=context))
            mod.verify()
            if not optimise:  # its machine code is cached (split.HELPER_OBJECTS)
                return mod, None
            self.run_pipeline(mod, opt_level, locked=False)
            with without_lsr():
                return mod, partition_object_code(self.machine(3), mod)

        t = self.target
        stream = PartitionStream(emitted.module, threads, compile_part,
                                 hold=(without_lsr(), NO_FUNCTION_SPECIALIZATION.held()),
                                 cache_key=(opt_level, t.triple, t.cpu, t.features))
        emitted.on_group = stream.group
        return stream

    def print_module(self, emitted, jit: bool = False):
        """A JIT module large enough to split: a list of partition texts for the cores
        (backends/split.py); otherwise one text."""
        _llvm_headroom("printing the LLVM IR")
        if not jit:
            return str(emitted.module)
        texts = partition_texts(emitted.module, getattr(emitted, "bodies", {}),
                                compile_threads())
        return texts[0] if len(texts) == 1 else texts

    def optimize_module(self, llvm_ir, opt_level: int):
        """LLVM IR text -> the optimised module; a list of partition texts (print_module) ->
        a `Partitions` of modules, optimised on compile_threads() threads, each partition's
        machine code made right after its -O pipeline (what `load` links: partitions are
        printed only for the JIT, which loads them)."""
        if isinstance(llvm_ir, str):
            mod = llvm.parse_assembly(llvm_ir)
            mod.verify()
            self.run_pipeline(mod, opt_level)
            return mod
        if isinstance(llvm_ir, PartitionStream):  # emit_llvm(..., optimize=) streamed it
            return llvm_ir.result()
        with without_lsr(), NO_FUNCTION_SPECIALIZATION.held():
            return optimise_parts(
                llvm_ir, lambda mod, locked: self.run_pipeline(mod, opt_level, locked),
                threads=compile_threads(),
                finish=lambda mod: partition_object_code(self.machine(3), mod))

    def run_pipeline(self, mod, opt_level: int, locked: bool = True) -> None:
        """LLVM's -O`opt_level` pipeline on `mod`, in place (outside llvmlite's lock unless
        `locked`: only for a module in a context no other thread uses)."""
        if opt_level <= 0:
            return
        _llvm_headroom(f"LLVM's -O{opt_level} pipeline")
        run_default_pipeline(self.machine(opt_level), opt_level, mod, run=None if locked
                             else unlocked("LLVMPY_RunNewModulePassManager"))

    def assembly(self, mod, opt_level: int = 3) -> str:
        with without_lsr():
            return self.machine(opt_level).emit_assembly(mod)

    def object_code(self, mod, opt_level: int = 3) -> bytes:
        missing = [g.name for g in mod.global_variables if g.is_declaration]
        if missing:  # a JIT module: its weights were mapped, an object would lack them
            raise ValueError(f"the module declares {len(missing)} weight(s) without their "
                             f"bytes (@{missing[0]}, ...): it was built for the JIT; emit "
                             "'obj' with compile_to('obj', ...) instead")
        with without_lsr():
            return self.machine(opt_level, reloc="pic").emit_object(mod)

    def load(self, mod, entry: str):
        """Machine code for `mod` (a module or `Partitions`) in a new MCJIT engine; returns
        (entry function, its arena size, engine, owner). The `NativeOwner` holds the engine
        and the weight arrays it reads: the code lives until `owner.close()` or until the
        owner is dropped (the Session keeps it), and nothing else frees it. One module goes
        into the engine, which frees it with itself (the owner releases it, an owned module's
        close() frees nothing); partitions become object code and stay the caller's."""
        mods = mod.modules if isinstance(mod, Partitions) else [mod]
        _llvm_headroom("LLVM's JIT")
        # Parallel loops run on compilerkit's pool (threadpool.py), which `GOMP_parallel`
        # maps to, or where it is not available on libgomp, linked from the process.
        pool = None
        if any(uses_threads(m) for m in mods):
            if threadpool.available():
                pool = threadpool.pool()
            else:
                load_libgomp()
        self.pool = pool
        owner = NativeOwner()
        try:
            if isinstance(mod, Partitions):
                # Machine code for each partition (made as it was optimised, or else now on
                # a thread each), linked by one engine (made from an empty module); weights
                # map by name, as for one module.
                check_links(mods, set(self.external_weights or {}) | (
                    {"GOMP_parallel"} if pool else set()))
                objects = mod.objects
                if objects is None:
                    with without_lsr():
                        objects = emit_objects(mods, lambda: self.machine(3))
                # Owned before the engine, released after it.
                objects = [owner.add(llvm.ObjectFileRef.from_data(o)) for o in objects]
                engine = owner.add(llvm.create_mcjit_compiler(llvm.parse_assembly(""),
                                                              self.machine(3)))
                for obj in objects:
                    engine.add_object_file(obj)
            else:
                engine = owner.add(llvm.create_mcjit_compiler(mod, self.machine(3)))
            done = {g.name for m in mods for g in m.global_variables if not g.is_declaration}
            for m in mods:
                for w in map_weights(engine, m, self.external_weights or {}, done):
                    owner.add(w)  # the code reads them: kept until the engine goes
            if pool is not None:
                gomp = next(f for m in mods for f in m.functions if f.name == "GOMP_parallel")
                engine.add_global_mapping(gomp, pool.address)
            with without_lsr():
                engine.finalize_object()
            fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p),
                                  ctypes.c_int64)(engine.get_function_address(entry))
            size = ctypes.CFUNCTYPE(ctypes.c_int64)(
                engine.get_function_address(entry + "_arena_bytes"))
            return fn, size(), engine, owner
        except BaseException:
            owner.close()  # now, not when a traceback holding it is collected
            raise

    def session(self, mod, inputs, outputs):
        """A runtime.Session over the loaded code; it owns the code (`Session.close()`)."""
        fn, arena, engine, owner = self.load(mod, ENTRY)
        message = _message_reader(ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_int64)(
            engine.get_function_address(ENTRY + "_check_message")))
        return Session(fn, arena, inputs, outputs, keep_alive=(engine, owner),
                       message=message, pool=self.pool, owner=owner)


def _message_reader(fn):
    def message(status: int) -> str | None:
        text = fn(status)
        return text.decode("utf-8", "replace") if text else None
    return message


def map_weights(engine, mod, weights: dict, done: set | None = None) -> list:
    """Point the JIT's `external constant` weight declarations of `mod` at their bytes
    (Backend.external_weights: name -> (uint8 array, alignment)), copied only where numpy's
    buffer is less aligned than the code assumes; returns the arrays to keep alive. A global
    with no bytes is a ValueError here (LLVM would abort the process on it). `done`: names
    to skip (defined by another partition, or mapped already: mapping a name twice aborts
    LLVM too); the names mapped here are added to it."""
    keep = []
    done = set() if done is None else done
    for gv in mod.global_variables:
        if not gv.is_declaration or gv.name in done:
            continue
        done.add(gv.name)
        if gv.name not in weights:
            raise ValueError(f"global @{gv.name} of the module has no definition and no "
                             "weights to map: emit it again with its weights inside")
        data, align = weights[gv.name]
        if data.ctypes.data % align:
            buf = np.empty(data.size + align, np.uint8)
            start = -buf.ctypes.data % align
            buf[start:start + data.size] = data
            data = buf[start:start + data.size]
        engine.add_global_mapping(gv, data.ctypes.data)
        keep.append(data)
    return keep


def uses_threads(mod) -> bool:
    """Whether an llvmlite module calls libgomp (has krnl.parallel loops)."""
    return any(f.name == "GOMP_parallel" for f in mod.functions)


def c_compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")


def write_shared_library(obj: bytes, path: str, threads: bool = False) -> str:
    """Link an object file into a shared library with the system C compiler (and libgomp
    when the code has parallel loops, `threads`)."""
    cc = c_compiler()
    if cc is None:
        raise RuntimeError("no C compiler found (set CC); emit 'obj' instead")
    with tempfile.TemporaryDirectory() as tmp:
        o = os.path.join(tmp, "model.o")
        with open(o, "wb") as f:
            f.write(obj)
        libs = ["-lgomp"] if threads else []
        subprocess.run([cc, "-shared", "-o", path, o, *libs], check=True, capture_output=True)
    return path


def c_header(inputs, outputs, entry: str = "main_graph") -> str:
    lines = ["/* Generated by compilerkit. */", "#include <stdint.h>", "",
             f"/* buffers: {len(inputs)} inputs, {len(outputs)} outputs (C-contiguous), then a",
             f"   workspace of {entry}_arena_bytes() bytes, 64-byte aligned:"]
    for k, (name, shape, dtype) in enumerate(inputs):
        lines.append(f"     [{k}] input  {name}: {dtype}{list(shape)}")
    for k, (name, shape, dtype) in enumerate(outputs):
        lines.append(f"     [{len(inputs) + k}] output {name}: {dtype}{list(shape)}")
    lines += [f"     [{len(inputs) + len(outputs)}] workspace */",
              "/* Returns 0, or the number of a run-time check that failed (a Gather index out",
              "   of range, integer division by zero or INT_MIN / -1; the outputs are then",
              f"   garbage): {entry}_check_message(status) names the node and the fault. Calls",
              "   with distinct workspaces may run at once from several threads; num_threads",
              "   (>= 1) is how many threads the parallel loops use, the answer is the same",
              "   for every count. */",
              f"int64_t {entry}(void **buffers, int64_t num_threads);",
              f"int64_t {entry}_arena_bytes(void);",
              f"const char *{entry}_check_message(int64_t status);", ""]
    return "\n".join(lines)


class SharedLibrary:
    """Python loader for a library written by `compilerkit --emit lib`."""

    def __init__(self, path: str, entry: str = "main_graph"):
        openmp_defaults()  # the library may pull in libgomp
        self.lib = ctypes.CDLL(os.path.abspath(path))
        self.fn = getattr(self.lib, entry)
        self.fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64]
        self.fn.restype = ctypes.c_int64  # 0, or the number of a failed run-time check
        size = getattr(self.lib, entry + "_arena_bytes")
        size.restype = ctypes.c_int64
        self.arena_bytes = size()
        message = getattr(self.lib, entry + "_check_message")
        message.argtypes, message.restype = [ctypes.c_int64], ctypes.c_char_p
        self.message = _message_reader(message)

    def session(self, inputs, outputs) -> Session:
        """A Session over this library (same checks, arena pool and RunError as a JIT
        session); `inputs`/`outputs` as in the C header: [(name, shape, numpy dtype)]."""
        return Session(self.fn, self.arena_bytes, inputs, outputs, keep_alive=self.lib,
                       message=self.message)
