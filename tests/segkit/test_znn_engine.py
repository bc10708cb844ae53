"""segkit.znn's machinery: wait-free sums, the task pool, the FFT cache, Brent's model, the
trainer, and the errors it gives for models it cannot run."""

import threading
import time

import numpy as np
import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

from segkit import znn  # noqa: E402
from segkit.znn.sums import Accumulator  # noqa: E402


def small_model(seed=0, layers=None, shape=(6, 8, 8, 1)):
    keras.utils.set_random_seed(seed)
    layers = layers or [keras.layers.Conv3D(2, (1, 3, 3), activation="relu"),
                        keras.layers.Conv3D(3, (2, 3, 3), activation="tanh")]
    model = keras.Sequential([keras.Input(shape), *layers])
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, *shape)).astype(np.float32)
    y = rng.normal(size=model(x).shape).astype(np.float32)
    return model, x, y


# convergent sums ---------------------------------------------------------------------------
def test_accumulator_sums_from_many_threads_and_reports_completion_once():
    parts, done = 16, []
    acc = Accumulator(parts, "node")

    def contribute(k):
        if k % 2:  # half of them add in place into the taken partial sum (ZNN's add(f, w))
            partial = acc.take()
            value = np.full(1000, float(k)) if partial is None else partial + k
            done.append(acc.add(value))
        else:
            done.append(acc.add(np.full(1000, float(k))))
    threads = [threading.Thread(target=contribute, args=(k,)) for k in range(parts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert done.count(True) == 1
    np.testing.assert_array_equal(acc.result(), np.full(1000, sum(range(parts))))


def test_accumulator_refuses_early_results_and_extra_contributions():
    acc = Accumulator(2, "n7")
    acc.add(np.ones(3))
    with pytest.raises(RuntimeError, match="n7.*1 of 2"):
        acc.result()
    acc.add(np.ones(3))
    with pytest.raises(RuntimeError, match="more than 2"):
        acc.add(np.ones(3))


# the task pool -----------------------------------------------------------------------------
def test_tasks_run_after_their_dependencies_on_two_threads():
    g = znn.TaskGraph()
    log = []
    first = [g.add(f"a{i}", lambda i=i: log.append(f"a{i}")) for i in range(6)]
    join = g.add("join", lambda: log.append("join"), deps=first)
    g.add("last", lambda: log.append("last"), deps=[join])
    records, wall = znn.run(g, threads=2)
    assert log[-2:] == ["join", "last"] and sorted(log[:6]) == [f"a{i}" for i in range(6)]
    end = {r.task.name: r.end for r in records}
    start = {r.task.name: r.start for r in records}
    assert all(start["join"] >= end[f"a{i}"] for i in range(6))
    assert {r.thread for r in records} <= {0, 1} and wall > 0


def test_a_failing_task_is_named_and_the_run_does_not_hang():
    g = znn.TaskGraph()
    a = g.add("fine", lambda: None)
    g.add("broken edge 3->1", lambda: 1 / 0, deps=[a], kind="conv", layer=2)
    with pytest.raises(RuntimeError, match="broken edge 3->1.*conv, layer 2.*ZeroDivision"):
        znn.run(g, threads=2)


def test_an_interrupt_in_a_task_stops_every_thread_and_comes_out_as_itself():
    g = znn.TaskGraph()
    ran = []
    for i in range(50):   # plenty of ready work that must not all run after the interrupt
        g.add(f"busy {i}", lambda i=i: (ran.append(i), time.sleep(0.002)))
    g.add("interrupted", lambda: (_ for _ in ()).throw(KeyboardInterrupt()), estimate=1e9)
    with pytest.raises(KeyboardInterrupt):
        znn.run(g, threads=2)
    assert len(ran) < 50


def test_one_task_per_edge_in_each_direction():
    model, x, y = small_model()
    graph, _ = znn.Network(model, method="direct", granularity="edge").build(x, y)
    kinds = [(t.kind, t.phase, t.layer) for t in graph.tasks]
    # layer 0: 1x2 edges forward, weight gradients only (its input is the net's input)
    assert kinds.count(("conv", "forward", 0)) == 2 and kinds.count(("conv", "backward", 0)) == 0
    assert kinds.count(("wgrad", "update", 0)) == 2
    # layer 1: 2x3 edges forward, 2x3 input-gradient edges, 2x3 weight gradients
    assert kinds.count(("conv", "forward", 1)) == 6 and kinds.count(("conv", "backward", 1)) == 6
    assert kinds.count(("wgrad", "update", 1)) == 6


def test_one_task_per_node_when_grouped():
    # granularity="node": a node's edges run back to back in one task (ZNN's "convolutions
    # converging on the same node ... with temporal locality"): one forward task per output
    # node, one input-gradient task and one weight-gradient task per input node.
    model, x, y = small_model()
    graph, _ = znn.Network(model, method="direct", granularity="node").build(x, y)
    kinds = [(t.kind, t.phase, t.layer) for t in graph.tasks]
    assert kinds.count(("conv", "forward", 0)) == 2 and kinds.count(("conv", "backward", 0)) == 0
    assert kinds.count(("wgrad", "update", 0)) == 1
    assert kinds.count(("conv", "forward", 1)) == 3 and kinds.count(("conv", "backward", 1)) == 2
    assert kinds.count(("wgrad", "update", 1)) == 2
    # a node's task waits for every input node it reads
    node = next(t for t in graph.tasks if t.kind == "conv" and t.layer == 1)
    assert len(node.deps) == 2


def test_auto_granularity_groups_small_edges_only():
    model, _, _ = small_model(shape=(64, 64, 64, 1), layers=[keras.layers.Conv3D(2, 3)])
    net = znn.Network(model)
    spec = net.specs[0]
    assert net.grouped(spec, (8, 8, 8), "direct", 1)          # 2 x 6^3 x 27 flop: microseconds
    assert not net.grouped(spec, (64, 64, 64), "direct", 1)   # 13 Mflop an edge: milliseconds
    assert znn.Network(model, granularity="edge").grouped(spec, (8, 8, 8), "direct", 1) is False
    assert znn.Network(model, granularity="node").grouped(spec, (64, 64, 64), "direct", 1)


def test_granularity_is_checked():
    model, _, _ = small_model()
    with pytest.raises(ValueError,
                       match="granularity must be one of 'auto', 'edge', 'node'.*'edges'"):
        znn.Network(model, granularity="edges")


def test_node_kernels_equal_their_edges_summed_in_order():
    from segkit.znn import kernels

    rng = np.random.default_rng(0)
    xs = rng.normal(size=(3, 2, 6, 7, 8)).astype(np.float32)      # cin, batch, map
    ws = rng.normal(size=(3, 4, 2, 3, 3)).astype(np.float32)      # cin, cout, kernel
    out = np.zeros((2, 5, 5, 6), np.float32)
    kernels.corr_valid_node(xs, ws, 1, out)
    ref = np.zeros_like(out)
    for i in range(3):
        kernels.corr_valid_acc(xs[i], ws[i, 1], ref)
    np.testing.assert_array_equal(out, ref)
    ds = rng.normal(size=(4, 2, 5, 5, 6)).astype(np.float32)      # cout, batch, output map
    gx, ref = np.zeros((2, 6, 7, 8), np.float32), np.zeros((2, 6, 7, 8), np.float32)
    kernels.conv_full_node(ds, ws, 2, gx)
    for j in range(4):
        kernels.conv_full_acc(ds[j], ws[2, j], ref)
    np.testing.assert_array_equal(gx, ref)
    dw = np.zeros((2, 3, 3, 3, 4), np.float32)
    kernels.corr_weight_node(xs[1], ds, 2, 3, 3, dw[:, :, :, 1, :])   # a strided view
    for j in range(4):
        np.testing.assert_array_equal(dw[:, :, :, 1, j], kernels.corr_weight(xs[1], ds[j], 2, 3, 3))
    assert not dw[:, :, :, [0, 2], :].any()


# the FFT cache -----------------------------------------------------------------------------
def test_ffts_are_computed_once_and_reused_by_every_edge():
    model, x, y = small_model()
    net = znn.Network(model, method="fft", granularity="edge")
    net.gradients(x, y, threads=1)
    stats = dict(net.cache.stats)
    # images: 1 + 2 input spectra forward; gradients: 2 + 3 delta spectra backward
    assert stats["image_ffts"] == 8
    # each edge's filter once (2 + 6); layer 1's 6 reused by its input-gradient edges
    assert stats["filter_ffts"] == 8 and stats["filter_reuses"] == 6
    # forward: each edge reads its input's spectrum (2 + 6); backward: each weight-gradient edge
    # reads an image and a gradient spectrum (2 * (2 + 6)), each input-gradient edge of
    # layer 1 a gradient spectrum (6)
    assert stats["image_reuses"] == 8 + 16 + 6
    net.forward(x, threads=1)  # same weights: no new filter FFT
    assert net.cache.stats["filter_ffts"] == 8
    net.step_weights({(1, "kernel"): np.zeros_like(net.kernels[1])})  # a new weight version
    net.forward(x, threads=1)
    assert net.cache.stats["filter_ffts"] == 16


# Brent's model -----------------------------------------------------------------------------
def test_work_span_and_brent_on_a_hand_worked_graph():
    # a(2) -> b(3) -> d(1), a -> c(1) -> d: W = 7, S = 2 + 3 + 1 = 6
    g = znn.TaskGraph()
    a = g.add("a", lambda: None)
    b = g.add("b", lambda: None, deps=[a])
    c = g.add("c", lambda: None, deps=[a])
    d = g.add("d", lambda: None, deps=[b, c])
    cost = {a: 2.0, b: 3.0, c: 1.0, d: 1.0}
    assert znn.work_span(g, cost) == (7.0, 6.0)
    two = znn.brent(7.0, 6.0, 2)
    assert two["predicted"] == pytest.approx(6.5) and two["lower"] == 6.0
    assert two["loose"] == pytest.approx(9.5)
    assert znn.brent(7.0, 6.0, 1)["predicted"] == 7.0
    assert znn.simulate(g, cost, 1) == 7.0 and znn.simulate(g, cost, 2) == 6.0


def test_simulated_schedule_lies_within_brents_bounds_on_a_real_graph():
    model, x, y = small_model(layers=[keras.layers.Conv3D(4, 3, activation="relu"),
                                      keras.layers.Conv3D(4, 3)], shape=(8, 8, 8, 2))
    _, _, info = znn.Network(model).gradients(x, y, threads=1, return_run=True)
    cost = znn.task_costs(info["records"], info["wall"])
    work, span = znn.work_span(info["graph"], cost)
    assert work == pytest.approx(info["wall"], rel=1e-6)
    for p in (1, 2, 4):
        bound = znn.brent(work, span, p)
        simulated = znn.simulate(info["graph"], cost, p)
        assert bound["lower"] - 1e-9 <= simulated <= bound["predicted"] + 1e-9


# training ----------------------------------------------------------------------------------
def test_one_sgd_step_moves_the_keras_weights_by_lr_times_tensorflows_gradient():
    model, x, y = small_model(seed=2)
    before = [w.numpy().copy() for w in model.trainable_weights]
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    ref = tape.gradient(loss, model.trainable_weights)
    trainer = znn.Trainer(model, learning_rate=0.1, momentum=0.5, threads=2)
    trainer.fit([(x, y)], steps=1, progress=False)
    for w0, w, g in zip(before, model.trainable_weights, ref, strict=True):
        np.testing.assert_allclose(w.numpy(), w0 - 0.1 * g.numpy(), rtol=1e-4, atol=1e-6)


def test_trainer_lowers_the_loss_and_pushes_weights_into_the_model():
    model, x, _ = small_model(seed=4)
    teacher, _, _ = small_model(seed=5)  # same architecture: its outputs are reachable targets
    y = teacher(x).numpy()
    trainer = znn.Trainer(model, learning_rate=0.05, momentum=0.9, threads=2)
    losses = trainer.fit(lambda step: (x, y), steps=40, progress=False)
    assert losses[-1] < 0.5 * losses[0]
    np.testing.assert_allclose(model(x).numpy(), trainer.net.forward(x), rtol=1e-4, atol=1e-5)


# errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("layer, words", [
    (lambda: keras.layers.Conv3D(2, 3, padding="same"), "padding"),
    (lambda: keras.layers.Conv3D(2, 3, strides=2), "strides"),
    (lambda: keras.layers.Conv3D(2, 3, activation="softmax"), "softmax"),
    (lambda: keras.layers.Dense(2), "Dense"),
    (lambda: keras.layers.AveragePooling3D(2), "AveragePooling3D"),
])
def test_models_it_cannot_run_are_refused_naming_the_layer(layer, words):
    keras.utils.set_random_seed(0)
    built = layer()
    model = keras.Sequential([keras.Input((6, 6, 6, 1)), built])
    with pytest.raises(ValueError, match=f"{built.name}.*{words}|{words}.*{built.name}"):
        znn.Network(model)


