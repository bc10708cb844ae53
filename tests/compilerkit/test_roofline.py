"""compilerkit.roofline: the stages' FLOPs and bytes per level against hand-counted cases, the
per-stage roofline summed, on made-up machines (no measurement: that is
`measure.machine.measured_machine()`, cached, and too slow for a test)."""

import math

import pytest

from compilerkit import conv_tiles
from compilerkit import roofline as rl

# 1 GFLOP/s and 1 GB/s at every level and for the transforms: times are FLOPs or bytes in ns
FLAT = rl.Machine(1e9, {lv: 1e9 for lv in rl.LEVELS}, transform_flops=1e9, winograd_flops=1e9)


def by_name(layer, algorithm, m=FLAT):
    return {st.name: st for st in rl.stages(layer, algorithm, m)}


def test_level_of():
    assert FLAT.level_of(32 * 1024) == "L1"
    assert FLAT.level_of(32 * 1024 + 1) == "L2"
    assert FLAT.level_of(32 * 2 ** 20) == "L3"
    assert FLAT.level_of(32 * 2 ** 20 + 1) == "DRAM"


def test_gemm_efficiency_hand_worked():
    """8 columns fill half of a 16-wide strip; depth 4 spends as long on the accumulators as
    on the FMAs; 16 rows against ROW_OVERHEAD = 16 rows of panel traffic: half again."""
    assert rl.gemm_efficiency(16, 10 ** 9) == pytest.approx(1.0)
    assert rl.gemm_efficiency(8, 4) == pytest.approx(0.5 * 0.5)
    assert rl.gemm_efficiency(24, 4) == pytest.approx(24 / 32 * 0.5)
    assert rl.gemm_efficiency(16, 4, rows=16) == pytest.approx(0.5 * 0.5)
    # AVX-512's micro-kernel is 32 columns wide: 16 columns idle half its lanes, 40 take two
    # strips of which 24 lanes idle
    assert rl.gemm_efficiency(16, 10 ** 9, nr=32) == pytest.approx(0.5)
    assert rl.gemm_efficiency(40, 10 ** 9, nr=32) == pytest.approx(40 / 64)


def test_stages_take_the_machines_vector_width():
    """The products of 16 output channels fill AVX2's 16-column strip (U then in strips it
    reads unpacked), half of AVX-512's 32 (U read whole, packed)."""
    wide = rl.Machine(**{**FLAT.__dict__, "lanes": 16})
    layer = rl.Layer(16, 16, (28, 28))  # F(4,3): 7 x 7 = 49 tiles, depth 16
    narrow_eff = by_name(layer, "winograd-f4")["winograd products"].efficiency
    wide_eff = by_name(layer, "winograd-f4", wide)["winograd products"].efficiency
    depth = 16 / (16 + rl.DEPTH_OVERHEAD)
    assert narrow_eff == pytest.approx(depth * 49 / (49 + rl.ROW_OVERHEAD_UNPACKED))
    assert wide_eff == pytest.approx(0.5 * depth * 49 / (49 + rl.ROW_OVERHEAD))


def test_im2col_stages_hand_counted():
    """64 -> 64 channels, 56 x 56 'same' 3x3. Input with its halo x = 64 * 58^2 * 4 =
    861,184 B, output y = 64 * 3136 * 4 = 802,816 B, column buffer 9 * 64 * 3136 * 4 =
    7,225,344 B in 2 MiB panels (L3; 4 panels). Gather: x copied (2x, L3), each column value
    read from the copy (col bytes, x's level: L3) and written (col, L3). GEMM: 2 * 64 * 576 *
    3136 FLOPs, the columns read (L3), the 147,456 B of weights once per panel (L2), the
    output panel written 4 times (bias, product, activation: L3)."""
    x, y, col = 861_184, 802_816, 7_225_344
    st = by_name(rl.Layer(64, 64, (56, 56)), "im2col")
    assert st["im2col"].flops == 0
    assert st["im2col"].moved["L3"] == 2 * x + 2 * col
    gemm = st["gemm"]
    assert gemm.flops == 2 * 64 * 576 * 3136
    assert gemm.moved["L2"] == 4 * 147_456
    assert gemm.moved["L3"] == col + 4 * y
    # panel of 2 MiB // ((576 + 64) * 4) = 819 columns: 819 / 832 lanes; depth 576
    assert gemm.efficiency == pytest.approx(819 / 832 * 576 / 580)
    assert rl.predict(rl.Layer(64, 64, (56, 56)), "im2col", FLAT) == pytest.approx(
        (2 * x + 2 * col) / 1e9 + max(gemm.flops / (1e9 * gemm.efficiency),
                                      (col + 4 * y) / 1e9))


