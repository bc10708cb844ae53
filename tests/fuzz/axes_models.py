"""Model axes of the fuzz harness (fuzzlib.py): cases that still end in one compile, one run and
one onnxruntime comparison, but widen what goes in.

    special data       inputs with NaN, +-inf, subnormals, +-0, +-1e30 (floats) and INT_MIN,
                       INT_MAX, 0, -1 (integers) mixed into ordinary values
    integer graphs     int32/int64 Add/Sub/Mul/Div/Mod/MatMul and Cast float <-> int, with
                       constants at the type's limits
    conv graphs        1-D to 3-D Convs (strides, pads, dilations, groups, a residual Add
                       and an activation after)
                       under every `conv_algorithm` and both code generators
    schedule options   `compile(..., schedule=...)` strings, valid ones and mutated ones
                       (simd=0 / 3 / 1e8 / -4 / garbage, unknown passes and arguments)

Why a module of its own: fuzzlib.py holds the first two case families and the driver; these
axes would push it past a size one can read. Cases are plain dicts (the worker's protocol);
`options_bad` marks a case whose compile *options* are wrong on purpose: a refusal then must
name the option, and is not a question for onnxruntime.
"""

from __future__ import annotations

import random

import numpy as np

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT_SPECIALS = (np.nan, np.inf, -np.inf, 1e-40, -1e-42, 1.4e-45, 0.0, -0.0, 1e30, -1e30,
                  1e-30, 65504.0)


# ---- special values in data --------------------------------------------------------------------

def special_inputs(signature, seed):
    """Arrays for `signature` [(name, shape, dtype)]: ordinary values with a share (a tenth to
    a half) replaced by the special values of the dtype."""
    rng = np.random.default_rng(seed)
    out = []
    for _, shape, dtype in signature:
        dtype = np.dtype(dtype)
        size = int(np.prod(shape, dtype=np.int64))
        if dtype.kind == "f":
            a = (rng.standard_normal(size) * 2).astype(dtype)
            pool = np.array(FLOAT_SPECIALS, dtype=np.float64)
            if dtype.itemsize == 2:
                pool = pool[np.abs(pool) < 1e5]
            specials = pool.astype(dtype)
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            a = rng.integers(-3, 5, size=size).astype(dtype) if dtype.kind == "i" else \
                rng.integers(0, 5, size=size).astype(dtype)
            specials = np.array([info.min, info.max, 0, 1, info.max - 1] +
                                ([-1, info.min + 1] if dtype.kind == "i" else []), dtype)
        elif dtype.kind == "b":
            out.append((rng.random(shape) < 0.5).astype(dtype))
            continue
        else:
            out.append(np.zeros(shape, dtype))
            continue
        if size:
            share = rng.uniform(0.1, 0.5)
            hit = rng.random(size) < share
            a[hit] = rng.choice(specials, size=int(hit.sum()))
        out.append(a.reshape(shape))
    return out


# ---- integer graphs ----------------------------------------------------------------------------

