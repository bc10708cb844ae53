"""The step animation: bounded frames carrying only the changing traces, a playhead that moves
forward, and an exported HTML file that still holds the animation."""

import plotly.graph_objects as go
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlsys_workbench.viz import frame_positions, lifetime_animation

INTERVALS = [
    {"name": "w", "start": 0, "end": 9, "bytes": 400, "kind": "weight"},
    {"name": "a", "start": 1, "end": 7, "bytes": 1000, "kind": "activation", "host": [(3, 5)]},
]
DEVICE = [400, 1400, 1400, 400, 400, 400, 1400, 1400, 400, 400]
HOST = [0, 0, 0, 1000, 1000, 1000, 0, 0, 0, 0]


@given(st.integers(1, 5000), st.integers(2, 1000))
def test_frame_positions_are_bounded_sorted_and_span_the_step(length, most):
    positions = frame_positions(length, most)
    assert len(positions) <= most
    assert positions == sorted(set(positions))
    assert positions[0] == 0 and positions[-1] == length - 1


def test_frames_carry_only_the_changing_traces():
    fig = lifetime_animation(INTERVALS, DEVICE, HOST, budget=1500, max_frames=5)
    assert 2 <= len(fig.frames) <= 5
    static = len(fig.data)
    for frame in fig.frames:
        assert len(frame.data) == 4  # two playheads, device and host so far
        assert all(index < static for index in frame.traces)
    # The playhead moves forward through the schedule, frame by frame.
    xs = [frame.data[0].x[0] for frame in fig.frames]
    assert xs == sorted(xs) and xs[0] == 0 and xs[-1] == len(DEVICE) - 1
    # The memory drawn so far at a frame is exactly the series up to its position.
    last = fig.frames[-1].data[2]
    assert list(last.y) == DEVICE


def test_slider_has_one_step_per_frame_and_play_button_exists():
    fig = lifetime_animation(INTERVALS, DEVICE, max_frames=1000)
    assert len(fig.layout.sliders[0].steps) == len(fig.frames) == len(DEVICE)
    labels = [b.label for b in fig.layout.updatemenus[0].buttons]
    assert any("Play" in label for label in labels)


def test_exported_html_still_animates(tmp_path):
    fig = lifetime_animation(INTERVALS, DEVICE, HOST)
    path = tmp_path / "step.html"
    fig.write_html(path, include_plotlyjs=True)
    html = path.read_text()
    assert "<script src=\"http" not in html  # plotly.js is inlined: it opens offline
    assert html.count('"name":"9"') >= 1  # the last frame travelled into the file


def test_bad_input():
    with pytest.raises(ValueError, match="empty"):
        lifetime_animation([], [])
    with pytest.raises(ValueError, match="max_frames"):
        frame_positions(10, 1)
    assert isinstance(lifetime_animation(INTERVALS, DEVICE), go.Figure)
