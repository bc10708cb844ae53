"""FFTs computed once and reused by every edge that needs them.

ZNN keeps, per node, the spectrum of its image (used by all its outgoing edges in the forward
pass and again by their weight gradients in the backward pass) and of its gradient (used by all
its incoming edges), and per edge the spectrum of the filter (recomputed after each weight
update, used by forward and backward).  Here the image and gradient spectra are produced by
their own task in the graph, so each is computed exactly once per pass; filter spectra live
across passes and are keyed by the weights' version, so a forward-only pass after a gradient
pass with the same weights reuses them.

``stats`` counts computations and reuses so a test (and the notebook) can check the reuse.
"""

from __future__ import annotations

import threading
from collections import Counter

from . import kernels


class FFTCache:
    def __init__(self):
        self._spectra: dict = {}
        self._filters: dict = {}
        self._locks: dict = {}
        self._guard = threading.Lock()
        self.stats = Counter()

    # image / gradient spectra of one pass
    def put(self, key, value) -> None:
        self._spectra[key] = value
        self.stats["image_ffts"] += 1

    def get(self, key):
        try:
            value = self._spectra[key]
        except KeyError:
            raise KeyError(f"FFT cache: spectrum {key!r} was never computed") from None
        self.stats["image_reuses"] += 1
        return value

    def clear_pass(self) -> None:
        self._spectra.clear()

    # filter spectra, across passes
    def filter(self, key, version, w, m):
        """Spectrum of kernel ``w`` padded to ``m`` for edge ``key`` at weights ``version``."""
        stamp = (version, m)
        entry = self._filters.get(key)
        if entry is not None and entry[0] == stamp:
            self.stats["filter_reuses"] += 1
            return entry[1]
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # one edge's filter is computed by one thread; others wait for it
            entry = self._filters.get(key)
            if entry is None or entry[0] != stamp:
                # only the newest version of each edge's filter is kept
                entry = (stamp, kernels.filter_spectrum(w, m))
                self._filters[key] = entry
                self.stats["filter_ffts"] += 1
            else:
                self.stats["filter_reuses"] += 1
        return entry[1]
