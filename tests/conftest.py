"""Suite-wide settings: quiet TensorFlow, and where the repository is."""

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` skip cleanly where no CUDA device exists."""
    import pytest

    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    from compilerkit.backends.cuda_driver import NoCudaDevice, context

    try:
        context()
    except NoCudaDevice as error:
        skip = pytest.mark.skip(reason=str(error))
        for item in gpu_items:
            item.add_marker(skip)
