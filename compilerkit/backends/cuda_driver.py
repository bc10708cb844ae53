"""The part of the CUDA driver API that the GPU backend needs: find a device, load PTX, hold
device buffers, copy to and from them, and launch kernels (one by one, or replayed from a
captured CUDA graph).

It uses NVIDIA's `cuda-python` bindings (the project's `gpu` extra).  Nothing here is imported
at package import time and nothing fails on a machine without a GPU until a device is actually
asked for: then `NoCudaDevice` says what is missing (the bindings, the driver library, or a
device), so a notebook on a laptop can still compile and read PTX.

Assumes: one device (ordinal 0) and its primary context, which the driver shares with every
other library in the process (PyTorch, CuPy) instead of competing with a context of our own.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache

import numpy as np


class NoCudaDevice(RuntimeError):
    """No usable CUDA device: the message says which piece is missing."""


class CudaError(RuntimeError):
    """A CUDA driver call failed; the message names the call and the driver's error."""


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError as error:
        raise NoCudaDevice(
            "no CUDA device found: the CUDA driver bindings are not installed "
            "(pip install -e '.[gpu]')"
        ) from error
    return driver


def _check(driver, result, call: str):
    """Unpack a driver result tuple, raising CudaError with the driver's name for the error."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        raise CudaError(f"{call} failed: {name.decode() if name else err}: "
                        f"{text.decode() if text else ''}")
    return values[0] if len(values) == 1 else tuple(values)


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    compute_capability: tuple[int, int]
    total_memory: int
    multiprocessors: int

    @property
    def sm(self) -> str:
        """The PTX target name, e.g. "sm_90" for an H100."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"


@cache
def context() -> Context:
    """The process-wide context on device 0; raises NoCudaDevice where there is none."""
    return Context()


def cuda_available() -> bool:
    try:
        context()
    except NoCudaDevice:
        return False
    return True


