"""Fuzz axis: ONNX's own node-test models for every lowered op, on new data.

Every op compilerkit lowers (compilerkit.SUPPORTED, so a newly lowered op is drawn without
touching this file) has node-test cases in the onnx package: valid attribute combinations and
shapes chosen by ONNX's authors. A case here takes one of them and:
- keeps its parameter inputs (shapes, axes, pads, indices, every integer or bool input, the
  inputs conformance.PARAMS names) at the test's own values, as initializers, so the graph is
  one compilerkit compiles;
- leaves the float data inputs as graph inputs, which the harness fills with fresh random
  numbers, one case in five special values (NaN, +-inf, subnormals, +-0, 1e30), so the op runs
  on data its test never saw, checked against onnxruntime;
- one case in five makes the float data constant too (fresh random values as initializers),
  so the whole graph folds at compile time: constant folding (ONNX's reference evaluator) must
  agree with onnxruntime as the compiled code does.
"""

from __future__ import annotations

import random

import numpy as np


def _cases_by_op():
    from compilerkit.measure.conformance import _arrays, case_op, node_cases

    by_op = {}
    for c in node_cases():
        if c.kind != "node" or not c.data_sets:
            continue
        # The harness feeds arrays: cases with sequence or optional inputs or outputs (lists,
        # None) are left to the conformance run.
        if any(v.type.WhichOneof("value") != "tensor_type"
               for v in list(c.model.graph.input) + list(c.model.graph.output)):
            continue
        by_op.setdefault(case_op(c), []).append((c, _arrays(c.data_sets[0][0])))
    return by_op


def _is_parameter(model, name: str) -> bool:
    from compilerkit.measure.conformance import PARAMS

    return any(node.input[k] == name for node in model.graph.node
               for k in PARAMS.get(node.op_type, ()) if k < len(node.input))


def node_model(case, inputs, all_constant: bool, rng: np.random.Generator) -> bytes:
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    for vi, value in zip(list(m.graph.input), inputs, strict=False):
        if value is None:
            continue
        value = np.asarray(value)
        if value.dtype.kind == "f" and not _is_parameter(m, vi.name):
            if not all_constant:
                continue
            value = (rng.standard_normal(value.shape) * 2).astype(value.dtype)
        m.graph.initializer.append(onnx.numpy_helper.from_array(value, vi.name))
        m.graph.input.remove(vi)
    return m.SerializeToString()


def node_cases(n: int, seed: int) -> list[dict]:
    """n cases, ops drawn uniformly (not cases: an op with 40 node tests is not 40x as
    interesting), then one of the op's node tests."""
    if n <= 0:
        return []
    by_op = _cases_by_op()
    ops = sorted(by_op)
    rng = random.Random(seed)
    out = []
    for k in range(n):
        op = rng.choice(ops)
        case, inputs = rng.choice(by_op[op])
        all_constant = rng.random() < 0.2
        case_seed = rng.randrange(1 << 30)
        model = node_model(case, inputs, all_constant, np.random.default_rng(case_seed))
        target = rng.choice(["s390x", "ppc64"]) if rng.random() < 0.05 else "host"
        out.append({"source": "node", "model": model, "input_shapes": None,
                    "all_constant": all_constant,
                    "desc": f"node {k} on {target}: {case.name}"
                            + (" [all constant]" if all_constant else ""),
                    "opt_level": rng.choice([0, 1, 2, 3]), "seed": case_seed, "target": target})
    return out
