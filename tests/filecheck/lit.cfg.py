# ruff: noqa: F821  (lit runs this file with `config` already defined)
# lit configuration for compilerkit's per-stage IR snapshot tests (xDSL Toy style):
# each test file carries RUN lines piping `python -m compilerkit` into filecheck.
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
