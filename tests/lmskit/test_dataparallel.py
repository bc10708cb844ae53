"""Data-parallel swapping (seed 004): the ring allreduce cost and one step, worked by hand."""

import dataclasses

import pytest
from lmskit_graphs import build

from lmskit.dataparallel import (
    CLUSTERS,
    Cluster,
    allreduce_time,
    data_parallel_step,
    ring_allreduce_time,
    scaling,
    shared_link,
)
from lmskit.devices import Device
from lmskit.graph import Variable

TOY = Device("toy", 10**9, flops=1e6, memory_bandwidth=1e15, h2d_bandwidth=4e6,
             d2h_bandwidth=4e6, compute_efficiency=1.0, bandwidth_efficiency=1.0,
             launch_overhead_s=0.0)
G = "gradient_tape/"
MS = 1e-3


def test_ring_allreduce_cost_by_hand():
    # 1 GB over 4 GPUs at 1 GB/s, 1 ms a hop: 2*3/4 * 1 s + 2*3 * 1 ms = 1.506 s.
    assert ring_allreduce_time(1e9, 4, 1e9, 1e-3) == pytest.approx(1.506)
    assert ring_allreduce_time(1e9, 2, 1e9, 0.0) == pytest.approx(1.0)   # 2*1/2
    assert ring_allreduce_time(1e9, 1, 1e9, 1e-3) == 0.0
    # Large N tends to 2 x bytes / bandwidth.
    assert ring_allreduce_time(1e9, 1000, 1e9, 0.0) == pytest.approx(2 * 999 / 1000)
    with pytest.raises(ValueError, match="gpus"):
        ring_allreduce_time(1e9, 0, 1e9, 0.0)
    with pytest.raises(ValueError, match="bandwidth"):
        ring_allreduce_time(1e9, 2, 0, 0.0)


def test_the_ring_slows_down_across_nodes():
    c = Cluster("c", gpus_per_node=4, intra_bandwidth=40e9, intra_latency_s=0.0,
                inter_bandwidth=10e9, inter_latency_s=0.0)
    # 4 GPUs: NVLink; 8 GPUs: the ring crosses the network, its slowest hop.
    assert allreduce_time(c, 4, 100e6) == pytest.approx(1.5 * 100e6 / 40e9)
    assert allreduce_time(c, 8, 100e6) == pytest.approx(2 * 7 / 8 * 100e6 / 10e9)
    with pytest.raises(ValueError, match="gpus_per_link"):
        dataclasses.replace(c, gpus_per_link=0)


def test_shared_link_halves_each_gpus_copies():
    dev = shared_link(TOY, dataclasses.replace(CLUSTERS["minsky-ib"], gpus_per_link=2))
    assert dev.h2d_bandwidth == 2e6 and dev.d2h_bandwidth == 2e6
    assert shared_link(TOY, CLUSTERS["minsky-ib"]) is TOY


def test_one_data_parallel_step_by_hand():
    # The 5-op chain (5 ms at batch 4) with a 1000-float weight (4000 gradient bytes) that the
    # update reads; 2 GPUs on a ring at 4e6 B/s, no latency: 2*1/2 * 4000 / 4e6 = 1 ms.
    rows = [("x", "Placeholder", [], "forward", ("B", 250)),
            ("a", "Relu", ["x"], "forward", ("B", 250)),
            ("b", "Tanh", ["a"], "forward", ("B", 250)),
            ("c", "Neg", ["b"], "forward", ("B", 250)),
            (G + "g1", "Mul", ["c", "c"], "backward", ("B", 250)),
            (G + "g2", "Mul", [G + "g1", "a"], "backward", ("B", 250))]
    g = build(rows)
    g.variables["w"] = Variable("w", "float32", (1000,), True)
    c = Cluster("toy", gpus_per_node=8, intra_bandwidth=4e6, intra_latency_s=0.0)
    s = data_parallel_step(g, TOY, c, 2, 4)
    assert s.compute_s == pytest.approx(5 * MS) and s.allreduce_s == pytest.approx(1 * MS)
    assert s.step_s == pytest.approx(6 * MS)
    assert s.images_per_s == pytest.approx(2 * 4 / 6e-3)
    one = data_parallel_step(g, TOY, c, 1, 4)
    assert one.step_s == pytest.approx(5 * MS)


def test_scaling_rows():
    from test_planner import DEV, deep_chain

    g = deep_chain()
    g.variables["w"] = Variable("w", "float32", (100,), True)
    rows = scaling(g, DEV, Cluster("c", gpus_per_node=2), gpu_counts=(1, 2, 4),
                   policies=("none", "lmskit"), max_overhead=None)
    by = {(r["policy"], r["gpus"]): r for r in rows}
    assert by[("none", 1)]["efficiency"] == pytest.approx(1.0)
    assert by[("lmskit", 1)]["batch_per_gpu"] > by[("none", 1)]["batch_per_gpu"]
    # More GPUs: more images per second, each a bit less efficient (the allreduce).
    assert by[("none", 4)]["images_per_s"] > by[("none", 2)]["images_per_s"]
    assert by[("none", 4)]["efficiency"] < 1.0
