"""Bad input gets a clear error naming the culprit, never a silent wrong answer: NaN/inf device
fields and budgets, graphs whose edges point at nothing, and a NaN loss compared with itself."""

import dataclasses
import math

import numpy as np
import pytest
from lmskit_graphs import CHAIN, TOY, build, toy

import lmskit
from lmskit.devices import PRESETS, custom
from lmskit.graph import GraphError, Op, Tensor
from lmskit.simulate import simulate

NUMERIC = ("memory_bytes", "flops", "memory_bandwidth", "h2d_bandwidth", "d2h_bandwidth",
           "host_memory_bytes", "allocator_rounding", "compute_efficiency",
           "bandwidth_efficiency", "duplex_efficiency", "launch_overhead_s", "copy_latency_s",
           "reserve_bytes", "alloc_wait_s")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("field", NUMERIC)
def test_non_finite_device_fields_are_refused_by_name(field, value):
    # Every way a Device is made goes through the one check: the constructor (replace), a
    # preset override and the scaled/with_memory helpers.
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(TOY, **{field: value})
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(PRESETS["p100-16gb"], **{field: value})


def test_nan_overhead_no_longer_gives_a_zero_step_time():
    # Before: launch_overhead_s=NaN made every op's time NaN and max() over the end times
    # answered 0.0: a step that takes no time.
    with pytest.raises(ValueError, match="launch_overhead_s"):
        sim_dev = dataclasses.replace(TOY, launch_overhead_s=math.nan)
        simulate(toy(), sim_dev, 4)
    assert simulate(toy(), TOY, 4).step_time > 0


def test_type_factor_and_custom_and_scaled_devices_are_checked():
    with pytest.raises(ValueError, match="type_factor.*Relu"):
        dataclasses.replace(TOY, type_factor=(("Relu", math.nan),))
    with pytest.raises(ValueError, match="seconds per op"):
        dataclasses.replace(TOY, type_factor=(("Relu", (1.0, math.inf)),))
    with pytest.raises(ValueError, match="memory_bytes"):
        custom("x", math.inf, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="flops"):
        custom("x", 16, math.nan, 1.0, 1.0)
    with pytest.raises(ValueError):
        TOY.scaled(math.nan)


def test_ints_too_large_for_a_float_are_refused_by_name():
    with pytest.raises(ValueError, match="memory_bytes"):
        dataclasses.replace(TOY, memory_bytes=10**400)
    with pytest.raises(ValueError, match="budget"):
        simulate(toy(), TOY, 4, budget=10**400)


@pytest.mark.parametrize("budget", [math.nan, math.inf])
def test_non_finite_budget_is_refused_by_name(budget):
    with pytest.raises(ValueError, match="budget"):
        simulate(toy(), TOY, 4, budget=budget)


def test_reading_an_unproduced_tensor_names_the_op_and_the_tensor():
    # Before: a KeyError('ghost') from deep inside the schedule.
    rows = CHAIN[:2] + [("b", "Tanh", ["ghost"], "forward", ("B", 8))]
    with pytest.raises(GraphError, match=r"'b' \(Tanh\) reads tensor 'ghost:0'"):
        build(rows)


def test_dangling_control_input_fetch_and_output_are_named():
    with pytest.raises(GraphError, match="control input 'nowhere'"):
        build(CHAIN[:1] + [("a", "Relu", ["x"], "forward", ("B", 4), ["nowhere"])])
    with pytest.raises(GraphError, match="fetch 'zzz:0'"):
        build(CHAIN, fetches=["zzz:0"])
    with pytest.raises(GraphError, match="loss 'zzz:0'"):
        build(CHAIN, loss="zzz:0")
    g = build(CHAIN)
    with pytest.raises(GraphError, match="'y' \\(Relu\\) reads tensor 'ghost:0'"):
        g.add_op(Op("y", "Relu", inputs=["ghost:0"], outputs=["y:0"]),
                 [Tensor("y:0", "y", "float32", (1,), (0,))])
    assert "y" not in g.ops and "y:0" not in g.tensors     # refused ops leave no trace
    with pytest.raises(GraphError, match="says op 'other' produces it"):
        g.add_op(Op("z", "Relu", inputs=["x:0"], outputs=["z:0"]),
                 [Tensor("z:0", "other", "float32", (1,), (0,))])


def test_a_nan_loss_compared_with_itself_is_identical(captured):
    # Before: np.array_equal(nan, nan) is False, so equivalent(g, g) reported a change.
    g, _, (x, y) = captured["mlp"]
    x = x.copy()
    x[0, 0, 0, 0] = np.nan
    eq = lmskit.equivalent(g, g, (x, y))
    assert math.isnan(eq.losses[0])
    assert eq.identical, eq.mismatches


def test_same_bits_tells_nan_payloads_and_signed_zeros_apart():
    from lmskit.tfrun import same_bits

    assert same_bits(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))
    assert not same_bits(np.array([0.0]), np.array([-0.0]))
    assert not same_bits(np.array([1.0], np.float32), np.array([1.0], np.float64))
    assert not same_bits(np.zeros((2, 3)), np.zeros((3, 2)))
