"""A compiled model specialised on the inputs compilerkit must know when compiling: inputs
whose values decide shapes (Expand's and Reshape's shape, Range's limits, Tile's repeats,
Slice's starts, Resize's sizes, a sequence position...), sequence inputs (their length and
their elements' shapes) and optional inputs (present or not).

compilerkit compiles static shapes, so such a model has no one compiled form. Rather than
refuse it, `compilerkit.compile` returns a `SpecializedModel`, which compiles the model on its
first run for the values (lengths, presence) it is given, as PyTorch's `torch.compile` does
with its guards: every later run checks them against the compiled forms kept, runs the one
that matches, and compiles again for a new value; the last `cache_size` forms are kept
(least recently used dropped; DEFAULT_CACHE_SIZE, `compile(..., specialize_cache=N)`). It
never runs a form compiled for other values, so a new value costs a compile, never a wrong
answer. A `SpecializationWarning` says so once per model, at its first compile.

Which inputs: a tensor input whose value reaches, through any ops but Shape and Size (whose
results depend on a shape only), an operand in SHAPE_OPERANDS, at most MAX_VALUE_ELEMENTS
elements (shape parameters are small; a larger input stays refused as before), and every
sequence or optional input. Once a model is compiled per run like this, a tensor input's
dynamic dimensions that `input_shapes` leaves open are taken from its array too (part of the
key), as a sequence element's are; a model with none of the above still needs them fixed
(compile's ModelError). A sequence output is returned as a list of arrays and an optional
output as its element or None (frontend/sequences.py flattens them for the compile).
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections import OrderedDict

import numpy as np
import onnx
from onnx import ModelProto, helper, numpy_helper

from compilerkit.frontend import ModelError, OptionError, load_model
from compilerkit.frontend.hygiene import text
from compilerkit.frontend.sequences import POSITION_OPERANDS, regroup, rewrite
from compilerkit.frontend.subgraphs import outer_reads
from compilerkit.runtime import InputError

DEFAULT_CACHE_SIZE = 8  # compiled forms kept per model (torch.compile's cache_size_limit)
MAX_VALUE_ELEMENTS = 1024

_REDUCE_AXES = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
# Operands whose values decide a result's shape, or which the lowering reads when compiling
# (lowering/shape_ops.py, resize.py, reduction.py, indexing.py, unfold.py, topk.py, scan.py;
# Clip's bounds and Pad's value, elementwise.py and shape_ops.py), by node input position.
SHAPE_OPERANDS = {"Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,),
                  "Range": (0, 1, 2), "Slice": (1, 2, 3, 4), "Pad": (1, 2, 3), "Squeeze": (1,),
                  "Unsqueeze": (1,), "Split": (1,), "CumSum": (1,), "CumProd": (1,),
                  "Resize": (1, 2, 3), "Upsample": (1,), "OneHot": (1,), "TopK": (1,),
                  "Col2Im": (1, 2), "CenterCropPad": (1,), "MaxUnpool": (2,),
                  "HannWindow": (0,), "HammingWindow": (0,), "BlackmanWindow": (0,),
                  "Clip": (1, 2),
                  **{op: (1,) for op in _REDUCE_AXES}, **POSITION_OPERANDS}
# A Loop's trip count and condition decide how often the frontend unrolls its body
# (frontend/control_flow.py), and so its scan outputs' shapes.
SHAPE_OPERANDS["Loop"] = (0, 1)


class SpecializationWarning(UserWarning):
    """A model is compiled for the values of some of its inputs (shape parameters, sequence
    lengths, optionals' presence) at its first run, and again for each new value. Silence it
    with `warnings.simplefilter("ignore", SpecializationWarning)`."""


def _static_size(vi) -> float:
    """Elements of a tensor input as declared (inf when a dimension is unknown)."""
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return math.inf
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
    return math.inf if any(d < 0 for d in dims) else math.prod(dims)


def value_inputs(proto: ModelProto) -> list[str]:
    """The tensor graph inputs whose values decide shapes (see the module's docstring), in
    the graph's order."""
    g = proto.graph
    inits = {t.name for t in g.initializer}
    reach = {i.name: {i.name} for i in g.input
             if i.name not in inits and i.type.WhichOneof("value") == "tensor_type"}
    found = set()
    for node in g.node:
        for k in SHAPE_OPERANDS.get(node.op_type, ()):
            if k < len(node.input) and node.input[k] in reach:
                found |= reach[node.input[k]]
        if node.op_type in ("Shape", "Size"):
            continue
        # (an If, Loop or Scan also reads the outer values its subgraphs use)
        came = set().union(*(reach.get(x, set()) for x in list(node.input)
                             + outer_reads(node)))
        if came:
            for o in node.output:
                reach[o] = reach.get(o, set()) | came
    by_name = {i.name: i for i in g.input}
    # Not an input larger than shape parameters are (an unknown size is checked at each run)
    return [i.name for i in g.input if i.name in found
            and (_static_size(by_name[i.name]) <= MAX_VALUE_ELEMENTS
                 or math.isinf(_static_size(by_name[i.name])))]


def needs_specializing(proto: ModelProto) -> bool:
    """Whether `proto` has a value input, a sequence or optional input, or a sequence or
    optional output."""
    g = proto.graph
    return bool(value_inputs(proto)) or any(
        v.type.WhichOneof("value") in ("sequence_type", "optional_type")
        for v in list(g.input) + list(g.output))


def check_cache_size(cache_size) -> int:
    if isinstance(cache_size, bool) or not isinstance(cache_size, (int, np.integer)) or \
            cache_size < 1:
        raise OptionError(f"specialize_cache must be a whole number >= 1 (compiled forms kept "
                          f"per model; default {DEFAULT_CACHE_SIZE}), got {cache_size!r}")
    return int(cache_size)


def _np_dtype(elem: int):
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem))


