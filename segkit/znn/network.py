"""Forward and backward passes of a Keras ConvNet as one task graph (ZNN's parallel network).

Each feature map is a node; each (input channel, output channel) pair of a convolution is an
edge with its own tasks:

  forward   conv edge i->j : corr(x_i, w_ij) added into node j's accumulator   (direct)
                             X_i * conj(W_ij) added into node j's spectrum     (FFT)
            node j         : (inverse FFT,) + bias, activation
  backward  node j         : delta_j = g_j * f'(z_j); bias gradient; spectrum G_j (FFT)
            edge i<-j      : conv_full(delta_j, w_ij) (or G_j * W_ij) into node i's gradient
            weight edge    : corr(x_i, delta_j) (or pruned inverse of sum X_i conj(G_j))

Spectra of images and gradients are tasks of their own, computed once and shared through the
FFT cache (segkit.znn.fftcache); sums over edges go through almost wait-free accumulators
(segkit.znn.sums).  A layer is direct or FFT as a whole: ``method="auto"`` picks by an
operation count (direct cost grows with the kernel volume, FFT cost does not).  The input
layer's gradient is never computed (ZNN skips it too).
"""

from __future__ import annotations

import math

import numpy as np

from ..validate import values
from . import kernels
from .fftcache import FFTCache
from .layers import Conv, Pool, activate, derivative_times, output_size, read_model
from .sums import Accumulator
from .taskgraph import TaskGraph, run

# Calibrated on this machine (AMD EPYC, AVX2): one flop of the FFT path (pocketfft and the
# complex multiply-adds) costs about this many flops of the numba direct loop, which runs short
# rows; benchmarks/znn_bench.py measures FFT against direct per kernel size.
FFT_FLOP_PENALTY = 0.8
LOSSES = ("mse",)


def _fft_flops(m) -> float:
    vol = math.prod(m)
    return 2.5 * vol * math.log2(max(vol, 2))


