"""waterz (funkey/waterz, C++) as the reference on the same affinities, without its chatter.

waterz prints progress from C++ straight to file descriptor 1; ``quiet()`` points that
descriptor at /dev/null for the duration. Thresholds here are ours (merge while the mean
affinity exceeds ``t``); waterz's own are ``1 - t`` (it merges while 1 - mean < its threshold).
"""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np


@contextlib.contextmanager
def quiet():
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def waterz_basins(aff, low: float = 0.0001, high: float = 0.9999) -> np.ndarray:
    """waterz's watershed basins (before any merging)."""
    import waterz

    with quiet():
        return next(iter(waterz.agglomerate(np.ascontiguousarray(aff, np.float32), [0.0],
                                            aff_threshold_low=low, aff_threshold_high=high)))


def waterz_mean(aff, thresholds, low: float = 0.0001, high: float = 0.9999) -> list:
    """waterz's mean-affinity agglomeration at each of our ``thresholds`` (high to low)."""
    import waterz

    ts = sorted((float(t) for t in thresholds), reverse=True)
    with quiet():
        segs = [s.copy() for s in waterz.agglomerate(np.ascontiguousarray(aff, np.float32),
                                                     [1 - t for t in ts],
                                                     aff_threshold_low=low,
                                                     aff_threshold_high=high)]
    return dict(zip(ts, segs, strict=True))


def same_partition(a, b) -> bool:
    """True when ``a`` and ``b`` are the same partition up to relabelling."""
    a = np.asarray(a).ravel().astype(np.uint64)
    b = np.asarray(b).ravel().astype(np.uint64)
    pairs = np.unique(np.stack([a, b]), axis=1).shape[1]
    return pairs == len(np.unique(a)) == len(np.unique(b))
