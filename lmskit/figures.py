"""lmskit's results as figures, drawn by the workbench's visual layer (mlsys_viz).

Each function takes lmskit's own objects (Lifetimes, Simulation, Graph) and returns a plotly
Figure; the conversion to plain data lives in lmskit.views, the drawing in mlsys_viz,
so notebooks, the benchmarks and these helpers all draw the same pictures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import views
from .graph import Graph
from .schedule import Lifetimes
from .simulate import Simulation

if TYPE_CHECKING:
    import plotly.graph_objects as go

# plotly and the drawing modules are imported inside each function, so that importing lmskit
# (or this module) pulls in no plotting library until a figure is asked for.

GiB = 2**30


def live_bytes(lt: Lifetimes, budget: int | None = None, title: str = "",
               graph: Graph | None = None) -> go.Figure:
    """Device (and host) bytes live at each position of the order, the budget, and the peak
    marked with the tensors live there (variables too when graph is given)."""
    if graph is not None:
        at_peak = views.live_at_peak(lt, graph)
    else:
        at_peak = [{"name": b.tensor, "bytes": b.bytes} for b in lt.live_at(lt.peak_position)]
    from mlsys_viz import memory_timeline

    host = lt.host_bytes.tolist() if lt.host_bytes.any() else None
    return memory_timeline(lt.device_bytes.tolist(), host, budget, at_peak,
                               title=title or f"live bytes, batch {lt.batch_size}")


def timeline(graph: Graph, sim: Simulation, max_ops: int = 3000) -> go.Figure:
    """Compute and copy streams over simulated time (needs simulate(..., timeline=True)),
    with device memory below (viz's memory traces on the time axis)."""
    if not sim.start:
        raise ValueError("run simulate(..., timeline=True) to keep per-op times")
    from plotly.subplots import make_subplots

    from mlsys_viz.memory import memory_traces

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
    for trace in memory_traces(list(curve), budget=sim.budget, x=list(t)):
        fig.add_trace(trace, row=2, col=1)
    fig.update_layout(title=f"{sim.device}, batch {sim.batch_size}: step {sim.step_time:.3f} s, "
                            f"overhead {sim.overhead:.1%}", barmode="overlay")
    fig.update_xaxes(title_text="seconds", row=2, col=1)
    fig.update_yaxes(title_text="device bytes", row=2, col=1)
    return fig


def swap_rewrite(original: Graph, rewritten: Graph, batch_size: int = 1,
                 drop_types=views.BOOKKEEPING_TYPES, title: str = "") -> go.Figure:
    """The graph before and after a swap rewrite, side by side at shared positions, with the
    swap-outs, swap-ins, their trigger edges, producers and readers highlighted."""
    from mlsys_viz import rewrite_figure

    before, after, highlight = views.rewrite_views(original, rewritten, batch_size, drop_types)
    return rewrite_figure(before, after, highlight,
                              title=title or "before and after the swap rewrite")


def with_and_without(graph: Graph, rewritten: Graph, device, batch_size: int,
                     budget: int | None = None, labels=("without swapping", "with swapping")):
    """The same step without and with swapping on one simulated time axis (viz.compare_steps):
    device and host bytes per op, each placed at the op's simulated start."""
    from mlsys_viz import compare_steps

    from .schedule import lifetimes
    from .simulate import simulate

    runs = {}
    for label, g in zip(labels, (graph, rewritten), strict=True):
        sim = simulate(g, device, batch_size, budget, timeline=True)
        lt = lifetimes(g, batch_size)
        runs[f"{label}: step {sim.step_time * 1e3:.3g} ms, peak "
             f"{views.human(lt.peak)}"] = views.step_series(lt, sim, g)
        budget = sim.budget if budget is None else budget
    return compare_steps(runs, budget=budget,
                             title=f"batch {batch_size} on {device}: without and with swapping")


def policies(sims: dict[str, Simulation]) -> go.Figure:
    """Step time and peak device memory per policy (planner.compare's result)."""
    import plotly.graph_objects as go

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
