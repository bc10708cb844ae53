"""Device limits (host pinning cap, allocator reserve, rounding), max_overhead, save-on-cpu, and
bad options: each on the hand-worked toy chain of test_simulate (1 element = 1 us of compute,
a [4, 250] float32 tensor = 4000 bytes, copied in 1 ms each way)."""

import dataclasses

import pytest
from lmskit_graphs import MS, TOY, G, toy

from lmskit.devices import PRESETS, GiB, MiB, host_limit_from_env
from lmskit.planner import max_batch_size, plan, sync_copies
from lmskit.rules.common import insert_swap
from lmskit.simulate import simulate


def test_reserve_is_kept_back_from_the_budget():
    # No swapping: peak 12000 bytes (three 4000-byte tensors live at once).
    fits = dataclasses.replace(TOY, memory_bytes=13000, reserve_bytes=1000)
    assert fits.usable_bytes == 12000
    assert simulate(toy(), fits, 4).fits and simulate(toy(), fits, 4).budget == 12000
    tight = dataclasses.replace(TOY, memory_bytes=13000, reserve_bytes=1001)
    s = simulate(toy(), tight, 4)
    # x is freed when a ends (1 ms), before b is made; a, b and then c are three buffers.
    assert not s.fits and s.oom_op == "c"


def test_allocator_rounding_rounds_every_buffer_up():
    # 4000-byte buffers rounded to multiples of 3000 take 6000 each: peak 3 x 6000.
    s = simulate(toy(), dataclasses.replace(TOY, allocator_rounding=3000), 4)
    assert s.peak_device_bytes == 18000


def test_host_limit_binds():
    # The swapped copy of a (4000 bytes) is the only host buffer.
    g = toy(trigger="b")
    ok = simulate(g, dataclasses.replace(TOY, host_memory_bytes=4000), 4)
    assert ok.fits and ok.peak_host_bytes == 4000
    over = simulate(g, dataclasses.replace(TOY, host_memory_bytes=3999), 4)
    assert not over.fits and not over.host_fits and over.oom_op is None


def test_presets_carry_the_limits(monkeypatch):
    p100 = PRESETS["p100-16gb"]
    assert p100.reserve_bytes > 0 and p100.usable_bytes < p100.memory_bytes
    assert p100.allocator_rounding == 256
    monkeypatch.delenv("TF_GPU_HOST_MEM_LIMIT_IN_MB", raising=False)
    assert host_limit_from_env() == 64 * GiB
    monkeypatch.setenv("TF_GPU_HOST_MEM_LIMIT_IN_MB", "1024")
    assert host_limit_from_env() == 1024 * MiB
    monkeypatch.setenv("TF_GPU_HOST_MEM_LIMIT_IN_MB", "lots")
    with pytest.raises(ValueError, match="TF_GPU_HOST_MEM_LIMIT_IN_MB"):
        host_limit_from_env()


def test_max_overhead_bounds_the_batch():
    # A late trigger (g1) and 1 ms launch overhead per op: an op takes d + 1 ms with
    # d = B/4 ms, the copy back d; g2 waits for it, so overhead = d / (5 (d + 1)) = B / (5B + 20)
    # which grows with B. Peak 3 x 1000B bytes, so memory alone allows B = 10 in 30000 bytes.
    dev = dataclasses.replace(TOY, memory_bytes=30000, launch_overhead_s=1 * MS)
    g = toy(trigger=G + "g1")
    assert simulate(g, dev, 4).overhead == pytest.approx(4 / 40)
    assert max_batch_size(g, dev, "none") == 10
    assert max_batch_size(g, dev, "none", max_overhead=0.11) == 4      # B <= 4.89
    assert max_batch_size(g, dev, "none", max_overhead=0.13) == 7      # B <= 7.43
    assert max_batch_size(g, dev, "none", max_overhead=0.0) == 0


