"""Scan unrolled (frontend/control_flow.py's design): one copy of the body per step, the scan
inputs read with Gather at the step's position (scan_input_axes, scan_input_directions), the
outputs stacked (Unsqueeze + Concat) along scan_output_axes in scan_output_directions' order.
Opset 8's form (input 0 sequence_lens, a batch axis 0 on every other input) runs the same per
batch item; sequence_lens must then be a constant equal to the sequence length.

`ScanSteps` is a part of the expander: it uses its helpers (node, const, inline, stack,
count) and its values known at compile time (`known`).
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from compilerkit.frontend.checks import ModelError, UnsupportedOpError
from compilerkit.frontend.hygiene import text
from compilerkit.frontend.subgraphs import Later, proto_type


class ScanSteps:
    """Scan for the expander (frontend/control_flow.py `_Expander`)."""

    def _scan(self, node, typed) -> None:
        label, guards = node.name, self.tags.guarded.get(node.name, ())
        a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
        body = a["body"]
        body_ranks = [None if t[1] is None else len(t[1]) for t in (
            proto_type(o) for o in next(x.g for x in typed.attribute if x.name == "body").output)]
        n_scan = a["num_scan_inputs"]
        if self.opset < 9:
            self._scan8(node, body, a, n_scan, label, guards, body_ranks)
            return
        ins = list(node.input)
        n = len(ins) - n_scan
        if n < 0 or len(body.input) != len(ins) or len(body.output) < n:
            raise ModelError(f"node {label!r} (Scan): the body takes {len(body.input)} inputs "
                             f"and gives {len(body.output)} outputs for {len(ins)} inputs of "
                             f"which {n_scan} are scanned")
        states, outs = self.steps(label, body, a, ins[:n], ins[n:], guards)
        self._scan_outputs(node, a, states, outs, label, guards, body_ranks[n:])

    def _scan_outputs(self, node, a, states, outs, label, guards, ranks, extra_axis=0) -> None:
        n = len(states)
        self._outputs(node, states, label, "Scan", guards)
        out_axes = a.get("scan_output_axes") or [0] * len(outs)
        out_dirs = a.get("scan_output_directions") or [0] * len(outs)
        for j, out in enumerate(node.output[n:]):
            if not out:
                continue
            axis = out_axes[j]
            if axis < 0:
                if ranks[j] is None:
                    raise Later(f"node {label!r} (Scan): scan output {j} has no known rank")
                axis += ranks[j] + 1
            values = outs[j][::-1] if out_dirs[j] else outs[j]
            self.stack(values, axis + extra_axis, f"{label}/scan{j}", guards, out)

    def steps(self, label, body, a, states, xs, guards, prefix="", shapes=None):
        """Run the body over the scan inputs `xs` (opset 9's form; `shapes`: their dims when
        they are not typed yet): (final states, per scan output the list of its per-step
        values)."""
        axes = a.get("scan_input_axes") or [0] * len(xs)
        dirs = a.get("scan_input_directions") or a.get("directions") or [0] * len(xs)
        lengths, norm = set(), []
        for j, x in enumerate(xs):
            dims = shapes[j] if shapes else self.known.dims(x)
            if dims is None:
                if x in self.known.tainted:
                    raise Later(f"node {label!r} (Scan): scan input {j} is not typed yet")
                raise UnsupportedOpError(f"node {label!r} (Scan): scan input {j} "
                                         f"({text(x)!r}) has no static shape")
            axis = axes[j] + len(dims) if axes[j] < 0 else axes[j]
            if not 0 <= axis < len(dims):
                raise ModelError(f"node {label!r} (Scan): scan_input_axes[{j}] = {axes[j]} is "
                                 f"out of range for a tensor of rank {len(dims)}")
            lengths.add(dims[axis])
            norm.append(axis)
        if len(lengths) != 1:
            raise ModelError(f"node {label!r} (Scan): the scan inputs have different sequence "
                             f"lengths {sorted(lengths)}")
        length = lengths.pop()
        if length == 0:
            raise UnsupportedOpError(f"node {label!r} (Scan): the sequence is empty, so the "
                                     "scan outputs' element shapes are unknown")
        self.count(label, "Scan", length)
        n = len(states)
        outs = [[] for _ in range(len(body.output) - n)]
        for t in range(length):
            step = f"{label}/{prefix}{t}/"
            bind = {body.input[j].name: s for j, s in enumerate(states)}
            for j, x in enumerate(xs):
                pos = self.const(np.int64(length - 1 - t if dirs[j] else t), step + "pos")
                bind[body.input[n + j].name] = self.node("Gather", [x, pos], step + "slice",
                                                         guards, axis=norm[j])
            got = self.inline(body, bind, step, guards)
            states = got[:n]
            for j, v in enumerate(got[n:]):
                outs[j].append(v)
        return states, outs

    def _scan8(self, node, body, a, n_scan, label, guards, body_ranks) -> None:
        """Opset 8: input 0 is sequence_lens, every other input has a batch axis 0 and the
        scan axis 1; the body runs per batch item."""
        ins = list(node.input)
        lens, rest = ins[0], ins[1:]
        n = len(rest) - n_scan
        if n < 0 or len(body.input) != len(rest) or len(body.output) < n:
            raise ModelError(f"node {label!r} (Scan): the body takes {len(body.input)} inputs "
                             f"for {len(rest)} inputs of which {n_scan} are scanned")
        scan_dims = [self.known.dims(x) for x in rest[n:]]
        for j, (x, dims) in enumerate(zip(rest[n:], scan_dims, strict=True)):
            if dims is None or len(dims) < 2:
                if x in self.known.tainted:
                    raise Later(f"node {label!r} (Scan): scan input {j} is not typed yet")
                raise UnsupportedOpError(f"node {label!r} (Scan): scan input {j} ({text(x)!r}) "
                                         "has no static shape with batch and sequence axes")
        if not scan_dims:
            raise ModelError(f"node {label!r} (Scan): num_scan_inputs must be at least 1")
        batch, length = scan_dims[0][0], scan_dims[0][1]
        if lens:
            v = self.value(lens, label, "Scan", "sequence_lens (input 0)")
            if v is None or not np.all(v == length):
                raise UnsupportedOpError(
                    f"node {label!r} (Scan): sequence_lens ({text(lens)!r}) must be a constant "
                    f"equal to the sequence length {length} for every batch item")
        states_b, outs_b = [], []
        for b in range(batch):
            pick = self.const(np.int64(b), f"{label}/b{b}/index")
            items = [self.node("Gather", [x, pick], f"{label}/b{b}/item", guards, axis=0)
                     for x in rest]
            s, o = self.steps(label, body, a, items[:n], items[n:], guards, f"b{b}/",
                              [d[1:] for d in scan_dims])
            states_b.append(s)
            outs_b.append(o)
        for j in range(n):
            if node.output[j]:
                self.stack([s[j] for s in states_b], 0, f"{label}/state{j}", guards,
                           node.output[j])
        for j, out in enumerate(node.output[n:]):
            if out:
                per_item = [self.node("Concat", [self.unsqueeze(v, 0, f"{label}/s{j}", guards)
                                                 for v in o[j]], f"{label}/seq{j}", guards,
                                      axis=0) for o in outs_b]
                self.stack(per_item, 0, f"{label}/scan{j}", guards, out)


__all__ = ["ScanSteps"]
