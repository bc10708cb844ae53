"""Argument checks shared by every segkit entry point.

``segkit.watershed``, ``segkit.agglomerate``, ``segkit.chunked_agglomerate`` and
``segkit.pipeline`` take the same kinds of arguments (an affinity volume, affinity thresholds,
size rules, chunk shapes, worker counts; and ``segkit.boundary`` / ``segkit.znn`` images,
maps, patch shapes, training options); each is checked here, by one rule per argument name,
so that the whole-volume and the chunked paths refuse the same inputs with the same words.
A refused argument is a ``ValueError`` that names it.

Affinities are edge probabilities: finite and in [0, 1]. Values outside are refused rather
than clipped: the region graph sums affinities as exact integers in units of 2**-24 (see
``segkit.regions.QUANT``), which overflow int64 far above 1, and a volume with values outside
[0, 1] is more often a bug upstream (logits, unnormalised images) than a choice.
``np.clip(aff, 0, 1)`` is the caller's to make.
"""

from __future__ import annotations

import numbers

import numpy as np

MODES = ("size-dependent", "mean")


def affinities(aff, name: str = "aff", origin=None) -> np.ndarray:
    """``aff`` as a C-contiguous float32 (3, Z, Y, X) array of finite values in [0, 1], or a
    ValueError naming ``name`` and the first offending voxel (``origin``: the global position
    of ``aff``'s first voxel, when it is one chunk of a larger volume)."""
    arr = np.asarray(aff)
    if arr.ndim != 4 or arr.shape[0] != 3:
        raise ValueError(f"{name} must have shape (3, Z, Y, X) (z, y, x edge channels), "
                         f"got {arr.shape}")
    if min(arr.shape[1:]) < 1:
        raise ValueError(f"{name}: empty volume {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating):
        raise ValueError(f"{name} must be floating point affinities in [0, 1], got {arr.dtype}")
    return values(arr, name, 0, 1, origin=origin, first_axis="channel", what="affinities",
                  hint=f"affinities are edge probabilities: np.clip({name}, 0, 1) if that is "
                       "what you mean")


def values(x, name: str, low=None, high=None, *, origin=None, first_axis=None,
           what: str = "values", hint: str = "") -> np.ndarray:
    """``x`` as a C-contiguous float32 array whose values are finite (and within [low, high]
    where given), or a ValueError naming ``name`` and the first offending element: its index
    (offset by ``origin`` on the spatial axes, those after ``first_axis`` when that is named,
    e.g. an affinity chunk's channel)."""
    arr = np.asarray(x)
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
            or arr.dtype == bool):
        raise ValueError(f"{name} must be real numbers, got {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if arr.size == 0:
        return arr
    lo, hi = arr.min(), arr.max()  # NaN propagates into both
    if (np.isfinite(lo) and np.isfinite(hi) and (low is None or lo >= low)
            and (high is None or hi <= high)):
        return arr
    finite = np.isfinite(arr)
    bad = ~finite if not finite.all() else \
        (arr < (-np.inf if low is None else low)) | (arr > (np.inf if high is None else high))
    first = tuple(int(v) for v in np.argwhere(bad)[0])
    head, pos = (first[:1], first[1:]) if first_axis else ((), first)
    if origin is not None:
        pos = tuple(p + int(o) for p, o in zip(pos, origin, strict=True))
    where = (f"first at {first_axis} {head[0]}, voxel {pos}" if first_axis
             else f"first at {pos}") + f": {arr[first]}"
    if not finite.all():
        raise ValueError(f"{name} contains NaN or infinite {what} ({where})")
    raise ValueError(f"{name} has {what} outside [{low}, {high}] (min {float(lo)}, max "
                     f"{float(hi)}; {where})" + (f"; {hint}" if hint else ""))


def labels(x, name: str = "labels") -> np.ndarray:
    """``x`` as uint64 segment labels (0 = background), or a ValueError naming ``name``:
    integers >= 0, or floats holding such integers (a NaN or negative label would wrap to a
    huge id in the cast, in silence)."""
    arr = np.asarray(x)
    if arr.dtype == bool or np.issubdtype(arr.dtype, np.unsignedinteger):
        return arr.astype(np.uint64, copy=False)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"{name} must be integer labels >= 0, got {arr.dtype}")
    if arr.size:
        bad = arr < 0
        if np.issubdtype(arr.dtype, np.floating):
            bad = bad | ~np.isfinite(arr) | (np.floor(arr) != arr)
        if bad.any():
            first = tuple(int(v) for v in np.argwhere(bad)[0])
            raise ValueError(f"{name} must be integer labels >= 0; {name}{list(first)} is "
                             f"{arr[first]}")
    return arr.astype(np.uint64, copy=False)


