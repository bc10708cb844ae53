"""`codegen="loopnest"`: a second code generator beside LLVM, after LoopStack's LoopNest
(Zlateski et al.): x86-64 AVX2 + FMA machine code written straight from Kernel IR nests,
encoded by iced-x86, loaded into executable memory; compiles in milliseconds per nest.

    cm = compilerkit.compile_to("native", "model.onnx", codegen="loopnest")
    cm.loopnest.functions      # per node: "loopnest" or "llvm" (and why), seconds, bytes
    cm.stages["asm"]           # the code it wrote (disassembled), per node with provenance

Modules, one concern each: asm (iced-x86 assembler, listing), execmem (executable pages),
affine (index arithmetic as affine functions; Unsupported), frame (calling convention, loop
slots, buffer addresses), leaf (vectorised innermost nests), matmul (tile loops + 6x16
micro-kernel), nest (one node's function), fallback (LLVM for the rest), driver (the model;
`finish` hands the pipeline its stage products, codegen/interface.py).
"""

from compilerkit.loopnest.affine import Unsupported
from compilerkit.loopnest.driver import Generated, LoopnestReport, fallback_llvm_ir, finish

__all__ = ["Generated", "LoopnestReport", "Unsupported", "fallback_llvm_ir", "finish"]
