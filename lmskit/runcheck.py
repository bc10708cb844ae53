"""Check a swap rewrite against what TensorFlow really ran, not only against its own wiring.

checker.check proves the rewritten Graph computes what the original did; tfrun.equivalent shows
the numbers agree. Neither shows the swaps did anything: a rewrite whose swap-ins nobody reads
passes both. run_checks runs one step in a TF1 session with full tracing and reads the executed
graphs (after Grappler) and the executor's step stats (RunMetadata):
1. every swap-in is read by someone in the rewrite, and each of its readers ran and reads it in
   the graph TF executed (possibly through a _Recv when the reader sits on another device).
   Grappler merges swap-ins of one tensor with the same trigger into one (common subexpression
   elimination); reading such a twin counts, and RunCheck.merged says how many were merged. A
   reader Grappler removed (an IdentityN) is noted, if what replaced it reads the swap-in;
2. every trigger finished before its swap-in started (the prefetch order the rule chose); a
   trigger Grappler folded away is noted (RunCheck.notes) and the node the swap-in really
   waited for is checked instead;
3. with a GPU, TF's measured peak GPU bytes beside the simulated peak (lifetimes at that batch).

Assumptions: the graph was captured by lmskit (graph.source); variables are copied into the
session, so the model's own variables are not touched; lmskit.configure_devices() split the CPU
into logical devices before TensorFlow started, when there is no GPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from .graph import Graph
from .rules.common import is_swap
from .tfcapture import to_graph_def
from .tfrun import TFStep, places, read_variables


@dataclass
class RunCheck:
    ok: bool
    problems: list[str]
    swap_ins: int
    ran: int                                   # swap nodes found in the step stats
    merged: int = 0                            # swap-ins Grappler merged into a twin
    notes: list[str] = field(default_factory=list)   # what Grappler changed, not failures
    trigger_lead_us: dict[str, int] = field(default_factory=dict)   # swap-in -> its start
    # minus its trigger's end, microseconds
    measured_peak: int | None = None           # TF's peak GPU bytes (None without a GPU)
    simulated_peak: int | None = None          # schedule.lifetimes(...).peak at that batch


def _session_config() -> tf.compat.v1.ConfigProto:
    n_cpu = len(tf.config.list_logical_devices("CPU"))
    return tf.compat.v1.ConfigProto(device_count={"CPU": max(n_cpu, 1)},
                                    allow_soft_placement=False)


def traced_run(graph: Graph, inputs, fetch: list[str] | None = None):
    """One step of `graph` in a tf.compat.v1.Session with full tracing, on copies of the
    variables. Returns ({tensor name: array}, RunMetadata with step_stats and partition_graphs).
    fetch: tensors to return besides the step's outputs (default: loss and gradients)."""
    if graph.source is None:
        raise ValueError("graph has no TensorFlow source (was it captured with lmskit?)")
    src = graph.source
    if len(inputs) != len(src.input_names):
        raise ValueError(f"the step takes {len(src.input_names)} inputs "
                         f"({', '.join(src.input_names)}), got {len(inputs)}")
    gd = to_graph_def(graph, places())
    values = read_variables(graph)
    extra = [graph.loss] + graph.gradients() if fetch is None else list(fetch)
    fetches = list(dict.fromkeys(graph.fetches + extra))
    with tf.Graph().as_default() as g:
        input_map = {}
        for ext, ph in src.captures:
            if ph in src.variables:
                v = tf.compat.v1.Variable(values[ph], name=f"lmskit_copy/{ph}", use_resource=True)
                input_map[f"{ph}:0"] = v.handle
            elif ext.dtype in (tf.resource, tf.variant):
                raise ValueError(f"captured input {ph!r} is a {ext.dtype.name} handle that is not "
                                 "a tf.Variable; runcheck cannot copy it into a session")
            else:
                input_map[f"{ph}:0"] = tf.constant(ext.numpy())
        outs = tf.graph_util.import_graph_def(gd, input_map=input_map, return_elements=fetches,
                                              name="")
        init = tf.compat.v1.global_variables_initializer()
    feed = {f"{n}:0": np.asarray(x) for n, x in zip(src.input_names, inputs, strict=True)}
    opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE,
                                   output_partition_graphs=True)
    meta = tf.compat.v1.RunMetadata()
    with tf.compat.v1.Session(graph=g, config=_session_config()) as sess:
        sess.run(init)
        vals = sess.run(outs, feed_dict=feed, options=opts, run_metadata=meta)
    return dict(zip(fetches, vals, strict=True)), meta


_EDGE = re.compile(r"^edge_\d+_(.*)$")


