"""The calibration's fitting on hand-made profiles, and the stored calibration's own checks."""

import json

import pytest
from lmskit_graphs import build

from lmskit.calibrate import _linear_fit, fill_unseen, fit_cpu, fused_chain
from lmskit.devices import CALIBRATION, PRESETS
from lmskit.simulate import simulate

G = "gradient_tape/"


def test_linear_fit_by_hand():
    import numpy as np

    # t = 2 * roof + 0.5 ms exactly.
    f, c = _linear_fit(np.array([1e-3, 3e-3]), np.array([2.5e-3, 6.5e-3]))
    assert (f, c) == pytest.approx((2.0, 0.5e-3))
    # A negative intercept is refused: through the origin instead (least squares).
    f, c = _linear_fit(np.array([1e-3, 2e-3]), np.array([0.5e-3, 3e-3]))
    assert c == 0 and f == pytest.approx((1 * 0.5 + 2 * 3) / (1 + 4))


def test_fit_cpu_reproduces_a_profile():
    # Batch 4 on the CPU base roofline (100 GFLOP/s, 10 GB/s): Relu a reads x and writes a,
    # 1000 floats each: 8000 bytes -> 0.8 us (its 1000 FLOPs take 0.01 us). The step's wall is
    # the sum of the op times, so no scaling. Relu: t = 2 x roof + 1 us; Neg: t = 5 x roof.
    rows = [("x", "Placeholder", [], "forward", ("B", 250)),
            ("a", "Relu", ["x"], "forward", ("B", 250)),
            ("b", "Relu", ["a"], "forward", ("B", 500)),
            ("c", "Neg", ["b"], "forward", ("B", 500))]
    g = build(rows)
    g.cache["label"] = "toy"
    # Relu b: 4000 + 8000 bytes -> 1.2 us; Neg c: 8000 + 8000 -> 1.6 us.
    prof = {"wall_s": 2 * 0.8e-6 + 1e-6 + 2 * 1.2e-6 + 1e-6 + 5 * 1.6e-6,
            "ops": {"a": 2 * 0.8e-6 + 1e-6, "b": 2 * 1.2e-6 + 1e-6, "c": 5 * 1.6e-6}}
    dev = fit_cpu([(g, 4, prof)])
    assert dev.factor("Relu") == pytest.approx((2.0, 1e-6))
    assert dev.factor("Neg")[0] == pytest.approx(5.0)
    assert simulate(g, dev, 4).step_time == pytest.approx(prof["wall_s"])
    # An unseen light type takes the median of the light ones: (2 + 5) / 2.
    g.ops["c"].type = "Tanh"
    assert fill_unseen(dev, g).factor("Tanh")[0] == pytest.approx(3.5)


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
        assert abs(row["error"]) <= 0.30, row          # issue 13: GPU presets within 30%
    r50 = doc["cpu_runs"]["resnet50-b4"]
    assert r50["role"] == "validate" and abs(r50["error"]) <= 0.20
    assert PRESETS["p100-16gb"].calibrated and PRESETS["cpu-here"].type_factor
