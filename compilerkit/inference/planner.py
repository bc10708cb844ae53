"""The planner: the (Conv algorithm, output patch) with the most predicted output voxels per
second under a RAM cap, predicted from compilerkit.roofline and, with `measure=k`, decided by
measuring the k best predictions (the package docstring says how)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from compilerkit.inference.net import Conv, Net, inspect
from compilerkit.inference.window import PatchBytes, SlidingWindow, patch_bytes, patch_grid
from compilerkit.measure.timing import best_of

GRID = 14  # patch sides the planner weighs by default, geometric from 1 to max_patch
CALL_SECONDS = 1e-4  # per patch: the call, argument checks and allocation of the output
DEFAULT_ALGORITHMS = ("im2col", "fft")


# ---- the planner -------------------------------------------------------------------------
def _layer_algorithm(conv: Conv, algorithm: str) -> str:
    """What the roofline models for this Conv under `algorithm` (conv_algorithm.choose's
    fall-backs: FFT needs a kernel > 1, group 1, no dilation; Winograd 3x3x3; else im2col)."""
    if algorithm.startswith("fft") and max(conv.kernel) > 1 and conv.group == 1 \
            and not conv.dilated:
        return algorithm
    if algorithm.startswith("winograd") and conv.kernel == (3, 3, 3) and conv.group == 1 \
            and not conv.dilated:
        return algorithm
    return "im2col"


def predict_patch(net: Net, patch_out, algorithm: str, machine=None) -> dict:
    """Predicted seconds of one patch: per Conv `roofline.predict` at its own shape (the
    kernel taken as a cube of its largest side), per pooling or unfused pointwise op its
    bytes at the bandwidth of the level they fit in, the input and output copies, and
    CALL_SECONDS. Returns {"seconds", "layers": {name: seconds}}."""
    from compilerkit import roofline as rl

    m = machine or rl.machine()
    convs, pools = net.layers(patch_out)
    per = {}
    for cv in convs:
        a = _layer_algorithm(cv, algorithm)
        per[cv.name] = rl.predict(rl.Layer(cv.c, cv.k, cv.out, max(cv.kernel)), a, m)
    for name, n_in, n_out in pools:
        nbytes = 4 * (n_in + n_out)
        per[name] = nbytes / m.bandwidth[m.level_of(nbytes)]
    io = 4 * (net.channels_in * math.prod(net.patch_in(patch_out))
              + net.channels_out * math.prod(patch_out))
    per["copies"] = 2 * io / m.bandwidth[m.level_of(io)] + CALL_SECONDS
    return {"seconds": sum(per.values()), "layers": per}


def volume_throughput(out_shape, patch_out, seconds_per_patch: float) -> float:
    """Output voxels per second over a whole output of `out_shape` at `seconds_per_patch`."""
    return math.prod(out_shape) / (len(patch_grid(out_shape, patch_out)) * seconds_per_patch)


@dataclass
class Plan:
    """The planner's pick and every candidate it weighed."""
    algorithm: str
    patch_out: tuple
    patch_in: tuple
    bytes: PatchBytes
    predicted_seconds: float  # per patch
    predicted_voxels_per_s: float  # over the whole volume
    patches: int
    ram_bytes: int
    candidates: list = field(default_factory=list)  # dicts: algorithm, size, bytes, ...
    measured: bool = False  # picked among the top predictions by measurement (plan's measure)

    def sliding_window(self, model, **options) -> SlidingWindow:
        return SlidingWindow(model, self.patch_out, conv_algorithm=self.algorithm, **options)


def _cube(s: int, out_shape) -> tuple:
    return tuple(min(s, n) for n in out_shape)


def time_patch(net: Net, algorithm: str, patch_out, repeat: int = 2) -> float:
    """Measured seconds of one patch: compiled at `patch_out` (1 thread), best thread CPU
    time of `repeat` calls after a warm-up (time.thread_time: the code runs on the calling
    thread, so time the core was lent to other processes is left out)."""
    sw = SlidingWindow(net.proto, patch_out, conv_algorithm=algorithm, num_threads=1, net=net,
                       asm=False)
    x = np.random.default_rng(0).standard_normal((net.channels_in, *sw.patch_in))
    x = x.astype(np.float32)
    return best_of(lambda: sw.run_patch(x), repeat, "thread")


