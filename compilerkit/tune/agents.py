"""Agents that pick LoopTune actions for one task: random, greedy and beam search (the paper's
baselines), the learned policy's greedy rollout (the paper's inference) and the policy-guided
search that `agent="policy"` runs (the rollout, then the Q-network's best few moves measured
until the tuning budget is spent). Each returns a `Search` record: the best schedule it
measured, its GFLOP/s, the actions that lead there from the default, the trajectory
(action, GFLOP/s) and its wall seconds.

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


def clock_of(measurer):
    """The measurer's clock (`Measurer.clock`, time.perf_counter): the budgets run on it, so
    a stand-in measurer can test them on a simulated clock, without timing noise."""
    return getattr(measurer, "clock", time.perf_counter)


def _start(task, measurer):
    s = task.default()
    return s, 0, measurer.gflops(task, s)


def random_search(task: Task, measurer: Measurer, budget_s: float = 60.0, horizon: int = 10,
                  seed: int = 0) -> Search:
    """Random episodes of `horizon` actions from the default, until the budget is spent."""
    rng = np.random.default_rng(seed)
    clock = clock_of(measurer)
    t0 = clock()
    s0, c0, g0 = _start(task, measurer)
    best = (g0, s0, [])
    traj = [("start", g0)]
    n = 0
    while clock() - t0 < budget_s:
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
            if clock() - t0 >= budget_s:
                break
    return Search("random", best[1], best[0], best[2], clock() - t0, traj, n)


def greedy_search(task: Task, measurer: Measurer, budget_s: float = 60.0,
                  horizon: int = 30) -> Search:
    """Each step measures every action's next state and takes the best; cursor moves (which
    change no code) are taken when they lead to a better swap or split. Stops when no state
    two actions away is better, or the budget is spent."""
    clock = clock_of(measurer)
    t0 = clock()
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
        if g1 <= g or clock() - t0 > budget_s:
            break
        s, c, g = s1, c1, g1
        path += [ACTIONS[a] for a in acts]
        traj.append((ACTIONS[acts[-1]], g))
    return Search("greedy", s, g, path, clock() - t0, traj)


def beam_search(task: Task, measurer: Measurer, budget_s: float = 60.0, width: int = 4,
                depth: int = 10) -> Search:
    """Keeps the `width` best (schedule, cursor) states per depth; expands every action."""
    clock = clock_of(measurer)
    t0 = clock()
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
                if clock() - t0 > budget_s:
                    break
        if not nxt:
            break
        nxt.sort(key=lambda x: -x[0])
        beam = nxt[:width]
        if beam[0][0] > best[0]:
            best = beam[0]
            traj.append((best[3][-1], best[0]))
        if clock() - t0 > budget_s:
            break
    return Search("beam", best[1], best[0], best[3], clock() - t0, traj)


def policy_rollout(task: Task, measurer: Measurer, q, horizon: int = 10,
                   lookahead: int = 1) -> Search:
    """The learned policy's plain rollout (LoopTune's inference; `tune_task(..., "policy",
    search=False)`): `horizon` greedy steps on its Q-values (`q(obs) -> values`), measuring
    each state it reaches; returns the best of them. `policy_search` starts with it. With
    `lookahead` k > 1 each step measures the states of the policy's k best unvisited moves and
    takes the fastest (k times the measurements; a search the policy prunes)."""
    clock = clock_of(measurer)
    t0 = clock()
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
    return Search("policy", best[1], best[0], best[2], clock() - t0, traj)


def _replay(task: Task, actions) -> tuple[Schedule, int]:
    s, c = task.default(), 0
    for name in actions:
        s, c = step_schedule(s, c, ACTIONS.index(name))
    return s, c


def _ranked(task: Task, q, s: Schedule, c: int) -> np.ndarray:
    """The actions from (s, c), the Q-network's best first."""
    return np.argsort(-np.asarray(q(observe(task.sizes, task.strides, s, c)), np.float64),
                      kind="stable")


