"""Data-parallel training with swapping, simulated (seed 004: LMS with distributed deep learning).

N GPUs each run the same step on their own slice of the global batch, each swapping to host
memory, and then sum their gradients with a ring allreduce. What the model assumes:

- Each GPU's step is lmskit.simulate of the policy's plan at the per-GPU batch. When
  `gpus_per_link` GPUs share one CPU-GPU link (e.g. two GPUs behind one PCIe switch), each gets
  that share of its bandwidth (all copy at once in a synchronous step: the worst case).
- Ring allreduce of B gradient bytes over N GPUs (Patarasuk & Yuan; what NCCL/Horovod/IBM DDL
  do within and across nodes): 2(N-1) steps, each sending B/N bytes and paying a latency:
      t = 2 (N-1) / N * B / bandwidth + 2 (N-1) * latency.
  The ring is as fast as its slowest hop: GPU-GPU NVLink within a node, InfiniBand between
  nodes once N exceeds gpus_per_node.
- overlap=False: the allreduce starts when the backward pass has ended (no overlap, the upper
  bound). overlap=True: it starts when the first gradient is ready and runs beside the rest of
  the backward pass (the lower bound; real bucketed allreduce lands in between).
- Throughput = N x per-GPU batch / step time; scaling efficiency = that / (N x one GPU's).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import progress
from .devices import GB, get_device
from .graph import Graph
from .planner import InfeasibleError, max_batch_size, plan
from .simulate import check_batch, simulate


@dataclass(frozen=True)
class Cluster:
    """Nodes of GPUs: the GPU-GPU link within a node and the network between nodes."""

    name: str
    gpus_per_node: int = 4
    intra_bandwidth: float = 40 * GB      # GPU<->GPU each way (NVLink)
    intra_latency_s: float = 2e-6
    inter_bandwidth: float = 12.5 * GB    # node<->node each way (InfiniBand EDR, 100 Gb/s)
    inter_latency_s: float = 5e-6
    gpus_per_link: int = 1                # GPUs sharing one CPU-GPU link (1: each its own)

    def __post_init__(self):
        for f in ("gpus_per_node", "gpus_per_link"):
            v = getattr(self, f)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"cluster {self.name!r}: {f} must be an integer >= 1, got {v!r}")
        for f in ("intra_bandwidth", "inter_bandwidth"):
            if not getattr(self, f) > 0:
                raise ValueError(f"cluster {self.name!r}: {f} must be positive, got "
                                 f"{getattr(self, f)!r}")
        for f in ("intra_latency_s", "inter_latency_s"):
            if getattr(self, f) < 0:
                raise ValueError(f"cluster {self.name!r}: {f} must be >= 0")


CLUSTERS = {
    # IBM Minsky (S822LC): 4 P100 per node, P100<->P100 NVLink 1.0 (2 links, 40 GB/s each way),
    # each P100 with its own NVLink to the Power8 CPU; nodes on InfiniBand EDR.
    "minsky-ib": Cluster("minsky-ib", 4, 40 * GB, 2e-6, 12.5 * GB, 5e-6, 1),
    # The same, but two GPUs behind one CPU link (a PCIe-switch box): swapping contends.
    "shared-link-ib": Cluster("shared-link-ib", 4, 40 * GB, 2e-6, 12.5 * GB, 5e-6, 2),
}


def _check_gpus(gpus) -> int:
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus must be an integer >= 1, got {gpus!r}")
    return gpus


def ring_allreduce_time(nbytes: float, gpus: int, bandwidth: float, latency_s: float) -> float:
    """2 (N-1)/N * bytes / bandwidth + 2 (N-1) * latency; 0 for one GPU."""
    _check_gpus(gpus)
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be positive, got {bandwidth!r}")
    if gpus == 1:
        return 0.0
    return 2 * (gpus - 1) / gpus * nbytes / bandwidth + 2 * (gpus - 1) * latency_s


def allreduce_time(cluster: Cluster, gpus: int, nbytes: float) -> float:
    """The ring's time on this cluster: NVLink within one node, the network across nodes."""
    if gpus <= cluster.gpus_per_node:
        return ring_allreduce_time(nbytes, gpus, cluster.intra_bandwidth, cluster.intra_latency_s)
    return ring_allreduce_time(nbytes, gpus, min(cluster.intra_bandwidth,
                                                 cluster.inter_bandwidth),
                               max(cluster.intra_latency_s, cluster.inter_latency_s))


