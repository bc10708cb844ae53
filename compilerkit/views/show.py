"""Excerpts of the stage texts for reading (the notebook's magnifying glass): one LLVM IR
function, one function of the assembly listing, the outlined per-op functions' names.

Codegen emits the loop nests of each ONNX node as one function `main_graph_<n>_<node>` and the
shared matmul micro-kernel as `ck_matmul_<type>_v<lanes>`, so a whole model's text can be read
one function at a time.
"""

from __future__ import annotations

import re


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
