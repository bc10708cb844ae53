"""Lowering of the recurrent ops LSTM, GRU and RNN (ONNX spec, opsets 7 to 22) to Kernel IR.

Per direction, the input projection of every time step is one product before the time loop:
xw[row, :] = X[row, :] @ W^T + bias, over all seq x batch rows at once (X read in place, in
either layout), so only the recurrent product H_{t-1} @ R^T stays inside the loop. Both are
`krnl.matmul` nests (matmul.emit_matmul), which the -O3 schedule tiles into the vectorised
micro-kernel; W and R are first copied transposed, since the kernel reads rows of B.

The time loop is one krnl.iterate over the steps, holding per step: a nest copying the step's
rows of xw into the gate buffer, the recurrent product accumulated onto it, and one elementwise
nest that applies the activations and updates the state buffers in place (each element of the
new state reads only the same element of the old one). GRU splits its product: the z and r
gates first, then the h gate from r * H_{t-1} (linear_before_reset=0) or with r applied after
the product (linear_before_reset=1), as the spec's equations have it.

sequence_lens is honoured at run time: at step s a batch entry of length L is valid when s < L;
forward it reads time s, reverse time L-1-s. A valid step stores its state and its Y row; an
invalid one keeps the state (so Y_h/Y_c are the state at the last valid step) and writes zeros
to Y at time s, which is then exactly one of the padded times L..seq-1 in either direction.
A length outside [0, seq] is reported at run time (krnl.check), as onnxruntime refuses it.

Activations are the spec's list (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu,
ScaledTanh, HardSigmoid, Elu, Softsign, Softplus, names in any case); activation_alpha and
activation_beta are consumed in order by the functions that take them, as onnxruntime reads
the spec. Where the spec's default and onnxruntime's differ (ThresholdedRelu's alpha, Affine's
and ScaledTanh's, which no current ONNX op defines), the value must be given; a model that
leaves it out is refused rather than answered one way or the other. `clip` bounds the gates'
pre-activations; LSTM's h(C_t) takes the cell state unclipped, as in onnxruntime (whose
reading of the spec is the reference here; the ONNX reference implementation ignores clip).
A batch entry of length 0 has no last step: its Y_h and Y_c are zeros, as in onnxruntime.
"""

from __future__ import annotations

from xdsl.dialects.builtin import NoneType, i64

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.frontend import ModelError, UnsupportedOpError
from compilerkit.lowering.builder import INDEX, KernelBuilder, is_float, shape
from compilerkit.lowering.elementwise import _sigmoid, _softplus
from compilerkit.lowering.matmul import emit_matmul, fill
from compilerkit.onnx_passes.single_node import node_label

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTIVATIONS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"),
                       "RNN": ("Tanh",)}
# (takes alpha, takes beta) per activation, and the defaults both the spec (the ONNX op of
# that name) and onnxruntime use; None: must be given.
TAKES = {"relu": (0, 0), "tanh": (0, 0), "sigmoid": (0, 0), "softsign": (0, 0),
         "softplus": (0, 0), "affine": (1, 1), "leakyrelu": (1, 0), "thresholdedrelu": (1, 0),
         "scaledtanh": (1, 1), "hardsigmoid": (1, 1), "elu": (1, 0)}
DEFAULTS = {"leakyrelu": (0.01, None), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None)}
DIRECTIONS = ("forward", "reverse", "bidirectional")


def _fail(op, what, value, expected):
    raise ModelError(f"node {node_label(op)!r} ({onnx_d.op_type(op)}): {what} is {value}; "
                     f"expected {expected}")


