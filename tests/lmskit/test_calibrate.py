"""The calibration's fitting on hand-made profiles, and the stored calibration's own checks."""

import json

import pytest
from lmskit_graphs import build

from lmskit.calibrate import fill_unseen, fit_cpu, fused_chain
from lmskit.devices import CALIBRATION, PRESETS
from lmskit.simulate import simulate

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
    assert dev.split_factors("MatMul") == pytest.approx((A, B_, C), rel=1e-6)
    # Held out at batch 64: m1 3 x 6.4 + 2 x 5.84 + 5 = 35.88 us; m2 3 x 12.8 + 2 x 10.4 + 5 =
    # 64.2 us; one stream, so the step is their sum.
    assert simulate(g, dev, 64).step_time == pytest.approx(35.88e-6 + 64.2e-6, rel=1e-6)


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
    assert fill_unseen(dev, g).split_factors("BatchMatMulV2") == pytest.approx((A, B_, C),
                                                                              rel=1e-6)
    g.ops["m2"].type = "Tanh"                # light, unseen, and no light type seen: (1, 0, 0)
    assert fill_unseen(dev, g).split_factors("Tanh") == (1.0, 0.0, 0.0)


def test_three_coefficient_entries_are_checked():
    import dataclasses
    import math

    dev = fit_cpu([(build(MATMULS), 4, _matmul_profile(4))])
    with pytest.raises(ValueError, match="MatMul.*memory factor"):
        dataclasses.replace(dev, type_factor=(("MatMul", (1.0, math.nan, 0.0)),))
    with pytest.raises(ValueError, match="type_factor entries"):
        dataclasses.replace(dev, type_factor=(("MatMul", (1.0, 2.0, 3.0, 4.0)),))


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
