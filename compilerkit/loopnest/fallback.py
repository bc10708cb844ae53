"""The nests loopnest does not handle, compiled by LLVM: compilerkit's own LLVM emitter
(codegen/emit.py) writes each such ONNX node as an external function

    int64_t ck_ln_fallback_<k>(void **buffers, int64_t num_threads)

with the same pointer array as every loopnest function (and the thread count of the LLVM
path's parallel loops), so the machine-code entry point calls
both kinds alike. Inside, the node is outlined exactly as on the LLVM path (`Emitter.outline`:
one noinline function per node, its buffers noalias parameters, its run-time checks reported
through the returned status). Constants are not copied into the LLVM module: they are the
addresses of the arrays the compiled model keeps (inttoptr constants), so only the fallback
nodes cost LLVM time, never the weights.
"""

from __future__ import annotations

import llvmlite.ir as ir

from compilerkit.codegen.emit import I8P, I64, Emitter, defined_inside, mem_type
from compilerkit.dialects import krnl
from compilerkit.loopnest.nest import note_handles
from compilerkit.onnx_passes.single_node import main_func

PREFIX = "ck_ln_fallback_"


class FallbackEmitter(Emitter):
    """Emits only the given groups of top-level nests, each as `PREFIX<k>(void **)`."""

    def __init__(self, kmodule, target, buffers):
        super().__init__(kmodule, target)
        self.buffers = buffers

    def emit_groups(self, groups) -> list[str]:
        f = main_func(self.kmodule)
        self.b = ir.IRBuilder()  # the ops below build no instructions
        for op in f.body.block.ops:
            # Loop handles and index constants defined at the top level.
            if note_handles(op, {}) or op.name == "arith.constant":
                self.op(op)
        names = []
        for k, nests in enumerate(groups):
            name = f"{PREFIX}{k}"
            fn = ir.Function(self.module, ir.FunctionType(I64, [I8P.as_pointer(), I64]), name)
            self.fn = fn
            self.num_threads = fn.args[1]
            self.b = ir.IRBuilder(fn.append_basic_block("entry"))
            self.alloca_block = self.b.block
            self.status = self.new_status()
            bufs = fn.args[0]
            for v in _free_memrefs(nests):
                self.values[v] = self._pointer(v, bufs)
            self.outline(nests)
            self.b.ret(self.b.load(self.status))
            names.append(name)
        self.message_function()
        self.list_helpers()
        return names

    def _pointer(self, v, bufs):
        b = self.b
        elem = mem_type(v.type.element_type).as_pointer()
        root = self.buffers.root(v)
        if root in self.buffers.index:
            raw = b.load(b.gep(bufs, [ir.Constant(I64, self.buffers.index[root])]))
        elif root in self.buffers.offsets:
            arena = b.load(b.gep(bufs, [ir.Constant(I64, self.buffers.n_args)]))
            raw = b.gep(arena, [ir.Constant(I64, self.buffers.offsets[root])])
        else:
            return ir.Constant(I64, self.buffers.globals[root]).inttoptr(elem)
        return b.bitcast(raw, elem)


def _free_memrefs(nests):
    inside = defined_inside(nests)
    out = []
    for op in nests:
        for x in op.walk():
            for v in x.operands:
                if v not in inside and hasattr(v.type, "get_shape") and v not in out \
                        and not isinstance(v.type, krnl.LoopType):
                    out.append(v)
    return out
