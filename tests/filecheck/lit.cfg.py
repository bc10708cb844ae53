# ruff: noqa: F821  (lit runs this file with `config` already defined)
# lit configuration for compilerkit's FileCheck tests (xDSL Toy style: IR in, IR out, one
# CHECK-LABEL per case, several cases per file split at `// -----`). One file per pass or stage:
#   onnx_<pass>.mlir, krnl_<pass>.mlir   `python -m compilerkit.opt --split-input-file -p PASS`
#   lower_<family>.mlir                  lowering families (lower-to-krnl)
#   codegen_<target>.mlir                `python -m compilerkit --emit llvm-ir|obj` per target,
#                                        one case per module through split_cases.py
#   stage_*.mlir, opt_*.mlir             the stage driver's pipelines; the opt driver itself
import os
import sys

import lit.formats

config.name = "compilerkit"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
repo = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
config.environment["PYTHONPATH"] = repo
config.substitutions.append(("python", sys.executable))
config.substitutions.append(("filecheck", os.path.join(os.path.dirname(sys.executable),
                                                       "filecheck")))
