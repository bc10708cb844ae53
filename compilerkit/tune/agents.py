"""Agents that pick LoopTune actions for one task: random search, greedy and beam search (the
paper's baselines) and the learned policy's greedy rollout. Each returns a `Search` record:
the best schedule it measured, its GFLOP/s, the actions that lead there from the default, the
trajectory (action, GFLOP/s) and its wall seconds.

They share the env's transition (`env.step_schedule`) and the Measurer's cache, so a schedule
is compiled and timed once whichever agent reaches it. `budget_s` bounds the searches' wall
time (checked between measurements: one measurement may overrun it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from compilerkit.tune.env import ACTIONS, observe, step_schedule
from compilerkit.tune.nest import Measurer, Schedule, Task


@dataclass
class Search:
    agent: str
    schedule: Schedule
    gflops: float
    actions: list  # action names, default -> best
    seconds: float
    trajectory: list = field(default_factory=list)  # (action name, GFLOP/s) in visit order
    measured: int = 0


def _start(task, measurer):
    s = task.default()
    return s, 0, measurer.gflops(task, s)


def random_search(task: Task, measurer: Measurer, budget_s: float = 60.0, horizon: int = 10,
                  seed: int = 0) -> Search:
    """Random episodes of `horizon` actions from the default, until the budget is spent."""
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    s0, c0, g0 = _start(task, measurer)
    best = (g0, s0, [])
    traj = [("start", g0)]
    n = 0
    while time.perf_counter() - t0 < budget_s:
        s, c, path = s0, c0, []
        for _ in range(horizon):
            a = int(rng.integers(len(ACTIONS)))
            s, c = step_schedule(s, c, a)
            path.append(ACTIONS[a])
            g = measurer.gflops(task, s)
            n += 1
            if g > best[0]:
                best = (g, s, list(path))
                traj.append((ACTIONS[a], g))
            if time.perf_counter() - t0 >= budget_s:
                break
    return Search("random", best[1], best[0], best[2], time.perf_counter() - t0, traj, n)


def greedy_search(task: Task, measurer: Measurer, budget_s: float = 60.0,
                  horizon: int = 30) -> Search:
    """Each step measures every action's next state and takes the best; cursor moves (which
    change no code) are taken when they lead to a better swap or split. Stops when no state
    two actions away is better, or the budget is spent."""
    t0 = time.perf_counter()
    s, c, g = _start(task, measurer)
    path, traj = [], [("start", g)]
    for _ in range(horizon):
        cands = []
        for a in range(len(ACTIONS)):
            s1, c1 = step_schedule(s, c, a)
            cands.append((measurer.gflops(task, s1), [a], s1, c1))
            if ACTIONS[a] in ("up", "down"):  # look one further from a moved cursor
                for b in range(2, len(ACTIONS)):
                    s2, c2 = step_schedule(s1, c1, b)
                    cands.append((measurer.gflops(task, s2), [a, b], s2, c2))
        g1, acts, s1, c1 = max(cands, key=lambda x: x[0])
        if g1 <= g or time.perf_counter() - t0 > budget_s:
            break
        s, c, g = s1, c1, g1
        path += [ACTIONS[a] for a in acts]
        traj.append((ACTIONS[acts[-1]], g))
    return Search("greedy", s, g, path, time.perf_counter() - t0, traj)


def beam_search(task: Task, measurer: Measurer, budget_s: float = 60.0, width: int = 4,
                depth: int = 10) -> Search:
    """Keeps the `width` best (schedule, cursor) states per depth; expands every action."""
    t0 = time.perf_counter()
    s0, c0, g0 = _start(task, measurer)
    beam = [(g0, s0, c0, [])]
    best = beam[0]
    seen = {(s0, c0)}
    traj = [("start", g0)]
    for _ in range(depth):
        nxt = []
        for _g, s, c, path in beam:
            for a in range(len(ACTIONS)):
                s1, c1 = step_schedule(s, c, a)
                if (s1, c1) in seen:
                    continue
                seen.add((s1, c1))
                nxt.append((measurer.gflops(task, s1), s1, c1, path + [ACTIONS[a]]))
                if time.perf_counter() - t0 > budget_s:
                    break
        if not nxt:
            break
        nxt.sort(key=lambda x: -x[0])
        beam = nxt[:width]
        if beam[0][0] > best[0]:
            best = beam[0]
            traj.append((best[3][-1], best[0]))
        if time.perf_counter() - t0 > budget_s:
            break
    return Search("beam", best[1], best[0], best[3], time.perf_counter() - t0, traj)


def policy_rollout(task: Task, measurer: Measurer, q, horizon: int = 10,
                   lookahead: int = 1) -> Search:
    """The learned policy: `horizon` greedy steps on its Q-values (`q(obs) -> values`),
    measuring each state it reaches; returns the best of them (LoopTune's inference). With
    `lookahead` k > 1 each step measures the states of the policy's k best unvisited moves and
    takes the fastest (k times the measurements; a search the policy prunes)."""
    t0 = time.perf_counter()
    s, c, g = _start(task, measurer)
    best = (g, s, [])
    path, traj = [], [("start", g)]
    visited = {(s, c)}
    for _ in range(horizon):
        values = np.asarray(q(observe(task.sizes, task.strides, s, c)), np.float64)
        # A deterministic policy can cycle (up, down, up...): take its best unvisited moves.
        moves = []
        for a in np.argsort(-values):
            nxt = step_schedule(s, c, int(a))
            if nxt not in visited:
                moves.append((int(a), nxt))
                if len(moves) == lookahead:
                    break
        if not moves:
            break
        a, (s, c) = max(moves, key=lambda m: measurer.gflops(task, m[1][0])) \
            if len(moves) > 1 else moves[0]
        visited.add((s, c))
        path.append(ACTIONS[a])
        g = measurer.gflops(task, s)
        traj.append((ACTIONS[a], g))
        if g > best[0]:
            best = (g, s, list(path))
    return Search("policy", best[1], best[0], best[2], time.perf_counter() - t0, traj)
