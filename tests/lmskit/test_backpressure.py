"""Allocator back-pressure (Device.alloc_wait_s), worked by hand on a chain whose forward pass
outruns a slow link: TensorFlow's BFC allocator makes the op wait for the swap-out to free its
source, and the step grows; the old rule (any peak over the budget) called it out of memory."""

import dataclasses

import pytest
from lmskit_graphs import MS, TOY, build

from lmskit.planner import max_batch_size
from lmskit.rules.common import insert_swap
from lmskit.simulate import simulate

G = "gradient_tape/"
# Batch 4: "big" tensors [4, 250] float32 = 4000 bytes, "small" [4, 25] = 400 bytes. On TOY an
# element is 1 us, so a, b, c and g2 take 1 ms (1000 elements read or written), g1 0.1 ms; the
# link here moves 1e6 bytes/s, so a's swap-out and swap-in take 4 ms each.
ROWS = [("x", "Placeholder", [], "forward", ("B", 250)),
        ("a", "Relu", ["x"], "forward", ("B", 250)),
        ("b", "Tanh", ["a"], "forward", ("B", 250)),
        ("c", "Neg", ["b"], "forward", ("B", 25)),
        (G + "g1", "Mul", ["c", "c"], "backward", ("B", 25)),
        (G + "g2", "Mul", [G + "g1", "a"], "backward", ("B", 25))]
SLOW = dataclasses.replace(TOY, h2d_bandwidth=1e6, d2h_bandwidth=1e6)
BUDGET = 8000


def chain():
    g = build(ROWS)
    insert_swap(g, "a:0", [G + "g2"], G + "g1")   # a out after a, back in after g1
    return g


def spans(s):
    return {k: (round(s.start[k] / MS, 6), round(s.end[k] / MS, 6)) for k in s.start}


def test_old_rule_calls_the_forward_transient_out_of_memory():
    # a [0,1] is held until its swap-out ends (1 + 4 = 5 ms); at 2 ms c allocates beside a and
    # b: 4000 + 4000 + 400 = 8400 > 8000.
    s = simulate(chain(), SLOW, 4, budget=BUDGET, timeline=True)
    assert (s.oom_op, s.peak_device_bytes) == ("c", 8400)
    assert s.step_time == pytest.approx(10 * MS)   # c [2,3], g1 [3,3.1], in [5,9], g2 [9,10]
    assert s.alloc_wait_time == 0.0


def test_waiting_allocator_fits_it_at_the_computed_slowdown():
    # c waits for a's swap-out to free a at 5 ms (3 ms), then runs [5,6]; g1 [6,6.1]; the
    # swap-in starts at its trigger's end, [6.1,10.1]; g2 [10.1,11.1]. The peak is a + b.
    s = simulate(chain(), dataclasses.replace(SLOW, alloc_wait_s=10.0), 4, budget=BUDGET,
                 timeline=True)
    assert s.fits and s.peak_device_bytes == 8000
    assert s.alloc_wait_time == pytest.approx(3 * MS)
    want = {"a": (0, 1), "b": (1, 2), "lms/swapout/a_0": (1, 5), "c": (5, 6),
            G + "g1": (6, 6.1), "lms/swapin/a_0/0": (6.1, 10.1), G + "g2": (10.1, 11.1)}
    got = spans(s)
    for op, span in want.items():
        assert got[op] == pytest.approx(span), op
    assert s.step_time == pytest.approx(11.1 * MS)     # 1.11x the old rule's 10 ms
    assert s.compute_time == pytest.approx(4.1 * MS)
    assert s.stall_time == pytest.approx(4 * MS)       # g2 waits for the swap-in, not counted
    assert s.overhead == pytest.approx(11.1 / 4.1 - 1)  # twice with the allocator's wait


def test_the_wait_is_bounded():
    # 2 ms is less than the 3 ms c would have to wait: out of memory there, as TF after 10 s.
    s = simulate(chain(), dataclasses.replace(SLOW, alloc_wait_s=0.002), 4, budget=BUDGET)
    assert s.oom_op == "c" and not s.fits


def test_the_wait_fits_a_batch_the_old_rule_refused():
    assert max_batch_size(chain(), SLOW, "none", budget=BUDGET) == 3
    assert max_batch_size(chain(), dataclasses.replace(SLOW, alloc_wait_s=10.0), "none",
                          budget=BUDGET) == 4


def test_nothing_would_free_is_out_of_memory():
    # Without the swap, a is held until g2 (placed after c): no free comes while c waits.
    s = simulate(build(ROWS), dataclasses.replace(SLOW, alloc_wait_s=10.0), 4, budget=BUDGET)
    assert s.oom_op == "c"


def test_back_pressure_changes_nothing_that_fits():
    g = chain()
    a = simulate(g, SLOW, 4, budget=10**6, timeline=True)
    b = simulate(g, dataclasses.replace(SLOW, alloc_wait_s=10.0), 4, budget=10**6, timeline=True)
    assert (a.step_time, a.peak_device_bytes, a.start) == (b.step_time, b.peak_device_bytes,
                                                            b.start)
