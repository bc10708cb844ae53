"""Control flow (If, Loop, Scan): unrolled and inlined into the enclosing graph on import.

Why unroll: compilerkit compiles static shapes into straight-line loop nests, and the control
flow models bring has counts known at compile time (a Keras GRU exported by tf2onnx is a Loop
over the time steps, its trip count a constant and its condition `i < 5`; a Scan's length is a
static dimension). Removing it from the ONNX graph before anything else reads it keeps the ONNX
IR and the Kernel IR region-free: every pass, buffer planning and every backend (host, the
emulated big-endian targets, the GPU) see plain ops, and constant folding and fusion work
across iterations. The price is code size, bounded by the unroll limit (`max_unroll`, an
option of `compile`: the iterations of all loops and scans of a model together).

* Loop: the trip count and the condition are read from the values known at compile time
  (subgraphs.Known: constants and what Shape -> Gather -> ... make of static shapes). While
  both are known the body is copied once per iteration, its iteration number a constant, its
  carried values threaded through, its scan outputs stacked (Unsqueeze + Concat). A condition
  computed from data (a while loop) with a known trip count is unrolled to the trip count
  with an `active` flag: each later iteration's carried values are `Where(active, new, old)`,
  so they freeze once the condition is false. That needs a loop without scan outputs (their
  length would only be known at run time); a trip count known only at run time is refused.
* Scan (opset 9 and later; opset 8's batched form runs the same per batch item): one copy of
  the body per step, the scan inputs read with Gather at the step's position
  (scan_input_axes, scan_input_directions), the outputs stacked along scan_output_axes in
  scan_output_directions' order.
* If: a condition known at compile time inlines the taken branch. A computed one inlines both
  branches (both are pure) and selects each output with `Where(cond, then, else)`, which needs
  outputs of the same static type; branches whose outputs differ are refused. The untaken
  branch must not report a run-time guard (`If(i < n) then Gather(x, i)`): its nodes are
  tagged with the condition (`onnx_guards`, the Where with `onnx_guard`) and the lowering
  makes each check and integer division of a tagged node pass when its branch is not taken
  (lowering/guards.py). The iterations of a while loop are tagged with their `active` flag
  the same way.

Nested control flow is expanded a level at a time: after each round ONNX's type inference
types the graph again, so an inner loop's trip count may come from the shapes an outer one
made. `inline_graph` (subgraphs.py) is the reusable piece for any other subgraph.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, NodeProto, helper, numpy_helper
from xdsl.dialects.builtin import ArrayAttr, StringAttr

from compilerkit.frontend.arguments import OptionError
from compilerkit.frontend.checks import ModelError, UnsupportedOpError
from compilerkit.frontend.control_scan import ScanSteps
from compilerkit.frontend.hygiene import model_opset, node_label, text
from compilerkit.frontend.subgraphs import (
    Known,
    Later,
    Names,
    all_names,
    inline_graph,
    proto_type,
    static_dims,
)

CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
DEFAULT_MAX_UNROLL = 1024  # loop iterations and scan steps unrolled per model, together
GUARDS = "onnx_guards"  # on ops of a conditional region: the guard keys ("!k": k is false)
GUARD = "onnx_guard"  # on a Where: the key of the condition it selects by (its operand 0)


def check_max_unroll(value) -> int:
    """`value` if it is a positive int (the unroll limit), else OptionError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise OptionError(f"max_unroll must be a positive int (the loop iterations and scan "
                          f"steps a compile may unroll), got {value!r}")
    return int(value)


class Tags:
    """What the import attaches to the ops of expanded nodes, by node name."""

    def __init__(self):
        self.guarded: dict[str, tuple] = {}  # node -> guard keys of its conditional regions
        self.conditions: dict[str, str] = {}  # Where node -> the key it selects by

    def attributes(self, label: str) -> dict:
        out = {}
        if self.guarded.get(label):
            out[GUARDS] = ArrayAttr([StringAttr(k) for k in self.guarded[label]])
        if label in self.conditions:
            out[GUARD] = StringAttr(self.conditions[label])
        return out


def _type_text(t) -> str:
    elem = onnx.helper.tensor_dtype_to_np_dtype(t[0]).name if t[0] else "?"
    return f"{elem}{t[1]}" if t[1] is not None else f"{elem}[unranked]"


