"""The calibration's fitting on hand-made profiles, and the stored calibration's own checks."""

import json
import time

import pytest
from lmskit_graphs import build

from lmskit.calibrate import (
    fill_unseen,
    fit_cpu,
    fused_chain,
    fused_shares,
    measure_step_overhead,
    steady_step,
)
from lmskit.devices import CALIBRATION, PRESETS
from lmskit.simulate import op_patch_bytes, simulate

G = "gradient_tape/"


# Two matrix products whose FLOPs and bytes are not proportional (the weights' bytes do not grow
# with the batch), so a three-coefficient fit has one answer. On the CPU base roofline
# (100 GFLOP/s, 10 GB/s), at batch B:
#   m1 = x(B,100) @ w1(100,50): 2*B*100*50 = 10^4 B FLOPs, 4*(100B + 5000 + 50B) = 600B + 20000 B
#   m2 = m1(B,50) @ w2(50,200): 2*B*50*200 = 2*10^4 B FLOPs, 4*(50B + 10^4 + 200B) = 1000B + 40000 B
MATMULS = [("x", "Placeholder", [], "forward", ("B", 100)),
           ("w1", "Placeholder", [], "forward", (100, 50)),
           ("m1", "MatMul", ["x", "w1"], "forward", ("B", 50)),
           ("w2", "Placeholder", [], "forward", (50, 200)),
           ("m2", "MatMul", ["m1", "w2"], "forward", ("B", 200))]
A, B_, C = 3.0, 2.0, 5e-6    # the "measured" op: 3 x compute + 2 x memory roofline + 5 us


def _matmul_time(batch, flops_per_b, bytes_per_b, bytes_const):
    return A * flops_per_b * batch / 100e9 + B_ * (bytes_per_b * batch + bytes_const) / 10e9 + C


def _matmul_profile(batch):
    m1 = _matmul_time(batch, 1e4, 600, 20000)
    m2 = _matmul_time(batch, 2e4, 1000, 40000)
    return {"wall_s": m1 + m2, "ops": {"m1": m1, "m2": m2}}


def test_three_coefficients_from_two_batches_by_hand():
    g = build(MATMULS)
    g.cache["label"] = "toy"
    # Batch 4: m1 takes 3 x 0.4 us + 2 x 2.24 us + 5 us = 10.68 us.
    assert _matmul_profile(4)["ops"]["m1"] == pytest.approx(10.68e-6)
    dev = fit_cpu([(g, 4, _matmul_profile(4)), (g, 16, _matmul_profile(16))])
    assert dev.split_factors("MatMul") == pytest.approx((A, B_, C, 0.0), rel=1e-6)
    # Held out at batch 64: m1 3 x 6.4 + 2 x 5.84 + 5 = 35.88 us; m2 3 x 12.8 + 2 x 10.4 + 5 =
    # 64.2 us; one stream, so the step is their sum.
    assert simulate(g, dev, 64).step_time == pytest.approx(35.88e-6 + 64.2e-6, rel=1e-6)


def test_step_overhead_is_taken_off_before_the_ops_share_the_step():
    # The profiles of the two matrix products, but each measured step also spends 40 us
    # outside its ops (the framework's call). A near-empty step measured 45 us of CPU time, of
    # which its ops took 5 us: 40 us per step.
    t0 = measure_step_overhead({"step_s": 45e-6, "wall_s": 1.0, "ops": {"a": 2e-6, "b": 3e-6}})
    assert t0 == pytest.approx(40e-6)
    assert measure_step_overhead({"wall_s": 1e-6, "ops": {"a": 2e-6}}) == 0.0   # never < 0

    def run(batch):
        p = _matmul_profile(batch)
        # The profiler reads every op 10% long: only the split across ops is kept.
        return {"step_s": p["wall_s"] + t0, "wall_s": 1.0,
                "ops": {k: 1.1 * v for k, v in p["ops"].items()}}

    g = build(MATMULS)
    dev = fit_cpu([(g, 4, run(4)), (g, 16, run(16))], t0)
    assert dev.step_overhead_s == pytest.approx(40e-6)
    assert dev.split_factors("MatMul") == pytest.approx((A, B_, C, 0.0), rel=1e-6)
    # Batch 64: the ops' 35.88 + 64.2 us as before, plus the 40 us step overhead.
    sim = simulate(g, dev, 64)
    assert sim.step_time == pytest.approx(35.88e-6 + 64.2e-6 + 40e-6, rel=1e-6)
    assert sim.overhead == pytest.approx(0.0)          # no swapping: no swap overhead
    # Without it the fit spreads the 40 us over the ops in proportion: at batch 4 the ops
    # took 10.68 + 16.2 us (m2: 3 x 0.8 + 2 x 4.4 + 5), so each is read 40 / 26.88 = 1.49x long.
    naive = fit_cpu([(g, 4, run(4)), (g, 16, run(16))])
    assert naive.split_factors("MatMul") != pytest.approx((A, B_, C, 0.0), rel=0.05)


