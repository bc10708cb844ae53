"""segkit.znn: a ZNN-style task-parallel trainer for 3D ConvNets (Zlateski, Lee & Seung).

Training is a graph of small tasks (per-edge convolutions, per-node FFTs and sums) run on a
pool of threads; the compute kernels (numba, scipy.fft, numpy) release the GIL, so the threads
really run at once.  Modules, in the order the ideas build on each other:

  kernels    direct (numba nogil) and FFT (scipy.fft) convolutions of one edge, pooling
  sums       convergent sums accumulated almost wait-free
  fftcache   image, gradient and filter spectra computed once and reused
  taskgraph  the DAG of tasks, the thread pool and its timeline
  layers     a Keras model read as Conv3D / MaxPooling3D / activation layers
  network    forward + backward as one task graph; direct or FFT per layer
  brent      work, span, Brent's bound and a greedy-schedule simulation
  trainer    gradients(model, x, y) and Trainer (SGD with momentum)
  measure    benchmark nets, timings at 1 and 2 threads, Brent beside them, GIL checks
             (imported as segkit.znn.measure; TensorFlow only inside its functions)
"""

from . import measure
from .brent import brent, busy_fraction, gantt, simulate, task_costs, work_span
from .network import Network, layer_costs
from .taskgraph import TaskGraph, default_threads, run
from .trainer import Trainer, gradients

__all__ = ["Network", "TaskGraph", "Trainer", "brent", "busy_fraction", "default_threads",
           "gantt", "gradients", "layer_costs", "measure", "run", "simulate", "task_costs",
           "work_span"]
