"""Executable memory for generated code: pages mapped writable, filled, then switched to
read+execute (never writable and executable at once), through libc's mmap/mprotect via ctypes.
The pages are unmapped when the `CodeMemory` is garbage-collected; every session holding a
function pointer into them keeps the object alive."""

from __future__ import annotations

import ctypes
import mmap

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
MAP_FAILED = ctypes.c_void_p(-1).value


class CodeMemory:
    """`size` bytes of fresh pages at `.address` (page-aligned)."""

    def __init__(self, size: int):
        self.size = max(mmap.PAGESIZE, -(-size // mmap.PAGESIZE) * mmap.PAGESIZE)
        addr = _libc.mmap(None, self.size, mmap.PROT_READ | mmap.PROT_WRITE,
                          mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        if addr in (None, MAP_FAILED):
            raise MemoryError(f"mmap of {self.size} bytes for generated code failed "
                              f"(errno {ctypes.get_errno()})")
        self.address = addr
        self.sealed = False

    def write(self, offset: int, data: bytes) -> None:
        if self.sealed:
            raise RuntimeError("the code memory is already executable (read-only)")
        if offset < 0 or offset + len(data) > self.size:
            raise ValueError(f"{len(data)} bytes at offset {offset} do not fit {self.size}")
        ctypes.memmove(self.address + offset, data, len(data))

    def seal(self) -> None:
        """Make the pages read+execute."""
        if _libc.mprotect(self.address, self.size, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
            raise OSError(ctypes.get_errno(), "mprotect of generated code failed")
        self.sealed = True

    def read(self) -> bytes:
        return ctypes.string_at(self.address, self.size)

    def __del__(self):
        if getattr(self, "address", None):
            _libc.munmap(self.address, self.size)
            self.address = None
