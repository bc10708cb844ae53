"""The packages' layers, as docs/DESIGN.md states them, checked on the source.

From the bottom up: pictures and units (`mlsys_viz`) with the data builders beside them
(`mlsys_datasets`) -> the kits (`compilerkit`, `lmskit`, `segkit`) -> the integration layer
(`mlsys_workbench`: pipeline, figures, tour, notebook runner) -> notebooks.

The rules (`violations`):
1. the bottom layer imports no kit and not the integration layer; its two packages do not import
   each other; `mlsys_viz` imports no TensorFlow/Keras/tf2onnx and no xDSL;
2. a kit never imports the integration layer; compilerkit imports no other kit, lmskit none,
   segkit only compilerkit (its stated entry point for compiled inference);
3. no import cycle between modules;
4. at import time a kit imports no plotting library (plotly, ipywidgets, matplotlib, anywidget),
   directly or through anything it imports, and of `mlsys_viz` only `mlsys_viz.units`;
5. at import time no lmskit module but the capture-and-run ones (LMSKIT_TF) reaches TensorFlow,
   Keras or tf2onnx, directly or through anything it imports (its package ``__init__`` included).
Rules 1-3 hold for every import, lazy ones included (a dependency pointing the wrong way is one
even when it waits inside a function: that is how the planner <-> rules cycle hid); rules 4-5
are about import time, so imports inside functions are free there.

The import graph is read from the source with `ast`, not by importing anything. Import time
means module level, class bodies, and both arms of try/except and if/else; `if TYPE_CHECKING:`
blocks never run; "every import" adds the imports inside functions.

Edges. `import a.b.c` and `from a.b import c` point at the module they name (`a.b.c` when it is a
module, else the package `a.b`, i.e. its ``__init__``). Python also runs the parents' ``__init__``
first; the graph does not draw those implicit edges, or every submodule would close a cycle with a
package ``__init__`` that re-exports it (``from .graph import Graph`` in ``lmskit/__init__`` is the
usual package pattern, not a cycle). They do count for reachability ("does importing X pull in
TensorFlow?"), where the parents' ``__init__`` really run. A submodule that imports a *name* from
its own package's ``__init__`` (``from . import name``, ``from lmskit import name``) does draw an
edge to the ``__init__``, and closes a real cycle if that ``__init__`` imports it back: that is the
partially-initialised-module trap, and the test reports it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]

# package -> directory holding it
ROOTS = {
    "compilerkit": REPO / "compilerkit",
    "lmskit": REPO / "lmskit",
    "segkit": REPO / "segkit",
    "mlsys_viz": REPO / "mlsys_viz",
    "mlsys_workbench": REPO / "mlsys_workbench",
    "mlsys_datasets": REPO / "datasets" / "mlsys_datasets",
}
KITS = ("compilerkit", "lmskit", "segkit")
# The bottom layer: pictures and units (the floor proper) and the data builders beside it.
BOTTOM = ("mlsys_viz", "mlsys_datasets")
ROOF = ("mlsys_workbench",)
PLOTTING = ("plotly", "ipywidgets", "matplotlib", "anywidget")
TENSORFLOW = ("tensorflow", "keras", "tf2onnx", "tf_keras")
# TensorFlow lives only in lmskit's capture and run modules. Every other lmskit module (the
# framework-neutral core: graph, schedule, rules, simulate, planner, and devices, views,
# recompute, hybrid, dataparallel, calibrate, patches, figures, ...) and the package itself must
# not run a TensorFlow import when imported.
LMSKIT_TF = ("lmskit.tfcapture", "lmskit.tfrun", "lmskit.runcheck", "lmskit.distributed",
             "lmskit.tf1_resnet")
# Which kit may import which other kit (their stated entry points): segkit compiles its boundary
# net with compilerkit.
KIT_MAY_IMPORT = {"compilerkit": set(), "lmskit": set(), "segkit": {"compilerkit"}}


# -- the graph -------------------------------------------------------------------------------

def discover(roots: dict[str, Path]) -> dict[str, Path]:
    """Dotted module name -> source file, for every .py under each package root."""
    modules = {}
    for package, root in roots.items():
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join([package, *parts])] = path
    return modules


def _imports(tree: ast.Module, lazy: bool):
    """Import statements that run when the module is imported (not inside functions, not under
    ``if TYPE_CHECKING:``), and with `lazy` those inside functions too."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not lazy:
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        stack.extend(ast.iter_child_nodes(node))


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute package a (possibly relative) ``from X import ...`` names."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@dataclass
class ImportGraph:
    internal: nx.DiGraph                     # module -> module (both ours), with line numbers
    external: dict[str, dict[str, int]] = field(default_factory=dict)  # module -> {top: line}

    def reachable(self, start: str) -> set[str]:
        """Our modules that importing `start` runs: its edges, transitively, plus every parent
        package's __init__ along the way."""
        seen, todo = set(), [start]
        while todo:
            mod = todo.pop()
            if mod in seen or mod not in self.internal:
                continue
            seen.add(mod)
            todo.extend(self.internal.successors(mod))
            parts = mod.split(".")
            todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        return seen

    def reaches_external(self, start: str, tops: tuple[str, ...]) -> list[str]:
        """A path start -> ... -> module importing one of `tops`, or [] if there is none."""
        for mod in sorted(self.reachable(start)):
            hit = [t for t in tops if t in self.external.get(mod, {})]
            if hit:
                graph = self.internal.copy()
                for m in list(graph):                       # parents' __init__ run too
                    parts = m.split(".")
                    for i in range(1, len(parts)):
                        if ".".join(parts[:i]) in graph:
                            graph.add_edge(m, ".".join(parts[:i]))
                return [*nx.shortest_path(graph, start, mod), hit[0]]
        return []


