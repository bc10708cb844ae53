"""The compilerkit command line (onnx-mlir's --Emit* flags, plus the Kernel IR level):

    python -m compilerkit MODEL.onnx --emit onnx-ir|kernel-ir|llvm-ir|asm|obj|lib -O3 -o OUT

Every stage comes from the stage driver (compilerkit/pipeline.py), the same calls as
`compilerkit.compile`. `--target gpu --emit asm` (or `--emit ptx`) prints PTX; `--emit lib`
writes a shared library and a C header beside it (OUT without its extension, plus
`.h`), which must not exist yet unless `--overwrite` is given (the user named only the
library); `-o` may never be the model itself. A `.mlir` input at ONNX IR or Kernel IR level is
accepted too (the stage is taken from its ops). Every error, the command line's own included,
prints one line `compilerkit: error: ...` to stderr and exits with status 1 (no traceback)."""

from __future__ import annotations

import argparse
import os
import sys

STAGES = ["onnx-ir", "kernel-ir", "llvm-ir", "asm", "ptx", "obj", "lib"]


class CliError(Exception):
    """A usage or input error the command line reports as `compilerkit: error: ...`."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse exits with 2; every compilerkit error exits with 1
        self.print_usage(sys.stderr)
        raise CliError(message)


def _input_shapes(specs) -> dict:
    shapes = {}
    for spec in specs:
        name, eq, dims = spec.partition("=")
        try:
            parsed = [int(d) for d in dims.split(",")] if eq and dims.strip() else None
        except ValueError:
            parsed = None
        if not name or parsed is None or any(d < 0 for d in parsed):
            raise CliError(f"--input-shape {spec!r}: expected NAME=D0,D1,... with non-negative "
                           "integer dimensions, e.g. --input-shape input=1,3,224,224")
        shapes[name] = parsed
    return shapes


def _check_output(args) -> None:
    """Before any compiling, by the rule every compilerkit output follows
    (frontend.arguments.output_path): the output's folder exists, `-o` is not the model, and
    `--emit lib` would write its header neither over the library nor over an existing file."""
    from compilerkit.frontend.arguments import OptionError, library_paths, output_path

    if args.out == "-":
        if args.emit in ("obj", "lib"):
            raise CliError(f"--emit {args.emit} needs -o OUT (binary output is not written to "
                           "stdout)")
        return
    try:
        if args.emit == "lib":
            library_paths(args.out, reads=(args.model,), overwrite=args.overwrite)
        else:
            output_path(args.out, "-o", reads=(args.model,))
    except OptionError as e:
        raise CliError(str(e).replace("out ", "-o ", 1).replace("out=..., -o", "-o")) from None


def main(argv=None) -> int:
    try:
        return _main(argv)
    except CliError as e:
        print(f"compilerkit: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("compilerkit: error: interrupted", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 (one line, never a traceback)
        print(f"compilerkit: error: {_describe(e)}", file=sys.stderr)
        return 1


def _describe(e: BaseException) -> str:
    import subprocess

    import compilerkit as ck

    if isinstance(e, (ck.ModelError, ck.UnsupportedOpError, ck.InputError, ck.RunError,
                      ck.OptionError)):
        return str(e)
    if isinstance(e, FileNotFoundError):
        return f"{e.filename!r}: no such file"
    if isinstance(e, OSError):
        return f"{e.filename!r}: {e.strerror}" if e.filename else str(e)
    if isinstance(e, subprocess.CalledProcessError):
        err = (e.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        return f"{e.cmd[0]} failed with status {e.returncode}" + (f": {err[-1]}" if err else "")
    return f"{type(e).__name__}: {e}"


def _main(argv) -> int:
    from compilerkit.ir import print_ir
    from compilerkit.pipeline import Compilation

    p = _Parser(prog="compilerkit", description=__doc__.splitlines()[0])
    p.add_argument("model", help="an .onnx file (or .mlir at ONNX IR / Kernel IR level)")
    p.add_argument("--emit", choices=STAGES, default="kernel-ir",
                   help="the stage to write ('asm' is PTX on the GPU; 'ptx' says the same)")
    p.add_argument("-O", dest="opt", type=int, choices=[0, 1, 2, 3], default=3)
    p.add_argument("--target", default="host")
    p.add_argument("--input-shape", action="append", default=[],
                   help="NAME=D0,D1,... fixes a dynamic input shape (repeatable)")
    p.add_argument("--codegen", choices=["llvm", "loopnest"], default="llvm",
                   help="machine code from LLVM, or straight from the Kernel IR nests "
                        "(loopnest: host x86-64 only, native/asm/llvm-ir stages)")
    p.add_argument("-o", dest="out", default="-",
                   help="output file (default: stdout); an IR file keeps its weights' bytes")
    p.add_argument("--overwrite", action="store_true",
                   help="--emit lib: replace an existing C header beside the library")
    args = p.parse_args(argv)
    shapes = _input_shapes(args.input_shape)
    _check_output(args)
    try:
        compilation = Compilation(args.target, args.opt, input_shapes=shapes or None,
                                  codegen=args.codegen)
    except ValueError as e:
        raise CliError(f"--target: {e}") from None
    try:
        compilation.stage_name(args.emit)
    except ValueError as e:
        raise CliError(f"--emit {args.emit}: {e}") from None
    if "\0" in args.model or not os.path.isfile(args.model):
        raise CliError(f"{args.model!r}: no such model file")
    if args.emit == "lib":
        compilation.options.overwrite = args.overwrite
        compilation.run(args.model, "lib", out=args.out)
        return 0
    result = compilation.run(args.model, args.emit)
    if args.emit in ("onnx-ir", "kernel-ir"):
        # On screen, the module's text as `compile` shows it; in a file, with its weights'
        # bytes ({-# dialect_resources #-}), so `python -m compilerkit.opt` can read it back.
        result = (compilation.stages[args.emit] if args.out == "-"
                  else print_ir(result, with_resources=True))
    if args.emit == "obj":
        with open(args.out, "wb") as f:
            f.write(result)
        return 0
    return _write(args.out, result)


def _write(path, text) -> int:
    if path == "-":
        sys.stdout.write(text)
    else:
        with open(path, "w", encoding="utf-8") as f:  # tensor names may be any Unicode
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
