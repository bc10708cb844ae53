"""Tensor lifetimes and memory over a step, as plotly figures.

  intervals: dicts with "name", "start", "end" (schedule positions, end inclusive), "bytes",
             "kind" (weight / activation / gradient / optimizer-state / temporary / ...), and
             optionally "hover" and "host": a list of (start, end) spans spent swapped out.
  series:    device and host bytes per schedule position (lists of equal length).
The lifetime chart draws one bar (a thick segment) per tensor, grouped by kind; the memory
timeline draws device and host bytes, the budget line, and marks the peak with the tensors live
there.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .graph import PALETTE
from .theme import OKABE_ITO, apply
from .units import human_bytes

_BLUE, _ORANGE, _GREEN, _VERMILLION, _PURPLE, _SKY, _BLACK, _YELLOW = OKABE_ITO
KIND_COLOURS = {
    "weight": _SKY,
    "activation": _BLUE,
    "gradient": _VERMILLION,
    "optimizer-state": _GREEN,
    "temporary": "#bbbbbb",
    "host": _ORANGE,
}


# Kinds without a fixed colour get the next palette colour, the same one for the whole process.
_SPARE_COLOURS: dict[str, str] = {}


def _kind_colour(kind):
    if kind not in KIND_COLOURS and kind not in _SPARE_COLOURS:
        _SPARE_COLOURS[kind] = PALETTE[len(_SPARE_COLOURS) % len(PALETTE)]
    return KIND_COLOURS.get(kind) or _SPARE_COLOURS[kind]


def _check_intervals(intervals):
    for item in intervals:
        if item["end"] < item["start"]:
            raise ValueError(f"tensor {item['name']!r}: end {item['end']} before start "
                             f"{item['start']}")
        if item["bytes"] < 0:
            raise ValueError(f"tensor {item['name']!r}: negative size {item['bytes']}")


def _segments(spans):
    """x/y lists drawing each (row, start, end) span as one horizontal segment."""
    xs, ys = [], []
    for row, start, end in spans:
        xs += [start - 0.5, end + 0.5, None]
        ys += [row, row, None]
    return xs, ys


def lifetime_traces(intervals, max_bars: int = 2000):
    """One thick horizontal segment per tensor (the largest ``max_bars``), one trace per kind.

    Segments of a scatter trace, not plotly bars: horizontal bars vanish from a figure that
    carries animation frames (seen with plotly.js in Chromium), and one line trace per kind
    also draws thousands of tensors faster than bar shapes.
    """
    _check_intervals(intervals)
    chosen = sorted(intervals, key=lambda t: -t["bytes"])[:max_bars]
    chosen.sort(key=lambda t: (t.get("kind", ""), t["start"], t["name"]))
    row = {t["name"]: i for i, t in enumerate(chosen)}
    # About 60% of a row's height on a ~300 px panel, so neighbouring rows stay apart.
    width = max(1.0, min(8.0, 180 / max(len(chosen), 1)))
    traces = []
    for kind in dict.fromkeys(t.get("kind", "tensor") for t in chosen):
        group = [t for t in chosen if t.get("kind", "tensor") == kind]
        xs, ys = _segments([(row[t["name"]], t["start"], t["end"]) for t in group])
        hover = [t.get("hover") or f"{t['name']}<br>{human_bytes(t['bytes'])}<br>"
                 f"[{t['start']}, {t['end']}]" for t in group]
        traces.append(go.Scatter(
            x=xs, y=ys, mode="lines", name=kind, line={"color": _kind_colour(kind),
                                                       "width": width},
            hovertext=[h for h in hover for _ in range(3)], hoverinfo="text",
        ))
    spans = [(row[t["name"]], a, b) for t in chosen for a, b in t.get("host", [])]
    if spans:
        xs, ys = _segments(spans)
        traces.append(go.Scatter(x=xs, y=ys, mode="lines", name="on host", hoverinfo="skip",
                                 line={"color": KIND_COLOURS["host"], "width": width}))
    return traces


def lifetime_chart(intervals, title: str = "Tensor lifetimes", max_bars: int = 2000):
    fig = go.Figure(lifetime_traces(intervals, max_bars))
    apply(fig)
    fig.update_layout(title=title, xaxis_title="schedule position (op index)",
                      yaxis={"title": "tensors", "showticklabels": False})
    return fig


def memory_traces(device, host=None, budget=None, live_at_peak=(), x=None):
    """Device / host bytes, budget and peak traces; ``x`` (default: positions 0..n-1) gives
    each point's place on the horizontal axis, e.g. simulated seconds."""
    steps = list(range(len(device))) if x is None else list(x)
    if len(steps) != len(device):
        raise ValueError(f"x has {len(steps)} points, device {len(device)}")
    traces = [go.Scatter(x=steps, y=list(device), name="device bytes", mode="lines",
                         line={"color": _BLUE, "shape": "hv"}, fill="tozeroy")]
    if host is not None:
        if len(host) != len(device):
            raise ValueError(f"host series has {len(host)} points, device {len(device)}")
        traces.append(go.Scatter(x=steps, y=list(host), name="host bytes", mode="lines",
                                 line={"color": KIND_COLOURS["host"], "shape": "hv"}))
    if budget is not None:
        traces.append(go.Scatter(x=[steps[0] if steps else 0, steps[-1] if steps else 0],
                                 y=[budget, budget],
                                 name="budget", mode="lines",
                                 line={"color": _VERMILLION, "dash": "dash"}))
    if len(device):
        peak = max(range(len(device)), key=lambda i: device[i])
        top = sorted(live_at_peak, key=lambda t: -t["bytes"])[:8]
        lines = [f"{t['name']}: {human_bytes(t['bytes'])}" for t in top]
        traces.append(go.Scatter(
            x=[steps[peak]], y=[device[peak]], mode="markers", name="peak",
            marker={"size": 14, "color": _VERMILLION, "symbol": "star"},
            hovertext=f"peak {human_bytes(device[peak])} at {steps[peak]:.6g}<br>"
                      + "<br>".join(lines),
            hoverinfo="text",
        ))
    return traces


