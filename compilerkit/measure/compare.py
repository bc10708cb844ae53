"""Where the time goes on each side: compilerkit's per-node profile beside onnxruntime's, added
up per op type (`profile.profile_nodes` and `profile.ort_profile_nodes` give the rows).

The two sides do not run the same graph. compilerkit folds what it can at compile time (the
shape arithmetic an exporter writes, a causal mask that only depends on the shapes) and fuses
an activation into the op before it; onnxruntime computes shapes at run time and fuses its own
patterns (`FastGelu`, `FusedMatMul`, `LayerNormalization`). So a row per op type says what each
side spends its time on, not how two kernels of one node compare; an op type only one side
has shows 0 on the other.

Profilers cost time of their own. compilerkit's clock read costs ~50 ns per node; onnxruntime's
profiler records an event per kernel, a few microseconds each, which on a small model is more
than the kernels: `profile_overhead` sets a profile's sum against the unprofiled latency.

- op_comparison(ck_rows, ort_rows): one row per op type, seconds and node counts on each side;
- profile_overhead(rows, latency_s): a profile's sum against the measured latency;
- op_comparison_figure(rows, ...): the table as horizontal bars in microseconds (plotly is
  imported there, not with compilerkit).
"""

from __future__ import annotations

from collections import Counter

from compilerkit.measure.profile import op_totals

CK_COLOUR, ORT_COLOUR = "#0072B2", "#009E73"  # Okabe-Ito blue and green, as mlsys_viz.theme


def _counts(rows) -> Counter:
    # Nodes that ran code: compilerkit lists every node of the graph, 0 s for the ones that
    # emit none (a view, a folded shape computation, an activation fused into its producer).
    return Counter(r["op_type"] for r in rows if r["op_type"] != "untimed" and r["seconds"] > 0)


def op_comparison(ck_rows, ort_rows) -> list[dict]:
    """Per op type: {"op_type", "compilerkit_s", "onnxruntime_s" (summed over that side's
    nodes of the type; 0.0 where the side has none), "compilerkit_nodes", "onnxruntime_nodes"
    (how many nodes of the type ran code: a view, a folded or a fused node runs none)}, the op
    type that takes longest on either side first; op types that take no time on either side
    are left out, and so is compilerkit's untimed remainder ("(rest of the run)")."""
    ck, ort = op_totals(ck_rows), op_totals(ort_rows)
    ck_n, ort_n = _counts(ck_rows), _counts(ort_rows)
    types = [t for t in set(ck) | set(ort) if ck.get(t, 0.0) > 0 or ort.get(t, 0.0) > 0]
    types = sorted(types, key=lambda t: (-max(ck.get(t, 0.0), ort.get(t, 0.0)), t))
    return [{"op_type": t, "compilerkit_s": ck.get(t, 0.0), "onnxruntime_s": ort.get(t, 0.0),
             "compilerkit_nodes": ck_n.get(t, 0), "onnxruntime_nodes": ort_n.get(t, 0)}
            for t in types]


def profile_overhead(rows, latency_s: float) -> dict:
    """A profile's node seconds against the latency measured without the profiler:
    {"nodes_s" (the sum over the rows, the untimed remainder left out), "latency_s",
    "kernels" (rows that took time: compilerkit lists views and folded nodes with 0 s),
    "per_kernel_s" ((nodes_s - latency_s) / kernels, what the
    profiler added per kernel where the sum exceeds the latency, else 0.0)}."""
    if latency_s <= 0:
        raise ValueError(f"latency_s must be > 0, got {latency_s}")
    timed = [r for r in rows if r["op_type"] != "untimed" and r["seconds"] > 0]
    total = sum(r["seconds"] for r in timed)
    extra = max(0.0, total - latency_s)
    return {"nodes_s": total, "latency_s": latency_s, "kernels": len(timed),
            "per_kernel_s": extra / len(timed) if timed else 0.0}


def op_comparison_figure(rows, title: str | None = None, top: int = 12):
    """Horizontal bars: microseconds per run for each op type, compilerkit and onnxruntime side
    by side, the `top` op types that take longest on either side (the rest summed into one
    "other" row), longest at the top. Each bar is labelled with its time and node count."""
    import plotly.graph_objects as go

    if not rows:
        raise ValueError("no op types to draw: both profiles are empty")
    if top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    shown = [dict(r) for r in rows[:top]]
    rest = rows[top:]
    if rest:
        shown.append({"op_type": f"other ({len(rest)} op types)",
                      **{k: sum(r[k] for r in rest) for k in
                         ("compilerkit_s", "onnxruntime_s", "compilerkit_nodes",
                          "onnxruntime_nodes")}})
    names = [r["op_type"] for r in shown]
    fig = go.Figure()
    for side, label, colour in (("compilerkit", "compilerkit", CK_COLOUR),
                                ("onnxruntime", "onnxruntime (its profiler)", ORT_COLOUR)):
        us = [r[f"{side}_s"] * 1e6 for r in shown]
        fig.add_bar(y=names, x=us, orientation="h", name=label, marker_color=colour,
                    text=[f"{u:.0f} µs · {r[f'{side}_nodes']} node"
                          f"{'s' if r[f'{side}_nodes'] != 1 else ''}" if r[f"{side}_nodes"]
                          else "" for u, r in zip(us, shown, strict=True)],
                    textposition="outside", cliponaxis=False)
    longest = max(max(r["compilerkit_s"], r["onnxruntime_s"]) for r in shown) * 1e6
    fig.update_layout(
        title=title or "Time per op type, one run",
        barmode="group", bargap=0.25, height=max(420, 150 + 62 * len(shown)), width=1100,
        xaxis=dict(title="time per run (µs), summed over the op type's nodes",
                   range=[0, longest * 1.35 or 1]),
        yaxis=dict(title="op type", autorange="reversed"),
        legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0),
        margin=dict(l=20, r=40))
    return fig


__all__ = ["op_comparison", "profile_overhead", "op_comparison_figure"]
