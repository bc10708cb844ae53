"""Segmentation scores on cases small enough to work out by hand."""

import numpy as np
import pytest

from segkit import metrics

TRUTH = np.array([[[1, 1, 2, 2]]])


def test_perfect_up_to_relabelling():
    s = metrics.scores(TRUTH, np.array([[[7, 7, 3, 3]]]))
    assert s["f"] == 1 and s["voi"] == 0


def test_a_split_costs_recall_and_one_bit():
    # object 1 cut in two halves: H(seg | truth) = 1/2 * 1 bit (half the voxels are in object 1)
    seg = np.array([[[1, 5, 2, 2]]])
    v = metrics.variation_of_information(TRUTH, seg)
    assert v["split"] == pytest.approx(0.5) and v["merge"] == pytest.approx(0)
    r = metrics.adapted_rand(TRUTH, seg)
    assert r["precision"] == pytest.approx(1) and r["recall"] < 1


def test_a_merge_costs_precision():
    seg = np.ones_like(TRUTH)
    v = metrics.variation_of_information(TRUTH, seg)
    assert v["merge"] == pytest.approx(1) and v["split"] == pytest.approx(0)
    r = metrics.adapted_rand(TRUTH, seg)
    assert r["recall"] == pytest.approx(1) and r["precision"] < 1


def test_split_merge_counts():
    truth = np.repeat(np.array([1, 1, 2, 2, 3, 3]), 10).reshape(1, 1, -1)
    seg = np.repeat(np.array([5, 6, 7, 7, 7, 7]), 10).reshape(1, 1, -1)
    out = metrics.split_merge(truth, seg)
    assert out["splits"] == {1: 2, 2: 1, 3: 1} and out["merges"] == {5: 1, 6: 1, 7: 2}
    assert out["split_objects"] == 1 and out["merged_segments"] == 1


def test_shapes_must_match():
    with pytest.raises(ValueError, match="shape"):
        metrics.scores(TRUTH, TRUTH[..., :2])
