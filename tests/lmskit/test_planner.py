"""Policies and the max-batch search on a synthetic training chain, plus bad budgets."""

import pytest
from lmskit_graphs import build

import lmskit
from lmskit.devices import Device
from lmskit.planner import InfeasibleError, autotune_v2, compare, max_batch_size, plan
from lmskit.rules import check
from lmskit.schedule import lifetimes

G = "gradient_tape/"
# Compute-heavy enough (1 FLOP/element at 1 GFLOP/s) that copies (1 GB/s) can hide.
DEV = Device("toy", 400_000, flops=1e8, memory_bandwidth=1e15, h2d_bandwidth=1e9,
             d2h_bandwidth=1e9, compute_efficiency=1.0, bandwidth_efficiency=1.0,
             launch_overhead_s=0.0)


def deep_chain(n=8, width=1000):
    rows = [("x", "Placeholder", [], "forward", ("B", width))]
    prev = "x"
    for i in range(n):
        rows.append((f"f{i}", "Relu" if i % 2 else "Conv2D", [prev], "forward", ("B", width)))
        prev = f"f{i}"
    rows.append(("loss", "Sum", [prev], "forward", ()))
    grad = "loss"
    for i in reversed(range(n)):
        src = f"f{i - 1}" if i else "x"
        rows.append((f"{G}g{i}", "ReluGrad", [grad, src], "backward", ("B", width)))
        grad = f"{G}g{i}"
    return build(rows, loss="loss:0")


def test_none_policy_agrees_with_lifetimes():
    g = deep_chain()
    b = max_batch_size(g, DEV, "none")
    assert b > 0
    assert lifetimes(g, b).peak <= DEV.memory_bytes < lifetimes(g, b + 1).peak


@pytest.mark.parametrize("policy", ["swap-all", "tflms", "tflms-v2", "lmskit"])
def test_swapping_fits_larger_batches(policy):
    g = deep_chain()
    none = max_batch_size(g, DEV, "none")
    more = max_batch_size(g, DEV, policy)
    assert more > none
    r = plan(g, policy, DEV, more)
    assert check(g, r) if r is not g else True
    assert lmskit.simulate(r, DEV, more).fits
    try:
        assert not lmskit.simulate(plan(g, policy, DEV, more + 1), DEV, more + 1).fits
    except InfeasibleError:
        pass   # the largest op alone no longer fits: nothing could do better


def test_compare_runs_every_policy_at_one_batch():
    g = deep_chain()
    b = max_batch_size(g, DEV, "none") + 3
    sims = compare(g, DEV, b)
    assert set(sims) == set(lmskit.POLICIES)
    assert not sims["none"].fits and sims["lmskit"].fits
    # Ours never swaps more than it must, so it is no slower than swapping everything.
    assert sims["lmskit"].step_time <= sims["swap-all"].step_time + 1e-12


def test_v2_autotune_prefers_no_swapping_when_it_fits():
    g = deep_chain()
    top = max(lmskit.schedule(g).level.values()) + 1
    assert autotune_v2(g, DEV, 1)["swapout_threshold"] == top
    tight = autotune_v2(g, DEV, max_batch_size(g, DEV, "none") + 3)
    assert tight["swapout_threshold"] < top


def test_budget_below_the_largest_op_is_infeasible():
    g = deep_chain()
    with pytest.raises(InfeasibleError, match=r"infeasible even with swapping: op \S+ needs "
                                              r"12000 bytes"):
        plan(g, "lmskit", DEV, batch_size=1, budget=10_000)
    with pytest.raises(InfeasibleError, match="infeasible even with swapping"):
        max_batch_size(g, DEV, "tflms", budget=10_000)


def test_unknown_policy():
    with pytest.raises(ValueError, match="unknown policy"):
        plan(deep_chain(), "magic", DEV, 1)


def test_swap_auto_options_are_resolved_by_autotune():
    # The rules leave -1 ("auto") to the planner's autotune, which simulates; swap() takes values.
    g = deep_chain()
    b = max_batch_size(g, DEV, "none") + 3
    with pytest.raises(TypeError, match="autotune_v2"):
        lmskit.swap(g, swapout_threshold=-1, swapin_ahead=-1, swapin_groupby=-1)
    r = lmskit.swap(g, **autotune_v2(g, DEV, b, show_progress=False))
    assert r.options["swapout_threshold"] >= 0 and r.options["swapin_ahead"] >= 1
    assert lmskit.simulate(r, DEV, b).peak_device_bytes <= DEV.memory_bytes


def test_overhead_search_goes_up_from_a_start_that_passes():
    """At batch 1 the copies' latency (1 ms) sets the overhead (a swap-in from b's end waits for
    the swap-out: step 2.5 ms for 1.25 ms of compute, 100%); from batch 4 on the copies hide.
    The search from start=4 must not stop at batch 1's failure (it answered 0)."""
    import dataclasses

    from lmskit_graphs import TOY, toy

    lat = dataclasses.replace(TOY, h2d_bandwidth=1e12, d2h_bandwidth=1e12, copy_latency_s=1e-3)
    g = toy("b")
    assert lmskit.simulate(g, lat, 1).overhead == pytest.approx(1.0, rel=1e-4)
    assert lmskit.simulate(g, lat, 4).overhead == pytest.approx(0.0, abs=1e-6)
    assert max_batch_size(g, lat, "none", max_overhead=0.3, limit=64) == 0
    assert max_batch_size(g, lat, "none", max_overhead=0.3, limit=64, start=4) == 64
