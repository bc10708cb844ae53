"""The one graph edit every swap rule ends in, and the tests both TFLMS versions share.

insert_swap adds, for tensor t read by consumers C:
    producer --t--> swap-out (Identity on "host") --> swap-in (Identity on "device") --> C
    trigger  ..control..>  swap-in
The swap-out is made once per tensor and shared; each call makes a new swap-in. The copy back
starts only when the trigger has run, which is how the rules choose when to prefetch.
"""

from __future__ import annotations

import bisect

from ..graph import Graph, Op, Tensor

# TFLMS v1 never swaps outputs of these ("atomic" ops: cheap, aliasing or bookkeeping).
# TF2 writes Add as AddV2 and VariableV2 as VarHandleOp/ReadVariableOp; both spellings count.
ATOMIC_TYPES = frozenset({"Const", "Mul", "Add", "AddV2", "Identity", "Assign", "VariableV2",
                          "VarHandleOp", "ReadVariableOp", "Reshape", "Shape", "ShapeN",
                          "Placeholder"})
# Ops that live inside TF1 conditionals and loops; triggers are never taken from them.
CONTROL_FLOW_TYPES = frozenset({"Switch", "Merge", "Enter", "Exit", "NextIteration",
                                "LoopCond"})
# Consumers that read only a tensor's shape, never its data: swapping for them buys nothing.
SHAPE_ONLY_TYPES = frozenset({"Shape", "ShapeN", "Size", "Rank"})
SWAP_PREFIX = "lms/"


def is_swap(op: Op) -> bool:
    return "swap_of" in op.attrs


# TFLMS v2 skips only constants and variables (and small ranks, see v2.v2_candidates).
V2_SKIP_TYPES = frozenset({"Const", "VariableV2", "VarHandleOp", "ReadVariableOp"})


def swappable_tensor(graph: Graph, tensor_name: str, min_rank: int = 1,
                     skip_types=ATOMIC_TYPES) -> bool:
    """Precondition shared by v1 and v2: a real per-step buffer on the device.

    Not a variable view, not resource/variant, rank >= min_rank, produced by a non-swap device
    op whose type is not in skip_types (v1: the atomic types).
    """
    t = graph.tensors[tensor_name]
    op = graph.ops[t.op]
    return (t.variable is None and t.itemsize > 0 and t.rank >= min_rank
            and op.device == "device" and not is_swap(op) and op.type not in skip_types)


def swap_target(op: Op) -> bool:
    """A consumer worth a swap-in: it reads data (not only the shape) and has outputs."""
    return bool(op.outputs) and not is_swap(op) and op.type not in SHAPE_ONLY_TYPES


def valid_trigger(op: Op) -> bool:
    """A trigger is an ordinary device op outside control-flow frames."""
    return op.device == "device" and not is_swap(op) and op.type not in CONTROL_FLOW_TYPES


def _safe(name: str) -> str:
    return name.replace(":", "_")


def swap_out(graph: Graph, tensor_name: str) -> str:
    """Effect: the host copy of tensor_name exists (made once); returns its tensor name."""
    name = f"{SWAP_PREFIX}swapout/{_safe(tensor_name)}"
    if name not in graph.ops:
        src = graph.tensors[tensor_name]
        graph.add_op(Op(name, "Identity", inputs=[tensor_name], outputs=[name + ":0"],
                        device="host", phase=graph.ops[src.op].phase,
                        attrs={"swap_of": tensor_name, "swap": "out"}),
                     [Tensor(name + ":0", name, src.dtype, src.coef, src.const)])
    return name + ":0"


def insert_swap(graph: Graph, tensor_name: str, consumers: list[str], trigger: str | None) -> str:
    """Precondition: consumers read tensor_name; trigger (if any) is an ancestor of every
    consumer, or at a lower topological level, so the new control edge closes no cycle.
    Effect: the consumers read a device copy made from the host copy after `trigger` ran.
    Returns the swap-in op's name."""
    out = swap_out(graph, tensor_name)
    k = 0
    while f"{SWAP_PREFIX}swapin/{_safe(tensor_name)}/{k}" in graph.ops:
        k += 1
    name = f"{SWAP_PREFIX}swapin/{_safe(tensor_name)}/{k}"
    src = graph.tensors[tensor_name]
    first = graph.ops[consumers[0]]
    graph.add_op(Op(name, "Identity", inputs=[out], outputs=[name + ":0"],
                    control_inputs=[trigger] if trigger else [], device="device",
                    phase=first.phase, attrs={"swap_of": tensor_name, "swap": "in"}),
                 [Tensor(name + ":0", name, src.dtype, src.coef, src.const)])
    for c in consumers:
        op = graph.ops[c]
        op.inputs = [name + ":0" if t == tensor_name else t for t in op.inputs]
    graph.invalidate()
    return name


def add_control_edge(graph: Graph, src: str, dst: str) -> None:
    """Precondition: no path dst ~> src. Effect: dst waits for src."""
    op = graph.ops[dst]
    if src not in op.control_inputs:
        op.control_inputs.append(src)
        graph.invalidate()


def in_scopes(name: str, scopes) -> bool:
    return any(name == s.rstrip("/") or name.startswith(s.rstrip("/") + "/") for s in scopes)


def passes_filters(op: Op, incl_scopes=(), excl_scopes=(), incl_types=(), excl_types=()) -> bool:
    """TFLMS's include/exclude filters: excludes win; when includes are given, one must match."""
    if in_scopes(op.name, excl_scopes) or op.type in excl_types:
        return False
    if (incl_scopes or incl_types) and not (in_scopes(op.name, incl_scopes)
                                            or op.type in incl_types):
        return False
    return True


def trigger_ending_before(ends, time, consumer_pos, producer_pos):
    """The last op (by end time) ending at or before `time`, ordered after the producer and
    before the consumer; else the earliest op after the producer."""
    i = bisect.bisect_right(ends, (time, float("inf"), "")) - 1
    while i >= 0:
        _, p, name = ends[i]
        if producer_pos < p < consumer_pos:
            return name
        if p <= producer_pos:
            break
        i -= 1
    for _, p, name in ends:
        if producer_pos < p < consumer_pos:
            return name
    return None