def activations(op, kind: str, nd: int):
    """Per direction, the activation list [(lowercase name, alpha, beta)]."""
    n = len(DEFAULT_ACTIVATIONS[kind])
    names = onnx_d.get_attr(op, "activations", None)
    if names is None:
        names = list(DEFAULT_ACTIVATIONS[kind]) * nd
    names = [x.decode() if isinstance(x, bytes) else str(x) for x in names]
    if len(names) != n * nd:
        _fail(op, "the number of activations", len(names),
              f"{n * nd} ({n} per direction, {nd} direction(s))")
    alphas = list(onnx_d.get_attr(op, "activation_alpha", None) or [])
    betas = list(onnx_d.get_attr(op, "activation_beta", None) or [])
    out = []
    for name in names:
        key = name.lower()
        if key not in TAKES:
            raise UnsupportedOpError(
                f"node {node_label(op)!r} ({kind}): activation {name!r} is not one of the "
                f"spec's: {', '.join(sorted(TAKES))}")
        takes_a, takes_b = TAKES[key]
        da, db = DEFAULTS.get(key, (None, None))
        a = alphas.pop(0) if takes_a and alphas else da
        bt = betas.pop(0) if takes_b and betas else db
        for attr, takes, v in (("activation_alpha", takes_a, a), ("activation_beta", takes_b,
                                                                   bt)):
            if takes and v is None:
                raise UnsupportedOpError(
                    f"node {node_label(op)!r} ({kind}): activation {name!r} without a value in "
                    f"{attr}: its default differs between the ONNX spec and onnxruntime, so "
                    f"give it explicitly")
        out.append((key, a, bt))
    return [out[d * n:(d + 1) * n] for d in range(nd)]


def apply_activation(b: KernelBuilder, x, act, clip):
    """act = (name, alpha, beta) applied to x, clipped to [-clip, clip] first when clip."""
    t = x.type
    if clip is not None:
        x = b.binary("min", b.binary("max", x, b.const(-clip, t)), b.const(clip, t))
    name, alpha, beta = act
    zero = b.const(0.0, t)
    if name == "relu":
        return b.binary("max", x, zero)
    if name == "tanh":
        return b.unary("tanh", x)
    if name == "sigmoid":
        return _sigmoid(b, x, None)
    if name == "softsign":
        return b.binary("div", x, b.add_(b.const(1.0, t), b.unary("abs", x)))
    if name == "softplus":
        return _softplus(b, x, None)
    a = b.const(alpha, t)
    if name == "affine":
        return b.add_(b.mul(a, x), b.const(beta, t))
    if name == "leakyrelu":
        return b.select(b.cmpf("olt", x, zero), b.mul(a, x), x)
    if name == "thresholdedrelu":
        return b.select(b.cmpf("ogt", x, a), x, zero)
    if name == "scaledtanh":
        return b.mul(a, b.unary("tanh", b.mul(b.const(beta, t), x)))
    if name == "hardsigmoid":
        y = b.add_(b.mul(a, x), b.const(beta, t))
        return b.binary("min", b.binary("max", y, zero), b.const(1.0, t))
    if name == "elu":
        e = b.mul(a, b.binary("sub", b.unary("exp", x), b.const(1.0, t)))
        return b.select(b.cmpf("olt", x, zero), e, x)
    raise NotImplementedError(f"activation {name!r}")


class _Shapes:
    """The op's sizes, checked against every given input's shape."""

    def __init__(self, op, kind, ins):
        x, w, r = ins[:3]
        self.layout = onnx_d.get_attr(op, "layout", 0)
        if self.layout not in (0, 1):
            _fail(op, "attribute layout", self.layout, "0 or 1")
        direction = onnx_d.get_attr(op, "direction", "forward")
        direction = direction.decode() if isinstance(direction, bytes) else direction
        if direction not in DIRECTIONS:
            _fail(op, "attribute direction", repr(direction), " or ".join(DIRECTIONS))
        self.direction = direction
        self.nd = 2 if direction == "bidirectional" else 1
        xs = shape(x)
        if len(xs) != 3:
            _fail(op, "the shape of X", list(xs), "3 dims")
        self.seq, self.batch = (xs[0], xs[1]) if self.layout == 0 else (xs[1], xs[0])
        self.inp = xs[2]
        self.hidden = onnx_d.get_attr(op, "hidden_size", None)
        if self.hidden is None:
            self.hidden = shape(r)[-1]
        g = GATES[kind] * self.hidden
        nd, h = self.nd, self.hidden
        state = [nd, self.batch, h] if self.layout == 0 else [self.batch, nd, h]
        want = [("W", w, [nd, g, self.inp]), ("R", r, [nd, g, h])]
        for name, k, dims in (("B", 3, [nd, 2 * g]), ("sequence_lens", 4, [self.batch]),
                              ("initial_h", 5, state), ("initial_c", 6, state),
                              ("P", 7, [nd, 3 * h])):
            if k < len(ins) and ins[k] is not None:
                want.append((name, ins[k], dims))
        for name, v, dims in want:
            if list(shape(v)) != dims:
                _fail(op, f"the shape of {name}", list(shape(v)), dims)
        self.state = state