def plan(model, volume_shape, ram_bytes: int, algorithms=DEFAULT_ALGORITHMS,
         max_patch: int | None = None, sizes=None, machine=None, measure: int = 0,
         timer=None) -> Plan:
    """The (algorithm, output patch) with the most predicted output voxels per second over a
    volume of `volume_shape` (z, y, x) whose patch fits `ram_bytes` (the memory model).
    Patches are cubes of side s (clamped to the output on short axes): the sides in `sizes`
    (a list, or {algorithm: list}), else GRID sides spaced geometrically from 1 to
    `max_patch` (default: the output's largest side). Each side's memory is the compiler's
    plan (`patch_bytes`, not assumed monotone in the side: the Conv schedules change with the
    shape); its time is predicted
    (`predict_patch`). With `measure=k` the k candidates of most predicted throughput are
    then measured (`timer(algorithm, patch_out) -> seconds`, default `time_patch`: a compile
    and a few runs each) and the pick is the best measured of them; else predictions only."""
    from compilerkit import roofline as rl
    from compilerkit.lowering.conv_algorithm import check_algorithm

    net = model if isinstance(model, Net) else inspect(model)
    m = machine or rl.machine()
    volume_shape = tuple(int(s) for s in volume_shape)
    out_shape = tuple(n - f + 1 for n, f in zip(volume_shape, net.fov, strict=True))
    if len(volume_shape) != 3 or min(out_shape) < 1:
        raise ValueError(f"volume {volume_shape} is smaller than the field of view {net.fov} "
                         "on an axis (or not three sizes z, y, x)")
    if not algorithms:
        raise ValueError("algorithms: name at least one conv_algorithm")
    for a in algorithms:
        check_algorithm(a)
    top = min(max_patch or max(out_shape), max(out_shape))
    default = np.unique(np.geomspace(1, top, GRID).round().astype(int)).tolist()
    candidates, smallest = [], {}
    for a in algorithms:
        grid = (sizes.get(a, []) if isinstance(sizes, dict) else sizes) or default
        grid = sorted({int(s) for s in grid if 1 <= s <= top})
        smallest[a] = patch_bytes(net, (1, 1, 1), a).total
        for s in grid:
            p = _cube(s, out_shape)
            need = patch_bytes(net, p, a).total
            if need > ram_bytes:
                continue
            pred = predict_patch(net, p, a, m)
            candidates.append({"algorithm": a, "side": s, "patch_out": p, "bytes": need,
                               "predicted_seconds": pred["seconds"],
                               "predicted_patch_voxels_per_s": math.prod(p) / pred["seconds"],
                               "predicted_voxels_per_s": volume_throughput(out_shape, p,
                                                                           pred["seconds"]),
                               "patches": len(patch_grid(out_shape, p))})
    if not candidates:
        need = min(smallest.values())
        raise ValueError(f"ram_bytes {ram_bytes} is below the smallest valid patch (output "
                         f"1x1x1, input {net.patch_in((1, 1, 1))}), which needs {need} bytes "
                         f"({', '.join(f'{a}: {b}' for a, b in smallest.items())})")
    best = max(candidates, key=lambda r: r["predicted_voxels_per_s"])
    if measure:
        timer = timer or (lambda a, p: time_patch(net, a, p))
        top = sorted(candidates, key=lambda r: -r["predicted_voxels_per_s"])[:measure]
        for r in top:
            r["measured_seconds"] = float(timer(r["algorithm"], r["patch_out"]))
            r["measured_voxels_per_s"] = volume_throughput(out_shape, r["patch_out"],
                                                           r["measured_seconds"])
        best = max(top, key=lambda r: r["measured_voxels_per_s"])
    p = best["patch_out"]
    return Plan(best["algorithm"], p, net.patch_in(p), patch_bytes(net, p, best["algorithm"]),
                best["predicted_seconds"], best["predicted_voxels_per_s"], best["patches"],
                int(ram_bytes), candidates, bool(measure))
