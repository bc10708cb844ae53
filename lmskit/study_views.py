"""The batch-size, parameter-tuning and cube-side studies as rows, each row one simulation, with
communication overhead = step time - compute time: the largest batch per policy, throughput
against the batch, the TFLMS v2 parameter sweep and its gain, the largest cube side that fits.
Plain data; nothing here draws (``lmskit.views`` gathers these with the other views)."""

from __future__ import annotations

import itertools
import time

from . import progress
from .graph import Graph
from .planner import InfeasibleError, evaluate, max_batch_size, plan
from .simulate import Simulation, simulate


def sim_row(sim: Simulation, **extra) -> dict:
    """One simulation as a flat row; comm = step time - compute time (what swapping costs)."""
    return {**extra, "fits": sim.fits, "step_s": sim.step_time, "compute_s": sim.compute_time,
            "comm_s": sim.step_time - sim.compute_time, "overhead": sim.overhead,
            "stall_s": sim.stall_time, "peak": sim.peak_device_bytes,
            "host_peak": sim.peak_host_bytes, "swapped": sim.swapped_bytes,
            "oom_op": sim.oom_op}


def max_batches(graph: Graph, device, policies, budget: int | None = None,
                max_overhead: float | None = None, throughput: bool = False) -> list[dict]:
    """For each policy: the largest batch that fits (planner.max_batch_size; within
    max_overhead when given), the ratio to "none" (when "none" is among the policies), the
    simulation at that batch and the search time. throughput=True adds the throughput-optimal
    batch (best_throughput) and its images per second."""
    rows = []
    start = None
    for policy in progress.bar(policies, desc="max batch per policy"):
        t0 = time.perf_counter()
        try:
            # Swapping never fits less than no swapping: start the search at that batch.
            b = max_batch_size(graph, device, policy, budget, max_overhead=max_overhead,
                               start=start)
        except InfeasibleError:
            b = 0
        if policy == "none" and b:
            start = b
        row = {"policy": policy, "max batch": b}
        if b:
            sim = evaluate(graph, policy, device, b, budget)[1]
            row.update(sim_row(sim))
            row["images_per_s"] = b / sim.step_time if sim.step_time else None
            if throughput:
                row.update(best_throughput(graph, device, policy, b, budget))
        row["search_s"] = time.perf_counter() - t0
        rows.append(row)
    base = next((r["max batch"] for r in rows if r["policy"] == "none"), 0)
    for r in rows:
        r["ratio"] = r["max batch"] / base if base else None
    return rows


def throughput_curve(graph: Graph, device, policy: str, max_batch: int,
                     budget: int | None = None, points: int = 8) -> list[dict]:
    """Images per second under a policy at `points` batches spread geometrically from 1 to
    max_batch: rows of batch, images_per_s, overhead, fits."""
    cands = sorted({max(1, round(max_batch ** (i / (points - 1)))) for i in range(points)}
                   | {max_batch})
    out = []
    for b in progress.bar(cands, desc=f"{policy}: batches"):
        try:
            s = evaluate(graph, policy, device, b, budget)[1]
        except InfeasibleError:
            continue
        out.append({"batch": b, "fits": s.fits, "overhead": s.overhead,
                    "images_per_s": b / s.step_time if s.fits and s.step_time else 0.0})
    return out


def best_throughput(graph: Graph, device, policy: str, max_batch: int,
                    budget: int | None = None, points: int = 8) -> dict:
    """The batch of throughput_curve with the most images per second:
    {"best batch", "best images_per_s"}."""
    curve = throughput_curve(graph, device, policy, max_batch, budget, points)
    best = max(curve, key=lambda r: r["images_per_s"], default={"batch": 0, "images_per_s": 0.0})
    return {"best batch": best["batch"], "best images_per_s": best["images_per_s"]}


def sweep_v2(graph: Graph, device, batch_size: int, swapout_threshold, swapin_ahead,
             swapin_groupby, budget: int | None = None) -> list[dict]:
    """Simulate the TFLMS v2 rewrite for every combination of the three parameters; one row
    each with the options and sim_row's fields."""
    from .rules import swap

    rows = []
    grid = list(itertools.product(swapout_threshold, swapin_ahead, swapin_groupby))
    for so, ahead, group in progress.bar(grid, desc="TFLMS v2 parameter sweep"):
        g = swap(graph, swapout_threshold=so, swapin_ahead=ahead, swapin_groupby=group)
        sim = simulate(g, device, batch_size, budget)
        rows.append(sim_row(sim, swapout_threshold=so, swapin_ahead=ahead,
                            swapin_groupby=group))
    return rows


def tuning_gain(rows: list[dict], baseline: dict) -> dict:
    """The best fitting row of a sweep against a baseline row: communication time (step -
    compute) of each and the relative cut, 1 - best / baseline."""
    fitting = [r for r in rows if r["fits"]]
    if not fitting:
        raise ValueError("no setting in the sweep fits the budget")
    best = min(fitting, key=lambda r: r["step_s"])
    cut = 1 - best["comm_s"] / baseline["comm_s"] if baseline["comm_s"] > 0 else 0.0
    return {"baseline": baseline, "best": best, "comm_cut": cut}


def largest_side(capture_side, sides, device, policies, batch_size: int = 1,
                 budget: int | None = None) -> list[dict]:
    """For each cube side (one capture each: the side is not the batch), whether each policy
    fits at batch_size. capture_side(side) -> Graph. Stops after a side nothing fits."""
    rows = []
    for side in progress.bar(sides, desc="cube sides"):
        g = capture_side(side)
        row = {"side": side}
        for policy in policies:
            try:
                sim = simulate(plan(g, policy, device, batch_size, budget), device, batch_size,
                               budget)
                row[policy] = sim.fits
                row[f"{policy} overhead"] = sim.overhead if sim.fits else None
            except InfeasibleError:
                row[policy] = False
                row[f"{policy} overhead"] = None
        rows.append(row)
        if not any(row[p] for p in policies):
            break
    return rows
