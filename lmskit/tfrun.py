"""Run a captured (original or rewritten) Graph in TensorFlow, and check two runs agree bit for bit.

On a CPU-only machine the "device" and "host" places are two logical CPU devices (/CPU:0 and
/CPU:1), so the swap identities really run as cross-device copies. With a GPU they are /GPU:0 and
/CPU:0, and the step can report TF's measured peak GPU memory.

The GraphDef (tfcapture.to_graph_def) is imported inside tf.compat.v1.wrap_function; the step's
inputs and its captured variable handles are mapped onto the original placeholders, so the
rewritten step trains the very same variables.

Assumption: configure_devices() (lmskit.configure_devices) ran before TensorFlow initialised its
runtime; logical devices cannot be added later. Importing lmskit does not do it: it is explicit.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from .graph import Graph, producer_name
from .tfcapture import to_graph_def


def configure_devices() -> None:
    """Split the CPU into two logical devices (device and host stand-ins) when there is no GPU.
    A no-op once TF's runtime has started."""
    if tf.config.list_physical_devices("GPU"):
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        if len(tf.config.get_logical_device_configuration(cpu) or []) < 2:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    except RuntimeError:
        pass   # runtime already initialised: places() will say so


def places() -> dict[str, str]:
    """lmskit place -> TF device for this machine."""
    if tf.config.list_logical_devices("GPU"):
        return {"device": "/device:GPU:0", "host": "/device:CPU:0"}
    if len(tf.config.list_logical_devices("CPU")) < 2:
        raise RuntimeError("only one logical CPU: call lmskit.configure_devices() before "
                           "TensorFlow runs any op (before building the model), so /CPU:1 can "
                           "stand in for the host")
    return {"device": "/device:CPU:0", "host": "/device:CPU:1"}


class TFStep:
    """A runnable training step made from a Graph. Calling it runs one step (variables update)
    and returns {tensor name: numpy array} for the loss, the gradients and the step's outputs."""

    def __init__(self, graph: Graph, fetch: list[str] | None = None,
                 place_map: dict[str, str] | None = None, updates: bool = True,
                 replace: list[str] = ()):
        """place_map: lmskit place -> TF device (default: places()). updates=False imports only
        the ops the fetched tensors need (no update ops: the step computes, trains nothing).
        replace: tensor names the step takes as extra inputs, after its own (e.g. gradients
        averaged elsewhere, for the update ops to apply)."""
        if graph.source is None:
            raise ValueError("graph has no TensorFlow source (was it captured with lmskit?)")
        self.graph = graph
        self.places = place_map or places()
        extra = [graph.loss] + graph.gradients() if fetch is None else list(fetch)
        if updates:
            # The step's own outputs come first: fetching them is what runs the updates.
            self.fetch = list(dict.fromkeys(graph.fetches + extra))
            self.graph_def = to_graph_def(graph, self.places)
        else:
            self.fetch = list(dict.fromkeys(extra))
            self.graph_def = to_graph_def(needed_for(graph, self.fetch), self.places)
        src = graph.source
        gd, fetches, replace = self.graph_def, self.fetch, list(replace)
        kept = {n.name for n in gd.node}
        n_in = len(src.input_names)

        def step(*args):
            g = tf.compat.v1.get_default_graph()
            input_map = {f"{n}:0": a for n, a in zip(src.input_names, args[:n_in], strict=True)}
            input_map.update(zip(replace, args[n_in:], strict=True))
            for external, placeholder in src.captures:
                if placeholder in kept:
                    input_map[f"{placeholder}:0"] = g.capture(external)
            return tf.graph_util.import_graph_def(gd, input_map=input_map,
                                                  return_elements=fetches, name="")

        signature = list(src.input_specs) + [
            tf.TensorSpec(graph.tensors[t].shape(1) if not graph.tensors[t].batched else None,
                          graph.tensors[t].dtype) for t in replace]
        self._fn = tf.compat.v1.wrap_function(step, signature=signature)

    def __call__(self, *inputs) -> dict[str, np.ndarray]:
        out = self._fn(*[tf.convert_to_tensor(x) for x in inputs])
        return {name: v.numpy() for name, v in zip(self.fetch, out, strict=True)}

    def device_of(self, op_name: str) -> str:
        """The device the imported op was placed on (swap identities carry theirs)."""
        return self._fn.graph.get_operation_by_name(op_name).device

    def measure_peak(self, *inputs) -> int | None:
        """TF's measured peak GPU bytes over one step; None without a GPU."""
        if not tf.config.list_logical_devices("GPU"):
            return None
        tf.config.experimental.reset_memory_stats("GPU:0")
        self(*inputs)
        return int(tf.config.experimental.get_memory_info("GPU:0")["peak"])


