"""TFLMS version 2 (ISMM 2019): swapping decided on topological levels of the whole graph.

    far_consumers (swapout_threshold) -> group_consumers (swapin_groupby) -> level_trigger
    (swapin_ahead) -> common.insert_swap; then sync_swapouts / sync_swapins (sync_mode) and
    serialize_levels (serialization).

Every new edge goes from a lower to a higher level of the original graph, so no rule here can
close a cycle. -1 ("auto") values are resolved by planner.autotune_v2 before these run.
"""

from __future__ import annotations

from ..graph import Graph, producer_name
from ..schedule import schedule
from .common import (
    CONTROL_FLOW_TYPES,
    V2_SKIP_TYPES,
    add_control_edge,
    swap_target,
    swappable_tensor,
    valid_trigger,
)

DEFAULTS = dict(swapout_threshold=-1, swapin_ahead=-1, swapin_groupby=-1, sync_mode=0,
                serialization=())


def v2_candidates(graph: Graph) -> list[str]:
    """Tensors v2 may swap: rank >= 2 (rank <= 1 is never worth a copy), not variables/consts
    (unlike v1, the cheap "atomic" ops' outputs count: Keras builds BatchNorm from Mul/Add).

    Precondition: none. Effect: none. Ordered by producer position."""
    order = schedule(graph).order
    return [t for n in order for t in graph.ops[n].outputs
            if swappable_tensor(graph, t, min_rank=2, skip_types=V2_SKIP_TYPES)]


def far_consumers(graph: Graph, tensor: str, swapout_threshold: int) -> list[str]:
    """Consumers more than swapout_threshold levels after the producer (each gets swapped)."""
    level = schedule(graph).level
    p = level[producer_name(tensor)]
    return [c.name for c in graph.consumers(tensor)
            if swap_target(c) and level[c.name] - p > swapout_threshold]


def group_consumers(graph: Graph, consumers: list[str], swapin_groupby: int) -> list[list[str]]:
    """Consumers within swapin_groupby levels of the first in a group share one swap-in."""
    level = schedule(graph).level
    groups: list[list[str]] = []
    for c in sorted(consumers, key=lambda n: level[n]):
        if groups and level[c] - level[groups[-1][0]] <= swapin_groupby:
            groups[-1].append(c)
        else:
            groups.append([c])
    return groups


def level_trigger(graph: Graph, producer: str, consumer: str, swapin_ahead: int):
    """The trigger: a device op at level (consumer level - swapin_ahead), or the nearest level
    above it with one, but never at or below the producer's level. Lower level than the
    consumer means the edge cannot close a cycle. Prefers an ancestor of the consumer."""
    sched = schedule(graph)
    level = sched.level
    target = level[consumer] - max(swapin_ahead, 1)
    lo = level[producer] + 1
    by_level = _ops_by_level(graph)
    preds = set(graph.predecessors(graph.ops[consumer]))
    for lv in range(max(target, lo), level[consumer]):
        ops = [n for n in by_level.get(lv, ()) if valid_trigger(graph.ops[n])]
        if ops:
            near = [n for n in ops if n in preds]
            return (near or ops)[0]
    return None


def _ops_by_level(graph: Graph) -> dict[int, list[str]]:
    cache = getattr(graph, "_ops_by_level", None)
    if cache is None or cache[0] is not graph._schedule:
        table: dict[int, list[str]] = {}
        sched = schedule(graph)
        for n in sched.order:
            table.setdefault(sched.level[n], []).append(n)
        cache = graph._ops_by_level = (graph._schedule, table)
    return cache[1]


def plan(graph: Graph, swapout_threshold, swapin_ahead, swapin_groupby, **_):
    """The v2 decisions as (tensor, consumers sharing one swap-in, trigger); no edits."""
    decisions = []
    for t in v2_candidates(graph):
        consumers = far_consumers(graph, t, swapout_threshold)
        for group in group_consumers(graph, consumers, swapin_groupby):
            trigger = level_trigger(graph, producer_name(t), group[0], swapin_ahead)
            if trigger is not None:
                decisions.append((t, group, trigger))
    return decisions


def sync_swapouts(graph: Graph, original: Graph, swap_outs: list[str]) -> None:
    """sync_mode 1 and 3: the producer's other device consumers wait for the swap-out, so the
    compute stream cannot run ahead of the copy to the host (levels rise: no cycle)."""
    for so in swap_outs:
        t = graph.ops[so].attrs["swap_of"]
        for c in original.consumers(t):
            if t in graph.ops[c.name].inputs:
                add_control_edge(graph, so, c.name)


def sync_swapins(graph: Graph, original: Graph, swap_ins: list[str]) -> None:
    """sync_mode 2 and 3: the ops that read the trigger's outputs wait for the swap-in, so the
    copy back is finished before compute moves past the trigger."""
    for si in swap_ins:
        for trig in graph.ops[si].control_inputs:
            for t in graph.ops[trig].outputs:
                # original's consumer index: the rewritten graph's is rebuilt on every edit.
                for c in original.consumers(t):
                    op = graph.ops[c.name]
                    if t in op.inputs and c.type not in CONTROL_FLOW_TYPES:
                        add_control_edge(graph, si, c.name)


def serialize_levels(graph: Graph, original: Graph, levels) -> None:
    """serialization: ops at each listed level run one at a time (definition order) through a
    chain of control edges. Ops at one level have no path between them, so a chain is safe."""
    sched = schedule(original)
    for lv in levels:
        ops = [n for n in sched.order if sched.level[n] == lv]
        for a, b in zip(ops, ops[1:], strict=False):
            add_control_edge(graph, a, b)