def has_control_flow(graph: GraphProto) -> bool:
    return any(n.op_type in CONTROL_FLOW for n in graph.node)


def expand_control_flow(proto: ModelProto, light, message, max_unroll=None):
    """(model, Tags): a copy of `proto` with no If, Loop or Scan left (or `proto` itself when it
    has none). `light(model)` gives the copy type inference runs on (input shapes fixed),
    `message(exception)` the text of an inference error. Raises UnsupportedOpError naming the
    node and input for what cannot be unrolled."""
    g = proto.graph
    if not has_control_flow(g) or any(n.domain not in ("", "ai.onnx") for n in g.node) or any(
            v.type.WhichOneof("value") not in ("tensor_type", None)
            for v in list(g.input) + list(g.output)):
        # (the import refuses a foreign op, or specialises on a sequence input, first)
        return proto, Tags()
    limit = DEFAULT_MAX_UNROLL if max_unroll is None else check_max_unroll(max_unroll)
    model = ModelProto()
    model.CopyFrom(proto)
    for k, node in enumerate(model.graph.node):
        node.name = node_label(node, k)  # labels stay those of the model as given
    return _Expander(model, light, message, limit).run()


class _Expander(ScanSteps):
    def __init__(self, model, light, message, limit):
        self.model, self.light, self.message, self.limit = model, light, message, limit
        self.opset = model_opset(model)
        self.names = Names(all_names(model.graph))
        self.tags = Tags()
        self.used = 0  # iterations unrolled so far
        self.made: list = []
        self.known: Known | None = None

    # ---- the rounds --------------------------------------------------------------------------
    def run(self):
        g = self.model.graph
        while has_control_flow(g):
            inferred = self._infer()
            types = {vi.name: proto_type(vi) for vi in list(inferred.graph.value_info)
                     + list(inferred.graph.output) + list(inferred.graph.input)}
            self.known = Known(types, self.opset)
            for t in g.initializer:
                if np.prod(t.dims) <= 4096 and t.data_location != onnx.TensorProto.EXTERNAL:
                    self.known.set(t.name, numpy_helper.to_array(t))
            new, progressed, blocked = [], False, None
            for node, typed in zip(list(g.node), inferred.graph.node, strict=True):
                if node.op_type not in CONTROL_FLOW:
                    new.append(node)
                    self.known.evaluate(node)
                    continue
                self.made = []
                try:
                    getattr(self, "_" + node.op_type.lower())(node, typed)
                except Later as e:
                    blocked = blocked or str(e)
                    new.append(node)
                    self.known.tainted.update(o for o in node.output if o)
                    continue
                new.extend(self.made)
                progressed = True
            if not progressed:
                raise UnsupportedOpError(blocked)
            del g.node[:]
            g.node.extend(new)
        return self.model, self.tags

    def _infer(self) -> ModelProto:
        typed = self.light(self.model)
        del typed.graph.value_info[:]
        for o in typed.graph.output:
            o.ClearField("type")
        try:
            return onnx.shape_inference.infer_shapes(typed, strict_mode=True, data_prop=True)
        except Exception as e:  # noqa: BLE001 - ONNX names the node and the rule it broke
            raise ModelError(self.message(e)) from None

    # ---- making nodes ------------------------------------------------------------------------
    def add(self, node: NodeProto, guards=()) -> None:
        if guards:
            self.tags.guarded[node.name] = tuple(guards)
        self.made.append(node)
        self.known.evaluate(node, fresh=True)

    def node(self, op, inputs, base, guards=(), out=None, **attrs) -> str:
        out = out or self.names.fresh(base)
        self.add(helper.make_node(op, inputs, [out], name=self.names.fresh(base), **attrs),
                 guards)
        return out

    def const(self, array, base) -> str:
        return self.node("Constant", [], base, value=numpy_helper.from_array(np.asarray(array)))

    def scalar(self, name, base, guards) -> str:
        """`name` (one element) as a scalar: a Where over it keeps its operands' shapes."""
        return self.node("Reshape", [name, self.const(np.zeros(0, np.int64), base + "/shape")],
                         base, guards)

    def unsqueeze(self, name, axis, base, guards, out=None) -> str:
        if self.opset >= 13:
            return self.node("Unsqueeze", [name, self.const(np.array([axis]), base + "/axes")],
                             base, guards, out)
        return self.node("Unsqueeze", [name], base, guards, out, axes=[axis])

    def stack(self, values, axis, base, guards, out) -> None:
        parts = [self.unsqueeze(v, axis, f"{base}/{k}", guards) for k, v in enumerate(values)]
        self.node("Concat", parts, base, guards, out, axis=axis)

    def inline(self, graph, bindings, prefix, guards) -> list[str]:
        nodes, outs = inline_graph(graph, bindings, prefix, self.names)
        for n in nodes:
            self.add(n, guards)
        return outs

    def count(self, label, op, n=1, take=True) -> None:
        if self.used + n > self.limit:
            raise UnsupportedOpError(
                f"node {label!r} ({op}): unrolling it passes the unroll limit max_unroll="
                f"{self.limit} (loop iterations and scan steps of the whole model); compile "
                "with a larger max_unroll= if the code size is acceptable")
        if take:
            self.used += n

    def need_where(self, label, op) -> None:
        if self.opset < 9:
            raise UnsupportedOpError(f"node {label!r} ({op}): a condition computed at run time "
                                     "needs Where, which opset 9 introduced; the model is "
                                     f"opset {self.opset}")

    def value(self, name, label, op, what):
        """The known value of `name`, or Later while it is not typed yet, or None (it is
        computed from data at run time)."""
        v = self.known.get(name)
        if v is None and name in self.known.tainted:
            raise Later(f"node {label!r} ({op}): {what} {name!r} is not known yet")
        return v

    # ---- If ----------------------------------------------------------------------------------
    def _if(self, node, typed) -> None:
        label, guards = node.name, self.tags.guarded.get(node.name, ())
        branches = {a.name: a.g for a in node.attribute}
        tbranch = {a.name: a.g for a in typed.attribute}
        c = self.value(node.input[0], label, "If", "its condition")
        if c is not None:
            if c.size != 1:
                raise ModelError(f"node {label!r} (If): the condition has {c.size} elements; "
                                 "it must have one")
            which = "then_branch" if bool(c.reshape(-1)[0]) else "else_branch"
            outs = self.inline(branches[which], {}, f"{label}/{which[:4]}/", guards)
            self._outputs(node, outs, label, "If", guards)
            return
        self.need_where(label, "If")
        types = {}
        for which in ("then_branch", "else_branch"):
            got = len(branches[which].output)
            if got != len(node.output):
                raise ModelError(f"node {label!r} (If): {which} has {got} outputs, the node "
                                 f"{len(node.output)}")
            types[which] = [proto_type(o) for o in tbranch[which].output]
        for k, (t, e) in enumerate(zip(types["then_branch"], types["else_branch"],
                                       strict=True)):
            if static_dims(t) is None or static_dims(e) is None:
                raise Later(f"node {label!r} (If): its condition is computed at run time and "
                             f"output {k} has no static shape (then {_type_text(t)}, else "
                             f"{_type_text(e)}); compilerkit computes both branches and "
                             "selects, which needs static shapes")
            if t != e:
                raise UnsupportedOpError(
                    f"node {label!r} (If): its condition is computed at run time and output "
                    f"{k} differs between the branches (then {_type_text(t)}, else "
                    f"{_type_text(e)}); compilerkit computes both branches and selects, which "
                    "needs outputs of the same type and shape (a constant condition inlines "
                    "the taken branch)")
        key = self.scalar(node.input[0], f"{label}/cond", guards)
        then = self.inline(branches["then_branch"], {}, f"{label}/then/", (*guards, key))
        other = self.inline(branches["else_branch"], {}, f"{label}/else/", (*guards, "!" + key))
        for k, out in enumerate(node.output):
            if out:
                self.where(key, then[k], other[k], f"{label}/select", guards, out)

    def where(self, key, a, b, base, guards, out=None) -> str:
        out = self.node("Where", [key, a, b], base, guards, out)
        self.tags.conditions[self.made[-1].name] = key
        return out

    def _outputs(self, node, values, label, op, guards) -> None:
        for out, v in zip(node.output, values, strict=False):
            if out:
                self.node("Identity", [v], f"{label}/out", guards, out)

    # ---- Loop --------------------------------------------------------------------------------
    def _loop(self, node, typed) -> None:
        label, guards = node.name, self.tags.guarded.get(node.name, ())
        body = next(a.g for a in node.attribute if a.name == "body")
        ins = list(node.input) + [""] * (2 - min(len(node.input), 2))
        trip, cond, init = ins[0], ins[1], ins[2:]
        n, k_scan = len(init), len(body.output) - 1 - len(init)
        if len(body.input) != 2 + n or k_scan < 0 or len(node.output) > n + k_scan:
            raise ModelError(f"node {label!r} (Loop): the body takes {len(body.input)} inputs "
                             f"and gives {len(body.output)} outputs for {n} carried values; it "
                             f"must take {2 + n} and give at least {1 + n}")
        m = None
        if trip:
            v = self.value(trip, label, "Loop", "its trip count (input 0)")
            if v is None:
                raise UnsupportedOpError(
                    f"node {label!r} (Loop): its trip count (input 0, {text(trip)!r}) is only "
                    "known at run time; compilerkit unrolls loops, so it must be a constant or "
                    "computed from static shapes")
            m = max(int(v.reshape(-1)[0]), 0)
        carried, scans, active, k = list(init), [[] for _ in range(k_scan)], None, 0
        cond_now = cond
        if cond:
            self.value(cond, label, "Loop", "its condition (input 1)")
        while m is None or k < m:
            if active is None and cond_now:
                v = self.known.get(cond_now)
                if v is not None and not bool(v.reshape(-1)[0]):
                    break
                if v is None:  # from here on the condition is computed at run time
                    active = self._while(label, m, k, n, k_scan, cond_now, guards)
                    if active is None:
                        break
            self.count(label, "Loop")
            it = self.const(np.int64(k), f"{label}/{k}/iter")
            cond_in = active or cond_now or self.const(np.bool_(True), f"{label}/{k}/cond")
            bind = {body.input[0].name: it, body.input[1].name: cond_in}
            bind.update({body.input[2 + j].name: carried[j] for j in range(n)})
            g = (*guards, active) if active else guards
            outs = self.inline(body, bind, f"{label}/{k}/", g)
            if active:
                carried = [self.where(active, outs[1 + j], carried[j], f"{label}/{k}/freeze",
                                      guards) for j in range(n)]
                more = self.scalar(outs[0], f"{label}/{k}/more", guards)
                active = self.node("And", [active, more], f"{label}/{k}/active", guards)
            else:
                carried, cond_now = outs[1:1 + n], outs[0]
                for j in range(k_scan):
                    scans[j].append(outs[1 + n + j])
            k += 1
        self._outputs(node, carried, label, "Loop", guards)
        body_types = [proto_type(o) for o in next(
            a.g for a in typed.attribute if a.name == "body").output]
        for j, out in enumerate(node.output[n:]):
            if out and not scans[j]:  # no iteration: empty, if the element type is known
                elem, dims = body_types[1 + n + j]
                if static_dims((elem, dims)) is None or not elem:
                    raise UnsupportedOpError(f"node {label!r} (Loop): it runs no iteration, so "
                                             f"scan output {j} ({text(out)!r}) is empty, and "
                                             "its element shape is not known")
                empty = np.zeros([0, *dims], helper.tensor_dtype_to_np_dtype(elem))
                self.node("Identity", [self.const(empty, f"{label}/scan{j}")], label, guards,
                          out)
            elif out:
                self.stack(scans[j], 0, f"{label}/scan{j}", guards, out)

    def _while(self, label, m, k, n, k_scan, cond, guards):
        """Iterations k.. of a loop whose condition is computed at run time: the `active` flag
        of iteration k (None when nothing needs computing)."""
        if m is None:
            raise UnsupportedOpError(
                f"node {label!r} (Loop): it has no trip count and its condition ({text(cond)!r}) "
                "is computed at run time, so the number of iterations is only known at run "
                "time; compilerkit unrolls loops and needs a trip count")
        if k_scan:
            raise UnsupportedOpError(
                f"node {label!r} (Loop): its condition ({text(cond)!r}) is computed at run "
                f"time, so its {k_scan} scan output(s) would have a run-time length; "
                "compilerkit compiles static shapes only")
        self.need_where(label, "Loop")
        if n == 0:
            return None  # nothing carried: the remaining iterations compute nothing used
        self.count(label, "Loop", m - k, take=False)  # each iteration counts itself
        return self.scalar(cond, f"{label}/{k}/active", guards)


__all__ = ["expand_control_flow", "check_max_unroll", "Tags", "CONTROL_FLOW",
           "DEFAULT_MAX_UNROLL", "GUARDS", "GUARD", "inline_graph"]
