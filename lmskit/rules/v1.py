"""TFLMS version 1 (arXiv 1807.02037; IBM's tflmsv1 code): swap forward outputs that backward
ops read.

The pipeline, one small function per step, each run on the original graph (analysis never sees
its own edits, as in TFLMS):
    topos.for_graph (seeds, cleaned levels) -> forward_walk -> swap_candidates (filters, atomic
    types) -> backward_consumers (+ branch_consumers when swap_branches) -> fuse (fuse_swapins)
    -> trigger by chain_rule_trigger or direct_order_trigger -> common.insert_swap on a copy.

As published:
- Orders are topos orders: backward ops that share a level with forward ops have order -1 and
  are never triggers (topos.py says why).
- A reader with order -1 gets no swap-in; instead new_source_ops finds, downstream of it, the
  backward ops whose outputs ordered backward ops read, and their outputs are swapped
  (triggers then come from direct_order).
- A swap-in whose trigger search finds nothing is still inserted, without a control edge (the
  copy may then come back at once).
- Of several equally good triggers the published code takes an arbitrary one (set order); we
  take the one ordered latest, ties by schedule position, so results are reproducible.
Our additions: tensors of rank 0, variables and resource handles are never swapped, and readers
that only read a shape (common.swap_target) get no swap-in.
"""

from __future__ import annotations

from collections import deque

from ..graph import Graph
from ..schedule import schedule
from . import topos as topos_mod
from .common import (
    ATOMIC_TYPES,
    insert_swap,
    passes_filters,
    swap_target,
    swappable_tensor,
    valid_trigger,
)

DEFAULTS = dict(n_tensors=-1, lb=1, ub=10000, starting_scope=None, starting_op_names=None,
                excl_scopes=(), incl_scopes=(), excl_types=(), incl_types=(),
                fuse_swapins=False, ctrld_strategy="chain_rule", swap_branches=False,
                branch_threshold=0)


def validate(o: dict) -> dict:
    """Options with defaults filled in; ValueError naming the option for values out of range."""
    o = {**DEFAULTS, **o}
    for key in ("excl_scopes", "incl_scopes", "excl_types", "incl_types", "starting_op_names"):
        if isinstance(o[key], str):   # one name given bare: never iterate its characters
            o[key] = [o[key]]
    for key in ("n_tensors", "lb", "ub", "branch_threshold"):
        if isinstance(o[key], bool) or not isinstance(o[key], int):
            raise ValueError(f"{key} must be an integer, got {o[key]!r}")
    if o["n_tensors"] < -1:
        raise ValueError(f"n_tensors must be -1 (all), 0 (off) or positive, got {o['n_tensors']}")
    if o["lb"] < 0 or o["ub"] < 0:
        raise ValueError(f"lb and ub must be >= 0, got lb={o['lb']}, ub={o['ub']}")
    if o["lb"] > o["ub"]:
        raise ValueError(f"lb ({o['lb']}) must not exceed ub ({o['ub']})")
    if o["branch_threshold"] < 0:
        raise ValueError(f"branch_threshold must be >= 0, got {o['branch_threshold']}")
    if o["ctrld_strategy"] not in ("chain_rule", "direct_order"):
        raise ValueError(f"ctrld_strategy must be 'chain_rule' or 'direct_order', "
                         f"got {o['ctrld_strategy']!r}")
    return o


def _is_backward(graph: Graph, name: str) -> bool:
    """A TFLMS grad op: in the optimizer scopes the user passed (topos.grad_ops)."""
    return name in topos_mod.grad_ops(graph)


def _consumer_names(graph: Graph, tensor: str) -> list[str]:
    return [c.name for c in graph.consumers(tensor)]


def forward_walk(graph: Graph, starting_scope=None, starting_op_names=None,
                 seeds: list[str] | None = None) -> list[str]:
    """Ops in walk order: breadth-first from the seeds (topos.seed_ops, unless given) through
    the data consumers that are not backward ops, as the published _do_action walks."""
    if seeds is None:
        seeds = topos_mod.seed_ops(graph, starting_scope, starting_op_names)
    seeds = sorted(seeds, key=schedule(graph).position.__getitem__)
    seen, out, queue = set(seeds), [], deque(seeds)
    while queue:
        n = queue.popleft()
        out.append(n)
        for t in graph.ops[n].outputs:
            for c in graph.consumers(t):
                if c.name not in seen and not _is_backward(graph, c.name):
                    seen.add(c.name)
                    queue.append(c.name)
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


