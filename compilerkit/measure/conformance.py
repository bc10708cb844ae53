"""ONNX conformance: run ONNX's own backend node tests and real models through compilerkit and
report, per case, whether it passed, was refused at compile time (and why) or gave a wrong
answer (and how wrong), with the time it took.

Three suites, all shipped inside the `onnx` package (no download):

* **node tests** (`onnx.backend.test.case.node`, generated in memory): one small model per case
  with inputs and expected outputs. Only cases whose ops are all in `OPS` (the ops compilerkit
  lowers, read from the lowering registry) are run; `untested_ops` names the lowered ops that
  no such case exercises, and why. A case refused as given is retried as onnx-mlir's
  "constant-input" + "static" variant (`constant_static_variant`): parameter inputs become
  initializers holding the test's values and data inputs get the test data's static shapes.
  Compiled at -O2, compared with rtol 1e-3, atol 1e-5.
* **data folders** (`simple/`, `pytorch-converted/`, `pytorch-operator/` under
  onnx/backend/test/data, 140 cases, mostly PyTorch exports of opset 6, which compilerkit
  upgrades on import): each model with its stored inputs and outputs (`run_data_folders`),
  as given, else as the constant-static variant; same compile level and tolerances.
* **models**: the "light" architectures (`onnx/backend/test/data/light`, random weights) or any
  ONNX file, compared with onnxruntime (one thread) on seeded random inputs, rtol 1e-3,
  atol 1e-5.

"Refused" means compilerkit raised one of `REFUSED` (unsupported op, dtype, dynamic shape...):
a clear error, never a wrong answer. Any other exception is a compiler bug and propagates.
Assumes onnx >= 1.14 (`collect_testcases`) and onnxruntime for the model reference.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import time
import warnings
from collections import Counter
from dataclasses import dataclass

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

import compilerkit as ck
from compilerkit.lowering import SUPPORTED
from compilerkit.measure import timing
from compilerkit.oracle import ort_outputs, ort_session, random_inputs  # noqa: F401 (API)

# The sequence and optional ops the frontend resolves when compiling (frontend/sequences.py)
# that ONNX's node tests exercise without ops compilerkit does not compile; the others
# (SequenceConstruct, SequenceAt, ConcatFromSequence...) are exercised by the data folders'
# simple/test_sequence_model* and tests/compilerkit/test_sequences.py.
RESOLVED_OPS = ("OptionalGetElement", "OptionalHasElement", "SequenceInsert", "SequenceMap",
                "SplitToSequence")
# The ops compilerkit compiles: the lowering registry, plus Constant, which `lower_to_krnl`
# turns into a `krnl.global` itself rather than through the registry, and RESOLVED_OPS.
OPS = tuple(sorted(set(SUPPORTED) | {"Constant"} | set(RESOLVED_OPS)))

# Inputs that are parameters rather than data, by node input position.
PARAMS = {"Clip": (1, 2), "Pad": (1, 2, 3), "Slice": (1, 2, 3, 4), "ReduceSum": (1,),
          "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,),
          "ReduceL1": (1,), "ReduceL2": (1,), "ReduceSumSquare": (1,), "ReduceLogSum": (1,),
          "ReduceLogSumExp": (1,), "CumSum": (1,),
          "Reshape": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Dropout": (1, 2),
          "Split": (1,), "Tile": (1,), "Expand": (1,), "ConstantOfShape": (0,),
          "Resize": (1, 2, 3), "Upsample": (1,), "Range": (0, 1, 2), "OneHot": (1,),
          "TopK": (1,), "CumProd": (1,), "HannWindow": (0,), "HammingWindow": (0,),
          "BlackmanWindow": (0,), "CenterCropPad": (1,), "Col2Im": (1, 2), "MaxUnpool": (2,)}
REFUSED = (ck.UnsupportedOpError, ck.ModelError, NotImplementedError)
RTOL, ATOL = 1e-3, 1e-5
NODE_OPT_LEVEL = 2

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")

GIVEN, CONSTANT = "as given", "constant-static"
PASSED, REFUSED_STATUS, WRONG = "passed", "refused", "wrong"


@dataclass
class CaseResult:
    """One node-test case or one model. `variant` is how it was compiled (GIVEN or CONSTANT,
    or "-O<n>" for models); `reason` says why it was refused or wrong; `max_error` is the
    largest |ours - reference| (inf when shapes or output counts differ, None when refused).
    For models, `ref_spread` is max - min of the reference's first output: near 0 means the
    output does not depend on the input (as in the light models, whose weights are constants)
    and a match says little about the numerics."""

    name: str
    op: str
    variant: str
    status: str
    reason: str = ""
    max_error: float | None = None
    seconds: float = 0.0
    ref_spread: float | None = None


# --- running and comparing -----------------------------------------------------------------

class CompilerkitRep(BackendRep):
    def __init__(self, cm):
        self.cm = cm

    def run(self, inputs, **kwargs):
        # A specialised model (specialize.py) compiles on its first run and says so once:
        # noise in a conformance run, as the upgrade warning.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ck.SpecializationWarning)
            warnings.simplefilter("ignore", ck.OpsetUpgradeWarning)
            return self.cm.run(*inputs)


class CompilerkitBackend(Backend):
    """`onnx.backend.base.Backend` for compilerkit (host, -O2, no assembly text)."""

    @classmethod
    def prepare(cls, model, device="CPU", input_shapes=None, **kwargs):
        # Old-opset models (Not's node tests, most data-folder cases) are upgraded on import;
        # the warning saying so, once per case, is noise in a conformance run.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ck.OpsetUpgradeWarning)
            return CompilerkitRep(ck.compile(model, opt_level=NODE_OPT_LEVEL, asm=False,
                                             input_shapes=input_shapes))

    @classmethod
    def supports_device(cls, device):
        return device == "CPU"


def compare(got, expected, rtol=RTOL, atol=ATOL):
    """(matches, max |got - expected|, reason). Extra outputs in `got` are ignored (optional
    outputs the test does not check, as Dropout's mask); the match test is numpy's
    assert_allclose (shapes must agree unless one side is 0-d, NaN equals NaN)."""
    if len(got) < len(expected):
        return False, float("inf"), f"{len(got)} outputs, expected {len(expected)}"
    pairs = []  # (name, got, expected) per tensor: a sequence's elements one by one
    for k, (g, e) in enumerate(zip(got, expected, strict=False)):  # extra outputs: see above
        if isinstance(e, (list, tuple)) or isinstance(g, (list, tuple)) or e is None or \
                g is None:
            if e is None or g is None:
                if (e is None) != (g is None):
                    return False, float("inf"), f"output {k}: {_kind(g)}, expected {_kind(e)}"
                continue
            if not isinstance(g, (list, tuple)) or not isinstance(e, (list, tuple)) or \
                    len(g) != len(e):
                return False, float("inf"), f"output {k}: {_kind(g)}, expected {_kind(e)}"
            pairs += [(f"{k}[{j}]", gj, ej) for j, (gj, ej) in enumerate(zip(g, e, strict=True))]
        else:
            pairs.append((str(k), g, e))
    worst, ok, reason = 0.0, True, ""
    for k, g, e in pairs:
        g, e = np.asarray(g), np.asarray(e)
        if g.shape != e.shape and g.ndim and e.ndim:  # 0-d broadcasts, as in assert_allclose
            return (False, float("inf"),
                    f"output {k}: shape {list(g.shape)}, expected {list(e.shape)}")
        if g.dtype.kind in "biuf" and e.dtype.kind in "biuf" and g.size and e.size:
            g64, e64 = g.astype(np.float64), e.astype(np.float64)
            with np.errstate(invalid="ignore"):  # inf - inf where a case expects infinities
                diff = np.abs(g64 - e64)
            # Equal values (infinities included) and NaN where NaN is expected are no error;
            # any other NaN is the worst error there is.
            diff = np.where((g64 == e64) | (np.isnan(g64) & np.isnan(e64)), 0.0, diff)
            worst = max(worst, float(np.max(np.where(np.isnan(diff), np.inf, diff))))
        try:
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
        except AssertionError:
            ok, reason = False, reason or f"output {k} differs beyond rtol={rtol}, atol={atol}"
    return ok, worst, reason


def _kind(value) -> str:
    if value is None:
        return "an absent optional"
    if isinstance(value, (list, tuple)):
        return f"a sequence of {len(value)}"
    return f"a tensor of shape {list(np.shape(value))}"


def refusal_reason(error: BaseException) -> str:
    """First line of the error, prefixed by its type: what a table groups refusals by."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


# --- node tests -------------------------------------------------------------------------------

def _ops_of(model):
    return list(dict.fromkeys(n.op_type for n in model.graph.node))


def case_op(case) -> str:
    """The op a case tests: its one op type, or "A+B" for expanded (function-body) cases."""
    return "+".join(_ops_of(case.model))


@functools.lru_cache(maxsize=1)
def _all_node_cases():
    from onnx.backend.test.case.node import collect_testcases
    # Generating the cases computes expected outputs with numpy, which warns on purpose
    # (1/0 in reductions over empty sets); those warnings are onnx's, not a finding of ours.
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return tuple(collect_testcases(None))


def node_cases(ops=None, names=None):
    """ONNX node-test cases whose ops all lie in `ops` (default `OPS`; an op named here also
    selects expanded cases made only of allowed ops). `names` restricts to those case names."""
    allowed = set(OPS if ops is None else ops)
    out = []
    for c in _all_node_cases():
        used = set(_ops_of(c.model))
        if not used or not used <= set(OPS):
            continue
        if ops is not None and not used <= allowed:
            continue
        if names is not None and c.name not in names:
            continue
        out.append(c)
    return out


def op_coverage(ops=None) -> dict[str, int]:
    """Per op of `ops` (default `OPS`): how many of the node-test cases `node_cases` selects
    use it (a case using several ops counts for each)."""
    ops = OPS if ops is None else ops
    counts = Counter(o for c in node_cases() for o in _ops_of(c.model))
    return {op: counts[op] for op in ops}


def untested_ops(ops=None) -> dict[str, str]:
    """The ops of `ops` (default `OPS`) that no selected node-test case exercises, each with
    why: not an ONNX operator at all (onnx has no schema for it), no node test in the installed
    onnx, or node tests that all need ops compilerkit does not lower (those ops named)."""
    out = {}
    for op, n in op_coverage(ops).items():
        if n:
            continue
        if not onnx.defs.has(op):
            out[op] = "not an ONNX operator (no schema in onnx.defs)"
            continue
        needs = Counter(o for c in _all_node_cases() if op in _ops_of(c.model)
                        for o in _ops_of(c.model) if o not in OPS)
        out[op] = (f"its node tests also use ops not lowered: {', '.join(sorted(needs))}"
                   if needs else f"no ONNX backend node test (onnx {onnx.__version__})")
    return out


def constant_static_variant(model, inputs):
    """(model with parameter inputs as initializers, remaining inputs, their input_shapes)."""
    names = [i.name for i in model.graph.input]
    params = {n.input[k] for n in model.graph.node for k in PARAMS.get(n.op_type, ())
              if k < len(n.input) and n.input[k] in names}
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep = []
    # strict=False: a case may feed fewer arrays than the graph declares (trailing optional
    # inputs); those keep being graph inputs, as before.
    for vi, value in zip(list(m.graph.input), inputs, strict=False):
        if vi.name in params and value is not None:
            m.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(value), vi.name))
        else:
            keep.append((vi.name, value))
    rest = [n for n, _ in keep]
    for vi in list(m.graph.input):
        if vi.name not in rest:
            m.graph.input.remove(vi)
    shapes = {n: list(np.asarray(v).shape) for n, v in keep}
    return m, [np.asarray(v) for _, v in keep], shapes


