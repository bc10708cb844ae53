"""lmskit: Large Model Support after TFLMS, as a workbench.

capture a TensorFlow training step as a Graph -> lifetimes (what is live when) -> swap (TFLMS
rewrite rules, checked) -> simulate on a device model -> runnable (run the rewrite in TF).
plan / compare / max_batch_size apply the policies ("none", "swap-all", "tflms", "tflms-v2",
"lmskit") without re-tracing; lmskit.figures draws plain plotly figures of the results.

Importing lmskit imports TensorFlow and, on a CPU-only machine, splits the CPU into two logical
devices so swaps can really run (this must happen before TF runs its first op).
"""

from .tfrun import configure_devices

configure_devices()

from .capture import CaptureError, capture, capture_step  # noqa: E402
from .devices import PRESETS, Device, get_device  # noqa: E402
from .graph import Graph, Op, Tensor, Variable  # noqa: E402
from .planner import POLICIES, InfeasibleError, compare, max_batch_size, plan  # noqa: E402
from .rules import RewriteError, check, swap  # noqa: E402
from .schedule import lifetimes, schedule  # noqa: E402
from .simulate import simulate  # noqa: E402
from .tfrun import equivalent, runnable  # noqa: E402

__all__ = ["capture", "capture_step", "lifetimes", "schedule", "swap", "check", "simulate",
           "plan", "compare", "max_batch_size", "runnable", "equivalent", "Graph", "Op", "Tensor",
           "Variable", "Device", "PRESETS", "POLICIES", "get_device", "CaptureError",
           "RewriteError", "InfeasibleError"]
