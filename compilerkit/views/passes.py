"""What each pass did to a module, as plain data: which ops it removed, which it made, and
which it changed by giving them attributes (a fusion that folds an activation into the op
before it leaves the op and adds `activation = "Tanh"`). The answer to "what fused, and which
pass did it" read off the IR itself, so it stays true when passes are added or changed.

- pass_trace(module, passes=None): runs the passes (default: `optimize_onnx`'s pipeline) on
  `module` in place, one at a time, and returns one row per pass;
- trace_table(rows): those rows as a markdown table.

An op is followed by identity through the passes: a pass that rewrites an op in place keeps it
(its new attributes are "changed"), one that replaces it removes the old op and adds the new.
Only the top-level ops of the module's main function are compared (the ONNX IR's ops, or the
Kernel IR's allocations, loop definitions and nests). Nothing here draws.
"""

from __future__ import annotations

from collections import Counter

from compilerkit.onnx_passes.single_node import main_func
from compilerkit.passes import onnx_pipeline, run_passes

# Provenance tags name the node; they are not what a pass decided.
_TAGS = ("onnx_node_name", "onnx_node")


def _kind(op) -> str:
    # `onnx.MatMul` -> MatMul; Kernel IR and other ops keep their full name (`krnl.iterate`).
    return op.name.split(".", 1)[1] if op.name.startswith("onnx.") else op.name


def _node(op) -> str | None:
    for key in _TAGS:
        tag = op.attributes.get(key)
        if tag is not None:
            return tag.data
    return None


def _snapshot(module) -> dict:
    """op -> {attribute: printed value} of the main function's top-level ops, in order."""
    return {op: {k: str(v) for k, v in op.attributes.items() if k not in _TAGS}
            for op in main_func(module).body.block.ops}


def _diff(name: str, before: dict, after: dict) -> dict:
    removed = Counter(_kind(op) for op in before if op not in after)
    added = Counter(_kind(op) for op in after if op not in before)
    changed = []
    for op, attrs in after.items():
        old = before.get(op)
        if old is None:
            continue
        new = {k: v for k, v in attrs.items() if old.get(k) != v}
        if new:
            changed.append({"node": _node(op), "op": _kind(op), "attributes": new})
    return {"pass": name, "ops_before": len(before), "ops_after": len(after),
            "removed": dict(removed.most_common()), "added": dict(added.most_common()),
            "changed": changed}


def pass_trace(module, passes=None) -> list[dict]:
    """Run `passes` (pass instances; default `passes.onnx_pipeline()`, what `optimize_onnx`
    runs) on `module` in place and say what each did: one row per pass, in order, {"pass",
    "ops_before", "ops_after" (top-level ops of the main function), "removed" and "added" ({op
    type: count}, most first), "changed": [{"node", "op", "attributes": {name: new value}}]
    for the ops that kept their identity but got new or different attributes}. The module ends
    as the passes leave it (the IR is verified after each pass, as `opt` does)."""
    passes = onnx_pipeline() if passes is None else list(passes)
    rows = []
    state = {"before": _snapshot(module)}

    def record(p, mod):
        after = _snapshot(mod)
        rows.append(_diff(p.name, state["before"], after))
        state["before"] = after

    run_passes(module, passes, after_each=record)
    return rows


def _counts(counts: dict) -> str:
    return ", ".join(f"{n} {k}" for k, n in counts.items()) or "-"


def trace_table(rows, changed: int = 4) -> str:
    """A markdown table of `pass_trace`'s rows: per pass the op count before -> after, the ops
    removed and added by type, and up to `changed` of the ops it changed (node, op and the new
    attributes)."""
    lines = ["| pass | ops | removed | added | changed |", "|---|---|---|---|---|"]
    for r in rows:
        shown = [f"{c['node'] or '?'} ({c['op']}): "
                 + ", ".join(f"{k} = {v}" for k, v in c["attributes"].items())
                 for c in r["changed"][:changed]]
        if len(r["changed"]) > changed:
            shown.append(f"... {len(r['changed']) - changed} more")
        cells = [r["pass"], f"{r['ops_before']} -> {r['ops_after']}", _counts(r["removed"]),
                 _counts(r["added"]), "<br>".join(shown) or "-"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


__all__ = ["pass_trace", "trace_table"]