def _argument(value):
    """A case's input as `run` takes it: an array, a list of them (a sequence) or None."""
    if value is None or isinstance(value, (list, tuple)):
        return None if value is None else [np.asarray(v) for v in value]
    return np.asarray(value)


def _arrays(values):
    # Some cases carry TensorProtos (exotic dtypes) rather than arrays.
    return [onnx.numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v
            for v in values]


def run_node_case(case, rtol=RTOL, atol=ATOL) -> CaseResult:
    """Compile and run one node-test case as given, else as the constant-static variant."""
    t = time.perf_counter()
    inputs, expected = (_arrays(x) for x in case.data_sets[0])
    variant = GIVEN
    try:
        # A specialised model (compilerkit/specialize.py) compiles on its first run.
        got = CompilerkitBackend.prepare(case.model).run([_argument(i) for i in inputs])
    except REFUSED as error:
        if any(i is None or isinstance(i, (list, tuple)) for i in inputs):
            # Sequence and optional inputs have no constant-static variant.
            return CaseResult(case.name, case_op(case), variant, REFUSED_STATUS,
                              refusal_reason(error), None, time.perf_counter() - t)
        variant = CONSTANT
        try:
            model, rest, shapes = constant_static_variant(case.model, inputs)
            got = CompilerkitBackend.prepare(model, input_shapes=shapes).run(rest)
        except REFUSED as error:
            # The variant's reason: it is the last thing tried, and its refusal is what remains
            # to implement (the as-given one is usually just "input is not a constant").
            return CaseResult(case.name, case_op(case), variant, REFUSED_STATUS,
                              refusal_reason(error), None, time.perf_counter() - t)
    ok, worst, reason = compare(got, expected, rtol, atol)
    return CaseResult(case.name, case_op(case), variant, PASSED if ok else WRONG, reason, worst,
                      time.perf_counter() - t)


