"""One matrix-product nest to tune: the Kernel IR it starts from, a schedule written into it
with the krnl_passes schedule ops, and its measured GFLOP/s (LoopNest-compiled, cached).

A `Task` is a one-node ONNX model (MatMul, or a Conv, whose lowering computes each output
chunk as an im2col matrix product) lowered to Kernel IR with no schedule, so its matmul nest is
the untiled (i, j, k) loops around `krnl.matmul`. A `Schedule` is what LoopTune's actions
change, in the form compilerkit/loopnest's matmul generator compiles (loopnest/matmul.py):

    order  the three dims (0 = i, 1 = j, 2 = k) of the emitted loops, outermost first;
    tiles  (TM, TN, TK): each emitted loop steps by its dim's tile; the register-blocked AVX2
           micro-kernel walks the tile (the inner tile loops are not emitted).

`apply` writes it into a private copy of the module with `block` (every dim, by its tile),
`permute` (when the order is not i, j, k) and `drop` (the inner tile loops), and sets the
matmul's tile, so the IR shows the schedule. A tile equal to its dim is one trip of the outer
loop: the start state (tiles = sizes) is one kernel call over the whole product, which is what
loopnest makes of the untiled -O2 nest (LoopNest's default).

`Measurer` compiles a schedule with codegen="loopnest" (milliseconds) and times it at one
thread, best of a few runs; results are cached by (task, schedule). The GFLOP/s count 2*M*N*K
flops over the model's whole run (zeroing C, and im2col for a Conv), as a user sees it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from onnx import helper, numpy_helper
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, i64

from compilerkit.dialects import krnl
from compilerkit.krnl_passes.schedule import block, drop, permute
from compilerkit.krnl_passes.tile_matmul import matmul_nests
from compilerkit.measure.timing import best_of

DIMS = "ijk"


@dataclass(frozen=True)
class Schedule:
    order: tuple  # dims of the emitted loops, outermost first
    tiles: tuple  # (TM, TN, TK)

    def describe(self) -> str:
        loops = ", ".join(f"{DIMS[d]}_o/{self.tiles[d]}" for d in self.order)
        return f"{loops}; kernel {'x'.join(map(str, self.tiles))}"


def _model(nodes, inputs, inits=()):
    vi = [helper.make_tensor_value_info(n, 1, s) for n, s in inputs]
    g = helper.make_graph(nodes, "g", vi, [helper.make_empty_tensor_value_info("y")],
                          [numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


class Task:
    """A one-node model and its unscheduled Kernel IR; `nest` picks its matmul nest."""

    def __init__(self, model, name: str, nest: int = 0):
        from compilerkit.pipeline import compile_to

        self.model, self.name = model, name
        self.kmodule = compile_to("kernel-ir", model, schedule=[])
        nests = matmul_nests(self.kmodule)
        if not nests:
            raise ValueError(f"task {name!r}: its Kernel IR has no krnl.matmul nest to tune")
        if not 0 <= nest < len(nests):
            raise ValueError(f"task {name!r}: nest {nest} of {len(nests)} matmul nests")
        self.nest = nest
        it, mm = nests[nest]
        self.sizes = tuple(krnl.ints_of(mm.sizes))
        self.strides = tuple(krnl.ints_of(mm.strides))  # (sa_r, sa_k, ldb, ldc)
        self.flops = 2.0 * np.prod(self.sizes, dtype=np.float64)
        self.inputs = None

    @classmethod
    def matmul(cls, m: int, n: int, k: int) -> Task:
        for name, v in (("M", m), ("N", n), ("K", k)):
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"matmul {name}={v!r}: sizes must be positive integers")
        nodes = [helper.make_node("MatMul", ["a", "b"], ["y"], name="matmul")]
        return cls(_model(nodes, [("a", [m, k]), ("b", [k, n])]), f"matmul {m}x{n}x{k}")

    @classmethod
    def conv(cls, c_in: int, c_out: int, hw: int, kernel: int = 3) -> Task:
        """A Conv (pads keep the size) as im2col + matrix product; the first matmul nest."""
        w = np.random.default_rng(0).standard_normal((c_out, c_in, kernel, kernel))
        p = kernel // 2
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], pads=[p] * 4, name="conv")]
        return cls(_model(nodes, [("x", [1, c_in, hw, hw])], [("w", w.astype(np.float32))]),
                   f"conv{kernel}x{kernel} {c_in}->{c_out} {hw}x{hw}")

    def default(self) -> Schedule:
        return Schedule((0, 1, 2), self.sizes)

    def apply(self, schedule: Schedule):
        """A private copy of the Kernel IR with `schedule` written into the tuned nest."""
        from compilerkit.pipeline import private_copy

        km = private_copy(self.kmodule)
        it, mm = matmul_nests(km)[self.nest]
        write(it, mm, schedule)
        return km

    def arrays(self):
        if self.inputs is None:
            rng = np.random.default_rng(0)
            self.inputs = [rng.standard_normal(self._shape(v)).astype(np.float32)
                           for v in self.model.graph.input]
        return self.inputs

    @staticmethod
    def _shape(vi):
        return [d.dim_value for d in vi.type.tensor_type.shape.dim]


def write(it, mm, schedule: Schedule) -> None:
    """Schedule one untiled (i, j, k) matmul nest in place: block every dim by its tile,
    permute the outer loops to `order`, drop the inner ones (the micro-kernel walks them)."""
    sizes = krnl.ints_of(mm.sizes)
    if krnl.ints_of(mm.tile) != [1, 1, 1] or len(it.emitted) != 3:
        raise ValueError("krnl.matmul nest is already scheduled: tune the untiled (i, j, k) nest")
    if sorted(schedule.order) != [0, 1, 2]:
        raise ValueError(f"schedule order {schedule.order} is not a permutation of (0, 1, 2)")
    for d, (t, s) in enumerate(zip(schedule.tiles, sizes, strict=True)):
        if not 1 <= t <= s:
            raise ValueError(f"tile {t} for dim {DIMS[d]} of size {s}")
    for d in (2, 1, 0):  # emitted: i_o, i_i, j_o, j_i, k_o, k_i
        block(it, d, schedule.tiles[d])
    outer = [2 * d for d in schedule.order]
    if outer != [0, 2, 4]:
        permute(it, outer + [1, 3, 5])
        drop(it, [3, 4, 5])
    else:
        drop(it, [1, 3, 5])
    mm.attributes["tile"] = ArrayAttr([IntegerAttr(t, i64) for t in schedule.tiles])
    mm.attributes["simd"] = IntegerAttr(8, i64)


class Measurer:
    """GFLOP/s of schedules, LoopNest-compiled, one thread, cached by (task, schedule)."""

    clock = staticmethod(time.perf_counter)  # what the tuning budgets are measured on

    def __init__(self, min_seconds: float = 0.02, max_runs: int = 5):
        self.cache: dict = {}
        self.min_seconds, self.max_runs = min_seconds, max_runs
        self.compiles = 0
        self.compile_seconds = 0.0

    def compile(self, task: Task, schedule: Schedule):
        from compilerkit.pipeline import compile_to

        t = time.perf_counter()
        cm = compile_to("native", task.apply(schedule), codegen="loopnest", asm=False)
        self.compiles += 1
        self.compile_seconds += time.perf_counter() - t
        return cm

    def gflops(self, task: Task, schedule: Schedule) -> float:
        key = (task.name, task.nest, schedule)
        if key not in self.cache:
            cm = self.compile(task, schedule)
            arrays = task.arrays()

            def run():
                cm.run(*arrays, num_threads=1)
            # The first run is timed too, and decides how many more fit in min_seconds.
            best = best_of(run, 1, "wall", warmup=False)
            runs = int(min(self.max_runs, self.min_seconds // max(best, 1e-6)))
            if runs:
                best = min(best, best_of(run, runs, "wall", warmup=False))
            self.cache[key] = task.flops / best / 1e9
        return self.cache[key]

    def retime(self, task: Task, schedules, seconds: float = 0.25) -> list:
        """GFLOP/s of `schedules` timed again side by side (the cache is left as it is): each
        compiled and run once, then rounds of one run of each in turn (3 to 10 rounds, as many
        as fit in about `seconds`), best per schedule. The cache's back-to-back runs of one
        schedule find its data warm; many schedules measure alike there (near the kernel's
        peak), while interleaved runs, as in a model or a benchmark, tell them apart."""
        cms = [self.compile(task, s) for s in schedules]
        arrays = task.arrays()
        runs = {i: (lambda cm=cm: cm.run(*arrays, num_threads=1)) for i, cm in enumerate(cms)}
        # The first round is timed too, and decides how many rounds fit in `seconds`.
        first = best_of(runs, 1, "wall", warmup=False)
        rounds = int(min(10, max(3, seconds // max(sum(first.values()), 1e-6))))
        more = best_of(runs, rounds, "wall", warmup=False)
        return [task.flops / min(first[i], more[i]) / 1e9 for i in runs]
