"""Run a compilerkit command once per case of a FileCheck file, in one Python process, as
mlir-opt's `--split-input-file` does:

    // RUN: python %S/split_cases.py compilerkit %s --emit llvm-ir -O0 | filecheck %s

`python -m compilerkit` (the stage driver) has no `--split-input-file` of its own, unlike
`python -m compilerkit.opt`; this is its counterpart for the codegen tests, which need one
module per case (code generation works on a module's main function). The file (the argument
ending in `.mlir`) is cut at lines `// -----`; each piece is written to a temporary file,
padded with blank lines so messages keep the original line numbers, and `MODULE`'s `main(argv)`
runs on it. Each piece's output follows a line `// case @NAME` naming the piece's first
func.func (LLVM IR names the entry point `main_graph` whatever the function is called, so this
is what a `CHECK-LABEL` can anchor on); pieces are separated by `// -----`. Starting Python
(and xDSL, onnx, llvmlite) once per file keeps the suite fast. A failing piece prints its error
(stderr, in order with the outputs) and the others still run; the exit status is then 1.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import tempfile

SEPARATOR = "// -----"
FUNC = re.compile(r"func\.func\s+(?:private\s+)?@([\w$.]+)")


def pieces(text: str) -> list[str]:
    out, lines_before, current = [], 0, []
    for line in text.splitlines(keepends=True):
        if line.strip() == SEPARATOR:
            out.append("\n" * lines_before + "".join(current))
            lines_before += len(current) + 1
            current = []
        else:
            current.append(line)
    out.append("\n" * lines_before + "".join(current))
    return out


def main(argv: list[str]) -> int:
    module_name, args = argv[0], argv[1:]
    inputs = [k for k, a in enumerate(args) if a.endswith(".mlir")]
    if len(inputs) != 1:
        print(f"split_cases.py: expected one .mlir input among {args}", file=sys.stderr)
        return 2
    where = inputs[0]
    module = importlib.import_module(module_name)
    entry = getattr(module, "main", None)
    if entry is None:  # a package: its command line lives in __main__
        entry = importlib.import_module(module_name + ".__main__").main
    with open(args[where], encoding="utf-8") as f:
        text = f.read()
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        for k, piece in enumerate(pieces(text)):
            if k:
                sys.stdout.write(SEPARATOR + "\n")
            case = os.path.join(tmp, f"case{k + 1}.mlir")
            with open(case, "w", encoding="utf-8") as f:
                f.write(piece)
            name = FUNC.search(piece)
            sys.stdout.write(f"// case @{name.group(1) if name else k + 1}\n")
            sys.stdout.flush()
            status |= int(entry([*args[:where], case, *args[where + 1:]]) != 0)
            sys.stdout.flush()
            sys.stderr.flush()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
