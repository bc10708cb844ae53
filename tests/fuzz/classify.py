"""How the fuzz worker (fuzzlib.py) judges one model case: compile and run it with compilerkit,
run onnxruntime on the same model and data, and name the class (fuzzlib.CLASSES).

The rules, in one place: an error must be compilerkit's own and name its culprit; every
refusal goes to onnxruntime (with the compiled signature's data, or data for the model's
declared inputs when the compile failed), and is false when onnxruntime runs the model, unless
it is an honest decline (`_declined`); outputs must match onnxruntime's with NaN where it has
NaN, and only there (`compare`); a compile whose options are wrong on purpose must be refused
naming the option; a difference after a ConvAccuracyWarning (a Winograd or FFT algorithm asked
for by name on weights outside its error bound) is "warned", not silent. Why a module of its
own: fuzzlib.py holds the case generators and the driver, and grew past a size one reads in
one sitting.
"""

from __future__ import annotations

import re
import warnings

import numpy as np


def _is_compilerkit_error(error: BaseException) -> bool:
    return type(error).__module__.startswith("compilerkit") and bool(str(error).strip())


def _inputs(signature, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _, shape, dtype in signature:
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            a = rng.standard_normal(shape) * 2
        elif dtype.kind == "b":
            a = rng.random(shape) < 0.5
        else:  # indices and divisors: small, negative and zero among them
            a = rng.integers(-3, 5, size=shape)
        out.append(np.asarray(a).astype(dtype))  # an array also for rank 0
    return out


def compare(ours, ref) -> str | None:
    """None when they match, else what differs."""
    if len(ours) != len(ref):
        return f"{len(ours)} outputs, onnxruntime {len(ref)}"
    for k, (o, r) in enumerate(zip(ours, ref, strict=True)):
        r = np.asarray(r)
        if o.shape != r.shape:
            return f"output {k}: shape {list(o.shape)}, onnxruntime {list(r.shape)}"
        if o.dtype != r.dtype:
            return f"output {k}: dtype {o.dtype}, onnxruntime {r.dtype}"
        if o.dtype.kind == "f":
            scale = float(np.nanmax(np.abs(r[np.isfinite(r)]), initial=1.0))
            ok = np.allclose(o, r, rtol=1e-3, atol=1e-4 * max(scale, 1.0), equal_nan=True)
        else:
            ok = np.array_equal(o, r)
        if not ok:
            bad = np.flatnonzero(~np.isclose(o, r, rtol=1e-3, equal_nan=True)) if \
                o.dtype.kind == "f" else np.flatnonzero(o != r)
            i = int(bad[0]) if bad.size else 0
            return (f"output {k}: element {i} is {o.reshape(-1)[i]!r}, onnxruntime "
                    f"{r.reshape(-1)[i]!r} ({bad.size} of {o.size} differ)")
    return None


def _ort_run(ort, model: bytes, signature, arrays):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 4
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return s.run(None, dict(zip([name for name, _, _ in signature], arrays, strict=True)))


def _model_signature(model: bytes, input_shapes):
    """[(name, shape, dtype)] of a model's graph inputs (symbolic dims 1, `input_shapes`
    first), for running onnxruntime on a model compilerkit refused; None when unreadable."""
    import onnx
    from onnx import helper

    try:
        m = onnx.load_from_string(model)
        inits = {i.name for i in m.graph.initializer}
        sig = []
        for vi in m.graph.input:
            if vi.name in inits:
                continue
            tt = vi.type.tensor_type
            shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
            if input_shapes and vi.name in input_shapes:
                shape = [int(d) for d in input_shapes[vi.name]]
            if any(d < 0 or d > 1 << 20 for d in shape):
                return None
            sig.append((vi.name, shape, np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))))
        return sig
    except Exception:  # noqa: BLE001 (onnxruntime will not read it either)
        return None


def _declined(e: BaseException) -> bool:
    """An honest refusal of what compilerkit does not do (an unsupported op or attribute, the
    documented compile budget, an emulator's instruction limit), not a verdict on the model."""
    if not type(e).__module__.startswith("compilerkit"):
        return False
    name = type(e).__name__
    msg = str(e)
    return (isinstance(e, NotImplementedError) or name in ("UnsupportedOpError",
                                                           "EmulationLimit")
            or "max_bytes" in msg or "compile budget" in msg)


def _names_something(msg: str) -> bool:
    """A message that names its culprit: a quoted name, a %value, a number, or a path."""
    return bool(re.search(r"['\"`%/<]|\d", msg))


