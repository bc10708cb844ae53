"""LoopTune over Kernel IR (Dagli et al.): reinforcement-learned loop schedules for matrix
products, measured with the LoopNest-style code generator (compilerkit/loopnest).

    r = compilerkit.tune.tune_matmul(512, 512, 512, agent="policy")
    r.gflops, r.tune_seconds, r.actions, r.schedule, r.kernel_ir

Modules: nest (Task: a nest's Kernel IR; Schedule written with krnl.block/permute/drop;
Measurer: LoopNest-compiled GFLOP/s, cached), env (the gymnasium.Env: loop tree, features,
actions), agents (random, greedy, beam; the policy's rollout and its 3 s search), dqn (the
numpy DQN and the shipped policy.npz), shapes (training and held-out shapes), train
(`python -m compilerkit.tune.train`), api (tune_matmul, tune_task), passes
(`schedule="tuned"`: each matmul nest scheduled by the policy, cached by shape; importing
compilerkit.tune registers it with the pipeline).
"""

from compilerkit.pipeline import NAMED_SCHEDULES
from compilerkit.tune.api import TuneResult, tune_matmul, tune_task
from compilerkit.tune.env import ACTIONS, LoopTuneEnv
from compilerkit.tune.nest import Measurer, Schedule, Task
from compilerkit.tune.passes import tuned_passes

NAMED_SCHEDULES["tuned"] = tuned_passes  # compile_to(..., schedule="tuned")

__all__ = ["tune_matmul", "tune_task", "TuneResult", "LoopTuneEnv", "ACTIONS", "Measurer",
           "Schedule", "Task"]