def test_fused_event_split_by_roofline_share():
    # Conv2D + BiasAdd + Relu at batch 2 on the CPU base roofline (100 GFLOP/s, 10 GB/s):
    # conv: 2 x (2*8*8*4 = 512 outputs) x 27 = 27,648 FLOPs: 0.276 us; its bytes
    #   4 x (2*8*8*3 + 108 + 512) = 4,016: 0.402 us -> 0.4016 us.
    # bias, relu: 512 FLOPs (5.1 ns); bytes 4 x (512 + 512) = 4,096: 0.4096 us each.
    g = build([("x", "Placeholder", [], "forward", ("B", 8, 8, 3)),
               ("w", "Placeholder", [], "forward", (3, 3, 3, 4)),
               ("conv", "Conv2D", ["x", "w"], "forward", ("B", 8, 8, 4)),
               ("bias", "BiasAdd", ["conv"], "forward", ("B", 8, 8, 4)),
               ("relu", "Relu", ["bias"], "forward", ("B", 8, 8, 4))])
    shares = fused_shares(g, "relu", "_FusedConv2D", 2)
    total = 0.4016 + 2 * 0.4096
    assert shares == pytest.approx({"conv": 0.4016 / total, "bias": 0.4096 / total,
                                    "relu": 0.4096 / total}, rel=1e-6)
    assert fused_shares(g, "relu", "Relu", 2) == {"relu": 1.0}
    # A chain that is all bookkeeping (no FLOPs, no bytes) is split evenly.
    empty = build([("x", "Placeholder", [], "forward", ("B", 0)),
                   ("w", "Placeholder", [], "forward", (0, 0)),
                   ("m", "MatMul", ["x", "w"], "forward", ("B", 0)),
                   ("r", "Relu", ["m"], "forward", ("B", 0))])
    assert fused_shares(empty, "r", "_FusedMatMul", 2) == {"m": 0.5, "r": 0.5}


# Two convolutions whose patch matrices are not proportional to their FLOPs (the patch bytes
# do not grow with the output channels), at batch B:
#   c1 = conv3x3(x(B,8,8,3)) -> 4 channels: FLOPs 2*(64*4 B)*27 = 13,824 B; patch: 64 B rows of
#        3*3*3 = 27 floats = 6,912 B bytes; bytes 4*(192 B + 108 + 256 B) = 1,792 B + 432
#   c2 = conv3x3(c1) -> 16 channels: FLOPs 2*(64*16 B)*36 = 73,728 B; patch 64 B rows of 36
#        floats = 9,216 B bytes; bytes 4*(256 B + 576 + 1,024 B) = 5,120 B + 2,304
CONVS = [("x", "Placeholder", [], "forward", ("B", 8, 8, 3)),
         ("w1", "Placeholder", [], "forward", (3, 3, 3, 4)),
         ("c1", "Conv2D", ["x", "w1"], "forward", ("B", 8, 8, 4)),
         ("w2", "Placeholder", [], "forward", (3, 3, 4, 16)),
         ("c2", "Conv2D", ["c1", "w2"], "forward", ("B", 8, 8, 16))]
CA, CB, CC, CD = 2.0, 1.5, 3e-6, 4.0   # compute, memory, seconds per op, patch


def _conv_profile(batch):
    def t(flops, nbytes, patch):
        return CA * flops / 100e9 + CB * nbytes / 10e9 + CC + CD * patch / 10e9
    c1 = t(13824 * batch, 1792 * batch + 432, 6912 * batch)
    c2 = t(73728 * batch, 5120 * batch + 2304, 9216 * batch)
    return {"wall_s": c1 + c2, "ops": {"c1": c1, "c2": c2}}


def test_patch_matrix_term_by_hand():
    g = build(CONVS)
    assert op_patch_bytes(g, "c1", 2) == pytest.approx(2 * 6912)
    assert op_patch_bytes(g, "c2", 2) == pytest.approx(2 * 9216)
    assert op_patch_bytes(g, "x", 2) == 0.0                    # not a convolution
    lone = build([("x", "Placeholder", [], "forward", ("B", 8, 8, 3)),
                  ("c", "Conv2D", ["x"], "forward", ("B", 8, 8, 4))])
    assert op_patch_bytes(lone, "c", 2) == 0.0                 # hand-made, no filter input
    dev = fit_cpu([(g, b, _conv_profile(b)) for b in (2, 4, 8)])
    assert dev.split_factors("Conv2D") == pytest.approx((CA, CB, CC, CD), rel=1e-5)
    # Held out at batch 32: c1 = 2 x 4.42368 + 1.5 x 5.7776 + 3 + 4 x 22.1184 = 108.98736 us,
    # c2 = 2 x 23.59296 + 1.5 x 16.6144 + 3 + 4 x 29.4912 = 193.07232 us.
    assert simulate(g, dev, 32).step_time == pytest.approx(108.98736e-6 + 193.07232e-6, rel=1e-5)
    # The patch term carries most of these narrow convolutions' time: dropping it loses half.
    import dataclasses
    three = dataclasses.replace(dev, type_factor=(("Conv2D", dev.split_factors("Conv2D")[:3]),))
    assert simulate(g, three, 32).step_time < 0.5 * simulate(g, dev, 32).step_time


