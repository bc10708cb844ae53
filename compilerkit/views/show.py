"""Excerpts of the stage texts for reading (the notebook's magnifying glass): one LLVM IR
function, one function of the assembly listing, the outlined per-op functions' names, and the
ONNX IR or Kernel IR lines of chosen ONNX nodes (`node_excerpt`: one attention of a model).

Codegen emits the loop nests of each ONNX node as one function `main_graph_<n>_<node>` and the
shared matmul micro-kernel as `ck_matmul_<type>_v<lanes>`, so a whole model's text can be read
one function at a time.
"""

from __future__ import annotations

import re

from xdsl.dialects.builtin import ModuleOp

from compilerkit.measure.provenance import IR_STAGES, Provenance
from compilerkit.measure.provenance import of as provenance_of


def llvm_functions(llvm_ir: str) -> list[str]:
    """Names of the functions defined in an LLVM IR text, in order."""
    return re.findall(r"^define [^@]*@\"?([\w.$]+)\"?\(", llvm_ir, flags=re.M)


def llvm_function(llvm_ir: str, name: str) -> str:
    """The `define ... { ... }` text of one function."""
    m = re.search(rf"^define [^@]*@\"?{re.escape(name)}\"?\(.*?^}}", llvm_ir, flags=re.M | re.S)
    if m is None:
        raise KeyError(f"no function {name!r}; defined: {llvm_functions(llvm_ir)[:20]}")
    return m.group(0)


def asm_function(asm: str, name: str) -> str:
    """One function of an assembly listing: from its label to the end marker LLVM prints."""
    m = re.search(rf"^{re.escape(name)}:.*?(?=^\.Lfunc_end|\Z)", asm, flags=re.M | re.S)
    if m is None:
        raise KeyError(f"no function {name!r} in the assembly")
    return m.group(0)


# ---- the lines of some nodes -----------------------------------------------------------------

# Provenance tags that a per-node excerpt already says in its header line.
_TAG = re.compile(r'(, )?\bonnx_node(?:_name)? = "(?:[^"\\]|\\.)*"(, )?')


def _untagged(line: str) -> str:
    def keep_one_comma(m):
        return ", " if m.group(1) and m.group(2) else ""

    return _TAG.sub(keep_one_comma, line).replace(" {}", "")


def _selected(node: dict, nodes, ops) -> bool:
    if ops is not None and node["op"] in ops:
        return True
    if nodes is None:
        return False
    if isinstance(nodes, str):
        return re.search(nodes, node["name"]) is not None
    return node["name"] in nodes


def node_excerpt(source, stage: str, nodes=None, ops=None, span: bool = False,
                 max_lines: int = 40, width: int = 130, tags: bool = False) -> str:
    """The lines of one IR stage that came from some ONNX nodes, so that one attention or one
    LayerNorm of a whole model fits a screen.

    `source`: a CompiledModel, an ONNX IR module (`import_onnx`, `optimize_onnx`), or a
    `compilerkit.measure.provenance.Provenance` built on both modules (``Provenance(onnx_module,
    kmodule)``, the Kernel IR from `lower`: the ONNX IR says which op each node is).
    `stage`: "onnx-ir" or "kernel-ir". The nodes are chosen by `nodes` (a regular expression
    searched in each node's name, or a collection of names) and/or `ops` (ONNX op types: needs
    the ONNX IR); with `span`, every node from the first chosen to the last (the helper nodes
    an exporter put between the nodes of one layer, which carry no layer name, come along).
    The chosen nodes' lines come in program order as compilerkit prints them, at most
    `max_lines` per node (then a line saying how many more). In the Kernel IR each node's
    lines follow a header ``// <node> (<op>)``; in the ONNX IR (one line per op, its result
    named after the node) "..." marks where other ops were left out. The provenance tags
    (`onnx_node_name` / `onnx_node`) are dropped unless `tags`; lines longer than `width` are
    cut with "...".
    Raises ValueError when the stage is not one of the two, a selection by op type has no ONNX
    IR to read the types from, or nothing is selected."""
    if stage not in IR_STAGES:
        raise ValueError(f"stage must be one of {list(IR_STAGES)}, got {stage!r}")
    if nodes is None and ops is None:
        raise ValueError("choose the nodes: nodes= (a pattern or names) and/or ops= (op types)")
    if max_lines < 1 or width < 20:
        raise ValueError(f"max_lines must be >= 1 and width >= 20, got {max_lines}, {width}")
    if isinstance(source, ModuleOp):  # one module: ONNX IR, or Kernel IR alone
        kernel = any(op.name.startswith("krnl.") for op in source.walk())
        prov = Provenance(None, source) if kernel else Provenance(source)
    else:
        prov = source if isinstance(source, Provenance) else provenance_of(source)
    known = prov.nodes
    if ops is not None:
        ops = {ops} if isinstance(ops, str) else set(ops)
        if all(n["op"] is None for n in known):
            raise ValueError("selecting by op type needs the ONNX IR module (it says each "
                             "node's op): build the Provenance with it")
    picked = [k for k, n in enumerate(known) if _selected(n, nodes, ops)]
    if span and picked:
        picked = list(range(picked[0], picked[-1] + 1))
    chosen = [known[k] for k in picked]
    if not chosen:
        raise ValueError(f"no node of the {stage} matches nodes={nodes!r}, ops={ops!r}; "
                         f"nodes are e.g. {[n['name'] for n in known[:6]]}")
    lines = prov.text(stage).splitlines()
    ranges = prov.stage_ranges(stage)
    out, last = [], None
    for node in chosen:
        numbers = [k for a, b in ranges.get(node["name"], []) for k in range(a, b + 1)]
        if not numbers:
            continue  # a view (Reshape) or a folded op: no lines in this stage
        body = [lines[k - 1] if tags else _untagged(lines[k - 1]) for k in numbers[:max_lines]]
        if len(numbers) > max_lines:
            body.append(f"    // ... {len(numbers) - max_lines} more lines of this node")
        if stage == "kernel-ir":  # a node is many lines there: say whose they are
            body.insert(0, f"// {node['name']}" + (f" ({node['op']})" if node["op"] else ""))
        elif last is not None and numbers[0] != last + 1:
            body.insert(0, "    ...")  # ONNX IR: one line per op, the result names the node
        last = numbers[-1]
        out += [t if len(t) <= width else t[:width - 3] + "..." for t in body]
    if not out:
        raise ValueError(f"the nodes chosen ({[n['name'] for n in chosen][:6]}) left no lines "
                         f"in the {stage} (views and folded ops emit none)")
    return "\n".join(out)