def test_winograd_transform_flops_from_the_published_matrices():
    """Lavin & Gray's F(4,3): B^T has 22 non-zero entries, A^T 18 (the same zero pattern
    wincnn gives). 2-D input transform: 2 passes x 6 lines x 22 terms x 2 FLOPs = 528 per
    tile and channel; output: 6 lines x 18 x 2, then 4 lines x 18 x 2 = 360."""
    assert rl._winograd_transform_flops(4, 3, 2) == (528.0, 360.0)
    # F(2,3): B^T 8, A^T 6 non-zeros; 3-D: 3 passes of 16 lines in, 16 + 8 + 4 lines out
    assert rl._winograd_transform_flops(2, 3, 3) == (3 * 16 * 8 * 2.0, (16 + 8 + 4) * 6 * 2.0)


def test_winograd_three_stage_and_fused_hand_counted():
    """F(4,3) on 64@56: 14 x 14 = 196 tiles, 36 positions; V and M are 196 x 36 x (64 + 64)
    x 4 B = 3.6 MB (L3) in three-stage; 64 columns are whole strips of FLAT's 16, so the
    products read U unpacked. Fused: one row of 14 tiles (14 x 18,432 B) fits
    FUSED_BYTES, two do not, and 14 is fewer than MIN_GROUP_TILES = 24: groups of two whole
    tile rows (the lowering's, as lower_conv_winograd.mlir checks), 28 tiles, 516,096 B (L2),
    7 groups, each reading U (36 x 64 x 64 x 4 = 589,824 B, L3)."""
    layer = rl.Layer(64, 64, (56, 56))
    three, fused = by_name(layer, "winograd-f4"), by_name(layer, "winograd-f4-fused")
    v = m = 196 * 36 * 64 * 4
    u = 589_824
    assert conv_tiles.MIN_GROUP_TILES == 24
    assert 14 * 18_432 <= conv_tiles.FUSED_BYTES < 28 * 18_432
    for st in (three, fused):
        assert st["winograd products"].flops == 2 * 36 * 196 * 64 * 64
        assert st["winograd input"].flops == 528 * 196 * 64
        assert st["winograd output"].flops == 360 * 196 * 64
        assert st["winograd products"].efficiency == pytest.approx(
            64 / (64 + rl.DEPTH_OVERHEAD) * 196 / (196 + rl.ROW_OVERHEAD_UNPACKED))
    assert three["winograd products"].moved["L3"] == v + 3 * m + u
    assert fused["winograd products"].moved["L2"] == v + 3 * m
    assert fused["winograd products"].moved["L3"] == 7 * u
    assert fused["winograd products"].groups == 7 and three["winograd products"].groups == 1
    assert three["winograd output"].moved["L3"] == m + 802_816
    assert fused["winograd output"].moved["L2"] == m
    # everything else equal, fused is never predicted slower: V and M move through the L2
    slow_l3 = rl.Machine(1e12, {"L1": 1e12, "L2": 1e12, "L3": 1e9, "DRAM": 1e9})
    assert rl.predict(layer, "winograd-f4-fused", slow_l3) < rl.predict(layer, "winograd-f4",
                                                                         slow_l3)


def test_products_on_strips_pay_the_smaller_row_overhead():
    """U is stored in strips of the kernel's width (two vectors) when K is whole strips: then
    ROW_OVERHEAD_UNPACKED, else ROW_OVERHEAD (packed)."""
    wide = rl.Machine(**{**FLAT.__dict__, "lanes": 16})
    tiles = 196  # 64@56 under F(4,3)

    def eff(c, k, m):
        return by_name(rl.Layer(c, k, (56, 56)), "winograd-f4", m)["winograd products"].efficiency
    depth = 64 / (64 + rl.DEPTH_OVERHEAD)
    for m in (wide, FLAT):
        assert eff(64, 64, m) == pytest.approx(
            depth * tiles / (tiles + rl.ROW_OVERHEAD_UNPACKED))
    assert eff(64, 48, wide) == pytest.approx(  # 48 columns: two strips, 16 lanes idle
        48 / 64 * depth * tiles / (tiles + rl.ROW_OVERHEAD))
    assert eff(64, 40, FLAT) == pytest.approx(  # 40 columns: three strips of 16
        40 / 48 * depth * tiles / (tiles + rl.ROW_OVERHEAD))


