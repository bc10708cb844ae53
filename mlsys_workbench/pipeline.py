"""Train in one environment with swapping, compile for another: lmskit + compilerkit together.

The papers' story in one pipeline (notebook 20_train_swap_compile is a thin front end to it):

1. ``train_swapped``: capture LeNet's Keras training step with lmskit, rewrite it with TFLMS swap
   rules (``lmskit.swap``), and train the model's own variables by running the *rewritten* step in
   TensorFlow over batches of synthetic digits; accuracy on held-out digits.
   The rewritten step imports the captured GraphDef with the model's variable handles mapped in,
   so training it updates the Keras model's weights in place: no copying back is needed.
2. ``export_onnx``: the trained Keras model to ONNX through ``mlsys_datasets.keras_export``.
3. ``agreement``: compile the ONNX model with compilerkit for each target (host, s390x in the
   emulator, gpu), run it on test digits and compare with TensorFlow's own outputs: predictions
   equal (count/total) and the max |difference| of the outputs. A GPU target on a machine
   without a CUDA device gives an explicit "no CUDA device" row instead of a number.

Assumes this module is imported before TensorFlow runs its first op: importing it calls
``lmskit.configure_devices()``, so a CPU-only machine has the two logical devices the swaps run
between.
"""

from __future__ import annotations

import html
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import lmskit  # noqa: E402
from lmskit.progress import bar  # noqa: E402

lmskit.configure_devices()   # before any TF op: two logical CPUs, so the swaps really run

# Swap options (TFLMS v2 style): swap out tensors whose readers are >= 2 ops away, bring them back
# one op ahead of their reader, one swap-in per reader. The rewrite is checked by lmskit.swap and
# proven bit-identical to the original step in tests/lmskit/test_tfrun.py.
DEFAULT_SWAP = {"swapout_threshold": 2, "swapin_ahead": 1, "swapin_groupby": 0}
TARGETS = ("host", "s390x", "gpu")
NO_CUDA = "no CUDA device"


@dataclass
class Trained:
    """A LeNet trained by the swap-rewritten step. ``model`` holds the trained weights."""
    model: object
    graph: object            # the captured step (lmskit.Graph)
    rewritten: object        # the swap-rewritten step that actually trained
    options: dict
    swap_outs: int           # swap-out identities inserted by the rewrite
    swap_ins: int
    losses: list[float]      # one per step
    steps: int
    train_accuracy: float
    test_accuracy: float
    x_test: np.ndarray
    y_test: np.ndarray
    tf_outputs: np.ndarray   # TensorFlow's outputs (softmax) on x_test, after training
    seconds: float
    identical: bool | None = None   # first step bit-identical to the un-rewritten one (if checked)


def _tf_outputs(model, x: np.ndarray, batch: int = 256) -> np.ndarray:
    return np.concatenate([np.asarray(model(x[i:i + batch], training=False))
                           for i in range(0, len(x), batch)])


def train_swapped(n_train: int = 900, n_test: int = 200, epochs: int = 3, batch: int = 32,
                  learning_rate: float = 0.005, options: dict | None = None, seed: int = 0,
                  check_equivalence: bool = False, progress: bool = False) -> Trained:
    """Train ``mlsys_datasets.lenet`` on ``digits(n_train, seed)`` with the swap-rewritten step;
    test on ``digits(n_test, seed + 1)`` (other samples). ``options`` go to ``lmskit.swap``;
    ``progress``: a bar of the training steps."""
    import keras
    import mlsys_datasets as zoo
    import tensorflow as tf

    from lmskit.rules.common import is_swap

    if n_train < batch:
        raise ValueError(f"n_train={n_train} is smaller than one batch ({batch})")
    options = dict(DEFAULT_SWAP if options is None else options)
    start = time.perf_counter()
    keras.utils.set_random_seed(seed)
    model = zoo.lenet(seed=seed)
    x, y = zoo.digits(n_train, seed=seed)
    x_test, y_test = zoo.digits(n_test, seed=seed + 1)
    y = y.astype(np.int32)
    graph = lmskit.capture(model, keras.losses.SparseCategoricalCrossentropy(),
                           keras.optimizers.Adam(learning_rate),
                           (tf.TensorSpec((None, 28, 28, 1)), tf.TensorSpec((None,), tf.int32)))
    rewritten = lmskit.swap(graph, **options)
    kinds = [op.attrs.get("swap") for op in rewritten.ops.values() if is_swap(op)]
    identical = None
    if check_equivalence:   # one step each from the same weights; weights restored afterwards
        identical = lmskit.equivalent(graph, rewritten, (x[:batch], y[:batch])).identical
    step = lmskit.runnable(rewritten, fetch=[graph.loss])
    rng = np.random.default_rng(seed)
    losses = []
    per_epoch = n_train // batch   # whole batches only
    with bar(total=epochs * per_epoch, desc="training steps", show=progress) as steps:
        for _ in range(epochs):
            order = rng.permutation(n_train)
            for i in range(0, per_epoch * batch, batch):
                idx = order[i:i + batch]
                losses.append(float(step(x[idx], y[idx])[graph.loss]))
                steps.update()
    train_acc = float((_tf_outputs(model, x).argmax(1) == y).mean())
    out = _tf_outputs(model, x_test)
    return Trained(model=model, graph=graph, rewritten=rewritten, options=options,
                   swap_outs=kinds.count("out"), swap_ins=kinds.count("in"), losses=losses,
                   steps=len(losses), train_accuracy=train_acc,
                   test_accuracy=float((out.argmax(1) == y_test).mean()), x_test=x_test,
                   y_test=y_test, tf_outputs=out, seconds=time.perf_counter() - start,
                   identical=identical)