def build_graph(modules: dict[str, Path], lazy: bool = False) -> ImportGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    external: dict[str, dict[str, int]] = {}
    ours = {name.split(".")[0] for name in modules}

    def add(src: str, target: str, line: int):
        top = target.split(".")[0]
        if top not in ours:
            external.setdefault(src, {}).setdefault(top, line)
            return
        while target and target not in modules:     # a name inside a module: point at the module
            target = target.rpartition(".")[0]
        if target and target != src:
            graph.add_edge(src, target, line=line)

    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in _imports(tree, lazy):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(name, alias.name, node.lineno)
            else:
                package = _resolve(name, is_package, node)
                for alias in node.names:
                    sub = f"{package}.{alias.name}"
                    add(name, sub if sub in modules else package, node.lineno)
    return ImportGraph(graph, external)


# -- the rules -------------------------------------------------------------------------------

def package_of(module: str) -> str:
    return module.split(".")[0]


def _cycle_text(cycle: list[str]) -> str:
    i = cycle.index(min(cycle))                     # print each cycle from its smallest name
    cycle = cycle[i:] + cycle[:i]
    return " -> ".join([*cycle, cycle[0]])


def violations(eager: ImportGraph, every: ImportGraph) -> list[str]:
    """Every broken layering rule, one line each (empty when the layers hold).

    `every` holds all imports, lazy ones included: a dependency that points the wrong way or
    closes a cycle is one even when it waits inside a function. `eager` holds the imports that
    run at import time: what importing a module pulls in (plotting libraries, TensorFlow)."""
    found = []
    for src, dst, data in every.internal.edges(data=True):
        a, b = package_of(src), package_of(dst)
        where = f"{src} -> {dst} (line {data.get('line')})"
        if a in BOTTOM and b in KITS + ROOF:
            found.append(f"bottom layer imports a kit or the roof: {where}")
        if a in BOTTOM and b in BOTTOM and a != b:
            found.append(f"bottom packages import each other: {where}")
        if a in KITS and b in ROOF:
            found.append(f"kit imports the roof: {where}")
        if a in KITS and b in KITS and a != b and b not in KIT_MAY_IMPORT[a]:
            found.append(f"{a} imports {b}: {where}")
    for mod, tops in sorted(every.external.items()):
        for top in TENSORFLOW + ("xdsl",):
            if package_of(mod) == "mlsys_viz" and top in tops:
                found.append(f"the pictures layer imports {top}: {mod} (line {tops[top]})")
    for cycle in sorted(nx.simple_cycles(every.internal), key=_cycle_text):
        found.append(f"import cycle: {_cycle_text(cycle)}")

    for src, dst, data in eager.internal.edges(data=True):
        # The kits may use the floor's units at import time; its drawing modules pull in plotly,
        # so a kit imports those inside the functions that draw.
        if package_of(src) in KITS and package_of(dst) == "mlsys_viz" and dst != "mlsys_viz.units":
            found.append(f"kit imports a drawing module at import time: {src} -> {dst} "
                         f"(line {data.get('line')})")
    for mod, tops in sorted(eager.external.items()):
        for top in PLOTTING:
            if package_of(mod) in KITS and top in tops:
                found.append(f"plotting library at import time: {mod} imports {top} "
                             f"(line {tops[top]})")
    for mod in sorted(eager.internal):
        if package_of(mod) in KITS:
            path = eager.reaches_external(mod, PLOTTING)
            if path:
                found.append(f"importing {mod} pulls in {path[-1]}: {' -> '.join(path)}")
        if package_of(mod) == "lmskit" and mod not in LMSKIT_TF:
            path = eager.reaches_external(mod, TENSORFLOW)
            if path:
                found.append(f"lmskit core {mod} reaches {path[-1]}: {' -> '.join(path)}")
    return found


