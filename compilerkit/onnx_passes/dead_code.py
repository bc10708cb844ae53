"""Dead code removal on ONNX IR with xDSL's own dead code elimination: every onnx op is `Pure`
(ONNX operators have no side effects), so an op none of whose results is used goes, and a whole
unused chain goes in one call. Functions (symbols) and their terminators stay."""

from dataclasses import dataclass

from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import region_dce


def remove_dead_code(module) -> int:
    """Erase the ops nobody uses; returns how many went."""
    before = sum(1 for _ in module.walk())
    region_dce(module.body)
    return before - sum(1 for _ in module.walk())


@dataclass(frozen=True)
class DeadCodePass(ModulePass):
    """`dead-code`: erase ops whose results nobody uses."""

    name = "dead-code"

    def apply(self, ctx, op) -> None:
        remove_dead_code(op)
