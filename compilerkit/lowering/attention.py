"""Lowering of the transformer ops to Kernel IR: Einsum, Attention (opset 23), RotaryEmbedding,
Swish and SwiGLU.

Einsum is one accumulation nest over every index letter of the equation (output letters, then
the summed ones): out[output letters] += product of the inputs at their letters. That covers
transposes, sums, inner and outer products and batched matrix products in one rule; an
ellipsis or a letter repeated within one operand (a diagonal) is refused.

Attention follows ONNX's reference (onnx/reference/ops/op_attention.py) step by step, as its
node tests do: Q and K are each multiplied by sqrt(scale) (scale defaults to 1/sqrt(head
size)), the scores softcapped (tanh(s / c) * c) when softcap > 0, then the additive bias is
added: the mask (a bool mask gives 0 where true, -inf where false; a float mask is added; a
mask shorter than the key sequence counts as -inf past its end) and, with is_causal, -inf where
key j > query i + past length, and (opset 25) -inf outside the sliding window
(left_window_size keys before the query's position i + past length, right_window_size after; -1
unbounded). Softmax subtracts the row's maximum (0 where the maximum is
-inf) and divides by the sum (1 where it is 0); a row whose bias is -inf everywhere is all
zeros. Grouped-query heads: query head h reads key/value head h // (q_heads / kv_heads), as
numpy.repeat's interleaving does. 3-D inputs are viewed as [batch, seq, heads, head size]
(q_num_heads / kv_num_heads). past_key / past_value are concatenated in front of K and V
(present_key / present_value). nonpad_kv_seqlen and the qk_matmul_output output are refused,
as is a softmax_precision other than the input's type.

RotaryEmbedding rotates pairs (x1, x2) of each head's first rotary_embedding_dim elements:
(cos * x1 - sin * x2, sin * x1 + cos * x2), pairs being (k, k + d/2) or, interleaved,
(2k, 2k + 1); cos and sin come from the caches at position_ids (checked at run time, as
Gather's indices) or, without them, at [batch, position].
"""

from __future__ import annotations

import math

import numpy as np
from onnx.helper import tensor_dtype_to_np_dtype
from xdsl.dialects.builtin import i1

from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import KernelBuilder, broadcast_index, is_float, shape
from compilerkit.lowering.elementwise import _map, _sigmoid
from compilerkit.lowering.indexing import _check, _safe, fail
from compilerkit.lowering.matmul import fill


def _refuse(op, what: str):
    # lower_to_krnl names the node and op in front of a NotImplementedError's message.
    raise NotImplementedError(f"{what} is not supported")


# ---- Swish, SwiGLU -------------------------------------------------------------------------

def _swish(b: KernelBuilder, x, alpha: float):
    return b.mul(x, _sigmoid(b, b.mul(b.const(alpha, x.type), x), None))


def _float_only(op, elem):
    if not is_float(elem):
        raise NotImplementedError(f"{onnx_d.op_type(op)} on {elem} (float inputs only)")


def lower_swish(b: KernelBuilder, op, ins):
    """Swish: x * sigmoid(alpha * x); SwiGLU: Swish(A) * B (same shapes, no broadcasting)."""
    alpha = float(onnx_d.get_attr(op, "alpha", 1.0))
    elem = op.results[0].type.element_type
    _float_only(op, elem)
    out = b.alloc(onnx_d.shape_of(op.results[0]), elem)
    if onnx_d.op_type(op) == "Swish":
        _map(b, ins[:1], out, lambda v: _swish(b, v[0], alpha))
    else:
        if shape(ins[0]) != shape(ins[1]):
            fail(op, "the shapes of A and B", [list(shape(ins[0])), list(shape(ins[1]))],
                 "equal shapes (SwiGLU does not broadcast)")
        _map(b, ins[:2], out, lambda v: b.mul(_swish(b, v[0], alpha), v[1]))
    return [out]


