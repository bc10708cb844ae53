"""Swapping with data parallelism, for real (seed 004: LMS with distributed deep learning).

data_parallel_step runs one training step of a captured (and usually swap-rewritten) Graph on
several replicas with tf.distribute.MirroredStrategy:
1. the global batch is split evenly, one slice per replica;
2. each replica runs the graph's forward and backward pass (no update ops) with its swap-outs on
   a host device and its swap-ins and compute on its own device;
3. the strategy's all-reduce averages the gradients (MEAN: the loss is a batch mean, so the
   average of per-replica gradients is the gradient of the global batch);
4. the captured optimizer update runs once, reading the averaged gradients.
compare_with_single_device runs the same step on one device at the global batch from the same
weights and reports how far the two sets of weights are apart.

On a CPU-only machine the replicas are the two logical CPUs lmskit.configure_devices made, and
each replica's "host" is the other one, so every swap is a real cross-device copy.
Assumptions: equal slices (the global batch divides by the number of replicas); no layer whose
forward pass depends on the whole batch (BatchNorm's batch statistics differ per replica, as
they do in any data-parallel run without synchronised BatchNorm).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from .graph import Graph
from .rules.common import is_swap
from .tfrun import TFStep, read_variables, write_variables


def replica_devices() -> list[str]:
    """Two replicas: two GPUs when there are, else the two logical CPUs."""
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) >= 2:
        return [d.name for d in gpus[:2]]
    cpus = tf.config.list_logical_devices("CPU")
    if len(cpus) < 2:
        raise RuntimeError("need two logical devices for two replicas: call "
                           "lmskit.configure_devices() before TensorFlow runs its first op")
    return [d.name for d in cpus[:2]]


def _host_for(device: str, devices: list[str]) -> str:
    if "GPU" in device.upper():
        return "/device:CPU:0"
    others = [d for d in devices if d != device]
    return others[0]


@dataclass
class DataParallelStep:
    losses: list[float]                 # per replica, on its slice
    gradients: dict[str, np.ndarray]    # averaged, by gradient tensor name
    devices: list[str]
    swap_devices: dict[str, set[str]]   # replica device -> devices its swap nodes are placed on


def data_parallel_step(graph: Graph, inputs, devices: list[str] | None = None
                       ) -> DataParallelStep:
    """One data-parallel training step (module docstring); updates the model's variables."""
    devices = devices or replica_devices()
    n = len(devices)
    batch = int(np.shape(inputs[0])[0])
    if batch % n:
        raise ValueError(f"global batch {batch} does not split evenly over {n} replicas")
    grads = graph.gradients()
    fetch = [graph.loss] + grads
    per_replica = []
    for d in devices:
        place_map = {"device": d, "host": _host_for(d, devices)}
        per_replica.append(TFStep(graph, fetch, place_map=place_map, updates=False))
    strategy = tf.distribute.MirroredStrategy(devices)
    size = batch // n

    def slices(ctx):
        k = ctx.replica_id_in_sync_group
        return tuple(tf.constant(np.asarray(x)[k * size:(k + 1) * size]) for x in inputs)

    dist_inputs = strategy.experimental_distribute_values_from_function(slices)

    def replica_fn(*xs):
        ctx = tf.distribute.get_replica_context()
        k = int(tf.get_static_value(ctx.replica_id_in_sync_group))
        with tf.device(devices[k]):
            outs = per_replica[k]._fn(*xs)
        loss, g = outs[0], list(outs[1:])
        return loss, ctx.all_reduce(tf.distribute.ReduceOp.MEAN, g)

    losses, reduced = strategy.run(replica_fn, args=dist_inputs)
    loss_values = [float(v) for v in strategy.experimental_local_results(losses)]
    averaged = [strategy.experimental_local_results(g)[0] for g in reduced]
    # The update, once, with the averaged gradients standing in for the graph's own (the step
    # also recomputes the loss on the global batch: its output is what runs the updates).
    apply = TFStep(graph, fetch=[], replace=grads)
    apply(*inputs, *[a.numpy() for a in averaged])
    swap_devices = {d: {step.device_of(op.name) for op in step.graph_def.node
                        if op.name in graph.ops and is_swap(graph.ops[op.name])}
                    for d, step in zip(devices, per_replica, strict=True)}
    return DataParallelStep(loss_values, {t: a.numpy() for t, a in zip(grads, averaged,
                                                                        strict=True)},
                            devices, swap_devices)


@dataclass
class Agreement:
    max_abs_diff: float          # largest |w_dp - w_single| over all variables
    max_rel_diff: float          # the same relative to max(|w_single|, 1e-6)
    worst: str                   # the variable where it is largest
    step: DataParallelStep


def compare_with_single_device(original: Graph, rewritten: Graph, inputs) -> Agreement:
    """Run one single-device step of `original` at the global batch and one data-parallel step
    of `rewritten` from the same weights; the model's variables are restored afterwards."""
    start = read_variables(original)
    try:
        TFStep(original)(*inputs)
        single = read_variables(original)
        write_variables(original, start)
        dp = data_parallel_step(rewritten, inputs)
        parallel = read_variables(original)
    finally:
        write_variables(original, start)
    worst, abs_d, rel_d = "", 0.0, 0.0
    for name, a in single.items():
        b = parallel[name]
        if a.dtype.kind not in "fc":
            if not np.array_equal(a, b):
                return Agreement(float("inf"), float("inf"), name, dp)
            continue
        d = np.abs(a.astype(np.float64) - b)
        if d.size and d.max() > abs_d:
            worst, abs_d = name, float(d.max())
        if d.size:
            rel_d = max(rel_d, float((d / np.maximum(np.abs(a), 1e-6)).max()))
    return Agreement(abs_d, rel_d, worst, dp)