def _has_readers(graph: Graph, op_name: str) -> bool:
    # Published: "do not swap tensors used by bw ops without outgoing ops".
    return any(graph.consumers(t) for t in graph.ops[op_name].outputs)


def backward_consumers(graph: Graph, tensor: str) -> list[str]:
    """Backward ops reading a tensor's data that have readers of their own (and do not only read
    its shape: common.swap_target)."""
    return [c.name for c in graph.consumers(tensor) if _is_backward(graph, c.name)
            and swap_target(c)
            and _has_readers(graph, c.name)]


def branch_consumers(graph: Graph, tensor: str, branch_threshold: int, topo=None) -> list[str]:
    """Non-backward readers ordered more than branch_threshold after the tensor's *nearest*
    non-backward reader (published _get_branch_ops: min(order) + branch_threshold), e.g. a U-Net
    skip connection read again at the end of the decoder."""
    topo = topo or topos_mod.for_graph(graph)
    fwd = [c for c in _consumer_names(graph, tensor) if not _is_backward(graph, c)]
    if not fwd:
        return []
    limit = min(topo.get(c) for c in fwd) + branch_threshold
    return [c for c in fwd if topo.get(c) > limit and swap_target(graph.ops[c])
            and _has_readers(graph, c)]


def _pick(graph: Graph, topo, ops) -> str | None:
    """Our deterministic stand-in for the published `next(iter(set))`: latest order first."""
    if not ops:
        return None
    pos = schedule(graph).position
    return max(ops, key=lambda n: (topo.get(n), pos[n]))


def _trigger_ok(graph: Graph, name: str) -> bool:
    return valid_trigger(graph.ops[name]) and "/cond/" not in name


def chain_rule_trigger(graph: Graph, producer: str, consumer: str, lb: int, ub: int, topo=None):
    """Published _do_chain_rule: walk forward from the producer through non-backward readers,
    one hop per round; from hop lb on (and before hop ub), the backward readers of the ops
    reached are candidates if ordered strictly between the producer and the consumer. The first
    round with a candidate wins. When the consumer sits within lb orders of the start of the
    backward phase, direct_order decides instead.

    Returns None when the window holds no such op."""
    topo = topo or topos_mod.for_graph(graph)
    fw_order, bw_order = topo.get(producer), topo.get(consumer)
    if bw_order - lb < topo.bw_start:
        return direct_order_trigger(graph, producer, consumer, lb, ub, topo)
    frontier, closed = [producer], set()
    lower, upper = lb, ub
    while frontier:
        if upper == 0 or lower > upper:
            break
        result, nxt = [], []
        for src in frontier:
            readers = []
            for t in graph.ops[src].outputs:
                readers += [c for c in _consumer_names(graph, t) if c not in readers]
            if lower <= 0:
                result += [c for c in readers if _is_backward(graph, c)
                           and fw_order < topo.get(c) < bw_order and _trigger_ok(graph, c)]
            # The published walk skips only ops already processed, so an op can come back one
            # hop later through a longer path; kept, since it decides which hop finds a trigger.
            nxt += [c for c in readers if not _is_backward(graph, c)
                    and c not in closed and c not in nxt]
            closed.add(src)
        if result:
            return _pick(graph, topo, result)
        lower, upper = lower - 1, upper - 1
        frontier = nxt
    return None


def direct_order_trigger(graph: Graph, producer: str, consumer: str, lb: int, ub: int,
                         topo=None):
    """Published _do_direct_order: scan orders from (consumer order - lb - 1) down to
    max(consumer order - ub, producer order) + 1 for an op that reaches the consumer; the
    first order with one wins.

    Returns None when no order in the window holds an ancestor."""
    topo = topo or topos_mod.for_graph(graph)
    hi = topo.get(consumer) - lb - 1
    lo = max(topo.get(consumer) - ub, topo.get(producer)) + 1
    if hi < lo:
        return None
    # Ancestors of the consumer, found lazily: plain levels only grow along edges, so the walk
    # goes no lower than the lowest plain level of the orders scanned so far.
    level = schedule(graph).level
    ancestors: set[str] = set()
    pending, stack, floor = set(), [consumer], None
    for i in range(hi, lo - 1, -1):
        ops = topo.levels[i]
        low = min(level[n] for n in ops)
        if floor is None or low < floor:
            floor = low
            ready = [p for p in pending if level[p] >= floor]
            pending.difference_update(ready)
            ancestors.update(ready)
            stack += ready
            while stack:
                for p in graph.predecessors(graph.ops[stack.pop()]):
                    if p in ancestors or p in pending:
                        continue
                    if level[p] >= floor:
                        ancestors.add(p)
                        stack.append(p)
                    else:
                        pending.add(p)
        found = [n for n in ops if n in ancestors and _trigger_ok(graph, n)]
        if found:
            return _pick(graph, topo, found)
    return None