def run_node_tests(ops=None, names=None, progress=None, rtol=RTOL,
                   atol=ATOL) -> list[CaseResult]:
    """`run_node_case` over `node_cases(ops, names)`; `progress(result)` after each."""
    results = []
    for case in node_cases(ops, names):
        results.append(run_node_case(case, rtol, atol))
        if progress is not None:
            progress(results[-1])
    return results


# --- models -----------------------------------------------------------------------------------

def light_models() -> list[str]:
    """Names of the light models shipped with onnx (`bvlc_alexnet`, ..., `zfnet512`)."""
    return sorted(os.path.basename(p)[len("light_"):-len(".onnx")]
                  for p in glob.glob(os.path.join(LIGHT_DIR, "light_*.onnx")))


def light_model_path(name: str) -> str:
    return os.path.join(LIGHT_DIR, f"light_{name}.onnx")


def run_model(path: str, opt_level: int = 3, name: str | None = None) -> CaseResult:
    """Compile the ONNX file at `path` at -O`opt_level`, run it on `random_inputs` and compare
    with onnxruntime. `op` is the model's op types, most used first (at most five)."""
    model = onnx.load(path)
    name = name or os.path.basename(path).removesuffix(".onnx")
    counts = Counter(n.op_type for n in model.graph.node)
    op = ",".join(o for o, _ in counts.most_common(5))
    feeds = random_inputs(model)
    ref = ort_outputs(path, feeds)
    t = time.perf_counter()
    try:
        cm = ck.compile(path, opt_level=opt_level, asm=False,
                        input_shapes={n: list(a.shape) for n, a in feeds})
        got = cm.run(*[a for _, a in feeds])
        del cm  # drop the JIT engine and arena now, not at the next collection
    except REFUSED as error:
        return CaseResult(name, op, f"-O{opt_level}", REFUSED_STATUS, refusal_reason(error),
                          None, time.perf_counter() - t)
    seconds = time.perf_counter() - t
    ok, worst, reason = compare(got, ref)
    if len(got) != len(ref):  # a model must produce exactly its outputs
        ok, reason = False, f"{len(got)} outputs, expected {len(ref)}"
    spread = float(np.ptp(ref[0])) if ref and ref[0].size else None
    return CaseResult(name, op, f"-O{opt_level}", PASSED if ok else WRONG, reason, worst,
                      seconds, spread)


