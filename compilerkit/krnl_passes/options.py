"""The numeric options of the schedule passes, checked where a pass is made.

A pass instance is made by `python -m compilerkit.opt -p 'tile-matmul{simd=4}'`, by
`compile(model, schedule="...")` (both through passes.parse_pipeline) and by Python code
(`TileMatmulPass(simd=4)`, a schedule list, a target's schedule_passes): each pass's
`__post_init__` calls `check_int` for every numeric option, so all of them refuse the same
values with a ValueError naming the pass and the option. Each option has a range that keeps the
generated code sane (a simd of 10**8 built a kernel of gigabytes; an unroll of 10**9 trips would
copy the body that often); `tile-matmul`'s simd is krnl.check_simd, the rule the verifier applies
to a hand-edited krnl.matmul.
"""

from __future__ import annotations


def check_int(pass_name: str, option: str, value, lo: int, hi: int) -> int:
    """`value` as an int in [lo, hi], else a ValueError naming `pass_name{option=...}`."""
    what = f"{pass_name}{{{option}}}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be a whole number, got {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{what} must be {lo}..{hi}, got {value}")
    return value


def check_simd(pass_name: str, value) -> int:
    from compilerkit.dialects.krnl import check_simd as rule

    return rule(value, f"{pass_name}{{simd}}")


LIMIT = 1 << 62  # a threshold or tile beyond any static shape: index arithmetic stays in i64
UNROLL_CAP = 64  # unroll-small's max_trip: the trips of a loop unrolled whole