def shared_link(device, cluster: Cluster):
    """The device as each GPU sees it when gpus_per_link GPUs share its CPU-GPU link."""
    dev = get_device(device)
    k = cluster.gpus_per_link
    if k == 1:
        return dev
    return dataclasses.replace(dev, name=f"{dev.name}/link-shared-by-{k}",
                               h2d_bandwidth=dev.h2d_bandwidth / k,
                               d2h_bandwidth=dev.d2h_bandwidth / k)


@dataclass
class DataParallelStep:
    gpus: int
    batch_per_gpu: int
    fits: bool
    compute_s: float        # one GPU's step (with its swaps)
    allreduce_s: float
    step_s: float
    overhead: float         # one GPU's swapping overhead
    policy: str

    @property
    def images_per_s(self) -> float:
        return self.gpus * self.batch_per_gpu / self.step_s if self.fits and self.step_s else 0.0


def data_parallel_step(graph: Graph, device, cluster: Cluster, gpus: int, batch_per_gpu: int,
                       policy: str = "none", overlap: bool = False) -> DataParallelStep:
    """One synchronous data-parallel step (module docstring)."""
    _check_gpus(gpus)
    check_batch(batch_per_gpu)
    dev = shared_link(device, cluster)
    try:
        g = plan(graph, policy, dev, batch_per_gpu)
        sim = simulate(g, dev, batch_per_gpu, timeline=overlap)
    except InfeasibleError:
        return DataParallelStep(gpus, batch_per_gpu, False, 0.0, 0.0, 0.0, 0.0, policy)
    grad_bytes = sum(v.bytes for v in graph.variables.values() if v.trainable)
    ar = allreduce_time(cluster, gpus, grad_bytes)
    if overlap and gpus > 1:
        firsts = [sim.end[g.producer(t).name] for t in g.gradients() if g.producer(t).name
                  in sim.end]
        begin = min(firsts, default=sim.step_time)
        step = max(sim.step_time, begin + ar)
    else:
        step = sim.step_time + ar
    return DataParallelStep(gpus, batch_per_gpu, sim.fits, sim.step_time, ar, step,
                            sim.overhead, policy)


def scaling(graph: Graph, device, cluster: Cluster, gpu_counts=(1, 2, 4, 8, 16),
            policies=("none", "lmskit"), max_overhead: float | None = 0.3,
            overlap: bool = False) -> list[dict]:
    """For each policy: its largest per-GPU batch within max_overhead (found once, on one GPU
    behind the cluster's link), then the data-parallel step at each GPU count."""
    rows = []
    dev = shared_link(device, cluster)
    for policy in progress.bar(policies, desc="data-parallel scaling"):
        b = max_batch_size(graph, dev, policy, max_overhead=max_overhead)
        if not b:
            continue
        one = None
        for n in gpu_counts:
            s = data_parallel_step(graph, device, cluster, n, b, policy, overlap)
            one = one or s.images_per_s
            rows.append({"policy": policy, "gpus": n, "batch_per_gpu": b, "fits": s.fits,
                         "step_s": s.step_s, "allreduce_s": s.allreduce_s,
                         "images_per_s": s.images_per_s,
                         "efficiency": s.images_per_s / (n * one) if one else 0.0,
                         "overhead": s.overhead, "cluster": cluster.name})
    return rows


__all__ = ["Cluster", "CLUSTERS", "ring_allreduce_time", "allreduce_time", "shared_link",
           "data_parallel_step", "scaling", "DataParallelStep"]
