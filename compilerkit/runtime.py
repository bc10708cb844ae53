"""Running compiled code: check every argument BEFORE native code sees it (a wrong shape or
dtype must be a Python error, never a crash), pass C-contiguous buffers in native byte order,
return numpy arrays."""

from __future__ import annotations

import ctypes

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


class Session:
    """Holds the native entry point, its signature and a reusable arena."""

    def __init__(self, fn, arena_bytes, inputs, outputs, keep_alive=None):
        self.fn = fn
        self.arena_bytes = arena_bytes
        self.inputs = inputs  # [(name, shape, dtype)]
        self.outputs = outputs
        self.keep_alive = keep_alive
        # 64-byte aligned workspace, allocated once per compiled model.
        raw = np.zeros(arena_bytes + 64, dtype=np.uint8)
        start = (-raw.ctypes.data) % 64
        self._arena_raw = raw
        self.arena = raw[start:start + arena_bytes]

    def run(self, *arrays):
        ins = check_inputs(arrays, self.inputs)
        outs = [np.empty(shape, dtype=dtype) for _, shape, dtype in self.outputs]
        ptrs = [a.ctypes.data for a in ins] + [o.ctypes.data for o in outs] + [
            self.arena.ctypes.data if self.arena.size else 0]
        buf = (ctypes.c_void_p * len(ptrs))(*ptrs)
        self.fn(buf)
        return outs
