"""GELU fusion on ONNX IR (`fuse-gelu`): the GELU that exporters write out as elementwise
nodes, exact 0.5 * x * (1 + erf(x / sqrt(2))) in five nodes or the tanh form in eight,
becomes one `Gelu` node (ONNX's op of opset 20, `approximate` "none" or "tanh", lowered by
lowering/mathops.py), so the lowering computes it in one loop nest instead of writing and
reading back the intermediate tensors of the feed-forward layer's width.

    u = Div(x, sqrt(2))  or  Mul(x, 1/sqrt(2))
    e = Erf(u);  a = Add(e, 1)
    y = Mul(Mul(x, a), 0.5)  or  Mul(Mul(x, 0.5), a)      (either operand order anywhere)

is what torch.onnx writes for `nn.GELU()` before opset 20 and what onnxruntime's own Gelu
fusion looks for. The tanh form, as tf2onnx writes Keras's `gelu(approximate=True)`:

    s = Mul(sqrt(2/pi), Add(x, Mul(0.044715, Pow(x, 3))));  e = Tanh(s)
    then the same Add(e, 1) and products with x and 0.5 as above.

The constants must be one-element constants within `tolerance` (relative) of theirs (the
exponent exactly 3), and every intermediate result must have no other use (a value the graph
also returns, or reads elsewhere, is kept). The answer is the same function; the Gelu
lowering multiplies by 1/sqrt(2) where a Div divided and groups the products as
(0.5 x)(1 + erf), so results may differ from the unfused chain in the last bits. Runs before
fuse-elementwise, which would otherwise fold the Tanh into the Mul before it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects.builtin import StringAttr
from xdsl.passes import ModulePass

from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend.arguments import OptionError
from compilerkit.frontend.checks import move_declared
from compilerkit.onnx_passes.single_node import main_func, node_label

TOLERANCE = 1e-6


def _op_kind(op) -> str | None:
    """The ONNX op type of `op` (None for anything else, or no op)."""
    name = getattr(op, "name", "") or ""
    return name[5:] if name.startswith("onnx.") else None


def _kind(v) -> str | None:
    """The ONNX op type of the op that produced `v` (None for a block argument)."""
    return _op_kind(getattr(v, "owner", None))


def _only_use(v):
    """The one operation that reads `v`, or None (no use, or several)."""
    uses = list(v.uses)
    return uses[0].operation if len(uses) == 1 else None


def _near(v, module, want: float, tol: float) -> bool:
    """Whether `v` is a one-element constant within `tol` (relative) of `want`."""
    value = onnx_d.constant_value(v, module)
    return (value is not None and value.size == 1 and value.dtype.kind == "f"
            and abs(float(value.reshape(-1)[0]) - want) <= tol * abs(want))


def _split(op, module, want: float, tol: float):
    """(the other operand) when one operand of the binary `op` is the constant `want`."""
    a, b = op.operands
    if _near(b, module, want, tol):
        return a
    if _near(a, module, want, tol):
        return b
    return None


def _erf_input(erf, module, tol):
    """x, and the op computing erf's input, when that input is Div(x, sqrt(2)) or
    Mul(x, 1/sqrt(2))."""
    u = erf.operands[0]
    if _only_use(u) is not erf:
        return None
    if _kind(u) == "Mul":
        x = _split(u.owner, module, 1 / math.sqrt(2), tol)
    elif _kind(u) == "Div" and _near(u.owner.operands[1], module, math.sqrt(2), tol):
        x = u.owner.operands[0]
    else:
        return None
    return None if x is None else (x, [u.owner])


def _tanh_input(tanh, module, tol):
    """x, and the ops computing tanh's input, when it is sqrt(2/pi) (x + 0.044715 x^3)
    with the cube a Pow(x, 3) (Keras's `gelu(approximate=True)` through tf2onnx)."""
    s = tanh.operands[0]
    if _kind(s) != "Mul" or _only_use(s) is not tanh:
        return None
    inner = _split(s.owner, module, math.sqrt(2 / math.pi), tol)
    if _kind(inner) != "Add" or _only_use(inner) is not s.owner:
        return None
    for x, t in (inner.owner.operands, reversed(inner.owner.operands)):
        if _kind(t) != "Mul" or _only_use(t) is not inner.owner:
            continue
        p = _split(t.owner, module, 0.044715, tol)
        if (_kind(p) == "Pow" and _only_use(p) is t.owner and p.owner.operands[0] is x
                and _near(p.owner.operands[1], module, 3.0, 0.0)):
            return x, [s.owner, inner.owner, t.owner, p.owner]
    return None


def _match(core, module, tol):
    """(x, approximate, final op, ops to erase, users first) of a GELU chain around `core`
    (an Erf or a Tanh): its input as _erf_input / _tanh_input say, then 0.5 x (1 + core)."""
    tanh = _op_kind(core) == "Tanh"
    head = (_tanh_input if tanh else _erf_input)(core, module, tol)
    if head is None:
        return None
    x, head_ops = head
    add = _only_use(core.results[0])
    if _op_kind(add) != "Add" or _split(add, module, 1.0, tol) is not core.results[0]:
        return None
    outer = _only_use(add.results[0])
    if _op_kind(outer) != "Mul":
        return None
    a = add.results[0]
    other = outer.operands[1] if outer.operands[0] is a else outer.operands[0]
    approximate = "tanh" if tanh else "none"
    if other is x:  # y = Mul(Mul(x, a), 0.5)
        last = _only_use(outer.results[0])
        if _op_kind(last) != "Mul" or _split(last, module, 0.5, tol) is not outer.results[0]:
            return None
        return x, approximate, last, [last, outer, add, core, *head_ops]
    if _kind(other) == "Mul" and _only_use(other) is outer and _split(
            other.owner, module, 0.5, tol) is x:  # y = Mul(Mul(x, 0.5), a)
        return x, approximate, outer, [outer, other.owner, add, core, *head_ops]
    return None


def fuse_gelu(module, tolerance: float = TOLERANCE) -> int:
    """Replace every GELU chain by one Gelu node; returns how many."""
    block = main_func(module).body.block
    count = 0
    for core in [op for op in block.ops if _op_kind(op) in ("Erf", "Tanh")]:
        found = _match(core, module, tolerance)
        if found is None:
            continue
        x, approximate, last, dead = found
        y = last.results[0]
        if y.type != x.type:  # a broadcast or a cast in the chain: not GELU of x
            continue
        attrs = {"onnx_node_name": StringAttr(node_label(last) + "_gelu")}
        if approximate == "tanh":
            attrs["approximate"] = StringAttr("tanh")
        gelu = onnx_d.create("Gelu", [x], [x.type], attrs)
        block.insert_op_before(gelu, last)
        move_declared(module, y, gelu.results[0])
        y.replace_all_uses_with(gelu.results[0])
        for op in dead:
            block.erase_op(op)
        count += 1
    return count


@dataclass(frozen=True)
class FuseGeluPass(ModulePass):
    """`fuse-gelu{tolerance=1e-06}`: GELU written out as elementwise nodes (exact or tanh
    form) becomes one Gelu; `tolerance` is how close (relative) the constants must be."""

    name = "fuse-gelu"
    tolerance: float = TOLERANCE

    def __post_init__(self):
        if not isinstance(self.tolerance, (int, float)) or not 0 <= self.tolerance < 0.01:
            raise OptionError(f"fuse-gelu: tolerance must be a number in [0, 0.01), got "
                              f"{self.tolerance!r}")

    def apply(self, ctx, op) -> None:
        fuse_gelu(op, self.tolerance)
