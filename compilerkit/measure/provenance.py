"""Which lines of each stage came from which ONNX node (op provenance, as MLIR's `loc`), read
off the IR and off code generation rather than recovered from printed text:

* ONNX IR: every op the frontend made from a node carries `onnx_node_name`; its lines are the
  lines the printer wrote for that op;
* Kernel IR: lowering tags every top-level op a node produced with `onnx_node` (ops inside a
  `krnl.iterate` belong to it); an untagged schedule op (`krnl.block` / `permute` / `unroll`,
  inserted later right before its nest) between two ops of one node belongs to that node too;
  its lines are what the printer wrote for the op, nested ops included;
* LLVM IR, asm, PTX: codegen records, as it creates each function, the node whose nests it
  holds (`Emitter.functions`, codegen/emit.py and gpu.py). A function's lines belong to that
  node, and so do the lines elsewhere that name it (the call in `main_graph`, `.type`/`.globl`
  directives).

Line numbers come from the printer itself: `listing(module)` prints a module exactly as
`compilerkit.ir.print_ir` does while counting the newlines written before and after each op.
What still reads text: where each function starts and ends in the LLVM IR, asm and PTX
listings (LLVM writes those; `llvm_function_lines`, `asm_function_lines`, `ptx_function_lines`
find a function's header and end by the listing's own syntax) and the lines that mention a
function by name. Which node a function belongs to is never read from its name.

Line numbers are 1-based and ranges inclusive: [(first, last), ...], sorted and merged.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.printer import Printer

from compilerkit.dialects import onnx as onnx_d
from compilerkit.onnx_passes.single_node import main_func

IR_STAGES = ("onnx-ir", "kernel-ir")
_LLVM_DEFINE = re.compile(r'^define [^@]*@"?([\w.$]+)"?\(')
_ASM_LABEL = re.compile(r"^([A-Za-z_$][\w.$]*):")
_PTX_ENTRY = re.compile(r"^\.(?:visible |weak )?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)")


def merge(lines) -> list[tuple[int, int]]:
    """Line numbers (any order, repeats allowed) -> sorted, merged inclusive ranges."""
    out: list[list[int]] = []
    for n in sorted(set(lines)):
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return [(a, b) for a, b in out]


# ---- printing with line numbers ----------------------------------------------------------------

class _CountingStream(io.StringIO):
    """A text stream that counts the newlines written to it (the printer writes every line
    through `write`)."""

    def __init__(self):
        super().__init__()
        self.lines_written = 0
        self.spans = {}

    def write(self, s: str) -> int:
        self.lines_written += s.count("\n")
        return super().write(s)


class _SpanPrinter(Printer):
    def print_op(self, op) -> None:
        first = self.stream.lines_written + 1
        super().print_op(op)
        self.stream.spans[op] = (first, self.stream.lines_written + 1)


@dataclass(frozen=True)
class Listing:
    """A module's text, as print_ir prints it, and the (first, last) line of every op in it."""

    text: str
    spans: dict


def listing(module) -> Listing:
    """Print `module` (the same text as compilerkit.ir.print_ir(module)) and record where each
    op landed."""
    out = _CountingStream()
    _SpanPrinter(stream=out).print_op(module)
    return Listing(out.getvalue() + "\n", out.spans)


# ---- ONNX IR -----------------------------------------------------------------------------------

def _name_of(op, key: str):
    a = op.attributes.get(key)
    if a is None:
        a = op.properties.get(key)
    return a.data if a is not None else None


def _node_ops(onnx_module):
    for op in main_func(onnx_module).body.block.ops:
        name = _name_of(op, "onnx_node_name")
        if name is not None:
            yield op, name


def onnx_nodes(onnx_module) -> list[dict]:
    """The nodes of an ONNX IR module in order: {"name", "op"} (the op type). Constants the
    frontend made from initializers have no name and are not nodes."""
    return [{"name": name, "op": onnx_d.op_type(op)} for op, name in _node_ops(onnx_module)]


def onnx_ranges(onnx_module, lst: Listing) -> dict[str, list[tuple[int, int]]]:
    lines: dict[str, list[int]] = {}
    for op, name in _node_ops(onnx_module):
        a, b = lst.spans[op]
        lines.setdefault(name, []).extend(range(a, b + 1))
    return {k: merge(v) for k, v in lines.items()}


# ---- Kernel IR ---------------------------------------------------------------------------------

