"""Lowering of the recurrent ops LSTM, GRU and RNN (ONNX spec, opsets 7 to 22) to Kernel IR.

Per direction, the input projection of every time step is one product before the time loop:
xw[row, :] = X[row, :] @ W^T + bias, over all seq x batch rows at once (X read in place, in
either layout), so only the recurrent product H_{t-1} @ R^T stays inside the loop, and it
accumulates onto the step's rows of xw in place. Both are `krnl.matmul` nests
(matmul.emit_matmul), which the -O3 schedule tiles into the vectorised micro-kernel. Constant
W and R are laid out at compile time as the kernel's B, in strips it reads unpacked
(`_Weights`); weights given at run time are copied transposed first.

The time loop is one krnl.iterate over the steps, holding per step the recurrent product and
one elementwise nest that applies the activations and updates the state buffers in place
(each element of the new state reads only the same element of the old one). GRU splits its
product: the z and r gates first, then the h gate from r * H_{t-1} (linear_before_reset=0) or
with r applied after the product (linear_before_reset=1), as the spec's equations have it.

sequence_lens is honoured at run time: at step s a batch entry of length L is valid when s < L;
forward it reads time s, reverse time L-1-s (the step's rows are then copied out of xw, one
time per entry). A valid step stores its state and its Y row; an invalid one keeps the state
(so Y_h/Y_c are the state at the last valid step) and writes zeros to Y at time s, which is
then exactly one of the padded times L..seq-1 in either direction. A length outside [0, seq]
is reported at run time (krnl.check), as onnxruntime refuses it; an entry of length 0 has no
last step, and its Y_h and Y_c are zeros, as in onnxruntime.

Activations, clip and their attributes: recurrent_activations.py.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import NoneType, i64

from compilerkit.dialects import krnl
from compilerkit.dialects import onnx as onnx_d
from compilerkit.lowering.builder import INDEX, KernelBuilder, is_float, shape
from compilerkit.lowering.matmul import (
    emit_matmul,
    emit_strip_matmul,
    fill,
    in_strips,
    strip_width,
)
from compilerkit.lowering.recurrent_activations import activations, apply_activation, fail
from compilerkit.onnx_passes.single_node import node_label

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
# A batch of one keeps R^T row-major (_Weights): 1 thread, AVX2, seq 128, hidden 128: LSTM
# 0.62x -> 1.05x onnxruntime, GRU 0.68x -> 1.23x; batch 8 was slower so (0.88x -> 0.73x: B
# read in place at a power-of-two row stride), and stays in strips.
R_STRIP_MIN_BATCH = 2
DIRECTIONS = ("forward", "reverse", "bidirectional")


class _Shapes:
    """The op's sizes, checked against every given input's shape."""

    def __init__(self, op, kind, ins):
        x, w, r = ins[:3]
        self.layout = onnx_d.get_attr(op, "layout", 0)
        if self.layout not in (0, 1):
            fail(op, "attribute layout", self.layout, "0 or 1")
        direction = onnx_d.get_attr(op, "direction", "forward")
        direction = direction.decode() if isinstance(direction, bytes) else direction
        if direction not in DIRECTIONS:
            fail(op, "attribute direction", repr(direction), " or ".join(DIRECTIONS))
        self.direction = direction
        self.nd = 2 if direction == "bidirectional" else 1
        xs = shape(x)
        if len(xs) != 3:
            fail(op, "the shape of X", list(xs), "3 dims")
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
                fail(op, f"the shape of {name}", list(shape(v)), dims)
        self.state = state


class _Weights:
    """W^T and R^T of one direction, as the products' B: gate rows of W become columns of
    the gate buffer, in segments (one for LSTM and RNN; GRU's z-r and h, which are
    multiplied apart). Constant weights are laid out at compile time in strips of the
    target's width (matmul.in_strips; each segment padded to whole strips), which the
    micro-kernel reads in place: a matrix packed on every step would cost more than the
    step's arithmetic. Weights given at run time are copied transposed, row-major."""

    def __init__(self, b, op, kind, w, r, d, sz, module):
        self.b, self.hid, self.inp = b, sz.hidden, sz.inp
        hid, g = sz.hidden, GATES[kind] * sz.hidden
        # The ONNX operands, not their Kernel IR buffers, say whether the weights are constants.
        w_np, r_np = (onnx_d.constant_value(v, module) for v in op.operands[1:3])
        const = w_np is not None and r_np is not None
        # (first W row, rows, first column, columns (padded), strip width or None)
        self.segments, col = [], 0
        for first, n in ([(0, 2 * hid), (2 * hid, hid)] if kind == "GRU" else [(0, g)]):
            width = strip_width(n, b.lanes) if const else None
            padded = -(-n // width) * width if const else n
            self.segments.append((first, n, col, padded, width))
            col += padded
        self.width = col
        elem = w.type.element_type
        # R^T row-major (every gate's columns in one row of B) for a one-row step product:
        # the micro-kernel's one-row path then streams B over all the gate columns in one
        # call, many independent accumulators, where strips made one call per strip of 2
        # vectors, a chain of dependent multiply-adds (R_STRIP_MIN_BATCH).
        self.r_rows = const and sz.batch < R_STRIP_MIN_BATCH
        if const:
            dtype = onnx_d.numpy_dtype(elem)
            label = node_label(op)
            self.w = b.constant(self._strips(w_np[d], dtype), module, f"wt_{label}_{d}", elem)
            r_t = self._rows(r_np[d], dtype) if self.r_rows else self._strips(r_np[d], dtype)
            self.r = b.constant(r_t, module, f"rt_{label}_{d}", elem)
        else:
            self.w = self._transposed(w, d, sz.inp, g, elem)
            self.r = self._transposed(r, d, hid, g, elem)

    def _strips(self, m, dtype):
        parts = []
        for first, n, _, padded, width in self.segments:
            t = np.zeros((m.shape[1], padded), dtype)
            t[:, :n] = m[first:first + n].T
            parts.append(in_strips(t, width).ravel())
        return np.concatenate(parts)

    def _rows(self, m, dtype):
        """m^T row-major, each segment at its column of the gate buffer (padding zero)."""
        t = np.zeros((m.shape[1], self.width), dtype)
        for first, n, col, _, _ in self.segments:
            t[:, col:col + n] = m[first:first + n].T
        return t

    def _transposed(self, m, d, k, g, elem):
        b = self.b
        out = b.alloc([k, g], elem)
        with b.nest([k, g]) as (kk, j):
            b.store(b.load(m, [b.index(d), j, kk]), out, [kk, j])
        return out

    def col(self, k):
        """The first column of gate k in the gate buffer."""
        seg = self.segments[-1]
        return seg[2] if len(self.segments) > 1 and k == 2 else k * self.hid

    def column(self, j):
        """The gate buffer's column of W's row j (an index value)."""
        b = self.b
        if len(self.segments) == 1 or self.segments[1][2] == self.segments[1][0]:
            return j
        shift = self.segments[1][2] - self.segments[1][0]
        in_h = b.cmpi("sge", j, b.index(self.segments[1][0]))
        return b.select(in_h, b.affine([(j, 1)], shift), j)

    def project(self, x, rows, xw):
        """xw[rows, :] += X @ W^T, every segment (one product when W^T is row-major)."""
        b = self.b
        zero = b.index(0)
        if self.segments[0][4] is None:
            emit_matmul(b, x, self.w, xw, rows, self.width, self.inp, [zero, zero, zero],
                        (self.inp, 1), self.width, self.width)
            return
        for seg in range(len(self.segments)):
            self.product("w", seg, x, zero, (self.inp, 1), rows, xw, zero, self.width)

    def product(self, which, seg, a, a_off, a_strides, m, c, c_off, ldc, to_column=True):
        """C[c_off + i*ldc + col + j] += A[a_off + i*sa + k*sk] @ (W or R)^T's segment `seg`
        (col: the segment's first column, or 0 when not `to_column`)."""
        b = self.b
        mat, k = (self.w, self.inp) if which == "w" else (self.r, self.hid)
        _, n, col, padded, width = self.segments[seg]
        at = b.affine([(c_off, 1)], col) if to_column and col else c_off
        if width is None or (which == "r" and self.r_rows):
            emit_matmul(b, a, mat, c, m, n, k, [a_off, b.index(col), at], a_strides,
                        self.width, ldc)
        else:
            emit_strip_matmul(b, a, mat, c, m, padded, k, [a_off, b.index(col * k), at],
                              a_strides, ldc, width)


def _state_at(sz, d, bb, j):
    """Index of (direction d, batch bb, unit j) in a state tensor of the op's layout."""
    return [d, bb, j] if sz.layout == 0 else [bb, d, j]


def lower_recurrent(b: KernelBuilder, op, ins, module):
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
        fail(op, "attribute clip", clip, "a positive threshold")
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
        wts = _Weights(b, op, kind, ins[1], ins[2], d, sz, module)
        _direction(b, op, kind, ins, sz, d, reverse, acts[d], clip, lbr, forget, hs, cs, y,
                   seq_lens, wts)
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


def _direction(b, op, kind, ins, sz, d, reverse, acts, clip, lbr, forget, hs, cs, y, seq_lens,
               wts):
    x, bias = ins[0], ins[3]
    peep = ins[7] if kind == "LSTM" else None
    elem = x.type.element_type
    batch, hid, seq = sz.batch, sz.hidden, sz.seq
    g, gp = GATES[kind] * hid, wts.width
    rows = seq * batch
    # xw[row] = X[row] @ W^T + Wb + Rb (GRU with linear_before_reset: Rb of the h gate is
    # added inside r * (...) instead), for every row of X in X's own order; gate k's
    # columns start at wts.col(k) (padding columns of whole strips are zero, never read).
    xw = b.alloc([rows, gp], elem)
    if bias is None or gp != g:  # with a bias and no padding columns, its nest writes all
        fill(b, xw, 0.0)
    if bias is not None:
        with b.nest([rows, g]) as (row, j):
            dref = b.index(d)
            v = b.load(bias, [dref, j])
            rb = b.load(bias, [dref, b.affine([(j, 1)], g)])
            if lbr:
                rb = b.select(b.cmpi("slt", j, b.index(2 * hid)), rb, b.const(0.0, elem))
            b.store(b.add_(v, rb), xw, [row, wts.column(j)])
    zero = b.index(0)
    wts.project(x, rows, xw)
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

    copied = seq_lens is not None and reverse
    step_rows = b.alloc([batch, gp], elem) if copied else None
    scratch = None  # GRU: r * H_{t-1} (linear_before_reset=0) or H_{t-1} @ Rh^T + Rbh (=1)
    if kind == "GRU":
        scratch = b.alloc([batch, wts.segments[1][3] if lbr else hid], elem)
    with b.nest([seq]) as (s,):
        if copied:
            # Each batch entry reads its own time: the step's rows copied out of xw.
            gates = _Gates(step_rows, zero, gp, lambda bb: bb)
            with b.nest([batch, gp]) as (bb, j):
                t, _ = timing(s, bb)
                b.store(b.load(xw, [row_of(t, bb), j]), gates.buf, [bb, j])
        else:
            # One time for the whole batch: the products accumulate onto xw's rows in place.
            t = b.affine([(s, -1)], seq - 1) if reverse and seq_lens is None else s
            gates = _Gates(xw, b.affine([(row_of(t, zero), gp)]),
                           gp if sz.layout == 0 else seq * gp, lambda bb: row_of(t, bb))
        wts.product("r", 0, hs, h_off, (hid, 1), batch, gates.buf, gates.off, gates.ld)
        if kind == "GRU":
            _gru_hidden_product(b, sz, d, acts, clip, lbr, bias, hs, wts, gates, h_off,
                                scratch)
        with b.nest([batch, hid]) as (bb, j):
            t, valid = timing(s, bb)
            dref = b.index(d)
            prev = b.load(hs, [dref, bb, j])

            def gate(k, bb=bb, j=j):
                return b.load(gates.buf, [gates.row(bb), b.affine([(j, 1)], wts.col(k))])

            if kind == "LSTM":
                c_prev = b.load(cs, [dref, bb, j])
                hn, cn = _lstm_cell(b, gate, j, hid, acts, clip, forget, peep, d, c_prev)
                if valid is not None:
                    cn = b.select(valid, cn, c_prev)
                b.store(cn, cs, [dref, bb, j])
            elif kind == "GRU":
                hn = _gru_cell(b, gate, scratch, bb, j, acts, clip, lbr, prev)
            else:
                hn = apply_activation(b, gate(0), acts[0], clip)
            if y is not None:
                out = hn if valid is None else b.select(valid, hn, b.const(0.0, elem))
                at = [t, dref, bb, j] if sz.layout == 0 else [bb, t, dref, j]
                b.store(out, y, at)
            if valid is not None:
                hn = b.select(valid, hn, prev)
            b.store(hn, hs, [dref, bb, j])


class _Gates:
    """Where a step's gate pre-activations are: rows `row(bb)` of `buf` ([., width]), the
    first at element `off`, `ld` elements apart (the products' C)."""

    def __init__(self, buf, off, ld, row):
        self.buf, self.off, self.ld, self.row = buf, off, ld, row


def _gru_hidden_product(b, sz, d, acts, clip, lbr, bias, hs, wts, gates, h_off, scratch):
    """The h gate's recurrent term: (r * H_{t-1}) @ Rh^T added onto the gates
    (linear_before_reset=0, with r * H_{t-1} in `scratch`), or H_{t-1} @ Rh^T + Rbh into
    `scratch` (=1), which the cell multiplies by r."""
    batch, hid = sz.batch, sz.hidden
    elem = hs.type.element_type
    zero = b.index(0)
    if lbr:
        width = wts.segments[1][3]
        extra = scratch
        with b.nest([batch, width]) as (bb, j):
            v = b.const(0.0, elem)
            if bias is not None:  # Rbh, then zeros in the padding columns
                at = b.clamp(b.affine([(j, 1)], 5 * hid), 6 * hid)
                v = b.select(b.cmpi("slt", j, b.index(hid)), b.load(bias, [b.index(d), at]), v)
            b.store(v, extra, [bb, j])
        wts.product("r", 1, hs, h_off, (hid, 1), batch, extra, zero, width, to_column=False)
        return
    rh = scratch
    with b.nest([batch, hid]) as (bb, j):
        pre = b.load(gates.buf, [gates.row(bb), b.affine([(j, 1)], wts.col(1))])
        rg = apply_activation(b, pre, acts[0], clip)
        b.store(b.mul(rg, b.load(hs, [b.index(d), bb, j])), rh, [bb, j])
    wts.product("r", 1, rh, zero, (hid, 1), batch, gates.buf, gates.off, gates.ld)


def _gru_cell(b, gate, extra, bb, j, acts, clip, lbr, prev):
    f, gact = acts
    z = apply_activation(b, gate(0), f, clip)
    pre = gate(2)
    if lbr:
        r = apply_activation(b, gate(1), f, clip)
        pre = b.add_(pre, b.mul(r, b.load(extra, [bb, j])))
    cand = apply_activation(b, pre, gact, clip)
    one = b.const(1.0, prev.type)
    return b.add_(b.mul(b.binary("sub", one, z), cand), b.mul(z, prev))


def _lstm_cell(b, gate, j, hid, acts, clip, forget, peep, d, c_prev):
    """(H_t, C_t) of one element; gates in the spec's order i, o, f, c; P's order i, o, f."""
    f, gact, hact = acts

    def pre(k, c):
        v = gate(k)
        if peep is None:
            return v
        p = b.load(peep, [b.index(d), b.affine([(j, 1)], k * hid)])
        return b.add_(v, b.mul(p, c))

    i = apply_activation(b, pre(0, c_prev), f, clip)
    if forget:
        fg = b.binary("sub", b.const(1.0, i.type), i)
    else:
        fg = apply_activation(b, pre(2, c_prev), f, clip)
    cand = apply_activation(b, gate(3), gact, clip)
    c = b.add_(b.mul(fg, c_prev), b.mul(i, cand))
    o = apply_activation(b, pre(1, c), f, clip)
    return b.mul(o, apply_activation(b, c, hact, None)), c
