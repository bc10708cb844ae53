"""Synthetic EM volumes: seeded, shaped as promised, and their affinities follow the labels."""

import numpy as np
import pytest
from mlsys_datasets import affinities_from_labels, em_volume


def test_seeded_and_typed():
    a, b = em_volume(24, seed=1), em_volume(24, seed=1)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x, y)
    assert not np.array_equal(a.labels, em_volume(24, seed=2).labels)
    assert a.image.shape == a.labels.shape == (24, 24, 24) and a.affinities.shape == (3, 24, 24, 24)
    assert a.image.dtype == a.affinities.dtype == np.float32 and a.labels.dtype == np.uint32
    assert a.labels.min() >= 1 and 0 <= a.affinities.min() and a.affinities.max() <= 1


def test_exact_affinities_by_hand():
    labels = np.array([[[1, 1, 2]], [[1, 3, 2]]])  # z=2, y=1, x=3
    aff = affinities_from_labels(labels)
    assert aff[2, 0, 0].tolist() == [0, 1, 0] and aff[2, 1, 0].tolist() == [0, 0, 0]
    assert aff[0, 1, 0].tolist() == [1, 0, 1] and aff[0, 0].sum() == 0


def test_affinities_follow_the_labels_with_errors():
    v = em_volume(32, seed=3, noise=0.2)
    exact = affinities_from_labels(v.labels)
    inside, across = v.affinities[exact == 1], v.affinities[(exact == 0)]
    assert np.median(inside) > 0.9 and np.median(across) < 0.3
    clean = em_volume(32, seed=3, noise=0.0, gaps=0, false_boundaries=0)
    exact = affinities_from_labels(clean.labels)
    assert np.array_equal(clean.affinities[1:] > 0.5, exact[1:] > 0.5)


def test_anisotropy_and_sections():
    v = em_volume((16, 48, 48), seed=4, anisotropy=6, missing_sections=2, misaligned_sections=1)
    # cells are ~24 px across in y/x but only ~4 sections deep: more label changes along z
    changes_z = (v.labels[1:] != v.labels[:-1]).mean()
    changes_x = (v.labels[:, :, 1:] != v.labels[:, :, :-1]).mean()
    assert changes_z > 2 * changes_x
    blank = [z for z in range(16)
             if v.image[z].std() < 0.12 and abs(v.image[z].mean() - 0.5) < 0.05]
    assert len(blank) == 2
    assert np.all(np.abs(v.affinities[0, blank[0]] - 0.5) < 0.6)


@pytest.mark.parametrize("kw, match", [({"shape": (4, 4)}, "shape"), ({"anisotropy": 0.5},
                                       "anisotropy"), ({"shape": 4, "missing_sections": 5},
                                                       "sections")])
def test_bad_parameters_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        em_volume(**{"shape": 8, **kw})


def test_progress_bar_is_closed_when_a_stage_raises(monkeypatch):
    import mlsys_datasets.em as em
    from tqdm.auto import tqdm

    def broken(*args, **kwargs):
        raise RuntimeError("stage failed")

    before = set(tqdm._instances)
    monkeypatch.setattr(em, "_neurites", broken)
    with pytest.raises(RuntimeError, match="stage failed") as failure:
        em_volume(16, progress=True)
    # The traceback keeps em_volume's frame, and its bar, alive (as a notebook's last error
    # does): the bar must have been closed, not left to the garbage collector.
    assert failure.traceback and set(tqdm._instances) == before
