"""Lifetime chart and memory timeline on hand-computed cases."""

import pytest

from mlsys_viz import human_bytes, lifetime_chart, lifetimes_and_memory, memory_timeline

INTERVALS = [
    {"name": "w", "start": 0, "end": 5, "bytes": 400, "kind": "weight"},
    {"name": "a1", "start": 1, "end": 4, "bytes": 1000, "kind": "activation", "host": [(2, 3)]},
    {"name": "g", "start": 4, "end": 5, "bytes": 400, "kind": "gradient"},
]


def test_one_bar_per_tensor_grouped_by_kind():
    fig = lifetime_chart(INTERVALS)
    by_name = {trace.name: trace for trace in fig.data}
    assert set(by_name) == {"weight", "activation", "gradient", "on host"}
    # A tensor live at positions 1..4 inclusive covers [0.5, 4.5] on the schedule axis.
    assert list(by_name["activation"].x) == [0.5, 4.5, None]
    assert list(by_name["on host"].x) == [1.5, 3.5, None]
    assert by_name["on host"].y[0] == by_name["activation"].y[0]  # drawn over its own row
    assert by_name["weight"].y[0] != by_name["activation"].y[0]


def test_memory_timeline_marks_the_peak():
    device = [400, 1400, 400, 400, 1800, 800]
    fig = memory_timeline(device, host=[0, 0, 1000, 1000, 0, 0], budget=1500,
                          live_at_peak=INTERVALS)
    peak = next(t for t in fig.data if t.name == "peak")
    assert list(peak.x) == [4] and list(peak.y) == [1800]
    assert "a1: 1000 B" in peak.hovertext
    budget = next(t for t in fig.data if t.name == "budget")
    assert list(budget.y) == [1500, 1500]


def test_combined_figure_shares_the_axis():
    fig = lifetimes_and_memory(INTERVALS, [1, 2, 3, 2, 1, 0])
    assert fig.layout.xaxis.matches == "x2" or fig.layout.xaxis2.matches == "x"


def test_bad_input():
    with pytest.raises(ValueError, match="tensor 'x': end 1 before start 3"):
        lifetime_chart([{"name": "x", "start": 3, "end": 1, "bytes": 4}])
    with pytest.raises(ValueError, match="host series has 2 points, device 3"):
        memory_timeline([1, 2, 3], host=[1, 2])


def test_human_bytes():
    assert human_bytes(512) == "512 B"
    assert human_bytes(16 * 2**30) == "16.0 GiB"