def run_light_models(names=None, opt_level: int = 3) -> list[CaseResult]:
    return [run_model(light_model_path(n), opt_level, n) for n in (names or light_models())]


def run_times(fn, repeat: int = 5) -> list[float]:
    """Wall seconds of each of `repeat` timed calls of `fn`, after one untimed call (page
    faults, caches): the shared timer's `samples`."""
    return timing.samples(fn, repeat, "wall")


def best_seconds(fn, repeat: int = 5) -> float:
    """Fastest of `repeat` timed calls of `fn`, after one untimed call (`run_times`)."""
    return timing.best_of(fn, repeat, "wall")


def time_model(path: str, opt_level: int = 3, repeat: int = 5, name: str | None = None) -> dict:
    """Compile time and single-thread, batch-as-stored latency of compilerkit against
    onnxruntime on one ONNX file, measured as `benchmarks/compile_bench.py --light` does
    (compile once, then the best of `repeat` runs of each), on `random_inputs`.

    Returns a dict: `model`, `opt_level`, `matches` (within RTOL/ATOL of onnxruntime) and
    `max_error` (deterministic: the same on every run), and the wall-clock measurements
    `compile_s`, `stage_s` (seconds per compiler stage), `compilerkit_ms`, `ort_ms` and
    `speed_ratio` (onnxruntime / compilerkit latency: > 1 means compilerkit is faster), and
    the buffer plan's `arena_bytes` against `naive_bytes` (one buffer per tensor).
    """
    name = name or os.path.basename(path).removesuffix(".onnx")
    feeds = random_inputs(path)
    arrays = [a for _, a in feeds]
    sess = ort_session(path)
    ref = sess.run(None, dict(feeds))
    t = time.perf_counter()
    cm = ck.compile(path, opt_level=opt_level, asm=False,
                    input_shapes={n: list(a.shape) for n, a in feeds})
    compile_s = time.perf_counter() - t
    ok, worst, _ = compare(cm.run(*arrays), ref)
    ck_s = best_seconds(lambda: cm.run(*arrays), repeat)
    ort_s = best_seconds(lambda: sess.run(None, dict(feeds)), repeat)
    return {"model": name, "opt_level": opt_level, "matches": bool(ok), "max_error": worst,
            "compile_s": compile_s, "stage_s": dict(cm.timings),
            "compilerkit_ms": ck_s * 1e3, "ort_ms": ort_s * 1e3, "speed_ratio": ort_s / ck_s,
            "arena_bytes": cm.arena_bytes, "naive_bytes": cm.naive_bytes}


