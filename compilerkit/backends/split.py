"""Optimise one model's LLVM module on several cores: split it into partitions, each printed as
a module of its own, parsed into an LLVM context of its own, run through the -O pipeline and
turned into machine code by one of the compile's threads; the JIT then links all of them in
one engine. A compile streams them (PartitionStream): partitions are printed and compiled
while the code generator emits the rest of the module.

What is split: code generation makes one internal, noinline function per ONNX node (with its
parallel bodies; `Emitter.bodies`), called only from the entry function. A partition takes
whole node groups; partition 0 also takes the entry function and the other externally visible
functions. So:
- a node function called across partitions becomes an external (hidden) definition in its own
  partition and a declaration in partition 0; everything it calls stays beside it;
- internal helpers that hold no state (the matmul micro-kernel, math functions, fill loops)
  are copied into every partition, so each optimises and inlines them as before (the optimiser
  drops the copies a partition does not use); constant globals go to the partitions whose
  functions name them (`_referenced`);
- globals that are written (splat constants filled on the first call, their flag) are defined
  once, in partition 0, and declared elsewhere, so every partition sees the same bytes.

The arithmetic of every node function is the same IR as in one module; only inter-procedural
facts across partitions are lost (a node function in another partition keeps the attributes
codegen gave it, not those LLVM would infer from its one call site).

Why threads work: llvmlite serialises every LLVM call behind one lock; LLVM itself allows
concurrent work on different LLVMContexts. The pass pipeline, the one long call, runs outside
that lock (`unlocked`); parsing and setting up stay inside it.

Assumes: the module comes from codegen's Emitter with `bodies` filled (the host backend's JIT
path, weights kept out of the module); anything else stays one module.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import re
import threading

import llvmlite.binding as llvm
import llvmlite.ir as ir
from llvmlite.binding import ffi

from compilerkit.backends.lifetimes import NativeOwner

# A module with fewer node groups than this is one partition: splitting costs a context and a
# thread each, and copies of the shared helpers to optimise.
MIN_GROUPS = 8
MAX_PARTS = 4
# A streamed partition (PartitionStream) holds node groups of about this many instructions.
STREAM_INSTRUCTIONS = 2000
# Machine code of the helper partitions (the matmul kernels) made in this process, by
# (the stream's cache key, the partition's text): the kernels are the same text for every
# model on one machine, and each took 0.3-0.5 s of LLVM (most of a small model's compile), so a
# process compiles each once. Bounded (a few kernels per element type and vector width);
# the bytes are immutable, every engine links a copy of its own.
HELPER_OBJECTS: dict = {}
HELPER_OBJECTS_MAX = 32
_HELPER_LOCK = threading.Lock()


def compile_threads() -> int:
    """Threads for one compile: the cores (at most MAX_PARTS); CK_COMPILE_THREADS overrides."""
    env = os.environ.get("CK_COMPILE_THREADS")
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"CK_COMPILE_THREADS must be a whole number >= 1, got {env!r}")
        return int(env)
    return max(1, min(MAX_PARTS, os.cpu_count() or 1))


def _size(fn: ir.Function) -> int:
    return sum(len(block.instructions) for block in fn.blocks)


def assign(module: ir.Module, bodies: dict[str, list[str]], parts: int) -> dict[str, int]:
    """Function name -> partition for every function of a node group: groups go, largest first,
    to the partition with the least work so far (partition 0 starts with the entry function's
    and the helpers' instructions)."""
    fns = {f.name: f for f in module.functions}
    load = [0] * parts
    load[0] = sum(_size(f) for name, f in fns.items()
                  if not any(name in group for group in bodies.values()))
    groups = sorted(bodies.values(), key=lambda g: -sum(_size(fns[n]) for n in g if n in fns))
    owner = {}
    for group in groups:
        k = min(range(parts), key=lambda p: load[p])
        load[k] += sum(_size(fns[n]) for n in group if n in fns)
        for name in group:
            owner[name] = k
    return owner


def _declaration(fn: ir.Function) -> str:
    blocks, linkage = fn.blocks, fn.linkage
    fn.blocks, fn.linkage = [], ""
    try:
        return str(fn)
    finally:
        fn.blocks, fn.linkage = blocks, linkage


def _exported(fn: ir.Function) -> str:
    linkage = fn.linkage
    fn.linkage = ""  # external: the entry function in partition 0 calls it
    try:
        return str(fn)
    finally:
        fn.linkage = linkage


def _global_text(gv: ir.GlobalVariable, k: int) -> str:
    if gv.global_constant or gv.initializer is None:
        return str(gv)  # constants (copied) and declarations (weights mapped at load)
    if k == 0:
        linkage = gv.linkage
        gv.linkage = ""
        try:
            return str(gv)
        finally:
            gv.linkage = linkage
    align = f", align {gv.align}" if gv.align else ""
    return f"{gv.get_reference()} = external global {gv.value_type}{align}"


def partition_texts(module: ir.Module, bodies: dict[str, list[str]], parts: int) -> list[str]:
    """The module as `parts` LLVM IR texts (module docstring); one text when it is too small
    to split."""
    if parts <= 1 or len(bodies) < MIN_GROUPS:
        return [str(module)]
    owner = assign(module, bodies, parts)
    heads = set(bodies)  # node functions: the entry function calls them
    return [partition_text(module, owner, heads, k) for k in range(parts)]


def partition_text(module: ir.Module, owner: dict[str, int], heads: set, k: int,
                   nodes: set | None = None, helper_home: dict | None = None) -> str:
    """Partition `k` of `module` as LLVM IR text: the node-group functions `owner` puts in
    it (name -> partition; the groups' heads, `heads`, exported from partitions other than 0
    and declared in 0), every inlined helper, the entry points (partition 0), and the globals
    they use (module docstring). `nodes`: node functions of groups not in `owner` yet (a
    PartitionStream's later groups), left out; `helper_home`: helper nobody inlines -> the
    partition that defines it (default 0; the others declare it)."""
    header = [f'; ModuleID = "{module.name}"', f'target triple = "{module.triple}"',
              f'target datalayout = "{module.data_layout}"', ""]
    types = [t.get_declaration() for t in module.get_identified_types().values()]
    nodes = nodes or set()
    helper_home = helper_home or {}
    # Functions first (their text says which globals they use), then the module's items in
    # its own order.
    functions: dict[str, str] = {}
    for gv in module.globals.values():
        if isinstance(gv, ir.GlobalVariable):
            continue
        if gv.is_declaration:
            functions[gv.name] = str(gv)
        elif gv.name in owner:
            mine = owner[gv.name] == k
            if mine and gv.name in heads and k != 0:
                functions[gv.name] = _exported(gv)
            elif mine:
                functions[gv.name] = str(gv)
            elif k == 0 and gv.name in heads:
                functions[gv.name] = _declaration(gv)
        elif gv.name in nodes:
            continue  # a group not placed yet
        elif "noinline" in gv.attributes and gv.linkage in ("internal", "private"):
            # A helper nobody inlines (the micro-kernel): optimised once, in one partition.
            home = helper_home.get(gv.name, 0)
            functions[gv.name] = _exported(gv) if k == home else _declaration(gv)
        elif gv.linkage in ("internal", "private"):
            functions[gv.name] = str(gv)  # an inlined helper: a copy per partition
        elif k == 0:
            functions[gv.name] = str(gv)  # the entry points
    used = _referenced(functions.values())
    lines = header + types
    for gv in module.globals.values():
        if not isinstance(gv, ir.GlobalVariable):
            if gv.name in functions:
                lines.append(functions[gv.name])
        elif gv.global_constant and gv.initializer is not None and (
                gv.get_reference() not in used):
            # A constant no function of this partition reads (the small weights the
            # entry function addresses: 1.7 MB of text in each of DenseNet-121's
            # partitions): left out rather than printed, parsed and dropped again.
            continue
        elif k != 0 and gv.get_reference() not in used:
            # Nor a declaration it does not use (the weights): a kernel's partition is then
            # the same text in every model (HELPER_OBJECTS).
            continue
        else:
            lines.append(_global_text(gv, k))
    lines += module._get_metadata_lines()
    return "\n".join(lines)


# A global's reference in LLVM IR text: @"name" (llvmlite quotes every name) or @name.
_GLOBAL_REFERENCE = re.compile(r'@"(?:[^"\\]|\\.)*"|@[-\w.$]+')


def _referenced(texts) -> set[str]:
    """The global references (`@"name"`, as `GlobalValue.get_reference()` spells them) in
    `texts`; a constant referenced only from another constant's initialiser does not occur in
    our modules (codegen's constants hold bytes)."""
    used: set[str] = set()
    for text in texts:
        used.update(_GLOBAL_REFERENCE.findall(text))
    return used


def unlocked(name: str):
    """The raw ctypes function behind llvmlite's locked `ffi.lib.<name>`: ctypes releases the
    GIL during the call and nothing else is locked. Only for calls on objects no other thread
    touches (a module in a context of its own)."""
    getattr(ffi.lib, name)  # makes llvmlite set the argument and result types
    raw = getattr(ffi.lib, "_lib", None)
    return getattr(raw, name, None) or getattr(ffi.lib, name)


def _on_threads(work, n: int) -> list:
    """[work(0), ..., work(n - 1)], one thread each (inline when n == 1); the first exception
    of any of them is raised here, after all have ended."""
    results: list = [None] * n
    errors: list = []

    def run(k):
        try:
            results[k] = work(k)
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller
            errors.append(error)

    if n == 1:
        run(0)
    else:
        threads = [threading.Thread(target=run, args=(k,), name=f"ck-llvm-{k}")
                   for k in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return results


def object_code(machine, module) -> bytes:
    """`machine.emit_object(module)` outside llvmlite's lock (module and machine are this
    thread's alone)."""
    with ffi.OutputString() as error:
        buf = unlocked("LLVMPY_TargetMachineEmitToMemory")(machine, module, 1, error)
        if not buf:
            raise RuntimeError(f"LLVM code generation failed: {error}")
    start, size = ffi.lib.LLVMPY_GetBufferStart(buf), ffi.lib.LLVMPY_GetBufferSize(buf)
    try:
        return ctypes.string_at(start, size)
    finally:
        ffi.lib.LLVMPY_DisposeMemoryBuffer(buf)


def check_links(modules: list, mapped) -> None:
    """Every symbol a partition declares is defined, with external linkage, by another
    partition, is `mapped` (weights) or is in the process (libgomp, libm); otherwise a
    RuntimeError naming it, before the engine links (an unresolved symbol there is a crash)."""
    exported = {g.name for m in modules for g in list(m.functions) + list(m.global_variables)
                if not g.is_declaration and g.linkage == llvm.Linkage.external}
    for k, m in enumerate(modules):
        for g in list(m.functions) + list(m.global_variables):
            name = g.name
            if (not g.is_declaration or name.startswith("llvm.") or name in exported
                    or name in mapped or llvm.address_of_symbol(name)):
                continue
            raise RuntimeError(f"compilerkit: partition {k} of the module uses @{name}, which "
                               "no partition defines and the process does not have (a bug "
                               "in backends/split.py; CK_COMPILE_THREADS=1 compiles the "
                               "module whole)")


def emit_objects(modules: list, new_machine) -> list[bytes]:
    """Object code of each module, one thread each (`new_machine()` makes each thread's
    TargetMachine)."""
    return _on_threads(lambda k: object_code(new_machine(), modules[k]), len(modules))


def optimise_parts(texts: list[str], run_pipeline, threads: int | None = None,
                   finish=None) -> Partitions:
    """Parse each text into a context of its own and optimise it (`run_pipeline(module,
    locked)`), then, with `finish`, make its machine code at once (`finish(module) -> bytes`,
    kept in `Partitions.objects`), on `threads` threads (default: one per text), each taking
    the next text not yet taken, largest first; returns their `Partitions`, which owns them.

    A partition's whole work is one task: no thread waits between the -O pipeline and code
    generation for the others, and with more partitions than threads a thread that finishes
    early takes the next rather than waiting for the slowest. An exception in any thread is
    raised here, after every module and context made so far is released (the exception's
    traceback must not be what keeps them, in no order, alive); the other threads take no
    new text after it."""
    owner = NativeOwner()
    contexts = [owner.add(llvm.create_context()) for _ in texts]
    modules: list = [None] * len(texts)
    objects: list = [None] * len(texts)
    order = sorted(range(len(texts)), key=lambda k: -len(texts[k]))
    lock = threading.Lock()
    failed: list = []
    n = len(texts) if threads is None else max(1, min(threads, len(texts)))
    alone = len(texts) == 1  # one module: llvmlite's lock may be held throughout

    def work(_):
        while True:
            with lock:
                if failed or not order:
                    return
                k = order.pop(0)
            try:
                mod = owner.add(llvm.parse_assembly(texts[k], context=contexts[k]))
                modules[k] = mod
                mod.verify()
                run_pipeline(mod, locked=alone)
                if finish is not None:
                    objects[k] = finish(mod)
            except BaseException:
                with lock:
                    failed.append(k)
                raise

    try:
        _on_threads(work, n)
    except BaseException:
        owner.close()
        raise
    return Partitions(modules, contexts, owner, objects if finish is not None else None)


class PartitionStream:
    """Partitions optimised while the module is still being emitted: the code generator calls
    `group(head, members)` as it finishes each node group (codegen/emit.py, Emitter.on_group).
    A helper nobody inlines (the matmul micro-kernel, 5,500 instructions) becomes a partition
    of its own as soon as it exists, and every STREAM_INSTRUCTIONS instructions of finished
    groups another; each is handed to the compile's worker threads, which parse, optimise and
    make machine code of it (`compile_part(text, context, owner) -> (module, object)`) while
    Python emits the rest. `finish()`, after the emitter is done and the weights are taken,
    prints the groups since the last partition and then partition 0 (the entry function, the
    remaining helpers, the written globals) and returns this stream, or None when nothing was
    printed (a small model: the caller prints it whole, as before); `result()` waits for the
    threads and returns the `Partitions`. `close()` stops it after a failure (the threads end,
    what they made is released).

    The partitions follow partition_texts' rules: a group's functions stay together, every
    symbol has one home (check_links), weights are taken out of the module (base.take_weights,
    into `weights`) before a partition that may name them is printed, and the functions are
    final when printed (the emitter never changes a finished group). Why: Python emits at one
    core while LLVM waited for the whole module (DenseNet-121: 0.85 s of emission, then 1.7 s
    of LLVM on two cores); streamed, LLVM starts on the first partitions at once and uses the
    other cores meanwhile. Which groups share a partition depends only on the order and sizes
    of the groups, so a compile is as reproducible as before."""

    keep_texts = False  # keep each partition's text in `texts` (tests)

    def __init__(self, module: ir.Module, threads: int, compile_part, hold=(),
                 cache_key=None):
        """`hold`: context managers entered now and left when the threads are done (LLVM's
        process-wide options the partitions need, base.ProcessOption: set once for the whole
        stream, not by each thread while another runs LLVM). `cache_key`: what besides a
        partition's text decides its machine code (the optimisation level and the target
        machine); given, a helper partition's code is looked up in and kept in
        HELPER_OBJECTS, and a hit is only parsed (`compile_part(..., optimise=False)`)."""
        self.module = module
        self.compile_part = compile_part
        self.cache_key = cache_key
        self.helper_parts: set = set()  # partitions holding only helpers (HELPER_OBJECTS)
        self.threads = max(1, threads)
        self.held = contextlib.ExitStack()
        for cm in hold:
            self.held.enter_context(cm)
        self.owner: dict[str, int] = {}  # node-group function -> its partition
        self.heads: set = set()
        self.nodes: set = set()  # every node-group function so far
        self.helper_home: dict[str, int] = {}
        self.pending: list = []  # groups since the last partition: their functions
        self.pending_size = 0
        self.seen: set = set()  # names of the module's globals looked at (_new_helpers)
        self.parts = 1  # partition 0 is printed last
        self.weights: dict = {}
        self.texts: dict[int, str] = {}  # partition -> text, kept only when `keep_texts`
        self.native = NativeOwner()
        self.made: dict[int, tuple] = {}  # partition -> (module, its context, object bytes)
        self.errors: list = []
        self.tasks: queue.Queue = queue.Queue()
        self.workers: list = []

    # ---- fed by the emitter ----------------------------------------------------------------
    def group(self, head: str, members: list[str]) -> None:
        fns = self.module.globals
        self.heads.add(head)
        self.nodes.update(members)
        self.pending.extend(members)
        self.pending_size += sum(_size(fns[n]) for n in members if n in fns)
        helpers = self._new_helpers()
        if helpers:  # the micro-kernel, made by this group: a partition of its own, now
            self.helper_parts.add(self.parts)
            self._flush([], helpers)
        if self.pending_size >= STREAM_INSTRUCTIONS:
            self._flush(self.pending, [])
            self.pending, self.pending_size = [], 0

    def _new_helpers(self) -> list[str]:
        """Functions nobody inlines (internal, noinline) that are no node's, made since the
        last call: the module's newest globals, read from its end back to one seen before."""
        found = []
        for name in reversed(self.module.globals):
            if name in self.seen:
                break
            self.seen.add(name)
            fn = self.module.globals[name]
            if (isinstance(fn, ir.Function) and not fn.is_declaration and name not in self.nodes
                    and "noinline" in fn.attributes and fn.linkage in ("internal", "private")):
                found.append(name)
        return found

    def _flush(self, functions: list[str], helpers: list[str]) -> None:
        """A new partition of the node-group `functions` and the `helpers`, printed now."""
        from compilerkit.backends.base import take_weights

        k = self.parts
        self.parts += 1
        for name in functions:
            self.owner[name] = k
        for name in helpers:
            self.helper_home[name] = k
        self.weights.update(take_weights(self.module))
        self._submit(k, partition_text(self.module, self.owner, self.heads, k, self.nodes,
                                       self.helper_home))

    def finish(self) -> PartitionStream | None:
        """After the emitter is done and the weights taken: the last partitions printed and
        handed over (this stream returned), or None if none was printed (nothing started)."""
        if self.parts == 1:
            self._stop()  # nothing started: the options held are let go
            return None
        self._new_helpers()  # made after the last group (the splats' fill loop): in 0
        if self.pending:
            self._flush(self.pending, [])
            self.pending = []
        self._submit(0, partition_text(self.module, self.owner, self.heads, 0, self.nodes,
                                       self.helper_home))
        return self

    # ---- the worker threads ----------------------------------------------------------------
    def _submit(self, k: int, text: str) -> None:
        if self.keep_texts:
            self.texts[k] = text
        if self.errors:
            return
        self.tasks.put((k, text))
        if len(self.workers) < self.threads:
            t = threading.Thread(target=self._work, name=f"ck-llvm-{len(self.workers)}",
                                 daemon=True)
            self.workers.append(t)
            t.start()

    def _work(self) -> None:
        while True:
            task = self.tasks.get()
            if task is None or self.errors:
                return
            k, text = task
            context = self.native.add(llvm.create_context())
            key = (self.cache_key, text) if (
                self.cache_key is not None and k in self.helper_parts) else None
            try:
                with _HELPER_LOCK:
                    obj = HELPER_OBJECTS.get(key) if key is not None else None
                if obj is not None:  # made before in this process: parsed only
                    mod, _ = self.compile_part(text, context, self.native, optimise=False)
                else:
                    mod, obj = self.compile_part(text, context, self.native)
                    if key is not None:
                        with _HELPER_LOCK:
                            if len(HELPER_OBJECTS) < HELPER_OBJECTS_MAX:
                                HELPER_OBJECTS[key] = obj
                self.made[k] = (mod, context, obj)
            except BaseException as error:  # noqa: BLE001 - raised by result()
                self.errors.append(error)
                return

    def _stop(self) -> None:
        for _ in self.workers:
            self.tasks.put(None)
        for t in self.workers:
            t.join()
        self.workers = []
        self.held.close()

    def result(self) -> Partitions:
        """Every partition's module and machine code once the threads are done (their first
        error raised here, after all that was made is released)."""
        self._stop()
        if self.errors or len(self.made) != self.parts:
            self.native.close()
            if self.errors:
                raise self.errors[0]
            raise RuntimeError("compilerkit: a streamed partition was not compiled")
        order = sorted(self.made)
        return Partitions([self.made[k][0] for k in order], [self.made[k][1] for k in order],
                          self.native, [self.made[k][2] for k in order])

    def close(self) -> None:
        """Stop after a failure elsewhere: the threads end, their modules are released."""
        self.errors.append(RuntimeError("compilerkit: the stream was closed"))
        self._stop()
        self.native.close()


class Partitions:
    """The optimised partitions of one JIT module and the LLVM contexts they were parsed into.

    Lifetime: the modules and contexts are released together, modules first, by `close()`
    or when the Partitions is dropped (lifetimes.NativeOwner), never context first, whatever
    order the garbage collector finds them in. The engine links object code made from them
    (`emit_objects`), not the modules themselves, so it does not need them afterwards."""

    def __init__(self, modules, contexts, owner: NativeOwner | None = None,
                 objects: list[bytes] | None = None):
        self.modules, self.contexts = modules, contexts
        if owner is None:
            owner = NativeOwner(*contexts, *modules)
        self.owner = owner
        # the machine code of each module, when optimise_parts made it (else None: the JIT
        # makes it when it loads them, emit_objects)
        self.objects = objects

    def close(self) -> None:
        """Release the modules, then their contexts (idempotent)."""
        self.owner.close()

    @property
    def functions(self):
        return [f for m in self.modules for f in m.functions]

    @property
    def global_variables(self):
        return [g for m in self.modules for g in m.global_variables]

    def __str__(self):
        return "\n".join(str(m) for m in self.modules)
