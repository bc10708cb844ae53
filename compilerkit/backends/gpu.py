"""The GPU backend (`target="gpu"`): Kernel IR -> NVPTX LLVM IR (codegen/gpu.py) -> PTX with
llvmlite's NVPTX target -> loaded and launched through the CUDA driver API (cuda_driver.py).

The PTX is produced on any machine: the compute capability is read from device 0 when there is
one, otherwise the PTX targets DEFAULT_SM so a laptop still gets something to read; `.run` then
raises `NoCudaDevice` ("no CUDA device found: ..."). On a device, the first `run` loads the
module and allocates the device buffers once per compiled model (inputs, outputs, the arena,
the constants, uploaded once); each run copies the inputs in, launches every kernel in program
order, and copies the outputs back. The launches never change between runs (same kernels, same
buffers, same outer indices), so the first run captures them into a CUDA graph and every run
replays it with one driver call instead of one per kernel; `session.use_graph = False` launches
kernel by kernel (the same kernels in the same order: the same answer).
"""

from __future__ import annotations

import threading

import llvmlite.binding as llvm
import numpy as np

from compilerkit.backends import cuda_driver
from compilerkit.backends.base import Backend, Target, init_llvm, run_default_pipeline
from compilerkit.codegen.gpu import STATUS, GpuEmitter, emit_gpu
from compilerkit.runtime import RunError, check_inputs

TRIPLE = "nvptx64-nvidia-cuda"
DEFAULT_SM = "sm_80"  # Ampere: what the PTX targets when no device says otherwise


def _ptx_features(sm: str) -> str:
    # PTX ISA 8.0 covers sm_50..sm_90 (CUDA 12.0 drivers); newer chips need newer ISAs.
    return "+ptx80" if int(sm[3:5]) <= 90 else "+ptx86"


class GpuTarget(Target):
    """The Target, plus the Kernel IR schedule `lower` runs for it instead of the host's."""

    def schedule_passes(self, opt_level: int) -> list:
        from compilerkit.krnl_passes.gpu_map import GpuMapPass
        from compilerkit.krnl_passes.unroll_small import UnrollSmallPass

        # Short loops left inside a thread are unrolled as on the host.
        return ([UnrollSmallPass()] if opt_level >= 2 else []) + [GpuMapPass()]

    def completion_passes(self, kmodule) -> list:
        from compilerkit.krnl_passes.gpu_map import GpuMapPass, kernels

        # Codegen runs what each nest's gpu_map says; a module scheduled for the host has none.
        return [] if all("gpu_map" in it.attributes for it in kernels(kmodule)) else [
            GpuMapPass()]


def device_sm() -> str | None:
    try:
        return cuda_driver.context().info.sm
    except cuda_driver.NoCudaDevice:
        return None


class GpuBackend(Backend):
    code_stage = "ptx"

    def __init__(self, sm: str | None = None):
        init_llvm(all_targets=True)
        self.sm = sm or device_sm() or DEFAULT_SM
        tm = self.machine(3)
        self.target = GpuTarget("gpu", TRIPLE, str(tm.target_data), "little", 1, self.sm,
                                _ptx_features(self.sm))
        self.emitted = None
        self._ptx = {}

    def machine(self, opt_level: int):
        return llvm.Target.from_triple(TRIPLE).create_target_machine(
            cpu=self.sm, features=_ptx_features(self.sm), opt=opt_level)

    @classmethod
    def for_target(cls, target: Target) -> GpuBackend:
        return cls(sm=target.cpu)

    def emit_llvm(self, kmodule, emitter=None) -> str:
        """Kernel IR -> NVPTX LLVM IR text: one `ptx_kernel` per nest; keeps the launch plan for
        `session`. `emitter`, if given, must be a GpuEmitter subclass."""
        if emitter is None:
            self.emitted = emit_gpu(kmodule, self.target)
        elif isinstance(emitter, type) and issubclass(emitter, GpuEmitter):
            self.emitted = emitter(kmodule, self.target)
            self.emitted.emit()
        else:
            raise ValueError(f"the gpu target emits kernels with a GpuEmitter; "
                             f"{getattr(emitter, '__name__', emitter)!r} is not one")
        return str(self.emitted.module)

    def optimize(self, llvm_ir: str, opt_level: int):
        mod = llvm.parse_assembly(llvm_ir)
        mod.verify()
        if opt_level > 0:
            run_default_pipeline(self.machine(opt_level), opt_level, mod, vectorize=False)
        return str(mod), mod

    def assembly(self, mod, opt_level: int = 3) -> str:
        key = (id(mod), opt_level)
        if key not in self._ptx:
            self._ptx[key] = (mod, self.machine(opt_level).emit_assembly(mod))
        return self._ptx[key][1]

    def session(self, mod, inputs, outputs):
        if self.emitted is None:
            raise ValueError("the GPU backend compiles Kernel IR through emit_llvm first")
        return GpuSession(self, mod, inputs, outputs)