class Context:
    def __init__(self):
        driver = self.driver = _driver()
        try:
            init = driver.cuInit(0)
        except Exception as error:  # the bindings raise if libcuda.so itself is missing
            raise NoCudaDevice(f"no CUDA device found: the NVIDIA driver library could not be "
                               f"loaded ({type(error).__name__}: {error})") from error
        if init[0] != driver.CUresult.CUDA_SUCCESS:
            _, name = driver.cuGetErrorName(init[0])
            raise NoCudaDevice(f"no CUDA device found: cuInit returned {name.decode()}")
        count = _check(driver, driver.cuDeviceGetCount(), "cuDeviceGetCount")
        if count == 0:
            raise NoCudaDevice("no CUDA device found: the driver reports 0 devices")
        self.device = _check(driver, driver.cuDeviceGet(0), "cuDeviceGet")
        self.handle = _check(driver, driver.cuDevicePrimaryCtxRetain(self.device),
                             "cuDevicePrimaryCtxRetain")
        self.make_current()
        self.info = self._info()

    def make_current(self) -> None:
        _check(self.driver, self.driver.cuCtxSetCurrent(self.handle), "cuCtxSetCurrent")

    def _attribute(self, name: str) -> int:
        attribute = getattr(self.driver.CUdevice_attribute, name)
        return _check(self.driver, self.driver.cuDeviceGetAttribute(attribute, self.device),
                      f"cuDeviceGetAttribute({name})")

    def _info(self) -> DeviceInfo:
        d = self.driver
        raw = _check(d, d.cuDeviceGetName(256, self.device), "cuDeviceGetName")
        return DeviceInfo(
            name=raw.split(b"\0", 1)[0].decode(),
            compute_capability=(
                self._attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
                self._attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
            ),
            total_memory=_check(d, d.cuDeviceTotalMem(self.device), "cuDeviceTotalMem"),
            multiprocessors=self._attribute("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
        )

    def load_ptx(self, ptx: str) -> Module:
        self.make_current()
        data = ptx.encode() + b"\0"
        handle = _check(self.driver, self.driver.cuModuleLoadData(data), "cuModuleLoadData")
        return Module(self, handle)

    def alloc(self, nbytes: int) -> DeviceBuffer:
        self.make_current()
        # cuMemAlloc refuses 0 bytes; a 1-byte buffer keeps empty tensors uniform.
        pointer = _check(self.driver, self.driver.cuMemAlloc(max(int(nbytes), 1)),
                         f"cuMemAlloc({nbytes})")
        return DeviceBuffer(self, pointer, int(nbytes))

    def synchronize(self) -> None:
        _check(self.driver, self.driver.cuCtxSynchronize(), "cuCtxSynchronize")


class DeviceBuffer:
    """Device memory of a fixed size; copies check sizes before the driver sees them."""

    def __init__(self, ctx: Context, pointer, nbytes: int):
        self.ctx, self.pointer, self.nbytes = ctx, pointer, nbytes

    @property
    def address(self) -> int:
        return int(self.pointer)

    def upload(self, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        if array.nbytes != self.nbytes:
            raise ValueError(f"upload of {array.nbytes} bytes into a {self.nbytes}-byte buffer")
        d = self.ctx.driver
        _check(d, d.cuMemcpyHtoD(self.pointer, array.ctypes.data, array.nbytes), "cuMemcpyHtoD")

    def download(self, out: np.ndarray) -> np.ndarray:
        if not out.flags.c_contiguous or out.nbytes != self.nbytes:
            raise ValueError(f"download of a {self.nbytes}-byte buffer into a "
                             f"{out.nbytes}-byte (contiguous={out.flags.c_contiguous}) array")
        d = self.ctx.driver
        _check(d, d.cuMemcpyDtoH(out.ctypes.data, self.pointer, self.nbytes), "cuMemcpyDtoH")
        return out

    def free(self) -> None:
        if self.pointer is not None:
            _check(self.ctx.driver, self.ctx.driver.cuMemFree(self.pointer), "cuMemFree")
            self.pointer = None


class Module:
    def __init__(self, ctx: Context, handle):
        self.ctx, self.handle = ctx, handle

    def kernel(self, name: str) -> Kernel:
        d = self.ctx.driver
        function = _check(d, d.cuModuleGetFunction(self.handle, name.encode()),
                          f"cuModuleGetFunction({name!r})")
        return Kernel(self.ctx, function, name)

    def global_buffer(self, name: str) -> DeviceBuffer:
        """A module-scope `__device__` variable as a buffer (owned by the module: never free
        it)."""
        d = self.ctx.driver
        pointer, nbytes = _check(d, d.cuModuleGetGlobal(self.handle, name.encode()),
                                 f"cuModuleGetGlobal({name!r})")
        return DeviceBuffer(self.ctx, pointer, int(nbytes))


# Kernel parameters as the PTX signature declares them: pointers are 64-bit addresses.
_CTYPES = {"ptr": ctypes.c_uint64, "i64": ctypes.c_int64, "i32": ctypes.c_int32,
           "f32": ctypes.c_float}


class Kernel:
    def __init__(self, ctx: Context, function, name: str):
        self.ctx, self.function, self.name = ctx, function, name

    def launch(self, grid, block, args, shared_bytes: int = 0, stream=0) -> None:
        """Launch on `stream` (0: the default stream). ``args``: (kind, value) pairs, kind one
        of ptr, i64, i32, f32; a DeviceBuffer value passes its address."""
        values = []
        for kind, value in args:
            if kind not in _CTYPES:
                raise ValueError(f"kernel {self.name}: unknown parameter kind {kind!r}")
            if isinstance(value, DeviceBuffer):
                value = value.address
            values.append(_CTYPES[kind](value))
        # kernelParams is a void** : an array of pointers to each parameter's storage.
        pointers = (ctypes.c_void_p * max(len(values), 1))(
            *[ctypes.addressof(v) for v in values])
        grid = tuple(grid) + (1,) * (3 - len(grid))
        block = tuple(block) + (1,) * (3 - len(block))
        d = self.ctx.driver
        _check(d, d.cuLaunchKernel(self.function, *grid, *block, shared_bytes, stream,
                                   ctypes.addressof(pointers), 0),
               f"cuLaunchKernel({self.name}, grid={grid}, block={block})")


class Graph:
    """The kernel launches `record(stream)` makes, captured once into a CUDA graph and then
    replayed by `launch` with one driver call: a model of hundreds or thousands of small
    kernels otherwise spends most of its time in the launch call of each. The launches'
    arguments are captured by value, so the buffers they name must stay where they are.

    The graph runs on a stream of its own that does not synchronise with the default stream
    (CU_STREAM_NON_BLOCKING: nothing on the default stream can disturb the capture), so
    `launch` first waits for the context's earlier work (an upload from pageable memory may
    return before its DMA has landed) and then for the replay itself: copies before and after
    need nothing more."""

    def __init__(self, ctx: Context, record):
        d = self.driver = ctx.driver
        self.ctx, self.graph, self.exec = ctx, None, None
        ctx.make_current()
        flags = int(d.CUstream_flags.CU_STREAM_NON_BLOCKING)
        self.stream = _check(d, d.cuStreamCreate(flags), "cuStreamCreate")
        try:
            mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
            _check(d, d.cuStreamBeginCapture(self.stream, mode), "cuStreamBeginCapture")
            try:
                record(self.stream)
            except BaseException:
                d.cuStreamEndCapture(self.stream)  # leave capture mode; the error is record's
                raise
            self.graph = _check(d, d.cuStreamEndCapture(self.stream), "cuStreamEndCapture")
            self.exec = _check(d, d.cuGraphInstantiate(self.graph, 0), "cuGraphInstantiate")
        except BaseException:
            self.destroy()
            raise

    def launch(self) -> None:
        """Replay every captured launch, in order, after the context's earlier work, and wait
        for them."""
        d = self.driver
        self.ctx.synchronize()
        _check(d, d.cuGraphLaunch(self.exec, self.stream), "cuGraphLaunch")
        _check(d, d.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    def destroy(self) -> None:
        d = self.driver
        if self.exec is not None:
            _check(d, d.cuGraphExecDestroy(self.exec), "cuGraphExecDestroy")
            self.exec = None
        if self.graph is not None:
            _check(d, d.cuGraphDestroy(self.graph), "cuGraphDestroy")
            self.graph = None
        if self.stream is not None:
            _check(d, d.cuStreamDestroy(self.stream), "cuStreamDestroy")
            self.stream = None
