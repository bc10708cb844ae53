"""ONNX IR: the `onnx` dialect, one op per ONNX operator, and the helpers the passes share.

Each ONNX node becomes one op named `onnx.<OpType>`, generated from ONNX's schema
(onnx_schema.py): named operands (`op.X`, `op.W`, `op.B`), an absent optional input typed `none`
(the result of `onnx.NoValue`), typed attributes with the schema's defaults, the `Pure` trait
and a verifier from the schema's type constraints. ONNX attributes are op attributes (ints ->
i64 IntegerAttr, floats -> f32 FloatAttr, lists -> ArrayAttr, strings -> StringAttr, tensors ->
dense attributes). Constants are `onnx.Constant` ops holding a `dense<...>` attribute, or a
`dense_resource<...>` handle for large ones (the bytes then live in the module's resource
table, see `resources`).
"""

from __future__ import annotations

import weakref

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    Float32Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    NoneType,
    Signedness,
    StringAttr,
    TensorType,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import IRDLOperation

from compilerkit.dialects.onnx_schema import (
    INFO,
    OPS,
    OnnxOp,
    arrange_inputs,
    arrange_outputs,
    input_slots,
    onnx_inputs,
    opset_of,
)

# Every operator of the default ONNX domain (newest version), plus onnx.NoValue.
# Lowering supports a subset (compilerkit.lowering.SUPPORTED) and refuses the rest.
ONNX_OPS = sorted(OPS)
globals().update({cls.__name__: cls for cls in OPS.values()})

ONNX = Dialect("onnx", list(OPS.values()), [])


def op_type(op) -> str:
    """The ONNX operator name of an onnx dialect op (`onnx.Conv` -> `Conv`)."""
    return op.name.split(".", 1)[1]


def create(op_type_: str, operands, result_types, attributes=None) -> IRDLOperation:
    return OPS[op_type_].create(
        operands=list(operands), result_types=list(result_types), attributes=attributes or {}
    )


# ---- element types -------------------------------------------------------------------------

# ONNX TensorProto data type <-> MLIR element type <-> numpy dtype.
# MLIR integers are signless and arith picks signed division, comparison and widening, so the
# unsigned types (ui8, ui16: quantised tensors) are lowered only by the ops whose lowerings
# widen them explicitly (lowering/quant.py); every other lowering refuses them
# (quant.check_unsigned).
UI8, UI16 = IntegerType(8, Signedness.UNSIGNED), IntegerType(16, Signedness.UNSIGNED)
_ELEM = {1: f32, 11: f64, 7: i64, 6: i32, 5: IntegerType(16), 3: IntegerType(8), 9: i1,
         2: UI8, 4: UI16}
_NP = {1: np.float32, 11: np.float64, 7: np.int64, 6: np.int32, 5: np.int16, 3: np.int8,
       9: np.bool_, 2: np.uint8, 4: np.uint16}


def elem_type(onnx_dtype: int) -> Attribute:
    if onnx_dtype not in _ELEM:
        raise NotImplementedError(f"ONNX element type {onnx_dtype} is not supported")
    return _ELEM[onnx_dtype]


def numpy_dtype(t: Attribute) -> np.dtype:
    for k, v in _ELEM.items():
        if v == t:
            return np.dtype(_NP[k])
    raise NotImplementedError(f"element type {t} has no numpy dtype")


def mlir_elem_of(dtype) -> Attribute:
    dtype = np.dtype(dtype)
    for k, v in _NP.items():
        if np.dtype(v) == dtype:
            return _ELEM[k]
    raise NotImplementedError(f"numpy dtype {dtype} is not supported")


def tensor_type(shape, elem: Attribute) -> TensorType:
    # -1 marks a dynamic dimension (printed `?`).
    return TensorType(elem, [int(d) for d in shape])


# ---- constants: dense attributes and the resource table -------------------------------------

# Arrays above this many elements are kept out of the IR text: the op holds a
# `dense_resource<handle>` and the bytes live in `resources(module)`.
INLINE_LIMIT = 16

_RESOURCES: weakref.WeakKeyDictionary[ModuleOp, dict[str, np.ndarray]] = (
    weakref.WeakKeyDictionary()
)


def resources(module: ModuleOp) -> dict[str, np.ndarray]:
    """The resource table (handle -> numpy array) of a module; created on first use."""
    return _RESOURCES.setdefault(module, {})


def share_resources(src: ModuleOp, dst: ModuleOp) -> None:
    _RESOURCES[dst] = resources(src)


