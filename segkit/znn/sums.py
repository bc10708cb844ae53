"""Convergent sums, accumulated almost wait-free (ZNN's accumulator).

Many edges converge on one node; each contributes an array.  A global lock around the sum
would serialise the edges.  ZNN's trick: the lock guards only a pointer swap.  A contributor
takes the current partial sum out (leaving the slot empty), adds it to its own array outside the
lock, and tries again to deposit; whoever finds the slot empty puts its array there.  The
additions run in parallel, and the lock is held for a few instructions.  Every call deposits
exactly once, so the sum is complete when the number of deposits equals the number of
contributors; ``add`` returns True to the one contributor that completes it.

``take`` hands out the current partial sum for a contributor that wants to accumulate into it
in place (``mad`` into a spectrum, a direct convolution into a buffer): ZNN's add(f, w).
"""

from __future__ import annotations

import threading

import numpy as np


class Accumulator:
    """The sum of ``required`` arrays added from any threads."""

    def __init__(self, required: int, name: str = ""):
        if required < 1:
            raise ValueError(f"accumulator {name!r}: needs at least one contributor")
        self.name = name
        self.required = required
        self._count = 0
        self._sum = None
        self._lock = threading.Lock()

    def take(self):
        """The partial sum so far (or None), removed from the slot: add into it, then ``add``."""
        with self._lock:
            partial, self._sum = self._sum, None
        return partial

    def add(self, value: np.ndarray) -> bool:
        """Deposit ``value`` (owned by the accumulator from now on); True if the sum is done."""
        while True:
            with self._lock:
                if self._sum is None:
                    self._sum = value
                    self._count += 1
                    if self._count > self.required:
                        raise RuntimeError(f"accumulator {self.name!r}: more than "
                                           f"{self.required} contributions")
                    return self._count == self.required
                partial, self._sum = self._sum, None
            value += partial  # outside the lock: numpy releases the GIL for the addition

    def reset(self) -> None:
        """Empty, for the next pass of a task graph that is run again."""
        with self._lock:
            self._count = 0
            self._sum = None

    @property
    def done(self) -> bool:
        return self._count == self.required

    def result(self) -> np.ndarray:
        if not self.done:
            raise RuntimeError(f"accumulator {self.name!r}: {self._count} of {self.required} "
                               "contributions arrived")
        return self._sum