def _transposed(b, m, d, rows, cols, elem):
    """m[d] ([rows, cols]) copied as [cols, rows]: the kernel reads rows of B."""
    out = b.alloc([cols, rows], elem)
    with b.nest([cols, rows]) as (k, j):
        b.store(b.load(m, [b.index(d), j, k]), out, [k, j])
    return out


def _state_at(sz, d, bb, j):
    """Index of (direction d, batch bb, unit j) in a state tensor of the op's layout."""
    return [d, bb, j] if sz.layout == 0 else [bb, d, j]


def lower_recurrent(b: KernelBuilder, op, ins):
    kind = onnx_d.op_type(op)
    ins = list(ins) + [None] * (8 - len(ins))
    x = ins[0]
    elem = x.type.element_type
    if not is_float(elem) or elem.bitwidth < 32:
        raise NotImplementedError(f"{kind} on {elem} (f32 and f64 are supported)")
    sz = _Shapes(op, kind, ins)
    acts = activations(op, kind, sz.nd)
    clip = onnx_d.get_attr(op, "clip", None)
    if clip is not None and not clip > 0:
        _fail(op, "attribute clip", clip, "a positive threshold")
    lbr = onnx_d.get_attr(op, "linear_before_reset", 0) if kind == "GRU" else 0
    forget = onnx_d.get_attr(op, "input_forget", 0) if kind == "LSTM" else 0
    seq_lens, init_h = ins[4], ins[5]
    init_c = ins[6] if kind == "LSTM" else None
    nd, batch, hid, seq = sz.nd, sz.batch, sz.hidden, sz.seq

    if seq_lens is not None:
        _check_lengths(b, op, seq_lens, seq)
    # State buffers [nd, batch, hidden] (the spec's layout 0) updated in place step by step.
    hs = _initial_state(b, init_h, sz, elem)
    cs = _initial_state(b, init_c, sz, elem) if kind == "LSTM" else None
    y_res = op.results[0]
    want_y = not isinstance(y_res.type, NoneType) and bool(y_res.uses)
    y = b.alloc(onnx_d.shape_of(y_res), elem) if want_y else None
    for d in range(nd):
        reverse = sz.direction == "reverse" or d == 1
        _direction(b, op, kind, ins, sz, d, reverse, acts[d], clip, lbr, forget, hs, cs, y,
                   seq_lens)
    states = (hs, cs)[:2 if kind == "LSTM" else 1]
    if seq_lens is not None:
        _zero_empty(b, seq_lens, states)
    outs = [y]
    for st in states:
        if sz.layout == 0:
            outs.append(st)
            continue
        out = b.alloc(sz.state, elem)
        with b.nest([batch, nd, hid]) as (bb, dd, j):
            b.store(b.load(st, [dd, bb, j]), out, [bb, dd, j])
        outs.append(out)
    if y is None:
        # No Y: a placeholder never read (lower_to_krnl maps results to buffers by position).
        outs[0] = outs[1]
    return outs


def _check_lengths(b, op, seq_lens, seq):
    with b.nest([shape(seq_lens)[0]]) as (bb,):
        n = b.cast(b.load(seq_lens, [bb]), i64)
        ok = b.and_(b.cmpi("sge", n, b.const(0, i64)), b.cmpi("sle", n, b.const(seq, i64)))
        b.add(krnl.CheckOp(ok, f"node {node_label(op)!r} ({onnx_d.op_type(op)}): a value of "
                               f"input sequence_lens is out of range; valid lengths are [0, "
                               f"{seq}]"))


