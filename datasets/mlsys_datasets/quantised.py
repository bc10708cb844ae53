"""Quantised variants of the modern set, made with onnxruntime's own quantisers.

* ``quantise_static``: ``onnxruntime.quantization.quantize_static`` in QDQ format (weights int8
  symmetric, activations uint8, MinMax calibration), calibrated on ``CALIBRATION_BATCHES``
  deterministic batches from ``zoo.sample_inputs`` (seeds 100, 101, ...): the float graph with
  QuantizeLinear/DequantizeLinear pairs around every quantised tensor.
* ``quantise_dynamic``: ``quantize_dynamic`` (int8 weights, per-tensor, ``reduce_range``):
  MatMul becomes DynamicQuantizeLinear + MatMulInteger, Conv becomes ConvInteger, with the
  scales multiplied back in float. ``reduce_range`` keeps weights in 7 bits, as onnxruntime
  advises for x86 without VNNI: its uint8 x int8 kernels (AVX2 ``vpmaddubsw``) add pairs of
  products in saturating int16, and with full-range weights onnxruntime's own MatMulInteger
  answers up to 2.3e4 away from the exact integer product (the compiled code is exact).

Both write the model to ``path`` and return its ModelProto; the bytes depend only on the float
model, the options and the onnxruntime version (``zoo.check`` verifies that). onnxruntime is
imported when a model is quantised, never at import time.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

CALIBRATION_BATCHES = 8


class _Reader:
    """onnxruntime's CalibrationDataReader protocol over a fixed list of feeds."""

    def __init__(self, feeds: list[dict]):
        self._feeds = list(feeds)
        self._next = 0

    def get_next(self):
        if self._next >= len(self._feeds):
            return None
        self._next += 1
        return self._feeds[self._next - 1]

    def rewind(self):
        self._next = 0


def _finish(tmp_out: Path, path: Path, graph_name: str):
    import onnx

    proto = onnx.load(str(tmp_out))
    proto.graph.name = graph_name
    onnx.checker.check_model(proto)
    path.write_bytes(proto.SerializeToString(deterministic=True))
    return proto


def quantise_static(float_path, path, calibration: list[dict], per_channel: bool = False,
                    graph_name: str = ""):
    """QDQ-quantise the ONNX file ``float_path`` into ``path``, calibrated on ``calibration``
    (a list of feed dicts); ``per_channel`` quantises weights per output channel."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    if not calibration:
        raise ValueError("calibration must hold at least one batch of feeds")
    path = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "q.onnx"
        quantize_static(str(float_path), str(out), _Reader(calibration),
                        quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, per_channel=per_channel,
                        calibrate_method=CalibrationMethod.MinMax)
        return _finish(out, path, graph_name)


def quantise_dynamic(float_path, path, graph_name: str = ""):
    """Dynamically quantise ``float_path`` (7-bit int8 weights, per tensor) into ``path``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    path = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "q.onnx"
        quantize_dynamic(str(float_path), str(out), weight_type=QuantType.QInt8,
                         reduce_range=True)
        return _finish(out, path, graph_name)
