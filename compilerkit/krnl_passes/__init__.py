"""Passes over Kernel IR: schedules (block, permute, unroll), matmul tiling, buffer planning."""

from compilerkit.krnl_passes.buffers import plan_buffers
from compilerkit.krnl_passes.schedule import block, permute, unroll
from compilerkit.krnl_passes.tile_matmul import tile_matmul

__all__ = ["plan_buffers", "tile_matmul", "block", "permute", "unroll"]
