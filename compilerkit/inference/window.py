"""Patches, stitching, the memory model of one patch, and `SlidingWindow`: a model compiled at
one output patch and run patch by patch over a volume (the package docstring gives the
geometry and the memory model)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compilerkit.inference.net import Net, inspect


# ---- patches and stitching ---------------------------------------------------------------
def axis_starts(n: int, p: int) -> list[int]:
    """Output patch starts along an axis of `n` output voxels, patches of `p`: tiles, the
    last one moved back to end at `n` (so it overlaps the one before; nothing is padded)."""
    if p >= n:
        return [0]
    return list(range(0, n - p, p)) + [n - p]


def patch_grid(out_shape, patch_out) -> list[tuple]:
    """Every output patch start (z, y, x) over an output of `out_shape`."""
    import itertools

    return list(itertools.product(*(axis_starts(n, p)
                                     for n, p in zip(out_shape, patch_out, strict=True))))


def stitch(run, volumes, fov, patch_out, progress: bool = False, desc: str = "patches"):
    """Run `run(*input_patches) -> output patch` over `volumes` (arrays whose last three axes
    are z, y, x, all of one spatial shape) and stitch the results into one array: leading
    axes as `run` returns them, spatial shape volume - fov + 1. The output patch at s reads
    input [s, s + patch_out + fov - 1) on each axis (overlap fov - 1)."""
    from tqdm.auto import tqdm

    shape = volumes[0].shape[-3:]
    if any(v.shape[-3:] != shape for v in volumes):
        raise ValueError(f"volumes of shapes {[v.shape for v in volumes]}: their last three "
                         "axes must agree")
    out_shape = tuple(n - f + 1 for n, f in zip(shape, fov, strict=True))
    if min(out_shape) < 1:
        raise ValueError(f"volume {tuple(shape)} is smaller than the field of view "
                         f"{tuple(fov)} on an axis")
    patch_out = tuple(int(p) for p in patch_out)
    if len(patch_out) != 3 or min(patch_out) < 1:
        raise ValueError(f"patch_out must be three sizes >= 1 (z, y, x), got {patch_out!r}")
    if any(p > n for p, n in zip(patch_out, out_shape, strict=True)):
        raise ValueError(f"output patch {patch_out} is larger than the output {out_shape} "
                         f"(volume {tuple(shape)}, field of view {tuple(fov)})")
    out = None
    for z, y, x in tqdm(patch_grid(out_shape, patch_out), disable=not progress, desc=desc):
        window = (Ellipsis,) + tuple(slice(s, s + p + f - 1) for s, p, f in
                                     zip((z, y, x), patch_out, fov, strict=True))
        result = np.asarray(run(*[v[window] for v in volumes]))
        if result.shape[-3:] != patch_out:
            raise ValueError(f"the model returned a patch of {result.shape}, expected "
                             f"spatial {patch_out}")
        if out is None:
            out = np.empty(result.shape[:-3] + out_shape, result.dtype)
        out[..., z:z + patch_out[0], y:y + patch_out[1], x:x + patch_out[2]] = result
    return out


# ---- memory ------------------------------------------------------------------------------
_PLANNED: dict = {}  # (model hash, patch_in, algorithm) -> (arena, constant bytes)


def _planned_bytes(net: Net, patch_in: tuple, algorithm: str) -> tuple[int, int]:
    """(arena, constant bytes) of the model lowered to Kernel IR at `patch_in` (cached)."""
    from compilerkit.dialects import onnx as onnx_d
    from compilerkit.onnx_passes.single_node import main_func
    from compilerkit.pipeline import compile_to

    key = (net.key, patch_in, algorithm)
    if key in _PLANNED:
        return _PLANNED[key]
    k = compile_to("kernel-ir", net.proto,
                   input_shapes={net.input: [1, net.channels_in, *patch_in]},
                   conv_algorithm=algorithm)
    arena = main_func(k).attributes["arena_bytes"].value.data
    consts = 0
    for op in k.walk():
        if op.name == "krnl.global":
            t = op.results[0].type
            consts += math.prod(t.get_shape()) * onnx_d.numpy_dtype(t.element_type).itemsize
    _PLANNED[key] = (int(arena), int(consts))
    return _PLANNED[key]


@dataclass(frozen=True)
class PatchBytes:
    """The memory model of one patch (bytes)."""
    input: int
    output: int
    arena: int
    constants: int

    @property
    def total(self) -> int:
        return self.input + self.output + self.arena + self.constants


def patch_bytes(net: Net, patch_out, algorithm: str = "classic") -> PatchBytes:
    """Input + output patch (f32) + the compiled model's arena and constants at that patch
    (from the compiler's buffer plan: `_planned_bytes`)."""
    patch_out = tuple(int(p) for p in patch_out)
    patch_in = net.patch_in(patch_out)
    arena, consts = _planned_bytes(net, patch_in, algorithm)
    return PatchBytes(4 * net.channels_in * math.prod(patch_in),
                      4 * net.channels_out * math.prod(patch_out), arena, consts)


# ---- running -----------------------------------------------------------------------------
class SlidingWindow:
    """A model compiled at one output patch; call it on a volume to run it patch by patch."""

    def __init__(self, model, patch_out, conv_algorithm: str = "classic", num_threads=1,
                 net: Net | None = None, **compile_options):
        import compilerkit

        self.net = net or inspect(model)
        self.patch_out = tuple(int(p) for p in patch_out)
        if len(self.patch_out) != 3 or min(self.patch_out) < 1:
            raise ValueError(f"patch_out must be three sizes >= 1 (z, y, x), got {patch_out!r}")
        self.patch_in = self.net.patch_in(self.patch_out)
        self.conv_algorithm = conv_algorithm
        self.compiled = compilerkit.compile(
            self.net.proto, input_shapes={self.net.input: [1, self.net.channels_in,
                                                           *self.patch_in]},
            conv_algorithm=conv_algorithm, num_threads=num_threads, **compile_options)

    @property
    def fov(self) -> tuple:
        return self.net.fov

    def bytes(self) -> PatchBytes:
        """The memory model of this patch (patch_bytes)."""
        return patch_bytes(self.net, self.patch_out, self.conv_algorithm)

    def run_patch(self, x):
        """(C, *patch_in) -> (K, *patch_out)."""
        return self.compiled.run(np.ascontiguousarray(x, np.float32)[None])[0][0]

    def __call__(self, volume, progress: bool = True):
        """(C, Z, Y, X) volume, or (Z, Y, X) for a one-channel model -> (K, Z', Y', X')."""
        v = np.asarray(volume, np.float32)
        if v.ndim == 3 and self.net.channels_in == 1:
            v = v[None]
        if v.ndim != 4 or v.shape[0] != self.net.channels_in:
            raise ValueError(f"volume of shape {v.shape}: expected ({self.net.channels_in}, "
                             "Z, Y, X)")
        out_shape = tuple(n - f + 1 for n, f in zip(v.shape[1:], self.fov, strict=True))
        if min(out_shape) < 1:
            raise ValueError(f"volume {v.shape[1:]} is smaller than the field of view "
                             f"{self.fov} on an axis")
        return stitch(self.run_patch, [v], self.fov, self.patch_out, progress=progress)
