"""Proves a swap rewrite safe, or says exactly which op breaks it.

A rewrite is safe when
1. no node is lost: every original op is still there, same type, same outputs, and keeps its
   control inputs (it may gain some: triggers and syncs);
2. every data dependency is preserved: each input of each original op, followed back through swap
   identities, is the tensor it read before, at the same position;
3. the only new ops are swap identities (swap-out on "host", swap-in on "device") whose chains
   end at the tensor they name;
4. no cycle: the rewritten graph still has a topological order.
2 and 3 imply TFLMS v1's own equivalence test (every op reachable before is still reachable):
each original edge became a path through identities.
"""

from __future__ import annotations

from ..graph import Graph, producer_name
from ..schedule import CycleError, schedule


class RewriteError(ValueError):
    """The rewrite would change what the step computes or could not run."""


def resolve(graph: Graph, tensor: str) -> str:
    """Follow swap identities back to the tensor they copy."""
    seen = 0
    while True:
        op = graph.ops.get(producer_name(tensor))
        if op is None or "swap_of" not in op.attrs:
            return tensor
        tensor = op.inputs[0]
        seen += 1
        if seen > len(graph.ops):
            raise RewriteError(f"swap identities loop at {tensor}")


def check(original: Graph, rewritten: Graph) -> bool:
    """Raise RewriteError on the first violation; True when all four properties hold."""
    for name, op in original.ops.items():
        new = rewritten.ops.get(name)
        if new is None:
            raise RewriteError(f"op {name!r} was lost")
        if new.type != op.type or new.outputs != op.outputs:
            raise RewriteError(f"op {name!r} changed type or outputs")
        if len(new.inputs) != len(op.inputs):
            raise RewriteError(f"op {name!r} has {len(new.inputs)} inputs, had {len(op.inputs)}")
        for i, (before, after) in enumerate(zip(op.inputs, new.inputs, strict=True)):
            if resolve(rewritten, after) != before:
                raise RewriteError(f"input {i} of {name!r} reads {after!r}, which is not a copy "
                                   f"of {before!r}")
        lost = set(op.control_inputs) - set(new.control_inputs)
        if lost:
            raise RewriteError(f"op {name!r} lost control inputs {sorted(lost)}")
    for name, op in rewritten.ops.items():
        if name in original.ops:
            continue
        role = op.attrs.get("swap")
        if role is None or op.type != "Identity" or len(op.inputs) != 1:
            raise RewriteError(f"new op {name!r} is not a swap identity")
        if op.device != ("host" if role == "out" else "device"):
            raise RewriteError(f"swap-{role} {name!r} is placed on {op.device!r}")
        if resolve(rewritten, op.outputs[0]) != op.attrs["swap_of"]:
            raise RewriteError(f"swap {name!r} does not copy {op.attrs['swap_of']!r}")
        if op.attrs["swap_of"] not in original.tensors:
            raise RewriteError(f"swap {name!r} copies unknown tensor {op.attrs['swap_of']!r}")
    try:
        schedule(rewritten)
    except CycleError as e:
        raise RewriteError(f"trigger edges closed a cycle: {e}") from None
    return True