def test_bad_inputs_are_named():
    model, x, y = small_model()
    net = znn.Network(model)
    with pytest.raises(ValueError, match="input of shape"):
        net.gradients(x[..., :0], y)
    with pytest.raises(ValueError, match="target of shape"):
        net.gradients(x, y[:, :1])
    with pytest.raises(ValueError, match="loss 'hinge'"):
        net.gradients(x, y, loss="hinge")
    tiny = keras.Sequential([keras.Input((None, None, None, 1)), keras.layers.Conv3D(1, 3)])
    with pytest.raises(ValueError, match="too small"):
        znn.Network(tiny).forward(np.zeros((1, 2, 5, 5, 1), np.float32))


def test_nan_inputs_targets_and_learning_rates_are_named():
    # NaN in the data came out as a NaN loss and NaN weights, in silence
    model, x, y = small_model()
    net = znn.Network(model)
    bad_x, bad_y = x.copy(), y.copy()
    bad_x[1, 2, 3, 4, 0] = np.nan
    bad_y[0, 0, 0, 0, 1] = np.inf
    with pytest.raises(ValueError, match=r"input contains NaN.*\(1, 2, 3, 4, 0\)"):
        net.gradients(bad_x, y)
    with pytest.raises(ValueError, match="input contains NaN"):
        net.forward(bad_x)
    with pytest.raises(ValueError, match=r"target contains NaN or infinite.*\(0, 0, 0, 0, 1\)"):
        net.gradients(x, bad_y)
    for lr in (np.nan, np.inf, 0.0, "0.1"):
        with pytest.raises(ValueError, match="learning_rate"):
            znn.Trainer(model, learning_rate=lr)
    for momentum in (np.nan, 1.0, "0.5"):
        with pytest.raises(ValueError, match="momentum"):
            znn.Trainer(model, momentum=momentum)