# -- compilerkit's folders -----------------------------------------------------------------
# Inside compilerkit each folder (and each top-level module) is one unit, placed in a layer;
# an import may point to its own layer or a lower one, never up, and the units must not import
# each other in a circle. docs/DESIGN.md states the same table.
COMPILERKIT_LAYERS = {
    0: ("dialects", "oracle", "measure.timing", "winograd_tables"),
    1: ("frontend",),
    2: ("ir", "onnx_passes", "stages", "runtime", "conv_tiles"),
    3: ("lowering", "krnl_passes", "roofline", "codegen"),
    4: ("passes", "measure.provenance", "views", "backends", "loopnest"),
    5: ("pipeline", "specialize"),
    6: ("__init__", "__main__", "opt", "tune", "inference", "measure", "measure.conformance",
        "measure.profile", "measure.compare", "measure.machine"),
}
# Folders of separate analysis tools rather than one stage: each module in them is a unit of
# its own ("measure.provenance"), because the tools sit at different layers (the driver
# records provenance on every compile; the conformance runner drives the whole compiler).
TOOL_FOLDERS = ("measure",)
# Folder edges that break the rules, each with why it is still there: (a, b) -> reason. The
# checker fails when one of them disappears, so the list only shrinks. None is left; an entry
# is a debt to pay by moving the shared piece down a layer, not a way to silence the check.
KNOWN_FOLDER_EDGES: dict[tuple[str, str], str] = {}


def compilerkit_unit(module: str) -> str | None:
    """The folder or top-level module of compilerkit that `module` belongs to ("__init__" for
    the package itself; "folder.module" inside TOOL_FOLDERS), or None outside compilerkit."""
    parts = module.split(".")
    if parts[0] != "compilerkit":
        return None
    if len(parts) > 2 and parts[1] in TOOL_FOLDERS:
        return f"{parts[1]}.{parts[2]}"
    return parts[1] if len(parts) > 1 else "__init__"


def compilerkit_folder_violations(every: ImportGraph, layers=None, known=None) -> list[str]:
    """Every compilerkit import that points up a layer, every folder cycle, every unit missing
    from the layer table, and every KNOWN_FOLDER_EDGES entry that no longer exists."""
    layers = COMPILERKIT_LAYERS if layers is None else layers
    known = KNOWN_FOLDER_EDGES if known is None else known
    rank = {unit: level for level, units in layers.items() for unit in units}
    folders = nx.DiGraph()
    found = []
    for src, dst, data in every.internal.edges(data=True):
        a, b = compilerkit_unit(src), compilerkit_unit(dst)
        if a is None or b is None or a == b:
            continue
        for unit in (a, b):
            if unit not in rank:
                found.append(f"compilerkit unit {unit!r} has no layer (COMPILERKIT_LAYERS)")
                rank[unit] = -1
        if (a, b) in known:
            folders.add_edge(a, b, known=True)
            continue
        folders.add_edge(a, b)
        if rank[b] > rank[a]:
            found.append(f"compilerkit layer {rank[a]} imports layer {rank[b]}: "
                         f"{src} -> {dst} (line {data.get('line')})")
    for a, b in known:
        if not folders.has_edge(a, b):
            found.append(f"known folder edge {a} -> {b} is gone: remove it from the list")
    ruled = nx.DiGraph((a, b) for a, b, d in folders.edges(data=True) if not d.get("known"))
    for cycle in sorted(nx.simple_cycles(ruled), key=_cycle_text):
        found.append(f"compilerkit folder cycle: {_cycle_text(cycle)}")
    return sorted(set(found))


# -- the tests -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def graphs() -> tuple[ImportGraph, ImportGraph]:
    modules = discover(ROOTS)
    return build_graph(modules), build_graph(modules, lazy=True)


