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


def _so_far(series, position):
    return {"x": list(range(position + 1)), "y": list(series[: position + 1])}


def lifetime_animation(intervals, device, host=None, budget=None, live_at_peak=(),
                       max_frames: int = 300, title: str = "One training step",
                       frame_ms: int = 60) -> go.Figure:
    """Lifetimes above memory with a moving playhead; returns a figure with frames."""
    device = list(device)
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
    for position in frame_positions(len(device), max_frames):
        data = [go.Scatter(x=[position, position], y=[-0.5, rows]),
                go.Scatter(x=[position, position], y=[0, high]),
                go.Scatter(**_so_far(device, position))]
        if host is not None:
            data.append(go.Scatter(**_so_far(host, position)))
        name = str(position)
        frames.append(go.Frame(name=name, data=data, traces=changing))
        steps.append({"label": name, "method": "animate",
                      "args": [[name], {"mode": "immediate", "frame": {"duration": 0,
                                                                        "redraw": False},
                                        "transition": {"duration": 0}}]})
    fig.frames = frames
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
    return fig