# --- ONNX's data folders -------------------------------------------------------------------

DATA_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
# The folders of small models with stored inputs and outputs (140 cases in onnx 1.23); `light`
# (random weights, no stored outputs) is run against onnxruntime by `run_light_models` instead,
# and `node` is the generated node tests above.
DATA_FOLDERS = ("simple", "pytorch-converted", "pytorch-operator")


def data_folder_cases(folders=DATA_FOLDERS) -> list[str]:
    """The case folders (each a `model.onnx` and `test_data_set_*/{input,output}_*.pb`) of
    `folders` under `DATA_DIR`, sorted."""
    return sorted(os.path.dirname(p) for f in folders
                  for p in glob.glob(os.path.join(DATA_DIR, f, "*", "model.onnx")))


def _stored_tensors(folder, prefix):
    out = []
    for p in sorted(glob.glob(os.path.join(folder, f"{prefix}_*.pb")),
                    key=lambda p: int(p.rsplit("_", 1)[1].removesuffix(".pb"))):
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        out.append(onnx.numpy_helper.to_array(t))
    return out


def _dynamic_shapes(model, inputs) -> dict | None:
    """input_shapes for the tensor inputs `model` declares with a dynamic dimension, from
    `inputs` (what a user passes for them; the model is compiled as given)."""
    inits = {w.name for w in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in inits]
    shapes = {}
    for vi, a in zip(graph_inputs, inputs, strict=False):
        tt = vi.type.tensor_type
        if vi.type.WhichOneof("value") == "tensor_type" and tt.HasField("shape") and any(
                not d.HasField("dim_value") for d in tt.shape.dim):
            shapes[vi.name] = list(np.shape(a))
    return shapes or None