def _zero_empty(b, seq_lens, states):
    """Zeros as the final state of a batch entry of length 0 (onnxruntime's answer)."""
    nd, batch, hid = shape(states[0])
    with b.nest([nd, batch, hid]) as (d, bb, j):
        empty = b.cmpi("eq", b.cast(b.load(seq_lens, [bb]), i64), b.const(0, i64))
        for st in states:
            v = b.load(st, [d, bb, j])
            b.store(b.select(empty, b.const(0.0, v.type), v), st, [d, bb, j])


def _initial_state(b, init, sz, elem):
    st = b.alloc([sz.nd, sz.batch, sz.hidden], elem)
    if init is None:
        fill(b, st, 0.0)
        return st
    with b.nest([sz.nd, sz.batch, sz.hidden]) as (d, bb, j):
        b.store(b.load(init, _state_at(sz, d, bb, j)), st, [d, bb, j])
    return st


def _direction(b, op, kind, ins, sz, d, reverse, acts, clip, lbr, forget, hs, cs, y, seq_lens):
    x, w, r, bias = ins[:4]
    peep = ins[7] if kind == "LSTM" else None
    elem = x.type.element_type
    batch, hid, seq, inp = sz.batch, sz.hidden, sz.seq, sz.inp
    g = GATES[kind] * hid
    rows = seq * batch
    wt = _transposed(b, w, d, g, inp, elem)
    rt = _transposed(b, r, d, g, hid, elem)
    # xw[row] = X[row] @ W^T + Wb + Rb (GRU with linear_before_reset: Rb of the h gate is
    # added inside r * (...) instead), for every row of X in X's own order.
    xw = b.alloc([rows, g], elem)
    with b.nest([rows, g]) as (row, j):
        v = b.const(0.0, elem)
        if bias is not None:
            dref = b.index(d)
            v = b.load(bias, [dref, j])
            rb = b.load(bias, [dref, b.affine([(j, 1)], g)])
            if lbr:
                rb = b.select(b.cmpi("slt", j, b.index(2 * hid)), rb, b.const(0.0, elem))
            v = b.add_(v, rb)
        b.store(v, xw, [row, j])
    zero = b.index(0)
    emit_matmul(b, x, wt, xw, rows, g, inp, [zero, zero, zero], (inp, 1), g, g)
    gates = b.alloc([batch, g], elem)
    extra = b.alloc([batch, hid], elem) if kind == "GRU" else None
    h_off = b.index(d * batch * hid)

    def timing(s, bb):
        """(time read and written at step s for batch entry bb, whether the step is valid)."""
        if seq_lens is None:
            t = b.affine([(s, -1)], seq - 1) if reverse else s
            return t, None
        n = b.cast(b.cast(b.load(seq_lens, [bb]), i64), INDEX)
        valid = b.cmpi("slt", s, n)
        if not reverse:
            return s, valid
        back = b.affine([(n, 1), (s, -1)], -1)  # L - 1 - s
        return b.select(valid, back, s), valid

    def row_of(t, bb):
        return b.affine([(t, batch), (bb, 1)]) if sz.layout == 0 else b.affine(
            [(bb, seq), (t, 1)])

    with b.nest([seq]) as (s,):
        with b.nest([batch, g]) as (bb, j):
            t, _ = timing(s, bb)
            b.store(b.load(xw, [row_of(t, bb), j]), gates, [bb, j])
        n1 = 2 * hid if kind == "GRU" else g
        emit_matmul(b, hs, rt, gates, batch, n1, hid, [h_off, zero, zero], (hid, 1), g, g)
        if kind == "GRU":
            _gru_hidden_product(b, sz, d, acts, clip, lbr, bias, hs, rt, gates, extra, h_off)
        with b.nest([batch, hid]) as (bb, j):
            t, valid = timing(s, bb)
            dref = b.index(d)
            prev = b.load(hs, [dref, bb, j])
            if kind == "LSTM":
                c_prev = b.load(cs, [dref, bb, j])
                hn, cn = _lstm_cell(b, gates, bb, j, hid, acts, clip, forget, peep, d, c_prev)
                if valid is not None:
                    cn = b.select(valid, cn, c_prev)
                b.store(cn, cs, [dref, bb, j])
            elif kind == "GRU":
                hn = _gru_cell(b, gates, extra, bb, j, hid, acts, clip, lbr, prev)
            else:
                hn = apply_activation(b, b.load(gates, [bb, j]), acts[0], clip)
            if y is not None:
                out = hn if valid is None else b.select(valid, hn, b.const(0.0, elem))
                at = [t, dref, bb, j] if sz.layout == 0 else [bb, t, dref, j]
                b.store(out, y, at)
            if valid is not None:
                hn = b.select(valid, hn, prev)
            b.store(hn, hs, [dref, bb, j])


