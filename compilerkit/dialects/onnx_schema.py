"""The `onnx` dialect's op classes, generated from ONNX's own operator schemas.

One IRDL op class per operator of the default ONNX domain, at the newest version this onnx
package defines (`onnx.defs.get_all_schemas()`), after onnx-mlir's conventions:

- every schema input is a named operand (`op.X`, `op.W`, `op.B` ...). An optional input is
  always present and typed `none` when absent (the result of one `onnx.NoValue`); only the last
  input may be variadic, and is then a variadic operand. Results likewise: an absent optional
  output is a result of type `none`.
- attributes are typed from the schema (INT -> i64 IntegerAttr, FLOAT -> f32 FloatAttr, STRING ->
  StringAttr, INTS/FLOATS/STRINGS -> ArrayAttr, TENSOR -> dense or dense_resource; the rest, such
  as subgraphs, any attribute). They stay attributes, not properties, so the generic form prints
  as `{pads = [1 : i64, ...]}`; unknown attributes (`onnx_node_name`, an older opset's
  attributes) are allowed. Defaults are not written onto the op: the accessor (`op.alpha`)
  returns the newest schema's default when the attribute is absent. Four defaults changed
  since opset 7 (Softmax, LogSoftmax and Hardmax `axis` 1 -> -1 at 13, GridSample `mode`), so
  code reading an older model passes its own default to `onnx.get_attr`.
- every op is `Pure` (ONNX operators have no side effects), so xDSL's dead code elimination
  applies.
- the verifier checks, as the schema at the model's opset (the function's `onnx_opset`) defines
  them, element types against the type constraints (`T in tensor(float), tensor(double) ...`),
  that values sharing a constraint letter agree, that required inputs and attributes are
  present and that inputs the opset does not have are `none`. Values the dialect cannot
  express (sequences, maps, optionals) are not checked here; lowering refuses them.

Models written against an older opset keep their node's meaning (the passes hand nodes back to
ONNX at the model's opset, see `onnx_inputs`). Where an older version's inputs are not a prefix
of the newest ones they are placed by name (Resize-10's `scales`) or, when renamed, by position
(BatchNormalization's `mean`/`var`); an older node with more outputs than the newest version
defines (BatchNormalization-9's training outputs) is refused by `arrange_outputs`.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, replace
from functools import cache

import onnx
from onnx import AttributeProto, helper
from onnx.defs import OpSchema
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    NoneType,
    Signedness,
    StringAttr,
    TensorType,
    UnrankedTensorType,
    f32,
    i64,
)
from xdsl.ir import Attribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

# The opset assumed for IR that does not say (no `onnx_opset` on its function).
DEFAULT_OPSET = 21

_VARIADIC = OpSchema.FormalParameterOption.Variadic
_SINGLE = OpSchema.FormalParameterOption.Single

# The ONNX type name of each MLIR element type the dialect can hold (signless integers are read
# as signed, as the rest of compilerkit does).
_ONNX_TYPE = {Float32Type: "float", Float64Type: "double", Float16Type: "float16",
              BFloat16Type: "bfloat16"}
_INT_NAME = {64: "int64", 32: "int32", 16: "int16", 8: "int8", 1: "bool"}

VALUE_TYPE = TensorType | UnrankedTensorType | NoneType

_ATTR_TYPES = {
    AttributeProto.INT: IntegerAttr[I64],
    AttributeProto.FLOAT: FloatAttr[Float32Type],
    AttributeProto.STRING: StringAttr,
    AttributeProto.INTS: ArrayAttr[IntegerAttr[I64]],
    AttributeProto.FLOATS: ArrayAttr[FloatAttr[Float32Type]],
    AttributeProto.STRINGS: ArrayAttr[StringAttr],
    AttributeProto.TENSOR: DenseIntOrFPElementsAttr | DenseResourceAttr,
}


@dataclass(frozen=True)
class Formal:
    """One schema input or output: its ONNX name, Python accessor, and type parameter."""

    name: str
    attr: str
    type_str: str
    variadic: bool
    optional: bool
    tensors: frozenset  # the tensor types allowed (empty: a sequence, map or optional)
    letter: str | None  # the type parameter values must agree on, if any


@dataclass(frozen=True)
class OpInfo:
    """What the verifier and the passes need from an op's (newest) schema."""

    op_type: str
    since_version: int
    inputs: tuple[Formal, ...]
    outputs: tuple[Formal, ...]
    allowed: dict  # type parameter -> frozenset of ONNX type strings
    attributes: dict  # ONNX attribute name -> AttributeProto.AttributeType


