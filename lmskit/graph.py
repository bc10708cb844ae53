"""The framework-neutral training graph: Op, Tensor, Variable, Graph.

A Graph is one training step (forward, backward, update) as plain Python data, so that lifetimes,
swap rules, the checker, the simulator and the planner never touch TensorFlow.

Assumptions:
- Every op runs on one of two logical places: "device" (the accelerator) or "host" (CPU memory).
  Captured ops are all "device"; only swap-outs live on "host".
- Shapes are affine in the batch size, dimension by dimension: dim = coef * batch + const. That is
  what lets memory at any batch size be computed without re-tracing (capture measures coef and
  const by inferring shapes at two batch sizes).
- Variables are persistent: they occupy memory for the whole step and are never swapped.
  ReadVariableOp outputs are views of the variable (TF hands out the buffer, it does not copy),
  so they cost no extra bytes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

PHASES = ("forward", "backward", "update")
# What the user's scope hands TFLMS v1 as its "optimizer scope" (rules.topos.grad_ops).
SCOPINGS = ("keras-callback", "minimize")
KINDS = ("weight", "activation", "gradient", "optimizer-state", "temporary")

# Ops whose output is the same buffer as their first input when both sit on the same place.
# TF forwards the buffer for these, so counting them twice would overstate memory.
ALIAS_TYPES = frozenset({"Identity", "Reshape", "ExpandDims", "Squeeze", "StopGradient",
                         "Snapshot"})

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1,
               "int16": 2, "int32": 4, "int64": 8, "bool": 1, "complex64": 8, "complex128": 16,
               "resource": 0, "variant": 0, "string": 0}


@dataclass
class Tensor:
    """One output of one op. Shape at batch b is coef[i] * b + const[i] for each dimension."""

    name: str                 # "<op>:<index>", TensorFlow's spelling
    op: str                   # producing op's name
    dtype: str
    coef: tuple[int, ...]
    const: tuple[int, ...]
    variable: str | None = None   # set when this tensor is a view of a persistent variable

    @property
    def rank(self) -> int:
        return len(self.coef)

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES.get(self.dtype, 4)

    @property
    def batched(self) -> bool:
        return any(self.coef)

    def shape(self, batch: int) -> tuple[int, ...]:
        return tuple(c * batch + k for c, k in zip(self.coef, self.const, strict=True))

    def bytes(self, batch: int) -> int:
        n = self.itemsize
        for d in self.shape(batch):
            n *= d
        return n


@dataclass
class Op:
    """One node. inputs are tensor names (data edges); control_inputs are op names."""

    name: str
    type: str
    inputs: list[str] = field(default_factory=list)
    control_inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    device: str = "device"
    phase: str = "forward"
    attrs: dict = field(default_factory=dict)   # small plain values: transpose_a, swap role, ...

    def copy(self) -> Op:
        return dataclasses.replace(self, inputs=list(self.inputs),
                                   control_inputs=list(self.control_inputs),
                                   outputs=list(self.outputs), attrs=dict(self.attrs))


@dataclass
class Variable:
    """A persistent tensor (model weight or optimizer slot); resident for the whole step."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    trainable: bool
    kind: str = "weight"      # "weight" or "optimizer-state"

    @property
    def bytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * DTYPE_BYTES.get(self.dtype, 4)


class GraphError(ValueError):
    """The graph is not well formed: an op reads a tensor no op produces, a control input names
    no op, a tensor claims a producer that does not list it."""


def producer_name(tensor_name: str) -> str:
    return tensor_name.rsplit(":", 1)[0]


