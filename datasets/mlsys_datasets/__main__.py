"""Command line for the model zoo: ``python -m mlsys_datasets {build,check,list}``.

* ``build [--out DIR]`` regenerates every ONNX file and manifest.json (default: the package's
  ``onnx/`` directory, i.e. the committed artifacts).
* ``check`` rebuilds into a temporary directory and exits 1, naming each file that differs from
  the committed one.
* ``list`` prints the committed models with size, source and input/output shapes.

Assumes the package is importable (it is installed editable in the workbench's virtualenv).
"""

from __future__ import annotations

import argparse
import sys

from . import zoo


def _shape(io: dict) -> str:
    return f"{io['name']}[{','.join(str(d) for d in io['shape'])}]"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlsys_datasets",
                                     description="Build, verify and list the ONNX model zoo.")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="regenerate the ONNX files and manifest.json")
    b.add_argument("--out", default=None, help="output directory (default: the package's onnx/)")
    b.add_argument("names", nargs="*", help="only these models (default: all)")
    sub.add_parser("check", help="rebuild in a temp dir and compare with the committed files")
    sub.add_parser("list", help="list the committed models")
    args = parser.parse_args(argv)

    if args.command == "build":
        try:
            zoo.build(args.out, names=args.names or None)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    if args.command == "check":
        problems = zoo.check()
        if problems:
            print(f"check FAILED: {', '.join(problems)} differ from the committed files in "
                  f"{zoo.ONNX_DIR} (regenerate with `python -m mlsys_datasets build`)",
                  file=sys.stderr)
            return 1
        print(f"check passed: {len(zoo.ALL_MODELS)} models and manifest.json rebuild "
              f"byte-identically")
        return 0
    entries = zoo.manifest()["models"]
    for name in zoo.ALL_MODELS:
        e = entries.get(f"{name}.onnx")
        if e is None:
            print(f"{name:24s} (missing from manifest)")
            continue
        ins = ", ".join(_shape(i) for i in e["inputs"])
        outs = ", ".join(_shape(o) for o in e["outputs"])
        print(f"{name:24s} {e['size']:>9,d} B  {e['source']:12s} {ins} -> {outs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
