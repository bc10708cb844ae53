"""Which lines of each stage's text came from which ONNX node (op provenance, as MLIR `loc`).

Works on the stage texts alone (`CompiledModel.stages` or any mapping stage -> text), so it
needs no xDSL module and also reads IR saved to disk. How each stage names its node:

* ONNX IR: one op per line, with the attribute `onnx_node_name = "..."`;
* Kernel IR: lowering tags every top-level op a node produced with `onnx_node = "..."` (ops
  inside a `krnl.iterate` belong to it); untagged schedule ops (`krnl.block` / `permute` /
  `unroll`, inserted later right before their nest) that sit between two ops of one node belong
  to that node too;
* LLVM IR, asm, PTX: codegen outlines a node's nests into functions named
  `main_graph_<n>_<label>` (`_<k>` appended per GPU kernel), where label is the node name with
  non-alphanumerics replaced by `_` and cut to 40 characters (codegen/emit.py `_op_label`).
  A function's whole text belongs to the node, and so do the lines elsewhere that name it (the
  call in `main_graph`, `.type`/`.globl` directives). Two nodes whose labels coincide both get
  the function: the name cannot tell them apart.

Line numbers are 1-based and ranges inclusive: [(first, last), ...], sorted and merged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

ENTRY = "main_graph"
LABEL_CHARS = 40  # codegen cuts node labels in function names to this many characters

_STRING = r'"((?:[^"\\]|\\.)*)"'
_ONNX_NAME = re.compile(r"onnx_node_name = " + _STRING)
_ONNX_OP = re.compile(r'"onnx\.(\w+)"')
_KRNL_TAG = re.compile(r"onnx_node = " + _STRING)
_LLVM_DEFINE = re.compile(r'^define [^@]*@"?([\w.$]+)"?\(')
_ASM_LABEL = re.compile(r"^([A-Za-z_$][\w.$]*):")
_PTX_ENTRY = re.compile(r"^\.(?:visible |weak )?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)")


def _unescape(s: str) -> str:
    # MLIR string literals escape quotes and backslashes; node names rarely hold anything else.
    return re.sub(r"\\(.)", r"\1", s)


def label(node: str) -> str:
    """The part of an outlined function's name that codegen derives from a node name."""
    return "".join(ch if ch.isalnum() else "_" for ch in node)[:LABEL_CHARS]


def merge(lines) -> list[tuple[int, int]]:
    """Line numbers (any order, repeats allowed) -> sorted, merged inclusive ranges."""
    out: list[list[int]] = []
    for n in sorted(set(lines)):
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return [(a, b) for a, b in out]


# ---- ONNX IR -----------------------------------------------------------------------------------

def onnx_nodes(onnx_ir: str) -> list[dict]:
    """The nodes of an ONNX IR text in order: {"name", "op", "line"} (Constants have no name
    and are not nodes)."""
    out = []
    for n, text in enumerate(onnx_ir.splitlines(), start=1):
        m = _ONNX_NAME.search(text)
        if m:
            op = _ONNX_OP.search(text)
            out.append({"name": _unescape(m.group(1)), "op": op.group(1) if op else "?",
                        "line": n})
    return out


def onnx_ranges(onnx_ir: str) -> dict[str, list[tuple[int, int]]]:
    ranges: dict[str, list[int]] = {}
    for node in onnx_nodes(onnx_ir):
        ranges.setdefault(node["name"], []).append(node["line"])
    return {k: merge(v) for k, v in ranges.items()}


# ---- Kernel IR ---------------------------------------------------------------------------------

def kernel_ops(kernel_ir: str) -> list[tuple[int, int, str | None]]:
    """The top-level ops of the Kernel IR's functions: (first line, last line, node or None).

    An op with regions spans from its line ending in `({` to the matching line starting with
    `})` (the generic format xDSL prints for krnl ops); attributes follow the regions, so the
    tag is read from the op's last line."""
    lines = kernel_ir.splitlines()
    ops, depth, start, in_func = [], 0, None, False
    for n, text in enumerate(lines, start=1):
        s = text.strip()
        if not in_func:
            in_func = s.startswith("func.func ") and s.endswith("{")
            continue
        if depth == 0 and s == "}":  # the function's end
            in_func = False
            continue
        if s.startswith("})") or s.startswith("}, {"):
            depth -= 1
        if depth == 0 and start is None:
            start = n
        if s.endswith("({") or s.endswith("}, {"):
            depth += 1
        if depth == 0 and start is not None:
            m = _KRNL_TAG.search(text)
            ops.append((start, n, _unescape(m.group(1)) if m else None))
            start = None
    return ops


def kernel_ranges(kernel_ir: str) -> dict[str, list[tuple[int, int]]]:
    ops = kernel_ops(kernel_ir)
    owner = [tag for _, _, tag in ops]
    # An untagged op between two ops of the same node (a schedule op) is that node's.
    for k, tag in enumerate(owner):
        if tag is None:
            before = next((t for t in reversed(owner[:k]) if t is not None), None)
            after = next((t for t in owner[k + 1:] if t is not None), None)
            if before is not None and before == after:
                owner[k] = before
    ranges: dict[str, list[int]] = {}
    for (a, b, _), tag in zip(ops, owner, strict=True):
        if tag is not None:
            ranges.setdefault(tag, []).extend(range(a, b + 1))
    return {k: merge(v) for k, v in ranges.items()}


