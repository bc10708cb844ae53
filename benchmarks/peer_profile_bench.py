"""Where each engine's time goes, layer by layer: compilerkit's per-node profile next to
OpenVINO's performance counters and onnxruntime's profiler, on peer_bench's models.

    python benchmarks/peer_profile_bench.py                       # the CNN set, 1 thread
    python benchmarks/peer_profile_bench.py --models resnet50 --threads 2 --repeat 9
    python benchmarks/peer_profile_bench.py --quick               # one small model

Per model (peer_bench's `model_path` / `input_of`: the same files and seeded input):
- compilerkit: `compilerkit.measure.profile.profile_nodes` (each ONNX node timed in context,
  the default pipeline);
- OpenVINO: `ov_profile_nodes` (PERF_COUNT, peer_bench's settings; its layers keep the ONNX
  node names, a Conv with its bias, activation and residual sum fused in);
- onnxruntime: `ort_profile_nodes` (its kernels, after its own graph optimisations: NCHWc
  nodes named after their outputs, so matched by op type only).
Each engine's profile is its own instrument (OpenVINO's counters and onnxruntime's profiler
add their overhead), so the totals are not its latency: peer_bench measures that. The rows
show where one engine spends more than another on the same layer: `nodes` pairs compilerkit
and OpenVINO by node name (largest gap first; OpenVINO may name a fused layer after a node of
the chain it fused, `_chains`; nodes it names otherwise are summed in
`compilerkit_unmatched_s`), `op_totals` gives every engine's seconds per op type. The peers
are benchmark-only dependencies (`pip install -e .[peers]`); one that is absent is listed
under "absent".

Writes benchmarks/results/peer_profile.json: {"models": {model: {"total_s": {engine: s},
"op_totals": {engine: {op: s}}, "compilerkit_unmatched_s", "nodes": [{"node", "op_type",
"compilerkit_s", "openvino_s", "openvino_kernel", "gap_s"}]}}, "threads", "repeat", "absent",
"load"}.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "peer_profile.json"
NODES_KEPT = 40  # node pairs written per model (largest gap first)


def _peer_bench():
    spec = importlib.util.spec_from_file_location("peer_bench", HERE / "peer_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def profile_model(path: str, name: str, x, threads: int, repeat: int, absent: dict) -> dict:
    from compilerkit.measure import profile as prof

    feeds = [(name, x)]
    rows = {"compilerkit": [r for r in prof.profile_nodes(
        path, threads, repeat, input_shapes={name: list(x.shape)}, feeds=feeds)
        if r["op_type"] != "untimed"]}
    for engine, fn in (("openvino", prof.ov_profile_nodes), ("onnxruntime",
                                                             prof.ort_profile_nodes)):
        if engine in absent:
            continue
        try:
            rows[engine] = fn(path, feeds, threads, repeat)
        except ImportError as e:
            absent[engine] = str(e)
    ov = {r["node"]: r for r in rows.get("openvino", [])}
    chains = _chains(path)
    nodes, unmatched = [], 0.0
    for r in rows["compilerkit"]:
        # OpenVINO names a fused layer after one node of the chain it fused (MobileNetV2's
        # depthwise Conv after the BatchNorm Mul behind it): the first name of the chain it has
        o = next((ov[n] for n in chains.get(r["node"], [r["node"]]) if n in ov), None)
        if o is None:
            unmatched += r["seconds"]
            continue
        nodes.append({"node": r["node"], "op_type": r["op_type"],
                      "compilerkit_s": r["seconds"], "openvino_s": o["seconds"],
                      "openvino_kernel": o["exec_type"], "gap_s": r["seconds"] - o["seconds"]})
    nodes.sort(key=lambda n: -n["gap_s"])
    return {"total_s": {e: sum(r["seconds"] for r in rs) for e, rs in rows.items()},
            "op_totals": {e: prof.op_totals(rs) for e, rs in rows.items()},
            "compilerkit_unmatched_s": unmatched, "nodes": nodes[:NODES_KEPT]}


# ops a Conv's fused chain may hold (what fuse-conv and OpenVINO fold into a Conv)
CHAIN_OPS = {"Mul", "Add", "Sub", "Div", "Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid",
             "HardSwish", "BatchNormalization"}


def _chains(path: str) -> dict[str, list[str]]:
    """ONNX node name -> it and the nodes after it, in order, while each is the one consumer
    of the one before and an elementwise op of CHAIN_OPS (at most 4)."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    users = {}
    for n in graph.node:
        for i in n.input:
            users.setdefault(i, []).append(n)
    out = {}
    for n in graph.node:
        chain, cur = [n.name], n
        while len(chain) < 5 and cur.output and len(users.get(cur.output[0], [])) == 1:
            cur = users[cur.output[0]][0]
            if cur.op_type not in CHAIN_OPS:
                break
            chain.append(cur.name)
        out[n.name] = chain
    return out


def table(model: str, entry: dict, k: int = 10) -> str:
    totals = ", ".join(f"{e} {s * 1e3:.2f} ms" for e, s in entry["total_s"].items())
    lines = [f"{model}: {totals}", f"  {'node':36s} {'op':14s} {'ck ms':>8s} {'ov ms':>8s}  "
             "OpenVINO kernel"]
    for n in entry["nodes"][:k]:
        lines.append(f"  {n['node'][:36]:36s} {n['op_type'][:14]:14s} "
                     f"{n['compilerkit_s'] * 1e3:8.3f} {n['openvino_s'] * 1e3:8.3f}  "
                     f"{n['openvino_kernel']}")
    lines.append(f"  (compilerkit nodes OpenVINO names otherwise: "
                 f"{entry['compilerkit_unmatched_s'] * 1e3:.2f} ms)")
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated (default: the CNN set)")
    ap.add_argument("--threads", type=int, default=1, help="threads for every engine (1)")
    ap.add_argument("--repeat", type=int, default=7, help="profiled runs after a warm-up (7)")
    ap.add_argument("--size", default="full", choices=("small", "full"))
    ap.add_argument("--quick", action="store_true", help="one small committed model")
    ap.add_argument("--out", help=f"JSON path (default {RESULTS})")
    args = ap.parse_args(argv)
    bench = _peer_bench()
    models = (list(bench.QUICK_MODELS) if args.quick else
              args.models.split(",") if args.models else list(bench.CNN))
    for m in models:
        if m not in bench.CNN + bench.VOLUME + bench.MODERN + bench.QUICK_MODELS:
            ap.error(f"unknown model {m!r}; available: "
                     f"{', '.join(bench.CNN + bench.VOLUME + bench.MODERN)}")
    if args.threads < 1 or args.repeat < 1:
        ap.error(f"--threads and --repeat must be >= 1, got {args.threads}, {args.repeat}")
    doc = {"models": {}, "threads": args.threads, "repeat": args.repeat, "absent": {},
           "load": {"before": list(os.getloadavg())}}
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            path = bench.model_path(m, args.size, Path(tmp))
            name, x, _ = bench.input_of(path)
            entry = profile_model(path, name, x, args.threads, args.repeat, doc["absent"])
            doc["models"][m] = entry
            print(table(m, entry), flush=True)
    doc["load"]["after"] = list(os.getloadavg())
    out = Path(args.out) if args.out else RESULTS
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
