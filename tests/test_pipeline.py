"""Train with a swap-rewritten step, export, compile for host/s390x/gpu: outputs agree with TF.

Tiny sizes: a few steps, a small test batch, s390x (emulated) on a handful of images.
"""

import numpy as np
import pytest

from mlsys_workbench import pipeline


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    path = tmp_path_factory.mktemp("pipeline") / "lenet_trained.onnx"
    trained, table = pipeline.run(path, n_train=320, n_test=48, epochs=1, batch=32,
                                  s390x_images=4)
    return trained, table, path


def test_training_ran_the_rewritten_step_and_learned(result):
    trained, _, _ = result
    assert trained.swap_outs > 0 and trained.swap_ins > 0, "the rewrite swapped nothing"
    assert trained.steps == 10
    assert np.mean(trained.losses[-3:]) < np.mean(trained.losses[:3])
    # Ten classes: chance is 10%; the digits are separable, a few steps are far above it.
    assert trained.test_accuracy > 0.3, trained.test_accuracy
    # The Keras model itself holds the trained weights (the step trained its variables).
    again = np.asarray(trained.model(trained.x_test, training=False))
    np.testing.assert_array_equal(again, trained.tf_outputs)


def test_compiled_targets_agree_with_tensorflow(result):
    trained, table, path = result
    assert path.stat().st_size > 0
    host, s390x = table.row("host"), table.row("s390x")
    assert host.status == "ok" and host.total == len(trained.x_test)
    assert s390x.status == "ok" and s390x.total == 4
    for row in (host, s390x):
        assert row.all_agree, (row.target, row.agree, row.total)
        assert row.max_abs_diff < 1e-4, (row.target, row.max_abs_diff)


def test_gpu_row_is_explicit(result):
    _, table, _ = result
    gpu = table.row("gpu")
    html = table.html()
    assert '<table class="agreement"' in html and 'data-target="gpu"' in html
    if gpu.status == pipeline.NO_CUDA:
        assert gpu.agree is None and gpu.max_abs_diff is None
        assert pipeline.NO_CUDA in html and gpu.detail
    else:   # a CUDA device exists: the GPU must agree like the others
        assert gpu.status == "ok" and gpu.all_agree and gpu.max_abs_diff < 1e-4


def test_agreement_detects_a_disagreement(result):
    """The comparison can fail: against shifted reference outputs the host row disagrees."""
    trained, _, path = result
    import onnx

    wrong = np.roll(trained.tf_outputs[:8], 1, axis=1)
    table = pipeline.agreement(onnx.load(str(path)), trained.x_test[:8], wrong, targets=("host",))
    row = table.row("host")
    assert row.agree < row.total and not row.all_agree and row.max_abs_diff > 1e-3


def test_swapped_step_is_bit_identical_to_the_original():
    trained = pipeline.train_swapped(n_train=32, n_test=8, epochs=1, batch=32,
                                     check_equivalence=True)
    assert trained.identical is True
