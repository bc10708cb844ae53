"""`compile_to("native", model, schedule="tuned")` (after `import compilerkit.tune`, which
registers "tuned" in pipeline.NAMED_SCHEDULES): every untiled matmul nest scheduled by the
policy.

`TunedSchedulePass` (`tune-matmul{agent=policy}`) replaces -O3's `tile-matmul`: for each
untiled (i, j, k) nest around a `krnl.matmul` it takes the schedule tuned for that M x N x K
(tuned once per shape per process: `SCHEDULES` caches them by shape and agent) and writes it
with block / permute / drop (nest.write). The tuning measures a plain row-major matmul of the
same sizes with loopnest; a Conv's im2col product has other strides, so its schedule is the one
tuned for its matrix shape (a proxy, not a measurement of the Conv itself). The rest of the
schedule is -O3's: short loops unrolled, outer loops marked parallel where the pass finds it
safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.passes import ModulePass

from compilerkit.dialects import krnl
from compilerkit.krnl_passes.tile_matmul import matmul_nests
from compilerkit.tune.nest import write

SCHEDULES: dict = {}  # (M, N, K, agent) -> Schedule


def tuned_schedule_for(m: int, n: int, k: int, agent: str = "policy"):
    key = (m, n, k, agent)
    if key not in SCHEDULES:
        from compilerkit.tune.api import tune_matmul

        SCHEDULES[key] = tune_matmul(m, n, k, agent=agent).schedule
    return SCHEDULES[key]


def tune_matmuls(module, agent: str = "policy") -> int:
    """Schedules every untiled matmul nest under `module`; returns how many."""
    count = 0
    for it, mm in matmul_nests(module):
        if krnl.ints_of(mm.tile) != [1, 1, 1] or len(it.emitted) != 3:
            continue
        m, n, k = krnl.ints_of(mm.sizes)
        write(it, mm, tuned_schedule_for(m, n, k, agent))
        count += 1
    return count


@dataclass(frozen=True)
class TunedSchedulePass(ModulePass):
    name = "tune-matmul"
    agent: str = "policy"

    def __post_init__(self):
        from compilerkit.tune.api import AGENTS

        if self.agent not in AGENTS:
            raise ValueError(f"tune-matmul{{agent}} must be one of {', '.join(AGENTS)}, got "
                             f"{self.agent!r}")

    def apply(self, ctx, op) -> None:
        tune_matmuls(op, self.agent)


def tuned_passes(target, opt_level: int) -> list:
    """The target's schedule at -O`opt_level` with `tile-matmul` replaced by the tuned one."""
    from compilerkit.krnl_passes.tile_matmul import TileMatmulPass

    passes = [p for p in target.schedule_passes(max(opt_level, 2))
              if not isinstance(p, TileMatmulPass)]
    return [TunedSchedulePass()] + passes
