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

``granularity="node"`` runs a node's edges back to back as one task instead (the paper's
"convolutions converging on the same node of the network with temporal locality"): the forward
task of node j sums all its in-edges into the layer's output, the backward task of input node i
all its out-edges into its gradient, its weight-gradient task all its weight edges; on direct
layers each is one numba call over the layer's stacked maps, so the GIL is taken once per node,
not once per edge.  Python's per-task bookkeeping (about 10 us) and its GIL hand-overs are what
two threads cannot share; on small steps they outweigh the edges.  "auto" (the default) groups
a layer whose edges take under GROUP_BELOW_S; "edge" is ZNN's graph, which notebook 33 draws.
Every layer's outputs live in one array (channel, batch, *size), and val's entries are views.
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
GRANULARITIES = ("auto", "edge", "node")
# granularity="auto": a task's bookkeeping (the scheduler's heap and lock, the closure, the
# partial sum's hand-over) costs about 10 us of Python here and holds the GIL, which two threads
# cannot share. Layers whose edges take less than GROUP_BELOW_S run a node's edges as one task
# (a 16^3 map's 3x3x3 edge is 148 kflop, about 40 us; a 24^3 map's 575 kflop).
# DIRECT_FLOPS_PER_S turns the flop estimates into seconds: the numba direct loop ran at
# 3-8 GFLOP/s on 16^3 to 24^3 maps here.
GROUP_BELOW_S = 250e-6
DIRECT_FLOPS_PER_S = 4e9
KEEP_GRAPHS = 2   # task graphs a Network keeps for reuse (one per input shape and kind of pass)


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

    def __init__(self, model, method: str = "auto", granularity: str = "auto"):
        if method not in ("auto", "direct", "fft"):
            raise ValueError(f"method must be 'auto', 'direct' or 'fft', got {method!r}")
        if granularity not in GRANULARITIES:
            raise ValueError(f"granularity must be one of {', '.join(map(repr, GRANULARITIES))}, "
                             f"got {granularity!r}")
        self.model = model
        self.method = method
        self.granularity = granularity
        self.specs, self.input_shape = read_model(model)
        self.cache = FFTCache()
        self.version = 0
        self._graphs: dict = {}   # (input shape, forward only, loss) -> _build's result
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
        g, state, _ = self._build(x, y, loss)
        return g, state

    def _build(self, x, y, loss):
        """build's graph and state, and the per-pass inputs its tasks read (`io`: the images,
        the targets, each conv layer's edge weights, the edge accumulators), which _pass
        replaces to run the same graph again."""
        if loss not in LOSSES:
            raise ValueError(f"loss {loss!r} is not supported (use one of {LOSSES})")
        x = self._check_input(x)
        batch = x.shape[0]
        plan = self.plan(x.shape[1:4], batch)
        self.cache.clear_pass()
        io = {"x": x, "y": None, "weights": {}, "accumulators": []}
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
        # Each layer's outputs live in one array (channel, batch, *size), val's entries are
        # its slices: a node task of the next layer reads every channel in one call.
        stacks = {-1: np.empty((channels, batch, *x.shape[1:4]), dtype=np.float32)}
        for c in range(channels):
            def make_input(c=c):
                stacks[-1][c] = io["x"][..., c]
                val[(-1, c)] = stacks[-1][c]
            producer[(-1, c)] = g.add(f"input {c}", make_input, kind="input", layer=-1,
                                      estimate=1e3)
        for li, spec in enumerate(self.specs):
            n, nout, method = plan[li]
            if isinstance(spec, Conv):
                channels = spec.cout
                stacks[li] = np.empty((channels, batch, *nout), dtype=np.float32)
                io["weights"][li] = self._edge_weights(li)
                self._conv_forward(g, li, spec, n, nout, method, batch, val, producer, stacks,
                                   io)
            else:
                stacks[li] = np.empty((channels, batch, *nout), dtype=np.float32)
                for c in range(channels):
                    producer[(li, c)] = self._elementwise_forward(g, li, spec, c, val,
                                                                   producer, stacks, batch, n)
        last = len(self.specs) - 1
        outs = [producer[(last, c)] for c in range(channels)]
        if y is None:
            def gather():
                state["output"] = np.stack([val[(last, c)] for c in range(channels)], axis=-1)
            g.add("output", gather, deps=outs, kind="loss", layer=last, estimate=1e3)
            return g, state, io
        io["y"] = self._check_target(y, (batch, *plan[-1][1], channels))

        def mse():
            out = np.stack([val[(last, c)] for c in range(channels)], axis=-1)
            diff = out - io["y"]
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
                                    state, io, need_input=li > first_conv)
            else:
                cin = self._channels_before(li)
                for c in range(cin):
                    gproducer[(li - 1, c)] = self._elementwise_backward(
                        g, li, spec, c, val, grad, gproducer, state, batch, n)
        return g, state, io

    @staticmethod
    def _check_target(y, shape):
        y = np.asarray(y, dtype=np.float32)
        if y.shape != shape:
            raise ValueError(f"target of shape {y.shape}: the model's output is {shape}")
        return values(y, "target")

    def _pass(self, x, y, loss):
        """(graph, state) of a pass, the graph built once per input shape and kind of pass and
        run again with this pass's inputs and weights: building it is Python that no second
        thread can share (0.8 ms of a 10 ms step here). The last KEEP_GRAPHS shapes are kept."""
        key = (np.shape(x), y is None, loss)
        entry = self._graphs.pop(key, None)
        if entry is None:
            entry = self._build(x, y, loss)
        else:
            g, state, io = entry
            io["x"] = self._check_input(x)
            if y is not None:
                io["y"] = self._check_target(y, io["y"].shape)
            for li in io["weights"]:
                io["weights"][li] = self._edge_weights(li)
            for acc in io["accumulators"]:
                acc.reset()
            self.cache.clear_pass()
            state.pop("output", None)
            state.pop("loss", None)
        self._graphs[key] = entry
        while len(self._graphs) > KEEP_GRAPHS:
            self._graphs.pop(next(iter(self._graphs)))
        return entry[0], entry[1]

    def _channels_before(self, li) -> int:
        channels = self.input_shape[3]
        for spec in self.specs[:li]:
            if isinstance(spec, Conv):
                channels = spec.cout
        return channels

    def _edge_weights(self, li) -> np.ndarray:
        """Layer li's kernel as (cin, cout, k0, k1, k2): each edge's filter contiguous, copied
        once per pass (not once per edge task)."""
        return np.ascontiguousarray(self.kernels[li].transpose(3, 4, 0, 1, 2))

    def grouped(self, spec: Conv, n, method: str, batch: int) -> bool:
        """Does this layer run a node's edges as one task (granularity "node"), or each edge as
        a task of its own ("edge", ZNN's)? "auto" groups a layer whose edges are cheaper than
        the bookkeeping a task costs (about GROUP_BELOW_S of Python under the GIL each, which two
        threads cannot share)."""
        if self.granularity != "auto":
            return self.granularity == "node"
        cost = layer_costs(spec, n, batch)[method] / (3 * spec.cin * spec.cout)
        return cost / DIRECT_FLOPS_PER_S < GROUP_BELOW_S

    def _conv_forward(self, g, li, spec, n, nout, method, batch, val, producer, stacks, io):
        k = spec.kernel_size
        m = kernels.fft_shape(n)
        fft = method == "fft"
        vol_out = batch * math.prod(nout)
        weights = io["weights"]
        grouped = self.grouped(spec, n, method, batch)
        edge_cost = 8 * batch * math.prod(m) / 2 if fft else 2 * vol_out * math.prod(k)
        node_cost = batch * _fft_flops(m) if fft else 4 * vol_out
        if fft:
            inputs = []
            for i in range(spec.cin):
                def spectrum(i=i):
                    self.cache.put(("x", li, i), kernels.rfft3(val[(li - 1, i)], m))
                inputs.append(g.add(f"{spec.name} fft x{i}", spectrum,
                                    deps=[producer[(li - 1, i)]], kind="fft", layer=li,
                                    estimate=batch * _fft_flops(m)))
        else:
            inputs = [producer[(li - 1, i)] for i in range(spec.cin)]

        def edge(i, j, acc):
            """Edge i -> j added into acc (None: a new one); returns acc."""
            if fft:
                wf = self.cache.filter((li, i, j), self.version, weights[li][i, j], m)
                xs = self.cache.get(("x", li, i))
                if acc is None:
                    acc = np.zeros_like(xs)
                kernels.mad_conj(xs, wf, acc)
            else:
                if acc is None:
                    acc = np.zeros((batch, *nout), dtype=np.float32)
                kernels.corr_valid_acc(val[(li - 1, i)], weights[li][i, j], acc)
            return acc

        def finish(j, z):
            out = stacks[li][j]
            if fft:
                kernels.snap_roundoff(kernels.irfft3_crop(z, m, nout, out=out))
            elif z is not out:
                out[...] = z
            if spec.bias_var is not None:
                out += self.biases[li][j]
            val[(li, j)] = activate(spec.activation, out)

        for j in range(spec.cout):
            if grouped:
                # the node's edges back to back into one private sum, then the node itself
                def node(j=j):
                    if fft:
                        acc = None
                        for i in range(spec.cin):
                            acc = edge(i, j, acc)
                    else:   # every in-edge in one call, straight into the layer's output
                        acc = stacks[li][j]
                        acc.fill(0.0)
                        kernels.corr_valid_node(stacks[li - 1], weights[li], j, acc)
                    finish(j, acc)
                producer[(li, j)] = g.add(f"{spec.name} node {j}", node, deps=inputs,
                                          kind="conv", layer=li,
                                          estimate=spec.cin * edge_cost + node_cost)
                continue
            acc_j = Accumulator(spec.cin, f"{spec.name} node {j}")
            io["accumulators"].append(acc_j)
            edge_tasks = []
            for i in range(spec.cin):
                def one(i=i, j=j, acc_j=acc_j):
                    acc_j.add(edge(i, j, acc_j.take()))
                edge_tasks.append(g.add(f"{spec.name} edge {i}->{j}", one, deps=[inputs[i]],
                                        kind="conv", layer=li, estimate=edge_cost))

            def node(j=j, acc_j=acc_j):
                finish(j, acc_j.result())
            producer[(li, j)] = g.add(f"{spec.name} node {j}", node, deps=edge_tasks,
                                      kind="ifft" if fft else "node", layer=li,
                                      estimate=node_cost)

    def _elementwise_forward(self, g, li, spec, c, val, producer, stacks, batch, n):
        if isinstance(spec, Pool):
            def pool():
                stacks[li][c] = kernels.maxpool(val[(li - 1, c)], *spec.pool, *spec.strides)
                val[(li, c)] = stacks[li][c]
            return g.add(f"{spec.name} pool {c}", pool, deps=[producer[(li - 1, c)]],
                         kind="pool", layer=li, estimate=batch * math.prod(n) * 2)

        def act():
            out = stacks[li][c]
            out[...] = val[(li - 1, c)]
            val[(li, c)] = activate(spec.activation, out)
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
                       io, need_input):
        k = spec.kernel_size
        m = kernels.fft_shape(n)
        dw = np.zeros((*k, spec.cin, spec.cout), dtype=np.float32)
        db = np.zeros(spec.cout, dtype=np.float32)
        state["grads"][(li, "kernel")] = dw
        if spec.bias_var is not None:
            state["grads"][(li, "bias")] = db
        delta: dict = {}
        deltas = np.empty((spec.cout, batch, *nout), dtype=np.float32)  # delta[j] its slices
        delta_tasks = []
        fft = method == "fft"
        vol_out = batch * math.prod(nout)
        weights = io["weights"]
        grouped = self.grouped(spec, n, method, batch)
        edge_cost = 8 * batch * math.prod(m) / 2 if fft else 2 * vol_out * math.prod(k)
        wgrad_cost = (8 * batch * math.prod(m) / 2 + 0.5 * _fft_flops(m) if fft
                      else 2 * vol_out * math.prod(k))
        gnode_cost = batch * _fft_flops(m) if fft else 4 * batch * math.prod(n)
        for j in range(spec.cout):
            def node(j=j):
                d = deltas[j]
                d[...] = derivative_times(spec.activation, val[(li, j)], grad[(li, j)])
                db[j] = d.sum(dtype=np.float64)
                delta[j] = d
                if fft:
                    self.cache.put(("g", li, j), kernels.rfft3(d, m))
            delta_tasks.append(g.add(f"{spec.name} delta {j}", node, deps=[gproducer[(li, j)]],
                                     kind="fft" if fft else "node", phase="backward",
                                     layer=li, estimate=(batch * _fft_flops(m) if fft
                                                         else 4 * vol_out)))

        def wgrad(i, j):
            if fft:
                sp = kernels.batch_corr_spectrum(self.cache.get(("x", li, i)),
                                                 self.cache.get(("g", li, j)))
                dw[:, :, :, i, j] = kernels.irfft3_pruned(sp, m, k)
            else:
                dw[:, :, :, i, j] = kernels.corr_weight(val[(li - 1, i)], delta[j], *k)

        def back(i, j, acc):
            """Edge i <- j's gradient added into acc (None: a new one); returns acc."""
            if fft:
                gs = self.cache.get(("g", li, j))
                wf = self.cache.filter((li, i, j), self.version, weights[li][i, j], m)
                if acc is None:
                    acc = np.zeros_like(gs)
                kernels.mad(gs, wf, acc)
            else:
                if acc is None:
                    acc = np.zeros((batch, *n), dtype=np.float32)
                kernels.conv_full_acc(delta[j], weights[li][i, j], acc)
            return acc

        def finish(i, s):
            grad[(li - 1, i)] = kernels.irfft3_crop(s, m, n) if fft else s

        for i in range(spec.cin):
            if grouped:
                def wgrads(i=i):
                    if fft:
                        for j in range(spec.cout):
                            wgrad(i, j)
                    else:
                        kernels.corr_weight_node(val[(li - 1, i)], deltas, *k, dw[:, :, :, i, :])
                g.add(f"{spec.name} wgrad {i}", wgrads, deps=delta_tasks, kind="wgrad",
                      phase="update", layer=li, estimate=spec.cout * wgrad_cost)
                if need_input:
                    def gnode(i=i):
                        if fft:
                            acc = None
                            for j in range(spec.cout):
                                acc = back(i, j, acc)
                        else:
                            acc = np.zeros((batch, *n), dtype=np.float32)
                            kernels.conv_full_node(deltas, weights[li], i, acc)
                        finish(i, acc)
                    gproducer[(li - 1, i)] = g.add(
                        f"{spec.name} grad node {i}", gnode, deps=delta_tasks, kind="conv",
                        phase="backward", layer=li,
                        estimate=spec.cout * edge_cost + gnode_cost)
                continue
            acc_i = Accumulator(spec.cout, f"{spec.name} grad node {i}")
            io["accumulators"].append(acc_i)
            in_edges = []
            for j in range(spec.cout):
                g.add(f"{spec.name} wgrad {i}<-{j}", lambda i=i, j=j: wgrad(i, j),
                      deps=[delta_tasks[j]], kind="wgrad", phase="update", layer=li,
                      estimate=wgrad_cost)
                if need_input:
                    def one(i=i, j=j, acc_i=acc_i):
                        acc_i.add(back(i, j, acc_i.take()))
                    in_edges.append(g.add(f"{spec.name} back {i}<-{j}", one,
                                          deps=[delta_tasks[j]], kind="conv",
                                          phase="backward", layer=li, estimate=edge_cost))
            if need_input:
                def gnode(i=i, acc_i=acc_i):
                    finish(i, acc_i.result())
                gproducer[(li - 1, i)] = g.add(
                    f"{spec.name} grad node {i}", gnode, deps=in_edges,
                    kind="ifft" if fft else "node", phase="backward", layer=li,
                    estimate=gnode_cost)

    # passes -------------------------------------------------------------------------------
    def forward(self, x, threads=None):
        graph, state = self._pass(x, None, "mse")
        run(graph, threads)
        return state["output"]

    def gradients(self, x, y, loss: str = "mse", threads=None, return_run: bool = False):
        """Loss and gradients in model.trainable_weights order (numpy arrays, the caller's own:
        the next pass does not write into them)."""
        graph, state = self._pass(x, y, loss)
        records, wall = run(graph, threads)
        grads = [state["grads"][slot].copy() for slot in self.weight_slots()]
        if return_run:
            return state["loss"], grads, {"graph": graph, "records": records, "wall": wall,
                                          "plan": state["plan"]}
        return state["loss"], grads
