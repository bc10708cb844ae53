"""Outside Jupyter: every viz function returns a figure in a plain Python process (no kernel,
no widget front end). (Saving a real lifetimes figure as PNG: tests/lmskit/test_views.py.)"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import json, sys
    import mlsys_viz as viz

    nodes = [{"id": f"s{i // 3}/op{i}", "group": "forward"} for i in range(9)]
    nodes.append({"id": "s0/Read", "group": "variable", "aside": True})
    edges = [{"source": nodes[i]["id"], "target": nodes[i + 1]["id"]} for i in range(8)]
    edges.append({"source": "s0/Read", "target": "s0/op1"})
    iv = [{"name": "a", "start": 0, "end": 3, "bytes": 10, "kind": "activation",
           "host": [(1, 2)]}]
    dev, host = [10, 0, 0, 10], [0, 10, 10, 0]
    explorer = viz.ScopeExplorer(nodes, edges, depth=1)
    box = explorer.widget()
    box.children[0].children[0].value = ("s1",)   # opening a scope redraws, with no front end
    made = {
        "graph_figure": viz.graph_figure(nodes, edges, highlight={"s0/op1"}),
        "explorer": explorer.figure(["s0"]),
        "explorer widget figure": box.figure,
        "rewrite_figure": viz.rewrite_figure((nodes, edges), (nodes, edges), {"s0/op1"}),
        "lifetime_chart": viz.lifetime_chart(iv),
        "memory_timeline": viz.memory_timeline(dev, host, budget=12),
        "lifetimes_and_memory": viz.lifetimes_and_memory(iv, dev, host),
        "lifetime_animation": viz.lifetime_animation(iv, dev, host),
        "compare_steps": viz.compare_steps({"a": {"device": dev}, "b": {"device": dev}}),
    }
    assert "s1/op3" in {i for t in box.figure.data if t.customdata is not None
                       for i in t.customdata}
    print(json.dumps({k: type(v).__name__ for k, v in made.items()}))
    print("modules:", "ipykernel" in sys.modules, "google.colab" in sys.modules)
""")


def test_viz_returns_figures_in_a_plain_python_process():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                            cwd=REPO, timeout=120, env={"PATH": "/usr/bin:/bin",
                                                        "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    kinds = json.loads(next(line for line in lines if line.startswith("{")))
    assert set(kinds.values()) == {"Figure"}, kinds
    assert lines[-1] == "modules: False False"  # really no kernel in that process