def new_source_ops(graph: Graph, reader: str, topo=None) -> list[str]:
    """Published _find_new_src_op: for a reader with order -1 (a backward op the forward pass
    may run early), walk its downstream ops breadth-first; an op is a new source when one of
    its readers is ordered after the start of the backward phase (the walk does not go past
    those readers). Their outputs are swapped instead."""
    topo = topo or topos_mod.for_graph(graph)
    out, queue, closed = [], deque([reader]), set()
    while queue:
        src = queue.popleft()
        readers = []
        for t in graph.ops[src].outputs:
            readers += [c for c in _consumer_names(graph, t) if c not in readers]
        ordered = [c for c in readers if topo.get(c) > topo.bw_start]
        if ordered and src not in out:
            out.append(src)
        for c in readers:
            if c not in ordered and c not in closed and c not in queue:
                queue.append(c)
        closed.add(src)
    return out


def trigger(graph: Graph, topo, producer: str, consumer: str, o: dict):
    """Published _add_control_dependency: lb falls back to 1 when the window would reach the
    producer; backward producers (new sources) always use direct_order."""
    lb = o["lb"]
    if topo.get(consumer) - lb <= topo.get(producer):
        lb = 1
    if _is_backward(graph, producer) or o["ctrld_strategy"] == "direct_order":
        return direct_order_trigger(graph, producer, consumer, lb, o["ub"], topo)
    return chain_rule_trigger(graph, producer, consumer, lb, o["ub"], topo)


def plan(graph: Graph, **opts) -> list[tuple[str, list[str], str | None]]:
    """The v1 decisions as (tensor, readers sharing one swap-in, trigger or None); no edits."""
    o = validate(opts)
    if o["n_tensors"] == 0:
        return []
    seeds = topos_mod.seed_ops(graph, o["starting_scope"], o["starting_op_names"])
    topo = topos_mod.build(graph, seeds)
    filters = (o["incl_scopes"], o["excl_scopes"], o["incl_types"], o["excl_types"])
    decisions: list = []
    state = {"swapped": 0, "visited": set()}

    def full():
        return o["n_tensors"] > 0 and state["swapped"] >= o["n_tensors"]

    def visit(src: str) -> None:
        """Published _insert_swap_nodes for one op."""
        op = graph.ops[src]
        if not passes_filters(op, *filters) or op.type in ATOMIC_TYPES:
            return
        for t in op.outputs:
            if full():
                return
            if not swappable_tensor(graph, t):
                continue
            readers = backward_consumers(graph, t)
            if o["swap_branches"]:
                readers += [c for c in branch_consumers(graph, t, o["branch_threshold"], topo)
                            if c not in readers]
            if not readers:
                continue
            swapped_out = any(topo.get(c) >= 0 for c in readers)
            if swapped_out:
                state["swapped"] += 1
            rest = readers
            if o["fuse_swapins"] and swapped_out:
                fused = [c for c in readers if topo.get(c) > 0]
                if len(fused) >= 2:
                    first = min(fused, key=topo.get)
                    decisions.append((t, fused, trigger(graph, topo, src, first, o)))
                    rest = [c for c in readers if c not in fused]
            for c in rest:
                if topo.get(c) >= 0:
                    decisions.append((t, [c], trigger(graph, topo, src, c, o)))
                elif not _is_backward(graph, src):
                    for s in new_source_ops(graph, c, topo):
                        if s not in state["visited"]:
                            state["visited"].add(s)
                            visit(s)

    for n in forward_walk(graph, seeds=seeds):
        if full():
            break
        state["visited"].add(n)
        visit(n)
    return decisions


def apply(graph: Graph, decisions) -> Graph:
    """A copy of graph with every decision inserted (common.insert_swap)."""
    g = graph.copy()
    for t, consumers, trig in decisions:
        insert_swap(g, t, consumers, trig)
    return g
