"""The v1 grading rule of benchmarks/lmskit_bench.py, on hand-picked batches, and the JSON it
committed: the fields are there and the grade follows from them."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("lmskit_bench",
                                                  ROOT / "benchmarks" / "lmskit_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("b0, b_mem, b_30, want", [
    (100, 400, 320, "reproduced"),             # 4.0x, B_30 exactly 0.8 B_mem
    (100, 400, 319, "partially reproduced"),   # memory there, speed not
    (100, 399, 399, "partially reproduced"),   # 3.99x
    (100, 280, 0, "partially reproduced"),     # 2.8x
    (100, 279, 279, "not reproduced"),
    (0, 0, 0, "not reproduced"),
])
def test_grade_rule(bench, b0, b_mem, b_30, want):
    assert bench.grade(b0, b_mem, b_30) == want


def test_committed_json_holds_the_graded_setting(bench):
    doc = json.loads((ROOT / "benchmarks" / "results" / "lmskit_bench.json").read_text())
    head = doc["v1_paper_setting"]
    assert {"B0", "B_mem", "B_30", "overhead_at_B_mem", "grade"} <= set(head)
    assert head["grade"] == bench.grade(head["B0"], head["B_mem"], head["B_30"])
    assert head["scoping"] == "minimize" and head["device"] == "p100-16gb"
    changes = [r["change"] for r in doc["ablation"]]
    for word in ("scoping", "back-pressure", "link", "reserve", "direct_order", "atomic",
                 "Keras 3"):
        assert any(word in c for c in changes), word
    v2 = doc["v2_paper_setting"]
    assert v2["grade"] == bench.grade(v2["B0"], v2["B_mem"], v2["B_30"])
