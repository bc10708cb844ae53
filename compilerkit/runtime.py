"""Running compiled code: check every argument BEFORE native code sees it (a wrong shape or
dtype must be a Python error, never a crash), pass C-contiguous buffers in native byte order,
return numpy arrays; raise `RunError` when the compiled code reports a failed run-time check.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np


class InputError(ValueError):
    """An argument to `run` does not match the compiled signature."""


def check_inputs(arrays, inputs):
    """Check `arrays` against the compiled signature [(name, shape, dtype)]; return them
    C-contiguous in native byte order. Every backend's session calls this first."""
    if len(arrays) != len(inputs):
        names = [n for n, _, _ in inputs]
        raise InputError(f"expected {len(inputs)} inputs {names}, got {len(arrays)}")
    out = []
    for a, (name, shape, dtype) in zip(arrays, inputs, strict=True):
        if not isinstance(a, np.ndarray):
            a = np.asarray(a)
        if a.dtype != dtype:
            raise InputError(f"input {name!r}: expected dtype {np.dtype(dtype).name}, got "
                             f"{a.dtype.name}")
        if tuple(a.shape) != tuple(shape):
            raise InputError(f"input {name!r}: expected shape {list(shape)}, got "
                             f"{list(a.shape)}")
        # Native byte order and C order: what the generated code indexes.
        out.append(np.ascontiguousarray(a.astype(a.dtype.newbyteorder("="), copy=False)))
    return out


class RunError(ValueError):
    """The compiled code met input data it cannot compute with (a Gather index out of range,
    integer division by zero or INT_MIN / -1): the message names the node. onnxruntime raises
    for the first two too; INT_MIN / -1 is undefined there (SIGFPE from one kernel, a wrapped
    INT_MIN from another), and compilerkit raises this error for it on every backend."""


def raise_for_status(status: int, message) -> None:
    """After a call: 0 is success; k > 0 means run-time check k failed, and `message(k)`
    (the compiled `main_graph_check_message`) says which."""
    if status:
        text = message(status) if message is not None else None
        raise RunError(text or f"run-time check {status} failed")


class Session:
    """Holds the native entry point, its signature and a pool of arenas.

    Thread-safe: each call takes an arena of its own from the pool (a new one when every
    arena is in use by another thread) and gives it back after the call, so one thread runs
    with no extra allocation after the first call, and N concurrent calls hold at most N
    arenas. The generated code keeps no other state between calls, apart from constants it
    fills once (under a lock here on the first call). ctypes releases the GIL during the
    call, so threads do run at once."""

    def __init__(self, fn, arena_bytes, inputs, outputs, keep_alive=None, message=None):
        self.fn = fn  # int64 main_graph(void **buffers): 0, or a failed check's number
        self.message = message  # status -> text (main_graph_check_message)
        self.arena_bytes = arena_bytes
        self.inputs = inputs  # [(name, shape, dtype)]
        self.outputs = outputs
        self.keep_alive = keep_alive
        self._free = [self._new_arena()]
        self._lock = threading.Lock()
        self._first = threading.Lock()  # the first call fills splat constants
        self._warm = False

    def _new_arena(self):
        # 64-byte aligned workspace; the array it views stays alive through `.base`.
        raw = np.zeros(self.arena_bytes + 64, dtype=np.uint8)
        start = (-raw.ctypes.data) % 64
        return raw[start:start + self.arena_bytes]

    def run(self, *arrays):
        ins = check_inputs(arrays, self.inputs)
        outs = [np.empty(shape, dtype=dtype) for _, shape, dtype in self.outputs]
        with self._lock:
            arena = self._free.pop() if self._free else None
        if arena is None:
            arena = self._new_arena()
        try:
            ptrs = [a.ctypes.data for a in ins] + [o.ctypes.data for o in outs] + [
                arena.ctypes.data if arena.size else 0]
            buf = (ctypes.c_void_p * len(ptrs))(*ptrs)
            if self._warm:
                status = self.fn(buf)
            else:
                with self._first:
                    status = self.fn(buf)
                    self._warm = True
        finally:
            with self._lock:
                self._free.append(arena)
        raise_for_status(int(status or 0), self.message)
        return outs