def model_case(case, ck, ort, say) -> dict:
    """Compile and run one model case and classify it against onnxruntime."""
    from axes_tasks import reraise_interrupt

    from compilerkit import ConvAccuracyWarning

    inputs = _special_inputs if case.get("special") else _inputs
    outs, arrays, sig = None, None, None
    # the compile and run's ConvAccuracyWarnings (the worker ignores every other warning)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore")
        warnings.simplefilter("always", ConvAccuracyWarning)
        try:
            cm = ck.compile(case["model"], target=case.get("target") or "host",
                            opt_level=case["opt_level"], input_shapes=case["input_shapes"],
                            asm=False, codegen=case.get("codegen") or "llvm",
                            num_threads=case.get("num_threads"),
                            conv_algorithm=case.get("conv_algorithm") or "classic",
                            schedule=case.get("schedule"))
            sig = cm.inputs
            arrays = inputs(sig, case["seed"])
            say(phase="run")
            outs = cm.run(*arrays)
        except BaseException as e:  # noqa: BLE001 (classified; xDSL raises BaseExceptions)
            reraise_interrupt(e)
            detail = f"{type(e).__name__}: {str(e)[:400]}"
            bad_option = case.get("options_bad")
            if bad_option is not None and arrays is None:
                # Options wrong on purpose: the error must name the option (or its value).
                option, value = bad_option
                msg = str(e)
                clear = (isinstance(e, (ValueError, TypeError)) or _is_compilerkit_error(e)) and (
                    option in msg or str(value).split("{")[0] in msg or _names_something(msg))
                return {"result": "refused" if clear else "unclear", "detail": detail}
            if not _is_compilerkit_error(e) or not _names_something(str(e)):
                return {"result": "unclear", "detail": f"{type(e).__module__}.{detail}"}
            if isinstance(e, ck.RunError) and "overflows" in str(e):
                return {"result": "refused", "detail": detail}  # INT_MIN / -1: by design
            # Every refusal is a question for onnxruntime: does it run the same model (and data)?
            if sig is None:
                sig = _model_signature(case["model"], case["input_shapes"])
                if sig is None:
                    return {"result": "refused", "detail": f"{detail}; onnxruntime cannot read it"}
                arrays = inputs(sig, case["seed"])
            say(refusal=detail, phase="onnxruntime-check")
            try:
                _ort_run(ort, case["model"], sig, arrays)
            except Exception as e2:  # noqa: BLE001 (it refuses too: as it should)
                return {"result": "refused", "detail": f"{detail}; onnxruntime refuses too: "
                                                       f"{str(e2)[:120]}"}
            if _declined(e):
                return {"result": "declined", "detail": f"{detail}; onnxruntime runs it"}
            return {"result": "false_refusal", "detail": f"{detail}; onnxruntime ran the same "
                                                         f"model and data"}
    say(phase="onnxruntime")
    try:
        ref = _ort_run(ort, case["model"], cm.inputs, arrays)
    except Exception as e:  # noqa: BLE001
        return {"result": "ort_refuses", "detail": f"onnxruntime: {type(e).__name__}: "
                f"{str(e)[:300]}"}
    diff = compare(outs, ref)
    if diff is not None and case.get("special") and not case.get("all_constant") and \
            reference_agrees(case["model"], cm.inputs, arrays, outs):
        # Special values can make onnxruntime's kernels differ from the ONNX spec's formula
        # (LRN's running window sum: inf - inf = NaN for a 1e30 two channels away); the spec's
        # own reference evaluator is the judge. Not for folded graphs: folding *is* the
        # reference evaluator, so agreeing with it would prove nothing.
        return {"result": "ort_differs", "detail": f"{diff} (compilerkit agrees with ONNX's "
                                                   f"reference evaluator)"}
    if diff is not None and case.get("special") and casts_special_to_int(case["model"], outs):
        # ONNX leaves a cast of NaN, inf or an out-of-range float to an integer undefined, and
        # onnxruntime's own answer changes with the graph around it (float -> int64 -> int32
        # of -1e30 is 0 when the int64 is an output, INT32_MIN when it is not).
        return {"result": "undefined", "detail": f"{diff} (a float -> int cast of special "
                                                 f"values: undefined in ONNX)"}
    if diff is not None and any(issubclass(w.category, ConvAccuracyWarning) for w in caught):
        # a Winograd or FFT algorithm asked for by name on weights outside its error bound:
        # compilerkit said so when it compiled (not silent); the difference is that rounding
        return {"result": "warned", "detail": f"{diff} (compiled with a ConvAccuracyWarning)"}
    return {"result": "match" if diff is None else "wrong", "detail": diff or ""}


def reference_agrees(model: bytes, signature, arrays, outs) -> bool:
    """Whether ONNX's reference evaluator gives compilerkit's outputs for the same data."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    from compilerkit.onnx_passes.constant_folding import REFERENCE_FIXES

    try:
        ref = ReferenceEvaluator(onnx.load_from_string(model), new_ops=REFERENCE_FIXES).run(
            None, {name: a for (name, _, _), a in zip(signature, arrays, strict=True)})
    except Exception:  # noqa: BLE001 - the reference cannot run it: no verdict
        return False
    return compare(outs, [np.asarray(r) for r in ref]) is None


def casts_special_to_int(model: bytes, outs) -> bool:
    """The model casts to an integer type and an integer output differs (with special data)."""
    import onnx

    ints = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32,
            onnx.TensorProto.INT64, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16,
            onnx.TensorProto.UINT32, onnx.TensorProto.UINT64}
    m = onnx.load_from_string(model)
    casts = any(n.op_type == "Cast" and any(a.name == "to" and a.i in ints for a in n.attribute)
                for n in m.graph.node)
    return casts and any(o.dtype.kind in "iu" for o in outs)


def _special_inputs(signature, seed):
    from axes_models import special_inputs

    return special_inputs(signature, seed)
