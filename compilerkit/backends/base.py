"""The Target description and the Backend interface.

A Target says what codegen needs to know (triple, data layout, byte order, vector width); a
Backend turns LLVM IR into something runnable. `compile(target=...)` looks the name up here and
nothing else branches on it.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from dataclasses import dataclass

import llvmlite.binding as llvm

_LLVM_READY: set[str] = set()


class ProcessOption:
    """An LLVM command-line option (`-name=value`) held while any of compilerkit's LLVM stages
    that want it run: LLVM's options are process-wide (llvmlite has no per-module or
    per-pipeline switch), so it is set when the first such stage enters (from any thread),
    and `default`, LLVM's own value, restored when the last one leaves; other LLVM users in
    the process (numba) see LLVM's defaults outside them."""

    def __init__(self, name: str, value: str, default: str):
        self.name, self.value, self.default = name, value, default
        self._lock = threading.Lock()
        self._users = 0  # how many of our stages hold it now

    @contextlib.contextmanager
    def held(self):
        with self._lock:
            self._users += 1
            if self._users == 1:
                llvm.set_option("compilerkit", f"-{self.name}={self.value}")
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    llvm.set_option("compilerkit", f"-{self.name}={self.default}")


# Loop strength reduction off in code generation (without_lsr).
NO_LSR = ProcessOption("disable-lsr", "true", "false")
# Function specialisation off in the CPU backends' -O pipeline (run_default_pipeline).
NO_FUNCTION_SPECIALIZATION = ProcessOption("funcspec-max-iters", "0", "10")


def init_llvm(all_targets: bool = False) -> None:
    """Initialise LLVM's code generators once per process: the native one (host JIT), or all
    of them (cross-compiling for s390x, ppc64 and NVPTX)."""
    kind = "all" if all_targets else "native"
    if kind in _LLVM_READY:
        return
    if all_targets:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
    else:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
    _LLVM_READY.add(kind)


def reserve_address_space(nbytes: int, what: str) -> None:
    """A MemoryError naming `what` unless `nbytes` of address space can be mapped now.

    Why: the native engines the backends drive end the process, from C, when an allocation
    fails: Unicorn (QEMU, emulator.py) when it cannot map its translation buffer ("Could not
    allocate dynamic translator buffer", exit status 1), LLVM's C++ when its stages run short
    (host.py's LLVM_HEADROOM), under an address space limit (`ulimit -v`, a container's) or
    when the address space is used up; no Python error can be raised there. So the space is
    mapped (not touched: no memory is used) and unmapped here first. Another thread may take
    it in between: this narrows the window, it cannot close it. It lives here, not in
    emulator.py, so that the host backend does not import Unicorn for it."""
    import mmap

    try:
        mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS).close()
    except (OSError, OverflowError, ValueError) as error:
        raise MemoryError(f"{what} needs {nbytes / 2**20:.0f} MiB of address space and the "
                          f"process cannot map that much now ({error}): raise the address "
                          "space limit (ulimit -v) or free compiled models (close() them, or "
                          "drop them)") from None


def without_lsr():
    """Run LLVM code generation (object, assembly, MCJIT finalisation) for the CPU backends
    with loop strength reduction off (a context manager).

    Why: LSR took 40-60% of code generation on the real-weight models (asm stage of
    MobileNetV2 1.18 -> 0.49 s, EfficientNet-B0 2.15 -> 1.31 s, squeezenet 1.03 -> 0.53 s)
    and the code it gave ran no faster at 1 thread (same-run latencies within 3%). Our
    nests already walk their addresses with the induction variables LSR would build, and the
    micro-kernel is register-blocked by hand. `-disable-lsr` is a process-wide LLVM option
    (llvmlite has no per-machine switch), so it is set only while one of our code generations
    runs and cleared after, leaving other LLVM users in the process (numba) as they were
    (ProcessOption)."""
    return NO_LSR.held()


