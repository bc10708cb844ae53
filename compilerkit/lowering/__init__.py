"""ONNX IR -> Kernel IR (the `lower-to-krnl` pass).

Assumes the ONNX passes have run: every value has a static shape, parameters given as inputs
(shapes, axes, pads) are constants. The Kernel IR function takes the model inputs and then the
outputs as memref arguments (destination passing) and returns nothing. Constants become
`krnl.global`; every other value is a `krnl.alloc` (given an arena offset later by buffer
planning), except that a buffer returned by the model is replaced by its output argument.
One module per op family does the work; this file only dispatches, after validating each op
(onnx_passes/validate_onnx.py) and keeping the constants within the compile budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, NoneType, StringAttr, TensorType
from xdsl.ir import Block, Region
from xdsl.passes import ModulePass

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError, UnsupportedOpError
from compilerkit.frontend.checks import budget_of, share_checks
from compilerkit.lowering import (
    attention,
    conv,
    conv_transpose,
    det,
    elementwise,
    generators,
    indexing,
    layout,
    logic,
    loss,
    lppool,
    mathops,
    matmul,
    norm,
    normalization,
    pool,
    quant,
    recurrent,
    reduction,
    resize,
    scan,
    shape_ops,
    topk,
    trig,
    unfold,
)
from compilerkit.lowering.builder import KernelBuilder, memref_type, shape
from compilerkit.lowering.conv_algorithm import DEFAULT as DEFAULT_CONV_ALGORITHM
from compilerkit.lowering.conv_algorithm import check_algorithm
from compilerkit.lowering.guards import RegionGuards, lower_unexpanded
from compilerkit.onnx_passes.fuse_conv import summed_conv, summing_add
from compilerkit.onnx_passes.single_node import main_func
from compilerkit.onnx_passes.validate_onnx import check_result_types, validate_op
from mlsys_viz.units import human_bytes


def _with_ctx(fn, **wanted):
    # Some lowerings need the module (to read constant inputs) or the opset (semantics moved).
    def call(b, op, ins, module, opset):
        kw = {}
        if "module" in wanted:
            kw["module"] = module
        if "opset" in wanted:
            kw["opset"] = opset
        return fn(b, op, ins, **kw)
    return call


LOWERINGS = {}
for _name in elementwise.UNARY:
    LOWERINGS[_name] = _with_ctx(elementwise.lower_unary)
for _name in elementwise.BINARY:
    LOWERINGS[_name] = _with_ctx(elementwise.lower_binary)
for _name in elementwise.VARIADIC:
    LOWERINGS[_name] = _with_ctx(elementwise.lower_variadic)
LOWERINGS.update({
    "Clip": _with_ctx(elementwise.lower_clip, module=1, opset=1),
    "Cast": _with_ctx(elementwise.lower_cast),
    "Expand": _with_ctx(elementwise.lower_expand),
    "MatMul": _with_ctx(matmul.lower_matmul, module=1),
    "Gemm": _with_ctx(matmul.lower_gemm),
    "Conv": _with_ctx(conv.lower_conv),
    "ConvTranspose": _with_ctx(conv_transpose.lower_conv_transpose),
    "MaxPool": _with_ctx(pool.lower_pool, module=1),
    "AveragePool": _with_ctx(pool.lower_pool, module=1),
    "GlobalAveragePool": _with_ctx(pool.lower_global_pool),
    "GlobalMaxPool": _with_ctx(pool.lower_global_pool),
    "Softmax": _with_ctx(norm.lower_softmax, opset=1),
    "LogSoftmax": _with_ctx(norm.lower_softmax, opset=1),
    "LRN": _with_ctx(norm.lower_lrn),
    "BatchNormalization": _with_ctx(norm.lower_batchnorm),
    "Reshape": _with_ctx(shape_ops.lower_view),
    "Flatten": _with_ctx(shape_ops.lower_view),
    "Squeeze": _with_ctx(shape_ops.lower_view),
    "Unsqueeze": _with_ctx(shape_ops.lower_view),
    "Transpose": _with_ctx(shape_ops.lower_transpose),
    "Concat": _with_ctx(shape_ops.lower_concat),
    "Split": _with_ctx(shape_ops.lower_split, module=1),
    "Pad": _with_ctx(shape_ops.lower_pad, module=1, opset=1),
    "Slice": _with_ctx(shape_ops.lower_slice, module=1, opset=1),
    "Gather": _with_ctx(shape_ops.lower_gather),
    "ConstantOfShape": _with_ctx(shape_ops.lower_constant_of_shape),
    "Tile": _with_ctx(shape_ops.lower_tile),
})
for _name in reduction.OPS:
    LOWERINGS[_name] = _with_ctx(reduction.lower_reduce, module=1)
for _name in ("ArgMax", "ArgMin"):
    LOWERINGS[_name] = _with_ctx(reduction.lower_arg_extreme)
LOWERINGS["CumSum"] = _with_ctx(reduction.lower_cumsum, module=1)
LOWERINGS["Hardmax"] = _with_ctx(reduction.lower_hardmax, opset=1)
for _name in logic.OPS:
    LOWERINGS[_name] = _with_ctx(logic.lower_logic)
for _name in mathops.OPS:
    LOWERINGS[_name] = _with_ctx(mathops.lower_mathop)
LOWERINGS["LayerNormalization"] = _with_ctx(normalization.lower_layer_norm)
LOWERINGS["InstanceNormalization"] = _with_ctx(normalization.lower_instance_norm)
LOWERINGS["LpNormalization"] = _with_ctx(normalization.lower_lp_norm)
LOWERINGS["RMSNormalization"] = _with_ctx(normalization.lower_rms_norm)
for _name in trig.OPS:
    LOWERINGS[_name] = _with_ctx(trig.lower_trig)
LOWERINGS["Pow"] = _with_ctx(mathops.lower_pow, module=1)
LOWERINGS["GroupNormalization"] = _with_ctx(normalization.lower_group_norm)
LOWERINGS["MeanVarianceNormalization"] = _with_ctx(normalization.lower_mvn)

LOWERINGS.update({
    "GatherElements": _with_ctx(indexing.lower_gather_elements),
    "GatherND": _with_ctx(indexing.lower_gather_nd),
    "ScatterElements": _with_ctx(indexing.lower_scatter_elements),
    "Scatter": _with_ctx(indexing.lower_scatter_elements),
    "ScatterND": _with_ctx(indexing.lower_scatter_nd),
    "OneHot": _with_ctx(indexing.lower_one_hot, module=1),
    "Trilu": _with_ctx(layout.lower_trilu),
    "Range": _with_ctx(layout.lower_range),
    "DepthToSpace": _with_ctx(layout.lower_depth_to_space),
    "SpaceToDepth": _with_ctx(layout.lower_space_to_depth),
    "Resize": _with_ctx(resize.lower_resize, module=1, opset=1),
    "Upsample": _with_ctx(resize.lower_resize, module=1, opset=1),
})

for _name in recurrent.GATES:
    LOWERINGS[_name] = _with_ctx(recurrent.lower_recurrent, module=1)

# Transformer ops.
LOWERINGS.update({
    "Einsum": _with_ctx(attention.lower_einsum),
    "Attention": _with_ctx(attention.lower_attention),
    "RotaryEmbedding": _with_ctx(attention.lower_rotary_embedding),
    "Swish": _with_ctx(attention.lower_swish),
    "SwiGLU": _with_ctx(attention.lower_swish),
})

# Scans, generators and the ops whose value is the input's shape.
LOWERINGS.update({
    "TopK": _with_ctx(topk.lower_topk, module=1),
    "CumProd": _with_ctx(scan.lower_cumprod, module=1),
    "ReverseSequence": _with_ctx(scan.lower_reverse_sequence),
    "EyeLike": _with_ctx(generators.lower_eye_like),
    "HannWindow": _with_ctx(generators.lower_window, module=1),
    "HammingWindow": _with_ctx(generators.lower_window, module=1),
    "BlackmanWindow": _with_ctx(generators.lower_window, module=1),
    "Shape": _with_ctx(generators.lower_shape, module=1),
    "Size": _with_ctx(generators.lower_shape, module=1),
    "LpPool": _with_ctx(lppool.lower_lp_pool),
    "Not": _with_ctx(logic.lower_not),
})

# Quantisation (lowering/quant.py); lower_to_krnl refuses unsigned tensors elsewhere
# (quant.check_unsigned).
for _name, _lower in quant.LOWERINGS.items():
    LOWERINGS[_name] = _with_ctx(_lower)

# Unpooling, im2col's inverse, crops.
LOWERINGS.update({
    "MaxUnpool": _with_ctx(unfold.lower_max_unpool),
    "Col2Im": _with_ctx(unfold.lower_col2im, module=1),
    "CenterCropPad": _with_ctx(unfold.lower_center_crop_pad),
})

# Losses.
LOWERINGS.update({
    "NegativeLogLikelihoodLoss": _with_ctx(loss.lower_nll_loss),
    "SoftmaxCrossEntropyLoss": _with_ctx(loss.lower_softmax_cross_entropy),
})

LOWERINGS["Det"] = _with_ctx(det.lower_det)

# Control flow is unrolled on import (frontend/control_flow.py): none reaches the lowering from
# an ONNX model, and one in hand-written ONNX IR is refused (guards.lower_unexpanded).
for _name in ("If", "Loop", "Scan"):
    LOWERINGS[_name] = _with_ctx(lower_unexpanded)

SUPPORTED = sorted(LOWERINGS)


def _tag_nests(block, after, label):
    """Name the ONNX node on every top-level op its lowering produced (buffers, loop handles,
    nests), as MLIR's `loc` would: a reader of the Kernel IR sees which loops came from which
    node (ops inside a nest belong to it), and codegen emits a node's nests as one LLVM function
    named after it. Schedule ops inserted later sit between a node's tagged ops."""
    op = after.next_op if after is not None else block.first_op
    while op is not None:
        op.attributes["onnx_node"] = StringAttr(label)
        op = op.next_op