# ---- LLVM IR, asm, PTX: outlined functions ---------------------------------------------------

def _braced_function_lines(text: str, header: re.Pattern) -> dict[str, tuple[int, int]]:
    """Function name -> (its header line, its closing `}` line) for languages whose functions
    open with a header `header` matches (group 1: the name) and close with `}` in column 0."""
    out, name, start = {}, None, 0
    for n, line in enumerate(text.splitlines(), start=1):
        m = header.match(line)
        if m:
            name, start = m.group(1), n
        elif name is not None and line.startswith("}"):
            out[name], name = (start, n), None
    return out


def llvm_function_lines(llvm_ir: str) -> dict[str, tuple[int, int]]:
    """Function name -> (its `define` line, its closing `}` line)."""
    return _braced_function_lines(llvm_ir, _LLVM_DEFINE)


def asm_function_lines(asm: str) -> dict[str, tuple[int, int]]:
    """Function name -> (its label line, its `.size` line, or the line before the next
    function's label when there is none). Only symbols `.type`d as @function count, so local
    labels (.LBB...) and data labels do not."""
    lines = asm.splitlines()
    functions = set(re.findall(r"\.type\s+([\w.$]+)\s*,\s*@function", asm))
    out, name, start = {}, None, 0
    for n, text in enumerate(lines, start=1):
        m = _ASM_LABEL.match(text)
        if m and m.group(1) in functions:
            if name is not None:
                out[name] = (start, n - 1)
            name, start = m.group(1), n
        elif name is not None and re.match(rf"\s*\.size\s+{re.escape(name)}\s*,", text):
            out[name], name = (start, n), None
    if name is not None:
        out[name] = (start, len(lines))
    return out


def ptx_function_lines(ptx: str) -> dict[str, tuple[int, int]]:
    """Kernel or function name -> (its `.entry`/`.func` line, its closing `}` line)."""
    return _braced_function_lines(ptx, _PTX_ENTRY)


FUNCTION_LINES = {"llvm-ir": llvm_function_lines, "asm": asm_function_lines,
                  "ptx": ptx_function_lines}


def nodes_of_function(name: str, nodes) -> list[str]:
    """The nodes an outlined function `main_graph_<n>_<label>[_<k>]` came from ([] for other
    functions: the entry point, micro-kernels, the nests lowering added itself)."""
    m = re.fullmatch(rf"{ENTRY}_\d+_(\w+)", name)
    if m is None:
        return []
    rest = m.group(1)
    return [node for node in nodes if rest == label(node)
            or re.fullmatch(rf"{re.escape(label(node))}_\d+", rest)]


def function_ranges(stage: str, text: str, nodes) -> dict[str, list[tuple[int, int]]]:
    """node -> line ranges in a function-level stage ("llvm-ir", "asm" or "ptx"): its outlined
    functions, plus the lines elsewhere that name them (calls, directives)."""
    spans = FUNCTION_LINES[stage](text)
    lines = text.splitlines()
    ranges: dict[str, list[int]] = {}
    for fn, (a, b) in spans.items():
        owners = nodes_of_function(fn, nodes)
        if not owners:
            continue
        own = list(range(a, b + 1))
        word = re.compile(rf"(?<![\w.]){re.escape(fn)}(?![\w$])")
        own += [n for n, t in enumerate(lines, start=1) if not a <= n <= b and word.search(t)]
        for node in owners:
            ranges.setdefault(node, []).extend(own)
    return {k: merge(v) for k, v in ranges.items()}


# ---- everything ---------------------------------------------------------------------------------

def provenance(stages) -> dict[str, dict[str, list[tuple[int, int]]]]:
    """{node: {stage: [(first, last), ...]}} for every node of the ONNX IR and every stage
    present ("onnx-ir", "kernel-ir", "llvm-ir", "asm" / "ptx"); a stage where a node left no
    lines (a view such as Reshape, which emits no loops) maps to [].

    `stages`: a CompiledModel or a mapping stage -> text. Reading a CompiledModel's "asm"
    generates it (a second code generation)."""
    stages = getattr(stages, "stages", stages)
    if not isinstance(stages, Mapping) or "onnx-ir" not in stages:
        raise ValueError("provenance needs the 'onnx-ir' stage (its node names); "
                         f"got stages {list(stages) if isinstance(stages, Mapping) else stages}")
    names = [n["name"] for n in onnx_nodes(stages["onnx-ir"])]
    per_stage = {"onnx-ir": onnx_ranges(stages["onnx-ir"])}
    for stage in stages:
        if stage == "kernel-ir":
            per_stage[stage] = kernel_ranges(stages[stage])
        elif stage in FUNCTION_LINES:
            per_stage[stage] = function_ranges(stage, stages[stage], names)
    return {node: {stage: found.get(node, []) for stage, found in per_stage.items()}
            for node in names}


__all__ = ["provenance", "onnx_nodes", "onnx_ranges", "kernel_ops", "kernel_ranges",
           "function_ranges", "llvm_function_lines", "asm_function_lines",
           "ptx_function_lines", "nodes_of_function", "label", "merge"]