# ---- Einsum --------------------------------------------------------------------------------

def parse_einsum(op, equation: str, ranks):
    """(input letter strings, output letter string) of an Einsum equation without ellipsis;
    the implicit output (no '->') is the letters used once, in alphabetical order."""
    eq = equation.replace(" ", "")
    if "." in eq:
        _refuse(op, f"Einsum equation {equation!r}: an ellipsis ('...')")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        fail(op, "the equation's operand count", len(terms), f"{len(ranks)} (the inputs)")
    for t, r in zip(terms, ranks, strict=True):
        if not t.isalpha() and t:
            fail(op, "attribute equation", repr(equation), "letters, ',' and '->'")
        if len(t) != r:
            fail(op, f"the equation's term {t!r}", f"{len(t)} letters",
                 f"the rank of its input, {r}")
        if len(set(t)) != len(t):
            _refuse(op, f"Einsum equation {equation!r}: a letter repeated within one operand "
                        f"({t!r}, a diagonal)")
    letters = "".join(terms)
    if not arrow:
        rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if (rhs and not rhs.isalpha()) or len(set(rhs)) != len(rhs):
        fail(op, "the equation's output", repr(rhs), "distinct letters")
    for c in rhs:
        if c not in letters:
            fail(op, f"output letter {c!r}", "not in any input", "a letter of the inputs")
    return terms, rhs


def lower_einsum(b: KernelBuilder, op, ins):
    equation = onnx_d.get_attr(op, "equation")
    if isinstance(equation, bytes):
        equation = equation.decode()
    terms, rhs = parse_einsum(op, str(equation), [len(shape(m)) for m in ins])
    size = {}
    for t, m in zip(terms, ins, strict=True):
        for c, d in zip(t, shape(m), strict=True):
            if size.setdefault(c, d) != d:
                fail(op, f"the size of index {c!r}", f"{d} and {size[c]}", "one size per letter")
    summed = [c for c in dict.fromkeys("".join(terms)) if c not in rhs]
    order = list(rhs) + summed
    elem = op.results[0].type.element_type
    out = b.alloc([size[c] for c in rhs], elem)
    fill(b, out, 0.0 if is_float(elem) else 0)
    if not order:  # scalars only: "->" or ",->"
        prod = None
        for m in ins:
            v = b.load(m, [])
            prod = v if prod is None else b.mul(prod, v)
        b.store(prod, out, [])
        return [out]
    with b.nest([size[c] for c in order]) as ivs:
        at = dict(zip(order, ivs, strict=True))
        prod = None
        for t, m in zip(terms, ins, strict=True):
            v = b.load(m, [at[c] for c in t])
            prod = v if prod is None else b.mul(prod, v)
        dst = [at[c] for c in rhs]
        b.store(b.add_(b.load(out, dst), prod), out, dst)
    return [out]


# ---- RotaryEmbedding -----------------------------------------------------------------------

