"""Capture: phases, shapes against what TensorFlow actually computes, variables, bad input."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import lmskit
from lmskit.tfcapture import CaptureError, to_graph_def


def test_phases_follow_the_tape_scope(captured):
    g, _, _ = captured["mlp"]
    for op in g.ops.values():
        if op.name.startswith("gradient_tape/"):
            assert op.phase == "backward"
    fwd = {op.type for op in g.ops.values() if op.phase == "forward"}
    upd = {op.type for op in g.ops.values() if op.phase == "update"}
    assert {"MatMul", "Relu"} <= fwd
    assert "AssignVariableOp" in upd or "AssignSubVariableOp" in upd
    # The loss is computed in the forward phase.
    assert g.producer(g.loss).phase == "forward"


@pytest.mark.parametrize("name", ["mlp", "lenet", "small_resnet", "unet3d"])
def test_symbolic_shapes_match_tensorflow_at_other_batches(captured, name):
    """Every tensor's predicted shape at batch 5 (captured at batch None, probed at 3 and 7)
    equals the shape of the array TensorFlow returns for it."""
    g, _, (x, y) = captured[name]
    names = [t for t, tensor in g.tensors.items()
             if tensor.itemsize and g.ops[tensor.op].type not in ("BroadcastGradientArgs",)]
    step = lmskit.runnable(g, fetch=names)
    start = lmskit.tfrun.read_variables(g)
    try:
        out = step(x, y)
    finally:
        lmskit.tfrun.write_variables(g, start)
    for t in names:
        assert tuple(out[t].shape) == g.tensors[t].shape(5), t
        assert out[t].nbytes == g.tensors[t].bytes(5), t


def test_variables_are_persistent_and_kinds_are_known(captured):
    g, model, _ = captured["mlp"]
    weights = [v for v in g.variables.values() if v.kind == "weight"]
    slots = [v for v in g.variables.values() if v.kind == "optimizer-state"]
    assert sum(v.bytes for v in weights) == sum(int(np.prod(w.shape)) * 4
                                                for w in model.trainable_variables)
    # Adam keeps two slots per weight (m, v) plus its step counter and learning rate.
    assert len(slots) >= 2 * len(model.trainable_variables)
    reads = [t for t in g.tensors.values() if t.variable is not None]
    assert reads and all(g.ops[t.op].type == "ReadVariableOp" for t in reads)
    assert {g.kind(t.name) for t in reads} <= {"weight", "optimizer-state"}


def test_gradients_are_the_tensors_the_optimizer_reads(captured):
    g, model, _ = captured["lenet"]
    grads = g.gradients()
    shapes = sorted(g.tensors[t].shape(5) for t in grads)
    assert shapes == sorted(tuple(w.shape) for w in model.trainable_variables)


def test_graph_def_roundtrip_keeps_every_node(captured):
    g, _, _ = captured["mlp"]
    gd = to_graph_def(g)
    assert {n.name for n in gd.node} == set(g.ops)


def test_model_without_trainable_variables_is_refused():
    x = keras.Input((4,))
    model = keras.Model(x, keras.layers.Dense(2)(x))
    model.trainable = False
    with pytest.raises(CaptureError, match="no trainable variables"):
        lmskit.capture(model, "mse", "sgd", ((None, 4), (None, 2)))


def test_step_without_gradients_is_refused():
    v = tf.Variable(1.0)

    @tf.function
    def step(x):
        loss = tf.reduce_sum(x) * v
        v.assign_add(1.0)
        return loss

    with pytest.raises(CaptureError, match="no gradients"):
        lmskit.capture_step(step, [tf.TensorSpec([None, 3])])


def test_unknown_input_dimension_names_the_input_and_the_fix():
    v = tf.Variable(tf.ones([3]))

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(x * v)
        v.assign_sub(tape.gradient(loss, v))
        return loss

    with pytest.raises(CaptureError, match=r"'images'.*tf.TensorSpec\(\[None, 224"):
        lmskit.capture_step(step, [tf.TensorSpec([None, None, 3], name="images")])


def test_data_dependent_shape_is_named():
    v = tf.Variable(tf.ones([4]))

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            kept = tf.boolean_mask(x * v, x[0] > 0, axis=1)
            loss = tf.reduce_sum(kept)
        v.assign_sub(tape.gradient(loss, v))
        return loss

    with pytest.raises(CaptureError, match="unknown static shapes.*boolean_mask"):
        lmskit.capture_step(step, [tf.TensorSpec([None, 4])])


def test_capture_step_variant_matches_keras_loss(captured):
    """The original graph, run by lmskit, computes the loss Keras computes eagerly."""
    g, model, (x, y) = captured["small_resnet"]
    start = lmskit.tfrun.read_variables(g)
    try:
        ours = lmskit.runnable(g)(x, y)[g.loss]
    finally:
        lmskit.tfrun.write_variables(g, start)
    lossf = keras.losses.SparseCategoricalCrossentropy()
    theirs = float(lossf(y, model(x, training=True)))
    np.testing.assert_allclose(float(ours), theirs, rtol=1e-5)


def test_backward_addn_gradient_sums_are_backward(captured):
    """The tape sums the gradients of a tensor read twice (the residual adds) with a top-level
    AddN outside gradient_tape/; those that feed backward ops are backward, so no update op
    sits upstream of a backward op."""
    g, _, _ = captured["small_resnet"]
    sums = [op for op in g.ops.values() if op.type == "AddN"
            and not op.name.startswith("gradient_tape/")
            and any(c.phase == "backward" for t in op.outputs for c in g.consumers(t))]
    assert sums and all(op.phase == "backward" for op in sums)
    for op in g.ops.values():
        if op.phase == "update":
            assert all(c.phase != "backward" for t in op.outputs for c in g.consumers(t)), op.name


def _fused_bn_step():
    """A TF1-style step: conv -> FusedBatchNormV3 -> relu -> dense, plain SGD on variables."""
    tf.random.set_seed(3)
    w = tf.Variable(tf.random.normal([3, 3, 3, 4]), name="w")
    gamma, beta = tf.Variable(tf.ones([4])), tf.Variable(tf.zeros([4]))
    wd = tf.Variable(tf.random.normal([4 * 6 * 6, 3]) * 0.1)
    variables = [w, gamma, beta, wd]

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            h = tf.nn.conv2d(x, w, 1, "SAME")
            h, _, _ = tf.compat.v1.nn.fused_batch_norm(h, gamma, beta, is_training=True)
            logits = tf.reshape(tf.nn.relu(h), [-1, 4 * 6 * 6]) @ wd
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        for v, gr in zip(variables, tape.gradient(loss, variables), strict=True):
            v.assign_sub(0.1 * gr)
        return loss

    return step


def test_fused_batch_norm_v3_graph_captures_and_swaps_bit_identically():
    g = lmskit.capture_step(_fused_bn_step(), [tf.TensorSpec([None, 6, 6, 3]),
                                                tf.TensorSpec([None], tf.int32)])
    bn = [op for op in g.ops.values() if op.type == "FusedBatchNormV3"]
    assert len(bn) == 1 and bn[0].phase == "forward"
    # the reserve space is empty on a CPU: a scalar from TF's own kernel, (0,) from oneDNN's
    assert g.tensors[bn[0].outputs[5]].shape(5) in {(), (0,)}
    assert any(op.type == "FusedBatchNormGradV3" and op.phase == "backward"
               for op in g.ops.values())
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 6, 6, 3)).astype("float32")
    y = rng.integers(0, 3, size=5).astype("int32")
    # Predicted shapes at batch 5 are the shapes TF computes.
    names = [t for t, tensor in g.tensors.items() if tensor.itemsize]
    start = lmskit.tfrun.read_variables(g)
    try:
        out = lmskit.runnable(g, fetch=names)(x, y)
    finally:
        lmskit.tfrun.write_variables(g, start)
    assert all(tuple(out[t].shape) == g.tensors[t].shape(5) for t in names)
    r = lmskit.swap(g)
    assert any(op.attrs.get("swap_of") == bn[0].inputs[0] for op in r.ops.values())
    assert lmskit.equivalent(g, r, (x, y)).identical


def test_loss_given_by_name_is_reduced_to_the_mean_as_keras_does():
    import mlsys_datasets as zoo

    model = zoo.mlp(hidden=8)
    g = lmskit.capture(model, "sparse_categorical_crossentropy", keras.optimizers.SGD(0.0),
                       ((None, 28, 28, 1), (None,)))
    assert g.tensors[g.loss].rank == 0
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 28, 28, 1)).astype("float32")
    y = rng.integers(0, 10, size=4).astype("int32")
    ours = float(lmskit.runnable(g)(x, y)[g.loss])
    model.compile(loss="sparse_categorical_crossentropy")
    theirs = float(model.compute_loss(x, y, model(x, training=True)))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