def _ident(name: str, taken: set[str]) -> str:
    """A Python identifier for an ONNX name, unique among `taken` and clear of Operation's own
    members (none of onnx 1.23's names needs changing)."""
    s = re.sub(r"\W", "_", name) or "_"
    if s[0].isdigit():
        s = "_" + s
    while keyword.iskeyword(s) or s in taken or hasattr(IRDLOperation, s):
        s += "_"
    taken.add(s)
    return s


def _formals(params, taken, allowed) -> tuple[Formal, ...]:
    out = []
    for k, p in enumerate(params):
        variadic = p.option == _VARIADIC
        if variadic and k != len(params) - 1:
            # No schema of onnx 1.23 does this; an IRDL op could not name its operands then.
            raise NotImplementedError(f"schema input {p.name!r} is variadic but not last")
        types = allowed.get(p.type_str, frozenset({p.type_str}))
        homogeneous = getattr(p, "is_homogeneous", True)
        out.append(Formal(p.name, _ident(p.name, taken), p.type_str, variadic,
                          p.option != _SINGLE and not variadic,
                          frozenset(t for t in types if t.startswith("tensor(")),
                          p.type_str if p.type_str in allowed and homogeneous else None))
    return tuple(out)


def _typed_attr(kind, value) -> Attribute | None:
    """A schema default as the attribute the frontend would write for it."""
    if kind == AttributeProto.INT:
        return IntegerAttr(int(value), i64)
    if kind == AttributeProto.FLOAT:
        return FloatAttr(float(value), f32)
    if kind == AttributeProto.STRING:
        return StringAttr(value.decode() if isinstance(value, bytes) else value)
    if kind == AttributeProto.INTS:
        return ArrayAttr([IntegerAttr(int(v), i64) for v in value])
    if kind == AttributeProto.FLOATS:
        return ArrayAttr([FloatAttr(float(v), f32) for v in value])
    if kind == AttributeProto.STRINGS:
        return ArrayAttr([StringAttr(v.decode() if isinstance(v, bytes) else v) for v in value])
    return None  # tensor defaults (ConstantOfShape's zero) are read by the code that needs them


def _default(a) -> Attribute | None:
    if not a.default_value.name:
        return None
    return _typed_attr(a.type, helper.get_attribute_value(a.default_value))


class OnnxOp(IRDLOperation):
    """Base of every generated ONNX op: the schema verifier."""

    def verify_(self) -> None:
        verify_schema(self)


INFO: dict[str, OpInfo] = {}


def _make_op(schema) -> type[IRDLOperation]:
    taken: set[str] = set()
    allowed = {c.type_param_str: frozenset(c.allowed_type_strs) for c in schema.type_constraints}
    inputs = _formals(schema.inputs, taken, allowed)
    outputs = _formals(schema.outputs, taken, allowed)
    body = {"name": f"onnx.{schema.name}", "__module__": __name__,
            "__doc__": f"The ONNX `{schema.name}` operator (version {schema.since_version}).",
            "traits": traits_def(Pure())}
    for f in inputs:
        body[f.attr] = var_operand_def(VALUE_TYPE) if f.variadic else operand_def(VALUE_TYPE)
    for f in outputs:
        body[f.attr] = var_result_def(VALUE_TYPE) if f.variadic else result_def(VALUE_TYPE)
    for name, a in schema.attributes.items():
        py = _ident(name, taken)
        body[py] = opt_attr_def(_ATTR_TYPES.get(a.type, Attribute), _default(a), attr_name=name)
    cls = irdl_op_definition(type(f"{schema.name}Op", (OnnxOp,), body))
    INFO[cls.name] = OpInfo(schema.name, schema.since_version, inputs, outputs, allowed,
                            {name: a.type for name, a in schema.attributes.items()})
    return cls


