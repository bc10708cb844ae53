"""Index arithmetic of Kernel IR read as affine functions of the loop induction variables,
the form LoopNest's code generator works from (every access is a base plus a stride per loop).

    %a = arith.muli %i, %c4 ; %b = arith.addi %a, %j      ->  Affine({i: 4, j: 1}, 0)
    minsi(maxsi(e, 0), d - 1)                              ->  Clamp(e, 0, d - 1)
    cmpi sge e, 0 / cmpi slt e, d / andi                   ->  Cond([e, d - 1 - e])  (each >= 0)

Anything else (an index computed by select, division, a data-dependent index such as
Gather's) raises `Unsupported` and the nest goes to the LLVM code generator. `interval` gives
the range of an affine index over static loop bounds, which is how the generated code is
shown to stay inside its buffers before any byte of it is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType


class Unsupported(Exception):
    """This nest is not one the loopnest generator handles (the message says why); it is
    compiled by LLVM instead."""


@dataclass(frozen=True)
class Affine:
    terms: tuple = ()  # ((induction variable, coefficient), ...), no zero coefficients
    const: int = 0

    @staticmethod
    def of(terms: dict, const: int = 0) -> Affine:
        return Affine(tuple([(v, c) for v, c in terms.items() if c]), const)

    def as_dict(self) -> dict:
        return dict(self.terms)

    # Index arithmetic is most of what the generator does per load and store: the common
    # cases (a constant operand, scaling by 1) return without building a dict.
    def __add__(self, other: Affine) -> Affine:
        if not other.terms:
            return Affine(self.terms, self.const + other.const) if other.const else self
        if not self.terms:
            return Affine(other.terms, self.const + other.const)
        d = dict(self.terms)
        for v, c in other.terms:
            d[v] = d.get(v, 0) + c
        return Affine.of(d, self.const + other.const)

    def scale(self, k: int) -> Affine:
        if k == 1:
            return self
        if k == 0:
            return Affine()
        return Affine(tuple([(v, c * k) for v, c in self.terms]), self.const * k)

    def coef(self, v) -> int:
        return self.as_dict().get(v, 0)

    def without(self, v) -> Affine:
        return Affine.of({u: c for u, c in self.terms if u is not v}, self.const)

    def key(self) -> tuple:
        """A hashable identity (induction variables by id)."""
        return (tuple(sorted((id(v), c) for v, c in self.terms)), self.const)


@dataclass(frozen=True)
class Clamp:
    expr: Affine
    lo: int | None
    hi: int | None


@dataclass
class Cond:
    atoms: list = field(default_factory=list)  # affine expressions, each required >= 0


def _const_int(op):
    return int(op.value.value.data)


def interval(e: Affine, ranges: dict) -> tuple[int, int]:
    """[min, max] of `e` when each induction variable v ranges over ranges[v] = (lo, hi-1)."""
    lo = hi = e.const
    for v, c in e.terms:
        a, b = ranges[v]
        lo += min(c * a, c * b)
        hi += max(c * a, c * b)
    return lo, hi


class IndexEnv:
    """SSA value -> Affine / Clamp / Cond / float constant, filled as ops are read."""

    def __init__(self, node: str = "?"):
        self.values = {}
        self.node = node

    def define_iv(self, v) -> None:
        self.values[v] = Affine(((v, 1),), 0)

    def __getitem__(self, v):
        if v not in self.values:
            raise Unsupported(f"node {self.node!r}: value {v.name_hint or v} is not affine "
                              "in the loop variables")
        return self.values[v]

    def affine(self, v) -> Affine:
        x = self[v]
        if not isinstance(x, Affine):
            raise Unsupported(f"node {self.node!r}: a non-affine index ({type(x).__name__})")
        return x

    def read(self, op) -> bool:
        """Record an index/i1 op; False when `op` is not index arithmetic."""
        name = op.name
        if isinstance(op, arith.ConstantOp):
            t = op.result.type
            if isinstance(t, IndexType):
                self.values[op.result] = Affine((), _const_int(op))
                return True
            return False
        if name in ("arith.addi", "arith.subi", "arith.muli", "arith.maxsi", "arith.minsi") \
                and isinstance(op.results[0].type, IndexType):
            a, b = (self[o] for o in op.operands)
            if name == "arith.addi":
                self.values[op.results[0]] = self._aff(a) + self._aff(b)
            elif name == "arith.subi":
                self.values[op.results[0]] = self._aff(a) + self._aff(b).scale(-1)
            elif name == "arith.muli":
                a, b = self._aff(a), self._aff(b)
                if not a.terms:
                    a, b = b, a
                if b.terms:
                    raise Unsupported(f"node {self.node!r}: a product of two loop variables")
                self.values[op.results[0]] = a.scale(b.const)
            else:
                self.values[op.results[0]] = self._clamp(name, a, b)
            return True
        if name == "arith.cmpi" and isinstance(op.operands[0].type, IndexType):
            a, b = (self._aff(self[o]) for o in op.operands)
            pred = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"][
                op.predicate.value.data]
            diff = a + b.scale(-1)  # a - b
            atoms = {"sge": diff, "sgt": diff + Affine((), -1), "sle": diff.scale(-1),
                     "slt": diff.scale(-1) + Affine((), -1)}
            if pred not in atoms:
                raise Unsupported(f"node {self.node!r}: index comparison {pred}")
            self.values[op.results[0]] = Cond([atoms[pred]])
            return True
        if name == "arith.andi" and all(isinstance(self.values.get(o), Cond)
                                        for o in op.operands):
            a, b = (self.values[o] for o in op.operands)
            self.values[op.results[0]] = Cond(a.atoms + b.atoms)
            return True
        return False

    def _aff(self, x) -> Affine:
        if not isinstance(x, Affine):
            raise Unsupported(f"node {self.node!r}: arithmetic on a clamped index")
        return x

    def _clamp(self, name, a, b):
        if isinstance(a, Affine) and not a.terms and not isinstance(b, Affine):
            a, b = b, a
        if not isinstance(b, Affine) or b.terms:
            raise Unsupported(f"node {self.node!r}: {name} of two loop-dependent indices")
        c = b.const
        if isinstance(a, Affine):
            a = Clamp(a, None, None)
        if name == "arith.maxsi":
            if a.hi is not None:
                raise Unsupported(f"node {self.node!r}: max after min on an index")
            return Clamp(a.expr, c if a.lo is None else max(a.lo, c), None)
        return Clamp(a.expr, a.lo, c if a.hi is None else min(a.hi, c))
