"""segkit: 3D electron-microscopy segmentation after the Seung-lab papers (seed 003).

Affinity graph -> watershed basins -> region graph -> agglomeration (size-dependent single
linkage, mean affinity), chunked on Dask with frozen boundaries, scored by adapted Rand error and
variation of information; boundary nets trained by a ZNN-style task-parallel engine (`segkit.znn`).

Like the other kits, importing segkit imports no plotting library and no TensorFlow.
"""

# Public API, resolved on first use (PEP 562): `import segkit` stays cheap (no numba, dask or
# zarr until a function is called). Modules: basins (watershed), regions (region graph),
# linkage (size-dependent single linkage, mean agglomeration), chunked (the Dask driver; its
# grid, fragment and merge-round tasks in chunk_grid, chunk_basins, chunk_rounds), metrics,
# views (plain data for the pictures layer), boundary (VD2D / VD2D3D / N4 nets), pipeline
# (image to scored segmentation through compilerkit), znn (the task-parallel trainer),
# validate (the argument checks every entry point shares). The modules are not named after
# the functions `watershed`, `region_graph` and `agglomerate` so that the functions are what
# `segkit.watershed` means.
import importlib as _importlib

from mlsys_datasets.tf_startup import quiet_first_import as _quiet_first_import

# TensorFlow's C++ start-up lines stay out of notebooks (the boundary nets import Keras).
_quiet_first_import()

_LAZY = {
    "watershed": "basins", "region_graph": "regions",
    "agglomerate": "linkage", "square_size_fn": "linkage",
    "chunked_agglomerate": "chunked", "local_cluster": "chunked",
}
_MODULES = ("basins", "regions", "linkage", "chunked", "chunk_grid", "chunk_basins",
            "chunk_rounds", "metrics", "views", "reference", "boundary", "pipeline", "znn",
            "validate")

__all__ = [*_LAZY, *_MODULES]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(_importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    if name in _MODULES:
        return _importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