@irdl_op_definition
class NoValueOp(IRDLOperation):
    """An absent optional input: the one value of type `none` (onnx-mlir's `onnx.NoValue`)."""

    name = "onnx.NoValue"
    traits = traits_def(Pure())
    res = result_def(NoneType)


SCHEMAS = sorted((s for s in onnx.defs.get_all_schemas() if s.domain == ""),
                 key=lambda s: s.name)
OPS: dict[str, type[IRDLOperation]] = {s.name: _make_op(s) for s in SCHEMAS}
OPS["NoValue"] = NoValueOp


# ---- the model's opset ------------------------------------------------------------------------

def opset_of(op) -> int:
    """The ONNX opset the op's model was written against (attributes moved to inputs
    between opsets, e.g. Unsqueeze axes in 13), kept on the function by the frontend."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    if parent is not None and "onnx_opset" in parent.attributes:
        attr = parent.attributes["onnx_opset"]
        if not isinstance(attr, IntegerAttr):  # hand-written IR: named, not an AttributeError
            raise VerifyException(f"func.func @{parent.sym_name.data}: onnx_opset must be an "
                                  f"integer, got {attr}")
        return attr.value.data
    return DEFAULT_OPSET


@cache
def _schema_at(op_type: str, opset: int):
    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None


@cache
def input_slots(op_type: str, opset: int) -> tuple[int, ...] | None:
    """For each input of the op's schema at `opset`, the operand slot (index among the newest
    schema's inputs) that holds it; None when the op does not exist at that opset, () when its
    inputs there have no place in the newest schema. Inputs are matched by position, or by name
    when an older version's inputs are not a prefix of the newest (Resize-10: X, scales)."""
    old, info = _schema_at(op_type, opset), INFO.get(f"onnx.{op_type}")
    if old is None or info is None:
        return None
    new = [f.name for f in info.inputs]
    names = [p.name for p in old.inputs]
    if names != new[:len(names)] and all(n in new for n in names):
        return tuple(new.index(n) for n in names)
    last = len(new) - 1
    variadic = bool(info.inputs) and info.inputs[-1].variadic
    slots = tuple(min(k, last) if variadic else k for k in range(len(names)))
    crowded = any(slots[k] == slots[k + 1] and old.inputs[k].option != _VARIADIC
                  for k in range(len(slots) - 1))
    if crowded or (not variadic and len(names) > len(new)):
        return ()  # no place for them (Scan-8's sequence_lens, dropped in Scan-9)
    return slots


def arrange_inputs(op_type: str, opset: int, values: list, none) -> list:
    """A node's inputs (None where ONNX's name is empty) as the op's operands: every input of
    the newest schema in place, `none` where absent, the variadic tail last."""
    info = INFO[f"onnx.{op_type}"]
    variadic = bool(info.inputs) and info.inputs[-1].variadic
    slots = input_slots(op_type, opset)
    old = _schema_at(op_type, opset)
    if slots == () and old.inputs:
        raise ValueError(f"the inputs of {op_type} at opset {opset} "
                         f"({', '.join(p.name for p in old.inputs)}) have no place in version "
                         f"{info.since_version}'s ({', '.join(f.name for f in info.inputs)})")
    if old is None:  # not an operator at that opset (validation names it): the newest layout
        old = _schema_at(op_type, onnx.defs.onnx_opset_version())
        slots = input_slots(op_type, onnx.defs.onnx_opset_version())
    fixed = [None] * (len(info.inputs) - variadic)
    tail = []
    for k, v in enumerate(values):
        if k < len(slots):
            j = slots[k]
        elif old.inputs and old.inputs[-1].option == _VARIADIC:
            j = slots[-1]
        else:
            raise ValueError(f"{op_type} takes at most {len(slots)} inputs at opset {opset}")
        if variadic and j == len(info.inputs) - 1:
            tail.append(v)
        elif j >= len(fixed):
            raise ValueError(f"{op_type} input {k} has no place in the newest schema")
        else:
            fixed[j] = v
    return [none if v is None else v for v in fixed] + [none if v is None else v for v in tail]


