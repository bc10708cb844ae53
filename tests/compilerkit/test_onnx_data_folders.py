"""ONNX's own test-data folders `simple/`, `pytorch-converted/` and `pytorch-operator/` (small
models with stored inputs and outputs, shipped in the onnx package) through compilerkit, beside
the node tests (test_onnx_backend.py), run by `compilerkit.conformance.run_data_folders`.

Most of them are PyTorch exports of opset 6, which compilerkit upgrades on import; the answers
are compared with the outputs stored next to the models (computed by PyTorch), not with
onnxruntime. The test asserts floors on the pass counts and that no case answers wrong; what
stays refused is printed with its reason."""

import pytest

from compilerkit import conformance


@pytest.mark.slow
def test_onnx_data_folders():
    results = conformance.run_data_folders()
    t = conformance.totals(results)
    wrong = sorted(r.name for r in results if r.status == conformance.WRONG)
    refused = {r.name: r.reason.split(";")[0][:120] for r in results
               if r.status == conformance.REFUSED_STATUS}
    print(f"\nONNX data folders {conformance.DATA_FOLDERS}: {t['cases']} cases, {t['passed']} "
          f"pass as given, {t['variant']} more as constant-input static variants, "
          f"{t['refused']} refused, {t['wrong']} wrong: {wrong}")
    for name, reason in refused.items():
        print(f"  refused {name}: {reason}")
    assert t["cases"] >= 140  # onnx 1.23 ships 140; fewer means the folders were not found
    assert not wrong
    # Floors at today's counts (140 cases: 120 pass as given, 4 more as the variant, the
    # Expand models whose target shape is a graph input). What stays refused is no compiler
    # bug: the Gradient op of the training domain, string tensors (StringNormalizer) and the
    # sequence ops (SequenceConstruct, SplitToSequence...), which compilerkit does not lower.
    assert t["passed"] >= 120
    assert t["passed"] + t["variant"] >= 124


def test_a_data_folder_case_runs_against_its_stored_outputs():
    """One opset-6 PyTorch export end to end, cheaply: found, upgraded, compiled and matched
    against its stored output (a case that can fail: the stored output is PyTorch's)."""
    folder = next(f for f in conformance.data_folder_cases(("pytorch-converted",))
                  if f.endswith("test_Conv1d_groups"))
    r = conformance.run_data_case(folder)
    assert (r.status, r.variant) == (conformance.PASSED, conformance.GIVEN), r
    assert r.max_error is not None and r.max_error < 1e-4
