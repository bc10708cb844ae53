"""lmskit.patches: Dice on hand-worked masks, patch sampling and tiled inference as properties,
bad inputs, a short training run that must learn, and the memory ratio of patch and volume."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmskit import patches as P

FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- Dice by hand


@pytest.mark.parametrize("pred, truth, expected", [
    ([1, 1, 0, 0], [1, 0, 1, 0], 0.5),        # 2*1 / (2 + 2)
    ([1, 1, 1, 0], [1, 1, 0, 0], 0.8),        # 2*2 / (3 + 2)
    ([1, 0, 0, 0], [1, 0, 0, 0], 1.0),
    ([1, 1, 0, 0], [0, 0, 1, 1], 0.0),        # disjoint
    ([1, 1, 1, 1], [1, 0, 0, 0], 0.4),        # 2*1 / (4 + 1)
    ([0, 0, 0, 0], [0, 0, 0, 0], 1.0),        # both empty: perfect agreement by convention
    ([0, 0, 0, 0], [0, 1, 0, 0], 0.0),        # missed the only tumour voxel
    ([0, 1, 0, 0], [0, 0, 0, 0], 0.0),        # tumour predicted where there is none
])
def test_dice_by_hand(pred, truth, expected):
    assert P.dice(np.array(pred), np.array(truth)) == pytest.approx(expected)


def test_dice_on_3d_masks():
    truth = np.zeros((4, 4, 4), bool)
    truth[:2] = True                           # 32 voxels
    pred = np.zeros((4, 4, 4), bool)
    pred[1:3] = True                           # 32 voxels, 16 shared
    assert P.dice(pred, truth) == pytest.approx(2 * 16 / 64)


def test_region_dice_scores_wt_and_tc_per_volume():
    labels = np.zeros((2, 2, 2, 2, 3), np.float32)
    labels[0, 0, :, :, 0] = 1                  # volume 0: WT 4 voxels, TC empty
    labels[1, :, :, :, 0] = 1                  # volume 1: WT everywhere, TC 2 voxels
    labels[1, 0, 0, :, 1] = 1
    probs = np.zeros_like(labels)
    probs[0, 0, :, :, 0] = 0.9                 # WT exactly right
    probs[0, 1, 0, 0, 1] = 0.7                 # one false TC voxel where TC is empty
    probs[1, 0, :, :, 0] = 0.6                 # half of WT: 2*4 / (4 + 8)
    probs[1, 0, 0, :, 1] = 0.4                 # TC below the threshold: nothing found
    scores = P.region_dice(probs, labels)
    assert scores["WT"] == pytest.approx([1.0, 2 * 4 / 12])
    assert scores["TC"] == pytest.approx([0.0, 0.0])
    assert set(scores) == {"WT", "TC"}


masks = st.integers(1, 4).flatmap(
    lambda n: st.tuples(st.lists(st.booleans(), min_size=n ** 3, max_size=n ** 3),
                        st.lists(st.booleans(), min_size=n ** 3, max_size=n ** 3))
    .map(lambda ab: (np.array(ab[0]).reshape(n, n, n), np.array(ab[1]).reshape(n, n, n))))


@FAST
@given(masks)
def test_dice_is_symmetric_and_bounded(ab):
    a, b = ab
    d = P.dice(a, b)
    assert d == P.dice(b, a)
    assert 0.0 <= d <= 1.0
    if a.any():
        assert P.dice(a, a) == 1.0
        assert P.dice(a, ~a) == 0.0
    if a.any() and b.any() and not (a & b).any():
        assert d == 0.0


# --------------------------------------------------------------------------- patch sampling


@FAST
@given(side=st.integers(4, 12), data=st.data())
def test_patches_stay_in_bounds_and_copy_the_volume(side, data):
    patch = data.draw(st.integers(1, side), label="patch")
    seed = data.draw(st.integers(0, 2 ** 16), label="seed")
    foreground = data.draw(st.sampled_from([0.0, 0.5, 1.0]), label="foreground")
    rng = np.random.default_rng(seed)
    images = rng.normal(size=(2, side, side, side, 2)).astype(np.float32)
    labels = (rng.random((2, side, side, side, 3)) > 0.9).astype(np.float32)
    x, y, where = P.sample_patches(images, labels, patch, 5, seed=seed, foreground=foreground)
    assert x.shape == (5, patch, patch, patch, 2) and y.shape == (5, patch, patch, patch, 3)
    for i, (v, corner) in enumerate(where):
        assert all(0 <= c <= side - patch for c in corner)
        box = tuple(slice(c, c + patch) for c in corner)
        np.testing.assert_array_equal(x[i], images[v][box])
        np.testing.assert_array_equal(y[i], labels[v][box])


@FAST
@given(side=st.integers(6, 16), data=st.data())
def test_foreground_patches_contain_the_tumour(side, data):
    # One tumour voxel per volume: a patch centred on tumour must contain it.
    patch = data.draw(st.integers(2, side), label="patch")
    seed = data.draw(st.integers(0, 2 ** 16), label="seed")
    labels = np.zeros((3, side, side, side, 3), np.float32)
    spots = np.random.default_rng(seed).integers(0, side, (3, 3))
    for v, (i, j, k) in enumerate(spots):
        labels[v, i, j, k, 0] = 1
    images = np.zeros((3, side, side, side, 1), np.float32)
    _, y, _ = P.sample_patches(images, labels, patch, 8, seed=seed, foreground=1.0)
    assert (y[..., 0].sum(axis=(1, 2, 3)) == 1).all()


def test_foreground_share_is_respected():
    side, patch = 32, 4
    labels = np.zeros((1, side, side, side, 3), np.float32)
    labels[0, 0, 0, 0, 0] = 1                  # a uniform 4^3 patch hits this 1 time in 29^3
    images = np.zeros((1, side, side, side, 1), np.float32)
    _, y, _ = P.sample_patches(images, labels, patch, 600, seed=3, foreground=0.25)
    share = (y[..., 0].sum(axis=(1, 2, 3)) > 0).mean()
    assert 0.18 < share < 0.32


def test_sampling_is_repeatable_for_a_seed():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(3, 8, 8, 8, 1)).astype(np.float32)
    labels = (rng.random((3, 8, 8, 8, 3)) > 0.8).astype(np.float32)
    a = P.sample_patches(images, labels, 4, 6, seed=5)
    b = P.sample_patches(images, labels, 4, 6, seed=5)
    c = P.sample_patches(images, labels, 4, 6, seed=6)
    assert a[2] == b[2] and a[2] != c[2]


# --------------------------------------------------------------------------- sliding window


@pytest.mark.parametrize("length, patch, overlap, expected", [
    (48, 32, 0.5, [0, 16]),
    (40, 16, 0.5, [0, 8, 16, 24]),
    (10, 4, 0.0, [0, 4, 6]),                   # last tile pulled back flush with the end
    (8, 8, 0.5, [0]),                          # the whole volume in one tile
    (7, 2, 0.75, [0, 1, 2, 3, 4, 5]),          # stride never drops below one voxel
])
def test_tile_starts_by_hand(length, patch, overlap, expected):
    assert P.tile_starts(length, patch, overlap) == expected


@FAST
@given(length=st.integers(1, 40), data=st.data())
def test_tiles_cover_every_voxel(length, data):
    patch = data.draw(st.integers(1, length), label="patch")
    overlap = data.draw(st.sampled_from([0.0, 0.25, 0.5, 0.9]), label="overlap")
    starts = P.tile_starts(length, patch, overlap)
    covered = np.zeros(length, bool)
    for s in starts:
        assert 0 <= s <= length - patch
        covered[s:s + patch] = True
    assert covered.all()


@FAST
@given(shape=st.tuples(st.integers(2, 9), st.integers(2, 9), st.integers(2, 9)),
       data=st.data())
def test_sliding_window_of_identity_is_exact(shape, data):
    patch = data.draw(st.integers(1, min(shape)), label="patch")
    overlap = data.draw(st.sampled_from([0.0, 0.5, 0.75]), label="overlap")
    batch = data.draw(st.integers(1, 5), label="batch")
    volume = np.random.default_rng(sum(shape)).normal(size=shape + (2,)).astype(np.float32)
    out = P.sliding_window(lambda x: x, volume, patch, overlap, batch)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, volume)


def test_sliding_window_averages_overlapping_tiles():
    # A "model" that answers each tile with how many tiles it has seen so far: with tiles at
    # 0 and 2 along each axis of a 6^3 volume (patch 4), the centre voxels see all 8 tiles.
    calls = []

    def counter(x):
        out = np.empty(x.shape[:4] + (1,), np.float32)
        for i in range(len(x)):
            calls.append(1)
            out[i] = len(calls) - 1
        return out

    out = P.sliding_window(counter, np.zeros((6, 6, 6, 1), np.float32), 4, 0.5, batch=3)
    assert len(calls) == 8
    assert out[0, 0, 0, 0] == 0                # only the first tile (corner 0,0,0)
    assert out[5, 5, 5, 0] == 7                # only the last tile (corner 2,2,2)
    assert out[3, 3, 3, 0] == pytest.approx(sum(range(8)) / 8)
    assert out[0, 0, 3, 0] == pytest.approx((0 + 1) / 2)   # tiles (0,0,0) and (0,0,2)


# --------------------------------------------------------------------------- bad inputs


def test_patch_larger_than_volume_is_named():
    with pytest.raises(ValueError, match="patch 48 does not fit in volumes of side 32"):
        P.check_patch(32, 48)


def test_patch_not_a_multiple_of_two_to_the_depth_is_named():
    with pytest.raises(ValueError, match=r"patch 12 is not a multiple of 2\*\*depth = 8"):
        P.check_patch(32, 12, depth=3)
    assert P.check_patch(32, 16, depth=3) == 16


@pytest.mark.parametrize("call, culprit", [
    (lambda: P.check_patch(32, 0), "patch"),
    (lambda: P.check_patch(32, 2.5), "patch"),
    (lambda: P.check_patch(True, 1), "side"),
    (lambda: P.check_patch(16, 8, depth=-1), "depth"),
    (lambda: P.dice(np.zeros(3), np.zeros(4)), "differ in shape"),
    (lambda: P.region_dice(np.zeros((1, 2, 2, 2, 3)), np.zeros((1, 2, 2, 2, 2))),
     "differ in shape"),
    (lambda: P.tile_starts(8, 4, 1.0), "overlap"),
    (lambda: P.sliding_window(lambda x: x, np.zeros((4, 4, 4)), 2), "volume"),
    (lambda: P.sliding_window(lambda x: x, np.zeros((4, 4, 4, 1)), 5), "patch 5"),
    (lambda: P.sample_patches(np.zeros((1, 4, 4, 4, 1)), np.zeros((1, 4, 4, 5, 3)), 2, 1),
     "differ"),
    (lambda: P.sample_patches(np.zeros((1, 4, 4, 4, 1)), np.zeros((1, 4, 4, 4, 3)), 2, 1,
                              foreground=1.5), "foreground"),
    (lambda: P.sample_patches(np.zeros((1, 4, 4, 4, 1)), np.zeros((1, 4, 4, 4, 3)), 2, 0),
     "count"),
])
def test_bad_inputs_name_the_culprit(call, culprit):
    with pytest.raises(ValueError, match=culprit):
        call()


# --------------------------------------------------------------------------- training


@pytest.fixture(scope="module")
def brats():
    import mlsys_datasets as zoo

    # 24^3: at 16^3 a tumour is a few dozen voxels and a short run learns to predict none.
    return zoo.brats_volumes(8, 24, seed=1), zoo.brats_volumes(3, 24, seed=2)


def tiny_unet(side, seed=0, depth=2):
    import mlsys_datasets as zoo

    return zoo.unet3d(side=side, base_filters=4, depth=depth, batch_norm=False, seed=seed)


def test_train_rejects_a_model_larger_than_the_volumes(brats):
    (x, y), _ = brats
    with pytest.raises(ValueError, match="patch 32 does not fit in volumes of side 24"):
        P.train(tiny_unet(32), x, y, steps=1)


def test_patch_training_learns_the_tumour(brats):
    (x, y), (xt, yt) = brats
    model = tiny_unet(16)
    before = P.evaluate(model, xt, yt)
    # At the default rate and 120 steps every seed we tried learns, with TensorFlow's oneDNN
    # kernels on or off (80 steps at 1e-2 collapsed to "no tumour" for some seeds, on one
    # kernel set or the other: 0.0 instead of 0.59)
    losses = P.train(model, x, y, steps=120, seed=0)
    after = P.evaluate(model, xt, yt)
    assert np.mean(losses[-10:]) < np.mean(losses[:10])
    # Untrained sigmoid outputs sit near 0.5 everywhere: Dice near twice the tumour's share.
    assert np.mean(after["WT"]) > 0.5
    assert np.mean(after["WT"]) > np.mean(before["WT"]) + 0.3
    # The same model scored against shuffled truth (another volume's tumour) does worse.
    shuffled = P.region_dice(P.predict_volumes(model, xt), yt[[1, 2, 0]])
    assert np.mean(after["WT"]) > np.mean(shuffled["WT"]) + 0.2


def test_batch_norm_models_predict_each_input_on_its_own():
    # Batch-1 batch norm is instance normalisation: a tile's prediction must not depend on the
    # other tiles that share its call.
    import mlsys_datasets as zoo

    model = tiny_unet(8, depth=1)
    bn_model = zoo.unet3d(side=8, base_filters=4, depth=1, seed=0)
    assert P.has_batch_norm(bn_model) and not P.has_batch_norm(model)
    x = np.random.default_rng(0).normal(size=(3, 8, 8, 8, 4)).astype(np.float32)
    run = P.predictor(bn_model)
    together = run(x)
    alone = np.concatenate([run(x[i:i + 1]) for i in range(3)])
    np.testing.assert_array_equal(together, alone)
    assert together.shape == (3, 8, 8, 8, 3) and ((together > 0) & (together < 1)).all()


def test_training_is_repeatable_for_a_seed(brats):
    (x, y), _ = brats
    a = P.train(tiny_unet(8, depth=1), x, y, steps=3, seed=4)
    b = P.train(tiny_unet(8, depth=1), x, y, steps=3, seed=4)
    assert len(a) == 3 and a[0] > 0
    assert a == b


# --------------------------------------------------------------------------- memory


def test_activation_memory_scales_with_the_voxels():
    # Every saved activation of a fully convolutional net has one entry per voxel (times
    # filters), so a volume twice the side saves 8x the activations; the weights do not change.
    small = P.training_memory(tiny_unet(8, depth=1))
    large = P.training_memory(tiny_unet(16, depth=1))
    assert large["weights"] == small["weights"] > 0
    assert large["activations"] == pytest.approx(8 * small["activations"], rel=0.01)
    assert large["peak"] > small["peak"]
    assert small["fits"] and large["fits"]
    scaled = P.scale_memory(small, 16)
    assert scaled["weights"] == large["weights"]
    assert scaled["peak"] == pytest.approx(large["peak"], rel=0.01)
    assert scaled["activations"] == pytest.approx(large["activations"], rel=0.01)


def test_scale_memory_by_hand():
    mem = {"side": 10, "batch": 1, "device": "d", "budget": 1000, "peak": 110, "weights": 10,
           "activations": 50, "fits": True}
    twice = P.scale_memory(mem, 20)           # 8x the voxels
    assert (twice["peak"], twice["weights"], twice["activations"]) == (810, 10, 400)
    assert twice["fits"] and not P.scale_memory(mem, 30)["fits"]   # 10 + 100*27 > 1000


def test_training_memory_keeps_the_allocator_reserve_back():
    # A real run cannot use the CUDA context, the conv workspace and the allocator's slack, so
    # a step fits when peak <= memory - reserve (lmskit.devices), not when peak <= memory.
    # Hand-worked: a device with twice the step's peak of memory. A reserve 1,000 bytes larger
    # than the peak leaves a budget 1,000 bytes short of it (does not fit); 1,000 bytes smaller
    # leaves 1,000 to spare (fits).
    from lmskit.devices import get_device

    model = tiny_unet(8, depth=1)
    peak = P.training_memory(model)["peak"]
    assert peak > 1000
    base = get_device("p100-16gb")
    short = P.training_memory(model, device=base.with_memory(2 * peak, reserve_bytes=peak + 1000))
    assert short["peak"] == peak
    assert (short["memory"], short["reserve"]) == (2 * peak, peak + 1000)
    assert short["budget"] == peak - 1000 and not short["fits"]
    roomy = P.training_memory(model, device=base.with_memory(2 * peak, reserve_bytes=peak - 1000))
    assert roomy["budget"] == peak + 1000 and roomy["fits"]
    # The preset's own reserve is taken off too.
    assert P.training_memory(model)["budget"] == base.memory_bytes - base.reserve_bytes > 0
    assert base.reserve_bytes > 0


def test_scale_memory_keeps_the_budget_less_the_reserve():
    # memory 1000, reserve 100 -> budget 900: side 10 -> 20 gives peak 10 + 100 * 8 = 810
    # (fits 900); side 20 with 850 of activations per side-10 would not. The budget must not
    # be reset to the memory.
    mem = {"side": 10, "batch": 1, "device": "d", "memory": 1000, "reserve": 100,
           "budget": 900, "peak": 120, "weights": 10, "activations": 50, "fits": True}
    twice = P.scale_memory(mem, 20)          # 10 + 110 * 8 = 890 <= 900
    assert (twice["peak"], twice["budget"], twice["memory"], twice["reserve"]) == (890, 900,
                                                                                  1000, 100)
    assert twice["fits"]
    mem["peak"] = 122                         # 10 + 112 * 8 = 906: above 900, below 1000
    assert not P.scale_memory(mem, 20)["fits"]