def kernel_owners(kmodule) -> list[tuple[object, str | None]]:
    """The top-level ops of the Kernel IR's main function with the node each belongs to (None:
    no node, e.g. the globals of initializers and the return)."""
    ops = list(main_func(kmodule).body.block.ops)
    owner = [_name_of(op, "onnx_node") for op in ops]
    tagged = owner[:]
    # An untagged op between two ops of the same node (a schedule op) is that node's.
    for k, tag in enumerate(tagged):
        if tag is None:
            before = next((t for t in reversed(tagged[:k]) if t is not None), None)
            after = next((t for t in tagged[k + 1:] if t is not None), None)
            if before is not None and before == after:
                owner[k] = before
    return list(zip(ops, owner, strict=True))


def kernel_ranges(kmodule, lst: Listing) -> dict[str, list[tuple[int, int]]]:
    lines: dict[str, list[int]] = {}
    for op, node in kernel_owners(kmodule):
        if node is not None:
            a, b = lst.spans[op]
            lines.setdefault(node, []).extend(range(a, b + 1))
    return {k: merge(v) for k, v in lines.items()}


# ---- LLVM IR, asm, PTX: the functions codegen made --------------------------------------------

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


def node_of_symbol(symbol: str, functions: Mapping[str, str | None]) -> str | None:
    """The node of a function in a listing, by codegen's record (`functions`; a tuple of nodes
    for a function several nodes share). LLVM names the
    copies it derives from a function `<name>.<suffix>` (`.constprop.0`, `.specialized.1`), and
    Mach-O prefixes C symbols with `_`: those map to the function they copy."""
    for name in (symbol, symbol.split(".", 1)[0]):
        for candidate in (name, name[1:] if name.startswith("_") else None):
            if candidate is not None and candidate in functions:
                return functions[candidate]
    return None


def function_ranges(stage: str, text: str,
                    functions: Mapping[str, str | None]) -> dict[str, list[tuple[int, int]]]:
    """node -> line ranges in a function-level stage ("llvm-ir", "asm" or "ptx"): the functions
    codegen made for it (`functions`: {function: node, a tuple of the nodes sharing it, or
    None}, Emitter.functions), plus the lines elsewhere that name them (calls, directives; a
    shared function's calls go to all its nodes)."""
    spans = FUNCTION_LINES[stage](text)
    lines = text.splitlines()
    found: dict[str, list[int]] = {}
    for fn, (a, b) in spans.items():
        node = node_of_symbol(fn, functions)
        if node is None:
            continue
        own = list(range(a, b + 1))
        word = re.compile(rf"(?<![\w.]){re.escape(fn)}(?![\w$])")
        own += [n for n, t in enumerate(lines, start=1) if not a <= n <= b and word.search(t)]
        for one in (node if isinstance(node, tuple) else (node,)):
            found.setdefault(one, []).extend(own)
    return {k: merge(v) for k, v in found.items()}


# ---- everything ---------------------------------------------------------------------------------