def export_onnx(model, path: str | os.PathLike):
    """The trained Keras model as ONNX at ``path`` (mlsys_datasets' deterministic exporter)."""
    from mlsys_datasets.keras_export import export_keras

    return export_keras(model, Path(path))


@dataclass
class Row:
    """One target of the agreement table."""
    target: str
    status: str                      # "ok", or why it did not run (e.g. "no CUDA device")
    agree: int | None = None         # predictions equal to TensorFlow's
    total: int | None = None
    max_abs_diff: float | None = None
    compile_s: float | None = None
    run_s: float | None = None
    detail: str = ""

    @property
    def all_agree(self) -> bool:
        return self.status == "ok" and self.agree == self.total


@dataclass
class Agreement:
    rows: list[Row] = field(default_factory=list)

    def row(self, target: str) -> Row:
        return next(r for r in self.rows if r.target == target)

    def html(self) -> str:
        return agreement_html(self.rows)

    def _repr_html_(self) -> str:
        return self.html()


def agreement(model_proto, x: np.ndarray, reference: np.ndarray, targets=TARGETS,
              limits: dict | None = None, opt_level: int = 3, progress: bool = False) -> Agreement:
    """Compile ``model_proto`` for each target, run it on ``x`` (the first ``limits[target]``
    images for a limited target, e.g. the slow s390x emulator) and compare with ``reference``
    (TensorFlow's outputs on ``x``). Only a missing CUDA device is turned into a row; any other
    failure raises. ``progress``: a bar of the targets."""
    import compilerkit as ck
    from compilerkit.backends.cuda_driver import NoCudaDevice

    limits = limits or {}
    x = np.ascontiguousarray(x, np.float32)
    rows = []
    for target in bar(targets, desc="targets", show=progress):
        n = min(len(x), limits.get(target, len(x)))
        t = time.perf_counter()
        cm = ck.compile(model_proto, target=target, opt_level=opt_level,
                        input_shapes={"input": [n, *x.shape[1:]]}, asm=False)
        compile_s = time.perf_counter() - t
        t = time.perf_counter()
        try:
            out = np.asarray(cm.run(x[:n])[0])
        except NoCudaDevice as error:
            rows.append(Row(target, NO_CUDA, total=n, compile_s=compile_s, detail=str(error)))
            continue
        run_s = time.perf_counter() - t
        ref = reference[:n]
        rows.append(Row(target, "ok", agree=int((out.argmax(1) == ref.argmax(1)).sum()), total=n,
                        max_abs_diff=float(np.abs(out - ref).max()), compile_s=compile_s,
                        run_s=run_s))
    return Agreement(rows)


def agreement_html(rows: list[Row]) -> str:
    """A plain HTML table (class "agreement", id "agreement-table") of the rows."""
    head = ("target", "status", "predictions = TF", "max |output diff|", "compile s", "run s")
    out = ['<table class="agreement" id="agreement-table">',
           "<thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"]
    for r in rows:
        ok = r.status == "ok"
        cells = (r.target, r.status,
                 f"{r.agree}/{r.total}" if ok else "—",
                 f"{r.max_abs_diff:.2e}" if ok else "—",
                 f"{r.compile_s:.2f}" if r.compile_s is not None else "—",
                 f"{r.run_s:.3f}" if r.run_s is not None else "—")
        title = f' title="{html.escape(r.detail)}"' if r.detail else ""
        out.append(f'<tr data-target="{html.escape(r.target)}"{title}>'
                   + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def run(path: str | os.PathLike, n_train: int = 900, n_test: int = 200, epochs: int = 3,
        batch: int = 32, options: dict | None = None, s390x_images: int = 16, seed: int = 0,
        targets=TARGETS) -> tuple[Trained, Agreement]:
    """The whole story: train with swapping, export to ``path``, compile and compare."""
    trained = train_swapped(n_train, n_test, epochs, batch, options=options, seed=seed)
    proto = export_onnx(trained.model, path)
    table = agreement(proto, trained.x_test, trained.tf_outputs, targets,
                      limits={"s390x": s390x_images})
    return trained, table