def test_distinct_drops_a_fused_name_with_one_group():
    """256@14 under F(4,3): 4 tile rows of 4 tiles, a row's V and M (4 x 36 x 512 x 4 B)
    exceed FUSED_BYTES, so a group takes MIN_GROUP_TILES' worth, 6 rows: all 4, one group,
    the three-stage program. 64@56 makes 7 groups and stays; so does a fused name whose
    three-stage twin is not listed."""
    names = ["im2col", "winograd-f4", "winograd-f4-fused"]
    assert rl.distinct(rl.Layer(256, 256, (14, 14)), names) == names[:2]
    assert rl.distinct(rl.Layer(64, 64, (56, 56)), names) == names
    assert rl.distinct(rl.Layer(256, 256, (14, 14)), ["winograd-f4-fused"]) == [
        "winograd-f4-fused"]


def test_predict_sums_the_stages_roofs():
    layer = rl.Layer(32, 32, (28, 28))
    fast_memory = rl.Machine(1e9, {lv: 1e15 for lv in rl.LEVELS}, transform_flops=1e9,
                             winograd_flops=1e9)
    want = sum(st.flops / (1e9 * (st.efficiency if st.rate == "gemm" else 1.0))
               for st in rl.stages(layer, "winograd-f2", fast_memory))
    assert rl.predict(layer, "winograd-f2", fast_memory) == pytest.approx(want)
    slow_dram = rl.Machine(1e15, {"L1": 1e15, "L2": 1e15, "L3": 1e15, "DRAM": 1e6},
                           transform_flops=1e15, winograd_flops=1e15)
    big = rl.Layer(512, 512, (7, 7))
    st = by_name(big, "winograd-f4", slow_dram)
    assert st["winograd products"].moved["DRAM"] == 36 * 512 * 512 * 4  # U: 37.7 MB > L3
    assert rl.predict(big, "winograd-f4", slow_dram) == pytest.approx(
        36 * 512 * 512 * 4 / 1e6, rel=1e-6)


def test_weight_bound_layers_keep_im2col():
    """512 channels at 7 x 7: F(4,3)'s transformed weights (4x the weights) outweigh its
    FLOP savings when DRAM is slow, as measured (benchmarks/winograd_bench.py)."""
    m = rl.Machine(75e9, {"L1": 90e9, "L2": 80e9, "L3": 13e9, "DRAM": 4.5e9})
    layer = rl.Layer(512, 512, (7, 7))
    assert rl.best_algorithm(layer, m, ["im2col", "winograd-f4", "winograd-f6"]) == "im2col"
    assert rl.best_algorithm(rl.Layer(64, 64, (56, 56)), m, ["im2col", "winograd-f4"]) == \
        "winograd-f4"


def test_ties_go_to_the_fused_schedule():
    """Where V and M fit the L2 either way, three-stage and fused are predicted alike; the
    fused schedule is picked (it never moves more data, nor farther)."""
    layer = rl.Layer(8, 8, (8, 8))
    algos = ["winograd-f2", "winograd-f2-fused"]
    assert rl.predict(layer, algos[0], FLAT) == rl.predict(layer, algos[1], FLAT)
    assert rl.best_algorithm(layer, FLAT, algos) == "winograd-f2-fused"


def test_unknown_algorithm():
    with pytest.raises(ValueError, match="no traffic model"):
        rl.stages(rl.Layer(8, 8, (8, 8)), "direct", FLAT)


def test_fft_stages_hand_counted():
    """FFT, 16-point tiles, 5^3 kernel, 16 -> 16 channels, 32^3 'same': m = 12, so 3 tiles per
    axis (27), P = 16 * 16 * 9 = 2304 complex positions; the products are 8 P T C K FLOPs
    (a complex multiply-add is 8) on a GEMM of 2K = 32 columns and depth 2C = 32; U is P x 2C
    x 2K f32 = 9.4 MB (L3); V and M are P x 2C (2K) x 4 B per tile, 15.9 MB each: together
    31.9 MB, just in the L3. The butterflies (radix-2: 5 n log2 n per complex line, half on
    the real axis) split between the forward (C) and inverse (K) transforms."""
    layer = rl.Layer(16, 16, (32, 32, 32), 5)
    st = by_name(layer, "fft-t16")
    per_tile = 16 * 16 * 5 * 16 * 4 * (0.5 + 1 + 1)  # 256 lines per axis
    assert st["fft products"].flops == 8 * 2304 * 27 * 16 * 16
    assert st["fft input"].flops == pytest.approx(per_tile * 27 * 16)
    assert st["fft output"].flops == pytest.approx(per_tile * 27 * 16)
    v = m = 27 * 2304 * 2 * 16 * 4
    u = 2304 * 32 * 32 * 4
    assert v + m < 32 * 2 ** 20
    assert st["fft products"].moved["L3"] == pytest.approx(v + 3 * m + u)
    assert st["fft products"].moved["DRAM"] == 0
    # 2K = 32 columns are whole strips of FLAT's 16: U unpacked
    assert st["fft products"].efficiency == pytest.approx(
        32 / 36 * 27 / (27 + rl.ROW_OVERHEAD_UNPACKED))
    x = 16 * 36 ** 3 * 4
    assert st["fft input"].moved["L3"] == pytest.approx(3 * x + (16 / 12) ** 3 * x + v)