def _gru_hidden_product(b, sz, d, acts, clip, lbr, bias, hs, rt, gates, extra, h_off):
    """The h gate's recurrent term: (r * H_{t-1}) @ Rh^T added into the gates
    (linear_before_reset=0), or H_{t-1} @ Rh^T + Rbh into `extra` (=1)."""
    batch, hid = sz.batch, sz.hidden
    elem = gates.type.element_type
    g = 3 * hid
    two = b.index(2 * hid)
    if lbr:
        with b.nest([batch, hid]) as (bb, j):
            v = b.const(0.0, elem)
            if bias is not None:
                v = b.load(bias, [b.index(d), b.affine([(j, 1)], g + 2 * hid)])
            b.store(v, extra, [bb, j])
        emit_matmul(b, hs, rt, extra, batch, hid, hid, [h_off, two, b.index(0)], (hid, 1), g,
                    hid)
        return
    with b.nest([batch, hid]) as (bb, j):
        rg = apply_activation(b, b.load(gates, [bb, b.affine([(j, 1)], hid)]), acts[0], clip)
        b.store(b.mul(rg, b.load(hs, [b.index(d), bb, j])), extra, [bb, j])
    emit_matmul(b, extra, rt, gates, batch, hid, hid, [b.index(0), two, two], (hid, 1), g, g)


def _gru_cell(b, gates, extra, bb, j, hid, acts, clip, lbr, prev):
    f, gact = acts
    z = apply_activation(b, b.load(gates, [bb, j]), f, clip)
    pre = b.load(gates, [bb, b.affine([(j, 1)], 2 * hid)])
    if lbr:
        r = apply_activation(b, b.load(gates, [bb, b.affine([(j, 1)], hid)]), f, clip)
        pre = b.add_(pre, b.mul(r, b.load(extra, [bb, j])))
    cand = apply_activation(b, pre, gact, clip)
    one = b.const(1.0, prev.type)
    return b.add_(b.mul(b.binary("sub", one, z), cand), b.mul(z, prev))


def _lstm_cell(b, gates, bb, j, hid, acts, clip, forget, peep, d, c_prev):
    """(H_t, C_t) of one element; gates in the spec's order i, o, f, c; P's order i, o, f."""
    f, gact, hact = acts

    def gate(k):
        return b.load(gates, [bb, b.affine([(j, 1)], k * hid)])

    def peephole(k, c):
        if peep is None:
            return None
        return b.mul(b.load(peep, [b.index(d), b.affine([(j, 1)], k * hid)]), c)

    def pre(k, c):
        v = gate(k)
        p = peephole(k, c)
        return v if p is None else b.add_(v, p)

    i = apply_activation(b, pre(0, c_prev), f, clip)
    if forget:
        fg = b.binary("sub", b.const(1.0, i.type), i)
    else:
        fg = apply_activation(b, pre(2, c_prev), f, clip)
    cand = apply_activation(b, gate(3), gact, clip)
    c = b.add_(b.mul(fg, c_prev), b.mul(i, cand))
    o = apply_activation(b, pre(1, c), f, clip)
    return b.mul(o, apply_activation(b, c, hact, None)), c