def run_default_pipeline(machine, opt_level: int, mod, vectorize: bool = True,
                         run=None) -> None:
    """LLVM's -O`opt_level` module pipeline for `machine` on `mod`, in place. `vectorize`:
    the CPU backends' tuning (loop and SLP vectorisation from -O2; LLVM's unroller off: short
    loops are unrolled in Kernel IR, krnl_passes/unroll_small.py; function specialisation
    off, below). `run(mpm, mod, pb)` replaces llvmlite's locked `mpm.run(mod, pb)`
    (split.unlocked).

    Function specialisation (IPSCCP's, from -O2: a copy of a function for call sites that
    pass it constants) made copies of the matmul micro-kernel, 2,000-2,800 instructions each,
    for the node functions that called it with constant sizes in the same module: six in
    DenseNet-121's module, a fifth of its -O3 time and more of its code generation (whole
    module: -O3 2.95 -> 2.28 s, machine code 1.25 -> 1.11 s), and which calls got a copy
    depended on how the module was split between threads (backends/split.py). The code ran
    no faster with them (DenseNet-121, ResNet-50, SqueezeNet, best of 40 calls, within 4%),
    and specialising only propagates constants, so the answers are the same bits. It is off
    while the CPU pipeline runs (`-funcspec-max-iters=0`, NO_FUNCTION_SPECIALIZATION).

    The pass manager is freed here, explicitly: llvmlite 0.50's ModulePassManager never frees
    itself (its bases are (ObjectRef, NewPassManager), so ObjectRef's empty `_dispose` hides
    the one that deletes it), and the built pipeline, about 50 KB, stayed behind after every
    compile. What still stays is the PassBuilder's instrumentation callbacks (about 1.5 KB:
    llvmlite allocates them with the builder and never deletes them); sharing one builder
    across compiles would not save them, since llvmlite registers a new set of callbacks on
    the builder at each run (3,200 runs on one builder took over 600 s, against 1.4 ms each
    with a builder per run)."""
    from llvmlite.binding.newpassmanagers import NewPassManager

    pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    if vectorize:
        pto.loop_vectorization = opt_level >= 2
        pto.slp_vectorization = opt_level >= 2
        # LLVM's unroller fully unrolled every short constant-trip nest of a model and
        # dominated -O3 compile time; the micro-kernel is register-blocked by hand.
        pto.loop_unrolling = False
    pb = llvm.create_pass_builder(machine, pto)
    mpm = pb.getModulePassManager()
    try:
        with NO_FUNCTION_SPECIALIZATION.held() if vectorize else contextlib.nullcontext():
            if run is None:
                mpm.run(mod, pb)
            else:
                run(mpm, mod, pb)
    finally:
        NewPassManager._dispose(mpm)
        mpm.detach()


@dataclass(frozen=True)
class Target:
    name: str
    triple: str
    data_layout: str
    byte_order: str  # "little" or "big"
    vector_width: int  # f32 lanes of the widest vector unit codegen should use
    cpu: str = ""
    features: str = ""

    def schedule_passes(self, opt_level: int) -> list:
        """The Kernel IR schedule for this target, as passes: on CPUs, -O3 tiles and permutes
        matrix products for `vector_width` lanes, -O2+ unrolls short inner loops and marks
        outer loops parallel (run on threads on the host, serially where the target has no
        threads). The GPU target overrides this with its grid mapping."""
        from compilerkit.krnl_passes.parallelize import ParallelizePass
        from compilerkit.krnl_passes.tile_matmul import TileMatmulPass
        from compilerkit.krnl_passes.unroll_small import UnrollSmallPass

        return ([TileMatmulPass(simd=self.vector_width)] if opt_level >= 3 else []) + (
            [UnrollSmallPass(), ParallelizePass()] if opt_level >= 2 else [])

    def completion_passes(self, kmodule) -> list:
        """The passes Kernel IR scheduled elsewhere (by hand, or for another target) still
        needs before this target's codegen: none on CPUs; the GPU's grid mapping."""
        return []


