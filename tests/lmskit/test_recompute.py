"""Recomputation (activation checkpointing) and the swap-or-recompute planner, on graphs whose
timelines and memory are worked out by hand (1 element = 1 us of compute on TOY)."""

import dataclasses

import pytest
from lmskit_graphs import build

import lmskit
from lmskit.devices import Device
from lmskit.hybrid import candidates, hybrid_plan
from lmskit.planner import max_batch_size, plan
from lmskit.recompute import chain, recomputable, recompute
from lmskit.simulate import simulate

TOY = Device("toy", 10**9, flops=1e6, memory_bandwidth=1e15, h2d_bandwidth=4e6,
             d2h_bandwidth=4e6, compute_efficiency=1.0, bandwidth_efficiency=1.0,
             launch_overhead_s=0.0)
G = "gradient_tape/"
MS = 1e-3
# a is wide (1000 per example) and made from a narrow x; the backward pass reads a last.
WIDE = [("x", "Placeholder", [], "forward", ("B", 250)),
        ("a", "Relu", ["x"], "forward", ("B", 1000)),
        ("b", "Neg", ["a"], "forward", ("B", 250)),
        ("c", "Neg", ["b"], "forward", ("B", 250)),
        (G + "g1", "Mul", ["c", "b"], "backward", ("B", 250)),
        (G + "g2", "Mul", [G + "g1", "a"], "backward", ("B", 250))]


def test_no_recompute_baseline_by_hand():
    # Batch 4: a and g2 touch 4000 elements (4 ms), the rest 1000 (1 ms).
    # a [0, 4], b [4, 8], c [8, 9], g1 [9, 10], g2 [10, 14]. Buffers (bytes): x 4000 [0, 4],
    # a 16000 [0, 14], b 4000 [4, 10], c 4000 [8, 10], g1 4000 [9, 14], g2 4000 [10, 14].
    # Peak at 9: a + b + c + g1 = 28000.
    s = simulate(build(WIDE), TOY, 4)
    assert s.step_time == pytest.approx(14 * MS)
    assert s.peak_device_bytes == 28000


def test_recompute_one_tensor_by_hand():
    g = recompute(build(WIDE), ["a:0"])
    clone = "lms/recompute/a/gradient_tape.g2"
    assert g.ops[clone].type == "Relu" and g.ops[clone].inputs == ["x:0"]
    assert g.ops[clone].control_inputs == [G + "g1"]            # just before its reader
    assert g.ops[G + "g2"].inputs == [G + "g1:0", clone + ":0"]
    s = simulate(g, TOY, 4, timeline=True)
    # a [0, 4], b [4, 8], c [8, 9], g1 [9, 10], a' [10, 14], g2 [14, 18].
    assert (s.start[clone], s.end[clone]) == pytest.approx((10 * MS, 14 * MS))
    assert s.step_time == pytest.approx(18 * MS)
    assert s.recompute_time == pytest.approx(4 * MS) and s.compute_time == pytest.approx(14 * MS)
    assert s.overhead == pytest.approx(4 / 14)
    # a now dies when b ends (8); x lives until a' ends (14). Live bytes: [0, 4] x + a = 20000,
    # [4, 8] + b = 24000, [8, 9] b + c + x = 12000, [9, 10] + g1 = 16000, [10, 14]
    # x + g1 + a' = 24000, [14, 18] g1 + a' + g2 = 24000. Peak 24000 < 28000.
    assert s.peak_device_bytes == 24000
    # Every original op is kept with its inputs, except that g2 now reads the clone.
    original = build(WIDE)
    for name, op in original.ops.items():
        if name != G + "g2":
            assert g.ops[name].inputs == op.inputs, name


def test_recompute_a_chain_reruns_back_to_a_checkpoint():
    g0 = build(WIDE)
    assert chain(g0, "b:0", {"a:0", "b:0"}) == ["a", "b"]
    assert chain(g0, "b:0", {"b:0"}) == ["b"]
    g = recompute(g0, ["a:0", "b:0"])
    # g1 reads b: its clone chain is a' -> b'; g2 reads a: a'' of its own.
    assert g.ops["lms/recompute/b/gradient_tape.g1"].inputs == \
        ["lms/recompute/a/gradient_tape.g1:0"]
    s = simulate(g, TOY, 4)
    # recomputed: for g1 a (4 ms) + b (4 ms), for g2 a (4 ms) = 12 ms more than 14.
    assert s.recompute_time == pytest.approx(12 * MS)
    assert s.step_time == pytest.approx(26 * MS)


def test_what_cannot_be_recomputed():
    g = build(WIDE)
    assert not recomputable(g, "x:0")            # the input itself
    assert not recomputable(g, G + "g1:0")       # made by the backward pass
    with pytest.raises(ValueError, match="x:0"):
        recompute(g, ["x:0"])
    with pytest.raises(ValueError, match="nope:0"):
        recompute(g, ["nope:0"])


def test_candidates_pick_the_cheaper_option_per_tensor():
    # Batch 4 on TOY: a round trip of a 4000-byte tensor is 2 ms, of a (16000 bytes) 8 ms.
    # a: made at 4, first backward reader g2 at 10 -> gap 6 ms: swap costs 8 - 6 = 2 ms,
    #    recomputing it 4 ms: swap.
    # c: made at 9, read by g1 at 9 -> gap 0: swap costs 2 ms; recomputing c costs 1 ms.
    rows = {r["tensor"]: r for r in candidates(build(WIDE), TOY, 4)}
    assert rows["a:0"]["how"] == "swap" and rows["a:0"]["cost"] == pytest.approx(2 * MS)
    assert rows["a:0"]["recompute_cost"] == pytest.approx(4 * MS)
    assert rows["c:0"]["how"] == "recompute"
    assert rows["c:0"]["recompute_cost"] == pytest.approx(1 * MS)
    assert rows["c:0"]["swap_cost"] == pytest.approx(2 * MS)
    only = {r["tensor"]: r for r in candidates(build(WIDE), TOY, 4, allow=("recompute",))}
    assert only["a:0"]["how"] == "recompute" and only["a:0"]["cost"] == pytest.approx(4 * MS)


def test_hybrid_fits_where_nothing_else_does_and_respects_the_host_cap():
    tight = dataclasses.replace(TOY, memory_bytes=24000)
    g = build(WIDE)
    assert not simulate(g, tight, 4).fits
    for allow in (("recompute",), ("swap", "recompute"), ("swap",)):
        r = hybrid_plan(g, tight, 4, tight.memory_bytes, allow=allow)
        assert simulate(r, tight, 4).fits, allow
    # No host memory to pin: every swap becomes a recomputation.
    nohost = dataclasses.replace(tight, host_memory_bytes=1)
    r = hybrid_plan(g, nohost, 4, nohost.memory_bytes)
    s = simulate(r, nohost, 4)
    assert s.fits and s.swapped_bytes == 0 and s.recompute_time > 0


def test_recompute_policies_extend_the_batch():
    from test_planner import DEV, deep_chain

    g = deep_chain()
    none = max_batch_size(g, DEV, "none")
    for policy in ("recompute", "swap+recompute"):
        b = max_batch_size(g, DEV, policy)
        assert b > none, policy
        assert lmskit.simulate(plan(g, policy, DEV, b), DEV, b).fits


def test_cover_count_bounds_the_search():
    from lmskit.hybrid import cover_count

    # The search for the fewest rewrites starts where their bytes first cover the excess.
    assert cover_count([4, 3, 2], 6) == 2
    assert cover_count([4, 3, 2], 4) == 1
    assert cover_count([1, 1], 5) == 2 and cover_count([], 3) == 1