def memory_timeline(device, host=None, budget=None, live_at_peak=(), title="Memory over the step",
                    x=None, x_title="schedule position (op index)"):
    """Device (and host) bytes per schedule position (or at ``x``), the budget, and the peak
    marked; hover the peak for the largest tensors live there."""
    fig = go.Figure(memory_traces(device, host, budget, live_at_peak, x=x))
    apply(fig)
    fig.update_layout(title=title, xaxis_title=x_title, yaxis_title="memory (bytes)",
                      hovermode="x")
    return fig


def lifetimes_and_memory(intervals, device, host=None, budget=None, live_at_peak=(),
                         title="Tensor lifetimes and memory"):
    """The lifetime chart above the memory timeline, sharing one schedule axis."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.6, 0.4],
                        vertical_spacing=0.04)
    for trace in lifetime_traces(intervals):
        fig.add_trace(trace, row=1, col=1)
    for trace in memory_traces(device, host, budget, live_at_peak):
        fig.add_trace(trace, row=2, col=1)
    apply(fig)
    fig.update_layout(title=title, height=720)
    fig.update_yaxes(title_text="tensors", showticklabels=False, row=1, col=1)
    fig.update_yaxes(title_text="memory (bytes)", row=2, col=1)
    fig.update_xaxes(title_text="schedule position (op index)", row=2, col=1)
    return fig


def compare_steps(runs: dict, budget=None, title: str = "The same step, two ways",
                  x_title: str = "simulated time (s)") -> go.Figure:
    """Several runs of one step stacked on one shared time axis, one row each.

    ``runs``: label -> {"x": times, "device": bytes, "host": bytes (optional), "peak_tensors":
    rows for the peak hover (optional)}. Each row shows device and host bytes, the budget and
    its peak; the axis is shared, so a longer step (swapping stalls) ends further right.
    """
    if not runs:
        raise ValueError("no runs to compare")
    labels = list(runs)
    fig = make_subplots(rows=len(labels), cols=1, shared_xaxes=True, shared_yaxes=True,
                        vertical_spacing=0.08, subplot_titles=labels)
    for row, label in enumerate(labels, start=1):
        run = runs[label]
        for trace in memory_traces(run["device"], run.get("host"), budget,
                                   run.get("peak_tensors", ()), x=run.get("x")):
            trace.legendgroup = trace.name
            trace.showlegend = row == 1
            fig.add_trace(trace, row=row, col=1)
        fig.update_yaxes(title_text="memory (bytes)", row=row, col=1)
    fig.update_xaxes(title_text=x_title, row=len(labels), col=1)
    apply(fig)
    fig.update_layout(title=title, hovermode="x",
                      height=260 * len(labels) + 120)
    return fig