def _tensor_type(tp):
    """The TypeProto of a tensor inside an optional (or the tensor itself); None otherwise."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        return tp
    if kind == "optional_type":
        return _tensor_type(tp.optional_type.elem_type)
    return None


def _sequence_type(tp):
    kind = tp.WhichOneof("value")
    if kind == "sequence_type":
        return tp
    if kind == "optional_type":
        return _sequence_type(tp.optional_type.elem_type)
    return None


class SpecializedModel:
    """`run(*inputs) -> outputs` of a model compiled per value of its `specialized` inputs
    (see the module's docstring). Tensors are numpy arrays, a sequence a list of arrays, an
    absent optional None. `.compiled` holds the compiled forms (an OrderedDict, key -> the
    CompiledModel, most recently used last), `.compiles` counts compiles; other attributes
    (`stages`, `timings`, ...) are those of the form compiled or used last."""

    def __init__(self, proto: ModelProto, compile_fn, input_shapes=None,
                 cache_size: int = DEFAULT_CACHE_SIZE, num_threads=None):
        self.proto = proto
        self._compile = compile_fn  # (ModelProto, input_shapes) -> CompiledModel
        self.input_shapes = dict(input_shapes or {})
        self.cache_size = check_cache_size(cache_size)
        self.num_threads = num_threads
        g = proto.graph
        inits = {t.name for t in g.initializer}
        self.graph_inputs = [i for i in g.input if i.name not in inits]
        self.value_inputs = value_inputs(proto)
        self.specialized = self.value_inputs + [
            text(i.name) for i in self.graph_inputs
            if i.type.WhichOneof("value") != "tensor_type"]
        self._open_dims = {i.name for i in self.graph_inputs
                           if i.type.WhichOneof("value") == "tensor_type"
                           and text(i.name) not in self.input_shapes
                           and i.name not in self.value_inputs
                           and math.isinf(_static_size(i))}
        # The signature run() takes, as CompiledModel.inputs: (name, shape, dtype) per graph
        # input; a sequence's shape is None, an unknown dimension -1.
        self.inputs = [(text(i.name), self._declared_shape(i), self._dtype(i))
                       for i in self.graph_inputs]
        self.compiled = OrderedDict()
        self.compiles = 0
        self.latest = None
        self._lock = threading.Lock()
        self._warned = False

    def _declared_shape(self, vi):
        t = _tensor_type(vi.type) if _sequence_type(vi.type) is None else None
        if t is None:
            return None
        if text(vi.name) in self.input_shapes:
            return tuple(self.input_shapes[text(vi.name)])
        return tuple(d.dim_value if d.HasField("dim_value") else -1
                     for d in t.tensor_type.shape.dim)

    @staticmethod
    def _dtype(vi):
        t = _tensor_type(vi.type)
        if t is None and _sequence_type(vi.type) is not None:
            t = _tensor_type(_sequence_type(vi.type).sequence_type.elem_type)
        return _np_dtype(t.tensor_type.elem_type) if t is not None else None

    # ---- the key of a run, and the arrays the compiled form takes -----------------------------
    def _arguments(self, arrays):
        if len(arrays) != len(self.graph_inputs):
            names = [text(i.name) for i in self.graph_inputs]
            raise InputError(f"expected {len(names)} inputs {names}, got {len(arrays)}")
        key, flat = [], []
        for vi, a in zip(self.graph_inputs, arrays, strict=True):
            name = text(vi.name)
            tp = vi.type
            if vi.name in self.value_inputs:
                a = np.asarray(a)
                want = _np_dtype(tp.tensor_type.elem_type)
                if a.dtype.newbyteorder("=") != want:
                    raise InputError(f"input {name!r}: expected dtype {want.name}, got "
                                     f"{a.dtype.name}")
                dims = [d.dim_value if d.HasField("dim_value") else -1
                        for d in tp.tensor_type.shape.dim]
                if tp.tensor_type.HasField("shape") and (len(dims) != a.ndim or any(
                        d >= 0 and d != s for d, s in zip(dims, a.shape, strict=True))):
                    raise InputError(f"input {name!r}: expected shape {dims}, got "
                                     f"{list(a.shape)}")
                if a.size > MAX_VALUE_ELEMENTS:
                    raise InputError(f"input {name!r} decides shapes, so the model is compiled "
                                     f"for its value; {a.size} elements is more than "
                                     f"{MAX_VALUE_ELEMENTS}")
                a = np.ascontiguousarray(a.astype(want))
                key.append(("value", a.shape, a.tobytes()))
            elif _sequence_type(tp) is not None and (
                    tp.WhichOneof("value") == "sequence_type" or a is not None):
                if not isinstance(a, (list, tuple)):
                    raise InputError(f"input {name!r} is a sequence: give a list of arrays, got "
                                     f"{type(a).__name__}")
                elem = _tensor_type(_sequence_type(tp).sequence_type.elem_type)
                want = _np_dtype(elem.tensor_type.elem_type) if elem is not None else None
                items = [np.asarray(x) for x in a]
                for k, x in enumerate(items):
                    if want is not None and x.dtype.newbyteorder("=") != want:
                        raise InputError(f"input {name!r}: element {k} has dtype "
                                         f"{x.dtype.name}, expected {want.name}")
                key.append(("sequence", tuple(x.shape for x in items)))
                flat += items
            elif tp.WhichOneof("value") == "optional_type":
                if a is None:
                    key.append(("absent",))
                else:
                    a = np.asarray(a)
                    key.append(("present", a.shape))
                    flat.append(a)
            elif vi.name in self._open_dims:
                # Already compiled at run time: dynamic dimensions that input_shapes leaves
                # open are fixed from the arrays, as a sequence element's are.
                key.append(("shape", np.shape(a)))
                flat.append(a)
            else:
                key.append(None)  # a tensor: the compiled form's own checks
                flat.append(a)
        return tuple(key), flat

    def _concrete(self, arrays):
        """The model for one key: value inputs as initializers, a sequence input as its
        elements (each an input) gathered by a SequenceConstruct, an absent optional as an
        Optional node with no input."""
        m = ModelProto()
        m.CopyFrom(self.proto)
        g = m.graph
        inits = {t.name for t in g.initializer}
        front, inputs = [], []
        for vi, a in zip(self.graph_inputs, arrays, strict=True):
            tp = vi.type
            if vi.name in self.value_inputs:
                g.initializer.append(numpy_helper.from_array(
                    np.asarray(a, _np_dtype(tp.tensor_type.elem_type)), vi.name))
            elif _sequence_type(tp) is not None and (
                    tp.WhichOneof("value") == "sequence_type" or a is not None):
                elem_type = _tensor_type(_sequence_type(tp).sequence_type.elem_type)
                elem = (elem_type.tensor_type.elem_type if elem_type is not None
                        else helper.np_dtype_to_tensor_dtype(np.asarray(a[0]).dtype))
                names = []
                for k, x in enumerate(a):
                    names.append(f"{vi.name}__elem{k}")
                    inputs.append(helper.make_tensor_value_info(names[-1], elem,
                                                                np.asarray(x).shape))
                front.append(helper.make_node("SequenceConstruct", names, [vi.name])
                             if names else
                             helper.make_node("SequenceEmpty", [], [vi.name], dtype=elem))
            elif tp.WhichOneof("value") == "optional_type":
                if a is None:
                    front.append(helper.make_node("Optional", [], [vi.name],
                                                  type=tp.optional_type.elem_type))
                else:
                    t = _tensor_type(tp)
                    elem = t.tensor_type.elem_type if t is not None else \
                        helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype)
                    inputs.append(helper.make_tensor_value_info(vi.name, elem,
                                                                np.asarray(a).shape))
            else:
                inputs.append(vi)
        kept = [i for i in g.input if i.name in inits]
        del g.input[:]
        g.input.extend(kept + inputs)
        nodes = list(g.node)
        del g.node[:]
        g.node.extend(front + nodes)
        return m

    # ---- running ----------------------------------------------------------------------------
    def _form(self, key, arrays):
        with self._lock:
            cm = self.compiled.get(key)
            if cm is not None:
                self.compiled.move_to_end(key)
                self.latest = cm
                return cm
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"inputs {self.specialized} decide shapes or are sequences/optionals: the "
                    "model is compiled for their values on its first run and again for each "
                    f"new value, checked on every run (the last {self.cache_size} compiled "
                    "forms kept: compile(..., specialize_cache=N))", SpecializationWarning,
                    stacklevel=3)
            shapes = self._shapes(arrays)
            flat, layout = rewrite(self._concrete(arrays), shapes, flatten_outputs=True)
            cm = self._compile(flat, shapes)
            cm.layout = layout
            self.compiles += 1
            self.compiled[key] = cm
            while len(self.compiled) > self.cache_size:
                self.compiled.popitem(last=False)  # dropped: its owners release it
            self.latest = cm
            return cm

    def _shapes(self, arrays):
        """input_shapes of one form: the caller's for the inputs that stay tensor inputs,
        and the arrays' shapes for those with dimensions left open."""
        keep = {text(i.name) for i in self.graph_inputs
                if i.name not in self.value_inputs and i.type.WhichOneof("value")
                == "tensor_type"}
        shapes = {k: v for k, v in self.input_shapes.items() if k in keep}
        for vi, a in zip(self.graph_inputs, arrays, strict=True):
            if vi.name in self._open_dims:
                shapes[text(vi.name)] = [int(d) for d in np.shape(a)]
        return shapes or None

    def run(self, *arrays, num_threads=None):
        """The outputs for `arrays` (one per graph input, in order), compiling first when no
        kept form matches their specialised values. Raises `InputError` for an argument
        that does not fit and what `compile` raises for a model it cannot compile."""
        key, flat = self._arguments(arrays)
        cm = self._form(key, arrays)
        threads = self.num_threads if num_threads is None else num_threads
        return regroup(cm.run(*flat, num_threads=threads), cm.layout)

    __call__ = run

    def close(self) -> None:
        """Release every compiled form now (see CompiledModel.close)."""
        with self._lock:
            forms = list(self.compiled.values())
            self.compiled.clear()
            self.latest = None
        for cm in forms:
            cm.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getattr__(self, name):
        if name.startswith("_") or name in ("latest", "compiled"):
            raise AttributeError(name)
        latest = self.__dict__.get("latest")
        if latest is None:
            raise AttributeError(f"{name!r}: this model is compiled on its first run (it is "
                                 f"specialised on {self.__dict__.get('specialized')}); run it "
                                 "first")
        return getattr(latest, name)

    def __repr__(self):
        return (f"SpecializedModel(specialized={self.specialized}, "
                f"compiled={self.compiles}, kept={len(self.compiled)}/{self.cache_size})")


def specializing_model(model, compile_fn, input_shapes=None,
                       cache_size: int = DEFAULT_CACHE_SIZE, num_threads=None):
    """(a SpecializedModel for `model` when it needs one (`needs_specializing`), else None;
    the source to compile otherwise). `model` is an ONNX path, bytes or ModelProto; a path's
    or bytes' model is parsed here once and handed on as the ModelProto (parsing ResNet-50's
    100 MB took 2 s: not twice), unless its weights are stored outside it (the frontend reads
    them from the path's folder). MLIR sources, and anything the frontend cannot read, come
    back as they are: the normal compile reports them."""
    check_cache_size(cache_size)
    if isinstance(model, str) and (model.endswith(".mlir") or (
            "{" in model and not os.path.exists(model))):
        return None, model
    if not isinstance(model, (ModelProto, bytes, bytearray, memoryview, str)) and not hasattr(
            model, "__fspath__"):
        return None, model
    try:
        proto, base_dir = load_model(model)
    except (ModelError, OptionError, OSError):
        return None, model
    external = any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer)
    if not needs_specializing(proto):
        return None, (model if external and base_dir is not None else proto)
    if external and base_dir is not None:
        from onnx.external_data_helper import load_external_data_for_model

        load_external_data_for_model(proto, base_dir)  # the forms are built from protos
    return SpecializedModel(proto, compile_fn, input_shapes, cache_size, num_threads), None
