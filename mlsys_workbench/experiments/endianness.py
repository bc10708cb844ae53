"""The byte-order demo (notebook 12, onnx-mlir issue 2851): a model compiled with its constants
in the host's byte order on purpose, and the ELF object a compiled model runs from, to look for
a constant's bytes in it.

Demo code, so it lives with the experiments rather than in compilerkit's pipeline; the buggy
codegen itself is `compilerkit.backends.emulated.HostBytesEmitter` (the stage driver's
`emitter` option), and the ELF readers (`hexdump`, `locate`, `section_bytes`) are in
compilerkit/backends/emulated.py.
"""

from __future__ import annotations

from compilerkit.backends.emulated import HostBytesEmitter
from compilerkit.pipeline import compile_to


def compile_with_host_bytes(model, target: str = "s390x", opt_level: int = 3,
                            input_shapes=None):
    """`compilerkit.compile` with the buggy constant emission of HostBytesEmitter (the stage
    driver's `emitter` option): for teaching only (results on a big-endian target are wrong)."""
    return compile_to("native", model, target, opt_level, input_shapes,
                      emitter=HostBytesEmitter)


def object_bytes(compiled) -> bytes:
    """The ELF object a compiled model runs from (emulated targets) or would link (host). A
    host model compiled for the JIT maps its large weights from Python memory instead of
    holding them (backends/base.py), so its object is emitted again from its Kernel IR with
    the weights inside."""
    session = compiled.session
    if hasattr(session, "obj"):
        return session.obj
    mod = compiled.llvm_module
    if any(g.is_declaration for g in mod.global_variables):
        kernel = compiled.provenance.modules["kernel-ir"]
        return compile_to("obj", kernel, compiled.backend.target, compiled.opt_level)
    return compiled.backend.object_code(mod, compiled.opt_level)
