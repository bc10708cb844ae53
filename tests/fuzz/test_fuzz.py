"""The fuzz property on a fixed-seed sample (issue 10): hypothesis-drawn graphs and mutated
datasets models, each compiled and run in a worker process (fuzzlib.py). Every case must end
in a clean compilerkit error or a match with onnxruntime: no dead process, no silent wrong
answer, no error that is not compilerkit's own, no run-time guard firing on data onnxruntime
accepts. `make fuzz N=2000` runs more."""

import fuzzlib
import pytest

SAMPLE = 300  # about a minute on two busy cores


@pytest.fixture(scope="module")
def sample():
    cases = fuzzlib.make_cases(SAMPLE, seed=0)
    return cases, fuzzlib.run_cases(cases, jobs=2, timeout_s=120)


def test_sample_has_both_kinds_of_case(sample):
    cases, _ = sample
    sources = {c["source"] for c in cases}
    assert sources == {"graph", "mutation"}
    assert any(c.get("target") in ("s390x", "ppc64") for c in cases)
    assert any(c.get("codegen") == "loopnest" for c in cases)
    assert {c.get("num_threads") for c in cases} >= {1, 2, 3}


def test_loopnest_cases_compile_and_match(sample):
    """The loopnest code generator's share of the sample: some of its cases run and match
    onnxruntime (the rest are clean refusals, counted by the test above)."""
    cases, results = sample
    loopnest = [r for c, r in zip(cases, results, strict=True) if c.get("codegen") == "loopnest"]
    assert sum(r["result"] == "match" for r in loopnest) >= len(loopnest) // 5


def test_no_death_no_silent_wrong_answer_no_unclear_error(sample):
    cases, results = sample
    summary = fuzzlib.summarize(results)
    bad = [f"{r['result']}: {r['desc']}: {r.get('detail', '')[:300]}" for r in results
           if r["result"] in fuzzlib.FAILURES]
    assert not bad, "\n".join(bad)
    # The sample is not all refusals: plenty of cases compile and match onnxruntime.
    assert summary["matches"] >= SAMPLE // 4
    assert summary["clean_refusals"] >= SAMPLE // 5
    # The run-time guards fire, and onnxruntime refuses the same data each time.
    guarded = [r for r in results if r.get("detail", "").startswith("RunError")]
    assert guarded and all(r["result"] == "refused" for r in guarded)
    assert any(r["phase"] == "onnxruntime-check" for r in guarded)


def test_the_harness_detects_and_attributes_a_death():
    """A case that kills its worker (the worker's self-test payload SIGKILLs it while it
    compiles) is a `death` in phase `compile`, and the next case runs in a fresh worker."""
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    good = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    cases = [{"id": 0, "source": "test", "desc": "kill", "model": fuzzlib.SELF_TEST_KILL,
              "input_shapes": None, "opt_level": 0, "seed": 0},
             {"id": 1, "source": "test", "desc": "good", "model": good.SerializeToString(),
              "input_shapes": None, "opt_level": 0, "seed": 0}]
    assert onnx.checker.check_model(good) is None
    results = fuzzlib.run_cases(cases, jobs=1, timeout_s=60)
    assert results[0]["result"] == "death" and "SIGKILL" in results[0]["detail"]
    assert results[0]["phase"] == "compile"
    assert results[1]["result"] == "match"


def test_compare_flags_a_wrong_answer():
    import numpy as np

    ref = [np.array([1.0, 2.0], np.float32)]
    assert fuzzlib._compare([np.array([1.0, 2.0], np.float32)], ref) is None
    assert "element 1" in fuzzlib._compare([np.array([1.0, 2.5], np.float32)], ref)
    assert "shape" in fuzzlib._compare([np.array([1.0], np.float32)], ref)
    assert "dtype" in fuzzlib._compare([np.array([1, 2], np.int64)], ref)