def _real(name, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


def _unit(name, value):
    value = _real(name, value)
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be an affinity in [0, 1], got {value!r}")
    return value


def _nonnegative(name, value):
    value = _real(name, value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return value


def _count(name, value, least):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
    if value < least:
        raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
    return int(value)


def _chunks(name, value):
    """An int for all three axes, or three ints >= 1 (z, y, x)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        value = (value,) * 3
    return _three_ints(name, value, "an int or three ints >= 1 (z, y, x)")


def _positive(name, value):
    value = _real(name, value)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return value


def _fraction(name, value):
    value = _real(name, value)
    if not 0 <= value < 1:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return value


def _shape3(name, value):
    return _three_ints(name, value, "three ints >= 1 (z, y, x)")


def _three_ints(name, value, what):
    try:
        items = tuple(value)
    except TypeError:
        items = None
    if (items is None or len(items) != 3
            or any(isinstance(c, (bool, np.bool_)) or not isinstance(c, numbers.Integral)
                   or c < 1 for c in items)):
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return tuple(int(c) for c in items)


def _mode(name, value):
    if value not in MODES:
        raise ValueError(f"{name} must be 'size-dependent' or 'mean', got {value!r}")
    return value


def _callable(name, value):
    if value is not None and not callable(value):
        raise ValueError(f"{name} must be a function of an array of affinities, got {value!r}")
    return value


RULES = {
    "aff": affinities,
    "threshold": _unit,
    "low": _unit,
    "high": _unit,
    "size": _nonnegative,
    "dust": _nonnegative,
    "size_threshold": _nonnegative,
    "chunks": _chunks,
    "n_workers": lambda name, v: _count(name, v, 1),
    "threads": lambda name, v: _count(name, v, 1),
    "steps": lambda name, v: _count(name, v, 0),
    "batch": lambda name, v: _count(name, v, 1),
    "learning_rate": _positive,
    "momentum": _fraction,
    "out_shape": _shape3,
    "patch_out": _shape3,
    "mode": _mode,
    "size_fn": _callable,
}


def arguments(**named):
    """Check (and normalise) each keyword argument by the rule of its name (``RULES``);
    ``low`` and ``high`` given together must also satisfy low <= high. Returns the checked
    values in the order given: the value itself when one argument is given, else a tuple."""
    out = {}
    for name, value in named.items():
        rule = RULES[name]
        out[name] = rule(value, name) if rule is affinities else rule(name, value)
    if "low" in out and "high" in out and out["low"] > out["high"]:
        raise ValueError(f"need low <= high, got low={out['low']!r}, high={out['high']!r}")
    values = tuple(out.values())
    return values[0] if len(values) == 1 else values


def size_limits(size_fn, w, n_voxels: int) -> np.ndarray:
    """``size_fn(w)`` as int64 size limits (one per affinity of ``w``), or a ValueError naming
    size_fn. Limits above ``n_voxels`` all mean "merge whatever the size" (no segment has more
    voxels than the volume), so they are held to ``n_voxels + 1``: the same merges, and no
    overflow of the integer cast (1e30 once became a negative limit, and every segment dust)."""
    try:
        limits = np.asarray(size_fn(w))
    except Exception as error:
        raise ValueError(f"size_fn failed on an array of {len(w)} affinities: "
                         f"{type(error).__name__}: {error}") from error
    if limits.shape != np.shape(w) or not (np.issubdtype(limits.dtype, np.integer)
                                           or np.issubdtype(limits.dtype, np.floating)
                                           or limits.dtype == bool):
        raise ValueError(f"size_fn must map an array of affinities to sizes >= 0 of the same "
                         f"shape; got {limits.dtype} of shape {limits.shape} for {np.shape(w)}")
    limits = limits.astype(np.float64)
    if not np.isfinite(limits).all() or (limits < 0).any():
        bad = ~np.isfinite(limits) | (limits < 0)
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"size_fn must map an array of affinities to finite sizes >= 0; "
                         f"size_fn({float(np.asarray(w)[k])}) = {limits[k]}")
    return np.minimum(limits, n_voxels + 1).astype(np.int64)
