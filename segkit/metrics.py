"""Scores of a segmentation against ground truth.

* ``adapted_rand`` and ``variation_of_information``: scikit-image's implementations
  (``skimage.metrics.adapted_rand_error``, ``variation_of_information``), the field's standard
  (SNEMI3D's adapted Rand). Adapted Rand F = 1 - error: 1 is perfect; precision falls with
  merges, recall with splits. VI splits into a *split* part H(ours | truth) and a *merge* part
  H(truth | ours), in bits; 0 is perfect.
* ``split_merge``: per ground-truth object, how many segments cover it (splits), and per
  segment, how many objects it covers (merges), counting only overlaps of at least ``min_voxels``
  voxels so that a one-voxel sliver does not count as an error.
"""

from __future__ import annotations

import numpy as np

from .validate import labels


def _pair(truth, seg):
    truth, seg = labels(truth, "truth"), labels(seg, "seg")
    if truth.shape != seg.shape:
        raise ValueError(f"truth shape {truth.shape} != segmentation shape {seg.shape}")
    return truth, seg


def adapted_rand(truth, seg) -> dict:
    """{'f': adapted Rand F, 'error': 1 - F, 'precision', 'recall'} (voxels with truth 0 are
    ignored, as in SNEMI3D)."""
    from skimage.metrics import adapted_rand_error

    truth, seg = _pair(truth, seg)
    # skimage's second and third values fall with splits and merges respectively (checked on
    # hand cases in tests/segkit/test_metrics.py); we name them as SNEMI3D does: precision
    # (are our segments pure?) falls with merges, recall (is each object whole?) with splits.
    error, recall, precision = adapted_rand_error(truth, seg)
    return {"f": float(1 - error), "error": float(error), "precision": float(precision),
            "recall": float(recall)}


def variation_of_information(truth, seg) -> dict:
    """{'split': H(seg | truth), 'merge': H(truth | seg), 'total': their sum}, in bits."""
    from skimage.metrics import variation_of_information as voi

    truth, seg = _pair(truth, seg)
    # skimage returns (H(image1 | image0), H(image0 | image1)) in bits: checked on a truth of one
    # object split in two halves, which gives (1, 0)
    split, merge = voi(truth, seg)
    return {"split": float(split), "merge": float(merge), "total": float(split + merge)}


def split_merge(truth, seg, min_voxels: int = 10) -> dict:
    """Per object splits and per segment merges (overlaps >= ``min_voxels``, label 0 of either
    side ignored): {'splits': {truth id: segments}, 'merges': {segment id: objects},
    'split_objects', 'merged_segments' (how many have more than one)}."""
    truth, seg = _pair(truth, seg)
    keep = (truth != 0) & (seg != 0)
    pairs, counts = np.unique(np.stack([truth[keep], seg[keep]]), axis=1, return_counts=True)
    pairs = pairs[:, counts >= min_voxels]
    t_ids, t_n = np.unique(pairs[0], return_counts=True)
    s_ids, s_n = np.unique(pairs[1], return_counts=True)
    return {"splits": dict(zip(t_ids.tolist(), t_n.tolist(), strict=True)),
            "merges": dict(zip(s_ids.tolist(), s_n.tolist(), strict=True)),
            "split_objects": int((t_n > 1).sum()), "merged_segments": int((s_n > 1).sum())}


def scores(truth, seg) -> dict:
    """Adapted Rand and VI together, flat: f, precision, recall, voi_split, voi_merge, voi."""
    r = adapted_rand(truth, seg)
    v = variation_of_information(truth, seg)
    return {"f": r["f"], "precision": r["precision"], "recall": r["recall"],
            "voi_split": v["split"], "voi_merge": v["merge"], "voi": v["total"],
            "segments": int(len(np.unique(np.asarray(seg))))}
