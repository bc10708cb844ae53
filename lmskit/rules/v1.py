"""TFLMS version 1 (arXiv 1807.02037): swap forward outputs that backward ops read.

The pipeline, one small function per step, each run on the original graph (analysis never sees
its own edits, as in TFLMS):
    forward_walk -> swap_candidates (filters, atomic types) -> backward_consumers
    (+ branch_consumers when swap_branches) -> group (fuse_swapins) -> trigger by
    chain_rule_trigger or direct_order_trigger -> common.insert_swap on a copy.
"""

from __future__ import annotations

from collections import deque

from ..graph import Graph, producer_name
from ..schedule import schedule
from .common import insert_swap, passes_filters, swap_target, swappable_tensor, valid_trigger

DEFAULTS = dict(n_tensors=-1, lb=1, ub=10000, starting_scope=None, starting_op_names=None,
                excl_scopes=(), incl_scopes=(), excl_types=(), incl_types=(),
                fuse_swapins=False, ctrld_strategy="chain_rule", swap_branches=False,
                branch_threshold=0)


def forward_walk(graph: Graph, starting_scope=None, starting_op_names=None) -> list[str]:
    """Forward ops in walk order (BFS over successors from the starting ops).

    Precondition: phases assigned. Effect: none. Without a starting point the walk starts at
    every forward op with no forward predecessor (the inputs and variable reads).
    """
    fwd = [n for n in schedule(graph).order if graph.ops[n].phase == "forward"]
    if starting_op_names:
        missing = [n for n in starting_op_names if n not in graph.ops]
        if missing:
            raise ValueError(f"starting_op_names not in the graph: {missing}")
        start = list(starting_op_names)
    elif starting_scope:
        prefix = starting_scope.rstrip("/") + "/"
        start = [n for n in fwd if n.startswith(prefix)]
        if not start:
            raise ValueError(f"no forward op under starting_scope {starting_scope!r}")
    else:
        return fwd
    succ = graph.successors()
    seen, out, queue = set(start), [], deque(start)
    while queue:
        n = queue.popleft()
        out.append(n)
        for s in succ[n]:
            if s not in seen and graph.ops[s].phase == "forward":
                seen.add(s)
                queue.append(s)
    return out


def swap_candidates(graph: Graph, ops: list[str], incl_scopes=(), excl_scopes=(),
                    incl_types=(), excl_types=()) -> list[str]:
    """Output tensors of the walked ops that may be swapped.

    Precondition: ops in walk order. Effect: none. Drops ops failing the scope/type filters and
    tensors failing common.swappable_tensor (atomic types, variables, zero-size).
    """
    out = []
    for n in ops:
        op = graph.ops[n]
        if not passes_filters(op, incl_scopes, excl_scopes, incl_types, excl_types):
            continue
        out.extend(t for t in op.outputs if swappable_tensor(graph, t))
    return out


def backward_consumers(graph: Graph, tensor: str) -> list[str]:
    """Backward ops reading a forward tensor's data (common.swap_target: not shape-only reads,
    not consumers with no outputs)."""
    return [c.name for c in graph.consumers(tensor) if c.phase == "backward" and swap_target(c)]


def branch_consumers(graph: Graph, tensor: str, branch_threshold: int) -> list[str]:
    """Forward consumers more than branch_threshold levels after the producer (U-Net skip
    connections: the tensor waits through the whole encoder-decoder stretch)."""
    level = schedule(graph).level
    p = level[producer_name(tensor)]
    return [c.name for c in graph.consumers(tensor)
            if c.phase == "forward" and swap_target(c) and level[c.name] - p > branch_threshold]


