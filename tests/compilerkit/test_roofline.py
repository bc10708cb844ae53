"""compilerkit.roofline (a start): the traffic model's FLOPs and bytes per level against
hand-counted cases, and the roofline's max rule, on a made-up machine (no measurement: that
is `roofline_measure.measured_machine()`, cached, and too slow for a test)."""

import math

import pytest

from compilerkit import roofline as rl
from compilerkit.lowering import winograd

# 1 GFLOP/s and 1 GB/s at every level: times are FLOPs or bytes in ns
FLAT = rl.Machine(1e9, {lv: 1e9 for lv in rl.LEVELS})


def test_level_of():
    assert FLAT.level_of(32 * 1024) == "L1"
    assert FLAT.level_of(32 * 1024 + 1) == "L2"
    assert FLAT.level_of(32 * 2 ** 20) == "L3"
    assert FLAT.level_of(32 * 2 ** 20 + 1) == "DRAM"


def test_im2col_traffic_hand_counted():
    """64 -> 64 channels, 56 x 56 'same' 3x3: 2 * 64 * 64 * 9 * 3136 FLOPs; the weights
    (147,456 B) in L2; the column buffer 9 * 64 * 3136 * 4 = 7,225,344 B written and read,
    panel by panel (2 MiB panels: L3)."""
    flops, moved = rl.traffic(rl.Layer(64, 64, (56, 56)), "im2col", FLAT)
    assert flops == 2 * 64 * 64 * 9 * 3136
    assert moved["L2"] == 64 * 64 * 9 * 4
    x_y = 64 * 58 * 58 * 4 + 64 * 3136 * 4  # input (with the halo) and output: L3
    assert moved["L3"] == pytest.approx(x_y + 2 * 9 * 64 * 3136 * 4)


def test_winograd_traffic():
    """F(4,3) on 64@56: 14 x 14 tiles, 36 positions: the products are 2 * 36 * 196 * 64 * 64
    FLOPs, plus the transforms: 2 passes each way of alpha^2 sums of alpha terms per tile
    and channel, 2 * 2 * 6^3 * 196 * 64 each way (zeros counted: an upper bound), together
    fewer than half im2col's; three-stage keeps V and M (36 x
    196 x 128 x 4 B = 3.6 MB, in L3), fused keeps a group's in L2 and reads U once per group."""
    layer = rl.Layer(64, 64, (56, 56))
    flops, three = rl.traffic(layer, "winograd-f4", FLAT)
    gemm = 2 * 36 * 196 * 64 * 64
    assert flops == gemm + 2 * (2 * 2 * 6 ** 3 * 196 * 64)
    assert flops < rl.traffic(layer, "im2col", FLAT)[0] / 2
    vm = 36 * 196 * 128 * 4
    _, fused = rl.traffic(layer, "winograd-f4-fused", FLAT)
    assert three["L3"] >= 2 * vm and fused["L3"] < three["L3"]
    group = max(winograd.FUSED_BYTES // (14 * 36 * 128 * 4), 1) * 14
    group = max(group, winograd.MIN_GROUP_TILES)
    assert fused["L2"] >= math.ceil(196 / group) * 36 * 64 * 64 * 4  # U, once per group


def test_predict_is_the_highest_roof():
    layer = rl.Layer(32, 32, (28, 28))
    fast_memory = rl.Machine(1e9, {lv: 1e15 for lv in rl.LEVELS})
    flops, _ = rl.traffic(layer, "im2col", fast_memory)
    assert rl.predict(layer, "im2col", fast_memory) == pytest.approx(flops / 1e9)
    slow_dram = rl.Machine(1e15, {"L1": 1e15, "L2": 1e15, "L3": 1e15, "DRAM": 1e6})
    _, moved = rl.traffic(rl.Layer(512, 512, (7, 7)), "winograd-f4", slow_dram)
    assert moved["DRAM"] == 36 * 512 * 512 * 4  # U: 37.7 MB, more than the L3
    assert rl.predict(rl.Layer(512, 512, (7, 7)), "winograd-f4", slow_dram) == pytest.approx(
        moved["DRAM"] / 1e6)


def test_weight_bound_layers_keep_im2col():
    """512 channels at 7 x 7: F(4,3)'s transformed weights (4x the weights) outweigh its
    FLOP savings when DRAM is slow, as measured (benchmarks/winograd_bench.py)."""
    m = rl.Machine(75e9, {"L1": 90e9, "L2": 80e9, "L3": 13e9, "DRAM": 4.5e9})
    layer = rl.Layer(512, 512, (7, 7))
    assert rl.best_algorithm(layer, m, ["im2col", "winograd-f4", "winograd-f6"]) == "im2col"
    assert rl.best_algorithm(rl.Layer(64, 64, (56, 56)), m, ["im2col", "winograd-f4"]) == \
        "winograd-f4"


def test_unknown_algorithm():
    with pytest.raises(ValueError, match="no traffic model"):
        rl.traffic(rl.Layer(8, 8, (8, 8)), "direct", FLAT)


def test_fft_traffic_hand_counted():
    """FFT, 16-point tiles, 5^3 kernel, 16 -> 16 channels, 32^3 'same': m = 12, so 3 tiles per
    axis (27), P = 16 * 16 * 9 = 2304 complex positions; the products are 8 P T C K FLOPs
    (a complex multiply-add is 8), U is P x 2C x 2K f32 = 9.4 MB (L3), V and M are
    2 x P x 2(C + K) x 4 B per tile, written and read; the butterflies (radix-2: 5 n log2 n
    per complex line, half on the real axis) go at transform_flops, after the roofs."""
    layer = rl.Layer(16, 16, (32, 32, 32), 5)
    flops, moved = rl.traffic(layer, "fft-t16", FLAT)
    assert flops == 8 * 2304 * 27 * 16 * 16
    per_tile = 16 * 16 * 5 * 16 * 4 * (0.5 + 1 + 1)  # 256 lines per axis
    assert moved["transform_flops"] == pytest.approx(per_tile * 27 * 32)
    vm = 2 * 27 * 2304 * 2 * 32 * 4
    u = 2304 * 32 * 32 * 4
    assert vm < 32 * 2 ** 20 and moved["DRAM"] == 0  # V and M: 31.9 MB, just in the L3
    assert moved["L3"] == pytest.approx(vm + u + 16 * 36 ** 3 * 4 + 16 * 32 ** 3 * 4)
    slow_butterflies = rl.Machine(1e9, {lv: 1e15 for lv in rl.LEVELS}, transform_flops=1e6)
    assert rl.predict(layer, "fft-t16", slow_butterflies) == pytest.approx(
        flops / 1e9 + per_tile * 27 * 32 / 1e6)
