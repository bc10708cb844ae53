"""The simulator on graphs whose timelines are worked out by hand, and device presets."""

import pytest
from lmskit_graphs import MS, ROWS, TOY, G, build, toy

import lmskit
from lmskit.devices import PRESETS, GiB, custom, get_device
from lmskit.graph import Variable
from lmskit.rules.common import insert_swap
from lmskit.simulate import largest_working_set, op_flops, simulate


def test_no_swap_timeline():
    s = simulate(toy(), TOY, batch_size=4, timeline=True)
    assert [round(s.start[n] / MS, 9) for n in ["a", "b", "c", G + "g1", G + "g2"]] == \
        [0, 1, 2, 3, 4]
    assert s.step_time == pytest.approx(5 * MS) and s.compute_time == pytest.approx(5 * MS)
    # x+a | a+b | a+b+c | a+c+g1 | a+g1+g2 : peak 3 tensors of 4000 bytes
    assert s.peak_device_bytes == 12000 and s.peak_host_bytes == 0
    assert s.overhead == 0 and s.fits


def test_prefetch_in_time_hides_the_copy():
    # swap-out [1, 2] after a; trigger b ends at 2, swap-in [2, 3]; g2 starts at 4 as before.
    s = simulate(toy(trigger="b"), TOY, batch_size=4, timeline=True)
    assert s.start["lms/swapout/a_0"] == pytest.approx(1 * MS)
    assert s.start["lms/swapin/a_0/0"] == pytest.approx(2 * MS)
    assert s.step_time == pytest.approx(5 * MS) and s.stall_time == pytest.approx(0)
    assert s.swapped_bytes == 4000 and s.peak_host_bytes == 4000


def test_late_trigger_stalls_compute():
    # trigger g1 ends at 4: swap-in [4, 5], g2 waits until 5 and ends at 6.
    s = simulate(toy(trigger=G + "g1"), TOY, batch_size=4, timeline=True)
    assert s.end[G + "g2"] == pytest.approx(6 * MS)
    assert s.stall_time == pytest.approx(1 * MS)
    assert s.overhead == pytest.approx(0.2)
    # Device: x,a | a,b (x freed at 1) | b,c (a freed when its copy ends at 2) | c,g1 |
    # g1,swap-in (c freed at 4) | g1,swap-in,g2 at 5.
    t, curve = s.memory
    assert max(curve) == 12000 and s.peak_device_bytes == 12000
    assert curve[t.index(2 * MS) + 1] == 8000      # after a is freed and c allocated


def test_first_out_of_memory_op_and_variables():
    g = toy(trigger=G + "g1")
    assert simulate(g, TOY, 4, budget=10000).oom_op == G + "g2"
    assert simulate(g, TOY, 4, budget=12000).fits
    g.variables["w"] = Variable("w", "float32", (250,), True)
    s = simulate(g, TOY, 4, budget=12000)
    assert s.peak_device_bytes == 13000 and s.oom_op is not None


def test_copies_share_one_stream_per_direction():
    # Half the link speed: a copy takes 2 ms. a ends at 1 -> its copy out runs [1, 3]; b ends
    # at 2 but the device->host stream is busy until 3 -> b's copy out runs [3, 5].
    import dataclasses
    slow = dataclasses.replace(TOY, h2d_bandwidth=2e6, d2h_bandwidth=2e6)
    g = build(ROWS)
    insert_swap(g, "a:0", [G + "g2"], G + "g1")
    insert_swap(g, "b:0", ["c"], "b")
    s = simulate(g, slow, 4, timeline=True)
    assert (s.start["lms/swapout/a_0"], s.end["lms/swapout/a_0"]) == \
        pytest.approx((1 * MS, 3 * MS))
    assert (s.start["lms/swapout/b_0"], s.end["lms/swapout/b_0"]) == \
        pytest.approx((3 * MS, 5 * MS))
    # b's copy back [5, 7], so c starts at 7 instead of 2.
    assert s.start["c"] == pytest.approx(7 * MS)


def test_roofline_flops():
    g = build([("x", "Placeholder", [], "forward", ("B", 8, 8, 3)),
               ("w", "Placeholder", [], "forward", (3, 3, 3, 16)),
               ("conv", "Conv2D", ["x", "w"], "forward", ("B", 8, 8, 16)),
               ("m", "Placeholder", [], "forward", ("B", 32)),
               ("k", "Placeholder", [], "forward", (32, 10)),
               ("mm", "MatMul", ["m", "k"], "forward", ("B", 10))])
    assert op_flops(g, "conv", 2) == 2 * (2 * 8 * 8 * 16) * (3 * 3 * 3)
    assert op_flops(g, "mm", 5) == 2 * 5 * 10 * 32


def test_largest_working_set():
    op, need = largest_working_set(toy(), 4)
    assert (op, need) == (G + "g2", 12000)     # reads g1 and a, writes g2


def test_device_presets():
    assert set(PRESETS) >= {"p100-16gb", "v100-32gb", "h100-80gb-pcie"}
    assert get_device("p100-16gb").memory_bytes == 16 * GiB
    assert get_device("h100-80gb-pcie").h2d_bandwidth == 54e9
    assert get_device("v100-32gb").h2d_bandwidth > get_device("p100-16gb").h2d_bandwidth
    d = custom("mine", memory_gb=8, tflops=1, memory_bandwidth_gbs=100, link_gbs=10)
    assert get_device(d) is d and d.d2h_bandwidth == 10e9
    with pytest.raises(ValueError, match="presets"):
        get_device("tpu")
    assert lmskit.simulate(toy(), "h100-80gb-pcie", 4).fits


def test_figures_show_the_simulated_numbers():
    from lmskit import figures
    from lmskit.schedule import lifetimes

    g = toy(trigger=G + "g1")
    s = simulate(g, TOY, 4, timeline=True)
    fig = figures.timeline(g, s)
    lanes = {tr.name: tr for tr in fig.data if tr.type == "bar"}
    assert list(lanes["host->device"].base) == pytest.approx([4 * MS])
    memory = {tr.name: tr for tr in fig.data if tr.type == "scatter"}
    assert max(memory["device bytes"].y) == pytest.approx(12000)
    assert list(memory["budget"].y) == [s.budget, s.budget]
    lt = lifetimes(g, 4)
    f2 = figures.live_bytes(lt, budget=20000)
    traces = {tr.name: tr for tr in f2.data}
    assert max(traces["device bytes"].y) == pytest.approx(lt.peak)
    assert list(traces["host bytes"].y) == lt.host_bytes.tolist()
    assert list(traces["peak"].x) == [lt.peak_position]
    # the peak's hover lists the tensors live there, largest first
    live = sorted(lt.live_at(lt.peak_position), key=lambda b: -b.bytes)
    assert f"{live[0].tensor}: " in traces["peak"].hovertext
    assert list(traces["budget"].y) == [20000, 20000]
    f3 = figures.policies({"none": simulate(toy(), TOY, 4), "late": s})
    assert list(f3.data[0].text) == ["+0%", "+20%"]
    with pytest.raises(ValueError, match="timeline=True"):
        figures.timeline(g, simulate(g, TOY, 4))
