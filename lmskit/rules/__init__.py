"""Swap rewrites with TFLMS semantics: `swap(graph, **options)`.

v1 options (the paper's names and defaults) rewrite by default; giving any v2 option
(swapout_threshold, swapin_ahead, swapin_groupby, sync_mode, serialization) selects v2. Each
rule is a small function in v1.py / v2.py so a notebook can apply them one at a time (v1 chooses
triggers by topos.py's cleaned orders, as the published code does); the result of every swap()
is checked by checker.check before it is returned. Options out of range raise ValueError naming
the option (v1.validate, v2.validate).

v2's -1 ("auto") values are not resolved here: TFLMS v2's autotune simulates the step to choose
them, which is the planner's work (planner.autotune_v2 returns the values to give swap()); the
rules import nothing above the graph.
"""

from __future__ import annotations

import difflib

from ..graph import Graph
from . import checker, common, topos, v1, v2
from .checker import RewriteError, check

V1_OPTIONS = tuple(v1.DEFAULTS)
V2_OPTIONS = tuple(v2.DEFAULTS)


def _validate(options: dict) -> str:
    known = set(V1_OPTIONS) | set(V2_OPTIONS)
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(f"unknown swap option {name!r}{hint}; v1 options: "
                            f"{', '.join(V1_OPTIONS)}; v2 options: {', '.join(V2_OPTIONS)}")
    v1_given = [n for n in options if n in V1_OPTIONS]
    v2_given = [n for n in options if n in V2_OPTIONS]
    if v1_given and v2_given:
        raise TypeError(f"options {v1_given} are TFLMS v1 and {v2_given} are v2; use one set")
    return "v2" if v2_given else "v1"


def swap(graph: Graph, **options) -> Graph:
    """A new Graph with swap-out/swap-in identities inserted; the input graph is unchanged."""
    version = _validate(options)
    if version == "v1":
        rewritten = v1.apply(graph, v1.plan(graph, **{k: v for k, v in options.items()
                                                      if k in V1_OPTIONS}))
    else:
        rewritten = _swap_v2(graph, options)
    check(graph, rewritten)
    rewritten.options = {"version": version, **options, **rewritten.options}
    return rewritten


def _swap_v2(graph: Graph, options: dict) -> Graph:
    o = v2.validate({k: v for k, v in options.items() if k in V2_OPTIONS})
    auto = [k for k in ("swapout_threshold", "swapin_ahead", "swapin_groupby") if o[k] == -1]
    if auto:
        raise TypeError(f"{auto} = -1 means auto: TFLMS v2's autotune simulates the step to "
                        "choose them; give values, e.g. swap(graph, **lmskit.planner.autotune_v2("
                        "graph, device, batch_size)), or use plan(graph, 'tflms-v2', device, "
                        "batch_size)")
    g = v1.apply(graph, v2.plan(graph, **o))   # the same edit as v1: common.insert_swap
    swaps = [n for n, op in g.ops.items() if common.is_swap(op)]
    if o["sync_mode"] in (1, 3):
        v2.sync_swapouts(g, graph, [n for n in swaps if g.ops[n].attrs["swap"] == "out"])
    # Swap-ins without a trigger: all of them in sync_mode 2 and 3, else those none was found for.
    v2.sync_swapins(g, graph, [n for n in swaps if g.ops[n].attrs["swap"] == "in"
                               and not g.ops[n].control_inputs])
    if o["serialization"]:
        v2.serialize_levels(g, graph, o["serialization"])
    g.options = {k: o[k] for k in V2_OPTIONS}   # auto values resolved
    return g


__all__ = ["swap", "check", "RewriteError", "checker", "common", "topos", "v1", "v2"]
