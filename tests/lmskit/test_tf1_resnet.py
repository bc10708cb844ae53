"""The paper's graph (TF1-style ResNet: FusedBatchNormV3, ResourceApplyMomentum) and capture's
scoping option, on a two-stage, 4-wide instance (the structure, not the size, is under test)."""

import numpy as np
import pytest

import lmskit
from lmskit.rules import topos
from lmskit.tf1_resnet import capture_resnet50


@pytest.fixture(scope="module")
def tiny():
    g = capture_resnet50(image=32, blocks=(1, 1), width=4, classes=4, scoping="minimize")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 4, size=3).astype("int32")
    return g, (x, y)


def test_tf1_style_ops_and_variable_kinds(tiny):
    g, _ = tiny
    types = {op.type for op in g.ops.values()}
    assert {"FusedBatchNormV3", "FusedBatchNormGradV3", "ResourceApplyMomentum"} <= types
    # One Momentum update per trainable variable, each reading its gradient.
    n_trainable = sum(v.kind == "weight" and v.trainable for v in g.variables.values())
    updates = [op for op in g.ops.values() if op.type == "ResourceApplyMomentum"]
    assert len(updates) == n_trainable and all(op.phase == "update" for op in updates)
    # The accumulators are optimizer state even though only raw ops touch them.
    assert sum(v.kind == "optimizer-state" for v in g.variables.values()) == n_trainable


def test_minimize_scoping_counts_the_optimizer_as_backward(tiny):
    g, _ = tiny
    backward = {n for n, op in g.ops.items() if op.phase == "backward"}
    grad = topos.grad_ops(g)
    applies = {n for n, op in g.ops.items() if op.type == "ResourceApplyMomentum"}
    assert backward < grad and applies <= grad
    # BatchNorm's moving averages are made in the model's scope: never grad ops.
    assert not any(g.ops[n].type == "AssignSubVariableOp" for n in grad)
    callback = g.copy()
    callback.scoping = "keras-callback"
    assert topos.grad_ops(callback) == backward
    # The published cleaning: with the update ops in the scope, levels holding backward and
    # update ops keep their backward ops; with the callback's scope they lose them.
    kept = lambda gr: sum(n in topos.for_graph(gr).order for n in backward)  # noqa: E731
    assert kept(g) > kept(callback)


def test_minimize_rewrite_is_bit_identical(tiny):
    g, (x, y) = tiny
    r = lmskit.swap(g)
    assert any(op.attrs.get("swap") == "in" for op in r.ops.values())
    eq = lmskit.equivalent(g, r, (x, y), steps=2)
    assert eq.identical, eq.mismatches
    assert eq.losses[1] < eq.losses[0]   # it trained


def test_scoping_is_checked_by_name():
    from lmskit.tfcapture import capture_step

    with pytest.raises(ValueError, match="scoping"):
        capture_step(lambda x: x, [(None, 2)], scoping="adam_optimizer")
