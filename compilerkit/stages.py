"""The IR verifier the stage driver runs between stages (`verify_ir`, and how much of the IR
it verifies: `verify_level`), and `CompiledModel.stages`: an ordered, read-only mapping from
stage name to its text, where a stage may be computed on first access.

The assembly listing needs a second run of LLVM's code generator over the whole module (the
JIT already ran one to produce machine code), which costs about as much as the JIT itself;
printing a large model's IR takes seconds (ResNet-50's optimised LLVM IR, weights spelled out
byte by byte, is 300 MB: as long as the rest of its compile); most callers never read them, so
these stages are produced when first looked up and then kept (codegen/llvm_codegen.py's
LaterStages makes the LLVM IR and machine code of a JIT compile).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from xdsl.utils.exceptions import DiagnosticException

from compilerkit.frontend.arguments import OptionError, check_choice
from compilerkit.frontend.checks import ModelError

# How much IR a compile verifies (the option `verify`; pipeline.py's docstring says which IR):
# "input" (the default) what comes from outside compilerkit's own passes, "all" the IR after
# every stage's passes too. CK_VERIFY_ENV, when set, is the default (the test suite sets "all").
VERIFY_LEVELS = ("input", "all")
CK_VERIFY_ENV = "CK_VERIFY"


def verify_ir(module, stage: str) -> None:
    """Run xDSL's verifier (every op's and dialect's verify_, regions included) on `module`
    after `stage`; a failure is a compilerkit bug unless the IR was written by hand, and is
    reported as a ModelError naming the stage rather than compiled into wrong code."""
    try:
        module.verify()
    except DiagnosticException as e:
        raise ModelError(f"the IR after {stage} does not verify: {e}") from None


def verify_level(value: str | None) -> str:
    """The verify level `value` (one of VERIFY_LEVELS), or for None the environment's
    (CK_VERIFY), else "input"; an OptionError names a wrong one."""
    if value is not None:
        return check_choice("verify", value, VERIFY_LEVELS)
    env = os.environ.get(CK_VERIFY_ENV)
    if not env:
        return "input"
    if env not in VERIFY_LEVELS:
        raise OptionError(f"{CK_VERIFY_ENV} must be one of {', '.join(VERIFY_LEVELS)}, got "
                          f"{env!r}")
    return env


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