def test_the_graph_sees_every_package_and_known_edges(graphs):
    # A graph that lost its edges would pass every rule below; these edges exist on purpose.
    eager, every = graphs
    assert {package_of(m) for m in eager.internal} == set(ROOTS)
    assert eager.internal.has_edge("lmskit", "lmskit.graph")              # package re-export
    assert eager.internal.has_edge("compilerkit.views.graph", "mlsys_viz.units")
    assert every.internal.has_edge("segkit.pipeline", "compilerkit")      # the stated entry point
    assert "tensorflow" in eager.external["lmskit.tfcapture"]
    assert "plotly" in eager.external["mlsys_viz.graph"]
    # lmskit.figures draws lazily: the edge is only in the graph of every import
    assert not eager.internal.has_edge("lmskit.figures", "mlsys_viz.memory")
    assert every.internal.has_edge("lmskit.figures", "mlsys_viz.memory")
    assert eager.reachable("lmskit.rules.v2") >= {"lmskit", "lmskit.rules", "lmskit.graph"}


def test_layers_hold(graphs):
    found = violations(*graphs)
    assert not found, "layering rules broken:\n" + "\n".join(found)


def test_compilerkit_folders_keep_their_layers(graphs):
    _, every = graphs
    found = compilerkit_folder_violations(every)
    assert not found, "compilerkit's folder layers broken:\n" + "\n".join(found)


def test_compilerkit_imports_no_tensorflow_and_no_data_sets(graphs):
    # Experiments that time against TensorFlow or read data sets live in
    # mlsys_workbench/experiments; compilerkit compiles ONNX and needs neither (lazy imports too).
    _, every = graphs
    tf = [f"{mod} imports {top}" for mod, tops in sorted(every.external.items())
          for top in TENSORFLOW if package_of(mod) == "compilerkit" and top in tops]
    data = [f"{src} -> {dst}" for src, dst in every.internal.edges
            if package_of(src) == "compilerkit" and package_of(dst) == "mlsys_datasets"]
    assert not tf + data, "\n".join(tf + data)


def test_design_states_the_same_compilerkit_layers():
    import re

    text = (REPO / "docs" / "DESIGN.md").read_text()
    table = text.split("### compilerkit's layers", 1)[1].split("\n\n", 3)[2]
    stated = {int(m[1]): tuple(re.findall(r"`([^`]+)`", m[2]))
              for m in re.finditer(r"^\| (\d+) \| (.+) \|$", table, re.M)}
    assert stated == COMPILERKIT_LAYERS
    for a, b in KNOWN_FOLDER_EDGES:
        assert f"`{a} -> {b}`" in text


def test_the_folder_checker_finds_upward_imports_cycles_and_stale_exceptions(tmp_path):
    files = {
        "compilerkit/__init__.py": "",
        "compilerkit/low/__init__.py": "",
        "compilerkit/low/a.py": "from compilerkit.high import b\n",       # up a layer
        "compilerkit/high/__init__.py": "",
        "compilerkit/high/b.py": "def f():\n    from compilerkit.low import a\n",
        "compilerkit/side.py": "import compilerkit.stray\n",
        "compilerkit/stray.py": "",
    }
    _write_tree(tmp_path, files)
    every = build_graph(discover({"compilerkit": tmp_path / "compilerkit"}), lazy=True)
    layers = {0: ("low",), 1: ("high", "side")}
    found = "\n".join(compilerkit_folder_violations(every, layers, {("side", "gone"): "x"}))
    assert "compilerkit layer 0 imports layer 1: compilerkit.low.a -> compilerkit.high.b" in found
    assert "compilerkit folder cycle: high -> low -> high" in found
    assert "compilerkit unit 'stray' has no layer" in found
    assert "known folder edge side -> gone is gone" in found
    # an edge on the known list is neither a layer break nor part of a cycle
    quiet = compilerkit_folder_violations(every, {0: ("low",), 1: ("high",), 2: ("side", "stray")},
                                          {("low", "high"): "x"})
    assert quiet == []