def policy_search(task: Task, measurer: Measurer, q, budget_s: float = 3.0, horizon: int = 10,
                  top_k: int = 3, width: int = 4, depth: int = 10, finalists: int = 6,
                  retime_s: float = 0.25) -> Search:
    """What `agent="policy"` runs: the learned policy spending the tuning budget on measuring
    its own best moves (LoopTune's inference is the rollout alone, about 0.3 s of a 3 s budget;
    the Q-network ranks moves well but its single greedy path misses on some shapes).

    1. `policy_rollout` (`horizon` greedy steps): its best state is the first candidate (so on
       the same measurer, with `finalists=1`, the search never returns less than the rollout).
    2. A beam from the default (`width` states, `depth` steps) whose expansions are only the
       Q-network's `top_k` best moves to unseen states: the network chooses the moves,
       measurements decide which states are kept.
    3. Hill-climbing from the best state found: each step measures the code-changing moves at
       every cursor position (in the Q-network's order, so a spent budget cuts its worst
       guesses) and takes the fastest, until none is faster; then again from the best measured
       state not climbed from yet, while the budget lasts.
    4. The `finalists` fastest schedules measured are timed again side by side
       (`Measurer.retime`, about `retime_s` seconds of runs) and the fastest there is returned:
       back to back, with warm data, many schedules measure alike near the kernel's peak, and a
       lucky measurement on a shared machine would decide. Its GFLOP/s is its cached
       measurement, as for the other agents. `finalists=1` skips this.

    Stops measuring when one more measurement (taken as twice the slowest so far) and the
    re-timing (a compile per finalist and `retime_s`) would end past `budget_s` seconds (the
    rollout always runs in full). `trajectory` is the rollout's, then each later improvement
    ("beam:<action>", "climb:<action>", and "retimed:<action>" where the re-timing picked
    another schedule)."""
    clock = clock_of(measurer)
    t0 = clock()
    roll = policy_rollout(task, measurer, q, horizon)
    traj = list(roll.trajectory)
    s, c = _replay(task, roll.actions)
    best = [roll.gflops, s, c, list(roll.actions)]
    pool = {}  # schedule -> (GFLOP/s, schedule, cursor, path): every state measured
    slowest = [0.0]  # the longest measurement so far: the next one may take as long

    retime = getattr(measurer, "retime", None) if finalists > 1 else None

    def out_of_time():  # leaves time for one more measurement and the re-timing
        reserve = finalists * slowest[0] + retime_s if retime else 0.0
        return clock() - t0 + 2 * slowest[0] + reserve >= budget_s

    def measure(s1, c1, path, tag):
        t = clock()
        g1 = measurer.gflops(task, s1)
        slowest[0] = max(slowest[0], clock() - t)
        pool.setdefault(s1, (g1, s1, c1, path))
        if g1 > best[0]:
            best[:] = [g1, s1, c1, path]
            traj.append((f"{tag}:{path[-1]}", g1))
        return g1

    s0 = task.default()
    beam = [(measurer.gflops(task, s0), s0, 0, [])]
    seen = {(s0, 0)}
    for _ in range(depth):
        nxt = []
        for _g, s, c, path in beam:
            taken = 0
            for a in _ranked(task, q, s, c):
                if taken == top_k or out_of_time():
                    break
                s1, c1 = step_schedule(s, c, int(a))
                if (s1, c1) in seen:
                    continue
                seen.add((s1, c1))
                taken += 1
                p1 = path + [ACTIONS[a]]
                nxt.append((measure(s1, c1, p1, "beam"), s1, c1, p1))
        if not nxt or out_of_time():
            break
        nxt.sort(key=lambda x: -x[0])  # stable: ties keep the Q-network's order
        beam = nxt[:width]

    climbed = set()
    pool[best[1]] = tuple(best)
    while not out_of_time():  # climb from the best state not climbed from yet
        starts = [e for e in pool.values() if e[1] not in climbed]
        if not starts:
            break
        g, s, c, path = max(starts, key=lambda e: e[0])
        while not out_of_time():
            climbed.add(s)
            moves = []  # (Q-value, cursor moves + action, next state): every cursor position
            for p in range(3):
                pre = ["up"] * (c - p) + ["down"] * (p - c)
                values = q(observe(task.sizes, task.strides, s, p))
                for a in range(2, len(ACTIONS)):
                    s1, c1 = step_schedule(s, p, a)
                    if s1 != s:
                        moves.append((values[a], pre + [ACTIONS[a]], s1, c1))
            moves.sort(key=lambda m: -m[0])
            step = None
            for _v, acts, s1, c1 in moves:
                if out_of_time():
                    break
                g1 = measure(s1, c1, path + acts, "climb")
                if step is None or g1 > step[0]:
                    step = (g1, s1, c1, path + acts)
            if step is None or step[0] <= g:
                break
            g, s, c, path = step
    g, s, c, path = best
    final = sorted(pool.values(), key=lambda e: -e[0])[:finalists]
    if retime and len(final) > 1:
        again = retime(task, [e[1] for e in final], retime_s)
        g, s, c, path = final[int(np.argmax(again))]
        if s != best[1]:
            traj.append((f"retimed:{path[-1] if path else 'start'}", g))
    return Search("policy", s, g, path, clock() - t0, traj, len(pool))
