"""Plain plotly figures of lmskit's data: live bytes, a simulated timeline, policy comparison.

Deliberately plain (the workbench's visual layer makes the rich versions); each function takes
lmskit's own results and returns a plotly Figure, nothing else.
"""

from __future__ import annotations

import plotly.graph_objects as go

from .graph import Graph
from .schedule import Lifetimes
from .simulate import Simulation

GiB = 2**30


def live_bytes(lt: Lifetimes, budget: int | None = None, title: str = "") -> go.Figure:
    """Device (and host) GiB live at each position of the order, the peak marked."""
    x = list(range(len(lt.order)))
    fig = go.Figure()
    fig.add_scatter(x=x, y=lt.device_bytes / GiB, name="device", mode="lines",
                    text=lt.order, hovertemplate="%{text}<br>%{y:.3f} GiB")
    if lt.host_bytes.any():
        fig.add_scatter(x=x, y=lt.host_bytes / GiB, name="host", mode="lines")
    fig.add_scatter(x=[lt.peak_position], y=[lt.peak / GiB], mode="markers", name="peak",
                    text=[lt.peak_op], hovertemplate="peak at %{text}<br>%{y:.3f} GiB")
    if budget is not None:
        fig.add_hline(y=budget / GiB, line_dash="dash", annotation_text="budget")
    fig.update_layout(title=title or f"live bytes, batch {lt.batch_size}",
                      xaxis_title="position in the schedule", yaxis_title="GiB")
    return fig


def timeline(graph: Graph, sim: Simulation, max_ops: int = 3000) -> go.Figure:
    """Compute and copy streams over simulated time (needs simulate(..., timeline=True)),
    with device memory below."""
    if not sim.start:
        raise ValueError("run simulate(..., timeline=True) to keep per-op times")
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.4, 0.6])
    lanes = {"compute": [], "out": [], "in": []}
    for name in list(sim.start)[:max_ops]:
        if sim.end[name] > sim.start[name]:
            lanes[graph.ops[name].attrs.get("swap", "compute")].append(name)
    labels = {"compute": "compute", "out": "device->host", "in": "host->device"}
    for lane, names in lanes.items():
        fig.add_bar(y=[labels[lane]] * len(names), x=[sim.end[n] - sim.start[n] for n in names],
                    base=[sim.start[n] for n in names], orientation="h", name=labels[lane],
                    text=names, hovertemplate="%{text}", row=1, col=1)
    t, curve = sim.memory
    fig.add_scatter(x=t, y=[c / GiB for c in curve], mode="lines", line_shape="hv",
                    name="device GiB", row=2, col=1)
    fig.add_hline(y=sim.budget / GiB, line_dash="dash", row=2, col=1)
    fig.update_layout(title=f"{sim.device}, batch {sim.batch_size}: step {sim.step_time:.3f} s, "
                            f"overhead {sim.overhead:.1%}", barmode="overlay")
    fig.update_xaxes(title_text="seconds", row=2, col=1)
    return fig


def policies(sims: dict[str, Simulation]) -> go.Figure:
    """Step time and peak device memory per policy (planner.compare's result)."""
    names = list(sims)
    fig = go.Figure()
    fig.add_bar(x=names, y=[s.step_time for s in sims.values()], name="step time (s)",
                text=[f"{s.overhead:+.0%}" if s.fits else "OOM" for s in sims.values()])
    fig.add_scatter(x=names, y=[s.peak_device_bytes / GiB for s in sims.values()],
                    name="peak device GiB", yaxis="y2", mode="markers")
    fig.update_layout(yaxis=dict(title="step time (s)"),
                      yaxis2=dict(title="GiB", overlaying="y", side="right"),
                      title="policies at one batch size")
    return fig
