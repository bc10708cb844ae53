"""What the frontend hands the later passes besides the IR: the compile's memory budget and the
types a model declares but that could not be checked yet.

The budget bounds every tensor the compiler itself would hold or emit (initializers, external
data, folded constants, ConstantOfShape/Expand/Tile results, the sum of the constants put into
the machine code). It is checked before anything is allocated, so a 150-byte model asking for
10^10 floats gets a `ModelError` instead of an out-of-memory kill or an LLVM abort.

Declared types (`value_info`, graph outputs) are never used as types: they are compared with
what the operands and the op's definition give, and the rule is onnxruntime's (graph.cc's
MergeShapeInfo): a declared element type that disagrees is refused (a `ModelError`; onnxruntime
refuses the model too), a declared shape that disagrees (dims or rank) is overridden by the
inferred one, with a `DeclaredShapeWarning` naming the tensor, its node and both types
(onnxruntime logs "Error merging shape info ... Falling back to lenient merge" and runs with
the computed shapes). Overriding is safe because the compile never reads a declared shape. A
graph input's declared shape is not a declaration of this kind but the contract with the
caller's data: it is fixed (or `input_shapes` fixes it) and every run checks it.

Where ONNX's whole-model inference could not yet give a static type (a shape computed by a
subgraph that only folding resolves), the declared type is kept here and compared when
compilerkit's own shape inference or folding types the value. Both tables are side tables keyed
by the module, like the constants' resource table.
"""

from __future__ import annotations

import math
import warnings
import weakref

import numpy as np
from onnx import TensorProto

from mlsys_viz.units import human_bytes


class ModelError(ValueError):
    """The ONNX input is malformed or refused (bad file, unsafe external data, a tensor above the
    budget, a declared type that disagrees, ...)."""


class UnsupportedOpError(NotImplementedError):
    """An ONNX node whose operator compilerkit cannot compile (a valid model it declines)."""


class DeclaredShapeWarning(UserWarning):
    """A model's value_info or graph output declares a shape that disagrees with the one its
    operands and ops give; the model was compiled with the inferred shape, as onnxruntime runs
    it. `warnings.simplefilter("error", DeclaredShapeWarning)` makes it a refusal."""


class ConvAccuracyWarning(UserWarning):
    """A Conv lowered by a Winograd or FFT algorithm asked for by name, on weights outside
    the bound "auto" keeps to (lowering/conv_algorithm.py `well_scaled`): its rounding error
    in every output of a tile scales with the largest weight, so outputs small beside it can
    lose most of their digits. The model is compiled as asked; "classic" or "auto" sums each
    output's own terms. `warnings.simplefilter("error", ConvAccuracyWarning)` refuses such
    models."""


class OpsetUpgradeWarning(UserWarning):
    """A model of a default-domain opset older than compilerkit compiles was upgraded with
    `onnx.version_converter` on import (the ONNX IR's func records both opsets). Silence it
    with `warnings.simplefilter("ignore", OpsetUpgradeWarning)`; "error" refuses such models."""


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


def _shapes_disagree(dd, idims) -> bool:
    if dd is None or idims is None:
        return False
    if len(dd) != len(idims):
        return True
    return any(a is not None and b is not None and a >= 0 and b >= 0 and a != b
               for a, b in zip(dd, idims, strict=True))


def types_disagree(declared, inferred) -> bool:
    """declared/inferred: (elem or 0, dims list with -1/None for unknown, or None for unranked).
    Unknown parts agree with anything."""
    (de, dd), (ie, idims) = declared, inferred
    return bool(de and ie and de != ie) or _shapes_disagree(dd, idims)


def mismatch_error(name, node, declared, inferred) -> ModelError:
    """The refusal of a declared element type that disagrees with the inferred one."""
    return ModelError(
        f"tensor {name!r} (output of node {node!r}): the model declares "
        f"{onnx_type_str(*declared)} but the node's operands and definition give "
        f"{onnx_type_str(*inferred)}; a declared element type that disagrees is refused "
        "(onnxruntime refuses it too), fix the model's value_info/outputs")


def compare_declared(name, node, declared, inferred) -> bool:
    """Compare what the model declares for tensor `name` (output of `node`) with the inferred
    type, as onnxruntime does: another element type is a `ModelError`; another shape is
    overridden by the inferred one, with a `DeclaredShapeWarning` saying so. Returns whether
    they disagreed (the declaration needs no further check then)."""
    (de, dd), (ie, idims) = declared, inferred
    if de and ie and de != ie:
        raise mismatch_error(name, node, declared, inferred)
    if not _shapes_disagree(dd, idims):
        return False
    shown = onnx_type_str(de or ie, idims)
    warnings.warn(DeclaredShapeWarning(
        f"tensor {name!r} (output of node {node!r}): the model declares "
        f"{onnx_type_str(*declared)} but the node's operands and definition give "
        f"{onnx_type_str(*inferred)}; compiled as {shown}, the declared shape is ignored (as "
        "onnxruntime does); fix the model's value_info/outputs to silence this"), stacklevel=2)
    return True


def record_declared(module, value, name: str, node: str, declared) -> None:
    """Keep a declared type to check once `value` gets a static type."""
    _DECLARED.setdefault(module, {})[value] = (name, node, declared)


def check_declared(module, value, elem_code: int, dims) -> None:
    """Compare a newly inferred type of `value` with what the model declared for it, if any
    (compare_declared: a ModelError or a warning, once)."""
    table = _DECLARED.get(module, {})
    entry = table.get(value)
    if entry is None:
        return
    name, node, declared = entry
    if compare_declared(name, node, declared, (elem_code, list(dims))):
        del table[value]  # warned: a later, finer type of the same value says nothing new


def move_declared(module, old, new) -> None:
    """`old` was replaced by `new` (folding): the declaration follows the value."""
    table = _DECLARED.get(module)
    if table is not None and old in table:
        table[new] = table.pop(old)
