"""Owners of native objects: who frees an LLVM context, module, execution engine or emulator
instance, in which order, and when.

Why an owner and not each object's own `__del__`: llvmlite's wrappers free their LLVM object
in `__del__`, and an LLVM object must go before the one it lives in (a module before its
context; a module an engine took before nothing, the engine frees it). Reference counting
frees them in that order, but once they are part of a reference cycle (a traceback holding
a compiled model, as pytest and notebooks keep the last error; a closure in `.stages`)
the garbage collector calls the `__del__`s in no particular order: a context went first and
disposing its module then crashed the process.

A `NativeOwner` holds the objects and releases them once, in the reverse of the order they
were added (add the context, then the module parsed into it, then the engine that took it):
on `close()`, or when the owner is dropped. The release runs from `weakref.finalize`, whose
callbacks the collector calls before any `__del__` of a cycle it frees, and which holds the
objects itself: none of them can be freed before the owner releases them. The objects must
not refer back to the owner (it could then never be dropped).
"""

from __future__ import annotations

import threading
import weakref


def _release(objects: list, lock: threading.Lock) -> None:
    with lock:
        taken = objects[::-1]
        objects.clear()
    first_error = None
    for obj in taken:
        try:
            if hasattr(obj, "close"):
                obj.close()
            elif callable(obj):
                obj()
        except Exception as error:  # noqa: BLE001 - release the rest, raise the first after
            first_error = first_error or error
    if first_error is not None:
        raise first_error


class NativeOwner:
    """Native objects released together, last added first (the module docstring). Lifetime:
    until `close()` or until the owner is dropped, whichever comes first; `close()` may be
    called any number of times. `add` takes objects with a `close()` (llvmlite's, Unicorn
    owners) or zero-argument callables; anything else (numpy buffers the code reads) is only
    kept alive until the release."""

    def __init__(self, *objects):
        self._objects: list = []
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _release, self._objects, self._lock)
        # Not at interpreter exit: a daemon thread may still be running the code, and the
        # process's memory goes anyway (llvmlite's own __del__ skips shutdown too).
        self._finalizer.atexit = False
        for obj in objects:
            self.add(obj)

    def add(self, obj):
        """Own `obj` (released before everything added earlier); returns it."""
        with self._lock:
            if not self._finalizer.alive:
                raise RuntimeError("this native owner was closed: its objects are released")
            self._objects.append(obj)
        return obj

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        """Release every object now, last added first; nothing happens the second time."""
        self._finalizer()