class GpuSession:
    """Runs one compiled model on device 0; device state is created on the first run."""

    def __init__(self, backend: GpuBackend, mod, inputs, outputs):
        self.backend, self.mod = backend, mod
        self.inputs, self.outputs = inputs, outputs
        self.launches = backend.emitted.launches
        self.steps = backend.emitted.steps
        self.constants = backend.emitted.constants
        self.arena_bytes = backend.emitted.arena_bytes
        self.checks = list(backend.emitted.checks)
        self._device = None
        self.use_graph = True  # replay the launches from a CUDA graph (see the module doc)
        self.graph = None  # the cuda_driver.Graph, captured on the first run that uses one
        self.graph_error = None  # why capturing failed, if it did (then use_graph is False)
        # One set of device buffers per compiled model: runs from several threads take turns.
        self._lock = threading.Lock()

    def _load(self):
        if self._device is not None:
            return self._device
        ctx = cuda_driver.context()  # raises NoCudaDevice, with what is missing
        if ctx.info.sm != self.backend.sm:
            raise cuda_driver.CudaError(
                f"compiled for {self.backend.sm}, device 0 is {ctx.info.sm}: compile again")
        module = ctx.load_ptx(self.backend.assembly(self.mod, 3))
        kernels = [module.kernel(k.name) for k in self.launches]
        bufs = []
        try:
            for _, shape, dtype in self.inputs + self.outputs:
                bufs.append(ctx.alloc(int(np.prod(shape, dtype=np.int64)) *
                                      np.dtype(dtype).itemsize))
            arena = ctx.alloc(self.arena_bytes)
            consts = ctx.alloc(max(self.constants.nbytes, 1))
            consts.upload(self.constants.image()[:consts.nbytes])
        except Exception:
            for buf in bufs:
                buf.free()
            raise
        params = [("ptr", buf) for buf in bufs] + [("ptr", arena), ("ptr", consts)]
        self._device = (ctx, module, kernels, bufs, arena, consts, params)
        return self._device

    def run(self, *arrays):
        """Thread-safe: runs of one model share its device buffers, so they take a lock."""
        ins = check_inputs(arrays, self.inputs)
        with self._lock:
            return self._run(ins)

    def _run(self, ins):
        ctx, _, _, bufs, _, _, _ = self._load()
        ctx.make_current()
        for buf, a in zip(bufs, ins, strict=False):
            if a.nbytes:
                buf.upload(a)
        if self.use_graph and self.graph is None:
            try:
                self.graph = cuda_driver.Graph(ctx, self._launch_all)
            except (cuda_driver.CudaError, TypeError, ValueError) as error:
                # A driver that cannot capture still runs the kernels one by one (the same
                # answer); why it could not is kept for the benchmark and the curious.
                self.use_graph, self.graph_error = False, f"{type(error).__name__}: {error}"
        if self.use_graph:
            self.graph.launch()
        else:
            self._launch_all(0)
            ctx.synchronize()
        outs = [np.empty(shape, dtype=dtype) for _, shape, dtype in self.outputs]
        for buf, o in zip(bufs[len(ins):], outs, strict=True):
            if o.nbytes:
                buf.download(o)
        if self.checks:
            status = np.zeros(1, np.int64)
            buf = self._device[1].global_buffer(STATUS)
            buf.download(status)
            if status[0]:
                buf.upload(np.zeros(1, np.int64))
                raise RunError(self.checks[int(status[0]) - 1] if 0 < status[0] <= len(
                    self.checks) else f"run-time check {int(status[0])} failed")
        return outs

    def _launch_all(self, stream):
        """Every kernel of the model, in program order, on `stream`."""
        _, _, kernels, _, _, _, params = self._device
        for k, extra in self.steps:
            launch = self.launches[k]
            if min(launch.grid) > 0:
                kernels[k].launch(launch.grid, launch.block,
                                  params + [("i64", v) for v in extra], stream=stream)

    def __del__(self):
        graph = getattr(self, "graph", None)
        if graph is not None:
            try:
                graph.destroy()
            except Exception:  # the context may already be gone at interpreter exit
                pass
        device = getattr(self, "_device", None)
        if device is not None:
            for buf in device[3] + [device[4], device[5]]:
                try:
                    buf.free()
                except Exception:  # the context may already be gone at interpreter exit
                    pass


def ptx_kernel(ptx: str, name: str) -> str:
    """One `.entry` of a PTX listing, from its header to its closing brace."""
    import re

    m = re.search(rf"^\.visible \.entry {re.escape(name)}\(.*?^}}", ptx, flags=re.M | re.S)
    if m is None:
        raise KeyError(f"no kernel {name!r} in the PTX")
    return m.group(0)