def arrange_outputs(op_type: str, n_outputs: int) -> int:
    """How many results the op has for a node with `n_outputs` outputs (absent optional outputs
    are results of type none). Raises ValueError when the newest schema has no room for them."""
    info = INFO[f"onnx.{op_type}"]
    if info.outputs and info.outputs[-1].variadic:
        return max(n_outputs, len(info.outputs) - 1)
    if n_outputs > len(info.outputs):
        raise ValueError(f"{n_outputs} outputs, and {op_type} has only "
                         f"{len(info.outputs)} ({', '.join(f.name for f in info.outputs)}) "
                         f"since opset {info.since_version}")
    return len(info.outputs)


def onnx_inputs(op) -> list:
    """The op's inputs as an ONNX node at the model's opset has them: a value, or None for an
    absent input; trailing absent inputs dropped."""
    kind = op.name.split(".", 1)[1]
    slots = input_slots(kind, opset_of(op))
    operands = list(op.operands)
    if slots is None:  # not an operator at that opset: as written (validation names it)
        picked = operands
    else:
        info = INFO[op.name]
        variadic = bool(info.inputs) and info.inputs[-1].variadic
        picked = []
        for j in slots:
            if variadic and j == len(info.inputs) - 1:
                picked.extend(operands[j:])
            elif j < len(operands):
                picked.append(operands[j])
    values = [None if isinstance(v.type, NoneType) else v for v in picked]
    while values and values[-1] is None:
        values.pop()
    return values


# ---- the verifier -----------------------------------------------------------------------------

@cache
def _elem_name(elem) -> str:
    if isinstance(elem, IntegerType) and elem.width.data in _INT_NAME:
        unsigned = elem.signedness.data == Signedness.UNSIGNED
        return f"tensor({'u' if unsigned else ''}{_INT_NAME[elem.width.data]})"
    name = _ONNX_TYPE.get(type(elem))
    return f"tensor({name})" if name else f"tensor({elem})"


def onnx_type_name(t) -> str | None:
    """'tensor(float)' for a tensor of f32, None for `none`; element types ONNX has no name for
    give their MLIR spelling."""
    if isinstance(t, NoneType):
        return None
    elem = getattr(t, "element_type", None)
    return str(t) if elem is None else _elem_name(elem)


def _label(op) -> str:
    a = op.attributes.get("onnx_node_name")
    kind = op.name.split(".", 1)[1]
    return f"node {a.data!r} ({kind})" if a is not None else f"op {op.name}"


def _values(formals, values):
    """(formal, value, index within a variadic or None) for every value of the op that has a
    formal (None where the model's opset has no such input)."""
    variadic = bool(formals) and formals[-1] is not None and formals[-1].variadic
    n_fixed = len(formals) - variadic
    for k, v in enumerate(values):
        if k < n_fixed:
            if formals[k] is not None:
                yield formals[k], v, None
        elif variadic:
            yield formals[-1], v, k - n_fixed


