"""Optimise one model's LLVM module on several cores: split it into partitions, each printed as
a module of its own, parsed into an LLVM context of its own and run through the -O pipeline on
a thread of its own; the JIT then loads all of them into one engine.

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

import ctypes
import os
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
    header = [f'; ModuleID = "{module.name}"', f'target triple = "{module.triple}"',
              f'target datalayout = "{module.data_layout}"', ""]
    types = [t.get_declaration() for t in module.get_identified_types().values()]
    texts = []
    for k in range(parts):
        # Functions first (their text says which globals they use), then the module's items
        # in its own order.
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
            elif "noinline" in gv.attributes and gv.linkage in ("internal", "private"):
                # A helper nobody inlines (the micro-kernel): optimised once, in partition 0.
                functions[gv.name] = _exported(gv) if k == 0 else _declaration(gv)
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
            else:
                lines.append(_global_text(gv, k))
        lines += module._get_metadata_lines()
        texts.append("\n".join(lines))
    return texts


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


def optimise_parts(texts: list[str], run_pipeline) -> Partitions:
    """Parse each text into a context of its own and optimise it (`run_pipeline(module,
    locked)`), one thread per text; returns their `Partitions`, which owns them. An exception
    in any thread is raised here, after every module and context made so far is released
    (the exception's traceback must not be what keeps them, in no order, alive)."""
    owner = NativeOwner()
    contexts = [owner.add(llvm.create_context()) for _ in texts]

    def work(k):
        mod = owner.add(llvm.parse_assembly(texts[k], context=contexts[k]))
        mod.verify()
        run_pipeline(mod, locked=len(texts) == 1)
        return mod

    try:
        modules = _on_threads(work, len(texts))
    except BaseException:
        owner.close()
        raise
    return Partitions(modules, contexts, owner)


class Partitions:
    """The optimised partitions of one JIT module and the LLVM contexts they were parsed into.

    Lifetime: the modules and contexts are released together, modules first, by `close()`
    or when the Partitions is dropped (lifetimes.NativeOwner), never context first, whatever
    order the garbage collector finds them in. The engine links object code made from them
    (`emit_objects`), not the modules themselves, so it does not need them afterwards."""

    def __init__(self, modules, contexts, owner: NativeOwner | None = None):
        self.modules, self.contexts = modules, contexts
        if owner is None:
            owner = NativeOwner(*contexts, *modules)
        self.owner = owner

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