def test_save_on_cpu_copies_block_compute():
    # Same swap as the prefetching case (trigger b), but synchronous: the copy out runs on
    # the compute stream after b [2, 3], c [3, 4], the copy back [4, 5], g1 [5, 6], g2 [6, 7].
    # 7 ms instead of 5: the two copies are fully exposed.
    s = simulate(sync_copies(toy(trigger="b")), TOY, 4, timeline=True)
    assert s.step_time == pytest.approx(7 * MS)
    assert s.overhead == pytest.approx(0.4)
    asyn = simulate(toy(trigger="b"), TOY, 4)
    assert asyn.step_time == pytest.approx(5 * MS)   # asynchronous: hidden


def test_copy_latency_and_contention():
    # 0.5 ms latency per copy: the copy out of a runs [1, 2.5]; the copy back (trigger b, at 2)
    # waits for it, runs [2.5, 4.0]: still before g2 at 4, so no stall, but it is later.
    lat = dataclasses.replace(TOY, copy_latency_s=0.5 * MS)
    s = simulate(toy(trigger="b"), lat, 4, timeline=True)
    assert s.end["lms/swapout/a_0"] == pytest.approx(2.5 * MS)
    assert s.end["lms/swapin/a_0/0"] == pytest.approx(4.0 * MS)
    # Duplex contention: a copy that starts while the other direction is busy runs at half
    # speed (duplex_efficiency 0.5): swap-in triggered at a's end (1 ms) while the copy out
    # [1, 2] is busy: it takes 2 ms, [1, 3], after waiting for the copy out... which it reads,
    # so it starts at 2 when the copy out has ended: uncontended, [2, 3].
    half = dataclasses.replace(TOY, duplex_efficiency=0.5)
    s = simulate(toy(trigger="a"), half, 4, timeline=True)
    assert (s.start["lms/swapin/a_0/0"], s.end["lms/swapin/a_0/0"]) == \
        pytest.approx((2 * MS, 3 * MS))
    # Two swaps: b's copy out [2, 3] (b ends at 2) and a's copy back (trigger b) both start at
    # 2 in opposite directions. The simulator makes one pass in schedule order, so the copy it
    # reaches second (a's copy back) pays: 2 ms, [2, 4]; b's copy back then waits for the
    # host->device stream: [4, 5], and c starts at 5.
    g = toy(trigger="b")
    insert_swap(g, "b:0", ["c"], None)
    s = simulate(g, half, 4, timeline=True)
    assert (s.start["lms/swapout/b_0"], s.end["lms/swapout/b_0"]) == pytest.approx((2 * MS, 3 * MS))
    assert (s.start["lms/swapin/a_0/0"], s.end["lms/swapin/a_0/0"]) == \
        pytest.approx((2 * MS, 4 * MS))
    assert s.start["c"] == pytest.approx(5 * MS)


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, "8"])
def test_bad_batch_sizes_name_the_option(bad):
    with pytest.raises(ValueError, match="batch_size"):
        simulate(toy(), TOY, bad)
    with pytest.raises(ValueError, match="batch_size"):
        plan(toy(), "lmskit", TOY, bad)


def test_bad_device_and_search_options_name_the_option():
    for field, value in (("h2d_bandwidth", 0), ("d2h_bandwidth", -1.0), ("flops", 0),
                         ("memory_bandwidth", -5), ("compute_efficiency", 0),
                         ("copy_latency_s", -1e-6), ("host_memory_bytes", 0)):
        with pytest.raises(ValueError, match=field):
            dataclasses.replace(TOY, **{field: value})
    with pytest.raises(ValueError, match="reserve_bytes"):
        dataclasses.replace(TOY, reserve_bytes=TOY.memory_bytes)
    with pytest.raises(ValueError, match="max_overhead"):
        max_batch_size(toy(), TOY, "none", max_overhead=-0.1)
    with pytest.raises(ValueError, match="budget"):
        simulate(toy(), TOY, 4, budget=-1)