def layer_costs(spec: Conv, n, batch: int) -> dict:
    """Estimated flops of one training step of a conv layer, direct and FFT."""
    k = spec.kernel_size
    L = [a - b + 1 for a, b in zip(n, k, strict=True)]
    edges = spec.cin * spec.cout
    direct = 3 * 2 * batch * math.prod(L) * math.prod(k) * edges
    m = kernels.fft_shape(n)
    spectrum = m[0] * m[1] * (m[2] // 2 + 1)
    fft = (2 * (spec.cin + spec.cout) * batch * _fft_flops(m)   # node FFTs, both passes
           + edges * 3 * 8 * batch * spectrum                    # products on the edges
           + edges * 1.4 * _fft_flops(m))                        # filter FFT + pruned inverse
    return {"direct": float(direct), "fft": float(fft) * FFT_FLOP_PENALTY}


class Network:
    """A Keras model compiled into ZNN task graphs; weights are numpy copies of the model's.

    One pass at a time per Network (its FFT cache holds the spectra of the current pass)."""

    def __init__(self, model, method: str = "auto"):
        if method not in ("auto", "direct", "fft"):
            raise ValueError(f"method must be 'auto', 'direct' or 'fft', got {method!r}")
        self.model = model
        self.method = method
        self.specs, self.input_shape = read_model(model)
        self.cache = FFTCache()
        self.version = 0
        self.pull()

    # weights ------------------------------------------------------------------------------
    def pull(self) -> None:
        """Copy the Keras model's weights in (after the model was changed outside)."""
        self.kernels = {}
        self.biases = {}
        for li, spec in enumerate(self.specs):
            if isinstance(spec, Conv):
                self.kernels[li] = np.array(spec.kernel_var.numpy(), dtype=np.float32)
                if spec.bias_var is not None:
                    self.biases[li] = np.array(spec.bias_var.numpy(), dtype=np.float32)
        self.version += 1

    def push(self) -> None:
        """Write the numpy weights back into the Keras model."""
        for li, spec in enumerate(self.specs):
            if isinstance(spec, Conv):
                spec.kernel_var.assign(self.kernels[li])
                if spec.bias_var is not None:
                    spec.bias_var.assign(self.biases[li])

    def weight_slots(self) -> list:
        """(layer index, 'kernel' | 'bias') in model.trainable_weights order."""
        where = {}
        for li, spec in enumerate(self.specs):
            if isinstance(spec, Conv):
                where[id(spec.kernel_var)] = (li, "kernel")
                if spec.bias_var is not None:
                    where[id(spec.bias_var)] = (li, "bias")
        slots = []
        for var in self.model.trainable_weights:
            if id(var) not in where:
                raise ValueError(f"trainable weight {var.path!r} belongs to no Conv3D layer "
                                 "segkit.znn knows")
            slots.append(where[id(var)])
        return slots

    def step_weights(self, updates: dict) -> None:
        """Subtract {(layer, 'kernel'|'bias'): delta} from the weights (a new version)."""
        for (li, what), delta in updates.items():
            (self.kernels if what == "kernel" else self.biases)[li] -= delta
        self.version += 1

    # plan ---------------------------------------------------------------------------------
    def _check_input(self, x):
        x = np.asarray(x, dtype=np.float32)
        if x.ndim != 5 or x.shape[4] != self.input_shape[3]:
            raise ValueError(f"input of shape {x.shape}: expected (batch, depth, height, width, "
                             f"{self.input_shape[3]})")
        fixed = [s for s in self.input_shape[:3]]
        for axis, (want, got) in enumerate(zip(fixed, x.shape[1:4], strict=True)):
            if want is not None and want != got:
                raise ValueError(f"input of shape {x.shape}: axis {axis + 1} must be {want}")
        return values(x, "input")  # NaN would come out as a NaN loss and NaN weights

    def plan(self, spatial, batch: int = 1) -> list:
        """Per layer: (input size, output size, method)."""
        out, n = [], tuple(spatial)
        for spec in self.specs:
            nout = output_size(spec, n)
            method = None
            if isinstance(spec, Conv):
                if self.method == "auto":
                    cost = layer_costs(spec, n, batch)
                    method = "fft" if cost["fft"] < cost["direct"] else "direct"
                else:
                    method = self.method
            out.append((n, nout, method))
            n = nout
        return out

    # graph --------------------------------------------------------------------------------
    def build(self, x, y=None, loss: str = "mse"):
        """The task graph of one forward pass (y None) or one forward + backward pass.

        Returns (graph, state); after ``run(graph)``, state["output"] holds the output (N, D,
        H, W, C), and with y, state["loss"] and state["grads"][(layer, 'kernel'|'bias')].
        """
        if loss not in LOSSES:
            raise ValueError(f"loss {loss!r} is not supported (use one of {LOSSES})")
        x = self._check_input(x)
        batch = x.shape[0]
        plan = self.plan(x.shape[1:4], batch)
        self.cache.clear_pass()
        g = TaskGraph()
        val: dict = {}     # (layer, channel) -> output of that layer (layer -1: the input)
        grad: dict = {}    # (layer, channel) -> gradient w.r.t. that output
        state = {"grads": {}, "plan": plan, "fft_roundoff": {}}
        approx = False  # does layer li's input carry FFT roundoff?
        for li, (_, _, method) in enumerate(plan):
            state["fft_roundoff"][li] = approx
            if method is not None:
                approx = method == "fft"
        producer = {}      # (layer, channel) -> task that makes val
        channels = self.input_shape[3]
        for c in range(channels):
            def make_input(c=c):
                val[(-1, c)] = np.ascontiguousarray(x[..., c])
            producer[(-1, c)] = g.add(f"input {c}", make_input, kind="input", layer=-1,
                                      estimate=1e3)
        for li, spec in enumerate(self.specs):
            n, nout, method = plan[li]
            if isinstance(spec, Conv):
                self._conv_forward(g, li, spec, n, nout, method, batch, val, producer)
                channels = spec.cout
            else:
                for c in range(channels):
                    producer[(li, c)] = self._elementwise_forward(g, li, spec, c, val,
                                                                   producer, state, batch, n)
        last = len(self.specs) - 1
        outs = [producer[(last, c)] for c in range(channels)]
        if y is None:
            def gather():
                state["output"] = np.stack([val[(last, c)] for c in range(channels)], axis=-1)
            g.add("output", gather, deps=outs, kind="loss", layer=last, estimate=1e3)
            return g, state
        y = np.asarray(y, dtype=np.float32)
        shape = (batch, *plan[-1][1], channels)
        if y.shape != shape:
            raise ValueError(f"target of shape {y.shape}: the model's output is {shape}")
        y = values(y, "target")

        def mse():
            out = np.stack([val[(last, c)] for c in range(channels)], axis=-1)
            diff = out - y
            state["output"] = out
            state["loss"] = float(np.mean(diff.astype(np.float64) ** 2))
            scale = np.float32(2.0 / diff.size)
            for c in range(channels):
                grad[(last, c)] = np.ascontiguousarray(diff[..., c]) * scale
        loss_task = g.add("loss", mse, deps=outs, kind="loss", phase="backward", layer=last,
                          estimate=1e3)
        gproducer = {(last, c): loss_task for c in range(channels)}
        # nothing before the first convolution needs a gradient (a net without one: none)
        first_conv = min((i for i, s in enumerate(self.specs) if isinstance(s, Conv)),
                         default=last + 1)
        for li in range(last, first_conv - 1, -1):
            spec = self.specs[li]
            n, nout, method = plan[li]
            if isinstance(spec, Conv):
                self._conv_backward(g, li, spec, n, nout, method, batch, val, grad, gproducer,
                                    state, need_input=li > first_conv)
            else:
                cin = self._channels_before(li)
                for c in range(cin):
                    gproducer[(li - 1, c)] = self._elementwise_backward(
                        g, li, spec, c, val, grad, gproducer, state, batch, n)
        return g, state

    def _channels_before(self, li) -> int:
        channels = self.input_shape[3]
        for spec in self.specs[:li]:
            if isinstance(spec, Conv):
                channels = spec.cout
        return channels

    def _edge_w(self, li, i, j):
        return np.ascontiguousarray(self.kernels[li][:, :, :, i, j])

    def _conv_forward(self, g, li, spec, n, nout, method, batch, val, producer):
        k, version = spec.kernel_size, self.version
        m = kernels.fft_shape(n)
        vol_out = batch * math.prod(nout)
        accs = [Accumulator(spec.cin, f"{spec.name} node {j}") for j in range(spec.cout)]
        edge_tasks = [[] for _ in range(spec.cout)]
        if method == "fft":
            spec_tasks = []
            for i in range(spec.cin):
                def spectrum(i=i):
                    self.cache.put(("x", li, i), kernels.rfft3(val[(li - 1, i)], m))
                spec_tasks.append(g.add(f"{spec.name} fft x{i}", spectrum,
                                        deps=[producer[(li - 1, i)]], kind="fft", layer=li,
                                        estimate=batch * _fft_flops(m)))
            for i in range(spec.cin):
                for j in range(spec.cout):
                    def edge(i=i, j=j):
                        wf = self.cache.filter((li, i, j), version, self._edge_w(li, i, j), m)
                        xs = self.cache.get(("x", li, i))
                        acc = accs[j].take()
                        if acc is None:
                            acc = np.zeros_like(xs)
                        kernels.mad_conj(xs, wf, acc)
                        accs[j].add(acc)
                    edge_tasks[j].append(g.add(f"{spec.name} edge {i}->{j}", edge,
                                               deps=[spec_tasks[i]], kind="conv", layer=li,
                                               estimate=8 * batch * math.prod(m) / 2))
        else:
            for i in range(spec.cin):
                for j in range(spec.cout):
                    def edge(i=i, j=j):
                        acc = accs[j].take()
                        if acc is None:
                            acc = np.zeros((batch, *nout), dtype=np.float32)
                        kernels.corr_valid_acc(val[(li - 1, i)], self._edge_w(li, i, j), acc)
                        accs[j].add(acc)
                    edge_tasks[j].append(g.add(f"{spec.name} edge {i}->{j}", edge,
                                               deps=[producer[(li - 1, i)]], kind="conv",
                                               layer=li, estimate=2 * vol_out * math.prod(k)))
        for j in range(spec.cout):
            def node(j=j):
                z = accs[j].result()
                if method == "fft":
                    z = kernels.snap_roundoff(kernels.irfft3_crop(z, m, nout))
                if spec.bias_var is not None:
                    z += self.biases[li][j]
                val[(li, j)] = activate(spec.activation, z)
            producer[(li, j)] = g.add(f"{spec.name} node {j}", node, deps=edge_tasks[j],
                                      kind="ifft" if method == "fft" else "node", layer=li,
                                      estimate=(batch * _fft_flops(m) if method == "fft"
                                                else 4 * vol_out))

    def _elementwise_forward(self, g, li, spec, c, val, producer, state, batch, n):
        if isinstance(spec, Pool):
            def pool():
                val[(li, c)] = kernels.maxpool(val[(li - 1, c)], *spec.pool, *spec.strides)
            return g.add(f"{spec.name} pool {c}", pool, deps=[producer[(li - 1, c)]],
                         kind="pool", layer=li, estimate=batch * math.prod(n) * 2)

        def act():
            val[(li, c)] = activate(spec.activation, val[(li - 1, c)].copy())
        return g.add(f"{spec.name} {spec.activation} {c}", act, deps=[producer[(li - 1, c)]],
                     kind="node", layer=li, estimate=batch * math.prod(n) * 2)

    def _elementwise_backward(self, g, li, spec, c, val, grad, gproducer, state, batch, n):
        if isinstance(spec, Pool):
            def unpool():
                x = val[(li - 1, c)]
                # TensorFlow's tie rule; after an FFT convolution, at least its roundoff
                tol = kernels.TF_POOL_TIE
                if state["fft_roundoff"][li]:
                    tol = max(tol, kernels.ROUNDOFF * float(np.abs(x).max(initial=0.0)))
                grad[(li - 1, c)] = kernels.maxpool_grad(x, val[(li, c)], grad[(li, c)],
                                                         *spec.pool, *spec.strides, tol)
            return g.add(f"{spec.name} unpool {c}", unpool, deps=[gproducer[(li, c)]],
                         kind="pool", phase="backward", layer=li,
                         estimate=batch * math.prod(n) * 2)

        def act():
            grad[(li - 1, c)] = derivative_times(spec.activation, val[(li, c)], grad[(li, c)])
        return g.add(f"{spec.name} d{spec.activation} {c}", act, deps=[gproducer[(li, c)]],
                     kind="node", phase="backward", layer=li, estimate=batch * math.prod(n) * 2)

    def _conv_backward(self, g, li, spec, n, nout, method, batch, val, grad, gproducer, state,
                       need_input):
        k, version = spec.kernel_size, self.version
        m = kernels.fft_shape(n)
        dw = np.zeros((*k, spec.cin, spec.cout), dtype=np.float32)
        db = np.zeros(spec.cout, dtype=np.float32)
        state["grads"][(li, "kernel")] = dw
        if spec.bias_var is not None:
            state["grads"][(li, "bias")] = db
        delta: dict = {}
        delta_tasks = []
        fft = method == "fft"
        vol_out = batch * math.prod(nout)
        for j in range(spec.cout):
            def node(j=j):
                d = derivative_times(spec.activation, val[(li, j)], grad[(li, j)])
                d = np.ascontiguousarray(d, dtype=np.float32)
                db[j] = d.sum(dtype=np.float64)
                delta[j] = d
                if fft:
                    self.cache.put(("g", li, j), kernels.rfft3(d, m))
            delta_tasks.append(g.add(f"{spec.name} delta {j}", node, deps=[gproducer[(li, j)]],
                                     kind="fft" if fft else "node", phase="backward",
                                     layer=li, estimate=(batch * _fft_flops(m) if fft
                                                         else 4 * vol_out)))
        accs = [Accumulator(spec.cout, f"{spec.name} grad node {i}") for i in range(spec.cin)]
        for i in range(spec.cin):
            in_edges = []
            for j in range(spec.cout):
                def wgrad(i=i, j=j):
                    if fft:
                        s = kernels.batch_corr_spectrum(self.cache.get(("x", li, i)),
                                                        self.cache.get(("g", li, j)))
                        dw[:, :, :, i, j] = kernels.irfft3_pruned(s, m, k)
                    else:
                        dw[:, :, :, i, j] = kernels.corr_weight(val[(li - 1, i)], delta[j], *k)
                g.add(f"{spec.name} wgrad {i}<-{j}", wgrad, deps=[delta_tasks[j]], kind="wgrad",
                      phase="update", layer=li,
                      estimate=(8 * batch * math.prod(m) / 2 + 0.5 * _fft_flops(m) if fft
                                else 2 * vol_out * math.prod(k)))
                if not need_input:
                    continue

                def back(i=i, j=j):
                    acc = accs[i].take()
                    if fft:
                        gs = self.cache.get(("g", li, j))
                        wf = self.cache.filter((li, i, j), version, self._edge_w(li, i, j), m)
                        if acc is None:
                            acc = np.zeros_like(gs)
                        kernels.mad(gs, wf, acc)
                    else:
                        if acc is None:
                            acc = np.zeros((batch, *n), dtype=np.float32)
                        kernels.conv_full_acc(delta[j], self._edge_w(li, i, j), acc)
                    accs[i].add(acc)
                in_edges.append(g.add(f"{spec.name} back {i}<-{j}", back, deps=[delta_tasks[j]],
                                      kind="conv", phase="backward", layer=li,
                                      estimate=(8 * batch * math.prod(m) / 2 if fft
                                                else 2 * vol_out * math.prod(k))))
            if need_input:
                def gnode(i=i):
                    s = accs[i].result()
                    grad[(li - 1, i)] = kernels.irfft3_crop(s, m, n) if fft else s
                gproducer[(li - 1, i)] = g.add(
                    f"{spec.name} grad node {i}", gnode, deps=in_edges,
                    kind="ifft" if fft else "node", phase="backward", layer=li,
                    estimate=batch * _fft_flops(m) if fft else 4 * batch * math.prod(n))

    # passes -------------------------------------------------------------------------------
    def forward(self, x, threads=None):
        graph, state = self.build(x)
        run(graph, threads)
        return state["output"]

    def gradients(self, x, y, loss: str = "mse", threads=None, return_run: bool = False):
        """Loss and gradients in model.trainable_weights order (numpy arrays)."""
        graph, state = self.build(x, y, loss)
        records, wall = run(graph, threads)
        grads = [state["grads"][slot] for slot in self.weight_slots()]
        if return_run:
            return state["loss"], grads, {"graph": graph, "records": records, "wall": wall,
                                          "plan": state["plan"]}
        return state["loss"], grads