def test_the_checker_finds_cycles_forbidden_edges_and_hidden_imports(tmp_path):
    # A tiny fake tree: a floor module importing a kit, a two-module cycle in lmskit closed by a
    # lazy import, lmskit's core reaching TensorFlow through a helper and through its package
    # __init__, a kit pulling in plotly through the floor, and segkit importing lmskit.
    files = {
        "mlsys_viz/__init__.py": "",
        "mlsys_viz/units.py": "",
        "mlsys_viz/graph.py": "import plotly.graph_objects\nfrom lmskit import graph\n",
        "mlsys_viz/ir.py": "def f():\n    from xdsl.printer import Printer\n",
        "lmskit/__init__.py": "from . import graph, planner\nfrom .tfcapture import capture\n",
        "lmskit/graph.py": "from .helper import x\n",
        "lmskit/helper.py": "import tensorflow as tf\n\n\ndef f():\n    from . import graph\n",
        "lmskit/planner.py": "def f():\n    import tensorflow\n",       # lazy TF: allowed
        "lmskit/tfcapture.py": "import tensorflow\n",
        "compilerkit/__init__.py": "",
        "compilerkit/view.py": "from mlsys_viz.units import human_bytes\nimport mlsys_viz.graph\n",
        "segkit/__init__.py": "import compilerkit\n\n\ndef f():\n    import lmskit\n",
    }
    _write_tree(tmp_path, files)
    roots = {p: tmp_path / p for p in ("mlsys_viz", "lmskit", "compilerkit", "segkit")}
    modules = discover(roots)
    found = "\n".join(violations(build_graph(modules), build_graph(modules, lazy=True)))
    assert "bottom layer imports a kit or the roof: mlsys_viz.graph -> lmskit.graph" in found
    assert "import cycle: lmskit.graph -> lmskit.helper -> lmskit.graph" in found
    assert "lmskit core lmskit.graph reaches tensorflow" in found
    # planner's own TF import is lazy, but its package __init__ imports tfcapture at import time
    assert "lmskit core lmskit.planner reaches tensorflow: lmskit.planner -> lmskit -> " in found
    assert "lmskit core lmskit.tfcapture" not in found
    assert "kit imports a drawing module at import time: compilerkit.view -> mlsys_viz.graph" \
           in found
    assert "importing compilerkit.view pulls in plotly" in found
    assert "segkit imports lmskit" in found                 # lazy, but still the wrong way
    assert "the pictures layer imports xdsl: mlsys_viz.ir" in found
    assert "segkit imports compilerkit" not in found
    assert "import cycle: lmskit -> lmskit.graph" not in found   # package re-exports are fine


def _write_tree(root: Path, files: dict[str, str]) -> None:
    """A fake source tree for the checkers: {relative path: text}."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _fresh_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_import_lmskit_leaves_tensorflow_out():
    out = _fresh_python(
        "import sys, lmskit, lmskit.planner, lmskit.simulate, lmskit.rules, lmskit.schedule\n"
        "print(sorted(m for m in ('tensorflow', 'keras', 'plotly') if m in sys.modules))")
    assert out == "[]"


def test_device_setup_is_explicit_and_capture_loads_on_first_use():
    # Importing lmskit leaves the CPU whole; lmskit.configure_devices() splits it (no GPU here);
    # lmskit.capture, a TensorFlow-backed name, loads its module when first asked for.
    out = _fresh_python(
        "import sys, lmskit, tensorflow as tf\n"
        "if tf.config.list_physical_devices('GPU'):\n"
        "    print('gpu'); raise SystemExit\n"
        "cpu = tf.config.list_physical_devices('CPU')[0]\n"
        "before = len(tf.config.get_logical_device_configuration(cpu) or [])\n"
        "lmskit.configure_devices()\n"
        "after = len(tf.config.list_logical_devices('CPU'))\n"
        "print(before, after, callable(lmskit.capture), 'lmskit.tfcapture' in sys.modules)")
    if out != "gpu":
        assert out == "0 2 True True"


def test_importing_every_kit_module_pulls_in_no_plotting_library():
    # Every module of the three kits, not only the packages: lmskit.figures and the graph views
    # import their drawing code inside the functions that draw.
    out = _fresh_python(
        "import importlib, pkgutil, sys\n"
        "import compilerkit, lmskit, segkit\n"
        "assert not [m for m in ('plotly', 'ipywidgets', 'matplotlib') if m in sys.modules]\n"
        "for pkg in (compilerkit, lmskit, segkit):\n"
        "    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        if not info.name.endswith('__main__'):\n"
        "            importlib.import_module(info.name)\n"
        "print(sorted(m for m in ('plotly', 'ipywidgets', 'matplotlib') if m in sys.modules))")
    assert out == "[]"
