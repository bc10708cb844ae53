"""compilerkit.inference: ZNNi-style sliding-window inference of valid 3-D nets.

The stitched output is compared with the whole volume run in one call (the same model compiled
at the whole volume's shape) and with onnxruntime; the stitching rule alone with a numpy box
filter against the filter on the whole volume; the field of view on hand-worked nets; the
memory model's arena against the compiled model's; the planner against its cap."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

from compilerkit import inference as inf
from compilerkit.measure.conformance import ort_session


def _net(layers, c_in=1, seed=0, name="net"):
    """layers: ("conv", k_out, kernel (z, y, x), attrs) / ("pool", kernel, attrs) /
    ("relu",); input [1, c_in, z, y, x] with named dims."""
    rng = np.random.default_rng(seed)
    nodes, inits, x, c = [], [], "x", c_in
    for i, spec in enumerate(layers):
        y = f"t{i}"
        if spec[0] == "conv":
            _, k_out, ks, attrs = spec
            w = rng.standard_normal((k_out, c, *ks)) / math.sqrt(c * math.prod(ks))
            inits += [numpy_helper.from_array(w.astype(np.float32), f"w{i}"),
                      numpy_helper.from_array(rng.standard_normal(k_out).astype(np.float32),
                                              f"b{i}")]
            nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [y], name=f"conv{i}",
                                          **attrs))
            c = k_out
        elif spec[0] == "pool":
            nodes.append(helper.make_node("MaxPool", [x], [y], name=f"pool{i}",
                                          kernel_shape=list(spec[1]), **spec[2]))
        else:
            nodes.append(helper.make_node("Relu", [x], [y], name=f"relu{i}"))
        x = y
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(
        "x", 1, [1, c_in, "z", "y", "x"])], [helper.make_tensor_value_info(x, 1, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


# a small net: 2 channels in, a 3^3 Conv, a 2^3 max filter, an anisotropic 1x3x2 Conv
SMALL = _net([("conv", 3, (3, 3, 3), {}), ("relu",), ("pool", (2, 2, 2), {}),
              ("conv", 2, (1, 3, 2), {})], c_in=2)
SMALL_FOV = (1 + 2 + 1 + 0, 1 + 2 + 1 + 2, 1 + 2 + 1 + 1)


def test_field_of_view_hand_worked():
    # fov = 1 + sum of (effective kernel - 1): a dilated kernel of 3 at dilation 2 spans 5
    model = _net([("conv", 4, (3, 3, 3), {}), ("relu",), ("pool", (2, 2, 2), {}),
                  ("conv", 2, (1, 3, 5), {}), ("conv", 2, (1, 1, 3), {"dilations": [1, 1, 2]})])
    net = inf.inspect(model)
    assert net.fov == (1 + 2 + 1 + 0 + 0, 1 + 2 + 1 + 2 + 0, 1 + 2 + 1 + 4 + 4)
    assert (net.channels_in, net.channels_out) == (1, 2)
    assert inf.inspect(SMALL).fov == SMALL_FOV
    assert net.patch_in((5, 6, 7)) == (5 + 4 - 1, 6 + 6 - 1, 7 + 12 - 1)


def test_axis_starts_hand_cases():
    assert inf.axis_starts(10, 4) == [0, 4, 6]  # the last patch moved back to end at 10
    assert inf.axis_starts(8, 4) == [0, 4]
    assert inf.axis_starts(4, 4) == [0]
    assert inf.axis_starts(5, 1) == [0, 1, 2, 3, 4]


@given(n=st.integers(1, 60), p=st.integers(1, 60))
def test_axis_starts_tile_the_axis(n, p):
    p = min(p, n)
    starts = inf.axis_starts(n, p)
    covered = np.zeros(n, int)
    for s in starts:
        assert 0 <= s and s + p <= n
        covered[s:s + p] += 1
    assert covered.min() >= 1  # every output voxel computed
    assert len(starts) == -(-n // p)  # and no patch more than needed
    assert covered.sum() - n < p  # only the last patch overlaps the one before


def _box(v, fov):
    """A numpy 'model' with a field of view: the sum over each window (valid), two
    channels (sum and max): an independent reference for the stitching alone."""
    fz, fy, fx = fov
    out = tuple(n - f + 1 for n, f in zip(v.shape[-3:], fov, strict=True))
    s = np.zeros(out)
    m = np.full(out, -np.inf)
    for a in range(fz):
        for b in range(fy):
            for c in range(fx):
                w = v[0, a:a + out[0], b:b + out[1], c:c + out[2]]
                s += w
                m = np.maximum(m, w)
    return np.stack([s, m])


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_stitch_equals_whole_for_a_numpy_window(data):
    fov = tuple(data.draw(st.integers(1, 4)) for _ in range(3))
    shape = tuple(data.draw(st.integers(f, f + 12)) for f in fov)
    out = tuple(n - f + 1 for n, f in zip(shape, fov, strict=True))
    patch = tuple(data.draw(st.integers(1, o)) for o in out)
    v = np.random.default_rng(0).standard_normal((1, *shape))
    got = inf.stitch(lambda x: _box(x, fov), [v], fov, patch)
    np.testing.assert_allclose(got, _box(v, fov), rtol=1e-12, atol=1e-12)


@functools.cache
def _compiled(shape_in: tuple):
    """SMALL compiled at input `shape_in` (cached: each compile takes about a second)."""
    out = tuple(n - f + 1 for n, f in zip(shape_in, SMALL_FOV, strict=True))
    return inf.SlidingWindow(SMALL, out, conv_algorithm="im2col", asm=False)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_stitched_equals_the_whole_volume_run(data):
    shape = tuple(data.draw(st.integers(f, f + 9), label=f"axis {i}")
                  for i, f in enumerate(SMALL_FOV))
    out = tuple(n - f + 1 for n, f in zip(shape, SMALL_FOV, strict=True))
    patch = tuple(data.draw(st.integers(1, o), label=f"patch {i}") for i, o in enumerate(out))
    vol = np.random.default_rng(sum(shape)).standard_normal((2, *shape)).astype(np.float32)
    sw = _compiled(tuple(p + f - 1 for p, f in zip(patch, SMALL_FOV, strict=True)))
    stitched = sw(vol, progress=False)
    whole = _compiled(shape).run_patch(vol)  # one call over the whole volume
    ref = ort_session(SMALL.SerializeToString()).run(None, {"x": vol[None]})[0][0]
    assert stitched.shape == whole.shape == ref.shape == (2, *out)
    np.testing.assert_allclose(stitched, whole, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stitched, ref, rtol=1e-4, atol=1e-4)


def test_stitched_with_ragged_patches_matches_onnxruntime():
    # 13 output voxels on x with patches of 5: starts 0, 5, 8 (the last moved back)
    shape = (SMALL_FOV[0] + 3, SMALL_FOV[1] + 6, SMALL_FOV[2] + 12)
    vol = np.random.default_rng(7).standard_normal((2, *shape)).astype(np.float32)
    sw = inf.SlidingWindow(SMALL, (2, 4, 5), conv_algorithm="classic", asm=False)
    got = sw(vol, progress=False)
    ref = ort_session(SMALL.SerializeToString()).run(None, {"x": vol[None]})[0][0]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_memory_model_counts_the_compiled_arena():
    net = inf.inspect(SMALL)
    sw = _compiled((9, 11, 10))
    b = sw.bytes()
    assert b.arena == sw.compiled.arena_bytes  # the compiler's own plan, not a fit
    assert b.input == 4 * 2 * 9 * 11 * 10 and b.output == 4 * 2 * math.prod(sw.patch_out)
    assert b.constants >= 4 * (3 * 2 * 27 + 3 + 2 * 3 * 6 + 2)  # the weights at least
    assert b.total == b.input + b.output + b.arena + b.constants
    assert inf.patch_bytes(net, sw.patch_out, "im2col") == b


def test_planner_respects_the_cap_and_grows_with_it():
    net = inf.inspect(SMALL)
    volume = (40, 40, 40)
    out = tuple(n - f + 1 for n, f in zip(volume, net.fov, strict=True))
    smallest = inf.patch_bytes(net, (1, 1, 1), "im2col").total
    previous = 0.0
    for cap in (smallest, 2 * smallest, 8 * smallest, 64 * smallest, 1 << 30):
        p = inf.plan(net, volume, cap, algorithms=("im2col",), sizes=[1, 2, 4, 8, 16, 37])
        assert p.bytes.total <= cap
        assert inf.patch_bytes(net, p.patch_out, p.algorithm).total == p.bytes.total
        assert all(c["bytes"] <= cap for c in p.candidates)
        # the pick is the candidate with the most predicted voxels per second
        assert p.predicted_voxels_per_s == max(c["predicted_voxels_per_s"] for c in p.candidates)
        assert p.patches == len(inf.patch_grid(out, p.patch_out))
        assert p.predicted_voxels_per_s >= previous  # a larger cap never plans slower
        previous = p.predicted_voxels_per_s
    assert p.patch_out == out  # no cap: one patch of the whole output (37^3) is best


def test_planner_refuses_a_cap_below_the_smallest_patch():
    net = inf.inspect(SMALL)
    smallest = inf.patch_bytes(net, (1, 1, 1), "im2col").total
    with pytest.raises(ValueError, match=r"ram_bytes .* below the smallest valid patch"):
        inf.plan(net, (30, 30, 30), smallest - 1, algorithms=("im2col",), sizes=[1, 2])


def test_volume_smaller_than_the_field_of_view_is_named():
    with pytest.raises(ValueError, match="smaller than the field of view"):
        inf.plan(SMALL, (3, 30, 30), 1 << 30)
    with pytest.raises(ValueError, match="smaller than the field of view"):
        _compiled((4, 6, 5))(np.zeros((2, 4, 5, 30), np.float32), progress=False)
    with pytest.raises(ValueError, match="larger than the output"):
        inf.stitch(lambda x: x, [np.zeros((5, 5, 5))], (1, 1, 1), (6, 1, 1))


@pytest.mark.parametrize("layers, culprit", [
    ([("conv", 2, (3, 3, 3), {"pads": [1] * 6})], "'conv0' (Conv): pads"),
    ([("conv", 2, (3, 3, 3), {"strides": [2, 2, 2]})], "'conv0' (Conv): strides"),
    ([("conv", 2, (3, 3, 3), {"auto_pad": "SAME_UPPER"})], "'conv0' (Conv): auto_pad SAME_UPPER"),
    ([("conv", 2, (3, 3, 3), {}), ("pool", (2, 2, 2), {"strides": [2, 2, 2]})],
     "'pool1' (MaxPool): strides"),
])
def test_non_valid_models_are_refused_by_node(layers, culprit):
    with pytest.raises(ValueError, match=culprit.replace("(", r"\(").replace(")", r"\)")):
        inf.inspect(_net(layers))


def test_ops_that_mix_positions_are_refused():
    model = _net([("conv", 2, (3, 3, 3), {})])
    g = model.graph
    g.node.append(helper.make_node("Flatten", ["t0"], ["f"], name="flat"))
    g.output[0].name = "f"
    with pytest.raises(ValueError, match=r"'flat' \(Flatten\): not a valid-convolution op"):
        inf.inspect(model)
    two = _net([("conv", 2, (3, 3, 3), {})])
    two.graph.input.append(helper.make_tensor_value_info("x2", 1, [1, 1, 4, 4, 4]))
    with pytest.raises(ValueError, match="2 inputs"):
        inf.inspect(two)


def test_planner_measures_its_top_predictions_and_picks_the_best_measured():
    net = inf.inspect(SMALL)
    timed = []

    def timer(algorithm, patch_out):  # a made-up machine on which side 4 is fastest per voxel
        timed.append((algorithm, patch_out))
        side = patch_out[0]
        return math.prod(patch_out) / (1e6 if side == 4 else 1e5)

    p = inf.plan(net, (40, 40, 40), 1 << 30, algorithms=("im2col",), sizes=[1, 2, 4, 8, 16],
                 measure=3, timer=timer)
    ranked = sorted(p.candidates, key=lambda c: -c["predicted_voxels_per_s"])
    assert timed == [(c["algorithm"], c["patch_out"]) for c in ranked[:3]]  # only the top 3
    measured = [c for c in p.candidates if "measured_voxels_per_s" in c]
    assert p.measured and len(measured) == 3
    best = max(measured, key=lambda c: c["measured_voxels_per_s"])
    assert p.patch_out == best["patch_out"]
    if any(c["patch_out"][0] == 4 for c in measured):
        assert p.patch_out[0] == 4


def test_planner_measures_by_compiling_when_no_timer_is_given():
    p = inf.plan(SMALL, (20, 20, 20), 1 << 30, algorithms=("im2col",), sizes=[2, 8], measure=1)
    measured = [c for c in p.candidates if "measured_seconds" in c]
    assert len(measured) == 1 and measured[0]["measured_seconds"] > 0
    assert p.patch_out == measured[0]["patch_out"]


def test_compare_plans_scores_picks_against_the_best_that_fits():
    from mlsys_workbench.experiments import inference as zf

    net = inf.inspect(SMALL)
    volume = (36, 36, 36)
    out = tuple(n - f + 1 for n, f in zip(volume, net.fov, strict=True))
    rows = []
    for side, sec in ((1, 1e-4), (4, 2e-4), (8, 1e-3), (16, 2e-3)):  # side 8: fastest per voxel
        p = (side,) * 3
        sec = sec if side != 8 else 5e-4
        rows.append({"algorithm": "im2col", "side": side, "patch_out": list(p),
                     "bytes": inf.patch_bytes(net, p, "im2col").total, "seconds": sec,
                     "voxels_per_s": inf.volume_throughput(out, p, sec)})
    cap = rows[2]["bytes"]  # side 8 fits, side 16 needs more (the compiler's plan)
    (res,) = zf.compare_plans(SMALL, rows, volume, [cap], measure=4)
    fits = [r for r in rows if r["bytes"] <= cap]
    best = max(fits, key=lambda r: r["voxels_per_s"])
    assert res["best"]["side"] == best["side"] == 8
    assert res["pick_measured"]["side"] == 8 and res["pick_measured_over_best"] == 1.0
    assert res["pick_measured_over_smallest"] == pytest.approx(
        best["voxels_per_s"] / rows[0]["voxels_per_s"])
    assert 0 < res["pick_over_best"] <= 1.0
