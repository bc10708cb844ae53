"""segkit.znn.measure's timings on the shared timer (compilerkit.measure.timing), checked on a
fake wall clock: which calls are timed, in what order, and which run's records are kept."""

from __future__ import annotations

from compilerkit.measure import timing
from segkit.znn import measure


def test_thread_timings_interleave_and_keep_the_best_runs_records(monkeypatch):
    now = [0.0]
    monkeypatch.setitem(timing.CLOCKS, "wall", lambda: now[0])
    steps = {1: [5.0, 4.0, 6.0], 2: [3.0, 2.0, 2.5]}   # seconds of each timed pass

    class Net:
        calls: list = []

        def gradients(self, x, y, threads, return_run=False):
            self.calls.append(threads)
            if not return_run:                       # the warm-up: untimed, not recorded
                return None
            seconds = steps[threads].pop(0)
            now[0] += seconds
            return None, None, {"wall": seconds}

    net = Net()
    got = measure.thread_timings(net, None, None, threads=(1, 2), repeat=3)
    assert net.calls == [2] + [1, 2] * 3              # one warm-up at the most threads
    assert got == {1: {"seconds": 4.0, "run": {"wall": 4.0}},
                   2: {"seconds": 2.0, "run": {"wall": 2.0}}}


def test_parallel_ceiling_and_the_small_step_curve_report_what_they_measured():
    # no speed is asserted (a loaded machine measures anything): only that both are measured
    ceiling = measure.parallel_ceiling(seconds=0.002, repeat=1)
    assert 0 < ceiling < float("inf")
    rows = measure.small_step_curve([(2, 6, 1)], repeat=1, progress=False)
    assert [r["granularity"] for r in rows] == ["edge", "node"]
    edge, node = rows
    assert node["tasks"] < edge["tasks"]
    for r in rows:
        assert r["t1_s"] > 0 and r["t2_s"] > 0 and r["speedup"] == r["t1_s"] / r["t2_s"]
        assert len(r["machine_ceiling"]) == 2