@cache
def _opset_formals(op_type: str, opset: int):
    """The formals of the op's schema at `opset`, placed in the newest schema's operand slots
    and named by its accessors: types are checked as the model's opset defines them (Dropout's
    mask is T before opset 12, bool since)."""
    info = INFO[f"onnx.{op_type}"]
    old = _schema_at(op_type, opset)
    slots = input_slots(op_type, opset)
    if old is None or (slots == () and old.inputs) or old.since_version == info.since_version:
        return info.inputs, info.outputs
    allowed = {c.type_param_str: frozenset(c.allowed_type_strs) for c in old.type_constraints}
    ins: list = [None] * len(info.inputs)
    for f, j in zip(_formals(old.inputs, set(), allowed), slots, strict=True):
        ins[j] = replace(f, attr=info.inputs[j].attr, variadic=info.inputs[j].variadic)
    outs = tuple(replace(f, attr=info.outputs[k].attr) if k < len(info.outputs) else f
                 for k, f in enumerate(_formals(old.outputs, set(), allowed)))
    return tuple(ins), outs


def _where(what, f, idx) -> str:
    """'operand B', 'operand inputs[2]', 'result Y'."""
    return f"{what} {f.attr}" + (f"[{idx}]" if idx is not None else "")


def verify_schema(op) -> None:
    """Element types against the schema's type constraints, letters in agreement, inputs
    present as the model's opset requires. Messages name the node and the operand."""
    info = INFO[op.name]
    inputs, outputs = _opset_formals(info.op_type, _schema_opset(op, info))
    bound = {}
    for what, formals, values in (("operand", inputs, op.operands),
                                  ("result", outputs, op.results)):
        for k, (f, v, idx) in enumerate(_values(formals, values)):
            if not f.tensors:
                continue  # a sequence, map or optional: not expressible here
            got = onnx_type_name(v.type)
            if got is None:
                continue
            if got not in f.tensors:
                raise VerifyException(
                    f"{_label(op)}: {_where(what, f, idx)} has element type {got}, which "
                    f"the ONNX schema does not allow for {f.type_str} (allowed: "
                    f"{', '.join(sorted(f.tensors))})")
            if f.letter is not None:
                first = bound.setdefault(f.letter, (what, f, idx, k, got))
                if first[4] != got:
                    kind, ff, fidx, fk, _ = first
                    like = f"{'input' if kind == 'operand' else 'output'} {fk} ({ff.attr})"
                    raise VerifyException(
                        f"{_label(op)}: {_where(what, f, idx)} has element type {got}; "
                        f"expected {first[4]} like {like}: both are type {f.letter}")
    _verify_presence(op, info)


@cache
def _presence(op_type: str, opset: int):
    """(slots the opset's schema has, slots it requires, attributes it requires), or None if
    the op is not in it."""
    old = _schema_at(op_type, opset)
    if old is None:
        return None
    slots = input_slots(op_type, opset)
    return (frozenset(slots),
            frozenset(j for j, p in zip(slots, old.inputs, strict=True) if p.option == _SINGLE),
            tuple(sorted(name for name, a in old.attributes.items() if a.required)))


def _schema_opset(op, info) -> int:
    """The opset whose schema checks `op`: the model's, except for onnx.Constant, which holds
    every constant of the IR (initializers, folded values) whatever the model's opset. Before
    opset 9 a Constant node could only be a float: an opset-8 model's int64 Reshape shape, an
    initializer, failed verification as a Constant the model does not contain."""
    return DEFAULT_OPSET if info.op_type == "Constant" else opset_of(op)


def _verify_presence(op, info) -> None:
    opset = _schema_opset(op, info)
    known = _presence(info.op_type, opset)
    if known is None:
        return  # validation refuses an operator the model's opset does not have
    slots, required, attributes = known
    n_fixed = len(info.inputs) - (1 if info.inputs and info.inputs[-1].variadic else 0)
    for j in range(n_fixed):
        absent = isinstance(op.operands[j].type, NoneType)
        if absent and j in required:
            raise VerifyException(f"{_label(op)}: operand {info.inputs[j].attr} is required "
                                  f"(opset {opset}) but is none")
        if not absent and j not in slots:
            raise VerifyException(f"{_label(op)}: operand {info.inputs[j].attr} does not exist "
                                  f"at the model's opset {opset}; it must be none")
    for name in attributes:
        if name not in op.attributes:
            raise VerifyException(f"{_label(op)}: attribute {name} is required (opset {opset})")
