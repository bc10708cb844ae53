"""Graph hygiene, checked before anything reads an ONNX graph: the IR version and opset are
ones compilerkit compiles, every tensor has exactly one definition (graph input, initializer
or node output), nodes come in topological order, every graph output exists and is listed
once, every node passes its ONNX schema (known attributes of the right types, required ones
present, arity), no declared type has element type 0, and no initializer has a negative or
over-budget shape. Each failure is a `ModelError` naming the tensor or node; onnxruntime
refuses nearly all of these too (it accepts duplicate initializers and outputs, and sorts
unsorted nodes itself)."""

from __future__ import annotations

import onnx
from onnx import ModelProto

from compilerkit.frontend.checks import ModelError, check_bytes

# Default-domain opsets compiled: onnxruntime guarantees opset 7 and above; the newest is the
# newest this onnx package has operator definitions for. Older models (opsets 1 to 6, as
# PyTorch exported until 2018) are upgraded to MIN_OPSET on import (old_opsets.py).
MIN_OPSET = 7
MAX_OPSET = onnx.defs.onnx_opset_version()


def text(name) -> str:
    """A name from the model as text. ONNX's string fields are proto2 `string`s that nothing
    validates: protobuf hands back `bytes` for one that is not UTF-8 (onnxruntime runs such a
    model), shown here with backslash escapes ('t\\xff'). The model keeps its bytes."""
    return name if isinstance(name, str) else bytes(name).decode("utf-8", "backslashreplace")


def node_label(node, index) -> str:
    return text(node.name) or f"{text(node.op_type)}_{index}"


def model_opset(proto: ModelProto) -> int:
    versions = {o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")}
    if len(versions) > 1:
        raise ModelError(f"the model imports the default ONNX domain at several opsets "
                         f"{sorted(versions)}; it must be one")
    opset = versions.pop() if versions else 21
    # Opsets 1 to MIN_OPSET - 1 are upgraded (old_opsets.py); 0 or below is no opset (onnxruntime
    # refuses it too).
    if not 1 <= opset <= MAX_OPSET:
        raise ModelError(f"opset {opset} of the default ONNX domain is not supported: "
                         f"compilerkit compiles opsets {MIN_OPSET} to {MAX_OPSET} and upgrades "
                         f"opsets 1 to {MIN_OPSET - 1}")
    return opset


def check_graph(proto: ModelProto) -> None:
    """Graph hygiene, before anything else reads the graph: every tensor has one definition
    (graph input, initializer or node output), nodes come in topological order, and every
    graph output exists and is named once."""
    if not 1 <= proto.ir_version <= onnx.IR_VERSION:
        raise ModelError(f"ONNX IR version {proto.ir_version} is not supported: this onnx "
                         f"package (and onnxruntime) read IR versions 1 to {onnx.IR_VERSION}")
    g = proto.graph
    defined = {}  # tensor name -> where it is defined, for the message

    def define(name, where):
        if name in defined:
            raise ModelError(f"tensor {name!r} is defined twice: by {defined[name]} and by "
                             f"{where}; every tensor needs exactly one producer")
        defined[name] = where

    for t in g.initializer:
        define(t.name, f"initializer {t.name!r}")
    inits = {t.name for t in g.initializer}
    seen_inputs = set()
    for i in g.input:
        if i.name in seen_inputs:
            raise ModelError(f"graph input {i.name!r} is listed twice")
        seen_inputs.add(i.name)
        if i.name not in inits:  # an input may name an initializer (its default value)
            define(i.name, f"graph input {i.name!r}")
    later = {o: node_label(n, k) for k, n in enumerate(g.node) for o in n.output if o}
    for k, node in enumerate(g.node):
        label = node_label(node, k)
        for name in node.input:
            if name and name not in defined:
                where = (f"it is produced only by the later node {later[name]!r}; nodes must "
                         "be in topological order" if name in later else
                         "no graph input, initializer or node produces it")
                raise ModelError(f"node {label!r} ({node.op_type}): input {name!r} is not "
                                 f"defined: {where}")
        for name in node.output:
            if name:
                define(name, f"node {label!r} ({node.op_type})")
    ctx = onnx.checker.C.CheckerContext()
    ctx.ir_version = min(proto.ir_version, onnx.IR_VERSION)
    ctx.opset_imports = {"": model_opset(proto)}
    for k, node in enumerate(g.node):
        try:  # the op's schema: known attributes of the right types, required ones, arity
            onnx.checker.check_node(node, ctx, onnx.checker.C.LexicalScopeContext())
        except onnx.checker.ValidationError as e:
            first = str(e).strip().split("\n")[0]
            raise ModelError(f"node {node_label(node, k)!r} ({node.op_type}): {first}") from None
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.HasField("tensor_type") and not vi.type.tensor_type.elem_type:
            raise ModelError(f"tensor {vi.name!r} is declared with element type 0 (undefined)")
    seen = set()
    for o in g.output:
        if not o.name:
            raise ModelError("a graph output has an empty name")
        if o.name in seen:
            raise ModelError(f"graph output {o.name!r} is listed twice")
        seen.add(o.name)
        if o.name not in defined:
            raise ModelError(f"graph output {o.name!r} is not produced by any node, graph input "
                             "or initializer")


def check_dims(t: onnx.TensorProto, budget: int) -> None:
    if any(d < 0 for d in t.dims):
        raise ModelError(f"tensor {t.name!r}: negative dimension in its shape {list(t.dims)}")
    itemsize = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize if (
        t.data_type in onnx.helper.get_all_tensor_dtypes()) else 1
    check_bytes(f"tensor {t.name!r}", list(t.dims), itemsize, budget)