def _label(op) -> str:
    a = op.attributes.get("onnx_node_name")
    return a.data if a is not None else "?"


def _type_str(t) -> str:
    if not hasattr(t, "get_shape"):
        return str(t)
    if not isinstance(t, TensorType):
        return f"tensor<*x{t.element_type}>"
    return "tensor<" + "".join(f"{d}x" if d >= 0 else "?x" for d in t.get_shape()) + \
        f"{t.element_type}>"


def _memref(t, what="a value"):
    if not onnx_d.is_static(t):
        raise UnsupportedOpError(
            f"{what} has the type {_type_str(t)}: its shape is not known at compile time (it "
            "depends on a non-constant input or a dynamic dimension) and compilerkit compiles "
            "static shapes only; make shape parameters constants or fix input_shapes=")
    return memref_type(t.get_shape(), t.element_type)


def _names(src, key):
    a = src.attributes.get(key)
    return [x.data for x in a.data] if a is not None else []


def lower_to_krnl(module: ModuleOp, conv_algorithm: str = DEFAULT_CONV_ALGORITHM,
                  lanes: int = 16, taps: bool = True) -> ModuleOp:
    """A new module holding the Kernel IR of `module` (which is left unchanged); Convs lowered
    by `conv_algorithm` (conv_algorithm.ALGORITHMS), constant matrices stored in strips for a
    target of `lanes` f32 lanes (matmul.strip_width), the tap schedule allowed by `taps`."""
    from compilerkit.onnx_passes.single_node import opset_of

    src = main_func(module)
    ret = src.body.block.last_op
    in_names, out_names = _names(src, "input_names"), _names(src, "output_names")
    in_types = [_memref(a.type, f"graph input {n!r}") for a, n in zip(
        src.body.block.args, in_names + ["?"] * len(src.body.block.args), strict=False)]
    out_types = []
    for k, v in enumerate(ret.operands):
        name = out_names[k] if k < len(out_names) else f"#{k}"
        owner = getattr(v, "owner", None)
        node = f" (output of node {_label(owner)!r})" if getattr(
            owner, "name", "").startswith("onnx.") else ""
        out_types.append(_memref(v.type, f"graph output {name!r}{node}"))
    budget = budget_of(module)
    const_bytes = 0
    block = Block(arg_types=in_types + out_types)
    if not isinstance(taps, bool):
        raise ValueError(f"lower-to-krnl: taps={taps!r} is not true or false")
    b = KernelBuilder(block, check_algorithm(conv_algorithm), check_lanes(lanes), taps)
    # The block takes the inputs, then the output buffers: map the inputs only.
    values = {a: m for a, m in zip(src.body.block.args, block.args, strict=False)}
    new = ModuleOp([])
    onnx_d.share_resources(module, new)
    share_checks(module, new)
    opset = None
    n_globals = 0
    region_guards = RegionGuards()  # checks of conditional regions (guards.py)
    for op in src.body.block.ops:
        if op is ret:
            break
        kind = onnx_d.op_type(op)
        if kind == "NoValue":
            values[op.results[0]] = None
            continue
        if kind == "Constant":
            value = op.attributes["value"]
            name = getattr(getattr(value, "resource_handle", None), "data", None)
            name = f"{name}" if name else f"const_{n_globals}"
            n_globals += 1
            t = value.get_type()
            const_bytes += math.prod(t.get_shape()) * onnx_d.numpy_dtype(
                t.element_type).itemsize
            if const_bytes > budget:
                raise ModelError(
                    f"the model's constants reach {human_bytes(const_bytes)} at {name!r}, above "
                    f"the compile budget of {human_bytes(budget)} (compile(..., max_bytes=...))")
            g = krnl.GlobalOp(name, value, _memref(t, f"constant {name!r}"))
            block.add_op(g)
            values[op.results[0]] = g.res
            continue
        if kind == "Dropout" and len(op.operands) > 2 and not isinstance(
                op.operands[2].type, NoneType):
            raise UnsupportedOpError(f"node {_label(op)!r}: Dropout in training mode is not "
                                     "supported (inference only)")
        if kind == "BatchNormalization" and onnx_d.get_attr(op, "training_mode", 0):
            raise UnsupportedOpError(f"node {_label(op)!r}: BatchNormalization in training mode "
                                     "(batch statistics) is not supported (inference only)")
        if kind not in LOWERINGS:
            raise UnsupportedOpError(
                f"node {_label(op)!r}: op {kind!r} cannot be lowered to Kernel IR; supported "
                f"ops: {', '.join(SUPPORTED)}")
        for k, v in enumerate(list(op.operands) + list(op.results)):
            if not isinstance(v.type, NoneType) and not onnx_d.is_static(v.type) and (
                    v in values or v in op.results) and (
                    v not in op.results or v.uses):
                n_in = len(op.operands)
                which = f"input {k}" if k < n_in else f"output {k - n_in}"
                hint = f" {v.name_hint!r}" if v.name_hint else ""
                raise UnsupportedOpError(
                    f"node {_label(op)!r} ({kind}): {which}{hint} has a dynamic or unknown "
                    f"shape {_type_str(v.type)}; fix the model's input shapes with input_shapes=")
        validate_op(op, module)
        check_result_types(op, module)
        if opset is None:
            opset = opset_of(op)
        if kind == "Conv" and summing_add(op) is not None:
            values[op.results[0]] = None  # computed where its Add stands (below)
            continue
        summed = summed_conv(op) if kind == "Add" else None
        ins = [values[v] for v in op.operands]
        while ins and ins[-1] is None and summed is None:
            ins.pop()
        quant.check_unsigned(op)  # uint8/uint16 only where a lowering widens them
        first_new = block.last_op
        label = _label(op)
        try:
            if summed is not None:
                # fuse-conv's residual sum: the Conv here, the Add in its epilogue
                # (conv.lower_conv), the nests under the Conv's name as onnxruntime's FusedConv
                cv, k = summed
                label = _label(cv)
                conv_ins = [values[v] for v in cv.operands]
                while conv_ins and conv_ins[-1] is None:
                    conv_ins.pop()
                outs = conv.lower_conv(b, cv, conv_ins, sum_with=(op, k, ins[1 - k]))
            else:
                outs = LOWERINGS[kind](b, op, ins, module, opset)
        except NotImplementedError as e:
            raise UnsupportedOpError(f"node {_label(op)!r}: op {kind!r}: {e}") from None
        _tag_nests(block, first_new, label)
        region_guards.lowered(op, ins, block, first_new)
        for k, res in enumerate(op.results[len(outs):], start=len(outs)):
            if res.uses:
                raise UnsupportedOpError(f"node {_label(op)!r}: output {k} of {kind} is not "
                                         "supported (only the first "
                                         f"{len(outs)} output(s) are computed)")
        # Only the outputs the lowering computed; the check above refuses uses of the others.
        for res, m in zip(op.results, outs, strict=False):
            values[res] = m
    region_guards.apply()
    n_in = len(in_types)
    taken = set()
    for k, v in enumerate(ret.operands):
        m, out_arg = values[v], block.args[n_in + k]
        if isinstance(m.owner, krnl.AllocOp) and m not in taken:
            taken.add(m)
            m.replace_all_uses_with(out_arg)
            block.erase_op(m.owner)
        else:
            with b.nest(shape(out_arg)) as ivs:
                b.store(b.load(m, ivs), out_arg, ivs)
    block.add_op(func.ReturnOp())
    # The source function's name is kept (FileCheck cases are told apart by it); codegen
    # always emits the entry point as `main_graph`.
    f = func.FuncOp(src.sym_name.data, (in_types + out_types, []), Region(block))
    for key in ("input_names", "output_names"):
        if key in src.attributes:
            f.attributes[key] = src.attributes[key]
    f.attributes["num_inputs"] = onnx_d.to_mlir_attr(n_in)
    new.body.block.add_op(f)
    return new


