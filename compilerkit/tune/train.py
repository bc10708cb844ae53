"""Train LoopTune's policy and ship it beside this module (policy.npz):

    python -m compilerkit.tune.train [--minutes 8] [--shapes 24] [--out PATH]

DQN (dqn.py) on LoopTuneEnv over the training shapes (shapes.py: matmuls and Conv layers as
matrix products); rewards are measured GFLOP/s of LoopNest-compiled code at one thread, so
run it on an otherwise quiet machine (numbers under load are noisier, not wrong). Prints the
per-episode speed-up curve and saves the network with the training settings.
"""

from __future__ import annotations

import argparse
import os
import time


def main(argv=None) -> None:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    from compilerkit.tune.dqn import POLICY, train
    from compilerkit.tune.env import LoopTuneEnv
    from compilerkit.tune.nest import Measurer
    from compilerkit.tune.shapes import training_tasks

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=8.0)
    p.add_argument("--episodes", type=int, default=100000)
    p.add_argument("--shapes", type=int, default=24)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=POLICY)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    env = LoopTuneEnv(training_tasks(args.shapes, args.seed), Measurer())
    q, curve = train(env, minutes=args.minutes, episodes=args.episodes, seed=args.seed)
    seconds = time.perf_counter() - t0
    q.save(args.out, episodes=len(curve), seconds=seconds, shapes=args.shapes, seed=args.seed,
           command=f"python -m compilerkit.tune.train --minutes {args.minutes} "
                   f"--shapes {args.shapes} --seed {args.seed}",
           curve=curve)
    n = max(1, len(curve) // 10)
    print(f"{len(curve)} episodes in {seconds:.0f} s ({env.measurer.compiles} schedules "
          f"measured); best-in-episode speed-up, first and last {n}: "
          f"{sum(curve[:n]) / n:.2f}x -> {sum(curve[-n:]) / n:.2f}x; saved {args.out}")


if __name__ == "__main__":
    main()