def dense_attr(array: np.ndarray, module: ModuleOp | None = None, hint: str = "c"):
    """A dense attribute for `array`, or a dense_resource handle when it is large."""
    array = np.asarray(array)
    ttype = tensor_type(array.shape, mlir_elem_of(array.dtype))
    if array.size <= INLINE_LIMIT or module is None:
        flat = np.ascontiguousarray(array).reshape(-1)
        if array.dtype == np.bool_:
            values = [int(v) for v in flat]
        elif array.dtype.kind == "f":
            values = [float(v) for v in flat]
        else:
            values = [int(v) for v in flat]
        return DenseIntOrFPElementsAttr.from_list(ttype, values)
    table = resources(module)
    # a handle is an MLIR identifier (and names a symbol in the code): ASCII only
    base = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else "_"
                   for ch in hint) or "c"
    handle, n = base, 0
    while handle in table:
        n += 1
        handle = f"{base}_{n}"
    table[handle] = array
    return DenseResourceAttr.from_params(handle, ttype)


class MissingResourceError(ValueError):
    """A dense_resource constant whose bytes the module does not hold (IR text printed without
    its dialect_resources section, or with that section cut)."""


def attr_array(attr, module: ModuleOp | None = None) -> np.ndarray:
    """The numpy value of a dense or dense_resource attribute (little surprise: a copy-free view
    for resources, which may be read-only broadcasts for splats)."""
    if isinstance(attr, DenseResourceAttr):
        handle = attr.resource_handle.data
        table = resources(module)
        if handle not in table:
            # Text printed without its `{-# dialect_resources #-}` section names bytes it lacks.
            raise MissingResourceError(
                f"constant dense_resource<{handle}> has no bytes in this module: the IR text "
                f"was printed without its dialect_resources section (write it with "
                f"print_ir(module, with_resources=True), or `python -m compilerkit MODEL "
                f"--emit onnx-ir -o FILE`)")
        return table[handle]
    shape = attr.get_shape()
    dtype = numpy_dtype(attr.get_element_type())
    values = attr.get_values()
    return np.array(values, dtype=dtype).reshape(shape)


def is_splat(array: np.ndarray) -> bool:
    """True for arrays that are one value broadcast (how folded ConstantOfShape is kept)."""
    return array.size > 1 and all(s == 0 for s in array.strides)


def constant_value(value, module: ModuleOp):
    """The numpy array of an SSA value if it is produced by onnx.Constant, else None."""
    owner = getattr(value, "owner", None)
    if owner is None or getattr(owner, "name", None) != "onnx.Constant":
        return None
    return attr_array(owner.attributes["value"], module)


def make_constant(array: np.ndarray, module: ModuleOp, hint: str = "c") -> IRDLOperation:
    array = np.asarray(array)
    attr = dense_attr(array, module, hint)
    return create("Constant", [], [attr.get_type()], {"value": attr})


# ---- ONNX attributes <-> MLIR attributes ----------------------------------------------------


def to_mlir_attr(value) -> Attribute:
    if isinstance(value, bool):
        return IntegerAttr(int(value), i64)
    if isinstance(value, int):
        return IntegerAttr(value, i64)
    if isinstance(value, float):
        return FloatAttr(value, f32)
    if isinstance(value, bytes):
        return StringAttr(value.decode())
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, np.ndarray):
        return dense_attr(value)
    if isinstance(value, (list, tuple)):
        return ArrayAttr([to_mlir_attr(v) for v in value])
    raise NotImplementedError(f"attribute value {value!r}")


def from_mlir_attr(attr: Attribute):
    if isinstance(attr, IntegerAttr):
        return attr.value.data
    if isinstance(attr, FloatAttr):
        return attr.value.data
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, ArrayAttr):
        return [from_mlir_attr(a) for a in attr.data]
    if isinstance(attr, DenseIntOrFPElementsAttr):
        return attr_array(attr)
    return attr


def get_attr(op, name: str, default=None):
    attr = op.attributes.get(name)
    return default if attr is None else from_mlir_attr(attr)


def shape_of(value) -> tuple[int, ...]:
    return tuple(value.type.get_shape())


def is_absent(value) -> bool:
    """An omitted optional input (ONNX's empty input name): a NoValue of type none."""
    return isinstance(value.type, NoneType)


def is_static(t) -> bool:
    return isinstance(t, TensorType) and all(d >= 0 for d in t.get_shape())


def no_value(block) -> SSAValue:
    """The block's `none` value (its first onnx.NoValue, made at the top of the block if it has
    none yet): what an absent optional input refers to."""
    for op in block.ops:
        if isinstance(op, OPS["NoValue"]):
            return op.results[0]
    nv = create("NoValue", [], [NoneType()])
    if block.first_op is None:
        block.add_op(nv)
    else:
        block.insert_op_before(nv, block.first_op)
    return nv.results[0]


__all__ = ["ONNX", "OPS", "INFO", "OnnxOp", "create", "op_type", "opset_of", "onnx_inputs",
           "arrange_inputs", "arrange_outputs", "input_slots", "no_value",
           "resources", "make_constant", "Float32Type", "IntegerType"]
