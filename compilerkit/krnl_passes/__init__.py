"""Passes over Kernel IR: schedules (block, permute, unroll, parallel), matmul tiling, parallel
loops, buffer planning."""

from compilerkit.krnl_passes.parallelize import parallelize
from compilerkit.krnl_passes.plan_buffers import plan_buffers
from compilerkit.krnl_passes.schedule import block, parallel, permute, unroll
from compilerkit.krnl_passes.tile_matmul import matmul_nests, tile_matmul
from compilerkit.krnl_passes.unroll_small import unroll_small

__all__ = ["plan_buffers", "tile_matmul", "matmul_nests", "block", "permute", "unroll",
           "parallel", "parallelize", "unroll_small"]
