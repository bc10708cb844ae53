"""lmskit: Large Model Support after TFLMS, as a workbench.

capture a TensorFlow training step as a Graph -> lifetimes (what is live when) -> swap (TFLMS
rewrite rules, checked) -> simulate on a device model -> runnable (run the rewrite in TF).
plan / compare / max_batch_size apply the policies ("none", "swap-all", "tflms", "tflms-v2",
"lmskit") without re-tracing; lmskit.figures draws plain plotly figures of the results.

The graph, schedule, rules, simulator and planner are framework-neutral: importing lmskit imports
no TensorFlow. TensorFlow lives in capture and run (tfcapture, tfrun, runcheck, distributed), which
load on first use of their names (`lmskit.capture`, `lmskit.runnable`, ...).

Running a rewritten step on a CPU-only machine needs two logical CPU devices (device and host
stand-ins). Call `lmskit.configure_devices()` before TensorFlow runs its first op (before building
a Keras model); it cannot be done later, and `runnable` says so if it was not.
"""

import importlib

from mlsys_datasets.tf_startup import quiet_first_import as _quiet_first_import

from .devices import PRESETS, Device, get_device
from .graph import Graph, GraphError, Op, Tensor, Variable
from .planner import POLICIES, InfeasibleError, compare, max_batch_size, plan
from .rules import RewriteError, check, swap
from .schedule import lifetimes, schedule
from .simulate import simulate

# TensorFlow's C++ start-up lines stay out of notebooks (fd 2 is silenced around its import).
_quiet_first_import()

# TensorFlow-backed names -> their module, imported on first use.
_TF_BACKED = {"capture": "tfcapture", "capture_step": "tfcapture", "CaptureError": "tfcapture",
              "runnable": "tfrun", "equivalent": "tfrun", "configure_devices": "tfrun"}

__all__ = ["capture", "capture_step", "lifetimes", "schedule", "swap", "check", "simulate",
           "plan", "compare", "max_batch_size", "runnable", "equivalent", "configure_devices",
           "Graph", "GraphError", "Op", "Tensor", "Variable", "Device", "PRESETS", "POLICIES",
           "get_device", "CaptureError", "RewriteError", "InfeasibleError"]


def __getattr__(name: str):
    if name in _TF_BACKED:
        value = getattr(importlib.import_module(f".{_TF_BACKED[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_TF_BACKED))