def test_cache_from_before_calibration_keeps_the_default_rates(tmp_path, monkeypatch):
    """A cache without calibrated transform rates (an older compilerkit wrote it) gives its
    peak and bandwidths with the model's default rates, whatever rates it holds."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    old = rl.Machine(5e10, {lv: 1e10 for lv in rl.LEVELS}, transform_flops=1.0,
                     winograd_flops=2.0)
    rl.save(old)
    got = rl.machine()
    assert got.peak_flops == 5e10 and got.bandwidth == old.bandwidth
    assert got.transform_flops == rl.Machine.transform_flops
    assert got.winograd_flops == rl.Machine.winograd_flops
    assert not got.transforms_measured
    assert math.isfinite(rl.predict(rl.Layer(8, 8, (8, 8)), "fft", got))


def test_calibrated_cache_keeps_its_rates_and_width(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    new = rl.Machine(5e10, {lv: 1e10 for lv in rl.LEVELS}, transform_flops=3e10,
                     winograd_flops=2e10, lanes=16, transforms_measured=True)
    rl.save(new)
    assert rl.machine() == new


def test_fit_recovers_the_rates_that_made_the_times():
    """Times predicted by a machine with known transform rates: the fit, starting from other
    rates, finds them again (to the grid's 5%), each from its own algorithm's layers."""
    from compilerkit.measure import machine as rm

    true = rl.Machine(1e11, {"L1": 1.5e11, "L2": 1e11, "L3": 6e10, "DRAM": 2.5e10},
                      transform_flops=5e10, winograd_flops=2.2e10, lanes=16)
    start = rl.Machine(**{**true.__dict__, "transform_flops": 1e10, "winograd_flops": 9e10})
    measured = [(name, algo, rl.Layer(c, k, (hw,) * rank, ks),
                 rl.predict(rl.Layer(c, k, (hw,) * rank, ks), algo, true))
                for name, (algo, specs) in rm.CALIBRATION.items()
                for c, k, hw, rank, ks in specs]
    rates = rm.fit_transform_rates(start, measured)
    assert rates["transform_flops"] == pytest.approx(5e10, rel=0.05)
    assert rates["winograd_flops"] == pytest.approx(2.2e10, rel=0.05)
    # a rate above the peak is not offered: times the transforms would need 1e13 FLOP/s for
    capped = rm.fit_transform_rates(start, [(n, a, layer, t / 100) for n, a, layer, t
                                            in measured])
    assert max(capped.values()) <= start.peak_flops


def test_cache_sizes_come_from_sysfs(tmp_path):
    """A hand-made sysfs tree: the data and unified caches give L1, L2 and L3 (instruction
    caches and unreadable entries are skipped); a level it lacks keeps CACHES' size."""
    for k, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "1024K"), (3, "Unified", "96M")]):
        d = tmp_path / f"index{k}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    (tmp_path / "index9").mkdir()  # no files: skipped
    assert rl.detect_caches(str(tmp_path)) == {"L1": 48 * 1024, "L2": 1024 * 1024,
                                               "L3": 96 * 1024 * 1024}
    (tmp_path / "index3" / "size").write_text("garbage\n")
    assert rl.detect_caches(str(tmp_path))["L3"] == rl.CACHES["L3"]
    assert rl.detect_caches(str(tmp_path / "missing")) == rl.CACHES


def test_calibration_compiles_and_times_its_layers(monkeypatch):
    """calibrate_transforms on one small layer per rate (the real list takes seconds): both
    rates come from the grid, at most the peak, and the machine says they were measured."""
    from compilerkit.measure import machine as rm

    monkeypatch.setattr(rm, "CALIBRATION", {
        "winograd_flops": ("winograd-f4", [(8, 8, 12, 2, 3)]),
        "transform_flops": ("fft", [(8, 8, 12, 2, 5)])})
    base = rl.Machine(1e11, {"L1": 1.5e11, "L2": 1e11, "L3": 6e10, "DRAM": 2.5e10}, lanes=16)
    got = rm.calibrate_transforms(base, repeat=2)
    assert got.transforms_measured and got.peak_flops == base.peak_flops
    for name in ("winograd_flops", "transform_flops"):
        assert getattr(got, name) in rm.RATE_GRID and getattr(got, name) <= base.peak_flops