def _executed(meta) -> tuple[dict, dict]:
    """(node name -> NodeDef of the executed partition graphs, node name -> (start, end) us)."""
    nodes = {n.name: n for pg in meta.partition_graphs for n in pg.node}
    times: dict[str, tuple[int, int]] = {}
    for dev in meta.step_stats.dev_stats:
        for ns in dev.node_stats:
            start, end = ns.all_start_micros, ns.all_start_micros + ns.all_end_rel_micros
            a, b = times.get(ns.node_name, (start, end))
            times[ns.node_name] = (min(a, start), max(b, end))
    return nodes, times


def _source_of(nodes: dict, ref: str) -> str:
    """The op an executed node's data input comes from, seen through _Recv nodes."""
    name = ref.split(":")[0]
    node = nodes.get(name)
    if node is not None and node.op in ("_Recv", "_HostRecv"):
        tensor = node.attr["tensor_name"].s.decode()
        m = _EDGE.match(tensor)
        return (m.group(1) if m else tensor).split(":")[0]
    return name


def run_checks(rewritten: Graph, inputs, batch_size: int | None = None) -> RunCheck:
    """Run one traced step of `rewritten` and check it against what TF ran (module docstring).
    inputs: the step's inputs (numpy arrays); batch_size (default: the first input's leading
    dimension) sizes the simulated peak."""
    _, meta = traced_run(rewritten, inputs)
    nodes, times = _executed(meta)
    problems = []
    swap_ins = [n for n, op in rewritten.ops.items() if is_swap(op) and op.attrs["swap"] == "in"]
    if not swap_ins:
        problems.append("the rewrite has no swap-in")
    leads, merged, notes = {}, 0, []

    def twins(si):   # swap-ins Grappler may merge with si: same tensor, same triggers
        op = rewritten.ops[si]
        return {n for n in swap_ins if rewritten.ops[n].attrs["swap_of"] == op.attrs["swap_of"]
                and sorted(rewritten.ops[n].control_inputs) == sorted(op.control_inputs)}

    for si in swap_ins:
        readers = [c.name for c in rewritten.consumers(rewritten.ops[si].outputs[0])]
        if not readers:
            problems.append(f"swap-in {si} is read by nobody: the rewrite changes nothing")
        if si not in times and readers:
            merged += 1
        for r in readers:
            node = nodes.get(r)
            sources = set() if node is None else {_source_of(nodes, i) for i in node.input
                                                  if not i.startswith("^")}
            if node is None:
                # Grappler removed the reader (e.g. an IdentityN forwarding its inputs); the
                # swap-in must then feed what replaced it.
                users = [n for n, nd in nodes.items()
                         if {_source_of(nodes, i) for i in nd.input if not i.startswith("^")}
                         & twins(si)]
                if users:
                    notes.append(f"{r}, a reader of {si}, was removed by Grappler; the swap-in "
                                 f"feeds {users[:3]}")
                else:
                    problems.append(f"{r}, a reader of {si}, is not in the graph TF ran and "
                                    "nothing else reads the swap-in")
            elif not sources & twins(si):
                problems.append(f"{r} does not read {si} in the graph TF ran")
            elif not sources & twins(si) & set(times):
                problems.append(f"{r} reads {si}, which did not run")
        # The trigger as TF ran it: Grappler may fold a trigger into a constant and hand its
        # control edges to another node; then the node the swap-in really waited for counts.
        node = nodes.get(si)
        waited = [i[1:] for i in node.input if i.startswith("^")] if node is not None else []
        for trig in rewritten.ops[si].control_inputs:
            if trig in times and si in times:
                leads[si] = times[si][0] - times[trig][1]
                if leads[si] < 0:
                    problems.append(f"swap-in {si} started before its trigger {trig} ended")
            elif trig not in times:
                ran_instead = [w for w in waited if w in times]
                notes.append(f"trigger {trig} of {si} is not in the step stats (Grappler folded "
                             f"or pruned it); the swap-in waited for {ran_instead or 'nothing'}")
                for w in ran_instead:
                    if si in times and times[si][0] < times[w][1]:
                        problems.append(f"swap-in {si} started before {w} ended")
    ran = sum(1 for n, op in rewritten.ops.items() if is_swap(op) and n in times)
    measured = simulated = None
    if tf.config.list_logical_devices("GPU"):
        from .schedule import lifetimes

        batch = batch_size or int(np.shape(inputs[0])[0])
        measured = TFStep(rewritten).measure_peak(*inputs)
        simulated = lifetimes(rewritten, batch).peak
    return RunCheck(not problems, problems, len(swap_ins), ran, merged, notes, leads, measured,
                    simulated)
