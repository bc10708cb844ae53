"""`CompiledModel.stages`: an ordered, read-only mapping from stage name to its text, where a
stage may be computed on first access.

The assembly listing needs a second run of LLVM's code generator over the whole module (the
JIT already ran one to produce machine code), which costs about as much as the JIT itself;
printing a large model's IR takes seconds (ResNet-50's optimised LLVM IR, weights spelled out
byte by byte, is 300 MB: as long as the rest of its compile); most callers never read them, so
these stages are produced when first looked up and then kept (codegen/llvm_codegen.py's
LaterStages makes the LLVM IR and machine code of a JIT compile).
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.utils.exceptions import DiagnosticException

from compilerkit.frontend.checks import ModelError


def verify_ir(module, stage: str) -> None:
    """Run xDSL's verifier (every op's and dialect's verify_, regions included) on `module`
    after `stage`; a failure is a compilerkit bug unless the IR was written by hand, and is
    reported as a ModelError naming the stage rather than compiled into wrong code."""
    try:
        module.verify()
    except DiagnosticException as e:
        raise ModelError(f"the IR after {stage} does not verify: {e}") from None


class Stages(Mapping):
    def __init__(self):
        self._items = {}

    def set(self, name: str, text_or_thunk):
        """A stage: its text, or a zero-argument callable producing it on first access."""
        self._items[name] = text_or_thunk

    def __getitem__(self, name: str) -> str:
        if name not in self._items:
            # A KeyError still (Mapping's contract: `in`, .get), but one that names the stages.
            raise KeyError(f"no stage {name!r}; this compile has {', '.join(self._items)}")
        value = self._items[name]
        if callable(value):
            value = self._items[name] = value()
        return value

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def computed(self, name: str) -> bool:
        return name in self._items and not callable(self._items[name])

    def __repr__(self):
        shown = {k: (f"<{len(v)} chars>" if not callable(v) else "<on first access>")
                 for k, v in self._items.items()}
        return f"Stages({shown})"
