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
