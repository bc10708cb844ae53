"""Dead code removal on ONNX IR: ops none of whose results are used are erased (walking
backwards, so a whole unused chain goes in one sweep). ONNX ops have no side effects."""

from compilerkit.onnx_passes.single_node import main_func


def remove_dead_code(module) -> int:
    f = main_func(module)
    removed = 0
    for op in reversed(list(f.body.block.ops)):
        if op is f.body.block.last_op:
            continue
        if all(not r.uses for r in op.results):
            f.body.block.erase_op(op)
            removed += 1
    return removed
