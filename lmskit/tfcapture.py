"""TensorFlow training step -> lmskit Graph, and lmskit Graph -> TensorFlow GraphDef.

`capture(model, loss, optimizer, input_spec)` builds the usual Keras step (GradientTape forward,
gradients, apply_gradients) and traces it once with tf.function; `capture_step(step, specs)` does
the same for any tf.function training step.

Assumptions:
- The leading dimension of every input is the batch. It is traced as None so the GraphDef runs at
  any batch size; every other dimension must be known.
- Shapes are affine in the batch. TF's own shape inference, run on the GraphDef re-imported with
  the batch fixed at two sizes, gives each dimension's coefficient and constant (no re-trace).
- Phases: ops under a `gradient_tape/` name scope are backward (that is where TF2's GradientTape
  puts them, as TFLMS relied on the optimizer's gradient scope), and so are the tape's top-level
  AddN gradient sums that feed them; the other ops that follow a backward op are update; the
  rest, upstream of the loss or of the backward ops, are forward.
- scoping (SCOPINGS) says which ops TFLMS v1 takes as its optimizer scope (rules.topos.grad_ops):
  "keras-callback" (the default; IBM's Keras callback scopes the gradients only) or "minimize"
  (the published README's and the paper's usage: the scope wraps minimize(), so the update
  ops count as backward too). Phases are the same either way.
- A loss that is not a scalar (a loss function given by name returns one value per example) is
  reduced to its mean, as Keras's compile() does.
- TF1-style FusedBatchNormV3 has a reserve-space output without a static shape; TF's CPU kernel
  makes it a scalar, and so do we (a GPU's cuDNN workspace there is not modelled).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import tensorflow as tf

from .graph import SCOPINGS, Graph, Op, Tensor, Variable, producer_name
from .progress import bar

BACKWARD_SCOPE = "gradient_tape/"
# Two batch sizes at which TF infers shapes; any two distinct sizes pin an affine dimension.
# Odd primes avoid coincidences with kernel sizes and channel counts.
_PROBE_BATCHES = (3, 7)


_INDEX_VECTOR_LEN = 8


def _is_index_vector(t) -> bool:
    return t.dtype in (tf.int32, tf.int64) and t.shape.rank == 1


class CaptureError(ValueError):
    """The step cannot be turned into a Graph (no gradients, unknown shapes, ...)."""


@dataclass
class TFSource:
    """What TensorFlow needs to run a captured graph again."""

    graph_def: tf.compat.v1.GraphDef
    input_names: list[str]               # placeholder op names, in call order
    input_specs: list[tf.TensorSpec]
    captures: list[tuple[object, str]]   # (eager tensor outside, placeholder op name inside)
    variables: dict[str, object] = field(default_factory=dict)   # placeholder name -> tf handle


def capture(model, loss, optimizer, input_spec, name: str = "train_step",
            scoping: str = "keras-callback") -> Graph:
    """Trace one Keras training step (forward, backward, update) into a Graph.

    input_spec: (x_spec, y_spec), each a tf.TensorSpec or a shape tuple (float32 for x, int32
    for y). The leading dimension is the batch and may be None. scoping: "keras-callback" or
    "minimize" (module docstring).
    """
    check_scoping(scoping)
    import keras

    if not model.trainable_variables:
        raise CaptureError(f"model {model.name!r} has no trainable variables: there is no "
                           "backward pass to capture (build the model and unfreeze some layers)")
    loss_fn = keras.losses.get(loss) if isinstance(loss, str) else loss
    opt = keras.optimizers.get(optimizer) if isinstance(optimizer, str) else optimizer
    opt.build(model.trainable_variables)   # slot variables must exist before tracing
    x_spec, y_spec = input_spec
    specs = [_spec(x_spec, tf.float32, "x"), _spec(y_spec, tf.int32, "y")]

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            value = loss_fn(y, model(x, training=True))
            if value.shape.rank != 0:
                # A loss function given by name (or any per-sample loss) returns one value per
                # example; Keras's compile() reduces it to the mean ("sum_over_batch_size").
                value = tf.reduce_mean(value)
        grads = tape.gradient(value, model.trainable_variables)
        if all(g is None for g in grads):
            raise CaptureError("the loss does not depend on any trainable variable")
        opt.apply_gradients([(g, v) for g, v in zip(grads, model.trainable_variables, strict=True)
                             if g is not None])
        return value

    step.__name__ = name
    return capture_step(step, specs, optimizer=opt, scoping=scoping)


def _spec(spec, dtype, name):
    if isinstance(spec, tf.TensorSpec):
        return tf.TensorSpec([None] + list(spec.shape)[1:], spec.dtype, spec.name or name)
    return tf.TensorSpec([None] + list(spec)[1:], dtype, name)


def check_scoping(scoping) -> str:
    if scoping not in SCOPINGS:
        raise ValueError(f"scoping must be one of {SCOPINGS}, got {scoping!r}")
    return scoping


def capture_step(step, input_specs, optimizer=None, scoping: str = "keras-callback") -> Graph:
    """Trace a tf.function training step (returning the loss first) into a Graph.

    optimizer (optional) tells which variables are optimizer state (anything with a `variables`
    list); without it a non-trainable variable that only update ops touch counts as optimizer
    state. scoping: "keras-callback" or "minimize" (module docstring).
    """
    check_scoping(scoping)
    specs = [_spec(s, tf.float32, f"input_{i}") for i, s in enumerate(input_specs)]
    for s in specs:
        if None in list(s.shape)[1:]:
            raise CaptureError(f"input {s.name!r} has shape {list(s.shape)}: only the leading "
                               "(batch) dimension may be None; give the others, e.g. "
                               "tf.TensorSpec([None, 224, 224, 3])")
    if not isinstance(step, tf.types.experimental.PolymorphicFunction):
        step = tf.function(step)
    # Tracing and TF's shape inference (twice) take most of the time: seconds for ResNet-50.
    progress = bar(total=4, desc="capture: trace")
    cf = step.get_concrete_function(*specs)
    progress.update()
    fg = cf.graph
    graph_def = fg.as_graph_def()

    outputs = [t for t in tf.nest.flatten(cf.structured_outputs) if isinstance(t, tf.Tensor)]
    if not outputs:
        raise CaptureError("the step returns nothing; return the loss")
    internal_outputs = fg.outputs
    n_inputs = len(specs)
    input_names = [t.op.name for t in fg.inputs[:n_inputs]]
    captures = [(ext, internal.op.name) for ext, internal in fg.captures]

    # Variables: map captured resource handles to tf.Variables (identity of the handle object).
    # The optimizer's own variables too: an update written with raw ops (ResourceApplyMomentum
    # on a slot's handle, as TF 1's optimizers did) never reads them, so the trace does not
    # list them among its variables.
    known = list(cf.variables)
    if optimizer is not None:
        known += [getattr(v, "_value", v) for v in optimizer.variables]
    by_handle = {id(v.handle): v for v in known}
    var_of_placeholder = {}
    for ext, ph in captures:
        v = by_handle.get(id(ext))
        if v is not None:
            var_of_placeholder[ph] = v

    probe = []
    for b in _PROBE_BATCHES:
        progress.set_description(f"capture: shapes at batch {b}")
        probe.append(_infer_shapes(graph_def, fg, input_names, specs, b))
        progress.update()
    progress.set_description("capture: graph")
    for shapes in probe:
        _fill_reserve_spaces(fg, shapes)

    ops, tensors, unknown = [], [], []
    for tf_op in fg.get_operations():
        op = Op(tf_op.name, tf_op.type,
                inputs=[t.name for t in tf_op.inputs],
                control_inputs=[c.name for c in tf_op.control_inputs],
                outputs=[t.name for t in tf_op.outputs],
                attrs=_plain_attrs(tf_op))
        ops.append(op)
        for t in tf_op.outputs:
            dtype = t.dtype.name
            s0, s1 = probe[0].get(t.name), probe[1].get(t.name)
            if dtype in ("resource", "variant"):
                coef, const = (), ()
            elif (s0 is None or s1 is None) and _is_index_vector(t):
                # BroadcastGradientArgs and friends: data-dependent length, but they hold axes,
                # not data; a few elements is the honest size.
                coef, const = (0,), (_INDEX_VECTOR_LEN,)
            elif s0 is None or s1 is None:
                unknown.append(t.name)
                continue
            else:
                (b0, b1) = _PROBE_BATCHES
                coef = tuple((d1 - d0) // (b1 - b0) for d0, d1 in zip(s0, s1, strict=True))
                const = tuple(d0 - c * b0 for d0, c in zip(s0, coef, strict=True))
            variable = None
            if tf_op.type == "ReadVariableOp":
                variable = producer_name(tf_op.inputs[0].name)
            tensors.append(Tensor(t.name, tf_op.name, dtype, coef, const, variable))
    if unknown:
        shown = ", ".join(unknown[:10]) + (f" and {len(unknown) - 10} more" if len(unknown) > 10
                                            else "")
        raise CaptureError(f"unknown static shapes for {len(unknown)} tensors: {shown}. Give every "
                           "dimension except the batch in the input specs (tf.TensorSpec([None, "
                           "...])) and avoid data-dependent shapes (tf.unique, boolean_mask) in "
                           "the step")

    variables = []
    for ph, v in var_of_placeholder.items():
        variables.append(Variable(ph, v.dtype.name, tuple(v.shape.as_list()), bool(v.trainable)))
    loss = _strip_identity(fg, internal_outputs[0])
    graph = Graph(ops, tensors, variables, loss=loss.name,
                  fetches=[t.name for t in internal_outputs],
                  source=TFSource(graph_def, input_names, specs, captures,
                                  {ph: v.handle for ph, v in var_of_placeholder.items()}))
    graph.scoping = scoping
    assign_phases(graph)
    _assign_variable_kinds(graph)
    progress.update()
    progress.close()
    if optimizer is not None:
        slots = {id(getattr(v, "_value", v).handle) for v in optimizer.variables}
        for ph, v in var_of_placeholder.items():
            graph.variables[ph].kind = "optimizer-state" if id(v.handle) in slots else "weight"

    if not any(op.phase == "backward" for op in graph.ops.values()):
        raise CaptureError("the step computes no gradients: no op sits under a "
                           f"{BACKWARD_SCOPE!r} name scope (compute them with tf.GradientTape "
                           "inside the step)")
    return graph


def _strip_identity(fg, t):
    # The function's output is an Identity (with control deps on the updates) of the loss.
    while t.op.type == "Identity":
        t = t.op.inputs[0]
    return t


def _plain_attrs(tf_op) -> dict:
    """The few attributes the simulator needs for FLOPs, as plain Python values."""
    out = {}
    for key in ("transpose_a", "transpose_b", "adj_x", "adj_y"):
        try:
            out[key] = bool(tf_op.get_attr(key))
        except (ValueError, TypeError):
            pass
    return out


# TF1-style batch norm: the last output ("reserve_space_3") has no static shape, and the
# gradient's two placeholder outputs get a shape from inference that the kernel need not keep.
# What a CPU kernel makes of them depends on which kernels TF picked on this machine (see
# _batch_norm_empty_shapes); cuDNN keeps a small workspace there on a GPU, not modelled.
_RESERVE_SPACE_TYPES = frozenset({"FusedBatchNormV3", "_FusedBatchNormEx"})
_BN_GRAD_TYPES = frozenset({"FusedBatchNormGradV3"})
# Ops whose output has their first input's shape (the gradient code's zeros_like of it).
_SAME_SHAPE_TYPES = frozenset({"ZerosLike", "OnesLike", "Identity", "Snapshot", "StopGradient"})


@functools.cache
def _batch_norm_empty_shapes() -> tuple[tuple, tuple]:
    """The shapes TensorFlow's CPU kernels give FusedBatchNormV3's reserve space (output 5) and
    FusedBatchNormGradV3's two placeholder outputs (3, 4), found by running both once on a
    1x1x1x1 input. TF's own kernels make them a scalar and two (0,); the oneDNN kernels (on by
    default where the CPU has AVX-512 VNNI or newer) make them (0,) and two scalars. Shape
    inference knows neither, and a captured shape must be the one TF computes."""

    @tf.function
    def run(x, scale, offset):  # arguments, not constants: grappler would fold constants
        y = tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=tf.zeros([0]),
                                        variance=tf.zeros([0]), is_training=True)
        g = tf.raw_ops.FusedBatchNormGradV3(
            y_backprop=x, x=x, scale=scale, reserve_space_1=y.reserve_space_1,
            reserve_space_2=y.reserve_space_2, reserve_space_3=y.reserve_space_3,
            is_training=True)
        return y.reserve_space_3, g.reserve_space_4

    with tf.device("/CPU:0"):
        reserve, placeholder = run(tf.ones([1, 1, 1, 1]), tf.ones([1]), tf.zeros([1]))
    return tuple(reserve.shape), tuple(placeholder.shape)


def _fill_reserve_spaces(fg, shapes: dict) -> None:
    """Give FusedBatchNormV3's reserve space, and the gradient's placeholder outputs, the
    shapes this machine's kernels give them, and pass them on to the shape-preserving ops
    that read them (in place)."""
    for op in fg.get_operations():   # a function graph lists ops in a topological order
        for i, t in enumerate(op.outputs):
            if op.type in _BN_GRAD_TYPES and i in (3, 4):
                shapes[t.name] = _batch_norm_empty_shapes()[1]
            elif t.name in shapes:
                continue
            elif op.type in _RESERVE_SPACE_TYPES and i == 5:
                shapes[t.name] = _batch_norm_empty_shapes()[0]
            elif op.type in _SAME_SHAPE_TYPES and op.inputs and op.inputs[0].name in shapes:
                shapes[t.name] = shapes[op.inputs[0].name]


def _infer_shapes(graph_def, fg, input_names, specs, batch) -> dict[str, tuple[int, ...]]:
    """Fully defined shapes of every tensor when the batch is `batch`, by TF's shape inference.

    The GraphDef is re-imported with the inputs' batch fixed. Resource placeholders lose the
    handle data that tells ReadVariableOp its shape, so each ReadVariableOp is replaced by a
    Placeholder of the shape the trace already knows.
    """
    gd = tf.compat.v1.GraphDef()
    gd.CopyFrom(graph_def)
    spec_of = dict(zip(input_names, specs, strict=True))
    for node in gd.node:
        if node.name in spec_of:
            dims = [batch] + list(spec_of[node.name].shape)[1:]
            node.attr["shape"].CopyFrom(tf.compat.v1.AttrValue(
                shape=tf.TensorShape(dims).as_proto()))
        elif node.op == "ReadVariableOp":
            t = fg.get_operation_by_name(node.name).outputs[0]
            if t.shape.is_fully_defined():
                dtype = node.attr["dtype"]
                node.op = "Placeholder"
                del node.input[:]
                node.attr.clear()
                node.attr["dtype"].CopyFrom(dtype)
                node.attr["shape"].CopyFrom(tf.compat.v1.AttrValue(shape=t.shape.as_proto()))
    shapes = {}
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(gd, name="")
        for op in g.get_operations():
            for t in op.outputs:
                if t.shape.is_fully_defined():
                    shapes[t.name] = tuple(t.shape.as_list())
    return shapes


def assign_phases(graph: Graph) -> None:
    """forward / backward / update for every op (see the module docstring)."""
    succ = graph.successors()
    backward = {name for name in graph.ops if name.startswith(BACKWARD_SCOPE)
                or f"/{BACKWARD_SCOPE}" in name}
    after_backward = set()
    stack = list(backward)
    while stack:
        for s in succ[stack.pop()]:
            if s not in backward and s not in after_backward:
                after_backward.add(s)
                stack.append(s)
    # The tape sums the gradients of a tensor read by several ops with a top-level AddN (outside
    # its name scope); one that feeds a backward op is part of the backward pass, not the update.
    between, stack = set(), list(backward)
    while stack:
        for p in graph.predecessors(graph.ops[stack.pop()]):
            if p in after_backward and p not in between:
                between.add(p)
                stack.append(p)
    backward |= between
    after_backward -= between
    # Upstream of the loss or of a backward op (and not after one): forward.
    needed = set()
    stack = [producer_name(graph.loss)] + list(backward)
    while stack:
        op = graph.ops[stack.pop()]
        for p in graph.predecessors(op):
            if p not in needed:
                needed.add(p)
                stack.append(p)
    needed.add(producer_name(graph.loss))
    for op in graph.ops.values():
        if op.name in backward:
            op.phase = "backward"
        elif op.name in needed and op.name not in after_backward:
            op.phase = "forward"
        else:
            op.phase = "update"


def _assign_variable_kinds(graph: Graph) -> None:
    """A non-trainable variable touched only by update ops is optimizer state (slots, step
    counters); trainable ones and those the forward pass reads or writes (BatchNorm moving
    statistics) are weights."""
    users: dict[str, set[str]] = {}
    for op in graph.ops.values():
        for t in op.inputs:
            users.setdefault(producer_name(t), set()).add(op.phase)
    for v in graph.variables.values():
        phases = users.get(v.name, set())
        v.kind = "optimizer-state" if not v.trainable and phases <= {"update"} else "weight"


# -- back to TensorFlow ----------------------------------------------------------------------
def _input_ref(name: str) -> str:
    return name[:-2] if name.endswith(":0") else name


def to_graph_def(graph: Graph, places: dict[str, str] | None = None) -> tf.compat.v1.GraphDef:
    """The Graph as a GraphDef: original NodeDefs with rewired inputs, plus swap identities.

    places maps lmskit places to TF devices, e.g. {"device": "/device:GPU:0",
    "host": "/device:CPU:0"}; only swap nodes get an explicit device (the rest keep TF's choice).
    Swap nodes carry `_grappler_do_not_remove` so the dependency optimizer keeps them.
    """
    places = places or {"device": "/device:CPU:0", "host": "/device:CPU:1"}
    src = graph.source
    original = {n.name: n for n in src.graph_def.node}
    gd = tf.compat.v1.GraphDef()
    gd.versions.CopyFrom(src.graph_def.versions)
    gd.library.CopyFrom(src.graph_def.library)
    for op in graph.ops.values():
        node = gd.node.add()
        if op.name in original:
            node.CopyFrom(original[op.name])
            del node.input[:]
        else:
            dtype = graph.tensors[op.inputs[0]].dtype
            node.name, node.op = op.name, op.type
            node.attr["T"].CopyFrom(tf.compat.v1.AttrValue(type=tf.as_dtype(dtype).as_datatype_enum))
            node.attr["_grappler_do_not_remove"].CopyFrom(tf.compat.v1.AttrValue(b=True))
            node.device = places[op.device]
        node.input.extend(_input_ref(t) for t in op.inputs)
        node.input.extend("^" + c for c in op.control_inputs)
    return gd
