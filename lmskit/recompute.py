"""Recomputation (activation checkpointing) as a graph rewrite: `recompute(graph, tensors)`.

Instead of keeping a forward tensor alive until the backward pass reads it, drop it after its
last forward reader and re-run its producer just before each backward reader (Chen et al. 2016's
checkpointing; Checkmate's "rematerialization"). For tensor t and a backward reader c:

    producer(t)'s inputs --> clone of producer(t) --> c          trigger ..control..> clone

- The clone has the producer's type and inputs. An input that is itself dropped (in `tensors`)
  is recomputed too, so dropping a run of tensors re-runs the whole chain back to the nearest
  kept ones (the checkpoints), once per reader.
- Kept inputs stay alive until the clone has run: recomputing t costs its producer's time and
  extends its inputs' lifetimes; it frees t's bytes between the forward and backward passes.
- The trigger is the last op before c in the schedule, so the clone runs just in time and its
  output is not held longer than needed. Clones come after their inputs and the trigger, and
  before c, in one topological order: no cycle.

What can be recomputed: outputs of forward device ops that are deterministic and read data
already on the device (recomputable()). Not inputs, variables, constants, random ops, swaps.
Clones carry attrs recompute_of=<original op>: the simulator counts their time as overhead.
Running the result in TensorFlow is not supported (lmskit.tfrun runs swap rewrites only).
"""

from __future__ import annotations

from .graph import Graph, Op, Tensor, producer_name
from .rules.common import SHAPE_ONLY_TYPES
from .schedule import schedule

PREFIX = "lms/recompute/"
NOT_RECOMPUTABLE = frozenset({"Placeholder", "Const", "VarHandleOp", "ReadVariableOp",
                              "VariableV2", "NoOp"})


def recomputable(graph: Graph, tensor_name: str) -> bool:
    """A forward device op's output that re-running the op gives again, bit for bit."""
    t = graph.tensors[tensor_name]
    op = graph.ops[t.op]
    return (t.variable is None and t.itemsize > 0 and op.phase == "forward"
            and op.device == "device" and "swap_of" not in op.attrs
            and "recompute_of" not in op.attrs and op.type not in NOT_RECOMPUTABLE
            and "Random" not in op.type and not op.type.startswith("Stateful"))


def chain(graph: Graph, tensor_name: str, dropped) -> list[str]:
    """Producer ops to re-run for one tensor, inputs first: the producer and, recursively, the
    producers of its dropped inputs."""
    out: list[str] = []

    def visit(t):
        p = producer_name(t)
        if p in out:
            return
        for i in graph.ops[p].inputs:
            if i in dropped:
                visit(i)
        out.append(p)

    visit(tensor_name)
    return out


def _clone(g: Graph, original: Graph, op_name: str, tag: str, made: dict) -> str:
    """Clone op_name for one reader (tag); returns the clone's name. made: op -> clone name."""
    src = original.ops[op_name]
    name = f"{PREFIX}{op_name}/{tag}"
    inputs = []
    for t in src.inputs:
        p = producer_name(t)
        inputs.append(f"{made[p]}:{t.rsplit(':', 1)[1]}" if p in made else t)
    outputs = [f"{name}:{t.rsplit(':', 1)[1]}" for t in src.outputs]
    tensors = [Tensor(o, name, original.tensors[t].dtype, original.tensors[t].coef,
                      original.tensors[t].const) for o, t in zip(outputs, src.outputs, strict=True)]
    g.add_op(Op(name, src.type, inputs=inputs, outputs=outputs, phase="backward",
                attrs={**src.attrs, "recompute_of": op_name}), tensors)
    made[op_name] = name
    return name


def recompute(graph: Graph, tensors, readers: dict | None = None) -> Graph:
    """A new Graph where each backward reader of each tensor in `tensors` reads a recomputed
    copy (module docstring). readers: tensor -> backward reader names to rewire (default: all
    its backward readers that read data, not only the shape). Raises ValueError naming a tensor
    that cannot be recomputed."""
    dropped = set(tensors)
    for t in dropped:
        if t not in graph.tensors:
            raise ValueError(f"recompute: no tensor {t!r} in the graph")
        if not recomputable(graph, t):
            raise ValueError(f"recompute: tensor {t!r} (op {graph.tensors[t].op}, type "
                             f"{graph.ops[graph.tensors[t].op].type}) cannot be recomputed")
    sched = schedule(graph)
    order, pos = sched.order, sched.position
    g = graph.copy()
    # Group by reader: a reader's clones are shared by the dropped tensors it reads.
    by_reader: dict[str, list[str]] = {}
    for t in sorted(dropped, key=lambda x: pos[producer_name(x)]):
        # Shape-only readers (ShapeN of a conv gradient) need no data: they keep the original,
        # and run early anyway (they depend on forward tensors only).
        targets = (readers or {}).get(t) or [c.name for c in graph.consumers(t)
                                              if c.phase == "backward"
                                              and c.type not in SHAPE_ONLY_TYPES]
        for c in targets:
            by_reader.setdefault(c, []).append(t)
    for c, ts in by_reader.items():
        tag = c.replace("/", ".")
        made: dict[str, str] = {}
        # Just in time: after the device op that precedes the reader in the schedule.
        i = pos[c] - 1
        while i >= 0 and graph.ops[order[i]].device != "device":
            i -= 1
        trigger = order[i] if i >= 0 else None
        for t in ts:
            for p in chain(graph, t, dropped):
                if p not in made:
                    name = _clone(g, graph, p, tag, made)
                    if trigger is not None:
                        g.ops[name].control_inputs.append(trigger)
            new = f"{made[producer_name(t)]}:{t.rsplit(':', 1)[1]}"
            g.ops[c].inputs = [new if x == t else x for x in g.ops[c].inputs]
    g.invalidate()
    schedule(g)   # raises CycleError if a rewrite closed a loop (it must not)
    g.options = {**graph.options, "recomputed": len(dropped)}
    return g


__all__ = ["recompute", "recomputable", "chain", "PREFIX"]
