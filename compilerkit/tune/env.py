"""LoopTune's environment over a Kernel IR matmul nest (gymnasium.Env).

State (after LoopTune, Dagli et al.): a cursor over the loop tree and, per loop, its
features and a histogram of the strides of its memory accesses. Our tree is the nest as
compilerkit/loopnest compiles it: the three emitted tile loops (in the schedule's order), then
the micro-kernel's three inner tile loops (i_i, j_i, k_i: the register-blocked part LoopNest
generates itself; fixed, the cursor does not visit them). One row per loop:

    cursor | dim one-hot (i, j, k) | in kernel | log2 trip count / 12 | log2 step / 12 |
    has a tail (a partial last tile) | stride histogram: 16 bins over the three accesses
    (A, B, C): bin 0 for "does not move" (stride 0), bin 1 + floor(log2 s) (capped) for a
    stride of s elements per iteration of the loop; counts / 3

Actions (LoopTune's): 0 cursor up, 1 cursor down, 2 swap the loop up, 3 swap it down,
4.. split the loop by f for f in SPLITS: its tile becomes ceil(tile / f), so the outer loop
takes f times more trips and the kernel a tile f times smaller (a split that would leave a
tile under MIN_TILE does nothing). Swaps are `krnl.permute`, splits the dim's `krnl.block`
tile (env.kernel_ir() prints the nest). Reward: the change of measured GFLOP/s (LoopNest code,
one thread), as log(after / before) clipped to [-1, 1] (LoopTune uses the GFLOP/s change;
the log makes it scale-free across shapes and bounds a noisy measurement); an episode is
`horizon` steps (LoopTune's agent takes about ten).
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

from compilerkit.tune.nest import DIMS, Measurer, Schedule

SPLITS = (2, 4, 8, 16)
ACTIONS = ("up", "down", "swap_up", "swap_down") + tuple(f"split_{f}" for f in SPLITS)
MIN_TILE = 8
BINS = 16
ROW = 1 + 3 + 1 + 1 + 1 + 1 + BINS
ROWS = 6


def step_schedule(schedule: Schedule, cursor: int, action: int) -> tuple[Schedule, int]:
    """(schedule, cursor) after `action` (an index into ACTIONS): the transition itself."""
    order, tiles = list(schedule.order), list(schedule.tiles)
    name = ACTIONS[action]
    if name == "up":
        cursor = max(0, cursor - 1)
    elif name == "down":
        cursor = min(2, cursor + 1)
    elif name == "swap_up" and cursor > 0:
        order[cursor - 1], order[cursor] = order[cursor], order[cursor - 1]
        cursor -= 1
    elif name == "swap_down" and cursor < 2:
        order[cursor + 1], order[cursor] = order[cursor], order[cursor + 1]
        cursor += 1
    elif name.startswith("split_"):
        d = order[cursor]
        t = -(-tiles[d] // int(name[6:]))
        if t >= MIN_TILE:
            tiles[d] = t
    return Schedule(tuple(order), tuple(tiles)), cursor


def access_strides(strides, d: int) -> tuple[int, int, int]:
    """Elements that A, B and C move when dim `d` steps by one: A[i*sa_r + k*sa_k],
    B[k*ldb + j], C[i*ldc + j]."""
    sa_r, sa_k, ldb, ldc = strides
    return ((sa_r, 0, ldc), (0, 1, 1), (sa_k, ldb, 0))[d]


def observe(sizes, strides, schedule: Schedule, cursor: int) -> np.ndarray:
    """The (ROWS, ROW) feature matrix described in the module docstring."""
    obs = np.zeros((ROWS, ROW), np.float32)
    loops = [(d, False) for d in schedule.order] + [(d, True) for d in range(3)]
    for r, (d, kernel) in enumerate(loops):
        size, tile = sizes[d], schedule.tiles[d]
        trips = tile if kernel else -(-size // tile)
        step = 1 if kernel else tile
        row = obs[r]
        row[0] = float(r == cursor and not kernel)
        row[1 + d] = 1.0
        row[4] = float(kernel)
        row[5] = math.log2(trips) / 12
        row[6] = math.log2(step) / 12
        row[7] = float(size % tile != 0)
        for s in access_strides(strides, d):
            s *= step
            b = 0 if s == 0 else 1 + min(BINS - 2, int(math.log2(s)))
            row[8 + b] += 1 / 3
    return obs


class LoopTuneEnv(gym.Env):
    """gymnasium environment over `tasks` (Task objects; reset picks one, or options
    {"task": index})."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, tasks, measurer: Measurer | None = None, horizon: int = 10):
        self.tasks = list(tasks)
        self.measurer = measurer or Measurer()
        self.horizon = horizon
        self.action_space = gym.spaces.Discrete(len(ACTIONS))
        self.observation_space = gym.spaces.Box(0.0, np.inf, (ROWS, ROW), np.float32)
        self.task = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        k = (options or {}).get("task")
        self.task = self.tasks[int(self.np_random.integers(len(self.tasks))) if k is None
                               else k]
        self.schedule, self.cursor, self.steps = self.task.default(), 0, 0
        self.base = self.gflops = self.measurer.gflops(self.task, self.schedule)
        return self.observation(), self.info()

    def step(self, action):
        before = self.gflops
        self.schedule, self.cursor = step_schedule(self.schedule, self.cursor, int(action))
        self.gflops = self.measurer.gflops(self.task, self.schedule)
        self.steps += 1
        # log of the speed-up of this step, clipped: scale-free across shapes, and one noisy
        # measurement (this machine is shared) cannot blow the Q-values up.
        reward = float(np.clip(np.log(self.gflops / before), -1.0, 1.0))
        return self.observation(), reward, False, self.steps >= self.horizon, self.info()

    def state(self):
        return self.schedule, self.cursor

    def unvisited_best(self, values, visited) -> int:
        """The highest-valued action whose next state is not in `visited` (a greedy policy
        otherwise cycles: up, down, up...); the best action if all are visited."""
        for a in np.argsort(-np.asarray(values)):
            if step_schedule(self.schedule, self.cursor, int(a)) not in visited:
                return int(a)
        return int(np.argmax(values))

    def observation(self) -> np.ndarray:
        return observe(self.task.sizes, self.task.strides, self.schedule, self.cursor)

    def info(self) -> dict:
        return {"gflops": self.gflops, "schedule": self.schedule, "cursor": self.cursor}

    def loop_tree(self) -> list[str]:
        """The tree as indented lines, the cursor marked (for printing and the notebook)."""
        lines = []
        for depth, d in enumerate(self.schedule.order):
            size, tile = self.task.sizes[d], self.schedule.tiles[d]
            mark = "->" if depth == self.cursor else "  "
            lines.append(f"{mark}{'  ' * depth}for {DIMS[d]}_o in 0..{size} step {tile}")
        inner = "x".join(map(str, self.schedule.tiles))
        lines.append(f"  {'  ' * 3}micro-kernel {inner} (i_i, j_i, k_i: 6x16 FMA blocks)")
        return lines

    def render(self):
        return "\n".join(self.loop_tree())

    def kernel_ir(self) -> str:
        return str(self.task.apply(self.schedule))
