"""Plain data for the pictures layer (mlsys_viz.volume): label slices, meshes, the
merge tree frame by frame, the chunk rounds frame by frame. Nothing here draws; nothing here
imports plotly.
"""

from __future__ import annotations

import numpy as np

from .linkage import agglomerate


def largest(seg, n: int = 5, exclude_zero: bool = True) -> list[int]:
    """Ids of the ``n`` largest segments (ties: smaller id first)."""
    ids, counts = np.unique(np.asarray(seg), return_counts=True)
    if exclude_zero:
        ids, counts = ids[ids != 0], counts[ids != 0]
    order = np.lexsort((ids, -counts))[:n]
    return [int(i) for i in ids[order]]


def meshes(seg, ids, voxel_size=(4.0, 1.0, 1.0)) -> list[tuple]:
    """Marching-cubes meshes (zmesh) of segments ``ids``: a list of (name, id, vertices (n, 3)
    as (x, y, z) in voxel_size units, faces (m, 3)). ``voxel_size`` is (z, y, x)."""
    import zmesh

    seg = np.ascontiguousarray(seg)
    mesher = zmesh.Mesher(tuple(float(v) for v in voxel_size))
    mesher.mesh(seg, close=True)
    present = set(int(i) for i in mesher.ids())
    out = []
    for i in ids:
        if int(i) not in present:
            raise ValueError(f"segment {i} is not in the segmentation")
        m = mesher.get(int(i), normals=False)
        out.append((f"segment {i}", int(i), m.vertices[:, ::-1].copy(), m.faces.astype(np.int64)))
    mesher.clear()
    return out


def _union_min(ids, pairs):
    """Group ``ids`` by the merge pairs; each group named by its smallest id."""
    index = {int(v): k for k, v in enumerate(ids)}
    parent = list(range(len(ids)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in pairs:
        ra, rb = find(index[int(a)]), find(index[int(b)])
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return np.array([ids[find(k)] for k in range(len(ids))], np.uint64)


def merge_frames(aff, thresholds, z: int, basins=None, progress: bool = True) -> dict:
    """The mean-affinity merge tree cut at each of ``thresholds`` (high to low), on slice
    ``z``: {'thresholds', 'frames' (2D label arrays), 'segments' (count in the volume at each
    threshold), 'heights' (affinity of every merge, in order)}.  ``progress``: a tqdm bar, one
    step for the agglomeration and one per threshold (a 256^3 volume takes most of a minute)."""
    from tqdm.auto import tqdm

    from .basins import watershed
    from .linkage import relabel

    thresholds = sorted((float(t) for t in thresholds), reverse=True)
    with tqdm(total=1 + len(thresholds), desc="merge tree", leave=False,
              disable=not progress) as bar:
        base = watershed(aff) if basins is None else np.asarray(basins, np.uint64)
        _, history = agglomerate(aff, min(thresholds), mode="mean", basins=base,
                                 return_merges=True)
        bar.update()
        ids = np.unique(base)
        ids = ids[ids != 0]
        frames, counts = [], []
        for t in thresholds:
            done = history["height"] > t
            names = _union_min(ids, zip(history["a"][done], history["b"][done], strict=True))
            frames.append(relabel(np.ascontiguousarray(base[z]), ids, names))
            counts.append(int(len(np.unique(names))))
            bar.update()
    return {"thresholds": thresholds, "frames": frames, "segments": counts,
            "heights": np.asarray(history["height"])}


def round_frames(info, frag_slice, z: int) -> dict:
    """What each chunked round froze, on slice ``z``: per round a 2D array with the current
    region id where that region was frozen or blocked in that round (0 elsewhere), the chunk
    outlines (y0, x0, y1, x1) of the round's tasks that cut the slice, and a caption.
    ``frag_slice``: the fragments of slice z (``zarr`` fragments array [z]) or basins."""
    from .linkage import relabel

    current = relabel(np.ascontiguousarray(frag_slice, np.uint64), *info["basin_map"])
    frames, boxes, captions = [], [], []
    for k, tasks in enumerate(info["rounds"]):
        held = np.unique(np.concatenate([np.zeros(0, np.uint64)]
                                        + [t["frozen"] for t in tasks]
                                        + [t["blocked"] for t in tasks]))
        frames.append(np.where(np.isin(current, held), current, 0).astype(np.uint64))
        boxes.append([(t["lo"][1], t["lo"][2], t["hi"][1], t["hi"][2]) for t in tasks
                      if t["lo"][0] <= z < t["hi"][0]])
        frozen = sum(len(t["frozen"]) for t in tasks)
        blocked = sum(len(t["blocked"]) for t in tasks)
        merges = sum(t["merges"] for t in tasks)
        size = tuple(h - lo for lo, h in zip(tasks[0]["lo"], tasks[0]["hi"], strict=True))
        captions.append(f"round {k}: {len(tasks)} task(s) of up to {size}; {merges} merges, "
                        f"{frozen} regions frozen at faces, {blocked} blocked behind them")
        for t in tasks:  # apply this round's merges before drawing the next
            current = relabel(current, *t["map"])
    return {"frames": frames, "boxes": boxes, "captions": captions,
            "names": [f"round {k}" for k in range(len(frames))]}


def slices(image, seg, z: int):
    """(image[z], seg[z]) as numpy arrays (zarr arrays are read)."""
    return np.asarray(image[z]), np.asarray(seg[z])