class Backend:
    """Compile an llvmlite module at an optimisation level and load it for running."""

    target: Target
    emitted = None  # the codegen Emitter of the latest emit_llvm
    code_stage = "asm"  # the name of the machine-code stage in `.stages` ("ptx" on the GPU)
    # Whether `session` can map weights kept out of the module at load time (the host's JIT;
    # `emit_llvm(..., external_weights=True)` leaves them in `self.external_weights`) and
    # `optimize_module` prints nothing: then a JIT compile prints its IR only on first look.
    jit_weights = False
    external_weights: dict = {}  # global name -> (uint8 array, alignment) of the latest emit

    @classmethod
    def for_target(cls, target: Target) -> Backend:
        """The backend for `target` (a Target this class made); the GPU keeps its sm."""
        return cls()

    def emit_llvm(self, kmodule, emitter=None, external_weights: bool = False,
                  optimize: int | None = None):
        """Kernel IR -> unoptimised LLVM IR text for this target (the GPU overrides it).
        `emitter`: an Emitter subclass to use instead of codegen's (pipeline.Options).
        The emitter that ran stays in `self.emitted` (`.functions`: which ONNX node each
        function came from, for provenance). `external_weights` (backends with `jit_weights`
        only): the weight byte strings become `external constant` declarations and their bytes
        go to `self.external_weights` for `session` to map, so they are never printed.
        `optimize` (with `external_weights`): the -O level the result will be optimised at;
        a backend that can (the host's, `stream`) then optimises parts of the module while
        the rest is emitted and returns what its `optimize_module` finishes instead of text."""
        from compilerkit.codegen.emit import Emitter

        self.emitted = (emitter or Emitter)(kmodule, self.target)
        stream = (self.stream(self.emitted, optimize)
                  if external_weights and optimize is not None else None)
        try:
            self.emitted.emit()
            self.external_weights = (take_weights(self.emitted.module) if external_weights
                                     else {})
            text = None
            if stream is not None:
                self.external_weights.update(stream.weights)
                text = stream.finish()
            if text is None:
                text = self.print_module(self.emitted, jit=external_weights)
        except BaseException:
            if stream is not None:
                stream.close()
            raise
        forget_weight_text(self.emitted.module)
        return text

    def stream(self, emitted, opt_level: int):
        """A sink the emitter tells of each finished node group (Emitter.on_group), which
        optimises them while the rest is emitted (split.PartitionStream), or None: this
        backend optimises the whole module after it is printed."""
        return None

    def print_module(self, emitted, jit: bool = False):
        """The emitted module as LLVM IR text (the host's JIT path overrides this to print
        partitions that optimise on several threads: backends/split.py)."""
        return str(emitted.module)

    def optimize_module(self, llvm_ir: str, opt_level: int):
        """LLVM IR text -> the llvmlite module optimised at -O`opt_level`, never printed (a
        backend defines this or `optimize`)."""
        if type(self).optimize is Backend.optimize:
            raise NotImplementedError
        return self.optimize(llvm_ir, opt_level)[1]

    def optimize(self, llvm_ir: str, opt_level: int):  # -> (optimised IR text, binding module)
        mod = self.optimize_module(llvm_ir, opt_level)
        return str(mod), mod

    def assembly(self, module) -> str:
        raise NotImplementedError

    def session(self, module, inputs, outputs):
        """Load the optimised module; return an object with `.run(*arrays) -> list` and
        `.arena_bytes`. `inputs`/`outputs` are [(name, shape, numpy dtype)]; the session checks
        arguments against them before any compiled code runs."""
        raise NotImplementedError


def _weight_globals(module):
    from compilerkit.codegen.emit import BytesConstant

    return [g for g in module.global_values
            if isinstance(getattr(g, "initializer", None), BytesConstant)]


# Byte strings from this size on stay out of a JIT module. The optimiser may fold a load at a
# constant offset from a constant it can see (a scalar, a shape, a short unrolled bias); in
# weights this large no load has a constant offset (Kernel IR unrolls at most 16 copies of a
# body and LLVM's unroller is off), so the optimised code is the same as with the bytes inside
# (tests/compilerkit/test_compile_time_paths.py compares the two).
JIT_WEIGHT_MIN_BYTES = 4096


def take_weights(module, min_bytes: int = JIT_WEIGHT_MIN_BYTES) -> dict:
    """Turn the weight globals of an llvmlite.ir module (BytesConstant initialisers) of at
    least `min_bytes` into `external constant` declarations of the same type and alignment;
    returns {name: (the uint8 array of their bytes, alignment)}."""
    out = {}
    for g in _weight_globals(module):
        if g.initializer.data.size < min_bytes:
            continue
        out[g.name] = (g.initializer.data, g.align or 1)
        g.initializer = None
        g.linkage = "external"
    return out


def forget_weight_text(module) -> None:
    # llvmlite caches each global's printed line: for a weight that is three characters per
    # byte, which would stay alive with `Backend.emitted` after the text is parsed.
    for g in _weight_globals(module):
        g._clear_string_cache()


# target name -> (module, class); imported on demand so a missing optional dependency (the
# CUDA bindings, say) only matters to the target that needs it.
BACKENDS = {
    "host": ("compilerkit.backends.host", "HostBackend"),
    "gpu": ("compilerkit.backends.gpu", "GpuBackend"),  # NVPTX + CUDA driver
    "s390x": ("compilerkit.backends.emulated", "S390xBackend"),  # big-endian, in Unicorn
    "ppc64": ("compilerkit.backends.emulated", "Ppc64Backend"),
}
ALIASES = {"native": "host", "cpu": "host"}


def check_target_name(name: str) -> str:
    """The backend key for a target name; a ValueError listing the known ones otherwise."""
    key = ALIASES.get(name, name) if isinstance(name, str) else None
    if key not in BACKENDS:
        raise ValueError(f"unknown target {name!r}; available: {sorted(BACKENDS)}")
    return key


def get_backend(name: str | Target) -> Backend:
    """A new backend for a target name ("host", "gpu", "s390x", "ppc64"; "native" and "cpu"
    mean "host") or for a Target a backend made (`backend.target`)."""
    target = name if isinstance(name, Target) else None
    module, cls = BACKENDS[check_target_name(target.name if target else name)]
    cls = getattr(importlib.import_module(module), cls)
    return cls() if target is None else cls.for_target(target)
