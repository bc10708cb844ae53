"""segkit: 3D electron-microscopy segmentation after the Seung-lab papers (seed 003).

Affinity graph -> watershed basins -> region graph -> agglomeration (size-dependent single
linkage, mean affinity), chunked on Dask with frozen boundaries, scored by adapted Rand error and
variation of information; boundary nets trained by a ZNN-style task-parallel engine (`segkit.znn`).

Like the other kits, importing segkit imports no plotting library and no TensorFlow.
"""