def lower_rotary_embedding(b: KernelBuilder, op, ins):
    x, cos, sin = ins[:3]
    pos = ins[3] if len(ins) > 3 else None
    xs = shape(x)
    elem = x.type.element_type
    _float_only(op, elem)
    if len(xs) == 4:
        batch, heads, seq, head = xs
        xv = x
        at = lambda bb, s, h, d: [bb, h, s, d]  # noqa: E731 - [B, H, S, D] layout
    elif len(xs) == 3:
        heads = onnx_d.get_attr(op, "num_heads", 0)
        if not heads or xs[2] % heads:
            fail(op, "attribute num_heads", heads, f"a divisor of the hidden size {xs[2]} "
                 "(required for 3-D input)")
        batch, seq, head = xs[0], xs[1], xs[2] // heads
        xv = b.view(x, [batch, seq, heads, head])
        at = lambda bb, s, h, d: [bb, s, h, d]  # noqa: E731 - [B, S, H, D] layout
    else:
        fail(op, "the rank of X", len(xs), "3 or 4")
    rd = onnx_d.get_attr(op, "rotary_embedding_dim", 0) or head
    if rd % 2 or rd > head:
        fail(op, "attribute rotary_embedding_dim", rd, f"an even number up to the head size "
             f"{head}")
    half = rd // 2
    interleaved = onnx_d.get_attr(op, "interleaved", 0)
    cs = shape(cos)
    if shape(sin) != cs:
        fail(op, "the shape of sin_cache", list(shape(sin)), f"that of cos_cache, {list(cs)}")
    want = [cs[0], half] if pos is not None else [batch, seq, half]
    if list(cs) != want:
        fail(op, "the shape of cos_cache", list(cs), str(want))
    if pos is not None and shape(pos) != (batch, seq):
        fail(op, "the shape of position_ids", list(shape(pos)), str([batch, seq]))
    out = b.alloc(xs, elem)
    ov = b.view(out, shape(xv))
    if pos is not None:  # every position id checked first, so the rotation reads in bounds
        with b.nest([batch, seq]) as (bb, s):
            _check(b, op, b.load(pos, [bb, s]), cs[0], "in position_ids")
    with b.nest([batch, seq, heads, half]) as (bb, s, h, k):
        if pos is not None:
            p = _safe(b, b.load(pos, [bb, s]), cs[0])
            c, sn = b.load(cos, [p, k]), b.load(sin, [p, k])
        else:
            c, sn = b.load(cos, [bb, s, k]), b.load(sin, [bb, s, k])
        if interleaved:
            i1_, i2_ = b.affine([(k, 2)]), b.affine([(k, 2)], 1)
        else:
            i1_, i2_ = k, b.affine([(k, 1)], half)
        x1, x2 = b.load(xv, at(bb, s, h, i1_)), b.load(xv, at(bb, s, h, i2_))
        real = b.binary("sub", b.mul(c, x1), b.mul(sn, x2))
        imag = b.add_(b.mul(sn, x1), b.mul(c, x2))
        b.store(real, ov, at(bb, s, h, i1_))
        b.store(imag, ov, at(bb, s, h, i2_))
    if rd < head:
        with b.nest([batch, seq, heads, (rd, head)]) as (bb, s, h, d):
            b.store(b.load(xv, at(bb, s, h, d)), ov, at(bb, s, h, d))
    return [out]


# ---- Attention -----------------------------------------------------------------------------

def _heads_view(b, op, m, heads_attr, what):
    """A 3-D [B, S, heads * D] input as a 4-D [B, heads, S, D] buffer (a copy), else m."""
    dims = shape(m)
    if len(dims) == 4:
        return m
    heads = onnx_d.get_attr(op, heads_attr, 0)
    if not heads or dims[2] % heads:
        fail(op, f"attribute {heads_attr}", heads,
             f"a divisor of {what}'s hidden size {dims[2]} (required for 3-D inputs)")
    bsz, seq, d = dims[0], dims[1], dims[2] // heads
    src = b.view(m, [bsz, seq, heads, d])
    out = b.alloc([bsz, heads, seq, d], m.type.element_type)
    with b.nest([bsz, heads, seq, d]) as (n, h, s, k):
        b.store(b.load(src, [n, s, h, k]), out, [n, h, s, k])
    return out


def _present(b, past, cur):
    """past concatenated in front of cur along the sequence axis (2), or cur without past."""
    if past is None:
        return cur
    p, c = shape(past), shape(cur)
    out = b.alloc([c[0], c[1], p[2] + c[2], c[3]], cur.type.element_type)
    with b.nest(p) as ivs:
        b.store(b.load(past, ivs), out, ivs)
    with b.nest(c) as (n, h, s, k):
        b.store(b.load(cur, [n, h, s, k]), out, [n, h, b.affine([(s, 1)], p[2]), k])
    return out