def run_data_case(folder, rtol=RTOL, atol=ATOL) -> CaseResult:
    """Compile one data-folder case (host, -O2) as given (its dynamic dimensions fixed with
    input_shapes from the stored inputs, as a user would; a model whose inputs decide shapes
    is specialised on them, compilerkit/specialize.py), else, as the node tests do, as the
    constant-static variant built from its first data set; compare with every stored data set.
    Stored inputs are read as tensors only for a model whose inputs are all tensors (a model
    with sequence inputs stays refused). `op` is the model's op types."""
    name = f"{os.path.basename(os.path.dirname(folder))}/{os.path.basename(folder)}"
    model = onnx.load(os.path.join(folder, "model.onnx"))
    op = "+".join(_ops_of(model))
    sets = sorted(glob.glob(os.path.join(folder, "test_data_set_*")))
    t = time.perf_counter()
    tensors_only = all(i.type.WhichOneof("value") == "tensor_type" for i in model.graph.input)
    variant, rest, reps = GIVEN, None, {}
    ok, worst, reason = True, 0.0, ""
    names = [i.name for i in model.graph.input
             if i.name not in {w.name for w in model.graph.initializer}]
    try:
        for data in sets if tensors_only else []:
            inputs = _stored_tensors(data, "input")
            shapes = _dynamic_shapes(model, inputs)
            key = repr(shapes)
            if key not in reps:  # one compile per distinct set of dynamic shapes
                reps[key] = CompilerkitBackend.prepare(model, input_shapes=shapes)
            got = reps[key].run(inputs)  # a specialised model compiles on its first run
            good, err, why = compare(got, _stored_tensors(data, "output"), rtol, atol)
            ok, worst = ok and good, max(worst, err)
            reason = reason or (f"{os.path.basename(data)}: {why}" if why else "")
        if not sets or not tensors_only:
            CompilerkitBackend.prepare(model)  # refused (no stored data: nothing to compare)
    except REFUSED as error:
        if not sets or not tensors_only:
            return CaseResult(name, op, GIVEN, REFUSED_STATUS, refusal_reason(error),
                              None, time.perf_counter() - t)
        variant, ok, worst, reason = CONSTANT, True, 0.0, ""
        try:
            given = _stored_tensors(sets[0], "input")
            variant_model, _, shapes = constant_static_variant(model, given)
            rest = [i.name for i in variant_model.graph.input
                    if i.name not in {w.name for w in variant_model.graph.initializer}]
            rep = CompilerkitBackend.prepare(variant_model, input_shapes=shapes)
        except REFUSED as error:
            return CaseResult(name, op, CONSTANT, REFUSED_STATUS, refusal_reason(error),
                              None, time.perf_counter() - t)
        for data in sets:  # the variant keeps only the data inputs, in order
            inputs = [a for n, a in zip(names, _stored_tensors(data, "input"), strict=False)
                      if n in rest]
            got = rep.run(inputs)
            good, err, why = compare(got, _stored_tensors(data, "output"), rtol, atol)
            ok, worst = ok and good, max(worst, err)
            reason = reason or (f"{os.path.basename(data)}: {why}" if why else "")
    return CaseResult(name, op, variant, PASSED if ok else WRONG, reason, worst,
                      time.perf_counter() - t)


def run_data_folders(folders=DATA_FOLDERS, progress=None, rtol=RTOL,
                     atol=ATOL) -> list[CaseResult]:
    """`run_data_case` over `data_folder_cases(folders)`; `progress(result)` after each."""
    results = []
    for folder in data_folder_cases(folders):
        results.append(run_data_case(folder, rtol, atol))
        if progress is not None:
            progress(results[-1])
    return results


# --- summaries ----------------------------------------------------------------------------------

def summarize(results) -> dict[str, dict]:
    """Per op: counts of passed (as given / as the constant-static variant), refused, wrong,
    the refusal reasons with their counts, the worst error among passed cases (None when none
    passed), total seconds."""
    out = {}
    for r in results:
        s = out.setdefault(r.op, {"cases": 0, PASSED: 0, CONSTANT: 0, REFUSED_STATUS: 0,
                                  WRONG: 0, "reasons": Counter(), "max_error": None,
                                  "seconds": 0.0})
        s["cases"] += 1
        s[r.status] += 1
        s["seconds"] += r.seconds
        if r.status == PASSED and r.variant == CONSTANT:
            s[CONSTANT] += 1
        if r.status == REFUSED_STATUS:
            s["reasons"][r.reason] += 1
        if r.status == PASSED and r.max_error is not None:
            s["max_error"] = max(s["max_error"] or 0.0, r.max_error)
    return dict(sorted(out.items()))