class Graph:
    """Ops in their original (definition) order, tensors by name, persistent variables.

    `loss` names the loss tensor; `fetches` the tensors a step returns. `source` carries whatever
    the framework needs to run the graph again (capture puts the TF GraphDef and variable handles
    there); rewrites pass it along untouched.
    """

    def __init__(self, ops=(), tensors=(), variables=(), loss=None, fetches=(), source=None):
        self.ops: dict[str, Op] = {op.name: op for op in ops}
        self.tensors: dict[str, Tensor] = {t.name: t for t in tensors}
        self.variables: dict[str, Variable] = {v.name: v for v in variables}
        self.loss: str | None = loss
        self.fetches: list[str] = list(fetches)
        self.source = source
        self.options: dict = {}   # the swap options that produced this graph (empty: original)
        # Which ops TFLMS v1's optimizer scopes select (capture's `scoping`, SCOPINGS):
        # "keras-callback" the backward ops only, "minimize" the update ops too.
        self.scoping: str = "keras-callback"
        # Per-op facts rewrites do not change (e.g. the simulator's FLOP counts), keyed by op
        # name; shared with copies so a rewrite does not recompute them.
        self.cache: dict = {}
        self.invalidate()
        self.validate()

    def validate(self) -> None:
        """Raise GraphError naming the op and the tensor (or op) at fault when an edge points at
        nothing. Every Graph is checked when it is made (capture, rewrites, hand-built graphs),
        so the schedule, rules and simulator never meet a dangling name deep inside."""
        for op in self.ops.values():
            self._check_op(op)
        for what, names in (("loss", [self.loss] if self.loss is not None else []),
                            ("fetch", self.fetches)):
            for t in names:
                if t not in self.tensors or self.tensors[t].op not in self.ops:
                    raise GraphError(f"the graph's {what} {t!r} is not a tensor any op produces")

    def _check_op(self, op: Op) -> None:
        for t in op.outputs:
            tensor = self.tensors.get(t)
            if tensor is None:
                raise GraphError(f"op {op.name!r} ({op.type}) lists output {t!r}, which has no "
                                 "Tensor in the graph")
            if tensor.op != op.name:
                raise GraphError(f"op {op.name!r} ({op.type}) lists output {t!r}, but that "
                                 f"tensor says op {tensor.op!r} produces it")
        for t in op.inputs:
            tensor = self.tensors.get(t)
            if tensor is None or tensor.op not in self.ops or t not in self.ops[tensor.op].outputs:
                raise GraphError(f"op {op.name!r} ({op.type}) reads tensor {t!r}, which no op "
                                 "in the graph produces")
        for c in op.control_inputs:
            if c not in self.ops:
                raise GraphError(f"op {op.name!r} ({op.type}) has control input {c!r}, which is "
                                 "not an op of the graph")

    def __repr__(self):
        phases = {p: sum(op.phase == p for op in self.ops.values()) for p in PHASES}
        return f"<Graph {len(self.ops)} ops {phases} {len(self.variables)} variables>"

    def __len__(self):
        return len(self.ops)

    # -- structure -----------------------------------------------------------------------------
    def producer(self, tensor_name: str) -> Op:
        return self.ops[self.tensors[tensor_name].op]

    def consumers(self, tensor_name: str) -> list[Op]:
        """Ops reading a tensor through a data edge, in definition order."""
        if self._consumers is None:
            index: dict[str, list[Op]] = {}
            for op in self.ops.values():
                for t in op.inputs:
                    lst = index.setdefault(t, [])
                    if not lst or lst[-1] is not op:
                        lst.append(op)
            self._consumers = index
        return self._consumers.get(tensor_name, [])

    def predecessors(self, op: Op) -> list[str]:
        """Names of ops this op waits for: data producers, then control inputs."""
        return [producer_name(t) for t in op.inputs] + list(op.control_inputs)

    def successors(self) -> dict[str, list[str]]:
        succ: dict[str, list[str]] = {name: [] for name in self.ops}
        for op in self.ops.values():
            for p in self.predecessors(op):
                succ[p].append(op.name)
        return succ

    def invalidate(self):
        """Call after mutating ops in place so derived indexes (consumers, successors, the
        schedule cached by lmskit.schedule) are rebuilt."""
        self._consumers = None
        self._succ = None
        self._schedule = None

    def copy(self) -> Graph:
        g = Graph([op.copy() for op in self.ops.values()], self.tensors.values(),
                  self.variables.values(), self.loss, self.fetches, self.source)
        g.cache = self.cache
        g.scoping = self.scoping
        return g

    def add_op(self, op: Op, out_tensors=()):
        if op.name in self.ops:
            raise ValueError(f"op {op.name!r} already exists")
        before = {t.name: self.tensors.get(t.name) for t in out_tensors}
        for t in out_tensors:
            self.tensors[t.name] = t
        try:
            self._check_op(op)
        except GraphError:
            for name, t in before.items():
                if t is None:
                    del self.tensors[name]
                else:
                    self.tensors[name] = t
            raise
        self.ops[op.name] = op
        self.invalidate()

    # -- sizes ---------------------------------------------------------------------------------
    def tensor_bytes(self, batch: int) -> dict[str, int]:
        return {name: t.bytes(batch) for name, t in self.tensors.items()}

    def variable_bytes(self, kind: str | None = None) -> int:
        return sum(v.bytes for v in self.variables.values() if kind is None or v.kind == kind)

    def kind(self, tensor_name: str) -> str:
        """weight / activation / gradient / optimizer-state / temporary for a tensor.

        activation: made in the forward phase and read by a backward op (saved for backward);
        gradient: made in the backward phase; everything else made per step is temporary.
        Swap copies keep the kind of what they copy.
        """
        t = self.tensors[tensor_name]
        if t.variable is not None:
            return self.variables[t.variable].kind if t.variable in self.variables else "weight"
        op = self.ops[t.op]
        if "swap_of" in op.attrs:
            return self.kind(op.attrs["swap_of"])
        if op.phase == "backward":
            return "gradient"
        if op.phase == "forward" and any(c.phase == "backward" or "swap_of" in c.attrs
                                         for c in self.consumers(tensor_name)):
            return "activation"
        return "temporary"

    def gradients(self) -> list[str]:
        """Backward tensors that the update phase reads: the gradients applied to variables."""
        out = []
        for op in self.ops.values():
            if op.phase != "update":
                continue
            for t in op.inputs:
                while "swap_of" in self.producer(t).attrs:   # a swapped gradient: its source
                    t = self.producer(t).attrs["swap_of"]
                if self.producer(t).phase == "backward" and t not in out:
                    out.append(t)
        return out
