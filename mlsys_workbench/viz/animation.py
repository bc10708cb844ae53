"""An animation of one training step: a playhead moves through the schedule over the lifetime
chart and the memory timeline; the device (and host) memory used so far fills behind it.

Plotly frames carry only the traces that change (the playhead lines and the filled-so-far
series), and at most `max_frames` of them (longer schedules are sampled evenly), so a browser
stays responsive (about 1,000 frames is the practical ceiling). The play button and slider are
plotly's own: they run in the browser, in JupyterLab and in an exported HTML file alike.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .memory import human_bytes, lifetimes_and_memory

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
                             line={"color": "#1f4e79", "width": 3, "shape": "hv"}),
                  row=2, col=1)
    changing = [len(fig.data) - 3, len(fig.data) - 2, len(fig.data) - 1]
    if host is not None:
        fig.add_trace(go.Scatter(**_so_far(host, 0), mode="lines", name="host so far",
                                 line={"color": "#c05a00", "width": 3, "shape": "hv"}),
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
    fig.update_layout(
        updatemenus=[{"type": "buttons", "showactive": False, "x": 0, "y": -0.08,
                      "xanchor": "left", "yanchor": "top", "direction": "left",
                      "buttons": [{"label": "▶ Play", "method": "animate", "args": [None, play]},
                                  {"label": "❚❚ Pause", "method": "animate",
                                   "args": [[None], pause]}]}],
        sliders=[{"active": 0, "steps": steps, "x": 0.12, "len": 0.88, "y": -0.06,
                  "currentvalue": {"prefix": "position "}, "pad": {"t": 30}}],
        height=760,
    )
    fig.update_xaxes(range=[-0.5, top + 0.5])
    fig.layout.meta = {"peak": human_bytes(max(device)) if device else "0 B",
                       "frames": len(frames)}
    # Frames built by hand above are well formed; skip plotly's per-value validation of them.
    return go.Figure(data=fig.data, layout=fig.layout, frames=frames, _validate=False)
