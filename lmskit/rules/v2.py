"""TFLMS version 2 (ISMM 2019): swapping decided on topological levels of the whole graph.

    far_consumers (swapout_threshold) -> group_consumers (swapin_groupby) -> level_trigger
    (swapin_ahead) -> common.insert_swap; then sync_swapouts / sync_swapins (sync_mode, and
    swap-ins without a trigger) and serialize_levels (serialization).

As published (tflmsv2 branch): a trigger must reach its swap-in's reader and is searched at
most LOOK_BACK levels back; a swap-in without one is synchronised with its reader rather than
dropped; sync_mode 2 and 3 never search triggers.

Every new edge goes from a lower to a higher level of the original graph, so no rule here can
close a cycle. -1 ("auto") values are resolved by planner.autotune_v2 before these run.
"""

from __future__ import annotations

from ..graph import Graph, producer_name
from ..schedule import schedule
from .common import (
    V2_SKIP_TYPES,
    add_control_edge,
    swap_target,
    swappable_tensor,
    valid_trigger,
)

DEFAULTS = dict(swapout_threshold=-1, swapin_ahead=-1, swapin_groupby=-1, sync_mode=0,
                serialization=())
# _search_by_level looks back at most this many levels for a trigger.
LOOK_BACK = 10


def validate(o: dict) -> dict:
    """Options with defaults filled in; ValueError naming the option for values out of range
    (the published checks: integers; -1 means auto; swapin_ahead 0 is refused; sync_mode 0-3)."""
    o = {**DEFAULTS, **o}
    for key in ("swapout_threshold", "swapin_ahead", "swapin_groupby", "sync_mode"):
        if isinstance(o[key], bool) or not isinstance(o[key], int):
            raise ValueError(f"{key} must be an integer, got {o[key]!r}")
        if o[key] < -1:
            raise ValueError(f"{key} must be >= 0 or -1 (auto), got {o[key]}")
    if o["swapin_ahead"] == 0:
        raise ValueError("swapin_ahead must be >= 1 or -1 (auto), got 0")
    if o["sync_mode"] not in (0, 1, 2, 3):
        raise ValueError(f"sync_mode must be 0-3, got {o['sync_mode']!r}")
    return o


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
    """Published _search_by_level: scan levels from (consumer level - swapin_ahead - 1) down,
    at most LOOK_BACK levels and never to the producer's level or below, for a device op
    outside conditionals and loops that reaches the consumer; the first level with one wins
    (ours: the one latest in the schedule, where the published code takes any).
    Returns None when no level in the window holds one (see sync_unscheduled)."""
    level = schedule(graph).level
    hi = level[consumer] - swapin_ahead - 1
    lo = max(hi - LOOK_BACK + 1, level[producer] + 1)
    if hi < lo:
        return None
    ancestors, stack = set(), [consumer]
    while stack:   # levels grow along edges: prune below the window
        for p in graph.predecessors(graph.ops[stack.pop()]):
            if p not in ancestors and level[p] >= lo:
                ancestors.add(p)
                stack.append(p)
    by_level = _ops_by_level(graph)
    for lv in range(hi, lo - 1, -1):
        ops = [n for n in by_level.get(lv, ()) if n in ancestors and _trigger_ok(graph.ops[n])]
        if ops:
            return ops[-1]
    return None


def _trigger_ok(op) -> bool:
    return valid_trigger(op) and "/cond/" not in op.name and "while/" not in op.name


def _ops_by_level(graph: Graph) -> dict[int, list[str]]:
    cache = getattr(graph, "_ops_by_level", None)
    if cache is None or cache[0] is not graph._schedule:
        table: dict[int, list[str]] = {}
        sched = schedule(graph)
        for n in sched.order:
            table.setdefault(sched.level[n], []).append(n)
        cache = graph._ops_by_level = (graph._schedule, table)
    return cache[1]


def plan(graph: Graph, swapout_threshold, swapin_ahead, swapin_groupby, sync_mode=0, **_):
    """The v2 decisions as (tensor, consumers sharing one swap-in, trigger or None); no edits.
    Every group is swapped, as published: a swap-in without a trigger (none found, or sync_mode
    2 and 3, which never look for one) is synchronised by sync_swapins instead."""
    decisions = []
    for t in v2_candidates(graph):
        consumers = far_consumers(graph, t, swapout_threshold)
        for group in group_consumers(graph, consumers, swapin_groupby):
            trigger = None
            if sync_mode in (0, 1):
                trigger = level_trigger(graph, producer_name(t), group[0], swapin_ahead)
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
    """Published _sync_h2d, for sync_mode 2 and 3 and for swap-ins no trigger was found for: a
    swap-in read by exactly one op waits for that reader's other device inputs (or, when it has
    none, for the device ops one level below it), so the copy comes back just in time and the
    reader waits for it. Swap-ins read by several ops are left alone, as published. The new
    edges end at a swap-in whose only reader comes after their sources: no cycle."""
    level = schedule(original).level
    by_level = _ops_by_level(original)
    edges = []   # found first: every new edge invalidates the consumer index
    for si in swap_ins:
        readers = graph.consumers(graph.ops[si].outputs[0])
        if len(readers) != 1:
            continue
        reader = readers[0]
        sources = [p for p in dict.fromkeys(graph.predecessors(reader))
                   if valid_trigger(graph.ops[p])]
        if not sources:
            sources = [n for n in by_level.get(level[reader.name] - 1, ())
                       if valid_trigger(original.ops[n])]
        edges += [(p, si) for p in sources]
    for p, si in edges:
        add_control_edge(graph, p, si)


def serialize_levels(graph: Graph, original: Graph, levels) -> None:
    """serialization: ops at each listed level run one at a time (definition order) through a
    chain of control edges. Ops at one level have no path between them, so a chain is safe."""
    sched = schedule(original)
    for lv in levels:
        ops = [n for n in sched.order if sched.level[n] == lv]
        for a, b in zip(ops, ops[1:], strict=False):
            add_control_edge(graph, a, b)
