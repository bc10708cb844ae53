"""mlsys_datasets: the workbench's data and model zoo (no downloads, everything seeded).

* Keras models (``models``): ``mlp``, ``lenet``, ``small_resnet``, ``resnet50``, ``unet3d``,
  ``keras_model(name, **params)``.
* Synthetic data (numpy only): ``digits(n, seed)`` (``digit_images``),
  ``brats_volumes(n, side, seed)`` (``brats``), ``em_volume(shape, seed, ...)`` -> image,
  labels, affinities: synthetic serial-section EM (``em``).
* Committed ONNX files (``zoo``): ``ONNX_MODELS``, ``onnx_path(name)``, ``load_onnx(name)``,
  ``manifest()``; rebuilt and verified by ``python -m mlsys_datasets build|check|list``.
* Real-weight ONNX models built on first use and cached, never downloaded (``real_weights``):
  ``REAL_WEIGHT_MODELS``, ``real_weight_model(name, size="small"|"full") -> path``: the onnx
  package's light architectures with seeded weights, Keras MobileNetV2 / ResNet-50 /
  EfficientNet-B0 and a 3D U-Net.

Importing the package is cheap: TensorFlow is imported only when a Keras model is first asked
for, onnx only when a model file is loaded.
"""

from __future__ import annotations

import importlib

from .tf_startup import quiet_first_import
from .zoo import ONNX_MODELS, load_onnx, manifest, onnx_path

# TensorFlow's C++ start-up lines stay out of notebooks, whoever imports it first.
quiet_first_import()

# name -> submodule that defines it; resolved on first access (PEP 562) so that
# `from mlsys_datasets import digits` never drags TensorFlow in.
_LAZY = {
    "mlp": "models", "lenet": "models", "small_resnet": "models", "resnet50": "models",
    "unet3d": "models", "keras_model": "models", "MODEL_NAMES": "models",
    "digits": "digit_images", "brats_volumes": "brats",
    "em_volume": "em", "EMVolume": "em", "affinities_from_labels": "em",
    "real_weight_model": "real_weights", "REAL_WEIGHT_MODELS": "real_weights",
}

__all__ = ["ONNX_MODELS", "onnx_path", "load_onnx", "manifest", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
