"""What the frontend hands the later passes besides the IR: the compile's memory budget and the
types a model declares but that could not be checked yet.

The budget bounds every tensor the compiler itself would hold or emit (initializers, external
data, folded constants, ConstantOfShape/Expand/Tile results, the sum of the constants put into
the machine code). It is checked before anything is allocated, so a 150-byte model asking for
10^10 floats gets a `ModelError` instead of an out-of-memory kill or an LLVM abort.

Declared types (`value_info`, graph outputs) are never used as types: they are compared with
what the operands and the op's definition give. Where ONNX's whole-model inference could not yet
give a static type (a shape computed by a subgraph that only folding resolves), the declared
type is kept here and checked when compilerkit's own shape inference or folding types the value.
Both tables are side tables keyed by the module, like the constants' resource table.
"""

from __future__ import annotations

import math
import weakref

import numpy as np
from onnx import TensorProto

from mlsys_viz.units import human_bytes


class ModelError(ValueError):
    """The ONNX input is malformed or refused (bad file, unsafe external data, a tensor above the
    budget, a declared type that disagrees, ...)."""


class UnsupportedOpError(NotImplementedError):
    """An ONNX node whose operator compilerkit cannot compile (a valid model it declines)."""


# Default budget: large enough for any model a laptop can run, small enough that LLVM can still
# place the constants (a larger static section overflows 32-bit relocations and aborts).
DEFAULT_MAX_BYTES = 2 << 30

_BUDGET: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_DECLARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def set_budget(module, max_bytes: int | None) -> None:
    _BUDGET[module] = DEFAULT_MAX_BYTES if max_bytes is None else int(max_bytes)


def budget_of(module) -> int:
    return _BUDGET.get(module, DEFAULT_MAX_BYTES)


def share_checks(src, dst) -> None:
    """A module derived from `src` (lowering makes a new one) keeps its budget."""
    if src in _BUDGET:
        _BUDGET[dst] = _BUDGET[src]


def check_bytes(what: str, dims, itemsize: int, budget: int) -> None:
    """Refuse a tensor of `dims` x `itemsize` bytes above the budget, before allocating it."""
    n = math.prod(int(d) for d in dims) * int(itemsize)
    if n > budget:
        raise ModelError(f"{what}: shape {list(dims)} needs {human_bytes(n)}, above the compile "
                         f"budget of {human_bytes(budget)} (raise it with "
                         f"compile(..., max_bytes=...) if this is intended)")


# ---- declared types -------------------------------------------------------------------------

def dtype_name(elem: int) -> str:
    """ONNX's name of an element type code, or the code itself when ONNX defines none."""
    try:
        return TensorProto.DataType.Name(elem)
    except ValueError:
        return f"{elem} (not an ONNX element type)"


def onnx_type_str(elem: int, dims) -> str:
    """'float32[2, 3]' for ONNX elem type 1 and dims [2, 3]; unknown dims print as '?',
    an unknown rank as '[*]'."""
    try:
        name = str(np.dtype(_np_of(elem)))
    except (KeyError, TypeError, ValueError):
        name = dtype_name(elem).lower() if elem else "?"
    if dims is None:
        return f"{name}[*]"
    return f"{name}[{', '.join('?' if d is None or d < 0 else str(d) for d in dims)}]"


def _np_of(elem: int):
    from onnx.helper import tensor_dtype_to_np_dtype
    return tensor_dtype_to_np_dtype(elem)


def types_disagree(declared, inferred) -> bool:
    """declared/inferred: (elem or 0, dims list with -1/None for unknown, or None for unranked).
    Unknown parts agree with anything."""
    (de, dd), (ie, idims) = declared, inferred
    if de and ie and de != ie:
        return True
    if dd is None or idims is None:
        return False
    if len(dd) != len(idims):
        return True
    return any(a is not None and b is not None and a >= 0 and b >= 0 and a != b
               for a, b in zip(dd, idims, strict=True))


def mismatch_error(name, node, declared, inferred) -> ModelError:
    return ModelError(
        f"tensor {name!r} (output of node {node!r}): the model declares "
        f"{onnx_type_str(*declared)} but the node's operands and definition give "
        f"{onnx_type_str(*inferred)}; declared types are not trusted, fix the model's "
        "value_info/outputs")


def record_declared(module, value, name: str, node: str, declared) -> None:
    """Keep a declared type to check once `value` gets a static type."""
    _DECLARED.setdefault(module, {})[value] = (name, node, declared)


def check_declared(module, value, elem_code: int, dims) -> None:
    """Compare a newly inferred type of `value` with what the model declared for it, if any."""
    entry = _DECLARED.get(module, {}).get(value)
    if entry is None:
        return
    name, node, declared = entry
    if types_disagree(declared, (elem_code, list(dims))):
        raise mismatch_error(name, node, declared, (elem_code, list(dims)))


def move_declared(module, old, new) -> None:
    """`old` was replaced by `new` (folding): the declaration follows the value."""
    table = _DECLARED.get(module)
    if table is not None and old in table:
        table[new] = table.pop(old)
