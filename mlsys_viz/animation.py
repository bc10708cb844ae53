"""An animation of one training step: a playhead moves through the schedule over the lifetime
chart and the memory timeline; the device (and host) memory used so far fills behind it.

Plotly frames carry only the traces that change (the playhead lines and the filled-so-far
series), and at most `max_frames` of them (longer schedules are sampled evenly), so a browser
stays responsive (about 1,000 frames is the practical ceiling). The play button and slider are
plotly's own: they run in the browser, in JupyterLab and in an exported HTML file alike.

`animation_widget` is the JupyterLab control for the same figure: an ``ipywidgets.Play`` and an
``IntSlider`` linked in the browser (``jslink``: the Play moves the slider with no round trip),
driving a plotly ``FigureWidget`` copy of the figure without its frames: each slider value
copies frame k's changing traces into the widget. In a plain Python process (no front end) it
is an inert widget whose figure still updates when the slider's value is set.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .memory import lifetimes_and_memory
from .theme import OKABE_ITO
from .units import human_bytes

PLAYHEAD = "#222"


def frame_positions(length: int, max_frames: int) -> list[int]:
    """Evenly spaced schedule positions, first and last included, at most `max_frames`."""
    if length <= 0:
        raise ValueError("the schedule is empty: nothing to animate")
    if max_frames < 2:
        raise ValueError(f"max_frames must be at least 2, got {max_frames}")
    if length <= max_frames:
        return list(range(length))
    return sorted(set(np.linspace(0, length - 1, max_frames).round().astype(int).tolist()))


def key_points(series_list, max_points: int) -> list[int]:
    """The indexes each frame's "so far" curve is drawn through: every index when the step is
    short, else the first and last plus the highest point of each of ``max_points`` bins of
    every series (so the peaks survive the thinning and frames stay small); the frame's own
    position is added by _so_far."""
    length = len(series_list[0])
    if length <= max_points:
        return list(range(length))
    keep = {0, length - 1}
    edges = np.linspace(0, length, max_points + 1).astype(int)
    for series in series_list:
        values = np.asarray(series)
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            if hi > lo:
                keep.add(int(lo + values[lo:hi].argmax()))
    return sorted(keep)


def _so_far(series, position, keys=None):
    if keys is None:
        return {"x": list(range(position + 1)), "y": list(series[: position + 1])}
    xs = [k for k in keys[: int(np.searchsorted(keys, position, side="right"))]]
    if not xs or xs[-1] != position:
        xs.append(position)
    return {"x": xs, "y": [series[k] for k in xs]}


def lifetime_animation(intervals, device, host=None, budget=None, live_at_peak=(),
                       max_frames: int = 300, title: str = "One training step",
                       frame_ms: int = 60, max_points: int = 400) -> go.Figure:
    """Lifetimes above memory with a moving playhead; returns a figure with frames.

    Steps longer than ``max_points`` draw the memory filled so far through at most about
    ``max_points`` points per series and frame (peaks kept), so 1,000 frames of a 10,000-op
    step stay a few MB."""
    device = list(device)
    host = None if host is None else list(host)
    fig = lifetimes_and_memory(intervals, device, host, budget, live_at_peak, title=title)
    top = max([t["end"] for t in intervals] + [len(device) - 1, 0])
    rows = max(len(intervals), 1)
    high = max(device + list(host or []) + [budget or 0, 1])
    # The traces each frame replaces, appended last so their indexes are known.
    fig.add_trace(go.Scatter(x=[0, 0], y=[-0.5, rows], mode="lines", name="now",
                             line={"color": PLAYHEAD, "width": 2}, hoverinfo="skip",
                             showlegend=False), row=1, col=1)
    fig.add_trace(go.Scatter(x=[0, 0], y=[0, high], mode="lines", name="now ",
                             line={"color": PLAYHEAD, "width": 2}, hoverinfo="skip",
                             showlegend=False), row=2, col=1)
    fig.add_trace(go.Scatter(**_so_far(device, 0), mode="lines", name="device so far",
                             line={"color": OKABE_ITO[0], "width": 3, "shape": "hv"}),
                  row=2, col=1)
    changing = [len(fig.data) - 3, len(fig.data) - 2, len(fig.data) - 1]
    if host is not None:
        fig.add_trace(go.Scatter(**_so_far(host, 0), mode="lines", name="host so far",
                                 line={"color": OKABE_ITO[3], "width": 3, "shape": "hv"}),
                      row=2, col=1)
        changing.append(len(fig.data) - 1)
    frames, steps = [], []
    positions = frame_positions(len(device), max_frames)
    keys = key_points([device] + ([host] if host is not None else []), max_points)
    for position in positions:
        # Plain dicts, validated once below: go.Scatter per frame costs seconds per 1,000.
        data = [{"type": "scatter", "x": [position, position], "y": [-0.5, rows]},
                {"type": "scatter", "x": [position, position], "y": [0, high]},
                {"type": "scatter", **_so_far(device, position, keys)}]
        if host is not None:
            data.append({"type": "scatter", **_so_far(host, position, keys)})
        name = str(position)
        frames.append({"name": name, "data": data, "traces": changing})
        steps.append({"label": name, "method": "animate",
                      "args": [[name], {"mode": "immediate", "frame": {"duration": 0,
                                                                        "redraw": False},
                                        "transition": {"duration": 0}}]})
    play = {"frame": {"duration": frame_ms, "redraw": False}, "fromcurrent": True,
            "transition": {"duration": 0}, "mode": "immediate"}
    pause = {"mode": "immediate", "frame": {"duration": 0, "redraw": False}}
    # Play / Pause on the left and the slider's "position N" label on the right, both in the
    # band above the slider rail, so they cannot overlap whatever the figure's width.
    fig.update_layout(
        updatemenus=[{"type": "buttons", "showactive": False, "x": 0, "y": -0.07,
                      "xanchor": "left", "yanchor": "top", "direction": "left",
                      "pad": {"t": 0, "r": 0},
                      "buttons": [{"label": "▶ Play", "method": "animate", "args": [None, play]},
                                  {"label": "❚❚ Pause", "method": "animate",
                                   "args": [[None], pause]}]}],
        sliders=[{"active": 0, "steps": steps, "x": 0, "len": 1, "y": -0.07,
                  "xanchor": "left", "yanchor": "top", "pad": {"t": 40, "b": 0},
                  "currentvalue": {"prefix": "position ", "xanchor": "right"}}],
        height=780, margin={"b": 110},
    )
    fig.update_xaxes(range=[-0.5, top + 0.5])
    fig.layout.meta = {"peak": human_bytes(max(device)) if device else "0 B",
                       "frames": len(frames)}
    # Frames built by hand above are well formed; skip plotly's per-value validation of them.
    return go.Figure(data=fig.data, layout=fig.layout, frames=frames, _validate=False)


def frame_updates(fig: go.Figure) -> tuple[list[int], list[list[dict]]]:
    """(changing trace indexes, per frame the {"x", "y"} of each changing trace): what the
    slider of `animation_widget` copies into its figure, read from ``fig.frames``."""
    if not fig.frames:
        raise ValueError("the figure has no frames: build it with lifetime_animation")
    traces = list(fig.frames[0].traces or range(len(fig.frames[0].data)))
    updates = []
    for frame in fig.frames:
        if list(frame.traces or range(len(frame.data))) != traces:
            raise ValueError("every frame must change the same traces")
        updates.append([{"x": list(d.x), "y": list(d.y)} for d in frame.data])
    return traces, updates


def _figure_widget(fig: go.Figure):
    """A FigureWidget of ``fig`` (needs anywidget); a plain Figure where it cannot be made,
    so the control still works (inertly) without a widget front end."""
    try:
        return go.FigureWidget(data=fig.data, layout=fig.layout)
    except (ImportError, ValueError):  # no anywidget: same data, no live front end
        return go.Figure(data=fig.data, layout=fig.layout)


def animation_widget(fig: go.Figure, interval_ms: int = 100):
    """An ``ipywidgets.Play`` and an ``IntSlider`` (linked client side with ``jslink``) over a
    FigureWidget of ``fig``, an animation made by `lifetime_animation` (kept as it is: its own
    play button is what animates in exported HTML). Slider value k draws frame k: the changing
    traces (playheads, memory so far) get that frame's data, in one batched update.

    Returns an ``ipywidgets.VBox`` with attributes ``play``, ``slider``, ``link`` (the jslink),
    ``figure`` (the FigureWidget, or a plain Figure where anywidget is missing), ``traces`` (the
    indexes of the traces the slider changes) and ``positions`` (each frame's position)."""
    import ipywidgets as widgets

    traces, updates = frame_updates(fig)
    labels = [frame.name for frame in fig.frames]
    layout = go.Layout(fig.layout)
    layout.updatemenus, layout.sliders = (), ()
    layout.height = max(400, (layout.height or 700) - 60)
    layout.margin.b = None
    layout.autosize = True  # a FigureWidget is 700 px wide unless told to fill its box
    shown = _figure_widget(go.Figure(data=fig.data, layout=layout))
    last = len(updates) - 1
    play = widgets.Play(value=0, min=0, max=last, step=1, interval=interval_ms,
                        description="play", show_repeat=False)
    slider = widgets.IntSlider(value=0, min=0, max=last, step=1, description="frame",
                               readout=False, continuous_update=True,
                               layout=widgets.Layout(width="60%"))
    where = widgets.Label(value=f"position {labels[0]}")
    link = widgets.jslink((play, "value"), (slider, "value"))

    def draw(change):
        # The Play moves the slider in the browser (jslink); only the slider is observed here,
        # so the kernel never writes back into a running Play.
        k = int(change["new"])
        with shown.batch_update():
            for index, data in zip(traces, updates[k], strict=True):
                shown.data[index].x = data["x"]
                shown.data[index].y = data["y"]
        where.value = f"position {labels[k]}"

    slider.observe(draw, names="value")
    box = widgets.VBox([widgets.HBox([play, slider, where]), shown],
                       layout=widgets.Layout(width="100%"))
    box.play, box.slider, box.link, box.figure = play, slider, link, shown
    box.traces, box.positions = traces, labels
    return box
