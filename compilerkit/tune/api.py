"""`tune_matmul(M, N, K, agent=...)`: one nest tuned by one agent, as a TuneResult.

Agents: "policy" (the shipped DQN: its greedy rollout of ten measured steps, then its best few
moves per state measured until `budget_s`, 3 s by default, the fastest few re-timed side by
side: agents.policy_search; options `top_k`, `width`, `depth`, `horizon`, `finalists`;
`search=False` gives the plain rollout, LoopTune's inference, about 0.3 s), "greedy", "beam",
"random" (searches bounded by `budget_s`). The measurer (and its cache) can be passed in so
several agents share measurements of one shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compilerkit.tune import agents as _agents
from compilerkit.tune.nest import Measurer, Schedule, Task

AGENTS = ("policy", "greedy", "beam", "random")
_POLICY = {}


@dataclass
class TuneResult:
    task: str
    agent: str
    gflops: float
    default_gflops: float
    tune_seconds: float
    actions: list
    schedule: Schedule
    kernel_ir: str
    trajectory: list = field(default_factory=list)

    @property
    def speedup(self) -> float:
        return self.gflops / self.default_gflops

    def __repr__(self):
        return (f"TuneResult({self.task}, {self.agent}: {self.gflops:.1f} GFLOP/s, "
                f"{self.speedup:.2f}x over the default, {self.tune_seconds:.2f} s, "
                f"{len(self.actions)} actions, {self.schedule.describe()})")


def policy():
    if "q" not in _POLICY:
        from compilerkit.tune.dqn import QNet

        _POLICY["q"] = QNet.load()
    return _POLICY["q"]


def tune_task(task: Task, agent: str = "policy", budget_s: float = 3.0,
              measurer: Measurer | None = None, **options) -> TuneResult:
    if agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r}; choose one of {AGENTS}")
    measurer = measurer or Measurer()
    clock = _agents.clock_of(measurer)
    t = clock()
    if agent == "policy" and options.pop("search", True):
        s = _agents.policy_search(task, measurer, policy(), budget_s, **options)
    elif agent == "policy":
        s = _agents.policy_rollout(task, measurer, policy(), **options)
    elif agent == "greedy":
        s = _agents.greedy_search(task, measurer, budget_s, **options)
    elif agent == "beam":
        s = _agents.beam_search(task, measurer, budget_s, **options)
    else:
        s = _agents.random_search(task, measurer, budget_s, **options)
    seconds = clock() - t
    return TuneResult(task.name, agent, s.gflops, measurer.gflops(task, task.default()),
                      seconds, s.actions, s.schedule, str(task.apply(s.schedule)), s.trajectory)


def tune_matmul(m: int, n: int, k: int, agent: str = "policy", budget_s: float = 3.0,
                measurer: Measurer | None = None, **options) -> TuneResult:
    """Tune the M x N x K matrix product's nest; see TuneResult."""
    return tune_task(Task.matmul(m, n, k), agent, budget_s, measurer, **options)