def test_thread_counts_that_are_not_whole_numbers_are_named():
    model, x, y = small_model()
    net = znn.Network(model)
    for threads in (2.5, 0, "2"):
        with pytest.raises(ValueError, match="threads"):
            net.gradients(x, y, threads=threads)


@pytest.mark.parametrize("method", ["direct", "fft"])
@pytest.mark.parametrize("granularity", ["edge", "node"])
def test_a_graph_run_again_sees_each_passs_inputs_and_weights(method, granularity):
    # The network builds a pass's task graph once per input shape and runs it again: each
    # pass must read its own images, targets and weights, and hand back arrays of its own.
    model, x, y = small_model()

    def fresh(x, y):
        return znn.Network(model, method=method, granularity=granularity).gradients(
            x, y, threads=1)

    net = znn.Network(model, method=method, granularity=granularity)
    loss1, first = net.gradients(x, y, threads=2)
    kept = [g.copy() for g in first]
    graph = net.gradients(x, y, threads=2, return_run=True)[2]["graph"]
    assert net.gradients(x, y, threads=1, return_run=True)[2]["graph"] is graph
    x2, y2 = x[::-1].copy(), 2 * y
    loss2, got = net.gradients(x2, y2, threads=2)
    loss_ref, ref = fresh(x2, y2)
    assert loss2 == pytest.approx(loss_ref, rel=1e-6) and loss2 != pytest.approx(loss1)
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(first, kept, strict=True):      # the first pass's arrays were not reused
        np.testing.assert_array_equal(a, b)
    # new weights: the same graph uses them (the FFT filters of the new version too)
    net.step_weights({(1, "kernel"): np.full_like(net.kernels[1], 0.05)})
    _, after = net.gradients(x, y, threads=2)
    net.push()
    _, ref = fresh(x, y)
    for a, b in zip(after, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # another batch size is another graph; the forward pass equals Keras's
    np.testing.assert_allclose(net.forward(x[:1], threads=2), model(x[:1]).numpy(),
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="target of shape"):
        net.gradients(x, y[:, :1], threads=1)
