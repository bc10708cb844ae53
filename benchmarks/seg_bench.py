"""segkit's done-when goals (issue 16), measured on synthetic EM volumes.

    .venv/bin/python benchmarks/seg_bench.py [--side 256] [--chunk 64] [--quick]
    .venv/bin/python benchmarks/seg_bench.py --workers-only [--pairs 3] [--out /tmp/w.json]

Writes benchmarks/results/seg_bench.json (or ``--out``) and prints a table. ``--workers-only``
runs just the one-vs-two-worker timing (stored as ``workers_pairs`` in the file, the rest of
it kept), ``--pairs`` times alternating (two, one, one, two, ...),
with every run's figures kept (for a noisy machine). What is measured:

* equality: ``chunked_agglomerate`` vs ``agglomerate(mode="mean")`` on the whole volume, voxel
  for voxel, for several chunkings (ragged ones included);
* memory: peak resident memory gained by each worker process (sampled every 5 ms, minus the
  value when the run starts; warm workers) during a chunked run at ``--chunk``, against the
  same for a whole-volume run in a fresh process that reads the volume from the same zarr;
* workers: one vs two single-threaded worker processes, same job, warm, best of 2, without
  the memory sampler; with the CPU seconds of each worker process, of the driver (with the
  LocalCluster's scheduler), of each task kind and of the serial tasks (root, composes),
  the bytes moved between workers, and ``predicted_ratio``: the two runs' CPU critical
  paths (``predicted_seconds``);
* speed: watershed + agglomeration on the whole volume at 64^3, 128^3 and 256^3 (best of 2),
  with the log-log slope of time against voxels;
* quality: adapted Rand F of plain watershed, size-dependent single linkage and waterz's mean
  agglomeration at its best threshold (a sweep against ground truth);
* determinism: reruns hashed (sha256 of the uint64 labels);
* projection: per-task seconds and memory at the chunk size, scaled to 135e9 supervoxels.

The machine is a shared 2-core VM: the load average is recorded before and after; times are
upper bounds when it is above ~1.
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "results" / "seg_bench.json"


def sha(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


def best_with_result(n, fn):
    """(best wall seconds, best CPU seconds of this process, result) of `n` calls, no warm-up
    (the caller warms up): the shared timer, imported here so that the scripts importing this
    module for PeakRSS stay light."""
    from compilerkit.measure import timing

    out = []
    wall, cpu = timing.best_of(lambda: out.append(fn()), n, ("wall", "process"), warmup=False)
    return wall, cpu, out[-1]


class PeakRSS:
    """Samples this process's resident memory every few ms in a thread; ``gain_mib`` is the
    peak minus the value at ``start`` (ru_maxrss cannot be reset between runs)."""

    def __init__(self):
        import threading

        import psutil

        self.proc, self.threading = psutil.Process(), threading
        self.base = self.peak = 0
        self.running = False

    def start(self):
        self.base = self.peak = self.proc.memory_info().rss
        self.running = True
        self.thread = self.threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while self.running:
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.005)

    def stop(self) -> float:
        self.running = False
        self.thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)
        return (self.peak - self.base) / 2 ** 20


WHOLE_CHILD = """
import sys, time, numpy as np, zarr
from seg_bench import PeakRSS
import segkit
path, threshold = sys.argv[1], float(sys.argv[2])
tiny = np.random.default_rng(0).uniform(0, 1, (3, 8, 8, 8)).astype(np.float32)
segkit.agglomerate(tiny, threshold, mode="mean")   # compile / load numba before measuring
meter = PeakRSS()
meter.start()
aff = zarr.open_array(store=path, mode="r")[:]
t0 = time.perf_counter()
c0 = time.process_time()
seg = segkit.agglomerate(aff, threshold, mode="mean")
seconds = time.perf_counter() - t0
cpu = time.process_time() - c0
print(meter.stop(), seconds, cpu)
"""


def whole_volume_memory(aff_path, threshold):
    out = subprocess.run([sys.executable, "-c", WHOLE_CHILD, str(aff_path), str(threshold)],
                         capture_output=True, text=True, check=True,
                         cwd=REPO / "benchmarks")  # `-c` imports seg_bench from its cwd
    mib, seconds, cpu = out.stdout.split()[-3:]
    return float(mib), float(seconds), float(cpu)


def _meter_start(dask_worker=None):
    meter = PeakRSS()
    meter.start()
    dask_worker._seg_meter = meter  # kept on the worker between the two client.run calls
    return True


def _meter_stop(dask_worker=None):
    return dask_worker._seg_meter.stop()


def _cpu(dask_worker=None):
    return time.process_time()


def _clear_metrics(dask_scheduler=None):
    dask_scheduler.cumulative_worker_metrics.clear()


def _task_cpu(dask_scheduler=None):
    """Thread CPU seconds of the tasks, summed by task name (Dask's fine metrics)."""
    out = {}
    for key, v in dask_scheduler.cumulative_worker_metrics.items():
        if isinstance(key, tuple) and key[0] == "execute" and key[2:] == ("thread-cpu",
                                                                          "seconds"):
            out[key[1]] = out.get(key[1], 0) + v
    return out


def _moved_bytes(dask_worker=None):
    """Bytes this worker fetched from other workers since the last call."""
    n = sum(x["total"] for x in dask_worker.transfer_incoming_log)
    dask_worker.transfer_incoming_log.clear()
    return n


def predicted_seconds(cpu, n_workers):
    """CPU critical path of one run: the work that can run in parallel spread over the
    workers, plus the serial tasks (the root and compose: nothing else can run while they
    do; linking runs beside round 0), plus the driver's CPU shared among the cores it
    competes with (on this 2-core machine: none with one worker, the two workers' with two).
    Wall time on a quiet machine is about this plus Dask's latencies between tasks."""
    work, serial = sum(cpu["workers"]), cpu["serial_s"]
    driver = cpu["driver"] / 2 if n_workers >= (os.cpu_count() or 2) else 0.0
    return (work - serial) / n_workers + serial + driver


def chunked_run(aff_z, chunks, threshold, n_workers, workdir, repeat=1, meter=False):
    """Warm cluster of ``n_workers`` processes; returns (best wall seconds, segmentation,
    per-worker peak memory gain in MiB (``meter``; else {}), info, CPU: the best run's
    {'workers': [seconds per worker], 'driver': seconds}). Timed runs go without the memory
    meter: its thread in every worker wakes every 5 ms and takes the GIL from the tasks."""
    from dask.distributed import Client

    import segkit

    with segkit.local_cluster(n_workers, memory_limit=0) as cluster, Client(cluster) as client:
        small = aff_z[:, :32, :32, :32]
        segkit.chunked_agglomerate(small, 16, threshold, client=client,
                                   workdir=Path(workdir) / "warm")
        times, info, seg, gains, cpus = [], None, None, [], []
        # Not the shared timer: each timed run sits between readings of the workers' CPU
        # counters, moved bytes and the scheduler's task metrics, kept per run.
        for k in range(repeat):
            if meter:
                client.run(_meter_start)
            client.run(_moved_bytes)
            client.run_on_scheduler(_clear_metrics)
            w0, d0 = client.run(_cpu), time.process_time()
            t0 = time.perf_counter()
            seg, info = segkit.chunked_agglomerate(aff_z, chunks, threshold, client=client,
                                                   workdir=Path(workdir) / f"run{k}",
                                                   return_info=True)
            times.append(time.perf_counter() - t0)
            d1, w1 = time.process_time(), client.run(_cpu)
            tasks = client.run_on_scheduler(_task_cpu)
            root = info["rounds"][-1][0]["cpu_seconds"]
            serial = root + tasks.get("compose_task", 0)
            cpus.append({"workers": [round(w1[w] - w0[w], 3) for w in w1],
                         "driver": round(d1 - d0, 3), "serial_s": round(serial, 3),
                         "task_cpu_s": {k: round(v, 3) for k, v in sorted(tasks.items())},
                         "moved_mb": round(sum(client.run(_moved_bytes).values()) / 1e6, 1)})
            cpus[-1]["predicted_s"] = round(predicted_seconds(cpus[-1], n_workers), 3)
            if meter:
                gains.append(client.run(_meter_stop))
    gain = {w: max(g[w] for g in gains) for w in gains[0]} if gains else {}
    best = int(np.argmin([c["predicted_s"] for c in cpus]))
    return min(times), seg[:], gain, info, cpus[best]


def workers_only(aff, aff_z, c, threshold, work, pairs):
    """One vs two workers, ``pairs`` times, alternating which goes first; each entry is a
    chunked_run (warm cluster, best of 2). The ratio uses each side's best wall time."""
    import segkit

    whole = segkit.agglomerate(aff, threshold, mode="mean")
    runs = []
    for k in range(pairs):
        for n in ((2, 1) if k % 2 == 0 else (1, 2)):
            load = os.getloadavg()[0]
            t, seg, _, _, cpu = chunked_run(aff_z, (c, c, c), threshold, n, work / f"w{k}_{n}",
                                            repeat=2)
            crit = max(cpu["workers"]) + cpu["driver"]
            runs.append({"workers": n, "wall_s": round(t, 3), "cpu": cpu,
                         "critical_cpu_s": round(crit, 3), "load_before": load,
                         "equal_whole": bool(np.array_equal(seg, whole)), "sha": sha(seg)})
            print(runs[-1])
    one = [r for r in runs if r["workers"] == 1]
    two = [r for r in runs if r["workers"] == 2]
    pair_ratios = [round(b["wall_s"] / a["wall_s"], 3) for a, b in zip(one, two, strict=True)]
    summary = {"one_wall_s": min(r["wall_s"] for r in one),
               "two_wall_s": min(r["wall_s"] for r in two),
               "wall_ratio": round(min(r["wall_s"] for r in two) /
                                   min(r["wall_s"] for r in one), 3),
               "pair_wall_ratios": pair_ratios,
               "cpu_ratio": round(min(r["critical_cpu_s"] for r in two) /
                                  min(r["critical_cpu_s"] for r in one), 3),
               # CPU critical path (predicted_seconds): serial tasks, driver, work / workers
               "predicted_ratio": round(min(r["cpu"]["predicted_s"] for r in two) /
                                        min(r["cpu"]["predicted_s"] for r in one), 3),
               "all_equal_whole": all(r["equal_whole"] for r in runs),
               "hashes": sorted({r["sha"] for r in runs})}
    return {"runs": runs, "summary": summary}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=256)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--quick", action="store_true", help="skip the 1-vs-2 worker timing")
    ap.add_argument("--workers-only", action="store_true",
                    help="only the 1-vs-2 worker timing (and its equality check)")
    ap.add_argument("--pairs", type=int, default=1,
                    help="with --workers-only: alternating (two, one) pairs to time")
    ap.add_argument("--out", type=Path, default=OUT, help="where the JSON goes")
    args = ap.parse_args()

    import zarr
    from mlsys_datasets import em_volume

    import segkit
    from segkit import metrics, reference

    res = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
           "load_before": os.getloadavg(), "params": vars(args)}
    side, T = args.side, args.threshold
    t0 = time.perf_counter()
    vol = em_volume(side, seed=0, missing_sections=1, misaligned_sections=1)
    res["generate_s"] = round(time.perf_counter() - t0, 1)
    aff = vol.affinities
    work = Path(tempfile.mkdtemp(prefix="seg-bench-"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # ~150 MB of zarr chunks per run
    aff_z = zarr.open_array(store=str(work / "aff.zarr"), mode="w", shape=aff.shape,
                            chunks=(3, args.chunk, args.chunk, args.chunk), dtype="float32")
    aff_z[:] = aff
    print(f"volume {side}^3 in {res['generate_s']} s; load {res['load_before']}")
    if args.workers_only:  # kept as "workers_pairs" beside a full run's figures in --out
        pairs = workers_only(aff, aff_z, args.chunk, T, work, args.pairs)
        full = json.loads(args.out.read_text()) if args.out.exists() else {}
        full["workers_pairs"] = {"command": " ".join(["python", *sys.argv]),
                                 "machine": res["machine"], "load_before": res["load_before"],
                                 "load_after": os.getloadavg(), **pairs}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(full, indent=2, default=str))
        print(json.dumps(pairs["summary"], indent=2))
        print(f"wrote workers_pairs into {args.out}")
        return

    # --- speed and slope (whole volume), warm
    segkit.agglomerate(aff[:, :16, :16, :16], T, mode="mean")
    segkit.agglomerate(aff[:, :16, :16, :16], 0.3)
    speed = {}
    for s in sorted({64, 128, side}):
        v = aff if s == side else em_volume(s, seed=0, missing_sections=1,
                                            misaligned_sections=1).affinities
        t_ws, c_ws, basins = best_with_result(2, lambda v=v: segkit.watershed(v))
        t_sd, c_sd, _ = best_with_result(2, lambda v=v: segkit.agglomerate(v, 0.3, size=1000))
        t_mean, c_mean, _ = best_with_result(2, lambda v=v: segkit.agglomerate(v, T, mode="mean"))
        speed[s] = {"watershed_s": round(t_ws, 3), "ws_plus_sdsl_s": round(t_sd, 3),
                    "ws_plus_mean_s": round(t_mean, 3), "watershed_cpu_s": round(c_ws, 3),
                    "ws_plus_sdsl_cpu_s": round(c_sd, 3), "ws_plus_mean_cpu_s": round(c_mean, 3),
                    "basins": int(len(np.unique(basins))), "load": os.getloadavg()[0]}
        print(f"{s}^3: {speed[s]}")
    res["speed"] = speed
    lo, hi = min(speed), max(speed)
    ratio = (hi / lo) ** 3
    res["slope"] = {k: round(float(np.log(speed[hi][k] / speed[lo][k]) / np.log(ratio)), 3)
                    for k in ("watershed_s", "ws_plus_sdsl_s", "ws_plus_mean_s", "watershed_cpu_s",
                              "ws_plus_sdsl_cpu_s", "ws_plus_mean_cpu_s")}

    # --- quality
    truth = vol.labels
    basins = segkit.watershed(aff)
    f_ws = metrics.adapted_rand(truth, basins)["f"]
    f_sd = {size: metrics.adapted_rand(truth, segkit.agglomerate(aff, 0.3, basins=basins,
                                                                  size=size))["f"]
            for size in (500, 1000, 2000)}
    ts = [round(x, 2) for x in np.arange(0.05, 0.96, 0.05)]
    wz = reference.waterz_mean(aff, ts)
    f_wz = {t: metrics.adapted_rand(truth, s)["f"] for t, s in wz.items()}
    best_t = max(f_wz, key=f_wz.get)
    best_size = max(f_sd, key=f_sd.get)
    res["quality"] = {"f_watershed": round(f_ws, 4), "f_sdsl": {k: round(v, 4) for k, v in
                                                                 f_sd.items()},
                      "f_waterz": {str(k): round(v, 4) for k, v in f_wz.items()},
                      "waterz_best_t": best_t, "sdsl_best_size": best_size,
                      "basins_equal_waterz": reference.same_partition(
                          basins, reference.waterz_basins(aff)),
                      "mean_equal_waterz_at_t": reference.same_partition(
                          segkit.agglomerate(aff, T, mode="mean", basins=basins), wz[T])
                      if T in wz else None}
    print("quality", res["quality"]["f_watershed"], f_sd, best_t, f_wz[best_t])
    del wz

    # --- determinism and the whole-volume reference
    whole = segkit.agglomerate(aff, T, mode="mean")
    res["rerun"] = {"mean": [sha(whole), sha(segkit.agglomerate(aff, T, mode="mean"))],
                    "sdsl": [sha(segkit.agglomerate(aff, 0.3, size=best_size)),
                             sha(segkit.agglomerate(aff, 0.3, size=best_size))]}

    # --- memory: whole volume in a fresh process vs chunked workers
    whole_mib, whole_s, whole_cpu = whole_volume_memory(work / "aff.zarr", T)
    c = args.chunk
    _, seg2, gain2, info, cpu2 = chunked_run(aff_z, (c, c, c), T, 2, work / "two", meter=True)
    res["memory"] = {"whole_volume_peak_gain_mib": round(whole_mib, 1),
                     "whole_volume_s": round(whole_s, 2), "whole_volume_cpu_s": round(whole_cpu, 2),
                     "chunked_worker_peak_gain_mib": {str(k): round(v, 1) for k, v in
                                                      gain2.items()},
                     "chunk": c}
    print("memory", res["memory"])
    equal = {str((c, c, c)): bool(np.array_equal(seg2, whole))}
    hashes = [sha(seg2)]

    # --- one vs two workers (same job, warm)
    if not args.quick:
        t2, _, _, _, cpu2 = chunked_run(aff_z, (c, c, c), T, 2, work / "two_t", repeat=2)
        t1, seg1, _, _, cpu1 = chunked_run(aff_z, (c, c, c), T, 1, work / "one", repeat=2)
        hashes.append(sha(seg1))
        # On a machine whose load is far above its 2 cores, wall times say little; the CPU
        # seconds each process used do not depend on the load. With a core per worker, the
        # job takes about the busiest worker's CPU time plus the driver's (a lower bound on
        # wall time, ignoring waits between rounds).
        crit1 = max(cpu1["workers"]) + cpu1["driver"]
        crit2 = max(cpu2["workers"]) + cpu2["driver"]
        res["workers"] = {"one_wall_s": round(t1, 2), "two_wall_s": round(t2, 2),
                          "wall_ratio": round(t2 / t1, 3), "one_cpu": cpu1, "two_cpu": cpu2,
                          "one_critical_cpu_s": round(crit1, 3),
                          "two_critical_cpu_s": round(crit2, 3),
                          "cpu_ratio": round(crit2 / crit1, 3),
                          "predicted_ratio": round(cpu2["predicted_s"] / cpu1["predicted_s"],
                                                   3)}
        print("workers", res["workers"])
    res["rerun"]["chunked"] = hashes

    # --- more chunkings, ragged included (in-process workers: equality only)
    from dask.distributed import Client

    with Client(processes=False, n_workers=1, threads_per_worker=2,
                dashboard_address="127.0.0.1:0") as client:
        for chunks in [(c * 2, c * 2, c * 2), (100, 90, 70), (side, c // 2, side)]:
            seg = segkit.chunked_agglomerate(aff_z, chunks, T, client=client,
                                             workdir=work / f"eq{chunks}")
            equal[str(chunks)] = bool(np.array_equal(seg[:], whole))
            print("equal", chunks, equal[str(chunks)])
    res["equal"] = equal

    # --- projection from the round-0 tasks at chunk c
    r0 = info["rounds"][0]
    per_task_s = float(np.median([t["cpu_seconds"] for t in r0]))  # CPU, inside the task
    per_task_wall = float(np.median([t["seconds"] for t in r0]))
    n_basins = len(np.unique(basins)) - 1
    per_chunk = n_basins / len(r0)
    tasks = 135e9 / per_chunk
    worker_mib = max(gain2.values())
    up = [sum(t["edges_up"] for t in r) for r in info["rounds"]]
    all_cpu = sum(cpu2["workers"]) / len(r0)
    res["projection"] = {
        "chunk": c, "round0_task_median_cpu_s": round(per_task_s, 3),
        "round0_task_median_wall_s": round(per_task_wall, 3),
        "later_rounds_cpu_s": [round(sum(t["cpu_seconds"] for t in r), 3)
                               for r in info["rounds"][1:]],
        "round0_task_arrays_mib": round(max(t["bytes"] for t in r0) / 2 ** 20, 2),
        "worker_peak_gain_mib": round(worker_mib, 1), "supervoxels_per_chunk": round(per_chunk),
        "edges_passed_up_per_round": up,
        "tasks_for_135e9": float(f"{tasks:.3g}"),
        "round0_cpu_hours": round(tasks * per_task_s / 3600),
        "hours_on_1000_workers": round(tasks * per_task_s / 3600 / 1000, 2),
        "hours_on_10000_workers": round(tasks * per_task_s / 3600 / 10000, 3),
        # every phase (shells, basins, round 0, later rounds, relabel, Dask's own work): the
        # two workers' CPU seconds over the run, per chunk
        "all_phases_worker_cpu_s_per_chunk": round(all_cpu, 3),
        "all_phases_cpu_hours_for_135e9": round(tasks * all_cpu / 3600),
        "all_phases_hours_on_1000_workers": round(tasks * all_cpu / 3600 / 1000, 2),
        "all_phases_hours_on_10000_workers": round(tasks * all_cpu / 3600 / 10000, 3),
        "note": "round0_*: round 0 tasks only; all_phases_*: every task of the chunked run at "
                "this size, 3 levels of rounds (135e9 supervoxels make 1.5e7 chunks of this "
                "size: about 9 levels); the linking and composing of maps (one task each) "
                "also grow with the volume; per-task memory is the worker's peak gain, "
                "independent of the volume size"}
    res["load_after"] = os.getloadavg()

    q = res["quality"]
    best_sd = max(q["f_sdsl"].values())
    res["goals"] = {
        "chunked_equals_whole_every_chunking": all(equal.values()),
        "worker_memory_le_quarter_of_whole": worker_mib <= whole_mib / 4,
        "two_workers_le_0.65x_one (wall)": (res["workers"]["wall_ratio"] <= 0.65)
        if "workers" in res else None,
        "two_workers_le_0.65x_one (CPU critical path)": (res["workers"]["cpu_ratio"] <= 0.65)
        if "workers" in res else None,
        "two_workers_le_0.65x_one (predicted)": (res["workers"]["predicted_ratio"] <= 0.65)
        if "workers" in res else None,
        "ws_plus_sdsl_256_le_10s (wall)": speed[hi]["ws_plus_sdsl_s"] <= 10,
        "ws_plus_sdsl_256_le_10s (CPU)": speed[hi]["ws_plus_sdsl_cpu_s"] <= 10,
        "ws_plus_mean_256_le_10s (CPU)": speed[hi]["ws_plus_mean_cpu_s"] <= 10,
        "slope_le_1.15 (sdsl, CPU)": res["slope"]["ws_plus_sdsl_cpu_s"] <= 1.15,
        "slope_le_1.15 (mean, CPU)": res["slope"]["ws_plus_mean_cpu_s"] <= 1.15,
        "sdsl_gain_ge_0.10": best_sd - q["f_watershed"] >= 0.10,
        "sdsl_within_0.02_of_waterz_best": best_sd >= f_wz[best_t] - 0.02,
        "reruns_bit_identical": all(len(set(v)) == 1 for v in res["rerun"].values()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.out.exists():  # keep a --workers-only run's pairs beside the new figures
        pairs = json.loads(args.out.read_text()).get("workers_pairs")
        if pairs is not None:
            res["workers_pairs"] = pairs
    args.out.write_text(json.dumps(res, indent=2, default=str))
    print(json.dumps(res["goals"], indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