def test_fit_weighs_each_run_by_its_relative_error():
    # Two runs disagree about Relu: a 1 ms step where it takes 2 x roofline and a 1 s step where
    # it takes 4 x. Weighted by 1 / wall, the short run's ops count 1000x more per second of
    # error, so the fit follows it (unweighted, the long run would win).
    rows = [("x", "Placeholder", [], "forward", ("B", 250)),
            ("a", "Relu", ["x"], "forward", ("B", 250))]
    g = build(rows)
    roof = lambda b: 8 * 250 * b / 10e9                # noqa: E731 (bytes dominate FLOPs)
    short = {"wall_s": 1e-3, "ops": {"a": 2 * roof(4)}}
    long = {"wall_s": 1.0, "ops": {"a": 4 * roof(4096)}}
    dev = fit_cpu([(g, 4, short), (g, 4096, long)])
    assert simulate(g, dev, 4).step_time == pytest.approx(1e-3, rel=0.05)


def test_unseen_types_take_their_class_median():
    g = build(MATMULS)
    dev = fit_cpu([(g, 4, _matmul_profile(4)), (g, 16, _matmul_profile(16))])
    g.ops["m2"].type = "BatchMatMulV2"       # heavy, unseen: the heavy median (MatMul's alone)
    assert fill_unseen(dev, g).split_factors("BatchMatMulV2") == pytest.approx((A, B_, C, 0.0),
                                                                              rel=1e-6)
    g.ops["m2"].type = "Tanh"                # light, unseen, and no light type seen: (1, 0, 0)
    assert fill_unseen(dev, g).split_factors("Tanh") == (1.0, 0.0, 0.0, 0.0)


def test_three_coefficient_entries_are_checked():
    import dataclasses
    import math

    dev = fit_cpu([(build(MATMULS), 4, _matmul_profile(4))])
    with pytest.raises(ValueError, match="MatMul.*memory factor"):
        dataclasses.replace(dev, type_factor=(("MatMul", (1.0, math.nan, 0.0)),))
    with pytest.raises(ValueError, match="type_factor entries"):
        dataclasses.replace(dev, type_factor=(("MatMul", (1.0, 2.0, 3.0, 4.0, 5.0)),))
    with pytest.raises(ValueError, match="MatMul.*patch factor"):
        dataclasses.replace(dev, type_factor=(("MatMul", (1.0, 2.0, 3.0, -4.0)),))
    with pytest.raises(ValueError, match="step_overhead_s"):
        dataclasses.replace(dev, step_overhead_s=math.nan)


def test_fused_events_cover_their_chain():
    g = build([("x", "Placeholder", [], "forward", ("B", 8, 8, 3)),
               ("w", "Placeholder", [], "forward", (3, 3, 3, 4)),
               ("conv", "Conv2D", ["x", "w"], "forward", ("B", 8, 8, 4)),
               ("bias", "BiasAdd", ["conv"], "forward", ("B", 8, 8, 4)),
               ("relu", "Relu", ["bias"], "forward", ("B", 8, 8, 4))])
    assert fused_chain(g, "relu", "_FusedConv2D") == ["conv", "bias", "relu"]
    assert fused_chain(g, "relu", "Relu") == ["relu"]


def test_stored_calibration_meets_its_targets():
    doc = json.loads(CALIBRATION.read_text())
    for row in doc["gpu_anchors"]["rows"]:
        assert abs(row["error"]) <= 0.30, row          # GPU presets within 30%
    rows = doc["cpu_runs"]
    for r in rows.values():                            # each error follows from its row
        # (the times are stored to 10 us: 0.3% of the 4 ms MLP step)
        assert r["error"] == pytest.approx(r["predicted_s"] / r["measured_s"] - 1, abs=5e-3)
    held = [r for r in rows.values() if r["role"] != "calibrate"]
    assert len(held) == 6
    assert doc["cpu_held_out_within_20pct"] == [sum(abs(r["error"]) <= 0.2 for r in held), 6]
    r50 = rows["resnet50-b4"]
    assert r50["role"] == "validate" and abs(r50["error"]) <= 0.20
    # The CPU preset is the three-coefficient form; the GPU presets keep theirs.
    assert PRESETS["cpu-here"].split_factors("Conv2D") is not None
    assert PRESETS["p100-16gb"].calibrated and PRESETS["p100-16gb"].split_factors("Relu") is None


def test_steady_step_leaves_out_the_cold_first_step():
    # The first call after other work is the cold one (TF's threads asleep, weights out of
    # cache): it is run but not timed, and the steps after it run back to back.
    calls = []

    def step(x):
        calls.append(x)
        if len(calls) == 1:
            time.sleep(0.3)

    wall, cpu = steady_step(step, (7,), min_s=0.01)
    assert len(calls) >= 2 and set(calls) == {7}
    assert wall < 0.3 and 0 <= cpu < 0.3