def totals(results) -> dict[str, int]:
    """Whole-suite counts: cases, passed (as given, or as a model), passed only as the
    constant-static variant, refused, wrong."""
    c = Counter(r.status for r in results)
    variant = sum(r.status == PASSED and r.variant == CONSTANT for r in results)
    return {"cases": len(results), "passed": c[PASSED] - variant, "variant": variant,
            "refused": c[REFUSED_STATUS], "wrong": c[WRONG]}


_ELEMENT_TYPE = re.compile(r"element type (\w+) is not supported|ONNX element type (\d+) is not")
_WHERE = re.compile(r"^(node|op|input) '[^']*': ")


def reason_group(reason: str) -> tuple[str, str]:
    """(group, detail) of a refusal reason: unsupported element types form one group with the
    type as detail ("FLOAT16"); otherwise the reason without the node/op/input it names."""
    kind, _, text = reason.partition(": ")
    m = _ELEMENT_TYPE.search(text)
    if m:
        name = m.group(1) or onnx.TensorProto.DataType.Name(int(m.group(2)))
        return "element type not supported", name
    while _WHERE.match(text):
        text = _WHERE.sub("", text, count=1)
    return text or kind, ""


def refusal_groups(results) -> dict[str, dict]:
    """Refusals grouped by `reason_group`: {group: {"cases": n, "ops": Counter, "details":
    Counter}}, largest group first."""
    out = {}
    for r in results:
        if r.status != REFUSED_STATUS:
            continue
        group, detail = reason_group(r.reason)
        g = out.setdefault(group, {"cases": 0, "ops": Counter(), "details": Counter()})
        g["cases"] += 1
        g["ops"][r.op] += 1
        if detail:
            g["details"][detail] += 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["cases"]))


# --- tables (markdown, for notebooks and reports) ----------------------------------------------

def markdown_table(header, rows) -> str:
    def cell(v):
        return str(v).replace("|", "\\|")
    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(cell, r)) + " |" for r in rows]
    return "\n".join(lines)


def _error(e):
    return "-" if e is None else ("inf" if e == float("inf") else f"{e:.1e}")


def op_table(results) -> str:
    """One row per op: cases, passed (of which only as the constant-static variant), refused,
    wrong, worst error among passed cases, seconds; a total row last."""
    def passed(n, variant):
        return f"{n} ({variant})" if variant else n
    rows = [(op, s["cases"], passed(s[PASSED], s[CONSTANT]), s[REFUSED_STATUS], s[WRONG],
             _error(s["max_error"]), f"{s['seconds']:.2f}")
            for op, s in summarize(results).items()]
    t = totals(results)
    rows.append(("**total**", t["cases"], passed(t["passed"] + t["variant"], t["variant"]),
                 t["refused"], t["wrong"], "", f"{sum(r.seconds for r in results):.1f}"))
    return markdown_table(["op", "cases", "passed (as variant)", "refused", "wrong",
                           "max error (passed)", "seconds"], rows)


def refusal_table(results) -> str:
    """One row per refusal group: cases, ops hit, details (element types) with counts."""
    def counts(c):
        return ", ".join(f"{k} {v}" for k, v in c.most_common())
    rows = [(g, v["cases"], counts(v["ops"]), counts(v["details"]))
            for g, v in refusal_groups(results).items()]
    return markdown_table(["reason", "cases", "ops", "details"], rows)


def model_table(results) -> str:
    """One row per model: level, match yes/no, max error, output spread, compile + run
    seconds, reason."""
    rows = [(r.name, r.variant, "yes" if r.status == PASSED else "no", _error(r.max_error),
             _error(r.ref_spread), f"{r.seconds:.1f}", r.reason or "") for r in results]
    return markdown_table(["model", "level", "matches onnxruntime", "max error",
                           "output spread (max - min)", "seconds", "note"], rows)