def chain_rule_trigger(graph: Graph, producer: str, consumer: str, lb: int, ub: int):
    """Trigger on a chain into the consumer: the nearest op between lb and ub hops upstream of it.

    TFLMS phrases it from the producer: walk lb forward ops ahead and take their gradient, which
    the chain rule runs before the consumer. In a chain F_i -> F_i+1, G_i+1 -> G_i that is the
    op lb hops upstream of the consumer G_i; walking upstream finds it in any DAG.
    Walks predecessors from the consumer breadth-first; at hop distance d (lb <= d <= ub) takes
    a device op ordered after the producer (and for a backward consumer, itself backward).
    It is an ancestor of the consumer, so the control edge adds no new reachability: no cycle.
    Returns None when the window holds no such op.
    """
    pos = schedule(graph).position
    want_backward = graph.ops[consumer].phase == "backward"
    seen = {consumer}
    frontier = [consumer]
    for d in range(1, ub + 1):
        nxt = []
        for n in frontier:
            for p in graph.predecessors(graph.ops[n]):
                if p not in seen:
                    seen.add(p)
                    nxt.append(p)
        if not nxt:
            return None
        if d >= lb:
            for n in nxt:
                op = graph.ops[n]
                if (pos[n] > pos[producer] and valid_trigger(op)
                        and (op.phase == "backward" or not want_backward)):
                    return n
        # Stop walking upstream past the producer: nothing there is ordered after it.
        frontier = [n for n in nxt if pos[n] > pos[producer]]
    return None


def direct_order_trigger(graph: Graph, producer: str, consumer: str, lb: int, ub: int):
    """Trigger by topological level: scan levels from (consumer level - lb) down to
    max(consumer level - ub, producer level) + 1 for an op that reaches the consumer.

    Ancestors are found by walking predecessors, pruned below the lowest level scanned.
    Returns None when no level in the window holds an ancestor.
    """
    level = schedule(graph).level
    hi = level[consumer] - lb
    lo = max(level[consumer] - ub, level[producer]) + 1
    if hi < lo:
        return None
    ancestors = {}
    stack = [consumer]
    while stack:
        for p in graph.predecessors(graph.ops[stack.pop()]):
            if p not in ancestors and level[p] >= lo:
                ancestors[p] = level[p]
                stack.append(p)
    best = None
    for n, lv in ancestors.items():
        if lv <= hi and valid_trigger(graph.ops[n]):
            if best is None or lv > ancestors[best]:
                best = n
    return best


def plan(graph: Graph, **opts) -> list[tuple[str, list[str], str]]:
    """The v1 decisions as (tensor, consumers sharing one swap-in, trigger); no edits."""
    o = {**DEFAULTS, **opts}
    for key in ("excl_scopes", "incl_scopes", "excl_types", "incl_types", "starting_op_names"):
        if isinstance(o[key], str):   # one name given bare: never iterate its characters
            o[key] = [o[key]]
    if o["ctrld_strategy"] not in ("chain_rule", "direct_order"):
        raise ValueError(f"ctrld_strategy must be 'chain_rule' or 'direct_order', "
                         f"got {o['ctrld_strategy']!r}")
    if o["n_tensors"] == 0:
        return []
    walked = forward_walk(graph, o["starting_scope"], o["starting_op_names"])
    cands = swap_candidates(graph, walked, o["incl_scopes"], o["excl_scopes"],
                            o["incl_types"], o["excl_types"])
    find = chain_rule_trigger if o["ctrld_strategy"] == "chain_rule" else direct_order_trigger
    decisions, swapped = [], 0
    for t in cands:
        consumers = backward_consumers(graph, t)
        if o["swap_branches"]:
            consumers += branch_consumers(graph, t, o["branch_threshold"])
        if not consumers:
            continue
        groups = [consumers] if o["fuse_swapins"] else [[c] for c in consumers]
        producer = producer_name(t)
        made = []
        for group in groups:
            # A fused swap-in must arrive before the earliest consumer of the group.
            first = min(group, key=lambda c: schedule(graph).position[c])
            trigger = find(graph, producer, first, o["lb"], o["ub"])
            if trigger is not None:
                made.append((t, group, trigger))
        if made:
            decisions.extend(made)
            swapped += 1
            if o["n_tensors"] > 0 and swapped >= o["n_tensors"]:
                break
    return decisions


def apply(graph: Graph, decisions) -> Graph:
    """A copy of graph with every decision inserted (common.insert_swap)."""
    g = graph.copy()
    for t, consumers, trigger in decisions:
        insert_swap(g, t, consumers, trigger)
    return g