def needed_for(graph: Graph, fetch: list[str]) -> Graph:
    """A copy of graph holding only the ops the fetched tensors depend on (data and control
    edges): without the update ops, running it trains nothing."""
    keep, stack = set(), [producer_name(t) for t in fetch]
    while stack:
        n = stack.pop()
        if n not in keep:
            keep.add(n)
            stack.extend(graph.predecessors(graph.ops[n]))
    sub = graph.copy()
    sub.ops = {n: op for n, op in sub.ops.items() if n in keep}
    sub.fetches = [t for t in graph.fetches if producer_name(t) in keep]
    sub.invalidate()
    return sub


def runnable(graph: Graph, fetch: list[str] | None = None) -> TFStep:
    """The public way to get a runnable TF step from a (rewritten) Graph. fetch: tensor names to
    return besides the step's outputs (default: the loss and the gradients)."""
    return TFStep(graph, fetch)


def read_variables(graph: Graph) -> dict[str, np.ndarray]:
    return {name: tf.raw_ops.ReadVariableOp(resource=h, dtype=graph.variables[name].dtype).numpy()
            for name, h in graph.source.variables.items()}


def write_variables(graph: Graph, values: dict[str, np.ndarray]) -> None:
    for name, h in graph.source.variables.items():
        tf.raw_ops.AssignVariableOp(resource=h, value=tf.constant(values[name]))


@dataclass
class Equivalence:
    identical: bool
    steps: int
    mismatches: list[str]     # "step k: tensor" for every output or weight that differs
    losses: list[float]


@contextlib.contextmanager
def same_kernels():
    """Turn off Grappler's arithmetic optimizer while comparing. It rewrites chains of
    elementwise ops (Keras builds BatchNorm from them) into reassociated forms, and a swap
    identity in the middle of a chain blocks that rewrite: the two graphs would then run
    different arithmetic, and a last-bit difference says nothing about the swap. Measured here:
    with it on, swapping BatchNorm's inputs changed 109 of a small ResNet's tensors in the last
    bits; with it off, none."""
    before = tf.config.optimizer.get_experimental_options().get("arithmetic_optimization", True)
    tf.config.optimizer.set_experimental_options({"arithmetic_optimization": False})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({"arithmetic_optimization": before})


def equivalent(original: Graph, rewritten: Graph, inputs, steps: int = 1) -> Equivalence:
    """Run `steps` training steps of each graph from the same variable values and compare every
    fetched tensor (loss, gradients) and the final variables bit for bit (same_bits; under
    same_kernels): a NaN loss in both runs is the same answer.
    Variables are restored afterwards, so the model is left as it was."""
    start = read_variables(original)
    fetch = [original.loss] + original.gradients()   # the same names in both graphs
    runs = []
    try:
        with same_kernels():
            for g in (original, rewritten):
                write_variables(original, start)
                step = runnable(g, fetch)
                outs = [step(*inputs) for _ in range(steps)]
                runs.append((outs, read_variables(original)))
    finally:
        write_variables(original, start)
    (outs_a, vars_a), (outs_b, vars_b) = runs
    bad = []
    for k, (a, b) in enumerate(zip(outs_a, outs_b, strict=True)):
        bad += [f"step {k}: {n}" for n in a if not same_bits(a[n], b[n])]
    bad += [f"variable {n}" for n in vars_a if not same_bits(vars_a[n], vars_b[n])]
    return Equivalence(not bad, steps, bad, [float(o[original.loss]) for o in outs_a])


def same_bits(a, b) -> bool:
    """Bit for bit: same dtype, shape and bytes. np.array_equal would call two runs that both
    give NaN different (NaN != NaN) and -0.0 equal to 0.0; the bytes say what the runs did."""
    a, b = np.asarray(a), np.asarray(b)
    return (a.dtype == b.dtype and a.shape == b.shape
            and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())