def _int_graph(rng: random.Random):
    """(model, description): a chain of 1-3 integer ops on an int32/int64 input (sometimes a
    float input cast to int first), constants drawn from the type's limits."""
    from onnx import TensorProto, helper, numpy_helper

    elem = rng.choice([TensorProto.INT32, TensorProto.INT64])
    npt = np.int32 if elem == TensorProto.INT32 else np.int64
    info = np.iinfo(npt)
    rank = rng.randint(1, 3)
    shape = [rng.randint(1, 4) for _ in range(rank)]
    inputs, inits, nodes, ops = [], [], [], []
    if rng.random() < 0.25:  # float data cast to int: the cast's rounding and its limits
        inputs.append(helper.make_tensor_value_info("xf", TensorProto.FLOAT, shape))
        nodes.append(helper.make_node("Cast", ["xf"], ["x"], to=elem))
        ops.append("Cast(f->i)")
    else:
        inputs.append(helper.make_tensor_value_info("x", elem, shape))
    last, cur_shape = "x", list(shape)
    for k in range(rng.randint(1, 3)):
        op = rng.choice(["Add", "Sub", "Mul", "Div", "Mod", "MatMul", "Cast", "Cast",
                         "Abs", "Neg", "Relu", "Sign"])
        out = f"t{k}"
        if op in ("Add", "Sub", "Mul", "Div", "Mod"):
            name = f"b{k}"
            bshape = [d if rng.random() < 0.7 else 1 for d in cur_shape][-rng.randint(0, len(
                cur_shape)):] if cur_shape else []
            if rng.random() < 0.5:
                vals = [rng.choice([info.min, info.max, -1, 0, 1, 2, -7, 3, info.max // 2])
                        for _ in range(int(np.prod(bshape, dtype=np.int64)))]
                inits.append(numpy_helper.from_array(np.array(vals, npt).reshape(bshape), name))
            else:
                inputs.append(helper.make_tensor_value_info(name, elem, bshape))
            attrs = {}
            if op == "Mod":
                attrs["fmod"] = 0  # integer Mod: the divisor's sign (fmod=1 is for floats)
            nodes.append(helper.make_node(op, [last, name], [out], **attrs))
            cur_shape = list(np.broadcast_shapes(tuple(cur_shape), tuple(bshape)))
        elif op in ("Abs", "Neg", "Relu", "Sign"):  # the type's minimum wraps under Abs/Neg
            nodes.append(helper.make_node(op, [last], [out]))
        elif op == "MatMul":
            kk = cur_shape[-1]
            n = rng.randint(1, 4)
            w = np.array([rng.choice([-3, -1, 0, 1, 2, 5, info.max, info.min])
                          for _ in range(kk * n)], npt).reshape(kk, n)
            inits.append(numpy_helper.from_array(w, f"w{k}"))
            nodes.append(helper.make_node("MatMul", [last, f"w{k}"], [out]))
            cur_shape = cur_shape[:-1] + [n]
        else:  # Cast to the other integer width, or to float and back
            to = rng.choice([TensorProto.INT32, TensorProto.INT64, TensorProto.FLOAT,
                             TensorProto.DOUBLE])
            nodes.append(helper.make_node("Cast", [last], [out], to=to))
            if to in (TensorProto.FLOAT, TensorProto.DOUBLE):
                nodes.append(helper.make_node("Cast", [out], [out + "i"], to=elem))
                out += "i"
            else:
                elem, npt = to, (np.int32 if to == TensorProto.INT32 else np.int64)
                info = np.iinfo(npt)
        ops.append(op)
        last = out
    outputs = [helper.make_tensor_value_info(last, elem, cur_shape)]
    graph = helper.make_graph(nodes, "fuzz_int", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return model, ",".join(ops)


def int_cases(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = []
    for k in range(n):
        model, ops = _int_graph(rng)
        special = rng.random() < 0.5
        cases.append({"source": "int", "desc": f"int graph {k}: {ops}"
                      + (" [special data]" if special else ""),
                      "model": model.SerializeToString(), "input_shapes": None,
                      "opt_level": rng.choice([0, 1, 2, 3]), "seed": rng.randrange(1 << 30),
                      "special": special})
    return cases


# ---- conv graphs under every algorithm ---------------------------------------------------------

def _conv_graph(rng: random.Random, small: bool):
    from onnx import TensorProto, helper, numpy_helper

    nd = rng.choice([1, 2, 2, 2, 3]) if not small else rng.choice([1, 2])
    k = rng.choice([1, 3, 3, 3, 5, 7]) if nd < 3 else rng.choice([3, 3, 5])
    stride = 1 if rng.random() < 0.75 else 2
    dil = 1 if rng.random() < 0.85 else 2
    group = 1
    c = rng.choice([1, 2, 3, 4, 8, 16] if not small else [1, 2, 4])
    m = rng.choice([1, 2, 4, 8, 16, 20] if not small else [1, 2, 4])
    if rng.random() < 0.2 and c % 2 == 0 and m % 2 == 0:
        group = 2
    if rng.random() < 0.1:
        group, m = c, c * rng.choice([1, 2])  # depthwise
    window = (k - 1) * dil + 1
    side = rng.randint(window, max(window, 16 if nd < 3 else 9))
    if small:
        side = min(side, max(window, 6))
    if rng.random() < 0.05:
        side = max(1, window - 1)  # a window wider than the input: refused by both
    n = rng.choice([1, 1, 2])
    x_shape = [n, c] + [side] * nd
    pads = [rng.choice([0, 0, 1, k // 2]) for _ in range(2 * nd)]
    w = rng_weights(rng, (m, c // group) + (k,) * nd)
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if rng.random() < 0.5:
        inits.append(numpy_helper.from_array(
            np.array([rng.uniform(-1, 1) for _ in range(m)], np.float32), "b"))
        ins.append("b")
    attrs = dict(kernel_shape=[k] * nd, strides=[stride] * nd, dilations=[dil] * nd,
                 pads=pads, group=group)
    nodes = [helper.make_node("Conv", ins, ["c"], **attrs)]
    last = "c"
    act = rng.choice([None, None, "Relu", "Sigmoid", "LeakyRelu"])
    out_sp = [(side + pads[i] + pads[i + nd] - dil * (k - 1) - 1) // stride + 1
              for i in range(nd)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    # a residual sum (fuse-conv's `sums`: the Add in the Conv's epilogue), s a second input
    residual = rng.random() < 0.3 and min(out_sp) > 0
    if residual:
        inputs.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, [n, m] + out_sp))
        nodes.append(helper.make_node("Add", ["c", "s"] if rng.random() < 0.5 else ["s", "c"],
                                      ["r"]))
        last = "r"
    if act:
        nodes.append(helper.make_node(act, [last], ["y"]))
        last = "y"
    graph = helper.make_graph(
        nodes, "fuzz_conv", inputs,
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, [n, m] + out_sp)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    desc = (f"Conv{nd}d x{x_shape} w{list(w.shape)} s{stride} d{dil} g{group} p{pads}"
            + (" +residual" if residual else "") + (f" +{act}" if act else "")
            + (" outlier-weight" if np.abs(w).max() > 10 else ""))
    return model, desc


def rng_weights(rng: random.Random, shape) -> np.ndarray:
    """Weights of a trained net's scale, now and then with an outlier (Winograd's weak spot)."""
    g = np.random.default_rng(rng.randrange(1 << 30))
    w = (g.standard_normal(shape) * 0.3).astype(np.float32)
    if rng.random() < 0.1 and w.size:
        w.reshape(-1)[g.integers(w.size)] = rng.choice([50.0, -1e4, 1e6])
    return w


def conv_cases(n: int, seed: int, x86: bool) -> list[dict]:
    from compilerkit.lowering.conv_algorithm import ALGORITHMS

    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        emulated = rng.random() < 0.04
        target = rng.choice(["s390x", "ppc64"]) if emulated else "host"
        model, desc = _conv_graph(rng, small=emulated)
        algo = rng.choice(ALGORITHMS)
        codegen = "loopnest" if x86 and not emulated and rng.random() < 0.4 else "llvm"
        special = rng.random() < 0.25
        cases.append({"source": "conv", "desc": f"{desc} [{algo}, {codegen}, {target}]"
                      + (" [special data]" if special else ""),
                      "model": model.SerializeToString(), "input_shapes": None,
                      "opt_level": rng.choice([0, 2, 3, 3]), "seed": rng.randrange(1 << 30),
                      "target": target, "codegen": codegen, "conv_algorithm": algo,
                      "special": special, "fixed_backend": True})
    return cases


# ---- schedule option strings -------------------------------------------------------------------

VALID_SCHEDULES = ("", "tile-matmul", "tile-matmul{simd=4}", "tile-matmul{simd=16}",
                   "unroll-small", "parallelize", "tile-matmul{simd=8},unroll-small,parallelize",
                   "parallelize{min-work=1}", "unroll-small{max-trip=2}",
                   "unroll-small{max-trip=16 max-body=64},parallelize")
BAD_SCHEDULES = ("tile-matmul{simd=0}", "tile-matmul{simd=3}", "tile-matmul{simd=100000000}",
                 "tile-matmul{simd=-4}", "tile-matmul{simd=abc}", "tile-matmul{simd=1e8}",
                 "tile-matmul{simd=", "tile-matmul{foo=1}", "no-such-pass", ",,",
                 "parallelize{min-work=-1}", "unroll-small{max-trip=-3}",
                 "unroll-small{max-trip=1000000000}", "lower-to-krnl", "plan-buffers",
                 "shape-inference", "gpu-map", "tile-matmul\x00", "tile-matmul{simd=4}}",
                 "tile-matmul{simd=99999999999999999999}")


def schedule_cases(n: int, seed: int, x86: bool) -> list[dict]:
    """A valid small model (a MatMul chain or a Conv) compiled with a schedule string."""
    from onnx import TensorProto, helper, numpy_helper

    rng = random.Random(seed)
    cases = []
    for k in range(n):
        bad = rng.random() < 0.5
        sched = rng.choice(BAD_SCHEDULES if bad else VALID_SCHEDULES)
        if rng.random() < 0.5:
            m_, k_, n_ = rng.randint(1, 33), rng.randint(1, 40), rng.randint(1, 33)
            w = np.random.default_rng(k).standard_normal((k_, n_)).astype(np.float32)
            g = helper.make_graph(
                [helper.make_node("MatMul", ["x", "w"], ["m"]),
                 helper.make_node("Relu", ["m"], ["y"])], "fuzz_sched",
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m_, k_])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m_, n_])],
                [numpy_helper.from_array(w, "w")])
            model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
            desc = f"MatMul {m_}x{k_}x{n_}"
        else:
            model, desc = _conv_graph(rng, small=True)
        codegen = "loopnest" if x86 and rng.random() < 0.3 else "llvm"
        cases.append({"source": "schedule", "desc": f"{desc} schedule={sched!r} [{codegen}]",
                      "model": model.SerializeToString(), "input_shapes": None,
                      "opt_level": rng.choice([1, 2, 3]), "seed": rng.randrange(1 << 30),
                      "target": "host", "codegen": codegen, "schedule": sched,
                      "options_bad": ("schedule", sched) if bad else None,
                      "fixed_backend": True})
    return cases