def _mask_bias(b: KernelBuilder, mask, ivs, kv: int, elem):
    """The additive bias of attn_mask at [batch, head, query, key] = ivs: a bool mask gives 0 /
    -inf, a float mask its value, -inf past the mask's last key (ONNX pads it so)."""
    md = shape(mask)
    idx = broadcast_index(b, ivs[:-1], md[:-1]) + [ivs[-1]]
    inside = None
    if md[-1] < kv:
        inside = b.cmpi("slt", ivs[-1], b.index(md[-1]))
        idx[-1] = b.clamp(ivs[-1], md[-1])
    v = b.load(mask, idx)
    ninf = b.const(-math.inf, elem)
    if mask.type.element_type == i1:
        v = b.select(v, b.const(0.0, elem), ninf)
    return v if inside is None else b.select(inside, v, ninf)


def lower_attention(b: KernelBuilder, op, ins):
    q_in, k_in, v_in = ins[:3]
    rest = list(ins[3:]) + [None] * (4 - len(ins[3:]))
    mask, past_k, past_v, nonpad = rest[:4]
    if nonpad is not None:
        _refuse(op, "Attention input 6 (nonpad_kv_seqlen)")
    if (past_k is None) != (past_v is None):
        fail(op, "past_key / past_value", "only one given", "both or neither")
    elem = q_in.type.element_type
    _float_only(op, elem)
    prec = onnx_d.get_attr(op, "softmax_precision", None)
    if prec is not None and onnx_d.numpy_dtype(elem) != tensor_dtype_to_np_dtype(prec):
        _refuse(op, f"Attention attribute softmax_precision={prec} (a type other than the "
                    "input's)")
    ranks = {len(shape(m)) for m in (q_in, k_in, v_in)}
    if ranks not in ({3}, {4}):
        fail(op, "the ranks of Q, K, V", sorted(ranks), "all 3 or all 4")
    q = _heads_view(b, op, q_in, "q_num_heads", "Q")
    k = _present(b, past_k, _heads_view(b, op, k_in, "kv_num_heads", "K"))
    v = _present(b, past_v, _heads_view(b, op, v_in, "kv_num_heads", "V"))
    bsz, hq, sq, dq = shape(q)
    _, hk, skv, dk = shape(k)
    _, hv, skv_v, dv = shape(v)
    if dk != dq or skv_v != skv or hv != hk or hq % hk:
        fail(op, "the [batch, heads, sequence, head size] of Q, K, V",
             [list(shape(q)), list(shape(k)), list(shape(v))],
             "equal head sizes of Q and K, equal K and V sequences and heads, and query "
             "heads a multiple of key/value heads")
    reps = hq // hk
    if mask is not None and shape(mask)[-1] > skv:
        fail(op, "attn_mask's last dimension", shape(mask)[-1],
             f"at most the key sequence length {skv}")
    scale = onnx_d.get_attr(op, "scale", None)
    scale = 1 / np.sqrt(dq) if scale is None else float(scale)
    root = float(np.sqrt(scale).astype(onnx_d.numpy_dtype(elem)))
    softcap = float(onnx_d.get_attr(op, "softcap", 0.0))
    causal = onnx_d.get_attr(op, "is_causal", 0)
    offset = shape(past_k)[2] if past_k is not None else 0
    window = [onnx_d.get_attr(op, a, -1) for a in ("left_window_size", "right_window_size")]
    for a, w in zip(("left_window_size", "right_window_size"), window, strict=True):
        if w < -1:
            fail(op, f"attribute {a}", w, "-1 (unbounded) or a size >= 0")
    ninf = -math.inf

    scores = b.alloc([bsz, hq, sq, skv], elem)
    fill(b, scores, 0.0)
    # Query head h = g * reps + r reads key/value head g: affine indices, no division.
    with b.nest([bsz, hk, reps, sq, skv, dq]) as (n, g, r, i, j, d):
        h = b.affine([(g, reps), (r, 1)])
        qs = b.mul(b.load(q, [n, h, i, d]), b.const(root, elem))
        ks = b.mul(b.load(k, [n, g, j, d]), b.const(root, elem))
        b.store(b.add_(b.load(scores, [n, h, i, j]), b.mul(qs, ks)), scores, [n, h, i, j])
    row_max = b.alloc([bsz, hq, sq], elem)
    bias_max = b.alloc([bsz, hq, sq], elem)
    fill(b, row_max, ninf)
    fill(b, bias_max, ninf)
    with b.nest([bsz, hq, sq, skv]) as ivs:
        n, h, i, j = ivs
        s = b.load(scores, ivs)
        if softcap > 0:
            c = b.const(softcap, elem)
            s = b.mul(b.unary("tanh", b.binary("div", s, c)), c)
        bias = _mask_bias(b, mask, ivs, skv, elem) if mask is not None else b.const(0.0, elem)
        if causal:
            allowed = b.cmpi("sle", j, b.affine([(i, 1)], offset))
            bias = b.add_(bias, b.select(allowed, b.const(0.0, elem), b.const(ninf, elem)))
        for side, w in enumerate(window):  # query i sits at position i + offset
            if w >= 0:
                lo, hi = (i, j) if side == 0 else (j, i)  # (i + offset) - j, or its negation
                sign = 1 if side == 0 else -1
                diff = b.affine([(lo, 1), (hi, -1)], sign * offset)
                allowed = b.cmpi("sle", diff, b.index(w))
                bias = b.add_(bias, b.select(allowed, b.const(0.0, elem), b.const(ninf, elem)))
        s = b.add_(s, bias)
        b.store(s, scores, ivs)
        b.store(b.binary("max", b.load(row_max, [n, h, i]), s), row_max, [n, h, i])
        b.store(b.binary("max", b.load(bias_max, [n, h, i]), bias), bias_max, [n, h, i])
    total = b.alloc([bsz, hq, sq], elem)
    fill(b, total, 0.0)
    with b.nest([bsz, hq, sq, skv]) as ivs:
        row = ivs[:3]
        m = b.load(row_max, row)
        m = b.select(b.cmpf("oeq", m, b.const(ninf, elem)), b.const(0.0, elem), m)
        e = b.unary("exp", b.binary("sub", b.load(scores, ivs), m))
        b.store(e, scores, ivs)
        b.store(b.add_(b.load(total, row), e), total, row)
    with b.nest([bsz, hq, sq, skv]) as ivs:
        row = ivs[:3]
        t = b.load(total, row)
        t = b.select(b.cmpf("oeq", t, b.const(0.0, elem)), b.const(1.0, elem), t)
        p = b.binary("div", b.load(scores, ivs), t)
        masked = b.cmpf("oeq", b.load(bias_max, row), b.const(ninf, elem))
        b.store(b.select(masked, b.const(0.0, elem), p), scores, ivs)
    y4 = b.alloc([bsz, hq, sq, dv], elem)
    fill(b, y4, 0.0)
    with b.nest([bsz, hk, reps, sq, dv, skv]) as (n, g, r, i, d, j):
        h = b.affine([(g, reps), (r, 1)])
        pv = b.mul(b.load(scores, [n, h, i, j]), b.load(v, [n, g, j, d]))
        b.store(b.add_(b.load(y4, [n, h, i, d]), pv), y4, [n, h, i, d])
    if len(shape(q_in)) == 3:
        y = b.alloc([bsz, sq, hq * dv], elem)
        yv = b.view(y, [bsz, sq, hq, dv])
        with b.nest([bsz, sq, hq, dv]) as (n, i, h, d):
            b.store(b.load(y4, [n, h, i, d]), yv, [n, i, h, d])
    else:
        y = y4
    return [y, k, v]

