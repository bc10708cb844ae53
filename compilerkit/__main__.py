"""The compilerkit command line (onnx-mlir's --Emit* flags, plus the Kernel IR level):

    python -m compilerkit MODEL.onnx --emit onnx-ir|kernel-ir|llvm-ir|asm|obj|lib -O3 -o OUT

`--emit lib` writes a shared library and a C header beside it (OUT.h). A `.mlir` input at
ONNX IR or Kernel IR level is accepted too (the stage is taken from its ops)."""

from __future__ import annotations

import argparse
import os
import sys

STAGES = ["onnx-ir", "kernel-ir", "llvm-ir", "asm", "obj", "lib"]


def main(argv=None) -> int:
    import compilerkit as ck
    from compilerkit.backends.host import c_header, write_shared_library

    p = argparse.ArgumentParser(prog="compilerkit", description=__doc__.splitlines()[0])
    p.add_argument("model", help="an .onnx file (or .mlir at ONNX IR / Kernel IR level)")
    p.add_argument("--emit", choices=STAGES, default="kernel-ir")
    p.add_argument("-O", dest="opt", type=int, choices=[0, 1, 2, 3], default=3)
    p.add_argument("--target", default="host")
    p.add_argument("--input-shape", action="append", default=[],
                   help="NAME=D0,D1,... fixes a dynamic input shape (repeatable)")
    p.add_argument("-o", dest="out", default="-", help="output file (default: stdout)")
    args = p.parse_args(argv)
    shapes = {}
    for spec in args.input_shape:
        name, _, dims = spec.partition("=")
        shapes[name] = [int(d) for d in dims.split(",")]
    try:
        backend = ck.get_backend(args.target)
        if args.model.endswith(".mlir"):
            module = ck.parse_ir(open(args.model).read())
            is_krnl = "krnl." in ck.print_ir(module)
        else:
            module = ck.import_onnx(args.model, shapes or None)
            ck.optimize_onnx(module)
            is_krnl = False
        if args.emit == "onnx-ir":
            return _write(args.out, ck.print_ir(module))
        if is_krnl:
            kmodule = module
            from compilerkit.krnl_passes import plan_buffers
            from compilerkit.onnx_passes.single_node import main_func
            if "arena_bytes" not in main_func(kmodule).attributes:
                plan_buffers(kmodule)
        else:
            kmodule = ck.lower(module, args.opt, backend.target)
        if args.emit == "kernel-ir":
            return _write(args.out, ck.print_ir(kmodule))
        text, mod = backend.optimize(ck.to_llvm(kmodule, backend.target), args.opt)
        if args.emit == "llvm-ir":
            return _write(args.out, text)
        if args.emit == "asm":
            return _write(args.out, backend.assembly(mod, args.opt))
        if args.emit == "lib" and backend.target.name != "host":
            raise SystemExit(f"--emit lib links with the host's C compiler; for --target "
                             f"{args.target} use --emit obj")
        obj = backend.object_code(mod, args.opt)
        if args.out == "-":
            raise SystemExit("--emit obj/lib needs -o OUT")
        if args.emit == "obj":
            with open(args.out, "wb") as f:
                f.write(obj)
            return 0
        write_shared_library(obj, args.out)
        from compilerkit import _signature
        from compilerkit.onnx_passes.single_node import main_func
        f = main_func(kmodule)
        ins, outs = _signature(f, f.attributes["num_inputs"].value.data)
        header = os.path.splitext(args.out)[0] + ".h"
        with open(header, "w") as fh:
            fh.write(c_header([(n, s, d.name) for n, s, d in ins],
                              [(n, s, d.name) for n, s, d in outs]))
        return 0
    except (ck.ModelError, ck.UnsupportedOpError) as e:
        print(f"compilerkit: error: {e}", file=sys.stderr)
        return 1


def _write(path, text) -> int:
    if path == "-":
        sys.stdout.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