class Provenance:
    """The provenance of one compile: the ONNX IR module, the Kernel IR module and codegen's
    {function: node} record. Any of the three may be missing (a Kernel IR compile has no ONNX
    IR; a stage then cannot be mapped and `ranges` says so).

    `text(stage)` is the "onnx-ir" / "kernel-ir" text (printed once, on first use; the same
    text as print_ir): a pipeline can use it as the stage's text so the IR is printed once.
    The text, the nodes and their line ranges are taken together when the module is printed,
    so a module changed afterwards (a caller's, printed at compile time) cannot make them
    disagree. `modules` and `functions` may be set after construction (a pipeline fills them in
    as it goes); setting another module for a stage prints that one.
    """

    def __init__(self, onnx_module=None, kmodule=None, functions=None):
        self.modules = {"onnx-ir": onnx_module, "kernel-ir": kmodule}
        self.functions = dict(functions) if functions is not None else None
        self._printed: dict[str, tuple] = {}  # stage -> (module, Listing, ranges, nodes)

    def _snapshot(self, stage: str) -> tuple:
        module = self.modules.get(stage)
        if module is None:
            raise ValueError(f"provenance has no {stage} module")
        held = self._printed.get(stage)
        if held is None or held[0] is not module:
            lst = listing(module)
            if stage == "onnx-ir":
                ranges, nodes = onnx_ranges(module, lst), onnx_nodes(module)
            else:
                ranges = kernel_ranges(module, lst)
                nodes = [{"name": n, "op": None} for n in dict.fromkeys(
                    n for _, n in kernel_owners(module) if n)]
            held = self._printed[stage] = (module, lst, ranges, nodes)
        return held

    def listing(self, stage: str) -> Listing:
        return self._snapshot(stage)[1]

    def text(self, stage: str) -> str:
        return self.listing(stage).text

    @property
    def nodes(self) -> list[dict]:
        """[{"name", "op"}] in ONNX IR order ("op" is None without an ONNX IR module: the
        nodes are then those the Kernel IR names, in order)."""
        for stage in IR_STAGES:
            if self.modules[stage] is not None:
                return [dict(n) for n in self._snapshot(stage)[3]]
        raise ValueError("provenance needs an ONNX IR or a Kernel IR module (its nodes)")

    def stage_ranges(self, stage: str, text: str | None = None) -> dict[str, list]:
        """node -> line ranges in one stage. For "onnx-ir" / "kernel-ir", `text` (when given)
        must be this provenance's printout of the module; for "llvm-ir", "asm", "ptx" it is
        the listing to map."""
        if stage in IR_STAGES:
            _, lst, ranges, _ = self._snapshot(stage)
            if text is not None and text != lst.text:
                raise ValueError(f"the {stage} text given is not the printout of the module "
                                 "this provenance holds (was the module changed after it was "
                                 "printed?)")
            return ranges
        if stage not in FUNCTION_LINES:
            raise ValueError(f"no provenance for stage {stage!r}; known: "
                             f"{list(IR_STAGES) + list(FUNCTION_LINES)}")
        if self.functions is None:
            raise ValueError(f"provenance of {stage!r} needs codegen's record of which node "
                             "each function came from (Emitter.functions): none was given")
        if text is None:
            raise ValueError(f"provenance of {stage!r} needs the listing's text")
        return function_ranges(stage, text, self.functions)

    def ranges(self, stages: Mapping[str, str]) -> dict[str, dict[str, list]]:
        """{node: {stage: [(first, last), ...]}} for every node and every stage of `stages`
        (stage -> text) this provenance can map; a stage where a node left no lines (a view
        such as Reshape, which emits no loops) maps to []."""
        per_stage = {s: self.stage_ranges(s, t) for s, t in stages.items()
                     if s in IR_STAGES or s in FUNCTION_LINES}
        return {n["name"]: {s: found.get(n["name"], []) for s, found in per_stage.items()}
                for n in self.nodes}

    @classmethod
    def from_texts(cls, stages: Mapping[str, str], functions=None) -> Provenance:
        """For IR saved as text: the "onnx-ir" / "kernel-ir" texts are parsed back into modules
        (their printout must be the text itself, as compilerkit prints it)."""
        from compilerkit.ir import parse_ir

        modules = {}
        for stage in IR_STAGES:
            if stage in stages:
                modules[stage] = parse_ir(stages[stage])
        return cls(modules.get("onnx-ir"), modules.get("kernel-ir"), functions)


def of(compiled) -> Provenance:
    """The Provenance of a CompiledModel (`.provenance`, which the compile pipeline attaches);
    for a mapping stage -> text, it is rebuilt from the IR texts (with no function record:
    the function-level stages then need `functions=`)."""
    prov = getattr(compiled, "provenance", None)
    if isinstance(prov, Provenance):
        return prov
    stages = getattr(compiled, "stages", compiled)
    if not isinstance(stages, Mapping):
        raise ValueError(f"provenance needs a CompiledModel or a mapping stage -> text, got "
                         f"{type(compiled).__name__}")
    return Provenance.from_texts({s: stages[s] for s in IR_STAGES if s in stages})


def provenance(stages, functions=None) -> dict[str, dict[str, list[tuple[int, int]]]]:
    """{node: {stage: [(first, last), ...]}} for every node and every stage present
    ("onnx-ir", "kernel-ir", "llvm-ir", "asm" / "ptx").

    `stages`: a CompiledModel or a mapping stage -> text (then `functions`, codegen's
    {function: node} record, maps the function-level stages). Reading a CompiledModel's "asm"
    generates it (a second code generation)."""
    prov = of(stages)
    if functions is not None:
        prov = Provenance(prov.modules["onnx-ir"], prov.modules["kernel-ir"], functions)
    texts = getattr(stages, "stages", stages)
    return prov.ranges({s: texts[s] for s in texts if s in IR_STAGES or s in FUNCTION_LINES})


__all__ = ["Provenance", "provenance", "of", "listing", "Listing", "onnx_nodes", "onnx_ranges",
           "kernel_owners", "kernel_ranges", "function_ranges", "node_of_symbol",
           "llvm_function_lines", "asm_function_lines", "ptx_function_lines", "merge"]