def check_lanes(lanes) -> int:
    """`lanes` if it is a power of two from 1 to 64 (f32 lanes of a vector), else ValueError."""
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1 or lanes > 64 or (
            lanes & (lanes - 1)):
        raise ValueError(f"lower-to-krnl: lanes={lanes!r} is not a power of two from 1 to 64 "
                         "(the target's f32 lanes: 16 on AVX-512, 8 on AVX2, 4 on the emulated "
                         "targets, 1 on the GPU)")
    return lanes


@dataclass(frozen=True)
class LowerToKrnlPass(ModulePass):
    """`lower-to-krnl{conv_algorithm=classic lanes=16 taps=true}`: ONNX IR -> Kernel IR,
    replacing the module's body in place (the resource table and compile budget belong to the
    module object, so they carry over). The options are the lowering's compile choices: the
    Conv algorithm (lowering/conv_algorithm.py), the target's f32 lanes (matmul.strip_width)
    and whether Convs may take the tap schedule (conv_taps.py; off for the LoopNest
    generator); a compile sets them from its options, code generator and target."""

    name = "lower-to-krnl"

    conv_algorithm: str = DEFAULT_CONV_ALGORITHM
    lanes: int = 16
    taps: bool = True

    def apply(self, ctx, op) -> None:
        new = lower_to_krnl(op, self.conv_algorithm, self.lanes, self.taps)
        op.body.detach_block(0)  # the old function goes; the new one takes its place
        op.body.add_block(new.body.detach_block(0))


__all__ = ["lower_to_krnl", "SUPPORTED", "LOWERINGS"]
