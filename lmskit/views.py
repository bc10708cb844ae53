"""Plain data views of lmskit results, for notebooks and the workbench's pictures: one name,
``lmskit.views``, for the three modules the views live in, and ``table``, which prints rows.

The views turn lmskit objects (Graph, Lifetimes, Simulation) into the plain dicts and lists
that ``mlsys_viz`` draws (nodes / edges, lifetime intervals, live-at-peak rows) or into small
tables (lists of dicts), so the notebooks stay thin:

- ``graph_views``: graph_view / collapsed_view / rewrite_highlight / rewrite_views: a Graph as
  viz nodes and edges, coloured by phase (swap-outs and swap-ins in their own colours),
  optionally folded into one cluster per (phase, layer) so a ~9,000-op ResNet-50 step draws as
  a few hundred boxes; a swap rewrite's before and after.
- ``memory_views``: phase_counts, tensor_table, bytes_by_batch: what a captured step holds,
  symbolically in the batch (shape(b) = coef * b + const per dimension, so other batch sizes
  need no re-trace); intervals, live_at_peak, peak_by_batch, step_series: Lifetimes as
  lifetime-chart intervals (host spans of swapped tensors included), the breakdown at the peak,
  how the peak grows with the batch; saved_bytes_by_type, swapin_leads: which op types make the
  tensors the backward pass reads (TFLMS v1 never swaps "atomic" Mul/Add outputs), and how
  early each swap-in's trigger brings its copy back (why v1 gets less out of Keras 3 graphs
  than the paper did).
- ``study_views``: max_batches, throughput_curve, sweep_v2, tuning_gain, largest_side: the
  batch-size, parameter-tuning and cube-side studies as rows (each row one simulation), with
  communication overhead = step time - compute time.

Nothing here imports TensorFlow beyond what lmskit already did; nothing draws.
"""

from __future__ import annotations

from mlsys_viz.units import human_bytes as human

from .graph_views import (
    ASIDE_TYPES,
    BACKWARD_SCOPE,
    BOOKKEEPING_TYPES,
    collapsed_view,
    graph_view,
    group_of,
    layer_of,
    rewrite_highlight,
    rewrite_views,
)
from .memory_views import (
    bytes_by_batch,
    intervals,
    live_at_peak,
    peak_by_batch,
    phase_counts,
    saved_bytes_by_type,
    step_series,
    swapin_leads,
    tensor_table,
)
from .study_views import (
    best_throughput,
    largest_side,
    max_batches,
    sim_row,
    sweep_v2,
    throughput_curve,
    tuning_gain,
)


def table(rows: list[dict], columns=None, max_rows: int = 40) -> str:
    """Rows of dicts as a fixed-width text table; byte columns (named bytes / peak / swapped /
    host_peak or a kind) shown human-readable, floats with 3 significant digits."""
    if not rows:
        return "(no rows)"
    columns = list(columns or dict.fromkeys(k for r in rows for k in r))
    bytes_cols = {"bytes", "peak", "swapped", "host_peak", "weight", "activation", "gradient",
                  "optimizer-state", "temporary"}

    def fmt(col, v):
        if v is None:
            return "-"
        if col in bytes_cols and isinstance(v, (int, float)) and not isinstance(v, bool):
            return human(v)
        if isinstance(v, float):
            return f"{v:.3g}"
        return str(v)

    shown = rows[:max_rows]
    cells = [[fmt(c, r.get(c)) for c in columns] for r in shown]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    if len(rows) > max_rows:
        lines.append(f"... {len(rows) - max_rows} more rows")
    return "\n".join(lines)


__all__ = ["human", "group_of", "graph_view", "layer_of", "collapsed_view", "rewrite_highlight",
           "rewrite_views", "step_series", "ASIDE_TYPES",
           "phase_counts", "tensor_table", "bytes_by_batch", "intervals", "live_at_peak",
           "peak_by_batch", "saved_bytes_by_type", "swapin_leads", "sim_row", "max_batches",
           "best_throughput", "throughput_curve",
           "sweep_v2",
           "tuning_gain", "largest_side", "table", "BOOKKEEPING_TYPES", "BACKWARD_SCOPE"]
