"""Rewrites run for real in TensorFlow: bit-identical loss, gradients and weights."""

import pytest
import tensorflow as tf

import lmskit
from lmskit.rules.common import is_swap

OPTION_SETS = [
    {},
    dict(ctrld_strategy="direct_order"),
    dict(fuse_swapins=True, lb=2, ub=20),
    dict(n_tensors=2),
    dict(swap_branches=True, branch_threshold=2),
    dict(swapout_threshold=3, swapin_ahead=2, swapin_groupby=1),
    dict(swapout_threshold=1, swapin_ahead=1, swapin_groupby=0, sync_mode=3,
         serialization=[5, 6]),
]


@pytest.mark.parametrize("name", ["mlp", "lenet", "small_resnet", "unet3d"])
@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: ",".join(o) or "defaults")
def test_rewrite_is_bit_identical(captured, name, options):
    g, _, (x, y) = captured[name]
    r = lmskit.swap(g, **options)
    assert any(is_swap(op) for op in r.ops.values()), "the rewrite swapped nothing"
    eq = lmskit.equivalent(g, r, (x, y), steps=1)
    assert eq.identical, eq.mismatches


def test_several_training_steps_give_identical_weights(captured):
    g, _, (x, y) = captured["small_resnet"]
    r = lmskit.swap(g, swapout_threshold=2, swapin_ahead=1, swapin_groupby=0)
    eq = lmskit.equivalent(g, r, (x, y), steps=3)
    assert eq.identical, eq.mismatches
    assert eq.losses[2] < eq.losses[0]     # it really trained


def test_equivalence_detects_a_changed_step(captured):
    """The comparison can fail: a graph that reads a different tensor is caught."""
    g, _, (x, y) = captured["mlp"]
    bad = g.copy()
    relu = next(op for op in bad.ops.values() if op.type == "Relu")
    reader = next(c for c in bad.consumers(relu.outputs[0]) if c.phase == "forward")
    reader.inputs = [relu.inputs[0] if t == relu.outputs[0] else t for t in reader.inputs]
    bad.invalidate()
    assert not lmskit.equivalent(g, bad, (x, y)).identical


def test_swap_nodes_sit_on_the_host_device_and_survive(captured):
    g, _, _ = captured["lenet"]
    assert len(tf.config.list_logical_devices("CPU")) == 2
    r = lmskit.swap(g)
    step = lmskit.runnable(r)
    outs = [n for n, op in r.ops.items() if op.attrs.get("swap") == "out"]
    ins = [n for n, op in r.ops.items() if op.attrs.get("swap") == "in"]
    assert outs and ins
    assert all(step.device_of(n).endswith("CPU:1") for n in outs)
    assert all(step.device_of(n).endswith("CPU:0") for n in ins)
    node = next(n for n in step.graph_def.node if n.name == outs[0])
    assert node.attr["_grappler_do_not_remove"].b


# -- real-run checks: what TensorFlow ran (executed graphs and step stats) -----------------------

def test_run_checks_pass_on_real_rewrites(captured):
    from lmskit import runcheck

    g, _, (x, y) = captured["lenet"]
    for r in (lmskit.swap(g), lmskit.swap(g, swapout_threshold=3, swapin_ahead=2,
                                          swapin_groupby=0)):
        c = runcheck.run_checks(r, (x, y))
        assert c.ok, c.problems
        assert c.swap_ins > 0 and c.ran > 0
        # Triggers really ran before their swap-ins (microseconds from trigger end to start).
        assert c.trigger_lead_us and min(c.trigger_lead_us.values()) >= 0
        assert c.measured_peak is None     # no GPU here: nothing measured


def test_run_checks_fail_a_rewrite_whose_swap_ins_nobody_reads(captured):
    """Swap nodes inserted but no reader rewired: checker.check and equivalent accept it (it
    computes the same); the real-run check does not."""
    from lmskit import runcheck
    from lmskit.rules import checker, common, v1

    g, _, (x, y) = captured["lenet"]
    noop = g.copy()
    for t, readers, trig in v1.plan(g):
        common.insert_swap(noop, t, readers, trig)
    for op in noop.ops.values():
        if not common.is_swap(op):
            op.inputs = [checker.resolve(noop, t) for t in op.inputs]
    noop.invalidate()
    assert lmskit.check(g, noop)
    c = runcheck.run_checks(noop, (x, y))
    assert not c.ok and c.ran == 0
    assert any("read by nobody" in p for p in c.problems)


@pytest.mark.gpu
def test_measured_peak_beside_the_simulated_one(captured):
    if not tf.config.list_logical_devices("GPU"):
        pytest.skip("no GPU: TFStep.measure_peak needs one")
    from lmskit import runcheck

    g, _, (x, y) = captured["small_resnet"]
    c = runcheck.run_checks(lmskit.swap(g), (x, y))
    assert c.ok, c.problems
    assert c.measured_peak > 0 and c.simulated_peak > 0
    # TF keeps extra workspace and rounds allocations up; within a factor of 4 both ways.
    assert 0.25 < c.measured_peak / c.simulated_peak < 4


# -- data parallel: two replicas with tf.distribute ----------------------------------------------

def test_data_parallel_rewrite_matches_one_device_at_the_global_batch(captured):
    import numpy as np

    from lmskit import distributed
    from lmskit.tfrun import TFStep

    g, _, (x, y) = captured["lenet"]
    x, y = np.concatenate([x, x[:1]]), np.concatenate([y, y[:1]])   # 6 = 2 x 3
    r = lmskit.swap(g)
    a = distributed.compare_with_single_device(g, r, (x, y))
    # Each replica ran its own swaps, on its device and the other as its host.
    assert a.step.devices == ["/device:CPU:0", "/device:CPU:1"]
    assert all(len(devs) == 2 for devs in a.step.swap_devices.values())
    # Averaged gradients = TensorFlow's gradients of the global batch (independent reference:
    # the original graph, one device, no update).
    ref = TFStep(g, updates=False)(x, y)
    for t, avg in a.step.gradients.items():
        np.testing.assert_allclose(avg, ref[t], rtol=1e-4, atol=1e-6, err_msg=t)
    # ... and not one replica's alone: the halves really differ.
    half = TFStep(g, updates=False)(x[:3], y[:3])
    assert any(np.abs(half[t] - ref[t]).max() > 1e-3 for t in a.step.gradients)
    np.testing.assert_allclose(np.mean(a.step.losses), ref[g.loss], rtol=1e-5)
    # Weights after the step: float32 summation order differs, so not bit for bit.
    assert a.max_abs_diff < 1e-5, (a.worst, a.max_abs_diff)
