"""`python -m compilerkit.opt`: run named passes over MLIR text, as mlir-opt and xdsl-opt do.

    python -m compilerkit.opt -p shape-inference,constant-folding in.mlir
    python -m compilerkit.opt -p 'lower-to-krnl,tile-matmul{simd=4},plan-buffers' < in.mlir
    python -m compilerkit.opt --split-input-file -p lower-to-krnl cases.mlir
    python -m compilerkit.opt --list-passes

Reads ONNX IR or Kernel IR (a file, or stdin when the file is `-` or missing), verifies it,
applies the passes in order verifying the module after each, and prints the result (to stdout,
or `-o OUT`). Large constants print as `dense_resource` handles with their bytes in the
trailing `{-# dialect_resources #-}` section, so the output can be fed back in. Errors print one
line `compilerkit-opt: error: ...` and exit with status 1. With `--split-input-file` (as in
mlir-opt) the input is cut at lines `// -----` into separate modules, each run on its own; the
outputs are joined by `// -----`, and an error in one piece is printed (to stderr) without
stopping the others (the exit status is then 1).
"""

from __future__ import annotations

import argparse
import re
import sys

SPLIT = re.compile(r"^// -----.*$", re.M)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        raise ValueError(message)


def _report(e: BaseException) -> None:
    msg = str(e).strip() or type(e).__name__
    lines = [ln for ln in msg.splitlines() if ln.strip() and ln.strip() != "^"]
    print(f"compilerkit-opt: error: {' '.join(ln.strip() for ln in lines[:3])}",
          file=sys.stderr)


def main(argv=None) -> int:
    try:
        return _main(argv)
    except Exception as e:  # noqa: BLE001 (one line, never a traceback)
        _report(e)
        return 1


def _main(argv) -> int:
    from compilerkit.passes import PASSES, parse_pipeline

    p = _Parser(prog="compilerkit.opt", description=__doc__.splitlines()[0])
    p.add_argument("input", nargs="?", default="-", help="MLIR file (default: stdin)")
    p.add_argument("-p", "--passes", default="", help="comma-separated pass pipeline")
    p.add_argument("-o", dest="out", default="-", help="output file (default: stdout)")
    p.add_argument("--split-input-file", action="store_true",
                   help="run each `// -----`-separated piece of the input on its own")
    p.add_argument("--list-passes", action="store_true", help="print the pass names and exit")
    args = p.parse_args(argv)
    if args.list_passes:
        for name, cls in sorted(PASSES.items()):
            doc = (cls.__doc__ or "").strip().splitlines()[0]
            print(f"{name:18} {doc}")
        return 0
    passes = parse_pipeline(args.passes) if args.passes.strip() else []
    if args.out != "-":  # before reading: -o is never the input (frontend.arguments)
        from compilerkit.frontend.arguments import output_path

        output_path(args.out, "-o", reads=() if args.input == "-" else (args.input,))
    if args.input == "-":
        text, where = sys.stdin.read(), "<stdin>"
    else:
        with open(args.input, encoding="utf-8") as f:
            text, where = f.read(), args.input
    pieces = SPLIT.split(text) if args.split_input_file else [text]
    outs, status = [], 0
    for k, piece in enumerate(pieces):
        label = f"{where} (piece {k + 1})" if len(pieces) > 1 else where
        try:
            outs.append(_run(piece, label, passes))
        except Exception as e:  # noqa: BLE001 (reported per piece, see the docstring)
            if len(pieces) == 1:
                raise
            _report(e)
            status = 1
    out = "// -----\n".join(outs)
    if args.out == "-":
        sys.stdout.write(out)
    else:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(out)
    return status


def _run(text: str, where: str, passes) -> str:
    from compilerkit.ir import parse_ir, print_ir
    from compilerkit.passes import run_passes
    from compilerkit.stages import verify_ir

    try:
        module = parse_ir(text)
    except Exception as e:  # noqa: BLE001 (xDSL's parse errors carry the location)
        raise ValueError(f"{where}: {str(e).replace('<unknown>', where)}") from None
    verify_ir(module, f"parsing {where}")
    run_passes(module, passes)
    return print_ir(module, with_resources=True)


if __name__ == "__main__":
    sys.exit(main())
