"""The step animation: bounded frames carrying only the changing traces, a playhead that moves
forward, and an exported HTML file that still holds the animation."""

import plotly.graph_objects as go
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlsys_viz import frame_positions, lifetime_animation

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


# The JupyterLab control: ipywidgets Play + slider over a FigureWidget of the same animation.

def test_widget_slider_spans_the_frames_and_is_linked_to_play():
    from mlsys_viz import animation_widget

    fig = lifetime_animation(INTERVALS, DEVICE, HOST, budget=1500, max_frames=6)
    box = animation_widget(fig)
    assert box.slider.max == box.play.max == len(fig.frames) - 1
    assert box.slider.min == box.play.min == 0
    assert type(box.figure).__name__ == "FigureWidget"
    assert not box.figure.frames and not box.figure.layout.sliders  # the widget drives it
    # A client-side link, Play value -> slider value (jslink: no kernel round trip).
    from ipywidgets.widgets.widget_link import Link

    assert isinstance(box.link, Link)
    assert box.link.source == (box.play, "value") and box.link.target == (box.slider, "value")


def test_setting_the_slider_draws_that_frame():
    from mlsys_viz import animation_widget

    fig = lifetime_animation(INTERVALS, DEVICE, HOST, budget=1500, max_frames=6)
    box = animation_widget(fig)
    # Independent of the widget: which traces frame k replaces, and with what.
    for k in (len(fig.frames) - 1, 2, 0):
        box.slider.value = k
        frame = fig.frames[k]
        for index, data in zip(frame.traces, frame.data, strict=True):
            assert list(box.figure.data[index].x) == list(data.x)
            assert list(box.figure.data[index].y) == list(data.y)
        playhead = box.figure.data[frame.traces[0]]
        assert playhead.name == "now" and playhead.x[0] == int(frame.name)
    # The static traces (lifetime bars, full memory curves) never change.
    for index in set(range(len(fig.data))) - set(fig.frames[0].traces):
        drawn = {k: v for k, v in box.figure.data[index].to_plotly_json().items() if k != "uid"}
        assert drawn == fig.data[index].to_plotly_json()


def test_widget_needs_frames():
    from mlsys_viz import animation_widget

    with pytest.raises(ValueError, match="no frames"):
        animation_widget(go.Figure())


def test_buttons_and_slider_label_do_not_overlap():
    """The cosmetic bug: the slider's "position N" label sat under the Pause button. Now the
    buttons are anchored left and the label right, in the band above the slider rail."""
    fig = lifetime_animation(INTERVALS, DEVICE, HOST)
    menu, slider = fig.layout.updatemenus[0], fig.layout.sliders[0]
    assert menu.xanchor == "left" and menu.x == 0
    assert slider.currentvalue.xanchor == "right" and slider.x + slider.len == 1


def test_widget_in_a_plain_python_process():
    """No kernel, no front end: the control is built, the slider still redraws the figure."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    script = textwrap.dedent("""
        import sys
        import mlsys_viz as viz
        iv = [{"name": "a", "start": 0, "end": 3, "bytes": 10, "kind": "activation"}]
        fig = viz.lifetime_animation(iv, [10, 10, 10, 10], [0, 5, 0, 0])
        box = viz.animation_widget(fig)
        box.slider.value = 2
        print(type(box.figure).__name__, box.figure.data[box.traces[0]].x[0],
              "ipykernel" in sys.modules)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=repo, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["FigureWidget", "2", "False"]
