"""TFLMS v1's topological order ("TOPOS"), built as the published code builds it.

v1 chooses triggers by these orders, not by the plain levels of the whole graph (schedule.level):
1. Seeds: the ops the forward walk starts from (starting_scope / starting_op_names, or
   auto_seeds). Only ops reachable from a seed through data edges get an order.
2. Levels: an op's level is 1 + the highest level of the ops it depends on (data producers and
   control inputs), counting only dependencies that lie on a path from a seed to a backward op.
3. Cleaning backward ops: a level that holds any forward op loses its backward ops. Such backward
   ops depend on forward tensors only (a conv gradient's ShapeN, shape arithmetic such as a
   RealDiv of sizes) and TF's executor may run them during the forward pass, so their position
   says nothing about when the backward pass gets there. They get order -1.
4. Cleaning update ops: non-backward ops downstream of a backward op (the optimizer) get -1.
5. Reindexing: empty levels are dropped, so orders are consecutive.
bw_start is the first order that holds a backward op.

Step 3 runs before step 4 in the published code, so a backward op that shares a level with an
*update* op is cleaned too (the update ops are not forward, but they are not backward either).
We keep that order (build's clean_with_update_ops=True). It matters under the
"keras-callback" scoping, where the update ops are not grad ops: Keras 3 builds each variable's
update from several ops that sit on many backward levels, and those levels lose their backward
ops. Under "minimize" (the paper's usage) the optimizer's ops are grad ops and clean nothing.
benchmarks/results/lmskit_bench.json has the batch ratios of both ("v1_paper_setting" and its
"ablation"). (IBM's 2.88x is not a batch ratio: it is 3900^2 / 2300^2 pixels at batch 1 on a
V100 16 GB, TF 1.12, RMSprop: examples/Keras_ResNet50.py.)

Which ops are TFLMS's "grad ops" depends on the scope the user passes (grad_ops, the graph's
`scoping`, set by capture). The published README, the contrib README and mnist_deep_lms.py wrap
`minimize()` in the scope (`LMS({'adam_optimizer'})`), so the optimizer's update ops are grad
ops too: levels holding backward and update ops are not cleaned, and step 4 finds almost
nothing (scoping "minimize", the paper's usage). IBM's Keras callback scopes
`training/<optimizer>/gradients`: only the backward ops (scoping "keras-callback", capture's
default).

Assumptions: phases are assigned ("backward", and with "minimize" the update ops downstream of
it, play the role of TFLMS's optimizer-scope ops).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..graph import Graph, producer_name
from ..schedule import schedule


@dataclass
class Topos:
    order: dict[str, int]     # op -> order; ops without one (cleaned, unreached) are absent
    levels: list[list[str]]   # order -> ops, in schedule order
    bw_start: int             # first order with a backward op; -1 when none

    def get(self, name: str) -> int:
        """The published get_order: -1 for ops without an order."""
        return self.order.get(name, -1)


def grad_ops(graph: Graph) -> set[str]:
    """The ops TFLMS v1 takes from its optimizer scopes: the backward ops, and with the graph's
    scoping "minimize" also the update ops downstream of them (data edges), which minimize()
    builds in the same scope. Update ops outside that walk (BatchNorm's moving averages, made
    in the model's scope) are never grad ops. Cached per schedule."""
    cache = getattr(graph, "_grad_cache", None)
    key = (schedule(graph), graph.scoping)
    if cache is None or cache[0] is not key[0] or cache[1] != key[1]:
        grad = {n for n, op in graph.ops.items() if op.phase == "backward"}
        if graph.scoping == "minimize":
            stack = list(grad)
            while stack:
                for c in _data_consumers(graph, stack.pop()):
                    if c not in grad and graph.ops[c].phase == "update":
                        grad.add(c)
                        stack.append(c)
        cache = graph._grad_cache = (key[0], key[1], frozenset(grad))
    return cache[2]


def _data_consumers(graph: Graph, name: str) -> list[str]:
    out = []
    for t in graph.ops[name].outputs:
        for c in graph.consumers(t):
            if c.name not in out:
                out.append(c.name)
    return out


def auto_seeds(graph: Graph) -> list[str]:
    """The published _get_seed_ops without a starting point: among non-backward ops with an
    output read by a backward op ("candidates"), those whose forward walk (through non-backward
    ops, data edges, excluding themselves) covers the most candidates. In a Keras step that is
    the input placeholder."""
    order = schedule(graph).order
    grad = grad_ops(graph)
    cands = [n for n in order if n not in grad
             and any(c in grad for c in _data_consumers(graph, n))]
    bit = {n: 1 << i for i, n in enumerate(cands)}
    reach: dict[str, int] = {}
    for n in reversed(order):   # reverse topological: successors first
        if n in grad:
            continue
        r = 0
        for c in _data_consumers(graph, n):
            if c not in grad:
                r |= reach[c] | bit.get(c, 0)
        reach[n] = r
    counts = {n: reach[n].bit_count() for n in cands}
    best = max(counts.values(), default=0)
    return [n for n in cands if counts[n] == best] if best > 0 else []


def seed_ops(graph: Graph, starting_scope=None, starting_op_names=None) -> list[str]:
    """Seeds as published: ops under starting_scope and/or named in starting_op_names, else
    auto_seeds. Raises ValueError naming a scope or op that matches nothing."""
    seeds: list[str] = []
    if starting_scope:
        prefix = starting_scope.rstrip("/") + "/"
        seeds += [n for n in graph.ops if n.startswith(prefix)]
        if not seeds:
            raise ValueError(f"no op under starting_scope {starting_scope!r}")
    if starting_op_names:
        missing = [n for n in starting_op_names if n not in graph.ops]
        if missing:
            raise ValueError(f"starting_op_names not in the graph: {missing}")
        seeds += [n for n in starting_op_names if n not in seeds]
    return seeds or auto_seeds(graph)


def build(graph: Graph, seeds: list[str], clean_with_update_ops: bool = True) -> Topos:
    """The cleaned, reindexed order of every op reachable from the seeds (module docstring).
    clean_with_update_ops=False drops the update ops before cleaning, so only forward ops
    clean a level (an experiment; the published code cleans with them)."""
    sched = schedule(graph)
    grad = grad_ops(graph)
    # Forward reach from the seeds and backward reach from the backward ops, data edges only
    # (graph_editor's walks); their intersection holds the dependencies that count.
    fwd, stack = set(seeds), list(seeds)
    while stack:
        for c in _data_consumers(graph, stack.pop()):
            if c not in fwd:
                fwd.add(c)
                stack.append(c)
    bwd, stack = set(grad), list(grad)
    while stack:
        for t in graph.ops[stack.pop()].inputs:
            p = producer_name(t)
            if p not in bwd:
                bwd.add(p)
                stack.append(p)
    within = fwd & bwd
    level: dict[str, int] = {}
    for n in sched.order:
        if n not in fwd:
            continue
        op = graph.ops[n]
        deps = [p for p in graph.predecessors(op) if p in within]
        level[n] = max((level[p] + 1 for p in deps), default=0)
    by_level: list[list[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for n in sched.order:
        if n in level:
            by_level[level[n]].append(n)
    # Update ops: non-backward ops downstream of backward ops (data edges).
    update, stack = set(), list(grad)
    while stack:
        for c in _data_consumers(graph, stack.pop()):
            if c not in update and c not in grad:
                update.add(c)
                stack.append(c)
    levels = []
    for ops in by_level:
        if not clean_with_update_ops:
            ops = [n for n in ops if n not in update]
        if any(n not in grad for n in ops):          # clean backward ops off forward levels
            ops = [n for n in ops if n not in grad]
        ops = [n for n in ops if n not in update]    # clean update ops
        if ops:                                      # reindex
            levels.append(ops)
    order = {n: i for i, ops in enumerate(levels) for n in ops}
    bw_start = next((i for i, ops in enumerate(levels) if any(n in grad for n in ops)), -1)
    return Topos(order, levels, bw_start)


def for_graph(graph: Graph, starting_scope=None, starting_op_names=None,
              clean_with_update_ops: bool = True) -> Topos:
    """build(graph, seed_ops(...)), cached on the graph per seed choice."""
    key = ("v1-topos", graph.scoping, starting_scope, tuple(starting_op_names or ()),
           clean_with_update_ops)
    cache = getattr(graph, "_topos_cache", None)
    if cache is None or cache[0] is not schedule(graph):
        cache = graph._topos_cache = (schedule(graph), {})
    if key not in cache[1]:
        cache[1][key] = build(graph, seed_ops(graph, starting_scope, starting_op_names),
                              clean_with_update_ops)
    return cache[1][key]
